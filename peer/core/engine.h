/* The peer engine: every decision of an SGP peer, sans I/O. The networked
 * peer (peer/net/node.c) and the simulator (peer/sim/sim.c) are its two
 * drivers: they feed it what happened (a frame from a neighbour, a link
 * going up, down or busy, the clock, a local step finished) and carry out
 * what it queues (frames to send, a step to compute, a wake time, events).
 * Nothing in here calls back into a driver, reads a clock or touches a
 * socket; so a finding in the simulator holds for real peers by
 * construction, and each rule has a unit test on virtual time
 * (tests/unit/test_peer_engine.c). The rules and their reasons are in
 * gossip/GUARANTEES.md; the round's computation is round.h's.
 *
 *   engine *e;
 *   engine_new(&e, &settings, &plan, id, train, x0, dim, incarnation, now, err, sizeof err);
 *   engine_advance(e, now);                  // the engine starts held at round 0
 *   for (;;) {
 *       ... feed what happened: engine_push / _ack / _heartbeat / _nack / _goodbye / _model_request / _model_soon /
 *           _model / _link_up / _link_down / _timer (at engine_wake_at) / _step_done ...
 *       engine_send s;
 *       while (engine_poll_send(e, &s)) {    // frames, valid until the next engine call
 *           int rc = send_frame(&s);          // encode and send s
 *           if (rc < 0) engine_unsent(e, &s, rc, now);    // a refused one
 *       }
 *       engine_event v;
 *       while (engine_poll_event(e, &v))
 *           switch (v.kind) {
 *           case ENGINE_STEP:      // compute the round's steps (any thread), then say so
 *               engine_compute_step(e, &model);
 *               engine_step_done(e, now);
 *               break;                        // (or hand engine_model_to's model to a caller who steps
 *                                             // itself, and engine_step_taken with its step)
 *           case ENGINE_BOUNDARY:  // the round is emitted, the model is the next round's
 *               ... evaluate, log, checkpoint ...
 *               engine_advance(e, now);       // nothing starts until then
 *               break;
 *           case ENGINE_LOG:
 *               printf("%s %d %s\n", engine_log_text(v.log), v.peer, v.detail);
 *               break;
 *           case ENGINE_FINISHED:  // close (v.goodbye: what to say last on every connection)
 *           default: ...
 *           }
 *   }
 *   engine_free(e);
 *
 * With settings.overlap a round's STEP comes first and its pacing
 * question and absorb run beside the steps (which then touch a model of
 * their own, not x); the steps are folded in and the round emitted once
 * both are done (gossip/GUARANTEES.md). A caller stepping itself gets the
 * next STEP before that emit, which follows at the next engine call
 * (engine_wake_at says now): the drivers see the same events in another
 * order.
 *
 * The engine is opaque: drivers see it through the getters below (its
 * round, its state, read-only views of the model and of the pacing) and
 * tell it things only through its inputs. It reads no clock: every input
 * carries the driver's `now`, and the drivers time the work they hand it.
 */
#ifndef PEER_CORE_ENGINE_H
#define PEER_CORE_ENGINE_H

#include <stdint.h>

#include "peer/core/round.h"

typedef enum engine_send_kind {
    ENGINE_PUSH,          /* a share, a SYNC or RAW totals: msg */
    ENGINE_ACK,           /* seq: we hold the peer's messages up to seq, in order */
    ENGINE_NACK,          /* seq: the same, and we want the rest: the peer answers with a SYNC from there */
    ENGINE_HEARTBEAT,     /* round: ours */
    ENGINE_GOODBYE,       /* done: what it says (ENGINE_BYE_*) */
    ENGINE_MODEL_REQUEST, /* we want the peer's model (joining, or far behind) */
    ENGINE_MODEL,         /* model (dim floats) and round: the round the asker enters at */
    ENGINE_MODEL_SOON,    /* round: ours; our MODEL to the peer that asked follows (when the step is done) */
} engine_send_kind;

/* A GOODBYE's word (WIRE.md: "stopped", "done", "seen"): stopped (routed
 * around at once), finished every round, or the answer to a "stopped": the
 * shares sent to its sender before it are all on their way. */
enum { ENGINE_BYE_STOPPED = 0, ENGINE_BYE_DONE = 1, ENGINE_BYE_SEEN = 2 };

typedef struct engine_send {
    engine_send_kind kind;
    int peer;
    gsp_msg msg;        /* PUSH: points into the gossip state, valid until the next engine call */
    uint64_t seq;       /* ACK, NACK */
    long round;         /* HEARTBEAT, MODEL, MODEL_SOON */
    int done;           /* GOODBYE: ENGINE_BYE_STOPPED, ENGINE_BYE_DONE or ENGINE_BYE_SEEN */
    const float *model; /* MODEL: valid until the next engine call; the values to send are model[i] * scale */
    float scale;        /* MODEL: z = x / w made where it is sent (x and 1 / w), never stored beside x */
    size_t dim;         /* MODEL, MODEL_REQUEST */
} engine_send;

typedef enum engine_event_kind {
    ENGINE_STEP,     /* a round has started: compute its local steps (engine_compute_step), then engine_step_done */
    ENGINE_BOUNDARY, /* round `round` is emitted; held until engine_advance */
    ENGINE_DONE,     /* every round is done; the peer stays for its in-neighbours' last shares */
    ENGINE_FINISHED, /* close now: rc (< 0: failed), goodbye (-1: none, 0: "stopped", 1: "done") */
    ENGINE_LOG,      /* a fault-handling event: log, peer (-1: none), detail ("" : none) */
} engine_event_kind;

/* What an ENGINE_LOG says; its words are engine_log_text's (one table, in
 * engine.c), which the drivers print after the peer and round. */
typedef enum engine_log {
    ENGINE_LOG_NEIGHBOUR_BACK,       /* peer: heard again after a silence */
    ENGINE_LOG_NEIGHBOUR_RECONNECTED,
    ENGINE_LOG_NEIGHBOUR_DONE,       /* peer: its GOODBYE "done" */
    ENGINE_LOG_NEIGHBOUR_GOODBYE,    /* peer: its GOODBYE "stopped" */
    ENGINE_LOG_ROUTING_AROUND,       /* peer, detail: why it is taken for gone */
    ENGINE_LOG_NOT_WAITING_FOR_LATE, /* peer */
    ENGINE_LOG_ALL_IN_LOST,
    ENGINE_LOG_ISOLATED,             /* no in-neighbour heard: shares stay home */
    ENGINE_LOG_HEARING_AGAIN,
    ENGINE_LOG_CATCHING_UP,          /* detail: from where to where */
    ENGINE_LOG_REFUSED,              /* peer, detail: why, and how many so far */
    ENGINE_LOG_NO_CHECKPOINT,        /* it comes back without state: it will pull a model */
    ENGINE_LOG_FAR_BEHIND,           /* it will pull a neighbour's model */
    ENGINE_LOG_MODEL_ASKED,          /* peer: asked for its model */
    ENGINE_LOG_MODEL_SENT,           /* peer: our model went to it */
    ENGINE_LOG_PROMISE_BROKEN,       /* peer, detail: its MODEL_SOON was not kept in time */
    ENGINE_LOG_MODEL_NOT_FINITE,     /* peer: its model was refused */
    ENGINE_LOG_MODEL_BAD_HASH,       /* peer: its model was refused */
    ENGINE_LOG_MODEL_TAKEN,          /* peer: a refresh took its model */
    ENGINE_LOG_JOINED,               /* peer: the join took its model */
    ENGINE_LOG_NO_MODEL,             /* no neighbour sent a model in time: it goes on with its own */
    ENGINE_LOG_DIVERGED,             /* detail: where the model was not finite */
    ENGINE_LOG_TOO_LARGE,            /* peer: a message for it no frame can hold */
    ENGINE_LOG_LEAVING,              /* detail: whom it did not wait for */
    ENGINE_LOG_APART,                /* peer: --gather: our model differs from the round's lowest sender's */
    ENGINE_LOG_HANDED_OFF,           /* detail: the weight it left, and to whom */
    ENGINE_LOG_LEFT_WITH_WEIGHT,     /* detail: why its weight leaves with it */
    ENGINE_LOG_KINDS
} engine_log;

const char *engine_log_text(engine_log log);

typedef struct engine_event {
    engine_event_kind kind;
    long round;
    int rc, goodbye;
    int checkpoint;      /* BOUNDARY: checkpoint_every has passed since the last one */
    engine_log log;
    int peer;
    char detail[96];
} engine_event;

typedef struct engine engine;

/* The round (round_peer_init) and the engine around it, held before round
 * 0, for a process of peer `id` that started as `incarnation` (a number
 * that grows with every start of the peer: its messages of an earlier one
 * are stale). train NULL: no shard and no local optimizer (a caller that
 * steps itself: engine_set_caller_steps). 0 and *out, or a negative errno with a message. */
int engine_new(engine **out, const peer_settings *c, const round_plan *plan, int id, const nn_dataset *train,
               const float *x0, size_t dim, uint64_t incarnation, double now, char *err, size_t errlen);
void engine_free(engine *e);

/* ---- before the first advance ----------------------------------------------- */

/* > 0: BOUNDARY events say when a checkpoint is due (every `seconds`). */
void engine_set_checkpoint_every(engine *e, double seconds);
/* The caller takes the local steps itself (libsgp; train NULL): each STEP's
 * model goes to it and its step comes back (engine_step_taken), the outer
 * step brackets them, and a stop needs no wait. */
void engine_set_caller_steps(engine *e);
/* The run's starting model can be drawn again (gsp_set_origin_fill). */
int engine_set_origin_fill(engine *e, int (*fill)(void *ctx, float *dst), void *ctx, int edges);

/* Where a checkpoint is read into before engine_come_back: the gossip state
 * and the local optimizer's. */
void engine_state_to_load(engine *e, gsp_peer **g, local_state **local);

typedef enum engine_comeback {
    ENGINE_WITH_STATE,    /* the state it had: a checkpoint loaded, or the simulator's peer kept over a crash */
    ENGINE_WITH_FINAL_STATE, /* the state its run stopped with (a final checkpoint): nothing absorbed after it */
    ENGINE_WITHOUT_STATE, /* none (a --resume without a checkpoint, a rejoin from nothing): pull a neighbour's
                           * model first; fail after round_timeout without one */
} engine_comeback;

/* A peer that ran before comes back, the one sequence both drivers make.
 * As a process of another incarnation than the engine's (the simulator's
 * crashed peer): its out-edges start again from zero, its pacing afresh
 * with no round-0 barrier. Then, with its state: gsp_resume (the weight
 * renormalised by a power of two, in-edges adopt totals after a gap unless
 * the state is final); or
 * without: a join. 0, or a negative errno. */
int engine_come_back(engine *e, engine_comeback how, uint64_t incarnation, double now);
/* The process died (the simulator's crash): nothing more comes out until
 * engine_come_back; returns how many arrived messages died with it. */
int engine_crash(engine *e);

/* ---- inputs ----------------------------------------------------------------- */

/* A PUSH from m->src; the engine takes the message over. */
int engine_push(engine *e, gsp_msg *m, double now);
void engine_ack(engine *e, int peer, uint64_t seq, double now);
void engine_heartbeat(engine *e, int peer, long round, double now);
void engine_nack(engine *e, int peer, uint64_t seq, double now);
/* done: ENGINE_BYE_*; a "stopped" is answered with a "seen" */
void engine_goodbye(engine *e, int peer, int done, double now);
void engine_model_request(engine *e, int peer, double now);
/* The neighbour asked for its model says it follows when its step is done. */
void engine_model_soon(engine *e, int peer, double now);
/* A MODEL send's dim values, model[i] * scale, into dst (a driver that
 * carries them as floats: the simulator's link, the reference loop). */
void engine_model_values(const engine_send *s, float *dst);
/* A MODEL of round `round`; intact: its bytes matched their hash. */
void engine_model(engine *e, int peer, long round, const float *z, int intact, double now);
/* Where a MODEL may be written as it arrives, NULL where nowhere: a
 * joiner's x, which nothing reads until a whole model is taken (then z is
 * x itself); a driver writes one MODEL at a time there. */
float *engine_model_landing(engine *e);
void engine_link_up(engine *e, int peer, double now);
/* Part of a frame from peer arrived (a big one takes seconds): a sign of
 * life, as a whole frame is. */
void engine_link_progress(engine *e, int peer, double now);
void engine_link_down(engine *e, int peer, double now);
/* The transport's view of the link, before an input that may send. */
void engine_link_state(engine *e, int peer, int busy, int sending);
/* engine_wake_at has come (heartbeats, deadlines, retries). */
void engine_timer(engine *e, double now);
/* The STEP's local steps (round_step): on any thread, while the engine is
 * computing (it then touches nothing they read or write). Returns their mean
 * loss. */
float engine_compute_step(engine *e, nn_model *model);
/* The STEP's computation is done: emit the round's shares, then hold at its
 * BOUNDARY. */
void engine_step_done(engine *e, double now);
/* A caller that steps itself (engine_set_caller_steps) is back from the STEP's model
 * (engine_model_to) with z: x moves by w times its step, as a local step
 * moves it, the outer step closes the round's, and engine_step_done. z is
 * the engine's until the next STEP's model is written into it (with
 * overlap the outer step is taken there, in place). */
void engine_step_taken(engine *e, float *z, double now);
/* Go on from a BOUNDARY (or from the hold engine_new leaves). */
void engine_advance(engine *e, double now);
/* Stop: absorb, GOODBYE "stopped"; now, or when the running step is done
 * (a caller's step is its own: no wait). */
void engine_stop(engine *e, double now);
/* Leave on purpose: a stop that first hands all of the peer's push-sum mass
 * to its live neighbours (gsp_hand_off: one PUSH each, before GOODBYE
 * "stopped"), so that the run keeps its weight. With nobody to take it (no
 * neighbour connected and heard), --gather (no mass moves) or no model yet
 * (joining) it is a stop. */
void engine_leave(engine *e, double now);
/* q's slot is vacant (a cluster file's `slots`, CLUSTER.md): routed around
 * from the start, not awaited by round 0, until a peer that takes it
 * connects (engine_link_up brings it in as any neighbour that comes back). */
void engine_absent(engine *e, int q);
/* A PUSH of a later incarnation than this is refused: the driver's clock
 * allows no such run yet (UINT64_MAX, the default: none is). */
void engine_set_incarnation_max(engine *e, uint64_t max);
/* A copy of the run's starting model drawn ahead (gsp_origin_ahead: taken over). */
void engine_origin_ahead(engine *e, float *drawn);

/* After the run (the simulator's report of all the mass the peers hold):
 * absorb what arrived since the peer finished, as its last absorb would
 * have, the same checks and refusals included. */
void engine_drain(engine *e);

/* ---- outputs ---------------------------------------------------------------- */

int engine_poll_send(engine *e, engine_send *s);
/* A send the transport refused (rc): what it was for stays due; one that no
 * frame can hold (-EMSGSIZE, -ENOSPC) ends the run with -EMSGSIZE. */
void engine_unsent(engine *e, const engine_send *s, int rc, double now);
int engine_poll_event(engine *e, engine_event *v);
/* When to call engine_timer next (at least a heartbeat interval away when
 * nothing else is due; never before now). */
double engine_wake_at(const engine *e, double now);

/* How many of one neighbour's messages may wait here to be absorbed: twice
 * what one that runs ahead under the brake sends (a PUSH beyond it is
 * refused, as is one of a round past the run's last). */
int engine_hold_max(const engine *e);

/* Is q a neighbour under the topology (anyone else is refused)? */
int engine_is_neighbour(const engine *e, int q);

/* ---- what the drivers show ------------------------------------------------------ */

long engine_round(const engine *e);
/* The round of the steps running (with overlap a caller's next round is
 * handed out before the round before is emitted), else engine_round. */
long engine_step_round(const engine *e);
/* The round it entered the run at (a resume, a join). */
long engine_start_round(const engine *e);
/* The model, read-only: x, w, the edges' totals and counters. */
const gsp_peer *engine_gossip(const engine *e);
/* The pacing, read-only: neighbours, their links and rounds, its counters. */
const gsp_pace *engine_pace(const engine *e);
/* The local optimizer's state, read-only (what a checkpoint writes). */
const local_state *engine_local(const engine *e);
/* The round's model z = x / w into z (dim floats); with overlap, where the
 * running steps started (nothing to copy into the buffer of a caller's last
 * engine_step_taken: the fold wrote it there). */
void engine_model_to(engine *e, float *z);
/* The model to evaluate between rounds (local_eval_params: x itself, or z
 * in m's gradient buffer). */
const float *engine_eval_params(engine *e, nn_model *m);
/* The final model (gsp_take_model): x becomes z; after the run. */
float *engine_take_model(engine *e);
/* Arrived messages not absorbed yet. */
const gsp_msg *engine_inbox(const engine *e, int *n);

int engine_joining(const engine *e);    /* it has no model yet: it pulls a neighbour's */
int engine_refreshing(const engine *e); /* it was far behind: it pulls a neighbour's model */
int engine_computing(const engine *e);  /* a STEP is out and not done */
int engine_stopping(const engine *e);
int engine_left(const engine *e);        /* it handed its weight on (engine_leave): nothing to checkpoint */
int engine_rounds_done(const engine *e); /* every round is done (it may still wait for in-neighbours) */
int engine_promise_pending(const engine *e); /* the neighbour asked for its model said it follows (MODEL_SOON) */

typedef struct engine_stats {
    long steps;            /* local optimizer steps taken */
    float loss;            /* mean over the last round's local steps */
    uint64_t absorbed;     /* messages applied */
    double wait_seconds;   /* time rounds could not start yet */
} engine_stats;
void engine_stats_of(const engine *e, engine_stats *s);

/* Where the model stopped being finite ("the loss", "the parameters"; NULL
 * if it did not), and the whole story (round_diverged_text). */
const char *engine_diverged(const engine *e);
void engine_diverged_text(const engine *e, char *buf, size_t len);

/* This peer's bytes by part (round_memory). */
void engine_memory(const engine *e, mem_parts *m);

#endif
