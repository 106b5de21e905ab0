/* The simulator's state, shared by its engine (sim.c: events, links,
 * faults) and its reports (sim_report.c: epochs, logs, the final
 * evaluation). Internal to peer/sim. */
#ifndef PEER_SIM_ENGINE_H
#define PEER_SIM_ENGINE_H

#include "nn/nn_model.h"
#include "nn/nn_rng.h"
#include "peer/core/engine.h"
#include "peer/sim/sim.h"
#include "peer/sim/sim_queue.h"
#include "peer/store/progress.h"

enum { P_WAITING, P_COMPUTING, P_CRASHED, P_DONE };

/* A frame on its way from src to dst: what an engine sent, with its own
 * copies of a PUSH's arrays and a MODEL's floats. */
typedef struct sim_frame {
    engine_send s;
    int src;
    float *model; /* MODEL: owned */
} sim_frame;

typedef struct sim_peer {
    engine e;            /* the peer engine every peer runs, simulated or not */
    int state;
    double slow;
    double stopped_until; /* frozen (SIGSTOP) until then */
    double wake_at;       /* the earliest EV_WAKE pending (< 0: none) */
    int churned;          /* down by --churn: comes back */
    int exited;           /* done, and every in-neighbour done or routed around: its connections closed */
    long step_id;         /* which EV_STEP_DONE is this step's (a crash voids the one pending) */
    nn_rng speed;         /* --speed-drift */
} sim_peer;

typedef struct sim {
    const sim_config *c;
    const nn_dataset *test;
    nn_model model;
    round_config rc;
    round_plan plan;
    sim_peer *p;
    sim_queue q;
    sim_frame *flight; /* frames in flight, by slot */
    int *free_slots, n_free, cap_flight;
    double *link_free; /* n*n: when link i -> j is next idle */
    nn_rng net, churn;
    double now, last_step, step_seconds;
    long *at_round; /* live peers per completed round count, for the slowest-peer watermark */
    int running;    /* peers that can still act: waiting, computing, or down and coming back */
    uint8_t crash_fired[SIM_MAX_EVENTS], stop_fired[SIM_MAX_EVENTS];
    long slowest;
    double epoch_loss;
    long epoch_steps;
    double *mass0; /* averaging-only: total x at the start (double), for the mass check */
    progress bar;
    double wall0;
    sim_result *r;
} sim;

/* sim_report.c */
void sim_average_model(sim *s, float *avg);
void sim_epoch_report(sim *s, long epoch);
void sim_log_round(sim *s, long round);
void sim_progress_round(sim *s);
void sim_final_report(sim *s);

#endif
