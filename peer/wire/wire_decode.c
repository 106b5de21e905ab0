/* The message layer of peer/wire/WIRE.md, decoding: a bounded reader of our
 * own (msgpack-c's unpacker allocates by the counts it reads), and a decoded
 * PUSH as a gsp_msg, copied out or taken in place. */
#include "peer/wire/wire.h"
#include "peer/wire/wire_schema.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

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
static int rd_float_bits(wire_rd *r, const char *field, uint8_t tag, size_t n, const char *wrong, uint64_t *u)
{
    const uint8_t *at = r->p;
    if (!rd_left(r))
        return rd_fail(r, at, field, "truncated");
    if (*r->p++ != tag)
        return rd_fail(r, at, field, wrong);
    return rd_arg(r, field, n, u) < 0 ? -EBADMSG : 0;
}

static int rd_f64(wire_rd *r, const char *field, double *v)
{
    uint64_t u;
    if (rd_float_bits(r, field, 0xcb, 8, "not a float64", &u) < 0)
        return -EBADMSG;
    memcpy(v, &u, sizeof *v);
    return 0;
}

static int rd_f32(wire_rd *r, const char *field, float *v)
{
    uint64_t u;
    if (rd_float_bits(r, field, 0xca, 4, "not a float32", &u) < 0)
        return -EBADMSG;
    uint32_t u32 = (uint32_t)u;
    memcpy(v, &u32, sizeof *v);
    return 0;
}

/* The l bytes of a bin or str whose header began at `at`: at most max, all
 * of them present; the view points into the input. */
static int rd_bytes(wire_rd *r, const uint8_t *at, const char *field, uint64_t l, size_t max, const uint8_t **b,
                    size_t *len)
{
    if (l > max)
        return rd_fail(r, at, field, "too long");
    if (l > rd_left(r))
        return rd_fail(r, at, field, "truncated");
    *b = r->p, *len = (size_t)l;
    r->p += l;
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
    return rd_bytes(r, at, field, l, max, b, len);
}

/* A payload (WIRE.md "Messages"): its length as a uint, the message's last
 * field, and then exactly that many bytes, the rest of the input, which the
 * view points into. A length is no msgpack bin's, so a payload may pass
 * 4 GiB. */
static int rd_tail(wire_rd *r, const char *field, const uint8_t **b, size_t *len)
{
    const uint8_t *at = r->p;
    uint64_t l;
    if (rd_uint(r, field, SIZE_MAX, &l) < 0)
        return -EBADMSG;
    if (l != rd_left(r))
        return rd_fail(r, at, field, l > rd_left(r) ? "truncated" : "trailing bytes after the payload");
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
    return rd_bytes(r, at, field, l, max, s, len);
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

/* MEMBERS: its entries and revocations, each checked as the encoder checks
 * them, into the view's arrays (their counts bounded before anything is read). */
static int decode_members(wire_rd *r, wire_msg *m)
{
    uint64_t n, k, v;
    const uint8_t *at = r->p;
    if (rd_array(r, &n) < 0)
        return -EBADMSG;
    if (n > WIRE_MEMBERS_MAX)
        return rd_fail(r, at, "members", "more entries than a message carries");
    for (uint32_t i = 0; i < n; i++) {
        wire_member *e = &m->members.m[i];
        at = r->p;
        if (rd_array(r, &k) < 0)
            return -EBADMSG;
        if (k != 6)
            return rd_fail(r, at, "member", "not 6 fields");
        if (rd_uint(r, "id", 65535, &v) < 0)
            return -EBADMSG;
        e->id = (uint32_t)v;
        if (rd_uint(r, "since", UINT64_MAX, &e->since) < 0)
            return -EBADMSG;
        const uint8_t *s;
        if (rd_str(r, "host", WIRE_HOST_MAX, &s, &e->host_len) < 0)
            return -EBADMSG;
        e->host = (const char *)s;
        if (rd_uint(r, "port", 65535, &v) < 0)
            return -EBADMSG;
        e->port = (uint16_t)v;
        if (rd_uint(r, "flags", UINT32_MAX, &v) < 0)
            return -EBADMSG;
        e->flags = (unsigned)v;
        size_t cl;
        const uint8_t *cred;
        const uint8_t *cat = r->p;
        if (rd_bin(r, "cred", WIRE_CRED_LEN, &cred, &cl) < 0)
            return -EBADMSG;
        if (cl != 0 && cl != WIRE_CRED_LEN)
            return rd_fail(r, cat, "cred", "neither empty nor a credential");
        e->cred = cl ? cred : NULL;
        const char *why = wire_member_check(e);
        if (why)
            return rd_fail(r, at, "member", why);
    }
    m->members.n = (uint32_t)n;
    at = r->p;
    if (rd_array(r, &n) < 0)
        return -EBADMSG;
    if (n > WIRE_REVOKED_MAX)
        return rd_fail(r, at, "revoked", "more revocations than a message carries");
    for (uint32_t i = 0; i < n; i++) {
        wire_revocation *e = &m->members.r[i];
        at = r->p;
        if (rd_array(r, &k) < 0)
            return -EBADMSG;
        if (k != 2)
            return rd_fail(r, at, "revocation", "not 2 fields");
        if (rd_uint(r, "serial", UINT64_MAX, &e->serial) < 0)
            return -EBADMSG;
        size_t sl;
        at = r->p;
        if (rd_bin(r, "sig", WIRE_SIG_LEN, &e->sig, &sl) < 0)
            return -EBADMSG;
        if (sl != WIRE_SIG_LEN)
            return rd_fail(r, at, "sig", "not 64 bytes");
    }
    m->members.n_revoked = (uint32_t)n;
    return 0;
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
    if (rd_uint(r, "kind", GSP_GATHER, &v) < 0)
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
    if (rd_tail(r, "payload", &p->payload, &p->payload_len) < 0)
        return -EBADMSG;
    const char *why;
    int f = wire_push_check(p, &why);
    return f < 0 ? 0 : rd_fail(r, at[f], wire_push_field_names[f], why);
}

/* A MODEL's fields before its payload's length: round, dim, hash. */
static int model_fields(wire_rd *r, wire_msg *m)
{
    uint64_t v;
    size_t hl;
    if (rd_uint(r, "round", LONG_MAX, &v) < 0)
        return -EBADMSG;
    m->model.round = (long)v;
    if (rd_uint(r, "dim", WIRE_MAX_DIM, &v) < 0)
        return -EBADMSG;
    m->model.dim = (size_t)v;
    const uint8_t *at = r->p;
    if (rd_bin(r, "hash", WIRE_HASH_LEN, &m->model.hash, &hl) < 0)
        return -EBADMSG;
    return hl == WIRE_HASH_LEN ? 0 : rd_fail(r, at, "hash", "not 32 bytes");
}

long wire_model_head(wire_msg *m, const uint8_t *buf, size_t len)
{
    if (!m || !buf)
        return -EINVAL;
    memset(m, 0, sizeof *m);
    wire_rd r = {.start = buf, .p = buf, .end = buf + len};
    uint64_t n, type, pl;
    if (rd_array(&r, &n) < 0 || n != wire_fields[WIRE_MODEL] || rd_uint(&r, "type", UINT64_MAX, &type) < 0 ||
        type != WIRE_MODEL || model_fields(&r, m) < 0 || rd_uint(&r, "payload", SIZE_MAX, &pl) < 0 ||
        pl != m->model.dim * sizeof(float)) {
        memset(m, 0, sizeof *m);
        return -EBADMSG;
    }
    m->type = WIRE_MODEL;
    return (long)(r.p - buf);
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
    if (n != 2 && n != 3 && n != 5 && n != 12) {
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
        if (!wire_reason_ok(s, m->goodbye.len)) {
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
        size_t pl;
        if (model_fields(&r, m) < 0)
            goto fail;
        at = r.p;
        if (rd_tail(&r, "payload", &m->model.payload, &pl) < 0)
            goto fail;
        if (pl != m->model.dim * sizeof(float)) {
            rc = rd_fail(&r, at, "payload", "not 4 * dim bytes");
            goto fail;
        }
        break;
    }
    case WIRE_MEMBERS:
        if (decode_members(&r, m) < 0)
            goto fail;
        break;
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
    if (!m || m->type != WIRE_PUSH || wire_push_check(&m->push, &why) >= 0 || (!m->push.payload && m->push.payload_len))
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
    if (!p || !out || gsp_kind_payload(p->kind) || !p->dim || !base || base > p->payload ||
        (uintptr_t)base % _Alignof(double))
        return -EINVAL;
    /* Each part moves towards base, none past a part not yet moved: the
     * reference to base, then the positions behind it, then the values at
     * the next multiple of 8 (at most 4 bytes past where the positions end,
     * and the payload had at least the count's 4 bytes before them). */
    const size_t dim = p->dim;
    if (p->kind == GSP_RAW) {
        memmove(base, p->payload, dim * sizeof(double));
        wire_get_le(base, base, dim, sizeof(double));
        g.x_total = (const double *)(void *)base;
    } else {
        const uint8_t *at = p->payload + dim * sizeof(float);
        uint32_t n;
        wire_get_le(&n, at, 1, sizeof n);
        at += sizeof n;
        const int dense = n == dim;
        const size_t idx_bytes = dense ? 0 : (size_t)n * sizeof(uint32_t);
        memmove(base, p->payload, dim * sizeof(float));
        wire_get_le(base, base, dim, sizeof(float));
        uint8_t *idx = base + dim * sizeof(float), *val = base + ((dim * sizeof(float) + idx_bytes + 7) & ~(size_t)7);
        if (!dense) {
            memmove(idx, at, idx_bytes);
            wire_get_le(idx, idx, n, sizeof(uint32_t));
            g.corr_idx = (const uint32_t *)(void *)idx;
        }
        memmove(val, at + idx_bytes, (size_t)n * sizeof(double));
        wire_get_le(val, val, n, sizeof(double));
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
    if (gsp_kind_payload(p->kind)) {
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
        wire_get_le(x, p->payload, p->dim, sizeof(double));
        g.x_total = x;
    } else {
        const uint8_t *at = p->payload + p->dim * sizeof(float);
        uint32_t n;
        wire_get_le(&n, at, 1, sizeof n);
        at += sizeof n;
        const int dense = n == p->dim;
        float *ref = p->dim ? (float *)(x + n) : (float *)(uintptr_t)none_ref;
        wire_get_le(ref, p->payload, p->dim, sizeof(float));
        if (!dense) {
            uint32_t *idx = (uint32_t *)(ref + p->dim);
            wire_get_le(idx, at, n, sizeof(uint32_t));
            at += (size_t)n * sizeof(uint32_t);
            g.corr_idx = idx;
        }
        wire_get_le(x, at, n, sizeof(double));
        g.ref = ref, g.corr = x, g.n_corr = n;
    }
    *out = g;
    return 0;
}
