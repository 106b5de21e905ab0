/* The networked peer: the libuv transport of the round driver. Frames in,
 * timers and the thread pool; every decision of a round is the round
 * driver's (peer/core/round.h) and the pacing policy's (gossip/gsp_pace.h),
 * the same code the simulator runs. See node.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <uv.h>

#include <sodium.h>

#include "peer/core/clock.h"
#include "peer/net/node_ext.h"
#include "peer/net/node_state.h"
#include "peer/wire/wire.h"

/* MODEL carries the model's little-endian bytes and their hash: this host's floats as they are. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "sgp peer assumes a little-endian host");

void node_config_defaults(node_config *c)
{
    memset(c, 0, sizeof *c);
    train_opts_defaults(&c->train);
    c->dead_timeout = 5.0;
    c->round_timeout = 30.0;
    c->checkpoint_every = 30.0;
    c->slow = 1.0;
}

static void finish(node *n);
static void maybe_start(node *n);

/* ---- messages out ------------------------------------------------------------ */

static int send_msg(node *n, int peer, long len)
{
    if (len < 0)
        return (int)len;
    int rc = net_send(&n->net, peer, n->out, (size_t)len);
    if (rc == 0) {
        n->r->bytes_sent += (uint64_t)len, n->r->messages_sent++;
        gsp_pace_sent(&n->rp.pace, peer, clock_now());
    } else
        n->r->send_refused++; /* running sums / a SYNC make up for it later */
    return rc;
}

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

/* A share, a SYNC or RAW totals. */
static int send_push(node *n, int peer, const gsp_msg *m)
{
    size_t need = m->kind == GSP_DELTA ? wire_push_bound(0, m->payload_len) : wire_push_bound(m->dim, 0);
    if (out_room(n, need) < 0)
        return -ENOMEM;
    int rc = send_msg(n, peer, wire_encode_push(n->out, n->out_cap, m));
    out_release(n);
    return rc;
}

static void send_goodbye(node *n, const char *why)
{
    for (int p = 0; p < n->c->cluster->n_peers; p++)
        if (p != n->c->id && net_is_up(&n->net, p))
            send_msg(n, p, wire_encode_goodbye(n->out, n->out_cap, why, strlen(why)));
}

/* Tell peer we have taken in its messages up to the last one received (ACK):
 * its shares keep coming only while we do (gsp_pace_acked). A refused send
 * stays due and goes with the next heartbeat tick. */
static void send_ack(node *n, int peer, int even_if_sent)
{
    if ((even_if_sent || n->ack_due[peer] > n->ack_sent[peer]) &&
        send_msg(n, peer, wire_encode_ack(n->out, n->out_cap, n->ack_due[peer])) == 0)
        n->ack_sent[peer] = n->ack_due[peer];
}

/* A lost compressed message: ask its sender for a SYNC. */
static void nack(void *ctx, const gsp_msg *m)
{
    node *n = ctx;
    send_msg(n, m->src, wire_encode_nack(n->out, n->out_cap, m->seq - 1));
}

/* Our model for a late joiner: z and the round to enter at, with the hash of
 * its bytes. Only while no step runs (the worker writes x). */
static void send_model(node *n, int peer)
{
    const float *z = gsp_debias(&n->rp.g);
    uint8_t hash[WIRE_HASH_LEN];
    crypto_generichash(hash, sizeof hash, (const uint8_t *)z, n->rp.g.dim * sizeof(float), NULL, 0);
    net_expect_busy(&n->net, peer, n->rp.g.dim * sizeof(float));
    int rc = out_room(n, wire_push_bound(n->rp.g.dim, 0)); /* (a model frame is smaller than RAW totals) */
    if (rc == 0)
        rc = send_msg(n, peer, wire_encode_model(n->out, n->out_cap, n->rp.g.round, z, n->rp.g.dim, hash));
    out_release(n);
    n->model_wanted[peer] = rc == -EAGAIN; /* try again at the next round boundary */
    n->model_queued[peer] = rc == 0;
    if (rc == 0)
        node_event(n, "sent its model to joining peer", peer, NULL);
}

/* A joiner asks the next neighbour that is up (round robin from the last one
 * asked), and the next again after a heartbeat interval without an answer:
 * the one asked may be waiting for a model itself, and says nothing. */
static void ask_for_model(node *n)
{
    const gsp_pace *pc = &n->rp.pace;
    for (int k = 1; k <= pc->n_nb; k++) {
        int p = pc->nb[(n->asked + k) % pc->n_nb].peer;
        if (net_is_up(&n->net, p) && send_msg(n, p, wire_encode_model_request(n->out, n->out_cap, n->rp.g.dim)) == 0) {
            n->asked = (n->asked + k) % pc->n_nb, n->asked_at = clock_now();
            net_expect_busy(&n->net, p, n->rp.g.dim * sizeof(float)); /* it builds the model frame, we take it in */
            node_event(n, "asked for the current model: peer", p, NULL);
            return;
        }
    }
}

/* Waiting for a neighbour's model: joining without state, or refreshing. */
static int wants_model(const node *n) { return n->joining || n->refreshing; }

/* Time to ask (again): a heartbeat interval without an answer (a neighbour
 * whose model to us is still on its way ignores the repeat). */
static int ask_due(const node *n, double now)
{
    return wants_model(n) && now - n->asked_at > gsp_pace_heartbeat(&n->rp.pace.c);
}

/* The pacing policy found this peer so far behind that its model is stale
 * (gsp_pace_decision.refresh): rounds wait until a neighbour's model comes,
 * or until twice the dead timeout has passed (then it goes on with its own). */
static void start_refresh(node *n, double now)
{
    n->refreshing = 1;
    n->refresh_since = now;
    node_event(n, "far behind: asking for a neighbour's model", -1, NULL);
    ask_for_model(n);
}

static void refresh_given_up(node *n)
{
    n->refreshing = 0;
    gsp_pace_joined(&n->rp.pace);
    node_event(n, "no neighbour sent its model: going on with its own", -1, NULL);
}

/* ---- messages in ------------------------------------------------------------ */

/* The side of MODEL that asked: check, then enter the run at the sender's
 * round (a joiner), or take the model and keep the weight (a refresh). */
static void on_model(node *n, int peer, const wire_msg *m)
{
    if (m->model.dim != n->rp.g.dim) {
        net_drop(&n->net, peer, "MODEL of another size");
        return;
    }
    if (!wants_model(n))
        return; /* (an answer that came after another neighbour's) */
    uint8_t hash[WIRE_HASH_LEN];
    crypto_generichash(hash, sizeof hash, m->model.payload, m->model.dim * sizeof(float), NULL, 0);
    if (sodium_memcmp(hash, m->model.hash, sizeof hash) != 0) {
        node_event(n, "model failed its hash check: asking another neighbour than", peer, NULL);
        ask_for_model(n);
        return;
    }
    if (n->refreshing) {
        gsp_adopt(&n->rp.g, (const float *)m->model.payload);
        n->refreshing = 0;
        node_event(n, "took the current model of peer", peer, NULL);
    } else {
        gsp_join(&n->rp.g, (const float *)m->model.payload, m->model.round);
        n->joining = 0;
        n->r->start_round = m->model.round;
        node_event(n, "joined with the model of peer", peer, NULL);
    }
    gsp_pace_joined(&n->rp.pace);
    maybe_start(n);
}

static void on_push(node *n, int peer, const wire_msg *m)
{
    if (m->push.dim != n->rp.g.dim) { /* another model's size: nothing of it could be absorbed */
        net_drop(&n->net, peer, "PUSH for a model of another size");
        return;
    }
    gsp_pace_push(&n->rp.pace, &n->rp.g, peer, m->push.round);
    /* The message keeps one block of its own: RAW/SYNC tensors are converted
     * straight into it (one copy out of the frame, not two), a DELTA payload
     * is copied into it because the frame buffer is the transport's. */
    const int delta = m->push.kind == GSP_DELTA;
    size_t cap = delta ? m->push.payload_len : wire_push_scratch_bound(m->push.dim);
    void *mem = malloc(cap ? cap : 1);
    gsp_msg view;
    if (!mem || wire_push_to_gsp(m, &view, mem, cap) < 0) {
        free(mem);
        return;
    }
    if (delta)
        view.payload = memcpy(mem, view.payload, view.payload_len);
    view.owned = mem;
    view.src = peer, view.dst = n->c->id;
    const uint64_t seq = view.seq;
    if (round_inbox_put(&n->rp, &view) < 0) {
        gsp_msg_free(&view);
        return;
    }
    if (m->push.incarnation != n->ack_incarnation[peer]) /* the sender restarted: its seqs start again */
        n->ack_incarnation[peer] = m->push.incarnation, n->ack_due[peer] = n->ack_sent[peer] = 0;
    if (seq > n->ack_due[peer])
        n->ack_due[peer] = seq;
    send_ack(n, peer, 0);
    maybe_start(n);
}

static void on_frame(void *ctx, int peer, const uint8_t *buf, size_t len)
{
    node *n = ctx;
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
    if (m.type == WIRE_GOODBYE) {
        int done = m.goodbye.len == 4 && memcmp(m.goodbye.reason, "done", 4) == 0;
        if (gsp_pace_goodbye(&n->rp.pace, peer, done))
            node_event(n, done ? "neighbour is done" : "neighbour said goodbye", peer, NULL);
        maybe_start(n);
        return;
    }
    if (gsp_pace_heard(&n->rp.pace, peer, now))
        node_event(n, "neighbour is back", peer, NULL);
    switch (m.type) {
    case WIRE_NACK: {
        gsp_msg sync;
        if (gsp_sync_msg(&n->rp.g, peer, &sync) == 0)
            send_push(n, peer, &sync);
        return;
    }
    case WIRE_HEARTBEAT:
        gsp_pace_claim(&n->rp.pace, peer, m.heartbeat.round);
        send_ack(n, peer, 1); /* a sign of life for a peer whose shares to us wait for one */
        maybe_start(n);
        return;
    case WIRE_ACK:
        gsp_pace_acked(&n->rp.pace, peer, m.ack.seq);
        return;
    case WIRE_MODEL_REQUEST:
        if (m.model_request.dim != n->rp.g.dim) {
            net_drop(&n->net, peer, "MODEL_REQUEST for a model of another size");
            return;
        }
        if (wants_model(n))
            return; /* (no model yet, or a stale one) */
        if (n->model_queued[peer] && net_sending(&n->net, peer))
            return; /* the joiner asks again while our model (hundreds of MB) is still on its way: one is enough */
        n->model_queued[peer] = 0;
        if (n->computing)
            n->model_wanted[peer] = 1; /* answered at the round boundary */
        else
            send_model(n, peer);
        return;
    case WIRE_MODEL:
        on_model(n, peer, &m);
        return;
    case WIRE_PUSH:
        on_push(n, peer, &m);
        return;
    default:
        return;
    }
}

/* ---- liveness --------------------------------------------------------------- */

static void on_up(void *ctx, int peer)
{
    node *n = ctx;
    if (!gsp_pace_is_neighbour(&n->rp.pace, peer)) { /* authenticated, but no neighbour of ours */
        net_drop(&n->net, peer, "not a neighbour under the topology");
        return;
    }
    const int slot = n->rp.pace.slot[peer];
    const int ever_up = slot >= 0 && n->rp.pace.nb[slot].ever_up;
    if (gsp_pace_up(&n->rp.pace, peer, clock_now()))
        node_event(n, "neighbour reconnected", peer, NULL);
    /* A reconnected edge starts with a SYNC (WIRE.md): whatever was in flight
     * when the old connection died arrives with it, at once, so the peer
     * waiting for it need not wait for a deadline. */
    gsp_msg sync;
    if (ever_up && gsp_sync_msg(&n->rp.g, peer, &sync) == 0)
        send_push(n, peer, &sync);
    n->ack_sent[peer] = 0; /* (what the old connection carried may be lost) */
    send_ack(n, peer, 0);
    if (n->said_done) /* (a neighbour back from a restart missed it) */
        send_msg(n, peer, wire_encode_goodbye(n->out, n->out_cap, "done", 4));
    if (ask_due(n, clock_now()))
        ask_for_model(n);
    maybe_start(n);
}

static void on_down(void *ctx, int peer, int reason)
{
    node *n = ctx;
    (void)reason;
    gsp_pace_down(&n->rp.pace, peer, clock_now());
}

static void on_log(void *ctx, const char *line)
{
    node *n = ctx;
    if (n->c->progress)
        fprintf(n->c->progress, "peer %d: %s\n", n->c->id, line);
}

/* Every heartbeat interval: route around the neighbours silent or
 * disconnected for the dead timeout (a stopped process keeps its TCP
 * connections open, so only silence shows it), and say we are here to
 * every neighbour that has not heard from us lately. */
static void on_heartbeat(uv_timer_t *t)
{
    node *n = t->data;
    const double now = clock_now();
    gsp_pace *pc = &n->rp.pace;
    int lost[64];
    int k = gsp_pace_tick(pc, now, lost, 64);
    for (int j = 0; j < k; j++) {
        const gsp_pace_nb *b = &pc->nb[pc->slot[lost[j]]];
        node_event(n, "routing around neighbour", lost[j],
                   b->connected ? "silent for the dead timeout"
                   : b->ever_up ? "disconnected for the dead timeout"
                                : "never connected");
    }
    for (int j = 0; j < pc->n_nb; j++) {
        int p = pc->nb[j].peer;
        if (gsp_pace_heartbeat_due(pc, p, now) && net_is_up(&n->net, p) && !net_busy(&n->net, p))
            send_msg(n, p, wire_encode_heartbeat(n->out, n->out_cap, n->rp.g.round));
        if (net_is_up(&n->net, p))
            send_ack(n, p, 0);
    }
    if (ask_due(n, now))
        ask_for_model(n);
    if (n->refreshing && now - n->refresh_since > 2 * n->c->dead_timeout) {
        refresh_given_up(n);
        maybe_start(n);
        return;
    }
    if (n->joining && now - n->t0 > n->c->round_timeout) {
        n->rc = -EHOSTUNREACH; /* nobody to join: node_run says so */
        finish(n);
        return;
    }
    if (k > 0)
        maybe_start(n);
}

static void on_wake(uv_timer_t *t) { maybe_start(t->data); }

/* ---- the caller's own steps (libsgp: node_ext.h) --------------------------------- */

static void ext_status(const node *n, node_status *s)
{
    const gsp_pace *pc = &n->rp.pace;
    const node_result *r = n->r;
    *s = (node_status){.id = n->c->id, .peers = n->c->cluster->n_peers, .round = n->rp.g.round,
                       .start_round = r->start_round, .local_steps = r->local_steps, .weight = n->rp.g.w, .neighbours = pc->n_nb, .bytes_sent = r->bytes_sent,
                       .bytes_received = r->bytes_received, .messages_sent = r->messages_sent,
                       .messages_absorbed = n->rp.absorbed, .late_marks = pc->stats.late_marks,
                       .catch_ups = pc->stats.catch_ups, .neighbours_lost = pc->stats.neighbours_lost,
                       .checkpoints = r->checkpoints};
    for (int j = 0; j < pc->n_nb; j++)
        s->neighbours_alive += pc->alive[pc->nb[j].peer];
}

/* The round has started: its model goes to the caller, who holds the round
 * until it comes back with its step. */
static void ext_hand_out(node *n)
{
    node_status s;
    ext_status(n, &s);
    node_ext_hand_out(n->c->ext, gsp_debias(&n->rp.g), &s);
}

static void stop(node *n);
static void after_step(uv_work_t *w, int status);

/* The caller asked for something: a stop, a checkpoint, or it is back with
 * its step for the round it held. */
static void on_ext_wake(uv_async_t *a)
{
    node *n = a->data;
    node_ext_asks asks;
    node_ext_take(n->c->ext, &n->rp.g, n->computing && !n->finished, &asks);
    if (asks.checkpoint && !n->finished)
        node_checkpoint_now(n); /* answers the caller (after a periodic write in flight) */
    if (asks.stop && !n->stopping) {
        stop(n);
        return;
    }
    if (asks.stepped) {
        outer_end(&n->rp.local.outer, &n->rp.g); /* as round_step ends the node's own steps */
        after_step(&n->work, 0);
        return;
    }
    if (n->computing && !n->finished)
        ext_hand_out(n); /* the caller is waiting for a round that has already started */
}

/* ---- rounds ----------------------------------------------------------------- */

static void work_step(uv_work_t *w)
{
    node *n = w->data;
    round_step(&n->rp, &n->model);
    if (n->slow_pad > 0) { /* an emulated slow machine (--slow) */
        double pad = n->slow_pad;
        struct timespec ts = {(time_t)pad, (long)((pad - (double)(time_t)pad) * 1e9)};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
        }
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* --slow F: once 48 rounds have run at full speed (the first ones are slow:
 * connections, caches), pad every step so that a round takes F times the
 * median of the last ones (a peer at 1/F of its speed: round times here are
 * mostly the cluster's rhythm, not this peer's compute). */
static void slow_down(node *n)
{
    const gsp_pace *pc = &n->rp.pace;
    if (n->c->slow <= 1.0 || n->slow_pad > 0 || pc->n_recent < 48)
        return;
    double d[GSP_PACE_RECENT];
    memcpy(d, pc->recent, sizeof d);
    qsort(d, GSP_PACE_RECENT, sizeof *d, cmp_double);
    n->slow_pad = (n->c->slow - 1.0) * d[GSP_PACE_RECENT / 2];
    char why[64];
    snprintf(why, sizeof why, "+%.1f ms a step (%.4gx a %.1f ms round)", 1e3 * n->slow_pad, n->c->slow,
             1e3 * d[GSP_PACE_RECENT / 2]);
    node_event(n, "slowed down", -1, why);
}

static void after_step(uv_work_t *w, int status)
{
    node *n = w->data;
    n->computing = 0;
    if (status < 0)
        return; /* cancelled at shutdown */
    if (n->c->ext)
        n->rp.steps += n->plan.local_steps; /* the caller's steps of this round (round_step counts the node's own) */
    n->r->local_steps = n->rp.steps;
    n->epoch_loss += n->rp.loss, n->epoch_steps++;
    const double now = clock_now();
    /* Backpressure: a neighbour whose link has not taken our last frames
     * gets no share this round (it stays home; no queue grows). */
    const gsp_pace *pc = &n->rp.pace;
    for (int j = 0; j < pc->n_nb; j++)
        n->busy[pc->nb[j].peer] = (uint8_t)net_busy(&n->net, pc->nb[j].peer);
    const int was_isolated = pc->isolated;
    gsp_msg msgs[TOPO_MAX_OUT];
    long round = n->rp.g.round;
    int m = round_emit(&n->rp, now, n->busy, msgs);
    if (pc->isolated != was_isolated)
        node_event(n, pc->isolated ? "no in-neighbour heard: keeping shares home" : "hearing in-neighbours again", -1,
                   NULL);
    if (m < 0) {
        n->rc = m;
        finish(n);
        return;
    }
    const double t_send = clock_now();
    for (int j = 0; j < m; j++)
        send_push(n, msgs[j].dst, &msgs[j]);
    n->frame_seconds += clock_now() - t_send;
    int probe[TOPO_MAX_OUT];
    for (int j = gsp_pace_probes(&n->rp.pace, probe, TOPO_MAX_OUT); j-- > 0;)
        if (net_is_up(&n->net, probe[j]) && !net_busy(&n->net, probe[j]))
            send_msg(n, probe[j], wire_encode_heartbeat(n->out, n->out_cap, n->rp.g.round));
    for (int p = 0; p < n->c->cluster->n_peers; p++)
        if (n->model_wanted[p])
            send_model(n, p);
    float acc = -1.0f;
    if (!n->c->ext && (round + 1) % n->plan.rounds_per_epoch == 0) {
        float loss;
        nn_model_evaluate(&n->model, gsp_debias(&n->rp.g), n->test, &loss, &acc);
        if (n->c->progress) {
            char test[64];
            if (n->test->text)
                snprintf(test, sizeof test, "val loss %.4f (%.3f bits/byte)", loss, nn_bits_per_byte(loss));
            else
                snprintf(test, sizeof test, "test %6.2f%%", 100 * acc);
            fprintf(n->c->progress, "peer %d  epoch %3ld/%ld  loss %.4f  %s  %.1f MB out  %.1fs\n", n->c->id,
                    (round + 1) / n->plan.rounds_per_epoch, n->c->train.epochs,
                    n->epoch_steps ? n->epoch_loss / n->epoch_steps : 0.0, test, n->r->bytes_sent / 1e6,
                    clock_now() - n->t0);
            fflush(n->c->progress);
        }
        n->r->train_loss = (float)(n->epoch_steps ? n->epoch_loss / n->epoch_steps : 0.0);
        n->epoch_loss = 0, n->epoch_steps = 0;
    }
    node_log_round(n, round + 1, acc);
    if (n->c->checkpoint && n->c->checkpoint_every > 0 && clock_now() - n->last_ckpt >= n->c->checkpoint_every)
        node_checkpoint(n);
    maybe_start(n);
}

void node_rounds_resume(node *n)
{
    if (n->finish_pending)
        finish(n);
    else
        maybe_start(n);
}

/* Every round is done: say so, and stay to take in what the in-neighbours
 * still send until each is done too (or routed around), as the simulator's
 * finished peers do; then finish. */
static void done(node *n)
{
    if (!n->said_done) {
        n->said_done = 1;
        send_goodbye(n, "done");
    }
    if (gsp_pace_in_done(&n->rp.pace))
        finish(n);
}

static void maybe_start(node *n)
{
    if (n->computing || n->finished || n->ckpt_busy) /* (a checkpoint being written from the state: wait) */
        return;
    if (n->stopping) {
        finish(n);
        return;
    }
    const double now = clock_now();
    gsp_pace_decision d;
    gsp_pace_action a = round_next(&n->rp, now, &d);
    if (d.jumped_from >= 0) {
        char why[96];
        snprintf(why, sizeof why, "%ld rounds behind: jumping to round %ld", n->rp.g.round - d.jumped_from,
                 n->rp.g.round);
        node_event(n, "catching up", -1, why);
    }
    if (d.refresh)
        start_refresh(n, now);
    for (int j = 0; j < d.n_late; j++)
        node_event(n, "not waiting for late neighbour", d.late[j], NULL);
    if (d.alone != n->alone) {
        n->alone = d.alone;
        if (d.alone)
            node_event(n, "every in-neighbour lost: waiting for one to come back", -1, NULL);
    }
    switch (a) {
    case GSP_PACE_WAIT: {
        if (n->wait_since < 0)
            n->wait_since = now;
        double ms = 1e3 * (d.wake_at - now);
        uv_timer_start(&n->wake_timer, on_wake, ms > 0 ? (uint64_t)ceil(ms) : 0, 0);
        return;
    }
    case GSP_PACE_DONE:
        done(n);
        return;
    case GSP_PACE_START:
        break;
    }
    uv_timer_stop(&n->wake_timer);
    if (n->wait_since >= 0)
        n->wait_seconds += now - n->wait_since, n->wait_since = -1;
    gsp_pace_started(&n->rp.pace, now);
    round_absorb(&n->rp, 0, nack, n);
    n->computing = 1;
    n->round_start = now;
    if (n->c->ext) {
        outer_begin(&n->rp.local.outer, &n->rp.g); /* the caller's H steps start from the model handed out */
        ext_hand_out(n);
        return;
    }
    slow_down(n);
    uv_queue_work(&n->loop, &n->work, work_step, after_step);
}

/* Done (or stopped): take in what has arrived, checkpoint, say goodbye, close. */
static void finish(node *n)
{
    if (n->finished)
        return;
    if (n->ckpt_busy) { /* the state is being written: absorb and say goodbye after */
        n->finish_pending = 1;
        return;
    }
    n->finished = 1;
    if (!n->joining) {
        round_absorb(&n->rp, 1, NULL, NULL);
        node_checkpoint_now(n);
        node_log_ledger(n);
    }
    mem_parts *m = &n->r->memory;
    *m = (mem_parts){.model = n->model.bytes, .in_flight = n->out_cap + net_bytes(&n->net)};
    if (n->train)
        m->data += nn_dataset_bytes(n->train);
    if (n->test)
        m->data += nn_dataset_bytes(n->test);
    round_memory(&n->rp, m);
    mem_measure(m);
    /* The goodbye goes last on each connection, after the shares its slots
     * still hold (on a slow link they are not written yet, and closing at
     * once would cancel them: the neighbour would wait its dead timeout for
     * them and their weight would be lost), for at most a dead timeout. */
    long bye = -1;
    if (!n->said_done) {
        const char *why = n->stopping ? "stopped" : "done";
        bye = wire_encode_goodbye(n->out, n->out_cap, why, strlen(why));
        for (int p = 0; bye >= 0 && p < n->c->cluster->n_peers; p++)
            if (p != n->c->id && net_is_up(&n->net, p))
                n->r->bytes_sent += (uint64_t)bye, n->r->messages_sent++;
    }
    uv_close((uv_handle_t *)&n->wake_timer, NULL);
    uv_close((uv_handle_t *)&n->heartbeat_timer, NULL);
    if (n->c->ext) {
        node_ext_closing(n->c->ext);
        uv_close((uv_handle_t *)&n->c->ext->wake, NULL);
    } else {
        uv_close((uv_handle_t *)&n->sigint, NULL);
        uv_close((uv_handle_t *)&n->sigterm, NULL);
    }
    net_close_after(&n->net, bye >= 0 ? n->out : NULL, bye >= 0 ? (size_t)bye : 0, n->c->dead_timeout);
}

/* Stop (SIGTERM, SIGINT, or libsgp's close): a checkpoint and GOODBYE
 * "stopped", now or, while a local step runs on the thread pool, when it is
 * done (after_step's maybe_start). A caller stepping itself holds no worker. */
static void stop(node *n)
{
    n->stopping = 1;
    n->said_done = 0; /* a peer lingering after its last round says it stopped: route around it */
    if (!n->computing || n->c->ext)
        finish(n);
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)signum;
    stop(s->data);
}

/* ---- set-up ------------------------------------------------------------------- */

/* A number that grows with every start of a peer's process: microseconds of
 * the wall clock (a host whose clock steps back by more than a restart takes
 * could reuse one; receivers would then ignore it until it passes the old). */
static uint64_t new_incarnation(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
}

static int setup(node *n, const nn_dataset *train, char *err, size_t errlen)
{
    const node_config *c = n->c;
    const int np = c->cluster->n_peers, id = c->id;
    const float *x0;
    size_t dim;
    int rc;
    if (c->ext) { /* the caller's parameters and run length; it steps itself */
        n->plan = (round_plan){.local_steps = c->local_steps > 1 ? c->local_steps : 1,
                               .steps_per_epoch = c->ext->rounds_per_epoch * (c->local_steps > 1 ? c->local_steps : 1),
                               .rounds_per_epoch = c->ext->rounds_per_epoch, .total_rounds = c->ext->rounds};
        x0 = c->ext->params, dim = c->ext->dim;
    } else {
        round_plan_make(&n->plan, &c->train, train->n, np, c->local_steps);
        rc = train_opts_model(&c->train, train, n->plan.per_batch > 256 ? n->plan.per_batch : 256, &n->model, err,
                              errlen);
        if (rc < 0)
            return rc;
        x0 = n->model.params, dim = n->model.n_params;
    }
    if (dim > WIRE_MAX_DIM) { /* no PUSH, SYNC or MODEL of it would go out: refuse rather than train alone */
        snprintf(err, errlen, "peer %d: a model of %zu parameters is more than a peer can exchange (at most %zu: a SYNC "
                              "of 12 bytes a parameter must fit one frame, peer/net/WIRE.md)",
                 id, dim, (size_t)WIRE_MAX_DIM);
        return -EMSGSIZE;
    }
    n->cfg = (round_config){.train = &c->train, .topology = c->topology, .n_peers = np, .shard_alpha = c->shard_alpha,
                           .tau = c->tau, .codec = c->codec, .step = c->step, .codec_warmup = c->codec_warmup,
                           .dead_timeout = c->dead_timeout, .round_timeout = c->round_timeout,
                           .round_deadline = c->round_deadline, .barrier = !c->resume,
                           .alone_wait = c->alone_wait, .outer = c->outer};
    rc = round_peer_init(&n->rp, &n->cfg, &n->plan, id, c->ext ? NULL : train, x0, dim, clock_now(), err, errlen);
    if (rc < 0)
        return rc;
    nn_model_drop_params(&n->model); /* x0 is in the push-sum state now, which is what the steps use */
    n->rp.g.incarnation = new_incarnation();
    /* With a codec the usual message is a DELTA: at most the codec's bound,
     * or a whole model in bf16 (an edge's first message, a refresh). */
    const size_t payload = c->codec ? cmp_bound(c->codec, dim) : 0,
                 bf16 = c->codec ? cmp_bound(&n->rp.g.first, dim) : 0;
    n->out_base = c->codec ? wire_push_bound(0, payload > bf16 ? payload : bf16) : wire_push_bound(dim, 0);
    n->out_cap = n->out_base;
    n->out = malloc(n->out_cap);
    n->busy = calloc((size_t)np, 1);
    n->model_wanted = calloc((size_t)np, 1);
    n->model_queued = calloc((size_t)np, 1);
    n->ack_due = calloc((size_t)np, sizeof *n->ack_due);
    n->ack_sent = calloc((size_t)np, sizeof *n->ack_sent);
    n->ack_incarnation = calloc((size_t)np, sizeof *n->ack_incarnation);
    if (!n->out_cap || !n->out || !n->busy || !n->model_wanted || !n->model_queued || !n->ack_due || !n->ack_sent ||
        !n->ack_incarnation) {
        snprintf(err, errlen, "peer %d: cannot set up (%s)", id, strerror(ENOMEM));
        return -ENOMEM;
    }
    n->run = (ckpt_run){.id = id, .n_peers = np, .dim = dim, .model = c->ext ? "external" : c->train.model,
                        .cluster = c->cluster->name,
                        .codec = c->codec ? c->codec->text : "exact", .seed = c->train.seed};
    cluster_id(c->cluster, n->run.cluster_id); /* a checkpoint of another run is refused */
    n->last_ckpt = clock_now();
    if (c->resume)
        node_resume(n);
    return 0;
}

static int start_loop(node *n, char *err, size_t errlen)
{
    const node_config *c = n->c;
    net_callbacks cb = {.on_up = on_up, .on_down = on_down, .on_frame = on_frame, .on_log = on_log};
    int rc = net_init(&n->net, &n->loop, c->cluster, c->id, c->key, &cb, n);
    if (rc < 0) {
        snprintf(err, errlen, "peer %d: cannot listen on its cluster address: %s", c->id, strerror(-rc));
        return rc;
    }
    net_set_max_frame(&n->net, wire_push_bound(n->rp.g.dim, c->codec ? cmp_bound(c->codec, n->rp.g.dim) : 0) + 64);
    /* Heartbeats keep a live link busy every dead_timeout / 4: twice the dead
     * timeout without a frame is a stall (the peer is routed around by then). */
    net_set_idle_timeout(&n->net, 2 * c->dead_timeout);
    /* Everyone we ever send to or hear from, over one period of the schedule. */
    const gsp_pace *pc = &n->rp.pace;
    for (int k = 0; k < pc->n_nb; k++)
        if ((rc = net_want(&n->net, pc->nb[k].peer)) < 0)
            return rc;
    uv_timer_init(&n->loop, &n->wake_timer);
    uv_timer_init(&n->loop, &n->heartbeat_timer);
    n->wake_timer.data = n->heartbeat_timer.data = n;
    uint64_t hb = (uint64_t)(gsp_pace_heartbeat(&pc->c) * 1000);
    uv_timer_start(&n->heartbeat_timer, on_heartbeat, hb, hb);
    if (c->ext) { /* the caller's process owns its signals; it asks through the wake handle */
        if ((rc = uv_async_init(&n->loop, &c->ext->wake, on_ext_wake)) < 0)
            return rc;
        c->ext->wake.data = n;
        pthread_mutex_lock(&c->ext->mu);
        c->ext->wake_open = 1;
        pthread_mutex_unlock(&c->ext->mu);
    } else {
        uv_signal_init(&n->loop, &n->sigint);
        uv_signal_init(&n->loop, &n->sigterm);
        n->sigint.data = n->sigterm.data = n;
        uv_signal_start(&n->sigint, on_signal, SIGINT);
        uv_signal_start(&n->sigterm, on_signal, SIGTERM);
    }
    if (n->joining)
        n->asked_at = -1e9; /* ask as soon as a neighbour is up */
    return 0;
}

int node_run(const node_config *c, const nn_dataset *train, const nn_dataset *test, node_result *r, char *err,
             size_t errlen)
{
    memset(r, 0, sizeof *r);
    int rc = 0;
    node *n = NULL;
    if (!c->cluster || !c->topology || c->topology->n_peers != c->cluster->n_peers || c->id < 0 ||
        c->id >= c->cluster->n_peers) {
        snprintf(err, errlen, "the topology, the cluster and the id do not agree");
        rc = -EINVAL;
    } else if (!(n = calloc(1, sizeof *n))) {
        snprintf(err, errlen, "peer %d: out of memory", c->id);
        rc = -ENOMEM;
    }
    if (rc < 0) {
        if (c->ext)
            node_ext_end(c->ext, rc, err, NULL, &(node_status){0});
        return rc;
    }
    n->c = c, n->train = train, n->test = test, n->r = r;
    n->work.data = n;
    n->t0 = clock_now();
    n->wait_since = -1;
    rc = uv_loop_init(&n->loop);
    int loop_ok = rc == 0;
    if (rc == 0)
        rc = setup(n, train, err, errlen);
    int net_started = 0;
    if (rc == 0) {
        net_started = 1;
        rc = start_loop(n, err, errlen);
    }
    if (rc == 0) {
        maybe_start(n);
        uv_run(&n->loop, UV_RUN_DEFAULT);
        rc = n->rc;
        if (rc == -EDOM)
            snprintf(err, errlen, "peer %d: the model diverged at round %ld (NaN or infinity in the parameters): "
                     "try a lower --lr or --clip", c->id, n->rp.g.round);
        else if (rc == -EHOSTUNREACH)
            snprintf(err, errlen, "peer %d: no checkpoint, and no neighbour sent its model within the round timeout "
                     "(%.0f s): nothing to join", c->id, c->round_timeout);
        else if (rc < 0)
            snprintf(err, errlen, "peer %d: %s", c->id, strerror(-rc));
        else if (n->joining) {
            snprintf(err, errlen, "peer %d: stopped before any neighbour sent its model", c->id);
            rc = -ETIMEDOUT;
        }
    } else if (net_started) {
        net_close(&n->net);
        uv_run(&n->loop, UV_RUN_DEFAULT);
    }
    if (rc == 0) {
        const gsp_peer *g = &n->rp.g;
        const float *z = gsp_debias(&n->rp.g);
        if (!c->ext)
            nn_model_evaluate(&n->model, z, test, &r->test_loss, &r->test_accuracy);
        r->model = malloc(g->dim * sizeof(float));
        if (r->model)
            memcpy(r->model, z, g->dim * sizeof(float));
        r->parameters = g->dim;
        r->weight = g->w;
        r->rounds = g->round;
        r->mean_staleness = g->stats.absorbed ? (double)g->stats.stale_sum / (double)g->stats.absorbed : 0;
    }
    const gsp_pace_stats *ps = &n->rp.pace.stats;
    r->messages_absorbed = n->rp.absorbed;
    r->late_marks = ps->late_marks, r->catch_ups = ps->catch_ups, r->neighbours_lost = ps->neighbours_lost;
    r->refreshes = ps->refreshes;
    r->step_seconds = n->rp.times.step, r->gossip_seconds = n->rp.times.gossip;
    r->frame_seconds = n->frame_seconds + n->net.crypto_seconds, r->wait_seconds = n->wait_seconds;
    if (c->ext) {
        node_status s = {0};
        if (n->rp.g.dim)
            ext_status(n, &s);
        node_ext_end(c->ext, rc, err, rc == 0 ? r->model : NULL, &s);
    }
    if (net_started)
        net_free(&n->net);
    if (loop_ok)
        uv_loop_close(&n->loop);
    free(n->out);
    free(n->busy);
    free(n->model_wanted);
    free(n->model_queued);
    free(n->ack_due), free(n->ack_sent), free(n->ack_incarnation);
    round_peer_free(&n->rp);
    nn_model_free(&n->model);
    r->wall_seconds = clock_now() - n->t0;
    r->idle_seconds = fmax(0.0, r->wall_seconds - r->step_seconds - r->gossip_seconds - r->frame_seconds -
                                    r->wait_seconds);
    free(n);
    return rc;
}

void node_result_free(node_result *r)
{
    if (!r)
        return;
    free(r->model);
    memset(r, 0, sizeof *r);
}
