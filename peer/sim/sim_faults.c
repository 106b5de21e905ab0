/* The simulator's faults: crashes and rejoins (--crash, --rejoin,
 * --churn), stops (--stop) and leaves (--leave), injected at a peer's round
 * boundary. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/core/clock.h"
#include "peer/sim/sim_engine.h"

/* ---- faults ------------------------------------------------------------------- */

/* The first fault of the list for peer i at this round not yet injected. */
static int fault_at(const sim_fault *f, int n, uint8_t *fired, int i, long round)
{
    for (int k = 0; k < n; k++)
        if (f[k].peer == i && f[k].round == round && !fired[k]) {
            fired[k] = 1;
            return k;
        }
    return -1;
}

void sim_crash(sim *s, int i)
{
    sim_peer *p = &s->p[i];
    p->state = P_CRASHED;
    s->mass_changed = 1;
    s->r->messages_lost += (uint64_t)engine_crash(p->e);
    s->r->crashes++;
    s->at_round[engine_round(p->e)]--;
    sim_tell_neighbours(s, i, EV_DOWN);
    sim_watermark_advance(s);
}

/* ---- the faults against each other ------------------------------------------------ */

enum { F_CRASH, F_REJOIN, F_STOP, F_LEAVE, F_ADMIT, F_KINDS };
static const char *const FAULT_OPT[F_KINDS] = {"--crash", "--rejoin/--join", "--stop", "--leave", "--admit"};

/* The fault lists of c in FAULT_OPT's order. */
static const sim_fault *fault_list(const sim_config *c, int kind, int *n)
{
    const int counts[F_KINDS] = {c->n_crash, c->n_rejoin, c->n_stop, c->n_leave, c->n_admit};
    const sim_fault *lists[F_KINDS] = {c->crash, c->rejoin, c->stop, c->leave, c->admit};
    *n = counts[kind];
    return lists[kind];
}

/* Peer `peer`'s admission (its index in c->admit), or -1. */
static int admission(const sim_config *c, int peer)
{
    for (int k = 0; k < c->n_admit; k++)
        if (c->admit[k].peer == peer)
            return k;
    return -1;
}

int sim_config_check(const sim_config *c, long total_rounds, char *err, size_t errlen)
{
    const int n = c->peer.n_peers;
    for (int kind = 0; kind < F_KINDS; kind++) {
        int m;
        const sim_fault *f = fault_list(c, kind, &m);
        for (int k = 0; k < m; k++) {
            if (f[k].peer < 0 || f[k].peer >= n) {
                snprintf(err, errlen, "%s %d@%ld: peer %d does not exist (%d peers: 0 to %d)", FAULT_OPT[kind],
                         f[k].peer, f[k].round, f[k].peer, n, n - 1);
                return -EINVAL;
            }
            const int a = admission(c, f[k].peer);
            /* Before its admission the slot has no process: nothing can
             * crash, stop or leave, and its rounds only begin where it
             * enters (the round of the model it pulls). */
            if (kind != F_ADMIT && a >= 0 && f[k].round <= c->admit[a].round) {
                snprintf(err, errlen, "%s %d@%ld: peer %d's slot is vacant until the run's round %ld (--admit %d@%ld): "
                                      "a fault of an admitted peer must come at a later round",
                         FAULT_OPT[kind], f[k].peer, f[k].round, f[k].peer, c->admit[a].round, f[k].peer,
                         c->admit[a].round);
                return -EINVAL;
            }
        }
    }
    for (int k = 0; k < c->n_rejoin; k++) {
        int crashed_before = 0;
        for (int q = 0; q < c->n_crash; q++)
            crashed_before |= c->crash[q].peer == c->rejoin[k].peer && c->crash[q].round < c->rejoin[k].round;
        if (!crashed_before) {
            snprintf(err, errlen, "--rejoin/--join %d@%ld: peer %d has no --crash before round %ld", c->rejoin[k].peer,
                     c->rejoin[k].round, c->rejoin[k].peer, c->rejoin[k].round);
            return -EINVAL;
        }
    }
    for (int k = 0; k < c->n_admit; k++) {
        const sim_fault *f = &c->admit[k];
        if (admission(c, f->peer) != k) {
            snprintf(err, errlen, "--admit %d@%ld: peer %d is admitted twice (at rounds %ld and %ld): a slot is taken "
                                  "once",
                     f->peer, f->round, f->peer, c->admit[admission(c, f->peer)].round, f->round);
            return -EINVAL;
        }
        if (total_rounds > 0 && f->round >= total_rounds) {
            snprintf(err, errlen, "--admit %d@%ld: the run has %ld rounds (0 to %ld), so the slot would stay vacant to "
                                  "the end",
                     f->peer, f->round, total_rounds, total_rounds - 1);
            return -EINVAL;
        }
    }
    if (c->n_admit >= n) {
        snprintf(err, errlen, "--admit: every one of the %d slots is vacant at the start: a host is admitted by the "
                              "peers that hold theirs (at least one)",
                 n);
        return -EINVAL;
    }
    return 0;
}

/* A process starts in peer i's slot: the peer back after a crash, with the
 * state it had at the crash (as if checkpointed every round:
 * engine_come_back; the pacing policy then catches it up with the run), or
 * fresh, without state, pulling a neighbour's model as `sgp peer --resume`
 * without a checkpoint does; or a host admitted to a vacant slot (fresh,
 * its slot never held: no run of it to lose or adopt). */
static int start_in_slot(sim *s, int i, int fresh)
{
    sim_peer *p = &s->p[i];
    const uint64_t incarnation = engine_gossip(p->e)->incarnation + 1;
    for (int j = 0; j < s->c->peer.n_peers; j++) { /* shares of its dead run waiting in inboxes (sim.c: absorbed) */
        int n_inbox;
        const gsp_msg *inbox = engine_inbox(s->p[j].e, &n_inbox);
        for (int k = 0; k < n_inbox; k++)
            s->p[j].stale_inbox |= inbox[k].src == i;
    }
    int rc;
    if (fresh) {
        char err[256];
        engine_free(p->e);
        rc = engine_new(&p->e, &s->settings, &s->plan, i, s->train, s->x0, s->model.n_params, incarnation, s->now, err,
                        sizeof err);
        if (rc < 0)
            return rc;
        for (int q = 0; q < s->c->peer.n_peers; q++) /* (as node.c: slots still vacant are routed around) */
            if (q != i && s->p[q].vacant)
                engine_absent(p->e, q);
    }
    if ((rc = engine_come_back(p->e, fresh ? ENGINE_WITHOUT_STATE : ENGINE_WITH_STATE, incarnation, s->now)) < 0)
        return rc;
    p->state = P_WAITING;
    p->wake_at = -1;
    s->at_round[engine_round(p->e)]++;
    sim_tell_neighbours(s, i, EV_UP);
    sim_queue_push(&s->q, s->now + s->c->latency, EV_RELEASE, i, 0);
    return 0;
}

int sim_rejoin(sim *s, int i, int fresh)
{
    s->mass_changed = 1;
    int rc = start_in_slot(s, i, fresh);
    s->r->resumes += rc == 0;
    return rc;
}

/* A host admitted with a credential takes vacant slot i (as `sgp peer
 * --credential` does: no checkpoint, so it joins): its engine's one unit of
 * weight is the run's, exactly (sim_check_event), and its neighbours, which
 * routed around the slot from round 0, see it connect. */
static int admit(sim *s, int i)
{
    sim_peer *p = &s->p[i];
    p->vacant = 0;
    int rc = start_in_slot(s, i, 1);
    if (rc < 0)
        return rc;
    p->admitted = 1;
    s->r->admits++, s->r->slots_vacant--;
    s->mass_expect += 1.0; /* (what a join adds: gsp_join's unit) */
    return 0;
}

int sim_admit_due(sim *s, long round)
{
    for (int k = 0; k < s->c->n_admit; k++) {
        const int i = s->c->admit[k].peer;
        if (s->c->admit[k].round != round || !s->p[i].vacant)
            continue;
        int rc = admit(s, i);
        if (rc < 0)
            return rc;
        s->running++;
    }
    return 0;
}

/* --churn F[:D]: each peer alternates between up and down; down periods
 * last D seconds on average and up periods D (1 - F) / F, both exponential,
 * so that a fraction F of the peers is down at any time. */
double sim_churn_wait(sim *s, int down)
{
    const sim_config *c = s->c;
    double d = c->churn_down > 0 ? c->churn_down : 4 * c->peer.dead_timeout;
    double mean = down ? d : d * (1 - c->churn) / c->churn;
    return -mean * log(1.0 - nn_rng_uniform_d(&s->churn));
}

int sim_churn(sim *s, int i)
{
    sim_peer *p = &s->p[i];
    if (p->state == P_DONE || p->exited)
        return 0;
    if (p->vacant) { /* (nobody to crash yet: asked again later) */
        sim_queue_push(&s->q, s->now + sim_churn_wait(s, 0), EV_CHURN, i, 0);
        return 0;
    }
    if (p->state == P_CRASHED) {
        if (!p->churned)
            return 0; /* crashed for good by --crash */
        p->churned = 0;
        int rc = sim_rejoin(s, i, 0);
        sim_queue_push(&s->q, s->now + sim_churn_wait(s, 0), EV_CHURN, i, 0);
        return rc;
    }
    p->churned = 1;
    sim_crash(s, i); /* its step in progress dies with it */
    sim_queue_push(&s->q, s->now + sim_churn_wait(s, 1), EV_CHURN, i, 0);
    return 0;
}

/* At a round boundary: a crash or a stop scheduled for this round, or on. */
int sim_boundary(sim *s, int i, int *advanced)
{
    sim_peer *p = &s->p[i];
    const long round = engine_round(p->e);
    int k;
    if (fault_at(s->c->crash, s->c->n_crash, s->crash_fired, i, round) >= 0) {
        s->running--;
        sim_crash(s, i);
        return 0;
    }
    if (fault_at(s->c->leave, s->c->n_leave, s->leave_fired, i, round) >= 0) {
        /* SIGTERM without a checkpoint (sgp peer --on-term leave): the
         * engine leaves as a networked peer's does (its round's shares,
         * then all of its weight to its live neighbours, then GOODBYE
         * "stopped": sim.c) and the process is gone; the neighbours route
         * around it at once. */
        s->r->leaves++;
        const double t0 = clock_now();
        engine_leave(p->e, s->now);
        engine_advance(p->e, s->now);
        sim_engine_time(s, t0);
        *advanced = 1;
        return 0;
    }
    if ((k = fault_at(s->c->stop, s->c->n_stop, s->stop_fired, i, round)) >= 0) {
        /* SIGSTOP: frozen, its connections up; what reaches it waits. */
        p->stopped_until = s->now + s->c->stop[k].seconds;
        s->r->stops++;
        sim_queue_push(&s->q, p->stopped_until, EV_RESUME, i, 0);
        return 0;
    }
    const double t0 = clock_now();
    engine_advance(p->e, s->now);
    sim_engine_time(s, t0);
    *advanced = 1;
    return 0;
}

/* ---- partitions -------------------------------------------------------------- */

int sim_cut_between(const sim *s, int i, int j, int *k)
{
    for (int c = 0; c < s->c->n_cut; c++)
        if (s->cut_on[c] && s->c->cut[c].side[i] != s->c->cut[c].side[j]) {
            *k = c;
            return 1;
        }
    return 0;
}

/* Every pair of neighbours across cut k that are both running hears at
 * `delay` that their connection broke (EV_DOWN) or is back (EV_UP). */
static void cut_links(sim *s, int k, int kind, double delay)
{
    const uint8_t *side = s->c->cut[k].side;
    for (int i = 0; i < s->c->peer.n_peers; i++) {
        const gsp_pace *pc = engine_pace(s->p[i].e);
        for (int n = 0; n < pc->n_nb; n++) {
            const int j = pc->nb[n].peer;
            if (side[i] != side[j] && !sim_gone(&s->p[i]) && !sim_gone(&s->p[j]))
                sim_queue_push(&s->q, s->now + delay, kind, i, j);
        }
    }
}

void sim_cut_event(sim *s, int kind, int k)
{
    const sim_cut *c = &s->c->cut[k];
    if (kind == EV_CUT) {
        s->cut_on[k] = 1;
        s->r->cuts++;
        if (c->seconds > 2 * s->c->peer.dead_timeout)
            sim_queue_push(&s->q, s->now + 2 * s->c->peer.dead_timeout, EV_CUT_CLOSE, 0, k);
    } else if (kind == EV_CUT_CLOSE) {
        s->cut_closed[k] = 1;
        cut_links(s, k, EV_DOWN, 0.0);
    } else { /* EV_HEAL */
        s->cut_on[k] = 0;
        if (s->cut_closed[k])
            cut_links(s, k, EV_UP, s->c->latency); /* the redial */
        s->cut_closed[k] = 0;
    }
}

