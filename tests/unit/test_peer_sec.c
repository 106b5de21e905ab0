/* peer/wire/sec.h: the handshake between two in-memory parties, and
 * everything an attacker on the path (or a peer with the wrong key) can try
 * against it: impostors fail at AUTH, any altered byte of the handshake or of
 * a frame is refused, replayed/reordered/truncated frames and replayed whole
 * sessions fail, a 4 GiB length prefix is refused from its 4 bytes. Key files
 * and `sgp keygen` are tests/process/test_peer_keyfile.c's. */
#include "peer/wire/sec.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/cmp.h"
#include "peer/config/cluster.h"
#include "peer/wire/wire.h"

/* ---- fixture: four peers' keys, a cluster table ---------------------------- */

#define NPEERS 4

typedef struct table {
    int n;
    uint8_t pk[NPEERS][SEC_KEY_BYTES];
} table;

static int table_lookup(void *ctx, uint32_t id, uint8_t pk[SEC_KEY_BYTES])
{
    const table *t = ctx;
    if (id >= (uint32_t)t->n)
        return -ENOENT;
    memcpy(pk, t->pk[id], SEC_KEY_BYTES);
    return 0;
}

static sec_keypair g_kp[NPEERS];
static table g_tab;
static uint8_t g_cid[SEC_CLUSTER_ID_BYTES];

static void setup(void)
{
    g_tab.n = NPEERS;
    for (int i = 0; i < NPEERS; i++) {
        cr_assert_eq(sec_keypair_generate(&g_kp[i]), 0);
        memcpy(g_tab.pk[i], g_kp[i].pk, SEC_KEY_BYTES);
    }
    memset(g_cid, 0x42, sizeof g_cid);
}

static void teardown(void)
{
    for (int i = 0; i < NPEERS; i++)
        sec_keypair_free(&g_kp[i]);
}

TestSuite(peer_sec, .init = setup, .fini = teardown, .timeout = 120);

/* ---- helpers --------------------------------------------------------------- */

static void hs_start(sec_hs *i, sec_hs *r, uint32_t iid, uint32_t rid)
{
    cr_assert_eq(sec_hs_init(i, SEC_INITIATOR, iid, rid, &g_kp[iid], table_lookup, &g_tab, g_cid), 0, "%s", i->msg);
    cr_assert_eq(sec_hs_init(r, SEC_RESPONDER, rid, SEC_ANY_PEER, &g_kp[rid], table_lookup, &g_tab, g_cid), 0,
                 "%s", r->msg);
}

/* What crosses the wire: flight 0 is I's first message, 1 R's reply (msg2,
 * stream header, AUTH), 2 I's header and AUTH. A tamper hook may alter each
 * flight in transit; a log keeps a copy of what was sent. */
typedef void (*tamper_fn)(int flight, uint8_t *buf, size_t n, void *ctx);

typedef struct flights {
    uint8_t b[3][SEC_HS_OUT_MAX];
    size_t n[3];
} flights;

/* Runs the handshake to its end. Returns 0 or the first error, with *side
 * 0 (initiator) or 1 (responder) for whoever failed. */
static int pump(sec_hs *i, sec_hs *r, tamper_fn tamper, void *ctx, flights *log, int *side)
{
    uint8_t buf[SEC_HS_OUT_MAX];
    int flight = 0, dummy;
    if (!side)
        side = &dummy;
    for (int turn = 0; turn < 6 && flight < 3; turn++) {
        sec_hs *from = turn % 2 ? r : i, *to = turn % 2 ? i : r;
        int n = sec_hs_produce(from, buf, sizeof buf);
        if (n < 0) {
            *side = from == r;
            return n;
        }
        if (n == 0)
            continue;
        if (log) {
            memcpy(log->b[flight], buf, (size_t)n);
            log->n[flight] = (size_t)n;
        }
        if (tamper)
            tamper(flight, buf, (size_t)n, ctx);
        flight++;
        int used = sec_hs_consume(to, buf, (size_t)n);
        if (used < 0) {
            *side = to == r;
            return used;
        }
        cr_assert_eq(used, n, "the handshake takes whole flights");
    }
    return 0;
}

/* A complete handshake between peers iid (dialling) and rid: a and b are
 * their sessions. */
static void pair_ids(sec_session *a, sec_session *b, uint32_t iid, uint32_t rid)
{
    sec_hs i, r;
    hs_start(&i, &r, iid, rid);
    int side = -1, rc = pump(&i, &r, NULL, NULL, NULL, &side);
    cr_assert_eq(rc, 0, "side %d: %s", side, side ? r.msg : i.msg);
    cr_assert(sec_hs_done(&i) && sec_hs_done(&r));
    cr_assert_eq(sec_hs_finish(&i, a), 0);
    cr_assert_eq(sec_hs_finish(&r, b), 0);
}

static void pair(sec_session *a, sec_session *b) { pair_ids(a, b, 0, 1); }

typedef struct frame {
    uint8_t *b;
    size_t n;
} frame;

static frame seal(sec_session *s, const void *msg, size_t len)
{
    frame f = {malloc(sec_seal_bound(len)), 0};
    cr_assert_not_null(f.b);
    int n = sec_seal(s, msg, len, f.b, sec_seal_bound(len));
    cr_assert_eq(n, (int)sec_seal_bound(len), "seal: %d", n);
    f.n = (size_t)n;
    return f;
}

static int open_frame(sec_session *s, frame f, uint8_t *out, size_t cap) { return sec_open(s, f.b, f.n, out, cap); }

static void expect_open(sec_session *s, frame f, const void *msg, size_t len)
{
    uint8_t *out = malloc(len + 1);
    int n = open_frame(s, f, out, len + 1);
    cr_assert_eq(n, (int)len, "open: %d", n);
    cr_assert(len == 0 || memcmp(out, msg, len) == 0);
    free(out);
}

/* "SGP1" and the version, as every handshake message of any version opens. */
static const uint8_t *head(unsigned version)
{
    static uint8_t h[SEC_HEAD_BYTES];
    memcpy(h, "SGP1", 4);
    h[4] = (uint8_t)version, h[5] = (uint8_t)(version >> 8);
    return h;
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
    for (size_t k = 0; k < n; k++)
        b[k] = (uint8_t)(seed * 131 + k * 7 + (k >> 8));
}

/* ---- the handshake --------------------------------------------------------- */

Test(peer_sec, handshake_gives_sessions_whose_streams_interoperate)
{
    sec_hs i, r;
    hs_start(&i, &r, 0, 1);
    flights log;
    cr_assert_eq(sec_hs_want(&r), SEC_MSG1_BYTES);
    cr_assert_eq(pump(&i, &r, NULL, NULL, &log, NULL), 0, "%s / %s", i.msg, r.msg);
    cr_assert_eq(log.n[0], 74, "WIRE.md: step 1 is 74 bytes");
    cr_assert_eq(log.n[1], 42 + 24 + 57, "msg2, stream header, AUTH frame");
    cr_assert_eq(log.n[2], 24 + 57);
    cr_assert_eq(SGP_PROTOCOL_VERSION, 12, "WIRE.md's version");
    cr_assert_eq(memcmp(log.b[0], head(SGP_PROTOCOL_VERSION), 6), 0, "the one version constant goes out");
    cr_assert_eq(memcmp(log.b[0] + 6, g_cid, 32), 0);
    cr_assert_eq(memcmp(log.b[1], head(SGP_PROTOCOL_VERSION), 6), 0);
    cr_assert_eq(memcmp(log.b[1] + 6, "\x01\x00\x00\x00", 4), 0, "responder id 1, little-endian");
    cr_assert_eq(sec_hs_want(&i), 0);
    cr_assert_eq(sec_hs_want(&r), 0);
    sec_session a, b;
    cr_assert_eq(sec_hs_finish(&i, &a), 0);
    cr_assert_eq(sec_hs_finish(&r, &b), 0);
    cr_assert_eq(a.peer_id, 1);
    cr_assert_eq(b.peer_id, 0, "the responder learns who dialled, authenticated");
    cr_assert_null(i.sec, "finish frees the handshake");

    static const size_t sizes[] = {0, 1, 17, 1000, 100000};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        uint8_t *m = malloc(sizes[k] + 1);
        fill(m, sizes[k], (unsigned)k);
        frame f = seal(&a, m, sizes[k]);
        cr_assert_eq(f.n, 4 + sizes[k] + 17);
        expect_open(&b, f, m, sizes[k]);
        free(f.b);
        fill(m, sizes[k], (unsigned)k + 100);
        f = seal(&b, m, sizes[k]);
        expect_open(&a, f, m, sizes[k]);
        free(f.b);
        free(m);
    }
    cr_assert_eq(a.sent, 5);
    cr_assert_eq(b.received, 5);
    sec_session_free(&a);
    sec_session_free(&b);
    cr_assert_null(a.st);
}

Test(peer_sec, handshake_survives_any_split_and_hands_back_the_frames_behind_it)
{
    sec_hs i, r;
    hs_start(&i, &r, 1, 3);
    uint8_t b1[SEC_HS_OUT_MAX], b2[SEC_HS_OUT_MAX], b3[SEC_HS_OUT_MAX + 64];
    int n1 = sec_hs_produce(&i, b1, sizeof b1);
    cr_assert_eq(n1, SEC_MSG1_BYTES);
    cr_assert_eq(sec_hs_produce(&i, b1, sizeof b1), 0, "nothing more to say until the reply");
    for (int k = 0; k < n1; k++) {
        cr_assert_eq(sec_hs_want(&r), (size_t)(n1 - k));
        cr_assert_eq(sec_hs_produce(&r, b2, sizeof b2), 0);
        cr_assert_eq(sec_hs_consume(&r, b1 + k, 1), 1);
    }
    int n2 = sec_hs_produce(&r, b2, sizeof b2);
    cr_assert_eq(n2, SEC_MSG2_BYTES + SEC_HEADER_BYTES + SEC_AUTH_FRAME_BYTES);
    /* in uneven pieces */
    for (int k = 0; k < n2;) {
        int piece = k % 5 + 1 < n2 - k ? k % 5 + 1 : n2 - k;
        cr_assert_eq(sec_hs_consume(&i, b2 + k, (size_t)piece), piece);
        k += piece;
    }
    cr_assert_not(sec_hs_done(&i), "done only once its own AUTH has been taken");
    int n3 = sec_hs_produce(&i, b3, sizeof b3);
    cr_assert_eq(n3, SEC_HEADER_BYTES + SEC_AUTH_FRAME_BYTES);
    cr_assert(sec_hs_done(&i));
    sec_session a, b;
    cr_assert_eq(sec_hs_finish(&i, &a), 0);
    /* The initiator's first frame travels in the same segment as its AUTH. */
    const char msg[] = "first frame";
    int fn = sec_seal(&a, msg, sizeof msg, b3 + n3, sizeof b3 - (size_t)n3);
    cr_assert_gt(fn, 0);
    int used = sec_hs_consume(&r, b3, (size_t)(n3 + fn));
    cr_assert_eq(used, n3, "the handshake stops at its last byte");
    cr_assert_eq(sec_hs_finish(&r, &b), 0);
    cr_assert_eq(b.peer_id, 1);
    char out[64];
    cr_assert_eq(sec_frame_need(b3 + used, (size_t)fn, b.max_frame), fn);
    cr_assert_eq(sec_open(&b, b3 + used, (size_t)fn, (uint8_t *)out, sizeof out), (int)sizeof msg);
    cr_assert_str_eq(out, msg);
    sec_session_free(&a);
    sec_session_free(&b);
}

/* The strongest impostor of peer id: peer id's public key (everybody has
 * it), with a secret key that is not the one behind it. The struct borrows
 * mallory's secret; only mallory is freed. */
static void impostor_of(sec_keypair *fake, const sec_keypair *mallory, int id)
{
    fake->sk = mallory->sk;
    memcpy(fake->pk, g_kp[id].pk, SEC_KEY_BYTES);
}

Test(peer_sec, impostor_claiming_a_listed_id_is_rejected_at_auth)
{
    /* Mallory claims to be peer 0. She knows everything public, peer 0's
     * public key included, but holds another secret key. */
    sec_keypair mallory, fake;
    cr_assert_eq(sec_keypair_generate(&mallory), 0);
    impostor_of(&fake, &mallory, 0);
    sec_hs m, r;
    cr_assert_eq(sec_hs_init(&m, SEC_INITIATOR, 0, 1, &fake, table_lookup, &g_tab, g_cid), 0);
    cr_assert_eq(sec_hs_init(&r, SEC_RESPONDER, 1, SEC_ANY_PEER, &g_kp[1], table_lookup, &g_tab, g_cid), 0);
    uint8_t b1[SEC_HS_OUT_MAX], b2[SEC_HS_OUT_MAX], b3[SEC_HS_OUT_MAX + 256];
    int n1 = sec_hs_produce(&m, b1, sizeof b1);
    cr_assert_eq(sec_hs_consume(&r, b1, (size_t)n1), n1, "the first message carries no proof yet");
    int n2 = sec_hs_produce(&r, b2, sizeof b2);
    cr_assert_eq(n2, SEC_MSG2_BYTES + SEC_HEADER_BYTES + SEC_AUTH_FRAME_BYTES);
    /* She takes the reply's first message only, so that she still sends her
     * (wrongly keyed) AUTH, followed by what she would like accepted. */
    cr_assert_eq(sec_hs_consume(&m, b2, SEC_MSG2_BYTES), SEC_MSG2_BYTES);
    int n3 = sec_hs_produce(&m, b3, sizeof b3);
    cr_assert_eq(n3, SEC_HEADER_BYTES + SEC_AUTH_FRAME_BYTES);
    memset(b3 + n3, 0, 4 + 17 + 100);
    b3[n3] = 100 + 17;
    int rc = sec_hs_consume(&r, b3, (size_t)n3 + 4 + 17 + 100);
    cr_assert_eq(rc, -EBADMSG, "rc %d: %s", rc, r.msg);
    cr_assert(strstr(r.msg, "peer 0"), "%s", r.msg);
    cr_assert_not(sec_hs_done(&r));
    sec_session s;
    cr_assert_eq(sec_hs_finish(&r, &s), -EBADMSG, "no session, so no frame is ever accepted");
    cr_assert_null(s.st);
    cr_assert_eq(sec_hs_consume(&r, b3, 1), -EBADMSG, "failure is sticky");
    cr_assert_eq(sec_hs_produce(&r, b2, sizeof b2), -EBADMSG);
    cr_assert_null(r.sec, "secrets are wiped at the failure");
    /* Nor can she read the responder's AUTH. */
    cr_assert_eq(sec_hs_consume(&m, b2 + SEC_MSG2_BYTES, (size_t)n2 - SEC_MSG2_BYTES), -EBADMSG);
    sec_hs_free(&m);
    sec_hs_free(&r);
    sec_keypair_free(&mallory);
}

Test(peer_sec, impostor_answering_for_the_dialled_peer_is_rejected_at_auth)
{
    sec_keypair mallory, fake;
    cr_assert_eq(sec_keypair_generate(&mallory), 0);
    impostor_of(&fake, &mallory, 2);
    /* with peer 2's public key, and (naively) with her own */
    const sec_keypair *as[2] = {&fake, &mallory};
    for (int k = 0; k < 2; k++) {
        sec_hs i, m;
        cr_assert_eq(sec_hs_init(&i, SEC_INITIATOR, 0, 2, &g_kp[0], table_lookup, &g_tab, g_cid), 0);
        cr_assert_eq(sec_hs_init(&m, SEC_RESPONDER, 2, SEC_ANY_PEER, as[k], table_lookup, &g_tab, g_cid), 0);
        int side = -1, rc = pump(&i, &m, NULL, NULL, NULL, &side);
        cr_assert_eq(rc, -EBADMSG, "rc %d", rc);
        cr_assert_eq(side, 0, "the initiator catches it at the responder's AUTH");
        cr_assert(strstr(i.msg, "peer 2"), "%s", i.msg);
        cr_assert_not(sec_hs_done(&m), "and the impostor never completes either");
        sec_hs_free(&i);
        sec_hs_free(&m);
    }
    sec_keypair_free(&mallory);
}

/* Build a first message by hand from the initiator's, then alter it. */
static int respond_to(const uint8_t *msg1, uint32_t rid, const uint8_t *cid, sec_hs *r)
{
    cr_assert_eq(sec_hs_init(r, SEC_RESPONDER, rid, SEC_ANY_PEER, &g_kp[rid], table_lookup, &g_tab, cid), 0);
    return sec_hs_consume(r, msg1, SEC_MSG1_BYTES);
}

static void first_message(uint32_t iid, uint32_t rid, uint8_t msg1[SEC_MSG1_BYTES])
{
    sec_hs i;
    cr_assert_eq(sec_hs_init(&i, SEC_INITIATOR, iid, rid, &g_kp[iid], table_lookup, &g_tab, g_cid), 0);
    cr_assert_eq(sec_hs_produce(&i, msg1, SEC_HS_OUT_MAX), SEC_MSG1_BYTES);
    sec_hs_free(&i);
}

Test(peer_sec, wrong_magic_version_cluster_or_id_is_refused_at_the_first_message)
{
    uint8_t good[SEC_HS_OUT_MAX], m[SEC_MSG1_BYTES];
    sec_hs r;
    first_message(0, 1, good);
    cr_assert_eq(respond_to(good, 1, g_cid, &r), SEC_MSG1_BYTES, "%s", r.msg);
    sec_hs_free(&r);

    memcpy(m, good, sizeof m);
    m[0] = 'X';
    cr_assert_eq(respond_to(m, 1, g_cid, &r), -EPROTO);
    cr_assert(strstr(r.msg, "magic"), "%s", r.msg);
    cr_assert_eq(r.out_len, 0, "nothing is sent back");
    sec_hs_free(&r);

    memcpy(m, good, sizeof m);
    m[4] = 1; /* version 1: before PUSH carried an incarnation */
    cr_assert_eq(respond_to(m, 1, g_cid, &r), -EPROTONOSUPPORT);
    cr_assert(strstr(r.msg, "version 1"), "%s", r.msg);
    sec_hs_free(&r);

    uint8_t other[SEC_CLUSTER_ID_BYTES];
    memset(other, 0x43, sizeof other);
    cr_assert_eq(respond_to(good, 1, other, &r), -EPROTO);
    cr_assert(strstr(r.msg, "cluster"), "%s", r.msg);
    sec_hs_free(&r);

    memcpy(m, good, sizeof m);
    m[38] = 9; /* not in the cluster */
    cr_assert_eq(respond_to(m, 1, g_cid, &r), -EPROTO);
    cr_assert(strstr(r.msg, "not in the cluster"), "%s", r.msg);
    sec_hs_free(&r);

    memcpy(m, good, sizeof m);
    m[38] = 1; /* our own id */
    cr_assert_eq(respond_to(m, 1, g_cid, &r), -EPROTO);
    sec_hs_free(&r);

    first_message(0, 1, good);
    good[38] = 3; /* the higher id dialling */
    cr_assert_eq(respond_to(good, 1, g_cid, &r), -EPROTO);
    cr_assert(strstr(r.msg, "lower id dials"), "%s", r.msg);
    sec_hs_free(&r);

    /* a responder waiting for one peer only */
    first_message(0, 2, good);
    cr_assert_eq(sec_hs_init(&r, SEC_RESPONDER, 2, 1, &g_kp[2], table_lookup, &g_tab, g_cid), 0);
    cr_assert_eq(sec_hs_consume(&r, good, SEC_MSG1_BYTES), -EPROTO);
    sec_hs_free(&r);

    /* a low-order ephemeral key: DH gives zero, which would make the keys
     * independent of the ephemeral secrets */
    first_message(0, 1, good);
    memset(good + 42, 0, 32);
    cr_assert_eq(respond_to(good, 1, g_cid, &r), -EPROTO);
    cr_assert(strstr(r.msg, "low-order"), "%s", r.msg);
    sec_hs_free(&r);
}

/* WIRE.md "Handshake", Limits: a peer of another version is refused from
 * the first 6 bytes of its message (another version's messages may have
 * other sizes), with a message naming both versions; the responder's one
 * answer is our own magic and version, the initiator answers nothing. */
Test(peer_sec, another_version_is_refused_from_six_bytes_and_answered_with_ours)
{
    const unsigned others[] = {0, 1, 3, SGP_PROTOCOL_VERSION - 1, SGP_PROTOCOL_VERSION + 1, 0xffff}; /* (- 1: a peer of the last release) */
    char want[96];
    uint8_t out[SEC_HS_OUT_MAX];
    for (size_t k = 0; k < sizeof others / sizeof *others; k++) {
        const unsigned v = others[k];
        snprintf(want, sizeof want, "protocol version %u, this peer %d: refused", v, SGP_PROTOCOL_VERSION);
        /* responder: byte by byte, nothing is decided before the sixth */
        sec_hs r;
        cr_assert_eq(sec_hs_init(&r, SEC_RESPONDER, 1, SEC_ANY_PEER, &g_kp[1], table_lookup, &g_tab, g_cid), 0);
        uint8_t h[SEC_HEAD_BYTES];
        memcpy(h, head(v), sizeof h);
        for (int b = 0; b < SEC_HEAD_BYTES - 1; b++)
            cr_assert_eq(sec_hs_consume(&r, h + b, 1), 1, "version %u, byte %d", v, b);
        cr_assert_eq(sec_hs_refusal(&r, out, sizeof out), 0, "nothing before the version is in");
        cr_assert_eq(sec_hs_consume(&r, h + SEC_HEAD_BYTES - 1, 1), -EPROTONOSUPPORT, "version %u", v);
        cr_assert(strstr(r.msg, want), "version %u: %s", v, r.msg);
        cr_assert_eq(sec_hs_produce(&r, out, sizeof out), -EPROTONOSUPPORT, "sticky");
        cr_assert_eq(sec_hs_want(&r), 0);
        cr_assert_eq(sec_hs_refusal(&r, out, SEC_HEAD_BYTES - 1), -ENOBUFS);
        cr_assert_eq(sec_hs_refusal(&r, out, sizeof out), SEC_HEAD_BYTES);
        cr_assert_eq(memcmp(out, head(SGP_PROTOCOL_VERSION), SEC_HEAD_BYTES), 0, "our magic and version");
        cr_assert_eq(sec_hs_refusal(&r, out, sizeof out), 0, "once");
        cr_assert_null(r.sec, "no secret outlives the refusal");
        sec_hs_free(&r);

        /* initiator: the reply's head is enough */
        sec_hs i;
        cr_assert_eq(sec_hs_init(&i, SEC_INITIATOR, 0, 2, &g_kp[0], table_lookup, &g_tab, g_cid), 0);
        cr_assert_eq(sec_hs_produce(&i, out, sizeof out), SEC_MSG1_BYTES);
        cr_assert_eq(sec_hs_consume(&i, head(v), SEC_HEAD_BYTES), -EPROTONOSUPPORT, "version %u", v);
        snprintf(want, sizeof want, "peer 2 speaks protocol version %u, this peer %d: refused", v,
                 SGP_PROTOCOL_VERSION);
        cr_assert(strstr(i.msg, want), "%s", i.msg);
        cr_assert_eq(sec_hs_refusal(&i, out, sizeof out), 0, "the dialler answers nothing");
        cr_assert_not(sec_hs_done(&i));
        sec_hs_free(&i);
    }
    /* Another magic is no sgp peer: no answer at all. */
    sec_hs r;
    cr_assert_eq(sec_hs_init(&r, SEC_RESPONDER, 1, SEC_ANY_PEER, &g_kp[1], table_lookup, &g_tab, g_cid), 0);
    cr_assert_eq(sec_hs_consume(&r, (const uint8_t *)"SSH-2.", 6), -EPROTO);
    cr_assert_eq(sec_hs_refusal(&r, out, sizeof out), 0);
    sec_hs_free(&r);
}

Test(peer_sec, wrong_magic_version_or_id_in_the_reply_is_refused)
{
    for (int what = 0; what < 3; what++) {
        sec_hs i, r;
        hs_start(&i, &r, 0, 1);
        uint8_t b1[SEC_HS_OUT_MAX], b2[SEC_HS_OUT_MAX];
        int n1 = sec_hs_produce(&i, b1, sizeof b1);
        cr_assert_eq(sec_hs_consume(&r, b1, (size_t)n1), n1);
        cr_assert_gt(sec_hs_produce(&r, b2, sizeof b2), 0);
        int want = -EPROTO;
        if (what == 0)
            b2[3] = '2';
        else if (what == 1)
            b2[5] = 1, want = -EPROTONOSUPPORT;
        else
            b2[6] = 2; /* another peer answered */
        cr_assert_eq(sec_hs_consume(&i, b2, SEC_MSG2_BYTES), want, "case %d: %s", what, i.msg);
        sec_hs_free(&i);
        sec_hs_free(&r);
    }
}

typedef struct flip {
    int flight;
    size_t pos;
} flip;

static void tamper_flip(int flight, uint8_t *buf, size_t n, void *ctx)
{
    const flip *f = ctx;
    if (flight == f->flight && f->pos < n)
        buf[f->pos] ^= (uint8_t)(1u << (f->pos % 8));
}

Test(peer_sec, any_altered_handshake_byte_stops_the_handshake)
{
    static const size_t len[3] = {SEC_MSG1_BYTES, SEC_MSG2_BYTES + SEC_HEADER_BYTES + SEC_AUTH_FRAME_BYTES,
                                  SEC_HEADER_BYTES + SEC_AUTH_FRAME_BYTES};
    for (int fl = 0; fl < 3; fl++)
        for (size_t pos = 0; pos < len[fl]; pos++) {
            sec_hs i, r;
            hs_start(&i, &r, 0, 1);
            flip f = {fl, pos};
            int rc = pump(&i, &r, tamper_flip, &f, NULL, NULL);
            cr_assert_lt(rc, 0, "flight %d byte %zu: accepted", fl, pos);
            cr_assert_not(sec_hs_done(&r), "flight %d byte %zu: the responder completed", fl, pos);
            /* The initiator sends its AUTH last, so only an alteration of
             * that last flight can leave it believing it is done; the
             * responder then refuses every frame it sends. */
            if (fl < 2)
                cr_assert_not(sec_hs_done(&i), "flight %d byte %zu: the initiator completed", fl, pos);
            sec_hs_free(&i);
            sec_hs_free(&r);
        }
}

Test(peer_sec, huge_auth_length_is_refused_from_its_four_bytes)
{
    sec_hs i, r;
    hs_start(&i, &r, 0, 1);
    uint8_t b1[SEC_HS_OUT_MAX], b2[SEC_HS_OUT_MAX];
    int n1 = sec_hs_produce(&i, b1, sizeof b1);
    cr_assert_eq(sec_hs_consume(&r, b1, (size_t)n1), n1);
    cr_assert_gt(sec_hs_produce(&r, b2, sizeof b2), 0);
    memset(b2 + SEC_MSG2_BYTES + SEC_HEADER_BYTES, 0xff, 4);
    /* only up to the prefix has arrived: no waiting for 4 GiB */
    int rc = sec_hs_consume(&i, b2, SEC_MSG2_BYTES + SEC_HEADER_BYTES + 4);
    cr_assert_eq(rc, -EPROTO, "rc %d", rc);
    cr_assert(strstr(i.msg, "4294967295"), "%s", i.msg);
    sec_hs_free(&i);
    sec_hs_free(&r);
}

static void tamper_record(int flight, uint8_t *buf, size_t n, void *ctx)
{
    flights *rec = ctx;
    memcpy(rec->b[flight], buf, n);
    rec->n[flight] = n;
}

Test(peer_sec, recorded_session_replayed_to_a_fresh_responder_fails)
{
    flights rec;
    sec_hs i, r;
    hs_start(&i, &r, 0, 1);
    cr_assert_eq(pump(&i, &r, tamper_record, &rec, NULL, NULL), 0);
    sec_session a, b;
    cr_assert_eq(sec_hs_finish(&i, &a), 0);
    cr_assert_eq(sec_hs_finish(&r, &b), 0);
    frame f = seal(&a, "train", 5);
    expect_open(&b, f, "train", 5);

    /* The same bytes from the initiator, to a new responder with the same
     * long-term key: its ephemeral key is new, so are the keys. */
    sec_hs r2;
    cr_assert_eq(sec_hs_init(&r2, SEC_RESPONDER, 1, SEC_ANY_PEER, &g_kp[1], table_lookup, &g_tab, g_cid), 0);
    cr_assert_eq(sec_hs_consume(&r2, rec.b[0], rec.n[0]), (int)rec.n[0]);
    uint8_t reply[SEC_HS_OUT_MAX];
    cr_assert_eq(sec_hs_produce(&r2, reply, sizeof reply), (int)rec.n[1]);
    cr_assert_neq(memcmp(reply + 10, rec.b[1] + 10, 32), 0, "a fresh ephemeral key");
    cr_assert_eq(sec_hs_consume(&r2, rec.b[2], rec.n[2]), -EBADMSG, "%s", r2.msg);
    sec_hs_free(&r2);

    /* And the responder's recorded bytes to a new initiator. */
    sec_hs i2;
    cr_assert_eq(sec_hs_init(&i2, SEC_INITIATOR, 0, 1, &g_kp[0], table_lookup, &g_tab, g_cid), 0);
    uint8_t first[SEC_HS_OUT_MAX];
    cr_assert_eq(sec_hs_produce(&i2, first, sizeof first), SEC_MSG1_BYTES);
    cr_assert_neq(memcmp(first + 42, rec.b[0] + 42, 32), 0);
    cr_assert_eq(sec_hs_consume(&i2, rec.b[1], rec.n[1]), -EBADMSG);
    sec_hs_free(&i2);

    /* Two sessions between the same peers share no keys. */
    sec_session a2, b2;
    pair(&a2, &b2);
    uint8_t out[16];
    cr_assert_eq(sec_open(&b2, f.b, f.n, out, sizeof out), -EBADMSG);
    free(f.b);
    sec_session_free(&a);
    sec_session_free(&b);
    sec_session_free(&a2);
    sec_session_free(&b2);
}

Test(peer_sec, cluster_lookup_and_cluster_id)
{
    /* The same handshake over a real cluster table; a peer whose cluster
     * file lists a different key for anyone has another cluster id. */
    cluster c, d;
    cr_assert_eq(cluster_init(&c, "run", "exp4.topo"), 0);
    cr_assert_eq(cluster_init(&d, "run", "exp4.topo"), 0);
    for (int k = 0; k < NPEERS; k++) {
        char host[32];
        snprintf(host, sizeof host, "10.0.0.%d", k + 1);
        cr_assert_eq(cluster_add_peer(&c, host, 7000, g_kp[k].pk), k);
        cr_assert_eq(cluster_add_peer(&d, host, 7000, k == 3 ? g_kp[0].pk : g_kp[k].pk), k == 3 ? -EEXIST : k);
    }
    uint8_t mallory_pk[SEC_KEY_BYTES];
    memset(mallory_pk, 7, sizeof mallory_pk);
    cr_assert_eq(cluster_add_peer(&d, "10.0.0.4", 7000, mallory_pk), 3);
    uint8_t cid_c[SEC_CLUSTER_ID_BYTES], cid_d[SEC_CLUSTER_ID_BYTES], again[SEC_CLUSTER_ID_BYTES];
    cluster_id(&c, cid_c);
    cluster_id(&d, cid_d);
    cluster_id(&c, again);
    cr_assert_eq(memcmp(cid_c, again, sizeof again), 0);
    cr_assert_neq(memcmp(cid_c, cid_d, sizeof cid_d), 0);

    sec_hs i, r;
    cr_assert_eq(sec_hs_init(&i, SEC_INITIATOR, 2, 3, &g_kp[2], cluster_pubkey_lookup, &c, cid_c), 0);
    cr_assert_eq(sec_hs_init(&r, SEC_RESPONDER, 3, SEC_ANY_PEER, &g_kp[3], cluster_pubkey_lookup, &c, cid_c), 0);
    cr_assert_eq(pump(&i, &r, NULL, NULL, NULL, NULL), 0, "%s / %s", i.msg, r.msg);
    cr_assert(sec_hs_done(&i) && sec_hs_done(&r));
    sec_hs_free(&i);
    sec_hs_free(&r);

    cr_assert_eq(sec_hs_init(&i, SEC_INITIATOR, 2, 3, &g_kp[2], cluster_pubkey_lookup, &d, cid_d), 0);
    cr_assert_eq(sec_hs_init(&r, SEC_RESPONDER, 3, SEC_ANY_PEER, &g_kp[3], cluster_pubkey_lookup, &c, cid_c), 0);
    int side = -1;
    cr_assert_eq(pump(&i, &r, NULL, NULL, NULL, &side), -EPROTO);
    cr_assert_eq(side, 1);
    cr_assert(strstr(r.msg, "cluster id differs"), "%s", r.msg);
    sec_hs_free(&i);
    sec_hs_free(&r);

    cr_assert_eq(sec_hs_init(&i, SEC_INITIATOR, 0, 9, &g_kp[0], cluster_pubkey_lookup, &c, cid_c), -ENOENT);
    sec_hs_free(&i);
    cluster_free(&c);
    cluster_free(&d);
}

Test(peer_sec, bad_parameters_and_free_on_zeroed_structs)
{
    sec_hs h;
    cr_assert_eq(sec_hs_init(&h, SEC_INITIATOR, 1, 0, &g_kp[1], table_lookup, &g_tab, g_cid), -EINVAL,
                 "the higher id does not dial");
    cr_assert_eq(sec_hs_init(&h, SEC_INITIATOR, 1, 1, &g_kp[1], table_lookup, &g_tab, g_cid), -EINVAL);
    cr_assert_eq(sec_hs_init(&h, 7, 0, 1, &g_kp[0], table_lookup, &g_tab, g_cid), -EINVAL);
    sec_keypair none = {0};
    cr_assert_eq(sec_hs_init(&h, SEC_RESPONDER, 0, SEC_ANY_PEER, &none, table_lookup, &g_tab, g_cid), -EINVAL);
    cr_assert_eq(sec_hs_consume(&h, g_cid, 4), -EINVAL, "a failed init fails every later call");
    sec_hs_free(&h);
    cr_assert_eq(sec_hs_init(&h, SEC_INITIATOR, 0, 1, &g_kp[0], table_lookup, &g_tab, g_cid), 0);
    uint8_t small[8];
    cr_assert_eq(sec_hs_produce(&h, small, sizeof small), -ENOBUFS);
    sec_session s;
    cr_assert_eq(sec_hs_finish(&h, &s), -EAGAIN);
    sec_hs_free(&h);
    sec_hs_free(&h);

    sec_hs zh = {0};
    sec_session zs = {0};
    sec_keypair zk = {0};
    sec_hs_free(&zh);
    sec_session_free(&zs);
    sec_keypair_free(&zk);
    sec_hs_free(NULL);
    sec_session_free(NULL);
    sec_keypair_free(NULL);
    uint8_t buf[64];
    cr_assert_eq(sec_seal(&zs, "x", 1, buf, sizeof buf), -EINVAL);
    cr_assert_eq(sec_open(&zs, buf, 21, buf, sizeof buf), -EINVAL);
}

/* ---- frames ---------------------------------------------------------------- */

Test(peer_sec, any_flipped_bit_in_a_frame_is_refused)
{
    uint8_t msg[16], out[64];
    fill(msg, sizeof msg, 3);
    const size_t n = sec_seal_bound(sizeof msg);
    for (size_t bit = 0; bit < 8 * n; bit++) {
        sec_session a, b;
        pair(&a, &b);
        frame f = seal(&a, msg, sizeof msg);
        f.b[bit / 8] ^= (uint8_t)(1u << bit % 8);
        int rc = open_frame(&b, f, out, sizeof out);
        if (bit >= 32)
            cr_assert_eq(rc, -EBADMSG, "bit %zu: %d", bit, rc);
        else /* the length prefix: now too long, too short or over the limit */
            cr_assert(rc == -EBADMSG || rc == -EMSGSIZE, "bit %zu: %d", bit, rc);
        f.b[bit / 8] ^= (uint8_t)(1u << bit % 8);
        cr_assert_eq(open_frame(&b, f, out, sizeof out), rc, "bit %zu: the session stays closed", bit);
        free(f.b);
        sec_session_free(&a);
        sec_session_free(&b);
    }
}

Test(peer_sec, replayed_frame_is_refused)
{
    sec_session a, b;
    pair(&a, &b);
    frame f1 = seal(&a, "one", 3), f2 = seal(&a, "two", 3);
    expect_open(&b, f1, "one", 3);
    uint8_t out[16];
    cr_assert_eq(open_frame(&b, f1, out, sizeof out), -EBADMSG);
    cr_assert_eq(open_frame(&b, f2, out, sizeof out), -EBADMSG, "and nothing after it is accepted");
    cr_assert_eq(sec_seal(&b, "x", 1, out, sizeof out), -EBADMSG, "the whole session is closed");
    free(f1.b), free(f2.b);
    sec_session_free(&a);
    sec_session_free(&b);
}

Test(peer_sec, reordered_frame_is_refused)
{
    sec_session a, b;
    pair(&a, &b);
    frame f1 = seal(&a, "one", 3), f2 = seal(&a, "two", 3);
    uint8_t out[16];
    cr_assert_eq(open_frame(&b, f2, out, sizeof out), -EBADMSG);
    cr_assert_eq(open_frame(&b, f1, out, sizeof out), -EBADMSG);
    free(f1.b), free(f2.b);
    sec_session_free(&a);
    sec_session_free(&b);
}

Test(peer_sec, truncated_reflected_or_foreign_frame_is_refused)
{
    uint8_t out[64];
    for (int what = 0; what < 6; what++) {
        sec_session a, b, c, d;
        pair(&a, &b);
        pair_ids(&c, &d, 0, 1);
        frame f = seal(&a, "some plaintext", 14);
        int rc;
        switch (what) {
        case 0: /* last byte missing, prefix as sent */
            rc = sec_open(&b, f.b, f.n - 1, out, sizeof out);
            break;
        case 1: /* last byte missing, prefix made to match */
            f.b[0]--;
            rc = sec_open(&b, f.b, f.n - 1, out, sizeof out);
            break;
        case 2: /* a byte too many */
            f.b = realloc(f.b, f.n + 1);
            f.b[f.n] = 0;
            rc = sec_open(&b, f.b, f.n + 1, out, sizeof out);
            break;
        case 3: /* only the prefix */
            rc = sec_open(&b, f.b, 4, out, sizeof out);
            break;
        case 4: /* back to its sender: the directions have different keys */
            rc = sec_open(&a, f.b, f.n, out, sizeof out);
            break;
        default: /* into another session of the same two peers */
            rc = sec_open(&d, f.b, f.n, out, sizeof out);
            break;
        }
        cr_assert_eq(rc, -EBADMSG, "case %d: %d", what, rc);
        free(f.b);
        sec_session_free(&a);
        sec_session_free(&b);
        sec_session_free(&c);
        sec_session_free(&d);
    }
}

Test(peer_sec, huge_length_prefix_is_refused_at_once_without_allocating)
{
    sec_session a, b;
    pair(&a, &b);
    /* Exactly 4 bytes on the heap, so that a read past them is caught. */
    uint8_t *p = malloc(4), out[16];
    memset(p, 0xff, 4);
#ifndef __SANITIZE_ADDRESS__
    struct mallinfo2 before = mallinfo2();
#endif
    int need3 = sec_frame_need(p, 3, SEC_FRAME_MAX);
    int need = sec_frame_need(p, 4, SEC_FRAME_MAX);
    int need_big_max = sec_frame_need(p, 4, SIZE_MAX);
    int rc = sec_open(&b, p, 4, out, sizeof out);
#ifndef __SANITIZE_ADDRESS__
    struct mallinfo2 after = mallinfo2();
    cr_assert_eq(after.uordblks, before.uordblks, "nothing allocated");
#endif
    cr_assert_eq(need3, 4, "with 3 bytes, the prefix is still incomplete");
    cr_assert_eq(need, -EMSGSIZE);
    cr_assert_eq(need_big_max, -EMSGSIZE, "the cap is SEC_FRAME_MAX whatever the caller asks");
    cr_assert_eq(rc, -EMSGSIZE);

    uint8_t q[4];
    uint32_t v = SEC_FRAME_MAX;
    memcpy(q, &v, 4); /* little-endian host */
    cr_assert_eq(sec_frame_need(q, 4, SEC_FRAME_MAX), (int)(4 + SEC_FRAME_MAX));
    v = SEC_FRAME_MAX + 1;
    memcpy(q, &v, 4);
    cr_assert_eq(sec_frame_need(q, 4, SEC_FRAME_MAX), -EMSGSIZE);
    v = 16;
    memcpy(q, &v, 4);
    cr_assert_eq(sec_frame_need(q, 4, SEC_FRAME_MAX), -EBADMSG, "shorter than a tag");
    v = 17;
    memcpy(q, &v, 4);
    cr_assert_eq(sec_frame_need(q, 4, SEC_FRAME_MAX), 21);
    cr_assert_eq(sec_frame_need(q, 4, 16), -EINVAL);
    free(p);
    sec_session_free(&a);
    sec_session_free(&b);
}

/* A whole model goes into its frame once: sealed where it was encoded and
 * opened where it arrived (net_frame.c). Both ends mix the two forms here,
 * over a message of many ChaCha20 blocks and an empty one. */
Test(peer_sec, frames_seal_and_open_in_place_as_by_copy)
{
    sec_session a, b;
    pair(&a, &b);
    const size_t len = SEC_PIECE_MAX - 3;
    uint8_t *msg = malloc(len), *f1 = malloc(sec_seal_bound(len)), *f2 = malloc(sec_seal_bound(len)),
            *out = malloc(len);
    cr_assert(msg && f1 && f2 && out);
    fill(msg, len, 5);
    cr_assert_eq(sec_seal(&a, msg, len, f1, sec_seal_bound(len)), (int)sec_seal_bound(len), "by copy");
    memcpy(f2 + SEC_PT_OFFSET, msg, len);
    cr_assert_eq(sec_seal(&a, f2 + SEC_PT_OFFSET, len, f2, sec_seal_bound(len)), (int)sec_seal_bound(len), "in place");
    cr_assert_neq(memcmp(f2 + SEC_PT_OFFSET, msg, len), 0, "encrypted where it lay");
    cr_assert_eq(sec_open(&b, f1, sec_seal_bound(len), f1 + SEC_PT_OFFSET, len), (int)len, "the copy, opened in place");
    cr_assert_eq(memcmp(f1 + SEC_PT_OFFSET, msg, len), 0);
    cr_assert_eq(sec_open(&b, f2, sec_seal_bound(len), out, len), (int)len, "the one sealed in place, by copy");
    cr_assert_eq(memcmp(out, msg, len), 0);
    /* empty, in place both ways */
    uint8_t e[sizeof(uint32_t) + SEC_ABYTES];
    cr_assert_eq(sec_seal(&a, e + SEC_PT_OFFSET, 0, e, sizeof e), (int)sizeof e);
    cr_assert_eq(sec_open(&b, e, sizeof e, e + SEC_PT_OFFSET, 0), 0);
    /* a tampered frame opened in place: refused, its bytes left as they came */
    cr_assert_eq(sec_seal(&a, msg, len, f1, sec_seal_bound(len)), (int)sec_seal_bound(len));
    f1[sec_seal_bound(len) / 2] ^= 1;
    memcpy(f2, f1, sec_seal_bound(len));
    cr_assert_eq(sec_open(&b, f1, sec_seal_bound(len), f1 + SEC_PT_OFFSET, len), -EBADMSG);
    cr_assert_eq(memcmp(f1, f2, sec_seal_bound(len)), 0, "nothing decrypted before the MAC is checked");
    sec_session_free(&a);
    sec_session_free(&b);
    /* any other overlap reads what it has just written: refused */
    pair(&a, &b);
    cr_assert_eq(sec_seal(&a, f2 + 4, 100, f2, sec_seal_bound(100)), -EINVAL);
    cr_assert_eq(sec_seal(&a, f2 + 64, 100, f2, sec_seal_bound(100)), -EINVAL);
    cr_assert_eq(sec_seal(&a, msg, 100, f2, sec_seal_bound(100)), (int)sec_seal_bound(100), "the session is usable");
    cr_assert_eq(sec_open(&b, f2, sec_seal_bound(100), f2 + 2, 100), -EINVAL);
    cr_assert_eq(sec_open(&b, f2, sec_seal_bound(100), f2 + SEC_PT_OFFSET, 100), 100);
    cr_assert_eq(memcmp(f2 + SEC_PT_OFFSET, msg, 100), 0);
    free(msg), free(f1), free(f2), free(out);
    sec_session_free(&a);
    sec_session_free(&b);
}

/* WIRE.md "Frames": a message in pieces. Each piece's frame says, in its
 * authenticated tag, whether the message goes on; a frame that does is
 * refused where a whole message is expected (sec_open), and a tag turned
 * into the other fails authentication. */
Test(peer_sec, a_message_in_pieces_says_so_in_each_frame_s_tag)
{
    sec_session a, b;
    pair(&a, &b);
    uint8_t msg[300], buf[400], out[300];
    fill(msg, sizeof msg, 4);
    int n = sec_seal_piece(&a, msg, 100, buf, sizeof buf, 1);
    cr_assert_eq(n, 121);
    int more = -1;
    cr_assert_eq(sec_open_piece(&b, buf, (size_t)n, out, sizeof out, &more), 100);
    cr_assert_eq(more, 1, "the message goes on");
    n = sec_seal_piece(&a, msg + 100, 200, buf, sizeof buf, 0);
    cr_assert_eq(sec_open_piece(&b, buf, (size_t)n, out + 100, sizeof out - 100, &more), 200);
    cr_assert_eq(more, 0, "and ends here");
    cr_assert_eq(memcmp(out, msg, sizeof msg), 0);
    n = sec_seal_piece(&a, msg, 50, buf, sizeof buf, 1);
    cr_assert_eq(sec_open(&b, buf, (size_t)n, out, sizeof out), -EPROTO, "no piece where a message is expected");
    cr_assert_eq(sec_open(&b, buf, (size_t)n, out, sizeof out), -EPROTO, "and the session has ended");
    sec_session_free(&a);
    sec_session_free(&b);
    /* The tag byte is encrypted and under the MAC: flipping it does not
     * make a last piece of a continued one. */
    pair(&a, &b);
    n = sec_seal_piece(&a, msg, 50, buf, sizeof buf, 0);
    buf[4] ^= 1; /* (crypto_secretstream_xchacha20poly1305_TAG_MESSAGE ^ 1 is its TAG_PUSH) */
    cr_assert_eq(sec_open_piece(&b, buf, (size_t)n, out, sizeof out, &more), -EBADMSG);
    sec_session_free(&a);
    sec_session_free(&b);
}

Test(peer_sec, frame_limits_and_small_buffers)
{
    sec_session a, b;
    pair(&a, &b);
    cr_assert_eq(sec_session_set_max(&a, 16), -EINVAL);
    cr_assert_eq(sec_session_set_max(&a, (size_t)SEC_FRAME_MAX + 1), -EINVAL);
    cr_assert_eq(sec_session_set_max(&a, 117), 0);
    cr_assert_eq(sec_session_set_max(&b, 117), 0);
    uint8_t msg[200], buf[300], out[200];
    fill(msg, sizeof msg, 9);
    cr_assert_eq(sec_seal(&a, msg, 101, buf, sizeof buf), -EMSGSIZE);
    cr_assert_eq(sec_seal(&a, msg, 100, buf, 120), -ENOBUFS);
    int n = sec_seal(&a, msg, 100, buf, sizeof buf);
    cr_assert_eq(n, 121, "the limit counts ciphertext: 100 + 17");
    cr_assert_eq(sec_open(&b, buf, (size_t)n, out, 99), -ENOBUFS);
    cr_assert_eq(sec_open(&b, buf, (size_t)n, out, 100), 100, "a small buffer leaves the session usable");
    cr_assert_eq(memcmp(out, msg, 100), 0);
    /* a frame over the receiver's limit, from a sender with a larger one */
    cr_assert_eq(sec_session_set_max(&a, 1000), 0);
    n = sec_seal(&a, msg, 150, buf, sizeof buf);
    cr_assert_eq(n, 171);
    cr_assert_eq(sec_frame_need(buf, 4, b.max_frame), -EMSGSIZE);
    cr_assert_eq(sec_open(&b, buf, (size_t)n, out, sizeof out), -EMSGSIZE);
    sec_session_free(&a);
    sec_session_free(&b);
}

/* WIRE.md "Frames": MAX_MESSAGE = max(7416, 85 + max(12 dim + 4, D)), D the
 * codec's cmp_bound (0 without one), and MAX_FRAME = 17 + min(MAX_MESSAGE,
 * 2^20); wire_push_bound and wire_frame_max are those numbers, and a
 * session with the latter takes a frame of exactly that many ciphertext
 * bytes and refuses one byte more. */
static size_t page_max_message(size_t dim, size_t d)
{
    size_t body = 12 * dim + 4 > d ? 12 * dim + 4 : d;
    return 85 + body > 7416 ? 85 + body : 7416;
}

static size_t page_max_frame(size_t dim, size_t d)
{
    const size_t msg = page_max_message(dim, d);
    return 17 + (msg < ((size_t)1 << 20) ? msg : (size_t)1 << 20);
}

Test(peer_sec, the_frame_limit_is_the_page_s_formula_and_holds_to_the_byte)
{
    cr_assert_eq(WIRE_MEMBERS_BYTES_MAX, 7416, "the page's longest MEMBERS");
    const char *codecs[] = {NULL, "none", "stc:0.01", "qsgd:16", "sparseloco:64:4096", "sketch:0.01:0.5"};
    const size_t dims[] = {0, 1, 2, 5, 100, 7850, 1u << 20, WIRE_MAX_DIM};
    for (size_t c = 0; c < sizeof codecs / sizeof *codecs; c++)
        for (size_t k = 0; k < sizeof dims / sizeof *dims; k++) {
            size_t d = 0;
            if (codecs[c]) {
                cmp_spec s;
                char err[128];
                cr_assert_eq(cmp_spec_parse(&s, codecs[c], err, sizeof err), 0, "%s", err);
                d = cmp_bound(&s, dims[k]);
            }
            cr_assert_eq(wire_frame_max(dims[k], d), page_max_frame(dims[k], d), "dim %zu, %s", dims[k],
                         codecs[c] ? codecs[c] : "no codec");
            cr_assert_eq(wire_push_bound(dims[k], d), page_max_message(dims[k], d), "dim %zu, %s", dims[k],
                         codecs[c] ? codecs[c] : "no codec");
        }
    cr_assert_eq(wire_frame_max(7850, 0), 94306, "the page's example");
    cr_assert_eq(wire_push_bound(7850, 0), 94289, "the page's example");
    cr_assert_eq(wire_push_bound(100000000, 0), 1200000089, "the page's example");
    cr_assert_eq(wire_frame_max(100000000, 0), 1048593, "the page's example");
    cr_assert_eq(wire_frame_max(1, (size_t)UINT32_MAX), SEC_FRAME_MAX, "a frame carries at most a piece");
    cr_assert_eq(wire_frame_max(WIRE_MAX_DIM + 1, 0), 0, "no such message");

    /* At the limit and one byte past it, at both ends of a session. */
    sec_session a, b;
    pair(&a, &b);
    const size_t max = wire_frame_max(100, 0), len = max - SEC_ABYTES;
    cr_assert_eq(sec_session_set_max(&b, max), 0);
    uint8_t *msg = calloc(len + 1, 1), *buf = malloc(sec_seal_bound(len + 1)), *out = malloc(len + 1);
    fill(msg, len + 1, 3);
    int n = sec_seal(&a, msg, len, buf, sec_seal_bound(len));
    cr_assert_eq(n, (int)(4 + max));
    cr_assert_eq(sec_frame_need(buf, 4, b.max_frame), (int)(4 + max));
    cr_assert_eq(sec_open(&b, buf, (size_t)n, out, len), (int)len, "a frame of MAX_FRAME bytes is taken");
    cr_assert_eq(memcmp(out, msg, len), 0);
    n = sec_seal(&a, msg, len + 1, buf, sec_seal_bound(len + 1)); /* (a's limit is the default, larger) */
    cr_assert_eq(n, (int)(4 + max + 1));
    cr_assert_eq(sec_frame_need(buf, 4, b.max_frame), -EMSGSIZE, "one byte more is refused from its prefix");
    cr_assert_eq(sec_open(&b, buf, (size_t)n, out, len + 1), -EMSGSIZE);
    cr_assert_eq(sec_session_set_max(&a, max), 0);
    cr_assert_eq(sec_seal(&a, msg, len + 1, buf, sec_seal_bound(len + 1)), -EMSGSIZE, "nor sealed at that limit");
    free(msg), free(buf), free(out);
    sec_session_free(&a);
    sec_session_free(&b);
}

/* ---- joining with a credential (WIRE.md "Joining") ---------------------------- */

/* The responder's admit function of these tests: a credential whose first
 * byte is 0 admits the key it carries (bytes 17..48), anything else is
 * refused with a reason; the slot must be 3 (the "vacant" one here). */
static int test_admit(void *ctx, uint32_t id, const uint8_t cred[SEC_CRED_BYTES], uint8_t pk[SEC_KEY_BYTES], char *why,
                      size_t whylen)
{
    int *calls = ctx;
    ++*calls;
    if (id != 3 || cred[0] != 0) {
        snprintf(why, whylen, "not signed by this cluster's admission key");
        return -EPERM;
    }
    memcpy(pk, cred + 17, SEC_KEY_BYTES);
    return 0;
}

static void cred_for(uint8_t cred[SEC_CRED_BYTES], const sec_keypair *kp)
{
    memset(cred, 0, SEC_CRED_BYTES);
    memcpy(cred + 17, kp->pk, SEC_KEY_BYTES);
}

/* Peer 3 joins: it dials the lower id 1 with its credential after the
 * first message (74 + 113 bytes, the id's top bit set), the responder
 * takes the credential's key as 3's, and the sessions interoperate. */
Test(peer_sec, a_joiner_dials_a_lower_id_with_its_credential_and_authenticates)
{
    sec_keypair joiner;
    cr_assert_eq(sec_keypair_generate(&joiner), 0);
    uint8_t cred[SEC_CRED_BYTES];
    cred_for(cred, &joiner);
    sec_hs i, r;
    int calls = 0;
    cr_assert_eq(sec_hs_init_join(&i, 3, 1, &joiner, table_lookup, &g_tab, g_cid, cred), 0, "%s", i.msg);
    cr_assert_eq(sec_hs_init(&r, SEC_RESPONDER, 1, SEC_ANY_PEER, &g_kp[1], table_lookup, &g_tab, g_cid), 0);
    cr_assert_eq(sec_hs_set_admit(&r, test_admit, &calls), 0);
    flights log;
    int side = -1;
    cr_assert_eq(pump(&i, &r, NULL, NULL, &log, &side), 0, "side %d: %s / %s", side, i.msg, r.msg);
    cr_assert_eq(log.n[0], SEC_MSG1_BYTES + SEC_CRED_BYTES, "the credential follows the first message");
    cr_assert_eq(memcmp(log.b[0] + 38, "\x03\x00\x00\x80", 4), 0, "id 3 with SEC_JOIN_FLAG");
    cr_assert_eq(calls, 1);
    sec_session a, b;
    cr_assert_eq(sec_hs_finish(&i, &a), 0);
    cr_assert_eq(sec_hs_finish(&r, &b), 0);
    cr_assert_eq(b.peer_id, 3, "the responder knows the joiner by its slot");
    uint8_t frame[64], pt[16];
    int n = sec_seal(&a, "hello", 5, frame, sizeof frame);
    cr_assert_gt(n, 0);
    cr_assert_eq(sec_open(&b, frame, (size_t)n, pt, sizeof pt), 5);
    cr_assert_eq(memcmp(pt, "hello", 5), 0);
    sec_session_free(&a);
    sec_session_free(&b);
    sec_keypair_free(&joiner);
}

/* What a joiner cannot do: be taken by a peer that admits no one, pass a
 * credential the admit function refuses (its reason in the log line), or
 * use another peer's credential without that peer's secret key (AUTH
 * fails: the credential names a key the impostor does not hold); and a
 * credential altered in transit no longer matches the transcript. */
Test(peer_sec, a_joiner_is_refused_without_a_valid_credential_and_key)
{
    sec_keypair joiner, impostor;
    cr_assert_eq(sec_keypair_generate(&joiner), 0);
    cr_assert_eq(sec_keypair_generate(&impostor), 0);
    uint8_t cred[SEC_CRED_BYTES];
    cred_for(cred, &joiner);
    int calls = 0, side = -1;
    sec_hs i, r;

    cr_assert_eq(sec_hs_init_join(&i, 3, 1, &joiner, table_lookup, &g_tab, g_cid, cred), 0);
    cr_assert_eq(sec_hs_init(&r, SEC_RESPONDER, 1, SEC_ANY_PEER, &g_kp[1], table_lookup, &g_tab, g_cid), 0);
    cr_assert_eq(pump(&i, &r, NULL, NULL, NULL, &side), -EPROTO);
    cr_assert_eq(side, 1);
    cr_assert(strstr(r.msg, "takes none"), "%s", r.msg);
    sec_hs_free(&i), sec_hs_free(&r);

    uint8_t forged[SEC_CRED_BYTES];
    memcpy(forged, cred, sizeof forged);
    forged[0] = 1;
    cr_assert_eq(sec_hs_init_join(&i, 3, 1, &joiner, table_lookup, &g_tab, g_cid, forged), 0);
    cr_assert_eq(sec_hs_init(&r, SEC_RESPONDER, 1, SEC_ANY_PEER, &g_kp[1], table_lookup, &g_tab, g_cid), 0);
    cr_assert_eq(sec_hs_set_admit(&r, test_admit, &calls), 0);
    cr_assert_eq(pump(&i, &r, NULL, NULL, NULL, &side), -EACCES);
    cr_assert(strstr(r.msg, "peer 3 refused: not signed by this cluster's admission key"), "%s", r.msg);
    sec_hs_free(&i), sec_hs_free(&r);

    cr_assert_eq(sec_hs_init_join(&i, 3, 1, &impostor, table_lookup, &g_tab, g_cid, cred), 0);
    cr_assert_eq(sec_hs_init(&r, SEC_RESPONDER, 1, SEC_ANY_PEER, &g_kp[1], table_lookup, &g_tab, g_cid), 0);
    cr_assert_eq(sec_hs_set_admit(&r, test_admit, &calls), 0);
    int rc = pump(&i, &r, NULL, NULL, NULL, &side);
    cr_assert(rc == -EBADMSG, "an impostor with the joiner's credential: %d (%s / %s)", rc, i.msg, r.msg);
    sec_hs_free(&i), sec_hs_free(&r);

    sec_keypair_free(&joiner);
    sec_keypair_free(&impostor);
}
