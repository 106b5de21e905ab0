/* The exact sparse all-gather: SparseLoCo's aggregation (Sarfi et al.,
 * 2025, arXiv 2508.15706; templar's code) on sgp's transport, in place of
 * push-sum's mixing, for small clusters where every peer reaches every
 * other (a complete topology). Every peer holds the same model a; a round
 * is H local steps from a to z, then
 *
 *   e = decay e + (a - z)        error feedback on the pseudo-gradient
 *   c = codec(e);  e -= c        a sparse message (chunked top-k, 2 bits)
 *   x = a                        the local steps are gone but for c
 *
 * and c goes to every live peer (GSP_GATHER; its origin field is a's id,
 * the FNV-1a of its bytes that the origin id uses, peer/wire/WIRE.md). At the next round's start, once the pacing has every live peer's
 * message of the round (or given up on a late one), each peer applies
 *
 *   a[i] -= (sum over senders s that picked i of k_s c_s[i]) / (how many picked i)
 *
 * with k_s = min(1, median norm / ||c_s||) (templar's clipping, over the
 * whole message here, not per tensor), adding in the order of the senders'
 * ids: peers that took the same messages compute the same floats, so their
 * models stay equal bit for bit. The mean over the peers that picked a
 * coordinate, not over all of them, is what puts SparseLoCo ahead of
 * plain averaging (tests/bench/README.md): a 1/R mean is what push-sum's
 * mixing computes.
 *
 * No mass moves: w stays 1 and the edges hold no reference. A message that
 * arrives after its round was applied is applied with the next round's; a
 * peer whose messages' digest differs from its own for the same round (a
 * late message, a restart, a model taken in) is counted in apart_from
 * (gossip/GUARANTEES.md, "Exact sparse all-gather", says what the driver
 * does then).
 *
 *   gsp_init(&g, ...); gsp_set_codec(&g, &sparseloco, seed, 1.0f);
 *   gsp_set_gather(&g, 0.95f);
 *   ... gsp_emit sends c on every routed edge; gsp_absorb keeps what arrives;
 *   gsp_gather_apply(&g);              // at the round's start, after absorbing
 */
#ifndef GOSSIP_GSP_GATHER_H
#define GOSSIP_GSP_GATHER_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/gsp.h"

/* One sender's entries waiting for the next apply. */
typedef struct gsp_gather_list {
    uint32_t *idx;
    float *val;
    size_t n, cap;
    long round;      /* of its (last) message, -1: none */
    uint64_t digest; /* of the model that message's steps started from */
} gsp_gather_list;

typedef struct gsp_gather {
    float decay;     /* of the error feedback, [0, 1] */
    float *anchor;   /* a: the model this round's steps started from */
    float *err;      /* e */
    float *sum;      /* per position: the clipped values of the senders that picked it (zero between applies) */
    uint16_t *count; /* and how many (zero between applies) */
    gsp_gather_list *list; /* n_peers of them; this peer's own message is list[id] */
    uint8_t *buf;    /* this peer's encoded message, buf_len bytes, valid until the next emit */
    size_t buf_len, buf_cap;
    uint64_t digest; /* anchor's id (gsp_model_id) */
    long apart_from; /* the lowest sender whose message disagreed with this peer's model at the last apply
                      * (same round, other digest), or -1 */
    uint64_t apart;  /* messages that disagreed so far */
    uint64_t applied_rounds;
} gsp_gather;

/* Use the exact sparse all-gather with error feedback decay (0 <= decay <=
 * 1; SparseLoCo's 0.95) instead of push-sum: after gsp_set_codec with a
 * sparse codec and consensus step 1, before the first message. -EINVAL
 * (no sparse codec, a step below 1, messages sent, above 65,535 peers),
 * -ENOMEM. */
int gsp_set_gather(gsp_peer *g, float decay);

/* Apply what the senders' messages (and this peer's own) bring, as above,
 * and start the next round's steps from there: anchor = x. Returns the
 * number of messages applied (the peer's own included). */
int gsp_gather_apply(gsp_peer *g);

/* The bytes the all-gather holds. */
size_t gsp_gather_bytes(const gsp_peer *g);

/* gsp.c's part, through these (internal to gossip/). */
int gsp_gather_emit(gsp_peer *g, const topo_out *out, gsp_msg *msgs);
int gsp_gather_take(gsp_peer *g, gsp_edge *e, const gsp_msg *m);
void gsp_gather_free(gsp_peer *g);

#endif
