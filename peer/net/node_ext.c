/* The hand-off between the loop and a caller that steps itself: see node_ext.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "peer/core/engine.h"
#include "peer/net/node_ext.h"

int node_ext_init(node_ext *e, size_t dim, long rounds, long rounds_per_epoch)
{
    memset(e, 0, sizeof *e);
    if (dim == 0 || rounds < 1)
        return -EINVAL;
    e->dim = dim, e->rounds = rounds;
    e->rounds_per_epoch = rounds_per_epoch > 0 ? rounds_per_epoch : rounds;
    if (pthread_mutex_init(&e->mu, NULL) != 0)
        return -ENOMEM;
    if (pthread_cond_init(&e->cv, NULL) != 0) {
        pthread_mutex_destroy(&e->mu);
        return -ENOMEM;
    }
    return 0;
}

void node_ext_free(node_ext *e)
{
    if (!e || !e->dim)
        return;
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    memset(e, 0, sizeof *e);
}

/* ---- the caller's side ------------------------------------------------------- */

/* Under mu. */
static void wake_loop(node_ext *e)
{
    if (e->wake_open)
        uv_async_send(&e->wake);
}

int node_ext_round(node_ext *e, float *params, int stepped)
{
    pthread_mutex_lock(&e->mu);
    int rc;
    if (e->ended) {
        rc = e->rc < 0 ? e->rc : 1;
        pthread_mutex_unlock(&e->mu);
        return rc;
    }
    e->params = params, e->stepped = stepped, e->handed = 0;
    wake_loop(e);
    while (!e->handed && !e->ended)
        pthread_cond_wait(&e->cv, &e->mu);
    rc = e->handed ? 0 : e->rc < 0 ? e->rc : 1;
    e->params = NULL, e->stepped = 0, e->handed = 0;
    pthread_mutex_unlock(&e->mu);
    return rc;
}

int node_ext_checkpoint(node_ext *e)
{
    pthread_mutex_lock(&e->mu);
    e->checkpoint_asked = 1;
    wake_loop(e);
    while (e->checkpoint_asked && !e->ended)
        pthread_cond_wait(&e->cv, &e->mu);
    int rc = e->checkpoint_asked ? (e->rc < 0 ? e->rc : -ESHUTDOWN) : e->checkpoint_rc;
    e->checkpoint_asked = 0;
    pthread_mutex_unlock(&e->mu);
    return rc;
}

void node_ext_stop(node_ext *e)
{
    pthread_mutex_lock(&e->mu);
    e->stop_asked = 1;
    wake_loop(e);
    pthread_mutex_unlock(&e->mu);
}

void node_ext_status(node_ext *e, node_status *s)
{
    pthread_mutex_lock(&e->mu);
    *s = e->status;
    s->ended = e->ended;
    pthread_mutex_unlock(&e->mu);
}

/* ---- the loop's side --------------------------------------------------------- */

void node_ext_take(node_ext *e, int holding, node_ext_asks *a)
{
    pthread_mutex_lock(&e->mu);
    a->stop = e->stop_asked;
    a->checkpoint = e->checkpoint_asked;
    a->stepped = NULL;
    if (holding && e->stepped && e->params) {
        e->stepped = 0;
        a->stepped = e->params;
    }
    pthread_mutex_unlock(&e->mu);
}

void node_ext_hand_out(node_ext *e, const struct engine *g, const node_status *s)
{
    pthread_mutex_lock(&e->mu);
    e->status = *s;
    if (e->params && !e->stepped && !e->handed) {
        engine_model_to(g, e->params);
        e->handed = 1;
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
}

void node_ext_checkpointed(node_ext *e, int rc)
{
    pthread_mutex_lock(&e->mu);
    if (e->checkpoint_asked) {
        e->checkpoint_asked = 0;
        e->checkpoint_rc = rc;
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
}

void node_ext_closing(node_ext *e)
{
    pthread_mutex_lock(&e->mu);
    e->wake_open = 0;
    pthread_mutex_unlock(&e->mu);
}

void node_ext_end(node_ext *e, int rc, const char *err, const float *z, const node_status *s)
{
    pthread_mutex_lock(&e->mu);
    e->status = *s;
    if (z && e->params && !e->handed)
        memcpy(e->params, z, e->dim * sizeof *z);
    e->rc = rc;
    snprintf(e->err, sizeof e->err, "%s", rc < 0 && err ? err : "");
    e->ended = 1;
    e->wake_open = 0;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}
