/* The combined result of a run that `sgp launch` did not start (tests/bench/
 * elastic.sh's peers in network namespaces): RUN/peerI.model and
 * RUN/peerI.json of PEERS peers averaged as sgp launch averages them
 * (peer/launch/launch_combine.h), the ones that left on purpose out of it.
 *
 *   combine RUN_DIR PEERS SUMMARY.json [LEFT_ID ...]
 *
 * Prints launch's combined line and writes the summary (the fields of sgp
 * sim's: test_accuracy of the average model, weight, spread).
 */
#include <stdio.h>
#include <stdlib.h>

#include "peer/launch/launch_combine.h"

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: combine RUN_DIR PEERS SUMMARY.json [LEFT_ID ...]\n");
        return 2;
    }
    const int n = atoi(argv[2]);
    if (n < 1 || n > 65536)
        return fprintf(stderr, "combine: PEERS must be 1 to 65536\n"), 2;
    uint8_t *left = calloc((size_t)n, 1);
    if (!left)
        return 1;
    for (int k = 4; k < argc; k++) {
        const int i = atoi(argv[k]);
        if (i < 0 || i >= n)
            return fprintf(stderr, "combine: no peer %s\n", argv[k]), 2;
        left[i] = 1;
    }
    launch_outcome o = {.run_dir = argv[1], .n = n, .left = left};
    char err[1200];
    const int rc = launch_combine(&o, argv[3], stdout, err, sizeof err);
    if (rc < 0)
        fprintf(stderr, "combine: %s\n", err);
    free(left);
    return rc < 0;
}
