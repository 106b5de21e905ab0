/* The simulator's set-up: the model, the time of a step, whether the run
 * fits this machine, every peer's engine, and the teardown. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gsp_pool.h"
#include "peer/core/clock.h"
#include "peer/sim/sim_engine.h"

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
 * its optimizer's state (and the outer one's), its shard, and per edge its
 * reference with a codec, its totals (double) without (gossip/gsp.h); the
 * model engine, the data, the codec's scratch (one peer computes at a time)
 * and the origin (unless the peers start apart) are shared. */
static int fits(const sim *s, const nn_dataset *train, char *err, size_t errlen)
{
    const sim_config *c = s->c;
    const double dim = (double)s->model.n_params, f = sizeof(float);
    const int codec = c->peer.codec != NULL, outer = c->peer.outer && c->peer.outer->lr > 0;
    const double opt = c->peer.train.optimizer == NN_OPT_ADAMW ? 2 : 1;
    double need = (double)(s->model.bytes + nn_dataset_bytes(train) + nn_dataset_bytes(s->test)), edges = 0;
    long n_edges = 0;
    for (int i = 0; i < c->peer.n_peers; i++) {
        int n_out, n_in;
        if (topo_degree(c->peer.topology, i, &n_out, &n_in) < 0)
            return -ENOMEM;
        n_edges += n_out + n_in;
        edges += (n_out + n_in) * dim * (codec ? f : sizeof(double));
        need += dim * f * (2 + opt + (outer ? 2 : 0)) + (double)nn_dataset_bytes(train) / c->peer.n_peers;
    }
    if (codec) /* v, shared (gsp_share_scratch); the origin: shared (gsp_share_origin), or each peer's own */
        need += dim * f * (1 + (c->averaging_only ? c->peer.n_peers : 1));
    need += edges;
    const double total = (double)mem_total(), avail = (double)mem_available();
    char what[320];
    snprintf(what, sizeof what,
             "%d peers of %.0f parameters would hold about %.1f GB (a peer %.2f GB, of which its %.1f edges' "
             "%s %.2f GB)",
             c->peer.n_peers, dim, need / 1e9, need / c->peer.n_peers / 1e9, (double)n_edges / c->peer.n_peers,
             codec ? "references" : "totals", edges / c->peer.n_peers / 1e9);
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

int sim_setup(sim *s, const sim_config *c, const nn_dataset *train, char *err, size_t errlen)
{
    const int n = c->peer.n_peers;
    int rc = train_opts_model(&c->peer.train, train, nn_eval_batch(s->plan.per_batch, train->text ? train->w : 0),
                              &s->model, err, errlen);
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
    s->settings = c->peer;
    s->settings.share_origin = !c->averaging_only; /* (s->x0 is every peer's start, kept to the end) */
    s->settings.share_scratch = &s->scratch;        /* one event at a time: one peer computes at once */
    const int threads = c->peer.gossip_threads > 0 ? c->peer.gossip_threads : gsp_pool_auto();
    if ((rc = gsp_pool_new(&s->pool, threads)) < 0) {
        snprintf(err, errlen, "cannot start %d gossip threads: %s", threads, strerror(-rc));
        return rc;
    }
    s->settings.pool = s->pool;
    if (s->settings.round_timeout <= 0)
        s->settings.round_timeout = 20.0 * (s->plan.local_steps * s->step_seconds + transfer + c->latency) + 1e-3;
    if ((rc = fits(s, train, err, errlen)) < 0)
        return rc;
    s->p = calloc((size_t)n, sizeof *s->p);
    s->link_free = calloc((size_t)n * n, sizeof *s->link_free);
    s->at_round = calloc((size_t)s->plan.total_rounds + 2, sizeof *s->at_round);
    s->r->average_model = calloc(dim, sizeof(float));
    float *x0 = s->x0 = malloc(dim * sizeof(float));
    s->train = train;
    if (!s->p || !s->link_free || !s->at_round || !s->r->average_model || !x0) {
        snprintf(err, errlen, "out of memory for %d peers", n);
        return -ENOMEM;
    }
    memcpy(x0, s->model.params, dim * sizeof(float));
    for (int i = 0; i < n; i++) {
        sim_peer *p = &s->p[i];
        p->slow = c->slow ? c->slow[i] : 1.0;
        p->stopped_until = -1, p->wake_at = -1;
        nn_rng_seed(&p->speed, c->peer.train.seed, 0x7370656564ULL + (uint64_t)i);
        if (c->averaging_only) { /* different starting points, or there is nothing to average */
            nn_model_init_params(&s->model, c->peer.train.seed + 0x9e3779b9ULL * (uint64_t)(i + 1));
            memcpy(x0, s->model.params, dim * sizeof(float));
        }
        rc = engine_new(&p->e, &s->settings, &s->plan, i, train, x0, dim, 0, 0.0, err, errlen);
        if (rc < 0)
            return rc;
        if (!(p->held = calloc((size_t)engine_pace(p->e)->n_nb * SIM_LINK_SLOTS + 1, sizeof *p->held))) {
            snprintf(err, errlen, "out of memory for %d peers", n);
            return -ENOMEM;
        }
    }
    nn_model_drop_params(&s->model); /* x0 keeps the start; steps and evaluations pass their parameters */
    /* A vacant slot (--admit) has no process until a host takes it: its
     * engine (made above, replaced at the admission) holds nothing of the
     * run, and nobody connects to it. */
    int vacant = 0;
    for (int k = 0; k < c->n_admit; k++) {
        sim_peer *p = &s->p[c->admit[k].peer];
        p->vacant = 1, p->state = P_CRASHED;
        (void)engine_crash(p->e);
        vacant++;
    }
    if (c->averaging_only && (s->mass0 = calloc(dim, sizeof(double))))
        for (int i = 0; i < n; i++)
            for (size_t d = 0; d < dim && !s->p[i].vacant; d++)
                s->mass0[d] += engine_gossip(s->p[i].e)->x[d];
    s->at_round[0] = n - vacant;
    s->running = n - vacant;
    s->r->slots_vacant = vacant;
    nn_rng_seed(&s->net, c->peer.train.seed, 0x6e6574ULL);
    nn_rng_seed(&s->churn, c->peer.train.seed, 0x636875726eULL);
    /* Every connection is up from the start, as after the round-0 barrier;
     * a vacant slot is routed around from the start, as sgp peer marks it
     * (peer/net/node.c: engine_absent). */
    for (int i = 0; i < n; i++) {
        const gsp_pace *pc = engine_pace(s->p[i].e);
        for (int q = 0; q < n && !s->p[i].vacant; q++)
            if (q != i && s->p[q].vacant)
                engine_absent(s->p[i].e, q);
        for (int k = 0; k < pc->n_nb && !s->p[i].vacant; k++)
            if (!s->p[pc->nb[k].peer].vacant)
                engine_link_up(s->p[i].e, pc->nb[k].peer, 0.0);
        if (c->churn > 0)
            sim_queue_push(&s->q, sim_churn_wait(s, 0), EV_CHURN, i, 0);
    }
    for (int k = 0; k < c->n_cut; k++) {
        sim_queue_push(&s->q, c->cut[k].at, EV_CUT, 0, k);
        sim_queue_push(&s->q, c->cut[k].at + c->cut[k].seconds, EV_HEAL, 0, k);
    }
    return 0;
}

void sim_teardown(sim *s)
{
    for (int i = 0; s->p && i < s->c->peer.n_peers; i++)
        engine_free(s->p[i].e);
    sim_event e;
    while (sim_queue_pop(&s->q, &e))
        if (e.kind == EV_ARRIVE)
            sim_flight_release(s, e.arg, 1);
    sim_queue_free(&s->q);
    free(s->flight);
    free(s->free_slots);
    for (int i = 0; s->p && i < s->c->peer.n_peers; i++)
        free(s->p[i].held);
    free(s->p);
    free(s->link_free);
    free(s->at_round);
    free(s->mass0);
    free(s->x0);
    gsp_scratch_free(&s->scratch);
    gsp_pool_free(s->pool);
    s->pool = NULL;
    nn_model_free(&s->model);
}
