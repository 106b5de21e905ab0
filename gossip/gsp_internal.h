/* What gossip/'s files share beyond gsp.h. Internal to gossip/. */
#ifndef GOSSIP_GSP_INTERNAL_H
#define GOSSIP_GSP_INTERNAL_H

#include <string.h>

#include "gossip/gsp.h"

/* gsp_origin.c. The id of a model: FNV-1a 64 of its float32 bytes,
 * little-endian, in index order (never 0; peer/wire/WIRE.md, "The origin
 * id"). */
uint64_t gsp_model_id(const float *x, size_t dim);

/* gsp_origin.c. *ref (dim floats) = where an edge's reference starts: the
 * origin set by gsp_set_origin / gsp_share_origin / gsp_set_origin_fill,
 * or zeros. A draw made ahead (gsp_origin_ahead) replaces *ref, which is
 * freed. */
void gsp_ref_start(gsp_peer *g, float **ref);

/* A new edge's reference, started: the origin's own copy when this is the
 * schedule's last edge of a peer that draws the origin again
 * (gsp_set_origin_fill), else a new buffer. NULL on -ENOMEM. */
float *gsp_ref_new(gsp_peer *g);

/* gsp.c. Room for one encoded message of g's: its codec's or a whole
 * model's (bf16), whichever is larger. */
size_t gsp_msg_room(const gsp_peer *g);

/* gsp.c. The edge to or from peer, created at first use; NULL on -ENOMEM. */
gsp_edge *gsp_edge_at(gsp_peer *g, int peer, int outgoing);

/* gsp_sync.c. The corrections of out-edge e's messages after base, as a
 * list into c (*n of them; SIZE_MAX on -ENOMEM); returns the base used. */
uint64_t gsp_corrections_since(const gsp_edge *e, uint64_t base, gsp_corr *c, size_t dim, size_t *n);
/* m becomes the SYNC of out-edge e from base, its list in the k-th slot. 0 or -ENOMEM. */
int gsp_sync_fill(gsp_peer *g, const gsp_edge *e, uint64_t base, int k, gsp_msg *m);
/* The SYNC lists are freed (their messages are no longer valid). */
void gsp_corr_release(gsp_peer *g);
/* m's SYNC arrays are there and its positions strictly ascending below dim. */
int gsp_sync_sound(const gsp_msg *m);
/* In-edge e takes SYNC m: x gains what the totals grew by, e's reference is m's. */
void gsp_apply_sync(gsp_peer *g, gsp_edge *e, const gsp_msg *m);

/* What a SYNC brings at position i: wt r[i] - wa ref[i] (ref NULL: 0) minus
 * the correction at i, taken from the list (ci, d; ci NULL: every position)
 * at *j, which moves past it. Elsewhere the correction is 0, and t - 0 is t. */
static inline double gsp_sync_at(size_t i, double wt, const float *r, double wa, const float *ref,
                                 const uint32_t *ci, const double *d, size_t n, size_t *j)
{
    double t = wt * (double)r[i] - (ref ? wa * (double)ref[i] : 0.0);
    if (!ci || (*j < n && ci[*j] == i))
        t -= d[ci ? (*j)++ : i];
    return t;
}

/* gsp_check.c. A NaN or an infinity: an exponent of all ones (integer
 * lanes, so the loops that check it vectorise). */
static inline unsigned gsp_not_finite(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return (u & 0x7f800000u) == 0x7f800000u;
}

static inline unsigned gsp_not_finite_d(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return (u & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
}

/* What one message may carry whatever its edge: finite values (not read
 * again when the copy that made it found them so: gsp_msg.finite), a gain
 * and a consensus step in (0, 1] for a DELTA, a finite weight total of at
 * least 0. Why it may not be absorbed, or NULL. */
const char *gsp_unsound(const gsp_peer *g, const gsp_msg *m);
/* A share that no honest sender makes (a broken or hostile member: the
 * wire cannot tell, the values are well formed): refused before anything of
 * it is applied, and why (g->refused_why). On a compressed edge the
 * receiver's reference did not move while the sender's did, so the edge
 * waits for a SYNC, as after a loss. Returns GSP_REFUSED. */
int gsp_refuse(gsp_peer *g, gsp_edge *e, const char *why);

/* A message moves edge e's reference by gain * c at its n non-zeros (idx
 * NULL: dense); x (given) takes xm times the change, old keeps the values
 * before, and with give x first gives up -xm times the old reference
 * (gsp_sweep.c). */
void gsp_edge_move(gsp_edge *e, const uint32_t *idx, const float *c, size_t n, float gain, float *x, double xm,
                   float *old, int give, size_t dim, struct gsp_pool *pool);
/* z = x / w, and x -= sum_k moved_k * ref_k (gsp_sweep.c). */
void gsp_split_x(gsp_peer *g, gsp_edge *const *edges, const double *moved, int n_out);
/* The receiver's sweep: x += xm * ref block by block after the reference
 * moved at the message's k non-zeros (idx NULL: it moved already). */
void gsp_absorb_sweep(gsp_peer *g, gsp_edge *e, const uint32_t *idx, const float *c, size_t k, float gain, double xm);

/* gsp_encode.c: cmp_encode(s, x, n, seed, g->work, out, cap), with a codec
 * that selects chunk by chunk (cmp_chunks) on g's pool (a select area a
 * thread in g->select, at first use): the same bytes on any pool. */
long gsp_encode(gsp_peer *g, const cmp_spec *s, const float *x, size_t n, uint64_t seed, uint8_t *out, size_t cap);
/* gsp_values.c: messages of a value-by-value codec (cmp_values_begin) a
 * block at a time, never holding z - r or the decoded values whole. The
 * sender's message of v = src * inv - ref into buf, its length (or a
 * negative errno), and <v, c>, ||c||^2 as gsp_dot_norm sums them. */
long gsp_values_encode(const cmp_spec *s, const float *src, float inv, const float *ref, size_t n, uint8_t *buf,
                       size_t cap, cmp_values *mv, double *vc, double *cc);
/* Whether every value of the message is finite. */
int gsp_values_finite(const cmp_values *mv, const uint8_t *msg, size_t n);
/* gsp_edge_move for such a message: e's reference moves by gain * its
 * values, x (given) takes xm times the change, old keeps the values before
 * (all n), and with give x first gives up -xm times the old reference. */
void gsp_values_move(gsp_edge *e, const cmp_values *mv, const uint8_t *msg, size_t n, float gain, float *x,
                     double xm, float *old, int give, struct gsp_pool *pool);
/* The receiver's absorb of such a message into in-edge e: the reference
 * moves by gain * its values, then x takes xm times the reference. */
void gsp_values_absorb(gsp_peer *g, gsp_edge *e, const cmp_values *mv, const uint8_t *msg, float gain, double xm);

#endif
