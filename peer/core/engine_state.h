/* The peer engine's state: private to peer/core/engine*.c (the state
 * machine in engine.c, its life in engine_setup.c, its getters in
 * engine_view.c, --overlap's arithmetic in engine_overlap.c, a leave in
 * engine_leave.c, asking for a model in engine_pull.c, shares refused at
 * the door asked for again in engine_gaps.c) and to its
 * unit test (tests/check_includes.sh holds every other file to engine.h,
 * whose getters and inputs are all a driver sees). */
#ifndef PEER_CORE_ENGINE_STATE_H
#define PEER_CORE_ENGINE_STATE_H

#include "peer/core/engine.h"

struct engine {
    round_peer rp;            /* the round: gossip state, pacing, inbox, local optimizer */
    int id, n_peers;
    double checkpoint_every;  /* > 0: BOUNDARY events say when a checkpoint is due */
    int caller_steps;         /* the caller takes the local steps itself (libsgp): engine_set_caller_steps */
    /* per peer */
    uint8_t *busy;            /* the transport would refuse a frame to it now */
    uint8_t *sending;         /* frames to it are still queued */
    uint8_t *model_wanted;    /* asked for our model while a round ran: answered at the boundary */
    uint8_t *emit_busy;       /* busy, and the neighbours our model goes to at this boundary (emit_round) */
    uint8_t *model_queued;    /* our model went to it: a repeated request waits while frames are queued */
    long *model_sent_round;   /* our round when our model last went to it (-1: never): another request within
                               * engine_hold_max rounds is ignored */
    uint64_t *ack_due, *ack_sent, *ack_incarnation; /* the highest seq received from it, acknowledged, and
                                                      * the sender's incarnation they belong to */
    uint64_t *sync_queued;    /* the seq of the last SYNC queued to it (0: none since the link came up) */
    uint64_t *sync_asked;     /* ...the seq its NACK asked from */
    double *sync_queued_at;   /* ...and when */
    uint32_t *refusals;       /* its messages refused (GSP_REFUSED): logged at 1, 2, 4, ... */
    uint64_t *gap_seq;        /* the highest seq of it refused at the door and not yet held (0: none) ... */
    uint64_t *gap_incarnation; /* ... of this incarnation of it, */
    double *gap_asked_at;     /* ... last asked for then (engine_gaps.c) */
    uint8_t *promise_broken;  /* it said MODEL_SOON and sent no model within the promise's limit: not believed again */
    /* where the peer is */
    int computing, held, stopping, said_done, rounds_done, finished;
    int leaving;        /* the stop hands the mass on first (engine_leave) ... */
    double leave_since; /* ... once the round it stopped before may start, or a dead timeout after this, */
    int bye_said;       /* ... and once the neighbours it said goodbye to have answered (GOODBYE "seen": */
    double bye_until;   /* nothing more of theirs comes) or this time has passed */
    uint8_t *bye_wait;  /* by peer: its answer is awaited */
    int handed_off;     /* the weight went; the stop waits for the acknowledgements of all it sent until */
    double acked_until; /* this time (engine_leave_acked) */
    /* --overlap (gossip/GUARANTEES.md): a round's steps run on z_work, apart
     * from x, while its pacing question and absorb run on x; both done, the
     * steps are folded in (fold) and the round emitted. */
    int stepped;              /* the round's steps are done, their fold waits for its absorb */
    int absorbed;             /* the round's pacing question is answered and its absorb done */
    int start_ready;          /* z_start holds the next steps' model, taken at the last fold (before its emit) */
    int steps_void;           /* a model was taken while steps ran: they are not its, and are dropped */
    int emit_due;             /* a caller stepping itself has its next model: the round's emit follows at the
                               * next engine call, not on the caller's path */
    float *z_start;           /* where the running steps started (dim floats, allocated at the first) */
    float *z_work;            /* the steps' own model (the caller's, copied for its outer step) */
    float *caller_z;          /* a caller stepping itself: its stepped model, the loop's until the next hand-out */
    const float *start_in;    /* the caller's buffer the last fold wrote z_start into as well: the hand-out
                               * (engine_model_to) copies nothing there */
    long step_round;          /* the round of the running steps (the pacing question may jump meanwhile) */
    int joining, refreshing, asked, ask_left, alone;
    int promised;             /* the neighbour asked last said its model follows its step (MODEL_SOON) */
    double promised_at;       /* ...when it said so */
    double asked_at, refresh_since, join_since, last_ckpt, next_tick;
    double first_step_at;     /* the first round's start since the run (re)started (-1: none yet) */
    double done_at;           /* every round was done then (-1: not yet): the wait for in-neighbours is bounded */
    double wait_since, wait_seconds; /* rounds that could not start yet */
    double wake;              /* the pacing policy's next question (INFINITY: none) */
    long start_round;         /* the round it entered the run at (a resume, a join) */
    int apart_asked;          /* --gather: the peer whose model it asked for, its own differing (-1: none) */
    long apart_asked_round;   /* ...at that round */
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
};

/* --overlap's arithmetic (engine_overlap.c). A round's steps start: from
 * z_start as the last fold left it, or z now (a caller's outer step
 * anchored there); -ENOMEM into fail. */
void engine_overlap_start(engine *e);
/* Their computation (engine_compute_step), on z_work from z_start. */
float engine_overlap_compute(engine *e, nn_model *model);
/* The round's steps are done and its absorb too (or the peer stops): their
 * progress goes onto the mixed model, x += w (z' - z_start) at the weight
 * the absorb left (the steps never saw the shares absorbed beside them:
 * one round of delay), and the next steps' model is taken into z_start,
 * before the emit. */
void engine_fold_steps(engine *e);

/* engine.c's absorb of what arrived (all: every round's) and its queue of
 * frames to send, for the engine's other files. */
void engine_absorb(engine *e, int all);
void engine_queue(engine *e, engine_send s, double now);

/* engine_leave.c: may the leave's hand-off go now (else e->wake says when
 * to ask again), and the hand-off itself (-EDOM: the model is not finite,
 * the caller stops the peer for it; else 0, said in the log). */
int engine_leave_ready(engine *e, double now);
int engine_hand_off(engine *e, double now);
/* After the hand-off: may the stop finish now (else e->wake says when to
 * ask again). */
int engine_leave_acked(engine *e, double now);
/* engine_goodbye's for a leaver's neighbour and the leaver: answer a
 * "stopped" (after every share queued to it), take an answer. */
void engine_bye_answer(engine *e, int q, double now);
void engine_bye_seen(engine *e, int q);

/* engine_gaps.c: a share refused at the door (m: an honest sender's, its
 * next totals or a SYNC carry it), the NACKs for those the inbox no longer
 * holds any later message of (after a round's absorb), and whether a
 * connected in-neighbour still owes one (a peer done with its rounds waits). */
void engine_gap_note(engine *e, const gsp_msg *m);
void engine_gap_ask(engine *e, double now);
int engine_gap_open(const engine *e);

/* q's connection is up. */
static inline int engine_connected(const engine *e, int q)
{
    const gsp_pace *pc = &e->rp.pace;
    const int slot = q >= 0 && q < e->n_peers ? pc->slot[q] : -1;
    return slot >= 0 && pc->nb[slot].connected;
}

/* Joining, or so far behind that it takes a neighbour's model. */
static inline int engine_wants_model(const engine *e) { return e->joining || e->refreshing; }

/* The slowest a loop builds, seals and sends a frame (a sanitizer build on
 * a loaded machine): the transport gives a MODEL that long (WIRE.md). */
#define ENGINE_SLOWEST_BYTES_PER_S 20e6

/* engine_pull.c: ask every neighbour in turn for its model, from the one
 * after the last asked (ask_for_model), or the next one now (ask_next: the
 * transport refused the request); whether an ask is due (no answer for a
 * heartbeat interval, or a promise's holder gone silent); at each tick, a
 * broken promise given up and a due ask made. */
void engine_ask_for_model(engine *e, double now);
void engine_ask_next(engine *e, double now);
int engine_ask_due(const engine *e, double now);
void engine_pull_tick(engine *e, double now);

/* A log event into the engine's queue (engine.c). */
void engine_log_event(engine *e, engine_log log, int peer, const char *detail);

#endif
