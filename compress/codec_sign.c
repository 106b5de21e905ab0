/* sign — scaled sign: one f32 scale, then one bit per value.
 *
 * Payload (compress/FORMAT.md, "sign"):
 *
 *   f32 scale | sign bits, ceil(n/8) bytes, LSB-first, zero-padded
 *
 * scale is mean |x| (the l1 norm over n), and value i decodes to -scale if
 * its bit is set, +scale otherwise. This is the biased compressor of
 * EF-SignSGD (Karimireddy et al. 2019): it is meant to run under error
 * feedback, which carries what the sign dropped into the next round: unlike
 * qsgd, terngrad and natural, its expected value is not x.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "compress/bitio.h"
#include "compress/cmp.h"

#define PREFETCH_AHEAD 512 /* values */

static size_t sign_bound(const cmp_spec *s, size_t n)
{
    (void)s;
    return 4 + (n + 7) / 8;
}

/* Sum of |x| in double, and the sign bits of x into bits[0..ceil(n/8)), in
 * one pass over x. Non-finite input makes the sum non-finite. Several
 * accumulators, by hand: without -ffast-math the compiler may not reorder a
 * floating-point sum, and one accumulator is a serial chain of additions. */
static double sum_abs_signs(const float *x, size_t n, uint8_t *bits)
{
    double acc[8] = {0};
    size_t i = 0;
#if defined(__SSE2__)
    const __m128 absm = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
    __m128d s0 = _mm_setzero_pd(), s1 = _mm_setzero_pd(), s2 = _mm_setzero_pd(), s3 = _mm_setzero_pd();
    for (; i + 8 <= n; i += 8) {
        /* 2 KB ahead, once per line: the hardware prefetcher alone leaves
         * this loop waiting on memory */
        if (i % 16 == 0 && n - i > PREFETCH_AHEAD)
            _mm_prefetch((const char *)(x + i + PREFETCH_AHEAD), _MM_HINT_T0);
        __m128 v = _mm_loadu_ps(x + i), w = _mm_loadu_ps(x + i + 4);
        bits[i / 8] = (uint8_t)(_mm_movemask_ps(v) | _mm_movemask_ps(w) << 4);
        v = _mm_and_ps(v, absm);
        w = _mm_and_ps(w, absm);
        s0 = _mm_add_pd(s0, _mm_cvtps_pd(v));
        s1 = _mm_add_pd(s1, _mm_cvtps_pd(_mm_movehl_ps(v, v)));
        s2 = _mm_add_pd(s2, _mm_cvtps_pd(w));
        s3 = _mm_add_pd(s3, _mm_cvtps_pd(_mm_movehl_ps(w, w)));
    }
    _mm_storeu_pd(acc, s0);
    _mm_storeu_pd(acc + 2, s1);
    _mm_storeu_pd(acc + 4, s2);
    _mm_storeu_pd(acc + 6, s3);
#endif
    cmp_signs_pack(x + i, n - i, bits + i / 8); /* i is a multiple of 8 */
    for (; i < n; i++)
        acc[i % 8] += (double)fabsf(x[i]);
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static long sign_encode(const cmp_spec *s, const float *x, size_t n, uint64_t seed, void *work, uint8_t *out,
                        size_t cap)
{
    (void)seed, (void)work;
    if (cap < sign_bound(s, n))
        return -ENOSPC;
    double sum = sum_abs_signs(x, n, out + 4);
    if (!isfinite(sum))
        return -EINVAL;
    cmp_f32_put(out, n ? (float)(sum / (double)n) : 0.0f); /* the mean of finite floats is a finite float */
    return (long)sign_bound(s, n);
}

static int sign_decode_add(const uint8_t *in, size_t len, size_t n, float alpha, float *dst)
{
    if (len != 4 + (n + 7) / 8)
        return -EBADMSG;
    uint32_t sb = (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 24;
    if (sb >= 0x7f800000u) /* negative (sign bit set), inf or NaN: no encoder writes that */
        return -EBADMSG;
    const uint8_t *bits = in + 4;
    if (n % 8 && bits[n / 8] >> (n % 8))
        return -EBADMSG; /* padding must be zero: one encoding per message */
    float scale = cmp_f32_get(in);
    /* alpha * (-scale) == -(alpha * scale) exactly, so this is dst += alpha * value. */
    float c = alpha * scale;
    uint32_t cb;
    memcpy(&cb, &c, 4);
    size_t i = 0;
#if defined(__SSE2__)
    /* Eight values per byte: broadcast the byte, pick one bit per lane, turn
     * it into a sign flip of c. */
    const __m128i sel_lo = _mm_setr_epi32(1, 2, 4, 8), sel_hi = _mm_setr_epi32(16, 32, 64, 128),
                  flip = _mm_set1_epi32((int)0x80000000u), vc = _mm_set1_epi32((int)cb);
    for (; i + 8 <= n; i += 8) {
        __m128i b = _mm_set1_epi32(bits[i / 8]);
        __m128i m0 = _mm_cmpeq_epi32(_mm_and_si128(b, sel_lo), sel_lo);
        __m128i m1 = _mm_cmpeq_epi32(_mm_and_si128(b, sel_hi), sel_hi);
        __m128 v0 = _mm_castsi128_ps(_mm_xor_si128(vc, _mm_and_si128(m0, flip)));
        __m128 v1 = _mm_castsi128_ps(_mm_xor_si128(vc, _mm_and_si128(m1, flip)));
        _mm_storeu_ps(dst + i, _mm_add_ps(_mm_loadu_ps(dst + i), v0));
        _mm_storeu_ps(dst + i + 4, _mm_add_ps(_mm_loadu_ps(dst + i + 4), v1));
    }
#endif
    for (; i < n; i++) {
        uint32_t vb = cb ^ ((uint32_t)(bits[i / 8] >> (i % 8) & 1) << 31);
        float v;
        memcpy(&v, &vb, 4);
        dst[i] += v;
    }
    return 0;
}

const cmp_ops cmp_sign = {
    .name = "sign",
    .id = 8,
    .usage = "sign  scaled sign (mean |x| times the sign), 1 bit per value plus one f32; biased: use with error "
             "feedback",
    .parse = cmp_parse_no_args,
    .bound = sign_bound,
    .work = NULL,
    .encode = sign_encode,
    .decode_add = sign_decode_add,
};
