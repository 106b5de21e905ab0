/* Where an edge's reference starts: the run's common model (the origin),
 * held, borrowed or drawn again, or zeros (gsp.h, gsp_internal.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gsp.h"
#include "gossip/gsp_internal.h"

/* The origin id of peer/wire/WIRE.md ("The origin id"): FNV-1a 64 over the
 * float32 little-endian bytes, never 0 (0 says zeros). Agreement, not
 * secrecy: peers are authenticated. The bytes are taken least significant
 * first whatever the host's order, so peers of either order agree. */
uint64_t gsp_model_id(const float *x0, size_t dim)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < dim; i++) {
        uint32_t u;
        memcpy(&u, &x0[i], sizeof u);
        for (int b = 0; b < 4; b++)
            h = (h ^ ((u >> (8 * b)) & 0xffu)) * 0x100000001b3ULL;
    }
    return h ? h : 1;
}

int gsp_share_origin(gsp_peer *g, const float *x0)
{
    if (!g->codec || g->n_out || g->n_in || !x0)
        return -EINVAL;
    if (x0 != g->origin_copy) {
        free(g->origin_copy);
        g->origin_copy = NULL;
    }
    g->origin = x0;
    g->origin_fill = NULL;
    g->origin_id = gsp_model_id(x0, g->dim);
    return 0;
}

int gsp_set_origin(gsp_peer *g, const float *x0)
{
    if (!g->codec || g->n_out || g->n_in || !x0)
        return -EINVAL;
    float *o = malloc((g->dim ? g->dim : 1) * sizeof(float));
    if (!o)
        return -ENOMEM;
    memcpy(o, x0, g->dim * sizeof(float));
    free(g->origin_copy);
    g->origin_copy = o;
    return gsp_share_origin(g, o);
}

int gsp_set_origin_fill(gsp_peer *g, int (*fill)(void *ctx, float *dst), void *ctx, int edges)
{
    if (!g->origin_copy || g->origin != g->origin_copy || g->n_out || g->n_in || !fill || edges < 1)
        return -EINVAL;
    g->origin_fill = fill, g->origin_ctx = ctx, g->origin_edges = edges, g->origin_checked = 0;
    return 0;
}

/* A draw, checked at the first: one that differs from origin_id's bits (or
 * that the fill could not make: made < 0) ends the origin (see
 * gsp_set_origin_fill) and the reference starts at zeros instead. */
static void check_draw(gsp_peer *g, float *ref, int made)
{
    if (g->origin_checked && made == 0)
        return;
    if (made == 0 && gsp_model_id(ref, g->dim) == g->origin_id) {
        g->origin_checked = 1;
        return;
    }
    g->origin_fill = NULL, g->origin_id = 0;
    free(g->origin_drawn), g->origin_drawn = NULL;
    memset(ref, 0, (g->dim ? g->dim : 1) * sizeof(float));
}

int gsp_origin_ahead_wanted(const gsp_peer *g)
{
    return g->origin_fill && !g->origin && !g->origin_drawn;
}

void gsp_origin_ahead(gsp_peer *g, float *drawn)
{
    if (!gsp_origin_ahead_wanted(g)) {
        free(drawn);
        return;
    }
    g->origin_drawn = drawn;
}

void gsp_ref_start(gsp_peer *g, float **ref)
{
    if (g->origin)
        memcpy(*ref, g->origin, g->dim * sizeof(float));
    else if (g->origin_fill && g->origin_drawn) { /* made ahead, off the driver's loop */
        free(*ref);
        *ref = g->origin_drawn, g->origin_drawn = NULL;
        check_draw(g, *ref, 0);
    } else if (g->origin_fill) {
        check_draw(g, *ref, g->origin_fill(g->origin_ctx, *ref));
    } else
        memset(*ref, 0, (g->dim ? g->dim : 1) * sizeof(float));
}

float *gsp_ref_new(gsp_peer *g)
{
    if (g->origin_fill && g->origin_copy && g->n_out + g->n_in + 1 >= g->origin_edges) {
        float *ref = g->origin_copy; /* the last edge the schedule has: it takes the copy, later ones draw it */
        g->origin = NULL, g->origin_copy = NULL;
        return ref;
    }
    float *ref = malloc((g->dim ? g->dim : 1) * sizeof(float));
    if (ref)
        gsp_ref_start(g, &ref);
    return ref;
}
