/* The transport of peer/net/net.h: its public calls over the peer table;
 * the listener is net_listen.c, the connections net_conn.c, net_dial.c,
 * net_hs.c, net_frame.c and net_idle.c (net_impl.h says which does what). */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/net/net.h"
#include "peer/net/net_impl.h"

/* How slowly a loop may build, encrypt or take in a big frame (a sanitizer
 * build on a loaded machine), for net_expect_busy. */
#define NET_SLOWEST_BYTES_PER_S 20e6

void net_log(net *n, const char *fmt, ...)
{
    char line[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n->cb.on_log)
        n->cb.on_log(n->ctx, line);
    else
        fprintf(stderr, "net %d: %s\n", n->my_id, line);
}

static void free_handle_cb(uv_handle_t *h) { free(h); }

int net_init(net *n, uv_loop_t *loop, const cluster *c, int my_id, const sec_keypair *kp, const net_callbacks *cb,
             void *ctx)
{
    return net_init_at(n, loop, c, my_id, kp, cb, ctx, NULL, 0, 0, NULL);
}

int net_init_at(net *n, uv_loop_t *loop, const cluster *c, int my_id, const sec_keypair *kp, const net_callbacks *cb,
                void *ctx, const char *host, unsigned port, uint64_t since, const uint8_t *cred)
{
    if (!n)
        return -EINVAL;
    memset(n, 0, sizeof *n);
    if (!loop || !c || !kp || !cb || my_id < 0 || my_id >= c->n_peers || !cred != !c->peers[my_id].vacant)
        return -EINVAL;
    int r = sec_init();
    if (r < 0)
        return r;
    n->loop = loop;
    n->c = c;
    n->kp = kp;
    n->my_id = my_id;
    n->cb = *cb;
    n->ctx = ctx;
    n->max_frame = SEC_FRAME_MAX;
    n->max_message = (size_t)1 << 31;
    n->piece = SEC_PIECE_MAX;
    n->closing = 1; /* until the listener is up or its bind is being retried: net_want does nothing */
    cluster_id(c, n->cid);
    for (int i = 0; i < 8; i++)
        n->rng = n->rng << 8 | n->cid[i];
    n->rng ^= (uint64_t)my_id * 0x9e3779b97f4a7c15ull;
    n->peers = calloc((size_t)c->n_peers, sizeof *n->peers);
    if (!n->peers)
        return -ENOMEM;
    if (c->n_founders < c->n_peers && !(n->slot_pk = calloc((size_t)c->n_peers, sizeof *n->slot_pk)))
        return -ENOMEM;
    for (int i = 0; i < c->n_peers; i++)
        n->peers[i].backoff_ms = NET_BACKOFF_MIN_MS;

    struct sigaction old;
    if (sigaction(SIGPIPE, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
        signal(SIGPIPE, SIG_IGN);

    n->cred = cred;
    if ((r = net_announce_self(n, host, port, since)) < 0)
        return r;
    n->listen_retry_ms = NET_LISTEN_RETRY_MS;
    if (net_where(n, my_id) && (r = net_listen_start(n)) < 0) /* (a joiner without an address listens nowhere) */
        return r;
    n->closing = 0;
    return 0;
}

int net_want(net *n, int peer)
{
    if (!n || !n->peers || peer < 0 || peer >= n->c->n_peers || peer == n->my_id)
        return -EINVAL;
    n->peers[peer].want = 1;
    net_reconsider(n, peer);
    return 0;
}

int net_set_idle_timeout(net *n, double seconds)
{
    if (!n || !(seconds >= 0) || seconds > 1e6)
        return -EINVAL;
    n->idle_ms = (uint64_t)(seconds * 1e3 + 0.5);
    return 0;
}

int net_set_listen_retry(net *n, double seconds)
{
    if (!n || !(seconds >= 0) || seconds > 1e6)
        return -EINVAL;
    n->listen_retry_ms = (uint64_t)(seconds * 1e3 + 0.5);
    return 0;
}

int net_set_max_frame(net *n, size_t max_frame)
{
    if (!n || max_frame < SEC_FRAME_MIN || max_frame > SEC_FRAME_MAX)
        return -EINVAL;
    n->max_frame = max_frame;
    return 0;
}

int net_set_max_message(net *n, size_t bytes)
{
    if (!n || bytes < SEC_PIECE_MAX)
        return -EINVAL;
    n->max_message = bytes;
    return 0;
}

int net_set_piece(net *n, size_t bytes)
{
    if (!n || !bytes || bytes > SEC_PIECE_MAX)
        return -EINVAL;
    n->piece = bytes;
    return 0;
}

static net_conn *up_conn(const net *n, int peer)
{
    if (!n || !n->peers || peer < 0 || peer >= n->c->n_peers)
        return NULL;
    return n->peers[peer].up;
}

void net_expect_busy(net *n, int peer, size_t bytes)
{
    net_conn *c = up_conn(n, peer);
    if (!c)
        return;
    const uint64_t until = uv_now(n->loop) + (uint64_t)(1e3 * (double)bytes / NET_SLOWEST_BYTES_PER_S);
    if (until > c->busy_until)
        c->busy_until = until;
}

size_t net_bytes(const net *n)
{
    size_t b = n->last ? n->last_len : 0;
    for (const net_conn *c = n->conns; c; c = c->next) {
        b += sizeof *c + c->rcap + c->mcap;
        for (int i = 0; i < NET_SLOTS; i++)
            b += c->slot[i].cap;
    }
    return b;
}

uint8_t *net_room(net *n, int peer, size_t *len, int *err)
{
    int rc = n && n->peers && peer >= 0 && peer < n->c->n_peers ? -ENOTCONN : -EINVAL;
    net_conn *c = up_conn(n, peer);
    net_slot *s = NULL;
    if (!c)
        goto fail;
    if (*len > n->max_message) /* (no message is longer: one that needs more fails to encode) */
        *len = n->max_message;
    rc = -EAGAIN;
    if (c->sealing || !(s = net_slot_find_free(c, 0, NET_QUEUE_FRAMES))) /* (frames are sealed in order) */
        goto fail;
    rc = -ENOMEM;
    if (net_buf_grow(&s->buf, &s->cap, net_frames_bound(*len, net_piece(c))) < 0)
        goto fail;
    c->room = s;
    return s->buf + SEC_PT_OFFSET;
fail:
    *err = rc;
    return NULL;
}

/* net_room's slot of the connection to peer, taken for its len bytes (*c:
 * that connection); NULL with *err. */
static net_slot *take_room(net *n, int peer, size_t len, net_conn **c, int *err)
{
    *c = up_conn(n, peer);
    net_slot *s = *c ? (*c)->room : NULL;
    *err = !*c ? -ENOTCONN : (*c)->sealing ? -EAGAIN : -EINVAL;
    if (!s || s->busy || (*c)->sealing || net_frames_bound(len, net_piece(*c)) > s->cap)
        return NULL;
    *err = -EMSGSIZE;
    if (len > n->max_message)
        return NULL;
    (*c)->room = NULL;
    return s;
}

int net_send_room_later(net *n, int peer, size_t len, void (*before)(uint8_t *pt, size_t len, void *arg), void *arg)
{
    int err;
    net_conn *c;
    net_slot *s = take_room(n, peer, len, &c, &err);
    return s ? net_seal_later(c, s, len, before, arg) : err;
}

int net_send_room(net *n, int peer, size_t len)
{
    int err;
    net_conn *c;
    net_slot *s = take_room(n, peer, len, &c, &err);
    if (!s)
        return err;
    long m = net_seal_message(c, s, len);
    if (m < 0) {
        net_conn_close(c, (int)m, "seal failed");
        return (int)m;
    }
    return net_slot_send(c, s, (size_t)m);
}

int net_send(net *n, int peer, const void *msg, size_t len)
{
    if (!msg && len)
        return -EINVAL;
    int err;
    size_t cap = len;
    uint8_t *room = net_room(n, peer, &cap, &err);
    if (!room)
        return err;
    if (cap < len)
        return -EMSGSIZE;
    if (len)
        memcpy(room, msg, len);
    return net_send_room(n, peer, len);
}

int net_busy(const net *n, int peer)
{
    net_conn *c = up_conn(n, peer);
    return !c || c->sealing || !net_slot_find_free(c, 0, NET_QUEUE_FRAMES);
}

int net_is_up(const net *n, int peer) { return up_conn(n, peer) != NULL; }

int net_sending(const net *n, int peer)
{
    net_conn *c = up_conn(n, peer);
    for (int i = 0; c && i < NET_QUEUE_FRAMES; i++)
        if (c->slot[i].busy)
            return 1;
    return 0;
}

int net_drop(net *n, int peer, const char *why)
{
    net_conn *c = up_conn(n, peer);
    if (!c)
        return -ENOTCONN;
    net_conn_close(c, -EPROTO, why);
    return 0;
}

int net_read_pause(net *n, int peer, int paused)
{
    net_conn *c = up_conn(n, peer);
    if (!c)
        return -ENOTCONN;
    if (paused) {
        c->paused = 1;
        uv_read_stop((uv_stream_t *)&c->tcp);
        return 0;
    }
    if (!c->paused)
        return 0;
    c->paused = 0;
    if (c->noting) /* (reading starts again once that message is delivered) */
        return 0;
    int r = uv_read_start((uv_stream_t *)&c->tcp, net_alloc_cb, net_read_cb);
    if (r < 0) {
        net_conn_close(c, r, "read_start failed");
        return r;
    }
    /* From inside on_frame, the drain in progress goes on by itself. */
    if (!c->draining)
        net_frames_drain(c);
    return 0;
}

/* No more connections: the listener and the redial timers go. */
static void stop_accepting(net *n)
{
    n->closing = 1;
    net_listen_stop(n);
    for (int i = 0; n->peers && i < n->c->n_peers; i++)
        if (n->peers[i].retry) {
            uv_close((uv_handle_t *)&n->peers[i].retry->timer, free_handle_cb);
            n->peers[i].retry = NULL;
        }
}

void net_close(net *n)
{
    if (!n || !n->loop)
        return;
    stop_accepting(n);
    for (net_conn *c = n->conns; c; c = c->next)
        net_conn_close(c, -ECANCELED, NULL);
}

void net_close_after(net *n, const void *last, size_t len, double seconds)
{
    if (!n || !n->loop)
        return;
    stop_accepting(n);
    free(n->last);
    n->last = NULL, n->last_len = 0;
    if (last && len <= n->max_frame - SEC_ABYTES && (n->last = malloc(len ? len : 1))) {
        memcpy(n->last, last, len);
        n->last_len = len;
    }
    const uint64_t ms = seconds > 0 ? (uint64_t)(seconds * 1e3) : 0;
    for (net_conn *c = n->conns; c; c = c->next) {
        if (c->state != C_UP || c->peer < 0 || n->peers[c->peer].up != c || !ms) {
            net_conn_close(c, -ECANCELED, NULL);
            continue;
        }
        c->closing_after = 1;
        c->paused = 0;
        if (!c->noting) /* (else reading starts again once that message is looked at) */
            uv_read_start((uv_stream_t *)&c->tcp, net_alloc_cb, net_read_cb);
        uv_timer_start(&c->timer, net_drain_deadline_cb, ms, 0);
        net_drain_step(c);
    }
}

void net_free(net *n)
{
    if (!n)
        return;
    net_roster_free(n);
    free(n->peers);
    free(n->last);
    free(n->slot_pk);
    free(n->revoked);
    free(n->revoked_sig);
    memset(n, 0, sizeof *n);
}
