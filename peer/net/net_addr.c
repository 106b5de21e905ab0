/* Socket addresses of cluster members (net_addr.h). */
#include "peer/net/net_addr.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

int net_addr_of(const cluster_peer *p, struct sockaddr_storage *sa)
{
    memset(sa, 0, sizeof *sa);
    if (p->family == CLUSTER_IPV4)
        return uv_ip4_addr(p->host, p->port, (struct sockaddr_in *)sa);
    if (p->family == CLUSTER_IPV6)
        return uv_ip6_addr(p->host, p->port, (struct sockaddr_in6 *)sa);
    return -EAFNOSUPPORT;
}

int net_addr_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return 0;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                       sizeof(struct in6_addr));
    return 0;
}

int net_addr_is_member(const cluster *c, int my_id, const struct sockaddr_storage *a)
{
    struct sockaddr_storage m;
    for (int i = 0; i < c->n_peers; i++)
        if (i != my_id && net_addr_of(&c->peers[i], &m) == 0 && net_addr_same_host(&m, a))
            return 1;
    return 0;
}

void net_addr_name(const struct sockaddr_storage *a, char *out, size_t cap)
{
    snprintf(out, cap, "?");
    if (a->ss_family == AF_INET)
        uv_ip4_name((const struct sockaddr_in *)a, out, cap);
    else if (a->ss_family == AF_INET6)
        uv_ip6_name((const struct sockaddr_in6 *)a, out, cap);
}
