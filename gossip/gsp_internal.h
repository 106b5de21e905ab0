/* What gossip/'s files share beyond gsp.h. Internal to gossip/. */
#ifndef GSP_INTERNAL_H
#define GSP_INTERNAL_H

#include "gossip/gsp.h"

/* gsp_origin.c. ref (dim floats) = where an edge's reference starts: the
 * origin set by gsp_set_origin / gsp_share_origin / gsp_set_origin_fill,
 * or zeros. */
void gsp_ref_start(gsp_peer *g, float *ref);

/* A new edge's reference, started: the origin's own copy when this is the
 * schedule's last edge of a peer that draws the origin again
 * (gsp_set_origin_fill), else a new buffer. NULL on -ENOMEM. */
float *gsp_ref_new(gsp_peer *g);

/* gsp.c. Room for one encoded message of g's: its codec's or a whole
 * model's (bf16), whichever is larger. */
size_t gsp_msg_room(const gsp_peer *g);

#endif
