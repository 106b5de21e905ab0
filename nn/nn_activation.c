/* Element-wise activations and the softmax + cross-entropy head. */
#include <math.h>

#include "nn/nn_layers.h"
#include "nn/nn_vmath.h"
#include "nn/nn_rng.h"

/* restrict and unconditional loads: a select the compiler can vectorise,
 * instead of a mispredicted branch per element (14% of an MLP step before). */
void nn_relu_forward(const float *restrict x, size_t n, float *restrict y)
{
    for (size_t i = 0; i < n; i++) {
        const float v = x[i];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

void nn_relu_backward(const float *restrict y, const float *restrict dy, size_t n, float *restrict dx)
{
    for (size_t i = 0; i < n; i++) {
        const float g = dy[i];
        dx[i] = y[i] > 0.0f ? g : 0.0f;
    }
}

float nn_softmax_xent(const float *logits, const int *labels, int B, int K, float *probs, float *dlogits)
{
    double loss = 0.0;
    const float inv_b = 1.0f / (float)B;
    for (int i = 0; i < B; i++) {
        const float *z = logits + (size_t)i * K;
        float *p = probs + (size_t)i * K;
        /* Subtract the max so exp never overflows; the sum is >= 1 so log is finite. */
        float zmax = z[0];
        for (int j = 1; j < K; j++)
            zmax = z[j] > zmax ? z[j] : zmax;
        float sum = 0.0f;
        for (int j = 0; j < K; j++) {
            p[j] = expf(z[j] - zmax);
            sum += p[j];
        }
        const float inv = 1.0f / sum;
        for (int j = 0; j < K; j++)
            p[j] *= inv;
        /* log p_y computed from the logits, not log(p[y]), so a confident
         * wrong answer gives a large finite loss instead of -log(0). */
        loss += (double)(logf(sum) - (z[labels[i]] - zmax));
        if (dlogits) {
            float *d = dlogits + (size_t)i * K;
            for (int j = 0; j < K; j++)
                d[j] = p[j] * inv_b;
            d[labels[i]] -= inv_b;
        }
    }
    return (float)(loss / B);
}

/* GELU as PyTorch's default (the exact form, with erf). */
/* GELU(x) = x Phi(x) with Phi(x) = (1 + erf(x / sqrt 2)) / 2, and its
 * derivative Phi(x) + x phi(x) where phi(x) = exp(-x^2 / 2) / sqrt(2 pi) is
 * the very exponential nn_verf computes. */
void nn_gelu_forward(const float *restrict x, size_t n, float *restrict y)
{
    for (size_t i = 0; i < n; i++) {
        float gauss;
        y[i] = 0.5f * x[i] * (1.0f + nn_verf(x[i] * (float)M_SQRT1_2, &gauss));
    }
}

void nn_gelu_backward(const float *restrict x, const float *restrict dy, size_t n, float *restrict dx)
{
    const float inv_sqrt_2pi = 0.3989422804014327f;
    for (size_t i = 0; i < n; i++) {
        const float v = x[i];
        float gauss;
        const float cdf = 0.5f * (1.0f + nn_verf(v * (float)M_SQRT1_2, &gauss));
        dx[i] = dy[i] * (cdf + v * inv_sqrt_2pi * gauss);
    }
}

void nn_gelu_forward_keep(const float *restrict x, size_t n, float *restrict y, float *restrict slope)
{
    const float inv_sqrt_2pi = 0.3989422804014327f;
    for (size_t i = 0; i < n; i++) {
        const float v = x[i];
        float gauss;
        const float cdf = 0.5f * (1.0f + nn_verf(v * (float)M_SQRT1_2, &gauss));
        y[i] = v * cdf;
        slope[i] = cdf + v * inv_sqrt_2pi * gauss;
    }
}

void nn_tanh_forward(const float *restrict x, size_t n, float *restrict y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = tanhf(x[i]);
}

void nn_tanh_backward(const float *restrict y, const float *restrict dy, size_t n, float *restrict dx)
{
    for (size_t i = 0; i < n; i++)
        dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

void nn_dropout_forward(const float *restrict x, size_t n, float p, nn_rng *r, float *restrict mask,
                        float *restrict y)
{
    const float keep = 1.0f / (1.0f - p);
    for (size_t i = 0; i < n; i++) {
        mask[i] = nn_rng_uniform(r) >= p ? keep : 0.0f;
        y[i] = x[i] * mask[i];
    }
}

void nn_dropout_backward(const float *restrict mask, const float *restrict dy, size_t n, float *restrict dx)
{
    for (size_t i = 0; i < n; i++)
        dx[i] = dy[i] * mask[i];
}
