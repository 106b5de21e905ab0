/* Starting, watching and stopping the peers of a launch; see launch.h. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer/core/clock.h"
#include "peer/launch/launch.h"
#include "peer/launch/launch_combine.h"
#include "peer/launch/launch_hosts.h"
#include "peer/launch/launch_prepare.h"
#include "peer/launch/launch_ssh.h"
#include "peer/launch/launch_status.h"

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* One run: the options, and per peer where it runs, its process and its fate. */
typedef struct run {
    const launch_opts *o;
    char self[4096];   /* this executable: what every peer runs */
    const char *dir;   /* the run directory, absolute */
    const char *rdir;  /* the run directory on the hosts */
    fault_plan *faults;
    launch_host *where;
    pid_t *pids;       /* 0: not running */
    uint8_t *absent;   /* killed by a fault for good: no model at the end */
    uint8_t *left;     /* left on purpose (--leave): its model is not the run's */
    long *rounds;      /* each peer's last logged round, for the faults */
    int n;             /* slots: the cluster file's peers, then the joiners of --add */
    int added;         /* joiners started so far (slots o->peers .. o->peers + added - 1) */
    int adds_done;     /* --add entries whose joiners have started */
    int made_dir;      /* the run directory did not exist before */
    char first_why[512]; /* the first failed peer's own message, as shown */
} run;

/* The value of option `name` among the forwarded arguments, or def. */
static const char *forwarded(const launch_opts *o, const char *name, const char *def)
{
    for (int i = 0; i + 1 < o->nfwd; i++)
        if (!strcmp(o->fwd[i], name))
            return o->fwd[i + 1];
    return def;
}

/* The peers' context: --context, else (as the peers decide it) that of
 * --init's language model, else 0 for the default. */
static int forwarded_context(const launch_opts *o)
{
    const char *given = forwarded(o, "--context", NULL), *init = forwarded(o, "--init", NULL);
    modelfile_arch a;
    char err[256];
    if (given)
        return atoi(given);
    if (init && modelfile_arch_read(init, &a, err, sizeof err) == 0 && a.c == 1 && a.h == 1)
        return a.w;
    return 0;
}

/* The paths a peer is given, in the directory it runs in. */
typedef struct peer_paths {
    char cluster[1100], id[16], model[1100], log[1100], summary[1100], ckpt[1100], slow[32];
} peer_paths;

/* Fork `sgp peer` for peer i (over ssh with --hosts); its output goes to
 * RUN/peerI.out (appended to on a restart). Returns its pid, or -1. */
static pid_t start_peer(run *R, int i, int resume)
{
    const launch_opts *o = R->o;
    const char *pdir = o->hosts ? R->rdir : R->dir; /* where the peer's own files are */
    peer_paths p;
    snprintf(p.cluster, sizeof p.cluster, "%.1024s/cluster.conf", pdir);
    snprintf(p.id, sizeof p.id, "%d", i);
    snprintf(p.model, sizeof p.model, "%.1024s/peer%d.model", pdir, i);
    snprintf(p.log, sizeof p.log, "%.1024s/peer%d.jsonl", pdir, i);
    snprintf(p.summary, sizeof p.summary, "%.1024s/peer%d.json", pdir, i);
    snprintf(p.ckpt, sizeof p.ckpt, "%.1024s/peer%d.ckpt", pdir, i);
    char cred[1100], key[1100];
    snprintf(cred, sizeof cred, "%.1024s/%d.cred", pdir, i);
    snprintf(key, sizeof key, "%.1024s/%d.key", pdir, i);
    const int joiner = i >= o->peers; /* (a slot of --add: it dials in with its credential) */
    char *fixed[] = {R->self, "peer", "--cluster", p.cluster, joiner ? "--credential" : "--id", joiner ? cred : p.id,
                     "--key", key, "--save-model", p.model, "--log", p.log, "--summary", p.summary, "--no-progress",
                     "--checkpoint", p.ckpt};
    const int nfixed = (int)(sizeof fixed / sizeof *fixed);
    char **args = malloc((size_t)(nfixed + 5 + o->nfwd + 1) * sizeof *args), **run_argv = args;
    if (!args)
        return -1;
    int a = 0;
    for (int k = 0; k < nfixed; k++)
        args[a++] = fixed[k];
    double slow = R->faults ? fault_plan_slow(R->faults, i) : 0;
    if (slow > 0) {
        snprintf(p.slow, sizeof p.slow, "%g", slow);
        args[a++] = "--slow", args[a++] = p.slow;
    }
    if (resume)
        args[a++] = "--resume";
    for (int k = 0; k < o->nfwd; k++)
        args[a++] = o->fwd[k];
    if (R->faults && fault_plan_leaves(R->faults, i, 0)) /* (after the options given: it wins) */
        args[a++] = "--on-term", args[a++] = "leave";
    args[a] = NULL;
    if (o->hosts && !(run_argv = launch_ssh_argv(&R->where[i], args, o->remote_sgp))) {
        free(args);
        return -1;
    }
    char out[1100];
    snprintf(out, sizeof out, "%.1024s/peer%d.out", R->dir, i);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(out, resume ? "a" : "w", stdout);
        if (f)
            dup2(fileno(stdout), 2);
        signal(SIGINT, SIG_IGN); /* Ctrl-C reaches the peers as the launcher's SIGTERM */
        execvp(run_argv[0], run_argv);
        _exit(127);
    }
    if (run_argv != args)
        free(run_argv);
    free(args);
    return pid;
}

static void restart_peer(void *ctx, int i)
{
    run *R = ctx;
    R->pids[i] = start_peer(R, i, 1);
    R->absent[i] = 0;
}

/* Peers still running or due to be started again. */
static int running(const run *R)
{
    int left = 0;
    for (int i = 0; i < R->n; i++)
        left += R->pids[i] > 0 || (R->faults && fault_plan_restart_pending(R->faults, i));
    return left;
}

/* --add: the joiners whose round a peer of the run has logged start now. */
static void start_joiners(run *R)
{
    long round = 0;
    for (int i = 0; i < R->n; i++)
        round = R->rounds[i] > round ? R->rounds[i] : round;
    for (; R->adds_done < R->o->n_add && round >= R->o->add[R->adds_done].round; R->adds_done++)
        for (int k = 0; k < R->o->add[R->adds_done].count; k++) {
            const int i = R->o->peers + R->added++;
            printf("\nsgp launch: at round %ld: peer %d joins with its credential\n", round, i);
            fflush(stdout); /* (before the fork, or the child prints it again) */
            if ((R->pids[i] = start_peer(R, i, 0)) < 0) {
                fprintf(stderr, "sgp launch: cannot start peer %d: %s\n", i, strerror(errno));
                R->pids[i] = 0;
            }
        }
}

/* The last line of text in a file (a peer's error), without its newline. */
static int last_line(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[512];
    out[0] = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0])
            snprintf(out, cap, "%s", line);
    }
    fclose(f);
    return out[0] != 0;
}

/* Every peer failed before its first round (a bad option, missing data):
 * nothing of the run is worth keeping but the message already shown. Removes
 * the files launch_prepare and the peers made, and the directory if this
 * launch made it. */
static void remove_run(const run *R)
{
    static const char *const per_peer[] = {"%s/%d.key", "%s/%d.pub", "%s/%d.cred", "%s/peer%d.out", "%s/peer%d.jsonl",
                                           "%s/peer%d.json", "%s/peer%d.model", "%s/peer%d.ckpt"};
    char path[1200];
    for (int i = 0; i < R->n; i++)
        for (size_t k = 0; k < sizeof per_peer / sizeof *per_peer; k++) {
            snprintf(path, sizeof path, per_peer[k], R->dir, i);
            unlink(path);
        }
    static const char *const per_run[] = {"cluster.conf", "topology.topo", "admit.key", "admit.pub"};
    for (size_t k = 0; k < sizeof per_run / sizeof *per_run; k++) {
        snprintf(path, sizeof path, "%s/%s", R->dir, per_run[k]);
        unlink(path);
    }
    if (R->made_dir)
        rmdir(R->dir);
}

/* Did any peer log a round? */
static int any_round(const run *R)
{
    char path[1100];
    for (int i = 0; i < R->n; i++) {
        launch_status s = LAUNCH_STATUS_NONE;
        launch_log_path(path, sizeof path, R->dir, i);
        launch_status_read(path, &s);
        if (s.round > 0)
            return 1;
    }
    return 0;
}

/* A peer process ended: a fault's kill, a success, or a failure (1). */
static int reap(run *R, pid_t p, int st)
{
    for (int i = 0; i < R->n; i++) {
        if (R->pids[i] != p)
            continue;
        R->pids[i] = 0;
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && R->faults && fault_plan_killed(R->faults, i)) {
            R->absent[i] = !fault_plan_restart_pending(R->faults, i);
            return 0;
        }
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && R->faults && fault_plan_leaves(R->faults, i, 1))
            R->left[i] = 1;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            /* In its own words (the last line it wrote), once for each different one. */
            char path[1100], why[512];
            snprintf(path, sizeof path, "%s/peer%d.out", R->dir, i);
            if (R->o->hosts || !last_line(path, why, sizeof why))
                fprintf(stderr, "\nsgp launch: peer %d failed (see %s)\n", i, path);
            else if (!strcmp(why, R->first_why))
                fprintf(stderr, "\nsgp launch: peer %d failed the same way\n", i);
            else {
                fprintf(stderr, "\nsgp launch: peer %d failed: %s\n", i, why);
                if (!R->first_why[0])
                    snprintf(R->first_why, sizeof R->first_why, "%s", why);
            }
            return 1;
        }
    }
    return 0;
}

/* SIGTERM to every peer, once. */
static void stop_all(run *R)
{
    R->adds_done = R->o->n_add; /* (no joiner starts after a stop) */
    for (int i = 0; i < R->n; i++) {
        if (R->o->hosts)
            launch_ssh_stop(&R->where[i], R->rdir, i);
        if (R->pids[i] > 0) {
            kill(R->pids[i], SIGCONT); /* a stopped peer must run to take the SIGTERM */
            kill(R->pids[i], SIGTERM);
        }
    }
}

/* Until every peer has ended: reap, inject faults, forward a Ctrl-C, show
 * progress. Returns how many peers failed. */
static int watch(run *R, double t0)
{
    const int n = R->n, tty = isatty(1);
    int failed = 0;
    double last = 0;
    char path[1100];
    while (running(R) > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            failed += reap(R, p, st);
            continue;
        }
        if (((R->faults && R->faults->n) || R->adds_done < R->o->n_add) && !interrupted) {
            for (int i = 0; i < n; i++) {
                launch_status s = LAUNCH_STATUS_NONE;
                launch_log_path(path, sizeof path, R->dir, i);
                launch_status_read(path, &s);
                R->rounds[i] = s.round;
            }
            if (R->faults && R->faults->n)
                fault_plan_tick(R->faults, R->rounds, R->pids, clock_now(), restart_peer, R);
            start_joiners(R);
        }
        if (interrupted == 1) {
            interrupted = 2;
            stop_all(R);
        }
        double now = clock_now();
        if (now - last >= (tty ? 0.3 : 5.0)) {
            /* with --hosts the logs are on the hosts: only who is running is known here */
            launch_progress(stdout, R->o->hosts ? NULL : R->dir, n, running(R), now - t0, tty);
            last = now;
        }
        usleep(50000);
    }
    if (tty)
        printf("\n");
    return failed;
}

/* The run directory, made if need be, as an absolute path (remote hosts get
 * the same one); malloc'ed. */
static char *make_run_dir(const char *dir, int *made, char *err, size_t errlen)
{
    char dflt[64];
    if (!dir) {
        snprintf(dflt, sizeof dflt, "sgp-run-%d", (int)getpid());
        dir = dflt;
    }
    char *abs = NULL;
    *made = mkdir(dir, 0700) == 0;
    if ((!*made && errno != EEXIST) || !(abs = realpath(dir, NULL))) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return NULL;
    }
    if (strlen(abs) > 1024) {
        snprintf(err, errlen, "%s: a run directory of at most 1024 characters", abs);
        free(abs);
        return NULL;
    }
    return abs;
}

/* Everything before the peers start: where they run, the run directory
 * (copied to the hosts). */
static int setup(run *R, char *err, size_t errlen)
{
    const launch_opts *o = R->o;
    ssize_t sl = readlink("/proc/self/exe", R->self, sizeof R->self - 1);
    if (sl <= 0) {
        snprintf(err, errlen, "cannot find my own executable");
        return -ENOENT;
    }
    R->self[sl] = 0;
    R->rdir = o->remote_dir ? o->remote_dir : R->dir;
    if (R->rdir[0] != '/' || strlen(R->rdir) > 1024) {
        snprintf(err, errlen, "--remote-dir must be an absolute path of at most 1024 characters");
        return -EINVAL;
    }
    launch_hosts_local(R->where, o->peers);
    int rc = o->hosts ? launch_hosts_load(R->where, o->peers, o->hosts, o->base_port, err, errlen) : 0;
    if (rc == 0)
        rc = launch_prepare(R->dir, R->n, o->peers, o->topology, R->where, err, errlen);
    if (rc == 0 && o->hosts) {
        if (!o->ssh_unshared)
            launch_ssh_mux_open();
        rc = launch_ssh_copy(R->where, o->peers, R->dir, R->rdir, err, errlen);
    }
    return rc;
}

int launch_run(const launch_opts *o, char *err, size_t errlen)
{
    int n = o->peers;
    for (int k = 0; k < o->n_add; k++)
        n += o->add[k].count;
    run R = {.o = o, .faults = o->faults, .n = n};
    R.where = calloc((size_t)n, sizeof *R.where);
    R.pids = calloc((size_t)n, sizeof *R.pids);
    R.absent = calloc((size_t)n, sizeof *R.absent);
    R.left = calloc((size_t)n, sizeof *R.left);
    R.rounds = calloc((size_t)n, sizeof *R.rounds);
    char *dir = NULL;
    int rc = 0;
    if (!R.where || !R.pids || !R.absent || !R.left || !R.rounds) {
        snprintf(err, errlen, "out of memory for %d peers", n);
        rc = -ENOMEM;
    } else if (!(R.dir = dir = make_run_dir(o->run_dir, &R.made_dir, err, errlen)))
        rc = -EIO;
    if (rc == 0)
        rc = setup(&R, err, errlen);
    if (rc < 0)
        goto out;
    if (o->prepare_only) { /* for programs of one's own on libsgp (peer/lib/sgp.h) */
        printf("sgp launch: keys and cluster file for %d peers on %s: %s/cluster.conf\n", n,
               o->hosts ? o->hosts : "127.0.0.1", R.dir);
        goto out;
    }
    printf("sgp launch: %d peers on %s, topology %s, run directory %s\n", o->peers, o->hosts ? o->hosts : "127.0.0.1",
           o->topology, R.dir);
    if (n > o->peers)
        printf("sgp launch: %d more join with credentials (--add), in slots %d to %d\n", n - o->peers, o->peers,
               n - 1);
    fflush(stdout);
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    interrupted = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    double t0 = clock_now();
    int failed = 0;
    for (int i = 0; i < o->peers; i++) /* (the joiners of --add when their round comes: watch) */
        if ((R.pids[i] = start_peer(&R, i, 0)) < 0) {
            fprintf(stderr, "sgp launch: cannot start peer %d: %s\n", i, strerror(errno));
            R.pids[i] = 0, failed++;
        }
    if (failed)
        stop_all(&R); /* the others would wait for it */
    failed += watch(&R, t0);
    for (int i = o->peers + R.added; i < n; i++) /* (joiners whose round never came: no model, no log) */
        R.absent[i] = 1;
    if (R.added < n - o->peers && !failed)
        printf("sgp launch: %d of %d joiners never started: the run ended before their round\n", n - o->peers - R.added,
               n - o->peers);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (interrupted) {
        snprintf(err, errlen, "interrupted; every peer stopped");
        rc = -EINTR;
    } else if (failed) {
        const int started = o->peers + R.added;
        snprintf(err, errlen, "%d of %d peers failed", failed, started);
        rc = -EIO;
        if (failed == started && !o->hosts && !any_round(&R)) {
            remove_run(&R);
            snprintf(err, errlen, "every peer failed before its first round; nothing was kept");
        }
    } else if (!o->hosts || (rc = launch_ssh_fetch(R.where, n, R.dir, R.rdir, err, errlen)) == 0) {
        launch_outcome out = {.run_dir = R.dir, .n = n, .absent = R.absent, .left = R.left,
                              .data = forwarded(o, "--data", NULL),
                              .context = forwarded_context(o), .save_model = o->save_model,
                              .model_format = o->model_format,
                              .faults = R.faults ? R.faults->injected : 0, .wall_seconds = clock_now() - t0};
        rc = launch_combine(&out, o->summary, stdout, err, errlen);
    }
out:
    if (o->hosts && R.where)
        launch_ssh_mux_close(R.where, n);
    free(dir);
    free(R.where), free(R.pids), free(R.absent), free(R.left), free(R.rounds);
    return rc;
}
