/* The sweeps of a message over x and an edge's reference (a sender's and a
 * receiver's, chunk by chunk on the peer's pool) and the split of x over
 * several out-edges: gsp.c's emit and absorb call them (gsp_internal.h). */
#include <string.h>

#include "gossip/gsp_internal.h"
#include "gossip/gsp_kernels.h"
#include "gossip/gsp_pool.h"

/* One non-zero of a message: ref[i] += d, the old value into *old, and x
 * (given) takes xm times the change. */
static inline void move_at(float *restrict ref, float *x, size_t i, float d, double xm, float *old)
{
    const float before = ref[i];
    ref[i] += d;
    if (old)
        *old = before;
    if (x)
        x[i] = (float)((double)x[i] + xm * ((double)ref[i] - (double)before));
}

/* One sweep over x and a reference with a sparse message's non-zeros
 * (positions ascending): block by block, x takes xm times the block of the
 * reference, then the non-zeros in it move. Give (the sender): each moves
 * ref and x (move_at); else (the receiver) the reference moves first and
 * x takes it after, block by block. The chunks of a pool run are disjoint
 * ranges of positions, so any number of threads computes the same floats. */
typedef struct sweep_job {
    float *x, *ref;
    const uint32_t *idx;
    const float *c;
    size_t k, dim;
    float gain;
    double xm;
    float *old;
    int give;
} sweep_job;

/* The first of the k ascending positions that is >= pos. */
static size_t first_at(const uint32_t *idx, size_t k, size_t pos)
{
    size_t lo = 0, hi = k;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (idx[mid] < pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void sweep_span(void *arg, size_t s0, size_t s1)
{
    const sweep_job *a = arg;
    float *restrict x = a->x, *restrict ref = a->ref;
    size_t j = a->idx && s0 ? first_at(a->idx, a->k, s0) : 0;
    for (size_t s = s0; s < s1; s += BLK) {
        const size_t end = s + BLK < s1 ? s + BLK : s1;
        if (a->give) {
            gsp_add_scaled(x + s, ref + s, end - s, a->xm);
            for (; j < a->k && a->idx[j] < end; j++)
                move_at(ref, x, a->idx[j], a->gain * a->c[j], a->xm, a->old ? &a->old[j] : NULL);
        } else {
            for (; a->idx && j < a->k && a->idx[j] < end; j++)
                ref[a->idx[j]] += a->gain * a->c[j];
            gsp_add_scaled(x + s, ref + s, end - s, a->xm);
        }
    }
}

/* A message moves edge e's reference: r += gain * c at the message's
 * non-zeros (idx NULL: c is dense, n values), the one expression both ends
 * evaluate so that their references stay bit for bit equal. The sender
 * (x given) also gives up -xm times the change and keeps the old values in
 * `old` for a SYNC. With `give` (the round's one out-edge), x first gives up
 * -xm times the old reference at every one of the dim positions: a sparse
 * message then goes block by block in one sweep, its scattered updates
 * landing in lines the dense pass has just brought in. */
void gsp_edge_move(gsp_edge *e, const uint32_t *idx, const float *c, size_t n, float gain, float *x, double xm,
                      float *old, int give, size_t dim, gsp_pool *pool)
{
    float *restrict ref = e->ref;
    if (!idx) { /* a dense message (the first of an edge, a refresh, the dense codecs): one vectorised pass */
        if (old)
            memcpy(old, ref, n * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            const float before = ref[i];
            if (give)
                x[i] = (float)((double)x[i] + xm * (double)before);
            ref[i] += gain * c[i];
            if (x)
                x[i] = (float)((double)x[i] + xm * ((double)ref[i] - (double)before));
        }
        return;
    }
    if (give) { /* (x - moved r is x + (-moved) r: the same float, negation is exact) */
        sweep_job a = {.x = x, .ref = ref, .idx = idx, .c = c, .k = n, .dim = dim, .gain = gain, .xm = xm,
                       .old = old, .give = 1};
        gsp_pool_spans(pool, dim, sweep_span, &a);
    } else
        for (size_t j = 0; j < n; j++) {
            if (j + PREFETCH < n) { /* the stride is too irregular for the hardware prefetcher */
                __builtin_prefetch(&ref[idx[j + PREFETCH]], 1);
                if (x)
                    __builtin_prefetch(&x[idx[j + PREFETCH]], 1);
            }
            move_at(ref, x, idx[j], gain * c[j], xm, old ? &old[j] : NULL);
        }
}

typedef struct split_job {
    float *x, *z, inv;
    const float *refs[TOPO_MAX_OUT];
    const double *moved;
    int n_out;
} split_job;

/* split_x over [s, e). One and two edges (the exponential graphs' rounds)
 * get loops of their own that the compiler vectorises. */
static void split_span(void *arg, size_t s, size_t e)
{
    const split_job *a = arg;
    float *restrict x = a->x, *restrict z = a->z;
    const float inv = a->inv;
    if (a->n_out == 1) {
        const float *restrict r0 = a->refs[0];
        const double m0 = a->moved[0];
        for (size_t i = s; i < e; i++) {
            z[i] = x[i] * inv;
            x[i] = (float)((double)x[i] - m0 * (double)r0[i]);
        }
        return;
    }
    if (a->n_out == 2) {
        const float *restrict r0 = a->refs[0], *restrict r1 = a->refs[1];
        const double m0 = a->moved[0], m1 = a->moved[1];
        for (size_t i = s; i < e; i++) {
            z[i] = x[i] * inv;
            x[i] = (float)((double)x[i] - m0 * (double)r0[i] - m1 * (double)r1[i]);
        }
        return;
    }
    for (size_t i = s; i < e; i++) {
        z[i] = x[i] * inv;
        double xi = x[i];
        for (int k = 0; k < a->n_out; k++)
            xi -= a->moved[k] * (double)a->refs[k][i];
        x[i] = (float)xi;
    }
}

/* z = x / w, and x -= sum_k moved_k * ref_k with the references as they
 * stand before this round's messages, in double, rounded to float once. */
void gsp_split_x(gsp_peer *g, gsp_edge *const *edges, const double *moved, int n_out)
{
    split_job a = {.x = g->x, .z = g->z, .inv = gsp_debias_factor(g), .moved = moved, .n_out = n_out};
    for (int k = 0; k < n_out; k++)
        a.refs[k] = edges[k]->ref;
    g->z_written = 1;
    gsp_pool_spans(g->pool, g->dim, split_span, &a);
}

void gsp_absorb_sweep(gsp_peer *g, gsp_edge *e, const uint32_t *idx, const float *c, size_t k, float gain, double xm)
{
    sweep_job a = {.x = g->x, .ref = e->ref, .idx = idx, .c = c, .k = idx ? k : 0, .dim = g->dim, .gain = gain,
                   .xm = xm};
    gsp_pool_spans(g->pool, g->dim, sweep_span, &a);
}
