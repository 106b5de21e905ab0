/* qsgd:LEVELS — QSGD (Alistarh et al. 2017) with s = LEVELS levels: the l2
 * norm, then per value a level l in 0..s by unbiased stochastic rounding of
 * s |x_i| / ||x||, Elias-gamma coded, and a sign bit for nonzero levels.
 *
 * Payload (compress/FORMAT.md, "qsgd"):
 *
 *   u64 seed | f32 norm | u16 s | bit stream, zero-padded to a byte:
 *     per value: gamma(l + 1), then if l > 0 one bit (1 = negative)
 *
 * Value i decodes to +-(norm / s) * l, computed in f32 exactly as written in
 * FORMAT.md so every decoder gets the same bits. Most levels are 0 for any
 * realistic n (s |x_i| / ||x|| is about s / sqrt(n)), and gamma(1) is the
 * single bit 1, so a message costs about one bit per value plus the nonzero
 * levels; the encoder exploits the same fact, writing runs of zero levels
 * as runs of one bits 64 values at a time.
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
#include "compress/cmp_rng.h"

typedef uint32_t __attribute__((may_alias)) u32_alias;

/* A level's code, gamma(l + 1) plus the sign, must fit 32 bits: l + 1 <= 2^15. */
#define QSGD_MAX_LEVELS 32767
#define QSGD_HEADER 14
#define PREFETCH_AHEAD 512 /* values */

static int qsgd_parse(cmp_spec *s, const char *args, char *err, size_t errlen)
{
    if (!args) {
        snprintf(err, errlen, "qsgd: missing LEVELS, usage: qsgd:LEVELS (an integer in 1..%d)", QSGD_MAX_LEVELS);
        return -EINVAL;
    }
    long v = 0;
    const char *p = args;
    for (; *p >= '0' && *p <= '9' && v <= QSGD_MAX_LEVELS; p++)
        v = v * 10 + (*p - '0');
    if (p == args || *p || v < 1 || v > QSGD_MAX_LEVELS) {
        snprintf(err, errlen, "qsgd: LEVELS must be an integer in 1..%d (got '%s')", QSGD_MAX_LEVELS, args);
        return -EINVAL;
    }
    s->levels = (int)v;
    return 0;
}

static int floor_log2_u32(uint32_t v) { return 31 - __builtin_clz(v); } /* v >= 1 */

static size_t qsgd_bound(const cmp_spec *s, size_t n)
{
    /* every level at most s: gamma(s + 1) bits and a sign */
    size_t per = (size_t)(2 * floor_log2_u32((uint32_t)s->levels + 1) + 2);
    return QSGD_HEADER + (n * per + 7) / 8;
}


static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Sum of squares in double: squares of floats are exact in double and the
 * sum cannot overflow it for n < 2^31. Several accumulators, by hand: without
 * -ffast-math the compiler may not reorder a floating-point sum, and one
 * accumulator is a serial chain of additions. */
static double sum_sq(const float *x, size_t n)
{
    double acc[8] = {0};
    size_t i = 0;
#if defined(__SSE2__)
    __m128d s0 = _mm_setzero_pd(), s1 = _mm_setzero_pd(), s2 = _mm_setzero_pd(), s3 = _mm_setzero_pd();
    for (; i + 8 <= n; i += 8) {
        /* 2 KB ahead, once per line: the hardware prefetcher alone leaves
         * this loop waiting on memory */
        if (i % 16 == 0 && n - i > PREFETCH_AHEAD)
            _mm_prefetch((const char *)(x + i + PREFETCH_AHEAD), _MM_HINT_T0);
        __m128 v = _mm_loadu_ps(x + i), w = _mm_loadu_ps(x + i + 4);
        __m128d a = _mm_cvtps_pd(v), b = _mm_cvtps_pd(_mm_movehl_ps(v, v));
        __m128d c = _mm_cvtps_pd(w), d = _mm_cvtps_pd(_mm_movehl_ps(w, w));
        s0 = _mm_add_pd(s0, _mm_mul_pd(a, a));
        s1 = _mm_add_pd(s1, _mm_mul_pd(b, b));
        s2 = _mm_add_pd(s2, _mm_mul_pd(c, c));
        s3 = _mm_add_pd(s3, _mm_mul_pd(d, d));
    }
    _mm_storeu_pd(acc, s0);
    _mm_storeu_pd(acc + 2, s1);
    _mm_storeu_pd(acc + 4, s2);
    _mm_storeu_pd(acc + 6, s3);
#endif
    for (; i < n; i++)
        acc[i % 8] += (double)x[i] * (double)x[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* Level of a value with bits v: a = |x| pre * scale in [0, s] (up to
 * rounding), l = floor(a) + 1 with probability frac(a), using 24 random bits
 * of r; clamped to s against the last-ulp overshoot of a. */
static inline uint32_t qsgd_level(uint32_t v, uint32_t r, float pre, float scale, uint32_t s)
{
    float a = bits_f32(v & 0x7fffffffu) * pre * scale;
    int32_t f = (int32_t)a;
    float frac = a - (float)f;
    uint32_t l = (uint32_t)f + ((float)(int32_t)(r >> 8) * 0x1p-24f < frac);
    return l > s ? s : l;
}

/* Nonzero entries of l[0..m) as a bit mask. */
static inline uint64_t nonzero_mask(const uint32_t *l, size_t m)
{
    uint64_t mask = 0;
    size_t j = 0;
#if defined(__SSE2__)
    /* levels <= 32767, so saturating packs keep zero zero and nonzero nonzero */
    const __m128i zero = _mm_setzero_si128();
    for (; j + 16 <= m; j += 16) {
        __m128i a = _mm_packs_epi32(_mm_loadu_si128((const __m128i *)(const void *)(l + j)),
                                    _mm_loadu_si128((const __m128i *)(const void *)(l + j + 4)));
        __m128i b = _mm_packs_epi32(_mm_loadu_si128((const __m128i *)(const void *)(l + j + 8)),
                                    _mm_loadu_si128((const __m128i *)(const void *)(l + j + 12)));
        unsigned z = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_packs_epi16(a, b), zero));
        mask |= (uint64_t)(~z & 0xffffu) << j;
    }
#endif
    for (; j < m; j++)
        mask |= (uint64_t)(l[j] != 0) << j;
    return mask;
}

#if defined(__SSE2__)
/* qsgd_level for 64 values, with the masks of nonzero levels and of
 * negative values on the side: one pass instead of three, and no widening
 * and narrowing (GCC's vectorisation of the scalar loop is half as fast). */
static inline void levels_sse2(const float *x, const uint32_t *r, float pre, float scale, uint32_t s, uint32_t *l,
                               uint64_t *nz_out, uint64_t *neg_out)
{
    const __m128 absm = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff)), vpre = _mm_set1_ps(pre),
                 vscale = _mm_set1_ps(scale), step = _mm_set1_ps(0x1p-24f);
    const __m128i vs = _mm_set1_epi32((int)s), zero = _mm_setzero_si128();
    uint64_t nz = 0, neg = 0;
    for (int q = 0; q < 16; q++) {
        __m128 v = _mm_loadu_ps(x + 4 * q);
        neg |= (uint64_t)_mm_movemask_ps(v) << 4 * q;
        __m128 a = _mm_mul_ps(_mm_mul_ps(_mm_and_ps(v, absm), vpre), vscale);
        __m128i f = _mm_cvttps_epi32(a);
        __m128 frac = _mm_sub_ps(a, _mm_cvtepi32_ps(f));
        __m128 u = _mm_mul_ps(
            _mm_cvtepi32_ps(_mm_srli_epi32(_mm_loadu_si128((const __m128i *)(const void *)(r + 4 * q)), 8)), step);
        __m128i lv = _mm_sub_epi32(f, _mm_castps_si128(_mm_cmplt_ps(u, frac))); /* true is -1 */
        __m128i over = _mm_cmpgt_epi32(lv, vs);                                  /* min(lv, s) */
        lv = _mm_or_si128(_mm_and_si128(over, vs), _mm_andnot_si128(over, lv));
        _mm_storeu_si128((__m128i *)(void *)(l + 4 * q), lv);
        nz |= (uint64_t)(~_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(lv, zero))) & 0xf) << 4 * q;
    }
    *nz_out = nz;
    *neg_out = neg;
}
#endif

/* Bits are gathered in a register and handed to the bit writer 64 at a time. */
typedef struct qsgd_out {
    cmp_bitw *w;
    uint64_t acc;
    int nacc; /* < 64 */
} qsgd_out;

static inline void put(qsgd_out *q, uint64_t v, int nb) /* 0 <= nb <= 64, v < 2^nb */
{
    q->acc |= v << q->nacc;
    int t = q->nacc + nb;
    if (t >= 64) {
        cmp_bitw_bits(q->w, q->acc, 64);
        q->acc = q->nacc ? v >> (64 - q->nacc) : 0;
        t -= 64;
    }
    q->nacc = t;
}

static inline void put_ones(qsgd_out *q, int run) /* 0 <= run <= 64: that many zero levels */
{
    /* no branch on run == 0: between dense levels it is a coin flip */
    uint64_t ones = ~0ULL >> (63 - (run - (run > 0)));
    put(q, run ? ones : 0, run);
}

static long qsgd_encode(const cmp_spec *s, const float *x, size_t n, uint64_t seed, void *work, uint8_t *out,
                        size_t cap)
{
    (void)work;
    if (cap < qsgd_bound(s, n))
        return -ENOSPC;
    uint32_t levels = (uint32_t)s->levels;
    if (levels < 1 || levels > QSGD_MAX_LEVELS)
        return -EINVAL;
    double sq = sum_sq(x, n);
    if (!isfinite(sq))
        return -EINVAL; /* inf or NaN in x */
    float norm = (float)sqrt(sq);
    if (isinf(norm))
        return -ERANGE; /* finite values whose norm is beyond f32 */
    /* For norms below 2^-100, s / norm could overflow f32: scale the values
     * up by 2^100 first (exact) and the factor down by as much. */
    float pre = norm < 0x1p-100f ? 0x1p100f : 1.0f;
    float scale = norm > 0 ? (float)levels / (norm * pre) : 0.0f;

    cmp_u64_put(out, seed);
    cmp_f32_put(out + 8, norm);
    out[12] = (uint8_t)levels;
    out[13] = (uint8_t)(levels >> 8);
    cmp_bitw w;
    cmp_bitw_init(&w, out + QSGD_HEADER, cap - QSGD_HEADER);
    qsgd_out q = {&w, 0, 0};

    const u32_alias *u = (const u32_alias *)(const void *)x;
    uint32_t l[64], r[64];
    uint8_t sb[8];
    for (size_t base = 0; base < n; base += 64) {
        size_t m = n - base < 64 ? n - base : 64;
        /* the hardware prefetcher alone leaves this loop waiting on memory */
        if (n - base >= PREFETCH_AHEAD + 64)
            for (size_t j = 0; j < 64; j += 16)
                __builtin_prefetch(x + base + PREFETCH_AHEAD + j);
        cmp_rng_fill32(seed, base / 2, (m + 1) / 2, r);
        uint64_t nz, neg;
#if defined(__SSE2__)
        if (m == 64) {
            levels_sse2(x + base, r, pre, scale, levels, l, &nz, &neg);
        } else
#endif
        {
            for (size_t j = 0; j < m; j++)
                l[j] = qsgd_level(u[base + j], r[j], pre, scale, levels);
            nz = nonzero_mask(l, m);
            memset(sb, 0, sizeof sb);
            cmp_signs_pack(x + base, m, sb);
            neg = cmp_u64_get(sb);
        }
        if (!nz) {
            put_ones(&q, (int)m);
            continue;
        }
        int at = 0;
        while (nz) {
            int t = __builtin_ctzll(nz);
            nz &= nz - 1;
            put_ones(&q, t - at);
            uint32_t v = l[t] + 1;
            int z = floor_log2_u32(v);
            /* gamma, LSB-first: z zeros, a one, the z low bits of v; then the sign */
            uint64_t code = ((uint64_t)(v - (1u << z)) << 1 | 1) << z | (neg >> t & 1) << (2 * z + 1);
            put(&q, code, 2 * z + 2);
            at = t + 1;
        }
        put_ones(&q, (int)m - at);
    }
    if (q.nacc)
        cmp_bitw_bits(&w, q.acc, q.nacc);
    long len = cmp_bitw_finish(&w);
    return len < 0 ? len : QSGD_HEADER + len;
}

/* One pass over the levels; with dst == NULL it only validates.
 *
 * The bit reader is inlined here rather than taken from bitio.h: a level
 * costs a handful of instructions this way, against three calls (a run of
 * ones, a gamma code, a sign) through the generic reader, which made
 * decoding 10x slower than encoding when most levels are nonzero. It keeps
 * bitio's discipline: never a byte past len, and every code checked. */
static int qsgd_walk(const uint8_t *in, size_t len, size_t n, uint32_t levels, float unit, float alpha, float *dst)
{
    uint64_t acc = 0; /* the next nacc unread bits at the bottom; above them, zeros or the true next bits */
    int nacc = 0;
    size_t pos = 0; /* bytes loaded into acc */
    size_t i = 0;
    while (i < n) {
        if (len - pos >= 8) {
            /* Unconditional while 8 bytes remain: a branch on nacc would be
             * mispredicted about as often as levels change length. With
             * nacc >= 56 this loads nothing new and leaves nacc alone. */
            acc |= cmp_load_le64_(in + pos) << nacc;
            pos += (size_t)(63 - nacc) >> 3;
            nacc |= 56;
        } else {
            for (; nacc <= 56 && pos < len; pos++, nacc += 8)
                acc |= (uint64_t)in[pos] << nacc;
        }
        if (nacc == 0)
            return -EBADMSG; /* the stream ends before n levels */
        uint64_t live = nacc == 64 ? ~0ULL : (1ULL << nacc) - 1;
        if ((acc & 0xff) == 0xff) { /* a run of zero levels: skip it, nothing to add */
            uint64_t zeros = ~acc & live;
            size_t run = zeros ? (size_t)__builtin_ctzll(zeros) : (size_t)nacc;
            if (run > n - i)
                run = n - i;
            acc = run == 64 ? 0 : acc >> run;
            nacc -= (int)run;
            i += run;
            continue;
        }
        /* One level, without branching on its value (where levels are not
         * mostly zero, such a branch is a coin flip): gamma(l + 1) is z
         * zeros, a one and z bits, with z = 0 for l = 0; then a sign bit if
         * z > 0. l <= s <= 32767 gives z <= 15: at most 32 bits. */
        uint64_t ones = acc & live;
        if (!ones)
            return -EBADMSG;
        int z = __builtin_ctzll(ones);
        if (z > 15)
            return -EBADMSG;
        int has_sign = z > 0, need = 2 * z + 1 + has_sign;
        if (need > nacc)
            return -EBADMSG;
        uint32_t l = (uint32_t)((acc >> (z + 1) & ((1ULL << z) - 1)) | 1ULL << z) - 1;
        uint32_t neg = (uint32_t)(acc >> (2 * z + 1)) & (uint32_t)has_sign;
        if (l > levels)
            return -EBADMSG;
        acc >>= need;
        nacc -= need;
        if (dst) {
            float val = unit * (float)l;
            uint32_t vb;
            memcpy(&vb, &val, 4);
            vb ^= neg << 31; /* negation without a branch on a random sign */
            memcpy(&val, &vb, 4);
            dst[i] += alpha * val;
        }
        i++;
    }
    /* Nothing may follow the last level but the zero padding of its byte:
     * fewer than 8 unread bits, all zero, and no unread bytes. */
    if (pos != len || nacc >= 8 || (acc & ((1ULL << nacc) - 1)))
        return -EBADMSG;
    return 0;
}

static int qsgd_decode_add(const uint8_t *in, size_t len, size_t n, float alpha, float *dst)
{
    if (len < QSGD_HEADER)
        return -EBADMSG;
    uint32_t nb = (uint32_t)in[8] | (uint32_t)in[9] << 8 | (uint32_t)in[10] << 16 | (uint32_t)in[11] << 24;
    uint32_t levels = (uint32_t)in[12] | (uint32_t)in[13] << 8;
    if (nb >= 0x7f800000u || levels < 1 || levels > QSGD_MAX_LEVELS)
        return -EBADMSG;
    /* n values need at least n bits: reject before walking a short stream */
    if ((len - QSGD_HEADER) < (n + 7) / 8)
        return -EBADMSG;
    float unit = bits_f32(nb) / (float)levels;
    /* Validate first so that a bad message leaves dst untouched. */
    int rc = qsgd_walk(in + QSGD_HEADER, len - QSGD_HEADER, n, levels, unit, alpha, NULL);
    if (rc == 0)
        rc = qsgd_walk(in + QSGD_HEADER, len - QSGD_HEADER, n, levels, unit, alpha, dst);
    return rc;
}

const cmp_ops cmp_qsgd = {
    .name = "qsgd",
    .id = 5,
    .usage = "qsgd:LEVELS  unbiased stochastic quantisation to LEVELS (1..32767) levels of the l2 norm, "
             "Elias-gamma coded levels + signs; about 1 bit per value when most levels are 0",
    .parse = qsgd_parse,
    .bound = qsgd_bound,
    .work = NULL,
    .encode = qsgd_encode,
    .decode_add = qsgd_decode_add,
};
