/* SGP in one loop: see reference.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/core/reference.h"

/* A frame reaches its peer at once. A PUSH is copied: the receiver's inbox
 * owns what it holds, the sender's message points into its state. */
static int deliver(engine **peers, int from, const engine_send *s, double now)
{
    engine *to = peers[s->peer];
    switch (s->kind) {
    case ENGINE_PUSH: {
        gsp_msg m;
        int rc = gsp_msg_copy(&m, &s->msg);
        return rc < 0 ? rc : engine_push(to, &m, now);
    }
    case ENGINE_ACK:
        engine_ack(to, from, s->seq, now);
        return 0;
    case ENGINE_NACK:
        engine_nack(to, from, s->seq, now);
        return 0;
    case ENGINE_HEARTBEAT:
        engine_heartbeat(to, from, s->round, now);
        return 0;
    case ENGINE_GOODBYE:
        engine_goodbye(to, from, s->done, now);
        return 0;
    case ENGINE_MODEL_REQUEST:
        engine_model_request(to, from, now);
        return 0;
    case ENGINE_MODEL: {
        float *z = malloc(s->dim * sizeof *z);
        if (!z)
            return -ENOMEM;
        engine_model_values(s, z);
        engine_model(to, from, s->round, z, 1, now);
        free(z);
        return 0;
    }
    case ENGINE_MODEL_SOON:
        engine_model_soon(to, from, now);
        return 0;
    }
    return 0;
}

/* Everything peer i has to say and do now: 1 if it did anything, 0 if it
 * waits, or a negative errno. */
static int run_peer(engine **peers, int i, nn_model *model, double now, int *finished)
{
    engine *e = peers[i];
    int acted = 0, rc;
    engine_send s;
    while (engine_poll_send(e, &s))
        if ((rc = deliver(peers, i, &s, now)) < 0)
            return rc;
        else
            acted = 1;
    engine_event v;
    while (engine_poll_event(e, &v)) {
        acted = 1;
        switch (v.kind) {
        case ENGINE_STEP: /* the round's local steps, then its shares */
            engine_compute_step(e, model);
            engine_step_done(e, now);
            break;
        case ENGINE_BOUNDARY: /* (where a peer would evaluate, log and checkpoint) */
            engine_advance(e, now);
            break;
        case ENGINE_FINISHED:
            if (v.rc < 0)
                return v.rc;
            (*finished)++;
            break;
        case ENGINE_DONE:
        case ENGINE_LOG:
            break;
        }
    }
    return acted;
}

int reference_run(const peer_settings *c, const round_plan *plan, const nn_dataset *train, nn_model *model,
                  engine **peers, char *err, size_t errlen)
{
    const int n = c->n_peers;
    int rc = 0, finished = 0;
    for (int i = 0; i < n && rc == 0; i++)
        if ((rc = engine_new(&peers[i], c, plan, i, train, model->params, model->n_params, 0, 0.0, err, errlen)) < 0)
            while (i-- > 0)
                engine_free(peers[i]);
    if (rc < 0)
        return rc;
    for (int i = 0; i < n; i++) { /* every link up, then round 0 */
        const gsp_pace *pc = engine_pace(peers[i]);
        for (int k = 0; k < pc->n_nb; k++)
            engine_link_up(peers[i], pc->nb[k].peer, 0.0);
    }
    for (int i = 0; i < n; i++)
        engine_advance(peers[i], 0.0);
    /* Time stands still while any peer can act; when all wait, it moves to
     * the earliest time one asked to be woken at. */
    double now = 0.0;
    while (finished < n) {
        int acted = 0;
        for (int i = 0; i < n && rc >= 0; i++)
            if ((rc = run_peer(peers, i, model, now, &finished)) > 0)
                acted = 1;
        if (rc < 0)
            break;
        if (acted || finished == n)
            continue;
        double next = INFINITY;
        for (int i = 0; i < n; i++)
            next = fmin(next, engine_wake_at(peers[i], now));
        if (!isfinite(next)) {
            rc = -EDEADLK; /* nobody will ever act again: a bug in the engine */
            break;
        }
        now = next;
        for (int i = 0; i < n; i++)
            if (engine_wake_at(peers[i], now) <= now)
                engine_timer(peers[i], now);
    }
    if (rc < 0) {
        snprintf(err, errlen, "the reference loop stopped at %.3f s: %s", now, strerror(-rc));
        for (int i = 0; i < n; i++)
            engine_free(peers[i]);
        return rc;
    }
    return 0;
}
