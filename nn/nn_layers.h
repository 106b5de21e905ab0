/* Layer kernels: forward/backward pairs on caller-owned buffers, batch-major.
 *
 *   nn_dense_forward(x, B, in, out, W, b, y);            // y = x W^T + b
 *   nn_dense_backward(x, dy, B, in, out, W, dW, db, dx); // dx may be NULL
 *
 * Shapes: activations are [B][...] row-major; a dense layer's W is [out][in]
 * (PyTorch's layout, so weights compare one to one); a conv layer's W is
 * [oc][ic*k*k] and images are NCHW. Backward kernels OVERWRITE dW/db/dx (no
 * accumulation), so gradients never need zeroing between steps. Nothing here
 * allocates: convolution takes its workspaces from the caller, sized by
 * nn_conv2d_workspace().
 */
#ifndef NN_NN_LAYERS_H
#define NN_NN_LAYERS_H

#include <stddef.h>

void nn_dense_forward(const float *x, int B, int in, int out, const float *W, const float *b, float *y);
void nn_dense_backward(const float *x, const float *dy, int B, int in, int out, const float *W,
                       float *dW, float *db, float *dx);

void nn_relu_forward(const float *restrict x, size_t n, float *restrict y);
/* Uses the forward OUTPUT y (y > 0 exactly where x > 0). */
void nn_relu_backward(const float *restrict y, const float *restrict dy, size_t n, float *restrict dx);

/* Mean cross-entropy of softmax(logits) against labels; writes probs and
 * dlogits = (probs - onehot) / B. Returns the mean loss. */
float nn_softmax_xent(const float *logits, const int *labels, int B, int K, float *probs, float *dlogits);

typedef struct nn_conv_shape {
    int ic, ih, iw; /* input channels, height, width */
    int oc, oh, ow; /* output */
    int k, stride, pad;
} nn_conv_shape;

/* Fills oh/ow from the rest; returns -EINVAL if the kernel does not fit. */
int nn_conv_shape_resolve(nn_conv_shape *s);
/* Floats of workspace that forward/backward need for a batch of B: each
 * sample's im2col patches [ic*k*k][oh*ow] and a row of ones. Backward reads the patches its forward pass left in the workspace: give each
 * conv layer its own, and call backward once after the forward of the same
 * batch (with dx it reuses that space, so a second backward needs a new forward).
 * (x is still passed to backward for symmetry with the other layers.) */
size_t nn_conv2d_workspace(const nn_conv_shape *s, int B);

void nn_conv2d_forward(const nn_conv_shape *s, const float *x, int B, const float *W, const float *b,
                       float *y, float *work);
void nn_conv2d_backward(const nn_conv_shape *s, const float *x, const float *dy, int B, const float *W,
                        float *dW, float *db, float *dx, float *work);

/* Max-pool k x k with the given stride on NCHW; argmax (B*c*oh*ow ints)
 * records the winning input index for backward. */
void nn_maxpool_forward(int c, int ih, int iw, int k, int stride, const float *x, int B, float *y, int *argmax);
void nn_maxpool_backward(int c, int ih, int iw, int k, int stride, const float *dy, const int *argmax, int B,
                         float *dx);

/* GELU (exact, with erf, as PyTorch's default); backward reads the input x. */
void nn_gelu_forward(const float *restrict x, size_t n, float *restrict y);
void nn_gelu_backward(const float *restrict x, const float *restrict dy, size_t n, float *restrict dx);
/* Forward that also keeps the derivative at each x in slope[n], so backward
 * is dx = dy * slope (what a model in training uses: one exp, not two). */
void nn_gelu_forward_keep(const float *restrict x, size_t n, float *restrict y, float *restrict slope);
/* tanh; backward reads the forward output y. */
void nn_tanh_forward(const float *restrict x, size_t n, float *restrict y);
void nn_tanh_backward(const float *restrict y, const float *restrict dy, size_t n, float *restrict dx);

/* Inverted dropout: each value is zeroed with probability p and the others
 * scaled by 1 / (1 - p), drawn from r; mask (n floats) keeps the factors. */
struct nn_rng;
void nn_dropout_forward(const float *restrict x, size_t n, float p, struct nn_rng *r, float *restrict mask,
                        float *restrict y);
void nn_dropout_backward(const float *restrict mask, const float *restrict dy, size_t n, float *restrict dx);

/* Average-pool k x k with the given stride on NCHW (k = the whole input for
 * a global average pool). */
void nn_avgpool_forward(int c, int ih, int iw, int k, int stride, const float *x, int B, float *y);
void nn_avgpool_backward(int c, int ih, int iw, int k, int stride, const float *dy, int B, float *dx);

/* Normalisation over groups of each sample: n values a sample, `groups`
 * contiguous groups of n / groups (NCHW: a group is C / groups channels),
 * and an affine (gamma, beta) shared by runs of per_affine values: H * W for
 * group norm (one per channel), 1 for layer norm (one per value). stats holds
 * B * groups (mean, 1/std) pairs for backward. dgamma/dbeta are overwritten;
 * dx may be NULL. */
typedef struct nn_norm_shape {
    size_t n;
    int groups;
    size_t per_affine;
} nn_norm_shape;
void nn_norm_forward(const nn_norm_shape *s, const float *x, int B, const float *gamma, const float *beta,
                     float *y, float *stats);
void nn_norm_backward(const nn_norm_shape *s, const float *x, const float *dy, int B, const float *gamma,
                      const float *stats, float *dgamma, float *dbeta, float *dx);

#endif
