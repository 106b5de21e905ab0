/* The command line as users meet it: real build/sgp processes. Usage errors
 * are one line on stderr with exit status 2; runtime failures exit 1 and name
 * the file at fault. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/sgp_run.h"

static sgp_out o;

TestSuite(peer_cli, .timeout = 120);

Test(peer_cli, top_level_help_lists_train)
{
    sgp_run(&o, "--help", NULL);
    cr_assert_eq(o.status, 0);
    cr_assert(strstr(o.out, "train"), "%s", o.out);
    sgp_run(&o, NULL);
    cr_assert_eq(o.status, 2, "no command is a usage error");
}

Test(peer_cli, unknown_command_is_one_line_status_2)
{
    sgp_run(&o, "trian", NULL);
    cr_assert_eq(o.status, 2);
    cr_assert_eq(sgp_lines(o.err), 1, "%s", o.err);
    cr_assert(strstr(o.err, "trian"), "%s", o.err);
}

Test(peer_cli, train_help_documents_every_option)
{
    sgp_run(&o, "train", "--help", NULL);
    cr_assert_eq(o.status, 0);
    const char *opts[] = {"--model", "--data", "fashion", "--epochs", "--batch", "--lr", "--momentum", "--nesterov",
                          "--weight-decay", "--warmup", "--lr-decay", "--seed", "--threads", "--summary"};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
        cr_assert(strstr(o.out, opts[i]), "--help does not mention %s", opts[i]);
}

static void expect_usage(const char *needle, const char *a1, const char *a2)
{
    sgp_run(&o, "train", a1, a2, NULL);
    cr_assert_eq(o.status, 2, "%s %s: status %d, stderr %s", a1, a2 ? a2 : "", o.status, o.err);
    cr_assert_eq(sgp_lines(o.err), 1, "%s", o.err);
    cr_assert(strstr(o.err, needle), "expected '%s' in: %s", needle, o.err);
    cr_assert_eq(o.out[0], 0, "nothing is trained on a usage error: %s", o.out);
}

Test(peer_cli, bad_options_and_values)
{
    expect_usage("--bogus", "--bogus", NULL);
    expect_usage("--epochs", "--epochs", "ten");
    expect_usage("--epochs", "--epochs", "0");
    expect_usage("--batch", "--batch", "-4");
    expect_usage("--lr", "--lr", "0.1x");
    expect_usage("--lr-decay", "--lr-decay", "linear");
    expect_usage("at position 1 ('resnet'): expected a layer", "--model", "resnet");
    expect_usage("hidden widths", "--model", "mlp:12,x");
    expect_usage("--optimizer expects sgd or adamw, got 'adam'", "--optimizer", "adam");
    expect_usage("--adam-betas expects B1,B2", "--adam-betas", "0.9");
    expect_usage("needs a value", "--epochs", NULL);
    expect_usage("unexpected argument", "extra", NULL);
}

Test(peer_cli, missing_data_names_the_file)
{
    sgp_run(&o, "train", "--data", "/nonexistent/mnist", NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "/nonexistent/mnist/train-images-idx3-ubyte"), "%s", o.err);
    sgp_run(&o, "train", "--data", "cifar10:/nonexistent", NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "/nonexistent/data_batch_1.bin"), "%s", o.err);
}

Test(peer_cli, a_diverging_train_stops_at_the_first_bad_loss_and_says_what_to_try)
{
    sgp_run(&o, "train", "--lr", "1000", "--epochs", "3", NULL);
    cr_assert_eq(o.status, 1, "%s", o.err);
    cr_assert(strstr(o.err, "the model diverged at epoch 1, step "), "%s", o.err);
    cr_assert(strstr(o.err, "try a lower --lr or --clip"), "%s", o.err);
    cr_assert_null(strstr(o.out, "epoch   1/3"), "no epoch of NaN is reported as trained: %s", o.out);
}

/* Peers that diverge (an lr of 1000, float32 messages, which carry a NaN as
 * any other value) stop at the first round whose model is not finite, each
 * saying which round and what it took in, and the launch fails with their
 * words: no NaN model is reported as a result (before, all of them ran to
 * the end and the launch said 10.00% with exit 0). */
Test(peer_cli, a_diverging_launch_stops_every_peer_and_reports_no_model, .timeout = 300)
{
    char dir[] = "/tmp/sgp-launch-nan-XXXXXX", run[96], path[160];
    cr_assert(mkdtemp(dir));
    snprintf(run, sizeof run, "%s/run", dir);
    sgp_run(&o, "launch", "--peers", "2", "--model", "mlp:32", "--epochs", "1", "--lr", "1000", "--codec", "none",
            "--run-dir", run, NULL);
    cr_assert_neq(o.status, 0, "%s", o.out);
    cr_assert(strstr(o.err, "failed: sgp peer: peer "), "%s", o.err);
    cr_assert(strstr(o.err, "the model is no longer finite at round "), "%s", o.err);
    cr_assert(strstr(o.err, "try a lower --lr or --clip"), "%s", o.err);
    cr_assert_null(strstr(o.out, "test accuracy"), "no accuracy of a NaN model: %s", o.out);
    struct stat st;
    snprintf(path, sizeof path, "%s/model.safetensors", run);
    cr_assert_neq(stat(path, &st), 0, "no average model is written");
    int stopped = 0;
    for (int i = 0; i < 2; i++) {
        /* (one may see the other stop first and go on alone: each
         * diverges on its own, but which round shows it is timing) */
        char log[160];
        snprintf(log, sizeof log, "%s/peer%d.jsonl", run, i);
        cr_assert_not(sgp_file_has(log, "\"loss\": null"), "%s: a round of NaN was logged", log);
        if (!sgp_file_has(log, "the model is no longer finite: stopping"))
            continue;
        stopped++;
        snprintf(path, sizeof path, "%s/peer%d.model", run, i);
        cr_assert_neq(stat(path, &st), 0, "%s: no final model of a peer that diverged", path);
    }
    cr_assert_geq(stopped, 1);
    sgp_rm_rf(dir);
}

Test(peer_cli, fashion_missing_is_one_line_saying_make_data)
{
    cr_assert_eq(setenv("SGP_DATA_DIR", "/nonexistent", 1), 0); /* this test's own process */
    sgp_run(&o, "train", "--data", "fashion", NULL);
    cr_assert_eq(o.status, 1);
    cr_assert_eq(sgp_lines(o.err), 1, "%s", o.err);
    cr_assert(strstr(o.err, "/nonexistent/fashion") && strstr(o.err, "make data"), "%s", o.err);
}

/* build/sgp finds build/data/fashion beside itself when started elsewhere. */
Test(peer_cli, fashion_is_found_beside_the_executable_from_any_directory)
{
    char bin[4096], dir[4096];
    cr_assert_not_null(realpath(sgp_bin(), bin), "%s", sgp_bin());
    snprintf(dir, sizeof dir, "%.*s/data/fashion", (int)(strrchr(bin, '/') - bin), bin);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        cr_skip_test("no %s: `make data` writes build/data/fashion, beside build/sgp only (not a sanitizer "
                     "build's binary)", dir);
    cr_assert_eq(setenv("SGP_BIN", bin, 1), 0);
    cr_assert_eq(unsetenv("SGP_DATA_DIR"), 0);
    cr_assert_eq(chdir("/"), 0);
    sgp_run(&o, "train", "--data", "fashion", "--model", "mlp", "--epochs", "1", "--no-progress", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert(strstr(o.out, "60000 train / 10000 test"), "%s", o.out);
}

Test(peer_cli, train_writes_summary_and_learns)
{
    char dir[] = "/tmp/sgp-cli-XXXXXX", path[64];
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/run.json", dir);
    sgp_run(&o, "train", "--model", "mlp:32", "--epochs", "2", "--summary", path, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert(strstr(o.out, "epoch   2/2"), "per-epoch progress expected: %s", o.out);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    static char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    unlink(path);
    rmdir(dir);
    const char *keys[] = {"test_accuracy", "test_loss", "epochs", "samples_per_second", "wall_seconds", "parameters"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        cr_assert(!__builtin_isnan(sgp_json_number(text, keys[i])), "summary lacks %s: %s", keys[i], text);
    cr_assert_eq(sgp_json_number(text, "parameters"), 784 * 32 + 32 + 32 * 10 + 10);
    cr_assert_eq(sgp_json_number(text, "epochs"), 2);
    cr_assert_gt(sgp_json_number(text, "test_accuracy"), 0.85, "2 epochs of mlp:32 on MNIST learn: %s", text);
    cr_assert_gt(sgp_json_number(text, "samples_per_second"), 0);
}

Test(peer_cli, csv_data_trains_end_to_end)
{
    /* Two well separated classes in 3 features: any working pipeline gets them all. */
    char dir[] = "/tmp/sgp-csv-XXXXXX", tr[64], te[64], spec[160];
    cr_assert(mkdtemp(dir));
    snprintf(tr, sizeof tr, "%s/train.csv", dir);
    snprintf(te, sizeof te, "%s/test.csv", dir);
    FILE *a = fopen(tr, "w"), *b = fopen(te, "w");
    cr_assert(a && b);
    fprintf(a, "label,f1,f2,f3\n");
    for (int i = 0; i < 200; i++) {
        int y = i % 2;
        fprintf(i < 160 ? a : b, "%d,%g,%g,%g\n", y, y ? 1.0 + 0.01 * (i % 7) : -1.0 - 0.01 * (i % 5), 0.5,
                y ? -0.3 : 0.3);
    }
    fclose(a), fclose(b);
    snprintf(spec, sizeof spec, "csv:%s,%s", tr, te);
    sgp_run(&o, "train", "--data", spec, "--model", "mlp:8", "--epochs", "5", "--batch", "16", NULL);
    unlink(tr), unlink(te), rmdir(dir);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert(strstr(o.out, "test accuracy 100.00%"), "%s", o.out);
}

/* The accuracies the README promises for the default settings and seed. */
static char last_summary[8192]; /* the text of the last summary read */

static double last_number(const char *key) { return sgp_json_number(last_summary, key); }

static double summary_number(const char *path, const char *key)
{
    cr_assert(sgp_read_text(path, last_summary, sizeof last_summary));
    return sgp_json_number(last_summary, key);
}

/* Runs "sgp CMD ARGS... --summary FILE" and returns the summary's KEY. */
#define RUN_SUMMARY(key, ...)                                                                                     \
    ({                                                                                                            \
        char dir_[] = "/tmp/sgp-acc-XXXXXX", path_[64];                                                           \
        cr_assert(mkdtemp(dir_));                                                                                 \
        snprintf(path_, sizeof path_, "%s/run.json", dir_);                                                       \
        sgp_run(&o, __VA_ARGS__, "--summary", path_, NULL);                                                       \
        cr_assert_eq(o.status, 0, "%s", o.err);                                                                   \
        double v_ = summary_number(path_, key);                                                                   \
        unlink(path_);                                                                                            \
        rmdir(dir_);                                                                                              \
        v_;                                                                                                       \
    })

static double train_accuracy_of(const char *model)
{
    return RUN_SUMMARY("test_accuracy", "train", "--model", model, "--epochs", "10");
}

Test(peer_cli, mlp_reaches_95_percent_in_10_epochs)
{
    double acc = train_accuracy_of("mlp:256");
    cr_assert_geq(acc, 0.95, "mlp:256, 10 epochs: test accuracy %.4f", acc);
}

/* AdamW at its defaults (lr 1e-3, decoupled decay 0.01): 94.45% measured. */
Test(peer_cli, adamw_mlp_reaches_94_percent_in_10_epochs)
{
    double acc = RUN_SUMMARY("test_accuracy", "train", "--model", "mlp:256", "--epochs", "10", "--optimizer", "adamw");
    cr_assert_geq(acc, 0.94, "mlp:256 with AdamW, 10 epochs: test accuracy %.4f", acc);
}

Test(peer_cli, lenet_reaches_97_percent_in_10_epochs, .timeout = 300)
{
    double acc = train_accuracy_of("lenet");
    cr_assert_geq(acc, 0.97, "lenet, 10 epochs: test accuracy %.4f", acc);
}

/* --recipe lm is one switch: the all-gather with SparseLoCo's message and
 * its topology, and what is given beside it wins. */
Test(peer_cli, the_lm_recipe_is_one_switch_and_what_is_given_beside_it_wins)
{
    double gather = RUN_SUMMARY("gather", "sim", "--peers", "4", "--recipe", "lm", "--model", "mlp:16", "--epochs", "1");
    cr_assert_float_eq(gather, 0.95, 1e-6);
    cr_assert_eq(last_number("local_steps_per_round"), 10);
    cr_assert(strstr(last_summary, "\"codec\": \"sparseloco:32\"") && strstr(last_summary, "\"topology\": \"complete\""),
              "%s", last_summary);
    cr_assert_eq(last_number("consensus_distance"), 0, "every model the same bits");
    gather = RUN_SUMMARY("gather", "sim", "--peers", "4", "--recipe", "lm", "--codec", "sparseloco:16", "--local-steps",
                         "2", "--gather", "0.5", "--model", "mlp:16", "--epochs", "1");
    cr_assert_float_eq(gather, 0.5, 1e-6);
    cr_assert_eq(last_number("local_steps_per_round"), 2);
    cr_assert(strstr(last_summary, "\"codec\": \"sparseloco:16\""), "%s", last_summary);
    sgp_run(&o, "sim", "--peers", "4", "--recipe", "lm", "--topology", "ring", "--model", "mlp:16", "--epochs", "1", NULL);
    cr_assert_neq(o.status, 0);
    cr_assert(strstr(o.err, "--gather needs a complete topology"), "%s", o.err);
}

/* SGP over 8 simulated peers on the exponential graph, same total batch and
 * epochs as `sgp train`: the average model within 0.5 points of the single
 * run, every peer's own model within 1.0. */
Test(peer_cli, sim_exp8_matches_single_training, .timeout = 600)
{
    double single = train_accuracy_of("mlp:256");
    double avg = RUN_SUMMARY("test_accuracy", "sim", "--peers", "8", "--topology", "exponential", "--model", "mlp:256",
                             "--epochs", "10");
    double worst = last_number("test_accuracy_min");
    cr_assert_gt(last_number("cpu_step_seconds"), 0, "the simulator times the local steps");
    cr_assert_gt(last_number("cpu_gossip_seconds"), 0, "and gossip");
    cr_assert_leq(last_number("cpu_step_seconds") + last_number("cpu_gossip_seconds"), last_number("wall_seconds"));
    /* Not worse than single training by more than half a point; better by
     * up to a point is the test set's noise (2,000 images: one standard
     * error of an accuracy near 95.5% is 0.46 points). With references
     * starting at the common model the run gives 95.95% against 95.40%. */
    cr_assert_geq(avg, single - 0.005 - 1e-6, "average model %.4f vs sgp train %.4f", avg, single);
    cr_assert_leq(avg, single + 0.010 + 1e-6, "average model %.4f vs sgp train %.4f", avg, single);
    cr_assert_leq(fabs(worst - single), 0.010 + 1e-6, "worst peer %.4f vs sgp train %.4f", worst, single);
}

Test(peer_cli, sim_help_and_bad_options)
{
    sgp_run(&o, "sim", "--help", NULL);
    cr_assert_eq(o.status, 0);
    const char *opts[] = {"--peers", "--topology", "--shard", "--tau", "--loss", "--slow", "--crash", "--rejoin",
                          "--averaging-only", "--log", "--summary", "--model"};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
        cr_assert(strstr(o.out, opts[i]), "sim --help does not mention %s", opts[i]);
    const char *bad[][3] = {
        {"--peers", "0", "--peers"},        {"--shard", "dirichlet:x", "dirichlet"},
        {"--slow", "99:2", "peer 99"},      {"--crash", "1@x", "--crash"},
        {"--rejoin", "2@10", "no --crash"}, {"--topology", "nosuch", "nosuch"},
        {"--loss", "1.5", "--loss"},        {"--codec", "zstd", "unknown codec"},
        {"--codec", "topk:2", "topk"},      {"--step", "0", "--step"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sgp_run(&o, "sim", bad[i][0], bad[i][1], NULL);
        cr_assert_eq(o.status, 2, "%s %s: status %d (%s)", bad[i][0], bad[i][1], o.status, o.err);
        cr_assert_eq(sgp_lines(o.err), 1, "%s", o.err);
        cr_assert(strstr(o.err, bad[i][2]), "expected '%s' in: %s", bad[i][2], o.err);
    }
    sgp_run(&o, "sim", "--peers", "4", "--topology", "topologies/exp8.topo", NULL);
    cr_assert_eq(o.status, 2, "a topology for 8 peers with --peers 4: %s", o.err);
}

Test(peer_cli, sim_log_has_a_row_per_round)
{
    char dir[] = "/tmp/sgp-log-XXXXXX", path[64];
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/rounds.csv", dir);
    sgp_run(&o, "sim", "--peers", "4", "--model", "mlp", "--epochs", "1", "--log", path, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    char line[256];
    int rows = 0;
    cr_assert(fgets(line, sizeof line, f) && strstr(line, "round,sim_seconds"), "header: %s", line);
    long last = 0;
    while (fgets(line, sizeof line, f))
        rows++, last = strtol(line, NULL, 10);
    fclose(f);
    unlink(path);
    rmdir(dir);
    cr_assert_eq(rows, 125, "8,000 samples / batch 64 = 125 rounds, got %d rows", rows);
    cr_assert_eq(last, 125);
}

/* The localhost harness end to end: 8 real peer processes, keys, cluster
 * file, combined summary with the simulator's fields. */
Test(peer_cli, launch_eight_peers_trains_and_summarises, .timeout = 300)
{
    char dir[] = "/tmp/sgp-launch-XXXXXX", run[64], path[128];
    cr_assert(mkdtemp(dir));
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(path, sizeof path, "%s/summary.json", dir);
    sgp_run(&o, "launch", "--peers", "8", "--topology", "topologies/exp8.topo", "--model", "mlp:32", "--epochs", "3",
            "--run-dir", run, "--summary", path, NULL);
    cr_assert_eq(o.status, 0, "%s\n%s", o.out, o.err);
    double acc = summary_number(path, "test_accuracy");
    cr_assert_gt(acc, 0.85, "8 peers learned: %.3f", acc);
    cr_assert_gt(last_number("test_accuracy_min"), 0.85);
    cr_assert_eq(last_number("peers"), 8);
    cr_assert_gt(last_number("bytes_sent"), 0);
    const char *keys[] = {"test_accuracy_mean", "consensus_distance", "rounds", "wall_seconds"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        cr_assert(!__builtin_isnan(last_number(keys[i])), "summary lacks %s", keys[i]);
    /* where a peer's time went: every part measured, together no more than
     * the run's wall time (the step runs beside the loop: a little overlap) */
    const char *parts[] = {"step_seconds", "gossip_seconds", "frame_seconds", "wait_seconds", "idle_seconds"};
    double sum = 0;
    for (size_t i = 0; i < 5; i++) {
        const double v = last_number(parts[i]);
        cr_assert(v >= 0, "%s = %g", parts[i], v);
        sum += v;
    }
    cr_assert_gt(last_number("step_seconds"), 0);
    cr_assert_gt(last_number("gossip_seconds"), 0);
    cr_assert_gt(last_number("frame_seconds"), 0);
    cr_assert_leq(sum, 1.1 * last_number("wall_seconds"), "parts %g s, wall %g s", sum, last_number("wall_seconds"));
    cr_assert_geq(last_number("frame_pool_seconds"), 0, "(the thread pool's, beside the parts)");
    cr_assert(strstr(o.out, "time per peer: local step "), "%s", o.out);
    /* the same parts, cumulative, in each round line of a peer's log */
    snprintf(path, sizeof path, "%s/peer5.jsonl", run);
    FILE *lf = fopen(path, "r");
    cr_assert(lf, "%s", path);
    char line[1024];
    double last_step = 0, last_gossip = 0;
    int rounds = 0;
    while (fgets(line, sizeof line, lf)) {
        if (strncmp(line, "{\"round\":", 9))
            continue;
        const double st = sgp_json_number(line, "step_s"), go = sgp_json_number(line, "gossip_s");
        cr_assert(st >= last_step && go >= last_gossip, "round line with shrinking totals: %s", line);
        cr_assert(sgp_json_number(line, "frame_s") >= 0 && sgp_json_number(line, "wait_s") >= 0, "%s", line);
        last_step = st, last_gossip = go, rounds++;
    }
    fclose(lf);
    cr_assert_gt(rounds, 0);
    cr_assert_gt(last_step, 0);
    /* a peer's secret key file is private */
    snprintf(path, sizeof path, "%s/3.key", run);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 077, 0, "key mode %o", st.st_mode & 0777);
    sgp_rm_rf(dir);
}

/* Operator errors: every peer fails before training. The launcher shows the
 * first peer's own message and keeps nothing (it made the run directory);
 * a peer given a bad model writes no log file. */
Test(peer_cli, launch_with_a_bad_option_says_why_and_keeps_nothing, .timeout = 300)
{
    char dir[] = "/tmp/sgp-launch-bad-XXXXXX", run[96];
    cr_assert(mkdtemp(dir));
    snprintf(run, sizeof run, "%s/run", dir);
    const char *bad[][2] = {{"--model", "mlp:0"}, {"--data", "/no/such/dir"}};
    const char *said[] = {"failed: sgp peer: model 'mlp:0': hidden widths must be positive",
                          "/no/such/dir/train-images-idx3-ubyte"};
    for (int k = 0; k < 2; k++) {
        sgp_run(&o, "launch", "--peers", "2", bad[k][0], bad[k][1], "--run-dir", run, NULL);
        cr_assert_neq(o.status, 0);
        cr_assert(strstr(o.err, said[k]), "the peer's own words: %s", o.err);
        cr_assert(strstr(o.err, "nothing was kept"), "%s", o.err);
        struct stat st;
        cr_assert_neq(stat(run, &st), 0, "%s is still there", run);
    }
    char log[128];
    snprintf(log, sizeof log, "%s/p.jsonl", dir);
    sgp_run(&o, "launch", "--peers", "2", "--prepare", "--run-dir", run, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    char cluster[128];
    snprintf(cluster, sizeof cluster, "%s/cluster.conf", run);
    sgp_run(&o, "peer", "--cluster", cluster, "--id", "0", "--model", "mlp:0", "--log", log, NULL);
    cr_assert_eq(o.status, 2, "%s", o.err);
    struct stat st;
    cr_assert_neq(stat(log, &st), 0, "no log file is left by a usage error");
    sgp_rm_rf(dir);
}

/* A topology of another size than the cluster: both files and both counts named. */
Test(peer_cli, peer_names_the_files_and_counts_that_disagree)
{
    char dir[] = "/tmp/sgp-mismatch-XXXXXX", cluster[96], topo[96];
    cr_assert(mkdtemp(dir));
    sgp_run(&o, "launch", "--peers", "4", "--prepare", "--run-dir", dir, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    snprintf(cluster, sizeof cluster, "%s/cluster.conf", dir);
    snprintf(topo, sizeof topo, "%s/topology.topo", dir);
    sgp_write_text(topo, "peers 8\ngenerator exponential\n");
    sgp_run(&o, "peer", "--cluster", cluster, "--id", "0", NULL);
    cr_assert_eq(o.status, 1, "%s", o.err);
    cr_assert(strstr(o.err, "topology.topo is for 8 peers") && strstr(o.err, "cluster.conf lists 4"), "%s", o.err);
    sgp_rm_rf(dir);
}
