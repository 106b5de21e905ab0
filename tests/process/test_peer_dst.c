/* Deterministic simulation testing (peer/sim/sim_dst.h), what needs a
 * process: the command line a schedule prints replays it in `sgp sim`. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn_blas.h"
#include "peer/sim/sim_dst.h"
#include "tests/sgp_run.h"

TestSuite(peer_sim_dst, .timeout = 600);

/* The printed command line is the schedule: `sgp sim` of it computes the
 * run dst_run did, to the last digit printed. */
Test(peer_sim_dst, the_printed_command_line_replays_the_run)
{
    char err[256];
    /* One BLAS thread, as `sgp dst` and `sgp sim` run: OpenBLAS splits a big
     * product (the evaluation of 2,000 test images) over its threads, and
     * the sums in another order can move a near tie of the average model. */
    nn_blas_set_threads(1);
    dst_world w;
    cr_assert_eq(dst_world_init(&w, err, sizeof err), 0, "%s", err);
    dst_schedule s;
    uint64_t seed = 1;
    for (dst_draw(&s, seed); s.n_faults < 3; dst_draw(&s, ++seed)) /* one with several faults */
        ;
    dst_outcome o;
    cr_assert_eq(dst_run(&w, &s, &o), DST_PASSED, "%s", o.why);
    char cmd[2048];
    dst_command(&s, cmd, sizeof cmd);
    char *sgp = strchr(cmd, ' ') + 1; /* after "sgp" */
    char full[2400];
    snprintf(full, sizeof full, "%s %s", sgp_bin(), sgp);
    FILE *p = popen(full, "r");
    cr_assert(p);
    char line[512], want[64];
    snprintf(want, sizeof want, "test accuracy %.2f%% (average model)", 100 * o.accuracy);
    int found = 0;
    while (fgets(line, sizeof line, p))
        found |= strstr(line, want) != NULL;
    cr_assert_eq(pclose(p), 0, "%s failed", full);
    cr_assert(found, "%s does not print \"%s\"", full, want);
    dst_world_free(&w);
}
