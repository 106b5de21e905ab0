/* sgp peer: one networked peer of a cluster (peer/net/node.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gsp.h"
#include "nn/nn_blas.h"
#include "nn/nn_model.h"
#include "peer/cmd/cli.h"
#include "peer/cmd/train_cli.h"
#include "peer/config/credential.h"
#include "peer/config/member.h"
#include "peer/cmd/commands.h"
#include "peer/cmd/gossip_opts.h"
#include "peer/store/json.h"
#include "peer/store/summary.h"
#include "peer/net/node.h"

static const char *CMD = "sgp peer";

static void help(void)
{
    fputs("usage: sgp peer --cluster FILE [--id I] [OPTIONS]\n\n"
          "Run one peer of a cluster: train on this peer's shard and gossip with its\n"
          "neighbours over authenticated, encrypted TCP (peer/wire/WIRE.md).\n\n"
          "Peer options:\n"
          "  --cluster FILE        the cluster file (peer/config/CLUSTER.md): peers, addresses, keys, topology\n"
          "  --id I                this peer's id [from OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID]\n"
          "  --key FILE            this peer's secret key [I.key next to the cluster file]\n"
          "  --credential FILE     join in a vacant slot of the cluster file (its 'slots' and 'admit'\n"
          "                        lines) with this credential of sgp cluster admit: the slot is the\n"
          "                        credential's id (or --id); it dials its neighbours and pulls the model\n"
          "  --revoked FILE        a revocation of sgp cluster revoke: a joiner with that credential is\n"
          "                        refused at the handshake, and the revocation is passed on to every\n"
          "                        member (repeatable)\n"
          "  --listen HOST:PORT    listen here instead of the cluster file's address (an IP address:\n"
          "                        a replacement on another host) and tell the members, which then\n"
          "                        reach this peer there; a joiner listens nowhere without it\n"
          "  --dead-timeout S      a neighbour silent or disconnected this long is routed around [5]\n"
          "  --round-timeout S     a round waits at most this long for messages [30]\n"
          "  --round-deadline S|auto  how long a round waits for a late neighbour before starting\n"
          "                        without it (it is then not waited for until it is on time again);\n"
          "                        auto: 2 x the lower quartile of recent round times, 20 ms .. round timeout\n"
          "                        (with --gather: at least the round timeout) [auto]\n"
          "  --checkpoint FILE     write checkpoints here (FILE, FILE.prev; peer/store/CHECKPOINT.md)\n"
          "  --checkpoint-every S  seconds between checkpoints; 0: only when stopping [30]\n"
          "  --resume              restart from the checkpoint; without a whole one, pull the current\n"
          "                        model from a neighbour and join at its round\n"
          "  --slow FACTOR         experiments: after 48 rounds, pad each local step so that this\n"
          "                        peer's rounds take FACTOR times their median so far [1]\n"
          "  --on-term leave|stop  on SIGTERM or SIGINT: leave (hand this peer's push-sum weight to its\n"
          "                        neighbours, remove the checkpoint; a later --resume joins) or stop\n"
          "                        (checkpoint and keep the weight, to come back with --resume)\n"
          "                        [stop with --checkpoint, else leave]\n"
          "  --log FILE            JSON lines per round: loss, bytes in/out, absorbed, staleness, time\n"
          "  (--save-model writes this peer's final model z = x / w)\n\n"
          "All peers of a run must be given the same training options (seed, model,\n"
          "epochs, batch, codec, ...): --batch is the TOTAL batch, as in sgp sim.\n\n",
          stdout);
    fputs(GOSSIP_OPTS_HELP, stdout);
    fputs(TRAIN_OPTS_HELP, stdout);
    fputs("  -h, --help            this text\n", stdout);
}

#define PEER_REVOKED_MAX 256

enum {
    P_CLUSTER = 3000, P_ID, P_KEY, P_DEAD, P_ROUND, P_LOG,
    P_DEADLINE, P_CKPT, P_CKPT_EVERY, P_RESUME, P_SLOW, P_ON_TERM, P_CREDENTIAL, P_REVOKED, P_LISTEN,
};

static int write_summary(const char *path, const node_config *c, const node_result *r)
{
    summary_peer s = {
        .id = c->id, .peers = c->cluster->n_peers, .parameters = (int64_t)r->parameters,
        .epochs = c->peer.train.epochs, .seed = c->peer.train.seed, .test_accuracy = r->test_accuracy,
        .test_loss = r->test_loss, .train_loss = r->train_loss, .rounds = r->rounds, .weight = r->weight,
        .bytes_sent = (int64_t)r->bytes_sent, .bytes_received = (int64_t)r->bytes_received,
        .messages_sent = (int64_t)r->messages_sent, .messages_absorbed = (int64_t)r->messages_absorbed,
        .sends_refused = (int64_t)r->send_refused, .mean_staleness = r->mean_staleness,
        .wall_seconds = r->wall_seconds, .local_steps = r->local_steps, .start_round = r->start_round,
        .neighbours_lost = r->neighbours_lost, .late_marks = r->late_marks, .catch_ups = r->catch_ups,
        .refreshes = r->refreshes, .syncs_sent = r->syncs_sent,
        .checkpoints = r->checkpoints,
        .step_seconds = r->step_seconds, .gossip_seconds = r->gossip_seconds, .frame_seconds = r->frame_seconds,
        .wait_seconds = r->wait_seconds, .idle_seconds = r->idle_seconds, .frame_pool_seconds = r->frame_pool_seconds,
        .memory_model_bytes = (int64_t)r->memory.model, .memory_gossip_bytes = (int64_t)r->memory.gossip,
        .memory_codec_bytes = (int64_t)r->memory.codec, .memory_in_flight_bytes = (int64_t)r->memory.in_flight,
        .memory_data_bytes = (int64_t)r->memory.data, .memory_runtime_bytes = (int64_t)r->memory.runtime,
        .rss_bytes = (int64_t)r->memory.rss, .peak_rss_bytes = (int64_t)r->memory.peak_rss,
        .message_buffer_peak_bytes = (int64_t)r->message_buffer_peak, .models_landed = r->models_landed,
    };
    snprintf(s.model, sizeof s.model, "%s", c->peer.train.model);
    snprintf(s.codec, sizeof s.codec, "%s", c->peer.codec ? c->peer.codec->text : "exact");
    char err[512];
    return summary_peer_write(path, &s, err, sizeof err);
}

/* The model file's summary: who made it and how it did. */
static char *model_summary(const node_config *c, const node_result *r)
{
    json_obj j;
    json_open(&j, "-");
    json_str(&j, "command", "peer");
    json_int(&j, "id", c->id);
    json_int(&j, "peers", c->cluster->n_peers);
    json_str(&j, "cluster", c->cluster->name);
    json_str(&j, "codec", c->peer.codec ? c->peer.codec->text : "exact");
    json_int(&j, "rounds", r->rounds);
    json_num(&j, "weight", r->weight);
    json_num(&j, "test_accuracy", r->test_accuracy);
    json_num(&j, "test_loss", r->test_loss);
    json_num(&j, "wall_seconds", r->wall_seconds);
    return json_close_text(&j);
}

/* Everything `sgp peer` holds from its command line to its exit. */
typedef struct peer_cmd {
    node_config c;
    gossip_opts go;
    int help; /* --help was printed: nothing to run */
    const char *cluster_path, *key_path, *log_path;
    const char *credential_path; /* --credential: a vacant slot, admitted (peer/config/credential.h) */
    const char *revoked_path[PEER_REVOKED_MAX]; /* --revoked: revocations to refuse joiners by */
    int n_revoked;
    revocation revoked[PEER_REVOKED_MAX];
    char listen_host[CLUSTER_HOST_MAX + 1]; /* --listen, or empty */
    const char *on_term; /* --on-term: leave or stop (NULL: stop with --checkpoint, else leave) */
    long id;
    member me;
    nn_dataset train, test;
    nn_model model; /* built before the run, its shape after it (node_config.model) */
    node_result r;
    FILE *log;
} peer_cmd;

/* --listen HOST:PORT (IPv6 as [ADDR]:PORT): an IP address, as the cluster
 * file's (host names are not resolved). */
static int listen_address(peer_cmd *p, const char *arg)
{
    const char *colon = strrchr(arg, ':');
    const int v6 = arg[0] == '[';
    const char *host = arg + v6, *end = colon ? colon - v6 : NULL;
    if (!colon || end <= host || (v6 && colon[-1] != ']') || (size_t)(end - host) > CLUSTER_HOST_MAX)
        return cli_usage(CMD, "--listen takes HOST:PORT (an IP address; IPv6 as [ADDR]:PORT), not '%s'", arg);
    memcpy(p->listen_host, host, (size_t)(end - host));
    p->listen_host[end - host] = 0;
    unsigned char a[16];
    if (inet_pton(v6 ? AF_INET6 : AF_INET, p->listen_host, a) != 1)
        return cli_usage(CMD, "--listen: '%s' is not an IP%s address", p->listen_host, v6 ? "v6" : "v4");
    long port;
    if (cli_long(CMD, "--listen's port", colon + 1, 1, 65535, &port) != 0)
        return CLI_USAGE;
    p->c.listen_host = p->listen_host, p->c.listen_port = (unsigned)port;
    return 0;
}

/* One option of the command line (a cli_option_fn). */
static int parse_option(void *ctx, int ch, const char *arg)
{
    peer_cmd *p = ctx;
    node_config *c = &p->c;
    switch (ch) {
    case P_CLUSTER:
        p->cluster_path = arg;
        return 0;
    case P_ID:
        return cli_long(CMD, "--id", arg, 0, TOPO_MAX_PEERS - 1, &p->id);
    case P_KEY:
        p->key_path = arg;
        return 0;
    case P_DEAD:
        return cli_double(CMD, "--dead-timeout", arg, 0.01, 1e6, &c->peer.dead_timeout);
    case P_ROUND:
        return cli_double(CMD, "--round-timeout", arg, 0.01, 1e6, &c->peer.round_timeout);
    case P_LOG:
        p->log_path = arg;
        return 0;
    case P_DEADLINE:
        c->peer.round_deadline = 0;
        return strcmp(arg, "auto") == 0 ? 0 : cli_double(CMD, "--round-deadline", arg, 0.001, 1e6, &c->peer.round_deadline);
    case P_CKPT:
        c->checkpoint = arg;
        return 0;
    case P_CKPT_EVERY:
        return cli_double(CMD, "--checkpoint-every", arg, 0, 1e9, &c->checkpoint_every);
    case P_RESUME:
        c->resume = 1;
        return 0;
    case P_SLOW:
        return cli_double(CMD, "--slow", arg, 1, 1000, &c->slow);
    case P_CREDENTIAL:
        p->credential_path = arg;
        return 0;
    case P_LISTEN:
        return listen_address(p, arg);
    case P_REVOKED:
        if (p->n_revoked == PEER_REVOKED_MAX)
            return cli_usage(CMD, "at most %d --revoked files", PEER_REVOKED_MAX);
        p->revoked_path[p->n_revoked++] = arg;
        return 0;
    case P_ON_TERM:
        if (strcmp(arg, "leave") && strcmp(arg, "stop"))
            return cli_usage(CMD, "--on-term takes leave or stop, not '%s'", arg);
        p->on_term = arg;
        return 0;
    }
    int rc = train_opts_parse(&c->peer.train, CMD, ch, arg);
    return rc == CLI_NOT_MINE ? gossip_opts_parse(&p->go, &c->peer, CMD, ch, arg) : rc;
}

/* The command line into p: 0 (p->help: the help was printed), or the exit
 * status of a usage error. */
static int parse(peer_cmd *p, int argc, char **argv)
{
    static const struct option long_opts[] = {
        TRAIN_OPTS_LONG,
        GOSSIP_OPTS_LONG,
        {"cluster", required_argument, 0, P_CLUSTER},
        {"id", required_argument, 0, P_ID},
        {"key", required_argument, 0, P_KEY},
        {"dead-timeout", required_argument, 0, P_DEAD},
        {"round-timeout", required_argument, 0, P_ROUND},
        {"log", required_argument, 0, P_LOG},
        {"round-deadline", required_argument, 0, P_DEADLINE},
        {"checkpoint", required_argument, 0, P_CKPT},
        {"checkpoint-every", required_argument, 0, P_CKPT_EVERY},
        {"resume", no_argument, 0, P_RESUME},
        {"slow", required_argument, 0, P_SLOW},
        {"on-term", required_argument, 0, P_ON_TERM},
        {"credential", required_argument, 0, P_CREDENTIAL},
        {"revoked", required_argument, 0, P_REVOKED},
        {"listen", required_argument, 0, P_LISTEN},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    node_config_defaults(&p->c);
    gossip_opts_defaults(&p->go);
    p->id = -1;
    return cli_parse(CMD, argc, argv, long_opts, help, parse_option, p, &p->help);
}

/* What needs the whole command line: 0, or the exit status. */
static int check(peer_cmd *p)
{
    if (!p->cluster_path)
        return cli_usage(CMD, "--cluster FILE is required");
    int rc = train_opts_check(&p->c.peer.train, CMD);
    if (rc)
        return rc;
    p->c.leave_on_signal = p->on_term ? strcmp(p->on_term, "leave") == 0 : p->c.checkpoint == NULL;
    return gossip_opts_check(&p->go, &p->c.peer, CMD) ? CLI_USAGE : 0;
}

/* This peer's place in the cluster, its data, its model and its log, then
 * the run: 0, or the exit status. */
static int run(peer_cmd *p)
{
    node_config *c = &p->c;
    char err[512];
    int rc;
    rc = p->credential_path ? member_join(&p->me, p->cluster_path, p->credential_path, p->id, p->key_path, err, sizeof err)
                            : member_open(&p->me, p->cluster_path, p->id, p->key_path, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        return rc == -ESRCH ? CLI_USAGE : 1;
    }
    p->id = c->id = p->me.id;
    if (p->n_revoked && !p->me.cluster.has_admit) {
        fprintf(stderr, "%s: --revoked: %s has no 'admit' line\n", CMD, p->cluster_path);
        return CLI_USAGE;
    }
    if (revocations_load(p->revoked_path, p->n_revoked, p->me.cluster.admit_pk, p->me.cluster.name, p->revoked, err,
                         sizeof err) < 0) { /* (signed by this cluster's admission key, or refused) */
        fprintf(stderr, "%s: %s\n", CMD, err);
        return 1;
    }
    c->revocations = p->revoked, c->n_revocations = (size_t)p->n_revoked;
    if (p->me.admitted) /* (it dials in, and joins the run where it is) */
        c->credential = p->me.credential, c->resume = 1;
    nn_blas_set_threads((int)c->peer.train.threads);
    if (nn_data_load(c->peer.train.data, (int)c->peer.train.context, &p->train, &p->test, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        return 1;
    }
    c->cluster = &p->me.cluster, c->key = &p->me.key, c->peer.topology = &p->me.topology;
    /* A bad --model or --init is said now, before any file is written; the
     * node trains this model and hands back its shape, which describes the
     * saved file. */
    if ((rc = node_model(c, &p->train, &p->model, err, sizeof err)) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        return rc == -EINVAL && !c->peer.train.init ? CLI_USAGE : 1;
    }
    c->model = &p->model;
    if (p->log_path && !(p->log = fopen(p->log_path, c->resume ? "a" : "w"))) { /* a resumed peer continues its log */
        fprintf(stderr, "%s: cannot write %s: %s\n", CMD, p->log_path, strerror(errno));
        return 1;
    }
    c->log = p->log, c->progress = stdout;
    const cluster *cl = &p->me.cluster;
    if (p->me.admitted)
        printf("sgp peer %ld of %d (%s), %s, codec %s, joining with a credential (it dials its neighbours)%s%s\n",
               p->id, cl->n_peers, cl->name, c->peer.train.model, c->peer.codec ? c->peer.codec->text : "exact",
               p->listen_host[0] ? ", listening on " : "", p->listen_host);
    else if (p->listen_host[0])
        printf("sgp peer %ld of %d (%s), %s, codec %s, listening on %s:%u (not the cluster file's address: it "
               "dials its neighbours)\n",
               p->id, cl->n_peers, cl->name, c->peer.train.model, c->peer.codec ? c->peer.codec->text : "exact",
               p->listen_host, c->listen_port);
    else
        printf("sgp peer %ld of %d (%s), %s, codec %s, listening on %s:%u\n", p->id, cl->n_peers, cl->name,
               c->peer.train.model, c->peer.codec ? c->peer.codec->text : "exact", cl->peers[p->id].host,
               cl->peers[p->id].port);
    fflush(stdout);
    if (node_run(c, &p->train, &p->test, &p->r, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        return 1;
    }
    return 0;
}

/* The result on stdout, the saved model and the summary: 0 or 1. */
static int report(const peer_cmd *p)
{
    const node_result *r = &p->r;
    const train_opts *o = &p->c.peer.train;
    if (p->test.text)
        printf("peer %ld: validation loss %.4f (%.4f bits/byte, own model), %ld rounds (%ld computed here), %.1f MB "
               "out, %.1fs\n",
               p->id, r->test_loss, nn_bits_per_byte(r->test_loss), r->rounds, r->local_steps, r->bytes_sent / 1e6,
               r->wall_seconds);
    else
        printf("peer %ld: test accuracy %.2f%% (own model), %ld rounds (%ld computed here), %.1f MB out, %.1fs\n",
               p->id, 100 * r->test_accuracy, r->rounds, r->local_steps, r->bytes_sent / 1e6, r->wall_seconds);
    printf("peer %ld ", p->id);
    mem_print(stdout, &r->memory, 1);
    int status = 0, rc;
    if (o->save_model && !r->model) {
        fprintf(stderr, "%s: no final model to save (out of memory)\n", CMD);
        status = 1;
    } else if (o->save_model) {
        char *text = model_summary(&p->c, r);
        status |= train_cli_save_model(o, &p->model, r->model, text, CMD);
        free(text);
    }
    if (o->summary && (rc = write_summary(o->summary, &p->c, r)) < 0) {
        fprintf(stderr, "%s: cannot write summary %s: %s\n", CMD, o->summary, strerror(-rc));
        status = 1;
    }
    return status;
}

static void release(peer_cmd *p)
{
    if (p->log)
        fclose(p->log);
    nn_model_free(&p->model);
    node_result_free(&p->r);
    nn_dataset_free(&p->train);
    nn_dataset_free(&p->test);
    member_close(&p->me);
}

int cmd_peer(int argc, char **argv)
{
    peer_cmd p = {0};
    int status = parse(&p, argc, argv);
    if (status == 0 && !p.help && (status = check(&p)) == 0 && (status = run(&p)) == 0)
        status = report(&p);
    release(&p);
    return status;
}
