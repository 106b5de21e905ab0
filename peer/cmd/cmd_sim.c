/* sgp sim: N logical peers in one process on a virtual clock (peer/sim/sim.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gossip/gsp.h"
#include "nn/nn_blas.h"
#include "peer/cmd/cli.h"
#include "peer/cmd/train_cli.h"
#include "peer/cmd/commands.h"
#include "peer/cmd/gossip_opts.h"
#include "peer/store/json.h"
#include "peer/sim/sim.h"

static const char *CMD = "sgp sim";

static void help(void)
{
    fputs("usage: sgp sim --peers N --topology FILE|KIND [OPTIONS]\n\n"
          "Simulate N peers training together with Stochastic Gradient Push, in one\n"
          "process on a virtual clock. Deterministic from --seed.\n\n"
          "Simulation options:\n"
          "  --peers N             number of peers [8]\n"
          "  --topology FILE|KIND  a .topo file, or a generator (exponential, ring, torus,\n"
          "                        complete, n-peer-exponential, bipartite-exponential, star,\n"
          "                        random) for N peers [exponential]\n"
          "  --compute-time S|measured   virtual seconds per local step, or 'measured' to time\n"
          "                        a real step once at start [estimated from the model size]\n"
          "  --latency S           one-way link latency in seconds [0.0001]\n"
          "  --bandwidth MBIT      link bandwidth in Mbit/s, 0 for infinite [1000]\n"
          "  --loss P              probability that a message is lost [0]\n"
          "  --duplicate P         probability that a message is delivered twice [0]\n"
          "  --jitter S            extra random delay up to S seconds (reorders messages) [0]\n"
          "  --slow PEER:FACTOR    PEER computes FACTOR times slower (repeatable)\n"
          "  --crash PEER@ROUND    PEER crashes when it reaches ROUND (repeatable)\n"
          "  --rejoin PEER@ROUND   a crashed PEER comes back when the slowest peer reaches ROUND,\n"
          "                        with the state it had (a checkpoint) under a new incarnation\n"
          "  --join PEER@ROUND     as --rejoin, but without its state: it pulls a neighbour's model,\n"
          "                        as sgp peer --resume does without a checkpoint\n"
          "  --replace PEER@ROUND  PEER is replaced: it crashes at ROUND (kill -9: its weight is lost) and\n"
          "                        another host takes its slot at once without its state (--crash\n"
          "                        PEER@ROUND --join PEER@ROUND+1: the simulator has no addresses)\n"
          "  --admit PEER@ROUND    PEER's slot is vacant from the start (routed around, no weight, not in\n"
          "                        the reports) until the slowest peer reaches ROUND; then a host admitted\n"
          "                        with a credential takes it: it pulls a neighbour's model and enters\n"
          "                        with one unit of weight (repeatable)\n"
          "  --stop PEER@ROUND:S   PEER freezes for S seconds when it reaches ROUND (SIGSTOP)\n"
          "  --leave PEER@ROUND    PEER leaves when it reaches ROUND, as sgp peer on SIGTERM without a\n"
          "                        checkpoint: its shares of the round go out, then all of its weight\n"
          "                        to its live neighbours, then GOODBYE \"stopped\" (repeatable)\n"
          "  --partition P,Q,..@T:S  the links between these peers and all others are cut at\n"
          "                        simulated second T for S seconds (repeatable)\n"
          "  --churn F[:S]         random crashes and resumes: a fraction F of the peers is down at\n"
          "                        any time, for S seconds on average [S: 4 x --dead-timeout]\n"
          "  --speed-drift D       uniform load: each step takes (1 + D x Exp(1)) times as long,\n"
          "                        drawn per peer and step [0]\n"
          "  --dead-timeout S      seconds of silence or disconnection before a neighbour is\n"
          "                        routed around [1]\n"
          "  --round-timeout S     seconds a round waits at most [20 x (step + message + latency)]\n"
          "  --round-deadline S    seconds a round waits for a late neighbour [derived: 2 x the lower\n"
          "                        quartile of recent rounds, at least 20 ms, at most --round-timeout;\n"
          "                        with --gather at least --round-timeout]\n"
          "  --averaging-only      no gradient: pure push-sum from different starting points\n"
          "  --log FILE            per-round CSV: round, sim time, loss, consensus distance, bytes, lost\n"
          "  --events FILE         every peer's decisions as JSON lines (the events sgp peer --log writes)\n"
          "  --check               check the invariants after every event (push-sum weight moves only at a\n"
          "                        crash, a comeback or an admission (+1), weights positive, models\n"
          "                        finite, progress): a\n"
          "                        violation ends the run with an error (sgp dst runs random fault schedules)\n"
          "\n"
          "--batch is the TOTAL batch: each peer uses batch/N, so a round sees as many\n"
          "samples as one step of 'sgp train'; an epoch is the same number of rounds.\n\n",
          stdout);
    fputs(GOSSIP_OPTS_HELP, stdout);
    fputs(TRAIN_OPTS_HELP, stdout);
    fputs("  -h, --help            this text\n", stdout);
}

enum { S_PEERS = 2000, S_TOPOLOGY, S_COMPUTE, S_LATENCY, S_BANDWIDTH, S_LOSS, S_SLOW, S_CRASH, S_REJOIN, S_DEAD,
       S_AVG, S_LOG, S_EVENTS, S_JOIN, S_CHECK, S_DUP, S_JITTER, S_STOP, S_LEAVE, S_CUT, S_CHURN, S_DRIFT, S_RTIMEOUT, S_RDEADLINE,
       S_ADMIT, S_REPLACE };

/* "PEER<sep>VALUE" with PEER < n */
static int parse_pair(const char *opt, const char *arg, char sep, long *peer, const char **value)
{
    const char *at = strchr(arg, sep);
    if (!at)
        return cli_usage(CMD, "%s expects PEER%cVALUE, got '%s'", opt, sep, arg);
    char id[32];
    size_t len = (size_t)(at - arg);
    if (len == 0 || len >= sizeof id)
        return cli_usage(CMD, "%s expects PEER%cVALUE, got '%s'", opt, sep, arg);
    memcpy(id, arg, len);
    id[len] = 0;
    *value = at + 1;
    return cli_long(CMD, opt, id, 0, TOPO_MAX_PEERS - 1, peer);
}

/* PEER@ROUND, or PEER@ROUND:SECONDS when seconds is wanted. */
static int add_fault(sim_fault *list, int *n, const char *opt, const char *arg, int seconds)
{
    long peer, round;
    double s = 0;
    const char *v = NULL;
    if (*n == SIM_MAX_EVENTS)
        return cli_usage(CMD, "at most %d %s options", SIM_MAX_EVENTS, opt);
    int rc = parse_pair(opt, arg, '@', &peer, &v);
    char num[32];
    const char *colon = v ? strchr(v, ':') : NULL;
    if (rc == 0 && seconds) {
        if (!colon || (size_t)(colon - v) >= sizeof num)
            return cli_usage(CMD, "%s expects PEER@ROUND:SECONDS, got '%s'", opt, arg);
        memcpy(num, v, (size_t)(colon - v));
        num[colon - v] = 0;
        v = num;
        rc = cli_double(CMD, opt, colon + 1, 0, 1e6, &s);
    }
    if (rc == 0)
        rc = cli_long(CMD, opt, v, 0, 1L << 40, &round);
    if (rc == 0)
        list[(*n)++] = (sim_fault){.peer = (int)peer, .round = round, .seconds = s};
    return rc;
}

/* --partition P,Q,...@T:S: the side (peers P, Q, ...), from simulated
 * second T for S seconds. */
static int parse_cut(const char *arg, long peers, sim_cut *cut)
{
    const char *at = strchr(arg, '@'), *colon = at ? strchr(at, ':') : NULL;
    if (!at || !colon)
        return cli_usage(CMD, "--partition expects PEER,PEER,...@SECOND:SECONDS, got '%s'", arg);
    uint8_t *side = calloc((size_t)peers, 1);
    if (!side)
        return 1;
    cut->side = side;
    char num[32];
    for (const char *p = arg; p < at;) {
        const char *end = memchr(p, ',', (size_t)(at - p));
        if (!end)
            end = at;
        long q;
        if ((size_t)(end - p) >= sizeof num || end == p)
            return cli_usage(CMD, "--partition: bad peer list in '%s'", arg);
        memcpy(num, p, (size_t)(end - p));
        num[end - p] = 0;
        int rc = cli_long(CMD, "--partition", num, 0, peers - 1, &q);
        if (rc)
            return rc;
        side[q] = 1;
        p = end < at ? end + 1 : at;
    }
    if ((size_t)(colon - at - 1) >= sizeof num)
        return cli_usage(CMD, "--partition: bad time in '%s'", arg);
    memcpy(num, at + 1, (size_t)(colon - at - 1));
    num[colon - at - 1] = 0;
    int rc = cli_double(CMD, "--partition (start)", num, 0, 1e9, &cut->at);
    if (rc == 0)
        rc = cli_double(CMD, "--partition (seconds)", colon + 1, 0, 1e9, &cut->seconds);
    return rc;
}

static void free_cuts(sim_config *c)
{
    for (int k = 0; k < c->n_cut; k++)
        free((void *)c->cut[k].side);
    c->n_cut = 0;
}

static void put_summary(json_obj *j, const sim_config *c, const char *topology, const sim_result *r)
{
    json_str(j, "command", "sim");
    json_str(j, "model", c->peer.train.model);
    json_str(j, "topology", topology);
    json_str(j, "codec", c->peer.codec ? c->peer.codec->text : "exact");
    json_num(j, "step", c->peer.codec ? (c->peer.step > 0 ? c->peer.step : gsp_default_step(c->peer.codec, r->parameters)) : 1.0);
    json_num(j, "codec_warmup", c->peer.codec_warmup);
    json_int(j, "local_steps_per_round", c->peer.local_steps);
    json_str(j, "outer", c->peer.outer ? c->peer.outer->text : "none");
    json_num(j, "gather", c->peer.gather ? c->peer.gather_decay : -1.0);
    json_str(j, "optimizer", nn_opt_kind_name(c->peer.train.optimizer));
    json_num(j, "lr", c->peer.train.lr);
    json_int(j, "peers", c->peer.n_peers);
    json_int(j, "parameters", (long long)r->parameters);
    json_int(j, "epochs", c->peer.train.epochs);
    json_int(j, "batch", c->peer.train.batch);
    json_int(j, "seed", (long long)c->peer.train.seed);
    json_int(j, "tau", c->peer.tau);
    json_num(j, "test_accuracy", r->test_accuracy);
    json_num(j, "test_loss", r->test_loss);
    json_num(j, "test_accuracy_min", r->test_accuracy_min);
    json_num(j, "test_accuracy_mean", r->test_accuracy_mean);
    json_num(j, "test_loss_max", r->test_loss_max);
    json_num(j, "test_loss_mean", r->test_loss_mean);
    if (r->context) {
        json_int(j, "context", r->context);
        json_num(j, "test_bits_per_byte", nn_bits_per_byte(r->test_loss));
        json_num(j, "test_bits_per_byte_max", nn_bits_per_byte(r->test_loss_max));
    }
    json_num(j, "consensus_distance", r->consensus_distance);
    json_num(j, "train_loss", r->train_loss);
    json_int(j, "bytes_sent", (long long)r->bytes_sent);
    json_int(j, "messages_sent", (long long)r->messages_sent);
    json_int(j, "messages_lost", (long long)r->messages_lost);
    json_int(j, "messages_cut", (long long)r->messages_cut);
    json_int(j, "messages_after_end", (long long)r->messages_after_end);
    json_int(j, "partitions", r->cuts);
    json_int(j, "messages_duplicated", (long long)r->messages_duplicated);
    json_int(j, "syncs", (long long)r->syncs);
    json_num(j, "mean_staleness", r->mean_staleness);
    json_num(j, "mass_error_x", r->mass_error_x);
    json_num(j, "mass_error_w", r->mass_error_w);
    json_int(j, "rounds", r->rounds);
    json_int(j, "local_steps", r->local_steps);
    json_int(j, "late_marks", r->late_marks);
    json_int(j, "catch_ups", r->catch_ups);
    json_int(j, "refreshes", r->refreshes);
    json_int(j, "rounds_skipped", r->rounds_skipped);
    json_int(j, "neighbours_lost", r->neighbours_lost);
    json_int(j, "brakes", r->brakes);
    json_int(j, "isolated_rounds", r->isolated_rounds);
    json_int(j, "crashes", r->crashes);
    json_int(j, "resumes", r->resumes);
    json_int(j, "stops", r->stops);
    json_int(j, "leaves", r->leaves);
    json_int(j, "admits", r->admits);
    json_int(j, "slots_vacant", r->slots_vacant);
    json_int(j, "frames_refused", r->frames_refused);
    json_int(j, "busy_kept", r->busy_kept);
    json_int(j, "peers_live", r->peers_live);
    json_num(j, "weight_min", r->weight_min);
    json_num(j, "weight_max", r->weight_max);
    json_num(j, "weight_total", r->weight_total);
    json_num(j, "weight_in_flight", r->weight_in_flight);
    json_num(j, "simulated_seconds", r->simulated_seconds);
    json_num(j, "step_seconds", r->step_seconds);
    json_num(j, "wall_seconds", r->wall_seconds);
    json_num(j, "wall_seconds_per_round", r->rounds ? r->wall_seconds / r->rounds : 0);
    json_num(j, "cpu_step_seconds", r->cpu_step_seconds);
    json_num(j, "cpu_gossip_seconds", r->cpu_gossip_seconds);
    json_int(j, "memory_peers", c->peer.n_peers); /* the memory_* keys are of all peers together: divide by it */
    mem_json(j, &r->memory);
}

static int write_summary(const char *path, const sim_config *c, const char *topology, const sim_result *r)
{
    json_obj j;
    int rc = json_open(&j, path);
    if (rc < 0)
        return rc;
    put_summary(&j, c, topology, r);
    return json_close(&j);
}

/* The average model (sum x / sum w) to --save-model, the summary in its metadata. */
static int save_model(const sim_config *c, const char *topology, const nn_dataset *train, const sim_result *r)
{
    nn_model shape = {0};
    char err[700];
    if (train_opts_model(&c->peer.train, train, 1, &shape, err, sizeof err) < 0) {
        fprintf(stderr, "%s: cannot save the model: %s\n", CMD, err);
        return 1;
    }
    json_obj j;
    json_open(&j, "-");
    put_summary(&j, c, topology, r);
    char *text = json_close_text(&j);
    int status = train_cli_save_model(&c->peer.train, &shape, r->average_model, text, CMD);
    free(text);
    nn_model_free(&shape);
    return status;
}

/* FILE if it exists, else a generator name for n peers. */
static int load_topology(topo *t, const char *spec, int n)
{
    parse_error e = {0};
    int rc;
    if (access(spec, F_OK) == 0 || strchr(spec, '/') || strstr(spec, ".topo"))
        rc = topo_load(t, spec, &e);
    else
        rc = topo_generate(t, spec, n, NULL, &e);
    if (rc < 0) {
        char err[600];
        fprintf(stderr, "%s: %s\n", CMD, parse_error_text(&e, err, sizeof err));
        return rc == -EINVAL && !e.file[0] ? CLI_USAGE : 1;
    }
    if (t->n_peers != n) {
        fprintf(stderr, "%s: %s is for %d peers, --peers is %d\n", CMD, spec, t->n_peers, n);
        return CLI_USAGE;
    }
    return 0;
}

/* Everything `sgp sim` holds from its command line to its exit. */
typedef struct sim_cmd {
    sim_config c;
    gossip_opts go;
    int help; /* --help was printed: nothing to run */
    const char *topology, *log_path, *events_path;
    long peers;
    double mbit;
    struct {
        long peer;
        double factor;
    } slow[SIM_MAX_EVENTS];
    int n_slow;
    const char *cut_text[SIM_MAX_CUTS];
    int n_cut;
    double *factors; /* c.slow, from --slow */
    topo t;
    nn_dataset train, test;
    sim_result r;
    FILE *log;
} sim_cmd;

/* --slow PEER:FACTOR */
static int add_slow(sim_cmd *s, const char *arg)
{
    if (s->n_slow == SIM_MAX_EVENTS)
        return cli_usage(CMD, "at most %d --slow options", SIM_MAX_EVENTS);
    const char *v = NULL;
    int rc = parse_pair("--slow", arg, ':', &s->slow[s->n_slow].peer, &v);
    if (rc == 0)
        rc = cli_double(CMD, "--slow", v, 1e-3, 1e6, &s->slow[s->n_slow++].factor);
    return rc;
}

/* --churn FRACTION[:SECONDS] */
static int parse_churn(sim_config *c, const char *arg)
{
    char f[32];
    const char *colon = strchr(arg, ':');
    size_t len = colon ? (size_t)(colon - arg) : strlen(arg);
    if (len == 0 || len >= sizeof f)
        return cli_usage(CMD, "--churn expects FRACTION[:SECONDS], got '%s'", arg);
    memcpy(f, arg, len);
    f[len] = 0;
    int rc = cli_double(CMD, "--churn", f, 0, 0.9, &c->churn);
    if (rc == 0 && colon)
        rc = cli_double(CMD, "--churn", colon + 1, 1e-6, 1e6, &c->churn_down);
    return rc;
}

/* One option of the command line (a cli_option_fn). */
static int parse_option(void *ctx, int ch, const char *arg)
{
    sim_cmd *s = ctx;
    sim_config *c = &s->c;
    int rc;
    switch (ch) {
    case S_PEERS:
        return cli_long(CMD, "--peers", arg, 1, TOPO_MAX_PEERS, &s->peers);
    case S_TOPOLOGY:
        s->topology = arg;
        return 0;
    case S_COMPUTE:
        if (strcmp(arg, "measured") != 0)
            return cli_double(CMD, "--compute-time", arg, 0, 1e6, &c->compute_seconds);
        c->compute_seconds = SIM_COMPUTE_MEASURED;
        return 0;
    case S_LATENCY:
        return cli_double(CMD, "--latency", arg, 0, 1e6, &c->latency);
    case S_BANDWIDTH:
        return cli_double(CMD, "--bandwidth", arg, 0, 1e9, &s->mbit);
    case S_LOSS:
        return cli_double(CMD, "--loss", arg, 0, 0.99, &c->loss);
    case S_DUP:
        return cli_double(CMD, "--duplicate", arg, 0, 0.99, &c->duplicate);
    case S_JITTER:
        return cli_double(CMD, "--jitter", arg, 0, 1e6, &c->jitter);
    case S_SLOW:
        return add_slow(s, arg);
    case S_CRASH:
        return add_fault(c->crash, &c->n_crash, "--crash", arg, 0);
    case S_REJOIN:
        return add_fault(c->rejoin, &c->n_rejoin, "--rejoin", arg, 0);
    case S_JOIN:
        if ((rc = add_fault(c->rejoin, &c->n_rejoin, "--join", arg, 0)) == 0)
            c->rejoin[c->n_rejoin - 1].fresh = 1;
        return rc;
    case S_REPLACE: /* a kill -9 at ROUND, and a host without its state in the slot at once */
        if (c->n_rejoin == SIM_MAX_EVENTS)
            return cli_usage(CMD, "at most %d --rejoin, --join and --replace options", SIM_MAX_EVENTS);
        if ((rc = add_fault(c->crash, &c->n_crash, "--replace", arg, 0)) == 0)
            c->rejoin[c->n_rejoin++] = (sim_fault){.peer = c->crash[c->n_crash - 1].peer,
                                                   .round = c->crash[c->n_crash - 1].round + 1, .fresh = 1};
        return rc;
    case S_ADMIT:
        return add_fault(c->admit, &c->n_admit, "--admit", arg, 0);
    case S_CUT:
        if (s->n_cut == SIM_MAX_CUTS)
            return cli_usage(CMD, "at most %d --partition options", SIM_MAX_CUTS);
        s->cut_text[s->n_cut++] = arg;
        return 0;
    case S_STOP:
        return add_fault(c->stop, &c->n_stop, "--stop", arg, 1);
    case S_LEAVE:
        return add_fault(c->leave, &c->n_leave, "--leave", arg, 0);
    case S_CHURN:
        return parse_churn(c, arg);
    case S_DRIFT:
        return cli_double(CMD, "--speed-drift", arg, 0, 1e3, &c->speed_drift);
    case S_RTIMEOUT:
        return cli_double(CMD, "--round-timeout", arg, 1e-6, 1e6, &c->peer.round_timeout);
    case S_RDEADLINE:
        return cli_double(CMD, "--round-deadline", arg, 1e-6, 1e6, &c->peer.round_deadline);
    case S_DEAD:
        return cli_double(CMD, "--dead-timeout", arg, 0, 1e6, &c->peer.dead_timeout);
    case S_AVG:
        c->averaging_only = 1;
        return 0;
    case S_LOG:
        s->log_path = arg;
        return 0;
    case S_EVENTS:
        s->events_path = arg;
        return 0;
    case S_CHECK:
        c->check = 1;
        return 0;
    }
    rc = train_opts_parse(&c->peer.train, CMD, ch, arg);
    return rc == CLI_NOT_MINE ? gossip_opts_parse(&s->go, &c->peer, CMD, ch, arg) : rc;
}

/* The command line into s: 0 (s->help: the help was printed), or the exit
 * status of a usage error. */
static int parse(sim_cmd *s, int argc, char **argv)
{
    static const struct option long_opts[] = {
        TRAIN_OPTS_LONG,
        GOSSIP_OPTS_LONG,
        {"peers", required_argument, 0, S_PEERS},
        {"topology", required_argument, 0, S_TOPOLOGY},
        {"compute-time", required_argument, 0, S_COMPUTE},
        {"latency", required_argument, 0, S_LATENCY},
        {"bandwidth", required_argument, 0, S_BANDWIDTH},
        {"loss", required_argument, 0, S_LOSS},
        {"duplicate", required_argument, 0, S_DUP},
        {"jitter", required_argument, 0, S_JITTER},
        {"slow", required_argument, 0, S_SLOW},
        {"crash", required_argument, 0, S_CRASH},
        {"rejoin", required_argument, 0, S_REJOIN},
        {"join", required_argument, 0, S_JOIN},
        {"replace", required_argument, 0, S_REPLACE},
        {"admit", required_argument, 0, S_ADMIT},
        {"events", required_argument, 0, S_EVENTS},
        {"check", no_argument, 0, S_CHECK},
        {"dead-timeout", required_argument, 0, S_DEAD},
        {"stop", required_argument, 0, S_STOP},
        {"leave", required_argument, 0, S_LEAVE},
        {"partition", required_argument, 0, S_CUT},
        {"churn", required_argument, 0, S_CHURN},
        {"speed-drift", required_argument, 0, S_DRIFT},
        {"round-timeout", required_argument, 0, S_RTIMEOUT},
        {"round-deadline", required_argument, 0, S_RDEADLINE},
        {"averaging-only", no_argument, 0, S_AVG},
        {"log", required_argument, 0, S_LOG},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    sim_config_defaults(&s->c);
    gossip_opts_defaults(&s->go);
    s->topology = NULL; /* (exponential, or the recipe's) */
    s->peers = s->c.peer.n_peers;
    s->mbit = s->c.bandwidth * 8 / 1e6;
    return cli_parse(CMD, argc, argv, long_opts, help, parse_option, s, &s->help);
}

/* The faults against each other and --peers (sim_config_check; the
 * rounds of the run are known once the data is: sim_run checks again). */
static int check_faults(sim_config *c, long peers)
{
    char err[400];
    c->peer.n_peers = (int)peers;
    if (sim_config_check(c, 0, err, sizeof err) < 0)
        return cli_usage(CMD, "%s", err);
    return 0;
}

/* What needs the whole command line: the options against each other and
 * against --peers, the partitions and the slow peers' factors. 0, or the
 * exit status. */
static int check(sim_cmd *s)
{
    sim_config *c = &s->c;
    int rc = train_opts_check(&c->peer.train, CMD);
    if (rc)
        return rc;
    if (gossip_opts_check(&s->go, &c->peer, CMD))
        return CLI_USAGE;
    if (!s->topology)
        s->topology = s->go.recipe ? GOSSIP_RECIPE_LM_TOPOLOGY : "exponential";
    c->peer.n_peers = (int)s->peers;
    c->bandwidth = s->mbit * 1e6 / 8;
    for (int k = 0; k < s->n_slow; k++)
        if (s->slow[k].peer >= s->peers)
            return cli_usage(CMD, "--slow: peer %ld does not exist (--peers %ld)", s->slow[k].peer, s->peers);
    if ((rc = check_faults(c, s->peers)) != 0)
        return rc;
    for (int k = 0; k < s->n_cut; k++)
        if ((rc = parse_cut(s->cut_text[k], s->peers, &c->cut[c->n_cut++])) != 0)
            return rc;
    if (s->n_slow && !(s->factors = calloc((size_t)s->peers, sizeof(double))))
        return 1;
    for (int i = 0; s->factors && i < s->peers; i++)
        s->factors[i] = 1.0;
    for (int k = 0; k < s->n_slow; k++)
        s->factors[s->slow[k].peer] = s->slow[k].factor;
    c->slow = s->factors;
    return 0;
}

/* The topology, the data and the output files, then the simulation: 0, or
 * the exit status. */
static int run(sim_cmd *s)
{
    sim_config *c = &s->c;
    char err[512];
    nn_blas_set_threads((int)c->peer.train.threads);
    int status = load_topology(&s->t, s->topology, (int)s->peers);
    if (status)
        return status;
    if (nn_data_load(c->peer.train.data, (int)c->peer.train.context, &s->train, &s->test, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        return 1;
    }
    if (s->log_path) {
        if (!(s->log = fopen(s->log_path, "w"))) {
            fprintf(stderr, "%s: cannot write %s: %s\n", CMD, s->log_path, strerror(errno));
            return 1;
        }
        fputs("round,sim_seconds,train_loss,consensus_distance,bytes_sent,messages_lost\n", s->log);
    }
    if (s->events_path && !(c->events = fopen(s->events_path, "w"))) {
        fprintf(stderr, "%s: cannot write %s: %s\n", CMD, s->events_path, strerror(errno));
        return 1;
    }
    c->peer.topology = &s->t;
    c->log = s->log;
    c->progress = stdout;
    c->progress_bar = c->peer.train.progress < 0 ? isatty(1) : c->peer.train.progress;
    printf("sgp sim: %d peers on %s (%s), %s, codec %s, per-peer batch %ld, %ld epochs, tau %d, seed %llu\n",
           c->peer.n_peers, s->topology, s->t.kind, c->peer.train.model, c->peer.codec ? c->peer.codec->text : "exact",
           c->peer.train.batch / s->peers > 0 ? c->peer.train.batch / s->peers : 1, c->peer.train.epochs, c->peer.tau,
           (unsigned long long)c->peer.train.seed);
    fflush(stdout);
    int rc = sim_run(c, &s->train, &s->test, &s->r, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        return rc == -EINVAL ? CLI_USAGE : 1;
    }
    return 0;
}

static void print_result(const sim_cmd *s)
{
    const sim_result *r = &s->r;
    if (s->test.text)
        printf("validation loss %.4f (%.4f bits/byte, next byte %.2f%%) average model, peers worst %.4f (%.4f bits/byte) "
               "mean %.4f; consensus distance %.2e\n",
               r->test_loss, nn_bits_per_byte(r->test_loss), 100 * r->test_accuracy, r->test_loss_max,
               nn_bits_per_byte(r->test_loss_max), r->test_loss_mean, r->consensus_distance);
    else
        printf("test accuracy %.2f%% (average model), peers min %.2f%% mean %.2f%%; consensus distance %.2e\n",
               100 * r->test_accuracy, 100 * r->test_accuracy_min, 100 * r->test_accuracy_mean, r->consensus_distance);
    printf("%llu rounds, %.1f MB sent in %llu messages (%llu lost, %llu on connections a partition closed, %llu after "
           "their receiver had finished), %.2f simulated s (%.3g ms a step), %.1f wall s\n",
           (unsigned long long)r->rounds, r->bytes_sent / 1e6, (unsigned long long)r->messages_sent,
           (unsigned long long)r->messages_lost, (unsigned long long)r->messages_cut,
           (unsigned long long)r->messages_after_end, r->simulated_seconds, 1e3 * r->step_seconds, r->wall_seconds);
    printf("faults: %ld local steps, %ld late marks, %ld catch-ups (%ld rounds skipped, %ld with a neighbour's model), %ld neighbours lost, "
           "%ld brakes; %ld crashes, %ld resumes, %ld stops, %ld leaves, %ld admitted, %ld partitions; %d peers live, "
           "%d slots vacant, weight %.3g..%.3g (total %.4g held, %.3g in flight at the end)\n",
           r->local_steps, r->late_marks, r->catch_ups, r->rounds_skipped, r->refreshes, r->neighbours_lost, r->brakes,
           r->crashes, r->resumes, r->stops, r->leaves, r->admits, r->cuts, r->peers_live, r->slots_vacant,
           r->weight_min, r->weight_max, r->weight_total, r->weight_in_flight);
    printf("cpu: local steps %.2f s, gossip %.2f s (all peers; per peer-round %.3g ms and %.3g ms)\n",
           r->cpu_step_seconds, r->cpu_gossip_seconds, r->local_steps ? 1e3 * r->cpu_step_seconds / r->local_steps : 0.0,
           r->local_steps ? 1e3 * r->cpu_gossip_seconds / r->local_steps : 0.0);
    mem_print(stdout, &r->memory, s->c.peer.n_peers);
}

/* The result on stdout, in the summary and the saved model: 0 or 1. */
static int report(const sim_cmd *s)
{
    const sim_config *c = &s->c;
    print_result(s);
    int status = 0, rc;
    if (c->peer.train.summary && (rc = write_summary(c->peer.train.summary, c, s->topology, &s->r)) < 0) {
        fprintf(stderr, "%s: cannot write summary %s: %s\n", CMD, c->peer.train.summary, strerror(-rc));
        status = 1;
    }
    if (c->peer.train.save_model)
        status |= save_model(c, s->topology, &s->train, &s->r);
    return status;
}

/* The round log and the events are closed; a write that failed at the
 * close fails a run that had not failed otherwise. */
static int close_outputs(sim_cmd *s, int status)
{
    if (s->log && fclose(s->log) != 0 && status == 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", CMD, s->log_path, strerror(errno));
        status = 1;
    }
    if (s->c.events && fclose(s->c.events) != 0 && status == 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", CMD, s->events_path, strerror(errno));
        status = 1;
    }
    s->log = s->c.events = NULL;
    return status;
}

static void release(sim_cmd *s)
{
    free_cuts(&s->c);
    sim_result_free(&s->r);
    nn_dataset_free(&s->train);
    nn_dataset_free(&s->test);
    topo_free(&s->t);
    free(s->factors);
}

int cmd_sim(int argc, char **argv)
{
    sim_cmd s = {0};
    int status = parse(&s, argc, argv);
    if (status == 0 && !s.help && (status = check(&s)) == 0 && (status = run(&s)) == 0)
        status = report(&s);
    status = close_outputs(&s, status);
    release(&s);
    return status;
}
