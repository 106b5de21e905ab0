/* The in-process simulator: N logical peers, each a peer engine as a real
 * peer runs it (peer/core/engine.h: every decision of a round), fed on a
 * virtual clock, with a model of compute time, links
 * (latency, bandwidth, loss) and faults. Deterministic from the seed: the
 * same configuration gives the same result, bit for bit.
 *
 *   sim_config c;
 *   sim_config_defaults(&c);           // then set c.train, c.n_peers, c.topology, ...
 *   sim_result r;
 *   char err[256];
 *   if (sim_run(&c, &train, &test, &r, err, sizeof err) < 0) ...
 *   sim_result_free(&r);
 *
 * Time model (all virtual seconds):
 * - a local step takes compute_seconds * slow[i] (by default a deterministic
 *   estimate from the model size and batch, or the measured time of a real
 *   step, see sim.c), times 1 + speed_drift * Exp(1) drawn per step;
 * - a message of B bytes on link i -> j starts when that link is free, takes
 *   B / bandwidth to serialise and arrives latency (+ a uniform jitter) later;
 *   it is lost with probability loss and delivered twice with probability
 *   duplicate (one seeded stream for the network); heartbeats take the same
 *   links; connection events (up, down) arrive one latency after the fact;
 * - a peer asks the pacing policy when to start a round, exactly as a real
 *   peer does, and is asked again when something arrives or when it said;
 * - a crashed peer stops at the start of its crash round, its connections
 *   close, and its neighbours route around it after dead_timeout; messages
 *   reaching it are lost. A rejoin (or --churn) brings it back as a new
 *   incarnation with the state it had (a checkpoint of that moment, through
 *   gsp_restart and gsp_resume); a stopped peer is frozen, connections up,
 *   and what reaches it waits. A finished peer stays until its in-neighbours
 *   are done (for a bounded time: gossip/GUARANTEES.md), then its
 *   connections close;
 * - a vacant slot (admit) is routed around from round 0 and holds nothing;
 *   when the slowest peer reaches its round a host takes it, joins (it
 *   pulls a neighbour's model) and adds one unit of weight.
 */
#ifndef PEER_SIM_SIM_H
#define PEER_SIM_SIM_H

#include <stdint.h>
#include <stdio.h>

#include "compress/cmp.h"
#include "nn/nn_data.h"
#include "peer/core/memory.h"
#include "peer/core/outer.h"
#include "peer/core/settings.h"
#include "topologies/topo.h"

#define SIM_MAX_EVENTS 64 /* crash/rejoin entries */
/* compute_seconds: estimate from the model size (deterministic), or time the
 * real step once at start-up (the run is then reproducible only as far as
 * that measurement repeats). */
#define SIM_COMPUTE_ESTIMATE (-1.0)
#define SIM_COMPUTE_MEASURED (-2.0)

typedef struct sim_fault {
    int peer;
    long round;
    double seconds; /* stop: how long the peer is frozen */
    int fresh;      /* rejoin: without its state (no checkpoint): it pulls a neighbour's model */
} sim_fault;

/* A partition: every link between a peer of `side` and a peer outside it
 * stops carrying frames at simulated time `at`, for `seconds`. The
 * connections outlive a cut of at most twice the dead timeout (what TCP
 * would retransmit arrives at the heal); a longer one closes them at twice
 * the dead timeout, as the transport's idle limit does, losing what they
 * held, and they come back up at the heal. */
typedef struct sim_cut {
    const uint8_t *side; /* n_peers flags */
    double at, seconds;
} sim_cut;
#define SIM_MAX_CUTS 16

typedef struct sim_config {
    peer_settings peer; /* training and gossip, as sgp peer's (round_timeout <= 0: derived from the step
                         * and link times) */
    double compute_seconds; /* per local step; SIM_COMPUTE_ESTIMATE or SIM_COMPUTE_MEASURED */
    double latency, bandwidth, loss; /* seconds, bytes/second (0 = infinite), probability */
    double duplicate;                /* probability that a message is delivered twice */
    double jitter;                   /* extra delay uniform in [0, jitter] s: reorders a link's messages */
    double *slow;                    /* n_peers factors (NULL = all 1) */
    double speed_drift;              /* > 0: every peer's speed wanders by up to this fraction (uniform load) */
    sim_fault crash[SIM_MAX_EVENTS], rejoin[SIM_MAX_EVENTS], stop[SIM_MAX_EVENTS];
    sim_fault leave[SIM_MAX_EVENTS]; /* a graceful stop (SIGTERM) at a round: GOODBYE "stopped", gone */
    /* A vacant slot (a cluster file's `slots`: nobody holds it at the start,
     * every member routes around it from round 0) that a host admitted with
     * a credential takes when the slowest peer reaches `round`: it joins
     * without state (pulls a neighbour's model) with one unit of weight. */
    sim_fault admit[SIM_MAX_EVENTS];
    int n_crash, n_rejoin, n_stop, n_leave, n_admit;
    sim_cut cut[SIM_MAX_CUTS];
    int n_cut;
    double churn;                    /* fraction of peers down at any time (random crashes and resumes) */
    double churn_down;               /* mean seconds a churned peer stays down; <= 0: 4 x dead_timeout */
    int averaging_only; /* no gradient: pure push-sum from different starting points */
    int keep_peer_models; /* fill sim_result.peer_models (for comparing with networked runs) */
    FILE *log;          /* per-round CSV, or NULL */
    FILE *events;       /* every peer's decisions (the engine's log events) as JSON lines, or NULL */
    int check;          /* check the invariants after every event (sim_check.c); a violation ends the run */
    FILE *progress;     /* per-epoch lines, or NULL */
    int progress_bar;   /* live bar on progress (a terminal) */
} sim_config;

typedef struct sim_result {
    long rounds;                 /* rounds completed by the slowest live peer */
    double simulated_seconds, wall_seconds;
    uint64_t bytes_sent, messages_sent, messages_lost;
    uint64_t messages_cut;       /* shares on connections a partition closed */
    uint64_t messages_after_end; /* shares that reached a peer after it had finished (their weight: in flight at
                                  * the end) */
    float test_accuracy, test_loss; /* of the average model sum x / sum w */
    float test_accuracy_min, test_accuracy_mean; /* over live peers' z */
    float test_loss_max, test_loss_mean;         /* the same for the loss: the worst peer is the highest */
    int context;                 /* text data: tokens a sample sees (losses are per token); else 0 */
    double consensus_distance;   /* mean_i ||z_i - z_avg||^2 / ||z_avg||^2 */
    double mean_staleness;       /* rounds, over absorbed messages */
    /* Averaging-only runs: relative change of total mass, peers plus in flight,
     * from start to end (0 up to round-off; see gossip/GUARANTEES.md). NAN when
     * training (gradients change x) or when a peer crashed (mass leaves with it). */
    double mass_error_x, mass_error_w;
    uint64_t messages_duplicated;
    uint64_t syncs;              /* codec: SYNC messages sent after lost deltas */
    float train_loss;            /* mean over the last epoch's steps */
    double step_seconds;         /* the virtual duration of one local step */
    size_t parameters;
    float *average_model;        /* n params, owned */
    float *peer_models;          /* keep_peer_models: n_peers * params, each peer's final z (crashed: zeros) */
    /* The fault counters a networked peer reports, summed over peers. */
    long local_steps, late_marks, catch_ups, refreshes, rounds_skipped, neighbours_lost, brakes, isolated_rounds;
    long busy_kept;              /* shares kept home for a busy link or a full ack window */
    long crashes, resumes, stops, cuts, leaves;
    long admits;                 /* vacant slots taken (--admit) */
    int slots_vacant;            /* slots still vacant at the end (an admission that never came) */
    long frames_refused;         /* frames a link holding SIM_LINK_SLOTS of them refused */
    double weight_in_flight;     /* sent between live peers and not applied at the end (a partition that outlasts
                                  * the run, shares to a peer that had finished): weight_total + this is the run's */
    double weight_min, weight_max, weight_total; /* over live peers at the end */
    int peers_live;
    /* Real seconds of this process, summed over peers: local steps, and
     * gossip CPU (absorb, emit: decode, mixing, running sums, encode). */
    double cpu_step_seconds, cpu_gossip_seconds;
    mem_parts memory;            /* all peers together, when the last round was done */
} sim_result;

void sim_config_defaults(sim_config *c);
/* The faults against each other and the run: every one names a peer of it,
 * a rejoin follows a crash of its peer, a slot is admitted once, at a round
 * before the last (total_rounds; 0: not known yet), and nothing happens to
 * an admitted peer before it holds its slot. 0, or -EINVAL with why in err
 * (sim_run checks it too). */
int sim_config_check(const sim_config *c, long total_rounds, char *err, size_t errlen);
int sim_run(const sim_config *c, const nn_dataset *train, const nn_dataset *test, sim_result *r, char *err,
            size_t errlen);
void sim_result_free(sim_result *r);

#endif
