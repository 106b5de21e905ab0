/* The outer optimizer of local-step SGP: see outer.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/core/outer.h"

/* "ef:[LR:]DECAY:CODEC" */
static int parse_ef(outer_opts *o, const char *text, char *err, size_t errlen)
{
    double num[2];
    int k = 0;
    const char *p = text + 3;
    char *end = NULL;
    while (k < 2 && (*p == '.' || (*p >= '0' && *p <= '9'))) {
        num[k++] = strtod(p, &end);
        if (*end != ':')
            break;
        p = end + 1;
    }
    const double lr = k == 2 ? num[0] : 1, decay = k ? num[k - 1] : -1;
    if (k == 0 || *end != ':' || !(decay >= 0 && decay <= 1) || !(lr > 0 && lr <= 10)) {
        snprintf(err, errlen,
                 "'%s': expected ef:[LR:]DECAY:CODEC with 0 < LR <= 10 and 0 <= DECAY <= 1 (e.g. "
                 "ef:0.95:sparseloco:32)",
                 text);
        return -EINVAL;
    }
    char why[160];
    if (cmp_spec_parse(&o->codec, p, why, sizeof why) < 0) {
        snprintf(err, errlen, "'%s': %s", text, why);
        return -EINVAL;
    }
    o->lr = (float)lr, o->momentum = (float)decay, o->ef = 1;
    return 0;
}

int outer_opts_parse(outer_opts *o, const char *text, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    snprintf(o->text, sizeof o->text, "%s", text);
    if (strcmp(text, "none") == 0)
        return 0;
    if (strncmp(text, "ef:", 3) == 0) {
        const int rc = parse_ef(o, text, err, errlen);
        if (rc < 0)
            memset(o, 0, sizeof *o);
        return rc;
    }
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
             "'%s': expected none, sgd:LR[:MOMENTUM], nesterov:LR:MOMENTUM with 0 < LR <= 10 and "
             "0 <= MOMENTUM < 1 (nesterov: > 0), or ef:DECAY:CODEC",
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
    int rc = nn_sgd_init(&s->sgd, dim, o->ef ? 0.0f : o->momentum, 0.0f, o->nesterov);
    if (rc < 0)
        return rc;
    s->anchor = malloc((dim ? dim : 1) * sizeof(float));
    if (o->ef) {
        s->cap = cmp_bound(&o->codec, dim);
        s->msg = malloc(s->cap);
        s->work = malloc(cmp_work_size(&o->codec, dim) + 1);
    }
    if (!s->anchor || (o->ef && (!s->msg || !s->work))) {
        outer_free(s);
        return -ENOMEM;
    }
    return 0;
}

void outer_begin(outer_state *s, gsp_peer *g)
{
    if (s->anchor)
        gsp_debias_to(g, s->anchor);
}

/* e = decay e + delta; c = the codec's view of e; e -= c; a -= c. delta
 * comes in x, which is scratch. */
static void ef_step(outer_state *s, float *a, float *x)
{
    const size_t n = s->sgd.n;
    const float decay = s->o.momentum;
    float *e = s->sgd.velocity;
    for (size_t i = 0; i < n; i++)
        e[i] = decay * e[i] + x[i];
    const long len = cmp_encode(&s->o.codec, e, n, s->rounds++, s->work, s->msg, s->cap);
    /* The encoder cannot fail on a buffer of cmp_bound bytes; if it did, the
     * round takes no outer step and e keeps all of it. */
    if (len < 0 || cmp_decode(s->msg, (size_t)len, n, x) < 0)
        return;
    const float lr = s->o.lr;
    for (size_t i = 0; i < n; i++) {
        e[i] -= x[i];
        a[i] -= lr * x[i];
    }
}

void outer_end(outer_state *s, gsp_peer *g)
{
    if (!s->anchor)
        return;
    const size_t n = g->dim;
    /* The outer gradient a - z goes into x, which is overwritten below
     * anyway: no scratch vector, and z = x * inv taken value by value as
     * gsp_debias would write it (no z beside x). */
    const float inv = gsp_debias_factor(g);
    float *a = s->anchor, *x = g->x;
    for (size_t i = 0; i < n; i++)
        x[i] = a[i] - x[i] * inv;
    if (s->o.ef)
        ef_step(s, a, x);
    else
        nn_sgd_step(&s->sgd, a, x, s->o.lr);
    /* x = w a: the step moves x as a local step does; w stays. */
    const float w = (float)g->w;
    for (size_t i = 0; i < n; i++)
        x[i] = w * a[i];
}

size_t outer_bytes(const outer_state *s)
{
    if (!s->anchor)
        return 0;
    return 2 * s->sgd.n * sizeof(float) + (s->msg ? s->cap + cmp_work_size(&s->o.codec, s->sgd.n) : 0);
}

void outer_free(outer_state *s)
{
    if (!s)
        return;
    nn_sgd_free(&s->sgd);
    free(s->anchor);
    free(s->msg);
    free(s->work);
    memset(s, 0, sizeof *s);
}
