/* The networked peer's checkpoints and --resume (node_state.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "peer/core/clock.h"
#include "peer/net/node_state.h"

static void write_checkpoint(uv_work_t *w)
{
    node *n = w->data;
    n->ckpt_rc = ckpt_save(n->c->checkpoint, &n->run, engine_gossip(n->e), engine_local(n->e), n->ckpt_err,
                          sizeof n->ckpt_err);
}

/* A checkpoint write's outcome: counted, or one event line (training goes
 * on; the previous checkpoint stays). */
static void written_count(node *n, int rc, const char *err)
{
    if (rc < 0)
        node_event(n, "checkpoint failed", -1, err);
    else
        n->r->checkpoints++;
}

static void checkpoint_written(uv_work_t *w, int status)
{
    node *n = w->data;
    (void)status;
    n->ckpt_busy = 0;
    written_count(n, n->ckpt_rc, n->ckpt_err);
    if (n->ckpt_final)
        node_checkpoint_now(n); /* the one the caller asked for while this was being written */
    node_rounds_resume(n);
}

/* Periodic: written on the thread pool straight from the live state, between
 * rounds, so an fsync never holds up the loop (heartbeats, messages, the
 * neighbours) and no copy of the state is made (it is as big as the model
 * times a few); meanwhile the loop only queues what arrives (node.c holds
 * the next round until node_rounds_resume). */
void node_checkpoint(node *n)
{
    if (!n->c->checkpoint || n->ckpt_busy)
        return;
    n->ckpt_busy = 1;
    n->ckpt_work.data = n;
    uv_queue_work(&n->loop, &n->ckpt_work, write_checkpoint, checkpoint_written);
}

/* Final (done or stopping) or asked for by the caller (a stepper): written
 * here, after any periodic one in flight. */
void node_checkpoint_now(node *n)
{
    char err[512];
    if (!n->c->checkpoint)
        return;
    if (n->ckpt_busy) {
        n->ckpt_final = 1;
        return;
    }
    n->ckpt_final = 0;
    /* (at the close nothing is absorbed or sent after it: a resume from it
     * asks for what its neighbours sent meanwhile instead of adopting it) */
    int rc = (n->closed ? ckpt_save_final : ckpt_save)(n->c->checkpoint, &n->run, engine_gossip(n->e),
                                                       engine_local(n->e), err, sizeof err);
    written_count(n, rc, err);
    if (n->c->stepper)
        n->c->stepper->checkpointed(n->c->stepper->ctx, rc);
}

/* --resume: the checkpoint if there is a whole one, else the model of a
 * neighbour. The checkpoint's (x, w) come back, in-edges adopt the totals
 * that follow a gap (not after a final checkpoint: they are asked for), and
 * the weight is renormalised (gsp_resume; why in gossip/GUARANTEES.md). */
void node_resume(node *n)
{
    const node_config *c = n->c;
    char used[4400], err[9000];
    gsp_peer *g;
    local_state *local;
    engine_state_to_load(n->e, &g, &local);
    int rc = c->checkpoint ? ckpt_load(c->checkpoint, &n->run, g, local, used, sizeof used, err, sizeof err) : -ENOENT;
    const uint64_t incarnation = g->incarnation; /* (this process's: engine_new's) */
    if (rc >= 0) {
        const double w_checkpoint = g->w;
        engine_come_back(n->e, rc == CKPT_FINAL ? ENGINE_WITH_FINAL_STATE : ENGINE_WITH_STATE, incarnation,
                         clock_now());
        node_log_resume(n, w_checkpoint);
        node_event(n, "resumed from", -1, used);
        return;
    }
    if (rc != -ENOENT)
        node_event(n, "cannot resume", -1, err);
    engine_come_back(n->e, ENGINE_WITHOUT_STATE, incarnation, clock_now());
}

/* A peer that left handed its weight to its neighbours: a checkpoint would
 * bring that weight back a second time at a --resume, which then joins
 * (pulls a neighbour's model, one unit of weight) instead. */
void node_forget_checkpoint(node *n)
{
    char err[512];
    if (!n->c->checkpoint)
        return;
    if (ckpt_remove(n->c->checkpoint, err, sizeof err) < 0)
        node_event(n, "could not remove its checkpoint", -1, err);
    else
        node_event(n, "removed its checkpoint: its weight is with its neighbours", -1, n->c->checkpoint);
}
