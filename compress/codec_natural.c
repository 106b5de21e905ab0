/* natural — natural compression (Horvath et al. 2019, "Natural compression
 * for distributed deep learning"): each value rounded at random to one of
 * the two powers of two around it, so only its sign and exponent travel.
 *
 * Payload (compress/FORMAT.md, "natural"):
 *
 *   u64 seed | sign bits, ceil(n/8) bytes, LSB-first, zero-padded | u8 code[n]
 *
 * 9 bits per value, stored as two planes (signs, then one exponent byte per
 * value) so that both ends move whole bytes. code 0 is zero; code c in
 * 1..254 is 2^(c - 127), i.e. exactly the f32 with biased exponent c and a
 * zero mantissa; 255 is never written.
 *
 * Rounding: |x| = 2^(E-127) (1 + m/2^23) rounds up to 2^(E-126) with
 * probability m/2^23 = (|x| - 2^e)/2^e, else down to 2^(E-127), so E[Q(x)] = x
 * and E[Q(x)^2] <= 9/8 x^2. The draw is an integer comparison of 23 random
 * bits with the 23 mantissa bits, so the probability is exact, and the new
 * code is just E + (r < m). Two edges (compress/FORMAT.md): f32 subnormals
 * (E = 0) round between 0 and 2^-126 with the same formula, which is still
 * unbiased; and values of 2^127 and more cannot round up (2^128 is not an
 * f32), so they always go down: the only bias, at magnitudes no gradient has.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "compress/bitio.h"
#include "compress/cmp.h"
#include "compress/cmp_rng.h"

typedef uint32_t __attribute__((may_alias)) u32_alias;

#define BLOCK 256          /* values per step of the encoder (even) */
#define PREFETCH_AHEAD 512 /* values */

static size_t natural_bound(const cmp_spec *s, size_t n)
{
    (void)s;
    return 8 + (n + 7) / 8 + n;
}

/* code for |x| bits a, given 32 random bits (the top 23 are used) */
static inline uint32_t natural_code(uint32_t a, uint32_t r)
{
    uint32_t c = (a >> 23) + ((r >> 9) < (a & 0x7fffffu));
    return c > 254 ? 254 : c;
}

static long natural_encode(const cmp_spec *s, const float *x, size_t n, uint64_t seed, void *work, uint8_t *out,
                           size_t cap)
{
    (void)work;
    if (cap < natural_bound(s, n))
        return -ENOSPC;
    const u32_alias *u = (const u32_alias *)(const void *)x;
    uint8_t *code = out + 8 + (n + 7) / 8;
    uint32_t bad = 0;
    uint32_t r[BLOCK];
#if defined(__SSE2__)
    const __m128i absm = _mm_set1_epi32(0x7fffffff), mant = _mm_set1_epi32(0x7fffff),
                  e255 = _mm_set1_epi32(255), c254 = _mm_set1_epi16(254);
    __m128i vbad = _mm_setzero_si128();
#endif
    for (size_t base = 0; base < n; base += BLOCK) {
        size_t m = n - base < BLOCK ? n - base : BLOCK;
        /* The hardware prefetcher of the machines we measured on does not
         * keep up with this loop; asking 2 KB ahead nearly doubles its speed. */
        if (n - base >= PREFETCH_AHEAD + BLOCK)
            for (size_t j = 0; j < BLOCK; j += 16)
                __builtin_prefetch(x + base + PREFETCH_AHEAD + j);
        cmp_rng_fill32(seed, base / 2, (m + 1) / 2, r);
        const u32_alias *ub = u + base;
        uint8_t *cb = code + base;
        size_t j = 0;
#if defined(__SSE2__)
        /* natural_code, 16 values per step (GCC's own vectorisation of the
         * loop below spends its time widening and narrowing). */
        for (; j + 16 <= m; j += 16) {
            __m128i c[4];
            for (int q = 0; q < 4; q++) {
                __m128i a = _mm_and_si128(_mm_loadu_si128((const __m128i *)(const void *)(ub + j + 4 * q)), absm);
                __m128i e = _mm_srli_epi32(a, 23);
                __m128i rq = _mm_srli_epi32(_mm_loadu_si128((const __m128i *)(const void *)(r + j + 4 * q)), 9);
                vbad = _mm_or_si128(vbad, _mm_cmpeq_epi32(e, e255));
                /* both sides < 2^23, so the signed compare is exact; true is -1 */
                c[q] = _mm_sub_epi32(e, _mm_cmpgt_epi32(_mm_and_si128(a, mant), rq));
            }
            /* codes <= 256 survive the signed pack; clamp 255, 256 to 254 there */
            __m128i lo = _mm_min_epi16(_mm_packs_epi32(c[0], c[1]), c254);
            __m128i hi = _mm_min_epi16(_mm_packs_epi32(c[2], c[3]), c254);
            _mm_storeu_si128((__m128i *)(void *)(cb + j), _mm_packus_epi16(lo, hi));
        }
#endif
        for (; j < m; j++) {
            uint32_t a = ub[j] & 0x7fffffffu;
            bad |= (uint32_t)(a >= 0x7f800000u);
            cb[j] = (uint8_t)natural_code(a, r[j]);
        }
        cmp_signs_pack(x + base, m, out + 8 + base / 8); /* while x[base..] is in cache */
    }
#if defined(__SSE2__)
    bad |= (uint32_t)_mm_movemask_epi8(vbad);
#endif
    if (bad)
        return -EINVAL; /* inf or NaN has no power of two to round to */
    cmp_u64_put(out, seed);
    return (long)natural_bound(s, n);
}

static int natural_decode_add(const uint8_t *in, size_t len, size_t n, float alpha, float *dst)
{
    if (len != 8 + (n + 7) / 8 + n)
        return -EBADMSG;
    const uint8_t *signs = in + 8, *code = in + 8 + (n + 7) / 8;
    if (n % 8 && signs[n / 8] >> (n % 8))
        return -EBADMSG;
    /* Validate first so that a bad message leaves dst untouched. */
    uint8_t top = 0;
    for (size_t i = 0; i < n; i++)
        top = code[i] > top ? code[i] : top;
    if (top == 255)
        return -EBADMSG;
    size_t i = 0;
#if defined(__SSE2__)
    /* 16 values per step: codes widened to the exponent field, sign bits
     * picked out of their bytes one lane each. */
    const __m128i zero = _mm_setzero_si128(), sel = _mm_setr_epi32(1, 2, 4, 8),
                  sign_bit = _mm_set1_epi32((int)0x80000000u);
    const __m128 va = _mm_set1_ps(alpha);
    for (; i + 16 <= n; i += 16) {
        __m128i c8 = _mm_loadu_si128((const __m128i *)(const void *)(code + i));
        __m128i c16[2] = {_mm_unpacklo_epi8(c8, zero), _mm_unpackhi_epi8(c8, zero)};
        unsigned sb = (unsigned)signs[i / 8] | (unsigned)signs[i / 8 + 1] << 8;
        for (int q = 0; q < 4; q++) {
            __m128i c = q % 2 ? _mm_unpackhi_epi16(c16[q / 2], zero) : _mm_unpacklo_epi16(c16[q / 2], zero);
            __m128i nib = _mm_set1_epi32((int)(sb >> 4 * q & 0xf));
            __m128i sgn = _mm_and_si128(_mm_cmpeq_epi32(_mm_and_si128(nib, sel), sel), sign_bit);
            __m128 v = _mm_castsi128_ps(_mm_or_si128(_mm_slli_epi32(c, 23), sgn));
            __m128 d = _mm_loadu_ps(dst + i + 4 * q);
            _mm_storeu_ps(dst + i + 4 * q, _mm_add_ps(d, _mm_mul_ps(va, v)));
        }
    }
#endif
    for (; i + 8 <= n; i += 8) {
        uint32_t sb = signs[i / 8];
        for (int k = 0; k < 8; k++) {
            uint32_t vb = (sb >> k & 1u) << 31 | (uint32_t)code[i + k] << 23;
            float v;
            memcpy(&v, &vb, 4);
            dst[i + k] += alpha * v;
        }
    }
    for (; i < n; i++) {
        uint32_t vb = (uint32_t)(signs[i / 8] >> (i % 8) & 1u) << 31 | (uint32_t)code[i] << 23;
        float v;
        memcpy(&v, &vb, 4);
        dst[i] += alpha * v;
    }
    return 0;
}

const cmp_ops cmp_natural = {
    .name = "natural",
    .id = 7,
    .usage = "natural  unbiased stochastic rounding to a power of two (sign + 8-bit exponent), 9 bits per value",
    .parse = cmp_parse_no_args,
    .bound = natural_bound,
    .work = NULL,
    .encode = natural_encode,
    .decode_add = natural_decode_add,
};
