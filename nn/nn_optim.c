/* SGD and the learning-rate schedule. */
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
