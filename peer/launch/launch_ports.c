/* Free ports outside the kernel's ephemeral range; see launch_ports.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "peer/launch/launch_ports.h"

#define PORT_FLOOR 10000     /* below: the registered services' ports */
#define PORT_UNPRIVILEGED 1025
#define DRAWS_PER_PORT 256   /* a busy machine has a few hundred listeners, not thousands */

/* The kernel's ephemeral range; Linux's default when it cannot be read. */
static void ephemeral_range(int *lo, int *hi)
{
    *lo = 32768, *hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
    if (!f)
        return;
    int a, b;
    if (fscanf(f, "%d %d", &a, &b) == 2 && a >= 1 && a <= b && b <= 65535)
        *lo = a, *hi = b;
    fclose(f);
}

/* Room for `more` file descriptors: the soft limit goes up to the hard one
 * if it must (a few thousand peers hold a socket each while ports are chosen). */
static void allow_fds(int more)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)more + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static uint64_t next_random(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A socket bound to 127.0.0.1:port (0: the kernel chooses), into *fd;
 * 0 or -errno. */
static int bind_loopback(int port, int *fd)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*fd < 0)
        return -errno;
    if (bind(*fd, (struct sockaddr *)&a, sizeof a) == 0)
        return 0;
    int rc = -errno;
    close(*fd);
    *fd = -1;
    return rc;
}

/* The port *fd is bound to, or -errno. */
static int bound_port(int fd)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    return getsockname(fd, (struct sockaddr *)&a, &len) < 0 ? -errno : ntohs(a.sin_port);
}

int launch_ports_free(int *ports, int n)
{
    int *fds = malloc((size_t)(n > 0 ? n : 1) * sizeof *fds), rc = 0;
    if (!fds)
        return -ENOMEM;
    allow_fds(n);
    int lo, hi;
    ephemeral_range(&lo, &hi);
    /* The candidates: [first, lo) then (hi, 65535], numbered 0..count-1. */
    const int first = lo > PORT_FLOOR ? PORT_FLOOR : PORT_UNPRIVILEGED;
    const int below = lo > first ? lo - first : 0, above = 65535 - hi, count = below + above;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    /* Launches and test runs side by side start from different draws. */
    uint64_t rng = (uint64_t)getpid() << 32 ^ (uint64_t)t.tv_sec * 1000000000u ^ (uint64_t)t.tv_nsec;
    for (int i = 0; i < n; i++) {
        fds[i] = -1;
        if (ports[i] || rc < 0)
            continue;
        for (int d = 0; count > 0 && d < DRAWS_PER_PORT; d++) {
            const int k = (int)(next_random(&rng) % (uint64_t)count);
            const int port = k < below ? first + k : hi + 1 + (k - below);
            const int r = bind_loopback(port, &fds[i]);
            if (r == 0) {
                ports[i] = port;
                break;
            }
            if (r != -EADDRINUSE && r != -EACCES) { /* out of descriptors or memory: no draw fares better */
                rc = r;
                break;
            }
        }
        if (fds[i] < 0 && rc == 0) { /* nothing free outside the range: the kernel's choice */
            rc = bind_loopback(0, &fds[i]);
            int port = rc == 0 ? bound_port(fds[i]) : rc;
            if (port < 0)
                rc = port;
            else
                ports[i] = port;
        }
    }
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    return rc;
}
