/* libFuzzer target for the .topo parser: any bytes must give 0 or a negative
 * errno with a message, never a crash, a leak or an unbounded allocation.
 * What parses must also survive the rest of the API: validation, routing
 * with peers dead, in-lists, and a write-then-parse round trip that gives the
 * same edges (the zstd habit: fuzz targets that round-trip).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address -I. tests/fuzz/fuzz_topo_parse.c topologies/topo*.c -lm -o fz
 *   ./fz tests/fuzz/corpus/topo_parse
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* open_memstream under -std=c17 */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topologies/topo.h"
#include "tests/fuzz/fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    topo t;
    parse_error e;
    int rc = topo_parse(&t, (const char *)data, size, "fuzz", &e);
    if (rc < 0) {
        check(e.msg[0] != 0);
        check(memchr(e.msg, 0, sizeof e.msg) != NULL);
        check(t.edges == NULL && t.n_peers == 0);
        return 0;
    }
    check(topo_validate(&t, &e) == 0);

    /* Routing with every third peer dead, for one period, on a bounded
     * number of peers so large inputs stay fast. */
    const int n = t.n_peers, lim = n < 256 ? n : 256;
    uint8_t *alive = malloc((size_t)n);
    int *in = malloc((size_t)n * sizeof *in);
    check(alive && in);
    for (int i = 0; i < n; i++)
        alive[i] = i % 3 != 1;
    for (long r = 0; r < t.n_phases && r < 8; r++)
        for (int i = 0; i < lim; i++) {
            topo_out o;
            topo_route(&t, r, i, alive, &o);
            double sum = o.keep;
            for (int k = 0; k < o.n; k++) {
                check(alive[o.peer[k]] && o.peer[k] != i);
                sum += o.weight[k];
            }
            check(sum > 1 - 1e-9 && sum < 1 + 1e-9);
            check(topo_in(&t, r, i, alive, in, n) <= t.max_in);
        }
    free(alive);
    free(in);

    /* Round trip, only for small schedules: writing 4M edges per input would
     * drown the fuzzer in formatting. */
    if (t.phase_at[t.n_phases] <= 4096) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        check(f != NULL);
        check(topo_write(&t, f, "fuzz") == 0);
        fclose(f);
        topo u;
        check(topo_parse(&u, buf, len, "fuzz-rt", &e) == 0);
        check(u.n_peers == t.n_peers && u.n_phases == t.n_phases && u.weighted == t.weighted);
        for (int p = 0; p <= t.n_phases; p++)
            check(u.phase_at[p] == t.phase_at[p]);
        for (size_t k = 0; k < t.phase_at[t.n_phases]; k++)
            check(u.edges[k].src == t.edges[k].src && u.edges[k].dst == t.edges[k].dst &&
                  memcmp(&u.edges[k].weight, &t.edges[k].weight, sizeof(double)) == 0);
        topo_free(&u);
        free(buf);
    }
    topo_free(&t);
    return 0;
}
