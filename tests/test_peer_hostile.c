/* A hostile or broken cluster member: the test holds peer 0's real key and
 * speaks through the real transport (peer/net/net.c: handshake, encrypted
 * frames) to a real `sgp peer` process, peer 1, and sends it authenticated
 * messages that are malformed. Each must close the connection with a log
 * line saying why (WIRE.md), and the peer must train on to the end. */
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <uv.h>

#include "peer/net/member.h"
#include "peer/net/net.h"
#include "peer/net/wire.h"
#include "tests/sgp_run.h"

typedef struct member_side {
    int up, downs;
} member_side;

static void on_up(void *ctx, int peer)
{
    (void)peer;
    ((member_side *)ctx)->up = 1;
}

static void on_down(void *ctx, int peer, int reason)
{
    (void)peer, (void)reason;
    member_side *s = ctx;
    s->up = 0, s->downs++;
}

static void on_frame(void *ctx, int peer, const uint8_t *m, size_t len) { (void)ctx, (void)peer, (void)m, (void)len; }
static void on_log(void *ctx, const char *line) { (void)ctx, (void)line; }

/* Occurrences of needle in the file. */
static int count_in(const char *path, const char *needle)
{
    char *text = sgp_read_file(path);
    int n = 0;
    for (const char *s = text; s && (s = strstr(s, needle)); s++)
        n++;
    free(text);
    return n;
}

/* Pump our loop until cond holds (the peer process must stay alive). */
typedef int (*cond_fn)(member_side *s, const char *out, int want);

static void pump_until(uv_loop_t *loop, member_side *s, const char *out, int want, cond_fn cond, pid_t peer,
                       const char *what)
{
    const double limit = sgp_now() + SGP_EVENT_LIMIT_S;
    while (!cond(s, out, want)) {
        int st;
        cr_assert(!sgp_has_exited(peer, &st), "the peer exited (status %d) while waiting for %s; see %s",
                  sgp_exit_status(st), what, out);
        if (sgp_now() >= limit) {
            sgp_kill_group(peer);
            cr_assert_fail("no %s within %.0f s; see %s", what, SGP_EVENT_LIMIT_S, out);
        }
        uv_run(loop, UV_RUN_NOWAIT);
        sgp_poll_pause();
    }
}

static int is_up(member_side *s, const char *out, int want) { return (void)out, (void)want, s->up; }
static int stalled(member_side *s, const char *out, int want)
{
    return s->downs >= want && count_in(out, "peer 0: connection closed: no complete frame for 1 s") >= want;
}
static int refused(member_side *s, const char *out, int want)
{
    return s->downs >= want && count_in(out, "connection closed: PUSH from a peer that is not an in-neighbour") >= want;
}
static int epochs_done(member_side *s, const char *out, int want) { return (void)s, count_in(out, " epoch ") >= want; }
/* Peer 1 logged its want-th drop, and our side has seen that connection close
 * (so the next message goes on a new one). */
static int dropped(member_side *s, const char *out, int want)
{
    return s->downs >= want && count_in(out, "peer 0: connection closed: malformed message") >= want;
}

Test(peer_hostile, malformed_messages_close_the_connection_and_training_goes_on, .timeout = 300)
{
    char dir[] = "/tmp/sgp-hostile-XXXXXX", cluster[256], out[256];
    cr_assert(mkdtemp(dir));
    sgp_out o;
    sgp_run(&o, "launch", "--peers", "2", "--prepare", "--run-dir", dir, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    snprintf(cluster, sizeof cluster, "%s/cluster.conf", dir);
    snprintf(out, sizeof out, "%s/peer1.out", dir);
    char *argv[] = {(char *)sgp_bin(), "peer", "--cluster", cluster, "--id", "1", "--model", "mlp", "--epochs", "100000",
                    "--dead-timeout", "1", "--round-timeout", "2", NULL};
    pid_t peer = sgp_spawn(argv, out);

    member me;
    char err[512];
    cr_assert_eq(member_open(&me, cluster, 0, NULL, err, sizeof err), 0, "%s", err);
    uv_loop_t loop;
    uv_loop_init(&loop);
    member_side side = {0};
    net_callbacks cb = {.on_up = on_up, .on_down = on_down, .on_frame = on_frame, .on_log = on_log};
    net n;
    cr_assert_eq(net_init(&n, &loop, &me.cluster, 0, &me.key, &cb, &side), 0);
    cr_assert_eq(net_want(&n, 1), 0); /* the lower id dials, and redials after every drop */

    /* [PUSH, round 1, seq 1, incarnation 1, RAW, w_total NaN, gain 0, step 0, dim 1, 8 bytes] */
    uint8_t nan_push[] = {0x9a, 0x01, 0x01, 0x01, 0x01, 0x00, 0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0,
                          0xca, 0, 0, 0, 0, 0xca, 0, 0, 0, 0, 0x01, 0xc4, 0x08, 0, 0, 0, 0, 0, 0, 0, 0};
    const struct {
        const char *what;
        const uint8_t *bytes;
        size_t len;
    } hostile[] = {
        {"an unknown message type", (const uint8_t[]){0x92, 0x09, 0x00}, 3},
        {"a heartbeat with trailing bytes", (const uint8_t[]){0x92, 0x03, 0x05, 0x00}, 4},
        {"an array count of 2^32 - 1", (const uint8_t[]){0xdd, 0xff, 0xff, 0xff, 0xff, 0x03}, 6},
        {"a MODEL_REQUEST for 2^32 values", (const uint8_t[]){0x92, 0x05, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0}, 11},
        {"a PUSH with a NaN weight", nan_push, sizeof nan_push},
    };
    const int k = (int)(sizeof hostile / sizeof *hostile);
    for (int i = 0; i < k; i++) {
        pump_until(&loop, &side, out, 0, is_up, peer, "the connection to peer 1");
        cr_assert_eq(net_send(&n, 1, hostile[i].bytes, hostile[i].len), 0);
        pump_until(&loop, &side, out, i + 1, dropped, peer, hostile[i].what);
    }

    /* Valid HEARTBEATs claiming rounds far ahead, and 2^63 - 1: peer 1's only
     * in-neighbour claims, but its shares are the evidence, so nobody jumps. */
    uint8_t beat[32];
    const long claims[] = {4000, LONG_MAX};
    for (int i = 0; i < 2; i++) {
        pump_until(&loop, &side, out, 0, is_up, peer, "the connection to peer 1");
        long len = wire_encode_heartbeat(beat, sizeof beat, claims[i]);
        cr_assert_gt(len, 0);
        cr_assert_eq(net_send(&n, 1, beat, (size_t)len), 0);
    }

    /* Peer 0 is gone for good: peer 1 routes around it and trains on (two
     * more epochs), then stops cleanly when told. */
    pump_until(&loop, &side, out, count_in(out, " epoch ") + 2, epochs_done, peer, "two more epochs");
    net_close(&n);
    uv_run(&loop, UV_RUN_DEFAULT);
    net_free(&n);
    uv_loop_close(&loop);
    member_close(&me);
    kill(peer, SIGTERM);
    cr_assert_eq(sgp_wait_exit(peer, SGP_EVENT_LIMIT_S), 0, "see %s", out);
    cr_assert(sgp_file_has(out, "test accuracy"), "see %s", out);
    cr_assert_eq(count_in(out, "connection closed: malformed message"), k, "one line per bad message (see %s)", out);
    cr_assert(sgp_file_has(out, "(type: unknown message type"), "see %s", out);
    cr_assert(sgp_file_has(out, "trailing bytes"), "see %s", out);
    cr_assert(sgp_file_has(out, "(w_total: "), "the NaN weight is named (see %s)", out);
    cr_assert(!sgp_file_has(out, "catching up"), "no claim moved its round (see %s)", out);
    /* A member that takes shares and acknowledges none gets at most an ack
     * window of them: peer 1's weight, and so its model, survive (without
     * the window its weight halved every round and the model became NaN). */
    char *text = sgp_read_file(out);
    const char *acc = text ? strstr(text, "test accuracy ") : NULL;
    cr_assert(acc && atof(acc + 14) > 80.0, "its own model still classifies (see %s)", out);
    free(text);
}

/* Ring of 4 (0 -> 1 -> 2 -> 3 -> 0): a real peer 0, whose in-neighbour 3 never
 * comes (so it keeps its shares home and its weight stays exactly 1), and
 * the test as peer 1, its out-neighbour, which peer 0 dials. A well-formed
 * PUSH from peer 1 would add mass from outside the schedule: it is refused,
 * the connection closed, and peer 0's weight does not move. */
Test(peer_hostile, shares_from_a_peer_that_is_not_an_in_neighbour_are_refused, .timeout = 300)
{
    char dir[] = "/tmp/sgp-hostile-ring-XXXXXX", cluster[256], out[256], summary[256];
    cr_assert(mkdtemp(dir));
    sgp_out o;
    sgp_run(&o, "launch", "--peers", "4", "--topology", "ring", "--prepare", "--run-dir", dir, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    snprintf(cluster, sizeof cluster, "%s/cluster.conf", dir);
    snprintf(out, sizeof out, "%s/peer0.out", dir);
    snprintf(summary, sizeof summary, "%s/peer0.json", dir);
    char *argv[] = {(char *)sgp_bin(), "peer", "--cluster", cluster, "--id", "0", "--model", "mlp", "--epochs",
                    "100000", "--dead-timeout", "1", "--round-timeout", "2", "--summary", summary, NULL};
    pid_t peer = sgp_spawn(argv, out);

    member me;
    char err[512];
    cr_assert_eq(member_open(&me, cluster, 1, NULL, err, sizeof err), 0, "%s", err);
    uv_loop_t loop;
    uv_loop_init(&loop);
    member_side side = {0};
    net_callbacks cb = {.on_up = on_up, .on_down = on_down, .on_frame = on_frame, .on_log = on_log};
    net n;
    cr_assert_eq(net_init(&n, &loop, &me.cluster, 1, &me.key, &cb, &side), 0);
    cr_assert_eq(net_want(&n, 0), 0); /* peer 0 dials us */
    pump_until(&loop, &side, out, 0, is_up, peer, "peer 0's connection");

    enum { DIM = 7850 }; /* mlp on MNIST: 784 x 10 + 10 */
    double *x = calloc(DIM, sizeof *x);
    gsp_msg m = {.src = 1, .dst = 0, .round = 0, .seq = 1, .kind = GSP_RAW, .w_total = 0.5, .dim = DIM,
                 .x_total = x, .incarnation = 1};
    size_t cap = wire_push_bound(DIM, 0);
    uint8_t *buf = malloc(cap);
    long len = wire_encode_push(buf, cap, &m);
    cr_assert_gt(len, 0);
    cr_assert_eq(net_send(&n, 0, buf, (size_t)len), 0);
    free(buf), free(x);
    pump_until(&loop, &side, out, 1, refused, peer, "the PUSH refused");
    pump_until(&loop, &side, out, count_in(out, " epoch ") + 2, epochs_done, peer, "two more epochs");
    net_close(&n);
    uv_run(&loop, UV_RUN_DEFAULT);
    net_free(&n);
    uv_loop_close(&loop);
    member_close(&me);
    kill(peer, SIGTERM);
    cr_assert_eq(sgp_wait_exit(peer, SGP_EVENT_LIMIT_S), 0, "see %s", out);
    char *s = sgp_read_file(summary);
    const char *w = s ? strstr(s, "\"weight\": ") : NULL;
    cr_assert(w, "no weight in %s", summary);
    cr_assert_eq(atof(w + 10), 1.0, "peer 0's weight moved: %s", w);
    free(s);
}

/* A member that connects and then says nothing (a stalled link, a hung
 * process): after two dead timeouts without a frame the connection is
 * closed, and the lower id redials, so the edge is back as soon as the other
 * side talks again. */
Test(peer_hostile, a_silent_connection_is_closed_and_redialled, .timeout = 300)
{
    char dir[] = "/tmp/sgp-hostile-idle-XXXXXX", cluster[256], out[256];
    cr_assert(mkdtemp(dir));
    sgp_out o;
    sgp_run(&o, "launch", "--peers", "2", "--prepare", "--run-dir", dir, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    snprintf(cluster, sizeof cluster, "%s/cluster.conf", dir);
    snprintf(out, sizeof out, "%s/peer1.out", dir);
    char *argv[] = {(char *)sgp_bin(), "peer", "--cluster", cluster, "--id", "1", "--model", "mlp", "--epochs",
                    "100000", "--dead-timeout", "0.5", "--round-timeout", "2", NULL};
    pid_t peer = sgp_spawn(argv, out);
    member me;
    char err[512];
    cr_assert_eq(member_open(&me, cluster, 0, NULL, err, sizeof err), 0, "%s", err);
    uv_loop_t loop;
    uv_loop_init(&loop);
    member_side side = {0};
    net_callbacks cb = {.on_up = on_up, .on_down = on_down, .on_frame = on_frame, .on_log = on_log};
    net n;
    cr_assert_eq(net_init(&n, &loop, &me.cluster, 0, &me.key, &cb, &side), 0);
    cr_assert_eq(net_want(&n, 1), 0);
    for (int k = 1; k <= 2; k++) { /* closed for its silence, redialled, and again */
        pump_until(&loop, &side, out, 0, is_up, peer, "the connection to peer 1");
        pump_until(&loop, &side, out, k, stalled, peer, "the silent connection closed");
    }
    pump_until(&loop, &side, out, 0, is_up, peer, "the connection to peer 1 again");
    net_close(&n);
    uv_run(&loop, UV_RUN_DEFAULT);
    net_free(&n);
    uv_loop_close(&loop);
    member_close(&me);
    kill(peer, SIGTERM);
    cr_assert_eq(sgp_wait_exit(peer, SGP_EVENT_LIMIT_S), 0, "see %s", out);
}
