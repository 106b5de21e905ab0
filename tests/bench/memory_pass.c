/* The machine's yardstick for gossip: how long one pass over a model takes
 * at memory speed. The pass is absorb's (gossip/gsp.c): x += m * r over
 * floats, in double, rounded once (two streams read, one written). It runs
 * over a ring of (x, r) pairs bigger than the last-level cache, as 4 peers'
 * vectors are in a 4-peer run, so every pass comes from DRAM; and once more
 * on one pair that stays in cache. tests/bench/gossip_cost.sh prints a
 * peer-round's gossip and local step in these passes.
 *
 *   build/bench/memory_pass --dim 203530 --mbytes 96
 *   pass_ms_memory=0.152 pass_ms_cache=0.041 gbps_memory=16.1 gbps_cache=59.5 dim=203530 mbytes=96 passes=...
 *
 * One line of key=value fields on stdout; messages go to stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/core/clock.h"
#include "tests/bench/bench_args.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: memory_pass [options]\n"
               "Times x += m * r (floats, in double) over DIM values: from DRAM, over a ring of\n"
               "vector pairs bigger than the cache, and from cache, on one pair; prints one line\n"
               "pass_ms_memory=X pass_ms_cache=Y gbps_memory=... (key=value fields).\n"
               "\n"
               "  --dim N       values a vector (default 203530, mlp:256's parameters)\n"
               "  --mbytes M    the ring's size in MB (default 96, beyond a 32 MB L3 and its neighbours)\n"
               "  --passes N    timed passes of each kind; the median counts (default 400)\n"
               "  --help        this text\n");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void pass(float *restrict x, const float *restrict r, size_t n, double m)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((double)x[i] + m * (double)r[i]);
}

/* Median seconds of `passes` passes, pair p = k mod pairs for pass k. */
static double median_pass(float **vec, long pairs, size_t n, long passes, double *t)
{
    for (long k = 0; k < passes; k++) {
        float *x = vec[2 * (k % pairs)], *r = vec[2 * (k % pairs) + 1];
        double t0 = clock_now();
        pass(x, r, n, k & 1 ? -1e-3 : 1e-3); /* alternating signs: the values stay put */
        t[k] = clock_now() - t0;
    }
    qsort(t, (size_t)passes, sizeof *t, cmp_double);
    return t[passes / 2];
}

int main(int argc, char **argv)
{
    long dim = 203530, mbytes = 96, passes = 400;
    for (int i = 1; i < argc; i++) {
        long *dst = !strcmp(argv[i], "--dim") ? &dim : !strcmp(argv[i], "--mbytes") ? &mbytes
                                                   : !strcmp(argv[i], "--passes") ? &passes : NULL;
        if (!strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (!dst || i + 1 == argc || parse_long(argv[i + 1], 1, 1L << 30, dst) < 0) {
            fprintf(stderr, "memory_pass: bad or unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
        i++;
    }
    const size_t n = (size_t)dim, bytes = n * sizeof(float);
    long pairs = (long)(((size_t)mbytes << 20) / (2 * bytes));
    if (pairs < 2)
        pairs = 2;
    float **vec = calloc((size_t)(2 * pairs), sizeof *vec);
    const long slots = passes > pairs + 4 ? passes : pairs + 4; /* the warm-up passes below time into t too */
    double *t = malloc((size_t)slots * sizeof *t);
    if (!vec || !t) {
        fprintf(stderr, "memory_pass: out of memory\n");
        return 1;
    }
    for (long v = 0; v < 2 * pairs; v++) {
        if (!(vec[v] = malloc(bytes))) {
            fprintf(stderr, "memory_pass: out of memory for %ld MB\n", mbytes);
            return 1;
        }
        for (size_t i = 0; i < n; i++)
            vec[v][i] = (float)((i * 2654435761u + (size_t)v) % 1000) * 1e-3f;
    }
    median_pass(vec, pairs, n, pairs, t); /* touch every page once */
    double mem = median_pass(vec, pairs, n, passes, t);
    median_pass(vec, 1, n, 4, t); /* bring the one pair in */
    double cache = median_pass(vec, 1, n, passes, t);
    printf("pass_ms_memory=%.4f pass_ms_cache=%.4f gbps_memory=%.1f gbps_cache=%.1f dim=%zu mbytes=%ld passes=%ld\n",
           mem * 1e3, cache * 1e3, 3.0 * (double)bytes / mem / 1e9, 3.0 * (double)bytes / cache / 1e9, n, mbytes,
           passes);
    for (long v = 0; v < 2 * pairs; v++)
        free(vec[v]);
    free(vec);
    free(t);
    return 0;
}
