/* The cluster file: who takes part in a run, where each peer listens and
 * which public key it must prove it holds (format: peer/config/CLUSTER.md).
 *
 *   cluster c = {0};
 *   parse_error e;
 *   if (cluster_load(&c, "run/cluster.conf", &e) < 0) {
 *       fprintf(stderr, "%s\n", parse_error_text(&e, err, sizeof err));   // "FILE:LINE: ..." or "FILE: ..."
 *       return 1;
 *   }
 *   uint8_t cid[SEC_CLUSTER_ID_BYTES];
 *   cluster_id(&c, cid);
 *   sec_hs_init(&hs, SEC_RESPONDER, me, SEC_ANY_PEER, &kp, cluster_pubkey_lookup, &c, cid);
 *   topo_load(&t, c.topology_path, &te);   // relative paths resolved already
 *   cluster_free(&c);
 *
 * The launcher builds one instead and writes it:
 *
 *   cluster_init(&c, "my-run", "exp8.topo");
 *   for (int i = 0; i < n; i++) cluster_add_peer(&c, "10.0.0.2", 7000 + i, keys[i].pk);   // ids 0, 1, ...
 *   cluster_write(&c, f, "written by sgp launch");
 *
 * Host names are kept as written: resolving them is the transport's job.
 */
#ifndef PEER_CONFIG_CLUSTER_H
#define PEER_CONFIG_CLUSTER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "peer/wire/sec.h"
#include "topologies/parse_error.h"

#define CLUSTER_MAX_PEERS 65536 /* as topologies/ (TOPO_MAX_PEERS) */
#define CLUSTER_NAME_MAX 64
#define CLUSTER_HOST_MAX 253    /* a DNS name; literals are shorter */
#define CLUSTER_PATH_MAX 1024
#define CLUSTER_FILE_MAX (16L << 20)

enum { CLUSTER_HOST_NAME = 0, CLUSTER_IPV4 = 4, CLUSTER_IPV6 = 6 };

typedef struct cluster_peer {
    uint32_t id;
    int vacant;                         /* a slot past the peer lines: no address, no key until a peer
                                         * admitted with a credential takes it (it dials in) */
    uint16_t port;
    int family;                         /* CLUSTER_HOST_NAME, CLUSTER_IPV4 or CLUSTER_IPV6 */
    char host[CLUSTER_HOST_MAX + 1];    /* as written; IPv6 without its brackets ("fe80::1%eth0") */
    uint8_t pk[SEC_KEY_BYTES];
    int line;                           /* where it was defined; 0 if added by cluster_add_peer */
} cluster_peer;

typedef struct cluster {
    char name[CLUSTER_NAME_MAX + 1];
    char topology[CLUSTER_PATH_MAX + 1]; /* as written */
    char *topology_path;                 /* resolved against the cluster file's directory */
    int n_peers;                         /* the run's ids 0..n_peers-1: `slots`, or the peer lines */
    int n_founders;                      /* the peer lines: ids 0..n_founders-1; the rest are vacant */
    cluster_peer *peers;                 /* by id: peers[i].id == i */
    int cap;
    int has_admit;                       /* an `admit KEY` line: peers with its credentials may join */
    uint8_t admit_pk[SEC_KEY_BYTES];     /* the admission key (Ed25519, peer/config/credential.h) */
} cluster;

/* Parse a cluster file, or text in memory (name used in messages, dir the
 * directory relative topology paths are resolved against; NULL: as written).
 * Returns 0, or -EBADMSG (with e->line), -ENOENT/-EACCES/... (the file),
 * -EFBIG, -ENOMEM. c is overwritten, not freed first, and left zeroed on
 * failure. e may be NULL. */
int cluster_load(cluster *c, const char *path, parse_error *e);
int cluster_parse(cluster *c, const char *text, size_t len, const char *name, const char *dir, parse_error *e);

/* Build a cluster in code. init: -EINVAL on a bad name or path. add_peer
 * checks the host and port as the parser does and refuses a key or address
 * already present (-EEXIST); returns the new peer's id (0, 1, ...). */
int cluster_init(cluster *c, const char *name, const char *topology);
int cluster_add_peer(cluster *c, const char *host, unsigned port, const uint8_t pk[SEC_KEY_BYTES]);
/* host (n bytes: an IPv4 literal, an IPv6 one with or without its brackets,
 * or a DNS name, as the file takes them) and port as p's address (p zeroed
 * first; its family set). 0, or -EINVAL with *why. */
int cluster_peer_at(cluster_peer *p, const char *host, size_t n, unsigned port, const char **why);
/* After the peers: vacant slots up to `slots` in all, for peers admitted by
 * admit_pk (the `slots` and `admit` lines). 0, -EINVAL or -ENOMEM. */
int cluster_add_slots(cluster *c, int slots, const uint8_t admit_pk[SEC_KEY_BYTES]);

/* Write c in the format cluster_load reads (comment, if any, as # lines).
 * 0, -EINVAL (not a complete cluster) or -EIO. */
int cluster_write(const cluster *c, FILE *f, const char *comment);

/* "10.0.0.2:7000", "[::1]:7000", "node3.lan:7000" */
void cluster_peer_addr(const cluster_peer *p, char *buf, size_t cap);

/* A sec_lookup_fn over a cluster (ctx is the cluster): -ENOENT for a vacant
 * slot (only a credential names its key). */
int cluster_pubkey_lookup(void *ctx, uint32_t id, uint8_t pk[SEC_KEY_BYTES]);

/* The id both ends of a handshake must share: BLAKE2b-256 over the cluster
 * name and every peer line's key in id order (not the hosts, which may be
 * written differently from different places), then the slots and the
 * admission key when the file has them. Peers whose cluster files disagree
 * on membership refuse each other at once, with a message that says so. */
void cluster_id(const cluster *c, uint8_t id[SEC_CLUSTER_ID_BYTES]);

void cluster_free(cluster *c);

#endif
