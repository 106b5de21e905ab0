/* The training settings of a run: model, data, optimizer, schedule, seed,
 * threads (their command-line options: peer/cmd/train_cli.h).
 *
 *   train_opts o;
 *   train_opts_defaults(&o);
 *   o.epochs = 4, o.lr = 0.05, o.lr_given = 1;
 *   if (train_opts_finish(&o) < 0) ...   // warm-up longer than the run
 */
#ifndef PEER_CORE_TRAIN_OPTS_H
#define PEER_CORE_TRAIN_OPTS_H

#include <stdint.h>

#include "nn/nn_data.h"
#include "nn/nn_model.h"
#include "nn/nn_optim.h"
#include "peer/store/modelfile.h"

typedef struct train_opts {
    const char *model; /* nn_model spec */
    const char *data;  /* nn_data_load spec; NULL = embedded */
    long context;      /* tokens a text sample sees (0: NN_TEXT_CONTEXT) */
    long epochs;
    long batch;
    nn_opt_kind optimizer;
    double lr, momentum, weight_decay, warmup_epochs;
    int lr_given, weight_decay_given; /* else train_opts_finish takes AdamW's defaults for AdamW */
    double beta1, beta2, eps;                         /* AdamW */
    double clip; /* gradient norm limit, 0 = none */
    int nesterov;
    nn_lr_schedule schedule; /* decay part filled by --lr-decay */
    uint64_t seed;
    long threads;
    const char *summary; /* JSON file or NULL */
    const char *init;    /* a model file to start from (--init), or NULL */
    int model_given;     /* --model was given; else --init's file may name the model */
    char init_spec[NN_SPEC_MAX_LEN]; /* the spec --init's file records, when model points here */
    const char *save_model;          /* where the final model goes, or NULL */
    modelfile_kind model_format;
    int progress;        /* -1 auto (a terminal), 0 off, 1 on */
} train_opts;

void train_opts_defaults(train_opts *o);
/* After the fields are set: AdamW's default learning rate and weight decay
 * (1e-3 and 0.01, decoupled) where none was given (the defaults are SGD's:
 * 0.1 and 5e-4 as L2), Nesterov without momentum becomes plain SGD and the
 * learning-rate schedule is filled in. -EINVAL when the warm-up is longer
 * than the run. */
int train_opts_finish(train_opts *o);
/* The optimizer these settings describe (after train_opts_finish). */
nn_optimizer_config train_opts_optimizer(const train_opts *o);
/* The model these settings describe for the data's shape, with buffers for
 * batches up to max_batch: parameters drawn from the seed, or --init's. */
int train_opts_model(const train_opts *o, const nn_dataset *train, int max_batch, nn_model *m, char *err,
                     size_t errlen);

#endif
