/* The dense codecs (none, fp16, bf16, sign, natural, terngrad, qsgd) against
 * compress/FORMAT.md: exact message sizes and bounds; byte-for-byte equality
 * with reference encoders written from the format text (so the document and
 * the code cannot drift apart); rounding of fp16/bf16 against plain
 * shift-and-round references, ties included; decode_add adds exactly
 * alpha * decoded; every truncation and each documented corruption fails
 * with -EBADMSG and leaves dst untouched, random corruption never crashes
 * (run under ASan) and decodes to finite values when accepted;
 * unbiasedness of qsgd, terngrad and natural with rigorous (Bernstein)
 * tolerances; natural's second moment bound; determinism; spec errors. */
#include "compress/cmp.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/bitio.h"
#include "compress/cmp_rng.h"
#include "tests/exact_copy.h"

TestSuite(compress_dense, .timeout = 300);

/* ---- helpers --------------------------------------------------------------- */

static const char *const DENSE[] = {"none", "fp16", "bf16", "sign", "natural", "terngrad", "qsgd:1", "qsgd:16",
                                    "qsgd:32767", NULL};
static const size_t SIZES[] = {0, 1, 7, 4096, 1000000};

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545f4914f6cdd1dULL;
}

static double unif(void) { return (double)(rnd() >> 11) * 0x1p-53; }

static float gauss(void)
{
    double u = unif(), v = unif();
    return (float)(sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v));
}

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Gradient-like data: Gaussian with a spread of scales, a few zeros and exact powers of two. */
static float *make_x(size_t n)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    cr_assert_not_null(x);
    for (size_t i = 0; i < n; i++) {
        float g = gauss() * 1e-3f * (float)(1 + i % 5);
        if (i % 97 == 3)
            g = 0.0f;
        if (i % 89 == 5)
            g = -0.25f;
        x[i] = g;
    }
    return x;
}

static size_t varint_len(uint64_t v)
{
    size_t l = 1;
    while (v >= 0x80)
        v >>= 7, l++;
    return l;
}

static size_t header_len(size_t n) { return 1 + varint_len(n); }

static void parse(cmp_spec *s, const char *text)
{
    char err[160];
    int rc = cmp_spec_parse(s, text, err, sizeof err);
    cr_assert_eq(rc, 0, "%s: %s", text, err);
}

/* Encodes into a block of exactly cmp_bound bytes (ASan sees any overrun). */
static uint8_t *encode(const char *spec, const float *x, size_t n, uint64_t seed, long *len)
{
    cmp_spec s;
    parse(&s, spec);
    size_t cap = cmp_bound(&s, n);
    uint8_t *msg = malloc(cap);
    cr_assert_not_null(msg);
    *len = cmp_encode(&s, x, n, seed, NULL, msg, cap);
    cr_assert_geq(*len, 0, "%s n=%zu: encode returned %ld", spec, n, *len);
    cr_assert_leq((size_t)*len, cap, "%s n=%zu: %ld > bound %zu", spec, n, *len, cap);
    return msg;
}

static int is_qsgd(const char *spec) { return strncmp(spec, "qsgd", 4) == 0; }

static int levels_of(const char *spec) { return atoi(spec + 5); }

/* 32 random bits for value i (FORMAT.md, "Random draws"). */
static uint32_t draw32(uint64_t seed, size_t i) { return (uint32_t)(cmp_rng_at(seed, i / 2) >> (32 * (i % 2))); }

/* ---- reference encoders, written from compress/FORMAT.md ------------------------------- */

/* fp16 by the book: shift the 24-bit significand, round half to even. */
static uint16_t ref_fp16(float f)
{
    uint32_t u = f2u(f), s = (u >> 16) & 0x8000, a = u & 0x7fffffff;
    if (a > 0x7f800000)
        return (uint16_t)(s | 0x7e00 | ((a >> 13) & 0x3ff));
    if (a == 0x7f800000)
        return (uint16_t)(s | 0x7c00);
    int E = (int)(a >> 23);
    uint64_t M = (a & 0x7fffff) | (E ? 0x800000 : 0);
    int e = E ? E - 127 : -126; /* value = M * 2^(e - 23) */
    int sh;
    uint32_t base;
    if (e >= -14) { /* normal half: keep 10 fraction bits */
        sh = 13;
        base = (uint32_t)(e + 15) << 10;
        M &= 0x7fffff;
    } else { /* subnormal half: value / 2^-24 = M * 2^(e + 1) */
        sh = -1 - e;
        base = 0;
    }
    if (sh >= 40)
        return (uint16_t)s;
    uint64_t q = M >> sh, rem = M & ((1ULL << sh) - 1), half = 1ULL << (sh - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++;
    uint32_t h = base + (uint32_t)q;
    if (h >= 0x7c00)
        h = 0x7c00;
    return (uint16_t)(s | h);
}

static uint16_t ref_bf16(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((u >> 16) | 0x40);
    uint32_t hi = u >> 16, lo = u & 0xffff;
    if (lo > 0x8000 || (lo == 0x8000 && (hi & 1)))
        hi++;
    return (uint16_t)hi;
}

static void ref_signs(const float *x, size_t n, uint8_t *out)
{
    memset(out, 0, (n + 7) / 8);
    for (size_t i = 0; i < n; i++)
        out[i / 8] |= (uint8_t)((f2u(x[i]) >> 31) << (i % 8));
}

/* Writes the common header; returns its length. */
static size_t ref_header(uint8_t *out, uint8_t id, size_t n)
{
    out[0] = id;
    return 1 + cmp_varint_put(out + 1, n);
}

static uint32_t ref_qsgd_level(float xi, float pre, float c, uint32_t s, uint32_t r)
{
    float a = fabsf(xi) * pre * c;
    float fl = floorf(a);
    float frac = a - fl;
    uint32_t l = (uint32_t)fl + ((float)(r >> 8) * 0x1p-24f < frac ? 1 : 0);
    return l > s ? s : l;
}

/* The f32 sums the format leaves to the encoder (sign's mean |x|, qsgd's
 * norm: "the f32 nearest to the exact value, up to the rounding of the
 * summation order") are taken from the message under test, after checking
 * them against our own sum; everything else is recomputed from the format. */
static float borrowed(const uint8_t *msg, size_t off, double exact, const char *what)
{
    float v = cmp_f32_get(msg + off);
    cr_assert_leq(fabs((double)v - exact), 1e-6 * exact + 1e-45, "%s %a, exact %a", what, (double)v, exact);
    return v;
}

/* Returns the reference message length. */
static size_t ref_encode(const char *spec, const float *x, size_t n, uint64_t seed, uint8_t *out, const uint8_t *msg)
{
    size_t h;
    if (!strcmp(spec, "none")) {
        h = ref_header(out, 0, n);
        for (size_t i = 0; i < n; i++)
            cmp_f32_put(out + h + 4 * i, x[i]);
        return h + 4 * n;
    }
    if (!strcmp(spec, "fp16") || !strcmp(spec, "bf16")) {
        int fp16 = spec[0] == 'f';
        h = ref_header(out, fp16 ? 1 : 2, n);
        for (size_t i = 0; i < n; i++) {
            uint16_t b = fp16 ? ref_fp16(x[i]) : ref_bf16(x[i]);
            out[h + 2 * i] = (uint8_t)b;
            out[h + 2 * i + 1] = (uint8_t)(b >> 8);
        }
        return h + 2 * n;
    }
    if (!strcmp(spec, "sign")) {
        h = ref_header(out, 8, n);
        double sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += fabs((double)x[i]);
        cmp_f32_put(out + h, n ? borrowed(msg, h, sum / (double)n, "sign scale") : 0.0f);
        ref_signs(x, n, out + h + 4);
        return h + 4 + (n + 7) / 8;
    }
    if (!strcmp(spec, "natural")) {
        h = ref_header(out, 7, n);
        cmp_u64_put(out + h, seed);
        ref_signs(x, n, out + h + 8);
        uint8_t *code = out + h + 8 + (n + 7) / 8;
        for (size_t i = 0; i < n; i++) {
            uint32_t a = f2u(x[i]) & 0x7fffffff, E = a >> 23, m = a & 0x7fffff;
            uint32_t c = E + ((draw32(seed, i) >> 9) < m ? 1 : 0);
            code[i] = (uint8_t)(c > 254 ? 254 : c);
        }
        return h + 8 + (n + 7) / 8 + n;
    }
    if (!strcmp(spec, "terngrad")) {
        h = ref_header(out, 6, n);
        float s = 0;
        for (size_t i = 0; i < n; i++)
            s = fabsf(x[i]) > s ? fabsf(x[i]) : s;
        cmp_u64_put(out + h, seed);
        cmp_f32_put(out + h + 8, s);
        uint8_t *t = out + h + 12;
        size_t nb = (n + 4) / 5;
        memset(t, 0, nb);
        for (size_t i = 0; i < n; i++) {
            size_t g = i / 80 * 80, r = n - g < 80 ? n - g : 80, stride = r == 80 ? 16 : (r + 4) / 5;
            size_t j = (i - g) % stride, q = (i - g) / stride, byte = g / 5 + j;
            int keep = (float)(draw32(seed, i) >> 8) * (s * 0x1p-24f) < fabsf(x[i]);
            int d = keep ? (signbit(x[i]) ? 2 : 1) : 0;
            int p3 = 1;
            for (size_t k = 0; k < q; k++)
                p3 *= 3;
            t[byte] = (uint8_t)(t[byte] + d * p3);
        }
        return h + 12 + nb;
    }
    if (is_qsgd(spec)) {
        uint32_t s = (uint32_t)levels_of(spec);
        h = ref_header(out, 5, n);
        double sq = 0;
        for (size_t i = 0; i < n; i++)
            sq += (double)x[i] * (double)x[i];
        float norm = borrowed(msg, h + 8, sqrt(sq), "qsgd norm");
        float pre = norm < 0x1p-100f ? 0x1p100f : 1.0f;
        float c = norm > 0 ? (float)s / (norm * pre) : 0.0f;
        cmp_u64_put(out + h, seed);
        cmp_f32_put(out + h + 8, norm);
        out[h + 12] = (uint8_t)s;
        out[h + 13] = (uint8_t)(s >> 8);
        cmp_bitw w;
        size_t cap = 32 * n + 16;
        cmp_bitw_init(&w, out + h + 14, cap);
        for (size_t i = 0; i < n; i++) {
            uint32_t l = ref_qsgd_level(x[i], pre, c, s, draw32(seed, i));
            cmp_bitw_gamma(&w, (uint64_t)l + 1);
            if (l)
                cmp_bitw_bits(&w, signbit(x[i]) ? 1 : 0, 1);
        }
        long len = cmp_bitw_finish(&w);
        cr_assert_geq(len, 0);
        return h + 14 + (size_t)len;
    }
    cr_assert_fail("no reference for %s", spec);
    return 0;
}

/* The documented payload size for n values; for qsgd, from the levels the
 * reference quantiser produces (bits = sum gamma_bits(l + 1) + [l > 0]). */
static size_t formula(const char *spec, const float *x, size_t n, uint64_t seed, const uint8_t *msg)
{
    if (!strcmp(spec, "none"))
        return 4 * n;
    if (!strcmp(spec, "fp16") || !strcmp(spec, "bf16"))
        return 2 * n;
    if (!strcmp(spec, "sign"))
        return 4 + (n + 7) / 8;
    if (!strcmp(spec, "natural"))
        return 8 + (n + 7) / 8 + n;
    if (!strcmp(spec, "terngrad"))
        return 12 + (n + 4) / 5;
    uint32_t s = (uint32_t)levels_of(spec);
    double sq = 0;
    for (size_t i = 0; i < n; i++)
        sq += (double)x[i] * (double)x[i];
    float norm = borrowed(msg, header_len(n) + 8, sqrt(sq), "qsgd norm"), pre = norm < 0x1p-100f ? 0x1p100f : 1.0f;
    float c = norm > 0 ? (float)s / (norm * pre) : 0.0f;
    size_t bits = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t l = ref_qsgd_level(x[i], pre, c, s, draw32(seed, i));
        bits += (size_t)cmp_gamma_bits((uint64_t)l + 1) + (l > 0);
    }
    return 14 + (bits + 7) / 8;
}

static size_t bound_formula(const char *spec, size_t n)
{
    if (!is_qsgd(spec))
        return formula(spec, NULL, n, 0, NULL);
    uint32_t s = (uint32_t)levels_of(spec);
    return 14 + (n * (size_t)(cmp_gamma_bits(s + 1) + 1) + 7) / 8;
}

/* dst = decoded values of msg (cmp_decode), asserting success. */
static void decode(const uint8_t *msg, long len, size_t n, float *dst)
{
    int rc = cmp_decode(msg, (size_t)len, n, dst);
    cr_assert_eq(rc, 0, "decode rc %d", rc);
}

/* ---- sizes and bounds ----------------------------------------------------------------- */

Test(compress_dense, sizes_match_formulas_and_stay_within_bound)
{
    for (size_t c = 0; DENSE[c]; c++)
        for (size_t k = 0; k < sizeof SIZES / sizeof SIZES[0]; k++) {
            size_t n = SIZES[k];
            float *x = make_x(n);
            long len;
            uint8_t *msg = encode(DENSE[c], x, n, 42 + k, &len);
            size_t want = header_len(n) + formula(DENSE[c], x, n, 42 + k, msg);
            cr_assert_eq((size_t)len, want, "%s n=%zu: %ld bytes, formula says %zu", DENSE[c], n, len, want);
            cmp_spec s;
            parse(&s, DENSE[c]);
            cr_assert_eq(cmp_bound(&s, n), CMP_HEADER_MAX + bound_formula(DENSE[c], n), "%s n=%zu: bound", DENSE[c],
                         n);
            cr_assert_eq(cmp_work_size(&s, n), 0, "dense codecs need no scratch");
            free(msg);
            free(x);
        }
}

Test(compress_dense, bits_per_value_as_promised)
{
    /* The headline numbers of FORMAT.md at n = 10^6 (payload only). */
    size_t n = 1000000;
    float *x = make_x(n);
    struct { const char *spec; double bits; } want[] = {{"none", 32}, {"fp16", 16}, {"bf16", 16}, {"sign", 1},
                                                        {"natural", 9}, {"terngrad", 1.6}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        long len;
        uint8_t *msg = encode(want[i].spec, x, n, 1, &len);
        double bits = 8.0 * (double)((size_t)len - header_len(n)) / (double)n;
        cr_assert(fabs(bits - want[i].bits) < 1e-3, "%s: %.5f bits per value", want[i].spec, bits);
        free(msg);
    }
    free(x);
}

Test(compress_dense, qsgd_worst_cases_stay_within_bound)
{
    /* l = s everywhere it can be: n = 1 (always l = s), one-hot, equal
     * magnitudes (l near s / sqrt(n)), and the largest level count. */
    const char *specs[] = {"qsgd:1", "qsgd:2", "qsgd:3", "qsgd:255", "qsgd:32767"};
    size_t ns[] = {1, 2, 3, 7, 64, 65, 1000};
    for (size_t a = 0; a < sizeof specs / sizeof specs[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
            for (int shape = 0; shape < 3; shape++) {
                size_t n = ns[b];
                float *x = calloc(n, sizeof *x);
                for (size_t i = 0; i < n; i++)
                    x[i] = shape == 0 ? (i == 0 ? -3.0f : 0.0f) : shape == 1 ? (i % 2 ? 1.0f : -1.0f) : gauss();
                for (uint64_t seed = 0; seed < 5; seed++) {
                    long len;
                    uint8_t *msg = encode(specs[a], x, n, seed, &len);
                    cr_assert_eq((size_t)len, header_len(n) + formula(specs[a], x, n, seed, msg));
                    free(msg);
                }
                free(x);
            }
}

Test(compress_dense, qsgd_levels_never_exceed_s)
{
    /* With one value, s |x| / norm is s up to the rounding of s / norm:
     * slightly above s half the time, and then the encoder must clamp, or
     * it would write level s + 1, which decoders reject. */
    const char *specs[] = {"qsgd:32767", "qsgd:1000", "qsgd:3"};
    float got[2];
    for (size_t a = 0; a < 3; a++)
        for (int rep = 0; rep < 3000; rep++) {
            float x[2] = {gauss() * (float)ldexp(1.0, (int)(rnd() % 40) - 20), 0.0f};
            size_t n = 1 + (size_t)(rep % 2);
            long len;
            uint8_t *msg = encode(specs[a], x, n, (uint64_t)rep, &len);
            cr_assert_eq(cmp_decode(msg, (size_t)len, n, got), 0, "%s x = %a seed %d", specs[a], (double)x[0], rep);
            /* level s, or s - 1 when rounding put s |x| / norm a hair below s */
            double tol = fabs((double)x[0]) * (1.0 / atof(specs[a] + 5) + 1e-6);
            cr_assert_leq(fabs((double)got[0] - x[0]), tol, "%s: %a -> %a", specs[a], (double)x[0], (double)got[0]);
            free(msg);
        }
}

Test(compress_dense, encode_refuses_small_cap)
{
    for (size_t c = 0; DENSE[c]; c++) {
        cmp_spec s;
        parse(&s, DENSE[c]);
        float x[7] = {1, 2, 3, 4, 5, 6, 7};
        uint8_t buf[256];
        cr_assert_eq(cmp_encode(&s, x, 7, 0, NULL, buf, cmp_bound(&s, 7) - 1), -ENOSPC, "%s", DENSE[c]);
    }
}

/* ---- byte-exact format conformance ------------------------------------------------------ */

static void check_conformance(const float *x, size_t n)
{
    uint8_t *ref = malloc(32 * n + 64);
    for (size_t c = 0; DENSE[c]; c++)
        for (uint64_t seed = 0; seed < 3; seed++) {
            uint64_t sd = seed * 0x1234567890abcdefULL + 7;
            if (is_qsgd(DENSE[c])) { /* a norm beyond f32 is refused */
                double sq = 0;
                for (size_t i = 0; i < n; i++)
                    sq += (double)x[i] * x[i];
                if (sqrt(sq) >= 0x1.ffffffp127) {
                    cmp_spec s;
                    parse(&s, DENSE[c]);
                    uint8_t *m = malloc(cmp_bound(&s, n));
                    cr_assert_eq(cmp_encode(&s, x, n, sd, NULL, m, cmp_bound(&s, n)), -ERANGE);
                    free(m);
                    continue;
                }
            }
            long len;
            uint8_t *msg = encode(DENSE[c], x, n, sd, &len);
            size_t rlen = ref_encode(DENSE[c], x, n, sd, ref, msg);
            cr_assert_eq((size_t)len, rlen, "%s n=%zu: %ld bytes, reference %zu", DENSE[c], n, len, rlen);
            for (size_t i = 0; i < rlen; i++)
                cr_assert_eq(msg[i], ref[i], "%s n=%zu seed %llu: byte %zu is 0x%02x, reference 0x%02x", DENSE[c], n,
                             (unsigned long long)sd, i, msg[i], ref[i]);
            free(msg);
        }
    free(ref);
}

Test(compress_dense, bytes_match_reference_encoders)
{
    size_t ns[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 79, 80, 81, 159, 160, 161, 255, 256, 257, 1000, 4099};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        float *x = make_x(ns[k]);
        check_conformance(x, ns[k]);
        free(x);
    }
}

Test(compress_dense, bytes_match_reference_on_edge_values)
{
    /* zeros of both signs, subnormals, powers of two, the largest floats,
     * values whose rounding is a tie */
    float v[] = {0.0f, -0.0f, 1e-45f, -1e-40f, 0x1p-126f, 0x1p-24f, 0x1p-25f, 1.0f, -1.0f, 0.75f, 1.0f + 0x1p-11f,
                 65504.0f, 65519.0f, 65520.0f, -70000.0f, 3.3e38f, -0x1.fffffep127f, 0x1p127f, 1.5f, 0.1f};
    size_t n = sizeof v / sizeof v[0];
    check_conformance(v, n);
    check_conformance(v + 2, n - 2 - 6); /* without the values near FLT_MAX: qsgd encodes too */
    /* tiny norms: the encoders scale by 2^100 */
    float t[5] = {1e-40f, -3e-41f, 0.0f, 7e-45f, 2e-39f};
    check_conformance(t, 5);
    float z[33] = {0};
    check_conformance(z, 33);
}

/* ---- rounding of the fixed-point formats ---------------------------------------------------- */

static void fp16_bf16_sweep(float *x, size_t n)
{
    float *got = malloc(n * sizeof *got);
    for (int fmt = 0; fmt < 2; fmt++) {
        long len;
        uint8_t *msg = encode(fmt ? "bf16" : "fp16", x, n, 0, &len);
        size_t h = header_len(n);
        for (size_t i = 0; i < n; i++) {
            uint16_t b = (uint16_t)(msg[h + 2 * i] | msg[h + 2 * i + 1] << 8);
            uint16_t want = fmt ? ref_bf16(x[i]) : ref_fp16(x[i]);
            cr_assert_eq(b, want, "%s(0x%08x) = 0x%04x, expected 0x%04x", fmt ? "bf16" : "fp16", f2u(x[i]), b, want);
        }
        decode(msg, len, n, got);
        for (size_t i = 0; i < n; i++) {
            float xi = x[i];
            if (isnan(xi)) {
                cr_assert(isnan(got[i]), "NaN 0x%08x must stay NaN", f2u(xi));
                continue;
            }
            if (isinf(xi)) {
                cr_assert_eq(got[i], xi);
                continue;
            }
            /* within half an ulp of the target format at x (or overflowed to inf past its range) */
            int e;
            frexpf(xi, &e);
            /* half an ulp of the target format at x; subnormals have a fixed quantum */
            double ulp = fmt ? fmax(ldexp(1.0, e - 8), 0x1p-133) : (e - 1 < -14 ? 0x1p-24 : ldexp(1.0, e - 11));
            if (isinf(got[i])) { /* only past the last tie of the format */
                cr_assert(fabsf(xi) >= (fmt ? u2f(0x7f7f8000) : 65520.0f), "0x%08x overflowed", f2u(xi));
                continue;
            }
            cr_assert_leq(fabs((double)got[i] - (double)xi), ulp / 2, "%s: 0x%08x -> %a", fmt ? "bf16" : "fp16",
                          f2u(xi), (double)got[i]);
        }
        free(msg);
    }
    free(got);
}

Test(compress_dense, fp16_bf16_match_shift_and_round_reference)
{
    /* every exponent, both signs, mantissas at and around every rounding
     * boundary of both formats, and random ones */
    size_t n = 256 * 2 * 64, k = 0;
    float *x = malloc(n * sizeof *x);
    const uint32_t mants[] = {0, 1, 2, 0xfff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x5000, 0x6000, 0x7fff,
                              0x8000, 0x8001, 0x18000, 0x7fffff, 0x7ff000, 0x7fefff, 0x400000, 0x401000, 0x402000};
    size_t nm = sizeof mants / sizeof mants[0];
    for (uint32_t e = 0; e < 256; e++)
        for (uint32_t s = 0; s < 2; s++)
            for (size_t j = 0; j < 64; j++) {
                uint32_t m = j < nm ? mants[j] : (uint32_t)(rnd() & 0x7fffff);
                x[k++] = u2f(s << 31 | e << 23 | m);
            }
    fp16_bf16_sweep(x, k);
    /* and a million random bit patterns */
    free(x);
    n = 1000000;
    x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = u2f((uint32_t)rnd());
    fp16_bf16_sweep(x, n);
    free(x);
}

Test(compress_dense, fp16_rounding_crafted)
{
    struct { float in; float out; } c[] = {
        {1.0f + 0x1p-11f, 1.0f},                   /* tie, 1.0 is even */
        {1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-9f},     /* tie, rounds up to even */
        {1.0f + 0x1p-11f + 0x1p-20f, 1.0f + 0x1p-10f}, /* above the tie */
        {65504.0f, 65504.0f},
        {65519.99f, 65504.0f},
        {65520.0f, INFINITY},                      /* tie between 65504 (odd) and 2^16 */
        {0x1p-24f, 0x1p-24f},                      /* smallest subnormal */
        {0x1p-25f, 0.0f},                          /* tie to even zero */
        {0x1.8p-25f, 0x1p-24f},
        {0x1.8p-24f, 0x1p-23f},                    /* tie between 1 and 2 quanta: 2 */
        {0x1.4p-24f, 0x1p-24f},
        {0x1p-14f - 0x1p-26f, 0x1p-14f},           /* rounds up into the normals */
        {-0x1p-14f, -0x1p-14f},
        {1e-30f, 0.0f},
        {-1e-45f, -0.0f},
        {INFINITY, INFINITY},
        {-INFINITY, -INFINITY},
    };
    size_t n = sizeof c / sizeof c[0];
    float x[32], got[32];
    for (size_t i = 0; i < n; i++)
        x[i] = c[i].in;
    x[n] = NAN;
    x[n + 1] = u2f(0x7f800001); /* signalling NaN with the smallest payload */
    long len;
    uint8_t *msg = encode("fp16", x, n + 2, 0, &len);
    decode(msg, len, n + 2, got);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(got[i], c[i].out, "fp16(%a) = %a, expected %a", (double)c[i].in, (double)got[i],
                     (double)c[i].out);
    cr_assert(isnan(got[n]) && isnan(got[n + 1]));
    size_t h = header_len(n + 2);
    uint16_t snan = (uint16_t)(msg[h + 2 * (n + 1)] | msg[h + 2 * (n + 1) + 1] << 8);
    cr_assert_eq(snan, 0x7e00, "quiet NaN, payload bits above the cut kept (none here)");
    free(msg);
}

Test(compress_dense, bf16_rounding_crafted)
{
    struct { uint32_t in, out; } c[] = {
        {0x3f808000, 0x3f80}, /* 1 + 2^-8: tie, 0x3f80 is even */
        {0x3f818000, 0x3f82}, /* tie, rounds up to even */
        {0x3f808001, 0x3f81},
        {0x3f807fff, 0x3f80},
        {0x7f7fffff, 0x7f80}, /* the largest float rounds to inf */
        {0x7f7f7fff, 0x7f7f},
        {0xff7fffff, 0xff80},
        {0x7f800000, 0x7f80},
        {0x7f800001, 0x7fc0}, /* NaN stays NaN (plain rounding would give inf) */
        {0xffffffff, 0xffff}, /* and would carry into the sign */
        {0x7fc00000, 0x7fc0},
        {0x00000001, 0x0000},
        {0x80008000, 0x8000},
        {0x00018000, 0x0002},
    };
    size_t n = sizeof c / sizeof c[0];
    float x[16];
    for (size_t i = 0; i < n; i++)
        x[i] = u2f(c[i].in);
    long len;
    uint8_t *msg = encode("bf16", x, n, 0, &len);
    size_t h = header_len(n);
    for (size_t i = 0; i < n; i++) {
        uint16_t b = (uint16_t)(msg[h + 2 * i] | msg[h + 2 * i + 1] << 8);
        cr_assert_eq(b, c[i].out, "bf16(0x%08x) = 0x%04x, expected 0x%04x", c[i].in, b, c[i].out);
    }
    free(msg);
}

Test(compress_dense, none_is_exact)
{
    size_t n = 4099;
    float *x = make_x(n), *got = malloc(n * sizeof *got);
    x[0] = INFINITY;
    x[1] = -INFINITY;
    x[2] = 1e-45f;
    x[3] = NAN;
    long len;
    uint8_t *msg = encode("none", x, n, 0, &len);
    decode(msg, len, n, got);
    for (size_t i = 0; i < n; i++)
        if (i == 3)
            cr_assert(isnan(got[i]));
        else
            cr_assert_eq(f2u(got[i]) | (x[i] == 0 ? 0x80000000u : 0), f2u(x[i]) | (x[i] == 0 ? 0x80000000u : 0),
                         "value %zu", i);
    free(msg);
    free(x);
    free(got);
}

Test(compress_dense, sign_is_scaled_sign)
{
    size_t n = 1003;
    float *x = make_x(n), *got = malloc(n * sizeof *got);
    x[5] = -0.0f;
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += fabs((double)x[i]);
    float scale = (float)(sum / (double)n);
    long len;
    uint8_t *msg = encode("sign", x, n, 0, &len);
    decode(msg, len, n, got);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(got[i], signbit(x[i]) ? -scale : scale, "value %zu: %g", i, (double)got[i]);
    free(msg);
    free(x);
    free(got);
}

Test(compress_dense, natural_values_are_powers_of_two_around_x)
{
    size_t n = 5000;
    float *x = make_x(n), *got = malloc(n * sizeof *got);
    x[0] = 3.3e38f;   /* at 2^127 and above: always down */
    x[1] = -1e-40f;   /* f32 subnormal: 0 or 2^-126 */
    x[2] = 0x1p-126f; /* exact powers of two stay */
    x[3] = -0x1p100f;
    long len;
    uint8_t *msg = encode("natural", x, n, 99, &len);
    decode(msg, len, n, got);
    cr_assert_eq(got[0], 0x1p127f);
    cr_assert(got[1] == 0.0f || got[1] == -0x1p-126f);
    cr_assert_eq(got[2], 0x1p-126f);
    cr_assert_eq(got[3], -0x1p100f);
    for (size_t i = 4; i < n; i++) {
        if (x[i] == 0) {
            cr_assert_eq(got[i], 0.0f);
            continue;
        }
        int e;
        frexpf(x[i], &e); /* |x| in [2^(e-1), 2^e) */
        float lo = ldexpf(1.0f, e - 1), hi = ldexpf(1.0f, e);
        cr_assert(fabsf(got[i]) == lo || fabsf(got[i]) == hi, "value %zu: %a -> %a", i, (double)x[i],
                  (double)got[i]);
        cr_assert_eq(signbit(got[i]), signbit(x[i]));
    }
    free(msg);
    free(x);
    free(got);
}

Test(compress_dense, terngrad_and_qsgd_value_sets)
{
    size_t n = 2000;
    float *x = make_x(n), *got = malloc(n * sizeof *got);
    long len;
    uint8_t *msg = encode("terngrad", x, n, 5, &len);
    decode(msg, len, n, got);
    float s = 0;
    for (size_t i = 0; i < n; i++)
        s = fmaxf(s, fabsf(x[i]));
    for (size_t i = 0; i < n; i++) {
        cr_assert(got[i] == 0 || got[i] == (signbit(x[i]) ? -s : s), "terngrad value %zu: %g", i, (double)got[i]);
        if (fabsf(x[i]) == s)
            cr_assert_eq(got[i], x[i], "the largest magnitude always survives");
        if (x[i] == 0)
            cr_assert_eq(got[i], 0.0f);
    }
    free(msg);
    msg = encode("qsgd:4", x, n, 5, &len);
    decode(msg, len, n, got);
    double sq = 0;
    for (size_t i = 0; i < n; i++)
        sq += (double)x[i] * x[i];
    float unit = (float)sqrt(sq) / 4.0f;
    for (size_t i = 0; i < n; i++) {
        float l = fabsf(got[i]) / unit;
        cr_assert(fabsf(l - roundf(l)) < 1e-4f && roundf(l) <= 4, "qsgd value %zu: %g", i, (double)got[i]);
        float a = fabsf(x[i]) / unit;
        cr_assert(roundf(l) >= floorf(a - 1e-4f) && roundf(l) <= floorf(a + 1e-4f) + 1, "qsgd level of %zu", i);
        if (got[i] != 0)
            cr_assert_eq(signbit(got[i]), signbit(x[i]));
    }
    free(msg);
    /* zero vector: all zero, no division by zero */
    memset(x, 0, n * sizeof *x);
    const char *zs[] = {"terngrad", "qsgd:16", "natural", "sign"};
    for (size_t c = 0; c < 4; c++) {
        msg = encode(zs[c], x, n, 1, &len);
        decode(msg, len, n, got);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(got[i], 0.0f, "%s of zeros", zs[c]);
        free(msg);
    }
    /* n = 1: qsgd sends l = s, the value itself (up to the rounding of norm / s * s) */
    float one = -0.3f;
    msg = encode("qsgd:7", &one, 1, 3, &len);
    decode(msg, len, 1, got);
    cr_assert(fabsf(got[0] - one) <= 1e-7f, "%g", (double)got[0]);
    free(msg);
    free(x);
    free(got);
}

Test(compress_dense, nonfinite_input)
{
    const char *refuse[] = {"sign", "natural", "terngrad", "qsgd:16"};
    float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    for (int bad = 0; bad < 3; bad++) {
        x[4] = bad == 0 ? NAN : bad == 1 ? INFINITY : -INFINITY;
        for (size_t c = 0; c < 4; c++) {
            cmp_spec s;
            parse(&s, refuse[c]);
            uint8_t buf[256];
            cr_assert_eq(cmp_encode(&s, x, 9, 0, NULL, buf, sizeof buf), -EINVAL, "%s with %g", refuse[c],
                         (double)x[4]);
        }
    }
    /* a norm beyond f32 */
    float big[4] = {3e38f, -3e38f, 3e38f, 1};
    cmp_spec s;
    parse(&s, "qsgd:16");
    uint8_t buf[256];
    cr_assert_eq(cmp_encode(&s, big, 4, 0, NULL, buf, sizeof buf), -ERANGE);
    /* but the others take large finite values */
    long len;
    uint8_t *msg = encode("terngrad", big, 4, 0, &len);
    free(msg);
    msg = encode("sign", big, 4, 0, &len);
    free(msg);
}

/* ---- decode_add ---------------------------------------------------------------------------- */

Test(compress_dense, decode_add_adds_alpha_times_decoded)
{
    size_t n = 1001;
    float *x = make_x(n), *v = malloc(n * sizeof *v), *dst = malloc(n * sizeof *dst), *before = malloc(n * sizeof *dst);
    const float alphas[] = {1.0f, 0.37f, -1.0f, 0.0f, 3.0f};
    for (size_t c = 0; DENSE[c]; c++) {
        long len;
        uint8_t *msg = encode(DENSE[c], x, n, 11, &len);
        decode(msg, len, n, v);
        for (size_t a = 0; a < sizeof alphas / sizeof alphas[0]; a++) {
            for (size_t i = 0; i < n; i++)
                before[i] = dst[i] = gauss();
            cr_assert_eq(cmp_decode_add(msg, (size_t)len, n, alphas[a], dst), 0);
            for (size_t i = 0; i < n; i++) {
                float want = before[i] + alphas[a] * v[i];
                cr_assert_eq(f2u(dst[i]), f2u(want), "%s alpha %g value %zu: %a, expected %a", DENSE[c],
                             (double)alphas[a], i, (double)dst[i], (double)want);
            }
        }
        /* the message must declare exactly n values */
        cr_assert_eq(cmp_decode_add(msg, (size_t)len, n - 1, 1.0f, dst), -EBADMSG);
        cr_assert_eq(cmp_decode_add(msg, (size_t)len, n + 1, 1.0f, dst), -EBADMSG);
        free(msg);
    }
    free(x);
    free(v);
    free(dst);
    free(before);
}

/* ---- malformed input --------------------------------------------------------------------- */

/* Decodes a copy of msg[0..len) of exactly len bytes and expects -EBADMSG
 * with dst untouched (the dense decoders validate before they add). */
static void expect_bad(const char *what, const uint8_t *msg, size_t len, size_t n)
{
    uint8_t *in = exact_copy(msg, len);
    float *dst = malloc((n ? n : 1) * sizeof *dst);
    for (size_t i = 0; i < n; i++)
        dst[i] = (float)i;
    int rc = cmp_decode_add(in, len, n, 1.0f, dst);
    cr_assert_eq(rc, -EBADMSG, "%s: rc %d", what, rc);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(dst[i], (float)i, "%s: dst[%zu] changed by a rejected message", what, i);
    free(dst);
    free(in);
}

Test(compress_dense, every_truncation_and_extension_is_rejected)
{
    size_t ns[] = {0, 1, 7, 37, 200};
    for (size_t c = 0; DENSE[c]; c++)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            size_t n = ns[k];
            float *x = make_x(n);
            long len;
            uint8_t *msg = encode(DENSE[c], x, n, 3, &len);
            char what[64];
            for (size_t cut = 0; cut < (size_t)len; cut++) {
                snprintf(what, sizeof what, "%s n=%zu cut to %zu of %ld", DENSE[c], n, cut, len);
                expect_bad(what, msg, cut, n);
            }
            uint8_t *longer = malloc((size_t)len + 1);
            memcpy(longer, msg, (size_t)len);
            for (int b = 0; b < 2; b++) {
                longer[len] = b ? 0xff : 0x00;
                snprintf(what, sizeof what, "%s n=%zu with a byte 0x%02x appended", DENSE[c], n, longer[len]);
                expect_bad(what, longer, (size_t)len + 1, n);
            }
            free(longer);
            free(msg);
            free(x);
        }
}

/* Offsets into a message with the common header of n. */
static void put_f32_at(uint8_t *msg, size_t off, uint32_t bits)
{
    for (int i = 0; i < 4; i++)
        msg[off + (size_t)i] = (uint8_t)(bits >> (8 * i));
}

Test(compress_dense, documented_corruptions_are_rejected)
{
    size_t n = 37, h = header_len(n);
    float *x = make_x(n);
    long len;
    uint8_t *m;
    const uint32_t bad_scales[] = {0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 0x80000000, 0xbf800000};

    /* common header: unknown codec id, n that differs from the caller's */
    m = encode("fp16", x, n, 0, &len);
    m[0] = 200;
    expect_bad("unknown codec id", m, (size_t)len, n);
    m[0] = 1;
    m[1] = 36;
    expect_bad("declared n differs", m, (size_t)len, n);
    m[1] = 0x80 | 37;
    expect_bad("declared n overlong varint", m, (size_t)len, n);
    free(m);

    /* sign: scale not a finite non-negative number; nonzero padding bits */
    m = encode("sign", x, n, 0, &len);
    for (size_t b = 0; b < sizeof bad_scales / sizeof bad_scales[0]; b++) {
        uint8_t *c = exact_copy(m, (size_t)len);
        put_f32_at(c, h, bad_scales[b]);
        expect_bad("sign: bad scale", c, (size_t)len, n);
        free(c);
    }
    m[len - 1] |= 0x80; /* 37 values: bits 5..7 of the last byte are padding */
    expect_bad("sign: padding bit set", m, (size_t)len, n);
    free(m);

    /* natural: exponent code 255; nonzero padding in the sign plane */
    m = encode("natural", x, n, 0, &len);
    m[h + 8 + 5 + 17] = 255;
    expect_bad("natural: code 255", m, (size_t)len, n);
    free(m);
    m = encode("natural", x, n, 0, &len);
    m[h + 8 + 4] |= 0x40;
    expect_bad("natural: sign padding", m, (size_t)len, n);
    free(m);

    /* terngrad: bad scale; a byte above 242; nonzero digits past the last value */
    m = encode("terngrad", x, n, 0, &len);
    for (size_t b = 0; b < sizeof bad_scales / sizeof bad_scales[0]; b++) {
        uint8_t *c = exact_copy(m, (size_t)len);
        put_f32_at(c, h + 8, bad_scales[b]);
        expect_bad("terngrad: bad scale", c, (size_t)len, n);
        free(c);
    }
    {
        uint8_t *c = exact_copy(m, (size_t)len);
        c[h + 12 + 3] = 243;
        expect_bad("terngrad: byte 243", c, (size_t)len, n);
        free(c);
    }
    /* 37 values in one short group: stride 8, and digit 4 of bytes 5..7 is past the end */
    for (size_t j = 5; j < 8; j++) {
        uint8_t *c = exact_copy(m, (size_t)len);
        c[h + 12 + j] = (uint8_t)(c[h + 12 + j] % 81 + 81);
        expect_bad("terngrad: padding digit", c, (size_t)len, n);
        free(c);
    }
    free(m);

    /* qsgd: levels 0 or too many; bad norm; a level above s; 64 zeros; trailing garbage */
    m = encode("qsgd:3", x, n, 0, &len);
    for (size_t b = 0; b < sizeof bad_scales / sizeof bad_scales[0]; b++) {
        uint8_t *c = exact_copy(m, (size_t)len);
        put_f32_at(c, h + 8, bad_scales[b]);
        expect_bad("qsgd: bad norm", c, (size_t)len, n);
        free(c);
    }
    {
        uint8_t *c = exact_copy(m, (size_t)len);
        c[h + 12] = 0;
        c[h + 13] = 0;
        expect_bad("qsgd: zero levels", c, (size_t)len, n);
        c[h + 12] = 0x00;
        c[h + 13] = 0x80; /* 32768 */
        expect_bad("qsgd: too many levels", c, (size_t)len, n);
        free(c);
    }
    free(m);
    /* hand-made streams for n = 3 and s = 3: [l=4] is out of range; */
    {
        uint8_t b[64];
        size_t hh = ref_header(b, 5, 3);
        cmp_u64_put(b + hh, 0);
        put_f32_at(b, hh + 8, f2u(1.0f));
        b[hh + 12] = 3;
        b[hh + 13] = 0;
        struct { const char *what; uint64_t gammas[4]; int ng; int extra_bits; } cases[] = {
            {"qsgd: level 4 > s = 3", {5, 1, 1}, 3, 0},
            {"qsgd: too few levels", {2, 1}, 2, 0},
            {"qsgd: trailing bits set", {1, 1, 1}, 3, 1},
        };
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            cmp_bitw w;
            cmp_bitw_init(&w, b + hh + 14, sizeof b - hh - 14);
            for (int g = 0; g < cases[k].ng; g++) {
                cmp_bitw_gamma(&w, cases[k].gammas[g]);
                if (cases[k].gammas[g] > 1)
                    cmp_bitw_bits(&w, 0, 1);
            }
            if (cases[k].extra_bits)
                cmp_bitw_bits(&w, 1, 1);
            long pl = cmp_bitw_finish(&w);
            expect_bad(cases[k].what, b, hh + 14 + (size_t)pl, 3);
        }
        /* the valid neighbour of those: levels 3, 0, 1 */
        cmp_bitw w;
        cmp_bitw_init(&w, b + hh + 14, sizeof b - hh - 14);
        cmp_bitw_gamma(&w, 4);
        cmp_bitw_bits(&w, 1, 1);
        cmp_bitw_gamma(&w, 1);
        cmp_bitw_gamma(&w, 2);
        cmp_bitw_bits(&w, 0, 1);
        long pl = cmp_bitw_finish(&w);
        float got[3];
        cr_assert_eq(cmp_decode(b, hh + 14 + (size_t)pl, 3, got), 0);
        cr_assert_eq(got[0], -1.0f);
        cr_assert_eq(got[1], 0.0f);
        cr_assert_eq(got[2], 1.0f / 3.0f);
        /* 64 zero bits cannot start a level */
        memset(b + hh + 14, 0, 9);
        expect_bad("qsgd: 72 zero bits", b, hh + 14 + 9, 3);
    }
    free(x);
}

Test(compress_dense, random_corruption_never_crashes)
{
    /* Flip bits and bytes at random: any outcome but a crash, an overrun
     * (ASan) or, for the codecs with a scale, a non-finite value is fine. */
    size_t ns[] = {1, 9, 100};
    float *dst = malloc(100 * sizeof *dst);
    for (size_t c = 0; DENSE[c]; c++)
        for (size_t k = 0; k < 3; k++) {
            size_t n = ns[k];
            float *x = make_x(n);
            long len;
            uint8_t *msg = encode(DENSE[c], x, n, 17, &len);
            int scaled = strcmp(DENSE[c], "none") && strcmp(DENSE[c], "fp16") && strcmp(DENSE[c], "bf16");
            for (int rep = 0; rep < 600; rep++) {
                uint8_t *m = exact_copy(msg, (size_t)len);
                int flips = 1 + (int)(rnd() % 3);
                for (int f = 0; f < flips; f++) {
                    size_t at = rnd() % (size_t)len;
                    if (rnd() % 2)
                        m[at] ^= (uint8_t)(1u << (rnd() % 8));
                    else
                        m[at] = (uint8_t)rnd();
                }
                memset(dst, 0, n * sizeof *dst);
                int rc = cmp_decode(m, (size_t)len, n, dst);
                cr_assert(rc == 0 || rc == -EBADMSG, "%s: rc %d", DENSE[c], rc);
                if (rc == 0 && scaled)
                    for (size_t i = 0; i < n; i++)
                        cr_assert(isfinite(dst[i]), "%s: accepted a message with value %g", DENSE[c], (double)dst[i]);
                free(m);
            }
            free(msg);
            free(x);
        }
    free(dst);
}

/* ---- statistics -------------------------------------------------------------------------- */

/* Bernstein: for T draws of a variable with values in an interval of width
 * 1 and variance var, |mean - E| < t except with probability 2 exp(-L),
 * t = (2L/3 + sqrt((2L/3)^2 + 8 T L var)) / (2T). */
static double bernstein(double var, double T, double L)
{
    double a = 2.0 * L / 3.0;
    return (a + sqrt(a * a + 8.0 * T * L * var)) / (2.0 * T);
}

/* Coordinates that exercise every regime: tiny and large against the scale,
 * both signs, zeros, exact powers of two, and (for natural) t = 1/3. */
static float *stat_x(size_t n)
{
    float *x = malloc(n * sizeof *x);
    g_rng = 0x5851f42d4c957f2dULL; /* the same coordinates on every call */
    for (size_t i = 0; i < n; i++) {
        float m = (float)ldexp(1.0 + unif(), -(int)(rnd() % 12)); /* spans 12 binades */
        x[i] = rnd() % 2 ? -m : m;
    }
    x[0] = 0.0f;
    x[1] = 0.5f;
    x[2] = -0x1p-7f;
    x[3] = 4.0f / 3.0f; /* natural's worst case for the second moment */
    x[4] = -0x1p-20f;   /* tiny against every scale: rarely rounds up */
    return x;
}

typedef struct stat_case {
    const char *spec;
    /* the two values a coordinate can take and the probability of hi */
    void (*pair)(const float *x, size_t n, size_t i, const void *ctx, double *lo, double *hi, double *p);
} stat_case;

static void pair_natural(const float *x, size_t n, size_t i, const void *ctx, double *lo, double *hi, double *p)
{
    (void)n, (void)ctx;
    double a = fabs((double)x[i]);
    if (a == 0) {
        *lo = *hi = 0;
        *p = 0;
        return;
    }
    int e;
    frexp(a, &e);
    double l = ldexp(1.0, e - 1), h = ldexp(1.0, e), s = x[i] < 0 ? -1 : 1;
    *lo = s * l;
    *hi = s * h;
    *p = (a - l) / l;
}

static void pair_terngrad(const float *x, size_t n, size_t i, const void *ctx, double *lo, double *hi, double *p)
{
    (void)ctx;
    double s = 0;
    for (size_t j = 0; j < n; j++)
        s = fmax(s, fabs((double)x[j]));
    *lo = 0;
    *hi = x[i] < 0 ? -s : s;
    *p = fabs((double)x[i]) / s;
}

static void pair_qsgd(const float *x, size_t n, size_t i, const void *ctx, double *lo, double *hi, double *p)
{
    double levels = (double)*(const int *)ctx, sq = 0;
    for (size_t j = 0; j < n; j++)
        sq += (double)x[j] * x[j];
    double norm = (double)(float)sqrt(sq), unit = norm / levels, a = fabs((double)x[i]) / unit, fl = floor(a),
           s = x[i] < 0 ? -1 : 1;
    *lo = s * fl * unit;
    *hi = s * (fl + 1) * unit;
    *p = a - fl;
}

static void check_unbiased(const char *spec, void (*pair)(const float *, size_t, size_t, const void *, double *,
                                                          double *, double *),
                           const void *ctx, double *second_moment)
{
    const size_t n = 300, T = 4000;
    float *x = stat_x(n), *got = malloc(n * sizeof *got);
    double *sum = calloc(n, sizeof *sum), *sum2 = calloc(n, sizeof *sum2);
    cmp_spec s;
    parse(&s, spec);
    size_t cap = cmp_bound(&s, n);
    uint8_t *msg = malloc(cap);
    for (size_t t = 0; t < T; t++) {
        long len = cmp_encode(&s, x, n, 0xabcdef0123ULL * (t + 1), NULL, msg, cap);
        cr_assert_geq(len, 0);
        decode(msg, len, n, got);
        for (size_t i = 0; i < n; i++) {
            sum[i] += got[i];
            sum2[i] += (double)got[i] * got[i];
        }
    }
    /* Per coordinate, with 2 exp(-L) = 1e-9 per test: the whole suite has
     * a false alarm probability below 1e-6, and the seeds are fixed anyway. */
    const double L = log(2e9);
    double agg = 0, agg_var = 0;
    for (size_t i = 0; i < n; i++) {
        double lo, hi, p;
        pair(x, n, i, ctx, &lo, &hi, &p);
        double width = fabs(hi - lo), mean = sum[i] / (double)T;
        /* Values are rounded to f32 on the way (norm / s * l in f32), so allow their relative error. */
        double tol = width * bernstein(p * (1 - p), (double)T, L) + 4e-7 * (fabs(hi) + fabs(lo));
        cr_assert_leq(fabs(mean - x[i]), tol, "%s: coordinate %zu (x = %a, p = %g): mean %.9g, off by %.3g > %.3g",
                      spec, i, (double)x[i], p, mean, fabs(mean - x[i]), tol);
        if (width > 0) {
            agg += (mean - x[i]) / (hi - lo); /* in units of p, signed toward hi */
            agg_var += p * (1 - p) / (double)T;
        }
        if (second_moment)
            second_moment[i] = sum2[i] / (double)T;
    }
    /* A small systematic bias in every coordinate hides in the per-coordinate
     * tolerance but not in the sum: six standard deviations of it. */
    cr_assert_leq(fabs(agg), 6 * sqrt(agg_var) + 1e-4, "%s: systematic bias %.4g (sd %.4g)", spec, agg,
                  sqrt(agg_var));
    free(msg);
    free(x);
    free(got);
    free(sum);
    free(sum2);
}

Test(compress_dense, qsgd_is_unbiased)
{
    int s1 = 1, s4 = 4, s16 = 16;
    check_unbiased("qsgd:1", pair_qsgd, &s1, NULL);
    check_unbiased("qsgd:4", pair_qsgd, &s4, NULL);
    check_unbiased("qsgd:16", pair_qsgd, &s16, NULL);
}

Test(compress_dense, terngrad_is_unbiased) { check_unbiased("terngrad", pair_terngrad, NULL, NULL); }

Test(compress_dense, natural_is_unbiased_and_second_moment_within_9_8)
{
    const size_t n = 300, T = 4000;
    double m2[300];
    check_unbiased("natural", pair_natural, NULL, m2);
    float *x = stat_x(n);
    const double L = log(2e9);
    double tot_m2 = 0, tot_x2 = 0, tot_tol = 0;
    for (size_t i = 0; i < n; i++) {
        double lo, hi, p, x2 = (double)x[i] * x[i];
        pair_natural(x, n, i, NULL, &lo, &hi, &p);
        /* E[Q^2] = (1 - p) lo^2 + p hi^2, which is at most 9/8 x^2 with equality at p = 1/3 */
        double want = (1 - p) * lo * lo + p * hi * hi;
        cr_assert_leq(want, 1.125 * x2 * (1 + 1e-12));
        double tol = (hi * hi - lo * lo) * bernstein(p * (1 - p), (double)T, L);
        cr_assert_leq(fabs(m2[i] - want), tol + 1e-12 * x2, "coordinate %zu: E[Q^2] %.6g, theory %.6g", i, m2[i],
                      want);
        cr_assert_leq(m2[i], 1.125 * x2 + tol, "coordinate %zu: E[Q^2] / x^2 = %.4f", i, m2[i] / x2);
        tot_m2 += m2[i];
        tot_x2 += x2;
        tot_tol += tol;
    }
    /* x[3] = 4/3 sits at the worst case: its ratio must be close to 9/8, not just below it */
    /* (sd of that ratio over 4000 draws: 0.013) */
    cr_assert(fabs(m2[3] / ((double)x[3] * x[3]) - 1.125) < 0.07, "worst case ratio %.4f", m2[3] / ((double)x[3] * x[3]));
    cr_assert_leq(tot_m2, 1.125 * tot_x2 + tot_tol);
    free(x);
}

/* ---- determinism -------------------------------------------------------------------------- */

Test(compress_dense, same_seed_same_bytes_different_seed_different_bytes)
{
    size_t n = 1000;
    float *x = make_x(n);
    for (size_t c = 0; DENSE[c]; c++) {
        long l1, l2, l3;
        uint8_t *a = encode(DENSE[c], x, n, 77, &l1), *b = encode(DENSE[c], x, n, 77, &l2),
                *d = encode(DENSE[c], x, n, 78, &l3);
        cr_assert(l1 == l2 && memcmp(a, b, (size_t)l1) == 0, "%s: same seed, different bytes", DENSE[c]);
        int stochastic = strcmp(DENSE[c], "none") && strcmp(DENSE[c], "fp16") && strcmp(DENSE[c], "bf16") &&
                         strcmp(DENSE[c], "sign");
        if (stochastic) {
            cr_assert(l1 != l3 || memcmp(a, d, (size_t)l1) != 0, "%s: seed ignored", DENSE[c]);
            cr_assert_eq(cmp_u64_get(a + header_len(n)), 77, "%s: the seed is in the header", DENSE[c]);
            /* and not just in the header: the payload after it differs too */
            size_t off = header_len(n) + 8 + (strcmp(DENSE[c], "natural") ? 0 : (n + 7) / 8);
            cr_assert(l1 != l3 || memcmp(a + off + 6, d + off + 6, (size_t)l1 - off - 6) != 0, "%s: payload", DENSE[c]);
        } else {
            cr_assert(l1 == l3 && memcmp(a, d, (size_t)l1) == 0, "%s is deterministic", DENSE[c]);
        }
        free(a);
        free(b);
        free(d);
    }
    free(x);
}

/* ---- specs ------------------------------------------------------------------------------- */

Test(compress_dense, bad_specs_give_one_line_errors)
{
    const char *bad[] = {"qsgd", "qsgd:0", "qsgd:x", "qsgd:-1", "qsgd:32768", "qsgd:16x", "qsgd:", "qsgd:1.5",
                         "qsgd:99999999999999999999", "fp16:3", "natural:1", "none:x", "bf16:", "sign:2",
                         "terngrad:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cmp_spec s;
        char err[160] = "";
        int rc = cmp_spec_parse(&s, bad[i], err, sizeof err);
        cr_assert_eq(rc, -EINVAL, "'%s' accepted", bad[i]);
        char name[16];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(bad[i], ":"), bad[i]);
        cr_assert(strncmp(err, name, strlen(name)) == 0 && err[strlen(name)] == ':',
                  "'%s': message should start with the codec name: %s", bad[i], err);
        cr_assert_null(strchr(err, '\n'), "one line: %s", err);
        cr_assert_gt(strlen(err), strlen(name) + 10, "a message, not just a name: %s", err);
    }
    const char *good[] = {"qsgd:1", "qsgd:32767", "qsgd:016", "none", "fp16", "bf16", "sign", "natural", "terngrad"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        cmp_spec s;
        char err[160];
        cr_assert_eq(cmp_spec_parse(&s, good[i], err, sizeof err), 0, "%s: %s", good[i], err);
    }
    cmp_spec s;
    char err[160];
    cmp_spec_parse(&s, "qsgd:016", err, sizeof err);
    cr_assert_eq(s.levels, 16);
}

Test(compress_dense, registry_ids)
{
    struct { const char *name; uint8_t id; } want[] = {{"none", 0}, {"fp16", 1}, {"bf16", 2}, {"qsgd", 5},
                                                       {"terngrad", 6}, {"natural", 7}, {"sign", 8}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const cmp_ops *ops = cmp_find(want[i].name);
        cr_assert_not_null(ops, "%s", want[i].name);
        cr_assert_eq(ops->id, want[i].id, "%s", want[i].name);
        cr_assert_eq(cmp_find_id(want[i].id), ops);
        cr_assert_not_null(ops->usage);
        cr_assert(strncmp(ops->usage, want[i].name, strlen(want[i].name)) == 0, "usage starts with the name");
    }
}

/* The value-by-value codecs make and read a message a block at a time
 * (cmp_values_*): blocks of uneven sizes written in any order give
 * cmp_encode's bytes, and read back give cmp_decode's values, bit for bit
 * (NaN, infinities and -0 included); every other codec is -ENOTSUP, and a
 * message with the wrong count or length is -EBADMSG, as cmp_decode says. */
Test(compress_dense, a_value_by_value_codec_writes_and_reads_a_block_at_a_time)
{
    const char *const mine[] = {"none", "fp16", "bf16"};
    const size_t n = 4096 + 37, blocks[] = {1, 255, 256, 1000, 3, 4096};
    float *x = make_x(n), *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    cr_assert(want && got);
    x[5] = NAN, x[6] = INFINITY, x[7] = -0.0f, x[8] = 1e30f;
    for (size_t c = 0; c < sizeof mine / sizeof mine[0]; c++) {
        cmp_spec s;
        parse(&s, mine[c]);
        long len;
        uint8_t *whole = encode(mine[c], x, n, 1, &len), *bytes = malloc(cmp_bound(&s, n));
        cr_assert_not_null(bytes);
        memset(bytes, 0xa5, cmp_bound(&s, n));
        cmp_values mv;
        cr_assert_eq(cmp_values_begin(&s, n, bytes, cmp_bound(&s, n) - 1, &mv), -ENOSPC, "%s", mine[c]);
        cr_assert_eq(cmp_values_begin(&s, n, bytes, cmp_bound(&s, n), &mv), len, "%s: the message's length", mine[c]);
        /* back to front, in blocks of changing sizes */
        for (size_t end = n, b = 0; end > 0; b++) {
            const size_t m = blocks[b % 6] < end ? blocks[b % 6] : end;
            cmp_values_write(&mv, bytes, end - m, x + end - m, m);
            end -= m;
        }
        cr_assert_eq(memcmp(bytes, whole, (size_t)len), 0, "%s: cmp_encode's bytes", mine[c]);
        cr_assert_eq(cmp_decode(whole, (size_t)len, n, want), 0);
        cmp_values rv;
        cr_assert_eq(cmp_values_of(whole, (size_t)len, n, &rv), 0, "%s", mine[c]);
        for (size_t at = 0, b = 0; at < n; b++) {
            const size_t m = blocks[b % 6] < n - at ? blocks[b % 6] : n - at;
            cmp_values_read(&rv, whole, at, m, got + at);
            at += m;
        }
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(f2u(got[i]), f2u(want[i]), "%s: value %zu", mine[c], i);
        cr_assert_eq(cmp_values_of(whole, (size_t)len - 1, n, &rv), -EBADMSG, "%s: a byte short", mine[c]);
        cr_assert_eq(cmp_values_of(whole, (size_t)len, n + 1, &rv), -EBADMSG, "%s: another count", mine[c]);
        free(whole), free(bytes);
    }
    const char *const others[] = {"sign", "qsgd:16", "natural"};
    for (size_t c = 0; c < sizeof others / sizeof others[0]; c++) {
        cmp_spec s;
        parse(&s, others[c]);
        long len;
        uint8_t *msg = encode(others[c], x + 10, n - 10, 1, &len);
        cmp_values mv;
        cr_assert_eq(cmp_values_begin(&s, n - 10, msg, cmp_bound(&s, n - 10), &mv), -ENOTSUP, "%s", others[c]);
        cr_assert_eq(cmp_values_of(msg, (size_t)len, n - 10, &mv), -ENOTSUP, "%s", others[c]);
        free(msg);
    }
    free(x), free(want), free(got);
}
