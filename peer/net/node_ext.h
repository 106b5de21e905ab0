/* The hand-off between a networked peer's loop and a caller that takes the
 * local steps itself (libsgp, peer/lib/sgp.h). The loop runs node_run on its
 * own thread; the caller's thread blocks in node_ext_round while the loop
 * applies its step, emits, waits for the next round and absorbs.
 *
 *   node_ext e;
 *   node_ext_init(&e, dim, rounds, rounds_per_epoch);
 *   e.params = x0;                                 // read by node_run's set-up
 *   config.ext = &e;
 *   ... start a thread running node_run(&config, NULL, NULL, &result, err, sizeof err) ...
 *   node_ext_round(&e, x0, 0);                     // 0: x0 holds the model to start from
 *   for (;;) {
 *       ... the caller's optimizer step on x0 ...
 *       int rc = node_ext_round(&e, x0, 1);        // 0: mixed, 1: the run is over, < 0: error
 *   }
 *   node_ext_stop(&e); ... join the thread ...; node_ext_free(&e);
 *
 * One round belongs to one side at a time: from a hand-out until the caller
 * comes back with its step, the loop only queues what arrives (as it does
 * while its thread pool computes a step for sgp peer), so the caller may
 * read and write its buffer freely, and the loop reads and writes it only
 * while the caller waits. Everything shared is under mu.
 */
#ifndef PEER_NET_NODE_EXT_H
#define PEER_NET_NODE_EXT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* What the caller may ask between steps (sgp_status), as of the last hand-out. */
typedef struct node_status {
    int id, peers;
    long round, start_round, local_steps;
    double weight;
    int neighbours, neighbours_alive;
    uint64_t bytes_sent, bytes_received, messages_sent, messages_absorbed;
    long late_marks, catch_ups, neighbours_lost, checkpoints;
    int ended;              /* the loop is over (set by node_ext_status) */
} node_status;

typedef struct node_ext node_ext;

struct node_ext {
    size_t dim;
    long rounds, rounds_per_epoch;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uv_async_t wake;        /* the caller's thread -> the loop (initialised by the loop) */
    int wake_open;          /* the loop's wake handle may be signalled */
    /* the caller's side, under mu */
    float *params;          /* its buffer while it waits (read for x0 by node_run's set-up) */
    int stepped;            /* params hold its step from the model last handed out */
    int checkpoint_asked, stop_asked;
    /* the loop's side, under mu */
    int handed;             /* params hold the model for the caller's next step */
    int checkpoint_rc, ended, rc;
    char err[512];          /* why the loop ended, when rc < 0 */
    node_status status;
};

/* 0, or -ENOMEM / -EINVAL. */
int node_ext_init(node_ext *e, size_t dim, long rounds, long rounds_per_epoch);
void node_ext_free(node_ext *e);

/* ---- the caller's side ------------------------------------------------------- */

/* stepped 0: wait for the first round (params receive the model to start
 * from); 1: params hold the step from the model last handed out; apply it,
 * and wait for the next round's model. 0 when params hold it, 1 when the run
 * is over (params hold the final model), or the loop's negative errno (e->err
 * says why). */
int node_ext_round(node_ext *e, float *params, int stepped);
/* Write a checkpoint at the current round boundary: 0 or a negative errno. */
int node_ext_checkpoint(node_ext *e);
/* Ask the loop to stop (goodbye, final checkpoint); returns at once. */
void node_ext_stop(node_ext *e);
void node_ext_status(node_ext *e, node_status *s);

/* ---- the loop's side (node.c) ----------------------------------------------- */

/* What the caller has asked for, taken under mu: a stop, a checkpoint, and
 * whether it came back with a step (which has then been applied to g). */
typedef struct node_ext_asks {
    int stop, checkpoint, stepped;
} node_ext_asks;

struct gsp_peer;
void node_ext_take(node_ext *e, struct gsp_peer *g, int holding, node_ext_asks *a);
/* The round may start: hand its model z = x / w to a caller waiting for it
 * (written straight into the caller's parameters: no z beside x). */
void node_ext_hand_out(node_ext *e, const struct gsp_peer *g, const node_status *s);
void node_ext_checkpointed(node_ext *e, int rc);
/* No more signals: the loop is closing its wake handle. */
void node_ext_closing(node_ext *e);
/* node_run is over: rc, why, and the final model (NULL if there is none). */
void node_ext_end(node_ext *e, int rc, const char *err, const float *z, const node_status *s);

#endif
