/* The networked peer's evaluation at the end of an epoch (node_state.h), on
 * libuv's thread pool: at 100M parameters a pass over the test set is
 * seconds of the machine, and on the loop it kept the heartbeats from going
 * out until the neighbours routed around this peer as silent. The engine is
 * held at the round's boundary meanwhile (it absorbs nothing, emits nothing,
 * steps not), so x, w and z stay as they are; the only other writer of z
 * there, a MODEL answered to a neighbour that asked (gsp_debias), waits:
 * its request is handed to the engine after the evaluation. A peer that
 * waits for a neighbour's model itself (a refresh: taking it writes x)
 * evaluates on the loop as before. */
#include <stdlib.h>

#include "peer/core/clock.h"
#include "peer/core/local_step.h"
#include "peer/net/node_state.h"

static void evaluate(uv_work_t *w)
{
    node *n = w->data;
    nn_model_evaluate(&n->model, engine_eval_params(n->e, &n->model), n->test, &n->eval_loss, &n->eval_acc);
}

/* The epoch's line, the MODEL requests that waited, then the rest of the
 * boundary (1: the engine went on). */
static int eval_done(node *n)
{
    node_log_epoch(n, (n->eval_round + 1) / n->plan.rounds_per_epoch, n->eval_loss, n->eval_acc);
    const double now = clock_now();
    for (int q = 0; q < n->c->cluster->n_peers; q++)
        if (n->eval_deferred[q]) {
            n->eval_deferred[q] = 0;
            engine_model_request(n->e, q, now);
        }
    if (n->finish_pending) { /* (stopped meanwhile: the close writes the last checkpoint) */
        node_log_round(n, n->eval_round + 1, n->eval_acc);
        node_close(n, n->finish_goodbye);
        return 0;
    }
    return node_boundary_done(n, n->eval_round, n->eval_acc, n->eval_checkpoint);
}

static void evaluated(uv_work_t *w, int status)
{
    node *n = w->data;
    (void)status;
    n->eval_busy = 0;
    if (eval_done(n))
        node_pump(n);
}

int node_evaluate(node *n, long round, int checkpoint)
{
    n->eval_round = round, n->eval_checkpoint = checkpoint;
    n->eval_work.data = n;
    if (!engine_refreshing(n->e) && !engine_joining(n->e)) {
        n->eval_busy = 1;
        if (uv_queue_work(&n->loop, &n->eval_work, evaluate, evaluated) == 0)
            return 0;
        n->eval_busy = 0;
    }
    evaluate(&n->eval_work);
    return eval_done(n);
}

int node_eval_defers(node *n, int peer)
{
    if (!n->eval_busy)
        return 0;
    n->eval_deferred[peer] = 1;
    return 1;
}
