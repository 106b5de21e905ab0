/* Hosts files for sgp launch --hosts; see launch_hosts.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/launch/launch_hosts.h"
#include "topologies/topo.h"

void launch_hosts_local(launch_host *where, int n)
{
    memset(where, 0, (size_t)n * sizeof *where);
    for (int i = 0; i < n; i++)
        strcpy(where[i].addr, "127.0.0.1");
}

/* What a line of a hosts file holds, when it is not malformed. */
enum hosts_line { HOSTS_HOST = 0, HOSTS_BLANK = 1 };

/* One line's host and its slot count: a hosts_line, or -EINVAL. */
static int parse_line(char *line, launch_host *h, long *slots, char *err, size_t errlen)
{
    line[strcspn(line, "#\r\n")] = 0;
    char *save = NULL, *tok = strtok_r(line, " \t", &save);
    if (!tok)
        return HOSTS_BLANK;
    memset(h, 0, sizeof *h);
    *slots = 1;
    if (strlen(tok) >= sizeof h->addr) {
        snprintf(err, errlen, "address too long");
        return -EINVAL;
    }
    strcpy(h->addr, tok);
    snprintf(h->ssh, sizeof h->ssh, "%s", tok);
    while ((tok = strtok_r(NULL, " \t", &save))) {
        char *end;
        if (!strncmp(tok, "slots=", 6) && (*slots = strtol(tok + 6, &end, 10)) > 0 && *slots <= TOPO_MAX_PEERS &&
            !*end)
            continue;
        if (!strncmp(tok, "ssh-port=", 9) && (h->ssh_port = (int)strtol(tok + 9, &end, 10)) > 0 &&
            h->ssh_port < 65536 && !*end)
            continue;
        if (!strncmp(tok, "ssh=", 4) && tok[4] && strlen(tok + 4) < sizeof h->ssh) {
            strcpy(h->ssh, tok + 4);
            continue;
        }
        snprintf(err, errlen, "expected slots=N, ssh=DEST or ssh-port=P, got '%.64s'", tok);
        return -EINVAL;
    }
    return HOSTS_HOST;
}

int launch_hosts_load(launch_host *where, int n, const char *path, long base_port, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        int rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(-rc));
        return rc;
    }
    char line[512], why[160];
    int lineno = 0, placed = 0, rc = 0;
    while (rc == 0 && placed < n && fgets(line, sizeof line, f)) {
        launch_host h;
        long slots;
        lineno++;
        rc = parse_line(line, &h, &slots, why, sizeof why);
        if (rc == HOSTS_HOST && base_port + slots - 1 > 65535)
            snprintf(why, sizeof why, "%ld slots from port %ld go past 65535", slots, base_port), rc = -EINVAL;
        if (rc < 0)
            snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
        for (long k = 0; rc == HOSTS_HOST && k < slots && placed < n; k++) {
            where[placed] = h;
            where[placed++].port = (int)(base_port + k);
        }
        rc = rc < 0 ? rc : 0;
    }
    fclose(f);
    if (rc == 0 && placed < n) {
        snprintf(err, errlen, "%s: %d slots for %d peers", path, placed, n);
        rc = -EINVAL;
    }
    return rc;
}
