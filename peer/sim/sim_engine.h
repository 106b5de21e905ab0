/* The simulator's state, shared by its engine (sim.c: events, links,
 * faults) and its reports (sim_report.c: epochs, logs, the final
 * evaluation). Internal to peer/sim. */
#ifndef PEER_SIM_SIM_ENGINE_H
#define PEER_SIM_SIM_ENGINE_H

#include "nn/nn_model.h"
#include "nn/nn_rng.h"
#include "peer/core/engine.h"
#include "peer/sim/sim.h"
#include "peer/sim/sim_queue.h"
#include "peer/store/progress.h"

/* The simulator's events (sim_queue), by kind. */
enum {
    EV_STEP_DONE, /* peer's local step finished (arg: which step) */
    EV_ARRIVE,    /* a frame (arg: flight slot) reaches peer */
    EV_WAKE,      /* the time peer's engine asked to be woken at */
    EV_UP,        /* peer's connection to arg is up */
    EV_DOWN,      /* peer's connection to arg broke */
    EV_CHURN,     /* --churn: peer goes down, or comes back */
    EV_RESUME,    /* a stopped peer runs again */
    EV_RELEASE,   /* a peer back from a crash goes on from its round boundary */
    EV_CUT,       /* partition arg begins (peer unused) */
    EV_CUT_CLOSE, /* partition arg has lasted twice the dead timeout: its connections close */
    EV_HEAL,      /* partition arg ends */
};

/* Frames other than shares and models: what the simulator charges a link
 * for a heartbeat (the others are left out of the link model, as small as
 * they are). */
#define SIM_HEARTBEAT_BYTES 32

enum { P_WAITING, P_COMPUTING, P_CRASHED, P_DONE };

/* A frame on its way from src to dst: what an engine sent, with its own
 * copies of a PUSH's arrays and a MODEL's floats. */
typedef struct sim_frame {
    engine_send s;
    int src;
    float *model; /* MODEL: owned */
} sim_frame;

typedef struct sim_peer {
    engine *e;           /* the peer engine every peer runs, simulated or not */
    int state;
    double slow;
    double stopped_until; /* frozen (SIGSTOP) until then */
    double wake_at;       /* the earliest EV_WAKE pending (< 0: none) */
    int churned;          /* down by --churn: comes back */
    int vacant;           /* --admit: nobody holds the slot yet (P_CRASHED, its engine unused): routed around */
    int admitted;         /* --check: it took a vacant slot and is joining (its join moves no weight) */
    int exited;           /* done, and every in-neighbour done or routed around: its connections closed */
    long step_id;         /* which EV_STEP_DONE is this step's (a crash voids the one pending) */
    nn_rng speed;         /* --speed-drift */
    int was_joining;      /* --check: joining at the last event (a join changes the run's weight) */
    int stale_inbox;      /* --check: its inbox holds a share of a run that crashed and came back */
    uint64_t absorbed;    /* --check: its engine's absorbed messages at the last look */
    double *held;         /* per neighbour (its pace slot), SIM_LINK_SLOTS times: when each frame this peer's
                           * link to it holds leaves (all on the wire by then) */
} sim_peer;

/* Frames a link holds before the transport refuses one (a networked peer's
 * write slots per connection: NET_QUEUE_FRAMES in peer/net/net.h): a link
 * holding that many is busy (the engine keeps its shares home), and one
 * more is refused (engine_unsent), as on a socket that does not drain. */
#define SIM_LINK_SLOTS 8

typedef struct sim {
    const sim_config *c;
    const nn_dataset *train, *test;
    float *x0;          /* where every peer started (the last one's, averaging-only): a fresh rejoin's model */
    nn_model model;
    peer_settings settings; /* the caller's, with the round timeout derived */
    gsp_scratch scratch;    /* the codec scratch every peer uses in turn (settings.share_scratch) */
    struct gsp_pool *pool;  /* the vector loops' threads every peer uses in turn (settings.pool) */
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
    uint8_t crash_fired[SIM_MAX_EVENTS], stop_fired[SIM_MAX_EVENTS], leave_fired[SIM_MAX_EVENTS];
    uint8_t cut_on[SIM_MAX_CUTS], cut_closed[SIM_MAX_CUTS];
    long slowest;
    double epoch_loss;
    long epoch_steps;
    double *mass0; /* averaging-only: total x at the start (double), for the mass check */
    double mass_ref;   /* --check: the run's push-sum weight after the last event */
    int mass_changed;  /* --check: a crash or a comeback changed it on purpose in this event */
    double mass_expect; /* --check: what admissions added in this event (one unit each, exactly) */
    double check_until; /* --check: simulated seconds past which the run is stuck (livelock) */
    char err[512];      /* why an invariant failed inside an event */
    progress bar;
    double wall0;
    sim_result *r;
} sim;

/* sim.c: the event loop and the engines' outputs (after every input to
 * peer i's engine: its frames, its round for the watermark, its events). */
int sim_pump(sim *s, int i, long round_before);
int sim_gone(const sim_peer *p);
void sim_tell_neighbours(sim *s, int i, int kind);
void sim_watermark_advance(sim *s);

/* sim_link.c: a frame from peer i over the link model; a frame reaching
 * peer j; frames in flight. */
int sim_arrive(sim *s, int j, long slot);
/* An engine input that started at `since` (clock_now) is over: its time is
 * the run's gossip CPU (the engine reads no clock). */
void sim_engine_time(sim *s, double since);
int sim_transmit(sim *s, int i, const engine_send *t);
/* Tell peer i's engine which of its links are busy or still sending
 * (engine_link_state), before an input that may send. */
void sim_link_states(sim *s, int i);
void sim_flight_release(sim *s, long slot, int free_payload);
size_t sim_frame_bytes(const sim_frame *f);

/* sim_faults.c: a peer at its round boundary (a scheduled crash or stop,
 * or on: *advanced), crashes, rejoins, --churn. */
int sim_boundary(sim *s, int i, int *advanced);
void sim_crash(sim *s, int i);
int sim_rejoin(sim *s, int i, int fresh);
/* The admissions (--admit) due when the slowest peer reaches `round`. */
int sim_admit_due(sim *s, long round);
double sim_churn_wait(sim *s, int down);
int sim_churn(sim *s, int i);
/* Partitions: the events of cut k; whether the link i - j is cut now (and
 * which cut: *k). */
void sim_cut_event(sim *s, int kind, int k);
int sim_cut_between(const sim *s, int i, int j, int *k);

/* sim_check.c: the invariants of --check, after every event: the run's
 * push-sum weight (held, pending on every edge, adopted as a baseline)
 * moves only at a crash or a comeback, every live peer's weight is positive
 * and finite, the simulation makes progress; at a boundary, the peer's x is
 * finite. 0, or -EPROTO with the violation in err. */
double sim_weight(const sim *s);
int sim_check_event(sim *s, char *err, size_t errlen);
int sim_check_model(const sim *s, int i, char *err, size_t errlen);
int sim_check_end(const sim *s, char *err, size_t errlen);
/* Peer i absorbed (a round started, an overlapped round's absorb beside
 * its steps, or it finished): a share of a dead run among what it took in
 * changed the run's weight on purpose. */
void sim_check_absorbed(sim *s, int i);

/* sim_setup.c */
int sim_setup(sim *s, const sim_config *c, const nn_dataset *train, char *err, size_t errlen);
void sim_teardown(sim *s);

/* sim_report.c */
void sim_average_model(sim *s, float *avg);
void sim_epoch_report(sim *s, long epoch);
void sim_log_round(sim *s, long round);
void sim_progress_round(sim *s);
void sim_final_report(sim *s);

#endif
