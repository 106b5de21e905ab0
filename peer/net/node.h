/* One networked SGP peer: the round driver (peer/core/round.h) on real sockets.
 *
 *   node_config c;
 *   node_config_defaults(&c);            // then: cluster, id, key, topology, data, codec, ...
 *   node_result r;
 *   int rc = node_run(&c, &train, &test, &r, err, sizeof err);   // returns when training is done or stopped
 *
 * The arithmetic is exactly the simulator's (same seeds, shards, local step,
 * codec seeds, and with tau = 0 the same absorb rule: at the start of round r
 * the messages of earlier rounds, in (sender, seq) order), so a synchronous
 * run gives the model `sgp sim` gives. Threads: the libuv loop owns the
 * gossip state and the sockets; each local step runs on libuv's thread pool
 * (uv_queue_work) while the loop keeps receiving. Between queue_work and its
 * completion only the worker touches x (the loop only appends to the inbox),
 * so nothing is shared at the same time and no lock is needed.
 *
 * Faults (gossip/GUARANTEES.md "Stragglers, leave and join" has the rules):
 * heartbeats keep every connection audible; a neighbour silent or
 * disconnected for dead_timeout is routed around; a round waits for a late
 * neighbour only until a deadline derived from recent round times, after
 * which that neighbour is not waited for until it is on time again; a peer
 * far behind the rounds it hears jumps to them; checkpoints are periodic and
 * on SIGTERM; --resume restores one or pulls the model from a neighbour.
 */
#ifndef PEER_NET_NODE_H
#define PEER_NET_NODE_H

#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "compress/cmp.h"
#include "nn/nn_data.h"
#include "nn/nn_model.h"
#include "peer/core/memory.h"
#include "peer/core/outer.h"
#include "peer/config/cluster.h"
#include "peer/config/credential.h"
#include "peer/core/settings.h"
#include "peer/wire/sec.h"
#include "topologies/topo.h"

typedef struct node node; /* a running peer, as a stepper sees it (below) */

/* What a caller that steps itself may show between steps (sgp_status). */
typedef struct node_status {
    int id, peers;
    long round, start_round, local_steps;
    double weight;
    int neighbours, neighbours_alive;
    uint64_t bytes_sent, bytes_received, messages_sent, messages_absorbed;
    long late_marks, catch_ups, neighbours_lost, checkpoints;
    int ended;              /* the loop is over */
} node_status;

/* Who takes each round's local steps, when not the node itself (sgp peer:
 * node_config.stepper NULL, the steps of train.model on this peer's shard
 * run on libuv's thread pool). A stepper is a caller with a training loop
 * of its own (libsgp's hand-off, peer/lib/handoff.h): node_run takes its
 * parameters and run length, hands it each round's model, and takes its
 * step back through the node_* calls below. Its callbacks run on the
 * loop's thread. */
typedef struct node_stepper {
    void *ctx;
    const float *x0;        /* the parameters to start from */
    size_t dim;
    long rounds, rounds_per_epoch;
    /* The loop is up: open what the caller wakes it with (it keeps n). 0 or a negative errno. */
    int (*open)(void *ctx, node *n, uv_loop_t *loop);
    /* The loop is closing its handles: no more wakes. */
    void (*close)(void *ctx);
    /* A round has started: its model goes to the caller (node_model_to) when it waits for one. */
    void (*give)(void *ctx, node *n);
    /* The checkpoint the caller asked for is written (rc: 0 or a negative errno). */
    void (*checkpointed)(void *ctx, int rc);
    /* node_run is over (or refused before its loop ran): rc, why, the final model (NULL: none) and the
     * last status. */
    void (*end)(void *ctx, int rc, const char *err, const float *model, const node_status *s);
} node_stepper;

/* For a stepper, on the loop's thread: */
void node_status_of(const node *n, node_status *s);
/* A round is out with the caller (its step is awaited). */
int node_holding(const node *n);
/* The round's model z = x / w into z (dim floats). */
void node_model_to(const node *n, float *z);
/* The caller is back with its step from the model handed out (z, the
 * loop's until the next model is written into it). */
void node_step_taken(node *n, float *z);
/* Stop: checkpoint, GOODBYE "stopped" (leave: the weight to the neighbours first). */
void node_stop(node *n);
/* Write a checkpoint now (stepper->checkpointed says how it went). */
void node_checkpoint_now(node *n);

typedef struct node_config {
    peer_settings peer;    /* training and gossip, as sgp sim's (n_peers: the cluster's; barrier: unless
                            * resume) */
    const cluster *cluster;
    const sec_keypair *key;
    int id;
    const char *checkpoint; /* checkpoint file (peer/store/ckpt.h), or NULL for none */
    double checkpoint_every; /* seconds between periodic checkpoints; <= 0: only when stopping */
    int resume;            /* restore from the checkpoint; without one, pull the model from a neighbour */
    const uint8_t *credential; /* this peer takes a vacant slot with this credential (SEC_CRED_BYTES, WIRE.md
                            * "Joining"): it dials in and joins (resume without a checkpoint); NULL: none */
    const revocation *revocations; /* refused at a joiner's handshake and passed on (checked already) */
    size_t n_revocations;
    const char *listen_host; /* listen at listen_host:listen_port (an IP address) instead of the file's address,
                              * and announce it (WIRE.md "Members"); NULL: the file's (a joiner: nowhere) */
    unsigned listen_port;
    int leave_on_signal;   /* SIGTERM, SIGINT: leave (engine_leave: the weight goes to the neighbours, the
                            * checkpoint is removed) instead of a stop that keeps it for --resume */
    double slow;           /* experiments: each local step takes this many times its compute time (>= 1) */
    FILE *log;             /* JSON lines per round, or NULL */
    FILE *progress;        /* per-epoch lines, or NULL */
    const node_stepper *stepper; /* NULL: the node trains train.model on its shard; else the caller's own
                            * training loop takes each local step and node_run gets no data sets */
    nn_model *model;       /* NULL: node_run builds the model; else the one node_model built for this
                            * config (a caller that checks it before starting), which node_run takes
                            * and hands back as its shape (nn_model_keep_shape: what a model file's
                            * header needs); the caller frees it */
} node_config;

typedef struct node_result {
    long rounds;
    float test_accuracy, test_loss; /* this peer's own de-biased model */
    float train_loss;
    uint64_t bytes_sent, bytes_received, messages_sent, messages_absorbed, send_refused;
    double mean_staleness, wall_seconds;
    size_t parameters;
    float *model; /* z at the end, owned */
    double weight; /* w at the end: the launcher's average model is sum w z / sum w = sum x / sum w */
    long local_steps;            /* rounds computed here (catching up skips rounds) */
    long neighbours_lost, late_marks, catch_ups, checkpoints;
    long refreshes;              /* catch-ups long enough to take a neighbour's model */
    long syncs_sent;             /* SYNCs sent in answer to a NACK (a compressed edge's gap) */
    long start_round;            /* 0, or the round it resumed or joined at */
    /* Where the wall time went (seconds): local steps, gossip CPU (absorb,
     * emit), framing and crypto, waiting for neighbours, and the rest. The
     * step runs beside the loop, so the parts may overlap a little. Big
     * frames are sealed and opened on the thread pool: frame_pool_seconds,
     * beside the loop and not one of the parts. */
    double step_seconds, gossip_seconds, frame_seconds, wait_seconds, idle_seconds, frame_pool_seconds;
    /* The largest buffer a message in pieces was put together in (a joiner's
     * MODEL is written into its x instead: models_landed). */
    size_t message_buffer_peak;
    long models_landed;
    mem_parts memory; /* by part, when the last round was done (before the connections close) */
} node_result;

void node_config_defaults(node_config *c);
/* The model node_run trains for this config (cluster and settings set):
 * parameters drawn from the seed or read from --init, buffers for the
 * node's batches. 0, or a negative errno (-EINVAL: a spec or file that does
 * not fit the data) with a one-line message. */
int node_model(const node_config *c, const nn_dataset *train, nn_model *m, char *err, size_t errlen);
/* 0, or a negative errno with a one-line message. SIGINT/SIGTERM stop it
 * cleanly (goodbye to the neighbours, every handle closed). */
int node_run(const node_config *c, const nn_dataset *train, const nn_dataset *test, node_result *r, char *err,
             size_t errlen);
void node_result_free(node_result *r);

#endif
