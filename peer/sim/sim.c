/* The simulator engine: the in-process transport of the round driver. N
 * peers, each a round_peer (peer/core/round.h) making every decision of its
 * rounds exactly as a networked peer does, on a virtual clock; this file
 * only moves messages, heartbeats and connection events over modelled links
 * and injects faults. The time model is documented in sim.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "peer/core/clock.h"
#include "peer/sim/sim_engine.h"

enum {
    EV_STEP_DONE, /* peer's local step finished (arg: which step) */
    EV_ARRIVE,    /* a frame (arg: flight slot) reaches peer */
    EV_WAKE,      /* the time peer's engine asked to be woken at */
    EV_UP,        /* peer's connection to arg is up */
    EV_DOWN,      /* peer's connection to arg broke */
    EV_CHURN,     /* --churn: peer goes down, or comes back */
    EV_RESUME,    /* a stopped peer runs again */
    EV_RELEASE,   /* a peer back from a crash goes on from its round boundary */
};

/* Frames other than shares and models: what the simulator charges a link
 * for a heartbeat (the others are left out of the link model, as small as
 * they are). */
#define SIM_HEARTBEAT_BYTES 32

/* ---- frames in flight -------------------------------------------------------- */

static long flight_put(sim *s, int src, const engine_send *t)
{
    if (s->n_free == 0) {
        int nc = s->cap_flight ? 2 * s->cap_flight : 256;
        sim_frame *f = realloc(s->flight, (size_t)nc * sizeof *f);
        if (!f)
            return -ENOMEM;
        s->flight = f;
        int *fs = realloc(s->free_slots, (size_t)nc * sizeof *fs);
        if (!fs)
            return -ENOMEM;
        s->free_slots = fs;
        for (int i = nc - 1; i >= s->cap_flight; i--)
            s->free_slots[s->n_free++] = i;
        s->cap_flight = nc;
    }
    int slot = s->free_slots[--s->n_free];
    sim_frame *f = &s->flight[slot];
    *f = (sim_frame){.s = *t, .src = src};
    int rc = 0;
    if (t->kind == ENGINE_PUSH)
        rc = gsp_msg_copy(&f->s.msg, &t->msg);
    else if (t->kind == ENGINE_MODEL && (f->model = malloc(t->dim * sizeof(float))))
        f->s.model = memcpy(f->model, t->model, t->dim * sizeof(float));
    else if (t->kind == ENGINE_MODEL)
        rc = -ENOMEM;
    if (rc < 0) {
        s->n_free++;
        return rc;
    }
    return slot;
}

static void flight_release(sim *s, long slot, int free_payload)
{
    sim_frame *f = &s->flight[slot];
    if (free_payload && f->s.kind == ENGINE_PUSH)
        gsp_msg_free(&f->s.msg);
    free(f->model);
    f->model = NULL;
    s->free_slots[s->n_free++] = (int)slot;
}

static size_t frame_bytes(const sim_frame *f)
{
    return f->s.kind == ENGINE_PUSH ? gsp_msg_owned_bytes(&f->s.msg)
           : f->model             ? f->s.dim * sizeof(float)
                                  : 0;
}

/* A message of `bytes` on link i -> j: queued behind the link's earlier
 * messages, serialised at the bandwidth; returns when it has left. */
static double link_send(sim *s, int i, int j, double bytes)
{
    const sim_config *c = s->c;
    double *free_at = &s->link_free[(size_t)i * c->n_peers + j];
    double start = *free_at > s->now ? *free_at : s->now;
    *free_at = start + (c->bandwidth > 0 ? bytes / c->bandwidth : 0.0);
    return *free_at;
}

static int deliver(sim *s, int src, const engine_send *t, double at)
{
    long slot = flight_put(s, src, t);
    if (slot < 0)
        return (int)slot;
    return sim_queue_push(&s->q, at, EV_ARRIVE, t->peer, slot);
}

/* A frame from peer i over the link model: shares (PUSH) are lost,
 * duplicated and reordered as configured; every other frame arrives. */
static int transmit(sim *s, int i, const engine_send *t)
{
    const sim_config *c = s->c;
    if (t->kind == ENGINE_HEARTBEAT || t->kind == ENGINE_MODEL) {
        const double bytes = t->kind == ENGINE_MODEL ? (double)t->dim * sizeof(float) : SIM_HEARTBEAT_BYTES;
        s->r->bytes_sent += (uint64_t)bytes;
        return deliver(s, i, t, link_send(s, i, t->peer, bytes) + c->latency);
    }
    if (t->kind != ENGINE_PUSH)
        return deliver(s, i, t, s->now + c->latency);
    const double bytes = (double)gsp_msg_bytes(&t->msg);
    s->r->bytes_sent += (uint64_t)bytes;
    s->r->messages_sent++;
    double done = link_send(s, i, t->peer, bytes);
    if (c->loss > 0 && nn_rng_uniform_d(&s->net) < c->loss) {
        s->r->messages_lost++;
        return 0;
    }
    int copies = c->duplicate > 0 && nn_rng_uniform_d(&s->net) < c->duplicate ? 2 : 1;
    s->r->messages_duplicated += (uint64_t)(copies - 1);
    for (int copy = 0; copy < copies; copy++) {
        double jitter = c->jitter > 0 ? c->jitter * nn_rng_uniform_d(&s->net) : 0.0;
        int rc = deliver(s, i, t, done + c->latency + jitter);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- the slowest-peer watermark ------------------------------------------- */

static int rejoin(sim *s, int i);

/* A live peer finished a round (or jumped, left or came back): move the watermark. */
static void watermark_advance(sim *s)
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
                !s->p[c->rejoin[k].peer].churned && rejoin(s, c->rejoin[k].peer) == 0)
                s->running++;
    }
}

static void move_round(sim *s, long from, long to)
{
    s->at_round[from]--;
    s->at_round[to]++;
}

/* ---- connections ---------------------------------------------------------------- */

static int gone(const sim_peer *p) { return p->state == P_CRASHED || p->exited; }

/* Tell every neighbour of i, one latency from now, that i's connection
 * broke (kind EV_DOWN) or is up (EV_UP), as TCP would. */
static void tell_neighbours(sim *s, int i, int kind)
{
    const gsp_pace *pc = &s->p[i].e.rp.pace;
    for (int k = 0; k < pc->n_nb; k++) {
        int q = pc->nb[k].peer;
        if (gone(&s->p[q]))
            continue;
        sim_queue_push(&s->q, s->now + s->c->latency, kind, q, i);
        if (kind == EV_UP) /* and i sees q */
            sim_queue_push(&s->q, s->now + s->c->latency, EV_UP, i, q);
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

static void crash(sim *s, int i)
{
    sim_peer *p = &s->p[i];
    p->state = P_CRASHED;
    s->r->messages_lost += (uint64_t)engine_crash(&p->e);
    s->r->crashes++;
    s->at_round[p->e.rp.g.round]--;
    tell_neighbours(s, i, EV_DOWN);
    watermark_advance(s);
}

/* Back with the state it had at the crash (as if checkpointed every
 * round), as a new process (engine_restart). The pacing policy then
 * catches it up with the run. */
static int rejoin(sim *s, int i)
{
    sim_peer *p = &s->p[i];
    int rc = engine_restart(&p->e, p->e.rp.g.incarnation + 1, s->now);
    if (rc < 0)
        return rc;
    p->state = P_WAITING;
    p->wake_at = -1;
    s->r->resumes++;
    s->at_round[p->e.rp.g.round]++;
    tell_neighbours(s, i, EV_UP);
    sim_queue_push(&s->q, s->now + s->c->latency, EV_RELEASE, i, 0);
    return 0;
}

/* --churn F[:D]: each peer alternates between up and down; down periods
 * last D seconds on average and up periods D (1 - F) / F, both exponential,
 * so that a fraction F of the peers is down at any time. */
static double churn_wait(sim *s, int down)
{
    const sim_config *c = s->c;
    double d = c->churn_down > 0 ? c->churn_down : 4 * c->dead_timeout;
    double mean = down ? d : d * (1 - c->churn) / c->churn;
    return -mean * log(1.0 - nn_rng_uniform_d(&s->churn));
}

static int churn(sim *s, int i)
{
    sim_peer *p = &s->p[i];
    if (p->state == P_DONE || p->exited)
        return 0;
    if (p->state == P_CRASHED) {
        if (!p->churned)
            return 0; /* crashed for good by --crash */
        p->churned = 0;
        int rc = rejoin(s, i);
        sim_queue_push(&s->q, s->now + churn_wait(s, 0), EV_CHURN, i, 0);
        return rc;
    }
    p->churned = 1;
    crash(s, i); /* its step in progress dies with it */
    sim_queue_push(&s->q, s->now + churn_wait(s, 1), EV_CHURN, i, 0);
    return 0;
}

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
    round_peer *rp = &p->e.rp;
    const long steps = rp->steps;
    float loss = round_step(rp, s->c->averaging_only ? NULL : &s->model);
    if (rp->steps > steps) {
        s->epoch_loss += loss, s->epoch_steps++;
        s->r->local_steps += rp->steps - steps;
    }
    p->state = P_COMPUTING;
    sim_queue_push(&s->q, s->now + (double)(rp->steps - steps) * step_time(s, p), EV_STEP_DONE, i, ++p->step_id);
}

/* At a round boundary: a crash or a stop scheduled for this round, or on. */
static int boundary(sim *s, int i, int *advanced)
{
    sim_peer *p = &s->p[i];
    const long round = p->e.rp.g.round;
    int k;
    if (fault_at(s->c->crash, s->c->n_crash, s->crash_fired, i, round) >= 0) {
        s->running--;
        crash(s, i);
        return 0;
    }
    if ((k = fault_at(s->c->stop, s->c->n_stop, s->stop_fired, i, round)) >= 0) {
        /* SIGSTOP: frozen, its connections up; what reaches it waits. */
        p->stopped_until = s->now + s->c->stop[k].seconds;
        s->r->stops++;
        sim_queue_push(&s->q, p->stopped_until, EV_RESUME, i, 0);
        return 0;
    }
    engine_advance(&p->e, s->now);
    *advanced = 1;
    return 0;
}

/* After every input to peer i's engine: carry its frames over the link
 * model, follow its round for the watermark, act on its events, and wake it
 * when it asked. */
static int pump(sim *s, int i, long round_before)
{
    sim_peer *p = &s->p[i];
    engine *e = &p->e;
    for (int again = 1; again && !gone(p);) {
        again = 0;
        engine_send t;
        while (engine_poll_send(e, &t)) {
            int rc = transmit(s, i, &t);
            if (rc < 0)
                return rc;
        }
        if (e->rp.g.round != round_before && p->state != P_CRASHED) {
            move_round(s, round_before, e->rp.g.round);
            round_before = e->rp.g.round;
            watermark_advance(s);
        }
        engine_event v;
        while (!gone(p) && engine_poll_event(e, &v)) {
            int rc = 0;
            switch (v.kind) {
            case ENGINE_STEP:
                compute(s, i);
                break;
            case ENGINE_BOUNDARY:
                s->last_step = s->now;
                p->state = P_WAITING;
                rc = boundary(s, i, &again);
                break;
            case ENGINE_DONE:
                p->state = P_DONE;
                s->running--;
                break;
            case ENGINE_FINISHED:
                if (v.rc == -EDOM || v.rc == -ENOMEM)
                    return v.rc;
                if (v.rc < 0) { /* nothing to join: gone for good */
                    if (p->state != P_DONE)
                        s->running--;
                    crash(s, i);
                    break;
                }
                p->exited = 1;
                tell_neighbours(s, i, EV_DOWN);
                break;
            case ENGINE_LOG:
                break;
            }
            if (rc < 0)
                return rc;
        }
    }
    if (!gone(p)) {
        double t = engine_wake_at(e, s->now);
        if (isfinite(t))
            wake_at(s, i, t);
    }
    return 0;
}

static int arrive(sim *s, int j, long slot)
{
    sim_peer *p = &s->p[j];
    sim_frame *f = &s->flight[slot];
    engine *e = &p->e;
    const long round = e->rp.g.round;
    if (gone(p)) {
        s->r->messages_lost += f->s.kind == ENGINE_PUSH;
        flight_release(s, slot, 1);
        return 0;
    }
    const int q = f->src;
    int rc = 0;
    switch (f->s.kind) {
    case ENGINE_PUSH:
        rc = engine_push(e, &f->s.msg, s->now); /* the inbox takes over the payload */
        flight_release(s, slot, 0);
        return rc < 0 ? rc : pump(s, j, round);
    case ENGINE_ACK:
        engine_ack(e, q, f->s.seq, s->now);
        break;
    case ENGINE_NACK:
        engine_nack(e, q, s->now);
        break;
    case ENGINE_HEARTBEAT:
        engine_heartbeat(e, q, f->s.round, s->now);
        break;
    case ENGINE_GOODBYE:
        engine_goodbye(e, q, f->s.done, s->now);
        break;
    case ENGINE_MODEL_REQUEST:
        engine_model_request(e, q, s->now);
        break;
    case ENGINE_MODEL:
        engine_model(e, q, f->s.round, f->model, 1, s->now);
        break;
    }
    flight_release(s, slot, 1);
    return pump(s, j, round);
}

/* ---- set-up ------------------------------------------------------------------- */

/* Estimate of one local step: 6 flops per parameter and sample (forward and
 * backward of the dense layers) at 50 GFLOP/s, about what one core here does
 * for mlp:256 at batch 8 (measured: 0.16 ms a step). Deterministic on purpose:
 * a measured time would make the event order, and so the result, vary by run. */
static double estimate_step_seconds(size_t params, int batch) { return 6.0 * (double)params * batch / 5e10; }

/* The median of a few timed gradient steps on the first rows of the data. */
static double measure_step_seconds(sim *s, const nn_dataset *train)
{
    enum { REPS = 15 };
    int B = s->plan.per_batch < train->n ? s->plan.per_batch : train->n;
    double t[REPS];
    nn_model_grad(&s->model, train->x, train->y, B, NULL); /* warm caches */
    for (int k = 0; k < REPS; k++) {
        double t0 = clock_now();
        nn_model_grad(&s->model, train->x, train->y, B, NULL);
        t[k] = clock_now() - t0;
    }
    for (int i = 1; i < REPS; i++) /* insertion sort: 15 values */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1], t[j - 1] = x;
        }
    return t[REPS / 2];
}

/* What the run will hold once every edge of the schedule is in use (edges
 * are made at first use), estimated before anything is allocated: refused
 * when that is more than this machine's memory (it would swap for hours or
 * be killed), noted when more than what is free now. A peer holds x and z,
 * with a codec v and the origin, its optimizer's state (and the outer
 * one's), its shard, and per edge its totals (double) and with a codec its
 * reference (gossip/gsp.h); the model engine and the data are shared. */
static int fits(const sim *s, const nn_dataset *train, char *err, size_t errlen)
{
    const sim_config *c = s->c;
    const double dim = (double)s->model.n_params, f = sizeof(float);
    const int codec = c->codec != NULL, outer = c->outer && c->outer->lr > 0;
    const double opt = c->train.optimizer == NN_OPT_ADAMW ? 2 : 1;
    double need = (double)(s->model.bytes + nn_dataset_bytes(train) + nn_dataset_bytes(s->test)), edges = 0;
    long n_edges = 0;
    for (int i = 0; i < c->n_peers; i++) {
        int n_out, n_in;
        if (topo_degree(c->topology, i, &n_out, &n_in) < 0)
            return -ENOMEM;
        n_edges += n_out + n_in;
        edges += (n_out + n_in) * dim * (sizeof(double) + (codec ? f : 0));
        need += dim * f * (2 + (codec ? 2 : 0) + opt + (outer ? 2 : 0)) + (double)nn_dataset_bytes(train) / c->n_peers;
    }
    need += edges;
    const double total = (double)mem_total(), avail = (double)mem_available();
    char what[320];
    snprintf(what, sizeof what,
             "%d peers of %.0f parameters would hold about %.1f GB (a peer %.2f GB, of which its %.1f edges' "
             "references and totals %.2f GB)",
             c->n_peers, dim, need / 1e9, need / c->n_peers / 1e9, (double)n_edges / c->n_peers,
             edges / c->n_peers / 1e9);
    if (total > 0 && need > total) {
        snprintf(err, errlen, "%s; this machine has %.1f GB: fewer peers, a smaller model or a topology with fewer "
                              "edges (ring) would fit",
                 what, total / 1e9);
        return -ENOMEM;
    }
    if (avail > 0 && need > avail)
        fprintf(stderr, "sgp sim: note: %s, %.1f GB is available now\n", what, avail / 1e9);
    return 0;
}

static int setup(sim *s, const sim_config *c, const nn_dataset *train, char *err, size_t errlen)
{
    const int n = c->n_peers;
    int rc = train_opts_model(&c->train, train, s->plan.per_batch > 256 ? s->plan.per_batch : 256, &s->model, err,
                              errlen);
    if (rc < 0)
        return rc;
    const size_t dim = s->model.n_params;
    s->step_seconds = c->averaging_only                           ? 0.0
                      : c->compute_seconds >= 0                     ? c->compute_seconds
                      : c->compute_seconds == SIM_COMPUTE_MEASURED ? measure_step_seconds(s, train)
                                                                    : estimate_step_seconds(dim, s->plan.per_batch);
    s->r->step_seconds = s->step_seconds;
    /* Round timeout: generous next to a round's compute and transfer, so it
     * only fires for lost messages and dead peers, never for mere slowness. */
    double transfer = c->bandwidth > 0 ? 4.0 * dim / c->bandwidth : 0.0; /* an fp32 message */
    s->rc = (round_config){.train = &c->train, .topology = c->topology, .n_peers = n, .shard_alpha = c->shard_alpha,
                           .tau = c->tau, .codec = c->codec, .step = c->step, .codec_warmup = c->codec_warmup,
                           .alone_wait = c->alone_wait, .outer = c->outer,
                           .dead_timeout = c->dead_timeout, .round_deadline = c->round_deadline,
                           .round_timeout = c->round_timeout > 0 ? c->round_timeout
                                                                 : 20.0 * (s->plan.local_steps * s->step_seconds + transfer + c->latency) + 1e-3};
    if ((rc = fits(s, train, err, errlen)) < 0)
        return rc;
    s->p = calloc((size_t)n, sizeof *s->p);
    s->link_free = calloc((size_t)n * n, sizeof *s->link_free);
    s->at_round = calloc((size_t)s->plan.total_rounds + 2, sizeof *s->at_round);
    s->r->average_model = calloc(dim, sizeof(float));
    float *x0 = malloc(dim * sizeof(float));
    if (!s->p || !s->link_free || !s->at_round || !s->r->average_model || !x0) {
        free(x0);
        snprintf(err, errlen, "out of memory for %d peers", n);
        return -ENOMEM;
    }
    memcpy(x0, s->model.params, dim * sizeof(float));
    for (int i = 0; i < n; i++) {
        sim_peer *p = &s->p[i];
        p->slow = c->slow ? c->slow[i] : 1.0;
        p->stopped_until = -1, p->wake_at = -1;
        nn_rng_seed(&p->speed, c->train.seed, 0x7370656564ULL + (uint64_t)i);
        if (c->averaging_only) { /* different starting points, or there is nothing to average */
            nn_model_init_params(&s->model, c->train.seed + 0x9e3779b9ULL * (uint64_t)(i + 1));
            memcpy(x0, s->model.params, dim * sizeof(float));
        }
        rc = engine_init(&p->e, &s->rc, &s->plan, i, train, x0, dim, 0.0, err, errlen);
        if (rc < 0) {
            free(x0);
            return rc;
        }
    }
    free(x0);
    if (c->averaging_only && (s->mass0 = calloc(dim, sizeof(double))))
        for (int i = 0; i < n; i++)
            for (size_t d = 0; d < dim; d++)
                s->mass0[d] += s->p[i].e.rp.g.x[d];
    s->at_round[0] = n;
    s->running = n;
    nn_rng_seed(&s->net, c->train.seed, 0x6e6574ULL);
    nn_rng_seed(&s->churn, c->train.seed, 0x636875726eULL);
    /* Every connection is up from the start, as after the round-0 barrier. */
    for (int i = 0; i < n; i++) {
        const gsp_pace *pc = &s->p[i].e.rp.pace;
        for (int k = 0; k < pc->n_nb; k++)
            engine_link_up(&s->p[i].e, pc->nb[k].peer, 0.0);
        if (c->churn > 0)
            sim_queue_push(&s->q, churn_wait(s, 0), EV_CHURN, i, 0);
    }
    return 0;
}

static void teardown(sim *s)
{
    for (int i = 0; s->p && i < s->c->n_peers; i++)
        engine_free(&s->p[i].e);
    sim_event e;
    while (sim_queue_pop(&s->q, &e))
        if (e.kind == EV_ARRIVE)
            flight_release(s, e.arg, 1);
    sim_queue_free(&s->q);
    free(s->flight);
    free(s->free_slots);
    free(s->p);
    free(s->link_free);
    free(s->at_round);
    free(s->mass0);
    nn_model_free(&s->model);
}

/* After the last round: the shares still in flight go to live peers, then
 * every inbox in (sender, seq) order: the average model is of all the mass
 * the live peers hold (only lost messages' shares are missing). */
static void finish(sim *s)
{
    sim_event e;
    while (sim_queue_pop(&s->q, &e)) {
        if (e.kind != EV_ARRIVE)
            continue;
        sim_frame *f = &s->flight[e.arg];
        if (f->s.kind == ENGINE_PUSH && s->p[e.peer].state != P_CRASHED &&
            round_inbox_put(&s->p[e.peer].e.rp, &f->s.msg) == 0)
            flight_release(s, e.arg, 0);
        else
            flight_release(s, e.arg, 1);
    }
    for (int i = 0; i < s->c->n_peers; i++) {
        round_peer *rp = &s->p[i].e.rp;
        if (s->p[i].state != P_CRASHED)
            round_absorb(rp, 1, NULL, NULL);
        s->r->cpu_step_seconds += rp->times.step;
        s->r->cpu_gossip_seconds += rp->times.gossip;
    }
    sim_final_report(s);
}

void sim_config_defaults(sim_config *c)
{
    memset(c, 0, sizeof *c);
    train_opts_defaults(&c->train);
    c->n_peers = 8;
    c->compute_seconds = SIM_COMPUTE_ESTIMATE;
    c->latency = 1e-4;
    c->bandwidth = 1.25e8; /* 1 Gbit/s */
    c->dead_timeout = 1.0;
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
    engine *g = &p->e;
    const long round = g->rp.g.round;
    int advanced = 0, rc = 0;
    if (deferred(s, e))
        return 0;
    if (e->kind == EV_ARRIVE)
        return arrive(s, e->peer, e->arg);
    if (e->kind == EV_CHURN)
        return churn(s, e->peer);
    if (gone(p))
        return 0;
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
        if (gone(&s->p[e->arg]))
            return 0;
        engine_link_up(g, (int)e->arg, s->now);
        break;
    case EV_DOWN:
        engine_link_down(g, (int)e->arg, s->now);
        break;
    case EV_RESUME:
        p->stopped_until = -1;
        rc = boundary(s, e->peer, &advanced);
        break;
    case EV_RELEASE:
        rc = boundary(s, e->peer, &advanced);
        break;
    }
    return rc < 0 ? rc : pump(s, e->peer, round);
}

/* Every peer's memory by part, the shared model engine and data sets, and the
 * messages in flight, when the last round is done (before finish drains them). */
static void measure_memory(sim *s, const nn_dataset *train)
{
    mem_parts *m = &s->r->memory;
    *m = (mem_parts){.model = s->model.bytes, .data = nn_dataset_bytes(train) + nn_dataset_bytes(s->test),
                     .in_flight = (size_t)s->cap_flight * (sizeof *s->flight + sizeof *s->free_slots)};
    for (int i = 0; i < s->c->n_peers; i++)
        round_memory(&s->p[i].e.rp, m);
    for (size_t k = 0; k < s->q.n; k++) /* the slots in use: those an arrival is pending for */
        if (s->q.heap[k].kind == EV_ARRIVE)
            m->in_flight += frame_bytes(&s->flight[s->q.heap[k].arg]);
    mem_measure(m);
}

int sim_run(const sim_config *c, const nn_dataset *train, const nn_dataset *test, sim_result *r, char *err,
            size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (c->n_peers < 1 || !c->topology || c->topology->n_peers != c->n_peers) {
        snprintf(err, errlen, "the topology is for %d peers, the simulation has %d",
                 c->topology ? c->topology->n_peers : 0, c->n_peers);
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
    round_plan_make(&s.plan, &c->train, train->n, c->n_peers, c->local_steps);
    progress_init(&s.bar, c->progress ? c->progress : stdout, c->progress ? c->progress_bar : 0);
    int rc = setup(&s, c, train, err, errlen);
    for (int i = 0; rc == 0 && i < c->n_peers; i++) { /* round 0 starts from the hold engine_init leaves */
        int advanced = 0;
        if ((rc = boundary(&s, i, &advanced)) == 0)
            rc = pump(&s, i, 0);
    }
    sim_event e;
    /* Until no peer can do anything more: every live one done and nobody
     * down that will come back. */
    while (rc == 0 && s.running > 0 && sim_queue_pop(&s.q, &e)) {
        s.now = e.t;
        rc = dispatch(&s, &e);
    }
    if (rc == 0)
        measure_memory(&s, train);
    if (rc == -EDOM)
        snprintf(err, errlen, "the model diverged (NaN or infinity in the parameters): try a lower --lr or --clip");
    else if (rc < 0 && !*err) /* (set-up says what failed itself) */
        snprintf(err, errlen, "simulation failed: %s", strerror(-rc));
    else if (rc == 0)
        finish(&s);
    progress_clear(&s.bar);
    teardown(&s);
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
