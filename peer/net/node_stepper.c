/* The node's side of a stepper (node.h): what a caller that steps itself
 * sees of the run, and the round it holds. Its hand-off, the other side, is
 * libsgp's (peer/lib/handoff.c). */
#include "peer/net/node_state.h"

void node_status_of(const node *n, node_status *s)
{
    const gsp_pace *pc = engine_pace(n->e);
    const node_result *r = n->r;
    engine_stats st;
    engine_stats_of(n->e, &st);
    *s = (node_status){.id = n->c->id, .peers = n->c->cluster->n_peers, .round = engine_step_round(n->e),
                       .start_round = engine_start_round(n->e), .local_steps = r->local_steps,
                       .weight = engine_gossip(n->e)->w, .neighbours = pc->n_nb, .bytes_sent = r->bytes_sent,
                       .bytes_received = r->bytes_received, .messages_sent = r->messages_sent,
                       .messages_absorbed = st.absorbed, .late_marks = pc->stats.late_marks,
                       .catch_ups = pc->stats.catch_ups, .neighbours_lost = pc->stats.neighbours_lost,
                       .checkpoints = r->checkpoints};
    for (int j = 0; j < pc->n_nb; j++)
        s->neighbours_alive += pc->alive[pc->nb[j].peer];
}

int node_holding(const node *n) { return engine_computing(n->e) && !n->closed; }

void node_model_to(const node *n, float *z) { engine_model_to(n->e, z); }
