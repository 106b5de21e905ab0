/* Peers' ports (issue #47): `sgp launch` chooses them outside the kernel's
 * ephemeral range, where no outgoing connection is given one, and a peer
 * whose port another socket holds when it starts retries its bind, dials
 * its neighbours meanwhile, and comes up once the port is free. The port is
 * held the way a connection flood holds one: by a connected socket bound to
 * it (a listener would hold it the same way). Real `sgp peer` processes of
 * a cluster made by `sgp launch --prepare`; every wait is on a line they
 * write (tests/sgp_run.h). Each run has its own /tmp/sgp-ports-* directory,
 * named in failure messages and removed when the test passes. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "peer/config/member.h"
#include "peer/net/net.h"
#include "tests/sgp_run.h"

TestSuite(peer_ports, .timeout = 600);

/* A run of a few seconds on an idle machine; this only turns a hang into a
 * failure. */
#define RUN_LIMIT_S 300

/* The kernel's ephemeral range, read here rather than by the code under test. */
static void ephemeral_range(int *lo, int *hi)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    cr_assert(f, "cannot read /proc/sys/net/ipv4/ip_local_port_range");
    cr_assert_eq(fscanf(f, "%d %d", lo, hi), 2);
    fclose(f);
}

/* The port of every peer of dir/cluster.conf ("peer ID HOST:PORT KEY"), into
 * ports[ID]; how many peers. */
static int cluster_ports(const char *dir, int *ports, int cap)
{
    char path[512], line[512];
    snprintf(path, sizeof path, "%s/cluster.conf", dir);
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s", path);
    int n = 0, id, port;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "peer %d 127.0.0.1:%d", &id, &port) == 2) {
            cr_assert(id >= 0 && id < cap, "%s: %s", path, line);
            ports[id] = port;
            n++;
        }
    fclose(f);
    return n;
}

/* `sgp launch --peers N --prepare` into a new /tmp/sgp-ports-NAME-* (dir). */
static void prepare(char *dir, size_t cap, const char *name, int n)
{
    char cluster[300];
    snprintf(dir, cap, "/tmp/sgp-ports-%s-XXXXXX", name);
    cr_assert(mkdtemp(dir));
    sgp_prepare_cluster(dir, n, cluster, sizeof cluster);
}

/* ---- sgp launch: ports outside the ephemeral range ------------------------- */

Test(peer_ports, launch_chooses_ports_outside_the_ephemeral_range)
{
    char dir[256];
    prepare(dir, sizeof dir, "range", 16);
    int lo, hi, ports[16];
    ephemeral_range(&lo, &hi);
    cr_assert_eq(cluster_ports(dir, ports, 16), 16, "%s/cluster.conf", dir);
    for (int i = 0; i < 16; i++) {
        cr_assert(ports[i] > 1024 && ports[i] <= 65535, "peer %d: port %d (%s)", i, ports[i], dir);
        cr_assert(ports[i] < lo || ports[i] > hi, "peer %d: port %d is in the ephemeral range %d-%d (%s)", i,
                  ports[i], lo, hi, dir);
        for (int j = 0; j < i; j++)
            cr_assert_neq(ports[i], ports[j], "peers %d and %d share port %d (%s)", j, i, ports[i], dir);
    }
    sgp_rm_rf(dir);
}

/* ---- sgp peer: a port held by another socket -------------------------------- */

/* 127.0.0.1:port held as an outgoing connection holds its port: a socket
 * bound to it and connected to a listener of the test's (fds: the three;
 * close-on-exec, or the peers started after would hold them too). */
static void hold_port(int port, int fds[3])
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fds[0] >= 0 && bind(fds[0], (struct sockaddr *)&a, sizeof a) == 0 && listen(fds[0], 1) == 0 &&
              getsockname(fds[0], (struct sockaddr *)&a, &len) == 0);
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    fds[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fds[1] >= 0);
    cr_assert_eq(bind(fds[1], (struct sockaddr *)&me, sizeof me), 0, "bind port %d: %s", port, strerror(errno));
    cr_assert_eq(connect(fds[1], (struct sockaddr *)&a, sizeof a), 0, "%s", strerror(errno));
    fds[2] = accept4(fds[0], NULL, NULL, SOCK_CLOEXEC);
    cr_assert(fds[2] >= 0);
}

/* The port free again at once: the held end resets its connection (a close
 * would leave it in TIME_WAIT, which holds the port for another 60 s). */
static void release_port(int fds[3])
{
    struct linger reset = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fds[1], SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
}

/* `sgp peer` i of the cluster in dir, for 2 epochs of mlp:64, writing
 * dir/peerI.{out,json}. */
static pid_t start_peer(const char *dir, int i)
{
    char cl[300], id[16], out[300], sum[300];
    snprintf(cl, sizeof cl, "%s/cluster.conf", dir);
    snprintf(id, sizeof id, "%d", i);
    snprintf(out, sizeof out, "%s/peer%d.out", dir, i);
    snprintf(sum, sizeof sum, "%s/peer%d.json", dir, i);
    char *argv[] = {(char *)sgp_bin(), "peer", "--cluster", cl, "--id", id, "--model", "mlp:64", "--seed", "1",
                    "--epochs", "2", "--summary", sum, NULL};
    return sgp_spawn(argv, out);
}

/* Every one of the n peers ran all the rounds peer 0 ran (none was left
 * behind for want of a neighbour). */
static void all_ran_every_round(const char *dir, int n)
{
    const double rounds = sgp_peer_number(dir, 0, "rounds");
    cr_assert_gt(rounds, 0, "%s", dir);
    for (int i = 1; i < n; i++)
        cr_assert_eq(sgp_peer_number(dir, i, "rounds"), rounds, "peer %d (logs in %s)", i, dir);
}

/* A run whose peer has its port held by the test. */
typedef struct held_run {
    char dir[256], out[300]; /* the run directory, that peer's output */
    char retrying[160], up[160]; /* the lines it writes when it finds its address in use, and once it listens */
    int fds[3];
    pid_t pids[3];
} held_run;

/* A cluster of n (at most 3) peers in a new /tmp/sgp-ports-NAME-*, peer
 * `held`'s port held as all n start. */
static void start_with_port_held(held_run *h, const char *name, int n, int held)
{
    cr_assert(n <= 3);
    prepare(h->dir, sizeof h->dir, name, n);
    int ports[3];
    cr_assert_eq(cluster_ports(h->dir, ports, 3), n, "%s", h->dir);
    hold_port(ports[held], h->fds);
    for (int i = 0; i < n; i++)
        h->pids[i] = start_peer(h->dir, i);
    snprintf(h->out, sizeof h->out, "%s/peer%d.out", h->dir, held);
    snprintf(h->retrying, sizeof h->retrying,
             "peer %d: listen on 127.0.0.1:%d: address already in use; retrying for up to", held, ports[held]);
    snprintf(h->up, sizeof h->up, "peer %d: listening on 127.0.0.1:%d after", held, ports[held]);
}

/* Peer 1 of three (exponential: every pair are neighbours) starts while its
 * port is held: it says so and retries; once the port is free it listens,
 * peer 0 (which dials it) gets through, and the three train to the end. */
Test(peer_ports, peer_whose_port_is_held_retries_and_trains_once_it_is_free)
{
    held_run h;
    start_with_port_held(&h, "held", 3, 1);
    sgp_await_text(h.out, h.retrying, h.pids, 3, SGP_EVENT_LIMIT_S);
    release_port(h.fds);
    sgp_await_text(h.out, h.up, h.pids, 3, SGP_EVENT_LIMIT_S);
    sgp_wait_all_ok(h.pids, 3, RUN_LIMIT_S, h.dir);
    all_ran_every_round(h.dir, 3);
    sgp_rm_rf(h.dir);
}

/* Peer 0 of two starts while its port is held, for the whole run: it only
 * dials (peer 1 is the higher id), so its retried bind keeps nothing from
 * it and the two train to the end all the same. */
Test(peer_ports, peer_whose_port_is_held_dials_its_neighbours_meanwhile)
{
    held_run h;
    start_with_port_held(&h, "dials", 2, 0);
    sgp_wait_all_ok(h.pids, 2, RUN_LIMIT_S, h.dir);
    release_port(h.fds);
    cr_assert(sgp_file_has(h.out, h.retrying), "no '%s' in %s", h.retrying, h.out);
    cr_assert(!sgp_file_has(h.out, h.up), "the port was held for the whole run (%s)", h.out);
    all_ran_every_round(h.dir, 2);
    sgp_rm_rf(h.dir);
}

/* ---- the transport: giving up ------------------------------------------------ */

typedef struct giving_up {
    int failed, err;
    char last_log[320];
} giving_up;

static void note_log(void *ctx, const char *line)
{
    giving_up *g = ctx;
    snprintf(g->last_log, sizeof g->last_log, "%s", line);
}

static void note_failure(void *ctx, int err)
{
    giving_up *g = ctx;
    g->failed++, g->err = err;
}

static void no_up(void *ctx, int peer) { (void)ctx, (void)peer; }
static void no_down(void *ctx, int peer, int reason) { (void)ctx, (void)peer, (void)reason; }
static void no_frame(void *ctx, int peer, const uint8_t *m, size_t len) { (void)ctx, (void)peer, (void)m, (void)len; }

/* A net whose address stays in use past its retry time logs that it gives
 * up, tells its caller once (on_listen_failed, which `sgp peer` turns into
 * "cannot listen on its cluster address: Address already in use"), and
 * closes cleanly. The retry time is cut to 0.3 s (120 s by default). */
Test(peer_ports, net_gives_up_on_an_address_still_in_use_after_its_retry_time)
{
    char dir[256], cl[300], err[512];
    prepare(dir, sizeof dir, "giveup", 2);
    snprintf(cl, sizeof cl, "%s/cluster.conf", dir);
    member me;
    cr_assert_eq(member_open(&me, cl, 0, NULL, err, sizeof err), 0, "%s", err);
    int fds[3];
    hold_port(me.cluster.peers[0].port, fds);
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    giving_up g = {0};
    net_callbacks cb = {.on_up = no_up, .on_down = no_down, .on_frame = no_frame, .on_log = note_log,
                        .on_listen_failed = note_failure};
    net n;
    cr_assert_eq(net_init(&n, &loop, &me.cluster, 0, &me.key, &cb, &g), 0);
    cr_assert(strstr(g.last_log, "address already in use; retrying for up to 120 s"), "%s", g.last_log);
    cr_assert_eq(net_set_listen_retry(&n, 0.3), 0);
    while (!g.failed)
        cr_assert(uv_run(&loop, UV_RUN_ONCE) != 0, "the loop ran out before the net gave up (%s)", g.last_log);
    cr_assert_eq(g.failed, 1);
    cr_assert_eq(g.err, UV_EADDRINUSE, "%s", uv_strerror(g.err));
    cr_assert(strstr(g.last_log, "address already in use after retrying for") && strstr(g.last_log, "giving up"),
              "%s", g.last_log);
    net_close(&n);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(uv_loop_close(&loop), 0, "a handle was left open");
    net_free(&n);
    release_port(fds);
    member_close(&me);
    sgp_rm_rf(dir);
}
