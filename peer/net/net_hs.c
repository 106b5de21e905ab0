/* The handshake on a connection (net_impl.h, WIRE.md "Handshake"):
 * peer/wire's handshake (sec_hs.c) fed with what arrives and its answers written
 * through the two handshake slots; when it is done the connection comes up
 * for the peer it authenticated, replacing an older one. */
#include <errno.h>
#include <string.h>

#include "peer/net/net_impl.h"

static void conn_up(net_conn *c)
{
    net *n = c->n;
    const int dialled_in = c->role == SEC_RESPONDER && c->hs.dial_in;
    int r = sec_hs_finish(&c->hs, &c->s);
    if (r == 0 && n->max_frame < SEC_FRAME_MAX)
        r = sec_session_set_max(&c->s, n->max_frame);
    if (r < 0) {
        net_conn_close(c, r, "handshake failed");
        return;
    }
    uint32_t id = c->s.peer_id;
    if (id >= (uint32_t)n->c->n_peers || id == (uint32_t)n->my_id) {
        net_conn_close(c, -EPROTO, "handshake names an impossible peer");
        return;
    }
    if (c->pending) {
        n->n_pending--;
        c->pending = 0;
    }
    c->peer = (int)id;
    net_peer *p = &n->peers[id];
    uv_timer_stop(&c->timer);
    net_idle_rearm(c);
    /* Replace only now that AUTH has verified (WIRE.md "Connections"). */
    if (p->up && p->up != c)
        net_conn_close(p->up, -ECONNRESET, "replaced by a new connection");
    if (p->dial == c)
        p->dial = NULL;
    p->up = c;
    p->backoff_ms = NET_BACKOFF_MIN_MS;
    c->state = C_UP;
    if (dialled_in && !p->dialed_in) { /* it dials us from now on: our redials to it stop */
        p->dialed_in = 1;
        net_reconsider(n, c->peer);
    }
    if (n->cb.on_up)
        n->cb.on_up(n->ctx, c->peer);
}

/* The handshake refused what it read. A refusal for another version has
 * one answer for the wire (sec_hs_refusal), written before the connection
 * closes (the write's callback closes it); every other refusal closes at
 * once, silently. */
static void hs_refuse(net_conn *c, int rc)
{
    net_slot *s = net_slot_find_free(c, NET_QUEUE_FRAMES, NET_SLOTS);
    int n = s ? sec_hs_refusal(&c->hs, s->buf, s->cap) : 0;
    if (n > 0) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        if (net_slot_write(c, s, (size_t)n) == 0) {
            c->refused = rc;
            return;
        }
    }
    net_conn_close(c, rc, c->hs.msg[0] ? c->hs.msg : "handshake refused");
}

/* Feed what was received to the handshake and send what it answers, until it
 * needs more input or is done. 0, or -1 when the connection was closed (or
 * closes once its refusal is written). */
int net_hs_pump(net_conn *c)
{
    for (;;) {
        int used = sec_hs_consume(&c->hs, c->rbuf, c->rlen);
        if (used < 0) {
            hs_refuse(c, used);
            return -1;
        }
        memmove(c->rbuf, c->rbuf + used, c->rlen - (size_t)used);
        c->rlen -= (size_t)used;
        if (c->pending && c->claim < 0)
            net_admit_claim(c); /* (a valid first flight names the member) */
        net_slot *s = net_slot_find_free(c, NET_QUEUE_FRAMES, NET_SLOTS);
        int out = 0;
        if (s) {
            out = sec_hs_produce(&c->hs, s->buf, s->cap);
            if (out < 0) {
                net_conn_close(c, out, c->hs.msg[0] ? c->hs.msg : "handshake failed");
                return -1;
            }
            int r = out > 0 ? net_slot_write(c, s, (size_t)out) : 0;
            if (r < 0) {
                net_conn_close(c, r, "write failed during the handshake");
                return -1;
            }
        } else if (sec_hs_want(&c->hs) == 0) {
            /* Cannot happen with two slots; never spin on it. */
            net_conn_close(c, -ENOBUFS, "handshake writes stuck");
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
