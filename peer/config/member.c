/* This process's place in a cluster: see member.h. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/config/member.h"
#include "peer/config/keyfile.h"

enum env_rank { RANK_NONE = 0, RANK_FOUND = 1 };

/* The rank an MPI or Slurm launcher gives: RANK_FOUND and *id, RANK_NONE,
 * or -EINVAL (err says which variable) when it is not a number. */
static int rank_from_env(long *id, char *err, size_t errlen)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (!v || !*v)
            continue;
        char *end;
        errno = 0;
        long r = strtol(v, &end, 10);
        if (errno || *end || r < 0 || r >= TOPO_MAX_PEERS) {
            snprintf(err, errlen, "%s is '%s', not a rank from 0 to %d", vars[i], v, TOPO_MAX_PEERS - 1);
            return -EINVAL;
        }
        *id = r;
        return RANK_FOUND;
    }
    return RANK_NONE;
}

int member_open(member *m, const char *cluster_path, long id, const char *key_path, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    int rc;
    if (id < 0 && (rc = rank_from_env(&id, err, errlen)) != RANK_FOUND) {
        if (rc == RANK_NONE)
            snprintf(err, errlen, "no peer id: give one, or run under mpirun/srun (no rank in the environment)");
        return -ESRCH;
    }
    parse_error ce;
    if ((rc = cluster_load(&m->cluster, cluster_path, &ce)) < 0) {
        parse_error_text(&ce, err, errlen);
        return rc;
    }
    if (id >= m->cluster.n_peers) {
        snprintf(err, errlen, "id %ld is not in %s (%d peers)", id, cluster_path, m->cluster.n_peers);
        rc = -ESRCH;
        goto fail;
    }
    m->id = (int)id;
    char keybuf[PATH_MAX + 32];
    if (!key_path) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", cluster_path);
        snprintf(keybuf, sizeof keybuf, "%s/%ld.key", dirname(dir), id);
        key_path = keybuf;
    }
    if ((rc = keyfile_load(&m->key, key_path, err, errlen)) < 0)
        goto fail;
    if (memcmp(m->key.pk, m->cluster.peers[id].pk, sizeof m->key.pk) != 0) {
        snprintf(err, errlen, "%s is not the key %s lists for peer %ld", key_path, cluster_path, id);
        rc = -EACCES;
        goto fail;
    }
    parse_error te = {0};
    if ((rc = topo_load(&m->topology, m->cluster.topology_path, &te)) < 0) {
        parse_error_text(&te, err, errlen);
        goto fail;
    }
    if (m->topology.n_peers != m->cluster.n_peers) {
        snprintf(err, errlen, "%s is for %d peers, %s lists %d", m->cluster.topology_path, m->topology.n_peers,
                 cluster_path, m->cluster.n_peers);
        rc = -EINVAL;
        goto fail;
    }
    return 0;
fail:
    member_close(m);
    return rc;
}

void member_close(member *m)
{
    if (!m)
        return;
    topo_free(&m->topology);
    sec_keypair_free(&m->key);
    cluster_free(&m->cluster);
    memset(m, 0, sizeof *m);
}
