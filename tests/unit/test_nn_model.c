/* Model construction: spec errors and their messages, parameter counts, the
 * named views that checkpoints and gossip rely on, seeded initialisation, and
 * evaluation at a parameter vector that is not the model's own (how a peer
 * scores the de-biased z = x / w without touching x). */
#include "nn/nn_model.h"
#include "nn/nn_rng.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(nn_model);

Test(nn_model, init_rejects_bad_specs_with_a_message)
{
    static const struct {
        const char *spec;
        int c, h, w, classes;
        const char *says[2]; /* the message must contain both */
    } bad[] = {
        {"resnet", 1, 28, 28, 10, {"at position 1 ('resnet')", "expected a layer"}},
        {"", 1, 28, 28, 10, {"model ''", "expected a layer"}},
        {"mlp:0", 1, 28, 28, 10, {"mlp:0", "positive integers"}},
        {"mlp:12,x", 1, 28, 28, 10, {"mlp:12,x", "positive integers"}},
        {"mlp:-4", 1, 28, 28, 10, {"mlp:-4", "positive integers"}},
        {"mlp:12,,5", 1, 28, 28, 10, {"mlp:12,,5", "positive integers"}},
        /* conv1 (pad 2) keeps 5x5, pool1 gives 2x2: conv2's 5x5 kernel does not fit. */
        {"lenet", 1, 5, 5, 10, {"lenet", "5x5 convolution does not fit a 2x2 input"}},
        {"mlp", 1, 28, 28, 1, {"mlp", "1 classes"}},
        {"mlp", 0, 28, 28, 10, {"mlp", "shape"}},
        /* the layer language: position and what was expected, or which layer does not fit and why */
        {"conv:8:3:pad=x,relu,fc", 1, 28, 28, 10, {"at position 14 ('x')", "expected a padding 0..64"}},
        {"conv:8,fc", 1, 28, 28, 10, {"at position 7", "conv:C:K"}},
        {"relu,,fc", 1, 28, 28, 10, {"at position 6", "expected a layer"}},
        {"dropout:1,fc", 1, 28, 28, 10, {"at position 9 ('1')", "dropout:P with P in [0, 1)"}},
        {"res(fc:5", 1, 28, 28, 10, {"at position 9", "')' to close res("}},
        {"fc:5),fc", 1, 28, 28, 10, {"at position 5", "closes no res("}},
        {"fc,relu,fc", 1, 28, 28, 10, {"fc1 (position 1)", "only for the last layer"}},
        {"conv:8:3,gn:3,fc", 1, 28, 28, 10, {"gn1 (position 10)", "8 channels do not split into 3 groups"}},
        {"res(conv:8:3),fc", 1, 28, 28, 10, {"add1", "ends with 8x26x26, its input is 1x28x28"}},
        {"conv:8:3,maxpool:30,fc", 1, 28, 28, 10, {"pool1 (position 10)", "30x30 pool does not fit a 26x26"}},
        {"conv:4:3,fc:12", 1, 28, 28, 10, {"the last layer (fc1) gives 12 outputs", "10 classes"}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        nn_model m;
        memset(&m, 0xa5, sizeof m); /* init must not depend on the struct's prior contents */
        int rc = nn_model_init(&m, bad[i].spec, bad[i].c, bad[i].h, bad[i].w, bad[i].classes, 8, 1, err, sizeof err);
        cr_expect_eq(rc, -EINVAL, "'%s' on %dx%dx%d: rc %d", bad[i].spec, bad[i].c, bad[i].h, bad[i].w, rc);
        for (int j = 0; j < 2; j++)
            cr_expect(strstr(err, bad[i].says[j]) != NULL, "'%s': message \"%s\" lacks \"%s\"", bad[i].spec, err,
                      bad[i].says[j]);
        cr_expect(strchr(err, '\n') == NULL, "one-line message: \"%s\"", err);
        cr_expect(m.params == NULL && m.n_params == 0, "'%s': a failed init leaves the model zeroed", bad[i].spec);
        nn_model_free(&m); /* safe after a failed init */
    }
    char err[64] = "";
    nn_model m;
    cr_expect_eq(nn_model_init(&m, NULL, 1, 28, 28, 10, 8, 1, err, sizeof err), -EINVAL);
    cr_expect_neq(err[0], '\0', "NULL spec: no message");
    nn_model_free(NULL);
}

Test(nn_model, parameter_counts)
{
    static const struct {
        const char *spec;
        int c, h, w, classes;
        size_t want;
    } cases[] = {
        /* 784*256 + 256 + 256*10 + 10 */
        {"mlp:256", 1, 28, 28, 10, 203530},
        /* softmax regression: 784*10 + 10 */
        {"mlp", 1, 28, 28, 10, 7850},
        /* 24*7+7 + 7*5+5 + 5*4+4 */
        {"mlp:7,5", 2, 3, 4, 4, 239},
        /* conv1 6*1*5*5+6 = 156 (28x28 kept by pad 2, pooled to 14x14),
         * conv2 16*6*5*5+16 = 2416 (10x10, pooled to 5x5: 16*5*5 = 400 features),
         * fc1 400*120+120 = 48120, fc2 120*84+84 = 10164, fc3 84*10+10 = 850:
         * 61706, the classic LeNet-5 count. */
        {"lenet", 1, 28, 28, 10, 61706},
        /* conv1 6*3*25+6 = 456 (32x32 -> pool 16x16), conv2 2416 (12x12 -> pool
         * 6x6: 576 features), fc1 576*120+120 = 69240, fc2 10164, fc3 850. */
        {"lenet", 3, 32, 32, 10, 83126},
        /* conv1 4*1*9+4 = 40 (stride 2, pad 1: 14x14), gn1 4+4, block: conv2 4*4*9+4 = 148, ln1 over
         * 4x14x14 = 784+784; global pool: 4 features; fc1 4*10+10 = 50: 1814 */
        {"conv:4:3:stride=2:pad=1,gn:2,relu,res(conv:4:3:pad=1,ln),avgpool,dropout:0.5,fc", 1, 28, 28, 10, 1814},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256];
        nn_model m;
        cr_assert_eq(nn_model_init(&m, cases[i].spec, cases[i].c, cases[i].h, cases[i].w, cases[i].classes, 4, 1,
                                   err, sizeof err),
                     0, "%s: %s", cases[i].spec, err);
        cr_expect_eq(m.n_params, cases[i].want, "%s on %dx%dx%d: %zu parameters, want %zu", cases[i].spec,
                     cases[i].c, cases[i].h, cases[i].w, m.n_params, cases[i].want);
        nn_model_free(&m);
    }
}

/* The views, in order, tile params exactly: offsets start at 0, each begins
 * where the previous ended, and together they end at n_params. */
static void expect_views(const char *spec, int c, int h, int w, int classes, const char *const *names,
                         const size_t *counts, int n)
{
    char err[256];
    nn_model m;
    cr_assert_eq(nn_model_init(&m, spec, c, h, w, classes, 2, 1, err, sizeof err), 0, "%s: %s", spec, err);
    size_t next = 0;
    for (int i = 0; i < n; i++) {
        char name[32] = "";
        size_t off = 0, cnt = 0;
        cr_assert_eq(nn_model_view(&m, i, name, sizeof name, &off, &cnt), 0, "%s: view %d missing", spec, i);
        cr_expect_str_eq(name, names[i], "%s: view %d", spec, i);
        cr_expect_eq(off, next, "%s: %s starts at %zu, want %zu", spec, name, off, next);
        cr_expect_eq(cnt, counts[i], "%s: %s has %zu entries, want %zu", spec, name, cnt, counts[i]);
        next = off + cnt;
    }
    cr_expect_eq(next, m.n_params, "%s: views end at %zu of %zu parameters", spec, next, m.n_params);
    char name[32];
    size_t off, cnt;
    cr_expect_eq(nn_model_view(&m, n, name, sizeof name, &off, &cnt), -ENOENT, "%s: a view past the last", spec);
    cr_expect_eq(nn_model_view(&m, n + 5, name, sizeof name, &off, &cnt), -ENOENT);
    nn_model_free(&m);
}

Test(nn_model, views_tile_params_in_order)
{
    static const char *const lenet[] = {"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight",
                                        "fc1.bias",     "fc2.weight", "fc2.bias",     "fc3.weight", "fc3.bias"};
    static const size_t lenet_n[] = {150, 6, 2400, 16, 48000, 120, 10080, 84, 840, 10};
    expect_views("lenet", 1, 28, 28, 10, lenet, lenet_n, 10);

    static const char *const mlp2[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"};
    static const size_t mlp2_n[] = {168, 7, 35, 5, 20, 4};
    expect_views("mlp:7,5", 2, 3, 4, 4, mlp2, mlp2_n, 6);

    static const char *const mlp[] = {"fc1.weight", "fc1.bias"};
    static const size_t mlp_n[] = {7840, 10};
    expect_views("mlp", 1, 28, 28, 10, mlp, mlp_n, 2);
}

Test(nn_model, init_is_deterministic_by_seed)
{
    char err[256];
    nn_model a, b, c;
    cr_assert_eq(nn_model_init(&a, "lenet", 1, 28, 28, 10, 2, 99, err, sizeof err), 0, "%s", err);
    cr_assert_eq(nn_model_init(&b, "lenet", 1, 28, 28, 10, 7, 99, err, sizeof err), 0, "%s", err);
    cr_assert_eq(nn_model_init(&c, "lenet", 1, 28, 28, 10, 2, 100, err, sizeof err), 0, "%s", err);
    const size_t bytes = a.n_params * sizeof(float);
    cr_expect(memcmp(a.params, b.params, bytes) == 0, "same seed (other max_batch), different parameters");
    cr_expect(memcmp(a.params, c.params, bytes) != 0, "different seeds, same parameters");

    /* nn_model_init_params re-draws exactly what init drew. */
    for (size_t i = 0; i < a.n_params; i++)
        c.params[i] = 1.0f;
    nn_model_init_params(&c, 99);
    cr_expect(memcmp(a.params, c.params, bytes) == 0, "init_params(99) differs from init with seed 99");

    /* Biases start at zero; weights do not. */
    for (int v = 0;; v++) {
        char name[32];
        size_t off, cnt, zeros = 0;
        if (nn_model_view(&a, v, name, sizeof name, &off, &cnt) < 0)
            break;
        for (size_t i = 0; i < cnt; i++)
            zeros += a.params[off + i] == 0.0f;
        if (strstr(name, ".bias"))
            cr_expect_eq(zeros, cnt, "%s: %zu of %zu zero", name, zeros, cnt);
        else
            cr_expect_eq(zeros, (size_t)0, "%s: %zu zeros", name, zeros);
    }
    nn_model_free(&a), nn_model_free(&b), nn_model_free(&c);
}

Test(nn_model, init_is_he_normal)
{
    /* fc1 of mlp:256 on 784 inputs: 200704 draws of N(0, 2/784). The sample
     * std is within 1% of sqrt(2/784) with overwhelming probability (its
     * relative error is ~1/sqrt(2n) = 0.16%); the mean within 5 standard errors. */
    char err[256];
    nn_model m;
    cr_assert_eq(nn_model_init(&m, "mlp:256", 1, 28, 28, 10, 1, 5, err, sizeof err), 0, "%s", err);
    char name[32];
    size_t off, n;
    cr_assert_eq(nn_model_view(&m, 0, name, sizeof name, &off, &n), 0);
    cr_assert(strcmp(name, "fc1.weight") == 0 && n == (size_t)784 * 256, "view 0: %s, %zu", name, n);
    const float *W = m.params + off;
    double s = 0, ss = 0;
    for (size_t i = 0; i < n; i++)
        s += W[i], ss += (double)W[i] * W[i];
    const double mean = s / n, sd = sqrt(ss / n - mean * mean), want = sqrt(2.0 / 784);
    cr_expect(fabs(sd / want - 1) < 0.01, "std %.5f, want %.5f", sd, want);
    cr_expect(fabs(mean) < 5 * want / sqrt((double)n), "mean %.2e", mean);
    nn_model_free(&m);
}

/* n = 50 with max_batch 16: three full batches and a short one. */
static void make_data(nn_dataset *d)
{
    nn_rng r;
    nn_rng_seed(&r, 77, 0);
    *d = (nn_dataset){.n = 50, .c = 1, .h = 4, .w = 4, .n_classes = 3};
    d->x = malloc(50 * 16 * sizeof(float));
    d->y = malloc(50 * sizeof(int));
    cr_assert(d->x && d->y);
    for (int i = 0; i < 50 * 16; i++)
        d->x[i] = nn_rng_uniform(&r);
    for (int i = 0; i < 50; i++)
        d->y[i] = (int)nn_rng_below(&r, 3);
}

Test(nn_model, evaluate_at_explicit_params)
{
    char err[256];
    nn_dataset d;
    make_data(&d);
    nn_model m, other;
    cr_assert_eq(nn_model_init(&m, "mlp:8", 1, 4, 4, 3, 16, 1, err, sizeof err), 0, "%s", err);
    cr_assert_eq(nn_model_init(&other, "mlp:8", 1, 4, 4, 3, 16, 2, err, sizeof err), 0, "%s", err);
    const size_t bytes = m.n_params * sizeof(float);
    float *own = malloc(bytes), *const own_ptr = m.params;
    memcpy(own, m.params, bytes);

    float l_own, a_own, l_at, a_at, l_copy, a_copy;
    nn_model_evaluate(&m, NULL, &d, &l_own, &a_own);
    nn_model_evaluate(&m, other.params, &d, &l_at, &a_at);
    cr_expect(m.params == own_ptr && memcmp(m.params, own, bytes) == 0, "evaluate at params touched m.params");
    cr_expect_neq(l_at, l_own, "the explicit params were not used (loss %g both times)", l_own);

    memcpy(m.params, other.params, bytes);
    nn_model_evaluate(&m, NULL, &d, &l_copy, &a_copy);
    cr_expect_eq(l_copy, l_at, "loss %.9g at params, %.9g after copying them in", l_at, l_copy);
    cr_expect_eq(a_copy, a_at, "accuracy %g at params, %g after copying them in", a_at, a_copy);

    /* The batched mean equals the per-sample mean over the whole set,
     * short last batch included. */
    double loss = 0;
    int correct = 0;
    for (int at = 0; at < d.n; at += 16) {
        int B = d.n - at < 16 ? d.n - at : 16, c;
        loss += (double)nn_model_grad(&m, d.x + (size_t)at * 16, d.y + at, B, &c) * B;
        correct += c;
    }
    cr_expect(fabs(l_copy - loss / d.n) < 1e-6 * fabs(loss / d.n), "evaluate loss %.9g, batch mean %.9g", l_copy,
              loss / d.n);
    cr_expect_float_eq(a_copy, correct / 50.0f, 1e-7f, "accuracy %g, %d of 50 correct", a_copy, correct);

    free(own);
    nn_model_free(&m);
    nn_model_free(&other);
    nn_dataset_free(&d);
}
