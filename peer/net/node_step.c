/* The networked peer's own local steps: on libuv's thread pool while the
 * loop keeps receiving (only the worker touches x meanwhile), padded for an
 * emulated slow machine (--slow); or handed to the caller (libsgp). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "peer/core/clock.h"
#include "peer/net/node_state.h"

static void work_step(uv_work_t *w)
{
    node *n = w->data;
    const double t0 = clock_now();
    engine_compute_step(n->e, &n->model);
    n->step_seconds += clock_now() - t0;
    if (n->slow_pad > 0) { /* an emulated slow machine (--slow) */
        double pad = n->slow_pad;
        struct timespec ts = {(time_t)pad, (long)((pad - (double)(time_t)pad) * 1e9)};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
        }
    }
}

static void after_step(uv_work_t *w, int status)
{
    if (status == 0) /* (else cancelled at shutdown) */
        node_step_done(w->data);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* --slow F: once 48 rounds have run at full speed (the first ones are slow:
 * connections, caches), pad every step so that a round takes F times the
 * median of the last ones (a peer at 1/F of its speed: round times here are
 * mostly the cluster's rhythm, not this peer's compute). */
static void slow_down(node *n)
{
    const gsp_pace *pc = engine_pace(n->e);
    if (n->c->slow <= 1.0 || n->slow_pad > 0 || pc->n_recent < 48)
        return;
    double d[GSP_PACE_RECENT];
    memcpy(d, pc->recent, sizeof d);
    qsort(d, GSP_PACE_RECENT, sizeof *d, cmp_double);
    n->slow_pad = (n->c->slow - 1.0) * d[GSP_PACE_RECENT / 2];
    char why[64];
    snprintf(why, sizeof why, "+%.1f ms a step (%.4gx a %.1f ms round)", 1e3 * n->slow_pad, n->c->slow,
             1e3 * d[GSP_PACE_RECENT / 2]);
    node_event(n, "slowed down", -1, why);
}

/* A round has started: its steps are computed on the thread pool, or by the
 * caller (libsgp). */
void node_start_step(node *n)
{
    n->round_start = clock_now();
    if (n->c->stepper) {
        n->c->stepper->give(n->c->stepper->ctx, n);
        return;
    }
    slow_down(n);
    uv_queue_work(&n->loop, &n->work, work_step, after_step);
}
