/* sgp launch's fault injection: parse, schedule, signal. See launch_faults.h. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/launch/launch_faults.h"
#include "topologies/topo.h"

/* "PEER@ROUND[:SECONDS]" or, for --slow, "PEER:FACTOR". */
static int parse_at(const char *arg, int *peer, long *round, double *seconds, int *has_seconds)
{
    char *end;
    long p = strtol(arg, &end, 10);
    if (end == arg || *end != '@' || p < 0 || p >= TOPO_MAX_PEERS)
        return -1;
    const char *r = end + 1;
    long rd = strtol(r, &end, 10);
    if (end == r || rd < 0)
        return -1;
    *has_seconds = 0;
    if (*end == ':') {
        const char *s = end + 1;
        double v = strtod(s, &end);
        if (end == s || !(v >= 0 && v <= 1e6))
            return -1;
        *seconds = v, *has_seconds = 1;
    }
    if (*end)
        return -1;
    *peer = (int)p, *round = rd;
    return 0;
}

int fault_plan_add(fault_plan *p, const char *opt, const char *arg, char *err, size_t errlen)
{
    if (!strcmp(opt, "--slow")) {
        char *end;
        long peer = strtol(arg, &end, 10);
        double f = end != arg && *end == ':' ? strtod(end + 1, &end) : 0;
        if (peer < 0 || peer >= TOPO_MAX_PEERS || *end || !(f >= 1 && f <= 1000)) {
            snprintf(err, errlen, "--slow '%s': expected PEER:FACTOR with FACTOR in [1, 1000]", arg);
            return -EINVAL;
        }
        if (p->n_slow == FAULT_MAX) {
            snprintf(err, errlen, "at most %d --slow", FAULT_MAX);
            return -EINVAL;
        }
        p->slow[p->n_slow++] = (fault_slow){(int)peer, f};
        return FAULT_TAKEN;
    }
    fault f = {0};
    if (!strcmp(opt, "--kill"))
        f.kind = FAULT_KILL;
    else if (!strcmp(opt, "--restart"))
        f.kind = FAULT_RESTART, f.seconds = 1.0;
    else if (!strcmp(opt, "--stop"))
        f.kind = FAULT_STOP;
    else if (!strcmp(opt, "--leave"))
        f.kind = FAULT_LEAVE;
    else
        return FAULT_NOT_MINE;
    int has_seconds;
    double seconds = 0;
    if (parse_at(arg, &f.peer, &f.round, &seconds, &has_seconds) < 0 ||
        ((f.kind == FAULT_KILL || f.kind == FAULT_LEAVE) && has_seconds) || (f.kind == FAULT_STOP && !has_seconds)) {
        snprintf(err, errlen, "%s '%s': expected %s", opt, arg,
                 f.kind == FAULT_KILL || f.kind == FAULT_LEAVE ? "PEER@ROUND"
                 : f.kind == FAULT_RESTART ? "PEER@ROUND or PEER@ROUND:SECONDS"
                                           : "PEER@ROUND:SECONDS");
        return -EINVAL;
    }
    if (has_seconds)
        f.seconds = seconds;
    if (p->n == FAULT_MAX) {
        snprintf(err, errlen, "at most %d faults", FAULT_MAX);
        return -EINVAL;
    }
    p->f[p->n++] = f;
    return FAULT_TAKEN;
}

int fault_plan_check(const fault_plan *p, int n_peers, char *err, size_t errlen)
{
    for (int k = 0; k < p->n; k++)
        if (p->f[k].peer >= n_peers) {
            snprintf(err, errlen, "a fault names peer %d; the run has peers 0..%d", p->f[k].peer, n_peers - 1);
            return -EINVAL;
        }
    for (int k = 0; k < p->n_slow; k++)
        if (p->slow[k].peer >= n_peers) {
            snprintf(err, errlen, "--slow names peer %d; the run has peers 0..%d", p->slow[k].peer, n_peers - 1);
            return -EINVAL;
        }
    return 0;
}

int fault_plan_leaves(const fault_plan *p, int peer, int sent)
{
    for (int k = 0; k < p->n; k++)
        if (p->f[k].peer == peer && p->f[k].kind == FAULT_LEAVE && (!sent || p->f[k].stage > 0))
            return 1;
    return 0;
}

double fault_plan_slow(const fault_plan *p, int peer)
{
    double f = 0;
    for (int k = 0; k < p->n_slow; k++)
        if (p->slow[k].peer == peer)
            f = p->slow[k].factor;
    return f;
}

static const char *const names[] = {"kill -9", "kill -9 and restart", "SIGSTOP", "SIGTERM: leaving"};
static const int signals[] = {SIGKILL, SIGKILL, SIGSTOP, SIGTERM};

void fault_plan_tick(fault_plan *p, const long *rounds, const pid_t *pids, double now, fault_restart_fn restart,
                     void *ctx)
{
    for (int k = 0; k < p->n; k++) {
        fault *f = &p->f[k];
        const pid_t pid = pids[f->peer];
        if (f->stage == 0) {
            /* One fault at a time per peer: a later one waits for the earlier's second half. */
            /* A peer just started again has not logged a round of its own
             * yet: its log still ends where the killed process left it. */
            int busy = 0;
            for (int j = 0; j < p->n; j++)
                busy |= p->f[j].peer == f->peer && ((j < k && p->f[j].stage < 2) ||
                                                    (p->f[j].restarted_at > 0 && now - p->f[j].restarted_at < 2.0));
            if (busy || pid <= 0 || rounds[f->peer] < f->round)
                continue;
            printf("\nsgp launch: peer %d at round %ld: %s\n", f->peer, rounds[f->peer], names[f->kind]);
            fflush(stdout);
            kill(pid, signals[f->kind]);
            p->injected++;
            f->stage = f->kind == FAULT_KILL || f->kind == FAULT_LEAVE ? 2 : 1;
            f->due = now + f->seconds;
        } else if (f->stage == 1 && now >= f->due) {
            if (f->kind == FAULT_STOP) {
                printf("\nsgp launch: peer %d: SIGCONT after %.1f s\n", f->peer, f->seconds);
                if (pid > 0)
                    kill(pid, SIGCONT);
            } else {
                printf("\nsgp launch: peer %d: restarting with --resume\n", f->peer);
                fflush(stdout); /* before the fork, or the child prints it again */
                restart(ctx, f->peer);
                f->restarted_at = now;
            }
            fflush(stdout);
            f->stage = 2;
        }
    }
}

int fault_plan_killed(const fault_plan *p, int peer)
{
    for (int k = 0; k < p->n; k++)
        if (p->f[k].peer == peer && p->f[k].kind != FAULT_STOP && p->f[k].stage > 0)
            return 1;
    return 0;
}

int fault_plan_restart_pending(const fault_plan *p, int peer)
{
    for (int k = 0; k < p->n; k++)
        if (p->f[k].peer == peer && p->f[k].kind == FAULT_RESTART && p->f[k].stage == 1)
            return 1;
    return 0;
}
