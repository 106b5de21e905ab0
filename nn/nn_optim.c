/* SGD, AdamW, the optimizer of a run (either), and the learning-rate schedule. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_optim.h"

float nn_lr_at(const nn_lr_schedule *s, long step, long steps_per_epoch)
{
    if (steps_per_epoch < 1)
        steps_per_epoch = 1;
    const double spe = (double)steps_per_epoch, epoch = (double)step / spe;
    double lr = s->base;
    /* Warm-up counts this step as done, so step 0 already moves (lr > 0). */
    double warm = s->warmup_epochs * spe;
    if (warm > 0 && step + 1 < warm)
        lr *= (double)(step + 1) / warm;
    switch (s->decay) {
    case NN_LR_CONSTANT:
        break;
    case NN_LR_STEP:
        if (s->step_epochs > 0)
            lr *= pow(s->gamma, floor(epoch / s->step_epochs));
        break;
    case NN_LR_COSINE: {
        /* Cosine runs over the epochs after warm-up. */
        double span = s->total_epochs - s->warmup_epochs;
        double t = span > 0 ? (epoch - s->warmup_epochs) / span : 0.0; /* all warm-up: no decay */
        t = t < 0 ? 0 : t > 1 ? 1 : t;
        lr *= 0.5 * (1.0 + cos(3.14159265358979323846 * t));
        break;
    }
    }
    return (float)lr;
}

int nn_lr_decay_parse(nn_lr_schedule *s, const char *text)
{
    if (strcmp(text, "constant") == 0) {
        s->decay = NN_LR_CONSTANT;
        return 0;
    }
    if (strcmp(text, "cosine") == 0) {
        s->decay = NN_LR_COSINE;
        return 0;
    }
    double every, gamma;
    char tail;
    if (sscanf(text, "step:%lf:%lf%c", &every, &gamma, &tail) == 2 && every > 0 && gamma > 0 && gamma <= 1) {
        s->decay = NN_LR_STEP;
        s->step_epochs = every;
        s->gamma = (float)gamma;
        return 0;
    }
    return -EINVAL;
}

int nn_sgd_init(nn_sgd *o, size_t n, float momentum, float weight_decay, int nesterov)
{
    memset(o, 0, sizeof *o);
    if (momentum < 0 || momentum >= 1 || weight_decay < 0 || (nesterov && momentum == 0))
        return -EINVAL;
    o->velocity = calloc(n ? n : 1, sizeof(float));
    if (!o->velocity)
        return -ENOMEM;
    o->momentum = momentum, o->weight_decay = weight_decay, o->nesterov = nesterov, o->n = n;
    return 0;
}

void nn_sgd_step(nn_sgd *o, float *restrict params, const float *restrict grads, float lr)
{
    const float mu = o->momentum, wd = o->weight_decay;
    float *restrict v = o->velocity;
    if (mu == 0.0f) {
        for (size_t i = 0; i < o->n; i++)
            params[i] -= lr * (grads[i] + wd * params[i]);
        return;
    }
    if (o->nesterov) {
        for (size_t i = 0; i < o->n; i++) {
            float g = grads[i] + wd * params[i];
            v[i] = mu * v[i] + g;
            params[i] -= lr * (g + mu * v[i]);
        }
    } else {
        for (size_t i = 0; i < o->n; i++) {
            v[i] = mu * v[i] + grads[i] + wd * params[i];
            params[i] -= lr * v[i];
        }
    }
}

void nn_sgd_free(nn_sgd *o)
{
    if (!o)
        return;
    free(o->velocity);
    memset(o, 0, sizeof *o);
}

double nn_clip_norm(float *g, size_t n, double max_norm)
{
    double sq = 0;
    for (size_t i = 0; i < n; i++)
        sq += (double)g[i] * g[i];
    double norm = sqrt(sq);
    if (max_norm > 0 && norm > max_norm) {
        const float scale = (float)(max_norm / norm);
        for (size_t i = 0; i < n; i++)
            g[i] *= scale;
    }
    return norm;
}

int nn_adamw_init(nn_adamw *o, size_t n, float beta1, float beta2, float eps, float weight_decay)
{
    memset(o, 0, sizeof *o);
    if (!(beta1 >= 0.0f && beta1 < 1.0f) || !(beta2 >= 0.0f && beta2 < 1.0f) || !(eps > 0.0f) ||
        !(weight_decay >= 0.0f))
        return -EINVAL;
    o->m = calloc(2 * (n ? n : 1), sizeof(float));
    if (!o->m)
        return -ENOMEM;
    o->v = o->m + n;
    o->beta1 = beta1, o->beta2 = beta2, o->eps = eps, o->weight_decay = weight_decay, o->n = n;
    return 0;
}

void nn_adamw_step(nn_adamw *o, float *params, const float *grads, float lr, const float *decay_at)
{
    o->t++;
    const float b1 = o->beta1, b2 = o->beta2, decay = lr * o->weight_decay;
    const double bc1 = 1.0 - pow(b1, (double)o->t), bc2 = 1.0 - pow(b2, (double)o->t);
    const float step = (float)(lr / bc1), inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
    /* Locals, not o->: a store to params[i] may alias any float of *o as far
     * as the compiler knows, which keeps the loop from vectorising. */
    float *m = o->m, *v = o->v;
    const float eps = o->eps;
    const size_t n = o->n;
    for (size_t i = 0; i < n; i++) {
        const float g = grads[i], d = decay_at[i]; /* (read before params[i] changes: they may alias) */
        m[i] = b1 * m[i] + (1.0f - b1) * g;
        v[i] = b2 * v[i] + (1.0f - b2) * g * g;
        params[i] -= decay * d + step * m[i] / (sqrtf(v[i]) * inv_sqrt_bc2 + eps);
    }
}

void nn_adamw_free(nn_adamw *o)
{
    if (!o)
        return;
    free(o->m);
    memset(o, 0, sizeof *o);
}

int nn_optimizer_init(nn_optimizer *o, size_t n, const nn_optimizer_config *c)
{
    memset(o, 0, sizeof *o);
    o->kind = c->kind;
    o->weight_decay = c->weight_decay;
    if (c->weight_decay < 0.0f)
        return -EINVAL;
    if (c->kind == NN_OPT_ADAMW)
        return nn_adamw_init(&o->adamw, n, c->beta1, c->beta2, c->eps, c->weight_decay);
    return nn_sgd_init(&o->sgd, n, c->momentum, c->weight_decay, c->nesterov);
}

void nn_optimizer_step(nn_optimizer *o, float *params, float *grads, float lr, const float *decay_at)
{
    if (o->kind == NN_OPT_ADAMW) {
        nn_adamw_step(&o->adamw, params, grads, lr, decay_at);
        return;
    }
    if (decay_at == params) {
        o->sgd.weight_decay = o->weight_decay;
    } else {
        o->sgd.weight_decay = 0.0f;
        if (o->weight_decay > 0.0f)
            for (size_t i = 0; i < o->sgd.n; i++)
                grads[i] += o->weight_decay * decay_at[i];
    }
    nn_sgd_step(&o->sgd, params, grads, lr);
}

float *nn_optimizer_state(nn_optimizer *o, size_t *n, long **steps)
{
    if (o->kind == NN_OPT_ADAMW) {
        *n = 2 * o->adamw.n, *steps = &o->adamw.t;
        return o->adamw.m;
    }
    *n = o->sgd.n, *steps = NULL;
    return o->sgd.velocity;
}

size_t nn_optimizer_bytes(const nn_optimizer *o)
{
    return ((o->adamw.m ? 2 * o->adamw.n : 0) + (o->sgd.velocity ? o->sgd.n : 0)) * sizeof(float);
}

void nn_optimizer_free(nn_optimizer *o)
{
    if (!o)
        return;
    nn_sgd_free(&o->sgd);
    nn_adamw_free(&o->adamw);
    memset(o, 0, sizeof *o);
}

int nn_opt_kind_parse(const char *text, nn_opt_kind *kind)
{
    if (strcmp(text, "sgd") == 0)
        *kind = NN_OPT_SGD;
    else if (strcmp(text, "adamw") == 0)
        *kind = NN_OPT_ADAMW;
    else
        return -EINVAL;
    return 0;
}

const char *nn_opt_kind_name(nn_opt_kind kind) { return kind == NN_OPT_ADAMW ? "adamw" : "sgd"; }
