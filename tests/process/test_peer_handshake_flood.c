/* A flood of unauthenticated connections from a member's own address (issue
 * #47): on one host every member dials from 127.0.0.1, so a local process
 * that opens connections there and never finishes a handshake comes from a
 * member address. A real `sgp peer` (peer 1) is flooded that way while the
 * test, holding peer 0's real key and speaking through the real transport
 * (peer/net/net.h), comes and goes several times: it must get in each time
 * while the flood runs. The flood says nothing, or a first flight cut short,
 * or a whole valid first flight claiming to be peer 0 (the member itself:
 * anyone who has the cluster file can send one). Before the waiting
 * handshakes were staged, the flood's connections filled the 32 places of
 * address 127.0.0.1 and the member was refused at once for as long as the
 * flood lasted. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "peer/config/member.h"
#include "peer/net/net.h"
#include "peer/wire/wire.h"
#include "tests/sgp_member.h"

/* How long the member may take to get in through the flood. Generous (it
 * takes milliseconds), yet well short of what the member needed before:
 * there it got a place only when one of the flood's timed out and its
 * connection happened to arrive before the flood's next one. */
#define MEMBER_IN_LIMIT_S 30.0
/* Comings of the member during one flood. */
#define COMINGS 4

static int closed_lines(const char *out)
{
    return sgp_file_count(out, "inbound connection closed: ") + sgp_file_count(out, "more inbound connections closed");
}

typedef struct lines_in {
    const char *out;
    int want;
} lines_in;

static int enough_closed(const void *arg)
{
    const lines_in *l = arg;
    return closed_lines(l->out) >= l->want;
}

/* Pump the test's loop until the member is up (the target must stay
 * alive); the seconds it took, or -1 after limit seconds. */
static double member_in(scene *sc, double limit)
{
    const double t0 = sgp_now();
    while (!sc->side.up) {
        int st;
        cr_assert(!sgp_has_exited(sc->peer, &st), "the peer exited (status %d); see %s", sgp_exit_status(st), sc->out);
        if (sgp_now() - t0 >= limit)
            return -1;
        uv_run(&sc->loop, UV_RUN_NOWAIT);
        sgp_poll_pause();
    }
    return sgp_now() - t0;
}

/* What the flood sends on each connection. */
typedef enum { SAYS_NOTHING, SAYS_PART_OF_A_CLAIM, CLAIMS_PEER_0 } flood_kind;

/* A first flight claiming to be peer 0 in sc's cluster (magic, version,
 * cluster id, id 0, an ephemeral key): valid, but its sender holds no key,
 * so it can never send an AUTH that verifies. */
static void claim_of_peer_0(const scene *sc, uint8_t m[SEC_MSG1_BYTES])
{
    memcpy(m, "SGP1", 4);
    m[4] = SGP_PROTOCOL_VERSION & 0xff, m[5] = SGP_PROTOCOL_VERSION >> 8;
    cluster_id(&sc->me.cluster, m + 6);
    memset(m + 38, 0, 4);
    memset(m + 42, 0x55, SEC_KEY_BYTES);
}

/* Opens connections to 127.0.0.1:port from 127.0.0.1 (a member's address)
 * about `rate` a second, sends `len` bytes of `say` on each, and holds up to
 * `hold` of them open, the oldest closed for each new one beyond that (hold
 * them longer than the target's 2 s, so that only the target closes them).
 * Runs until killed (it dies with the test). */
static void flood(int port, int rate, int hold, const uint8_t *say, size_t len)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)hold + 64) {
        rl.rlim_cur = rl.rlim_max < (rlim_t)hold + 64 ? rl.rlim_max : (rlim_t)hold + 64;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int *fds = calloc((size_t)hold, sizeof *fds);
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    const struct timeval connect_limit = {.tv_usec = 100000};
    for (long k = 0;; k++) {
        int *slot = &fds[k % hold];
        if (*slot > 0)
            close(*slot);
        *slot = socket(AF_INET, SOCK_STREAM, 0);
        if (*slot >= 0) {
            setsockopt(*slot, SOL_SOCKET, SO_SNDTIMEO, &connect_limit, sizeof connect_limit);
            if (connect(*slot, (struct sockaddr *)&dst, sizeof dst) == 0 && len)
                send(*slot, say, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        }
        usleep((useconds_t)(1000000 / rate)); /* the flood's rate, not a wait for anything */
    }
}

/* The target up, the member in once without a flood (the target's
 * descriptors then, with its data and model loaded: *fds), and a flood of
 * that kind from 127.0.0.1 well under way (the target has closed some of
 * it). Returns the flood's process. */
static pid_t flooded_scene(scene *sc, const char *name, flood_kind kind, int *fds)
{
    scene_start(sc, name, "2", "exponential", 1, 0,
                (char *[]){"--dead-timeout", "1", "--round-timeout", "2", "--no-progress", NULL});
    uint8_t claim[SEC_MSG1_BYTES];
    claim_of_peer_0(sc, claim);
    const size_t len = kind == SAYS_NOTHING ? 0 : kind == SAYS_PART_OF_A_CLAIM ? SEC_MSG1_BYTES - 1 : SEC_MSG1_BYTES;
    scene_connect(sc, 1);
    cr_assert_geq(member_in(sc, SGP_EVENT_LIMIT_S), 0, "no connection to peer 1 without a flood; see %s", sc->out);
    *fds = open_fds(sc->peer);
    scene_disconnect(sc);
    pid_t flooder = fork();
    cr_assert(flooder >= 0);
    if (flooder == 0)
        flood(sc->me.cluster.peers[1].port, 1000, 5000, claim, len);
    const lines_in flooded = {sc->out, closed_lines(sc->out) + 3};
    sgp_await(enough_closed, &flooded, "the flood's connections closed (see the target's log)", &sc->peer, 1,
              SGP_EVENT_LIMIT_S);
    return flooder;
}

/* The member gets in through the flood: the seconds it took. */
static double member_through(scene *sc, pid_t flooder, const char *when)
{
    const double took = member_in(sc, MEMBER_IN_LIMIT_S);
    if (took < 0) {
        kill(flooder, SIGKILL), waitpid(flooder, NULL, 0);
        sgp_kill_group(sc->peer);
        cr_assert_fail("%s: the member was kept out for %.0f s by the flood (see %s)", when, MEMBER_IN_LIMIT_S, sc->out);
    }
    return took;
}

/* The flood ends, the member leaves, the target stops cleanly. */
static void scene_end_flood(scene *sc, pid_t flooder)
{
    kill(flooder, SIGKILL);
    waitpid(flooder, NULL, 0);
    scene_end(sc);
}

/* The member comes and goes COMINGS times while the flood runs: each time
 * it must get in. */
static void member_comes_through(const char *name, flood_kind kind)
{
    scene sc;
    int fds_before;
    pid_t flooder = flooded_scene(&sc, name, kind, &fds_before);
    double slowest = 0;
    int most_fds = 0;
    for (int k = 1; k <= COMINGS; k++) {
        scene_connect(&sc, 1);
        char when[32];
        snprintf(when, sizeof when, "coming %d of %d", k, COMINGS);
        slowest = fmax(slowest, member_through(&sc, flooder, when));
        const int fds = open_fds(sc.peer);
        most_fds = fds > most_fds ? fds : most_fds;
        scene_disconnect(&sc);
    }
    scene_end_flood(&sc, flooder);
    cr_log_info("%s: member in within %.3f s each of %d times; target %d -> %d descriptors at most", name, slowest,
                COMINGS, fds_before, most_fds);
    /* What waits is bounded: 48 open connections from members' addresses and
     * 4 claims of peer 0 (plus what closes meanwhile). */
    cr_assert_lt(most_fds - fds_before, 48 + 4 + 32, "the target held %d descriptors (%d before the flood)", most_fds,
                 fds_before);
    cr_assert(sgp_file_has(sc.out, kind == CLAIMS_PEER_0 ? "newer connections claim to be peer 0"
                                                         : "too many handshakes from members' addresses"),
              "see %s", sc.out);
}

Test(peer_handshake_flood, a_silent_flood_from_a_member_address_never_keeps_a_member_out, .timeout = 300)
{
    member_comes_through("silent", SAYS_NOTHING);
}

Test(peer_handshake_flood, a_flood_of_first_flights_cut_short_never_keeps_a_member_out, .timeout = 300)
{
    member_comes_through("partial", SAYS_PART_OF_A_CLAIM);
}

Test(peer_handshake_flood, a_flood_of_forged_claims_of_the_member_never_keeps_it_out, .timeout = 300)
{
    member_comes_through("claims", CLAIMS_PEER_0);
}

/* Connections waiting in the accept queue of the socket listening on
 * 127.0.0.1:port (its rx_queue in /proc/net/tcp), -1 if there is none. */
static int accept_queue(int port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[512];
    int queued = -1;
    while (f && fgets(line, sizeof line, f)) {
        unsigned addr, at, state, tx, rx;
        if (sscanf(line, " %*d: %x:%x %*x:%*x %x %x:%x", &addr, &at, &state, &tx, &rx) == 5 &&
            at == (unsigned)port && state == 0x0A /* listening */)
            queued = (int)rx;
    }
    if (f)
        fclose(f);
    return queued;
}

/* The target's loop stalls (SIGSTOP, standing for a busy machine) while the
 * member dials and sends its first flight, and the flood queues some 120
 * connections behind it; when the loop runs again it accepts them all in
 * one go, more than the 48 places of the open room. The member's first
 * flight is read as it is accepted, so it has made its claim before the
 * flood behind it is admitted: the dial made during the stall is the one
 * that comes up (before, the flood accepted after it displaced it, and
 * only a redial got in). */
Test(peer_handshake_flood, a_member_queued_before_a_burst_of_the_flood_keeps_its_place, .timeout = 300)
{
    scene sc;
    int fds_before;
    pid_t flooder = flooded_scene(&sc, "stall", SAYS_NOTHING, &fds_before);
    const int port = sc.me.cluster.peers[1].port;
    for (int k = 1; k <= 3; k++) {
        cr_assert_eq(kill(sc.peer, SIGSTOP), 0);
        sc.side.dials_lost = 0;
        scene_connect(&sc, 1);
        const double limit = sgp_now() + SGP_EVENT_LIMIT_S;
        while (accept_queue(port) < 120) { /* (the member's connection is queued first: it dialled first) */
            cr_assert_lt(sgp_now(), limit, "the flood queued only %d connections", accept_queue(port));
            uv_run(&sc.loop, UV_RUN_NOWAIT); /* the member sends its first flight */
            sgp_poll_pause();
        }
        cr_assert_eq(kill(sc.peer, SIGCONT), 0);
        char when[32];
        snprintf(when, sizeof when, "stall %d", k);
        member_through(&sc, flooder, when);
        cr_assert_eq(sc.side.dials_lost, 0, "stall %d: the member's dial was displaced; a redial got in (see %s)", k,
                     sc.out);
        scene_disconnect(&sc);
    }
    scene_end_flood(&sc, flooder);
}
