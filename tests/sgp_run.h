/* Runs build/sgp (path in $SGP_BIN, set by `make test`) as a real process and
 * captures its exit status, stdout and stderr, for tests of the command line;
 * and, for tests of running peers, starts processes in the background and
 * waits on events (a line in a log, a file, an exit), never on the clock:
 *
 *   pid_t p = sgp_spawn(argv, "dir/peer2.out");
 *   sgp_await_text("dir/peer2.jsonl", "{\"round\": ", &p, 1, SGP_EVENT_LIMIT_S);
 *   kill(p, SIGTERM);
 *   int st = sgp_wait_exit(p, SGP_EVENT_LIMIT_S);   // -1: still running, killed
 *
 * The machine may be busy (make test runs suites in parallel, users run it
 * on machines that do other work): a limit here only turns a hang into a
 * failure, so it is far above the time the event takes on an idle machine.
 *
 * Files (a log's text, a summary's numbers, a scratch directory) are
 * tests/sgp_files.h's, which this includes. */
#ifndef TESTS_SGP_RUN_H
#define TESTS_SGP_RUN_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/sgp_files.h"

/* How long a test waits for an event (a process starting, a log line, an
 * exit) before it calls it a hang. */
#define SGP_EVENT_LIMIT_S 120.0

typedef struct sgp_out {
    int status;     /* exit status, or 128 + signal */
    char out[65536]; /* stdout, NUL-terminated, truncated if longer */
    char err[8192];
} sgp_out;

static inline const char *sgp_bin(void)
{
    const char *p = getenv("SGP_BIN");
    return p && *p ? p : "build/sgp";
}

/* The build directory of the binaries under test ($SGP_BUILD, set by make). */
static inline const char *sgp_build_dir(void)
{
    const char *b = getenv("SGP_BUILD");
    return b && *b ? b : "build";
}

/* For a Python process that loads this build's libsgp.so: $SGP_LIB, and
 * under ASan its runtime preloaded (Python's own allocations are not ours
 * to check). */
static inline void sgp_python_env(void)
{
    char lib[1024];
    snprintf(lib, sizeof lib, "%s/libsgp.so", sgp_build_dir());
    setenv("SGP_LIB", lib, 1);
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1); /* PyTorch's threads do not spin beside the peers */
    const char *san = getenv("SGP_SANITIZER");
    if (san && !strcmp(san, "address")) {
        FILE *p = popen("cc -print-file-name=libasan.so", "r");
        cr_assert(p && fgets(lib, sizeof lib, p));
        pclose(p);
        lib[strcspn(lib, "\n")] = 0;
        setenv("LD_PRELOAD", lib, 1);
        setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
    }
}

/* 1 if Debian's Python (/usr/bin/python3: make deps and make test install
 * NumPy and PyTorch for it) imports MODULE. */
static inline int sgp_python_has(const char *module)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c 'import %s' >/dev/null 2>&1", module);
    return system(cmd) == 0;
}

static inline void sgp_slurp(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    ssize_t r;
    char sink[4096];
    while ((r = read(fd, n + 1 < cap ? buf + n : sink, n + 1 < cap ? cap - 1 - n : sizeof sink)) > 0)
        if (n + 1 < cap)
            n += (size_t)r;
    buf[n] = 0;
}

/* sgp_run(&o, "train", "--epochs", "1", NULL) */
static inline void sgp_run(sgp_out *o, ...)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)sgp_bin();
    va_list ap;
    va_start(ap, o);
    for (char *a; (a = va_arg(ap, char *)) && argc < 63;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;

    char outp[] = "/tmp/sgp-out-XXXXXX", errp[] = "/tmp/sgp-err-XXXXXX";
    int ofd = mkstemp(outp), efd = mkstemp(errp);
    cr_assert(ofd >= 0 && efd >= 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);
        dup2(nul, 0);
        dup2(ofd, 1);
        dup2(efd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    o->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    lseek(ofd, 0, SEEK_SET);
    lseek(efd, 0, SEEK_SET);
    sgp_slurp(ofd, o->out, sizeof o->out);
    sgp_slurp(efd, o->err, sizeof o->err);
    close(ofd), close(efd);
    unlink(outp), unlink(errp);
}

/* A fresh run of n peers in dir (sgp launch --prepare: keys, cluster file,
 * topology; starts nothing): the cluster file's path into cluster. */
static inline void sgp_prepare_cluster(const char *dir, int n, char *cluster, size_t cap)
{
    char peers[16];
    snprintf(peers, sizeof peers, "%d", n);
    sgp_out *o = malloc(sizeof *o);
    cr_assert(o);
    sgp_run(o, "launch", "--peers", peers, "--prepare", "--run-dir", dir, NULL);
    cr_assert_eq(o->status, 0, "%s", o->err);
    free(o);
    snprintf(cluster, cap, "%s/cluster.conf", dir);
}

/* Lines in s (a trailing newline does not start a new one). */
static inline int sgp_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* ---- processes in the background, and events ------------------------------ */

/* Seconds on the monotonic clock (for limits only: nothing waits on it). */
static inline double sgp_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Poll interval of the waits below: short, and only between two looks at
 * the event. */
static inline void sgp_poll_pause(void) { usleep(20000); }

/* Fork ARGV (argv[0] a path) with stdin from /dev/null and stdout and stderr
 * to the file OUT (truncated), in a process group of its own so that a stuck
 * run can be ended with everything it started (kill(-pid, ...)). */
static inline pid_t sgp_spawn(char *const argv[], const char *out)
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test's worker exits: nothing it started keeps running */
        int nul = open("/dev/null", O_RDONLY), fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (nul < 0 || fd < 0)
            _exit(127);
        dup2(nul, 0), dup2(fd, 1), dup2(fd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    setpgid(pid, pid); /* also here: a kill(-pid) right after this finds the group */
    return pid;
}

/* Status of a child that has exited, as sgp_out.status: exit status, or 128 + signal. */
static inline int sgp_exit_status(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

/* Kill PID's process group and reap PID (for a failing test's clean-up). */
static inline void sgp_kill_group(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Exit status of PID (as sgp_status) once it exits; -1 if it is still
 * running after LIMIT seconds, in which case it and its group are killed. */
static inline int sgp_wait_exit(pid_t pid, double limit)
{
    const double deadline = sgp_now() + limit;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return sgp_exit_status(st);
        cr_assert(r == 0, "waitpid %d failed", (int)pid);
        if (sgp_now() > deadline) {
            sgp_kill_group(pid);
            return -1;
        }
        sgp_poll_pause();
    }
}

/* 1 if PID has exited (*status as sgp_status), without reaping it: a later
 * waitpid still gets it. */
static inline int sgp_has_exited(pid_t pid, int *status)
{
    siginfo_t si = {0};
    if (pid <= 0 || waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid != pid)
        return 0;
    *status = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
    return 1;
}

/* Waits until READY(ARG) says 1: an event the test's processes PIDS[0..n)
 * bring about, such as a line in a log (sgp_await_text). If one of them
 * exits first (without READY having become true by its exit), or after LIMIT
 * seconds, every one of them is killed and the test fails with WHAT (name
 * the log in it). */
static inline void sgp_await(int (*ready)(const void *arg), const void *arg, const char *what, const pid_t *pids,
                             int n, double limit)
{
    const double deadline = sgp_now() + limit;
    while (!ready(arg)) {
        int st = 0, gone = -1;
        for (int i = 0; i < n && gone < 0; i++)
            if (sgp_has_exited(pids[i], &st))
                gone = i;
        if (gone >= 0 && ready(arg)) /* its last words */
            return;
        if (gone >= 0 || sgp_now() > deadline) {
            for (int i = 0; i < n; i++)
                sgp_kill_group(pids[i]);
            if (gone >= 0)
                cr_assert_fail("process %d exited (status %d) before %s", (int)pids[gone], st, what);
            cr_assert_fail("no %s within %.0f s", what, limit);
        }
        sgp_poll_pause();
    }
}

typedef struct sgp_text_at {
    const char *path, *needle;
} sgp_text_at;

static inline int sgp_text_ready(const void *arg)
{
    const sgp_text_at *t = arg;
    return sgp_file_has(t->path, t->needle);
}

/* Waits until the file at PATH contains NEEDLE: a line a process writes, and
 * flushes, once it has reached the state the test needs. As sgp_await. */
static inline void sgp_await_text(const char *path, const char *needle, const pid_t *pids, int n, double limit)
{
    char what[1024];
    snprintf(what, sizeof what, "'%s' in %s", needle, path);
    sgp_await(sgp_text_ready, &(sgp_text_at){path, needle}, what, pids, n, limit);
}

/* Waits for every one of PIDS[0..n) to exit (an entry <= 0 is skipped), each
 * with status 0, within LIMIT seconds in all; each is set to 0 once reaped.
 * On a failure or at the limit every one left is killed and the test fails,
 * naming WHERE (the logs). */
static inline void sgp_wait_all_ok(pid_t *pids, int n, double limit, const char *where)
{
    const double deadline = sgp_now() + limit;
    int left = 0;
    for (int i = 0; i < n; i++)
        left += pids[i] > 0;
    while (left > 0) {
        int bad = -1, st = 0;
        for (int i = 0; i < n; i++) {
            if (pids[i] <= 0 || waitpid(pids[i], &st, WNOHANG) != pids[i])
                continue;
            left--;
            if (sgp_exit_status(st) != 0) {
                bad = i;
                pids[i] = 0;
                break;
            }
            pids[i] = 0;
        }
        if (bad >= 0 || (left > 0 && sgp_now() > deadline)) {
            for (int i = 0; i < n; i++)
                sgp_kill_group(pids[i]);
            if (bad >= 0)
                cr_assert_fail("process %d of %d exited with status %d (logs in %s)", bad, n, sgp_exit_status(st), where);
            cr_assert_fail("%d of %d processes did not finish within %.0f s (logs in %s)", left, n, limit, where);
        }
        if (left > 0)
            sgp_poll_pause();
    }
}

#endif
