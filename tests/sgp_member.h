/* A cluster member held by the test: a real `sgp peer` (the target) in a
 * cluster made by `sgp launch --prepare`, and the test holding another
 * member's key, speaking through the real transport (peer/net/net.h) on a
 * loop of its own. For tests/process/ only (it runs processes):
 *
 *   scene sc;
 *   scene_start(&sc, "name", "2", "exponential", 1, 0, (char *[]){"--dead-timeout", "1", NULL});
 *   scene_connect(&sc, 1);            // dials a higher id, redials after every close
 *   ... uv_run(&sc.loop, UV_RUN_NOWAIT) until sc.side says what the test waits for ...
 *   scene_end(&sc);                   // the target stops on SIGTERM and must exit cleanly
 */
#ifndef TESTS_SGP_MEMBER_H
#define TESTS_SGP_MEMBER_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "peer/config/member.h"
#include "peer/net/net.h"
#include "peer/wire/wire.h"
#include "tests/sgp_run.h"

typedef struct member_side {
    int up, downs;
    net *n;           /* the test's transport, for answers */
    int promise;      /* answer every MODEL_REQUEST with MODEL_SOON and send no model */
    int requests;     /* MODEL_REQUESTs received */
    int acks;         /* ACKs received, and the last one's seq */
    uint64_t last_ack;
    int dials_lost;   /* its connections closed before they came up */
} member_side;

static inline void on_up(void *ctx, int peer)
{
    (void)peer;
    ((member_side *)ctx)->up = 1;
}

static inline void on_down(void *ctx, int peer, int reason)
{
    (void)peer, (void)reason;
    member_side *s = ctx;
    s->up = 0, s->downs++;
}

/* What the target sends the test's member: requests for its model (a
 * promising member says MODEL_SOON and nothing more), and ACKs. */
static inline void on_frame(void *ctx, int peer, const uint8_t *buf, size_t len)
{
    member_side *s = ctx;
    wire_msg m;
    wire_err e;
    if (wire_decode(&m, buf, len, &e) < 0)
        return;
    if (m.type == WIRE_ACK)
        s->acks++, s->last_ack = m.ack.seq;
    if (m.type == WIRE_MODEL_REQUEST) {
        s->requests++;
        uint8_t soon[32];
        const long n = wire_encode_model_soon(soon, sizeof soon, 0);
        if (s->promise && n > 0)
            net_send(s->n, peer, soon, (size_t)n);
    }
}
static inline void on_log(void *ctx, const char *line)
{
    if (strstr(line, "connection closed: ") && !strstr(line, "connection closed: replaced"))
        ((member_side *)ctx)->dials_lost += !((member_side *)ctx)->up;
}

/* One real `sgp peer` (the target) in a cluster made by sgp launch
 * --prepare, and the test holding another member's key on a loop of its own. */
typedef struct scene {
    char dir[64], cluster[128], out[128], summary[128];
    pid_t peer;
    member me;
    uv_loop_t loop;
    member_side side;
    net n;
    int connected; /* n is initialised */
    int beat_peer; /* > 0: pump_until sends it a HEARTBEAT of beat_round every 0.2 s (a live member) */
    long beat_round;
    double beat_at;
} scene;

/* peers on topology; the target is peer `target`, started with --model mlp,
 * as many epochs as it takes, and extra (NULL-terminated); the test is `as`. */
static inline void scene_start(scene *s, const char *name, const char *peers, const char *topology, int target, int as,
                        char *const extra[])
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/sgp-hostile-%s-XXXXXX", name);
    cr_assert(mkdtemp(s->dir));
    sgp_out o;
    sgp_run(&o, "launch", "--peers", peers, "--topology", topology, "--prepare", "--run-dir", s->dir, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    snprintf(s->cluster, sizeof s->cluster, "%s/cluster.conf", s->dir);
    snprintf(s->out, sizeof s->out, "%s/peer%d.out", s->dir, target);
    snprintf(s->summary, sizeof s->summary, "%s/peer%d.json", s->dir, target);
    char id[8];
    snprintf(id, sizeof id, "%d", target);
    char *argv[32] = {(char *)sgp_bin(), "peer", "--cluster", s->cluster, "--id", id, "--model", "mlp",
                      "--epochs", "100000", "--summary", s->summary};
    int k = 12;
    for (int j = 0; extra[j] && k < 31; j++)
        argv[k++] = extra[j];
    s->peer = sgp_spawn(argv, s->out);
    char err[512];
    cr_assert_eq(member_open(&s->me, s->cluster, as, NULL, err, sizeof err), 0, "%s", err);
    uv_loop_init(&s->loop);
}

/* The test's member on the network, wanting `peer` (it dials a higher id and
 * redials after every close; a lower id dials it). */
static inline void scene_connect(scene *s, int peer)
{
    net_callbacks cb = {.on_up = on_up, .on_down = on_down, .on_frame = on_frame, .on_log = on_log};
    cr_assert_eq(net_init(&s->n, &s->loop, &s->me.cluster, s->me.id, &s->me.key, &cb, &s->side), 0);
    s->side.n = &s->n;
    cr_assert_eq(net_want(&s->n, peer), 0);
    s->connected = 1;
}

static inline void scene_disconnect(scene *s)
{
    if (!s->connected)
        return;
    net_close(&s->n);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    net_free(&s->n);
    s->connected = 0, s->side.up = 0;
}

/* The test leaves; the target stops on SIGTERM and must exit cleanly. */
static inline void scene_end(scene *s)
{
    scene_disconnect(s);
    uv_loop_close(&s->loop);
    member_close(&s->me);
    kill(s->peer, SIGTERM);
    cr_assert_eq(sgp_wait_exit(s->peer, SGP_EVENT_LIMIT_S), 0, "see %s", s->out);
}

/* Open file descriptors of pid. */
static inline int open_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    int k = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        k += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return k;
}

#endif
