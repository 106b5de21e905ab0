/* Group normalisation (and layer normalisation, its one-group case with an
 * affine per element): statistics over each sample alone, so a peer's result
 * does not depend on its batch, and every peer normalises the same way. */
#include <math.h>

#include "nn/nn_layers.h"

#define NN_NORM_EPS 1e-5f /* PyTorch's default for GroupNorm and LayerNorm */

void nn_norm_forward(const nn_norm_shape *s, const float *x, int B, const float *gamma, const float *beta,
                     float *y, float *stats)
{
    const size_t span = s->n / (size_t)s->groups;
    for (int b = 0; b < B; b++)
        for (int g = 0; g < s->groups; g++) {
            const size_t base = (size_t)b * s->n + (size_t)g * span;
            const float *xs = x + base;
            double sum = 0.0, sq = 0.0;
            for (size_t i = 0; i < span; i++)
                sum += xs[i];
            const double mean = sum / (double)span;
            for (size_t i = 0; i < span; i++)
                sq += ((double)xs[i] - mean) * ((double)xs[i] - mean);
            const float rstd = (float)(1.0 / sqrt(sq / (double)span + NN_NORM_EPS));
            float *st = stats + 2 * ((size_t)b * s->groups + g);
            st[0] = (float)mean, st[1] = rstd;
            for (size_t i = 0; i < span; i++) {
                const size_t a = ((size_t)g * span + i) / s->per_affine;
                y[base + i] = ((xs[i] - st[0]) * rstd) * gamma[a] + beta[a];
            }
        }
}

/* With xhat = (x - mean) * rstd and gy = dy * gamma over a group of m values:
 * dx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat)). */
void nn_norm_backward(const nn_norm_shape *s, const float *x, const float *dy, int B, const float *gamma,
                      const float *stats, float *dgamma, float *dbeta, float *dx)
{
    const size_t span = s->n / (size_t)s->groups, n_affine = s->n / s->per_affine;
    for (size_t a = 0; a < n_affine; a++)
        dgamma[a] = 0.0f, dbeta[a] = 0.0f;
    for (int b = 0; b < B; b++)
        for (int g = 0; g < s->groups; g++) {
            const size_t base = (size_t)b * s->n + (size_t)g * span;
            const float *st = stats + 2 * ((size_t)b * s->groups + g);
            double sum_gy = 0.0, sum_gy_xhat = 0.0;
            for (size_t i = 0; i < span; i++) {
                const size_t a = ((size_t)g * span + i) / s->per_affine;
                const float xhat = (x[base + i] - st[0]) * st[1];
                const float gy = dy[base + i] * gamma[a];
                dgamma[a] += dy[base + i] * xhat;
                dbeta[a] += dy[base + i];
                sum_gy += gy, sum_gy_xhat += (double)gy * xhat;
            }
            if (!dx)
                continue;
            const float mean_gy = (float)(sum_gy / (double)span), mean_gy_xhat = (float)(sum_gy_xhat / (double)span);
            for (size_t i = 0; i < span; i++) {
                const size_t a = ((size_t)g * span + i) / s->per_affine;
                const float xhat = (x[base + i] - st[0]) * st[1];
                dx[base + i] = st[1] * (dy[base + i] * gamma[a] - mean_gy - xhat * mean_gy_xhat);
            }
        }
}
