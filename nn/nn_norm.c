/* Group normalisation (and layer normalisation, its one-group case with an
 * affine per element): statistics over each sample alone, so a peer's result
 * does not depend on its batch, and every peer normalises the same way. */
#include <math.h>

#include "nn/nn_layers.h"

#define NN_NORM_EPS 1e-5f /* PyTorch's default for GroupNorm and LayerNorm */

/* Layer norm (one group, an affine per value) is a GPT's every other layer,
 * row after row of a few hundred values: its sums go over eight float lanes
 * that GCC turns into vector adds, and nothing divides per element. Group
 * norm keeps the general loops below (sums in double). */
#define LANES 8

static float lane_sum(const float *acc)
{
    float s = 0.0f;
    for (int k = 0; k < LANES; k++)
        s += acc[k];
    return s;
}

static void layer_norm_row(const float *x, size_t n, const float *gamma, const float *beta, float *y, float *st)
{
    float acc[LANES] = {0}, tail = 0.0f;
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int k = 0; k < LANES; k++)
            acc[k] += x[i + k];
    for (; i < n; i++)
        tail += x[i];
    const float mean = (lane_sum(acc) + tail) / (float)n;
    float sq[LANES] = {0};
    tail = 0.0f;
    for (i = 0; i + LANES <= n; i += LANES)
        for (int k = 0; k < LANES; k++)
            sq[k] += (x[i + k] - mean) * (x[i + k] - mean);
    for (; i < n; i++)
        tail += (x[i] - mean) * (x[i] - mean);
    const float rstd = 1.0f / sqrtf((lane_sum(sq) + tail) / (float)n + NN_NORM_EPS);
    st[0] = mean, st[1] = rstd;
    for (i = 0; i < n; i++)
        y[i] = ((x[i] - mean) * rstd) * gamma[i] + beta[i];
}

static void layer_norm_row_backward(const float *x, const float *dy, size_t n, const float *gamma, const float *st,
                                    float *dgamma, float *dbeta, float *dx)
{
    const float mean = st[0], rstd = st[1];
    float a_gy[LANES] = {0}, a_gx[LANES] = {0}, t_gy = 0.0f, t_gx = 0.0f;
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int k = 0; k < LANES; k++) {
            const float xhat = (x[i + k] - mean) * rstd, gy = dy[i + k] * gamma[i + k];
            dgamma[i + k] += dy[i + k] * xhat;
            dbeta[i + k] += dy[i + k];
            a_gy[k] += gy, a_gx[k] += gy * xhat;
        }
    for (; i < n; i++) {
        const float xhat = (x[i] - mean) * rstd, gy = dy[i] * gamma[i];
        dgamma[i] += dy[i] * xhat;
        dbeta[i] += dy[i];
        t_gy += gy, t_gx += gy * xhat;
    }
    if (!dx)
        return;
    const float mean_gy = (lane_sum(a_gy) + t_gy) / (float)n, mean_gx = (lane_sum(a_gx) + t_gx) / (float)n;
    for (i = 0; i < n; i++)
        dx[i] = rstd * (dy[i] * gamma[i] - mean_gy - (x[i] - mean) * rstd * mean_gx);
}

void nn_norm_forward(const nn_norm_shape *s, const float *x, int B, const float *gamma, const float *beta,
                     float *y, float *stats)
{
    const size_t span = s->n / (size_t)s->groups;
    if (s->groups == 1 && s->per_affine == 1) {
        for (int b = 0; b < B; b++)
            layer_norm_row(x + (size_t)b * s->n, s->n, gamma, beta, y + (size_t)b * s->n, stats + 2 * (size_t)b);
        return;
    }
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
    if (s->groups == 1 && s->per_affine == 1) {
        for (int b = 0; b < B; b++)
            layer_norm_row_backward(x + (size_t)b * s->n, dy + (size_t)b * s->n, s->n, gamma, stats + 2 * (size_t)b,
                                    dgamma, dbeta, dx ? dx + (size_t)b * s->n : NULL);
        return;
    }
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
