/* A connection's life (net_impl.h): made with its two libuv handles, closed
 * once (with its one log line, rate limited for inbound ones that never
 * authenticated, and on_down for one that was up), freed when both handles'
 * close callbacks have run. */
#include <errno.h>
#include <stdlib.h>

#include "peer/net/net_addr.h"
#include "peer/net/net_impl.h"

/* Lines about refused or failed inbound connections: at most this many per
 * window, then one line with how many more there were. */
#define NET_LOG_BURST 5
#define NET_LOG_WINDOW_MS 10000

static void conn_free(net_conn *c)
{
    net *n = c->n;
    if (c->prev)
        c->prev->next = c->next;
    else
        n->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    sec_session_free(&c->s);
    for (int i = 0; i < NET_SLOTS; i++)
        free(c->slot[i].buf);
    free(c->rbuf);
    free(c->mbuf);
    free(c);
}

void net_conn_release(net_conn *c)
{
    if (c->state == C_CLOSING && c->open_handles == 0 && !c->sealing && !c->noting)
        conn_free(c);
}

static void conn_close_cb(uv_handle_t *h)
{
    net_conn *c = h->data;
    c->open_handles--;
    net_conn_release(c);
}

net_conn *net_conn_new(net *n, int role)
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
    c->claim = -1;
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
void net_conn_close(net_conn *c, int reason, const char *why)
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
    sec_hs_free(&c->hs); /* (the session goes with the connection's memory: the thread pool may be using it) */
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
        net_retry_schedule(n, c->peer, reason);
}
