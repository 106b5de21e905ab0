/* Finite-difference gradient checks for every nn/ layer kernel and for whole
 * models.
 *
 * Method: the float backward kernels are compared with central differences of
 * naive DOUBLE-precision reference forwards written here, so the numerical side
 * carries no float round-off and the tolerance can stay tight without being
 * flaky. A gradient check alone misses a wrong forward (backward may be the
 * exact adjoint of the wrong function), so forward outputs are compared with
 * the same references (normwise: max |error| / max |reference|, since a single
 * output may cancel to ~0 while its terms do not). Layers use the objective
 * L = sum(dy .* y) for a fixed random dy; models use their mean softmax
 * cross-entropy. Backward kernels overwrite dW/db/dx, so those are pre-filled
 * with garbage: a kernel that accumulates, or skips an entry, fails.
 *
 * `--verbose` prints the max relative error of every check.
 */
#include "nn/nn_layers.h"
#include "nn/nn_model.h"
#include "nn/nn_rng.h"
#include "tests/nn_check.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(nn_grad);

#define GRAD_TOL 1e-3 /* analytic (float) vs central difference (double) */
#define FWD_TOL 1e-4  /* float kernel vs double reference forward */
#define STEP 1e-6     /* central-difference step; in double its error is ~1e-9 */
#define MODEL_SAMPLES 200 /* parameters checked per model view */


/* ---- double-precision references ------------------------------------------ */

static void ref_dense(const double *x, int B, int in, int out, const double *W, const double *b, double *y)
{
    for (int n = 0; n < B; n++)
        for (int o = 0; o < out; o++) {
            double acc = b[o];
            for (int i = 0; i < in; i++)
                acc += W[(size_t)o * in + i] * x[(size_t)n * in + i];
            y[(size_t)n * out + o] = acc;
        }
}

static void ref_relu(const double *x, size_t n, double *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0 ? x[i] : 0;
}

/* Output size computed here, not by the kernel's resolver, so a wrong oh/ow
 * there shows up as a mismatch. */
static nn_conv_shape conv_shape(int ic, int ih, int iw, int oc, int k, int stride, int pad)
{
    nn_conv_shape s = {.ic = ic, .ih = ih, .iw = iw, .oc = oc, .k = k, .stride = stride, .pad = pad};
    s.oh = (ih + 2 * pad - k) / stride + 1;
    s.ow = (iw + 2 * pad - k) / stride + 1;
    return s;
}

static void ref_conv(const nn_conv_shape *s, const double *x, int B, const double *W, const double *b, double *y)
{
    for (int n = 0; n < B; n++)
        for (int o = 0; o < s->oc; o++)
            for (int oy = 0; oy < s->oh; oy++)
                for (int ox = 0; ox < s->ow; ox++) {
                    double acc = b[o];
                    for (int c = 0; c < s->ic; c++)
                        for (int ki = 0; ki < s->k; ki++) {
                            int iy = oy * s->stride - s->pad + ki;
                            if (iy < 0 || iy >= s->ih)
                                continue;
                            const double *wr = W + ((size_t)(o * s->ic + c) * s->k + ki) * s->k;
                            const double *xr = x + (((size_t)n * s->ic + c) * s->ih + iy) * s->iw;
                            for (int kj = 0; kj < s->k; kj++) {
                                int ix = ox * s->stride - s->pad + kj;
                                if (ix >= 0 && ix < s->iw)
                                    acc += wr[kj] * xr[ix];
                            }
                        }
                    y[(((size_t)n * s->oc + o) * s->oh + oy) * s->ow + ox] = acc;
                }
}

static void ref_pool(int c, int ih, int iw, int k, int stride, const double *x, int B, double *y)
{
    const int oh = (ih - k) / stride + 1, ow = (iw - k) / stride + 1;
    for (int p = 0; p < B * c; p++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                double best = -INFINITY;
                for (int ki = 0; ki < k; ki++)
                    for (int kj = 0; kj < k; kj++) {
                        double v = x[((size_t)p * ih + oy * stride + ki) * iw + ox * stride + kj];
                        best = v > best ? v : best;
                    }
                y[((size_t)p * oh + oy) * ow + ox] = best;
            }
}

/* Mean softmax cross-entropy; probs (optional) gets softmax(z). */
static double ref_xent(const double *z, const int *y, int B, int K, double *probs)
{
    double loss = 0;
    for (int n = 0; n < B; n++) {
        const double *r = z + (size_t)n * K;
        double mx = r[0], sum = 0;
        for (int j = 1; j < K; j++)
            mx = r[j] > mx ? r[j] : mx;
        for (int j = 0; j < K; j++)
            sum += exp(r[j] - mx);
        loss += log(sum) + mx - r[y[n]];
        if (probs)
            for (int j = 0; j < K; j++)
                probs[(size_t)n * K + j] = exp(r[j] - mx) / sum;
    }
    return loss / B;
}

/* ---- central differences ----------------------------------------------------- */

typedef double (*objective_fn)(void *ctx);

static double central_diff(objective_fn f, void *ctx, double *v)
{
    const double keep = *v;
    *v = keep + STEP;
    double up = f(ctx);
    *v = keep - STEP;
    double down = f(ctx);
    *v = keep;
    return (up - down) / (2 * STEP);
}

/* Max relative error between the analytic gradient g[0..n) and central
 * differences of f in each of v[0..n). */
static double grad_err(objective_fn f, void *ctx, double *v, const float *g, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = relerr(g[i], central_diff(f, ctx, &v[i]));
        worst = e > worst ? e : worst;
    }
    return worst;
}

/* ---- dense ---------------------------------------------------------------- */

typedef struct dense_ctx {
    int B, in, out;
    double *x, *W, *b, *dy, *y;
} dense_ctx;

static double dense_obj(void *p)
{
    dense_ctx *c = p;
    ref_dense(c->x, c->B, c->in, c->out, c->W, c->b, c->y);
    return dot(c->dy, c->y, (size_t)c->B * c->out);
}

/* Odd sizes exercise the edge paths of OpenBLAS's blocked kernels. */
static const int dense_cases[][3] = {{1, 1, 1}, {4, 7, 5}, {3, 33, 17}, {8, 64, 10}, {5, 130, 3}};

Test(nn_grad, dense_forward_matches_reference)
{
    nn_rng r;
    nn_rng_seed(&r, 11, 0);
    for (size_t t = 0; t < sizeof dense_cases / sizeof dense_cases[0]; t++) {
        const int B = dense_cases[t][0], in = dense_cases[t][1], out = dense_cases[t][2];
        const size_t nx = (size_t)B * in, nw = (size_t)out * in, ny = (size_t)B * out;
        float *x = rand_floats(&r, nx, -1, 1), *W = rand_floats(&r, nw, -1, 1), *b = rand_floats(&r, out, -1, 1);
        float *y = garbage(ny);
        double *xd = to_double(x, nx), *Wd = to_double(W, nw), *bd = to_double(b, out), *yd = malloc(ny * sizeof *yd);
        nn_dense_forward(x, B, in, out, W, b, y);
        ref_dense(xd, B, in, out, Wd, bd, yd);
        double e = max_err_f(y, yd, ny);
        cr_log_info("dense B=%d in=%d out=%d forward: max rel err %.3g", B, in, out, e);
        cr_expect(e < FWD_TOL, "dense B=%d in=%d out=%d: forward max rel err %.3g", B, in, out, e);
        free(x), free(W), free(b), free(y), free(xd), free(Wd), free(bd), free(yd);
    }
}

Test(nn_grad, dense_gradients)
{
    nn_rng r;
    nn_rng_seed(&r, 12, 0);
    for (size_t t = 0; t < sizeof dense_cases / sizeof dense_cases[0]; t++) {
        const int B = dense_cases[t][0], in = dense_cases[t][1], out = dense_cases[t][2];
        const size_t nx = (size_t)B * in, nw = (size_t)out * in, ny = (size_t)B * out;
        float *x = rand_floats(&r, nx, -1, 1), *W = rand_floats(&r, nw, -1, 1), *b = rand_floats(&r, out, -1, 1);
        float *dy = rand_floats(&r, ny, -1, 1);
        float *dW = garbage(nw), *db = garbage(out), *dx = garbage(nx);
        nn_dense_backward(x, dy, B, in, out, W, dW, db, dx);

        dense_ctx c = {B, in, out, to_double(x, nx), to_double(W, nw), to_double(b, out), to_double(dy, ny),
                       malloc(ny * sizeof(double))};
        double eW = grad_err(dense_obj, &c, c.W, dW, nw);
        double eb = grad_err(dense_obj, &c, c.b, db, out);
        double ex = grad_err(dense_obj, &c, c.x, dx, nx);
        cr_log_info("dense B=%d in=%d out=%d: dW %.3g db %.3g dx %.3g", B, in, out, eW, eb, ex);
        cr_expect(eW < GRAD_TOL, "dense B=%d in=%d out=%d: dW max rel err %.3g", B, in, out, eW);
        cr_expect(eb < GRAD_TOL, "dense B=%d in=%d out=%d: db max rel err %.3g", B, in, out, eb);
        cr_expect(ex < GRAD_TOL, "dense B=%d in=%d out=%d: dx max rel err %.3g", B, in, out, ex);

        /* dx = NULL (the model's first layer) must not change dW / db. */
        float *dW2 = garbage(nw), *db2 = garbage(out);
        nn_dense_backward(x, dy, B, in, out, W, dW2, db2, NULL);
        cr_expect(memcmp(dW, dW2, nw * sizeof *dW) == 0 && memcmp(db, db2, out * sizeof *db) == 0,
                  "dense B=%d in=%d out=%d: dx = NULL changed dW/db", B, in, out);

        free(x), free(W), free(b), free(dy), free(dW), free(db), free(dx), free(dW2), free(db2);
        free(c.x), free(c.W), free(c.b), free(c.dy), free(c.y);
    }
}

/* ---- relu ----------------------------------------------------------------- */

typedef struct relu_ctx {
    size_t n;
    double *x, *dy, *y;
} relu_ctx;

static double relu_obj(void *p)
{
    relu_ctx *c = p;
    ref_relu(c->x, c->n, c->y);
    return dot(c->dy, c->y, c->n);
}

Test(nn_grad, relu_gradient)
{
    enum { N = 257 };
    nn_rng r;
    nn_rng_seed(&r, 13, 0);
    /* |x| >= 0.1, far from the kink compared with the step. */
    float *x = rand_floats(&r, N, 0.1f, 1), *dy = rand_floats(&r, N, -1, 1);
    for (int i = 0; i < N; i++)
        if (nn_rng_uniform(&r) < 0.5f)
            x[i] = -x[i];
    float *y = garbage(N), *dx = garbage(N);
    nn_relu_forward(x, N, y);
    for (int i = 0; i < N; i++)
        cr_assert_eq(y[i], x[i] > 0 ? x[i] : 0.0f, "relu(%g) = %g", x[i], y[i]);
    nn_relu_backward(y, dy, N, dx);

    relu_ctx c = {N, to_double(x, N), to_double(dy, N), malloc(N * sizeof(double))};
    double e = grad_err(relu_obj, &c, c.x, dx, N);
    cr_log_info("relu: dx %.3g", e);
    cr_expect(e < GRAD_TOL, "relu: dx max rel err %.3g", e);
    free(x), free(dy), free(y), free(dx), free(c.x), free(c.dy), free(c.y);
}

/* ---- softmax cross-entropy --------------------------------------------------- */

typedef struct xent_ctx {
    int B, K;
    double *z;
    const int *y;
} xent_ctx;

static double xent_obj(void *p)
{
    xent_ctx *c = p;
    return ref_xent(c->z, c->y, c->B, c->K, NULL);
}

Test(nn_grad, softmax_xent_gradient)
{
    enum { B = 5, K = 7 };
    nn_rng r;
    nn_rng_seed(&r, 14, 0);
    float *z = rand_floats(&r, B * K, -3, 3);
    /* One confident row (logits ~ +-60): exp must not overflow, and a confident
     * wrong label must give a large finite loss. */
    for (int j = 0; j < K; j++)
        z[K + j] *= 20;
    int y[B];
    for (int i = 0; i < B; i++)
        y[i] = (int)nn_rng_below(&r, K);
    float *probs = garbage(B * K), *dz = garbage(B * K);
    float loss = nn_softmax_xent(z, y, B, K, probs, dz);

    xent_ctx c = {B, K, to_double(z, B * K), y};
    double pd[B * K];
    double want = ref_xent(c.z, y, B, K, pd);
    cr_expect(relerr(loss, want) < FWD_TOL, "softmax_xent: loss %.9g, reference %.9g", loss, want);
    double ep = max_err_f(probs, pd, B * K);
    cr_expect(ep < FWD_TOL, "softmax_xent: probs max rel err %.3g", ep);
    double e = grad_err(xent_obj, &c, c.z, dz, B * K);
    cr_log_info("softmax_xent: loss %.3g probs %.3g dlogits %.3g", relerr(loss, want), ep, e);
    cr_expect(e < GRAD_TOL, "softmax_xent: dlogits max rel err %.3g", e);

    /* dlogits = NULL (evaluation) gives the same loss. */
    cr_expect_eq(nn_softmax_xent(z, y, B, K, probs, NULL), loss);
    free(z), free(probs), free(dz), free(c.z);
}

/* ---- conv2d ----------------------------------------------------------------- */

typedef struct conv_case {
    int B, ic, ih, iw, oc, k, stride, pad;
} conv_case;

/* Stride 2 and 3 leave input rows/columns that no window reaches; pad 2 with
 * k 4 and stride 2 mixes padding and skipping; a 5x5 kernel on a 3x2 image
 * only fits thanks to the padding, so no window lies wholly inside it. */
static const conv_case conv_cases[] = {
    {1, 1, 6, 6, 1, 3, 1, 0}, {2, 3, 7, 9, 4, 3, 2, 0}, {3, 2, 8, 5, 3, 5, 1, 2}, {2, 2, 9, 7, 5, 4, 2, 2},
    {2, 4, 5, 3, 2, 1, 1, 0}, {3, 3, 6, 10, 6, 5, 1, 2}, {2, 2, 3, 2, 3, 5, 1, 2}, {2, 1, 11, 8, 2, 3, 3, 1},
};

typedef struct conv_ctx {
    nn_conv_shape s;
    int B;
    double *x, *W, *b, *dy, *y;
} conv_ctx;

static double conv_obj(void *p)
{
    conv_ctx *c = p;
    ref_conv(&c->s, c->x, c->B, c->W, c->b, c->y);
    return dot(c->dy, c->y, (size_t)c->B * c->s.oc * c->s.oh * c->s.ow);
}

#define CONV_FMT "conv B=%d ic=%d %dx%d oc=%d k=%d stride=%d pad=%d"
#define CONV_ARGS(t) (t)->B, (t)->ic, (t)->ih, (t)->iw, (t)->oc, (t)->k, (t)->stride, (t)->pad

Test(nn_grad, conv2d_shape_resolve)
{
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++) {
        const conv_case *t = &conv_cases[i];
        nn_conv_shape want = conv_shape(t->ic, t->ih, t->iw, t->oc, t->k, t->stride, t->pad);
        nn_conv_shape s = {.ic = t->ic, .ih = t->ih, .iw = t->iw, .oc = t->oc, .k = t->k, .stride = t->stride,
                           .pad = t->pad};
        cr_assert_eq(nn_conv_shape_resolve(&s), 0, CONV_FMT, CONV_ARGS(t));
        cr_expect(s.oh == want.oh && s.ow == want.ow, CONV_FMT ": %dx%d, want %dx%d", CONV_ARGS(t), s.oh, s.ow,
                  want.oh, want.ow);
    }
    nn_conv_shape big = {.ic = 1, .ih = 4, .iw = 9, .oc = 1, .k = 5, .stride = 1, .pad = 0};
    cr_expect_eq(nn_conv_shape_resolve(&big), -EINVAL, "a 5x5 kernel on a 4-row input must not fit");
    big.pad = 1; /* 4 + 2 = 6 rows: fits */
    cr_expect_eq(nn_conv_shape_resolve(&big), 0);
}

Test(nn_grad, conv2d_forward_matches_reference)
{
    nn_rng r;
    nn_rng_seed(&r, 15, 0);
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++) {
        const conv_case *t = &conv_cases[i];
        nn_conv_shape s = conv_shape(t->ic, t->ih, t->iw, t->oc, t->k, t->stride, t->pad);
        const int B = t->B;
        const size_t nx = (size_t)B * s.ic * s.ih * s.iw, nw = (size_t)s.oc * s.ic * s.k * s.k,
                     ny = (size_t)B * s.oc * s.oh * s.ow;
        float *x = rand_floats(&r, nx, -1, 1), *W = rand_floats(&r, nw, -1, 1), *b = rand_floats(&r, s.oc, -1, 1);
        float *y = garbage(ny), *work = garbage(nn_conv2d_workspace(&s, B));
        nn_conv2d_forward(&s, x, B, W, b, y, work);
        double *xd = to_double(x, nx), *Wd = to_double(W, nw), *bd = to_double(b, s.oc), *yd = malloc(ny * sizeof *yd);
        ref_conv(&s, xd, B, Wd, bd, yd);
        double e = max_err_f(y, yd, ny);
        cr_log_info(CONV_FMT " forward: max rel err %.3g", CONV_ARGS(t), e);
        cr_expect(e < FWD_TOL, CONV_FMT ": forward max rel err %.3g", CONV_ARGS(t), e);
        free(x), free(W), free(b), free(y), free(work), free(xd), free(Wd), free(bd), free(yd);
    }
}

Test(nn_grad, conv2d_gradients)
{
    nn_rng r;
    nn_rng_seed(&r, 16, 0);
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++) {
        const conv_case *t = &conv_cases[i];
        nn_conv_shape s = conv_shape(t->ic, t->ih, t->iw, t->oc, t->k, t->stride, t->pad);
        const int B = t->B;
        const size_t nx = (size_t)B * s.ic * s.ih * s.iw, nw = (size_t)s.oc * s.ic * s.k * s.k,
                     ny = (size_t)B * s.oc * s.oh * s.ow, nwork = nn_conv2d_workspace(&s, B);
        float *x = rand_floats(&r, nx, -1, 1), *W = rand_floats(&r, nw, -1, 1), *b = rand_floats(&r, s.oc, -1, 1);
        float *dy = rand_floats(&r, ny, -1, 1);
        float *y = garbage(ny), *dW = garbage(nw), *db = garbage(s.oc), *dx = garbage(nx);
        /* Backward reads the patches its forward left in the workspace (see
         * nn_conv2d_workspace); garbage elsewhere in it must not matter. */
        float *work = garbage(nwork);
        nn_conv2d_forward(&s, x, B, W, b, y, work);
        nn_conv2d_backward(&s, x, dy, B, W, dW, db, dx, work);

        conv_ctx c = {s, B, to_double(x, nx), to_double(W, nw), to_double(b, s.oc), to_double(dy, ny),
                      malloc(ny * sizeof(double))};
        double eW = grad_err(conv_obj, &c, c.W, dW, nw);
        double eb = grad_err(conv_obj, &c, c.b, db, s.oc);
        double ex = grad_err(conv_obj, &c, c.x, dx, nx);
        cr_log_info(CONV_FMT ": dW %.3g db %.3g dx %.3g", CONV_ARGS(t), eW, eb, ex);
        cr_expect(eW < GRAD_TOL, CONV_FMT ": dW max rel err %.3g", CONV_ARGS(t), eW);
        cr_expect(eb < GRAD_TOL, CONV_FMT ": db max rel err %.3g", CONV_ARGS(t), eb);
        cr_expect(ex < GRAD_TOL, CONV_FMT ": dx max rel err %.3g", CONV_ARGS(t), ex);

        /* dx = NULL (the model's first layer) must not change dW / db. A fresh
         * forward first: backward with dx reuses the patch area for d(patches). */
        float *dW2 = garbage(nw), *db2 = garbage(s.oc);
        for (size_t j = 0; j < nwork; j++)
            work[j] = GARBAGE;
        nn_conv2d_forward(&s, x, B, W, b, y, work);
        nn_conv2d_backward(&s, x, dy, B, W, dW2, db2, NULL, work);
        cr_expect(memcmp(dW, dW2, nw * sizeof *dW) == 0 && memcmp(db, db2, s.oc * sizeof *db) == 0,
                  CONV_FMT ": dx = NULL changed dW/db", CONV_ARGS(t));

        free(x), free(W), free(b), free(dy), free(y), free(dW), free(db), free(dx), free(work), free(dW2), free(db2);
        free(c.x), free(c.W), free(c.b), free(c.dy), free(c.y);
    }
}

/* ---- maxpool ---------------------------------------------------------------- */

typedef struct pool_ctx {
    int c, ih, iw, k, stride, B;
    size_t ny;
    double *x, *dy, *y;
} pool_ctx;

static double pool_obj(void *p)
{
    pool_ctx *c = p;
    ref_pool(c->c, c->ih, c->iw, c->k, c->stride, c->x, c->B, c->y);
    return dot(c->dy, c->y, c->ny);
}

Test(nn_grad, maxpool_gradient)
{
    /* {B, c, ih, iw, k, stride}: non-overlapping with a column no window reaches,
     * and overlapping windows, where one input can win twice and backward must
     * add both. */
    static const int cases[][6] = {{2, 2, 6, 7, 2, 2}, {2, 3, 7, 5, 3, 2}, {1, 1, 4, 4, 2, 1}};
    nn_rng r;
    nn_rng_seed(&r, 17, 0);
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const int B = cases[t][0], c = cases[t][1], ih = cases[t][2], iw = cases[t][3], k = cases[t][4],
                  st = cases[t][5];
        const int oh = (ih - k) / st + 1, ow = (iw - k) / st + 1;
        const size_t nx = (size_t)B * c * ih * iw, ny = (size_t)B * c * oh * ow;
        /* Distinct values 0.01 apart, shuffled: the argmax is unique and does not
         * move under a step of 1e-6. */
        float *x = malloc(nx * sizeof *x);
        for (size_t i = 0; i < nx; i++)
            x[i] = 0.01f * (float)i - 1.0f;
        for (size_t i = nx - 1; i > 0; i--) {
            size_t j = (size_t)nn_rng_below(&r, i + 1);
            float tmp = x[i];
            x[i] = x[j], x[j] = tmp;
        }
        float *dy = rand_floats(&r, ny, -1, 1), *y = garbage(ny), *dx = garbage(nx);
        int *argmax = malloc(ny * sizeof *argmax);
        nn_maxpool_forward(c, ih, iw, k, st, x, B, y, argmax);
        nn_maxpool_backward(c, ih, iw, k, st, dy, argmax, B, dx);

        pool_ctx p = {c, ih, iw, k, st, B, ny, to_double(x, nx), to_double(dy, ny), malloc(ny * sizeof(double))};
        ref_pool(c, ih, iw, k, st, p.x, B, p.y);
        for (size_t i = 0; i < ny; i++)
            cr_assert_eq((double)y[i], p.y[i], "maxpool case %zu: y[%zu] = %g, want %g", t, i, y[i], p.y[i]);
        double e = grad_err(pool_obj, &p, p.x, dx, nx);
        cr_log_info("maxpool B=%d c=%d %dx%d k=%d stride=%d: dx %.3g", B, c, ih, iw, k, st, e);
        cr_expect(e < GRAD_TOL, "maxpool B=%d c=%d %dx%d k=%d stride=%d: dx max rel err %.3g", B, c, ih, iw, k, st,
                  e);
        free(x), free(dy), free(y), free(dx), free(argmax), free(p.x), free(p.dy), free(p.y);
    }
}

/* ---- whole models ------------------------------------------------------------ */

/* The architecture is written out here from the spec's documentation (not
 * read from m.layer), and parameters are found by view NAME: a model whose
 * layers, shapes or parameter layout differ from what it claims fails the
 * forward comparison. */
typedef struct ref_op {
    enum { OP_DENSE, OP_RELU, OP_CONV, OP_POOL } kind;
    const char *name; /* parameter prefix: "fc1" -> "fc1.weight", "fc1.bias" */
    int out;          /* dense width (0: n_classes) or conv channels */
    int k, pad;       /* conv kernel and padding (stride 1); pool window = stride */
} ref_op;

#define MAX_OPS 16

typedef struct ref_model {
    const ref_op *op;
    int n_op, B, K;
    int c[MAX_OPS + 1], h[MAX_OPS + 1], w[MAX_OPS + 1]; /* per-sample shape entering op i */
    double *act[MAX_OPS + 1];                          /* act[0] input, act[i + 1] output of op i */
    size_t w_off[MAX_OPS], w_n[MAX_OPS], b_off[MAX_OPS], b_n[MAX_OPS];
    double *P; /* the model's parameters, in double */
    const int *y;
    int from; /* first op to recompute: ops before it do not depend on the perturbed parameter */
} ref_model;

static size_t shape_size(const ref_model *rm, int i) { return (size_t)rm->c[i] * rm->h[i] * rm->w[i]; }

static nn_conv_shape op_conv(const ref_model *rm, int i)
{
    return conv_shape(rm->c[i], rm->h[i], rm->w[i], rm->op[i].out, rm->op[i].k, 1, rm->op[i].pad);
}

static double ref_model_loss(void *p)
{
    ref_model *rm = p;
    for (int i = rm->from; i < rm->n_op; i++) {
        const ref_op *o = &rm->op[i];
        const double *in = rm->act[i];
        double *out = rm->act[i + 1];
        switch (o->kind) {
        case OP_DENSE:
            ref_dense(in, rm->B, (int)shape_size(rm, i), rm->w[i + 1], rm->P + rm->w_off[i], rm->P + rm->b_off[i],
                      out);
            break;
        case OP_RELU:
            ref_relu(in, (size_t)rm->B * shape_size(rm, i), out);
            break;
        case OP_CONV: {
            nn_conv_shape s = op_conv(rm, i);
            ref_conv(&s, in, rm->B, rm->P + rm->w_off[i], rm->P + rm->b_off[i], out);
            break;
        }
        case OP_POOL:
            ref_pool(rm->c[i], rm->h[i], rm->w[i], o->k, o->k, in, rm->B, out);
            break;
        }
    }
    return ref_xent(rm->act[rm->n_op], rm->y, rm->B, rm->K, NULL);
}

/* Finds view "<prefix>.<kind>" of m; its index goes to *view. */
static int find_view(const nn_model *m, const char *prefix, const char *kind, size_t *off, size_t *n, int *view)
{
    char want[64], name[64];
    snprintf(want, sizeof want, "%s.%s", prefix, kind);
    for (int i = 0; nn_model_view(m, i, name, sizeof name, off, n) == 0; i++)
        if (strcmp(name, want) == 0) {
            *view = i;
            return 0;
        }
    return -ENOENT;
}

static void check_model(const char *spec, const ref_op *ops, int n_op, int c, int h, int w, int K, int B)
{
    char err[256] = "";
    nn_model m;
    /* max_batch > B: buffers sized for more than the batch in hand. */
    cr_assert_eq(nn_model_init(&m, spec, c, h, w, K, B + 2, 42, err, sizeof err), 0, "%s: %s", spec, err);
    cr_assert_leq(n_op, MAX_OPS);

    ref_model rm = {.op = ops, .n_op = n_op, .B = B, .K = K};
    rm.c[0] = c, rm.h[0] = h, rm.w[0] = w;
    int n_views = 0, owner[2 * MAX_OPS]; /* view index -> op */
    for (int i = 0; i < n_op; i++) {
        const ref_op *o = &ops[i];
        rm.c[i + 1] = rm.c[i], rm.h[i + 1] = rm.h[i], rm.w[i + 1] = rm.w[i];
        size_t want_w = 0, want_b = 0;
        if (o->kind == OP_DENSE) {
            rm.c[i + 1] = 1, rm.h[i + 1] = 1, rm.w[i + 1] = o->out ? o->out : K;
            want_b = (size_t)rm.w[i + 1];
            want_w = want_b * shape_size(&rm, i);
        } else if (o->kind == OP_CONV) {
            nn_conv_shape s = op_conv(&rm, i);
            rm.c[i + 1] = s.oc, rm.h[i + 1] = s.oh, rm.w[i + 1] = s.ow;
            want_w = (size_t)s.oc * s.ic * s.k * s.k;
            want_b = (size_t)s.oc;
        } else if (o->kind == OP_POOL) {
            rm.h[i + 1] = (rm.h[i] - o->k) / o->k + 1, rm.w[i + 1] = (rm.w[i] - o->k) / o->k + 1;
        }
        if (!want_w)
            continue;
        int vw, vb;
        cr_assert_eq(find_view(&m, o->name, "weight", &rm.w_off[i], &rm.w_n[i], &vw), 0, "%s: no %s.weight", spec,
                     o->name);
        cr_assert_eq(find_view(&m, o->name, "bias", &rm.b_off[i], &rm.b_n[i], &vb), 0, "%s: no %s.bias", spec,
                     o->name);
        cr_assert_eq(rm.w_n[i], want_w, "%s: %s.weight has %zu entries, want %zu", spec, o->name, rm.w_n[i], want_w);
        cr_assert_eq(rm.b_n[i], want_b, "%s: %s.bias has %zu entries, want %zu", spec, o->name, rm.b_n[i], want_b);
        owner[vw] = i, owner[vb] = i;
        n_views += 2;
    }
    /* Every view of the model belongs to an op above: none goes unchecked. */
    char name[64];
    size_t off, cnt;
    cr_assert_eq(nn_model_view(&m, n_views, name, sizeof name, &off, &cnt), -ENOENT,
                 "%s: more parameter views than the reference has (%s)", spec, name);

    nn_rng r;
    nn_rng_seed(&r, 43, 0);
    /* Biases start at zero: give them values, or a forward that adds the wrong
     * bias (or none) would pass. */
    for (int i = 0; i < n_op; i++)
        for (size_t j = 0; j < rm.b_n[i]; j++)
            m.params[rm.b_off[i] + j] = 0.2f * nn_rng_uniform(&r) - 0.1f;
    const size_t in_n = (size_t)B * c * h * w;
    float *x = rand_floats(&r, in_n, 0, 1);
    int y[16];
    cr_assert_leq(B, 16);
    for (int i = 0; i < B; i++)
        y[i] = (int)nn_rng_below(&r, (uint64_t)K);
    rm.y = y;
    for (int i = 0; i <= n_op; i++)
        rm.act[i] = malloc((size_t)B * shape_size(&rm, i) * sizeof(double));
    for (size_t i = 0; i < in_n; i++)
        rm.act[0][i] = x[i];
    rm.P = to_double(m.params, m.n_params);

    for (size_t i = 0; i < m.n_params; i++)
        m.grads[i] = GARBAGE;
    float loss = nn_model_grad(&m, x, y, B, NULL);
    rm.from = 0;
    double want = ref_model_loss(&rm);
    cr_expect(relerr(loss, want) < FWD_TOL, "%s: loss %.9g, reference %.9g", spec, loss, want);
    const float *logits = nn_model_forward(&m, x, B);
    double ef = max_err_f(logits, rm.act[n_op], (size_t)B * K);
    cr_log_info("%s %dx%dx%d B=%d: logits %.3g loss %.3g", spec, c, h, w, B, ef, relerr(loss, want));
    cr_expect(ef < FWD_TOL, "%s: logits max rel err %.3g", spec, ef);

    /* Last view first: checking op i rewrites only act[i + 1 ..], so the cached
     * input of every earlier op stays valid and each difference reruns only the
     * tail of the network. */
    for (int v = n_views - 1; v >= 0; v--) {
        cr_assert_eq(nn_model_view(&m, v, name, sizeof name, &off, &cnt), 0);
        rm.from = owner[v];
        const size_t picks = cnt < MODEL_SAMPLES ? cnt : MODEL_SAMPLES;
        double worst = 0;
        size_t worst_at = 0;
        for (size_t j = 0; j < picks; j++) {
            size_t at = off + (cnt <= MODEL_SAMPLES ? j : (size_t)nn_rng_below(&r, cnt));
            double e = relerr(m.grads[at], central_diff(ref_model_loss, &rm, &rm.P[at]));
            if (e > worst)
                worst = e, worst_at = at;
        }
        cr_log_info("%s %dx%dx%d B=%d: %s (%zu of %zu) %.3g", spec, c, h, w, B, name, picks, cnt, worst);
        cr_expect(worst < GRAD_TOL, "%s %dx%dx%d B=%d: %s max rel err %.3g (at param %zu: %g)", spec, c, h, w, B,
                  name, worst, worst_at, m.grads[worst_at]);
    }

    for (int i = 0; i <= n_op; i++)
        free(rm.act[i]);
    free(rm.P), free(x);
    nn_model_free(&m);
}

Test(nn_grad, model_mlp_hidden)
{
    static const ref_op ops[] = {{OP_DENSE, "fc1", 7, 0, 0}, {OP_RELU, NULL, 0, 0, 0}, {OP_DENSE, "fc2", 5, 0, 0},
                                 {OP_RELU, NULL, 0, 0, 0},   {OP_DENSE, "fc3", 0, 0, 0}};
    check_model("mlp:7,5", ops, 5, 2, 3, 4, 4, 5);
}

Test(nn_grad, model_mlp_softmax_regression)
{
    static const ref_op ops[] = {{OP_DENSE, "fc1", 0, 0, 0}};
    check_model("mlp", ops, 1, 1, 5, 6, 3, 4);
}

static const ref_op lenet_ops[] = {
    {OP_CONV, "conv1", 6, 5, 2},  {OP_RELU, NULL, 0, 0, 0},    {OP_POOL, NULL, 0, 2, 0},
    {OP_CONV, "conv2", 16, 5, 0}, {OP_RELU, NULL, 0, 0, 0},    {OP_POOL, NULL, 0, 2, 0},
    {OP_DENSE, "fc1", 120, 0, 0}, {OP_RELU, NULL, 0, 0, 0},    {OP_DENSE, "fc2", 84, 0, 0},
    {OP_RELU, NULL, 0, 0, 0},     {OP_DENSE, "fc3", 0, 0, 0},
};

Test(nn_grad, model_lenet_mnist_shape, .timeout = 120)
{
    check_model("lenet", lenet_ops, 11, 1, 28, 28, 10, 3);
}

Test(nn_grad, model_lenet_cifar_shape, .timeout = 120)
{
    check_model("lenet", lenet_ops, 11, 3, 32, 32, 10, 3);
}

/* ---- gelu, tanh, dropout ---------------------------------------------------- */

typedef struct act_ctx {
    size_t n;
    int kind; /* 0 gelu, 1 tanh, 2 dropout (with mask) */
    double *x, *dy, *y, *mask;
} act_ctx;

static double act_obj(void *p)
{
    act_ctx *c = p;
    for (size_t i = 0; i < c->n; i++) {
        const double v = c->x[i];
        c->y[i] = c->kind == 0 ? 0.5 * v * (1 + erf(v / sqrt(2.0))) : c->kind == 1 ? tanh(v) : v * c->mask[i];
    }
    return dot(c->dy, c->y, c->n);
}

Test(nn_grad, gelu_tanh_dropout_match_references_and_their_gradients)
{
    enum { N = 301 };
    nn_rng r;
    nn_rng_seed(&r, 21, 0);
    float *x = rand_floats(&r, N, -3, 3), *dy = rand_floats(&r, N, -1, 1), *y = garbage(N), *dx = garbage(N);
    float *mask = garbage(N);
    act_ctx c = {N, 0, to_double(x, N), to_double(dy, N), malloc(N * sizeof(double)), malloc(N * sizeof(double))};
    for (int kind = 0; kind < 3; kind++) {
        const char *name = kind == 0 ? "gelu" : kind == 1 ? "tanh" : "dropout";
        if (kind == 0)
            nn_gelu_forward(x, N, y), nn_gelu_backward(x, dy, N, dx);
        else if (kind == 1)
            nn_tanh_forward(x, N, y), nn_tanh_backward(y, dy, N, dx);
        else {
            nn_rng dr;
            nn_rng_seed(&dr, 5, 0);
            nn_dropout_forward(x, N, 0.3f, &dr, mask, y);
            nn_dropout_backward(mask, dy, N, dx);
            int zeros = 0;
            for (int i = 0; i < N; i++) {
                cr_assert(mask[i] == 0.0f || fabsf(mask[i] - 1.0f / 0.7f) < 1e-6f, "dropout mask %g", mask[i]);
                zeros += mask[i] == 0.0f;
                c.mask[i] = mask[i];
            }
            cr_expect(zeros > N * 0.2 && zeros < N * 0.4, "dropout p=0.3 zeroed %d of %d", zeros, N);
        }
        c.kind = kind;
        act_obj(&c);
        const double ef = max_err_f(y, c.y, N), eg = grad_err(act_obj, &c, c.x, dx, N);
        cr_log_info("%s: forward %.3g, dx %.3g", name, ef, eg);
        cr_expect(ef < FWD_TOL, "%s: forward max rel err %.3g", name, ef);
        cr_expect(eg < GRAD_TOL, "%s: dx max rel err %.3g", name, eg);
    }
    free(x), free(dy), free(y), free(dx), free(mask), free(c.x), free(c.dy), free(c.y), free(c.mask);
}

/* ---- average pool ----------------------------------------------------------- */

typedef struct avg_ctx {
    int c, ih, iw, k, stride, B;
    double *x, *dy, *y;
} avg_ctx;

static double avg_obj(void *p)
{
    avg_ctx *a = p;
    const int oh = (a->ih - a->k) / a->stride + 1, ow = (a->iw - a->k) / a->stride + 1;
    for (int pl = 0; pl < a->B * a->c; pl++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                double s = 0;
                for (int i = 0; i < a->k; i++)
                    for (int j = 0; j < a->k; j++)
                        s += a->x[(size_t)pl * a->ih * a->iw + (oy * a->stride + i) * a->iw + ox * a->stride + j];
                a->y[((size_t)pl * oh + oy) * ow + ox] = s / (a->k * a->k);
            }
    return dot(a->dy, a->y, (size_t)a->B * a->c * oh * ow);
}

Test(nn_grad, avgpool_windowed_and_global)
{
    static const int cases[][6] = {{2, 6, 6, 2, 2, 3}, {3, 7, 5, 3, 2, 2}, {4, 5, 5, 5, 1, 2}}; /* c ih iw k stride B */
    nn_rng r;
    nn_rng_seed(&r, 22, 0);
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        avg_ctx a = {cases[t][0], cases[t][1], cases[t][2], cases[t][3], cases[t][4], cases[t][5], NULL, NULL, NULL};
        const int oh = (a.ih - a.k) / a.stride + 1, ow = (a.iw - a.k) / a.stride + 1;
        const size_t nx = (size_t)a.B * a.c * a.ih * a.iw, ny = (size_t)a.B * a.c * oh * ow;
        float *x = rand_floats(&r, nx, -1, 1), *dy = rand_floats(&r, ny, -1, 1), *y = garbage(ny), *dx = garbage(nx);
        nn_avgpool_forward(a.c, a.ih, a.iw, a.k, a.stride, x, a.B, y);
        nn_avgpool_backward(a.c, a.ih, a.iw, a.k, a.stride, dy, a.B, dx);
        a.x = to_double(x, nx), a.dy = to_double(dy, ny), a.y = malloc(ny * sizeof(double));
        avg_obj(&a);
        const double ef = max_err_f(y, a.y, ny), eg = grad_err(avg_obj, &a, a.x, dx, nx);
        cr_log_info("avgpool case %zu: forward %.3g, dx %.3g", t, ef, eg);
        cr_expect(ef < FWD_TOL && eg < GRAD_TOL, "avgpool case %zu: forward %.3g, dx %.3g", t, ef, eg);
        free(x), free(dy), free(y), free(dx), free(a.x), free(a.dy), free(a.y);
    }
}

/* ---- group and layer normalisation ------------------------------------------- */

typedef struct norm_ctx {
    nn_norm_shape s;
    int B;
    double *x, *gamma, *beta, *dy, *y;
} norm_ctx;

static double norm_obj(void *p)
{
    norm_ctx *c = p;
    const size_t span = c->s.n / c->s.groups;
    for (int b = 0; b < c->B; b++)
        for (int g = 0; g < c->s.groups; g++) {
            const double *x = c->x + (size_t)b * c->s.n + (size_t)g * span;
            double mean = 0, var = 0;
            for (size_t i = 0; i < span; i++)
                mean += x[i] / span;
            for (size_t i = 0; i < span; i++)
                var += (x[i] - mean) * (x[i] - mean) / span;
            for (size_t i = 0; i < span; i++) {
                const size_t a = ((size_t)g * span + i) / c->s.per_affine;
                c->y[(size_t)b * c->s.n + (size_t)g * span + i] =
                    (x[i] - mean) / sqrt(var + 1e-5) * c->gamma[a] + c->beta[a];
            }
        }
    return dot(c->dy, c->y, (size_t)c->B * c->s.n);
}

Test(nn_grad, group_and_layer_norm)
{
    /* n, groups, per_affine: group norm of 6 channels of 3x3 in 3 groups and in
     * 1 group; layer norm of 10 features; group norm with a group per channel. */
    static const struct {
        size_t n;
        int groups;
        size_t per;
    } cases[] = {{54, 3, 9}, {54, 1, 9}, {10, 1, 1}, {32, 8, 4}};
    nn_rng r;
    nn_rng_seed(&r, 23, 0);
    const int B = 3;
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        norm_ctx c = {{cases[t].n, cases[t].groups, cases[t].per}, B, NULL, NULL, NULL, NULL, NULL};
        const size_t nx = (size_t)B * c.s.n, na = c.s.n / c.s.per_affine;
        float *x = rand_floats(&r, nx, -2, 2), *gamma = rand_floats(&r, na, 0.5f, 1.5f);
        float *beta = rand_floats(&r, na, -1, 1), *dy = rand_floats(&r, nx, -1, 1);
        float *y = garbage(nx), *dx = garbage(nx), *dg = garbage(na), *db = garbage(na);
        float *stats = garbage(2 * (size_t)B * c.s.groups);
        nn_norm_forward(&c.s, x, B, gamma, beta, y, stats);
        nn_norm_backward(&c.s, x, dy, B, gamma, stats, dg, db, dx);
        c.x = to_double(x, nx), c.gamma = to_double(gamma, na), c.beta = to_double(beta, na);
        c.dy = to_double(dy, nx), c.y = malloc(nx * sizeof(double));
        norm_obj(&c);
        const double ef = max_err_f(y, c.y, nx);
        const double ex = grad_err(norm_obj, &c, c.x, dx, nx), eg = grad_err(norm_obj, &c, c.gamma, dg, na),
                     eb = grad_err(norm_obj, &c, c.beta, db, na);
        cr_log_info("norm case %zu: forward %.3g, dx %.3g, dgamma %.3g, dbeta %.3g", t, ef, ex, eg, eb);
        cr_expect(ef < FWD_TOL, "norm case %zu: forward %.3g", t, ef);
        cr_expect(ex < GRAD_TOL && eg < GRAD_TOL && eb < GRAD_TOL, "norm case %zu: dx %.3g dgamma %.3g dbeta %.3g", t,
                  ex, eg, eb);
        free(x), free(gamma), free(beta), free(dy), free(y), free(dx), free(dg), free(db), free(stats);
        free(c.x), free(c.gamma), free(c.beta), free(c.dy), free(c.y);
    }
}

/* ---- whole models from specs -------------------------------------------------- */

/* The wiring of a spec (residual sums, norms, dropout masks held fixed by
 * resetting `steps`, global pools): nn_model_grad against central
 * differences of the model's own float loss. Float differences are coarse, so
 * the spec has no kinks (tanh, gelu, average pools), each view's 6 largest
 * gradients are checked, and the tolerance is 2%: a wrong wire is off by
 * O(1). The kernels themselves are checked against double references above. */
static void check_spec(const char *spec, int c, int h, int w)
{
    enum { B = 4, K = 5 };
    char err[256];
    nn_model m;
    cr_assert_eq(nn_model_init(&m, spec, c, h, w, K, B, 7, err, sizeof err), 0, "%s", err);
    nn_rng r;
    nn_rng_seed(&r, 24, 0);
    float *x = rand_floats(&r, (size_t)B * c * h * w, -1, 1);
    int y[B];
    for (int i = 0; i < B; i++)
        y[i] = i % K;
    for (size_t i = 0; i < m.n_params; i++) /* norms start as the identity: move them off it */
        m.params[i] += 0.2f * (nn_rng_uniform(&r) - 0.5f);
    nn_model_grad(&m, x, y, B, NULL);
    float *g = malloc(m.n_params * sizeof *g);
    memcpy(g, m.grads, m.n_params * sizeof *g);
    char name[64];
    size_t off, n;
    double worst = 0;
    for (int v = 0; nn_model_view(&m, v, name, sizeof name, &off, &n) == 0; v++) {
        for (int pick = 0; pick < 6 && pick < (int)n; pick++) {
            size_t best = off; /* the largest |g| not yet picked (marked by NaN in g) */
            for (size_t i = off; i < off + n; i++)
                if (!isnan(g[i]) && (isnan(g[best]) || fabsf(g[i]) > fabsf(g[best])))
                    best = i;
            const float keep = m.params[best], hstep = 1e-2f;
            m.params[best] = keep + hstep, m.steps = 0;
            const double up = nn_model_grad(&m, x, y, B, NULL);
            m.params[best] = keep - hstep, m.steps = 0;
            const double down = nn_model_grad(&m, x, y, B, NULL);
            m.params[best] = keep;
            const double fd = (up - down) / (2.0 * hstep), e = relerr(g[best], fd);
            cr_expect(e < 2e-2, "%s: %s[%zu]: gradient %.6g, central difference %.6g", spec, name, best - off, g[best],
                      fd);
            worst = e > worst ? e : worst;
            g[best] = NAN;
        }
    }
    cr_log_info("%s: worst rel err %.3g", spec, worst);
    free(g), free(x);
    nn_model_free(&m);
}

Test(nn_grad, spec_models_residual_norms_dropout, .timeout = 120)
{
    check_spec("conv:4:3:pad=1,gn:2,tanh,res(conv:4:3:pad=1,gn:4,gelu,conv:4:3:pad=1),tanh,avgpool:2,"
               "res(res(ln,tanh),gelu),avgpool,fc:6,dropout:0.3,tanh,fc",
               2, 6, 6);
    check_spec("res(conv:1:3:pad=1,tanh),fc", 1, 5, 5);        /* a block on the model's input */
    check_spec("flatten,res(fc:12,tanh,ln),fc:7,gelu,fc", 1, 3, 4); /* ... seen through a flatten */
    check_spec("conv:3:3:stride=2:pad=1,tanh,fc", 1, 7, 7);
}
