/* The outer step's arithmetic (peer/core/outer.c) on hand-made vectors: a
 * round from the anchor a = z to the steps' end z' moves a by the rule of
 * outer.h, and x = w a after it. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "gossip/gsp.h"
#include "peer/core/outer.h"

TestSuite(peer_outer, .timeout = 60);

#define DIM 4

typedef struct peer {
    gsp_peer g;
    outer_state s;
} peer;

static void peer_init(peer *p, const char *spec, const float *z0, double w)
{
    outer_opts o;
    char err[256];
    cr_assert_eq(outer_opts_parse(&o, spec, err, sizeof err), 0, "%s", err);
    cr_assert_eq(gsp_init(&p->g, 0, 2, DIM, 0, z0), 0);
    p->g.w = w;
    gsp_scale_by_w(&p->g, z0);
    cr_assert_eq(outer_init(&p->s, &o, DIM), 0);
}

static void peer_free(peer *p)
{
    outer_free(&p->s);
    gsp_free(&p->g);
}

/* One round whose local steps move z by step[]: returns the model after the
 * outer step in z_out. */
static void round_with(peer *p, const float *step, float *z_out)
{
    outer_begin(&p->s, &p->g);
    for (int i = 0; i < DIM; i++)
        p->g.x[i] += (float)p->g.w * step[i];
    outer_end(&p->s, &p->g);
    for (int i = 0; i < DIM; i++)
        z_out[i] = p->g.x[i] / (float)p->g.w;
}

Test(peer_outer, sgd_at_lr_1_keeps_where_the_steps_ended)
{
    const float z0[DIM] = {1, 2, 3, 4}, step[DIM] = {0.5f, -0.25f, 0, 1};
    peer p;
    peer_init(&p, "sgd:1", z0, 0.5);
    float z[DIM];
    round_with(&p, step, z);
    for (int i = 0; i < DIM; i++)
        cr_assert_eq(z[i], z0[i] + step[i], "z[%d] = %g", i, z[i]);
    cr_assert_eq(p.g.w, 0.5, "the outer step keeps w");
    peer_free(&p);
}

/* sgd:0.5:0.5 by hand: the velocity v = 0.5 v + delta, a -= 0.5 v, where
 * delta = a - z' is the negated progress of the round. */
Test(peer_outer, sgd_with_momentum_follows_its_velocity)
{
    const float z0[DIM] = {0, 0, 0, 0}, step[DIM] = {1, -2, 0.5f, 0}, none[DIM] = {0, 0, 0, 0};
    peer p;
    peer_init(&p, "sgd:0.5:0.5", z0, 0.5);
    float z[DIM];
    round_with(&p, step, z); /* v = -step, a = 0.5 step */
    for (int i = 0; i < DIM; i++)
        cr_assert_eq(z[i], 0.5f * step[i], "round 1: z[%d] = %g", i, z[i]);
    round_with(&p, none, z); /* v = -0.5 step, a = 0.75 step */
    for (int i = 0; i < DIM; i++)
        cr_assert_eq(z[i], 0.75f * step[i], "round 2: z[%d] = %g", i, z[i]);
    cr_assert_eq(p.g.w, 0.5, "the outer step keeps w");
    peer_free(&p);
}

Test(peer_outer, bad_specs_are_refused_with_the_text)
{
    const char *bad[] = {"sgd", "sgd:0", "sgd:11", "sgd:1:1", "nesterov:0.7", "nesterov:0.7:0", "adam:1",
                         "sgd:x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        outer_opts o;
        char err[256] = "";
        cr_assert_lt(outer_opts_parse(&o, bad[i], err, sizeof err), 0, "'%s' was taken", bad[i]);
        cr_assert(strstr(err, bad[i]), "'%s': the message '%s' does not name it", bad[i], err);
        cr_assert_eq(o.lr, 0.0f, "'%s' left an outer optimizer on", bad[i]);
    }
}

/* A run whose anchor is kept elsewhere (--overlap's z_start, for a caller
 * stepping itself): outer_end_from gives the floats that outer_begin_at and
 * outer_end_at give, round after round (the velocity carried), leaves the
 * anchor it is given as it was, and never writes an anchor of its own, so
 * the state counts (and holds resident) the velocity alone. */
Test(peer_outer, an_anchor_kept_elsewhere_gives_the_same_floats_without_a_copy)
{
    enum { N = 1000 }; /* (blocks of 256 and a ragged end) */
    const char *specs[] = {"nesterov:0.7:0.9", "sgd:1:0.5", "sgd:0.8"};
    for (int k = 0; k < 3; k++) {
        outer_opts o;
        char err[160];
        cr_assert_eq(outer_opts_parse(&o, specs[k], err, sizeof err), 0, "%s", err);
        outer_state copy, kept;
        cr_assert_eq(outer_init(&copy, &o, N), 0);
        cr_assert_eq(outer_init(&kept, &o, N), 0);
        float a[N], a0[N], z1[N], z2[N];
        for (int i = 0; i < N; i++)
            a[i] = sinf((float)i);
        for (int r = 0; r < 4; r++) {
            for (int i = 0; i < N; i++)
                z1[i] = z2[i] = a[i] - 1e-2f * cosf((float)(i * (r + 1)));
            memcpy(a0, a, sizeof a);
            outer_begin_at(&copy, a);
            outer_end_at(&copy, z1);
            outer_end_from(&kept, a, z2);
            cr_assert_eq(memcmp(z1, z2, sizeof z1), 0, "%s round %d: the same floats", specs[k], r);
            cr_assert_eq(memcmp(a, a0, sizeof a), 0, "%s round %d: the anchor given is untouched", specs[k], r);
            memcpy(a, z1, sizeof a); /* (the next round starts where this one ended) */
        }
        cr_assert_eq(memcmp(copy.sgd.velocity, kept.sgd.velocity, N * sizeof(float)), 0, "%s: velocity", specs[k]);
        cr_assert_eq(outer_bytes(&copy), 2 * N * sizeof(float));
        cr_assert_eq(outer_bytes(&kept), N * sizeof(float), "%s: the velocity alone", specs[k]);
        outer_free(&copy), outer_free(&kept);
    }
}
