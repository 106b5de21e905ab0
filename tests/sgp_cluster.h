/* A localhost cluster for tests that run real `sgp peer` processes: free
 * ports, keys from `sgp keygen`, and the cluster file (peer/config/CLUSTER.md).
 * Header-only, like sgp_run.h, which it uses. */
#ifndef TESTS_SGP_CLUSTER_H
#define TESTS_SGP_CLUSTER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "tests/sgp_run.h"

/* A port the kernel says is free now (the peers bind it a moment later). */
static inline int sgp_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    return ntohs(a.sin_port);
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
