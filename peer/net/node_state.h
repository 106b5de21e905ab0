/* The networked peer's state, shared by its loop (node.c: frames, timers,
 * rounds), its checkpoints (node_ckpt.c) and its log lines (node_log.c).
 * Internal to peer/net. */
#ifndef PEER_NET_NODE_STATE_H
#define PEER_NET_NODE_STATE_H

#include <uv.h>

#include "nn/nn_model.h"
#include "peer/core/round.h"
#include "peer/net/net.h"
#include "peer/net/node.h"
#include "peer/store/ckpt.h"

typedef struct node {
    const node_config *c;
    const nn_dataset *train, *test;
    node_result *r;
    uv_loop_t loop;
    net net;
    uv_work_t work;
    uv_timer_t wake_timer;      /* the pacing policy's next question */
    uv_timer_t heartbeat_timer; /* gsp_pace_tick and heartbeats */
    uv_signal_t sigint, sigterm;
    nn_model model;
    round_config cfg;
    round_plan plan;
    round_peer rp;              /* the round driver: gossip state, pacing, inbox, local step */
    uint8_t *busy;              /* per peer: its link has not taken our last frames */
    uint8_t *model_wanted;      /* asked for our model while a step was running */
    uint8_t *model_queued;      /* our model went to it and frames to it are still queued: a repeated request waits */
    uint64_t *ack_due, *ack_sent; /* per peer: the highest seq received from it, and acknowledged */
    uint64_t *ack_incarnation;  /* per peer: the sender's incarnation those seqs belong to */
    double slow_pad;            /* --slow: seconds added to each local step (0 until measured) */
    int joining, asked;         /* --resume without a checkpoint: waiting for a MODEL */
    int refreshing;             /* far behind after a long stop: waiting for a MODEL to replace its stale one */
    double asked_at, refresh_since;
    double last_ckpt;
    ckpt_run run;
    uv_work_t ckpt_work;        /* a periodic checkpoint being written on the thread pool, from the live state:
                                 * no round starts and nothing is absorbed meanwhile (node_rounds_resume after) */
    int ckpt_busy, ckpt_final, ckpt_rc;
    int finish_pending;         /* finish() came while a checkpoint was being written */
    char ckpt_err[512];
    uint8_t *out;               /* one encoded message: room for the usual ones (out_base bytes), grown for a
                                 * whole model or a SYNC and given back after it (node.c: send_push, send_model) */
    size_t out_cap, out_base;
    int computing, finished, stopping, said_done;
    int alone;                  /* waiting because every in-neighbour is lost */
    double epoch_loss, t0, round_start;
    double frame_seconds;       /* encoding and sending this peer's shares, decoding what arrives (crypto: net) */
    double wait_seconds;        /* rounds that could not start yet: waiting for neighbours */
    double wait_since;          /* when the current wait began, < 0: not waiting */
    long epoch_steps;
    int rc;
} node;

/* node_log.c: a fault-handling event (a progress line and a JSON line), a
 * round's JSON line, the push-sum ledger at the end. */
void node_event(node *n, const char *what, int peer, const char *detail);
void node_log_round(node *n, long round, float test_accuracy);
void node_log_ledger(node *n);
/* A ledger line at a resume: the checkpoint's weight and the weight it
 * resumed with (gsp_resume rescales it by a power of two). */
void node_log_resume(node *n, double w_checkpoint);

/* node_ckpt.c: periodic checkpoints (written on the thread pool), the final
 * one, and --resume. */
void node_checkpoint(node *n);
/* node.c: a checkpoint is written; the rounds go on (or the finish that waited). */
void node_rounds_resume(node *n);
void node_checkpoint_now(node *n);
void node_resume(node *n);

#endif
