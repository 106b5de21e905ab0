/* nn/'s sequence models (the byte-level GPT: embed, pos, causal attention,
 * per-token fc and ln, the next-token loss over every position) as whole
 * models:
 *
 *  - against PyTorch (tests/fixtures/torch_gpt.txt, made once by
 *    tests/fixtures/make_torch_gpt.py with Debian's python3-torch; no PyTorch
 *    needed here): two GPTs in the layer language, loaded with PyTorch's
 *    parameters by view name, give the same logits, loss and gradients, and
 *    their views have PyTorch's shapes. PyTorch evaluated in float64, so the
 *    errors printed (`--verbose`) are sgp's float round-off alone;
 *  - against central differences of the model's own loss (float, so a coarse
 *    step and a 2% tolerance, as test_nn_grad.c's spec models: a wrong wire is
 *    off by O(1); the kernels are checked tightly in test_nn_seq.c);
 *  - causality through the whole model: the logits (so the loss) at position
 *    t do not depend on the tokens after t, nor on the other samples;
 *  - the preset gpt:L:C:H builds GPT-2's layers with the parameter count of
 *    the formula, and specs that do not fit a sequence model say which layer.
 */
#include "nn/nn_model.h"
#include "nn/nn_rng.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/torch_fixture.h"

TestSuite(nn_torch_gpt);

#define FIXTURE "tests/fixtures/torch_gpt.txt"
#define GARBAGE 1234.5f

/* Section "CASE.NAME" of the fixture. */
static double *section(const char *tcase, const char *name, size_t *n)
{
    char full[160];
    snprintf(full, sizeof full, "%s.%s", tcase, name);
    return torch_fixture_section(FIXTURE, full, n);
}

static double relerr(double a, double b)
{
    double d = fabs(a) + fabs(b);
    return fabs(a - b) / (d > 1e-3 ? d : 1e-3);
}

/* ---- against PyTorch ---------------------------------------------------------- */

/* The cases of make_torch_gpt.py. */
static const struct torch_case {
    const char *name, *spec;
    int V, T, B;
} torch_cases[] = {
    {"small",
     "embed:12,pos,res(ln,fc:36,attn:3,fc:12),res(ln,fc:48,gelu,fc:12),res(ln,fc:36,attn:3,fc:12),"
     "res(ln,fc:48,gelu,fc:12),ln,fc",
     7, 5, 3},
    /* T past the attention kernel's causal blocks of 32 rows */
    {"long", "embed:8,pos,res(ln,fc:24,attn:2,fc:8),res(ln,fc:32,gelu,fc:8),ln,fc", 5, 37, 2},
};

static void check_torch_case(const struct torch_case *tc)
{
    const int V = tc->V, T = tc->T, B = tc->B;
    char err[256];
    nn_model m;
    /* max_batch > B: buffers sized for more than the batch in hand */
    cr_assert_eq(nn_model_init(&m, tc->spec, 1, 1, T, V, B + 2, 1, err, sizeof err), 0, "%s", err);
    cr_assert(nn_model_is_seq(&m));
    cr_assert_eq(m.tokens, T);

    size_t n;
    double *xd = section(tc->name, "x", &n);
    cr_assert_eq(n, (size_t)B * T);
    double *yd = section(tc->name, "y", &n);
    cr_assert_eq(n, (size_t)B * T);
    float *x = malloc((size_t)B * T * sizeof *x);
    int *y = malloc((size_t)B * T * sizeof *y);
    for (int i = 0; i < B * T; i++)
        x[i] = (float)xd[i], y[i] = (int)yd[i];

    /* Every view loaded by name, with PyTorch's count and shape. */
    char name[64];
    size_t off, count, loaded = 0;
    int views = 0;
    for (int v = 0; nn_model_view(&m, v, name, sizeof name, &off, &count) == 0; v++, views++) {
        double *p = section(tc->name, name, &n);
        cr_assert_eq(n, count, "%s: %s has %zu values in PyTorch, %zu in sgp", tc->name, name, n, count);
        for (size_t i = 0; i < n; i++)
            m.params[off + i] = (float)p[i];
        loaded += n;
        free(p);
        char sname[80];
        snprintf(sname, sizeof sname, "shape.%s", name);
        double *shape = section(tc->name, sname, &n);
        int64_t dims[4];
        const int nd = nn_model_view_shape(&m, v, dims);
        cr_expect_eq((size_t)nd, n, "%s: %s has %d dimensions in sgp, %zu in PyTorch", tc->name, name, nd, n);
        for (size_t d = 0; d < n && d < (size_t)nd; d++)
            cr_expect_eq(dims[d], (int64_t)shape[d], "%s: %s dimension %zu: %lld in sgp, %g in PyTorch", tc->name,
                         name, d, (long long)dims[d], shape[d]);
        free(shape);
    }
    cr_expect_eq(loaded, m.n_params, "%s: views cover %zu of %zu parameters", tc->name, loaded, m.n_params);

    double *logits = section(tc->name, "logits", &n);
    cr_assert_eq(n, (size_t)B * T * V);
    double *loss = section(tc->name, "loss", &n);
    const double e_logits = torch_normwise(nn_model_forward(&m, x, B), logits, (size_t)B * T * V);
    cr_log_info("%s: logits normwise error %.3g", tc->name, e_logits);
    cr_expect(e_logits < 1e-5, "%s: logits differ from PyTorch's: normwise error %.3g", tc->name, e_logits);

    for (size_t i = 0; i < m.n_params; i++) /* backward overwrites: a skipped entry shows */
        m.grads[i] = GARBAGE;
    int correct = -1;
    const float got = nn_model_grad(&m, x, y, B, &correct);
    cr_log_info("%s: loss %.9g, PyTorch %.9g: relative error %.3g", tc->name, got, loss[0],
                fabs(got - loss[0]) / loss[0]);
    cr_expect(fabs(got - loss[0]) < 1e-6 * fabs(loss[0]), "%s: loss %.9g, PyTorch %.9g", tc->name, got, loss[0]);
    cr_expect(correct >= 0 && correct <= B * T, "%s: %d correct of %d", tc->name, correct, B * T);
    double worst = 0;
    for (int v = 0; nn_model_view(&m, v, name, sizeof name, &off, &count) == 0; v++) {
        char gname[80];
        snprintf(gname, sizeof gname, "grad.%s", name);
        double *g = section(tc->name, gname, &n);
        const double e = torch_normwise(m.grads + off, g, n);
        cr_log_info("%s: %s normwise error %.3g", tc->name, gname, e);
        cr_expect(e < 1e-5, "%s: %s differs from PyTorch's: normwise error %.3g", tc->name, gname, e);
        worst = fmax(worst, e);
        free(g);
    }
    cr_log_info("%s: %d views, worst gradient normwise error %.3g", tc->name, views, worst);
    free(xd), free(yd), free(x), free(y), free(logits), free(loss);
    nn_model_free(&m);
}

Test(nn_torch_gpt, gpt_matches_pytorch_forward_loss_and_gradients)
{
    for (size_t i = 0; i < sizeof torch_cases / sizeof torch_cases[0]; i++)
        check_torch_case(&torch_cases[i]);
}

/* ---- central differences of the whole model ------------------------------------ */

/* A sequence model with random tokens and labels, and a uniform +-0.4 added
 * to every parameter: norms off the identity, biases off zero, matrices about
 * ten times GPT-2's 0.02, so attention is far from uniform. */
static void random_seq_model(nn_model *m, const char *spec, int V, int T, int B, uint64_t seed, float **x, int **y)
{
    char err[256];
    cr_assert_eq(nn_model_init(m, spec, 1, 1, T, V, B, seed, err, sizeof err), 0, "%s", err);
    cr_assert(nn_model_is_seq(m), "%s", spec);
    nn_rng r;
    nn_rng_seed(&r, seed, 1);
    for (size_t i = 0; i < m->n_params; i++)
        m->params[i] += 0.8f * (nn_rng_uniform(&r) - 0.5f);
    *x = malloc((size_t)B * T * sizeof **x);
    *y = malloc((size_t)B * T * sizeof **y);
    for (int i = 0; i < B * T; i++)
        (*x)[i] = (float)nn_rng_below(&r, (uint64_t)V), (*y)[i] = (int)nn_rng_below(&r, (uint64_t)V);
}

/* Per view, the 6 largest gradients against central differences (relative
 * error, 2%) and 6 random entries, small ones included, against the view's
 * largest gradient (1%). Dropout's masks are held fixed by resetting `steps`. */
static void check_seq_spec(const char *spec, int V, int T, int B)
{
    nn_model m;
    float *x;
    int *y;
    random_seq_model(&m, spec, V, T, B, 7, &x, &y);
    nn_rng r;
    nn_rng_seed(&r, 8, 0);
    nn_model_grad(&m, x, y, B, NULL);
    float *g = malloc(m.n_params * sizeof *g), *left = malloc(m.n_params * sizeof *left);
    memcpy(g, m.grads, m.n_params * sizeof *g);
    memcpy(left, g, m.n_params * sizeof *left);
    char name[64];
    size_t off, n;
    double worst_top = 0, worst_any = 0;
    for (int v = 0; nn_model_view(&m, v, name, sizeof name, &off, &n) == 0; v++) {
        double gmax = 0;
        for (size_t i = off; i < off + n; i++)
            gmax = fmax(gmax, fabsf(g[i]));
        cr_expect(gmax > 0, "%s: %s: every gradient is 0", spec, name);
        for (int pick = 0; pick < 12 && pick < (int)n; pick++) {
            size_t at = off;
            if (pick < 6) { /* the largest |g| not yet picked (marked by NaN in left) */
                for (size_t i = off; i < off + n; i++)
                    if (!isnan(left[i]) && (isnan(left[at]) || fabsf(left[i]) > fabsf(left[at])))
                        at = i;
                left[at] = NAN;
            } else {
                at = off + (size_t)nn_rng_below(&r, n);
            }
            const float keep = m.params[at], h = 1e-2f;
            m.params[at] = keep + h, m.steps = 0;
            const double up = nn_model_grad(&m, x, y, B, NULL);
            m.params[at] = keep - h, m.steps = 0;
            const double down = nn_model_grad(&m, x, y, B, NULL);
            m.params[at] = keep;
            const double fd = (up - down) / (2.0 * h);
            if (pick < 6) {
                const double e = relerr(g[at], fd);
                cr_expect(e < 2e-2, "%s: %s[%zu]: gradient %.6g, central difference %.6g", spec, name, at - off, g[at],
                          fd);
                worst_top = fmax(worst_top, e);
            } else {
                const double e = fabs(g[at] - fd) / gmax;
                cr_expect(e < 1e-2, "%s: %s[%zu]: gradient %.6g, central difference %.6g (largest %.3g)", spec, name,
                          at - off, g[at], fd, gmax);
                worst_any = fmax(worst_any, e);
            }
        }
    }
    cr_log_info("%s V=%d T=%d B=%d: worst rel err %.3g (largest), %.3g of the largest (random)", spec, V, T, B,
                worst_top, worst_any);
    free(g), free(left), free(x), free(y);
    nn_model_free(&m);
}

Test(nn_torch_gpt, whole_model_gradients_match_central_differences, .timeout = 120)
{
    check_seq_spec("gpt:2:8:2", 6, 6, 3);
    /* positions inside a block, a block from the embedding, attention with
     * D = 2, dropout, tanh and a width change between blocks */
    check_seq_spec("embed:8,res(pos,ln,fc:24,attn:4,fc:8,dropout:0.2),fc:16,tanh,res(ln,fc:8,gelu,fc:16),ln,fc", 5,
                   7, 2);
    /* attention straight on the embedding, no norms: the scores see the raw ids' vectors */
    check_seq_spec("embed:6,attn:2,fc", 4, 5, 2);
}

/* ---- causality ---------------------------------------------------------------- */

Test(nn_torch_gpt, position_t_sees_no_later_token_and_no_other_sample)
{
    enum { V = 7, T = 40, B = 3 }; /* T past the attention's blocks of 32 rows */
    nn_model m;
    float *x;
    int *y;
    random_seq_model(&m, "gpt:2:12:3", V, T, B, 11, &x, &y);
    const size_t row = V, per = (size_t)T * V;
    float *base = malloc((size_t)B * per * sizeof *base);
    memcpy(base, nn_model_forward(&m, x, B), (size_t)B * per * sizeof *base);
    float *x2 = malloc((size_t)B * T * sizeof *x2);
    static const int cut[] = {0, 1, 4, 30, 31, 32, 33, 38};
    for (size_t c = 0; c < sizeof cut / sizeof cut[0]; c++) {
        const int t = cut[c];
        memcpy(x2, x, (size_t)B * T * sizeof *x2);
        for (int s = t + 1; s < T; s++) /* sample 0's tokens after t */
            x2[s] = (float)(((int)x[s] + 1 + s % (V - 1)) % V);
        const float *got = nn_model_forward(&m, x2, B);
        cr_expect(memcmp(got, base, (size_t)(t + 1) * row * sizeof *got) == 0,
                  "sample 0: the logits at positions 0..%d change with the tokens after %d", t, t);
        for (int p = 0; p <= t; p++)
            for (size_t k = 0; k < row; k++)
                if (got[p * row + k] != base[p * row + k]) {
                    cr_log_error("cut %d: position %d class %zu: %.9g, was %.9g", t, p, k, got[p * row + k],
                                 base[p * row + k]);
                    p = t, k = row;
                }
        cr_expect(memcmp(got + per, base + per, (B - 1) * per * sizeof *got) == 0,
                  "cut %d: samples 1.. change with sample 0's tokens", t);
        /* ... and the check is not vacuous: the next position does change */
        int changed = 0;
        for (size_t k = 0; k < row; k++)
            changed |= got[(t + 1) * row + k] != base[(t + 1) * row + k];
        cr_expect(changed, "cut %d: the logits at position %d do not see their own token", t, t + 1);
    }
    free(base), free(x2), free(x), free(y);
    nn_model_free(&m);
}

/* ---- the preset and its parameter count ---------------------------------------- */

Test(nn_torch_gpt, preset_builds_gpt2_layers_with_the_formulas_count)
{
    enum { L = 2, C = 16, H = 4, V = 256, T = 32 };
    char err[256];
    nn_model m;
    cr_assert_eq(nn_model_init(&m, "gpt:2:16:4", 1, 1, T, V, 4, 1, err, sizeof err), 0, "%s", err);
    cr_assert(nn_model_is_seq(&m));
    cr_expect_eq(m.tokens, T);
    const size_t per_layer = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C);
    const size_t want = (size_t)V * C + (size_t)T * C + L * per_layer + 2 * C + ((size_t)V * C + V);
    cr_expect_eq(m.n_params, want, "gpt:2:16:4: %zu parameters, the formula gives %zu", m.n_params, want);

    /* The views in order, with PyTorch's shapes. */
    static const struct {
        const char *name;
        int nd;
        int64_t d0, d1;
    } views[] = {
        {"embed1.weight", 2, V, C}, {"pos1.weight", 2, T, C},
        {"ln1.weight", 1, C, 0},    {"ln1.bias", 1, C, 0},     {"fc1.weight", 2, 3 * C, C}, {"fc1.bias", 1, 3 * C, 0},
        {"fc2.weight", 2, C, C},    {"fc2.bias", 1, C, 0},     {"ln2.weight", 1, C, 0},     {"ln2.bias", 1, C, 0},
        {"fc3.weight", 2, 4 * C, C}, {"fc3.bias", 1, 4 * C, 0}, {"fc4.weight", 2, C, 4 * C}, {"fc4.bias", 1, C, 0},
        {"ln3.weight", 1, C, 0},    {"ln3.bias", 1, C, 0},     {"fc5.weight", 2, 3 * C, C}, {"fc5.bias", 1, 3 * C, 0},
        {"fc6.weight", 2, C, C},    {"fc6.bias", 1, C, 0},     {"ln4.weight", 1, C, 0},     {"ln4.bias", 1, C, 0},
        {"fc7.weight", 2, 4 * C, C}, {"fc7.bias", 1, 4 * C, 0}, {"fc8.weight", 2, C, 4 * C}, {"fc8.bias", 1, C, 0},
        {"ln5.weight", 1, C, 0},    {"ln5.bias", 1, C, 0},     {"fc9.weight", 2, V, C},     {"fc9.bias", 1, V, 0},
    };
    const int n_views = (int)(sizeof views / sizeof views[0]);
    char name[64];
    size_t off, count, expect_off = 0;
    for (int v = 0; v < n_views; v++) {
        cr_assert_eq(nn_model_view(&m, v, name, sizeof name, &off, &count), 0, "view %d missing", v);
        cr_expect_str_eq(name, views[v].name, "view %d", v);
        cr_expect_eq(off, expect_off, "%s: offset %zu, want %zu (views tile the parameters)", name, off, expect_off);
        int64_t dims[4];
        cr_expect_eq(nn_model_view_shape(&m, v, dims), views[v].nd, "%s", name);
        cr_expect_eq(dims[0], views[v].d0, "%s: dimension 0 is %lld", name, (long long)dims[0]);
        if (views[v].nd == 2)
            cr_expect_eq(dims[1], views[v].d1, "%s: dimension 1 is %lld", name, (long long)dims[1]);
        cr_expect_eq(count, (size_t)(views[v].d0 * (views[v].nd == 2 ? views[v].d1 : 1)), "%s: %zu values", name,
                     count);
        expect_off = off + count;
    }
    cr_expect_eq(nn_model_view(&m, n_views, name, sizeof name, &off, &count), -ENOENT, "an extra view %s", name);
    cr_expect_eq(expect_off, m.n_params);
    nn_model_free(&m);
}

/* GPT-2's initialisation (nn/MODELS.md): every matrix, embedding and position
 * table N(0, 0.02), the fc that closes a residual block N(0, 0.02 / sqrt(R))
 * for R residual blocks, biases 0, norms the identity. */
Test(nn_torch_gpt, preset_starts_as_gpt2)
{
    enum { L = 3, C = 32, V = 64, T = 16 };
    char err[256];
    nn_model m;
    cr_assert_eq(nn_model_init(&m, "gpt:3:32:4", 1, 1, T, V, 2, 5, err, sizeof err), 0, "%s", err);
    char name[64];
    size_t off, count;
    for (int v = 0; nn_model_view(&m, v, name, sizeof name, &off, &count) == 0; v++) {
        const float *p = m.params + off;
        if (strstr(name, ".bias") || strncmp(name, "ln", 2) == 0) {
            const float want = strncmp(name, "ln", 2) == 0 && strstr(name, ".weight") ? 1.0f : 0.0f;
            for (size_t i = 0; i < count; i++)
                cr_expect_eq(p[i], want, "%s[%zu] = %g, want %g", name, i, p[i], want);
            continue;
        }
        int fc = 0;
        sscanf(name, "fc%d", &fc);
        /* fc2, fc4, ...: the attention's and the MLP's output projections */
        const double want = fc && fc % 2 == 0 && fc <= 4 * L ? 0.02 / sqrt(2.0 * L) : 0.02;
        double sum = 0, sq = 0;
        for (size_t i = 0; i < count; i++)
            sum += p[i], sq += (double)p[i] * p[i];
        const double mean = sum / count, sd = sqrt(sq / count - mean * mean);
        cr_log_info("%s: %zu values, mean %.3g, std %.4g (want %.4g)", name, count, mean, sd, want);
        /* 512 values or more: the sample std is within 15% (about 5 sigma) */
        cr_expect(fabs(sd / want - 1) < 0.15, "%s: std %.4g, want %.4g", name, sd, want);
        cr_expect(fabs(mean) < 5 * want / sqrt((double)count), "%s: mean %.3g", name, mean);
    }
    nn_model_free(&m);
}

/* Every depth the preset accepts builds, and one it refuses gets one short
 * line that names what was written, not its expansion; the preset, like mlp:,
 * takes no signs or spaces ("No spaces", nn/MODELS.md). */
Test(nn_torch_gpt, preset_accepts_what_it_advertises_and_nothing_else)
{
    int built = 0, refused_after = 0;
    for (int L = 1; L <= 30; L++) {
        char spec[32], err[512] = "", want[48];
        snprintf(spec, sizeof spec, "gpt:%d:8:2", L);
        snprintf(want, sizeof want, "model '%s': ", spec);
        nn_model m;
        const int rc = nn_model_init(&m, spec, 1, 1, 4, 5, 1, 1, err, sizeof err);
        if (rc == 0) {
            cr_expect_eq(m.n_layers, 10 * L + 4, "%s: %d layers", spec, m.n_layers);
            cr_expect_eq(refused_after, 0, "%s builds, a shallower preset was refused", spec);
            built = L;
            nn_model_free(&m);
            continue;
        }
        refused_after = refused_after ? refused_after : L;
        cr_expect(strncmp(err, want, strlen(want)) == 0 && strlen(err) < 160,
                  "%s refused with a message that is not about it (%zu characters): %.200s", spec, strlen(err), err);
    }
    cr_log_info("gpt:L:8:2 builds for L = 1..%d", built);
    cr_expect_geq(built, 12, "only gpt:1..%d:8:2 build", built);

    static const char *const odd[] = {"gpt:2: 16:4", "gpt:2:+16:4", "gpt:2:16: 4", "gpt:2:16:+4", "gpt: 2:16:4"};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        char err[512] = "";
        nn_model m;
        const int rc = nn_model_init(&m, odd[i], 1, 1, 8, 5, 1, 1, err, sizeof err);
        cr_expect_eq(rc, -EINVAL, "'%s' is accepted", odd[i]);
        if (rc == 0)
            nn_model_free(&m);
    }
}

/* ---- specs that do not fit a sequence model ------------------------------------- */

Test(nn_torch_gpt, bad_sequence_specs_name_the_layer)
{
    static const struct {
        const char *spec;
        int c, h, w, classes;
        const char *says[2]; /* the message must contain both */
    } bad[] = {
        {"fc:36,attn:3,fc", 1, 1, 8, 5, {"attn1 (position 7)", "only in a sequence model"}},
        {"fc:12,pos,fc", 1, 1, 8, 5, {"pos1 (position 7)", "only in a sequence model"}},
        {"fc:4,embed:12,fc", 1, 1, 8, 5, {"embed1 (position 6)", "must be the first layer"}},
        {"embed:12,fc", 1, 28, 28, 10, {"embed1 (position 1)", "1 x 1 x tokens"}},
        {"embed:12,conv:4:3,fc", 1, 1, 8, 5, {"conv1 (position 10)", "not for a sequence model"}},
        {"embed:12,pos,res(ln,fc:36,attn:5,fc:12),fc", 1, 1, 8, 5, {"attn1 (position 27)", "5 heads"}},
        {"embed:12,attn:3,fc", 1, 1, 8, 5, {"attn1 (position 10)", "multiple of the 3 heads"}},
        {"embed:10,attn:1,fc", 1, 1, 8, 5, {"attn1 (position 10)", "input is 10 wide"}},
        {"embed:12,pos,fc:7", 1, 1, 8, 5, {"the last layer (fc1) gives 7 outputs", "5 classes"}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        nn_model m;
        const int rc =
            nn_model_init(&m, bad[i].spec, bad[i].c, bad[i].h, bad[i].w, bad[i].classes, 4, 1, err, sizeof err);
        cr_expect_eq(rc, -EINVAL, "'%s': rc %d", bad[i].spec, rc);
        for (int j = 0; j < 2; j++)
            cr_expect(strstr(err, bad[i].says[j]) != NULL, "'%s': message \"%s\" lacks \"%s\"", bad[i].spec, err,
                      bad[i].says[j]);
        cr_expect(strchr(err, '\n') == NULL, "one-line message: \"%s\"", err);
        cr_expect(m.params == NULL && m.n_params == 0, "'%s': a failed init leaves the model zeroed", bad[i].spec);
        nn_model_free(&m);
    }
}
