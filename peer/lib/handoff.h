/* libsgp's step strategy: the hand-off between a networked peer's loop and
 * a caller that takes the local steps itself (peer/lib/sgp.h). The loop runs
 * node_run on its own thread with handoff_stepper's node_stepper; the
 * caller's thread blocks in handoff_round while the loop applies its step,
 * emits, waits for the next round and absorbs.
 *
 *   handoff h;
 *   handoff_init(&h, x0, dim, rounds, rounds_per_epoch);
 *   c.stepper = handoff_stepper(&h);              // c: the node_config, set up as for sgp peer
 *   ... start a thread running node_run(&c, NULL, NULL, &result, err, sizeof err) ...
 *   handoff_round(&h, x0, 0);                     // HANDOFF_HANDED: x0 holds the model to start from
 *   for (;;) {
 *       ... the caller's optimizer step on x0 ...
 *       int rc = handoff_round(&h, x0, 1);        // HANDOFF_HANDED: mixed, HANDOFF_ENDED: over, < 0: error
 *   }
 *   handoff_stop(&h); ... join the thread ...; handoff_free(&h);
 *
 * One round belongs to one side at a time: from a hand-out until the caller
 * comes back with its step, the loop only queues what arrives (as it does
 * while its thread pool computes a step for sgp peer), so the caller may
 * read and write its buffer freely, and the loop reads and writes it only
 * while the caller waits. Everything shared is under mu.
 */
#ifndef PEER_LIB_HANDOFF_H
#define PEER_LIB_HANDOFF_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "peer/net/node.h"

typedef struct handoff {
    node_stepper stepper;   /* what node_run is given: the run's plan and the loop's side below */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uv_async_t wake;        /* the caller's thread -> the loop (initialised by the loop) */
    int wake_open;          /* the loop's wake handle may be signalled */
    node *loop_node;        /* the node the loop runs (set when it opens) */
    /* the caller's side, under mu */
    float *params;          /* its buffer while it waits */
    int stepped;            /* params hold its step from the model last handed out */
    int checkpoint_asked, stop_asked;
    /* the loop's side, under mu */
    int handed;             /* params hold the model for the caller's next step */
    int checkpoint_rc, ended, rc;
    char err[512];          /* why the loop ended, when rc < 0 */
    node_status status;
} handoff;

/* x0: dim floats to start from (read by node_run's set-up). 0, or -ENOMEM / -EINVAL. */
int handoff_init(handoff *h, const float *x0, size_t dim, long rounds, long rounds_per_epoch);
void handoff_free(handoff *h);
/* What node_config.stepper takes. */
const node_stepper *handoff_stepper(handoff *h);

/* What handoff_round found when the loop did not fail. */
enum handoff_result { HANDOFF_HANDED = 0, HANDOFF_ENDED = 1 };

/* stepped 0: wait for the first round (params receive the model to start
 * from); 1: params hold the step from the model last handed out; apply it,
 * and wait for the next round's model. HANDOFF_HANDED when params hold it,
 * HANDOFF_ENDED when the run is over (params hold the final model), or the
 * loop's negative errno (h->err says why). */
int handoff_round(handoff *h, float *params, int stepped);
/* Write a checkpoint at the current round boundary: 0 or a negative errno. */
int handoff_checkpoint(handoff *h);
/* Ask the loop to stop (goodbye, final checkpoint); returns at once. */
void handoff_stop(handoff *h);
void handoff_status(handoff *h, node_status *s);

#endif
