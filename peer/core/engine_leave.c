/* A peer that leaves on purpose (engine.h: engine_leave), and slots nobody
 * holds yet (engine_absent): when the weight goes (after the neighbours'
 * answers to its goodbye), to whom, and what is said when it cannot.
 * engine.c's try_start asks engine_leave_ready, then engine_hand_off, then
 * engine_leave_acked before it finishes the stop. */
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

/* A peer that leaves first says goodbye to each connected neighbour, which
 * routes around it at once and answers (GOODBYE "seen") after the shares it
 * had already sent it: once every answer is in, nothing more of theirs
 * comes, and the weight it hands on is all of its own and all they sent.
 * An answer that never comes (a link that drops it, a neighbour stopped)
 * is waited for a dead timeout at most. */
static void say_goodbye(engine *e, double now)
{
    const gsp_pace *pc = &e->rp.pace;
    e->bye_said = 1;
    e->bye_until = now + pc->c.dead_timeout;
    for (int k = 0; k < pc->n_nb; k++) {
        const int q = pc->nb[k].peer;
        if (pc->nb[k].connected && pc->alive[q]) {
            engine_queue(e, (engine_send){.kind = ENGINE_GOODBYE, .peer = q, .done = ENGINE_BYE_STOPPED}, now);
            e->bye_wait[q] = 1;
        }
    }
}

static int answers_due(const engine *e)
{
    const gsp_pace *pc = &e->rp.pace;
    for (int k = 0; k < pc->n_nb; k++)
        if (e->bye_wait[pc->nb[k].peer] && pc->nb[k].connected)
            return 1;
    return 0;
}

int engine_leave_ready(engine *e, double now)
{
    if (e->stepped) /* (the steps taken are part of what it hands on) */
        engine_fold_steps(e);
    if (e->joining || e->refreshing || e->rp.g.gather || e->rounds_done)
        return 1;
    if (!e->bye_said)
        say_goodbye(e, now);
    if (now >= e->bye_until || !answers_due(e))
        return 1;
    e->wake = e->bye_until;
    return 0;
}

void engine_bye_answer(engine *e, int q, double now)
{
    if (!e->finished)
        engine_queue(e, (engine_send){.kind = ENGINE_GOODBYE, .peer = q, .done = ENGINE_BYE_SEEN}, now);
}

void engine_bye_seen(engine *e, int q) { e->bye_wait[q] = 0; }

/* Everything that has arrived, then all of (x, w) to the live neighbours,
 * ahead of the GOODBYE that finishing has the driver send. */
int engine_hand_off(engine *e, double now)
{
    if (e->handed_off)
        return 0;
    e->handed_off = 1, e->acked_until = now + e->rp.pace.c.dead_timeout;
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

/* Over links that lose nothing while up, the stop waits until every
 * connected neighbour has acknowledged all it was sent, for a dead timeout
 * at most: one that refused our last shares at its door (it held too many
 * of ours, running behind) asks for them with a NACK, and the SYNC that
 * answers carries the hand-off too (an edge's totals count every share). */
int engine_leave_acked(engine *e, double now)
{
    if (!e->rp.c->reliable_links || now >= e->acked_until || !gsp_pace_owed(&e->rp.pace, &e->rp.g))
        return 1;
    e->wake = e->acked_until;
    return 0;
}
