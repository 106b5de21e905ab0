/* A peer that leaves on purpose (engine.h: engine_leave), and slots nobody
 * holds yet (engine_absent): when the weight goes, to whom, and what is said
 * when it cannot. engine.c's try_start asks engine_leave_ready and then
 * engine_hand_off before it finishes the stop. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "peer/core/engine_state.h"

void engine_absent(engine *e, int q) { (void)gsp_pace_goodbye(&e->rp.pace, q, 0); }

void engine_leave(engine *e, double now)
{
    if (!e->stopping)
        e->leaving = 1, e->leave_since = now;
    engine_stop(e, now);
}

/* A peer that leaves hands its weight on when the round it stopped before
 * may start (gsp_pace_next: the in-neighbours' shares of the round before
 * are in, or the deadline has passed), so that the shares on their way to
 * it go on with its own; at most a dead timeout after the stop. */
int engine_leave_ready(engine *e, double now)
{
    if (e->stepped) /* (the steps taken are part of what it hands on) */
        engine_fold_steps(e);
    if (e->joining || e->refreshing || e->rp.g.gather || e->rounds_done)
        return 1;
    const double limit = e->leave_since + e->rp.pace.c.dead_timeout;
    gsp_pace_decision d;
    if (now >= limit || round_next(&e->rp, now, &d) != GSP_PACE_WAIT)
        return 1;
    e->wake = fmin(d.wake_at, limit);
    return 0;
}

/* Everything that has arrived, then all of (x, w) to the live neighbours,
 * ahead of the GOODBYE that finishing has the driver send. */
int engine_hand_off(engine *e, double now)
{
    round_peer *rp = &e->rp;
    char detail[96];
    const char *why = e->joining ? "it has no model yet" : rp->g.gather ? "--gather moves no mass" : NULL;
    if (e->finished || why) {
        if (why)
            engine_log_event(e, ENGINE_LOG_LEFT_WITH_WEIGHT, -1, why);
        return 0;
    }
    engine_absorb(e, 1);
    topo_out to;
    if (gsp_pace_heirs(&rp->pace, &rp->g, now, e->busy, &to) == 0) {
        snprintf(detail, sizeof detail, "%.6g: no neighbour connected and heard to take it", rp->g.w);
        engine_log_event(e, ENGINE_LOG_LEFT_WITH_WEIGHT, -1, detail);
        return 0;
    }
    const double w = rp->g.w;
    gsp_msg msgs[TOPO_MAX_OUT];
    const int m = gsp_hand_off(&rp->g, &to, msgs);
    if (m == -EDOM)
        return m;
    if (m < 0) {
        snprintf(detail, sizeof detail, "%.6g: %s", w, strerror(-m));
        engine_log_event(e, ENGINE_LOG_LEFT_WITH_WEIGHT, -1, detail);
        return 0;
    }
    for (int j = 0; j < m; j++)
        engine_queue(e, (engine_send){.kind = ENGINE_PUSH, .peer = msgs[j].dst, .msg = msgs[j]}, now);
    int len = snprintf(detail, sizeof detail, "%.6g to", w);
    for (int j = 0; j < m && j < 6 && len < (int)sizeof detail; j++)
        len += snprintf(detail + len, sizeof detail - (size_t)len, " %d", msgs[j].dst);
    if (m > 6 && len < (int)sizeof detail)
        snprintf(detail + len, sizeof detail - (size_t)len, " and %d more", m - 6);
    engine_log_event(e, ENGINE_LOG_HANDED_OFF, -1, detail);
    return 0;
}
