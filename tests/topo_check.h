/* What the .topo tests share (tests/unit/test_topo_parse.c,
 * tests/process/test_topo_parse.c): two graphs with the same edges, bit for
 * bit. */
#ifndef TESTS_TOPO_CHECK_H
#define TESTS_TOPO_CHECK_H

#include <criterion/criterion.h>
#include <string.h>

#include "topologies/topo.h"

static inline size_t n_edges(const topo *t) { return t->phase_at[t->n_phases]; }

static inline void assert_same_edges(const topo *a, const topo *b, const char *what)
{
    cr_assert_eq(a->n_peers, b->n_peers, "%s", what);
    cr_assert_eq(a->n_phases, b->n_phases, "%s", what);
    cr_assert_eq(a->weighted, b->weighted, "%s", what);
    for (int p = 0; p <= a->n_phases; p++)
        cr_assert_eq(a->phase_at[p], b->phase_at[p], "%s: phase %d", what, p);
    for (size_t k = 0; k < n_edges(a); k++) {
        cr_assert_eq(a->edges[k].src, b->edges[k].src, "%s: edge %zu", what, k);
        cr_assert_eq(a->edges[k].dst, b->edges[k].dst, "%s: edge %zu", what, k);
        cr_assert(memcmp(&a->edges[k].weight, &b->edges[k].weight, sizeof(double)) == 0,
                  "%s: edge %zu weight %.17g vs %.17g", what, k, a->edges[k].weight, b->edges[k].weight);
    }
}

#endif
