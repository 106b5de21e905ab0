/* Fault injection for `sgp launch` (experiments and tests of peer/net/node.c's
 * fault handling on real processes):
 *
 *  --kill PEER@ROUND              SIGKILL when PEER's log reaches ROUND
 *  --restart PEER@ROUND[:SECONDS] SIGKILL, then start it again with --resume after SECONDS [1]
 *  --stop PEER@ROUND:SECONDS      SIGSTOP, then SIGCONT after SECONDS
 *  --leave PEER@ROUND             SIGTERM to a peer started with --on-term leave: it hands its
 *                                 weight to its neighbours and leaves for good
 *  --slow PEER:FACTOR             PEER runs its rounds at 1/FACTOR of its speed (sgp peer --slow)
 *
 *   fault_plan p = {0};
 *   rc = fault_plan_add(&p, "--kill", "3@200", err, sizeof err); // FAULT_NOT_MINE: not a fault option
 *   ...
 *   fault_plan_check(&p, n_peers, err, sizeof err);
 *   fault_plan_tick(&p, rounds, pids, now, restart, ctx);     // every poll
 *
 * Rounds are read from the peers' logs by polling, so a fault lands at the
 * first poll that sees ROUND or later (a few rounds late on a fast run).
 */
#ifndef PEER_LAUNCH_LAUNCH_FAULTS_H
#define PEER_LAUNCH_LAUNCH_FAULTS_H

#include <stddef.h>
#include <sys/types.h>

#define FAULT_MAX 256 /* faults, and --slow peers, per run */

typedef enum fault_kind { FAULT_KILL, FAULT_RESTART, FAULT_STOP, FAULT_LEAVE } fault_kind;

typedef struct fault {
    fault_kind kind;
    int peer;
    long round;
    double seconds; /* RESTART: delay before the restart; STOP: how long */
    int stage;      /* 0 pending, 1 injected (waiting for its second half), 2 done */
    double due;     /* when the second half (restart, SIGCONT) is due */
    double restarted_at; /* RESTART: when the peer was started again (0: not yet) */
} fault;

typedef struct fault_slow {
    int peer;
    double factor;
} fault_slow;

typedef struct fault_plan {
    fault f[FAULT_MAX];
    int n;
    fault_slow slow[FAULT_MAX]; /* --slow, in the order given (the last one for a peer counts) */
    int n_slow;
    int injected;               /* faults injected so far (a restart counts once) */
} fault_plan;

/* What fault_plan_add did with an option it did not refuse. */
enum fault_add_result { FAULT_TAKEN = 0, FAULT_NOT_MINE = 1 };

/* Take one option: FAULT_TAKEN, FAULT_NOT_MINE (not a fault option: the next
 * parser's turn), or -EINVAL for a bad value (err says why). */
int fault_plan_add(fault_plan *p, const char *opt, const char *arg, char *err, size_t errlen);
/* Every peer named must exist. 0 or -EINVAL (err says which). */
int fault_plan_check(const fault_plan *p, int n_peers, char *err, size_t errlen);

/* 1 if peer has a --leave (it runs with --on-term leave); with sent, only
 * once its SIGTERM has gone. */
int fault_plan_leaves(const fault_plan *p, int peer, int sent);

/* --slow FACTOR for peer, or 0 when it runs at its own speed. */
double fault_plan_slow(const fault_plan *p, int peer);

/* Called when a fault kills a peer and wants it started again (with --resume). */
typedef void (*fault_restart_fn)(void *ctx, int peer);

/* Inject what is due. rounds[i]: peer i's latest logged round; pids[i]: its
 * process (<= 0: none). Each injection is printed to out. */
void fault_plan_tick(fault_plan *p, const long *rounds, const pid_t *pids, double now, fault_restart_fn restart,
                     void *ctx);

/* 1 if peer's exit was caused by a fault (a SIGKILL we sent). */
int fault_plan_killed(const fault_plan *p, int peer);

/* 1 while a restart of peer is still to come. */
int fault_plan_restart_pending(const fault_plan *p, int peer);

#endif
