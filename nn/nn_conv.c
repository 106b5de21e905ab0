/* 2-D convolution as im2col + sgemm, one sample at a time.
 *
 * Workspace: each sample's patches col [ic*k*k][P] (P = oh*ow), one after the
 * other, then a row of P ones (for the bias gradient). Per sample, the
 * products read and write NCHW in place and a sample's patches stay in cache
 * from im2col to sgemm and from the backward product to col2im; one product
 * for the whole batch needed [oc][B*P] staging copies both ways and a
 * d(patches) matrix of megabytes (perf: a third of a small CNN's step in
 * copies, zeroing and packing). Backward reuses the patches forward left. */
#include <cblas.h>
#include <errno.h>
#include <string.h>

#include "nn/nn_layers.h"

int nn_conv_shape_resolve(nn_conv_shape *s)
{
    if (s->ic <= 0 || s->oc <= 0 || s->k <= 0 || s->stride <= 0 || s->pad < 0)
        return -EINVAL;
    int eh = s->ih + 2 * s->pad - s->k, ew = s->iw + 2 * s->pad - s->k;
    if (eh < 0 || ew < 0)
        return -EINVAL;
    s->oh = eh / s->stride + 1;
    s->ow = ew / s->stride + 1;
    return 0;
}

size_t nn_conv2d_workspace(const nn_conv_shape *s, int B)
{
    const size_t p = (size_t)s->oh * s->ow;
    return (size_t)s->ic * s->k * s->k * p * B + p; /* every sample's patches, then a row of ones */
}

/* Output columns ox in [lo, hi) read inside the image row for kernel column kj;
 * the rest fall in the padding. Hoisting this out of the pixel loop removes the
 * per-pixel bounds test, which dominated the convolution's time. */
static void valid_span(const nn_conv_shape *s, int kj, int *lo, int *hi)
{
    int first = s->pad - kj, end = s->iw + s->pad - kj; /* need first <= ox*stride < end */
    int l = first <= 0 ? 0 : (first + s->stride - 1) / s->stride;
    int h = end <= 0 ? 0 : (end + s->stride - 1) / s->stride;
    *lo = l < s->ow ? l : s->ow;
    *hi = h < s->ow ? h : s->ow;
    if (*hi < *lo)
        *hi = *lo;
}

/* Patches of one image into columns [c*k*k][P] of a matrix with row stride ld. */
static void im2col(const nn_conv_shape *s, const float *x, float *col, size_t ld)
{
    const int k = s->k, st = s->stride, pad = s->pad;
    for (int c = 0; c < s->ic; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                float *row = col + ((size_t)(c * k + ki) * k + kj) * ld;
                const float *img = x + (size_t)c * s->ih * s->iw;
                int lo, hi;
                valid_span(s, kj, &lo, &hi);
                for (int oy = 0; oy < s->oh; oy++) {
                    int iy = oy * st - pad + ki;
                    float *dst = row + (size_t)oy * s->ow;
                    if (iy < 0 || iy >= s->ih) {
                        memset(dst, 0, (size_t)s->ow * sizeof(float));
                        continue;
                    }
                    /* pixel of column ox is line[ox*st + kj - pad]; offsets, not a pointer
                     * before the row, so nothing points outside the image */
                    const float *line = img + (size_t)iy * s->iw;
                    const int shift = kj - pad;
                    for (int ox = 0; ox < lo; ox++)
                        dst[ox] = 0.0f;
                    if (st == 1)
                        memcpy(dst + lo, line + lo + shift, (size_t)(hi - lo) * sizeof(float));
                    else
                        for (int ox = lo; ox < hi; ox++)
                            dst[ox] = line[ox * st + shift];
                    for (int ox = hi; ox < s->ow; ox++)
                        dst[ox] = 0.0f;
                }
            }
}

/* The adjoint of im2col: add every column entry back to the pixel it came from. */
static void col2im(const nn_conv_shape *s, const float *col, size_t ld, float *dx)
{
    const int k = s->k, st = s->stride, pad = s->pad;
    memset(dx, 0, (size_t)s->ic * s->ih * s->iw * sizeof(float));
    for (int c = 0; c < s->ic; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                const float *row = col + ((size_t)(c * k + ki) * k + kj) * ld;
                float *img = dx + (size_t)c * s->ih * s->iw;
                int lo, hi;
                valid_span(s, kj, &lo, &hi);
                for (int oy = 0; oy < s->oh; oy++) {
                    int iy = oy * st - pad + ki;
                    if (iy < 0 || iy >= s->ih)
                        continue;
                    const float *restrict src = row + (size_t)oy * s->ow;
                    float *restrict line = img + (size_t)iy * s->iw;
                    const int shift = kj - pad;
                    if (st == 1) /* contiguous: vectorised */
                        for (int ox = lo; ox < hi; ox++)
                            line[ox + shift] += src[ox];
                    else
                        for (int ox = lo; ox < hi; ox++)
                            line[ox * st + shift] += src[ox];
                }
            }
}

void nn_conv2d_forward(const nn_conv_shape *s, const float *x, int B, const float *W, const float *b,
                       float *y, float *work)
{
    const size_t P = (size_t)s->oh * s->ow, in_sz = (size_t)s->ic * s->ih * s->iw;
    const int ckk = s->ic * s->k * s->k;
    for (int n = 0; n < B; n++) {
        float *col = work + (size_t)n * ckk * P, *out = y + (size_t)n * s->oc * P;
        im2col(s, x + n * in_sz, col, P);
        for (int o = 0; o < s->oc; o++) /* the bias first; the product adds to it (beta = 1) */
            for (size_t p = 0; p < P; p++)
                out[o * P + p] = b[o];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->oc, (int)P, ckk, 1.0f, W, ckk, col, (int)P, 1.0f,
                    out, (int)P);
    }
}

void nn_conv2d_backward(const nn_conv_shape *s, const float *x, const float *dy, int B, const float *W,
                        float *dW, float *db, float *dx, float *work)
{
    const size_t P = (size_t)s->oh * s->ow, in_sz = (size_t)s->ic * s->ih * s->iw;
    const int ckk = s->ic * s->k * s->k;
    /* db = the row sums of every sample's dy, by BLAS against a row of ones
     * kept at the end of the workspace (a scalar sum in double here was a
     * tenth of a small CNN's step). */
    float *ones = work + (size_t)B * ckk * P;
    if (ones[P - 1] != 1.0f)
        for (size_t p = 0; p < P; p++)
            ones[p] = 1.0f;
    (void)x; /* the patches are still in the workspace, left there by the forward pass */
    for (int n = 0; n < B; n++) {
        const float *g = dy + (size_t)n * s->oc * P;
        float *col = work + (size_t)n * ckk * P;
        const float beta = n ? 1.0f : 0.0f;
        cblas_sgemv(CblasRowMajor, CblasNoTrans, s->oc, (int)P, 1.0f, g, (int)P, ones, 1, beta, db, 1);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->oc, ckk, (int)P, 1.0f, g, (int)P, col, (int)P, beta,
                    dW, ckk);
        if (!dx)
            continue;
        /* this sample's patches have given their part of dW: their place takes d(patches) */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ckk, (int)P, s->oc, 1.0f, W, ckk, g, (int)P, 0.0f, col,
                    (int)P);
        col2im(s, col, P, dx + n * in_sz);
    }
}
