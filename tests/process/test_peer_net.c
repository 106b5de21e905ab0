/* peer/net: the transport on real TCP sockets on 127.0.0.1, with real keys
 * and an in-memory cluster. Two peers connect and exchange frames both ways;
 * impostors (a foreign key under a listed id, a foreign cluster) and raw
 * clients sending garbage or nothing are closed while the good link keeps
 * working; a killed peer is redialled with backoff when it comes back; an
 * oversize length prefix after a valid handshake closes the link (which then
 * comes back); a reader that stops makes net_send say -EAGAIN instead of
 * queueing; net_close_after delivers what it wrote even with frames left
 * unread; net_close leaves a loop with no handles. Each test has its own
 * loop, its own free ports and a guard timer that fails it if it hangs.
 *
 * Steps advance on events (a link up or down, a refused dial, a frame, an
 * EOF), never on the loop's clock alone: on a busy machine one loop
 * iteration can take a second, so "after 800 ms" says nothing about what
 * the transport has done by then. Durations that are asserted are taken on
 * the loop's clock between the events they bound. The guard (GUARD_MS) only
 * turns a hang into a failure. */
#include "peer/net/net.h"
#include "peer/wire/wire.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/sgp_cluster.h"

#define MAXP 4   /* cluster members */
#define MAXI 6   /* net instances in one test (a restarted peer is a new one) */
#define MAXRAW 2 /* raw TCP clients */
#define GUARD_MS 30000 /* a scenario not done by then hangs (each takes well under 10 s, one 10 to 15 s) */

typedef struct world world;

typedef struct inst {
    world *w;
    net n;
    int inited, closed, id;
    int ups[MAXP], downs[MAXP], last_reason[MAXP];
    uint64_t t_down[MAXP]; /* loop time of the last on_down */
    int frames[MAXP], bad[MAXP]; /* frames received from each peer, and how many did not match */
    int noted[MAXP];             /* of them, opened on the thread pool with on_frame_work's note */
    int kept[MAXP];              /* of those, kept in their own buffer (net_frame_keep) */
    size_t frame_bytes[MAXP];
    int logs, refused_inbound, refused_connect, oversize, oversize_message, other_version;
    char last_log[320], version_line[320];
} inst;

typedef struct raw {
    uv_tcp_t tcp;
    uv_connect_t req;
    uv_write_t wreq;
    world *w;
    int used, connected, eof, closed;
    size_t nbytes; /* what to send once connected (0: nothing) */
    uint8_t out[4096], in[256];
    uint64_t t_connect, t_eof; /* loop times of uv_tcp_connect and of the EOF */
} raw;

struct world {
    uv_loop_t loop;
    uv_timer_t guard, tick;
    cluster c;
    sec_keypair kp[MAXP + 2];
    inst in[MAXI];
    raw r[MAXRAW];
    int timed_out, finished, step;
    uint64_t t0, t_step;
    void (*on_tick)(world *w);
    void *user;
};

/* ---- fixture -------------------------------------------------------------- */

static uint64_t now_ms(world *w) { return uv_now(&w->loop); }

static void guard_cb(uv_timer_t *t)
{
    world *w = t->data;
    w->timed_out = 1;
    uv_stop(&w->loop);
}

static void tick_cb(uv_timer_t *t)
{
    world *w = t->data;
    if (!w->finished && w->on_tick)
        w->on_tick(w);
}

/* n peers in the cluster, each on a free port of 127.0.0.1. */
static void world_start(world *w, int npeers, void (*on_tick)(world *), uint64_t guard_ms)
{
    memset(w, 0, sizeof *w);
    cr_assert_eq(uv_loop_init(&w->loop), 0);
    cr_assert_eq(cluster_init(&w->c, "net-test", "t.topo"), 0);
    for (int i = 0; i < MAXP + 2; i++)
        cr_assert_eq(sec_keypair_generate(&w->kp[i]), 0);
    for (int i = 0; i < npeers; i++)
        cr_assert_eq(cluster_add_peer(&w->c, "127.0.0.1", sgp_free_port(), w->kp[i].pk), i);
    uv_timer_init(&w->loop, &w->guard);
    uv_timer_init(&w->loop, &w->tick);
    w->guard.data = w->tick.data = w;
    uv_timer_start(&w->guard, guard_cb, guard_ms, 0);
    w->on_tick = on_tick;
    uv_timer_start(&w->tick, tick_cb, 5, 5);
    uv_update_time(&w->loop);
    w->t0 = w->t_step = now_ms(w);
}

/* ---- callbacks ------------------------------------------------------------- */

static uint8_t pattern(int from, int k, size_t i) { return (uint8_t)(i * 31u + (unsigned)k * 7u + (unsigned)from * 101u); }

static void fill(uint8_t *b, size_t n, int from, int k)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pattern(from, k, i);
}

static void on_up(void *ctx, int peer)
{
    inst *x = ctx;
    cr_assert(peer >= 0 && peer < MAXP);
    x->ups[peer]++;
}

static void on_down(void *ctx, int peer, int reason)
{
    inst *x = ctx;
    cr_assert(peer >= 0 && peer < MAXP);
    cr_assert_lt(reason, 0);
    x->downs[peer]++;
    x->last_reason[peer] = reason;
    x->t_down[peer] = now_ms(x->w);
}

static int g_small_pieces; /* messages of a few KB come in pieces too: net_frame_keep may hand them over */
static int g_slow_reader, g_slowed; /* peer 1 takes one frame a tick: its kernel buffer stays full */

/* Frames carry [u32 k][pattern(from, k)] so the receiver checks every byte. */
static void on_frame(void *ctx, int peer, const uint8_t *m, size_t len)
{
    inst *x = ctx;
    cr_assert(peer >= 0 && peer < MAXP);
    if (!g_small_pieces && len <= SEC_PIECE_MAX && net_frame_keep(&x->n, peer)) /* (a message of one frame shares the connection's buffer) */
        x->bad[peer]++;
    int k = x->frames[peer]++;
    x->frame_bytes[peer] += len;
    if (g_slow_reader && x->id == 1 && net_read_pause(&x->n, peer, 1) == 0)
        g_slowed = 1;
    uint32_t got;
    if (len < 4) {
        x->bad[peer]++;
        return;
    }
    memcpy(&got, m, 4);
    if (got != (uint32_t)k) {
        x->bad[peer]++;
        return;
    }
    for (size_t i = 4; i < len; i++)
        if (m[i] != pattern(peer, k, i)) {
            x->bad[peer]++;
            return;
        }
}

static void on_log(void *ctx, const char *line)
{
    inst *x = ctx;
    x->logs++;
    snprintf(x->last_log, sizeof x->last_log, "%s", line);
    if (strstr(line, "inbound connection closed"))
        x->refused_inbound++;
    if (strstr(line, "connect: "))
        x->refused_connect++;
    if (strstr(line, "over the limit"))
        x->oversize++;
    if (strstr(line, "message in pieces over the limit"))
        x->oversize_message++;
    if (strstr(line, "speaks protocol version")) {
        x->other_version++;
        snprintf(x->version_line, sizeof x->version_line, "%s", line);
    }
    if (getenv("NET_TEST_VERBOSE"))
        fprintf(stderr, "[%d] %s\n", x->id, line);
}

/* On the thread pool, for a big message: its number, plus 1000 (the note). */
static int frame_work(void *ctx, int peer, const uint8_t *m, size_t len)
{
    (void)ctx, (void)peer;
    uint32_t k = 0;
    if (len >= 4)
        memcpy(&k, m, 4);
    return (int)k + 1000;
}

/* The first big message from each peer is kept in its own buffer (checked
 * after the connection has read on into a new one), the next is not. */
static void on_frame_noted(void *ctx, int peer, const uint8_t *m, size_t len, int note)
{
    inst *x = ctx;
    if (note != x->frames[peer] + 1000) /* (on_frame counts the frame) */
        x->bad[peer]++;
    uint8_t *own = x->noted[peer]++ == 0 ? net_frame_keep(&x->n, peer) : NULL;
    if (own) {
        x->kept[peer]++;
        if (own != m || net_frame_keep(&x->n, peer)) /* (the message's buffer, once) */
            x->bad[peer]++;
    }
    on_frame(ctx, peer, m, len);
    free(own);
}

/* Landing (net_landing): a message of pieces that starts with LAND_MAGIC
 * and a u32 n lands its n bytes after those 8 into g_land_dst. */
#define LAND_MAGIC 0x444e414cu
#define LAND_CAP 400000
static uint8_t *g_land_dst;
static int g_landed, g_land_pieces, g_land_stop_after, g_land_bad;

static void land_piece(void *ctx, int peer, const uint8_t *bytes, size_t len)
{
    inst *x = ctx;
    if (bytes < g_land_dst || bytes + len > g_land_dst + LAND_CAP)
        g_land_bad++;
    if (++g_land_pieces == g_land_stop_after)
        cr_assert_eq(net_land_stop(&x->n, peer), 0);
}

static int on_land(void *ctx, int peer, const uint8_t *first, size_t len, net_landing *l)
{
    (void)ctx, (void)peer;
    uint32_t magic, n;
    if (!g_land_dst || len < 8)
        return 0;
    memcpy(&magic, first, 4), memcpy(&n, first + 4, 4);
    if (magic != LAND_MAGIC || n > LAND_CAP)
        return 0;
    memset(g_land_dst, 0, LAND_CAP);
    g_land_pieces = 0;
    *l = (net_landing){.dst = g_land_dst, .at = 8, .len = n, .piece = land_piece};
    return 1;
}

static void on_landed(void *ctx, int peer, const uint8_t *head, size_t head_len)
{
    (void)ctx, (void)peer;
    uint32_t magic = 0;
    if (head_len != 8 || (memcpy(&magic, head, 4), magic != LAND_MAGIC))
        g_land_bad++;
    g_landed++;
}

static const net_callbacks g_cb = {.on_up = on_up, .on_down = on_down, .on_frame = on_frame, .on_frame_work = frame_work,
                                   .on_frame_noted = on_frame_noted, .on_log = on_log, .on_land = on_land,
                                   .on_landed = on_landed};

/* Instance slot i runs cluster member id (with key kp, default its own). */
static inst *start_as(world *w, int slot, const cluster *c, int id, const sec_keypair *kp)
{
    inst *x = &w->in[slot];
    memset(x, 0, sizeof *x);
    x->w = w;
    x->id = id;
    int r = net_init(&x->n, &w->loop, c, id, kp, &g_cb, x);
    cr_assert_eq(r, 0, "net_init: %s (%s)", strerror(-r), x->last_log);
    x->inited = 1;
    for (int j = 0; j < c->n_peers; j++)
        if (j != id)
            cr_assert_eq(net_want(&x->n, j), 0);
    return x;
}

static inst *start(world *w, int id) { return start_as(w, id, &w->c, id, &w->kp[id]); }

static void stop(inst *x)
{
    if (x->inited && !x->closed) {
        net_close(&x->n);
        x->closed = 1;
    }
}

static void raw_close_cb(uv_handle_t *h)
{
    raw *r = h->data;
    r->closed = 1;
}

static void finish(world *w)
{
    if (w->finished)
        return;
    w->finished = 1;
    for (int i = 0; i < MAXI; i++)
        stop(&w->in[i]);
    for (int i = 0; i < MAXRAW; i++)
        if (w->r[i].used && !uv_is_closing((uv_handle_t *)&w->r[i].tcp))
            uv_close((uv_handle_t *)&w->r[i].tcp, raw_close_cb);
    uv_close((uv_handle_t *)&w->guard, NULL);
    uv_close((uv_handle_t *)&w->tick, NULL);
}

/* Runs the scenario to its end, then checks that shutdown leaves nothing. */
static void world_run(world *w)
{
    uv_run(&w->loop, UV_RUN_DEFAULT);
    int timed_out = w->timed_out;
    finish(w);
    cr_assert_eq(uv_run(&w->loop, UV_RUN_DEFAULT), 0, "net_close leaves no live handle behind");
    cr_assert_eq(uv_loop_close(&w->loop), 0, "every handle closed");
    for (int i = 0; i < MAXI; i++)
        if (w->in[i].inited)
            net_free(&w->in[i].n);
    cr_assert_not(timed_out, "scenario timed out at step %d", w->step);
}

static void world_free(world *w)
{
    cluster_free(&w->c);
    for (int i = 0; i < MAXP + 2; i++)
        sec_keypair_free(&w->kp[i]);
}

static void next(world *w)
{
    w->step++;
    w->t_step = now_ms(w);
}

static uint64_t since_step(world *w) { return now_ms(w) - w->t_step; }

/* What net_send_room_later runs before the seal, on the thread pool: the
 * frame's number into its first 4 bytes (the receiver checks it). */
static void number_frame(uint8_t *pt, size_t len, void *arg)
{
    cr_assert_geq(len, 4);
    memcpy(pt, arg, 4);
}

/* Send frame k (size len) from x to peer; returns net_send's result. Odd
 * frames are written straight into their frame (net_room, net_send_room),
 * as the peer writes its messages, and k = 2 mod 4 also sealed on the
 * thread pool (net_send_room_later), their number put in there: the other
 * end sees the same bytes, in order. */
static int send_k(inst *x, int peer, int k, size_t len)
{
    static uint32_t numbers[64];
    if (len < 4)
        len = 4;
    uint32_t kk = (uint32_t)k;
    if (k % 4 != 0) {
        size_t room = len + 100; /* (more than it writes, as an encoder's bound) */
        int err;
        uint8_t *m = net_room(&x->n, peer, &room, &err);
        if (!m)
            return err;
        cr_assert_eq(room, len + 100);
        fill(m, len, x->id, k);
        if (k % 4 != 2) {
            memcpy(m, &kk, 4);
            return net_send_room(&x->n, peer, len);
        }
        cr_assert_lt(k, 64);
        numbers[k] = kk;
        int r = net_send_room_later(&x->n, peer, len, number_frame, &numbers[k]);
        if (r == 0)
            cr_assert(net_busy(&x->n, peer), "no other frame is sealed before it");
        return r;
    }
    uint8_t *m = malloc(len);
    cr_assert_not_null(m);
    fill(m, len, x->id, k);
    memcpy(m, &kk, 4);
    int r = net_send(&x->n, peer, m, len);
    free(m);
    return r;
}

/* ---- raw clients ------------------------------------------------------------ */

static void raw_alloc(uv_handle_t *h, size_t s, uv_buf_t *b)
{
    (void)s;
    raw *r = h->data;
    *b = uv_buf_init((char *)r->in, sizeof r->in);
}

static void raw_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    (void)b;
    raw *r = s->data;
    if (n < 0 && !r->eof) {
        r->eof = 1;
        r->t_eof = now_ms(r->w);
        uv_read_stop(s);
    }
}

static void raw_written(uv_write_t *req, int status) { (void)req, (void)status; }

static void raw_connected(uv_connect_t *req, int status)
{
    raw *r = req->data;
    if (status < 0)
        return;
    r->connected = 1;
    uv_read_start((uv_stream_t *)&r->tcp, raw_alloc, raw_read);
    if (r->nbytes) {
        uv_buf_t b = uv_buf_init((char *)r->out, (unsigned)r->nbytes);
        uv_write(&r->wreq, (uv_stream_t *)&r->tcp, &b, 1, raw_written);
    }
}

static void squat_cb(uv_stream_t *s, int status) { (void)s, (void)status; }

static raw *raw_connect(world *w, int slot, int to, const void *bytes, size_t n)
{
    raw *r = &w->r[slot];
    memset(r, 0, sizeof *r);
    r->w = w;
    r->used = 1;
    cr_assert_leq(n, sizeof r->out);
    if (n)
        memcpy(r->out, bytes, n);
    r->nbytes = n;
    uv_tcp_init(&w->loop, &r->tcp);
    r->tcp.data = r->req.data = r;
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", w->c.peers[to].port, &a);
    uv_update_time(&w->loop);
    r->t_connect = now_ms(w);
    cr_assert_eq(uv_tcp_connect(&r->req, &r->tcp, (struct sockaddr *)&a, raw_connected), 0);
    return r;
}

TestSuite(peer_net, .timeout = 60);

/* ---- two peers -------------------------------------------------------------- */

/* (over 1 MiB: messages in pieces; the 5 and 6 MB ones looked at on the
 * receiver's thread pool, the latter prepared on the sender's; the 2 MB one
 * delivered on the loop) */
static const size_t g_sizes[] = {4, 5, 1000, 65536, 200003, 17, 6, (5u << 20) + 3, 9, (2u << 20) + 5, 11, 6u << 20};
#define NSIZES (sizeof g_sizes / sizeof *g_sizes)

/* Sends the next of g_sizes from x to peer when a slot is free; 1 when all sent. */
static int pump_sizes(inst *x, int peer, int *sent)
{
    while (*sent < (int)NSIZES) {
        int r = send_k(x, peer, *sent, g_sizes[*sent]);
        if (r == -EAGAIN) {
            cr_assert(net_busy(&x->n, peer));
            return 0;
        }
        cr_assert_eq(r, 0, "net_send: %s", strerror(-r));
        ++*sent;
    }
    return 1;
}

static int g_sent[2];

static void two_tick(world *w)
{
    inst *a = &w->in[0], *b = &w->in[1];
    switch (w->step) {
    case 0:
        if (a->ups[1] && b->ups[0])
            next(w);
        break;
    case 1: {
        int da = pump_sizes(a, 1, &g_sent[0]);
        int db = pump_sizes(b, 0, &g_sent[1]);
        if (da && db && b->frames[0] == (int)NSIZES && a->frames[1] == (int)NSIZES)
            finish(w);
        break;
    }
    }
}

Test(peer_net, two_peers_handshake_and_exchange_frames_both_ways)
{
    world w;
    world_start(&w, 2, two_tick, GUARD_MS);
    inst *a = start(&w, 0), *b = start(&w, 1);
    cr_assert_eq(net_send(&a->n, 1, "x", 1), -ENOTCONN, "not up before the handshake");
    cr_assert(net_busy(&a->n, 1));
    cr_assert_eq(net_want(&a->n, 0), -EINVAL, "not ourselves");
    cr_assert_eq(net_want(&a->n, 2), -EINVAL);
    cr_assert_eq(net_send(&a->n, -1, "x", 1), -EINVAL);
    g_sent[0] = g_sent[1] = 0;
    world_run(&w);
    size_t total = 0;
    for (size_t k = 0; k < NSIZES; k++)
        total += g_sizes[k];
    cr_assert_eq(a->ups[1], 1);
    cr_assert_eq(b->ups[0], 1);
    cr_assert_eq(b->frames[0], (int)NSIZES);
    cr_assert_eq(a->frames[1], (int)NSIZES);
    cr_assert_eq(b->bad[0], 0, "every byte as sent, in order");
    cr_assert_eq(a->bad[1], 0);
    cr_assert_eq(b->noted[0], 2, "the two messages of 5 and 6 MB were looked at on the thread pool");
    cr_assert_eq(a->noted[1], 2);
    cr_assert_eq(b->kept[0], 1, "the first of them kept in its own buffer, the frames after it read on");
    cr_assert_eq(a->kept[1], 1);
    cr_assert_eq(b->frame_bytes[0], total);
    cr_assert_eq(a->frame_bytes[1], total);
    cr_assert_eq(a->downs[1], 1, "net_close reports the live link as down");
    cr_assert_eq(a->last_reason[1], -ECANCELED);
    world_free(&w);
}

/* WIRE.md "Frames": a sender may cut its messages into pieces as small as
 * it likes (SGP_TEST_FRAME_BYTES, net_set_piece); the other end takes any
 * split, and every message arrives whole, in order. */
Test(peer_net, messages_in_small_pieces_arrive_whole_and_in_order)
{
    world w;
    world_start(&w, 2, two_tick, GUARD_MS);
    inst *a = start(&w, 0), *b = start(&w, 1);
    cr_assert_eq(net_set_piece(&a->n, 0), -EINVAL);
    cr_assert_eq(net_set_piece(&a->n, SEC_PIECE_MAX + 1), -EINVAL);
    cr_assert_eq(net_set_piece(&a->n, 4093), 0);
    cr_assert_eq(net_set_piece(&b->n, 65536), 0);
    g_sent[0] = g_sent[1] = 0;
    g_small_pieces = 1;
    world_run(&w);
    g_small_pieces = 0;
    size_t total = 0;
    for (size_t k = 0; k < NSIZES; k++)
        total += g_sizes[k];
    cr_assert_eq(b->frames[0], (int)NSIZES);
    cr_assert_eq(a->frames[1], (int)NSIZES);
    cr_assert_eq(b->bad[0], 0, "every byte as sent, in order");
    cr_assert_eq(a->bad[1], 0);
    cr_assert_eq(b->frame_bytes[0], total);
    cr_assert_eq(a->frame_bytes[1], total);
    cr_assert_eq(b->noted[0], 2);
    cr_assert_eq(b->kept[0], 1);
    world_free(&w);
}

/* ---- landing ---------------------------------------------------------------------- */

/* A landing message from x to peer: its head says `says` bytes follow, `n` do. */
static int send_landing(inst *x, int peer, uint32_t says, size_t n)
{
    uint8_t *m = malloc(8 + n);
    cr_assert_not_null(m);
    const uint32_t magic = LAND_MAGIC;
    memcpy(m, &magic, 4), memcpy(m + 4, &says, 4);
    fill(m + 8, n, x->id, 0);
    int r = net_send(&x->n, peer, m, 8 + n);
    free(m);
    return r;
}

#define LAND_N 300000

static int landed_as_sent(int from, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (g_land_dst[i] != pattern(from, 0, i))
            return 0;
    return 1;
}

static void landing_tick(world *w)
{
    inst *a = &w->in[0], *b = &w->in[1];
    switch (w->step) {
    case 0:
        if (a->ups[1] && b->ups[0]) {
            cr_assert_eq(send_landing(a, 1, LAND_N, LAND_N), 0);
            next(w);
        }
        break;
    case 1: /* landed whole; the next one is stopped after 10 pieces, and a frame follows it */
        if (g_landed == 1) {
            cr_assert(landed_as_sent(0, LAND_N), "every byte where it belongs");
            g_land_stop_after = 10;
            cr_assert_eq(send_landing(a, 1, LAND_N, LAND_N), 0);
            cr_assert_eq(send_k(a, 1, 0, 5000), 0);
            next(w);
        }
        break;
    case 2: /* the rest of it dropped, the link up; then one longer than its head says */
        if (b->frames[0] == 1) {
            cr_assert_eq(g_landed, 1, "a stopped message is not handed over");
            cr_assert_eq(g_land_pieces, 10, "nothing written after the stop");
            cr_assert(landed_as_sent(0, 10 * 4093 - 8) && g_land_dst[10 * 4093 - 8] == 0);
            cr_assert_eq(b->downs[0], 0);
            g_land_stop_after = 0;
            cr_assert_eq(send_landing(a, 1, 1000, LAND_N), 0);
            next(w);
        }
        break;
    case 3:
        if (b->downs[0] == 1)
            finish(w);
        break;
    }
}

/* net_landing: a message in pieces written straight to the receiver's
 * buffer as they arrive (a joiner's model into its x), its head kept; one
 * stopped midway (net_land_stop) drops the rest and the link carries on;
 * one longer than its head says closes the link. */
Test(peer_net, a_landed_message_goes_straight_to_its_buffer_and_can_be_stopped)
{
    world w;
    world_start(&w, 2, landing_tick, GUARD_MS);
    inst *a = start(&w, 0), *b = start(&w, 1);
    cr_assert_eq(net_set_piece(&a->n, 4093), 0);
    g_land_dst = malloc(LAND_CAP);
    cr_assert_not_null(g_land_dst);
    g_landed = g_land_bad = g_land_stop_after = 0;
    g_small_pieces = 1; /* (the frame after the stopped one comes in pieces too) */
    world_run(&w);
    g_small_pieces = 0;
    cr_assert_eq(g_landed, 1);
    cr_assert_eq(g_land_bad, 0, "each piece inside dst, each head the message's");
    cr_assert_lt(b->n.message_peak, 4096, "no buffer of the message's size at the receiver (%zu)", b->n.message_peak);
    cr_assert(strstr(b->last_log, "longer than its head says"), "%s", b->last_log);
    cr_assert_eq(b->bad[0], 0);
    free(g_land_dst);
    g_land_dst = NULL;
    world_free(&w);
}

/* ---- impostors ---------------------------------------------------------------- */

static void impostor_tick(world *w)
{
    inst *a = &w->in[0], *b = &w->in[1];
    switch (w->step) {
    case 0:
        /* Both impostors have been refused a few times each (they retry). */
        if (a->ups[1] && b->ups[0] && b->refused_inbound >= 6)
            next(w);
        break;
    case 1:
        cr_assert_eq(send_k(a, 1, 0, 3000), 0);
        cr_assert_eq(send_k(b, 0, 0, 3000), 0);
        next(w);
        break;
    case 2:
        if (a->frames[1] == 1 && b->frames[0] == 1)
            finish(w);
        break;
    }
}

Test(peer_net, impostors_are_refused_while_the_good_link_keeps_working)
{
    world w;
    world_start(&w, 2, impostor_tick, GUARD_MS);
    /* Mallory 1 claims id 0 under a key of its own: same membership (same
     * cluster id), another address for "0" so it can listen. */
    cluster c1;
    cr_assert_eq(cluster_init(&c1, "net-test", "t.topo"), 0);
    cr_assert_eq(cluster_add_peer(&c1, "127.0.0.1", sgp_free_port(), w.kp[0].pk), 0);
    cr_assert_eq(cluster_add_peer(&c1, "127.0.0.1", w.c.peers[1].port, w.kp[1].pk), 1);
    /* Mallory 2 writes itself into its own cluster file as id 0. */
    cluster c2;
    cr_assert_eq(cluster_init(&c2, "net-test", "t.topo"), 0);
    cr_assert_eq(cluster_add_peer(&c2, "127.0.0.1", sgp_free_port(), w.kp[MAXP + 1].pk), 0);
    cr_assert_eq(cluster_add_peer(&c2, "127.0.0.1", w.c.peers[1].port, w.kp[1].pk), 1);

    inst *a = start(&w, 0), *b = start(&w, 1);
    inst *m1 = start_as(&w, 2, &c1, 0, &w.kp[MAXP]);
    inst *m2 = start_as(&w, 3, &c2, 0, &w.kp[MAXP + 1]);
    world_run(&w);
    cr_assert_eq(m1->ups[1], 0, "the impostor never gets a session");
    cr_assert_eq(m2->ups[1], 0);
    cr_assert_eq(b->ups[0], 1, "only the real peer 0 came up at peer 1");
    cr_assert_eq(b->downs[0], 1, "and stayed up until net_close");
    cr_assert_eq(a->downs[1], 1);
    cr_assert_eq(b->bad[0] + a->bad[1], 0);
    cr_assert_geq(b->refused_inbound, 6);
    cluster_free(&c1);
    cluster_free(&c2);
    world_free(&w);
}

/* ---- raw clients ---------------------------------------------------------------- */

static void garbage_tick(world *w)
{
    inst *a = &w->in[0], *b = &w->in[1];
    raw *g = &w->r[0];
    switch (w->step) {
    case 0:
        if (a->ups[1] && b->ups[0]) {
            uint8_t junk[4096];
            for (size_t i = 0; i < sizeof junk; i++)
                junk[i] = (uint8_t)(i * 13 + 7);
            raw_connect(w, 0, 1, junk, sizeof junk);
            next(w);
        }
        break;
    case 1:
        if (g->eof) {
            cr_assert_eq(send_k(a, 1, 0, 100), 0, "the good link is still up");
            cr_assert_eq(send_k(b, 0, 0, 100), 0);
            next(w);
        }
        break;
    case 2:
        if (a->frames[1] == 1 && b->frames[0] == 1)
            finish(w);
        break;
    }
}

Test(peer_net, garbage_instead_of_a_handshake_is_closed_without_harm)
{
    world w;
    world_start(&w, 2, garbage_tick, GUARD_MS);
    inst *a = start(&w, 0), *b = start(&w, 1);
    world_run(&w);
    cr_assert(w.r[0].connected);
    cr_assert(w.r[0].eof, "the server closed the garbage connection");
    cr_assert_lt(w.r[0].t_eof - w.r[0].t_connect, 4000, "at once, not at the 5 s deadline (%llu ms)",
                 (unsigned long long)(w.r[0].t_eof - w.r[0].t_connect));
    cr_assert_geq(b->refused_inbound, 1);
    cr_assert_eq(b->downs[0], 1);
    cr_assert_eq(a->downs[1], 1);
    world_free(&w);
}

static void silent_tick(world *w)
{
    raw *s = &w->r[0];
    switch (w->step) {
    case 0:
        raw_connect(w, 0, 0, NULL, 0);
        next(w);
        break;
    case 1:
        if (s->eof)
            finish(w);
        break;
    }
}

Test(peer_net, silent_client_is_closed_at_the_handshake_deadline)
{
    world w;
    world_start(&w, 1, silent_tick, GUARD_MS);
    inst *a = start(&w, 0);
    world_run(&w);
    cr_assert(w.r[0].eof);
    /* From our connect: the server's deadline starts at its accept, later. */
    const uint64_t took = w.r[0].t_eof - w.r[0].t_connect;
    cr_assert_geq(took, 1900, "an inbound handshake's deadline is 2 s (closed after %llu ms)",
                  (unsigned long long)took);
    cr_assert_lt(took, 7000, "closed at the deadline (%llu ms), not much later", (unsigned long long)took);
    cr_assert_eq(a->refused_inbound, 1);
    cr_assert(strstr(a->last_log, "timed out"), "%s", a->last_log);
    world_free(&w);
}

/* ---- a peer that dies and comes back ---------------------------------------------- */

static uint64_t g_down_ms; /* from peer 1's death to the last dial that could be refused */

static void restart_tick(world *w)
{
    inst *a = &w->in[0], *b = &w->in[1], *b2 = &w->in[2];
    switch (w->step) {
    case 0:
        if (a->ups[1] && b->ups[0]) {
            stop(b); /* killed */
            next(w);
        }
        break;
    case 1:
        /* Down for at least 800 ms, and at least two dials refused in that
         * time (the guard fails the test if a never redials). */
        if (a->downs[1] == 1 && a->refused_connect >= 2 && since_step(w) >= 800) {
            cr_assert_not(net_is_up(&a->n, 1));
            cr_assert_eq(net_send(&a->n, 1, "x", 1), -ENOTCONN);
            start_as(w, 2, &w->c, 1, &w->kp[1]); /* back, same port and key */
            uv_update_time(&w->loop);
            g_down_ms = now_ms(w) - a->t_down[1];
            next(w);
        }
        break;
    case 2:
        if (a->ups[1] == 2 && b2->ups[0] == 1) {
            cr_assert_eq(send_k(a, 1, 0, 500), 0);
            cr_assert_eq(send_k(b2, 0, 0, 500), 0);
            next(w);
        }
        break;
    case 3:
        if (b2->frames[0] == 1 && a->frames[1] == 1)
            finish(w);
        break;
    }
}

Test(peer_net, killed_peer_is_redialled_with_backoff_when_it_comes_back)
{
    world w;
    world_start(&w, 2, restart_tick, GUARD_MS);
    inst *a = start(&w, 0);
    start(&w, 1);
    world_run(&w);
    cr_assert_eq(a->ups[1], 2, "up, down, up again");
    cr_assert_eq(a->downs[1], 2, "the kill and the final net_close");
    /* Redials wait 100, 200, 400, 800 ms ... (+ up to 50 % jitter) after the
     * death: the k-th starts no earlier than 100 (2^k - 1) ms after it, so
     * in D ms at most log2(D / 100 + 1) are refused (one more allowed for a
     * dial in flight as the peer came back): a few, not a storm (retrying
     * every 100 ms would give D / 100). */
    const int most = (int)floor(log2((double)g_down_ms / 100.0 + 1.0)) + 1;
    cr_assert_geq(a->refused_connect, 2, "%d", a->refused_connect);
    cr_assert_leq(a->refused_connect, most, "%d dials refused while peer 1 was down for %llu ms (backoff allows %d)",
                  a->refused_connect, (unsigned long long)g_down_ms, most);
    cr_assert_eq(w.in[2].bad[0] + a->bad[1], 0);
    world_free(&w);
}

/* ---- an oversize frame after a valid handshake ----------------------------------- */

static int g_over_message; /* the message limit, not the frame limit */

static void oversize_tick(world *w)
{
    inst *a = &w->in[0], *b = &w->in[1];
    switch (w->step) {
    case 0:
        if (a->ups[1] && b->ups[0]) {
            cr_assert_eq(send_k(a, 1, 0, 200), 0, "fits");
            if (g_over_message) /* (pieces of 1 MiB, each within b's frame limit) */
                cr_assert_eq(send_k(a, 1, 1, (3u << 20) + 1), 0, "b's message limit is 1 MiB: a does not know");
            else
                cr_assert_eq(send_k(a, 1, 1, 5000), 0, "b's limit is 1000: a does not know");
            next(w);
        }
        break;
    case 1:
        /* b dropped the link at the length prefix; a redials and it is back. */
        if (b->oversize == 1 && a->ups[1] == 2 && b->ups[0] == 2) {
            cr_assert_eq(b->frames[0], 1, "the frame before it was delivered");
            cr_assert_eq(send_k(a, 1, 1, 300), 0);
            next(w);
        }
        break;
    case 2:
        if (b->frames[0] == 2)
            finish(w);
        break;
    }
}

Test(peer_net, oversize_length_prefix_closes_the_link_which_then_comes_back)
{
    world w;
    world_start(&w, 2, oversize_tick, GUARD_MS);
    inst *a = start(&w, 0), *b = start(&w, 1);
    cr_assert_eq(net_set_max_frame(&b->n, 1000), 0);
    cr_assert_eq(net_set_max_frame(&b->n, 3), -EINVAL);
    size_t room = 10;
    int err = 0;
    cr_assert_null(net_room(&a->n, 1, &room, &err));
    cr_assert_eq(err, -ENOTCONN, "no room before the handshake");
    world_run(&w);
    cr_assert_eq(b->oversize, 1);
    cr_assert_eq(a->downs[1], 2);
    cr_assert_eq(b->bad[0], 0);
    world_free(&w);
}

/* WIRE.md "Frames": pieces that add up to more than the run's longest
 * message close the link before the piece past the limit is kept; the
 * lower id redials and the link carries messages again. */
Test(peer_net, a_message_whose_pieces_pass_the_limit_closes_the_link_which_then_comes_back)
{
    world w;
    world_start(&w, 2, oversize_tick, GUARD_MS);
    g_over_message = 1;
    inst *a = start(&w, 0), *b = start(&w, 1);
    cr_assert_eq(net_set_max_message(&b->n, SEC_PIECE_MAX - 1), -EINVAL, "at least a frame's");
    cr_assert_eq(net_set_max_message(&b->n, SEC_PIECE_MAX), 0);
    world_run(&w);
    g_over_message = 0;
    cr_assert_eq(b->oversize, 1);
    cr_assert_eq(b->oversize_message, 1, "%s", b->last_log);
    cr_assert_eq(a->downs[1], 2);
    cr_assert_eq(b->bad[0], 0);
    world_free(&w);
}

/* ---- backpressure ---------------------------------------------------------------- */

#define BIG (1u << 20)

static int g_accepted, g_refused_ticks;

/* Ticks in a row in which net_send took nothing: once the kernel buffers of
 * both ends are full (the reader does not read) this never ends; before,
 * every tick lets libuv hand the kernel more, which frees a slot. */
#define FULL_TICKS 50

/* Steps 0 and 1 of a flood: once both are up, peer 1 stops reading, and
 * peer 0 sends 1 MiB frames to it until nothing more is taken. 1 when full. */
static int flood_until_full(world *w)
{
    inst *a = &w->in[0], *b = &w->in[1];
    if (w->step == 0) {
        if (a->ups[1] && b->ups[0]) {
            cr_assert_eq(net_read_pause(&b->n, 0, 1), 0);
            g_accepted = g_refused_ticks = 0;
            next(w);
        }
        return 0;
    }
    for (int i = 0; i < 4; i++) {
        int r = send_k(a, 1, g_accepted, BIG);
        if (r == -EAGAIN) {
            g_refused_ticks = i == 0 ? g_refused_ticks + 1 : 0;
            break;
        }
        cr_assert_eq(r, 0, "%s", strerror(-r));
        g_accepted++;
        g_refused_ticks = 0;
        cr_assert_lt(g_accepted, 200, "net_send never pushed back");
    }
    return g_refused_ticks >= FULL_TICKS;
}

static void pressure_tick(world *w)
{
    inst *a = &w->in[0], *b = &w->in[1];
    switch (w->step) {
    case 0:
    case 1:
        if (flood_until_full(w) && since_step(w) >= 500) {
            cr_assert_eq(send_k(a, 1, g_accepted, BIG), -EAGAIN, "full: the caller keeps its message");
            cr_assert(net_busy(&a->n, 1));
            cr_assert_eq(b->frames[0], 0);
            cr_assert_eq(net_read_pause(&b->n, 0, 0), 0);
            next(w);
        }
        break;
    case 2:
        if (b->frames[0] == g_accepted && !net_busy(&a->n, 1)) {
            cr_assert_eq(send_k(a, 1, g_accepted, 10), 0, "room again once drained");
            g_accepted++;
            next(w);
        }
        break;
    case 3:
        if (b->frames[0] == g_accepted)
            finish(w);
        break;
    }
}

Test(peer_net, reader_that_stops_makes_send_say_eagain_not_queue)
{
    world w;
    world_start(&w, 2, pressure_tick, GUARD_MS);
    inst *a = start(&w, 0), *b = start(&w, 1);
    world_run(&w);
    cr_assert_gt(g_accepted, NET_QUEUE_FRAMES);
    /* Kernel buffers on loopback hold a few MB; our side at most the slots. */
    cr_assert_lt(g_accepted, 64, "%d frames of 1 MiB accepted", g_accepted);
    cr_assert_eq(b->frames[0], g_accepted, "nothing lost");
    cr_assert_eq(b->bad[0], 0);
    cr_assert_eq(a->downs[1], 1);
    world_free(&w);
}

/* Closing with full slots (a slow link at the end of a run): net_close_after
 * writes what the slots hold, then the last frame, and only then closes; the
 * reader gets every frame, the last one last. With g_talk_back the reader
 * also sends to the closing peer meanwhile (a neighbour's heartbeats and
 * shares at the end of a run) and reads one frame a tick, so that the
 * closing peer's kernel still holds what it wrote: the closing peer drops
 * what it receives, and closing with that unread must not reset the
 * connection, which would throw away what its kernel still had to send
 * (at the end of a run: the last share and the goodbye). */
static int g_last_closed, g_talk_back;

static void close_after_tick(world *w)
{
    inst *a = &w->in[0], *b = &w->in[1];
    switch (w->step) {
    case 0:
    case 1:
        if (flood_until_full(w)) {
            cr_assert(net_busy(&a->n, 1));
            uint8_t last[64];
            fill(last, sizeof last, 0, g_accepted);
            uint32_t k = (uint32_t)g_accepted;
            memcpy(last, &k, 4);
            net_close_after(&a->n, last, sizeof last, 20.0);
            a->closed = 1;
            for (int k = 0; k < 4 * g_talk_back; k++)
                cr_assert_eq(send_k(b, 0, 4 * k, BIG / 4), 0); /* (net_send: no slot waits on the pool) */
            cr_assert_eq(net_read_pause(&b->n, 0, 0), 0);
            next(w);
        }
        break;
    case 2:
        if (g_slowed) {
            g_slowed = 0;
            net_read_pause(&b->n, 0, 0);
        }
        if (b->frames[0] == g_accepted + 1 && b->downs[0]) {
            g_last_closed = 1;
            finish(w);
        }
        break;
    }
}

static void closing_after_writes(int talk_back);

Test(peer_net, closing_after_writes_delivers_what_the_slots_held_and_the_last_frame) { closing_after_writes(0); }

Test(peer_net, closing_with_frames_unread_still_delivers_everything_it_wrote) { closing_after_writes(1); }

static void closing_after_writes(int talk_back)
{
    g_talk_back = g_slow_reader = talk_back;
    world w;
    world_start(&w, 2, close_after_tick, GUARD_MS);
    inst *a = start(&w, 0), *b = start(&w, 1);
    world_run(&w);
    cr_assert(g_last_closed, "the connection closed after the last frame");
    cr_assert_gt(g_accepted, NET_QUEUE_FRAMES);
    cr_assert_eq(b->frames[0], g_accepted + 1, "every frame the slots held, then the last one");
    cr_assert_eq(b->bad[0], 0, "in order, every byte");
    cr_assert_eq(b->frame_bytes[0], (size_t)g_accepted * BIG + 64);
    (void)a;
    world_free(&w);
}

/* ---- a neighbour of another protocol version ------------------------------------- */

/* Peer 1 as a build of the next protocol version answers: it listens on
 * peer 1's address, reads each first message whole, answers with its own
 * magic and version (WIRE.md "Handshake", Limits) and closes. */
typedef struct newer {
    uv_tcp_t server;
    uv_tcp_t *conn; /* the one being answered, if any */
    uv_write_t wreq;
    uint8_t in[SEC_MSG1_BYTES], answer[SEC_HEAD_BYTES];
    size_t have;
    int accepts, heads_ours; /* first messages that opened with our magic and version */
    uint64_t t_accept[4];
    world *w;
} newer;

static newer g_newer;

static void newer_closed(uv_handle_t *h) { free(h); }

static void newer_alloc(uv_handle_t *h, size_t s, uv_buf_t *b)
{
    (void)h, (void)s;
    *b = uv_buf_init((char *)g_newer.in + g_newer.have, (unsigned)(sizeof g_newer.in - g_newer.have));
}

static void newer_written(uv_write_t *req, int status)
{
    (void)status;
    uv_close((uv_handle_t *)req->handle, newer_closed);
    g_newer.conn = NULL;
}

static void newer_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    (void)b;
    newer *v = &g_newer;
    if (n < 0) {
        uv_close((uv_handle_t *)s, newer_closed);
        v->conn = NULL;
        return;
    }
    if ((v->have += (size_t)n) < sizeof v->in)
        return;
    uv_read_stop(s);
    const uint8_t ours[SEC_HEAD_BYTES] = {'S', 'G', 'P', '1', SGP_PROTOCOL_VERSION & 0xff, SGP_PROTOCOL_VERSION >> 8};
    v->heads_ours += memcmp(v->in, ours, sizeof ours) == 0;
    uv_buf_t out = uv_buf_init((char *)v->answer, sizeof v->answer);
    uv_write(&v->wreq, s, &out, 1, newer_written);
}

static void newer_accept(uv_stream_t *server, int status)
{
    newer *v = &g_newer;
    if (status < 0 || v->conn)
        return;
    v->conn = malloc(sizeof *v->conn);
    uv_tcp_init(server->loop, v->conn);
    if (uv_accept(server, (uv_stream_t *)v->conn) < 0) {
        uv_close((uv_handle_t *)v->conn, newer_closed);
        v->conn = NULL;
        return;
    }
    if (v->accepts < 4)
        v->t_accept[v->accepts] = now_ms(v->w);
    v->accepts++;
    v->have = 0;
    uv_read_start((uv_stream_t *)v->conn, newer_alloc, newer_read);
}

static void newer_tick(world *w)
{
    inst *a = &w->in[0];
    newer *v = &g_newer;
    switch (w->step) {
    case 0:
        if (v->accepts == 1 && a->other_version == 1)
            next(w);
        break;
    case 1:
        /* The redial, 10 s later (the guard fails the test if it never
         * comes): a refusal for the version is no reason to give up. Its
         * head read too: the accept alone comes a tick before it. */
        if (v->accepts == 2 && v->have >= sizeof v->in) {
            if (v->conn)
                uv_close((uv_handle_t *)v->conn, newer_closed);
            uv_close((uv_handle_t *)&v->server, NULL);
            finish(w);
        }
        break;
    }
}

/* Peer 0 dials a peer 1 that speaks the next protocol version: the answer
 * makes it log both versions and wait 10 s before it dials again, instead
 * of every half second (WIRE.md "Connections"). */
Test(peer_net, an_answer_of_another_version_is_logged_and_slows_the_redials)
{
    world w;
    world_start(&w, 2, newer_tick, GUARD_MS);
    memset(&g_newer, 0, sizeof g_newer);
    g_newer.w = &w;
    memcpy(g_newer.answer, "SGP1", 4);
    g_newer.answer[4] = SGP_PROTOCOL_VERSION + 1, g_newer.answer[5] = 0;
    uv_tcp_init(&w.loop, &g_newer.server);
    struct sockaddr_in sa;
    uv_ip4_addr("127.0.0.1", w.c.peers[1].port, &sa);
    cr_assert_eq(uv_tcp_bind(&g_newer.server, (struct sockaddr *)&sa, 0), 0);
    cr_assert_eq(uv_listen((uv_stream_t *)&g_newer.server, 4, newer_accept), 0);
    inst *a = start(&w, 0);
    world_run(&w);
    char want[96];
    snprintf(want, sizeof want, "peer 1 speaks protocol version %d, this peer %d: refused", SGP_PROTOCOL_VERSION + 1,
             SGP_PROTOCOL_VERSION);
    cr_assert(strstr(a->version_line, want), "'%s' is not '%s'", a->version_line, want);
    cr_assert_eq(g_newer.heads_ours, 2, "each dial opened with SGP_PROTOCOL_VERSION");
    cr_assert_eq(a->ups[1], 0);
    const uint64_t gap = g_newer.t_accept[1] - g_newer.t_accept[0];
    cr_log_info("redial %llu ms after an answer of another version", (unsigned long long)gap);
    /* 10 s plus up to 5 s of jitter on the loop's clock (the loop's own
     * timer: a busy machine makes it later, never earlier). */
    cr_assert_geq(gap, 10000, "redialled %llu ms after the refusal", (unsigned long long)gap);
    cr_assert_lt(gap, 25000, "redialled %llu ms after the refusal", (unsigned long long)gap);
    world_free(&w);
}

/* ---- shutdown ---------------------------------------------------------------------- */

static void shutdown_tick(world *w)
{
    raw *r = &w->r[0];
    inst *a = &w->in[1];
    if (w->step == 0 && r->connected && a->refused_connect >= 2)
        finish(w); /* mid-handshake, mid-backoff */
}

Test(peer_net, close_in_the_middle_of_everything_leaves_no_handles)
{
    world w;
    world_start(&w, 3, shutdown_tick, GUARD_MS);
    /* Peer 1 dials 2, which never listens; a raw client sits in the handshake. */
    inst *a = start(&w, 1);
    raw_connect(&w, 0, 1, "SGP1", 4);
    world_run(&w); /* asserts uv_run returns 0 and uv_loop_close succeeds */
    cr_assert_eq(a->ups[0] + a->ups[2], 0);
    cr_assert_eq(a->downs[0] + a->downs[2], 0, "no on_down for links that never came up");

    /* A net closed while its listener's bind is retried (the address is in
     * use) is cleaned up the same way. */
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    uv_tcp_t squat;
    uv_tcp_init(&loop, &squat);
    struct sockaddr_in sa;
    uv_ip4_addr("127.0.0.1", w.c.peers[0].port, &sa);
    cr_assert_eq(uv_tcp_bind(&squat, (struct sockaddr *)&sa, 0), 0);
    cr_assert_eq(uv_listen((uv_stream_t *)&squat, 1, squat_cb), 0);
    net n;
    inst x = {.id = 0};
    cr_assert_eq(net_init(&n, &loop, &w.c, 0, &w.kp[0], &g_cb, &x), 0);
    cr_assert(strstr(x.last_log, "address already in use; retrying"), "%s", x.last_log);
    net_close(&n);
    uv_close((uv_handle_t *)&squat, NULL);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(uv_loop_close(&loop), 0);
    net_free(&n);
    world_free(&w);
}
