/* terngrad — TernGrad (Wen et al. 2017): every value becomes -s, 0 or +s
 * with s = max |x|, at random so that the expectation is x:
 * x_i -> s * sign(x_i) * b_i, b_i ~ Bernoulli(|x_i| / s).
 *
 * Payload (compress/FORMAT.md, "terngrad"):
 *
 *   u64 seed | f32 scale | trits, 5 per byte (base 3), ceil(n/5) bytes
 *
 * Three values need log2(3) = 1.585 bits; five trits fit a byte (3^5 = 243),
 * which gives 1.6 bits per value where two-bit fields would give 2. The
 * trits of a byte are not neighbours: values are taken in groups of 80 and
 * byte j of a group holds values j, j+16, j+32, j+48, j+64 of it, so encoder
 * and decoder work on five runs of 16 contiguous floats, which vectorises;
 * the last, shorter group uses the same scheme with stride ceil(r/5) for
 * its r values. Digit 0 is zero, 1 is +scale, 2 is -scale.
 *
 * The Bernoulli draw compares 24 random bits, as u in [0, 1), with
 * |x_i| / s (as u * s < |x_i|): probabilities are resolved to 2^-24.
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

#define GROUP 80 /* values per full group */
#define GBYTES 16
#define PREFETCH_AHEAD 512 /* values */

static size_t terngrad_bound(const cmp_spec *s, size_t n)
{
    (void)s;
    return 12 + (n + 4) / 5;
}

static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* digit for value bits v and 32 random bits r; k = scale * 2^-24 */
static inline uint8_t trit(uint32_t v, uint32_t r, float k)
{
    float a = bits_f32(v & 0x7fffffffu);
    uint32_t keep = -(uint32_t)((float)(int32_t)(r >> 8) * k < a);
    return (uint8_t)((1u + (v >> 31)) & keep);
}

/* Digits of values [base, base + cnt), base even, into d. */
static inline void trits(const u32_alias *u, size_t base, size_t cnt, uint64_t seed, float k, uint8_t *d)
{
    uint32_t r[GROUP];
    cmp_rng_fill32(seed, base / 2, (cnt + 1) / 2, r);
    for (size_t j = 0; j < cnt; j++) /* vectorises */
        d[j] = trit(u[base + j], r[j], k);
}

/* One full group: 80 values from ug, 16 bytes to t. */
static inline void group_encode(const u32_alias *ug, uint64_t seed, size_t g, float k, uint8_t *t)
{
    uint32_t r[GROUP];
    cmp_rng_fill32(seed, g / 2, GROUP / 2, r);
#if defined(__SSE2__)
    /* trit() 16 values at a time, and the base-3 sum by Horner's rule in
     * 16-bit lanes, digit 4 first; plain C vectorises this poorly. */
    const __m128i absm = _mm_set1_epi32(0x7fffffff), one = _mm_set1_epi32(1), three = _mm_set1_epi16(3);
    const __m128 vk = _mm_set1_ps(k);
    __m128i acc[2] = {_mm_setzero_si128(), _mm_setzero_si128()};
    for (int q = 4; q >= 0; q--)
        for (int h = 0; h < 2; h++) {
            __m128i d[2];
            for (int e = 0; e < 2; e++) {
                size_t j = (size_t)(16 * q + 8 * h + 4 * e);
                __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(ug + j));
                __m128 a = _mm_castsi128_ps(_mm_and_si128(v, absm));
                __m128 ur = _mm_mul_ps(_mm_cvtepi32_ps(_mm_srli_epi32(
                                           _mm_loadu_si128((const __m128i *)(const void *)(r + j)), 8)),
                                       vk);
                __m128i keep = _mm_castps_si128(_mm_cmplt_ps(ur, a));
                d[e] = _mm_and_si128(keep, _mm_add_epi32(_mm_srli_epi32(v, 31), one));
            }
            acc[h] = _mm_add_epi16(_mm_mullo_epi16(acc[h], three), _mm_packs_epi32(d[0], d[1]));
        }
    _mm_storeu_si128((__m128i *)(void *)t, _mm_packus_epi16(acc[0], acc[1]));
#else
    uint8_t d[GROUP];
    for (size_t j = 0; j < GROUP; j++)
        d[j] = trit(ug[j], r[j], k);
    for (int j = 0; j < GBYTES; j++)
        t[j] = (uint8_t)(d[j] + 3 * d[j + 16] + 9 * d[j + 32] + 27 * d[j + 48] + 81 * d[j + 64]);
#endif
}

static long terngrad_encode(const cmp_spec *s, const float *x, size_t n, uint64_t seed, void *work, uint8_t *out,
                            size_t cap)
{
    (void)work;
    if (cap < terngrad_bound(s, n))
        return -ENOSPC;
    const u32_alias *u = (const u32_alias *)(const void *)x;
    /* max |x| on the bits: for non-negative floats integer order is float
     * order, and inf/NaN land at or above 0x7f800000 */
    int32_t top = 0;
    for (size_t base = 0; base < n; base += 256) {
        size_t m = n - base < 256 ? n - base : 256;
        if (n - base >= PREFETCH_AHEAD + 256) /* as in the main loop below */
            for (size_t j = 0; j < 256; j += 16)
                __builtin_prefetch(x + base + PREFETCH_AHEAD + j);
        for (size_t i = base; i < base + m; i++) { /* vectorises */
            int32_t a = (int32_t)(u[i] & 0x7fffffffu);
            top = a > top ? a : top;
        }
    }
    if (top >= 0x7f800000)
        return -EINVAL;
    float scale = bits_f32((uint32_t)top);
    float k = scale * 0x1p-24f;
    cmp_u64_put(out, seed);
    cmp_f32_put(out + 8, scale);
    uint8_t *t = out + 12;
    uint8_t d[GROUP];
    size_t g = 0;
    for (; g + GROUP <= n; g += GROUP, t += GBYTES) {
        /* the hardware prefetcher alone leaves this loop waiting on memory */
        if (n - g >= PREFETCH_AHEAD + GROUP)
            for (size_t j = 0; j < GROUP; j += 16)
                __builtin_prefetch(x + g + PREFETCH_AHEAD + j);
        group_encode(u + g, seed, g, k, t);
    }
    size_t r = n - g, stride = (r + 4) / 5;
    if (r) {
        memset(d, 0, sizeof d);
        trits(u, g, r, seed, k, d);
        for (size_t j = 0; j < stride; j++)
            t[j] = (uint8_t)(d[j] + 3 * d[j + stride] + 9 * d[j + 2 * stride] + 27 * d[j + 3 * stride] +
                             81 * d[j + 4 * stride]);
    }
    return (long)terngrad_bound(s, n);
}

static int terngrad_decode_add(const uint8_t *in, size_t len, size_t n, float alpha, float *dst)
{
    if (len != 12 + (n + 4) / 5)
        return -EBADMSG;
    uint32_t sb = (uint32_t)in[8] | (uint32_t)in[9] << 8 | (uint32_t)in[10] << 16 | (uint32_t)in[11] << 24;
    if (sb >= 0x7f800000u) /* negative, inf or NaN */
        return -EBADMSG;
    float scale = bits_f32(sb);
    const uint8_t *t = in + 12;
    size_t nt = len - 12, full = n / GROUP, r = n % GROUP, stride = (r + 4) / 5;
    /* Validate first so that a bad message leaves dst untouched: every byte
     * is a base-3 number below 3^5, and the digits past the last value of
     * the short group are zero. */
    uint8_t top = 0;
    for (size_t j = 0; j < nt; j++)
        top = t[j] > top ? t[j] : top;
    if (top > 242)
        return -EBADMSG;
    const uint8_t *tail = t + full * GBYTES;
    for (size_t j = 0; j < stride; j++) {
        unsigned v = tail[j];
        for (size_t q = 0; q < 5; q++, v /= 3)
            if (j + q * stride >= r && v % 3)
                return -EBADMSG;
    }
    for (size_t grp = 0; grp < full; grp++, t += GBYTES, dst += GROUP) {
#if defined(__SSE2__)
        /* Digits by repeated division by 3 in 16-bit lanes: for v < 256,
         * v / 3 = (v * 21888) >> 16 (21888 = 171 << 7, 171/512 ~ 1/3). */
        const __m128i zero = _mm_setzero_si128(), third = _mm_set1_epi16(21888), one = _mm_set1_epi16(1),
                      two = _mm_set1_epi16(2);
        const __m128 vs = _mm_set1_ps(scale), va = _mm_set1_ps(alpha);
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)t);
        __m128i v[2] = {_mm_unpacklo_epi8(b, zero), _mm_unpackhi_epi8(b, zero)};
        for (int q = 0; q < 5; q++)
            for (int h = 0; h < 2; h++) {
                __m128i quo = _mm_mulhi_epu16(v[h], third);
                __m128i dig = _mm_sub_epi16(v[h], _mm_add_epi16(quo, _mm_add_epi16(quo, quo)));
                v[h] = quo;
                /* (d == 1) - (d == 2), as 16-bit -1/0/+1, then sign-extended to 32 */
                __m128i t16 = _mm_sub_epi16(_mm_cmpeq_epi16(dig, two), _mm_cmpeq_epi16(dig, one));
                for (int e = 0; e < 2; e++) {
                    __m128i t32 = e ? _mm_srai_epi32(_mm_unpackhi_epi16(t16, t16), 16)
                                    : _mm_srai_epi32(_mm_unpacklo_epi16(t16, t16), 16);
                    __m128 val = _mm_mul_ps(vs, _mm_cvtepi32_ps(t32));
                    float *d = dst + GBYTES * q + 8 * h + 4 * e;
                    _mm_storeu_ps(d, _mm_add_ps(_mm_loadu_ps(d), _mm_mul_ps(va, val)));
                }
            }
#else
        for (int q = 0, p3 = 1; q < 5; q++, p3 *= 3)
            for (int j = 0; j < GBYTES; j++) {
                int dig = t[j] / p3 % 3;
                float v = scale * (float)((dig == 1) - (dig == 2));
                dst[j + GBYTES * q] += alpha * v;
            }
#endif
    }
    for (size_t j = 0; j < stride; j++) {
        unsigned v = tail[j];
        for (size_t q = 0; q < 5 && j + q * stride < r; q++, v /= 3) {
            unsigned dig = v % 3;
            float val = scale * (float)((int)(dig == 1) - (int)(dig == 2));
            dst[j + q * stride] += alpha * val;
        }
    }
    return 0;
}

const cmp_ops cmp_terngrad = {
    .name = "terngrad",
    .id = 6,
    .usage = "terngrad  unbiased stochastic ternary {-s, 0, +s}, s = max |x|, base-3 packed: 1.6 bits per value",
    .parse = cmp_parse_no_args,
    .bound = terngrad_bound,
    .work = NULL,
    .encode = terngrad_encode,
    .decode_add = terngrad_decode_add,
};
