/* Keys in memory and the handshake (peer/wire/WIRE.md "Keys", "Handshake").
 * libsodium does the cryptography; this file decides what is hashed, in
 * which order, and what is refused. The input is untrusted: every length is
 * checked before use, nothing is allocated according to a length read from
 * the wire, and every secret is wiped as soon as it has been used. Key files
 * are peer/config/keyfile.c's; frames are sec_frame.c's. */
#include <errno.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "peer/wire/sec.h"
#include "peer/wire/sec_secret.h"
#include "peer/wire/wire.h"

_Static_assert(SEC_KEY_BYTES == crypto_kx_PUBLICKEYBYTES && SEC_KEY_BYTES == crypto_kx_SECRETKEYBYTES &&
                   SEC_KEY_BYTES == crypto_scalarmult_BYTES && SEC_KEY_BYTES == crypto_scalarmult_SCALARBYTES,
               "kx keys are X25519 keys");
_Static_assert(SEC_HEADER_BYTES == crypto_secretstream_xchacha20poly1305_HEADERBYTES, "stream header");
_Static_assert(SEC_ABYTES == crypto_secretstream_xchacha20poly1305_ABYTES, "stream overhead");

static const uint8_t MAGIC[4] = {'S', 'G', 'P', '1'};
/* crypto_generichash wants a key of at least 16 bytes; this one is exactly 16. */
static const char KDF_KEY[] = "sgp-v1 handshake";
_Static_assert(sizeof KDF_KEY - 1 == crypto_generichash_KEYBYTES_MIN, "KDF key length");

_Static_assert(SEC_CRED_BYTES == 113 && SEC_CRED_BYTES >= SEC_MSG1_BYTES, "a credential's bytes (WIRE.md)");

enum { ST_DONE = 0, ST_MSG1, ST_CRED, ST_MSG2, ST_HEADER, ST_LEN, ST_AUTH };

static const size_t STAGE_BYTES[] = {
    [ST_DONE] = 0,
    [ST_MSG1] = SEC_MSG1_BYTES,
    [ST_CRED] = SEC_CRED_BYTES,
    [ST_MSG2] = SEC_MSG2_BYTES,
    [ST_HEADER] = SEC_HEADER_BYTES,
    [ST_LEN] = 4,
    [ST_AUTH] = SEC_AUTH_BYTES + SEC_ABYTES,
};

/* Magic and version: what every version's first message and answer open
 * with (WIRE.md "Handshake"). */
static void hs_head(uint8_t *o)
{
    memcpy(o, MAGIC, 4);
    sec_put_u16(o + 4, SGP_PROTOCOL_VERSION);
}

/* Flights 1 and 2 up to e_R, and a joiner's credential. */
static size_t transcript_len(const sec_hs *hs)
{
    return SEC_MSG1_BYTES + SEC_MSG2_BYTES + (hs->joining ? SEC_CRED_BYTES : 0);
}

int sec_init(void) { return sodium_init() < 0 ? -EIO : 0; }

/* ---- keys ------------------------------------------------------------------ */

int sec_keypair_generate(sec_keypair *kp)
{
    if (!kp)
        return -EINVAL;
    memset(kp, 0, sizeof *kp);
    if (sec_init() < 0)
        return -EIO;
    if (!(kp->sk = sodium_malloc(SEC_KEY_BYTES)))
        return -ENOMEM;
    crypto_kx_keypair(kp->pk, kp->sk);
    sodium_mprotect_readonly(kp->sk);
    return 0;
}

void sec_keypair_free(sec_keypair *kp)
{
    if (!kp)
        return;
    sodium_free(kp->sk); /* wipes; fine on read-only memory and on NULL */
    memset(kp, 0, sizeof *kp);
}

static int hs_fail(sec_hs *hs, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int hs_fail(sec_hs *hs, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(hs->msg, sizeof hs->msg, fmt, ap);
    va_end(ap);
    hs->err = rc;
    hs->out_len = 0;
    sodium_free(hs->sec); /* nothing secret outlives a failed handshake */
    hs->sec = NULL;
    return rc;
}

static int hs_start(sec_hs *hs, int role, uint32_t my_id, uint32_t peer_id, const sec_keypair *me,
                    sec_lookup_fn lookup, void *lookup_ctx, const uint8_t cluster_id[SEC_CLUSTER_ID_BYTES],
                    const uint8_t *cred, int dial_in)
{
    if (!hs)
        return -EINVAL;
    memset(hs, 0, sizeof *hs);
    if (!me || !me->sk || !lookup || !cluster_id || (role != SEC_INITIATOR && role != SEC_RESPONDER) ||
        my_id == SEC_ANY_PEER || (my_id & (SEC_JOIN_FLAG | SEC_DIAL_IN_FLAG)) || peer_id == my_id ||
        (role == SEC_INITIATOR && peer_id <= my_id && !cred && !dial_in) ||
        (role == SEC_INITIATOR && peer_id == SEC_ANY_PEER))
        return hs_fail(hs, -EINVAL, "bad handshake parameters");
    if (sec_init() < 0)
        return hs_fail(hs, -EIO, "cannot initialise libsodium");
    hs->role = role, hs->my_id = my_id, hs->peer_id = peer_id, hs->me = me;
    hs->lookup = lookup, hs->lookup_ctx = lookup_ctx;
    memcpy(hs->cluster_id, cluster_id, SEC_CLUSTER_ID_BYTES);
    if (!(hs->sec = sodium_malloc(SEC_SECRET_SIZE)))
        return hs_fail(hs, -ENOMEM, "out of memory");
    sodium_memzero(hs->sec, SEC_SECRET_SIZE);
    crypto_kx_keypair(hs->e_pk, hs->sec->e_sk); /* fresh for every connection */
    if (role == SEC_RESPONDER) {
        hs->stage = ST_MSG1;
        return 0;
    }
    if (lookup(lookup_ctx, peer_id, hs->peer_pk) < 0)
        return hs_fail(hs, -ENOENT, "peer %u is not in the cluster", (unsigned)peer_id);
    uint8_t *m = hs->out;
    hs_head(m);
    memcpy(m + 6, cluster_id, SEC_CLUSTER_ID_BYTES);
    hs->dial_in = dial_in;
    sec_put_u32(m + 38, my_id | (cred ? SEC_JOIN_FLAG : dial_in ? SEC_DIAL_IN_FLAG : 0)); /* (a joiner dials in) */
    memcpy(m + 42, hs->e_pk, SEC_KEY_BYTES);
    memcpy(hs->transcript, m, SEC_MSG1_BYTES);
    hs->out_len = SEC_MSG1_BYTES;
    if (cred) { /* (the credential follows the first message, and goes last into the transcript) */
        hs->joining = 1;
        memcpy(m + SEC_MSG1_BYTES, cred, SEC_CRED_BYTES);
        memcpy(hs->transcript + SEC_MSG1_BYTES + SEC_MSG2_BYTES, cred, SEC_CRED_BYTES);
        hs->out_len += SEC_CRED_BYTES;
    }
    hs->stage = ST_MSG2;
    return 0;
}

int sec_hs_init(sec_hs *hs, int role, uint32_t my_id, uint32_t peer_id, const sec_keypair *me, sec_lookup_fn lookup,
                void *lookup_ctx, const uint8_t cluster_id[SEC_CLUSTER_ID_BYTES])
{
    return hs_start(hs, role, my_id, peer_id, me, lookup, lookup_ctx, cluster_id, NULL, 0);
}

int sec_hs_init_dial_in(sec_hs *hs, uint32_t my_id, uint32_t peer_id, const sec_keypair *me, sec_lookup_fn lookup,
                        void *lookup_ctx, const uint8_t cluster_id[SEC_CLUSTER_ID_BYTES])
{
    return hs_start(hs, SEC_INITIATOR, my_id, peer_id, me, lookup, lookup_ctx, cluster_id, NULL, 1);
}

int sec_hs_init_join(sec_hs *hs, uint32_t my_id, uint32_t peer_id, const sec_keypair *me, sec_lookup_fn lookup,
                     void *lookup_ctx, const uint8_t cluster_id[SEC_CLUSTER_ID_BYTES],
                     const uint8_t cred[SEC_CRED_BYTES])
{
    if (!cred) {
        if (hs)
            memset(hs, 0, sizeof *hs);
        return hs ? hs_fail(hs, -EINVAL, "bad handshake parameters") : -EINVAL;
    }
    return hs_start(hs, SEC_INITIATOR, my_id, peer_id, me, lookup, lookup_ctx, cluster_id, cred, 1);
}

int sec_hs_set_admit(sec_hs *hs, sec_admit_fn admit, void *ctx)
{
    if (!hs || hs->err || hs->role != SEC_RESPONDER || hs->stage != ST_MSG1 || hs->have)
        return -EINVAL;
    hs->admit = admit, hs->admit_ctx = ctx;
    return 0;
}

/* msgpack [0, bin32 BLAKE2b-256(transcript)]: the AUTH message, the same both
 * ways (the keys differ by direction, so it cannot be reflected). */
static void auth_plaintext(const sec_hs *hs, uint8_t out[SEC_AUTH_BYTES])
{
    out[0] = 0x92, out[1] = 0x00, out[2] = 0xc4, out[3] = 0x20;
    crypto_generichash(out + 4, 32, hs->transcript, transcript_len(hs), NULL, 0);
}

/* Both transcript messages are known and the peer's ephemeral key is e_peer:
 * compute the three DH values, hash them with both static keys and the
 * transcript into the two direction keys, open our sending stream and queue
 * its header and our AUTH frame. */
static int hs_derive(sec_hs *hs, const uint8_t e_peer[SEC_KEY_BYTES])
{
    struct sec_secret *x = hs->sec;
    const int ini = hs->role == SEC_INITIATOR;
    const uint8_t *s_I = ini ? hs->me->pk : hs->peer_pk, *s_R = ini ? hs->peer_pk : hs->me->pk;
    int bad = 0;
    /* ee = DH(e_I, e_R); se = DH(s_I, e_R); es = DH(e_I, s_R), each computed
     * from whichever secret this side holds. crypto_scalarmult fails on an
     * all-zero result, i.e. a low-order point offered as a key. */
    bad |= crypto_scalarmult(x->dh[0], x->e_sk, e_peer);
    if (ini) {
        bad |= crypto_scalarmult(x->dh[1], hs->me->sk, e_peer);
        bad |= crypto_scalarmult(x->dh[2], x->e_sk, hs->peer_pk);
    } else {
        bad |= crypto_scalarmult(x->dh[1], x->e_sk, hs->peer_pk);
        bad |= crypto_scalarmult(x->dh[2], hs->me->sk, e_peer);
    }
    sodium_memzero(x->e_sk, sizeof x->e_sk);
    if (bad) {
        sodium_memzero(x->dh, sizeof x->dh);
        return hs_fail(hs, -EPROTO, "peer %u offered a low-order key", (unsigned)hs->peer_id);
    }
    crypto_generichash_init(&x->h, (const uint8_t *)KDF_KEY, sizeof KDF_KEY - 1, sizeof x->k);
    crypto_generichash_update(&x->h, x->dh[0], sizeof x->dh);
    crypto_generichash_update(&x->h, s_I, SEC_KEY_BYTES);
    crypto_generichash_update(&x->h, s_R, SEC_KEY_BYTES);
    crypto_generichash_update(&x->h, hs->transcript, transcript_len(hs));
    crypto_generichash_final(&x->h, x->k, sizeof x->k);
    sodium_memzero(x->dh, sizeof x->dh);
    sodium_memzero(&x->h, sizeof x->h);

    uint8_t *o = hs->out + hs->out_len;
    crypto_secretstream_xchacha20poly1305_init_push(&x->tx, o, ini ? x->k : x->k + 32);
    sodium_memzero(ini ? x->k : x->k + 32, 32); /* the receiving half stays until the peer's header */
    uint8_t auth[SEC_AUTH_BYTES];
    auth_plaintext(hs, auth);
    sec_put_u32(o + SEC_HEADER_BYTES, SEC_AUTH_BYTES + SEC_ABYTES);
    crypto_secretstream_xchacha20poly1305_push(&x->tx, o + SEC_HEADER_BYTES + 4, NULL, auth, sizeof auth, NULL, 0,
                                               crypto_secretstream_xchacha20poly1305_TAG_MESSAGE);
    hs->out_len += SEC_HEADER_BYTES + SEC_AUTH_FRAME_BYTES;
    return 0;
}

/* The first SEC_HEAD_BYTES of the peer's message, as soon as they are in:
 * a peer of another version may send messages of other sizes, so nothing
 * after them may be waited for, let alone read. */
static int hs_check_head(sec_hs *hs, const uint8_t *m)
{
    if (memcmp(m, MAGIC, 4) != 0)
        return hs_fail(hs, -EPROTO, "not an sgp peer (bad magic)");
    unsigned v = sec_get_u16(m + 4);
    if (v == SGP_PROTOCOL_VERSION)
        return 0;
    if (hs->role == SEC_INITIATOR)
        return hs_fail(hs, -EPROTONOSUPPORT, "peer %u speaks protocol version %u, this peer %d: refused",
                       (unsigned)hs->peer_id, v, SGP_PROTOCOL_VERSION);
    /* The claimed id lies beyond the head, where another version may put
     * something else: the transport names the address instead. */
    hs_fail(hs, -EPROTONOSUPPORT, "a peer speaks protocol version %u, this peer %d: refused", v,
            SGP_PROTOCOL_VERSION);
    /* The refusal's one answer (sec_hs_refusal): a version is no secret,
     * and without it the dialler could only redial every half second. */
    hs_head(hs->out);
    hs->out_len = SEC_HEAD_BYTES;
    return hs->err;
}

/* The responder's second flight, once it knows the initiator's key. */
static int hs_answer(sec_hs *hs)
{
    uint8_t *o = hs->out + hs->out_len;
    hs_head(o);
    sec_put_u32(o + 6, hs->my_id);
    memcpy(o + 10, hs->e_pk, SEC_KEY_BYTES);
    memcpy(hs->transcript + SEC_MSG1_BYTES, o, SEC_MSG2_BYTES);
    hs->out_len += SEC_MSG2_BYTES;
    int rc = hs_derive(hs, hs->transcript + 42); /* (e_I, from the first message) */
    if (rc < 0)
        return rc;
    hs->stage = ST_HEADER;
    return 0;
}

static int hs_msg1(sec_hs *hs)
{
    const uint8_t *m = hs->in; /* magic and version passed hs_check_head */
    if (memcmp(m + 6, hs->cluster_id, SEC_CLUSTER_ID_BYTES) != 0)
        return hs_fail(hs, -EPROTO, "cluster id differs: the peer's cluster file is not ours");
    const uint32_t claim = sec_get_u32(m + 38), id = claim & ~(SEC_JOIN_FLAG | SEC_DIAL_IN_FLAG);
    if (id == hs->my_id)
        return hs_fail(hs, -EPROTO, "peer claims our own id %u", (unsigned)id);
    if (hs->peer_id != SEC_ANY_PEER && id != hs->peer_id)
        return hs_fail(hs, -EPROTO, "expected peer %u, peer %u dialled", (unsigned)hs->peer_id, (unsigned)id);
    hs->peer_id = id;
    hs->dial_in = (claim & (SEC_JOIN_FLAG | SEC_DIAL_IN_FLAG)) != 0;
    memcpy(hs->transcript, m, SEC_MSG1_BYTES);
    if (claim & SEC_JOIN_FLAG) { /* its credential comes next: ST_CRED */
        if (!hs->admit)
            return hs_fail(hs, -EPROTO, "peer %u would join with a credential: this peer takes none",
                           (unsigned)id);
        hs->joining = 1;
        hs->stage = ST_CRED;
        return 0;
    }
    if (hs->lookup(hs->lookup_ctx, id, hs->peer_pk) < 0)
        return hs_fail(hs, -EPROTO, "peer %u is not in the cluster", (unsigned)id);
    if (id > hs->my_id && !hs->dial_in)
        return hs_fail(hs, -EPROTO, "peer %u dialled us (%u), but the lower id dials", (unsigned)id,
                       (unsigned)hs->my_id);
    return hs_answer(hs);
}

/* A joiner's credential: the admit function decides, and names its key. */
static int hs_cred(sec_hs *hs)
{
    char why[120] = "";
    if (hs->admit(hs->admit_ctx, hs->peer_id, hs->in, hs->peer_pk, why, sizeof why) < 0)
        return hs_fail(hs, -EACCES, "peer %u refused: %s", (unsigned)hs->peer_id, why[0] ? why : "its credential");
    memcpy(hs->transcript + SEC_MSG1_BYTES + SEC_MSG2_BYTES, hs->in, SEC_CRED_BYTES);
    return hs_answer(hs);
}

static int hs_msg2(sec_hs *hs)
{
    const uint8_t *m = hs->in; /* magic and version passed hs_check_head */
    int rc;
    uint32_t id = sec_get_u32(m + 6);
    if (id != hs->peer_id)
        return hs_fail(hs, -EPROTO, "dialled peer %u, but peer %u answered", (unsigned)hs->peer_id, (unsigned)id);
    memcpy(hs->transcript + SEC_MSG1_BYTES, m, SEC_MSG2_BYTES);
    if ((rc = hs_derive(hs, m + 10)) < 0)
        return rc;
    hs->stage = ST_HEADER;
    return 0;
}

static int hs_auth(sec_hs *hs)
{
    struct sec_secret *x = hs->sec;
    uint8_t got[SEC_AUTH_BYTES], want[SEC_AUTH_BYTES];
    unsigned char tag = 0;
    if (crypto_secretstream_xchacha20poly1305_pull(&x->rx, got, NULL, &tag, hs->in, SEC_AUTH_BYTES + SEC_ABYTES, NULL,
                                                   0) != 0)
        return hs_fail(hs, -EBADMSG,
                       "peer %u failed authentication: it does not hold the key the cluster lists for it, "
                       "or the handshake was tampered with",
                       (unsigned)hs->peer_id);
    auth_plaintext(hs, want);
    if (tag != crypto_secretstream_xchacha20poly1305_TAG_MESSAGE || sodium_memcmp(got, want, sizeof got) != 0)
        return hs_fail(hs, -EPROTO, "peer %u sent a malformed AUTH message", (unsigned)hs->peer_id);
    hs->got_auth = 1;
    hs->stage = ST_DONE;
    return 0;
}

/* One complete stage is in hs->in: act on it. */
static int hs_step(sec_hs *hs)
{
    struct sec_secret *x = hs->sec;
    switch (hs->stage) {
    case ST_MSG1:
        return hs_msg1(hs);
    case ST_CRED:
        return hs_cred(hs);
    case ST_MSG2:
        return hs_msg2(hs);
    case ST_HEADER: {
        const int ini = hs->role == SEC_INITIATOR;
        crypto_secretstream_xchacha20poly1305_init_pull(&x->rx, hs->in, ini ? x->k + 32 : x->k);
        sodium_memzero(x->k, sizeof x->k);
        hs->stage = ST_LEN;
        return 0;
    }
    case ST_LEN: {
        /* The AUTH frame has one possible size; anything else (a 4 GiB
         * length, say) ends the handshake here, before its bytes come. */
        uint32_t n = sec_get_u32(hs->in);
        if (n != SEC_AUTH_BYTES + SEC_ABYTES)
            return hs_fail(hs, -EPROTO, "peer %u: first frame of %u bytes is not an AUTH frame",
                           (unsigned)hs->peer_id, (unsigned)n);
        hs->stage = ST_AUTH;
        return 0;
    }
    case ST_AUTH:
        return hs_auth(hs);
    default:
        return hs_fail(hs, -EPROTO, "unexpected bytes");
    }
}

int sec_hs_consume(sec_hs *hs, const uint8_t *in, size_t len)
{
    if (!hs)
        return -EINVAL;
    if (hs->err)
        return hs->err;
    if (!hs->role || (!in && len))
        return -EINVAL;
    size_t used = 0;
    while (used < len && hs->stage != ST_DONE) {
        size_t need = STAGE_BYTES[hs->stage] - hs->have, take = len - used < need ? len - used : need;
        memcpy(hs->in + hs->have, in + used, take);
        const size_t had = hs->have;
        hs->have += take, used += take;
        if ((hs->stage == ST_MSG1 || hs->stage == ST_MSG2) && had < SEC_HEAD_BYTES && hs->have >= SEC_HEAD_BYTES) {
            int rc = hs_check_head(hs, hs->in);
            if (rc < 0)
                return rc;
        }
        if (hs->have < STAGE_BYTES[hs->stage])
            break;
        hs->have = 0;
        int rc = hs_step(hs);
        if (rc < 0)
            return rc;
    }
    return (int)used;
}

int sec_hs_produce(sec_hs *hs, uint8_t *out, size_t cap)
{
    if (!hs)
        return -EINVAL;
    if (hs->err)
        return hs->err;
    if (!hs->out_len)
        return 0;
    if (!out || cap < hs->out_len)
        return -ENOBUFS;
    int n = (int)hs->out_len;
    memcpy(out, hs->out, hs->out_len);
    hs->out_len = 0;
    return n;
}

int sec_hs_refusal(sec_hs *hs, uint8_t *out, size_t cap)
{
    /* Only hs_check_head leaves bytes to send on a failed handshake. */
    if (!hs || hs->err != -EPROTONOSUPPORT || !hs->out_len)
        return 0;
    if (!out || cap < hs->out_len)
        return -ENOBUFS;
    int n = (int)hs->out_len;
    memcpy(out, hs->out, hs->out_len);
    hs->out_len = 0;
    return n;
}

size_t sec_hs_want(const sec_hs *hs)
{
    if (!hs || hs->err || !hs->role)
        return 0;
    return STAGE_BYTES[hs->stage] - hs->have;
}

int sec_hs_done(const sec_hs *hs)
{
    return hs && !hs->err && hs->role && hs->stage == ST_DONE && hs->got_auth && hs->out_len == 0;
}

int sec_hs_finish(sec_hs *hs, sec_session *s)
{
    if (!hs || !s)
        return -EINVAL;
    memset(s, 0, sizeof *s);
    if (hs->err)
        return hs->err;
    if (!sec_hs_done(hs))
        return -EAGAIN;
    /* Only the two stream states are left in the block: the ephemeral key,
     * the DH values and the key schedule were wiped as they were used. */
    s->st = hs->sec;
    hs->sec = NULL;
    s->peer_id = hs->peer_id;
    s->max_frame = SEC_FRAME_MAX;
    sec_hs_free(hs);
    return 0;
}

void sec_hs_free(sec_hs *hs)
{
    if (!hs)
        return;
    sodium_free(hs->sec);
    sodium_memzero(hs, sizeof *hs);
}
