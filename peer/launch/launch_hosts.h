/* Where each peer of `sgp launch` runs: all on this machine, or spread over
 * LAN hosts listed in a hosts file (started over ssh, peer/launch/launch_ssh.h).
 *
 *   launch_host *where = calloc(n, sizeof *where);
 *   launch_hosts_local(where, n);                        // 127.0.0.1, ports chosen later
 *   rc = launch_hosts_load(where, n, "hosts.txt", 17000, err, sizeof err);
 *   // -EINVAL: err is "hosts.txt:3: expected slots=N, ssh=DEST or ssh-port=P, got 'x'"
 *
 * Hosts file: one host a line, "ADDRESS [slots=N] [ssh=DEST] [ssh-port=P]",
 * # comments. Peers fill the hosts in order, slots (default 1) at a time; on
 * a host they listen on base_port, base_port + 1, ...
 */
#ifndef PEER_LAUNCH_LAUNCH_HOSTS_H
#define PEER_LAUNCH_LAUNCH_HOSTS_H

#include <stddef.h>

typedef struct launch_host {
    char addr[64]; /* the address peers connect to (cluster file) */
    char ssh[128]; /* ssh destination; "" = this machine */
    int ssh_port;  /* 0: ssh's default */
    int port;      /* 0: a free one, chosen when the run directory is made */
} launch_host;

void launch_hosts_local(launch_host *where, int n);
/* 0; -EINVAL for a malformed file or too few slots; or the errno of reading
 * it. err names the file (and line). */
int launch_hosts_load(launch_host *where, int n, const char *path, long base_port, char *err, size_t errlen);

#endif
