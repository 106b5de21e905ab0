/* The transport: one TCP connection per pair of peers, the handshake and the
 * encrypted frames of peer/wire/WIRE.md (Connections, Handshake, Frames) put on
 * libuv sockets. No gossip here: it moves opaque plaintext messages.
 *
 *   static void up(void *ctx, int peer) { ... }                 // authenticated
 *   static void down(void *ctx, int peer, int reason) { ... }   // -errno
 *   static void frame(void *ctx, int peer, const uint8_t *m, size_t len) { ... }
 *
 *   net_callbacks cb = {.on_up = up, .on_down = down, .on_frame = frame};
 *   net n;
 *   if (net_init(&n, loop, &c, my_id, &kp, &cb, ctx) < 0) ...
 *   for (int k = 0; k < n_nb; k++) net_want(&n, nb[k]);   // every in- or out-neighbour; we dial the higher ids
 *   ...
 *   int r = net_send(&n, j, msg, len);   // -EAGAIN: keep the share, try later
 *   ...
 *   net_close(&n);        // closes every handle (on_down fires for live peers)
 *   uv_run(loop, UV_RUN_DEFAULT);       // until every close callback has run
 *   net_free(&n);
 *
 * Only the lower id dials (WIRE.md "Connections"): net_want(j) for j > my_id
 * connects to j and keeps reconnecting with exponential backoff (100 ms
 * doubling to 500 ms, plus up to 50 % jitter from a generator seeded by the
 * cluster id and my_id; 10 s after j answered that it speaks another
 * protocol version) for as long as the run lasts; for j < my_id it only
 * records the wish, and j dials us. Inbound connections from any cluster
 * member are accepted; one whose AUTH verifies replaces an older connection
 * with the same peer. Connect attempts time out after 3 s, our handshakes
 * after 5 s, inbound ones after 2 s. Inbound handshakes wait in rooms of
 * bounded size (net_admit.c): before a valid first flight, 16 from
 * addresses that are no member's in the cluster file and 48 from members'
 * addresses; after one naming a lower id we want, 4 for each such id. A
 * full room admits the newcomer and closes the oldest of its busiest
 * address (of that id's claims), so a flood, even from 127.0.0.1 where
 * every local member dials from, only displaces its own connections; lines
 * about closed inbound connections are rate limited (5 per 10 s, then a
 * count). Any failure (handshake, authentication, an oversize length prefix, a
 * socket error) closes that connection only, with a one-line reason through
 * on_log (stderr when NULL; an inbound connection's line names the address it
 * came from once its handshake began); the process keeps running. A first
 * message of another protocol version is answered with ours before the
 * close (sec_hs_refusal); every other refusal is a silent close.
 *
 * Backpressure: each connection has NET_QUEUE_FRAMES write slots. A frame
 * holds its slot until the kernel has taken all of its bytes, so at most
 * NET_QUEUE_FRAMES frames per peer are ever buffered in user space, and
 * net_send says -EAGAIN instead of queueing more. The caller keeps what it
 * wanted to send (the project's rule for gossip shares) and tries later.
 * A frame carries at most SEC_PIECE_MAX (1 MiB) of plaintext; a longer
 * message goes in pieces (WIRE.md "Frames"): written into a write slot laid
 * out as its frames, sealed in place there and written at once (one slot,
 * as a message of one frame), and put together at the receiver in a buffer
 * of the connection, which grows only as authenticated pieces arrive and
 * never past net_set_max_message (or, where cb.on_land says so, written
 * straight into the receiver's own buffer as they arrive: net_landing). Read and write buffers grow to the
 * largest frame or message seen and are kept up to 16 MiB, so a steady run
 * allocates nothing per message. A frame is
 * opened in place in the read buffer; a message of 4 MiB or more in pieces
 * goes to cb.on_frame_work on libuv's thread pool while the connection
 * reads nothing more (the idle limit waits for it), and net_send_room_later
 * seals one there. The session and the buffers of a connection
 * closed meanwhile are freed when that work is done.
 *
 * SIGPIPE: libuv writes with write(2), which raises SIGPIPE on a connection
 * the peer has reset. net_init sets SIGPIPE to SIG_IGN when it is still at its
 * default (a handler the program installed is left alone), so a dead peer
 * turns into an EPIPE write error that closes that one connection.
 *
 * Addresses are taken from the cluster file and must be IPv4 or IPv6
 * literals: host names are not resolved (-EAFNOSUPPORT). Single-threaded:
 * every call from the loop's thread. Callbacks may call net_send, net_close
 * and the other functions here.
 */
#ifndef PEER_NET_NET_H
#define PEER_NET_NET_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "peer/config/cluster.h"
#include "peer/config/credential.h"
#include "peer/wire/sec.h"
#include "peer/wire/wire.h"

#define NET_QUEUE_FRAMES 8 /* frames per connection handed to the kernel but not yet taken */

/* Where a message arriving in pieces goes from its byte `at` on: straight
 * to dst, len bytes, as its pieces arrive (a model written where it will
 * be used, not put together in a buffer of its own first). */
typedef struct net_landing {
    uint8_t *dst;
    size_t at, len; /* the message is exactly at + len bytes long */
    /* Each run of bytes once it is in dst (NULL: not told), e.g. to hash them. */
    void (*piece)(void *ctx, int peer, const uint8_t *bytes, size_t len);
} net_landing;

typedef struct net_callbacks {
    void (*on_up)(void *ctx, int peer);                /* handshake done: net_send works */
    void (*on_down)(void *ctx, int peer, int reason);  /* only after on_up; reason is -errno */
    void (*on_frame)(void *ctx, int peer, const uint8_t *msg, size_t len); /* msg valid during the call */
    /* A message of many MB (it arrived in pieces) goes to on_frame_work
     * (NULL: nothing) on libuv's thread pool first; what it returns (e.g.
     * whether a hash matched) goes with the same msg to on_frame_noted on
     * the loop, instead of on_frame (which gets it when on_frame_noted is
     * NULL). */
    int (*on_frame_work)(void *ctx, int peer, const uint8_t *msg, size_t len);
    void (*on_frame_noted)(void *ctx, int peer, const uint8_t *msg, size_t len, int note);
    /* Asked with the first piece of each message in pieces (NULL: never):
     * return 1 with *l filled to land the message (net_landing), 0 to have
     * it put together in the connection's buffer. A landed message goes to
     * on_landed with its head (the bytes before `at`) once its last piece
     * is in; one longer or shorter than at + len closes the connection, and
     * one whose connection closes first, or that net_land_stop stopped,
     * goes nowhere (dst holds what arrived of it). */
    int (*on_land)(void *ctx, int peer, const uint8_t *first, size_t len, net_landing *l);
    void (*on_landed)(void *ctx, int peer, const uint8_t *head, size_t head_len);
    void (*on_progress)(void *ctx, int peer);          /* 64 KiB more of frames arrived (NULL: not told) */
    void (*on_log)(void *ctx, const char *line);       /* one line, no newline; NULL: stderr */
    /* The address stayed in use for the whole retry time (net_init), or its
     * bind failed otherwise meanwhile: err (a libuv error, -errno); there is
     * no listener, dials go on. NULL: only the log line. */
    void (*on_listen_failed)(void *ctx, int err);
} net_callbacks;

struct net_peer;
struct net_conn;
struct net_listen_retry;

typedef struct net {
    uv_loop_t *loop;
    const cluster *c;  /* borrowed, like kp: both must outlive the net */
    const sec_keypair *kp;
    int my_id;
    net_callbacks cb;
    void *ctx;
    uint8_t cid[SEC_CLUSTER_ID_BYTES];
    uv_tcp_t *listener;      /* heap: freed in its close callback; NULL while its bind is retried */
    struct net_listen_retry *listen_retry; /* heap: the timer of a bind retried while the address is in use */
    uint64_t listen_retry_ms; /* for how long (net_set_listen_retry) */
    struct net_peer *peers;  /* by id */
    struct net_conn *conns;  /* every connection not yet freed */
    int n_pending;           /* inbound connections still in their handshake */
    uint64_t arrivals;       /* inbound connections admitted and claims made, ever: their order (net_admit.c) */
    size_t max_frame;        /* for new sessions */
    size_t max_message;      /* the longest message that may arrive in pieces (net_set_max_message) */
    size_t piece;            /* plaintext bytes a frame this peer seals carries at most (net_set_piece) */
    uint64_t idle_ms;        /* an up connection with no complete frame for this long is closed (0: never) */
    uint64_t log_window_start, log_in_window, log_suppressed; /* rate limit of inbound-failure lines */
    uint64_t rng;
    int closing;
    double crypto_seconds;   /* opening the frames that arrive on the loop (sealing is the sender's to time) */
    size_t message_peak;     /* the largest buffer a message in pieces was put together in */
    double pool_seconds;     /* work on big messages on the thread pool (before, on_frame_work, a seal),
                              * (before, on_frame_work): not the loop's time, so not in crypto_seconds */
    uint8_t *last;           /* net_close_after: the frame each connection sends last */
    size_t last_len;
    const uint8_t *cred;     /* this peer's credential (WIRE.md "Joining": a vacant slot's), or NULL */
    uint8_t (*slot_pk)[SEC_KEY_BYTES]; /* the key each vacant slot was first admitted with (zeros: none) */
    int dial_in;             /* this peer dials every neighbour: a joiner, or one listening off the file's address */
    uint64_t roster_version; /* grows with every address or revocation learned (WIRE.md "Members") */
    uint64_t *revoked;       /* credential serials refused, and their revocations' signatures (to pass on) */
    uint8_t (*revoked_sig)[CREDENTIAL_SIG_BYTES];
    size_t n_revoked, cap_revoked;
} net;

/* Listen on my_id's address from the cluster. 0, -EINVAL, -ENOMEM,
 * -EAFNOSUPPORT (a host name), or the bind/listen error (-EACCES, ...).
 * On failure too, the caller runs net_close, the loop and net_free.
 * An address in use (another socket holds the port: a listener, or any
 * program's connection, which the kernel may have given that port) is not
 * a failure here: net_init logs "listen on ADDR: address already in use;
 * retrying for up to S s", returns 0 and binds again on the loop, 100 ms
 * doubling to 1 s apart, for 120 s (net_set_listen_retry), logging
 * "listening on ADDR after T s" once it is up, or giving up with a line and
 * cb.on_listen_failed. Meanwhile net_want dials as usual; the members that
 * dial us find nothing listening and redial. */
int net_init(net *n, uv_loop_t *loop, const cluster *c, int my_id, const sec_keypair *kp, const net_callbacks *cb,
             void *ctx);
/* As net_init, for a peer that dials in (WIRE.md "Members"): cred (NULL
 * for a member of the file; SEC_CRED_BYTES, borrowed) makes it a joiner,
 * which takes a vacant slot with it (WIRE.md "Joining"); host:port (an IPv4
 * or IPv6 literal; host NULL: the file's address, and a joiner then
 * listens nowhere) is where it listens instead of the file's address (a
 * replacement on another host), announced with the member list as this
 * process's since `since` (microseconds of its wall clock). A peer listening
 * off the file's address, or a joiner, dials every neighbour whose address
 * it knows (SEC_DIAL_IN_FLAG); the others dial it only if they dial in
 * too and have the lower id. -EAFNOSUPPORT for a host name, -EINVAL for a
 * credential and a slot of the file. */
int net_init_at(net *n, uv_loop_t *loop, const cluster *c, int my_id, const sec_keypair *kp, const net_callbacks *cb,
                void *ctx, const char *host, unsigned port, uint64_t since, const uint8_t *cred);

/* We exchange messages with peer: dial it (if it has the higher id) and keep
 * the connection up. 0, -EINVAL (out of range or my_id), -ENOMEM. Who dials
 * is net_init_at's rule: a peer that dials in dials whom it wants; nobody
 * dials a vacant slot until its joiner announced an address. */
int net_want(net *n, int peer);

/* Revocations to refuse joiners by (checked already: a revocation file's,
 * peer/config/credential.h), copied, and passed on to the neighbours with
 * the member list. 0, -ENOMEM, or -ENOSPC past 4,096 revocations. */
int net_set_revoked(net *n, const revocation *r, size_t count);

/* The member list (WIRE.md "Members"): an entry a neighbour sent. 1 when it
 * is news (a member's later announcement: its address replaces the one
 * known, and who dials whom follows it), 0 when it is not, or a negative
 * errno with why: a slot the cluster lacks, a start more than a day ahead,
 * a joiner's entry whose credential does not check (forged, expired,
 * revoked, another key for the slot), a founder's with a credential. */
int net_learn(net *n, const wire_member *e, char *why, size_t whylen);
/* A revocation a neighbour sent: 1 when it is news (checked against the
 * file's admission key; a joiner up with that credential is dropped, and
 * refused from then on), 0 when known, or a negative errno with why. */
int net_learn_revocation(net *n, uint64_t serial, const uint8_t sig[CREDENTIAL_SIG_BYTES], char *why, size_t whylen);
/* What there is to tell a neighbour, from *cursor on (start at 0): every
 * announced entry (this peer's own included), at most max a call, and the
 * revocations. The views point into the net: use them before it changes. */
size_t net_roster_entries(const net *n, int *cursor, wire_member *out, size_t max);
size_t net_roster_revocations(const net *n, size_t *cursor, wire_revocation *out, size_t max);
/* Grows whenever the list above changes: a neighbour told an earlier
 * version is told again. */
uint64_t net_roster_version(const net *n);

/* Close an up connection that has delivered no complete frame (nor 64 KB of
 * one still arriving) for this many seconds, 0 for never (the default): a
 * stalled half frame or a silent peer then frees the edge, and the lower id
 * redials. 0 or -EINVAL. */
int net_set_idle_timeout(net *n, double seconds);

/* A frame of about `bytes` is about to be built here or at peer and taken
 * in at the other end (a whole model): each side's loop is busy with it for
 * as long as that takes, so the connection is not closed as idle until
 * bytes / 20 MB/s from now (on top of the idle timeout). */
void net_expect_busy(net *n, int peer, size_t bytes);

/* For how long a bind that finds the address in use is retried (net_init),
 * counted from net_init; 0: the next retry gives up. 0 or -EINVAL. */
int net_set_listen_retry(net *n, double seconds);

/* Lower the frame limit (ciphertext bytes, WIRE.md MAX_FRAME) for the
 * connections set up from now on. 0 or -EINVAL. */
int net_set_max_frame(net *n, size_t max_frame);

/* The longest message that may arrive in several frames (WIRE.md "Frames":
 * the largest message of the run); a connection whose pieces add up to more
 * is closed before they are kept. Default 2^31 bytes. 0 or -EINVAL. */
int net_set_max_message(net *n, size_t bytes);

/* Seal frames of at most this many plaintext bytes from now on (default and
 * most SEC_PIECE_MAX): a message longer goes in pieces. Receivers take any
 * split, so tests lower it to send a small model in many frames. 0 or -EINVAL. */
int net_set_piece(net *n, size_t bytes);

/* Bytes the transport holds: every connection's receive and send buffers
 * (the memory breakdown's messages in flight). */
size_t net_bytes(const net *n);

/* Seal msg into one frame and hand it to the kernel. 0, -ENOTCONN (peer not
 * up), -EAGAIN (its write slots are all taken: keep the message), -EMSGSIZE,
 * -EINVAL, -ENOMEM, or a socket error (which also closes the connection). */
int net_send(net *n, int peer, const void *msg, size_t len);

/* The same in two calls, for a message written straight into its frames (a
 * whole model is then in memory once, not once encoded and once sealed):
 * net_room gives room for *len bytes of plaintext in a free write slot to
 * peer (less when no message can be that long: *len says how much; NULL
 * with *err as net_send's), net_send_room seals the `len` bytes put there
 * in place, as one frame or the frames of its pieces, and writes them (0 or
 * as net_send). Nothing else of this net may be called in between; a room
 * not sent is simply not used. */
uint8_t *net_room(net *n, int peer, size_t *len, int *err);
int net_send_room(net *n, int peer, size_t len);
/* net_send_room with the seal on libuv's thread pool, for a message of
 * hundreds of MB (half a second of the loop's time, more on a busy machine:
 * its heartbeats would stop): there first before(pt, len, arg) (NULL:
 * nothing; e.g. a hash of the message written into it), then the seal; the
 * loop writes the frames when both are done. Until then the connection
 * takes no other frame (net_room says -EAGAIN, net_busy 1): frames are
 * sealed in order. 0, or an error as net_send_room's. */
int net_send_room_later(net *n, int peer, size_t len, void (*before)(uint8_t *pt, size_t len, void *arg),
                        void *arg);

/* 1 when net_send(peer) would be refused right now (not up, or busy), else 0. */
int net_busy(const net *n, int peer);
/* A frame to peer is still queued (not all taken by the kernel yet). */
int net_sending(const net *n, int peer);

/* 1 when peer's connection is up. */
int net_is_up(const net *n, int peer);

/* Close peer's connection for a violation seen above the transport (a
 * malformed message), logging "peer P: connection closed: WHY"; it is
 * redialled as after any failure. Callable from on_frame. 0 or -ENOTCONN. */
int net_drop(net *n, int peer, const char *why);

/* Inside on_frame or on_frame_noted, for a message that arrived in several
 * frames: the buffer its pieces were put together in becomes the caller's
 * (free() it; the message at its start, where the callback got it). So a
 * whole-model message is kept where it arrived instead of copied out.
 * NULL for a message of one frame (it shares the connection's buffer):
 * then copy out of it as usual. */
uint8_t *net_frame_keep(net *n, int peer);

/* The rest of peer's message being landed is read and dropped: nothing
 * more is written to its dst, and on_landed is not called. 0, or -ENOENT
 * when no message of peer is being landed. */
int net_land_stop(net *n, int peer);

/* Stop (paused = 1) or resume reading from peer: the receiver's side of flow
 * control, and how tests make a slow reader. Frames already received are
 * delivered on resume. 0 or -ENOTCONN. */
int net_read_pause(net *n, int peer, int paused);

/* Close the listener, every connection and every timer; idempotent. The
 * caller then runs the loop until it returns. */
void net_close(net *n);

/* Close as net_close does, but let each up connection first finish writing
 * what its slots hold and then `last` (len bytes, e.g. a goodbye; NULL for
 * none), for at most `seconds` from now: on a slow link the final shares and
 * the goodbye would otherwise be cancelled with the connection, and the
 * neighbour would wait for them until its dead timeout. Nothing more is
 * delivered; what still arrives is read and dropped, and once everything is
 * written the connection is half-closed and waits for the other side's
 * close: closing with bytes unread would reset the connection, and the
 * kernel would throw away what it still had to send. The caller then runs
 * the loop until it returns. */
void net_close_after(net *n, const void *last, size_t len, double seconds);

/* Release what is left; call after the loop has run out. Safe on a zeroed net. */
void net_free(net *n);

#endif
