/* The simulator engine: peers, messages and faults on a virtual clock.
 * The time model is documented in sim.h; the gossip and training arithmetic
 * is the real one (gossip/gsp.c, peer/core/sgp_step.c, nn/). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_model.h"
#include "nn/nn_rng.h"
#include "peer/core/clock.h"
#include "peer/store/progress.h"
#include "peer/core/sgp_step.h"
#include "peer/sim/sim.h"
#include "peer/sim/sim_queue.h"

enum { EV_STEP_DONE, EV_ARRIVE, EV_DEATH_KNOWN, EV_WAKE, EV_NACK };
enum { P_WAITING, P_COMPUTING, P_CRASHED, P_DONE };


typedef struct sim_peer {
    gsp_peer g;
    sgp_local local;
    nn_dataset shard;
    int state;
    double slow;
    float last_loss;
    gsp_msg *inbox; /* arrived, not yet absorbed */
    int n_inbox, cap_inbox;
    cmp_spec codec; /* this peer's copy: sparsity warm-up changes its fraction by round */
    int forced;     /* the round timeout fired: start without waiting for messages */
} sim_peer;

typedef struct sim {
    const sim_config *c;
    const nn_dataset *test;
    nn_model model;
    sim_peer *p;
    uint8_t *alive; /* what every peer believes: cleared dead_timeout after a crash */
    sim_queue q;
    gsp_msg *flight; /* messages in flight, by slot */
    int *free_slots, n_free, cap_flight;
    double *link_free; /* n*n: when link i -> j is next idle */
    nn_rng net;
    double now, last_step, step_seconds, round_timeout;
    long rounds_per_epoch, total_rounds;
    long *at_round; /* live peers per completed round count, for the slowest-peer watermark */
    long slowest;
    int per_batch;
    double epoch_loss;
    long epoch_steps;
    double *mass0; /* averaging-only: total x at the start (double), for the mass check */
    progress bar;
    double wall0;
    sim_result *r;
} sim;

/* ---- messages in flight -------------------------------------------------- */

static long flight_put(sim *s, const gsp_msg *m)
{
    if (s->n_free == 0) {
        int nc = s->cap_flight ? 2 * s->cap_flight : 256;
        gsp_msg *f = realloc(s->flight, (size_t)nc * sizeof *f);
        int *fs = f ? realloc(s->free_slots, (size_t)nc * sizeof *fs) : NULL;
        if (!f || !fs) {
            if (f)
                s->flight = f;
            return -ENOMEM;
        }
        s->flight = f, s->free_slots = fs;
        for (int i = nc - 1; i >= s->cap_flight; i--)
            s->free_slots[s->n_free++] = i;
        s->cap_flight = nc;
    }
    int slot = s->free_slots[--s->n_free];
    if (gsp_msg_copy(&s->flight[slot], m) < 0) {
        s->n_free++;
        return -ENOMEM;
    }
    return slot;
}

static void flight_release(sim *s, long slot, int freed_payload)
{
    if (freed_payload)
        gsp_msg_free(&s->flight[slot]);
    s->free_slots[s->n_free++] = (int)slot;
}

/* ---- the slowest-peer watermark, epochs and logging ----------------------- */

static double consensus_distance(sim *s, float *avg);

static void average_model(sim *s, float *avg)
{
    const size_t dim = s->model.n_params;
    double w = 0;
    double *acc = calloc(dim, sizeof *acc);
    for (int i = 0; i < s->c->n_peers; i++) {
        if (s->p[i].state == P_CRASHED)
            continue;
        for (size_t d = 0; d < dim; d++)
            acc[d] += s->p[i].g.x[d];
        w += s->p[i].g.w;
    }
    for (size_t d = 0; d < dim; d++)
        avg[d] = (float)(acc[d] / w);
    free(acc);
}

static double consensus_distance(sim *s, float *avg)
{
    const size_t dim = s->model.n_params;
    double norm = 0, sum = 0;
    int live = 0;
    for (size_t d = 0; d < dim; d++)
        norm += (double)avg[d] * avg[d];
    for (int i = 0; i < s->c->n_peers; i++) {
        if (s->p[i].state == P_CRASHED)
            continue;
        const float *z = gsp_debias(&s->p[i].g);
        double e = 0;
        for (size_t d = 0; d < dim; d++)
            e += ((double)z[d] - avg[d]) * ((double)z[d] - avg[d]);
        sum += e, live++;
    }
    return live && norm > 0 ? sum / live / norm : 0.0;
}

static float mean_last_loss(const sim *s)
{
    double sum = 0;
    int n = 0;
    for (int i = 0; i < s->c->n_peers; i++)
        if (s->p[i].state != P_CRASHED)
            sum += s->p[i].last_loss, n++;
    return n ? (float)(sum / n) : 0.0f;
}

static void epoch_report(sim *s, long epoch)
{
    const sim_config *c = s->c;
    float *avg = s->r->average_model;
    average_model(s, avg);
    float loss, acc;
    nn_model_evaluate(&s->model, avg, s->test, &loss, &acc);
    double cd = consensus_distance(s, avg);
    s->r->train_loss = s->epoch_steps ? (float)(s->epoch_loss / s->epoch_steps) : 0.0f;
    progress_clear(&s->bar);
    if (c->progress) {
        fprintf(c->progress,
                "epoch %3ld/%ld  loss %.4f  test (average model) %6.2f%%  consensus %.2e  %.1f MB sent  "
                "sim %.2fs  wall %.1fs\n",
                epoch, c->train.epochs, s->r->train_loss, 100 * acc, cd, s->r->bytes_sent / 1e6, s->now,
                clock_now() - s->wall0);
        fflush(c->progress);
    }
    s->epoch_loss = 0, s->epoch_steps = 0;
}

static void log_round(sim *s, long round)
{
    const sim_config *c = s->c;
    if (!c->log)
        return;
    float *avg = s->r->average_model;
    average_model(s, avg);
    fprintf(c->log, "%ld,%.6f,%.6f,%.6e,%llu,%llu\n", round, s->now, mean_last_loss(s), consensus_distance(s, avg),
            (unsigned long long)s->r->bytes_sent, (unsigned long long)s->r->messages_lost);
}

static void try_start(sim *s, int i);

/* A live peer finished a round (or left/rejoined): move the watermark. */
static void watermark_advance(sim *s)
{
    const sim_config *c = s->c;
    while (s->slowest < s->total_rounds && s->at_round[s->slowest] == 0) {
        s->slowest++;
        log_round(s, s->slowest);
        if (s->slowest % s->rounds_per_epoch == 0 || s->slowest == s->total_rounds)
            epoch_report(s, (s->slowest + s->rounds_per_epoch - 1) / s->rounds_per_epoch);
        else if (c->progress && s->bar.enabled) {
            char text[96];
            snprintf(text, sizeof text, "round %ld/%ld  loss %.4f", s->slowest, s->total_rounds, mean_last_loss(s));
            progress_update(&s->bar, s->slowest, s->total_rounds, text);
        }
        for (int k = 0; k < c->n_rejoin; k++) {
            int i = c->rejoin[k].peer;
            if (c->rejoin[k].round == s->slowest && s->p[i].state == P_CRASHED) {
                /* Back with the state it had; it enters at the current round so it
                 * neither holds the others back nor replays rounds. */
                s->p[i].state = P_WAITING;
                s->alive[i] = 1;
                if (s->p[i].g.round < s->slowest)
                    s->p[i].g.round = s->slowest;
                s->p[i].g.since = s->p[i].g.round; /* the missed rounds' messages never come */
                s->at_round[s->p[i].g.round]++;
                sim_queue_push(&s->q, s->now + s->round_timeout, EV_WAKE, i, s->p[i].g.round);
                try_start(s, i);
            }
        }
    }
}

/* ---- peers ------------------------------------------------------------------ */

static int cmp_msg(const void *a, const void *b)
{
    const gsp_msg *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Absorb what has arrived, in (sender, seq) order; with tau = 0 only messages
 * of earlier rounds, so a synchronous run does not depend on arrival order. */
static void absorb_inbox(sim *s, sim_peer *p)
{
    if (p->n_inbox == 0)
        return; /* (an empty inbox may still be a NULL pointer, which qsort must not get) */
    qsort(p->inbox, (size_t)p->n_inbox, sizeof *p->inbox, cmp_msg);
    int kept = 0;
    for (int k = 0; k < p->n_inbox; k++) {
        gsp_msg *m = &p->inbox[k];
        if (s->c->tau == 0 && m->round >= p->g.round) {
            p->inbox[kept++] = *m;
            continue;
        }
        if (gsp_absorb(&p->g, m) == GSP_NEED_SYNC) /* tell the sender, over the reverse link */
            sim_queue_push(&s->q, s->now + s->c->latency, EV_NACK, m->src, p->g.id);
        gsp_msg_free(m);
    }
    p->n_inbox = kept;
}

static int crash_due(const sim *s, int i, long round)
{
    for (int k = 0; k < s->c->n_crash; k++)
        if (s->c->crash[k].peer == i && s->c->crash[k].round == round)
            return 1;
    return 0;
}

static void crash(sim *s, int i)
{
    sim_peer *p = &s->p[i];
    p->state = P_CRASHED;
    for (int k = 0; k < p->n_inbox; k++)
        gsp_msg_free(&p->inbox[k]);
    s->r->messages_lost += (uint64_t)p->n_inbox;
    p->n_inbox = 0;
    s->at_round[p->g.round]--;
    sim_queue_push(&s->q, s->now + s->c->dead_timeout, EV_DEATH_KNOWN, i, 0);
    watermark_advance(s);
}

static void try_start(sim *s, int i)
{
    sim_peer *p = &s->p[i];
    if (p->state != P_WAITING)
        return;
    if (p->g.round >= s->total_rounds) {
        p->state = P_DONE;
        return;
    }
    if (crash_due(s, i, p->g.round)) {
        crash(s, i);
        return;
    }
    if (!p->forced && !gsp_ready_with(&p->g, s->c->topology, s->alive, p->inbox, p->n_inbox))
        return; /* a message arrival, a death notice or the round timeout wakes it */
    p->forced = 0;
    absorb_inbox(s, p);
    const sim_config *c = s->c;
    if (!c->averaging_only) {
        float lr = nn_lr_at(&c->train.schedule, p->g.round, s->rounds_per_epoch);
        int correct, B;
        p->last_loss = sgp_local_step(&p->local, &s->model, &p->g, lr, &correct, &B);
        s->epoch_loss += p->last_loss, s->epoch_steps++;
    }
    p->state = P_COMPUTING;
    sim_queue_push(&s->q, s->now + s->step_seconds * p->slow, EV_STEP_DONE, i, p->g.round);
}

/* Sparsity warm-up (Deep Gradient Compression): in epoch e < W a sparse
 * codec sends F^((e+1)/(W+1)) of the entries instead of F, e.g. 40%, 16%,
 * 6%, 2.5% before 1% for W = 4, and the consensus step follows the fraction
 * (gsp_default_step). Fractions only shrink, so the edge buffers sized at the
 * first message stay large enough. */
static void codec_warmup(sim *s, sim_peer *p, long round)
{
    const sim_config *c = s->c;
    const char *name = c->codec->ops->name;
    int sparse = !strcmp(name, "topk") || !strcmp(name, "randk") || !strcmp(name, "stc");
    double epoch = (double)round / (double)s->rounds_per_epoch;
    if (sparse && c->codec_warmup > 0 && epoch < c->codec_warmup) {
        double e = floor(epoch), W = ceil(c->codec_warmup);
        p->codec.fraction = pow(c->codec->fraction, (e + 1) / (W + 1));
    } else
        p->codec.fraction = c->codec->fraction;
    p->g.step = c->step > 0 ? (float)c->step : gsp_default_step(&p->codec, s->model.n_params);
}

static int step_done(sim *s, int i)
{
    sim_peer *p = &s->p[i];
    const sim_config *c = s->c;
    topo_out out;
    topo_route(c->topology, p->g.round, i, s->alive, &out);
    gsp_msg msgs[TOPO_MAX_OUT];
    long round = p->g.round;
    if (c->codec && c->codec_warmup > 0)
        codec_warmup(s, p, round);
    int n = gsp_emit(&p->g, &out, msgs);
    if (n < 0)
        return n;
    for (int k = 0; k < n; k++) {
        int j = msgs[k].dst;
        const double bytes = (double)gsp_msg_bytes(&msgs[k]);
        s->r->bytes_sent += (uint64_t)bytes;
        s->r->messages_sent++;
        double *free_at = &s->link_free[(size_t)i * c->n_peers + j];
        double start = *free_at > s->now ? *free_at : s->now;
        double done = start + (c->bandwidth > 0 ? bytes / c->bandwidth : 0.0);
        *free_at = done;
        if (c->loss > 0 && nn_rng_uniform_d(&s->net) < c->loss) {
            s->r->messages_lost++;
            continue;
        }
        int copies = c->duplicate > 0 && nn_rng_uniform_d(&s->net) < c->duplicate ? 2 : 1;
        s->r->messages_duplicated += (uint64_t)(copies - 1);
        for (int copy = 0; copy < copies; copy++) {
            double jitter = c->jitter > 0 ? c->jitter * nn_rng_uniform_d(&s->net) : 0.0;
            long slot = flight_put(s, &msgs[k]);
            if (slot < 0)
                return (int)slot;
            if (sim_queue_push(&s->q, done + c->latency + jitter, EV_ARRIVE, j, slot) < 0)
                return -ENOMEM;
        }
    }
    s->at_round[round]--;
    s->at_round[round + 1]++;
    s->last_step = s->now;
    p->state = P_WAITING;
    sim_queue_push(&s->q, s->now + s->round_timeout, EV_WAKE, i, p->g.round);
    watermark_advance(s);
    try_start(s, i);
    return 0;
}

/* A receiver lost a compressed delta from i: i answers at once with a SYNC
 * of the edge (its totals and reference), over the same link model. */
static int send_sync(sim *s, int i, int j)
{
    gsp_msg m;
    if (gsp_sync_msg(&s->p[i].g, j, &m) < 0)
        return 0;
    const sim_config *c = s->c;
    double bytes = (double)gsp_msg_bytes(&m);
    s->r->bytes_sent += (uint64_t)bytes;
    s->r->messages_sent++;
    s->r->syncs++;
    double *free_at = &s->link_free[(size_t)i * c->n_peers + j];
    double start = *free_at > s->now ? *free_at : s->now;
    *free_at = start + (c->bandwidth > 0 ? bytes / c->bandwidth : 0.0);
    if (c->loss > 0 && nn_rng_uniform_d(&s->net) < c->loss) {
        s->r->messages_lost++;
        return 0;
    }
    long slot = flight_put(s, &m);
    if (slot < 0)
        return (int)slot;
    return sim_queue_push(&s->q, *free_at + c->latency, EV_ARRIVE, j, slot);
}

static int arrive(sim *s, int j, long slot)
{
    sim_peer *p = &s->p[j];
    gsp_msg *m = &s->flight[slot];
    if (p->state == P_CRASHED) {
        s->r->messages_lost++;
        flight_release(s, slot, 1);
        return 0;
    }
    if (p->n_inbox == p->cap_inbox) {
        int nc = p->cap_inbox ? 2 * p->cap_inbox : 8;
        gsp_msg *in = realloc(p->inbox, (size_t)nc * sizeof *in);
        if (!in)
            return -ENOMEM;
        p->inbox = in, p->cap_inbox = nc;
    }
    p->inbox[p->n_inbox++] = *m; /* the inbox takes over the payload */
    flight_release(s, slot, 0);
    try_start(s, j); /* a finished peer keeps its inbox for finish() to absorb in order */
    return 0;
}

/* The round timeout: a peer still waiting on the same round starts it anyway
 * (messages can be lost; running sums make up for them later). */
static void wake(sim *s, int i, long round)
{
    sim_peer *p = &s->p[i];
    if (p->state != P_WAITING || p->g.round != round || round >= s->total_rounds)
        return;
    p->forced = 1;
    try_start(s, i);
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
    int B = s->per_batch < train->n ? s->per_batch : train->n;
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

static int setup(sim *s, const sim_config *c, const nn_dataset *train, char *err, size_t errlen)
{
    const int n = c->n_peers;
    int rc = nn_model_init(&s->model, c->train.model, train->c, train->h, train->w, train->n_classes,
                           s->per_batch > 256 ? s->per_batch : 256, c->train.seed, err, errlen);
    if (rc < 0)
        return rc;
    const size_t dim = s->model.n_params;
    s->p = calloc((size_t)n, sizeof *s->p);
    s->alive = malloc((size_t)n);
    s->link_free = calloc((size_t)n * n, sizeof *s->link_free);
    s->at_round = calloc((size_t)s->total_rounds + 2, sizeof *s->at_round);
    s->r->average_model = calloc(dim, sizeof(float));
    float *x0 = malloc(dim * sizeof(float));
    if (!s->p || !s->alive || !s->link_free || !s->at_round || !s->r->average_model || !x0) {
        free(x0);
        snprintf(err, errlen, "out of memory for %d peers", n);
        return -ENOMEM;
    }
    memset(s->alive, 1, (size_t)n);
    memcpy(x0, s->model.params, dim * sizeof(float));
    for (int i = 0; i < n; i++) {
        sim_peer *p = &s->p[i];
        p->slow = c->slow ? c->slow[i] : 1.0;
        if (c->averaging_only) { /* different starting points, or there is nothing to average */
            nn_model_init_params(&s->model, c->train.seed + 0x9e3779b9ULL * (uint64_t)(i + 1));
            memcpy(x0, s->model.params, dim * sizeof(float));
        }
        int *idx = NULL, count = 0;
        rc = nn_shard_indices(train, i, n, c->shard_alpha, c->train.seed, &idx, &count);
        if (rc == 0)
            rc = nn_dataset_subset(train, idx, count, &p->shard);
        free(idx);
        if (rc == 0)
            rc = gsp_init(&p->g, i, n, dim, c->tau, x0);
        if (rc == 0 && c->codec) {
            p->codec = *c->codec;
            codec_warmup(s, p, 0); /* densest first: edge buffers are sized by the first bound */
            rc = gsp_set_codec(&p->g, &p->codec, c->train.seed ^ 0x636f646563ULL, p->g.step);
        }
        if (rc == 0)
            rc = sgp_local_init(&p->local, &c->train, &p->shard, i, s->per_batch, dim);
        if (rc < 0) {
            free(x0);
            snprintf(err, errlen, "peer %d: cannot set up (%s)", i, strerror(-rc));
            return rc;
        }
    }
    free(x0);
    if (c->averaging_only && (s->mass0 = calloc(dim, sizeof(double))))
        for (int i = 0; i < n; i++)
            for (size_t d = 0; d < dim; d++)
                s->mass0[d] += s->p[i].g.x[d];
    s->at_round[0] = n;
    nn_rng_seed(&s->net, c->train.seed, 0x6e6574ULL);
    s->step_seconds = c->averaging_only                           ? 0.0
                      : c->compute_seconds >= 0                     ? c->compute_seconds
                      : c->compute_seconds == SIM_COMPUTE_MEASURED ? measure_step_seconds(s, train)
                                                                    : estimate_step_seconds(dim, s->per_batch);
    s->r->step_seconds = s->step_seconds;
    /* Round timeout: generous next to a round's compute and transfer, so it
     * only fires for lost messages and dead peers, never for mere slowness. */
    double transfer = c->bandwidth > 0 ? 4.0 * dim / c->bandwidth : 0.0; /* an fp32 message */
    s->round_timeout = 20.0 * (s->step_seconds + transfer + c->latency) + 1e-3;
    return 0;
}

static void teardown(sim *s)
{
    for (int i = 0; s->p && i < s->c->n_peers; i++) {
        sim_peer *p = &s->p[i];
        for (int k = 0; k < p->n_inbox; k++)
            gsp_msg_free(&p->inbox[k]);
        free(p->inbox);
        gsp_free(&p->g);
        sgp_local_free(&p->local);
        nn_dataset_free(&p->shard);
    }
    sim_event e;
    while (sim_queue_pop(&s->q, &e))
        if (e.kind == EV_ARRIVE)
            gsp_msg_free(&s->flight[e.arg]);
    sim_queue_free(&s->q);
    free(s->flight);
    free(s->free_slots);
    free(s->p);
    free(s->alive);
    free(s->link_free);
    free(s->at_round);
    free(s->mass0);
    nn_model_free(&s->model);
}

/* Total mass now (peers plus in flight on every edge) against the start. */
static void mass_check(sim *s)
{
    sim_result *r = s->r;
    r->mass_error_x = r->mass_error_w = NAN;
    if (!s->mass0 || s->c->n_crash > 0)
        return;
    const int n = s->c->n_peers;
    const size_t dim = s->model.n_params;
    double *x = calloc(dim, sizeof *x), w = 0;
    if (!x)
        return;
    for (int i = 0; i < n; i++) {
        for (size_t d = 0; d < dim; d++)
            x[d] += s->p[i].g.x[d];
        w += s->p[i].g.w;
        for (int j = 0; j < n; j++)
            if (j != i)
                w += gsp_edge_pending(&s->p[i].g, &s->p[j].g, x);
    }
    double ex = 0, norm = 0;
    for (size_t d = 0; d < dim; d++)
        ex += (x[d] - s->mass0[d]) * (x[d] - s->mass0[d]), norm += s->mass0[d] * s->mass0[d];
    r->mass_error_x = norm > 0 ? sqrt(ex / norm) : sqrt(ex);
    r->mass_error_w = fabs(w - n) / n;
    free(x);
}

/* After the last round: deliver what is still in flight to live peers, then
 * evaluate the average model and every live peer's own. */
static void finish(sim *s)
{
    const sim_config *c = s->c;
    sim_event e;
    while (sim_queue_pop(&s->q, &e)) {
        if (e.kind != EV_ARRIVE)
            continue;
        gsp_msg *m = &s->flight[e.arg];
        if (s->p[e.peer].state != P_CRASHED)
            gsp_absorb(&s->p[e.peer].g, m);
        flight_release(s, e.arg, 1);
    }
    sim_result *r = s->r;
    float *avg = r->average_model;
    if (c->keep_peer_models)
        r->peer_models = calloc((size_t)c->n_peers * s->model.n_params, sizeof(float));
    /* Every message that arrived goes in first: the average model is of all
     * the mass the live peers hold (only lost messages' shares are missing). */
    for (int i = 0; i < c->n_peers; i++)
        if (s->p[i].state != P_CRASHED)
            absorb_inbox(s, &s->p[i]); /* every message is of a round before the last: all go in, sorted */
    average_model(s, avg);
    nn_model_evaluate(&s->model, avg, s->test, &r->test_loss, &r->test_accuracy);
    r->consensus_distance = consensus_distance(s, avg);
    r->test_accuracy_min = 1.0f;
    double acc_sum = 0, stale = 0, absorbed = 0;
    int live = 0;
    for (int i = 0; i < c->n_peers; i++) {
        sim_peer *p = &s->p[i];
        if (p->state == P_CRASHED)
            continue;
        float acc;
        nn_model_evaluate(&s->model, gsp_debias(&p->g), s->test, NULL, &acc);
        if (r->peer_models)
            memcpy(r->peer_models + (size_t)i * s->model.n_params, p->g.z, s->model.n_params * sizeof(float));
        r->test_accuracy_min = acc < r->test_accuracy_min ? acc : r->test_accuracy_min;
        acc_sum += acc, live++;
        stale += (double)p->g.stats.stale_sum, absorbed += (double)p->g.stats.absorbed;
        r->syncs += p->g.stats.syncs_sent; /* (scheduled ones; immediate ones are counted when sent) */
    }
    r->test_accuracy_mean = live ? (float)(acc_sum / live) : 0.0f;
    mass_check(s);
    r->mean_staleness = absorbed ? stale / absorbed : 0.0;
    r->rounds = s->slowest;
    r->simulated_seconds = s->last_step; /* not the idle round timeouts that trail it */
    r->parameters = s->model.n_params;
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

int sim_run(const sim_config *c, const nn_dataset *train, const nn_dataset *test, sim_result *r, char *err,
            size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (c->n_peers < 1 || !c->topology || c->topology->n_peers != c->n_peers) {
        snprintf(err, errlen, "the topology is for %d peers, the simulation has %d",
                 c->topology ? c->topology->n_peers : 0, c->n_peers);
        return -EINVAL;
    }
    sim s = {.c = c, .test = test, .r = r};
    s.wall0 = clock_now();
    s.per_batch = (int)(c->train.batch / c->n_peers);
    if (s.per_batch < 1)
        s.per_batch = 1;
    long per_round = (long)s.per_batch * c->n_peers;
    s.rounds_per_epoch = (train->n + per_round - 1) / per_round;
    if (s.rounds_per_epoch < 1)
        s.rounds_per_epoch = 1;
    s.total_rounds = s.rounds_per_epoch * c->train.epochs;
    progress_init(&s.bar, c->progress ? c->progress : stdout, c->progress ? c->progress_bar : 0);
    int rc = setup(&s, c, train, err, errlen);
    for (int i = 0; rc == 0 && i < c->n_peers; i++)
        try_start(&s, i);
    sim_event e;
    while (rc == 0 && sim_queue_pop(&s.q, &e)) {
        s.now = e.t;
        switch (e.kind) {
        case EV_STEP_DONE:
            rc = step_done(&s, e.peer);
            break;
        case EV_ARRIVE:
            rc = arrive(&s, e.peer, e.arg);
            break;
        case EV_DEATH_KNOWN:
            if (s.p[e.peer].state == P_CRASHED) {
                s.alive[e.peer] = 0;
                for (int i = 0; i < c->n_peers; i++)
                    try_start(&s, i);
            }
            break;
        case EV_WAKE:
            wake(&s, e.peer, e.arg);
            break;
        case EV_NACK:
            if (s.p[e.peer].state != P_CRASHED)
                rc = send_sync(&s, e.peer, (int)e.arg);
            break;
        }
    }
    if (rc < 0)
        snprintf(err, errlen, "simulation failed: %s", strerror(-rc));
    else
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
