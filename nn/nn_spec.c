/* The model spec language: presets and the layer-sequence parser (nn_spec.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_spec.h"

static const char *const LENET = "conv:6:5:pad=2,relu,maxpool:2,conv:16:5,relu,maxpool:2,flatten,fc:120,relu,fc:84,"
                                 "relu,fc";

/* gpt:LAYERS:WIDTH:HEADS: GPT-2's block (pre-norm, causal attention with one
 * QKV projection and an output projection, a 4x MLP with GELU) over byte
 * tokens and learned positions, then a final norm and the next-token head.
 * A layer is 12 parsed ops (two res( ) pairs and 8 layers), and embed, pos,
 * ln and fc 4 more: 12 L + 4 must stay under NN_SPEC_MAX_OPS (the parser
 * keeps one spare), so L <= 20. */
#define GPT_MAX_LAYERS ((NN_SPEC_MAX_OPS - 5) / 12)

static int expand_gpt(const char *spec, char *out, size_t outlen, char *err, size_t errlen)
{
    int L, C, H, used = 0;
    const int plain = spec[4 + strspn(spec + 4, "0123456789:")] == '\0'; /* %d alone takes signs and spaces */
    if (!plain || sscanf(spec, "gpt:%d:%d:%d%n", &L, &C, &H, &used) != 3 || spec[used] != '\0' || L < 1 ||
        L > GPT_MAX_LAYERS || C < 1 || C > 8192 || H < 1 || C % H != 0) {
        snprintf(err, errlen,
                 "model '%s': expected gpt:LAYERS:WIDTH:HEADS (layers 1..%d, width 1..8192 a multiple of heads)",
                 spec, GPT_MAX_LAYERS);
        return -EINVAL;
    }
    size_t at = (size_t)snprintf(out, outlen, "embed:%d,pos", C);
    for (int i = 0; i < L && at < outlen; i++)
        at += (size_t)snprintf(out + at, outlen - at, ",res(ln,fc:%d,attn:%d,fc:%d),res(ln,fc:%d,gelu,fc:%d)",
                               3 * C, H, C, 4 * C, C);
    if (at < outlen)
        at += (size_t)snprintf(out + at, outlen - at, ",ln,fc");
    return at < outlen ? 0 : -ENOSPC;
}

int nn_spec_expand(const char *spec, char *out, size_t outlen, char *err, size_t errlen)
{
    size_t at = 0;
    if (strncmp(spec, "gpt:", 4) == 0 || strcmp(spec, "gpt") == 0) {
        int rc = expand_gpt(spec, out, outlen, err, errlen);
        if (rc == -EINVAL)
            return rc;
        at = rc < 0 ? outlen : 0;
    } else if (strcmp(spec, "lenet") == 0) {
        at = (size_t)snprintf(out, outlen, "%s", LENET);
    } else if (strcmp(spec, "mlp") == 0 || strncmp(spec, "mlp:", 4) == 0) {
        /* mlp:W1,W2: flatten, then fc:W and relu for each width, then the class layer */
        at = (size_t)snprintf(out, outlen, "flatten");
        for (const char *p = spec[3] ? spec + 4 : NULL; p && at < outlen;) {
            char *end;
            long w = (*p >= '0' && *p <= '9') ? strtol(p, &end, 10) : 0; /* no signs or spaces */
            if (w <= 0 || w > 1 << 20 || (*end != ',' && *end != '\0') || (*end == ',' && end[1] == '\0')) {
                snprintf(err, errlen, "model '%s': hidden widths must be positive integers separated by commas",
                         spec);
                return -EINVAL;
            }
            at += (size_t)snprintf(out + at, outlen - at, ",fc:%ld,relu", w);
            p = *end ? end + 1 : NULL;
        }
        if (at < outlen)
            at += (size_t)snprintf(out + at, outlen - at, ",fc");
    } else {
        at = (size_t)snprintf(out, outlen, "%s", spec);
    }
    if (at >= outlen) {
        snprintf(err, errlen, "model '%.40s...': longer than %zu characters", spec, outlen - 1);
        return -EINVAL;
    }
    return 0;
}

typedef struct parser {
    const char *spec, *at;
    char *err;
    size_t errlen;
} parser;

static int fail(parser *ps, const char *from, const char *expected)
{
    int len = 0;
    while (from[len] && from[len] != ',' && from[len] != ')' && len < 24)
        len++;
    snprintf(ps->err, ps->errlen, "model '%s': at position %d ('%.*s'): expected %s", ps->spec,
             (int)(from - ps->spec) + 1, len, from, expected);
    return -EINVAL;
}

static int is_word(const char *at, const char *word)
{
    size_t n = strlen(word);
    return strncmp(at, word, n) == 0 && (at[n] == ':' || at[n] == ',' || at[n] == ')' || at[n] == '\0');
}

/* A non-negative integer at ps->at, at most max. */
static int integer(parser *ps, long min, long max, int *v, const char *what)
{
    const char *from = ps->at;
    if (*from < '0' || *from > '9')
        return fail(ps, from, what);
    char *end;
    long x = strtol(from, &end, 10);
    if (x < min || x > max)
        return fail(ps, from, what);
    *v = (int)x;
    ps->at = end;
    return 0;
}

/* ":NAME=INT" options after the positional arguments (stride, pad). */
static int options(parser *ps, nn_spec_op *op, int allow_pad)
{
    while (*ps->at == ':') {
        const char *from = ++ps->at;
        int *v = NULL;
        if (strncmp(from, "stride=", 7) == 0)
            v = &op->stride, ps->at += 7;
        else if (allow_pad && strncmp(from, "pad=", 4) == 0)
            v = &op->pad, ps->at += 4;
        else
            return fail(ps, from, allow_pad ? "stride=S or pad=P" : "stride=S");
        if (integer(ps, v == &op->stride ? 1 : 0, 64, v, v == &op->stride ? "a stride 1..64" : "a padding 0..64") <
            0)
            return -EINVAL;
    }
    return 0;
}

static int positional(parser *ps, long min, long max, int *v, const char *what)
{
    if (*ps->at != ':')
        return fail(ps, ps->at, what);
    ps->at++;
    return integer(ps, min, max, v, what);
}

static int layer(parser *ps, nn_spec_op *op)
{
    const char *from = ps->at;
    *op = (nn_spec_op){.pos = (int)(from - ps->spec) + 1, .stride = 1};
    static const struct {
        const char *word;
        nn_spec_kind kind;
    } plain[] = {{"relu", NN_OP_RELU},       {"gelu", NN_OP_GELU}, {"tanh", NN_OP_TANH},
                 {"flatten", NN_OP_FLATTEN}, {"ln", NN_OP_LAYERNORM}};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (is_word(from, plain[i].word)) {
            op->kind = plain[i].kind;
            ps->at += strlen(plain[i].word);
            return 0;
        }
    if (is_word(from, "fc")) {
        op->kind = NN_OP_FC;
        ps->at += 2;
        return *ps->at == ':' ? positional(ps, 1, 1 << 20, &op->n, "fc:N with N outputs, 1..1048576") : 0;
    }
    if (is_word(from, "conv")) {
        op->kind = NN_OP_CONV;
        ps->at += 4;
        if (positional(ps, 1, 4096, &op->n, "conv:C:K (C output channels, 1..4096)") < 0 ||
            positional(ps, 1, 64, &op->k, "conv:C:K (a K x K kernel, K 1..64)") < 0)
            return -EINVAL;
        return options(ps, op, 1);
    }
    if (is_word(from, "maxpool") || is_word(from, "avgpool")) {
        const int avg = from[0] == 'a';
        op->kind = avg ? NN_OP_AVGPOOL : NN_OP_MAXPOOL;
        ps->at += 7;
        if (avg && *ps->at != ':')
            return 0; /* global */
        if (positional(ps, 1, 64, &op->k, "a pool size K, 1..64") < 0)
            return -EINVAL;
        op->stride = op->k;
        return options(ps, op, 0);
    }
    if (is_word(from, "embed")) {
        op->kind = NN_OP_EMBED;
        ps->at += 5;
        return positional(ps, 1, 1 << 16, &op->n, "embed:C (C, the embedding width, 1..65536)");
    }
    if (is_word(from, "pos")) {
        op->kind = NN_OP_POS;
        ps->at += 3;
        return 0;
    }
    if (is_word(from, "attn")) {
        op->kind = NN_OP_ATTN;
        ps->at += 4;
        return positional(ps, 1, 4096, &op->n, "attn:H (H heads, 1..4096)");
    }
    if (is_word(from, "gn")) {
        op->kind = NN_OP_GROUPNORM;
        ps->at += 2;
        return positional(ps, 1, 4096, &op->n, "gn:G (G groups, 1..4096)");
    }
    if (is_word(from, "dropout")) {
        op->kind = NN_OP_DROPOUT;
        ps->at += 7;
        if (*ps->at != ':')
            return fail(ps, ps->at, "dropout:P with P in [0, 1)");
        const char *num = ++ps->at;
        char *end;
        float p = strtof(num, &end);
        if (end == num || !(p >= 0.0f && p < 1.0f) || (*end != ',' && *end != ')' && *end != '\0'))
            return fail(ps, num, "dropout:P with P in [0, 1)");
        op->p = p;
        ps->at = end;
        return 0;
    }
    return fail(ps, from,
                "a layer (fc, conv, maxpool, avgpool, relu, gelu, tanh, flatten, dropout, gn, ln, embed, pos, attn, "
                "res(...)) or a preset (mlp, mlp:W1,W2,..., lenet, gpt:L:C:H); see nn/MODELS.md");
}

int nn_spec_parse(const char *spec, nn_spec_op *ops, int max_ops, char *err, size_t errlen)
{
    parser ps = {spec, spec, err, errlen};
    int n = 0, depth = 0;
    for (;;) {
        if (n + 2 > max_ops)
            return fail(&ps, ps.at, "no more layers (at most 256, residual blocks counting two)");
        if (strncmp(ps.at, "res(", 4) == 0) {
            ops[n++] = (nn_spec_op){.kind = NN_OP_RES_BEGIN, .pos = (int)(ps.at - spec) + 1};
            ps.at += 4;
            depth++;
            continue;
        }
        if (layer(&ps, &ops[n]) < 0)
            return -EINVAL;
        n++;
        while (*ps.at == ')') {
            if (depth == 0)
                return fail(&ps, ps.at, "',' or the end (this ')' closes no res( )");
            ops[n++] = (nn_spec_op){.kind = NN_OP_RES_END, .pos = (int)(ps.at - spec) + 1};
            ps.at++;
            depth--;
            if (n + 1 > max_ops)
                return fail(&ps, ps.at, "no more layers (at most 256, residual blocks counting two)");
        }
        if (*ps.at == '\0')
            break;
        if (*ps.at != ',')
            return fail(&ps, ps.at, depth ? "',' or ')'" : "',' or the end");
        ps.at++;
    }
    if (depth > 0)
        return fail(&ps, ps.at, "')' to close res(");
    return n;
}
