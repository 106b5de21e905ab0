/* libsgp's step strategy, the hand-off between the loop and a caller that
 * steps itself: see handoff.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "peer/lib/handoff.h"

/* ---- the caller's side ------------------------------------------------------- */

/* Under mu. */
static void wake_loop(handoff *h)
{
    if (h->wake_open)
        uv_async_send(&h->wake);
}

int handoff_round(handoff *h, float *params, int stepped)
{
    pthread_mutex_lock(&h->mu);
    int rc;
    if (h->ended) {
        rc = h->rc < 0 ? h->rc : HANDOFF_ENDED;
        pthread_mutex_unlock(&h->mu);
        return rc;
    }
    h->params = params, h->stepped = stepped, h->handed = 0;
    wake_loop(h);
    while (!h->handed && !h->ended)
        pthread_cond_wait(&h->cv, &h->mu);
    rc = h->handed ? HANDOFF_HANDED : h->rc < 0 ? h->rc : HANDOFF_ENDED;
    h->params = NULL, h->stepped = 0, h->handed = 0;
    pthread_mutex_unlock(&h->mu);
    return rc;
}

int handoff_checkpoint(handoff *h)
{
    pthread_mutex_lock(&h->mu);
    h->checkpoint_asked = 1;
    wake_loop(h);
    while (h->checkpoint_asked && !h->ended)
        pthread_cond_wait(&h->cv, &h->mu);
    int rc = h->checkpoint_asked ? (h->rc < 0 ? h->rc : -ESHUTDOWN) : h->checkpoint_rc;
    h->checkpoint_asked = 0;
    pthread_mutex_unlock(&h->mu);
    return rc;
}

void handoff_stop(handoff *h)
{
    pthread_mutex_lock(&h->mu);
    h->stop_asked = 1;
    wake_loop(h);
    pthread_mutex_unlock(&h->mu);
}

void handoff_status(handoff *h, node_status *s)
{
    pthread_mutex_lock(&h->mu);
    *s = h->status;
    s->ended = h->ended;
    pthread_mutex_unlock(&h->mu);
}

/* ---- the loop's side: the node_stepper ---------------------------------------- */

/* The round has started: its model goes to a caller waiting for it,
 * written straight into its parameters (no z beside x); it holds the round
 * until it comes back with its step. */
static void give(void *ctx, node *n)
{
    handoff *h = ctx;
    node_status s;
    node_status_of(n, &s);
    pthread_mutex_lock(&h->mu);
    h->status = s;
    if (h->params && !h->stepped && !h->handed) {
        node_model_to(n, h->params);
        h->handed = 1;
        pthread_cond_broadcast(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
}

/* The caller asked for something: a stop, a checkpoint, or it is back with
 * its step for the round the loop holds. */
static void on_wake(uv_async_t *a)
{
    handoff *h = a->data;
    node *n = h->loop_node;
    const int holding = node_holding(n);
    pthread_mutex_lock(&h->mu);
    const int stop = h->stop_asked, checkpoint = h->checkpoint_asked;
    float *stepped = NULL;
    if (holding && h->stepped && h->params) { /* (its buffer stays the loop's until the next hand-out: it waits) */
        h->stepped = 0;
        stepped = h->params;
    }
    pthread_mutex_unlock(&h->mu);
    if (checkpoint)
        node_checkpoint_now(n); /* answers the caller (after a periodic write in flight) */
    if (stop) {
        node_stop(n);
        return;
    }
    if (stepped) {
        node_step_taken(n, stepped);
        return;
    }
    if (holding)
        give(h, n); /* the caller is waiting for a round that has already started */
}

static int open_wake(void *ctx, node *n, uv_loop_t *loop)
{
    handoff *h = ctx;
    int rc = uv_async_init(loop, &h->wake, on_wake);
    if (rc < 0)
        return rc;
    h->wake.data = h;
    h->loop_node = n;
    pthread_mutex_lock(&h->mu);
    h->wake_open = 1;
    pthread_mutex_unlock(&h->mu);
    return 0;
}

static void close_wake(void *ctx)
{
    handoff *h = ctx;
    pthread_mutex_lock(&h->mu);
    h->wake_open = 0;
    pthread_mutex_unlock(&h->mu);
    uv_close((uv_handle_t *)&h->wake, NULL);
}

static void checkpointed(void *ctx, int rc)
{
    handoff *h = ctx;
    pthread_mutex_lock(&h->mu);
    if (h->checkpoint_asked) {
        h->checkpoint_asked = 0;
        h->checkpoint_rc = rc;
        pthread_cond_broadcast(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
}

static void end(void *ctx, int rc, const char *err, const float *z, const node_status *s)
{
    handoff *h = ctx;
    pthread_mutex_lock(&h->mu);
    h->status = *s;
    if (z && h->params && !h->handed)
        memcpy(h->params, z, h->stepper.dim * sizeof *z);
    h->rc = rc;
    snprintf(h->err, sizeof h->err, "%s", rc < 0 && err ? err : "");
    h->ended = 1;
    h->wake_open = 0;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* ---- set-up -------------------------------------------------------------------- */

int handoff_init(handoff *h, const float *x0, size_t dim, long rounds, long rounds_per_epoch)
{
    memset(h, 0, sizeof *h);
    if (dim == 0 || rounds < 1)
        return -EINVAL;
    h->stepper = (node_stepper){.ctx = h, .x0 = x0, .dim = dim, .rounds = rounds,
                                .rounds_per_epoch = rounds_per_epoch > 0 ? rounds_per_epoch : rounds,
                                .open = open_wake, .close = close_wake, .give = give,
                                .checkpointed = checkpointed, .end = end};
    if (pthread_mutex_init(&h->mu, NULL) != 0)
        return -ENOMEM;
    if (pthread_cond_init(&h->cv, NULL) != 0) {
        pthread_mutex_destroy(&h->mu);
        return -ENOMEM;
    }
    return 0;
}

void handoff_free(handoff *h)
{
    if (!h || !h->stepper.dim)
        return;
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    memset(h, 0, sizeof *h);
}

const node_stepper *handoff_stepper(handoff *h) { return &h->stepper; }
