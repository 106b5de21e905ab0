/* The wire's message layer (peer/wire/wire.h, peer/wire/WIRE.md "Messages"), version 8
 * (PUSH carries the sender's incarnation, a DELTA's origin and a SYNC's base;
 * MODEL_REQUEST, MODEL, ACK and MODEL_SOON; a PUSH's or MODEL's last field is
 * its payload's length, a uint, and the payload is the bytes after the
 * array): every type
 * round-trips bit for bit; what the encoder writes is msgpack that msgpack-c's
 * own unpacker reads as the schema says; the decoder rejects with -EBADMSG
 * every strict prefix, trailing bytes, wrong types, out-of-range integers,
 * lengths that disagree with the schema and hostile counts (without
 * allocating), and survives random corruption (inputs live in exactly-sized
 * heap blocks, so ASan sees any over-read); decoded PUSHes drive gossip/ to
 * exactly the state the original messages do. msgpack-c's unpacker is used
 * here only, as an independent reader of what we write. */
#include "peer/wire/wire.h"
#include "peer/wire/sec.h"
#include "tests/wire_members_equal.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "tests/exact_copy.h"
#include "tests/le_bytes.h"

TestSuite(peer_wire, .timeout = 120);

/* ---- helpers --------------------------------------------------------------- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void) /* splitmix64: the test's own stream */
{
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Decode from an exactly-sized copy. The message is a view into that copy:
 * with keep, the caller gets it to free after using m; without, it is freed
 * at once and only m's scalar fields may be used (its pointers are cleared). */
static int decode_copy(wire_msg *m, const uint8_t *buf, size_t len, wire_err *e, uint8_t **keep)
{
    uint8_t *c = exact_copy(buf, len);
    int rc = wire_decode(m, c, len, e);
    if (keep) {
        *keep = c;
        return rc;
    }
    free(c);
    if (m && m->type == WIRE_PUSH)
        m->push.payload = NULL;
    else if (m && m->type == WIRE_AUTH)
        m->auth.hash = NULL;
    else if (m && m->type == WIRE_GOODBYE)
        m->goodbye.reason = NULL;
    else if (m && m->type == WIRE_MODEL)
        m->model.hash = m->model.payload = NULL;
    return rc;
}

static int decode_exact(wire_msg *m, const uint8_t *buf, size_t len, wire_err *e)
{
    return decode_copy(m, buf, len, e, NULL);
}

/* A PUSH with random contents; tensors are random bit patterns (NaNs
 * included): the wire must carry them bit for bit without looking. */
typedef struct push_case {
    gsp_msg m;
    double *x;
    float *ref;
    uint32_t *idx; /* SYNC: the corrections' positions (NULL: every one) */
    double *corr;
    uint8_t *payload;
} push_case;

static void push_make(push_case *c, gsp_kind kind, size_t dim)
{
    memset(c, 0, sizeof *c);
    c->m.src = 3, c->m.dst = 5;
    c->m.round = (long)(rnd() % 100000);
    c->m.seq = 1 + rnd() % 1000;
    uint64_t shift = rnd() % 65; /* incarnations of every width, 0 included */
    c->m.incarnation = shift == 64 ? 0 : rnd() >> shift;
    c->m.kind = kind;
    c->m.w_total = 0.25 + (double)(rnd() % 1000) / 7.0;
    c->m.dim = dim;
    if (gsp_kind_payload(kind)) {
        c->m.gain = (float)(rnd() % 1000) / 3.0f - 100.0f;
        c->m.step = (float)(1 + rnd() % 100) / 100.0f;
        c->m.origin = rnd() >> (rnd() % 64); /* ids of every width */
        size_t len = 1 + rnd() % (dim * 2 + 40);
        c->payload = malloc(len);
        for (size_t i = 0; i < len; i++)
            c->payload[i] = (uint8_t)rnd();
        c->m.payload = c->payload, c->m.payload_len = len;
        return;
    }
    if (kind == GSP_RAW) {
        c->x = malloc((dim ? dim : 1) * sizeof *c->x);
        for (size_t i = 0; i < dim; i++) {
            uint64_t u = rnd();
            memcpy(&c->x[i], &u, sizeof u);
        }
        c->m.x_total = c->x;
        return;
    }
    c->m.base = rnd() % c->m.seq; /* what the receiver held: below seq, 0 included */
    c->ref = malloc((dim ? dim : 1) * sizeof *c->ref);
    for (size_t i = 0; i < dim; i++) {
        uint32_t u = (uint32_t)rnd();
        memcpy(&c->ref[i], &u, sizeof u);
    }
    c->m.ref = c->ref;
    /* The corrections: a short list (a third of the positions), a long one
     * (7 in 8: it goes as every value), or every value. */
    const unsigned form = (unsigned)(rnd() % 3);
    c->corr = malloc((dim ? dim : 1) * sizeof *c->corr);
    c->idx = form < 2 ? malloc((dim ? dim : 1) * sizeof *c->idx) : NULL;
    size_t n = 0;
    for (size_t i = 0; i < dim; i++)
        if (form == 2 || (form == 1 ? rnd() % 8 != 0 : rnd() % 3 == 0)) {
            uint64_t u = rnd();
            memcpy(&c->corr[n], &u, sizeof u);
            if (c->idx)
                c->idx[n] = (uint32_t)i;
            n++;
        }
    c->m.n_corr = n, c->m.corr_idx = c->idx, c->m.corr = c->corr;
}

/* A SYNC's corrections as every value (0 where none). */
static void corr_expand(const gsp_msg *m, double *out)
{
    memset(out, 0, m->dim * sizeof *out);
    for (size_t j = 0; j < m->n_corr; j++)
        out[m->corr_idx ? m->corr_idx[j] : j] = m->corr[j];
}

/* Two SYNCs carry the same corrections, bit for bit. */
static int same_corr(const gsp_msg *a, const gsp_msg *b)
{
    const size_t n = a->dim ? a->dim : 1;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    corr_expand(a, x), corr_expand(b, y);
    const int same = a->dim == b->dim && !memcmp(x, y, a->dim * sizeof *x);
    free(x), free(y);
    return same;
}

static void push_free(push_case *c)
{
    free(c->x);
    free(c->ref);
    free(c->idx), free(c->corr);
    free(c->payload);
}

/* Encode into a buffer of exactly wire_push_bound bytes; returns it and *len. */
static uint8_t *encode_push(const gsp_msg *m, size_t *len)
{
    size_t cap = wire_push_bound(m->dim, m->kind == GSP_DELTA ? m->payload_len : 0);
    cr_assert_gt(cap, 0);
    uint8_t *buf = malloc(cap);
    long n = wire_encode_push(buf, cap, m);
    cr_assert_gt(n, 0, "encode: %ld", n);
    cr_assert_leq((size_t)n, cap);
    *len = (size_t)n;
    return buf;
}

static int same_bits32(float a, float b) { return !memcmp(&a, &b, sizeof a); }
static int same_bits64(double a, double b) { return !memcmp(&a, &b, sizeof a); }

/* Two decoded messages say the same thing (byte fields compared by content). */
static int msg_equal(const wire_msg *a, const wire_msg *b)
{
    if (a->type != b->type)
        return 0;
    switch (a->type) {
    case WIRE_AUTH:
        return !memcmp(a->auth.hash, b->auth.hash, WIRE_HASH_LEN);
    case WIRE_PUSH: {
        const wire_push *p = &a->push, *q = &b->push;
        return p->round == q->round && p->seq == q->seq && p->incarnation == q->incarnation && p->kind == q->kind &&
               p->origin == q->origin && p->base == q->base && same_bits64(p->w_total, q->w_total) &&
               same_bits32(p->gain, q->gain) && same_bits32(p->step, q->step) && p->dim == q->dim &&
               p->payload_len == q->payload_len && (!p->payload_len || !memcmp(p->payload, q->payload, p->payload_len));
    }
    case WIRE_NACK:
        return a->nack.seq == b->nack.seq;
    case WIRE_HEARTBEAT:
        return a->heartbeat.round == b->heartbeat.round;
    case WIRE_ACK:
        return a->ack.seq == b->ack.seq;
    case WIRE_GOODBYE:
        return a->goodbye.len == b->goodbye.len &&
               (!a->goodbye.len || !memcmp(a->goodbye.reason, b->goodbye.reason, a->goodbye.len));
    case WIRE_MODEL_REQUEST:
        return a->model_request.dim == b->model_request.dim;
    case WIRE_MODEL_SOON:
        return a->model_soon.round == b->model_soon.round;
    case WIRE_MODEL:
        return a->model.round == b->model.round && a->model.dim == b->model.dim &&
               !memcmp(a->model.hash, b->model.hash, WIRE_HASH_LEN) &&
               (!a->model.dim || !memcmp(a->model.payload, b->model.payload, a->model.dim * sizeof(float)));
    case WIRE_MEMBERS:
        return wire_members_equal(a, b);
    }
    return 0;
}

/* The dim a message's buffer must be sized for (wire_push_bound covers all types). */
static size_t msg_dim(const wire_msg *m)
{
    return m->type == WIRE_PUSH ? m->push.dim : m->type == WIRE_MODEL ? m->model.dim : 0;
}

/* Re-encode a decoded message, decode that, and require the same message and
 * the same bytes on a second re-encode (the encoder's output is canonical). */
static void reencode_check(const wire_msg *m)
{
    size_t cap = wire_push_bound(msg_dim(m), m->type == WIRE_PUSH ? m->push.payload_len : 0);
    uint8_t *b1 = malloc(cap), *b2 = malloc(cap);
    long n1 = wire_encode(b1, cap, m);
    cr_assert_gt(n1, 0, "re-encode of a decoded %s: %ld", wire_type_name(m->type), n1);
    wire_msg m2;
    wire_err e;
    uint8_t *c;
    cr_assert_eq(decode_copy(&m2, b1, (size_t)n1, &e, &c), 0, "%s: %s", e.field, e.why);
    cr_assert(msg_equal(m, &m2));
    long n2 = wire_encode(b2, cap, &m2);
    cr_assert_eq(n2, n1);
    cr_assert_eq(memcmp(b1, b2, (size_t)n1), 0);
    free(c);
    free(b1);
    free(b2);
}

/* Valid samples of every type, for the prefix, flip and trailing tests. */
typedef struct sample {
    uint8_t *buf;
    size_t len;
} sample;

#define N_SAMPLES 15

/* A MODEL's z: random bit patterns (NaNs included), carried bit for bit. */
static float *model_z(size_t dim)
{
    float *z = malloc((dim ? dim : 1) * sizeof *z);
    cr_assert_not_null(z);
    for (size_t i = 0; i < dim; i++) {
        uint32_t u = (uint32_t)rnd();
        memcpy(&z[i], &u, sizeof u);
    }
    return z;
}

static void samples_make(sample *s)
{
    uint8_t tmp[256];
    uint8_t hash[WIRE_HASH_LEN];
    for (int i = 0; i < WIRE_HASH_LEN; i++)
        hash[i] = (uint8_t)(i * 7 + 1);
    long n;
    int k = 0;
    n = wire_encode_auth(tmp, sizeof tmp, hash);
    s[k].buf = exact_copy(tmp, (size_t)n), s[k++].len = (size_t)n;
    n = wire_encode_nack(tmp, sizeof tmp, 0);
    s[k].buf = exact_copy(tmp, (size_t)n), s[k++].len = (size_t)n;
    n = wire_encode_nack(tmp, sizeof tmp, 1ULL << 40);
    s[k].buf = exact_copy(tmp, (size_t)n), s[k++].len = (size_t)n;
    n = wire_encode_heartbeat(tmp, sizeof tmp, 70000);
    s[k].buf = exact_copy(tmp, (size_t)n), s[k++].len = (size_t)n;
    n = wire_encode_goodbye(tmp, sizeof tmp, "shutting down \xe2\x9c\x93", 17);
    s[k].buf = exact_copy(tmp, (size_t)n), s[k++].len = (size_t)n;
    n = wire_encode_goodbye(tmp, sizeof tmp, "", 0);
    s[k].buf = exact_copy(tmp, (size_t)n), s[k++].len = (size_t)n;
    n = wire_encode_model_request(tmp, sizeof tmp, 3);
    s[k].buf = exact_copy(tmp, (size_t)n), s[k++].len = (size_t)n;
    n = wire_encode_model_request(tmp, sizeof tmp, 0);
    s[k].buf = exact_copy(tmp, (size_t)n), s[k++].len = (size_t)n;
    n = wire_encode_model_soon(tmp, sizeof tmp, 70000);
    s[k].buf = exact_copy(tmp, (size_t)n), s[k++].len = (size_t)n;
    float *z = model_z(3);
    n = wire_encode_model(tmp, sizeof tmp, 70000, z, 3, hash);
    cr_assert_gt(n, 0);
    s[k].buf = exact_copy(tmp, (size_t)n), s[k++].len = (size_t)n;
    free(z);
    n = wire_encode_model(tmp, sizeof tmp, 0, NULL, 0, hash);
    cr_assert_gt(n, 0);
    s[k].buf = exact_copy(tmp, (size_t)n), s[k++].len = (size_t)n;
    static const struct {
        gsp_kind kind;
        size_t dim;
    } pushes[] = {{GSP_RAW, 3}, {GSP_DELTA, 5}, {GSP_SYNC, 2}, {GSP_RAW, 0}};
    for (size_t i = 0; i < sizeof pushes / sizeof *pushes; i++) {
        push_case c;
        push_make(&c, pushes[i].kind, pushes[i].dim);
        s[k].buf = encode_push(&c.m, &s[k].len);
        k++;
        push_free(&c);
    }
    cr_assert_eq(k, N_SAMPLES);
}

static void samples_free(sample *s)
{
    for (int k = 0; k < N_SAMPLES; k++)
        free(s[k].buf);
}

/* A test-side msgpack builder (msgpack-c's sbuffer: allocation is fine here)
 * for messages our encoder would never write. */
typedef struct item {
    char t; /* A array, M map, u uint, i int, f float32, d float64, b bin, s str, n nil, T true, r raw bytes,
             * P a payload: the uint u, then the n bytes at p (WIRE.md: a PUSH's or MODEL's last field
             * is the payload's length; its bytes follow the array) */
    uint64_t u;
    int64_t i;
    double d;
    const void *p;
    size_t n;
} item;

#define A(k) ((item){.t = 'A', .n = (k)})
#define U(v) ((item){.t = 'u', .u = (v)})
#define I(v) ((item){.t = 'i', .i = (v)})
#define F(v) ((item){.t = 'f', .d = (v)})
#define D(v) ((item){.t = 'd', .d = (v)})
#define B(ptr, len) ((item){.t = 'b', .p = (ptr), .n = (len)})
#define S(ptr, len) ((item){.t = 's', .p = (ptr), .n = (len)})
#define RAWB(ptr, len) ((item){.t = 'r', .p = (ptr), .n = (len)})
#define PAY(ptr, len) ((item){.t = 'P', .u = (len), .p = (ptr), .n = (len)})
/* A payload whose length field claims `claim` bytes where n follow. */
#define PAY_CLAIM(claim, ptr, len) ((item){.t = 'P', .u = (claim), .p = (ptr), .n = (len)})
#define NIL ((item){.t = 'n'})

static uint8_t *build(const item *it, size_t n_items, size_t *len)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    for (size_t k = 0; k < n_items; k++) {
        const item *x = &it[k];
        switch (x->t) {
        case 'A': msgpack_pack_array(&pk, x->n); break;
        case 'M': msgpack_pack_map(&pk, x->n); break;
        case 'u': msgpack_pack_uint64(&pk, x->u); break;
        case 'i': msgpack_pack_int64(&pk, x->i); break;
        case 'f': msgpack_pack_float(&pk, (float)x->d); break;
        case 'd': msgpack_pack_double(&pk, x->d); break;
        case 'b': msgpack_pack_bin_with_body(&pk, x->p, x->n); break;
        case 's': msgpack_pack_str_with_body(&pk, x->p, x->n); break;
        case 'n': msgpack_pack_nil(&pk); break;
        case 'T': msgpack_pack_true(&pk); break;
        case 'r': msgpack_sbuffer_write(&sb, x->p, x->n); break;
        case 'P': msgpack_pack_uint64(&pk, x->u), msgpack_sbuffer_write(&sb, x->p, x->n); break;
        default: cr_assert_fail("bad item");
        }
    }
    *len = sb.size;
    uint8_t *out = exact_copy((const uint8_t *)sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    return out;
}

static int decode_items(const item *it, size_t n_items, wire_msg *m, wire_err *e)
{
    size_t len;
    uint8_t *buf = build(it, n_items, &len);
    int rc = wire_decode(m, buf, len, e);
    free(buf);
    return rc;
}

/* A valid PUSH as items (13: array header + 12 fields) with an all-zero
 * payload (seq 4, base 0: a valid SYNC too); the indices of its fields: */
enum { P_TYPE = 1, P_ROUND, P_SEQ, P_INC, P_KIND, P_W, P_GAIN, P_STEP, P_ORIGIN, P_BASE, P_DIM, P_PAYLOAD, P_ITEMS };
static uint8_t zeros[4096];

static void push_items(item *it, gsp_kind kind, size_t dim)
{
    size_t plen = kind == GSP_RAW ? 8 * dim : kind == GSP_SYNC ? 4 * dim + 4 : 6; /* (a SYNC: r, count 0) */
    cr_assert_leq(plen, sizeof zeros);
    it[0] = A(12), it[P_TYPE] = U(WIRE_PUSH), it[P_ROUND] = U(17), it[P_SEQ] = U(4), it[P_INC] = U(9);
    it[P_KIND] = U((uint64_t)kind), it[P_W] = D(1.5), it[P_GAIN] = F(kind == GSP_DELTA ? 0.75 : 0.0);
    it[P_STEP] = F(kind == GSP_DELTA ? 0.5 : 0.0), it[P_ORIGIN] = U(0), it[P_BASE] = U(0), it[P_DIM] = U(dim);
    it[P_PAYLOAD] = PAY(zeros, plen);
}

/* A valid MODEL as items (6: array header + 5 fields), all-zero hash and z. */
enum { M_TYPE = 1, M_ROUND, M_DIM, M_HASH, M_PAYLOAD, M_ITEMS };

static void model_items(item *it, size_t dim)
{
    cr_assert_leq(4 * dim, sizeof zeros);
    it[0] = A(5), it[M_TYPE] = U(WIRE_MODEL), it[M_ROUND] = U(12), it[M_DIM] = U(dim);
    it[M_HASH] = B(zeros, WIRE_HASH_LEN), it[M_PAYLOAD] = PAY(zeros, 4 * dim);
}

/* ---- round trips ------------------------------------------------------------- */

Test(peer_wire, auth_round_trips)
{
    uint8_t hash[WIRE_HASH_LEN], buf[64];
    for (int i = 0; i < WIRE_HASH_LEN; i++)
        hash[i] = (uint8_t)rnd();
    long n = wire_encode_auth(buf, sizeof buf, hash);
    cr_assert_eq(n, 1 + 1 + 2 + WIRE_HASH_LEN);
    wire_msg m;
    uint8_t *c;
    cr_assert_eq(decode_copy(&m, buf, (size_t)n, NULL, &c), 0);
    cr_assert_eq(m.type, WIRE_AUTH);
    cr_assert_eq(memcmp(m.auth.hash, hash, WIRE_HASH_LEN), 0);
    reencode_check(&m);
    free(c);
}

Test(peer_wire, nack_ack_and_heartbeat_round_trip_at_every_integer_width)
{
    static const uint64_t v[] = {0, 1, 127, 128, 255, 256, 65535, 65536, 0xffffffffULL, 0x100000000ULL,
                                 (uint64_t)LONG_MAX, UINT64_MAX};
    uint8_t buf[16];
    for (size_t k = 0; k < sizeof v / sizeof *v; k++) {
        wire_msg m;
        long n = wire_encode_nack(buf, sizeof buf, v[k]);
        cr_assert_gt(n, 0);
        cr_assert_eq(decode_exact(&m, buf, (size_t)n, NULL), 0);
        cr_assert_eq(m.type, WIRE_NACK);
        cr_assert_eq(m.nack.seq, v[k]);
        reencode_check(&m);
        n = wire_encode_ack(buf, sizeof buf, v[k]);
        cr_assert_gt(n, 0);
        cr_assert_eq(decode_exact(&m, buf, (size_t)n, NULL), 0);
        cr_assert_eq(m.type, WIRE_ACK);
        cr_assert_eq(m.ack.seq, v[k]);
        reencode_check(&m);
        if (v[k] > (uint64_t)LONG_MAX) {
            cr_assert_eq(wire_encode_heartbeat(buf, sizeof buf, (long)v[k]), -EINVAL); /* negative as long */
            continue;
        }
        n = wire_encode_heartbeat(buf, sizeof buf, (long)v[k]);
        cr_assert_gt(n, 0);
        cr_assert_eq(decode_exact(&m, buf, (size_t)n, NULL), 0);
        cr_assert_eq(m.type, WIRE_HEARTBEAT);
        cr_assert_eq(m.heartbeat.round, (long)v[k]);
        reencode_check(&m);
    }
}

Test(peer_wire, goodbye_round_trips)
{
    char r128[WIRE_REASON_MAX];
    memset(r128, 'z', sizeof r128);
#define UTF8_REASON "r\xc3\xa9" "d\xc3\xa9marrage \xf0\x9f\x94\x84"
    const struct {
        const char *s;
        size_t len;
    } reasons[] = {{"", 0},    {"bye", 3},  {UTF8_REASON, sizeof UTF8_REASON - 1},
                   {r128, 31}, {r128, 32}, {r128, WIRE_REASON_MAX}};
    uint8_t buf[WIRE_REASON_MAX + 8];
    for (size_t k = 0; k < sizeof reasons / sizeof *reasons; k++) {
        long n = wire_encode_goodbye(buf, sizeof buf, reasons[k].s, reasons[k].len);
        cr_assert_gt(n, 0, "reason %zu: %ld", k, n);
        wire_msg m;
        wire_err e;
        uint8_t *c;
        cr_assert_eq(decode_copy(&m, buf, (size_t)n, &e, &c), 0, "reason %zu: %s: %s", k, e.field, e.why);
        cr_assert_eq(m.type, WIRE_GOODBYE);
        cr_assert_eq(m.goodbye.len, reasons[k].len);
        cr_assert(!reasons[k].len || !memcmp(m.goodbye.reason, reasons[k].s, reasons[k].len));
        reencode_check(&m);
        free(c);
    }
}

/* Every kind at dims 0, 1, 1000 and one whose payload's length needs a uint32 (> 64 KiB). */
Test(peer_wire, push_of_every_kind_round_trips_bit_for_bit)
{
    static const size_t dims[] = {0, 1, 1000, 10000};
    for (int kind = GSP_RAW; kind <= GSP_GATHER; kind++)
        for (size_t d = 0; d < sizeof dims / sizeof *dims; d++)
            for (int rep = 0; rep < 3; rep++) {
                push_case c;
                push_make(&c, (gsp_kind)kind, dims[d]);
                if (rep == 1) /* a first incarnation (the simulator's) */
                    c.m.incarnation = 0;
                if (rep == 2) { /* extremes of the integer fields (a base only a SYNC carries, below its seq) */
                    c.m.round = LONG_MAX, c.m.seq = UINT64_MAX, c.m.incarnation = UINT64_MAX, c.m.origin = UINT64_MAX;
                    c.m.base = kind == GSP_SYNC ? UINT64_MAX - 1 : UINT64_MAX;
                }
                /* What a SYNC says of its base; RAW and DELTA carry 0 whatever gsp_msg.base holds. */
                uint64_t base = kind == GSP_SYNC ? c.m.base : 0;
                size_t len;
                uint8_t *buf = encode_push(&c.m, &len);
                uint8_t *in = exact_copy(buf, len);
                wire_msg m;
                wire_err e;
                cr_assert_eq(wire_decode(&m, in, len, &e), 0, "kind %d dim %zu: %s: %s", kind, dims[d], e.field, e.why);
                cr_assert_eq(m.type, WIRE_PUSH);
                const wire_push *p = &m.push;
                cr_assert_eq(p->round, c.m.round);
                cr_assert_eq(p->seq, c.m.seq);
                cr_assert_eq(p->incarnation, c.m.incarnation);
                cr_assert_eq(p->origin, c.m.origin);
                cr_assert_eq(p->base, base);
                cr_assert_eq(p->kind, c.m.kind);
                cr_assert(same_bits64(p->w_total, c.m.w_total));
                cr_assert(same_bits32(p->gain, c.m.gain));
                cr_assert(same_bits32(p->step, c.m.step));
                cr_assert_eq(p->dim, c.m.dim);
                /* A view: the payload lies inside the input. */
                cr_assert(p->payload >= in && p->payload + p->payload_len == in + len);
                reencode_check(&m);

                size_t sl = wire_push_scratch_bound(p->dim);
                uint8_t *scratch = malloc(sl + 1);
                gsp_msg g;
                cr_assert_eq(wire_push_to_gsp(&m, &g, scratch + 1, sl), 0); /* misaligned on purpose */
                cr_assert_eq(g.src, -1);
                cr_assert_eq(g.dst, -1);
                cr_assert_eq(g.round, c.m.round);
                cr_assert_eq(g.seq, c.m.seq);
                cr_assert_eq(g.incarnation, c.m.incarnation);
                cr_assert_eq(g.origin, c.m.origin);
                cr_assert_eq(g.base, base);
                cr_assert_eq(g.kind, c.m.kind);
                cr_assert(same_bits64(g.w_total, c.m.w_total));
                cr_assert(same_bits32(g.gain, c.m.gain) && same_bits32(g.step, c.m.step));
                cr_assert_eq(g.dim, c.m.dim);
                cr_assert_null(g.owned);
                if (gsp_kind_payload((gsp_kind)kind)) {
                    cr_assert_eq(g.payload, p->payload); /* used in place */
                    cr_assert_eq(g.payload_len, c.m.payload_len);
                    cr_assert_eq(memcmp(g.payload, c.m.payload, g.payload_len), 0);
                    cr_assert_null(g.x_total);
                    cr_assert_null(g.ref);
                } else if (kind == GSP_RAW) {
                    cr_assert_not_null(g.x_total);
                    cr_assert_eq((uintptr_t)g.x_total % _Alignof(double), 0);
                    cr_assert(!dims[d] || !memcmp(g.x_total, c.x, dims[d] * sizeof(double)));
                    cr_assert_null(g.ref);
                } else {
                    cr_assert_null(g.x_total);
                    cr_assert_not_null(g.ref);
                    cr_assert_eq((uintptr_t)g.ref % _Alignof(float), 0);
                    cr_assert(!dims[d] || !memcmp(g.ref, c.ref, dims[d] * sizeof(float)));
                    cr_assert_eq((uintptr_t)g.corr % _Alignof(double), 0);
                    cr_assert(same_corr(&g, &c.m));
                    /* A list goes as a list while it is the shorter form, else as every value. */
                    const int listed = c.m.corr_idx && c.m.n_corr != c.m.dim && !gsp_sync_dense(c.m.dim, c.m.n_corr);
                    cr_assert_eq(g.corr_idx != NULL, listed);
                    cr_assert_eq(g.n_corr, listed ? c.m.n_corr : c.m.dim);
                    cr_assert_eq(p->payload_len, gsp_sync_bytes(c.m.dim, g.n_corr));
                }
                free(scratch);
                free(in);
                free(buf);
                push_free(&c);
            }
}

/* The incarnation (a sender's process run, any uint64) at every msgpack
 * integer width, for every kind, through decode and into the gsp_msg. */
/* A whole model's message taken in where it arrived (wire_push_in_place)
 * holds what the copy out of it holds, bit for bit, aligned, whatever the
 * dims, the list's length and where in its buffer the frame lies. */
Test(peer_wire, a_push_taken_in_place_equals_the_copy)
{
    const size_t dims[] = {1, 2, 7, 8, 33, 1000, 1001};
    for (int kind = GSP_RAW; kind <= GSP_SYNC; kind += GSP_SYNC - GSP_RAW)
        for (size_t d = 0; d < sizeof dims / sizeof *dims; d++)
            for (size_t lead = 0; lead < 8; lead++) { /* bytes before the message: the payload at every alignment */
                push_case c;
                push_make(&c, (gsp_kind)kind, dims[d]);
                size_t len;
                uint8_t *enc = encode_push(&c.m, &len);
                uint8_t *frame = malloc(lead + len);
                memcpy(frame + lead, enc, len);
                wire_msg m;
                wire_err e;
                cr_assert_eq(wire_decode(&m, frame + lead, len, &e), 0, "%s: %s", e.field, e.why);
                const size_t sl = wire_push_scratch_bound(dims[d]);
                void *scratch = malloc(sl);
                gsp_msg copy, in;
                cr_assert_eq(wire_push_to_gsp(&m, &copy, scratch, sl), 0);
                cr_assert_eq(wire_push_in_place(&m, &in, frame + 1), -EINVAL, "a base that is not 8-aligned");
                cr_assert_eq(wire_push_in_place(&m, &in, frame), 0, "dim %zu, %zu bytes before", dims[d], lead);
                cr_assert_eq(in.seq, copy.seq);
                cr_assert_eq(in.kind, copy.kind);
                cr_assert(same_bits64(in.w_total, copy.w_total));
                if (kind == GSP_RAW) {
                    cr_assert_eq((uintptr_t)in.x_total % _Alignof(double), 0);
                    cr_assert_eq(memcmp(in.x_total, copy.x_total, dims[d] * sizeof(double)), 0);
                    cr_assert_eq(memcmp(in.x_total, c.x, dims[d] * sizeof(double)), 0);
                } else {
                    cr_assert_eq(in.base, copy.base);
                    cr_assert_eq(in.n_corr, copy.n_corr);
                    cr_assert_eq(in.corr_idx == NULL, copy.corr_idx == NULL);
                    cr_assert_eq((uintptr_t)in.corr % _Alignof(double), 0, "dim %zu, n %zu", dims[d], in.n_corr);
                    cr_assert_eq(memcmp(in.ref, c.ref, dims[d] * sizeof(float)), 0);
                    cr_assert(!in.corr_idx || !memcmp(in.corr_idx, copy.corr_idx, in.n_corr * sizeof(uint32_t)));
                    cr_assert_eq(memcmp(in.corr, copy.corr, in.n_corr * sizeof(double)), 0);
                    cr_assert(same_corr(&in, &c.m), "the corrections sent");
                }
                free(scratch);
                free(frame);
                free(enc);
                push_free(&c);
            }
    /* Not for a DELTA (its payload is compress/'s bytes, taken as they are), nor past the payload. */
    push_case c;
    push_make(&c, GSP_DELTA, 9);
    size_t len;
    uint8_t *enc = encode_push(&c.m, &len);
    wire_msg m;
    wire_err e;
    gsp_msg g;
    cr_assert_eq(wire_decode(&m, enc, len, &e), 0);
    cr_assert_eq(wire_push_in_place(&m, &g, enc), -EINVAL);
    free(enc);
    push_free(&c);
    push_make(&c, GSP_RAW, 9);
    enc = encode_push(&c.m, &len);
    cr_assert_eq(wire_decode(&m, enc, len, &e), 0);
    cr_assert_eq(wire_push_in_place(&m, &g, enc + len - 8), -EINVAL, "a base after the payload's start");
    free(enc);
    push_free(&c);
}

Test(peer_wire, push_incarnation_round_trips_at_every_integer_width)
{
    static const uint64_t v[] = {0, 1, 127, 128, 255, 256, 65535, 65536, 0xffffffffULL, 0x100000000ULL,
                                 (uint64_t)LONG_MAX, (uint64_t)LONG_MAX + 1, UINT64_MAX - 1, UINT64_MAX};
    /* msgpack sizes of each: fixint, uint8, uint16, uint32, uint64. */
    static const size_t width[] = {1, 1, 1, 2, 2, 3, 3, 5, 5, 9, 9, 9, 9, 9};
    for (int kind = GSP_RAW; kind <= GSP_SYNC; kind++)
        for (size_t k = 0; k < sizeof v / sizeof *v; k++) {
            push_case c;
            push_make(&c, (gsp_kind)kind, 7);
            c.m.incarnation = v[k];
            size_t len;
            uint8_t *buf = encode_push(&c.m, &len);
            c.m.incarnation = 0; /* the same message at the narrowest width: the difference is the field */
            size_t len0;
            uint8_t *buf0 = encode_push(&c.m, &len0);
            cr_assert_eq(len - len0, width[k] - 1, "incarnation %llu: %zu bytes", (unsigned long long)v[k],
                         len - len0 + 1);
            wire_msg m;
            wire_err e;
            uint8_t *in;
            cr_assert_eq(decode_copy(&m, buf, len, &e, &in), 0, "incarnation %llu: %s: %s", (unsigned long long)v[k],
                         e.field, e.why);
            cr_assert_eq(m.type, WIRE_PUSH);
            cr_assert_eq(m.push.incarnation, v[k]);
            cr_assert_eq(m.push.seq, c.m.seq, "the fields around it are where they were");
            cr_assert_eq(m.push.kind, c.m.kind);
            reencode_check(&m);
            size_t sl = wire_push_scratch_bound(m.push.dim);
            void *scratch = malloc(sl);
            gsp_msg g;
            memset(&g, 0x5a, sizeof g);
            cr_assert_eq(wire_push_to_gsp(&m, &g, scratch, sl), 0);
            cr_assert_eq(g.incarnation, v[k]);
            cr_assert_eq(g.seq, c.m.seq);
            free(scratch);
            free(in);
            free(buf0);
            free(buf);
            push_free(&c);
        }
    /* Signed forms of a non-negative incarnation are the same integer; a negative one is not an incarnation. */
    item it[P_ITEMS];
    wire_msg m;
    wire_err e;
    push_items(it, GSP_RAW, 2);
    it[P_INC] = I(0);
    cr_assert_eq(decode_items(it, P_ITEMS, &m, &e), 0, "%s: %s", e.field, e.why);
    cr_assert_eq(m.push.incarnation, 0);
    it[P_INC] = U(UINT64_MAX);
    cr_assert_eq(decode_items(it, P_ITEMS, &m, &e), 0, "%s: %s", e.field, e.why);
    cr_assert_eq(m.push.incarnation, UINT64_MAX);
    const item inc_bad[] = {I(-1), I(INT64_MIN), D(1.0), NIL};
    for (size_t k = 0; k < sizeof inc_bad / sizeof *inc_bad; k++) {
        it[P_INC] = inc_bad[k];
        cr_assert_eq(decode_items(it, P_ITEMS, &m, &e), -EBADMSG, "variant %zu accepted", k);
        cr_assert_str_eq(e.field, "incarnation");
    }
}

static void push_field_rejects(gsp_kind kind, int f, const item *bad, size_t n_bad, const char *field); /* below */

/* A SYNC's base (the last seq of the edge the receiver holds, as its NACK
 * said: the corrections it carries start after it) at every msgpack integer
 * width, through decode and into the gsp_msg, like the incarnation. */
Test(peer_wire, sync_base_round_trips_at_every_integer_width)
{
    static const uint64_t v[] = {0, 1, 127, 128, 255, 256, 65535, 65536, 0xffffffffULL, 0x100000000ULL,
                                 (uint64_t)LONG_MAX, (uint64_t)LONG_MAX + 1, UINT64_MAX - 1};
    /* msgpack sizes of each: fixint, uint8, uint16, uint32, uint64. */
    static const size_t width[] = {1, 1, 1, 2, 2, 3, 3, 5, 5, 9, 9, 9, 9};
    for (size_t k = 0; k < sizeof v / sizeof *v; k++)
        for (int tight = 0; tight <= 1; tight++) {
            push_case c;
            push_make(&c, GSP_SYNC, 7);
            /* Any seq above the base: the largest, and the smallest (base + 1: all but the last was held). */
            c.m.seq = tight ? v[k] + 1 : UINT64_MAX;
            c.m.base = v[k];
            size_t len;
            uint8_t *buf = encode_push(&c.m, &len);
            c.m.base = 0; /* the same message at the narrowest width: the difference is the field */
            size_t len0;
            uint8_t *buf0 = encode_push(&c.m, &len0);
            c.m.base = v[k];
            cr_assert_eq(len - len0, width[k] - 1, "base %llu: %zu bytes", (unsigned long long)v[k], len - len0 + 1);
            wire_msg m;
            wire_err e;
            uint8_t *in;
            cr_assert_eq(decode_copy(&m, buf, len, &e, &in), 0, "base %llu seq %llu: %s: %s", (unsigned long long)v[k],
                         (unsigned long long)c.m.seq, e.field, e.why);
            cr_assert_eq(m.type, WIRE_PUSH);
            cr_assert_eq(m.push.base, v[k]);
            cr_assert_eq(m.push.seq, c.m.seq);
            cr_assert_eq(m.push.origin, c.m.origin, "the fields around it are where they were");
            cr_assert_eq(m.push.dim, 7);
            cr_assert_eq(m.push.payload_len,
                         gsp_sync_bytes(7, c.m.corr_idx && c.m.n_corr != 7 && !gsp_sync_dense(7, c.m.n_corr) ? c.m.n_corr : 7));
            reencode_check(&m);
            size_t sl = wire_push_scratch_bound(m.push.dim);
            void *scratch = malloc(sl);
            gsp_msg g;
            memset(&g, 0x5a, sizeof g);
            cr_assert_eq(wire_push_to_gsp(&m, &g, scratch, sl), 0);
            cr_assert_eq(g.base, v[k]);
            cr_assert_eq(g.seq, c.m.seq);
            cr_assert_eq(memcmp(g.ref, c.ref, 7 * sizeof(float)), 0);
            free(scratch);
            free(in);
            free(buf0);
            free(buf);
            push_free(&c);
        }
    /* RAW and DELTA carry base 0 whatever gsp_msg.base holds (gossip/ fills it
     * for a SYNC only): the same bytes as with base 0, the field one byte. */
    for (int kind = GSP_RAW; kind <= GSP_DELTA; kind++) {
        push_case c;
        push_make(&c, (gsp_kind)kind, 7);
        c.m.base = UINT64_MAX;
        size_t len, len0;
        uint8_t *buf = encode_push(&c.m, &len);
        c.m.base = 0;
        uint8_t *buf0 = encode_push(&c.m, &len0);
        cr_assert_eq(len, len0, "kind %d", kind);
        cr_assert_eq(memcmp(buf, buf0, len), 0, "kind %d", kind);
        wire_msg m;
        cr_assert_eq(decode_exact(&m, buf, len, NULL), 0);
        cr_assert_eq(m.push.base, 0);
        free(buf0);
        free(buf);
        push_free(&c);
    }
    /* Other forms of a non-negative base are the same integer (int8, int64 and
     * uint64 holding 3, under seq 4); a negative one is not a seq, whatever the kind. */
    item it[P_ITEMS];
    wire_msg m;
    wire_err e;
    static const uint8_t int8_3[] = {0xd0, 3}, int64_3[] = {0xd3, 0, 0, 0, 0, 0, 0, 0, 3},
                         uint64_3[] = {0xcf, 0, 0, 0, 0, 0, 0, 0, 3};
    const item three[] = {RAWB(int8_3, sizeof int8_3), RAWB(int64_3, sizeof int64_3), RAWB(uint64_3, sizeof uint64_3)};
    for (size_t k = 0; k < sizeof three / sizeof *three; k++) {
        push_items(it, GSP_SYNC, 2);
        it[P_BASE] = three[k];
        cr_assert_eq(decode_items(it, P_ITEMS, &m, &e), 0, "form %zu: %s: %s", k, e.field, e.why);
        cr_assert_eq(m.push.base, 3);
    }
    const item base_bad[] = {I(-1), I(-200), I(INT64_MIN), D(1.0), F(1.0), S("1", 1), B("1", 1), NIL};
    for (int kind = GSP_RAW; kind <= GSP_SYNC; kind++)
        push_field_rejects((gsp_kind)kind, P_BASE, base_bad, sizeof base_bad / sizeof *base_bad, "base");
}

/* A SYNC brings the corrections of the messages after its base up to its
 * seq, so its base is below its seq: one at or above it is rejected naming
 * "base" (and never written by the encoder). On RAW and DELTA the base means
 * nothing and any value is read. */
Test(peer_wire, sync_base_not_below_seq_is_rejected)
{
    static const struct {
        uint64_t seq, base;
    } bad[] = {{1, 1}, {4, 4}, {4, 5}, {4, UINT64_MAX}, {1000, (uint64_t)1 << 40}, {UINT64_MAX, UINT64_MAX}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        item it[P_ITEMS];
        wire_msg m;
        wire_err e = {0};
        push_items(it, GSP_SYNC, 2);
        it[P_SEQ] = U(bad[k].seq), it[P_BASE] = U(bad[k].base);
        cr_assert_eq(decode_items(it, P_ITEMS, &m, &e), -EBADMSG, "case %zu accepted", k);
        cr_assert_str_eq(e.field, "base", "case %zu: %s: %s", k, e.field, e.why);
        cr_assert_str_eq(e.why, "SYNC base not below seq", "case %zu", k);
        for (int kind = GSP_RAW; kind <= GSP_DELTA; kind++) {
            push_items(it, (gsp_kind)kind, 2);
            it[P_SEQ] = U(bad[k].seq), it[P_BASE] = U(bad[k].base);
            cr_assert_eq(decode_items(it, P_ITEMS, &m, &e), 0, "kind %d case %zu: %s: %s", kind, k, e.field, e.why);
            cr_assert_eq(m.push.base, bad[k].base);
        }
        /* Neither encoder writes such a SYNC. */
        push_case c;
        push_make(&c, GSP_SYNC, 3);
        uint8_t buf[256];
        c.m.seq = bad[k].seq, c.m.base = bad[k].base;
        cr_assert_eq(wire_encode_push(buf, sizeof buf, &c.m), -EINVAL, "case %zu", k);
        c.m.base = bad[k].seq - 1;
        long n = wire_encode_push(buf, sizeof buf, &c.m);
        cr_assert_gt(n, 0, "case %zu: base seq - 1 is a SYNC", k);
        uint8_t *in, again[256];
        cr_assert_eq(decode_copy(&m, buf, (size_t)n, &e, &in), 0, "case %zu: %s: %s", k, e.field, e.why);
        cr_assert_eq(wire_encode(again, sizeof again, &m), n);
        m.push.base = bad[k].base; /* the decoded message, its base moved up to the seq or past it */
        cr_assert_eq(wire_encode(again, sizeof again, &m), -EINVAL, "case %zu", k);
        free(in);
        push_free(&c);
    }
}

/* MODEL_REQUEST carries the asker's dim, any up to WIRE_MAX_DIM. */
Test(peer_wire, model_request_round_trips)
{
    static const size_t dims[] = {0, 1, 127, 128, 65536, WIRE_MAX_DIM};
    uint8_t buf[16];
    for (size_t k = 0; k < sizeof dims / sizeof *dims; k++) {
        long n = wire_encode_model_request(buf, sizeof buf, dims[k]);
        cr_assert_gt(n, 0, "dim %zu: %ld", dims[k], n);
        wire_msg m;
        wire_err e;
        cr_assert_eq(decode_exact(&m, buf, (size_t)n, &e), 0, "dim %zu: %s: %s", dims[k], e.field, e.why);
        cr_assert_eq(m.type, WIRE_MODEL_REQUEST);
        cr_assert_eq(m.model_request.dim, dims[k]);
        reencode_check(&m);
    }
    cr_assert_eq(wire_encode_model_request(buf, sizeof buf, WIRE_MAX_DIM + 1), -EINVAL);
    cr_assert_str_eq(wire_type_name(WIRE_MODEL_REQUEST), "MODEL_REQUEST");
}

/* MODEL: round, dim, the 32-byte hash and z as float32 little-endian, every
 * bit kept (NaN payloads included), hash bytes untouched; the payload and the
 * hash are views into the input. */
Test(peer_wire, model_round_trips_bit_for_bit)
{
    static const size_t dims[] = {0, 1, 3, 40, 1000, 5000, 20000}; /* payload lengths: fixint, uint8, 16 and 32 */
    static const long rounds[] = {0, 1, 70000, LONG_MAX};
    for (size_t d = 0; d < sizeof dims / sizeof *dims; d++)
        for (size_t r = 0; r < sizeof rounds / sizeof *rounds; r++) {
            uint8_t hash[WIRE_HASH_LEN];
            for (int i = 0; i < WIRE_HASH_LEN; i++)
                hash[i] = (uint8_t)rnd();
            float *z = model_z(dims[d]);
            size_t cap = wire_push_bound(dims[d], 0);
            uint8_t *buf = malloc(cap);
            long n = wire_encode_model(buf, cap, rounds[r], dims[d] ? z : NULL, dims[d], hash);
            cr_assert_gt(n, 0, "dim %zu: %ld", dims[d], n);
            cr_assert_geq((size_t)n, 4 * dims[d] + WIRE_HASH_LEN);
            wire_msg m;
            wire_err e;
            uint8_t *in;
            cr_assert_eq(decode_copy(&m, buf, (size_t)n, &e, &in), 0, "dim %zu: %s: %s", dims[d], e.field, e.why);
            cr_assert_eq(m.type, WIRE_MODEL);
            cr_assert_eq(m.model.round, rounds[r]);
            cr_assert_eq(m.model.dim, dims[d]);
            cr_assert_eq(memcmp(m.model.hash, hash, WIRE_HASH_LEN), 0);
            cr_assert(m.model.hash >= in && m.model.hash + WIRE_HASH_LEN <= in + n);
            cr_assert(m.model.payload >= in && m.model.payload + 4 * dims[d] == in + n, "payload is the last bytes");
            /* Little-endian, read here byte by byte: independent of the host. */
            for (size_t i = 0; i < dims[d]; i++) {
                const uint8_t *b = m.model.payload + 4 * i;
                uint32_t v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24, w;
                memcpy(&w, &z[i], 4);
                cr_assert_eq(v, w, "dim %zu value %zu", dims[d], i);
            }
            reencode_check(&m);
            /* wire_encode of the decoded message writes the same bytes as the encoder did. */
            uint8_t *again = malloc(cap);
            cr_assert_eq(wire_encode(again, cap, &m), n);
            cr_assert_eq(memcmp(again, buf, (size_t)n), 0);
            free(again);
            free(in);
            free(buf);
            free(z);
        }
    cr_assert_str_eq(wire_type_name(WIRE_MODEL), "MODEL");
}

/* A peer's z = x / w goes out written as it is encoded: the bytes of
 * x[i] * scale, the same as the encoding of a z made beforehand. */
Test(peer_wire, a_scaled_model_is_encoded_as_the_model_of_the_products)
{
    const size_t dim = 5000;
    float *x = model_z(dim), *z = malloc(dim * sizeof *z);
    const float scale = (float)(1.0 / 0.7);
    for (size_t i = 0; i < dim; i++)
        z[i] = x[i] * scale;
    uint8_t hash[WIRE_HASH_LEN] = {1, 2, 3};
    const size_t cap = wire_push_bound(dim, 0);
    uint8_t *a = malloc(cap), *b = malloc(cap);
    long na = wire_encode_model_scaled(a, cap, 9, x, scale, dim, hash), nb = wire_encode_model(b, cap, 9, z, dim, hash);
    cr_assert_gt(na, 0);
    cr_assert_eq(na, nb);
    cr_assert_eq(memcmp(a, b, (size_t)na), 0, "the same bytes");
    cr_assert_eq(wire_encode_model_scaled(a, cap, 9, x, 1.0f, dim, hash), nb);
    cr_assert_neq(memcmp(a, b, (size_t)na), 0, "scale 1 writes x itself");
    free(a), free(b), free(x), free(z);
}

/* A MODEL's head read from the start of its message alone (a joiner's
 * model landed as it arrives): the same fields as the whole decode, the
 * payload's offset; any prefix short of the payload, another message, or
 * a payload length other than 4 * dim is no head. */
Test(peer_wire, a_model_s_head_reads_from_its_first_bytes)
{
    static const size_t dims[] = {1, 40, 70000};
    for (size_t d = 0; d < sizeof dims / sizeof *dims; d++) {
        uint8_t hash[WIRE_HASH_LEN];
        for (int i = 0; i < WIRE_HASH_LEN; i++)
            hash[i] = (uint8_t)rnd();
        float *z = model_z(dims[d]);
        const size_t cap = wire_push_bound(dims[d], 0);
        uint8_t *buf = malloc(cap);
        const long n = wire_encode_model(buf, cap, 123456, z, dims[d], hash);
        cr_assert_gt(n, 0);
        wire_msg whole, head;
        cr_assert_eq(wire_decode(&whole, buf, (size_t)n, NULL), 0);
        const long at = (long)(whole.model.payload - buf);
        for (long len = 0; len <= at + 8 && len <= n; len++) {
            const long got = wire_model_head(&head, buf, (size_t)len);
            if (len < at) {
                cr_assert_eq(got, -EBADMSG, "dim %zu: %ld of %ld head bytes", dims[d], len, at);
                continue;
            }
            cr_assert_eq(got, at, "dim %zu, %ld bytes", dims[d], len);
            cr_assert_eq(head.type, WIRE_MODEL);
            cr_assert_eq(head.model.round, 123456);
            cr_assert_eq(head.model.dim, dims[d]);
            cr_assert_eq(memcmp(head.model.hash, hash, WIRE_HASH_LEN), 0);
            cr_assert_null(head.model.payload);
        }
        free(buf);
        free(z);
    }
    /* A payload length that is not 4 * dim (2 here): the head says so at once. */
    uint8_t lie[6 + WIRE_HASH_LEN + 1] = {0x95, 0x06, 0x01, 0x02, 0xc4, WIRE_HASH_LEN}; /* ([6, 1, 2, bin hash, len]) */
    wire_msg m;
    for (int len = 7; len <= 9; len++) {
        lie[sizeof lie - 1] = (uint8_t)len;
        cr_assert_eq(wire_model_head(&m, lie, sizeof lie), len == 8 ? (long)sizeof lie : -EBADMSG, "length %d", len);
    }
    /* Not a MODEL, or NULL. */
    uint8_t hb[16];
    const long k = wire_encode_heartbeat(hb, sizeof hb, 7);
    cr_assert_gt(k, 0);
    cr_assert_eq(wire_model_head(&m, hb, (size_t)k), -EBADMSG);
    cr_assert_eq(wire_model_head(NULL, hb, (size_t)k), -EINVAL);
    cr_assert_eq(wire_model_head(&m, NULL, 0), -EINVAL);
}

Test(peer_wire, model_hash_and_payload_lengths_are_exact)
{
    uint8_t hash[WIRE_HASH_LEN + 1] = {0};
    wire_msg m;
    wire_err e;
    item it[M_ITEMS];
    /* The builder's output is accepted: the rejections below are the field's. */
    for (size_t dim = 0; dim < 4; dim++) {
        model_items(it, dim);
        cr_assert_eq(decode_items(it, M_ITEMS, &m, &e), 0, "dim %zu: %s: %s", dim, e.field, e.why);
        cr_assert_eq(m.type, WIRE_MODEL);
        cr_assert_eq(m.model.dim, dim);
    }
    static const size_t hash_bad[] = {0, 1, 31, 33};
    for (size_t k = 0; k < sizeof hash_bad / sizeof *hash_bad; k++) {
        model_items(it, 2);
        it[M_HASH] = B(hash, hash_bad[k]);
        cr_assert_eq(decode_items(it, M_ITEMS, &m, &e), -EBADMSG, "hash of %zu bytes accepted", hash_bad[k]);
        cr_assert_str_eq(e.field, "hash");
    }
    model_items(it, 2);
    it[M_HASH] = B(hash, 31);
    cr_assert_eq(decode_items(it, M_ITEMS, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.why, "not 32 bytes");
    model_items(it, 2);
    it[M_HASH] = S(hash, WIRE_HASH_LEN); /* a str is not a bin */
    cr_assert_eq(decode_items(it, M_ITEMS, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "hash");
    static const struct {
        size_t dim, len;
    } pay_bad[] = {{2, 7}, {2, 9}, {2, 0}, {2, 16}, {0, 1}, {0, 4}, {1, 3}, {3, 8}, {1000, 3999}, {1000, 4001}};
    for (size_t k = 0; k < sizeof pay_bad / sizeof *pay_bad; k++) {
        model_items(it, pay_bad[k].dim);
        it[M_PAYLOAD] = PAY(zeros, pay_bad[k].len);
        cr_assert_eq(decode_items(it, M_ITEMS, &m, &e), -EBADMSG, "case %zu accepted", k);
        cr_assert_str_eq(e.field, "payload", "case %zu: %s: %s", k, e.field, e.why);
        cr_assert_str_eq(e.why, "not 4 * dim bytes", "case %zu", k);
    }
    /* The payload's length is the rest of the message, exactly: 4 * dim claimed
     * with a byte fewer or more after the array is refused, whatever dim says. */
    static const struct {
        size_t claim, have;
        const char *why;
    } tail_bad[] = {{8, 7, "truncated"}, {8, 0, "truncated"}, {8, 9, "trailing bytes after the payload"},
                    {8, 16, "trailing bytes after the payload"}, {0, 8, "trailing bytes after the payload"}};
    for (size_t k = 0; k < sizeof tail_bad / sizeof *tail_bad; k++) {
        model_items(it, 2);
        it[M_PAYLOAD] = PAY_CLAIM(tail_bad[k].claim, zeros, tail_bad[k].have);
        cr_assert_eq(decode_items(it, M_ITEMS, &m, &e), -EBADMSG, "tail case %zu accepted", k);
        cr_assert_str_eq(e.field, "payload", "tail case %zu: %s: %s", k, e.field, e.why);
        cr_assert_str_eq(e.why, tail_bad[k].why, "tail case %zu", k);
    }
    /* The length is a uint: not a str, nor a bin (a version-7 MODEL's payload), nor negative. */
    const item len_bad[] = {S(zeros, 8), B(zeros, 8), I(-8), D(8.0), NIL};
    for (size_t k = 0; k < sizeof len_bad / sizeof *len_bad; k++) {
        model_items(it, 2);
        it[M_PAYLOAD] = len_bad[k];
        cr_assert_eq(decode_items(it, M_ITEMS, &m, &e), -EBADMSG, "payload variant %zu accepted", k);
        cr_assert_str_eq(e.field, "payload", "payload variant %zu: %s: %s", k, e.field, e.why);
    }
    /* The other fields: integers in range, of the right type. */
    const item round_bad[] = {U((uint64_t)LONG_MAX + 1), I(-1), D(1.0), NIL};
    for (size_t k = 0; k < sizeof round_bad / sizeof *round_bad; k++) {
        model_items(it, 2);
        it[M_ROUND] = round_bad[k];
        cr_assert_eq(decode_items(it, M_ITEMS, &m, &e), -EBADMSG, "round variant %zu accepted", k);
        cr_assert_str_eq(e.field, "round");
    }
    const item dim_bad[] = {I(-1), F(2.0), B(zeros, 1)};
    for (size_t k = 0; k < sizeof dim_bad / sizeof *dim_bad; k++) {
        model_items(it, 2);
        it[M_DIM] = dim_bad[k];
        cr_assert_eq(decode_items(it, M_ITEMS, &m, &e), -EBADMSG, "dim variant %zu accepted", k);
        cr_assert_str_eq(e.field, "dim");
    }
}

/* Neither new type names a size above WIRE_MAX_DIM, on either side. */
Test(peer_wire, model_dims_above_wire_max_dim_are_rejected)
{
    wire_msg m;
    wire_err e;
    const uint64_t big[] = {(uint64_t)WIRE_MAX_DIM + 1, (uint64_t)1 << 32, UINT64_MAX};
    for (size_t k = 0; k < sizeof big / sizeof *big; k++) {
        const item req[] = {A(2), U(WIRE_MODEL_REQUEST), U(big[k])};
        cr_assert_eq(decode_items(req, 3, &m, &e), -EBADMSG, "MODEL_REQUEST dim %llu", (unsigned long long)big[k]);
        cr_assert_str_eq(e.field, "dim");
        cr_assert_str_eq(e.why, "out of range");
        item it[M_ITEMS];
        model_items(it, 0);
        it[M_DIM] = U(big[k]);
        it[M_PAYLOAD] = PAY(zeros, 0); /* the dim is refused before any payload is looked at */
        cr_assert_eq(decode_items(it, M_ITEMS, &m, &e), -EBADMSG, "MODEL dim %llu", (unsigned long long)big[k]);
        cr_assert_str_eq(e.field, "dim");
    }
    const item req_max[] = {A(2), U(WIRE_MODEL_REQUEST), U(WIRE_MAX_DIM)};
    cr_assert_eq(decode_items(req_max, 3, &m, &e), 0);
    cr_assert_eq(m.model_request.dim, WIRE_MAX_DIM);
    uint8_t buf[128], hash[WIRE_HASH_LEN] = {0};
    static const float z[1];
    cr_assert_eq(wire_encode_model_request(buf, sizeof buf, WIRE_MAX_DIM + 1), -EINVAL);
    cr_assert_eq(wire_encode_model_request(buf, sizeof buf, SIZE_MAX), -EINVAL);
    cr_assert_eq(wire_encode_model(buf, sizeof buf, 0, z, WIRE_MAX_DIM + 1, hash), -EINVAL);
    wire_msg big_model = {.type = WIRE_MODEL,
                          .model = {.round = 0, .dim = WIRE_MAX_DIM + 1, .hash = hash, .payload = zeros}};
    cr_assert_eq(wire_encode(buf, sizeof buf, &big_model), -EINVAL);
    wire_msg big_req = {.type = WIRE_MODEL_REQUEST, .model_request.dim = WIRE_MAX_DIM + 1};
    cr_assert_eq(wire_encode(buf, sizeof buf, &big_req), -EINVAL);
}

/* Decoded PUSHes drive gossip/ exactly like the messages they came from:
 * two copies of one receiver, one fed gsp_emit's messages directly, one fed
 * them through encode/decode/wire_push_to_gsp, end bit-identical. */
static void absorb_through_the_wire(const char *codec)
{
    enum { DIM = 257, ROUNDS = 24 };
    topo t;
    parse_error te;
    cr_assert_eq(topo_generate(&t, "ring", 2, NULL, &te), 0);
    cmp_spec spec;
    char err[128];
    if (codec)
        cr_assert_eq(cmp_spec_parse(&spec, codec, err, sizeof err), 0, "%s", err);
    float x0[DIM];
    gsp_peer a, b1, b2;
    for (int i = 0; i < DIM; i++)
        x0[i] = (float)(rnd() % 2000) / 100.0f - 10.0f;
    cr_assert_eq(gsp_init(&a, 0, 2, DIM, 0, x0), 0);
    for (int i = 0; i < DIM; i++)
        x0[i] = (float)(rnd() % 2000) / 100.0f - 10.0f;
    cr_assert_eq(gsp_init(&b1, 1, 2, DIM, 0, x0), 0);
    cr_assert_eq(gsp_init(&b2, 1, 2, DIM, 0, x0), 0);
    a.incarnation = ((uint64_t)1 << 32) + 5; /* a restarted sender's: travels with every message */
    if (codec) {
        float step = gsp_default_step(&spec, DIM);
        cr_assert_eq(gsp_set_codec(&a, &spec, 9, step), 0);
        cr_assert_eq(gsp_set_codec(&b1, &spec, 9, step), 0);
        cr_assert_eq(gsp_set_codec(&b2, &spec, 9, step), 0);
    }
    size_t cap = wire_push_bound(DIM, codec ? cmp_bound(&spec, DIM) : 0);
    size_t sl = wire_push_scratch_bound(DIM);
    uint8_t *buf = malloc(cap), *scratch = malloc(sl);
    int seen[3] = {0};
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < DIM; i++) /* a stand-in for the optimizer step */
            a.x[i] += (float)((int)(rnd() % 200) - 100) / 1000.0f;
        if (codec && r == ROUNDS / 2)
            gsp_request_sync(&a, 1, gsp_in_seq(&b1, 0));
        topo_out out;
        topo_route(&t, a.round, 0, NULL, &out);
        gsp_msg ms[TOPO_MAX_OUT];
        int n = gsp_emit(&a, &out, ms);
        cr_assert_eq(n, 1);
        long len = wire_encode_push(buf, cap, &ms[0]);
        cr_assert_gt(len, 0);
        wire_msg m;
        gsp_msg g;
        cr_assert_eq(wire_decode(&m, buf, (size_t)len, NULL), 0);
        cr_assert_eq(wire_push_to_gsp(&m, &g, scratch, sl), 0);
        g.src = 0, g.dst = 1;
        cr_assert_eq(ms[0].incarnation, a.incarnation);
        cr_assert_eq(g.incarnation, ms[0].incarnation);
        cr_assert_eq(g.base, ms[0].kind == GSP_SYNC ? ms[0].base : 0, "a SYNC's base travels with it");
        seen[g.kind]++;
        int rc1 = gsp_absorb(&b1, &ms[0]), rc2 = gsp_absorb(&b2, &g);
        cr_assert_eq(rc1, 1);
        cr_assert_eq(rc2, rc1);
    }
    cr_assert_eq(memcmp(b1.x, b2.x, DIM * sizeof(float)), 0);
    cr_assert(same_bits64(b1.w, b2.w));
    cr_assert_eq(b1.stats.absorbed, b2.stats.absorbed);
    if (codec)
        cr_assert(seen[GSP_DELTA] > 0 && seen[GSP_SYNC] > 0);
    else
        cr_assert_eq(seen[GSP_RAW], ROUNDS);
    free(buf);
    free(scratch);
    gsp_free(&a);
    gsp_free(&b1);
    gsp_free(&b2);
    topo_free(&t);
}

Test(peer_wire, decoded_push_absorbs_like_the_original_raw)
{
    absorb_through_the_wire(NULL);
}

Test(peer_wire, decoded_push_absorbs_like_the_original_compressed)
{
    absorb_through_the_wire("topk:0.1");
    absorb_through_the_wire("qsgd:4");
}

/* ---- what we write is the schema in msgpack --------------------------------- */

/* The array at the start of buf, read by msgpack-c; returns the bytes it took. */
static size_t unpack_array(msgpack_unpacked *u, const uint8_t *buf, size_t len)
{
    size_t off = 0;
    msgpack_unpacked_init(u);
    cr_assert_eq(msgpack_unpack_next(u, (const char *)buf, len, &off), MSGPACK_UNPACK_SUCCESS);
    cr_assert_leq(off, len);
    cr_assert_eq(u->data.type, MSGPACK_OBJECT_ARRAY);
    return off;
}

/* A message that is the array alone. */
static void unpack_whole(msgpack_unpacked *u, const uint8_t *buf, size_t len)
{
    size_t off = unpack_array(u, buf, len);
    cr_assert_eq(off, len, "msgpack-c reads %zu of %zu bytes", off, len);
}

/* A PUSH or MODEL: the array, whose last element (o, read by msgpack-c) is
 * a uint, the payload's length, written in its shortest form (msgpack-c's
 * packer writes that), and then exactly that many bytes, the payload, which
 * *payload points to. */
static size_t payload_after(const msgpack_object *o, const uint8_t *buf, size_t len, size_t off,
                            const uint8_t **payload)
{
    cr_assert_eq(o->type, MSGPACK_OBJECT_POSITIVE_INTEGER, "the payload's length is a uint");
    cr_assert_eq(o->via.u64, len - off, "the length is the bytes after the array (%zu)", len - off);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_uint64(&pk, o->via.u64);
    cr_assert_leq(sb.size, off);
    cr_assert_eq(memcmp(buf + off - sb.size, sb.data, sb.size), 0, "the length's shortest form ends the array");
    msgpack_sbuffer_destroy(&sb);
    *payload = buf + off;
    return len - off;
}

Test(peer_wire, encodings_read_back_with_msgpack_c)
{
    uint8_t buf[256];
    msgpack_unpacked u;
    const msgpack_object *o;

    uint8_t hash[WIRE_HASH_LEN];
    memset(hash, 0xab, sizeof hash);
    long n = wire_encode_auth(buf, sizeof buf, hash);
    unpack_whole(&u, buf, (size_t)n);
    o = u.data.via.array.ptr;
    cr_assert_eq(u.data.via.array.size, 2);
    cr_assert_eq(o[0].type, MSGPACK_OBJECT_POSITIVE_INTEGER);
    cr_assert_eq(o[0].via.u64, 0);
    cr_assert_eq(o[1].type, MSGPACK_OBJECT_BIN);
    cr_assert_eq(o[1].via.bin.size, WIRE_HASH_LEN);
    cr_assert_eq(memcmp(o[1].via.bin.ptr, hash, WIRE_HASH_LEN), 0);
    msgpack_unpacked_destroy(&u);

    n = wire_encode_nack(buf, sizeof buf, 1ULL << 33);
    unpack_whole(&u, buf, (size_t)n);
    o = u.data.via.array.ptr;
    cr_assert_eq(u.data.via.array.size, 2);
    cr_assert_eq(o[0].via.u64, 2);
    cr_assert_eq(o[1].type, MSGPACK_OBJECT_POSITIVE_INTEGER);
    cr_assert_eq(o[1].via.u64, 1ULL << 33);
    msgpack_unpacked_destroy(&u);

    n = wire_encode_heartbeat(buf, sizeof buf, 12345);
    unpack_whole(&u, buf, (size_t)n);
    o = u.data.via.array.ptr;
    cr_assert_eq(o[0].via.u64, 3);
    cr_assert_eq(o[1].via.u64, 12345);
    msgpack_unpacked_destroy(&u);

    n = wire_encode_goodbye(buf, sizeof buf, "maintenance window", 18);
    unpack_whole(&u, buf, (size_t)n);
    o = u.data.via.array.ptr;
    cr_assert_eq(o[0].via.u64, 4);
    cr_assert_eq(o[1].type, MSGPACK_OBJECT_STR);
    cr_assert_eq(o[1].via.str.size, 18);
    cr_assert_eq(memcmp(o[1].via.str.ptr, "maintenance window", 18), 0);
    msgpack_unpacked_destroy(&u);

    for (int kind = GSP_RAW; kind <= GSP_SYNC; kind++) {
        push_case c;
        push_make(&c, (gsp_kind)kind, 300);
        if (kind != GSP_SYNC)
            c.m.base = 12345; /* only a SYNC's goes out: the others write 0 */
        size_t len;
        uint8_t *pb = encode_push(&c.m, &len);
        const size_t off = unpack_array(&u, pb, len);
        o = u.data.via.array.ptr;
        cr_assert_eq(u.data.via.array.size, 12);
        cr_assert_eq(o[0].via.u64, 1);
        for (int f = 1; f <= 4; f++)
            cr_assert_eq(o[f].type, MSGPACK_OBJECT_POSITIVE_INTEGER);
        cr_assert_eq(o[1].via.u64, (uint64_t)c.m.round);
        cr_assert_eq(o[2].via.u64, c.m.seq);
        cr_assert_eq(o[3].via.u64, c.m.incarnation);
        cr_assert_eq(o[4].via.u64, (uint64_t)kind);
        cr_assert_eq(o[5].type, MSGPACK_OBJECT_FLOAT64);
        cr_assert(same_bits64(o[5].via.f64, c.m.w_total));
        cr_assert_eq(o[6].type, MSGPACK_OBJECT_FLOAT32);
        cr_assert(same_bits32((float)o[6].via.f64, c.m.gain));
        cr_assert_eq(o[7].type, MSGPACK_OBJECT_FLOAT32);
        cr_assert(same_bits32((float)o[7].via.f64, c.m.step));
        cr_assert_eq(o[8].type, MSGPACK_OBJECT_POSITIVE_INTEGER);
        cr_assert_eq(o[8].via.u64, c.m.origin);
        cr_assert_eq(o[9].type, MSGPACK_OBJECT_POSITIVE_INTEGER);
        cr_assert_eq(o[9].via.u64, kind == GSP_SYNC ? c.m.base : 0);
        cr_assert_eq(o[10].type, MSGPACK_OBJECT_POSITIVE_INTEGER);
        cr_assert_eq(o[10].via.u64, 300);
        const uint8_t *bin;
        const size_t size = payload_after(&o[11], pb, len, off, &bin);
        if (kind == GSP_DELTA) {
            cr_assert_eq(size, c.m.payload_len);
            cr_assert_eq(memcmp(bin, c.m.payload, c.m.payload_len), 0);
        } else {
            /* Little-endian, read here byte by byte: independent of the host. */
            if (kind == GSP_RAW) {
                cr_assert_eq(size, 300 * 8);
                for (size_t i = 0; i < 300; i++) {
                    uint64_t w;
                    memcpy(&w, &c.x[i], 8);
                    cr_assert_eq(le_bytes(bin + 8 * i, 8), w);
                }
            } else { /* r, the count, then positions and values or every value */
                for (size_t i = 0; i < 300; i++) {
                    uint32_t fw;
                    memcpy(&fw, &c.ref[i], 4);
                    cr_assert_eq(le_bytes(bin + 4 * i, 4), fw);
                }
                const size_t n = (size_t)le_bytes(bin + 4 * 300, 4), head = 4 * 300 + 4;
                const int listed = n != 300;
                cr_assert_eq(listed, c.m.corr_idx && !gsp_sync_dense(300, c.m.n_corr));
                cr_assert_eq(size, head + (listed ? 12 * n : 8 * 300));
                double want[300], got[300] = {0};
                corr_expand(&c.m, want);
                for (size_t j = 0; j < n; j++) {
                    const size_t i = listed ? (size_t)le_bytes(bin + head + 4 * j, 4) : j;
                    cr_assert_lt(i, 300);
                    const uint64_t v = le_bytes(bin + head + (listed ? 4 * n : 0) + 8 * j, 8);
                    memcpy(&got[i], &v, 8);
                }
                cr_assert_eq(memcmp(want, got, sizeof want), 0);
            }
        }
        msgpack_unpacked_destroy(&u);
        free(pb);
        push_free(&c);
    }
    /* An incarnation that needs all 64 bits is read back as such; so is a SYNC's base. */
    push_case c;
    push_make(&c, GSP_RAW, 1);
    c.m.incarnation = UINT64_MAX;
    size_t len;
    uint8_t *pb = encode_push(&c.m, &len);
    size_t off = unpack_array(&u, pb, len);
    const uint8_t *tail;
    cr_assert_eq(payload_after(&u.data.via.array.ptr[11], pb, len, off, &tail), 8);
    o = u.data.via.array.ptr;
    cr_assert_eq(u.data.via.array.size, 12);
    cr_assert_eq(o[3].type, MSGPACK_OBJECT_POSITIVE_INTEGER);
    cr_assert_eq(o[3].via.u64, UINT64_MAX);
    msgpack_unpacked_destroy(&u);
    free(pb);
    push_free(&c);
    push_make(&c, GSP_SYNC, 1);
    c.m.seq = UINT64_MAX, c.m.base = UINT64_MAX - 1;
    pb = encode_push(&c.m, &len);
    off = unpack_array(&u, pb, len);
    cr_assert_eq(payload_after(&u.data.via.array.ptr[11], pb, len, off, &tail), gsp_sync_bytes(1, c.m.n_corr));
    o = u.data.via.array.ptr;
    cr_assert_eq(u.data.via.array.size, 12);
    cr_assert_eq(o[9].type, MSGPACK_OBJECT_POSITIVE_INTEGER);
    cr_assert_eq(o[9].via.u64, UINT64_MAX - 1);
    msgpack_unpacked_destroy(&u);
    free(pb);
    push_free(&c);

    n = wire_encode_model_request(buf, sizeof buf, 70000);
    unpack_whole(&u, buf, (size_t)n);
    o = u.data.via.array.ptr;
    cr_assert_eq(u.data.via.array.size, 2);
    cr_assert_eq(o[0].via.u64, 5);
    cr_assert_eq(o[1].type, MSGPACK_OBJECT_POSITIVE_INTEGER);
    cr_assert_eq(o[1].via.u64, 70000);
    msgpack_unpacked_destroy(&u);

    enum { MD = 40 };
    float *z = model_z(MD);
    memset(hash, 0xcd, sizeof hash);
    hash[0] = 0x01, hash[WIRE_HASH_LEN - 1] = 0xfe;
    n = wire_encode_model(buf, sizeof buf, 123456, z, MD, hash);
    cr_assert_gt(n, 0);
    off = unpack_array(&u, buf, (size_t)n);
    o = u.data.via.array.ptr;
    cr_assert_eq(u.data.via.array.size, 5);
    cr_assert_eq(o[0].via.u64, 6);
    cr_assert_eq(o[1].type, MSGPACK_OBJECT_POSITIVE_INTEGER);
    cr_assert_eq(o[1].via.u64, 123456);
    cr_assert_eq(o[2].type, MSGPACK_OBJECT_POSITIVE_INTEGER);
    cr_assert_eq(o[2].via.u64, MD);
    cr_assert_eq(o[3].type, MSGPACK_OBJECT_BIN);
    cr_assert_eq(o[3].via.bin.size, WIRE_HASH_LEN);
    cr_assert_eq(memcmp(o[3].via.bin.ptr, hash, WIRE_HASH_LEN), 0);
    const uint8_t *zb;
    cr_assert_eq(payload_after(&o[4], buf, (size_t)n, off, &zb), 4 * MD);
    for (size_t i = 0; i < MD; i++) {
        const uint8_t *b = zb + 4 * i;
        uint32_t v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24, w;
        memcpy(&w, &z[i], 4);
        cr_assert_eq(v, w);
    }
    msgpack_unpacked_destroy(&u);
    free(z);
}

/* ---- sizes ---------------------------------------------------------------- */

Test(peer_wire, bound_covers_every_message_and_enospc_never_writes_past_cap)
{
    sample s[N_SAMPLES];
    samples_make(s);
    for (int k = 0; k < N_SAMPLES; k++)
        cr_assert_leq(s[k].len, wire_push_bound(5, 16));
    /* Re-encode each sample into every too-small buffer. */
    for (int k = 0; k < N_SAMPLES; k++) {
        wire_msg m;
        cr_assert_eq(wire_decode(&m, s[k].buf, s[k].len, NULL), 0); /* s[k].buf is already exact */
        uint8_t *buf = malloc(s[k].len + 16);
        for (size_t cap = 0; cap < s[k].len; cap++) {
            memset(buf, 0xa5, s[k].len + 16);
            cr_assert_eq(wire_encode(buf, cap, &m), -ENOSPC, "sample %d cap %zu", k, cap);
            for (size_t i = cap; i < s[k].len + 16; i++)
                cr_assert_eq(buf[i], 0xa5, "sample %d cap %zu wrote byte %zu", k, cap, i);
        }
        cr_assert_eq(wire_encode(buf, s[k].len, &m), (long)s[k].len);
        cr_assert_eq(memcmp(buf, s[k].buf, s[k].len), 0);
        free(buf);
    }
    samples_free(s);
    /* The bound is tight within the worst-case header. */
    for (int kind = GSP_RAW; kind <= GSP_SYNC; kind++) {
        push_case c;
        push_make(&c, (gsp_kind)kind, 20000);
        c.m.round = LONG_MAX, c.m.seq = UINT64_MAX, c.m.incarnation = UINT64_MAX, c.m.origin = UINT64_MAX;
        c.m.base = UINT64_MAX - 1; /* a SYNC's, below its seq; RAW and DELTA write 0 */
        c.m.corr_idx = NULL, c.m.n_corr = kind == GSP_SYNC ? 20000 : 0; /* (its longest: every correction) */
        size_t len;
        uint8_t *b = encode_push(&c.m, &len);
        /* In the SYNC, only dim (uint16: 3 bytes, not 9) and the payload's
         * length (240004, a uint32: 5 bytes, not 9) are shorter than the worst case. */
        cr_assert_leq(len, wire_push_bound(20000, 0));
        if (kind == GSP_SYNC) {
            cr_assert_eq(gsp_sync_bytes(20000, 20000), 240004);
            cr_assert_eq(wire_push_bound(20000, 0) - len, 6 + 4);
            cr_assert_eq(len - 240004, WIRE_PUSH_HEADER_MAX - 6 - 4, "the header as the bound counts it");
        }
        free(b);
        push_free(&c);
    }
    /* A MODEL of dim values fits the bound for dim, whatever its round; so do
     * a MODEL_REQUEST and the small types at dim 0. */
    static const size_t mdims[] = {0, 1, 2, 31, 32, 1000, 16383, 16384, 20000, 70000};
    uint8_t hash[WIRE_HASH_LEN];
    memset(hash, 0x77, sizeof hash);
    for (size_t d = 0; d < sizeof mdims / sizeof *mdims; d++) {
        size_t cap = wire_push_bound(mdims[d], 0);
        cr_assert_gt(cap, 0);
        float *z = model_z(mdims[d]);
        uint8_t *b = malloc(cap);
        long n = wire_encode_model(b, cap, LONG_MAX, z, mdims[d], hash);
        cr_assert_gt(n, 0, "MODEL of dim %zu does not fit wire_push_bound(dim, 0) = %zu: %ld", mdims[d], cap, n);
        cr_assert_leq((size_t)n, cap);
        n = wire_encode_model_request(b, cap, mdims[d]);
        cr_assert_gt(n, 0);
        free(b);
        free(z);
    }
    /* At WIRE_MAX_DIM, by arithmetic: a MODEL's header at most array, type, round (9), dim (9), bin8 hash,
     * and the payload's length (4 * WIRE_MAX_DIM is past 4 GiB: a uint64, 9). */
    cr_assert_gt(4 * (uint64_t)WIRE_MAX_DIM, UINT32_MAX);
    cr_assert_leq(1 + 1 + 9 + 9 + 2 + WIRE_HASH_LEN + 9 + 4 * WIRE_MAX_DIM, wire_push_bound(WIRE_MAX_DIM, 0));
    cr_assert_eq(wire_push_bound(WIRE_MAX_DIM + 1, 0), 0);
    cr_assert_eq(wire_push_scratch_bound(WIRE_MAX_DIM + 1), 0);
    /* The longest PUSH at WIRE_MAX_DIM, a SYNC with every correction (4 + 12 * dim bytes, some 48 GiB), is
     * counted without overflow; so is a DELTA past 4 GiB (a length no msgpack bin could carry). */
    const size_t sync_max = 4 * (size_t)WIRE_MAX_DIM + 4 + 8 * (size_t)WIRE_MAX_DIM;
    cr_assert_eq(gsp_sync_bytes(WIRE_MAX_DIM, WIRE_MAX_DIM), sync_max);
    cr_assert_eq(wire_push_bound(WIRE_MAX_DIM, 0), WIRE_PUSH_HEADER_MAX + sync_max);
    cr_assert_eq(wire_push_bound(1, (size_t)UINT32_MAX + 1), WIRE_PUSH_HEADER_MAX + (size_t)UINT32_MAX + 1);
    cr_assert_eq(wire_push_bound(WIRE_MAX_DIM, sync_max + 1), WIRE_PUSH_HEADER_MAX + sync_max + 1);
    /* The worst header: array, type, round, seq, incarnation (9 each), kind, w_total (9), gain, step (5 each),
     * origin, base, dim and the payload's length (9 each). */
    cr_assert_eq(WIRE_PUSH_HEADER_MAX, 1 + 1 + 9 + 9 + 9 + 1 + 9 + 5 + 5 + 9 + 9 + 9 + 9);
}

/* ---- malformed input ------------------------------------------------------ */

Test(peer_wire, every_strict_prefix_is_rejected)
{
    sample s[N_SAMPLES];
    samples_make(s);
    for (int k = 0; k < N_SAMPLES; k++)
        for (size_t len = 0; len < s[k].len; len++) {
            wire_msg m;
            memset(&m, 0x5a, sizeof m);
            cr_assert_eq(decode_exact(&m, s[k].buf, len, NULL), -EBADMSG, "sample %d prefix %zu", k, len);
            wire_msg zero;
            memset(&zero, 0, sizeof zero);
            cr_assert_eq(memcmp(&m, &zero, sizeof m), 0, "a failed decode leaves *m zeroed");
        }
    wire_msg m;
    cr_assert_eq(wire_decode(&m, NULL, 0, NULL), -EBADMSG);
    cr_assert_eq(wire_decode(&m, NULL, 1, NULL), -EINVAL);
    cr_assert_eq(wire_decode(NULL, s[0].buf, s[0].len, NULL), -EINVAL);
    samples_free(s);
}

Test(peer_wire, random_bit_flips_decode_or_fail_cleanly)
{
    sample s[N_SAMPLES];
    samples_make(s);
    int ok = 0, bad = 0;
    for (int k = 0; k < N_SAMPLES; k++)
        for (int rep = 0; rep < 3000; rep++) {
            uint8_t *c = exact_copy(s[k].buf, s[k].len);
            int flips = 1 + (int)(rnd() % 3);
            for (int f = 0; f < flips; f++) {
                size_t bit = rnd() % (s[k].len * 8);
                c[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            }
            wire_msg m;
            wire_err e = {0};
            int rc = wire_decode(&m, c, s[k].len, &e);
            cr_assert(rc == 0 || rc == -EBADMSG, "rc %d", rc);
            if (rc == 0) {
                ok++;
                reencode_check(&m);
                if (m.type == WIRE_PUSH) {
                    size_t sl = wire_push_scratch_bound(m.push.dim);
                    void *scratch = malloc(sl ? sl : 1);
                    gsp_msg g;
                    cr_assert_eq(wire_push_to_gsp(&m, &g, scratch, sl), 0);
                    free(scratch);
                }
            } else {
                bad++;
                cr_assert_not_null(e.why);
                cr_assert_not_null(e.field);
                cr_assert_leq(e.offset, s[k].len);
            }
            free(c);
        }
    cr_assert(ok > 0 && bad > 0, "ok %d bad %d: both outcomes are exercised", ok, bad);
    samples_free(s);
}

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* Counts and lengths claiming gigabytes are rejected from the header alone:
 * nothing is allocated (a decode returns a view and there is nothing to free,
 * so any allocation would show as heap growth here, and as a leak to LSan). */
Test(peer_wire, hostile_counts_and_lengths_are_rejected_without_allocating)
{
    static const uint8_t array32[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00};
    static const uint8_t array16[] = {0xdc, 0xff, 0xff, 0x01, 0x00};
    /* A PUSH's 12 elements for a HEARTBEAT; a version-4 PUSH's 11. */
    static const uint8_t array32_12[] = {0xdd, 0x00, 0x00, 0x00, 0x0c, 0x03, 0x00};
    static const uint8_t array32_11[] = {0xdd, 0x00, 0x00, 0x00, 0x0b, 0x01, 0x00};
    static const uint8_t array32_9[] = {0xdd, 0x00, 0x00, 0x00, 0x09, 0x01, 0x00}; /* a version-1 PUSH's 9 */
    static const uint8_t auth_bin32[] = {0x92, 0x00, 0xc6, 0xff, 0xff, 0xff, 0xff, 0x01, 0x02};
    /* PUSH RAW (incarnation 7, origin 0, base 0), dim 2, a payload length (uint32) claiming 4 GiB - 1
     * where one byte follows. */
    static const uint8_t push_len32[] = {0x9c, 0x01, 0x00, 0x01, 0x07, 0x00,             /* type .. kind */
                                         0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0,             /* w_total 1.0 */
                                         0xca, 0, 0, 0, 0, 0xca, 0, 0, 0, 0,             /* gain, step */
                                         0x00, 0x00, 0x02, 0xce, 0xff, 0xff, 0xff, 0xff, /* origin, base, dim, length */
                                         0};
    /* The same claiming 2^64 - 1 bytes (a uint64 length: no 4 GiB cap on the wire, only what follows). */
    static const uint8_t push_len64[] = {0x9c, 0x01, 0x00, 0x01, 0x07, 0x00,
                                         0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0,
                                         0xca, 0, 0, 0, 0, 0xca, 0, 0, 0, 0,
                                         0x00, 0x00, 0x02, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                         0};
    /* The same claiming 2^63 values: dim out of range before the payload. */
    static const uint8_t push_dim[] = {0x9c, 0x01, 0x00, 0x01, 0x07, 0x00,
                                       0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0,
                                       0xca, 0, 0, 0, 0, 0xca, 0, 0, 0, 0,
                                       0x00, 0x00, 0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0, /* origin, base, dim uint64 */
                                       0x00};
    /* MODEL round 1, dim 2, a hash bin32 claiming 4 GiB - 1. */
    static const uint8_t model_hash32[] = {0x95, 0x06, 0x01, 0x02, 0xc6, 0xff, 0xff, 0xff, 0xff, 0};
    /* MODEL round 1, dim 2, a good hash, then a payload length (uint32) claiming 4 GiB - 1 (not 8 bytes)
     * where one byte follows. */
    uint8_t model_len32[4 + 2 + WIRE_HASH_LEN + 6] = {0x95, 0x06, 0x01, 0x02, 0xc4, WIRE_HASH_LEN};
    memcpy(model_len32 + 4 + 2 + WIRE_HASH_LEN, (const uint8_t[]){0xce, 0xff, 0xff, 0xff, 0xff, 0}, 6);
    /* MODEL and MODEL_REQUEST claiming 2^63 values. */
    static const uint8_t model_dim[] = {0x95, 0x06, 0x01, 0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0, 0xc4, 0};
    static const uint8_t request_dim[] = {0x92, 0x05, 0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t goodbye_str8[] = {0x92, 0x04, 0xd9, 0xff, 'a'};
    const struct {
        const uint8_t *b;
        size_t n;
        const char *field, *why; /* (why: NULL, any) */
    } cases[] = {{array32, sizeof array32, "array", NULL},
                 {array16, sizeof array16, "array", NULL},
                 {array32_12, sizeof array32_12, "array", NULL},
                 {array32_11, sizeof array32_11, "array", NULL},
                 {array32_9, sizeof array32_9, "array", NULL},
                 {auth_bin32, sizeof auth_bin32, "hash", NULL},
                 {push_len32, sizeof push_len32, "payload", "truncated"},
                 {push_len64, sizeof push_len64, "payload", "truncated"},
                 {push_dim, sizeof push_dim, "dim", NULL},
                 {goodbye_str8, sizeof goodbye_str8, "reason", NULL},
                 {model_hash32, sizeof model_hash32, "hash", NULL},
                 {model_len32, sizeof model_len32, "payload", "truncated"},
                 {model_dim, sizeof model_dim, "dim", NULL},
                 {request_dim, sizeof request_dim, "dim", NULL}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        uint8_t *in = exact_copy(cases[k].b, cases[k].n);
        wire_msg m;
        wire_err e;
        size_t before = heap_in_use();
        int rc = wire_decode(&m, in, cases[k].n, &e);
        size_t after = heap_in_use();
        cr_assert_eq(rc, -EBADMSG, "case %zu", k);
        cr_assert_str_eq(e.field, cases[k].field, "case %zu: %s: %s", k, e.field, e.why);
        if (cases[k].why)
            cr_assert_str_eq(e.why, cases[k].why, "case %zu", k);
        cr_assert_eq(after, before, "case %zu: heap grew by %zu bytes", k, after - before);
        free(in);
    }
}

Test(peer_wire, non_shortest_but_valid_encodings_are_accepted)
{
    /* HEARTBEAT as array32 header, type as uint64, round as int64. */
    static const uint8_t hb[] = {0xdd, 0, 0, 0, 2, 0xcf, 0, 0, 0, 0, 0, 0, 0, 3, 0xd3, 0, 0, 0, 0, 0, 0, 0x30, 0x39};
    wire_msg m;
    cr_assert_eq(decode_exact(&m, hb, sizeof hb, NULL), 0);
    cr_assert_eq(m.type, WIRE_HEARTBEAT);
    cr_assert_eq(m.heartbeat.round, 12345);
    /* GOODBYE as array16 with a str8 of 3 bytes; AUTH hash as bin32. */
    static const uint8_t gb[] = {0xdc, 0, 2, 0x04, 0xd9, 3, 'a', 'b', 'c'};
    cr_assert_eq(decode_exact(&m, gb, sizeof gb, NULL), 0);
    cr_assert_eq(m.goodbye.len, 3);
    uint8_t auth[2 + 5 + WIRE_HASH_LEN] = {0x92, 0x00, 0xc6, 0, 0, 0, WIRE_HASH_LEN};
    cr_assert_eq(decode_exact(&m, auth, sizeof auth, NULL), 0);
    cr_assert_eq(m.type, WIRE_AUTH);
    /* PUSH as array16, round uint16, seq int8, incarnation uint64 holding 5, origin uint16 0, base uint32 0,
     * dim uint8 0, RAW, its payload's length 0 as a uint16. */
    static const uint8_t push[] = {0xdc, 0,    12,   0x01, 0xcd, 0,    17,   0xd0, 4,    0xcf, 0,    0,    0,
                                   0,    0,    0,    0,    5,    0x00, 0xcb, 0x3f, 0xf8, 0,    0,    0,    0,
                                   0,    0,    0xca, 0,    0,    0,    0,    0xca, 0,    0,    0,    0,    0xcd,
                                   0,    0,    0xce, 0,    0,    0,    0,    0xcc, 0,    0xcd, 0,    0};
    wire_err e;
    cr_assert_eq(decode_exact(&m, push, sizeof push, &e), 0, "%s: %s", e.field, e.why);
    cr_assert_eq(m.type, WIRE_PUSH);
    cr_assert_eq(m.push.round, 17);
    cr_assert_eq(m.push.seq, 4);
    cr_assert_eq(m.push.incarnation, 5);
    cr_assert_eq(m.push.kind, GSP_RAW);
    cr_assert_eq(m.push.dim, 0);
    cr_assert_eq(m.push.payload_len, 0);
    /* The incarnation as int16 too, and the payload's length 0 as an int8. */
    static const uint8_t push16[] = {0x9c, 0x01, 0x11, 0x04, 0xd1, 0x01, 0x00, 0x00, 0xcb, 0x3f, 0xf8, 0,    0,
                                     0,    0,    0,    0,    0xca, 0,    0,    0,    0,    0xca, 0,    0,    0,
                                     0,    0x00, 0x00, 0x00, 0xd0, 0};
    cr_assert_eq(decode_exact(&m, push16, sizeof push16, &e), 0, "%s: %s", e.field, e.why);
    cr_assert_eq(m.push.incarnation, 256);
    /* A SYNC (dim 0: its payload the count 0) whose seq 5 is an int16, whose base 4 an int64 and whose
     * payload's length 4 a uint64. */
    static const uint8_t sync64[] = {0x9c, 0x01, 0x11, 0xd1, 0x00, 0x05, 0x07, 0x02, 0xcb, 0x3f, 0xf8, 0, 0,
                                     0,    0,    0,    0,    0xca, 0,    0,    0,    0,    0xca, 0,    0, 0,
                                     0,    0x00, 0xd3, 0,    0,    0,    0,    0,    0,    0,    4,    0, 0xcf, 0,
                                     0,    0,    0,    0,    0,    0,    4,    0,    0,    0,    0};
    cr_assert_eq(decode_exact(&m, sync64, sizeof sync64, &e), 0, "%s: %s", e.field, e.why);
    cr_assert_eq(m.push.kind, GSP_SYNC);
    cr_assert_eq(m.push.seq, 5);
    cr_assert_eq(m.push.base, 4);
    cr_assert_eq(m.push.payload_len, 4);
    /* MODEL_REQUEST with dim as uint32; MODEL with round int16, dim uint16, hash bin16, the payload's
     * length as a uint32. */
    static const uint8_t req[] = {0x92, 0x05, 0xce, 0, 0, 0, 3};
    cr_assert_eq(decode_exact(&m, req, sizeof req, &e), 0, "%s: %s", e.field, e.why);
    cr_assert_eq(m.type, WIRE_MODEL_REQUEST);
    cr_assert_eq(m.model_request.dim, 3);
    uint8_t model[1 + 1 + 3 + 3 + 3 + WIRE_HASH_LEN + 5 + 4] = {0x95, 0x06, 0xd1, 0,    2,
                                                                0xcd, 0,    1,    0xc5, 0, WIRE_HASH_LEN};
    memcpy(model + 11 + WIRE_HASH_LEN, (const uint8_t[]){0xce, 0, 0, 0, 4, 0x00, 0x00, 0x80, 0x3f}, 9);
    uint8_t *in;
    cr_assert_eq(decode_copy(&m, model, sizeof model, &e, &in), 0, "%s: %s", e.field, e.why);
    cr_assert_eq(m.type, WIRE_MODEL);
    cr_assert_eq(m.model.round, 2);
    cr_assert_eq(m.model.dim, 1);
    cr_assert_eq(m.model.payload, in + sizeof model - 4, "the payload is the bytes after the array");
    cr_assert_eq(le_bytes(m.model.payload, 4), 0x3f800000u);
    free(in);
    /* The same with the length as an int16. */
    uint8_t model16[sizeof model - 2];
    memcpy(model16, model, 11 + WIRE_HASH_LEN);
    memcpy(model16 + 11 + WIRE_HASH_LEN, (const uint8_t[]){0xd1, 0, 4, 0x00, 0x00, 0x80, 0x3f}, 7);
    cr_assert_eq(decode_exact(&m, model16, sizeof model16, &e), 0, "%s: %s", e.field, e.why);
    cr_assert_eq(m.model.dim, 1);
}

/* Bytes of the shortest msgpack uint holding v. */
static size_t uint_width(uint64_t v)
{
    return v < 128 ? 1 : v <= UINT8_MAX ? 2 : v <= UINT16_MAX ? 3 : v <= UINT32_MAX ? 5 : 9;
}

/* After a message, anything is refused. A PUSH's or MODEL's payload is the
 * rest of the message, so a byte more there is the payload's length
 * disagreeing with what follows, named at that length; after any other
 * message it is the message's trailing bytes, named where they start. */
Test(peer_wire, trailing_bytes_are_rejected)
{
    sample s[N_SAMPLES];
    samples_make(s);
    int tails = 0;
    for (int k = 0; k < N_SAMPLES; k++) {
        wire_msg orig;
        uint8_t *in;
        cr_assert_eq(decode_copy(&orig, s[k].buf, s[k].len, NULL, &in), 0);
        const int tail = orig.type == WIRE_PUSH || orig.type == WIRE_MODEL;
        size_t len_at = 0; /* a payload's: where its length field starts */
        if (tail) {
            const uint8_t *pl = orig.type == WIRE_PUSH ? orig.push.payload : orig.model.payload;
            const size_t pl_len = orig.type == WIRE_PUSH ? orig.push.payload_len : 4 * orig.model.dim;
            cr_assert_eq((size_t)(pl - in) + pl_len, s[k].len, "sample %d: the payload ends the message", k);
            len_at = (size_t)(pl - in) - uint_width(pl_len);
            tails++;
        }
        free(in);
        uint8_t *b = malloc(2 * s[k].len);
        memcpy(b, s[k].buf, s[k].len);
        static const uint8_t extra[] = {0x00, 0xc0, 0x90};
        for (size_t x = 0; x < sizeof extra; x++) {
            b[s[k].len] = extra[x];
            wire_msg m;
            wire_err e;
            cr_assert_eq(decode_exact(&m, b, s[k].len + 1, &e), -EBADMSG, "sample %d", k);
            if (tail) {
                cr_assert_str_eq(e.field, "payload", "sample %d: %s: %s", k, e.field, e.why);
                cr_assert_str_eq(e.why, "trailing bytes after the payload", "sample %d", k);
                cr_assert_eq(e.offset, len_at, "sample %d: at %zu, not %zu", k, e.offset, len_at);
            } else {
                cr_assert_str_eq(e.field, "message", "sample %d: %s: %s", k, e.field, e.why);
                cr_assert_str_eq(e.why, "trailing bytes", "sample %d", k);
                cr_assert_eq(e.offset, s[k].len);
            }
        }
        memcpy(b + s[k].len, s[k].buf, s[k].len); /* two messages in one frame */
        wire_msg m;
        cr_assert_eq(decode_exact(&m, b, 2 * s[k].len, NULL), -EBADMSG);
        free(b);
    }
    cr_assert_eq(tails, 6, "two MODELs and four PUSHes among the samples");
    samples_free(s);
}

/* Replace field f of a valid PUSH by each item of `bad`; all must fail at f. */
static void push_field_rejects(gsp_kind kind, int f, const item *bad, size_t n_bad, const char *field)
{
    for (size_t k = 0; k < n_bad; k++) {
        item it[P_ITEMS];
        push_items(it, kind, 2);
        it[f] = bad[k];
        wire_msg m;
        wire_err e = {0};
        cr_assert_eq(decode_items(it, P_ITEMS, &m, &e), -EBADMSG, "field %s variant %zu ('%c') accepted", field, k,
                     bad[k].t);
        cr_assert_str_eq(e.field, field, "variant %zu: %s: %s", k, e.field, e.why);
    }
}

Test(peer_wire, wrong_field_types_are_rejected)
{
    /* The unmodified builder output is accepted: the rejections below are the field's. */
    for (int kind = GSP_RAW; kind <= GSP_SYNC; kind++) {
        item it[P_ITEMS];
        push_items(it, (gsp_kind)kind, 2);
        wire_msg m;
        wire_err e;
        cr_assert_eq(decode_items(it, P_ITEMS, &m, &e), 0, "kind %d: %s: %s", kind, e.field, e.why);
    }
    const item not_int[] = {D(1.0), F(1.0), S("1", 1), B("1", 1), NIL, {.t = 'T'}, A(0)};
    push_field_rejects(GSP_RAW, P_TYPE, not_int, 7, "type");
    push_field_rejects(GSP_RAW, P_ROUND, not_int, 7, "round");
    push_field_rejects(GSP_RAW, P_SEQ, not_int, 7, "seq");
    push_field_rejects(GSP_RAW, P_INC, not_int, 7, "incarnation");
    push_field_rejects(GSP_DELTA, P_INC, not_int, 7, "incarnation");
    push_field_rejects(GSP_RAW, P_KIND, not_int, 7, "kind");
    push_field_rejects(GSP_DELTA, P_ORIGIN, not_int, 7, "origin");
    push_field_rejects(GSP_RAW, P_BASE, not_int, 7, "base");
    push_field_rejects(GSP_SYNC, P_BASE, not_int, 7, "base");
    push_field_rejects(GSP_RAW, P_DIM, not_int, 7, "dim");
    const item not_f64[] = {F(1.5), U(1), S("1.5", 3), NIL, B(zeros, 8)};
    push_field_rejects(GSP_RAW, P_W, not_f64, 5, "w_total");
    const item not_f32[] = {D(0.5), U(0), NIL, S("x", 1)};
    push_field_rejects(GSP_DELTA, P_GAIN, not_f32, 4, "gain");
    push_field_rejects(GSP_DELTA, P_STEP, not_f32, 4, "step");
    /* The payload's length is a uint (its bytes follow the array): a bin (a
     * version-7 payload), a str, a negative or a float is no length. */
    const item not_len[] = {B(zeros, 16), S(zeros, 16), A(2), NIL, I(-16), D(16.0), {.t = 'M', .n = 0}};
    push_field_rejects(GSP_RAW, P_PAYLOAD, not_len, 7, "payload");
    push_field_rejects(GSP_DELTA, P_PAYLOAD, not_len, 7, "payload");

    wire_msg m;
    wire_err e;
    uint8_t hash[WIRE_HASH_LEN + 1] = {0};
    const item map_top[] = {{.t = 'M', .n = 1}, U(3), U(1)};
    cr_assert_eq(decode_items(map_top, 3, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "array");
    const item auth_str[] = {A(2), U(0), S(hash, WIRE_HASH_LEN)};
    cr_assert_eq(decode_items(auth_str, 3, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "hash");
    const item auth_31[] = {A(2), U(0), B(hash, 31)}, auth_33[] = {A(2), U(0), B(hash, 33)};
    cr_assert_eq(decode_items(auth_31, 3, &m, &e), -EBADMSG);
    cr_assert_eq(decode_items(auth_33, 3, &m, &e), -EBADMSG);
    const item bye_bin[] = {A(2), U(4), B("bye", 3)};
    cr_assert_eq(decode_items(bye_bin, 3, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "reason");
    const item nack_f[] = {A(2), U(2), D(3.0)}, hb_str[] = {A(2), U(3), S("7", 1)};
    cr_assert_eq(decode_items(nack_f, 3, &m, &e), -EBADMSG);
    cr_assert_eq(decode_items(hb_str, 3, &m, &e), -EBADMSG);
    const item req_str[] = {A(2), U(5), S("3", 1)}, req_f[] = {A(2), U(5), D(3.0)}, req_bin[] = {A(2), U(5), B("3", 1)};
    cr_assert_eq(decode_items(req_str, 3, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "dim");
    cr_assert_eq(decode_items(req_f, 3, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "dim");
    cr_assert_eq(decode_items(req_bin, 3, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "dim");
    /* Array sizes of some other type, or of none. */
    const item nack_9[] = {A(9), U(2), U(1)}, push_2[] = {A(2), U(1), U(1)}, nack_3[] = {A(3), U(2), U(1), U(1)};
    cr_assert_eq(decode_items(nack_9, 3, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "array");
    cr_assert_eq(decode_items(push_2, 3, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "array");
    cr_assert_eq(decode_items(nack_3, 4, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "array");
    const item nack_10[] = {A(10), U(2), U(1)}, hb_5[] = {A(5), U(3), U(1)}, model_2[] = {A(2), U(6), U(1)};
    const item request_5[] = {A(5), U(5), U(1), U(1), B(hash, WIRE_HASH_LEN), B(zeros, 4)};
    const item model_10[] = {A(10), U(6), U(1), U(1), B(hash, WIRE_HASH_LEN), B(zeros, 4),
                             U(0),  U(0), U(0), U(0), U(0)};
    cr_assert_eq(decode_items(nack_10, 3, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "array");
    cr_assert_eq(decode_items(hb_5, 3, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "array");
    cr_assert_eq(decode_items(model_2, 3, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "array");
    cr_assert_eq(decode_items(request_5, 6, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "array");
    cr_assert_eq(decode_items(model_10, 11, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "array");
    /* A version-1 PUSH (9 elements, no incarnation) is no version-2 message. */
    const item push_v1[] = {A(9), U(1), U(17), U(4), U(0), D(1.5), F(0.0), F(0.0), U(2), B(zeros, 16)};
    cr_assert_eq(decode_items(push_v1, 10, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "array");
    cr_assert_eq(e.offset, 0);
    /* Nor a version-3 PUSH (10 elements, no origin) a version-5 one. */
    const item push_v3[] = {A(10), U(1), U(17), U(4), U(7), U(0), D(1.5), F(0.0), F(0.0), U(2), B(zeros, 16)};
    cr_assert_eq(decode_items(push_v3, 11, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "array");
    cr_assert_eq(e.offset, 0);
    /* Nor a version-4 PUSH (11 elements, no base): its dim would be read as a
     * base and its payload as a dim, so the count alone must refuse it. */
    const item push_v4[] = {A(11), U(1), U(17), U(4), U(7), U(0), D(1.5), F(0.0), F(0.0), U(0), U(2), B(zeros, 16)};
    cr_assert_eq(decode_items(push_v4, 12, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "array");
    cr_assert_eq(e.offset, 0);
    const item sync_v4[] = {A(11), U(1), U(17), U(4), U(7), U(2), D(1.5), F(0.0), F(0.0), U(0), U(2), B(zeros, 24)};
    cr_assert_eq(decode_items(sync_v4, 12, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "array");
    cr_assert_eq(e.offset, 0);
    const item empty[] = {A(0)};
    cr_assert_eq(decode_items(empty, 1, &m, &e), -EBADMSG);
}

Test(peer_wire, integers_out_of_range_are_rejected)
{
    wire_msg m;
    wire_err e;
    const item round_bad[] = {U((uint64_t)LONG_MAX + 1), U(UINT64_MAX), I(-1), I(-200), I(INT64_MIN)};
    push_field_rejects(GSP_RAW, P_ROUND, round_bad, 5, "round");
    const item seq_bad[] = {U(0), I(-1)};
    push_field_rejects(GSP_RAW, P_SEQ, seq_bad, 2, "seq");
    const item inc_bad[] = {I(-1), I(-200), I(INT64_MIN)}; /* any uint64 is an incarnation, nothing negative */
    push_field_rejects(GSP_RAW, P_INC, inc_bad, 3, "incarnation");
    const item kind_bad[] = {U(4), U(255), U(UINT64_MAX), I(-1)};
    push_field_rejects(GSP_RAW, P_KIND, kind_bad, 4, "kind");
    const item dim_bad[] = {U(WIRE_MAX_DIM + 1), U(UINT64_MAX), I(-2)};
    push_field_rejects(GSP_RAW, P_DIM, dim_bad, 3, "dim");
    const item base_bad[] = {I(-1), I(-200), I(INT64_MIN)}; /* a seq: nothing negative */
    push_field_rejects(GSP_RAW, P_BASE, base_bad, 3, "base");
    push_field_rejects(GSP_SYNC, P_BASE, base_bad, 3, "base");
    static const uint64_t types_bad[] = {10, 11, 127, 128, 0xffff, UINT64_MAX}; /* 5..9: MODEL_REQUEST .. MEMBERS */
    for (size_t k = 0; k < sizeof types_bad / sizeof *types_bad; k++) {
        const item it[] = {A(2), U(types_bad[k]), U(1)};
        cr_assert_eq(decode_items(it, 3, &m, &e), -EBADMSG);
        cr_assert_str_eq(e.field, "type");
    }
    const item type_neg[] = {A(2), I(-1), U(1)};
    cr_assert_eq(decode_items(type_neg, 3, &m, &e), -EBADMSG);
    const item soon_big[] = {A(2), U(8), U((uint64_t)LONG_MAX + 1)}, soon_neg[] = {A(2), U(8), I(-5)};
    cr_assert_eq(decode_items(soon_big, 3, &m, &e), -EBADMSG);
    cr_assert_eq(decode_items(soon_neg, 3, &m, &e), -EBADMSG);
    const item hb_big[] = {A(2), U(3), U((uint64_t)LONG_MAX + 1)}, hb_neg[] = {A(2), U(3), I(-5)};
    cr_assert_eq(decode_items(hb_big, 3, &m, &e), -EBADMSG);
    cr_assert_eq(decode_items(hb_neg, 3, &m, &e), -EBADMSG);
    const item nack_neg[] = {A(2), U(2), I(-1)};
    cr_assert_eq(decode_items(nack_neg, 3, &m, &e), -EBADMSG);
    const item req_neg[] = {A(2), U(5), I(-1)};
    cr_assert_eq(decode_items(req_neg, 3, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "dim");
    /* Edges that are in range. */
    const item hb_max[] = {A(2), U(3), U((uint64_t)LONG_MAX)}, nack_max[] = {A(2), U(2), U(UINT64_MAX)};
    cr_assert_eq(decode_items(hb_max, 3, &m, &e), 0);
    cr_assert_eq(m.heartbeat.round, LONG_MAX);
    cr_assert_eq(decode_items(nack_max, 3, &m, &e), 0);
    cr_assert_eq(m.nack.seq, UINT64_MAX);
    item it[P_ITEMS];
    push_items(it, GSP_SYNC, 2);
    it[P_ROUND] = U((uint64_t)LONG_MAX), it[P_SEQ] = U(UINT64_MAX), it[P_INC] = U(UINT64_MAX);
    it[P_ORIGIN] = U(UINT64_MAX), it[P_BASE] = U(UINT64_MAX - 1);
    cr_assert_eq(decode_items(it, P_ITEMS, &m, &e), 0, "%s: %s", e.field, e.why);
    cr_assert_eq(m.push.base, UINT64_MAX - 1);
}

/* A SYNC's corrections are every value (count dim) or a list shorter than
 * that, of positions strictly ascending below dim; anything else is refused
 * at the payload before a receiver indexes its model with it. */
Test(peer_wire, sync_corrections_must_be_a_sound_list)
{
    enum { DIM = 9 }; /* a list of at most 6 (12 n <= 8 dim) */
    static const struct {
        uint32_t n, idx[8];
        int ok;
        const char *what;
    } cases[] = {
        {0, {0}, 1, "no correction"},
        {3, {0, 4, 8}, 1, "a list"},
        {6, {0, 1, 2, 3, 4, 5}, 1, "the longest list"},
        {DIM, {0}, 1, "every value"},
        {7, {0, 1, 2, 3, 4, 5, 6}, 0, "a list longer than every value"},
        {10, {0}, 0, "a count above dim"},
        {3, {0, 4, 4}, 0, "a position twice"},
        {3, {4, 0, 8}, 0, "positions out of order"},
        {2, {3, DIM}, 0, "a position at dim"},
        {1, {UINT32_MAX}, 0, "a position far out"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const uint32_t n = cases[k].n;
        const size_t vals = n == DIM ? DIM : n, len = 4 * DIM + 4 + (n == DIM ? 0 : 4 * (size_t)n) + 8 * vals;
        uint8_t payload[4 * DIM + 4 + 12 * 10] = {0}, *at = payload + 4 * DIM;
        for (int b = 0; b < 4; b++)
            at[b] = (uint8_t)(n >> (8 * b));
        for (uint32_t j = 0; n != DIM && j < n && j < 8; j++)
            for (int b = 0; b < 4; b++)
                at[4 + 4 * j + (uint32_t)b] = (uint8_t)(cases[k].idx[j] >> (8 * b));
        item it[P_ITEMS];
        push_items(it, GSP_SYNC, DIM);
        it[P_PAYLOAD] = PAY(payload, len);
        wire_msg m;
        wire_err e = {0};
        size_t in_len;
        uint8_t *in = build(it, P_ITEMS, &in_len); /* (kept: m is a view of it) */
        const int rc = wire_decode(&m, in, in_len, &e);
        if (cases[k].ok) {
            cr_assert_eq(rc, 0, "%s: %s: %s", cases[k].what, e.field, e.why);
            uint8_t scratch[wire_push_scratch_bound(DIM)];
            gsp_msg g;
            cr_assert_eq(wire_push_to_gsp(&m, &g, scratch, sizeof scratch), 0, "%s", cases[k].what);
            cr_assert_eq(g.n_corr, n, "%s", cases[k].what);
            cr_assert_eq(g.corr_idx == NULL, n == DIM, "%s", cases[k].what);
            for (uint32_t j = 0; g.corr_idx && j < n; j++)
                cr_assert_eq(g.corr_idx[j], cases[k].idx[j]);
        } else {
            cr_assert_eq(rc, -EBADMSG, "%s accepted", cases[k].what);
            cr_assert_str_eq(e.field, "payload", "%s: %s: %s", cases[k].what, e.field, e.why);
        }
        free(in);
    }
}

Test(peer_wire, push_payload_length_must_match_dim)
{
    static const struct {
        gsp_kind kind;
        size_t dim, len;
    } bad[] = {{GSP_RAW, 2, 15},  {GSP_RAW, 2, 17}, {GSP_RAW, 2, 0},   {GSP_RAW, 0, 8},   {GSP_RAW, 3, 24 + 12},
               {GSP_SYNC, 2, 16}, {GSP_SYNC, 2, 23}, {GSP_SYNC, 2, 25}, {GSP_SYNC, 0, 1}, {GSP_DELTA, 2, 0}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        item it[P_ITEMS];
        push_items(it, bad[k].kind, bad[k].dim);
        it[P_PAYLOAD] = PAY(zeros, bad[k].len);
        wire_msg m;
        wire_err e = {0};
        cr_assert_eq(decode_items(it, P_ITEMS, &m, &e), -EBADMSG, "case %zu accepted", k);
        cr_assert_str_eq(e.field, "payload", "case %zu: %s: %s", k, e.field, e.why);
    }
    /* The length field and the bytes after the array must agree, whatever the
     * kind: the right length for dim with a byte fewer or more is refused. */
    for (int kind = GSP_RAW; kind <= GSP_SYNC; kind++) {
        item it[P_ITEMS];
        push_items(it, (gsp_kind)kind, 2);
        const size_t want = it[P_PAYLOAD].n;
        const struct {
            size_t claim, have;
            const char *why;
        } tail_bad[] = {{want, want - 1, "truncated"},
                        {want, 0, "truncated"},
                        {want, want + 1, "trailing bytes after the payload"},
                        {want - 1, want, "trailing bytes after the payload"},
                        {0, want, "trailing bytes after the payload"}};
        for (size_t k = 0; k < sizeof tail_bad / sizeof *tail_bad; k++) {
            push_items(it, (gsp_kind)kind, 2);
            it[P_PAYLOAD] = PAY_CLAIM(tail_bad[k].claim, zeros, tail_bad[k].have);
            wire_msg m;
            wire_err e = {0};
            cr_assert_eq(decode_items(it, P_ITEMS, &m, &e), -EBADMSG, "kind %d tail case %zu accepted", kind, k);
            cr_assert_str_eq(e.field, "payload", "kind %d tail case %zu: %s: %s", kind, k, e.field, e.why);
            cr_assert_str_eq(e.why, tail_bad[k].why, "kind %d tail case %zu", kind, k);
        }
    }
    /* And the encoder does not produce them: a DELTA needs a payload. */
    push_case c;
    push_make(&c, GSP_DELTA, 4);
    uint8_t buf[256];
    c.m.payload_len = 0;
    cr_assert_eq(wire_encode_push(buf, sizeof buf, &c.m), -EINVAL);
    c.m.payload = NULL, c.m.payload_len = 3;
    cr_assert_eq(wire_encode_push(buf, sizeof buf, &c.m), -EINVAL);
    push_free(&c);
}

Test(peer_wire, push_float_fields_are_checked)
{
    const item w_bad[] = {D(0.0), D(-0.0), D(-1.0), D(NAN), D(INFINITY), D(-INFINITY)};
    push_field_rejects(GSP_RAW, P_W, w_bad, 6, "w_total");
    push_field_rejects(GSP_DELTA, P_W, w_bad, 6, "w_total");
    const item f_bad[] = {F(NAN), F(INFINITY), F(-INFINITY)};
    push_field_rejects(GSP_DELTA, P_GAIN, f_bad, 3, "gain");
    push_field_rejects(GSP_RAW, P_GAIN, f_bad, 3, "gain");
    push_field_rejects(GSP_DELTA, P_STEP, f_bad, 3, "step");
    push_field_rejects(GSP_SYNC, P_STEP, f_bad, 3, "step");
    const item step_bad[] = {F(0.0), F(-0.0), F(-0.25), F(1.0009765625)};
    push_field_rejects(GSP_DELTA, P_STEP, step_bad, 4, "step");
    /* Accepted: the smallest positive w, gain 0 and negative, step 1 for DELTA. */
    item it[P_ITEMS];
    wire_msg m;
    wire_err e;
    push_items(it, GSP_DELTA, 2);
    it[P_W] = D(4.9e-324), it[P_GAIN] = F(-3.0), it[P_STEP] = F(1.0);
    cr_assert_eq(decode_items(it, P_ITEMS, &m, &e), 0, "%s: %s", e.field, e.why);
    it[P_GAIN] = F(0.0);
    cr_assert_eq(decode_items(it, P_ITEMS, &m, &e), 0, "%s: %s", e.field, e.why);
}

Test(peer_wire, goodbye_reason_is_short_utf8_text)
{
    char r[WIRE_REASON_MAX + 1];
    memset(r, 'q', sizeof r);
    wire_msg m;
    wire_err e;
    const item ok[] = {A(2), U(4), S(r, WIRE_REASON_MAX)}, too_long[] = {A(2), U(4), S(r, WIRE_REASON_MAX + 1)};
    cr_assert_eq(decode_items(ok, 3, &m, &e), 0);
    cr_assert_eq(decode_items(too_long, 3, &m, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "reason");
    uint8_t buf[512];
    cr_assert_eq(wire_encode_goodbye(buf, sizeof buf, r, WIRE_REASON_MAX + 1), -EINVAL);
    cr_assert_eq(wire_encode_goodbye(buf, sizeof buf, NULL, 1), -EINVAL);
    static const char *const bad[] = {
        "\xff",             /* not UTF-8 at all */
        "\xc0\x80",         /* overlong NUL */
        "\xe0\x80\xaf",     /* overlong '/' */
        "\xed\xa0\x80",     /* surrogate */
        "\xf4\x90\x80\x80", /* above U+10FFFF */
        "ab\xe2\x82",       /* truncated sequence */
        "\x80",             /* lone continuation */
        "a\nb",             /* newline: would forge log lines */
        "\x1b[2J",          /* terminal escape */
        "\x7f",             /* DEL */
        "\xc2\x9b",         /* C1 CSI */
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        size_t n = strlen(bad[k]);
        const item it[] = {A(2), U(4), S(bad[k], n)};
        cr_assert_eq(decode_items(it, 3, &m, &e), -EBADMSG, "reason %zu accepted", k);
        cr_assert_eq(wire_encode_goodbye(buf, sizeof buf, bad[k], n), -EINVAL, "reason %zu encoded", k);
    }
    const item nul[] = {A(2), U(4), S("a\0b", 3)};
    cr_assert_eq(decode_items(nul, 3, &m, &e), -EBADMSG);
}

Test(peer_wire, encoder_refuses_what_a_peer_would_reject)
{
    uint8_t buf[1024];
    push_case c;
    push_make(&c, GSP_RAW, 4);
    gsp_msg g = c.m;
    cr_assert_gt(wire_encode_push(buf, sizeof buf, &g), 0);
    g.seq = 0;
    cr_assert_eq(wire_encode_push(buf, sizeof buf, &g), -EINVAL);
    g = c.m, g.round = -1;
    cr_assert_eq(wire_encode_push(buf, sizeof buf, &g), -EINVAL);
    g = c.m, g.kind = (gsp_kind)3;
    cr_assert_eq(wire_encode_push(buf, sizeof buf, &g), -EINVAL);
    g = c.m, g.w_total = NAN;
    cr_assert_eq(wire_encode_push(buf, sizeof buf, &g), -EINVAL);
    g = c.m, g.w_total = 0.0;
    cr_assert_eq(wire_encode_push(buf, sizeof buf, &g), -EINVAL);
    g = c.m, g.gain = INFINITY;
    cr_assert_eq(wire_encode_push(buf, sizeof buf, &g), -EINVAL);
    g = c.m, g.x_total = NULL;
    cr_assert_eq(wire_encode_push(buf, sizeof buf, &g), -EINVAL);
    g = c.m, g.kind = GSP_SYNC; /* no ref */
    cr_assert_eq(wire_encode_push(buf, sizeof buf, &g), -EINVAL);
    g = c.m, g.dim = WIRE_MAX_DIM + 1;
    cr_assert_eq(wire_encode_push(buf, sizeof buf, &g), -EINVAL);
    g = c.m, g.kind = GSP_DELTA, g.payload = (const uint8_t *)"xy", g.payload_len = 2, g.step = 0.0f;
    cr_assert_eq(wire_encode_push(buf, sizeof buf, &g), -EINVAL);
    g.step = 0.5f;
    cr_assert_gt(wire_encode_push(buf, sizeof buf, &g), 0);
    /* A DELTA's payload has no 4 GiB cap (its length is a uint, not a bin's): one past it is a
     * message, only too long for this buffer (and its bytes are not read for that). */
    g.payload = zeros, g.payload_len = (size_t)UINT32_MAX + 1;
    cr_assert_eq(wire_encode_push(buf, sizeof buf, &g), -ENOSPC);
    cr_assert_eq(wire_encode_push(buf, sizeof buf, NULL), -EINVAL);
    cr_assert_eq(wire_encode_heartbeat(buf, sizeof buf, -1), -EINVAL);
    cr_assert_eq(wire_encode_model_soon(buf, sizeof buf, -1), -EINVAL);
    cr_assert_eq(wire_encode_auth(buf, sizeof buf, NULL), -EINVAL);
    wire_msg m = {.type = (wire_type)10};
    cr_assert_eq(wire_encode(buf, sizeof buf, &m), -EINVAL);
    m = (wire_msg){.type = WIRE_PUSH}; /* all zero: seq 0, w 0 */
    cr_assert_eq(wire_encode(buf, sizeof buf, &m), -EINVAL);
    /* Every incarnation is one a peer accepts. */
    g = c.m, g.incarnation = 0;
    cr_assert_gt(wire_encode_push(buf, sizeof buf, &g), 0);
    g.incarnation = UINT64_MAX;
    cr_assert_gt(wire_encode_push(buf, sizeof buf, &g), 0);
    /* MODEL: a hash, a z for dim > 0, a round >= 0, dim <= WIRE_MAX_DIM. */
    uint8_t hash[WIRE_HASH_LEN] = {1};
    float z[4] = {1.0f, -2.0f, NAN, 0.5f};
    cr_assert_gt(wire_encode_model(buf, sizeof buf, 3, z, 4, hash), 0);
    cr_assert_eq(wire_encode_model(buf, sizeof buf, 3, z, 4, NULL), -EINVAL);
    cr_assert_eq(wire_encode_model(buf, sizeof buf, 3, NULL, 4, hash), -EINVAL);
    cr_assert_eq(wire_encode_model(buf, sizeof buf, -1, z, 4, hash), -EINVAL);
    cr_assert_eq(wire_encode_model(NULL, 16, 3, z, 4, hash), -EINVAL);
    cr_assert_eq(wire_encode_model_request(NULL, 16, 4), -EINVAL);
    cr_assert_gt(wire_encode_model(buf, sizeof buf, 3, NULL, 0, hash), 0, "dim 0 needs no z");
    m = (wire_msg){.type = WIRE_MODEL, .model = {.round = 3, .dim = 4, .hash = NULL, .payload = zeros}};
    cr_assert_eq(wire_encode(buf, sizeof buf, &m), -EINVAL);
    m.model.hash = hash, m.model.payload = NULL;
    cr_assert_eq(wire_encode(buf, sizeof buf, &m), -EINVAL);
    m.model.payload = zeros, m.model.round = -1;
    cr_assert_eq(wire_encode(buf, sizeof buf, &m), -EINVAL);
    m.model.round = 3;
    cr_assert_gt(wire_encode(buf, sizeof buf, &m), 0);
    /* dim 0 needs no arrays at all. */
    g = c.m, g.dim = 0, g.x_total = NULL;
    long n = wire_encode_push(buf, sizeof buf, &g);
    cr_assert_gt(n, 0);
    cr_assert_eq(decode_exact(&m, buf, (size_t)n, NULL), 0);
    cr_assert_eq(m.push.payload_len, 0);
    push_free(&c);
}

Test(peer_wire, push_to_gsp_checks_its_scratch)
{
    push_case c;
    push_make(&c, GSP_SYNC, 10);
    free(c.idx), c.idx = NULL; /* every correction: r, the count and 10 doubles */
    c.m.corr_idx = NULL, c.m.n_corr = 10;
    for (size_t i = 0; i < 10; i++)
        c.corr[i] = (double)i - 4.5;
    size_t len;
    uint8_t *buf = encode_push(&c.m, &len);
    wire_msg m;
    cr_assert_eq(wire_decode(&m, buf, len, NULL), 0);
    uint8_t *scratch = malloc(256);
    gsp_msg g;
    for (size_t off = 0; off < 8; off++) {
        size_t pad = (size_t)(-(uintptr_t)(scratch + off) & 7), need = pad + 124;
        cr_assert_eq(wire_push_to_gsp(&m, &g, scratch + off, need), 0, "offset %zu", off);
        cr_assert_eq(memcmp(g.corr, c.corr, 80), 0);
        cr_assert_null(g.corr_idx);
        cr_assert_eq(memcmp(g.ref, c.ref, 40), 0);
        cr_assert_eq(wire_push_to_gsp(&m, &g, scratch + off, need - 1), -ENOSPC, "offset %zu", off);
    }
    cr_assert_eq(wire_push_to_gsp(&m, &g, NULL, 0), -ENOSPC);
    wire_msg other = {.type = WIRE_NACK, .nack.seq = 3};
    cr_assert_eq(wire_push_to_gsp(&other, &g, scratch, 256), -EINVAL);
    cr_assert_eq(wire_push_to_gsp(NULL, &g, scratch, 256), -EINVAL);
    /* A DELTA and a dim-0 RAW need no scratch; the RAW still gets a non-NULL x_total for gsp_absorb. */
    push_case d;
    push_make(&d, GSP_DELTA, 10);
    uint8_t *db = encode_push(&d.m, &len);
    cr_assert_eq(wire_decode(&m, db, len, NULL), 0);
    cr_assert_eq(wire_push_to_gsp(&m, &g, NULL, 0), 0);
    cr_assert_eq(g.payload_len, d.m.payload_len);
    push_case z;
    push_make(&z, GSP_RAW, 0);
    uint8_t *zb = encode_push(&z.m, &len);
    cr_assert_eq(wire_decode(&m, zb, len, NULL), 0);
    cr_assert_eq(wire_push_to_gsp(&m, &g, NULL, 0), 0);
    cr_assert_not_null(g.x_total);
    free(zb);
    free(db);
    free(scratch);
    free(buf);
    push_free(&z);
    push_free(&d);
    push_free(&c);
}

Test(peer_wire, errors_say_where)
{
    item it[P_ITEMS];
    push_items(it, GSP_RAW, 2);
    it[P_SEQ] = U(0);
    size_t len;
    uint8_t *b = build(it, P_ITEMS, &len);
    wire_msg m;
    wire_err e;
    cr_assert_eq(wire_decode(&m, b, len, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "seq");
    cr_assert_eq(e.offset, 3, "fixarray, type, round 17, then seq at byte 3");
    free(b);
    /* The fields after seq, each one byte further on: incarnation, then kind, then w_total. */
    push_items(it, GSP_RAW, 2);
    it[P_INC] = I(-1);
    b = build(it, P_ITEMS, &len);
    cr_assert_eq(wire_decode(&m, b, len, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "incarnation");
    cr_assert_eq(e.offset, 4, "seq 4 at byte 3, then the incarnation at byte 4");
    free(b);
    push_items(it, GSP_RAW, 2);
    it[P_KIND] = U(4);
    b = build(it, P_ITEMS, &len);
    cr_assert_eq(wire_decode(&m, b, len, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "kind");
    cr_assert_eq(e.offset, 5, "incarnation 9 at byte 4, then kind at byte 5");
    free(b);
    push_items(it, GSP_RAW, 2);
    it[P_W] = D(-1.0);
    b = build(it, P_ITEMS, &len);
    cr_assert_eq(wire_decode(&m, b, len, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "w_total");
    cr_assert_eq(e.offset, 6);
    free(b);
    /* A SYNC's base at or above its seq is found once all is read, and named where it stands:
     * after w_total (9 bytes at 6), gain and step (5 each) and origin 0 (byte 25), at byte 26. */
    push_items(it, GSP_SYNC, 2);
    it[P_BASE] = U(4);
    b = build(it, P_ITEMS, &len);
    cr_assert_eq(wire_decode(&m, b, len, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "base");
    cr_assert_str_eq(e.why, "SYNC base not below seq");
    cr_assert_eq(e.offset, 26);
    free(b);
    /* MODEL: fixarray, type, round 12, dim 2, then the hash at byte 4 and the payload after its 34 bytes. */
    item mi[M_ITEMS];
    model_items(mi, 2);
    mi[M_HASH] = B(zeros, 31);
    b = build(mi, M_ITEMS, &len);
    cr_assert_eq(wire_decode(&m, b, len, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "hash");
    cr_assert_str_eq(e.why, "not 32 bytes");
    cr_assert_eq(e.offset, 4);
    free(b);
    model_items(mi, 2);
    mi[M_PAYLOAD] = PAY(zeros, 12);
    b = build(mi, M_ITEMS, &len);
    cr_assert_eq(wire_decode(&m, b, len, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "payload");
    cr_assert_str_eq(e.why, "not 4 * dim bytes");
    cr_assert_eq(e.offset, 4 + 2 + WIRE_HASH_LEN);
    free(b);
    /* A payload's length that disagrees with the bytes after the array is named at the length:
     * a MODEL's after the hash, a PUSH's after dim (origin 0 at 25, base 0 at 26, dim 2 at 27: byte 28). */
    model_items(mi, 2);
    mi[M_PAYLOAD] = PAY_CLAIM(8, zeros, 9);
    b = build(mi, M_ITEMS, &len);
    cr_assert_eq(wire_decode(&m, b, len, &e), -EBADMSG);
    cr_assert_str_eq(e.field, "payload");
    cr_assert_str_eq(e.why, "trailing bytes after the payload");
    cr_assert_eq(e.offset, 4 + 2 + WIRE_HASH_LEN);
    free(b);
    static const struct {
        size_t have;
        const char *why;
    } tails[] = {{15, "truncated"}, {17, "trailing bytes after the payload"}};
    for (size_t k = 0; k < sizeof tails / sizeof *tails; k++) {
        push_items(it, GSP_RAW, 2);
        it[P_PAYLOAD] = PAY_CLAIM(16, zeros, tails[k].have);
        b = build(it, P_ITEMS, &len);
        cr_assert_eq(wire_decode(&m, b, len, &e), -EBADMSG);
        cr_assert_str_eq(e.field, "payload");
        cr_assert_str_eq(e.why, tails[k].why);
        cr_assert_eq(e.offset, 28, "%zu bytes after the array: at %zu", tails[k].have, e.offset);
        free(b);
    }
    cr_assert_str_eq(wire_type_name(WIRE_PUSH), "PUSH");
    cr_assert_str_eq(wire_type_name(WIRE_GOODBYE), "GOODBYE");
    cr_assert_str_eq(wire_type_name(WIRE_MODEL_REQUEST), "MODEL_REQUEST");
    cr_assert_str_eq(wire_type_name(WIRE_MODEL), "MODEL");
    cr_assert_str_eq(wire_type_name(WIRE_ACK), "ACK");
    cr_assert_str_eq(wire_type_name(WIRE_MODEL_SOON), "MODEL_SOON");
    cr_assert_str_eq(wire_type_name(WIRE_MEMBERS), "MEMBERS");
    cr_assert_str_eq(wire_type_name(10), "?");
    cr_assert_str_eq(wire_type_name(-1), "?");
}

/* WIRE.md "Members": at most 16 entries and 16 revocations a MEMBERS, each
 * checked as the encoder checks it, so a member list cannot size anything
 * at the receiver; 17 entries are refused whole. */
Test(peer_wire, a_member_list_is_bounded_and_its_entries_checked)
{
    static const char host[] = "10.0.0.7";
    wire_member e[WIRE_MEMBERS_MAX + 1];
    for (int i = 0; i <= WIRE_MEMBERS_MAX; i++)
        e[i] = (wire_member){.id = (uint32_t)i, .since = 1, .host = host, .host_len = 8, .port = 7000, .flags = 1};
    uint8_t buf[WIRE_MEMBERS_BYTES_MAX + 512], one[512];
    cr_assert_eq(wire_encode_members(buf, sizeof buf, e, WIRE_MEMBERS_MAX + 1, NULL, 0), -EINVAL);
    long n = wire_encode_members(buf, sizeof buf, e, WIRE_MEMBERS_MAX, NULL, 0);
    cr_assert_gt(n, 0);
    wire_msg m;
    wire_err err;
    cr_assert_eq(wire_decode(&m, buf, (size_t)n, &err), 0);
    cr_assert_eq(m.type, WIRE_MEMBERS);
    cr_assert_eq(m.members.n, WIRE_MEMBERS_MAX);
    /* 17 by hand: [9, array16 of 17 copies of one entry, []] */
    long k = wire_encode_members(one, sizeof one, e, 1, NULL, 0); /* 93 09 91 ENTRY 90 */
    cr_assert_gt(k, 4);
    const size_t entry = (size_t)k - 4;
    size_t at = 0;
    buf[at++] = 0x93, buf[at++] = 0x09, buf[at++] = 0xdc, buf[at++] = 0x00, buf[at++] = WIRE_MEMBERS_MAX + 1;
    for (int i = 0; i <= WIRE_MEMBERS_MAX; i++, at += entry)
        memcpy(buf + at, one + 3, entry);
    buf[at++] = 0x90;
    cr_assert_eq(wire_decode(&m, buf, at, &err), -EBADMSG);
    cr_assert_str_eq(err.field, "members");
    /* An entry the encoder would refuse: a host name, port 0, unknown flags. */
    wire_member bad = e[0];
    bad.host = "lab-ps1", bad.host_len = 7;
    cr_assert_eq(wire_encode_members(buf, sizeof buf, &bad, 1, NULL, 0), -EINVAL);
    bad = e[0], bad.port = 0;
    cr_assert_eq(wire_encode_members(buf, sizeof buf, &bad, 1, NULL, 0), -EINVAL);
    bad = e[0], bad.flags = 2;
    cr_assert_eq(wire_encode_members(buf, sizeof buf, &bad, 1, NULL, 0), -EINVAL);
    bad = e[0], bad.id = 70000;
    cr_assert_eq(wire_encode_members(buf, sizeof buf, &bad, 1, NULL, 0), -EINVAL);
}
