/* Peers that are not in the cluster file join with a credential (peer/wire/
 * WIRE.md "Joining", peer/config/CLUSTER.md `slots` and `admit`): real `sgp
 * peer` processes on localhost. A joiner takes a vacant slot, dials its
 * neighbours with its credential and pulls the model as a late joiner does;
 * a forged, expired or revoked credential is refused at the handshake, with
 * the reason in the refusing peer's log, and the run goes on without it. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "peer/config/credential.h"
#include "peer/config/keyfile.h"
#include "peer/launch/launch_ledger.h"
#include "peer/net/net.h"
#include "tests/sgp_cluster.h"
#include "tests/sgp_files.h"

#define RUN_LIMIT_S 300

TestSuite(peer_join, .timeout = 600);

/* DIR/cluster.conf: `founders` peer lines on localhost, `slots` ids in all,
 * DIR/admit.key of `sgp cluster keygen`, a topology of `slots` peers
 * (generator kind) in DIR/topology.topo. */
static void elastic_cluster(const char *dir, int founders, int slots, const char *kind)
{
    char path[300], pub[128];
    snprintf(path, sizeof path, "%s/topology.topo", dir);
    FILE *t = fopen(path, "w");
    cr_assert(t);
    fprintf(t, "peers %d\ngenerator %s\n", slots, kind);
    fclose(t);
    sgp_out o;
    sgp_run(&o, "cluster", "keygen", "--out", dir, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    snprintf(path, sizeof path, "%s/cluster.conf", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "cluster join-test\ntopology topology.topo\nslots %d\nadmit %.44s\n", slots, o.out);
    for (int i = 0; i < founders; i++) {
        sgp_keygen(dir, i, pub, sizeof pub);
        fprintf(f, "peer %d 127.0.0.1:%d %s\n", i, sgp_free_port(), pub);
    }
    fclose(f);
}

/* `sgp peer` for founder i, or (cred non-NULL) the joiner of slot i with
 * that credential; output in DIR/peerI.out. */
static pid_t start(const char *dir, int i, const char *cred, char *const extra[])
{
    char cl[300], id[16], out[300], log[300], sum[300], key[300];
    snprintf(cl, sizeof cl, "%s/cluster.conf", dir);
    snprintf(id, sizeof id, "%d", i);
    snprintf(out, sizeof out, "%s/peer%d.out", dir, i);
    snprintf(log, sizeof log, "%s/peer%d.jsonl", dir, i);
    snprintf(sum, sizeof sum, "%s/peer%d.json", dir, i);
    snprintf(key, sizeof key, "%s/%d.key", dir, i);
    char *argv[48] = {(char *)sgp_bin(), "peer", "--cluster", cl, "--key", key, "--model", "mlp:64", "--seed", "1",
                      "--codec", "stc:0.04", "--log", log, "--summary", sum, "--no-progress", "--dead-timeout", "1"};
    int a = 19;
    if (cred)
        argv[a++] = "--credential", argv[a++] = (char *)cred;
    else
        argv[a++] = "--id", argv[a++] = id;
    for (int k = 0; extra[k] && a < 47; k++)
        argv[a++] = extra[k];
    argv[a] = NULL;
    return sgp_spawn(argv, out);
}

/* A credential for slot id, signed with DIR/admit.key into DIR/NAME
 * (expires: Unix seconds, 0 never), for the key of `sgp keygen --id id`. */
static void admit(const char *dir, int id, const char *name, int64_t expires, const char *key_file)
{
    char pub[128], path[300], err[300], key_path[300];
    sgp_keygen(dir, id, pub, sizeof pub);
    snprintf(key_path, sizeof key_path, "%s/%s", dir, key_file);
    admit_key ak;
    cr_assert_eq(admit_key_load(&ak, key_path, err, sizeof err), 0, "%s", err);
    credential c = {.id = id, .expires = expires};
    snprintf(c.cluster, sizeof c.cluster, "join-test");
    const char *why;
    cr_assert_eq(keyfile_pub_decode(c.key, pub, strlen(pub), &why), 0);
    cr_assert_eq(credential_sign(&c, &ak), 0);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cr_assert_eq(credential_save(&c, path, 1, err, sizeof err), 0, "%s", err);
    admit_key_free(&ak);
}

typedef struct reached {
    const char *dir;
    int n;
    long round;
} reached;

static int founders_reached(const void *arg)
{
    const reached *r = arg;
    for (int i = 0; i < r->n; i++)
        if (sgp_peer_last_round(r->dir, i) < r->round)
            return 0;
    return 1;
}

/* Three founders train on a 4-slot exponential graph whose slot 3 is in no
 * peer line; a fourth process with a credential for slot 3 starts beside
 * them, dials them, pulls the model of the round they are at and trains to
 * the end with them: every peer finishes, the joiner says whose model it
 * took, the ledgers hold the run's weight exactly (3 founders + 1 join,
 * held plus in flight), and the joiner ends with the founders' accuracy.
 * (Started together, not at a round of theirs: on a busy machine the
 * founders' whole run took 1.5 s, less than a process's start.) */
Test(peer_join, a_host_not_in_the_cluster_file_joins_with_a_credential)
{
    char dir[] = "/tmp/sgp-join-XXXXXX";
    cr_assert(mkdtemp(dir));
    elastic_cluster(dir, 3, 4, "exponential");
    admit(dir, 3, "3.cred", 0, "admit.key");
    pid_t pids[4] = {0};
    char *const run[] = {"--epochs", "24", NULL};
    char cred[300];
    snprintf(cred, sizeof cred, "%s/3.cred", dir);
    pids[3] = start(dir, 3, cred, run);
    for (int i = 0; i < 3; i++)
        pids[i] = start(dir, i, NULL, run);
    sgp_wait_all_ok(pids, 4, RUN_LIMIT_S, dir);
    cr_assert(sgp_peer_out_has(dir, 3, "joined with the model of peer"), "the joiner pulled a model (logs in %s)", dir);
    launch_mass m;
    char err[1200];
    cr_assert_eq(launch_ledger(dir, 4, NULL, &m, err, sizeof err), 0, "%s", err);
    cr_log_info("after the join: held %.9g, in flight %.3g", m.held, m.in_flight);
    cr_assert_leq(fabs(m.held + m.in_flight - 4), 1e-6, "3 founders and a join: total weight %.9g (logs in %s)",
                  m.held + m.in_flight, dir);
    double founders = 0;
    for (int i = 0; i < 3; i++)
        founders += sgp_peer_number(dir, i, "test_accuracy") / 3;
    const double joiner = sgp_peer_number(dir, 3, "test_accuracy");
    cr_assert_leq(fabs(joiner - founders), 0.01, "joiner %.4f, founders %.4f (logs in %s)", joiner, founders, dir);
    sgp_rm_rf(dir);
}

/* A joiner that skips its own check of the credential (as a hostile one
 * would): the test dials the founders through the real transport (peer/net/
 * net.h) as slot 2 with the credential DIR/CRED and the key DIR/KEY. */
typedef struct raw_joiner {
    int up;
} raw_joiner;

static void raw_up(void *ctx, int peer)
{
    (void)peer;
    ((raw_joiner *)ctx)->up = 1;
}

static void raw_quiet(void *ctx, const char *line) { (void)ctx, (void)line; }

typedef struct founders_logged {
    const char *dir, *why;
} founders_logged;

static int a_founder_logged(const void *arg)
{
    const founders_logged *f = arg;
    return sgp_peer_out_has(f->dir, 0, f->why) || sgp_peer_out_has(f->dir, 1, f->why);
}

static void dial_as_joiner(const char *dir, const char *cred_name, const char *key_name, const char *why)
{
    char path[300], err[300];
    cluster c;
    parse_error pe;
    snprintf(path, sizeof path, "%s/cluster.conf", dir);
    cr_assert_eq(cluster_load(&c, path, &pe), 0);
    sec_keypair kp;
    snprintf(path, sizeof path, "%s/%s", dir, key_name);
    cr_assert_eq(keyfile_load(&kp, path, err, sizeof err), 0, "%s", err);
    credential k;
    snprintf(path, sizeof path, "%s/%s", dir, cred_name);
    cr_assert_eq(credential_load(&k, path, err, sizeof err), 0, "%s", err);
    uint8_t wire[SEC_CRED_BYTES];
    credential_to_wire(&k, wire);
    uv_loop_t loop;
    uv_loop_init(&loop);
    raw_joiner side = {0};
    net_callbacks cb = {.on_up = raw_up, .on_log = raw_quiet};
    net n;
    cr_assert_eq(net_init_at(&n, &loop, &c, 2, &kp, &cb, &side, NULL, 0, 0, wire), 0);
    cr_assert_eq(net_want(&n, 0), 0);
    cr_assert_eq(net_want(&n, 1), 0);
    const founders_logged f = {dir, why};
    const double deadline = sgp_now() + RUN_LIMIT_S;
    while (!a_founder_logged(&f) && !side.up && sgp_now() < deadline) {
        uv_run(&loop, UV_RUN_NOWAIT);
        sgp_poll_pause();
    }
    net_close(&n);
    uv_run(&loop, UV_RUN_DEFAULT);
    net_free(&n);
    uv_loop_close(&loop);
    sec_keypair_free(&kp);
    cluster_free(&c);
    cr_assert(!side.up, "the founders let in a joiner with %s (logs in %s)", cred_name, dir);
    cr_assert(a_founder_logged(&f), "a founder logs why it refused the joiner: '%s' (logs in %s)", why, dir);
}

/* One refused joiner: founders 0 and 1 of a 3-slot ring (with
 * founder_extra), a joiner of slot 2 with DIR/CRED (made by `make`) that
 * must be refused at the handshake, the reason `why` in a founder's log;
 * the founders train on and stop cleanly. A real `sgp peer` joiner
 * (hostile NULL) gets no model within its round timeout and exits
 * non-zero; a hostile one is the test's own transport with the key file
 * `hostile` (dial_as_joiner), since `sgp peer` itself refuses to start with
 * a credential that does not check. */
static void refused(const char *cred_name, char *const founder_extra[], const char *why, void (*make)(const char *dir),
                    const char *hostile)
{
    char dir[] = "/tmp/sgp-join-refused-XXXXXX";
    cr_assert(mkdtemp(dir));
    elastic_cluster(dir, 2, 3, "ring");
    make(dir);
    char *argv[16] = {"--epochs", "400", "--round-timeout", "30"}, revocation[300];
    snprintf(revocation, sizeof revocation, "%s/2.revoked", dir);
    int a = 4;
    for (int k = 0; founder_extra[k] && a < 15; k++) /* ("REVOKED": the revocation made in dir) */
        argv[a++] = strcmp(founder_extra[k], "REVOKED") ? founder_extra[k] : revocation;
    argv[a] = NULL;
    pid_t pids[3] = {0};
    for (int i = 0; i < 2; i++)
        pids[i] = start(dir, i, NULL, argv);
    char what[600], cred[300];
    snprintf(what, sizeof what, "round 20 logged by the founders (logs in %s)", dir);
    sgp_await(founders_reached, &(reached){dir, 2, 20}, what, pids, 2, RUN_LIMIT_S);
    if (hostile)
        dial_as_joiner(dir, cred_name, hostile, why);
    else {
        snprintf(cred, sizeof cred, "%s/%s", dir, cred_name);
        pids[2] = start(dir, 2, cred, (char *[]){"--epochs", "400", "--round-timeout", "3", NULL});
        const int st = sgp_wait_exit(pids[2], RUN_LIMIT_S);
        cr_assert_neq(st, 0, "a joiner with %s was let in (logs in %s)", cred_name, dir);
        cr_assert(sgp_peer_out_has(dir, 2, "nothing to join"), "it gave up for want of a model (logs in %s)", dir);
        cr_assert(a_founder_logged(&(founders_logged){dir, why}), "a founder logs why it refused the joiner: '%s' "
                  "(logs in %s)", why, dir);
    }
    for (int i = 0; i < 2; i++) {
        int st_i;
        cr_assert(!sgp_has_exited(pids[i], &st_i), "founder %d is still training (logs in %s)", i, dir);
        kill(pids[i], SIGTERM);
        cr_assert_eq(sgp_wait_exit(pids[i], RUN_LIMIT_S), 0, "founder %d stops cleanly (logs in %s)", i, dir);
    }
    sgp_rm_rf(dir);
}

/* Signed by another admission key than the file's `admit` line. */
static void forged(const char *dir)
{
    char other[300];
    snprintf(other, sizeof other, "%s/other", dir);
    cr_assert_eq(mkdir(other, 0700), 0);
    sgp_out o;
    sgp_run(&o, "cluster", "keygen", "--out", other, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    admit(dir, 2, "2.cred", 0, "other/admit.key");
}

/* Expired an hour ago. */
static void expired(const char *dir) { admit(dir, 2, "2.cred", (int64_t)time(NULL) - 3600, "admit.key"); }

/* Good, and revoked by the admission key (`sgp cluster revoke`): the founders
 * run with --revoked DIR/2.revoked. */
/* DIR/ID.revoked (`sgp cluster revoke`) for the credential DIR/ID.cred;
 * its serial. */
static uint64_t revoke_credential(const char *dir, int id)
{
    char path[300], err[300], key[300], serial[32], out[300];
    snprintf(path, sizeof path, "%s/%d.cred", dir, id);
    credential c;
    cr_assert_eq(credential_load(&c, path, err, sizeof err), 0, "%s", err);
    snprintf(serial, sizeof serial, "%016llx", (unsigned long long)c.serial);
    snprintf(key, sizeof key, "%s/admit.key", dir);
    snprintf(out, sizeof out, "%s/%d.revoked", dir, id);
    sgp_out o;
    sgp_run(&o, "cluster", "revoke", "--admit-key", key, "--cluster", "join-test", "--serial", serial, "--out", out,
            NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    return c.serial;
}

static void revoked(const char *dir)
{
    admit(dir, 2, "2.cred", 0, "admit.key");
    revoke_credential(dir, 2);
}

/* A good credential, and a thief's own key (`sgp keygen --name thief`): the
 * credential names a key the thief does not hold, so the two ends derive
 * different keys, the thief cannot read the founder's AUTH and gives up
 * (the founder sees the connection closed before it authenticated). */
static void stolen(const char *dir)
{
    admit(dir, 2, "2.cred", 0, "admit.key");
    sgp_out o;
    sgp_run(&o, "keygen", "--out", dir, "--name", "thief", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
}

Test(peer_join, a_credential_shown_without_its_key_fails_authentication)
{
    refused("2.cred", (char *[]){NULL}, "inbound connection closed", stolen, "thief.key");
}

Test(peer_join, a_forged_credential_is_refused_at_the_handshake)
{
    refused("2.cred", (char *[]){NULL}, "not signed by this cluster's admission key", forged, "2.key");
}

Test(peer_join, an_expired_credential_is_refused_at_the_handshake)
{
    refused("2.cred", (char *[]){NULL}, "expired", expired, "2.key");
}

Test(peer_join, a_revoked_credential_is_refused_at_the_handshake)
{
    refused("2.cred", (char *[]){"--revoked", "REVOKED", NULL}, "revoked", revoked, NULL);
}

/* sgp launch --add and --leave (the scenario on loopback): 4 peers
 * of the cluster file train, 2 more join with credentials at different
 * rounds and one of the 4 leaves (24 epochs: 3,216 rounds, so that the
 * launcher's polls see rounds 100 and 250 on a busy machine well before the
 * end); the launch succeeds, the 5 that finish
 * hold the run's whole weight, 4 founders + 2 joins, none of it in flight,
 * and their average model learns. */
Test(peer_join, sgp_launch_adds_peers_with_credentials_and_one_leaves)
{
    char dir[] = "/tmp/sgp-join-launch-XXXXXX", run[300], sum[300], out[300];
    cr_assert(mkdtemp(dir));
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(sum, sizeof sum, "%s/summary.json", dir);
    snprintf(out, sizeof out, "%s/launch.out", dir);
    char *argv[] = {(char *)sgp_bin(), "launch", "--peers", "4", "--add", "1@100", "--add", "1@250", "--leave",
                    "1@400", "--epochs", "24", "--model", "mlp:64", "--seed", "1", "--run-dir", run, "--summary", sum,
                    NULL};
    const int st = sgp_wait_exit(sgp_spawn(argv, out), RUN_LIMIT_S);
    cr_assert_eq(st, 0, "sgp launch exited %d (logs in %s)", st, dir);
    cr_assert_eq(sgp_file_count(out, "joins with its credential"), 2, "two joiners started (%s)", out);
    cr_assert_eq(sgp_file_number(sum, "peers"), 6);
    cr_assert_eq(sgp_file_number(sum, "peers_finished"), 5, "the one that left is not among them (%s)", dir);
    const double w = sgp_file_number(sum, "weight_total");
    cr_log_info("weight %.9g (%.3g in flight), accuracy %.4f", w, sgp_file_number(sum, "weight_in_flight"),
                sgp_file_number(sum, "test_accuracy"));
    cr_assert_leq(fabs(w - 6), 1e-6, "4 founders and 2 joins: weight %.9g (logs in %s)", w, dir);
    /* Nothing held up: not with the leaver (its neighbours answered its
     * goodbye), nor in an inbox (two peers that run ahead of a third after
     * the leave had their shares refused there for the rest of the run: 2.29
     * in flight at the end; a finished peer that held its in-neighbours'
     * last shares until it closed: 0.74; a peer far behind that refused a
     * finished or leaving neighbour's last shares at its door: 0.08 to 5.8). */
    cr_assert_leq(sgp_file_number(sum, "weight_in_flight"), 1e-6, "weight in flight at the end (logs in %s)", dir);
    cr_assert_geq(sgp_file_number(sum, "test_accuracy"), 0.9, "the average model learns (logs in %s)", dir);
    sgp_rm_rf(dir);
}

/* ---- the member list (WIRE.md "Members") ------------------------------------ */

/* Whether every peer in [from, to) logged `line`. */
typedef struct all_logged {
    const char *dir, *line;
    int from, to;
} all_logged;

static int all_peers_logged(const void *arg)
{
    const all_logged *a = arg;
    for (int i = a->from; i < a->to; i++)
        if (!sgp_peer_out_has(a->dir, i, a->line))
            return 0;
    return 1;
}

/* Four founders on a ring; at round 100 peer 2's host dies (kill -9) and a
 * replacement with the same id and key comes up on another address
 * (`--listen`, another port here) without its state: it dials its
 * neighbours itself (its file line is stale), pulls the model and trains to
 * the end; peer 1, which dialled the old address, stops redialling it, and
 * peer 0, no neighbour of peer 2, learns the new address from the member
 * list its neighbours pass on. Every peer finishes, the replacement at the
 * others' accuracy. */
Test(peer_join, a_replacement_on_another_address_takes_over_its_slot)
{
    char dir[] = "/tmp/sgp-replace-XXXXXX";
    cr_assert(mkdtemp(dir));
    elastic_cluster(dir, 4, 4, "ring");
    char *const run[] = {"--epochs", "40", NULL};
    pid_t pids[4] = {0};
    for (int i = 0; i < 4; i++)
        pids[i] = start(dir, i, NULL, run);
    char what[400];
    snprintf(what, sizeof what, "round 100 logged by the founders (logs in %s)", dir);
    sgp_await(founders_reached, &(reached){dir, 4, 100}, what, pids, 4, RUN_LIMIT_S);
    kill(pids[2], SIGKILL);
    cr_assert_neq(sgp_wait_exit(pids[2], RUN_LIMIT_S), 0);
    char listen[64], line[96];
    const int port = sgp_free_port();
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    pids[2] = start(dir, 2, NULL, (char *[]){"--epochs", "40", "--resume", "--listen", listen, NULL});
    sgp_wait_all_ok(pids, 4, RUN_LIMIT_S, dir);
    cr_assert(sgp_peer_out_has(dir, 2, "joined with the model of peer"), "the replacement pulled a model (logs in %s)",
              dir);
    snprintf(line, sizeof line, "peer 2 listens at 127.0.0.1:%d (it dials in)", port);
    for (int i = 0; i < 4; i++)
        cr_assert(i == 2 || sgp_peer_out_has(dir, i, line), "peer %d learnt the new address: '%s' (logs in %s)", i,
                  line, dir);
    const double mean = (sgp_peer_number(dir, 0, "test_accuracy") + sgp_peer_number(dir, 1, "test_accuracy") +
                         sgp_peer_number(dir, 3, "test_accuracy")) / 3;
    const double replaced = sgp_peer_number(dir, 2, "test_accuracy");
    cr_assert_leq(fabs(replaced - mean), 0.01, "replacement %.4f, others %.4f (logs in %s)", replaced, mean, dir);
    sgp_rm_rf(dir);
}

/* Two founders and two joiners on a complete graph of four slots; each
 * joiner listens on an address of its own (`--listen`), which the member
 * list carries: joiner 2 dials joiner 3 (between two that dial in, the
 * lower id dials), so the joiners gossip with each other as well as with
 * the founders. Every peer finishes, the ledgers hold 2 founders + 2 joins
 * exactly, and the shares on the edge 2 -> 3 arrived. */
Test(peer_join, two_joiners_find_each_other_through_the_member_list)
{
    char dir[] = "/tmp/sgp-joiners-XXXXXX";
    cr_assert(mkdtemp(dir));
    elastic_cluster(dir, 2, 4, "complete");
    admit(dir, 2, "2.cred", 0, "admit.key");
    admit(dir, 3, "3.cred", 0, "admit.key");
    pid_t pids[4] = {0};
    char cred[2][300], listen[2][64];
    for (int j = 0; j < 2; j++) {
        snprintf(cred[j], sizeof cred[j], "%s/%d.cred", dir, 2 + j);
        snprintf(listen[j], sizeof listen[j], "127.0.0.1:%d", sgp_free_port());
        pids[2 + j] = start(dir, 2 + j, cred[j], (char *[]){"--epochs", "24", "--listen", listen[j], NULL});
    }
    for (int i = 0; i < 2; i++)
        pids[i] = start(dir, i, NULL, (char *[]){"--epochs", "24", NULL});
    sgp_wait_all_ok(pids, 4, RUN_LIMIT_S, dir);
    char line[96];
    snprintf(line, sizeof line, "peer 3 listens at %s (it dials in)", listen[1]);
    cr_assert(sgp_peer_out_has(dir, 2, line), "joiner 2 learnt joiner 3's address: '%s' (logs in %s)", line, dir);
    launch_mass m;
    char err[1200];
    cr_assert_eq(launch_ledger(dir, 4, NULL, &m, err, sizeof err), 0, "%s", err);
    cr_log_info("two joiners: held %.9g, in flight %.3g", m.held, m.in_flight);
    cr_assert_leq(fabs(m.held + m.in_flight - 4), 1e-6, "2 founders and 2 joins: total weight %.9g (logs in %s)",
                  m.held + m.in_flight, dir);
    char jsonl[300];
    snprintf(jsonl, sizeof jsonl, "%s/peer3.jsonl", dir);
    char *text = sgp_read_file(jsonl);
    const char *edge = text ? strstr(text, "\"ledger\": \"in\", \"from\": 2,") : NULL;
    cr_assert(edge, "joiner 3's ledger has the edge from joiner 2 (%s)", jsonl);
    const double seq = sgp_json_number(edge, "seq"), w = sgp_json_number(edge, "w_total");
    free(text);
    cr_assert(seq > 0 && w > 0, "joiner 3 took shares from joiner 2: seq %g, w_total %g (%s)", seq, w, jsonl);
    sgp_rm_rf(dir);
}

/* Founders 0 and 1 each dropped the joiner when the revocation came, or
 * (on a busy machine, a founder it had not reached yet) refused it at a
 * handshake since. */
static int joiner_shut_out(const void *arg)
{
    const char *dir = arg;
    for (int i = 0; i < 2; i++)
        if (!sgp_peer_out_has(dir, i, "its credential was revoked") && !sgp_peer_out_has(dir, i, "refused: revoked"))
            return 0;
    return 1;
}

/* A revocation passed on: founders 0 and 1 and a joiner of slot 3 train on
 * a complete graph of four slots; founder 2 starts later with --revoked
 * (the joiner's credential), and its member list carries the revocation to
 * 0 and 1, which drop the joiner and refuse it from then on (the joiner
 * keeps redialling). The founders finish. */
Test(peer_join, a_revocation_reaches_members_that_never_had_its_file)
{
    char dir[] = "/tmp/sgp-revoke-XXXXXX";
    cr_assert(mkdtemp(dir));
    elastic_cluster(dir, 3, 4, "complete");
    admit(dir, 3, "3.cred", 0, "admit.key");
    const uint64_t serial = revoke_credential(dir, 3);
    char path[300], out[300], cred[300];
    snprintf(cred, sizeof cred, "%s/3.cred", dir);
    snprintf(out, sizeof out, "%s/3.revoked", dir);
    char *const run[] = {"--epochs", "400", NULL};
    pid_t pids[4] = {0};
    for (int i = 0; i < 2; i++)
        pids[i] = start(dir, i, NULL, run);
    pids[3] = start(dir, 3, cred, run);
    char what[400];
    snprintf(what, sizeof what, "the joiner took a model (logs in %s)", dir);
    sgp_await(all_peers_logged, &(all_logged){dir, "joined with the model of peer", 3, 4}, what, pids, 2, RUN_LIMIT_S);
    pids[2] = start(dir, 2, NULL, (char *[]){"--epochs", "400", "--resume", "--revoked", out, NULL});
    snprintf(path, sizeof path, "credential serial %llu revoked", (unsigned long long)serial);
    snprintf(what, sizeof what, "founders 0 and 1 learnt the revocation: '%s' (logs in %s)", path, dir);
    sgp_await(all_peers_logged, &(all_logged){dir, path, 0, 2}, what, pids, 3, RUN_LIMIT_S);
    snprintf(what, sizeof what, "founders 0 and 1 dropped or refused the joiner (logs in %s)", dir);
    sgp_await(joiner_shut_out, dir, what, pids, 3, RUN_LIMIT_S);
    for (int i = 0; i < 4; i++) {
        int st;
        cr_assert(i == 3 || !sgp_has_exited(pids[i], &st), "founder %d is still training (logs in %s)", i, dir);
        kill(pids[i], SIGTERM);
        const int rc = sgp_wait_exit(pids[i], RUN_LIMIT_S);
        cr_assert(i == 3 || rc == 0, "founder %d stops cleanly (logs in %s)", i, dir);
    }
    sgp_rm_rf(dir);
}
