/* The round of an SGP peer, the computation inside the peer engine
 * (peer/core/engine.h): set-up, the inbox, absorbing, the local step, the
 * pacing decision and the emit. Only the engine calls the loop below; the
 * two drivers (peer/sim, peer/net/node.c) feed the engine, and run
 * engine_compute_step (round_step) for it when it says ENGINE_STEP. Every decision of a round is
 * made here, in the engine or in gossip/.
 *
 *   round_plan plan;
 *   round_plan_make(&plan, &settings.train, train->n, n_peers, local_steps);
 *   round_peer rp;
 *   round_peer_init(&rp, &settings, &plan, id, train, x0, dim, now, err, sizeof err);
 *   for (;;) {
 *       round_inbox_put(&rp, &msg);             // every PUSH that arrives
 *       ... gsp_pace_heard / _push / _claim / _up / _down for what the transport saw ...
 *       gsp_pace_decision d;
 *       switch (round_next(&rp, now, &d)) {
 *       case GSP_PACE_WAIT: ... wait for a message or d.wake_at ...; continue;
 *       case GSP_PACE_DONE: round_absorb(&rp, 1, nack, ctx); goto done;
 *       case GSP_PACE_START: break;
 *       }
 *       round_absorb(&rp, 0, nack, ctx);       // what has arrived, in (sender, seq) order
 *       round_step(&rp, &model);                // may run on another thread: touches x only
 *       gsp_msg msgs[TOPO_MAX_OUT];
 *       int n = round_emit(&rp, now, busy, msgs);
 *       ... send msgs ...
 *   }
 *   done: round_peer_free(&rp);
 */
#ifndef PEER_CORE_ROUND_H
#define PEER_CORE_ROUND_H

#include <stdint.h>

#include "compress/cmp.h"
#include "gossip/gsp.h"
#include "gossip/gsp_pace.h"
#include "nn/nn_data.h"
#include "nn/nn_model.h"
#include "peer/core/memory.h"
#include "peer/core/local_step.h"
#include "peer/core/settings.h"
#include "peer/core/train_opts.h"
#include "topologies/topo.h"

/* The run's shape: every peer takes train.batch / n_peers samples a step, an
 * epoch is as many steps as the whole batch needs to cover the data, and a
 * round is local_steps steps and one exchange. An epoch's last round takes
 * the steps left over, so epochs end on a round and every epoch has the
 * steps of one epoch of `sgp train`. */
typedef struct round_plan {
    int per_batch;
    int local_steps;        /* H: local steps a round (1: every step is gossiped) */
    long steps_per_epoch;
    long rounds_per_epoch, total_rounds;
} round_plan;

void round_plan_make(round_plan *p, const train_opts *o, int n_train, int n_peers, int local_steps);
/* The local steps of `round` (0 past the end), and the run-wide index of its
 * first step in *first (the learning-rate schedule counts steps). */
int round_plan_steps(const round_plan *p, long round, long *first);


typedef struct round_peer {
    const peer_settings *c;
    const round_plan *plan;
    gsp_peer g;
    gsp_pace pace;
    local_state local;
    nn_dataset shard;
    cmp_spec codec;            /* this peer's copy: the warm-up changes its fraction by round */
    gsp_msg *inbox;            /* arrived, not yet absorbed; owned */
    int n_inbox, cap_inbox;
    float loss;                /* mean over the last round's local steps */
    long steps;                /* local optimizer steps taken */
    uint64_t absorbed;
    /* The shares the last absorb applied (what a peer whose model stops
     * being finite names): their senders and rounds, the first
     * ROUND_TAKEN_MAX of n_taken. */
#define ROUND_TAKEN_MAX 8
    int taken_from[ROUND_TAKEN_MAX];
    long taken_round[ROUND_TAKEN_MAX];
    int n_taken;
    long taken_at;             /* the round that absorb started */
    /* The messages the last absorb refused (GSP_REFUSED): sender and why,
     * the first ROUND_TAKEN_MAX of n_refused. */
    int refused_from[ROUND_TAKEN_MAX];
    const char *refused_why[ROUND_TAKEN_MAX];
    int n_refused;
} round_peer;

/* Shard, gossip state (x = x0), codec, local optimizer and pacing of peer
 * `id`. The same seeds in every driver: the simulator's peer i and the
 * networked peer i compute the same things. train NULL: no shard and no
 * local optimizer (the caller takes its own steps: libsgp; round_step is
 * then not called, and the engine brackets the caller's steps with
 * outer_begin and outer_end on rp->local.outer). 0, or a negative errno with a message. */
int round_peer_init(round_peer *rp, const peer_settings *c, const round_plan *plan, int id, const nn_dataset *train,
                    const float *x0, size_t dim, double now, char *err, size_t errlen);
void round_peer_free(round_peer *rp);

/* Add this peer's bytes to m by part: gossip state, codec scratch, optimizer
 * state (model), shard and batches (data), the inbox (in flight). The driver
 * adds the model, the data sets and its own buffers. */
void round_memory(const round_peer *rp, mem_parts *m);

/* The inbox takes the message over (its arrays included); -ENOMEM. */
int round_inbox_put(round_peer *rp, gsp_msg *m);

/* The seq up to which this peer holds src's messages of `incarnation` in
 * order: what it applied, and what waits in the inbox and will apply after
 * it (the seq an ACK or a NACK says). */
uint64_t round_held(const round_peer *rp, int src, uint64_t incarnation);

/* How many of src's messages wait in the inbox, and how many may: what a
 * neighbour that runs ahead under the brake can have sent, 2 * (tau + 2 *
 * period + 4) (more are refused; past half of it, a round's absorb takes
 * the oldest in early). */
int round_held_from(const round_peer *rp, int src);
int round_hold_max(const round_peer *rp);

/* What a lost compressed message makes the receiver ask of its sender: the
 * driver tells src (a NACK of `seq`: gsp_nack_seq), whose next message on
 * the edge is a SYNC. */
typedef void (*round_nack_fn)(void *ctx, int src, uint64_t seq);

/* Absorb the inbox in (sender, seq) order; with tau = 0 only messages of
 * earlier rounds (so a synchronous run does not depend on arrival order),
 * unless all. Returns the number applied. A sender whose messages ask for a
 * SYNC is asked once per absorb, after the last of them (and not at all if
 * a later one, a SYNC that was on its way, made the edge whole): one SYNC
 * answers them all, and at 100M parameters each is half a GB. */
int round_absorb(round_peer *rp, int all, round_nack_fn nack, void *ctx);

/* What to do before round g.round (gsp_pace_next with this inbox). */
gsp_pace_action round_next(round_peer *rp, double now, gsp_pace_decision *d);

/* The round's local optimizer steps at z (plan->local_steps of them, fewer
 * at an epoch's end) and the outer step (--outer) on their difference;
 * returns their mean batch loss and counts them in rp->steps. model NULL:
 * no step (averaging experiments).
 * Touches x, the local optimizer and the model's buffers only. */
float round_step(round_peer *rp, nn_model *model);
/* The same steps, those of `round`, of a model z (dim floats) held apart
 * from the gossip state, which they leave alone (--overlap: the exchange
 * moves x, and may move the round, meanwhile): z is where they start and,
 * after, where they end. */
float round_step_on(round_peer *rp, nn_model *model, float *z, long round);

/* Why a peer stops when its model is no longer finite (-EDOM from
 * round_emit, or a loss that is not): `what` ("the loss", "the parameters")
 * at which round, and the shares the round took in. */
void round_diverged_text(const round_peer *rp, const char *what, char *buf, size_t len);

/* This round's shares (codec warm-up, routing and pacing, gsp_emit; round
 * moves on). busy: NULL or n_peers flags of links that took no frame
 * lately. Returns the number of messages, or a negative errno: -EDOM when x
 * is no longer finite (the model diverged). */
int round_emit(round_peer *rp, double now, const uint8_t *busy, gsp_msg *msgs);

#endif
