/* The graph model: building and validating a schedule, routing around dead
 * peers, in-neighbour lists. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topologies/topo_impl.h"

/* Explicit weights are written by hand as decimals; 1e-6 lets 0.333333 * 3
 * pass, and the builder rescales so no mass leaks either way. */
#define WEIGHT_TOL 1e-6

void topo_err(parse_error *e, int line, const char *fmt, ...)
{
    if (!e)
        return;
    va_list ap;
    va_start(ap, fmt);
    e->line = line;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
}

void topo_free(topo *t)
{
    if (!t)
        return;
    free(t->phase_at);
    free(t->edges);
    free(t->out_at);
    free(t->in_at);
    free(t->in_src);
    memset(t, 0, sizeof *t);
}

int topo_connected(int n_peers, int n_phases, const size_t *phase_at, const topo_edge *edges, int *who,
                   int *from_zero)
{
    size_t m = phase_at[n_phases];
    size_t *fwd_at = calloc((size_t)n_peers + 1, sizeof *fwd_at);
    size_t *bwd_at = calloc((size_t)n_peers + 1, sizeof *bwd_at);
    int *fwd = malloc((m ? m : 1) * sizeof *fwd), *bwd = malloc((m ? m : 1) * sizeof *bwd);
    int *queue = malloc((size_t)n_peers * sizeof *queue);
    char *seen = malloc((size_t)n_peers);
    int rc = -ENOMEM;
    if (!fwd_at || !bwd_at || !fwd || !bwd || !queue || !seen)
        goto out;
    /* Union adjacency in both directions; parallel edges from different
     * phases are harmless for reachability. */
    for (size_t k = 0; k < m; k++)
        if (edges[k].src != edges[k].dst)
            fwd_at[edges[k].src + 1]++, bwd_at[edges[k].dst + 1]++;
    for (int i = 0; i < n_peers; i++)
        fwd_at[i + 1] += fwd_at[i], bwd_at[i + 1] += bwd_at[i];
    for (size_t k = 0; k < m; k++)
        if (edges[k].src != edges[k].dst) {
            fwd[fwd_at[edges[k].src]++] = edges[k].dst;
            bwd[bwd_at[edges[k].dst]++] = edges[k].src;
        }
    for (int i = n_peers; i > 0; i--)
        fwd_at[i] = fwd_at[i - 1], bwd_at[i] = bwd_at[i - 1];
    fwd_at[0] = bwd_at[0] = 0;

    rc = 1;
    for (int dir = 0; dir < 2 && rc == 1; dir++) {
        const size_t *at = dir ? bwd_at : fwd_at;
        const int *adj = dir ? bwd : fwd;
        memset(seen, 0, (size_t)n_peers);
        int head = 0, tail = 0;
        queue[tail++] = 0, seen[0] = 1;
        while (head < tail) {
            int u = queue[head++];
            for (size_t k = at[u]; k < at[u + 1]; k++)
                if (!seen[adj[k]])
                    seen[adj[k]] = 1, queue[tail++] = adj[k];
        }
        for (int i = 0; i < n_peers; i++)
            if (!seen[i]) {
                *who = i, *from_zero = !dir;
                rc = 0;
                break;
            }
    }
out:
    free(fwd_at), free(bwd_at), free(fwd), free(bwd), free(queue), free(seen);
    return rc;
}

int topo_validate(const topo *t, parse_error *e)
{
    if (!t)
        return -EINVAL;
    const int n = t->n_peers, P = t->n_phases;
    if (n < 1 || n > TOPO_MAX_PEERS) {
        topo_err(e, 0, "peer count %d out of range 1..%d", n, TOPO_MAX_PEERS);
        return -EINVAL;
    }
    if (P < 1 || P > TOPO_MAX_PHASES) {
        topo_err(e, 0, "phase count %d out of range 1..%d", P, TOPO_MAX_PHASES);
        return -EINVAL;
    }
    if ((long)P * (n + 1) > TOPO_MAX_PEER_PHASES) {
        topo_err(e, 0, "%d phases of %d peers exceed the limit of %ld peer-phases", P, n, TOPO_MAX_PEER_PHASES);
        return -EINVAL;
    }
    if (!t->phase_at || t->phase_at[0] != 0 || t->phase_at[P] > TOPO_MAX_EDGES ||
        (t->phase_at[P] && !t->edges)) {
        topo_err(e, 0, "no edge list, or more than %ld edges", TOPO_MAX_EDGES);
        return -EINVAL;
    }
    for (int p = 0; p < P; p++) {
        size_t a = t->phase_at[p], b = t->phase_at[p + 1];
        if (b < a || b > t->phase_at[P]) {
            topo_err(e, 0, "phase %d: edge offsets out of order", p);
            return -EINVAL;
        }
        int deg = 0;
        double sum = 0, self = 0;
        for (size_t k = a; k < b; k++) {
            const topo_edge *x = &t->edges[k];
            if (x->src < 0 || x->src >= n || x->dst < 0 || x->dst >= n) {
                topo_err(e, 0, "phase %d: edge %d -> %d: peer id out of range 0..%d", p, x->src, x->dst, n - 1);
                return -EINVAL;
            }
            if (k > a) {
                const topo_edge *y = x - 1;
                if (y->src == x->src && y->dst == x->dst) {
                    topo_err(e, 0, "phase %d: duplicate edge %d -> %d", p, x->src, x->dst);
                    return -EINVAL;
                }
                if (y->src > x->src || (y->src == x->src && y->dst > x->dst)) {
                    topo_err(e, 0, "phase %d: edges are not sorted by (src, dst)", p);
                    return -EINVAL;
                }
                if (y->src != x->src)
                    deg = 0, sum = 0, self = 0;
            }
            if (t->weighted) {
                if (!(x->weight > 0 && x->weight <= 1)) {
                    topo_err(e, 0, "phase %d: edge %d -> %d has weight %g, expected one in (0, 1]", p, x->src,
                             x->dst, x->weight);
                    return -EINVAL;
                }
                sum += x->weight;
                if (x->src == x->dst)
                    self = x->weight;
            } else {
                if (x->src == x->dst) {
                    topo_err(e, 0, "phase %d: self-edge %d -> %d without weights (with uniform mixing the kept share is implicit)",
                             p, x->src, x->dst);
                    return -EINVAL;
                }
                if (!(x->weight < 0)) {
                    topo_err(e, 0, "phase %d: edge %d -> %d has a weight in a topology with uniform mixing", p,
                             x->src, x->dst);
                    return -EINVAL;
                }
            }
            if (x->src != x->dst && ++deg > TOPO_MAX_OUT) {
                topo_err(e, 0, "phase %d: peer %d has more than %d out-neighbours", p, x->src, TOPO_MAX_OUT);
                return -EINVAL;
            }
            if (t->weighted && (k + 1 == b || t->edges[k + 1].src != x->src)) {
                if (fabs(sum - 1) > WEIGHT_TOL) {
                    topo_err(e, 0, "phase %d: peer %d's weights sum to %.9g, not 1 (its kept share %d -> %d included)",
                             p, x->src, sum, x->src, x->src);
                    return -EINVAL;
                }
                if (self <= 0) {
                    topo_err(e, 0, "phase %d: peer %d keeps no share (give it a self-edge %d -> %d:W)", p, x->src,
                             x->src, x->src);
                    return -EINVAL;
                }
            }
        }
    }
    if (n > 1) {
        int who = 0, from_zero = 0;
        int rc = topo_connected(n, P, t->phase_at, t->edges, &who, &from_zero);
        if (rc < 0) {
            topo_err(e, 0, "out of memory");
            return rc;
        }
        if (!rc) {
            topo_err(e, 0, "not strongly connected over one period of %d phase%s: peer %d %s peer 0", P,
                     P == 1 ? "" : "s", who, from_zero ? "cannot be reached from" : "cannot reach");
            return -EINVAL;
        }
    }
    return 0;
}

static int cmp_edge(const void *a, const void *b)
{
    const topo_edge *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    return (x->dst > y->dst) - (x->dst < y->dst);
}

/* Exact sums of 1 per sender, so push-sum conserves mass to round-off even
 * when the file said 0.333333. */
static void rescale(topo *t)
{
    for (int p = 0; p < t->n_phases; p++)
        for (size_t a = t->phase_at[p], b, end = t->phase_at[p + 1]; a < end; a = b) {
            double sum = 0;
            for (b = a; b < end && t->edges[b].src == t->edges[a].src; b++)
                sum += t->edges[b].weight;
            /* Weights that already sum to 1 up to the round-off of the sum
             * itself are left alone, so a written and re-read topology keeps
             * its weights bit for bit (rescaling is not idempotent). */
            if (fabs(sum - 1) <= 256 * DBL_EPSILON)
                continue;
            for (size_t k = a; k < b; k++)
                t->edges[k].weight /= sum;
        }
}

static int derive(topo *t)
{
    const int n = t->n_peers, P = t->n_phases;
    const size_t stride = (size_t)n + 1, m = t->phase_at[P];
    t->out_at = malloc((size_t)P * stride * sizeof *t->out_at);
    t->in_at = calloc((size_t)P * stride, sizeof *t->in_at);
    t->in_src = malloc((m ? m : 1) * sizeof *t->in_src);
    int *fill = malloc(stride * sizeof *fill);
    if (!t->out_at || !t->in_at || !t->in_src || !fill) {
        free(fill);
        return -ENOMEM;
    }
    size_t in_total = 0;
    t->max_out = t->max_in = 0;
    for (int p = 0; p < P; p++) {
        size_t a = t->phase_at[p], b = t->phase_at[p + 1];
        size_t *out = t->out_at + (size_t)p * stride, *in = t->in_at + (size_t)p * stride;
        size_t k = a;
        for (int i = 0; i <= n; i++) {
            while (k < b && t->edges[k].src < i)
                k++;
            out[i] = k;
        }
        for (int i = 0; i < n; i++) {
            int d = 0;
            for (size_t j = out[i]; j < out[i + 1]; j++)
                d += t->edges[j].dst != i;
            if (d > t->max_out)
                t->max_out = d;
        }
        /* in-lists: counting sort by dst; edges are sorted by src, so each
         * in-list comes out ascending. */
        memset(fill, 0, stride * sizeof *fill);
        for (size_t j = a; j < b; j++)
            if (t->edges[j].src != t->edges[j].dst)
                fill[t->edges[j].dst]++;
        in[0] = in_total;
        for (int i = 0; i < n; i++) {
            if (fill[i] > t->max_in)
                t->max_in = fill[i];
            in[i + 1] = in[i] + (size_t)fill[i];
            fill[i] = 0;
        }
        for (size_t j = a; j < b; j++) {
            const topo_edge *x = &t->edges[j];
            if (x->src != x->dst)
                t->in_src[in[x->dst] + (size_t)fill[x->dst]++] = x->src;
        }
        in_total = in[n];
    }
    free(fill);
    return 0;
}

int topo_build(topo *t, int n_peers, int n_phases, int weighted, size_t *phase_at, topo_edge *edges,
               const char *kind, parse_error *e)
{
    memset(t, 0, sizeof *t);
    t->n_peers = n_peers;
    t->n_phases = n_phases;
    t->weighted = weighted;
    t->phase_at = phase_at;
    t->edges = edges;
    snprintf(t->kind, sizeof t->kind, "%s", kind ? kind : "explicit");
    if (phase_at && n_phases >= 1 && n_phases <= TOPO_MAX_PHASES && phase_at[n_phases] <= TOPO_MAX_EDGES && edges)
        for (int p = 0; p < n_phases; p++)
            if (phase_at[p + 1] > phase_at[p])
                qsort(edges + phase_at[p], phase_at[p + 1] - phase_at[p], sizeof *edges, cmp_edge);
    int rc = topo_validate(t, e);
    if (rc == 0 && weighted)
        rescale(t);
    if (rc == 0 && (rc = derive(t)) < 0)
        topo_err(e, 0, "out of memory");
    if (rc < 0)
        topo_free(t);
    return rc;
}

void topo_route(const topo *t, long round, int peer, const uint8_t *alive, topo_out *out)
{
    out->n = 0;
    out->keep = 1;
    if (!t || t->n_phases < 1 || !t->out_at || peer < 0 || peer >= t->n_peers)
        return;
    const int n = t->n_peers, p = topo_phase(t, round);
    const size_t *at = t->out_at + (size_t)p * ((size_t)n + 1);
    int d = 0;
    for (size_t k = at[peer]; k < at[peer + 1]; k++)
        d += t->edges[k].dst != peer;
    const double uniform = 1.0 / (d + 1);
    /* With weights the kept share is the self-edge, which validation
     * requires of every sender; a peer with no edge at all keeps all. */
    double keep = !t->weighted || at[peer] == at[peer + 1] ? uniform : 0;
    int m = 0;
    uint8_t dead[TOPO_MAX_OUT];
    for (size_t k = at[peer]; k < at[peer + 1]; k++) {
        const topo_edge *x = &t->edges[k];
        if (x->dst == peer) {
            keep = x->weight;
            continue;
        }
        out->peer[m] = x->dst;
        out->weight[m] = t->weighted ? x->weight : uniform;
        dead[m++] = alive && !alive[x->dst];
    }
    /* Redirect each dead target to the next live peer after it that is not
     * the sender and not already a target: every peer that was to get mass
     * still gets exactly its share, and the dead peer's share stays on the
     * ring near it, so the graph stays mixed around the hole. A candidate
     * is alive, so it can only collide with live or already redirected
     * entries, never with a dead placeholder. */
    int kept = 0;
    for (int j = 0; j < m; j++) {
        if (!dead[j])
            continue;
        int to = -1;
        for (int step = 1, c = out->peer[j]; step < n && to < 0; step++) {
            c = c + 1 == n ? 0 : c + 1;
            if (c == peer || !alive[c])
                continue;
            int taken = 0;
            for (int q = 0; q < m && !taken; q++)
                taken = out->peer[q] == c;
            if (!taken)
                to = c;
        }
        if (to >= 0) {
            out->peer[j] = to;
        } else {
            keep += out->weight[j];
            out->weight[j] = -1; /* dropped below */
            kept++;
        }
    }
    if (kept) {
        int w = 0;
        for (int j = 0; j < m; j++)
            if (out->weight[j] >= 0)
                out->peer[w] = out->peer[j], out->weight[w++] = out->weight[j];
        m = w;
    }
    out->n = m;
    out->keep = keep;
}

int topo_in(const topo *t, long round, int peer, const uint8_t *alive, int *in, int max)
{
    if (!t || t->n_phases < 1 || !t->in_at || peer < 0 || peer >= t->n_peers)
        return 0;
    const int n = t->n_peers, p = topo_phase(t, round);
    const size_t *at = t->in_at + (size_t)p * ((size_t)n + 1);
    int c = 0;
    for (size_t k = at[peer]; k < at[peer + 1] && c < max; k++)
        if (!alive || alive[t->in_src[k]])
            in[c++] = t->in_src[k];
    return c;
}

int topo_degree(const topo *t, int peer, int *n_out, int *n_in)
{
    *n_out = *n_in = 0;
    if (!t || t->n_phases < 1 || !t->out_at || peer < 0 || peer >= t->n_peers)
        return 0;
    const int n = t->n_peers;
    uint8_t *seen = calloc((size_t)n, 1); /* bit 0: sends to it, bit 1: hears from it */
    if (!seen)
        return -ENOMEM;
    for (int p = 0; p < t->n_phases; p++) {
        const size_t *out = t->out_at + (size_t)p * ((size_t)n + 1), *in = t->in_at + (size_t)p * ((size_t)n + 1);
        for (size_t k = out[peer]; k < out[peer + 1]; k++)
            if (t->edges[k].dst != peer && !(seen[t->edges[k].dst] & 1))
                seen[t->edges[k].dst] |= 1, (*n_out)++;
        for (size_t k = in[peer]; k < in[peer + 1]; k++)
            if (t->in_src[k] != peer && !(seen[t->in_src[k]] & 2))
                seen[t->in_src[k]] |= 2, (*n_in)++;
    }
    free(seen);
    return 0;
}

int topo_note(const topo *t, char *buf, size_t cap)
{
    if (!t || !cap)
        return 0;
    const int n = t->n_peers;
    int exp = !strncmp(t->kind, "exponential", 11) || !strncmp(t->kind, "n-peer-exponential", 18) ||
              !strncmp(t->kind, "bipartite-exponential", 21);
    if (!exp || n < 2 || (n & (n - 1)) == 0)
        return 0;
    int L = 0;
    while ((1 << L) < n)
        L++;
    snprintf(buf, cap,
             "%d peers is not a power of two: averaging on this graph is not exact after log2 n = %d rounds "
             "(it still converges, more slowly)",
             n, L);
    return 1;
}
