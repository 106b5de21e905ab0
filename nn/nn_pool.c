/* Max-pooling with recorded argmax, so backward is a scatter. */
#include <string.h>

#include "nn/nn_layers.h"

/* 2x2, stride 2 (nearly every CNN's pool): the four candidates in the order
 * of the general loop, so ties go to the same winner, without its inner loops
 * (7% of a small CNN's training step in the general form). */
static void maxpool_2x2(int planes, int ih, int iw, const float *x, float *y, int *argmax)
{
    const int oh = ih / 2, ow = iw / 2;
    for (int plane = 0; plane < planes; plane++) {
        const float *img = x + (size_t)plane * ih * iw;
        float *out = y + (size_t)plane * oh * ow;
        int *arg = argmax + (size_t)plane * oh * ow;
        for (int oy = 0; oy < oh; oy++) {
            const int r0 = 2 * oy * iw, r1 = r0 + iw;
            for (int ox = 0; ox < ow; ox++) { /* selects, not branches: the winner is data, 50/50 */
                const int i0 = r0 + 2 * ox;
                float m = img[i0];
                int best = i0;
                const float b = img[i0 + 1], c2 = img[r1 + 2 * ox], d = img[r1 + 2 * ox + 1];
                best = b > m ? i0 + 1 : best, m = b > m ? b : m;
                best = c2 > m ? r1 + 2 * ox : best, m = c2 > m ? c2 : m;
                best = d > m ? r1 + 2 * ox + 1 : best, m = d > m ? d : m;
                out[oy * ow + ox] = m;
                arg[oy * ow + ox] = best;
            }
        }
    }
}

void nn_maxpool_forward(int c, int ih, int iw, int k, int stride, const float *x, int B, float *y, int *argmax)
{
    if (k == 2 && stride == 2) {
        maxpool_2x2(B * c, ih, iw, x, y, argmax);
        return;
    }
    const int oh = (ih - k) / stride + 1, ow = (iw - k) / stride + 1;
    for (int plane = 0; plane < B * c; plane++) {
        const float *img = x + (size_t)plane * ih * iw;
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                int best = (oy * stride) * iw + ox * stride;
                for (int ki = 0; ki < k; ki++)
                    for (int kj = 0; kj < k; kj++) {
                        int at = (oy * stride + ki) * iw + ox * stride + kj;
                        if (img[at] > img[best])
                            best = at;
                    }
                size_t o = ((size_t)plane * oh + oy) * ow + ox;
                y[o] = img[best];
                argmax[o] = best;
            }
    }
}

void nn_maxpool_backward(int c, int ih, int iw, int k, int stride, const float *dy, const int *argmax, int B,
                         float *dx)
{
    const int oh = (ih - k) / stride + 1, ow = (iw - k) / stride + 1;
    memset(dx, 0, (size_t)B * c * ih * iw * sizeof(float));
    for (int plane = 0; plane < B * c; plane++) {
        float *img = dx + (size_t)plane * ih * iw;
        for (int i = 0; i < oh * ow; i++) {
            size_t o = (size_t)plane * oh * ow + i;
            img[argmax[o]] += dy[o];
        }
    }
}

void nn_avgpool_forward(int c, int ih, int iw, int k, int stride, const float *x, int B, float *y)
{
    const int oh = (ih - k) / stride + 1, ow = (iw - k) / stride + 1;
    const float inv = 1.0f / (float)(k * k);
    for (int plane = 0; plane < B * c; plane++) {
        const float *img = x + (size_t)plane * ih * iw;
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                float sum = 0.0f;
                for (int ki = 0; ki < k; ki++)
                    for (int kj = 0; kj < k; kj++)
                        sum += img[(oy * stride + ki) * iw + ox * stride + kj];
                y[((size_t)plane * oh + oy) * ow + ox] = sum * inv;
            }
    }
}

void nn_avgpool_backward(int c, int ih, int iw, int k, int stride, const float *dy, int B, float *dx)
{
    const int oh = (ih - k) / stride + 1, ow = (iw - k) / stride + 1;
    const float inv = 1.0f / (float)(k * k);
    memset(dx, 0, (size_t)B * c * ih * iw * sizeof(float));
    for (int plane = 0; plane < B * c; plane++) {
        float *img = dx + (size_t)plane * ih * iw;
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                const float g = dy[((size_t)plane * oh + oy) * ow + ox] * inv;
                for (int ki = 0; ki < k; ki++)
                    for (int kj = 0; kj < k; kj++)
                        img[(oy * stride + ki) * iw + ox * stride + kj] += g;
            }
    }
}
