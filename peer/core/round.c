/* The one round driver: see round.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gsp_gather.h"
#include "peer/core/round.h"

/* The codecs' randomness: one seed for the run, mixed per edge and message
 * inside gossip/. */
#define ROUND_CODEC_SEED 0x636f646563ULL /* "codec" */

void round_plan_make(round_plan *p, const train_opts *o, int n_train, int n_peers, int local_steps)
{
    p->per_batch = (int)(o->batch / n_peers) > 0 ? (int)(o->batch / n_peers) : 1;
    p->local_steps = local_steps > 1 ? local_steps : 1;
    long per_step = (long)p->per_batch * n_peers;
    p->steps_per_epoch = (n_train + per_step - 1) / per_step;
    if (p->steps_per_epoch < 1)
        p->steps_per_epoch = 1;
    p->rounds_per_epoch = (p->steps_per_epoch + p->local_steps - 1) / p->local_steps;
    p->total_rounds = p->rounds_per_epoch * o->epochs;
}

int round_plan_steps(const round_plan *p, long round, long *first)
{
    const long epoch = round / p->rounds_per_epoch, in_epoch = round % p->rounds_per_epoch;
    const long start = in_epoch * p->local_steps, left = p->steps_per_epoch - start;
    *first = epoch * p->steps_per_epoch + start;
    if (round < 0 || round >= p->total_rounds)
        return 0;
    return (int)(left < p->local_steps ? left : p->local_steps);
}

/* DGC-style sparsity warm-up (Lin et al. 2018): the sparse codecs start
 * dense and reach their fraction F exponentially, F^((e+1)/(W+1)) in epoch
 * e < W, and the consensus step follows the fraction (gsp_default_step).
 * Fractions only shrink, so edge buffers sized at the first message stay
 * large enough. */
static void codec_warmup(round_peer *rp, long round)
{
    const peer_settings *c = rp->c;
    /* The codecs that take a fraction (topk, randk, stc, sketch, sparseloco) are the ones it warms up. */
    const int sparse = c->codec->fraction > 0;
    double epoch = (double)round / (double)rp->plan->rounds_per_epoch;
    if (sparse && c->codec_warmup > 0 && epoch < c->codec_warmup) {
        double e = floor(epoch), W = ceil(c->codec_warmup);
        rp->codec.fraction = pow(c->codec->fraction, (e + 1) / (W + 1));
    } else
        rp->codec.fraction = c->codec->fraction;
    rp->g.step = c->step > 0 ? (float)c->step : gsp_default_step(&rp->codec, rp->g.dim);
}

/* The all-gather's conditions (gossip/gsp_gather.h): 0, or -EINVAL with
 * the reason. */
static int gather_check(const peer_settings *c, char *err, size_t errlen)
{
    const char *why = NULL;
    if (!c->codec || !cmp_sparse_bound(c->codec, 1 << 20))
        why = "a sparse --codec (sparseloco:K, topk:F, stc:F)";
    else if (c->tau != 0)
        why = "--tau 0 (every round waits for every live peer's message)";
    else if (c->outer && c->outer->lr > 0)
        why = "no --outer (its update is the outer step)";
    for (long r = 0; !why && c->topology && r < c->topology->n_phases; r++)
        for (int p = 0; !why && p < c->n_peers; p++) {
            topo_out out;
            topo_route(c->topology, r, p, NULL, &out);
            if (out.n != c->n_peers - 1)
                why = "a complete topology (every peer sends to every other every round: --topology complete)";
        }
    if (why) {
        snprintf(err, errlen, "--gather needs %s", why);
        return -EINVAL;
    }
    return 0;
}

int round_peer_init(round_peer *rp, const peer_settings *c, const round_plan *plan, int id, const nn_dataset *train,
                    const float *x0, size_t dim, double now, char *err, size_t errlen)
{
    memset(rp, 0, sizeof *rp);
    rp->c = c, rp->plan = plan;
    int rc = 0;
    if (train && (rc = nn_dataset_shard(train, id, c->n_peers, c->shard_alpha, c->train.seed, &rp->shard, err,
                                        errlen)) < 0)
        return rc; /* err says why */
    if (rc == 0)
        rc = gsp_init(&rp->g, id, c->n_peers, dim, c->tau, x0);
    if (rc == 0 && c->gather && (rc = gather_check(c, err, errlen)) < 0)
        return rc; /* err says why */
    if (rc == 0 && c->codec) {
        rp->codec = *c->codec;
        codec_warmup(rp, 0); /* densest first: edge buffers are sized by the first bound */
        rc = gsp_set_codec(&rp->g, &rp->codec, c->train.seed ^ ROUND_CODEC_SEED, c->gather ? 1.0f : rp->g.step);
        if (rc == 0 && c->gather)
            rc = gsp_set_gather(&rp->g, c->gather_decay);
        else if (rc == 0 && x0) /* every peer starts from the same model: the references can too */
            rc = c->share_origin ? gsp_share_origin(&rp->g, x0) : gsp_set_origin(&rp->g, x0);
        if (rc == 0 && c->share_scratch)
            rc = gsp_share_scratch(&rp->g, c->share_scratch);
        gsp_set_pool(&rp->g, c->pool);
        /* H local steps move z about sqrt(H) times as far between messages
         * (the steps' noise adds up like a random walk): the codec's normal
         * lag grows as much (measured: at most 0.17 of the norm at H = 1,
         * 0.43 at H = 4), and only a lag beyond that is a jump. */
        rp->g.lag_scale = sqrt((double)plan->local_steps);
    }
    if (rc == 0 && train)
        rc = local_init(&rp->local, &c->train, c->outer, &rp->shard, id, plan->per_batch, dim);
    else if (rc == 0)
        rc = local_init_external(&rp->local, c->outer, dim);
    if (rc == 0) {
        gsp_pace_config pc = {.topology = c->topology, .total_rounds = plan->total_rounds, .tau = c->tau,
                              .dead_timeout = c->dead_timeout, .round_timeout = c->round_timeout,
                              .round_deadline = c->round_deadline, .patient = c->gather,
                              .barrier = c->barrier, .alone_wait = c->alone_wait};
        rc = gsp_pace_init(&rp->pace, &pc, id, now);
    }
    if (rc < 0) {
        snprintf(err, errlen, "peer %d: cannot set up (%s)", id, strerror(-rc));
        round_peer_free(rp);
    }
    return rc;
}

void round_peer_free(round_peer *rp)
{
    if (!rp)
        return;
    for (int k = 0; k < rp->n_inbox; k++)
        gsp_msg_free(&rp->inbox[k]);
    free(rp->inbox);
    gsp_pace_free(&rp->pace);
    local_free(&rp->local);
    gsp_free(&rp->g);
    nn_dataset_free(&rp->shard);
    memset(rp, 0, sizeof *rp);
}

void round_memory(const round_peer *rp, mem_parts *m)
{
    size_t state, codec;
    gsp_bytes(&rp->g, &state, &codec);
    m->gossip += state;
    m->codec += codec;
    m->model += nn_optimizer_bytes(&rp->local.opt) + outer_bytes(&rp->local.outer);
    m->data += nn_dataset_bytes(&rp->shard) + nn_batcher_bytes(&rp->local.batches);
    m->in_flight += (size_t)rp->cap_inbox * sizeof *rp->inbox;
    for (int k = 0; k < rp->n_inbox; k++)
        m->in_flight += gsp_msg_owned_bytes(&rp->inbox[k]);
}

int round_inbox_put(round_peer *rp, gsp_msg *m)
{
    if (rp->n_inbox == rp->cap_inbox) {
        int nc = rp->cap_inbox ? 2 * rp->cap_inbox : 8;
        gsp_msg *in = realloc(rp->inbox, (size_t)nc * sizeof *in);
        if (!in)
            return -ENOMEM;
        rp->inbox = in, rp->cap_inbox = nc;
    }
    rp->inbox[rp->n_inbox++] = *m;
    return 0;
}

/* Would m apply right after `held` (the edge waiting for a SYNC or not)? */
static int follows(const gsp_peer *g, const gsp_msg *m, uint64_t held, int waiting)
{
    switch (m->kind) {
    case GSP_RAW: /* (totals: a later one is complete) */
    case GSP_GATHER: /* (a message of its own: none waits for another) */
        return m->seq > held;
    case GSP_SYNC:
        return m->base == held && m->seq > held;
    case GSP_DELTA:
        break;
    }
    return !waiting && m->seq == held + 1 && !(m->seq == 1 && m->origin != g->origin_id);
}

uint64_t round_held(const round_peer *rp, int src, uint64_t incarnation)
{
    const gsp_peer *g = &rp->g;
    const gsp_edge *e = NULL;
    for (int j = 0; j < g->n_in && !e; j++)
        if (g->in[j].peer == src && g->in[j].incarnation == incarnation)
            e = &g->in[j];
    uint64_t held = e ? e->seq : 0;
    int waiting = e && e->sync, moved = 1;
    while (moved) {
        moved = 0;
        for (int k = 0; k < rp->n_inbox; k++) {
            const gsp_msg *m = &rp->inbox[k];
            if (m->src == src && m->incarnation == incarnation && follows(g, m, held, waiting)) {
                held = m->seq, waiting = 0, moved = 1;
                break;
            }
        }
    }
    return held;
}

int round_hold_max(const round_peer *rp) { return 2 * (rp->pace.c.tau + 2 * rp->pace.period + 4); }

int round_held_from(const round_peer *rp, int src)
{
    int k = 0;
    for (int j = 0; j < rp->n_inbox; j++)
        k += rp->inbox[j].src == src;
    return k;
}

static int cmp_msg(const void *a, const void *b)
{
    const gsp_msg *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int absorb_inbox(round_peer *rp, int all, round_nack_fn nack, void *ctx);

int round_absorb(round_peer *rp, int all, round_nack_fn nack, void *ctx)
{
    int applied = absorb_inbox(rp, all, nack, ctx);
    /* The all-gather's round: every sender's message taken, the peer's own
     * included, whatever the inbox held. */
    if (rp->g.gather && gsp_gather_apply(&rp->g) < 0)
        return -ENOMEM;
    return applied;
}

static int absorb_inbox(round_peer *rp, int all, round_nack_fn nack, void *ctx)
{
    rp->n_refused = 0;
    if (rp->n_inbox == 0)
        return 0; /* (an empty inbox may still be a NULL pointer, which qsort must not get) */
    qsort(rp->inbox, (size_t)rp->n_inbox, sizeof *rp->inbox, cmp_msg);
    int kept = 0, applied = 0, ask = -1; /* ask: the sender to NACK once its messages are through */
    if (!all) /* (a round's absorb: what a peer that stops at the end took in last is the round's) */
        rp->n_taken = 0, rp->taken_at = rp->g.round;
    uint64_t ask_seq = 0;
    /* A sender with more than half of what may wait here waiting (one that
     * runs ahead of this peer: two peers that are each other's
     * in-neighbours hold each other's brake, and after a leave on the
     * exponential graph of 6 two such ran 60 to 90 rounds ahead of a third)
     * has its oldest taken in now, round or not: otherwise its messages
     * filled the inbox, the next were refused for the rest of the run, and
     * 2.3 of 6 units of weight never arrived. */
    const int keep_max = round_hold_max(rp) / 2;
    int run_end = 0; /* the end of the current sender's messages (the inbox is sorted by sender) */
    for (int k = 0; k < rp->n_inbox; k++) {
        gsp_msg *m = &rp->inbox[k];
        if (ask >= 0 && m->src != ask) {
            nack(ctx, ask, ask_seq);
            ask = -1;
        }
        if (k >= run_end)
            for (run_end = k + 1; run_end < rp->n_inbox && rp->inbox[run_end].src == m->src; run_end++)
                ;
        /* (a sender routed around, one that left say, sends nothing more:
         * its last shares are taken in now, so that a gap in them can be
         * asked for while it still answers) */
        if (!all && rp->c->tau == 0 && m->round >= rp->g.round && run_end - k <= keep_max && rp->pace.alive[m->src]) {
            rp->inbox[kept++] = *m;
            continue;
        }
        int rc = gsp_absorb(&rp->g, m);
        if (rc == GSP_APPLIED && !all && rp->n_taken < ROUND_TAKEN_MAX)
            rp->taken_from[rp->n_taken] = m->src, rp->taken_round[rp->n_taken] = m->round;
        if (rc == GSP_APPLIED)
            applied++, rp->n_taken += !all;
        if (rc == GSP_APPLIED && ask == m->src)
            ask = -1;
        else if (rc == GSP_NEED_SYNC && nack)
            ask = m->src, ask_seq = gsp_nack_seq(&rp->g, m);
        else if (rc == GSP_REFUSED) {
            if (rp->n_refused < ROUND_TAKEN_MAX)
                rp->refused_from[rp->n_refused] = m->src, rp->refused_why[rp->n_refused] = rp->g.refused_why;
            rp->n_refused++;
            if (rp->g.codec && nack) /* (its edge waits for a SYNC: what the refused delta moved is in it) */
                ask = m->src, ask_seq = gsp_nack_seq(&rp->g, m);
        }
        gsp_msg_free(m);
    }
    if (ask >= 0)
        nack(ctx, ask, ask_seq);
    rp->n_inbox = kept;
    rp->absorbed += (uint64_t)applied;
    return applied;
}

void round_diverged_text(const round_peer *rp, const char *what, char *buf, size_t len)
{
    int k = snprintf(buf, len, "the model is no longer finite at round %ld (a NaN or an infinity in %s); ",
                     rp->g.round, what);
    if (rp->taken_at != rp->g.round || rp->n_taken == 0)
        k += snprintf(buf + k, k < (int)len ? len - (size_t)k : 0, "the round took in no share");
    else {
        k += snprintf(buf + k, k < (int)len ? len - (size_t)k : 0, "the round took in %d share%s, of", rp->n_taken,
                      rp->n_taken == 1 ? "" : "s");
        for (int j = 0; j < rp->n_taken && j < ROUND_TAKEN_MAX; j++)
            k += snprintf(buf + k, k < (int)len ? len - (size_t)k : 0, "%s peer %d (its round %ld)", j ? "," : "",
                          rp->taken_from[j], rp->taken_round[j]);
        if (rp->n_taken > ROUND_TAKEN_MAX)
            k += snprintf(buf + k, k < (int)len ? len - (size_t)k : 0, ", ...");
    }
    snprintf(buf + k, k < (int)len ? len - (size_t)k : 0, "; stopping (try a lower --lr or --clip)");
}

gsp_pace_action round_next(round_peer *rp, double now, gsp_pace_decision *d)
{
    return gsp_pace_next(&rp->pace, &rp->g, rp->inbox, rp->n_inbox, now, d);
}

/* The round's steps, on x (z NULL) or on z apart from it; with the outer
 * step around them. */
static float steps(round_peer *rp, nn_model *model, float *z, long round)
{
    const train_opts *o = &rp->c->train;
    long first;
    const int n = model ? round_plan_steps(rp->plan, round, &first) : 0;
    double loss = 0;
    if (z)
        outer_begin_at(&rp->local.outer, z);
    else
        outer_begin(&rp->local.outer, &rp->g);
    for (int s = 0; s < n; s++) {
        float lr = nn_lr_at(&o->schedule, first + s, rp->plan->steps_per_epoch);
        int correct, B;
        loss += z ? local_step_at(&rp->local, model, z, rp->g.dim, lr, &correct, &B)
                  : local_step(&rp->local, model, &rp->g, lr, &correct, &B);
    }
    if (z)
        outer_end_at(&rp->local.outer, z);
    else
        outer_end(&rp->local.outer, &rp->g);
    rp->steps += n;
    rp->loss = n ? (float)(loss / n) : 0.0f;
    return rp->loss;
}

float round_step(round_peer *rp, nn_model *model) { return steps(rp, model, NULL, rp->g.round); }

float round_step_on(round_peer *rp, nn_model *model, float *z, long round) { return steps(rp, model, z, round); }

int round_emit(round_peer *rp, double now, const uint8_t *busy, gsp_msg *msgs)
{
    if (rp->c->codec && rp->c->codec_warmup > 0)
        codec_warmup(rp, rp->g.round);
    topo_out out;
    gsp_pace_route(&rp->pace, &rp->g, now, busy, &out);
    return gsp_emit(&rp->g, &out, msgs);
}
