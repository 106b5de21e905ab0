/* randk:FRACTION — k = max(1, round(FRACTION n)) entries picked at random,
 * sent as their f32 values only: the positions are a pure function of
 * (seed, n, k), the seed travels in the message and the decoder regenerates
 * them, then scales each value by n/k so that E[decoded] = x.
 *
 * Payload (compress/FORMAT.md, "randk"):
 *
 *   varint k | u64 seed | f32 value[k]      (value j is x[idx_j], unscaled)
 *
 * The positions, with U_i = cmp_rng_at(seed, i) / 2^64 and
 * lo_j = floor(j n / k):
 *
 *   r     = floor(n U_0)                                  one rotation
 *   idx_j = (lo_j + floor((lo_{j+1} - lo_j) U_{j+1}) + r) mod n,   j = 0 .. k-1
 *
 * One uniform pick in each of k equal-as-possible strata, then the whole
 * pattern rotated by r. The strata are disjoint, so the k indices are
 * distinct (without replacement) and spread over x; each costs O(1) with no
 * memory, so neither end needs a workspace. The rotation is what makes every
 * index's chance exactly k/n (up to the 2^-64 granularity of the draws): the
 * strata differ in length by one when k does not divide n, and without it an
 * index in a short stratum would be picked more often than k/n, biasing the
 * n/k scale. With it, each index lands at each offset of the pattern with
 * probability 1/n, so its chance is the pattern's average density, k/n.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compress/bitio.h"
#include "compress/cmp.h"
#include "compress/cmp_rng.h"
#include "compress/cmp_select.h"

static size_t varint_len(uint64_t v)
{
    size_t l = 1;
    while (v >= 0x80)
        v >>= 7, l++;
    return l;
}

/* floor(a * b / 2^64): a uniform draw in [0, b) from 64 random bits a. */
static inline uint64_t mulhi64(uint64_t a, uint64_t b)
{
#ifdef __SIZEOF_INT128__
    __extension__ typedef unsigned __int128 u128;
    return (uint64_t)(((u128)a * b) >> 64);
#else
    uint64_t al = (uint32_t)a, ah = a >> 32, bl = (uint32_t)b, bh = b >> 32;
    uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
    uint64_t mid = (ll >> 32) + (uint32_t)lh + (uint32_t)hl;
    return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
#endif
}

/* The stratum bounds advance by q or q + 1 (Bresenham on n = q k + rem), so
 * no division per index. */
typedef struct randk_iter {
    uint64_t seed, n, k, q, rem, lo, frac, rot, j;
} randk_iter;

static void randk_iter_init(randk_iter *it, uint64_t seed, size_t n, size_t k)
{
    it->seed = seed;
    it->n = n;
    it->k = k;
    it->q = n / k;
    it->rem = n % k;
    it->lo = 0;
    it->frac = 0;
    it->rot = mulhi64(cmp_rng_at(seed, 0), n);
    it->j = 0;
}

static inline uint64_t randk_iter_next(randk_iter *it)
{
    uint64_t len = it->q, f = it->frac + it->rem;
    if (f >= it->k) {
        f -= it->k;
        len++;
    }
    uint64_t p = it->lo + mulhi64(cmp_rng_at(it->seed, ++it->j), len) + it->rot;
    it->lo += len;
    it->frac = f;
    return p >= it->n ? p - it->n : p;
}

static int finite_bits(uint32_t u) { return (u & 0x7f800000u) != 0x7f800000u; }

static int randk_parse(cmp_spec *s, const char *args, char *err, size_t errlen)
{
    if (args && strchr(args, ':')) {
        snprintf(err, errlen, "randk: unexpected option after FRACTION in 'randk:%s', usage: randk:FRACTION", args);
        return -EINVAL;
    }
    return cmp_select_fraction_parse("randk", args, &s->fraction, err, errlen);
}

static size_t randk_bound(const cmp_spec *s, size_t n)
{
    size_t k = cmp_select_k(s->fraction, n);
    return varint_len(k) + 8 + 4 * k;
}

static long randk_encode(const cmp_spec *s, const float *x, size_t n, uint64_t seed, void *work, uint8_t *out,
                         size_t cap)
{
    (void)work;
    size_t k = cmp_select_k(s->fraction, n);
    size_t h = varint_len(k) + 8;
    if (cap < h + 4 * k)
        return -ENOSPC;
    cmp_varint_put(out, k);
    cmp_u64_put(out + h - 8, seed);
    if (k == 0)
        return (long)h;
    uint8_t *val = out + h;
    randk_iter it;
    randk_iter_init(&it, seed, n, k);
    for (size_t j = 0; j < k; j++) {
        uint32_t u;
        memcpy(&u, x + randk_iter_next(&it), sizeof u);
        /* A NaN or inf would poison the receiver's model through n/k scaling. */
        if (!finite_bits(u))
            return -EINVAL;
        val[4 * j + 0] = (uint8_t)u;
        val[4 * j + 1] = (uint8_t)(u >> 8);
        val[4 * j + 2] = (uint8_t)(u >> 16);
        val[4 * j + 3] = (uint8_t)(u >> 24);
    }
    return (long)(h + 4 * k);
}

static int randk_decode_add(const uint8_t *in, size_t len, size_t n, float alpha, float *dst)
{
    uint64_t k;
    size_t used;
    if (cmp_varint_get(in, len, &used, &k) < 0 || k > n || len - used != 8 + 4 * k)
        return -EBADMSG;
    uint64_t seed = cmp_u64_get(in + used);
    const uint8_t *val = in + used + 8;
    for (size_t j = 0; j < k; j++) {
        uint32_t u = (uint32_t)val[4 * j] | (uint32_t)val[4 * j + 1] << 8 | (uint32_t)val[4 * j + 2] << 16 |
                     (uint32_t)val[4 * j + 3] << 24;
        if (!finite_bits(u))
            return -EBADMSG;
    }
    if (k == 0)
        return 0;
    float scale = (float)((double)alpha * (double)n / (double)k);
    randk_iter it;
    randk_iter_init(&it, seed, n, k);
    for (size_t j = 0; j < k; j++)
        dst[randk_iter_next(&it)] += scale * cmp_f32_get(val + 4 * j);
    return 0;
}

const cmp_ops cmp_randk = {
    .name = "randk",
    .id = 4,
    .usage = "randk:FRACTION  max(1, round(FRACTION*n)) random entries (positions from a seed in the message), "
             "f32 values, decoded scaled by n/k (unbiased)",
    .parse = randk_parse,
    .bound = randk_bound,
    .work = NULL,
    .encode = randk_encode,
    .decode_add = randk_decode_add,
};
