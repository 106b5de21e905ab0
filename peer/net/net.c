/* The transport of peer/net/net.h: sockets, timers, the handshake pump and the
 * frame reader. Every connection owns two libuv handles (its socket and its
 * timer) and is freed when the second one's close callback has run; libuv
 * calls pending connect and write callbacks (with UV_ECANCELED) before that,
 * so they may still touch the connection. */
#include "peer/net/net.h"
#include "peer/net/net_addr.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#define NET_CONNECT_TIMEOUT_MS 3000
#define NET_HS_TIMEOUT_MS 5000 /* WIRE.md "Handshake": Limits */
#define NET_BACKOFF_MIN_MS 100
/* A redial is cheap (a refused connect, or one handshake), and a neighbour
 * that comes back should have its edge again within a second. */
#define NET_BACKOFF_MAX_MS 500
/* After a neighbour answered that it speaks another protocol version: that
 * lasts until someone restarts a peer with another build, so redialling
 * every half second would only fill both logs (WIRE.md "Handshake"). */
#define NET_VERSION_RETRY_MS 10000
/* Unauthenticated inbound connections cost memory and a timer each; a
 * cluster has few members, so more than this at once is an attack or a bug. */
#define NET_MAX_PENDING 64
/* Of the unauthenticated connections, at most this many from addresses that
 * are no member's in the cluster file, and this many from any one of them:
 * a flood from elsewhere can never take the room a member needs to come back. */
#define NET_MAX_STRANGERS 16
#define NET_MAX_PER_STRANGER 4
#define NET_MAX_PER_MEMBER_ADDR (NET_MAX_PENDING / 2)
/* An inbound connection must finish its handshake this fast (the whole
 * exchange is three small flights). */
#define NET_PREAUTH_MS 2000
/* Lines about refused or failed inbound connections: at most this many per
 * window, then one line with how many more there were. */
#define NET_LOG_BURST 5
#define NET_LOG_WINDOW_MS 10000
#define NET_RBUF_INIT 16384
/* The initiator may have its first message and its AUTH flight in flight at
 * once; they get their own slots so they never take the frames' ones. */
#define NET_HS_SLOTS 2
#define NET_SLOTS (NET_QUEUE_FRAMES + NET_HS_SLOTS)

typedef struct net_slot {
    uv_write_t req; /* first: write_cb gets back to the slot from the request */
    uint8_t *buf;
    size_t cap;
    int busy;
} net_slot;

enum { C_CONNECTING, C_HS, C_UP, C_CLOSING };

typedef struct net_conn {
    uv_tcp_t tcp;
    uv_timer_t timer; /* connect timeout, then handshake deadline, then (up) the idle limit */
    uv_connect_t connect;
    net *n;
    struct net_conn *prev, *next;
    int peer; /* -1 until the handshake names it (inbound) */
    int role, state, open_handles, pending, paused;
    int draining; /* inside frames_drain: on_frame may resume reading */
    sec_hs hs;
    sec_session s;
    uint8_t *rbuf; /* received bytes not yet used: rlen of rcap */
    size_t rlen, rcap;
    uint8_t *pt; /* the plaintext of the last frame */
    size_t pt_cap;
    size_t idle_bytes; /* received since the idle limit was last re-armed */
    uint64_t busy_until; /* uv_now before which silence is expected (net_expect_busy): not idle */
    struct sockaddr_storage from; /* inbound: the other end's address */
    int stranger;      /* inbound from an address that is no member's */
    int closing_after; /* net_close_after: closes once its slots are written (and n->last sent) */
    int refused;       /* the handshake's error, once its refusal answer is written: then it closes */
    int last_sent;
    net_slot slot[NET_SLOTS];
} net_conn;

/* Bytes of a frame still arriving that count as progress (a large frame on a
 * slow link is not a stall). */
#define NET_IDLE_PROGRESS (64u << 10)
/* How slowly a loop may build, encrypt or take in a big frame (a sanitizer
 * build on a loaded machine), for net_expect_busy. */
#define NET_SLOWEST_BYTES_PER_S 20e6

typedef struct net_retry {
    uv_timer_t timer; /* first: the close callback frees the struct */
    net *n;
    int peer;
} net_retry;

typedef struct net_peer {
    int want;
    net_conn *up;      /* the authenticated connection */
    net_conn *dial;    /* our attempt in progress (higher ids only) */
    net_retry *retry;  /* heap, made by net_want for higher ids */
    uint32_t backoff_ms;
} net_peer;

static void net_log(net *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void net_log(net *n, const char *fmt, ...)
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

static uint64_t rng_next(net *n)
{
    uint64_t z = (n->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (*cap >= need)
        return 0;
    uint8_t *p = realloc(*buf, need);
    if (!p)
        return -ENOMEM;
    *buf = p;
    *cap = need;
    return 0;
}

/* ---- connection lifetime ---------------------------------------------------- */

static void schedule_retry(net *n, int peer, int reason);

static void conn_free(net_conn *c)
{
    net *n = c->n;
    if (c->prev)
        c->prev->next = c->next;
    else
        n->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    for (int i = 0; i < NET_SLOTS; i++)
        free(c->slot[i].buf);
    free(c->rbuf);
    free(c->pt);
    free(c);
}

static void conn_close_cb(uv_handle_t *h)
{
    net_conn *c = h->data;
    if (--c->open_handles == 0)
        conn_free(c);
}

static net_conn *conn_new(net *n, int role)
{
    net_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->rbuf = malloc(NET_RBUF_INIT);
    int ok = c->rbuf != NULL;
    for (int i = NET_QUEUE_FRAMES; i < NET_SLOTS && ok; i++) {
        c->slot[i].buf = malloc(SEC_HS_OUT_MAX);
        c->slot[i].cap = SEC_HS_OUT_MAX;
        ok = c->slot[i].buf != NULL;
    }
    if (!ok) {
        for (int i = 0; i < NET_SLOTS; i++)
            free(c->slot[i].buf);
        free(c->rbuf);
        free(c);
        return NULL;
    }
    c->rcap = NET_RBUF_INIT;
    c->n = n;
    c->peer = -1;
    c->role = role;
    c->state = role == SEC_INITIATOR ? C_CONNECTING : C_HS;
    uv_tcp_init(n->loop, &c->tcp);
    uv_timer_init(n->loop, &c->timer);
    c->tcp.data = c->timer.data = c->connect.data = c;
    c->open_handles = 2;
    c->next = n->conns;
    if (n->conns)
        n->conns->prev = c;
    n->conns = c;
    return c;
}

/* A line about an inbound connection that never authenticated, rate
 * limited: a flood must not fill the disk. from: the other end, for one
 * that got as far as its handshake (nothing then says which member it is). */
static void log_inbound(net *n, const char *why, const struct sockaddr_storage *from)
{
    const uint64_t now = uv_now(n->loop);
    if (now - n->log_window_start >= NET_LOG_WINDOW_MS) {
        if (n->log_suppressed)
            net_log(n, "%lu more inbound connections closed in the last %.0f s (not logged one by one)",
                    (unsigned long)n->log_suppressed, (double)(now - n->log_window_start) / 1e3);
        n->log_window_start = now, n->log_in_window = 0, n->log_suppressed = 0;
    }
    char host[64] = "";
    if (from)
        net_addr_name(from, host, sizeof host);
    if (n->log_in_window++ < NET_LOG_BURST)
        net_log(n, "inbound connection closed: %s%s%s%s", why, from ? " (from " : "", host, from ? ")" : "");
    else
        n->log_suppressed++;
}

/* why == NULL: no log line (shutdown). */
static void conn_close(net_conn *c, int reason, const char *why)
{
    if (c->state == C_CLOSING)
        return;
    net *n = c->n;
    c->state = C_CLOSING;
    const int was_pending = c->pending;
    if (c->pending) {
        n->n_pending--;
        c->pending = 0;
    }
    if (why) { /* first: why may be the handshake's own message, freed below */
        if (c->peer >= 0)
            net_log(n, "peer %d: connection closed: %s", c->peer, why);
        else if (c->role == SEC_RESPONDER)
            log_inbound(n, why, was_pending ? &c->from : NULL);
        else
            net_log(n, "connection closed: %s", why);
    }
    sec_hs_free(&c->hs);
    sec_session_free(&c->s);
    uv_close((uv_handle_t *)&c->tcp, conn_close_cb);
    uv_close((uv_handle_t *)&c->timer, conn_close_cb);
    if (c->peer < 0)
        return;
    net_peer *p = &n->peers[c->peer];
    if (p->dial == c)
        p->dial = NULL;
    if (p->up == c) {
        p->up = NULL;
        if (n->cb.on_down)
            n->cb.on_down(n->ctx, c->peer, reason);
    }
    if (c->role == SEC_INITIATOR)
        schedule_retry(n, c->peer, reason);
}

static void idle_rearm(net_conn *c);

/* Bytes the kernel holds for this connection that the loop has not read. */
static int unread_bytes(const net_conn *c)
{
    uv_os_fd_t fd;
    int pending = 0;
    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) != 0 || ioctl(fd, FIONREAD, &pending) != 0)
        return 0;
    return pending;
}

static void idle_cb(uv_timer_t *t)
{
    net_conn *c = t->data;
    /* Data waiting unread: this process was not scheduled (SIGSTOP, a
     * suspended VM), not the other end silent; libuv runs timers before it
     * polls, so the frames are read next. */
    if (unread_bytes(c) > 0) {
        idle_rearm(c);
        return;
    }
    /* A whole-model frame being built or taken in at the other end (or
     * here) blocks a loop for as long as its size takes: that is no stall. */
    const uint64_t now = uv_now(c->n->loop);
    if (now < c->busy_until) {
        uv_timer_start(&c->timer, idle_cb, c->busy_until - now + c->n->idle_ms, 0);
        return;
    }
    char why[96];
    snprintf(why, sizeof why, "no complete frame for %.3g s", (double)c->n->idle_ms / 1e3);
    conn_close(c, -ETIMEDOUT, why);
}

/* An up connection made progress: the idle limit starts again. */
static void idle_rearm(net_conn *c)
{
    c->idle_bytes = 0;
    if (c->n->idle_ms)
        uv_timer_start(&c->timer, idle_cb, c->n->idle_ms, 0);
}

static void timeout_cb(uv_timer_t *t)
{
    net_conn *c = t->data;
    conn_close(c, -ETIMEDOUT, c->state == C_CONNECTING ? "connect timed out" : "handshake timed out");
}

/* ---- writing ---------------------------------------------------------------- */

static void drain_step(net_conn *c);

/* Buffers grown past this for one big frame (a MODEL, a SYNC) are given
 * back once it has gone: a connection keeps room for the usual frames, not a
 * copy of the model for each neighbour. */
#define NET_KEEP_BYTES (16u << 20)

static void write_cb(uv_write_t *req, int status)
{
    net_slot *s = (net_slot *)req;
    net_conn *c = req->data;
    s->busy = 0;
    if (s->cap > NET_KEEP_BYTES) {
        free(s->buf);
        s->buf = NULL, s->cap = 0;
    }
    if (c->refused) { /* the refusal's answer is out (or cannot go): close, saying why it was refused */
        conn_close(c, c->refused, c->hs.msg);
        return;
    }
    if (status < 0 && status != UV_ECANCELED) {
        char why[96];
        snprintf(why, sizeof why, "write: %s", uv_strerror(status));
        conn_close(c, status, why);
    } else if (c->closing_after)
        drain_step(c);
}

static int slot_write(net_conn *c, net_slot *s, size_t len)
{
    uv_buf_t b = uv_buf_init((char *)s->buf, (unsigned)len);
    s->req.data = c;
    int r = uv_write(&s->req, (uv_stream_t *)&c->tcp, &b, 1, write_cb);
    if (r < 0)
        return r;
    s->busy = 1;
    return 0;
}

static net_slot *free_slot(net_conn *c, int lo, int hi)
{
    for (int i = lo; i < hi; i++)
        if (!c->slot[i].busy)
            return &c->slot[i];
    return NULL;
}

/* ---- reading ---------------------------------------------------------------- */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    net_conn *c = h->data;
    /* Room only up to the current frame's size, already checked against the
     * limit (or the initial buffer while the prefix is incomplete): a length
     * prefix never makes us allocate before it has been checked. A full
     * buffer (len 0) reads as UV_ENOBUFS and closes the connection. */
    buf->base = (char *)c->rbuf + c->rlen;
    buf->len = c->rcap - c->rlen;
}

static void frames_drain(net_conn *c)
{
    net *n = c->n;
    size_t off = 0;
    c->draining = 1;
    while (c->state == C_UP && !c->paused && c->rlen - off >= 4) {
        int need = sec_frame_need(c->rbuf + off, c->rlen - off, c->s.max_frame);
        if (need < 0) {
            conn_close(c, need, need == -EMSGSIZE ? "frame length over the limit" : "frame length below the minimum");
            return;
        }
        if (c->rlen - off < (size_t)need)
            break;
        if (grow(&c->pt, &c->pt_cap, (size_t)need - 4 - SEC_ABYTES + 1) < 0) {
            conn_close(c, -ENOMEM, "out of memory for a frame");
            return;
        }
        const uint64_t t0 = uv_hrtime();
        int m = sec_open(&c->s, c->rbuf + off, (size_t)need, c->pt, c->pt_cap);
        n->crypto_seconds += (double)(uv_hrtime() - t0) * 1e-9;
        if (m < 0) {
            conn_close(c, m, m == -EBADMSG ? "frame fails authentication" : "frame refused");
            return;
        }
        off += (size_t)need;
        idle_rearm(c);
        if (n->cb.on_frame)
            n->cb.on_frame(n->ctx, c->peer, c->pt, (size_t)m);
    }
    c->draining = 0;
    if (c->state == C_CLOSING)
        return;
    memmove(c->rbuf, c->rbuf + off, c->rlen - off);
    c->rlen -= off;
    if (c->pt_cap > NET_KEEP_BYTES) {
        free(c->pt);
        c->pt = NULL, c->pt_cap = 0;
    }
    if (c->rcap > NET_KEEP_BYTES && c->rlen <= NET_RBUF_INIT) {
        uint8_t *small = realloc(c->rbuf, NET_RBUF_INIT);
        if (small)
            c->rbuf = small, c->rcap = NET_RBUF_INIT;
    }
    if (c->state == C_UP && c->rlen >= 4) {
        int need = sec_frame_need(c->rbuf, c->rlen, c->s.max_frame);
        if (need < 0) {
            conn_close(c, need, need == -EMSGSIZE ? "frame length over the limit" : "frame length below the minimum");
            return;
        }
        if (grow(&c->rbuf, &c->rcap, (size_t)need) < 0)
            conn_close(c, -ENOMEM, "out of memory for a frame");
    }
}

static void conn_up(net_conn *c)
{
    net *n = c->n;
    int r = sec_hs_finish(&c->hs, &c->s);
    if (r == 0 && n->max_frame < SEC_FRAME_MAX)
        r = sec_session_set_max(&c->s, n->max_frame);
    if (r < 0) {
        conn_close(c, r, "handshake failed");
        return;
    }
    uint32_t id = c->s.peer_id;
    if (id >= (uint32_t)n->c->n_peers || id == (uint32_t)n->my_id) {
        conn_close(c, -EPROTO, "handshake names an impossible peer");
        return;
    }
    if (c->pending) {
        n->n_pending--;
        c->pending = 0;
    }
    c->peer = (int)id;
    net_peer *p = &n->peers[id];
    uv_timer_stop(&c->timer);
    idle_rearm(c);
    /* Replace only now that AUTH has verified (WIRE.md "Connections"). */
    if (p->up && p->up != c)
        conn_close(p->up, -ECONNRESET, "replaced by a new connection");
    if (p->dial == c)
        p->dial = NULL;
    p->up = c;
    p->backoff_ms = NET_BACKOFF_MIN_MS;
    c->state = C_UP;
    if (n->cb.on_up)
        n->cb.on_up(n->ctx, c->peer);
}

/* The handshake refused what it read. A refusal for another version has
 * one answer for the wire (sec_hs_refusal), written before the connection
 * closes (write_cb closes it); every other refusal closes at once, silently. */
static void hs_refuse(net_conn *c, int rc)
{
    net_slot *s = free_slot(c, NET_QUEUE_FRAMES, NET_SLOTS);
    int n = s ? sec_hs_refusal(&c->hs, s->buf, s->cap) : 0;
    if (n > 0) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        if (slot_write(c, s, (size_t)n) == 0) {
            c->refused = rc;
            return;
        }
    }
    conn_close(c, rc, c->hs.msg[0] ? c->hs.msg : "handshake refused");
}

/* Feed what was received to the handshake and send what it answers, until it
 * needs more input or is done. 0, or -1 when the connection was closed (or
 * closes once its refusal is written). */
static int hs_pump(net_conn *c)
{
    for (;;) {
        int used = sec_hs_consume(&c->hs, c->rbuf, c->rlen);
        if (used < 0) {
            hs_refuse(c, used);
            return -1;
        }
        memmove(c->rbuf, c->rbuf + used, c->rlen - (size_t)used);
        c->rlen -= (size_t)used;
        net_slot *s = free_slot(c, NET_QUEUE_FRAMES, NET_SLOTS);
        int out = 0;
        if (s) {
            out = sec_hs_produce(&c->hs, s->buf, s->cap);
            if (out < 0) {
                conn_close(c, out, c->hs.msg[0] ? c->hs.msg : "handshake failed");
                return -1;
            }
            int r = out > 0 ? slot_write(c, s, (size_t)out) : 0;
            if (r < 0) {
                conn_close(c, r, "write failed during the handshake");
                return -1;
            }
        } else if (sec_hs_want(&c->hs) == 0) {
            /* Cannot happen with two slots; never spin on it. */
            conn_close(c, -ENOBUFS, "handshake writes stuck");
            return -1;
        }
        if (sec_hs_done(&c->hs)) {
            conn_up(c);
            return c->state == C_UP ? 0 : -1;
        }
        if (used == 0 && out == 0)
            return 0;
    }
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    net_conn *c = st->data;
    if (nread == 0 || c->state == C_CLOSING)
        return;
    if (nread < 0) {
        char why[96];
        if (nread == UV_EOF)
            snprintf(why, sizeof why, "closed by the other side");
        else
            snprintf(why, sizeof why, "read: %s", uv_strerror((int)nread));
        conn_close(c, nread == UV_EOF ? -ECONNRESET : (int)nread, why);
        return;
    }
    c->rlen += (size_t)nread;
    if (c->state == C_UP && (c->idle_bytes += (size_t)nread) >= NET_IDLE_PROGRESS)
        idle_rearm(c);
    if (c->state == C_HS && hs_pump(c) < 0)
        return;
    if (c->state == C_UP)
        frames_drain(c);
}

/* ---- dialling and accepting ------------------------------------------------- */

static void connect_cb(uv_connect_t *req, int status)
{
    net_conn *c = req->data;
    if (status == UV_ECANCELED || c->state == C_CLOSING)
        return;
    if (status < 0) {
        char why[96];
        snprintf(why, sizeof why, "connect: %s", uv_strerror(status));
        conn_close(c, status, why);
        return;
    }
    c->state = C_HS;
    uv_tcp_nodelay(&c->tcp, 1);
    uv_timer_start(&c->timer, timeout_cb, NET_HS_TIMEOUT_MS, 0);
    int r = uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
    if (r < 0) {
        conn_close(c, r, "read_start failed");
        return;
    }
    hs_pump(c);
}

static void dial(net *n, int peer)
{
    net_peer *p = &n->peers[peer];
    if (n->closing || p->dial || p->up)
        return;
    struct sockaddr_storage sa;
    int r = net_addr_of(&n->c->peers[peer], &sa);
    if (r < 0) {
        net_log(n, "peer %d: cannot dial %s: %s", peer, n->c->peers[peer].host,
                r == -EAFNOSUPPORT ? "not an IP address" : uv_strerror(r));
        return; /* a bad address stays bad: no retry */
    }
    net_conn *c = conn_new(n, SEC_INITIATOR);
    if (!c) {
        net_log(n, "peer %d: out of memory for a connection", peer);
        schedule_retry(n, peer, -ENOMEM);
        return;
    }
    c->peer = peer;
    p->dial = c;
    r = sec_hs_init(&c->hs, SEC_INITIATOR, (uint32_t)n->my_id, (uint32_t)peer, n->kp, cluster_pubkey_lookup,
                    (void *)n->c, n->cid);
    if (r < 0) {
        conn_close(c, r, "handshake init failed");
        return;
    }
    uv_timer_start(&c->timer, timeout_cb, NET_CONNECT_TIMEOUT_MS, 0);
    r = uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&sa, connect_cb);
    if (r < 0) {
        char why[96];
        snprintf(why, sizeof why, "connect: %s", uv_strerror(r));
        conn_close(c, r, why);
    }
}

static void retry_cb(uv_timer_t *t)
{
    net_retry *rt = (net_retry *)t;
    dial(rt->n, rt->peer);
}

/* reason: why the last attempt ended (-errno). */
static void schedule_retry(net *n, int peer, int reason)
{
    net_peer *p = &n->peers[peer];
    if (n->closing || !p->want || !p->retry || p->dial || p->up)
        return;
    const uint64_t base = reason == -EPROTONOSUPPORT ? NET_VERSION_RETRY_MS : p->backoff_ms;
    uint64_t delay = base + rng_next(n) % (base / 2 + 1);
    p->backoff_ms = p->backoff_ms * 2 > NET_BACKOFF_MAX_MS ? NET_BACKOFF_MAX_MS : p->backoff_ms * 2;
    uv_timer_start(&p->retry->timer, retry_cb, delay, 0);
}

/* NULL if c may wait for its handshake, else why not. */
static const char *admission(const net *n, const net_conn *c, char *why, size_t cap)
{
    if (n->n_pending >= NET_MAX_PENDING)
        return "too many handshakes in progress";
    int strangers = 0, same = 0;
    for (const net_conn *o = n->conns; o; o = o->next)
        if (o != c && o->pending) {
            strangers += o->stranger;
            same += net_addr_same_host(&o->from, &c->from);
        }
    char host[64];
    net_addr_name(&c->from, host, sizeof host);
    if (c->stranger && strangers >= NET_MAX_STRANGERS)
        snprintf(why, cap, "too many handshakes from addresses outside the cluster (%s)", host);
    else if (c->stranger && same >= NET_MAX_PER_STRANGER)
        snprintf(why, cap, "too many handshakes from %s", host);
    else if (!c->stranger && same >= NET_MAX_PER_MEMBER_ADDR)
        snprintf(why, cap, "too many handshakes from member address %s", host);
    else
        return NULL;
    return why;
}

static void on_connection(uv_stream_t *server, int status)
{
    net *n = server->data;
    if (status < 0) {
        net_log(n, "accept: %s", uv_strerror(status));
        return;
    }
    net_conn *c = conn_new(n, SEC_RESPONDER);
    if (!c) {
        net_log(n, "out of memory for an inbound connection");
        return;
    }
    int r = uv_accept(server, (uv_stream_t *)&c->tcp);
    if (r < 0) {
        conn_close(c, r, "accept failed");
        return;
    }
    int len = (int)sizeof c->from;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&c->from, &len) < 0)
        memset(&c->from, 0, sizeof c->from);
    c->stranger = !net_addr_is_member(n->c, n->my_id, &c->from);
    char why[160];
    if (admission(n, c, why, sizeof why)) {
        conn_close(c, -EBUSY, why);
        return;
    }
    c->pending = 1;
    n->n_pending++;
    r = sec_hs_init(&c->hs, SEC_RESPONDER, (uint32_t)n->my_id, SEC_ANY_PEER, n->kp, cluster_pubkey_lookup,
                    (void *)n->c, n->cid);
    if (r == 0)
        r = uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
    if (r < 0) {
        conn_close(c, r, "handshake init failed");
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    uv_timer_start(&c->timer, timeout_cb, NET_PREAUTH_MS, 0);
}

/* ---- public ----------------------------------------------------------------- */

static void free_handle_cb(uv_handle_t *h) { free(h); }

int net_init(net *n, uv_loop_t *loop, const cluster *c, int my_id, const sec_keypair *kp, const net_callbacks *cb,
             void *ctx)
{
    if (!n)
        return -EINVAL;
    memset(n, 0, sizeof *n);
    if (!loop || !c || !kp || !cb || my_id < 0 || my_id >= c->n_peers)
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
    n->closing = 1; /* until the listener is up: net_want does nothing */
    cluster_id(c, n->cid);
    for (int i = 0; i < 8; i++)
        n->rng = n->rng << 8 | n->cid[i];
    n->rng ^= (uint64_t)my_id * 0x9e3779b97f4a7c15ull;
    n->peers = calloc((size_t)c->n_peers, sizeof *n->peers);
    if (!n->peers)
        return -ENOMEM;
    for (int i = 0; i < c->n_peers; i++)
        n->peers[i].backoff_ms = NET_BACKOFF_MIN_MS;

    struct sigaction old;
    if (sigaction(SIGPIPE, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
        signal(SIGPIPE, SIG_IGN);

    struct sockaddr_storage sa;
    r = net_addr_of(&c->peers[my_id], &sa);
    if (r < 0)
        return r;
    n->listener = malloc(sizeof *n->listener);
    if (!n->listener)
        return -ENOMEM;
    uv_tcp_init(loop, n->listener);
    n->listener->data = n;
    r = uv_tcp_bind(n->listener, (const struct sockaddr *)&sa, 0);
    if (r == 0)
        r = uv_listen((uv_stream_t *)n->listener, 128, on_connection);
    if (r < 0) {
        char addr[CLUSTER_HOST_MAX + 16];
        cluster_peer_addr(&c->peers[my_id], addr, sizeof addr);
        net_log(n, "listen on %s: %s", addr, uv_strerror(r));
        uv_close((uv_handle_t *)n->listener, free_handle_cb);
        n->listener = NULL;
        return r;
    }
    n->closing = 0;
    return 0;
}

int net_want(net *n, int peer)
{
    if (!n || !n->peers || peer < 0 || peer >= n->c->n_peers || peer == n->my_id)
        return -EINVAL;
    net_peer *p = &n->peers[peer];
    p->want = 1;
    if (peer < n->my_id || n->closing)
        return 0;
    if (!p->retry) {
        p->retry = malloc(sizeof *p->retry);
        if (!p->retry)
            return -ENOMEM;
        uv_timer_init(n->loop, &p->retry->timer);
        p->retry->n = n;
        p->retry->peer = peer;
    }
    dial(n, peer);
    return 0;
}

int net_set_idle_timeout(net *n, double seconds)
{
    if (!n || !(seconds >= 0) || seconds > 1e6)
        return -EINVAL;
    n->idle_ms = (uint64_t)(seconds * 1e3 + 0.5);
    return 0;
}

int net_set_max_frame(net *n, size_t max_frame)
{
    if (!n || max_frame < SEC_FRAME_MIN || max_frame > SEC_FRAME_MAX)
        return -EINVAL;
    n->max_frame = max_frame;
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
        b += sizeof *c + c->rcap + c->pt_cap;
        for (int i = 0; i < NET_SLOTS; i++)
            b += c->slot[i].cap;
    }
    return b;
}

int net_send(net *n, int peer, const void *msg, size_t len)
{
    if (!n || !n->peers || peer < 0 || peer >= n->c->n_peers || (!msg && len))
        return -EINVAL;
    net_conn *c = n->peers[peer].up;
    if (!c)
        return -ENOTCONN;
    if (len > c->s.max_frame - SEC_ABYTES)
        return -EMSGSIZE;
    net_slot *s = free_slot(c, 0, NET_QUEUE_FRAMES);
    if (!s)
        return -EAGAIN;
    if (grow(&s->buf, &s->cap, sec_seal_bound(len)) < 0)
        return -ENOMEM;
    int m = sec_seal(&c->s, msg ? msg : "", len, s->buf, s->cap);
    if (m < 0) {
        conn_close(c, m, "seal failed");
        return m;
    }
    int r = slot_write(c, s, (size_t)m);
    if (r < 0) {
        /* The frame took a nonce: the stream cannot go on without it. */
        char why[96];
        snprintf(why, sizeof why, "write: %s", uv_strerror(r));
        conn_close(c, r, why);
        return r;
    }
    return 0;
}

int net_busy(const net *n, int peer)
{
    net_conn *c = up_conn(n, peer);
    return !c || !free_slot(c, 0, NET_QUEUE_FRAMES);
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
    conn_close(c, -EPROTO, why);
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
    int r = uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
    if (r < 0) {
        conn_close(c, r, "read_start failed");
        return r;
    }
    /* From inside on_frame, the drain in progress goes on by itself. */
    if (!c->draining)
        frames_drain(c);
    return 0;
}

/* No more connections: the listener and the redial timers go. */
static void stop_accepting(net *n)
{
    n->closing = 1;
    if (n->listener) {
        uv_close((uv_handle_t *)n->listener, free_handle_cb);
        n->listener = NULL;
    }
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
        conn_close(c, -ECANCELED, NULL);
}

/* A connection closing after its writes: n->last into the first free slot,
 * then close once no slot is busy. */
static void drain_step(net_conn *c)
{
    if (c->state == C_CLOSING)
        return;
    net *n = c->n;
    if (n->last && !c->last_sent) {
        net_slot *s = free_slot(c, 0, NET_QUEUE_FRAMES);
        if (!s)
            return; /* again from write_cb */
        int m = grow(&s->buf, &s->cap, sec_seal_bound(n->last_len)) < 0
                    ? -ENOMEM
                    : sec_seal(&c->s, n->last, n->last_len, s->buf, s->cap);
        if (m < 0 || slot_write(c, s, (size_t)m) < 0) {
            conn_close(c, -ECANCELED, NULL);
            return;
        }
        c->last_sent = 1;
    }
    for (int i = 0; i < NET_QUEUE_FRAMES; i++)
        if (c->slot[i].busy)
            return;
    conn_close(c, -ECANCELED, NULL);
}

static void drain_timeout_cb(uv_timer_t *t)
{
    net_conn *c = t->data;
    conn_close(c, -ETIMEDOUT, NULL);
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
            conn_close(c, -ECANCELED, NULL);
            continue;
        }
        c->closing_after = 1;
        c->paused = 1;
        uv_read_stop((uv_stream_t *)&c->tcp);
        uv_timer_start(&c->timer, drain_timeout_cb, ms, 0);
        drain_step(c);
    }
}

void net_free(net *n)
{
    if (!n)
        return;
    free(n->peers);
    free(n->last);
    memset(n, 0, sizeof *n);
}
