/* The graph model: generators give the edges topologies/FORMAT.md defines,
 * routing around dead peers never sends mass to one and never loses any,
 * in-lists are the inverse of out-lists, and the mixing analysis finds the
 * exponential graph exact in log2 n rounds exactly when n is a power of two. */
#include "topologies/topo.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(topo_graph, .timeout = 120);

static void gen(topo *t, const char *kind, int n, const char *params)
{
    parse_error e;
    int rc = topo_generate(t, kind, n, params, &e);
    cr_assert_eq(rc, 0, "%s n=%d %s: %s", kind, n, params ? params : "", e.msg);
}

static void gen_fails(const char *kind, int n, const char *params, const char *needle)
{
    topo t;
    parse_error e;
    int rc = topo_generate(&t, kind, n, params, &e);
    cr_assert_eq(rc, -EINVAL, "%s n=%d %s: rc %d", kind, n, params ? params : "", rc);
    cr_assert(strstr(e.msg, needle), "expected '%s' in: %s", needle, e.msg);
    cr_assert_null(t.edges);
}

/* Scheduled (unrouted) targets of peer i in phase p, self-edges excluded. */
static int targets(const topo *t, int p, int i, int *out)
{
    const size_t *at = t->out_at + (size_t)p * ((size_t)t->n_peers + 1);
    int c = 0;
    for (size_t k = at[i]; k < at[i + 1]; k++)
        if (t->edges[k].dst != i)
            out[c++] = t->edges[k].dst;
    return c;
}

static void expect_targets(const topo *t, int p, int i, const int *want, int n_want)
{
    int got[TOPO_MAX_OUT + 1];
    int n = targets(t, p, i, got);
    cr_assert_eq(n, n_want, "%s phase %d peer %d: %d targets, want %d", t->kind, p, i, n, n_want);
    /* want in any order; got is ascending */
    for (int a = 0; a < n_want; a++) {
        int found = 0;
        for (int b = 0; b < n; b++)
            found |= got[b] == want[a];
        cr_assert(found, "%s phase %d peer %d: %d is not a target", t->kind, p, i, want[a]);
    }
}

/* ---- generators ---------------------------------------------------------------- */

Test(topo_graph, exponential_8_phase_by_phase)
{
    topo t;
    gen(&t, "exponential", 8, NULL);
    cr_assert_str_eq(t.kind, "exponential");
    cr_assert_eq(t.n_phases, 3);
    cr_assert_not(t.weighted);
    static const int offset[3] = {1, 2, 4};
    for (int p = 0; p < 3; p++) {
        cr_assert_eq(t.phase_at[p + 1] - t.phase_at[p], 8, "one edge per peer in phase %d", p);
        for (int i = 0; i < 8; i++) {
            int want = (i + offset[p]) % 8;
            expect_targets(&t, p, i, &want, 1);
        }
    }
    /* the written-out table of exp8, as in FORMAT.md */
    int got;
    targets(&t, 0, 7, &got);
    cr_assert_eq(got, 0);
    targets(&t, 1, 7, &got);
    cr_assert_eq(got, 1);
    targets(&t, 2, 5, &got);
    cr_assert_eq(got, 1);
    cr_assert_eq(t.max_out, 1);
    cr_assert_eq(t.max_in, 1);
    topo_free(&t);
}

Test(topo_graph, exponential_on_a_non_power_of_two)
{
    topo t;
    gen(&t, "exponential", 12, NULL);
    cr_assert_eq(t.n_phases, 4, "ceil(log2 12)");
    static const int offset[4] = {1, 2, 4, 8};
    for (int p = 0; p < 4; p++)
        for (int i = 0; i < 12; i++) {
            int want = (i + offset[p]) % 12;
            expect_targets(&t, p, i, &want, 1);
        }
    char note[300];
    cr_assert_eq(topo_note(&t, note, sizeof note), 1);
    cr_assert(strstr(note, "not a power of two"), "%s", note);
    topo_free(&t);
    gen(&t, "exponential", 16, NULL);
    cr_assert_eq(topo_note(&t, note, sizeof note), 0);
    topo_free(&t);
    gen(&t, "ring", 12, NULL);
    cr_assert_eq(topo_note(&t, note, sizeof note), 0, "the note is about exponential graphs only");
    topo_free(&t);
}

Test(topo_graph, ring)
{
    topo t;
    gen(&t, "ring", 5, NULL);
    cr_assert_eq(t.n_phases, 1);
    cr_assert_eq(t.phase_at[1], 5);
    for (int i = 0; i < 5; i++) {
        int want = (i + 1) % 5;
        expect_targets(&t, 0, i, &want, 1);
    }
    topo_free(&t);
    gen(&t, "ring", 1, NULL);
    cr_assert_eq(t.phase_at[1], 0, "one peer, no edges");
    topo_free(&t);
}

Test(topo_graph, n_peer_exponential_rotates)
{
    topo t;
    gen(&t, "n-peer-exponential", 16, "out=2");
    cr_assert_str_eq(t.kind, "n-peer-exponential out=2");
    cr_assert_eq(t.n_phases, 4);
    for (int p = 0; p < 4; p++)
        for (int i = 0; i < 16; i++) {
            int want[2] = {(i + (1 << p)) % 16, (i + (1 << ((p + 1) % 4))) % 16};
            expect_targets(&t, p, i, want, 2);
        }
    cr_assert_eq(t.max_out, 2);
    cr_assert_eq(t.max_in, 2);
    topo_free(&t);
    gen_fails("n-peer-exponential", 16, "out=5", "out=5");
    gen_fails("n-peer-exponential", 16, "out=0", "out=0");
}

Test(topo_graph, bipartite_exponential_crosses_halves)
{
    topo t;
    gen(&t, "bipartite-exponential", 16, NULL);
    cr_assert_eq(t.n_phases, 4);
    static const int offset[4] = {1, 3, 5, 9};
    for (int p = 0; p < 4; p++)
        for (int i = 0; i < 16; i++) {
            int want = (i + offset[p]) % 16;
            expect_targets(&t, p, i, &want, 1);
            cr_assert_neq(want % 2, i % 2, "every message crosses the halves");
        }
    topo_free(&t);
    gen_fails("bipartite-exponential", 9, NULL, "even");
}

Test(topo_graph, torus_degrees_and_edges)
{
    topo t;
    gen(&t, "torus", 16, NULL);
    cr_assert_str_eq(t.kind, "torus rows=4 cols=4");
    cr_assert_eq(t.n_phases, 1);
    int in_deg[16] = {0};
    for (int i = 0; i < 16; i++) {
        int got[8];
        cr_assert_eq(targets(&t, 0, i, got), 2, "out-degree of %d", i);
        in_deg[got[0]]++, in_deg[got[1]]++;
    }
    for (int i = 0; i < 16; i++)
        cr_assert_eq(in_deg[i], 2, "in-degree of %d", i);
    int w5[2] = {6, 9}, w3[2] = {0, 7}, w15[2] = {12, 3};
    expect_targets(&t, 0, 5, w5, 2);
    expect_targets(&t, 0, 3, w3, 2);
    expect_targets(&t, 0, 15, w15, 2);
    topo_free(&t);

    gen(&t, "torus", 12, NULL);
    cr_assert_str_eq(t.kind, "torus rows=3 cols=4", "near-square default");
    topo_free(&t);
    gen(&t, "torus", 16, "rows=2");
    cr_assert_str_eq(t.kind, "torus rows=2 cols=8");
    topo_free(&t);
    gen(&t, "torus", 7, NULL);
    cr_assert_str_eq(t.kind, "torus rows=1 cols=7", "a prime is a ring");
    cr_assert_eq(t.max_out, 1);
    topo_free(&t);
    gen_fails("torus", 16, "rows=3 cols=5", "rows=3 x cols=5");
    gen_fails("torus", 16, "cols=5", "cols=5 does not divide");
}

Test(topo_graph, complete_and_star)
{
    topo t;
    gen(&t, "complete", 5, NULL);
    for (int i = 0; i < 5; i++) {
        int want[4], c = 0;
        for (int j = 0; j < 5; j++)
            if (j != i)
                want[c++] = j;
        expect_targets(&t, 0, i, want, 4);
    }
    cr_assert_eq(t.max_in, 4);
    topo_free(&t);
    gen(&t, "complete", 65, NULL);
    cr_assert_eq(t.max_out, 64);
    topo_free(&t);
    gen_fails("complete", 66, NULL, "at most 64");

    gen(&t, "star", 6, "center=2");
    cr_assert_str_eq(t.kind, "star center=2");
    int leaves[5] = {0, 1, 3, 4, 5}, center = 2;
    expect_targets(&t, 0, 2, leaves, 5);
    for (int k = 0; k < 5; k++)
        expect_targets(&t, 0, leaves[k], &center, 1);
    cr_assert_eq(t.max_in, 5);
    topo_free(&t);
    gen(&t, "star", 4, NULL);
    cr_assert_str_eq(t.kind, "star center=0");
    topo_free(&t);
    gen_fails("star", 6, "center=6", "center=6");
    gen_fails("star", 66, NULL, "at most 64");
}

static int same_edges(const topo *a, const topo *b)
{
    if (a->n_phases != b->n_phases || a->phase_at[a->n_phases] != b->phase_at[b->n_phases])
        return 0;
    for (size_t k = 0; k < a->phase_at[a->n_phases]; k++)
        if (a->edges[k].src != b->edges[k].src || a->edges[k].dst != b->edges[k].dst)
            return 0;
    return 1;
}

Test(topo_graph, random_is_seeded_with_exact_out_degree)
{
    topo a, b, c;
    gen(&a, "random", 20, "out=3 seed=5 phases=3");
    gen(&b, "random", 20, "seed=5 out=3 phases=3");
    gen(&c, "random", 20, "out=3 seed=6 phases=3");
    cr_assert_str_eq(a.kind, "random out=3 seed=5 phases=3");
    cr_assert(same_edges(&a, &b), "same seed, same graph");
    cr_assert_not(same_edges(&a, &c), "another seed, another graph");
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < 20; i++) {
            int got[TOPO_MAX_OUT];
            cr_assert_eq(targets(&a, p, i, got), 3, "phase %d peer %d", p, i);
            for (int k = 0; k < 3; k++) {
                cr_assert_neq(got[k], i, "no self target");
                if (k)
                    cr_assert_lt(got[k - 1], got[k], "distinct targets");
            }
        }
    parse_error e;
    cr_assert_eq(topo_validate(&a, &e), 0, "%s", e.msg);
    topo_free(&a), topo_free(&b), topo_free(&c);

    /* every target is drawn: over many seeds each peer is hit about equally */
    int hits[8] = {0};
    for (uint64_t s = 0; s < 200; s++) {
        char params[64];
        snprintf(params, sizeof params, "out=1 seed=%llu phases=4", (unsigned long long)s);
        gen(&a, "random", 8, params);
        for (size_t k = 0; k < a.phase_at[a.n_phases]; k++)
            if (a.edges[k].src == 0)
                hits[a.edges[k].dst]++;
        topo_free(&a);
    }
    cr_assert_eq(hits[0], 0);
    for (int j = 1; j < 8; j++) /* 800 draws over 7 peers: mean 114, sd 10 */
        cr_assert(hits[j] > 70 && hits[j] < 160, "peer %d drawn %d times", j, hits[j]);

    /* defaults, and a schedule that cannot be strongly connected */
    gen(&a, "random", 16, NULL);
    cr_assert_str_eq(a.kind, "random out=2 seed=1 phases=4");
    topo_free(&a);
    gen_fails("random", 64, "out=1 phases=1", "no strongly connected schedule");
    gen_fails("random", 4, "out=4", "out=4 out of range 1..3");
    gen_fails("random", 1, NULL, "at least 2 peers");
    gen_fails("random", 8, "phases=0", "phases=0");
}

Test(topo_graph, generator_argument_errors)
{
    gen_fails("hypercube", 8, NULL, "unknown generator 'hypercube'");
    gen_fails("ring", 8, "x=1", "takes no parameters");
    gen_fails("torus", 8, "rows", "expected key=value");
    gen_fails("torus", 8, "rows=", "has no value");
    gen_fails("torus", 8, "rows=-2", "non-negative integer");
    gen_fails("random", 8, "out=2 out=2", "given twice");
    gen_fails("ring", 0, NULL, "out of range 1..65536");
    gen_fails("ring", TOPO_MAX_PEERS + 1, NULL, "out of range");
    /* parameters may also follow the name in the kind string */
    topo t;
    gen(&t, "random out=2 seed=3", 8, "phases=2");
    cr_assert_str_eq(t.kind, "random out=2 seed=3 phases=2");
    topo_free(&t);
    /* the largest exponential graph fits the limits */
    gen(&t, "exponential", TOPO_MAX_PEERS, NULL);
    cr_assert_eq(t.n_phases, 16);
    topo_free(&t);
}

Test(topo_graph, validate_rejects_a_bad_hand_built_topology)
{
    size_t at[2] = {0, 2};
    topo_edge edges[2] = {{1, 0, -1}, {0, 1, -1}};
    topo t = {.n_peers = 2, .n_phases = 1, .phase_at = at, .edges = edges};
    parse_error e;
    cr_assert_eq(topo_validate(&t, &e), -EINVAL);
    cr_assert(strstr(e.msg, "not sorted"), "%s", e.msg);
    edges[0] = (topo_edge){0, 1, -1}, edges[1] = (topo_edge){1, 0, -1};
    cr_assert_eq(topo_validate(&t, &e), 0, "%s", e.msg);
    edges[1].dst = 2;
    cr_assert_eq(topo_validate(&t, &e), -EINVAL);
    cr_assert(strstr(e.msg, "out of range"), "%s", e.msg);
    edges[1] = (topo_edge){1, 0, 0.5};
    cr_assert_eq(topo_validate(&t, &e), -EINVAL);
    cr_assert(strstr(e.msg, "has a weight"), "%s", e.msg);
    edges[1] = (topo_edge){0, 1, -1};
    cr_assert_eq(topo_validate(&t, &e), -EINVAL);
    cr_assert(strstr(e.msg, "duplicate edge 0 -> 1"), "%s", e.msg);
}

/* ---- routing around dead peers ----------------------------------------------------- */

static void check_routes(const topo *t, const uint8_t *alive, const char *what)
{
    for (long r = 0; r < t->n_phases; r++)
        for (int i = 0; i < t->n_peers; i++) {
            topo_out o;
            topo_route(t, r, i, alive, &o);
            int sched[TOPO_MAX_OUT];
            int d = targets(t, (int)r, i, sched);
            cr_assert_leq(o.n, d, "%s: routing never adds edges", what);
            double sum = o.keep;
            for (int k = 0; k < o.n; k++) {
                cr_assert(!alive || alive[o.peer[k]], "%s: round %ld peer %d sends to dead %d", what, r, i,
                          o.peer[k]);
                cr_assert_neq(o.peer[k], i, "%s: no send to self", what);
                for (int j = 0; j < k; j++)
                    cr_assert_neq(o.peer[j], o.peer[k], "%s: target %d twice", what, o.peer[k]);
                cr_assert_gt(o.weight[k], 0);
                sum += o.weight[k];
            }
            cr_assert_gt(o.keep, 0);
            cr_assert(fabs(sum - 1) < 1e-12, "%s: round %ld peer %d: keep + sum = %.17g", what, r, i, sum);
        }
}

Test(topo_graph, route_never_targets_a_dead_peer_and_conserves_shares)
{
    static const char *const kinds[][2] = {{"exponential", NULL}, {"n-peer-exponential", "out=3"},
                                           {"random", "out=4 seed=2 phases=3"}, {"torus", NULL},
                                           {"complete", NULL}, {"ring", NULL}};
    uint64_t s = 12345;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        topo t;
        gen(&t, kinds[k][0], 16, kinds[k][1]);
        check_routes(&t, NULL, kinds[k][0]);
        uint8_t alive[16];
        for (int trial = 0; trial < 50; trial++) {
            for (int i = 0; i < 16; i++) {
                s = s * 6364136223846793005ULL + 1442695040888963407ULL;
                alive[i] = (s >> 33) % 100 >= (unsigned)(trial * 2); /* from all alive to nearly all dead */
            }
            check_routes(&t, alive, kinds[k][0]);
        }
        topo_free(&t);
    }
    topo t;
    parse_error e;
    cr_assert_eq(topo_load(&t, "topologies/racks8.topo", &e), 0, "%s", e.msg);
    uint8_t alive[8] = {1, 0, 1, 1, 0, 1, 1, 1};
    check_routes(&t, alive, "racks8");
    topo_out o;
    topo_route(&t, 0, 0, alive, &o); /* 0's partner 1 is dead: next live after 1 is 2 */
    cr_assert_eq(o.n, 1);
    cr_assert_eq(o.peer[0], 2);
    cr_assert_eq(o.weight[0], 0.5);
    cr_assert_eq(o.keep, 0.5);
    topo_free(&t);
}

Test(topo_graph, route_redirects_to_the_next_live_peer)
{
    topo t;
    gen(&t, "exponential", 8, NULL);
    uint8_t alive[8];
    memset(alive, 1, sizeof alive);
    topo_out o;
    topo_route(&t, 0, 2, alive, &o);
    cr_assert_eq(o.n, 1);
    cr_assert_eq(o.peer[0], 3);
    cr_assert_eq(o.keep, 0.5);
    alive[3] = 0;
    topo_route(&t, 0, 2, alive, &o);
    cr_assert_eq(o.peer[0], 4, "3 dead: next live is 4");
    cr_assert_eq(o.weight[0], 0.5);
    alive[4] = 0;
    topo_route(&t, 3, 2, alive, &o); /* round 3 is phase 0 again */
    cr_assert_eq(o.peer[0], 5, "3 and 4 dead: 5");
    alive[7] = 0;
    topo_route(&t, 0, 6, alive, &o);
    cr_assert_eq(o.peer[0], 0, "wraps around past n-1");
    topo_route(&t, 0, 3, alive, &o);
    cr_assert_eq(o.n, 1, "a dead sender is still routed (its own view)");
    topo_free(&t);

    /* the replacement skips peers that are already targets */
    gen(&t, "n-peer-exponential", 16, "out=2");
    memset(alive, 1, sizeof alive);
    uint8_t alive16[16];
    memset(alive16, 1, sizeof alive16);
    alive16[1] = 0;
    topo_route(&t, 0, 0, alive16, &o); /* scheduled 1 and 2; 2 is taken, so 3 */
    cr_assert_eq(o.n, 2);
    cr_assert(o.peer[0] == 3 && o.peer[1] == 2, "got %d %d", o.peer[0], o.peer[1]);
    topo_free(&t);

    /* and skips the sender */
    gen(&t, "ring", 3, NULL);
    uint8_t alive3[3] = {1, 0, 1};
    topo_route(&t, 0, 0, alive3, &o);
    cr_assert_eq(o.peer[0], 2);
    alive3[2] = 0;
    topo_route(&t, 0, 0, alive3, &o);
    cr_assert_eq(o.n, 0, "only the sender is alive");
    cr_assert_eq(o.keep, 1);
    topo_free(&t);
}

Test(topo_graph, route_keeps_everything_when_nobody_is_alive)
{
    topo t;
    gen(&t, "complete", 6, NULL);
    uint8_t alive[6] = {0};
    for (int i = 0; i < 6; i++) {
        topo_out o;
        topo_route(&t, 0, i, alive, &o);
        cr_assert_eq(o.n, 0);
        cr_assert(fabs(o.keep - 1) < 1e-15, "keep %.17g", o.keep);
    }
    topo_free(&t);
    /* out of range peers and a zeroed topology are no-ops, not crashes */
    topo z = {0};
    topo_out o;
    topo_route(&z, 0, 0, NULL, &o);
    cr_assert_eq(o.n, 0);
    cr_assert_eq(topo_in(&z, 0, 0, NULL, NULL, 0), 0);
}

/* ---- in-lists ------------------------------------------------------------------------- */

Test(topo_graph, in_lists_are_the_inverse_of_the_out_lists)
{
    static const char *const kinds[][2] = {{"exponential", NULL}, {"n-peer-exponential", "out=2"},
                                           {"random", "out=3 seed=4 phases=5"}, {"torus", NULL},
                                           {"star", "center=5"}, {"bipartite-exponential", NULL}};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        topo t;
        gen(&t, kinds[k][0], 12, kinds[k][1]);
        uint8_t alive[12];
        for (int i = 0; i < 12; i++)
            alive[i] = i % 3 != 1;
        for (long r = -1; r <= t.n_phases; r++) /* negative rounds and wrap-around too */
            for (int use_alive = 0; use_alive < 2; use_alive++) {
                int expect[12][12], n_expect[12] = {0};
                for (int i = 0; i < 12; i++) {
                    topo_out o;
                    topo_route(&t, r, i, NULL, &o);
                    if (use_alive && !alive[i])
                        continue;
                    for (int j = 0; j < o.n; j++)
                        expect[o.peer[j]][n_expect[o.peer[j]]++] = i; /* ascending i */
                }
                for (int i = 0; i < 12; i++) {
                    int in[12];
                    int n = topo_in(&t, r, i, use_alive ? alive : NULL, in, 12);
                    cr_assert_eq(n, n_expect[i], "%s round %ld peer %d", t.kind, r, i);
                    for (int j = 0; j < n; j++)
                        cr_assert_eq(in[j], expect[i][j], "%s round %ld peer %d", t.kind, r, i);
                    cr_assert_leq(n, t.max_in);
                }
            }
        topo_free(&t);
    }
    topo t;
    gen(&t, "star", 6, NULL);
    int in[2];
    cr_assert_eq(topo_in(&t, 0, 0, NULL, in, 2), 2, "at most max ids are written");
    topo_free(&t);
}

/* ---- mixing ------------------------------------------------------------------------------ */

static long mix(const topo *t, uint64_t seed, double tol)
{
    long r = -1;
    int rc = topo_mix_rounds(t, 16, seed, tol, 100000, &r);
    cr_assert_eq(rc, 0, "%s: rc %d", t->kind, rc);
    return r;
}

Test(topo_graph, exponential_is_exact_after_log2_n_rounds)
{
    for (int L = 3; L <= 5; L++) {
        topo t;
        gen(&t, "exponential", 1 << L, NULL);
        for (uint64_t seed = 1; seed <= 5; seed++) {
            cr_assert_eq(mix(&t, seed, 1e-6), L, "n = %d", 1 << L);
            /* exact, not merely close: round-off is all that remains */
            cr_assert_eq(mix(&t, seed, 1e-12), L, "n = %d", 1 << L);
        }
        topo_free(&t);
    }
}

Test(topo_graph, exponential_on_12_peers_is_not_exact_in_log2_n_rounds)
{
    topo t;
    gen(&t, "exponential", 12, NULL);
    long r = mix(&t, 1, 1e-6);
    /* measured: 35 rounds (seeds 1..5) */
    cr_assert_gt(r, 4, "12 peers averaged exactly in %ld rounds?", r);
    cr_assert_leq(r, 60, "%ld rounds", r);
    long timeout = 0;
    cr_assert_eq(topo_mix_rounds(&t, 16, 1, 1e-6, 4, &timeout), -ETIMEDOUT);
    topo_free(&t);
}

Test(topo_graph, other_graphs_converge_within_measured_bounds)
{
    static const struct {
        const char *kind, *params;
        int n;
        long lo, hi; /* measured with 5 seeds, then given margin */
    } cases[] = {
        {"ring", NULL, 8, 100, 250},                         /* 164..166 */
        {"torus", NULL, 16, 30, 80},                         /* 46..47 */
        {"random", "out=2 seed=7 phases=4", 16, 8, 50},      /* 22 */
        {"random", "out=2 seed=1 phases=4", 16, 8, 50},      /* 21..23 */
        {"n-peer-exponential", "out=2", 16, 8, 50},          /* 24 */
        {"bipartite-exponential", NULL, 16, 15, 70},         /* 37..38 */
        {"star", NULL, 8, 8, 50},                            /* 21 */
        {"complete", NULL, 4, 1, 1},                         /* exact in one round */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        topo t;
        gen(&t, cases[k].kind, cases[k].n, cases[k].params);
        for (uint64_t seed = 1; seed <= 3; seed++) {
            long r = mix(&t, seed, 1e-6);
            cr_assert(r >= cases[k].lo && r <= cases[k].hi, "%s on %d peers: %ld rounds, expected %ld..%ld", t.kind,
                      cases[k].n, r, cases[k].lo, cases[k].hi);
        }
        topo_free(&t);
    }
}

Test(topo_graph, mix_rounds_is_deterministic_and_checks_arguments)
{
    topo t;
    gen(&t, "random", 16, "out=2 seed=3");
    cr_assert_eq(mix(&t, 9, 1e-6), mix(&t, 9, 1e-6));
    long r;
    cr_assert_eq(topo_mix_rounds(&t, 0, 1, 1e-6, 10, &r), -EINVAL);
    cr_assert_eq(topo_mix_rounds(&t, 4, 1, 0, 10, &r), -EINVAL);
    cr_assert_eq(topo_mix_rounds(&t, 4, 1, NAN, 10, &r), -EINVAL);
    cr_assert_eq(topo_mix_rounds(NULL, 4, 1, 1e-6, 10, &r), -EINVAL);
    topo_free(&t);
    gen(&t, "ring", 1, NULL);
    cr_assert_eq(mix(&t, 1, 1e-6), 0, "one peer is its own average");
    topo_free(&t);
}

/* ---- Graphviz -------------------------------------------------------------------------- */

static int count(const char *s, const char *needle)
{
    int c = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        c++;
    return c;
}

Test(topo_graph, dot_has_one_edge_per_union_edge_labelled_by_phase)
{
    topo t;
    gen(&t, "exponential", 8, NULL);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(topo_write_dot(&t, f), 0);
    fclose(f);
    cr_assert(!strncmp(buf, "digraph topo {", 14), "%s", buf);
    cr_assert_eq(count(buf, " -> "), 24, "8 peers x 3 offsets: %s", buf);
    cr_assert(strstr(buf, "  3 -> 5 [label=\"1\"];"), "%s", buf);
    free(buf);
    topo_free(&t);

    /* an edge active in several phases lists them all */
    parse_error e;
    const char *text = "peers 2\nphase\n0 -> 1\n1 -> 0\nphase\n0 -> 1\n";
    cr_assert_eq(topo_parse(&t, text, strlen(text), "d", &e), 0, "%s", e.msg);
    f = open_memstream(&buf, &len);
    cr_assert_eq(topo_write_dot(&t, f), 0);
    fclose(f);
    cr_assert(strstr(buf, "0 -> 1 [label=\"0,1\"];"), "%s", buf);
    cr_assert(strstr(buf, "1 -> 0 [label=\"0\"];"), "%s", buf);
    free(buf);
    topo_free(&t);
}

/* The edges a peer's push-sum state holds: distinct targets and sources over
 * all phases (the simulator's memory estimate counts them). */
Test(topo_graph, degree_counts_distinct_neighbours_over_all_phases)
{
    topo t;
    parse_error e;
    int n_out, n_in;
    cr_assert_eq(topo_generate(&t, "exponential", 8, NULL, &e), 0, "%s", e.msg);
    for (int i = 0; i < 8; i++) {
        cr_assert_eq(topo_degree(&t, i, &n_out, &n_in), 0);
        cr_expect(n_out == 3 && n_in == 3, "peer %d: %d out, %d in", i, n_out, n_in); /* +1, +2, +4 and back */
    }
    topo_free(&t);
    cr_assert_eq(topo_generate(&t, "exponential", 2, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(topo_degree(&t, 0, &n_out, &n_in), 0);
    cr_expect(n_out == 1 && n_in == 1, "%d out, %d in", n_out, n_in);
    cr_assert_eq(topo_degree(&t, 5, &n_out, &n_in), 0); /* not a peer: nothing */
    cr_expect(n_out == 0 && n_in == 0);
    topo_free(&t);
}
