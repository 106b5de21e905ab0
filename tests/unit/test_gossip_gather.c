/* gossip/gsp_gather.h: the exact sparse all-gather. Its arithmetic against
 * a reference computed here from the decoded messages (error feedback, the
 * median-norm clipping, the mean over the peers that picked a value), every
 * peer's model the same bits after every round, late and duplicate
 * messages, models that differ seen through the digest, and what is refused. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress/cmp.h"
#include "gossip/gsp.h"
#include "gossip/gsp_gather.h"
#include "gossip/gsp_pool.h"

TestSuite(gossip_gather, .timeout = 60);

#define N 4
#define DIM 300

typedef struct cluster {
    gsp_peer g[N];
    cmp_spec codec;
} cluster;

static void cluster_init(cluster *c, const char *codec, float decay)
{
    char err[128];
    cr_assert_eq(cmp_spec_parse(&c->codec, codec, err, sizeof err), 0, "%s", err);
    float x0[DIM];
    for (int i = 0; i < DIM; i++)
        x0[i] = sinf((float)i);
    for (int p = 0; p < N; p++) {
        cr_assert_eq(gsp_init(&c->g[p], p, N, DIM, 0, x0), 0);
        cr_assert_eq(gsp_set_codec(&c->g[p], &c->codec, 7, 1.0f), 0);
        cr_assert_eq(gsp_set_gather(&c->g[p], decay), 0);
    }
}

static void cluster_free(cluster *c)
{
    for (int p = 0; p < N; p++)
        gsp_free(&c->g[p]);
}

/* Each peer's "local steps": x moves by its own pattern. */
static void local_steps(cluster *c, int round)
{
    for (int p = 0; p < N; p++)
        for (int i = 0; i < DIM; i++)
            c->g[p].x[i] += 0.01f * cosf((float)(i * (p + 1) + round)) * (float)(1 + (i % 7 == p));
}

static void everyone_but(int p, topo_out *out)
{
    out->n = 0;
    for (int q = 0; q < N; q++)
        if (q != p)
            out->peer[out->n] = q, out->weight[out->n++] = 1.0 / N;
}

/* Emit at every peer; copies of the messages in msgs[p][k]. */
static void emit_all(cluster *c, gsp_msg msgs[N][N], int n_msgs[N])
{
    for (int p = 0; p < N; p++) {
        topo_out out;
        everyone_but(p, &out);
        gsp_msg m[TOPO_MAX_OUT];
        n_msgs[p] = gsp_emit(&c->g[p], &out, m);
        cr_assert_eq(n_msgs[p], N - 1);
        for (int k = 0; k < n_msgs[p]; k++) {
            cr_assert_eq(m[k].kind, GSP_GATHER);
            cr_assert_eq(gsp_msg_copy(&msgs[p][k], &m[k]), 0);
        }
    }
}

static void deliver(cluster *c, gsp_msg msgs[N][N], const int n_msgs[N], int skip_src, int skip_dst)
{
    for (int p = 0; p < N; p++)
        for (int k = 0; k < n_msgs[p]; k++) {
            gsp_msg *m = &msgs[p][k];
            if (!(m->src == skip_src && m->dst == skip_dst))
                cr_assert_eq(gsp_absorb(&c->g[m->dst], m), GSP_APPLIED);
        }
}

static void free_msgs(gsp_msg msgs[N][N], const int n_msgs[N])
{
    for (int p = 0; p < N; p++)
        for (int k = 0; k < n_msgs[p]; k++)
            gsp_msg_free(&msgs[p][k]);
}

Test(gossip_gather, a_round_applies_the_clipped_mean_of_the_peers_that_picked_each_value)
{
    cluster c;
    cluster_init(&c, "sparseloco:8:64", 0.9f);
    float err[N][DIM] = {{0}}; /* the reference's error feedback */
    for (int round = 0; round < 5; round++) {
        float a[DIM], delta[N][DIM];
        memcpy(a, c.g[0].x, sizeof a);
        local_steps(&c, round);
        for (int p = 0; p < N; p++)
            for (int i = 0; i < DIM; i++)
                delta[p][i] = a[i] - c.g[p].x[i];
        gsp_msg msgs[N][N];
        int n_msgs[N];
        emit_all(&c, msgs, n_msgs);
        /* The reference: each peer's message decoded, e = decay e + delta - c. */
        float dec[N][DIM];
        double norm[N];
        for (int p = 0; p < N; p++) {
            cr_assert_eq(cmp_decode(msgs[p][0].payload, msgs[p][0].payload_len, DIM, dec[p]), 0);
            norm[p] = 0;
            for (int i = 0; i < DIM; i++) {
                err[p][i] = 0.9f * err[p][i] + delta[p][i];
                cr_assert_eq(c.g[p].gather->err[i], err[p][i] - dec[p][i], "round %d peer %d value %d", round, p, i);
                err[p][i] -= dec[p][i];
                norm[p] += (double)dec[p][i] * dec[p][i];
            }
            norm[p] = sqrt(norm[p]);
            for (int i = 0; i < DIM; i++) /* the local steps are gone until the apply */
                cr_assert_eq(c.g[p].x[i], a[i]);
        }
        double sorted[N];
        memcpy(sorted, norm, sizeof sorted);
        for (int i = 0; i < N; i++)
            for (int j = i + 1; j < N; j++)
                if (sorted[j] < sorted[i]) {
                    double t = sorted[i];
                    sorted[i] = sorted[j], sorted[j] = t;
                }
        const double median = sorted[(N - 1) / 2];
        float want[DIM];
        int picked_by_some = 0, picked_by_several = 0;
        for (int i = 0; i < DIM; i++) {
            float sum = 0;
            int count = 0;
            for (int p = 0; p < N; p++)
                if (dec[p][i] != 0.0f) {
                    const float k = norm[p] > median ? (float)(median / norm[p]) : 1.0f;
                    sum += k * dec[p][i], count++;
                }
            want[i] = count ? a[i] - sum / (float)count : a[i];
            picked_by_some += count > 0, picked_by_several += count > 1;
        }
        cr_assert(picked_by_some > 0 && picked_by_several > 0, "round %d: the test needs overlapping picks", round);
        deliver(&c, msgs, n_msgs, -1, -1);
        for (int p = 0; p < N; p++) {
            cr_assert_eq(gsp_gather_apply(&c.g[p]), N);
            cr_assert_eq(c.g[p].w, 1.0);
            for (int i = 0; i < DIM; i++)
                cr_assert_eq(c.g[p].x[i], want[i], "round %d peer %d value %d: %.9g, want %.9g", round, p, i,
                             c.g[p].x[i], want[i]);
            cr_assert_eq(c.g[p].gather->apart_from, -1);
        }
        free_msgs(msgs, n_msgs);
    }
    cluster_free(&c);
}

Test(gossip_gather, a_late_message_sets_a_peer_apart_and_the_lowest_sender_s_model_brings_it_back)
{
    cluster c;
    cluster_init(&c, "topk:0.05", 0.95f);
    gsp_msg msgs[N][N];
    int n_msgs[N];
    local_steps(&c, 0);
    emit_all(&c, msgs, n_msgs);
    deliver(&c, msgs, n_msgs, 1, 3); /* peer 3 lacks peer 1's message of round 0 */
    for (int p = 0; p < N; p++)
        gsp_gather_apply(&c.g[p]);
    cr_assert_neq(memcmp(c.g[3].x, c.g[0].x, sizeof(float) * DIM), 0, "a message missing makes a difference");
    cr_assert_eq(memcmp(c.g[2].x, c.g[0].x, sizeof(float) * DIM), 0);
    gsp_msg late = msgs[1][2]; /* 1 -> 3 is the third of peer 1's messages */
    cr_assert_eq(late.dst, 3);
    msgs[1][2] = (gsp_msg){0};
    free_msgs(msgs, n_msgs);
    local_steps(&c, 1);
    emit_all(&c, msgs, n_msgs);
    cr_assert_eq(gsp_absorb(&c.g[3], &late), GSP_IGNORED, "a message of a round applied already");
    cr_assert_eq(c.g[3].gather->stale, 1);
    deliver(&c, msgs, n_msgs, -1, -1);
    for (int p = 0; p < N; p++)
        gsp_gather_apply(&c.g[p]);
    /* Round 1's lowest sender, peer 0, decides: peer 3 differs from it, the
     * others agree. */
    cr_assert_eq(c.g[0].gather->apart_from, -1);
    cr_assert_eq(c.g[1].gather->apart_from, -1);
    cr_assert_eq(c.g[2].gather->apart_from, -1);
    cr_assert_eq(c.g[3].gather->apart_from, 0);
    cr_assert_neq(memcmp(c.g[3].x, c.g[0].x, sizeof(float) * DIM), 0);
    free_msgs(msgs, n_msgs);
    /* Round 2: peer 0's model between rounds (the start of round 2) is
     * offered to peer 3 after both emitted it; peer 3 takes it at its apply,
     * and from there every model is the same bits again. */
    local_steps(&c, 2);
    emit_all(&c, msgs, n_msgs);
    cr_assert_eq(gsp_gather_offer(&c.g[3], c.g[0].x, 2), 0);
    deliver(&c, msgs, n_msgs, -1, -1);
    for (int p = 0; p < N; p++)
        gsp_gather_apply(&c.g[p]);
    cr_assert_eq(c.g[3].gather->taken, 1);
    for (int p = 1; p < N; p++)
        cr_assert_eq(memcmp(c.g[p].x, c.g[0].x, sizeof(float) * DIM), 0, "peer %d", p);
    free_msgs(msgs, n_msgs);
    /* An offer for the round a peer has yet to emit is taken at its emit;
     * one two rounds old is brought forward by the updates applied since;
     * one older than the history kept is dropped. */
    float *old = malloc(sizeof(float) * DIM);
    memcpy(old, c.g[0].x, sizeof(float) * DIM); /* the start of round 3 */
    for (int round = 3; round < 6; round++) {
        local_steps(&c, round);
        if (round == 3)
            cr_assert_eq(gsp_gather_offer(&c.g[2], c.g[0].gather->anchor, 3), 0);
        if (round == 5) {
            cr_assert_eq(gsp_gather_offer(&c.g[1], old, 3), 0);
            for (int i = 0; i < DIM; i++) /* (were it taken as it is, peer 1 would be apart) */
                c.g[1].gather->anchor[i] += 1e-3f;
            cr_assert_eq(gsp_gather_offer(&c.g[3], old, 3 - GSP_GATHER_HISTORY), 0);
        }
        emit_all(&c, msgs, n_msgs);
        deliver(&c, msgs, n_msgs, -1, -1);
        for (int p = 0; p < N; p++)
            gsp_gather_apply(&c.g[p]);
        free_msgs(msgs, n_msgs);
    }
    free(old);
    cr_assert_eq(c.g[2].gather->taken, 1);
    cr_assert_eq(c.g[1].gather->taken, 1, "taken %llu dropped %llu", (unsigned long long)c.g[1].gather->taken,
                 (unsigned long long)c.g[1].gather->dropped);
    cr_assert_eq(c.g[3].gather->taken, 1, "its first only");
    cr_assert_eq(c.g[3].gather->dropped, 1);
    for (int p = 1; p < N; p++)
        cr_assert_eq(memcmp(c.g[p].x, c.g[0].x, sizeof(float) * DIM), 0, "peer %d", p);
    for (int p = 0; p < N; p++)
        cr_assert_eq(c.g[p].gather->apart_from, -1, "peer %d", p);
    gsp_msg_free(&late);
    cluster_free(&c);
}

/* A caller's steps (libsgp) run in a buffer of its own: x and the anchor
 * are one array, and the emit reads where the steps ended. The same floats
 * as the steps folded onto x (engine_step_taken's x + w (z - x), w = 1),
 * through a late message and the offer that brings a peer back, with a copy
 * of the model less. */
Test(gossip_gather, steps_taken_outside_x_give_the_same_floats_with_one_copy_less)
{
    cluster in, out;
    cluster_init(&in, "topk:0.05", 0.95f);
    cluster_init(&out, "topk:0.05", 0.95f);
    const size_t held = gsp_gather_bytes(&out.g[0]);
    for (int p = 0; p < N; p++)
        gsp_gather_outside_steps(&out.g[p]);
    cr_assert_eq(gsp_gather_bytes(&out.g[0]), held - DIM * sizeof(float));
    cr_assert_eq(out.g[0].gather->anchor, out.g[0].x);
    static float z[N][DIM];
    for (int round = 0; round < 4; round++) {
        for (int p = 0; p < N; p++) /* the caller's step, from the model handed out */
            for (int i = 0; i < DIM; i++)
                z[p][i] = in.g[p].x[i] + 0.01f * cosf((float)(i * (p + 1) + round));
        for (int p = 0; p < N; p++) {
            for (int i = 0; i < DIM; i++)
                in.g[p].x[i] = in.g[p].x[i] + 1.0f * (z[p][i] - in.g[p].x[i] * 1.0f);
            gsp_gather_steps_at(&out.g[p], z[p]);
        }
        if (round == 2) { /* peer 3, apart since round 1, takes peer 0's model */
            cr_assert_eq(gsp_gather_offer(&in.g[3], in.g[0].gather->anchor, 2), 0);
            cr_assert_eq(gsp_gather_offer(&out.g[3], out.g[0].gather->anchor, 2), 0);
        }
        gsp_msg mi[N][N], mo[N][N];
        int ni[N], no[N];
        emit_all(&in, mi, ni);
        emit_all(&out, mo, no);
        deliver(&in, mi, ni, round == 1 ? 1 : -1, 3); /* peer 3 lacks peer 1's message of round 1 */
        deliver(&out, mo, no, round == 1 ? 1 : -1, 3);
        for (int p = 0; p < N; p++) {
            cr_assert_eq(gsp_gather_apply(&in.g[p]), gsp_gather_apply(&out.g[p]));
            cr_assert_eq(memcmp(in.g[p].x, out.g[p].x, sizeof(float) * DIM), 0, "round %d peer %d", round, p);
            cr_assert_eq(in.g[p].gather->digest, out.g[p].gather->digest);
        }
        free_msgs(mi, ni);
        free_msgs(mo, no);
    }
    cr_assert_eq(out.g[3].gather->taken, 1);
    cr_assert_eq(memcmp(out.g[3].x, out.g[0].x, sizeof(float) * DIM), 0);
    topo_out to;
    everyone_but(0, &to);
    gsp_msg m[TOPO_MAX_OUT];
    cr_assert_eq(gsp_emit(&out.g[0], &to, m), -EINVAL, "an emit with nowhere the steps ended");
    cluster_free(&in);
    cluster_free(&out);
}

/* --overlap (gsp_gather_fold): a round's steps ran from zs to z while the
 * round before was applied; the fold takes their progress into the error
 * feedback (as an emit would: zs - (zs + (z - zs))), starts the next steps
 * from the model applied so far plus that progress (into zs and the
 * caller's z), and the emit then sends from the feedback without taking
 * the steps in again. */
Test(gossip_gather, a_fold_takes_the_progress_in_and_starts_from_the_applied_model_plus_it)
{
    cluster c;
    cluster_init(&c, "topk:0.05", 0.9f);
    static float zs[N][DIM], z[N][DIM], want_err[N][DIM], want_start[N][DIM];
    for (int p = 0; p < N; p++) {
        gsp_gather_outside_steps(&c.g[p]);
        memcpy(zs[p], c.g[p].x, sizeof zs[p]);
    }
    for (int round = 0; round < 3; round++) {
        for (int p = 0; p < N; p++) {
            for (int i = 0; i < DIM; i++) {
                z[p][i] = zs[p][i] + 0.01f * cosf((float)(i * (p + 1) + round));
                const float d = z[p][i] - zs[p][i];
                want_err[p][i] = 0.9f * c.g[p].gather->err[i] + (zs[p][i] - (zs[p][i] + d));
                want_start[p][i] = c.g[p].x[i] + d;
            }
            gsp_gather_fold(&c.g[p], zs[p], z[p], 1);
            for (int i = 0; i < DIM; i++) {
                cr_assert_eq(c.g[p].gather->err[i], want_err[p][i], "round %d peer %d value %d", round, p, i);
                cr_assert_eq(zs[p][i], want_start[p][i]);
                cr_assert_eq(z[p][i], want_start[p][i], "the caller's buffer holds the next start");
            }
        }
        gsp_msg msgs[N][N];
        int n_msgs[N];
        emit_all(&c, msgs, n_msgs);
        for (int p = 0; p < N; p++) { /* the emit took only the message out of the feedback */
            float dec[DIM];
            cr_assert_eq(cmp_decode(msgs[p][0].payload, msgs[p][0].payload_len, DIM, dec), 0);
            for (int i = 0; i < DIM; i++)
                cr_assert_eq(c.g[p].gather->err[i], want_err[p][i] - dec[i]);
        }
        deliver(&c, msgs, n_msgs, -1, -1);
        for (int p = 0; p < N; p++)
            cr_assert_eq(gsp_gather_apply(&c.g[p]), N);
        for (int p = 1; p < N; p++)
            cr_assert_eq(memcmp(c.g[p].x, c.g[0].x, sizeof(float) * DIM), 0, "round %d peer %d", round, p);
        free_msgs(msgs, n_msgs);
    }
    cluster_free(&c);
}

/* WIRE.md, "The model id of a GATHER", computed here from its words. */
static uint64_t model_id_by_the_page(const float *x, size_t n)
{
    const uint64_t basis = 0xcbf29ce484222325ULL, prime = 0x100000001b3ULL;
    uint64_t id = basis;
    for (size_t s = 0; s < n; s += (size_t)1 << 20) {
        uint64_t lane[4] = {basis, basis, basis, basis};
        for (size_t i = 0; i < ((size_t)1 << 20) && s + i < n; i++) {
            uint32_t u;
            memcpy(&u, &x[s + i], sizeof u);
            lane[i % 4] = (lane[i % 4] ^ u) * prime;
        }
        uint64_t chunk = basis;
        for (int l = 0; l < 4; l++)
            chunk = (chunk ^ lane[l]) * prime;
        id = (id ^ chunk) * prime;
    }
    return id ? id : 1;
}

static gsp_peer *gather_peer(size_t dim, const float *x0, cmp_spec *codec)
{
    static gsp_peer g;
    char err[64];
    cr_assert_eq(cmp_spec_parse(codec, "topk:0.01", err, sizeof err), 0);
    cr_assert_eq(gsp_init(&g, 0, 2, dim, 0, x0), 0);
    cr_assert_eq(gsp_set_codec(&g, codec, 7, 1.0f), 0);
    cr_assert_eq(gsp_set_gather(&g, 0.9f), 0);
    return &g;
}

/* The id a GATHER carries: the page's example, and a model of two chunks
 * and a part the same on one thread and on a pool of three (whose chunks
 * finish in any order). */
Test(gossip_gather, the_model_id_of_a_gather_is_the_same_whatever_the_pool)
{
    cmp_spec codec;
    const float two[2] = {1.5f, -2.0f};
    gsp_peer *g = gather_peer(2, two, &codec);
    cr_assert_eq(gsp_gather_model_id(g, two), 0x53f0a8c26e5356d0ULL, "WIRE.md's example");
    cr_assert_eq(g->gather->digest, 0x53f0a8c26e5356d0ULL);
    gsp_free(g);
    const size_t n = ((size_t)5 << 19) + 3;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = sinf((float)i * 0.001f);
    g = gather_peer(n, x, &codec);
    const uint64_t want = model_id_by_the_page(x, n);
    cr_assert_eq(gsp_gather_model_id(g, x), want);
    gsp_pool *pool;
    cr_assert_eq(gsp_pool_new(&pool, 3), 0);
    gsp_set_pool(g, pool);
    cr_assert_eq(gsp_gather_model_id(g, x), want);
    x[n - 1] = -x[n - 1]; /* (the last chunk's last value counts) */
    cr_assert_neq(gsp_gather_model_id(g, x), want);
    gsp_free(g);
    gsp_pool_free(pool);
    free(x);
}

Test(gossip_gather, what_a_gather_peer_refuses)
{
    cluster c;
    cluster_init(&c, "sparseloco:8:64", 0.95f);
    gsp_msg msgs[N][N];
    int n_msgs[N];
    local_steps(&c, 0);
    emit_all(&c, msgs, n_msgs);
    /* A push-sum DELTA from a peer of another configuration. */
    gsp_msg m = msgs[1][0];
    m.kind = GSP_DELTA;
    cr_assert_eq(gsp_absorb(&c.g[0], &m), GSP_REFUSED);
    /* A payload that does not decode. */
    uint8_t junk[5] = {0xff, 0xff, 0xff, 0xff, 0xff};
    m = msgs[1][0], m.payload = junk, m.payload_len = sizeof junk;
    cr_assert_lt(gsp_absorb(&c.g[0], &m), 0);
    /* A message of another codec with more entries than ours would send. */
    cmp_spec dense;
    char err[64];
    cr_assert_eq(cmp_spec_parse(&dense, "topk:0.5", err, sizeof err), 0);
    float v[DIM];
    for (int i = 0; i < DIM; i++)
        v[i] = 1.0f + (float)i;
    uint8_t *buf = malloc(cmp_bound(&dense, DIM));
    void *work = malloc(cmp_work_size(&dense, DIM) + 1);
    long len = cmp_encode(&dense, v, DIM, 1, work, buf, cmp_bound(&dense, DIM));
    free(work);
    cr_assert_gt(len, 0);
    m = msgs[1][0], m.payload = buf, m.payload_len = (size_t)len;
    cr_assert_eq(gsp_absorb(&c.g[0], &m), GSP_REFUSED);
    free(buf);
    /* A gather message at a push-sum peer. */
    gsp_peer ps;
    cr_assert_eq(gsp_init(&ps, 0, N, DIM, 0, NULL), 0);
    cr_assert_eq(gsp_set_codec(&ps, &c.codec, 7, 0.5f), 0);
    cr_assert_eq(gsp_absorb(&ps, &msgs[1][0]), GSP_REFUSED);
    /* The set-up's conditions. */
    cr_assert_eq(gsp_set_gather(&ps, 0.9f), -EINVAL, "a step below 1");
    gsp_free(&ps);
    cr_assert_eq(gsp_init(&ps, 0, N, DIM, 0, NULL), 0);
    cr_assert_eq(gsp_set_gather(&ps, 0.9f), -EINVAL, "no codec");
    cr_assert_eq(gsp_set_codec(&ps, &c.codec, 7, 1.0f), 0);
    cr_assert_eq(gsp_set_gather(&ps, 1.5f), -EINVAL, "a decay above 1");
    gsp_free(&ps);
    /* Nothing of what was refused moved anything: the round still applies as at the others. */
    deliver(&c, msgs, n_msgs, -1, -1);
    for (int p = 0; p < N; p++)
        gsp_gather_apply(&c.g[p]);
    for (int p = 1; p < N; p++)
        cr_assert_eq(memcmp(c.g[p].x, c.g[0].x, sizeof(float) * DIM), 0, "peer %d", p);
    free_msgs(msgs, n_msgs);
    cluster_free(&c);
}
