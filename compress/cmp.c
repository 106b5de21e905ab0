/* The codec registry, spec parsing and the common message header
 * (codec id byte, varint n). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "compress/bitio.h"
#include "compress/cmp.h"
#include "compress/cmp_select.h"

extern const cmp_ops cmp_none, cmp_fp16, cmp_bf16, cmp_topk, cmp_randk, cmp_qsgd, cmp_terngrad, cmp_natural,
    cmp_sign, cmp_stc, cmp_sketch, cmp_sparseloco;

static const cmp_ops *const registry[] = {
    &cmp_none, &cmp_fp16, &cmp_bf16, &cmp_topk, &cmp_randk, &cmp_qsgd,
    &cmp_terngrad, &cmp_natural, &cmp_sign, &cmp_stc, &cmp_sketch, &cmp_sparseloco, NULL,
};

const cmp_ops *const *cmp_codecs(void) { return registry; }

const cmp_ops *cmp_find(const char *name)
{
    for (int i = 0; registry[i]; i++)
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    return NULL;
}

const cmp_ops *cmp_find_id(uint8_t id)
{
    for (int i = 0; registry[i]; i++)
        if (registry[i]->id == id)
            return registry[i];
    return NULL;
}

int cmp_spec_parse(cmp_spec *s, const char *text, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (!text || strlen(text) >= sizeof s->text) {
        snprintf(err, errlen, "codec spec missing or too long");
        return -EINVAL;
    }
    char name[sizeof s->text];
    strcpy(name, text);
    char *args = strchr(name, ':');
    if (args)
        *args++ = 0;
    s->ops = cmp_find(name);
    if (!s->ops) {
        int n = snprintf(err, errlen, "unknown codec '%s' (one of:", name);
        for (int i = 0; registry[i] && n > 0 && (size_t)n < errlen; i++)
            n += snprintf(err + n, errlen - (size_t)n, " %s", registry[i]->name);
        if (n > 0 && (size_t)n < errlen)
            snprintf(err + n, errlen - (size_t)n, ")");
        return -EINVAL;
    }
    strcpy(s->text, text);
    return s->ops->parse(s, args, err, errlen);
}

int cmp_parse_no_args(cmp_spec *s, const char *args, char *err, size_t errlen)
{
    if (args) {
        snprintf(err, errlen, "%s: takes no parameters (got '%s:%s')", s->ops->name, s->ops->name, args);
        return -EINVAL;
    }
    return 0;
}

size_t cmp_bound(const cmp_spec *s, size_t n) { return CMP_HEADER_MAX + s->ops->bound(s, n); }

size_t cmp_work_size(const cmp_spec *s, size_t n) { return s->ops->work ? s->ops->work(s, n) : 0; }

/* A message's common header into out (cap checked): its length, or a negative errno. */
static long header(const cmp_spec *s, size_t n, uint8_t *out, size_t cap)
{
    if (n > CMP_MAX_N)
        return -EINVAL;
    if (cap < cmp_bound(s, n))
        return -ENOSPC;
    out[0] = s->ops->id;
    return 1 + (long)cmp_varint_put(out + 1, n);
}

/* The whole length of a message whose payload after h header bytes is body long (or body's errno). */
static long whole(long h, long body) { return h < 0 ? h : body < 0 ? body : h + body; }

long cmp_encode(const cmp_spec *s, const float *x, size_t n, uint64_t seed, void *work, uint8_t *out, size_t cap)
{
    const long h = header(s, n, out, cap);
    return whole(h, h < 0 ? 0 : s->ops->encode(s, x, n, seed, work, out + h, cap - (size_t)h));
}

/* The codec of a message that declares exactly n values, and where its payload starts; NULL if malformed. */
static const cmp_ops *msg_codec(const uint8_t *in, size_t len, size_t n, size_t *body)
{
    if (len < 2)
        return NULL;
    const cmp_ops *ops = cmp_find_id(in[0]);
    uint64_t declared;
    size_t used;
    if (!ops || cmp_varint_get(in + 1, len - 1, &used, &declared) < 0 || declared != n)
        return NULL;
    *body = 1 + used;
    return ops;
}

int cmp_decode_add(const uint8_t *in, size_t len, size_t n, float alpha, float *dst)
{
    size_t h;
    const cmp_ops *ops = msg_codec(in, len, n, &h);
    return ops ? ops->decode_add(in + h, len - h, n, alpha, dst) : -EBADMSG;
}

int cmp_decode(const uint8_t *in, size_t len, size_t n, float *dst)
{
    uint64_t declared;
    size_t used;
    if (len < 2 || cmp_varint_get(in + 1, len - 1, &used, &declared) < 0 || declared != n)
        return -EBADMSG; /* before touching dst: a wrong n must not make us clear past its end */
    memset(dst, 0, n * sizeof *dst);
    return cmp_decode_add(in, len, n, 1.0f, dst);
}

size_t cmp_sparse_bound(const cmp_spec *s, size_t n)
{
    /* The sparse codecs send cmp_select_k(fraction, n) entries, unless they say otherwise. */
    if (s->ops->sparse_max)
        return s->ops->sparse_max(s, n);
    return s->ops->decode_sparse ? cmp_select_k(s->fraction, n) : 0;
}

long cmp_decode_sparse(const uint8_t *in, size_t len, size_t n, uint32_t *idx, float *val, size_t cap)
{
    size_t h;
    const cmp_ops *ops = msg_codec(in, len, n, &h);
    if (!ops)
        return -EBADMSG;
    return ops->decode_sparse ? ops->decode_sparse(in + h, len - h, n, idx, val, cap) : -ENOTSUP;
}

long cmp_encoded_sparse(const cmp_spec *s, const float *x, size_t n, const void *work, uint32_t *idx, float *val,
                        size_t cap)
{
    return s->ops->encoded_sparse ? s->ops->encoded_sparse(s, x, n, work, idx, val, cap) : -ENOTSUP;
}

int cmp_stream_begin(const cmp_spec *s, size_t n, uint64_t seed, void *work, cmp_list *c)
{
    if (!s->ops->encode_list || n == 0)
        return -ENOTSUP;
    return cmp_select_stream(n, cmp_select_k(s->fraction, n), seed, work, c);
}

int cmp_stream_threshold(const cmp_spec *s, cmp_list *c, size_t n, void *work, uint32_t *t)
{
    return cmp_select_stream_threshold(c, n, cmp_select_k(s->fraction, n), work, t);
}

long cmp_encode_list(const cmp_spec *s, const cmp_list *c, size_t n, void *work, uint8_t *out, size_t cap)
{
    if (!s->ops->encode_list)
        return -EINVAL;
    const long h = header(s, n, out, cap);
    return whole(h, h < 0 ? 0 : s->ops->encode_list(s, c, n, work, out + h, cap - (size_t)h));
}

size_t cmp_chunks(const cmp_spec *s, size_t n)
{
    return s->ops->encode_chunks && n <= CMP_MAX_N ? (n + s->chunk - 1) / s->chunk : 0;
}

size_t cmp_chunk_work(const cmp_spec *s, size_t n) { return s->ops->chunk_work ? s->ops->chunk_work(s, n) : 0; }

int cmp_encode_chunks(const cmp_spec *s, const float *x, size_t n, size_t c0, size_t c1, void *select, void *work)
{
    if (!s->ops->encode_chunks || c1 > cmp_chunks(s, n) || c0 > c1)
        return -EINVAL;
    return s->ops->encode_chunks(s, x, n, c0, c1, select, work);
}

long cmp_encode_chosen(const cmp_spec *s, size_t n, void *work, uint8_t *out, size_t cap)
{
    if (!s->ops->encode_chosen)
        return -EINVAL;
    const long h = header(s, n, out, cap);
    return whole(h, h < 0 ? 0 : s->ops->encode_chosen(s, n, work, out + h, cap - (size_t)h));
}

const float *cmp_selected_values(const cmp_spec *s, size_t n, const void *work)
{
    /* the top-k codecs, and only they, stream: their workspace is cmp_select_chosen_work's */
    if (!s->ops->encode_list || n == 0)
        return NULL;
    return cmp_chosen_val(work, n, cmp_select_k(s->fraction, n));
}

long cmp_values_begin(const cmp_spec *s, size_t n, uint8_t *out, size_t cap, cmp_values *v)
{
    if (!s->ops->width)
        return -ENOTSUP;
    const long h = header(s, n, out, cap);
    if (h < 0)
        return h;
    *v = (cmp_values){.spec = s, .ops = s->ops, .width = s->ops->width, .at = (size_t)h};
    return (long)((size_t)h + s->ops->width * n);
}

void cmp_values_write(const cmp_values *v, uint8_t *out, size_t at, const float *x, size_t m)
{
    /* (these codecs encode each value alone: a block's bytes are the whole message's there) */
    (void)v->ops->encode(v->spec, x, m, 0, NULL, out + v->at + v->width * at, v->width * m);
}

int cmp_values_of(const uint8_t *in, size_t len, size_t n, cmp_values *v)
{
    size_t h;
    const cmp_ops *ops = msg_codec(in, len, n, &h);
    if (!ops)
        return -EBADMSG;
    if (!ops->width)
        return -ENOTSUP;
    if (len - h != ops->width * n)
        return -EBADMSG;
    *v = (cmp_values){.ops = ops, .width = ops->width, .at = h};
    return 0;
}

void cmp_values_read(const cmp_values *v, const uint8_t *in, size_t at, size_t m, float *dst)
{
    memset(dst, 0, m * sizeof *dst); /* (0 + 1 * value, as cmp_decode) */
    (void)v->ops->decode_add(in + v->at + v->width * at, v->width * m, m, 1.0f, dst);
}
