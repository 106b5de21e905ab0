/* The pacing policy: see gsp_pace.h, and gossip/GUARANTEES.md for the rules. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gsp_pace.h"

static gsp_pace_nb *nb_of(const gsp_pace *p, int q)
{
    if (q < 0 || q >= p->n_peers || p->slot[q] < 0)
        return NULL;
    return &p->nb[p->slot[q]];
}

/* An in-neighbour: of the schedule, or one whose shares reach us by
 * routing around (so a side of a partition, or the survivors of dead peers,
 * count each other as heard and hold each other back from racing ahead). */
static int sends_here(const gsp_pace_nb *b) { return b->is_in || b->pushing; }

static int add_nb(gsp_pace *p, int q, int is_in, double now)
{
    if (q == p->id)
        return 0;
    if (p->slot[q] < 0) {
        p->slot[q] = p->n_nb;
        p->nb[p->n_nb++] = (gsp_pace_nb){.peer = q, .known_round = -1, .pushed_round = -1, .paced_round = -1,
                                         .last_heard = now, .last_sent = -INFINITY, .down_since = now};
    }
    p->nb[p->slot[q]].is_in |= (uint8_t)is_in;
    return 0;
}

int gsp_pace_init(gsp_pace *p, const gsp_pace_config *c, int id, double now)
{
    memset(p, 0, sizeof *p);
    const topo *t = c->topology;
    if (!t || id < 0 || id >= t->n_peers || t->n_phases < 1)
        return -EINVAL;
    p->c = *c;
    p->id = id, p->n_peers = t->n_peers, p->period = t->n_phases;
    p->alone_since = -1;
    p->late_slack = c->tau + p->period + 1;
    p->slot = malloc((size_t)p->n_peers * sizeof *p->slot);
    p->alive = malloc((size_t)p->n_peers);
    p->awaited = malloc((size_t)p->n_peers);
    /* At most TOPO_MAX_OUT out- and 4 x as many in-neighbours a phase. */
    size_t cap = (size_t)p->period * TOPO_MAX_OUT * 5;
    if (cap > (size_t)p->n_peers)
        cap = (size_t)p->n_peers;
    p->nb = calloc(cap, sizeof *p->nb);
    if (!p->slot || !p->alive || !p->awaited || !p->nb) {
        gsp_pace_free(p);
        return -ENOMEM;
    }
    memset(p->alive, 1, (size_t)p->n_peers);
    memset(p->awaited, 1, (size_t)p->n_peers);
    for (int q = 0; q < p->n_peers; q++)
        p->slot[q] = -1;
    /* A neighbour that never connects is routed around like one that left,
     * after the round-0 barrier's wait (a peer coming back has none). */
    double never = now + (c->barrier ? c->round_timeout : 0.0);
    for (int ph = 0; ph < p->period; ph++) {
        topo_out out;
        topo_route(t, ph, id, NULL, &out);
        for (int k = 0; k < out.n; k++)
            add_nb(p, out.peer[k], 0, never);
        int in[TOPO_MAX_OUT * 4];
        int m = topo_in(t, ph, id, NULL, in, (int)(sizeof in / sizeof *in));
        for (int k = 0; k < m; k++)
            add_nb(p, in[k], 1, never);
    }
    p->prev_start = -1, p->fastest = -1, p->wait_since = -1, p->wait_round = -1, p->last_tick = -1;
    p->last_emit_round = -1;
    p->started = now;
    p->barrier_passed = !c->barrier;
    return 0;
}

void gsp_pace_free(gsp_pace *p)
{
    if (!p)
        return;
    free(p->slot);
    free(p->alive);
    free(p->awaited);
    free(p->nb);
    memset(p, 0, sizeof *p);
}

/* A quarter of the dead timeout, so that a live neighbour is heard several
 * times before it could be declared dead; at most a second. */
double gsp_pace_heartbeat(const gsp_pace_config *c)
{
    double h = c->dead_timeout / 4;
    return h > 1.0 ? 1.0 : h;
}

/* ---- what the transport saw ---------------------------------------------- */

int gsp_pace_heard(gsp_pace *p, int q, double now)
{
    gsp_pace_nb *b = nb_of(p, q);
    if (!b)
        return 0;
    if (now - b->last_heard >= gsp_pace_heartbeat(&p->c))
        b->live_since = now;
    b->last_heard = now;
    if (p->alive[q] || !b->connected || b->gone)
        return 0;
    p->alive[q] = 1;
    return 1;
}

/* Where b can have got by now, as far as time allows since its last
 * report within the bound (-inf: no report yet). */
static double paced_line(const gsp_pace *p, const gsp_pace_nb *b, double now)
{
    if (b->paced_round < 0)
        return -INFINITY;
    return (double)b->paced_round + GSP_PACE_FASTER * fmax(now - b->paced_at, 0) / p->fastest;
}

/* Rounds a report may run past the bound's line: twice the catch-up
 * distance (frames queued on a link arrive in bursts). */
static long credible_slack(const gsp_pace *p) { return 2 * (p->c.tau + 2L * p->period + 4); }

long gsp_pace_credible(const gsp_pace *p, int q, double now)
{
    const gsp_pace_nb *b = nb_of(p, q);
    if (!b || p->fastest <= 0 || b->paced_round < 0 || (p->c.total_rounds > 0 && b->known_round >= p->c.total_rounds))
        return LONG_MAX;
    double most = fmax((double)p->round_seen, paced_line(p, b, now));
    for (int k = 0; k < p->n_nb; k++)
        most = fmax(most, (double)p->nb[k].paced_round);
    most += (double)credible_slack(p);
    return most >= 0x1p62 ? LONG_MAX : (long)most;
}

/* Round r reported by b at now, believed as far as time allows. A report
 * within the bound without its slack starts b's line again from it, at now
 * once b's frames have come steadily for two heartbeat intervals: a member
 * that claims all it may, message after message, gains no more than
 * GSP_PACE_FASTER rounds a fastest round beyond the furthest round
 * reported. Right after a silence (a cut, a stop of either side) the frames
 * that come first may be old, sent before it and queued since, so the
 * line's start moves along the line itself and keeps the time the silence
 * allows for the frames that follow. */
static long paced(gsp_pace *p, gsp_pace_nb *b, long r, double now)
{
    const long most = gsp_pace_credible(p, b->peer, now);
    if (r > most)
        return most;
    const long start = p->c.total_rounds > 0 && r > p->c.total_rounds ? p->c.total_rounds : r;
    if (start <= b->paced_round)
        return r;
    if (most == LONG_MAX)
        b->paced_round = start, b->paced_at = now;
    else if (start <= most - credible_slack(p)) {
        const int steady = now - b->live_since >= 2 * gsp_pace_heartbeat(&p->c);
        const double along = b->paced_at + (double)(start - b->paced_round) * p->fastest / GSP_PACE_FASTER;
        b->paced_at = steady ? now : fmin(along, now);
        b->paced_round = start;
    }
    return r;
}

/* b said it is at round r, of which time allows `believed`. */
static void claim(gsp_pace *p, gsp_pace_nb *b, long r, long believed)
{
    if (believed > b->known_round)
        b->known_round = believed;
    /* Past the last round: it sends nothing more, as after GOODBYE "done"
     * (which a peer that connected later, after a restart, never got). */
    if (r >= p->c.total_rounds)
        b->done = 1;
}

void gsp_pace_claim(gsp_pace *p, int q, long r, double now)
{
    gsp_pace_nb *b = nb_of(p, q);
    if (b)
        claim(p, b, r, paced(p, b, r, now));
}

void gsp_pace_push(gsp_pace *p, const gsp_peer *g, int q, long r, double now)
{
    gsp_pace_nb *b = nb_of(p, q);
    if (!b)
        return;
    p->round_seen = g->round;
    const long believed = paced(p, b, r + 1, now);
    if (believed > b->pushed_round)
        b->pushed_round = believed;
    b->pushing = 1;
    claim(p, b, r + 1, believed);
    /* On time: it arrived before (or while) a round needs it. Nearly on
     * time, for a neighbour late only once since it was last on time: within
     * late_slack rounds of the round needed (a healthy peer held up once,
     * by scheduling, closes the gap by itself). */
    const long need = g->round - 1 - p->c.tau;
    if (r >= need && b->debt > 1)
        b->debt--;
    else if (r >= need)
        b->late = 0, b->late_count = 0, b->debt = 0;
    else if (b->late && b->late_count <= 1 && r >= need - p->late_slack)
        b->late = 0;
}

int gsp_pace_is_neighbour(const gsp_pace *p, int q) { return nb_of(p, q) != NULL; }

void gsp_pace_acked(gsp_pace *p, int q, uint64_t seq)
{
    gsp_pace_nb *b = nb_of(p, q);
    if (b && seq > b->acked_seq)
        b->acked_seq = seq;
}

int gsp_pace_probes(gsp_pace *p, int *peers, int max)
{
    int k = 0;
    for (int j = 0; j < p->n_nb && k < max; j++)
        if (p->nb[j].probe) {
            p->nb[j].probe = 0;
            peers[k++] = p->nb[j].peer;
        }
    return k;
}

/* Messages on our edge to q that q has not acknowledged. */
static uint64_t unacked(const gsp_pace_nb *b, const gsp_peer *g)
{
    for (int k = 0; k < g->n_out; k++)
        if (g->out[k].peer == b->peer)
            return g->out[k].seq > b->acked_seq ? g->out[k].seq - b->acked_seq : 0;
    return 0;
}

int gsp_pace_up(gsp_pace *p, int q, double now)
{
    gsp_pace_nb *b = nb_of(p, q);
    if (!b)
        return 0;
    b->connected = 1, b->ever_up = 1, b->gone = 0;
    b->last_heard = b->live_since = now;
    int back = !p->alive[q];
    p->alive[q] = 1;
    return back;
}

void gsp_pace_down(gsp_pace *p, int q, double now)
{
    gsp_pace_nb *b = nb_of(p, q);
    if (b && b->connected)
        b->connected = 0, b->down_since = now;
}

int gsp_pace_goodbye(gsp_pace *p, int q, int done)
{
    if (q < 0 || q >= p->n_peers)
        return 0;
    gsp_pace_nb *b = nb_of(p, q);
    int was = p->alive[q] && !(b && b->done);
    if (done && b) {
        b->done = 1;
        if (b->known_round < p->c.total_rounds) /* (no evidence for catch-up: see catch_up_round) */
            b->known_round = p->c.total_rounds;
    } else {
        p->alive[q] = 0;
        if (b)
            b->gone = 1;
    }
    return was;
}

int gsp_pace_in_done(const gsp_pace *p) { return gsp_pace_waited_for(p, NULL, 0) == 0; }

int gsp_pace_owed(const gsp_pace *p, const gsp_peer *g)
{
    for (int k = 0; k < p->n_nb; k++)
        if (p->nb[k].connected && p->alive[p->nb[k].peer] && unacked(&p->nb[k], g))
            return 1;
    return 0;
}

int gsp_pace_waited_for(const gsp_pace *p, int *peers, int max)
{
    int n = 0;
    for (int k = 0; k < p->n_nb; k++)
        if (sends_here(&p->nb[k]) && p->alive[p->nb[k].peer] && !p->nb[k].done) {
            if (n < max)
                peers[n] = p->nb[k].peer;
            n++;
        }
    return n;
}

void gsp_pace_sent(gsp_pace *p, int q, double now)
{
    gsp_pace_nb *b = nb_of(p, q);
    if (b)
        b->last_sent = now;
}

int gsp_pace_tick(gsp_pace *p, double now, int *lost, int max)
{
    /* A tick far later than its interval: this process was not running
     * (stopped, or starved), so the silence is ours, not the neighbours'. */
    const int away = p->last_tick >= 0 && now - p->last_tick > p->c.dead_timeout / 2;
    p->last_tick = now;
    int n = 0;
    for (int k = 0; k < p->n_nb; k++) {
        gsp_pace_nb *b = &p->nb[k];
        if (b->connected && away) /* (what it sent meanwhile comes now, at once) */
            b->last_heard = b->live_since = now;
        if (!p->alive[b->peer] || b->done)
            continue;
        int gone = b->connected ? now - b->last_heard > p->c.dead_timeout : now - b->down_since > p->c.dead_timeout;
        if (!gone)
            continue;
        p->alive[b->peer] = 0; /* route around it, stop waiting for it */
        b->pushing = 0;
        p->stats.neighbours_lost++;
        if (n < max)
            lost[n] = b->peer;
        n++;
    }
    return n < max ? n : max;
}

int gsp_pace_heartbeat_due(const gsp_pace *p, int q, double now)
{
    const gsp_pace_nb *b = nb_of(p, q);
    return b && b->connected && now - b->last_sent >= gsp_pace_heartbeat(&p->c);
}

/* ---- rounds ----------------------------------------------------------------- */

/* An in-neighbour we hear from: connected, not routed around, and a frame
 * within two heartbeat intervals (a killed peer's connection is gone, a
 * stopped one falls silent). */
/* Connected and heard within two heartbeat intervals. */
static int heard_lately(const gsp_pace *p, const gsp_pace_nb *b, double now)
{
    return p->alive[b->peer] && b->connected && b->last_heard >= now - 2 * gsp_pace_heartbeat(&p->c);
}

static int hearing(const gsp_pace *p, const gsp_pace_nb *b, double now)
{
    return sends_here(b) && p->alive[b->peer] && (b->done || heard_lately(p, b, now));
}

/* Has g sent anything on its edge to q (a compressed edge's reference is
 * then the same at both ends)? */
static int sent_to(const gsp_peer *g, int q)
{
    for (int k = 0; k < g->n_out; k++)
        if (g->out[k].peer == q)
            return g->out[k].seq > 0;
    return 0;
}

int gsp_pace_heirs(const gsp_pace *p, const gsp_peer *g, double now, const uint8_t *busy, topo_out *out)
{
    /* With a codec, an edge never used yet starts from the run's origin
     * (gsp_set_origin), which a receiver without it answers with a request
     * for a SYNC that a peer gone cannot send: edges in use first. */
    for (int pass = g->codec ? 0 : 1; pass < 2; pass++) {
        out->n = 0, out->keep = 0.0;
        for (int k = 0; k < p->n_nb && out->n < TOPO_MAX_OUT; k++) {
            const gsp_pace_nb *b = &p->nb[k];
            if (!(busy && busy[b->peer]) && (pass || sent_to(g, b->peer)) &&
                (heard_lately(p, b, now) || (b->done && b->connected && p->alive[b->peer])))
                out->peer[out->n] = b->peer, out->weight[out->n] = 1.0, out->n++;
        }
        if (out->n > 0)
            break;
    }
    return out->n;
}

#define HEARD_MAX (TOPO_MAX_OUT * 8)

/* The rounds the heard in-neighbours last reported, sorted (into r, at most
 * HEARD_MAX); silent: count one that has reported nothing as round -1.
 * *last: the last one counted. With no in-neighbour heard, the other heard
 * neighbours are the run as far as this peer knows (a side of a partition
 * before routing around has brought their shares here): it is held within
 * reach of them, and catches up with them, rather than racing ahead alone. */
static int heard_rounds(const gsp_pace *p, double now, int silent, long *r, const gsp_pace_nb **last)
{
    int k = 0, any_in = 0;
    for (int j = 0; j < p->n_nb && !any_in; j++)
        any_in = hearing(p, &p->nb[j], now);
    for (int j = 0; j < p->n_nb && k < HEARD_MAX; j++) {
        const gsp_pace_nb *b = &p->nb[j];
        if (!(any_in ? hearing(p, b, now) : heard_lately(p, b, now)) || (!silent && b->known_round < 0))
            continue;
        *last = b;
        int i = k++;
        while (i > 0 && r[i - 1] > b->known_round) /* insertion: a few neighbours */
            r[i] = r[i - 1], i--;
        r[i] = b->known_round;
    }
    return k;
}

/* The median, so that one straggler or one peer that ran ahead does not move it. */
long gsp_pace_cluster_round(const gsp_pace *p, double now)
{
    long r[HEARD_MAX];
    const gsp_pace_nb *last = NULL;
    int k = heard_rounds(p, now, 0, r, &last);
    return k ? r[k / 2] : -1;
}

/* Where a peer far behind may jump: a round at least half of its heard
 * in-neighbours (rounded up) say they have passed, which no single one of two
 * or more can fake; and with one in-neighbour only (a ring), the round its
 * shares actually came from, not what it claims. Claims are only claims: a
 * member with a valid key may send a HEARTBEAT of any round. One that has
 * said nothing yet counts as behind. */
static long catch_up_round(const gsp_pace *p, double now)
{
    long r[HEARD_MAX];
    const gsp_pace_nb *only = NULL;
    int k = heard_rounds(p, now, 1, r, &only);
    if (k == 1)
        return only->pushed_round < only->known_round ? only->pushed_round : only->known_round;
    return k ? r[(k - 1) / 2] : -1;
}

/* Once this peer has timed a round, a neighbour that has reported nothing
 * yet is taken to be at most where the run is as far as this peer knows (its
 * own round, or the furthest a neighbour has reported within the bound), so
 * that its first word too is believed only as far as time allows. */
static void pace_the_unreported(gsp_pace *p, const gsp_peer *g, double now)
{
    if (p->fastest <= 0)
        return;
    long known = g->round;
    for (int k = 0; k < p->n_nb; k++)
        if (p->nb[k].paced_round > known)
            known = p->nb[k].paced_round;
    for (int k = 0; k < p->n_nb; k++)
        if (p->nb[k].paced_round < 0)
            p->nb[k].paced_round = known, p->nb[k].paced_at = now;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Twice the lower quartile of the last rounds that a deadline did not cut
 * short: a neighbour at half the cluster's pace or slower is not waited for
 * round after round, and one merely unlucky once costs little, since it is
 * waited for again as soon as it is nearly on time. The lower quartile, not
 * the median: a peer that waits for a straggler in half of its rounds (one
 * of two in-neighbours on the exponential graph of 4) would otherwise take
 * the straggler's pace for its own and never stop waiting. A patient peer
 * (the all-gather) waits at least round_timeout: a message it does not wait
 * for is ignored when it comes, its sender's model is then apart from the
 * others' and takes a whole model to come back, while push-sum absorbs a
 * late share whenever it comes and loses nothing. */
double gsp_pace_deadline(const gsp_pace *p)
{
    const gsp_pace_config *c = &p->c;
    if (c->round_deadline > 0)
        return fmin(c->round_deadline, c->round_timeout);
    if (p->n_recent < (c->patient ? 1 : 8))
        return c->round_timeout;
    double d[GSP_PACE_RECENT];
    int k = p->n_recent < GSP_PACE_RECENT ? p->n_recent : GSP_PACE_RECENT;
    memcpy(d, p->recent, (size_t)k * sizeof *d);
    qsort(d, (size_t)k, sizeof *d, cmp_double);
    const double derived = fmax(2 * d[k / 4], 0.02);
    return c->patient ? fmax(derived, c->round_timeout) : fmin(derived, c->round_timeout);
}

/* Has in-neighbour q emitted the round this one waits for, without sending
 * it here? Messages on a link arrive in order, so once q has said it is
 * past that round, a share for us from that round would already be here: it
 * went elsewhere, and waiting for it would wait for nothing. */
static int past(const gsp_pace *p, const gsp_peer *g, const gsp_pace_nb *b)
{
    return b->known_round >= g->round - p->c.tau;
}

/* It has in-neighbours and hears none of them (each is routed around, or
 * was up and is silent or disconnected, not yet for the dead timeout; a
 * done one is heard: it finished, it did not leave; one never connected yet
 * is the round-0 barrier's and the dead timeout's business), and either one
 * of them is not yet routed around or it hears no other neighbour either.
 * So it waits while the silent ones may still come back (going on would
 * race: nothing reaches it yet, and nothing holds it), and once they are
 * routed around a live neighbour it still hears is company: that
 * neighbour's shares reach it by routing around, and the two train on as
 * a side of their own (a partition, or the survivors of dead peers). */
static int hears_no_in_neighbour(const gsp_pace *p, double now)
{
    int has_in = 0, silent = 0, company = 0;
    for (int k = 0; k < p->n_nb; k++) {
        const gsp_pace_nb *b = &p->nb[k];
        if (hearing(p, b, now) || (b->is_in && p->alive[b->peer] && !b->ever_up))
            return 0;
        if (sends_here(b))
            has_in = 1, silent |= p->alive[b->peer];
        else
            company |= heard_lately(p, b, now);
    }
    return has_in && (silent || !company);
}

static int barrier(gsp_pace *p, double now)
{
    if (p->barrier_passed)
        return 1;
    int all = 1; /* (one that left or finished meanwhile is not waited for) */
    for (int k = 0; k < p->n_nb && all; k++)
        all = p->nb[k].connected || !p->alive[p->nb[k].peer] || p->nb[k].done;
    if (all || now - p->started >= p->c.round_timeout)
        p->barrier_passed = 1;
    return p->barrier_passed;
}

gsp_pace_action gsp_pace_next(gsp_pace *p, gsp_peer *g, const gsp_msg *inbox, int n_inbox, double now,
                              gsp_pace_decision *d)
{
    const gsp_pace_config *c = &p->c;
    memset(d, 0, sizeof *d);
    d->jumped_from = -1;
    d->wake_at = now + gsp_pace_heartbeat(c);
    if (p->joining)
        return GSP_PACE_WAIT;
    if (!barrier(p, now)) {
        d->wake_at = p->started + c->round_timeout;
        return GSP_PACE_WAIT;
    }
    p->round_seen = g->round;
    pace_the_unreported(p, g, now);
    const long around = gsp_pace_cluster_round(p, now);
    if (g->round < c->total_rounds && around >= 0) {
        /* Far behind the run (a straggler, a peer that was stopped or
         * restarted): jump to it. Past tau + 2 periods + 4 rounds: more than
         * a run's spread can be while every peer waits for its in-neighbours
         * (the brake below holds the others within tau + 2 periods + 1 of
         * their own in-neighbours). */
        const long to = catch_up_round(p, now);
        const long catch_up = c->tau + 2L * p->period + 4;
        if (to - g->round > catch_up) {
            d->jumped_from = g->round;
            gsp_jump(g, to < c->total_rounds ? to : c->total_rounds);
            p->stats.catch_ups++;
            p->stats.rounds_skipped += g->round - d->jumped_from;
            /* A long jump (a peer stopped or cut off for long): its model
             * missed a twentieth of the run or more, and averaging it back in
             * would pull every peer back by as much, and under a sparse codec
             * for long. It waits for a neighbour's model instead, keeping its
             * weight (gsp_adopt), as a joiner does. */
            if (g->round < c->total_rounds &&
                g->round - d->jumped_from > fmax(2.0 * catch_up, c->total_rounds / GSP_PACE_REFRESH_PART)) {
                d->refresh = 1;
                p->joining = 1;
                p->stats.refreshes++;
                return GSP_PACE_WAIT;
            }
        }
        /* Nor run away: more than late_slack plus a period ahead of the run
         * (the spread a synchronous run has, given that in-neighbours report
         * only once a period), wait for the others to come up. */
        if (g->round - around > p->late_slack + p->period) {
            if (p->wait_round != g->round || p->wait_since < 0)
                p->stats.brakes++;
            p->wait_round = g->round, p->wait_since = now;
            d->braked = 1;
            return GSP_PACE_WAIT;
        }
    }
    /* No in-neighbour heard (killed, restarting, stopped or cut off, for the
     * dead timeout or not yet): going on alone would race through the rest
     * of the run on its own shard (no deadline holds it: there is nobody to
     * wait for) and leave nobody for the lost ones to rejoin. Wait for one to
     * come back, up to alone_wait; then go on alone (shares stay home). */
    if (g->round < c->total_rounds && hears_no_in_neighbour(p, now)) {
        if (p->alone_since < 0)
            p->alone_since = now, p->stats.alone_waits++;
        /* By default at least until the dead timeout has routed the silent
         * ones around (and two heartbeats more): only then do the live
         * neighbours' shares reach it by routing around, and a side of a
         * partition trains on as a cluster of its own. */
        const double until =
            p->alone_since + (c->alone_wait > 0 ? c->alone_wait
                                                : fmax(c->round_timeout, c->dead_timeout + 2 * gsp_pace_heartbeat(c)));
        if (now < until) {
            d->wake_at = fmin(until, now + gsp_pace_heartbeat(c));
            d->alone = 1;
            return GSP_PACE_WAIT;
        }
    } else
        p->alone_since = -1;
    for (int k = 0; k < p->n_nb; k++) {
        const gsp_pace_nb *b = &p->nb[k];
        p->awaited[b->peer] = p->alive[b->peer] && !b->late && !past(p, g, b);
    }
    int ready = p->forced || gsp_ready_with(g, c->topology, p->awaited, inbox, n_inbox);
    if (!ready) {
        if (p->wait_round != g->round || p->wait_since < 0)
            p->wait_round = g->round, p->wait_since = now;
        double until = p->wait_since + gsp_pace_deadline(p);
        if (now < until) {
            d->wake_at = until;
            return GSP_PACE_WAIT;
        }
        int k = gsp_missing(g, c->topology, p->awaited, inbox, n_inbox, d->late,
                            (int)(sizeof d->late / sizeof *d->late));
        d->n_late = k < (int)(sizeof d->late / sizeof *d->late) ? k : (int)(sizeof d->late / sizeof *d->late);
        for (int j = 0; j < d->n_late; j++) {
            gsp_pace_nb *b = nb_of(p, d->late[j]);
            if (!b)
                continue;
            b->late = 1;
            if (b->late_count < 255)
                b->late_count++;
            b->debt = b->debt < 251 ? b->debt + 4 : 255;
            p->stats.late_marks++;
        }
        p->forced = 1;
    }
    return g->round >= c->total_rounds ? GSP_PACE_DONE : GSP_PACE_START;
}

void gsp_pace_started(gsp_pace *p, double now)
{
    /* (a patient peer's round cut short by its deadline still waited at
     * least round_timeout: it is measured, or a peer that runs a deadline
     * ahead of the others would wait round_timeout for ever) */
    if (p->prev_start >= 0 && (!p->forced || p->c.patient))
        p->recent[p->n_recent++ % GSP_PACE_RECENT] = now - p->prev_start;
    if (p->prev_start >= 0 && now > p->prev_start && (p->fastest < 0 || now - p->prev_start < p->fastest))
        p->fastest = now - p->prev_start;
    p->prev_start = now;
    p->forced = 0;
    p->wait_since = -1;
    /* A patient peer's late mark lasts the round it was made in: not waiting
     * for a neighbour in the next rounds too would set it apart again each
     * round (a model transfer each time) where the wait costs one deadline. */
    for (int k = 0; p->c.patient && k < p->n_nb; k++)
        p->nb[k].late = 0, p->nb[k].debt = 0;
}

void gsp_pace_route(gsp_pace *p, gsp_peer *g, double now, const uint8_t *busy, topo_out *out)
{
    topo_route(p->c.topology, g->round, p->id, p->alive, out);
    /* Isolated (no in-neighbour heard lately: all killed, stopped or cut
     * off): keep every share home. Pushing mass out with none coming in
     * would halve w round after round until x underflows, and with a codec
     * the lag of the references would be amplified as w shrinks. The
     * all-gather moves no mass, and a message kept home would set every
     * receiver apart: its messages go (a neighbour whose loop was busy for
     * two heartbeats is only slow). */
    int heard = 0, has_in = 0;
    for (int k = 0; k < p->n_nb; k++)
        has_in |= sends_here(&p->nb[k]), heard |= hearing(p, &p->nb[k], now);
    p->isolated = has_in && !heard && !g->gather;
    /* A link that is down, or has not taken our last frames, gets no share
     * this round: its weight stays home (nothing is sent into the void
     * before a dead neighbour is routed around), and no queue grows. So does
     * a route-around target that is not a neighbour of the schedule: there
     * is no connection to it (only neighbours are dialled). And so does an
     * edge whose receiver has not acknowledged the last ack-window messages
     * and has not been heard since the oldest of them went out: a process
     * that is stopped, hung or broken leaves its socket buffers taking our
     * frames for the whole dead timeout, and every share sent into them
     * would drain our weight into a peer that passes nothing on. One heard
     * since is alive: its acks were lost or are late (a lossy link), and
     * running sums make up for whatever was lost. */
    const uint64_t window = GSP_PACE_ACK_WINDOW(p->c.tau);
    int k = 0;
    for (int j = 0; j < out->n; j++) {
        gsp_pace_nb *b = nb_of(p, out->peer[j]);
        const uint64_t pending = b ? unacked(b, g) : 0;
        int kept = p->isolated || !b || (!b->connected && !b->done) || (busy && busy[out->peer[j]]) ||
                   (pending >= window && b->last_heard <= b->unacked_since);
        if (!kept && (pending == 0 || pending >= window))
            b->unacked_since = now; /* the oldest unacknowledged, or a fresh start after a loss */
        if (kept && b && pending >= window && !p->isolated)
            b->probe = 1;
        if (kept) {
            out->keep += out->weight[j];
            p->stats.busy_kept += !p->isolated;
            continue;
        }
        out->peer[k] = out->peer[j], out->weight[k] = out->weight[j], k++;
    }
    if (p->isolated && out->n > 0)
        p->stats.isolated_rounds++;
    out->n = k;
    /* After a jump over `skipped` rounds, this emit also moves the weight of
     * the rounds jumped over (at most half of w): a peer that jumps (a
     * straggler, mostly) would otherwise pass mass on at a fraction of the
     * others' rate and collect it, and its less trained model would weigh
     * that much more in everybody's average. */
    const long skipped = p->last_emit_round >= 0 ? g->round - p->last_emit_round - 1 : 0;
    if (skipped > 0 && out->n > 0) {
        double sum = 0, wstep = g->codec ? (double)g->step : 1.0;
        for (int j = 0; j < out->n; j++)
            sum += out->weight[j];
        double f = fmin((double)skipped + 1.0, 0.5 / (wstep * sum));
        for (int j = 0; j < out->n && f > 1.0; j++)
            out->weight[j] *= f;
        /* With a codec, x gives up (weight moved) x r: moving this much
         * against a reference that lags the model would push z away from it
         * by as much, so this emit sends the model whole (bf16) first. */
        g->refresh = f > 1.0;
    }
    p->last_emit_round = g->round;
}

void gsp_pace_set_joining(gsp_pace *p) { p->joining = 1; }

void gsp_pace_joined(gsp_pace *p)
{
    p->joining = 0;
    p->barrier_passed = 1;
}
