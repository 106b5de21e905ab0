/* The pacing policy (gossip/gsp_pace.h) and the comeback operations
 * (gsp_jump, gsp_join, gsp_resume, gsp_restart) on virtual time: small real
 * scenarios (a generated topology, a gsp_peer and a gsp_pace per peer),
 * driven by hand at times chosen here, one test per rule of
 * gossip/GUARANTEES.md "Stragglers, leave and join". Times are multiples of
 * MS (1/1024 s, exact in binary) so that deadlines and timeouts are checked
 * at their exact boundaries. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "compress/cmp.h"
#include "gossip/gsp.h"
#include "gossip/gsp_gather.h"
#include "gossip/gsp_pace.h"

TestSuite(gossip_pace, .timeout = 30);

#define MAX_PEERS 8
#define DIM 3
#define MS (1.0 / 1024)

typedef struct scene {
    topo t;
    gsp_pace_config c;
    int n;
    gsp_peer g[MAX_PEERS];
    gsp_pace p[MAX_PEERS];
} scene;

/* n peers on topology `kind`, peer i at x = (i + 1, i + 1.25, i + 1.5) and
 * w = 1, each with a pace made from c at time 0, where every neighbour is
 * connected if `connected`. Fields of c left zero: 100 rounds, dead_timeout
 * 1 s (heartbeat 1/4 s), round_timeout 1/2 s. */
static void scene_make(scene *s, const char *kind, int n, gsp_pace_config c, int connected)
{
    memset(s, 0, sizeof *s);
    parse_error e;
    cr_assert_eq(topo_generate(&s->t, kind, n, NULL, &e), 0, "%s", e.msg);
    c.topology = &s->t;
    c.total_rounds = c.total_rounds ? c.total_rounds : 100;
    c.dead_timeout = c.dead_timeout > 0 ? c.dead_timeout : 1.0;
    c.round_timeout = c.round_timeout > 0 ? c.round_timeout : 0.5;
    s->c = c, s->n = n;
    for (int i = 0; i < n; i++) {
        float x0[DIM];
        for (int d = 0; d < DIM; d++)
            x0[d] = (float)i + 1.0f + 0.25f * (float)d;
        cr_assert_eq(gsp_init(&s->g[i], i, n, DIM, c.tau, x0), 0);
        cr_assert_eq(gsp_pace_init(&s->p[i], &s->c, i, 0.0), 0);
        for (int k = 0; k < s->p[i].n_nb && connected; k++)
            gsp_pace_up(&s->p[i], s->p[i].nb[k].peer, 0.0);
    }
}

static void scene_free(scene *s)
{
    for (int i = 0; i < s->n; i++)
        gsp_free(&s->g[i]), gsp_pace_free(&s->p[i]);
    topo_free(&s->t);
}

static gsp_pace_nb *nb(scene *s, int i, int q) { return &s->p[i].nb[s->p[i].slot[q]]; }

static gsp_pace_action next(scene *s, int i, double now, gsp_pace_decision *d)
{
    return gsp_pace_next(&s->p[i], &s->g[i], NULL, 0, now, d);
}

/* Peer i's shares of its current round, routed by the policy and emitted
 * (to nobody: what i sends is not under test here). */
static void share_out(scene *s, int i, double now, const uint8_t *busy, topo_out *out)
{
    gsp_pace_route(&s->p[i], &s->g[i], now, busy, out);
    gsp_msg m[TOPO_MAX_OUT];
    cr_assert_eq(gsp_emit(&s->g[i], out, m), out->n);
}

/* Peer i's round starts at now (the policy must say START) and its shares
 * go out; routed: where they went (may be NULL). */
static gsp_pace_decision start(scene *s, int i, double now, topo_out *routed)
{
    gsp_pace_decision d;
    long r = s->g[i].round;
    cr_assert_eq(next(s, i, now, &d), GSP_PACE_START, "peer %d, round %ld, at %g s", i, r, now);
    gsp_pace_started(&s->p[i], now);
    topo_out out;
    share_out(s, i, now, NULL, routed ? routed : &out);
    return d;
}

/* Peer 0's round waits from *t until its deadline, then starts without the
 * missing in-neighbours: returns whom it marked late; *t = the deadline. */
static gsp_pace_decision wait_out(scene *s, double *t)
{
    gsp_pace_decision d;
    cr_assert_eq(next(s, 0, *t, &d), GSP_PACE_WAIT);
    *t = d.wake_at;
    return start(s, 0, *t, NULL);
}

/* q emits its round r (moving there first): its message to `to`, valid
 * until q's next emit. */
static gsp_msg emit_to(scene *s, int q, long r, int to)
{
    gsp_jump(&s->g[q], r);
    cr_assert_eq(s->g[q].round, r);
    topo_out out;
    topo_route(&s->t, r, q, NULL, &out);
    gsp_msg m[TOPO_MAX_OUT];
    int n = gsp_emit(&s->g[q], &out, m);
    for (int k = 0; k < n; k++)
        if (m[k].dst == to)
            return m[k];
    cr_assert_fail("peer %d sends nothing to %d in round %ld", q, to, r);
    return m[0];
}

/* ... and it arrives at now: absorbed, heard, taken as a PUSH. */
static void push(scene *s, int q, long r, int to, double now)
{
    gsp_msg m = emit_to(s, q, r, to);
    cr_assert_eq(gsp_absorb(&s->g[to], &m), GSP_APPLIED);
    gsp_pace_heard(&s->p[to], q, now);
    gsp_pace_push(&s->p[to], &s->g[to], q, r, now);
    gsp_pace_acked(&s->p[q], to, m.seq); /* as the receiver acknowledges what it takes in */
}

/* Peer 0 ticks every heartbeat interval from `from` on, first hearing from
 * each connected neighbour not in `quiet` (a bit per peer), until a tick
 * routes somebody around: returns that tick's time, whom in lost[0 .. *n). */
static double first_loss(scene *s, double from, unsigned quiet, int *lost, int *n)
{
    gsp_pace *p = &s->p[0];
    const double hb = gsp_pace_heartbeat(&s->c);
    for (double t = from; t < from + 8; t += hb) {
        for (int k = 0; k < p->n_nb; k++)
            if (p->nb[k].connected && !(quiet >> p->nb[k].peer & 1))
                gsp_pace_heard(p, p->nb[k].peer, t);
        if ((*n = gsp_pace_tick(p, t, lost, MAX_PEERS)) > 0)
            return t;
    }
    cr_assert_fail("nobody routed around in 8 s");
    return -1;
}

/* ---- liveness --------------------------------------------------------------- */

Test(gossip_pace, heartbeat_is_a_quarter_of_the_dead_timeout_at_most_1s)
{
    const double dead[] = {1.0, 0.1, 0.04, 8.0}, beat[] = {0.25, 0.025, 0.01, 1.0};
    for (int k = 0; k < 4; k++) {
        gsp_pace_config c = {.dead_timeout = dead[k]};
        cr_assert_eq(gsp_pace_heartbeat(&c), beat[k], "dead_timeout %g", dead[k]);
    }
}

Test(gossip_pace, init_knows_the_neighbours_and_rejects_a_bad_topology_or_id)
{
    scene s;
    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 0);
    /* exp4: 0 -> 1 and 3 -> 0 in phase 0, 0 -> 2 and 2 -> 0 in phase 1. */
    const gsp_pace *p = &s.p[0];
    cr_assert_eq(p->n_nb, 3);
    cr_assert_eq(p->slot[0], -1, "not its own neighbour");
    cr_assert(!nb(&s, 0, 1)->is_in && nb(&s, 0, 2)->is_in && nb(&s, 0, 3)->is_in);
    for (int q = 0; q < 4; q++)
        cr_assert(p->alive[q]);
    gsp_pace bad;
    gsp_pace_config c = s.c;
    cr_assert_eq(gsp_pace_init(&bad, &c, 4, 0), -EINVAL);
    cr_assert_eq(gsp_pace_init(&bad, &c, -1, 0), -EINVAL);
    c.topology = NULL;
    cr_assert_eq(gsp_pace_init(&bad, &c, 0, 0), -EINVAL);
    gsp_pace_free(&bad);
    gsp_pace_free(&bad);
    scene_free(&s);
}

Test(gossip_pace, silence_for_dead_timeout_routes_around_and_a_frame_revives)
{
    scene s;
    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 1);
    int lost[MAX_PEERS], n;
    cr_assert_eq(first_loss(&s, 0.25, 1u << 1, lost, &n), 1.25, "silent for exactly dead_timeout at 1 s is not yet gone");
    cr_assert(n == 1 && lost[0] == 1 && !s.p[0].alive[1]);
    cr_assert_eq(s.p[0].stats.neighbours_lost, 1);
    topo_out out;
    gsp_pace_route(&s.p[0], &s.g[0], 1.25, NULL, &out);
    cr_assert(out.n == 1 && out.peer[0] == 2 && out.weight[0] == 0.5, "round 0's share for 1 goes to the next live peer");
    cr_assert_eq(gsp_pace_tick(&s.p[0], 1.5, lost, MAX_PEERS), 0, "lost once, reported once");
    cr_assert_eq(gsp_pace_heard(&s.p[0], 1, 1.5), 1, "a frame from it on its connection brings it back");
    cr_assert(s.p[0].alive[1]);
    cr_assert_eq(gsp_pace_heard(&s.p[0], 1, 1.5), 0);
    scene_free(&s);
}

Test(gossip_pace, disconnection_for_dead_timeout_routes_around_and_a_reconnect_revives)
{
    scene s;
    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 1);
    gsp_pace_down(&s.p[0], 1, 0.25);
    gsp_pace_down(&s.p[0], 1, 0.75); /* already down: the outage still counts from 0.25 */
    int lost[MAX_PEERS], n;
    cr_assert_eq(first_loss(&s, 0.25, 0, lost, &n), 1.5);
    cr_assert(n == 1 && lost[0] == 1);
    cr_assert_eq(gsp_pace_heard(&s.p[0], 1, 1.5), 0, "no connection: nothing brings it back but a reconnect");
    cr_assert(!s.p[0].alive[1]);
    cr_assert_eq(gsp_pace_up(&s.p[0], 1, 1.75), 1);
    cr_assert(s.p[0].alive[1]);
    cr_assert_eq(gsp_pace_up(&s.p[0], 1, 1.75), 0);
    scene_free(&s);
}

/* Peer 1 ticks every heartbeat interval, hearing 2, until 0 (down since 0)
 * is routed around, at 1.25 s. */
/* Ticks of peer 1 from 0.25 s to 1.25 s, hearing 2 (if hear_2) at each: 0,
 * down since 0, is routed around after the dead timeout (and 2 too unless
 * heard). */
static void lose_in_neighbour_0(scene *s, int hear_2)
{
    int lost[MAX_PEERS], n = 0;
    for (double t = 0.25; t <= 1.25; t += 0.25) {
        if (hear_2)
            gsp_pace_heard(&s->p[1], 2, t);
        n += gsp_pace_tick(&s->p[1], t, lost, MAX_PEERS);
    }
    cr_assert(n >= 1 && !s->p[1].alive[0], "0 routed around after the dead timeout");
}

/* ring4: peer 1's only in-neighbour is 0. Lost (disconnected for the dead
 * timeout) while 1 hears nobody else either (2 is down too), 1 does not go
 * on alone at once: it waits up to alone_wait (3 s) for one to come back,
 * and a reconnect ends the wait. */
Test(gossip_pace, a_peer_that_lost_every_in_neighbour_waits_for_one_then_goes_on_alone)
{
    scene s;
    scene_make(&s, "ring", 4, (gsp_pace_config){.alone_wait = 3.0}, 1);
    gsp_pace_down(&s.p[1], 0, 0.0);
    gsp_pace_down(&s.p[1], 2, 0.0);
    lose_in_neighbour_0(&s, 0);
    gsp_pace_decision d;
    cr_assert_eq(next(&s, 1, 1.25, &d), GSP_PACE_WAIT);
    cr_assert(d.alone && d.wake_at == 1.5, "asks again at the next heartbeat");
    cr_assert_eq(s.p[1].stats.alone_waits, 1);
    cr_assert_eq(next(&s, 1, 4.0, &d), GSP_PACE_WAIT);
    cr_assert(d.alone && d.wake_at == 4.25);
    cr_assert_eq(next(&s, 1, 4.25, &d), GSP_PACE_START, "alone_wait is over: on alone");
    cr_assert(!d.alone && s.p[1].stats.alone_waits == 1);
    scene_free(&s);

    scene_make(&s, "ring", 4, (gsp_pace_config){.alone_wait = 3.0}, 1);
    gsp_pace_down(&s.p[1], 0, 0.0);
    gsp_pace_down(&s.p[1], 2, 0.0);
    lose_in_neighbour_0(&s, 0);
    cr_assert_eq(next(&s, 1, 1.25, &d), GSP_PACE_WAIT);
    cr_assert_eq(gsp_pace_up(&s.p[1], 0, 2.0), 1, "0 is back");
    cr_assert_eq(next(&s, 1, 2.0, &d), GSP_PACE_START, "round 0 needs nothing: the wait is over");
    cr_assert(!d.alone && s.p[1].alone_since < 0);
    scene_free(&s);

    /* Without alone_wait, the dead timeout and two heartbeats (1.5 s here)
     * are the limit (or the round timeout, if longer): by then the lost ones
     * are routed around and a live neighbour's shares would reach it. A peer
     * whose in-neighbours finished (done) is not alone. */
    scene_make(&s, "ring", 4, (gsp_pace_config){0}, 1);
    gsp_pace_goodbye(&s.p[1], 0, 1);
    cr_assert_eq(next(&s, 1, MS, &d), GSP_PACE_START);
    cr_assert(!d.alone);
    gsp_pace_goodbye(&s.p[2], 1, 0);
    cr_assert_eq(next(&s, 2, 0.5 + MS, &d), GSP_PACE_WAIT, "1 stopped, 3 not heard for two heartbeats: alone");
    cr_assert_eq(next(&s, 2, 0.5 + MS + 1.5, &d), GSP_PACE_START);
    scene_free(&s);
}

/* ring4 again, but 1 still hears its out-neighbour 2: it is not alone.
 * The survivors (or a side of a partition) train on as a cluster of their
 * own, each held within reach of the others by the brake, rather than each
 * waiting for the lost one. */
Test(gossip_pace, a_peer_that_still_hears_a_live_neighbour_is_not_alone)
{
    scene s;
    scene_make(&s, "ring", 4, (gsp_pace_config){.alone_wait = 3.0}, 1);
    gsp_pace_down(&s.p[1], 0, 0.0);
    lose_in_neighbour_0(&s, 1);
    gsp_pace_decision d;
    cr_assert_eq(next(&s, 1, 1.25, &d), GSP_PACE_START);
    cr_assert(!d.alone && s.p[1].stats.alone_waits == 0);
    /* Heard, 2 is the run's round as far as 1 knows (the brake holds 1
     * within reach of it); a share of 2 routed around dead peers makes it an
     * in-neighbour (it counts as one from then on). */
    gsp_pace_claim(&s.p[1], 2, 7, 1.3);
    cr_assert_eq(gsp_pace_cluster_round(&s.p[1], 1.3), 7);
    gsp_pace_heard(&s.p[1], 2, 1.3);
    gsp_pace_push(&s.p[1], &s.g[1], 2, 7, 1.3);
    cr_assert(s.p[1].nb[s.p[1].slot[2]].pushing);
    cr_assert_eq(gsp_pace_cluster_round(&s.p[1], 1.3), 8);
    scene_free(&s);
}

/* Killed or restarting in-neighbours are silent or disconnected for up to
 * the dead timeout before they are routed around: a peer that hears none of
 * them waits in that time too (nothing else would hold it: there is nobody
 * to wait for a share from, and no share reaches it yet), instead of racing
 * ahead alone. Once they are routed around, one that still hears an
 * out-neighbour goes on with it (a side of a partition): that neighbour's
 * shares reach it by routing around. */
Test(gossip_pace, a_peer_that_hears_no_in_neighbour_waits_before_the_dead_timeout_too)
{
    scene s;
    scene_make(&s, "exponential", 4, (gsp_pace_config){.alone_wait = 3.0, .dead_timeout = 5.0}, 1);
    /* exp4: peer 0 hears from 3 and 2; both go down at 1 s, and 1 is silent. */
    gsp_pace_down(&s.p[0], 3, 1.0);
    gsp_pace_down(&s.p[0], 2, 1.0);
    gsp_pace_decision d;
    cr_assert_eq(next(&s, 0, 3.0 + MS, &d), GSP_PACE_WAIT);
    cr_assert(d.alone && s.p[0].alive[2] && s.p[0].alive[3], "waits, though 2 and 3 are not routed around yet");
    cr_assert_eq(gsp_pace_up(&s.p[0], 2, 3.5), 0, "2 is back before the dead timeout");
    cr_assert_eq(next(&s, 0, 3.5, &d), GSP_PACE_START);
    cr_assert(!d.alone);
    scene_free(&s);

    scene_make(&s, "exponential", 4, (gsp_pace_config){.alone_wait = 3.0, .dead_timeout = 5.0}, 1);
    gsp_pace_down(&s.p[0], 3, 1.0);
    gsp_pace_down(&s.p[0], 2, 1.0);
    gsp_pace_heard(&s.p[0], 1, 3.0);
    gsp_pace_claim(&s.p[0], 1, 0, 3.0);
    cr_assert_eq(next(&s, 0, 3.0 + MS, &d), GSP_PACE_WAIT, "1 is heard, but 2 and 3 may still come back");
    cr_assert(d.alone);
    int lost[MAX_PEERS];
    gsp_pace_heard(&s.p[0], 1, 6.0 + MS);
    cr_assert_eq(gsp_pace_tick(&s.p[0], 6.0 + MS, lost, MAX_PEERS), 2, "2 and 3 routed around");
    cr_assert_eq(next(&s, 0, 6.0 + 2 * MS, &d), GSP_PACE_START, "then 0 and 1 go on together");
    cr_assert(!d.alone);
    scene_free(&s);
}

/* A catch-up of more than a twentieth of the run (and twice the catch-up
 * threshold) means the model missed that much training: the policy waits
 * for the driver to take a neighbour's model (gsp_adopt keeps w); a short
 * catch-up, as a straggler's, goes on with its own. */
Test(gossip_pace, a_long_catch_up_waits_for_a_neighbours_model_and_keeps_the_weight)
{
    scene s;
    scene_make(&s, "exponential", 8, (gsp_pace_config){.total_rounds = 1000}, 1);
    gsp_pace_decision d;
    for (int q = 4; q <= 7; q++) /* (exp8: 0 hears from 7, 6 and 4) */
        gsp_pace_claim(&s.p[0], q, 20, 0);
    cr_assert_eq(next(&s, 0, MS, &d), GSP_PACE_START);
    cr_assert(d.jumped_from == 0 && !d.refresh && s.g[0].round == 20, "20 rounds (< 50): its own model");
    for (int q = 4; q <= 7; q++)
        gsp_pace_claim(&s.p[0], q, 600, 0);
    cr_assert_eq(next(&s, 0, 2 * MS, &d), GSP_PACE_WAIT);
    cr_assert(d.refresh && d.jumped_from == 20 && s.g[0].round == 600 && s.p[0].stats.refreshes == 1);
    cr_assert_eq(next(&s, 0, 3 * MS, &d), GSP_PACE_WAIT, "until the driver has a model");
    const double w = s.g[0].w = 0.75;
    const float z[DIM] = {9, 8, 7};
    gsp_adopt(&s.g[0], z);
    gsp_pace_joined(&s.p[0]);
    cr_assert(s.g[0].w == w && s.g[0].x[0] == 0.75f * 9 && s.g[0].x[2] == 0.75f * 7, "x = w z, w kept");
    for (int q = 4; q <= 7; q++)
        gsp_pace_heard(&s.p[0], q, 4 * MS);
    cr_assert_eq(next(&s, 0, 4 * MS, &d), GSP_PACE_START);
    cr_assert(!d.refresh && s.g[0].round == 600);
    scene_free(&s);
}

Test(gossip_pace, a_neighbour_never_connected_is_lost_after_the_barrier_and_dead_timeout)
{
    for (int barrier = 0; barrier <= 1; barrier++) {
        scene s;
        scene_make(&s, "exponential", 4, (gsp_pace_config){.barrier = barrier}, 0);
        gsp_pace_up(&s.p[0], 2, 0);
        gsp_pace_up(&s.p[0], 3, 0);
        int lost[MAX_PEERS], n;
        double t = first_loss(&s, 0.25, 0, lost, &n);
        cr_assert_eq(t, barrier ? 1.75 : 1.25, "barrier %d: round_timeout (0.5) + dead_timeout (1), not before", barrier);
        cr_assert(n == 1 && lost[0] == 1);
        scene_free(&s);
    }
}

Test(gossip_pace, a_late_tick_blames_nobody)
{
    /* Every neighbour silent from 0 on. Ticks dead_timeout / 2 apart are on
     * time: at 1.25 all are gone. A tick more than that after the previous
     * one means this peer was not running: nobody is blamed, the silence
     * counts from then. */
    const double on_time[] = {0.25, 0.75, 1.25}, late[] = {0.5, 1 + MS};
    scene s;
    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 1);
    int lost[MAX_PEERS];
    for (int k = 0; k < 3; k++)
        cr_assert_eq(gsp_pace_tick(&s.p[0], on_time[k], lost, MAX_PEERS), k == 2 ? 3 : 0, "tick at %g", on_time[k]);
    scene_free(&s);
    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 1);
    for (int k = 0; k < 2; k++)
        cr_assert_eq(gsp_pace_tick(&s.p[0], late[k], lost, MAX_PEERS), 0, "tick at %g", late[k]);
    int n;
    cr_assert_eq(first_loss(&s, 1.25 + MS, ~0u, lost, &n), 2.25 + MS);
    cr_assert_eq(n, 3);
    scene_free(&s);
}

Test(gossip_pace, heartbeat_is_due_to_a_connected_neighbour_sent_nothing_lately)
{
    scene s;
    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 0);
    cr_assert(!gsp_pace_heartbeat_due(&s.p[0], 1, 0), "not connected");
    gsp_pace_up(&s.p[0], 1, 0);
    cr_assert(gsp_pace_heartbeat_due(&s.p[0], 1, 0), "nothing sent yet");
    gsp_pace_sent(&s.p[0], 1, 0);
    cr_assert(!gsp_pace_heartbeat_due(&s.p[0], 1, 0.25 - MS));
    cr_assert(gsp_pace_heartbeat_due(&s.p[0], 1, 0.25));
    cr_assert(!gsp_pace_heartbeat_due(&s.p[0], 0, 0.25), "not a neighbour");
    scene_free(&s);
}

/* ---- deadlines and late marks ----------------------------------------------- */

/* count rounds of `dur` seconds each, ending at *t. */
static void measure(gsp_pace *p, double *t, double dur, int count)
{
    for (int k = 0; k < count; k++)
        gsp_pace_started(p, *t += dur);
}

Test(gossip_pace, deadline_is_twice_the_lower_quartile_of_the_last_32_rounds_within_20ms_and_round_timeout)
{
    scene s;
    scene_make(&s, "ring", 4, (gsp_pace_config){0}, 0);
    gsp_pace *p = &s.p[0];
    double t = 0;
    gsp_pace_started(p, t); /* the first start measures nothing */
    for (int k = 0; k < 8; k++) {
        cr_assert_eq(gsp_pace_deadline(p), 0.5, "%d rounds measured: round_timeout", k);
        measure(p, &t, (64 - 8 * k) * MS, 1); /* 64, 56, ..., 8 ms */
    }
    cr_assert_eq(gsp_pace_deadline(p), 48 * MS, "2 x 24 ms, the lower quartile (the median would give 80 ms)");
    measure(p, &t, 4 * MS, 32);
    cr_assert_eq(gsp_pace_deadline(p), 0.02, "2 x 4 ms is below the 20 ms floor");
    measure(p, &t, 64 * MS, 23);
    cr_assert_eq(gsp_pace_deadline(p), 0.02, "9 of the last 32 rounds took 4 ms");
    measure(p, &t, 64 * MS, 1);
    cr_assert_eq(gsp_pace_deadline(p), 128 * MS, "8 of the last 32 took 4 ms: the older ones are forgotten");
    measure(p, &t, 1.0, 32);
    cr_assert_eq(gsp_pace_deadline(p), 0.5, "at most round_timeout");
    scene_free(&s);
}

/* The all-gather's peers are patient: the same rounds give at least
 * round_timeout, and rounds longer than it give twice their lower quartile
 * (a peer that does not wait ignores the late message and sets its sender
 * apart); a fixed deadline is used as given. */
Test(gossip_pace, an_all_gather_deadline_is_at_least_round_timeout)
{
    scene s;
    scene_make(&s, "complete", 4, (gsp_pace_config){.patient = 1}, 0);
    gsp_pace *p = &s.p[0];
    double t = 0;
    gsp_pace_started(p, t);
    cr_assert_eq(gsp_pace_deadline(p), 0.5, "nothing measured: round_timeout");
    measure(p, &t, 24 * MS, 8);
    cr_assert_eq(gsp_pace_deadline(p), 0.5, "2 x 24 ms is below round_timeout: round_timeout");
    measure(p, &t, 2.0, 32);
    cr_assert_eq(gsp_pace_deadline(p), 4.0, "rounds of 2 s: 2 x 2 s, past round_timeout");
    for (int k = 0; k < 32; k++) /* rounds a deadline cut short */
        p->forced = 1, gsp_pace_started(p, t += 3.0);
    cr_assert_eq(gsp_pace_deadline(p), 6.0, "rounds a deadline cut short are measured too");
    scene_free(&s);
    scene_make(&s, "complete", 4, (gsp_pace_config){.patient = 1}, 0);
    t = 0;
    gsp_pace_started(&s.p[0], t);
    measure(&s.p[0], &t, 1.0, 1);
    cr_assert_eq(gsp_pace_deadline(&s.p[0]), 2.0, "from the first round measured on");
    scene_free(&s);
    scene_make(&s, "complete", 4, (gsp_pace_config){.patient = 1, .round_deadline = 0.1}, 0);
    t = 0;
    measure(&s.p[0], &t, 2.0, 20);
    cr_assert_eq(gsp_pace_deadline(&s.p[0]), 0.1, "a fixed deadline as given");
    scene_free(&s);
}

Test(gossip_pace, a_fixed_round_deadline_is_used_as_given_up_to_round_timeout)
{
    const double fixed[] = {0.1, 2.0}, want[] = {0.1, 0.5};
    for (int k = 0; k < 2; k++) {
        scene s;
        scene_make(&s, "ring", 4, (gsp_pace_config){.round_deadline = fixed[k]}, 0);
        double t = 0;
        cr_assert_eq(gsp_pace_deadline(&s.p[0]), want[k]);
        measure(&s.p[0], &t, 4 * MS, 20);
        cr_assert_eq(gsp_pace_deadline(&s.p[0]), want[k], "not derived from the rounds");
        scene_free(&s);
    }
}

Test(gossip_pace, a_missing_in_neighbour_is_marked_late_exactly_at_the_deadline)
{
    /* ring4: peer 0's round r waits for 3's round r - 1. Rounds 1 to 8 take
     * 4, 8, ..., 32 ms, each waiting for 3 first; round 9 waits in vain. */
    scene s;
    scene_make(&s, "ring", 4, (gsp_pace_config){0}, 1);
    double t = 0;
    gsp_pace_decision d;
    start(&s, 0, t, NULL);
    for (long r = 1; r <= 8; r++) {
        t += (double)r * 4 * MS;
        cr_assert_eq(next(&s, 0, t, &d), GSP_PACE_WAIT);
        cr_assert_eq(d.wake_at, t + 0.5, "round %ld: round_timeout until 8 rounds are measured", r);
        push(&s, 3, r - 1, 0, t);
        start(&s, 0, t, NULL);
    }
    const double since = t += MS, until = since + 24 * MS; /* 2 x 12 ms, the lower quartile */
    cr_assert_eq(next(&s, 0, t, &d), GSP_PACE_WAIT);
    cr_assert_eq(d.wake_at, until);
    cr_assert_eq(next(&s, 0, until - MS, &d), GSP_PACE_WAIT);
    cr_assert_eq(d.wake_at, until, "the deadline counts from when the round began to wait");
    cr_assert(!nb(&s, 0, 3)->late && s.p[0].stats.late_marks == 0, "not late before the deadline");
    d = start(&s, 0, until, NULL);
    cr_assert(d.n_late == 1 && d.late[0] == 3);
    cr_assert(nb(&s, 0, 3)->late && nb(&s, 0, 3)->late_count == 1);
    cr_assert_eq(s.p[0].stats.late_marks, 1);
    cr_assert_eq(s.p[0].n_recent, 8, "a round the deadline cut short is not measured");
    d = start(&s, 0, until + MS, NULL);
    cr_assert_eq(d.n_late, 0, "round 10 does not wait for the late neighbour");
    cr_assert_eq(s.p[0].stats.late_marks, 1);
    scene_free(&s);
}

/* The all-gather's peers wait for a late neighbour again in the round after
 * the one it was marked late in: not waiting would set it apart each round. */
Test(gossip_pace, an_all_gather_peer_waits_for_a_late_neighbour_again_the_next_round)
{
    scene s;
    scene_make(&s, "ring", 4, (gsp_pace_config){.patient = 1, .round_timeout = 0.05}, 1);
    double t = 0;
    gsp_pace_decision d;
    start(&s, 0, t, NULL);
    for (long r = 1; r <= 8; r++) { /* rounds of 4 ms, each waiting for 3 first */
        t += 4 * MS;
        cr_assert_eq(next(&s, 0, t, &d), GSP_PACE_WAIT);
        push(&s, 3, r - 1, 0, t);
        start(&s, 0, t, NULL);
    }
    t += MS;
    d = wait_out(&s, &t);
    cr_assert(d.n_late == 1 && d.late[0] == 3 && s.p[0].stats.late_marks == 1, "late at the deadline");
    cr_assert_eq(next(&s, 0, t + MS, &d), GSP_PACE_WAIT, "round 10 waits for the late neighbour again");
    cr_assert_eq(d.wake_at, t + MS + 0.05, "for the whole deadline, round_timeout (2 x 4 ms is shorter)");
    scene_free(&s);
}

/* A neighbour that missed a deadline is waited for again once it has been
 * on time four times for each deadline it missed (gsp_pace_nb.debt): a
 * straggler that catches up by jumps is on time once after each jump, and
 * waiting for it again at once cost the others a deadline each time (one
 * 4x-slow peer of 8 slowed the rest by 16%; 9.9% with the debt). */
Test(gossip_pace, a_late_neighbour_is_waited_for_again_after_four_pushes_on_time_per_miss)
{
    scene s;
    scene_make(&s, "ring", 4, (gsp_pace_config){.round_deadline = 64 * MS}, 1);
    double t = 0;
    start(&s, 0, t, NULL);
    cr_assert_eq(wait_out(&s, &t).late[0], 3);
    cr_assert_eq(nb(&s, 0, 3)->debt, 4);
    for (long r = 1; r <= 3; r++) {
        push(&s, 3, r, 0, t); /* on time: the round needed, or later */
        cr_assert(nb(&s, 0, 3)->late, "on time %ld of 4: still not waited for", r);
        start(&s, 0, t, NULL);
    }
    push(&s, 3, 4, 0, t);
    cr_assert(!nb(&s, 0, 3)->late && nb(&s, 0, 3)->late_count == 0 && nb(&s, 0, 3)->debt == 0);
    start(&s, 0, t, NULL);
    gsp_pace_decision d;
    cr_assert_eq(next(&s, 0, t + MS, &d), GSP_PACE_WAIT, "round 6 waits for 3 again");
    cr_assert_eq(d.wake_at, t + MS + 64 * MS);
    scene_free(&s);
}

Test(gossip_pace, a_nearly_on_time_push_clears_a_late_mark_only_after_a_single_miss)
{
    /* ring4, tau 0, period 1: late_slack = 2. */
    scene s;
    scene_make(&s, "ring", 4, (gsp_pace_config){.round_deadline = 64 * MS}, 1);
    cr_assert_eq(s.p[0].late_slack, 2);
    gsp_pace_nb *b = nb(&s, 0, 3);
    double t = 0;
    start(&s, 0, t, NULL);
    wait_out(&s, &t); /* round 1: late once */
    start(&s, 0, t, NULL);
    start(&s, 0, t, NULL); /* now at round 4: needs round 3 */
    push(&s, 3, 0, 0, t);
    cr_assert(b->late, "round 0 is more than late_slack behind round 3");
    push(&s, 3, 1, 0, t);
    cr_assert(!b->late && b->late_count == 1, "round 1 is within late_slack of round 3");
    wait_out(&s, &t); /* round 4: late twice */
    cr_assert(b->late && b->late_count == 2);
    cr_assert_eq(s.p[0].stats.late_marks, 2);
    start(&s, 0, t, NULL); /* round 6 needs round 5 */
    push(&s, 3, 4, 0, t);
    cr_assert(b->late, "late twice: nearly on time is not enough");
    for (long r = 5; b->late && r < 20; r++) /* and on time, it pays its debt first */
        push(&s, 3, r, 0, t);
    cr_assert(!b->late && b->late_count == 0 && b->debt == 0);
    start(&s, 0, t, NULL);
    scene_free(&s);
}

Test(gossip_pace, an_inbox_message_counts_as_delivered)
{
    scene s;
    scene_make(&s, "ring", 4, (gsp_pace_config){0}, 1);
    start(&s, 0, 0, NULL);
    gsp_msg m = emit_to(&s, 3, 0, 0); /* arrived, not absorbed */
    gsp_pace_decision d;
    cr_assert_eq(next(&s, 0, MS, &d), GSP_PACE_WAIT);
    cr_assert_eq(gsp_pace_next(&s.p[0], &s.g[0], &m, 1, MS, &d), GSP_PACE_START);
    scene_free(&s);
}

/* ---- barrier, past, run's round, catch-up, brake ------------------------------ */

Test(gossip_pace, round_0_waits_for_every_connection_or_round_timeout)
{
    scene s;
    gsp_pace_decision d;
    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 0);
    cr_assert_eq(next(&s, 0, 0, &d), GSP_PACE_START, "no barrier: round 0 needs nothing");
    scene_free(&s);

    scene_make(&s, "exponential", 4, (gsp_pace_config){.barrier = 1}, 0);
    cr_assert_eq(next(&s, 0, 0, &d), GSP_PACE_WAIT);
    cr_assert_eq(d.wake_at, 0.5);
    gsp_pace_up(&s.p[0], 2, 100 * MS);
    gsp_pace_up(&s.p[0], 3, 100 * MS);
    cr_assert_eq(next(&s, 0, 100 * MS, &d), GSP_PACE_WAIT, "every neighbour, out-only 1 included");
    cr_assert_eq(d.wake_at, 0.5);
    gsp_pace_up(&s.p[0], 1, 200 * MS);
    cr_assert_eq(next(&s, 0, 200 * MS, &d), GSP_PACE_START);
    scene_free(&s);

    scene_make(&s, "exponential", 4, (gsp_pace_config){.barrier = 1}, 0);
    cr_assert_eq(next(&s, 0, 0.5 - MS, &d), GSP_PACE_WAIT);
    cr_assert_eq(next(&s, 0, 0.5, &d), GSP_PACE_START, "nobody connected: round_timeout");
    scene_free(&s);

    /* A neighbour that leaves before connecting (SIGTERM at round 0) does
     * not hold the barrier for the whole round timeout. */
    scene_make(&s, "exponential", 4, (gsp_pace_config){.barrier = 1}, 0);
    gsp_pace_up(&s.p[0], 2, 100 * MS);
    gsp_pace_up(&s.p[0], 3, 100 * MS);
    gsp_pace_goodbye(&s.p[0], 1, 0);
    cr_assert_eq(next(&s, 0, 100 * MS, &d), GSP_PACE_START, "1 said goodbye: not waited for");
    scene_free(&s);
}

Test(gossip_pace, an_in_neighbour_past_the_round_needed_is_not_awaited)
{
    /* exp4: peer 0's round 2 needs 2's round 1. */
    scene s;
    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 1);
    start(&s, 0, 0, NULL);
    push(&s, 3, 0, 0, MS);
    start(&s, 0, MS, NULL);
    gsp_pace_decision d;
    gsp_pace_claim(&s.p[0], 2, 1, MS);
    cr_assert_eq(next(&s, 0, 2 * MS, &d), GSP_PACE_WAIT, "2 says it is at round 1: its round 1 is to come");
    gsp_pace_claim(&s.p[0], 2, 2, 2 * MS);
    cr_assert_eq(next(&s, 0, 3 * MS, &d), GSP_PACE_START, "2 is at round 2: its round 1 went elsewhere");
    cr_assert(d.n_late == 0 && s.p[0].stats.late_marks == 0);
    scene_free(&s);
}

Test(gossip_pace, only_neighbours_may_send)
{
    /* ring4: peer 0 hears from 3, sends to 1; 2 is no neighbour. */
    scene s;
    scene_make(&s, "ring", 4, (gsp_pace_config){0}, 1);
    cr_assert(gsp_pace_is_neighbour(&s.p[0], 3) && gsp_pace_is_neighbour(&s.p[0], 1));
    cr_assert(!gsp_pace_is_neighbour(&s.p[0], 2));
    cr_assert(!gsp_pace_is_neighbour(&s.p[0], 0), "itself");
    cr_assert(!gsp_pace_is_neighbour(&s.p[0], 9), "out of range");
    /* An out-neighbour may send shares: with 2 and 3 dead, 1 routes to 0. */
    uint8_t alive[4] = {1, 1, 0, 0};
    topo_out out;
    topo_route(&s.t, 0, 1, alive, &out);
    cr_assert(out.n == 1 && out.peer[0] == 0, "1's share goes to 0, its in-neighbour");
    scene_free(&s);
    /* exp8: in-neighbours 7, 6, 4; out-neighbours 1, 2, 4; 3 and 5 none. */
    scene_make(&s, "exponential", 8, (gsp_pace_config){0}, 1);
    const int want[8] = {0, 1, 1, 0, 1, 0, 1, 1};
    for (int q = 0; q < 8; q++)
        cr_assert_eq(gsp_pace_is_neighbour(&s.p[0], q), want[q], "peer %d", q);
    scene_free(&s);
}

Test(gossip_pace, cluster_round_is_the_median_of_heard_in_neighbours)
{
    /* exp8: peer 0 hears from 7, 6 and 4, sends to 1, 2 and 4. */
    scene s;
    scene_make(&s, "exponential", 8, (gsp_pace_config){0}, 1);
    gsp_pace *p = &s.p[0];
    cr_assert_eq(gsp_pace_cluster_round(p, 0), -1, "nothing reported yet");
    gsp_pace_claim(p, 7, 10, 0);
    gsp_pace_claim(p, 6, 30, 0);
    gsp_pace_claim(p, 4, 20, 0);
    gsp_pace_claim(p, 1, 1000, 0);
    cr_assert_eq(gsp_pace_cluster_round(p, 0), 20, "10, 20, 30; 1 is no in-neighbour");
    gsp_pace_claim(p, 6, 5, 0);
    cr_assert_eq(gsp_pace_cluster_round(p, 0), 20, "a claim never moves back");
    gsp_pace_down(p, 7, 0);
    gsp_pace_goodbye(p, 4, 0);
    cr_assert_eq(gsp_pace_cluster_round(p, 0), 30, "disconnected 7 and stopped 4 do not count");
    cr_assert_eq(gsp_pace_cluster_round(p, 0.5), 30, "6 heard two heartbeat intervals ago");
    cr_assert_eq(gsp_pace_cluster_round(p, 0.5 + MS), -1, "and no longer");
    scene_free(&s);
}

Test(gossip_pace, catch_up_jumps_only_beyond_tau_plus_2_periods_plus_4)
{
    /* exp8 (3 phases), tau 2: a jump past 2 + 2 x 3 + 4 = 12 rounds behind. */
    scene s;
    scene_make(&s, "exponential", 8, (gsp_pace_config){.tau = 2}, 1);
    gsp_pace_claim(&s.p[0], 4, 5, 0);
    gsp_pace_claim(&s.p[0], 6, 12, 0);
    gsp_pace_claim(&s.p[0], 7, 90, 0);
    gsp_pace_decision d;
    cr_assert_eq(next(&s, 0, MS, &d), GSP_PACE_START);
    cr_assert(d.jumped_from == -1 && s.g[0].round == 0 && s.p[0].stats.catch_ups == 0, "12 behind: no jump");
    gsp_pace_claim(&s.p[0], 6, 13, MS);
    cr_assert_eq(next(&s, 0, 2 * MS, &d), GSP_PACE_START);
    cr_assert_eq(d.jumped_from, 0);
    cr_assert(s.g[0].round == 13 && s.g[0].since == 13, "to the median, not to the fastest");
    cr_assert(s.p[0].stats.catch_ups == 1 && s.p[0].stats.rounds_skipped == 13);
    scene_free(&s);
}

/* A member with a valid key may send any HEARTBEAT: one claim is no
 * evidence. Catch-up needs at least half of the heard in-neighbours (of two
 * or more) past the round, or, with one in-neighbour, its shares. */
Test(gossip_pace, one_neighbours_claim_moves_nobody)
{
    /* exp8: peer 0 hears from 7, 6 and 4. */
    scene s;
    scene_make(&s, "exponential", 8, (gsp_pace_config){.total_rounds = 10000}, 1);
    gsp_pace_decision d;
    gsp_pace_claim(&s.p[0], 7, 4000, 0);
    cr_assert_eq(next(&s, 0, MS, &d), GSP_PACE_START);
    cr_assert(d.jumped_from == -1 && s.g[0].round == 0, "one of three claims +4000: no jump");
    gsp_pace_claim(&s.p[0], 7, LONG_MAX, 0);
    cr_assert_eq(next(&s, 0, 2 * MS, &d), GSP_PACE_START);
    cr_assert(d.jumped_from == -1 && s.g[0].round == 0 && s.p[0].stats.catch_ups == 0,
              "then 2^63 - 1 (and so to be done): still one voice of three");
    gsp_pace_claim(&s.p[0], 6, 50, 2 * MS);
    cr_assert_eq(next(&s, 0, 3 * MS, &d), GSP_PACE_START);
    cr_assert(d.jumped_from == 0 && s.g[0].round == 50, "two of three are past 50: to 50");
    scene_free(&s);

    /* exp4: peer 0 hears from 3 and 2; one of two is not enough. */
    scene_make(&s, "exponential", 4, (gsp_pace_config){.total_rounds = 10000}, 1);
    gsp_pace_claim(&s.p[0], 3, LONG_MAX, 0);
    cr_assert_eq(next(&s, 0, MS, &d), GSP_PACE_START);
    cr_assert(d.jumped_from == -1 && s.g[0].round == 0, "2^63 - 1 from one of two: no jump, no end");
    gsp_pace_claim(&s.p[0], 2, 500, MS);
    cr_assert_eq(next(&s, 0, 2 * MS, &d), GSP_PACE_START);
    cr_assert(d.jumped_from == 0 && s.g[0].round == 500, "both past 500");
    scene_free(&s);
}

Test(gossip_pace, with_one_in_neighbour_only_its_shares_are_evidence)
{
    /* ring4: peer 1 hears from 0 only. */
    scene s;
    scene_make(&s, "ring", 4, (gsp_pace_config){.total_rounds = 10000}, 1);
    gsp_pace_decision d;
    gsp_pace_claim(&s.p[1], 0, 4000, 0);
    cr_assert_eq(next(&s, 1, MS, &d), GSP_PACE_START);
    cr_assert(d.jumped_from == -1 && s.g[1].round == 0, "a claim of +4000 alone: no jump");
    gsp_jump(&s.g[0], 60);
    push(&s, 0, 60, 1, 2 * MS);
    cr_assert_eq(next(&s, 1, 3 * MS, &d), GSP_PACE_START);
    cr_assert(d.jumped_from == 0 && s.g[1].round == 61, "its share of round 60 is: to 61, not to 4000");
    scene_free(&s);
}

Test(gossip_pace, catch_up_stops_at_total_rounds)
{
    scene s;
    scene_make(&s, "exponential", 8, (gsp_pace_config){.total_rounds = 30}, 1);
    for (int q = 4; q <= 7; q++)
        gsp_pace_claim(&s.p[0], q, 100, 0);
    gsp_pace_decision d;
    cr_assert_eq(next(&s, 0, MS, &d), GSP_PACE_DONE);
    cr_assert(d.jumped_from == 0 && s.g[0].round == 30 && s.p[0].stats.rounds_skipped == 30);
    scene_free(&s);
}

Test(gossip_pace, brake_holds_a_peer_more_than_late_slack_plus_period_ahead)
{
    /* exp8, tau 0, period 3: late_slack 4, held more than 7 rounds ahead. */
    scene s;
    scene_make(&s, "exponential", 8, (gsp_pace_config){0}, 1);
    gsp_jump(&s.g[0], 10);
    const int in[] = {4, 6, 7};
    for (int k = 0; k < 3; k++)
        gsp_pace_claim(&s.p[0], in[k], 2, 0);
    gsp_pace_decision d;
    for (int k = 1; k <= 2; k++) {
        cr_assert_eq(next(&s, 0, k * MS, &d), GSP_PACE_WAIT);
        cr_assert(d.braked && d.wake_at == k * MS + 0.25);
    }
    cr_assert_eq(s.p[0].stats.brakes, 1, "one brake for one held round, however often it asks");
    for (int k = 0; k < 3; k++)
        gsp_pace_claim(&s.p[0], in[k], 3, 2 * MS);
    cr_assert_eq(next(&s, 0, 3 * MS, &d), GSP_PACE_START, "7 ahead is allowed");
    cr_assert(!d.braked && s.g[0].round == 10);
    scene_free(&s);
}

/* ---- shares: isolation, busy links, weight after skipped rounds ------------------ */

Test(gossip_pace, an_isolated_peer_keeps_every_share_home_until_it_hears_again)
{
    /* exp4: peer 0 sends to 1 in even rounds, to 2 in odd ones; hears 3 and
     * 2, all connected and heard at 0, then silent. */
    scene s;
    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 1);
    const int sent[] = {1, 1, 0, 0, 1};
    const double at[] = {0, 0.5, 0.5 + MS, 0.625, 0.75};
    for (int r = 0; r < 5; r++) {
        if (r == 3)
            gsp_pace_heard(&s.p[0], 1, at[r]); /* an out-neighbour: hearing it is not enough */
        if (r == 4)
            gsp_pace_heard(&s.p[0], 3, at[r]);
        double w = s.g[0].w;
        topo_out out;
        share_out(&s, 0, at[r], NULL, &out);
        cr_assert_eq(out.n, sent[r], "round %d at %g", r, at[r]);
        cr_assert_eq(out.keep, sent[r] ? 0.5 : 1.0);
        cr_assert_eq(s.g[0].w, sent[r] ? w / 2 : w, "round %d: the weight stays home", r);
    }
    cr_assert_eq(s.p[0].stats.isolated_rounds, 2);
    cr_assert_eq(s.p[0].stats.busy_kept, 0);
    scene_free(&s);
}

/* The all-gather moves no mass: a peer that has heard nobody lately still
 * sends its round's message to every out-neighbour (kept home, it would
 * set every receiver apart). */
Test(gossip_pace, an_all_gather_peer_that_hears_nobody_still_sends)
{
    scene s;
    scene_make(&s, "complete", 4, (gsp_pace_config){0}, 1);
    cmp_spec codec;
    char err[64];
    cr_assert_eq(cmp_spec_parse(&codec, "topk:0.5", err, sizeof err), 0);
    cr_assert_eq(gsp_set_codec(&s.g[0], &codec, 7, 1.0f), 0);
    cr_assert_eq(gsp_set_gather(&s.g[0], 0.9f), 0);
    topo_out out;
    share_out(&s, 0, 0.75, NULL, &out); /* (nothing heard since 0: three heartbeats) */
    cr_assert_eq(out.n, 3);
    cr_assert(!s.p[0].isolated);
    cr_assert_eq(s.p[0].stats.isolated_rounds, 0);
    scene_free(&s);
}

Test(gossip_pace, a_busy_or_down_link_keeps_its_share_home)
{
    /* exp4: peer 0 sends to 1 in even rounds, to 2 in odd ones. */
    scene s;
    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 1);
    const uint8_t busy[4] = {0, 1, 0, 0};
    topo_out out;
    share_out(&s, 0, 0, busy, &out);
    cr_assert(out.n == 0 && out.keep == 1.0 && s.g[0].w == 1.0, "round 0: 1 is busy");
    share_out(&s, 0, 0, busy, &out);
    cr_assert(out.n == 1 && out.peer[0] == 2);
    gsp_pace_down(&s.p[0], 1, MS);
    share_out(&s, 0, MS, NULL, &out);
    cr_assert(out.n == 0 && out.keep == 1.0, "round 2: 1 is down, not yet routed around");
    cr_assert(s.p[0].stats.busy_kept == 2 && s.p[0].stats.isolated_rounds == 0);
    gsp_pace_goodbye(&s.p[0], 1, 1);
    share_out(&s, 0, MS, NULL, &out);
    share_out(&s, 0, MS, NULL, &out);
    cr_assert(out.n == 1 && out.peer[0] == 1, "round 4: a done neighbour takes its share, connected or not");
    scene_free(&s);
}

/* exp4, tau 0 (window 2): peer 0 sends to 1 in even rounds, to 2 in odd. */
Test(gossip_pace, a_full_ack_window_keeps_the_share_home_until_an_ack_or_a_sign_of_life)
{
    scene s;
    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 1);
    topo_out out;
    for (int r = 0; r < 4; r++) { /* 1 and 2 each get two messages, and acknowledge none */
        share_out(&s, 0, r * MS, NULL, &out);
        cr_assert_eq(out.n, 1, "round %d", r);
    }
    const double w = s.g[0].w;
    share_out(&s, 0, 4 * MS, NULL, &out);
    cr_assert(out.n == 0 && out.keep == 1.0 && s.g[0].w == w,
              "round 4: two messages to 1 unacknowledged and 1 silent since: the share stays home");
    cr_assert_eq(s.p[0].stats.busy_kept, 1);
    gsp_pace_acked(&s.p[0], 2, 1);
    share_out(&s, 0, 5 * MS, NULL, &out);
    cr_assert(out.n == 1 && out.peer[0] == 2, "round 5: 2 acknowledged its first: one in flight");
    gsp_pace_heard(&s.p[0], 1, 6 * MS);
    share_out(&s, 0, 6 * MS, NULL, &out);
    cr_assert(out.n == 1 && out.peer[0] == 1, "round 6: 1 was heard after our messages went out: alive, send");
    share_out(&s, 0, 7 * MS, NULL, &out);
    share_out(&s, 0, 8 * MS, NULL, &out);
    cr_assert_eq(out.n, 0, "round 8: and silent again since: home");
    gsp_pace_acked(&s.p[0], 1, 3);
    share_out(&s, 0, 9 * MS, NULL, &out);
    share_out(&s, 0, 10 * MS, NULL, &out);
    cr_assert(out.n == 1 && out.peer[0] == 1, "round 10: all three acknowledged");
    scene_free(&s);
}

Test(gossip_pace, after_skipped_rounds_an_emit_moves_their_weight_up_to_half_of_w)
{
    /* bf16, consensus step 1/4: an exp4 share (1/2) moves 1/8 of w. After
     * rounds jumped over, each counts once more, up to half of w. */
    scene s;
    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 1);
    cmp_spec bf16;
    char err[128];
    cr_assert_eq(cmp_spec_parse(&bf16, "bf16", err, sizeof err), 0);
    cr_assert_eq(gsp_set_codec(&s.g[0], &bf16, 1, 0.25f), 0);
    const long to[] = {0, 3, 4, 20};
    const double weight[] = {0.5, 1.5, 0.5, 2.0}, w_after[] = {0.875, 0.546875, 0.478515625, 0.2392578125};
    for (int k = 0; k < 4; k++) {
        gsp_jump(&s.g[0], to[k]);
        topo_out out;
        gsp_pace_route(&s.p[0], &s.g[0], 0, NULL, &out);
        cr_assert(out.n == 1 && out.weight[0] == weight[k], "round %ld: weight %g", to[k], out.weight[0]);
        cr_assert_eq(s.g[0].refresh, weight[k] > 0.5, "the model goes whole when the weight is larger");
        gsp_msg m[TOPO_MAX_OUT];
        cr_assert_eq(gsp_emit(&s.g[0], &out, m), 1);
        cr_assert_eq(s.g[0].w, w_after[k], "round %ld: w %.17g", to[k], s.g[0].w);
        gsp_pace_acked(&s.p[0], m[0].dst, m[0].seq); /* taken in: the ack window stays open */
    }
    scene_free(&s);

    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 1);
    topo_out out;
    share_out(&s, 0, 0, NULL, &out);
    gsp_jump(&s.g[0], 3);
    gsp_pace_route(&s.p[0], &s.g[0], 0, NULL, &out);
    cr_assert(out.weight[0] == 0.5 && !s.g[0].refresh, "without a codec one share already moves half of w");
    scene_free(&s);
}

/* ---- leaving, joining, finishing ------------------------------------------------- */

Test(gossip_pace, goodbye_done_stays_routed_to_and_counts_as_heard)
{
    scene s;
    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 1);
    cr_assert_eq(gsp_pace_goodbye(&s.p[0], 2, 1), 1);
    cr_assert_eq(gsp_pace_goodbye(&s.p[0], 2, 1), 0, "already done");
    cr_assert(s.p[0].alive[2] && nb(&s, 0, 2)->done && nb(&s, 0, 2)->known_round == 100);
    int lost[MAX_PEERS], n;
    cr_assert_eq(first_loss(&s, 0.25, 1u << 2 | 1u << 3, lost, &n), 1.25);
    cr_assert(n == 1 && lost[0] == 3, "done 2 says nothing more and is never lost for it");
    gsp_jump(&s.g[0], 1);
    topo_out out;
    share_out(&s, 0, 1.25, NULL, &out);
    cr_assert(out.n == 1 && out.peer[0] == 2, "round 1's share still goes to 2");
    cr_assert_eq(s.p[0].stats.isolated_rounds, 0, "done 2 counts as heard though 3 is lost");
    scene_free(&s);
}

Test(gossip_pace, goodbye_stopped_is_routed_around_at_once)
{
    scene s;
    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 1);
    cr_assert_eq(gsp_pace_goodbye(&s.p[0], 2, 0), 1);
    cr_assert_eq(gsp_pace_goodbye(&s.p[0], 2, 0), 0);
    cr_assert_eq(gsp_pace_goodbye(&s.p[0], 4, 0), 0, "no such peer");
    cr_assert(!s.p[0].alive[2]);
    start(&s, 0, 0, NULL);
    push(&s, 3, 0, 0, MS);
    topo_out out;
    start(&s, 0, MS, &out);
    cr_assert(out.n == 1 && out.peer[0] == 3, "round 1's share for 2 goes to the next live peer");
    gsp_pace_decision d = start(&s, 0, 2 * MS, NULL);
    cr_assert(d.n_late == 0 && s.p[0].stats.late_marks == 0, "round 2 does not wait for 2's round 1");
    scene_free(&s);
}

Test(gossip_pace, in_done_when_every_in_neighbour_is_done_or_routed_around)
{
    scene s;
    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 1);
    cr_assert(!gsp_pace_in_done(&s.p[0]));
    gsp_pace_goodbye(&s.p[0], 3, 1);
    cr_assert(!gsp_pace_in_done(&s.p[0]), "2 may still send");
    gsp_pace_goodbye(&s.p[0], 2, 0);
    cr_assert(gsp_pace_in_done(&s.p[0]), "1, alive, sends nothing to 0");
    scene_free(&s);

    /* A claim of the last round or past it says done too: a peer that came
     * back after its neighbours said GOODBYE hears it from their heartbeats. */
    scene_make(&s, "exponential", 4, (gsp_pace_config){0}, 1);
    const long end = s.p[0].c.total_rounds;
    gsp_pace_claim(&s.p[0], 3, end - 1, 0);
    gsp_pace_claim(&s.p[0], 2, end, 0);
    cr_assert(!gsp_pace_in_done(&s.p[0]), "3 has a round to go");
    gsp_pace_claim(&s.p[0], 3, end, 0);
    cr_assert(gsp_pace_in_done(&s.p[0]));
    cr_assert(nb(&s, 0, 3)->done && s.p[0].alive[3], "done, not routed around");
    scene_free(&s);
}

Test(gossip_pace, a_joining_peer_waits_until_joined_and_skips_the_barrier)
{
    const float z[DIM] = {9, 8, 7};
    scene s;
    gsp_pace_decision d;
    scene_make(&s, "exponential", 4, (gsp_pace_config){.barrier = 1}, 1);
    gsp_pace_set_joining(&s.p[0]);
    cr_assert_eq(next(&s, 0, 0, &d), GSP_PACE_WAIT);
    cr_assert_eq(d.wake_at, 0.25);
    cr_assert_eq(next(&s, 0, 2.0, &d), GSP_PACE_WAIT, "no model yet, however long");
    gsp_join(&s.g[0], z, 40);
    gsp_pace_joined(&s.p[0]);
    for (int k = 0; k < s.p[0].n_nb; k++) /* (its neighbours are there: not a peer alone) */
        gsp_pace_heard(&s.p[0], s.p[0].nb[k].peer, 2.0);
    cr_assert_eq(next(&s, 0, 2.0, &d), GSP_PACE_START);
    cr_assert_eq(s.g[0].round, 40);
    scene_free(&s);

    scene_make(&s, "exponential", 4, (gsp_pace_config){.barrier = 1}, 0);
    gsp_pace_joined(&s.p[0]);
    cr_assert_eq(next(&s, 0, MS, &d), GSP_PACE_START, "nobody connected: a peer coming back has no barrier");
    scene_free(&s);
}

Test(gossip_pace, done_when_the_last_round_may_start)
{
    scene s;
    scene_make(&s, "ring", 4, (gsp_pace_config){.total_rounds = 3}, 1);
    start(&s, 0, 0, NULL);
    for (long r = 1; r < 3; r++) {
        push(&s, 3, r - 1, 0, (double)r * MS);
        start(&s, 0, (double)r * MS, NULL);
    }
    gsp_pace_decision d;
    cr_assert_eq(next(&s, 0, 3 * MS, &d), GSP_PACE_WAIT, "round 3 still needs 3's round 2");
    push(&s, 3, 2, 0, 4 * MS);
    cr_assert_eq(next(&s, 0, 4 * MS, &d), GSP_PACE_DONE);
    cr_assert_eq(s.g[0].round, 3);
    scene_free(&s);
}

/* ---- comeback: gsp_jump, gsp_join, gsp_resume, gsp_restart ------------------------- */

Test(gossip_pace, jump_only_moves_forward)
{
    scene s;
    scene_make(&s, "ring", 4, (gsp_pace_config){0}, 0);
    gsp_jump(&s.g[0], 10);
    cr_assert(s.g[0].round == 10 && s.g[0].since == 10);
    gsp_jump(&s.g[0], 5);
    cr_assert(s.g[0].round == 10 && s.g[0].since == 10);
    gsp_jump(&s.g[0], 10);
    cr_assert(s.g[0].round == 10 && s.g[0].since == 10);
    scene_free(&s);
}

Test(gossip_pace, join_takes_the_model_with_one_unit_of_weight)
{
    const float z[DIM] = {9, 8, 7};
    scene s;
    scene_make(&s, "ring", 4, (gsp_pace_config){0}, 0);
    for (long r = 0; r < 3; r++)
        push(&s, 3, r, 0, 0);
    gsp_join(&s.g[0], z, 40); /* whatever it held is replaced */
    cr_assert(s.g[0].w == 1.0 && s.g[0].round == 40 && s.g[0].since == 40 && s.g[0].adopt);
    cr_assert_arr_eq(s.g[0].x, z, sizeof z);
    gsp_free(&s.g[0]); /* a new process for peer 0, without state */
    cr_assert_eq(gsp_init(&s.g[0], 0, 4, DIM, 0, NULL), 0);
    gsp_join(&s.g[0], z, 40);
    gsp_msg m = emit_to(&s, 3, 3, 0);
    cr_assert_eq(gsp_absorb(&s.g[0], &m), GSP_IGNORED, "seq 4: totals meant for the earlier peer 0, adopted");
    cr_assert(s.g[0].w == 1.0);
    cr_assert_arr_eq(s.g[0].x, z, sizeof z);
    scene_free(&s);
}

Test(gossip_pace, resume_renormalises_w_by_a_power_of_two_keeping_z_bit_for_bit)
{
    const double w[] = {0.0013, 0.3, 1.0, 5.7, 300.0}, factor[] = {1024, 4, 1, 0.125, 1.0 / 256};
    for (int k = 0; k < 5; k++) {
        gsp_peer g;
        const float x0[DIM] = {1.5f, -0.3f, 7e-3f};
        cr_assert_eq(gsp_init(&g, 0, 4, DIM, 0, x0), 0);
        cr_assert(gsp_in_edge(&g, 2) && gsp_in_edge(&g, 3) && !g.in[0].adopt && !g.in[1].adopt);
        g.w = w[k];
        for (int d = 0; d < DIM; d++)
            g.x[d] = (float)(w[k] * x0[d]);
        float x[DIM], z[DIM];
        memcpy(x, g.x, sizeof x);
        memcpy(z, gsp_debias(&g), sizeof z);
        cr_assert_eq(gsp_resume(&g, 0), factor[k], "w %g", w[k]);
        cr_assert_eq(g.w, w[k] * factor[k]);
        cr_assert(g.w >= M_SQRT1_2 && g.w < M_SQRT2);
        for (int d = 0; d < DIM; d++)
            cr_assert_eq(g.x[d], x[d] * (float)factor[k], "x scaled exactly");
        cr_assert_arr_eq(gsp_debias(&g), z, sizeof z, "w %g: z changed", w[k]);
        cr_assert(g.adopt && g.in[0].adopt && g.in[1].adopt, "every in-edge adopts what follows a gap");
        gsp_free(&g);
    }
}

Test(gossip_pace, resume_lands_in_the_half_open_interval_at_its_edges)
{
    /* The doubles at and just below 1/sqrt 2 and sqrt 2 (M_SQRT1_2 and
     * M_SQRT2 are the doubles just above the true values), times 2^e. */
    const double edge[] = {M_SQRT1_2, nextafter(M_SQRT1_2, 0), M_SQRT2, nextafter(M_SQRT2, 0)};
    int outside = 0;
    double first = 0, to = 0;
    for (int i = 0; i <= 40; i++) /* e = 0, -1, 1, -2, 2, ..., 20 */
        for (int k = 0, e = i % 2 ? -(i + 1) / 2 : i / 2; k < 4; k++) {
            gsp_peer g;
            cr_assert_eq(gsp_init(&g, 0, 4, DIM, 0, NULL), 0);
            g.w = ldexp(edge[k], e);
            gsp_resume(&g, 0);
            if (!(g.w >= M_SQRT1_2 && g.w < M_SQRT2) && outside++ == 0)
                first = ldexp(edge[k], e), to = g.w;
            gsp_free(&g);
        }
    cr_assert_eq(outside, 0, "%d of 164 weights outside [1/sqrt 2, sqrt 2) after gsp_resume, e.g. %.17g -> %.17g",
                 outside, first, to);
}

Test(gossip_pace, restart_starts_out_edges_from_zero_and_the_receiver_counts_no_mass_twice)
{
    /* ring4: 0 sends to 1 every round. */
    scene s;
    scene_make(&s, "ring", 4, (gsp_pace_config){0}, 0);
    for (long r = 0; r < 3; r++)
        push(&s, 0, r, 1, 0);
    gsp_msg stale;
    {
        gsp_msg m = emit_to(&s, 0, 3, 1);
        cr_assert_eq(gsp_msg_copy(&stale, &m), 0); /* in flight to the old process: lost with it */
    }
    const double w = s.g[0].w + s.g[1].w;
    gsp_restart(&s.g[0], 5);
    cr_assert_eq(s.g[0].incarnation, 5);
    for (int k = 0; k < s.g[0].n_out; k++) {
        const gsp_edge *e = &s.g[0].out[k];
        cr_assert(e->w == 0 && e->seq == 0 && e->incarnation == 5 && e->n_log == 0);
        for (int d = 0; e->x && d < DIM; d++)
            cr_assert(e->x[d] == 0);
    }
    const double share = s.g[0].w / 2;
    push(&s, 0, 4, 1, 0);
    const gsp_edge *in = gsp_in_edge(&s.g[1], 0);
    cr_assert(in->incarnation == 5 && in->seq == 1 && in->w == share, "the receiver's edge started again");
    cr_assert_float_eq(s.g[0].w + s.g[1].w, w, 1e-15, "the new share arrives once, nothing else");
    cr_assert_eq(gsp_absorb(&s.g[1], &stale), GSP_IGNORED, "a message of the earlier incarnation is stale");
    cr_assert_float_eq(s.g[0].w + s.g[1].w, w, 1e-15);
    gsp_msg_free(&stale);
    scene_free(&s);
}

/* A member with a valid key can send a share of any round within the run: on
 * a ring its one in-neighbour's shares are the evidence catch-up goes by, so
 * one share of round 5,000,000 moved its neighbour there. A neighbour's
 * round is believed only as far as time allows: GSP_PACE_FASTER rounds for
 * each of this peer's fastest rounds since its last credible report. */
Test(gossip_pace, a_neighbours_round_is_believed_only_as_far_as_time_allows)
{
    /* ring4: peer 1 hears from 0 only; tau 0, 1 phase: slack 2 x (0 + 2 + 4). */
    scene s;
    scene_make(&s, "ring", 4, (gsp_pace_config){.total_rounds = 10000000}, 1);
    cr_assert_eq(gsp_pace_credible(&s.p[1], 0, 0), LONG_MAX, "no round of its own timed yet: no bound");
    double t = MS;
    long r = 0;
    for (; t < 0.75; r++, t += 10 * MS) { /* 0 and 1 at 10 ms a round, 0's frames steady for 3 heartbeats */
        push(&s, 0, r, 1, t);
        start(&s, 1, t, NULL);
    }
    const double f = s.p[1].fastest;
    cr_assert_float_eq(f, 10 * MS, 1e-12);
    const long most = gsp_pace_credible(&s.p[1], 0, t);
    cr_assert(most >= r + 12 && most <= r + 12 + GSP_PACE_FASTER * 1, "%ld + 12 + 8 x 10 ms / 10 ms: %ld", r, most);

    gsp_pace_push(&s.p[1], &s.g[1], 0, 5000000, t);
    gsp_pace_claim(&s.p[1], 0, 5000000, t);
    gsp_pace_decision d;
    gsp_pace_action a = next(&s, 1, t, &d);
    cr_assert(a == GSP_PACE_START || a == GSP_PACE_WAIT);
    cr_assert(s.g[1].round <= most, "a share of round 5,000,000 moves it at most to %ld, not to %ld", most,
              s.g[1].round);
    const gsp_pace_nb *b = nb(&s, 1, 0);
    cr_assert(b->known_round <= most && b->pushed_round <= most);
    for (int k = 0; k < 1000; k++) /* claiming all it may, message after message, gains nothing more */
        gsp_pace_claim(&s.p[1], 0, LONG_MAX - 1, t);
    cr_assert_leq(gsp_pace_credible(&s.p[1], 0, t), most + 12, "%ld", gsp_pace_credible(&s.p[1], 0, t));

    /* Time allows more as it passes: 10 s later, 8 rounds for each of its
     * 10-ms rounds more. An honest neighbour that far ahead (this peer
     * stopped for 10 s) is believed. */
    const double later = t + 10, more = GSP_PACE_FASTER * 10 / f;
    const long then = gsp_pace_credible(&s.p[1], 0, later);
    cr_assert(then >= r + more && then <= most + 12 + more + 1, "%ld, %ld + %g", then, most, more);
    push(&s, 0, 7000, 1, later);
    cr_assert_eq(b->pushed_round, 7001);
    scene_free(&s);
}

/* One that has said nothing by the time this peer has timed a round is
 * taken to be where the run is: its first word is bounded too. */
Test(gossip_pace, a_neighbours_first_word_after_this_peer_has_timed_a_round_is_bounded_too)
{
    scene s;
    scene_make(&s, "ring", 4, (gsp_pace_config){.total_rounds = 10000000}, 1);
    gsp_pace_decision d;
    double t = MS;
    for (int k = 0; k < 3; k++, t += 10 * MS) { /* peer 1 alone: its in-neighbour 0 is late every round */
        gsp_pace_heard(&s.p[1], 0, t);
        while (next(&s, 1, t, &d) == GSP_PACE_WAIT)
            t = d.wake_at;
        gsp_pace_started(&s.p[1], t);
        topo_out out;
        share_out(&s, 1, t, NULL, &out);
    }
    next(&s, 1, t, &d);
    const long most = gsp_pace_credible(&s.p[1], 0, t);
    cr_assert_lt(most, 100, "%ld", most);
    gsp_pace_push(&s.p[1], &s.g[1], 0, 5000000, t);
    cr_assert_leq(s.p[1].nb[s.p[1].slot[0]].pushed_round, most);
    scene_free(&s);
}
