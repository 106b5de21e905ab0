/* The gossip options `sgp sim` and `sgp peer` share: shards, staleness,
 * codec and consensus step (as peer/core/train_opts.h does for training).
 *
 *   gossip_opts g;
 *   gossip_opts_defaults(&g);
 *   ... getopt_long over a table that includes GOSSIP_OPTS_LONG ...
 *       if ((rc = gossip_opts_parse(&g, cmd, c, optarg)) != 1) ...
 *   if (gossip_opts_check(&g, cmd)) return CLI_USAGE;   // parses --codec
 *   const cmp_spec *codec = gossip_opts_codec(&g);       // NULL: exact running sums
 */
#ifndef PEER_GOSSIP_OPTS_H
#define PEER_GOSSIP_OPTS_H

#include "compress/cmp.h"
#include "peer/core/outer.h"

typedef struct gossip_opts {
    double shard_alpha;     /* <= 0 iid, else Dirichlet(alpha) */
    long tau;               /* staleness bound, rounds */
    const char *codec_text; /* "none" by default; "exact" = uncompressed float64 running sums */
    double step;            /* consensus step; <= 0: gsp_default_step */
    double codec_warmup;    /* epochs of sparsity warm-up (DGC) for topk/randk/stc/sketch */
    double alone_wait;      /* seconds to wait for a lost in-neighbour once all are lost; <= 0: round timeout */
    long local_steps;       /* H: local steps between exchanges */
    const char *outer_text; /* "none" by default */
    cmp_spec codec;         /* parsed by gossip_opts_check */
    outer_opts outer;       /* parsed by gossip_opts_check */
} gossip_opts;

enum { GOPT_SHARD = 1500, GOPT_TAU, GOPT_CODEC, GOPT_STEP, GOPT_CWARM, GOPT_ALONE, GOPT_LOCAL, GOPT_OUTER };

#define GOSSIP_OPTS_LONG                                                                                          \
    {"shard", required_argument, 0, GOPT_SHARD}, {"tau", required_argument, 0, GOPT_TAU},                        \
        {"codec", required_argument, 0, GOPT_CODEC}, {"step", required_argument, 0, GOPT_STEP},                  \
        {"codec-warmup", required_argument, 0, GOPT_CWARM}, {"local-steps", required_argument, 0, GOPT_LOCAL},   \
        {"outer", required_argument, 0, GOPT_OUTER}, {                                                            \
        "alone-wait", required_argument, 0, GOPT_ALONE                                                           \
    }

#define GOSSIP_OPTS_HELP                                                                                          \
    "Gossip options:\n"                                                                                           \
    "  --shard iid|dirichlet:ALPHA   how the training set is split over peers [iid]\n"                           \
    "  --tau N               staleness bound: rounds a peer may run ahead [0]\n"                                  \
    "  --codec SPEC          message codec: none, fp16, bf16, topk:F, randk:F, qsgd:S,\n"                         \
    "                        terngrad, natural, sign, stc:F, sketch:F[:C] (compress/FORMAT.md),\n"               \
    "                        or exact (uncompressed running sums in float64) [none]\n"                        \
    "  --step G              consensus step with a codec, 0 < G <= 1 [per codec, see\n"                          \
    "                        gossip/GUARANTEES.md]\n"                                                             \
    "  --codec-warmup E      sparsity warm-up (DGC): topk/randk/stc/sketch start dense and reach\n"               \
    "                        their fraction after E epochs [0]\n"                                                 \
    "  --alone-wait S        once every in-neighbour is lost (routed around), wait this long\n"                  \
    "                        for one to come back before going on alone [the round timeout]\n"                  \
    "  --local-steps H       local optimizer steps between two exchanges [1]\n"                                   \
    "  --outer SPEC          outer optimizer on each round's local progress (DiLoCo style):\n"                    \
    "                        none, sgd:LR[:MOMENTUM] or nesterov:LR:MOMENTUM [none]\n"

void gossip_opts_defaults(gossip_opts *o);
/* 1 if c is not a gossip option, 0 when handled, CLI_USAGE on a bad value. */
int gossip_opts_parse(gossip_opts *o, const char *cmd, int c, const char *arg);
/* Parses the codec and outer optimizer specs; CLI_USAGE (message printed)
 * when one is bad. */
int gossip_opts_check(gossip_opts *o, const char *cmd);
const cmp_spec *gossip_opts_codec(const gossip_opts *o);

#endif
