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
    o->optimizer = NN_OPT_SGD;
    o->lr = 0.1;
    o->warmup_epochs = 1;
    o->momentum = 0.9;
    o->nesterov = 1;
    o->weight_decay = 5e-4;
    o->beta1 = 0.9, o->beta2 = 0.999, o->eps = 1e-8;
    o->schedule.decay = NN_LR_COSINE;
    o->seed = 1;
    o->threads = 1;
    o->progress = -1;
}

int train_opts_finish(train_opts *o)
{
    const int adamw = o->optimizer == NN_OPT_ADAMW;
    if (adamw && !o->lr_given)
        o->lr = 1e-3;
    if (adamw && !o->weight_decay_given)
        o->weight_decay = 0.01;
    if (o->nesterov && o->momentum == 0)
        o->nesterov = 0; /* Nesterov without momentum is plain SGD: not worth an error */
    if (o->warmup_epochs > (double)o->epochs)
        return -EINVAL;
    o->schedule.base = (float)o->lr;
    o->schedule.warmup_epochs = o->warmup_epochs;
    o->schedule.total_epochs = (double)o->epochs;
    return 0;
}

nn_optimizer_config train_opts_optimizer(const train_opts *o)
{
    return (nn_optimizer_config){.kind = o->optimizer, .momentum = (float)o->momentum,
                                 .weight_decay = (float)o->weight_decay, .nesterov = o->nesterov,
                                 .beta1 = (float)o->beta1, .beta2 = (float)o->beta2, .eps = (float)o->eps};
}

int train_opts_model(const train_opts *o, const nn_dataset *train, int max_batch, nn_model *m, char *err,
                     size_t errlen)
{
    int rc = nn_model_init(m, o->model, train->c, train->h, train->w, train->n_classes, max_batch, o->seed, err,
                           errlen);
    if (rc == 0 && o->init && (rc = modelfile_init_params(o->init, m, err, errlen)) < 0)
        nn_model_free(m);
    return rc;
}
