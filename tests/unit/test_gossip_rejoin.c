/* Incarnations and adoption (gossip/gsp.h, GUARANTEES.md "Leave and join"):
 * a restarted sender's edges start again from zero at the receiver, stale
 * messages of its earlier run are ignored, and a late joiner takes the
 * totals meant for an earlier holder of its id as a baseline, not as mass. */
#include <criterion/criterion.h>
#include <string.h>

#include "gossip/gsp.h"

TestSuite(gossip_rejoin, .timeout = 30);

#define DIM 5

static const cmp_spec *g_codec;

static void peer(gsp_peer *g, int id, uint64_t incarnation, float x)
{
    float x0[DIM];
    for (int d = 0; d < DIM; d++)
        x0[d] = x + (float)d;
    cr_assert_eq(gsp_init(g, id, 2, DIM, 0, x0), 0);
    if (g_codec)
        cr_assert_eq(gsp_set_codec(g, g_codec, 3, 1.0f), 0);
    g->incarnation = incarnation;
}

/* One message from a to b with half of a's mass; returns it (valid until a's next emit). */
static gsp_msg half_to(gsp_peer *a, int b)
{
    topo_out out = {.n = 1, .peer = {b}, .weight = {0.5}, .keep = 0.5};
    gsp_msg m[TOPO_MAX_OUT];
    cr_assert_eq(gsp_emit(a, &out, m), 1);
    return m[0];
}

/* a (incarnation 100) and b (7) after `rounds` messages from a to b. */
static void talked(gsp_peer *a, gsp_peer *b, int rounds)
{
    peer(a, 0, 100, 1.0f);
    peer(b, 1, 7, 10.0f);
    for (int r = 0; r < rounds; r++) {
        gsp_msg m = half_to(a, 1);
        cr_assert_eq(gsp_absorb(b, &m), GSP_APPLIED);
    }
}

Test(gossip_rejoin, a_restarted_sender_starts_its_edge_again_and_old_messages_are_ignored)
{
    gsp_peer a, b;
    talked(&a, &b, 4);
    gsp_msg stale;
    {
        gsp_msg m = half_to(&a, 1);
        cr_assert_eq(gsp_msg_copy(&stale, &m), 0); /* in flight when a dies */
    }
    gsp_free(&a);
    peer(&a, 0, 200, 1.0f); /* restarted: w = 1, its edge to b from zero */
    double w_before = b.w;
    gsp_msg m = half_to(&a, 1);
    cr_assert_eq(m.seq, 1);
    cr_assert_eq(gsp_absorb(&b, &m), GSP_APPLIED, "a higher incarnation is taken even though its seq is lower");
    cr_assert_float_eq(b.w - w_before, 0.5, 1e-12, "exactly the new share arrives, not its total minus the old run's");
    cr_assert_eq(gsp_absorb(&b, &stale), GSP_IGNORED, "a message of the earlier run is stale");
    cr_assert_float_eq(b.w - w_before, 0.5, 1e-12);
    gsp_msg_free(&stale);
    gsp_free(&a);
    gsp_free(&b);
}

Test(gossip_rejoin, a_joiner_adopts_the_totals_meant_for_its_predecessor)
{
    gsp_peer a, b;
    talked(&a, &b, 3);
    gsp_free(&b); /* b is gone; a new process takes id 1 without any state */
    peer(&b, 1, 8, 10.0f);
    b.adopt = 1;
    gsp_msg m = half_to(&a, 1);
    cr_assert_gt(m.seq, 1);
    cr_assert_eq(gsp_absorb(&b, &m), GSP_IGNORED, "adopted: a baseline, nothing applied");
    cr_assert(b.w == 1.0, "the joiner keeps its own unit of weight (w %.17g)", b.w);
    float z0 = b.x[0];
    m = half_to(&a, 1);
    double share = m.w_total - b.in[0].w;
    cr_assert_eq(gsp_absorb(&b, &m), GSP_APPLIED, "the next message is mass again");
    cr_assert_float_eq(b.w, 1.0 + share, 1e-12);
    cr_assert_neq(b.x[0], z0);
    gsp_free(&a);
    gsp_free(&b);
}

Test(gossip_rejoin, a_joiner_with_a_codec_asks_for_a_sync_and_adopts_it)
{
    cmp_spec spec;
    char err[128];
    cr_assert_eq(cmp_spec_parse(&spec, "topk:0.4", err, sizeof err), 0, "%s", err);
    g_codec = &spec;
    gsp_peer a, b;
    talked(&a, &b, 3);
    gsp_free(&b);
    peer(&b, 1, 8, 10.0f);
    b.adopt = 1;
    gsp_msg m = half_to(&a, 1);
    cr_assert_eq(m.kind, GSP_DELTA);
    cr_assert_eq(gsp_absorb(&b, &m), GSP_NEED_SYNC, "a delta against a reference the joiner lacks cannot be adopted");
    cr_assert_eq(gsp_nack_seq(&b, &m), m.seq - 1, "the NACK asks for no corrections before the gap");
    gsp_msg sync;
    cr_assert_eq(gsp_sync_msg(&a, 1, gsp_in_seq(&b, 0), &sync), 0);
    const size_t all_corrections = sync.n_corr;
    cr_assert_eq(gsp_sync_msg(&a, 1, gsp_nack_seq(&b, &m), &sync), 0);
    cr_assert_eq(sync.base, m.seq - 1);
    cr_assert_leq(sync.n_corr, 2, "the last message's positions only (topk:0.4 of 5)");
    cr_assert_lt(sync.n_corr, all_corrections, "from seq 0 the SYNC would carry every message's corrections");
    cr_assert_eq(gsp_absorb(&b, &sync), GSP_IGNORED, "the SYNC is adopted");
    cr_assert(b.w == 1.0);
    cr_assert_eq(memcmp(b.in[0].ref, a.out[0].ref, DIM * sizeof(float)), 0, "both ends hold the same reference");
    m = half_to(&a, 1);
    cr_assert_eq(gsp_absorb(&b, &m), GSP_APPLIED, "deltas apply from there on");
    gsp_free(&a);
    gsp_free(&b);
    g_codec = NULL;
}

Test(gossip_rejoin, a_first_message_of_a_fresh_edge_is_mass_even_for_a_joiner)
{
    gsp_peer a, b;
    peer(&a, 0, 100, 1.0f);
    peer(&b, 1, 7, 10.0f);
    b.adopt = 1;
    gsp_msg m = half_to(&a, 1);
    cr_assert_eq(m.seq, 1);
    cr_assert_eq(gsp_absorb(&b, &m), GSP_APPLIED, "seq 1 holds only this share: nothing of a predecessor to adopt");
    cr_assert_float_eq(b.w, 1.5, 1e-12);
    gsp_free(&a);
    gsp_free(&b);
}

/* A peer that resumes from the state its run stopped with (a final
 * checkpoint: nothing absorbed after it) asks for the shares sent while it
 * was away, and the SYNC brings their mass; from any other state it adopts
 * them as a baseline (its old process may have absorbed and passed them on). */
Test(gossip_rejoin, a_resume_from_a_final_state_gets_what_was_sent_meanwhile_by_a_sync)
{
    cmp_spec spec;
    char err[128];
    cr_assert_eq(cmp_spec_parse(&spec, "topk:0.4", err, sizeof err), 0, "%s", err);
    g_codec = &spec;
    for (int final = 0; final <= 1; final++) {
        gsp_peer a, b;
        talked(&a, &b, 3);
        for (int r = 0; r < 2; r++) /* sent while b is away: lost */
            (void)half_to(&a, 1);
        gsp_restart(&b, 8);
        const double w_stopped = b.w;
        gsp_resume(&b, final);
        const double rescaled = b.w - w_stopped;
        gsp_msg m = half_to(&a, 1);
        cr_assert_eq(gsp_absorb(&b, &m), GSP_NEED_SYNC, "final %d: a gap", final);
        const uint64_t base = gsp_nack_seq(&b, &m);
        cr_assert_eq(base, final ? 3u : m.seq - 1, "final %d: asked from what it holds, or from before the gap", final);
        gsp_msg sync;
        cr_assert_eq(gsp_sync_msg(&a, 1, base, &sync), 0);
        const int rc = gsp_absorb(&b, &sync);
        if (final) {
            cr_assert_eq(rc, GSP_APPLIED, "the SYNC's mass is taken");
            cr_assert_eq(b.stats.w_adopted, 0.0);
            cr_assert_float_eq(a.w + b.w, 2.0 + rescaled, 1e-12, "every share sent meanwhile arrived");
        } else {
            cr_assert_eq(rc, GSP_IGNORED, "adopted");
            cr_assert_gt(b.stats.w_adopted, 0.0, "the shares sent meanwhile are a baseline, counted");
            cr_assert_float_eq(a.w + b.w + b.stats.w_adopted, 2.0 + rescaled, 1e-12);
        }
        cr_assert_eq(memcmp(b.in[0].ref, a.out[0].ref, DIM * sizeof(float)), 0, "both ends hold the same reference");
        m = half_to(&a, 1);
        cr_assert_eq(gsp_absorb(&b, &m), GSP_APPLIED, "final %d: deltas apply from there on", final);
        gsp_free(&a);
        gsp_free(&b);
    }
    g_codec = NULL;
}
