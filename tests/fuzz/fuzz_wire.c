/* Fuzz target for the wire's message decoder (peer/wire/wire.h). Any bytes must
 * decode or fail with -EBADMSG (saying where) without reading out of bounds.
 * What decodes must re-encode into a message that decodes to the same thing,
 * is no longer than the input (the encoder writes the shortest forms; the
 * decoder also accepts longer ones, and the signed forms of non-negative
 * integers, which can be as short: int16 4357 vs uint16 4357), and
 * re-encodes to the same bytes again. A PUSH must convert for gossip/ with exactly the
 * tensor bytes it carried (and its incarnation); a MODEL's hash and payload are
 * views of exactly 32 and 4 * dim bytes inside the input. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "peer/wire/wire.h"
#include "tests/le_bytes.h"
#include "tests/wire_members_equal.h"

static int same(const wire_msg *a, const wire_msg *b)
{
    if (a->type != b->type)
        return 0;
    switch (a->type) {
    case WIRE_AUTH:
        return !memcmp(a->auth.hash, b->auth.hash, WIRE_HASH_LEN);
    case WIRE_PUSH: {
        const wire_push *p = &a->push, *q = &b->push;
        return p->round == q->round && p->seq == q->seq && p->incarnation == q->incarnation && p->kind == q->kind &&
               !memcmp(&p->w_total, &q->w_total, sizeof p->w_total) && !memcmp(&p->gain, &q->gain, sizeof p->gain) &&
               !memcmp(&p->step, &q->step, sizeof p->step) && p->origin == q->origin &&
               (p->kind != GSP_SYNC || p->base == q->base) && /* (the encoder writes base 0 for the others) */
               p->dim == q->dim && p->payload_len == q->payload_len &&
               (!p->payload_len || !memcmp(p->payload, q->payload, p->payload_len));
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

static uint64_t bits64(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static uint32_t bits32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The tensors wire_push_to_gsp made are the payload's bytes, little-endian. */
static void check_gsp(const wire_msg *m)
{
    const wire_push *p = &m->push;
    gsp_msg g;
    if (gsp_kind_payload(p->kind)) {
        if (wire_push_to_gsp(m, &g, NULL, 0) != 0 || g.payload != p->payload || g.payload_len != p->payload_len ||
            g.incarnation != p->incarnation)
            abort();
        return;
    }
    /* RAW/SYNC: the payload is in the input, so this is bounded by its size. */
    size_t sl = p->payload_len + 7;
    uint8_t *scratch = malloc(sl);
    if (!scratch)
        return;
    if (wire_push_to_gsp(m, &g, scratch, sl) != 0 || g.incarnation != p->incarnation || g.seq != p->seq ||
        (p->kind == GSP_RAW ? !g.x_total : !g.ref || !g.corr))
        abort();
    if (p->kind == GSP_RAW) {
        for (size_t i = 0; i < p->dim; i++)
            if (le_bytes(p->payload + 8 * i, 8) != bits64(g.x_total[i]))
                abort();
    } else { /* r, the count, then every correction or a list of positions and values */
        for (size_t i = 0; i < p->dim; i++)
            if (le_bytes(p->payload + 4 * i, 4) != bits32(g.ref[i]))
                abort();
        const size_t n = (size_t)le_bytes(p->payload + 4 * p->dim, 4), head = 4 * p->dim + 4;
        const int listed = n != p->dim;
        if (g.n_corr != n || (g.corr_idx != NULL) != listed)
            abort();
        for (size_t j = 0; j < n; j++)
            if ((listed && (g.corr_idx[j] >= p->dim || le_bytes(p->payload + head + 4 * j, 4) != g.corr_idx[j] ||
                            (j && g.corr_idx[j] <= g.corr_idx[j - 1]))) ||
                le_bytes(p->payload + head + (listed ? 4 * n : 0) + 8 * j, 8) != bits64(g.corr[j]))
                abort();
    }
    free(scratch);
}

/* A MODEL's head read from the input's first bytes (what a joiner lands
 * by) agrees with the whole decode where that one is a MODEL: the same
 * fields and the payload at the offset it gives; never past the input. */
static void check_model_head(const uint8_t *data, size_t size, int rc, const wire_msg *m)
{
    wire_msg h;
    const long at = wire_model_head(&h, data, size);
    if (at == -EBADMSG) {
        if (rc == 0 && m->type == WIRE_MODEL)
            abort();
        return;
    }
    if (at < 0 || (size_t)at > size || h.type != WIRE_MODEL || h.model.payload ||
        h.model.hash < data || h.model.hash + WIRE_HASH_LEN > data + at)
        abort();
    if (rc == 0 && (m->type != WIRE_MODEL || m->model.payload != data + at || m->model.round != h.model.round ||
                    m->model.dim != h.model.dim || m->model.hash != h.model.hash))
        abort();
    if (rc == 0 || size - (size_t)at != h.model.dim * sizeof(float))
        return;
    abort(); /* (a head with exactly its payload after it is a whole MODEL) */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wire_msg m;
    wire_err e;
    int rc = wire_decode(&m, data, size, &e);
    check_model_head(data, size, rc, &m);
    if (rc == -EBADMSG) {
        if (!e.field || !e.why || e.offset > size)
            abort();
        return 0;
    }
    if (rc != 0)
        abort();
    /* wire_push_bound covers every type: a MODEL of dim values is smaller than a SYNC. */
    size_t cap = m.type == WIRE_PUSH    ? wire_push_bound(m.push.dim, m.push.payload_len)
                 : m.type == WIRE_MODEL ? wire_push_bound(m.model.dim, 0)
                                        : wire_push_bound(0, 0);
    if (m.type == WIRE_MODEL) {
        /* Views of exactly the schema's lengths, inside the input, payload last. */
        if (!m.model.hash || m.model.hash < data || m.model.hash + WIRE_HASH_LEN > data + size ||
            (m.model.dim && !m.model.payload) ||
            (m.model.payload && m.model.payload + m.model.dim * sizeof(float) != data + size))
            abort();
    }
    uint8_t *b1 = malloc(cap), *b2 = malloc(cap);
    if (!b1 || !b2)
        abort();
    long n1 = wire_encode(b1, cap, &m);
    if (n1 <= 0 || (size_t)n1 > cap || (size_t)n1 > size)
        abort();
    wire_msg m2;
    if (wire_decode(&m2, b1, (size_t)n1, &e) != 0 || !same(&m, &m2))
        abort();
    long n2 = wire_encode(b2, cap, &m2);
    if (n2 != n1 || memcmp(b1, b2, (size_t)n1))
        abort();
    if (m.type == WIRE_PUSH)
        check_gsp(&m);
    free(b1);
    free(b2);
    return 0;
}
