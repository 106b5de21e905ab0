/* A peer that wants a model (a joiner, or one far behind: engine.c's
 * start_refresh) asks its neighbours for theirs in turn, waits for one that
 * promised it (MODEL_SOON) for a bounded time, and asks the next; see
 * engine_state.h. */
#include <stdio.h>

#include "peer/core/engine_state.h"

/* The next connected neighbour, round robin from the last one asked (and
 * the next at once if the transport refuses the request: ask_left); the
 * next again after a heartbeat interval without an answer: the one asked
 * may be waiting for a model itself, and says nothing. One that says its
 * model comes after its step (MODEL_SOON) is waited for while it is
 * connected and heard: a model of hundreds of MB is not asked of a second
 * neighbour while the first one's is being made or is on its way. */
void engine_ask_next(engine *e, double now)
{
    const gsp_pace *pc = &e->rp.pace;
    e->promised = 0; /* (every ask goes through here: a promise only counts while a model is wanted) */
    for (int k = 1; k <= e->ask_left; k++) {
        const int j = (e->asked + k) % pc->n_nb, q = pc->nb[j].peer;
        if (engine_connected(e, q)) {
            engine_queue(e, (engine_send){.kind = ENGINE_MODEL_REQUEST, .peer = q, .dim = e->rp.g.dim}, now);
            e->asked = j, e->asked_at = now, e->ask_left -= k;
            engine_log_event(e, ENGINE_LOG_MODEL_ASKED, q, NULL);
            return;
        }
    }
    e->ask_left = 0;
}

void engine_ask_for_model(engine *e, double now)
{
    e->ask_left = e->rp.pace.n_nb;
    engine_ask_next(e, now);
}

/* How long a promise (MODEL_SOON) holds: the promiser's step ends within
 * a round's limit, and its model then takes its size at the slowest rate.
 * A member that promises and then only says it is alive keeps a joiner no
 * longer than this. */
static double promise_limit(const engine *e)
{
    return e->rp.pace.c.round_timeout + 4.0 * (double)e->rp.g.dim / ENGINE_SLOWEST_BYTES_PER_S;
}

/* The neighbour asked last promised its model and sent none in time: it is
 * not believed again (a later MODEL_SOON of it changes nothing; a MODEL of
 * it is still taken), the next neighbour is asked, and the join gets its
 * round timeout again from now (each neighbour can cost it one limit). */
static void give_up_promise(engine *e, double now)
{
    const int q = e->rp.pace.nb[e->asked].peer;
    char why[64];
    snprintf(why, sizeof why, "no model %.0f s after its MODEL_SOON", promise_limit(e));
    engine_log_event(e, ENGINE_LOG_PROMISE_BROKEN, q, why);
    e->promise_broken[q] = 1;
    e->promised = 0;
    e->join_since = now;
}

int engine_ask_due(const engine *e, double now)
{
    if (!engine_wants_model(e))
        return 0;
    if (e->promised) { /* until the one that promised disconnects or is silent for twice the dead timeout: it
                        * says nothing while it builds a big MODEL frame (seconds at 100M parameters) */
        const gsp_pace_nb *b = &e->rp.pace.nb[e->asked];
        return !b->connected || now - b->last_heard > 2 * e->rp.pace.c.dead_timeout;
    }
    return now - e->asked_at > gsp_pace_heartbeat(&e->rp.pace.c);
}

void engine_pull_tick(engine *e, double now)
{
    if (e->promised && engine_wants_model(e) && now - e->promised_at > promise_limit(e))
        give_up_promise(e, now);
    if (engine_ask_due(e, now))
        engine_ask_for_model(e, now);
}

float *engine_model_landing(engine *e)
{
    return e->joining && !e->computing && !e->finished ? e->rp.g.x : NULL;
}
