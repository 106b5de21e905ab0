/* Socket addresses of cluster members, for the transport (net.h): where a
 * member listens, and whether an inbound connection comes from a member's
 * host, which is how net_admit.c gives handshakes their room by address.
 *
 *   struct sockaddr_storage sa;
 *   if (net_addr_of(&c->peers[id], &sa) == 0)
 *       uv_tcp_connect(&req, &tcp, (struct sockaddr *)&sa, on_connect);
 *   int member = net_addr_is_member(c, my_id, &from);
 */
#ifndef PEER_NET_NET_ADDR_H
#define PEER_NET_NET_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

#include "peer/config/cluster.h"

/* The member's address and port; 0, or -EAFNOSUPPORT (a host name) or -EINVAL. */
int net_addr_of(const cluster_peer *p, struct sockaddr_storage *sa);

/* 1 when a and b are the same IPv4 or IPv6 address (ports aside). */
int net_addr_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b);

/* 1 when a is the host of a member other than my_id. */
int net_addr_is_member(const cluster *c, int my_id, const struct sockaddr_storage *a);

/* The address as text ("?" if neither IPv4 nor IPv6), for log lines. */
void net_addr_name(const struct sockaddr_storage *a, char *out, size_t cap);

#endif
