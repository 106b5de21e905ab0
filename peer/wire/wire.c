/* The message layer of peer/wire/WIRE.md: msgpack-c's packer for encoding (into
 * the caller's buffer), a bounded reader of our own for decoding. */
#include "peer/wire/wire.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include <msgpack.h>

/* Elements of each message type's array, indexed by type. The decoder
 * accepts exactly this count (more or fewer is malformed however many bytes
 * follow), so no count from the wire ever sizes anything. */
static const uint32_t wire_fields[] = {2, 12, 2, 2, 2, 2, 5, 2, 2};
#define WIRE_N_TYPES (sizeof wire_fields / sizeof *wire_fields)

const char *wire_type_name(int type)
{
    static const char *const names[] = {"AUTH",    "PUSH",          "NACK",  "HEARTBEAT",
                                        "GOODBYE", "MODEL_REQUEST", "MODEL", "ACK", "MODEL_SOON"};
    return type >= 0 && (size_t)type < WIRE_N_TYPES ? names[type] : "?";
}

/* ---- little-endian tensors ----------------------------------------------- */

/* The wire is little-endian; on a little-endian host the copies are memcpy.
 * The byte loops are the portable fallback. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define WIRE_HOST_LE 1
#else
#define WIRE_HOST_LE 0
#endif

static void put_le(uint8_t *dst, const void *src, size_t n, size_t width)
{
    if (WIRE_HOST_LE) {
        if (n)
            memcpy(dst, src, n * width);
        return;
    }
    const uint8_t *s = src;
    for (size_t i = 0; i < n; i++, dst += width, s += width) {
        uint64_t u = 0;
        if (width == 8) {
            memcpy(&u, s, 8);
        } else {
            uint32_t v;
            memcpy(&v, s, 4);
            u = v;
        }
        for (size_t b = 0; b < width; b++)
            dst[b] = (uint8_t)(u >> (8 * b));
    }
}

static void get_le(void *dst, const uint8_t *src, size_t n, size_t width)
{
    if (WIRE_HOST_LE) {
        if (n && dst != (const void *)src) /* (in place: nothing to do) */
            memcpy(dst, src, n * width);
        return;
    }
    uint8_t *d = dst;
    for (size_t i = 0; i < n; i++, d += width, src += width) {
        uint64_t u = 0;
        for (size_t b = 0; b < width; b++)
            u |= (uint64_t)src[b] << (8 * b);
        if (width == 8) {
            memcpy(d, &u, 8);
        } else {
            uint32_t v = (uint32_t)u;
            memcpy(d, &v, 4);
        }
    }
}

/* ---- the schema checks both directions share ---------------------------- */

/* WIRE.md numbers the kinds as gossip/ does; the codec passes them through. */
_Static_assert(GSP_RAW == 0 && GSP_DELTA == 1 && GSP_SYNC == 2, "PUSH kind numbers are gsp_kind's");

/* PUSH fields in array order (0 is the type); a check names the one at fault. */
enum { F_TYPE, F_ROUND, F_SEQ, F_INC, F_KIND, F_W, F_GAIN, F_STEP, F_ORIGIN, F_BASE, F_DIM, F_PAYLOAD, F_N };
static const char *const push_field_names[F_N] = {"type", "round",  "seq",  "incarnation", "kind", "w_total",
                                                  "gain", "step", "origin", "base", "dim",  "payload"};

/* A SYNC's payload (WIRE.md): r, then the count n, then every correction
 * (n = dim) or n positions, strictly ascending below dim, and their values,
 * whichever is shorter; its length exactly that. NULL if sound, else why.
 * Without the payload (a message being encoded) only its length. */
static const char *sync_check(const wire_push *p)
{
    const size_t head = p->dim * sizeof(float) + sizeof(uint32_t);
    if (p->payload_len < head)
        return "SYNC payload shorter than its reference and count";
    if (!p->payload)
        return NULL;
    uint32_t n;
    get_le(&n, p->payload + p->dim * sizeof(float), 1, sizeof n);
    if (n > p->dim || (n != p->dim && gsp_sync_dense(p->dim, n)))
        return "SYNC count is neither dim nor a list shorter than dim values";
    if (p->payload_len != gsp_sync_bytes(p->dim, n == p->dim ? p->dim : n))
        return "SYNC payload is not the length its count says";
    const uint8_t *at = p->payload + head;
    uint32_t prev = 0;
    for (size_t j = 0; n != p->dim && j < n; j++, at += sizeof(uint32_t)) {
        uint32_t i;
        get_le(&i, at, 1, sizeof i);
        if (i >= p->dim || (j && i <= prev))
            return "SYNC positions not strictly ascending below dim";
        prev = i;
    }
    return NULL;
}

/* What a receiver can check of a PUSH without looking at tensor values
 * (a NaN in a diverged peer's totals is its model, not a malformed message:
 * gossip/ and the driver decide what to do about that, and scanning dim
 * values here would cost a pass per message). Returns the field at fault
 * (and *why), or -1 if the message is sound. Each check keeps out of gossip/
 * something it would otherwise take in silently and never recover from: */
static int push_check(const wire_push *p, const char **why)
{
    /* gsp rounds count up from 0 in a long. */
    if (p->round < 0)
        return *why = "negative", F_ROUND;
    /* Sequence numbers start at 1 per edge; 0 would read as "already applied"
     * and the mass it carries would be dropped without a trace. */
    if (p->seq < 1)
        return *why = "must be >= 1", F_SEQ;
    if ((unsigned)p->kind > GSP_SYNC)
        return *why = "unknown kind", F_KIND;
    /* sigma_w is a running total of positive shares: it is > 0 from the first
     * message on. A NaN or infinity would poison the receiver's w for good. */
    if (!isfinite(p->w_total) || !(p->w_total > 0.0))
        return *why = "must be finite and > 0", F_W;
    /* gain and step multiply the shared reference, and the receiver adds
     * step * r to x: a non-finite value would make x NaN, which no later
     * message repairs. */
    if (!isfinite(p->gain))
        return *why = "not finite", F_GAIN;
    if (!isfinite(p->step))
        return *why = "not finite", F_STEP;
    /* gsp_set_codec only ever uses a consensus step in (0, 1]. */
    if (p->kind == GSP_DELTA && !(p->step > 0.0f && p->step <= 1.0f))
        return *why = "DELTA step outside (0, 1]", F_STEP;
    /* A SYNC brings what follows its base, up to its seq. */
    if (p->kind == GSP_SYNC && p->base >= p->seq)
        return *why = "SYNC base not below seq", F_BASE;
    if (p->dim > WIRE_MAX_DIM)
        return *why = "above WIRE_MAX_DIM", F_DIM;
    /* RAW and SYNC tensors are dim values exactly: a receiver copies
     * 8 (or 12) * dim bytes, so the bin must hold precisely that many. */
    if (p->kind == GSP_RAW && p->payload_len != p->dim * sizeof(double))
        return *why = "RAW payload is not 8 * dim bytes", F_PAYLOAD;
    if (p->kind == GSP_SYNC && (*why = sync_check(p)))
        return F_PAYLOAD;
    /* A compress/ message has at least its codec id; its own decoder checks
     * the rest (it knows the codec's layout, we do not). The bin32 length
     * field bounds what one message can carry at all. */
    if (p->kind == GSP_DELTA && (p->payload_len < 1 || p->payload_len > UINT32_MAX))
        return *why = "DELTA payload empty or over 4 GiB", F_PAYLOAD;
    return -1;
}

/* UTF-8 (msgpack str is UTF-8 by definition), shortest form, no surrogates,
 * and no control characters: the reason ends up in logs and on terminals,
 * where an escape sequence or newline from a peer has no business. */
static int reason_ok(const uint8_t *s, size_t n)
{
    static const uint32_t min_cp[4] = {0, 0x80, 0x800, 0x10000};
    size_t i = 0;
    while (i < n) {
        uint32_t c = s[i];
        size_t k;
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7f)
                return 0;
            i++;
            continue;
        }
        if ((c & 0xe0) == 0xc0)
            k = 1, c &= 0x1f;
        else if ((c & 0xf0) == 0xe0)
            k = 2, c &= 0x0f;
        else if ((c & 0xf8) == 0xf0)
            k = 3, c &= 0x07;
        else
            return 0;
        if (n - i - 1 < k)
            return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return 0;
            c = c << 6 | (s[i + j] & 0x3fu);
        }
        if (c < min_cp[k] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff) || (c >= 0x80 && c <= 0x9f))
            return 0;
        i += k + 1;
    }
    return 1;
}


/* ---- encoding ------------------------------------------------------------- */

/* The packer's sink: the caller's fixed buffer. Once a write does not fit,
 * every later one fails too, so one check at the end tells. */
typedef struct wire_wr {
    uint8_t *out;
    size_t cap, len;
    int full;
} wire_wr;

static int wr_write(void *data, const char *buf, size_t len)
{
    wire_wr *w = data;
    if (w->full || len > w->cap - w->len) {
        w->full = 1;
        return -1;
    }
    if (len)
        memcpy(w->out + w->len, buf, len);
    w->len += len;
    return 0;
}

/* Room for n bytes written directly (tensor bodies are converted straight
 * into the output, not staged), or NULL when full. */
static uint8_t *wr_take(wire_wr *w, size_t n)
{
    if (w->full || n > w->cap - w->len) {
        w->full = 1;
        return NULL;
    }
    uint8_t *p = w->out + w->len;
    w->len += n;
    return p;
}

static long wr_done(const wire_wr *w)
{
    return w->full ? -ENOSPC : (long)w->len;
}

/* A SYNC's payload (sync_check) from m, its length already taken. */
static void put_sync(uint8_t *body, const gsp_msg *m)
{
    const size_t dim = m->dim;
    put_le(body, m->ref, dim, sizeof(float));
    body += dim * sizeof(float);
    const int dense = !m->corr_idx || gsp_sync_dense(dim, m->n_corr);
    const uint32_t n = (uint32_t)(dense ? dim : m->n_corr);
    put_le(body, &n, 1, sizeof n);
    body += sizeof n;
    if (!dense) {
        put_le(body, m->corr_idx, n, sizeof(uint32_t));
        put_le(body + n * sizeof(uint32_t), m->corr, n, sizeof(double));
    } else if (!m->corr_idx) {
        put_le(body, m->corr, n, sizeof(double));
    } else { /* a list longer than every value: every value, 0 where none */
        memset(body, 0, dim * sizeof(double));
        for (size_t j = 0; j < m->n_corr; j++)
            put_le(body + m->corr_idx[j] * sizeof(double), &m->corr[j], 1, sizeof(double));
    }
}

/* A PUSH: the payload from m's arrays (RAW, SYNC) when m is given, else
 * p->payload's bytes as they are. p has passed push_check. */
static long encode_push(uint8_t *out, size_t cap, const wire_push *p, const gsp_msg *m)
{
    wire_wr w = {out, cap, 0, 0};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w, wr_write);
    msgpack_pack_array(&pk, wire_fields[WIRE_PUSH]);
    msgpack_pack_uint64(&pk, WIRE_PUSH); /* the packer picks the shortest integer form */
    msgpack_pack_uint64(&pk, (uint64_t)p->round);
    msgpack_pack_uint64(&pk, p->seq);
    msgpack_pack_uint64(&pk, p->incarnation);
    msgpack_pack_uint64(&pk, (uint64_t)p->kind);
    msgpack_pack_double(&pk, p->w_total);
    msgpack_pack_float(&pk, p->gain);
    msgpack_pack_float(&pk, p->step);
    msgpack_pack_uint64(&pk, p->origin);
    msgpack_pack_uint64(&pk, p->base);
    msgpack_pack_uint64(&pk, p->dim);
    msgpack_pack_bin(&pk, p->payload_len);
    uint8_t *body = wr_take(&w, p->payload_len);
    if (!body)
        return -ENOSPC;
    if (m && p->kind == GSP_SYNC)
        put_sync(body, m);
    else if (m && p->kind == GSP_RAW)
        put_le(body, m->x_total, p->dim, sizeof(double));
    else if (p->payload_len)
        memcpy(body, p->payload, p->payload_len);
    return wr_done(&w);
}

long wire_encode_push(uint8_t *out, size_t cap, const gsp_msg *m)
{
    if (!m || (!out && cap))
        return -EINVAL;
    wire_push p = {.round = m->round, .seq = m->seq, .incarnation = m->incarnation, .kind = m->kind,
                   .w_total = m->w_total, .gain = m->gain, .step = m->step, .origin = m->origin,
                   .base = m->kind == GSP_SYNC ? m->base : 0, .dim = m->dim};
    const char *why;
    if (p.dim > WIRE_MAX_DIM || (unsigned)p.kind > GSP_SYNC)
        return -EINVAL;
    switch (p.kind) {
    case GSP_RAW:
        p.payload_len = p.dim * sizeof(double);
        if (p.dim && !m->x_total)
            return -EINVAL;
        break;
    case GSP_SYNC:
        if (m->n_corr > p.dim || (p.dim && !m->ref) || (m->n_corr && !m->corr) ||
            (!m->corr_idx && m->n_corr != p.dim))
            return -EINVAL;
        p.payload_len = gsp_sync_bytes(p.dim, m->corr_idx ? m->n_corr : p.dim);
        break;
    case GSP_DELTA:
        p.payload = m->payload, p.payload_len = m->payload_len;
        if (!m->payload)
            return -EINVAL;
        break;
    }
    if (push_check(&p, &why) >= 0)
        return -EINVAL;
    return encode_push(out, cap, &p, p.kind == GSP_DELTA ? NULL : m);
}

long wire_encode_auth(uint8_t *out, size_t cap, const uint8_t hash[WIRE_HASH_LEN])
{
    if (!hash || (!out && cap))
        return -EINVAL;
    wire_wr w = {out, cap, 0, 0};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w, wr_write);
    msgpack_pack_array(&pk, wire_fields[WIRE_AUTH]);
    msgpack_pack_uint64(&pk, WIRE_AUTH);
    msgpack_pack_bin_with_body(&pk, hash, WIRE_HASH_LEN);
    return wr_done(&w);
}

/* NACK, HEARTBEAT, ACK, MODEL_REQUEST and MODEL_SOON: [type, one unsigned integer]. */
static long encode_pair(uint8_t *out, size_t cap, wire_type type, uint64_t v)
{
    if (!out && cap)
        return -EINVAL;
    wire_wr w = {out, cap, 0, 0};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w, wr_write);
    msgpack_pack_array(&pk, wire_fields[type]);
    msgpack_pack_uint64(&pk, (uint64_t)type);
    msgpack_pack_uint64(&pk, v);
    return wr_done(&w);
}

long wire_encode_nack(uint8_t *out, size_t cap, uint64_t seq)
{
    return encode_pair(out, cap, WIRE_NACK, seq);
}

long wire_encode_ack(uint8_t *out, size_t cap, uint64_t seq) { return encode_pair(out, cap, WIRE_ACK, seq); }

long wire_encode_heartbeat(uint8_t *out, size_t cap, long round)
{
    if (round < 0)
        return -EINVAL;
    return encode_pair(out, cap, WIRE_HEARTBEAT, (uint64_t)round);
}

long wire_encode_model_soon(uint8_t *out, size_t cap, long round)
{
    if (round < 0)
        return -EINVAL;
    return encode_pair(out, cap, WIRE_MODEL_SOON, (uint64_t)round);
}

long wire_encode_goodbye(uint8_t *out, size_t cap, const char *reason, size_t len)
{
    if ((!reason && len) || (!out && cap) || len > WIRE_REASON_MAX || !reason_ok((const uint8_t *)reason, len))
        return -EINVAL;
    wire_wr w = {out, cap, 0, 0};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w, wr_write);
    msgpack_pack_array(&pk, wire_fields[WIRE_GOODBYE]);
    msgpack_pack_uint64(&pk, WIRE_GOODBYE);
    msgpack_pack_str(&pk, len);
    if (len)
        msgpack_pack_str_body(&pk, reason, len);
    return wr_done(&w);
}

long wire_encode_model_request(uint8_t *out, size_t cap, size_t dim)
{
    if (dim > WIRE_MAX_DIM)
        return -EINVAL;
    return encode_pair(out, cap, WIRE_MODEL_REQUEST, dim);
}

/* MODEL: the payload from z (host order) when not NULL, else bytes as they are. */
static long encode_model(uint8_t *out, size_t cap, long round, const uint8_t *bytes, const float *z, size_t dim,
                         const uint8_t *hash)
{
    wire_wr w = {out, cap, 0, 0};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w, wr_write);
    msgpack_pack_array(&pk, wire_fields[WIRE_MODEL]);
    msgpack_pack_uint64(&pk, WIRE_MODEL);
    msgpack_pack_uint64(&pk, (uint64_t)round);
    msgpack_pack_uint64(&pk, dim);
    msgpack_pack_bin_with_body(&pk, hash, WIRE_HASH_LEN);
    msgpack_pack_bin(&pk, dim * sizeof(float));
    uint8_t *body = wr_take(&w, dim * sizeof(float));
    if (!body)
        return -ENOSPC;
    if (z)
        put_le(body, z, dim, sizeof(float));
    else if (dim)
        memcpy(body, bytes, dim * sizeof(float));
    return wr_done(&w);
}

long wire_encode_model(uint8_t *out, size_t cap, long round, const float *z, size_t dim,
                       const uint8_t hash[WIRE_HASH_LEN])
{
    if ((!out && cap) || !hash || (!z && dim) || round < 0 || dim > WIRE_MAX_DIM)
        return -EINVAL;
    static const float none;
    return encode_model(out, cap, round, NULL, z ? z : &none, dim, hash);
}

long wire_encode(uint8_t *out, size_t cap, const wire_msg *m)
{
    if (!m)
        return -EINVAL;
    switch (m->type) {
    case WIRE_AUTH:
        return wire_encode_auth(out, cap, m->auth.hash);
    case WIRE_PUSH: {
        const char *why;
        if ((!out && cap) || (!m->push.payload && m->push.payload_len) || push_check(&m->push, &why) >= 0)
            return -EINVAL;
        return encode_push(out, cap, &m->push, NULL);
    }
    case WIRE_NACK:
        return wire_encode_nack(out, cap, m->nack.seq);
    case WIRE_HEARTBEAT:
        return wire_encode_heartbeat(out, cap, m->heartbeat.round);
    case WIRE_ACK:
        return wire_encode_ack(out, cap, m->ack.seq);
    case WIRE_MODEL_SOON:
        return wire_encode_model_soon(out, cap, m->model_soon.round);
    case WIRE_GOODBYE:
        return wire_encode_goodbye(out, cap, m->goodbye.reason, m->goodbye.len);
    case WIRE_MODEL_REQUEST:
        return wire_encode_model_request(out, cap, m->model_request.dim);
    case WIRE_MODEL:
        if (!m->model.hash || (!m->model.payload && m->model.dim) || m->model.round < 0 ||
            m->model.dim > WIRE_MAX_DIM || (!out && cap))
            return -EINVAL;
        return encode_model(out, cap, m->model.round, m->model.payload, NULL, m->model.dim, m->model.hash);
    }
    return -EINVAL;
}

size_t wire_push_bound(size_t dim, size_t payload_len)
{
    if (dim > WIRE_MAX_DIM || payload_len > UINT32_MAX)
        return 0;
    size_t tensors = gsp_sync_bytes(dim, dim); /* the longest: a SYNC with every correction */
    size_t body = tensors > payload_len ? tensors : payload_len;
    size_t n = WIRE_PUSH_HEADER_MAX + body;
    return n > WIRE_CONTROL_MAX ? n : WIRE_CONTROL_MAX;
}

size_t wire_push_scratch_bound(size_t dim)
{
    if (dim > WIRE_MAX_DIM)
        return 0;
    return gsp_sync_bytes(dim, dim) + _Alignof(double) - 1; /* (more than a RAW's 8 * dim) */
}

/* ---- decoding: the bounded reader ----------------------------------------- */

/* A cursor over the input. Every read checks the bytes it needs against
 * end - p before touching them, and nothing read is used to size anything
 * before it has been checked against the schema. */
typedef struct wire_rd {
    const uint8_t *start, *p, *end;
    wire_err *err;
} wire_rd;

static int rd_fail(wire_rd *r, const uint8_t *at, const char *field, const char *why)
{
    if (r->err)
        *r->err = (wire_err){.offset = (size_t)(at - r->start), .field = field, .why = why};
    return -EBADMSG;
}

static size_t rd_left(const wire_rd *r)
{
    return (size_t)(r->end - r->p);
}

static uint64_t be(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* A msgpack tag byte followed by an n-byte big-endian argument. */
static int rd_arg(wire_rd *r, const char *field, size_t n, uint64_t *v)
{
    if (rd_left(r) < n)
        return rd_fail(r, r->p - 1, field, "truncated");
    *v = be(r->p, n);
    r->p += n;
    return 0;
}

/* Any msgpack integer form, in [0, max]. Non-shortest forms and signed
 * forms holding non-negative values are accepted: they are the same integer
 * (msgpack spec), and another encoder may well produce them. */
static int rd_uint(wire_rd *r, const char *field, uint64_t max, uint64_t *v)
{
    const uint8_t *at = r->p;
    if (!rd_left(r))
        return rd_fail(r, at, field, "truncated");
    uint8_t t = *r->p++;
    if (t <= 0x7f) { /* positive fixint */
        *v = t;
    } else if (t >= 0xe0) { /* negative fixint */
        return rd_fail(r, at, field, "negative");
    } else if (t >= 0xcc && t <= 0xd3) { /* uint 8/16/32/64, int 8/16/32/64 */
        size_t n = (size_t)1 << ((t - 0xcc) & 3);
        int sign = t >= 0xd0;
        if (rd_arg(r, field, n, v) < 0)
            return -EBADMSG;
        if (sign && (*v >> (8 * n - 1)))
            return rd_fail(r, at, field, "negative");
    } else {
        return rd_fail(r, at, field, "not an integer");
    }
    if (*v > max)
        return rd_fail(r, at, field, "out of range");
    return 0;
}

/* Floats only in the width the schema gives them: float64 for w_total (a
 * running total that must not lose bits), float32 for gain and step (what
 * both ends compute with). A float32 w_total is a different message. */
static int rd_f64(wire_rd *r, const char *field, double *v)
{
    const uint8_t *at = r->p;
    if (!rd_left(r))
        return rd_fail(r, at, field, "truncated");
    if (*r->p++ != 0xcb)
        return rd_fail(r, at, field, "not a float64");
    uint64_t u;
    if (rd_arg(r, field, 8, &u) < 0)
        return -EBADMSG;
    memcpy(v, &u, sizeof *v);
    return 0;
}

static int rd_f32(wire_rd *r, const char *field, float *v)
{
    const uint8_t *at = r->p;
    if (!rd_left(r))
        return rd_fail(r, at, field, "truncated");
    if (*r->p++ != 0xca)
        return rd_fail(r, at, field, "not a float32");
    uint64_t u;
    if (rd_arg(r, field, 4, &u) < 0)
        return -EBADMSG;
    uint32_t u32 = (uint32_t)u;
    memcpy(v, &u32, sizeof *v);
    return 0;
}

/* A bin (bin8/16/32) of at most max bytes, all of them present: the view
 * points into the input. */
static int rd_bin(wire_rd *r, const char *field, size_t max, const uint8_t **b, size_t *len)
{
    const uint8_t *at = r->p;
    if (!rd_left(r))
        return rd_fail(r, at, field, "truncated");
    uint8_t t = *r->p++;
    size_t n = t == 0xc4 ? 1 : t == 0xc5 ? 2 : t == 0xc6 ? 4 : 0;
    if (!n)
        return rd_fail(r, at, field, "not a bin");
    uint64_t l;
    if (rd_arg(r, field, n, &l) < 0)
        return -EBADMSG;
    if (l > max)
        return rd_fail(r, at, field, "too long");
    if (l > rd_left(r))
        return rd_fail(r, at, field, "truncated");
    *b = r->p, *len = (size_t)l;
    r->p += l;
    return 0;
}

/* A str (fixstr or str8: the schema's strings are short) of at most max bytes. */
static int rd_str(wire_rd *r, const char *field, size_t max, const uint8_t **s, size_t *len)
{
    const uint8_t *at = r->p;
    if (!rd_left(r))
        return rd_fail(r, at, field, "truncated");
    uint8_t t = *r->p++;
    uint64_t l;
    if ((t & 0xe0) == 0xa0)
        l = t & 0x1f;
    else if (t == 0xd9) {
        if (rd_arg(r, field, 1, &l) < 0)
            return -EBADMSG;
    } else
        return rd_fail(r, at, field, "not a str (fixstr or str8)");
    if (l > max)
        return rd_fail(r, at, field, "too long");
    if (l > rd_left(r))
        return rd_fail(r, at, field, "truncated");
    *s = r->p, *len = (size_t)l;
    r->p += l;
    return 0;
}

static int rd_array(wire_rd *r, uint64_t *n)
{
    const uint8_t *at = r->p;
    if (!rd_left(r))
        return rd_fail(r, at, "array", "truncated");
    uint8_t t = *r->p++;
    if ((t & 0xf0) == 0x90) {
        *n = t & 0x0f;
        return 0;
    }
    if (t == 0xdc)
        return rd_arg(r, "array", 2, n);
    if (t == 0xdd)
        return rd_arg(r, "array", 4, n);
    return rd_fail(r, at, "array", "not an array");
}

static int decode_push(wire_rd *r, wire_push *p)
{
    const uint8_t *at[F_N];
    uint64_t v;
    at[F_ROUND] = r->p;
    if (rd_uint(r, "round", LONG_MAX, &v) < 0)
        return -EBADMSG;
    p->round = (long)v;
    at[F_SEQ] = r->p;
    if (rd_uint(r, "seq", UINT64_MAX, &p->seq) < 0)
        return -EBADMSG;
    at[F_INC] = r->p;
    if (rd_uint(r, "incarnation", UINT64_MAX, &p->incarnation) < 0)
        return -EBADMSG;
    at[F_KIND] = r->p;
    if (rd_uint(r, "kind", GSP_SYNC, &v) < 0)
        return -EBADMSG;
    p->kind = (gsp_kind)v;
    at[F_W] = r->p;
    if (rd_f64(r, "w_total", &p->w_total) < 0)
        return -EBADMSG;
    at[F_GAIN] = r->p;
    if (rd_f32(r, "gain", &p->gain) < 0)
        return -EBADMSG;
    at[F_STEP] = r->p;
    if (rd_f32(r, "step", &p->step) < 0)
        return -EBADMSG;
    at[F_ORIGIN] = r->p;
    if (rd_uint(r, "origin", UINT64_MAX, &p->origin) < 0)
        return -EBADMSG;
    at[F_BASE] = r->p;
    if (rd_uint(r, "base", UINT64_MAX, &p->base) < 0)
        return -EBADMSG;
    at[F_DIM] = r->p;
    if (rd_uint(r, "dim", WIRE_MAX_DIM, &v) < 0)
        return -EBADMSG;
    p->dim = (size_t)v;
    at[F_PAYLOAD] = r->p;
    if (rd_bin(r, "payload", UINT32_MAX, &p->payload, &p->payload_len) < 0)
        return -EBADMSG;
    const char *why;
    int f = push_check(p, &why);
    return f < 0 ? 0 : rd_fail(r, at[f], push_field_names[f], why);
}

int wire_decode(wire_msg *m, const uint8_t *buf, size_t len, wire_err *err)
{
    if (!m || (!buf && len))
        return -EINVAL;
    memset(m, 0, sizeof *m);
    if (err)
        *err = (wire_err){0};
    static const uint8_t empty[1];
    wire_rd r = {.start = buf ? buf : empty, .p = buf ? buf : empty, .end = (buf ? buf : empty) + len, .err = err};
    int rc = -EBADMSG;
    uint64_t n, type, v;
    const uint8_t *at;
    if (rd_array(&r, &n) < 0)
        goto fail;
    /* Known counts only, before reading anything else. */
    if (n != 2 && n != 5 && n != 12) {
        rc = rd_fail(&r, r.start, "array", "element count of no message type");
        goto fail;
    }
    at = r.p;
    if (rd_uint(&r, "type", UINT64_MAX, &type) < 0)
        goto fail;
    if (type >= WIRE_N_TYPES) {
        rc = rd_fail(&r, at, "type", "unknown message type");
        goto fail;
    }
    if (n != wire_fields[type]) {
        rc = rd_fail(&r, r.start, "array", "element count does not match the type");
        goto fail;
    }
    m->type = (wire_type)type;
    switch (m->type) {
    case WIRE_AUTH: {
        size_t hl;
        at = r.p;
        if (rd_bin(&r, "hash", WIRE_HASH_LEN, &m->auth.hash, &hl) < 0)
            goto fail;
        if (hl != WIRE_HASH_LEN) {
            rc = rd_fail(&r, at, "hash", "not 32 bytes");
            goto fail;
        }
        break;
    }
    case WIRE_PUSH:
        if (decode_push(&r, &m->push) < 0)
            goto fail;
        break;
    case WIRE_NACK:
        /* 0 is legal: the gap may start before the first message of the edge. */
        if (rd_uint(&r, "seq", UINT64_MAX, &m->nack.seq) < 0)
            goto fail;
        break;
    case WIRE_HEARTBEAT:
        if (rd_uint(&r, "round", LONG_MAX, &v) < 0)
            goto fail;
        m->heartbeat.round = (long)v;
        break;
    case WIRE_ACK:
        if (rd_uint(&r, "seq", UINT64_MAX, &m->ack.seq) < 0)
            goto fail;
        break;
    case WIRE_MODEL_SOON:
        if (rd_uint(&r, "round", LONG_MAX, &v) < 0)
            goto fail;
        m->model_soon.round = (long)v;
        break;
    case WIRE_GOODBYE: {
        const uint8_t *s;
        at = r.p;
        if (rd_str(&r, "reason", WIRE_REASON_MAX, &s, &m->goodbye.len) < 0)
            goto fail;
        if (!reason_ok(s, m->goodbye.len)) {
            rc = rd_fail(&r, at, "reason", "not UTF-8 text without control characters");
            goto fail;
        }
        m->goodbye.reason = (const char *)s;
        break;
    }
    case WIRE_MODEL_REQUEST:
        if (rd_uint(&r, "dim", WIRE_MAX_DIM, &v) < 0)
            goto fail;
        m->model_request.dim = (size_t)v;
        break;
    case WIRE_MODEL: {
        size_t hl, pl;
        if (rd_uint(&r, "round", LONG_MAX, &v) < 0)
            goto fail;
        m->model.round = (long)v;
        if (rd_uint(&r, "dim", WIRE_MAX_DIM, &v) < 0)
            goto fail;
        m->model.dim = (size_t)v;
        at = r.p;
        if (rd_bin(&r, "hash", WIRE_HASH_LEN, &m->model.hash, &hl) < 0)
            goto fail;
        if (hl != WIRE_HASH_LEN) {
            rc = rd_fail(&r, at, "hash", "not 32 bytes");
            goto fail;
        }
        at = r.p;
        if (rd_bin(&r, "payload", UINT32_MAX, &m->model.payload, &pl) < 0)
            goto fail;
        if (pl != m->model.dim * sizeof(float)) {
            rc = rd_fail(&r, at, "payload", "not 4 * dim bytes");
            goto fail;
        }
        break;
    }
    }
    /* One frame, one message: anything after it is not ours to ignore. */
    if (r.p != r.end) {
        rc = rd_fail(&r, r.p, "message", "trailing bytes");
        goto fail;
    }
    return 0;
fail:
    memset(m, 0, sizeof *m);
    return rc;
}

/* m's PUSH, if it keeps the schema, as the fields of a gsp_msg (no tensors yet); NULL if not. */
static const wire_push *push_fields(const wire_msg *m, gsp_msg *g)
{
    const char *why;
    if (!m || m->type != WIRE_PUSH || push_check(&m->push, &why) >= 0 || (!m->push.payload && m->push.payload_len))
        return NULL;
    const wire_push *p = &m->push;
    *g = (gsp_msg){.src = -1, .dst = -1, .round = p->round, .seq = p->seq, .kind = p->kind,
                   .w_total = p->w_total, .dim = p->dim, .gain = p->gain, .step = p->step,
                   .incarnation = p->incarnation, .origin = p->origin, .base = p->base};
    return p;
}

int wire_push_in_place(const wire_msg *m, gsp_msg *out, uint8_t *base)
{
    gsp_msg g;
    const wire_push *p = push_fields(m, &g);
    if (!p || !out || p->kind == GSP_DELTA || !p->dim || !base || base > p->payload ||
        (uintptr_t)base % _Alignof(double))
        return -EINVAL;
    /* Each part moves towards base, none past a part not yet moved: the
     * reference to base, then the positions behind it, then the values at
     * the next multiple of 8 (at most 4 bytes past where the positions end,
     * and the payload had at least the count's 4 bytes before them). */
    const size_t dim = p->dim;
    if (p->kind == GSP_RAW) {
        memmove(base, p->payload, dim * sizeof(double));
        get_le(base, base, dim, sizeof(double));
        g.x_total = (const double *)(void *)base;
    } else {
        const uint8_t *at = p->payload + dim * sizeof(float);
        uint32_t n;
        get_le(&n, at, 1, sizeof n);
        at += sizeof n;
        const int dense = n == dim;
        const size_t idx_bytes = dense ? 0 : (size_t)n * sizeof(uint32_t);
        memmove(base, p->payload, dim * sizeof(float));
        get_le(base, base, dim, sizeof(float));
        uint8_t *idx = base + dim * sizeof(float), *val = base + ((dim * sizeof(float) + idx_bytes + 7) & ~(size_t)7);
        if (!dense) {
            memmove(idx, at, idx_bytes);
            get_le(idx, idx, n, sizeof(uint32_t));
            g.corr_idx = (const uint32_t *)(void *)idx;
        }
        memmove(val, at + idx_bytes, (size_t)n * sizeof(double));
        get_le(val, val, n, sizeof(double));
        g.ref = (const float *)(void *)base, g.corr = (const double *)(void *)val, g.n_corr = n;
    }
    *out = g;
    return 0;
}

int wire_push_to_gsp(const wire_msg *m, gsp_msg *out, void *scratch, size_t scratch_len)
{
    gsp_msg g;
    const wire_push *p = push_fields(m, &g);
    if (!p || !out)
        return -EINVAL;
    if (p->kind == GSP_DELTA) {
        g.payload = p->payload, g.payload_len = p->payload_len;
        *out = g;
        return 0;
    }
    /* RAW/SYNC: copy out of the (unaligned, little-endian) buffer, doubles
     * first (the scratch is aligned for them). */
    size_t pad = scratch ? (size_t)(-(uintptr_t)scratch & (_Alignof(double) - 1)) : 0;
    if (p->payload_len && (!scratch || scratch_len < pad || scratch_len - pad < p->payload_len))
        return -ENOSPC;
    static const double none_x[1]; /* gsp_absorb wants arrays even for dim 0 */
    static const float none_ref[1];
    double *x = p->dim ? (double *)(void *)((uint8_t *)scratch + pad) : (double *)(uintptr_t)none_x;
    if (p->kind == GSP_RAW) {
        get_le(x, p->payload, p->dim, sizeof(double));
        g.x_total = x;
    } else {
        const uint8_t *at = p->payload + p->dim * sizeof(float);
        uint32_t n;
        get_le(&n, at, 1, sizeof n);
        at += sizeof n;
        const int dense = n == p->dim;
        float *ref = p->dim ? (float *)(x + n) : (float *)(uintptr_t)none_ref;
        get_le(ref, p->payload, p->dim, sizeof(float));
        if (!dense) {
            uint32_t *idx = (uint32_t *)(ref + p->dim);
            get_le(idx, at, n, sizeof(uint32_t));
            at += (size_t)n * sizeof(uint32_t);
            g.corr_idx = idx;
        }
        get_le(x, at, n, sizeof(double));
        g.ref = ref, g.corr = x, g.n_corr = n;
    }
    *out = g;
    return 0;
}
