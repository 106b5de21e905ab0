/* sgp launch: N `sgp peer` processes, on this machine or on LAN hosts over
 * ssh, started, watched and stopped together.
 *
 *   fault_plan faults = {0};                          // peer/launch/launch_faults.h
 *   launch_opts o = {.peers = 8, .topology = "exponential", .run_dir = "run",
 *                    .fwd = argv_for_each_peer, .nfwd = n, .faults = &faults};
 *   char err[512];
 *   int rc = launch_run(&o, err, sizeof err);
 *   // 0; -EINVAL: the topology or hosts file is wrong; -EINTR: Ctrl-C (every peer stopped); else err says why
 *
 * The run directory (made if need be; sgp-run-PID without one) gets the
 * keys, cluster file and topology (launch_prepare.h), and per peer I its
 * output (peerI.out), log (peerI.jsonl), summary (peerI.json), final model
 * (peerI.model) and checkpoint (peerI.ckpt). While the peers run, one progress
 * line (launch_status.h) and the faults due (launch_faults.h); SIGINT or
 * SIGTERM to the launcher becomes SIGTERM to every peer, which then stops
 * cleanly. At the end the results are combined (launch_combine.h).
 *
 * With --add, the cluster file has vacant slots past the peers and an
 * admission key (RUN/admit.key); each joiner's key and credential
 * (RUN/I.key, RUN/I.cred) are made with the run directory, and the joiner
 * starts with them when its round comes (peer/config/CLUSTER.md "Joining").
 */
#ifndef PEER_LAUNCH_LAUNCH_H
#define PEER_LAUNCH_LAUNCH_H

#include <stddef.h>

#include "peer/launch/launch_faults.h"
#include "peer/store/modelfile.h"

#define LAUNCH_ADD_MAX 64

/* --add COUNT@ROUND: COUNT more local peers join with credentials once a
 * peer of the run has logged ROUND (each takes the next vacant slot). */
typedef struct launch_add {
    int count;
    long round;
} launch_add;

typedef struct launch_opts {
    int peers;              /* the peers of the cluster file (ids 0 .. peers-1) */
    launch_add add[LAUNCH_ADD_MAX]; /* joiners: vacant slots peers .. peers + their counts - 1 */
    int n_add;
    const char *topology;   /* a .topo file or a generator name */
    const char *run_dir;    /* NULL: sgp-run-PID */
    const char *summary;    /* the combined summary, or NULL */
    const char *save_model; /* the average model goes here too (always RUN/model.safetensors), or NULL */
    modelfile_kind model_format;
    const char *hosts;      /* a hosts file (launch_hosts.h), or NULL for this machine */
    long base_port;         /* with hosts: the first port on each host */
    const char *remote_sgp; /* with hosts: sgp on the hosts (NULL: this executable's path) */
    const char *remote_dir; /* with hosts: the run directory there (NULL: the local one's absolute path) */
    int ssh_unshared;       /* with hosts: a login for every ssh command (no ControlMaster) */
    char **fwd;             /* arguments for every sgp peer (training options, --codec, ...) */
    int nfwd;
    fault_plan *faults;     /* NULL: none */
    int prepare_only;       /* make the run directory (keys, cluster file, topology) and start nothing */
} launch_opts;

int launch_run(const launch_opts *o, char *err, size_t errlen);

#endif
