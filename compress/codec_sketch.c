/* sketch:FRACTION[:COLUMNS] — a count sketch of the top k, after S2 Reducer
 * (Ge et al., "S2 Reducer: High-Performance Sparse Communication to
 * Accelerate Distributed Deep Learning", 2021): the exact top
 * k = max(1, round(FRACTION n)) by magnitude (the selection of topk and stc),
 * their positions, and their values folded into W = max(1, ceil(COLUMNS k))
 * signed buckets sent as bf16, so values cost 16 W bits instead of 32 k.
 *
 * Payload (compress/FORMAT.md, "sketch"):
 *
 *   varint k | varint W | u8 b | u64 seed | bf16 bucket[W] | positions
 *
 * with the positions as Rice(b) gaps (b <= 31) or, for b = 255, a bitmap of
 * n bits (S2 Reducer's form). Position i goes to bucket h(i) with sign s(i),
 * both from one draw cmp_rng_at(seed, i): bucket[h(i)] += s(i) x[i] in f32,
 * in ascending position order, and decodes to s(i) bucket[h(i)]. The signs
 * of the other positions in a bucket are independent of s(i), so their
 * share averages out over the seed: the estimate is unbiased (up to the bf16
 * rounding), with variance sum_j x[j]^2 / W over the other entries.
 *
 * A bitmap is never shorter than the gap stream (Rice with b = 0 is the
 * bitmap inverted and cut after the last position), so it is sent only when
 * it is as short, at densities where the best gaps are unary anyway: it
 * then decodes a word at a time, faster than the same bits as gaps.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compress/bitio.h"
#include "compress/cmp.h"
#include "compress/cmp_bf16.h"
#include "compress/cmp_rng.h"
#include "compress/cmp_select.h"

/* The b of a message whose positions are a bitmap. */
#define SKETCH_BITMAP 255

static size_t varint_len(uint64_t v)
{
    size_t l = 1;
    while (v >= 0x80)
        v >>= 7, l++;
    return l;
}

/* W for k entries: at most k, as COLUMNS <= 1 (0 when nothing is sent). */
static size_t sketch_width(double columns, size_t k)
{
    if (k == 0)
        return 0;
    double w = ceil(columns * (double)k);
    return w < 1 ? 1 : (size_t)w;
}

/* The bucket of draw z among w < 2^32: floor(hi32(z) w / 2^32), a multiply-high
 * reduction (no division, and w need not be a power of two). The sign is
 * z's lowest bit, which this does not use. */
static inline uint32_t sketch_bucket(uint64_t z, uint64_t w) { return (uint32_t)(((z >> 32) * w) >> 32); }

static int sketch_parse(cmp_spec *s, const char *args, char *err, size_t errlen)
{
    char buf[sizeof s->text];
    if (!args) {
        snprintf(err, errlen, "sketch: missing FRACTION, usage: sketch:FRACTION[:COLUMNS]");
        return -EINVAL;
    }
    snprintf(buf, sizeof buf, "%s", args);
    char *cols = strchr(buf, ':');
    if (cols)
        *cols++ = 0;
    int rc = cmp_select_fraction_parse("sketch", buf, &s->fraction, err, errlen);
    if (rc < 0)
        return rc;
    s->columns = 0.5;
    if (!cols)
        return 0;
    if (strchr(cols, ':')) {
        snprintf(err, errlen, "sketch: unexpected option after COLUMNS in 'sketch:%s', usage: sketch:FRACTION[:COLUMNS]",
                 args);
        return -EINVAL;
    }
    /* The same rule as FRACTION's (a plain number in (0, 1]), with its own message. */
    if (cmp_select_fraction_parse("sketch", cols, &s->columns, err, errlen) < 0) {
        snprintf(err, errlen, "sketch: COLUMNS (buckets per entry sent) must be a number in (0, 1], got '%s'", cols);
        return -EINVAL;
    }
    return 0;
}

/* The positions take ceil(R / 8) bytes in either form (a bitmap only goes
 * when it is no longer than the gaps), and R <= Rmax as for topk. */
static size_t sketch_bound(const cmp_spec *s, size_t n)
{
    size_t k = cmp_select_k(s->fraction, n), w = sketch_width(s->columns, k);
    return varint_len(k) + varint_len(w) + 1 + 8 + 2 * w + (size_t)((cmp_select_rice_bits_max(n, k) + 7) / 8);
}

/* The work area: selection scratch, then the k positions (u32), the W
 * buckets (f32) and the seed (8 bytes, for encoded_sparse, which is not
 * given it). Byte offsets: */
static size_t idx_at(size_t n) { return cmp_select_work(n); }
static size_t acc_at(size_t n, size_t k) { return idx_at(n) + 4 * k; }
static size_t seed_at(size_t n, size_t k, size_t w) { return acc_at(n, k) + 4 * w; }

static size_t sketch_work(const cmp_spec *s, size_t n)
{
    size_t k = cmp_select_k(s->fraction, n);
    return k ? seed_at(n, k, sketch_width(s->columns, k)) + 8 : 0;
}

static long sketch_encode(const cmp_spec *s, const float *x, size_t n, uint64_t seed, void *work, uint8_t *out,
                          size_t cap)
{
    const size_t k = cmp_select_k(s->fraction, n), w = sketch_width(s->columns, k);
    const size_t h = varint_len(k) + varint_len(w) + 1 + 8;
    if (cap < h)
        return -ENOSPC;
    if (k == 0) { /* n == 0: an empty bitmap, and work may be NULL */
        out[0] = 0, out[1] = 0, out[2] = SKETCH_BITMAP;
        cmp_u64_put(out + 3, seed);
        return (long)h;
    }
    uint32_t *idx = (uint32_t *)((uint8_t *)work + idx_at(n));
    float *acc = (float *)((uint8_t *)work + acc_at(n, k));
    int rc = cmp_select_topk(x, n, k, work, idx);
    if (rc < 0)
        return rc;
    memset(acc, 0, w * sizeof *acc);
    for (size_t j = 0; j < k; j++) {
        const float v = x[idx[j]];
        /* NaN and inf rank above every finite magnitude, so if x has any the
         * top k holds one: this check covers all of x. */
        if (!isfinite(v))
            return -EINVAL;
        const uint64_t z = cmp_rng_at(seed, idx[j]);
        acc[sketch_bucket(z, w)] += z & 1 ? -v : v;
    }
    /* A sum of finite values can still overflow, or round to inf in bf16. */
    for (size_t b = 0; b < w; b++)
        if (!isfinite(cmp_bf16_value(cmp_bf16_round(acc[b]))))
            return -ERANGE;

    uint64_t bits;
    const int b = cmp_select_rice(idx, k, n, &bits);
    const size_t rice = (size_t)((bits + 7) / 8), map = (n + 7) / 8;
    const int bitmap = map <= rice;
    const size_t len = h + 2 * w + (bitmap ? map : rice);
    if (cap < len)
        return -ENOSPC;

    size_t p = cmp_varint_put(out, k);
    p += cmp_varint_put(out + p, w);
    out[p++] = bitmap ? SKETCH_BITMAP : (uint8_t)b;
    cmp_u64_put(out + p, seed);
    p += 8;
    for (size_t j = 0; j < w; j++, p += 2) {
        uint16_t v = cmp_bf16_round(acc[j]);
        out[p] = (uint8_t)v, out[p + 1] = (uint8_t)(v >> 8);
    }
    if (bitmap) {
        memset(out + p, 0, map);
        for (size_t j = 0; j < k; j++)
            out[p + idx[j] / 8] |= (uint8_t)(1u << (idx[j] % 8));
    } else {
        cmp_bitw wr;
        cmp_bitw_init(&wr, out + p, rice);
        uint32_t next = 0;
        for (size_t j = 0; j < k; j++) {
            cmp_bitw_rice(&wr, idx[j] - next, b);
            next = idx[j] + 1;
        }
        long pl = cmp_bitw_finish(&wr);
        if (pl < 0)
            return pl;
    }
    cmp_u64_put((uint8_t *)work + seed_at(n, k, w), seed);
    return (long)len;
}

/* A message's fields, the buckets checked finite. */
typedef struct sketch_msg {
    uint64_t k, w, seed;
    int b; /* Rice parameter 0..31, or SKETCH_BITMAP */
    const uint8_t *bucket, *pos;
    size_t plen;
} sketch_msg;

static int sketch_header(const uint8_t *in, size_t len, size_t n, sketch_msg *m)
{
    size_t a, c;
    if (cmp_varint_get(in, len, &a, &m->k) < 0 || m->k > n || cmp_varint_get(in + a, len - a, &c, &m->w) < 0)
        return -EBADMSG;
    /* 1 <= W <= k, as any COLUMNS in (0, 1] gives (0 with nothing sent). */
    if (m->k ? m->w < 1 || m->w > m->k : m->w != 0)
        return -EBADMSG;
    size_t h = a + c;
    if (len - h < 9 || (in[h] > 31 && in[h] != SKETCH_BITMAP))
        return -EBADMSG;
    m->b = in[h];
    m->seed = cmp_u64_get(in + h + 1);
    h += 9;
    if ((len - h) / 2 < m->w)
        return -EBADMSG;
    m->bucket = in + h;
    for (size_t j = 0; j < m->w; j++)
        if ((m->bucket[2 * j + 1] & 0x7f) == 0x7f && m->bucket[2 * j] & 0x80)
            return -EBADMSG; /* exponent all ones: inf or NaN */
    m->pos = m->bucket + 2 * m->w;
    m->plen = len - h - 2 * m->w;
    return 0;
}

/* Reads and checks a bitmap of n bits with exactly k set and zero padding,
 * the positions ascending into idx unless NULL. A word at a time. */
static int bitmap_read(const uint8_t *in, size_t len, uint64_t k, size_t n, uint32_t *idx)
{
    if (len != (n + 7) / 8 || (n % 8 && in[len - 1] >> (n % 8)))
        return -EBADMSG;
    uint64_t count = 0;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t word = 0;
        if (len - i >= 8)
            word = cmp_u64_get(in + i);
        else
            for (size_t l = 0; l < len - i; l++)
                word |= (uint64_t)in[i + l] << (8 * l);
        count += (uint64_t)__builtin_popcountll(word);
        if (count > k) /* before writing: idx has room for k */
            return -EBADMSG;
        if (idx)
            for (; word; word &= word - 1)
                *idx++ = (uint32_t)(8 * i + (size_t)__builtin_ctzll(word));
    }
    return count == k ? 0 : -EBADMSG;
}

static int sketch_positions(const sketch_msg *m, size_t n, uint32_t *idx)
{
    if (m->b == SKETCH_BITMAP)
        return bitmap_read(m->pos, m->plen, m->k, n, idx);
    return cmp_select_pos_read(m->pos, m->plen, m->k, m->b, 0, n, idx);
}

/* s(i) bucket[h(i)]. */
static inline float sketch_value(const sketch_msg *m, uint32_t i)
{
    const uint64_t z = cmp_rng_at(m->seed, i);
    const uint8_t *b = m->bucket + 2 * sketch_bucket(z, m->w);
    const float v = cmp_bf16_value((uint32_t)b[0] | (uint32_t)b[1] << 8);
    return z & 1 ? -v : v;
}

static int sketch_decode_add(const uint8_t *in, size_t len, size_t n, float alpha, float *dst)
{
    sketch_msg m;
    /* Validate the whole message first so a bad one leaves dst untouched. */
    if (sketch_header(in, len, n, &m) < 0 || sketch_positions(&m, n, NULL) < 0)
        return -EBADMSG;
    if (m.b == SKETCH_BITMAP) {
        for (size_t i = 0; i < m.plen; i++)
            for (unsigned byte = m.pos[i]; byte; byte &= byte - 1) {
                const uint32_t at = (uint32_t)(8 * i + (size_t)__builtin_ctz(byte));
                dst[at] += alpha * sketch_value(&m, at);
            }
        return 0;
    }
    cmp_bitr r;
    cmp_bitr_init(&r, m.pos, m.plen);
    uint64_t next = 0, g;
    for (size_t j = 0; j < m.k; j++) {
        if (cmp_bitr_rice(&r, m.b, &g) < 0 || g >= n - next)
            return -EBADMSG;
        next += g;
        dst[next] += alpha * sketch_value(&m, (uint32_t)next);
        next++;
    }
    return 0;
}

static long sketch_decode_sparse(const uint8_t *in, size_t len, size_t n, uint32_t *idx, float *val, size_t cap)
{
    sketch_msg m;
    if (sketch_header(in, len, n, &m) < 0)
        return -EBADMSG;
    if (m.k > cap)
        return -ENOSPC;
    if (sketch_positions(&m, n, idx) < 0)
        return -EBADMSG;
    for (size_t j = 0; j < m.k; j++)
        val[j] = sketch_value(&m, idx[j]);
    return (long)m.k;
}

static long sketch_encoded_sparse(const cmp_spec *s, const float *x, size_t n, const void *work, uint32_t *idx,
                                  float *val, size_t cap)
{
    (void)x;
    const size_t k = cmp_select_k(s->fraction, n), w = sketch_width(s->columns, k);
    if (k > cap)
        return -ENOSPC;
    if (k == 0) /* n == 0: work may be NULL */
        return 0;
    const uint32_t *sel = (const uint32_t *)((const uint8_t *)work + idx_at(n));
    const float *acc = (const float *)((const uint8_t *)work + acc_at(n, k));
    const uint64_t seed = cmp_u64_get((const uint8_t *)work + seed_at(n, k, w));
    for (size_t j = 0; j < k; j++) {
        const uint64_t z = cmp_rng_at(seed, sel[j]);
        const float v = cmp_bf16_value(cmp_bf16_round(acc[sketch_bucket(z, w)]));
        idx[j] = sel[j];
        val[j] = z & 1 ? -v : v;
    }
    return (long)k;
}

const cmp_ops cmp_sketch = {
    .name = "sketch",
    .id = 10,
    .usage = "sketch:FRACTION[:COLUMNS]  the max(1, round(FRACTION*n)) largest magnitudes as a count sketch: "
             "ceil(COLUMNS*k) bf16 buckets with random signs (COLUMNS in (0, 1], default 0.5), unbiased, + "
             "Rice-coded positions or a bitmap",
    .parse = sketch_parse,
    .bound = sketch_bound,
    .work = sketch_work,
    .encode = sketch_encode,
    .decode_add = sketch_decode_add,
    .decode_sparse = sketch_decode_sparse,
    .encoded_sparse = sketch_encoded_sparse,
};
