/* SGD with momentum (optionally Nesterov) and weight decay, and the
 * learning-rate schedule (linear warm-up, then constant, step or cosine decay).
 *
 *   nn_sgd opt = {0};
 *   nn_sgd_init(&opt, m.n_params, 0.9f, 5e-4f, 1);
 *   nn_lr_schedule s = {.base = 0.05f, .warmup_epochs = 1, .decay = NN_LR_COSINE, .total_epochs = 10};
 *   nn_sgd_step(&opt, m.params, m.grads, nn_lr_at(&s, step, steps_per_epoch));
 *   nn_sgd_free(&opt);
 *
 * The step works on any flat vector: under SGP it updates the push-sum
 * numerator x with the gradient taken at z = x / w. The velocity is one block
 * the size of the parameters (a peer's optimizer state stays local).
 */
#ifndef NN_OPTIM_H
#define NN_OPTIM_H

#include <stddef.h>

typedef enum nn_lr_decay { NN_LR_CONSTANT, NN_LR_STEP, NN_LR_COSINE } nn_lr_decay;

typedef struct nn_lr_schedule {
    float base;           /* peak learning rate */
    double warmup_epochs; /* linear ramp from base/steps up to base over this many epochs */
    nn_lr_decay decay;
    double step_epochs;   /* NN_LR_STEP: multiply by gamma every step_epochs */
    float gamma;
    double total_epochs;  /* NN_LR_COSINE: reaches 0 at the end of this many epochs */
} nn_lr_schedule;

/* Learning rate for optimizer step `step` (0-based) with steps_per_epoch steps an epoch. */
float nn_lr_at(const nn_lr_schedule *s, long step, long steps_per_epoch);

/* Parses "constant", "step:EPOCHS:GAMMA" or "cosine" into s->decay and its
 * fields; -EINVAL for anything else. */
int nn_lr_decay_parse(nn_lr_schedule *s, const char *text);

typedef struct nn_sgd {
    float momentum, weight_decay;
    int nesterov;
    size_t n;
    float *velocity;
} nn_sgd;

int nn_sgd_init(nn_sgd *o, size_t n, float momentum, float weight_decay, int nesterov);
/* params -= lr * direction, with PyTorch's SGD semantics:
 * g = grad + wd * p;  v = mu * v + g;  direction = nesterov ? g + mu * v : v. */
void nn_sgd_step(nn_sgd *o, float *restrict params, const float *restrict grads, float lr);
void nn_sgd_free(nn_sgd *o);

/* Scales g so that ||g||_2 <= max_norm (no change if it already is, or if
 * max_norm <= 0); returns the norm before clipping. DGC's local gradient
 * clipping: each peer clips its own gradient before its step. */
double nn_clip_norm(float *g, size_t n, double max_norm);

#endif
