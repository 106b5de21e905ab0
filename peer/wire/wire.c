/* The message layer of peer/wire/WIRE.md, encoding: msgpack-c's packer into
 * the caller's buffer, and the schema checks both directions share
 * (wire_schema.h; decoding is wire_decode.c). */
#include "peer/wire/wire.h"
#include "peer/wire/sec.h"
#include "peer/wire/wire_schema.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include <msgpack.h>

/* (wire_schema.h says why exactly these counts) */
const uint32_t wire_fields[WIRE_N_TYPES] = {2, 12, 2, 2, 2, 2, 5, 2, 2, 3};

const char *wire_type_name(int type)
{
    static const char *const names[] = {"AUTH",    "PUSH",          "NACK",  "HEARTBEAT",
                                        "GOODBYE", "MODEL_REQUEST", "MODEL", "ACK", "MODEL_SOON", "MEMBERS"};
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

void wire_get_le(void *dst, const uint8_t *src, size_t n, size_t width)
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
_Static_assert(GSP_RAW == 0 && GSP_DELTA == 1 && GSP_SYNC == 2 && GSP_GATHER == 3, "PUSH kind numbers are gsp_kind's");

/* PUSH fields in array order (0 is the type); a check names the one at fault. */
const char *const wire_push_field_names[F_N] = {"type", "round",  "seq",  "incarnation", "kind", "w_total",
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
    wire_get_le(&n, p->payload + p->dim * sizeof(float), 1, sizeof n);
    if (n > p->dim || (n != p->dim && gsp_sync_dense(p->dim, n)))
        return "SYNC count is neither dim nor a list shorter than dim values";
    if (p->payload_len != gsp_sync_bytes(p->dim, n == p->dim ? p->dim : n))
        return "SYNC payload is not the length its count says";
    const uint8_t *at = p->payload + head;
    uint32_t prev = 0;
    for (size_t j = 0; n != p->dim && j < n; j++, at += sizeof(uint32_t)) {
        uint32_t i;
        wire_get_le(&i, at, 1, sizeof i);
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
int wire_push_check(const wire_push *p, const char **why)
{
    /* gsp rounds count up from 0 in a long. */
    if (p->round < 0)
        return *why = "negative", F_ROUND;
    /* Sequence numbers start at 1 per edge; 0 would read as "already applied"
     * and the mass it carries would be dropped without a trace. */
    if (p->seq < 1)
        return *why = "must be >= 1", F_SEQ;
    if ((unsigned)p->kind > GSP_GATHER)
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
     * the rest (it knows the codec's layout, we do not). */
    if (gsp_kind_payload(p->kind) && p->payload_len < 1)
        return *why = p->kind == GSP_DELTA ? "DELTA payload empty" : "GATHER payload empty", F_PAYLOAD;
    return -1;
}

/* UTF-8 (msgpack str is UTF-8 by definition), shortest form, no surrogates,
 * and no control characters: the reason ends up in logs and on terminals,
 * where an escape sequence or newline from a peer has no business. */
int wire_reason_ok(const uint8_t *s, size_t n)
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
    msgpack_pack_uint64(&pk, p->payload_len); /* (the payload follows the array: WIRE.md) */
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
    if (p.dim > WIRE_MAX_DIM || (unsigned)p.kind > GSP_GATHER)
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
    case GSP_GATHER:
        p.payload = m->payload, p.payload_len = m->payload_len;
        if (!m->payload)
            return -EINVAL;
        break;
    }
    if (wire_push_check(&p, &why) >= 0)
        return -EINVAL;
    return encode_push(out, cap, &p, gsp_kind_payload(p.kind) ? NULL : m);
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
    if ((!reason && len) || (!out && cap) || len > WIRE_REASON_MAX || !wire_reason_ok((const uint8_t *)reason, len))
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

/* z[i] * scale, n floats, little-endian into dst (the product rounded to
 * float as the caller's own z = x * (1 / w) is). */
static void put_le_scaled(uint8_t *dst, const float *z, float scale, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const float f = z[i] * scale;
        put_le(dst + i * sizeof f, &f, 1, sizeof f);
    }
}

/* MODEL: the payload from z[i] * scale (host order) when z is not NULL, else
 * bytes as they are. */
static long encode_model(uint8_t *out, size_t cap, long round, const uint8_t *bytes, const float *z, float scale,
                         size_t dim, const uint8_t *hash)
{
    wire_wr w = {out, cap, 0, 0};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w, wr_write);
    msgpack_pack_array(&pk, wire_fields[WIRE_MODEL]);
    msgpack_pack_uint64(&pk, WIRE_MODEL);
    msgpack_pack_uint64(&pk, (uint64_t)round);
    msgpack_pack_uint64(&pk, dim);
    msgpack_pack_bin_with_body(&pk, hash, WIRE_HASH_LEN);
    msgpack_pack_uint64(&pk, dim * sizeof(float));
    uint8_t *body = wr_take(&w, dim * sizeof(float));
    if (!body)
        return -ENOSPC;
    if (z && scale != 1.0f)
        put_le_scaled(body, z, scale, dim);
    else if (z)
        put_le(body, z, dim, sizeof(float));
    else if (dim)
        memcpy(body, bytes, dim * sizeof(float));
    return wr_done(&w);
}

long wire_encode_model(uint8_t *out, size_t cap, long round, const float *z, size_t dim,
                       const uint8_t hash[WIRE_HASH_LEN])
{
    return wire_encode_model_scaled(out, cap, round, z, 1.0f, dim, hash);
}

long wire_encode_model_scaled(uint8_t *out, size_t cap, long round, const float *x, float scale, size_t dim,
                              const uint8_t hash[WIRE_HASH_LEN])
{
    if ((!out && cap) || !hash || (!x && dim) || round < 0 || dim > WIRE_MAX_DIM)
        return -EINVAL;
    static const float none;
    return encode_model(out, cap, round, NULL, x ? x : &none, scale, dim, hash);
}

const char *wire_member_check(const wire_member *m)
{
    if (m->id > 65535)
        return "id past 65535";
    if (!m->host || !m->host_len || m->host_len > WIRE_HOST_MAX)
        return "no host, or one too long";
    char host[WIRE_HOST_MAX + 1];
    memcpy(host, m->host, m->host_len);
    host[m->host_len] = 0;
    uint8_t a[16];
    if (memchr(m->host, 0, m->host_len) || (inet_pton(AF_INET, host, a) != 1 && inet_pton(AF_INET6, host, a) != 1))
        return "host is not an IPv4 or IPv6 literal";
    if (!m->port)
        return "port 0";
    if (m->flags & ~WIRE_MEMBER_DIALS_IN)
        return "unknown flags";
    return NULL;
}

long wire_encode_members(uint8_t *out, size_t cap, const wire_member *m, size_t n, const wire_revocation *r,
                         size_t n_revoked)
{
    if ((!out && cap) || n > WIRE_MEMBERS_MAX || n_revoked > WIRE_REVOKED_MAX || (n && !m) || (n_revoked && !r))
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (wire_member_check(&m[i]))
            return -EINVAL;
    for (size_t i = 0; i < n_revoked; i++)
        if (!r[i].sig)
            return -EINVAL;
    wire_wr w = {out, cap, 0, 0};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w, wr_write);
    msgpack_pack_array(&pk, wire_fields[WIRE_MEMBERS]);
    msgpack_pack_uint64(&pk, WIRE_MEMBERS);
    msgpack_pack_array(&pk, n);
    for (size_t i = 0; i < n; i++) {
        msgpack_pack_array(&pk, 6);
        msgpack_pack_uint64(&pk, m[i].id);
        msgpack_pack_uint64(&pk, m[i].since);
        msgpack_pack_str_with_body(&pk, m[i].host, m[i].host_len);
        msgpack_pack_uint64(&pk, m[i].port);
        msgpack_pack_uint64(&pk, m[i].flags);
        msgpack_pack_bin_with_body(&pk, m[i].cred, m[i].cred ? WIRE_CRED_LEN : 0);
    }
    msgpack_pack_array(&pk, n_revoked);
    for (size_t i = 0; i < n_revoked; i++) {
        msgpack_pack_array(&pk, 2);
        msgpack_pack_uint64(&pk, r[i].serial);
        msgpack_pack_bin_with_body(&pk, r[i].sig, WIRE_SIG_LEN);
    }
    return wr_done(&w);
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
        if ((!out && cap) || (!m->push.payload && m->push.payload_len) || wire_push_check(&m->push, &why) >= 0)
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
        return encode_model(out, cap, m->model.round, m->model.payload, NULL, 1.0f, m->model.dim, m->model.hash);
    case WIRE_MEMBERS:
        return wire_encode_members(out, cap, m->members.m, m->members.n, m->members.r, m->members.n_revoked);
    }
    return -EINVAL;
}

size_t wire_push_bound(size_t dim, size_t payload_len)
{
    if (dim > WIRE_MAX_DIM || payload_len > SIZE_MAX / 2)
        return 0;
    size_t tensors = gsp_sync_bytes(dim, dim); /* the longest: a SYNC with every correction */
    size_t body = tensors > payload_len ? tensors : payload_len;
    size_t n = WIRE_PUSH_HEADER_MAX + body;
    return n > WIRE_MEMBERS_BYTES_MAX ? n : WIRE_MEMBERS_BYTES_MAX; /* (the longest other message) */
}

size_t wire_frame_max(size_t dim, size_t delta_bound)
{
    const size_t msg = wire_push_bound(dim, delta_bound);
    if (!msg)
        return 0;
    return msg > SEC_PIECE_MAX ? SEC_FRAME_MAX : msg + SEC_ABYTES;
}

size_t wire_push_scratch_bound(size_t dim)
{
    if (dim > WIRE_MAX_DIM)
        return 0;
    return gsp_sync_bytes(dim, dim) + _Alignof(double) - 1; /* (more than a RAW's 8 * dim) */
}
