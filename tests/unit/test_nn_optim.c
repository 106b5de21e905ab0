/* The optimizer and the learning-rate schedule: SGD against hand-computed
 * PyTorch-semantics steps, the schedule's shape (warm-up, cosine, step decay),
 * the decay parser, and an end-to-end check that model + batcher + SGD learn a
 * separable problem, bit-identically for a given seed. */
#include "nn/nn_batch.h"
#include "nn/nn_model.h"
#include "nn/nn_optim.h"
#include "nn/nn_rng.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(nn_optim);

/* ---- SGD ---------------------------------------------------------------------- */

/* One parameter p0 = 1 with a constant gradient 0.5 and lr 0.1, three steps;
 * `want` is worked by hand from the formulas in nn_optim.h:
 * g = 0.5 + wd*p;  v = mu*v + g;  p -= 0.1 * (nesterov ? g + mu*v : v). */
static void expect_steps(float mu, float wd, int nesterov, const double want[3])
{
    nn_sgd o;
    cr_assert_eq(nn_sgd_init(&o, 1, mu, wd, nesterov), 0);
    float p = 1.0f, g = 0.5f;
    for (int t = 0; t < 3; t++) {
        nn_sgd_step(&o, &p, &g, 0.1f);
        cr_expect(fabs(p - want[t]) < 1e-6, "mu=%g wd=%g nesterov=%d: step %d gives %.8f, want %.8f", mu, wd,
                  nesterov, t + 1, p, want[t]);
    }
    nn_sgd_free(&o);
}

Test(nn_optim, sgd_plain)
{
    /* p -= 0.1 * 0.5 each step */
    expect_steps(0, 0, 0, (const double[]){0.95, 0.90, 0.85});
}

Test(nn_optim, sgd_momentum)
{
    /* v = 0.5, 0.95, 1.355 (v1 = g: PyTorch's first step, as v starts at 0) */
    expect_steps(0.9f, 0, 0, (const double[]){0.95, 0.855, 0.7195});
}

Test(nn_optim, sgd_nesterov)
{
    /* v = 0.5, 0.95, 1.355; direction g + 0.9 v = 0.95, 1.355, 1.7195 */
    expect_steps(0.9f, 0, 1, (const double[]){0.905, 0.7695, 0.59755});
}

Test(nn_optim, sgd_weight_decay)
{
    /* g = 0.5 + 0.1 p: 0.6, 0.594, 0.58806 (decay is coupled, not AdamW-style) */
    expect_steps(0, 0.1f, 0, (const double[]){0.94, 0.8806, 0.821794});
}

Test(nn_optim, sgd_momentum_and_weight_decay)
{
    /* g = 0.6, 0.594, 0.58266; v = 0.6, 1.134, 1.60326 */
    expect_steps(0.9f, 0.1f, 0, (const double[]){0.94, 0.8266, 0.666274});
    /* Nesterov: g = 0.6, 0.5886, 0.5725566; v = 0.6, 1.1286, 1.5882966; d = g + 0.9 v */
    expect_steps(0.9f, 0.1f, 1, (const double[]){0.886, 0.725566, 0.525363646});
}

/* Every element follows its own recurrence: a vector with per-element,
 * per-step gradients and lr against the same formulas in double. */
Test(nn_optim, sgd_vector_matches_reference)
{
    enum { N = 37, STEPS = 6 };
    static const struct {
        float mu, wd;
        int nesterov;
    } cfg[] = {{0, 0, 0}, {0.9f, 0, 0}, {0.9f, 5e-4f, 1}, {0.5f, 0.01f, 0}, {0, 0.01f, 0}};
    nn_rng r;
    nn_rng_seed(&r, 5, 0);
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        nn_sgd o;
        cr_assert_eq(nn_sgd_init(&o, N, cfg[c].mu, cfg[c].wd, cfg[c].nesterov), 0);
        float p[N], g[N];
        double pd[N], vd[N] = {0};
        for (int i = 0; i < N; i++)
            pd[i] = p[i] = 2 * nn_rng_uniform(&r) - 1;
        for (int t = 0; t < STEPS; t++) {
            const float lr = 0.05f * (float)(t + 1);
            for (int i = 0; i < N; i++)
                g[i] = 2 * nn_rng_uniform(&r) - 1;
            nn_sgd_step(&o, p, g, lr);
            double worst = 0;
            for (int i = 0; i < N; i++) {
                double gi = g[i] + (double)cfg[c].wd * pd[i];
                vd[i] = cfg[c].mu * vd[i] + gi;
                double d = cfg[c].mu == 0 ? gi : cfg[c].nesterov ? gi + cfg[c].mu * vd[i] : vd[i];
                pd[i] -= lr * d;
                double e = fabs(p[i] - pd[i]);
                worst = e > worst ? e : worst;
            }
            cr_expect(worst < 1e-5, "mu=%g wd=%g nesterov=%d step %d: max |p - reference| %.3g", cfg[c].mu,
                      cfg[c].wd, cfg[c].nesterov, t, worst);
        }
        nn_sgd_free(&o);
    }
}

Test(nn_optim, sgd_init_rejects_bad_hyperparameters)
{
    nn_sgd o;
    cr_expect_eq(nn_sgd_init(&o, 4, 1.0f, 0, 0), -EINVAL, "momentum 1 never forgets");
    cr_expect_eq(nn_sgd_init(&o, 4, -0.1f, 0, 0), -EINVAL);
    cr_expect_eq(nn_sgd_init(&o, 4, 0.9f, -1e-4f, 0), -EINVAL);
    cr_expect_eq(nn_sgd_init(&o, 4, 0, 0, 1), -EINVAL, "Nesterov without momentum is meaningless");
    nn_sgd_free(&o); /* zeroed by the failed init: freeing is safe */
    nn_sgd_free(NULL);
}

/* ---- learning-rate schedule ---------------------------------------------------- */

#define LR_EPS 1e-6f

Test(nn_optim, lr_warmup_ramps_linearly_to_base)
{
    /* 2 warm-up epochs of 10 steps: step s gets base * (s + 1) / 20. */
    nn_lr_schedule s = {.base = 0.1f, .warmup_epochs = 2, .decay = NN_LR_CONSTANT};
    for (long t = 0; t < 20; t++) {
        float want = 0.1f * (float)(t + 1) / 20.0f;
        cr_expect_float_eq(nn_lr_at(&s, t, 10), want, LR_EPS, "step %ld: %g, want %g", t, nn_lr_at(&s, t, 10),
                           want);
    }
    cr_expect_gt(nn_lr_at(&s, 0, 10), 0.0f, "the first step must move");
    cr_expect_float_eq(nn_lr_at(&s, 19, 10), 0.1f, LR_EPS, "the last warm-up step reaches base");
    for (long t = 20; t < 100; t += 7)
        cr_expect_float_eq(nn_lr_at(&s, t, 10), 0.1f, LR_EPS, "constant after warm-up, step %ld", t);
    /* No warm-up: base from step 0. */
    s.warmup_epochs = 0;
    cr_expect_float_eq(nn_lr_at(&s, 0, 10), 0.1f, LR_EPS);
}

Test(nn_optim, lr_cosine_shape)
{
    /* 1 warm-up epoch then cosine over epochs 1..11, 10 steps each: the
     * post-warm-up span is steps 10..110, its middle step 60. */
    nn_lr_schedule s = {.base = 0.2f, .warmup_epochs = 1, .decay = NN_LR_COSINE, .total_epochs = 11};
    cr_expect_float_eq(nn_lr_at(&s, 9, 10), 0.2f, LR_EPS, "warm-up reaches base, undecayed");
    cr_expect_float_eq(nn_lr_at(&s, 10, 10), 0.2f, LR_EPS, "cosine starts at base");
    cr_expect_float_eq(nn_lr_at(&s, 60, 10), 0.1f, LR_EPS, "base/2 in the middle: %g", nn_lr_at(&s, 60, 10));
    cr_expect_float_eq(nn_lr_at(&s, 110, 10), 0.0f, LR_EPS, "~0 at the end: %g", nn_lr_at(&s, 110, 10));
    float last = nn_lr_at(&s, 109, 10);
    cr_expect(last > 0 && last < 1e-3f * 0.2f, "the last step is tiny but still moves: %g", last);
    for (long t = 11; t <= 110; t++)
        cr_expect_leq(nn_lr_at(&s, t, 10), nn_lr_at(&s, t - 1, 10), "cosine rises at step %ld", t);
    /* Without warm-up the curve is the textbook one: base/2 at total/2. */
    s.warmup_epochs = 0, s.total_epochs = 10;
    cr_expect_float_eq(nn_lr_at(&s, 50, 10), 0.1f, LR_EPS);
    cr_expect_float_eq(nn_lr_at(&s, 25, 10), 0.2f * 0.5f * (1.0f + cosf(3.14159265f / 4)), LR_EPS);
}

Test(nn_optim, lr_step_decay_at_boundaries)
{
    nn_lr_schedule s = {.base = 0.1f, .decay = NN_LR_STEP, .step_epochs = 3, .gamma = 0.5f};
    cr_expect_float_eq(nn_lr_at(&s, 0, 10), 0.1f, LR_EPS);
    cr_expect_float_eq(nn_lr_at(&s, 29, 10), 0.1f, LR_EPS, "unchanged up to the boundary");
    cr_expect_float_eq(nn_lr_at(&s, 30, 10), 0.05f, LR_EPS, "x gamma at epoch 3");
    cr_expect_float_eq(nn_lr_at(&s, 59, 10), 0.05f, LR_EPS);
    cr_expect_float_eq(nn_lr_at(&s, 60, 10), 0.025f, LR_EPS, "x gamma^2 at epoch 6");
    cr_expect_float_eq(nn_lr_at(&s, 95, 10), 0.0125f, LR_EPS);
}

Test(nn_optim, lr_all_warmup_never_zero)
{
    /* warm-up == total with cosine: no post-warm-up span to decay over. A
     * division by that empty span must not zero (or NaN) the rate. */
    nn_lr_schedule s = {.base = 0.1f, .warmup_epochs = 3, .decay = NN_LR_COSINE, .total_epochs = 3};
    float prev = 0;
    for (long t = 0; t < 15; t++) {
        float lr = nn_lr_at(&s, t, 5);
        cr_expect(lr > prev && isfinite(lr), "step %ld: lr %g after %g", t, lr, prev);
        prev = lr;
    }
    cr_expect_float_eq(prev, 0.1f, LR_EPS, "the last step reaches base");
}

Test(nn_optim, lr_decay_parse)
{
    nn_lr_schedule s = {0};
    cr_expect_eq(nn_lr_decay_parse(&s, "cosine"), 0);
    cr_expect_eq(s.decay, NN_LR_COSINE);
    cr_expect_eq(nn_lr_decay_parse(&s, "step:3:0.5"), 0);
    cr_expect_eq(s.decay, NN_LR_STEP);
    cr_expect(s.step_epochs == 3 && s.gamma == 0.5f, "step:3:0.5 gave every %g, gamma %g", s.step_epochs, s.gamma);
    cr_expect_eq(nn_lr_decay_parse(&s, "constant"), 0);
    cr_expect_eq(s.decay, NN_LR_CONSTANT);

    static const char *bad[] = {"step:0:0.5", "step:3:2", "cos", "step:3:0.5x", "step:3", "step:-1:0.5",
                                "step:3:0", "", "Cosine", "constant "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(nn_lr_decay_parse(&s, bad[i]), -EINVAL, "'%s' accepted", bad[i]);
}

/* ---- learning end to end ------------------------------------------------------- */

enum { DIM = 10, CLASSES = 3 };

/* Labels from a fixed random linear teacher, keeping only points whose top
 * score beats the runner-up by a margin: separable by construction. */
static void make_separable(nn_dataset *d, int n, uint64_t stream)
{
    nn_rng r;
    nn_rng_seed(&r, 2024, 0); /* the teacher: the same for train and test */
    double T[CLASSES][DIM];
    for (int k = 0; k < CLASSES; k++)
        for (int j = 0; j < DIM; j++)
            T[k][j] = nn_rng_normal(&r);
    nn_rng_seed(&r, 2024, stream);
    *d = (nn_dataset){.n = n, .c = 1, .h = 1, .w = DIM, .n_classes = CLASSES};
    d->x = malloc((size_t)n * DIM * sizeof(float));
    d->y = malloc((size_t)n * sizeof(int));
    cr_assert(d->x && d->y);
    for (int i = 0; i < n;) {
        float *x = d->x + (size_t)i * DIM;
        double score[CLASSES];
        for (int j = 0; j < DIM; j++)
            x[j] = 2 * nn_rng_uniform(&r) - 1;
        int best = 0;
        for (int k = 0; k < CLASSES; k++) {
            score[k] = 0;
            for (int j = 0; j < DIM; j++)
                score[k] += T[k][j] * x[j];
            best = score[k] > score[best] ? k : best;
        }
        double gap = INFINITY;
        for (int k = 0; k < CLASSES; k++)
            if (k != best && score[best] - score[k] < gap)
                gap = score[best] - score[k];
        if (gap < 0.5)
            continue;
        d->y[i++] = best;
    }
}

/* Trains mlp:32 for a few epochs; returns the parameters (malloc'ed) and the
 * test accuracy. */
static float *train(uint64_t seed, const nn_dataset *tr, const nn_dataset *te, float *acc)
{
    char err[256];
    nn_model m;
    nn_batcher b;
    nn_sgd o;
    cr_assert_eq(nn_model_init(&m, "mlp:32", 1, 1, DIM, CLASSES, 32, seed, err, sizeof err), 0, "%s", err);
    cr_assert_eq(nn_batcher_init(&b, tr, 32, seed, 0), 0);
    cr_assert_eq(nn_sgd_init(&o, m.n_params, 0.9f, 1e-4f, 1), 0);
    float before;
    nn_model_evaluate(&m, NULL, te, NULL, &before);
    cr_expect_lt(before, 0.8f, "untrained accuracy %.3f: the 95%% bar would prove nothing", before);
    nn_lr_schedule s = {.base = 0.05f, .warmup_epochs = 1, .decay = NN_LR_COSINE, .total_epochs = 15};
    const long spe = nn_batcher_per_epoch(&b);
    for (long step = 0; step < 15 * spe; step++) {
        int B = nn_batcher_next(&b);
        nn_model_grad(&m, b.x, b.y, B, NULL);
        nn_sgd_step(&o, m.params, m.grads, nn_lr_at(&s, step, spe));
    }
    float loss;
    nn_model_evaluate(&m, NULL, te, &loss, acc);
    float *p = malloc(m.n_params * sizeof *p);
    memcpy(p, m.params, m.n_params * sizeof *p);
    nn_sgd_free(&o);
    nn_batcher_free(&b);
    nn_model_free(&m);
    return p;
}

Test(nn_optim, mlp_learns_separable_data_deterministically)
{
    nn_dataset tr, te;
    make_separable(&tr, 900, 1);
    make_separable(&te, 300, 2);
    /* mlp:32 on 10 inputs, 3 classes: 10*32 + 32 + 32*3 + 3 */
    const size_t n = 451;
    float a1, a2, a3;
    float *p1 = train(7, &tr, &te, &a1), *p2 = train(7, &tr, &te, &a2), *p3 = train(8, &tr, &te, &a3);
    cr_log_info("held-out accuracy: seed 7 %.4f, seed 8 %.4f", a1, a3);
    cr_expect_geq(a1, 0.95f, "held-out accuracy %.3f", a1);
    cr_expect_geq(a3, 0.95f, "held-out accuracy %.3f with the other seed", a3);
    cr_expect(memcmp(p1, p2, n * sizeof *p1) == 0, "same seed, different parameters");
    cr_expect_eq(a1, a2);
    cr_expect(memcmp(p1, p3, n * sizeof *p1) != 0, "a different seed gave the same parameters");
    free(p1), free(p2), free(p3);
    nn_dataset_free(&tr);
    nn_dataset_free(&te);
}
