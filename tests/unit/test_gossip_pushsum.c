/* Push-sum invariants of gossip/ (see gossip/GUARANTEES.md), driven by a
 * minimal in-test network: rounds in lock step, every message copied into a
 * queue and delivered, dropped, duplicated, delayed or reordered on purpose. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gsp.h"

#define DIM 16

typedef struct pending {
    gsp_msg m;
    long due; /* round at whose end it is delivered */
} pending;

typedef struct net {
    int n;
    topo t;
    gsp_peer *p;
    uint8_t *alive;
    pending *q;
    int nq, capq;
    long round;
    uint64_t rng;
} net;

static uint64_t rnd(net *s)
{
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double unif(net *s) { return (double)(rnd(s) >> 11) * 0x1.0p-53; }

/* Codec for the nets made next (NULL: uncompressed running sums). */
static const cmp_spec *net_codec;

static void net_init(net *s, const char *kind, int n, const char *params, int tau, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    s->rng = seed;
    parse_error e;
    cr_assert_eq(topo_generate(&s->t, kind, n, params, &e), 0, "%s: %s", kind, e.msg);
    s->p = calloc((size_t)n, sizeof *s->p);
    s->alive = malloc((size_t)n);
    memset(s->alive, 1, (size_t)n);
    for (int i = 0; i < n; i++) {
        float x0[DIM];
        for (int d = 0; d < DIM; d++)
            x0[d] = (float)(1.0 + 2.0 * unif(s) + d); /* nonzero mean: relative error is meaningful */
        cr_assert_eq(gsp_init(&s->p[i], i, n, DIM, tau, x0), 0);
        if (net_codec)
            cr_assert_eq(gsp_set_codec(&s->p[i], net_codec, seed, gsp_default_step(net_codec, DIM)), 0);
    }
}

static void net_free(net *s)
{
    for (int i = 0; i < s->nq; i++)
        gsp_msg_free(&s->q[i].m);
    free(s->q);
    for (int i = 0; i < s->n; i++)
        gsp_free(&s->p[i]);
    free(s->p);
    free(s->alive);
    topo_free(&s->t);
}

static void enqueue(net *s, const gsp_msg *m, long due)
{
    if (s->nq == s->capq) {
        s->capq = s->capq ? 2 * s->capq : 64;
        s->q = realloc(s->q, (size_t)s->capq * sizeof *s->q);
    }
    cr_assert_eq(gsp_msg_copy(&s->q[s->nq].m, m), 0);
    s->q[s->nq++].due = due;
}

/* fate of one message: how many rounds late (0 = this round), -1 = lost, and copies */
typedef void (*fate_fn)(net *s, const gsp_msg *m, int *delay, int *copies);

static void deliver_due(net *s, int reverse)
{
    /* Deliver everything due now; reverse = newest first (reordering). */
    int i = reverse ? s->nq - 1 : 0;
    for (int k = 0; k < s->nq; k++, i += reverse ? -1 : 1) {
        pending *p = &s->q[i];
        if (p->due > s->round)
            continue;
        if (s->alive[p->m.dst]) {
            int rc = gsp_absorb(&s->p[p->m.dst], &p->m);
            cr_assert_geq(rc, 0);
            if (rc == GSP_NEED_SYNC) { /* the receiver asks; the sender answers with a SYNC next round */
                gsp_msg sync;
                int sr = gsp_sync_msg(&s->p[p->m.src], p->m.dst, gsp_nack_seq(&s->p[p->m.dst], &p->m), &sync);
                cr_assert(sr == 0 || sr == -EALREADY, "%d", sr);
                if (sr == 0)
                    enqueue(s, &sync, s->round + 1);
            }
        }
        gsp_msg_free(&p->m);
        p->due = -1;
    }
    int w = 0;
    for (int r = 0; r < s->nq; r++)
        if (s->q[r].due >= 0)
            s->q[w++] = s->q[r];
    s->nq = w;
}

static void net_round(net *s, fate_fn fate, int reverse)
{
    for (int i = 0; i < s->n; i++) {
        if (!s->alive[i])
            continue;
        topo_out out;
        topo_route(&s->t, s->round, i, s->alive, &out);
        gsp_msg msgs[TOPO_MAX_OUT];
        cr_assert_eq(gsp_emit(&s->p[i], &out, msgs), out.n);
        for (int k = 0; k < out.n; k++) {
            cr_assert(s->alive[msgs[k].dst], "mass sent to a dead peer");
            int delay = 0, copies = 1;
            if (fate)
                fate(s, &msgs[k], &delay, &copies);
            for (int c = 0; c < copies && delay >= 0; c++)
                enqueue(s, &msgs[k], s->round + delay);
        }
    }
    deliver_due(s, reverse);
    s->round++;
}

/* Mass held by the live peers plus in flight between them, in double. */
static void mass(const net *s, double *x, double *w)
{
    memset(x, 0, DIM * sizeof *x);
    *w = 0;
    for (int i = 0; i < s->n; i++) {
        if (!s->alive[i])
            continue;
        for (int d = 0; d < DIM; d++)
            x[d] += s->p[i].x[d];
        *w += s->p[i].w;
        for (int j = 0; j < s->n; j++)
            if (j != i && s->alive[j])
                *w += gsp_edge_pending(&s->p[i], &s->p[j], x);
    }
}

/* max over live peers of ||z_i - target|| / ||target|| */
static double consensus_error(net *s, const double *target)
{
    double worst = 0, norm = 0;
    for (int d = 0; d < DIM; d++)
        norm += target[d] * target[d];
    for (int i = 0; i < s->n; i++) {
        if (!s->alive[i])
            continue;
        const float *z = gsp_debias(&s->p[i]);
        double e = 0;
        for (int d = 0; d < DIM; d++)
            e += (z[d] - target[d]) * (z[d] - target[d]);
        worst = fmax(worst, sqrt(e / norm));
    }
    return worst;
}

static const char *current_codec = "exact";

static void assert_mass(const net *s, const double *x0, double w0, double tol)
{
    double x[DIM], w;
    mass(s, x, &w);
    cr_assert(fabs(w - w0) <= tol * w0, "%s round %ld: sum w %.12g, expected %.12g", current_codec, s->round, w, w0);
    for (int d = 0; d < DIM; d++)
        cr_assert(fabs(x[d] - x0[d]) <= tol * fabs(x0[d]), "%s round %ld: sum x[%d] %.9g, expected %.9g", current_codec,
                  s->round, d, x[d], x0[d]);
}

static void average(const net *s, double *avg)
{
    double x[DIM], w;
    mass(s, x, &w);
    for (int d = 0; d < DIM; d++)
        avg[d] = x[d] / w;
}

/* ---- exactness and conservation ------------------------------------------ */

static void exact_after_log2n(int n)
{
    net s;
    net_init(&s, "exponential", n, NULL, 0, (uint64_t)n);
    double x0[DIM], w0, avg[DIM];
    mass(&s, x0, &w0);
    average(&s, avg);
    int L = 0;
    while ((1 << L) < n)
        L++;
    for (int r = 0; r < L; r++) {
        cr_assert_gt(consensus_error(&s, avg), 1e-3, "n=%d exact too early, round %d", n, r);
        net_round(&s, NULL, 0);
        assert_mass(&s, x0, w0, 1e-6);
    }
    double err = consensus_error(&s, avg);
    cr_assert_lt(err, 1e-6, "n=%d: relative error %.3g after %d rounds", n, err, L);
    net_free(&s);
}

Test(gossip_pushsum, exact_on_exponential_8) { exact_after_log2n(8); }
Test(gossip_pushsum, exact_on_exponential_16) { exact_after_log2n(16); }
Test(gossip_pushsum, exact_on_exponential_32) { exact_after_log2n(32); }

static void converges(const char *kind, int n, const char *params, int rounds, double tol)
{
    net s;
    net_init(&s, kind, n, params, 0, 7);
    double x0[DIM], w0, avg[DIM];
    mass(&s, x0, &w0);
    average(&s, avg);
    for (int r = 0; r < rounds; r++) {
        net_round(&s, NULL, 0);
        assert_mass(&s, x0, w0, 1e-5);
        for (int i = 0; i < n; i++)
            cr_assert_gt(s.p[i].w, 0.0, "%s: w of peer %d not positive", kind, i);
    }
    double err = consensus_error(&s, avg);
    cr_assert_lt(err, tol, "%s n=%d: error %.3g after %d rounds", kind, n, err, rounds);
    net_free(&s);
}

Test(gossip_pushsum, conservation_and_convergence_ring) { converges("ring", 8, NULL, 400, 1e-5); }
Test(gossip_pushsum, conservation_and_convergence_torus) { converges("torus", 16, NULL, 400, 1e-5); }
Test(gossip_pushsum, conservation_and_convergence_random) { converges("random", 16, "out=2 seed=3", 200, 1e-5); }
Test(gossip_pushsum, weights_positive) { converges("n-peer-exponential", 16, "out=2", 60, 1e-5); }

/* ---- faults ---------------------------------------------------------------- */

static void lose_30_percent(net *s, const gsp_msg *m, int *delay, int *copies)
{
    (void)m, (void)copies;
    *delay = unif(s) < 0.3 ? -1 : 0;
}

Test(gossip_pushsum, loss_keeps_mass_in_flight_and_converges)
{
    net s;
    net_init(&s, "exponential", 8, NULL, 0, 11);
    double x0[DIM], w0, avg[DIM];
    mass(&s, x0, &w0);
    average(&s, avg);
    for (int r = 0; r < 200; r++) {
        net_round(&s, lose_30_percent, 0);
        assert_mass(&s, x0, w0, 1e-5); /* lost messages' shares are still pending, not gone */
    }
    cr_assert_lt(consensus_error(&s, avg), 1e-5);
    net_free(&s);
}

Test(gossip_pushsum, loss_share_arrives_with_next_message)
{
    /* Two peers on a ring; 0 -> 1's first message is lost. */
    net b;
    net_init(&b, "ring", 2, NULL, 0, 5);
    double acc[DIM] = {0};
    for (int r = 0; r < 2; r++) {
        gsp_msg m[2][TOPO_MAX_OUT];
        for (int i = 0; i < 2; i++) { /* everyone emits, then messages land: as net_round does */
            topo_out out;
            topo_route(&b.t, b.round, i, b.alive, &out);
            cr_assert_eq(gsp_emit(&b.p[i], &out, m[i]), 1);
        }
        for (int i = 0; i < 2; i++)
            if (!(i == 0 && r == 0))
                cr_assert_eq(gsp_absorb(&b.p[m[i][0].dst], &m[i][0]), GSP_APPLIED);
        b.round++;
        double pending = gsp_edge_pending(&b.p[0], &b.p[1], acc);
        if (r == 0)
            cr_assert_float_eq(pending, 0.5, 1e-15, "the lost share (half of w = 1) is in flight");
        else
            cr_assert_float_eq(pending, 0.0, 1e-15, "the next message brought it in");
    }
    cr_assert_float_eq(b.p[0].w + b.p[1].w, 2.0, 1e-12, "all weight is back with the peers");
    net_free(&b);
}

static void duplicate_all(net *s, const gsp_msg *m, int *delay, int *copies)
{
    (void)s, (void)m, (void)delay;
    *copies = 3;
}

Test(gossip_pushsum, duplicate_changes_nothing)
{
    net a, b;
    net_init(&a, "exponential", 8, NULL, 0, 3);
    net_init(&b, "exponential", 8, NULL, 0, 3);
    for (int r = 0; r < 10; r++) {
        net_round(&a, NULL, 0);
        net_round(&b, duplicate_all, 0);
    }
    for (int i = 0; i < 8; i++) {
        cr_assert_eq(memcmp(a.p[i].x, b.p[i].x, DIM * sizeof(float)), 0, "peer %d differs", i);
        cr_assert_eq(a.p[i].w, b.p[i].w);
        cr_assert_eq(b.p[i].stats.ignored, 2 * b.p[i].stats.absorbed, "every extra copy is ignored");
    }
    net_free(&a);
    net_free(&b);
}

static void delay_three(net *s, const gsp_msg *m, int *delay, int *copies)
{
    (void)s, (void)copies;
    *delay = m->src == 0 ? 3 : 0; /* peer 0's messages all come 3 rounds late */
}

Test(gossip_pushsum, delay_conserves_and_converges)
{
    net s;
    net_init(&s, "exponential", 8, NULL, 3, 9);
    double x0[DIM], w0, avg[DIM];
    mass(&s, x0, &w0);
    average(&s, avg);
    for (int r = 0; r < 120; r++) {
        net_round(&s, delay_three, 0);
        assert_mass(&s, x0, w0, 1e-5);
    }
    cr_assert_lt(consensus_error(&s, avg), 1e-5);
    net_free(&s);
}

static void hold_two_rounds(net *s, const gsp_msg *m, int *delay, int *copies)
{
    (void)s, (void)copies;
    *delay = 2 - (int)(m->round % 3); /* rounds r, r+1, r+2 arrive together */
}

Test(gossip_pushsum, reorder_equals_in_order_delivery)
{
    net a, b;
    /* A ring uses the same edge every round, so held messages queue up on it. */
    net_init(&a, "ring", 8, NULL, 2, 4);
    net_init(&b, "ring", 8, NULL, 2, 4);
    for (int r = 0; r < 30; r++) {
        net_round(&a, hold_two_rounds, 0); /* oldest first */
        net_round(&b, hold_two_rounds, 1); /* newest first: the older ones are ignored */
    }
    uint64_t ignored = 0;
    for (int i = 0; i < 8; i++) {
        ignored += b.p[i].stats.ignored;
        cr_assert_float_eq(a.p[i].w, b.p[i].w, 1e-12);
        for (int d = 0; d < DIM; d++)
            cr_assert_float_eq(a.p[i].x[d], b.p[i].x[d], 1e-5 * fabsf(a.p[i].x[d]), "peer %d x[%d]", i, d);
    }
    cr_assert_gt(ignored, 0, "reordering happened");
    net_free(&a);
    net_free(&b);
}

Test(gossip_pushsum, death_survivors_conserve_and_agree)
{
    net s;
    net_init(&s, "exponential", 8, NULL, 0, 13);
    for (int r = 0; r < 2; r++)
        net_round(&s, NULL, 0);
    s.alive[5] = 0; /* dies between rounds: its mass and what was in flight to it are gone */
    double x0[DIM], w0, avg[DIM];
    mass(&s, x0, &w0);
    average(&s, avg);
    for (int r = 0; r < 200; r++) {
        net_round(&s, NULL, 0);
        assert_mass(&s, x0, w0, 1e-5);
    }
    cr_assert_lt(consensus_error(&s, avg), 1e-5, "survivors agree on the mass that remains");
    net_free(&s);
}

/* gsp_hand_off (a peer that leaves on purpose, gossip/GUARANTEES.md): peer
 * 5 hands all of (x, w) to the peers it has sent to and is gone. The run
 * keeps its weight to the running totals' round-off and its x to float
 * round-off (with a codec: to the rounding of the model sent whole, bf16,
 * a few 1e-4 of the sum here); the leaver keeps its model at weight 0 and
 * can hand off nothing more; the survivors then agree on the average that
 * still counts it. */
static void a_leave_hands_everything_on(const char *spec_text, double tol_x)
{
    cmp_spec spec;
    char err[128];
    if (spec_text)
        cr_assert_eq(cmp_spec_parse(&spec, spec_text, err, sizeof err), 0, "%s", err);
    net_codec = spec_text ? &spec : NULL;
    current_codec = spec_text ? spec_text : "none";
    net s;
    net_init(&s, "exponential", 8, NULL, 0, 29);
    net_codec = NULL;
    for (int r = 0; r < 7; r++)
        net_round(&s, NULL, 0);
    double x0[DIM], w0, avg[DIM];
    mass(&s, x0, &w0);
    average(&s, avg);
    gsp_peer *g = &s.p[5];
    float model[DIM];
    memcpy(model, gsp_debias(g), sizeof model);
    topo_out to = {0};
    for (int k = 0; k < g->n_out; k++)
        if (g->out[k].seq > 0)
            to.peer[to.n++] = g->out[k].peer;
    cr_assert_geq(to.n, 2);
    gsp_msg msgs[TOPO_MAX_OUT];
    cr_assert_eq(gsp_hand_off(g, &to, msgs), to.n);
    for (int k = 0; k < to.n; k++)
        enqueue(&s, &msgs[k], s.round);
    cr_assert(g->left);
    cr_assert_eq(g->w, 0.0, "%s: it holds no weight", current_codec);
    cr_assert_eq(memcmp(gsp_debias(g), model, sizeof model), 0, "%s: it keeps its model", current_codec);
    cr_assert_eq(gsp_hand_off(g, &to, msgs), -EINVAL, "nothing more to hand off");
    s.alive[5] = 0;
    deliver_due(&s, 0);
    double x[DIM], w;
    mass(&s, x, &w);
    cr_assert(fabs(w - w0) <= 1e-12 * w0, "%s: sum w %.15g after the leave, %.15g before", current_codec, w, w0);
    for (int d = 0; d < DIM; d++)
        cr_assert(fabs(x[d] - x0[d]) <= tol_x * fabs(x0[d]), "%s: sum x[%d] %.9g after the leave, %.9g before",
                  current_codec, d, x[d], x0[d]);
    for (int r = 0; r < 1500; r++)
        net_round(&s, NULL, 0);
    cr_assert_lt(consensus_error(&s, avg), 1e-4 + tol_x, "%s: the survivors average what the run held",
                 current_codec);
    net_free(&s);
}

Test(gossip_pushsum, a_peer_that_leaves_hands_on_all_of_its_weight)
{
    a_leave_hands_everything_on(NULL, 1e-6);
    a_leave_hands_everything_on("stc:0.25", 2e-3);
    a_leave_hands_everything_on("sparseloco:2:8", 2e-3);
    a_leave_hands_everything_on("qsgd:16", 2e-3);
}

Test(gossip_pushsum, pause_loses_nothing)
{
    net s;
    net_init(&s, "exponential", 8, NULL, 0, 17);
    double x0[DIM], w0, avg[DIM];
    mass(&s, x0, &w0);
    average(&s, avg);
    net_round(&s, NULL, 0);
    /* Peer 2 pauses: others route around it and its inbound messages are not delivered. */
    gsp_peer saved = s.p[2];
    s.alive[2] = 0;
    for (int r = 0; r < 10; r++)
        net_round(&s, NULL, 0);
    s.alive[2] = 1;
    s.p[2] = saved;
    s.p[2].round = s.round; /* it resumes in step with the others */
    for (int r = 0; r < 200; r++) {
        net_round(&s, NULL, 0);
        assert_mass(&s, x0, w0, 1e-5);
    }
    cr_assert_lt(consensus_error(&s, avg), 1e-5, "everyone agrees on the ORIGINAL average");
    net_free(&s);
}

/* A peer that gives shares and takes none for thousands of rounds (its
 * in-neighbours' messages all held back, from rounds ahead of its own, under
 * tau = 0: a healed partition's side that is behind): push-sum halves its
 * weight every round, and its model z = x / w must stay its model. The
 * weight an edge moves is the difference of its running total, so once w is
 * tiny against that total the difference is all round-off; it once took
 * more than w (w = 0, z = x / 0: every peer of the run turned to NaN). */
static void a_peer_that_only_gives(const char *codec)
{
    cmp_spec spec;
    char err[128];
    if (codec)
        cr_assert_eq(cmp_spec_parse(&spec, codec, err, sizeof err), 0, "%s", err);
    float x0[DIM];
    for (int i = 0; i < DIM; i++)
        x0[i] = 0.1f * (float)(i - DIM / 2) + 0.013f;
    gsp_peer g = {0};
    cr_assert_eq(gsp_init(&g, 0, 4, DIM, 0, x0), 0);
    if (codec)
        cr_assert_eq(gsp_set_codec(&g, &spec, 7, 1.0f), 0);
    /* (a codec's references start at zero, and its first messages are
     * bf16: z moves by their error, a few parts in a thousand) */
    const float tol = codec ? 1e-2f : 1e-5f;
    codec = codec ? codec : "running sums";
    for (int r = 0; r < 3000; r++) {
        topo_out out = {.n = 1, .peer = {1 + r % 2}, .weight = {0.5}, .keep = 0.5};
        gsp_msg m[TOPO_MAX_OUT];
        cr_assert_eq(gsp_emit(&g, &out, m), 1);
        cr_assert_gt(g.w, 0.0, "%s: round %d: w = %g", codec, r, g.w);
        const float *z = gsp_debias(&g);
        for (int i = 0; i < DIM; i++)
            cr_assert(isfinite(z[i]) && fabsf(z[i] - x0[i]) <= tol * fabsf(x0[i]) + 1e-6f,
                      "%s: round %d, w = %g: z[%d] = %g, its model is %g", codec, r, g.w, i, z[i], x0[i]);
    }
    gsp_free(&g);
}

Test(gossip_pushsum, a_peer_that_only_gives_keeps_a_positive_weight_and_its_model)
{
    a_peer_that_only_gives(NULL);
    a_peer_that_only_gives("fp16");
}

/* A model with a NaN or an infinity is never sent, whatever the codec (a
 * float codec carries a NaN as any other value: four peers once gossiped
 * NaN for 40 epochs and reported 10.00%). */
Test(gossip_pushsum, a_model_that_is_not_finite_is_never_sent)
{
    const char *codecs[] = {NULL, "none", "fp16", "stc:0.25", "topk:0.25", "qsgd:16", "sparseloco:2:8"};
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (size_t c = 0; c < sizeof codecs / sizeof *codecs; c++)
        for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
            cmp_spec spec;
            char err[128];
            if (codecs[c])
                cr_assert_eq(cmp_spec_parse(&spec, codecs[c], err, sizeof err), 0, "%s", err);
            float x0[DIM];
            for (int i = 0; i < DIM; i++)
                x0[i] = 1.0f + (float)i;
            gsp_peer g = {0};
            cr_assert_eq(gsp_init(&g, 0, 4, DIM, 0, x0), 0);
            if (codecs[c])
                cr_assert_eq(gsp_set_codec(&g, &spec, 7, 0.5f), 0);
            topo_out out = {.n = 1, .peer = {1}, .weight = {0.5}, .keep = 0.5};
            gsp_msg m[TOPO_MAX_OUT];
            cr_assert_eq(gsp_emit(&g, &out, m), 1);
            g.x[DIM / 3] = bad[b];
            cr_assert_eq(gsp_emit(&g, &out, m), -EDOM, "%s: %g", codecs[c] ? codecs[c] : "running sums", bad[b]);
            gsp_free(&g);
        }
}

/* What a broken or hostile member may send that is well formed on the wire:
 * NaN or infinite values, a weight total that goes down, is negative, or
 * moves more weight than the run holds. Each is refused with nothing of it
 * applied, and what an honest sender sends next still arrives whole. */
Test(gossip_pushsum, a_share_no_honest_sender_makes_is_refused_and_nothing_of_it_applied)
{
    float x0[DIM];
    for (int i = 0; i < DIM; i++)
        x0[i] = 1.0f + (float)i;
    gsp_peer g = {0};
    cr_assert_eq(gsp_init(&g, 1, 4, DIM, 0, x0), 0);
    double tot[DIM];
    for (int i = 0; i < DIM; i++)
        tot[i] = 0.25 * x0[i];
    gsp_msg m = {.src = 0, .dst = 1, .round = 0, .seq = 1, .kind = GSP_RAW, .w_total = 0.25, .dim = DIM,
                 .x_total = tot};
    cr_assert_eq(gsp_absorb(&g, &m), GSP_APPLIED);
    const double w1 = g.w;
    float x1[DIM];
    memcpy(x1, g.x, sizeof x1);
    struct {
        const char *what;
        double w_total, x3;
    } bad[] = {
        {"a NaN in the totals", 0.5, NAN},       {"an infinity in the totals", 0.5, INFINITY},
        {"a NaN weight", NAN, 1.0},              {"an infinite weight", INFINITY, 1.0},
        {"a negative weight", -1.0, 1.0},        {"a weight total that went down", 0.125, 1.0},
        {"more weight than the run holds", 1e5, 1.0},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        double t[DIM];
        memcpy(t, tot, sizeof t);
        t[3] = bad[k].x3;
        gsp_msg b = m;
        b.seq = 2 + k, b.w_total = bad[k].w_total, b.x_total = t;
        cr_assert_eq(gsp_absorb(&g, &b), GSP_REFUSED, "%s", bad[k].what);
        cr_assert_not_null(g.refused_why);
        cr_assert_eq(g.w, w1, "%s: w moved", bad[k].what);
        cr_assert_eq(memcmp(g.x, x1, sizeof x1), 0, "%s: x moved", bad[k].what);
    }
    cr_assert_eq(g.stats.refused, sizeof bad / sizeof *bad);
    /* A copy checks as it copies (the simulator's messages in flight): a
     * NaN it carried is found there, and still refused. */
    double t[DIM];
    memcpy(t, tot, sizeof t);
    t[5] = NAN;
    gsp_msg b = m, c, clean;
    b.seq = 19, b.w_total = 0.5, b.x_total = t;
    cr_assert_eq(gsp_msg_copy(&c, &b), 0);
    cr_assert_eq(c.finite, 0);
    cr_assert_eq(gsp_absorb(&g, &c), GSP_REFUSED);
    gsp_msg_free(&c);
    cr_assert_eq(gsp_msg_copy(&clean, &m), 0);
    cr_assert_eq(clean.finite, 1, "finite values, found so by the copy");
    gsp_msg_free(&clean);
    for (int i = 0; i < DIM; i++) /* the honest sender's next totals: everything since the last one applied */
        tot[i] += 0.25 * x0[i];
    m.seq = 20, m.w_total = 0.5;
    cr_assert_eq(gsp_absorb(&g, &m), GSP_APPLIED);
    cr_assert_float_eq(g.w, w1 + 0.25, 1e-15);
    gsp_free(&g);

    /* A compressed edge: a delta with a NaN in its values (float32 carries
     * it as any other) is refused, and the edge waits for a SYNC, since the
     * sender's reference moved and ours did not. */
    cmp_spec none;
    char err[128];
    cr_assert_eq(cmp_spec_parse(&none, "none", err, sizeof err), 0, "%s", err);
    gsp_peer a = {0}, r = {0};
    cr_assert_eq(gsp_init(&a, 0, 4, DIM, 0, x0), 0);
    cr_assert_eq(gsp_init(&r, 1, 4, DIM, 0, x0), 0);
    cr_assert_eq(gsp_set_codec(&a, &none, 7, 1.0f), 0);
    cr_assert_eq(gsp_set_codec(&r, &none, 7, 1.0f), 0);
    topo_out out = {.n = 1, .peer = {1}, .weight = {0.5}, .keep = 0.5};
    gsp_msg d[TOPO_MAX_OUT];
    cr_assert_eq(gsp_emit(&a, &out, d), 1);
    cr_assert_eq(gsp_absorb(&r, &d[0]), GSP_APPLIED);
    cr_assert_eq(gsp_emit(&a, &out, d), 1);
    uint8_t poisoned[4096];
    cr_assert_leq(d[0].payload_len, sizeof poisoned);
    memcpy(poisoned, d[0].payload, d[0].payload_len);
    const float nan = NAN;
    memcpy(poisoned + d[0].payload_len - sizeof nan, &nan, sizeof nan); /* (the last value, little-endian) */
    gsp_msg p = d[0];
    p.payload = poisoned;
    const double rw = r.w;
    float rx[DIM], rref[DIM]; /* (the values come a block at a time: none may land before the last is seen) */
    memcpy(rx, r.x, sizeof rx), memcpy(rref, r.in[0].ref, sizeof rref);
    cr_assert_eq(gsp_absorb(&r, &p), GSP_REFUSED);
    cr_assert_eq(r.w, rw);
    cr_assert(!memcmp(rx, r.x, sizeof rx) && !memcmp(rref, r.in[0].ref, sizeof rref), "nothing of it applied");
    cr_assert_eq(gsp_absorb(&r, &d[0]), GSP_NEED_SYNC, "the edge waits for a SYNC");
    gsp_free(&a), gsp_free(&r);
}

/* ---- staleness --------------------------------------------------------------- */

Test(gossip_pushsum, ready_waits_for_tau)
{
    for (int tau = 0; tau <= 2; tau++) {
        net s;
        net_init(&s, "ring", 4, NULL, tau, 1);
        /* Peer 1 runs alone; peer 0 (its in-neighbour on the ring) is silent. */
        int ran = 0;
        while (gsp_ready(&s.p[1], &s.t, s.alive) && ran < 10) {
            topo_out out;
            topo_route(&s.t, s.p[1].round, 1, s.alive, &out);
            gsp_msg m[TOPO_MAX_OUT];
            gsp_emit(&s.p[1], &out, m);
            ran++;
        }
        cr_assert_eq(ran, tau + 1, "tau=%d: ran %d rounds ahead of a silent in-neighbour", tau, ran);
        /* Declared dead: it no longer holds anyone up. */
        s.alive[0] = 0;
        cr_assert(gsp_ready(&s.p[1], &s.t, s.alive));
        net_free(&s);
    }
}

Test(gossip_pushsum, absorb_rejects_malformed)
{
    net s;
    net_init(&s, "ring", 4, NULL, 0, 1);
    double tot[DIM] = {0};
    gsp_msg m = {.src = 0, .dst = 2, .round = 0, .seq = 1, .w_total = 0.5, .dim = DIM, .x_total = tot};
    cr_assert_eq(gsp_absorb(&s.p[1], &m), -EINVAL, "wrong destination");
    m.dst = 1, m.src = 9;
    cr_assert_eq(gsp_absorb(&s.p[1], &m), -EINVAL, "sender out of range");
    m.src = 1;
    cr_assert_eq(gsp_absorb(&s.p[1], &m), -EINVAL, "from itself");
    m.src = 0, m.dim = DIM - 1;
    cr_assert_eq(gsp_absorb(&s.p[1], &m), -EINVAL, "dimension mismatch");
    net_free(&s);
}

/* ---- compressed push-sum (every codec) -------------------------------------- */

/* rounds of averaging; faults (fate) only in the first faulty_rounds, so the
 * end state shows whether the system recovered from them. */
static void compressed_averaging_on(const char *spec_text, const char *kind, unsigned dead, int rounds,
                                    fate_fn fate, int faulty_rounds, double tol)
{
    cmp_spec spec;
    char err[128];
    cr_assert_eq(cmp_spec_parse(&spec, spec_text, err, sizeof err), 0, "%s", err);
    net_codec = &spec;
    current_codec = spec_text;
    net s;
    net_init(&s, kind, 8, NULL, 0, 21);
    net_codec = NULL;
    for (int i = 0; i < 8; i++)
        if (dead >> i & 1)
            s.alive[i] = 0; /* dead from the start: routed around */
    double x0[DIM], w0, avg[DIM];
    mass(&s, x0, &w0);
    average(&s, avg);
    for (int r = 0; r < rounds; r++) {
        net_round(&s, r < faulty_rounds ? fate : NULL, 0);
        assert_mass(&s, x0, w0, 1e-5); /* what leaves one peer arrives at the other, every codec */
    }
    double err_rel = consensus_error(&s, avg);
    cr_assert_lt(err_rel, tol, "%s on %s: relative consensus error %.3g after %d rounds", spec_text, kind, err_rel,
                 rounds);
    net_free(&s);
}

static void compressed_averaging(const char *spec_text, const char *kind, int rounds, fate_fn fate, int faulty_rounds)
{
    compressed_averaging_on(spec_text, kind, 0, rounds, fate, faulty_rounds, 1e-4);
}

static const char *const all_codecs[] = {"none", "fp16", "bf16", "topk:0.25", "randk:0.25", "qsgd:16", "terngrad",
                                         "natural", "sign", "stc:0.25", "sparseloco:2:8"};

Test(gossip_compressed, every_codec_conserves_and_averages_exp8)
{
    for (size_t i = 0; i < sizeof all_codecs / sizeof *all_codecs; i++)
        compressed_averaging(all_codecs[i], "exponential", 1500, NULL, 0);
}

Test(gossip_compressed, every_codec_conserves_and_averages_ring8)
{
    for (size_t i = 0; i < sizeof all_codecs / sizeof *all_codecs; i++)
        compressed_averaging(all_codecs[i], "ring", 1500, NULL, 0);
}

/* Peers 3 and 5 dead and routed around: in-degrees differ, so the weights w
 * part from 1 (and a rerouted edge can serve two phases). The references
 * track the sender's model z and x moves as (weight moved) x r, so z = x / w
 * still ends at the average. (When x moved step * r with r tracking a share
 * of x, and w moved in full, the sparse and stochastic codecs ended 0.28 to
 * 1.2 away from the average here; with w moving by the step, 0.3% to 2.5%.) */
Test(gossip_compressed, every_codec_averages_around_dead_peers)
{
    for (size_t i = 0; i < sizeof all_codecs / sizeof *all_codecs; i++)
        compressed_averaging_on(all_codecs[i], "exponential", 1u << 3 | 1u << 5, 1500, NULL, 0, 1e-4);
}

/* A new random target every round: references are used now and then, and
 * the weights move unevenly; the average is still reached (2% to 23% away
 * for the sparse codecs when references tracked shares of x). */
Test(gossip_compressed, every_codec_averages_on_a_time_varying_random_graph)
{
    for (size_t i = 0; i < sizeof all_codecs / sizeof *all_codecs; i++)
        compressed_averaging_on(all_codecs[i], "random", 0, 1500, NULL, 0, 1e-4);
}

Test(gossip_compressed, lost_delta_is_recovered_by_sync)
{
    /* 30% of messages lost for 300 rounds: mass is conserved throughout (the
     * lost deltas' mass is pending until the SYNC), and averaging ends exact. */
    compressed_averaging("topk:0.25", "exponential", 900, lose_30_percent, 300);
}

Test(gossip_compressed, duplicates_and_old_deltas_are_ignored)
{
    compressed_averaging("qsgd:16", "ring", 1500, duplicate_all, 1500);
}

/* A compressed edge keeps one reference at each end and no totals (gsp.h):
 * the sender keeps what its messages changed until they are acknowledged,
 * and a SYNC from the receiver's last applied seq brings exactly the mass
 * of the messages it lost, whichever were acknowledged meanwhile. */
/* What the corrections of e's messages after base are, as the sender's
 * whole reference rolled back message by message (newest first) gives them:
 * the definition the list in a SYNC must equal bit for bit. */
static void corrections_rolled_back(const gsp_edge *e, uint64_t base, size_t dim, double *d, uint8_t *changed)
{
    float *cur = malloc(dim * sizeof *cur);
    memcpy(cur, e->ref, dim * sizeof *cur);
    memset(d, 0, dim * sizeof *d);
    memset(changed, 0, dim);
    for (int k = e->n_log - 1; k >= 0 && e->log[k].seq > base; k--)
        for (size_t j = 0; j < e->log[k].n; j++) {
            const size_t i = e->log[k].idx ? e->log[k].idx[j] : j;
            changed[i] = 1;
            if (!e->log[k].old) { /* (a whole message before any weight moved keeps none: its term is 0) */
                cr_assert_eq(e->log[k].w_before, 0.0);
                continue;
            }
            d[i] += e->log[k].w_before * ((double)cur[i] - (double)e->log[k].old[j]);
            cur[i] = e->log[k].old[j];
        }
    free(cur);
}

/* A SYNC lists its corrections where the messages after its base changed
 * the reference (a sparse codec's non-zeros), ascending, with the values a
 * roll-back of the whole reference gives; a log that holds a whole message
 * lists every position. */
Test(gossip_compressed, a_sync_lists_its_corrections_where_the_messages_changed_r)
{
    enum { D = 4000 };
    cmp_spec spec;
    char err[128];
    cr_assert_eq(cmp_spec_parse(&spec, "stc:0.02", err, sizeof err), 0, "%s", err);
    float *x0 = malloc(D * sizeof *x0);
    for (int i = 0; i < D; i++)
        x0[i] = sinf((float)i);
    gsp_peer a, b;
    cr_assert_eq(gsp_init(&a, 0, 2, D, 0, x0), 0);
    cr_assert_eq(gsp_init(&b, 1, 2, D, 0, NULL), 0);
    cr_assert_eq(gsp_set_codec(&a, &spec, 5, 0.5f), 0);
    cr_assert_eq(gsp_set_codec(&b, &spec, 5, 0.5f), 0);
    topo_out out = {.n = 1, .peer = {1}, .weight = {0.5}};
    for (int r = 1; r <= 6; r++) {
        gsp_msg m;
        for (int i = 0; i < D; i++)
            a.x[i] += 0.01f * cosf((float)(i * r));
        cr_assert_eq(gsp_emit(&a, &out, &m), 1);
        if (r <= 2)
            cr_assert_eq(gsp_absorb(&b, &m), GSP_APPLIED);
    }
    /* the whole first message, sent before the edge moved weight, kept no copy of the old reference */
    cr_assert(a.out[0].log[0].seq == 1 && !a.out[0].log[0].idx && !a.out[0].log[0].old && a.out[0].log[1].old);
    double *want = malloc(D * sizeof *want), *got = malloc(D * sizeof *got);
    uint8_t *changed = malloc(D);
    const uint64_t bases[2] = {2, 0}; /* after the whole first message; and with it */
    for (int t = 0; t < 2; t++) {
        gsp_msg sync;
        cr_assert_eq(gsp_sync_msg(&a, 1, bases[t], &sync), 0);
        cr_assert_eq(sync.base, bases[t]);
        corrections_rolled_back(&a.out[0], bases[t], D, want, changed);
        size_t n_changed = 0, listed = 0;
        for (int i = 0; i < D; i++)
            n_changed += changed[i];
        cr_assert_not_null(sync.corr_idx);
        cr_assert_eq(sync.n_corr, n_changed, "base %d: %zu listed, %zu changed", (int)bases[t], sync.n_corr,
                     n_changed);
        memset(got, 0, D * sizeof *got);
        for (size_t j = 0; j < sync.n_corr; j++) {
            cr_assert(j == 0 || sync.corr_idx[j] > sync.corr_idx[j - 1], "ascending");
            cr_assert(changed[sync.corr_idx[j]], "position %u was not changed", sync.corr_idx[j]);
            got[sync.corr_idx[j]] = sync.corr[j];
            listed++;
        }
        cr_assert_eq(memcmp(got, want, D * sizeof *got), 0, "base %d: the roll-back's doubles", (int)bases[t]);
        if (t == 0) /* 4 messages of 2% of the positions each */
            cr_assert(!gsp_sync_dense(D, sync.n_corr) && listed <= 4 * D / 50 + 4, "%zu listed", listed);
        else
            cr_assert_eq(sync.n_corr, D, "the whole first message changed every position");
        cr_assert_lt(gsp_msg_bytes(&sync), (t == 0 ? 5 : 13) * D * sizeof(float) / 4 + 64);
    }
    free(want), free(got), free(changed), free(x0);
    gsp_free(&a), gsp_free(&b);
}

Test(gossip_compressed, a_sync_from_the_receivers_seq_brings_what_it_lost_after_acks)
{
    enum { D = 512 };
    cmp_spec spec;
    char err[128];
    cr_assert_eq(cmp_spec_parse(&spec, "stc:0.1", err, sizeof err), 0, "%s", err);
    float x0[D];
    for (int i = 0; i < D; i++)
        x0[i] = sinf((float)i);
    gsp_peer a, b;
    cr_assert_eq(gsp_init(&a, 0, 2, D, 0, x0), 0);
    cr_assert_eq(gsp_init(&b, 1, 2, D, 0, NULL), 0);
    cr_assert_eq(gsp_set_codec(&a, &spec, 3, 0.5f), 0);
    cr_assert_eq(gsp_set_codec(&b, &spec, 3, 0.5f), 0);
    double mass0 = 0;
    for (int i = 0; i < D; i++)
        mass0 += x0[i];
    topo_out out = {.n = 1, .peer = {1}, .weight = {0.5}};
    for (int r = 1; r <= 6; r++) {
        gsp_msg m;
        for (int i = 0; i < D; i++) /* a step between rounds, so every message changes the reference */
            a.x[i] += 0.01f * cosf((float)(i * r));
        cr_assert_eq(gsp_emit(&a, &out, &m), 1);
        if (r <= 2)
            cr_assert_eq(gsp_absorb(&b, &m), GSP_APPLIED);
        else if (r == 6)
            cr_assert_eq(gsp_absorb(&b, &m), GSP_NEED_SYNC, "3 to 5 were lost");
    }
    cr_assert_eq(a.out[0].n_log, 6, "nothing acknowledged: every change kept");
    gsp_acked(&a, 1, 2);
    cr_assert_eq(a.out[0].n_log, 4, "acknowledged up to 2: changes of 3 to 6 kept");
    double w_moved = 0;
    for (int i = 0; i < D; i++) /* the steps are mass too */
        for (int r = 1; r <= 6; r++)
            w_moved += 0.01f * cosf((float)(i * r));
    gsp_msg sync;
    cr_assert_eq(gsp_sync_msg(&a, 1, 6, &sync), -EALREADY, "nothing after 6");
    cr_assert_eq(gsp_sync_msg(&a, 1, gsp_in_seq(&b, 0), &sync), 0);
    cr_assert_eq(sync.kind, GSP_SYNC);
    cr_assert_eq(sync.base, 2);
    cr_assert_eq(gsp_absorb(&b, &sync), GSP_APPLIED);
    cr_assert_eq(memcmp(a.out[0].ref, b.in[0].ref, D * sizeof(float)), 0, "the references agree again");
    cr_assert_float_eq(a.w + b.w, 2.0, 1e-15, "the weight whole");
    double mass = 0, scale = 0;
    for (int i = 0; i < D; i++)
        mass += (double)a.x[i] + (double)b.x[i], scale += fabs(x0[i]);
    cr_assert(fabs(mass - (mass0 + w_moved)) < 1e-5 * scale, "x mass %.9g, expected %.9g", mass, mass0 + w_moved);
    cr_assert_eq(gsp_edge_pending(&a, &b, NULL), 0.0);
    gsp_acked(&a, 1, 6);
    cr_assert_eq(a.out[0].n_log, 0);
    size_t st, cs;
    gsp_bytes(&b, &st, &cs);
    cr_assert_lt(st, 3 * D * sizeof(float) + 1024, "the receiver holds x, z and one reference: %zu bytes", st);
    gsp_free(&a), gsp_free(&b);
}

/* ---- the wire's rules on kinds, unasked SYNCs and totals (peer/wire/WIRE.md) ---- */

/* A pair of peers of DIM values, 0 sending to 1, with codec `spec` (NULL: none). */
static void wire_pair(gsp_peer *a, gsp_peer *b, cmp_spec *spec, const char *codec)
{
    float x0[DIM];
    for (int i = 0; i < DIM; i++)
        x0[i] = sinf((float)i) + 2.0f;
    cr_assert_eq(gsp_init(a, 0, 2, DIM, 0, x0), 0);
    cr_assert_eq(gsp_init(b, 1, 2, DIM, 0, x0), 0);
    if (codec) {
        char err[128];
        cr_assert_eq(cmp_spec_parse(spec, codec, err, sizeof err), 0, "%s", err);
        cr_assert_eq(gsp_set_codec(a, spec, 3, 0.5f), 0);
        cr_assert_eq(gsp_set_codec(b, spec, 3, 0.5f), 0);
    }
}

/* "Kinds and codecs": a receiver takes only the kinds of its own codec; a
 * RAW on a compressed edge (or a DELTA on an uncompressed one) is -EINVAL,
 * and nothing of it is applied or counted. */
Test(gossip_pushsum, a_push_of_the_other_kind_than_the_receiver_s_codec_is_refused)
{
    cmp_spec spec;
    gsp_peer a = {0}, b = {0}, u = {0}, v = {0};
    wire_pair(&a, &b, &spec, "none");
    wire_pair(&u, &v, NULL, NULL);
    topo_out out = {.n = 1, .peer = {1}, .weight = {0.5}};
    gsp_msg raw, delta;
    cr_assert_eq(gsp_emit(&u, &out, &raw), 1);
    cr_assert_eq(raw.kind, GSP_RAW);
    cr_assert_eq(gsp_emit(&a, &out, &delta), 1);
    cr_assert_eq(delta.kind, GSP_DELTA);
    struct {
        gsp_peer *to;
        const gsp_msg *m;
        const char *what;
    } cases[] = {{&b, &raw, "a RAW on a compressed edge"}, {&v, &delta, "a DELTA on an uncompressed one"}};
    for (int k = 0; k < 2; k++) {
        gsp_peer *r = cases[k].to;
        float x[DIM];
        memcpy(x, r->x, sizeof x);
        const double w = r->w;
        const gsp_stats st = r->stats;
        cr_assert_eq(gsp_absorb(r, cases[k].m), GSP_REFUSED, "%s", cases[k].what);
        cr_assert(strstr(r->refused_why, "--codec"), "%s: the reason names the setting", cases[k].what);
        cr_assert_eq(memcmp(r->x, x, sizeof x), 0, "%s: x moved", cases[k].what);
        cr_assert_eq(r->w, w, "%s: w moved", cases[k].what);
        cr_assert_eq(gsp_in_seq(r, 0), 0, "%s: its seq is not held", cases[k].what);
        cr_assert(r->stats.refused == st.refused + 1 && r->stats.ignored == st.ignored && r->stats.gaps == st.gaps,
                  "%s: counted as refused", cases[k].what);
    }
    /* the messages of the right kind are taken */
    cr_assert_eq(gsp_absorb(&b, &delta), GSP_APPLIED);
    cr_assert_eq(gsp_absorb(&v, &raw), GSP_APPLIED);
    gsp_free(&a), gsp_free(&b), gsp_free(&u), gsp_free(&v);
}

/* "A SYNC nobody asked for": taken by its base against the seq held,
 * whether or not the receiver sent a NACK. */
Test(gossip_compressed, a_sync_nobody_asked_for_is_taken_by_its_base)
{
    for (int c = 0; c < 4; c++) { /* base == held, base < held, base > held, seq <= held */
        cmp_spec spec;
        gsp_peer a = {0}, b = {0};
        wire_pair(&a, &b, &spec, "topk:0.25");
        topo_out out = {.n = 1, .peer = {1}, .weight = {0.5}};
        gsp_msg m;
        for (int r = 1; r <= 4; r++) { /* b holds 1 and 2; 3 and 4 are lost, and b does not know it */
            for (int i = 0; i < DIM; i++)
                a.x[i] += 0.01f * cosf((float)(i * r));
            cr_assert_eq(gsp_emit(&a, &out, &m), 1);
            if (r <= 2 || (c == 3 && r <= 4))
                cr_assert_eq(gsp_absorb(&b, &m), GSP_APPLIED);
        }
        const uint64_t held = gsp_in_seq(&b, 0);
        const uint64_t base = c == 0 ? held : c == 1 ? held - 1 : c == 2 ? held + 1 : held - 1;
        gsp_msg sync;
        cr_assert_eq(gsp_sync_msg(&a, 1, base, &sync), 0, "case %d", c);
        cr_assert_eq(sync.kind, GSP_SYNC);
        cr_assert_eq(sync.seq, 4);
        float x[DIM];
        memcpy(x, b.x, sizeof x);
        const double w = b.w, adopted = b.stats.w_adopted;
        const int rc = gsp_absorb(&b, &sync);
        switch (c) {
        case 0:
            cr_assert_eq(rc, 1, "base == held: applied");
            cr_assert_eq(memcmp(a.out[0].ref, b.in[0].ref, sizeof x), 0, "the references agree");
            cr_assert_float_eq(a.w + b.w, 2.0, 1e-15, "the weight whole");
            cr_assert_eq(gsp_in_seq(&b, 0), 4);
            break;
        case 1:
            cr_assert_eq(rc, GSP_NEED_SYNC, "base < held: asks again");
            cr_assert_eq(gsp_nack_seq(&b, &sync), held, "from the seq held");
            break;
        case 2:
            cr_assert_eq(rc, 0, "base > held: a baseline");
            cr_assert_eq(memcmp(b.x, x, sizeof x), 0, "nothing applied to x");
            cr_assert_eq(b.w, w, "nor to w");
            cr_assert_eq(memcmp(a.out[0].ref, b.in[0].ref, sizeof x), 0, "the edge takes its reference");
            cr_assert_eq(b.in[0].w, sync.w_total, "and its total");
            cr_assert_gt(b.stats.w_adopted, adopted, "the mass between is lost, and counted");
            cr_assert_eq(gsp_in_seq(&b, 0), 4);
            break;
        case 3:
            cr_assert_eq(rc, 0, "seq <= held: ignored");
            cr_assert_eq(memcmp(b.x, x, sizeof x), 0);
            cr_assert_eq(b.w, w);
            break;
        }
        gsp_free(&a), gsp_free(&b);
    }
}

/* "Running totals": RAW x totals may go down, w_total may not. */
Test(gossip_pushsum, raw_totals_may_go_down_w_total_may_not)
{
    gsp_peer g = {0};
    float x0[DIM] = {0};
    cr_assert_eq(gsp_init(&g, 1, 2, DIM, 0, x0), 0);
    double tot[DIM] = {0};
    for (int i = 0; i < DIM; i++)
        tot[i] = 1.0 + i;
    gsp_msg m = {.src = 0, .dst = 1, .round = 0, .seq = 1, .kind = GSP_RAW, .w_total = 0.5, .dim = DIM,
                 .x_total = tot};
    cr_assert_eq(gsp_absorb(&g, &m), GSP_APPLIED);
    const float x3 = g.x[3];
    tot[3] -= 2.5; /* a coordinate whose shares were negative since */
    m.seq = 2, m.w_total = 0.75;
    cr_assert_eq(gsp_absorb(&g, &m), GSP_APPLIED, "a total that went down is taken");
    cr_assert_float_eq(g.x[3], x3 - 2.5f, 1e-6, "its change applied");
    m.seq = 3, m.w_total = 0.75;
    cr_assert_eq(gsp_absorb(&g, &m), GSP_APPLIED, "w_total may repeat");
    m.seq = 4, m.w_total = 0.625;
    cr_assert_eq(gsp_absorb(&g, &m), GSP_REFUSED, "w_total may not go down");
    gsp_free(&g);
}

/* "Running totals", seq: a NACK's answer repeats the last seq sent, and a
 * PUSH whose seq is at most the one held is ignored. */
Test(gossip_pushsum, a_nack_s_answer_repeats_the_last_seq_and_a_seq_held_is_ignored)
{
    for (int c = 0; c < 2; c++) {
        cmp_spec spec;
        gsp_peer a = {0}, b = {0};
        wire_pair(&a, &b, &spec, c ? "topk:0.25" : NULL);
        topo_out out = {.n = 1, .peer = {1}, .weight = {0.5}};
        gsp_msg m;
        for (int r = 1; r <= 3; r++) {
            cr_assert_eq(gsp_emit(&a, &out, &m), 1);
            cr_assert_eq(m.seq, (uint64_t)r, "each message the next seq");
            if (r == 1)
                cr_assert_eq(gsp_absorb(&b, &m), GSP_APPLIED);
        }
        gsp_msg answer;
        cr_assert_eq(gsp_sync_msg(&a, 1, gsp_in_seq(&b, 0), &answer), 0);
        cr_assert_eq(answer.kind, c ? GSP_SYNC : GSP_RAW);
        cr_assert_eq(answer.seq, 3, "%s: the last seq sent, again", c ? "SYNC" : "RAW");
        cr_assert_eq(gsp_absorb(&b, &answer), GSP_APPLIED);
        const double w = b.w;
        const uint64_t ignored = b.stats.ignored;
        cr_assert_eq(gsp_absorb(&b, &m), GSP_IGNORED, "seq 3 again: held");
        cr_assert_eq(gsp_absorb(&b, &answer), GSP_IGNORED, "the answer again: held");
        cr_assert_eq(b.w, w);
        cr_assert_eq(b.stats.ignored, ignored + 2);
        gsp_free(&a), gsp_free(&b);
    }
}
