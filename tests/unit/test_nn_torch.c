/* nn/ against PyTorch's numbers (tests/fixtures/torch_reference.txt, made once
 * by tests/fixtures/make_torch_reference.py with Debian's python3-torch; no
 * PyTorch needed here): a model in the layer language with PyTorch modules of
 * the same names (conv with stride and padding, group and layer norm, GELU,
 * tanh, a residual block, global average pool) gives the same logits, loss
 * and gradients from the same parameters, so sgp's layouts and semantics are
 * PyTorch's; and AdamW takes the same steps as torch.optim.AdamW. */
#include "nn/nn_model.h"
#include "nn/nn_optim.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/torch_fixture.h"

TestSuite(nn_torch);

#define FIXTURE "tests/fixtures/torch_reference.txt"

static double *section(const char *name, size_t *n) { return torch_fixture_section(FIXTURE, name, n); }

Test(nn_torch, a_spec_model_matches_pytorch_forward_loss_and_gradients)
{
    const char *spec = "conv:4:3:stride=2:pad=1,gn:2,gelu,res(conv:4:3:pad=1,gn:4,tanh),avgpool,fc:6,ln,dropout:0.5,fc";
    enum { B = 3, K = 5 };
    char err[256];
    nn_model m;
    cr_assert_eq(nn_model_init(&m, spec, 1, 9, 9, K, B, 1, err, sizeof err), 0, "%s", err);
    size_t n;
    double *xd = section("x", &n), *yd = section("y", &n);
    float x[B * 81];
    int y[B];
    for (int i = 0; i < B * 81; i++)
        x[i] = (float)xd[i];
    for (int i = 0; i < B; i++)
        y[i] = (int)yd[i];
    char name[64];
    size_t off, count;
    for (int v = 0; nn_model_view(&m, v, name, sizeof name, &off, &count) == 0; v++) {
        double *p = section(name, &n);
        cr_assert_eq(n, count, "%s: %zu values in PyTorch, %zu in sgp", name, n, count);
        for (size_t i = 0; i < n; i++)
            m.params[off + i] = (float)p[i];
        free(p);
    }
    double *logits = section("logits", &n), *loss = section("loss", &n);
    const double e_logits = torch_normwise(nn_model_forward(&m, x, B), logits, B * K);
    cr_log_info("logits: normwise error %.3g", e_logits);
    cr_expect(e_logits < 1e-5, "logits differ from PyTorch's: %.3g", e_logits);

    for (int i = 0; i < m.n_layers; i++) /* training draws dropout masks PyTorch does not know */
        if (m.layer[i].kind == NN_DROPOUT)
            m.layer[i].p = 0.0f;
    const float got = nn_model_grad(&m, x, y, B, NULL);
    cr_expect(fabs(got - loss[0]) < 1e-5 * fabs(loss[0]), "loss %.8g, PyTorch %.8g", got, loss[0]);
    for (int v = 0; nn_model_view(&m, v, name, sizeof name, &off, &count) == 0; v++) {
        char gname[80];
        snprintf(gname, sizeof gname, "grad.%s", name);
        double *g = section(gname, &n);
        if (strcmp(name, "conv2.bias") == 0) {
            /* It feeds a norm with one group per channel, which removes it:
             * its gradient is 0 up to round-off on both sides (5e-8 there). */
            for (size_t i = 0; i < n; i++)
                cr_expect(fabsf(m.grads[off + i]) < 1e-6f && fabs(g[i]) < 1e-6, "%s[%zu]: %.3g, PyTorch %.3g", gname,
                          i, m.grads[off + i], g[i]);
            free(g);
            continue;
        }
        const double e = torch_normwise(m.grads + off, g, n);
        cr_log_info("%s: normwise error %.3g", gname, e);
        cr_expect(e < 1e-4, "%s differs from PyTorch's: normwise error %.3g", gname, e);
        free(g);
    }
    free(xd), free(yd), free(logits), free(loss);
    nn_model_free(&m);
}

Test(nn_torch, adamw_takes_pytorchs_steps)
{
    size_t n;
    double *p0 = section("adamw.p0", &n);
    float p[7], g[7];
    cr_assert_eq(n, 7);
    for (int i = 0; i < 7; i++)
        p[i] = (float)p0[i];
    nn_adamw o;
    cr_assert_eq(nn_adamw_init(&o, 7, 0.8f, 0.95f, 1e-6f, 0.1f), 0);
    for (int k = 0; k < 5; k++) {
        char gname[32], pname[32];
        snprintf(gname, sizeof gname, "adamw.g%d", k);
        snprintf(pname, sizeof pname, "adamw.p%d", k + 1);
        double *gd = section(gname, &n), *want = section(pname, &n);
        for (int i = 0; i < 7; i++)
            g[i] = (float)gd[i];
        nn_adamw_step(&o, p, g, 0.01f, p);
        const double e = torch_normwise(p, want, 7);
        cr_expect(e < 1e-6, "step %d: normwise error %.3g against torch.optim.AdamW", k + 1, e);
        free(gd), free(want);
    }
    cr_expect_eq(o.t, 5);
    nn_adamw_free(&o);
    free(p0);
}
