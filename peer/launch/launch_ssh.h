/* The ssh side of `sgp launch --hosts`: copy each host its part of the run
 * directory, start peers there, stop them, fetch their results. Every
 * command runs with BatchMode=yes: no password prompt ever blocks a launch.
 *
 *   launch_ssh_mux_open();
 *   launch_ssh_copy(where, n, "/home/me/run", "/home/me/run", err, sizeof err);
 *   char **argv = launch_ssh_argv(&where[i], peer_argv, "/opt/sgp");   // ssh DEST 'exec /opt/sgp peer ...'
 *   ... execvp(argv[0], argv) ...; free(argv);
 *   launch_ssh_stop(&where[i], "/home/me/run", i);                     // SIGTERM to peer i on its host
 *   launch_ssh_fetch(where, n, "/home/me/run", "/home/me/run", err, sizeof err);
 *   launch_ssh_mux_close(where, n);
 */
#ifndef PEER_LAUNCH_LAUNCH_SSH_H
#define PEER_LAUNCH_LAUNCH_SSH_H

#include <stddef.h>

#include "peer/launch/launch_hosts.h"

/* Commands to a host share one ssh connection from here on (OpenSSH's
 * ControlMaster, sockets in a private directory under /tmp) until
 * launch_ssh_mux_close ends them. Without the directory each command logs
 * in on its own. */
void launch_ssh_mux_open(void);
void launch_ssh_mux_close(const launch_host *where, int n);

/* Make rdir on each peer's host and copy it the cluster file, the topology
 * and that peer's key pair (a secret key goes to its own host only).
 * 0 or -EIO with err naming the host. */
int launch_ssh_copy(const launch_host *where, int n, const char *dir, const char *rdir, char *err, size_t errlen);

/* Bring each peer's summary, model and log (RDIR/peerI.json, .model, .jsonl:
 * the log holds its ledger) back to dir, from every host at once. */
int launch_ssh_fetch(const launch_host *where, int n, const char *dir, const char *rdir, char *err, size_t errlen);

/* argv run on h: "ssh [-p P] DEST 'exec EXE ARGV[1]...'", every word quoted
 * for the remote shell; exe replaces argv[0] when not NULL. One malloc'ed
 * block (free() it), or NULL when out of memory. */
char **launch_ssh_argv(const launch_host *h, char *const argv[], const char *exe);

/* SIGTERM to peer id of the run in rdir, on its host (sshd does not pass a
 * signal on to the remote command). Waits for ssh; ignores failures. */
void launch_ssh_stop(const launch_host *h, const char *rdir, int id);

#endif
