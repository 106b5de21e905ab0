/* The peer engine's life: made, set up, brought back after a crash or a
 * restart, freed (engine.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gsp_gather.h"
#include "peer/core/engine_state.h"

static void reset(engine *e, double now)
{
    const size_t n = (size_t)e->n_peers;
    memset(e->busy, 0, n), memset(e->sending, 0, n);
    memset(e->model_wanted, 0, n), memset(e->model_queued, 0, n);
    memset(e->ack_due, 0, n * sizeof *e->ack_due), memset(e->ack_sent, 0, n * sizeof *e->ack_sent);
    memset(e->ack_incarnation, 0, n * sizeof *e->ack_incarnation), memset(e->sync_queued, 0, n * sizeof *e->sync_queued);
    memset(e->sync_asked, 0, n * sizeof *e->sync_asked), memset(e->gap_seq, 0, n * sizeof *e->gap_seq);
    e->computing = e->stopping = e->said_done = e->rounds_done = e->finished = e->handed_off = 0;
    e->stepped = e->absorbed = e->start_ready = e->steps_void = e->emit_due = 0;
    e->caller_z = NULL;
    e->joining = e->refreshing = e->asked = e->ask_left = e->promised = e->alone = e->fail = 0;
    e->diverged = NULL;
    e->apart_asked = -1, e->apart_asked_round = -1;
    e->held = 1;
    e->asked_at = e->refresh_since = e->promised_at = -INFINITY;
    e->first_step_at = e->done_at = -1;
    memset(e->promise_broken, 0, n);
    for (size_t q = 0; q < n; q++)
        e->model_sent_round[q] = -1;
    e->join_since = e->last_ckpt = now;
    e->next_tick = now + gsp_pace_heartbeat(&e->rp.pace.c);
    e->wait_since = -1, e->wake = INFINITY;
    e->start_round = e->rp.g.round;
    e->n_sends = e->next_send = e->n_events = e->next_event = 0;
}

int engine_new(engine **out, const peer_settings *c, const round_plan *plan, int id, const nn_dataset *train,
               const float *x0, size_t dim, uint64_t incarnation, double now, char *err, size_t errlen)
{
    *out = NULL;
    engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "peer %d: cannot set up (%s)", id, strerror(ENOMEM));
        return -ENOMEM;
    }
    int rc = round_peer_init(&e->rp, c, plan, id, train, x0, dim, now, err, errlen);
    if (rc < 0) {
        free(e);
        return rc;
    }
    if (e->rp.g.gather && c->overlap) /* (the steps run on a model of their own: engine_overlap.c) */
        gsp_gather_outside_steps(&e->rp.g);
    const size_t n = (size_t)c->n_peers;
    e->id = id, e->n_peers = c->n_peers;
    e->rp.g.incarnation = incarnation;
    e->busy = calloc(n, 1), e->sending = calloc(n, 1);
    e->model_wanted = calloc(n, 1), e->model_queued = calloc(n, 1), e->emit_busy = calloc(n, 1);
    e->ack_due = calloc(n, sizeof *e->ack_due), e->ack_sent = calloc(n, sizeof *e->ack_sent);
    e->ack_incarnation = calloc(n, sizeof *e->ack_incarnation), e->sync_queued = calloc(n, sizeof *e->sync_queued);
    e->sync_asked = calloc(n, sizeof *e->sync_asked), e->refusals = calloc(n, sizeof *e->refusals);
    e->promise_broken = calloc(n, 1), e->model_sent_round = calloc(n, sizeof *e->model_sent_round);
    e->bye_wait = calloc(n, 1);
    e->gap_seq = calloc(n, sizeof *e->gap_seq), e->gap_incarnation = calloc(n, sizeof *e->gap_incarnation);
    e->gap_asked_at = calloc(n, sizeof *e->gap_asked_at), e->sync_queued_at = calloc(n, sizeof *e->sync_queued_at);
    if (!e->busy || !e->sending || !e->model_wanted || !e->model_queued || !e->emit_busy || !e->ack_due || !e->ack_sent ||
        !e->ack_incarnation || !e->sync_queued || !e->sync_asked || !e->refusals || !e->promise_broken ||
        !e->model_sent_round || !e->bye_wait || !e->gap_seq || !e->gap_incarnation || !e->gap_asked_at ||
        !e->sync_queued_at) {
        engine_free(e);
        snprintf(err, errlen, "peer %d: cannot set up (%s)", id, strerror(ENOMEM));
        return -ENOMEM;
    }
    e->incarnation_max = UINT64_MAX;
    reset(e, now);
    *out = e;
    return 0;
}

void engine_free(engine *e)
{
    if (!e)
        return;
    round_peer_free(&e->rp);
    free(e->busy), free(e->sending), free(e->model_wanted), free(e->model_queued), free(e->emit_busy);
    free(e->ack_due), free(e->ack_sent), free(e->ack_incarnation), free(e->sync_queued), free(e->sync_asked);
    free(e->refusals), free(e->promise_broken), free(e->model_sent_round), free(e->bye_wait);
    free(e->gap_seq), free(e->gap_incarnation), free(e->gap_asked_at), free(e->sync_queued_at);
    free(e->sends), free(e->events), free(e->z_start), free(e->z_work);
    free(e);
}

void engine_set_checkpoint_every(engine *e, double seconds) { e->checkpoint_every = seconds; }
void engine_set_caller_steps(engine *e)
{
    e->caller_steps = 1;
    if (e->rp.g.gather) /* (its steps run in the caller's buffer: x and the anchor are one array) */
        gsp_gather_outside_steps(&e->rp.g);
}

int engine_set_origin_fill(engine *e, int (*fill)(void *ctx, float *dst), void *ctx, int edges)
{
    return gsp_set_origin_fill(&e->rp.g, fill, ctx, edges);
}

void engine_state_to_load(engine *e, gsp_peer **g, local_state **local) { *g = &e->rp.g, *local = &e->rp.local; }

int engine_come_back(engine *e, engine_comeback how, uint64_t incarnation, double now)
{
    if (incarnation != e->rp.g.incarnation) { /* the same peer as a new process: what its old one sent is gone */
        gsp_restart(&e->rp.g, incarnation);
        gsp_pace_config pc = e->rp.pace.c;
        pc.barrier = 0;
        gsp_pace_free(&e->rp.pace);
        int rc = gsp_pace_init(&e->rp.pace, &pc, e->id, now);
        if (rc < 0)
            return rc;
        reset(e, now);
    }
    if (how != ENGINE_WITHOUT_STATE) {
        gsp_resume(&e->rp.g, how == ENGINE_WITH_FINAL_STATE);
        gsp_pace_joined(&e->rp.pace);
        e->start_round = e->rp.g.round;
        return 0;
    }
    e->joining = 1;
    e->join_since = now;
    e->asked_at = -INFINITY; /* ask as soon as a neighbour is up */
    gsp_pace_set_joining(&e->rp.pace);
    engine_log_event(e, ENGINE_LOG_NO_CHECKPOINT, -1, NULL);
    return 0;
}

int engine_crash(engine *e)
{
    const int lost = e->rp.n_inbox;
    for (int k = 0; k < e->rp.n_inbox; k++)
        gsp_msg_free(&e->rp.inbox[k]);
    e->rp.n_inbox = 0;
    e->finished = 1;
    e->n_sends = e->next_send = e->n_events = e->next_event = 0;
    return lost;
}

void engine_set_incarnation_max(engine *e, uint64_t max) { e->incarnation_max = max; }

void engine_origin_ahead(engine *e, float *drawn) { gsp_origin_ahead(&e->rp.g, drawn); }
