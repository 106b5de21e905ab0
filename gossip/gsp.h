/* Push-sum / Stochastic Gradient Push state of one peer, in running-sum form.
 * Pure: no I/O, no clock, no globals. The driver (simulator or networked
 * peer) moves the messages and decides when a round starts.
 *
 *   gsp_peer g = {0};
 *   gsp_init(&g, id, n_peers, dim, tau, x0);       // x = x0, w = 1
 *   for (;;) {
 *       const float *z = gsp_debias(&g);            // z = x / w: the model to use
 *       ... gradient at z, optimizer step applied to g.x ...
 *       topo_out out; topo_route(&t, g.round, id, alive, &out);
 *       gsp_msg msgs[TOPO_MAX_OUT];
 *       int n = gsp_emit(&g, &out, msgs);            // split (x, w); g.round++
 *       ... deliver msgs (copy the payload with gsp_msg_copy if kept) ...
 *       ... gsp_absorb(&g, &incoming) for what arrived, in any order ...
 *       while (!gsp_ready(&g, &t, alive)) wait for more messages;
 *   }
 *   gsp_free(&g);
 *
 * Running sums (Hadjicostis, Dominguez-Garcia, Vaidya): each directed edge
 * i -> j carries the CUMULATIVE totals (sigma_x, sigma_w) of everything i ever
 * sent to j, with a per-edge sequence number; j keeps (rho_x, rho_w), the
 * totals it has applied, and on a newer message adds sigma - rho and sets
 * rho = sigma. What this guarantees is written in gossip/GUARANTEES.md and
 * tested in tests/test_gossip_*.c. Totals are double so that their growth
 * over many rounds does not eat the float precision of the differences.
 */
#ifndef GSP_H
#define GSP_H

#include <stddef.h>
#include <stdint.h>

#include "topologies/topo.h"

/* One message: the sender's cumulative totals on one edge. A message made by
 * gsp_emit points into the sender's edge state (valid until its next emit);
 * gsp_msg_copy gives the driver its own copy for messages in flight. */
typedef struct gsp_msg {
    int src, dst;
    long round;           /* the sender's round when it was sent */
    uint64_t seq;         /* 1, 2, ... per directed edge */
    double w_total;       /* sigma_w */
    size_t dim;
    const double *x_total; /* sigma_x, dim values */
    double *owned;        /* non-NULL when this message owns x_total (gsp_msg_copy) */
} gsp_msg;

/* Totals on one directed edge: sent (out-edges) or applied (in-edges). */
typedef struct gsp_edge {
    int peer;       /* the other end */
    uint64_t seq;   /* last sent / last applied */
    long round;     /* round of that message */
    double w;       /* sigma_w or rho_w */
    double *x;      /* sigma_x or rho_x, dim values */
} gsp_edge;

typedef struct gsp_stats {
    uint64_t sent, absorbed, ignored; /* ignored: duplicates and messages older than one applied */
    uint64_t stale_sum;               /* sum over absorbed messages of (own round - message round) */
} gsp_stats;

typedef struct gsp_peer {
    int id, n_peers, tau;
    size_t dim;
    long round;   /* rounds whose shares have been emitted */
    long since;   /* first round it takes part in (a rejoin): earlier rounds' messages are not awaited */
    float *x;     /* push-sum numerator: the optimizer steps on it */
    double w;     /* push-sum weight, > 0 */
    float *z;     /* x / w, refreshed by gsp_debias */
    gsp_edge *out, *in;
    int n_out, n_in, cap_out, cap_in;
    gsp_stats stats;
} gsp_peer;

/* x = x0 (zeros if NULL), w = 1. tau >= 0 is the staleness bound in rounds.
 * Edges are allocated for the peer's scheduled neighbours at first use. */
int gsp_init(gsp_peer *g, int id, int n_peers, size_t dim, int tau, const float *x0);
void gsp_free(gsp_peer *g);

/* z = x / w (into g->z) and returns it. */
const float *gsp_debias(gsp_peer *g);

/* Split for this round: for each routed out-neighbour k, sigma_k += weight_k * x
 * and sigma_w_k += weight_k * w; x and w keep the rest (x loses exactly what
 * the totals gained, computed in double). Fills msgs[0 .. out->n) and
 * increments g->round. Returns out->n, or -ENOMEM if a new edge (a reroute)
 * could not be allocated (nothing is sent then). */
int gsp_emit(gsp_peer *g, const topo_out *out, gsp_msg *msgs);

/* Apply a message addressed to this peer: returns 1 if applied, 0 if ignored
 * (duplicate or older than one already applied: its mass is already in), or
 * -EINVAL (wrong destination, sender out of range, dim mismatch), -ENOMEM. */
int gsp_absorb(gsp_peer *g, const gsp_msg *m);

/* May the peer start round g->round (i.e. emit again)? True when every live
 * scheduled in-neighbour of round g->round - 1 - tau has delivered that round's
 * message (rounds before g->since need nothing: the first rounds, or the
 * rounds a rejoining peer missed). A peer is never held by a dead one. */
int gsp_ready(const gsp_peer *g, const topo *t, const uint8_t *alive);
/* The same, counting also messages that have arrived but are not absorbed
 * yet (a driver that absorbs at round start keeps them in an inbox). */
int gsp_ready_with(const gsp_peer *g, const topo *t, const uint8_t *alive, const gsp_msg *inbox, int n_inbox);

/* Mass this peer has sent on its out-edges and the receivers have not applied
 * yet is sigma - rho: for invariant checks the driver sums, over all edges,
 * gsp_edge_pending(sender, receiver) (sigma - rho, x into acc, w returned). */
double gsp_edge_pending(const gsp_peer *sender, const gsp_peer *receiver, double *acc_x);

/* Deep copy of a message's payload (for messages in flight). */
int gsp_msg_copy(gsp_msg *dst, const gsp_msg *src);
void gsp_msg_free(gsp_msg *m);

#endif
