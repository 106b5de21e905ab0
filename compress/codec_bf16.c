/* bf16 — bfloat16: the top 16 bits of the f32, rounded to nearest even.
 *
 * Payload (compress/FORMAT.md, "bf16"): u16 b[n], little-endian.
 *
 * bf16 keeps f32's exponent range, so only the mantissa is rounded: add
 * 0x7fff plus the lowest kept bit and drop 16 bits (the carry may reach the
 * exponent and, from the largest finite values, infinity, as IEEE rounding
 * does). NaN would be at risk of rounding into infinity or of losing its
 * payload entirely, so NaN is truncated instead and its quiet bit set: NaN
 * stays NaN. Decoding is exact (append 16 zero bits).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "compress/bitio.h"
#include "compress/cmp.h"
#include "compress/cmp_bf16.h"

static size_t bf16_bound(const cmp_spec *s, size_t n)
{
    (void)s;
    return 2 * n;
}

static long bf16_encode(const cmp_spec *s, const float *x, size_t n, uint64_t seed, void *work, uint8_t *out,
                        size_t cap)
{
    (void)s, (void)seed, (void)work;
    if (cap < 2 * n)
        return -ENOSPC;
    size_t i = 0;
#if defined(__SSE2__)
    /* cmp_bf16_from_bits, 8 values per step: GCC does not vectorise the narrowing
     * from 32 to 16 bits on SSE2. The arithmetic shift leaves the sign
     * extended, so the signed pack keeps exactly the 16 bits we want. */
    const __m128i absm = _mm_set1_epi32(0x7fffffff), bias = _mm_set1_epi32(0x7fff), one = _mm_set1_epi32(1),
                  inf = _mm_set1_epi32(0x7f800000), quiet = _mm_set1_epi32(0x00400000);
    __m128i r[2];
    for (; i + 8 <= n; i += 8) {
        for (int k = 0; k < 2; k++) {
            __m128i u = _mm_loadu_si128((const __m128i *)(const void *)(x + i + 4 * k));
            __m128i lsb = _mm_and_si128(_mm_srli_epi32(u, 16), one);
            __m128i rounded = _mm_add_epi32(_mm_add_epi32(u, bias), lsb);
            __m128i nan = _mm_or_si128(u, quiet);
            __m128i m_nan = _mm_cmpgt_epi32(_mm_and_si128(u, absm), inf);
            __m128i v = _mm_or_si128(_mm_and_si128(m_nan, nan), _mm_andnot_si128(m_nan, rounded));
            r[k] = _mm_srai_epi32(v, 16);
        }
        _mm_storeu_si128((__m128i *)(void *)(out + 2 * i), _mm_packs_epi32(r[0], r[1]));
    }
#endif
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, 4);
        uint16_t b = cmp_bf16_from_bits(u);
        out[2 * i] = (uint8_t)b;
        out[2 * i + 1] = (uint8_t)(b >> 8);
    }
    return (long)(2 * n);
}

static int bf16_decode_add(const uint8_t *in, size_t len, size_t n, float alpha, float *dst)
{
    if (len != 2 * n)
        return -EBADMSG;
    for (size_t i = 0; i < n; i++) {
        dst[i] += alpha * cmp_bf16_value((uint32_t)in[2 * i] | (uint32_t)in[2 * i + 1] << 8);
    }
    return 0;
}

const cmp_ops cmp_bf16 = {
    .name = "bf16",
    .id = 2,
    .usage = "bf16  bfloat16 (f32 exponent, 8-bit mantissa), round to nearest even, 16 bits per value",
    .parse = cmp_parse_no_args,
    .bound = bf16_bound,
    .work = NULL,
    .encode = bf16_encode,
    .decode_add = bf16_decode_add,
    .width = 2,
};
