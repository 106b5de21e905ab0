/* A man in the middle flips one bit of an encrypted frame between two real
 * `sgp peer` processes: the receiver must refuse the frame and close that
 * connection (never apply it), the sender reconnects, and both finish
 * training. The two cluster files differ only in where peer 0 is told to
 * find peer 1 (the proxy); the cluster id covers names and keys, not
 * addresses, so the handshake is the normal one. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/sgp_cluster.h"

static int listen_on(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 8) == 0);
    getsockname(fd, (struct sockaddr *)&a, &len);
    *port = ntohs(a.sin_port);
    return fd;
}

/* Forwards connections from lfd to 127.0.0.1:to; in the first connection
 * that reaches the server and carries enough bytes, flips one bit of the byte
 * at offset `flip` of the client -> server stream (past the handshake, inside
 * an encrypted frame). Runs until killed. */
static void proxy(int lfd, int to, long flip)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* ends with the test, whatever happens to it */
    int flipped = 0;
    for (;;) {
        int c = accept(lfd, NULL, NULL);
        if (c < 0)
            _exit(0);
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)to),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
            close(c);
            continue;
        }
        long seen = 0;
        struct pollfd p[2] = {{.fd = c, .events = POLLIN}, {.fd = s, .events = POLLIN}};
        char buf[65536];
        for (;;) {
            if (poll(p, 2, -1) < 0)
                break;
            if (p[0].revents) {
                ssize_t n = read(c, buf, sizeof buf);
                if (n <= 0)
                    break;
                if (!flipped && seen <= flip && flip < seen + n) {
                    buf[flip - seen] ^= 0x10;
                    flipped = 1;
                }
                seen += n;
                if (write(s, buf, (size_t)n) != n)
                    break;
            }
            if (p[1].revents) {
                ssize_t n = read(s, buf, sizeof buf);
                if (n <= 0 || write(c, buf, (size_t)n) != n)
                    break;
            }
        }
        close(c), close(s);
    }
}

Test(peer_tamper, flipped_bit_closes_the_connection_and_training_goes_on, .timeout = 240)
{
    char dir[] = "/tmp/sgp-tamper-XXXXXX", path[256], pub[2][128];
    cr_assert(mkdtemp(dir));
    for (int i = 0; i < 2; i++)
        sgp_keygen(dir, i, pub[i], sizeof pub[i]);
    snprintf(path, sizeof path, "%s/ring2.topo", dir);
    sgp_write_text(path, "peers 2\ngenerator ring\n");
    int p0 = sgp_free_port(), p1 = sgp_free_port(), pproxy;
    int lfd = listen_on(&pproxy);
    for (int view = 0; view < 2; view++) { /* view 0: peer 0's file (peer 1 behind the proxy) */
        snprintf(path, sizeof path, "%s/cluster%d.conf", dir, view);
        FILE *f = fopen(path, "w");
        fprintf(f, "cluster tamper\ntopology ring2.topo\npeer 0 127.0.0.1:%d %s\npeer 1 127.0.0.1:%d %s\n", p0, pub[0],
                view == 0 ? pproxy : p1, pub[1]);
        fclose(f);
    }
    pid_t px = fork();
    cr_assert(px >= 0);
    if (px == 0)
        proxy(lfd, p1, 4000); /* byte 4000 of peer 0's stream: inside its first PUSH frames */
    close(lfd);
    pid_t pids[2];
    for (int i = 0; i < 2; i++) {
        char cl[256], id[8], key[256], out[256];
        snprintf(cl, sizeof cl, "%s/cluster%d.conf", dir, i);
        snprintf(id, sizeof id, "%d", i);
        snprintf(key, sizeof key, "%s/%d.key", dir, i);
        snprintf(out, sizeof out, "%s/peer%d.log", dir, i);
        char *argv[] = {(char *)sgp_bin(), "peer", "--cluster", cl, "--id", id, "--key", key, "--model", "mlp:32",
                        "--epochs", "2", "--dead-timeout", "10", NULL};
        pids[i] = sgp_spawn(argv, out);
    }
    sgp_wait_all_ok(pids, 2, SGP_EVENT_LIMIT_S, dir);
    kill(px, SIGKILL);
    waitpid(px, NULL, 0);
    /* Peer 1 refused the tampered frame and closed that connection. */
    snprintf(path, sizeof path, "%s/peer1.log", dir);
    char *log = sgp_read_file(path);
    cr_assert(log, "%s", path);
    /* (Not just "connection closed": peer 0 closes it too when it is done.) */
    cr_assert(strstr(log, "peer 0: connection closed: frame"),
              "peer 1 did not refuse the tampered frame and close that connection: %s", log);
    double acc = 0;
    const char *at = strstr(log, "test accuracy ");
    cr_assert(at, "%s", log);
    acc = strtod(at + 14, NULL);
    cr_assert_gt(acc, 85.0, "training went on after the attack: %.2f%%", acc);
    free(log);
    sgp_rm_rf(dir);
}
