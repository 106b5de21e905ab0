/* Bit I/O for the codecs: LSB-first packing, bounds-checked reading, and the
 * integer codes (unary, Elias gamma/delta, Golomb-Rice, LEB128 varints).
 *
 * Both ends keep up to 64 bits in a register and touch memory a whole 64-bit
 * word at a time when they can, so a codec that writes short fields pays a
 * shift and an OR per field, not a loop over bits. */
#include <errno.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "compress/bitio.h"

static inline int floor_log2(uint64_t v) { return 63 - __builtin_clzll(v); } /* v >= 1 */

/* ---- writer ---- */

void cmp_bitw_init(cmp_bitw *w, uint8_t *buf, size_t cap)
{
    w->buf = buf;
    w->cap = buf ? cap : 0;
    w->pos = 0;
    w->acc = 0;
    w->nacc = 0;
    w->overflow = 0;
}

void cmp_bitw_unary(cmp_bitw *w, uint64_t q)
{
    /* A hostile or buggy q (say 2^63) must not spin: stop once the buffer is full. */
    while (q >= 64 && !w->overflow) {
        cmp_bitw_bits(w, ~0ULL, 64);
        q -= 64;
    }
    if (w->overflow)
        return;
    /* q < 64 ones then a zero: one field of q + 1 <= 64 bits. */
    cmp_bitw_bits(w, cmp_low_mask_((int)q), (int)q + 1);
}

/* LSB-first Elias gamma: z = floor(log2 v) zeros, a one (v's leading bit),
 * then v's low z bits. As one field that is (2 * (v - 2^z) + 1) << z, so a
 * decoder finds z with a count-trailing-zeros. */
void cmp_bitw_gamma(cmp_bitw *w, uint64_t v)
{
    if (v == 0) { /* not encodable: poison the stream so finish() fails loudly */
        w->overflow = 1;
        return;
    }
    int z = floor_log2(v);
    uint64_t rest = v & cmp_low_mask_(z);
    if (z <= 31) {
        cmp_bitw_bits(w, ((rest << 1) | 1) << z, 2 * z + 1);
    } else {
        cmp_bitw_bits(w, 1ULL << z, z + 1);
        cmp_bitw_bits(w, rest, z);
    }
}

/* Elias delta: gamma(number of bits of v), then v's low bits below the leading one. */
void cmp_bitw_delta(cmp_bitw *w, uint64_t v)
{
    if (v == 0) {
        w->overflow = 1;
        return;
    }
    int z = floor_log2(v);
    cmp_bitw_gamma(w, (uint64_t)z + 1);
    cmp_bitw_bits(w, v & cmp_low_mask_(z), z);
}

void cmp_bitw_rice(cmp_bitw *w, uint64_t v, int k)
{
    if (k < 0 || k > 63) {
        w->overflow = 1;
        return;
    }
    cmp_bitw_unary(w, v >> k);
    cmp_bitw_bits(w, v, k);
}

long cmp_bitw_finish(cmp_bitw *w)
{
    size_t nbytes = (size_t)(w->nacc + 7) / 8;
    if (w->overflow || w->cap - w->pos < nbytes)
        return -ENOSPC;
    for (size_t i = 0; i < nbytes; i++)
        w->buf[w->pos + i] = (uint8_t)(w->acc >> (8 * i));
    w->pos += nbytes;
    w->acc = 0;
    w->nacc = 0;
    return (long)w->pos;
}

/* ---- reader (the per-value readers are inline in bitio.h, with the invariant) ---- */

void cmp_bitr_init(cmp_bitr *r, const uint8_t *buf, size_t len)
{
    r->buf = buf;
    r->len = buf ? len : 0;
    r->pos = 0;
    r->acc = 0;
    r->nacc = 0;
}

/* Number of zeros before the next one bit; more than 63 cannot start a
 * 64-bit code, so the count stops there instead of scanning hostile zeros. */
static int bitr_zeros(cmp_bitr *r, int *z)
{
    int n = 0;
    for (;;) {
        cmp_bitr_refill_(r);
        if (r->nacc == 0)
            return -EBADMSG;
        uint64_t ones = r->acc & cmp_low_mask_(r->nacc);
        if (ones) {
            int c = __builtin_ctzll(ones);
            if (n + c > 63)
                return -EBADMSG;
            cmp_bitr_skip_(r, c + 1);
            *z = n + c;
            return 0;
        }
        n += r->nacc;
        if (n > 63)
            return -EBADMSG;
        cmp_bitr_skip_(r, r->nacc);
    }
}

int cmp_bitr_gamma(cmp_bitr *r, uint64_t *v)
{
    int z, rc;
    uint64_t rest = 0;
    if ((rc = bitr_zeros(r, &z)) < 0 || (rc = cmp_bitr_bits(r, z, &rest)) < 0)
        return rc;
    *v = 1ULL << z | rest;
    return 0;
}

int cmp_bitr_delta(cmp_bitr *r, uint64_t *v)
{
    uint64_t nb, rest = 0;
    int rc;
    if ((rc = cmp_bitr_gamma(r, &nb)) < 0)
        return rc;
    if (nb > 64)
        return -EBADMSG;
    if ((rc = cmp_bitr_bits(r, (int)nb - 1, &rest)) < 0)
        return rc;
    *v = 1ULL << (nb - 1) | rest;
    return 0;
}

size_t cmp_bitr_consumed(const cmp_bitr *r)
{
    /* pos counts loaded bytes; the nacc bits still in acc are unread. */
    size_t bits = r->pos * 8 - (size_t)r->nacc;
    return (bits + 7) / 8;
}

/* ---- bit planes ---- */

void cmp_signs_pack(const float *x, size_t n, uint8_t *out)
{
    size_t i = 0;
#if defined(__SSE2__)
    /* Signed saturation keeps the sign, so two packs take 16 float sign bits
     * to 16 byte sign bits for one movemask; plain C does not vectorise this. */
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(x + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(x + i + 4));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(x + i + 8));
        __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(x + i + 12));
        int m = _mm_movemask_epi8(_mm_packs_epi16(_mm_packs_epi32(a, b), _mm_packs_epi32(c, d)));
        out[i / 8] = (uint8_t)m;
        out[i / 8 + 1] = (uint8_t)(m >> 8);
    }
#endif
    for (; i < n; i += 8) {
        unsigned byte = 0;
        for (size_t k = 0; k < 8 && i + k < n; k++) {
            uint32_t u;
            memcpy(&u, x + i + k, 4);
            byte |= (u >> 31) << k;
        }
        out[i / 8] = (uint8_t)byte;
    }
}

/* ---- byte-aligned helpers ---- */

size_t cmp_varint_put(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

/* Exactly one encoding per value is accepted (no padding 0x80 ... 0x00), so a
 * message has one canonical form and a length field cannot hide extra bytes. */
int cmp_varint_get(const uint8_t *in, size_t len, size_t *used, uint64_t *v)
{
    uint64_t x = 0;
    for (size_t i = 0; i < len && i < 10; i++) {
        uint8_t b = in[i];
        if (i == 9 && b > 1)
            return -EBADMSG; /* beyond 64 bits */
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            if (b == 0 && i > 0)
                return -EBADMSG; /* overlong */
            *used = i + 1;
            *v = x;
            return 0;
        }
    }
    return -EBADMSG; /* truncated, or continuation past 10 bytes */
}

void cmp_f32_put(uint8_t *out, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    for (int i = 0; i < 4; i++)
        out[i] = (uint8_t)(u >> (8 * i));
}

float cmp_f32_get(const uint8_t *in)
{
    uint32_t u = (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 24;
    float v;
    memcpy(&v, &u, 4);
    return v;
}

void cmp_u64_put(uint8_t *out, uint64_t v) { cmp_store_le64_(out, v); }

uint64_t cmp_u64_get(const uint8_t *in) { return cmp_load_le64_(in); }

int cmp_gamma_bits(uint64_t v) { return v ? 2 * floor_log2(v) + 1 : 0; }

int cmp_delta_bits(uint64_t v)
{
    if (!v)
        return 0;
    int z = floor_log2(v);
    return cmp_gamma_bits((uint64_t)z + 1) + z;
}
