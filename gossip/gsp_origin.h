/* Where an edge's reference starts (gsp_origin.c): the origin set by
 * gsp_set_origin / gsp_share_origin / gsp_set_origin_fill, or zeros.
 * Internal to gossip/. */
#ifndef GSP_ORIGIN_H
#define GSP_ORIGIN_H

#include "gossip/gsp.h"

/* ref (dim floats) = where an edge's reference starts. */
void gsp_ref_start(const gsp_peer *g, float *ref);

/* A new edge's reference, started: the origin's own copy when this is the
 * schedule's last edge of a peer that draws the origin again
 * (gsp_set_origin_fill), else a new buffer. NULL on -ENOMEM. */
float *gsp_ref_new(gsp_peer *g);

#endif
