/* libsgp's API (peer/lib/sgp.h) in this process: what it exports, that the
 * header is C and C++, that bad calls return errors, and two peers on
 * loopback driven from two threads of the test (real sockets, real crypto). */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "peer/lib/sgp.h"
#include "peer/store/version.h"
#include "tests/sgp_run.h"

#define N 1000

/* The names `nm` lists as defined global functions or data of FILE, sorted. */
static void exported(const char *nm_flags, const char *file, char *out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "nm %s %s | awk '$2 ~ /^[TDBR]$/ {print $3}' | sort", nm_flags, file);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    cr_assert_eq(pclose(p), 0, "%s", cmd);
}

static const char API[] = "sgp_checkpoint\nsgp_close\nsgp_error\nsgp_open\nsgp_options_init\n"
                          "sgp_options_init_sized\nsgp_status_get\nsgp_step\nsgp_version\n";

Test(lib_api, the_libraries_export_the_api_and_nothing_else)
{
    char path[1024], names[65536];
    snprintf(path, sizeof path, "%s/libsgp.so", sgp_build_dir());
    exported("-D --defined-only", path, names, sizeof names);
    cr_assert_str_eq(names, API, "libsgp.so exports:\n%s", names);
    snprintf(path, sizeof path, "%s/libsgp.a", sgp_build_dir());
    exported("-g --defined-only", path, names, sizeof names);
    cr_assert_str_eq(names, API, "libsgp.a exports:\n%s", names);
}

Test(lib_api, the_header_is_c99_and_cpp)
{
    const char *cmds[] = {"cc -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only -x c peer/lib/sgp.h",
                          "c++ -std=c++11 -pedantic -Wall -Wextra -Werror -fsyntax-only -x c++ peer/lib/sgp.h"};
    for (int i = 0; i < 2; i++)
        cr_assert_eq(system(cmds[i]), 0, "%s", cmds[i]);
}

Test(lib_api, bad_calls_return_errors)
{
    float params[N] = {0};
    char err[512];
    sgp_peer *p = (sgp_peer *)&params; /* not a peer */
    sgp_options o;
    sgp_options_init(&o);
    cr_assert_eq(sgp_open(NULL, &o, params, N, err, sizeof err), -EINVAL);
    cr_assert_eq(sgp_open(&p, NULL, params, N, err, sizeof err), -EINVAL);
    cr_assert_null(p);
    cr_assert_eq(sgp_open(&p, &o, params, N, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "cluster"), "%s", err);
    o.cluster = "/no/such/cluster.conf";
    cr_assert_eq(sgp_open(&p, &o, params, N, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "rounds"), "%s", err);
    o.rounds = 10;
    cr_assert_eq(sgp_open(&p, &o, NULL, N, err, sizeof err), -EINVAL);
    cr_assert_eq(sgp_open(&p, &o, params, 0, err, sizeof err), -EINVAL);
    o.codec = "topk:7";
    cr_assert_eq(sgp_open(&p, &o, params, N, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "codec"), "%s", err);
    o.codec = NULL;
    o.id = 0;
    cr_assert_eq(sgp_open(&p, &o, params, N, err, sizeof err), -ENOENT);
    cr_assert(strstr(err, "/no/such/cluster.conf"), "names the file: %s", err);
    o.local_steps = 0;
    cr_assert_eq(sgp_open(&p, &o, params, N, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "local_steps"), "%s", err);
    o.local_steps = 10, o.outer = "adam:0.7";
    cr_assert_eq(sgp_open(&p, &o, params, N, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "outer") && strstr(err, "nesterov:LR:MOMENTUM"), "%s", err);
    o.outer = NULL, o.overlap = 2;
    cr_assert_eq(sgp_open(&p, &o, params, N, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "overlap must be 0 or 1"), "%s", err);
    o.overlap = 0, o.gossip_threads = -1;
    cr_assert_eq(sgp_open(&p, &o, params, N, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "gossip_threads must be 0 (the host's cores) to 64"), "%s", err);
    o.gossip_threads = 0;
    o.size = sizeof o + 8; /* built against an sgp.h of no release */
    cr_assert_eq(sgp_open(&p, &o, params, N, err, sizeof err), -EINVAL);
    cr_assert_null(p);
    cr_assert_eq(sgp_open(&p, &o, params, N, NULL, 0), -EINVAL, "no message buffer is fine");

    cr_assert_eq(sgp_step(NULL, params, N), -EBADF);
    cr_assert_eq(sgp_step((sgp_peer *)&params, params, N), -EBADF);
    sgp_status s;
    cr_assert_eq(sgp_status_get((sgp_peer *)&o, &s), -EBADF);
    cr_assert_eq(sgp_checkpoint(NULL), -EBADF);
    cr_assert_eq(sgp_close((sgp_peer *)&o), -EBADF);
    cr_assert_str_eq(sgp_error(NULL), "not an open sgp peer");
    cr_assert_str_eq(sgp_version(), SGP_VERSION);
    cr_assert_str_eq(STORE_SGP_VERSION, SGP_VERSION, "peer/store/version.h and peer/lib/sgp.h name one release");
}

/* ---- two peers of one run, each on a thread of its own ----------------------- */

typedef struct pair_peer {
    const char *cluster, *checkpoint;
    int id, rc_open;
    float params[N];
    sgp_peer *p;
    char err[512];
} pair_peer;

static void *open_peer(void *arg)
{
    pair_peer *q = arg;
    sgp_options o;
    sgp_options_init(&o);
    o.cluster = q->cluster, o.id = q->id, o.rounds = 4, o.checkpoint = q->checkpoint;
    o.codec = "exact"; /* float64 running sums: the average is exact after one round */
    q->rc_open = sgp_open(&q->p, &o, q->params, N, q->err, sizeof q->err);
    return NULL;
}

static void *step_peer(void *arg)
{
    pair_peer *q = arg;
    q->rc_open = sgp_step(q->p, q->params, N);
    return NULL;
}

/* Two peers: exponential graph on 2 peers, each sends to the other. */
static void open_pair(char *dir, pair_peer q[2])
{
    cr_assert(mkdtemp(dir));
    sgp_out o;
    sgp_run(&o, "launch", "--peers", "2", "--prepare", "--run-dir", dir, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    static char cluster[256], ckpt[2][256];
    snprintf(cluster, sizeof cluster, "%s/cluster.conf", dir);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        snprintf(ckpt[i], sizeof ckpt[i], "%s/%d.ckpt", dir, i);
        q[i].cluster = cluster, q[i].id = i, q[i].checkpoint = ckpt[i];
        for (int k = 0; k < N; k++)
            q[i].params[k] = i == 0 ? (float)k : 3.0f * (float)k; /* averages to 2k */
        pthread_create(&t[i], NULL, open_peer, &q[i]);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(q[i].rc_open, 0, "peer %d: %s", i, q[i].err);
    }
}

Test(lib_api, two_peers_average_and_refuse_misuse, .timeout = 300)
{
    char dir[] = "/tmp/sgp-lib-api-XXXXXX";
    pair_peer *q = calloc(2, sizeof *q);
    open_pair(dir, q);
    cr_assert_eq(q[0].params[7], 7.0f, "open hands back the initial model");
    cr_assert_eq(sgp_step(q[0].p, q[0].params, N - 1), -EINVAL);
    cr_assert(strstr(sgp_error(q[0].p), "1000"), "%s", sgp_error(q[0].p));
    cr_assert_eq(sgp_step(q[0].p, NULL, N), -EINVAL);

    /* Peer 0 steps (no gradient: averaging only) and waits for peer 1's share:
     * meanwhile a second call on the same peer is refused. */
    pthread_t t;
    pthread_create(&t, NULL, step_peer, &q[0]);
    sgp_status s;
    const double limit = sgp_now() + SGP_EVENT_LIMIT_S;
    int rc;
    while ((rc = sgp_status_get(q[0].p, &s)) == 0 && sgp_now() < limit)
        sgp_poll_pause(); /* until the step thread is inside sgp_step */
    cr_assert_eq(rc, -EBUSY);
    cr_assert_eq(sgp_step(q[0].p, q[0].params, N), -EBUSY);
    cr_assert_eq(sgp_close(q[0].p), -EBUSY);
    cr_assert_eq(sgp_step(q[1].p, q[1].params, N), 0);
    pthread_join(t, NULL);
    cr_assert_eq(q[0].rc_open, 0);
    for (int k = 0; k < N; k += 97)
        for (int i = 0; i < 2; i++)
            cr_assert_float_eq(q[i].params[k], 2.0f * (float)k, 1e-4f * (1 + k), "peer %d, entry %d: %g", i, k,
                               q[i].params[k]);
    cr_assert_eq(sgp_status_get(q[0].p, &s), 0);
    cr_assert_eq(s.round, 1);
    cr_assert_eq(s.id, 0);
    cr_assert_eq(s.peers, 2);
    cr_assert_eq(s.local_steps, 1);
    cr_assert_float_eq(s.weight, 1.0, 1e-9);
    cr_assert_gt(s.bytes_sent, 4 * N);

    cr_assert_eq(sgp_checkpoint(q[0].p), 0);
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/0.ckpt", dir);
    cr_assert_eq(stat(path, &st), 0, "%s", path);

    /* Peer 1 leaves early: peer 0 routes around it and finishes alone. */
    cr_assert_eq(sgp_close(q[1].p), 0);
    while ((rc = sgp_step(q[0].p, q[0].params, N)) == 0)
        ;
    cr_assert_eq(rc, SGP_DONE, "%s", sgp_error(q[0].p));
    cr_assert_eq(sgp_step(q[0].p, q[0].params, N), SGP_DONE, "and stays done");
    cr_assert_eq(sgp_status_get(q[0].p, &s), 0);
    cr_assert(s.done);
    sgp_peer *closed = q[0].p;
    cr_assert_eq(sgp_close(closed), 0);
    cr_assert_eq(sgp_step(closed, q[0].params, N), -EBADF);
    cr_assert_eq(sgp_close(closed), -EBADF);
    free(q);
}

/* ---- the 1000x setting through the library: local steps and the outer optimizer ---- */

/* A call on a peer of the pair made from a thread of its own: what it
 * needs and what it returned. */
typedef struct peer_call {
    pair_peer *q;
    int resume, overlap, rc;
} peer_call;

static void *open_peer_call(void *arg)
{
    peer_call *op = arg;
    pair_peer *q = op->q;
    sgp_options o;
    sgp_options_init(&o);
    o.cluster = q->cluster, o.id = q->id, o.rounds = 4, o.checkpoint = q->checkpoint, o.resume = op->resume;
    o.codec = "exact", o.local_steps = 4, o.outer = "sgd:1:0.5";
    op->rc = sgp_open(&q->p, &o, q->params, N, q->err, sizeof q->err);
    return NULL;
}

/* Every entry moves by -1 over a round's local steps (the caller's "gradient
 * steps"), then both peers call sgp_step at once. */
static void *outer_round(void *arg)
{
    peer_call *op = arg;
    for (int k = 0; k < N; k++)
        op->q->params[k] -= 1.0f;
    op->rc = sgp_step(op->q->p, op->q->params, N);
    return NULL;
}

static void both(peer_call op[2], void *(*fn)(void *))
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, fn, &op[i]);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        cr_assert_geq(op[i].rc, 0, "peer %d: %s", i, op[i].q->p ? sgp_error(op[i].q->p) : op[i].q->err);
    }
}

/* Each entry should be k + shift on both peers. */
static void all_at(pair_peer *q, float shift, const char *when)
{
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < N; k += 37)
            cr_assert_float_eq(q[i].params[k], (float)k + shift, 1e-4f * (1 + k), "%s: peer %d, entry %d: %g, not %g",
                               when, i, k, q[i].params[k], (float)k + shift);
}

Test(lib_api, the_outer_optimizer_steps_on_each_round_and_its_velocity_survives_a_restart, .timeout = 300)
{
    char dir[] = "/tmp/sgp-lib-outer-XXXXXX";
    cr_assert(mkdtemp(dir));
    static char cluster[256], ckpt[2][256];
    sgp_prepare_cluster(dir, 2, cluster, sizeof cluster);
    pair_peer *q = calloc(2, sizeof *q);
    peer_call op[2];
    for (int i = 0; i < 2; i++) {
        snprintf(ckpt[i], sizeof ckpt[i], "%s/%d.ckpt", dir, i);
        q[i].cluster = cluster, q[i].id = i, q[i].checkpoint = ckpt[i];
        for (int k = 0; k < N; k++)
            q[i].params[k] = (float)k;
        op[i] = (peer_call){.q = &q[i]};
    }
    both(op, open_peer_call);
    /* sgd:1:0.5 on the round's progress g = 1: v = 0.5 v + g, a -= v, so
     * the model moves by 1, then 1.5 (plain SGP would move 1 a round). */
    both(op, outer_round);
    all_at(q, -1.0f, "round 1");
    both(op, outer_round);
    all_at(q, -2.5f, "round 2");
    sgp_status s;
    cr_assert_eq(sgp_status_get(q[0].p, &s), 0);
    cr_assert_eq(s.local_steps, 8, "two rounds of local_steps 4: %ld", s.local_steps);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(sgp_checkpoint(q[i].p), 0, "%s", sgp_error(q[i].p));
    for (int i = 0; i < 2; i++)
        cr_assert_eq(sgp_close(q[i].p), 0);

    /* Both restart from their checkpoints: the velocity 1.5 is back, so the
     * next round moves by 0.5 * 1.5 + 1 = 1.75 (a fresh one would move 1). */
    for (int i = 0; i < 2; i++)
        op[i].resume = 1, q[i].p = NULL;
    both(op, open_peer_call);
    all_at(q, -2.5f, "resumed");
    both(op, outer_round);
    all_at(q, -4.25f, "round 3, after the restart");
    for (int i = 0; i < 2; i++)
        cr_assert_eq(sgp_close(q[i].p), 0);
    free(q);
    sgp_rm_rf(dir);
}

/* ---- the exact sparse all-gather: the caller's steps are read where they are ---- */

static void *open_gather_peer(void *arg)
{
    peer_call *op = arg;
    pair_peer *q = op->q;
    sgp_options o;
    sgp_options_init(&o);
    o.cluster = q->cluster, o.id = q->id, o.rounds = 3, o.local_steps = 2;
    o.codec = "topk:1", o.gather = 0.0; /* every value, no error feedback: the arithmetic is exact */
    op->rc = sgp_open(&q->p, &o, q->params, N, q->err, sizeof q->err);
    return NULL;
}

/* Peer p's steps move every entry by -(p + 1); then its sgp_step. */
static void *gather_round(void *arg)
{
    peer_call *op = arg;
    for (int k = 0; k < N; k++)
        op->q->params[k] -= (float)(op->q->id + 1);
    op->rc = sgp_step(op->q->p, op->q->params, N);
    return NULL;
}

/* The all-gather through libsgp, whose caller steps in its own buffer (the
 * emit reads the step there; sgp's x is the round's start): the messages
 * are the rounds' progress, 1 and 2 an entry, the larger clipped to the
 * median norm (the lower of two: 1), so both models move by the mean 1 a
 * round and stay the same bits. */
Test(lib_api, the_all_gather_moves_both_models_by_the_clipped_mean_of_the_callers_steps, .timeout = 300)
{
    char dir[] = "/tmp/sgp-lib-gather-XXXXXX";
    cr_assert(mkdtemp(dir));
    static char cluster[256];
    sgp_prepare_cluster(dir, 2, cluster, sizeof cluster);
    pair_peer *q = calloc(2, sizeof *q);
    peer_call op[2];
    for (int i = 0; i < 2; i++) {
        q[i].cluster = cluster, q[i].id = i;
        for (int k = 0; k < N; k++)
            q[i].params[k] = (float)k;
        op[i] = (peer_call){.q = &q[i]};
    }
    both(op, open_gather_peer);
    both(op, gather_round);
    all_at(q, -1.0f, "round 1");
    both(op, gather_round);
    all_at(q, -2.0f, "round 2");
    both(op, gather_round);
    cr_assert_eq(op[0].rc, SGP_DONE);
    all_at(q, -3.0f, "the end");
    cr_assert_eq(memcmp(q[0].params, q[1].params, sizeof q[0].params), 0, "the same bits");
    for (int i = 0; i < 2; i++)
        cr_assert_eq(sgp_close(q[i].p), 0);
    free(q);
    sgp_rm_rf(dir);
}

/* ---- overlap: the exchange runs during the caller's steps --------------------- */

static void *open_overlap_peer(void *arg)
{
    peer_call *op = arg;
    pair_peer *q = op->q;
    sgp_options o;
    sgp_options_init(&o);
    o.cluster = q->cluster, o.id = q->id, o.rounds = 3, o.codec = "exact", o.overlap = op->overlap;
    op->rc = sgp_open(&q->p, &o, q->params, N, q->err, sizeof q->err);
    return NULL;
}

/* Peer p's "optimizer step" adds p + 1 to every entry; then its sgp_step. */
static void *own_step(void *arg)
{
    peer_call *op = arg;
    for (int k = 0; k < N; k++)
        op->q->params[k] += (float)(op->q->id + 1);
    op->rc = sgp_step(op->q->p, op->q->params, N);
    return NULL;
}

/* Every entry of peer i should be v (exactly: the values are sums of halves). */
static void peer_at(const pair_peer *q, int i, float v, const char *when)
{
    for (int k = 0; k < N; k += 37)
        cr_assert_eq(q[i].params[k], v, "%s: peer %d, entry %d: %g, not %g", when, i, k, q[i].params[k], v);
}

/* Two peers that start from 0 and send each other half their mass every round
 * (push-sum, "exact" codec), x += w (z' - z) for a step (engine_step_taken).
 * Without overlap, round r absorbs the other's share of round r before
 * sgp_step returns: z = 1.5, 3, then the final 4.5 on both. With overlap a
 * round's step runs beside its absorb of the shares of the round before, and
 * sgp_step hands back the model with the step folded in before the round's
 * emit, which follows on sgp's thread (w = 1 at the hand-out):
 *   round 0: the steps from 0, nothing to absorb: sgp_step hands back the own
 *            step z = 1 and 2; the emits leave x = 0.5 and 1 at w = 1/2;
 *   round 1: the other's round-0 share (1 and 0.5, w + 1/2) makes x = 1.5 and
 *            1.5 at w = 1, the steps (1 and 2 from 1 and 2) x = 2.5 and 3.5;
 *   round 2: the round-1 shares (1.75 and 1.25) on the halves left (1.25 and
 *            1.75) make 3 and 3, the steps 4 and 5; the end takes in the
 *            round-2 shares: 4.5 and 4.5, as without overlap (every step
 *            counts whole).
 * And since a round waits only for the shares of the round before, each
 * peer's first two sgp_step calls return with the other peer not stepping. */
Test(lib_api, with_overlap_sgp_step_hands_back_the_own_step_mixed_one_round_late, .timeout = 300)
{
    char dir[] = "/tmp/sgp-lib-overlap-XXXXXX";
    cr_assert(mkdtemp(dir));
    static char cluster[256];
    sgp_prepare_cluster(dir, 2, cluster, sizeof cluster);
    pair_peer *q = calloc(2, sizeof *q);
    peer_call op[2];
    for (int overlap = 0; overlap <= 1; overlap++) {
        for (int i = 0; i < 2; i++) {
            q[i] = (pair_peer){.cluster = cluster, .id = i}; /* params 0 */
            op[i] = (peer_call){.q = &q[i], .overlap = overlap};
        }
        both(op, open_overlap_peer);
        if (!overlap) {
            both(op, own_step);
            peer_at(q, 0, 1.5f, "no overlap, round 0"), peer_at(q, 1, 1.5f, "no overlap, round 0");
            both(op, own_step);
            peer_at(q, 0, 3.0f, "no overlap, round 1"), peer_at(q, 1, 3.0f, "no overlap, round 1");
            both(op, own_step);
            cr_assert_eq(op[0].rc, SGP_DONE);
            peer_at(q, 0, 4.5f, "no overlap, the end"), peer_at(q, 1, 4.5f, "no overlap, the end");
        } else {
            const float first[2] = {1.0f, 2.0f}, second[2] = {2.5f, 3.5f};
            for (int i = 0; i < 2; i++) { /* one peer after the other, on this thread */
                own_step(&op[i]);
                cr_assert_eq(op[i].rc, 0, "peer %d: %s", i, sgp_error(q[i].p));
                peer_at(q, i, first[i], "overlap, round 0: the own step");
                sgp_status s;
                cr_assert_eq(sgp_status_get(q[i].p, &s), 0);
                cr_assert_eq(s.round, 1, "round 1's model");
                cr_assert_float_eq(s.weight, 1.0, 1e-9, "handed out before round 0's emit: %g", s.weight);
            }
            for (int i = 0; i < 2; i++) {
                own_step(&op[i]);
                cr_assert_eq(op[i].rc, 0, "peer %d: %s", i, sgp_error(q[i].p));
                peer_at(q, i, second[i], "overlap, round 1: the round-0 shares are in");
            }
            both(op, own_step); /* the end waits for the round-2 shares */
            cr_assert_eq(op[0].rc, SGP_DONE);
            peer_at(q, 0, 4.5f, "overlap, the end"), peer_at(q, 1, 4.5f, "overlap, the end");
        }
        cr_assert_eq(op[1].rc, SGP_DONE);
        for (int i = 0; i < 2; i++)
            cr_assert_eq(sgp_close(q[i].p), 0);
    }
    free(q);
    sgp_rm_rf(dir);
}

/* The program caller.c of a release's fixture folder (tests/fixtures/abi-0.1.0,
 * ...), built with the sgp.h of that release beside it, runs unchanged
 * against this libsgp.so: two processes of it average (each checks its own
 * model and says "mean OK"). */
static void an_old_caller_runs(const char *fixture)
{
    char dir[] = "/tmp/sgp-lib-abi-XXXXXX";
    cr_assert(mkdtemp(dir));
    const char *san = getenv("SGP_SANITIZER");
    char cmd[2048], bin[512];
    snprintf(bin, sizeof bin, "%s/caller", dir);
    snprintf(cmd, sizeof cmd, "cc -std=c99 -Wall -Werror %s -I%s %s/caller.c -o %s -L%s -lsgp -Wl,-rpath,%s",
             san && *san ? "-fsanitize=address" : "", fixture, fixture, bin, sgp_build_dir(), sgp_build_dir());
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    char cluster[512], outs[2][512], ids[2][4];
    sgp_prepare_cluster(dir, 2, cluster, sizeof cluster);
    pid_t pids[2];
    for (int i = 0; i < 2; i++) {
        snprintf(outs[i], sizeof outs[i], "%s/caller%d.out", dir, i);
        snprintf(ids[i], sizeof ids[i], "%d", i);
        char *argv[] = {bin, cluster, ids[i], NULL};
        pids[i] = sgp_spawn(argv, outs[i]);
    }
    sgp_wait_all_ok(pids, 2, 4 * SGP_EVENT_LIMIT_S, dir);
    for (int i = 0; i < 2; i++)
        cr_assert(sgp_file_has(outs[i], "mean OK (sgp " SGP_VERSION ")"), "see %s", outs[i]);
    sgp_rm_rf(dir);
}

/* 0.1.0's sgp_options is smaller and its sgp_options_init is a function. */
Test(lib_api, a_program_built_with_the_0_1_0_header_still_runs, .timeout = 300)
{
    an_old_caller_runs("tests/fixtures/abi-0.1.0");
}

/* 0.2.0's sgp_options ends at `outer` (sized by the sgp_options_init macro):
 * its local_steps reach the run, and overlap, which it has not, stays off
 * (the first sgp_step hands back the mix). */
Test(lib_api, a_program_built_with_the_0_2_0_header_still_runs, .timeout = 300)
{
    an_old_caller_runs("tests/fixtures/abi-0.2.0");
}

/* 0.3.0's sgp_options has 0.4.0's size (gossip_threads fills its padding,
 * which its sgp_options_init wrote): its overlap reaches the run and the
 * gossip threads take their default. */
Test(lib_api, a_program_built_with_the_0_3_0_header_still_runs, .timeout = 300)
{
    an_old_caller_runs("tests/fixtures/abi-0.3.0");
}

/* 0.4.0's sgp_options ends at `gossip_threads` (0.5.0's gather follows it):
 * its gossip threads reach the run, and gather takes its default, push-sum. */
Test(lib_api, a_program_built_with_the_0_4_0_header_still_runs, .timeout = 300)
{
    an_old_caller_runs("tests/fixtures/abi-0.4.0");
}

/* `make install PREFIX=...` and a program built the way sgp.h tells C users
 * to: cc app.c $(pkg-config --cflags --libs sgp). The C example, built so
 * from the installed files only, runs as two peers of a run. */
Test(lib_api, make_install_then_a_pkg_config_build_runs_as_two_peers, .timeout = 600)
{
    char dir[] = "/tmp/sgp-lib-install-XXXXXX";
    cr_assert(mkdtemp(dir));
    const char *san = getenv("SGP_SANITIZER");
    char cmd[4096], bin[512], log[512];
    snprintf(log, sizeof log, "%s/install.log", dir);
    snprintf(cmd, sizeof cmd, "make --no-print-directory install PREFIX=%s/prefix SANITIZER=%s >%s 2>&1", dir,
             san ? san : "", log);
    cr_assert_eq(system(cmd), 0, "%s (see %s)", cmd, log);
    snprintf(bin, sizeof bin, "%s/softmax", dir);
    snprintf(cmd, sizeof cmd,
             "cp peer/lib/examples/softmax.c %s/app.c && cd %s && "
             "cc %s app.c -o softmax $(PKG_CONFIG_PATH=%s/prefix/lib/pkgconfig pkg-config --cflags --libs sgp) -lz -lm "
             ">>%s 2>&1 && ldd softmax | grep -q '%s/prefix/lib/libsgp.so'",
             dir, dir, san && *san ? "-fsanitize=address" : "", dir, log, dir);
    cr_assert_eq(system(cmd), 0, "%s (see %s)", cmd, log);
    char cluster[512], outs[2][512], ids[2][4];
    sgp_prepare_cluster(dir, 2, cluster, sizeof cluster);
    pid_t pids[2];
    for (int i = 0; i < 2; i++) {
        snprintf(outs[i], sizeof outs[i], "%s/peer%d.out", dir, i);
        snprintf(ids[i], sizeof ids[i], "%d", i);
        char *argv[] = {bin, "--cluster", cluster, "--id", ids[i], "--epochs", "1", "--codec", "stc:0.1", NULL};
        pids[i] = sgp_spawn(argv, outs[i]);
    }
    sgp_wait_all_ok(pids, 2, 4 * SGP_EVENT_LIMIT_S, dir);
    for (int i = 0; i < 2; i++)
        cr_assert(sgp_file_has(outs[i], "test accuracy"), "see %s", outs[i]);
    sgp_rm_rf(dir);
}
