/* Parsing of the shared training options. */
#include <stdlib.h>
#include <string.h>

#include "peer/cmd/cli.h"
#include "peer/cmd/train_cli.h"

int train_opts_parse(train_opts *o, const char *cmd, int c, const char *arg)
{
    switch (c) {
    case OPT_MODEL:
        o->model = arg;
        return 0;
    case OPT_DATA:
        o->data = arg;
        return 0;
    case OPT_EPOCHS:
        return cli_long(cmd, "--epochs", arg, 1, 1000000, &o->epochs);
    case OPT_BATCH:
        return cli_long(cmd, "--batch", arg, 1, 1 << 16, &o->batch);
    case OPT_LR:
        o->lr_given = 1;
        return cli_double(cmd, "--lr", arg, 0, 1e3, &o->lr);
    case OPT_MOMENTUM:
        return cli_double(cmd, "--momentum", arg, 0, 0.999999, &o->momentum);
    case OPT_NESTEROV:
        o->nesterov = 1;
        return 0;
    case OPT_NO_NESTEROV:
        o->nesterov = 0;
        return 0;
    case OPT_WEIGHT_DECAY:
        o->weight_decay_given = 1;
        return cli_double(cmd, "--weight-decay", arg, 0, 1, &o->weight_decay);
    case OPT_WARMUP:
        return cli_double(cmd, "--warmup", arg, 0, 1e6, &o->warmup_epochs);
    case OPT_LR_DECAY:
        if (nn_lr_decay_parse(&o->schedule, arg) < 0)
            return cli_usage(cmd, "--lr-decay expects constant, cosine or step:EPOCHS:GAMMA (0 < GAMMA <= 1), got '%s'",
                             arg);
        return 0;
    case OPT_OPTIMIZER:
        if (nn_opt_kind_parse(arg, &o->optimizer) < 0)
            return cli_usage(cmd, "--optimizer expects sgd or adamw, got '%s'", arg);
        return 0;
    case OPT_ADAM_BETAS: {
        char *end;
        o->beta1 = strtod(arg, &end);
        if (*end == ',')
            o->beta2 = strtod(end + 1, &end);
        if (*end || !strchr(arg, ',') || !(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1))
            return cli_usage(cmd, "--adam-betas expects B1,B2 with each in [0, 1), got '%s'", arg);
        return 0;
    }
    case OPT_ADAM_EPS:
        return cli_double(cmd, "--adam-eps", arg, 1e-30, 1, &o->eps);
    case OPT_CLIP:
        return cli_double(cmd, "--clip", arg, 0, 1e9, &o->clip);
    case OPT_SEED:
        return cli_u64(cmd, "--seed", arg, &o->seed);
    case OPT_THREADS:
        return cli_long(cmd, "--threads", arg, 1, 256, &o->threads);
    case OPT_SUMMARY:
        o->summary = arg;
        return 0;
    case OPT_PROGRESS:
        o->progress = 1;
        return 0;
    case OPT_NO_PROGRESS:
        o->progress = 0;
        return 0;
    }
    return 1;
}

int train_opts_check(train_opts *o, const char *cmd)
{
    if (train_opts_finish(o) < 0)
        return cli_usage(cmd, "--warmup (%g epochs) is longer than the run (%ld epochs)", o->warmup_epochs, o->epochs);
    return 0;
}
