/* A peer with no trainer: libsgp (peer/lib/sgp.h) gossiping an N-float
 * vector under a synthetic step, so that the transport, the gossip state
 * and the comebacks are measured at sizes whose training would not fit this
 * machine (tests/bench/vector_scale.sh runs 2 of them at 500M parameters).
 *
 *   vector_peer --cluster RUN/cluster.conf --id I --params N --rounds R [OPTIONS]
 *
 * Every peer starts from the same vector (x0[i] = sin(i / 1000) / 100) and
 * adds (id + 1) / 100000 times a factor in [0.5, 1.5) drawn from the
 * position (a hash) to every value each round, a step as cheap as a memory
 * pass: the average of the peers' drifts is what their mixed models move by
 * a round. That is 0.1% to 1% of a typical value a round, about what a
 * round of optimizer steps moves a model (a drift of a fifth of the values
 * a round made every reference lag, so every few rounds went whole in
 * bf16), and it differs by position because a drift the same everywhere
 * ties every difference a top-k codec ranks, which no trained model does. At the end one JSON line on stdout: its rounds, the
 * round it started at, its push-sum weight, the mean of its final vector,
 * bytes sent, its peak RSS and the seconds its sgp_step calls took; its log (--log) ends with the memory by part
 * and the ledger (tests/bench/ledger.c checks the run's mass from them).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "peer/lib/sgp.h"

static const char USAGE[] =
    "usage: vector_peer --cluster FILE --id I --params N --rounds R [OPTIONS]\n"
    "\n"
    "A libsgp peer with no trainer: gossips an N-float vector, adding (id + 1) / 1000\n"
    "to every value each round (tests/bench/vector_scale.sh).\n"
    "\n"
    "  --codec C            as sgp peer --codec [stc:0.04]\n"
    "  --gather DECAY       the exact sparse all-gather (as sgp peer --gather; a sparse codec,\n"
    "                       a complete topology) [off: push-sum]\n"
    "  --log FILE           JSON lines per round, then memory by part and the ledger\n"
    "  --checkpoint FILE    the gossip state's checkpoint\n"
    "  --leave-at ROUND     checkpoint and leave the run (sgp_close) once at ROUND\n"
    "  --resume             continue from the checkpoint, or pull a neighbour's model\n"
    "  --dead-timeout S     as sgp peer [5]\n"
    "  --round-timeout S    as sgp peer [30]\n"
    "  --step-ms MS         each step also sleeps this long: a device's step time [0]\n"
    "  --verbose            events (neighbour lost, connection closed, ...) on stderr\n"
    "  --help               this text\n";

/* Peak resident set of this process in MB (VmHWM), 0 if unknown. */
static double peak_rss_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lf kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb / 1024;
}

int main(int argc, char **argv)
{
    sgp_options o;
    sgp_options_init(&o);
    o.codec = "stc:0.04";
    o.id = -2;
    size_t n = 0;
    long leave_at = -1;
    double step_ms = 0;
    static const struct option opts[] = {
        {"cluster", required_argument, 0, 'c'},   {"id", required_argument, 0, 'i'},
        {"params", required_argument, 0, 'n'},    {"rounds", required_argument, 0, 'r'},
        {"codec", required_argument, 0, 'k'},     {"log", required_argument, 0, 'l'},
        {"checkpoint", required_argument, 0, 'p'}, {"leave-at", required_argument, 0, 'L'},
        {"resume", no_argument, 0, 'R'},          {"dead-timeout", required_argument, 0, 'd'},
        {"round-timeout", required_argument, 0, 't'}, {"verbose", no_argument, 0, 'v'},
        {"step-ms", required_argument, 0, 's'},   {"gather", required_argument, 0, 'g'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    for (int ch; (ch = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (ch) {
        case 'c': o.cluster = optarg; break;
        case 'i': o.id = atoi(optarg); break;
        case 'n': n = (size_t)strtod(optarg, NULL); break;
        case 'r': o.rounds = atol(optarg); break;
        case 'k': o.codec = optarg; break;
        case 'l': o.log = optarg; break;
        case 'p': o.checkpoint = optarg; break;
        case 'L': leave_at = atol(optarg); break;
        case 'R': o.resume = 1; break;
        case 'd': o.dead_timeout = atof(optarg); break;
        case 't': o.round_timeout = atof(optarg); break;
        case 'v': o.verbose = 1; break;
        case 's': step_ms = atof(optarg); break;
        case 'g': o.gather = atof(optarg); break;
        case 'h': fputs(USAGE, stdout); return 0;
        default: fputs(USAGE, stderr); return 2;
        }
    }
    if (!o.cluster || o.id < 0 || !n || o.rounds < 1 || optind != argc) {
        fputs(USAGE, stderr);
        return 2;
    }
    float *x = malloc(n * sizeof *x);
    if (!x)
        return fprintf(stderr, "vector_peer: no memory for %zu values\n", n), 1;
    for (size_t i = 0; i < n; i++)
        x[i] = sinf((float)(i % 1000000) / 1000.0f) / 100.0f;
    char err[512];
    sgp_peer *p;
    if (sgp_open(&p, &o, x, n, err, sizeof err) < 0)
        return fprintf(stderr, "vector_peer %d: %s\n", o.id, err), 1;
    const float drift = (float)(o.id + 1) / 100000.0f;
    sgp_status s;
    int rc;
    double blocked = 0; /* seconds in sgp_step */
    do {
        for (size_t i = 0; i < n; i++)
            x[i] += drift * (0.5f + (float)((uint32_t)i * 2654435761u >> 22) / 1024.0f);
        if (step_ms > 0)
            nanosleep(&(struct timespec){.tv_sec = (time_t)(step_ms / 1e3),
                                         .tv_nsec = (long)(fmod(step_ms, 1e3) * 1e6)}, NULL);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        rc = sgp_step(p, x, n);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        blocked += (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        if (sgp_status_get(p, &s) == 0 && leave_at >= 0 && s.round >= leave_at && rc == 0)
            break;
    } while (rc == 0);
    if (rc < 0)
        fprintf(stderr, "vector_peer %d: %s\n", o.id, sgp_error(p));
    sgp_status_get(p, &s);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += x[i];
    const int closed = sgp_close(p);
    printf("{\"id\": %d, \"rounds\": %ld, \"start_round\": %ld, \"left\": %d, \"weight\": %.17g, \"mean\": %.9g, "
           "\"bytes_sent\": %llu, \"peak_rss_mb\": %.0f, \"step_seconds\": %.3f}\n",
           o.id, s.round, s.start_round, rc == 0, s.weight, sum / (double)n, (unsigned long long)s.bytes_sent,
           peak_rss_mb(), blocked);
    free(x);
    return rc < 0 || closed < 0 ? 1 : 0;
}
