/* The peer engine (peer/core/engine.h) on virtual time, without sockets:
 * one test per reaction both drivers share (what a round does, acks and
 * heartbeats, a reconnect, pulling and answering a model, a stop), and the
 * reference loop (peer/core/reference.h) against the simulator. Times are
 * multiples of MS (1/1024 s, exact in binary). */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "peer/core/engine_state.h" /* (a test may set up what no driver can: a round far ahead, a limit) */
#include "peer/core/reference.h"
#include "peer/sim/sim.h"

TestSuite(peer_engine, .timeout = 60);

#define MAX_PEERS 4
#define DIM 3
#define MS (1.0 / 1024)

/* n engines of a DIM-parameter model whose steps the test takes itself (no
 * data), on topology `kind`; dead timeout 1 s (heartbeat 1/4 s), round
 * timeout 1/2 s. */
typedef struct scene {
    topo t;
    peer_settings c;
    round_plan plan;
    int n;
    engine *e[MAX_PEERS];
} scene;

/* The scene's engines from its settings (again, after a test changed them:
 * an engine reads them when it is made); x0 of peer i is (i+1, i+2, i+3). */
static void scene_engines(scene *s)
{
    char err[256];
    for (int i = 0; i < s->n; i++) {
        engine_free(s->e[i]);
        const float x0[DIM] = {(float)i + 1, (float)i + 2, (float)i + 3};
        cr_assert_eq(engine_new(&s->e[i], &s->c, &s->plan, i, NULL, x0, DIM, 0, 0.0, err, sizeof err), 0, "%s", err);
    }
}

static void scene_make_codec(scene *s, const char *kind, int n, long rounds, int tau, const cmp_spec *codec)
{
    memset(s, 0, sizeof *s);
    parse_error te;
    cr_assert_eq(topo_generate(&s->t, kind, n, NULL, &te), 0, "%s", te.msg);
    s->c = (peer_settings){.topology = &s->t, .n_peers = n, .tau = tau, .dead_timeout = 1.0, .round_timeout = 0.5,
                           .barrier = 1, .codec = codec};
    train_opts_defaults(&s->c.train);
    s->plan = (round_plan){.per_batch = 1, .local_steps = 1, .steps_per_epoch = 1, .rounds_per_epoch = 1,
                           .total_rounds = rounds};
    s->n = n;
    scene_engines(s);
}

static void scene_make_tau(scene *s, const char *kind, int n, long rounds, int tau)
{
    scene_make_codec(s, kind, n, rounds, tau, NULL);
}

static void scene_make(scene *s, const char *kind, int n, long rounds) { scene_make_tau(s, kind, n, rounds, 0); }

static void scene_free(scene *s)
{
    for (int i = 0; i < s->n; i++)
        engine_free(s->e[i]);
    topo_free(&s->t);
}

static void all_up(scene *s, double now)
{
    for (int i = 0; i < s->n; i++)
        for (int k = 0; k < engine_pace(s->e[i])->n_nb; k++)
            engine_link_up(s->e[i], engine_pace(s->e[i])->nb[k].peer, now);
}

static uint64_t absorbed_by(const engine *e)
{
    engine_stats st;
    engine_stats_of(e, &st);
    return st.absorbed;
}

/* What the engine queued since the last look. */
typedef struct outputs {
    engine_send s[64];
    int n_s;
    engine_event v[64];
    int n_v;
} outputs;

static void take(engine *e, outputs *o)
{
    memset(o, 0, sizeof *o);
    while (o->n_s < 64 && engine_poll_send(e, &o->s[o->n_s]))
        o->n_s++;
    while (o->n_v < 64 && engine_poll_event(e, &o->v[o->n_v]))
        o->n_v++;
}

static int sends(const outputs *o, engine_send_kind kind, int peer)
{
    int k = 0;
    for (int j = 0; j < o->n_s; j++)
        k += o->s[j].kind == kind && (peer < 0 || o->s[j].peer == peer);
    return k;
}

static const engine_send *send_of(const outputs *o, engine_send_kind kind)
{
    for (int j = 0; j < o->n_s; j++)
        if (o->s[j].kind == kind)
            return &o->s[j];
    return NULL;
}

static const engine_event *event_of(const outputs *o, engine_event_kind kind)
{
    for (int j = 0; j < o->n_v; j++)
        if (o->v[j].kind == kind)
            return &o->v[j];
    return NULL;
}

/* Peer i's round: advance from its hold, compute (nothing: the test's steps
 * are no-ops), emit. Returns the outputs of the emit. */
static void round_of(scene *s, int i, double now, outputs *o)
{
    engine_advance(s->e[i], now);
    take(s->e[i], o);
    cr_assert_not_null(event_of(o, ENGINE_STEP), "peer %d starts its round", i);
    engine_compute_step(s->e[i], NULL);
    engine_step_done(s->e[i], now);
    take(s->e[i], o);
}

/* Hand peer `to` the PUSH of o addressed to it (a copy, as a transport makes). */
static void deliver_push(scene *s, const outputs *o, int to, double now)
{
    for (int j = 0; j < o->n_s; j++)
        if (o->s[j].kind == ENGINE_PUSH && o->s[j].peer == to) {
            gsp_msg m;
            cr_assert_eq(gsp_msg_copy(&m, &o->s[j].msg), 0);
            cr_assert_eq(engine_push(s->e[to], &m, now), 0);
            return;
        }
    cr_assert_fail("no PUSH to peer %d", to);
}

Test(peer_engine, a_round_steps_emits_and_holds_at_its_boundary_until_advanced)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    all_up(&s, 0);
    outputs o, o1;
    round_of(&s, 0, 0, &o);
    cr_assert_eq(sends(&o, ENGINE_PUSH, 1), 1, "the share goes to the out-neighbour");
    const engine_event *b = event_of(&o, ENGINE_BOUNDARY);
    cr_assert_not_null(b);
    cr_assert_eq(b->round, 0);
    /* Held: a message that would let round 1 start changes nothing yet. */
    round_of(&s, 1, 0, &o1);
    deliver_push(&s, &o1, 0, MS);
    take(s.e[0], &o);
    cr_assert_null(event_of(&o, ENGINE_STEP), "no round starts at a boundary before engine_advance");
    engine_advance(s.e[0], 2 * MS);
    take(s.e[0], &o);
    cr_assert_not_null(event_of(&o, ENGINE_STEP), "round 1 starts once advanced (its in-neighbour's share is in)");
    cr_assert_eq(engine_round(s.e[0]), 1);
    scene_free(&s);
}

Test(peer_engine, without_the_in_neighbours_share_a_synchronous_round_waits)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    all_up(&s, 0);
    outputs o;
    round_of(&s, 0, 0, &o);
    engine_advance(s.e[0], MS);
    take(s.e[0], &o);
    cr_assert_null(event_of(&o, ENGINE_STEP), "tau 0: round 1 waits for peer 1's round-0 share");
    cr_assert(engine_wake_at(s.e[0], MS) > MS, "and asks to be woken later");
    scene_free(&s);
}

/* Overlapped (--overlap): a round's steps start at once, before the
 * in-neighbours' shares of the round before are in; its emit waits for them
 * after the steps, absorbs them and goes out (tests/process/test_peer_node.c
 * checks that the simulator and real peers compute the same model so). */
Test(peer_engine, overlapped_a_round_steps_first_and_emits_once_the_shares_before_it_are_in)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    s.c.overlap = 1;
    all_up(&s, 0);
    outputs o, o1;
    round_of(&s, 0, 0, &o); /* round 0 needs no share */
    cr_assert_eq(sends(&o, ENGINE_PUSH, 1), 1);
    cr_assert_not_null(event_of(&o, ENGINE_BOUNDARY));
    engine_advance(s.e[0], MS);
    take(s.e[0], &o);
    cr_assert_not_null(event_of(&o, ENGINE_STEP), "round 1's steps start without peer 1's round-0 share");
    cr_assert_eq(engine_round(s.e[0]), 1);
    engine_compute_step(s.e[0], NULL);
    engine_step_done(s.e[0], 2 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_PUSH, -1), 0, "...but its shares wait for it");
    cr_assert_null(event_of(&o, ENGINE_BOUNDARY));
    round_of(&s, 1, 3 * MS, &o1);
    const double w_before = engine_gossip(s.e[0])->w;
    deliver_push(&s, &o1, 0, 4 * MS);
    take(s.e[0], &o);
    cr_assert_eq(absorbed_by(s.e[0]), 1, "peer 1's share is absorbed after the steps");
    cr_assert_eq(sends(&o, ENGINE_PUSH, 1), 1, "then round 1 goes out");
    const engine_event *b = event_of(&o, ENGINE_BOUNDARY);
    cr_assert(b && b->round == 1);
    cr_assert_null(event_of(&o, ENGINE_STEP), "and holds at its boundary");
    cr_assert_float_eq(engine_gossip(s.e[0])->w, (w_before + 0.5) / 2, 1e-12, "absorbed, then half of it sent");
    scene_free(&s);
}

/* A caller's overlapped step (engine_step_taken): folded in and the next
 * round's model handed out (a STEP) before the round's emit, which follows
 * at the next engine call; the next round's absorb runs while its steps
 * run, and the steps land on the mixed model: x += w (z' - z_start). */
static void caller_step(scene *s, int i, float add, double now, outputs *o)
{
    static float zs[MAX_PEERS][DIM]; /* (the engine's until its next model is written there, as a caller's) */
    float *z = zs[i];
    engine_model_to(s->e[i], z);
    for (int k = 0; k < DIM; k++)
        z[k] += add;
    engine_step_taken(s->e[i], z, now);
    take(s->e[i], o);
}

Test(peer_engine, overlapped_a_caller_gets_its_model_before_the_emit_and_absorbs_beside_its_steps)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    s.c.overlap = 1;
    for (int i = 0; i < 2; i++)
        engine_set_caller_steps(s.e[i]);
    all_up(&s, 0);
    outputs o, o1;
    for (int i = 0; i < 2; i++) { /* round 0: x0 = (1, 2, 3) and (2, 3, 4), steps of 1 */
        engine_advance(s.e[i], 0);
        take(s.e[i], &o);
        cr_assert_not_null(event_of(&o, ENGINE_STEP));
        caller_step(&s, i, 1.0f, MS, i ? &o1 : &o);
        const outputs *oi = i ? &o1 : &o;
        const engine_event *st = event_of(oi, ENGINE_STEP);
        cr_assert(st && st->round == 1, "peer %d: round 1's model is handed out at once", i);
        cr_assert_eq(sends(oi, ENGINE_PUSH, -1), 0, "peer %d: before round 0's emit", i);
        cr_assert_eq(engine_wake_at(s.e[i], MS), MS, "which is due now");
        engine_timer(s.e[i], MS);
        take(s.e[i], i ? &o1 : &o);
        cr_assert_eq(sends(oi, ENGINE_PUSH, 1 - i), 1, "peer %d: round 0 goes out", i);
        const engine_event *b = event_of(oi, ENGINE_BOUNDARY);
        cr_assert(b && b->round == 0);
        engine_advance(s.e[i], MS);
    }
    float z[DIM];
    engine_model_to(s.e[0], z);
    cr_assert(z[0] == 2 && z[1] == 3 && z[2] == 4, "peer 0's round-1 steps start from its own step: %g", z[0]);
    /* Peer 1's round-0 share comes while peer 0's round-1 steps run. */
    deliver_push(&s, &o1, 0, 2 * MS);
    cr_assert(engine_computing(s.e[0]));
    cr_assert_eq(absorbed_by(s.e[0]), 1, "absorbed beside the steps");
    cr_assert_float_eq(engine_gossip(s.e[0])->w, 1.0, 1e-12);
    caller_step(&s, 0, 2.0f, 3 * MS, &o);
    const engine_event *st = event_of(&o, ENGINE_STEP);
    cr_assert(st && st->round == 2);
    engine_model_to(s.e[0], z);
    /* (2, 3, 4) / 2 + peer 1's half of (3, 4, 5), at w = 1, + the step 2 */
    cr_assert(z[0] == 4.5f && z[1] == 5.5f && z[2] == 6.5f, "the step on the mixed model: %g %g %g", z[0], z[1],
              z[2]);
    scene_free(&s);
}

/* A peer stopped while its overlapped steps wait for the round's absorb
 * stops with them in its model (what its checkpoint keeps). */
Test(peer_engine, overlapped_steps_waiting_for_their_absorb_are_kept_at_a_stop)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    s.c.overlap = 1;
    engine_set_caller_steps(s.e[0]);
    all_up(&s, 0);
    outputs o;
    engine_advance(s.e[0], 0);
    take(s.e[0], &o);
    caller_step(&s, 0, 1.0f, MS, &o); /* round 0: (1, 2, 3) + 1, handed out */
    engine_timer(s.e[0], MS);         /* its emit */
    take(s.e[0], &o);
    engine_advance(s.e[0], MS);
    caller_step(&s, 0, 2.0f, 2 * MS, &o); /* round 1's steps; peer 1's round-0 share never comes */
    cr_assert_eq(sends(&o, ENGINE_PUSH, -1), 0, "waiting for the share");
    engine_stop(s.e[0], 3 * MS);
    take(s.e[0], &o);
    cr_assert_not_null(event_of(&o, ENGINE_FINISHED));
    float z[DIM];
    engine_model_to(s.e[0], z);
    cr_assert(z[0] == 4 && z[1] == 5 && z[2] == 6, "both steps kept: %g %g %g", z[0], z[1], z[2]);
    scene_free(&s);
}

/* A caller's outer step (sgd:2: twice the round's progress) is taken on its
 * own buffer at the fold, before the next model is written there. */
Test(peer_engine, overlapped_a_caller_s_outer_step_lands_on_the_mixed_model)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    outer_opts oo;
    char err[128];
    cr_assert_eq(outer_opts_parse(&oo, "sgd:2", err, sizeof err), 0, "%s", err);
    s.c.overlap = 1, s.c.outer = &oo;
    scene_engines(&s);
    for (int i = 0; i < 2; i++)
        engine_set_caller_steps(s.e[i]);
    all_up(&s, 0);
    outputs o;
    engine_advance(s.e[0], 0);
    take(s.e[0], &o);
    caller_step(&s, 0, 1.0f, MS, &o);
    cr_assert_not_null(event_of(&o, ENGINE_STEP));
    float z[DIM];
    engine_model_to(s.e[0], z);
    cr_assert(z[0] == 3 && z[1] == 4 && z[2] == 5, "(1, 2, 3) + 2 x the step of 1: %g %g %g", z[0], z[1], z[2]);
    scene_free(&s);
}

/* Without a caller (the simulator, `sgp peer`), the steps run on a model of
 * their own (engine_compute_step), the absorb beside them touches x only,
 * and the round goes out as soon as both are done. */
Test(peer_engine, overlapped_the_absorb_runs_beside_the_steps)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    s.c.overlap = 1;
    all_up(&s, 0);
    outputs o, o1;
    round_of(&s, 0, 0, &o);
    round_of(&s, 1, 0, &o1);
    engine_advance(s.e[0], MS);
    take(s.e[0], &o);
    cr_assert_not_null(event_of(&o, ENGINE_STEP));
    deliver_push(&s, &o1, 0, 2 * MS);
    take(s.e[0], &o);
    cr_assert_eq(absorbed_by(s.e[0]), 1, "absorbed while the steps run");
    cr_assert_eq(sends(&o, ENGINE_PUSH, -1), 0, "the round waits for its steps");
    engine_compute_step(s.e[0], NULL);
    engine_step_done(s.e[0], 3 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_PUSH, 1), 1, "then goes out at once");
    const engine_event *b = event_of(&o, ENGINE_BOUNDARY);
    cr_assert(b && b->round == 1);
    scene_free(&s);
}

/* A heartbeat goes to every neighbour that got no round from us for an
 * interval: an ACK says no round (a side of a partition whose only traffic
 * to a peer was ACKs let that peer race, not knowing the side's round);
 * a share does. */
Test(peer_engine, a_heartbeat_goes_where_no_round_went_an_ack_says_none)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    all_up(&s, 0);
    outputs o, o1;
    round_of(&s, 1, 0, &o1);
    deliver_push(&s, &o1, 0, 200 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_ACK, 1), 1, "a PUSH is acknowledged");
    cr_assert_eq(send_of(&o, ENGINE_ACK)->seq, 1);
    engine_timer(s.e[0], 256 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_HEARTBEAT, 1), 1, "the ACK told peer 1 no round: a heartbeat does");
    /* Peer 1's share at 0 told its round: its first tick sends none... */
    engine_timer(s.e[1], 128 * MS);
    take(s.e[1], &o);
    cr_assert_eq(sends(&o, ENGINE_HEARTBEAT, 0), 0);
    /* ...and the next, a heartbeat interval after the share, does. */
    engine_timer(s.e[1], 256 * MS);
    take(s.e[1], &o);
    cr_assert_eq(sends(&o, ENGINE_HEARTBEAT, 0), 1);
    scene_free(&s);
}

/* A message of the sender's former run (a lower incarnation: it restarted
 * and counts its seqs from 1 again) arriving after its current ones is
 * ignored: the ACKs it gets stay those of its current run, never going
 * back (before, the stale message reset them and the next ACK said 0). */
Test(peer_engine, a_message_from_before_its_sender_restarted_moves_no_acknowledgement)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    all_up(&s, 0);
    outputs o, o1;
    round_of(&s, 1, 0, &o1);
    const engine_send *p = send_of(&o1, ENGINE_PUSH);
    cr_assert_not_null(p);
    gsp_msg m;
    cr_assert_eq(gsp_msg_copy(&m, &p->msg), 0);
    m.incarnation = 7; /* the sender as it runs now */
    cr_assert_eq(engine_push(s.e[0], &m, MS), 0);
    take(s.e[0], &o);
    cr_assert_eq(send_of(&o, ENGINE_ACK)->seq, 1);
    cr_assert_eq(gsp_msg_copy(&m, &p->msg), 0);
    m.incarnation = 6, m.seq = 40; /* one of its former run */
    cr_assert_eq(engine_push(s.e[0], &m, 2 * MS), 0);
    engine_heartbeat(s.e[0], 1, 1, 3 * MS); /* (answered with an ACK, even one already sent) */
    engine_timer(s.e[0], 256 * MS);
    take(s.e[0], &o);
    cr_assert_geq(sends(&o, ENGINE_ACK, 1), 1);
    for (int j = 0; j < o.n_s; j++)
        if (o.s[j].kind == ENGINE_ACK)
            cr_assert_eq(o.s[j].seq, 1, "an ACK of seq %llu", (unsigned long long)o.s[j].seq);
    scene_free(&s);
}

Test(peer_engine, a_refused_ack_stays_due_until_the_next_tick)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    all_up(&s, 0);
    outputs o, o1;
    round_of(&s, 1, 0, &o1);
    deliver_push(&s, &o1, 0, MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_ACK, 1), 1);
    engine_unsent(s.e[0], send_of(&o, ENGINE_ACK), -EAGAIN, 2 * MS);
    engine_timer(s.e[0], 256 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_ACK, 1), 1, "the tick sends the ACK that was refused");
    engine_timer(s.e[0], 512 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_ACK, 1), 0, "and only once");
    scene_free(&s);
}

/* Two peers on the ring under topk:0.5 (spec: the caller's, for the scene's
 * life), tau 3: peer 1 runs ahead without peer 0's shares. */
static void compressed_ring(scene *s, cmp_spec *spec)
{
    char err[128];
    cr_assert_eq(cmp_spec_parse(spec, "topk:0.5", err, sizeof err), 0, "%s", err);
    scene_make_codec(s, "ring", 2, 10, 3, spec);
    all_up(s, 0);
}

/* Shares that arrive after a lost one each ask for a SYNC; the receiver asks
 * (a NACK) once for all that it absorbs together: one SYNC answers them all. */
Test(peer_engine, shares_after_a_lost_one_ask_for_one_sync)
{
    cmp_spec spec;
    scene s;
    compressed_ring(&s, &spec);
    outputs lost, o1, o2, o;
    round_of(&s, 1, 0, &lost);
    round_of(&s, 1, MS, &o1);
    round_of(&s, 1, 2 * MS, &o2);
    cr_assert_eq(sends(&o1, ENGINE_PUSH, 0), 1);
    cr_assert_eq(sends(&o2, ENGINE_PUSH, 0), 1);
    deliver_push(&s, &o1, 0, 3 * MS); /* seq 2 and 3 arrive, seq 1 does not */
    deliver_push(&s, &o2, 0, 3 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_NACK, 1), 0, "nothing absorbed before its round starts");
    engine_advance(s.e[0], 4 * MS); /* its round starts by absorbing both */
    take(s.e[0], &o);
    cr_assert_not_null(event_of(&o, ENGINE_STEP));
    cr_assert_eq(engine_gossip(s.e[0])->stats.gaps, 2, "both found the gap");
    cr_assert_eq(sends(&o, ENGINE_NACK, 1), 1, "one NACK for both");
    cr_assert_eq(send_of(&o, ENGINE_NACK)->seq, 0, "from what it holds");
    scene_free(&s);
}

/* How many SYNCs peer 1's engine sends peer 0 for a NACK from `base` (it sends no other PUSH for one). */
static int pushes_after_nack(engine *e1, uint64_t base, double now)
{
    outputs o;
    engine_nack(e1, 0, base, now);
    take(e1, &o);
    for (int j = 0; j < o.n_s; j++)
        cr_assert(o.s[j].kind != ENGINE_PUSH || o.s[j].msg.kind == GSP_SYNC);
    return sends(&o, ENGINE_PUSH, 0);
}

/* A NACK that reaches the sender while the SYNC it sent for an earlier one
 * is still being written was sent before the receiver had that SYNC: it
 * gets none (at 100M each is half a GB); once the link has written it, or
 * for a NACK from a later seq, a SYNC goes. */
Test(peer_engine, a_nack_from_before_the_sync_on_its_way_gets_none)
{
    cmp_spec spec;
    scene s;
    compressed_ring(&s, &spec);
    outputs o;
    round_of(&s, 1, 0, &o); /* peer 1 sends seq 1 and 2 to peer 0 */
    round_of(&s, 1, MS, &o);
    engine *e1 = s.e[1];
    cr_assert_eq(pushes_after_nack(e1, 0, 2 * MS), 1, "the first NACK gets a SYNC");
    engine_link_state(e1, 0, 0, 1); /* still writing it */
    cr_assert_eq(pushes_after_nack(e1, 0, 3 * MS), 0, "a NACK from before it gets none while it is written");
    engine_link_state(e1, 0, 0, 0);
    cr_assert_eq(pushes_after_nack(e1, 0, 4 * MS), 1, "once written, a NACK is answered (it may have been lost)");
    round_of(&s, 1, 5 * MS, &o); /* seq 3 */
    engine_link_state(e1, 0, 0, 1);
    cr_assert_eq(pushes_after_nack(e1, 2, 6 * MS), 1, "a NACK from the SYNC's seq on is a new one");
    engine_link_down(e1, 0, 7 * MS);
    engine_link_up(e1, 0, 8 * MS);
    engine_link_state(e1, 0, 0, 1);
    cr_assert_eq(pushes_after_nack(e1, 0, 9 * MS), 1, "after a reconnect, what was on its way is lost: answered");
    /* Where links lose nothing while up (sgp peer's TCP), the same request
     * waits for the SYNC's acknowledgement even once it is written. */
    s.c.reliable_links = 1;
    engine_link_state(e1, 0, 0, 0);
    cr_assert_eq(pushes_after_nack(e1, 0, 10 * MS), 0, "the request the SYNC on its way answers");
    cr_assert_eq(pushes_after_nack(e1, 1, 11 * MS), 1, "another request is answered");
    engine_ack(e1, 0, 3, 12 * MS);
    cr_assert_eq(pushes_after_nack(e1, 1, 13 * MS), 1, "and, once acknowledged, any");
    scene_free(&s);
}

/* Shares refused at the door (more waiting than a neighbour ahead sends)
 * are asked for once nothing of their sender waits here: a sender that
 * sends nothing more, or whose next share is the one refused, never shows
 * the gap otherwise. Peer 1 runs every round ahead of peer 0, which holds
 * engine_hold_max of them and refuses the rest; the absorb that takes the
 * last one held NACKs from there, the SYNC brings the rest, and every bit
 * of weight peer 1 sent is held. */
Test(peer_engine, shares_refused_at_the_door_are_asked_for_with_a_nack)
{
    scene s;
    scene_make(&s, "ring", 2, 20);
    s.e[1]->rp.pace.c.tau = 1000; /* peer 1 runs ahead without peer 0's shares */
    all_up(&s, 0);
    const int hold = engine_hold_max(s.e[0]);
    cr_assert_lt(hold, 18, "some of peer 1's 20 shares are refused");
    outputs o, o1;
    double t = 0;
    for (int r = 0; r < 20; r++, t += 10 * MS) {
        round_of(&s, 1, t, &o1);
        deliver_push(&s, &o1, 0, t);
    }
    cr_assert_eq(s.e[0]->refusals[1], (uint32_t)(20 - hold), "peer 0 held %d and refused the rest", hold);
    /* Peer 0's rounds, each share to peer 1, each NACK answered by peer 1. */
    int nacks = 0, done = 0;
    engine_advance(s.e[0], t);
    for (int k = 0; k < 100 && !done; k++, t += 10 * MS) {
        take(s.e[0], &o);
        done = event_of(&o, ENGINE_DONE) != NULL;
        const engine_send *n = send_of(&o, ENGINE_NACK);
        if (n) {
            cr_assert_eq(n->seq, (uint64_t)hold, "it asks from seq %d, all it holds", hold);
            nacks++;
            engine_nack(s.e[1], 0, n->seq, t);
            take(s.e[1], &o1);
            deliver_push(&s, &o1, 0, t);
        }
        if (event_of(&o, ENGINE_STEP)) {
            engine_compute_step(s.e[0], NULL);
            engine_step_done(s.e[0], t);
            take(s.e[0], &o);
            deliver_push(&s, &o, 1, t);
            engine_advance(s.e[0], t);
        } else
            engine_timer(s.e[0], t);
    }
    cr_assert(done, "peer 0 did its 20 rounds");
    cr_assert_eq(nacks, 1, "one NACK, once nothing of peer 1's waited");
    const gsp_peer *g0 = engine_gossip(s.e[0]), *g1 = engine_gossip(s.e[1]);
    cr_assert_eq(g0->in[0].seq, 20, "every share up to peer 1's last is held");
    cr_assert_float_eq(g0->in[0].w, g1->out[0].w, 1e-12, "all the weight peer 1 sent is taken in");
    scene_free(&s);
}

/* A message that no frame can hold would be refused at every retry (a SYNC
 * asked for again and again): the run ends with an error instead. */
Test(peer_engine, a_message_no_frame_holds_ends_the_run_with_an_error)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    all_up(&s, 0);
    outputs o;
    round_of(&s, 0, 0, &o);
    cr_assert_not_null(send_of(&o, ENGINE_PUSH));
    engine_unsent(s.e[0], send_of(&o, ENGINE_PUSH), -EMSGSIZE, MS);
    engine_advance(s.e[0], 2 * MS); /* (from the round's boundary, where the engine holds) */
    take(s.e[0], &o);
    const engine_event *f = event_of(&o, ENGINE_FINISHED);
    cr_assert_not_null(f, "the engine finishes");
    cr_assert_eq(f->rc, -EMSGSIZE);
    cr_assert_eq(f->goodbye, 0, "it says \"stopped\", not \"done\": its neighbours route around it");
    cr_assert_not_null(event_of(&o, ENGINE_LOG), "and says why");
    scene_free(&s);
}

/* A reconnected edge starts with a SYNC (what was in flight on the old
 * connection arrives with it), and a peer that said it is done says so
 * again (the neighbour may have restarted and missed it). */
/* A reconnect: each end says what it holds of the other's messages (a
 * NACK), and the other sends what follows, if anything (gossip/GUARANTEES.md). */
Test(peer_engine, a_reconnected_edge_gets_what_its_neighbour_lacks_and_the_done_goodbye_again)
{
    scene s;
    scene_make_tau(&s, "ring", 2, 2, 1); /* tau 1: peer 0 may finish while peer 1 is a round behind */
    all_up(&s, 0);
    outputs o, o1;
    round_of(&s, 0, 0, &o);
    round_of(&s, 1, 0, &o1);
    deliver_push(&s, &o1, 0, MS);
    round_of(&s, 0, MS, &o);
    engine_advance(s.e[0], MS);
    take(s.e[0], &o);
    cr_assert_not_null(event_of(&o, ENGINE_DONE), "two rounds: done");
    cr_assert_null(event_of(&o, ENGINE_FINISHED), "staying for peer 1's last share");
    cr_assert_eq(sends(&o, ENGINE_GOODBYE, 1), 1, "done, to the neighbour");
    engine_link_down(s.e[0], 1, 2 * MS);
    engine_link_up(s.e[0], 1, 3 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_NACK, 1), 1, "what it holds of peer 1's messages");
    for (int j = 0; j < o.n_s; j++)
        if (o.s[j].kind == ENGINE_NACK)
            cr_assert_eq(o.s[j].seq, 1, "peer 1's first message, taken in");
    cr_assert_eq(sends(&o, ENGINE_GOODBYE, 1), 1, "and done, again");
    engine_nack(s.e[0], 1, 1, 4 * MS); /* peer 1 holds the first of our two */
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_PUSH, 1), 1, "the edge's totals go again");
    for (int j = 0; j < o.n_s; j++)
        if (o.s[j].kind == ENGINE_PUSH)
            cr_assert(o.s[j].msg.kind == GSP_RAW && o.s[j].msg.seq == 2, "the totals as of the last message sent");
    engine_nack(s.e[0], 1, 2, 5 * MS); /* and one that holds both */
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_PUSH, 1), 0, "nothing to send");
    scene_free(&s);
}

Test(peer_engine, a_model_request_during_a_step_is_answered_at_the_boundary)
{
    scene s;
    scene_make(&s, "complete", 3, 10);
    all_up(&s, 0);
    outputs o;
    engine_advance(s.e[0], 0);
    take(s.e[0], &o);
    cr_assert_not_null(event_of(&o, ENGINE_STEP));
    engine_model_request(s.e[0], 2, MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL, -1), 0, "not while the step writes the model");
    engine_step_done(s.e[0], 2 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL, 2), 1, "at the boundary");
    cr_assert_eq(sends(&o, ENGINE_PUSH, 1), 1, "the round's share to the other neighbour");
    cr_assert_eq(sends(&o, ENGINE_PUSH, 2), 0, "none beside the model: a big share being sealed would hold it back");
    for (int j = 0; j < o.n_s; j++)
        if (o.s[j].kind == ENGINE_MODEL) {
            cr_assert_eq(o.s[j].round, 1, "the round the asker enters at");
            cr_assert_eq(o.s[j].dim, DIM);
            cr_assert_float_eq(o.s[j].model[0] * o.s[j].scale, 1.0f, 1e-6, "z = x / w");
        }
    cr_assert_float_eq(engine_gossip(s.e[0])->w, 2.0 / 3, 1e-12, "that share stays home: the weight is all here");
    /* Between rounds it answers at once, saying first that the model
     * follows: the asker then asks nobody else while it is built and sent. */
    engine_model_request(s.e[0], 1, 3 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL, 1), 1);
    cr_assert_eq(sends(&o, ENGINE_MODEL_SOON, 1), 1);
    for (int j = 0; j < o.n_s; j++)
        if (o.s[j].kind == ENGINE_MODEL) {
            cr_assert(j > 0 && o.s[j - 1].kind == ENGINE_MODEL_SOON, "MODEL_SOON goes right before the MODEL");
            cr_assert_eq(o.s[j - 1].round, o.s[j].round);
        }
    scene_free(&s);
}

/* A neighbour that got our model asks again: it is neither joining nor far
 * behind (a refresh comes after more rounds than that), so a request within
 * engine_hold_max of our rounds is ignored (a member asking again and again
 * would have every boundary build and send the whole model); after them it
 * is answered again. */
Test(peer_engine, a_model_goes_to_the_same_neighbour_at_most_once_in_hold_max_rounds)
{
    scene s;
    scene_make(&s, "complete", 3, 1000);
    outputs o;
    all_up(&s, 0);
    engine_model_request(s.e[1], 0, MS);
    take(s.e[1], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL, 0), 1, "the first request is answered");
    engine_link_state(s.e[1], 0, 0, 0); /* (it has left) */
    const int hold = engine_hold_max(s.e[1]);
    gsp_jump(&s.e[1]->rp.g, hold - 1); /* (as if its rounds had run) */
    engine_model_request(s.e[1], 0, 2 * MS);
    take(s.e[1], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL, 0), 0, "asked again %d rounds after: ignored", hold - 1);
    gsp_jump(&s.e[1]->rp.g, hold);
    engine_model_request(s.e[1], 0, 3 * MS);
    take(s.e[1], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL, 0), 1, "%d rounds after: answered again", hold);
    scene_free(&s);
}

/* A peer whose w is not 1 answers with z = x / w bit for bit as gsp_debias
 * makes it, computed where the driver writes the frame: no z is written
 * (and left resident) beside x. */
Test(peer_engine, a_model_answer_writes_no_z_beside_x)
{
    scene s;
    scene_make(&s, "complete", 3, 10);
    outputs o;
    all_up(&s, 0);
    gsp_peer *g = &s.e[1]->rp.g;
    g->w = 0.7; /* (what shares that came late leave) */
    engine_model_request(s.e[1], 0, MS);
    take(s.e[1], &o);
    const engine_send *m = send_of(&o, ENGINE_MODEL);
    cr_assert_not_null(m);
    cr_assert_eq(m->model, g->x, "x itself");
    cr_assert_eq(g->z_written, 0, "no z written");
    float *z = malloc(g->dim * sizeof *z), *sent = malloc(g->dim * sizeof *sent);
    gsp_debias_to(g, z);
    engine_model_values(m, sent);
    cr_assert_eq(memcmp(z, sent, g->dim * sizeof *z), 0, "z = x / w as gsp_debias has it, bit for bit");
    cr_assert_neq(m->scale, 1.0f);
    free(z), free(sent);
    scene_free(&s);
}

/* A MODEL the transport refused because the link was busy (a share being
 * sealed) goes at the first heartbeat tick that finds the link free, not
 * only at the next round boundary: the round may be waiting for the very
 * peer that wants the model (a founder alone with its joiner). */
Test(peer_engine, a_model_the_busy_link_refused_goes_once_the_link_is_free)
{
    scene s;
    scene_make(&s, "complete", 3, 10);
    outputs o;
    all_up(&s, 0);
    engine_model_request(s.e[1], 0, MS);
    take(s.e[1], &o);
    const engine_send *m = send_of(&o, ENGINE_MODEL);
    cr_assert_not_null(m, "between rounds: at once");
    engine_send refused = *m;
    engine_link_state(s.e[1], 0, 1, 1);
    engine_unsent(s.e[1], &refused, -EAGAIN, 2 * MS);
    for (int k = 1; k <= 3; k++) {
        engine_timer(s.e[1], k * 256 * MS);
        take(s.e[1], &o);
        cr_assert_eq(sends(&o, ENGINE_MODEL, -1), 0, "tick %d: the link is still busy", k);
    }
    engine_link_state(s.e[1], 0, 0, 0);
    engine_timer(s.e[1], 4 * 256 * MS);
    take(s.e[1], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL, 0), 1, "the link is free: the model goes");
    engine_timer(s.e[1], 5 * 256 * MS);
    take(s.e[1], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL, -1), 0, "once");
    scene_free(&s);
}

/* Peer 0 of three joins without a model, its two neighbours up at MS: what
 * it sent by then in o (its first MODEL_REQUEST). */
static void joiner_scene(scene *s, outputs *o)
{
    scene_make(s, "complete", 3, 10);
    engine_come_back(s->e[0], ENGINE_WITHOUT_STATE, 0, 0);
    engine_advance(s->e[0], 0);
    engine_link_up(s->e[0], 1, MS);
    engine_link_up(s->e[0], 2, MS);
    take(s->e[0], o);
}

/* A joiner (no state) asks the connected neighbours in turn, the next one
 * after a heartbeat interval without an answer; a model that fails its
 * hash makes it ask another; and with no answer for the round timeout it
 * fails: nothing to join. */
Test(peer_engine, a_joiner_asks_in_turn_and_fails_after_the_round_timeout)
{
    scene s;
    outputs o;
    joiner_scene(&s, &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, -1), 1, "asks as soon as one is up");
    cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, 1), 1);
    cr_assert_null(event_of(&o, ENGINE_STEP), "no round without a model");
    engine_timer(s.e[0], 256 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, -1), 0, "not again within a heartbeat interval");
    engine_timer(s.e[0], 512 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, 2), 1, "then the next neighbour");
    cr_assert_null(event_of(&o, ENGINE_FINISHED), "half a second: not past the round timeout yet");
    const float bad[DIM] = {9, 9, 9};
    engine_model(s.e[0], 2, 5, bad, 0, 513 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, 1), 1, "a model failing its hash: ask another");
    engine_timer(s.e[0], 768 * MS);
    take(s.e[0], &o);
    const engine_event *f = event_of(&o, ENGINE_FINISHED);
    cr_assert_not_null(f, "nobody answered for the round timeout");
    cr_assert_eq(f->rc, -EHOSTUNREACH);
    scene_free(&s);
}

/* A neighbour asked during its step says at once that its model follows
 * the step (MODEL_SOON, once) and sends it at the boundary; the joiner then
 * waits for it past heartbeat intervals instead of asking a second
 * neighbour for a second model (hundreds of MB to build and send at 100M
 * parameters), also through a silence of up to twice the dead timeout (the
 * loop that builds such a frame says nothing meanwhile); once it is silent
 * longer or disconnects, the joiner asks the next. A MODEL_SOON from a
 * neighbour it did not ask changes nothing. */
Test(peer_engine, a_joiner_waits_for_a_model_that_follows_a_step)
{
    scene s;
    scene_make(&s, "complete", 3, 10);
    outputs o;
    engine_link_up(s.e[1], 0, 0), engine_link_up(s.e[1], 2, 0);
    engine_advance(s.e[1], 0);
    take(s.e[1], &o);
    cr_assert_not_null(event_of(&o, ENGINE_STEP), "peer 1 computes");
    engine_model_request(s.e[1], 0, MS);
    take(s.e[1], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL_SOON, 0), 1, "said at once");
    cr_assert_eq(sends(&o, ENGINE_MODEL, -1), 0, "not while the step writes the model");
    engine_model_request(s.e[1], 0, 2 * MS);
    take(s.e[1], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL_SOON, -1), 0, "once");
    engine_step_done(s.e[1], 3 * MS);
    take(s.e[1], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL, 0), 1, "at the boundary");

    s.e[0]->rp.pace.c.round_timeout = 60; /* (the scene's half second would end the join) */
    engine_come_back(s.e[0], ENGINE_WITHOUT_STATE, 0, 0);
    engine_advance(s.e[0], 0);
    engine_link_up(s.e[0], 1, MS);
    engine_link_up(s.e[0], 2, MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, 1), 1);
    engine_model_soon(s.e[0], 2, 2 * MS);
    engine_model_soon(s.e[0], 1, 2 * MS);
    cr_assert(engine_promise_pending(s.e[0]));
    for (int k = 1; k <= 8; k++) { /* two seconds: eight heartbeat intervals, two dead timeouts */
        engine_heartbeat(s.e[0], 1, 0, k * 256 * MS - MS);
        engine_timer(s.e[0], k * 256 * MS);
        take(s.e[0], &o);
        cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, -1), 0, "at %d intervals: waits for the promised model", k);
    }
    for (int k = 9; k <= 15; k++) { /* then silent, as one that builds a big MODEL frame */
        engine_timer(s.e[0], k * 256 * MS);
        take(s.e[0], &o);
        cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, -1), 0, "at %d intervals: silent for less than two dead timeouts", k);
    }
    engine_timer(s.e[0], 16 * 256 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, 2), 1, "silent for two dead timeouts: the next one");
    cr_assert_not(engine_promise_pending(s.e[0]));
    engine_model_soon(s.e[0], 2, 4097 * MS);
    cr_assert(engine_promise_pending(s.e[0]));
    engine_link_down(s.e[0], 2, 4098 * MS);
    engine_timer(s.e[0], 17 * 256 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, 1), 1, "peer 2 disconnected: at once the next one");
    scene_free(&s);
}

/* A neighbour that promises its model (MODEL_SOON) and then only says it is
 * alive is waited for no longer than the promise's limit (the round
 * timeout, plus the model's size at 20 MB/s): then the joiner asks the
 * next neighbour, believes no later promise of the first, and has its round
 * timeout again to get a model before it gives up. */
Test(peer_engine, a_promise_not_kept_in_time_sends_the_joiner_to_the_next_neighbour)
{
    scene s;
    outputs o;
    joiner_scene(&s, &o);
    s.e[0]->rp.pace.c.round_timeout = 2; /* the promise's limit: 2 s and 12 bytes at 20 MB/s */
    cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, 1), 1);
    engine_model_soon(s.e[0], 1, 2 * MS);
    for (int k = 1; k <= 8; k++) { /* two seconds of heartbeats from both */
        engine_heartbeat(s.e[0], 1, 0, k * 256 * MS - MS);
        engine_heartbeat(s.e[0], 2, 0, k * 256 * MS - MS);
        engine_timer(s.e[0], k * 256 * MS);
        take(s.e[0], &o);
        cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, -1), 0, "at %d intervals: within the promise's limit", k);
        cr_assert_null(event_of(&o, ENGINE_FINISHED));
    }
    engine_heartbeat(s.e[0], 1, 0, 9 * 256 * MS - MS);
    engine_timer(s.e[0], 9 * 256 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, 2), 1, "past it: the next neighbour");
    const engine_event *v = event_of(&o, ENGINE_LOG);
    cr_assert(v && v->log == ENGINE_LOG_PROMISE_BROKEN && v->peer == 1, "and says why");
    cr_assert_null(event_of(&o, ENGINE_FINISHED), "the join's round timeout counts again from here");
    engine_timer(s.e[0], 11 * 256 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, 1), 1, "peer 2 silent: peer 1 is asked again...");
    engine_model_soon(s.e[0], 1, 11 * 256 * MS + MS);
    cr_assert_not(engine_promise_pending(s.e[0]), "...but not believed again");
    for (int k = 12; k <= 17; k++) {
        engine_timer(s.e[0], k * 256 * MS);
        take(s.e[0], &o);
        cr_assert_null(event_of(&o, ENGINE_FINISHED), "at %d intervals: within the round timeout", k);
    }
    engine_timer(s.e[0], 18 * 256 * MS);
    take(s.e[0], &o);
    const engine_event *f = event_of(&o, ENGINE_FINISHED);
    cr_assert(f && f->rc == -EHOSTUNREACH, "no model a round timeout after the broken promise: nothing to join");
    scene_free(&s);
}

Test(peer_engine, a_refused_model_request_goes_to_the_next_neighbour_at_once)
{
    scene s;
    scene_make(&s, "complete", 3, 10);
    outputs o;
    engine_link_up(s.e[0], 1, 0);
    engine_link_up(s.e[0], 2, 0);
    engine_come_back(s.e[0], ENGINE_WITHOUT_STATE, 0, 0);
    engine_advance(s.e[0], 0);
    engine_timer(s.e[0], 256 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, -1), 1);
    const int first = send_of(&o, ENGINE_MODEL_REQUEST)->peer;
    engine_unsent(s.e[0], send_of(&o, ENGINE_MODEL_REQUEST), -EAGAIN, 257 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, 3 - first), 1, "the next one, without waiting for a tick");
    engine_unsent(s.e[0], send_of(&o, ENGINE_MODEL_REQUEST), -EAGAIN, 258 * MS);
    take(s.e[0], &o);
    cr_assert_eq(o.n_s, 0, "every neighbour tried: the next tick starts over");
    engine_timer(s.e[0], 512 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, -1), 1);
    scene_free(&s);
}

Test(peer_engine, a_joiner_enters_at_the_round_of_the_model_it_gets)
{
    scene s;
    scene_make(&s, "complete", 3, 10);
    outputs o;
    engine_come_back(s.e[0], ENGINE_WITHOUT_STATE, 0, 0);
    engine_advance(s.e[0], 0);
    engine_link_up(s.e[0], 1, MS);
    engine_link_up(s.e[0], 2, MS);
    const float z[DIM] = {4, 5, 6};
    engine_model(s.e[0], 1, 7, z, 1, 2 * MS);
    take(s.e[0], &o);
    cr_assert_eq(engine_joining(s.e[0]), 0);
    cr_assert_eq(engine_start_round(s.e[0]), 7);
    cr_assert_eq(engine_round(s.e[0]), 7);
    cr_assert_float_eq(gsp_debias(&s.e[0]->rp.g)[2], 6.0f, 1e-6);
    scene_free(&s);
}

/* A peer that has done every round stays for its in-neighbours' last
 * shares, but a neighbour that stays alive and never finishes (a member
 * that keeps reconnecting would) keeps it no longer than the round timeout
 * plus 2 x engine_hold_max rounds at twice its mean round time. */
Test(peer_engine, a_finished_peer_waits_for_an_in_neighbour_that_never_finishes_for_a_bounded_time)
{
    scene s;
    scene_make(&s, "ring", 2, 3);
    s.e[1]->rp.pace.c.total_rounds = 100; /* peer 1 has far more to do */
    all_up(&s, 0);
    outputs o0, o1, o;
    double t = 0;
    for (int r = 0; r < 2; r++, t += 10 * MS) {
        round_of(&s, 0, t, &o0);
        round_of(&s, 1, t, &o1);
        deliver_push(&s, &o0, 1, t);
        deliver_push(&s, &o1, 0, t);
    }
    round_of(&s, 0, t, &o0); /* its last; peer 1 stays at round 2 */
    t += 10 * MS;
    engine_advance(s.e[0], t);
    take(s.e[0], &o);
    while (!event_of(&o, ENGINE_DONE)) { /* (its last round's wait for peer 1's share ends at a deadline) */
        cr_assert_lt(t, 1, "peer 0 is done within its round timeout");
        t += MS;
        engine_timer(s.e[0], t);
        take(s.e[0], &o);
    }
    cr_assert_null(event_of(&o, ENGINE_FINISHED), "peer 0 has done its 3 rounds and waits for peer 1");
    const double done_at = t, mean = (done_at - 0) / 3;
    const double limit = s.c.round_timeout + 2.0 * engine_hold_max(s.e[0]) * mean;
    double now = t;
    for (; now + 64 * MS <= done_at + limit; ) {
        now += 64 * MS;
        engine_heartbeat(s.e[0], 1, 2, now - MS);
        engine_timer(s.e[0], now);
        take(s.e[0], &o);
        cr_assert_null(event_of(&o, ENGINE_FINISHED), "%.3f s after its last round: within %.3f s", now - done_at, limit);
    }
    now += 256 * MS;
    engine_heartbeat(s.e[0], 1, 2, now - MS);
    engine_timer(s.e[0], now);
    take(s.e[0], &o);
    const engine_event *f = event_of(&o, ENGINE_FINISHED);
    cr_assert(f && f->rc == 0, "past the limit it leaves");
    cr_assert_eq(f->goodbye, -1, "its GOODBYE done went already");
    const engine_event *v = event_of(&o, ENGINE_LOG);
    cr_assert(v && v->log == ENGINE_LOG_LEAVING && strstr(v->detail, "waiting for 1"),
              "naming whom it did not wait for: %s", v ? v->detail : "(none)");
    scene_free(&s);
}

/* WIRE.md, MODEL: every value of the payload must be finite; one with a NaN
 * or an infinity is refused as one failing its hash is, and the joiner asks
 * the next neighbour, taking nothing of it. */
Test(peer_engine, a_model_that_is_not_finite_is_refused_and_the_next_neighbour_asked)
{
    scene s;
    outputs o;
    joiner_scene(&s, &o);
    cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, 1), 1);
    const float bad[2][DIM] = {{4, NAN, 6}, {4, 5, -INFINITY}};
    for (int k = 0; k < 2; k++) {
        const int from = k ? 2 : 1;
        engine_model(s.e[0], from, 7, bad[k], 1, (2 + k) * MS);
        take(s.e[0], &o);
        cr_assert_eq(engine_joining(s.e[0]), 1, "%s: not taken", k ? "an infinity" : "a NaN");
        cr_assert_eq(sends(&o, ENGINE_MODEL_REQUEST, 3 - from), 1, "%s: the next neighbour asked at once",
                     k ? "an infinity" : "a NaN");
        cr_assert_null(event_of(&o, ENGINE_STEP));
    }
    const float z[DIM] = {4, 5, 6};
    engine_model(s.e[0], 1, 7, z, 1, 4 * MS);
    cr_assert_eq(engine_joining(s.e[0]), 0, "a finite one is taken");
    cr_assert(gsp_floats_finite(gsp_debias(&s.e[0]->rp.g), DIM));
    scene_free(&s);
}

Test(peer_engine, a_stop_during_a_step_finishes_after_it_and_says_stopped)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    all_up(&s, 0);
    outputs o;
    engine_advance(s.e[0], 0);
    take(s.e[0], &o);
    engine_stop(s.e[0], MS);
    take(s.e[0], &o);
    cr_assert_null(event_of(&o, ENGINE_FINISHED), "the running step first");
    engine_step_done(s.e[0], 2 * MS);
    engine_advance(s.e[0], 2 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_PUSH, 1), 1, "its round's share still goes");
    const engine_event *f = event_of(&o, ENGINE_FINISHED);
    cr_assert_not_null(f);
    cr_assert_eq(f->rc, 0);
    cr_assert_eq(f->goodbye, 0, "GOODBYE stopped: route around it");
    scene_free(&s);
}

/* Both peers of a ring of 2 step round 0: each one's share for the other
 * in a (peer 0's) and b (peer 1's). */
static void rounds_zero(scene *s, outputs *a, outputs *b)
{
    outputs o;
    engine_advance(s->e[0], 0), engine_advance(s->e[1], 0);
    take(s->e[0], &o), take(s->e[1], &o);
    engine_step_done(s->e[0], 2 * MS), engine_step_done(s->e[1], 2 * MS);
    take(s->e[0], a), take(s->e[1], b);
}

/* A leave: the leaver says goodbye (GOODBYE "stopped") to each connected
 * neighbour and waits; the neighbour routes around it at once and answers
 * ("seen") after the share it had already sent it; with the answer in,
 * nothing more comes, and the leaver hands on all of its weight and what
 * came (w = 0 at the leaver, the run's 2 at peer 1, nothing in flight). */
Test(peer_engine, a_leave_waits_for_the_answers_to_its_goodbye_then_hands_its_weight_on)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    all_up(&s, 0);
    outputs a, b, o, n;
    rounds_zero(&s, &a, &b);
    engine_leave(s.e[0], 3 * MS);
    engine_advance(s.e[0], 3 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_GOODBYE, 1), 1, "goodbye first");
    cr_assert_eq(send_of(&o, ENGINE_GOODBYE)->done, ENGINE_BYE_STOPPED);
    cr_assert_null(event_of(&o, ENGINE_FINISHED), "it waits for the answer");
    cr_assert_eq(sends(&o, ENGINE_PUSH, -1), 0);
    engine_goodbye(s.e[1], 0, ENGINE_BYE_STOPPED, 4 * MS);
    take(s.e[1], &n);
    cr_assert_eq(sends(&n, ENGINE_GOODBYE, 0), 1, "peer 1 answers");
    cr_assert_eq(send_of(&n, ENGINE_GOODBYE)->done, ENGINE_BYE_SEEN);
    deliver_push(&s, &b, 0, 5 * MS); /* (sent before the answer: it arrives first) */
    take(s.e[0], &o);
    cr_assert_null(event_of(&o, ENGINE_FINISHED), "still waiting for the answer");
    engine_goodbye(s.e[0], 1, ENGINE_BYE_SEEN, 6 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_PUSH, 1), 1, "all of its weight to peer 1");
    const engine_event *f = event_of(&o, ENGINE_FINISHED);
    cr_assert_not_null(f, "and then it is gone");
    cr_assert_eq(f->goodbye, 0, "GOODBYE stopped: route around it");
    cr_assert(engine_left(s.e[0]));
    cr_assert_eq(engine_gossip(s.e[0])->w, 0.0);
    deliver_push(&s, &a, 1, 7 * MS);
    deliver_push(&s, &o, 1, 7 * MS);
    engine_drain(s.e[1]);
    cr_assert_float_eq(engine_gossip(s.e[1])->w, 2.0, 1e-12, "peer 1 holds the run's weight: %.15g",
                       engine_gossip(s.e[1])->w);
    cr_assert(!engine_pace(s.e[1])->alive[0], "the hand-off did not bring the leaver back");
    scene_free(&s);
}

/* Over links that lose nothing while up (sgp peer's TCP), a leave finishes
 * only once everything it sent is acknowledged: a neighbour running behind
 * may have refused its last shares at its door, and asks for them (a NACK)
 * while the leaver still answers; the SYNC carries the hand-off too. */
Test(peer_engine, over_reliable_links_a_leave_finishes_once_all_it_sent_is_acknowledged)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    s.c.reliable_links = 1;
    all_up(&s, 0);
    outputs a, b, o, n;
    rounds_zero(&s, &a, &b); /* (peer 0's share is seq 1) */
    engine_leave(s.e[0], 3 * MS);
    engine_advance(s.e[0], 3 * MS);
    deliver_push(&s, &b, 0, 4 * MS);
    engine_goodbye(s.e[0], 1, ENGINE_BYE_SEEN, 5 * MS);
    take(s.e[0], &o);
    cr_assert_eq(sends(&o, ENGINE_PUSH, 1), 1, "the hand-off goes (seq 2)");
    cr_assert_null(event_of(&o, ENGINE_FINISHED), "and waits for its acknowledgement");
    engine_ack(s.e[0], 1, 1, 6 * MS);
    take(s.e[0], &o);
    cr_assert_null(event_of(&o, ENGINE_FINISHED), "seq 1 is not all it sent");
    engine_nack(s.e[0], 1, 1, 7 * MS); /* peer 1 refused the hand-off at its door */
    take(s.e[0], &n);
    cr_assert_eq(sends(&n, ENGINE_PUSH, 1), 1, "the leaver answers with a SYNC");
    cr_assert_null(event_of(&n, ENGINE_FINISHED));
    engine_ack(s.e[0], 1, n.s[0].msg.seq, 8 * MS);
    take(s.e[0], &o);
    const engine_event *f = event_of(&o, ENGINE_FINISHED);
    cr_assert(f && f->goodbye == 0 && engine_left(s.e[0]), "acknowledged: it is gone");
    deliver_push(&s, &a, 1, 9 * MS);
    deliver_push(&s, &n, 1, 9 * MS);
    engine_drain(s.e[1]);
    cr_assert_float_eq(engine_gossip(s.e[1])->w, 2.0, 1e-12, "the SYNC brought the hand-off: %.15g",
                       engine_gossip(s.e[1])->w);
    scene_free(&s);
}

/* A finished peer, over such links, stays until its out-neighbours have
 * acknowledged its last shares (or a NACK of theirs is answered). */
Test(peer_engine, over_reliable_links_a_finished_peer_waits_for_its_last_shares_acknowledgement)
{
    scene s;
    scene_make(&s, "ring", 2, 1);
    s.c.reliable_links = 1;
    all_up(&s, 0);
    outputs o0, o1, o;
    round_of(&s, 0, 0, &o0);
    round_of(&s, 1, 0, &o1);
    deliver_push(&s, &o1, 0, MS);
    engine_goodbye(s.e[0], 1, ENGINE_BYE_DONE, 2 * MS);
    engine_advance(s.e[0], 2 * MS);
    take(s.e[0], &o);
    cr_assert_not_null(event_of(&o, ENGINE_DONE));
    cr_assert_null(event_of(&o, ENGINE_FINISHED), "its share to peer 1 is not acknowledged yet");
    engine_ack(s.e[0], 1, 1, 3 * MS);
    take(s.e[0], &o);
    cr_assert_not_null(event_of(&o, ENGINE_FINISHED), "acknowledged: it closes");
    scene_free(&s);
}

/* An answer that never comes is waited for a dead timeout at most. */
Test(peer_engine, a_leave_waits_a_dead_timeout_at_most_for_an_answer)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    all_up(&s, 0);
    outputs o;
    engine_advance(s.e[0], 0);
    take(s.e[0], &o);
    engine_step_done(s.e[0], 2 * MS);
    take(s.e[0], &o);
    engine_leave(s.e[0], 3 * MS);
    engine_advance(s.e[0], 3 * MS);
    take(s.e[0], &o);
    cr_assert_null(event_of(&o, ENGINE_FINISHED));
    const double dead = engine_pace(s.e[0])->c.dead_timeout;
    cr_assert_leq(engine_wake_at(s.e[0], 3 * MS), 3 * MS + dead + 1e-9, "it wakes by then");
    engine_heartbeat(s.e[0], 1, 0, 3 * MS + dead - 10 * MS); /* alive, but its answer was lost */
    take(s.e[0], &o);
    cr_assert_null(event_of(&o, ENGINE_FINISHED));
    engine_timer(s.e[0], 3 * MS + dead);
    take(s.e[0], &o);
    cr_assert_not_null(event_of(&o, ENGINE_FINISHED), "gone after a dead timeout without an answer");
    cr_assert(engine_left(s.e[0]), "its weight handed on all the same");
    scene_free(&s);
}

/* Found by sgp dst (a peer stopped past its heartbeat tick): a wake time
 * already past is now, or a driver would go back in time (the simulator
 * did, and its peers then routed around each other at times gone by). */
Test(peer_engine, a_wake_time_already_past_is_now)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    all_up(&s, 0);
    outputs o;
    engine_advance(s.e[0], 0);
    take(s.e[0], &o);
    cr_assert_eq(engine_wake_at(s.e[0], 0), 256 * MS, "the first heartbeat tick");
    cr_assert_eq(engine_wake_at(s.e[0], 5.0), 5.0, "frozen past it: the tick is due now, not then");
    scene_free(&s);
}

/* Ticks of peer 0 from *t (in 256 ms steps) up to `until`, peer 1's frame
 * arriving before each when `arriving`: how many times peer 0 routed
 * peer 1 around as silent. */
static int silent_ticks(scene *s, double *t, double until, int arriving)
{
    outputs o;
    int said = 0;
    for (; *t <= until; *t += 256 * MS) {
        if (arriving)
            engine_link_progress(s->e[0], 1, *t - 128 * MS);
        engine_timer(s->e[0], *t);
        take(s->e[0], &o);
        for (int j = 0; j < o.n_v; j++)
            said += o.v[j].kind == ENGINE_LOG && o.v[j].log == ENGINE_LOG_ROUTING_AROUND &&
                    o.v[j].peer == 1 && strcmp(o.v[j].detail, "silent for the dead timeout") == 0;
    }
    return said;
}

/* A silent neighbour is routed around after the dead timeout, with a log
 * line saying why. */
Test(peer_engine, a_silent_neighbour_is_routed_around_after_the_dead_timeout)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    all_up(&s, 0);
    double t = 256 * MS;
    cr_assert_eq(silent_ticks(&s, &t, 1536 * MS, 0), 1);
    cr_assert_eq(engine_pace(s.e[0])->alive[1], 0);
    scene_free(&s);
}

/* A neighbour whose big frame is still arriving (the transport reports
 * each 64 KiB of it) is not silent, however long the frame takes; once the
 * bytes stop, the dead timeout routes it around as before. */
Test(peer_engine, a_neighbour_whose_frame_is_arriving_is_not_silent)
{
    scene s;
    scene_make(&s, "ring", 2, 10);
    all_up(&s, 0);
    double t = 256 * MS;
    cr_assert_eq(silent_ticks(&s, &t, 4096 * MS, 1), 0, "routed around while its frame arrived (4 dead timeouts)");
    cr_assert_eq(engine_pace(s.e[0])->alive[1], 1);
    cr_assert_eq(silent_ticks(&s, &t, t + 1536 * MS, 0), 1, "silent once the bytes stopped");
    scene_free(&s);
}

/* The reference loop computes what the simulator computes: the same
 * engine, the same rounds, only the time differs (tau 0: a round takes what
 * arrived in earlier rounds, in (sender, seq) order, whatever the timing). */
static void reference_equals_simulator(const char *codec_text)
{
    char err[256];
    nn_dataset full_train = {0}, full_test = {0}, train, test;
    cr_assert_eq(nn_data_embedded(&full_train, &full_test, err, sizeof err), 0, "%s", err);
    int idx[1000];
    for (int i = 0; i < 1000; i++)
        idx[i] = i;
    cr_assert_eq(nn_dataset_subset(&full_train, idx, 1000, &train), 0);
    cr_assert_eq(nn_dataset_subset(&full_test, idx, 200, &test), 0);
    topo t;
    parse_error te;
    cr_assert_eq(topo_generate(&t, "exponential", 4, NULL, &te), 0, "%s", te.msg);
    cmp_spec spec;
    cr_assert_eq(cmp_spec_parse(&spec, codec_text, err, sizeof err), 0, "%s", err);
    sim_config c;
    sim_config_defaults(&c);
    c.peer.n_peers = 4, c.peer.topology = &t, c.keep_peer_models = 1;
    c.peer.codec = strcmp(codec_text, "none") ? &spec : NULL;
    c.peer.train.model = "mlp:32", c.peer.train.epochs = 2, c.peer.train.progress = 0;
    train_opts_finish(&c.peer.train);
    sim_result r;
    cr_assert_eq(sim_run(&c, &train, &test, &r, err, sizeof err), 0, "%s", err);

    round_plan plan;
    round_plan_make(&plan, &c.peer.train, train.n, 4, 1);
    peer_settings rc = c.peer; /* the simulator's, with every round waiting as long as it takes */
    rc.round_timeout = 30, rc.barrier = 1;
    nn_model model;
    cr_assert_eq(train_opts_model(&c.peer.train, &train, 256, &model, err, sizeof err), 0, "%s", err);
    engine *peers[4];
    cr_assert_eq(reference_run(&rc, &plan, &train, &model, peers, err, sizeof err), 0, "%s", err);
    for (int i = 0; i < 4; i++) {
        const float *z = gsp_debias(&peers[i]->rp.g);
        cr_assert_eq(engine_round(peers[i]), plan.total_rounds);
        cr_assert_eq(memcmp(z, r.peer_models + (size_t)i * r.parameters, r.parameters * sizeof(float)), 0,
                     "%s: peer %d of the reference loop differs from the simulator's", codec_text, i);
        engine_free(peers[i]);
    }
    nn_model_free(&model);
    sim_result_free(&r);
    topo_free(&t);
    nn_dataset_free(&train), nn_dataset_free(&test), nn_dataset_free(&full_train), nn_dataset_free(&full_test);
}

Test(peer_engine, the_reference_loop_equals_the_simulator_bit_for_bit) { reference_equals_simulator("none"); }

Test(peer_engine, the_reference_loop_equals_the_simulator_compressed) { reference_equals_simulator("stc:0.05"); }
