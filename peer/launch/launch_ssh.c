/* ssh and scp commands for sgp launch --hosts; see launch_ssh.h. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer/launch/launch_ssh.h"

/* An ssh or scp command line being built. */
typedef struct cmdline {
    char *argv[24];
    int n;
    char port[16];
} cmdline;

/* The directory of this launch's ssh control sockets ("" when not shared):
 * every command to a host goes over one connection, so a host costs one key
 * exchange and login, not one for each of mkdir, copy, start and fetch. */
static char mux_dir[80];
static char mux_path[sizeof mux_dir + 32];

static void cmd_begin(cmdline *c, const launch_host *h, int scp)
{
    static const char *const ssh[] = {"ssh", "-o", "BatchMode=yes"}, *const cp[] = {"scp", "-q", "-p", "-o",
                                                                                      "BatchMode=yes"};
    c->n = 0;
    for (size_t k = 0; k < (scp ? 5u : 3u); k++)
        c->argv[c->n++] = (char *)(scp ? cp[k] : ssh[k]);
    if (mux_dir[0]) {
        /* ControlPersist: the connection outlives a command by a few seconds
         * (copy, then start); launch_ssh_mux_close ends it at once. */
        static char *const mux[] = {"-o", "ControlMaster=auto", "-o", mux_path, "-o", "ControlPersist=10"};
        for (size_t k = 0; k < sizeof mux / sizeof *mux; k++)
            c->argv[c->n++] = mux[k];
    }
    if (h->ssh_port) {
        snprintf(c->port, sizeof c->port, "%d", h->ssh_port);
        c->argv[c->n++] = scp ? "-P" : "-p";
        c->argv[c->n++] = c->port;
    }
}

static void cmd_add(cmdline *c, char *arg) { c->argv[c->n++] = arg; }

/* In $TMPDIR (or /tmp): short enough that the control socket's path, 40
 * characters more, fits a unix socket's 108. */
void launch_ssh_mux_open(void)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp || strlen(tmp) > 48)
        tmp = "/tmp";
    snprintf(mux_dir, sizeof mux_dir, "%s/sgp-ssh-XXXXXX", tmp);
    if (!mkdtemp(mux_dir)) { /* each command logs in on its own, as without */
        mux_dir[0] = 0;
        return;
    }
    snprintf(mux_path, sizeof mux_path, "ControlPath=%s/%%C", mux_dir);
}

/* Runs the command to completion; 0 if it exited 0. */
static int cmd_run(cmdline *c)
{
    c->argv[c->n] = NULL;
    pid_t p = fork();
    if (p == 0) {
        execvp(c->argv[0], c->argv);
        _exit(127);
    }
    int st;
    return p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/* s as one word for a POSIX shell, into out (which holds 4 * strlen(s) + 3). */
static size_t shell_quote(char *out, const char *s)
{
    size_t o = 0;
    out[o++] = '\'';
    for (; *s; s++) {
        if (*s == '\'') {
            memcpy(out + o, "'\\''", 4);
            o += 4;
        } else
            out[o++] = *s;
    }
    out[o++] = '\'';
    out[o] = 0;
    return o;
}

static int same_host(const launch_host *a, const launch_host *b)
{
    return a->ssh_port == b->ssh_port && !strcmp(a->ssh, b->ssh);
}

/* Whether peer i is the first of its host. */
static int first_of_host(const launch_host *where, int i)
{
    for (int j = 0; j < i; j++)
        if (same_host(&where[j], &where[i]))
            return 0;
    return 1;
}

/* Runs job(i, ctx) for every peer i < n, the peers of one host one after
 * another in a child process of that host, all hosts at once: a host's ssh
 * set-up (key exchange, login) is most of what a command costs, hosts do
 * not wait for each other, and no sshd sees more than one login at a time
 * (sshd drops logins beyond its MaxStartups). Returns the first peer whose
 * job failed, or -1. */
static int each_host_at_once(const launch_host *where, int n, int (*job)(int i, const void *ctx), const void *ctx)
{
    pid_t *pids = calloc((size_t)(n > 0 ? n : 1), sizeof *pids);
    if (!pids)
        return 0;
    for (int i = 0; i < n; i++) {
        if (!first_of_host(where, i))
            continue;
        pids[i] = fork();
        if (pids[i] == 0) { /* exit status: which of its host's peers failed, counted from 1 */
            for (int j = i, k = 0; j < n; j++) {
                if (!same_host(&where[j], &where[i]))
                    continue;
                k++;
                if (job(j, ctx) != 0)
                    _exit(k < 255 ? k : 255);
            }
            _exit(0);
        }
    }
    int failed = -1;
    for (int i = 0; i < n; i++) {
        int st, bad = -1;
        if (!first_of_host(where, i))
            continue;
        if (pids[i] < 0 || waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st))
            bad = i;
        else if (WEXITSTATUS(st) != 0)
            for (int j = i, k = 1; j < n && bad < 0; j++)
                if (same_host(&where[j], &where[i]) && k++ == WEXITSTATUS(st))
                    bad = j;
        if (bad >= 0 && (failed < 0 || bad < failed))
            failed = bad;
    }
    free(pids);
    return failed;
}

typedef struct copy_job {
    const launch_host *where;
    const char *dir, *mk, *rdir;
} copy_job;

static int copy_one(int i, const void *ctx)
{
    const copy_job *j = ctx;
    char key[1100], pub[1100], cl[1100], tp[1100], dest[1300];
    snprintf(cl, sizeof cl, "%.1024s/cluster.conf", j->dir);
    snprintf(tp, sizeof tp, "%.1024s/topology.topo", j->dir);
    snprintf(key, sizeof key, "%.1024s/%d.key", j->dir, i);
    snprintf(pub, sizeof pub, "%.1024s/%d.pub", j->dir, i);
    snprintf(dest, sizeof dest, "%s:%.1024s/", j->where[i].ssh, j->rdir);
    cmdline a, b;
    cmd_begin(&a, &j->where[i], 0);
    cmd_add(&a, (char *)j->where[i].ssh), cmd_add(&a, (char *)j->mk);
    cmd_begin(&b, &j->where[i], 1);
    cmd_add(&b, key), cmd_add(&b, pub), cmd_add(&b, cl), cmd_add(&b, tp), cmd_add(&b, dest);
    return cmd_run(&a) < 0 || cmd_run(&b) < 0 ? -EIO : 0;
}

int launch_ssh_copy(const launch_host *where, int n, const char *dir, const char *rdir, char *err, size_t errlen)
{
    char mk[32 + 4 * 1100];
    if (strlen(rdir) > 1024)
        return -ENAMETOOLONG;
    size_t o = (size_t)snprintf(mk, sizeof mk, "mkdir -p -m 700 ");
    shell_quote(mk + o, rdir);
    const copy_job j = {.where = where, .dir = dir, .mk = mk, .rdir = rdir};
    int bad = each_host_at_once(where, n, copy_one, &j);
    if (bad >= 0) {
        snprintf(err, errlen, "cannot copy the run directory to %s", where[bad].ssh);
        return -EIO;
    }
    return 0;
}

static int fetch_one(int i, const void *ctx)
{
    const copy_job *j = ctx;
    char json[1300], model[1300], log[1300], local[1100];
    snprintf(local, sizeof local, "%.1024s/", j->dir);
    snprintf(json, sizeof json, "%s:%.1024s/peer%d.json", j->where[i].ssh, j->rdir, i);
    snprintf(model, sizeof model, "%s:%.1024s/peer%d.model", j->where[i].ssh, j->rdir, i);
    snprintf(log, sizeof log, "%s:%.1024s/peer%d.jsonl", j->where[i].ssh, j->rdir, i);
    cmdline c;
    cmd_begin(&c, &j->where[i], 1);
    cmd_add(&c, json), cmd_add(&c, model), cmd_add(&c, log), cmd_add(&c, local);
    return cmd_run(&c);
}

int launch_ssh_fetch(const launch_host *where, int n, const char *dir, const char *rdir, char *err, size_t errlen)
{
    const copy_job j = {.where = where, .dir = dir, .rdir = rdir};
    int bad = each_host_at_once(where, n, fetch_one, &j);
    if (bad >= 0) {
        snprintf(err, errlen, "cannot fetch peer %d's results from %s", bad, where[bad].ssh);
        return -EIO;
    }
    return 0;
}

char **launch_ssh_argv(const launch_host *h, char *const argv[], const char *exe)
{
    cmdline c;
    cmd_begin(&c, h, 0);
    size_t words = (size_t)c.n + 3, text = sizeof "exec" + strlen(h->ssh) + 1 + sizeof c.port;
    for (int k = 0; argv[k]; k++)
        text += 4 * strlen(k == 0 && exe ? exe : argv[k]) + 3 + 1;
    char **out = malloc(words * sizeof *out + text);
    if (!out)
        return NULL;
    char *p = (char *)(out + words);
    for (int k = 0; k < c.n; k++) {
        out[k] = c.argv[k];
        if (c.argv[k] == c.port) { /* c is on this stack: its port text goes into the block */
            out[k] = strcpy(p, c.port);
            p += strlen(p) + 1;
        }
    }
    out[c.n] = strcpy(p, h->ssh);
    p += strlen(p) + 1;
    out[c.n + 1] = p;
    p += sprintf(p, "exec");
    for (int k = 0; argv[k]; k++) {
        *p++ = ' ';
        p += shell_quote(p, k == 0 && exe ? exe : argv[k]);
    }
    out[c.n + 2] = NULL;
    return out;
}

void launch_ssh_stop(const launch_host *h, const char *rdir, int id)
{
    char pat[1200], cmd[32 + 4 * 1200];
    snprintf(pat, sizeof pat, "--cluster %.1024s/cluster.conf --id %d ", rdir, id);
    size_t o = (size_t)snprintf(cmd, sizeof cmd, "pkill -TERM -f -- ");
    shell_quote(cmd + o, pat);
    cmdline c;
    cmd_begin(&c, h, 0);
    cmd_add(&c, (char *)h->ssh), cmd_add(&c, cmd);
    cmd_run(&c);
}

void launch_ssh_mux_close(const launch_host *where, int n)
{
    if (!mux_dir[0])
        return;
    for (int i = 0; i < n; i++) {
        if (!first_of_host(where, i))
            continue;
        cmdline c;
        cmd_begin(&c, &where[i], 0);
        cmd_add(&c, "-q"), cmd_add(&c, "-O"), cmd_add(&c, "exit"), cmd_add(&c, (char *)where[i].ssh);
        cmd_run(&c);
    }
    /* a master removes its socket as it exits, which may be just after */
    DIR *d = opendir(mux_dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[sizeof mux_dir + 300];
        if (e->d_name[0] != '.' && snprintf(path, sizeof path, "%s/%s", mux_dir, e->d_name) < (int)sizeof path)
            unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(mux_dir);
    mux_dir[0] = 0;
}
