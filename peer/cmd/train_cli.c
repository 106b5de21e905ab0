/* Parsing of the shared training options. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/cmd/cli.h"
#include "peer/cmd/train_cli.h"

int train_opts_parse(train_opts *o, const char *cmd, int c, const char *arg)
{
    switch (c) {
    case OPT_MODEL:
        o->model = arg;
        o->model_given = 1;
        return 0;
    case OPT_INIT:
        o->init = arg;
        return 0;
    case OPT_SAVE_MODEL:
        o->save_model = arg;
        return 0;
    case OPT_MODEL_FORMAT:
        if (modelfile_kind_parse(arg, &o->model_format) < 0)
            return cli_usage(cmd, "--model-format expects safetensors or raw, got '%s'", arg);
        return 0;
    case OPT_DATA:
        o->data = arg;
        return 0;
    case OPT_CONTEXT:
        return cli_long(cmd, "--context", arg, 1, 1 << 16, &o->context);
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
    return CLI_NOT_MINE;
}

/* --init's file names the model when --model does not, and must agree when it does. */
static int init_check(train_opts *o, const char *cmd)
{
    modelfile_arch a;
    char err[700], given[NN_SPEC_MAX_EXPANDED], recorded[NN_SPEC_MAX_EXPANDED];
    if (modelfile_arch_read(o->init, &a, err, sizeof err) < 0) {
        fprintf(stderr, "%s: --init %s\n", cmd, err);
        return 1;
    }
    if (!o->context && a.c == 1 && a.h == 1 && a.w > 0)
        o->context = a.w; /* a language model's windows are its positions (and --context only means text) */
    if (!o->model_given) {
        if (!a.spec[0])
            return cli_usage(cmd, "--init %s records no model spec: give --model", o->init);
        snprintf(o->init_spec, sizeof o->init_spec, "%s", a.spec);
        o->model = o->init_spec;
    } else if (a.spec[0] && (nn_spec_expand(o->model, given, sizeof given, err, sizeof err) < 0 ||
                             nn_spec_expand(a.spec, recorded, sizeof recorded, err, sizeof err) < 0 ||
                             strcmp(given, recorded)))
        return cli_usage(cmd, "--init %s holds a model of '%s', --model says '%s'", o->init, a.spec, o->model);
    return 0;
}

int train_opts_check(train_opts *o, const char *cmd)
{
    int rc = o->init ? init_check(o, cmd) : 0;
    if (rc)
        return rc;
    if (train_opts_finish(o) < 0)
        return cli_usage(cmd, "--warmup (%g epochs) is longer than the run (%ld epochs)", o->warmup_epochs, o->epochs);
    return 0;
}

int train_cli_save_model(const train_opts *o, const nn_model *m, const float *params, const char *summary,
                         const char *cmd)
{
    char err[700];
    if (modelfile_write(o->model_format, o->save_model, m, params, o->data, summary, err, sizeof err) < 0) {
        fprintf(stderr, "%s: cannot save the model: %s\n", cmd, err);
        return 1;
    }
    return 0;
}
