/* topk:FRACTION[:sampled] — the k = max(1, round(FRACTION n)) entries of
 * largest magnitude, exactly (ties at the threshold to the lowest indices),
 * as f32 values plus their positions.
 *
 * Payload (compress/FORMAT.md, "topk"):
 *
 *   varint k | u8 b | f32 value[k] | Rice(b) position gaps, zero-padded to a byte
 *
 * The values come first and byte-aligned so that both ends move them with
 * plain loads and stores; the gaps follow as one bit stream with the Rice
 * parameter b that minimises its length for these very gaps
 * (cmp_select_rice). `:sampled` only changes how the encoder finds the
 * threshold (DGC-style, from a seeded sample, see cmp_select.h); the message,
 * and even its bytes, are the same as without it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "compress/bitio.h"
#include "compress/cmp.h"
#include "compress/cmp_select.h"

static size_t varint_len(uint64_t v)
{
    size_t l = 1;
    while (v >= 0x80)
        v >>= 7, l++;
    return l;
}

static int finite_bits(uint32_t u) { return (u & 0x7f800000u) != 0x7f800000u; }

static int topk_parse(cmp_spec *s, const char *args, char *err, size_t errlen)
{
    char buf[sizeof s->text];
    if (!args) {
        snprintf(err, errlen, "topk: missing FRACTION, usage: topk:FRACTION[:sampled]");
        return -EINVAL;
    }
    snprintf(buf, sizeof buf, "%s", args);
    char *opt = strchr(buf, ':');
    if (opt)
        *opt++ = 0;
    int rc = cmp_select_fraction_parse("topk", buf, &s->fraction, err, errlen);
    if (rc < 0)
        return rc;
    if (opt) {
        if (strcmp(opt, "sampled") != 0) {
            snprintf(err, errlen, "topk: unknown option '%s' (the only one is 'sampled')", opt);
            return -EINVAL;
        }
        s->sampled = 1;
    }
    return 0;
}

static size_t topk_bound(const cmp_spec *s, size_t n)
{
    size_t k = cmp_select_k(s->fraction, n);
    return varint_len(k) + 1 + 4 * k + (size_t)((cmp_select_rice_bits_max(n, k) + 7) / 8);
}

/* The selection's workspace and what it chose (cmp_select_chosen_work). */
static size_t topk_work(const cmp_spec *s, size_t n)
{
    return cmp_select_chosen_work(n, cmp_select_k(s->fraction, n));
}

/* The message for the k selected positions idx (ascending) with their
 * values val. */
static long topk_write(const uint32_t *idx, const float *val, size_t k, size_t n, uint8_t *out, size_t cap)
{
    const size_t h = varint_len(k) + 1;
    uint8_t *vb = out + h;
    for (size_t j = 0; j < k; j++) {
        uint32_t u;
        memcpy(&u, val + j, sizeof u);
        /* NaN and inf rank above every finite magnitude, so if x has any the
         * top k holds one: this check covers all of x. */
        if (!finite_bits(u))
            return -EINVAL;
        vb[4 * j + 0] = (uint8_t)u;
        vb[4 * j + 1] = (uint8_t)(u >> 8);
        vb[4 * j + 2] = (uint8_t)(u >> 16);
        vb[4 * j + 3] = (uint8_t)(u >> 24);
    }
    uint64_t bits;
    int b = cmp_select_rice(idx, k, n, &bits);
    out[cmp_varint_put(out, k)] = (uint8_t)b;

    cmp_bitw w;
    cmp_bitw_init(&w, vb + 4 * k, cap - h - 4 * k);
    uint32_t next = 0;
    for (size_t j = 0; j < k; j++) {
        cmp_bitw_rice(&w, idx[j] - next, b);
        next = idx[j] + 1;
    }
    long len = cmp_bitw_finish(&w);
    return len < 0 ? len : (long)(h + 4 * k) + len;
}

/* The message of x, or (x NULL) of the candidate list c. */
static long topk_select(const cmp_spec *s, const float *x, const cmp_list *c, size_t n, uint64_t seed, void *work,
                        uint8_t *out, size_t cap)
{
    size_t k = cmp_select_k(s->fraction, n);
    if (cap < varint_len(k) + 1 + 4 * k)
        return -ENOSPC;
    if (k == 0) { /* n == 0: no selection, and work may be NULL */
        out[0] = 0;
        out[1] = 0;
        return 2;
    }
    int rc = cmp_select_chosen(x, c, n, k, seed, s->sampled, work);
    return rc < 0 ? rc : topk_write(cmp_chosen_idx(work, n), cmp_chosen_val(work, n, k), k, n, out, cap);
}

static long topk_encode(const cmp_spec *s, const float *x, size_t n, uint64_t seed, void *work, uint8_t *out,
                        size_t cap)
{
    return topk_select(s, x, NULL, n, seed, work, out, cap);
}

static long topk_encode_list(const cmp_spec *s, const cmp_list *c, size_t n, void *work, uint8_t *out, size_t cap)
{
    return topk_select(s, NULL, c, n, 0, work, out, cap);
}

/* The header: k and Rice parameter b, the k values checked finite; *val and
 * *pos are where the values and the positions start, *plen the positions' bytes. */
static int topk_header(const uint8_t *in, size_t len, size_t n, uint64_t *k, int *b, const uint8_t **val,
                       const uint8_t **pos, size_t *plen)
{
    size_t used;
    if (cmp_varint_get(in, len, &used, k) < 0 || *k > n || len - used < 1 || in[used] > 31)
        return -EBADMSG;
    *b = in[used];
    size_t h = used + 1;
    if ((len - h) / 4 < *k)
        return -EBADMSG;
    *val = in + h;
    for (size_t j = 0; j < *k; j++) {
        const uint8_t *v = *val + 4 * j;
        uint32_t u = (uint32_t)v[0] | (uint32_t)v[1] << 8 | (uint32_t)v[2] << 16 | (uint32_t)v[3] << 24;
        if (!finite_bits(u))
            return -EBADMSG;
    }
    *pos = *val + 4 * *k;
    *plen = len - h - 4 * *k;
    return 0;
}

static int topk_decode_add(const uint8_t *in, size_t len, size_t n, float alpha, float *dst)
{
    uint64_t k;
    int b;
    const uint8_t *val, *pos;
    size_t plen;
    /* Validate the whole message first so a bad one leaves dst untouched. */
    if (topk_header(in, len, n, &k, &b, &val, &pos, &plen) < 0 || cmp_select_pos_read(pos, plen, k, b, 0, n, NULL) < 0)
        return -EBADMSG;
    cmp_bitr r;
    cmp_bitr_init(&r, pos, plen);
    uint64_t next = 0, g;
    for (size_t j = 0; j < k; j++) {
        if (cmp_bitr_rice(&r, b, &g) < 0 || g >= n - next)
            return -EBADMSG;
        next += g;
        dst[next] += alpha * cmp_f32_get(val + 4 * j);
        next++;
    }
    return 0;
}

static long topk_decode_sparse(const uint8_t *in, size_t len, size_t n, uint32_t *idx, float *out, size_t cap)
{
    uint64_t k;
    int b;
    const uint8_t *val, *pos;
    size_t plen;
    if (topk_header(in, len, n, &k, &b, &val, &pos, &plen) < 0)
        return -EBADMSG;
    if (k > cap)
        return -ENOSPC;
    if (cmp_select_pos_read(pos, plen, k, b, 0, n, idx) < 0)
        return -EBADMSG;
    for (size_t j = 0; j < k; j++)
        out[j] = cmp_f32_get(val + 4 * j);
    return (long)k;
}

static long topk_encoded_sparse(const cmp_spec *s, const float *x, size_t n, const void *work, uint32_t *idx,
                                float *val, size_t cap)
{
    size_t k = cmp_select_k(s->fraction, n);
    if (k > cap)
        return -ENOSPC;
    if (k == 0) /* n == 0: work may be NULL */
        return 0;
    (void)x;
    memcpy(idx, cmp_chosen_idx(work, n), k * sizeof *idx);
    memcpy(val, cmp_chosen_val(work, n, k), k * sizeof *val);
    return (long)k;
}

const cmp_ops cmp_topk = {
    .name = "topk",
    .id = 3,
    .usage = "topk:FRACTION[:sampled]  the max(1, round(FRACTION*n)) largest magnitudes, exact, as f32 + "
             "Rice-coded positions; :sampled finds the threshold from a sample (DGC), same result",
    .parse = topk_parse,
    .bound = topk_bound,
    .work = topk_work,
    .encode = topk_encode,
    .decode_add = topk_decode_add,
    .decode_sparse = topk_decode_sparse,
    .encoded_sparse = topk_encoded_sparse,
    .encode_list = topk_encode_list,
};
