/* Causal multi-head self-attention on cblas_sgemm, one (sample, head) at a time.
 *
 * Q, K and V are read in place from qkv as strided views (leading dimension
 * 3C), and head outputs / gradients are written in place the same way: no
 * copies. Per (b, h) with S = Q K^T / sqrt(D) and P = softmax(S) (row t has
 * columns 0..t, the rest exactly 0):
 *
 *   forward    y = P V
 *   backward   dP = dy V^T, dS = P .* (dP - rowsum(P .* dP)) / sqrt(D),
 *              dQ = dS K, dK = dS^T Q, dV = P^T dy
 *
 * The causal triangle is skipped in blocks of ATT_BLOCK rows: a block of rows
 * [r0, r1) only meets keys 0..r1, so its products stop at column r1 (the
 * transposed products for dK and dV go by column blocks [c0, c1), which only
 * meet rows c0..T). Inside a block the masked entries of P and dS are exactly
 * 0, so the products that do cover them add nothing.
 *
 * Outputs are zeroed with memset and the products accumulate into them
 * (beta = 1): OpenBLAS's beta = 0 path clears C with scalar stores first, which
 * took 15-18% of the time at these sizes (T = 64..128, D = 32..64).
 */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nn/nn_seq.h"
#include "nn/nn_vmath.h"

/* Rows per causal block: small enough to skip a good part of the masked
 * triangle at T = 64..128, large enough that each sgemm call still does real
 * work (each call costs about a microsecond of overhead). */
#ifndef ATT_BLOCK
#define ATT_BLOCK 32
#endif

size_t nn_attention_workspace(int B, int T, int H)
{
    /* The probabilities of every (b, h), then one T x T scratch for dP / dS. */
    return ((size_t)B * H + 1) * (size_t)T * T;
}


/* Reductions over v[0..n) in 8 lanes, which GCC vectorises (a single running
 * float sum or max it may not reorder). */
static inline float lanes_max(const float *restrict v, int n)
{
    float m[8];
    for (int k = 0; k < 8; k++)
        m[k] = v[0];
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++)
            m[k] = v[j + k] > m[k] ? v[j + k] : m[k];
    for (; j < n; j++)
        m[0] = v[j] > m[0] ? v[j] : m[0];
    for (int k = 1; k < 8; k++)
        m[0] = m[k] > m[0] ? m[k] : m[0];
    return m[0];
}

static inline float lanes_sum(const float *restrict v, int n)
{
    float s[8] = {0};
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++)
            s[k] += v[j + k];
    for (; j < n; j++)
        s[0] += v[j];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static inline float lanes_dot(const float *restrict a, const float *restrict b, int n)
{
    float s[8] = {0};
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++)
            s[k] += a[j + k] * b[j + k];
    for (; j < n; j++)
        s[0] += a[j] * b[j];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* Row t of the probabilities, whose columns 0..end hold scores: softmax over
 * columns 0..t, columns t+1..end set to exactly 0 (the caller has zeroed the
 * rest of the row). */
static void softmax_causal_row(float *restrict row, int t, int end)
{
    const int n = t + 1;
    const float mx = lanes_max(row, n);
    for (int j = 0; j < n; j++)
        row[j] = nn_vexp_neg(row[j] - mx);
    const float inv = 1.0f / lanes_sum(row, n);
    for (int j = 0; j < n; j++)
        row[j] *= inv;
    if (n < end)
        memset(row + n, 0, (size_t)(end - n) * sizeof(float));
}

void nn_attention_forward(const float *qkv, int B, int T, int C, int H, float *y, float *work)
{
    const int D = C / H, ld = 3 * C;
    const float scale = 1.0f / sqrtf((float)D);
    memset(y, 0, (size_t)B * T * C * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *q = qkv + (size_t)b * T * ld + (size_t)h * D, *k = q + C, *v = q + 2 * C;
            float *p = work + ((size_t)b * H + h) * T * T;
            float *o = y + (size_t)b * T * C + (size_t)h * D;
            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
                const int r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, m = r1 - r0;
                float *pr = p + (size_t)r0 * T;
                /* S[r0:r1, 0:r1] = scale * Q[r0:r1] K[0:r1]^T, columns r1..T stay 0 */
                memset(pr, 0, (size_t)m * T * sizeof(float));
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, r1, D, scale, q + (size_t)r0 * ld, ld, k,
                            ld, 1.0f, pr, T);
                for (int t = r0; t < r1; t++)
                    softmax_causal_row(p + (size_t)t * T, t, r1);
                /* y[r0:r1] = P[r0:r1, 0:r1] V[0:r1] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, D, r1, 1.0f, pr, T, v, ld, 1.0f,
                            o + (size_t)r0 * C, C);
            }
        }
}

void nn_attention_backward(const float *qkv, const float *dy, int B, int T, int C, int H, float *dqkv, float *work)
{
    const int D = C / H, ld = 3 * C;
    const float scale = 1.0f / sqrtf((float)D);
    float *ds = work + (size_t)B * H * T * T;
    memset(dqkv, 0, (size_t)B * T * 3 * C * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const size_t head = (size_t)b * T * ld + (size_t)h * D;
            const float *q = qkv + head, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + head, *dk = dq + C, *dv = dq + 2 * C;
            const float *g = dy + (size_t)b * T * C + (size_t)h * D;
            const float *p = work + ((size_t)b * H + h) * T * T;
            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
                const int r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, m = r1 - r0;
                /* dP[r0:r1, 0:r1] = dy[r0:r1] V[0:r1]^T (columns r1..T are not read) */
                for (int t = r0; t < r1; t++)
                    memset(ds + (size_t)t * T, 0, (size_t)r1 * sizeof(float));
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, r1, D, 1.0f, g + (size_t)r0 * C, C, v, ld,
                            1.0f, ds + (size_t)r0 * T, T);
                for (int t = r0; t < r1; t++) {
                    const float *restrict pt = p + (size_t)t * T;
                    float *restrict st = ds + (size_t)t * T;
                    const int n = t + 1;
                    const float dot = lanes_dot(pt, st, n);
                    for (int j = 0; j < n; j++)
                        st[j] = scale * pt[j] * (st[j] - dot);
                    /* Masked columns the products below read (up to r1). */
                    if (n < r1)
                        memset(st + n, 0, (size_t)(r1 - n) * sizeof(float));
                }
                /* dQ[r0:r1] = dS[r0:r1, 0:r1] K[0:r1] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, D, r1, 1.0f, ds + (size_t)r0 * T, T, k, ld,
                            1.0f, dq + (size_t)r0 * ld, ld);
            }
            for (int c0 = 0; c0 < T; c0 += ATT_BLOCK) {
                const int c1 = c0 + ATT_BLOCK < T ? c0 + ATT_BLOCK : T, n = c1 - c0, rows = T - c0;
                /* dV[c0:c1] = P[c0:T, c0:c1]^T dy[c0:T] */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, D, rows, 1.0f, p + (size_t)c0 * T + c0, T,
                            g + (size_t)c0 * C, C, 1.0f, dv + (size_t)c0 * ld, ld);
                /* dK[c0:c1] = dS[c0:T, c0:c1]^T Q[c0:T] */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, D, rows, 1.0f, ds + (size_t)c0 * T + c0, T,
                            q + (size_t)c0 * ld, ld, 1.0f, dk + (size_t)c0 * ld, ld);
            }
        }
}
