/* Making connections (net_impl.h, WIRE.md "Connections"): the lower id
 * dials the higher (or a peer that dials in dials: net_roster.c) and
 * redials with exponential backoff and jitter; inbound
 * connections are accepted into the room for handshakes (net_admit.c)
 * before their handshake starts. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "peer/net/net_addr.h"
#include "peer/net/net_impl.h"

#define NET_CONNECT_TIMEOUT_MS 3000
#define NET_HS_TIMEOUT_MS 5000 /* WIRE.md "Handshake": Limits */
/* An inbound connection must finish its handshake this fast (the whole
 * exchange is three small flights). */
#define NET_PREAUTH_MS 2000

static uint64_t rng_next(net *n)
{
    uint64_t z = (n->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void connect_cb(uv_connect_t *req, int status)
{
    net_conn *c = req->data;
    if (status == UV_ECANCELED || c->state == C_CLOSING)
        return;
    if (status < 0) {
        char why[96];
        snprintf(why, sizeof why, "connect: %s", uv_strerror(status));
        net_conn_close(c, status, why);
        return;
    }
    c->state = C_HS;
    uv_tcp_nodelay(&c->tcp, 1);
    uv_timer_start(&c->timer, net_deadline_cb, NET_HS_TIMEOUT_MS, 0);
    int r = uv_read_start((uv_stream_t *)&c->tcp, net_alloc_cb, net_read_cb);
    if (r < 0) {
        net_conn_close(c, r, "read_start failed");
        return;
    }
    net_hs_pump(c);
}

void net_dial(net *n, int peer)
{
    net_peer *p = &n->peers[peer];
    if (n->closing || p->dial || p->up || !net_should_dial(n, peer))
        return;
    struct sockaddr_storage sa;
    const cluster_peer *at = net_where(n, peer);
    int r = net_addr_of(at, &sa);
    if (r < 0) {
        net_log(n, "peer %d: cannot dial %s: %s", peer, at->host,
                r == -EAFNOSUPPORT ? "not an IP address" : uv_strerror(r));
        return; /* a bad address stays bad (until another is announced): no retry */
    }
    net_conn *c = net_conn_new(n, SEC_INITIATOR);
    if (!c) {
        net_log(n, "peer %d: out of memory for a connection", peer);
        net_retry_schedule(n, peer, -ENOMEM);
        return;
    }
    c->peer = peer;
    p->dial = c;
    const uint32_t me = (uint32_t)n->my_id, them = (uint32_t)peer;
    r = n->cred      ? sec_hs_init_join(&c->hs, me, them, n->kp, net_lookup, n, n->cid, n->cred)
        : n->dial_in ? sec_hs_init_dial_in(&c->hs, me, them, n->kp, net_lookup, n, n->cid)
                     : sec_hs_init(&c->hs, SEC_INITIATOR, me, them, n->kp, net_lookup, n, n->cid);
    if (r < 0) {
        net_conn_close(c, r, "handshake init failed");
        return;
    }
    uv_timer_start(&c->timer, net_deadline_cb, NET_CONNECT_TIMEOUT_MS, 0);
    r = uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&sa, connect_cb);
    if (r < 0) {
        char why[96];
        snprintf(why, sizeof why, "connect: %s", uv_strerror(r));
        net_conn_close(c, r, why);
    }
}

static void retry_cb(uv_timer_t *t)
{
    net_retry *rt = (net_retry *)t;
    net_dial(rt->n, rt->peer);
}

void net_retry_schedule(net *n, int peer, int reason)
{
    net_peer *p = &n->peers[peer];
    if (n->closing || !p->want || !p->retry || p->dial || p->up)
        return;
    const uint64_t base = reason == -EPROTONOSUPPORT ? NET_VERSION_RETRY_MS : p->backoff_ms;
    uint64_t delay = base + rng_next(n) % (base / 2 + 1);
    p->backoff_ms = p->backoff_ms * 2 > NET_BACKOFF_MAX_MS ? NET_BACKOFF_MAX_MS : p->backoff_ms * 2;
    uv_timer_start(&p->retry->timer, retry_cb, delay, 0);
}

/* What the dialler sent before we accepted it (a member sends its first
 * flight as soon as it is connected), handed to the handshake now rather
 * than on the loop's next turn: after a busy spell the loop accepts what
 * queued meanwhile in one go, and the connections accepted after this one
 * would otherwise displace it from the open room before its claim was read
 * (net_admit.c). */
static void read_what_came(net_conn *c)
{
    uv_os_fd_t fd;
    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) != 0)
        return;
    ssize_t got = recv(fd, c->rbuf + c->rlen, c->rcap - c->rlen, MSG_DONTWAIT);
    if (got <= 0)
        return; /* (nothing yet; an end or an error is the loop's next read's to see) */
    c->rlen += (size_t)got;
    net_hs_pump(c);
}

void net_on_connection(uv_stream_t *server, int status)
{
    net *n = server->data;
    if (status < 0) {
        net_log(n, "accept: %s", uv_strerror(status));
        return;
    }
    net_conn *c = net_conn_new(n, SEC_RESPONDER);
    if (!c) {
        net_log(n, "out of memory for an inbound connection");
        return;
    }
    int r = uv_accept(server, (uv_stream_t *)&c->tcp);
    if (r < 0) {
        net_conn_close(c, r, "accept failed");
        return;
    }
    int len = (int)sizeof c->from;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&c->from, &len) < 0)
        memset(&c->from, 0, sizeof c->from);
    c->stranger = !net_addr_is_member(n->c, n->my_id, &c->from);
    net_admit(c);
    r = sec_hs_init(&c->hs, SEC_RESPONDER, (uint32_t)n->my_id, SEC_ANY_PEER, n->kp, net_lookup, n, n->cid);
    if (r == 0 && n->c->has_admit)
        r = sec_hs_set_admit(&c->hs, net_admit_joiner, n);
    if (r == 0)
        r = uv_read_start((uv_stream_t *)&c->tcp, net_alloc_cb, net_read_cb);
    if (r < 0) {
        net_conn_close(c, r, "handshake init failed");
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    uv_timer_start(&c->timer, net_deadline_cb, NET_PREAUTH_MS, 0);
    read_what_came(c);
}
