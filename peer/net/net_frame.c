/* Frames on a connection (net_impl.h, WIRE.md "Frames"): the write slots
 * that bound what is queued (backpressure), the read buffer that grows only
 * to a length prefix already checked, opening and delivering each frame, and
 * the last writes of a connection closing after them (net_close_after). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/net/net_impl.h"

/* Buffers grown past this for one big frame (a MODEL, a SYNC) are given
 * back once it has gone: a connection keeps room for the usual frames, not a
 * copy of the model for each neighbour. */
#define NET_KEEP_BYTES (16u << 20)

int net_buf_grow(uint8_t **buf, size_t *cap, size_t need)
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
        net_conn_close(c, c->refused, c->hs.msg);
        return;
    }
    if (status < 0 && status != UV_ECANCELED) {
        char why[96];
        snprintf(why, sizeof why, "write: %s", uv_strerror(status));
        net_conn_close(c, status, why);
    } else if (c->closing_after)
        net_drain_step(c);
}

int net_slot_write(net_conn *c, net_slot *s, size_t len)
{
    uv_buf_t b = uv_buf_init((char *)s->buf, (unsigned)len);
    s->req.data = c;
    int r = uv_write(&s->req, (uv_stream_t *)&c->tcp, &b, 1, write_cb);
    if (r < 0)
        return r;
    s->busy = 1;
    return 0;
}

net_slot *net_slot_find_free(net_conn *c, int lo, int hi)
{
    for (int i = lo; i < hi; i++)
        if (!c->slot[i].busy)
            return &c->slot[i];
    return NULL;
}

void net_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
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

void net_frames_drain(net_conn *c)
{
    net *n = c->n;
    size_t off = 0;
    c->draining = 1;
    while (c->state == C_UP && !c->paused && c->rlen - off >= 4) {
        int need = sec_frame_need(c->rbuf + off, c->rlen - off, c->s.max_frame);
        if (need < 0) {
            net_conn_close(c, need, need == -EMSGSIZE ? "frame length over the limit" : "frame length below the minimum");
            return;
        }
        if (c->rlen - off < (size_t)need)
            break;
        /* Opened where it arrived: a frame of a whole model is in memory once. */
        uint8_t *pt = c->rbuf + off + SEC_PT_OFFSET;
        const uint64_t t0 = uv_hrtime();
        int m = sec_open(&c->s, c->rbuf + off, (size_t)need, pt, (size_t)need - SEC_PT_OFFSET);
        n->crypto_seconds += (double)(uv_hrtime() - t0) * 1e-9;
        if (m < 0) {
            net_conn_close(c, m, m == -EBADMSG ? "frame fails authentication" : "frame refused");
            return;
        }
        off += (size_t)need;
        net_idle_rearm(c);
        if (n->cb.on_frame)
            n->cb.on_frame(n->ctx, c->peer, pt, (size_t)m);
    }
    c->draining = 0;
    if (c->state == C_CLOSING)
        return;
    memmove(c->rbuf, c->rbuf + off, c->rlen - off);
    c->rlen -= off;
    if (c->rcap > NET_KEEP_BYTES && c->rlen <= NET_RBUF_INIT) {
        uint8_t *small = realloc(c->rbuf, NET_RBUF_INIT);
        if (small)
            c->rbuf = small, c->rcap = NET_RBUF_INIT;
    }
    if (c->state == C_UP && c->rlen >= 4) {
        int need = sec_frame_need(c->rbuf, c->rlen, c->s.max_frame);
        if (need < 0) {
            net_conn_close(c, need, need == -EMSGSIZE ? "frame length over the limit" : "frame length below the minimum");
            return;
        }
        if (net_buf_grow(&c->rbuf, &c->rcap, (size_t)need) < 0)
            net_conn_close(c, -ENOMEM, "out of memory for a frame");
    }
}

void net_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
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
        net_conn_close(c, nread == UV_EOF ? -ECONNRESET : (int)nread, why);
        return;
    }
    c->rlen += (size_t)nread;
    if (c->state == C_UP && (c->idle_bytes += (size_t)nread) >= NET_IDLE_PROGRESS) {
        net_idle_rearm(c);
        if (c->n->cb.on_progress) /* (a big frame still arriving: its sender is alive) */
            c->n->cb.on_progress(c->n->ctx, c->peer);
    }
    if (c->state == C_HS && net_hs_pump(c) < 0)
        return;
    if (c->state == C_UP)
        net_frames_drain(c);
}

/* A connection closing after its writes: n->last into the first free slot,
 * then close once no slot is busy. */
void net_drain_step(net_conn *c)
{
    if (c->state == C_CLOSING)
        return;
    net *n = c->n;
    if (n->last && !c->last_sent) {
        net_slot *s = net_slot_find_free(c, 0, NET_QUEUE_FRAMES);
        if (!s)
            return; /* again from write_cb */
        int m = net_buf_grow(&s->buf, &s->cap, sec_seal_bound(n->last_len)) < 0
                    ? -ENOMEM
                    : sec_seal(&c->s, n->last, n->last_len, s->buf, s->cap);
        if (m < 0 || net_slot_write(c, s, (size_t)m) < 0) {
            net_conn_close(c, -ECANCELED, NULL);
            return;
        }
        c->last_sent = 1;
    }
    for (int i = 0; i < NET_QUEUE_FRAMES; i++)
        if (c->slot[i].busy)
            return;
    net_conn_close(c, -ECANCELED, NULL);
}
