/* The run directory of `sgp launch`: the topology, a fresh key pair per peer
 * and the cluster file that lists them, with free 127.0.0.1 ports outside
 * the kernel's ephemeral range (launch_ports.h) for the peers that run on
 * this machine.
 *
 *   rc = launch_prepare("run", 8, 8, "exponential", where, err, sizeof err);
 *   // run/topology.topo, run/cluster.conf, run/I.key (0600), run/I.pub
 *   rc = launch_prepare("run", 10, 8, "exponential", where, err, sizeof err);
 *   // the same, slots 8 and 9 vacant: run/admit.key, run/8.cred, run/9.cred
 *   // -EINVAL: the topology is not there or is for another peer count
 */
#ifndef PEER_LAUNCH_LAUNCH_PREPARE_H
#define PEER_LAUNCH_LAUNCH_PREPARE_H

#include <stddef.h>

#include "peer/launch/launch_hosts.h"

/* topology: a .topo file, or a generator name (topologies/topo.h), for n
 * peers: `founders` of them in the cluster file, the rest vacant slots
 * (`slots`, `admit`: peer/config/CLUSTER.md "Joining"), each with a key
 * pair and a credential signed by dir/admit.key (dir/I.key, dir/I.cred).
 * Ports of where[0 .. founders) that are 0 are chosen here and filled in. 0, -EINVAL (topology),
 * or another negative errno; err says which. */
int launch_prepare(const char *dir, int n, int founders, const char *topology, launch_host *where, char *err,
                   size_t errlen);

#endif
