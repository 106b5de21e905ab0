/* Models: a sequence of layers whose parameters, gradients and activations
 * each live in ONE contiguous float block, with named views into it.
 *
 *   nn_model m = {0};
 *   char err[128];
 *   if (nn_model_init(&m, "mlp:256,128", 1, 28, 28, 10, 64, seed, err, sizeof err) < 0) ...
 *   float loss = nn_model_grad(&m, x, y, B, &correct);  // m.grads = d loss / d m.params
 *   nn_sgd_step(&opt, m.params, m.grads, lr);
 *   nn_model_free(&m);
 *
 * Specs: a sequence of layers (nn/MODELS.md, parsed by nn/nn_spec.h), e.g.
 * "conv:32:3:pad=1,gn:8,relu,maxpool:2,fc:128,relu,dropout:0.25,fc", and the
 * presets "mlp" (softmax regression), "mlp:W1,W2,..." (hidden widths, ReLU)
 * and "lenet" (conv5x5(6,pad 2)-relu-pool2-conv5x5(16)-relu-pool2-fc120-relu-
 * fc84-relu-fc), and "gpt:L:C:H" (a byte-level GPT). Input shape and class
 * count come from the data.
 *
 * Sequence models start with "embed:C": a sample is `tokens` token ids (text
 * data: 1 x 1 x context), activations are [batch][tokens][width], fc and ln
 * act on each token, and the loss is the mean next-token cross-entropy over
 * every position, so labels are [batch][tokens] and logits
 * [batch][tokens][classes].
 * The flat m.params vector is what gossip and compression operate on; a step
 * never allocates.
 */
#ifndef NN_NN_MODEL_H
#define NN_NN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "nn/nn_data.h"
#include "nn/nn_layers.h"
#include "nn/nn_spec.h"

#define NN_MAX_LAYERS NN_SPEC_MAX_OPS

typedef enum nn_layer_kind {
    NN_DENSE,
    NN_RELU,
    NN_CONV2D,
    NN_MAXPOOL,
    NN_FLATTEN,
    NN_AVGPOOL,
    NN_GELU,
    NN_TANH,
    NN_DROPOUT,
    NN_NORM, /* group or layer normalisation */
    NN_ADD,  /* the end of a residual block: its input plus its output */
    NN_EMBED, /* token ids -> vectors (a sequence model's first layer) */
    NN_POS,   /* plus a learned vector per position */
    NN_ATTN,  /* causal multi-head self-attention, [tokens][3 x width] -> [tokens][width] */
} nn_layer_kind;

typedef struct nn_layer {
    nn_layer_kind kind;
    char name[16];           /* "fc1", "conv2", "relu3", ... */
    int in_c, in_h, in_w;    /* per-sample input shape */
    int out_c, out_h, out_w; /* per-sample output shape */
    nn_conv_shape conv;      /* NN_CONV2D */
    int k, stride;           /* NN_MAXPOOL, NN_AVGPOOL */
    float p;                 /* NN_DROPOUT */
    nn_norm_shape norm;      /* NN_NORM */
    int skip;                /* NN_ADD: the layer whose output is the block's input (-1: the model's input) */
    int rows;                /* rows a sample is to a per-row layer: its tokens in a sequence model, else 1 */
    int heads;               /* NN_ATTN */
    size_t w_off, w_n;       /* weight view into params / grads (dense, conv) */
    size_t b_off, b_n;       /* bias view */
    float *out, *dout;       /* [max_batch][out size]; flatten aliases its input */
    int *argmax;             /* NN_MAXPOOL */
    float *work;             /* NN_CONV2D: im2col patches kept for backward; NN_DROPOUT: the mask;
                              * NN_NORM: each sample's group statistics; NN_ATTN: the attention weights */
} nn_layer;

typedef struct nn_model {
    char spec[NN_SPEC_MAX_LEN];
    uint64_t seed;  /* of the initial parameters, and with `steps` of dropout's masks */
    uint64_t steps; /* nn_model_grad calls so far: each draws new dropout masks */
    int in_c, in_h, in_w, n_classes, max_batch;
    int tokens; /* labels a sample has: its positions in a sequence model (in_w), else 1 */
    int n_layers;
    nn_layer layer[NN_MAX_LAYERS];
    size_t n_params;
    float *params; /* all weights and biases, one block */
    float *grads;  /* same layout as params */
    float *acts;   /* every layer's out and dout, one block */
    float *probs;  /* softmax of the last batch */
    float *work;   /* convolution workspaces, one per conv layer */
    int *argmax;   /* max-pool winners, one block */
    float *seq_x;  /* sequence models: a batch of evaluation windows, [max_batch][tokens] */
    int *seq_y;
    size_t bytes;  /* all of the above: parameters, gradients, activations, workspaces */
} nn_model;

/* Bits per byte of a mean loss in nats per token, for byte-level text. */
static inline double nn_bits_per_byte(double nats_per_token) { return nats_per_token / 0.69314718055994530942; }

/* A sequence model: one that starts with a token embedding. */
static inline int nn_model_is_seq(const nn_model *m) { return m->n_layers > 0 && m->layer[0].kind == NN_EMBED; }

/* Samples (or, in a sequence model, tokens) an evaluation takes at a time. */
#define NN_EVAL_SAMPLES 256
#define NN_EVAL_TOKENS 4096
/* max_batch for a model that trains in batches of train_batch and is
 * evaluated (in batches of max_batch): NN_EVAL_SAMPLES samples, or for a
 * sequence model of `tokens` a window NN_EVAL_TOKENS tokens, but never fewer
 * than train_batch. So evaluating costs a GPT no more memory than its
 * training step (256 windows of a 64-token GPT took 736 MB of activations
 * for a 3.5 MB model), and the memory does not grow with the data. */
int nn_eval_batch(int train_batch, int tokens);
/* max_batch for a model only evaluated (or loaded): nn_eval_batch(1, its tokens). */
#define NN_EVAL_ONLY 0

/* Build the model for inputs of shape c x h x w and n_classes outputs, with
 * buffers for batches up to max_batch (NN_EVAL_ONLY: as nn_eval_batch says
 * for this model), parameters initialised from seed (He normal weights, zero
 * biases). Bad spec or shape: -EINVAL and a message. */
int nn_model_init(nn_model *m, const char *spec, int c, int h, int w, int n_classes, int max_batch,
                  uint64_t seed, char *err, size_t errlen);
/* Keep the model as a compute engine only: its own parameter block is freed,
 * and the caller points m->params at its parameters for each nn_model_grad
 * and passes them to nn_model_evaluate (an SGP peer's live parameters are its
 * push-sum state, a copy here would be dead weight). */
void nn_model_drop_params(nn_model *m);
/* Keep only what describes the model (its spec, layers and their offsets
 * into the parameter block): every buffer is freed. What a model file's
 * header needs, without holding a model's worth of memory for it. */
void nn_model_keep_shape(nn_model *m);
void nn_model_free(nn_model *m);

/* Re-draw the parameters from seed (as nn_model_init does). */
void nn_model_init_params(nn_model *m, uint64_t seed);
/* The same parameters into dst (n_params floats), m untouched: a peer makes
 * its run's starting model again where it needs it instead of keeping it. */
void nn_model_fill_params(const nn_model *m, uint64_t seed, float *dst);

/* Forward pass of B <= max_batch samples (inference: dropout off); returns
 * the logits [B][n_classes]. */
const float *nn_model_forward(nn_model *m, const float *x, int B);

/* Forward (training: dropout on, masks drawn from seed and steps, then
 * steps++), mean softmax cross-entropy against y (B * m->tokens labels),
 * backward into m->grads (at the current m->params). Returns the loss;
 * *correct (if not NULL) counts argmax hits among the B * m->tokens. */
float nn_model_grad(nn_model *m, const float *x, const int *y, int B, int *correct);

/* Mean loss (per label: per token for text) and accuracy over a whole data
 * set (text: its evaluation windows, nn_text_window), in batches of max_batch,
 * evaluated at `params` (m->params when NULL; the model's own params are left
 * as they were). */
void nn_model_evaluate(nn_model *m, const float *params, const nn_dataset *d, float *loss, float *accuracy);

/* Inference on n samples (in batches of max_batch): the arg-max class of
 * each into label[n] and the softmax probabilities into probs[n][n_classes]
 * (either may be NULL). */
void nn_model_predict(nn_model *m, const float *x, int n, int *label, float *probs);

/* Parameter views in order, for checkpoints and reports: fills name (e.g.
 * "fc1.weight"), offset and count; returns 0, or -ENOENT past the last one. */
int nn_model_view(const nn_model *m, int i, char *name, size_t name_len, size_t *offset, size_t *count);

/* The shape of view i in PyTorch's layout (fc weight [out, in], conv weight
 * [out, in, k, k], norm weight and every bias [channels], layer norm over an
 * image [c, h, w]): fills dims and returns their number, or -ENOENT. */
int nn_model_view_shape(const nn_model *m, int i, int64_t dims[4]);

#endif
