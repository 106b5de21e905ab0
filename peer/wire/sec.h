/* Peer keys, the handshake and encrypted frames (peer/wire/WIRE.md: Keys,
 * Handshake, Frames), as pure functions over byte buffers: no sockets, no
 * clock, no files. The transport feeds received bytes in and writes out what
 * comes out; key files are peer/config/keyfile.h's. The handshake is in
 * sec_hs.c, sessions and frames in sec_frame.c.
 *
 *   sec_keypair me = {0};
 *   char err[256];
 *   if (keyfile_load(&me, "keys/0.key", err, sizeof err) < 0) ...   // peer/config/keyfile.h
 *
 *   sec_hs hs = {0};                      // dialling peer 3 (the lower id dials)
 *   sec_hs_init(&hs, SEC_INITIATOR, 0, 3, &me, cluster_pubkey_lookup, &c, cid);
 *   while (!sec_hs_done(&hs)) {
 *       uint8_t out[SEC_HS_OUT_MAX];
 *       int n = sec_hs_produce(&hs, out, sizeof out);   // send these n bytes
 *       ...
 *       int used = sec_hs_consume(&hs, in, len);        // < 0: close the connection
 *       // in + used .. in + len already belong to the first frames: keep them
 *   }
 *   sec_session s = {0};
 *   sec_hs_finish(&hs, &s);               // s.peer_id is authenticated
 *
 *   int n = sec_seal(&s, msg, len, frame, sec_seal_bound(len));
 *   int need = sec_frame_need(buf, have, s.max_frame);  // read until have >= need
 *   n = sec_open(&s, buf, need, msg, cap);              // < 0: close the connection
 *   sec_session_free(&s);
 *   sec_keypair_free(&me);
 *
 * Every secret (static and ephemeral keys, DH outputs, the key schedule, the
 * stream states) lives in sodium_malloc memory and is wiped when no longer
 * needed. Errors are negative errno values and sticky: a handshake or session
 * that has failed once fails every later call, because the connection must
 * close anyway and an attacker should get one try per connection. The
 * handshake and the frame reader take bytes from anyone before they
 * authenticate anybody: tests/fuzz/fuzz_handshake.c fuzzes both.
 */
#ifndef PEER_WIRE_SEC_H
#define PEER_WIRE_SEC_H

#include <stddef.h>
#include <stdint.h>

#define SEC_KEY_BYTES 32       /* X25519 public and secret keys */
#define SEC_CLUSTER_ID_BYTES 32

/* Handshake message sizes (WIRE.md "Handshake"). Both messages open with
 * magic and version (SGP_PROTOCOL_VERSION, peer/wire/wire.h), which are
 * checked as soon as they are in: another version may have other sizes. */
#define SEC_HEAD_BYTES 6       /* magic "SGP1", version u16 */
#define SEC_MSG1_BYTES 74      /* magic, version, cluster id, initiator id, e_I */
#define SEC_MSG2_BYTES 42      /* magic, version, responder id, e_R */
#define SEC_HEADER_BYTES 24    /* secretstream header */
#define SEC_ABYTES 17          /* secretstream overhead per frame */
#define SEC_AUTH_BYTES 36      /* msgpack [0, bin32 transcript hash] */
#define SEC_AUTH_FRAME_BYTES (4 + SEC_AUTH_BYTES + SEC_ABYTES)
/* The most sec_hs_produce ever returns at once: the initiator's first message
 * and its AUTH flight, should the caller consume the reply before producing. */
#define SEC_HS_OUT_MAX (SEC_MSG1_BYTES + SEC_CRED_BYTES + SEC_HEADER_BYTES + SEC_AUTH_FRAME_BYTES)

/* Frames: u32 length, then that many ciphertext bytes (plaintext + 17). A
 * message longer than one frame's plaintext travels in several, each but
 * the last sealed with SEC_TAG_MORE (WIRE.md "Frames"), so no frame is
 * longer than a piece, whatever the model's size: a frame is opened on the
 * loop in a millisecond, and a connection's buffers stay a few MB. */
#define SEC_FRAME_MIN SEC_ABYTES
#define SEC_PIECE_MAX ((size_t)1 << 20) /* plaintext bytes of one frame */
#define SEC_FRAME_MAX (SEC_PIECE_MAX + SEC_ABYTES)

#define SEC_ANY_PEER UINT32_MAX

/* A peer admitted with a credential (WIRE.md "Joining") takes a vacant slot
 * of the cluster: its first message's id has SEC_JOIN_FLAG set and is
 * followed by the credential: flags u8 (bit 0: any id), serial u64, expires
 * i64 (Unix seconds, 0: never), its X25519 public key (32), the admission
 * key's Ed25519 signature (64). */
#define SEC_JOIN_FLAG 0x80000000u
/* A member that dials in (WIRE.md "Members": it listens somewhere else than
 * the cluster file says, so the others cannot dial it): its first message's
 * id has SEC_DIAL_IN_FLAG set, and a responder takes it from a higher id. */
#define SEC_DIAL_IN_FLAG 0x40000000u
#define SEC_CRED_BYTES (1 + 8 + 8 + SEC_KEY_BYTES + 64)

enum { SEC_INITIATOR = 1, SEC_RESPONDER = 2 };

/* ---- keys ------------------------------------------------------------------ */

typedef struct sec_keypair {
    uint8_t pk[SEC_KEY_BYTES];
    uint8_t *sk; /* SEC_KEY_BYTES of sodium_malloc memory, read-only once made */
} sec_keypair;

/* 0, or -EIO when libsodium cannot initialise. Every sec_ function that needs
 * libsodium calls it; it is idempotent and thread-safe. */
int sec_init(void);

/* A fresh long-term key pair. 0, -ENOMEM or -EIO. */
int sec_keypair_generate(sec_keypair *kp);

/* Wipes and releases the secret key; safe on a zeroed struct. */
void sec_keypair_free(sec_keypair *kp);

/* ---- sessions -------------------------------------------------------------- */

struct sec_secret; /* sodium_malloc: ephemeral key, key schedule, stream states */

typedef struct sec_session {
    struct sec_secret *st;
    uint32_t peer_id;   /* authenticated by the handshake */
    size_t max_frame;   /* ciphertext limit of one frame, SEC_FRAME_MIN..SEC_FRAME_MAX (default the latter) */
    int err;            /* sticky: once a frame fails, every call fails */
    uint64_t sent, received;
} sec_session;

/* ---- handshake ------------------------------------------------------------- */

/* The public key the cluster lists for id: 0, or -ENOENT when there is none. */
typedef int (*sec_lookup_fn)(void *ctx, uint32_t id, uint8_t pk[SEC_KEY_BYTES]);
/* A responder's check of a joiner's credential for the id it claims (its
 * first message, SEC_JOIN_FLAG): 0 and the key it admits in pk, or a
 * negative errno and why (one line, into why). */
typedef int (*sec_admit_fn)(void *ctx, uint32_t id, const uint8_t cred[SEC_CRED_BYTES], uint8_t pk[SEC_KEY_BYTES],
                            char *why, size_t whylen);

typedef struct sec_hs {
    int role, stage, err;
    uint32_t my_id, peer_id;
    const sec_keypair *me; /* borrowed: must outlive the handshake */
    sec_lookup_fn lookup;
    void *lookup_ctx;
    uint8_t cluster_id[SEC_CLUSTER_ID_BYTES];
    uint8_t peer_pk[SEC_KEY_BYTES];
    uint8_t e_pk[SEC_KEY_BYTES];
    sec_admit_fn admit;    /* responder: joiners' credentials (NULL: none is taken) */
    void *admit_ctx;
    int joining;           /* a credential goes with (initiator) or came with (responder) the first message */
    int dial_in;           /* SEC_DIAL_IN_FLAG: set in (initiator) or read from (responder) the first message */
    uint8_t transcript[SEC_MSG1_BYTES + SEC_MSG2_BYTES + SEC_CRED_BYTES]; /* the credential last, if any */
    uint8_t in[SEC_CRED_BYTES]; /* the part of the current message received so far */
    size_t have;
    uint8_t out[SEC_HS_OUT_MAX];
    size_t out_len;
    int got_auth;
    struct sec_secret *sec;
    char msg[160]; /* why it failed, one line */
} sec_hs;

/* Start a handshake. role: SEC_INITIATOR (we dialled) or SEC_RESPONDER (we
 * accepted). peer_id: for an initiator the id we dialled, which must be
 * greater than my_id (the lower id dials: WIRE.md "Connections"); for a
 * responder SEC_ANY_PEER or the one id to accept. lookup gives the cluster's
 * public key of an id. cluster_id: cluster_id() of our cluster file. The
 * initiator's first message is ready for sec_hs_produce at once.
 * 0, -EINVAL, -ENOENT (initiator: peer_id not in the cluster), -ENOMEM, -EIO. */
int sec_hs_init(sec_hs *hs, int role, uint32_t my_id, uint32_t peer_id, const sec_keypair *me, sec_lookup_fn lookup,
                void *lookup_ctx, const uint8_t cluster_id[SEC_CLUSTER_ID_BYTES]);

/* A joiner dials (WIRE.md "Joining"): as sec_hs_init for an initiator, with
 * its credential after its first message and any peer_id but its own (it
 * dials every neighbour: none knows its address). */
int sec_hs_init_join(sec_hs *hs, uint32_t my_id, uint32_t peer_id, const sec_keypair *me, sec_lookup_fn lookup,
                     void *lookup_ctx, const uint8_t cluster_id[SEC_CLUSTER_ID_BYTES],
                     const uint8_t cred[SEC_CRED_BYTES]);
/* A member that dials in (SEC_DIAL_IN_FLAG: its address is not the file's)
 * dials any peer_id but its own, as sec_hs_init for an initiator. */
int sec_hs_init_dial_in(sec_hs *hs, uint32_t my_id, uint32_t peer_id, const sec_keypair *me, sec_lookup_fn lookup,
                        void *lookup_ctx, const uint8_t cluster_id[SEC_CLUSTER_ID_BYTES]);
/* A responder takes joiners whose credential admit accepts (before any
 * input). 0 or -EINVAL. */
int sec_hs_set_admit(sec_hs *hs, sec_admit_fn admit, void *ctx);

/* Copies the bytes to send now into out and returns how many (0: nothing
 * until more input), -ENOBUFS if cap cannot hold them (SEC_HS_OUT_MAX
 * always can), or the handshake's error. */
int sec_hs_produce(sec_hs *hs, uint8_t *out, size_t cap);

/* Takes received bytes, any split. Returns how many it used (fewer than len
 * once the handshake needs no more input: the rest are frames), or an error:
 * -EPROTO (wrong magic, cluster, peer id, a dial from the higher id, a bad
 * key), -EPROTONOSUPPORT (another protocol version, decided from the first
 * SEC_HEAD_BYTES of the peer's message; hs->msg names both versions),
 * -EBADMSG (the peer's AUTH frame fails authentication: it does not hold the
 * secret key of the id it claims, or the bytes were tampered with or
 * replayed). hs->msg says which. */
int sec_hs_consume(sec_hs *hs, const uint8_t *in, size_t len);

/* The one answer a refusal has (WIRE.md "Handshake", Limits): after a
 * responder refused a first message for its version, copies our magic and
 * version (SEC_HEAD_BYTES) into out and returns SEC_HEAD_BYTES, once; the
 * transport sends them and then closes, so the dialler can name both
 * versions and wait longer before it dials again. 0 after any other outcome
 * (every other refusal is a silent close), -ENOBUFS if cap is too small. */
int sec_hs_refusal(sec_hs *hs, uint8_t *out, size_t cap);

/* Bytes the handshake needs before it can progress (0 when it needs none). */
size_t sec_hs_want(const sec_hs *hs);

/* 1 when both AUTH frames are through: ours produced, the peer's verified. */
int sec_hs_done(const sec_hs *hs);

/* Move the keys into s and free the handshake. 0, -EAGAIN if not done, or the
 * handshake's error. */
int sec_hs_finish(sec_hs *hs, sec_session *s);

/* Wipes and releases; safe on a zeroed struct and after sec_hs_finish. */
void sec_hs_free(sec_hs *hs);

/* ---- frames ---------------------------------------------------------------- */

/* Lower the frame limit (WIRE.md MAX_FRAME for the cluster's model). 0 or -EINVAL. */
int sec_session_set_max(sec_session *s, size_t max_frame);

/* Bytes sec_seal writes for len bytes of plaintext. */
static inline size_t sec_seal_bound(size_t len) { return 4 + len + SEC_ABYTES; }

/* Where a frame's plaintext lies when it is sealed or opened in place: after
 * the length prefix and the stream's one tag byte. A whole model (a MODEL, a
 * SYNC: hundreds of MB) is then written once, into the frame itself, and
 * read where it arrived: no second copy of it per connection. */
#define SEC_PT_OFFSET 5

/* Encrypt one message into one frame: [u32 length][ciphertext]. pt may lie at
 * out + SEC_PT_OFFSET (sealed in place: the same frame); any other overlap is
 * refused (-EINVAL). Returns the frame size, -EMSGSIZE (len + 17 >
 * max_frame), -ENOBUFS (cap too small), -EINVAL, or the session's sticky
 * error. */
int sec_seal(sec_session *s, const void *pt, size_t len, uint8_t *out, size_t cap);
/* The same for one piece of a message in several frames: more = 1 for every
 * piece but the last (the stream's tag says so, authenticated). */
int sec_seal_piece(sec_session *s, const void *pt, size_t len, uint8_t *out, size_t cap, int more);

/* Decrypt one whole frame (exactly the sec_frame_need bytes). out may be in +
 * SEC_PT_OFFSET (opened in place; cap: len - SEC_PT_OFFSET); any other
 * overlap is refused (-EINVAL). Returns the plaintext length, or -EBADMSG
 * (authentication failed: tampered, replayed, reordered, truncated, trailing
 * bytes: nothing is decrypted then), -EMSGSIZE (length prefix over
 * max_frame), -EPROTO (not a plain message tag), -ENOBUFS (cap too small: the
 * only error that leaves the session usable). Nothing is allocated. */
int sec_open(sec_session *s, const uint8_t *in, size_t len, uint8_t *out, size_t cap);
/* The same for a frame that may be a piece of a longer message: *more = 1
 * when the message goes on in the next frame, 0 when this frame ends it
 * (sec_open refuses the former: -EPROTO). */
int sec_open_piece(sec_session *s, const uint8_t *in, size_t len, uint8_t *out, size_t cap, int *more);

/* For reading frames off a stream: the total size (prefix included) of the
 * frame at buf, given the first `have` bytes of it, or 4 while the prefix is
 * incomplete. Wait until have >= the result. -EMSGSIZE when the prefix exceeds
 * max (capped at SEC_FRAME_MAX), -EBADMSG when it is below 17: decided from
 * the 4 prefix bytes alone, before anything is read or allocated. */
int sec_frame_need(const uint8_t *buf, size_t have, size_t max);

/* Wipes and releases; safe on a zeroed struct. */
void sec_session_free(sec_session *s);

#endif
