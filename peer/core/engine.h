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
 *   engine e;
 *   engine_init(&e, &settings, &plan, id, train, x0, dim, now, err, sizeof err);
 *   engine_advance(&e, now);                 // the engine starts held at round 0
 *   for (;;) {
 *       ... feed what happened: engine_push / _ack / _heartbeat / _nack / _goodbye / _model_request / _model_soon /
 *           _model / _link_up / _link_down / _timer (at engine_wake_at) / _step_done ...
 *       engine_send s;
 *       while (engine_poll_send(&e, &s)) {   // frames, valid until the next engine call
 *           int rc = send_frame(&s);          // encode and send s
 *           if (rc < 0) engine_unsent(&e, &s, rc, now);   // a refused one
 *       }
 *       engine_event v;
 *       while (engine_poll_event(&e, &v))
 *           switch (v.kind) {
 *           case ENGINE_STEP:      // compute the round's steps (round_step, any thread), then
 *               engine_step_done(&e, now);
 *               break;
 *           case ENGINE_BOUNDARY:  // the round is emitted, the model is the next round's
 *               ... evaluate, log, checkpoint ...
 *               engine_advance(&e, now);      // nothing starts until then
 *               break;
 *           case ENGINE_FINISHED:  // close (v.goodbye: what to say last on every connection)
 *           default: ...
 *           }
 *   }
 *   engine_free(&e);
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
    ENGINE_GOODBYE,       /* done: finished every round (else stopped) */
    ENGINE_MODEL_REQUEST, /* we want the peer's model (joining, or far behind) */
    ENGINE_MODEL,         /* model (dim floats) and round: the round the asker enters at */
    ENGINE_MODEL_SOON,    /* round: ours; our MODEL to the peer that asked follows when the step is done */
} engine_send_kind;

typedef struct engine_send {
    engine_send_kind kind;
    int peer;
    gsp_msg msg;        /* PUSH: points into the gossip state, valid until the next engine call */
    uint64_t seq;       /* ACK, NACK */
    long round;         /* HEARTBEAT, MODEL, MODEL_SOON */
    int done;           /* GOODBYE */
    const float *model; /* MODEL: valid until the next engine call */
    size_t dim;         /* MODEL, MODEL_REQUEST */
} engine_send;

typedef enum engine_event_kind {
    ENGINE_STEP,     /* a round has started: compute its local steps (round_step), then engine_step_done */
    ENGINE_BOUNDARY, /* round `round` is emitted; held until engine_advance */
    ENGINE_DONE,     /* every round is done; the peer stays for its in-neighbours' last shares */
    ENGINE_FINISHED, /* close now: rc (< 0: failed), goodbye (-1: none, 0: "stopped", 1: "done") */
    ENGINE_LOG,      /* a fault-handling event: what, peer (-1: none), detail ("" : none) */
} engine_event_kind;

typedef struct engine_event {
    engine_event_kind kind;
    long round;
    int rc, goodbye;
    int checkpoint;      /* BOUNDARY: checkpoint_every has passed since the last one */
    const char *what;
    int peer;
    char detail[96];
} engine_event;

typedef struct engine {
    round_peer rp;            /* the round: gossip state, pacing, inbox, local optimizer */
    int id, n_peers;
    double checkpoint_every;  /* > 0: BOUNDARY events say when a checkpoint is due */
    /* per peer */
    uint8_t *busy;            /* the transport would refuse a frame to it now */
    uint8_t *sending;         /* frames to it are still queued */
    uint8_t *model_wanted;    /* asked for our model while a round ran: answered at the boundary */
    uint8_t *model_queued;    /* our model went to it: a repeated request waits while frames are queued */
    long *model_sent_round;   /* our round when our model last went to it (-1: never): another request within
                               * engine_hold_max rounds is ignored */
    uint64_t *ack_due, *ack_sent, *ack_incarnation; /* the highest seq received from it, acknowledged, and
                                                      * the sender's incarnation they belong to */
    uint64_t *sync_queued;    /* the seq of the last SYNC queued to it (0: none since the link came up) */
    uint64_t *sync_asked;     /* ...the seq its NACK asked from */
    uint32_t *refusals;       /* its messages refused (GSP_REFUSED): logged at 1, 2, 4, ... */
    uint8_t *promise_broken;  /* it said MODEL_SOON and sent no model within the promise's limit: not believed again */
    /* where the peer is */
    int computing, held, stopping, said_done, rounds_done, finished;
    int joining, refreshing, asked, ask_left, alone;
    int promised;             /* the neighbour asked last said its model follows its step (MODEL_SOON) */
    double promised_at;       /* ...when it said so */
    double asked_at, refresh_since, join_since, last_ckpt, next_tick;
    double first_step_at;     /* the first round's start since the run (re)started (-1: none yet) */
    double done_at;           /* every round was done then (-1: not yet): the wait for in-neighbours is bounded */
    double wait_since, wait_seconds; /* rounds that could not start yet */
    double wake;              /* the pacing policy's next question (INFINITY: none) */
    long start_round;         /* the round it entered the run at (a resume, a join) */
    double absorb_now;        /* the time of the absorb under way (its NACKs are sent then) */
    /* queued outputs */
    engine_send *sends;
    int n_sends, cap_sends, next_send;
    engine_event *events;
    int n_events, cap_events, next_event;
    int fail;                 /* a negative errno the engine finishes with: a queue could not grow (-ENOMEM),
                               * a message no frame can hold (-EMSGSIZE) */
    uint64_t incarnation_max; /* a PUSH of a higher incarnation is refused (the driver's clock allows no
                               * such run yet; UINT64_MAX: none is) */
    const char *diverged;     /* finished with -EDOM: where the model was not finite ("the loss", "the
                               * parameters"); round_diverged_text says the rest */
} engine;

/* The round (round_peer_init) and the engine around it, held before round 0.
 * 0, or a negative errno with a message. */
int engine_init(engine *e, const peer_settings *c, const round_plan *plan, int id, const nn_dataset *train,
                const float *x0, size_t dim, double now, char *err, size_t errlen);
void engine_free(engine *e);

/* ---- before the first advance ----------------------------------------------- */

/* No state (a --resume without a checkpoint, a rejoin from nothing): pull a
 * neighbour's model first; fail after round_timeout without one. */
void engine_set_joining(engine *e, double now);
/* The state came back (a checkpoint loaded into e->rp, or the simulator's
 * crashed peer): the comeback both drivers make, gsp_resume (the weight
 * renormalised by a power of two, in-edges adopt totals after a gap) and
 * no round-0 barrier. Returns gsp_resume's factor. */
double engine_resume(engine *e);
/* The same peer as a new process, with the state it had (the simulator's
 * rejoin): a new incarnation, fresh pacing, held, and engine_resume. */
int engine_restart(engine *e, uint64_t incarnation, double now);
/* The process died (the simulator's crash): nothing more comes out until
 * engine_restart; returns how many arrived messages died with it. */
int engine_crash(engine *e);

/* ---- inputs ----------------------------------------------------------------- */

/* A PUSH from m->src; the engine takes the message over. */
int engine_push(engine *e, gsp_msg *m, double now);
void engine_ack(engine *e, int peer, uint64_t seq, double now);
void engine_heartbeat(engine *e, int peer, long round, double now);
void engine_nack(engine *e, int peer, uint64_t seq, double now);
void engine_goodbye(engine *e, int peer, int done, double now);
void engine_model_request(engine *e, int peer, double now);
/* The neighbour asked for its model says it follows when its step is done. */
void engine_model_soon(engine *e, int peer, double now);
/* A MODEL of round `round`; intact: its bytes matched their hash. */
void engine_model(engine *e, int peer, long round, const float *z, int intact, double now);
void engine_link_up(engine *e, int peer, double now);
/* Part of a frame from peer arrived (a big one takes seconds): a sign of
 * life, as a whole frame is. */
void engine_link_progress(engine *e, int peer, double now);
void engine_link_down(engine *e, int peer, double now);
/* The transport's view of the link, before an input that may send. */
void engine_link_state(engine *e, int peer, int busy, int sending);
/* engine_wake_at has come (heartbeats, deadlines, retries). */
void engine_timer(engine *e, double now);
/* The STEP's computation is done: emit the round's shares, then hold at its
 * BOUNDARY. */
void engine_step_done(engine *e, double now);
/* Go on from a BOUNDARY (or from the hold engine_init leaves). */
void engine_advance(engine *e, double now);
/* Stop: absorb, GOODBYE "stopped"; now, or when the running step is done. */
void engine_stop(engine *e, double now);
/* The caller's steps of the round are its own (libsgp): a stop needs no wait. */
void engine_stop_now(engine *e, double now);

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

#endif
