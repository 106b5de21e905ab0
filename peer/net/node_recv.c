/* The networked peer's frames in and link events: each decoded, checked
 * against this peer's model size, and handed to the engine as its input. */
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "peer/core/clock.h"
#include "peer/net/node_state.h"
#include "peer/wire/wire.h"

#define NODE_INCARNATION_AHEAD_US (86400ull * 1000000u) /* a day: clocks of one cluster agree closer than that */

#define NODE_KEEP_PAYLOAD ((size_t)1 << 20) /* a DELTA at least this long keeps its frame's buffer */

static void on_push(node *n, int peer, const wire_msg *m)
{
    /* The message keeps one block of its own: a whole model's (RAW, SYNC)
     * that arrived alone is the frame's own buffer, its tensors moved into
     * place there (no copy at all); other RAW/SYNC tensors are converted
     * straight into a block (one copy out of the frame, not two); a big
     * DELTA (a whole model in bf16) keeps the frame's buffer too, its
     * payload where it arrived, and a small one is copied into a block
     * because the frame buffer is the transport's, reused for the next. */
    const int delta = gsp_kind_payload(m->push.kind);
    gsp_msg view;
    const int keep = delta ? m->push.payload_len >= NODE_KEEP_PAYLOAD : m->push.dim != 0;
    void *mem = keep ? net_frame_keep(&n->net, peer) : NULL;
    if (mem) {
        if ((delta ? wire_push_to_gsp(m, &view, NULL, 0) : wire_push_in_place(m, &view, mem)) < 0) {
            free(mem);
            return;
        }
    } else {
        size_t cap = m->push.payload_len + (delta ? 0 : _Alignof(double) - 1); /* (a SYNC's list: its own length) */
        mem = malloc(cap ? cap : 1);
        if (!mem || wire_push_to_gsp(m, &view, mem, cap) < 0) {
            free(mem);
            return;
        }
        if (delta)
            view.payload = memcpy(mem, view.payload, view.payload_len);
    }
    view.owned = mem;
    view.src = peer, view.dst = n->c->id;
    /* An incarnation is a process's start on its wall clock: one more than a
     * day ahead of ours is no run that has started (a single forged one
     * would make every later message of the real sender stale). */
    engine_set_incarnation_max(n->e, clock_wall_us() + NODE_INCARNATION_AHEAD_US);
    engine_push(n->e, &view, clock_now());
}

/* A model's size must be ours: nothing of another could be absorbed. */
static int same_size(node *n, int peer, uint64_t dim, const char *what)
{
    if (dim == engine_gossip(n->e)->dim)
        return 1;
    char why[64];
    snprintf(why, sizeof why, "%s for a model of another size", what);
    net_drop(&n->net, peer, why);
    return 0;
}

/* Whether a MODEL's payload has the hash it carries. */
static int model_hash_ok(const wire_msg *m)
{
    uint8_t hash[WIRE_HASH_LEN];
    crypto_generichash(hash, sizeof hash, m->model.payload, m->model.dim * sizeof(float), NULL, 0);
    return sodium_memcmp(hash, m->model.hash, sizeof hash) == 0;
}

/* On the thread pool, for a frame opened there: a MODEL's hash (a second
 * of the loop's time at 100M on a busy machine), 1 if it matches, 0 if not;
 * -1 for anything else. */
static int check_frame(void *ctx, int peer, const uint8_t *buf, size_t len)
{
    (void)ctx, (void)peer;
    wire_msg m;
    wire_err e;
    return wire_decode(&m, buf, len, &e) == 0 && m.type == WIRE_MODEL ? model_hash_ok(&m) : -1;
}

/* ---- a joiner's model, written into x as it arrives ------------------------------ */

static void land_piece(void *ctx, int peer, const uint8_t *bytes, size_t len)
{
    node *n = ctx;
    (void)peer;
    const double t = clock_now();
    crypto_generichash_update(&n->land_hash, bytes, len);
    n->r->bytes_received += len; /* (as they come: a landing stopped or cut off counts what it got) */
    n->frame_seconds += clock_now() - t;
}

/* A MODEL of our size, one at a time, while the engine has a place for it:
 * its payload goes to x as it arrives, hashed on the way (no buffer of its
 * own beside x, and no hash pass at the end). */
static int on_land(void *ctx, int peer, const uint8_t *first, size_t len, net_landing *l)
{
    node *n = ctx;
    wire_msg m;
    const long at = wire_model_head(&m, first, len);
    float *x = n->land_peer < 0 && at > 0 && m.model.dim == engine_gossip(n->e)->dim ? engine_model_landing(n->e)
                                                                                      : NULL;
    if (!x)
        return 0;
    crypto_generichash_init(&n->land_hash, NULL, 0, WIRE_HASH_LEN);
    n->land_peer = peer, n->land_x = x;
    *l = (net_landing){.dst = (uint8_t *)x, .at = (size_t)at, .len = m.model.dim * sizeof(float), .piece = land_piece};
    return 1;
}

static void on_landed(void *ctx, int peer, const uint8_t *head, size_t head_len)
{
    node *n = ctx;
    wire_msg m;
    uint8_t hash[WIRE_HASH_LEN];
    n->land_peer = -1;
    crypto_generichash_final(&n->land_hash, hash, sizeof hash);
    if (wire_model_head(&m, head, head_len) != (long)head_len) /* (on_land read the same bytes) */
        return;
    n->r->bytes_received += head_len;
    n->models_landed++;
    engine_link_state(n->e, peer, net_busy(&n->net, peer), net_sending(&n->net, peer));
    const double now = clock_now();
    engine_model(n->e, peer, m.model.round, n->land_x, sodium_memcmp(hash, m.model.hash, sizeof hash) == 0, now);
    node_engine_time(n, now);
    node_pump(n);
}

/* A model was taken some other way: one still being written into x stops. */
static void land_over(node *n)
{
    if (n->land_peer >= 0 && !engine_model_landing(n->e)) {
        net_land_stop(&n->net, n->land_peer);
        n->land_peer = -1;
    }
}

/* ---- frames --------------------------------------------------------------------- */

/* A frame, with its MODEL hash already checked (hash_ok 0 or 1) or not (-1). */
static void frame_in(node *n, int peer, const uint8_t *buf, size_t len, int hash_ok)
{
    wire_msg m;
    wire_err e;
    const double now = clock_now();
    n->r->bytes_received += len;
    const int bad = wire_decode(&m, buf, len, &e) < 0;
    n->frame_seconds += clock_now() - now;
    if (bad) { /* authenticated, yet malformed: a bug or a hostile member */
        char why[192];
        snprintf(why, sizeof why, "malformed message (%s: %s, at byte %zu)", e.field ? e.field : "?",
                 e.why ? e.why : "?", e.offset);
        net_drop(&n->net, peer, why);
        return;
    }
    engine_link_state(n->e, peer, net_busy(&n->net, peer), net_sending(&n->net, peer));
    const double t_engine = clock_now();
    switch (m.type) {
    case WIRE_GOODBYE:
        engine_goodbye(n->e, peer,
                       m.goodbye.len != 4                            ? ENGINE_BYE_STOPPED
                       : memcmp(m.goodbye.reason, "done", 4) == 0 ? ENGINE_BYE_DONE
                       : memcmp(m.goodbye.reason, "seen", 4) == 0 ? ENGINE_BYE_SEEN
                                                                    : ENGINE_BYE_STOPPED,
                       now);
        break;
    case WIRE_NACK:
        engine_nack(n->e, peer, m.nack.seq, now);
        break;
    case WIRE_HEARTBEAT:
        engine_heartbeat(n->e, peer, m.heartbeat.round, now);
        break;
    case WIRE_ACK:
        engine_ack(n->e, peer, m.ack.seq, now);
        break;
    case WIRE_MODEL_REQUEST:
        if (!same_size(n, peer, m.model_request.dim, "MODEL_REQUEST") || node_eval_defers(n, peer))
            return;
        engine_model_request(n->e, peer, now);
        break;
    case WIRE_MODEL_SOON:
        engine_model_soon(n->e, peer, now);
        break;
    case WIRE_MODEL: {
        if (!same_size(n, peer, m.model.dim, "MODEL"))
            return;
        engine_model(n->e, peer, m.model.round, (const float *)m.model.payload,
                     hash_ok >= 0 ? hash_ok : model_hash_ok(&m), now);
        land_over(n);
        break;
    }
    case WIRE_PUSH:
        if (!same_size(n, peer, m.push.dim, "PUSH"))
            return;
        on_push(n, peer, &m);
        break;
    case WIRE_MEMBERS:
        node_members_in(n, peer, &m);
        break;
    default:
        return;
    }
    node_engine_time(n, t_engine);
    node_pump(n);
}

/* ---- links ----------------------------------------------------------------------- */

static void on_frame(void *ctx, int peer, const uint8_t *buf, size_t len) { frame_in(ctx, peer, buf, len, -1); }

static void on_frame_noted(void *ctx, int peer, const uint8_t *buf, size_t len, int hash_ok)
{
    frame_in(ctx, peer, buf, len, hash_ok);
}

static void on_up(void *ctx, int peer)
{
    node *n = ctx;
    if (!engine_is_neighbour(n->e, peer)) { /* authenticated, but no neighbour of ours */
        net_drop(&n->net, peer, "not a neighbour under the topology");
        return;
    }
    engine_link_state(n->e, peer, net_busy(&n->net, peer), net_sending(&n->net, peer));
    const double now = clock_now();
    engine_link_up(n->e, peer, now);
    node_engine_time(n, now);
    node_members_flush(n);
    node_pump(n);
}

static void on_down(void *ctx, int peer, int reason)
{
    node *n = ctx;
    (void)reason;
    if (peer == n->land_peer) /* (x holds part of its model: the joiner asks another neighbour) */
        n->land_peer = -1;
    node_members_down(n, peer);
    const double now = clock_now();
    engine_link_down(n->e, peer, now);
    node_engine_time(n, now);
    node_pump(n);
}

static void on_progress(void *ctx, int peer)
{
    node *n = ctx;
    engine_link_progress(n->e, peer, clock_now());
}

static void on_log(void *ctx, const char *line)
{
    node *n = ctx;
    if (n->c->progress) { /* (flushed: a line about a link or the listener is read while the peer runs) */
        fprintf(n->c->progress, "peer %d: %s\n", n->c->id, line);
        fflush(n->c->progress);
    }
}

/* No listener after the retries (net_init): the peer stops, and ends with
 * that error (node_run). */
static void on_listen_failed(void *ctx, int err)
{
    node *n = ctx;
    n->listen_rc = err;
    node_stop(n);
}

void node_net_callbacks(net_callbacks *cb)
{
    *cb = (net_callbacks){
        .on_up = on_up, .on_down = on_down, .on_frame = on_frame, .on_frame_work = check_frame,
        .on_land = on_land, .on_landed = on_landed,
        .on_frame_noted = on_frame_noted, .on_progress = on_progress, .on_log = on_log,
        .on_listen_failed = on_listen_failed};
}
