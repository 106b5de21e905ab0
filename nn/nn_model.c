/* Model construction (spec -> layer list -> one block per role) and the
 * forward/backward drivers over the layer kernels. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_model.h"
#include "nn/nn_rng.h"

static size_t out_size(const nn_layer *l) { return (size_t)l->out_c * l->out_h * l->out_w; }
static size_t in_size(const nn_layer *l) { return (size_t)l->in_c * l->in_h * l->in_w; }

/* Appends a layer taking the previous layer's output shape (or the model input). */
static nn_layer *push(nn_model *m, nn_layer_kind kind, const char *name, char *err, size_t errlen)
{
    if (m->n_layers == NN_MAX_LAYERS) {
        snprintf(err, errlen, "model '%s': more than %d layers", m->spec, NN_MAX_LAYERS);
        return NULL;
    }
    nn_layer *l = &m->layer[m->n_layers];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    int same = 1; /* "fc1", "fc2", ...: numbered per kind, as people name them */
    for (int i = 0; i < m->n_layers; i++)
        same += m->layer[i].kind == kind;
    snprintf(l->name, sizeof l->name, "%s%d", name, same);
    if (m->n_layers == 0) {
        l->in_c = m->in_c, l->in_h = m->in_h, l->in_w = m->in_w;
    } else {
        const nn_layer *p = &m->layer[m->n_layers - 1];
        l->in_c = p->out_c, l->in_h = p->out_h, l->in_w = p->out_w;
    }
    l->out_c = l->in_c, l->out_h = l->in_h, l->out_w = l->in_w;
    m->n_layers++;
    return l;
}

static int add_dense(nn_model *m, int out, char *err, size_t errlen)
{
    nn_layer *l = push(m, NN_DENSE, "fc", err, errlen);
    if (!l)
        return -EINVAL;
    l->out_c = 1, l->out_h = 1, l->out_w = out;
    l->w_n = (size_t)out * in_size(l);
    l->b_n = (size_t)out;
    return 0;
}

static int add_simple(nn_model *m, nn_layer_kind kind, const char *name, char *err, size_t errlen)
{
    nn_layer *l = push(m, kind, name, err, errlen);
    if (!l)
        return -EINVAL;
    if (kind == NN_FLATTEN)
        l->out_c = 1, l->out_h = 1, l->out_w = (int)in_size(l);
    return 0;
}

static int add_conv(nn_model *m, int oc, int k, int pad, char *err, size_t errlen)
{
    nn_layer *l = push(m, NN_CONV2D, "conv", err, errlen);
    if (!l)
        return -EINVAL;
    l->conv = (nn_conv_shape){.ic = l->in_c, .ih = l->in_h, .iw = l->in_w, .oc = oc, .k = k, .stride = 1, .pad = pad};
    if (nn_conv_shape_resolve(&l->conv) < 0) {
        snprintf(err, errlen, "model '%s': a %dx%d convolution does not fit a %dx%d input", m->spec, k, k, l->in_h,
                 l->in_w);
        return -EINVAL;
    }
    l->out_c = oc, l->out_h = l->conv.oh, l->out_w = l->conv.ow;
    l->w_n = (size_t)oc * l->in_c * k * k;
    l->b_n = (size_t)oc;
    return 0;
}

static int add_pool(nn_model *m, int k, char *err, size_t errlen)
{
    nn_layer *l = push(m, NN_MAXPOOL, "pool", err, errlen);
    if (!l)
        return -EINVAL;
    if (l->in_h < k || l->in_w < k) {
        snprintf(err, errlen, "model '%s': a %dx%d pool does not fit a %dx%d input", m->spec, k, k, l->in_h, l->in_w);
        return -EINVAL;
    }
    l->k = k, l->stride = k;
    l->out_h = (l->in_h - k) / k + 1, l->out_w = (l->in_w - k) / k + 1;
    return 0;
}

static int build_mlp(nn_model *m, const char *widths, char *err, size_t errlen)
{
    int rc = add_simple(m, NN_FLATTEN, "flatten", err, errlen);
    const char *p = widths;
    while (rc == 0 && p && *p) {
        char *end;
        long w = (*p >= '0' && *p <= '9') ? strtol(p, &end, 10) : 0; /* no signs or spaces */
        if (w <= 0 || w > 1 << 20 || (*end != ',' && *end != '\0') || (*end == ',' && end[1] == '\0')) {
            snprintf(err, errlen, "model '%s': hidden widths must be positive integers separated by commas",
                     m->spec);
            return -EINVAL;
        }
        rc = add_dense(m, (int)w, err, errlen);
        if (rc == 0)
            rc = add_simple(m, NN_RELU, "relu", err, errlen);
        p = *end ? end + 1 : end;
    }
    return rc ? rc : add_dense(m, m->n_classes, err, errlen);
}

static int build_lenet(nn_model *m, char *err, size_t errlen)
{
    int rc = 0;
    rc = rc ? rc : add_conv(m, 6, 5, 2, err, errlen);
    rc = rc ? rc : add_simple(m, NN_RELU, "relu", err, errlen);
    rc = rc ? rc : add_pool(m, 2, err, errlen);
    rc = rc ? rc : add_conv(m, 16, 5, 0, err, errlen);
    rc = rc ? rc : add_simple(m, NN_RELU, "relu", err, errlen);
    rc = rc ? rc : add_pool(m, 2, err, errlen);
    rc = rc ? rc : add_simple(m, NN_FLATTEN, "flatten", err, errlen);
    rc = rc ? rc : add_dense(m, 120, err, errlen);
    rc = rc ? rc : add_simple(m, NN_RELU, "relu", err, errlen);
    rc = rc ? rc : add_dense(m, 84, err, errlen);
    rc = rc ? rc : add_simple(m, NN_RELU, "relu", err, errlen);
    rc = rc ? rc : add_dense(m, m->n_classes, err, errlen);
    return rc;
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
        if (l->kind == NN_CONV2D) /* one workspace per conv layer: backward reuses forward's patches */
            n_work += nn_conv2d_workspace(&l->conv, m->max_batch);
        if (l->kind == NN_MAXPOOL)
            n_argmax += out_size(l);
    }
    const size_t B = (size_t)m->max_batch;
    m->n_params = n_params;
    m->params = calloc(n_params ? n_params : 1, sizeof(float));
    m->grads = calloc(n_params ? n_params : 1, sizeof(float));
    m->acts = calloc(B * n_acts + B * (size_t)m->n_classes, sizeof(float));
    m->work = n_work ? calloc(n_work, sizeof(float)) : NULL;
    m->argmax = n_argmax ? calloc(B * n_argmax, sizeof(int)) : NULL;
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
        if (l->kind == NN_CONV2D)
            l->work = work, work += nn_conv2d_workspace(&l->conv, m->max_batch);
    }
    m->probs = a;
    return 0;
}

int nn_model_init(nn_model *m, const char *spec, int c, int h, int w, int n_classes, int max_batch,
                  uint64_t seed, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (!spec || strlen(spec) >= sizeof m->spec) {
        snprintf(err, errlen, "model spec missing or too long");
        return -EINVAL;
    }
    if (c <= 0 || h <= 0 || w <= 0 || n_classes < 2 || max_batch <= 0) {
        snprintf(err, errlen, "model '%s': bad input shape %dx%dx%d, %d classes or batch %d", spec, c, h, w,
                 n_classes, max_batch);
        return -EINVAL;
    }
    strcpy(m->spec, spec);
    m->in_c = c, m->in_h = h, m->in_w = w, m->n_classes = n_classes, m->max_batch = max_batch;
    int rc;
    if (strcmp(spec, "mlp") == 0)
        rc = build_mlp(m, NULL, err, errlen);
    else if (strncmp(spec, "mlp:", 4) == 0 && spec[4])
        rc = build_mlp(m, spec + 4, err, errlen);
    else if (strcmp(spec, "lenet") == 0)
        rc = build_lenet(m, err, errlen);
    else {
        snprintf(err, errlen, "unknown model '%s' (expected mlp, mlp:W1,W2,... or lenet)", spec);
        rc = -EINVAL;
    }
    if (rc == 0 && (rc = allocate(m)) < 0)
        snprintf(err, errlen, "model '%s': out of memory", spec);
    if (rc < 0) {
        nn_model_free(m);
        return rc;
    }
    nn_model_init_params(m, seed);
    return 0;
}

void nn_model_free(nn_model *m)
{
    if (!m)
        return;
    free(m->params);
    free(m->grads);
    free(m->acts);
    free(m->work);
    free(m->argmax);
    memset(m, 0, sizeof *m);
}

void nn_model_init_params(nn_model *m, uint64_t seed)
{
    /* One stream per layer, so adding a layer does not reshuffle the others. */
    for (int i = 0; i < m->n_layers; i++) {
        const nn_layer *l = &m->layer[i];
        if (!l->w_n)
            continue;
        nn_rng r;
        nn_rng_seed(&r, seed, 0x6e6e0000u + (uint64_t)i);
        size_t fan_in = l->w_n / l->b_n;
        double std = sqrt(2.0 / (double)fan_in); /* He: keeps ReLU activations' scale */
        float *W = m->params + l->w_off;
        for (size_t j = 0; j < l->w_n; j++)
            W[j] = (float)(std * nn_rng_normal(&r));
        memset(m->params + l->b_off, 0, l->b_n * sizeof(float));
    }
}

static const float *layer_input(const nn_model *m, int i, const float *x)
{
    return i == 0 ? x : m->layer[i - 1].out;
}

const float *nn_model_forward(nn_model *m, const float *x, int B)
{
    const float *P = m->params;
    for (int i = 0; i < m->n_layers; i++) {
        nn_layer *l = &m->layer[i];
        const float *in = layer_input(m, i, x);
        switch (l->kind) {
        case NN_DENSE:
            nn_dense_forward(in, B, (int)in_size(l), l->out_w, P + l->w_off, P + l->b_off, l->out);
            break;
        case NN_RELU:
            nn_relu_forward(in, (size_t)B * in_size(l), l->out);
            break;
        case NN_CONV2D:
            nn_conv2d_forward(&l->conv, in, B, P + l->w_off, P + l->b_off, l->out, l->work);
            break;
        case NN_MAXPOOL:
            nn_maxpool_forward(l->in_c, l->in_h, l->in_w, l->k, l->stride, in, B, l->out, l->argmax);
            break;
        case NN_FLATTEN:
            l->out = (float *)in; /* a view; see allocate() */
            break;
        }
    }
    return m->layer[m->n_layers - 1].out;
}

static int count_correct(const float *logits, const int *y, int B, int K)
{
    int correct = 0;
    for (int i = 0; i < B; i++) {
        const float *z = logits + (size_t)i * K;
        int best = 0;
        for (int j = 1; j < K; j++)
            if (z[j] > z[best])
                best = j;
        correct += best == y[i];
    }
    return correct;
}

float nn_model_grad(nn_model *m, const float *x, const int *y, int B, int *correct)
{
    const float *logits = nn_model_forward(m, x, B);
    nn_layer *last = &m->layer[m->n_layers - 1];
    float loss = nn_softmax_xent(logits, y, B, m->n_classes, m->probs, last->dout);
    if (correct)
        *correct = count_correct(logits, y, B, m->n_classes);

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
        switch (l->kind) {
        case NN_DENSE:
            nn_dense_backward(in, l->dout, B, (int)in_size(l), l->out_w, P + l->w_off, G + l->w_off, G + l->b_off,
                              din);
            break;
        case NN_RELU:
            nn_relu_backward(l->out, l->dout, (size_t)B * in_size(l), din);
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
    }
    return loss;
}

void nn_model_evaluate(nn_model *m, const float *params, const nn_dataset *d, float *loss, float *accuracy)
{
    float *own = m->params;
    if (params)
        m->params = (float *)params; /* read-only use: forward never writes params */
    const size_t dim = nn_dataset_dim(d);
    double total_loss = 0.0;
    long correct = 0;
    for (int at = 0; at < d->n; at += m->max_batch) {
        int B = d->n - at < m->max_batch ? d->n - at : m->max_batch;
        const float *logits = nn_model_forward(m, d->x + (size_t)at * dim, B);
        total_loss += (double)nn_softmax_xent(logits, d->y + at, B, m->n_classes, m->probs, NULL) * B;
        correct += count_correct(logits, d->y + at, B, m->n_classes);
    }
    m->params = own;
    if (loss)
        *loss = d->n ? (float)(total_loss / d->n) : 0.0f;
    if (accuracy)
        *accuracy = d->n ? (float)correct / (float)d->n : 0.0f;
}

int nn_model_view(const nn_model *m, int i, char *name, size_t name_len, size_t *offset, size_t *count)
{
    for (int l = 0; l < m->n_layers; l++) {
        const nn_layer *L = &m->layer[l];
        if (!L->w_n)
            continue;
        if (i == 0 || i == 1) {
            snprintf(name, name_len, "%s.%s", L->name, i == 0 ? "weight" : "bias");
            *offset = i == 0 ? L->w_off : L->b_off;
            *count = i == 0 ? L->w_n : L->b_n;
            return 0;
        }
        i -= 2;
    }
    return -ENOENT;
}
