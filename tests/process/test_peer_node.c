/* The networked peer end to end: real `sgp peer` processes on loopback with
 * real keys and encrypted TCP, compared with `sgp sim` on the same settings.
 * With tau = 0 the two must produce the same models, bit for bit. */
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

#include "nn/nn_blas.h"
#include "peer/sim/sim.h"
#include "tests/sgp_cluster.h"

TestSuite(peer_node, .timeout = 180);


/* Start `sgp peer` for every id, wait for all (killing them after SGP_EVENT_LIMIT_S). */
static void run_peers(const char *dir, int n, char *const extra[])
{
    pid_t pids[16];
    for (int i = 0; i < n; i++) {
        char cl[256], id[16], out[256], model[256];
        snprintf(cl, sizeof cl, "%s/cluster.conf", dir);
        snprintf(id, sizeof id, "%d", i);
        snprintf(out, sizeof out, "%s/peer%d.log", dir, i);
        snprintf(model, sizeof model, "%s/peer%d.model", dir, i);
        char *argv[40] = {(char *)sgp_bin(), "peer", "--cluster", cl, "--id", id, "--save-model", model,
                          "--model-format", "raw"};
        int a = 10;
        for (int k = 0; extra[k] && a < 38; k++)
            argv[a++] = extra[k];
        argv[a] = NULL;
        pids[i] = sgp_spawn(argv, out);
    }
    sgp_wait_all_ok(pids, n, SGP_EVENT_LIMIT_S, dir);
}

static float *read_model(const char *dir, int i, size_t n)
{
    char path[256];
    snprintf(path, sizeof path, "%s/peer%d.model", dir, i);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    float *m = malloc(n * sizeof *m);
    cr_assert_eq(fread(m, sizeof *m, n, f), n, "%s holds fewer than %zu values", path, n);
    fclose(f);
    return m;
}

/* The model and data of a comparison: mlp:32 on the embedded digits, or a
 * language model on text (the first bytes of this README, held-out tenth
 * and all) with AdamW. */
typedef struct workload {
    const char *model, *optimizer, *lr;
    int text;           /* 0: the embedded digits */
    const char *epochs; /* NULL: 2 */
} workload;

static const workload DIGITS = {"mlp:32", "sgd", "0.1", 0, NULL};
static const workload GPT = {"gpt:1:16:2", "adamw", "0.003", 1, NULL};
/* 814,090 parameters: without a codec each share is a frame of 6.5 MB,
 * sealed and opened on the thread pool and taken in where it arrived. */
static const workload WIDE = {"mlp:1024", "sgd", "0.1", 0, "1"};

/* Bit for bit; or, with `near` > 0, each peer's model within that relative
 * distance (L2) of the simulator's: a transport that keeps a share home on
 * a link still busy with the last big frame (backpressure, which the
 * simulator does not model) moves the last bits. */
static void sim_equals_network_near(const workload *w, const char *codec_text, const char *warmup,
                                    const char *local_steps, const char *outer, int overlap, double near,
                                    const char *gather)
{
    char dir[] = "/tmp/sgp-node-XXXXXX", topo_path[256], data[300] = "";
    cr_assert(mkdtemp(dir));
    snprintf(topo_path, sizeof topo_path, "%s/topologies/%s.topo", getenv("PWD") ? getenv("PWD") : ".",
             gather ? "complete4" : "exp4");
    sgp_make_cluster(dir, "node-test", 4, topo_path);
    if (w->text) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "head -c 12000 README.md > %s/text.txt", dir);
        cr_assert_eq(system(cmd), 0);
        snprintf(data, sizeof data, "text:%s/text.txt", dir);
    }
    /* A fixed deadline as long as the round timeout: nobody is ever declared
     * late, so the run is as synchronous as the simulator's. */
    const char *epochs = w->epochs ? w->epochs : "2";
    char *extra[] = {"--model", (char *)w->model, "--epochs", (char *)epochs, "--codec", (char *)codec_text, "--round-deadline",
                     "30", "--codec-warmup", (char *)warmup, "--local-steps", (char *)local_steps, "--outer",
                     (char *)outer, "--optimizer", (char *)w->optimizer, "--lr", (char *)w->lr,
                     overlap ? "--overlap" : "--no-progress", "--no-progress", gather ? "--gather" : "--tau",
                     gather ? (char *)gather : "0", w->text ? "--data" : NULL, data,
                     "--context", "16", NULL};
    run_peers(dir, 4, extra);

    /* The same run in the simulator, in this process. */
    nn_dataset train = {0}, test = {0};
    char err[256];
    if (w->text)
        cr_assert_eq(nn_data_load(data, 16, &train, &test, err, sizeof err), 0, "%s", err);
    else
        cr_assert_eq(nn_data_embedded(&train, &test, err, sizeof err), 0, "%s", err);
    topo t = {0};
    parse_error te;
    cr_assert_eq(topo_load(&t, topo_path, &te), 0, "%s", te.msg);
    cmp_spec spec;
    const int exact = strcmp(codec_text, "exact") == 0; /* (no codec: running sums in float64) */
    cr_assert(exact || cmp_spec_parse(&spec, codec_text, err, sizeof err) == 0, "%s", err);
    sim_config c;
    sim_config_defaults(&c);
    c.peer.n_peers = 4, c.peer.topology = &t, c.peer.codec = exact ? NULL : &spec, c.keep_peer_models = 1;
    c.peer.codec_warmup = atof(warmup);
    c.peer.local_steps = atoi(local_steps);
    c.peer.overlap = overlap;
    c.peer.gather = gather != NULL, c.peer.gather_decay = gather ? (float)atof(gather) : 0.0f;
    outer_opts oo;
    cr_assert_eq(outer_opts_parse(&oo, outer, err, sizeof err), 0, "%s", err);
    c.peer.outer = &oo;
    c.peer.train.model = w->model, c.peer.train.epochs = atoi(epochs), c.peer.train.progress = 0;
    cr_assert_eq(nn_opt_kind_parse(w->optimizer, &c.peer.train.optimizer), 0);
    c.peer.train.lr = atof(w->lr), c.peer.train.lr_given = 1;
    train_opts_finish(&c.peer.train);
    /* One BLAS thread, as each `sgp peer` runs by default: a threaded sgemm
     * sums in another order, and the models would differ in the last bits. */
    nn_blas_set_threads((int)c.peer.train.threads);
    sim_result r;
    cr_assert_eq(sim_run(&c, &train, &test, &r, err, sizeof err), 0, "%s", err);
    for (int i = 0; i < 4; i++) {
        float *m = read_model(dir, i, r.parameters);
        const float *s = &r.peer_models[(size_t)i * r.parameters];
        size_t differ = 0;
        double d2 = 0, s2 = 0;
        for (size_t k = 0; k < r.parameters; k++) {
            differ += memcmp(&m[k], &s[k], sizeof(float)) != 0;
            d2 += ((double)m[k] - s[k]) * ((double)m[k] - s[k]), s2 += (double)s[k] * s[k];
        }
        if (near > 0)
            cr_assert(sqrt(d2) <= near * sqrt(s2), "%s: peer %d is %.3g from the simulator (relative), over %g (logs in %s)",
                      codec_text, i, sqrt(d2 / s2), near, dir);
        else
            cr_assert_eq(differ, 0, "%s: peer %d differs from the simulator in %zu of %zu values (logs in %s)",
                         codec_text, i, differ, r.parameters, dir);
        if (getenv("SGP_TEST_VERBOSE"))
            fprintf(stderr, "peer %d: %zu values differ, relative distance %.3g\n", i, differ, sqrt(d2 / s2));
        free(m);
    }
    sim_result_free(&r);
    topo_free(&t);
    nn_dataset_free(&train);
    nn_dataset_free(&test);
    sgp_rm_rf(dir);
}

static void sim_equals_network_on(const workload *w, const char *codec_text, const char *warmup,
                                  const char *local_steps, const char *outer)
{
    sim_equals_network_near(w, codec_text, warmup, local_steps, outer, 0, 0, NULL);
}

static void sim_equals_network(const char *codec_text, const char *warmup, const char *local_steps, const char *outer)
{
    sim_equals_network_on(&DIGITS, codec_text, warmup, local_steps, outer);
}

Test(peer_node, four_processes_equal_the_simulator_bit_for_bit) { sim_equals_network("none", "0", "1", "none"); }

Test(peer_node, compressed_four_processes_equal_the_simulator) { sim_equals_network("stc:0.05", "0", "1", "none"); }

/* Every message in frames of at most 256 bytes (WIRE.md "Frames": the test-
 * only SGP_TEST_FRAME_BYTES): put together at the receiver, they make the
 * same run to the bit. */
Test(peer_node, four_processes_with_messages_in_many_frames_equal_the_simulator)
{
    setenv("SGP_TEST_FRAME_BYTES", "256", 1);
    sim_equals_network("stc:0.05", "0", "1", "none");
}

/* sparseloco's chunks and levels are the same bytes on the wire as in the simulator. */
Test(peer_node, sparseloco_in_four_processes_equals_the_simulator)
{
    sim_equals_network("sparseloco:16:256", "0", "2", "none");
}

/* The exact sparse all-gather (--gather) on a GPT: every peer's message to
 * every other, the same aggregate applied everywhere, the same bits as the
 * simulator's peers (which equal each other). */
Test(peer_node, the_sparse_all_gather_in_four_processes_equals_the_simulator)
{
    sim_equals_network_near(&GPT, "sparseloco:8:256", "0", "3", "none", 0, 0, "0.9");
}

/* And with --overlap: each round's steps beside the apply of the round
 * before, folded onto it (gsp_gather_fold), the same rule in both. */
Test(peer_node, the_sparse_all_gather_with_overlap_in_four_processes_equals_the_simulator)
{
    sim_equals_network_near(&GPT, "sparseloco:8:256", "0", "3", "none", 1, 0, "0.9");
}

/* Shares of a whole model each (the running sums, 6.5 MB): the transport's
 * big-frame path (sealed and opened on the thread pool, each taken in where
 * it arrived: wire_push_in_place, which tests/unit/test_peer_wire.c checks
 * bit for bit) trains the simulator's models. Not to the bit: a link still
 * writing the last frame keeps that round's share home (runs here ended
 * 0.004 to 0.012 from the simulator); a share taken in wrong would put a
 * peer at a distance of the order of its model, or at NaN. */
Test(peer_node, whole_model_frames_in_four_processes_match_the_simulator)
{
    sim_equals_network_near(&WIDE, "exact", "0", "1", "none", 0, 0.2, NULL);
}

/* A language model on text, compressed, with local steps and an outer
 * optimizer: attention, text shards and per-token losses change nothing of
 * the round's determinism. */
Test(peer_node, a_gpt_on_text_in_four_processes_equals_the_simulator)
{
    sim_equals_network_on(&GPT, "stc:0.05", "0", "2", "nesterov:0.7:0.9");
}

/* The sparsity warm-up is the round driver's, so real peers run it too. */
Test(peer_node, codec_warmup_in_four_processes_equals_the_simulator) { sim_equals_network("stc:0.05", "1", "1", "none"); }

/* So are local steps (3 do not divide an epoch's 32) and the outer step. */
Test(peer_node, local_steps_and_outer_in_four_processes_equal_the_simulator)
{
    sim_equals_network("stc:0.05", "0", "3", "nesterov:0.5:0.5");
}

/* And the overlapped exchange (--overlap: the steps of a round before the
 * shares of the round before are absorbed), the same rule in both. */
Test(peer_node, overlapped_rounds_in_four_processes_equal_the_simulator)
{
    sim_equals_network_near(&DIGITS, "stc:0.05", "0", "3", "none", 1, 0, NULL);
}

/* `mpirun -np 4 sgp peer --cluster FILE` (no --id: the rank comes from
 * OMPI_COMM_WORLD_RANK) trains on localhost. openmpi-bin comes with `make deps`. */
Test(peer_node, mpirun_ranks_train)
{
    if (access("/usr/bin/mpirun", X_OK) != 0)
        cr_skip_test("mpirun is not installed (make deps installs openmpi-bin)");
    char dir[] = "/tmp/sgp-mpi-XXXXXX", topo_path[256], cl[256], cmd[1024];
    cr_assert(mkdtemp(dir));
    snprintf(topo_path, sizeof topo_path, "%s/topologies/exp4.topo", getenv("PWD") ? getenv("PWD") : ".");
    sgp_make_cluster(dir, "node-test", 4, topo_path);
    snprintf(cl, sizeof cl, "%s/cluster.conf", dir);
    snprintf(cmd, sizeof cmd,
             "cd %s && timeout 120 mpirun --allow-run-as-root --oversubscribe -np 4 %s peer --cluster %s "
             "--model mlp:32 --epochs 2 --no-progress > %s/mpirun.log 2>&1",
             dir, sgp_bin(), cl, dir);
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "mpirun failed (log in %s/mpirun.log)", dir);
    /* Each rank ends with "peer R: test accuracy A% (own model), ...". */
    char path[300], line[512];
    snprintf(path, sizeof path, "%s/mpirun.log", dir);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    int ranks = 0;
    while (fgets(line, sizeof line, f)) {
        int rank;
        double acc;
        if (sscanf(line, "peer %d: test accuracy %lf%%", &rank, &acc) == 2) {
            cr_assert_gt(acc, 85.0, "rank %d: %.2f%%", rank, acc);
            ranks |= 1 << rank;
        }
    }
    fclose(f);
    cr_assert_eq(ranks, 0xf, "every rank 0..3 trained (seen: 0x%x)", ranks);
    sgp_rm_rf(dir);
}
