/* A SYNC, built and taken in: the corrections since a base, from the
 * sender's log of what its messages changed (gsp.h, gossip/GUARANTEES.md
 * "With compression"). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "gossip/gsp.h"
#include "gossip/gsp_internal.h"

/* Room for n corrections in c (its values are not kept). 0 on -ENOMEM. */
static int corr_room(gsp_corr *c, size_t n)
{
    free(c->idx), free(c->val);
    c->idx = malloc(n * sizeof *c->idx), c->val = malloc(n * sizeof *c->val);
    c->cap = c->idx && c->val ? n : 0;
    return c->cap != 0;
}

/* The SYNCs' corrections go once their messages are no longer valid: a SYNC
 * is rare, and its list can be as long as the model. */
void gsp_corr_release(gsp_peer *g)
{
    for (int k = 0; k <= TOPO_MAX_OUT; k++) {
        free(g->sync_corr[k].idx), free(g->sync_corr[k].val);
        g->sync_corr[k] = (gsp_corr){0};
    }
}

/* The corrections of e's messages after `base` (the sum over them of
 * w_before * (r after - r before), the r of each rebuilt by rolling the
 * reference back from where it stands) at the positions they changed, into
 * c, ascending; their number into *n. A base older than the log starts from
 * the oldest entry; returns the base used, or 0 with *n = SIZE_MAX on
 * -ENOMEM. Position by position with the newest message first: the
 * operations and their order are those of rolling a whole copy of the
 * reference back, so the same doubles, without the dim-value copy and
 * totals (a merge of the messages' ascending positions). */
uint64_t gsp_corrections_since(const gsp_edge *e, uint64_t base, gsp_corr *c, size_t dim, size_t *n)
{
    const uint64_t first = e->n_log ? e->log[0].seq : e->seq + 1;
    if (base + 1 < first)
        base = first - 1;
    int oldest = e->n_log;
    size_t room = 0;
    while (oldest > 0 && e->log[oldest - 1].seq > base)
        room += e->log[--oldest].n;
    if (room > dim)
        room = dim;
    const int ne = e->n_log - oldest;
    size_t *at = calloc(ne ? (size_t)ne : 1, sizeof *at); /* each message's next position */
    if (!at || (room > c->cap && !corr_room(c, room))) {
        free(at);
        *n = SIZE_MAX;
        return 0;
    }
    size_t m = 0;
    for (;;) {
        size_t p = SIZE_MAX;
        for (int q = 0; q < ne; q++) {
            const gsp_sent *s = &e->log[oldest + q];
            if (at[q] < s->n) {
                const size_t i = s->idx ? s->idx[at[q]] : at[q];
                p = i < p ? i : p;
            }
        }
        if (p == SIZE_MAX)
            break;
        double d = 0.0;
        float cur = e->ref[p];
        for (int q = ne - 1; q >= 0; q--) { /* newest first */
            const gsp_sent *s = &e->log[oldest + q];
            if (at[q] < s->n && (s->idx ? s->idx[at[q]] : at[q]) == p) {
                if (!s->old) { /* (a whole message before any weight moved: w_before 0, nothing older) */
                    at[q]++;
                    continue;
                }
                d += s->w_before * ((double)cur - (double)s->old[at[q]]);
                cur = s->old[at[q]++];
            }
        }
        c->idx[m] = (uint32_t)p, c->val[m++] = d;
    }
    free(at);
    *n = m;
    return base;
}

/* m becomes the SYNC of out-edge e from `base`: its reference, and the
 * corrections since base in the k-th corrections buffer. 0 or -ENOMEM. */
int gsp_sync_fill(gsp_peer *g, const gsp_edge *e, uint64_t base, int k, gsp_msg *m)
{
    size_t n;
    m->kind = GSP_SYNC, m->ref = e->ref, m->x_total = NULL;
    m->base = gsp_corrections_since(e, base, &g->sync_corr[k], g->dim, &n);
    if (n == SIZE_MAX)
        return -ENOMEM;
    static const uint32_t none[1]; /* (no correction is a list, empty: NULL would say "every position") */
    m->n_corr = n, m->corr_idx = n ? g->sync_corr[k].idx : none, m->corr = g->sync_corr[k].val;
    m->payload = NULL, m->payload_len = 0, m->gain = 0, m->step = 0, m->origin = 0;
    g->stats.syncs_sent++;
    return 0;
}

/* A SYNC from the seq this edge applied last: the sender's totals grew by
 * w_total * its ref - (our w) * (our ref) - the corrections since then, which
 * is the mass of every message we missed; then its reference is ours. */
void gsp_apply_sync(gsp_peer *g, gsp_edge *e, const gsp_msg *m)
{
    float *restrict x = g->x, *restrict ref = e->ref;
    const float *restrict r = m->ref;
    size_t j = 0;
    for (size_t i = 0; i < g->dim; i++) {
        x[i] = (float)((double)x[i] + gsp_sync_at(i, m->w_total, r, e->w, ref, m->corr_idx, m->corr, m->n_corr, &j));
        ref[i] = r[i];
    }
}

/* A SYNC's arrays are there, its correction positions strictly ascending
 * below dim (or all dim of them). */
int gsp_sync_sound(const gsp_msg *m)
{
    if (!m->ref || m->n_corr > m->dim || (m->n_corr && !m->corr) || (!m->corr_idx && m->n_corr != m->dim))
        return 0;
    for (size_t j = 0; m->corr_idx && j < m->n_corr; j++)
        if (m->corr_idx[j] >= m->dim || (j && m->corr_idx[j] <= m->corr_idx[j - 1]))
            return 0;
    return 1;
}
