/* The networked peer's loop: rounds, messages, timers. See node.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "gossip/gsp.h"
#include "nn/nn_model.h"
#include "peer/cli.h"
#include "peer/net.h"
#include "peer/node.h"
#include "peer/sgp_step.h"
#include "peer/wire.h"

typedef struct node {
    const node_config *c;
    const nn_dataset *test;
    node_result *r;
    uv_loop_t loop;
    net net;
    uv_work_t work;
    uv_timer_t round_timer, *dead_timers; /* one per peer: a connection that stays down */
    uv_signal_t sigint, sigterm;
    nn_model model;
    nn_dataset shard;
    gsp_peer g;
    sgp_local local;
    cmp_spec codec;
    uint8_t *alive, *ever_up, *want; /* want: neighbours over one period of the schedule */
    int barrier_passed;               /* round 0 waits until every neighbour is connected */
    int force_start;                  /* the round timeout fired: start without waiting */
    gsp_msg *inbox;
    int n_inbox, cap_inbox;
    uint8_t *out;       /* one encoded message */
    size_t out_cap;
    long rounds_per_epoch, total_rounds;
    int per_batch;
    int computing, finished, stopping;
    float step_loss;
    double epoch_loss, t0, round_start;
    long epoch_steps;
    int rc;
} node;

void node_config_defaults(node_config *c)
{
    memset(c, 0, sizeof *c);
    train_opts_defaults(&c->train);
    c->dead_timeout = 5.0;
    c->round_timeout = 30.0;
}

static void finish(node *n);
static void maybe_start(node *n);

/* ---- messages in ------------------------------------------------------------ */

static int cmp_msg(const void *a, const void *b)
{
    const gsp_msg *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void send_msg(node *n, int peer, long len)
{
    if (len < 0)
        return;
    int rc = net_send(&n->net, peer, n->out, (size_t)len);
    if (rc == 0)
        n->r->bytes_sent += (uint64_t)len, n->r->messages_sent++;
    else
        n->r->send_refused++; /* running sums / a SYNC make up for it later */
}

/* As in peer/sim.c: with tau = 0 only messages of earlier rounds, sorted, so
 * a synchronous run does not depend on arrival order. `all` at the end. */
static void absorb_inbox(node *n, int all)
{
    if (n->n_inbox == 0)
        return;
    qsort(n->inbox, (size_t)n->n_inbox, sizeof *n->inbox, cmp_msg);
    int kept = 0;
    for (int k = 0; k < n->n_inbox; k++) {
        gsp_msg *m = &n->inbox[k];
        if (!all && n->c->tau == 0 && m->round >= n->g.round) {
            n->inbox[kept++] = *m;
            continue;
        }
        int rc = gsp_absorb(&n->g, m);
        if (rc == 1)
            n->r->messages_absorbed++;
        else if (rc == GSP_NEED_SYNC)
            send_msg(n, m->src, wire_encode_nack(n->out, n->out_cap, m->seq - 1));
        gsp_msg_free(m);
    }
    n->n_inbox = kept;
}

static void on_frame(void *ctx, int peer, const uint8_t *buf, size_t len)
{
    node *n = ctx;
    wire_msg m;
    wire_err e;
    n->r->bytes_received += len;
    if (wire_decode(&m, buf, len, &e) < 0)
        return; /* (the transport authenticated it: a bug or a version skew; drop it) */
    if (m.type == WIRE_GOODBYE) {
        n->alive[peer] = 0;
        maybe_start(n);
        return;
    }
    if (m.type == WIRE_NACK) {
        gsp_msg sync;
        if (gsp_sync_msg(&n->g, peer, &sync) == 0)
            send_msg(n, peer, wire_encode_push(n->out, n->out_cap, &sync));
        return;
    }
    if (m.type != WIRE_PUSH || m.push.dim != n->g.dim)
        return; /* (another model's size: nothing of it could be absorbed) */
    if (n->n_inbox == n->cap_inbox) {
        int nc = n->cap_inbox ? 2 * n->cap_inbox : 16;
        gsp_msg *in = realloc(n->inbox, (size_t)nc * sizeof *in);
        if (!in)
            return;
        n->inbox = in, n->cap_inbox = nc;
    }
    /* The message keeps one block of its own: RAW/SYNC tensors are converted
     * straight into it (one copy out of the frame, not two), a DELTA payload
     * is copied into it because the frame buffer is the transport's. */
    const int delta = m.push.kind == GSP_DELTA;
    size_t cap = delta ? m.push.payload_len : wire_push_scratch_bound(m.push.dim);
    void *mem = malloc(cap ? cap : 1);
    gsp_msg *view = &n->inbox[n->n_inbox];
    if (!mem || wire_push_to_gsp(&m, view, mem, cap) < 0) {
        free(mem);
        return;
    }
    if (delta)
        view->payload = memcpy(mem, view->payload, view->payload_len);
    view->owned = mem;
    view->src = peer, view->dst = n->g.id;
    n->n_inbox++;
    maybe_start(n);
}

/* ---- liveness --------------------------------------------------------------- */

static void on_dead(uv_timer_t *t)
{
    node *n = t->data;
    int peer = (int)(t - n->dead_timers);
    if (!net_is_up(&n->net, peer)) {
        n->alive[peer] = 0; /* route around it, stop waiting for it */
        maybe_start(n);
    }
}

static void on_up(void *ctx, int peer)
{
    node *n = ctx;
    uv_timer_stop(&n->dead_timers[peer]);
    n->alive[peer] = 1;
    /* A reconnected edge starts with a SYNC (WIRE.md): whatever was in flight
     * when the old connection died arrives with it, at once, so the peer
     * waiting for it need not wait for the round timeout. */
    gsp_msg sync;
    if (n->ever_up[peer] && gsp_sync_msg(&n->g, peer, &sync) == 0)
        send_msg(n, peer, wire_encode_push(n->out, n->out_cap, &sync));
    n->ever_up[peer] = 1;
    maybe_start(n);
}

static void on_down(void *ctx, int peer, int reason)
{
    node *n = ctx;
    (void)reason;
    if (!n->stopping)
        uv_timer_start(&n->dead_timers[peer], on_dead, (uint64_t)(n->c->dead_timeout * 1000), 0);
}

static void on_log(void *ctx, const char *line)
{
    node *n = ctx;
    if (n->c->progress)
        fprintf(n->c->progress, "peer %d: %s\n", n->g.id, line);
}

/* ---- rounds ----------------------------------------------------------------- */

static void work_step(uv_work_t *w)
{
    node *n = w->data;
    float lr = nn_lr_at(&n->c->train.schedule, n->g.round, n->rounds_per_epoch);
    int correct, B;
    n->step_loss = sgp_local_step(&n->local, &n->model, &n->g, lr, &correct, &B);
}

/* One JSON line per round; test_accuracy only on rounds that evaluated it (< 0: not). */
static void log_round(node *n, long round, float test_accuracy)
{
    if (!n->c->log)
        return;
    fprintf(n->c->log,
            "{\"round\": %ld, \"loss\": %.6f, \"bytes_out\": %llu, \"bytes_in\": %llu, \"absorbed\": %llu, "
            "\"staleness\": %.3f, \"round_seconds\": %.6f",
            round, n->step_loss, (unsigned long long)n->r->bytes_sent, (unsigned long long)n->r->bytes_received,
            (unsigned long long)n->r->messages_absorbed,
            n->g.stats.absorbed ? (double)n->g.stats.stale_sum / (double)n->g.stats.absorbed : 0.0,
            cli_now() - n->round_start);
    if (test_accuracy >= 0)
        fprintf(n->c->log, ", \"test_accuracy\": %.6f", test_accuracy);
    fputs("}\n", n->c->log);
}

static void after_step(uv_work_t *w, int status)
{
    node *n = w->data;
    n->computing = 0;
    if (status < 0)
        return; /* cancelled at shutdown */
    n->epoch_loss += n->step_loss, n->epoch_steps++;
    topo_out out;
    topo_route(n->c->topology, n->g.round, n->g.id, n->alive, &out);
    /* Backpressure: a neighbour that has not taken our last frames does not
     * get a share this round; its weight stays home (no queue grows). */
    int k = 0;
    for (int j = 0; j < out.n; j++) {
        if (net_busy(&n->net, out.peer[j])) {
            out.keep += out.weight[j];
            continue;
        }
        out.peer[k] = out.peer[j], out.weight[k] = out.weight[j], k++;
    }
    out.n = k;
    gsp_msg msgs[TOPO_MAX_OUT];
    long round = n->g.round;
    int m = gsp_emit(&n->g, &out, msgs);
    if (m < 0) {
        n->rc = m;
        finish(n);
        return;
    }
    for (int j = 0; j < m; j++)
        send_msg(n, msgs[j].dst, wire_encode_push(n->out, n->out_cap, &msgs[j]));
    float acc = -1.0f;
    if ((round + 1) % n->rounds_per_epoch == 0) {
        float loss;
        nn_model_evaluate(&n->model, gsp_debias(&n->g), n->test, &loss, &acc);
        if (n->c->progress) {
            fprintf(n->c->progress, "peer %d  epoch %3ld/%ld  loss %.4f  test %6.2f%%  %.1f MB out  %.1fs\n", n->g.id,
                    (round + 1) / n->rounds_per_epoch, n->c->train.epochs, n->epoch_loss / n->epoch_steps, 100 * acc,
                    n->r->bytes_sent / 1e6, cli_now() - n->t0);
            fflush(n->c->progress);
        }
        n->r->train_loss = (float)(n->epoch_loss / n->epoch_steps);
        n->epoch_loss = 0, n->epoch_steps = 0;
    }
    log_round(n, round + 1, acc);
    maybe_start(n);
}

static void on_round_timeout(uv_timer_t *t)
{
    node *n = t->data;
    if (n->computing || n->finished)
        return;
    n->barrier_passed = 1;
    n->force_start = 1; /* start this round anyway: late shares come in later */
    maybe_start(n);
}

/* Round 0 waits for every neighbour's connection (or the round timeout), so
 * that no first message is lost to a connection still being set up. */
static int barrier(node *n)
{
    if (n->barrier_passed)
        return 1;
    for (int p = 0; p < n->c->cluster->n_peers; p++)
        if (n->want[p] && !net_is_up(&n->net, p))
            return 0;
    return n->barrier_passed = 1;
}

static void maybe_start(node *n)
{
    if (n->computing || n->finished)
        return;
    if (!n->stopping && !barrier(n))
        return;
    int ready = n->force_start || gsp_ready_with(&n->g, n->c->topology, n->alive, n->inbox, n->n_inbox);
    if (n->stopping || (n->g.round >= n->total_rounds && ready)) {
        finish(n);
        return;
    }
    if (!ready || n->g.round >= n->total_rounds)
        return;
    absorb_inbox(n, 0);
    n->force_start = 0;
    n->computing = 1;
    n->round_start = cli_now();
    uv_timer_start(&n->round_timer, on_round_timeout, (uint64_t)(n->c->round_timeout * 1000), 0);
    uv_queue_work(&n->loop, &n->work, work_step, after_step);
}

/* Done (or stopped): take in what has arrived, say goodbye, close. */
static void finish(node *n)
{
    if (n->finished)
        return;
    n->finished = 1;
    absorb_inbox(n, 1);
    for (int p = 0; p < n->c->cluster->n_peers; p++)
        if (p != n->g.id && net_is_up(&n->net, p)) {
            const char *why = n->stopping ? "stopped" : "done";
            send_msg(n, p, wire_encode_goodbye(n->out, n->out_cap, why, strlen(why)));
        }
    uv_timer_stop(&n->round_timer);
    uv_close((uv_handle_t *)&n->round_timer, NULL);
    for (int p = 0; p < n->c->cluster->n_peers; p++)
        uv_close((uv_handle_t *)&n->dead_timers[p], NULL);
    uv_close((uv_handle_t *)&n->sigint, NULL);
    uv_close((uv_handle_t *)&n->sigterm, NULL);
    net_close(&n->net);
}

static void on_signal(uv_signal_t *s, int signum)
{
    node *n = s->data;
    (void)signum;
    n->stopping = 1;
    if (!n->computing)
        finish(n); /* else after_step's maybe_start finishes */
}

/* ---- set-up ------------------------------------------------------------------- */

static int setup(node *n, const nn_dataset *train, char *err, size_t errlen)
{
    const node_config *c = n->c;
    const int np = c->cluster->n_peers, id = c->id;
    n->per_batch = (int)(c->train.batch / np) > 0 ? (int)(c->train.batch / np) : 1;
    long per_round = (long)n->per_batch * np;
    n->rounds_per_epoch = (train->n + per_round - 1) / per_round;
    if (n->rounds_per_epoch < 1)
        n->rounds_per_epoch = 1;
    n->total_rounds = n->rounds_per_epoch * c->train.epochs;
    /* The same model, shard, local streams and codec seed as peer/sim.c. */
    int rc = nn_model_init(&n->model, c->train.model, train->c, train->h, train->w, train->n_classes,
                           n->per_batch > 256 ? n->per_batch : 256, c->train.seed, err, errlen);
    if (rc < 0)
        return rc;
    const size_t dim = n->model.n_params;
    int *idx = NULL, count = 0;
    rc = nn_shard_indices(train, id, np, c->shard_alpha, c->train.seed, &idx, &count);
    if (rc == 0)
        rc = nn_dataset_subset(train, idx, count, &n->shard);
    free(idx);
    if (rc == 0)
        rc = gsp_init(&n->g, id, np, dim, c->tau, n->model.params);
    if (rc == 0 && c->codec) {
        n->codec = *c->codec;
        rc = gsp_set_codec(&n->g, &n->codec, c->train.seed ^ 0x636f646563ULL,
                           c->step > 0 ? (float)c->step : gsp_default_step(c->codec, dim));
    }
    if (rc == 0)
        rc = sgp_local_init(&n->local, &c->train, &n->shard, id, n->per_batch, dim);
    n->out_cap = wire_push_bound(dim, c->codec ? cmp_bound(c->codec, dim) : 0);
    n->out = malloc(n->out_cap);
    n->alive = malloc((size_t)np);
    n->ever_up = calloc((size_t)np, 1);
    n->want = calloc((size_t)np, 1);
    n->dead_timers = calloc((size_t)np, sizeof *n->dead_timers);
    if (rc == 0 && (!n->out_cap || !n->out || !n->alive || !n->ever_up || !n->want || !n->dead_timers))
        rc = -ENOMEM;
    if (rc < 0) {
        snprintf(err, errlen, "peer %d: cannot set up (%s)", id, strerror(-rc));
        return rc;
    }
    memset(n->alive, 1, (size_t)np);
    return 0;
}

static int start_loop(node *n, char *err, size_t errlen)
{
    const node_config *c = n->c;
    net_callbacks cb = {.on_up = on_up, .on_down = on_down, .on_frame = on_frame, .on_log = on_log};
    int rc = net_init(&n->net, &n->loop, c->cluster, c->id, c->key, &cb, n);
    if (rc < 0) {
        snprintf(err, errlen, "peer %d: cannot listen on its cluster address: %s", c->id, strerror(-rc));
        return rc;
    }
    net_set_max_frame(&n->net, n->out_cap + 64);
    /* Everyone we ever send to or hear from, over one period of the schedule. */
    const topo *t = c->topology;
    for (int ph = 0; ph < t->n_phases; ph++) {
        topo_out out;
        topo_route(t, ph, c->id, NULL, &out);
        for (int k = 0; k < out.n; k++)
            n->want[out.peer[k]] = 1;
        int in[TOPO_MAX_OUT * 4];
        int m = topo_in(t, ph, c->id, NULL, in, (int)(sizeof in / sizeof *in));
        for (int k = 0; k < m; k++)
            n->want[in[k]] = 1;
    }
    for (int p = 0; p < c->cluster->n_peers; p++)
        if (n->want[p] && (rc = net_want(&n->net, p)) < 0)
            return rc;
    uv_timer_init(&n->loop, &n->round_timer);
    n->round_timer.data = n;
    uv_timer_start(&n->round_timer, on_round_timeout, (uint64_t)(c->round_timeout * 1000), 0); /* the barrier's */
    for (int p = 0; p < c->cluster->n_peers; p++) {
        uv_timer_init(&n->loop, &n->dead_timers[p]);
        n->dead_timers[p].data = n;
    }
    uv_signal_init(&n->loop, &n->sigint);
    uv_signal_init(&n->loop, &n->sigterm);
    n->sigint.data = n->sigterm.data = n;
    uv_signal_start(&n->sigint, on_signal, SIGINT);
    uv_signal_start(&n->sigterm, on_signal, SIGTERM);
    return 0;
}

int node_run(const node_config *c, const nn_dataset *train, const nn_dataset *test, node_result *r, char *err,
             size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (!c->cluster || !c->topology || c->topology->n_peers != c->cluster->n_peers || c->id < 0 ||
        c->id >= c->cluster->n_peers) {
        snprintf(err, errlen, "the topology, the cluster and the id do not agree");
        return -EINVAL;
    }
    node *n = calloc(1, sizeof *n);
    if (!n)
        return -ENOMEM;
    n->c = c, n->test = test, n->r = r;
    n->work.data = n;
    n->t0 = cli_now();
    int rc = uv_loop_init(&n->loop);
    int loop_ok = rc == 0;
    if (rc == 0)
        rc = setup(n, train, err, errlen);
    int net_started = 0;
    if (rc == 0) {
        net_started = 1;
        rc = start_loop(n, err, errlen);
    }
    if (rc == 0) {
        maybe_start(n);
        uv_run(&n->loop, UV_RUN_DEFAULT);
        rc = n->rc;
        if (rc < 0)
            snprintf(err, errlen, "peer %d: %s", c->id, strerror(-rc));
    } else if (net_started) {
        net_close(&n->net);
        uv_run(&n->loop, UV_RUN_DEFAULT);
    }
    if (rc == 0) {
        const float *z = gsp_debias(&n->g);
        nn_model_evaluate(&n->model, z, test, &r->test_loss, &r->test_accuracy);
        r->model = malloc(n->model.n_params * sizeof(float));
        if (r->model)
            memcpy(r->model, z, n->model.n_params * sizeof(float));
        r->parameters = n->model.n_params;
        r->weight = n->g.w;
        r->rounds = n->g.round;
        r->mean_staleness = n->g.stats.absorbed ? (double)n->g.stats.stale_sum / (double)n->g.stats.absorbed : 0;
    }
    if (net_started)
        net_free(&n->net);
    if (loop_ok)
        uv_loop_close(&n->loop);
    for (int k = 0; k < n->n_inbox; k++)
        gsp_msg_free(&n->inbox[k]);
    free(n->inbox);
    free(n->out);
    free(n->alive);
    free(n->ever_up);
    free(n->want);
    free(n->dead_timers);
    sgp_local_free(&n->local);
    gsp_free(&n->g);
    nn_dataset_free(&n->shard);
    nn_model_free(&n->model);
    r->wall_seconds = cli_now() - n->t0;
    free(n);
    return rc;
}

void node_result_free(node_result *r)
{
    if (!r)
        return;
    free(r->model);
    memset(r, 0, sizeof *r);
}
