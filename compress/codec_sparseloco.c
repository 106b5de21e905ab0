/* sparseloco:K[:CHUNK][:whole|:stat] — the message of SparseLoCo (Sarfi et al., 2025,
 * arXiv 2508.15706): the vector cut into chunks of CHUNK values (the last
 * may be shorter), from each chunk its K largest magnitudes (all of a chunk
 * shorter than K), each sent as one of four levels of its chunk, a 2-bit
 * code. Selecting per chunk spreads the budget over every part of the model
 * (a global top-k spends it on the few layers whose values are largest);
 * four levels keep more of each value than stc's one magnitude.
 *
 * The levels: a value's code is its sign and whether its magnitude is above
 * the mean magnitude of its chunk's selection, and each code's level is the
 * mean of the chunk's values that got it, sent as bf16: every value keeps
 * its sign, and the levels are the best four for that split. (The authors'
 * statistical quantiser, code = clamp(round((v - mean) / (1.5 sd)) + 2, 0,
 * 3), gives the two values +a and -a of a small selection both the code of
 * their mean, 0, and the message carries nothing: with K = 2 of 8, 8
 * gossiping peers stopped averaging 17-28% away from the mean.) With
 * `whole`, the four levels are those of the whole message's selection, sent
 * once: 8 bytes a chunk fewer; `stat` sends one set too, with the authors'
 * codes over the whole message (for large messages only: the all-gather's;
 * what each does to a language model: tests/bench/LOG.md, 2026-12-06). Positions are Rice-coded gaps over the whole
 * vector (one parameter b for the message, the best for its gaps), about
 * log2(e CHUNK / K) bits each where the authors pack 12: 10.5 bits an entry
 * with its code and the levels at K = 64 of 4,096, 194x fewer bytes than
 * f32.
 *
 * Payload (compress/FORMAT.md, "sparseloco"):
 *
 *   varint CHUNK | varint K | u8 (b | 0x80 if whole or stat) |
 *   per chunk (once if whole) 4 x u16 bf16 levels |
 *   per entry (Rice(b) gap, 2-bit code), zero-padded to a byte
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/bitio.h"
#include "compress/cmp.h"
#include "compress/cmp_bf16.h"
#include "compress/cmp_select.h"

#define LEVELS 4
#define CHUNK_MAX ((size_t)1 << 24)
#define WHOLE 0x80 /* in the b byte: one set of levels for the message */

static size_t varint_len(uint64_t v)
{
    size_t l = 1;
    while (v >= 0x80)
        v >>= 7, l++;
    return l;
}

static size_t n_chunks(size_t chunk, size_t n) { return (n + chunk - 1) / chunk; }

/* Sets of levels a message carries: one a chunk, or one. */
static size_t level_sets(int whole, size_t chunk, size_t n) { return whole ? 1 : n_chunks(chunk, n); }

/* K, from the spec's fraction K / CHUNK (which a warm-up may raise). */
static size_t chunk_k(const cmp_spec *s) { return cmp_select_k(s->fraction, s->chunk); }

/* Chunk ch of n values: its length, and the entries it sends, min(K, length). */
static size_t chunk_len(size_t chunk, size_t n, size_t ch) { return n - ch * chunk < chunk ? n - ch * chunk : chunk; }
static size_t chunk_sends(size_t chunk, size_t k, size_t n, size_t ch)
{
    const size_t L = chunk_len(chunk, n, ch);
    return L < k ? L : k;
}

/* Entries a message of n values carries: min(K, length) from each chunk. */
static size_t entries(size_t chunk, size_t k, size_t n)
{
    if (n == 0)
        return 0;
    const size_t full = n / chunk, tail = n % chunk;
    return full * k + (tail < k ? tail : k);
}

static int parse_count(const char *what, const char *text, size_t max, size_t *out, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    unsigned long long v = text && *text ? strtoull(text, &end, 10) : 0;
    if (!text || !*text || *end || errno || *text == '-' || v < 1 || v > max) {
        snprintf(err, errlen, "sparseloco: %s must be an integer from 1 to %zu, got '%s'", what, max,
                 text ? text : "");
        return -EINVAL;
    }
    *out = (size_t)v;
    return 0;
}

static int sl_parse(cmp_spec *s, const char *args, char *err, size_t errlen)
{
    if (!args || !*args) {
        snprintf(err, errlen, "sparseloco: missing K, usage: sparseloco:K[:CHUNK][:whole|:stat]");
        return -EINVAL;
    }
    /* K[:CHUNK][:whole|:stat]: up to three fields */
    char field[3][24] = {{0}};
    int nf = 0;
    for (const char *at = args;; at = strchr(at, ':') + 1) {
        if (nf == 3) {
            snprintf(err, errlen, "sparseloco: too many fields, usage: sparseloco:K[:CHUNK][:whole|:stat]");
            return -EINVAL;
        }
        const size_t len = strchr(at, ':') ? (size_t)(strchr(at, ':') - at) : strlen(at);
        snprintf(field[nf++], sizeof field[0], "%.*s", (int)(len < sizeof field[0] ? len : sizeof field[0] - 1), at);
        if (!strchr(at, ':'))
            break;
    }
    const int stat = nf > 1 && strcmp(field[nf - 1], "stat") == 0,
              whole = stat || (nf > 1 && strcmp(field[nf - 1], "whole") == 0);
    if (nf == 3 && !whole) {
        snprintf(err, errlen, "sparseloco: the third field must be 'whole' or 'stat', got '%s'", field[2]);
        return -EINVAL;
    }
    size_t chunk = 4096, k;
    if ((nf - whole == 2 && parse_count("CHUNK", field[1], CHUNK_MAX, &chunk, err, errlen) < 0) ||
        parse_count("K", field[0], chunk, &k, err, errlen) < 0)
        return -EINVAL;
    s->chunk = chunk, s->fraction = (double)k / (double)chunk, s->whole = whole, s->stat = stat;
    return 0;
}

static size_t sl_bound(const cmp_spec *s, size_t n)
{
    const size_t e = entries(s->chunk, chunk_k(s), n);
    return varint_len(s->chunk) + varint_len(chunk_k(s)) + 1 + 2 * LEVELS * level_sets(s->whole, s->chunk, n) +
           (size_t)((cmp_select_rice_bits_max(n, e) + 2 * (uint64_t)e + 7) / 8);
}

static size_t sl_sparse_max(const cmp_spec *s, size_t n) { return entries(s->chunk, chunk_k(s), n); }

/* The workspace: the selection's, then what the last encode chose (its
 * positions and decoded values, for cmp_encoded_sparse), its codes and its
 * chunks' levels. */
typedef struct chosen {
    void *select;
    uint32_t *idx;
    float *val;
    uint16_t *level; /* LEVELS a chunk, or LEVELS (whole) */
    uint8_t *code;
} chosen;

static chosen layout(const cmp_spec *s, size_t n, void *work)
{
    const size_t e = entries(s->chunk, chunk_k(s), n), sel = cmp_select_work(s->chunk < n ? s->chunk : n);
    uint8_t *at = work;
    chosen c = {.select = at};
    c.idx = (uint32_t *)(void *)(at += (sel + 3) & ~(size_t)3);
    c.val = (float *)(void *)(at += e * sizeof(uint32_t));
    c.level = (uint16_t *)(void *)(at += e * sizeof(float));
    c.code = at + LEVELS * level_sets(s->whole, s->chunk, n) * sizeof(uint16_t);
    return c;
}

static size_t sl_work(const cmp_spec *s, size_t n)
{
    const size_t e = entries(s->chunk, chunk_k(s), n);
    return ((cmp_select_work(s->chunk < n ? s->chunk : n) + 3) & ~(size_t)3) + e * (sizeof(uint32_t) + sizeof(float)) +
           LEVELS * level_sets(s->whole, s->chunk, n) * sizeof(uint16_t) + e;
}

/* One chunk's (or, whole, the message's) m selected values v: their codes
 * and the four levels, each the mean of the values that got its code (bf16
 * bits; 0 for a code no value got). The codes: bit 0 the sign bit, bit 1 a
 * magnitude above their mean magnitude; or (stat) the authors' bins,
 * clamp(round((v - mean) / (1.5 sd)) + 2, 0, 3) with the sample sd (6 sd
 * over 4 bins; a scale of 1 where sd is 0). In double, so that no finite
 * input overflows; -EINVAL if a value is not finite. */
static int quantise(const float *v, size_t m, int stat, uint8_t *code, uint16_t *level)
{
    double mean_abs = 0, mean = 0, ss = 0;
    for (size_t j = 0; j < m; j++)
        mean_abs += fabs((double)v[j]), mean += v[j];
    mean_abs /= (double)m, mean /= (double)m;
    if (!isfinite(mean_abs))
        return -EINVAL;
    for (size_t j = 0; stat && j < m; j++)
        ss += ((double)v[j] - mean) * ((double)v[j] - mean);
    double scale = 1.5 * sqrt(ss / (double)(m > 1 ? m - 1 : 1));
    if (!(scale > 0) || !isfinite(scale))
        scale = 1;
    double sum[LEVELS] = {0};
    size_t count[LEVELS] = {0};
    for (size_t j = 0; j < m; j++) {
        const double bin = nearbyint(((double)v[j] - mean) / scale) + 2;
        code[j] = stat ? (uint8_t)(bin < 0 ? 0 : bin > LEVELS - 1 ? LEVELS - 1 : bin)
                       : (uint8_t)((signbit(v[j]) ? 1 : 0) | (fabs((double)v[j]) > mean_abs ? 2 : 0));
        sum[code[j]] += v[j], count[code[j]]++;
    }
    for (int b = 0; b < LEVELS; b++)
        level[b] = count[b] ? cmp_bf16_round((float)(sum[b] / (double)count[b])) : 0;
    return 0;
}

/* Chunks [c0, c1) of x: each one's selection, decoded-to-be values, codes
 * and levels at its own place in the work area (chunks before ch hold ch K
 * entries: every chunk but the last is full), selecting in `select`
 * (cmp_select_work of a chunk; NULL: the work area's own). Chunks apart
 * write apart, so threads may take ranges of them at once. */
static int sl_encode_chunks(const cmp_spec *s, const float *x, size_t n, size_t c0, size_t c1, void *select,
                            void *work)
{
    const size_t C = s->chunk, K = chunk_k(s);
    chosen c = layout(s, n, work);
    for (size_t ch = c0; ch < c1; ch++) {
        const size_t c0v = ch * C, L = chunk_len(C, n, ch), m = chunk_sends(C, K, n, ch), at = ch * K;
        int rc = cmp_select_topk(x + c0v, L, m, select ? select : c.select, c.idx + at);
        float *v = c.val + at;
        for (size_t j = 0; rc == 0 && j < m; j++)
            v[j] = x[c.idx[at + j] += (uint32_t)c0v];
        if (rc < 0 || (!s->whole && (rc = quantise(v, m, 0, c.code + at, c.level + LEVELS * ch)) < 0))
            return rc;
    }
    return 0;
}

static size_t sl_chunk_work(const cmp_spec *s, size_t n) { return cmp_select_work(s->chunk < n ? s->chunk : n); }

/* The message from the work area once every chunk is in it (sl_encode_chunks). */
static long sl_encode_chosen(const cmp_spec *s, size_t n, void *work, uint8_t *out, size_t cap)
{
    if (n > CMP_MAX_N)
        return -EINVAL;
    const size_t C = s->chunk, K = chunk_k(s), e = entries(C, K, n);
    if (cap < sl_bound(s, n))
        return -ENOSPC;
    chosen c = layout(s, n, work);
    if (s->whole) {
        memset(c.level, 0, LEVELS * sizeof *c.level);
        int rc = e ? quantise(c.val, e, s->stat, c.code, c.level) : 0;
        if (rc < 0)
            return rc;
    }
    for (size_t j = 0, ch = 0; j < e; j++) { /* what the receiver decodes */
        for (; !s->whole && c.idx[j] >= (ch + 1) * C; ch++)
            ;
        c.val[j] = cmp_bf16_value(c.level[LEVELS * ch + c.code[j]]);
    }
    uint64_t bits;
    const int b = e ? cmp_select_rice(c.idx, e, n, &bits) : 0;
    size_t o = cmp_varint_put(out, C);
    o += cmp_varint_put(out + o, K);
    out[o++] = (uint8_t)(b | (s->whole ? WHOLE : 0));
    const size_t n_levels = LEVELS * level_sets(s->whole, C, n);
    for (size_t j = 0; j < n_levels; j++)
        out[o + 2 * j] = (uint8_t)c.level[j], out[o + 2 * j + 1] = (uint8_t)(c.level[j] >> 8);
    o += 2 * n_levels;
    cmp_bitw w;
    cmp_bitw_init(&w, out + o, cap - o);
    uint32_t next = 0;
    for (size_t j = 0; j < e; j++) {
        cmp_bitw_rice_then(&w, c.idx[j] - next, b, c.code[j], 2);
        next = c.idx[j] + 1;
    }
    long len = cmp_bitw_finish(&w);
    return len < 0 ? len : (long)(o + (size_t)len);
}

static long sl_encode(const cmp_spec *s, const float *x, size_t n, uint64_t seed, void *work, uint8_t *out,
                      size_t cap)
{
    (void)seed; /* (n and cap: cmp_encode checked them, sl_encode_chosen checks them again) */
    int rc = sl_encode_chunks(s, x, n, 0, n_chunks(s->chunk, n), NULL, work);
    return rc < 0 ? rc : sl_encode_chosen(s, n, work, out, cap);
}

/* Where a read message goes: its positions and values (idx, val, at most
 * cap), or dst += alpha * values; neither: only checked. */
typedef struct sink {
    uint32_t *idx;
    float *val;
    size_t cap;
    float *dst;
    float alpha;
} sink;

/* Level `at` of the message's levels (bf16, little-endian). */
static float level_at(const uint8_t *level, size_t at)
{
    return cmp_bf16_value((uint32_t)level[2 * at] | (uint32_t)level[2 * at + 1] << 8);
}

/* A message read and checked whole, its entries into `to` as they are read.
 * The count, or -EBADMSG; -ENOSPC if more than to->cap. */
static long sl_read(const uint8_t *in, size_t len, size_t n, const sink *to)
{
    uint64_t C, K;
    size_t u1, u2;
    if (cmp_varint_get(in, len, &u1, &C) < 0 || C < 1 || C > CHUNK_MAX ||
        cmp_varint_get(in + u1, len - u1, &u2, &K) < 0 || K < 1 || K > C || len - u1 - u2 < 1)
        return -EBADMSG;
    size_t o = u1 + u2;
    const int whole = (in[o] & WHOLE) != 0, b = in[o++] & ~WHOLE;
    const size_t sets = level_sets(whole, C, n), e = entries(C, K, n);
    if (b > 31 || (len - o) / (2 * LEVELS) < sets)
        return -EBADMSG;
    if (to->idx && e > to->cap)
        return -ENOSPC;
    const uint8_t *level = in + o;
    for (size_t j = 0; j < LEVELS * sets; j++)
        if (!isfinite(level_at(level, j)))
            return -EBADMSG;
    o += 2 * LEVELS * sets;
    cmp_bitr r;
    cmp_bitr_init(&r, in + o, len - o);
    uint64_t next = 0, bits = 0, g, code;
    size_t ch = 0, in_chunk = 0;
    for (size_t j = 0; j < e; j++) {
        if (cmp_bitr_rice_then(&r, b, 2, &g, &code) < 0 || g >= n - next)
            return -EBADMSG;
        const uint64_t pos = next + g;
        next = pos + 1;
        bits += 1 + (uint64_t)b + (g >> b) + 2;
        /* Every chunk holds exactly min(K, its length) entries: one form. */
        for (; pos >= (ch + 1) * C; ch++, in_chunk = 0)
            if (in_chunk != chunk_sends(C, K, n, ch))
                return -EBADMSG;
        in_chunk++;
        const float v = level_at(level, LEVELS * (whole ? 0 : ch) + code);
        if (to->idx)
            to->idx[j] = (uint32_t)pos, to->val[j] = v;
        if (to->dst)
            to->dst[pos] += to->alpha * v;
    }
    if (e && in_chunk != chunk_sends(C, K, n, ch))
        return -EBADMSG;
    uint64_t pad = 0;
    const int pad_bits = (int)((8 - bits % 8) % 8);
    if (pad_bits && (cmp_bitr_bits(&r, pad_bits, &pad) < 0 || pad != 0))
        return -EBADMSG;
    return (bits + 7) / 8 == len - o ? (long)e : -EBADMSG;
}

static int sl_decode_add(const uint8_t *in, size_t len, size_t n, float alpha, float *dst)
{
    /* Checked whole first, so a bad message leaves dst untouched. */
    if (sl_read(in, len, n, &(sink){0}) < 0)
        return -EBADMSG;
    sl_read(in, len, n, &(sink){.dst = dst, .alpha = alpha});
    return 0;
}

static long sl_decode_sparse(const uint8_t *in, size_t len, size_t n, uint32_t *idx, float *val, size_t cap)
{
    return sl_read(in, len, n, &(sink){.idx = idx, .val = val, .cap = cap});
}

static long sl_encoded_sparse(const cmp_spec *s, const float *x, size_t n, const void *work, uint32_t *idx,
                              float *val, size_t cap)
{
    (void)x;
    const size_t e = entries(s->chunk, chunk_k(s), n);
    if (e > cap)
        return -ENOSPC;
    chosen c = layout(s, n, (void *)(uintptr_t)work);
    memcpy(idx, c.idx, e * sizeof *idx);
    memcpy(val, c.val, e * sizeof *val);
    return (long)e;
}

const cmp_ops cmp_sparseloco = {
    .name = "sparseloco",
    .id = 11,
    .usage = "sparseloco:K[:CHUNK][:whole|:stat]  SparseLoCo's message: the K largest magnitudes of every CHUNK "
             "[4096] values, each as one of its chunk's 4 bf16 levels by sign and size (whole: the message's; stat: "
             "the message's, the authors' bins), 2 bits, Rice-coded positions",
    .parse = sl_parse,
    .bound = sl_bound,
    .work = sl_work,
    .encode = sl_encode,
    .decode_add = sl_decode_add,
    .decode_sparse = sl_decode_sparse,
    .encoded_sparse = sl_encoded_sparse,
    .sparse_max = sl_sparse_max,
    .chunk_work = sl_chunk_work,
    .encode_chunks = sl_encode_chunks,
    .encode_chosen = sl_encode_chosen,
};
