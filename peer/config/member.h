/* This process's place in a cluster: the cluster file, its id (given, or the
 * rank an MPI or Slurm launcher set), its secret key (checked against the
 * key the cluster file lists for it) and the topology the file names. What
 * sgp peer and libsgp both need before a node can run.
 *
 *   member m;
 *   char err[512];
 *   if (member_open(&m, "run/cluster.conf", -1, NULL, err, sizeof err) < 0) {
 *       fprintf(stderr, "%s\n", err);      // names the file (and line) or the id
 *       ...
 *   }
 *   node_config c;                         // peer/net/node.h
 *   node_config_defaults(&c);
 *   c.cluster = &m.cluster, c.id = m.id, c.key = &m.key, c.peer.topology = &m.topology;
 *   member_close(&m);
 */
#ifndef PEER_CONFIG_MEMBER_H
#define PEER_CONFIG_MEMBER_H

#include <stddef.h>

#include "peer/config/cluster.h"
#include "peer/wire/sec.h"
#include "topologies/topo.h"

typedef struct member {
    cluster cluster;
    int id;
    sec_keypair key;
    topo topology;
    int admitted;                        /* it takes a vacant slot with a credential (member_join) ... */
    uint8_t credential[SEC_CRED_BYTES];  /* ... which its handshakes carry (WIRE.md "Joining") */
} member;

/* id < 0: from OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID. key_path
 * NULL: ID.key next to the cluster file. 0, or a negative errno with a
 * one-line message: -ESRCH when there is no such id (none given and no rank
 * in the environment, or not in the cluster), else the file's problem. m is
 * left closed on failure. */
int member_open(member *m, const char *cluster_path, long id, const char *key_path, char *err, size_t errlen);
/* A peer that is not in the file takes a vacant slot (CLUSTER.md `slots`)
 * with a credential (peer/config/credential.h): the slot is the
 * credential's id, or id when it is for any (id < 0: the rank, as above);
 * the credential must be signed by the file's admission key, for its
 * cluster, unexpired, for this key (key_path NULL: ID.key next to the
 * cluster file), and the slot vacant. 0 or a negative errno with a line. */
int member_join(member *m, const char *cluster_path, const char *credential_path, long id, const char *key_path,
                char *err, size_t errlen);
void member_close(member *m);

#endif
