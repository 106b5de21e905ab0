/* The sequence kernels of nn_seq.h (token and position embeddings, causal
 * self-attention) against double-precision reference forwards written here,
 * with the method of test_nn_grad.c: forwards compared normwise, backwards by
 * central differences of L = sum(dy .* y) for a fixed random dy, every output
 * buffer pre-filled with garbage so that a kernel that accumulates or skips an
 * entry fails. Sizes are odd on purpose (C = 12 with H = 3 heads, T = 5), and
 * T = 70 crosses the attention's causal blocks of 32 rows with a ragged end.
 *
 * `--verbose` prints the max relative error of every check.
 */
#include "nn/nn_rng.h"
#include "nn/nn_seq.h"
#include "nn/nn_vmath.h"
#include "tests/nn_check.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(nn_seq);

#define GRAD_TOL 1e-3 /* analytic (float) vs central difference (double) */
#define FWD_TOL 1e-4  /* float kernel vs double reference forward */
#define STEP 1e-6


static double *dalloc(size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    cr_assert_not_null(d);
    return d;
}

typedef double (*objective_fn)(void *ctx);

static double grad_err(objective_fn f, void *ctx, double *v, const float *g, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        const double keep = v[i];
        v[i] = keep + STEP;
        double up = f(ctx);
        v[i] = keep - STEP;
        double down = f(ctx);
        v[i] = keep;
        double e = relerr(g[i], (up - down) / (2 * STEP));
        worst = e > worst ? e : worst;
    }
    return worst;
}

/* ---- double-precision references ---------------------------------------------- */

/* The id rule spelled out independently: clamp into [0, vocab). */
static int ref_id(float id, int vocab)
{
    if (isnan(id) || id < 0)
        return 0;
    if (id >= vocab)
        return vocab - 1;
    return (int)id;
}

static void ref_embed(const float *ids, size_t rows, int vocab, int C, const double *W, double *y)
{
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < C; c++)
            y[r * C + c] = W[(size_t)ref_id(ids[r], vocab) * C + c];
}

static void ref_pos(const double *x, int B, int T, int C, const double *P, double *y)
{
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T * C; i++)
            y[(size_t)b * T * C + i] = x[(size_t)b * T * C + i] + P[i];
}

/* Causal attention straight from the definition, one output at a time. */
static void ref_attention(const double *qkv, int B, int T, int C, int H, double *y)
{
    const int D = C / H, ld = 3 * C;
    double *s = dalloc((size_t)T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const double *q = qkv + ((size_t)b * T + t) * ld + h * D;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= t; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * ld + C + h * D;
                    double acc = 0;
                    for (int d = 0; d < D; d++)
                        acc += q[d] * k[d];
                    s[j] = acc / sqrt((double)D);
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (int j = 0; j <= t; j++)
                    sum += (s[j] = exp(s[j] - mx));
                for (int d = 0; d < D; d++) {
                    double acc = 0;
                    for (int j = 0; j <= t; j++)
                        acc += s[j] * qkv[((size_t)b * T + j) * ld + 2 * C + h * D + d];
                    y[((size_t)b * T + t) * C + h * D + d] = acc / sum;
                }
            }
    free(s);
}

/* ---- token embedding ----------------------------------------------------------- */

typedef struct embed_ctx {
    const float *ids;
    size_t rows;
    int vocab, C;
    double *W, *dy, *y;
} embed_ctx;

static double embed_obj(void *p)
{
    embed_ctx *c = p;
    ref_embed(c->ids, c->rows, c->vocab, c->C, c->W, c->y);
    return dot(c->dy, c->y, c->rows * c->C);
}

Test(nn_seq, embed_forward_and_gradient)
{
    enum { ROWS = 23, VOCAB = 7, C = 5 };
    nn_rng r;
    nn_rng_seed(&r, 31, 0);
    /* Repeated ids (23 rows over 7 tokens) so backward must sum rows; token 3
     * never appears, so its gradient row must come out 0 over the garbage. */
    float ids[ROWS];
    for (int i = 0; i < ROWS; i++) {
        int id = (int)nn_rng_below(&r, VOCAB - 1);
        ids[i] = (float)(id >= 3 ? id + 1 : id);
    }
    float *W = rand_floats(&r, VOCAB * C, -1, 1), *dy = rand_floats(&r, ROWS * C, -1, 1);
    float *y = garbage(ROWS * C), *dW = garbage(VOCAB * C);
    embed_ctx c = {ids, ROWS, VOCAB, C, to_double(W, VOCAB * C), to_double(dy, ROWS * C), dalloc(ROWS * C)};

    nn_embed_forward(ids, ROWS, VOCAB, C, W, y);
    ref_embed(ids, ROWS, VOCAB, C, c.W, c.y);
    double ef = max_err_f(y, c.y, ROWS * C);
    cr_expect(ef == 0, "embed forward: max rel err %.3g (a copy must be exact)", ef);

    nn_embed_backward(ids, dy, ROWS, VOCAB, C, dW);
    double eg = grad_err(embed_obj, &c, c.W, dW, VOCAB * C);
    cr_log_info("embed: forward %.3g dW %.3g", ef, eg);
    cr_expect(eg < GRAD_TOL, "embed: dW max rel err %.3g", eg);
    for (int j = 0; j < C; j++)
        cr_expect_eq(dW[3 * C + j], 0.0f, "embed: unused token's dW[3][%d] = %g", j, dW[3 * C + j]);
    free(W), free(dy), free(y), free(dW), free(c.W), free(c.dy), free(c.y);
}

Test(nn_seq, embed_clamps_out_of_range_ids)
{
    enum { VOCAB = 4, C = 3 };
    const float ids[] = {-1.0f, -1e30f, 4.0f, 5.0f, 255.0f, 1e30f, INFINITY, -INFINITY, NAN, 2.0f};
    const int want[] = {0, 0, 3, 3, 3, 3, 3, 0, 0, 2};
    const size_t rows = sizeof ids / sizeof ids[0];
    float W[VOCAB * C];
    for (int i = 0; i < VOCAB * C; i++)
        W[i] = (float)(i + 1);
    float *y = garbage(rows * C);
    nn_embed_forward(ids, rows, VOCAB, C, W, y);
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < C; c++)
            cr_expect_eq(y[r * C + c], W[want[r] * C + c], "id %g: y[%d] = %g, want row %d", ids[r], c, y[r * C + c],
                         want[r]);

    /* Backward sends each row's gradient to the same clamped row. */
    float *dy = garbage(rows * C), *dW = garbage(VOCAB * C);
    for (size_t i = 0; i < rows * C; i++)
        dy[i] = 1.0f;
    nn_embed_backward(ids, dy, rows, VOCAB, C, dW);
    float count[VOCAB] = {0};
    for (size_t r = 0; r < rows; r++)
        count[want[r]] += 1.0f;
    for (int v = 0; v < VOCAB; v++)
        for (int c = 0; c < C; c++)
            cr_expect_eq(dW[v * C + c], count[v], "dW[%d][%d] = %g, want %g", v, c, dW[v * C + c], count[v]);
    free(y), free(dy), free(dW);
}

/* ---- learned positions ----------------------------------------------------------- */

typedef struct pos_ctx {
    int B, T, C;
    double *x, *P, *dy, *y;
} pos_ctx;

static double pos_obj(void *p)
{
    pos_ctx *c = p;
    ref_pos(c->x, c->B, c->T, c->C, c->P, c->y);
    return dot(c->dy, c->y, (size_t)c->B * c->T * c->C);
}

Test(nn_seq, pos_forward_and_gradients)
{
    enum { B = 3, T = 5, C = 7 };
    const size_t n = (size_t)B * T * C;
    nn_rng r;
    nn_rng_seed(&r, 32, 0);
    float *x = rand_floats(&r, n, -1, 1), *P = rand_floats(&r, T * C, -1, 1), *dy = rand_floats(&r, n, -1, 1);
    float *y = garbage(n), *dP = garbage(T * C), *dx = garbage(n);
    pos_ctx c = {B, T, C, to_double(x, n), to_double(P, T * C), to_double(dy, n), dalloc(n)};

    nn_pos_forward(x, B, T, C, P, y);
    ref_pos(c.x, B, T, C, c.P, c.y);
    double ef = max_err_f(y, c.y, n);
    cr_expect(ef < FWD_TOL, "pos forward: max rel err %.3g", ef);

    /* In place (x == y) gives the same. */
    float *xy = malloc(n * sizeof *xy);
    cr_assert_not_null(xy);
    memcpy(xy, x, n * sizeof *xy);
    nn_pos_forward(xy, B, T, C, P, xy);
    cr_expect(memcmp(xy, y, n * sizeof *y) == 0, "pos forward in place differs");

    nn_pos_backward(dy, B, T, C, dP, dx);
    double eP = grad_err(pos_obj, &c, c.P, dP, T * C), ex = grad_err(pos_obj, &c, c.x, dx, n);
    cr_log_info("pos: forward %.3g dP %.3g dx %.3g", ef, eP, ex);
    cr_expect(eP < GRAD_TOL, "pos: dP max rel err %.3g", eP);
    cr_expect(ex < GRAD_TOL, "pos: dx max rel err %.3g", ex);

    /* dx = NULL leaves dP the same; dx == dy is allowed. */
    float *dP2 = garbage(T * C);
    nn_pos_backward(dy, B, T, C, dP2, NULL);
    cr_expect(memcmp(dP, dP2, T * C * sizeof *dP) == 0, "pos: dx = NULL changed dP");
    memcpy(xy, dy, n * sizeof *xy);
    nn_pos_backward(xy, B, T, C, dP2, xy);
    cr_expect(memcmp(xy, dy, n * sizeof *dy) == 0 && memcmp(dP, dP2, T * C * sizeof *dP) == 0,
              "pos: dx == dy changed the result");
    free(x), free(P), free(dy), free(y), free(dP), free(dx), free(xy), free(dP2);
    free(c.x), free(c.P), free(c.dy), free(c.y);
}

/* ---- causal self-attention --------------------------------------------------------- */

typedef struct att_case {
    int B, T, C, H;
} att_case;

/* H = 1 (one head of D = 12), H = C (D = 1), T = 1, and T = 70: three causal
 * blocks, the last one ragged. */
static const att_case att_cases[] = {{2, 5, 12, 3}, {2, 5, 12, 1}, {2, 5, 12, 12}, {3, 1, 6, 2},
                                     {1, 70, 8, 2}, {2, 33, 10, 5}};

#define ATT_FMT "attention B=%d T=%d C=%d H=%d"
#define ATT_ARGS(t) (t)->B, (t)->T, (t)->C, (t)->H

typedef struct att_ctx {
    int B, T, C, H;
    double *qkv, *dy, *y;
} att_ctx;

static double att_obj(void *p)
{
    att_ctx *c = p;
    ref_attention(c->qkv, c->B, c->T, c->C, c->H, c->y);
    return dot(c->dy, c->y, (size_t)c->B * c->T * c->C);
}

Test(nn_seq, attention_forward_matches_reference)
{
    nn_rng r;
    nn_rng_seed(&r, 33, 0);
    for (size_t i = 0; i < sizeof att_cases / sizeof att_cases[0]; i++) {
        const att_case *t = &att_cases[i];
        const size_t nqkv = (size_t)t->B * t->T * 3 * t->C, ny = (size_t)t->B * t->T * t->C;
        const size_t nw = nn_attention_workspace(t->B, t->T, t->H), np = (size_t)t->B * t->H * t->T * t->T;
        cr_expect_eq(nw, np + (size_t)t->T * t->T, ATT_FMT ": workspace %zu floats", ATT_ARGS(t), nw);
        /* Plain, then large (scores in the hundreds: a softmax without the max
         * subtracted overflows). */
        for (int big = 0; big < 2; big++) {
            float *qkv = rand_floats(&r, nqkv, big ? -30 : -2, big ? 30 : 2);
            float *y = garbage(ny), *work = garbage(nw);
            double *qd = to_double(qkv, nqkv), *yd = dalloc(ny);
            nn_attention_forward(qkv, t->B, t->T, t->C, t->H, y, work);
            ref_attention(qd, t->B, t->T, t->C, t->H, yd);
            double e = max_err_f(y, yd, ny);
            cr_log_info(ATT_FMT "%s forward: max rel err %.3g", ATT_ARGS(t), big ? " (large)" : "", e);
            cr_expect(e < FWD_TOL, ATT_FMT "%s: forward max rel err %.3g", ATT_ARGS(t), big ? " (large)" : "", e);

            /* The probabilities in work: rows sum to 1, masked entries exactly 0. */
            double worst = 0;
            int masked_bad = 0;
            for (size_t row = 0; row < (size_t)t->B * t->H * t->T; row++) {
                const int tt = (int)(row % (size_t)t->T);
                const float *p = work + row * t->T;
                double s = 0;
                for (int j = 0; j < t->T; j++) {
                    if (j > tt)
                        masked_bad += p[j] != 0.0f;
                    else
                        s += p[j];
                }
                worst = fabs(s - 1) > worst ? fabs(s - 1) : worst;
            }
            cr_expect(worst < 1e-5, ATT_FMT ": a probability row sums to 1 %+.3g", ATT_ARGS(t), worst);
            cr_expect_eq(masked_bad, 0, ATT_FMT ": %d masked probabilities not 0", ATT_ARGS(t), masked_bad);
            free(qkv), free(y), free(work), free(qd), free(yd);
        }
    }
}

Test(nn_seq, attention_gradients)
{
    nn_rng r;
    nn_rng_seed(&r, 34, 0);
    for (size_t i = 0; i < sizeof att_cases / sizeof att_cases[0]; i++) {
        const att_case *t = &att_cases[i];
        const size_t nqkv = (size_t)t->B * t->T * 3 * t->C, ny = (size_t)t->B * t->T * t->C;
        const size_t nw = nn_attention_workspace(t->B, t->T, t->H);
        float *qkv = rand_floats(&r, nqkv, -2, 2), *dy = rand_floats(&r, ny, -1, 1);
        float *y = garbage(ny), *work = garbage(nw), *dqkv = garbage(nqkv);
        nn_attention_forward(qkv, t->B, t->T, t->C, t->H, y, work);
        nn_attention_backward(qkv, dy, t->B, t->T, t->C, t->H, dqkv, work);

        att_ctx c = {t->B, t->T, t->C, t->H, to_double(qkv, nqkv), to_double(dy, ny), dalloc(ny)};
        double e = grad_err(att_obj, &c, c.qkv, dqkv, nqkv);
        cr_log_info(ATT_FMT ": dqkv %.3g", ATT_ARGS(t), e);
        cr_expect(e < GRAD_TOL, ATT_FMT ": dqkv max rel err %.3g", ATT_ARGS(t), e);

        /* Backward leaves the probabilities intact: a second one, over new
         * garbage, gives the same bits. */
        float *dqkv2 = garbage(nqkv);
        nn_attention_backward(qkv, dy, t->B, t->T, t->C, t->H, dqkv2, work);
        cr_expect(memcmp(dqkv, dqkv2, nqkv * sizeof *dqkv) == 0, ATT_FMT ": second backward differs", ATT_ARGS(t));
        free(qkv), free(dy), free(y), free(work), free(dqkv), free(dqkv2), free(c.qkv), free(c.dy), free(c.y);
    }
}

/* Output t must not see tokens after t: changing every q, k, v after position
 * cut leaves outputs 0..cut exactly as they were (masked probabilities are
 * exactly 0, and 0 * v adds exactly nothing). The adjoint: a gradient that
 * only comes from outputs 0..cut reaches no input after cut. */
Test(nn_seq, attention_is_causal)
{
    enum { B = 2, T = 70, C = 12, H = 3 };
    const size_t nqkv = (size_t)B * T * 3 * C, ny = (size_t)B * T * C;
    const size_t nw = nn_attention_workspace(B, T, H);
    nn_rng r;
    nn_rng_seed(&r, 35, 0);
    const int cuts[] = {0, 4, 31, 32, 50, T - 1};
    for (size_t ci = 0; ci < sizeof cuts / sizeof cuts[0]; ci++) {
        const int cut = cuts[ci];
        float *qkv = rand_floats(&r, nqkv, -2, 2), *y = garbage(ny), *y2 = garbage(ny), *work = garbage(nw);
        nn_attention_forward(qkv, B, T, C, H, y, work);
        for (int b = 0; b < B; b++)
            for (int tt = cut + 1; tt < T; tt++)
                for (int j = 0; j < 3 * C; j++)
                    qkv[((size_t)b * T + tt) * 3 * C + j] = 10.0f * (nn_rng_uniform(&r) - 0.5f);
        nn_attention_forward(qkv, B, T, C, H, y2, work);
        int changed = 0, unchanged_after = 0;
        for (int b = 0; b < B; b++)
            for (int tt = 0; tt < T; tt++)
                for (int j = 0; j < C; j++) {
                    const size_t k = ((size_t)b * T + tt) * C + j;
                    if (tt <= cut)
                        changed += y[k] != y2[k];
                    else
                        unchanged_after += y[k] == y2[k];
                }
        cr_expect_eq(changed, 0, "cut %d: %d outputs at or before the cut changed", cut, changed);
        cr_expect(cut == T - 1 || unchanged_after < (T - 1 - cut) * B * C,
                  "cut %d: no output after the cut changed (the check itself is broken)", cut);

        float *dy = rand_floats(&r, ny, -1, 1), *dqkv = garbage(nqkv);
        for (int b = 0; b < B; b++)
            memset(dy + ((size_t)b * T + cut + 1) * C, 0, (size_t)(T - 1 - cut) * C * sizeof *dy);
        nn_attention_backward(qkv, dy, B, T, C, H, dqkv, work);
        int leaked = 0;
        for (int b = 0; b < B; b++)
            for (int tt = cut + 1; tt < T; tt++)
                for (int j = 0; j < 3 * C; j++)
                    leaked += dqkv[((size_t)b * T + tt) * 3 * C + j] != 0.0f;
        cr_expect_eq(leaked, 0, "cut %d: %d gradients after the cut are not 0", cut, leaked);
        free(qkv), free(y), free(y2), free(work), free(dy), free(dqkv);
    }
}

/* The vectorisable exp and erf against libm in double, over every float of
 * a dense sweep (the softmax's inputs are <= 0; GELU's erf sees any sign). */
Test(nn_seq, vector_exp_and_erf_match_libm)
{
    double worst_exp = 0, worst_erf = 0, worst_gauss = 0;
    for (float x = -100.0f; x <= 0.0f; x += 1.0f / 1024) {
        const double want = exp((double)x), got = nn_vexp_neg(x);
        if (x < -87.3f)
            cr_assert_eq(got, 0.0, "exp(%g) is flushed to 0", x);
        else
            worst_exp = fmax(worst_exp, fabs(got - want) / want);
    }
    for (float z = -12.0f; z <= 12.0f; z += 1.0f / 4096) {
        float gauss;
        const double got = nn_verf(z, &gauss);
        worst_erf = fmax(worst_erf, fabs(got - erf((double)z)));
        const double g = exp(-(double)z * z);
        worst_gauss = fmax(worst_gauss, fabs(gauss - g) / fmax(g, 1e-30));
        if (z * z > 87.31f)
            cr_assert_eq(gauss, 0.0f);
    }
    cr_log_info("exp relative %.2e, erf absolute %.2e, exp(-z^2) relative %.2e", worst_exp, worst_erf, worst_gauss);
    cr_assert_lt(worst_exp, 3e-7, "exp: %g", worst_exp);
    cr_assert_lt(worst_erf, 5e-7, "erf: %g", worst_erf);
    cr_assert_lt(worst_gauss, 1e-5, "exp(-z^2): %g (z^2 rounds in float)", worst_gauss);
}
