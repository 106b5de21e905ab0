/* The networked peer's frames out: what the engine queued, in wire
 * encoding (peer/wire/WIRE.md), into one buffer sized for the usual message
 * and grown only for a whole model or a SYNC. */
#include <errno.h>
#include <stdlib.h>

#include <sodium.h>

#include "peer/core/clock.h"
#include "peer/net/node_state.h"
#include "peer/wire/wire.h"

/* n->out with room for need bytes; a big frame's room is given back by out_release. */
static int out_room(node *n, size_t need)
{
    if (need <= n->out_cap)
        return 0;
    uint8_t *grown = realloc(n->out, need);
    if (!grown)
        return -ENOMEM;
    n->out = grown, n->out_cap = need;
    return 0;
}

static void out_release(node *n)
{
    if (n->out_cap <= n->out_base)
        return;
    uint8_t *small = realloc(n->out, n->out_base);
    if (small)
        n->out = small, n->out_cap = n->out_base;
}

/* A PUSH (a share, a SYNC, RAW totals) or a MODEL: room for it, then its
 * frame; a MODEL carries the hash of its bytes, and keeps both loops busy
 * long enough that neither side counts the transfer as an idle link. */
static long encode_big(node *n, const engine_send *s)
{
    if (s->kind == ENGINE_PUSH) {
        const gsp_msg *m = &s->msg;
        size_t need = wire_push_bound(0, gsp_msg_bytes(m)); /* (a SYNC's: its list, not every correction) */
        if (m->kind != GSP_DELTA) /* a SYNC or totals: the model's size, as a MODEL */
            net_expect_busy(&n->net, s->peer, m->dim * sizeof(float));
        return out_room(n, need) < 0 ? -ENOMEM : wire_encode_push(n->out, n->out_cap, m);
    }
    uint8_t hash[WIRE_HASH_LEN];
    crypto_generichash(hash, sizeof hash, (const uint8_t *)s->model, s->dim * sizeof(float), NULL, 0);
    net_expect_busy(&n->net, s->peer, s->dim * sizeof(float));
    if (out_room(n, wire_push_bound(0, s->dim * sizeof(float) + WIRE_HASH_LEN)) < 0) /* (its header: a PUSH's at most) */
        return -ENOMEM;
    return wire_encode_model(n->out, n->out_cap, s->round, s->model, s->dim, hash);
}

/* One frame the engine queued, in its wire encoding. */
void node_send_frame(node *n, const engine_send *s)
{
    const double t0 = clock_now();
    long len;
    switch (s->kind) {
    case ENGINE_PUSH:
    case ENGINE_MODEL:
        len = encode_big(n, s);
        break;
    case ENGINE_ACK:
        len = wire_encode_ack(n->out, n->out_cap, s->seq);
        break;
    case ENGINE_NACK:
        net_expect_busy(&n->net, s->peer, n->e.rp.g.dim * sizeof(float)); /* the SYNC it asks for */
        len = wire_encode_nack(n->out, n->out_cap, s->seq);
        break;
    case ENGINE_HEARTBEAT:
        len = wire_encode_heartbeat(n->out, n->out_cap, s->round);
        break;
    case ENGINE_MODEL_SOON:
        len = wire_encode_model_soon(n->out, n->out_cap, s->round);
        break;
    case ENGINE_GOODBYE:
        len = wire_encode_goodbye(n->out, n->out_cap, s->done ? "done" : "stopped", s->done ? 4 : 7);
        break;
    case ENGINE_MODEL_REQUEST:
        net_expect_busy(&n->net, s->peer, s->dim * sizeof(float)); /* it builds the model frame, we take it in */
        len = wire_encode_model_request(n->out, n->out_cap, s->dim);
        break;
    default:
        return;
    }
    int rc = len < 0 ? (int)len : net_send(&n->net, s->peer, n->out, (size_t)len);
    out_release(n);
    if (rc == 0)
        n->r->bytes_sent += (uint64_t)len, n->r->messages_sent++;
    else {
        n->r->send_refused++; /* running sums / a SYNC make up for a share later */
        engine_unsent(&n->e, s, rc, clock_now());
    }
    n->frame_seconds += clock_now() - t0;
}
