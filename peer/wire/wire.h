/* The message layer of the sgp wire (peer/wire/WIRE.md, "Messages"): plaintext
 * msgpack bytes in and out. No sockets, no crypto, no allocation.
 *
 *   // sending: one buffer, sized once, holds any message this peer sends
 *   size_t cap = wire_push_bound(dim, codec ? cmp_bound(codec, dim) : 0);
 *   uint8_t *buf = malloc(cap);
 *   long len = wire_encode_push(buf, cap, &msgs[k]);     // a gsp_msg from gsp_emit
 *   ... encrypt buf[0 .. len) into a frame ...
 *
 *   // receiving: decode a view of the plaintext, then copy tensors out aligned
 *   void *scratch = malloc(wire_push_scratch_bound(dim)); // sized once
 *   wire_msg m;
 *   wire_err e;
 *   if (wire_decode(&m, plain, plain_len, &e) < 0) {
 *       fprintf(stderr, "peer %d: malformed message at byte %zu: %s: %s\n", peer, e.offset, e.field, e.why);
 *       ... close the connection ...
 *   }
 *   if (m.type == WIRE_PUSH) {
 *       if (m.push.dim != dim) ... protocol error ...
 *       gsp_msg g;
 *       wire_push_to_gsp(&m, &g, scratch, wire_push_scratch_bound(dim));
 *       g.src = peer, g.dst = self;                       // the connection knows them
 *       gsp_absorb(&gsp, &g);
 *   }
 *
 * Encoding uses msgpack-c's packer writing into the caller's buffer; decoding
 * uses a bounded reader of our own that understands only the msgpack types
 * the schema uses, because msgpack-c's unpacker allocates according to counts
 * it reads from the input. A decoded message is a view: its byte fields point
 * into the input, which must outlive it. Tensor bytes inside a msgpack buffer
 * are unaligned and little-endian, so RAW and SYNC tensors reach gossip/ only
 * through wire_push_to_gsp's copy; a DELTA payload is bytes that compress/
 * reads in place.
 *
 * Every message the encoder produces is one the decoder accepts: both run the
 * same schema checks, and the encoder refuses (-EINVAL) what a peer would
 * reject, so a local bug surfaces here and not as a dropped connection at the
 * other end.
 */
#ifndef PEER_WIRE_WIRE_H
#define PEER_WIRE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "gossip/gsp.h"

/* The one version of everything WIRE.md specifies: handshake, frames and
 * messages. The handshake sends it and refuses a peer that sends another
 * (sec_hs.c), so peers that would misread each other's messages never get
 * as far as a message. Bump it with any change to WIRE.md that a peer of the
 * previous version would misread. */
#define SGP_PROTOCOL_VERSION 12

/* Largest dim a message may declare: a SYNC's positions are uint32 below
 * dim. A message longer than a frame travels in several (WIRE.md "Frames")
 * and a payload's length is a uint, not a msgpack bin's, so nothing else
 * caps a model's size on the wire. */
#define WIRE_MAX_DIM ((size_t)UINT32_MAX)
/* GOODBYE reason, bytes of UTF-8. */
#define WIRE_REASON_MAX 128
/* AUTH: BLAKE2b-256 of the handshake transcript. */
#define WIRE_HASH_LEN 32
/* Largest encoding of a PUSH without its payload bytes: array header, type,
 * round, seq, incarnation (uint64 each at worst), kind, w_total (float64),
 * gain, step (float32), origin, base, dim and the payload's length (uint64). */
#define WIRE_PUSH_HEADER_MAX 85
/* Largest encoding of any message but a PUSH or a MODEL (AUTH, NACK, ACK,
 * HEARTBEAT, ...): a GOODBYE with the longest reason (fixarray, type, str8
 * header, the reason). */
#define WIRE_CONTROL_MAX (1 + 1 + 2 + WIRE_REASON_MAX)

/* MEMBERS (WIRE.md "Members"): what a peer knows of where members listen,
 * at most WIRE_MEMBERS_MAX entries and WIRE_REVOKED_MAX revocations a
 * message (a longer list goes in several). */
#define WIRE_MEMBERS_MAX 16
#define WIRE_REVOKED_MAX 16
#define WIRE_HOST_MAX 253       /* an address as text (CLUSTER.md's host) */
#define WIRE_CRED_LEN 113       /* a joiner's credential (SEC_CRED_BYTES, WIRE.md "Joining") */
#define WIRE_SIG_LEN 64         /* a revocation's Ed25519 signature */
#define WIRE_MEMBER_DIALS_IN 1u /* flags bit 0: it dials every neighbour (nobody else may know its address) */
/* The longest MEMBERS: fixarray, type, two array16 headers, and the longest
 * entry ([id uint16, since uint64, host str8, port uint16, flags, cred bin8])
 * and revocation ([serial uint64, sig bin8]) as often as allowed. */
#define WIRE_MEMBER_ENTRY_MAX (1 + 3 + 9 + 2 + WIRE_HOST_MAX + 3 + 1 + 2 + WIRE_CRED_LEN)
#define WIRE_REVOCATION_MAX (1 + 9 + 2 + WIRE_SIG_LEN)
#define WIRE_MEMBERS_BYTES_MAX                                                                                   \
    (1 + 1 + 3 + WIRE_MEMBERS_MAX * WIRE_MEMBER_ENTRY_MAX + 3 + WIRE_REVOKED_MAX * WIRE_REVOCATION_MAX)

typedef enum wire_type {
    WIRE_AUTH = 0,
    WIRE_PUSH = 1,
    WIRE_NACK = 2,
    WIRE_HEARTBEAT = 3,
    WIRE_GOODBYE = 4,
    WIRE_MODEL_REQUEST = 5,
    WIRE_MODEL = 6,
    WIRE_ACK = 7,
    WIRE_MODEL_SOON = 8,
    WIRE_MEMBERS = 9,
} wire_type;

/* One entry of a MEMBERS: member `id` listens at host:port, as its process
 * that started at `since` (microseconds of its wall clock: its incarnation)
 * announced; a joiner's entry carries its credential (NULL otherwise). */
typedef struct wire_member {
    uint32_t id;
    uint64_t since;
    const char *host; /* host_len bytes, NOT NUL-terminated: an IPv4 or IPv6 literal */
    size_t host_len;
    uint16_t port;
    unsigned flags;      /* WIRE_MEMBER_DIALS_IN */
    const uint8_t *cred; /* WIRE_CRED_LEN bytes or NULL */
} wire_member;

/* A revocation of the credential with `serial`, signed by the admission key
 * (peer/config/credential.h `revocation`). */
typedef struct wire_revocation {
    uint64_t serial;
    const uint8_t *sig; /* WIRE_SIG_LEN bytes */
} wire_revocation;

/* A PUSH as it travels. payload is the one bin of the message: RAW = dim
 * float64, SYNC = dim float64 then dim float32 (both little-endian, and not
 * aligned when decoded: use wire_push_to_gsp), DELTA = a compress/ message. */
typedef struct wire_push {
    long round;
    uint64_t seq;
    uint64_t incarnation;
    gsp_kind kind;
    double w_total;
    float gain, step;
    uint64_t origin; /* DELTA with seq 1: the reference the edge started from (gsp_msg.origin) */
    uint64_t base;   /* SYNC: the seq its corrections start after (gsp_msg.base); 0 otherwise */
    size_t dim;
    const uint8_t *payload;
    size_t payload_len;
} wire_push;

typedef struct wire_msg {
    wire_type type;
    union {
        struct {
            const uint8_t *hash; /* WIRE_HASH_LEN bytes */
        } auth;
        wire_push push;
        struct {
            uint64_t seq; /* the receiver holds the edge's messages up to seq, in order (0: none):
                           * the base of the SYNC it asks for */
        } nack;
        struct {
            long round;
        } heartbeat;
        struct {
            uint64_t seq; /* the receiver holds the edge's messages up to seq, in order */
        } ack;
        struct {
            const char *reason; /* len bytes of UTF-8, NOT NUL-terminated */
            size_t len;
        } goodbye;
        struct {
            size_t dim; /* the asker's model size: the answer must match it */
        } model_request;
        struct {
            long round; /* the answerer's round: the MODEL follows when its local steps of it are done */
        } model_soon;
        struct {
            long round;           /* the round the asker enters at */
            size_t dim;
            const uint8_t *hash;  /* WIRE_HASH_LEN bytes: BLAKE2b-256 of payload */
            const uint8_t *payload; /* 4 * dim bytes: the model z, float32 little-endian */
        } model;
        struct {
            uint32_t n, n_revoked;
            wire_member m[WIRE_MEMBERS_MAX];
            wire_revocation r[WIRE_REVOKED_MAX];
        } members;
    };
} wire_msg;

/* Where and why a decode failed: offset of the msgpack item at fault, the
 * field ("seq", "array", ...) and a short reason. Static strings. */
typedef struct wire_err {
    size_t offset;
    const char *field;
    const char *why;
} wire_err;

/* Bytes that hold any message a peer with vectors of dim values sends, given
 * that its DELTA payloads are at most payload_len bytes (cmp_bound of its
 * codec; 0 without one). Covers every other message type too (a MODEL
 * of dim values is smaller than a SYNC).
 * Returns 0 if dim > WIRE_MAX_DIM (such a message cannot be encoded). */
size_t wire_push_bound(size_t dim, size_t payload_len);

/* MAX_FRAME of WIRE.md ("Frames"): the most ciphertext bytes a frame may
 * carry in a cluster whose model has dim values and whose DELTA payloads are
 * at most delta_bound bytes (cmp_bound of the run's codec for dim values; 0
 * without one): the largest message (wire_push_bound) plus the 17 bytes of
 * secretstream overhead, never more than SEC_FRAME_MAX (peer/wire/sec.h: a
 * longer message travels in pieces). Both directions of a session use it,
 * so a sender cannot seal a frame its receiver of the same run would
 * refuse. 0 if dim > WIRE_MAX_DIM (no such message can be encoded). */
size_t wire_frame_max(size_t dim, size_t delta_bound);

/* Scratch bytes wire_push_to_gsp needs for a PUSH of dim values (any kind;
 * includes slack to align the caller's pointer). 0 if dim > WIRE_MAX_DIM. */
size_t wire_push_scratch_bound(size_t dim);

/* Encoders: write one message into out[0 .. cap) and return its length,
 * -ENOSPC if it does not fit (out then holds garbage up to cap), or -EINVAL
 * if the message breaks the schema (nothing written). */
long wire_encode_auth(uint8_t *out, size_t cap, const uint8_t hash[WIRE_HASH_LEN]);
/* m->src and m->dst are not sent (the connection implies them). RAW needs
 * x_total, SYNC x_total and ref, DELTA payload (payload_len >= 1); gain and
 * step travel for every kind (gossip/ sets them to 0 for RAW and SYNC). */
long wire_encode_push(uint8_t *out, size_t cap, const gsp_msg *m);
long wire_encode_nack(uint8_t *out, size_t cap, uint64_t seq);
long wire_encode_heartbeat(uint8_t *out, size_t cap, long round);
long wire_encode_ack(uint8_t *out, size_t cap, uint64_t seq);
long wire_encode_goodbye(uint8_t *out, size_t cap, const char *reason, size_t len);
long wire_encode_model_request(uint8_t *out, size_t cap, size_t dim);
long wire_encode_model_soon(uint8_t *out, size_t cap, long round);
/* The model z (dim floats, host order) and the BLAKE2b-256 of its
 * little-endian bytes, which the caller computes (wire/ does no crypto). */
long wire_encode_model(uint8_t *out, size_t cap, long round, const float *z, size_t dim,
                       const uint8_t hash[WIRE_HASH_LEN]);
/* The same with z[i] = x[i] * scale written as it is encoded (a peer's
 * z = x / w, made nowhere else). */
long wire_encode_model_scaled(uint8_t *out, size_t cap, long round, const float *x, float scale, size_t dim,
                              const uint8_t hash[WIRE_HASH_LEN]);
/* m's n entries (n <= WIRE_MEMBERS_MAX, hosts IPv4 or IPv6 literals, ports
 * above 0, ids below 65536, flags known) and n_revoked revocations. */
long wire_encode_members(uint8_t *out, size_t cap, const wire_member *m, size_t n, const wire_revocation *r,
                         size_t n_revoked);
/* Any decoded (or hand-built) message; a PUSH payload is copied as bytes. */
long wire_encode(uint8_t *out, size_t cap, const wire_msg *m);

/* Decode exactly one message from buf[0 .. len). Returns 0, -EBADMSG (the
 * bytes are not a valid message of this SGP_PROTOCOL_VERSION; *m is zeroed
 * and err, if not NULL, says where), or -EINVAL (NULL m, or NULL buf with len > 0). Never reads
 * outside buf, never allocates, and costs O(len) at most (O(1) past the
 * header for PUSH: tensor bytes are not looked at). */
int wire_decode(wire_msg *m, const uint8_t *buf, size_t len, wire_err *err);

/* The head of a MODEL from the first len bytes of its message (the rest
 * may be still to come): m->model's round, dim and hash (pointing into
 * buf; payload NULL), and the payload's offset, whose length is 4 * dim.
 * -EBADMSG where the bytes are no MODEL's head or len does not reach the
 * payload (wire_decode of the whole message says why), -EINVAL for NULL. */
long wire_model_head(wire_msg *m, const uint8_t *buf, size_t len);

/* A decoded PUSH as a gsp_msg: RAW/SYNC tensors are copied into scratch
 * (aligned, host byte order), a DELTA payload points into the decoded buffer.
 * out->src and out->dst are set to -1: the caller fills them in. Returns 0,
 * -EINVAL (not a PUSH, or one that breaks the schema), or -ENOSPC (scratch_len
 * < what this message needs; wire_push_scratch_bound(dim) always suffices). */
int wire_push_to_gsp(const wire_msg *m, gsp_msg *out, void *scratch, size_t scratch_len);

/* The same for a RAW or SYNC of dim >= 1 without a second buffer: its tensors
 * are moved (and put in host byte order) inside the buffer it was decoded
 * from, towards `base` (that buffer's start or any 8-aligned address in it
 * before the payload), where they then lie aligned: a whole model's message
 * taken in without a copy. The decoded view m is spent (its payload bytes
 * are overwritten). 0 or -EINVAL (a DELTA, dim 0, a bad base, or not a PUSH
 * that keeps the schema). */
int wire_push_in_place(const wire_msg *m, gsp_msg *out, uint8_t *base);

/* "AUTH", "PUSH", ... or "?" for logs. */
const char *wire_type_name(int type);

#endif
