/* The gossip options `sgp sim` and `sgp peer` share: shards, staleness,
 * codec, consensus step, local steps, outer optimizer. They are parsed
 * straight into the peer's settings (peer/core/settings.h); gossip_opts
 * holds only what the settings point to (the parsed codec and outer
 * optimizer) and the texts they are parsed from.
 *
 *   gossip_opts g;
 *   gossip_opts_defaults(&g);                  // settings: from peer_settings_defaults
 *   static const struct option opts[] = {GOSSIP_OPTS_LONG, {0, 0, 0, 0}};  // and the command's own
 *   int c, rc;
 *   while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1)
 *       if ((rc = gossip_opts_parse(&g, &settings, cmd, c, optarg)) != CLI_NOT_MINE) {
 *           if (rc != 0) return rc;            // CLI_USAGE: a bad value, said on stderr
 *       } else ...                             // the command's own options
 *   if (gossip_opts_check(&g, &settings, cmd)) return CLI_USAGE;   // parses --codec and --outer
 */
#ifndef PEER_CMD_GOSSIP_OPTS_H
#define PEER_CMD_GOSSIP_OPTS_H

#include "compress/cmp.h"
#include "peer/core/outer.h"
#include "peer/core/settings.h"

typedef struct gossip_opts {
    const char *codec_text; /* "none" by default; "exact" = uncompressed float64 running sums */
    const char *outer_text; /* "none" by default */
    cmp_spec codec;         /* parsed by gossip_opts_check */
    outer_opts outer;       /* parsed by gossip_opts_check */
    const char *recipe;     /* NULL, or "lm" (GOSSIP_RECIPE_LM: what it sets unless given) */
    int codec_given, local_given, gather_given;
} gossip_opts;

/* --recipe lm: the language-model recipe of tests/bench/README.md (the
 * exact sparse all-gather with SparseLoCo's message and error feedback),
 * as options: the best of the settings run at 10.7M tokens of the text
 * frontier (at 1M tokens shorter rounds and decays won). */
#define GOSSIP_RECIPE_LM_CODEC "sparseloco:32"
#define GOSSIP_RECIPE_LM_DECAY 0.95f
#define GOSSIP_RECIPE_LM_LOCAL 10
#define GOSSIP_RECIPE_LM_TOPOLOGY "complete" /* sgp sim's and sgp launch's default under it */

enum { GOPT_SHARD = 1500, GOPT_TAU, GOPT_CODEC, GOPT_STEP, GOPT_CWARM, GOPT_ALONE, GOPT_LOCAL, GOPT_OUTER, GOPT_OVERLAP,
       GOPT_GTHREADS, GOPT_GATHER, GOPT_RECIPE };

#define GOSSIP_OPTS_LONG                                                                                          \
    {"shard", required_argument, 0, GOPT_SHARD}, {"tau", required_argument, 0, GOPT_TAU},                        \
        {"codec", required_argument, 0, GOPT_CODEC}, {"step", required_argument, 0, GOPT_STEP},                  \
        {"codec-warmup", required_argument, 0, GOPT_CWARM}, {"local-steps", required_argument, 0, GOPT_LOCAL},   \
        {"outer", required_argument, 0, GOPT_OUTER}, {"overlap", no_argument, 0, GOPT_OVERLAP},                  \
        {"gossip-threads", required_argument, 0, GOPT_GTHREADS}, {"gather", required_argument, 0, GOPT_GATHER},         \
        {"recipe", required_argument, 0, GOPT_RECIPE}, {                                            \
        "alone-wait", required_argument, 0, GOPT_ALONE                                                           \
    }

#define GOSSIP_OPTS_HELP                                                                                          \
    "Gossip options:\n"                                                                                           \
    "  --shard iid|dirichlet:ALPHA   how the training set is split over peers [iid]\n"                           \
    "  --tau N               staleness bound: rounds a peer may run ahead [0]\n"                                  \
    "  --codec SPEC          message codec: none, fp16, bf16, topk:F, randk:F, qsgd:S,\n"                         \
    "                        terngrad, natural, sign, stc:F, sketch:F[:C],\n"                                    \
    "                        sparseloco:K[:CHUNK][:whole|:stat] (compress/FORMAT.md), or\n"                     \
    "                        exact (uncompressed running sums in float64) [none]\n"                            \
    "  --step G              consensus step with a codec, 0 < G <= 1 [per codec, see\n"                          \
    "                        gossip/GUARANTEES.md]\n"                                                             \
    "  --codec-warmup E      sparsity warm-up (DGC): topk/randk/stc/sketch/sparseloco start dense and\n"         \
    "                        reach their fraction after E epochs [0]\n"                                           \
    "  --alone-wait S        once every in-neighbour is lost (routed around), wait this long\n"                  \
    "                        for one to come back before going on alone [the round timeout]\n"                  \
    "  --local-steps H       local optimizer steps between two exchanges [1]\n"                                   \
    "  --outer SPEC          outer optimizer on each round's local progress (DiLoCo style):\n"                    \
    "                        none, sgd:LR[:MOMENTUM] or nesterov:LR:MOMENTUM [none]\n"                          \
    "  --overlap             a round's local steps run beside the absorb of the in-neighbours'\n"               \
    "                        shares of the round before and are folded in after it (one round of\n"          \
    "                        delay: the exchange runs while the steps compute) [off]\n"                   \
    "  --gather DECAY        the exact sparse all-gather instead of push-sum (SparseLoCo): each\n"             \
    "                        round every peer's compressed pseudo-gradient, with error feedback\n"       \
    "                        of this decay (0.95), goes to every peer, and each value moves by\n"     \
    "                        the mean of the peers that picked it; every model stays the same.\n"       \
    "                        Needs a sparse --codec (sparseloco:32) and --topology complete [off]\n"  \
    "  --recipe lm           the language-model recipe: --codec sparseloco:32 --gather 0.95\n"           \
    "                        --local-steps 10 (and --topology complete in sgp sim and sgp launch);\n" \
    "                        any of them given as well wins (tests/bench/README.md) [none]\n"         \
    "  --gossip-threads N    threads for the vector loops of each emit and absorb, in chunks of\n"               \
    "                        1M values (the same result for any N); 0: the host's cores [0]\n"

/* The texts' defaults; the settings' are peer_settings_defaults'. */
void gossip_opts_defaults(gossip_opts *o);
/* CLI_OK when handled, CLI_USAGE on a bad value, CLI_NOT_MINE when c is not
 * a gossip option. */
int gossip_opts_parse(gossip_opts *o, peer_settings *s, const char *cmd, int c, const char *arg);
/* Parses the codec and outer optimizer specs into o, and points s at them;
 * CLI_USAGE (message printed) when one is bad. */
int gossip_opts_check(gossip_opts *o, peer_settings *s, const char *cmd);

#endif
