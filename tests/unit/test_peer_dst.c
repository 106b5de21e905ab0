/* Deterministic simulation testing (peer/sim/sim_dst.h): a few hundred
 * random fault schedules, each with the simulator's invariants checked
 * after every event; a failure prints the sgp sim command line that replays
 * it. Also: a schedule is the same from its seed, and a failing one
 * shrinks to its cause (tests/process/test_peer_dst.c: the printed command
 * line replays the same run). `make soak-dst` runs 10,000. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "peer/sim/sim_dst.h"

TestSuite(peer_sim_dst, .timeout = 600);

static void schedules(uint64_t first, int n)
{
    char err[256];
    dst_world w;
    cr_assert_eq(dst_world_init(&w, err, sizeof err), 0, "%s", err);
    for (int k = 0; k < n; k++) {
        dst_schedule s;
        dst_draw(&s, first + (uint64_t)k);
        dst_outcome o;
        int rc = dst_run(&w, &s, &o);
        cr_assert_geq(rc, 0, "schedule %llu: %s", (unsigned long long)s.seed, strerror(-rc));
        if (rc == DST_FAILED) {
            dst_shrink(&w, &s, &o);
            char cmd[2048];
            dst_command(&s, cmd, sizeof cmd);
            cr_assert_fail("schedule %llu fails: %s\nreplay: %s", (unsigned long long)s.seed, o.why, cmd);
        }
    }
    dst_world_free(&w);
}

/* Four quarters, so that --jobs 2 runs them two at a time. About 30 s each
 * here, but under AddressSanitizer on a loaded 2-core machine a quarter
 * took more than 600 s: a limit of its own, far above both. */
#define DST_QUARTER_LIMIT_S 1800

Test(peer_sim_dst, random_fault_schedules_1_to_50_keep_every_invariant, .timeout = DST_QUARTER_LIMIT_S)
{
    schedules(1, 50);
}

Test(peer_sim_dst, random_fault_schedules_51_to_100_keep_every_invariant, .timeout = DST_QUARTER_LIMIT_S)
{
    schedules(51, 50);
}

Test(peer_sim_dst, random_fault_schedules_101_to_150_keep_every_invariant, .timeout = DST_QUARTER_LIMIT_S)
{
    schedules(101, 50);
}

Test(peer_sim_dst, random_fault_schedules_151_to_200_keep_every_invariant, .timeout = DST_QUARTER_LIMIT_S)
{
    schedules(151, 50);
}

/* Found by sgp dst (schedule 1205, shrunk): a peer stopped at round 31 of
 * 48 until the others had finished comes back, jumps to the last round and
 * finishes in the same event; the run's watermark used to miss that last
 * jump (the run "ended at round 34"), and the stopped peer's heartbeat tick,
 * due while it was frozen, took the simulator back in time. */
Test(peer_sim_dst, a_peer_stopped_until_the_others_finished_catches_up_to_the_last_round)
{
    char err[256];
    dst_world w;
    cr_assert_eq(dst_world_init(&w, err, sizeof err), 0, "%s", err);
    dst_schedule s;
    dst_draw(&s, 1205);
    s.peers = 7, s.topology = "complete", s.codec = "randk:0.2", s.tau = 2, s.local_steps = 1, s.outer = "none";
    s.loss = s.duplicate = s.jitter = 0, s.gather = 0;
    s.n_faults = 1;
    s.fault[0] = (dst_fault){.kind = DST_STOP, .peer = 0, .a = 31, .t = 0.051903297891878468};
    dst_outcome o;
    cr_assert_eq(dst_run(&w, &s, &o), DST_PASSED, "%s", o.why);
    dst_world_free(&w);
}

/* The healed partition that turned every real peer's model to NaN, as a
 * schedule: peers 2 and 3 of exp4 each cut off alone (their hosts' links
 * down) for half of a run whose rounds are short against the heartbeat
 * interval. The lone peers race on by themselves; at the heal peers 0 and 1
 * are behind, hold their in-neighbours' messages (from later rounds) and
 * give their weight away round after round until a heartbeat tells them how
 * far behind they are; the weight an edge moves, a difference of its running
 * total, then took all of w ("invariant: peer 2's weight is 0"). Long cuts of
 * single peers are drawn since this one (peer/sim/sim_dst.c). */
Test(peer_sim_dst, peers_cut_off_alone_in_a_long_cut_keep_every_invariant)
{
    char err[256];
    dst_world w;
    cr_assert_eq(dst_world_init(&w, err, sizeof err), 0, "%s", err);
    const char *codecs[] = {"none", "exact", "stc:0.1"};
    for (int k = 0; k < 3; k++) {
        dst_schedule s;
        dst_draw(&s, 1);
        s.peers = 4, s.topology = "exponential", s.codec = codecs[k], s.tau = 0, s.local_steps = 1, s.outer = "none";
        s.epochs = 100, s.compute = 0.0005, s.dead_timeout = 0.25;
        s.loss = s.duplicate = s.jitter = 0, s.gather = 0;
        s.n_faults = 1;
        s.fault[0] = (dst_fault){.kind = DST_PARTITION, .peer = 2, .span = 2, .b = 1, .t = 0.32, .u = 0.81};
        dst_outcome o;
        char cmd[2048];
        dst_command(&s, cmd, sizeof cmd);
        cr_assert(strstr(cmd, " --partition 2@0.32") && strstr(cmd, " --partition 3@0.32"), "%s", cmd);
        cr_assert_eq(dst_run(&w, &s, &o), DST_PASSED, "%s: %s\nreplay: %s", codecs[k], o.why, cmd);
    }
    dst_world_free(&w);
}

Test(peer_sim_dst, a_schedule_is_its_seed)
{
    dst_schedule a, b;
    dst_draw(&a, 42);
    dst_draw(&b, 42);
    char x[2048], y[2048];
    dst_command(&a, x, sizeof x);
    dst_command(&b, y, sizeof y);
    cr_assert_str_eq(x, y);
    dst_draw(&b, 43);
    dst_command(&b, y, sizeof y);
    cr_assert_str_neq(x, y);
}

/* Two of three peers crash for good: one is left, which is a failure; the
 * stop and the slow peer have nothing to do with it and are shrunk away. */
Test(peer_sim_dst, a_failing_schedule_shrinks_to_its_cause)
{
    char err[256];
    dst_world w;
    cr_assert_eq(dst_world_init(&w, err, sizeof err), 0, "%s", err);
    dst_schedule s;
    dst_draw(&s, 7);
    s.peers = 3, s.n_faults = 0, s.loss = 0.05, s.duplicate = 0, s.jitter = 0;
    s.fault[s.n_faults++] = (dst_fault){.kind = DST_STOP, .peer = 2, .a = 5, .t = 0.01};
    s.fault[s.n_faults++] = (dst_fault){.kind = DST_CRASH, .peer = 0, .a = 2};
    s.fault[s.n_faults++] = (dst_fault){.kind = DST_SLOW, .peer = 2, .f = 2};
    s.fault[s.n_faults++] = (dst_fault){.kind = DST_CRASH, .peer = 1, .a = 3};
    dst_outcome o;
    cr_assert_eq(dst_run(&w, &s, &o), DST_FAILED, "one peer left must fail");
    cr_assert(strstr(o.why, "1 peers live"), "%s", o.why);
    dst_shrink(&w, &s, &o);
    cr_assert_eq(s.n_faults, 2, "the two crashes are the cause");
    cr_assert_eq(s.loss, 0, "and not the loss");
    char cmd[2048];
    dst_command(&s, cmd, sizeof cmd);
    cr_assert(strstr(cmd, "--crash 0@2 --crash 1@3") && !strstr(cmd, "--stop") && !strstr(cmd, "--slow"), "%s", cmd);
    dst_world_free(&w);
}
