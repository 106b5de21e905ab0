/* sparseloco:K[:CHUNK][:whole|:stat]: each chunk sends exactly its K largest
 * magnitudes (against a qsort reference), each decoded to the bf16 mean of
 * the values of its chunk (whole: of the message) that share its sign and
 * its side of their mean magnitude (stat: of its bin of the authors'
 * statistical quantiser over the message); the message is parsed here from compress/FORMAT.md
 * ("sparseloco") independently of the codec; its size beats 12-bit packed
 * positions; hostile messages (a chunk with one entry too many or too few,
 * a level that is not finite, K > CHUNK) are refused; bad specs fail with
 * one line. (Round trips, bounds, prefixes, corruption: test_compress_all;
 * mass and averaging on the push-sum path: test_gossip_pushsum.) */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress/bitio.h"
#include "compress/cmp.h"
#include "compress/cmp_bf16.h"
#include "compress/cmp_rng.h"

TestSuite(compress_sparseloco, .timeout = 300);

static float gauss(uint64_t seed, uint64_t i)
{
    float u1 = cmp_rng_uniform(seed, 2 * i) + 0x1p-25f, u2 = cmp_rng_uniform(seed, 2 * i + 1);
    return sqrtf(-2 * logf(u1)) * cosf(6.28318531f * u2);
}

typedef struct message {
    cmp_spec spec;
    uint8_t *bytes;
    long len;
} message;

static void encode(message *m, const char *spec, const float *x, size_t n)
{
    char err[128];
    cr_assert_eq(cmp_spec_parse(&m->spec, spec, err, sizeof err), 0, "%s", err);
    const size_t cap = cmp_bound(&m->spec, n);
    m->bytes = malloc(cap);
    void *work = malloc(cmp_work_size(&m->spec, n) + 1);
    m->len = cmp_encode(&m->spec, x, n, 1, work, m->bytes, cap);
    free(work);
    cr_assert_gt(m->len, 0, "%s: %ld", spec, m->len);
}

/* FORMAT.md's layout, read with the bit reader: the header fields, each
 * chunk's levels, and the entries (position, code). */
typedef struct parsed {
    uint64_t chunk, k;
    int b;
    size_t n_chunks, n_entries;
    float *level; /* 4 a chunk */
    uint32_t *pos;
    uint8_t *code;
} parsed;

static void parse(const uint8_t *msg, long len, size_t n, size_t entries, parsed *p)
{
    size_t used, o;
    uint64_t id, got_n;
    id = msg[0];
    cr_assert_eq(id, 11, "sparseloco is codec 11");
    cr_assert_eq(cmp_varint_get(msg + 1, (size_t)len - 1, &used, &got_n), 0);
    cr_assert_eq(got_n, n);
    o = 1 + used;
    cr_assert_eq(cmp_varint_get(msg + o, (size_t)len - o, &used, &p->chunk), 0);
    o += used;
    cr_assert_eq(cmp_varint_get(msg + o, (size_t)len - o, &used, &p->k), 0);
    o += used;
    p->b = msg[o++];
    p->n_chunks = (n + p->chunk - 1) / p->chunk;
    p->level = malloc((4 * p->n_chunks + 1) * sizeof *p->level);
    for (size_t j = 0; j < 4 * p->n_chunks; j++, o += 2)
        p->level[j] = cmp_bf16_value((uint32_t)msg[o] | (uint32_t)msg[o + 1] << 8);
    p->n_entries = entries;
    p->pos = malloc((entries + 1) * sizeof *p->pos);
    p->code = malloc(entries + 1);
    cmp_bitr r;
    cmp_bitr_init(&r, msg + o, (size_t)len - o);
    uint64_t next = 0, g, c;
    for (size_t j = 0; j < entries; j++) {
        cr_assert_eq(cmp_bitr_rice(&r, p->b, &g), 0);
        cr_assert_eq(cmp_bitr_bits(&r, 2, &c), 0);
        p->pos[j] = (uint32_t)(next + g), p->code[j] = (uint8_t)c;
        next += g + 1;
    }
    cr_assert_eq(cmp_bitr_consumed(&r), (size_t)len - o, "the entries end the message");
}

static void parsed_free(parsed *p) { free(p->level), free(p->pos), free(p->code); }

static int by_magnitude_desc(const void *a, const void *b, void *ctx)
{
    const float *x = ctx;
    const uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    const float u = fabsf(x[i]), v = fabsf(x[j]);
    return u > v ? -1 : u < v ? 1 : (i > j) - (i < j); /* ties: the lower index first */
}

/* Each chunk's entries are its min(K, length) largest magnitudes; each
 * value decodes to its code's level, the bf16 mean of the chunk's selected
 * values with that sign and side of their mean magnitude. */
Test(compress_sparseloco, each_chunk_sends_its_k_largest_as_the_means_of_their_sign_and_size)
{
    const struct {
        const char *spec;
        size_t n, chunk, k;
    } cases[] = {{"sparseloco:64", 10000, 4096, 64}, {"sparseloco:5:32", 1000, 32, 5}, {"sparseloco:3:7", 16, 7, 3}};
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        const size_t n = cases[t].n, C = cases[t].chunk, K = cases[t].k;
        float *x = malloc(n * sizeof *x);
        for (size_t i = 0; i < n; i++)
            x[i] = gauss(t + 1, i) * (i % 97 == 0 ? 30.0f : 1.0f);
        message m;
        encode(&m, cases[t].spec, x, n);
        size_t entries = 0;
        for (size_t c0 = 0; c0 < n; c0 += C)
            entries += n - c0 < C ? (n - c0 < K ? n - c0 : K) : K;
        parsed p;
        parse(m.bytes, m.len, n, entries, &p);
        cr_assert(p.chunk == C && p.k == K);
        uint32_t *order = malloc(C * sizeof *order);
        size_t at = 0;
        for (size_t ch = 0; ch < p.n_chunks; ch++) {
            const size_t c0 = ch * C, L = n - c0 < C ? n - c0 : C, want = L < K ? L : K;
            for (size_t i = 0; i < L; i++)
                order[i] = (uint32_t)(c0 + i);
            qsort_r(order, L, sizeof *order, by_magnitude_desc, x);
            uint8_t chosen[4096] = {0};
            for (size_t j = 0; j < want; j++)
                chosen[order[j] - c0] = 1;
            double mean_abs = 0, sum[4] = {0};
            size_t count[4] = {0};
            for (size_t j = 0; j < want; j++)
                mean_abs += fabs((double)x[order[j]]);
            mean_abs /= (double)want;
            for (size_t j = 0; j < want; j++) {
                cr_assert_lt(p.pos[at + j], c0 + L, "chunk %zu's entries stay in it", ch);
                cr_assert(chosen[p.pos[at + j] - c0], "chunk %zu: %u is not among its %zu largest", ch, p.pos[at + j],
                          want);
                const float v = x[p.pos[at + j]];
                const int code = (signbit(v) ? 1 : 0) | (fabs((double)v) > mean_abs ? 2 : 0);
                cr_assert_eq(p.code[at + j], code, "chunk %zu entry %zu", ch, j);
                sum[code] += v, count[code]++;
            }
            for (int b = 0; b < 4; b++) {
                const float want_level = count[b] ? cmp_bf16_value(cmp_bf16_round((float)(sum[b] / count[b]))) : 0;
                cr_assert_eq(p.level[4 * ch + b], want_level, "chunk %zu level %d", ch, b);
            }
            at += want;
        }
        float *d = calloc(n, sizeof *d);
        cr_assert_eq(cmp_decode(m.bytes, (size_t)m.len, n, d), 0);
        for (size_t j = 0; j < entries; j++) {
            const float level = p.level[4 * (p.pos[j] / C) + p.code[j]];
            cr_assert_eq(d[p.pos[j]], level);
            cr_assert_eq(signbit(level), signbit(x[p.pos[j]]), "every value keeps its sign");
        }
        free(d), free(order), free(x), free(m.bytes);
        parsed_free(&p);
    }
}

/* What the sender says it sent is what a receiver decodes. */
Test(compress_sparseloco, encoded_sparse_is_what_decode_sparse_gives)
{
    const size_t n = 50000;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = gauss(9, i);
    cmp_spec s;
    char err[128];
    cr_assert_eq(cmp_spec_parse(&s, "sparseloco:32:1024", err, sizeof err), 0, "%s", err);
    const size_t cap = cmp_bound(&s, n), e = cmp_sparse_bound(&s, n);
    cr_assert_eq(e, 48 * 32 + 32, "48 whole chunks of 1,024 and one of 848: 32 from each");
    uint8_t *msg = malloc(cap);
    void *work = malloc(cmp_work_size(&s, n));
    const long len = cmp_encode(&s, x, n, 0, work, msg, cap);
    cr_assert_gt(len, 0);
    uint32_t *i1 = malloc(e * sizeof *i1), *i2 = malloc(e * sizeof *i2);
    float *v1 = malloc(e * sizeof *v1), *v2 = malloc(e * sizeof *v2);
    cr_assert_eq(cmp_encoded_sparse(&s, x, n, work, i1, v1, e), (long)e);
    cr_assert_eq(cmp_decode_sparse(msg, (size_t)len, n, i2, v2, e), (long)e);
    cr_assert_eq(memcmp(i1, i2, e * sizeof *i1), 0);
    cr_assert_eq(memcmp(v1, v2, e * sizeof *v1), 0);
    cr_assert_eq(cmp_decode_sparse(msg, (size_t)len, n, i2, v2, e - 1), -ENOSPC);
    free(i1), free(i2), free(v1), free(v2), free(msg), free(work), free(x);
}

/* K = 64 of 4,096 (SparseLoCo's setting): the authors pack 12 bits a
 * position and 2 a value, 14 bits an entry; Rice-coded gaps, the code and
 * the levels take about 10. */
Test(compress_sparseloco, an_entry_costs_fewer_bits_than_packed_12_bit_positions)
{
    const size_t n = 1 << 20;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = gauss(3, i);
    message m;
    encode(&m, "sparseloco:64:4096", x, n);
    const double entries = 64.0 * (double)(n / 4096), bits = 8.0 * (double)m.len / entries;
    cr_log_info("sparseloco:64:4096 on 2^20 Gaussian values: %ld bytes, %.2f bits an entry, %.0fx fewer than f32",
                m.len, bits, 4.0 * (double)n / (double)m.len);
    cr_assert_lt(bits, 11.0, "%.2f bits an entry", bits);
    cr_assert_gt(4.0 * (double)n / (double)m.len, 180.0);
    free(m.bytes), free(x);
}

/* whole: the same positions as a set of levels a chunk, one set of levels
 * (the bf16 means over the whole selection of each sign and side of its
 * mean magnitude), and 8 bytes fewer for every chunk but one. */
Test(compress_sparseloco, whole_sends_one_set_of_levels_for_the_message)
{
    const size_t n = 10000, C = 1000, K = 16, e = 10 * K;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = gauss(5, i) * (i < C ? 10.0f : 1.0f); /* one chunk of larger values: its own levels differ */
    message a, w;
    encode(&a, "sparseloco:16:1000", x, n);
    encode(&w, "sparseloco:16:1000:whole", x, n);
    cr_assert(w.spec.whole && !a.spec.whole && w.spec.chunk == C);
    cr_assert_eq(a.len - w.len, 8 * 9, "one set of 4 bf16 levels in place of 10: %ld against %ld", w.len, a.len);
    uint32_t *ia = malloc(e * sizeof *ia), *iw = malloc(e * sizeof *iw);
    float *va = malloc(e * sizeof *va), *vw = malloc(e * sizeof *vw);
    cr_assert_eq(cmp_decode_sparse(a.bytes, (size_t)a.len, n, ia, va, e), (long)e);
    cr_assert_eq(cmp_decode_sparse(w.bytes, (size_t)w.len, n, iw, vw, e), (long)e);
    cr_assert_eq(memcmp(ia, iw, e * sizeof *ia), 0, "the same entries");
    double mean_abs = 0, sum[4] = {0};
    size_t count[4] = {0};
    for (size_t j = 0; j < e; j++)
        mean_abs += fabs((double)x[iw[j]]);
    mean_abs /= (double)e;
    int code[10 * 16];
    for (size_t j = 0; j < e; j++) {
        const float v = x[iw[j]];
        code[j] = (signbit(v) ? 1 : 0) | (fabs((double)v) > mean_abs ? 2 : 0);
        sum[code[j]] += v, count[code[j]]++;
    }
    for (size_t j = 0; j < e; j++) {
        const float level = cmp_bf16_value(cmp_bf16_round((float)(sum[code[j]] / (double)count[code[j]])));
        cr_assert_eq(vw[j], level, "entry %zu decodes to its code's level over the whole message", j);
    }
    cr_assert_neq(memcmp(va, vw, e * sizeof *va), 0, "(a set a chunk decodes otherwise)");
    float *d = calloc(n, sizeof *d);
    cr_assert_eq(cmp_decode(w.bytes, (size_t)w.len, n, d), 0);
    for (size_t j = 0; j < e; j++)
        cr_assert_eq(d[iw[j]], vw[j]);
    w.bytes[1 + 2 + 2 + 1] |= 0x40; /* (n, CHUNK: 2-byte varints, K: 1) the b byte's unused bits */
    cr_assert_eq(cmp_decode(w.bytes, (size_t)w.len, n, d), -EBADMSG, "b with an unused bit set");
    free(d), free(ia), free(iw), free(va), free(vw), free(x), free(a.bytes), free(w.bytes);
}

/* stat: the same entries and size as whole, each value the bf16 mean of its
 * bin clamp(round((v - mean) / (1.5 sd)) + 2, 0, 3) over the whole selection. */
Test(compress_sparseloco, stat_bins_the_whole_message_as_the_authors_do)
{
    const size_t n = 10000, e = 10 * 16;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = gauss(6, i) + 0.3f; /* off centre: the bins' shift matters */
    message w, st;
    encode(&w, "sparseloco:16:1000:whole", x, n);
    encode(&st, "sparseloco:16:1000:stat", x, n);
    cr_assert(st.spec.whole && st.spec.stat && !w.spec.stat);
    cr_assert_eq(st.len, w.len, "the same format: one set of levels, 2 bits an entry");
    uint32_t *idx = malloc(e * sizeof *idx);
    float *val = malloc(e * sizeof *val);
    cr_assert_eq(cmp_decode_sparse(st.bytes, (size_t)st.len, n, idx, val, e), (long)e);
    double mean = 0, ss = 0, sum[4] = {0};
    size_t count[4] = {0};
    int bin[10 * 16];
    for (size_t j = 0; j < e; j++)
        mean += x[idx[j]];
    mean /= (double)e;
    for (size_t j = 0; j < e; j++)
        ss += (x[idx[j]] - mean) * (x[idx[j]] - mean);
    const double scale = 1.5 * sqrt(ss / (double)(e - 1));
    for (size_t j = 0; j < e; j++) {
        const double b = nearbyint((x[idx[j]] - mean) / scale) + 2;
        bin[j] = b < 0 ? 0 : b > 3 ? 3 : (int)b;
        sum[bin[j]] += x[idx[j]], count[bin[j]]++;
    }
    cr_assert(count[0] && count[3], "both outer bins in use");
    for (size_t j = 0; j < e; j++)
        cr_assert_eq(val[j], cmp_bf16_value(cmp_bf16_round((float)(sum[bin[j]] / (double)count[bin[j]]))),
                     "entry %zu, bin %d", j, bin[j]);
    free(idx), free(val), free(x), free(w.bytes), free(st.bytes);
}

/* A well-formed header with one hand-made entry stream: n = 8, CHUNK 4,
 * K 1 (one entry from each of 2 chunks), b 2, 8 levels (1.0 each unless
 * `level` sets the first's bits), entries at the given positions (code 0). */
static long hand_message(uint8_t *out, const uint32_t *pos, size_t n_pos, uint16_t first_level, uint64_t k)
{
    size_t o = 0;
    out[o++] = 11, out[o++] = 8, out[o++] = 4, out[o++] = (uint8_t)k, out[o++] = 2;
    for (int j = 0; j < 8; j++, o += 2) {
        const uint16_t l = j == 0 ? first_level : cmp_bf16_round(1.0f);
        out[o] = (uint8_t)l, out[o + 1] = (uint8_t)(l >> 8);
    }
    cmp_bitw w;
    cmp_bitw_init(&w, out + o, 64);
    uint32_t next = 0;
    for (size_t j = 0; j < n_pos; j++) {
        cmp_bitw_rice_then(&w, pos[j] - next, 2, 0, 2);
        next = pos[j] + 1;
    }
    const long len = cmp_bitw_finish(&w);
    cr_assert_geq(len, 0);
    return (long)o + len;
}

Test(compress_sparseloco, a_decoder_refuses_what_no_encoder_makes)
{
    uint8_t msg[128];
    float d[8] = {0};
    const uint16_t one = cmp_bf16_round(1.0f);
    long len = hand_message(msg, (const uint32_t[]){1, 6}, 2, one, 1);
    cr_assert_eq(cmp_decode(msg, (size_t)len, 8, d), 0, "one entry in each chunk: well formed");
    cr_assert(d[1] == 1.0f && d[6] == 1.0f);
    const float before[8] = {0};
    memset(d, 0, sizeof d);
    len = hand_message(msg, (const uint32_t[]){1, 2}, 2, one, 1);
    cr_assert_eq(cmp_decode(msg, (size_t)len, 8, d), -EBADMSG, "two entries in the first chunk, none in the second");
    len = hand_message(msg, (const uint32_t[]){5, 6}, 2, one, 1);
    cr_assert_eq(cmp_decode(msg, (size_t)len, 8, d), -EBADMSG, "none in the first chunk");
    len = hand_message(msg, (const uint32_t[]){1, 6}, 2, cmp_bf16_round(INFINITY), 1);
    cr_assert_eq(cmp_decode(msg, (size_t)len, 8, d), -EBADMSG, "a level that is not finite");
    len = hand_message(msg, (const uint32_t[]){1, 6}, 2, cmp_bf16_round(NAN), 1);
    cr_assert_eq(cmp_decode(msg, (size_t)len, 8, d), -EBADMSG, "a NaN level");
    len = hand_message(msg, (const uint32_t[]){1, 6}, 2, one, 5);
    cr_assert_eq(cmp_decode(msg, (size_t)len, 8, d), -EBADMSG, "K 5 > CHUNK 4");
    len = hand_message(msg, (const uint32_t[]){1, 6}, 2, one, 0);
    cr_assert_eq(cmp_decode(msg, (size_t)len, 8, d), -EBADMSG, "K 0");
    cr_assert_eq(memcmp(d, before, sizeof d), 0, "a refused message changes nothing");
    uint32_t idx[8];
    float val[8];
    cr_assert_eq(cmp_decode_sparse(msg, (size_t)len, 8, idx, val, 8), -EBADMSG);
}

Test(compress_sparseloco, a_value_that_is_not_finite_is_not_encoded)
{
    cmp_spec s;
    char err[128];
    cr_assert_eq(cmp_spec_parse(&s, "sparseloco:2:4", err, sizeof err), 0, "%s", err);
    float x[8] = {1, 2, 3, 4, 5, 6, NAN, 8};
    uint8_t msg[256];
    void *work = malloc(cmp_work_size(&s, 8));
    cr_assert_eq(cmp_encode(&s, x, 8, 0, work, msg, sizeof msg), -EINVAL);
    x[6] = INFINITY;
    cr_assert_eq(cmp_encode(&s, x, 8, 0, work, msg, sizeof msg), -EINVAL);
    free(work);
}

/* Chunk ranges encoded apart, out of order and each with a select area of
 * its own (what gossip's pool does, gsp_encode), make cmp_encode's bytes
 * and leave what cmp_encoded_sparse reads; a value that is not finite
 * fails in the range that holds it (with one set of levels, in the
 * message's). */
Test(compress_sparseloco, chunk_ranges_encoded_apart_make_the_same_message)
{
    const char *specs[] = {"sparseloco:5:64", "sparseloco:3:7", "sparseloco:16:100:whole", "sparseloco:8:50:stat"};
    const size_t n = 4321;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = gauss(9, i);
    for (size_t t = 0; t < sizeof specs / sizeof *specs; t++) {
        message m;
        encode(&m, specs[t], x, n);
        const size_t nch = cmp_chunks(&m.spec, n), cap = cmp_bound(&m.spec, n);
        cr_assert_eq(nch, (n + m.spec.chunk - 1) / m.spec.chunk, "%s", specs[t]);
        void *work = malloc(cmp_work_size(&m.spec, n)), *select[3];
        for (int a = 0; a < 3; a++)
            select[a] = malloc(cmp_chunk_work(&m.spec, n));
        /* ranges of 1, 2, 3, ... chunks, taken last first, rotating the select areas */
        size_t cut[64], nc = 0;
        for (size_t c = 0, w = 1; c < nch; c += w++)
            cut[nc++] = c;
        cut[nc] = nch;
        for (size_t r = nc; r-- > 0;)
            cr_assert_eq(cmp_encode_chunks(&m.spec, x, n, cut[r], cut[r + 1], select[r % 3], work), 0, "%s", specs[t]);
        uint8_t *got = malloc(cap);
        const long len = cmp_encode_chosen(&m.spec, n, work, got, cap);
        cr_assert_eq(len, m.len, "%s: %ld bytes, cmp_encode %ld", specs[t], len, m.len);
        cr_assert_eq(memcmp(got, m.bytes, (size_t)len), 0, "%s: the bytes differ", specs[t]);
        const size_t e = cmp_sparse_bound(&m.spec, n);
        uint32_t *ia = malloc(e * sizeof *ia), *ib = malloc(e * sizeof *ib);
        float *va = malloc(e * sizeof *va), *vb = malloc(e * sizeof *vb);
        cr_assert_eq(cmp_encoded_sparse(&m.spec, x, n, work, ia, va, e), (long)e);
        cr_assert_eq(cmp_decode_sparse(m.bytes, (size_t)m.len, n, ib, vb, e), (long)e);
        cr_assert_eq(memcmp(ia, ib, e * sizeof *ia), 0, "%s", specs[t]);
        cr_assert_eq(memcmp(va, vb, e * sizeof *va), 0, "%s", specs[t]);
        const size_t bad = n - 1;
        x[bad] = NAN;
        const size_t from[2] = {0, nch - 1}; /* all of them, then the last alone */
        for (int f = 0; f < 2; f++) {
            const int rc = cmp_encode_chunks(&m.spec, x, n, from[f], nch, select[0], work);
            cr_assert_eq(rc < 0 ? rc : cmp_encode_chosen(&m.spec, n, work, got, cap), -EINVAL, "%s", specs[t]);
        }
        cr_assert_eq(cmp_encode_chunks(&m.spec, x, n, 0, nch + 1, select[0], work), -EINVAL, "past the last chunk");
        x[bad] = gauss(9, bad);
        free(ia), free(ib), free(va), free(vb), free(got), free(work), free(m.bytes);
        for (int a = 0; a < 3; a++)
            free(select[a]);
    }
    cmp_spec other;
    char err[128];
    cr_assert_eq(cmp_spec_parse(&other, "topk:0.1", err, sizeof err), 0, "%s", err);
    cr_assert_eq(cmp_chunks(&other, n), 0, "topk selects over the whole vector");
    free(x);
}

Test(compress_sparseloco, bad_specs_fail_with_one_line)
{
    const struct {
        const char *spec, *says;
    } bad[] = {
        {"sparseloco", "sparseloco: missing K, usage: sparseloco:K[:CHUNK][:whole|:stat]"},
        {"sparseloco:8:64:wholes", "sparseloco: the third field must be 'whole' or 'stat', got 'wholes'"},
        {"sparseloco:8:64:whole:1", "sparseloco: too many fields, usage: sparseloco:K[:CHUNK][:whole|:stat]"},
        {"sparseloco:8:whole2", "sparseloco: CHUNK must be an integer from 1 to 16777216, got 'whole2'"},
        {"sparseloco:0", "sparseloco: K must be an integer from 1 to 4096, got '0'"},
        {"sparseloco:5000", "sparseloco: K must be an integer from 1 to 4096, got '5000'"},
        {"sparseloco:8:4", "sparseloco: K must be an integer from 1 to 4, got '8'"},
        {"sparseloco:8:x", "sparseloco: CHUNK must be an integer from 1 to 16777216, got 'x'"},
        {"sparseloco:-3", "sparseloco: K must be an integer from 1 to 4096, got '-3'"},
        {"sparseloco:2.5", "sparseloco: K must be an integer from 1 to 4096, got '2.5'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cmp_spec s;
        char err[160] = "";
        cr_assert_eq(cmp_spec_parse(&s, bad[i].spec, err, sizeof err), -EINVAL, "%s", bad[i].spec);
        cr_assert_str_eq(err, bad[i].says);
    }
    cmp_spec s;
    char err[160];
    cr_assert_eq(cmp_spec_parse(&s, "sparseloco:64", err, sizeof err), 0, "%s", err);
    cr_assert(s.chunk == 4096 && s.fraction == 64.0 / 4096 && !s.whole, "CHUNK defaults to 4,096");
    cr_assert_eq(cmp_spec_parse(&s, "sparseloco:8:whole", err, sizeof err), 0, "%s", err);
    cr_assert(s.chunk == 4096 && s.whole && !s.stat, "whole with the default CHUNK");
    cr_assert_eq(cmp_spec_parse(&s, "sparseloco:8:64:stat", err, sizeof err), 0, "%s", err);
    cr_assert(s.chunk == 64 && s.whole && s.stat);
}
