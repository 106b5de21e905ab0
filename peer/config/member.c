/* This process's place in a cluster: see member.h. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "peer/config/member.h"
#include "peer/config/credential.h"
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

/* The credential of a joiner (member_join): its slot into *id, its wire
 * form into m. */
static int take_credential(member *m, const char *cluster_path, const char *path, long *id, char *err,
                           size_t errlen)
{
    const cluster *c = &m->cluster;
    credential k;
    int rc = credential_load(&k, path, err, errlen);
    if (rc < 0)
        return rc;
    if (!c->has_admit) {
        snprintf(err, errlen, "%s has no 'admit' line: its peers take no credential", cluster_path);
        return -EACCES;
    }
    char why[256];
    if ((rc = credential_check(&k, c->admit_pk, c->name, (int64_t)time(NULL), why, sizeof why)) < 0) {
        snprintf(err, errlen, "%s: %s", path, why);
        return rc;
    }
    if (k.id != CREDENTIAL_ANY_ID && *id >= 0 && *id != k.id) {
        snprintf(err, errlen, "%s is for id %ld, not %ld", path, k.id, *id);
        return -EACCES;
    }
    if (k.id != CREDENTIAL_ANY_ID)
        *id = k.id;
    m->admitted = 1;
    credential_to_wire(&k, m->credential);
    return 0;
}

static int open_as(member *m, const char *cluster_path, const char *credential_path, long id, const char *key_path,
                   char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    int rc;
    parse_error ce;
    if ((rc = cluster_load(&m->cluster, cluster_path, &ce)) < 0) {
        parse_error_text(&ce, err, errlen);
        return rc;
    }
    if (credential_path && (rc = take_credential(m, cluster_path, credential_path, &id, err, errlen)) < 0)
        goto fail;
    if (id < 0 && (rc = rank_from_env(&id, err, errlen)) != RANK_FOUND) {
        if (rc == RANK_NONE)
            snprintf(err, errlen, "no peer id: give one, or run under mpirun/srun (no rank in the environment)");
        rc = -ESRCH;
        goto fail;
    }
    if (id >= m->cluster.n_peers) {
        snprintf(err, errlen, "id %ld is not in %s (%d peers)", id, cluster_path, m->cluster.n_peers);
        rc = -ESRCH;
        goto fail;
    }
    if (m->cluster.peers[id].vacant != m->admitted) {
        if (m->admitted)
            snprintf(err, errlen, "id %ld is a peer line of %s, not a vacant slot: its peer has no credential to show",
                     id, cluster_path);
        else
            snprintf(err, errlen, "id %ld is a vacant slot of %s: a peer takes it with --credential", id, cluster_path);
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
    const uint8_t *want = m->admitted ? m->credential + 17 : m->cluster.peers[id].pk; /* (the credential's key) */
    if (memcmp(m->key.pk, want, sizeof m->key.pk) != 0) {
        if (m->admitted)
            snprintf(err, errlen, "%s is not the key %s admits", key_path, credential_path);
        else
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

int member_open(member *m, const char *cluster_path, long id, const char *key_path, char *err, size_t errlen)
{
    return open_as(m, cluster_path, NULL, id, key_path, err, errlen);
}

int member_join(member *m, const char *cluster_path, const char *credential_path, long id, const char *key_path,
                char *err, size_t errlen)
{
    return open_as(m, cluster_path, credential_path, id, key_path, err, errlen);
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
