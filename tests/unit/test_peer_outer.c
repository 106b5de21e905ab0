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

/* With a codec that drops nothing, the error buffer empties each round: the
 * same as sgd:1, whatever the decay. */
Test(peer_outer, ef_with_a_lossless_codec_is_plain_local_steps)
{
    const float z0[DIM] = {1, 2, 3, 4}, step[DIM] = {0.5f, -0.25f, 0.125f, 1};
    peer p;
    peer_init(&p, "ef:0.9:none", z0, 1.0);
    float z[DIM], want[DIM];
    memcpy(want, z0, sizeof want);
    for (int r = 0; r < 3; r++) {
        round_with(&p, step, z);
        for (int i = 0; i < DIM; i++) {
            want[i] += step[i];
            cr_assert_eq(z[i], want[i], "round %d: z[%d] = %g, want %g", r, i, z[i], want[i]);
            cr_assert_eq(p.s.sgd.velocity[i], 0.0f, "nothing waits in the error buffer");
        }
    }
    peer_free(&p);
}

/* topk:0.25 of 4 values sends the largest one: what it drops waits in e,
 * decays, and goes out once it is the largest. */
Test(peer_outer, ef_sends_the_largest_value_and_keeps_the_rest_decayed)
{
    const float z0[DIM] = {0, 0, 0, 0};
    const float step1[DIM] = {-4, 1, -0.5f, -2}; /* delta = a - z' = {4, -1, 0.5, 2} */
    const float none[DIM] = {0, 0, 0, 0};
    peer p;
    peer_init(&p, "ef:0.5:topk:0.25", z0, 2.0);
    float z[DIM];
    round_with(&p, step1, z);
    const float after1[DIM] = {-4, 0, 0, 0}, e1[DIM] = {0, -1, 0.5f, 2};
    for (int i = 0; i < DIM; i++) {
        cr_assert_eq(z[i], after1[i], "round 1: z[%d] = %g, want %g", i, z[i], after1[i]);
        cr_assert_eq(p.s.sgd.velocity[i], e1[i], "round 1: e[%d] = %g", i, p.s.sgd.velocity[i]);
    }
    /* No local progress: e = 0.5 e = {0, -0.5, 0.25, 1}, of which 1 goes. */
    round_with(&p, none, z);
    const float after2[DIM] = {-4, 0, 0, -1}, e2[DIM] = {0, -0.5f, 0.25f, 0};
    for (int i = 0; i < DIM; i++) {
        cr_assert_eq(z[i], after2[i], "round 2: z[%d] = %g, want %g", i, z[i], after2[i]);
        cr_assert_eq(p.s.sgd.velocity[i], e2[i], "round 2: e[%d] = %g", i, p.s.sgd.velocity[i]);
    }
    cr_assert_eq(p.g.w, 2.0, "the outer step keeps w");
    cr_assert_gt(outer_bytes(&p.s), 2 * DIM * sizeof(float), "the message buffer counts too");
    peer_free(&p);
}

Test(peer_outer, bad_specs_are_refused_with_the_text)
{
    const char *bad[] = {"ef", "ef:0.9", "ef:1.5:none", "ef:-0.1:none", "ef:0.9:nosuch:3", "ef:x:none",
                         "ef:0.9:topk:2"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        outer_opts o;
        char err[256] = "";
        cr_assert_lt(outer_opts_parse(&o, bad[i], err, sizeof err), 0, "'%s' was taken", bad[i]);
        cr_assert(strstr(err, bad[i]), "'%s': the message '%s' does not name it", bad[i], err);
        cr_assert_eq(o.lr, 0.0f, "'%s' left an outer optimizer on", bad[i]);
    }
}
