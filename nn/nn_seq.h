/* Sequence kernels for a byte-level GPT: token embedding, learned positions,
 * causal multi-head self-attention. Same rules as nn_layers.h: caller-owned
 * buffers, row-major and batch-major, backward kernels OVERWRITE their outputs,
 * nothing allocates.
 *
 *   nn_embed_forward(ids, B * T, vocab, C, Wte, x);        // x [B][T][C]
 *   nn_pos_forward(x, B, T, C, Wpe, x);                    // in place
 *   ...
 *   nn_dense_forward(x, B * T, C, 3 * C, Wqkv, bqkv, qkv);  // nn_layers.h
 *   float *work = malloc(nn_attention_workspace(B, T, H) * sizeof(float));
 *   nn_attention_forward(qkv, B, T, C, H, att, work);      // att [B][T][C]
 *   ...
 *   nn_attention_backward(qkv, datt, B, T, C, H, dqkv, work);
 *   nn_pos_backward(dx, B, T, C, dWpe, dx);
 *   nn_embed_backward(ids, dx, B * T, vocab, C, dWte);
 *
 * C must be a multiple of H. Give each attention layer its own workspace:
 * (B * H + 1) * T * T floats, first the probabilities P[b][h][t][j] of the
 * last forward (masked entries j > t exactly 0), then one T x T scratch for
 * backward. Backward reads P and leaves it intact, so it may run again.
 * Products go through cblas_sgemm (OpenBLAS threads inside); no other threads.
 */
#ifndef NN_NN_SEQ_H
#define NN_NN_SEQ_H

#include <stddef.h>

/* Token embedding: ids[rows] are floats holding integer token ids; an id outside [0, vocab) is clamped into it (never read out of bounds). W is [vocab][C]. y[rows][C] = W[id]. */
void nn_embed_forward(const float *ids, size_t rows, int vocab, int C, const float *W, float *y);
/* dW[vocab][C] is OVERWRITTEN: zero, then every row's dy added to its token's row. */
void nn_embed_backward(const float *ids, const float *dy, size_t rows, int vocab, int C, float *dW);
/* Learned positions: y[b][t][c] = x[b][t][c] + P[t][c] (x and y may alias). */
void nn_pos_forward(const float *x, int B, int T, int C, const float *P, float *y);
/* dP[t][c] = sum over b of dy[b][t][c] (overwritten); dx = dy when dx is not NULL. */
void nn_pos_backward(const float *dy, int B, int T, int C, float *dP, float *dx);
/* Causal multi-head self-attention without projections. qkv is [B][T][3C]: per token the query (columns 0..C), key (C..2C) and value (2C..3C), head h using columns h*D..(h+1)*D of each, D = C / H. y is [B][T][C], head h's output in columns h*D..(h+1)*D: y = softmax(Q K^T / sqrt(D) with future positions masked) V, as PyTorch's scaled_dot_product_attention(is_causal=True). work holds what backward needs. */
size_t nn_attention_workspace(int B, int T, int H); /* floats */
void nn_attention_forward(const float *qkv, int B, int T, int C, int H, float *y, float *work);
/* Reads the probabilities forward left in work (call after the forward of the same batch); dqkv [B][T][3C] OVERWRITTEN. */
void nn_attention_backward(const float *qkv, const float *dy, int B, int T, int C, int H, float *dqkv, float *work);

#endif
