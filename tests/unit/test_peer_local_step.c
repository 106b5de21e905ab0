/* The local half of a round (peer/core/local_step.c, peer/core/outer.c) at a
 * push-sum weight w that is not 1: the step is taken at z = x / w and moves
 * x by w times it, and no z is written beside x (a model-sized copy that
 * would stay resident for the rest of the run). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gsp.h"
#include "nn/nn_data.h"
#include "peer/core/local_step.h"
#include "tests/embedded_shard.h"

TestSuite(peer_local_step, .timeout = 60);

/* Real data: a shard of the embedded training set. */
static nn_dataset g_shard;

static void shard_init(void) { embedded_shard(&g_shard, 200, 11); }

static void shard_free(void) { nn_dataset_free(&g_shard); }

/* A peer holding the model z0 at weight w (x = w z0), with its optimizer,
 * batches and (outer not NULL) outer optimizer. */
typedef struct peer {
    gsp_peer g;
    local_state l;
} peer;

static void peer_init(peer *p, const float *z0, size_t dim, double w, const outer_opts *outer)
{
    train_opts o;
    train_opts_defaults(&o);
    cr_assert_eq(train_opts_finish(&o), 0);
    cr_assert_eq(gsp_init(&p->g, 0, 2, dim, 0, z0), 0);
    p->g.w = w;
    gsp_scale_by_w(&p->g, z0);
    cr_assert_eq(local_init(&p->l, &o, outer, &g_shard, 0, 8, dim), 0);
}

static void peer_free(peer *p)
{
    gsp_free(&p->g);
    local_free(&p->l);
}

/* A round's local half as round_step takes it: outer begin, steps, outer end. */
static void local_round(peer *p, nn_model *m, int steps)
{
    outer_begin(&p->l.outer, &p->g);
    for (int s = 0; s < steps; s++) {
        int correct, B;
        local_step(&p->l, m, &p->g, 0.05f, &correct, &B);
        cr_assert_gt(B, 0);
    }
    outer_end(&p->l.outer, &p->g);
}

/* Peer a at w = 1 and peer b at w_b, both holding the same model, take the
 * same rounds; b's x must stay w_b times a's (exact: value by value, bit for
 * bit, as with w_b a power of two). */
static void same_steps_at_another_weight(double w_b, const char *outer_text, int exact)
{
    shard_init();
    nn_model m;
    char err[256];
    cr_assert_eq(nn_model_init(&m, "mlp:16", g_shard.c, g_shard.h, g_shard.w, g_shard.n_classes, 8, 3, err,
                               sizeof err), 0, "%s", err);
    const size_t dim = m.n_params;
    outer_opts outer;
    cr_assert_eq(outer_opts_parse(&outer, outer_text, err, sizeof err), 0, "%s", err);
    peer a, b;
    peer_init(&a, m.params, dim, 1.0, &outer);
    peer_init(&b, m.params, dim, w_b, &outer);
    for (int r = 0; r < 3; r++) {
        local_round(&a, &m, 2);
        local_round(&b, &m, 2);
    }
    size_t moved = 0;
    double off = 0, step = 0; /* the largest |b's x - w_b a's x| and |a's x - z0| */
    for (size_t i = 0; i < dim; i++) {
        const float want = (float)(w_b * a.g.x[i]);
        if (exact)
            cr_assert_eq(b.g.x[i], want, "x[%zu] = %g, want %g (w %g)", i, b.g.x[i], want, w_b);
        off = fmax(off, fabs((double)b.g.x[i] - want));
        step = fmax(step, fabs((double)a.g.x[i] - m.params[i]));
        moved += a.g.x[i] != m.params[i];
    }
    cr_assert_gt(moved, dim / 2, "the steps moved %zu of %zu values", moved, dim);
    /* Not a power of two, z = x / w is rounded each step, and so are the
     * gradients taken there: b's model is a's up to that, far below a step. */
    cr_assert_leq(off, 1e-4 * step, "b's x is off by %g where the steps moved x by up to %g", off, step);
    cr_assert_eq(a.g.w, 1.0);
    cr_assert_eq(b.g.w, w_b, "a step leaves w alone");
    cr_assert_not(b.g.z_written, "a step at w %g wrote z: one more copy of the model from then on", w_b);
    size_t state_a, state_b, codec;
    gsp_bytes(&a.g, &state_a, &codec);
    gsp_bytes(&b.g, &state_b, &codec);
    cr_assert_eq(state_b, state_a, "the two peers hold the same gossip state");
    peer_free(&a);
    peer_free(&b);
    nn_model_free(&m);
    shard_free();
}

Test(peer_local_step, a_step_at_half_the_weight_moves_x_by_half_exactly_and_writes_no_z)
{
    same_steps_at_another_weight(0.5, "none", 1);
}

Test(peer_local_step, with_the_outer_optimizer_at_half_the_weight_too)
{
    same_steps_at_another_weight(0.5, "nesterov:0.7:0.9", 1);
}

Test(peer_local_step, at_any_weight_x_moves_by_w_times_the_step_up_to_its_rounding)
{
    same_steps_at_another_weight(0.73, "nesterov:0.7:0.9", 0);
}
