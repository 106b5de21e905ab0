/* Fuzz target for what a peer reads before and after authentication
 * (peer/wire/sec.h, WIRE.md "Handshake" and "Frames"): the handshake
 * messages a responder or an initiator takes from a stranger, and the frame
 * reader. Any bytes, in any split, must be taken or refused with a one-line
 * reason and never read out of bounds, leak or leave a secret behind; a
 * refusal for the version must be answered with our magic and version and
 * nothing else; bytes that did not come from a key holder never complete a
 * handshake or open a frame. Frames the target seals itself must read back
 * exactly up to a flipped bit and be refused from there on (the session dies).
 *
 * The first byte chooses what the rest is (low 2 bits) and how it is split
 * into reads (the other 6: 0 = one read, else reads of that many bytes):
 *   0  the initiator's bytes, to a responder (peer 1 of 3; it takes joiners in slot 2)
 *   1  the responder's reply, to an initiator (peer 0, dialling 1)
 *   2  a stream of frames, to a session (byte 1: its frame limit)
 *   3  messages to seal ([u8 length][bytes] ...), bytes 1-2 (u16 LE) the
 *      bit to flip in the sealed stream, then read back
 *
 *   make build/fuzz/fuzz_handshake && build/fuzz/fuzz_handshake tests/fuzz/corpus/handshake
 *   (make check replays tests/fuzz/corpus/handshake with build/fuzz-replay/fuzz_handshake)
 */
#include <errno.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/wire/sec.h"
#include "peer/wire/wire.h"
#include "tests/fuzz/fuzz_check.h"

#define NKEYS 3

static sec_keypair g_kp[NKEYS];
/* The cluster id the seeds were made with: 32 bytes of 0x42. */
static uint8_t g_cid[SEC_CLUSTER_ID_BYTES];

static int lookup(void *ctx, uint32_t id, uint8_t pk[SEC_KEY_BYTES])
{
    (void)ctx;
    if (id >= NKEYS)
        return -ENOENT;
    memcpy(pk, g_kp[id].pk, SEC_KEY_BYTES);
    return 0;
}

/* Fixed keys, so that a saved input means the same on every run (the
 * ephemeral keys are fresh all the same: nothing here can authenticate). */
static void setup(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    check(sec_init() == 0);
    for (int i = 0; i < NKEYS; i++) {
        uint8_t seed[crypto_kx_SEEDBYTES];
        memset(seed, 'k' + i, sizeof seed);
        g_kp[i].sk = sodium_malloc(SEC_KEY_BYTES);
        check(g_kp[i].sk);
        crypto_kx_seed_keypair(g_kp[i].pk, g_kp[i].sk, seed);
    }
    memset(g_cid, 0x42, sizeof g_cid);
}

/* The responder takes joiners (WIRE.md "Joining") for slot 2 whose
 * credential's flags byte is 0, with the key it carries, as a cluster with
 * a vacant slot 2 would: bytes from no key holder still never authenticate. */
static int admit(void *ctx, uint32_t id, const uint8_t cred[SEC_CRED_BYTES], uint8_t pk[SEC_KEY_BYTES], char *why,
                 size_t whylen)
{
    (void)ctx;
    if (id != 2 || cred[0] != 0) {
        snprintf(why, whylen, "not signed by this cluster's admission key");
        return -EPERM;
    }
    memcpy(pk, cred + 17, SEC_KEY_BYTES);
    return 0;
}

static void check_msg(const sec_hs *hs)
{
    size_t n = strnlen(hs->msg, sizeof hs->msg);
    check(n > 0 && n < sizeof hs->msg);
    check(!memchr(hs->msg, '\n', n));
}

/* Feed data to hs in reads of `split` bytes (0: one read); the bytes hs
 * sends go nowhere. Returns 0 or the handshake's error. */
static int feed(sec_hs *hs, const uint8_t *data, size_t len, size_t split)
{
    uint8_t out[SEC_HS_OUT_MAX];
    int rc = 0;
    for (size_t off = 0; off < len;) {
        size_t n = split && split < len - off ? split : len - off;
        int p = sec_hs_produce(hs, out, sizeof out);
        check(p >= 0 && p <= (int)sizeof out);
        int used = sec_hs_consume(hs, data + off, n);
        if (used < 0) {
            rc = used;
            break;
        }
        /* Fewer than offered only once the handshake needs no more, and
         * bytes from no key holder never get it that far. */
        check((size_t)used == n);
        off += n;
    }
    if (rc == 0)
        return 0;
    check(rc == -EPROTO || rc == -EPROTONOSUPPORT || rc == -EBADMSG || rc == -EACCES);
    check(hs->err == rc && !hs->sec); /* sticky, and no secret outlives it */
    check_msg(hs);
    check(sec_hs_consume(hs, data, len) == rc);
    check(sec_hs_produce(hs, out, sizeof out) == rc);
    check(sec_hs_want(hs) == 0);
    return rc;
}

static void fuzz_handshake(int role, const uint8_t *data, size_t len, size_t split)
{
    sec_hs hs;
    uint8_t out[SEC_HS_OUT_MAX];
    if (role == SEC_RESPONDER) {
        check(sec_hs_init(&hs, SEC_RESPONDER, 1, SEC_ANY_PEER, &g_kp[1], lookup, NULL, g_cid) == 0);
        check(sec_hs_set_admit(&hs, admit, NULL) == 0);
    } else {
        check(sec_hs_init(&hs, SEC_INITIATOR, 0, 1, &g_kp[0], lookup, NULL, g_cid) == 0);
        check(sec_hs_produce(&hs, out, sizeof out) == SEC_MSG1_BYTES);
    }
    int rc = feed(&hs, data, len, split);
    check(!sec_hs_done(&hs));
    /* Magic and version decide alone, from the first 6 bytes. */
    if (len >= SEC_HEAD_BYTES && memcmp(data, "SGP1", 4))
        check(rc == -EPROTO);
    else if (len >= SEC_HEAD_BYTES && ((unsigned)data[4] | (unsigned)data[5] << 8) != SGP_PROTOCOL_VERSION)
        check(rc == -EPROTONOSUPPORT);
    int r = sec_hs_refusal(&hs, out, sizeof out);
    if (rc == -EPROTONOSUPPORT) {
        /* Only magic and another version get here, from the first 6 bytes. */
        check(len >= SEC_HEAD_BYTES && !memcmp(data, "SGP1", 4));
        const unsigned v = (unsigned)data[4] | (unsigned)data[5] << 8;
        check(v != SGP_PROTOCOL_VERSION);
        char want[64];
        snprintf(want, sizeof want, "protocol version %u, this peer %d: refused", v, SGP_PROTOCOL_VERSION);
        check(strstr(hs.msg, want));
        if (role == SEC_RESPONDER) {
            const uint8_t ours[SEC_HEAD_BYTES] = {'S', 'G', 'P', '1', SGP_PROTOCOL_VERSION & 0xff,
                                                  SGP_PROTOCOL_VERSION >> 8};
            check(r == SEC_HEAD_BYTES && !memcmp(out, ours, SEC_HEAD_BYTES));
            check(sec_hs_refusal(&hs, out, sizeof out) == 0); /* once */
        } else {
            check(r == 0);
        }
    } else {
        check(r == 0); /* every other refusal is silent */
    }
    sec_session s;
    check(sec_hs_finish(&hs, &s) == (rc ? rc : -EAGAIN));
    sec_hs_free(&hs);
    sec_session_free(&s);
}

/* Two sessions that did the whole handshake: a sends, b receives. */
static void pair(sec_session *a, sec_session *b)
{
    sec_hs i, r;
    uint8_t buf[SEC_HS_OUT_MAX];
    check(sec_hs_init(&i, SEC_INITIATOR, 0, 2, &g_kp[0], lookup, NULL, g_cid) == 0);
    check(sec_hs_init(&r, SEC_RESPONDER, 2, SEC_ANY_PEER, &g_kp[2], lookup, NULL, g_cid) == 0);
    for (int turn = 0; turn < 4; turn++) {
        sec_hs *from = turn % 2 ? &r : &i, *to = turn % 2 ? &i : &r;
        int n = sec_hs_produce(from, buf, sizeof buf);
        check(n >= 0);
        if (n)
            check(sec_hs_consume(to, buf, (size_t)n) == n);
    }
    check(sec_hs_finish(&i, a) == 0 && sec_hs_finish(&r, b) == 0);
}

/* A frame limit from one byte: every small limit, then powers of two up to
 * the largest. */
static size_t limit_of(uint8_t b)
{
    if (b < 200)
        return SEC_FRAME_MIN + (size_t)b * 7;
    size_t max = (size_t)1 << (b - 200 + 8 < 31 ? b - 200 + 8 : 31);
    return max < SEC_FRAME_MAX ? max : SEC_FRAME_MAX;
}

/* Bytes from no key holder, read as frames: each length prefix is judged
 * from its 4 bytes, and no frame opens. */
static void fuzz_frames(const uint8_t *data, size_t len)
{
    if (len < 1)
        return;
    const size_t max = limit_of(data[0]);
    data++, len--;
    sec_session a, b;
    pair(&a, &b);
    check(sec_session_set_max(&b, max) == 0);
    const size_t lim = b.max_frame;
    int first_err = 0;
    for (size_t off = 0; off < len;) {
        const size_t have = len - off;
        int need = sec_frame_need(data + off, have, lim);
        if (have < 4) {
            check(need == 4);
            break;
        }
        uint32_t n = (uint32_t)data[off] | (uint32_t)data[off + 1] << 8 | (uint32_t)data[off + 2] << 16 |
                     (uint32_t)data[off + 3] << 24;
        check(n > lim ? need == -EMSGSIZE : n < SEC_FRAME_MIN ? need == -EBADMSG : need == (int)(4 + n));
        if (need < 0 || (size_t)need > have)
            break;
        uint8_t *out = malloc((size_t)need);
        check(out);
        int m = sec_open(&b, data + off, (size_t)need, out, (size_t)need);
        free(out);
        check(m < 0 && m != -ENOBUFS);
        check(!first_err || m == first_err); /* the session died at the first */
        first_err = m;
        off += (size_t)need;
    }
    sec_session_free(&a);
    sec_session_free(&b);
}

/* Messages sealed by a real session, one bit of the stream flipped: every
 * frame before the one holding the bit reads back exactly, and from there on
 * nothing opens (a flipped length prefix may also be refused from its 4
 * bytes, or make the reader wait for bytes that never come). */
static void fuzz_sealed(const uint8_t *data, size_t len)
{
    if (len < 2)
        return;
    const size_t flip = (size_t)data[0] | (size_t)data[1] << 8;
    data += 2, len -= 2;
    /* The messages: [u8 n][n bytes] ..., the last one cut short by the end. */
    size_t cap = 0, k = 0;
    for (size_t off = 0; off < len; off += 1 + (size_t)data[off])
        cap += sec_seal_bound(data[off]), k++;
    uint8_t *stream = malloc(cap + 1), *out = malloc(cap + 1);
    size_t *ends = malloc((k + 1) * sizeof *ends), *at = malloc((k + 1) * sizeof *at);
    size_t *mlen = malloc((k + 1) * sizeof *mlen);
    check(stream && out && ends && at && mlen);
    sec_session a, b;
    pair(&a, &b);
    size_t total = 0, f = 0;
    for (size_t off = 0; off < len; off += 1 + (size_t)data[off], f++) {
        const size_t n = len - off - 1 < data[off] ? len - off - 1 : data[off];
        int w = sec_seal(&a, data + off + 1, n, stream + total, cap - total);
        check(w == (int)sec_seal_bound(n));
        total += (size_t)w;
        ends[f] = total, at[f] = off + 1, mlen[f] = n;
    }
    size_t hit = k; /* the frame that holds the flipped bit */
    if (flip / 8 < total) {
        stream[flip / 8] ^= (uint8_t)(1u << (flip % 8));
        for (hit = 0; ends[hit] <= flip / 8; hit++)
            ;
    }
    size_t off = 0, ok = 0;
    for (f = 0; off < total; f++) {
        int need = sec_frame_need(stream + off, total - off, b.max_frame);
        if (f < hit) {
            check(need == (int)(ends[f] - off));
            int m = sec_open(&b, stream + off, (size_t)need, out, cap + 1);
            check(m == (int)mlen[f] && (!m || !memcmp(out, data + at[f], mlen[f])));
            ok++;
        } else {
            if (need < 0 || (size_t)need > total - off)
                break;
            check(sec_open(&b, stream + off, (size_t)need, out, cap + 1) == -EBADMSG);
        }
        off += (size_t)need;
    }
    check(ok == hit && b.received == hit);
    free(stream), free(out), free(ends), free(at), free(mlen);
    sec_session_free(&a);
    sec_session_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    if (size < 1)
        return 0;
    const int mode = data[0] & 3;
    const size_t split = data[0] >> 2;
    data++, size--;
    switch (mode) {
    case 0:
        fuzz_handshake(SEC_RESPONDER, data, size, split);
        break;
    case 1:
        fuzz_handshake(SEC_INITIATOR, data, size, split);
        break;
    case 2:
        fuzz_frames(data, size);
        break;
    case 3:
        fuzz_sealed(data, size);
        break;
    }
    return 0;
}
