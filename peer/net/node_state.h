/* The networked peer's state, shared by its loop (node.c: frames, timers,
 * rounds), its checkpoints (node_ckpt.c) and its log lines (node_log.c).
 * Internal to peer/net. */
#ifndef PEER_NET_NODE_STATE_H
#define PEER_NET_NODE_STATE_H

#include <sodium.h>
#include <uv.h>

#include "nn/nn_model.h"
#include "peer/core/engine.h"
#include "peer/net/net.h"
#include "peer/net/node.h"
#include "peer/store/ckpt.h"

struct node {
    const node_config *c;
    const nn_dataset *train, *test;
    node_result *r;
    uv_loop_t loop;
    net net;
    uv_work_t work;
    uv_timer_t timer;           /* the engine's wake time: heartbeats, deadlines, retries */
    uv_signal_t sigint, sigterm;
    nn_model model;
    peer_settings settings;    /* the caller's, with the cluster's size and the barrier */
    round_plan plan;
    engine *e;                  /* every decision: gossip state, pacing, inbox, local step, reactions */
    struct gsp_pool *pool;      /* the vector loops' threads (settings.pool) */
    double slow_pad;            /* --slow: seconds added to each local step (0 until measured) */
    ckpt_run run;
    uv_work_t ckpt_work;        /* a periodic checkpoint being written on the thread pool, from the live state:
                                 * the engine is held at its boundary meanwhile (node_rounds_resume after) */
    int ckpt_busy, ckpt_final, ckpt_rc;
    int finish_pending;         /* the engine finished while a checkpoint was being written */
    int finish_goodbye;         /* what the pending finish says last (engine_event.goodbye) */
    char ckpt_err[512];
    uv_work_t eval_work;        /* an epoch's evaluation on the thread pool (node_eval.c): the engine is held at
                                 * its boundary meanwhile, and MODEL requests wait (they would write z) */
    int eval_busy, eval_checkpoint;
    long eval_round;
    float eval_loss, eval_acc;
    uint8_t *eval_deferred;     /* per peer: a MODEL_REQUEST that arrived during the evaluation */
    uv_work_t origin_work;      /* the run's starting model being drawn ahead on the thread pool (node_origin.c) */
    int origin_busy;
    float *origin_buf;
    int (*origin_fill)(void *ctx, float *dst);
    void *origin_ctx;
    size_t origin_dim;
    char *origin_path;          /* a caller's starting parameters, written beside the checkpoint (node_origin.c) */
    int closed;                 /* the loop's handles are closing */
    double epoch_loss, t0, round_start;
    double step_seconds;        /* the local steps' (on the thread pool; the caller's own are not counted) */
    double gossip_seconds;      /* the engine's inputs: absorbing, emitting, pacing (the engine reads no clock) */
    double frame_seconds;       /* encoding and sending this peer's shares, decoding what arrives (crypto: net) */
    long epoch_steps;
    struct node_members {
        uint64_t told;          /* the member list's version this neighbour was told (0: none) */
        uint64_t refused;       /* entries and revocations of it refused */
    } *members;                 /* by peer (node_members.c) */
    int land_peer;              /* the neighbour whose MODEL is being written into x as it arrives, or -1 */
    float *land_x;              /* ...where (engine_model_landing) */
    crypto_generichash_state land_hash; /* ...its payload's hash so far */
    long models_landed;         /* MODELs written whole where they arrived (the engine then took or refused each) */
    int rc;
    int listen_rc;              /* the listener's bind gave up (net.h on_listen_failed): why */
};

/* node.c: after every input, act on what the engine queued; the step is
 * done (emit, the boundary); stop; close with a goodbye
 * (engine_event.goodbye). */
void node_pump(node *n);
void node_step_done(node *n);
/* An input to the engine that started at `since` is over: its time is the
 * peer's gossip time. */
void node_engine_time(node *n, double since);
void node_close(node *n, int goodbye);

/* node_send.c: one frame the engine queued, encoded and sent. */
void node_send_frame(node *n, const engine_send *s);
/* node_recv.c: the transport's callbacks (frames in, links up and down). */
void node_net_callbacks(net_callbacks *cb);
/* node_members.c: tell the neighbours that have not heard the member
 * list's latest version (WIRE.md "Members"); a neighbour down is told again
 * when it is up; a MEMBERS of peer taken in (and what is news passed on). */
void node_members_flush(node *n);
void node_members_down(node *n, int peer);
void node_members_in(node *n, int peer, const wire_msg *m);
/* node_step.c: a round has started: its steps on the thread pool, or the stepper's. */
void node_start_step(node *n);

/* node_origin.c: while a neighbour is lost, the run's starting model is
 * drawn on the thread pool for the edge that starts next (gsp_origin_ahead). */
void node_origin_ahead(node *n);
/* A caller's starting parameters x0 (dim floats) into CHECKPOINT.origin, and
 * the engine's origin made again from it where an edge starts after the
 * copy went (gsp_set_origin_fill; edges: the schedule's). 0 or a negative
 * errno (then nothing is written and the copy stays). */
int node_origin_file(node *n, const float *x0, size_t dim, int edges);
/* The file goes (every start writes it again). */
void node_origin_file_remove(node *n);

/* node_log.c: a fault-handling event (a progress line and a JSON line), an
 * epoch's line (its evaluation: node_eval.c), a round's JSON line, the
 * push-sum ledger at the end. */
void node_log_epoch(node *n, long epoch, float loss, float acc);
void node_event(node *n, const char *what, int peer, const char *detail);
void node_log_round(node *n, long round, float test_accuracy);
void node_log_ledger(node *n);
/* A ledger line at a resume: the checkpoint's weight and the weight it
 * resumed with (gsp_resume rescales it by a power of two). */
void node_log_resume(node *n, double w_checkpoint);
/* The memory by part at the end (a libsgp peer has no summary file to put it in). */
void node_log_memory(node *n, const mem_parts *m);

/* node_eval.c: an epoch's evaluation on the thread pool at the round
 * boundary it ends (round: that boundary's; checkpoint: whether one is due
 * there), then the rest of the boundary (node_boundary_done); MODEL
 * requests that arrive meanwhile wait for it (node_eval_defers). Returns 1
 * when it was all done at once (on the loop) and the engine went on. */
int node_evaluate(node *n, long round, int checkpoint);
int node_eval_defers(node *n, int peer);
/* node.c: a boundary's round line, its checkpoint or the next round; 1 when
 * the engine went on (its events are to be polled). */
int node_boundary_done(node *n, long round, float acc, int checkpoint);

/* node_ckpt.c: periodic checkpoints (written on the thread pool), the final
 * one, and --resume. */
void node_checkpoint(node *n);
/* The peer left (engine_left): remove its checkpoint, which holds weight now its neighbours'. */
void node_forget_checkpoint(node *n);
/* node.c: a checkpoint is written; the rounds go on (or the finish that waited). */
void node_rounds_resume(node *n);
void node_resume(node *n);

#endif
