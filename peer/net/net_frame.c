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
        return;
    }
    if (c->closing_after)
        net_drain_step(c);
}

/* One write of a slot's len bytes, in buffers of at most this many (a
 * uv_buf_t's length is an unsigned int; a message of many GB is one slot),
 * so a write takes at most 64 GiB. */
#define NET_WRITE_BUF_MAX ((size_t)1 << 30)
#define NET_WRITE_BUFS 64

int net_slot_write(net_conn *c, net_slot *s, size_t len)
{
    uv_buf_t b[NET_WRITE_BUFS];
    unsigned nb = 0;
    for (size_t off = 0; off < len || !nb; off += NET_WRITE_BUF_MAX) {
        if (nb == NET_WRITE_BUFS)
            return -EMSGSIZE;
        const size_t part = len - off < NET_WRITE_BUF_MAX ? len - off : NET_WRITE_BUF_MAX;
        b[nb++] = uv_buf_init((char *)s->buf + off, (unsigned)part);
    }
    s->req.data = c;
    int r = uv_write(&s->req, (uv_stream_t *)&c->tcp, b, nb, write_cb);
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

/* Messages this long (put together from their pieces) go to on_frame_work
 * on the thread pool: a MODEL's hash at 400 MB is half a second of the
 * loop's time, more on a busy machine, which would stop its heartbeats. */
#define NET_NOTE_LATER_BYTES (4u << 20)

/* Hand mbuf's whole message to the callbacks (noted: on_frame_work's note
 * comes with it); the buffer is then emptied, or given away (net_frame_keep). */
static void deliver_message(net_conn *c, int noted, int note)
{
    net *n = c->n;
    c->delivering = 1;
    if (noted && n->cb.on_frame_noted)
        n->cb.on_frame_noted(n->ctx, c->peer, c->mbuf, c->mlen, note);
    else if (n->cb.on_frame)
        n->cb.on_frame(n->ctx, c->peer, c->mbuf, c->mlen);
    c->delivering = 0, c->mlen = 0;
    if (c->kept)
        c->kept = 0;
    else if (c->mcap > NET_KEEP_BYTES) {
        free(c->mbuf);
        c->mbuf = NULL, c->mcap = 0;
    }
}

static void note_work(uv_work_t *req)
{
    net_note_work *w = (net_note_work *)req;
    net_conn *c = w->c;
    const uint64_t t0 = uv_hrtime();
    w->note = c->n->cb.on_frame_work(c->n->ctx, c->peer, c->mbuf, c->mlen);
    w->seconds = (double)(uv_hrtime() - t0) * 1e-9;
}

static void noted(uv_work_t *req, int status)
{
    net_note_work *w = (net_note_work *)req;
    net_conn *c = w->c;
    const int note = status < 0 ? -1 : w->note;
    c->n->pool_seconds += w->seconds;
    c->noting = NULL;
    free(w);
    if (c->state == C_CLOSING) {
        net_conn_release(c);
        return;
    }
    if (c->closing_after) { /* nothing is delivered any more: read on, and drop it */
        uv_read_start((uv_stream_t *)&c->tcp, net_alloc_cb, net_read_cb);
        return;
    }
    net_idle_rearm(c);
    deliver_message(c, 1, note);
    if (c->state != C_UP)
        return;
    if (!c->paused) {
        int r = uv_read_start((uv_stream_t *)&c->tcp, net_alloc_cb, net_read_cb);
        if (r < 0 && r != UV_EALREADY) {
            net_conn_close(c, r, "read_start failed");
            return;
        }
    }
    net_frames_drain(c); /* (what came behind it) */
}

/* mbuf's message is whole: delivered now, or first looked at on the thread
 * pool (reading stops until it is delivered, so frames stay in order). */
static void message_in(net_conn *c)
{
    net *n = c->n;
    if (c->mlen < NET_NOTE_LATER_BYTES || !n->cb.on_frame_work) {
        deliver_message(c, 0, -1);
        return;
    }
    net_note_work *w = calloc(1, sizeof *w);
    if (w)
        w->c = c; /* (before the queue: a worker may start on it at once) */
    if (!w || uv_queue_work(n->loop, &w->req, note_work, noted) < 0) {
        free(w);
        deliver_message(c, 0, -1);
        return;
    }
    c->noting = w;
    uv_read_stop((uv_stream_t *)&c->tcp);
}

/* A piece of a message in several frames: kept, as far as the run's
 * longest message goes. 0, or -1 when the connection was closed. */
static int piece_in(net_conn *c, const uint8_t *pt, size_t len)
{
    net *n = c->n;
    if (len > n->max_message - c->mlen) {
        net_conn_close(c, -EMSGSIZE, "message in pieces over the limit");
        return -1;
    }
    if (c->mlen + len > c->mcap) {
        size_t cap = c->mcap * 2 > c->mlen + len ? c->mcap * 2 : c->mlen + len;
        if (cap > n->max_message)
            cap = n->max_message;
        if (net_buf_grow(&c->mbuf, &c->mcap, cap) < 0) {
            net_conn_close(c, -ENOMEM, "out of memory for a message");
            return -1;
        }
        if (c->mcap > n->message_peak)
            n->message_peak = c->mcap;
    }
    memcpy(c->mbuf + c->mlen, pt, len);
    c->mlen += len;
    return 0;
}

/* The first piece of a message in pieces: landed (on_land says where) or
 * put together in mbuf. */
static int land_asked(net_conn *c, const uint8_t *pt, size_t len)
{
    net *n = c->n;
    net_landing l = {0};
    if (!n->cb.on_land || n->cb.on_land(n->ctx, c->peer, pt, len, &l) != 1 || !l.dst)
        return 0;
    c->landing = NET_LAND_TO, c->land = l, c->land_got = 0;
    return 1;
}

/* A piece of a landed message: its head into mbuf, the rest to dst (or
 * nowhere, once stopped); the last one hands the head to on_landed. 0, or
 * -1 when the connection was closed. */
static int land_in(net_conn *c, const uint8_t *pt, size_t len, int more)
{
    net *n = c->n;
    const net_landing *l = &c->land;
    if (len > l->at + l->len - c->land_got) {
        net_conn_close(c, -EBADMSG, "message in pieces longer than its head says");
        return -1;
    }
    if (c->land_got < l->at) {
        const size_t k = len < l->at - c->land_got ? len : l->at - c->land_got;
        if (piece_in(c, pt, k) < 0)
            return -1;
        pt += k, len -= k, c->land_got += k;
    }
    if (len && c->landing == NET_LAND_TO) {
        uint8_t *to = l->dst + (c->land_got - l->at);
        memcpy(to, pt, len);
        if (l->piece)
            l->piece(n->ctx, c->peer, to, len);
    }
    c->land_got += len;
    if (more)
        return 0;
    const int landed = c->landing == NET_LAND_TO;
    c->landing = 0;
    if (c->land_got != l->at + l->len) {
        net_conn_close(c, -EBADMSG, "message in pieces shorter than its head says");
        return -1;
    }
    if (landed && n->cb.on_landed)
        n->cb.on_landed(n->ctx, c->peer, c->mbuf, c->mlen);
    c->mlen = 0;
    return 0;
}

int net_land_stop(net *n, int peer)
{
    for (net_conn *c = n ? n->conns : NULL; c; c = c->next)
        if (c->peer == peer && c->landing == NET_LAND_TO) {
            c->landing = NET_LAND_DROP;
            return 0;
        }
    return -ENOENT;
}

void net_frames_drain(net_conn *c)
{
    net *n = c->n;
    size_t off = 0;
    if (c->noting)
        return;
    c->draining = 1;
    while (c->state == C_UP && !c->paused && !c->noting && c->rlen - off >= 4) {
        int need = sec_frame_need(c->rbuf + off, c->rlen - off, c->s.max_frame);
        if (need < 0) {
            net_conn_close(c, need, need == -EMSGSIZE ? "frame length over the limit" : "frame length below the minimum");
            return;
        }
        if (c->rlen - off < (size_t)need)
            break;
        /* Opened where it arrived. */
        uint8_t *pt = c->rbuf + off + SEC_PT_OFFSET;
        const uint64_t t0 = uv_hrtime();
        int more = 0;
        int m = sec_open_piece(&c->s, c->rbuf + off, (size_t)need, pt, (size_t)need - SEC_PT_OFFSET, &more);
        n->crypto_seconds += (double)(uv_hrtime() - t0) * 1e-9;
        if (m < 0) {
            net_conn_close(c, m, m == -EBADMSG ? "frame fails authentication" : "frame refused");
            return;
        }
        off += (size_t)need;
        net_idle_rearm(c);
        if (!more && !c->mlen && !c->landing) { /* a message of one frame */
            if (n->cb.on_frame)
                n->cb.on_frame(n->ctx, c->peer, pt, (size_t)m);
            continue;
        }
        if (c->landing || (more && !c->mlen && land_asked(c, pt, (size_t)m))) {
            if (land_in(c, pt, (size_t)m, more) < 0)
                return;
            continue;
        }
        if (piece_in(c, pt, (size_t)m) < 0)
            return;
        if (!more)
            message_in(c);
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
    if (nread < 0 && c->closing_after) { /* the other side has closed too (or reset): done */
        net_conn_close(c, -ECANCELED, NULL);
        return;
    }
    if (nread < 0) {
        char why[96];
        if (nread == UV_EOF)
            snprintf(why, sizeof why, "closed by the other side");
        else
            snprintf(why, sizeof why, "read: %s", uv_strerror((int)nread));
        net_conn_close(c, nread == UV_EOF ? -ECONNRESET : (int)nread, why);
        return;
    }
    if (c->closing_after) /* (what a closing peer still receives is dropped) */
        return;
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

uint8_t *net_frame_keep(net *n, int peer)
{
    for (net_conn *c = n ? n->conns : NULL; c; c = c->next)
        if (c->peer == peer && c->delivering && !c->kept) {
            uint8_t *m = c->mbuf;
            c->mbuf = NULL, c->mcap = 0, c->kept = 1;
            return m;
        }
    return NULL;
}

static void seal_work(uv_work_t *req)
{
    net_seal_work *w = (net_seal_work *)req;
    const uint64_t t0 = uv_hrtime();
    uint8_t *pt = w->s->buf + SEC_PT_OFFSET;
    if (w->before)
        w->before(pt, w->len, w->arg);
    w->rc = net_seal_message(w->c, w->s, w->len);
    w->seconds = (double)(uv_hrtime() - t0) * 1e-9;
}

static void sealed(uv_work_t *req, int status)
{
    net_seal_work *w = (net_seal_work *)req;
    net_conn *c = w->c;
    net_slot *s = w->s;
    const long rc = status < 0 ? status : w->rc;
    c->n->pool_seconds += w->seconds;
    c->sealing = NULL;
    s->busy = 0;
    free(w);
    if (c->state == C_CLOSING) {
        net_conn_release(c);
        return;
    }
    if (rc < 0) {
        net_conn_close(c, (int)rc, "seal failed");
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

size_t net_piece(const net_conn *c)
{
    const size_t frame = c->s.max_frame - SEC_ABYTES;
    return c->n->piece < frame ? c->n->piece : frame;
}

size_t net_frames_bound(size_t len, size_t piece)
{
    const size_t frames = len ? (len + piece - 1) / piece : 1;
    return len + frames * (4 + SEC_ABYTES);
}

long net_seal_message(net_conn *c, net_slot *s, size_t len)
{
    const size_t piece = net_piece(c);
    if (len <= piece)
        return sec_seal(&c->s, s->buf + SEC_PT_OFFSET, len, s->buf, s->cap);
    /* The plaintext lies at SEC_PT_OFFSET in one run; frame k of it starts
     * at k (piece + 21). Each piece moves right (by 21 bytes a frame before
     * it), the last first, so none lands on a piece not yet moved, and each
     * is then sealed in place where it lies. */
    const size_t frames = (len + piece - 1) / piece, stride = piece + 4 + SEC_ABYTES;
    if (net_frames_bound(len, piece) > s->cap)
        return -ENOBUFS;
    for (size_t k = frames; k-- > 0;) {
        const size_t at = k * piece, plen = len - at < piece ? len - at : piece;
        uint8_t *frame = s->buf + k * stride;
        memmove(frame + SEC_PT_OFFSET, s->buf + SEC_PT_OFFSET + at, plen);
    }
    for (size_t k = 0; k < frames; k++) {
        const size_t at = k * piece, plen = len - at < piece ? len - at : piece;
        uint8_t *frame = s->buf + k * stride;
        int m = sec_seal_piece(&c->s, frame + SEC_PT_OFFSET, plen, frame, sec_seal_bound(plen), k + 1 < frames);
        if (m < 0)
            return m;
    }
    return (long)((frames - 1) * stride + sec_seal_bound(len - (frames - 1) * piece));
}

static void shut_cb(uv_shutdown_t *req, int status)
{
    net_conn *c = req->data;
    if (status < 0 && c->state != C_CLOSING)
        net_conn_close(c, -ECANCELED, NULL);
}

/* A connection closing after its writes: n->last into the first free slot,
 * then, once no slot is busy, the half-close. */

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
    /* Everything is written: a FIN once the kernel has sent it, then wait
     * (reading) for the other side's close, or the drain's deadline. */
    if (!c->shut_sent) {
        c->shut_sent = 1;
        c->shut.data = c;
        if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, shut_cb) < 0)
            net_conn_close(c, -ECANCELED, NULL);
    }
}
