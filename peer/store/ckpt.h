/* Checkpoints of one networked peer: everything it needs to resume its place
 * in a run after a crash or a stop (peer/store/CHECKPOINT.md has the file format).
 *
 *   ckpt_run run = {.id = 3, .n_peers = 8, .dim = d, .model = "mlp:256", .codec = "stc:0.04", .seed = 1};
 *   ckpt_local parts = {.opt = &opt, .batches = &batches, .outer_velocity = NULL};
 *   ckpt_write("run/peer3.ckpt", &run, &g, &parts, err, sizeof err);   // at a round boundary
 *   ...
 *   char used[4200];
 *   int rc = ckpt_read("run/peer3.ckpt", &run, &g, &parts, used, sizeof used, err, sizeof err);
 *   // 0: restored from `used`; -ENOENT: no checkpoint at all; else err says why
 *
 * The round engine saves and loads its own local state (local_state) through
 * ckpt_save and ckpt_load (peer/core/local_step.h), which lend its parts here:
 * this file knows the format, not the engine.
 *
 * Saved: round, push-sum weight w, parameters x, the in-edges (the sender's
 * incarnation, seq, round, applied totals rho, the codec reference, a
 * pending SYNC), the optimizer's state (SGD velocity or AdamW moments), the
 * outer optimizer's velocity and the batch stream (generator state,
 * permutation, position, epoch). Without an optimizer (libsgp: the caller's
 * own optimizer keeps its state) a zero SGD velocity is saved, and without a
 * batch stream an empty one; loading without them skips the file's optimizer
 * state and accepts only an empty batch stream.
 * Out-edges are NOT saved: a restarted peer sends under a new incarnation,
 * its receivers restart those edges from zero (gossip/GUARANTEES.md, "Leave
 * and join").
 *
 * Whole or nothing (peer/store/wholefile.h): written to PATH.tmp, fsync'ed,
 * the previous PATH renamed to PATH.prev (only if it is whole itself),
 * PATH.tmp renamed to PATH, the directory fsync'ed. A BLAKE2b-256 of every
 * preceding byte ends the file, so a torn or altered file is detected;
 * ckpt_read then falls back to PATH.prev (a kill between the two renames
 * leaves only PATH.prev, which it also finds).
 */
#ifndef PEER_STORE_CKPT_H
#define PEER_STORE_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/gsp.h"
#include "nn/nn_batch.h"
#include "nn/nn_optim.h"

/* What a checkpoint must match to be restored into this run. */
typedef struct ckpt_run {
    int id, n_peers;
    size_t dim;
    const char *model, *codec; /* codec: "exact" without one */
    uint64_t seed;
    const char *cluster;        /* the cluster's name, and its digest of the name and every member's key, */
    uint8_t cluster_digest[32]; /* which tells one run from another of the same name */
} ckpt_run;

/* The local state a checkpoint keeps beside g, as plain parts; every one may
 * be NULL. Saving and loading use the same parts. */
typedef struct ckpt_local {
    nn_optimizer *opt;     /* the local optimizer; NULL: the caller steps with one of its own
                            * (written as an SGD velocity of zeros) */
    nn_batcher *batches;   /* the batch stream; NULL: an empty one is written */
    float *outer_velocity; /* the outer optimizer's momentum (g->dim floats); NULL: none */
} ckpt_local;

/* 0, or a negative errno with a one-line message. The state is streamed to
 * the file in 1 MiB blocks (no copy of it is made: it is the model times a
 * few), so g and l's parts must stay still until it returns; it may run on
 * another thread than the one that owns them while that one leaves them
 * alone (the networked peer holds its next round: peer/net/node_ckpt.c).
 * l may be NULL: no parts. */
int ckpt_write(const char *path, const ckpt_run *run, const gsp_peer *g, const ckpt_local *l, char *err,
               size_t errlen);
/* The same, as the state its run stops with: no message is absorbed or sent
 * after it, so shares its in-neighbours send while it is away are lost
 * messages for a SYNC to bring, not mass to adopt, when it resumes from it
 * (ckpt_read returns CKPT_FINAL; gossip/GUARANTEES.md, "a peer resumes"). */
int ckpt_write_final(const char *path, const ckpt_run *run, const gsp_peer *g, const ckpt_local *l, char *err,
                     size_t errlen);

/* Remove PATH, PATH.prev, PATH.tmp and PATH.resumed (those that exist): a peer that
 * handed its weight on and left has no state to come back with. 0, or a
 * negative errno with err filled. */
int ckpt_remove(const char *path, char *err, size_t errlen);

/* Restore into g (made by gsp_init + gsp_set_codec for this run, no
 * messages yet) and l's parts (initialised as for the run that wrote it;
 * NULL: none). Returns 0 and the file used, CKPT_FINAL when that is PATH
 * written by ckpt_write_final and read as such for the first time (it
 * leaves PATH.resumed beside it, removed by the next checkpoint written:
 * a run resumed from it that dies before then may have absorbed messages,
 * and comes back from it as from any checkpoint), -ENOENT when neither PATH nor
 * PATH.prev exists, or another negative errno when none is whole or they
 * belong to another run (err says which file and why; g and l's parts are
 * then unchanged). A file with an outer velocity does not restore into parts
 * without one, nor the other way round, nor one written with another
 * optimizer than l->opt's kind. */
#define CKPT_FINAL 1
int ckpt_read(const char *path, const ckpt_run *run, gsp_peer *g, const ckpt_local *l, char *used, size_t usedlen,
              char *err, size_t errlen);

#endif
