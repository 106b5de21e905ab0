/* The outer optimizer of local-step SGP: see outer.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/core/outer.h"

int outer_opts_parse(outer_opts *o, const char *text, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    snprintf(o->text, sizeof o->text, "%s", text);
    if (strcmp(text, "none") == 0)
        return 0;
    const int nesterov = strncmp(text, "nesterov:", 9) == 0;
    if (!nesterov && strncmp(text, "sgd:", 4) != 0)
        goto bad;
    char *end;
    double lr = strtod(text + (nesterov ? 9 : 4), &end), mu = 0;
    if (*end == ':')
        mu = strtod(end + 1, &end);
    else if (nesterov)
        goto bad;
    if (*end || !(lr > 0 && lr <= 10) || !(mu >= 0 && mu < 1) || (nesterov && mu == 0))
        goto bad;
    o->lr = (float)lr, o->momentum = (float)mu, o->nesterov = nesterov;
    return 0;
bad:
    snprintf(err, errlen,
             "'%s': expected none, sgd:LR[:MOMENTUM] or nesterov:LR:MOMENTUM with 0 < LR <= 10 and "
             "0 <= MOMENTUM < 1 (nesterov: > 0)",
             text);
    memset(o, 0, sizeof *o);
    return -EINVAL;
}

int outer_init(outer_state *s, const outer_opts *o, size_t dim)
{
    memset(s, 0, sizeof *s);
    if (!o || o->lr <= 0)
        return 0;
    s->o = *o;
    int rc = nn_sgd_init(&s->sgd, dim, o->momentum, 0.0f, o->nesterov);
    if (rc < 0)
        return rc;
    s->anchor = malloc((dim ? dim : 1) * sizeof(float));
    if (!s->anchor) {
        outer_free(s);
        return -ENOMEM;
    }
    return 0;
}

void outer_begin(outer_state *s, gsp_peer *g)
{
    if (s->anchor)
        gsp_debias_to(g, s->anchor), s->anchored = 1;
}

/* x = a - x * inv (the outer gradient, z = x * inv taken value by value as
 * gsp_debias would write it), then the step of a by it. */
static void outer_step(outer_state *s, float *x, size_t n, float inv)
{
    float *a = s->anchor;
    for (size_t i = 0; i < n; i++)
        x[i] = a[i] - x[i] * inv;
    nn_sgd_step(&s->sgd, a, x, s->o.lr);
}

void outer_end(outer_state *s, gsp_peer *g)
{
    if (!s->anchor)
        return;
    const size_t n = g->dim;
    /* The outer gradient goes into x, which is overwritten below anyway: no
     * scratch vector, and no z beside x. */
    outer_step(s, g->x, n, gsp_debias_factor(g));
    /* x = w a: the step moves x as a local step does; w stays. */
    const float w = (float)g->w, *a = s->anchor;
    float *x = g->x;
    for (size_t i = 0; i < n; i++)
        x[i] = w * a[i];
}

void outer_begin_at(outer_state *s, const float *z)
{
    if (s->anchor)
        memcpy(s->anchor, z, s->sgd.n * sizeof *z), s->anchored = 1;
}

void outer_end_at(outer_state *s, float *z) { outer_end_from(s, s->anchor, z); }

void outer_end_from(outer_state *s, const float *a, float *z)
{
    if (!s->anchor)
        return;
    enum { B = 256 };
    float g[B], p[B];
    for (size_t s0 = 0; s0 < s->sgd.n; s0 += B) { /* (value by value as outer_end_at: the block's own view) */
        const size_t m = s->sgd.n - s0 < B ? s->sgd.n - s0 : B;
        for (size_t i = 0; i < m; i++)
            g[i] = a[s0 + i] - z[s0 + i] * 1.0f, p[i] = a[s0 + i];
        nn_sgd view = s->sgd;
        view.velocity += s0, view.n = m;
        nn_sgd_step(&view, p, g, s->o.lr);
        memcpy(z + s0, p, m * sizeof *p);
    }
}

size_t outer_bytes(const outer_state *s)
{
    /* the velocity, and the anchor where this state keeps it */
    return s->anchor ? (s->anchored ? 2 : 1) * s->sgd.n * sizeof(float) : 0;
}

void outer_free(outer_state *s)
{
    if (!s)
        return;
    nn_sgd_free(&s->sgd);
    free(s->anchor);
    memset(s, 0, sizeof *s);
}
