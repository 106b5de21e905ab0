/* The simulator's invariants (--check): see sim_engine.h. The weight is the
 * one push-sum conserves through every round, routing around, loss,
 * duplication, catch-up and refresh: what the live peers hold, plus what
 * every edge has sent and its receiver not applied (in flight, lost and
 * owed by the running sums, or sent to a peer that is down), plus what
 * comebacks adopted as a baseline (gsp_stats.w_adopted). Only a crash
 * (its weight leaves), a comeback (gsp_resume, gsp_restart, a join) and an
 * admission change it, and the simulator says when (sim_engine.h:
 * mass_changed); an admission by exactly its one unit (mass_expect). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "peer/sim/sim_engine.h"

double sim_weight(const sim *s)
{
    double w = 0;
    for (int i = 0; i < s->c->peer.n_peers; i++) {
        const gsp_peer *g = engine_gossip(s->p[i].e);
        if (s->p[i].state != P_CRASHED)
            w += g->w + g->stats.w_adopted;
        for (int k = 0; k < g->n_out; k++)
            w += gsp_edge_pending(g, engine_gossip(s->p[g->out[k].peer].e), NULL);
    }
    return w;
}

int sim_check_event(sim *s, char *err, size_t errlen)
{
    for (int i = 0; i < s->c->peer.n_peers; i++) {
        /* A joiner taking its model (gsp_join: one unit of weight) after a
         * crash. An admitted peer's unit came with its slot (mass_expect),
         * and its join must move nothing more. */
        const int joined = s->p[i].was_joining && !engine_joining(s->p[i].e);
        s->mass_changed |= joined && !s->p[i].admitted;
        if (joined || s->p[i].state == P_CRASHED)
            s->p[i].admitted = 0;
        s->p[i].was_joining = engine_joining(s->p[i].e);
    }
    const double w = sim_weight(s);
    if (getenv("SGP_DEBUG_MASS")) {
        for (int i = 0; i < s->c->peer.n_peers; i++) {
            const gsp_peer *g = engine_gossip(s->p[i].e);
            fprintf(stderr, "t=%.6f peer %d state %d w %.6f adopted %.6f inc %llu join %d:", s->now, i, s->p[i].state, g->w, g->stats.w_adopted, (unsigned long long)g->incarnation, engine_joining(s->p[i].e));
            for (int k = 0; k < g->n_out; k++)
                fprintf(stderr, " ->%d %.6f", g->out[k].peer, gsp_edge_pending(g, engine_gossip(s->p[g->out[k].peer].e), NULL));
            fprintf(stderr, "\n");
        }
    }
    if (!s->mass_changed && !(fabs(w - (s->mass_ref + s->mass_expect)) <= 1e-9 * fmax(1.0, fabs(w)))) {
        if (s->mass_expect != 0)
            snprintf(err, errlen, "invariant: the run's push-sum weight went from %.15g to %.15g at %.6f s, where "
                                  "admissions added %.15g",
                     s->mass_ref, w, s->now, s->mass_expect);
        else
            snprintf(err, errlen, "invariant: the run's push-sum weight went from %.15g to %.15g at %.6f s with no "
                                  "crash, comeback or admission",
                     s->mass_ref, w, s->now);
        return -EPROTO;
    }
    s->mass_ref = w, s->mass_changed = 0, s->mass_expect = 0;
    for (int i = 0; i < s->c->peer.n_peers; i++) {
        const double wi = engine_gossip(s->p[i].e)->w;
        if (s->p[i].state != P_CRASHED && !engine_left(s->p[i].e) && !(wi > 0 && isfinite(wi))) {
            snprintf(err, errlen, "invariant: peer %d's weight is %g at %.6f s", i, wi, s->now);
            return -EPROTO;
        }
    }
    if (s->now > s->check_until) {
        snprintf(err, errlen, "invariant: no progress: %.3f simulated s and %d peers still running (slowest at round "
                              "%ld of %ld)",
                 s->now, s->running, s->slowest, s->plan.total_rounds);
        return -EPROTO;
    }
    return 0;
}

int sim_check_model(const sim *s, int i, char *err, size_t errlen)
{
    const gsp_peer *g = engine_gossip(s->p[i].e);
    for (size_t d = 0; d < g->dim; d++)
        if (!isfinite(g->x[d])) {
            snprintf(err, errlen, "invariant: peer %d's x[%zu] is %g at round %ld (%.6f s)", i, d, (double)g->x[d],
                     g->round, s->now);
            return -EPROTO;
        }
    return 0;
}

int sim_check_end(const sim *s, char *err, size_t errlen)
{
    if (s->running > 0) {
        snprintf(err, errlen, "invariant: deadlock: %d peers can still act and nothing is scheduled (%.3f s, slowest at "
                              "round %ld of %ld)",
                 s->running, s->now, s->slowest, s->plan.total_rounds);
        return -EPROTO;
    }
    return 0;
}

/* Peer i's engine has absorbed (a round started, an overlapped round's
 * absorb beside its steps, or it finished): a share of a dead run among
 * what it took in changed the run's weight. */
void sim_check_absorbed(sim *s, int i)
{
    sim_peer *p = &s->p[i];
    if (!p->stale_inbox)
        return;
    s->mass_changed = 1;
    p->stale_inbox = 0;
    int n_inbox;
    const gsp_msg *inbox = engine_inbox(p->e, &n_inbox);
    for (int k = 0; k < n_inbox; k++) /* (kept for a later round: tau = 0) */
        p->stale_inbox |= inbox[k].incarnation < engine_gossip(s->p[inbox[k].src].e)->incarnation;
}
