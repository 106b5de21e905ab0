/* The run directory for sgp launch; see launch_prepare.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "peer/launch/launch_prepare.h"
#include "peer/launch/launch_ports.h"
#include "peer/config/cluster.h"
#include "peer/config/credential.h"
#include "peer/config/keyfile.h"
#include "peer/store/wholefile.h"
#include "peer/wire/sec.h"
#include "topologies/topo.h"

/* A free 127.0.0.1 port for every where[i].port that is 0 (launch_ports.h). */
static int free_ports(launch_host *where, int n)
{
    int *ports = malloc((size_t)(n > 0 ? n : 1) * sizeof *ports);
    if (!ports)
        return -ENOMEM;
    for (int i = 0; i < n; i++)
        ports[i] = where[i].port;
    int rc = launch_ports_free(ports, n);
    for (int i = 0; rc == 0 && i < n; i++)
        where[i].port = ports[i];
    free(ports);
    return rc;
}

typedef int (*text_fn)(const void *obj, FILE *f);
static int topo_text(const void *t, FILE *f) { return topo_write(t, f, "written by sgp launch"); }
static int cluster_text(const void *c, FILE *f) { return cluster_write(c, f, "written by sgp launch"); }

/* dir/name, as fn writes obj, atomically. */
static int write_text(const char *dir, const char *name, text_fn fn, const void *obj, char *err, size_t errlen)
{
    char path[1100], *buf = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%.1024s/%s", dir, name);
    FILE *f = open_memstream(&buf, &len);
    int rc = f ? fn(obj, f) : -ENOMEM;
    if (f && fclose(f) != 0 && rc == 0)
        rc = -ENOMEM;
    if (rc == 0)
        rc = wholefile_write(path, buf, len, 0644, 0, err, errlen);
    else
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(-rc));
    free(buf);
    return rc;
}

/* dir/topology.topo, checked against n. */
static int write_topology(const char *dir, int n, const char *topology, char *err, size_t errlen)
{
    topo t = {0};
    parse_error te = {0};
    int rc = access(topology, F_OK) == 0 || strchr(topology, '/') ? topo_load(&t, topology, &te)
                                                                  : topo_generate(&t, topology, n, NULL, &te);
    if (rc < 0) {
        parse_error_text(&te, err, errlen);
        return -EINVAL;
    }
    if (t.n_peers != n) {
        snprintf(err, errlen, "%s is for %d peers, --peers is %d", topology, t.n_peers, n);
        rc = -EINVAL;
    } else
        rc = write_text(dir, "topology.topo", topo_text, &t, err, errlen);
    topo_free(&t);
    return rc;
}

/* The vacant slots founders .. n-1 of c, admitted by a new admission key
 * (dir/admit.key, admit.pub), and for each slot the credential of its key
 * pair (dir/I.cred). */
static int admit_joiners(cluster *c, const char *dir, int founders, int n, const uint8_t (*pks)[SEC_KEY_BYTES],
                         char *err, size_t errlen)
{
    char key[1100], pub[1100];
    admit_key ak = {0};
    snprintf(key, sizeof key, "%.1024s/admit.key", dir);
    snprintf(pub, sizeof pub, "%.1024s/admit.pub", dir);
    int rc = admit_key_generate(&ak);
    if (rc < 0)
        snprintf(err, errlen, "cannot make an admission key: %s", strerror(-rc));
    else
        rc = admit_key_save(&ak, key, pub, 1, err, errlen);
    if (rc == 0 && (rc = cluster_add_slots(c, n, ak.pk)) < 0)
        snprintf(err, errlen, "cannot list %d slots: %s", n, strerror(-rc));
    for (int i = founders; rc == 0 && i < n; i++) {
        credential k = {.id = i};
        snprintf(k.cluster, sizeof k.cluster, "%s", c->name);
        memcpy(k.key, pks[i], SEC_KEY_BYTES);
        snprintf(key, sizeof key, "%.1024s/%d.cred", dir, i);
        if ((rc = credential_sign(&k, &ak)) < 0)
            snprintf(err, errlen, "cannot sign a credential: %s", strerror(-rc));
        else
            rc = credential_save(&k, key, 1, err, errlen);
    }
    admit_key_free(&ak);
    return rc;
}

/* A key pair per slot; the founders listed with their addresses in
 * dir/cluster.conf, the other slots vacant with credentials. */
static int write_cluster(const char *dir, int n, int founders, const launch_host *where, char *err, size_t errlen)
{
    char key[1100], pub[1100];
    cluster c;
    memset(&c, 0, sizeof c);
    uint8_t(*pks)[SEC_KEY_BYTES] = calloc((size_t)n, sizeof *pks);
    int rc = pks ? cluster_init(&c, "sgp-launch", "topology.topo") : -ENOMEM;
    if (rc < 0)
        snprintf(err, errlen, "cannot make a cluster: %s", strerror(-rc));
    for (int i = 0; rc == 0 && i < n; i++) {
        sec_keypair kp = {0};
        snprintf(key, sizeof key, "%.1024s/%d.key", dir, i);
        snprintf(pub, sizeof pub, "%.1024s/%d.pub", dir, i);
        if ((rc = sec_keypair_generate(&kp)) < 0)
            snprintf(err, errlen, "cannot make a key pair: %s", strerror(-rc));
        else if ((rc = keyfile_save(&kp, key, pub, 1, err, errlen)) == 0 && i < founders &&
                 (rc = cluster_add_peer(&c, where[i].addr, (unsigned)where[i].port, kp.pk)) < 0)
            snprintf(err, errlen, "peer %d at %s:%d: %s", i, where[i].addr, where[i].port, strerror(-rc));
        rc = rc < 0 ? rc : 0; /* cluster_add_peer returns the new peer's id */
        if (rc == 0)
            memcpy(pks[i], kp.pk, SEC_KEY_BYTES);
        sec_keypair_free(&kp);
    }
    if (rc == 0 && founders < n)
        rc = admit_joiners(&c, dir, founders, n, (const uint8_t(*)[SEC_KEY_BYTES])pks, err, errlen);
    if (rc == 0)
        rc = write_text(dir, "cluster.conf", cluster_text, &c, err, errlen);
    cluster_free(&c);
    free(pks);
    return rc;
}

int launch_prepare(const char *dir, int n, int founders, const char *topology, launch_host *where, char *err,
                   size_t errlen)
{
    int rc = write_topology(dir, n, topology, err, errlen);
    if (rc == 0 && (rc = free_ports(where, founders)) < 0)
        snprintf(err, errlen, "cannot find %d free ports on 127.0.0.1: %s", founders, strerror(-rc));
    if (rc == 0)
        rc = write_cluster(dir, n, founders, where, err, errlen);
    return rc;
}
