/* Bit I/O: every code round-trips over its edge values and over random
 * sequences; the writer never writes past cap; readers fail with -EBADMSG on
 * truncated or hostile input without reading past len (inputs live in
 * exactly-sized heap blocks, so ASan sees any over-read); the bit-length
 * helpers agree with what is written; varints have one accepted encoding. */
#include "compress/bitio.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/exact_copy.h"

TestSuite(compress_bitio, .timeout = 120);

/* ---- helpers --------------------------------------------------------------- */

static uint64_t g_rng = 0x243f6a8885a308d3ULL;

static uint64_t rnd(void) /* xorshift64*: the tests' own stream, independent of the codecs' */
{
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545f4914f6cdd1dULL;
}

static size_t bits_written(const cmp_bitw *w) { return w->pos * 8 + (size_t)w->nacc; }

/* Edge values of a 64-bit code: 0..3, 2^k - 1, 2^k, 2^k + 1, and the top. */
static size_t edge_values(uint64_t *v)
{
    size_t n = 0;
    for (uint64_t i = 0; i < 4; i++)
        v[n++] = i;
    for (int k = 2; k < 64; k++) {
        v[n++] = (1ULL << k) - 1;
        v[n++] = 1ULL << k;
        v[n++] = (1ULL << k) + 1;
    }
    v[n++] = ~0ULL - 1;
    v[n++] = ~0ULL;
    return n;
}

enum code { C_BITS, C_UNARY, C_GAMMA, C_DELTA, C_RICE };

typedef struct item {
    enum code code;
    int width; /* bits: nbits; rice: k */
    uint64_t v;
} item;

static void put_item(cmp_bitw *w, const item *it)
{
    switch (it->code) {
    case C_BITS: cmp_bitw_bits(w, it->v, it->width); break;
    case C_UNARY: cmp_bitw_unary(w, it->v); break;
    case C_GAMMA: cmp_bitw_gamma(w, it->v); break;
    case C_DELTA: cmp_bitw_delta(w, it->v); break;
    case C_RICE: cmp_bitw_rice(w, it->v, it->width); break;
    }
}

static int get_item(cmp_bitr *r, const item *it, uint64_t *v)
{
    switch (it->code) {
    case C_BITS: return cmp_bitr_bits(r, it->width, v);
    case C_UNARY: return cmp_bitr_unary(r, v);
    case C_GAMMA: return cmp_bitr_gamma(r, v);
    case C_DELTA: return cmp_bitr_delta(r, v);
    case C_RICE: return cmp_bitr_rice(r, it->width, v);
    }
    return -EINVAL;
}

static size_t item_bits(const item *it)
{
    switch (it->code) {
    case C_BITS: return (size_t)it->width;
    case C_UNARY: return it->v + 1;
    case C_GAMMA: return (size_t)cmp_gamma_bits(it->v);
    case C_DELTA: return (size_t)cmp_delta_bits(it->v);
    case C_RICE: return (it->v >> it->width) + 1 + (size_t)it->width;
    }
    return 0;
}

static item random_item(void)
{
    item it = {.code = (enum code)(rnd() % 5)};
    int bits = (int)(rnd() % 65); /* magnitude class 0..64 bits */
    uint64_t v = bits ? rnd() >> (64 - bits) : 0;
    switch (it.code) {
    case C_BITS: it.width = (int)(rnd() % 65); it.v = it.width ? rnd() >> (64 - it.width) : 0; break;
    case C_UNARY: it.v = rnd() % 200; break;
    case C_GAMMA:
    case C_DELTA: it.v = v ? v : 1; break;
    case C_RICE: it.width = (int)(rnd() % 64); it.v = ((rnd() % 100) << it.width) | (rnd() & ((1ULL << it.width) - 1)); break;
    }
    return it;
}

/* Writes items, checks the length accounting, reads them back from an exact
 * copy, and checks that every truncation fails with -EBADMSG. */
static void roundtrip(const item *items, size_t n, int check_truncation)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += item_bits(&items[i]);
    size_t cap = total / 8 + 16;
    uint8_t *buf = malloc(cap);
    cmp_bitw w;
    cmp_bitw_init(&w, buf, cap);
    for (size_t i = 0; i < n; i++) {
        size_t before = bits_written(&w);
        put_item(&w, &items[i]);
        cr_assert_eq(bits_written(&w) - before, item_bits(&items[i]), "item %zu (code %d v %llu width %d)", i,
                     items[i].code, (unsigned long long)items[i].v, items[i].width);
    }
    long len = cmp_bitw_finish(&w);
    cr_assert_eq(len, (long)((total + 7) / 8));
    if (total % 8) /* padding bits are zero */
        cr_assert_eq(buf[len - 1] >> (total % 8), 0);

    uint8_t *in = exact_copy(buf, (size_t)len);
    cmp_bitr r;
    cmp_bitr_init(&r, in, (size_t)len);
    size_t consumed_bits = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = 0xdeadbeef;
        int rc = get_item(&r, &items[i], &v);
        cr_assert_eq(rc, 0, "item %zu code %d rc %d", i, items[i].code, rc);
        cr_assert_eq(v, items[i].v, "item %zu code %d: %llu != %llu", i, items[i].code, (unsigned long long)v,
                     (unsigned long long)items[i].v);
        consumed_bits += item_bits(&items[i]);
        cr_assert_eq(cmp_bitr_consumed(&r), (consumed_bits + 7) / 8);
    }
    free(in);

    for (size_t cut = 0; check_truncation && cut < (size_t)len; cut++) {
        in = exact_copy(buf, cut);
        cmp_bitr_init(&r, in, cut);
        int rc = 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            uint64_t v;
            rc = get_item(&r, &items[i], &v);
        }
        cr_assert_eq(rc, -EBADMSG, "truncated to %zu of %ld bytes: rc %d", cut, len, rc);
        cr_assert_leq(cmp_bitr_consumed(&r), cut);
        free(in);
    }
    free(buf);
}

/* ---- fixed-width fields ------------------------------------------------------ */

Test(compress_bitio, bits_are_lsb_first_little_endian)
{
    uint8_t buf[8];
    cmp_bitw w;
    cmp_bitw_init(&w, buf, sizeof buf);
    cmp_bitw_bits(&w, 1, 1);      /* bit 0 */
    cmp_bitw_bits(&w, 0x5, 3);    /* bits 1..3: 1,0,1 */
    cmp_bitw_bits(&w, 0xabc, 12); /* bits 4..15 */
    cmp_bitw_bits(&w, 0xff, 0);   /* nothing */
    cmp_bitw_bits(&w, 0x3, 1);    /* only the low bit counts */
    cr_assert_eq(cmp_bitw_finish(&w), 3);
    cr_assert_eq(buf[0], 0x1 | 0x5 << 1 | 0xc << 4);
    cr_assert_eq(buf[1], 0xab);
    cr_assert_eq(buf[2], 0x01);
}

Test(compress_bitio, bits_every_width_at_every_alignment)
{
    for (int align = 0; align < 64; align++)
        for (int width = 0; width <= 64; width++) {
            uint64_t v = width ? rnd() >> (64 - width) : 0;
            item items[3] = {{C_BITS, align, rnd() >> (64 - (align ? align : 1)) & ((1ULL << align) - 1)},
                             {C_BITS, width, v},
                             {C_BITS, 64, ~0ULL}};
            roundtrip(items, 3, width == 64 || align == 63);
        }
}

Test(compress_bitio, all_ones_and_all_zeros_64)
{
    item items[6] = {{C_BITS, 64, 0}, {C_BITS, 64, ~0ULL}, {C_BITS, 7, 0x7f},
                     {C_BITS, 64, ~0ULL}, {C_BITS, 64, 0}, {C_BITS, 64, 1ULL << 63}};
    roundtrip(items, 6, 1);
}

/* ---- unary, gamma, delta, rice ------------------------------------------------ */

Test(compress_bitio, known_gamma_and_delta_codes)
{
    /* gamma: z zeros, a one, z low bits. 1 -> "1"; 2 -> "0 1 0"; 3 -> "0 1 1"; 4 -> "00 1 00" */
    struct { uint64_t v; uint32_t bits; int n; } g[] = {{1, 0x1, 1}, {2, 0x2, 3}, {3, 0x6, 3}, {4, 0x4, 5}, {5, 0xc, 5},
                                                        {7, 0x1c, 5}, {8, 0x8, 7}};
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        uint8_t buf[8] = {0};
        cmp_bitw w;
        cmp_bitw_init(&w, buf, sizeof buf);
        cmp_bitw_gamma(&w, g[i].v);
        cr_assert_eq((int)bits_written(&w), g[i].n, "gamma(%llu)", (unsigned long long)g[i].v);
        cmp_bitw_finish(&w);
        cr_assert_eq(buf[0], g[i].bits, "gamma(%llu): 0x%x", (unsigned long long)g[i].v, buf[0]);
    }
    /* delta(1) = gamma(1) = "1"; delta(2) = gamma(2) "010" then 1 low bit "0" */
    uint8_t buf[8] = {0};
    cmp_bitw w;
    cmp_bitw_init(&w, buf, sizeof buf);
    cmp_bitw_delta(&w, 2);
    cr_assert_eq(bits_written(&w), 4);
    cmp_bitw_finish(&w);
    cr_assert_eq(buf[0], 0x2);
    /* unary(3) = "1110"; rice(13, 2) = unary(3) then 01 */
    cmp_bitw_init(&w, buf, sizeof buf);
    cmp_bitw_rice(&w, 13, 2);
    cr_assert_eq(bits_written(&w), 6);
    cmp_bitw_finish(&w);
    cr_assert_eq(buf[0], 0x7 | 0x1 << 4);
}

Test(compress_bitio, bit_length_helpers)
{
    cr_assert_eq(cmp_gamma_bits(1), 1);
    cr_assert_eq(cmp_gamma_bits(2), 3);
    cr_assert_eq(cmp_gamma_bits(3), 3);
    cr_assert_eq(cmp_gamma_bits(4), 5);
    cr_assert_eq(cmp_gamma_bits(~0ULL), 127);
    cr_assert_eq(cmp_delta_bits(1), 1);
    cr_assert_eq(cmp_delta_bits(2), 4);
    cr_assert_eq(cmp_delta_bits(16), 5 + 4);  /* 5 bits: gamma(5) = 5 bits, then 4 */
    cr_assert_eq(cmp_delta_bits(~0ULL), 13 + 63); /* gamma(64) = 13 bits */
    uint64_t v[256];
    size_t n = edge_values(v);
    for (size_t i = 0; i < n; i++) {
        if (!v[i])
            continue;
        uint8_t buf[64];
        cmp_bitw w;
        cmp_bitw_init(&w, buf, sizeof buf);
        cmp_bitw_gamma(&w, v[i]);
        cr_assert_eq(bits_written(&w), (size_t)cmp_gamma_bits(v[i]));
        cmp_bitw_init(&w, buf, sizeof buf);
        cmp_bitw_delta(&w, v[i]);
        cr_assert_eq(bits_written(&w), (size_t)cmp_delta_bits(v[i]));
        cr_assert_leq(cmp_delta_bits(v[i]), cmp_gamma_bits(v[i]) + 1 + 2 * (v[i] > 1)); /* sanity: delta is never much worse */
    }
}

Test(compress_bitio, codes_roundtrip_edge_values)
{
    uint64_t v[256];
    size_t n = edge_values(v);
    item items[1024];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i]) {
            items[m++] = (item){C_GAMMA, 0, v[i]};
            items[m++] = (item){C_DELTA, 0, v[i]};
        }
        items[m++] = (item){C_BITS, 64, v[i]};
        if (v[i] < 300)
            items[m++] = (item){C_UNARY, 0, v[i]};
        /* Rice with the k that keeps the quotient small, and k = 0 for small values */
        int k = v[i] ? 63 - __builtin_clzll(v[i]) : 0;
        items[m++] = (item){C_RICE, k, v[i]};
        if (v[i] < 300)
            items[m++] = (item){C_RICE, 0, v[i]};
    }
    roundtrip(items, m, 1);
}

Test(compress_bitio, unary_lengths_across_word_boundaries)
{
    item items[400];
    size_t m = 0;
    for (uint64_t q = 0; q < 200; q++) {
        items[m++] = (item){C_UNARY, 0, q};
        items[m++] = (item){C_BITS, (int)(q % 7), q % 7 ? rnd() >> (64 - q % 7) : 0};
    }
    roundtrip(items, m, 0);
}

Test(compress_bitio, random_sequences)
{
    for (int rep = 0; rep < 200; rep++) {
        item items[300];
        size_t n = 1 + rnd() % 300;
        for (size_t i = 0; i < n; i++)
            items[i] = random_item();
        roundtrip(items, n, rep < 20);
    }
}

/* ---- writer limits --------------------------------------------------------------- */

Test(compress_bitio, writer_never_writes_past_cap)
{
    for (size_t cap = 0; cap < 40; cap++) {
        uint8_t buf[64];
        memset(buf, 0xa5, sizeof buf);
        cmp_bitw w;
        cmp_bitw_init(&w, buf, cap);
        size_t total = 0;
        for (int i = 0; i < 20; i++) { /* 20 * 13 bits = 33 bytes */
            cmp_bitw_bits(&w, 0x1fff, 13);
            total += 13;
        }
        long len = cmp_bitw_finish(&w);
        if (cap >= (total + 7) / 8)
            cr_assert_eq(len, (long)((total + 7) / 8));
        else
            cr_assert_eq(len, -ENOSPC, "cap %zu len %ld", cap, len);
        for (size_t i = cap; i < sizeof buf; i++)
            cr_assert_eq(buf[i], 0xa5, "cap %zu: byte %zu written", cap, i);
    }
}

Test(compress_bitio, writer_huge_unary_stops_at_cap)
{
    uint8_t buf[32];
    cmp_bitw w;
    cmp_bitw_init(&w, buf, sizeof buf);
    cmp_bitw_unary(&w, 1ULL << 62); /* would be 2^59 bytes: must return, not spin */
    cr_assert_eq(cmp_bitw_finish(&w), -ENOSPC);
    cmp_bitw_init(&w, buf, sizeof buf);
    cmp_bitw_rice(&w, ~0ULL, 0);
    cr_assert_eq(cmp_bitw_finish(&w), -ENOSPC);
}

Test(compress_bitio, writer_rejects_unencodable)
{
    uint8_t buf[32];
    cmp_bitw w;
    cmp_bitw_init(&w, buf, sizeof buf);
    cmp_bitw_gamma(&w, 0);
    cr_assert_eq(cmp_bitw_finish(&w), -ENOSPC, "gamma(0) poisons the stream");
    cmp_bitw_init(&w, buf, sizeof buf);
    cmp_bitw_delta(&w, 0);
    cr_assert_eq(cmp_bitw_finish(&w), -ENOSPC);
    cmp_bitw_init(&w, buf, sizeof buf);
    cmp_bitw_rice(&w, 5, 64);
    cr_assert_eq(cmp_bitw_finish(&w), -ENOSPC);
    cmp_bitw_init(&w, NULL, 0);
    cr_assert_eq(cmp_bitw_finish(&w), 0, "an empty stream into no buffer is fine");
}

/* ---- hostile input ------------------------------------------------------------------ */

Test(compress_bitio, readers_reject_hostile_input)
{
    uint64_t v;
    cmp_bitr r;
    uint8_t *zeros = calloc(64, 1), *ones = malloc(1000);
    memset(ones, 0xff, 1000);

    /* 64 or more zeros cannot start a gamma code (the value would not fit 64 bits) */
    cmp_bitr_init(&r, zeros, 64);
    cr_assert_eq(cmp_bitr_gamma(&r, &v), -EBADMSG);
    cmp_bitr_init(&r, zeros, 64);
    cr_assert_eq(cmp_bitr_delta(&r, &v), -EBADMSG);
    /* 63 zeros then the one and 63 bits is the largest valid gamma code */
    uint8_t big[16] = {0};
    big[7] = 0x80; /* bit 63 */
    memset(big + 8, 0xff, 8);
    uint8_t *in = exact_copy(big, 16);
    cmp_bitr_init(&r, in, 16);
    cr_assert_eq(cmp_bitr_gamma(&r, &v), 0);
    cr_assert_eq(v, ~0ULL);
    free(in);

    /* unary running off the end */
    cmp_bitr_init(&r, ones, 1000);
    cr_assert_eq(cmp_bitr_unary(&r, &v), -EBADMSG);
    cmp_bitr_init(&r, ones, 1000);
    cr_assert_eq(cmp_bitr_rice(&r, 3, &v), -EBADMSG);

    /* rice quotient that overflows when shifted by k */
    uint8_t buf[32];
    cmp_bitw w;
    cmp_bitw_init(&w, buf, sizeof buf);
    cmp_bitw_unary(&w, 2);
    cmp_bitw_bits(&w, 0, 63);
    long len = cmp_bitw_finish(&w);
    in = exact_copy(buf, (size_t)len);
    cmp_bitr_init(&r, in, (size_t)len);
    cr_assert_eq(cmp_bitr_rice(&r, 63, &v), -EBADMSG);
    free(in);

    /* delta whose length prefix says more than 64 bits */
    cmp_bitw_init(&w, buf, sizeof buf);
    cmp_bitw_gamma(&w, 65);
    cmp_bitw_bits(&w, ~0ULL, 64);
    len = cmp_bitw_finish(&w);
    in = exact_copy(buf, (size_t)len);
    cmp_bitr_init(&r, in, (size_t)len);
    cr_assert_eq(cmp_bitr_delta(&r, &v), -EBADMSG);
    free(in);

    /* bad arguments are not malformed input */
    cmp_bitr_init(&r, ones, 8);
    cr_assert_eq(cmp_bitr_bits(&r, 65, &v), -EINVAL);
    cr_assert_eq(cmp_bitr_rice(&r, 64, &v), -EINVAL);

    /* empty input */
    cmp_bitr_init(&r, NULL, 0);
    cr_assert_eq(cmp_bitr_bits(&r, 1, &v), -EBADMSG);
    cr_assert_eq(cmp_bitr_bits(&r, 0, &v), 0, "zero bits are always there");
    cr_assert_eq(v, 0);
    cr_assert_eq(cmp_bitr_gamma(&r, &v), -EBADMSG);
    cr_assert_eq(cmp_bitr_unary(&r, &v), -EBADMSG);
    cr_assert_eq(cmp_bitr_consumed(&r), 0);
    free(zeros);
    free(ones);
}

Test(compress_bitio, random_bytes_never_overrun)
{
    /* Random garbage through every reader: any result is fine except reading past len. */
    for (int rep = 0; rep < 2000; rep++) {
        size_t len = rnd() % 24;
        uint8_t src[24];
        for (size_t i = 0; i < len; i++)
            src[i] = (uint8_t)(rnd() & (rep & 1 ? 0x0f : 0xff)); /* half of them zero-heavy */
        uint8_t *in = exact_copy(src, len);
        cmp_bitr r;
        cmp_bitr_init(&r, in, len);
        for (int i = 0; i < 200; i++) {
            item it = random_item();
            uint64_t v;
            int rc = get_item(&r, &it, &v);
            cr_assert(rc == 0 || rc == -EBADMSG);
            cr_assert_leq(cmp_bitr_consumed(&r), len);
            if (rc)
                break;
        }
        free(in);
    }
}

/* ---- varint, f32, u64 ---------------------------------------------------------------- */

Test(compress_bitio, varint_roundtrip_and_lengths)
{
    uint64_t v[256];
    size_t n = edge_values(v);
    for (size_t i = 0; i < n; i++) {
        uint8_t buf[10];
        size_t len = cmp_varint_put(buf, v[i]);
        size_t expect = 1;
        for (uint64_t x = v[i] >> 7; x; x >>= 7)
            expect++;
        cr_assert_eq(len, expect, "varint(%llu) is %zu bytes", (unsigned long long)v[i], len);
        uint8_t *in = exact_copy(buf, len);
        size_t used = 0;
        uint64_t got = 0;
        cr_assert_eq(cmp_varint_get(in, len, &used, &got), 0);
        cr_assert_eq(used, len);
        cr_assert_eq(got, v[i]);
        for (size_t cut = 0; cut < len; cut++)
            cr_assert_eq(cmp_varint_get(in, cut, &used, &got), -EBADMSG, "truncated varint accepted");
        free(in);
    }
    uint8_t b[10];
    cr_assert_eq(cmp_varint_put(b, 300), 2);
    cr_assert_eq(b[0], 0xac);
    cr_assert_eq(b[1], 0x02);
}

Test(compress_bitio, varint_rejects_overlong)
{
    size_t used;
    uint64_t v;
    const uint8_t zero_pad[] = {0x80, 0x00};
    const uint8_t one_pad[] = {0x81, 0x80, 0x00};
    const uint8_t too_big[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
    const uint8_t eleven[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x81, 0x00};
    const uint8_t max[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    cr_assert_eq(cmp_varint_get(zero_pad, sizeof zero_pad, &used, &v), -EBADMSG);
    cr_assert_eq(cmp_varint_get(one_pad, sizeof one_pad, &used, &v), -EBADMSG);
    cr_assert_eq(cmp_varint_get(too_big, sizeof too_big, &used, &v), -EBADMSG);
    cr_assert_eq(cmp_varint_get(eleven, sizeof eleven, &used, &v), -EBADMSG);
    cr_assert_eq(cmp_varint_get(max, sizeof max, &used, &v), 0);
    cr_assert_eq(v, ~0ULL);
    cr_assert_eq(used, 10);
    const uint8_t single_zero[] = {0x00, 0x55};
    cr_assert_eq(cmp_varint_get(single_zero, sizeof single_zero, &used, &v), 0, "0 is one byte 0x00");
    cr_assert_eq(used, 1);
    cr_assert_eq(v, 0);
}

Test(compress_bitio, f32_and_u64_little_endian)
{
    uint8_t b[8];
    cmp_f32_put(b, 1.0f);
    cr_assert_eq(b[0], 0x00);
    cr_assert_eq(b[1], 0x00);
    cr_assert_eq(b[2], 0x80);
    cr_assert_eq(b[3], 0x3f);
    cr_assert_eq(cmp_f32_get(b), 1.0f);
    cmp_f32_put(b, -0.0f);
    cr_assert_eq(b[3], 0x80);
    cmp_u64_put(b, 0x0102030405060708ULL);
    cr_assert_eq(b[0], 0x08);
    cr_assert_eq(b[7], 0x01);
    cr_assert_eq(cmp_u64_get(b), 0x0102030405060708ULL);
    for (int i = 0; i < 1000; i++) {
        uint64_t x = rnd();
        cmp_u64_put(b, x);
        cr_assert_eq(cmp_u64_get(b), x);
        uint32_t u = (uint32_t)x;
        float f, g;
        memcpy(&f, &u, 4);
        cmp_f32_put(b, f);
        g = cmp_f32_get(b);
        cr_assert_eq(memcmp(&f, &g, 4), 0, "bits kept, NaN payloads included");
    }
}

/* ---- sign planes ------------------------------------------------------------------------ */

Test(compress_bitio, signs_pack_matches_bit_by_bit)
{
    for (size_t n = 0; n < 200; n++) {
        float *x = calloc(n ? n : 1, sizeof *x);
        for (size_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)rnd();
            if (i % 7 == 3)
                u &= 0x80000000u; /* +-0.0: the sign bit alone decides */
            memcpy(&x[i], &u, 4);
        }
        size_t nb = (n + 7) / 8;
        uint8_t *out = malloc(nb ? nb : 1); /* exactly sized: ASan catches a write past it */
        memset(out, 0xa5, nb);
        cmp_signs_pack(x, n, out);
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            cr_assert_eq(out[i / 8] >> (i % 8) & 1, u >> 31, "n %zu value %zu", n, i);
        }
        if (n % 8)
            cr_assert_eq(out[n / 8] >> (n % 8), 0, "n %zu: padding bits are zero", n);
        free(out);
        free(x);
    }
}

/* A Rice code and the bits after it in one call, both ways: the writer's one
 * field is the two calls' bytes exactly, and the reader's one-refill path
 * gives what the two reads give, for short and long quotients at every
 * alignment and for every truncation of the stream. */
Test(compress_bitio, rice_then_equals_rice_and_bits)
{
    enum { N = 600 };
    static uint8_t a[8 * N + 64], b[8 * N + 64];
    uint64_t vs[N], es[N];
    int ks[N], xs[N];
    uint64_t rng = 77;
    for (int i = 0; i < N; i++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        ks[i] = (int)(rng >> 58) % 32;          /* 0..31 */
        xs[i] = (int)(rng >> 40) % 3;           /* 0, 1, 2 extra bits */
        uint64_t q = i % 7 == 0 ? (rng >> 20) % 150 : (rng >> 20) % 5; /* some quotients past a word */
        vs[i] = q << ks[i] | ((rng >> 8) & ((1ULL << ks[i]) - 1));
        es[i] = rng >> 61;
    }
    cmp_bitw wa, wb;
    cmp_bitw_init(&wa, a, sizeof a);
    cmp_bitw_init(&wb, b, sizeof b);
    for (int i = 0; i < N; i++) {
        cmp_bitw_rice(&wa, vs[i], ks[i]);
        cmp_bitw_bits(&wa, es[i], xs[i]);
        cmp_bitw_rice_then(&wb, vs[i], ks[i], es[i], xs[i]);
    }
    long la = cmp_bitw_finish(&wa), lb = cmp_bitw_finish(&wb);
    cr_assert_gt(la, 0);
    cr_assert_eq(la, lb);
    cr_assert_arr_eq(a, b, (size_t)la);
    for (long cut = la; cut >= 0; cut -= cut > la - 16 ? 1 : 37) {
        cmp_bitr ra, rb;
        cmp_bitr_init(&ra, a, (size_t)cut);
        cmp_bitr_init(&rb, a, (size_t)cut);
        for (int i = 0; i < N; i++) {
            uint64_t v1 = 0, e1 = 0, v2 = 0, e2 = 0;
            int r1 = cmp_bitr_rice(&ra, ks[i], &v1);
            if (r1 == 0)
                r1 = cmp_bitr_bits(&ra, xs[i], &e1);
            int r2 = cmp_bitr_rice_then(&rb, ks[i], xs[i], &v2, &e2);
            cr_assert_eq(r1, r2, "code %d of a stream cut to %ld bytes", i, cut);
            if (r1 < 0)
                break;
            cr_assert(v1 == v2 && e1 == e2 && v1 == vs[i] && e1 == (es[i] & ((1ULL << xs[i]) - 1)), "code %d", i);
        }
    }
}
