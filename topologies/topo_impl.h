/* Private to topologies/: the builder every constructor ends in, error
 * formatting, and the seeded generator the random graph and the mixing
 * analysis draw from.
 *
 *   size_t *at = malloc((phases + 1) * sizeof *at);          // phase p's edges: at[p] .. at[p + 1] - 1
 *   topo_edge *edges = malloc(n_edges * sizeof *edges);     // grouped by phase, any order inside
 *   rc = topo_build(t, n, phases, weighted, at, edges, "ring", e);   // owns at and edges now
 */
#ifndef TOPOLOGIES_TOPO_IMPL_H
#define TOPOLOGIES_TOPO_IMPL_H

#include <math.h>
#include <stdint.h>

#include "topologies/topo.h"

/* Fills e->line and e->msg (not e->file, which belongs to whoever knows the
 * input's name). e may be NULL. */
void topo_err(parse_error *e, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Takes ownership of phase_at (n_phases + 1 offsets) and edges, sorts each
 * phase by (src, dst), validates, rescales explicit weights to sum to 1 and
 * derives the CSR lists. On failure everything is freed and t is zeroed. */
int topo_build(topo *t, int n_peers, int n_phases, int weighted, size_t *phase_at, topo_edge *edges,
               const char *kind, parse_error *e);

/* Whether the union of the phases is strongly connected (self-edges ignored).
 * Returns 1, 0 with *who a peer that 0 cannot reach (*from_zero = 1) or that
 * cannot reach 0 (*from_zero = 0), or -ENOMEM. */
int topo_connected(int n_peers, int n_phases, const size_t *phase_at, const topo_edge *edges, int *who,
                   int *from_zero);

/* Phase of a round, for any round including negative ones. */
static inline int topo_phase(const topo *t, long round)
{
    long p = round % t->n_phases;
    return (int)(p < 0 ? p + t->n_phases : p);
}

/* splitmix64 (Steele, Lea, Flood 2014): one 64-bit word of state, so any seed
 * (0 included) is a good seed, and streams are cheap to derive. */
static inline uint64_t topo_rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double topo_rng_unit(uint64_t *s) { return (double)(topo_rng_next(s) >> 11) * 0x1.0p-53; }

/* Uniform in [0, n), n > 0: rejection, so small n are not biased. */
static inline uint64_t topo_rng_below(uint64_t *s, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n, v;
    do
        v = topo_rng_next(s);
    while (v >= limit);
    return v % n;
}

/* Standard normal (Box-Muller; 1 - u keeps log away from 0). */
static inline double topo_rng_normal(uint64_t *s)
{
    double u = 1.0 - topo_rng_unit(s), v = topo_rng_unit(s);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

#endif
