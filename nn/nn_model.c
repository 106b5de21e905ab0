/* Model construction (spec -> layer list -> one block per role) and the
 * forward/backward drivers over the layer kernels. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_model.h"
#include "nn/nn_rng.h"
#include "nn/nn_seq.h"

static size_t out_size(const nn_layer *l) { return (size_t)l->out_c * l->out_h * l->out_w; }
static size_t in_size(const nn_layer *l) { return (size_t)l->in_c * l->in_h * l->in_w; }

/* Appends a layer taking the previous layer's output shape (or the model
 * input), named NAME1, NAME2, ... in order, as people name them. */
static nn_layer *push(nn_model *m, nn_layer_kind kind, const char *name, char *err, size_t errlen)
{
    if (m->n_layers == NN_MAX_LAYERS) {
        snprintf(err, errlen, "model '%s': more than %d layers", m->spec, NN_MAX_LAYERS);
        return NULL;
    }
    nn_layer *l = &m->layer[m->n_layers];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    const size_t len = strlen(name);
    int same = 1;
    for (int i = 0; i < m->n_layers; i++)
        same += strncmp(m->layer[i].name, name, len) == 0 && isdigit((unsigned char)m->layer[i].name[len]);
    snprintf(l->name, sizeof l->name, "%s%d", name, same);
    if (m->n_layers == 0) {
        l->in_c = m->in_c, l->in_h = m->in_h, l->in_w = m->in_w;
    } else {
        const nn_layer *p = &m->layer[m->n_layers - 1];
        l->in_c = p->out_c, l->in_h = p->out_h, l->in_w = p->out_w;
    }
    l->out_c = l->in_c, l->out_h = l->in_h, l->out_w = l->in_w;
    l->rows = 1;
    m->n_layers++;
    return l;
}

/* "model 'SPEC': conv2 (position 17): " and the reason. */
static int misfit(const nn_model *m, const nn_layer *l, const nn_spec_op *op, char *err, size_t errlen,
                  const char *fmt, ...)
{
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "model '%s': %s (position %d): %s", m->spec, l->name, op->pos, why);
    return -EINVAL;
}

static int pool_fits(const nn_model *m, nn_layer *l, const nn_spec_op *op, char *err, size_t errlen)
{
    if (l->in_h < l->k || l->in_w < l->k)
        return misfit(m, l, op, err, errlen, "a %dx%d pool does not fit a %dx%d input", l->k, l->k, l->in_h,
                      l->in_w);
    l->out_h = (l->in_h - l->k) / l->stride + 1, l->out_w = (l->in_w - l->k) / l->stride + 1;
    return 0;
}

/* One parsed op to a layer; `last`: the op ends the model. */
static int add_op(nn_model *m, const nn_spec_op *op, int last, char *err, size_t errlen)
{
    static const char *const names[] = {[NN_OP_FC] = "fc",           [NN_OP_CONV] = "conv",
                                        [NN_OP_MAXPOOL] = "pool",     [NN_OP_AVGPOOL] = "avgpool",
                                        [NN_OP_RELU] = "relu",        [NN_OP_GELU] = "gelu",
                                        [NN_OP_TANH] = "tanh",        [NN_OP_FLATTEN] = "flatten",
                                        [NN_OP_DROPOUT] = "dropout",  [NN_OP_GROUPNORM] = "gn",
                                        [NN_OP_LAYERNORM] = "ln",     [NN_OP_EMBED] = "embed",
                                        [NN_OP_POS] = "pos",          [NN_OP_ATTN] = "attn"};
    static const nn_layer_kind kinds[] = {[NN_OP_FC] = NN_DENSE,        [NN_OP_CONV] = NN_CONV2D,
                                          [NN_OP_MAXPOOL] = NN_MAXPOOL, [NN_OP_AVGPOOL] = NN_AVGPOOL,
                                          [NN_OP_RELU] = NN_RELU,       [NN_OP_GELU] = NN_GELU,
                                          [NN_OP_TANH] = NN_TANH,       [NN_OP_FLATTEN] = NN_FLATTEN,
                                          [NN_OP_DROPOUT] = NN_DROPOUT, [NN_OP_GROUPNORM] = NN_NORM,
                                          [NN_OP_LAYERNORM] = NN_NORM,  [NN_OP_EMBED] = NN_EMBED,
                                          [NN_OP_POS] = NN_POS,         [NN_OP_ATTN] = NN_ATTN};
    const int seq = nn_model_is_seq(m);
    nn_layer *l = push(m, kinds[op->kind], names[op->kind], err, errlen);
    if (!l)
        return -EINVAL;
    switch (op->kind) {
    case NN_OP_CONV:
    case NN_OP_MAXPOOL:
    case NN_OP_AVGPOOL:
    case NN_OP_FLATTEN:
    case NN_OP_GROUPNORM:
        if (seq)
            return misfit(m, l, op, err, errlen, "not for a sequence model (one that starts with embed)");
        break;
    case NN_OP_POS:
    case NN_OP_ATTN:
        if (!seq)
            return misfit(m, l, op, err, errlen, "only in a sequence model: start the model with embed:C");
        break;
    default:
        break;
    }
    switch (op->kind) {
    case NN_OP_FC: {
        if (!op->n && !last)
            return misfit(m, l, op, err, errlen, "fc without a width is only for the last layer (fc:N elsewhere)");
        const int out = op->n ? op->n : m->n_classes;
        if (seq) { /* each token on its own */
            l->rows = l->in_h;
            l->out_w = out;
            l->w_n = (size_t)out * l->in_w;
        } else {
            l->out_c = 1, l->out_h = 1, l->out_w = out;
            l->w_n = (size_t)out * in_size(l);
        }
        l->b_n = (size_t)out;
        return 0;
    }
    case NN_OP_EMBED:
        if (m->n_layers != 1 || l->in_c != 1 || l->in_h != 1)
            return misfit(m, l, op, err, errlen,
                          "embed takes token ids: it must be the first layer, on 1 x 1 x tokens inputs (text data)");
        l->out_c = 1, l->out_h = l->in_w, l->out_w = op->n;
        l->rows = l->in_w;
        l->w_n = (size_t)m->n_classes * op->n; /* the vocabulary is the class count */
        m->tokens = l->in_w;
        return 0;
    case NN_OP_POS:
        l->w_n = (size_t)l->in_h * l->in_w;
        return 0;
    case NN_OP_ATTN:
        if (l->in_w % 3 != 0 || (l->in_w / 3) % op->n != 0)
            return misfit(m, l, op, err, errlen,
                          "attention takes queries, keys and values of equal width (3 x C) with C a multiple of "
                          "the %d heads; its input is %d wide (put fc:3C before it)",
                          op->n, l->in_w);
        l->out_w = l->in_w / 3;
        l->heads = op->n;
        l->rows = l->in_h;
        return 0;
    case NN_OP_CONV:
        l->conv = (nn_conv_shape){.ic = l->in_c, .ih = l->in_h, .iw = l->in_w, .oc = op->n, .k = op->k,
                                  .stride = op->stride, .pad = op->pad};
        if (nn_conv_shape_resolve(&l->conv) < 0)
            return misfit(m, l, op, err, errlen, "a %dx%d convolution does not fit a %dx%d input", op->k, op->k,
                          l->in_h + 2 * op->pad, l->in_w + 2 * op->pad);
        l->out_c = op->n, l->out_h = l->conv.oh, l->out_w = l->conv.ow;
        l->w_n = (size_t)op->n * l->in_c * op->k * op->k;
        l->b_n = (size_t)op->n;
        return 0;
    case NN_OP_MAXPOOL:
    case NN_OP_AVGPOOL:
        if (op->k == 0) { /* global average pool: one value per channel */
            if (l->in_h != l->in_w)
                return misfit(m, l, op, err, errlen, "a global pool needs a square input, not %dx%d", l->in_h,
                              l->in_w);
            l->k = l->in_h, l->stride = 1;
        } else {
            l->k = op->k, l->stride = op->stride;
        }
        return pool_fits(m, l, op, err, errlen);
    case NN_OP_FLATTEN:
        l->out_c = 1, l->out_h = 1, l->out_w = (int)in_size(l);
        return 0;
    case NN_OP_DROPOUT:
        l->p = op->p;
        return 0;
    case NN_OP_GROUPNORM:
        if (l->in_c % op->n != 0)
            return misfit(m, l, op, err, errlen, "%d channels do not split into %d groups", l->in_c, op->n);
        l->norm = (nn_norm_shape){.n = in_size(l), .groups = op->n, .per_affine = (size_t)l->in_h * l->in_w};
        l->w_n = l->b_n = (size_t)l->in_c;
        return 0;
    case NN_OP_LAYERNORM:
        if (seq) { /* over each token's vector */
            l->rows = l->in_h;
            l->norm = (nn_norm_shape){.n = (size_t)l->in_w, .groups = 1, .per_affine = 1};
            l->w_n = l->b_n = (size_t)l->in_w;
            return 0;
        }
        l->norm = (nn_norm_shape){.n = in_size(l), .groups = 1, .per_affine = 1};
        l->w_n = l->b_n = in_size(l);
        return 0;
    default:
        return 0;
    }
}

/* The layers of an expanded spec; residual blocks become their layers and an
 * NN_ADD whose input shape must be the block's. */
static int build(nn_model *m, const char *expanded, char *err, size_t errlen)
{
    nn_spec_op ops[NN_SPEC_MAX_OPS];
    const int n = nn_spec_parse(expanded, ops, NN_SPEC_MAX_OPS, err, errlen);
    if (n < 0)
        return n;
    int open[NN_SPEC_MAX_OPS], depth = 0; /* per open block: the layer before it */
    for (int i = 0; i < n; i++) {
        const nn_spec_op *op = &ops[i];
        if (op->kind == NN_OP_RES_BEGIN) {
            open[depth++] = m->n_layers - 1;
            continue;
        }
        if (op->kind == NN_OP_RES_END) {
            const int skip = open[--depth];
            nn_layer *l = push(m, NN_ADD, "add", err, errlen);
            if (!l)
                return -EINVAL;
            const int c = skip < 0 ? m->in_c : m->layer[skip].out_c, h = skip < 0 ? m->in_h : m->layer[skip].out_h,
                      w = skip < 0 ? m->in_w : m->layer[skip].out_w;
            if (l->in_c != c || l->in_h != h || l->in_w != w)
                return misfit(m, l, op, err, errlen,
                              "the block ends with %dx%dx%d, its input is %dx%dx%d (a residual block keeps the shape)",
                              l->in_c, l->in_h, l->in_w, c, h, w);
            l->skip = skip;
            continue;
        }
        int last = 1;
        for (int j = i + 1; j < n && last; j++)
            last = ops[j].kind == NN_OP_RES_END;
        int rc = add_op(m, op, last, err, errlen);
        if (rc < 0)
            return rc;
    }
    const nn_layer *l = &m->layer[m->n_layers - 1];
    if (nn_model_is_seq(m)) {
        if (l->out_w != m->n_classes) {
            snprintf(err, errlen, "model '%s': the last layer (%s) gives %d outputs a token, the data has %d classes "
                     "(end with fc)", m->spec, l->name, l->out_w, m->n_classes);
            return -EINVAL;
        }
        return 0;
    }
    m->tokens = 1;
    if (out_size(l) != (size_t)m->n_classes) {
        snprintf(err, errlen, "model '%s': the last layer (%s) gives %zu outputs, the data has %d classes (end with fc)",
                 m->spec, l->name, out_size(l), m->n_classes);
        return -EINVAL;
    }
    return 0;
}

/* Floats a layer keeps from forward to backward: a conv layer's patches
 * (each its own: backward reuses forward's), a dropout mask, norm statistics. */
static size_t work_size(const nn_layer *l, int B)
{
    switch (l->kind) {
    case NN_CONV2D:
        return nn_conv2d_workspace(&l->conv, B);
    case NN_DROPOUT:
    case NN_GELU: /* the derivative, kept by the forward pass */
        return (size_t)B * out_size(l);
    case NN_NORM:
        return 2 * (size_t)B * l->rows * l->norm.groups;
    case NN_ATTN:
        return nn_attention_workspace(B, l->in_h, l->heads);
    default:
        return 0;
    }
}

/* Lays out the three blocks once the layer list is known. */
static int allocate(nn_model *m)
{
    size_t n_params = 0, n_acts = 0, n_work = 0, n_argmax = 0;
    for (int i = 0; i < m->n_layers; i++) {
        nn_layer *l = &m->layer[i];
        l->w_off = n_params, n_params += l->w_n;
        l->b_off = n_params, n_params += l->b_n;
        if (l->kind != NN_FLATTEN)
            n_acts += 2 * out_size(l);
        n_work += work_size(l, m->max_batch);
        if (l->kind == NN_MAXPOOL)
            n_argmax += out_size(l);
    }
    const size_t B = (size_t)m->max_batch;
    m->n_params = n_params;
    m->bytes = (2 * n_params + B * n_acts + B * (size_t)m->tokens * m->n_classes + n_work) * sizeof(float) +
               B * n_argmax * sizeof(int) + (nn_model_is_seq(m) ? B * m->tokens * (sizeof(float) + sizeof(int)) : 0);
    m->params = calloc(n_params ? n_params : 1, sizeof(float));
    m->grads = calloc(n_params ? n_params : 1, sizeof(float));
    m->acts = calloc(B * n_acts + B * (size_t)m->tokens * m->n_classes, sizeof(float));
    m->work = n_work ? calloc(n_work, sizeof(float)) : NULL;
    m->argmax = n_argmax ? calloc(B * n_argmax, sizeof(int)) : NULL;
    if (nn_model_is_seq(m)) {
        m->seq_x = malloc(B * m->tokens * sizeof(float));
        m->seq_y = malloc(B * m->tokens * sizeof(int));
        if (!m->seq_x || !m->seq_y)
            return -ENOMEM;
    }
    if (!m->params || !m->grads || !m->acts || (n_work && !m->work) || (n_argmax && !m->argmax))
        return -ENOMEM;
    float *a = m->acts, *work = m->work;
    int *am = m->argmax;
    for (int i = 0; i < m->n_layers; i++) {
        nn_layer *l = &m->layer[i];
        if (l->kind == NN_FLATTEN) {
            /* NCHW samples are already flat: flatten is a view of its input.
             * A leading flatten aliases the caller's input, set per batch. */
            l->out = i ? m->layer[i - 1].out : NULL;
            l->dout = i ? m->layer[i - 1].dout : NULL;
            continue;
        }
        l->out = a, a += B * out_size(l);
        l->dout = a, a += B * out_size(l);
        if (l->kind == NN_MAXPOOL)
            l->argmax = am, am += B * out_size(l);
        if (work_size(l, m->max_batch))
            l->work = work, work += work_size(l, m->max_batch);
    }
    m->probs = a;
    return 0;
}

int nn_eval_batch(int train_batch, int tokens)
{
    const int eval = tokens > 1 ? (NN_EVAL_TOKENS + tokens - 1) / tokens : NN_EVAL_SAMPLES;
    return train_batch > eval ? train_batch : eval;
}

int nn_model_init(nn_model *m, const char *spec, int c, int h, int w, int n_classes, int max_batch,
                  uint64_t seed, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (!spec || strlen(spec) >= sizeof m->spec) {
        snprintf(err, errlen, "model spec missing or longer than %zu characters", sizeof m->spec - 1);
        return -EINVAL;
    }
    if (c <= 0 || h <= 0 || w <= 0 || n_classes < 2 || max_batch < 0) {
        snprintf(err, errlen, "model '%s': bad input shape %dx%dx%d, %d classes or batch %d", spec, c, h, w,
                 n_classes, max_batch);
        return -EINVAL;
    }
    strcpy(m->spec, spec);
    m->in_c = c, m->in_h = h, m->in_w = w, m->n_classes = n_classes, m->max_batch = max_batch;
    char *expanded = malloc(NN_SPEC_MAX_EXPANDED);
    int rc = expanded ? nn_spec_expand(spec, expanded, NN_SPEC_MAX_EXPANDED, err, errlen) : -ENOMEM;
    if (rc == 0)
        rc = build(m, expanded, err, errlen);
    free(expanded);
    if (rc == 0 && max_batch == NN_EVAL_ONLY)
        m->max_batch = nn_eval_batch(1, nn_model_is_seq(m) ? m->tokens : 0);
    if (rc == 0 && (rc = allocate(m)) < 0)
        snprintf(err, errlen, "model '%s': out of memory", spec);
    if (rc < 0) {
        nn_model_free(m);
        return rc;
    }
    nn_model_init_params(m, seed);
    return 0;
}

void nn_model_drop_params(nn_model *m)
{
    if (!m->params)
        return;
    free(m->params);
    m->params = NULL;
    m->bytes -= m->n_params * sizeof(float);
}

void nn_model_keep_shape(nn_model *m)
{
    free(m->params), free(m->grads), free(m->acts), free(m->work), free(m->argmax), free(m->seq_x), free(m->seq_y);
    m->params = m->grads = m->acts = m->probs = m->work = m->seq_x = NULL;
    m->argmax = m->seq_y = NULL;
    for (int i = 0; i < m->n_layers; i++) {
        nn_layer *l = &m->layer[i];
        l->out = l->dout = l->work = NULL;
        l->argmax = NULL;
    }
    m->bytes = 0;
}

void nn_model_free(nn_model *m)
{
    if (!m)
        return;
    nn_model_keep_shape(m);
    memset(m, 0, sizeof *m);
}

/* GPT-2's initialisation for sequence models: every matrix N(0, 0.02), and
 * the projection that closes a residual block N(0, 0.02 / sqrt(R)) for R
 * blocks, so the residual stream's variance does not grow with depth. */
static double seq_std(const nn_model *m, int i)
{
    if (i + 1 < m->n_layers && m->layer[i + 1].kind == NN_ADD) {
        int blocks = 0;
        for (int j = 0; j < m->n_layers; j++)
            blocks += m->layer[j].kind == NN_ADD;
        return 0.02 / sqrt((double)blocks);
    }
    return 0.02;
}

void nn_model_fill_params(const nn_model *m, uint64_t seed, float *dst)
{
    const int seq = nn_model_is_seq(m);
    /* One stream per layer, so adding a layer does not reshuffle the others. */
    for (int i = 0; i < m->n_layers; i++) {
        const nn_layer *l = &m->layer[i];
        if (!l->w_n)
            continue;
        if (l->kind == NN_NORM) { /* the identity at first: gamma 1, beta 0 */
            for (size_t j = 0; j < l->w_n; j++)
                dst[l->w_off + j] = 1.0f;
            memset(dst + l->b_off, 0, l->b_n * sizeof(float));
            continue;
        }
        nn_rng r;
        nn_rng_seed(&r, seed, 0x6e6e0000u + (uint64_t)i);
        double std = seq ? seq_std(m, i) : sqrt(2.0 / (double)(l->w_n / l->b_n)); /* He: keeps ReLU's scale */
        float *W = dst + l->w_off;
        for (size_t j = 0; j < l->w_n; j++)
            W[j] = (float)(std * nn_rng_normal(&r));
        memset(dst + l->b_off, 0, l->b_n * sizeof(float));
    }
}

void nn_model_init_params(nn_model *m, uint64_t seed)
{
    m->seed = seed, m->steps = 0;
    nn_model_fill_params(m, seed, m->params);
}

static const float *layer_input(const nn_model *m, int i, const float *x)
{
    return i == 0 ? x : m->layer[i - 1].out;
}

/* The input of a residual block's sum: the output of the layer before the
 * block, or the model's input. */
static const float *skip_input(const nn_model *m, const nn_layer *l, const float *x)
{
    return l->skip < 0 ? x : m->layer[l->skip].out;
}

static const float *forward(nn_model *m, const float *x, int B, int train)
{
    const float *P = m->params;
    for (int i = 0; i < m->n_layers; i++) {
        nn_layer *l = &m->layer[i];
        const float *in = layer_input(m, i, x);
        const size_t n = (size_t)B * in_size(l);
        switch (l->kind) {
        case NN_DENSE:
            nn_dense_forward(in, B * l->rows, (int)(in_size(l) / l->rows), l->out_w, P + l->w_off, P + l->b_off,
                             l->out);
            break;
        case NN_EMBED:
            nn_embed_forward(in, n, m->n_classes, l->out_w, P + l->w_off, l->out);
            break;
        case NN_POS:
            nn_pos_forward(in, B, l->in_h, l->in_w, P + l->w_off, l->out);
            break;
        case NN_ATTN:
            nn_attention_forward(in, B, l->in_h, l->out_w, l->heads, l->out, l->work);
            break;
        case NN_RELU:
            nn_relu_forward(in, n, l->out);
            break;
        case NN_GELU:
            if (train)
                nn_gelu_forward_keep(in, n, l->out, l->work);
            else
                nn_gelu_forward(in, n, l->out);
            break;
        case NN_TANH:
            nn_tanh_forward(in, n, l->out);
            break;
        case NN_CONV2D:
            nn_conv2d_forward(&l->conv, in, B, P + l->w_off, P + l->b_off, l->out, l->work);
            break;
        case NN_MAXPOOL:
            nn_maxpool_forward(l->in_c, l->in_h, l->in_w, l->k, l->stride, in, B, l->out, l->argmax);
            break;
        case NN_AVGPOOL:
            nn_avgpool_forward(l->in_c, l->in_h, l->in_w, l->k, l->stride, in, B, l->out);
            break;
        case NN_DROPOUT:
            if (train && l->p > 0.0f) {
                nn_rng r; /* a new mask every step, the same for the same (seed, steps) */
                nn_rng_seed(&r, m->seed ^ (m->steps * 0x9e3779b97f4a7c15ULL), 0x64720000u + (uint64_t)i);
                nn_dropout_forward(in, n, l->p, &r, l->work, l->out);
            } else {
                memcpy(l->out, in, n * sizeof(float));
                if (train)
                    for (size_t j = 0; j < n; j++)
                        l->work[j] = 1.0f;
            }
            break;
        case NN_NORM:
            nn_norm_forward(&l->norm, in, B * l->rows, P + l->w_off, P + l->b_off, l->out, l->work);
            break;
        case NN_ADD: {
            const float *s2 = skip_input(m, l, x);
            for (size_t j = 0; j < n; j++)
                l->out[j] = in[j] + s2[j];
            break;
        }
        case NN_FLATTEN:
            l->out = (float *)in; /* a view; see allocate() */
            break;
        }
    }
    return m->layer[m->n_layers - 1].out;
}

const float *nn_model_forward(nn_model *m, const float *x, int B) { return forward(m, x, B, 0); }

/* The first of the largest logits. */
static int argmax(const float *z, int K)
{
    int best = 0;
    for (int j = 1; j < K; j++)
        if (z[j] > z[best])
            best = j;
    return best;
}

static int count_correct(const float *logits, const int *y, int B, int K)
{
    int correct = 0;
    for (int i = 0; i < B; i++)
        correct += argmax(logits + (size_t)i * K, K) == y[i];
    return correct;
}

float nn_model_grad(nn_model *m, const float *x, const int *y, int B, int *correct)
{
    const float *logits = forward(m, x, B, 1);
    m->steps++;
    nn_layer *last = &m->layer[m->n_layers - 1];
    const int rows = B * m->tokens; /* every position of a sequence is a prediction */
    float loss = nn_softmax_xent(logits, y, rows, m->n_classes, m->probs, last->dout);
    if (correct)
        *correct = count_correct(logits, y, rows, m->n_classes);

    const float *P = m->params;
    float *G = m->grads;
    for (int i = m->n_layers - 1; i >= 0; i--) {
        nn_layer *l = &m->layer[i];
        const float *in = layer_input(m, i, x);
        /* The first layer's input gradient is never needed: skip that product. */
        float *din = NULL;
        for (int j = i - 1; j >= 0 && !din; j--)
            if (m->layer[j].kind != NN_FLATTEN)
                din = m->layer[j].dout;
        const size_t n = (size_t)B * in_size(l);
        if (!din && !l->w_n)
            continue; /* nothing to compute: no parameters, no gradient wanted */
        switch (l->kind) {
        case NN_DENSE:
            nn_dense_backward(in, l->dout, B * l->rows, (int)(in_size(l) / l->rows), l->out_w, P + l->w_off,
                              G + l->w_off, G + l->b_off, din);
            break;
        case NN_EMBED:
            nn_embed_backward(in, l->dout, n, m->n_classes, l->out_w, G + l->w_off);
            break;
        case NN_POS:
            nn_pos_backward(l->dout, B, l->in_h, l->in_w, G + l->w_off, din);
            break;
        case NN_ATTN:
            nn_attention_backward(in, l->dout, B, l->in_h, l->out_w, l->heads, din, l->work);
            break;
        case NN_RELU:
            nn_relu_backward(l->out, l->dout, n, din);
            break;
        case NN_GELU:
            for (size_t k = 0; k < n; k++)
                din[k] = l->dout[k] * l->work[k];
            break;
        case NN_TANH:
            nn_tanh_backward(l->out, l->dout, n, din);
            break;
        case NN_AVGPOOL:
            nn_avgpool_backward(l->in_c, l->in_h, l->in_w, l->k, l->stride, l->dout, B, din);
            break;
        case NN_DROPOUT:
            nn_dropout_backward(l->work, l->dout, n, din);
            break;
        case NN_NORM:
            nn_norm_backward(&l->norm, in, l->dout, B * l->rows, P + l->w_off, l->work, G + l->w_off, G + l->b_off,
                             din);
            break;
        case NN_ADD:
            memcpy(din, l->dout, n * sizeof(float));
            break;
        case NN_CONV2D:
            nn_conv2d_backward(&l->conv, in, l->dout, B, P + l->w_off, G + l->w_off, G + l->b_off, din, l->work);
            break;
        case NN_MAXPOOL:
            nn_maxpool_backward(l->in_c, l->in_h, l->in_w, l->k, l->stride, l->dout, l->argmax, B, din);
            break;
        case NN_FLATTEN:
            break;
        }
        /* Layer i opens the residual blocks that end in an NN_ADD with skip
         * i - 1: the sum's gradient also flows to the block's input. */
        if (din)
            for (int j = i + 1; j < m->n_layers; j++) {
                const nn_layer *a = &m->layer[j];
                if (a->kind == NN_ADD && a->skip == i - 1)
                    for (size_t k = 0; k < n; k++)
                        din[k] += a->dout[k];
            }
    }
    return loss;
}

/* Text: every evaluation window, each position a prediction. */
static void evaluate_text(nn_model *m, const nn_dataset *d, double *total_loss, long *correct, long *count)
{
    const int n = nn_text_windows(d), T = m->tokens, K = m->n_classes;
    for (int at = 0; at < n; at += m->max_batch) {
        const int B = n - at < m->max_batch ? n - at : m->max_batch;
        for (int i = 0; i < B; i++)
            nn_text_window(d, at + i, m->seq_x + (size_t)i * T, m->seq_y + (size_t)i * T);
        const float *logits = nn_model_forward(m, m->seq_x, B);
        *total_loss += (double)nn_softmax_xent(logits, m->seq_y, B * T, K, m->probs, NULL) * B * T;
        *correct += count_correct(logits, m->seq_y, B * T, K);
    }
    *count = (long)n * T;
}

void nn_model_evaluate(nn_model *m, const float *params, const nn_dataset *d, float *loss, float *accuracy)
{
    float *own = m->params;
    if (params)
        m->params = (float *)params; /* read-only use: forward never writes params */
    const size_t dim = nn_dataset_dim(d);
    double total_loss = 0.0;
    long correct = 0, count = 0;
    if (d->text) {
        if (nn_model_is_seq(m) && d->w == m->tokens) /* else nothing fits: loss and accuracy 0 */
            evaluate_text(m, d, &total_loss, &correct, &count);
    } else {
        for (int at = 0; at < d->n; at += m->max_batch) {
            int B = d->n - at < m->max_batch ? d->n - at : m->max_batch;
            const float *logits = nn_model_forward(m, d->x + (size_t)at * dim, B);
            total_loss += (double)nn_softmax_xent(logits, d->y + at, B, m->n_classes, m->probs, NULL) * B;
            correct += count_correct(logits, d->y + at, B, m->n_classes);
        }
        count = d->n;
    }
    m->params = own;
    if (loss)
        *loss = count ? (float)(total_loss / count) : 0.0f;
    if (accuracy)
        *accuracy = count ? (float)correct / (float)count : 0.0f;
}

void nn_model_predict(nn_model *m, const float *x, int n, int *label, float *probs)
{
    const size_t dim = (size_t)m->in_c * m->in_h * m->in_w;
    const int K = m->n_classes;
    for (int at = 0; at < n; at += m->max_batch) {
        const int B = n - at < m->max_batch ? n - at : m->max_batch;
        const float *logits = nn_model_forward(m, x + (size_t)at * dim, B);
        for (int i = 0; i < B; i++) {
            const float *z = logits + (size_t)i * K;
            const int best = argmax(z, K);
            if (label)
                label[at + i] = best;
            if (probs) {
                float *p = probs + (size_t)(at + i) * K;
                double sum = 0;
                for (int j = 0; j < K; j++)
                    sum += p[j] = expf(z[j] - z[best]);
                for (int j = 0; j < K; j++)
                    p[j] = (float)(p[j] / sum);
            }
        }
    }
}

/* The layer holding view i (weight, then bias, of each layer with parameters);
 * *bias says which of the two. */
static const nn_layer *view_layer(const nn_model *m, int i, int *bias)
{
    for (int l = 0; l < m->n_layers && i >= 0; l++) {
        const nn_layer *L = &m->layer[l];
        if (!L->w_n)
            continue;
        const int views = L->b_n ? 2 : 1; /* embeddings have no bias */
        if (i < views) {
            *bias = i;
            return L;
        }
        i -= views;
    }
    return NULL;
}

int nn_model_view(const nn_model *m, int i, char *name, size_t name_len, size_t *offset, size_t *count)
{
    int bias;
    const nn_layer *L = view_layer(m, i, &bias);
    if (!L)
        return -ENOENT;
    snprintf(name, name_len, "%s.%s", L->name, bias ? "bias" : "weight");
    *offset = bias ? L->b_off : L->w_off;
    *count = bias ? L->b_n : L->w_n;
    return 0;
}

int nn_model_view_shape(const nn_model *m, int i, int64_t dims[4])
{
    int bias;
    const nn_layer *L = view_layer(m, i, &bias);
    if (!L)
        return -ENOENT;
    if (bias) {
        dims[0] = (int64_t)L->b_n;
        return 1;
    }
    switch (L->kind) {
    case NN_DENSE:
        dims[0] = L->out_w, dims[1] = (int64_t)(in_size(L) / L->rows);
        return 2;
    case NN_EMBED:
        dims[0] = m->n_classes, dims[1] = L->out_w;
        return 2;
    case NN_POS:
        dims[0] = L->in_h, dims[1] = L->in_w;
        return 2;
    case NN_CONV2D:
        dims[0] = L->conv.oc, dims[1] = L->conv.ic, dims[2] = dims[3] = L->conv.k;
        return 4;
    default: /* NN_NORM: per channel (group norm) or per input element (layer norm) */
        if (L->w_n == in_size(L) && (L->in_c > 1 || L->in_h > 1)) {
            dims[0] = L->in_c, dims[1] = L->in_h, dims[2] = L->in_w;
            return 3;
        }
        dims[0] = (int64_t)L->w_n;
        return 1;
    }
}
