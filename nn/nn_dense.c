/* Fully connected layer on cblas_sgemm. */
#include <cblas.h>
#include <string.h>

#include "nn/nn_layers.h"

void nn_dense_forward(const float *x, int B, int in, int out, const float *W, const float *b, float *y)
{
    /* Seed y with the bias rows, then let sgemm accumulate into it (beta = 1):
     * one pass over y instead of a second bias pass after the product. */
    for (int i = 0; i < B; i++)
        memcpy(y + (size_t)i * out, b, (size_t)out * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, out, in, 1.0f, x, in, W, in, 1.0f, y, out);
}

void nn_dense_backward(const float *x, const float *dy, int B, int in, int out, const float *W,
                       float *dW, float *db, float *dx)
{
    /* dW[out][in] = dy^T x. Zeroed here and accumulated (beta = 1): OpenBLAS
     * clears C for beta = 0 with scalar stores, slower than memset. */
    memset(dW, 0, (size_t)out * in * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, B, 1.0f, dy, out, x, in, 1.0f, dW, in);
    memcpy(db, dy, (size_t)out * sizeof(float));
    for (int i = 1; i < B; i++) {
        const float *row = dy + (size_t)i * out;
        for (int j = 0; j < out; j++)
            db[j] += row[j];
    }
    if (dx) { /* dx[B][in] = dy W */
        memset(dx, 0, (size_t)B * in * sizeof(float));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, in, out, 1.0f, dy, out, W, in, 1.0f, dx, in);
    }
}
