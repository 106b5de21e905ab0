/* The listener (net_impl.h): bound at net_init, or, while another socket
 * holds the address, bound again after a backoff until it is free or the
 * retry time is up. Another process's connection can hold a port for as
 * long as it is open, and then for Linux's 60 s of TIME_WAIT when its end
 * closed first: a restarting peer whose port a connection took gets it back
 * by waiting, whereas failing at once would lose the peer for good. */
#include <errno.h>
#include <stdlib.h>

#include "peer/net/net_addr.h"
#include "peer/net/net_impl.h"

static void free_handle_cb(uv_handle_t *h) { free(h); }

/* A new listener bound to my address and listening into n->listener; 0 or
 * the libuv error (the handle is closed then). libuv reports EADDRINUSE at
 * the listen rather than the bind. */
static int bind_and_listen(net *n, const struct sockaddr_storage *sa)
{
    uv_tcp_t *l = malloc(sizeof *l);
    if (!l)
        return UV_ENOMEM;
    uv_tcp_init(n->loop, l);
    l->data = n;
    int r = uv_tcp_bind(l, (const struct sockaddr *)sa, 0);
    if (r == 0)
        r = uv_listen((uv_stream_t *)l, 128, net_on_connection);
    if (r < 0)
        uv_close((uv_handle_t *)l, free_handle_cb);
    else
        n->listener = l;
    return r;
}

static void my_addr(const net *n, char *out, size_t cap) { cluster_peer_addr(net_where(n, n->my_id), out, cap); }

static void stop_retrying(net *n)
{
    uv_close((uv_handle_t *)&n->listen_retry->timer, free_handle_cb);
    n->listen_retry = NULL;
}

static void retry_cb(uv_timer_t *t)
{
    net_listen_retry *lr = (net_listen_retry *)t;
    net *n = lr->n;
    char addr[CLUSTER_HOST_MAX + 16];
    my_addr(n, addr, sizeof addr);
    struct sockaddr_storage sa;
    int r = net_addr_of(net_where(n, n->my_id), &sa);
    if (r == 0)
        r = bind_and_listen(n, &sa);
    const uint64_t waited = uv_now(n->loop) - lr->since;
    if (r == 0) {
        net_log(n, "listening on %s after %.1f s", addr, (double)waited / 1e3);
        stop_retrying(n);
        return;
    }
    if (r == UV_EADDRINUSE && waited < n->listen_retry_ms) {
        const uint64_t left = n->listen_retry_ms - waited;
        lr->backoff_ms = lr->backoff_ms * 2 > NET_LISTEN_BACKOFF_MAX_MS ? NET_LISTEN_BACKOFF_MAX_MS : lr->backoff_ms * 2;
        uv_timer_start(&lr->timer, retry_cb, lr->backoff_ms < left ? lr->backoff_ms : left, 0);
        return;
    }
    net_log(n, "listen on %s: %s after retrying for %.1f s: giving up", addr, uv_strerror(r), (double)waited / 1e3);
    stop_retrying(n);
    if (n->cb.on_listen_failed)
        n->cb.on_listen_failed(n->ctx, r);
}

int net_listen_start(net *n)
{
    struct sockaddr_storage sa;
    int r = net_addr_of(net_where(n, n->my_id), &sa);
    if (r < 0)
        return r;
    r = bind_and_listen(n, &sa);
    if (r == 0)
        return 0;
    char addr[CLUSTER_HOST_MAX + 16];
    my_addr(n, addr, sizeof addr);
    if (r != UV_EADDRINUSE || !(n->listen_retry = malloc(sizeof *n->listen_retry))) {
        net_log(n, "listen on %s: %s", addr, uv_strerror(r));
        return r;
    }
    uv_update_time(n->loop); /* (the loop may not have run since it was made) */
    net_log(n, "listen on %s: %s; retrying for up to %.0f s", addr, uv_strerror(r), (double)n->listen_retry_ms / 1e3);
    uv_timer_init(n->loop, &n->listen_retry->timer);
    n->listen_retry->n = n;
    n->listen_retry->since = uv_now(n->loop);
    n->listen_retry->backoff_ms = NET_LISTEN_BACKOFF_MIN_MS;
    uv_timer_start(&n->listen_retry->timer, retry_cb, NET_LISTEN_BACKOFF_MIN_MS, 0);
    return 0;
}

void net_listen_stop(net *n)
{
    if (n->listener) {
        uv_close((uv_handle_t *)n->listener, free_handle_cb);
        n->listener = NULL;
    }
    if (n->listen_retry)
        stop_retrying(n);
}
