/* Token embedding and learned positional embedding. */
#include <string.h>

#include "nn/nn_seq.h"

/* A float id to a row index in [0, vocab): rounding toward zero, clamped at
 * both ends; NaN goes to 0 (the comparisons keep (int) away from NaN and from
 * values out of int's range). */
static inline size_t embed_row(float id, int vocab)
{
    if (!(id >= 0.0f))
        return 0;
    if (id >= (float)vocab)
        return (size_t)vocab - 1;
    int i = (int)id;
    return (size_t)(i < vocab ? i : vocab - 1);
}

void nn_embed_forward(const float *ids, size_t rows, int vocab, int C, const float *W, float *y)
{
    const size_t width = (size_t)C;
    for (size_t r = 0; r < rows; r++)
        memcpy(y + r * width, W + embed_row(ids[r], vocab) * width, width * sizeof(float));
}

void nn_embed_backward(const float *ids, const float *dy, size_t rows, int vocab, int C, float *dW)
{
    const size_t width = (size_t)C;
    memset(dW, 0, (size_t)vocab * width * sizeof(float));
    for (size_t r = 0; r < rows; r++) {
        float *restrict d = dW + embed_row(ids[r], vocab) * width;
        const float *restrict g = dy + r * width;
        for (size_t c = 0; c < width; c++)
            d[c] += g[c];
    }
}

void nn_pos_forward(const float *x, int B, int T, int C, const float *P, float *y)
{
    /* Element by element, each read before its write: x == y is fine. */
    const size_t n = (size_t)T * C;
    for (int b = 0; b < B; b++) {
        const float *xs = x + (size_t)b * n;
        float *ys = y + (size_t)b * n;
        for (size_t i = 0; i < n; i++)
            ys[i] = xs[i] + P[i];
    }
}

void nn_pos_backward(const float *dy, int B, int T, int C, float *dP, float *dx)
{
    const size_t n = (size_t)T * C;
    if (B <= 0) {
        memset(dP, 0, n * sizeof(float));
        return;
    }
    memcpy(dP, dy, n * sizeof(float));
    for (int b = 1; b < B; b++) {
        const float *restrict g = dy + (size_t)b * n;
        for (size_t i = 0; i < n; i++)
            dP[i] += g[i];
    }
    if (dx && dx != dy)
        memmove(dx, dy, (size_t)B * n * sizeof(float));
}
