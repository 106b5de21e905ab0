/* Exact top-k by magnitude: a radix select on the bits of |x|.
 *
 * For a float with the sign cleared, the bit pattern read as an unsigned
 * integer orders like the magnitude, so "the k largest |x|" is "the k largest
 * 31-bit keys". The threshold key T (the k-th largest) is found one digit at a
 * time, most significant first: 12 bits (the exponent and 4 mantissa bits),
 * then 10, then 9. Each level histograms the keys that share the digits found
 * so far and picks the bucket where the running count from the top reaches k.
 * Everything above T is selected, and of the keys equal to T the first ones
 * until there are k.
 *
 * Only the first level has to look at every value. As soon as the keys at or
 * above the current bucket fit in the workspace, one pass copies their indices
 * out and the remaining levels run on that short list. Data where it does not
 * fit (many equal magnitudes, large k) takes further full passes instead: at
 * most four in all, never a sort.
 *
 * When k is small next to n (n/k >= 64, the usual gradient-sparsification
 * range) even the first histogram is skipped: a streaming pass of block maxima
 * bounds the threshold from below and leaves only about k blocks to look at
 * again (select_blocks). That is one read of x at memory speed plus work
 * proportional to n/16 + k.
 *
 * The indices come out in ascending order because every pass walks x (or an
 * ascending candidate list) front to back.
 */
#include "compress/cmp_select.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "compress/bitio.h"
#include "compress/cmp.h"
#include "compress/cmp_rng.h"

#define TOP_BITS 12
#define TOP_BINS (1u << TOP_BITS)
/* The first pass spreads its counts over four histograms: consecutive equal
 * keys would otherwise serialise on one counter's store-to-load latency
 * (0.34 against 0.45 ns per value in cache on Gaussian data, more on runs of
 * zeros). */
#define TOP_WAYS 4
#define HIST_WORDS (TOP_WAYS * TOP_BINS)

static const int lv_shift[3] = {19, 9, 0};
static const int lv_bits[3] = {12, 10, 9};

/* Candidate list length: enough for the threshold bucket of smooth data at
 * k/n up to a few percent, small next to x itself. */
static size_t cand_cap(size_t n)
{
    size_t c = n / 16 + 4096;
    return c < n ? c : n;
}

/* Block maxima for the first pass at small k/n: blocks of 16 values or more. */
static size_t max_words(size_t n) { return n / 16 + 1; }

size_t cmp_select_work(size_t n)
{
    if (n == 0)
        return 0;
    return (HIST_WORDS + 2 * cand_cap(n) + max_words(n)) * sizeof(uint32_t);
}

/* The values a search looks at: all of x[0..m) (idx NULL), or the candidates
 * x[idx[0..m)], ascending, with their keys beside them (key[j] is the key of
 * x[idx[j]]) so that later passes read m keys in a row instead of gathering
 * them from x again (at a few percent of n the candidates touch nearly every
 * cache line of x). */
typedef struct sel_list {
    const uint32_t *idx, *key;
    size_t m;
} sel_list;

/* The workspace: histograms, a candidate list (indices and keys) of cap
 * entries, block maxima. */
typedef struct sel_work {
    uint32_t *h, *cand, *ckey, *maxima;
    size_t cap;
} sel_work;

static sel_work work_at(void *work, size_t n)
{
    sel_work w = {.h = work, .cap = cand_cap(n)};
    w.cand = w.h + HIST_WORDS;
    w.ckey = w.cand + w.cap;
    w.maxima = w.ckey + w.cap;
    return w;
}

size_t cmp_select_k(double fraction, size_t n)
{
    if (n == 0)
        return 0;
    double r = floor(fraction * (double)n + 0.5);
    if (!(r >= 1))
        return 1;
    return r >= (double)n ? n : (size_t)r;
}

int cmp_select_fraction_parse(const char *name, const char *text, double *fraction, char *err, size_t errlen)
{
    if (!text || !*text) {
        snprintf(err, errlen, "%s: missing FRACTION, e.g. %s:0.01", name, name);
        return -EINVAL;
    }
    char *end;
    double f = strtod(text, &end);
    /* strtod skips leading blanks and takes "inf"/"nan": neither is a fraction. */
    if (end == text || *end || text[0] == ' ' || text[0] == '\t' || !(f > 0 && f <= 1)) {
        snprintf(err, errlen, "%s: FRACTION must be a number in (0, 1], got '%s'", name, text);
        return -EINVAL;
    }
    *fraction = f;
    return 0;
}

static inline uint32_t mag(const float *x, size_t i)
{
    uint32_t u;
    memcpy(&u, x + i, sizeof u);
    return u & 0x7fffffffu;
}

/* Both sides are below 2^31, so a signed compare is exact and vectorises on
 * plain SSE2, which has no unsigned one. */
static inline int ge(uint32_t a, uint32_t b) { return (int32_t)a >= (int32_t)b; }

static void hist_top(const float *x, size_t n, uint32_t *h)
{
    memset(h, 0, HIST_WORDS * sizeof *h);
    size_t i = 0;
    for (; i + TOP_WAYS <= n; i += TOP_WAYS) {
        h[0 * TOP_BINS + (mag(x, i + 0) >> 19)]++;
        h[1 * TOP_BINS + (mag(x, i + 1) >> 19)]++;
        h[2 * TOP_BINS + (mag(x, i + 2) >> 19)]++;
        h[3 * TOP_BINS + (mag(x, i + 3) >> 19)]++;
    }
    for (; i < n; i++)
        h[mag(x, i) >> 19]++;
    for (uint32_t b = 0; b < TOP_BINS; b++)
        h[b] += h[TOP_BINS + b] + h[2 * TOP_BINS + b] + h[3 * TOP_BINS + b];
}

/* Histogram of digit (key >> shift) & (nb - 1) over the keys of the list
 * whose fixed digits equal prefix. */
static void hist_level(const float *x, const sel_list *l, uint32_t prefix, uint32_t pmask, int shift, uint32_t nb,
                       uint32_t *h)
{
    if (!l->idx && pmask == 0) {
        hist_top(x, l->m, h);
        return;
    }
    /* Branch-free: a key outside the prefix counts in the spare bin nb
     * (whether a key matches is a coin flip for the predictor). */
    memset(h, 0, (nb + 1) * sizeof *h);
    const uint32_t *key = l->idx ? l->key : NULL;
    const size_t m = l->m;
    if (key)
        for (size_t j = 0; j < m; j++) {
            uint32_t u = key[j];
            h[(u & pmask) == prefix ? (u >> shift) & (nb - 1) : nb]++;
        }
    else
        for (size_t j = 0; j < m; j++) {
            uint32_t u = mag(x, j);
            h[(u & pmask) == prefix ? (u >> shift) & (nb - 1) : nb]++;
        }
}

/* Bit l set where the key of x[i + l] is >= t, for the 64 values from i. */
static inline uint64_t block_mask(const float *x, size_t i, uint32_t t)
{
    uint64_t m = 0;
#if defined(__SSE2__)
    /* key >= t as key > t - 1: both sides fit a signed compare (t - 1 >= -1) */
    const __m128i absm = _mm_set1_epi32(0x7fffffff), below = _mm_set1_epi32((int32_t)t - 1);
    for (int l = 0; l < 64; l += 4) {
        __m128i u = _mm_and_si128(_mm_loadu_si128((const __m128i *)(const void *)(x + i + l)), absm);
        m |= (uint64_t)(unsigned)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(u, below))) << l;
    }
#else
    for (int l = 0; l < 64; l++)
        m |= (uint64_t)ge(mag(x, i + (size_t)l), t) << l;
#endif
    return m;
}

/* Indices i (ascending) with key >= t, and their keys, into the workspace's
 * candidate list; SIZE_MAX if more than its cap. A block of 64 becomes one
 * bit mask (a vector compare per four values) and only its set bits cost
 * more: no branch or store per value, and no chain through the output count
 * (a store per value, advanced by the compare, waited on that chain at every
 * value). */
static size_t collect(const float *x, size_t n, uint32_t t, const sel_work *w)
{
    enum { B = 64 };
    size_t m = 0, i = 0;
    for (; i + B <= n; i += B)
        for (uint64_t mask = block_mask(x, i, t); mask; mask &= mask - 1) {
            if (m == w->cap)
                return SIZE_MAX;
            const size_t j = i + (size_t)__builtin_ctzll(mask);
            w->cand[m] = (uint32_t)j, w->ckey[m++] = mag(x, j);
        }
    for (; i < n; i++)
        if (ge(mag(x, i), t)) {
            if (m == w->cap)
                return SIZE_MAX;
            w->cand[m] = (uint32_t)i, w->ckey[m++] = mag(x, i);
        }
    return m;
}

/* The threshold search over the list *l, for the k-th largest key. On return
 * *t is that key and *ties how many entries equal to it belong to the top k
 * (the others above it all do); a search over all of x may have narrowed *l
 * to the workspace's candidate list, which still holds every key >= *t.
 * narrow == 0 keeps it from narrowing. */
static void find_threshold(const float *x, sel_list *l, size_t k, const sel_work *w, int narrow, uint32_t *t,
                           size_t *ties)
{
    uint32_t prefix = 0, pmask = 0;
    size_t above = 0, need = k;
    for (int lv = 0; lv < 3; lv++) {
        uint32_t nb = 1u << lv_bits[lv];
        hist_level(x, l, prefix, pmask, lv_shift[lv], nb, w->h);
        const uint32_t *h = w->h;
        uint32_t b = nb - 1;
        size_t cum = 0;
        /* need <= the number of keys matching prefix, so this stops at b >= 0. */
        while (cum + h[b] < need)
            cum += h[b--];
        above += cum;
        need -= cum;
        prefix |= b << lv_shift[lv];
        pmask |= (nb - 1) << lv_shift[lv];
        if (narrow && !l->idx && lv < 2 && above + h[b] <= w->cap) {
            l->m = collect(x, l->m, prefix, w);
            l->idx = w->cand, l->key = w->ckey;
        }
    }
    *t = prefix;
    *ties = need;
}

/* Everything above t, and the first `ties` entries equal to t. A list's
 * keys may carry the value's sign in bit 31 (a streamed list, see
 * cmp_list): the comparisons mask it off, and with `bits` each
 * selected entry's key goes out as it is, the value's bit pattern. */
static void emit(const float *x, const sel_list *l, uint32_t t, size_t ties, uint32_t *out, size_t k, float *bits)
{
    enum { B = 64 };
    const size_t m = l->m;
    size_t o = 0;
    for (size_t i = 0; i < m; i += B) {
        size_t e = i + B <= m ? i + B : m;
        if (!l->idx) {
            int any = 0;
            for (size_t j = i; j < e; j++)
                any |= ge(mag(x, j), t);
            if (!any)
                continue;
        }
        /* Branch-free (store always, advance if taken) while out surely has
         * room for the whole block: the taken branch is unpredictable when
         * k/n is large. */
        if (o + B <= k) {
            for (size_t j = i; j < e; j++) {
                uint32_t id = l->idx ? l->idx[j] : (uint32_t)j, u = l->idx ? l->key[j] & 0x7fffffffu : mag(x, j);
                size_t tie = (u == t) & (ties > 0);
                out[o] = id;
                if (bits)
                    memcpy(&bits[o], &l->key[j], sizeof *bits);
                o += (u > t) | tie;
                ties -= tie;
            }
        } else {
            for (size_t j = i; j < e; j++) {
                uint32_t id = l->idx ? l->idx[j] : (uint32_t)j, u = l->idx ? l->key[j] & 0x7fffffffu : mag(x, j);
                if (u > t || (u == t && ties && ties--)) {
                    if (bits)
                        memcpy(&bits[o], &l->key[j], sizeof *bits);
                    out[o++] = id;
                }
            }
        }
    }
}

/* Block length for select_blocks: a power of two, 16 to 64, with at least
 * four blocks per selected value; 0 when k/n is too large for that. */
static size_t block_len(size_t n, size_t k)
{
    size_t r = n / (4 * k);
    return r >= 64 ? 64 : r >= 32 ? 32 : r >= 16 ? 16 : 0;
}

/* The first pass when k is small next to n. The k largest block maxima are k
 * distinct values of x, so the k-th largest of them, L, is at most the
 * threshold: everything in the top k is >= L, and only blocks whose maximum is
 * >= L (about k of them when there are many more blocks than k) can hold one.
 * So one streaming pass that keeps each block's maximum, a select on those
 * n/len maxima, and a rescan of the few blocks that reach L yield a candidate
 * list with every member of the top k, in ascending order, without
 * histogramming all of x. Returns -ENOSPC if the candidates do not fit (e.g.
 * many equal maxima), for the caller to fall back. */
static int select_blocks(const float *x, size_t n, size_t k, size_t len, const sel_work *w, uint32_t *out)
{
    size_t nb = 0;
    uint32_t *maxima = w->maxima;
    for (size_t i = 0; i < n; i += len, nb++) {
        int32_t mx = 0;
        if (i + len <= n) {
            for (size_t j = i; j < i + len; j++) {
                int32_t u = (int32_t)mag(x, j);
                mx = u > mx ? u : mx;
            }
        } else {
            for (size_t j = i; j < n; j++) {
                int32_t u = (int32_t)mag(x, j);
                mx = u > mx ? u : mx;
            }
        }
        maxima[nb] = (uint32_t)mx;
    }
    /* The maxima are keys already (sign bit clear), so they can be read as floats. */
    sel_list l = {.m = nb};
    size_t ties;
    uint32_t lo;
    find_threshold((const float *)maxima, &l, k, w, 1, &lo, &ties);

    size_t m = 0;
    for (size_t b = 0; b < nb; b++) {
        if (maxima[b] < lo)
            continue;
        size_t e = (b + 1) * len < n ? (b + 1) * len : n;
        if (w->cap - m < len)
            return -ENOSPC;
        /* Branch-free (store always, advance if taken): which values of a
         * block reach lo is a coin flip for the predictor. */
        for (size_t j = b * len; j < e; j++) {
            const uint32_t u = mag(x, j);
            w->cand[m] = (uint32_t)j, w->ckey[m] = u;
            m += u >= lo;
        }
    }
    uint32_t t;
    l = (sel_list){w->cand, w->ckey, m};
    find_threshold(x, &l, k, w, 0, &t, &ties);
    emit(x, &l, t, ties, out, k, NULL);
    return 0;
}

int cmp_select_topk(const float *x, size_t n, size_t k, void *work, uint32_t *idx_out)
{
    if (k > n || n > UINT32_MAX)
        return -EINVAL;
    if (k == 0)
        return 0;
    if (k == n) {
        for (size_t i = 0; i < n; i++)
            idx_out[i] = (uint32_t)i;
        return 0;
    }
    const sel_work w = work_at(work, n);
    size_t len = block_len(n, k);
    if (len && select_blocks(x, n, k, len, &w, idx_out) == 0)
        return 0;
    sel_list l = {.m = n};
    size_t ties;
    uint32_t t;
    find_threshold(x, &l, k, &w, 1, &t, &ties);
    emit(x, &l, t, ties, idx_out, k, NULL);
    return 0;
}

/* 64x64 -> high 64 bits: an unbiased-enough draw in [0, len) from 64 random bits. */
static inline uint64_t mulhi64(uint64_t a, uint64_t b)
{
    uint64_t al = (uint32_t)a, ah = a >> 32, bl = (uint32_t)b, bh = b >> 32;
    uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
    uint64_t mid = (ll >> 32) + (uint32_t)lh + (uint32_t)hl;
    return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}

/* The stratified sample (one value per stretch of x, so that every layer of
 * a gradient is represented in proportion) as an ascending list: positions
 * in cand, keys left for the caller. Its length, or 0 when sampling does not
 * pay (below ~64k values a sample saves nothing over the exact first pass). */
static size_t sample_positions(size_t n, size_t k, uint64_t seed, const sel_work *w)
{
    if (n < 65536 || k == 0 || k >= n)
        return 0;
    size_t ms = n / 128 > 8192 ? n / 128 : 8192;
    size_t stride = n / ms;
    for (size_t j = 0; j < ms; j++)
        w->cand[j] = (uint32_t)(j * stride + mulhi64(cmp_rng_at(seed, j), stride));
    return ms;
}

/* The threshold estimate from the sample's ms keys: aim below the true
 * threshold by four standard deviations of the sample count (plus a
 * little), so the collected list holds the top k with overwhelming
 * probability; overshooting only costs candidates. -ERANGE when that rank
 * is beyond the sample (k too large a share of n to sample). */
static int estimate(const sel_work *w, size_t ms, size_t n, size_t k, uint32_t *t)
{
    double mu = (double)k * (double)ms / (double)n;
    double r = ceil(mu + 4 * sqrt(mu) + 16);
    if (r >= (double)ms)
        return -ERANGE;
    sel_list l = {w->cand, w->ckey, ms};
    size_t ties;
    find_threshold(NULL, &l, (size_t)r, w, 0, t, &ties);
    return 0;
}

int cmp_select_topk_sampled(const float *x, size_t n, size_t k, uint64_t seed, void *work, uint32_t *idx_out)
{
    if (k > n || n > UINT32_MAX)
        return -EINVAL;
    const sel_work w = work_at(work, n);
    const size_t ms = sample_positions(n, k, seed, &w);
    if (ms == 0)
        return cmp_select_topk(x, n, k, work, idx_out);
    for (size_t j = 0; j < ms; j++)
        w.ckey[j] = mag(x, w.cand[j]);
    uint32_t t;
    if (estimate(&w, ms, n, k, &t) < 0)
        return cmp_select_topk(x, n, k, work, idx_out);
    size_t m = collect(x, n, t, &w);
    if (m == SIZE_MAX || m < k)
        return cmp_select_topk(x, n, k, work, idx_out);
    sel_list l = {w.cand, w.ckey, m};
    size_t ties;
    find_threshold(x, &l, k, &w, 0, &t, &ties);
    emit(x, &l, t, ties, idx_out, k, NULL);
    return 0;
}

int cmp_select_stream(size_t n, size_t k, uint64_t seed, void *work, cmp_list *c)
{
    if (k > n || n > UINT32_MAX)
        return -EINVAL;
    const sel_work w = work_at(work, n);
    const size_t ms = sample_positions(n, k, seed, &w);
    if (ms == 0)
        return -ENOTSUP;
    *c = (cmp_list){.pos = w.cand, .key = w.ckey, .m = ms, .cap = w.cap};
    return 0;
}

int cmp_select_stream_threshold(cmp_list *c, size_t n, size_t k, void *work, uint32_t *t)
{
    const sel_work w = work_at(work, n);
    if (c->pos != w.cand || c->m > w.cap)
        return -EINVAL;
    if (estimate(&w, c->m, n, k, t) < 0)
        return -ENOTSUP;
    c->m = 0;
    return 0;
}

int cmp_select_topk_list(const cmp_list *c, size_t n, size_t k, void *work, uint32_t *idx_out, float *val_out)
{
    const sel_work w = work_at(work, n);
    if (k > n || c->pos != w.cand || c->m > w.cap)
        return -EINVAL;
    if (c->m < k)
        return -EAGAIN;
    if (k == 0)
        return 0;
    sel_list l = {w.cand, w.ckey, c->m};
    size_t ties;
    uint32_t t;
    find_threshold(NULL, &l, k, &w, 0, &t, &ties);
    emit(NULL, &l, t, ties, idx_out, k, val_out);
    return 0;
}

int cmp_select_rice_b0(size_t n, size_t k)
{
    if (k == 0 || n - k < k)
        return 0;
    uint64_t q = (uint64_t)((n - k) / k);
    return 63 - __builtin_clzll(q);
}

uint64_t cmp_select_rice_bits_max(size_t n, size_t k)
{
    int b0 = cmp_select_rice_b0(n, k);
    return (uint64_t)k * (uint64_t)(1 + b0) + ((uint64_t)(n - k) >> b0);
}

/* Why b0 + 1 is enough: going from b to b + 1 costs k bits (one more low bit
 * per gap) and saves sum_j ceil((g_j >> b) / 2) < (n - k) / 2^(b+1) + k / 2
 * bits, because the gaps sum to at most n - k and at most k of them are
 * nonzero. For b >= b0 + 1, 2^(b+1) >= 2^(b0+2) > 2 (n - k) / k, so the saving
 * is below k: the total only grows from b0 + 1 on. */
int cmp_select_rice(const uint32_t *idx, size_t k, size_t n, uint64_t *bits)
{
    *bits = 0;
    if (k == 0)
        return 0;
    int bmax = cmp_select_rice_b0(n, k) + 1;
    if (bmax > 31)
        bmax = 31;
    int best = 0;
    uint64_t best_bits = UINT64_MAX;
    for (int b = 0; b <= bmax; b++) {
        uint64_t s = idx[0] >> b;
        for (size_t j = 1; j < k; j++)
            s += (uint32_t)(idx[j] - idx[j - 1] - 1) >> b;
        s += (uint64_t)k * (uint64_t)(1 + b);
        if (s < best_bits)
            best_bits = s, best = b;
    }
    *bits = best_bits;
    return best;
}

int cmp_select_pos_read(const uint8_t *in, size_t len, size_t k, int b, int extra, size_t n, uint32_t *idx)
{
    if (idx && (extra > 1 || n > CMP_MAX_N))
        return -EINVAL;
    cmp_bitr r;
    cmp_bitr_init(&r, in, len);
    uint64_t next = 0, bits = 0, g, e = 0;
    for (size_t j = 0; j < k; j++) {
        if (cmp_bitr_rice_then(&r, b, extra, &g, &e) < 0 || g >= n - next)
            return -EBADMSG;
        next += g + 1;
        bits += 1 + (uint64_t)b + (g >> b) + (uint64_t)extra;
        if (idx)
            idx[j] = (uint32_t)(next - 1) | (uint32_t)e << 31;
    }
    int pad = (int)((8 - bits % 8) % 8);
    if (pad && (cmp_bitr_bits(&r, pad, &e) < 0 || e != 0))
        return -EBADMSG;
    return (bits + 7) / 8 == len ? 0 : -EBADMSG;
}

size_t cmp_select_chosen_work(size_t n, size_t k)
{
    return cmp_select_work(n) + k * (sizeof(uint32_t) + sizeof(float));
}

int cmp_select_chosen(const float *x, const cmp_list *c, size_t n, size_t k, uint64_t seed, int sampled, void *work)
{
    uint32_t *idx = (uint32_t *)((uint8_t *)work + cmp_select_work(n));
    float *val = (float *)(idx + k);
    if (!x)
        return cmp_select_topk_list(c, n, k, work, idx, val);
    int rc = sampled ? cmp_select_topk_sampled(x, n, k, seed, work, idx) : cmp_select_topk(x, n, k, work, idx);
    if (rc == 0)
        for (size_t j = 0; j < k; j++)
            val[j] = x[idx[j]];
    return rc;
}
