/* How a peer trains and gossips, in one struct: filled once (from the
 * command line by peer/cmd, from sgp_options by libsgp), carried by both
 * drivers (node_config.peer, sim_config.peer) and read by the engine; the
 * pacing policy's own gsp_pace_config is made from it in round.c. Every
 * driver and command starts from peer_settings_defaults, so a default is
 * written once; a driver that wants another says so where it sets it.
 *
 *   peer_settings s;
 *   peer_settings_defaults(&s);          // a networked peer's: dead 5 s, round 30 s
 *   s.tau = 2, s.topology = &t;          // ... and the rest the run sets
 */
#ifndef PEER_CORE_SETTINGS_H
#define PEER_CORE_SETTINGS_H

#include "compress/cmp.h"
#include "peer/core/outer.h"
#include "peer/core/train_opts.h"
#include "topologies/topo.h"

typedef struct peer_settings {
    train_opts train;        /* model, data, optimizer, schedule, epochs, seed; train.batch is the TOTAL batch */
    const topo *topology;
    int n_peers;
    double shard_alpha;      /* <= 0 iid, else Dirichlet(alpha) over labels */
    int tau;                 /* staleness bound, rounds */
    const cmp_spec *codec;   /* NULL: uncompressed running sums in float64 */
    double step;             /* consensus step with a codec; <= 0: gsp_default_step */
    double codec_warmup;     /* epochs of DGC sparsity warm-up: topk/randk/stc/sketch/sparseloco start dense and reach
                              * their fraction F exponentially (F^((e+1)/(W+1)) in epoch e < W) */
    int local_steps;         /* H: local optimizer steps between two exchanges (1: every step) */
    int overlap;             /* a round's steps run on a model of their own beside its pacing question and
                              * absorb, and are folded in before its emit (one round of delay:
                              * gossip/GUARANTEES.md) */
    const outer_opts *outer; /* NULL or lr <= 0: none; else the outer step on each round's progress (outer.h) */
    int gather;              /* the exact sparse all-gather in place of push-sum (gossip/gsp_gather.h): needs a
                              * sparse codec, tau 0, a complete topology, no overlap and no outer step */
    float gather_decay;      /* its error feedback's decay */
    double dead_timeout;     /* seconds of silence or disconnection before a neighbour is routed around */
    double round_timeout;    /* seconds a round waits at most (the first rounds, the round-0 barrier) */
    double round_deadline;   /* > 0: seconds a round waits for a late neighbour; else derived (gsp_pace) */
    double alone_wait;       /* once every in-neighbour is lost, seconds to wait for one; <= 0: round_timeout */
    int barrier;             /* round 0 waits for every neighbour's connection */
    int reliable_links;      /* a frame sent on a link that stays up arrives (TCP: sgp peer); the simulator's
                              * may lose shares (--loss): a SYNC asked again is then sent again */
    int share_origin;        /* x0 stays as it is while the peers live (one process holds them all): their
                              * references start from it without a copy each (gsp_share_origin) */
    int gossip_threads;      /* threads for the vector loops of an emit or absorb (gossip/gsp_pool.h); 0: the
                              * host's cores. The driver makes the pool: the same floats for any number */
    struct gsp_pool *pool;   /* the driver's pool of gossip_threads, or NULL: the engine's thread alone */
    struct gsp_scratch *share_scratch; /* non-NULL: the peers run one at a time in this process and share one
                                 * codec scratch (gsp_share_scratch); its owner frees it after them */
} peer_settings;

/* A networked peer's defaults: train_opts_defaults, one local step per
 * round, iid shards, tau 0, no codec nor outer step, a dead timeout of 5 s,
 * a round timeout of 30 s, a derived round deadline; n_peers and topology
 * unset. */
void peer_settings_defaults(peer_settings *s);

#endif
