/* The exact sparse all-gather: SparseLoCo's aggregation (Sarfi et al.,
 * 2025, arXiv 2508.15706; templar's code) on sgp's transport, in place of
 * push-sum's mixing, for small clusters where every peer reaches every
 * other (a complete topology). Every peer holds the same model a; a round
 * is H local steps from a to z, then
 *
 *  e = decay e + (a - z)        error feedback on the pseudo-gradient
 *  c = codec(e);  e -= c        a sparse message (chunked top-k, 2 bits)
 *  x = a                        the local steps are gone but for c
 *
 * and c goes to every live peer (GSP_GATHER; its origin field is a's id,
 * gsp_gather_model_id, peer/wire/WIRE.md). At
 * the next round's start, once the pacing has every live peer's message of
 * the round (or gave up on a late one), each peer applies
 *
 *  a[i] -= (sum over senders s that picked i of k_s c_s[i]) / (how many picked i)
 *
 * with k_s = min(1, median norm / ||c_s||) (templar's clipping, over the
 * whole message here, not per tensor), adding in the order of the senders'
 * ids: peers that took the same messages compute the same floats, so their
 * models stay equal bit for bit. The mean over the peers that picked a
 * coordinate, not over all of them, is what puts SparseLoCo ahead of
 * plain averaging (tests/bench/README.md): a 1/R mean is what push-sum's
 * mixing computes.
 *
 * No mass moves: w stays 1 and the edges hold no reference. A message of
 * another round than the one being applied (late, or from a peer behind) is
 * dropped. So peers that took different messages (a late one, a peer that
 * died while sending, a restart) hold different models from then on: each
 * apply compares the digests of the round's messages, and a peer whose
 * model differs from that of the round's lowest sender (apart_from) takes
 * that sender's model (gsp_gather_offer) at a round boundary where both
 * mean the same round: every peer's model converges to the lowest live
 * id's, bit for bit (gossip/GUARANTEES.md, "The exact sparse all-gather").
 *
 *   gsp_peer g;
 *   gsp_init(&g, id, n_peers, dim, 0, x0);
 *   gsp_set_codec(&g, &sparseloco, seed, 1.0f);
 *   gsp_set_gather(&g, 0.9f);
 *   ... each round: the steps on g.x, gsp_emit (c on every routed edge),
 *       gsp_absorb of what arrives ...
 *   gsp_gather_apply(&g);              // at the round's start, after absorbing
 *   gsp_free(&g);
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

/* The update one apply made: x[idx[j]] -= d[j]. */
typedef struct gsp_gather_step {
    long round; /* of the messages it applied, -1: none */
    uint32_t *idx;
    float *d;
    size_t n, cap;
} gsp_gather_step;

/* How many rounds' updates a peer keeps to bring an older model forward. */
#define GSP_GATHER_HISTORY 8

typedef struct gsp_gather {
    float decay;     /* of the error feedback, [0, 1] */
    float *anchor;   /* a: the model this round's steps started from */
    float *err;      /* e */
    gsp_gather_list *list; /* n_peers of them; this peer's own message is list[id] */
    int outside;     /* the steps run outside x (gsp_gather_outside_steps): anchor is x itself */
    const float *steps_end; /* where this round's steps ended when outside x (gsp_gather_steps_at), or NULL */
    int folded, fold_bad; /* gsp_gather_fold took this round's steps in (and found a value not finite) */
    uint8_t *buf;    /* this peer's encoded message, buf_len bytes, valid until the next emit */
    size_t buf_len, buf_cap;
    uint64_t digest; /* anchor's id (gsp_gather_model_id) */
    uint64_t *chunk_ids; /* the id's work: one per chunk of GSP_CHUNK values */
    long apart_from; /* at the last apply: the lowest sender of the round's messages when its model (digest)
                      * differs from this peer's, or -1 */
    uint64_t apart;  /* messages whose model differed from this peer's, so far */
    gsp_gather_step past[GSP_GATHER_HISTORY]; /* the last applies' updates, round r's at r % GSP_GATHER_HISTORY */
    float *offer;    /* a model offered (gsp_gather_offer), or NULL */
    long offer_round; /* the round whose start it is */
    uint64_t taken, dropped; /* offers taken in, offers too old to take */
    uint64_t stale;  /* messages of another round than the one being applied: dropped */
    uint64_t applied_rounds;
} gsp_gather;

/* Use the exact sparse all-gather with error feedback decay (0 <= decay <=
 * 1; SparseLoCo's 0.95) instead of push-sum: after gsp_set_codec with a
 * sparse codec and consensus step 1, before the first message. -EINVAL
 * (no sparse codec, a step below 1, messages sent), -ENOMEM. */
int gsp_set_gather(gsp_peer *g, float decay);

/* A caller takes the local steps in a buffer of its own (libsgp without
 * overlap), not in x: x and the anchor then hold the same model all the
 * time (the round's start), so they become one array, a copy of the model
 * less, and each round's emit takes where the steps ended from
 * gsp_gather_steps_at. x's values become the anchor (as the next apply
 * would make them). */
void gsp_gather_outside_steps(gsp_peer *g);

/* This round's steps ended at z (dim floats, read by the next gsp_emit). */
void gsp_gather_steps_at(gsp_peer *g, const float *z);

/* --overlap: this round's steps ran outside x from `from` to z (dim floats
 * each) while the round before was applied: their progress goes into the
 * error feedback now, as gsp_emit would take it, and the next round's
 * steps start from the anchor plus that progress (the model applied so
 * far and the peer's own steps, whose aggregate comes one round later),
 * written into `from` and, when `handed`, into z too (a caller's buffer).
 * The next gsp_emit sends it. After gsp_gather_outside_steps. */
void gsp_gather_fold(gsp_peer *g, float *from, float *z, int handed);

/* Apply what the senders' messages (and this peer's own) bring, as above,
 * and start the next round's steps from there: anchor = x. Returns the
 * number of messages applied (the peer's own included). */
int gsp_gather_apply(gsp_peer *g);

/* A model from another peer, as it stood at the start of `round` (a peer
 * between rounds holds its last round's start: gsp_emit gives x back its
 * anchor), copied: it becomes this peer's model at this peer's emit of that
 * round, or at its next apply when it has emitted that round already,
 * brought forward by the updates this peer applied since (kept for
 * GSP_GATHER_HISTORY rounds, replayed value by value: the same floats the
 * sender computed, where both took the same messages). The round's own
 * message, relative to the old model, still counts: it is a difference.
 * An offer older than the history is dropped. -ENOMEM. */
int gsp_gather_offer(gsp_peer *g, const float *z, long round);

/* The id of the model x (dim floats) that a GATHER message carries for the
 * model its round started from (peer/wire/WIRE.md): the same at every peer
 * whatever its pool. */
uint64_t gsp_gather_model_id(gsp_peer *g, const float *x);

/* The bytes the all-gather holds. */
size_t gsp_gather_bytes(const gsp_peer *g);

/* gsp.c's part, through these (internal to gossip/). */
int gsp_gather_emit(gsp_peer *g, const topo_out *out, gsp_msg *msgs);
int gsp_gather_take(gsp_peer *g, gsp_edge *e, const gsp_msg *m);
void gsp_gather_free(gsp_peer *g);

#endif
