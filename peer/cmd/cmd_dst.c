/* sgp dst: deterministic simulation testing (peer/sim/sim_dst.h). Runs
 * random fault schedules in the simulator with its invariants checked after
 * every event, shrinks the first one that fails and prints the `sgp sim`
 * command line that replays it. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/nn_blas.h"
#include "peer/cmd/cli.h"
#include "peer/cmd/commands.h"
#include "peer/core/clock.h"
#include "peer/sim/sim_dst.h"
#include "peer/store/progress.h"

#define CMD "sgp dst"

static void help(void)
{
    printf("usage: sgp dst [--schedules N] [--seed S] [--verbose]\n"
           "\n"
           "Deterministic simulation testing: N random fault schedules, schedule k drawn from seed\n"
           "S + k (peers, topology, codec, staleness, local steps, outer optimizer, overlapped\n"
           "rounds, message loss, duplicates and reordering, crashes for good, crashes and\n"
           "rejoins with and without a checkpoint, replacements, stops, leaves, hosts admitted to\n"
           "slots vacant from the start, partitions of a block or of each of its peers alone, some\n"
           "long, slow peers), each run in the simulator with its invariants checked after every\n"
           "event: the push-sum weight moves only at a crash, a comeback or an admission (exactly\n"
           "+1), weights stay positive, models finite, the run progresses and finishes; and at\n"
           "the end the average model's accuracy is within 3 points, plus half the share of local\n"
           "steps not taken, plus half the share of the run under a partition, of the same run\n"
           "without faults. The first failing schedule is shrunk\n"
           "(faults dropped while it still fails) and printed as the sgp sim command line that\n"
           "replays it; the exit status is then 1. See peer/sim/README.md.\n"
           "\n"
           "  --schedules N   how many [200]\n"
           "  --seed S        the first schedule's seed [1]\n"
           "  --verbose       one line per schedule\n"
           "  --help          this text\n");
}

int cmd_dst(int argc, char **argv)
{
    enum { D_N = 3000, D_SEED, D_VERBOSE };
    static const struct option long_opts[] = {
        {"schedules", required_argument, 0, D_N},
        {"seed", required_argument, 0, D_SEED},
        {"verbose", no_argument, 0, D_VERBOSE},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    long n = 200;
    uint64_t seed = 1;
    int verbose = 0, ch, rc;
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
        switch (ch) {
        case 'h':
            help();
            return 0;
        case D_N:
            rc = cli_long(CMD, "--schedules", optarg, 1, 100000000, &n);
            break;
        case D_SEED:
            rc = cli_u64(CMD, "--seed", optarg, &seed);
            break;
        case D_VERBOSE:
            verbose = 1, rc = 0;
            break;
        default:
            return cli_getopt_error(CMD, ch, argv);
        }
        if (rc)
            return rc;
    }
    if (optind < argc)
        return cli_usage(CMD, "unexpected argument '%s'", argv[optind]);
    nn_blas_set_threads(1);
    char err[256];
    dst_world w;
    if (dst_world_init(&w, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        return 1;
    }
    progress bar;
    progress_init(&bar, stdout, !verbose && isatty(1));
    const double t0 = clock_now();
    long passed = 0, faults = 0;
    double slowest = 0, worst = 1e9;
    uint64_t slowest_seed = 0, worst_seed = 0;
    int status = 0;
    for (long k = 0; k < n; k++) {
        dst_schedule s;
        dst_draw(&s, seed + (uint64_t)k);
        dst_outcome o;
        rc = dst_run(&w, &s, &o);
        if (rc < 0) {
            fprintf(stderr, "%s: schedule %llu: %s\n", CMD, (unsigned long long)s.seed, strerror(-rc));
            status = 1;
            break;
        }
        faults += s.n_faults;
        if (verbose) {
            char cmd[2048];
            dst_command(&s, cmd, sizeof cmd);
            printf("seed %llu: %s accuracy %.2f%% (%.2f%% without faults), %.3f simulated s, %.2f wall s: %s\n",
                   (unsigned long long)s.seed, o.failed ? "FAILED" : "ok", 100 * o.accuracy, 100 * o.baseline,
                   o.simulated_seconds, o.wall_seconds, cmd);
        }
        if (rc == DST_FAILED) {
            progress_clear(&bar);
            printf("schedule %llu failed: %s\nshrinking...\n", (unsigned long long)s.seed, o.why);
            fflush(stdout);
            dst_shrink(&w, &s, &o);
            char cmd[2048];
            dst_command(&s, cmd, sizeof cmd);
            printf("minimal failing schedule (%d faults): %s\nreplay: %s\n", s.n_faults, o.why, cmd);
            status = 1;
            break;
        }
        passed++;
        if (o.wall_seconds > slowest)
            slowest = o.wall_seconds, slowest_seed = s.seed;
        if (o.accuracy - o.baseline < worst)
            worst = o.accuracy - o.baseline, worst_seed = s.seed;
        char text[96];
        snprintf(text, sizeof text, "schedule %ld/%ld  %ld passed", k + 1, n, passed);
        progress_update(&bar, k + 1, n, text);
    }
    progress_clear(&bar);
    printf("%ld of %ld schedules passed (seeds %llu..%llu, %ld faults), %.1f s; slowest: seed %llu (%.2f s); worst "
           "accuracy against the run without faults: seed %llu (%+.2f points)\n",
           passed, n, (unsigned long long)seed, (unsigned long long)(seed + (uint64_t)n - 1), faults,
           clock_now() - t0, (unsigned long long)slowest_seed, slowest, (unsigned long long)worst_seed, 100 * worst);
    dst_world_free(&w);
    return status;
}
