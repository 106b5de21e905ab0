/* A localhost cluster for tests that run real `sgp peer` processes: free
 * ports, keys from `sgp keygen`, and the cluster file (peer/config/CLUSTER.md).
 * Header-only, like sgp_run.h, which it uses. */
#ifndef TESTS_SGP_CLUSTER_H
#define TESTS_SGP_CLUSTER_H

#include "peer/launch/launch_ports.h"
#include "tests/sgp_run.h"

/* A port free now (the peers bind it a moment later), outside the kernel's
 * ephemeral range, as `sgp launch` chooses them (peer/launch/launch_ports.h),
 * and none this process was given before (each call's socket is closed, so
 * two calls could otherwise draw the same one). */
static inline int sgp_free_port(void)
{
    static int given[1024], n_given;
    for (int tries = 0; tries < 64; tries++) {
        int port = 0, seen = 0;
        cr_assert_eq(launch_ports_free(&port, 1), 0);
        for (int k = 0; k < n_given; k++)
            seen |= given[k] == port;
        if (!seen) {
            if (n_given < (int)(sizeof given / sizeof *given))
                given[n_given++] = port;
            return port;
        }
    }
    cr_assert_fail("no free port that this test was not given before");
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
