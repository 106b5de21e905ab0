/* Ports for peers that listen on 127.0.0.1 of this machine, chosen outside
 * the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range):
 * the kernel gives ports of that range to outgoing connections (any
 * program's, at any time), so a port chosen there can be taken by one
 * between the choice and the peer's bind, or while a peer restarts.
 *
 *   int ports[8] = {0};
 *   rc = launch_ports_free(ports, 8);   // every 0 replaced by a free port
 *
 * Each port is drawn at random from 10000 up to the range's first port and
 * from above its last up to 65535 (from 1025 when the range starts at 10000
 * or lower), and is free when drawn: bound here, with every socket kept
 * bound until all are chosen, so no two are the same. Ports under 10000 are
 * left to the services that are registered there (databases, web servers):
 * free now, one could be wanted by a service that starts later. When no
 * port outside the range is free (or the range covers every port above
 * 1024), the kernel chooses one, from its range. */
#ifndef PEER_LAUNCH_LAUNCH_PORTS_H
#define PEER_LAUNCH_LAUNCH_PORTS_H

/* Every ports[i] that is 0 becomes a port free on 127.0.0.1 now; the others
 * are left as they are. 0, or -errno (-ENOMEM, -EMFILE, ...). */
int launch_ports_free(int *ports, int n);

#endif
