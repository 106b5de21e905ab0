/* The networked peer's loop: rounds, messages, timers. See node.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <uv.h>

#include <sodium.h>

#include "gossip/gsp.h"
#include "nn/nn_model.h"
#include "peer/core/clock.h"
#include "peer/store/ckpt.h"
#include "peer/net/net.h"
#include "peer/net/node.h"
#include "peer/core/sgp_step.h"
#include "peer/net/wire.h"

/* MODEL carries the model's little-endian bytes and their hash: this host's floats as they are. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "sgp peer assumes a little-endian host");

#define RECENT_ROUNDS 32 /* round durations the deadline is derived from */

typedef struct node {
    const node_config *c;
    const nn_dataset *test;
    node_result *r;
    uv_loop_t loop;
    net net;
    uv_work_t work;
    uv_timer_t round_timer, *dead_timers; /* one per peer: a connection that stays down */
    uv_timer_t deadline_timer, heartbeat_timer;
    uv_signal_t sigint, sigterm;
    nn_model model;
    nn_dataset shard;
    gsp_peer g;
    sgp_local local;
    cmp_spec codec;
    uint8_t *alive, *ever_up, *want; /* want: neighbours over one period of the schedule */
    uint8_t *late;                    /* missed a deadline: not waited for until it is on time again */
    uint8_t *late_count;              /* deadlines missed since it was last strictly on time */
    uint8_t *awaited;                 /* alive and not late: whom a round waits for */
    uint8_t *model_wanted;            /* asked for our model while a step was running */
    double *last_heard, *last_sent;   /* per peer, clock_now() seconds */
    double last_tick;                 /* the heartbeat timer's previous run */
    double recent[RECENT_ROUNDS];     /* durations of recent rounds that did not hit a deadline */
    int n_recent, forced_round;
    int isolated;                     /* no in-neighbour heard lately: shares stay home */
    long late_slack;                  /* tau + schedule period + 1 */
    long last_emit_round;             /* -1: none yet */
    double slow_pad;                  /* --slow: seconds added to each local step (0 until measured) */
    long deadline_round;              /* the round the deadline timer is armed for (-1: none) */
    long *known_round;                /* per peer: the latest round it said it is at (-1: none yet) */
    uint8_t *is_in;                   /* sends to us in some phase of the schedule */
    int joining, asked;               /* --resume without a checkpoint: waiting for a MODEL */
    double asked_at;
    double last_ckpt;
    ckpt_run run;
    uv_work_t ckpt_work;              /* a periodic checkpoint being written on the thread pool */
    uint8_t *ckpt_buf;
    size_t ckpt_len;
    int ckpt_busy, ckpt_final, ckpt_rc;
    char ckpt_err[512];
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
    double epoch_loss, t0, round_start, prev_start;
    long epoch_steps;
    int rc;
} node;

void node_config_defaults(node_config *c)
{
    memset(c, 0, sizeof *c);
    train_opts_defaults(&c->train);
    c->dead_timeout = 5.0;
    c->round_timeout = 30.0;
    c->checkpoint_every = 30.0;
    c->slow = 1.0;
}

static void finish(node *n);
static void maybe_start(node *n);
static double heartbeat_seconds(const node_config *c);

/* Has in-neighbour p emitted the round this one waits for, without sending
 * it here? Messages on a connection arrive in order, so once p has said it
 * is past that round (a later PUSH or a HEARTBEAT), a share for us from that
 * round would already be here: it went elsewhere (we were routed around, or
 * p kept it home), and waiting for it would wait for nothing. */
static int past(const node *n, int p)
{
    return n->known_round[p] >= n->g.round - n->c->tau; /* i.e. > g.round - 1 - tau, the round needed */
}

/* An in-neighbour we hear from: connected, not routed around, and a frame
 * within two heartbeat intervals (a killed peer's connection is gone, a
 * stopped one falls silent). */
static int hearing(const node *n, int p, double now)
{
    return n->is_in[p] && n->alive[p] && net_is_up(&n->net, p) && n->last_heard[p] >= now - 2 * heartbeat_seconds(n->c);
}


/* ---- events and messages out ------------------------------------------------ */

/* A fault-handling event: a line on the progress stream and one in the JSON log. */
static void event(node *n, const char *what, int peer, const char *detail)
{
    if (n->c->progress) {
        fprintf(n->c->progress, "peer %d: round %ld: %s", n->g.id, n->g.round, what);
        if (peer >= 0)
            fprintf(n->c->progress, " %d", peer);
        fprintf(n->c->progress, "%s%s\n", detail ? ": " : "", detail ? detail : "");
        fflush(n->c->progress);
    }
    if (n->c->log) {
        fprintf(n->c->log, "{\"event\": \"%s\", \"peer\": %d, \"round\": %ld, \"t\": %.3f}\n", what, peer, n->g.round,
                clock_now() - n->t0);
        fflush(n->c->log);
    }
}

static int send_msg(node *n, int peer, long len)
{
    if (len < 0)
        return (int)len;
    int rc = net_send(&n->net, peer, n->out, (size_t)len);
    if (rc == 0) {
        n->r->bytes_sent += (uint64_t)len, n->r->messages_sent++;
        n->last_sent[peer] = clock_now();
    } else
        n->r->send_refused++; /* running sums / a SYNC make up for it later */
    return rc;
}

/* Our model for a late joiner: z and the round to enter at, with the hash of
 * its bytes. Only while no step runs (the worker writes x). */
static void send_model(node *n, int peer)
{
    const float *z = gsp_debias(&n->g);
    uint8_t hash[WIRE_HASH_LEN];
    crypto_generichash(hash, sizeof hash, (const uint8_t *)z, n->g.dim * sizeof(float), NULL, 0);
    int rc = send_msg(n, peer, wire_encode_model(n->out, n->out_cap, n->g.round, z, n->g.dim, hash));
    n->model_wanted[peer] = rc == -EAGAIN; /* try again at the next round boundary */
    if (rc == 0)
        event(n, "sent its model to joining peer", peer, NULL);
}

/* A joiner asks the next neighbour that is up (round robin from the last one asked). */
static void ask_for_model(node *n)
{
    const int np = n->c->cluster->n_peers;
    for (int k = 1; k <= np; k++) {
        int p = (n->asked + k) % np;
        if (n->want[p] && net_is_up(&n->net, p) &&
            send_msg(n, p, wire_encode_model_request(n->out, n->out_cap, n->g.dim)) == 0) {
            n->asked = p, n->asked_at = clock_now();
            event(n, "asked for the current model: peer", p, NULL);
            return;
        }
    }
}

/* ---- messages in ------------------------------------------------------------ */

static int cmp_msg(const void *a, const void *b)
{
    const gsp_msg *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* As in peer/sim/sim.c: with tau = 0 only messages of earlier rounds, sorted, so
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

/* The joiner's side of MODEL: check, then enter the run at the sender's round. */
static void on_model(node *n, int peer, const wire_msg *m)
{
    if (!n->joining || m->model.dim != n->g.dim)
        return;
    uint8_t hash[WIRE_HASH_LEN];
    crypto_generichash(hash, sizeof hash, m->model.payload, m->model.dim * sizeof(float), NULL, 0);
    if (sodium_memcmp(hash, m->model.hash, sizeof hash) != 0) {
        event(n, "model failed its hash check: asking another neighbour than", peer, NULL);
        ask_for_model(n);
        return;
    }
    memcpy(n->g.x, m->model.payload, n->g.dim * sizeof(float));
    /* One unit of weight, as every peer had at round 0; earlier rounds are
     * not awaited, and in-edges adopt totals meant for an earlier holder of
     * this id. */
    n->g.w = 1.0;
    n->g.round = n->g.since = m->model.round;
    n->g.adopt = 1;
    n->joining = 0;
    n->barrier_passed = 1; /* the run is under way: no round-0 barrier */
    n->r->start_round = m->model.round;
    event(n, "joined with the model of peer", peer, NULL);
    maybe_start(n);
}

/* A neighbour we had given up on is heard from again: take it back. */
static void revive(node *n, int peer)
{
    if (n->alive[peer] || !net_is_up(&n->net, peer))
        return;
    n->alive[peer] = 1;
    uv_timer_stop(&n->dead_timers[peer]);
    event(n, "neighbour is back", peer, NULL);
}

static void on_frame(void *ctx, int peer, const uint8_t *buf, size_t len)
{
    node *n = ctx;
    wire_msg m;
    wire_err e;
    n->r->bytes_received += len;
    n->last_heard[peer] = clock_now();
    if (wire_decode(&m, buf, len, &e) < 0)
        return; /* (the transport authenticated it: a bug or a version skew; drop it) */
    if (m.type == WIRE_GOODBYE) {
        if (n->alive[peer])
            event(n, "neighbour said goodbye", peer, NULL);
        n->alive[peer] = 0;
        maybe_start(n);
        return;
    }
    revive(n, peer);
    switch (m.type) {
    case WIRE_NACK: {
        gsp_msg sync;
        if (gsp_sync_msg(&n->g, peer, &sync) == 0)
            send_msg(n, peer, wire_encode_push(n->out, n->out_cap, &sync));
        return;
    }
    case WIRE_HEARTBEAT:
        if (m.heartbeat.round > n->known_round[peer])
            n->known_round[peer] = m.heartbeat.round;
        maybe_start(n);
        return;
    case WIRE_MODEL_REQUEST:
        if (m.model_request.dim != n->g.dim || n->joining)
            return;
        if (n->computing)
            n->model_wanted[peer] = 1; /* answered at the round boundary */
        else
            send_model(n, peer);
        return;
    case WIRE_MODEL:
        on_model(n, peer, &m);
        return;
    case WIRE_PUSH:
        break;
    default:
        return;
    }
    if (m.push.dim != n->g.dim)
        return; /* (another model's size: nothing of it could be absorbed) */
    if (m.push.round + 1 > n->known_round[peer])
        n->known_round[peer] = m.push.round + 1;
    /* On time: it arrived before (or while) a round needs it. Nearly on time,
     * for a neighbour late only once since it was last on time: within
     * late_slack rounds (tau + the schedule's period + 1). A healthy
     * neighbour held up once falls a few rounds behind the peers that stopped
     * waiting for it (up to a period: they need it only every so often), and
     * waiting for it again lets it close the gap; a straggler, late again and
     * again, is waited for only once it is really on time. */
    const long need = n->g.round - 1 - n->c->tau;
    if (m.push.round >= need)
        n->late[peer] = 0, n->late_count[peer] = 0;
    else if (n->late[peer] && n->late_count[peer] <= 1 && m.push.round >= need - n->late_slack)
        n->late[peer] = 0;
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

static void lose(node *n, int peer, const char *why)
{
    if (!n->alive[peer])
        return;
    n->alive[peer] = 0; /* route around it, stop waiting for it */
    n->r->neighbours_lost++;
    event(n, "routing around neighbour", peer, why);
    maybe_start(n);
}

static void on_dead(uv_timer_t *t)
{
    node *n = t->data;
    int peer = (int)(t - n->dead_timers);
    if (!net_is_up(&n->net, peer))
        lose(n, peer, n->ever_up[peer] ? "disconnected for the dead timeout" : "never connected");
}

static void on_up(void *ctx, int peer)
{
    node *n = ctx;
    uv_timer_stop(&n->dead_timers[peer]);
    n->last_heard[peer] = clock_now();
    if (!n->alive[peer])
        event(n, "neighbour reconnected", peer, NULL);
    n->alive[peer] = 1;
    /* A reconnected edge starts with a SYNC (WIRE.md): whatever was in flight
     * when the old connection died arrives with it, at once, so the peer
     * waiting for it need not wait for the round timeout. */
    gsp_msg sync;
    if (n->ever_up[peer] && gsp_sync_msg(&n->g, peer, &sync) == 0)
        send_msg(n, peer, wire_encode_push(n->out, n->out_cap, &sync));
    n->ever_up[peer] = 1;
    if (n->joining && clock_now() - n->asked_at > n->c->dead_timeout)
        ask_for_model(n);
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

static double heartbeat_seconds(const node_config *c)
{
    double h = c->dead_timeout / 4;
    return h < 0.02 ? 0.02 : h > 1.0 ? 1.0 : h;
}

/* Every heartbeat interval: say we are here to every neighbour that has not
 * heard from us lately, and give up on the ones that have been silent for
 * the dead timeout (a stopped process keeps its TCP connections open, so
 * only silence shows it). */
static void on_heartbeat(uv_timer_t *t)
{
    node *n = t->data;
    const double now = clock_now(), interval = heartbeat_seconds(n->c);
    /* A tick far later than its interval means this process was not running
     * (stopped, or starved): the silence is ours, not the neighbours'. */
    int we_were_away = n->last_tick > 0 && now - n->last_tick > n->c->dead_timeout / 2;
    n->last_tick = now;
    for (int p = 0; p < n->c->cluster->n_peers; p++) {
        if (!n->want[p] || !net_is_up(&n->net, p))
            continue;
        if (we_were_away)
            n->last_heard[p] = now;
        if (now - n->last_sent[p] >= interval && !net_busy(&n->net, p))
            send_msg(n, p, wire_encode_heartbeat(n->out, n->out_cap, n->g.round));
        if (now - n->last_heard[p] > n->c->dead_timeout)
            lose(n, p, "silent for the dead timeout");
    }
    if (n->joining && now - n->asked_at > n->c->dead_timeout)
        ask_for_model(n);
    if (n->joining && now - n->t0 > n->c->round_timeout) {
        n->rc = -EHOSTUNREACH; /* nobody to join: node_run says so */
        finish(n);
    }
}

/* ---- rounds ----------------------------------------------------------------- */

static void work_step(uv_work_t *w)
{
    node *n = w->data;
    float lr = nn_lr_at(&n->c->train.schedule, n->g.round, n->rounds_per_epoch);
    int correct, B;
    n->step_loss = sgp_local_step(&n->local, &n->model, &n->g, lr, &correct, &B);
    if (n->slow_pad > 0) { /* an emulated slow machine (--slow) */
        double pad = n->slow_pad;
        struct timespec ts = {(time_t)pad, (long)((pad - (double)(time_t)pad) * 1e9)};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
        }
    }
}

/* One JSON line per round; test_accuracy only on rounds that evaluated it (< 0: not). */
static void log_round(node *n, long round, float test_accuracy)
{
    if (!n->c->log)
        return;
    fprintf(n->c->log,
            "{\"round\": %ld, \"loss\": %.6f, \"bytes_out\": %llu, \"bytes_in\": %llu, \"absorbed\": %llu, "
            "\"staleness\": %.3f, \"round_seconds\": %.6f, \"t\": %.3f, \"w\": %.9g",
            round, n->step_loss, (unsigned long long)n->r->bytes_sent, (unsigned long long)n->r->bytes_received,
            (unsigned long long)n->r->messages_absorbed,
            n->g.stats.absorbed ? (double)n->g.stats.stale_sum / (double)n->g.stats.absorbed : 0.0,
            clock_now() - n->round_start, clock_now() - n->t0, n->g.w);
    if (test_accuracy >= 0)
        fprintf(n->c->log, ", \"test_accuracy\": %.6f", test_accuracy);
    fputs("}\n", n->c->log);
    fflush(n->c->log); /* whole lines for the launcher (which reads it live) and after a kill */
}

static void write_checkpoint(uv_work_t *w)
{
    node *n = w->data;
    n->ckpt_rc = ckpt_write(n->c->checkpoint, n->ckpt_buf, n->ckpt_len, n->ckpt_err, sizeof n->ckpt_err);
}

static void checkpoint_now(node *n);

/* A checkpoint write's outcome: counted, or one event line (training goes
 * on; the previous checkpoint stays). */
static void checkpoint_written_count(node *n, int rc, const char *err)
{
    if (rc < 0)
        event(n, "checkpoint failed", -1, err);
    else
        n->r->checkpoints++;
}

static void checkpoint_written(uv_work_t *w, int status)
{
    node *n = w->data;
    (void)status;
    free(n->ckpt_buf);
    n->ckpt_buf = NULL;
    n->ckpt_busy = 0;
    checkpoint_written_count(n, n->ckpt_rc, n->ckpt_err);
    if (n->ckpt_final)
        checkpoint_now(n); /* the one finish() asked for while this was being written */
}

/* Periodic: snapshot between rounds (a copy), write on the thread pool, so an
 * fsync never holds up the loop (heartbeats, messages, the neighbours). */
static void checkpoint(node *n)
{
    if (!n->c->checkpoint || n->ckpt_busy)
        return;
    n->last_ckpt = clock_now();
    if (ckpt_encode(&n->run, &n->g, &n->local, &n->ckpt_buf, &n->ckpt_len) < 0) {
        event(n, "checkpoint failed", -1, "out of memory");
        return;
    }
    n->ckpt_busy = 1;
    n->ckpt_work.data = n;
    uv_queue_work(&n->loop, &n->ckpt_work, write_checkpoint, checkpoint_written);
}

/* Final (done or stopping): written here, after any periodic one in flight. */
static void checkpoint_now(node *n)
{
    char err[512];
    if (!n->c->checkpoint)
        return;
    if (n->ckpt_busy) {
        n->ckpt_final = 1;
        return;
    }
    n->ckpt_final = 0;
    checkpoint_written_count(n, ckpt_save(n->c->checkpoint, &n->run, &n->g, &n->local, err, sizeof err), err);
}

static void after_step(uv_work_t *w, int status)
{
    node *n = w->data;
    n->computing = 0;
    if (status < 0)
        return; /* cancelled at shutdown */
    n->r->local_steps++;
    n->epoch_loss += n->step_loss, n->epoch_steps++;
    topo_out out;
    topo_route(n->c->topology, n->g.round, n->g.id, n->alive, &out);
    /* Isolated (no in-neighbour heard lately: all killed, stopped or cut
     * off): keep every share home. Pushing mass out with none coming in
     * would halve w round after round until x underflows, and with a codec
     * the lag of the references would be amplified as w shrinks. */
    const double now = clock_now();
    int heard = 0, has_in = 0;
    for (int p = 0; p < n->c->cluster->n_peers; p++)
        has_in |= n->is_in[p], heard |= hearing(n, p, now);
    if (has_in && (!heard) != n->isolated) {
        n->isolated = !heard;
        event(n, n->isolated ? "no in-neighbour heard: keeping shares home" : "hearing in-neighbours again", -1,
              NULL);
    }
    /* Backpressure: a neighbour that has not taken our last frames does not
     * get a share this round; its weight stays home (no queue grows). */
    int k = 0;
    for (int j = 0; j < out.n; j++) {
        if (n->isolated || net_busy(&n->net, out.peer[j])) {
            out.keep += out.weight[j];
            continue;
        }
        out.peer[k] = out.peer[j], out.weight[k] = out.weight[j], k++;
    }
    out.n = k;
    /* After a jump over `skipped` rounds, this emit also moves the weight of
     * the rounds jumped over (at most half of w): a peer that jumps (a
     * straggler, mostly) would otherwise pass mass on at a fraction of the
     * others' rate and collect it, and its less trained model would weigh
     * that much more in everybody's average (measured: a 1/4-speed
     * straggler held w = 3.3 against 0.6, and the average model lost 1.3 to
     * 1.8 points). */
    const long skipped = n->last_emit_round >= 0 ? n->g.round - n->last_emit_round - 1 : 0;
    if (skipped > 0 && out.n > 0) {
        double sum = 0, wstep = n->g.codec ? (double)n->g.step : 1.0;
        for (int j = 0; j < out.n; j++)
            sum += out.weight[j];
        double f = fmin((double)skipped + 1.0, 0.5 / (wstep * sum));
        for (int j = 0; j < out.n && f > 1.0; j++)
            out.weight[j] *= f;
        /* With a codec, x gives up (weight moved) x r: moving this much
         * against a reference that lags the model would push z away from it
         * by as much (a soak run diverged that way), so this emit sends the
         * model whole (bf16) first. */
        n->g.refresh = f > 1.0;
    }
    gsp_msg msgs[TOPO_MAX_OUT];
    long round = n->g.round;
    n->last_emit_round = round;
    int m = gsp_emit(&n->g, &out, msgs);
    if (m < 0) {
        n->rc = m;
        for (size_t i = 0; i < n->g.dim && m == -EINVAL; i++)
            if (!isfinite(n->g.x[i])) { /* the codecs refuse NaN and infinity */
                n->rc = -EDOM;
                break;
            }
        finish(n);
        return;
    }
    for (int j = 0; j < m; j++)
        send_msg(n, msgs[j].dst, wire_encode_push(n->out, n->out_cap, &msgs[j]));
    for (int p = 0; p < n->c->cluster->n_peers; p++)
        if (n->model_wanted[p])
            send_model(n, p);
    float acc = -1.0f;
    if ((round + 1) % n->rounds_per_epoch == 0) {
        float loss;
        nn_model_evaluate(&n->model, gsp_debias(&n->g), n->test, &loss, &acc);
        if (n->c->progress) {
            fprintf(n->c->progress, "peer %d  epoch %3ld/%ld  loss %.4f  test %6.2f%%  %.1f MB out  %.1fs\n", n->g.id,
                    (round + 1) / n->rounds_per_epoch, n->c->train.epochs,
                    n->epoch_steps ? n->epoch_loss / n->epoch_steps : 0.0, 100 * acc, n->r->bytes_sent / 1e6,
                    clock_now() - n->t0);
            fflush(n->c->progress);
        }
        n->r->train_loss = (float)(n->epoch_steps ? n->epoch_loss / n->epoch_steps : 0.0);
        n->epoch_loss = 0, n->epoch_steps = 0;
    }
    log_round(n, round + 1, acc);
    if (n->c->checkpoint && n->c->checkpoint_every > 0 && clock_now() - n->last_ckpt >= n->c->checkpoint_every)
        checkpoint(n);
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

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* How long a round waits for a late neighbour. Fixed if --round-deadline is
 * given; else twice the median of the last RECENT_ROUNDS round durations
 * (rounds cut short by a deadline are not counted), at least 20 ms and at
 * most the round timeout; the round timeout until 8 rounds have been
 * measured. Twice the median: a neighbour at half the cluster's pace or
 * slower is not waited for round after round; one merely unlucky once
 * (scheduling) costs little when marked late, since it is waited for again
 * as soon as it is nearly on time again (on_frame). */
static double deadline_seconds(const node *n)
{
    const node_config *c = n->c;
    if (c->round_deadline > 0)
        return fmin(c->round_deadline, c->round_timeout);
    if (n->n_recent < 8)
        return c->round_timeout;
    double d[RECENT_ROUNDS];
    int k = n->n_recent < RECENT_ROUNDS ? n->n_recent : RECENT_ROUNDS;
    memcpy(d, n->recent, (size_t)k * sizeof *d);
    qsort(d, (size_t)k, sizeof *d, cmp_double);
    return fmin(fmax(2 * d[k / 2], 0.02), c->round_timeout);
}

static void on_deadline(uv_timer_t *t)
{
    node *n = t->data;
    if (n->computing || n->finished || n->deadline_round != n->g.round)
        return;
    int missing[TOPO_MAX_OUT * 4];
    int k = gsp_missing(&n->g, n->c->topology, n->awaited, n->inbox, n->n_inbox, missing,
                        (int)(sizeof missing / sizeof *missing));
    for (int j = 0; j < k && j < (int)(sizeof missing / sizeof *missing); j++) {
        n->late[missing[j]] = 1;
        if (n->late_count[missing[j]] < 255)
            n->late_count[missing[j]]++;
        n->r->late_marks++;
        event(n, "not waiting for late neighbour", missing[j], NULL);
    }
    n->forced_round = 1;
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

/* The round of the run around us: the median of what the in-neighbours we
 * hear from last said (-1 before any has). Only those connected and heard
 * within two heartbeat intervals: a neighbour killed or stopped, not yet
 * routed around, must not hold it down. A median, so that one straggler or
 * one peer that ran ahead does not move it. */
static long cluster_round(const node *n)
{
    long r[TOPO_MAX_PEERS];
    int k = 0;
    const double now = clock_now();
    for (int p = 0; p < n->c->cluster->n_peers; p++)
        if (hearing(n, p, now) && n->known_round[p] >= 0) {
            int j = k++;
            while (j > 0 && r[j - 1] > n->known_round[p]) /* insertion: a few neighbours */
                r[j] = r[j - 1], j--;
            r[j] = n->known_round[p];
        }
    return k ? r[k / 2] : -1;
}

/* Far behind the run (a straggler, a peer that was stopped or restarted):
 * jump to the run's round at this round boundary. Nothing is emitted for
 * the rounds jumped over: rounds replayed quickly would each push a share
 * out while little comes in, draining this peer's weight to nothing (and
 * with a codec amplifying the lag of its references until the model breaks,
 * as a soak run showed); the messages of those rounds are absorbed as usual
 * (with tau = 0, every message of a round before the new one). Past
 * tau + 2n + 4 rounds behind: more than a synchronous run's spread can be (n
 * peers, every chain of waits is shorter than n rounds). */
static void maybe_catch_up(node *n, long around)
{
    const long lag = around - n->g.round;
    if (around < 0 || lag <= n->c->tau + 2L * n->c->cluster->n_peers + 4)
        return;
    char why[96];
    snprintf(why, sizeof why, "%ld rounds behind: jumping to round %ld", lag, around);
    event(n, "catching up", -1, why);
    n->g.round = n->g.since = around;
    n->r->catch_ups++;
}

static void maybe_start(node *n)
{
    if (n->computing || n->finished)
        return;
    if (!n->stopping && (n->joining || !barrier(n)))
        return;
    const long around = cluster_round(n);
    if (!n->stopping && n->g.round < n->total_rounds) {
        maybe_catch_up(n, around);
        /* Nor run away: a peer that stopped waiting for its in-neighbours
         * (marked late while the machine was busy) would otherwise race
         * ahead and pull the others into catching up. More than late_slack
         * plus a period ahead of the run (the spread a synchronous run has,
         * given that in-neighbours report only once a period), it waits for
         * the others to come up. */
        if (around >= 0 && n->g.round - around > n->late_slack + n->c->topology->n_phases)
            return;
    }
    const int np = n->c->cluster->n_peers;
    for (int p = 0; p < np; p++)
        n->awaited[p] = n->alive[p] && !n->late[p] && !past(n, p);
    int ready = n->force_start || n->forced_round ||
                gsp_ready_with(&n->g, n->c->topology, n->awaited, n->inbox, n->n_inbox);
    if (n->stopping || (n->g.round >= n->total_rounds && ready)) {
        finish(n);
        return;
    }
    if (n->g.round >= n->total_rounds)
        return;
    if (!ready) {
        if (n->deadline_round != n->g.round) {
            n->deadline_round = n->g.round;
            uv_timer_start(&n->deadline_timer, on_deadline, (uint64_t)(deadline_seconds(n) * 1000), 0);
        }
        return;
    }
    uv_timer_stop(&n->deadline_timer);
    absorb_inbox(n, 0);
    const double now = clock_now();
    if (n->prev_start > 0 && !n->force_start && !n->forced_round)
        n->recent[n->n_recent++ % RECENT_ROUNDS] = now - n->prev_start;
    /* --slow F: once 48 rounds have run at full speed (the first ones are
     * slow: connections, caches), pad every step so that a round takes F
     * times the median of the last 32 (a peer at 1/F of its speed: round
     * times here are mostly the cluster's rhythm, not this peer's compute). */
    if (n->c->slow > 1.0 && n->slow_pad == 0 && n->n_recent >= 48) {
        double d[RECENT_ROUNDS];
        memcpy(d, n->recent, sizeof d);
        qsort(d, RECENT_ROUNDS, sizeof *d, cmp_double);
        n->slow_pad = (n->c->slow - 1.0) * d[RECENT_ROUNDS / 2];
        char why[64];
        snprintf(why, sizeof why, "+%.1f ms a step (%.4gx a %.1f ms round)", 1e3 * n->slow_pad, n->c->slow,
                 1e3 * d[RECENT_ROUNDS / 2]);
        event(n, "slowed down", -1, why);
    }
    n->prev_start = now;
    n->force_start = n->forced_round = 0;
    n->deadline_round = -1;
    n->computing = 1;
    n->round_start = now;
    uv_timer_start(&n->round_timer, on_round_timeout, (uint64_t)(n->c->round_timeout * 1000), 0);
    uv_queue_work(&n->loop, &n->work, work_step, after_step);
}

/* The push-sum ledger at the end, one JSON line per edge: with every peer's
 * ledger, sum w + sum over edges of (sent - applied) is the total weight, so
 * a run's logs show whether mass was conserved (tests/soak checks it). */
static void log_ledger(node *n)
{
    FILE *f = n->c->log;
    if (!f)
        return;
    const gsp_peer *g = &n->g;
    fprintf(f, "{\"ledger\": \"peer\", \"id\": %d, \"incarnation\": %llu, \"w\": %.17g, \"round\": %ld}\n", g->id,
            (unsigned long long)g->incarnation, g->w, g->round);
    for (int k = 0; k < g->n_out; k++)
        fprintf(f, "{\"ledger\": \"out\", \"to\": %d, \"seq\": %llu, \"w_total\": %.17g}\n", g->out[k].peer,
                (unsigned long long)g->out[k].seq, g->out[k].w);
    for (int k = 0; k < g->n_in; k++)
        fprintf(f, "{\"ledger\": \"in\", \"from\": %d, \"incarnation\": %llu, \"seq\": %llu, \"w_total\": %.17g}\n",
                g->in[k].peer, (unsigned long long)g->in[k].incarnation, (unsigned long long)g->in[k].seq, g->in[k].w);
    fflush(f);
}

/* Done (or stopped): take in what has arrived, checkpoint, say goodbye, close. */
static void finish(node *n)
{
    if (n->finished)
        return;
    n->finished = 1;
    if (!n->joining) {
        absorb_inbox(n, 1);
        checkpoint_now(n);
        log_ledger(n);
    }
    for (int p = 0; p < n->c->cluster->n_peers; p++)
        if (p != n->g.id && net_is_up(&n->net, p)) {
            const char *why = n->stopping ? "stopped" : "done";
            send_msg(n, p, wire_encode_goodbye(n->out, n->out_cap, why, strlen(why)));
        }
    uv_timer_stop(&n->round_timer);
    uv_close((uv_handle_t *)&n->round_timer, NULL);
    uv_close((uv_handle_t *)&n->deadline_timer, NULL);
    uv_close((uv_handle_t *)&n->heartbeat_timer, NULL);
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

/* A number that grows with every start of a peer's process: microseconds of
 * the wall clock (a host whose clock steps back by more than a restart takes
 * could reuse one; receivers would then ignore it until it passes the old). */
static uint64_t new_incarnation(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
}

/* --resume: the checkpoint if there is a whole one, else the model of a neighbour. */
static void resume(node *n)
{
    const node_config *c = n->c;
    char used[4400], err[9000];
    int rc = c->checkpoint ? ckpt_load(c->checkpoint, &n->run, &n->g, &n->local, used, sizeof used, err, sizeof err)
                           : -ENOENT;
    if (rc == 0) {
        /* The checkpoint's (x, w) come back; shares absorbed after the
         * checkpoint went down with the crash and are not sent again (in-edges
         * adopt the totals after a gap): the run's weight changes by w_c -
         * w_crash, about zero on average. Replaying them too counted them
         * twice, compounding over restarts (a soak run's weights reached
         * several hundred); a token weight instead (tried) let the total decay
         * with every restart until the running sums could no longer carry
         * the increments (weights 1e-16, models ruined). */
        n->g.adopt = 1;
        for (int k = 0; k < n->g.n_in; k++)
            n->g.in[k].adopt = 1;
        n->barrier_passed = 1;
        n->r->start_round = n->g.round;
        event(n, "resumed from", -1, used);
        return;
    }
    if (rc != -ENOENT)
        event(n, "cannot resume", -1, err);
    n->joining = 1;
    event(n, "no checkpoint: will pull the model from a neighbour", -1, NULL);
}

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
    /* The same model, shard, local streams and codec seed as peer/sim/sim.c. */
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
    n->g.incarnation = new_incarnation();
    if (rc == 0)
        rc = sgp_local_init(&n->local, &c->train, &n->shard, id, n->per_batch, dim);
    n->out_cap = wire_push_bound(dim, c->codec ? cmp_bound(c->codec, dim) : 0);
    n->out = malloc(n->out_cap);
    n->alive = malloc((size_t)np);
    n->ever_up = calloc((size_t)np, 1);
    n->want = calloc((size_t)np, 1);
    n->late = calloc((size_t)np, 1);
    n->late_count = calloc((size_t)np, 1);
    n->is_in = calloc((size_t)np, 1);
    n->known_round = malloc((size_t)np * sizeof *n->known_round);
    n->awaited = calloc((size_t)np, 1);
    n->model_wanted = calloc((size_t)np, 1);
    n->last_heard = calloc((size_t)np, sizeof(double));
    n->last_sent = calloc((size_t)np, sizeof(double));
    n->dead_timers = calloc((size_t)np, sizeof *n->dead_timers);
    if (rc == 0 && (!n->out_cap || !n->out || !n->alive || !n->ever_up || !n->want || !n->late || !n->late_count || !n->is_in || !n->known_round ||
                    !n->awaited || !n->model_wanted || !n->last_heard || !n->last_sent || !n->dead_timers))
        rc = -ENOMEM;
    if (rc < 0) {
        snprintf(err, errlen, "peer %d: cannot set up (%s)", id, strerror(-rc));
        return rc;
    }
    memset(n->alive, 1, (size_t)np);
    for (int p = 0; p < np; p++)
        n->known_round[p] = -1;
    n->deadline_round = -1;
    n->last_emit_round = -1;
    n->late_slack = c->tau + c->topology->n_phases + 1;
    n->run = (ckpt_run){.id = id, .n_peers = np, .dim = dim, .model = c->train.model,
                        .codec = c->codec ? c->codec->text : "exact", .seed = c->train.seed};
    n->last_ckpt = clock_now();
    if (c->resume)
        resume(n);
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
            n->want[in[k]] = n->is_in[in[k]] = 1;
    }
    for (int p = 0; p < c->cluster->n_peers; p++)
        if (n->want[p] && (rc = net_want(&n->net, p)) < 0)
            return rc;
    uv_timer_init(&n->loop, &n->round_timer);
    uv_timer_init(&n->loop, &n->deadline_timer);
    uv_timer_init(&n->loop, &n->heartbeat_timer);
    n->round_timer.data = n->deadline_timer.data = n->heartbeat_timer.data = n;
    uv_timer_start(&n->round_timer, on_round_timeout, (uint64_t)(c->round_timeout * 1000), 0); /* the barrier's */
    uint64_t hb = (uint64_t)(heartbeat_seconds(c) * 1000);
    uv_timer_start(&n->heartbeat_timer, on_heartbeat, hb, hb);
    for (int p = 0; p < c->cluster->n_peers; p++) {
        uv_timer_init(&n->loop, &n->dead_timers[p]);
        n->dead_timers[p].data = n;
        /* A neighbour that never connects is routed around like one that left
         * (after the round-0 barrier's wait; a peer coming back mid-run has none). */
        double never = c->resume ? c->dead_timeout : c->round_timeout + c->dead_timeout;
        if (n->want[p])
            uv_timer_start(&n->dead_timers[p], on_dead, (uint64_t)(never * 1000), 0);
    }
    uv_signal_init(&n->loop, &n->sigint);
    uv_signal_init(&n->loop, &n->sigterm);
    n->sigint.data = n->sigterm.data = n;
    uv_signal_start(&n->sigint, on_signal, SIGINT);
    uv_signal_start(&n->sigterm, on_signal, SIGTERM);
    if (n->joining)
        n->asked_at = -1e9; /* ask as soon as a neighbour is up */
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
    n->t0 = clock_now();
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
        if (rc == -EDOM)
            snprintf(err, errlen, "peer %d: the model diverged at round %ld (NaN or infinity in the parameters): "
                     "try a lower --lr or --clip", c->id, n->g.round);
        else if (rc < 0)
            snprintf(err, errlen, "peer %d: %s", c->id, strerror(-rc));
        else if (n->joining) {
            snprintf(err, errlen, "peer %d: stopped before any neighbour sent its model", c->id);
            rc = -ETIMEDOUT;
        }
        if (rc == -EHOSTUNREACH)
            snprintf(err, errlen, "peer %d: no checkpoint, and no neighbour sent its model within the round timeout "
                     "(%.0f s): nothing to join", c->id, c->round_timeout);
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
    free(n->late);
    free(n->late_count);
    free(n->is_in);
    free(n->known_round);
    free(n->awaited);
    free(n->model_wanted);
    free(n->last_heard);
    free(n->last_sent);
    free(n->dead_timers);
    sgp_local_free(&n->local);
    gsp_free(&n->g);
    nn_dataset_free(&n->shard);
    nn_model_free(&n->model);
    r->wall_seconds = clock_now() - n->t0;
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
