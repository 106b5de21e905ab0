/* Deadlines on a connection's timer (net_impl.h): connect and handshake
 * time limits, the idle limit of an up connection (net_set_idle_timeout,
 * net_expect_busy) and the limit on a close that drains its writes
 * (net_close_after). */
#include <errno.h>
#include <stdio.h>
#include <sys/ioctl.h>

#include "peer/net/net_impl.h"

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
        net_idle_rearm(c);
        return;
    }
    /* A whole-model frame being built or taken in at the other end (or
     * here) blocks a loop for as long as its size takes: that is no stall. */
    const uint64_t now = uv_now(c->n->loop);
    if (c->noting) { /* (not reading while a big message is looked at on the thread pool) */
        net_idle_rearm(c);
        return;
    }
    if (now < c->busy_until) {
        uv_timer_start(&c->timer, idle_cb, c->busy_until - now + c->n->idle_ms, 0);
        return;
    }
    char why[96];
    snprintf(why, sizeof why, "no complete frame for %.3g s", (double)c->n->idle_ms / 1e3);
    net_conn_close(c, -ETIMEDOUT, why);
}

/* An up connection made progress: the idle limit starts again. */
void net_idle_rearm(net_conn *c)
{
    c->idle_bytes = 0;
    if (c->n->idle_ms)
        uv_timer_start(&c->timer, idle_cb, c->n->idle_ms, 0);
}

void net_deadline_cb(uv_timer_t *t)
{
    net_conn *c = t->data;
    net_conn_close(c, -ETIMEDOUT, c->state == C_CONNECTING ? "connect timed out" : "handshake timed out");
}

void net_drain_deadline_cb(uv_timer_t *t)
{
    net_conn *c = t->data;
    net_conn_close(c, -ETIMEDOUT, NULL);
}
