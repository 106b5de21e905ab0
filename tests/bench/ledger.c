/* A run's push-sum mass from its peers' logs (RUN/peerI.jsonl: their
 * ledgers, peer/launch/launch_ledger.h), for runs that `sgp launch` did not
 * start (tests/bench/vector_scale.sh's libsgp peers).
 *
 *   ledger RUN_DIR PEERS [JOINS]
 *
 * Prints held, in flight, rescaled and adopted weight and whether
 * held + in flight == PEERS + JOINS + rescaled - adopted (to 1e-6, as
 * gossip/GUARANTEES.md's "Mass at comebacks" says it must be without a
 * kill); exits 1 when it is not.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "peer/launch/launch_ledger.h"

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: ledger RUN_DIR PEERS [JOINS]\n");
        return 2;
    }
    const int peers = atoi(argv[2]), joins = argc > 3 ? atoi(argv[3]) : 0;
    launch_mass m;
    char err[1200];
    if (launch_ledger(argv[1], peers, NULL, &m, err, sizeof err) < 0)
        return fprintf(stderr, "ledger: %s\n", err), 1;
    const double want = peers + joins + m.rescaled - m.adopted, got = m.held + m.in_flight;
    const int exact = fabs(got - want) <= 1e-6;
    printf("held %.9g + in flight %.9g = %.9g; %d peers + %d joins + rescaled %.9g - adopted %.9g = %.9g: %s\n",
           m.held, m.in_flight, got, peers, joins, m.rescaled, m.adopted, want, exact ? "exact" : "NOT EXACT");
    return exact ? 0 : 1;
}
