/* The transport's insides, shared by its files; internal to peer/net (the
 * API is net.h). One job per file:
 *
 *  net.c        the public calls over the peer table, and the log
 *  net_listen.c the listener: bound, or bound again while the address is in use
 *  net_conn.c   a connection's life: made, closed once, freed
 *  net_dial.c   dialling and redialling with backoff; accepting
 *  net_admit.c  room for inbound handshakes: who waits, who gives way
 *  net_join.c   a joiner's credential (at the handshake, in a member list):
 *               may it take the slot; revocations
 *  net_roster.c where members listen as they announced it, and who dials whom
 *  net_hs.c     the handshake pump (peer/wire/sec_hs.c) and a connection coming up
 *  net_frame.c  frames: write slots and backpressure, reading and opening,
 *               the last writes of a close that drains (net_close_after)
 *  net_idle.c   deadlines on the connection's timer: connect, handshake,
 *               idle, drain
 *
 * Every connection owns two libuv handles (its socket and its timer) and is
 * freed when the second one's close callback has run; libuv calls pending
 * connect and write callbacks (with UV_ECANCELED) before that, so they may
 * still touch the connection.
 */
#ifndef PEER_NET_NET_IMPL_H
#define PEER_NET_NET_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "peer/net/net.h"

#define NET_BACKOFF_MIN_MS 100
/* A redial is cheap (a refused connect, or one handshake), and a neighbour
 * that comes back should have its edge again within a second. */
#define NET_BACKOFF_MAX_MS 500
/* After a neighbour answered that it speaks another protocol version: that
 * lasts until someone restarts a peer with another build, so redialling
 * every half second would only fill both logs (WIRE.md "Handshake"). */
#define NET_VERSION_RETRY_MS 10000
/* A bind that finds the address in use is tried again, 100 ms doubling to
 * 1 s apart, for this long (net_set_listen_retry): long enough for Linux's
 * 60 s of TIME_WAIT after a connection that held the port closed, and for
 * that connection to have lasted as long again; the neighbours route around
 * the peer meanwhile (dead timeout) and its dials go on, so the wait costs
 * them nothing, and an address that some other program holds for good is
 * still reported within two minutes. */
#define NET_LISTEN_RETRY_MS 120000
#define NET_LISTEN_BACKOFF_MIN_MS 100
#define NET_LISTEN_BACKOFF_MAX_MS 1000
#define NET_RBUF_INIT 16384
/* The initiator may have its first message and its AUTH flight in flight at
 * once; they get their own slots so they never take the frames' ones. */
#define NET_HS_SLOTS 2
#define NET_SLOTS (NET_QUEUE_FRAMES + NET_HS_SLOTS)

struct net_conn;

/* A frame sealed on libuv's thread pool (net_send_room_later). */
typedef struct net_seal_work {
    uv_work_t req; /* first: the callbacks get back to the struct from the request */
    struct net_conn *c;
    struct net_slot *s;
    size_t len;
    void (*before)(uint8_t *pt, size_t len, void *arg);
    void *arg;
    long rc;        /* net_seal_message's */
    double seconds; /* the work's, added to the net's pool_seconds on the loop */
} net_seal_work;

/* A message of many MB, assembled from its frames, looked at on libuv's
 * thread pool (cb.on_frame_work) before it is delivered: it lies in the
 * connection's message buffer, which is left alone meanwhile. */
typedef struct net_note_work {
    uv_work_t req; /* first */
    struct net_conn *c;
    int note; /* on_frame_work's */
    double seconds;
} net_note_work;

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
    int draining; /* inside net_frames_drain: on_frame may resume reading */
    sec_hs hs;
    sec_session s;
    uint8_t *rbuf; /* received bytes not yet used: rlen of rcap */
    size_t rlen, rcap;
    size_t idle_bytes; /* received since the idle limit was last re-armed */
    uint64_t busy_until; /* uv_now before which silence is expected (net_expect_busy): not idle */
    struct sockaddr_storage from; /* inbound: the other end's address */
    int stranger;      /* inbound from an address that is no member's */
    int claim;         /* inbound, pending: the member its valid first flight names, in that member's room
                        * (net_admit_claim); -1 while it waits in the open room */
    uint64_t arrival;  /* inbound, pending: when it entered its room (n->arrivals): the smaller, the older */
    int closing_after; /* net_close_after: says its last, half-closes, reads (and drops) until the other
                        * side closes too: closing with bytes unread would reset the connection and throw
                        * away what the kernel still had to send */
    int refused;       /* the handshake's error, once its refusal answer is written: then it closes */
    int last_sent;
    uv_shutdown_t shut; /* closing_after: the half-close once the last write is out */
    int shut_sent;
    net_slot slot[NET_SLOTS];
    net_slot *room; /* net_room's slot, until net_send_room */
    net_seal_work *sealing; /* a message being sealed off the loop: no other is sealed meanwhile, and the
                             * session and the slot stay until it is done */
    /* A message arriving in pieces: the plaintext of its frames so far. */
    uint8_t *mbuf;
    size_t mlen, mcap;
    net_note_work *noting; /* mbuf's message looked at off the loop: not reading meanwhile */
    int delivering;         /* on_frame has mbuf's message, which may become the callback's (net_frame_keep) */
    int kept;               /* ...and has: mbuf is NULL */
    /* ...or landed (net_landing): mbuf holds its head, the rest goes to land.dst. */
    int landing;            /* NET_LAND_TO, NET_LAND_DROP (net_land_stop), or 0 */
    net_landing land;
    size_t land_got;        /* the message's bytes so far */
} net_conn;

enum { NET_LAND_TO = 1, NET_LAND_DROP = 2 };

/* Bytes of a frame still arriving that count as progress (a large frame on a
 * slow link is not a stall). */
#define NET_IDLE_PROGRESS (64u << 10)

typedef struct net_retry {
    uv_timer_t timer; /* first: the close callback frees the struct */
    net *n;
    int peer;
} net_retry;

/* The listener's bind being retried (net_listen.c). */
typedef struct net_listen_retry {
    uv_timer_t timer; /* first: the close callback frees the struct */
    net *n;
    uint64_t since;   /* uv_now of the first attempt */
    uint64_t backoff_ms;
} net_listen_retry;

/* A member's announced address (net_roster.c). */
typedef struct net_member {
    cluster_peer at;  /* where it listens; pk its key (a joiner's from its credential) */
    uint64_t since;   /* the announcing process's start: a later one replaces this */
    unsigned flags;   /* WIRE_MEMBER_DIALS_IN */
    int has_cred;     /* a joiner's entry: its credential, passed on with the entry */
    uint8_t cred[SEC_CRED_BYTES];
    uint64_t serial;  /* ...whose serial a revocation names */
} net_member;

typedef struct net_peer {
    int want;
    net_member *m;     /* what it announced, or NULL: the file's address (none for a vacant slot) */
    int dialed_in;     /* its handshake said it dials in (SEC_DIAL_IN_FLAG, or a joiner's) */
    int admitted;      /* a joiner whose credential this peer took at a handshake ... */
    uint64_t serial;   /* ... with this serial */
    net_conn *up;      /* the authenticated connection */
    net_conn *dial;    /* our attempt in progress (higher ids only) */
    net_retry *retry;  /* heap, made by net_want for higher ids */
    uint32_t backoff_ms;
} net_peer;

/* net.c: one line through on_log (stderr when NULL). */
void net_log(net *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* net_listen.c: listen on my_id's address; when it is in use, 0 and the
 * bind is retried (cb.on_listen_failed when that gives up). 0 or the
 * libuv error, logged. */
int net_listen_start(net *n);
/* Close the listener, or stop retrying its bind. */
void net_listen_stop(net *n);

/* net_conn.c: a connection in its first state, on n's list; NULL when out of
 * memory. */
net_conn *net_conn_new(net *n, int role);
/* Close c once: its log line (none when why is NULL: shutdown), on_down if it
 * was up, a redial if it was ours. Its memory goes with its handles (and a
 * frame being sealed off the loop). */
void net_conn_close(net_conn *c, int reason, const char *why);
/* Free a closed c whose handles have closed and that seals and opens nothing. */
void net_conn_release(net_conn *c);

/* net_dial.c */
void net_dial(net *n, int peer);
/* The next redial of peer after the backoff, if it is still wanted. */
/* reason: why the last attempt ended (-errno). */
void net_retry_schedule(net *n, int peer, int reason);
/* The listener's connection callback. */
void net_on_connection(uv_stream_t *server, int status);

/* net_join.c: the sec_admit_fn of a responder whose cluster file has an
 * admit line (ctx: the net). */
int net_admit_joiner(void *ctx, uint32_t id, const uint8_t cred[SEC_CRED_BYTES], uint8_t pk[SEC_KEY_BYTES], char *why,
                     size_t whylen);
/* Whether cred lets a joiner take vacant slot id (signature, cluster,
 * expiry, revocations, one key a slot): 0 with its key and serial, or
 * -EPERM with why. The slot's key is recorded. */
int net_check_credential(net *n, uint32_t id, const uint8_t cred[SEC_CRED_BYTES], uint8_t pk[SEC_KEY_BYTES],
                         uint64_t *serial, char *why, size_t whylen);
/* The sec_lookup_fn of every handshake (ctx: the net): the file's keys,
 * and a vacant slot's once a credential for it was taken or announced. */
int net_lookup(void *ctx, uint32_t id, uint8_t pk[SEC_KEY_BYTES]);
/* 1 when serial was revoked. */
int net_is_revoked(const net *n, uint64_t serial);

/* net_roster.c: where id listens (announced, else the file's; NULL for a
 * vacant slot nobody announced), whether this peer dials it (its address
 * known; a peer that dials in dials one that does not; between two of a
 * kind the lower id), and acting on that after a change (dial, or stop
 * redialling). */
const cluster_peer *net_where(const net *n, int id);
int net_should_dial(const net *n, int id);
void net_reconsider(net *n, int id);
/* This peer's own announcement (net_init_at). */
int net_announce_self(net *n, const char *host, unsigned port, uint64_t since);
void net_roster_free(net *n);

/* net_admit.c: c, just accepted, waits for its handshake in the open room of
 * its address's kind; if that is full, the oldest connection of the room's
 * busiest address is closed (never c). */
void net_admit(net_conn *c);
/* c's first flight was valid: if it names a lower id we want, c moves to
 * that member's room, closing the member's oldest claim if that is full. */
void net_admit_claim(net_conn *c);

/* net_hs.c: feed what was received to the handshake and send what it
 * answers, until it needs more input or is done (the connection is then up).
 * 0, or -1 when the connection was closed. */
int net_hs_pump(net_conn *c);

/* net_frame.c */
/* *buf at least need bytes (grown, never shrunk). 0 or -ENOMEM. */
int net_buf_grow(uint8_t **buf, size_t *cap, size_t need);
/* Hand s's first len bytes to the kernel; s is busy until they are taken. */
int net_slot_write(net_conn *c, net_slot *s, size_t len);
/* The same, closing c when it fails (a sealed frame took a nonce: the
 * stream cannot go on without it). */
int net_slot_send(net_conn *c, net_slot *s, size_t len);
/* A slot of c in [lo, hi) not busy, or NULL. */
net_slot *net_slot_find_free(net_conn *c, int lo, int hi);
/* The socket's read callbacks. */
void net_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
void net_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);
/* Open and deliver every whole frame received (until paused or closed). */
void net_frames_drain(net_conn *c);
/* A connection closing after its writes: n->last into the first free slot,
 * then close once no slot is busy. */
void net_drain_step(net_conn *c);
/* Seal s's len bytes of plaintext on the thread pool (after before(pt, len,
 * arg) there), then write them. 0 or a libuv error. */
int net_seal_later(net_conn *c, net_slot *s, size_t len, void (*before)(uint8_t *, size_t, void *), void *arg);
/* The plaintext bytes a frame of c carries at most as this peer sends. */
size_t net_piece(const net_conn *c);
/* Bytes of the frames that carry a message of len bytes in pieces of piece. */
size_t net_frames_bound(size_t len, size_t piece);
/* Seal the len bytes of plaintext at s->buf + SEC_PT_OFFSET in place as the
 * frames of one message (net_room's layout): the frames' bytes, or the
 * seal's error. */
long net_seal_message(net_conn *c, net_slot *s, size_t len);

/* net_idle.c */
/* An up connection made progress: the idle limit starts again. */
void net_idle_rearm(net_conn *c);
/* The connect or handshake time limit ran out. */
void net_deadline_cb(uv_timer_t *t);
/* net_close_after's limit ran out. */
void net_drain_deadline_cb(uv_timer_t *t);

#endif
