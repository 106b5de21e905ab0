/* sgp launch: the localhost harness. Makes a run directory with keys, a
 * cluster file on free 127.0.0.1 ports and the topology, starts one `sgp peer`
 * process per peer, shows one live progress line, and writes a combined
 * summary with the fields of `sgp sim`. Ctrl-C stops every peer cleanly. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nn/nn_model.h"
#include "peer/core/clock.h"
#include "peer/cmd/cli.h"
#include "peer/net/cluster.h"
#include "peer/cmd/commands.h"
#include "peer/store/json.h"
#include "peer/launch/launch_faults.h"
#include "peer/sec/sec.h"
#include "topologies/topo.h"

static const char *CMD = "sgp launch";
#define LAUNCH_DEFAULT_CODEC "stc:0.04" /* 98x fewer bytes than none at the same accuracy (README) */
static volatile sig_atomic_t interrupted;

static void help(void)
{
    fputs("usage: sgp launch --peers N [--topology FILE|KIND] [--run-dir DIR] [OPTIONS]\n\n"
          "Run N peers as separate processes on this machine (127.0.0.1), with fresh\n"
          "keys and a cluster file in the run directory, one live progress line, and\n"
          "a combined summary. Every other option is passed to each `sgp peer`\n"
          "(training options, --codec, --step, --tau, --shard, ...; see sgp peer --help);\n"
          "--codec defaults to " LAUNCH_DEFAULT_CODEC " here.\n\n"
          "  --peers N             number of peers [4]\n"
          "  --topology FILE|KIND  a .topo file or a generator name [exponential]\n"
          "  --run-dir DIR         where keys, cluster file, logs and models go [sgp-run-PID]\n"
          "  --summary FILE        combined JSON summary (the fields of sgp sim)\n"
          "  --hosts FILE          run the peers on LAN hosts over ssh instead: one host a line,\n"
          "                        'ADDRESS [slots=N] [ssh=DEST] [ssh-port=P]' (README has an example)\n"
          "  --base-port P         with --hosts: peers on a host listen on P, P+1, ... [17000]\n"
          "  --remote-sgp PATH     with --hosts: sgp on the hosts [this executable's path]\n"
          "  --remote-dir DIR      with --hosts: the run directory on the hosts [the local one's path]\n\n"
          "Fault injection (local runs; every peer checkpoints to DIR/peerI.ckpt):\n"
          "  --kill PEER@ROUND     kill -9 the peer once its log reaches ROUND\n"
          "  --restart PEER@ROUND[:S]  kill -9 it, then start it again with --resume after S seconds [1]\n"
          "  --stop PEER@ROUND:S   SIGSTOP it for S seconds, then SIGCONT\n"
          "  --slow PEER:FACTOR    it runs its rounds at 1/FACTOR of its speed (sgp peer --slow)\n"
          "  (each may be repeated; the summary counts the faults injected)\n\n"
          "  -h, --help            this text\n",
          stdout);
}

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* n distinct free ports on 127.0.0.1: every socket stays bound until all are
 * chosen (the kernel would hand a just-closed port out again), then all close
 * and the peers bind them a moment later. */
static int free_ports(int n, int *ports)
{
    int fds[64], rc = 0;
    for (int i = 0; i < n; i++) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&a, sizeof a) < 0 ||
            getsockname(fds[i], (struct sockaddr *)&a, &len) < 0)
            rc = -errno;
        ports[i] = ntohs(a.sin_port);
    }
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return rc;
}

/* Where each peer runs: --hosts places peers on LAN hosts (ssh), else all
 * on 127.0.0.1 with free ports. */
typedef struct placement {
    char addr[64];      /* the address peers connect to (cluster file) */
    char ssh[128];      /* ssh destination; "" = this machine */
    int ssh_port;       /* 0: ssh's default */
    int port;
} placement;

/* Keys, topology and cluster file in dir. */
static int prepare(const char *dir, int n, const char *topology, placement *where)
{
    char path[4096], pub[4096], err[512];
    topo t = {0};
    topo_error te = {0};
    int rc = access(topology, F_OK) == 0 || strchr(topology, '/') ? topo_load(&t, topology, &te)
                                                                  : topo_generate(&t, topology, n, NULL, &te);
    if (rc < 0) {
        fprintf(stderr, "%s: %s%s%s\n", CMD, te.file[0] ? te.file : "", te.file[0] ? ": " : "", te.msg);
        return CLI_USAGE;
    }
    if (t.n_peers != n) {
        fprintf(stderr, "%s: %s is for %d peers, --peers is %d\n", CMD, topology, t.n_peers, n);
        topo_free(&t);
        return CLI_USAGE;
    }
    snprintf(path, sizeof path, "%.1024s/topology.topo", dir);
    FILE *f = fopen(path, "w");
    rc = f ? topo_write(&t, f, "written by sgp launch") : -errno;
    if (f && fclose(f) != 0)
        rc = -EIO;
    topo_free(&t);
    cluster c;
    memset(&c, 0, sizeof c);
    int ports[64];
    if (rc == 0 && !where[0].ssh[0])
        rc = free_ports(n, ports);
    else
        for (int i = 0; i < n; i++)
            ports[i] = where[i].port;
    if (rc == 0)
        rc = cluster_init(&c, "sgp-launch", "topology.topo");
    for (int i = 0; rc == 0 && i < n; i++) {
        sec_keypair kp = {0};
        int port = ports[i];
        snprintf(path, sizeof path, "%.1024s/%d.key", dir, i);
        snprintf(pub, sizeof pub, "%.1024s/%d.pub", dir, i);
        rc = port < 0 ? -EADDRNOTAVAIL : sec_keypair_generate(&kp);
        if (rc == 0 && (rc = sec_keypair_save(&kp, path, pub, 1, err, sizeof err)) < 0)
            fprintf(stderr, "%s: %s\n", CMD, err);
        where[i].port = port;
        if (rc == 0 && (rc = cluster_add_peer(&c, where[i].addr, (unsigned)port, kp.pk)) > 0)
            rc = 0; /* (it returns the new peer's id) */
        sec_keypair_free(&kp);
    }
    snprintf(path, sizeof path, "%.1024s/cluster.conf", dir);
    if (rc == 0 && !(f = fopen(path, "w")))
        rc = -errno;
    else if (rc == 0) {
        rc = cluster_write(&c, f, "written by sgp launch");
        if (fclose(f) != 0)
            rc = -EIO;
    }
    cluster_free(&c);
    if (rc < 0)
        fprintf(stderr, "%s: cannot prepare %s: %s\n", CMD, dir, strerror(-rc));
    return rc < 0 ? 1 : 0;
}

/* From a peer's JSON-lines log: round, bytes out and loss of its last line,
 * and the last test accuracy it logged (unchanged if none yet). */
static void peer_status(const char *dir, int i, long *round, double *mb, double *loss, double *acc)
{
    char path[4096], line[512] = "", tail[512] = "";
    const long tail_bytes = 8192; /* past the ledger and event lines at the end */
    snprintf(path, sizeof path, "%.1024s/peer%d.jsonl", dir, i);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fseek(f, -tail_bytes, SEEK_END) != 0)
        rewind(f);
    while (fgets(line, sizeof line, f))
        if (strchr(line, '\n') && strstr(line, "{\"round\"") == line) {
            strcpy(tail, line);
            const char *a = strstr(line, "\"test_accuracy\": ");
            if (a)
                *acc = strtod(a + 17, NULL);
        }
    fclose(f);
    const char *r = strstr(tail, "\"round\": "), *b = strstr(tail, "\"bytes_out\": "), *l = strstr(tail, "\"loss\": ");
    if (r)
        *round = strtol(r + 9, NULL, 10);
    if (b)
        *mb = strtod(b + 13, NULL) / 1e6;
    if (l)
        *loss = strtod(l + 8, NULL);
}

static double summary_number(const char *path, const char *key)
{
    char text[8192], pat[64];
    FILE *f = fopen(path, "r");
    if (!f)
        return NAN;
    text[fread(text, 1, sizeof text - 1, f)] = 0;
    fclose(f);
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(text, pat);
    return p ? strtod(p + strlen(pat), NULL) : NAN;
}

/* The value of option `name` in the forwarded arguments, or def. */
static const char *forwarded(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 0; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return argv[i + 1];
    return def;
}

/* Average of the peers' models, evaluated, plus their spread. Peers a fault
 * killed for good (absent[i]) have no model and are left out. */
static int combine(const char *dir, int n, int argc, char **argv, const char *summary, double wall,
                   const uint8_t *absent, int faults)
{
    nn_dataset train = {0}, test = {0};
    nn_model m = {0};
    char err[512], path[4096];
    const char *data = forwarded(argc, argv, "--data", NULL), *spec = forwarded(argc, argv, "--model", "mlp:256");
    if (nn_data_load(data, &train, &test, err, sizeof err) < 0 ||
        nn_model_init(&m, spec, train.c, train.h, train.w, train.n_classes, 256, 1, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        nn_dataset_free(&train), nn_dataset_free(&test);
        return 1;
    }
    const size_t dim = m.n_params;
    float *models = malloc((size_t)n * dim * sizeof(float)), *avg = calloc(dim, sizeof(float));
    double acc_min = 1, acc_sum = 0, bytes = 0, rounds = 1e300, wsum = 0, w[64];
    int status = models && avg ? 0 : 1, k = 0; /* k: peers with a model */
    for (int i = 0; status == 0 && i < n; i++) {
        if (absent[i])
            continue;
        snprintf(path, sizeof path, "%.1024s/peer%d.model", dir, i);
        FILE *f = fopen(path, "rb");
        if (!f || fread(models + (size_t)k * dim, sizeof(float), dim, f) != dim) {
            fprintf(stderr, "%s: %s: missing or short\n", CMD, path);
            status = 1;
        }
        if (f)
            fclose(f);
        snprintf(path, sizeof path, "%.1024s/peer%d.json", dir, i);
        double a = summary_number(path, "test_accuracy");
        acc_min = fmin(acc_min, a), acc_sum += a;
        bytes += summary_number(path, "bytes_sent");
        rounds = fmin(rounds, summary_number(path, "rounds"));
        w[k] = summary_number(path, "weight");
        if (!(w[k] > 0))
            w[k] = 1.0;
        wsum += w[k++];
    }
    if (k == 0)
        status = 1;
    double cd = 0, norm = 0;
    float loss = 0, acc = 0;
    if (status == 0) {
        /* sum x / sum w, as sgp sim reports it: x_i = w_i z_i. */
        for (size_t d = 0; d < dim; d++) {
            double a = 0;
            for (int i = 0; i < k; i++)
                a += w[i] * models[(size_t)i * dim + d];
            avg[d] = (float)(a / wsum);
        }
        for (size_t d = 0; d < dim; d++)
            norm += (double)avg[d] * avg[d];
        for (int i = 0; i < k; i++)
            for (size_t d = 0; d < dim; d++) {
                double e = (double)models[(size_t)i * dim + d] - avg[d];
                cd += e * e / k;
            }
        cd = norm > 0 ? cd / norm : 0;
        nn_model_evaluate(&m, avg, &test, &loss, &acc);
        printf("test accuracy %.2f%% (average model of %d peers), peers min %.2f%% mean %.2f%%; consensus distance "
               "%.2e\n%.0f rounds, %.1f MB sent, %.1f wall s, %d faults injected; run directory %s\n",
               100 * acc, k, 100 * acc_min, 100 * acc_sum / k, cd, rounds, bytes / 1e6, wall, faults, dir);
    }
    json_obj j;
    if (status == 0 && summary && json_open(&j, summary) == 0) {
        json_str(&j, "command", "launch");
        json_str(&j, "run_dir", dir);
        json_int(&j, "peers", n);
        json_int(&j, "peers_finished", k);
        json_int(&j, "faults_injected", faults);
        json_str(&j, "model", spec);
        json_int(&j, "parameters", (long long)dim);
        json_num(&j, "test_accuracy", acc);
        json_num(&j, "test_loss", loss);
        json_num(&j, "test_accuracy_min", acc_min);
        json_num(&j, "test_accuracy_mean", acc_sum / k);
        json_num(&j, "consensus_distance", cd);
        json_num(&j, "bytes_sent", bytes);
        json_num(&j, "rounds", rounds);
        json_num(&j, "wall_seconds", wall);
        if (json_close(&j) < 0)
            status = 1;
    }
    free(models), free(avg);
    nn_model_free(&m);
    nn_dataset_free(&train), nn_dataset_free(&test);
    return status;
}

/* Hosts file: one host a line, "ADDRESS [slots=N] [ssh=DEST] [ssh-port=P]",
 * # comments. Peers fill the hosts in order, slots (default 1) at a time; on
 * a host they listen on base_port, base_port + 1, ... Returns 0 or prints
 * "FILE:LINE: message" and returns CLI_USAGE. */
static int hosts_place(const char *path, int n, long base_port, placement *where)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: %s: %s\n", CMD, path, strerror(errno));
        return 1;
    }
    char line[512];
    int lineno = 0, placed = 0;
    while (placed < n && fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "#\r\n")] = 0;
        char *save = NULL, *tok = strtok_r(line, " \t", &save);
        if (!tok)
            continue;
        placement h = {0};
        long slots = 1;
        if (strlen(tok) >= sizeof h.addr) {
            fprintf(stderr, "%s: %s:%d: address too long\n", CMD, path, lineno);
            fclose(f);
            return CLI_USAGE;
        }
        strcpy(h.addr, tok);
        snprintf(h.ssh, sizeof h.ssh, "%s", tok);
        while ((tok = strtok_r(NULL, " \t", &save))) {
            char *end;
            if (!strncmp(tok, "slots=", 6) && (slots = strtol(tok + 6, &end, 10)) > 0 && slots <= 64 && !*end)
                continue;
            if (!strncmp(tok, "ssh-port=", 9) && (h.ssh_port = (int)strtol(tok + 9, &end, 10)) > 0 &&
                h.ssh_port < 65536 && !*end)
                continue;
            if (!strncmp(tok, "ssh=", 4) && tok[4] && strlen(tok + 4) < sizeof h.ssh) {
                strcpy(h.ssh, tok + 4);
                continue;
            }
            fprintf(stderr, "%s: %s:%d: expected slots=N, ssh=DEST or ssh-port=P, got '%s'\n", CMD, path, lineno,
                    tok);
            fclose(f);
            return CLI_USAGE;
        }
        for (long k = 0; k < slots && placed < n; k++) {
            where[placed] = h;
            where[placed++].port = (int)(base_port + k);
        }
    }
    fclose(f);
    if (placed < n) {
        fprintf(stderr, "%s: %s: %d slots for %d peers\n", CMD, path, placed, n);
        return CLI_USAGE;
    }
    return 0;
}

/* Runs argv to completion; 0 if it exited 0. */
static int run_wait(char *const argv[])
{
    pid_t p = fork();
    if (p == 0) {
        execvp(argv[0], argv);
        _exit(127);
    }
    int st;
    return p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* ssh/scp port options for a placement. */
static void ssh_port_args(const placement *w, char **argv, int *a, const char *flag, char *buf, size_t cap)
{
    if (w->ssh_port) {
        snprintf(buf, cap, "%d", w->ssh_port);
        argv[(*a)++] = (char *)flag;
        argv[(*a)++] = buf;
    }
}

/* Copy the run directory's shared files and each remote peer's own key to
 * its host (a peer's secret key goes to its host only). */
static int remote_copy(const char *dir, const char *rdir, int n, const placement *where)
{
    for (int i = 0; i < n; i++) {
        char dest[1200], pb[16], mk[1200], key[1100], pub[1100], cl[1100], tp[1100];
        snprintf(mk, sizeof mk, "mkdir -p -m 700 '%.1024s'", rdir);
        char *a1[12] = {"ssh", "-o", "BatchMode=yes"};
        int a = 3;
        ssh_port_args(&where[i], a1, &a, "-p", pb, sizeof pb);
        a1[a++] = (char *)where[i].ssh, a1[a++] = mk, a1[a] = NULL;
        snprintf(key, sizeof key, "%.1024s/%d.key", dir, i);
        snprintf(pub, sizeof pub, "%.1024s/%d.pub", dir, i);
        snprintf(cl, sizeof cl, "%.1024s/cluster.conf", dir);
        snprintf(tp, sizeof tp, "%.1024s/topology.topo", dir);
        snprintf(dest, sizeof dest, "%s:%.1024s/", where[i].ssh, rdir);
        char *a2[16] = {"scp", "-q", "-p", "-o", "BatchMode=yes"};
        int b = 5;
        ssh_port_args(&where[i], a2, &b, "-P", pb, sizeof pb);
        a2[b++] = key, a2[b++] = pub, a2[b++] = cl, a2[b++] = tp, a2[b++] = dest, a2[b] = NULL;
        if (run_wait(a1) < 0 || run_wait(a2) < 0) {
            fprintf(stderr, "%s: cannot copy the run directory to %s\n", CMD, where[i].ssh);
            return -1;
        }
    }
    return 0;
}

/* Bring each peer's summary and model back for the combined summary. */
static int remote_fetch(const char *dir, const char *rdir, int n, const placement *where)
{
    for (int i = 0; i < n; i++) {
        char src1[1200], src2[1200], pb[16], local[1100];
        snprintf(src1, sizeof src1, "%s:%.1024s/peer%d.json", where[i].ssh, rdir, i);
        snprintf(src2, sizeof src2, "%s:%.1024s/peer%d.model", where[i].ssh, rdir, i);
        snprintf(local, sizeof local, "%.1024s/", dir);
        char *a[16] = {"scp", "-q", "-o", "BatchMode=yes"};
        int k = 4;
        ssh_port_args(&where[i], a, &k, "-P", pb, sizeof pb);
        a[k++] = src1, a[k++] = src2, a[k++] = local, a[k] = NULL;
        if (run_wait(a) < 0) {
            fprintf(stderr, "%s: cannot fetch peer %d's results from %s\n", CMD, i, where[i].ssh);
            return -1;
        }
    }
    return 0;
}

/* One shell word for the remote command line. */
static void shell_quote(char *out, size_t cap, const char *s)
{
    size_t o = 0;
    if (o + 1 < cap)
        out[o++] = '\'';
    for (; *s && o + 5 < cap; s++) {
        if (*s == '\'') {
            memcpy(out + o, "'\\''", 4);
            o += 4;
        } else
            out[o++] = *s;
    }
    if (o + 1 < cap)
        out[o++] = '\'';
    out[o] = 0;
}

/* What starting (and restarting) a peer needs. */
typedef struct launch {
    const char *self, *run_dir, *remote_dir, *remote_sgp, *hosts;
    char **fwd;
    int nfwd;
    placement *where;
    fault_plan faults;
    pid_t pids[64];
    uint8_t absent[64]; /* killed by a fault for good: no model at the end */
} launch;

/* Fork `sgp peer` for peer i (over ssh with --hosts); its output goes to
 * RUN/peerI.out (appended to on a restart). */
static pid_t start_peer(launch *L, int i, int resume)
{
    char cl[4200], id[16], model[4200], log[4200], sum[4200], out[4200], ckpt[4200], slow[32];
    const char *pdir = L->hosts ? L->remote_dir : L->run_dir; /* where the peer's own files are */
    snprintf(cl, sizeof cl, "%.1024s/cluster.conf", pdir);
    snprintf(id, sizeof id, "%d", i);
    snprintf(model, sizeof model, "%.1024s/peer%d.model", pdir, i);
    snprintf(log, sizeof log, "%.1024s/peer%d.jsonl", pdir, i);
    snprintf(sum, sizeof sum, "%.1024s/peer%d.json", pdir, i);
    snprintf(ckpt, sizeof ckpt, "%.1024s/peer%d.ckpt", pdir, i);
    snprintf(out, sizeof out, "%.1024s/peer%d.out", L->run_dir, i);
    char *args[170] = {(char *)L->self, "peer", "--cluster", cl, "--id", id, "--save-model", model, "--log", log,
                       "--summary", sum, "--no-progress", "--checkpoint", ckpt};
    int a = 15;
    if (L->faults.slow[i] > 0) {
        snprintf(slow, sizeof slow, "%g", L->faults.slow[i]);
        args[a++] = "--slow", args[a++] = slow;
    }
    if (resume)
        args[a++] = "--resume";
    for (int k = 0; k < L->nfwd && a < 168; k++)
        args[a++] = L->fwd[k];
    args[a] = NULL;
    char remote[8192], pb[16];
    if (L->hosts) {
        /* ssh DEST 'exec SGP peer ...': the same arguments, quoted for the remote shell. */
        size_t o = (size_t)snprintf(remote, sizeof remote, "exec");
        char q[1200];
        for (int k = 0; k < a && o < sizeof remote; k++) {
            shell_quote(q, sizeof q, k == 0 ? (L->remote_sgp ? L->remote_sgp : L->self) : args[k]);
            o += (size_t)snprintf(remote + o, sizeof remote - o, " %s", q);
        }
        char *sa[12] = {"ssh", "-o", "BatchMode=yes"};
        int b = 3;
        ssh_port_args(&L->where[i], sa, &b, "-p", pb, sizeof pb);
        sa[b++] = L->where[i].ssh, sa[b++] = remote, sa[b] = NULL;
        memcpy(args, sa, sizeof sa);
    }
    pid_t pid = fork();
    if (pid == 0) {
        FILE *o = freopen(out, resume ? "a" : "w", stdout);
        if (o)
            dup2(fileno(stdout), 2);
        signal(SIGINT, SIG_IGN); /* the launcher forwards Ctrl-C as SIGTERM */
        execvp(args[0], args);
        _exit(127);
    }
    return pid;
}

static void restart_peer(void *ctx, int i)
{
    launch *L = ctx;
    L->pids[i] = start_peer(L, i, 1);
    L->absent[i] = 0;
}

int cmd_launch(int argc, char **argv)
{
    static launch L;
    memset(&L, 0, sizeof L);
    long peers = 4, base_port = 17000;
    const char *topology = "exponential", *run_dir = NULL, *summary = NULL, *hosts = NULL, *remote_sgp = NULL,
               *remote_dir = NULL;
    char **fwd = calloc((size_t)argc + 3, sizeof *fwd); /* + a default --codec */
    int nfwd = 0;
    if (!fwd)
        return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int takes = !strcmp(a, "--peers") || !strcmp(a, "--topology") || !strcmp(a, "--run-dir") ||
                    !strcmp(a, "--summary") || !strcmp(a, "--hosts") || !strcmp(a, "--base-port") ||
                    !strcmp(a, "--remote-sgp") || !strcmp(a, "--remote-dir") || !strcmp(a, "--kill") ||
                    !strcmp(a, "--restart") || !strcmp(a, "--stop") || !strcmp(a, "--slow");
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            free(fwd);
            return 0;
        }
        if (takes && i + 1 >= argc) {
            free(fwd);
            return cli_usage(CMD, "option '%s' needs a value", a);
        }
        char ferr[256];
        int frc = takes ? fault_plan_add(&L.faults, a, argv[i + 1], ferr, sizeof ferr) : 1;
        if (frc < 0) {
            free(fwd);
            return cli_usage(CMD, "%s", ferr);
        }
        if (frc == 0) {
            i++;
            continue;
        }
        if (!strcmp(a, "--peers")) {
            if (cli_long(CMD, "--peers", argv[++i], 1, 64, &peers)) {
                free(fwd);
                return CLI_USAGE;
            }
        } else if (!strcmp(a, "--topology"))
            topology = argv[++i];
        else if (!strcmp(a, "--run-dir"))
            run_dir = argv[++i];
        else if (!strcmp(a, "--summary"))
            summary = argv[++i];
        else if (!strcmp(a, "--hosts"))
            hosts = argv[++i];
        else if (!strcmp(a, "--remote-sgp"))
            remote_sgp = argv[++i];
        else if (!strcmp(a, "--remote-dir"))
            remote_dir = argv[++i];
        else if (!strcmp(a, "--base-port")) {
            if (cli_long(CMD, "--base-port", argv[++i], 1024, 65000, &base_port)) {
                free(fwd);
                return CLI_USAGE;
            }
        }
        else if (!strcmp(a, "--id") || !strcmp(a, "--cluster") || !strcmp(a, "--key") || !strcmp(a, "--save-model") ||
                 !strcmp(a, "--log") || !strcmp(a, "--checkpoint") || !strcmp(a, "--resume")) {
            free(fwd);
            return cli_usage(CMD, "%s is set by the launcher for each peer", a);
        } else
            fwd[nfwd++] = argv[i];
    }
    char ferr[256];
    if (fault_plan_check(&L.faults, (int)peers, ferr, sizeof ferr) < 0) {
        free(fwd);
        return cli_usage(CMD, "%s", ferr);
    }
    if (hosts && L.faults.n) {
        free(fwd);
        return cli_usage(CMD, "--kill, --restart and --stop are for local runs (not with --hosts)");
    }
    /* The best setting measured in the compression issue, unless told otherwise. */
    int has_codec = 0;
    for (int k = 0; k < nfwd; k++)
        has_codec |= !strcmp(fwd[k], "--codec");
    if (!has_codec) {
        fwd[nfwd++] = "--codec";
        fwd[nfwd++] = LAUNCH_DEFAULT_CODEC;
    }
    char dirbuf[64], self[4096];
    if (run_dir && strlen(run_dir) > 1024) {
        free(fwd);
        return cli_usage(CMD, "--run-dir: at most 1024 characters");
    }
    if (!run_dir) {
        snprintf(dirbuf, sizeof dirbuf, "sgp-run-%d", (int)getpid());
        run_dir = dirbuf;
    }
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) {
        fprintf(stderr, "%s: cannot find my own executable\n", CMD);
        free(fwd);
        return 1;
    }
    self[sl] = 0;
    if (mkdir(run_dir, 0700) < 0 && errno != EEXIST) {
        fprintf(stderr, "%s: cannot create %s: %s\n", CMD, run_dir, strerror(errno));
        free(fwd);
        return 1;
    }
    /* Remote hosts get the same absolute path, so the run directory must be one. */
    char absdir[1100];
    if (!realpath(run_dir, absdir)) {
        fprintf(stderr, "%s: %s: %s\n", CMD, run_dir, strerror(errno));
        free(fwd);
        return 1;
    }
    run_dir = absdir;
    if (!remote_dir)
        remote_dir = run_dir;
    if (remote_dir[0] != '/' || strlen(remote_dir) > 1024) {
        free(fwd);
        return cli_usage(CMD, "--remote-dir must be an absolute path of at most 1024 characters");
    }
    placement where[64];
    memset(where, 0, sizeof where);
    for (int i = 0; i < peers; i++)
        strcpy(where[i].addr, "127.0.0.1");
    int status = hosts ? hosts_place(hosts, (int)peers, base_port, where) : 0;
    if (status == 0)
        status = prepare(run_dir, (int)peers, topology, where);
    if (status == 0 && hosts && remote_copy(run_dir, remote_dir, (int)peers, where) < 0)
        status = 1;
    if (status) {
        free(fwd);
        return status;
    }
    printf("sgp launch: %ld peers on %s, topology %s, run directory %s\n", peers, hosts ? hosts : "127.0.0.1",
           topology, run_dir);
    fflush(stdout);
    signal(SIGINT, on_sigint);
    signal(SIGTERM, on_sigint);
    double t0 = clock_now();
    L.self = self, L.run_dir = run_dir, L.remote_dir = remote_dir, L.remote_sgp = remote_sgp, L.hosts = hosts;
    L.fwd = fwd, L.nfwd = nfwd, L.where = where;
    pid_t *pids = L.pids;
    for (int i = 0; i < peers; i++)
        pids[i] = start_peer(&L, i, 0);
    int left = (int)peers, failed = 0, tty = isatty(1);
    double last = 0;
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            for (int i = 0; i < peers; i++) {
                if (pids[i] != p)
                    continue;
                pids[i] = 0;
                int ours = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && fault_plan_killed(&L.faults, i);
                if (ours)
                    L.absent[i] = !fault_plan_restart_pending(&L.faults, i);
                else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                    fprintf(stderr, "\n%s: peer %d failed (see %s/peer%d.out)\n", CMD, i, run_dir, i);
                    failed = 1;
                }
            }
            left = 0;
            for (int i = 0; i < peers; i++)
                left += pids[i] > 0 || fault_plan_restart_pending(&L.faults, i);
            continue;
        }
        if (L.faults.n && !interrupted) {
            long rounds[64];
            for (int i = 0; i < peers; i++) {
                double m, loss, acc;
                rounds[i] = -1;
                peer_status(run_dir, i, &rounds[i], &m, &loss, &acc);
            }
            fault_plan_tick(&L.faults, rounds, pids, clock_now(), restart_peer, &L);
        }
        if (interrupted == 1) {
            interrupted = 2;
            for (int i = 0; i < peers; i++) {
                if (hosts) { /* sshd does not pass signals on: ask the remote peer itself */
                    char pat[1200], pb[16];
                    snprintf(pat, sizeof pat, "pkill -TERM -f -- '--cluster %.1024s/cluster.conf --id %d '",
                             remote_dir, i);
                    char *ka[10] = {"ssh", "-o", "BatchMode=yes"};
                    int b = 3;
                    ssh_port_args(&where[i], ka, &b, "-p", pb, sizeof pb);
                    ka[b++] = where[i].ssh, ka[b++] = pat, ka[b] = NULL;
                    run_wait(ka);
                }
                if (pids[i] > 0) {
                    kill(pids[i], SIGCONT); /* a stopped peer must run to take the SIGTERM */
                    kill(pids[i], SIGTERM);
                }
            }
        }
        double now = clock_now();
        if (now - last >= (tty ? 0.3 : 5.0)) {
            long rmin = -1, rmax = -1;
            double mb = 0, loss_sum = 0, acc_min = -1;
            for (int i = 0; i < peers; i++) {
                long r = 0;
                double m = 0, loss = 0, acc = -1;
                peer_status(run_dir, i, &r, &m, &loss, &acc);
                rmin = rmin < 0 || r < rmin ? r : rmin;
                rmax = r > rmax ? r : rmax;
                mb += m, loss_sum += loss;
                if (acc >= 0 && (acc_min < 0 || acc < acc_min))
                    acc_min = acc;
            }
            char accs[32] = "";
            if (acc_min >= 0)
                snprintf(accs, sizeof accs, "  test >= %.2f%%", 100 * acc_min);
            if (hosts) /* the logs are on the hosts: only who is running is known here */
                printf("%s%d of %ld peers running  %.0fs%s", tty ? "\r\033[K" : "", left, peers, now - t0,
                       tty ? "" : "\n");
            else
                printf("%sround %ld..%ld  loss %.4f%s  %.1f MB sent  %d of %ld peers running  %.0fs%s",
                       tty ? "\r\033[K" : "", rmin, rmax, loss_sum / peers, accs, mb, left, peers, now - t0,
                       tty ? "" : "\n");
            fflush(stdout);
            last = now;
        }
        usleep(50000);
    }
    if (tty)
        printf("\n");
    if (interrupted)
        fprintf(stderr, "%s: interrupted; every peer stopped\n", CMD);
    if (!interrupted && !failed && hosts && remote_fetch(run_dir, remote_dir, (int)peers, where) < 0)
        failed = 1;
    if (interrupted)
        status = 130;
    else if (failed)
        status = 1;
    else
        status = combine(run_dir, (int)peers, nfwd, fwd, summary, clock_now() - t0, L.absent, L.faults.injected);
    free(fwd);
    return status;
}
