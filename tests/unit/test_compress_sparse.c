/* The sparse codecs (topk, randk, stc) and the selection they share:
 * message sizes equal the formulas of compress/FORMAT.md and never exceed
 * cmp_bound; topk and stc send exactly the k largest magnitudes (against a
 * qsort reference, ties included, exact and sampled); randk is unbiased; every
 * truncation and many corruptions are rejected without touching dst; bad
 * specs fail with one line. Messages are parsed here independently of the
 * codecs, from the format description, with the bit reader. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/bitio.h"
#include "compress/cmp.h"
#include "compress/cmp_rng.h"
#include "compress/cmp_select.h"
#include "tests/compress_check.h"

TestSuite(compress_sparse, .timeout = 600);

enum { ID_TOPK = 3, ID_RANDK = 4, ID_STC = 9 };

static const size_t sizes_n[] = {0, 1, 7, 4096, 1000000};
static const double fractions[] = {0.0001, 0.001, 0.01, 0.1, 0.5, 1.0};

/* ---- data ----------------------------------------------------------------- */

enum { PAT_GAUSS, PAT_TIES, PAT_RISING, PAT_SPREAD, PAT_EQUAL, PAT_NARROW, PAT_SPARSE, PAT_COUNT };
static const char *pat_name[] = {"gauss", "ties", "rising", "spread", "equal", "narrow", "sparse"};

static float gauss(uint64_t seed, uint64_t i)
{
    float u1 = cmp_rng_uniform(seed, 2 * i) + 0x1p-25f, u2 = cmp_rng_uniform(seed, 2 * i + 1);
    return sqrtf(-2 * logf(u1)) * cosf(6.28318531f * u2);
}

/* Patterns that stress the selection (many ties, one narrow exponent range,
 * all equal) and the gap coding (the top k all at the end, evenly spread). */
static void fill(float *x, size_t n, int pat, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = cmp_rng_at(seed, i);
        float sign = (r >> 63) ? -1.0f : 1.0f;
        switch (pat) {
        case PAT_GAUSS: x[i] = gauss(seed, i) * (i < n / 3 ? 1e-3f : 1.0f); break;
        case PAT_TIES: x[i] = (float)((int)(r % 7) - 3); break;
        case PAT_RISING: x[i] = sign * (float)(i + 1); break;
        case PAT_SPREAD: x[i] = i % 97 == 0 ? sign * 5.0f : sign * cmp_rng_uniform(seed + 1, i); break;
        case PAT_EQUAL: x[i] = sign * 0.25f; break;
        case PAT_NARROW: x[i] = sign * (1.0f + cmp_rng_uniform(seed + 1, i) / 16); break;
        case PAT_SPARSE: x[i] = r % 100 == 0 ? gauss(seed, i) : 0.0f; break;
        }
    }
}

/* ---- reference selection ---------------------------------------------------- */

static uint32_t *ref_order(const float *x, size_t n)
{
    uint32_t *o = malloc((n + 1) * sizeof *o);
    for (size_t i = 0; i < n; i++)
        o[i] = (uint32_t)i;
    g_x = x;
    qsort(o, n, sizeof *o, by_mag);
    return o;
}

/* The k largest, ascending. */
static void ref_topk(const uint32_t *order, size_t k, uint32_t *out)
{
    memcpy(out, order, k * sizeof *out);
    qsort(out, k, sizeof *out, by_index);
}

/* ---- an independent reader of the documented format ------------------------ */

typedef struct msg {
    int id;
    uint64_t n, k, seed;
    int b;
    float mu;
    uint32_t *idx; /* topk, stc */
    float *val;    /* topk, randk */
    uint8_t *neg;  /* stc */
    uint64_t rice_bits; /* sum of the Rice code lengths of the gaps */
} msg;

static size_t vlen(uint64_t v)
{
    size_t l = 1;
    while (v >= 0x80)
        v >>= 7, l++;
    return l;
}

static void msg_free(msg *m)
{
    free(m->idx);
    free(m->val);
    free(m->neg);
    memset(m, 0, sizeof *m);
}

/* Asserts that the message is well formed, field by field. */
static void msg_parse(const uint8_t *in, size_t len, msg *m)
{
    memset(m, 0, sizeof *m);
    size_t used, p = 1;
    cr_assert(len >= 2);
    m->id = in[0];
    cr_assert_eq(cmp_varint_get(in + p, len - p, &used, &m->n), 0);
    p += used;
    cr_assert_eq(cmp_varint_get(in + p, len - p, &used, &m->k), 0);
    p += used;
    cr_assert_leq(m->k, m->n);
    size_t k = m->k;
    m->idx = calloc(k + 1, sizeof *m->idx);
    m->val = calloc(k + 1, sizeof *m->val);
    m->neg = calloc(k + 1, 1);
    if (m->id == ID_RANDK) {
        cr_assert_eq(len, p + 8 + 4 * k);
        m->seed = cmp_u64_get(in + p);
        for (size_t j = 0; j < k; j++)
            m->val[j] = cmp_f32_get(in + p + 8 + 4 * j);
        return;
    }
    cr_assert(m->id == ID_TOPK || m->id == ID_STC);
    m->b = in[p++];
    cr_assert_leq(m->b, 31);
    if (m->id == ID_TOPK) {
        for (size_t j = 0; j < k; j++)
            m->val[j] = cmp_f32_get(in + p + 4 * j);
        p += 4 * k;
    } else {
        m->mu = cmp_f32_get(in + p);
        p += 4;
    }
    cmp_bitr r;
    cmp_bitr_init(&r, in + p, len - p);
    uint64_t next = 0, g, s, bits = 0;
    for (size_t j = 0; j < k; j++) {
        cr_assert_eq(cmp_bitr_rice(&r, m->b, &g), 0);
        bits += 1 + (uint64_t)m->b + (g >> m->b);
        next += g;
        cr_assert_lt(next, m->n);
        m->idx[j] = (uint32_t)next++;
        if (m->id == ID_STC) {
            cr_assert_eq(cmp_bitr_bits(&r, 1, &s), 0);
            m->neg[j] = (uint8_t)s;
        }
    }
    m->rice_bits = bits;
    uint64_t all = bits + (m->id == ID_STC ? k : 0);
    cr_assert_eq(len - p, (all + 7) / 8, "bit stream %zu bytes for %llu bits", len - p, (unsigned long long)all);
}

/* The smallest b minimising sum (1 + b + (g >> b)), by brute force over all 32. */
static int best_rice(const uint32_t *idx, size_t k, uint64_t *bits)
{
    int best = 0;
    *bits = UINT64_MAX;
    for (int b = 0; b < 32; b++) {
        uint64_t s = 0, next = 0;
        for (size_t j = 0; j < k; j++) {
            s += 1 + (uint64_t)b + ((idx[j] - next) >> b);
            next = idx[j] + 1;
        }
        if (s < *bits)
            *bits = s, best = b;
    }
    if (k == 0)
        *bits = 0;
    return best;
}

/* The message sizes of compress/FORMAT.md. */
static size_t size_topk(size_t n, size_t k, uint64_t rice_bits)
{
    return 1 + vlen(n) + vlen(k) + 1 + 4 * k + (rice_bits + 7) / 8;
}
static size_t size_stc(size_t n, size_t k, uint64_t rice_bits)
{
    return 1 + vlen(n) + vlen(k) + 1 + 4 + (rice_bits + k + 7) / 8;
}
static size_t size_randk(size_t n, size_t k) { return 1 + vlen(n) + vlen(k) + 8 + 4 * k; }

/* ---- helpers ------------------------------------------------------------------ */

__extension__ typedef unsigned __int128 u128;
static uint64_t mulhi(uint64_t a, uint64_t b) { return (uint64_t)(((u128)a * b) >> 64); }

static size_t first_diff_u32(const uint32_t *a, const uint32_t *b, size_t k)
{
    size_t j = 0;
    while (j < k && a[j] == b[j])
        j++;
    return j;
}


static void spec_name(char *out, size_t cap, const char *codec, double f, int sampled)
{
    snprintf(out, cap, "%s:%.17g%s", codec, f, sampled ? ":sampled" : "");
}

/* ---- the selection API ---------------------------------------------------------- */

Test(compress_sparse, k_rounding)
{
    cr_assert_eq(cmp_select_k(0.5, 0), 0);
    cr_assert_eq(cmp_select_k(1e-9, 1), 1);
    cr_assert_eq(cmp_select_k(0.001, 7), 1);  /* max(1, ...) */
    cr_assert_eq(cmp_select_k(0.25, 6), 2);   /* 1.5 rounds up */
    cr_assert_eq(cmp_select_k(0.5, 3), 2);    /* 1.5 */
    cr_assert_eq(cmp_select_k(0.3, 5), 2);    /* 1.5 (as a double, just under or over: either way 2) */
    cr_assert_eq(cmp_select_k(0.2, 7), 1);    /* 1.4 */
    cr_assert_eq(cmp_select_k(1.0, 7), 7);
    cr_assert_eq(cmp_select_k(0.001, 1000000), 1000);
    cr_assert_eq(cmp_select_k(0.0015, 1000), 2); /* 1.5 */
}

Test(compress_sparse, select_edges)
{
    float x[8] = {1, -5, 3, 0, -0.0f, 5, 2, -1};
    uint32_t idx[9];
    void *w = malloc(cmp_select_work(8));
    cr_assert_eq(cmp_select_topk(x, 8, 9, w, idx), -EINVAL);
    cr_assert_eq(cmp_select_topk_sampled(x, 8, 9, 1, w, idx), -EINVAL);
    cr_assert_eq(cmp_select_topk(x, 8, 0, w, idx), 0);
    cr_assert_eq(cmp_select_topk(x, 8, 8, w, idx), 0);
    for (uint32_t i = 0; i < 8; i++)
        cr_assert_eq(idx[i], i);
    /* |-5| == |5|: both; then 3 */
    cr_assert_eq(cmp_select_topk(x, 8, 3, w, idx), 0);
    cr_assert_eq(idx[0], 1);
    cr_assert_eq(idx[1], 2);
    cr_assert_eq(idx[2], 5);
    /* a tie at the threshold goes to the lower index: 1 at 0 and -1 at 7 */
    cr_assert_eq(cmp_select_topk(x, 8, 5, w, idx), 0);
    uint32_t want[] = {0, 1, 2, 5, 6};
    cr_assert_arr_eq(idx, want, sizeof want);
    /* +0 and -0 are one magnitude: k = 7 drops only index 4 (the later zero) */
    cr_assert_eq(cmp_select_topk(x, 8, 7, w, idx), 0);
    uint32_t want7[] = {0, 1, 2, 3, 5, 6, 7};
    cr_assert_arr_eq(idx, want7, sizeof want7);
    free(w);
}

/* Exactly the k largest, for both selections, on every pattern and many k,
 * sized so that the block, histogram, narrowing and sampled paths all run. */
Test(compress_sparse, select_exact_vs_qsort)
{
    const size_t ns[] = {1, 2, 7, 100, 4096, 70000, 300000};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++) {
        size_t n = ns[a];
        float *x = malloc(n * sizeof *x);
        uint32_t *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
        void *w = malloc(cmp_select_work(n));
        for (int pat = 0; pat < PAT_COUNT; pat++) {
            fill(x, n, pat, 100 + (uint64_t)pat);
            uint32_t *order = ref_order(x, n);
            const size_t ks[] = {1, 2, 3, n / 1000, n / 300, n / 64, n / 20, n / 2, n - 1, n};
            for (size_t c = 0; c < sizeof ks / sizeof *ks; c++) {
                size_t k = ks[c];
                if (k == 0 || k > n)
                    continue;
                ref_topk(order, k, want);
                for (int sampled = 0; sampled < 2; sampled++) {
                    memset(got, 0xff, n * sizeof *got);
                    int rc = sampled ? cmp_select_topk_sampled(x, n, k, 7 + k, w, got) : cmp_select_topk(x, n, k, w, got);
                    cr_assert_eq(rc, 0);
                    size_t j = first_diff_u32(got, want, k);
                    cr_assert_eq(j, k, "n=%zu k=%zu %s sampled=%d: idx[%zu] = %u, want %u", n, k, pat_name[pat],
                                 sampled, j, got[j], want[j]);
                    if (k < n)
                        cr_assert_eq(got[k], 0xffffffffu, "wrote past k");
                }
            }
            free(order);
        }
        free(x);
        free(want);
        free(got);
        free(w);
    }
}

/* Ties crafted at the threshold: a few larger values, then a long run of
 * equal magnitudes of which only some fit. */
Test(compress_sparse, select_ties_at_threshold)
{
    size_t n = 200000;
    float *x = calloc(n, sizeof *x);
    uint32_t *idx = malloc(n * sizeof *idx);
    void *w = malloc(cmp_select_work(n));
    for (size_t i = 0; i < n; i++)
        x[i] = (cmp_rng_at(9, i) & 1) ? 0.5f : -0.5f; /* all tied */
    size_t big[] = {5, 77, 1000, 150000, 199999};
    for (size_t j = 0; j < 5; j++)
        x[big[j]] = 2.0f + (float)j;
    for (int sampled = 0; sampled < 2; sampled++) {
        size_t k = 200;
        int rc = sampled ? cmp_select_topk_sampled(x, n, k, 3, w, idx) : cmp_select_topk(x, n, k, w, idx);
        cr_assert_eq(rc, 0);
        size_t nbig = 0, nties = 0;
        for (size_t j = 0; j < k; j++) {
            if (j)
                cr_assert_lt(idx[j - 1], idx[j]);
            if (fabsf(x[idx[j]]) > 1)
                nbig++;
            else
                nties++;
        }
        cr_assert_eq(nbig, 5, "every strictly larger value is in");
        cr_assert_eq(nties, k - 5);
        /* and the ties taken are the lowest indices */
        size_t t = 0;
        for (size_t i = 0; t < k - 5; i++)
            if (fabsf(x[i]) < 1) {
                int found = 0;
                for (size_t j = 0; j < k; j++)
                    found |= idx[j] == i;
                cr_assert(found, "tie at %zu skipped", i);
                t++;
            }
    }
    free(x);
    free(idx);
    free(w);
}

/* The sampled selection's own fallback: large values planted exactly at the
 * positions its sample (as documented in cmp_select.h) will look at, so the
 * estimate overshoots and the candidate pass finds fewer than k. */
Test(compress_sparse, select_sampled_overshoot)
{
    const size_t n = 1u << 20, k = 1000, ms = n / 128, s = n / ms;
    const uint64_t seed = 5;
    float *x = malloc(n * sizeof *x);
    uint32_t *got = malloc(k * sizeof *got), *want = malloc(k * sizeof *want);
    void *w = malloc(cmp_select_work(n));
    for (size_t i = 0; i < n; i++)
        x[i] = cmp_rng_uniform(8, i);
    float sample[8192];
    for (size_t j = 0; j < ms; j++) {
        size_t p = j * s + (size_t)mulhi(cmp_rng_at(seed, j), s);
        if (j < 100)
            x[p] = 100.0f + (float)j;
        sample[j] = x[p];
    }
    /* check the construction: the r-th largest sample value has fewer than k at or above it */
    double mu = (double)k * (double)ms / (double)n;
    size_t r = (size_t)ceil(mu + 4 * sqrt(mu) + 16);
    g_x = sample;
    uint32_t so[8192];
    for (size_t j = 0; j < ms; j++)
        so[j] = (uint32_t)j;
    qsort(so, ms, sizeof *so, by_mag);
    float est = sample[so[r - 1]];
    size_t above = 0;
    for (size_t i = 0; i < n; i++)
        above += x[i] >= est;
    cr_assert_lt(above, k, "not adversarial: %zu >= %zu values at or above the estimate %g", above, k, est);

    uint32_t *order = ref_order(x, n);
    ref_topk(order, k, want);
    cr_assert_eq(cmp_select_topk_sampled(x, n, k, seed, w, got), 0);
    size_t j = first_diff_u32(got, want, k);
    cr_assert_eq(j, k, "idx[%zu] = %u, want %u", j, got[j], want[j]);
    free(order);
    free(x);
    free(got);
    free(want);
    free(w);
}

Test(compress_sparse, rice_parameter_is_optimal)
{
    size_t n = 50000;
    uint32_t *idx = malloc(n * sizeof *idx);
    for (int trial = 0; trial < 200; trial++) {
        /* random subsets of random density, some clustered */
        double p = pow(10, -4 * cmp_rng_uniform(1, (uint64_t)trial));
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            double q = (trial % 3 == 0 && i > n / 2) ? p * 20 : p;
            if (cmp_rng_uniform(2 + (uint64_t)trial, i) < q)
                idx[k++] = (uint32_t)i;
        }
        uint64_t bits, want_bits;
        int b = cmp_select_rice(idx, k, n, &bits);
        int want = best_rice(idx, k, &want_bits);
        cr_assert_eq(b, want, "trial %d k=%zu: b=%d, brute force %d", trial, k, b, want);
        cr_assert_eq(bits, want_bits);
        cr_assert_leq(bits, cmp_select_rice_bits_max(n, k));
    }
    /* worst cases for the bound: everything at the end; evenly spread */
    for (size_t k = 1; k <= n; k = k * 3 + 1) {
        for (size_t j = 0; j < k; j++)
            idx[j] = (uint32_t)(n - k + j);
        uint64_t bits;
        cmp_select_rice(idx, k, n, &bits);
        cr_assert_leq(bits, cmp_select_rice_bits_max(n, k), "k=%zu", k);
        for (size_t j = 0; j < k; j++)
            idx[j] = (uint32_t)(j * (n / k));
        cmp_select_rice(idx, k, n, &bits);
        cr_assert_leq(bits, cmp_select_rice_bits_max(n, k), "k=%zu", k);
    }
    free(idx);
}

/* ---- sizes, bounds and round trips ---------------------------------------------- */

/* For every codec, n in {0, 1, 7, 4096, 1e6}, several fractions and data
 * patterns: the message parses as documented, its length is the formula,
 * it fits cmp_bound, and it decodes to what it should. */
Test(compress_sparse, sizes_bounds_and_contents)
{
    const char *codecs[] = {"topk", "stc", "randk"};
    const int pats[] = {PAT_GAUSS, PAT_TIES, PAT_RISING, PAT_SPREAD, PAT_EQUAL, PAT_SPARSE};
    int checked = 0;
    for (size_t a = 0; a < sizeof sizes_n / sizeof *sizes_n; a++) {
        size_t n = sizes_n[a];
        float *x = malloc((n + 1) * sizeof *x), *dst = malloc((n + 1) * sizeof *dst);
        uint32_t *want = malloc((n + 1) * sizeof *want);
        for (size_t p = 0; p < sizeof pats / sizeof *pats; p++) {
            if (n == 0 && p > 0)
                break;
            fill(x, n, pats[p], 11 + p);
            uint32_t *order = ref_order(x, n);
            for (size_t f = 0; f < sizeof fractions / sizeof *fractions; f++) {
                size_t k = cmp_select_k(fractions[f], n);
                ref_topk(order, k, want);
                for (size_t c = 0; c < 3; c++)
                    for (int sampled = 0; sampled < (c == 0 ? 2 : 1); sampled++) {
                        char spec[64];
                        spec_name(spec, sizeof spec, codecs[c], fractions[f], sampled);
                        enc e;
                        enc_spec(&e, spec, n);
                        long len = enc_run(&e, x, n, 1234 + f);
                        cr_assert_gt(len, 0, "%s n=%zu: %ld", spec, n, len);
                        cr_assert_leq((size_t)len, e.cap, "%s n=%zu %s: %ld > bound %zu", spec, n,
                                      pat_name[pats[p]], len, e.cap);
                        msg m;
                        msg_parse(e.buf, (size_t)len, &m);
                        cr_assert_eq(m.n, n);
                        cr_assert_eq(m.k, k, "%s n=%zu", spec, n);
                        memset(dst, 0, n * sizeof *dst);
                        cr_assert_eq(cmp_decode(e.buf, (size_t)len, n, dst), 0);
                        if (c == 2) {
                            cr_assert_eq(m.id, ID_RANDK);
                            cr_assert_eq((size_t)len, size_randk(n, k));
                            cr_assert_eq(m.seed, 1234 + f);
                        } else {
                            uint64_t best;
                            int b = best_rice(want, k, &best);
                            cr_assert_eq(m.b, b, "%s n=%zu: b=%d, optimum %d", spec, n, m.b, b);
                            cr_assert_eq(m.rice_bits, best);
                            size_t bad = first_diff_u32(m.idx, want, k);
                            cr_assert_eq(bad, k, "%s n=%zu %s: position %zu is %u, want %u", spec, n,
                                         pat_name[pats[p]], bad, m.idx[bad], want[bad]);
                            if (c == 0) {
                                cr_assert_eq(m.id, ID_TOPK);
                                cr_assert_eq((size_t)len, size_topk(n, k, best), "%s n=%zu", spec, n);
                                size_t j = 0, wrong = 0;
                                for (; j < k; j++)
                                    wrong += memcmp(&m.val[j], &x[want[j]], sizeof(float)) != 0;
                                cr_assert_eq(wrong, 0, "%s: %zu values differ", spec, wrong);
                                j = 0;
                                for (size_t i = 0; i < n; i++) {
                                    float v = j < k && want[j] == i ? x[want[j++]] : 0.0f;
                                    wrong += dst[i] != v;
                                }
                                cr_assert_eq(wrong, 0, "%s n=%zu: %zu decoded values wrong", spec, n, wrong);
                            } else {
                                cr_assert_eq(m.id, ID_STC);
                                cr_assert_eq((size_t)len, size_stc(n, k, best), "%s n=%zu", spec, n);
                                double sum = 0;
                                for (size_t j = 0; j < k; j++)
                                    sum += fabsf(x[want[j]]);
                                float mu = k ? (float)(sum / (double)k) : 0.0f;
                                cr_assert_eq(m.mu, mu);
                                size_t j = 0, wrong = 0;
                                for (size_t i = 0; i < n; i++) {
                                    float v = 0;
                                    if (j < k && want[j] == i) {
                                        wrong += m.neg[j] != (signbit(x[i]) ? 1 : 0);
                                        v = signbit(x[i]) ? -mu : mu;
                                        j++;
                                    }
                                    wrong += dst[i] != v;
                                }
                                cr_assert_eq(wrong, 0, "%s n=%zu: %zu signs or decoded values wrong", spec, n, wrong);
                            }
                        }
                        msg_free(&m);
                        /* a buffer one byte short of the bound is refused, not overrun */
                        cr_assert_eq(cmp_encode(&e.s, x, n, 1, e.work, e.buf, e.cap - 1), -ENOSPC);
                        enc_free(&e);
                        checked++;
                    }
            }
            free(order);
        }
        free(x);
        free(dst);
        free(want);
    }
    cr_assert_eq(checked, 24 + 4 * 6 * 24); /* per (n, pattern): 6 fractions x (topk, topk:sampled, stc, randk) */
}

/* The codec's own encode (below cmp_encode's cap check) with a buffer one
 * byte shorter than the payload: -ENOSPC, and nothing written past it. */
Test(compress_sparse, encode_short_buffer)
{
    size_t n = 4096;
    float *x = malloc(n * sizeof *x);
    fill(x, n, PAT_GAUSS, 12);
    const char *specs[] = {"topk:0.01", "topk:0.01:sampled", "stc:0.01", "stc:0.5", "randk:0.01"};
    for (int c = 0; c < 5; c++) {
        enc e;
        enc_spec(&e, specs[c], n);
        const cmp_ops *ops = e.s.ops;
        long len = ops->encode(&e.s, x, n, 1, e.work, e.buf, ops->bound(&e.s, n));
        cr_assert_gt(len, 0);
        for (size_t cap = 0; cap < (size_t)len; cap++) {
            uint8_t *out = malloc(cap ? cap : 1); /* exactly cap bytes for ASan */
            cr_assert_eq(ops->encode(&e.s, x, n, 1, e.work, out, cap), -ENOSPC, "%s cap %zu of %ld", specs[c], cap,
                         len);
            free(out);
        }
        uint8_t *out = malloc((size_t)len);
        cr_assert_eq(ops->encode(&e.s, x, n, 1, e.work, out, (size_t)len), len, "%s: exactly enough room", specs[c]);
        cr_assert_arr_eq(out, e.buf, (size_t)len);
        free(out);
        enc_free(&e);
    }
    free(x);
}

/* The documented bound formulas themselves. */
Test(compress_sparse, bound_formulas)
{
    for (size_t a = 0; a < sizeof sizes_n / sizeof *sizes_n; a++)
        for (size_t f = 0; f < sizeof fractions / sizeof *fractions; f++) {
            size_t n = sizes_n[a], k = cmp_select_k(fractions[f], n);
            int b0 = cmp_select_rice_b0(n, k);
            uint64_t rmax = (uint64_t)k * (uint64_t)(1 + b0) + ((n - k) >> b0);
            char spec[64];
            cmp_spec s;
            char err[128];
            spec_name(spec, sizeof spec, "topk", fractions[f], 0);
            cr_assert_eq(cmp_spec_parse(&s, spec, err, sizeof err), 0);
            cr_assert_eq(cmp_bound(&s, n), CMP_HEADER_MAX + vlen(k) + 1 + 4 * k + (rmax + 7) / 8);
            spec_name(spec, sizeof spec, "stc", fractions[f], 0);
            cr_assert_eq(cmp_spec_parse(&s, spec, err, sizeof err), 0);
            cr_assert_eq(cmp_bound(&s, n), CMP_HEADER_MAX + vlen(k) + 1 + 4 + (rmax + k + 7) / 8);
            spec_name(spec, sizeof spec, "randk", fractions[f], 0);
            cr_assert_eq(cmp_spec_parse(&s, spec, err, sizeof err), 0);
            cr_assert_eq(cmp_bound(&s, n), CMP_HEADER_MAX + vlen(k) + 8 + 4 * k);
        }
}

/* ---- randk ------------------------------------------------------------------------ */


/* The positions exactly as compress/FORMAT.md states them. */
static uint32_t randk_doc_index(uint64_t seed, uint64_t n, uint64_t k, uint64_t j, int rotate)
{
    uint64_t r = rotate ? mulhi(cmp_rng_at(seed, 0), n) : 0;
    uint64_t lo = j * n / k, hi = (j + 1) * n / k;
    return (uint32_t)((lo + mulhi(cmp_rng_at(seed, j + 1), hi - lo) + r) % n);
}

Test(compress_sparse, randk_positions_as_documented)
{
    const size_t ns[] = {1, 7, 301, 4096, 1000000};
    for (size_t a = 0; a < 5; a++) {
        size_t n = ns[a];
        float *x = malloc(n * sizeof *x), *dst = calloc(n, sizeof *dst);
        uint8_t *hit = calloc(n, 1);
        for (size_t i = 0; i < n; i++)
            x[i] = (float)(i + 1);
        const double fs[] = {0.001, 0.1, 0.37, 1.0};
        for (size_t f = 0; f < 4; f++) {
            char spec[64];
            spec_name(spec, sizeof spec, "randk", fs[f], 0);
            enc e;
            enc_spec(&e, spec, n);
            uint64_t seed = 0x5eed0000 + a * 16 + f;
            long len = enc_run(&e, x, n, seed);
            cr_assert_gt(len, 0);
            msg m;
            msg_parse(e.buf, (size_t)len, &m);
            size_t k = m.k;
            float scale = (float)((double)n / (double)k);
            memset(dst, 0, n * sizeof *dst);
            memset(hit, 0, n);
            cr_assert_eq(cmp_decode(e.buf, (size_t)len, n, dst), 0);
            for (size_t j = 0; j < k; j++) {
                uint32_t i = randk_doc_index(seed, n, k, j, 1);
                cr_assert_eq(m.val[j], x[i], "%s n=%zu: value %zu is x[%u]", spec, n, j, i);
                cr_assert_eq(hit[i], 0, "index %u twice", i);
                hit[i] = 1;
                cr_assert_eq(dst[i], scale * x[i], "%s n=%zu: dst[%u] = %g, want %g", spec, n, i, dst[i],
                             scale * x[i]);
            }
            for (size_t i = 0; i < n; i++)
                if (!hit[i])
                    cr_assert_eq(dst[i], 0.0f);
            if (n % k == 0)
                cr_assert_eq(scale, (float)(n / k));
            msg_free(&m);
            enc_free(&e);
        }
        free(x);
        free(dst);
        free(hit);
    }
}

/* Unbiasedness over many seeds. Each coordinate's decoded value is
 * (n/k) x_i B_i with B_i ~ Bernoulli(k/n), so over S independent seeds its mean
 * has standard deviation |x_i| sqrt((n/k - 1) / S). With n = 301 and k = 30,
 * n/k is not an integer: the strata differ in length and only the rotation
 * makes every marginal exactly k/n. Family-wise: every |z_i| < 5 (p ~ 6e-7
 * each, 2e-4 for all 301) and sum z_i^2, chi-square with 301 degrees of
 * freedom, below its mean + 5 sd. Control: the same statistics must flag a
 * 5% bias and the unrotated strata. */
Test(compress_sparse, randk_unbiased)
{
    const size_t n = 301, S = 40000;
    float x[301], dst[301];
    double sum[301] = {0}, hits[301] = {0};
    for (size_t i = 0; i < n; i++)
        x[i] = (0.5f + cmp_rng_uniform(77, i)) * ((i & 1) ? -1.0f : 1.0f);
    enc e;
    enc_spec(&e, "randk:0.1", n);
    size_t k = cmp_select_k(0.1, n);
    cr_assert_eq(k, 30);
    for (size_t s = 0; s < S; s++) {
        cr_assert_gt(enc_run(&e, x, n, 0xabc000 + s * 7919), 0);
        memset(dst, 0, sizeof dst);
        cr_assert_eq(cmp_decode(e.buf, (size_t)e.len, n, dst), 0);
        for (size_t i = 0; i < n; i++) {
            sum[i] += dst[i];
            hits[i] += dst[i] != 0;
        }
    }
    enc_free(&e);
    double ratio = (double)n / (double)k, p = (double)k / (double)n;
    double chi = 0, chi_biased = 0, zmax = 0, chi_hits = 0;
    for (size_t i = 0; i < n; i++) {
        double sd = fabs(x[i]) * sqrt((ratio - 1) / (double)S);
        double z = (sum[i] / (double)S - x[i]) / sd;
        double zb = (1.05 * sum[i] / (double)S - x[i]) / sd;
        double zh = (hits[i] - p * (double)S) / sqrt(p * (1 - p) * (double)S);
        chi += z * z;
        chi_biased += zb * zb;
        chi_hits += zh * zh;
        zmax = fmax(zmax, fabs(z));
        cr_assert_lt(fabs(zh), 5, "index %zu chosen %g times in %zu, expected %g", i, hits[i], S, p * (double)S);
    }
    double limit = (double)n + 5 * sqrt(2.0 * (double)n);
    cr_assert_lt(zmax, 5, "max |z| %g", zmax);
    cr_assert_lt(chi, limit, "chi-square %g >= %g", chi, limit);
    cr_assert_lt(chi_hits, limit, "inclusion chi-square %g", chi_hits);
    cr_assert_gt(chi_biased, limit, "the test cannot see a 5%% bias (%g)", chi_biased);

    /* control: the same strata without the rotation give unequal marginals */
    double chi_unrot = 0;
    double cnt[301] = {0};
    for (size_t s = 0; s < S; s++)
        for (size_t j = 0; j < k; j++)
            cnt[randk_doc_index(0xabc000 + s * 7919, n, k, j, 0)] += 1;
    for (size_t i = 0; i < n; i++) {
        double zh = (cnt[i] - p * (double)S) / sqrt(p * (1 - p) * (double)S);
        chi_unrot += zh * zh;
    }
    cr_assert_gt(chi_unrot, limit, "the test cannot see unrotated strata (%g)", chi_unrot);
}

Test(compress_sparse, randk_seed_determinism)
{
    size_t n = 4096;
    float *x = malloc(n * sizeof *x);
    fill(x, n, PAT_GAUSS, 5);
    enc a, b;
    enc_spec(&a, "randk:0.05", n);
    enc_spec(&b, "randk:0.05", n);
    cr_assert_gt(enc_run(&a, x, n, 99), 0);
    cr_assert_gt(enc_run(&b, x, n, 99), 0);
    cr_assert_eq(a.len, b.len);
    cr_assert_arr_eq(a.buf, b.buf, (size_t)a.len, "same seed, same message");
    cr_assert_gt(enc_run(&b, x, n, 100), 0);
    cr_assert_neq(memcmp(a.buf + 11, b.buf + 11, (size_t)a.len - 11), 0, "another seed, other positions");
    enc_free(&a);
    enc_free(&b);
    free(x);
}

/* topk and stc do not depend on the seed, and :sampled gives the same bytes. */
Test(compress_sparse, topk_stc_seed_and_mode_independent)
{
    size_t n = 300000;
    float *x = malloc(n * sizeof *x);
    for (int pat = 0; pat < PAT_COUNT; pat++) {
        fill(x, n, pat, 21);
        const char *pairs[][2] = {{"topk:0.001", "topk:0.001:sampled"}, {"topk:0.02", "topk:0.02:sampled"},
                                  {"stc:0.001", "stc:0.001"}};
        for (int q = 0; q < 3; q++) {
            enc a, b;
            enc_spec(&a, pairs[q][0], n);
            enc_spec(&b, pairs[q][1], n);
            cr_assert_gt(enc_run(&a, x, n, 1), 0);
            for (uint64_t seed = 2; seed < 5; seed++) {
                cr_assert_gt(enc_run(&b, x, n, seed), 0);
                cr_assert_eq(a.len, b.len, "%s vs %s on %s", pairs[q][0], pairs[q][1], pat_name[pat]);
                cr_assert_arr_eq(a.buf, b.buf, (size_t)a.len);
            }
            enc_free(&a);
            enc_free(&b);
        }
    }
    free(x);
}

/* ---- decode_add -------------------------------------------------------------------- */

Test(compress_sparse, decode_add_alpha)
{
    size_t n = 4096;
    float *x = malloc(n * sizeof *x), *base = malloc(n * sizeof *base), *dec = malloc(n * sizeof *dec),
          *dst = malloc(n * sizeof *dst);
    fill(x, n, PAT_GAUSS, 8);
    fill(base, n, PAT_SPREAD, 9);
    const char *specs[] = {"topk:0.03", "stc:0.03", "randk:0.03"};
    const float alphas[] = {1.0f, 0.5f, -0.25f, 0.0f};
    for (int c = 0; c < 3; c++) {
        enc e;
        enc_spec(&e, specs[c], n);
        cr_assert_gt(enc_run(&e, x, n, 3), 0);
        cr_assert_eq(cmp_decode(e.buf, (size_t)e.len, n, dec), 0);
        for (int a = 0; a < 4; a++) {
            memcpy(dst, base, n * sizeof *dst);
            cr_assert_eq(cmp_decode_add(e.buf, (size_t)e.len, n, alphas[a], dst), 0);
            for (size_t i = 0; i < n; i++) {
                /* randk folds alpha into its n/k scale, so allow one rounding */
                float want = base[i] + alphas[a] * dec[i];
                cr_assert_float_eq(dst[i], want, 1e-6f * (fabsf(want) + fabsf(base[i]) + 1e-30f), "%s alpha %g at %zu",
                                   specs[c], alphas[a], i);
            }
        }
        /* the wrong n is refused */
        cr_assert_eq(cmp_decode_add(e.buf, (size_t)e.len, n - 1, 1, dst), -EBADMSG);
        enc_free(&e);
    }
    free(x);
    free(base);
    free(dec);
    free(dst);
}

/* ---- malformed input ---------------------------------------------------------------- */

/* Every pattern and a range of fractions: the sparse list is the dense decode
 * and what the encoder says it sent; a dense codec's message is -ENOTSUP; the
 * bound is the count sent. */
Test(compress_sparse, decode_sparse_matches_decode)
{
    const size_t n = 4096;
    float *x = malloc(n * sizeof *x), *dst = malloc(n * sizeof *dst), *sent = calloc(n, sizeof *sent);
    const char *specs[] = {"topk:0.001", "topk:0.04",  "topk:0.5",    "stc:0.001",   "stc:0.04",
                           "stc:1",      "randk:0.04", "sketch:0.001", "sketch:0.04", "sketch:0.5:1"};
    for (int pat = 0; pat < PAT_COUNT; pat++) {
        fill(x, n, pat, 50 + (uint64_t)pat);
        for (size_t c = 0; c < sizeof specs / sizeof *specs; c++) {
            enc e;
            enc_spec(&e, specs[c], n);
            cr_assert_gt(enc_run(&e, x, n, 7), 0);
            cr_assert_eq(decode_checked(e.buf, (size_t)e.len, n, dst, sent), 0, "%s %s", specs[c], pat_name[pat]);
            /* the sender's view, from the work area, is the receiver's, bit for bit */
            uint32_t *ia = malloc(n * sizeof *ia), *ib = malloc(n * sizeof *ib);
            float *va = malloc(n * sizeof *va), *vb = malloc(n * sizeof *vb);
            long ka = cmp_encoded_sparse(&e.s, x, n, e.work, ia, va, n);
            long kb = cmp_decode_sparse(e.buf, (size_t)e.len, n, ib, vb, n);
            cr_assert_eq(ka, e.s.ops->decode_sparse ? kb : -ENOTSUP, "%s %s", specs[c], pat_name[pat]);
            if (ka > 0) {
                cr_assert_arr_eq(ia, ib, (size_t)ka * sizeof *ia, "%s %s: positions", specs[c], pat_name[pat]);
                cr_assert_arr_eq(va, vb, (size_t)ka * sizeof *va, "%s %s: values", specs[c], pat_name[pat]);
            }
            free(ia), free(ib), free(va), free(vb);
            size_t bound = cmp_sparse_bound(&e.s, n);
            cr_assert_eq(bound, e.s.ops->decode_sparse ? cmp_select_k(e.s.fraction, n) : 0, "%s", specs[c]);
            enc_free(&e);
        }
    }
    enc e;
    enc_spec(&e, "fp16", n);
    cr_assert_gt(enc_run(&e, x, n, 7), 0);
    uint32_t idx[1];
    float val[1];
    cr_assert_eq(cmp_decode_sparse(e.buf, (size_t)e.len, n, idx, val, 1), -ENOTSUP);
    cr_assert_eq(cmp_sparse_bound(&e.s, n), 0);
    enc_free(&e);
    free(x);
    free(dst);
    free(sent);
}

Test(compress_sparse, truncated_every_length)
{
    const size_t ns[] = {0, 1, 7, 4096};
    const char *specs[] = {"topk:0.01", "topk:0.3", "stc:0.01", "stc:0.3", "randk:0.01", "randk:0.3"};
    for (size_t a = 0; a < 4; a++) {
        size_t n = ns[a];
        float *x = malloc((n + 1) * sizeof *x), *dst = malloc((n + 1) * sizeof *dst),
              *sent = malloc((n + 1) * sizeof *sent);
        fill(x, n, PAT_GAUSS, 31);
        fill(sent, n, PAT_TIES, 32);
        for (int c = 0; c < 6; c++) {
            enc e;
            enc_spec(&e, specs[c], n);
            cr_assert_gt(enc_run(&e, x, n, 4), 0);
            size_t len = (size_t)e.len;
            cr_assert_eq(decode_checked(e.buf, len, n, dst, sent), 0);
            for (size_t l = 0; l < len; l++) {
                uint8_t *cut = malloc(l ? l : 1); /* exactly l bytes, so ASan sees any overread */
                memcpy(cut, e.buf, l);
                cr_assert_eq(decode_checked(cut, l, n, dst, sent), -EBADMSG, "%s n=%zu cut to %zu of %zu", specs[c],
                             n, l, len);
                free(cut);
            }
            /* trailing garbage */
            uint8_t *longer = malloc(len + 1);
            memcpy(longer, e.buf, len);
            longer[len] = 0;
            cr_assert_eq(decode_checked(longer, len + 1, n, dst, sent), -EBADMSG, "%s: trailing byte", specs[c]);
            free(longer);
            enc_free(&e);
        }
        free(x);
        free(dst);
        free(sent);
    }
}

/* Every single-bit flip of whole messages: rejected, or decoded in bounds
 * (ASan/UBSan watch); flips in k and b are checked to be rejected when the
 * result is out of range. */
Test(compress_sparse, bit_flips)
{
    size_t n = 4096;
    float *x = malloc(n * sizeof *x), *dst = malloc(n * sizeof *dst), *sent = malloc(n * sizeof *sent);
    fill(x, n, PAT_GAUSS, 41);
    fill(sent, n, PAT_TIES, 42);
    const char *specs[] = {"topk:0.01", "stc:0.01", "randk:0.01", "topk:0.2", "stc:0.2"};
    for (int c = 0; c < 5; c++) {
        enc e;
        enc_spec(&e, specs[c], n);
        cr_assert_gt(enc_run(&e, x, n, 6), 0);
        size_t len = (size_t)e.len;
        uint8_t *m = malloc(len);
        size_t ok = 0, bad = 0;
        /* from bit 8 on: a flipped codec id would hand the bytes to another codec */
        for (size_t bit = 8; bit < len * 8; bit++) {
            memcpy(m, e.buf, len);
            m[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            if (decode_checked(m, len, n, dst, sent) == 0)
                ok++;
            else
                bad++;
        }
        cr_assert_gt(bad, 0);
        cr_log_info("bit_flips %s: %zu of %zu flips rejected, %zu decoded", specs[c], bad, len * 8 - 8, ok);
        /* header: id 1 byte, n = 4096 in 2 bytes, then k (1 or 2 bytes) and, for topk/stc, b */
        if (e.s.ops->id != ID_RANDK) {
            size_t kl = vlen(cmp_select_k(e.s.fraction, n));
            for (unsigned v = 32; v < 256; v++) {
                memcpy(m, e.buf, len);
                m[3 + kl] = (uint8_t)v;
                cr_assert_eq(decode_checked(m, len, n, dst, sent), -EBADMSG, "%s: rice parameter %u", specs[c], v);
            }
        }
        free(m);
        enc_free(&e);
    }
    free(x);
    free(dst);
    free(sent);
}

/* Hand-made messages for each rule a decoder enforces. */
static size_t build(uint8_t *out, int id, uint64_t n, uint64_t k, int b, const uint32_t *gaps, float val_or_mu,
                    int pad_bit)
{
    size_t p = 0;
    out[p++] = (uint8_t)id;
    p += cmp_varint_put(out + p, n);
    p += cmp_varint_put(out + p, k);
    out[p++] = (uint8_t)b;
    if (id == ID_TOPK)
        for (size_t j = 0; j < k; j++, p += 4)
            cmp_f32_put(out + p, val_or_mu);
    else {
        cmp_f32_put(out + p, val_or_mu);
        p += 4;
    }
    cmp_bitw w;
    cmp_bitw_init(&w, out + p, 256);
    for (size_t j = 0; j < k; j++) {
        cmp_bitw_rice(&w, gaps[j], b);
        if (id == ID_STC)
            cmp_bitw_bits(&w, j & 1, 1);
    }
    long l = cmp_bitw_finish(&w);
    cr_assert_geq(l, 0);
    if (pad_bit) {
        cr_assert_gt(l, 0);
        out[p + (size_t)l - 1] |= 0x80; /* the last bit: padding when the stream does not fill the byte */
    }
    return p + (size_t)l;
}

Test(compress_sparse, decoder_rules)
{
    uint8_t m[512];
    float dst[16], sent[16];
    for (int i = 0; i < 16; i++)
        sent[i] = (float)i;
    const int ids[] = {ID_TOPK, ID_STC};
    for (int c = 0; c < 2; c++) {
        int id = ids[c];
        uint32_t g[] = {1, 0, 3}; /* positions 1, 2, 6 */
        size_t l = build(m, id, 10, 3, 1, g, 1.5f, 0);
        cr_assert_eq(decode_checked(m, l, 10, dst, sent), 0);
        cr_assert_eq(dst[1], 1 + 0.75f);
        cr_assert_eq(dst[2], 2 + (id == ID_STC ? -0.75f : 0.75f));
        cr_assert_eq(dst[6], 6 + 0.75f);
        cr_assert_eq(dst[0], 0);
        /* k > n */
        l = build(m, id, 2, 3, 1, g, 1.5f, 0);
        cr_assert_eq(decode_checked(m, l, 2, dst, sent), -EBADMSG);
        /* last position = n exactly, then beyond */
        uint32_t g2[] = {1, 0, 7};
        l = build(m, id, 10, 3, 1, g2, 1.5f, 0);
        cr_assert_eq(decode_checked(m, l, 10, dst, sent), -EBADMSG);
        uint32_t g3[] = {1, 0, 6};
        l = build(m, id, 10, 3, 1, g3, 1.5f, 0);
        cr_assert_eq(decode_checked(m, l, 10, dst, sent), 0, "position 9 of 10 is fine");
        /* a huge gap that would wrap a 32-bit position */
        uint32_t g4[] = {0xfffffff0u, 0, 0};
        l = build(m, id, 10, 3, 31, g4, 1.5f, 0);
        cr_assert_eq(decode_checked(m, l, 10, dst, sent), -EBADMSG);
        /* rice parameter 31 is legal, 32 not */
        l = build(m, id, 10, 3, 31, g, 1.5f, 0);
        cr_assert_eq(decode_checked(m, l, 10, dst, sent), 0);
        l = build(m, id, 10, 3, 1, g, 1.5f, 0);
        m[3] = 32; /* after id, n = 10, k = 3 */
        cr_assert_eq(decode_checked(m, l, 10, dst, sent), -EBADMSG);
        /* nonzero padding (topk: 2 + 2 + 3 = 7 bits, stc: 10 bits, so the last bit is padding) */
        l = build(m, id, 10, 3, 1, g, 1.5f, 1);
        cr_assert_eq(decode_checked(m, l, 10, dst, sent), -EBADMSG);
        /* nonfinite values or scale; a negative mu */
        const float badv[] = {INFINITY, -INFINITY, NAN};
        for (int v = 0; v < 3; v++) {
            l = build(m, id, 10, 3, 1, g, badv[v], 0);
            cr_assert_eq(decode_checked(m, l, 10, dst, sent), -EBADMSG);
        }
        l = build(m, id, 10, 3, 1, g, -1.5f, 0);
        cr_assert_eq(decode_checked(m, l, 10, dst, sent), id == ID_STC ? -EBADMSG : 0);
        l = build(m, id, 10, 3, 1, g, -0.0f, 0);
        cr_assert_eq(decode_checked(m, l, 10, dst, sent), id == ID_STC ? -EBADMSG : 0);
        /* k = 0 is an empty update */
        l = build(m, id, 10, 0, 0, g, 0.0f, 0);
        cr_assert_eq(decode_checked(m, l, 10, dst, sent), 0);
        cr_assert_arr_eq(dst, sent, 10 * sizeof *dst);
    }
    /* randk: k > n, a nonfinite value, the exact length */
    size_t p = 0;
    m[p++] = ID_RANDK;
    p += cmp_varint_put(m + p, 10);
    p += cmp_varint_put(m + p, 2);
    cmp_u64_put(m + p, 7);
    p += 8;
    cmp_f32_put(m + p, 1.0f);
    cmp_f32_put(m + p + 4, 2.0f);
    p += 8;
    cr_assert_eq(decode_checked(m, p, 10, dst, sent), 0);
    cr_assert_eq(decode_checked(m, p, 1, dst, sent), -EBADMSG);
    m[1] = 1; /* n = 1 < k = 2 */
    cr_assert_eq(decode_checked(m, p, 1, dst, sent), -EBADMSG);
    m[1] = 10;
    cmp_f32_put(m + p - 4, NAN);
    cr_assert_eq(decode_checked(m, p, 10, dst, sent), -EBADMSG);
}

/* Random payloads behind a valid common header. */
Test(compress_sparse, random_garbage)
{
    const size_t n = 100;
    float dst[100], sent[100];
    for (size_t i = 0; i < n; i++)
        sent[i] = (float)i;
    uint8_t m[128];
    const int ids[] = {ID_TOPK, ID_RANDK, ID_STC};
    size_t ok = 0;
    for (uint64_t t = 0; t < 60000; t++) {
        uint64_t r = cmp_rng_at(0xf00, t);
        size_t len = 2 + (size_t)(r % 100);
        m[0] = (uint8_t)ids[t % 3];
        m[1] = (uint8_t)n;
        for (size_t i = 2; i < len; i++)
            m[i] = (uint8_t)cmp_rng_at(t, i);
        /* often a plausible k and b, so that the bit streams get exercised */
        if (t & 8)
            m[2] = (uint8_t)(r >> 32) % 8;
        if (t & 16)
            m[3] = (uint8_t)(r >> 40) % 8;
        ok += decode_checked(m, len, n, dst, sent) == 0;
    }
    cr_log_info("random_garbage: %zu of 60000 decoded", ok);
}

/* NaN or inf in x cannot be sent: topk and stc always see it (it ranks
 * highest), randk when it picks it. */
Test(compress_sparse, nonfinite_input)
{
    size_t n = 1000;
    float *x = malloc(n * sizeof *x);
    const float bad[] = {NAN, INFINITY, -INFINITY};
    const char *specs[] = {"topk:0.01", "topk:0.01:sampled", "stc:0.01", "randk:1"};
    for (int v = 0; v < 3; v++)
        for (int c = 0; c < 4; c++) {
            fill(x, n, PAT_GAUSS, 3);
            x[500] = bad[v];
            enc e;
            enc_spec(&e, specs[c], n);
            cr_assert_eq(enc_run(&e, x, n, 1), -EINVAL, "%s with %g", specs[c], bad[v]);
            enc_free(&e);
        }
    free(x);
}

/* ---- specs ----------------------------------------------------------------------------- */

Test(compress_sparse, bad_specs)
{
    const char *bad[] = {"topk",      "topk:",       "topk:0",    "topk:1.5",       "topk:0.1:fast", "topk:-0.1",
                         "topk:nan",  "topk:inf",    "topk: 0.5", "topk:0.5x",      "topk:0.1:sampled:x",
                         "stc:x",     "stc",         "stc:0",     "stc:0.1:sampled", "randk:-1",     "randk",
                         "randk:2",   "randk:0.1:x", "randk:1e-400"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cmp_spec s;
        char err[256] = "";
        cr_assert_eq(cmp_spec_parse(&s, bad[i], err, sizeof err), -EINVAL, "'%s' accepted", bad[i]);
        cr_assert_gt(strlen(err), 10, "'%s': message '%s'", bad[i], err);
        cr_assert_null(strchr(err, '\n'), "'%s': one line", bad[i]);
        char name[8];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(bad[i], ":"), bad[i]);
        cr_assert(strncmp(err, name, strlen(name)) == 0, "'%s': message names the codec: %s", bad[i], err);
    }
    struct {
        const char *text;
        double f;
        int sampled;
    } good[] = {{"topk:1", 1, 0},          {"topk:0.001:sampled", 0.001, 1}, {"stc:0.5", 0.5, 0},
                {"randk:1e-3", 0.001, 0}, {"topk:.25", 0.25, 0}};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        cmp_spec s;
        char err[256] = "";
        cr_assert_eq(cmp_spec_parse(&s, good[i].text, err, sizeof err), 0, "%s: %s", good[i].text, err);
        cr_assert_eq(s.fraction, good[i].f);
        cr_assert_eq(s.sampled, good[i].sampled);
        cr_assert_str_eq(s.text, good[i].text);
    }
}

/* ---- a caller that streams its values (cmp_stream_begin) ------------------- */

/* Collects the list as a streaming caller does; 0, or -ENOSPC past the cap. */
static int collect_list(const float *x, size_t n, uint32_t t, cmp_list *c)
{
    for (size_t i = 0; i < n; i++)
        if (cmp_list_key(x[i]) >= t) {
            if (c->m == c->cap)
                return -ENOSPC;
            c->pos[c->m] = (uint32_t)i, c->key[c->m++] = cmp_list_bits(x[i]);
        }
    return 0;
}

/* topk and stc made from a list the caller collected send the same bytes as
 * from x itself, and leave the same sender's view (cmp_encoded_sparse with
 * x NULL) and the values they chose (cmp_selected_values); a list that
 * holds fewer than k is refused with -EAGAIN, and codecs without a top-k
 * selection, or too few values to sample, do not stream. */
Test(compress_sparse, a_streamed_list_encodes_what_x_encodes)
{
    const size_t n = 200000;
    const double fr[] = {0.001, 0.01, 0.04, 0.1};
    const char *codecs[] = {"topk", "stc"};
    float *x = malloc(n * sizeof *x);
    size_t cap = 0, streamed = 0;
    for (size_t c = 0; c < 2; c++)
        for (size_t f = 0; f < sizeof fr / sizeof *fr; f++) {
            cmp_spec s;
            char name[48], err[128];
            spec_name(name, sizeof name, codecs[c], fr[f], 0);
            cr_assert_eq(cmp_spec_parse(&s, name, err, sizeof err), 0, "%s", err);
            size_t bound = cmp_bound(&s, n), k = cmp_select_k(fr[f], n);
            uint8_t *want = malloc(bound), *got = malloc(bound);
            void *work = malloc(cmp_work_size(&s, n));
            uint32_t *ia = malloc(k * sizeof *ia), *ib = malloc(k * sizeof *ib);
            float *va = malloc(k * sizeof *va), *vb = malloc(k * sizeof *vb);
            for (int pat = 0; pat < PAT_COUNT; pat++) {
                fill(x, n, pat, 11 + (uint64_t)pat);
                long lw = cmp_encode(&s, x, n, 5, work, want, bound);
                cr_assert_gt(lw, 0, "%s %s", name, pat_name[pat]);
                cr_assert_eq(cmp_encoded_sparse(&s, x, n, work, ia, va, k), (long)k);
                cmp_list l;
                uint32_t t;
                cr_assert_eq(cmp_stream_begin(&s, n, 5, work, &l), 0, "%s", name);
                for (size_t j = 0; j < l.m; j++)
                    l.key[j] = cmp_list_bits(x[l.pos[j]]);
                if (cmp_stream_threshold(&s, &l, n, work, &t) < 0 || collect_list(x, n, t, &l) < 0) {
                    cap++; /* the threshold needs too large a sample, or too many tie with it */
                    continue;
                }
                long lg = cmp_encode_list(&s, &l, n, work, got, bound);
                cr_assert_eq(lg, lw, "%s %s: %ld bytes from the list, %ld from x", name, pat_name[pat], lg, lw);
                cr_assert_eq(memcmp(got, want, (size_t)lw), 0, "%s %s", name, pat_name[pat]);
                cr_assert_eq(cmp_encoded_sparse(&s, NULL, n, work, ib, vb, k), (long)k);
                cr_assert_eq(memcmp(ia, ib, k * sizeof *ia), 0, "%s %s: positions", name, pat_name[pat]);
                cr_assert_eq(memcmp(va, vb, k * sizeof *va), 0, "%s %s: values", name, pat_name[pat]);
                const float *sel = cmp_selected_values(&s, n, work);
                for (size_t j = 0; j < k; j++)
                    cr_assert_eq(cmp_list_bits(sel[j]), cmp_list_bits(x[ib[j]]), "%s %s: value %zu", name,
                                 pat_name[pat], j);
                streamed++;

                /* A threshold above the k-th largest: too few. */
                size_t m = l.m;
                l.m = 0;
                cr_assert_eq(collect_list(x, n, cmp_list_key(x[ib[0]]) + 1, &l), 0);
                if (l.m < k)
                    cr_assert_eq(cmp_encode_list(&s, &l, n, work, got, bound), -EAGAIN, "%s %s", name,
                                 pat_name[pat]);
                l.m = m;
            }
            free(want), free(got), free(work), free(ia), free(ib), free(va), free(vb);
        }
    cr_assert_geq(streamed, 2 * 4 * 3, "streamed %zu of %d cases (%zu could not)", streamed, 2 * 4 * PAT_COUNT, cap);

    /* A NaN ranks first and is refused either way. */
    fill(x, n, PAT_GAUSS, 3);
    x[777] = NAN;
    for (size_t c = 0; c < 2; c++) {
        cmp_spec s;
        char name[48], err[128];
        spec_name(name, sizeof name, codecs[c], 0.01, 0);
        cr_assert_eq(cmp_spec_parse(&s, name, err, sizeof err), 0, "%s", err);
        uint8_t *out = malloc(cmp_bound(&s, n));
        void *work = malloc(cmp_work_size(&s, n));
        cmp_list l;
        uint32_t t;
        cr_assert_eq(cmp_encode(&s, x, n, 5, work, out, cmp_bound(&s, n)), -EINVAL);
        cr_assert_eq(cmp_stream_begin(&s, n, 5, work, &l), 0);
        for (size_t j = 0; j < l.m; j++)
            l.key[j] = cmp_list_bits(x[l.pos[j]]);
        cr_assert_eq(cmp_stream_threshold(&s, &l, n, work, &t), 0);
        cr_assert_eq(collect_list(x, n, t, &l), 0);
        cr_assert_eq(cmp_encode_list(&s, &l, n, work, out, cmp_bound(&s, n)), -EINVAL, "%s", name);
        free(out), free(work);
    }

    /* Who streams. */
    const char *others[] = {"randk:0.01", "sketch:0.05", "bf16", "qsgd:16"};
    for (size_t c = 0; c < sizeof others / sizeof *others; c++) {
        cmp_spec s;
        char err[128];
        cmp_list l;
        cr_assert_eq(cmp_spec_parse(&s, others[c], err, sizeof err), 0, "%s", err);
        void *work = malloc(cmp_work_size(&s, n) + 1);
        cr_assert_eq(cmp_stream_begin(&s, n, 5, work, &l), -ENOTSUP, "%s", others[c]);
        cr_assert_null(cmp_selected_values(&s, n, work));
        free(work);
    }
    cmp_spec s;
    char err[128];
    cmp_list l;
    cr_assert_eq(cmp_spec_parse(&s, "stc:0.01", err, sizeof err), 0, "%s", err);
    void *work = malloc(cmp_work_size(&s, 60000));
    cr_assert_eq(cmp_stream_begin(&s, 60000, 5, work, &l), -ENOTSUP, "too few values to sample");
    free(work);
    free(x);
}
