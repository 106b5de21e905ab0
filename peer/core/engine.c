/* The peer engine: see engine.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gsp_gather.h"
#include "gossip/gsp_pool.h"
#include "peer/core/engine_state.h"

/* ---- queued outputs ------------------------------------------------------------ */

static int grow(void **arr, int *cap, int n, size_t size)
{
    if (n < *cap)
        return 0;
    int nc = *cap ? 2 * *cap : 16;
    void *a = realloc(*arr, (size_t)nc * size);
    if (!a)
        return -ENOMEM;
    *arr = a, *cap = nc;
    return 0;
}

/* A frame that tells our round (a share, a heartbeat, a goodbye, a model)
 * spares the heartbeat: it goes to a neighbour that got none of those for
 * an interval. An ACK is a sign of life too, but says no round, and the
 * neighbours' rounds are what the brake and the catch-up go by (a side of a
 * partition whose only traffic to a peer was ACKs let that peer race). */
static void queue(engine *e, engine_send s, double now)
{
    if (e->next_send == e->n_sends)
        e->next_send = e->n_sends = 0;
    if (grow((void **)&e->sends, &e->cap_sends, e->n_sends, sizeof *e->sends) < 0) {
        e->fail = -ENOMEM;
        return;
    }
    e->sends[e->n_sends++] = s;
    if (s.kind != ENGINE_ACK && s.kind != ENGINE_NACK && s.kind != ENGINE_MODEL_REQUEST)
        gsp_pace_sent(&e->rp.pace, s.peer, now);
}

static void event(engine *e, engine_event v)
{
    if (e->next_event == e->n_events)
        e->next_event = e->n_events = 0;
    if (grow((void **)&e->events, &e->cap_events, e->n_events, sizeof *e->events) < 0) {
        e->fail = -ENOMEM;
        return;
    }
    e->events[e->n_events++] = v;
}

void engine_log_event(engine *e, engine_log log, int peer, const char *detail)
{
    engine_event v = {.kind = ENGINE_LOG, .round = e->rp.g.round, .log = log, .peer = peer};
    if (detail)
        snprintf(v.detail, sizeof v.detail, "%s", detail);
    event(e, v);
}

int engine_poll_send(engine *e, engine_send *s)
{
    if (e->next_send >= e->n_sends)
        return 0;
    *s = e->sends[e->next_send++];
    return 1;
}

int engine_poll_event(engine *e, engine_event *v)
{
    if (e->next_event >= e->n_events)
        return 0;
    *v = e->events[e->next_event++];
    return 1;
}

/* ---- what a neighbour is to us --------------------------------------------------- */

int engine_is_neighbour(const engine *e, int q) { return gsp_pace_is_neighbour(&e->rp.pace, q); }

/* Any frame but a GOODBYE is a sign of life. */
static void heard(engine *e, int q, double now)
{
    if (gsp_pace_heard(&e->rp.pace, q, now))
        engine_log_event(e, ENGINE_LOG_NEIGHBOUR_BACK, q, NULL);
}

/* Tell q we have taken in its messages up to the last one received: its
 * shares keep coming only while we do (gsp_pace_acked). */
static void send_ack(engine *e, int q, int even_if_sent, double now)
{
    if (!engine_connected(e, q) || !(even_if_sent || e->ack_due[q] > e->ack_sent[q]))
        return;
    queue(e, (engine_send){.kind = ENGINE_ACK, .peer = q, .seq = e->ack_due[q]}, now);
    e->ack_sent[q] = e->ack_due[q];
}

/* What q lacks of our messages after `base`, as one SYNC (nothing if it
 * holds them all). q asks (a NACK) at every absorb that finds messages it
 * cannot apply, from one seq until its SYNC comes (gsp_nack_seq), so a NACK
 * from before the seq of the SYNC we queued last was sent before q had that
 * SYNC, which answers it; at 100M each is half a GB to build. So none again
 * while the link still writes it, nor, where a link that stays up loses
 * nothing (a reconnect clears this), for the same request until q
 * acknowledges the SYNC, or a dead timeout after it went without that
 * acknowledgement, plus the time a whole model takes at the slowest rate
 * (q refused it at its door: it held too much of ours, or it was so far
 * behind that the SYNC's round was more than time allows).
 * Otherwise (the simulator's lossy links: its links never report
 * "sending") every NACK is answered. */
static void send_sync(engine *e, int q, uint64_t base, double now)
{
    const gsp_pace *pc = &e->rp.pace;
    const uint64_t s = e->sync_queued[q], acked = pc->slot[q] >= 0 ? pc->nb[pc->slot[q]].acked_seq : 0;
    const int on_its_way = e->rp.c->reliable_links && base == e->sync_asked[q] && acked < s &&
                           now - e->sync_queued_at[q] <
                               pc->c.dead_timeout + 4.0 * (double)e->rp.g.dim / ENGINE_SLOWEST_BYTES_PER_S;
    if (base < s && (e->sending[q] || on_its_way))
        return;
    gsp_msg sync;
    if (gsp_sync_msg(&e->rp.g, q, base, &sync) == 0) {
        queue(e, (engine_send){.kind = ENGINE_PUSH, .peer = q, .msg = sync}, now);
        e->sync_queued[q] = sync.seq, e->sync_asked[q] = base, e->sync_queued_at[q] = now;
    }
}

static void send_heartbeat(engine *e, int q, double now)
{
    if (engine_connected(e, q) && !e->busy[q])
        queue(e, (engine_send){.kind = ENGINE_HEARTBEAT, .peer = q, .round = e->rp.g.round}, now);
}

/* Our model for a peer that asked (a joiner, or one far behind): z and the
 * round to enter at, as x and the factor gsp_debias would apply (the driver
 * writes z into the frame, so no z is written, and kept resident, beside x).
 * Only between rounds: a running step writes x. */
static void send_model(engine *e, int q, double now)
{
    queue(e, (engine_send){.kind = ENGINE_MODEL, .peer = q, .round = e->rp.g.round, .model = e->rp.g.x,
                           .scale = gsp_debias_factor(&e->rp.g), .dim = e->rp.g.dim},
          now);
    e->model_wanted[q] = 0, e->model_queued[q] = 1;
    e->model_sent_round[q] = e->rp.g.round;
    engine_log_event(e, ENGINE_LOG_MODEL_SENT, q, NULL);
}

/* ---- rounds ------------------------------------------------------------------------- */

/* A lost compressed message: ask its sender for a SYNC. */
static void nack(void *ctx, int src, uint64_t seq)
{
    engine *e = ctx;
    queue(e, (engine_send){.kind = ENGINE_NACK, .peer = src, .seq = seq}, e->absorb_now);
}

/* A message of q refused, and why: logged at the first refusal of each
 * sender and then each time its count doubles, so that a member that keeps
 * sending them cannot flood the log. */
static void refused(engine *e, int q, const char *why)
{
    const uint32_t k = ++e->refusals[q];
    if ((k & (k - 1)) == 0) {
        char detail[96];
        snprintf(detail, sizeof detail, "%s (%u so far)", why, k);
        engine_log_event(e, ENGINE_LOG_REFUSED, q, detail);
    }
}

/* Absorb what arrived (round_absorb), and say what it refused. */
static void absorb(engine *e, int all)
{
    round_absorb(&e->rp, all, all ? NULL : nack, e);
    for (int j = 0; j < e->rp.n_refused && j < ROUND_TAKEN_MAX; j++)
        refused(e, e->rp.refused_from[j], e->rp.refused_why[j]);
    if (!all)
        engine_gap_ask(e, e->absorb_now);
}

void engine_absorb(engine *e, int all) { absorb(e, all); }

void engine_queue(engine *e, engine_send s, double now) { queue(e, s, now); }

/* Done (every round, a stop, or a failure): take in what has arrived and
 * close. */
static void finish(engine *e, int rc)
{
    if (e->finished)
        return;
    e->finished = 1;
    if (!e->joining)
        absorb(e, 1);
    /* A failure says "stopped", not "done": its neighbours must route around
     * it, not take it for finished at the last round. */
    event(e, (engine_event){.kind = ENGINE_FINISHED, .round = e->rp.g.round, .rc = rc,
                            .goodbye = e->said_done && rc == 0 ? -1 : !e->stopping && rc == 0});
}

/* The model is no longer finite (`what`: the loss, the parameters): stop,
 * saying "stopped" (the neighbours route around it), with why. */
static void diverged(engine *e, const char *what)
{
    e->diverged = what;
    engine_log_event(e, ENGINE_LOG_DIVERGED, -1, what);
    e->stopping = 1;
    finish(e, -EDOM);
}

/* How long a peer that has done every round waits for its in-neighbours'
 * last shares: the round limit, plus twice the messages a neighbour held
 * back by the brake can still send (engine_hold_max), each at twice this
 * peer's mean round time, so an in-neighbour four times slower still
 * finishes within it. Without a bound a member that stays connected and
 * never finishes (reconnecting, its messages refused) keeps it for ever. */
static double linger_limit(const engine *e)
{
    const long rounds = e->rp.g.round - e->start_round;
    const double mean = rounds > 0 && e->first_step_at >= 0 ? (e->done_at - e->first_step_at) / (double)rounds : 0;
    return e->rp.pace.c.round_timeout + 2.0 * engine_hold_max(e) * mean;
}

/* Past linger_limit: leave, naming whom it did not wait for. */
static void stop_lingering(engine *e)
{
    int peers[4];
    const int n = gsp_pace_waited_for(&e->rp.pace, peers, 4);
    char who[96];
    int len = snprintf(who, sizeof who, "%.1f s after its last round, still waiting for", linger_limit(e));
    if (n == 0)
        len += snprintf(who + len, sizeof who - (size_t)len, " an acknowledgement or a SYNC");
    for (int j = 0; j < n && j < 4 && len < (int)sizeof who; j++)
        len += snprintf(who + len, sizeof who - (size_t)len, " %d", peers[j]);
    if (n > 4 && len < (int)sizeof who)
        snprintf(who + len, sizeof who - (size_t)len, " and %d more", n - 4);
    engine_log_event(e, ENGINE_LOG_LEAVING, -1, who);
    finish(e, 0);
}

/* Every round is done: say so, and stay to take in what the in-neighbours
 * still send until each is done too (or routed around), with every share
 * it refused at the door asked for again (engine_gaps.c) and, over links
 * that lose nothing while up, every share it sent acknowledged by the
 * out-neighbours still connected (one of them may have refused its last
 * ones, and asks for them now): for at most linger_limit. */
static void done(engine *e, double now)
{
    if (!e->rounds_done) {
        e->rounds_done = 1;
        e->done_at = now;
        event(e, (engine_event){.kind = ENGINE_DONE, .round = e->rp.g.round});
    }
    /* What comes is taken in as it comes (and a gap asked for): held until
     * the end, an in-neighbour's last shares filled the inbox and the next
     * were refused, their weight in flight for good (0.74 of 6 in one run). */
    e->absorb_now = now;
    absorb(e, 0);
    if (!e->said_done) {
        e->said_done = 1;
        const gsp_pace *pc = &e->rp.pace;
        for (int j = 0; j < pc->n_nb; j++)
            if (engine_connected(e, pc->nb[j].peer))
                queue(e, (engine_send){.kind = ENGINE_GOODBYE, .peer = pc->nb[j].peer, .done = ENGINE_BYE_DONE}, now);
    }
    const int owed = e->rp.c->reliable_links && gsp_pace_owed(&e->rp.pace, &e->rp.g);
    if (gsp_pace_in_done(&e->rp.pace) && !engine_gap_open(e) && !owed)
        finish(e, 0);
    else if (now - e->done_at > linger_limit(e))
        stop_lingering(e);
}

/* The pacing policy found this peer so far behind that its model is stale:
 * rounds wait until a neighbour's model comes, or until twice the dead
 * timeout has passed (then it goes on with its own). */
static void start_refresh(engine *e, double now)
{
    e->refreshing = 1;
    e->refresh_since = now;
    engine_log_event(e, ENGINE_LOG_FAR_BEHIND, -1, NULL);
    engine_ask_for_model(e, now);
}

static void emit_round(engine *e, double now);

static int overlap(const engine *e) { return e->rp.c->overlap; }

/* Round `round`'s local steps: a STEP event (the caller's bracketed by the
 * outer step here; round_step brackets its own). With overlap they start
 * from z_start: the model the last fold left, before its emit, or z now. */
static void start_step(engine *e, long round)
{
    e->computing = 1;
    e->step_round = round;
    if (overlap(e))
        engine_overlap_start(e);
    else if (e->caller_steps)
        outer_begin(&e->rp.local.outer, &e->rp.g);
    event(e, (engine_event){.kind = ENGINE_STEP, .round = round});
}

/* With overlap, a round's steps start as soon as the round before is folded
 * in, and its pacing question and absorb run beside them. Not while the
 * peer pulls a model, nor past the run's last round. */
static int step_first(const engine *e)
{
    return overlap(e) && !e->computing && !e->stepped && !e->absorbed && !engine_wants_model(e) &&
           e->rp.g.round < e->rp.pace.c.total_rounds;
}

/* A caller stepping itself gets the next model at once, and the emit (the
 * codec's encode) follows at the next engine call, off its path; the
 * simulator and `sgp peer` emit now and start the next steps at the
 * boundary, as the caller's would be had it been quicker. */
static void fold(engine *e, double now)
{
    engine_fold_steps(e);
    const gsp_peer *g = &e->rp.g;
    if (e->caller_steps && e->z_start && !e->fail && !e->stopping && !engine_wants_model(e) &&
        g->round + 1 < e->rp.pace.c.total_rounds) {
        start_step(e, g->round + 1);
        e->emit_due = 1;
        return;
    }
    emit_round(e, now);
}

/* --gather: a model that differs from the round's lowest sender's takes
 * that one (gossip/gsp_gather.h), asked for once in engine_hold_max rounds
 * (the sender answers a peer no more often). */
static void ask_if_apart(engine *e, double now)
{
    const long q = e->rp.g.gather->apart_from;
    if (q < 0 || !engine_connected(e, (int)q) ||
        (e->apart_asked_round >= 0 && e->rp.g.round - e->apart_asked_round < engine_hold_max(e)))
        return;
    queue(e, (engine_send){.kind = ENGINE_MODEL_REQUEST, .peer = (int)q, .dim = e->rp.g.dim}, now);
    e->apart_asked = (int)q, e->apart_asked_round = e->rp.g.round;
    engine_log_event(e, ENGINE_LOG_APART, (int)q, NULL);
}

static void try_start(engine *e, double now)
{
    if (e->finished || e->held)
        return;
    if (e->emit_due) { /* (a caller stepping itself has its model: now the round goes out) */
        e->emit_due = 0;
        emit_round(e, now);
        return;
    }
    if (e->fail || e->stopping) {
        if (e->computing)
            return;
        if (e->leaving && !e->fail && !engine_leave_ready(e, now))
            return;
        if (e->leaving && !e->fail && engine_hand_off(e, now) == -EDOM)
            diverged(e, "the parameters");
        if (e->leaving && !e->fail && !e->finished && !engine_leave_acked(e, now))
            return;
        finish(e, e->fail);
        if (e->stepped) /* (overlap: the model it stops with, and checkpoints, has the steps taken) */
            engine_fold_steps(e);
        return;
    }
    if (step_first(e))
        start_step(e, e->rp.g.round); /* and the pacing question beside the steps */
    if (e->computing && (!overlap(e) || e->absorbed))
        return;
    if (e->stepped && e->absorbed) {
        fold(e, now);
        return;
    }
    gsp_pace_decision d;
    const gsp_pace_action a = round_next(&e->rp, now, &d);
    if (d.jumped_from >= 0) {
        char why[96];
        snprintf(why, sizeof why, "%ld rounds behind: jumping to round %ld", e->rp.g.round - d.jumped_from,
                 e->rp.g.round);
        engine_log_event(e, ENGINE_LOG_CATCHING_UP, -1, why);
    }
    if (d.refresh)
        start_refresh(e, now);
    for (int j = 0; j < d.n_late; j++)
        engine_log_event(e, ENGINE_LOG_NOT_WAITING_FOR_LATE, d.late[j], NULL);
    if (d.alone != e->alone) {
        e->alone = d.alone;
        if (d.alone)
            engine_log_event(e, ENGINE_LOG_ALL_IN_LOST, -1, NULL);
    }
    if (a == GSP_PACE_WAIT) {
        if (e->wait_since < 0)
            e->wait_since = now;
        e->wake = d.wake_at;
        engine_gap_ask(e, now); /* (the share waited for may be one it refused) */
        return;
    }
    e->wake = INFINITY;
    if (a == GSP_PACE_DONE) {
        done(e, now);
        return;
    }
    if (e->wait_since >= 0)
        e->wait_seconds += now - e->wait_since, e->wait_since = -1;
    gsp_pace_started(&e->rp.pace, now);
    if (e->first_step_at < 0)
        e->first_step_at = now;
    e->absorb_now = now;
    absorb(e, 0);
    if (e->rp.g.gather)
        ask_if_apart(e, now);
    if (!overlap(e)) {
        start_step(e, e->rp.g.round);
        return;
    }
    e->absorbed = 1;
    if (!e->computing && !e->stepped) /* (after a model was taken: the steps follow the absorb) */
        start_step(e, e->rp.g.round);
    if (e->stepped)
        fold(e, now);
}

void engine_drain(engine *e) { absorb(e, 1); }

float engine_compute_step(engine *e, nn_model *model)
{
    return overlap(e) ? engine_overlap_compute(e, model) : round_step(&e->rp, model);
}

typedef struct taken_job {
    float *x, w, inv;
    const float *z;
} taken_job;

static void taken_span(void *arg, size_t s, size_t e)
{
    const taken_job *a = arg;
    for (size_t i = s; i < e; i++)
        a->x[i] += a->w * (a->z[i] - a->x[i] * a->inv);
}

void engine_step_taken(engine *e, float *z, double now)
{
    if (e->finished || !e->computing)
        return;
    gsp_peer *g = &e->rp.g;
    e->rp.steps += e->rp.plan->local_steps; /* (round_step counts its own) */
    if (overlap(e)) { /* folded in once the round's absorb is done (fold) */
        e->caller_z = z, e->start_in = NULL;
        engine_step_done(e, now);
        return;
    }
    if (g->gather) { /* (the all-gather's emit reads the step where it is: x is the round's start) */
        gsp_gather_steps_at(g, z);
        engine_step_done(e, now);
        return;
    }
    /* The caller stepped from z = x / w: x moves by w times its step, as
     * local_step moves it (so a peer whose weight has shrunk does not take
     * steps of 1 / w on its model); value by value, as gsp_debias has it:
     * no z beside x. */
    taken_job a = {.x = g->x, .z = z, .w = (float)g->w, .inv = gsp_debias_factor(g)};
    gsp_pool_spans(g->pool, g->dim, taken_span, &a);
    outer_end(&e->rp.local.outer, g);
    engine_step_done(e, now);
}

/* The round's steps are done: emit its shares, then hold at its BOUNDARY. */
static void emit_round(engine *e, double now)
{
    round_peer *rp = &e->rp;
    const long round = rp->g.round;
    const int was_isolated = rp->pace.isolated;
    gsp_msg msgs[TOPO_MAX_OUT];
    /* A neighbour our model goes to now gets its share of this round next
     * round (kept home, as for a busy link): behind a big share being
     * sealed the transport refused the model, which could go again only
     * between rounds, and the next steps follow each boundary at once (a
     * 147.5M-parameter joiner waited four rounds so). Not under --gather,
     * whose every message each peer must take in to keep the same bits. */
    for (int q = 0; q < e->n_peers; q++)
        e->emit_busy[q] = e->busy[q] || (e->model_wanted[q] && !rp->g.gather);
    const int m = round_emit(rp, now, e->emit_busy, msgs);
    if (rp->pace.isolated != was_isolated)
        engine_log_event(e, rp->pace.isolated ? ENGINE_LOG_ISOLATED : ENGINE_LOG_HEARING_AGAIN,
                  -1, NULL);
    if (m == -EDOM) {
        diverged(e, "the parameters");
        return;
    }
    if (m < 0) {
        finish(e, m);
        return;
    }
    for (int j = 0; j < m; j++)
        queue(e, (engine_send){.kind = ENGINE_PUSH, .peer = msgs[j].dst, .msg = msgs[j]}, now);
    int probe[TOPO_MAX_OUT];
    for (int j = gsp_pace_probes(&rp->pace, probe, TOPO_MAX_OUT); j-- > 0;)
        send_heartbeat(e, probe[j], now);
    for (int q = 0; q < e->n_peers; q++)
        if (e->model_wanted[q])
            send_model(e, q, now);
    e->held = 1;
    engine_event v = {.kind = ENGINE_BOUNDARY, .round = round};
    if (e->checkpoint_every > 0 && now - e->last_ckpt >= e->checkpoint_every)
        v.checkpoint = 1, e->last_ckpt = now;
    event(e, v);
}

void engine_step_done(engine *e, double now)
{
    if (e->finished || !e->computing)
        return;
    e->computing = 0;
    /* A model that is no longer finite is never gossiped nor reported: the
     * peer stops at the first round that shows it (its loss, or the
     * parameters its emit reads). */
    if (!isfinite(e->rp.loss)) {
        diverged(e, "the loss");
        return;
    }
    if (overlap(e)) { /* folded in once the round's absorb is done */
        e->stepped = 1;
        try_start(e, now);
        return;
    }
    emit_round(e, now);
}

void engine_advance(engine *e, double now)
{
    e->held = 0;
    try_start(e, now);
}

void engine_stop(engine *e, double now)
{
    if (e->caller_steps)
        e->computing = 0; /* the caller's round: nothing of it is running here */
    e->stopping = 1;
    e->said_done = 0; /* a peer lingering after its last round says it stopped: route around it */
    if (!e->computing)
        try_start(e, now);
}

/* ---- inputs -------------------------------------------------------------------------- */

int engine_hold_max(const engine *e) { return round_hold_max(&e->rp); }

int engine_push(engine *e, gsp_msg *m, double now)
{
    const int q = m->src;
    const uint64_t incarnation = m->incarnation;
    heard(e, q, now);
    /* What a member can make this peer hold is bounded whatever it claims:
     * no round past the run's last (one such share would move a ring's
     * peer to the end), and no more messages waiting here than a neighbour
     * that runs ahead can have sent (the brake holds it within tau + 2
     * periods + 1 rounds), nor a round further ahead than it can have
     * reached since it last reported (gsp_pace_credible). Dropping one
     * loses nothing of an honest sender's: its next totals carry it, or a
     * SYNC after the gap. */
    const char *why = m->incarnation > e->incarnation_max                    ? "an incarnation from the future"
                      : m->round < 0 || m->round > e->rp.pace.c.total_rounds ? "a round past the run's last"
                      : m->round >= gsp_pace_credible(&e->rp.pace, q, now)   ? "a round further ahead than time allows"
                      : round_held_from(&e->rp, q) >= engine_hold_max(e) ? "more messages waiting than a neighbour ahead sends"
                                                                          : NULL;
    if (why) {
        if (m->round >= 0 && m->round <= e->rp.pace.c.total_rounds && m->incarnation <= e->incarnation_max)
            engine_gap_note(e, m); /* (an honest sender's, held back by this peer or by time: asked for later) */
        refused(e, q, why);
        gsp_msg_free(m);
        try_start(e, now);
        return 0;
    }
    /* From before the sender restarted (it counts its seqs from 1 again):
     * gossip ignores it, and it must not move what we acknowledge to the
     * sender as it is now, nor what we believe of its round. */
    if (incarnation < e->ack_incarnation[q]) {
        gsp_msg_free(m);
        try_start(e, now);
        return 0;
    }
    gsp_pace_push(&e->rp.pace, &e->rp.g, q, m->round, now);
    int rc = round_inbox_put(&e->rp, m);
    if (rc < 0) {
        gsp_msg_free(m);
        return rc;
    }
    if (incarnation != e->ack_incarnation[q]) /* the sender restarted: its seqs start again */
        e->ack_incarnation[q] = incarnation, e->ack_due[q] = e->ack_sent[q] = 0;
    /* Acknowledged is what we hold in order (the sender forgets what it
     * needs for a SYNC up to there), not simply the highest seq come in. */
    const uint64_t held = round_held(&e->rp, q, incarnation);
    if (held > e->ack_due[q])
        e->ack_due[q] = held;
    send_ack(e, q, 0, now);
    try_start(e, now);
    return 0;
}

void engine_ack(engine *e, int q, uint64_t seq, double now)
{
    heard(e, q, now);
    gsp_pace_acked(&e->rp.pace, q, seq);
    gsp_acked(&e->rp.g, q, seq);
    try_start(e, now);
}

void engine_heartbeat(engine *e, int q, long round, double now)
{
    heard(e, q, now);
    gsp_pace_claim(&e->rp.pace, q, round, now);
    send_ack(e, q, 1, now); /* a sign of life for a peer whose shares to us wait for one */
    try_start(e, now);
}

void engine_nack(engine *e, int q, uint64_t seq, double now)
{
    heard(e, q, now);
    send_sync(e, q, seq, now);
    try_start(e, now);
}

void engine_goodbye(engine *e, int q, int done_all, double now)
{
    if (done_all == ENGINE_BYE_SEEN)
        engine_bye_seen(e, q);
    else {
        if (gsp_pace_goodbye(&e->rp.pace, q, done_all))
            engine_log_event(e, done_all ? ENGINE_LOG_NEIGHBOUR_DONE : ENGINE_LOG_NEIGHBOUR_GOODBYE, q, NULL);
        if (done_all == ENGINE_BYE_STOPPED)
            engine_bye_answer(e, q, now);
    }
    try_start(e, now);
}

void engine_model_request(engine *e, int q, double now)
{
    heard(e, q, now);
    if (engine_wants_model(e) || e->finished)
        return; /* (no model yet, or a stale one) */
    if (e->model_queued[q] && e->sending[q])
        return; /* the asker repeats while our model (hundreds of MB) is still on its way: one is enough */
    /* One that got it lately is neither joining nor far behind (a refresh
     * comes after more rounds than that): a member asking again and again
     * would have every round boundary build and send the whole model. */
    if (e->model_sent_round[q] >= 0 && e->rp.g.round - e->model_sent_round[q] < engine_hold_max(e))
        return;
    e->model_queued[q] = 0;
    /* Said first, so that the asker waits for this model and asks nobody
     * else for another: one of hundreds of MB takes seconds to build and
     * longer to send, and a second would arrive whole beside the first. */
    if (!e->model_wanted[q])
        queue(e, (engine_send){.kind = ENGINE_MODEL_SOON, .peer = q, .round = e->rp.g.round}, now);
    if (e->computing) /* answered at the round boundary */
        e->model_wanted[q] = 1;
    else
        send_model(e, q, now);
    try_start(e, now);
}

void engine_model_soon(engine *e, int q, double now)
{
    heard(e, q, now);
    const gsp_pace *pc = &e->rp.pace;
    if (!engine_wants_model(e) || e->finished || e->promised || e->asked >= pc->n_nb || pc->nb[e->asked].peer != q ||
        e->promise_broken[q])
        return; /* (not the one asked last: that one is awaited, or was given up on) */
    e->promised = 1; /* (not logged: whether a request finds a step running is timing, not a decision) */
    e->promised_at = now;
}

/* The side that asked: enter the run at the sender's round (a joiner), or
 * take the model and keep the weight (a refresh). */
void engine_model(engine *e, int q, long round, const float *z, int intact, double now)
{
    heard(e, q, now);
    if (e->rp.g.gather && q == e->apart_asked && !engine_wants_model(e) && !e->finished) {
        /* (a model between rounds is the start of the round before the one it names) */
        if (intact && gsp_floats_finite(z, e->rp.g.dim) && gsp_gather_offer(&e->rp.g, z, round - 1) == 0)
            engine_log_event(e, ENGINE_LOG_MODEL_TAKEN, q, NULL);
        e->apart_asked = -1;
        return;
    }
    if (!engine_wants_model(e) || e->finished)
        return; /* (an answer that came after another neighbour's) */
    if (intact && !gsp_floats_finite(z, e->rp.g.dim)) {
        engine_log_event(e, ENGINE_LOG_MODEL_NOT_FINITE, q, NULL);
        engine_ask_for_model(e, now);
        return;
    }
    if (!intact) {
        engine_log_event(e, ENGINE_LOG_MODEL_BAD_HASH, q, NULL);
        engine_ask_for_model(e, now);
        return;
    }
    if (e->refreshing) {
        gsp_adopt(&e->rp.g, z);
        e->refreshing = 0;
        engine_log_event(e, ENGINE_LOG_MODEL_TAKEN, q, NULL);
    } else {
        gsp_join(&e->rp.g, z, round);
        e->joining = 0;
        e->start_round = round;
        engine_log_event(e, ENGINE_LOG_JOINED, q, NULL);
    }
    gsp_pace_joined(&e->rp.pace);
    /* (overlap: steps running or taken from the model before are not this
     * one's: dropped, and the next start from it) */
    e->steps_void = e->computing || e->stepped;
    e->start_ready = 0;
    try_start(e, now);
}

/* A reconnected neighbour is told what we hold of its messages (a NACK),
 * and answers with a SYNC of whatever was in flight when the old connection
 * died, at once, so the peer waiting for it need not wait for a deadline. */
void engine_link_up(engine *e, int q, double now)
{
    const gsp_pace *pc = &e->rp.pace;
    const int slot = pc->slot[q], ever_up = slot >= 0 && pc->nb[slot].ever_up;
    if (gsp_pace_up(&e->rp.pace, q, now))
        engine_log_event(e, ENGINE_LOG_NEIGHBOUR_RECONNECTED, q, NULL);
    if (e->finished)
        return;
    if (ever_up)
        queue(e, (engine_send){.kind = ENGINE_NACK, .peer = q, .seq = round_held(&e->rp, q, e->ack_incarnation[q])},
              now);
    e->ack_sent[q] = 0; /* (what the old connection carried may be lost) */
    send_ack(e, q, 0, now);
    if (e->said_done) /* (a neighbour back from a restart missed it) */
        queue(e, (engine_send){.kind = ENGINE_GOODBYE, .peer = q, .done = ENGINE_BYE_DONE}, now);
    if (engine_ask_due(e, now))
        engine_ask_for_model(e, now);
    try_start(e, now);
}

void engine_link_down(engine *e, int q, double now)
{
    if (q >= 0 && q < e->n_peers)
        e->sync_queued[q] = 0; /* (lost with the connection: the NACK on reconnect asks again) */
    gsp_pace_down(&e->rp.pace, q, now);
    try_start(e, now);
}

void engine_link_progress(engine *e, int q, double now)
{
    if (q >= 0 && q < e->n_peers)
        heard(e, q, now);
}

void engine_link_state(engine *e, int q, int busy, int sending)
{
    if (q >= 0 && q < e->n_peers)
        e->busy[q] = (uint8_t)(busy != 0), e->sending[q] = (uint8_t)(sending != 0);
}

/* Every heartbeat interval: route around the neighbours silent or
 * disconnected for the dead timeout (a stopped process keeps its TCP
 * connections open, so only silence shows it), say we are here to every
 * neighbour that has not heard from us lately, and retry or give up what
 * waits for an answer. */
static void tick(engine *e, double now)
{
    gsp_pace *pc = &e->rp.pace;
    int lost[64];
    const int k = gsp_pace_tick(pc, now, lost, 64);
    for (int j = 0; j < k; j++) {
        const gsp_pace_nb *b = &pc->nb[pc->slot[lost[j]]];
        engine_log_event(e, ENGINE_LOG_ROUTING_AROUND, lost[j],
                  b->connected ? "silent for the dead timeout"
                  : b->ever_up ? "disconnected for the dead timeout"
                               : "never connected");
    }
    for (int j = 0; j < pc->n_nb; j++) {
        const int q = pc->nb[j].peer;
        if (gsp_pace_heartbeat_due(pc, q, now))
            send_heartbeat(e, q, now);
        send_ack(e, q, 0, now);
    }
    /* A MODEL the link refused (busy with a share being sealed) goes when
     * the link is free: waiting for the next round boundary would wait for
     * ever when that round waits for the peer that wants the model. */
    for (int q = 0; q < e->n_peers && !e->computing && !engine_wants_model(e); q++)
        if (e->model_wanted[q] && engine_connected(e, q) && !e->busy[q])
            send_model(e, q, now);
    engine_pull_tick(e, now);
    if (e->refreshing && now - e->refresh_since > 2 * pc->c.dead_timeout) {
        e->refreshing = 0;
        gsp_pace_joined(pc);
        engine_log_event(e, ENGINE_LOG_NO_MODEL, -1, NULL);
    }
    /* (a promise has its own limit, after which the join's starts again) */
    if (e->joining && !e->promised && now - e->join_since > pc->c.round_timeout)
        finish(e, -EHOSTUNREACH); /* nobody to join */
}

void engine_timer(engine *e, double now)
{
    if (e->finished)
        return;
    if (now >= e->next_tick) {
        e->next_tick = now + gsp_pace_heartbeat(&e->rp.pace.c);
        tick(e, now);
    }
    try_start(e, now);
}

/* A time already past (a timer due while the peer was frozen or its loop
 * busy) is now: a driver must never be asked to go back in time. */
double engine_wake_at(const engine *e, double now)
{
    if (e->finished)
        return INFINITY;
    const int asking = !e->held && (!e->computing || (overlap(e) && !e->absorbed)); /* the pacing question */
    const double at = e->emit_due ? now : asking && e->wake < e->next_tick ? e->wake : e->next_tick;
    return at > now ? at : now;
}

void engine_unsent(engine *e, const engine_send *s, int rc, double now)
{
    const int q = s->peer;
    if (rc == -EMSGSIZE || rc == -ENOSPC) { /* no frame will ever hold it: a retry would repeat forever, silently */
        engine_log_event(e, ENGINE_LOG_TOO_LARGE, q, NULL);
        e->fail = -EMSGSIZE;
        try_start(e, now);
        return;
    }
    switch (s->kind) {
    case ENGINE_ACK:
        e->ack_sent[q] = 0; /* due again: the next tick sends it */
        break;
    case ENGINE_MODEL:
        e->model_queued[q] = 0;
        e->model_wanted[q] = rc == -EAGAIN; /* again at a tick with the link free, or the next round boundary */
        break;
    case ENGINE_MODEL_REQUEST:
        e->asked_at = -INFINITY; /* the next one now, or all over again at the next tick */
        engine_ask_next(e, now);
        break;
    case ENGINE_PUSH:
        if (s->msg.kind == GSP_SYNC)
            e->sync_queued[q] = 0; /* (not on its way: the next NACK is answered) */
        break;
    default: /* running sums and a later SYNC make up for a share; the rest is repeated anyway */
        break;
    }
}
