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

int net_slot_send(net_conn *c, net_slot *s, size_t len)
{
    int r = net_slot_write(c, s, len);
    if (r < 0) { /* (the frame took a nonce: the stream cannot go on without it) */
        char why[96];
        snprintf(why, sizeof why, "write: %s", uv_strerror(r));
        net_conn_close(c, r, why);
    }
    return r;
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

/* Frames this long are opened on the thread pool (and on_frame_work run
 * there): half a second of the loop's time at 400 MB, more on a busy
 * machine, would stop its heartbeats. */
#define NET_OPEN_LATER_BYTES (4u << 20)

static void open_work(uv_work_t *req)
{
    net_open_work *w = (net_open_work *)req;
    net_conn *c = w->c;
    const uint64_t t0 = uv_hrtime();
    uint8_t *pt = c->rbuf + SEC_PT_OFFSET;
    w->rc = sec_open(&c->s, c->rbuf, w->need, pt, w->need - SEC_PT_OFFSET);
    if (w->rc >= 0 && c->n->cb.on_frame_work)
        w->note = c->n->cb.on_frame_work(c->n->ctx, c->peer, pt, (size_t)w->rc);
    w->seconds = (double)(uv_hrtime() - t0) * 1e-9;
}

static void opened(uv_work_t *req, int status)
{
    net_open_work *w = (net_open_work *)req;
    net_conn *c = w->c;
    const int m = status < 0 ? status : w->rc, note = w->note;
    const size_t need = w->need;
    c->n->pool_seconds += w->seconds;
    c->opening = NULL;
    free(w);
    if (c->state == C_CLOSING) {
        net_conn_release(c);
        return;
    }
    if (m < 0) {
        net_conn_close(c, m, m == -EBADMSG ? "frame fails authentication" : "frame refused");
        return;
    }
    net_idle_rearm(c);
    c->draining = 1, c->delivering = need;
    if (c->n->cb.on_frame_noted)
        c->n->cb.on_frame_noted(c->n->ctx, c->peer, c->rbuf + SEC_PT_OFFSET, (size_t)m, note);
    else if (c->n->cb.on_frame)
        c->n->cb.on_frame(c->n->ctx, c->peer, c->rbuf + SEC_PT_OFFSET, (size_t)m);
    const int kept = c->kept;
    c->draining = 0, c->delivering = 0, c->kept = 0;
    if (c->state != C_UP)
        return;
    if (!kept) {
        memmove(c->rbuf, c->rbuf + need, c->rlen - need);
        c->rlen -= need;
    }
    if (!c->paused) { /* (on_frame may have paused and resumed it: then it reads already) */
        int r = uv_read_start((uv_stream_t *)&c->tcp, net_alloc_cb, net_read_cb);
        if (r < 0 && r != UV_EALREADY) {
            net_conn_close(c, r, "read_start failed");
            return;
        }
    }
    net_frames_drain(c); /* (what came behind it, and the buffer back to its usual size) */
}

uint8_t *net_frame_keep(net *n, int peer)
{
    net_conn *c = NULL;
    for (net_conn *k = n ? n->conns : NULL; k && !c; k = k->next)
        if (k->peer == peer && k->delivering && !k->kept)
            c = k;
    if (!c)
        return NULL;
    const size_t after = c->rlen - c->delivering, cap = after > NET_RBUF_INIT ? after : NET_RBUF_INIT;
    uint8_t *fresh = malloc(cap);
    if (!fresh)
        return NULL;
    memcpy(fresh, c->rbuf + c->delivering, after);
    uint8_t *frame = c->rbuf;
    c->rbuf = fresh, c->rcap = cap, c->rlen = after, c->kept = 1;
    return frame;
}

/* Open the big frame at the start of the read buffer on the thread pool;
 * reading stops until it is delivered (the buffer holds it exactly). */
static void open_later(net_conn *c, size_t need)
{
    net_open_work *w = calloc(1, sizeof *w);
    if (w)
        w->c = c, w->need = need; /* (before the queue: a worker may start on it at once) */
    if (!w || uv_queue_work(c->n->loop, &w->req, open_work, opened) < 0) {
        free(w);
        net_conn_close(c, -ENOMEM, "cannot open a frame on the thread pool");
        return;
    }
    c->opening = w;
    uv_read_stop((uv_stream_t *)&c->tcp);
}

void net_frames_drain(net_conn *c)
{
    net *n = c->n;
    size_t off = 0;
    if (c->opening)
        return;
    c->draining = 1;
    while (c->state == C_UP && !c->paused && c->rlen - off >= 4) {
        int need = sec_frame_need(c->rbuf + off, c->rlen - off, c->s.max_frame);
        if (need < 0) {
            net_conn_close(c, need, need == -EMSGSIZE ? "frame length over the limit" : "frame length below the minimum");
            return;
        }
        if (c->rlen - off < (size_t)need)
            break;
        if ((size_t)need >= NET_OPEN_LATER_BYTES) /* (opened from the start of the buffer, below) */
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
        else if (!c->paused && c->rlen >= (size_t)need && (size_t)need >= NET_OPEN_LATER_BYTES)
            open_later(c, (size_t)need);
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

static void seal_work(uv_work_t *req)
{
    net_seal_work *w = (net_seal_work *)req;
    const uint64_t t0 = uv_hrtime();
    uint8_t *pt = w->s->buf + SEC_PT_OFFSET;
    if (w->before)
        w->before(pt, w->len, w->arg);
    w->rc = sec_seal(&w->c->s, pt, w->len, w->s->buf, w->s->cap);
    w->seconds = (double)(uv_hrtime() - t0) * 1e-9;
}

static void sealed(uv_work_t *req, int status)
{
    net_seal_work *w = (net_seal_work *)req;
    net_conn *c = w->c;
    net_slot *s = w->s;
    const int rc = status < 0 ? status : w->rc;
    c->n->pool_seconds += w->seconds;
    c->sealing = NULL;
    s->busy = 0;
    free(w);
    if (c->state == C_CLOSING) {
        net_conn_release(c);
        return;
    }
    if (rc < 0) {
        net_conn_close(c, rc, "seal failed");
        return;
    }
    if (net_slot_send(c, s, (size_t)rc) == 0 && c->closing_after)
        net_drain_step(c);
}

int net_seal_later(net_conn *c, net_slot *s, size_t len, void (*before)(uint8_t *, size_t, void *), void *arg)
{
    net_seal_work *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    *w = (net_seal_work){.c = c, .s = s, .len = len, .before = before, .arg = arg};
    int r = uv_queue_work(c->n->loop, &w->req, seal_work, sealed);
    if (r < 0) {
        free(w);
        return r;
    }
    s->busy = 1; /* (not written yet: no other frame takes it, and net_sending counts it) */
    c->sealing = w;
    return 0;
}

/* A connection closing after its writes: n->last into the first free slot,
 * then close once no slot is busy. */
void net_drain_step(net_conn *c)
{
    if (c->state == C_CLOSING || c->sealing) /* (again once it is sealed and written) */
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
