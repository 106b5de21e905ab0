/* The training settings' defaults and their completion. */
#include <errno.h>
#include <string.h>

#include "peer/core/train_opts.h"

void train_opts_defaults(train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->model = "mlp:256";
    o->epochs = 10;
    o->batch = 64;
    o->lr = 0.1;
    o->warmup_epochs = 1;
    o->momentum = 0.9;
    o->nesterov = 1;
    o->weight_decay = 5e-4;
    o->schedule.decay = NN_LR_COSINE;
    o->seed = 1;
    o->threads = 1;
    o->progress = -1;
}

int train_opts_finish(train_opts *o)
{
    if (o->nesterov && o->momentum == 0)
        o->nesterov = 0; /* Nesterov without momentum is plain SGD: not worth an error */
    if (o->warmup_epochs > (double)o->epochs)
        return -EINVAL;
    o->schedule.base = (float)o->lr;
    o->schedule.warmup_epochs = o->warmup_epochs;
    o->schedule.total_epochs = (double)o->epochs;
    return 0;
}
