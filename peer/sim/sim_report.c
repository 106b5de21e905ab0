/* The simulator's reports: per-epoch lines, the per-round CSV log, and the
 * final evaluation with its counters (sim.h, sim_result). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "peer/core/clock.h"
#include "peer/core/local_step.h"
#include "peer/sim/sim_engine.h"

/* Holds mass: not crashed, and not left (a peer that handed its weight on
 * keeps only its model, at weight 0). */
static int live(const sim *s, int i) { return s->p[i].state != P_CRASHED && !engine_left(s->p[i].e); }

/* In the average model and the means of the epoch lines: live, and with a
 * model of the run (a joiner, admitted or back without its state, holds
 * the starting model until it takes a neighbour's). */
static int counted(const sim *s, int i) { return live(s, i) && !engine_joining(s->p[i].e); }

/* Summed in double a block of coordinates at a time (the same sums, in the
 * same order, as one model-sized accumulator, which would be a model's
 * worth of doubles at the run's peak). */
void sim_average_model(sim *s, float *avg)
{
    enum { BLOCK = 4096 };
    const size_t dim = s->model.n_params;
    double acc[BLOCK], w = 0;
    for (int i = 0; i < s->c->peer.n_peers; i++)
        if (counted(s, i))
            w += engine_gossip(s->p[i].e)->w;
    for (size_t at = 0; at < dim; at += BLOCK) {
        const size_t n = dim - at < BLOCK ? dim - at : BLOCK;
        memset(acc, 0, n * sizeof *acc);
        for (int i = 0; i < s->c->peer.n_peers; i++) {
            if (!counted(s, i))
                continue;
            const float *x = engine_gossip(s->p[i].e)->x + at;
            for (size_t d = 0; d < n; d++)
                acc[d] += x[d];
        }
        for (size_t d = 0; d < n; d++)
            avg[at + d] = (float)(acc[d] / w);
    }
}

/* mean_i ||z_i - avg||^2 / ||avg||^2 over live peers. */
static double consensus_distance(sim *s, const float *avg)
{
    const size_t dim = s->model.n_params;
    double norm = 0, sum = 0;
    int n = 0;
    for (size_t d = 0; d < dim; d++)
        norm += (double)avg[d] * avg[d];
    for (int i = 0; i < s->c->peer.n_peers; i++) {
        if (!counted(s, i))
            continue;
        const gsp_peer *g = engine_gossip(s->p[i].e);
        const float inv = gsp_debias_factor(g);
        double e = 0;
        for (size_t d = 0; d < dim; d++) {
            const double z = g->x[d] * inv;
            e += (z - avg[d]) * (z - avg[d]);
        }
        sum += e, n++;
    }
    return n && norm > 0 ? sum / n / norm : 0.0;
}

static float mean_last_loss(const sim *s)
{
    double sum = 0;
    int n = 0;
    for (int i = 0; i < s->c->peer.n_peers; i++)
        if (counted(s, i)) {
            engine_stats st;
            engine_stats_of(s->p[i].e, &st);
            sum += st.loss, n++;
        }
    return n ? (float)(sum / n) : 0.0f;
}

void sim_epoch_report(sim *s, long epoch)
{
    const sim_config *c = s->c;
    float *avg = s->r->average_model;
    sim_average_model(s, avg);
    float loss, acc;
    nn_model_evaluate(&s->model, avg, s->test, &loss, &acc);
    double cd = consensus_distance(s, avg);
    s->r->train_loss = s->epoch_steps ? (float)(s->epoch_loss / s->epoch_steps) : 0.0f;
    progress_clear(&s->bar);
    if (c->progress && s->test->text)
        fprintf(c->progress,
                "epoch %3ld/%ld  loss %.4f  val loss (average model) %.4f (%.3f bits/byte)  consensus %.2e  "
                "%.1f MB sent  sim %.2fs  wall %.1fs\n",
                epoch, c->peer.train.epochs, s->r->train_loss, loss, nn_bits_per_byte(loss), cd, s->r->bytes_sent / 1e6,
                s->now, clock_now() - s->wall0);
    else if (c->progress)
        fprintf(c->progress,
                "epoch %3ld/%ld  loss %.4f  test (average model) %6.2f%%  consensus %.2e  %.1f MB sent  "
                "sim %.2fs  wall %.1fs\n",
                epoch, c->peer.train.epochs, s->r->train_loss, 100 * acc, cd, s->r->bytes_sent / 1e6, s->now,
                clock_now() - s->wall0);
    if (c->progress)
        fflush(c->progress);
    s->epoch_loss = 0, s->epoch_steps = 0;
}

void sim_log_round(sim *s, long round)
{
    const sim_config *c = s->c;
    if (!c->log)
        return;
    float *avg = s->r->average_model;
    sim_average_model(s, avg);
    fprintf(c->log, "%ld,%.6f,%.6f,%.6e,%llu,%llu\n", round, s->now, mean_last_loss(s), consensus_distance(s, avg),
            (unsigned long long)s->r->bytes_sent, (unsigned long long)s->r->messages_lost);
}

void sim_progress_round(sim *s)
{
    if (!s->c->progress || !s->bar.enabled)
        return;
    char text[96];
    snprintf(text, sizeof text, "round %ld/%ld  loss %.4f", s->slowest, s->plan.total_rounds, mean_last_loss(s));
    progress_update(&s->bar, s->slowest, s->plan.total_rounds, text);
}

/* Total mass now (peers plus in flight on every edge) against the start:
 * only for averaging-only runs without a crash (mass leaves with a crash)
 * or an admission (a joiner brings a neighbour's model: mass comes in);
 * slots still vacant hold nothing. */
static void mass_check(sim *s)
{
    sim_result *r = s->r;
    r->mass_error_x = r->mass_error_w = NAN;
    if (!s->mass0 || r->crashes > 0 || r->admits > 0)
        return;
    const int n = s->c->peer.n_peers - r->slots_vacant;
    const size_t dim = s->model.n_params;
    double *x = calloc(dim, sizeof *x), w = 0;
    if (!x)
        return;
    for (int i = 0; i < s->c->peer.n_peers; i++) {
        if (s->p[i].vacant)
            continue;
        for (size_t d = 0; d < dim && !engine_left(s->p[i].e); d++) /* (one that left holds a model, no mass) */
            x[d] += engine_gossip(s->p[i].e)->x[d];
        w += engine_gossip(s->p[i].e)->w;
        for (int j = 0; j < s->c->peer.n_peers; j++)
            if (j != i)
                w += gsp_edge_pending(engine_gossip(s->p[i].e), engine_gossip(s->p[j].e), x);
    }
    double ex = 0, norm = 0;
    for (size_t d = 0; d < dim; d++)
        ex += (x[d] - s->mass0[d]) * (x[d] - s->mass0[d]), norm += s->mass0[d] * s->mass0[d];
    r->mass_error_x = norm > 0 ? sqrt(ex / norm) : sqrt(ex);
    r->mass_error_w = fabs(w - n) / n;
    free(x);
}

/* What live peers sent and has not been applied at the end: the weight a
 * partition still cuts off, shares that reached a peer after it had
 * finished, or that were on their way to a peer that left (lost with it). */
static double weight_in_flight(const sim *s)
{
    double w = 0;
    for (int i = 0; i < s->c->peer.n_peers; i++) {
        const gsp_peer *g = engine_gossip(s->p[i].e);
        for (int k = 0; live(s, i) && k < g->n_out; k++)
            if (s->p[g->out[k].peer].state != P_CRASHED)
                w += gsp_edge_pending(g, engine_gossip(s->p[g->out[k].peer].e), NULL);
    }
    return w;
}

/* Every message has gone in: evaluate the average model and every live
 * peer's own, and sum the counters. */
void sim_final_report(sim *s)
{
    const sim_config *c = s->c;
    sim_result *r = s->r;
    float *avg = r->average_model;
    if (c->keep_peer_models)
        r->peer_models = calloc((size_t)c->peer.n_peers * s->model.n_params, sizeof(float));
    sim_average_model(s, avg);
    nn_model_evaluate(&s->model, avg, s->test, &r->test_loss, &r->test_accuracy);
    r->consensus_distance = consensus_distance(s, avg);
    r->test_accuracy_min = 1.0f;
    r->weight_min = INFINITY, r->weight_max = 0;
    double acc_sum = 0, loss_sum = 0, stale = 0, absorbed = 0;
    for (int i = 0; i < c->peer.n_peers; i++) {
        sim_peer *p = &s->p[i];
        const gsp_pace_stats *ps = &engine_pace(p->e)->stats;
        r->late_marks += ps->late_marks, r->catch_ups += ps->catch_ups, r->refreshes += ps->refreshes, r->rounds_skipped += ps->rounds_skipped;
        r->neighbours_lost += ps->neighbours_lost, r->brakes += ps->brakes;
        r->isolated_rounds += ps->isolated_rounds, r->busy_kept += ps->busy_kept;
        r->syncs += engine_gossip(p->e)->stats.syncs_sent;
        if (!live(s, i))
            continue;
        float acc, loss;
        const float *z = engine_eval_params(p->e, &s->model);
        nn_model_evaluate(&s->model, z, s->test, &loss, &acc);
        r->test_loss_max = fmaxf(r->test_loss_max, loss), loss_sum += loss;
        if (r->peer_models)
            memcpy(r->peer_models + (size_t)i * s->model.n_params, z, s->model.n_params * sizeof(float));
        r->test_accuracy_min = acc < r->test_accuracy_min ? acc : r->test_accuracy_min;
        acc_sum += acc, r->peers_live++;
        stale += (double)engine_gossip(p->e)->stats.stale_sum, absorbed += (double)engine_gossip(p->e)->stats.absorbed;
        r->weight_min = fmin(r->weight_min, engine_gossip(p->e)->w), r->weight_max = fmax(r->weight_max, engine_gossip(p->e)->w);
        r->weight_total += engine_gossip(p->e)->w;
    }
    if (r->peers_live == 0)
        r->weight_min = 0;
    r->test_accuracy_mean = r->peers_live ? (float)(acc_sum / r->peers_live) : 0.0f;
    r->test_loss_mean = r->peers_live ? (float)(loss_sum / r->peers_live) : 0.0f;
    mass_check(s);
    r->weight_in_flight = weight_in_flight(s);
    r->mean_staleness = absorbed ? stale / absorbed : 0.0;
    r->rounds = s->slowest;
    r->simulated_seconds = s->last_step; /* not the idle timers that trail it */
    r->parameters = s->model.n_params;
    r->context = s->test->text ? s->test->w : 0;
}
