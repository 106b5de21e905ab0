/* A localhost cluster for tests that run real `sgp peer` processes: free
 * ports, keys from `sgp keygen`, and the cluster file (peer/config/CLUSTER.md).
 * Header-only, like sgp_run.h, which it uses. */
#ifndef TESTS_SGP_CLUSTER_H
#define TESTS_SGP_CLUSTER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "tests/sgp_run.h"

/* The first port of the kernel's ephemeral range (outgoing connections, and
 * mpirun's own, take ports from it at any time). */
static inline int sgp_ephemeral_low(void)
{
    int lo = 32768, hi;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            lo = 32768;
        fclose(f);
    }
    return lo;
}

/* A port free now (the peers bind it a moment later), below the ephemeral
 * range so that no outgoing connection takes it meanwhile, spread by pid so
 * that tests running side by side do not pick the same one. */
static inline int sgp_free_port(void)
{
    static unsigned next;
    if (!next)
        next = (unsigned)getpid() * 2654435761u;
    const int lo = 10000, hi = sgp_ephemeral_low();
    for (int tries = 0; tries < 4096 && hi > lo + 1; tries++) {
        const int port = lo + (int)((next++ * 2654435761u) % (unsigned)(hi - lo));
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        cr_assert(fd >= 0);
        const int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
        close(fd);
        if (ok)
            return port;
    }
    cr_assert_fail("no free port below %d", hi);
    return -1;
}

/* Keys of peer ID in DIR (`sgp keygen`: DIR/ID.key, DIR/ID.pub); the public
 * key, base64, into PUB. */
static inline void sgp_keygen(const char *dir, int id, char *pub, size_t cap)
{
    char path[256], idtxt[16];
    snprintf(idtxt, sizeof idtxt, "%d", id);
    sgp_out o;
    sgp_run(&o, "keygen", "--out", dir, "--id", idtxt, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    snprintf(path, sizeof path, "%s/%d.pub", dir, id);
    FILE *p = fopen(path, "r");
    cr_assert(p && fgets(pub, (int)cap, p), "%s", path);
    fclose(p);
    pub[strcspn(pub, "\n")] = 0;
}

/* Keys and dir/cluster.conf for n peers on 127.0.0.1, cluster `name`. */
static inline void sgp_make_cluster(const char *dir, const char *name, int n, const char *topology)
{
    char path[256], pub[128];
    snprintf(path, sizeof path, "%s/cluster.conf", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "cluster %s\ntopology %s\n", name, topology);
    for (int i = 0; i < n; i++) {
        sgp_keygen(dir, i, pub, sizeof pub);
        fprintf(f, "peer %d 127.0.0.1:%d %s\n", i, sgp_free_port(), pub);
    }
    fclose(f);
}

#endif
