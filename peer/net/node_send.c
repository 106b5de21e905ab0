/* The networked peer's frames out: what the engine queued, in wire
 * encoding (peer/wire/WIRE.md), written straight into the frame that carries
 * it (net_room): a whole model or a SYNC is encoded once, into its frame,
 * and sealed there, never first into a buffer of its own. */
#include <errno.h>
#include <stdint.h>

#include <sodium.h>

#include "peer/core/clock.h"
#include "peer/net/node_state.h"
#include "peer/wire/wire.h"

/* Messages longer than this are sealed on the thread pool (net_send_room_later):
 * a whole model or a SYNC of a big one, whose seal (and a MODEL's hash)
 * would keep the loop from its heartbeats for seconds on a busy machine.
 * Sealing takes about a millisecond a MB, the hand-over tens of
 * microseconds. */
#define SEAL_OFF_LOOP_BYTES (4u << 20)

/* On the thread pool, before the seal: a MODEL's hash of its own payload,
 * into its hash field (encode left it zero). */
static void hash_model(uint8_t *pt, size_t len, void *arg)
{
    (void)arg;
    wire_msg m;
    wire_err e;
    if (wire_decode(&m, pt, len, &e) == 0 && m.type == WIRE_MODEL) /* (it is: encode made it) */
        crypto_generichash((uint8_t *)(uintptr_t)m.model.hash, WIRE_HASH_LEN, m.model.payload,
                           m.model.dim * sizeof(float), NULL, 0);
}

/* The most bytes s's encoding can take. A PUSH: its list (a SYNC's
 * corrections as made, not every one); a MODEL: its floats and hash (its
 * header: a PUSH's at most). */
static size_t frame_bound(const engine_send *s)
{
    switch (s->kind) {
    case ENGINE_PUSH:
        return wire_push_bound(0, gsp_msg_bytes(&s->msg));
    case ENGINE_MODEL:
        return wire_push_bound(0, s->dim * sizeof(float) + WIRE_HASH_LEN);
    default:
        return WIRE_CONTROL_MAX;
    }
}

/* s's encoding into buf (cap bytes). A MODEL carries the hash of its bytes
 * (hash_model writes it); a whole model (a MODEL, a SYNC, RAW totals) and
 * the frame that asks for one keep both loops busy long enough that neither
 * side counts the transfer as an idle link. */
static long encode(node *n, const engine_send *s, uint8_t *buf, size_t cap)
{
    switch (s->kind) {
    case ENGINE_PUSH:
        if (!gsp_kind_payload(s->msg.kind))
            net_expect_busy(&n->net, s->peer, s->msg.dim * sizeof(float));
        return wire_encode_push(buf, cap, &s->msg);
    case ENGINE_MODEL: {
        static const uint8_t later[WIRE_HASH_LEN];
        net_expect_busy(&n->net, s->peer, s->dim * sizeof(float));
        return wire_encode_model_scaled(buf, cap, s->round, s->model, s->scale, s->dim, later);
    }
    case ENGINE_ACK:
        return wire_encode_ack(buf, cap, s->seq);
    case ENGINE_NACK:
        net_expect_busy(&n->net, s->peer, engine_gossip(n->e)->dim * sizeof(float)); /* the SYNC it asks for */
        return wire_encode_nack(buf, cap, s->seq);
    case ENGINE_HEARTBEAT:
        return wire_encode_heartbeat(buf, cap, s->round);
    case ENGINE_MODEL_SOON:
        return wire_encode_model_soon(buf, cap, s->round);
    case ENGINE_GOODBYE:
        return s->done == ENGINE_BYE_SEEN   ? wire_encode_goodbye(buf, cap, "seen", 4)
               : s->done == ENGINE_BYE_DONE ? wire_encode_goodbye(buf, cap, "done", 4)
                                            : wire_encode_goodbye(buf, cap, "stopped", 7);
    case ENGINE_MODEL_REQUEST:
        net_expect_busy(&n->net, s->peer, s->dim * sizeof(float)); /* it builds the model frame, we take it in */
        return wire_encode_model_request(buf, cap, s->dim);
    default:
        return -EINVAL;
    }
}

/* One frame the engine queued, in its wire encoding. */
void node_send_frame(node *n, const engine_send *s)
{
    const double t0 = clock_now();
    size_t cap = frame_bound(s);
    int rc;
    long len = -1;
    uint8_t *buf = net_room(&n->net, s->peer, &cap, &rc);
    if (buf && (len = encode(n, s, buf, cap)) < 0)
        rc = (int)len;
    const int model = s->kind == ENGINE_MODEL; /* (its hash is made where it is sealed) */
    if (buf && len >= 0)
        rc = model || len >= SEAL_OFF_LOOP_BYTES
                 ? net_send_room_later(&n->net, s->peer, (size_t)len, model ? hash_model : NULL, NULL)
                 : net_send_room(&n->net, s->peer, (size_t)len);
    if (rc == 0)
        n->r->bytes_sent += (uint64_t)len, n->r->messages_sent++;
    else {
        n->r->send_refused++; /* running sums / a SYNC make up for a share later */
        engine_unsent(n->e, s, rc, clock_now());
    }
    n->frame_seconds += clock_now() - t0;
}
