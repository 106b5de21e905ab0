/* Moving forward and coming back: catch-up, join and resume (gsp.h). */
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

double gsp_resume(gsp_peer *g)
{
    g->adopt = 1;
    for (int k = 0; k < g->n_in; k++)
        g->in[k].adopt = 1;
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
