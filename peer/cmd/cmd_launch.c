/* sgp launch: the command line of peer/launch/launch.h (N `sgp peer`
 * processes on this machine or on LAN hosts, one progress line, a combined
 * summary with the fields of `sgp sim`). Options it does not know go to
 * every peer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/cmd/cli.h"
#include "peer/cmd/commands.h"
#include "peer/cmd/gossip_opts.h"
#include "peer/launch/launch.h"
#include "topologies/topo.h"

static const char *CMD = "sgp launch";
#define LAUNCH_DEFAULT_CODEC "stc:0.04" /* 98x fewer bytes than none at the same accuracy (tests/bench/README.md) */
#define STR(x) #x
#define XSTR(x) STR(x)

static void help(void)
{
    fputs("usage: sgp launch --peers N [--topology FILE|KIND] [--run-dir DIR] [OPTIONS]\n\n"
          "Run N peers as separate processes on this machine (127.0.0.1), with fresh\n"
          "keys and a cluster file in the run directory, one live progress line, and\n"
          "a combined summary. Every other option is passed to each `sgp peer`\n"
          "(training options, --codec, --step, --tau, --shard, ...; see sgp peer --help);\n"
          "--codec defaults to " LAUNCH_DEFAULT_CODEC " here.\n\n"
          "  --peers N             number of peers, 1 to " XSTR(TOPO_MAX_PEERS) " [4]\n"
          "  --topology FILE|KIND  a .topo file or a generator name [exponential]\n"
          "  --run-dir DIR         where keys, cluster file, logs and models go [sgp-run-PID]\n"
          "  --summary FILE        combined JSON summary (the fields of sgp sim)\n"
          "  --save-model FILE     the average model (also always in DIR/model.safetensors)\n"
          "  --model-format KIND   of --save-model: safetensors or raw [safetensors]\n"
          "  --hosts FILE          run the peers on LAN hosts over ssh instead: one host a line,\n"
          "                        'ADDRESS [slots=N] [ssh=DEST] [ssh-port=P]' (peer/launch/README.md has an example)\n"
          "  --base-port P         with --hosts: peers on a host listen on P, P+1, ... [17000]\n"
          "  --remote-sgp PATH     with --hosts: sgp on the hosts [this executable's path]\n"
          "  --remote-dir DIR      with --hosts: the run directory on the hosts [the local one's path]\n"
          "  --no-shared-ssh       with --hosts: log in for every ssh command instead of one\n"
          "                        connection a host (for an ssh without OpenSSH's ControlMaster)\n"
          "  --prepare             only make the run directory (keys, cluster file, topology) and\n"
          "                        start nothing: for your own program on libsgp (peer/lib/sgp.h)\n\n"
          "Fault injection (local runs; every peer checkpoints to DIR/peerI.ckpt):\n"
          "  --kill PEER@ROUND     kill -9 the peer once its log reaches ROUND\n"
          "  --restart PEER@ROUND[:S]  kill -9 it, then start it again with --resume after S seconds [1]\n"
          "  --stop PEER@ROUND:S   SIGSTOP it for S seconds, then SIGCONT\n"
          "  --leave PEER@ROUND    it leaves for good: SIGTERM to a peer run with --on-term leave, which\n"
          "                        hands its weight to its neighbours (sgp peer --help)\n"
          "  --add COUNT@ROUND     COUNT more peers join once the run reaches ROUND: the cluster file gets\n"
          "                        vacant slots and an admission key, each joiner a key and a credential\n"
          "                        (peer/config/CLUSTER.md, \"Joining\"); --topology is for all the slots\n"
          "  --slow PEER:FACTOR    it runs its rounds at 1/FACTOR of its speed (sgp peer --slow)\n"
          "  (each may be repeated; the summary counts the faults injected)\n\n"
          "  -h, --help            this text\n",
          stdout);
}

/* Options of the launcher itself (each takes a value), and those it sets for each peer. */
static const char *const LAUNCH_OPTS[] = {"--peers", "--topology", "--run-dir", "--summary", "--save-model",
                                          "--model-format", "--hosts", "--base-port",
                                          "--remote-sgp", "--remote-dir", "--kill", "--restart", "--stop", "--slow",
                                          "--leave", "--add", NULL};
static const char *const PER_PEER_OPTS[] = {"--id", "--cluster", "--key", "--log", "--checkpoint",
                                            "--resume", NULL};

static int in_list(const char *a, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(a, *list))
            return 1;
    return 0;
}

/* One launcher option and its value into o (faults into f). 0 or CLI_USAGE. */
static int take(launch_opts *o, fault_plan *f, const char *a, const char *v)
{
    char ferr[256];
    int rc = fault_plan_add(f, a, v, ferr, sizeof ferr);
    if (rc < 0)
        return cli_usage(CMD, "%s", ferr);
    if (rc == FAULT_TAKEN)
        return 0;
    long peers;
    if (!strcmp(a, "--add")) {
        char *end;
        long count = strtol(v, &end, 10), round = *end == '@' ? strtol(end + 1, &end, 10) : -1;
        if (count < 1 || count > 1024 || round < 0 || *end)
            return cli_usage(CMD, "--add '%s': expected COUNT@ROUND (COUNT from 1 to 1024)", v);
        if (o->n_add == LAUNCH_ADD_MAX)
            return cli_usage(CMD, "at most %d --add", LAUNCH_ADD_MAX);
        o->add[o->n_add++] = (launch_add){(int)count, round};
        return 0;
    }
    if (!strcmp(a, "--peers")) {
        if (cli_long(CMD, "--peers", v, 1, TOPO_MAX_PEERS, &peers))
            return CLI_USAGE;
        o->peers = (int)peers;
    } else if (!strcmp(a, "--base-port"))
        return cli_long(CMD, "--base-port", v, 1024, 65000, &o->base_port);
    else if (!strcmp(a, "--run-dir")) {
        if (strlen(v) > 1024)
            return cli_usage(CMD, "--run-dir: at most 1024 characters");
        o->run_dir = v;
    } else if (!strcmp(a, "--topology"))
        o->topology = v;
    else if (!strcmp(a, "--summary"))
        o->summary = v;
    else if (!strcmp(a, "--save-model"))
        o->save_model = v;
    else if (!strcmp(a, "--model-format")) {
        if (modelfile_kind_parse(v, &o->model_format) < 0)
            return cli_usage(CMD, "--model-format expects safetensors or raw, got '%s'", v);
    }
    else if (!strcmp(a, "--hosts"))
        o->hosts = v;
    else if (!strcmp(a, "--remote-sgp"))
        o->remote_sgp = v;
    else
        o->remote_dir = v;
    return 0;
}

/* argv into o; 0, -1 for --help, or the exit status of a usage error. */
static int parse(int argc, char **argv, launch_opts *o, fault_plan *f)
{
    int topology_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return -1;
        if (!strcmp(a, "--prepare")) {
            o->prepare_only = 1;
            continue;
        }
        if (!strcmp(a, "--no-shared-ssh")) {
            o->ssh_unshared = 1;
            continue;
        }
        if (in_list(a, LAUNCH_OPTS)) {
            if (i + 1 >= argc)
                return cli_usage(CMD, "option '%s' needs a value", a);
            topology_given |= !strcmp(a, "--topology");
            int rc = take(o, f, a, argv[++i]);
            if (rc)
                return rc;
        } else if (in_list(a, PER_PEER_OPTS))
            return cli_usage(CMD, "%s is set by the launcher for each peer", a);
        else
            o->fwd[o->nfwd++] = argv[i];
    }
    char ferr[256];
    int slots = o->peers;
    for (int k = 0; k < o->n_add; k++)
        slots += o->add[k].count;
    if (slots > TOPO_MAX_PEERS)
        return cli_usage(CMD, "--peers and --add make %d slots; at most %d", slots, TOPO_MAX_PEERS);
    if (fault_plan_check(f, slots, ferr, sizeof ferr) < 0)
        return cli_usage(CMD, "%s", ferr);
    if (o->hosts && (f->n || o->n_add))
        return cli_usage(CMD, "--kill, --restart, --stop, --leave and --add are for local runs (not with --hosts)");
    if (o->remote_dir && (o->remote_dir[0] != '/' || strlen(o->remote_dir) > 1024))
        return cli_usage(CMD, "--remote-dir must be an absolute path of at most 1024 characters");
    /* The best setting measured in the compression issue, unless told
     * otherwise; --recipe lm brings its own, and its topology. */
    int has_codec = 0, recipe = 0;
    for (int k = 0; k < o->nfwd; k++)
        has_codec |= !strcmp(o->fwd[k], "--codec"), recipe |= !strcmp(o->fwd[k], "--recipe");
    if (recipe && !topology_given)
        o->topology = GOSSIP_RECIPE_LM_TOPOLOGY;
    if (!has_codec && !recipe) {
        o->fwd[o->nfwd++] = "--codec";
        o->fwd[o->nfwd++] = LAUNCH_DEFAULT_CODEC;
    }
    return 0;
}

int cmd_launch(int argc, char **argv)
{
    fault_plan *faults = calloc(1, sizeof *faults);
    launch_opts o = {.peers = 4, .topology = "exponential", .base_port = 17000, .faults = faults};
    o.fwd = calloc((size_t)argc + 3, sizeof *o.fwd); /* + a default --codec */
    int status = faults && o.fwd ? parse(argc, argv, &o, faults) : 1;
    if (status == -1) {
        help();
        status = 0;
    } else if (status == 0) {
        char err[1024];
        int rc = launch_run(&o, err, sizeof err);
        if (rc < 0)
            fprintf(stderr, "%s: %s\n", CMD, err);
        status = rc == 0 ? 0 : rc == -EINVAL ? CLI_USAGE : rc == -EINTR ? 130 : 1;
    }
    free(o.fwd);
    free(faults);
    return status;
}
