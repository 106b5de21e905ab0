/* The simulator: the in-process driver of the peer engine
 * (peer/core/engine.h). N peers, each an engine making every decision
 * exactly as a networked peer's does, on a virtual clock; here the event
 * loop, what each engine queued (frames over the link model: sim_link.c;
 * steps; events) and the end of the run; faults are sim_faults.c's. The
 * time model is documented in sim.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "peer/core/clock.h"
#include "peer/sim/sim_engine.h"

/* ---- the slowest-peer watermark ------------------------------------------- */

/* A live peer finished a round (or jumped, left or came back): move the watermark. */
void sim_watermark_advance(sim *s)
{
    const sim_config *c = s->c;
    while (s->slowest < s->plan.total_rounds && s->at_round[s->slowest] == 0) {
        s->slowest++;
        sim_log_round(s, s->slowest);
        if (s->slowest % s->plan.rounds_per_epoch == 0 || s->slowest == s->plan.total_rounds)
            sim_epoch_report(s, (s->slowest + s->plan.rounds_per_epoch - 1) / s->plan.rounds_per_epoch);
        else
            sim_progress_round(s);
        for (int k = 0; k < c->n_rejoin; k++)
            if (c->rejoin[k].round == s->slowest && s->p[c->rejoin[k].peer].state == P_CRASHED &&
                !s->p[c->rejoin[k].peer].churned && sim_rejoin(s, c->rejoin[k].peer, c->rejoin[k].fresh) == 0)
                s->running++;
        (void)sim_admit_due(s, s->slowest); /* (as a rejoin: only out of memory fails it, and it stays vacant) */
    }
}

static void move_round(sim *s, long from, long to)
{
    s->at_round[from]--;
    s->at_round[to]++;
}

/* ---- connections ---------------------------------------------------------------- */

int sim_gone(const sim_peer *p) { return p->state == P_CRASHED || p->exited; }

/* When a connection that process i (just started: a comeback or an
 * admission) dials to q comes up: one latency from now, or from the heal
 * of a partition that cuts them (no frame crosses it, so TCP cannot
 * connect before); -1 when a cut that closes its connections does (at its
 * heal: sim_cut_event). */
static double up_at(const sim *s, int i, int q)
{
    double t = s->now + s->c->latency;
    for (int k = 0; k < s->c->n_cut; k++) {
        const sim_cut *c = &s->c->cut[k];
        if (!s->cut_on[k] || c->side[i] == c->side[q])
            continue;
        if (c->seconds > 2 * s->c->peer.dead_timeout)
            return -1;
        t = fmax(t, c->at + c->seconds + s->c->latency);
    }
    return t;
}

/* Tell every neighbour of i, one latency from now, that i's connection
 * broke (kind EV_DOWN) or is up (EV_UP), as TCP would. */
void sim_tell_neighbours(sim *s, int i, int kind)
{
    const gsp_pace *pc = engine_pace(s->p[i].e);
    for (int k = 0; k < pc->n_nb; k++) {
        int q = pc->nb[k].peer;
        if (sim_gone(&s->p[q]))
            continue;
        const double t = kind == EV_UP ? up_at(s, i, q) : s->now + s->c->latency;
        if (t < 0)
            continue;
        sim_queue_push(&s->q, t, kind, q, i);
        if (kind == EV_UP) /* and i sees q */
            sim_queue_push(&s->q, t, EV_UP, i, q);
    }
}

static void wake_at(sim *s, int i, double t)
{
    sim_peer *p = &s->p[i];
    if (p->wake_at >= s->now && p->wake_at <= t)
        return; /* an earlier wake is pending: it asks again */
    p->wake_at = t;
    sim_queue_push(&s->q, t, EV_WAKE, i, 0);
}

void sim_engine_time(sim *s, double since) { s->r->cpu_gossip_seconds += clock_now() - since; }

/* ---- what an engine asked for ------------------------------------------------------ */

static double step_time(sim *s, sim_peer *p)
{
    double t = s->step_seconds * p->slow;
    if (s->c->speed_drift > 0) /* uniform load: every peer's steps stretch at random, all alike */
        t *= 1.0 + s->c->speed_drift * -log(1.0 - nn_rng_uniform_d(&p->speed));
    return t;
}

/* The round's local steps, computed now and done step_time later. */
static void compute(sim *s, int i)
{
    sim_peer *p = &s->p[i];
    engine_stats before, after;
    engine_stats_of(p->e, &before);
    const double t0 = clock_now();
    float loss = engine_compute_step(p->e, s->c->averaging_only ? NULL : &s->model);
    s->r->cpu_step_seconds += clock_now() - t0;
    engine_stats_of(p->e, &after);
    const long steps = after.steps - before.steps;
    if (steps > 0) {
        s->epoch_loss += loss, s->epoch_steps++;
        s->r->local_steps += steps;
    }
    p->state = P_COMPUTING;
    sim_queue_push(&s->q, s->now + (double)steps * step_time(s, p), EV_STEP_DONE, i, ++p->step_id);
}

/* Peer i's round moved (a step, a catch-up, a join): the watermark follows. */
static void follow_round(sim *s, int i, long *before)
{
    const long now = engine_round(s->p[i].e);
    if (now == *before || s->p[i].state == P_CRASHED)
        return;
    move_round(s, *before, now);
    *before = now;
    sim_watermark_advance(s);
}

/* Peer i's engine absorbed since the last look (a round's start, its steps
 * under --overlap, the end): sim_check_absorbed. */
static void absorbed_lately(sim *s, int i)
{
    engine_stats st;
    engine_stats_of(s->p[i].e, &st);
    if (st.absorbed != s->p[i].absorbed) {
        s->p[i].absorbed = st.absorbed;
        sim_check_absorbed(s, i);
    }
}

/* After every input to peer i's engine: carry its frames over the link
 * model, follow its round for the watermark, act on its events, and wake it
 * when it asked. */
int sim_pump(sim *s, int i, long round_before)
{
    sim_peer *p = &s->p[i];
    engine *e = p->e;
    for (int again = 1; again && !sim_gone(p);) {
        again = 0;
        absorbed_lately(s, i);
        engine_send t;
        while (engine_poll_send(e, &t)) {
            int rc = sim_transmit(s, i, &t);
            if (rc < 0)
                return rc;
        }
        follow_round(s, i, &round_before);
        engine_event v;
        while (!sim_gone(p) && engine_poll_event(e, &v)) {
            int rc = 0;
            switch (v.kind) {
            case ENGINE_STEP:
                absorbed_lately(s, i);
                compute(s, i);
                break;
            case ENGINE_BOUNDARY:
                s->last_step = s->now;
                p->state = P_WAITING;
                if (s->c->check && (rc = sim_check_model(s, i, s->err, sizeof s->err)) < 0)
                    return rc;
                rc = sim_boundary(s, i, &again);
                break;
            case ENGINE_DONE:
                p->state = P_DONE;
                s->running--;
                break;
            case ENGINE_FINISHED:
                absorbed_lately(s, i);
                for (engine_send t; engine_poll_send(e, &t);) /* what it said last (GOODBYE "done") */
                    if ((rc = sim_transmit(s, i, &t)) < 0)
                        return rc;
                if (v.rc == -EDOM) {
                    char why[400];
                    engine_diverged_text(e, why, sizeof why);
                    snprintf(s->err, sizeof s->err, "peer %d: %s", i, why);
                }
                if (v.rc == -EDOM || v.rc == -ENOMEM)
                    return v.rc;
                if (v.rc < 0) { /* nothing to join: gone for good */
                    if (p->state != P_DONE)
                        s->running--;
                    sim_crash(s, i);
                    break;
                }
                if (v.goodbye >= 0) /* what a networked peer says last on each connection */
                    for (int k = 0; k < engine_pace(e)->n_nb; k++)
                        if ((rc = sim_transmit(s, i, &(engine_send){.kind = ENGINE_GOODBYE, .done = v.goodbye,
                                                                     .peer = engine_pace(e)->nb[k].peer})) < 0)
                            return rc;
                if (p->state != P_DONE) { /* (a leave: it holds no round of the run any more) */
                    p->state = P_DONE;
                    s->running--;
                    s->at_round[engine_round(e)]--;
                }
                p->exited = 1;
                sim_tell_neighbours(s, i, EV_DOWN);
                sim_watermark_advance(s);
                break;
            case ENGINE_LOG:
                if (s->c->events)
                    fprintf(s->c->events, "{\"id\": %d, \"event\": \"%s\", \"peer\": %d, \"round\": %ld, \"t\": %.6f}\n", i,
                            engine_log_text(v.log), v.peer, v.round, s->now);
                break;
            }
            if (rc < 0)
                return rc;
        }
    }
    follow_round(s, i, &round_before); /* (a jump just before it finished, too) */
    if (!sim_gone(p)) {
        double t = engine_wake_at(e, s->now);
        if (isfinite(t))
            wake_at(s, i, t);
    }
    return 0;
}

/* After the last round: the shares still in flight go to the peers that
 * did not crash or leave, then
 * every inbox in (sender, seq) order: the average model is of all the mass
 * the live peers hold (only lost messages' shares are missing). */
static void finish(sim *s)
{
    sim_event e;
    while (sim_queue_pop(&s->q, &e)) {
        if (e.kind != EV_ARRIVE)
            continue;
        sim_frame *f = &s->flight[e.arg];
        const int take = f->s.kind == ENGINE_PUSH && s->p[e.peer].state != P_CRASHED && !engine_left(s->p[e.peer].e);
        const double t0 = clock_now();
        if (take) /* (the engine takes the payload over: into its inbox, or freed when refused) */
            engine_push(s->p[e.peer].e, &f->s.msg, s->now);
        sim_engine_time(s, t0);
        sim_flight_release(s, e.arg, !take);
    }
    const double t0 = clock_now();
    for (int i = 0; i < s->c->peer.n_peers; i++)
        if (s->p[i].state != P_CRASHED && !engine_left(s->p[i].e)) /* (one that left took nothing more) */
            engine_drain(s->p[i].e);
    sim_engine_time(s, t0);
    sim_final_report(s);
}

void sim_config_defaults(sim_config *c)
{
    memset(c, 0, sizeof *c);
    peer_settings_defaults(&c->peer);
    c->peer.n_peers = 8;
    /* Simulated links neither stall nor retransmit, so a neighbour silent
     * for 1 simulated second has crashed or stopped; the real network's 5 s
     * would cost the survivors of a run of millisecond steps thousands of
     * rounds of waiting for it. */
    c->peer.dead_timeout = 1.0;
    c->peer.round_timeout = 0; /* derived from the step and link times at set-up (sim_setup.c) */
    c->compute_seconds = SIM_COMPUTE_ESTIMATE;
    c->latency = 1e-4;
    c->bandwidth = 1.25e8; /* 1 Gbit/s */
}

/* Events for a frozen peer wait until it runs again, in their order. */
static int deferred(sim *s, const sim_event *e)
{
    if (e->kind == EV_RESUME || s->now >= s->p[e->peer].stopped_until)
        return 0;
    sim_queue_push(&s->q, s->p[e->peer].stopped_until, e->kind, e->peer, e->arg);
    return 1;
}

/* The engine's input for an event (its outputs: pump). */
static int dispatch(sim *s, const sim_event *e)
{
    sim_peer *p = &s->p[e->peer];
    engine *g = p->e;
    const long round = engine_round(g);
    int advanced = 0, rc = 0;
    if (e->kind == EV_CUT || e->kind == EV_CUT_CLOSE || e->kind == EV_HEAL) {
        sim_cut_event(s, e->kind, (int)e->arg);
        return 0;
    }
    if (deferred(s, e))
        return 0;
    if (!sim_gone(p))
        sim_link_states(s, e->peer); /* (what the transport would say before this input) */
    if (e->kind == EV_ARRIVE)
        return sim_arrive(s, e->peer, e->arg);
    if (e->kind == EV_CHURN)
        return sim_churn(s, e->peer);
    if (sim_gone(p))
        return 0;
    const double t0 = clock_now();
    switch (e->kind) {
    case EV_STEP_DONE:
        if (p->state != P_COMPUTING || e->arg != p->step_id)
            return 0; /* it crashed meanwhile */
        engine_step_done(g, s->now);
        break;
    case EV_WAKE:
        if (p->wake_at == e->t)
            p->wake_at = -1;
        engine_timer(g, s->now);
        break;
    case EV_UP:
        if (sim_gone(&s->p[e->arg]))
            return 0;
        engine_link_up(g, (int)e->arg, s->now);
        break;
    case EV_DOWN:
        engine_link_down(g, (int)e->arg, s->now);
        break;
    case EV_RESUME:
        p->stopped_until = -1;
        rc = sim_boundary(s, e->peer, &advanced);
        break;
    case EV_RELEASE:
        rc = sim_boundary(s, e->peer, &advanced);
        break;
    }
    sim_engine_time(s, t0);
    return rc < 0 ? rc : sim_pump(s, e->peer, round);
}

/* Every peer's memory by part, the shared model engine and data sets, and the
 * messages in flight, when the last round is done (before finish drains them). */
static void measure_memory(sim *s, const nn_dataset *train)
{
    mem_parts *m = &s->r->memory;
    *m = (mem_parts){.model = s->model.bytes, .data = nn_dataset_bytes(train) + nn_dataset_bytes(s->test),
                     .in_flight = (size_t)s->cap_flight * (sizeof *s->flight + sizeof *s->free_slots)};
    m->codec += gsp_scratch_bytes(&s->scratch);
    for (int i = 0; i < s->c->peer.n_peers; i++)
        engine_memory(s->p[i].e, m);
    for (size_t k = 0; k < s->q.n; k++) /* the slots in use: those an arrival is pending for */
        if (s->q.heap[k].kind == EV_ARRIVE)
            m->in_flight += sim_frame_bytes(&s->flight[s->q.heap[k].arg]);
    mem_measure(m);
}

int sim_run(const sim_config *c, const nn_dataset *train, const nn_dataset *test, sim_result *r, char *err,
            size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (c->peer.n_peers < 1 || !c->peer.topology || c->peer.topology->n_peers != c->peer.n_peers) {
        snprintf(err, errlen, "the topology is for %d peers, the simulation has %d",
                 c->peer.topology ? c->peer.topology->n_peers : 0, c->peer.n_peers);
        return -EINVAL;
    }
    if (c->churn < 0 || c->churn >= 1) {
        snprintf(err, errlen, "--churn must be in [0, 1)");
        return -EINVAL;
    }
    sim s = {.c = c, .test = test, .r = r};
    if (errlen)
        *err = 0;
    s.wall0 = clock_now();
    round_plan_make(&s.plan, &c->peer.train, train->n, c->peer.n_peers, c->peer.local_steps);
    int rc = sim_config_check(c, s.plan.total_rounds, err, errlen);
    if (rc < 0)
        return rc;
    progress_init(&s.bar, c->progress ? c->progress : stdout, c->progress ? c->progress_bar : 0);
    rc = sim_setup(&s, c, train, err, errlen);
    for (int i = 0; rc == 0 && i < c->peer.n_peers; i++) { /* round 0 starts from the hold engine_new leaves */
        int advanced = 0;
        if (!s.p[i].vacant && (rc = sim_boundary(&s, i, &advanced)) == 0)
            rc = sim_pump(&s, i, 0);
    }
    sim_event e;
    /* Until no peer can do anything more: every live one done and nobody
     * down that will come back. */
    if (rc == 0 && c->check) {
        s.mass_ref = sim_weight(&s);
        s.check_until = 1000.0 + 100.0 * s.plan.total_rounds * (s.step_seconds * s.plan.local_steps + c->latency +
                                                               4.0 * s.model.n_params / (c->bandwidth > 0 ? c->bandwidth : 1e12));
    }
    if (rc == 0) /* (admitted at round 0: joining beside the founders, its unit checked with the first event) */
        rc = sim_admit_due(&s, 0);
    while (rc == 0 && s.running > 0 && sim_queue_pop(&s.q, &e)) {
        s.now = e.t;
        rc = dispatch(&s, &e);
        if (rc == 0 && c->check)
            rc = sim_check_event(&s, err, errlen);
    }
    if (rc == 0 && c->check)
        rc = sim_check_end(&s, err, errlen);
    if (rc == 0)
        measure_memory(&s, train);
    if ((rc == -EPROTO || rc == -EDOM) && s.err[0])
        snprintf(err, errlen, "%s", s.err);
    else if (rc < 0 && !*err) /* (set-up says what failed itself) */
        snprintf(err, errlen, "simulation failed: %s", strerror(-rc));
    else if (rc == 0)
        finish(&s);
    progress_clear(&s.bar);
    sim_teardown(&s);
    r->wall_seconds = clock_now() - s.wall0;
    return rc;
}

void sim_result_free(sim_result *r)
{
    if (!r)
        return;
    free(r->average_model);
    free(r->peer_models);
    memset(r, 0, sizeof *r);
}
