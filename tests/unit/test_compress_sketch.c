/* The sketch codec (id 10) against compress/FORMAT.md: message sizes equal
 * the documented formula in both position forms and never exceed the
 * documented bound; the bytes equal a reference encoder's and the decoded
 * values a reference decoder's, both written here from the format text;
 * the estimate is unbiased over the hash seed, with the documented
 * variance; the sparse views (decode_sparse, encoded_sparse) agree with the
 * dense decoder bit for bit; every truncation, bit flip and documented
 * corruption is rejected or decodes in bounds (run under ASan) without
 * touching dst on rejection; bad specs fail with one line. */
#include <criterion/criterion.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/bitio.h"
#include "compress/cmp.h"
#include "compress/cmp_rng.h"
#include "compress/cmp_select.h"

TestSuite(compress_sketch, .timeout = 600);

#include "tests/sketch_reference.h"
#include "tests/compress_check.h"

/* ---- helpers ------------------------------------------------------------------- */


/* The position form byte of a message for n values. */
static int form_of(const uint8_t *m, size_t n)
{
    size_t p = 1 + vlen(n);
    uint64_t k, w;
    size_t used;
    cr_assert_eq(cmp_varint_get(m + p, 10, &used, &k), 0);
    p += used;
    cr_assert_eq(cmp_varint_get(m + p, 10, &used, &w), 0);
    return m[p + used];
}

/* ---- 1. sizes ------------------------------------------------------------------- */

/* The exact size formula of FORMAT.md and its bound, over n, FRACTION,
 * COLUMNS and data that give both position forms; the form is the one the
 * format prescribes, and R <= n (why the bitmap never needs more room). */
Test(compress_sketch, size_is_the_documented_formula)
{
    const size_t ns[] = {0, 1, 7, 100, 4096, 203530};
    const double fractions[] = {0.001, 0.01, 0.04, 0.3, 0.5, 0.9, 1.0};
    const double columns[] = {0.5, 1.0, 0.1, 0.37};
    size_t forms[2] = {0, 0};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++) {
        size_t n = ns[a];
        float *x = malloc((n + 1) * sizeof *x);
        uint32_t *idx = malloc((n + 1) * sizeof *idx);
        for (int pat = 0; pat < PAT_COUNT; pat++) {
            fill(x, n, pat, 100 + (uint64_t)pat);
            for (size_t f = 0; f < sizeof fractions / sizeof *fractions; f++) {
                size_t k = doc_k(fractions[f], n);
                doc_topk(x, n, k, idx);
                uint64_t r;
                int b = best_rice(idx, k, &r);
                cr_assert_leq(r, n, "R <= R(0) = last position + 1 <= n");
                for (size_t c = 0; c < sizeof columns / sizeof *columns; c++) {
                    char spec[64];
                    snprintf(spec, sizeof spec, "sketch:%.17g:%.17g", fractions[f], columns[c]);
                    enc e;
                    enc_spec(&e, spec, n);
                    size_t w = doc_w(columns[c], k);
                    cr_assert_eq(e.cap, doc_bound(n, k, w), "%s n=%zu: bound", spec, n);
                    long len = enc_run(&e, x, n, 77 + c);
                    cr_assert_gt(len, 0, "%s n=%zu: %ld", spec, n, len);
                    cr_assert_eq((size_t)len, doc_size(n, k, w, r), "%s n=%zu %s: %ld bytes", spec, n, pat_name[pat],
                                 len);
                    cr_assert_leq((size_t)len, e.cap);
                    int form = form_of(e.buf, n);
                    int want = (n + 7) / 8 <= (r + 7) / 8 ? BITMAP : b;
                    cr_assert_eq(form, want, "%s n=%zu %s: form %d, want %d", spec, n, pat_name[pat], form, want);
                    forms[form == BITMAP]++;
                    /* a buffer one byte short of the bound is refused, not overrun */
                    cr_assert_eq(cmp_encode(&e.s, x, n, 1, e.work, e.buf, e.cap - 1), -ENOSPC);
                    enc_free(&e);
                }
            }
        }
        free(x);
        free(idx);
    }
    cr_log_info("sketch sizes: %zu messages with Rice gaps, %zu with a bitmap", forms[0], forms[1]);
    cr_assert_gt(forms[0], 100, "Rice-coded positions exercised");
    cr_assert_gt(forms[1], 100, "bitmaps exercised");
}

/* The one large case the formula must hold for too, and the two forms at
 * FRACTION = 0.5 (bitmap: the gaps are unary and reach the last byte) and
 * 0.01 (Rice). */
Test(compress_sketch, size_forms_at_large_n)
{
    const size_t n = 1000000;
    float *x = malloc(n * sizeof *x);
    uint32_t *idx = malloc(n * sizeof *idx);
    fill(x, n, PAT_GAUSS, 5);
    const char *specs[] = {"sketch:0.5", "sketch:0.01", "sketch:0.01:1"};
    const double f[] = {0.5, 0.01, 0.01}, c[] = {0.5, 0.5, 1.0};
    const int bitmap[] = {1, 0, 0};
    for (int s = 0; s < 3; s++) {
        enc e;
        enc_spec(&e, specs[s], n);
        size_t k = doc_k(f[s], n), w = doc_w(c[s], k);
        doc_topk(x, n, k, idx);
        uint64_t r;
        best_rice(idx, k, &r);
        cr_assert_gt(enc_run(&e, x, n, 3), 0);
        cr_assert_eq((size_t)e.len, doc_size(n, k, w, r), "%s", specs[s]);
        cr_assert_eq(form_of(e.buf, n) == BITMAP, bitmap[s], "%s: form", specs[s]);
        enc_free(&e);
    }
    free(x);
    free(idx);
}

/* The codec's own encode with every cap below the message: -ENOSPC, and
 * nothing written past the cap (ASan); exactly enough room gives the same bytes. */
Test(compress_sketch, encode_short_buffer)
{
    const size_t n = 2000;
    float *x = malloc(n * sizeof *x);
    fill(x, n, PAT_GAUSS, 12);
    const char *specs[] = {"sketch:0.01", "sketch:0.6", "sketch:0.02:1"};
    for (int c = 0; c < 3; c++) {
        enc e;
        enc_spec(&e, specs[c], n);
        const cmp_ops *ops = e.s.ops;
        long len = ops->encode(&e.s, x, n, 1, e.work, e.buf, ops->bound(&e.s, n));
        cr_assert_gt(len, 0);
        for (size_t cap = 0; cap < (size_t)len; cap++) {
            uint8_t *out = malloc(cap ? cap : 1);
            cr_assert_eq(ops->encode(&e.s, x, n, 1, e.work, out, cap), -ENOSPC, "%s cap %zu of %ld", specs[c], cap, len);
            free(out);
        }
        uint8_t *out = malloc((size_t)len);
        cr_assert_eq(ops->encode(&e.s, x, n, 1, e.work, out, (size_t)len), len);
        cr_assert_arr_eq(out, e.buf, (size_t)len);
        free(out);
        enc_free(&e);
    }
    free(x);
}

/* ---- 2. contents ------------------------------------------------------------------ */

/* Random vectors: the codec's bytes are the reference encoder's, and its
 * decode is the reference decoder's, bit for bit. With COLUMNS = 1 the
 * positions alone in their bucket decode to x rounded to bf16, exactly. */
Test(compress_sketch, bytes_and_values_match_references)
{
    const size_t ns[] = {0, 1, 7, 100, 4096, 65536};
    const char *specs[] = {"sketch:0.01", "sketch:0.1:1", "sketch:0.05:0.2", "sketch:0.5", "sketch:1:1", "sketch:0.003"};
    const double f[] = {0.01, 0.1, 0.05, 0.5, 1, 0.003}, c[] = {0.5, 1, 0.2, 0.5, 1, 0.5};
    size_t exact = 0;
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++) {
        size_t n = ns[a];
        float *x = malloc((n + 1) * sizeof *x), *got = malloc((n + 1) * sizeof *got),
              *want = malloc((n + 1) * sizeof *want);
        for (int pat = 0; pat < PAT_COUNT; pat++)
            for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
                fill(x, n, pat, 1000 * a + 10 * (uint64_t)pat + s);
                enc e;
                enc_spec(&e, specs[s], n);
                uint64_t seed = cmp_rng_at(42, 100 * a + s);
                cr_assert_gt(enc_run(&e, x, n, seed), 0);
                uint8_t *ref = malloc(e.cap);
                size_t rlen = ref_encode(x, n, f[s], c[s], seed, ref);
                cr_assert_eq((size_t)e.len, rlen, "%s n=%zu %s: length", specs[s], n, pat_name[pat]);
                cr_assert_arr_eq(e.buf, ref, rlen, "%s n=%zu %s: bytes", specs[s], n, pat_name[pat]);
                free(ref);

                size_t collisions;
                ref_decode(e.buf, (size_t)e.len, n, want, &collisions);
                cr_assert_eq(cmp_decode(e.buf, (size_t)e.len, n, got), 0);
                cr_assert_arr_eq(got, want, n * sizeof *got, "%s n=%zu %s: decoded values", specs[s], n,
                                 pat_name[pat]);
                if (c[s] == 1) {
                    size_t k = doc_k(f[s], n), alone = 0;
                    uint32_t *idx = malloc((k + 1) * sizeof *idx), *members = calloc(k + 1, sizeof *members);
                    doc_topk(x, n, k, idx);
                    for (size_t j = 0; j < k; j++)
                        members[doc_bucket(seed, idx[j], k)]++;
                    for (size_t j = 0; j < k; j++) {
                        uint32_t i = idx[j];
                        if (members[doc_bucket(seed, i, k)] > 1)
                            continue;
                        alone++;
                        cr_assert_eq(f2u(got[i]), f2u(0.0f + u2f((uint32_t)doc_bf16(x[i]) << 16)),
                                     "%s: x[%u] = %g alone in its bucket decodes to %g", specs[s], i, x[i], got[i]);
                    }
                    cr_assert_eq(alone, k - collisions);
                    exact += alone;
                    free(idx);
                    free(members);
                }
                enc_free(&e);
            }
        free(x);
        free(got);
        free(want);
    }
    cr_assert_gt(exact, 1000);
}

/* The same x and seed give the same bytes; another seed another hash. */
Test(compress_sketch, seed_determinism)
{
    const size_t n = 4096;
    float *x = malloc(n * sizeof *x);
    fill(x, n, PAT_GAUSS, 5);
    enc a, b;
    enc_spec(&a, "sketch:0.05", n);
    enc_spec(&b, "sketch:0.05", n);
    cr_assert_gt(enc_run(&a, x, n, 99), 0);
    cr_assert_gt(enc_run(&b, x, n, 99), 0);
    cr_assert_eq(a.len, b.len);
    cr_assert_arr_eq(a.buf, b.buf, (size_t)a.len);
    cr_assert_gt(enc_run(&b, x, n, 100), 0);
    const size_t k = doc_k(0.05, n), w = doc_w(0.5, k), buckets = 1 + vlen(n) + vlen(k) + vlen(w) + 1 + 8;
    cr_assert_neq(memcmp(a.buf + buckets, b.buf + buckets, 2 * w), 0, "another seed, other buckets");
    enc_free(&a);
    enc_free(&b);
    free(x);
}

/* ---- 3. unbiasedness ------------------------------------------------------------- */

/* Over S seeds the mean decoded value of each selected position converges
 * to x_i. x holds small integers and no bucket takes more than a handful of
 * them, so every f32 sum and bf16 bucket is exact and the only randomness is
 * the hash: z_i = (mean_i - x_i) / (sd_i / sqrt S) with sd_i the empirical
 * standard deviation. Every |z_i| < 5 and sum z_i^2 (about chi-square with k
 * degrees of freedom) below k + 5 sqrt(2k); the empirical variance is the
 * documented sum_{j != i} x_j^2 / W within 10% on average. Control: the same
 * statistics must flag a 5% bias. */
Test(compress_sketch, unbiased_over_seeds)
{
    const size_t n = 1000, S = 2000;
    float x[1000], dst[1000];
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(1 + (int)(cmp_rng_at(3, i) % 16)) * ((i & 1) ? -1.0f : 1.0f);
    enc e;
    enc_spec(&e, "sketch:0.1", n);
    const size_t k = doc_k(0.1, n), w = doc_w(0.5, k);
    cr_assert_eq(k, 100);
    cr_assert_eq(w, 50);
    uint32_t idx[100];
    doc_topk(x, n, k, idx);
    double sum[100] = {0}, sq[100] = {0};
    for (size_t s = 0; s < S; s++) {
        cr_assert_gt(enc_run(&e, x, n, 0x5eed0000 + s * 7919), 0);
        cr_assert_eq(cmp_decode(e.buf, (size_t)e.len, n, dst), 0);
        for (size_t j = 0; j < k; j++) {
            double v = dst[idx[j]];
            cr_assert_eq(v, rint(v), "bucket sums are exact integers");
            sum[j] += v;
            sq[j] += v * v;
        }
    }
    enc_free(&e);
    double total_sq = 0;
    for (size_t j = 0; j < k; j++)
        total_sq += (double)x[idx[j]] * x[idx[j]];
    double chi = 0, chi_biased = 0, zmax = 0, var_ratio = 0;
    for (size_t j = 0; j < k; j++) {
        double xi = x[idx[j]], mean = sum[j] / (double)S;
        double var = (sq[j] - (double)S * mean * mean) / (double)(S - 1);
        double se = sqrt(var / (double)S);
        cr_assert_gt(se, 0, "position %u never collided", idx[j]);
        double z = (mean - xi) / se, zb = (1.05 * mean - xi) / se;
        chi += z * z;
        chi_biased += zb * zb;
        zmax = fmax(zmax, fabs(z));
        var_ratio += var / ((total_sq - xi * xi) / (double)w) / (double)k;
    }
    double limit = (double)k + 5 * sqrt(2.0 * (double)k);
    cr_log_info("sketch unbiased: max |z| %.2f, chi-square %.1f (limit %.1f), 5%% bias %.1f, variance ratio %.3f", zmax,
                chi, limit, chi_biased, var_ratio);
    cr_assert_lt(zmax, 5, "max |z| %g", zmax);
    cr_assert_lt(chi, limit, "chi-square %g >= %g", chi, limit);
    cr_assert_gt(chi_biased, limit, "the test cannot see a 5%% bias (%g)", chi_biased);
    cr_assert(var_ratio > 0.9 && var_ratio < 1.1, "variance %.3f of sum_{j != i} x_j^2 / W", var_ratio);
}

/* ---- 4. sparse views ---------------------------------------------------------------- */

/* decode_sparse is the dense decode; encoded_sparse (the sender's view, from
 * the work area) is decode_sparse bit for bit; the sparse bound is k. */
Test(compress_sketch, sparse_views_agree)
{
    const size_t ns[] = {0, 1, 7, 4096};
    const char *specs[] = {"sketch:0.001", "sketch:0.04", "sketch:0.04:1", "sketch:0.5", "sketch:1:0.01"};
    for (size_t a = 0; a < 4; a++) {
        size_t n = ns[a];
        float *x = malloc((n + 1) * sizeof *x), *dst = malloc((n + 1) * sizeof *dst),
              *zero = calloc(n + 1, sizeof *zero), *va = malloc((n + 1) * sizeof *va), *vb = malloc((n + 1) * sizeof *vb);
        uint32_t *ia = malloc((n + 1) * sizeof *ia), *ib = malloc((n + 1) * sizeof *ib);
        for (int pat = 0; pat < PAT_COUNT; pat++)
            for (size_t c = 0; c < sizeof specs / sizeof *specs; c++) {
                fill(x, n, pat, 50 + (uint64_t)pat);
                enc e;
                enc_spec(&e, specs[c], n);
                cr_assert_gt(enc_run(&e, x, n, 7 + c), 0);
                cr_assert_eq(decode_checked(e.buf, (size_t)e.len, n, dst, zero), 0, "%s %s", specs[c], pat_name[pat]);
                size_t k = cmp_select_k(e.s.fraction, n);
                cr_assert_eq(cmp_sparse_bound(&e.s, n), k);
                long ka = cmp_encoded_sparse(&e.s, x, n, e.work, ia, va, n);
                long kb = cmp_decode_sparse(e.buf, (size_t)e.len, n, ib, vb, n);
                cr_assert_eq(ka, (long)k, "%s %s", specs[c], pat_name[pat]);
                cr_assert_eq(kb, (long)k);
                cr_assert_arr_eq(ia, ib, k * sizeof *ia, "%s %s: positions", specs[c], pat_name[pat]);
                cr_assert_arr_eq(va, vb, k * sizeof *va, "%s %s: values", specs[c], pat_name[pat]);
                if (k > 0)
                    cr_assert_eq(cmp_encoded_sparse(&e.s, x, n, e.work, ia, va, k - 1), -ENOSPC);
                enc_free(&e);
            }
        free(x), free(dst), free(zero), free(va), free(vb), free(ia), free(ib);
    }
}

/* ---- 5. hostile input ----------------------------------------------------------------- */

/* Every strict prefix and a trailing byte are rejected; every single-bit
 * flip after the codec id is rejected or decodes in bounds, the sparse
 * decoder agreeing; both position forms. */
Test(compress_sketch, truncations_and_bit_flips)
{
    const struct {
        const char *spec;
        size_t n;
    } cases[] = {{"sketch:0.01", 4096}, {"sketch:0.2", 4096}, {"sketch:0.6", 500}, {"sketch:1:1", 37},
                 {"sketch:0.3", 7},     {"sketch:0.5", 1},    {"sketch:0.5", 0}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t n = cases[c].n;
        float *x = malloc((n + 1) * sizeof *x), *dst = malloc((n + 1) * sizeof *dst),
              *sent = malloc((n + 1) * sizeof *sent);
        fill(x, n, PAT_GAUSS, 31 + c);
        fill(sent, n, PAT_TIES, 32);
        enc e;
        enc_spec(&e, cases[c].spec, n);
        cr_assert_gt(enc_run(&e, x, n, 4), 0);
        size_t len = (size_t)e.len;
        cr_assert_eq(decode_checked(e.buf, len, n, dst, sent), 0);
        for (size_t l = 0; l < len; l++) {
            uint8_t *cut = malloc(l ? l : 1); /* exactly l bytes, so ASan sees any overread */
            memcpy(cut, e.buf, l);
            cr_assert_eq(decode_checked(cut, l, n, dst, sent), -EBADMSG, "%s n=%zu cut to %zu of %zu", cases[c].spec, n,
                         l, len);
            free(cut);
        }
        uint8_t *m = malloc(len + 1);
        memcpy(m, e.buf, len);
        m[len] = 0;
        cr_assert_eq(decode_checked(m, len + 1, n, dst, sent), -EBADMSG, "%s: trailing byte", cases[c].spec);
        size_t ok = 0, bad = 0;
        for (size_t bit = 8; bit < len * 8; bit++) {
            memcpy(m, e.buf, len);
            m[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            if (decode_checked(m, len, n, dst, sent) == 0)
                ok++;
            else
                bad++;
        }
        cr_log_info("sketch %s n=%zu: %zu of %zu flips rejected", cases[c].spec, n, bad, ok + bad);
        cr_assert_gt(bad, 0);
        free(m);
        enc_free(&e);
        free(x), free(dst), free(sent);
    }
}

/* A message built field by field. */
typedef struct craft {
    uint64_t n, k, w;
    int b;
    uint64_t seed;
    uint16_t bucket[8];
    uint8_t pos[16];
    size_t plen;
} craft;

static size_t build(uint8_t *out, const craft *c)
{
    size_t p = 0;
    out[p++] = ID_SKETCH;
    p += cmp_varint_put(out + p, c->n);
    p += cmp_varint_put(out + p, c->k);
    p += cmp_varint_put(out + p, c->w);
    out[p++] = (uint8_t)c->b;
    cmp_u64_put(out + p, c->seed);
    p += 8;
    for (size_t j = 0; j < c->w; j++, p += 2)
        out[p] = (uint8_t)c->bucket[j], out[p + 1] = (uint8_t)(c->bucket[j] >> 8);
    memcpy(out + p, c->pos, c->plen);
    return p + c->plen;
}

/* Each rule a decoder enforces, on hand-made messages around one valid
 * message per position form. */
Test(compress_sketch, decoder_rules)
{
    uint8_t m[128];
    float dst[16], sent[16];
    for (int i = 0; i < 16; i++)
        sent[i] = (float)i;
    /* n = 10, positions 1, 2, 6 in two buckets (1.5 and -3): as a bitmap
     * (bits 1, 2, 6 of byte 0, byte 1 empty) and as Rice(1) gaps 1, 0, 3,
     * in stream order 0 1 | 0 0 | 1 0 1, then one padding bit: 0x52 */
    const craft bitmap = {.n = 10, .k = 3, .w = 2, .b = BITMAP, .seed = 9, .bucket = {0x3fc0, 0xc040}, .pos = {0x46, 0},
                          .plen = 2};
    craft rice = bitmap;
    rice.b = 1, rice.pos[0] = 0x52, rice.plen = 1;
    const craft *good[] = {&bitmap, &rice};
    for (int g = 0; g < 2; g++) {
        craft c = *good[g];
        size_t l = build(m, &c);
        cr_assert_eq(decode_checked(m, l, 10, dst, sent), 0, "form %d", c.b);
        const uint32_t pos[] = {1, 2, 6};
        for (int j = 0; j < 3; j++) {
            uint32_t i = pos[j];
            float b = u2f((uint32_t)c.bucket[doc_bucket(c.seed, i, c.w)] << 16);
            cr_assert_eq(dst[i], sent[i] + 0.5f * (doc_negative(c.seed, i) ? -b : b), "form %d position %u", c.b, i);
        }
        cr_assert_eq(dst[0], 0);
        cr_assert_eq(dst[9], 9);

        c = *good[g], c.n = 2; /* k > n */
        l = build(m, &c);
        cr_assert_eq(decode_checked(m, l, 2, dst, sent), -EBADMSG);
        const uint64_t bad_w[] = {0, 4};
        for (int v = 0; v < 2; v++) { /* W = 0 with k = 3; W > k */
            c = *good[g], c.w = bad_w[v];
            l = build(m, &c);
            cr_assert_eq(decode_checked(m, l, 10, dst, sent), -EBADMSG, "W = %llu", (unsigned long long)bad_w[v]);
        }
        c = *good[g], c.w = 3; /* W = k is fine */
        c.bucket[2] = 0x4000;
        l = build(m, &c);
        cr_assert_eq(decode_checked(m, l, 10, dst, sent), 0);
        const int bad_b[] = {32, 100, 254};
        for (int v = 0; v < 3; v++) {
            c = *good[g], c.b = bad_b[v];
            l = build(m, &c);
            cr_assert_eq(decode_checked(m, l, 10, dst, sent), -EBADMSG, "b = %d", bad_b[v]);
        }
        const uint16_t bad_bucket[] = {0x7f80, 0xff80, 0x7fc0, 0x7f81};
        for (int v = 0; v < 4; v++) { /* inf, -inf, NaN */
            c = *good[g], c.bucket[1] = bad_bucket[v];
            l = build(m, &c);
            cr_assert_eq(decode_checked(m, l, 10, dst, sent), -EBADMSG, "bucket 0x%04x", bad_bucket[v]);
        }
        c = *good[g], c.bucket[1] = 0x7f7f; /* the largest finite bf16 */
        l = build(m, &c);
        cr_assert_eq(decode_checked(m, l, 10, dst, sent), 0);
        c = *good[g], c.k = 0, c.w = 0, c.plen = g == 0 ? 2 : 0; /* nothing sent */
        memset(c.pos, 0, sizeof c.pos);
        l = build(m, &c);
        cr_assert_eq(decode_checked(m, l, 10, dst, sent), 0);
        cr_assert_arr_eq(dst, sent, 10 * sizeof *dst);
        c.w = 1; /* W != 0 with k = 0 */
        l = build(m, &c);
        cr_assert_eq(decode_checked(m, l, 10, dst, sent), -EBADMSG);
    }
    craft c = bitmap;
    c.pos[0] = 0x06; /* two bits for k = 3 */
    size_t l = build(m, &c);
    cr_assert_eq(decode_checked(m, l, 10, dst, sent), -EBADMSG, "bitmap with k - 1 bits");
    c.pos[0] = 0x4e; /* four */
    l = build(m, &c);
    cr_assert_eq(decode_checked(m, l, 10, dst, sent), -EBADMSG, "bitmap with k + 1 bits");
    c = bitmap, c.pos[0] = 0x06, c.pos[1] = 0x02; /* position 9: the last of n = 10 */
    l = build(m, &c);
    cr_assert_eq(decode_checked(m, l, 10, dst, sent), 0, "position 9 of 10");
    c.pos[1] = 0x04; /* position 10: a padding bit */
    l = build(m, &c);
    cr_assert_eq(decode_checked(m, l, 10, dst, sent), -EBADMSG, "padding bit set");
    c = bitmap, c.plen = 1; /* the bitmap a byte short: bits 1, 2, 6 all there */
    l = build(m, &c);
    cr_assert_eq(decode_checked(m, l, 10, dst, sent), -EBADMSG, "bitmap of 8 bits for n = 10");
    c = bitmap, c.plen = 3;
    l = build(m, &c);
    cr_assert_eq(decode_checked(m, l, 10, dst, sent), -EBADMSG, "bitmap with a byte more");
    c = rice, c.pos[0] = 0x52 | 0x80;
    l = build(m, &c);
    cr_assert_eq(decode_checked(m, l, 10, dst, sent), -EBADMSG, "nonzero Rice padding");
    /* Rice(0) gaps 1, 1, 5 (positions 1, 3, 9): 1 0 | 1 0 | 1 1 1 1 1 0, LSB first 0xf5 0x01;
     * gaps 1, 0, 7 (positions 1, 2, 10 = n): 1 0 | 0 | 1 1 1 1 1 1 1 0, 0xf9 0x03 */
    c = rice, c.b = 0, c.plen = 2, c.pos[0] = 0xf5, c.pos[1] = 0x01;
    l = build(m, &c);
    cr_assert_eq(decode_checked(m, l, 10, dst, sent), 0, "gaps 1, 1, 5");
    c.pos[0] = 0xf9, c.pos[1] = 0x03;
    l = build(m, &c);
    cr_assert_eq(decode_checked(m, l, 10, dst, sent), -EBADMSG, "a gap past n");
}

/* Random payloads behind a valid header and plausible k, W and form. */
Test(compress_sketch, random_garbage)
{
    const size_t n = 100;
    float dst[100], sent[100];
    for (size_t i = 0; i < n; i++)
        sent[i] = (float)i;
    uint8_t m[160];
    size_t ok = 0;
    for (uint64_t t = 0; t < 60000; t++) {
        uint64_t r = cmp_rng_at(0xf00d, t);
        size_t len = 2 + (size_t)(r % 150);
        m[0] = ID_SKETCH;
        m[1] = (uint8_t)n;
        for (size_t i = 2; i < len; i++)
            m[i] = (uint8_t)cmp_rng_at(t, i);
        if (t & 8) {
            m[2] = (uint8_t)(1 + (r >> 32) % 12);
            m[3] = (uint8_t)(1 + (r >> 40) % m[2]);
            m[4] = t & 16 ? BITMAP : (uint8_t)((r >> 48) % 6);
        }
        ok += decode_checked(m, len, n, dst, sent) == 0;
    }
    cr_log_info("sketch random_garbage: %zu of 60000 decoded", ok);
}

/* NaN or inf in x cannot be sent (they are always in the top k); a bucket
 * that overflows f32, or rounds to inf in bf16, is -ERANGE. */
Test(compress_sketch, nonfinite_input_and_overflow)
{
    const size_t n = 1000;
    float *x = malloc(n * sizeof *x);
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int v = 0; v < 3; v++) {
        fill(x, n, PAT_GAUSS, 3);
        x[500] = bad[v];
        enc e;
        enc_spec(&e, "sketch:0.01", n);
        cr_assert_eq(enc_run(&e, x, n, 1), -EINVAL, "%g", bad[v]);
        enc_free(&e);
    }
    free(x);
    float one = FLT_MAX; /* rounds up to inf in bf16 */
    enc e;
    enc_spec(&e, "sketch:1", 1);
    cr_assert_eq(enc_run(&e, &one, 1, 1), -ERANGE);
    one = 0x1.fep127f; /* the largest bf16 */
    cr_assert_gt(enc_run(&e, &one, 1, 1), 0);
    enc_free(&e);
    /* two of them in one bucket (W = 1) with equal signs: the f32 sum overflows */
    float two[2] = {0x1.fep127f, 0x1.fep127f};
    enc_spec(&e, "sketch:1:0.5", 2);
    uint64_t seed = 0;
    while (doc_negative(seed, 0) != doc_negative(seed, 1))
        seed++;
    cr_assert_eq(enc_run(&e, two, 2, seed), -ERANGE);
    while (doc_negative(seed, 0) == doc_negative(seed, 1))
        seed++;
    cr_assert_gt(enc_run(&e, two, 2, seed), 0, "opposite signs cancel");
    enc_free(&e);
}

/* ---- 6. specs ------------------------------------------------------------------------ */

/* Parses text, expects -EINVAL and one line that starts "sketch: " and contains each of want. */
static void expect_bad_spec(const char *text, const char *want1, const char *want2)
{
    cmp_spec s;
    char err[256] = "";
    cr_assert_eq(cmp_spec_parse(&s, text, err, sizeof err), -EINVAL, "'%s' accepted", text);
    cr_assert_null(strchr(err, '\n'), "'%s': one line", text);
    cr_assert(strncmp(err, "sketch: ", 8) == 0, "'%s': message names the codec: %s", text, err);
    cr_assert(strstr(err, want1) && strstr(err, want2), "'%s': '%s' lacks '%s' or '%s'", text, err, want1, want2);
}

Test(compress_sketch, bad_specs)
{
    expect_bad_spec("sketch", "missing FRACTION", "usage: sketch:FRACTION[:COLUMNS]");
    const char *fraction[] = {"", "0", "1.5", "nan", "-0.1", "x", "0.1x"};
    for (size_t i = 0; i < sizeof fraction / sizeof *fraction; i++) {
        char text[48];
        snprintf(text, sizeof text, "sketch:%s", fraction[i]);
        expect_bad_spec(text, "FRACTION", fraction[i]);
    }
    const char *columns[] = {"0", "2", "", "x", "inf", " 1", "-1", "0.5x"};
    for (size_t i = 0; i < sizeof columns / sizeof *columns; i++) {
        char text[48], quoted[16];
        snprintf(text, sizeof text, "sketch:0.1:%s", columns[i]);
        snprintf(quoted, sizeof quoted, "'%s'", columns[i]);
        expect_bad_spec(text, "COLUMNS (buckets per entry sent) must be a number in (0, 1]", quoted);
    }
    expect_bad_spec("sketch:0.1:0.5:x", "unexpected option after COLUMNS in 'sketch:0.1:0.5:x'",
                    "usage: sketch:FRACTION[:COLUMNS]");
    cmp_spec s;
    char err[256];
    struct {
        const char *text;
        double f, c;
    } good[] = {{"sketch:0.01", 0.01, 0.5}, {"sketch:1:1", 1, 1}, {"sketch:.25:0.125", 0.25, 0.125},
                {"sketch:1e-3:1e-9", 0.001, 1e-9}};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        cr_assert_eq(cmp_spec_parse(&s, good[i].text, err, sizeof err), 0, "%s: %s", good[i].text, err);
        cr_assert_eq(s.fraction, good[i].f);
        cr_assert_eq(s.columns, good[i].c);
        cr_assert_str_eq(s.text, good[i].text);
        cr_assert_eq(s.ops->id, ID_SKETCH);
    }
    /* W = max(1, ceil(COLUMNS k)): the tiniest COLUMNS still sends one bucket */
    cr_assert_eq(cmp_spec_parse(&s, "sketch:0.5:1e-9", err, sizeof err), 0);
    cr_assert_eq(cmp_bound(&s, 100), doc_bound(100, 50, 1));
}
