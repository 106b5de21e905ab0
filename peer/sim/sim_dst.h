/* Deterministic simulation testing: random fault schedules, each drawn from
 * a seed, run in the simulator with its invariants checked after every
 * event (sim_config.check: the push-sum weight moves only at a crash or a
 * comeback, weights positive, models finite, progress), every run finishing,
 * and the average model's accuracy within a stated bound of the same run
 * without the faults. A failing schedule shrinks to a minimal one (faults
 * dropped while it still fails) and prints as one `sgp sim` command line
 * that replays it.
 *
 *   dst_world w;
 *   dst_world_init(&w, err, sizeof err);         // the data, loaded once
 *   dst_schedule s;
 *   dst_draw(&s, seed);                          // everything from the seed
 *   dst_outcome o;
 *   if (dst_run(&w, &s, &o) == DST_FAILED) {    // o.why: how
 *       dst_shrink(&w, &s, &o);                  // s: the minimal failing schedule
 *       char cmd[2048]; dst_command(&s, cmd, sizeof cmd);
 *   }
 *
 * The rules and the bound are in peer/sim/README.md ("Deterministic
 * simulation testing").
 */
#ifndef PEER_SIM_SIM_DST_H
#define PEER_SIM_SIM_DST_H

#include <stdint.h>

#include "nn/nn_data.h"

#define DST_MAX_FAULTS 8

typedef enum dst_kind {
    DST_CRASH,     /* crashes at round a for good */
    DST_REJOIN,    /* crashes at round a, back at round b with its state (a checkpoint) */
    DST_JOIN,      /* crashes at round a, back at round b without it: pulls a neighbour's model */
    DST_STOP,      /* frozen at round a for t seconds (SIGSTOP) */
    DST_PARTITION, /* peers [peer, peer + span) cut off from the others at t for u seconds; b = 1: each of
                    * them cut off alone (its host's link down) */
    DST_SLOW,      /* computes f times slower */
    DST_LEAVE,     /* leaves at round a (SIGTERM: GOODBYE "stopped"), for good */
    DST_ADMIT,     /* its slot is vacant until the run's round a, then a host admitted with a credential takes it */
    DST_REPLACE,   /* crashes at round a (kill -9) and another host takes its slot at once without its state */
} dst_kind;

typedef struct dst_fault {
    dst_kind kind;
    int peer, span;
    long a, b;
    double t, u, f;
} dst_fault;

typedef struct dst_schedule {
    uint64_t seed;
    int peers, tau, local_steps, epochs;
    int overlap;   /* --overlap: the steps beside the pacing question and the absorb */
    int gather;    /* --gather 0.9 (with the complete topology, topk:0.1, tau 0, no overlap nor outer step) */
    const char *topology, *codec, *outer;
    double loss, duplicate, jitter, dead_timeout, compute;
    double mbit;   /* link bandwidth in Mbit/s (a setting, as in the run without faults); 0: the simulator's */
    int n_faults;
    dst_fault fault[DST_MAX_FAULTS];
} dst_schedule;

typedef struct dst_outcome {
    int failed;                   /* 0: passed */
    char why[640];
    double accuracy, baseline;    /* the average model's, and the same run's without faults */
    double bound;                 /* accuracy >= baseline - bound */
    double absent;                /* the fraction of the run's local steps not taken (crashes, catch-ups) */
    double apart;                 /* the fraction of the run's simulated time under a partition */
    double simulated_seconds, wall_seconds;
} dst_outcome;

/* The data every schedule trains on (the embedded MNIST) and a cache of
 * baselines. 0, or a negative errno with a message. */
typedef struct dst_world {
    nn_dataset train, test;
    struct dst_base *bases;
    int n_bases, cap_bases;
} dst_world;

int dst_world_init(dst_world *w, char *err, size_t errlen);
void dst_world_free(dst_world *w);

/* Every choice of a schedule, from its seed alone. */
void dst_draw(dst_schedule *s, uint64_t seed);
/* What dst_run found when it could run the schedule. */
enum dst_verdict { DST_PASSED = 0, DST_FAILED = 1 };

/* Run it (and its baseline, once per setting): DST_PASSED, DST_FAILED
 * (o->why says how), or a negative errno (out of memory). */
int dst_run(dst_world *w, const dst_schedule *s, dst_outcome *o);
/* Drop faults and network faults one at a time while it still fails. */
void dst_shrink(dst_world *w, dst_schedule *s, dst_outcome *o);
/* The `sgp sim` command line that replays s, with --check. */
void dst_command(const dst_schedule *s, char *buf, size_t cap);

#endif
