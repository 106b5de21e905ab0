/* Moving forward, coming back and leaving: catch-up, join, resume and the
 * hand-off of a peer that leaves (gsp.h). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "gossip/gsp.h"

void gsp_jump(gsp_peer *g, long round)
{
    if (round > g->round)
        g->round = g->since = round;
}

void gsp_join(gsp_peer *g, const float *z, long round)
{
    if (z != g->x) /* (a model written into x as it arrived: engine_model_landing) */
        memcpy(g->x, z, g->dim * sizeof *g->x);
    g->w = 1.0;
    g->round = g->since = round;
    g->adopt = 1;
}

void gsp_adopt(gsp_peer *g, const float *z)
{
    gsp_scale_by_w(g, z);
    g->refresh = 1; /* references tracked the old z: the next emit sends z whole */
}

double gsp_resume(gsp_peer *g, int final)
{
    if (!final) {
        g->adopt = 1;
        for (int k = 0; k < g->n_in; k++)
            g->in[k].adopt = 1;
    }
    if (!(g->w > 0) || !isfinite(g->w))
        return 1.0;
    int e = (int)lround(-log2(g->w)); /* w * 2^e in [1/sqrt 2, sqrt 2) ... */
    if (ldexp(g->w, e) >= M_SQRT2)     /* ... also where log2 rounded onto the edge */
        e--;
    else if (ldexp(g->w, e) < M_SQRT1_2)
        e++;
    if (e == 0)
        return 1.0;
    g->w = ldexp(g->w, e);
    for (size_t i = 0; i < g->dim; i++)
        g->x[i] = ldexpf(g->x[i], e);
    return ldexp(1.0, e);
}

int gsp_hand_off(gsp_peer *g, const topo_out *to, gsp_msg *msgs)
{
    if (to->n <= 0 || g->left || g->gather)
        return -EINVAL;
    /* One emit that keeps nothing: each edge moves w / n (gsp_emit moves
     * step * weight * w with a codec), and with a codec the model goes
     * whole, so that what x gives up is z itself and not a lagging copy. */
    topo_out all = *to;
    const double wstep = g->codec ? (double)g->step : 1.0;
    for (int k = 0; k < all.n; k++)
        all.weight[k] = 1.0 / (wstep * all.n);
    all.keep = 0.0;
    gsp_debias_to(g, g->z); /* the model it leaves with (a codec's split of x computes the same bits here) */
    g->z_written = 1;
    g->refresh = g->codec != NULL;
    const int n = gsp_emit(g, &all, msgs);
    if (n < 0)
        return n;
    memcpy(g->x, g->z, g->dim * sizeof *g->x);
    g->w = 0.0; /* (what is left of it is the running totals' round-off) */
    g->left = 1;
    return n;
}
