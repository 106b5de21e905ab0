/* What a message may carry before it is absorbed (gsp_absorb): finite
 * values, a sound gain and step, a weight total that can be a sender's;
 * see gossip/GUARANTEES.md ("a member sends a share no honest sender
 * makes"). */
#include <math.h>

#include "gossip/gsp_internal.h"

int gsp_floats_finite(const float *v, size_t n)
{
    unsigned bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= gsp_not_finite(v[i]);
    return !bad;
}

static int doubles_finite(const double *v, size_t n)
{
    unsigned bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= gsp_not_finite_d(v[i]);
    return !bad;
}

int gsp_refuse(gsp_peer *g, gsp_edge *e, const char *why)
{
    g->refused_why = why;
    g->stats.refused++;
    if (e && g->codec && !e->sync)
        e->sync = 1, e->sync_base = e->seq;
    return GSP_REFUSED;
}

const char *gsp_unsound(const gsp_peer *g, const gsp_msg *m)
{
    if (!isfinite(m->w_total) || m->w_total < 0)
        return "a weight total that is not a finite number of at least 0";
    switch (m->kind) { /* (a message whose copy found its values finite is not read again: gsp_msg_copy) */
    case GSP_RAW:
        return m->finite || doubles_finite(m->x_total, g->dim) ? NULL : "a NaN or an infinity in its totals";
    case GSP_SYNC:
        return m->finite || (gsp_floats_finite(m->ref, g->dim) && doubles_finite(m->corr, m->n_corr))
                   ? NULL
                   : "a NaN or an infinity in its reference or corrections";
    case GSP_GATHER: /* (its values are checked as they are decoded) */
        return NULL;
    case GSP_DELTA:
        return isfinite(m->gain) && m->step > 0 && m->step <= 1 ? NULL : "a gain or step out of range";
    }
    return NULL;
}
