/* Max-pooling with recorded argmax, so backward is a scatter. */
#include <string.h>

#include "nn/nn_layers.h"

void nn_maxpool_forward(int c, int ih, int iw, int k, int stride, const float *x, int B, float *y, int *argmax)
{
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
