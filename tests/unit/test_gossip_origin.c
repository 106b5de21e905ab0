/* Edges whose references start at the run's common model (gsp_set_origin):
 * the first message is an ordinary compressed difference, and a receiver
 * that started elsewhere asks for a SYNC instead of taking it, losing no
 * mass (gossip/GUARANTEES.md, "Local steps"). Peers of one process may also
 * share one codec scratch (gsp_share_scratch). */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gsp.h"

#define DIM 4096

static cmp_spec spec, bf16;

static void setup(void)
{
    char err[128];
    cr_assert_eq(cmp_spec_parse(&spec, "stc:0.05", err, sizeof err), 0, "%s", err);
    cr_assert_eq(cmp_spec_parse(&bf16, "bf16", err, sizeof err), 0, "%s", err);
}

TestSuite(gossip_origin, .init = setup);

/* Peer `id` of two, its model x0 + a small move (so the first message has
 * something to say), references starting at `origin` (NULL: zeros). */
static void peer(gsp_peer *g, int id, const float *x0, const float *origin)
{
    float x[DIM];
    for (int i = 0; i < DIM; i++)
        x[i] = x0[i] + 1e-3f * (float)((i * 7 + id) % 13);
    cr_assert_eq(gsp_init(g, id, 2, DIM, 0, x), 0);
    cr_assert_eq(gsp_set_codec(g, &spec, 9, 0.1f), 0);
    if (origin)
        cr_assert_eq(gsp_set_origin(g, origin), 0);
}

static void start(float *x0, float shift)
{
    for (int i = 0; i < DIM; i++)
        x0[i] = 1.0f + shift + 0.01f * (float)(i % 97);
}

/* Total mass sum x + in flight, per coordinate summed (w separately). */
static double mass(gsp_peer *a, gsp_peer *b, double *w)
{
    double acc[DIM] = {0}, s = 0;
    *w = a->w + b->w + gsp_edge_pending(a, b, acc) + gsp_edge_pending(b, a, acc);
    for (int i = 0; i < DIM; i++)
        s += (double)a->x[i] + (double)b->x[i] + acc[i];
    return s;
}

static int send(gsp_peer *from, gsp_peer *to)
{
    topo_out out = {.n = 1, .peer = {to->id}, .weight = {0.5}};
    gsp_msg m;
    cr_assert_eq(gsp_emit(from, &out, &m), 1);
    int rc = gsp_absorb(to, &m);
    return rc;
}

Test(gossip_origin, a_common_start_makes_the_first_message_a_small_one)
{
    float x0[DIM];
    start(x0, 0);
    gsp_peer a, b, c, d;
    peer(&a, 0, x0, x0), peer(&b, 1, x0, x0);
    peer(&c, 0, x0, NULL), peer(&d, 1, x0, NULL);
    topo_out out = {.n = 1, .peer = {1}, .weight = {0.5}};
    gsp_msg m, n;
    cr_assert_eq(gsp_emit(&a, &out, &m), 1);
    cr_assert_eq(gsp_emit(&c, &out, &n), 1);
    cr_assert_eq(m.kind, GSP_DELTA);
    cr_assert_neq(m.origin, 0, "the first message names its origin");
    cr_assert_eq(n.origin, 0);
    /* bf16 of every value against stc's 5%: well over ten times smaller. */
    cr_assert_lt(10 * m.payload_len, n.payload_len, "%zu vs %zu bytes", m.payload_len, n.payload_len);
    cr_assert_geq(n.payload_len, 2 * DIM);
    cr_assert_eq(gsp_absorb(&b, &m), GSP_APPLIED);
    cr_assert_eq(gsp_absorb(&d, &n), GSP_APPLIED);
    /* Both ends hold the same reference afterwards, so the next delta applies too. */
    cr_assert_eq(memcmp(a.out[0].ref, b.in[0].ref, DIM * sizeof(float)), 0);
    cr_assert_eq(send(&a, &b), 1);
    gsp_free(&a), gsp_free(&b), gsp_free(&c), gsp_free(&d);
}

Test(gossip_origin, peers_that_started_apart_sync_and_lose_no_mass)
{
    float x0[DIM], y0[DIM];
    start(x0, 0), start(y0, 0.5f);
    const struct {
        const float *a, *b;
    } cases[] = {{x0, y0}, {x0, NULL}, {NULL, x0}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        gsp_peer a, b;
        peer(&a, 0, x0, cases[k].a), peer(&b, 1, y0, cases[k].b);
        double w0, m0 = mass(&a, &b, &w0);
        cr_assert_eq(send(&a, &b), GSP_NEED_SYNC, "case %zu: another origin is not applied", k);
        gsp_request_sync(&a, 1, gsp_in_seq(&b, 0));
        cr_assert_eq(send(&a, &b), 1, "case %zu: the SYNC is", k);
        cr_assert_eq(send(&a, &b), 1, "case %zu: and the deltas after it", k);
        cr_assert_eq(send(&b, &a), GSP_NEED_SYNC, "case %zu: the reverse edge checks its own", k);
        double w1, m1 = mass(&a, &b, &w1);
        cr_assert_float_eq(w1, w0, 1e-12, "case %zu: weight %.17g -> %.17g", k, w0, w1);
        cr_assert_float_eq(m1, m0, 1e-6 * m0, "case %zu: x mass %.9g -> %.9g", k, m0, m1);
        gsp_free(&a), gsp_free(&b);
    }
}

/* Pair (a, b) and pair (c, d) exchange the same rounds, alternately one
 * way and the other: each message of c and d is the one a and b send (the
 * same origin, the same bytes) and is taken, and the models end equal. */
static void twin_rounds(gsp_peer *a, gsp_peer *b, gsp_peer *c, gsp_peer *d, int rounds)
{
    for (int r = 0; r < rounds; r++) {
        gsp_peer *from = r % 2 ? b : a, *to = r % 2 ? a : b;
        gsp_peer *from2 = r % 2 ? d : c, *to2 = r % 2 ? c : d;
        topo_out out = {.n = 1, .peer = {to->id}, .weight = {0.5}};
        gsp_msg m, n;
        cr_assert_eq(gsp_emit(from, &out, &m), 1);
        cr_assert_eq(gsp_emit(from2, &out, &n), 1);
        cr_assert_eq(m.origin, n.origin, "round %d: the same origin id", r);
        cr_assert_eq(m.payload_len, n.payload_len, "round %d", r);
        cr_assert_eq(memcmp(m.payload, n.payload, m.payload_len), 0, "round %d: the same message", r);
        cr_assert_eq(gsp_absorb(to, &m), GSP_APPLIED);
        cr_assert_eq(gsp_absorb(to2, &n), GSP_APPLIED, "round %d: taken", r);
    }
    cr_assert_eq(memcmp(a->x, c->x, sizeof(float) * DIM), 0);
    cr_assert_eq(memcmp(b->x, d->x, sizeof(float) * DIM), 0);
}

/* The simulator's peers compute one at a time and share one codec scratch
 * (gsp_share_scratch): the same messages and models as with a scratch each,
 * the scratch counted once, and a peer whose codec needs other sizes refused. */
Test(gossip_origin, peers_that_share_one_scratch_send_what_they_send_alone)
{
    float x0[DIM];
    start(x0, 0);
    gsp_peer a, b, c, d;
    gsp_scratch s = {0};
    peer(&a, 0, x0, x0), peer(&b, 1, x0, x0);
    peer(&c, 0, x0, x0), peer(&d, 1, x0, x0);
    size_t state, own, shared;
    gsp_bytes(&a, &state, &own);
    cr_assert_eq(gsp_share_scratch(&c, &s), 0);
    cr_assert_eq(gsp_share_scratch(&d, &s), 0);
    cr_assert_eq(gsp_share_scratch(&d, &s), -EINVAL, "twice");
    gsp_bytes(&d, &state, &shared);
    cr_assert_eq(own - shared, gsp_scratch_bytes(&s), "%zu - %zu vs %zu", own, shared, gsp_scratch_bytes(&s));
    cr_assert_gt(gsp_scratch_bytes(&s), DIM * sizeof(float));
    twin_rounds(&a, &b, &c, &d, 6);

    cmp_spec wider;
    char err[128];
    cr_assert_eq(cmp_spec_parse(&wider, "stc:0.2", err, sizeof err), 0, "%s", err);
    gsp_peer e;
    cr_assert_eq(gsp_init(&e, 0, 2, DIM, 0, x0), 0);
    cr_assert_eq(gsp_set_codec(&e, &wider, 9, 0.1f), 0);
    cr_assert_eq(gsp_share_scratch(&e, &s), -EINVAL, "another codec's sizes");
    gsp_free(&e);
    gsp_free(&a), gsp_free(&b), gsp_free(&c), gsp_free(&d);
    cr_assert_not_null(s.v, "the peers leave the scratch to its owner");
    gsp_scratch_free(&s);
}

/* A top-k codec's emit on a model large enough to sample (gsp.c,
 * encode_streamed) sends the bytes cmp_encode makes of the difference
 * z - r that the test forms itself, while the peer never allocates that
 * difference; a whole message (a refresh) is the bytes of bf16 of that
 * difference, made and read a block at a time (neither end stores the
 * difference or the decoded values), and the pair conserves its mass
 * throughout. */
Test(gossip_origin, a_top_k_emit_sends_the_difference_it_never_stores)
{
    enum { N = 100000 };
    const char *codecs[] = {"stc:0.04", "topk:0.01"};
    for (int c = 0; c < 2; c++) {
        cmp_spec s;
        char err[128];
        cr_assert_eq(cmp_spec_parse(&s, codecs[c], err, sizeof err), 0, "%s", err);
        float *x0 = malloc(N * sizeof *x0), *xa = malloc(N * sizeof *xa), *v = malloc(N * sizeof *v),
              *before = malloc(N * sizeof *before), *dec = malloc(N * sizeof *dec);
        const size_t cap = cmp_bound(&bf16, N); /* a whole message's: the larger */
        uint8_t *want = malloc(cap);
        void *work = malloc(cmp_work_size(&s, N));
        for (int i = 0; i < N; i++) {
            x0[i] = 0.01f * (float)(i % 101) - 0.5f;
            xa[i] = x0[i] + 1e-3f * (float)((i * 7919) % 113 - 56);
        }
        gsp_peer a, b;
        cr_assert_eq(gsp_init(&a, 0, 2, N, 0, xa), 0);
        cr_assert_eq(gsp_init(&b, 1, 2, N, 0, x0), 0);
        /* (a small step: z runs from a reference that only the codec moves by
         * 1 / (1 - step / 2) a round, and past the lag rule it goes whole) */
        cr_assert_eq(gsp_set_codec(&a, &s, 9, 0.1f), 0);
        cr_assert_eq(gsp_set_codec(&b, &s, 9, 0.1f), 0);
        cr_assert_eq(gsp_set_origin(&a, x0), 0);
        cr_assert_eq(gsp_set_origin(&b, x0), 0);
        double m0 = 0;
        for (int i = 0; i < N; i++)
            m0 += (double)xa[i] + (double)x0[i];
        for (int r = 0; r < 8; r++) {
            const int whole = r == 5;
            a.refresh = whole;
            /* z = x / w as the emit forms it, and the reference it starts from */
            const float inv = (float)(1.0 / a.w), *ref = a.n_out ? a.out[0].ref : x0;
            for (int i = 0; i < N; i++)
                v[i] = a.x[i] * inv - ref[i];
            long len = cmp_encode(whole ? &bf16 : &s, v, N, 1, work, want, cap);
            cr_assert_gt(len, 0);
            memcpy(before, ref, N * sizeof *before);
            topo_out out = {.n = 1, .peer = {1}, .weight = {0.5}};
            gsp_msg m;
            cr_assert_eq(gsp_emit(&a, &out, &m), 1, "%s round %d", codecs[c], r);
            cr_assert_eq(m.payload_len, (size_t)len, "%s round %d: %zu bytes, want %ld", codecs[c], r, m.payload_len, len);
            cr_assert_eq(memcmp(m.payload, want, (size_t)len), 0, "%s round %d: the same message", codecs[c], r);
            cr_assert_null(a.v, "%s round %d: no difference stored, not even for the whole one", codecs[c], r);
            cr_assert_eq(gsp_absorb(&b, &m), GSP_APPLIED);
            cr_assert(!a.c && !b.c, "%s round %d: no decoded values stored at either end", codecs[c], r);
            if (whole) { /* both references moved to r + gain * bf16(z - r), gain = <v, c> / ||c||^2, bit for bit */
                cr_assert_eq(cmp_decode(want, (size_t)len, N, dec), 0);
                double vc = 0, cc = 0;
                for (int i = 0; i < N; i++)
                    vc += (double)v[i] * dec[i], cc += (double)dec[i] * dec[i];
                cr_assert_float_eq(m.gain, vc / cc, 1e-6, "%s: gain %.9g, want %.9g", codecs[c], m.gain, vc / cc);
                for (int i = 0; i < N; i++) {
                    const float r1 = before[i] + m.gain * dec[i];
                    cr_assert(!memcmp(&a.out[0].ref[i], &r1, 4) && !memcmp(&b.in[0].ref[i], &r1, 4),
                              "%s: reference %d: %.9g and %.9g, want %.9g", codecs[c], i, a.out[0].ref[i],
                              b.in[0].ref[i], r1);
                }
            }
            double mass = 0;
            for (int i = 0; i < N; i++)
                mass += (double)a.x[i] + (double)b.x[i];
            cr_assert_float_eq(mass, m0, 1e-6 * fabs(m0) + 1e-3, "%s round %d: %.9g -> %.9g", codecs[c], r, m0,
                               mass);
            cr_assert_float_eq(a.w + b.w, 2.0, 1e-12);
        }
        /* A model gone to NaN is never sent: -EDOM (the engine then stops
         * the peer, saying its model is no longer finite). */
        a.x[N / 2] = NAN;
        topo_out out = {.n = 1, .peer = {1}, .weight = {0.5}};
        gsp_msg m;
        cr_assert_eq(gsp_emit(&a, &out, &m), -EDOM, "%s: a NaN", codecs[c]);
        gsp_free(&a), gsp_free(&b);
        free(x0), free(xa), free(v), free(before), free(dec), free(want), free(work);
    }
}

/* What a fill writes: the start, or for the wrong one the start moved; it
 * counts its calls. */
typedef struct drawn {
    const float *x0;
    int calls;
} drawn;

static int fill_start(void *ctx, float *dst)
{
    drawn *d = ctx;
    memcpy(dst, d->x0, DIM * sizeof(float));
    d->calls++;
    return 0;
}

static int fill_other(void *ctx, float *dst)
{
    fill_start(ctx, dst);
    dst[DIM - 1] += 1.0f;
    return 0;
}

/* A fill that cannot make it (a file that went): what it wrote is the start. */
static int fill_fails(void *ctx, float *dst)
{
    fill_start(ctx, dst);
    return -EIO;
}

/* A peer whose origin can be made again (gsp_set_origin_fill) gives its
 * copy to the schedule's last edge and draws the origin for any edge after
 * that (never at set-up): it sends and takes what a peer that keeps the copy
 * does, holding one copy fewer. */
Test(gossip_origin, an_origin_made_again_per_edge_is_the_kept_one_without_the_copy)
{
    float x0[DIM];
    start(x0, 0);
    gsp_peer a, b, c, d;
    drawn dc = {x0, 0}, dd = {x0, 0};
    peer(&a, 0, x0, x0), peer(&b, 1, x0, x0); /* a and b keep their copies */
    peer(&c, 0, x0, x0), peer(&d, 1, x0, x0); /* c and d give theirs to their first edge */
    cr_assert_eq(gsp_set_origin_fill(&c, fill_start, &dc, 0), -EINVAL, "no edge to give it to");
    cr_assert_eq(gsp_set_origin_fill(&c, fill_start, &dc, 1), 0);
    cr_assert_eq(gsp_set_origin_fill(&d, fill_start, &dd, 1), 0);
    cr_assert_not_null(c.origin_copy, "kept until an edge takes it");
    cr_assert_eq(dc.calls + dd.calls, 0, "nothing drawn at set-up");
    twin_rounds(&a, &b, &c, &d, 6);
    cr_assert_null(c.origin_copy);
    cr_assert_eq(dc.calls, 1, "c's second edge drew the origin (%d)", dc.calls);
    cr_assert_eq(dd.calls, 1, "d's second edge drew the origin (%d)", dd.calls);
    size_t kept, drew, codec;
    gsp_bytes(&a, &kept, &codec);
    gsp_bytes(&c, &drew, &codec);
    cr_assert_eq(kept - drew, DIM * sizeof(float), "one copy fewer: %zu -> %zu", kept, drew);
    gsp_free(&a), gsp_free(&b), gsp_free(&c), gsp_free(&d);
}

/* A fill that does not make the origin is found at its first draw (against
 * the origin's hash), and one that says it could not make it (even with the
 * right values) at any draw: the peer goes on without an origin, so the
 * edge that drew asks for a SYNC instead of taking deltas against a
 * reference that may differ from its sender's, and no mass is lost. */
static void draw_that_is_not_the_origin(int (*fill)(void *ctx, float *dst))
{
    float x0[DIM];
    start(x0, 0);
    gsp_peer e, f;
    drawn de = {x0, 0};
    peer(&e, 0, x0, x0), peer(&f, 1, x0, x0);
    const uint64_t id = e.origin_id;
    cr_assert_eq(gsp_set_origin_fill(&e, fill, &de, 1), 0, "not drawn here");
    double m0 = 0;
    for (int i = 0; i < DIM; i++)
        m0 += (double)e.x[i] + (double)f.x[i];
    topo_out to_f = {.n = 1, .peer = {1}, .weight = {0.5}}, to_e = {.n = 1, .peer = {0}, .weight = {0.5}};
    gsp_msg m;
    cr_assert_eq(gsp_emit(&e, &to_f, &m), 1); /* e's out-edge takes the copy */
    cr_assert_eq(m.origin, id);
    cr_assert_eq(gsp_absorb(&f, &m), GSP_APPLIED);
    cr_assert_eq(gsp_emit(&f, &to_e, &m), 1);
    cr_assert_eq(gsp_absorb(&e, &m), GSP_NEED_SYNC, "the in-edge drew an origin that is not the one");
    cr_assert_eq(de.calls, 1);
    cr_assert_eq(e.origin_id, 0, "no origin from here on");
    gsp_msg sync;
    cr_assert_eq(gsp_sync_msg(&f, 0, gsp_in_seq(&e, 1), &sync), 0);
    cr_assert_eq(gsp_absorb(&e, &sync), GSP_APPLIED);
    cr_assert_eq(memcmp(e.in[0].ref, f.out[0].ref, sizeof(float) * DIM), 0, "the references agree after the SYNC");
    for (int r = 0; r < 4; r++) { /* and the edges go on with deltas */
        cr_assert_eq(gsp_emit(&e, &to_f, &m), 1);
        cr_assert_eq(gsp_absorb(&f, &m), GSP_APPLIED, "round %d", r);
        cr_assert_eq(gsp_emit(&f, &to_e, &m), 1);
        cr_assert_eq(gsp_absorb(&e, &m), GSP_APPLIED, "round %d", r);
    }
    double mass = 0;
    for (int i = 0; i < DIM; i++)
        mass += (double)e.x[i] + (double)f.x[i];
    cr_assert_float_eq(mass, m0, 1e-5 * fabs(m0), "%.9g -> %.9g", m0, mass);
    cr_assert_float_eq(e.w + f.w, 2.0, 1e-12);
    gsp_free(&e), gsp_free(&f);
}

Test(gossip_origin, a_drawn_origin_that_differs_ends_the_origin_and_the_edge_syncs)
{
    draw_that_is_not_the_origin(fill_other);
    draw_that_is_not_the_origin(fill_fails);
}

/* A draw the driver made ahead, off its loop (gsp_origin_ahead), is what
 * the next edge that starts takes as its reference: nothing is drawn then,
 * the messages are those of peers that keep the copy, and a neighbour that
 * restarts finds its in-edge's reference in the next one. One wanted at a
 * time, only once the copy went; one not wanted is freed. */
Test(gossip_origin, a_draw_made_ahead_is_what_the_next_edge_takes)
{
    float x0[DIM];
    start(x0, 0);
    gsp_peer a, b, c, d;
    drawn dc = {x0, 0}, dd = {x0, 0};
    peer(&a, 0, x0, x0), peer(&b, 1, x0, x0);
    peer(&c, 0, x0, x0), peer(&d, 1, x0, x0);
    cr_assert_eq(gsp_set_origin_fill(&c, fill_start, &dc, 1), 0);
    cr_assert_eq(gsp_set_origin_fill(&d, fill_start, &dd, 1), 0);
    cr_assert_not(gsp_origin_ahead_wanted(&c), "the copy is still there");
    gsp_origin_ahead(&c, malloc(DIM * sizeof(float))); /* (not wanted: freed) */
    cr_assert_null(c.origin_drawn);
    twin_rounds(&a, &b, &c, &d, 1); /* c's out-edge takes the copy */
    cr_assert(gsp_origin_ahead_wanted(&c));
    size_t before, after, codec;
    gsp_bytes(&c, &before, &codec);
    float *ahead = malloc(DIM * sizeof(float));
    c.origin_fill(c.origin_ctx, ahead); /* what the driver does on its thread pool */
    gsp_origin_ahead(&c, ahead);
    cr_assert_not(gsp_origin_ahead_wanted(&c), "one at a time");
    gsp_bytes(&c, &after, &codec);
    cr_assert_eq(after - before, DIM * sizeof(float), "counted in the gossip state");
    twin_rounds(&a, &b, &c, &d, 5); /* c's in-edge from d starts */
    cr_assert_eq(dc.calls, 1, "no draw but the one made ahead (%d)", dc.calls);
    cr_assert_null(c.origin_drawn);
    cr_assert_eq(c.in[0].ref, ahead, "the in-edge took the buffer");
    cr_assert(gsp_origin_ahead_wanted(&c));
    /* d restarts: c's in-edge starts again, from a second draw made ahead */
    float *again = malloc(DIM * sizeof(float));
    c.origin_fill(c.origin_ctx, again);
    gsp_origin_ahead(&c, again);
    gsp_restart(&d, 7);
    topo_out to_c = {.n = 1, .peer = {0}, .weight = {0.5}};
    gsp_msg m;
    cr_assert_eq(gsp_emit(&d, &to_c, &m), 1);
    cr_assert_eq(m.seq, 1);
    const int calls = dc.calls;
    cr_assert_eq(gsp_absorb(&c, &m), GSP_APPLIED, "the restarted edge's first delta is taken");
    cr_assert_eq(dc.calls, calls, "nothing drawn in absorb");
    cr_assert_eq(c.in[0].ref, again);
    cr_assert_eq(memcmp(c.in[0].ref, d.out[0].ref, sizeof(float) * DIM), 0, "both ends hold one reference");
    gsp_free(&a), gsp_free(&b), gsp_free(&c), gsp_free(&d);
}
