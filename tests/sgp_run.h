/* Runs build/sgp (path in $SGP_BIN, set by `make test`) as a real process and
 * captures its exit status, stdout and stderr, for tests of the command line. */
#ifndef TESTS_SGP_RUN_H
#define TESTS_SGP_RUN_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* Lines in s (a trailing newline does not start a new one). */
static inline int sgp_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

#endif
