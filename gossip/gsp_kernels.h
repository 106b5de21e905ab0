/* The vector loops of a compressed emit that stream the whole model or
 * gather from it (gsp.c calls them): the difference from a reference with
 * its norms, and <v, c> at a message's non-zeros. Internal to gossip/. */
#ifndef GOSSIP_GSP_KERNELS_H
#define GOSSIP_GSP_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "compress/cmp.h"
#include "gossip/gsp_pool.h"

enum {
    PREFETCH = 16, /* sparse updates and gathers: how many positions ahead to fetch */
    LANES = 8,     /* the norms' float lanes */
    BLK = 256      /* values per block: the norms' float sums, absorb's sweep */
};

/* v = z - ref with ||v||^2 and ||z||^2 (z = x * inv); v NULL: the norms only. */
void gsp_diff_norms(const float *x, float inv, const float *restrict ref, float *restrict v, size_t n, double *vv,
                    double *zz);

/* The same norms without storing v: every position whose value of v has a
 * key (cmp_list_key) of at least t is appended to c, with the value's bits
 * (a top-k codec's candidates, compress/cmp.h), chunk by chunk on pool's
 * threads (the same list and norms for any pool, gsp_pool.h). 0, or
 * -ENOSPC when more than c->cap reach t, -ENOMEM. */
int gsp_diff_collect(const float *x, float inv, const float *restrict ref, size_t n, double *vv, double *zz,
                     uint32_t t, cmp_list *c, gsp_pool *pool);

/* x += m * r, in double, rounded to float once per value (what x takes
 * from an in-edge, and with m < 0 what it gives up to an out-edge). */
void gsp_add_scaled(float *restrict x, const float *restrict r, size_t n, double m);

/* <v, c> and ||c||^2 at c's non-zeros (idx NULL: c dense, n values). */
void gsp_dot_norm(const float *v, const uint32_t *idx, const float *c, size_t n, double *vc, double *cc);

#endif
