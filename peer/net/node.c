/* The networked peer: the libuv driver of the peer engine
 * (peer/core/engine.h), which makes every decision, the same code the
 * simulator runs. Here: set-up, the loop, the engine's outputs (frames:
 * node_send.c; steps: node_step.c; events), its inputs (frames and links:
 * node_recv.c; the timer), and the close. See node.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "gossip/gsp_pool.h"
#include "peer/core/clock.h"
#include "peer/net/node_state.h"
#include "peer/wire/wire.h"

/* MODEL carries the model's little-endian bytes and their hash: this host's floats as they are. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "sgp peer assumes a little-endian host");

/* A node's block: aligned_alloc takes a multiple of the alignment, which
 * its hash state makes 64 (more than malloc's). */
#define NODE_BYTES ((sizeof(node) + _Alignof(node) - 1) / _Alignof(node) * _Alignof(node))

void node_config_defaults(node_config *c)
{
    memset(c, 0, sizeof *c);
    peer_settings_defaults(&c->peer);
    c->checkpoint_every = 30.0;
    c->slow = 1.0;
}

/* ---- the engine's events ------------------------------------------------------ */

/* The transport's view of every neighbour's link, for an input that may
 * send to any of them (backpressure: a busy link gets no share, no
 * heartbeat). */
static void link_states(node *n)
{
    const gsp_pace *pc = engine_pace(n->e);
    for (int j = 0; j < pc->n_nb; j++)
        engine_link_state(n->e, pc->nb[j].peer, net_busy(&n->net, pc->nb[j].peer),
                          net_sending(&n->net, pc->nb[j].peer));
}

static void on_wake(uv_timer_t *t)
{
    node *n = t->data;
    link_states(n);
    const double now = clock_now();
    engine_timer(n->e, now);
    node_engine_time(n, now);
    node_members_flush(n); /* (a neighbour whose link was busy when the list changed) */
    node_pump(n);
}

void node_engine_time(node *n, double since) { n->gossip_seconds += clock_now() - since; }

void node_step_done(node *n)
{
    link_states(n);
    const double now = clock_now();
    engine_step_done(n->e, now);
    node_engine_time(n, now);
    node_pump(n);
}

void node_step_taken(node *n, float *z)
{
    link_states(n);
    const double now = clock_now();
    engine_step_taken(n->e, z, now);
    node_engine_time(n, now);
    node_pump(n);
}

int node_boundary_done(node *n, long round, float acc, int checkpoint)
{
    node_log_round(n, round + 1, acc);
    if (checkpoint && n->c->checkpoint) {
        node_checkpoint(n);
        return 0;
    }
    const double now = clock_now();
    engine_advance(n->e, now);
    node_engine_time(n, now);
    return 1;
}

/* The round `round` is emitted: the epoch's evaluation and line (on the
 * thread pool, the rest after it), the round's log line, a checkpoint when
 * due (the next round waits for it), then on. */
static int boundary(node *n, const engine_event *v)
{
    engine_stats st;
    engine_stats_of(n->e, &st);
    n->r->local_steps = st.steps;
    n->epoch_loss += st.loss, n->epoch_steps++;
    if (!n->c->stepper && (v->round + 1) % n->plan.rounds_per_epoch == 0)
        return node_evaluate(n, v->round, v->checkpoint);
    return node_boundary_done(n, v->round, -1.0f, v->checkpoint);
}

void node_rounds_resume(node *n)
{
    if (n->finish_pending)
        node_close(n, n->finish_goodbye);
    else {
        const double now = clock_now();
        engine_advance(n->e, now);
        node_engine_time(n, now);
        node_pump(n);
    }
}

/* Done, stopped or failed: checkpoint, the ledger, memory by part, then
 * close every handle; the goodbye goes last on each connection. */
void node_close(node *n, int goodbye)
{
    if (n->closed)
        return;
    if (n->ckpt_busy || n->eval_busy) { /* the state is being written or read: close after */
        n->finish_pending = 1, n->finish_goodbye = goodbye;
        return;
    }
    n->closed = 1;
    if (engine_left(n->e))
        node_forget_checkpoint(n);
    else if (!engine_joining(n->e) && !engine_diverged(n->e)) /* (the last checkpoint is the model to come back with) */
        node_checkpoint_now(n);
    if (!engine_joining(n->e))
        node_log_ledger(n);
    mem_parts *m = &n->r->memory;
    *m = (mem_parts){.model = n->model.bytes, .in_flight = net_bytes(&n->net)};
    if (n->train)
        m->data += nn_dataset_bytes(n->train);
    if (n->test)
        m->data += nn_dataset_bytes(n->test);
    engine_memory(n->e, m);
    mem_measure(m);
    node_log_memory(n, m);
    /* The goodbye goes after the shares the connections' slots still hold
     * (on a slow link they are not written yet, and closing at once would
     * cancel them: the neighbour would wait its dead timeout for them and
     * their weight would be lost), for at most a dead timeout. */
    long bye = -1;
    uint8_t last[WIRE_CONTROL_MAX];
    if (goodbye >= 0) {
        bye = wire_encode_goodbye(last, sizeof last, goodbye ? "done" : "stopped", goodbye ? 4 : 7);
        for (int p = 0; bye >= 0 && p < n->c->cluster->n_peers; p++)
            if (p != n->c->id && net_is_up(&n->net, p))
                n->r->bytes_sent += (uint64_t)bye, n->r->messages_sent++;
    }
    uv_close((uv_handle_t *)&n->timer, NULL);
    if (n->c->stepper)
        n->c->stepper->close(n->c->stepper->ctx);
    else {
        uv_close((uv_handle_t *)&n->sigint, NULL);
        uv_close((uv_handle_t *)&n->sigterm, NULL);
    }
    net_close_after(&n->net, bye >= 0 ? last : NULL, bye >= 0 ? (size_t)bye : 0, n->c->peer.dead_timeout);
}

/* After every input: send what the engine queued, act on its events, and
 * wake it when it asked. */
void node_pump(node *n)
{
    for (int again = 1; again && !n->closed;) {
        again = 0;
        engine_send s;
        while (engine_poll_send(n->e, &s))
            node_send_frame(n, &s);
        engine_event v;
        while (!n->closed && engine_poll_event(n->e, &v))
            switch (v.kind) {
            case ENGINE_STEP:
                node_start_step(n);
                break;
            case ENGINE_BOUNDARY:
                again |= boundary(n, &v);
                break;
            case ENGINE_FINISHED:
                n->rc = v.rc;
                while (engine_poll_send(n->e, &s)) /* what it said last (GOODBYE "done") before the close */
                    node_send_frame(n, &s);
                node_close(n, v.goodbye);
                break;
            case ENGINE_LOG:
                node_event(n, engine_log_text(v.log), v.peer, v.detail[0] ? v.detail : NULL);
                break;
            case ENGINE_DONE:
                break;
            }
    }
    if (n->closed)
        return;
    node_origin_ahead(n);
    const double now = clock_now(), at = engine_wake_at(n->e, now);
    if (isfinite(at)) {
        double ms = 1e3 * (at - now);
        uv_timer_start(&n->timer, on_wake, ms > 0 ? (uint64_t)ceil(ms) : 0, 0);
    }
}

/* Stop (SIGTERM, SIGINT, or libsgp's close): a checkpoint and GOODBYE
 * "stopped", now or when the running step is done (a caller stepping
 * itself holds no worker); once. */
void node_stop(node *n)
{
    if (engine_stopping(n->e))
        return;
    const double now = clock_now();
    engine_stop(n->e, now);
    node_engine_time(n, now);
    node_pump(n);
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)signum;
    node *n = s->data;
    if (n->c->leave_on_signal && !engine_stopping(n->e)) {
        const double now = clock_now();
        engine_leave(n->e, now);
        node_engine_time(n, now);
        node_pump(n);
        return;
    }
    node_stop(n);
}

/* ---- set-up ------------------------------------------------------------------- */

/* A number that grows with every start of a peer's process: microseconds of
 * the wall clock (a host whose clock steps back by more than a restart takes
 * could reuse one; receivers would then ignore it until it passes the old). */
static uint64_t new_incarnation(void) { return clock_wall_us(); }

/* The run's starting model, as nn_model_init drew it (gsp_set_origin_fill). */
static int draw_origin(void *ctx, float *dst)
{
    const node *n = ctx; /* (reads the model's layout only: the step may run beside) */
    nn_model_fill_params(&n->model, n->c->peer.train.seed, dst);
    return 0;
}

int node_model(const node_config *c, const nn_dataset *train, nn_model *m, char *err, size_t errlen)
{
    round_plan plan;
    round_plan_make(&plan, &c->peer.train, train->n, c->cluster->n_peers, c->peer.local_steps);
    return train_opts_model(&c->peer.train, train, nn_eval_batch(plan.per_batch, train->text ? train->w : 0), m, err,
                            errlen);
}

static int setup(node *n, const nn_dataset *train, char *err, size_t errlen)
{
    const node_config *c = n->c;
    const int np = c->cluster->n_peers, id = c->id;
    const float *x0;
    size_t dim;
    int rc;
    const node_stepper *st = c->stepper;
    if (st) { /* the caller's parameters and run length; it steps itself */
        const int H = c->peer.local_steps > 1 ? c->peer.local_steps : 1;
        n->plan = (round_plan){.local_steps = H, .steps_per_epoch = st->rounds_per_epoch * H,
                               .rounds_per_epoch = st->rounds_per_epoch, .total_rounds = st->rounds};
        x0 = st->x0, dim = st->dim;
    } else {
        round_plan_make(&n->plan, &c->peer.train, train->n, np, c->peer.local_steps);
        if (c->model) /* built and checked by the caller: taken, handed back at the end */
            n->model = *c->model, *c->model = (nn_model){0};
        else if ((rc = node_model(c, train, &n->model, err, errlen)) < 0)
            return rc;
        x0 = n->model.params, dim = n->model.n_params;
    }
    if (dim > WIRE_MAX_DIM) { /* no PUSH, SYNC or MODEL of it would go out: refuse rather than train alone */
        snprintf(err, errlen, "peer %d: a model of %zu parameters is more than a peer can exchange (at most %zu: a SYNC "
                              "lists positions as uint32, peer/wire/WIRE.md)",
                 id, dim, (size_t)WIRE_MAX_DIM);
        return -EMSGSIZE;
    }
    n->settings = c->peer;
    n->settings.n_peers = np, n->settings.barrier = !c->resume; /* (a resumed peer comes back into a running run) */
    n->settings.reliable_links = 1;
    const int threads = c->peer.gossip_threads > 0 ? c->peer.gossip_threads : gsp_pool_auto();
    if ((rc = gsp_pool_new(&n->pool, threads)) < 0) {
        snprintf(err, errlen, "peer %d: cannot start %d gossip threads: %s", id, threads, strerror(-rc));
        return rc;
    }
    n->settings.pool = n->pool;
    rc = engine_new(&n->e, &n->settings, &n->plan, id, st ? NULL : train, x0, dim, new_incarnation(), clock_now(),
                    err, errlen);
    if (rc < 0)
        return rc;
    /* A model drawn from the seed can be drawn again where an edge starts:
     * the copy of the run's starting model becomes the schedule's last
     * edge's reference, and edges after it (a neighbour that restarts) draw
     * it; a caller's parameters are read again from a file beside its
     * checkpoint (with --init, or a caller without a checkpoint, the copy
     * stays). Nothing is drawn here: gossip/ checks the first draw. */
    int n_out, n_in, kept;
    const int edges_known = c->peer.codec && topo_degree(n->settings.topology, id, &n_out, &n_in) == 0;
    if (edges_known && !st && !c->peer.train.init)
        (void)engine_set_origin_fill(n->e, draw_origin, n, n_out + n_in);
    else if (edges_known && st && c->checkpoint && (kept = node_origin_file(n, x0, dim, n_out + n_in)) < 0 &&
             kept != -EINVAL) {
        char why[160];
        snprintf(why, sizeof why, "cannot keep the starting parameters in %s.origin (%s): a copy stays in memory",
                 c->checkpoint, strerror(-kept));
        node_event(n, why, -1, NULL);
    }
    nn_model_drop_params(&n->model); /* x0 is in the push-sum state now, which is what the steps use */
    engine_set_checkpoint_every(n->e, c->checkpoint ? c->checkpoint_every : 0);
    if (st)
        engine_set_caller_steps(n->e);
    if (!(n->eval_deferred = calloc((size_t)np, 1)) || !(n->members = calloc((size_t)np, sizeof *n->members))) {
        snprintf(err, errlen, "peer %d: cannot set up (%s)", id, strerror(ENOMEM));
        return -ENOMEM;
    }
    n->run = (ckpt_run){.id = id, .n_peers = np, .dim = dim, .model = st ? "external" : c->peer.train.model,
                        .cluster = c->cluster->name,
                        .codec = c->peer.codec ? c->peer.codec->text : "exact", .seed = c->peer.train.seed};
    cluster_id(c->cluster, n->run.cluster_digest); /* a checkpoint of another run is refused */
    for (int q = 0; q < np; q++) /* (nobody holds a vacant slot until a joiner connects) */
        if (q != id && c->cluster->peers[q].vacant)
            engine_absent(n->e, q);
    if (c->resume)
        node_resume(n);
    return 0;
}

/* A peer with no listener: its bind failed at net_init, or its retries gave up. */
static void listen_error(const node *n, int rc, char *err, size_t errlen)
{
    snprintf(err, errlen, "peer %d: cannot listen on %s: %s", n->c->id,
             n->c->listen_host ? "its --listen address" : "its cluster address", strerror(-rc));
}

static int start_loop(node *n, char *err, size_t errlen)
{
    const node_config *c = n->c;
    net_callbacks cb;
    node_net_callbacks(&cb);
    n->land_peer = -1;
    int rc = net_init_at(&n->net, &n->loop, c->cluster, c->id, c->key, &cb, n, c->listen_host, c->listen_port,
                         engine_gossip(n->e)->incarnation, c->credential);
    if (rc < 0) {
        listen_error(n, rc, err, errlen);
        return rc;
    }
    const size_t dim = engine_gossip(n->e)->dim, delta = c->peer.codec ? cmp_bound(c->peer.codec, dim) : 0;
    /* WIRE.md MAX_FRAME: the same number at both ends of every session of
     * the run; a longer message (up to the run's longest) goes in pieces. */
    const size_t max_frame = wire_frame_max(dim, delta), max_message = wire_push_bound(dim, delta);
    if (max_frame) /* (always within what net_set_max_frame takes) */
        (void)net_set_max_frame(&n->net, max_frame);
    if (max_message > SEC_PIECE_MAX)
        (void)net_set_max_message(&n->net, max_message);
    /* Test-only: frames of fewer bytes, so that a test's small model travels
     * in many pieces as a big one does (WIRE.md "Frames"). */
    const char *piece = getenv("SGP_TEST_FRAME_BYTES");
    if (piece && net_set_piece(&n->net, (size_t)strtoull(piece, NULL, 10)) < 0)
        fprintf(stderr, "peer %d: SGP_TEST_FRAME_BYTES=%s ignored (1 to %zu)\n", c->id, piece, SEC_PIECE_MAX);
    /* Heartbeats keep a live link busy every dead_timeout / 4: twice the dead
     * timeout without a frame is a stall (the peer is routed around by then). */
    net_set_idle_timeout(&n->net, 2 * c->peer.dead_timeout);
    if ((rc = net_set_revoked(&n->net, c->revocations, c->n_revocations)) < 0) {
        snprintf(err, errlen, "peer %d: cannot keep %zu revocations: %s", c->id, c->n_revocations, strerror(-rc));
        return rc;
    }
    /* Everyone we ever send to or hear from, over one period of the schedule. */
    const gsp_pace *pc = engine_pace(n->e);
    for (int k = 0; k < pc->n_nb; k++)
        if ((rc = net_want(&n->net, pc->nb[k].peer)) < 0)
            return rc;
    uv_timer_init(&n->loop, &n->timer);
    n->timer.data = n;
    if (c->stepper) { /* the caller's process owns its signals; it asks through its wake handle */
        if ((rc = c->stepper->open(c->stepper->ctx, n, &n->loop)) < 0)
            return rc;
    } else {
        uv_signal_init(&n->loop, &n->sigint);
        uv_signal_init(&n->loop, &n->sigterm);
        n->sigint.data = n->sigterm.data = n;
        uv_signal_start(&n->sigint, on_signal, SIGINT);
        uv_signal_start(&n->sigterm, on_signal, SIGTERM);
    }
    return 0;
}

int node_run(const node_config *c, const nn_dataset *train, const nn_dataset *test, node_result *r, char *err,
             size_t errlen)
{
    memset(r, 0, sizeof *r);
    int rc = 0;
    node *n = NULL;
    if (!c->cluster || !c->peer.topology || c->peer.topology->n_peers != c->cluster->n_peers || c->id < 0 ||
        c->id >= c->cluster->n_peers) {
        snprintf(err, errlen, "the topology, the cluster and the id do not agree");
        rc = -EINVAL;
    } else if (!(n = aligned_alloc(_Alignof(node), NODE_BYTES))) {
        snprintf(err, errlen, "peer %d: out of memory", c->id);
        rc = -ENOMEM;
    }
    if (rc < 0) {
        if (c->stepper)
            c->stepper->end(c->stepper->ctx, rc, err, NULL, &(node_status){0});
        return rc;
    }
    memset(n, 0, NODE_BYTES);
    n->c = c, n->train = train, n->test = test, n->r = r;
    n->work.data = n;
    n->t0 = clock_now();
    rc = uv_loop_init(&n->loop);
    int loop_ok = rc == 0;
    if (rc == 0)
        rc = setup(n, train, err, errlen);
    int net_started = 0;
    if (rc == 0) {
        net_started = 1;
        rc = start_loop(n, err, errlen);
    }
    if (rc == 0) {
        const double now = clock_now();
        engine_advance(n->e, now); /* round 0, from the hold engine_new leaves */
        node_engine_time(n, now);
        node_pump(n);
        uv_run(&n->loop, UV_RUN_DEFAULT);
        rc = n->listen_rc < 0 ? n->listen_rc : n->rc;
        if (n->listen_rc < 0)
            listen_error(n, rc, err, errlen);
        else if (rc == -EDOM) {
            char why[400];
            engine_diverged_text(n->e, why, sizeof why);
            snprintf(err, errlen, "peer %d: %s", c->id, why);
        }
        else if (rc == -EHOSTUNREACH)
            snprintf(err, errlen, "peer %d: no checkpoint, and no neighbour sent its model within the round timeout "
                     "(%.0f s): nothing to join", c->id, c->peer.round_timeout);
        else if (rc < 0)
            snprintf(err, errlen, "peer %d: %s", c->id, strerror(-rc));
        else if (engine_joining(n->e)) {
            snprintf(err, errlen, "peer %d: stopped before any neighbour sent its model", c->id);
            rc = -ETIMEDOUT;
        }
    } else if (net_started) {
        net_close(&n->net);
        uv_run(&n->loop, UV_RUN_DEFAULT);
    }
    if (rc == 0) {
        const gsp_peer *g = engine_gossip(n->e);
        r->parameters = g->dim;
        r->weight = g->w;
        r->rounds = g->round;
        r->mean_staleness = g->stats.absorbed ? (double)g->stats.stale_sum / (double)g->stats.absorbed : 0;
        r->syncs_sent = (long)g->stats.syncs_sent;
        r->model = engine_take_model(n->e);
        if (!c->stepper)
            nn_model_evaluate(&n->model, r->model, test, &r->test_loss, &r->test_accuracy);
    }
    if (n->e) {
        const gsp_pace_stats *ps = &engine_pace(n->e)->stats;
        engine_stats st;
        engine_stats_of(n->e, &st);
        r->start_round = engine_start_round(n->e);
        r->messages_absorbed = st.absorbed, r->wait_seconds = st.wait_seconds;
        r->late_marks = ps->late_marks, r->catch_ups = ps->catch_ups, r->neighbours_lost = ps->neighbours_lost;
        r->refreshes = ps->refreshes;
    }
    r->step_seconds = n->step_seconds, r->gossip_seconds = n->gossip_seconds;
    r->frame_seconds = n->frame_seconds + n->net.crypto_seconds;
    r->frame_pool_seconds = n->net.pool_seconds;
    r->message_buffer_peak = n->net.message_peak, r->models_landed = n->models_landed;
    if (c->stepper) {
        node_status s = {0};
        if (n->e)
            node_status_of(n, &s);
        c->stepper->end(c->stepper->ctx, rc, err, rc == 0 ? r->model : NULL, &s);
    }
    if (net_started)
        net_free(&n->net);
    if (loop_ok)
        uv_loop_close(&n->loop);
    engine_free(n->e);
    gsp_pool_free(n->pool);
    n->pool = NULL;
    if (c->model && n->model.n_layers) { /* the caller's again, as its shape */
        nn_model_keep_shape(&n->model);
        *c->model = n->model;
    } else
        nn_model_free(&n->model);
    free(n->eval_deferred);
    free(n->members);
    node_origin_file_remove(n);
    r->wall_seconds = clock_now() - n->t0;
    r->idle_seconds = fmax(0.0, r->wall_seconds - r->step_seconds - r->gossip_seconds - r->frame_seconds -
                                    r->wait_seconds);
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
