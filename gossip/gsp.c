/* Running-sum push-sum: emit, absorb, de-bias, readiness. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gsp.h"

int gsp_init(gsp_peer *g, int id, int n_peers, size_t dim, int tau, const float *x0)
{
    memset(g, 0, sizeof *g);
    if (n_peers < 1 || id < 0 || id >= n_peers || tau < 0)
        return -EINVAL;
    g->id = id, g->n_peers = n_peers, g->dim = dim, g->tau = tau;
    g->x = calloc(dim ? dim : 1, sizeof(float));
    g->z = calloc(dim ? dim : 1, sizeof(float));
    if (!g->x || !g->z) {
        gsp_free(g);
        return -ENOMEM;
    }
    if (x0)
        memcpy(g->x, x0, dim * sizeof(float));
    g->w = 1.0;
    return 0;
}

static void free_edges(gsp_edge *e, int n)
{
    for (int i = 0; i < n; i++)
        free(e[i].x);
    free(e);
}

void gsp_free(gsp_peer *g)
{
    if (!g)
        return;
    free(g->x);
    free(g->z);
    free_edges(g->out, g->n_out);
    free_edges(g->in, g->n_in);
    memset(g, 0, sizeof *g);
}

const float *gsp_debias(gsp_peer *g)
{
    const float inv = (float)(1.0 / g->w);
    for (size_t i = 0; i < g->dim; i++)
        g->z[i] = g->x[i] * inv;
    return g->z;
}

/* The edge to/from `peer`, created on first use. Edges are few (the
 * neighbours a schedule ever uses, plus reroutes), so a linear scan is the
 * fastest lookup; creation happens once per edge, not per round. */
static gsp_edge *edge(gsp_edge **list, int *n, int *cap, int peer, size_t dim)
{
    for (int i = 0; i < *n; i++)
        if ((*list)[i].peer == peer)
            return &(*list)[i];
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 8;
        gsp_edge *grown = realloc(*list, (size_t)nc * sizeof **list);
        if (!grown)
            return NULL;
        *list = grown, *cap = nc;
    }
    gsp_edge *e = &(*list)[*n];
    memset(e, 0, sizeof *e);
    e->peer = peer;
    e->round = -1;
    e->x = calloc(dim ? dim : 1, sizeof(double));
    if (!e->x)
        return NULL;
    (*n)++;
    return e;
}

int gsp_emit(gsp_peer *g, const topo_out *out, gsp_msg *msgs)
{
    gsp_edge *edges[TOPO_MAX_OUT];
    for (int k = 0; k < out->n; k++)
        if (!(edges[k] = edge(&g->out, &g->n_out, &g->cap_out, out->peer[k], g->dim)))
            return -ENOMEM;
    /* Shares are computed in double and added to the edge totals; x keeps
     * x * (1 - sum of weights), so what leaves x and what the totals gain
     * differ only by double round-off (the float store of x rounds once more).
     * Edge-major loops so each one is a plain vectorisable pass. */
    double kept = 1.0;
    for (int k = 0; k < out->n; k++) {
        const double wk = out->weight[k];
        double *restrict sx = edges[k]->x;
        const float *restrict x = g->x;
        for (size_t i = 0; i < g->dim; i++)
            sx[i] += wk * (double)x[i];
        kept -= wk;
    }
    for (size_t i = 0; i < g->dim; i++)
        g->x[i] = (float)((double)g->x[i] * kept);
    double w_sent = 0.0;
    for (int k = 0; k < out->n; k++) {
        double share = out->weight[k] * g->w;
        gsp_edge *e = edges[k];
        e->w += share;
        w_sent += share;
        e->seq++;
        e->round = g->round;
        msgs[k] = (gsp_msg){.src = g->id, .dst = e->peer, .round = g->round, .seq = e->seq, .w_total = e->w,
                            .dim = g->dim, .x_total = e->x};
    }
    g->w -= w_sent;
    g->round++;
    g->stats.sent += (uint64_t)out->n;
    return out->n;
}

int gsp_absorb(gsp_peer *g, const gsp_msg *m)
{
    if (m->dst != g->id || m->src < 0 || m->src >= g->n_peers || m->src == g->id || m->dim != g->dim)
        return -EINVAL;
    gsp_edge *e = edge(&g->in, &g->n_in, &g->cap_in, m->src, g->dim);
    if (!e)
        return -ENOMEM;
    if (m->seq <= e->seq) { /* its mass arrived with this or a later message */
        g->stats.ignored++;
        return 0;
    }
    float *restrict x = g->x;
    double *restrict rho = e->x;
    const double *restrict sigma = m->x_total;
    for (size_t i = 0; i < g->dim; i++) {
        x[i] = (float)((double)x[i] + (sigma[i] - rho[i]));
        rho[i] = sigma[i];
    }
    g->w += m->w_total - e->w;
    e->w = m->w_total;
    e->seq = m->seq;
    e->round = m->round;
    g->stats.absorbed++;
    g->stats.stale_sum += (uint64_t)(g->round > m->round ? g->round - m->round : 0);
    return 1;
}

int gsp_ready(const gsp_peer *g, const topo *t, const uint8_t *alive)
{
    return gsp_ready_with(g, t, alive, NULL, 0);
}

int gsp_ready_with(const gsp_peer *g, const topo *t, const uint8_t *alive, const gsp_msg *inbox, int n_inbox)
{
    long need = g->round - 1 - g->tau;
    if (need < g->since)
        return 1;
    int in[TOPO_MAX_OUT * 4];
    int n = topo_in(t, need, g->id, alive, in, (int)(sizeof in / sizeof *in));
    for (int k = 0; k < n; k++) {
        const gsp_edge *e = NULL;
        for (int j = 0; j < g->n_in && !e; j++)
            if (g->in[j].peer == in[k])
                e = &g->in[j];
        long heard = e ? e->round : -1;
        for (int m = 0; m < n_inbox; m++)
            if (inbox[m].src == in[k] && inbox[m].round > heard)
                heard = inbox[m].round;
        if (heard < need)
            return 0;
    }
    return 1;
}

double gsp_edge_pending(const gsp_peer *sender, const gsp_peer *receiver, double *acc_x)
{
    const gsp_edge *s = NULL, *r = NULL;
    for (int j = 0; j < sender->n_out && !s; j++)
        if (sender->out[j].peer == receiver->id)
            s = &sender->out[j];
    if (!s)
        return 0.0;
    for (int j = 0; j < receiver->n_in && !r; j++)
        if (receiver->in[j].peer == sender->id)
            r = &receiver->in[j];
    for (size_t i = 0; i < sender->dim; i++)
        acc_x[i] += s->x[i] - (r ? r->x[i] : 0.0);
    return s->w - (r ? r->w : 0.0);
}

int gsp_msg_copy(gsp_msg *dst, const gsp_msg *src)
{
    double *x = malloc((src->dim ? src->dim : 1) * sizeof(double));
    if (!x)
        return -ENOMEM;
    memcpy(x, src->x_total, src->dim * sizeof(double));
    *dst = *src;
    dst->x_total = x;
    dst->owned = x;
    return 0;
}

void gsp_msg_free(gsp_msg *m)
{
    if (!m)
        return;
    free(m->owned);
    m->owned = NULL;
    m->x_total = NULL;
}
