/* The outer optimizer of local-step SGP (DiLoCo-style, Douillard et al.
 * 2023, with push-sum mixing in place of the all-reduce). A round starts
 * from the mixed model a = z (what the round's absorbs made of it), takes H
 * local steps to z', and treats the difference as a pseudo-gradient:
 *
 *  delta = a - z';   a = a - lr * dir(delta)   (SGD with momentum, Nesterov or not);   x = w * a
 *
 * then gossips x as every round does, so the peers' outer steps are
 * averaged by the mixing. With lr 1 and no momentum a = z': plain SGP with
 * H local steps. The momentum sees only the peer's own progress, never the
 * mixing: a momentum on (a - mixed z), DiLoCo's form with an all-reduce,
 * also integrates the disagreement between peers and made consensus diverge
 * here (gossip/GUARANTEES.md, "Local steps"). The velocity is local to the
 * peer and goes into its checkpoint; the step moves x only (as a local step
 * does), so push-sum's weights and mixing are untouched.
 *
 *   outer_opts o;
 *   if (outer_opts_parse(&o, "nesterov:0.7:0.9", err, sizeof err) < 0) ...
 *   outer_state s;
 *   outer_init(&s, &o, dim);
 *   outer_begin(&s, &g);                   // each round, after absorbing
 *   ... the H local steps ...
 *   outer_end(&s, &g);
 *   outer_free(&s);
 */
#ifndef PEER_CORE_OUTER_H
#define PEER_CORE_OUTER_H

#include <stddef.h>

#include "gossip/gsp.h"
#include "nn/nn_optim.h"

typedef struct outer_opts {
    float lr;       /* <= 0: no outer optimizer */
    float momentum; /* [0, 1) */
    int nesterov;
    char text[48];  /* as given, for logs */
} outer_opts;

/* "none", "sgd:LR[:MOMENTUM]" or "nesterov:LR:MOMENTUM" (0 < LR <= 10,
 * 0 <= MOMENTUM < 1); -EINVAL with a message. */
int outer_opts_parse(outer_opts *o, const char *text, char *err, size_t errlen);

typedef struct outer_state {
    outer_opts o;
    nn_sgd sgd;    /* its velocity is the outer momentum (checkpointed) */
    float *anchor; /* the model the round's local steps started from */
    int anchored;  /* the anchor has been written (a run whose anchor is kept elsewhere, outer_end_from, never
                    * writes it: its pages are never resident) */
} outer_state;

/* -ENOMEM; a state for o NULL or o->lr <= 0 holds nothing, and
 * outer_begin and outer_end do nothing. */
int outer_init(outer_state *s, const outer_opts *o, size_t dim);
static inline int outer_on(const outer_state *s) { return s->anchor != NULL; }
/* Before the round's local steps: a = z. */
void outer_begin(outer_state *s, gsp_peer *g);
/* After them: the outer step from a, into x. */
void outer_end(outer_state *s, gsp_peer *g);
/* The same two on a model z held apart from the gossip state (--overlap's
 * steps): a = z before them; z = the outer step's a after them. */
void outer_begin_at(outer_state *s, const float *z);
void outer_end_at(outer_state *s, float *z);
/* outer_end_at with the anchor a that the steps started from kept by the
 * caller, unchanged since (--overlap's z_start), and no outer_begin_at: z =
 * the outer step of a by a - z, the same floats, and a untouched. No copy
 * of the model for the anchor. */
void outer_end_from(outer_state *s, const float *a, float *z);
/* Bytes it holds: the anchor and the momentum. */
size_t outer_bytes(const outer_state *s);
void outer_free(outer_state *s);

#endif
