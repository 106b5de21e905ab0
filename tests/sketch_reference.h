/* The sketch codec (id 10) as compress/FORMAT.md writes it, for the tests
 * in test_compress_sketch.c: test data, the format's formulas (k, W, the
 * bucket and sign of a position, bf16 rounding, the exact top k, the Rice
 * stream, the documented size and bound), and a reference encoder and
 * decoder written from the format text, not from codec_sketch.c. */
#ifndef TESTS_SKETCH_REFERENCE_H
#define TESTS_SKETCH_REFERENCE_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress/cmp_rng.h"
#include "tests/compress_check.h"

enum { ID_SKETCH = 10, BITMAP = 255 };

/* ---- data ------------------------------------------------------------------- */

static float gauss(uint64_t seed, uint64_t i)
{
    float u1 = cmp_rng_uniform(seed, 2 * i) + 0x1p-25f, u2 = cmp_rng_uniform(seed, 2 * i + 1);
    return sqrtf(-2 * logf(u1)) * cosf(6.28318531f * u2);
}

enum { PAT_GAUSS, PAT_TIES, PAT_RISING, PAT_LAYERS, PAT_COUNT };
static const char *pat_name[] = {"gauss", "ties", "rising", "layers"};

/* Gaussian; many ties; the top k all at the end (positions as costly as can
 * be); and gradient-like layers of very different scales. */
static void fill(float *x, size_t n, int pat, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = cmp_rng_at(seed, i);
        switch (pat) {
        case PAT_GAUSS: x[i] = gauss(seed, i); break;
        case PAT_TIES: x[i] = (float)((int)(r % 7) - 3); break;
        case PAT_RISING: x[i] = ((r >> 63) ? -1.0f : 1.0f) * (float)(i + 1); break;
        case PAT_LAYERS: x[i] = gauss(seed, i) * (i < n / 3 ? 1e-3f : i < n / 2 ? 30.0f : 1.0f); break;
        }
    }
}

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static size_t vlen(uint64_t v)
{
    size_t l = 1;
    while (v >= 0x80)
        v >>= 7, l++;
    return l;
}

/* ---- the format, from FORMAT.md ------------------------------------------------ */

static size_t doc_k(double fraction, size_t n)
{
    if (n == 0)
        return 0;
    double r = floor(fraction * (double)n + 0.5);
    return r < 1 ? 1 : r > (double)n ? n : (size_t)r;
}

static size_t doc_w(double columns, size_t k)
{
    if (k == 0)
        return 0;
    double w = ceil(columns * (double)k);
    return w < 1 ? 1 : (size_t)w;
}

/* The hash: bucket floor(hi32(z) W / 2^32), sign -1 when z is odd. */
static uint32_t doc_bucket(uint64_t seed, uint32_t i, size_t w)
{
    return (uint32_t)(((cmp_rng_at(seed, i) >> 32) * (uint64_t)w) >> 32);
}
static int doc_negative(uint64_t seed, uint32_t i) { return (int)(cmp_rng_at(seed, i) & 1); }

/* bf16 by the book: keep the high half, round half to even (a bucket is never NaN). */
static uint16_t doc_bf16(float f)
{
    uint32_t u = f2u(f), hi = u >> 16, lo = u & 0xffff;
    if (lo > 0x8000 || (lo == 0x8000 && (hi & 1)))
        hi++;
    return (uint16_t)hi;
}


/* The k largest magnitudes, ascending, into idx. */
static void doc_topk(const float *x, size_t n, size_t k, uint32_t *idx)
{
    uint32_t *o = malloc((n + 1) * sizeof *o);
    for (size_t i = 0; i < n; i++)
        o[i] = (uint32_t)i;
    g_x = x;
    qsort(o, n, sizeof *o, by_mag);
    memcpy(idx, o, k * sizeof *idx);
    qsort(idx, k, sizeof *idx, by_index);
    free(o);
}

/* R(b) for the gaps of idx. */
static uint64_t rice_bits(const uint32_t *idx, size_t k, int b)
{
    uint64_t s = 0, next = 0;
    for (size_t j = 0; j < k; j++) {
        s += 1 + (uint64_t)b + ((idx[j] - next) >> b);
        next = idx[j] + 1;
    }
    return s;
}

/* The smallest b minimising R(b), by brute force over all 32. */
static int best_rice(const uint32_t *idx, size_t k, uint64_t *bits)
{
    int best = 0;
    *bits = rice_bits(idx, k, 0);
    for (int b = 1; b < 32; b++)
        if (rice_bits(idx, k, b) < *bits)
            *bits = rice_bits(idx, k, b), best = b;
    return best;
}

/* The exact size: 1 + vlen(n) + vlen(k) + vlen(W) + 1 + 8 + 2 W + ceil(R / 8). */
static size_t doc_size(size_t n, size_t k, size_t w, uint64_t r)
{
    return 1 + vlen(n) + vlen(k) + vlen(w) + 1 + 8 + 2 * w + (size_t)((r + 7) / 8);
}

/* cmp_bound: CMP_HEADER_MAX + vlen(k) + vlen(W) + 9 + 2 W + ceil(Rmax / 8). */
static size_t doc_bound(size_t n, size_t k, size_t w)
{
    int b0 = 0;
    if (k && n - k >= k)
        for (size_t q = (n - k) / k; q > 1; q >>= 1)
            b0++;
    uint64_t rmax = (uint64_t)k * (uint64_t)(1 + b0) + ((uint64_t)(n - k) >> b0);
    return CMP_HEADER_MAX + vlen(k) + vlen(w) + 9 + 2 * w + (size_t)((rmax + 7) / 8);
}

/* LSB-first bits, as FORMAT.md "Conventions" packs them. */
typedef struct bits {
    uint8_t *p;
    const uint8_t *in;
    size_t at, len; /* in bits */
} bits;

static void put_bit(bits *s, int v)
{
    if (v)
        s->p[s->at / 8] |= (uint8_t)(1u << (s->at % 8));
    s->at++;
}

static int get_bit(bits *s)
{
    cr_assert_lt(s->at, s->len, "bit stream ends early");
    int v = (s->in[s->at / 8] >> (s->at % 8)) & 1;
    s->at++;
    return v;
}

/* The whole message, written from the format text; returns its length. */
static size_t ref_encode(const float *x, size_t n, double fraction, double columns, uint64_t seed, uint8_t *out)
{
    size_t k = doc_k(fraction, n), w = doc_w(columns, k);
    uint32_t *idx = malloc((k + 1) * sizeof *idx);
    float *a = calloc(w + 1, sizeof *a);
    doc_topk(x, n, k, idx);
    for (size_t j = 0; j < k; j++) {
        float v = x[idx[j]];
        a[doc_bucket(seed, idx[j], w)] += doc_negative(seed, idx[j]) ? -v : v;
    }
    uint64_t r;
    int b = best_rice(idx, k, &r);
    int bitmap = (n + 7) / 8 <= (r + 7) / 8;
    size_t p = 0;
    out[p++] = ID_SKETCH;
    p += cmp_varint_put(out + p, n);
    p += cmp_varint_put(out + p, k);
    p += cmp_varint_put(out + p, w);
    out[p++] = (uint8_t)(bitmap ? BITMAP : b);
    for (int i = 0; i < 8; i++)
        out[p++] = (uint8_t)(seed >> (8 * i));
    for (size_t j = 0; j < w; j++) {
        uint16_t h = doc_bf16(a[j]);
        out[p++] = (uint8_t)h, out[p++] = (uint8_t)(h >> 8);
    }
    size_t plen = bitmap ? (n + 7) / 8 : (size_t)((r + 7) / 8);
    memset(out + p, 0, plen);
    bits s = {.p = out + p};
    if (bitmap)
        for (size_t j = 0; j < k; j++)
            s.at = idx[j], put_bit(&s, 1);
    else
        for (size_t j = 0; j < k; j++) {
            uint64_t g = idx[j] - (j ? idx[j - 1] + 1 : 0);
            for (uint64_t q = g >> b; q; q--)
                put_bit(&s, 1);
            put_bit(&s, 0);
            for (int l = 0; l < b; l++)
                put_bit(&s, (int)(g >> l) & 1);
        }
    free(idx);
    free(a);
    return p + plen;
}

/* What a message decodes to, read from the format text (asserting it is
 * well formed): dst[i] = 0 + s(i) bucket[h(i)] at the positions, 0 elsewhere.
 * *collisions: positions that share their bucket. */
static void ref_decode(const uint8_t *in, size_t len, size_t n, float *dst, size_t *collisions)
{
    uint64_t v[3];
    size_t p = 1, used;
    cr_assert_eq(in[0], ID_SKETCH);
    for (int f = 0; f < 3; f++, p += used) /* n, k, W */
        cr_assert_eq(cmp_varint_get(in + p, len - p, &used, &v[f]), 0);
    uint64_t k = v[1], w = v[2], seed = 0;
    cr_assert_eq(v[0], n);
    cr_assert_leq(k, n);
    cr_assert(k ? w >= 1 && w <= k : w == 0);
    int b = in[p++];
    cr_assert(b <= 31 || b == BITMAP);
    for (int i = 0; i < 8; i++)
        seed |= (uint64_t)in[p++] << (8 * i);
    const uint8_t *bucket = in + p;
    p += 2 * w;
    cr_assert_leq(p, len);
    uint32_t *idx = malloc((k + 1) * sizeof *idx);
    bits s = {.in = in + p, .len = 8 * (len - p)};
    size_t got = 0;
    if (b == BITMAP) {
        cr_assert_eq(len - p, (n + 7) / 8);
        for (size_t i = 0; i < s.len; i++)
            if (get_bit(&s)) {
                cr_assert_lt(i, n, "padding bit set");
                cr_assert_lt(got, k, "more than k bits");
                idx[got++] = (uint32_t)i;
            }
    } else {
        uint64_t next = 0;
        for (; got < k; got++) {
            uint64_t g = 0, low = 0;
            while (get_bit(&s))
                g++;
            for (int l = 0; l < b; l++)
                low |= (uint64_t)get_bit(&s) << l;
            next += g << b | low;
            cr_assert_lt(next, n);
            idx[got] = (uint32_t)next++;
        }
        while (s.at < s.len)
            cr_assert_eq(get_bit(&s), 0, "padding");
        cr_assert_eq(len - p, (rice_bits(idx, k, b) + 7) / 8);
    }
    cr_assert_eq(got, k);
    size_t *members = calloc(w + 1, sizeof *members);
    for (size_t j = 0; j < k; j++)
        members[doc_bucket(seed, idx[j], w)]++;
    memset(dst, 0, n * sizeof *dst);
    *collisions = 0;
    for (size_t j = 0; j < k; j++) {
        uint32_t h = doc_bucket(seed, idx[j], w);
        float value = u2f((uint32_t)(bucket[2 * h] | bucket[2 * h + 1] << 8) << 16);
        cr_assert(isfinite(value));
        dst[idx[j]] = 0.0f + (doc_negative(seed, idx[j]) ? -value : value);
        *collisions += members[h] > 1;
    }
    free(members);
    free(idx);
}

#endif
