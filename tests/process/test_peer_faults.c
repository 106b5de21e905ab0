/* Faults on real processes (gossip/GUARANTEES.md "Stragglers, leave and
 * join"): `sgp launch` kills, stops, restarts and slows real `sgp peer`
 * processes on loopback, a peer started late with --resume and no checkpoint
 * joins a running cluster, and a peer sent SIGTERM leaves it. The properties
 * are read back from what the peers write: RUN/peerI.out (events),
 * RUN/peerI.jsonl (a line per round, with "t" and, at epoch ends,
 * "test_accuracy"), RUN/peerI.json (summary) and the launcher's combined
 * --summary.
 *
 * Runs are kept small (mlp:64, 8 peers, a few seconds each on an idle 2-core
 * machine) because the suite also runs in parallel with others and under
 * AddressSanitizer. Nothing here asserts speed: only liveness bounds far
 * above a round's duration. Where a test drives the peers itself it waits on
 * what they log (tests/sgp_run.h), never for a fixed time. Every run gets its
 * own /tmp/sgp-faults-* directory, named in each failure message and removed
 * when the test passes (kept with SGP_TEST_KEEP=1). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "peer/launch/launch_ledger.h"
#include "tests/sgp_cluster.h"

TestSuite(peer_faults, .timeout = 900);

/* A launch or a set of peers that is not done after this long is stuck (the
 * slowest of these runs, the restart's 12 epochs, took about 350 s under
 * AddressSanitizer with the machine shared: a load of 5 on 2 cores). */
#define RUN_LIMIT_S 700

/* ---- reading what the peers wrote ---------------------------------------- */

typedef struct round_line {
    long round;
    double t;   /* seconds since the peer started */
    double acc; /* test accuracy at an epoch end, else -1 */
    double w;   /* push-sum weight at the end of the round */
} round_line;

/* The round lines of RUN/peerI.jsonl (event lines skipped); *n of them. */
static round_line *read_rounds(const char *run, int i, int *n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/peer%d.jsonl", run, i);
    char *text = sgp_read_file(path);
    cr_assert(text, "%s is missing", path);
    int cap = 256, k = 0;
    round_line *r = malloc((size_t)cap * sizeof *r);
    cr_assert(r);
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        if (strstr(line, "\"event\"") || strstr(line, "\"ledger\"") || !strstr(line, "\"round\": "))
            continue;
        if (k == cap)
            cr_assert((r = realloc(r, (size_t)(cap *= 2) * sizeof *r)));
        double acc = sgp_json_number(line, "test_accuracy");
        r[k++] = (round_line){(long)sgp_json_number(line, "round"), sgp_json_number(line, "t"), isnan(acc) ? -1 : acc,
                              sgp_json_number(line, "w")};
    }
    free(text);
    *n = k;
    return r;
}

/* Test accuracy RUN/peerI.jsonl logged at the end of round R; -1 if none. */
static double accuracy_at(const char *run, int i, long round)
{
    int n;
    round_line *r = read_rounds(run, i, &n);
    double acc = -1;
    for (int k = 0; k < n; k++)
        if (r[k].round == round && r[k].acc >= 0)
            acc = r[k].acc;
    free(r);
    return acc;
}

/* "t" of the last whole line of RUN/peerI.jsonl: about when a peer that was
 * killed died (its clock, like every peer's, starts with its process; the
 * log is buffered, so a SIGKILL loses a few more lines and tears the last). */
static double last_t(const char *run, int i)
{
    char path[512];
    snprintf(path, sizeof path, "%s/peer%d.jsonl", run, i);
    char *text = sgp_read_file(path);
    cr_assert(text, "%s is missing", path);
    double t = -1;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (!next)
            break; /* torn */
        *next++ = 0;
        double v = sgp_json_number(line, "t");
        if (!isnan(v) && strchr(line, '}'))
            t = v;
    }
    free(text);
    return t;
}

/* The round at which the launcher injected its fault into PEER (it prints
 * "sgp launch: peer P at round R: ..."; a poll lands a few rounds after the
 * one asked for). -1 if there was none. */
static long injected_at(const char *dir, int peer)
{
    char path[512];
    snprintf(path, sizeof path, "%s/launch.out", dir);
    char *text = sgp_read_file(path);
    cr_assert(text, "%s is missing", path);
    long at = -1;
    for (char *p = text; (p = strstr(p, "sgp launch: peer ")); p++) {
        int who;
        long r;
        if (sscanf(p, "sgp launch: peer %d at round %ld:", &who, &r) == 2 && who == peer) {
            at = r;
            break;
        }
    }
    free(text);
    return at;
}

/* ---- running processes ---------------------------------------------------- */

/* `sgp launch --peers 8 --topology exponential --model mlp:64 --seed 1
 * --run-dir DIR/run --summary DIR/summary.json EXTRA...` with its output in
 * DIR/launch.out; DIR is made here (mkdtemp on DIR's XXXXXX). Asserts that it
 * exits 0. The launcher's default codec (stc:0.04) is kept: it is what users
 * run. */
static void launch_model(char *dir, const char *model, char *const extra[])
{
    cr_assert(mkdtemp(dir), "mkdtemp %s", dir);
    char run[256], sum[256], out[256];
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(sum, sizeof sum, "%s/summary.json", dir);
    snprintf(out, sizeof out, "%s/launch.out", dir);
    char *argv[64] = {(char *)sgp_bin(), "launch", "--peers", "8", "--topology", "exponential", "--model",
                      (char *)model, "--seed", "1", "--run-dir", run, "--summary", sum};
    int a = 14;
    for (int k = 0; extra[k] && a < 63; k++)
        argv[a++] = extra[k];
    argv[a] = NULL;
    int st = sgp_wait_exit(sgp_spawn(argv, out), RUN_LIMIT_S);
    cr_assert_neq(st, -1, "sgp launch did not finish in %d s (logs in %s)", RUN_LIMIT_S, dir);
    cr_assert_eq(st, 0, "sgp launch exited %d (logs in %s)", st, dir);
}

static void launch(char *dir, char *const extra[]) { launch_model(dir, "mlp:64", extra); }

/* ---- sgp launch --kill ------------------------------------------------------ */

/* kill -9 of 2 of 8 peers in the second epoch: the launch still succeeds, the
 * 6 survivors run every round without stalling, route around the dead, and
 * their average model is as good as a run without faults. */
Test(peer_faults, kill_two_of_eight_survivors_finish_without_stalling)
{
    /* Four epochs of mlp:256, the kills mid-training, near rounds 250 and
     * 290 of 500. The survivors lose two iid shards; killed in the second
     * epoch (rounds 130 and 170) that cost their model 0.5 to 1.15 points
     * over three runs (93.80-94.05% without faults), too close to the
     * issue's 1-point bound to test the protocol rather than luck; mlp:64
     * varied more from run to run. */
    const double dead_timeout = 1.0;
    char base[] = "/tmp/sgp-faults-base-XXXXXX", dir[] = "/tmp/sgp-faults-kill-XXXXXX";
    launch_model(base, "mlp:256", (char *[]){"--epochs", "4", "--dead-timeout", "1", NULL});
    launch_model(dir, "mlp:256",
                 (char *[]){"--epochs", "4", "--dead-timeout", "1", "--kill", "3@250", "--kill", "5@290", NULL});
    char run[256], sum[256], base_sum[256];
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(sum, sizeof sum, "%s/summary.json", dir);
    snprintf(base_sum, sizeof base_sum, "%s/summary.json", base);

    cr_assert_eq(sgp_file_number(sum, "peers_finished"), 6, "%s", dir);
    cr_assert_eq(sgp_file_number(sum, "faults_injected"), 2, "%s", dir);
    cr_assert_eq(sgp_file_number(sum, "rounds"), 500, "every survivor ran all 500 rounds (%s)", dir);
    const long kill3 = injected_at(dir, 3), kill5 = injected_at(dir, 5);
    cr_assert(kill3 >= 250 && kill5 >= 290, "launch.out names both kills (%s): %ld %ld", dir, kill3, kill5);
    const long first_kill = kill3 < kill5 ? kill3 : kill5;
    /* Peers 4 and 6 lost an in-neighbour (3, 5): each drew the run's starting
     * model ahead, off its loop, for an edge that starts later
     * (peer/net/node_origin.c). */
    cr_assert(sgp_peer_out_has(run, 4, "drawing the run's starting model ahead"), "peer 4 (%s)", dir);
    cr_assert(sgp_peer_out_has(run, 6, "drawing the run's starting model ahead"), "peer 6 (%s)", dir);

    const int survivors[] = {0, 1, 2, 4, 6, 7};
    double end[8] = {0}; /* when each survivor finished (its clock) */
    for (int s = 0; s < 6; s++) {
        const int i = survivors[s];
        cr_assert_eq(sgp_peer_number(run, i, "rounds"), 500, "peer %d (%s)", i, dir);
        int n;
        round_line *r = read_rounds(run, i, &n);
        /* Every round, or, on a machine so busy that this survivor fell more
         * than the catch-up threshold behind the others, a jump to the last
         * round once they were done (seen under the ASan suite: 20 rounds
         * behind at the end, after no stall) */
        cr_assert(n > 0 && (r[n - 1].round == 500 || sgp_peer_out_has(run, i, "jumping to round 500")),
                  "peer %d's log ends at round %ld (%s)", i, n ? r[n - 1].round : 0, dir);
        /* The issue: no survivor stalls longer than the dead timeout plus one
         * round. One round is milliseconds here, but this suite shares two
         * cores with other tests (and runs under ASan), so the margin is 2 s:
         * still far below the 30 s round timeout a survivor would sit out if
         * it waited for a dead neighbour. */
        double worst = 0;
        long worst_round = 0;
        for (int k = 1; k < n; k++)
            if (r[k - 1].round >= first_kill && r[k].t - r[k - 1].t > worst)
                worst = r[k].t - r[k - 1].t, worst_round = r[k].round;
        cr_assert_leq(worst, dead_timeout + 2.0, "peer %d waited %.2f s before round %ld (logs in %s)", i, worst,
                      worst_round, dir);
        end[i] = r[n - 1].t;
        free(r);
    }
    /* Routed around, not merely not waited for (the round deadline does
     * that): a survivor that was connected to a dead peer and ran on for
     * longer than the dead timeout after its death (plus a second for the
     * clocks, which start with each process, and the buffered log) must have
     * given up on it. (On an idle machine the run is often over before that:
     * then there is nothing to check.) */
    for (int dead = 3; dead <= 5; dead += 2) {
        const double died = last_t(run, dead);
        char conn[64], routed[64];
        snprintf(conn, sizeof conn, "peer %d: connection closed", dead);
        snprintf(routed, sizeof routed, "routing around neighbour %d", dead);
        for (int s = 0; s < 6; s++) {
            const int i = survivors[s];
            if (end[i] - died > dead_timeout + 1.0 && sgp_peer_out_has(run, i, conn))
                cr_assert(sgp_peer_out_has(run, i, routed),
                          "peer %d lost its connection to peer %d and ran %.1f s after it died, but never logged "
                          "'%s' (logs in %s)",
                          i, dead, end[i] - died, routed, dir);
        }
    }

    /* 2 of 8 iid shards are lost for the last 3 epochs: the survivors'
     * average model stays within 1 point of the fault-free run's. */
    double acc = sgp_file_number(sum, "test_accuracy"), base_acc = sgp_file_number(base_sum, "test_accuracy");
    cr_assert_leq(fabs(acc - base_acc), 0.010 + 1e-6,
                  "average of the survivors %.2f%% vs %.2f%% without faults (logs in %s and %s)", 100 * acc,
                  100 * base_acc, dir, base);
    sgp_rm_rf(dir);
    sgp_rm_rf(base);
}

/* ---- sgp launch --stop ------------------------------------------------------ */

/* SIGSTOP for 3 dead timeouts, then SIGCONT: the neighbours route around the
 * silent peer (its TCP connections stay up: only the silence shows it; after
 * two dead timeouts without a frame they are closed as stalled), take it back
 * at its next frame or reconnection, and the peer, not restarted, catches up
 * and ends with the others' model. */
Test(peer_faults, sigstop_longer_than_dead_timeout_is_routed_around_then_back)
{
    /* Stopped near round 40 of 1,500 for 1.5 s: on an idle machine the others
     * are at round 550 to 1,000 when it comes back, so it has a third of the
     * run or more to re-converge (coming back in the last epochs drags every
     * peer down: its stale model is averaged in when the learning rate is too
     * small to undo it). */
    char dir[] = "/tmp/sgp-faults-stop-XXXXXX";
    launch(dir, (char *[]){"--epochs", "12", "--dead-timeout", "0.5", "--stop", "2@40:1.5", NULL});
    char run[256], sum[256];
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(sum, sizeof sum, "%s/summary.json", dir);
    cr_assert_eq(sgp_file_number(sum, "peers_finished"), 8, "%s", dir);
    cr_assert_eq(sgp_file_number(sum, "faults_injected"), 1, "%s", dir);
    cr_assert_geq(injected_at(dir, 2), 40, "launch.out names the SIGSTOP (%s)", dir);

    /* Some neighbour gave up on peer 2 for its silence, and later took it back. */
    int routed = 0, back = 0;
    for (int i = 0; i < 8; i++) {
        if (i == 2)
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/peer%d.out", run, i);
        char *text = sgp_read_file(path);
        cr_assert(text, "%s", path);
        const char *lost = strstr(text, "routing around neighbour 2: silent for the dead timeout");
        routed |= lost != NULL;
        back |= lost && (strstr(lost, "neighbour is back 2") || strstr(lost, "neighbour reconnected 2"));
        free(text);
    }
    cr_assert(routed, "no neighbour routed around the stopped peer 2 for its silence (logs in %s)", dir);
    cr_assert(back, "no neighbour that routed around peer 2 took it back after SIGCONT (logs in %s)", dir);

    /* Peer 2 itself: the same process, all rounds, some of them skipped. */
    const double rounds = sgp_peer_number(run, 2, "rounds");
    cr_assert_eq(rounds, 1500, "peer 2 finished every round (%s)", dir);
    cr_assert(!sgp_peer_out_has(run, 2, "resumed from") && !sgp_peer_out_has(run, 2, "no checkpoint"),
              "peer 2 was only stopped, not restarted (%s)", dir);
    cr_assert_lt(sgp_peer_number(run, 2, "local_steps"), rounds, "peer 2 jumped the rounds it missed (%s)", dir);
    cr_assert_geq(sgp_peer_number(run, 2, "catch_ups"), 1, "%s", dir);

    double others = 0;
    for (int i = 0; i < 8; i++)
        others += i == 2 ? 0 : sgp_peer_number(run, i, "test_accuracy") / 7;
    const double acc2 = sgp_peer_number(run, 2, "test_accuracy");
    cr_assert_leq(fabs(acc2 - others), 0.010 + 1e-6, "peer 2 ends at %.2f%%, the others at %.2f%% (logs in %s)",
                  100 * acc2, 100 * others, dir);
    sgp_rm_rf(dir);
}

/* ---- sgp launch --restart --------------------------------------------------- */

/* kill -9 and a restart with --resume half a second later: the peer loads its
 * checkpoint (not a neighbour's model), enters at the round it had saved, and
 * one epoch later agrees with the others again. */
Test(peer_faults, restart_resumes_from_its_checkpoint_and_reconverges)
{
    /* Killed at round ~900 of 1,500, well after the first checkpoint (every
     * 0.1 s), so that its second epoch end after the kill (1,125 or 1,250) is
     * in the last epochs, where the peers of a healthy run agree within a
     * point; halfway through a run their spread is larger than that. The
     * others wait for it (it is back well within the dead timeout, and the
     * round deadline is longer still): without that, an idle machine runs
     * the last 600 rounds of mlp:64 in less time than the restart takes, and
     * the run is over when it comes back. */
    char dir[] = "/tmp/sgp-faults-restart-XXXXXX";
    launch(dir, (char *[]){"--epochs", "12", "--dead-timeout", "3", "--round-deadline", "5", "--checkpoint-every",
                           "0.1", "--restart", "4@900:0.5", NULL});
    char run[256], sum[256];
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(sum, sizeof sum, "%s/summary.json", dir);
    cr_assert_eq(sgp_file_number(sum, "peers_finished"), 8, "the restarted peer counts again (%s)", dir);
    cr_assert_eq(sgp_file_number(sum, "faults_injected"), 1, "%s", dir);
    const long killed = injected_at(dir, 4);
    cr_assert_geq(killed, 900, "launch.out names the kill (%s)", dir);

    cr_assert(sgp_peer_out_has(run, 4, "resumed from"), "peer 4 did not resume from its checkpoint (logs in %s)", dir);
    cr_assert(!sgp_peer_out_has(run, 4, "no checkpoint"), "peer 4 found no checkpoint (logs in %s)", dir);
    const double start = sgp_peer_number(run, 4, "start_round");
    cr_assert(start > 0 && start <= killed, "peer 4 resumed at round %.0f, killed at %ld (%s)", start, killed, dir);
    cr_assert_eq(sgp_peer_number(run, 4, "rounds"), 1500, "%s", dir);

    /* The resumed process appends to peer4.jsonl. The epoch ends it logs
     * past the round it was killed at are the cluster's present (the ones
     * before, if any, it passed while catching up from its checkpoint); the
     * second of them gave it at least an epoch back among the others. */
    int n;
    round_line *r = read_rounds(run, 4, &n);
    long at = -1, ends = 0;
    double acc4 = -1;
    for (int k = 0; k < n && ends < 2; k++)
        if (r[k].acc >= 0 && r[k].round > killed)
            ends++, at = r[k].round, acc4 = r[k].acc;
    free(r);
    cr_assert_eq(ends, 2, "peer 4 logged %ld epoch ends past round %ld, where it was killed (the run was too fast "
                 "for this test's timing?); logs in %s", ends, killed, dir);
    /* A peer that jumped over that epoch end while catching up (slow
     * machines, sanitizers) did not evaluate there: the mean is over those
     * that did, at least four of the seven. */
    double mean = 0;
    int counted = 0;
    for (int i = 0; i < 8; i++) {
        double a = i == 4 ? -1 : accuracy_at(run, i, at);
        if (a >= 0)
            mean += a, counted++;
    }
    cr_assert_geq(counted, 4, "only %d other peers logged a test accuracy at round %ld (%s)", counted, at, dir);
    mean /= counted;
    cr_assert_leq(fabs(acc4 - mean), 0.010 + 1e-6,
                  "at round %ld (2nd epoch end after the restart) peer 4 has %.2f%%, the others %.2f%% (logs in %s)",
                  at, 100 * acc4, 100 * mean, dir);
    sgp_rm_rf(dir);
}

/* The exact sparse all-gather (--recipe lm) through the same restart: the
 * peer resumes from its checkpoint (which holds no edge references under
 * it), its model differs from the others', it takes the run's model back,
 * and every peer ends with the same bits. */
Test(peer_faults, the_all_gather_through_a_restart_ends_with_every_model_the_same_bits)
{
    char dir[] = "/tmp/sgp-faults-gather-XXXXXX";
    launch(dir, (char *[]){"--recipe", "lm", "--topology", "complete", "--epochs", "12", "--dead-timeout", "3",
                           "--round-deadline", "5", "--checkpoint-every", "0.1", "--restart", "4@90:0.5", NULL});
    char run[256], sum[256];
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(sum, sizeof sum, "%s/summary.json", dir);
    cr_assert_eq(sgp_file_number(sum, "peers_finished"), 8, "%s", dir);
    cr_assert_eq(sgp_file_number(sum, "faults_injected"), 1, "%s", dir);
    cr_assert(sgp_peer_out_has(run, 4, "resumed from"), "peer 4 did not resume from its checkpoint (logs in %s)", dir);
    cr_assert_eq(sgp_file_number(sum, "consensus_distance"), 0, "every model the same bits (logs in %s)", dir);
    cr_assert_gt(sgp_file_number(sum, "test_accuracy"), 0.85, "%s", dir);
    sgp_rm_rf(dir);
}

/* ---- a survivor whose in-neighbours all died ------------------------------- */

/* Peer 0's in-neighbours on the exponential graph of 4 are 3 and 2: both are
 * killed (kill -9) at their round 500 of 1,000 and started again with
 * --resume a second later, well within the dead timeout (3 s). Peer 0 hears
 * neither and waits for them (gsp_pace_decision.alone) instead of racing
 * through its remaining rounds, which left nobody for them to rejoin; peer 1
 * (in-neighbours 0 and 3) is held by the brake at peer 0's round. They come
 * back from their checkpoints, and the run ends with every peer at its last
 * round and in agreement.
 *
 * (Had they stayed away past the dead timeout, peers 0 and 1 would have
 * gone on together once 2 and 3 were routed around, as a side of a
 * partition does: gossip_pace/a_peer_that_hears_no_in_neighbour_waits_before_the_dead_timeout_too.
 * A peer that hears nobody at all waits up to --alone-wait.) */
Test(peer_faults, a_survivor_waits_for_its_killed_in_neighbours_and_they_rejoin)
{
    char dir[] = "/tmp/sgp-faults-alone-XXXXXX";
    launch(dir, (char *[]){"--peers", "4", "--epochs", "8", "--dead-timeout", "3", "--checkpoint-every", "0.1",
                           "--restart", "3@500:1", "--restart", "2@500:1", NULL});
    char run[256], sum[256];
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(sum, sizeof sum, "%s/summary.json", dir);
    cr_assert_eq(sgp_file_number(sum, "peers_finished"), 4, "%s", dir);
    cr_assert(sgp_peer_out_has(run, 0, "every in-neighbour lost: waiting for one to come back"),
              "peer 0 did not wait for its in-neighbours (logs in %s)", dir);
    for (int i = 2; i < 4; i++)
        cr_assert(sgp_peer_out_has(run, i, "resumed from"), "peer %d did not resume (logs in %s)", i, dir);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(sgp_peer_number(run, i, "rounds"), 1000, "peer %d ended before the last round (logs in %s)", i, dir);
    const double acc = sgp_file_number(sum, "test_accuracy"), acc0 = sgp_peer_number(run, 0, "test_accuracy");
    /* Agreement is the consensus distance; the accuracies of models that
     * close can still differ by a few of the 2,000 test images (0.25 points
     * at a distance of 1.7e-5, seen on a heavily loaded machine). */
    cr_assert_leq(sgp_file_number(sum, "consensus_distance"), 1e-3, "the peers end apart (logs in %s)", dir);
    cr_assert_leq(fabs(acc0 - acc), 0.005 + 1e-6, "peer 0 ends at %.2f%%, the average model at %.2f%% (logs in %s)",
                  100 * acc0, 100 * acc, dir);
    char out[300];
    snprintf(out, sizeof out, "%s/launch.out", dir);
    cr_assert(sgp_file_has(out, "push-sum weight ") && !sgp_file_has(out, "push-sum weight not known") &&
                  sgp_file_has(out, "comebacks: "),
              "sgp launch reports the run's weight and what the resumes changed (%s)", out);
    sgp_rm_rf(dir);
}

/* ---- sgp launch --slow ------------------------------------------------------ */

/* One peer at a quarter of the others' speed (--slow 3:4: its rounds take 4
 * times their median): nobody waits for it past the round deadline, it jumps
 * rounds to keep up, the fast peers compute (nearly) every round, and the
 * average model is within a point and a half of a run without it.
 *
 * "Nearly": on an idle machine every fast peer computes all 500 rounds; on a
 * busy one the scheduler can hold one of them back long enough that it is
 * itself a few rounds behind the others and jumps them (478 of 500 seen at
 * a load of 18 on 2 cores, 449 under AddressSanitizer beside other work,
 * where the straggler computed 150), which is the catch-up rule doing its
 * job. A fast peer that the straggler dragged into its pace would not jump
 * at all; the check is that each stays clear of the straggler's fraction
 * (<= 70 %): at least 80 %. */
Test(peer_faults, straggler_is_not_waited_for_and_catches_up)
{
    /* mlp:256, as for the kills. Its shard is seen a third as often, and two
     * runs of real processes differ by their schedules: on the idle machine
     * five pairs ended 0.00 to 0.30 points apart (93.50-93.80% without the
     * straggler), beside the other process tests (CI, --jobs 2) one pair
     * ended 93.05% against 94.25%. The bound is a point and a half: what a
     * straggler that was waited for, or whose stale model pulled the others
     * back, would cost is several points. */
    char base[] = "/tmp/sgp-faults-base-XXXXXX", dir[] = "/tmp/sgp-faults-slow-XXXXXX";
    launch_model(base, "mlp:256", (char *[]){"--epochs", "4", "--dead-timeout", "1", NULL});
    launch_model(dir, "mlp:256", (char *[]){"--epochs", "4", "--dead-timeout", "1", "--slow", "3:4", NULL});
    char run[256], sum[256], base_sum[256];
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(sum, sizeof sum, "%s/summary.json", dir);
    snprintf(base_sum, sizeof base_sum, "%s/summary.json", base);
    cr_assert_eq(sgp_file_number(sum, "peers_finished"), 8, "%s", dir);
    for (int i = 0; i < 8; i++) {
        const double rounds = sgp_peer_number(run, i, "rounds"), steps = sgp_peer_number(run, i, "local_steps");
        cr_assert_eq(rounds, 500, "peer %d ran %.0f rounds (%s)", i, rounds, dir);
        if (i == 3) {
            cr_assert_leq(steps, 0.70 * rounds, "the straggler computed %.0f of %.0f rounds (logs in %s)", steps,
                          rounds, dir);
            cr_assert_geq(sgp_peer_number(run, 3, "catch_ups"), 1, "%s", dir);
        } else {
            cr_assert_geq(steps, 0.80 * rounds, "fast peer %d computed %.0f of %.0f rounds (logs in %s)", i, steps,
                          rounds, dir);
            if (steps < rounds)
                cr_log_info("fast peer %d jumped %.0f of %.0f rounds (a busy machine?)", i, rounds - steps, rounds);
        }
    }
    double acc = sgp_file_number(sum, "test_accuracy"), base_acc = sgp_file_number(base_sum, "test_accuracy");
    cr_assert_leq(fabs(acc - base_acc), 0.015 + 1e-6,
                  "average model %.2f%% with a straggler vs %.2f%% without (logs in %s and %s)", 100 * acc,
                  100 * base_acc, dir, base);
    sgp_rm_rf(dir);
    sgp_rm_rf(base);
}

/* ---- sgp peer processes started by the test ------------------------------------ */

/* `sgp peer` for peer i of the cluster in dir, writing dir/peerI.{out,jsonl,json}
 * and checkpointing to dir/peerI.ckpt, with EXTRA options (NULL-terminated). */
static pid_t start_peer(const char *dir, int i, char *const extra[])
{
    char cl[256], id[16], out[256], log[256], sum[256], ckpt[256];
    snprintf(cl, sizeof cl, "%s/cluster.conf", dir);
    snprintf(id, sizeof id, "%d", i);
    snprintf(out, sizeof out, "%s/peer%d.out", dir, i);
    snprintf(log, sizeof log, "%s/peer%d.jsonl", dir, i);
    snprintf(sum, sizeof sum, "%s/peer%d.json", dir, i);
    snprintf(ckpt, sizeof ckpt, "%s/peer%d.ckpt", dir, i);
    char *argv[48] = {(char *)sgp_bin(), "peer", "--cluster", cl, "--id", id, "--model", "mlp:64", "--seed", "1",
                      "--codec", "stc:0.04", "--log", log, "--summary", sum, "--no-progress", "--checkpoint", ckpt};
    int a = 19;
    for (int k = 0; extra[k] && a < 47; k++)
        argv[a++] = extra[k];
    argv[a] = NULL;
    return sgp_spawn(argv, out);
}

typedef struct rounds_reached {
    const char *dir;
    int from, to; /* peers from..to */
    long round;
} rounds_reached;

/* Every peer from..to of dir has logged a round >= round. */
static int all_reached(const void *arg)
{
    const rounds_reached *r = arg;
    for (int i = r->from; i <= r->to; i++)
        if (sgp_peer_last_round(r->dir, i) < r->round)
            return 0;
    return 1;
}

/* ---- sgp peer --resume with no checkpoint: a late join ----------------------- */

/* Peers 1-3 of exp4 train; once every one of them has logged round 50, peer
 * 0 starts with --resume and a checkpoint path where there is no file: it
 * asks a neighbour for its model, enters at that neighbour's round and ends
 * with the others. The joiner is peer 0 because only the lower id of a pair
 * dials (WIRE.md "Connections"): peer 0 dials the others as it starts,
 * whereas a joiner with the highest id would wait for the others' redial
 * (up to 0.75 s apart), which a loaded machine could make longer. */
/* The decisions peer `id` logged (the "event" of its JSON lines; with
 * id >= 0, only the lines of that "id": the simulator's --events) up to
 * and including the first `last`, joined by " / ". */
static void decisions(const char *text, int id, const char *last, char *out, size_t cap)
{
    out[0] = 0;
    char key[32];
    snprintf(key, sizeof key, "{\"id\": %d,", id);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *ev = strstr(line, "\"event\": \""), *end = strchr(line, '\n');
        if (!ev || (end && ev > end) || (id >= 0 && strncmp(line, key, strlen(key)) != 0))
            continue;
        ev += strlen("\"event\": \"");
        const char *q = strchr(ev, '"');
        snprintf(out + strlen(out), cap - strlen(out), "%s%.*s", out[0] ? " / " : "", (int)(q - ev), ev);
        if (strncmp(ev, last, strlen(last)) == 0)
            return;
    }
}

/* One engine, two drivers: the same late join in `sgp sim` (peer 0
 * crashes at round 0 and comes back without state at round 50: --crash
 * 0@0 --join 0@50) makes the same decisions, in the same order, as the
 * real processes of `dir` did. */
static void same_decisions_in_the_simulator(const char *dir)
{
    char events[600], cmd[1400], path[512];
    snprintf(events, sizeof events, "%s/sim-events.jsonl", dir);
    snprintf(cmd, sizeof cmd,
             "%s sim --peers 4 --topology topologies/exp4.topo --model mlp:64 --seed 1 --codec stc:0.04 --epochs 8 "
             "--dead-timeout 1 --crash 0@0 --join 0@50 --events %s --no-progress > %s/sim.out 2>&1",
             sgp_bin(), events, dir);
    cr_assert_eq(system(cmd), 0, "%s (output in %s/sim.out)", cmd, dir);
    snprintf(path, sizeof path, "%s/peer0.jsonl", dir);
    char *real = sgp_read_file(path), *simulated = sgp_read_file(events);
    cr_assert(real && simulated);
    char a[600], b[600];
    decisions(real, -1, "joined with the model of peer", a, sizeof a);
    decisions(simulated, 0, "joined with the model of peer", b, sizeof b);
    cr_assert_str_eq(a, "no checkpoint: will pull the model from a neighbour / asked for the current model: peer / "
                        "joined with the model of peer", "the real joiner (%s)", dir);
    cr_assert_str_eq(b, a, "the simulated joiner decided otherwise (%s)", events);
    free(real), free(simulated);
}

/* frame_bytes: NULL, or SGP_TEST_FRAME_BYTES for every peer (WIRE.md
 * "Frames"): its MODEL and SYNCs then travel in many frames each. */
static void late_join(const char *frame_bytes)
{
    char dir[] = "/tmp/sgp-faults-join-XXXXXX", topo_path[512], what[600];
    if (frame_bytes)
        setenv("SGP_TEST_FRAME_BYTES", frame_bytes, 1);
    cr_assert(mkdtemp(dir));
    snprintf(topo_path, sizeof topo_path, "%s/topologies/exp4.topo", getenv("PWD") ? getenv("PWD") : ".");
    sgp_make_cluster(dir, "late-join", 4, topo_path);
    pid_t pids[4] = {0};
    /* --round-timeout 2 --dead-timeout 1: peers 1-3 start without peer 0
     * (round 0 waits for every neighbour for the round timeout, then one
     * that never connected is routed around after the dead timeout). */
    for (int i = 1; i < 4; i++)
        pids[i] = start_peer(dir, i, (char *[]){"--epochs", "8", "--round-timeout", "2", "--dead-timeout", "1", NULL});
    snprintf(what, sizeof what, "round 50 logged by each of peers 1-3 running without peer 0 (logs in %s)", dir);
    sgp_await(all_reached, &(rounds_reached){dir, 1, 3, 50}, what, pids + 1, 3, SGP_EVENT_LIMIT_S);
    /* The joiner gives up when no neighbour has sent its model within its
     * round timeout: the default (30 s) rather than 2 s, so that a busy
     * machine's handshake and model transfer are not what is tested. */
    pids[0] = start_peer(dir, 0, (char *[]){"--epochs", "8", "--dead-timeout", "1", "--resume", NULL});
    sgp_wait_all_ok(pids, 4, RUN_LIMIT_S, dir);

    char out0[300];
    snprintf(out0, sizeof out0, "%s/peer0.out", dir);
    cr_assert(sgp_file_has(out0, "no checkpoint: will pull the model from a neighbour"), "%s", out0);
    char *text = sgp_read_file(out0);
    const char *joined = strstr(text, "joined with the model of peer ");
    int from = -1;
    if (joined)
        sscanf(joined, "joined with the model of peer %d", &from);
    free(text);
    cr_assert(from >= 1 && from <= 3, "peer 0 did not join with a neighbour's model (%s)", out0);
    cr_assert(sgp_peer_out_has(dir, from, "sent its model to joining peer 0"),
              "peer %d does not say it sent its model to peer 0 (logs in %s)", from, dir);

    const double start = sgp_peer_number(dir, 0, "start_round");
    cr_assert_geq(start, 50, "peer 0 entered at the round of the peer it joined, not at 0 (%s)", dir);
    same_decisions_in_the_simulator(dir);
    cr_assert_eq(sgp_peer_number(dir, 0, "rounds"), 1000, "%s", dir);
    cr_assert_geq(sgp_peer_number(dir, 0, "checkpoints"), 1, "a joiner checkpoints like the others (%s)", dir);
    const double acc0 = sgp_peer_number(dir, 0, "test_accuracy"), acc1 = sgp_peer_number(dir, 1, "test_accuracy");
    cr_assert_leq(fabs(acc0 - acc1), 0.010 + 1e-6, "the joiner ends at %.2f%%, peer 1 at %.2f%% (logs in %s)",
                  100 * acc0, 100 * acc1, dir);
    double syncs = 0;
    for (int i = 0; i < 4; i++)
        syncs += sgp_peer_number(dir, i, "syncs_sent");
    cr_log_info("SYNCs sent: %.0f", syncs); /* (how many a join takes depends on timing: a gap or none) */
    sgp_rm_rf(dir);
}

Test(peer_faults, late_join_without_checkpoint_pulls_a_neighbours_model) { late_join(NULL); }

/* The same with frames of at most 1,000 bytes: the model (19 KB) and any
 * SYNC (at least its 19 KB reference) go in pieces, put together at the
 * other end, and the run is the same. */
Test(peer_faults, a_joiner_s_model_and_syncs_in_many_frames_each) { late_join("1000"); }

/* ---- a long SIGSTOP ---------------------------------------------------------- */

/* Four peers of exp4 (mlp:64, 16 epochs: 2,000 rounds, dead timeout 0.5 s)
 * in dir, cluster `name`, started; pids out. */
static void start_four(char *dir, const char *name, pid_t pids[4])
{
    char topo_path[512];
    cr_assert(mkdtemp(dir), "mkdtemp %s", dir);
    snprintf(topo_path, sizeof topo_path, "%s/topologies/exp4.topo", getenv("PWD") ? getenv("PWD") : ".");
    sgp_make_cluster(dir, name, 4, topo_path);
    for (int i = 0; i < 4; i++)
        pids[i] = start_peer(dir, i, (char *[]){"--epochs", "16", "--dead-timeout", "0.5", NULL});
}

static double mean_accuracy(const char *dir)
{
    double sum = 0;
    for (int i = 0; i < 4; i++)
        sum += sgp_peer_number(dir, i, "test_accuracy") / 4;
    return sum;
}

typedef struct stop_seen {
    const char *dir;
    int stopped;
    long round;
} stop_seen;

/* Every peer but the stopped one is past round `round`, and one of them has
 * routed around the stopped one for its silence. */
static int stop_long_enough(const void *arg)
{
    const stop_seen *s = arg;
    int routed = 0;
    char needle[96];
    snprintf(needle, sizeof needle, "routing around neighbour %d: silent for the dead timeout", s->stopped);
    for (int i = 0; i < 4; i++) {
        if (i == s->stopped)
            continue;
        if (sgp_peer_last_round(s->dir, i) < s->round)
            return 0;
        routed |= sgp_peer_out_has(s->dir, i, needle);
    }
    return routed;
}

/* SIGSTOP of one of 4 peers for 15% of the run or more (the test sends
 * SIGCONT once the others are 300 rounds further and have routed around it,
 * so the stop lasts at least 300 round times and a dead timeout, whatever
 * the machine's speed): the live peers' weights stay within [0.25, 4] (the
 * acknowledgement window stops shares into a hung peer's socket), the run's
 * total weight at the end, held plus in flight by the ledgers, is still 4
 * (nobody died), the stopped peer keeps the connections whose frames wait
 * in its socket buffers (its own idle timers fire first on waking), comes
 * back far behind and takes a neighbour's model instead of averaging its
 * stale one back in, and the peers end within 0.8 points of the same run
 * without the stop: a stop moves this small run's accuracy either way (test
 * set of 2,000 images: 0.05 points an image), and the run without it is one
 * sample too, which moves by a few tenths when the floats of gossip change:
 * the difference measured -0.70 to +0.44 points over twelve runs of two
 * builds; the demo-scale figure is in gossip/GUARANTEES.md. */
Test(peer_faults, a_long_sigstop_keeps_weights_total_and_accuracy)
{
    char base[] = "/tmp/sgp-faults-nostop-XXXXXX", dir[] = "/tmp/sgp-faults-longstop-XXXXXX";
    pid_t pids[4];
    start_four(base, "no-stop", pids);
    sgp_wait_all_ok(pids, 4, RUN_LIMIT_S, base);
    const double clean = mean_accuracy(base);

    start_four(dir, "long-stop", pids);
    char what[600];
    snprintf(what, sizeof what, "round 100 logged by every peer (logs in %s)", dir);
    sgp_await(all_reached, &(rounds_reached){dir, 0, 3, 100}, what, pids, 4, SGP_EVENT_LIMIT_S);
    cr_assert_eq(kill(pids[2], SIGSTOP), 0);
    const long at = sgp_peer_last_round(dir, 0);
    snprintf(what, sizeof what, "the others 300 rounds further, peer 2 routed around (logs in %s)", dir);
    sgp_await(stop_long_enough, &(stop_seen){dir, 2, at + 300}, what, pids, 4, SGP_EVENT_LIMIT_S);
    cr_assert_eq(kill(pids[2], SIGCONT), 0);
    sgp_wait_all_ok(pids, 4, RUN_LIMIT_S, dir);

    for (int i = 0; i < 4; i++) {
        if (i == 2)
            continue;
        int n;
        round_line *r = read_rounds(dir, i, &n);
        double lo = INFINITY, hi = 0;
        for (int k = 0; k < n; k++)
            lo = fmin(lo, r[k].w), hi = fmax(hi, r[k].w);
        free(r);
        cr_assert(n > 0 && lo >= 0.25 && hi <= 4, "peer %d's weight went from %.3g to %.3g (logs in %s)", i, lo, hi, dir);
    }
    launch_mass m;
    char err[1200];
    cr_assert_eq(launch_ledger(dir, 4, NULL, &m, err, sizeof err), 0, "%s", err);
    cr_assert_leq(fabs(m.held + m.in_flight - 4), 1e-6, "total weight %.9g (%.3g in flight; logs in %s)",
                  m.held + m.in_flight, m.in_flight, dir);
    cr_assert(!sgp_peer_out_has(dir, 2, "no complete frame"), "peer 2 closed a connection whose frames it had not read (logs in %s)", dir);
    cr_assert(!sgp_peer_out_has(dir, 2, "resumed from") && sgp_peer_number(dir, 2, "refreshes") >= 1 &&
                  sgp_peer_out_has(dir, 2, "took the current model of peer"),
              "peer 2 came back far behind and took a neighbour's model (logs in %s)", dir);
    const double acc = mean_accuracy(dir);
    cr_log_info("long stop: mean accuracy %.2f%%, without the stop %.2f%%", 100 * acc, 100 * clean);
    cr_assert_leq(fabs(acc - clean), 0.008 + 1e-6, "peers end at %.2f%% on average, %.2f%% without the stop (logs in %s, %s)",
                  100 * acc, 100 * clean, dir, base);
    sgp_rm_rf(dir);
    sgp_rm_rf(base);
}

/* ---- the ledger across a join and a restart ---------------------------------- */

/* Mass at comebacks (gossip/GUARANTEES.md): peers 1-3 start, peer 0 joins
 * late without a checkpoint (one unit of weight), and peer 2 is stopped by
 * SIGTERM (it checkpoints as it stops) and started again with --resume. No
 * run died with state its checkpoint lacks, so the ledgers must account for
 * every bit of weight: held + in flight == 3 + 1 + rescaled - adopted, where
 * rescaled is what the resume's power of two added and adopted what the
 * join took as a baseline on its in-edges (shares meant for the id before
 * it). The restarted peer adopts nothing: it comes back from the state it
 * stopped with (a final checkpoint), so the shares sent to it meanwhile are
 * asked for with a SYNC. */
static void ledger_at_comebacks(const char *frame_bytes);

Test(peer_faults, a_join_and_a_clean_restart_keep_the_ledger_exact) { ledger_at_comebacks(NULL); }

/* The same with frames of at most 1,000 bytes (WIRE.md "Frames"): the
 * joiner's MODEL and the restarted peer's SYNCs go in pieces, and not a
 * bit of weight is lost. */
Test(peer_faults, in_many_frames_a_join_and_a_clean_restart_keep_the_ledger_exact) { ledger_at_comebacks("1000"); }

static void ledger_at_comebacks(const char *frame_bytes)
{
    if (frame_bytes)
        setenv("SGP_TEST_FRAME_BYTES", frame_bytes, 1);
    char dir[] = "/tmp/sgp-faults-ledger-XXXXXX", topo_path[512], what[600];
    cr_assert(mkdtemp(dir));
    snprintf(topo_path, sizeof topo_path, "%s/topologies/exp4.topo", getenv("PWD") ? getenv("PWD") : ".");
    sgp_make_cluster(dir, "ledger", 4, topo_path);
    pid_t pids[4] = {0};
    char *const founders[] = {"--epochs", "8", "--round-timeout", "2", "--dead-timeout", "1", NULL};
    for (int i = 1; i < 4; i++)
        pids[i] = start_peer(dir, i, founders);
    snprintf(what, sizeof what, "round 50 logged by each of peers 1-3 (logs in %s)", dir);
    sgp_await(all_reached, &(rounds_reached){dir, 1, 3, 50}, what, pids + 1, 3, SGP_EVENT_LIMIT_S);
    char *const comeback[] = {"--epochs", "8", "--dead-timeout", "1", "--resume", NULL};
    pids[0] = start_peer(dir, 0, comeback);
    snprintf(what, sizeof what, "peer 0 joined and every peer past round 300 (logs in %s)", dir);
    sgp_await(all_reached, &(rounds_reached){dir, 0, 3, 300}, what, pids, 4, SGP_EVENT_LIMIT_S);

    cr_assert_eq(kill(pids[2], SIGTERM), 0);
    const int st = sgp_wait_exit(pids[2], SGP_EVENT_LIMIT_S);
    cr_assert_eq(st, 0, "peer 2 exit status %d after SIGTERM (logs in %s)", st, dir);
    pids[2] = start_peer(dir, 2, comeback);
    sgp_wait_all_ok(pids, 4, RUN_LIMIT_S, dir);

    cr_assert(sgp_peer_out_has(dir, 0, "joined with the model of peer"), "peer 0 joined (logs in %s)", dir);
    cr_assert(sgp_peer_out_has(dir, 2, "resumed from"), "peer 2 resumed from its checkpoint (logs in %s)", dir);
    launch_mass m;
    char err[1200];
    cr_assert_eq(launch_ledger(dir, 4, NULL, &m, err, sizeof err), 0, "%s", err);
    const double expect = 4 + m.rescaled - m.adopted;
    cr_log_info("ledger: held %.9g + in flight %.3g; 4 + rescaled %.3g - adopted %.3g = %.9g", m.held, m.in_flight,
                m.rescaled, m.adopted, expect);
    cr_assert_leq(fabs(m.held + m.in_flight - expect), 1e-6,
                  "total weight %.9g (%.3g in flight), expected 4 + %.9g rescaled - %.9g adopted (logs in %s)",
                  m.held + m.in_flight, m.in_flight, m.rescaled, m.adopted, dir);
    double syncs = 0;
    for (int i = 0; i < 4; i++)
        syncs += sgp_peer_number(dir, i, "syncs_sent");
    cr_log_info("SYNCs sent: %.0f", syncs);
    char path[600];
    snprintf(path, sizeof path, "%s/peer2.jsonl", dir);
    char *log = sgp_read_file(path);
    cr_assert(log, "%s is missing", path);
    double adopted_2 = 0; /* (each of its runs' ledger line) */
    for (const char *p = log; (p = strstr(p, "\"w_adopted\": ")); p++)
        adopted_2 += strtod(p + 13, NULL);
    free(log);
    cr_assert_eq(adopted_2, 0.0, "the restarted peer adopted %.9g (logs in %s)", adopted_2, dir);
    sgp_rm_rf(dir);
}

/* ---- SIGTERM: a peer leaves -------------------------------------------------- */

/* SIGTERM: the peer says goodbye, closes every handle and exits 0 within 2 s;
 * its neighbours route around it and finish their run. The signal is sent
 * once every peer has logged round 5: training is under way everywhere, and
 * peer 2's handler is installed (before its event loop starts; a SIGTERM
 * during start-up kills it as the default action does, status 128 + 15). */
Test(peer_faults, sigterm_stops_one_peer_cleanly_and_the_others_finish)
{
    char dir[] = "/tmp/sgp-faults-term-XXXXXX", topo_path[512];
    cr_assert(mkdtemp(dir));
    snprintf(topo_path, sizeof topo_path, "%s/topologies/exp4.topo", getenv("PWD") ? getenv("PWD") : ".");
    sgp_make_cluster(dir, "sigterm", 4, topo_path);
    pid_t pids[4];
    for (int i = 0; i < 4; i++) /* peer 2 would train for a long time: only SIGTERM ends it */
        pids[i] = start_peer(dir, i,
                             (char *[]){"--model", "mlp:32", "--epochs", i == 2 ? "200" : "8", "--dead-timeout", "0.5",
                                        "--checkpoint-every", "0", NULL});
    char what[600];
    snprintf(what, sizeof what, "round 5 logged by every peer (logs in %s)", dir);
    sgp_await(all_reached, &(rounds_reached){dir, 0, 3, 5}, what, pids, 4, SGP_EVENT_LIMIT_S);

    const double t0 = sgp_now();
    cr_assert_eq(kill(pids[2], SIGTERM), 0);
    int st;
    cr_assert_eq(waitpid(pids[2], &st, 0), pids[2]);
    const double took = sgp_now() - t0;
    pids[2] = 0;
    if (sgp_exit_status(st) != 0 || took >= 2.0)
        for (int i = 0; i < 4; i++)
            sgp_kill_group(pids[i]);
    cr_assert_eq(sgp_exit_status(st), 0, "peer 2 exit status %d after SIGTERM (logs in %s)", sgp_exit_status(st), dir);
    /* Liveness, not speed: the peer stops at its next round boundary (a few
     * ms of work here) instead of training on for 200 epochs. */
    cr_assert_lt(took, 2.0, "peer 2 took %.2f s to stop (logs in %s)", took, dir);
    char ckpt2[300];
    snprintf(ckpt2, sizeof ckpt2, "%s/peer2.ckpt", dir);
    struct stat sb;
    cr_assert_eq(stat(ckpt2, &sb), 0, "peer 2 checkpoints when it stops (%s)", ckpt2);
    sgp_wait_all_ok(pids, 4, RUN_LIMIT_S, dir);
    for (int i = 0; i < 4; i++)
        if (i != 2)
            cr_assert_eq(sgp_peer_number(dir, i, "rounds"), 1000, "survivor %d ran every round (logs in %s)", i, dir);
    sgp_rm_rf(dir);
}

/* --on-term leave (sgp peer's default without --checkpoint): on SIGTERM the
 * peer says goodbye, waits for its neighbours' answers (after which none of
 * their shares is on its way to it), hands its push-sum weight to its live
 * neighbours (one PUSH each), removes its checkpoint (it holds weight that
 * is now the others', and a --resume then joins instead) and exits 0; the
 * three that stay finish their run and, by their ledgers, hold the run's
 * weight of 4 exactly, nothing of it in flight (before the answers, the
 * shares sent to the leaver while its goodbye was on its way, 0.08, were
 * lost). */
Test(peer_faults, a_peer_that_leaves_on_sigterm_hands_its_weight_to_the_others)
{
    char dir[] = "/tmp/sgp-faults-leave-XXXXXX", topo_path[512];
    cr_assert(mkdtemp(dir));
    snprintf(topo_path, sizeof topo_path, "%s/topologies/exp4.topo", getenv("PWD") ? getenv("PWD") : ".");
    sgp_make_cluster(dir, "leave", 4, topo_path);
    pid_t pids[4];
    for (int i = 0; i < 4; i++)
        pids[i] = start_peer(dir, i,
                             (char *[]){"--epochs", i == 2 ? "200" : "8", "--dead-timeout", "1", "--on-term",
                                        i == 2 ? "leave" : "stop", NULL});
    char what[600];
    snprintf(what, sizeof what, "round 50 logged by every peer (logs in %s)", dir);
    sgp_await(all_reached, &(rounds_reached){dir, 0, 3, 50}, what, pids, 4, SGP_EVENT_LIMIT_S);
    cr_assert_eq(kill(pids[2], SIGTERM), 0);
    const int st = sgp_wait_exit(pids[2], SGP_EVENT_LIMIT_S);
    pids[2] = 0;
    cr_assert_eq(st, 0, "peer 2 exit status %d after SIGTERM (logs in %s)", st, dir);
    sgp_wait_all_ok(pids, 4, RUN_LIMIT_S, dir);
    cr_assert(sgp_peer_out_has(dir, 2, "leaving: handed its weight to its neighbours"), "peer 2 handed its weight on (logs in %s)",
              dir);
    char ckpt2[300];
    struct stat sb;
    snprintf(ckpt2, sizeof ckpt2, "%s/peer2.ckpt", dir);
    cr_assert_neq(stat(ckpt2, &sb), 0, "peer 2 left no checkpoint to come back with (%s)", ckpt2);
    for (int i = 0; i < 4; i++)
        if (i != 2)
            cr_assert_eq(sgp_peer_number(dir, i, "rounds"), 1000, "peer %d ran every round (logs in %s)", i, dir);
    launch_mass m;
    char err[1200];
    cr_assert_eq(launch_ledger(dir, 4, NULL, &m, err, sizeof err), 0, "%s", err);
    cr_log_info("after the leave: held %.9g, in flight %.3g", m.held, m.in_flight);
    cr_assert_leq(fabs(m.held + m.in_flight - 4), 1e-6, "total weight %.9g (%.3g in flight; logs in %s)",
                  m.held + m.in_flight, m.in_flight, dir);
    cr_assert_leq(m.in_flight, 1e-6, "nothing owed to the leaver: %.3g in flight (logs in %s)", m.in_flight, dir);
    sgp_rm_rf(dir);
}
