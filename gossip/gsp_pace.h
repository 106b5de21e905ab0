/* The pacing policy of one SGP peer: when a round may start, whom it waits
 * for, when a neighbour is late, lost or back, when to jump ahead (catch-up)
 * or hold back (brake), when to keep shares home (isolation, busy links),
 * and how much weight an emit moves after skipped rounds. Pure like gsp.c:
 * time comes in as an argument (seconds, any origin: the networked peer
 * passes its monotonic clock, the simulator its virtual one), liveness as
 * events, and nothing here sends, sleeps or arms a timer: the driver asks
 * what to do and when to ask again.
 *
 *   gsp_pace p;
 *   gsp_pace_init(&p, &config, id, now);     // config.topology: the neighbours
 *   gsp_pace_heard(&p, q, now);              // on every frame from q
 *   gsp_pace_push(&p, &g, q, r, now);        // on a PUSH of round r
 *   gsp_pace_claim(&p, q, r, now);           // on a HEARTBEAT at round r
 *   gsp_pace_up(&p, q, now);                 // on connect
 *   gsp_pace_down(&p, q, now);               // on disconnect
 *   gsp_pace_goodbye(&p, q, done);           // on GOODBYE
 *   gsp_pace_tick(&p, now, lost, max);       // every heartbeat interval; then, for each q:
 *   if (gsp_pace_heartbeat_due(&p, q, now))
 *       ... send q a HEARTBEAT ...
 *   gsp_pace_decision d;
 *   switch (gsp_pace_next(&p, &g, inbox, n_inbox, now, &d)) {
 *   case GSP_PACE_WAIT:                      // ask again at d.wake_at, or when something arrives
 *       break;
 *   case GSP_PACE_START:
 *       gsp_pace_started(&p, now);
 *       ... absorb, local step ...
 *       gsp_pace_route(&p, &g, now, busy, &out);
 *       gsp_emit(&g, &out, msgs);
 *       break;
 *   case GSP_PACE_DONE:                      // every round is done (or nothing to join): finish
 *       break;
 *   }
 *
 * The rules, with the reasons for each, are in gossip/GUARANTEES.md
 * ("Stragglers, leave and join"); each has a unit test on virtual time in
 * tests/unit/test_gossip_pace.c.
 */
#ifndef GOSSIP_GSP_PACE_H
#define GOSSIP_GSP_PACE_H

#include <stdint.h>

#include "gossip/gsp.h"
#include "topologies/topo.h"

#define GSP_PACE_RECENT 32 /* round durations the derived deadline is taken from */

typedef struct gsp_pace_config {
    const topo *topology;
    long total_rounds;     /* the run ends when round total_rounds may start */
    int tau;               /* staleness bound (as gsp_peer.tau) */
    double dead_timeout;   /* seconds of silence or disconnection before a neighbour is routed around */
    double round_timeout;  /* seconds a round waits at most (the first rounds, the round-0 barrier) */
    double round_deadline; /* > 0: seconds a round waits for a late neighbour; else derived */
    int patient;           /* a late message costs more than the wait (the all-gather: its sender comes apart
                            * and takes a whole model to come back): the derived deadline is at least
                            * round_timeout, not at most, and a late neighbour is waited for again from the
                            * next round on */
    int barrier;           /* round 0 waits for every neighbour's connection (up to round_timeout) */
    double alone_wait;     /* seconds a peer whose every in-neighbour has been routed around waits for
                            * one to come back before it goes on alone; <= 0: round_timeout */
} gsp_pace_config;

typedef struct gsp_pace_stats {
    long late_marks;      /* neighbours not waited for past a deadline */
    long catch_ups;       /* jumps forward */
    long refreshes;       /* of them, long enough to take a neighbour's model (GSP_PACE_REFRESH_PART) */
    long rounds_skipped;  /* rounds jumped over */
    long neighbours_lost; /* routed around (silence, disconnection, never connected) */
    long brakes;          /* times a round was held back for running ahead */
    long isolated_rounds; /* emits that kept every share home */
    long alone_waits;     /* times every in-neighbour was lost and the peer waited for one */
    long busy_kept;       /* shares kept home for a busy link or an edge whose ack window is full */
} gsp_pace_stats;

/* What the policy knows of one neighbour (any peer it sends to or hears
 * from in some phase of the schedule). */
typedef struct gsp_pace_nb {
    int peer;
    uint8_t is_in;         /* sends to us in some phase */
    uint8_t pushing;       /* a share of it arrived: it sends to us, if only by routing around dead peers (one
                            * side of a partition: peer 1 of 0..3 on exp4 sends to 0 once 2 and 3 are gone) */
    uint8_t connected;     /* the transport says up (the simulator: the process is there) */
    uint8_t ever_up;
    uint8_t late;          /* missed a deadline: not waited for until it is on time again */
    uint8_t late_count;    /* deadlines missed since it was last strictly on time */
    uint8_t debt;          /* two for each deadline missed, one off for each share on time: a peer that keeps
                            * missing them (a straggler catching up by jumps) is awaited again only after
                            * it has been on time twice as often as it was late */
    uint8_t done;          /* said it finished every round: still takes shares, sends none */
    uint8_t gone;          /* said it stopped (GOODBYE): its frames until it connects again (the hand-off of
                            * one that leaves) do not bring it back */
    long known_round;      /* the latest round it said it is at (-1: none yet) */
    long pushed_round;     /* the round after the latest of its shares that reached us (-1: none yet) */
    long paced_round;      /* the latest round it reported within what time allows (-1: none yet) ... */
    double paced_at;       /* ... and when: its later rounds are believed only as far as gsp_pace_credible */
    double live_since;     /* when its frames came again after a silence of a heartbeat interval or more */
    uint64_t acked_seq;    /* the highest seq of our edge to it that it says it has taken in */
    double unacked_since;  /* when our oldest message to it not yet acknowledged went out */
    uint8_t probe;         /* a share waits for a sign of life from it: send it a HEARTBEAT (gsp_pace_probes) */
    double last_heard, last_sent, down_since;
} gsp_pace_nb;

typedef struct gsp_pace {
    gsp_pace_config c;
    int id, n_peers, period;
    long late_slack;       /* tau + period + 1 */
    gsp_pace_nb *nb;       /* the neighbours, by slot */
    int n_nb;
    int *slot;             /* n_peers: slot of a peer in nb, or -1 */
    uint8_t *alive;        /* n_peers: not routed around (what topo_route and gsp_ready take) */
    uint8_t *awaited;      /* n_peers: alive, not late, not past the round needed */
    double recent[GSP_PACE_RECENT];
    int n_recent;
    double prev_start;     /* < 0: no round started yet */
    double wait_since;     /* when the current round began to wait (< 0: not waiting) */
    long wait_round;
    double last_tick, started;
    long last_emit_round;  /* -1: none yet */
    double fastest;        /* the shortest time between two of this peer's round starts (< 0: none yet) */
    long round_seen;       /* this peer's round when the policy last saw it */
    int isolated, forced, barrier_passed, joining;
    double alone_since;    /* when every in-neighbour had been routed around (< 0: not so) */
    gsp_pace_stats stats;
} gsp_pace;

typedef enum gsp_pace_action { GSP_PACE_WAIT, GSP_PACE_START, GSP_PACE_DONE } gsp_pace_action;

typedef struct gsp_pace_decision {
    double wake_at;   /* WAIT: ask again then at the latest (something arriving may also change the answer) */
    long jumped_from; /* >= 0: the peer caught up, from this round to g->round */
    int refresh;      /* WAIT: the jump was long, so the model is stale: the driver gets a neighbour's
                       * (gsp_adopt, then gsp_pace_joined), or gives up on it (gsp_pace_joined) */
    int braked;       /* WAIT because it ran ahead of the run */
    int alone;        /* WAIT because every in-neighbour is lost (until gsp_pace_config.alone_wait) */
    int n_late;       /* START forced by the deadline: these in-neighbours were marked late */
    int late[TOPO_MAX_OUT * 4];
} gsp_pace_decision;

/* All neighbours alive, none heard yet (their silence counts from now).
 * -ENOMEM, -EINVAL (no topology, id out of range). */
int gsp_pace_init(gsp_pace *p, const gsp_pace_config *c, int id, double now);
void gsp_pace_free(gsp_pace *p);

/* Heartbeat interval: dead_timeout / 4, at most 1 s. */
double gsp_pace_heartbeat(const gsp_pace_config *c);

/* ---- what the transport saw ---------------------------------------------- */

/* Is q a neighbour of ours (it sends to us or we to it in some phase of the
 * schedule)? Only neighbours may send us anything, shares included: routing
 * around a dead peer may send a share to any neighbour of the sender (an
 * out-neighbour of ours too: on a ring, 1 sends to 0 once 2 and 3 are dead),
 * but never to a peer outside its neighbours (that share stays home). So a
 * member that is no neighbour is forged or misconfigured, and the driver
 * closes its connection. */
int gsp_pace_is_neighbour(const gsp_pace *p, int q);

/* A frame from q: returns 1 if q was routed around and is back. */
int gsp_pace_heard(gsp_pace *p, int q, double now);
/* A neighbour runs at most this many times as many rounds a second as this
 * peer's fastest round (a straggler slowed 4.5x still catches up). */
#define GSP_PACE_FASTER 8
/* The highest round q can have reached by now, as far as time allows: the
 * furthest of this peer's own round, any neighbour's latest report within
 * the bound (a peer that caught up jumps to where its in-neighbours are),
 * and q's latest report plus GSP_PACE_FASTER rounds for each of this peer's
 * fastest rounds since; plus twice the catch-up distance (frames queued on a
 * link arrive in bursts). A neighbour that had reported nothing by the time
 * this peer timed a round counts as reporting where the run was then.
 * LONG_MAX while there is no bound: before this peer has timed a round (a
 * peer restarted learns where the run is from its neighbours' first words;
 * one back from a SIGSTOP keeps the bound, which the time it was stopped
 * widens), and for a neighbour known to have done every round (its
 * GOODBYE "done", or a report time allowed: its last shares, and a SYNC it
 * answers with, carry its last round).
 * Claims past it are believed only up to it, and the engine refuses a PUSH
 * past it. */
long gsp_pace_credible(const gsp_pace *p, int q, double now);
/* q says it is at round r (HEARTBEAT), believed up to gsp_pace_credible; at
 * total_rounds or past it, q is done. */
void gsp_pace_claim(gsp_pace *p, int q, long r, double now);
/* A PUSH of round r from q, arrived at now: q is past r, and it may be on
 * time again. */
void gsp_pace_push(gsp_pace *p, const gsp_peer *g, int q, long r, double now);
/* The connection to q is up: returns 1 if q had been routed around. */
int gsp_pace_up(gsp_pace *p, int q, double now);
void gsp_pace_down(gsp_pace *p, int q, double now);
/* q said GOODBYE. done: it finished every round and still takes what is
 * sent to it until its own in-neighbours are done (gsp_pace_in_done), so it
 * is neither routed around nor counted as silent. Else (stopped) it is routed
 * around at once. Returns 1 if it was alive and not done. */
int gsp_pace_goodbye(gsp_pace *p, int q, int done);
/* A peer that leaves on purpose hands its weight to these (gsp_hand_off):
 * every neighbour, in or out, that is alive, connected, not busy and heard
 * within two heartbeat intervals (or done: a finished peer still takes
 * shares), at most TOPO_MAX_OUT; with a codec only those g has sent to
 * already, if there are any (a new edge may need a SYNC, which a peer that
 * is gone cannot send). Any neighbour may send a share
 * (gsp_pace_is_neighbour), so the receivers take it. Returns out->n. */
int gsp_pace_heirs(const gsp_pace *p, const gsp_peer *g, double now, const uint8_t *busy, topo_out *out);
/* Every in-neighbour is done or routed around: a finished peer may close. */
int gsp_pace_in_done(const gsp_pace *p);
/* A neighbour still connected and not routed around that has not
 * acknowledged every message of g's edge to it: over links that lose
 * nothing while up, a finished peer waits for it (its last shares may have
 * been refused there, and come by the SYNC it asks for). */
int gsp_pace_owed(const gsp_pace *p, const gsp_peer *g);
/* The in-neighbours a finished peer still waits for (alive, not done): how
 * many, the first max of them into peers. */
int gsp_pace_waited_for(const gsp_pace *p, int *peers, int max);
/* q says it has taken in our messages up to seq on our edge to it (ACK). */
void gsp_pace_acked(gsp_pace *p, int q, uint64_t seq);
/* Messages an edge may have unacknowledged before its share stays home. */
#define GSP_PACE_ACK_WINDOW(tau) ((uint64_t)(tau) + 2)
/* After gsp_pace_route: the neighbours whose share stayed home for want of
 * an ACK (at most max, into peers; their flags cleared). The driver sends
 * each a HEARTBEAT, which a live peer answers with an ACK: if only the acks
 * were lost (a lossy link), that sign of life lets the next share go. */
int gsp_pace_probes(gsp_pace *p, int *peers, int max);

/* We sent q a frame. */
void gsp_pace_sent(gsp_pace *p, int q, double now);

/* Every heartbeat interval: the neighbours silent (connected) or
 * disconnected for dead_timeout are routed around, at most max of them
 * returned in lost. A tick far later than the interval means this peer was
 * not running: the silence is its own, nobody is blamed. */
int gsp_pace_tick(gsp_pace *p, double now, int *lost, int max);
/* Should q get a HEARTBEAT now (connected, nothing sent to it lately)? */
int gsp_pace_heartbeat_due(const gsp_pace *p, int q, double now);

/* ---- rounds ----------------------------------------------------------------- */

/* What to do at the boundary before round g->round: wait, start it, or
 * finish. May move g forward (catch-up: gsp_jump) and mark late the
 * in-neighbours a deadline gave up on. inbox: messages arrived, not yet
 * absorbed (they count as delivered). */
gsp_pace_action gsp_pace_next(gsp_pace *p, gsp_peer *g, const gsp_msg *inbox, int n_inbox, double now,
                              gsp_pace_decision *d);
/* The round the policy said START for has started at now. */
void gsp_pace_started(gsp_pace *p, double now);
/* The seconds a round waits for a late neighbour now: round_deadline (at
 * most round_timeout), or derived: round_timeout for the first 8 rounds,
 * then twice the lower quartile of the last GSP_PACE_RECENT rounds'
 * durations (those a deadline did not cut short), at least 20 ms, at most
 * round_timeout; patient: at least round_timeout, from the first round on,
 * every round measured. */
double gsp_pace_deadline(const gsp_pace *p);

/* The shares of round g->round: topo_route around dead neighbours, every
 * share home while isolated (no in-neighbour heard lately), a busy link's
 * share home (busy: NULL or n_peers flags), so is the share of an edge with
 * GSP_PACE_ACK_WINDOW messages not yet acknowledged, and after skipped rounds the
 * weight of those rounds too (at most half of w; with a codec the emit then
 * sends the model whole: g->refresh). Call right before gsp_emit. */
void gsp_pace_route(gsp_pace *p, gsp_peer *g, double now, const uint8_t *busy, topo_out *out);

/* The median round its heard in-neighbours last reported (-1: none). */
long gsp_pace_cluster_round(const gsp_pace *p, double now);

/* ---- joining -------------------------------------------------------------- */

/* A catch-up longer than a GSP_PACE_REFRESH_PART-th of the run (and than
 * twice the catch-up threshold) takes a neighbour's model (refresh). */
#define GSP_PACE_REFRESH_PART 20.0

/* A peer that comes back without state waits for a model (no round starts
 * until gsp_join). */
void gsp_pace_set_joining(gsp_pace *p);
/* It has come back (gsp_join or gsp_resume): no round-0 barrier. */
void gsp_pace_joined(gsp_pace *p);

#endif
