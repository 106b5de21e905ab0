/* The networked peer when the caller takes the local steps itself (libsgp):
 * the loop's side of the hand-off in node_ext.h. The engine's STEP hands
 * the round's model out; the caller's step coming back is the step done. */
#include "peer/core/clock.h"
#include "peer/net/node_ext.h"
#include "peer/net/node_state.h"

void node_caller_plan(node *n, const float **x0, size_t *dim)
{
    const node_ext *x = n->c->ext;
    const int H = n->c->peer.local_steps > 1 ? n->c->peer.local_steps : 1;
    n->plan = (round_plan){.local_steps = H, .steps_per_epoch = x->rounds_per_epoch * H,
                           .rounds_per_epoch = x->rounds_per_epoch, .total_rounds = x->rounds};
    *x0 = x->params, *dim = x->dim;
}

void node_caller_refuse(const node_config *c, int rc, const char *err)
{
    node_ext_end(c->ext, rc, err, NULL, &(node_status){0});
}

void node_caller_status(const node *n, node_status *s)
{
    const gsp_pace *pc = engine_pace(n->e);
    const node_result *r = n->r;
    engine_stats st;
    engine_stats_of(n->e, &st);
    *s = (node_status){.id = n->c->id, .peers = n->c->cluster->n_peers, .round = engine_round(n->e),
                       .start_round = engine_start_round(n->e), .local_steps = r->local_steps, .weight = engine_gossip(n->e)->w,
                       .neighbours = pc->n_nb, .bytes_sent = r->bytes_sent, .bytes_received = r->bytes_received,
                       .messages_sent = r->messages_sent, .messages_absorbed = st.absorbed,
                       .late_marks = pc->stats.late_marks, .catch_ups = pc->stats.catch_ups,
                       .neighbours_lost = pc->stats.neighbours_lost, .checkpoints = r->checkpoints};
    for (int j = 0; j < pc->n_nb; j++)
        s->neighbours_alive += pc->alive[pc->nb[j].peer];
}

/* The round has started: its model goes to the caller, who holds the round
 * until it comes back with its step (H steps from the model handed out:
 * the engine's outer step brackets them, as round_step's own). */
void node_caller_give(node *n)
{
    node_status s;
    node_caller_status(n, &s);
    node_ext_hand_out(n->c->ext, n->e, &s);
}

/* The caller asked for something: a stop, a checkpoint, or it is back with
 * its step for the round it held. */
static void on_caller(uv_async_t *a)
{
    node *n = a->data;
    node_ext_asks asks;
    const int holding = engine_computing(n->e) && !n->closed;
    node_ext_take(n->c->ext, holding, &asks);
    if (asks.checkpoint && !n->closed)
        node_checkpoint_now(n); /* answers the caller (after a periodic write in flight) */
    if (asks.stop && !engine_stopping(n->e)) {
        node_stop(n);
        return;
    }
    if (asks.stepped) { /* (the caller waits meanwhile: its buffer is the loop's to read) */
        node_step_taken(n, asks.stepped);
        return;
    }
    if (holding)
        node_caller_give(n); /* the caller is waiting for a round that has already started */
}

int node_caller_open(node *n)
{
    node_ext *x = n->c->ext;
    int rc = uv_async_init(&n->loop, &x->wake, on_caller);
    if (rc < 0)
        return rc;
    x->wake.data = n;
    pthread_mutex_lock(&x->mu);
    x->wake_open = 1;
    pthread_mutex_unlock(&x->mu);
    return 0;
}

void node_caller_close(node *n)
{
    node_ext_closing(n->c->ext);
    uv_close((uv_handle_t *)&n->c->ext->wake, NULL);
}

void node_caller_end(node *n, int rc, const char *err)
{
    node_status s = {0};
    if (n->e)
        node_caller_status(n, &s);
    node_ext_end(n->c->ext, rc, err, rc == 0 ? n->r->model : NULL, &s);
}
