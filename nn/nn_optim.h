/* SGD with momentum (optionally Nesterov) and weight decay, AdamW, the
 * optimizer that is either, and the learning-rate schedule (linear warm-up,
 * then constant, step or cosine decay).
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
#ifndef NN_NN_OPTIM_H
#define NN_NN_OPTIM_H

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

/* AdamW with PyTorch's semantics (torch.optim.AdamW, amsgrad off): t += 1;
 * m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 * p -= lr * wd * p + (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
 * The state (m, v, t) stays local to a peer and goes into its checkpoint. */
typedef struct nn_adamw {
    float beta1, beta2, eps, weight_decay;
    size_t n;
    float *m, *v; /* one block of 2 n: m then v */
    long t;       /* steps taken */
} nn_adamw;

int nn_adamw_init(nn_adamw *o, size_t n, float beta1, float beta2, float eps, float weight_decay);
/* decay_at: where the decoupled decay is taken (params for plain training;
 * under SGP the de-biased z while params is the numerator x). */
void nn_adamw_step(nn_adamw *o, float *params, const float *grads, float lr, const float *decay_at);
void nn_adamw_free(nn_adamw *o);

/* The optimizer of a run: one of the two, and where its weight decay goes
 * (SGD: L2, added to the gradient; AdamW: decoupled). */
typedef enum nn_opt_kind { NN_OPT_SGD, NN_OPT_ADAMW } nn_opt_kind;

typedef struct nn_optimizer {
    nn_opt_kind kind;
    float weight_decay;
    nn_sgd sgd;
    nn_adamw adamw;
} nn_optimizer;

typedef struct nn_optimizer_config {
    nn_opt_kind kind;
    float momentum, weight_decay;
    int nesterov;
    float beta1, beta2, eps;
} nn_optimizer_config;

int nn_optimizer_init(nn_optimizer *o, size_t n, const nn_optimizer_config *c);
/* params -= lr * (the optimizer's step for grads, with weight decay taken at
 * decay_at: params itself in plain training, z = x / w under SGP). SGD with
 * decay_at == params is nn_sgd_step exactly; otherwise grads gets wd *
 * decay_at added first (grads is modified). */
void nn_optimizer_step(nn_optimizer *o, float *params, float *grads, float lr, const float *decay_at);
/* The state a checkpoint keeps: *n floats at the returned pointer (SGD: the
 * velocity, n = dim; AdamW: m then v, n = 2 dim) and *steps (AdamW's t). */
float *nn_optimizer_state(nn_optimizer *o, size_t *n, long **steps);
/* Bytes of its state (velocity, or m and v). */
size_t nn_optimizer_bytes(const nn_optimizer *o);
void nn_optimizer_free(nn_optimizer *o);
/* "sgd" or "adamw" into *kind; -EINVAL for anything else. */
int nn_opt_kind_parse(const char *text, nn_opt_kind *kind);
const char *nn_opt_kind_name(nn_opt_kind kind);

/* Scales g so that ||g||_2 <= max_norm (no change if it already is, or if
 * max_norm <= 0); returns the norm before clipping. DGC's local gradient
 * clipping: each peer clips its own gradient before its step. */
double nn_clip_norm(float *g, size_t n, double max_norm);

#endif
