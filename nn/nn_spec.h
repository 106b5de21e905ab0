/* The model spec language (nn/MODELS.md): a comma-separated sequence of
 * layers, e.g. "conv:32:3:pad=1,relu,maxpool:2,fc:128,relu,dropout:0.25,fc",
 * with residual blocks "res(...)" and the presets "mlp", "mlp:W1,W2,...",
 * "lenet" and "gpt:LAYERS:WIDTH:HEADS", which expand to specs.
 *
 *   nn_spec_op ops[NN_SPEC_MAX_OPS];
 *   int n = nn_spec_parse("conv:8:3,relu,fc", ops, NN_SPEC_MAX_OPS, err, sizeof err);
 *   // n < 0: err says at which position what was expected
 *
 * Only syntax and argument ranges are checked here; shapes are the model's
 * business (nn_model_init), which names the layer that does not fit. */
#ifndef NN_NN_SPEC_H
#define NN_NN_SPEC_H

#include <stddef.h>

#define NN_SPEC_MAX_OPS 256
#define NN_SPEC_MAX_LEN 512       /* characters of a spec as given */
#define NN_SPEC_MAX_EXPANDED 4096 /* characters of a spec with its preset expanded */

typedef enum nn_spec_kind {
    NN_OP_FC,      /* n outputs; 0: the class count (only as the last layer) */
    NN_OP_CONV,    /* n channels, k x k kernel, stride, pad */
    NN_OP_MAXPOOL, /* k x k, stride */
    NN_OP_AVGPOOL, /* k x k, stride; k = 0: global */
    NN_OP_RELU,
    NN_OP_GELU,
    NN_OP_TANH,
    NN_OP_FLATTEN,
    NN_OP_DROPOUT, /* p */
    NN_OP_GROUPNORM, /* n groups */
    NN_OP_LAYERNORM,
    NN_OP_EMBED,     /* n: token embedding width (the vocabulary is the class count) */
    NN_OP_POS,       /* learned position embedding, one vector per position */
    NN_OP_ATTN,      /* n heads: causal self-attention over a [tokens][3 x width] input */
    NN_OP_RES_BEGIN, /* "res(": the block's input is added to its output */
    NN_OP_RES_END,   /* ")" */
} nn_spec_kind;

typedef struct nn_spec_op {
    nn_spec_kind kind;
    int n, k, stride, pad;
    float p;
    int pos; /* 1-based character position in the (expanded) spec, for messages */
} nn_spec_op;

/* Expands a preset (mlp, mlp:W1,..., lenet, gpt:L:C:H) into out; any other spec is
 * copied. -EINVAL (err set) for a malformed preset or a spec too long. */
int nn_spec_expand(const char *spec, char *out, size_t outlen, char *err, size_t errlen);

/* Parses an expanded spec into ops; returns their number, or -EINVAL with a
 * one-line message in err: "at position P ('TEXT'): expected ...". */
int nn_spec_parse(const char *spec, nn_spec_op *ops, int max_ops, char *err, size_t errlen);

#endif
