/* Bit-level I/O for the codecs: a writer into a caller-owned buffer and a
 * bounds-checked reader, with the integer codes the codecs use.
 *
 *   cmp_bitw w;
 *   cmp_bitw_init(&w, out, cap);
 *   cmp_bitw_bits(&w, value, 3);        // low 3 bits, LSB first
 *   cmp_bitw_rice(&w, gap, k);          // Golomb-Rice with parameter 2^k
 *   long len = cmp_bitw_finish(&w);     // bytes used, or -ENOSPC if cap was too small
 *
 *   cmp_bitr r;
 *   cmp_bitr_init(&r, in, len);
 *   uint64_t v;
 *   if (cmp_bitr_rice(&r, k, &v) < 0) return -EBADMSG;   // never reads past len
 *
 * Bits are packed LSB-first into little-endian bytes. Writers never write past
 * cap (they latch an overflow flag that finish reports); readers return
 * -EBADMSG instead of reading past the end, and reject codes that would
 * overflow 64 bits, so hostile input cannot make them loop or overrun.
 */
#ifndef COMPRESS_BITIO_H
#define COMPRESS_BITIO_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cmp_bitw {
    uint8_t *buf;
    size_t cap, pos; /* pos: bytes completed */
    uint64_t acc;    /* pending bits */
    int nacc;        /* number of pending bits (< 64) */
    int overflow;
} cmp_bitw;

typedef struct cmp_bitr {
    const uint8_t *buf;
    size_t len, pos;
    uint64_t acc;
    int nacc;
} cmp_bitr;

void cmp_bitw_init(cmp_bitw *w, uint8_t *buf, size_t cap);
static inline void cmp_bitw_bits(cmp_bitw *w, uint64_t value, int nbits); /* 0 <= nbits <= 64 */
void cmp_bitw_unary(cmp_bitw *w, uint64_t q);                /* q ones then a zero */
void cmp_bitw_gamma(cmp_bitw *w, uint64_t v);                /* Elias gamma, v >= 1 */
void cmp_bitw_delta(cmp_bitw *w, uint64_t v);                /* Elias delta, v >= 1 */
void cmp_bitw_rice(cmp_bitw *w, uint64_t v, int k);          /* v >> k in unary, then k low bits; 0 <= k <= 63 */
/* cmp_bitw_rice(w, v, k) then cmp_bitw_bits(w, e, extra), the same bits, in
 * one field when they fit 64 (a position gap and its sign, say) */
static inline void cmp_bitw_rice_then(cmp_bitw *w, uint64_t v, int k, uint64_t e, int extra);
/* Gamma/delta of 0 and Rice with k outside 0..63 are caller bugs: they latch
 * the overflow flag, so finish() fails instead of writing an undecodable stream.
 * Bit order of gamma (LSB-first): floor(log2 v) zeros, a one, then the low
 * floor(log2 v) bits of v; delta is gamma(bit length of v) then those low bits.
 * compress/FORMAT.md ("Bit I/O") is the normative description. */
/* Pads to a byte boundary; returns bytes written, or -ENOSPC. */
long cmp_bitw_finish(cmp_bitw *w);

void cmp_bitr_init(cmp_bitr *r, const uint8_t *buf, size_t len);
static inline int cmp_bitr_bits(cmp_bitr *r, int nbits, uint64_t *v); /* 0 <= nbits <= 64, else -EINVAL */
static inline int cmp_bitr_unary(cmp_bitr *r, uint64_t *q); /* -EBADMSG past the end or beyond 2^32 ones */
int cmp_bitr_gamma(cmp_bitr *r, uint64_t *v);
int cmp_bitr_delta(cmp_bitr *r, uint64_t *v);
static inline int cmp_bitr_rice(cmp_bitr *r, int k, uint64_t *v); /* -EINVAL for k outside 0..63 */
/* cmp_bitr_rice(r, k, v) then cmp_bitr_bits(r, extra, e), 0 <= extra <= 56;
 * one refill when the whole code is already in the register */
static inline int cmp_bitr_rice_then(cmp_bitr *r, int k, int extra, uint64_t *v, uint64_t *e);
/* Bytes consumed so far, counting a partly read byte as whole. */
size_t cmp_bitr_consumed(const cmp_bitr *r);

/* Byte-aligned helpers for headers (little-endian). */
size_t cmp_varint_put(uint8_t *out, uint64_t v);                          /* <= 10 bytes */
/* LEB128; -EBADMSG if truncated, overlong (one encoding per value) or beyond 64 bits */
int cmp_varint_get(const uint8_t *in, size_t len, size_t *used, uint64_t *v);
void cmp_f32_put(uint8_t *out, float v);
float cmp_f32_get(const uint8_t *in);
void cmp_u64_put(uint8_t *out, uint64_t v);
uint64_t cmp_u64_get(const uint8_t *in);

/* The sign bits of x[0..n), LSB-first, into ceil(n/8) bytes (bit i set when
 * x[i] has its sign bit set, -0.0 included); unused high bits of the last
 * byte are zero. A bit plane, 16 floats per step on SSE2. */
void cmp_signs_pack(const float *x, size_t n, uint8_t *out);

/* Bits of the Elias gamma code of v >= 1: 2 floor(log2 v) + 1 (0 for v = 0). */
int cmp_gamma_bits(uint64_t v);
/* Bits of the Elias delta code of v >= 1: gamma_bits(floor(log2 v) + 1) + floor(log2 v). */
int cmp_delta_bits(uint64_t v);

/* ---- what the inline writers and readers below (and bitio.c, the codecs)
 * share ---- */

static inline uint64_t cmp_low_mask_(int nbits) { return nbits >= 64 ? ~0ULL : (1ULL << nbits) - 1; }

/* Explicit byte order so the format does not depend on the host; compilers
 * turn these into a single load/store on little-endian machines. */
static inline void cmp_store_le64_(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t cmp_load_le64_(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* ---- the writer's per-value calls, inline (an encoder's inner loop: as
 * calls they were a fifth of a sparse codec's encoding) ---- */

/* Called only with 64 complete bits, so "does it fit" is exact: 8 more bytes
 * or nothing. After an overflow nothing more is stored; finish() reports it. */
static inline void cmp_bitw_emit_(cmp_bitw *w, uint64_t word)
{
    if (!w->overflow && w->cap - w->pos >= 8) {
        cmp_store_le64_(w->buf + w->pos, word);
        w->pos += 8;
    } else {
        w->overflow = 1;
    }
}

static inline void cmp_bitw_bits(cmp_bitw *w, uint64_t value, int nbits)
{
    if (nbits <= 0)
        return;
    if (nbits > 64)
        nbits = 64;
    value &= cmp_low_mask_(nbits);
    w->acc |= value << w->nacc; /* nacc < 64 always */
    int total = w->nacc + nbits;
    if (total < 64) {
        w->nacc = total;
        return;
    }
    cmp_bitw_emit_(w, w->acc);
    /* The bits of value that did not fit; shifting by 64 would be undefined. */
    w->acc = w->nacc ? value >> (64 - w->nacc) : 0;
    w->nacc = total - 64;
}

static inline void cmp_bitw_rice_then(cmp_bitw *w, uint64_t v, int k, uint64_t e, int extra)
{
    if (k < 0 || k > 63 || extra < 0 || extra > 64) {
        w->overflow = 1;
        return;
    }
    const uint64_t q = v >> k;
    if (q + 1 + (uint64_t)k + (uint64_t)extra <= 64) { /* one field: q ones, a zero, k low bits of v, e */
        const int at = (int)q + 1;
        uint64_t field = cmp_low_mask_((int)q);
        if (k)
            field |= (v & cmp_low_mask_(k)) << at;
        if (extra)
            field |= (e & cmp_low_mask_(extra)) << (at + k);
        cmp_bitw_bits(w, field, at + k + extra);
        return;
    }
    cmp_bitw_rice(w, v, k);
    cmp_bitw_bits(w, e, extra);
}

/* ---- the readers the decoders call per value, inline (a decoder's inner
 * loop is a handful of these; as calls they were a quarter of a simulated
 * peer's gossip time). Invariant: acc holds the next nacc unread bits at the
 * bottom; bits above nacc are either zero or the true stream bits that follow
 * (the word-wide refill loads a few bytes early), so OR-ing them in again is
 * harmless. */

/* Afterwards nacc >= 57, or every byte of the input is in acc. */
static inline void cmp_bitr_refill_(cmp_bitr *r)
{
    if (r->nacc > 56)
        return;
    if (r->len - r->pos >= 8) {
        r->acc |= cmp_load_le64_(r->buf + r->pos) << r->nacc;
        r->pos += (size_t)(63 - r->nacc) >> 3;
        r->nacc |= 56;
        return;
    }
    while (r->nacc <= 56 && r->pos < r->len) {
        r->acc |= (uint64_t)r->buf[r->pos++] << r->nacc;
        r->nacc += 8;
    }
}

static inline void cmp_bitr_skip_(cmp_bitr *r, int nbits) /* nbits <= nacc */
{
    r->acc = nbits >= 64 ? 0 : r->acc >> nbits;
    r->nacc -= nbits;
}

static inline int cmp_bitr_bits(cmp_bitr *r, int nbits, uint64_t *v)
{
    if (nbits < 0 || nbits > 64)
        return -EINVAL;
    if (nbits > 56) { /* more than one refill guarantees: two halves */
        uint64_t lo, hi;
        int rc = cmp_bitr_bits(r, 32, &lo);
        if (rc == 0)
            rc = cmp_bitr_bits(r, nbits - 32, &hi);
        if (rc == 0)
            *v = lo | hi << 32;
        return rc;
    }
    cmp_bitr_refill_(r);
    if (r->nacc < nbits)
        return -EBADMSG;
    *v = r->acc & cmp_low_mask_(nbits);
    cmp_bitr_skip_(r, nbits);
    return 0;
}

static inline int cmp_bitr_unary(cmp_bitr *r, uint64_t *q)
{
    uint64_t n = 0;
    for (;;) {
        cmp_bitr_refill_(r);
        if (r->nacc == 0)
            return -EBADMSG;
        uint64_t zeros = ~r->acc & cmp_low_mask_(r->nacc);
        if (zeros) {
            int c = __builtin_ctzll(zeros);
            n += (uint64_t)c;
            if (n > (1ULL << 32))
                return -EBADMSG;
            cmp_bitr_skip_(r, c + 1);
            *q = n;
            return 0;
        }
        n += (uint64_t)r->nacc;
        if (n > (1ULL << 32))
            return -EBADMSG;
        cmp_bitr_skip_(r, r->nacc);
    }
}

static inline int cmp_bitr_rice(cmp_bitr *r, int k, uint64_t *v)
{
    uint64_t q, low = 0;
    int rc;
    if (k < 0 || k > 63)
        return -EINVAL;
    if ((rc = cmp_bitr_unary(r, &q)) < 0)
        return rc;
    if (k > 0 && q >> (64 - k))
        return -EBADMSG; /* q << k would not fit 64 bits */
    if ((rc = cmp_bitr_bits(r, k, &low)) < 0)
        return rc;
    *v = q << k | low;
    return 0;
}

static inline int cmp_bitr_rice_then(cmp_bitr *r, int k, int extra, uint64_t *v, uint64_t *e)
{
    if (k < 0 || k > 63 || extra < 0 || extra > 56)
        return -EINVAL;
    cmp_bitr_refill_(r);
    const uint64_t zeros = ~r->acc & cmp_low_mask_(r->nacc);
    if (zeros) {
        const int q = __builtin_ctzll(zeros), total = q + 1 + k + extra;
        if (total <= r->nacc && !(k > 0 && (uint64_t)q >> (64 - k))) {
            const uint64_t rest = q + 1 >= 64 ? 0 : r->acc >> (q + 1);
            *v = (uint64_t)q << k | (rest & cmp_low_mask_(k));
            *e = (k >= 64 ? 0 : rest >> k) & cmp_low_mask_(extra);
            cmp_bitr_skip_(r, total);
            return 0;
        }
    }
    int rc = cmp_bitr_rice(r, k, v);
    if (rc == 0)
        rc = cmp_bitr_bits(r, extra, e);
    return rc;
}

#endif
