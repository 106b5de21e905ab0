/* The run's mass from the peers' ledgers; see launch_ledger.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/launch/launch_ledger.h"

typedef struct ledger_edge {
    int peer;             /* the other end */
    unsigned long long incarnation; /* in-edges: the sender's, as the receiver last heard it */
    double w;             /* running total of weight sent (out) or applied (in) */
} ledger_edge;

typedef struct ledger {
    int seen; /* a "peer" line was read */
    unsigned long long incarnation;
    double w;
    double adopted, rescaled; /* summed over every run of the peer that wrote a ledger or resumed */
    ledger_edge *out, *in;
    int n_out, n_in, cap_out, cap_in;
} ledger;

static int push(ledger_edge **a, int *n, int *cap, ledger_edge e)
{
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 16;
        ledger_edge *p = realloc(*a, (size_t)c * sizeof *p);
        if (!p)
            return -ENOMEM;
        *a = p, *cap = c;
    }
    (*a)[(*n)++] = e;
    return 0;
}

/* One line of a log; lines that are no ledger line are skipped. A "peer" line
 * starts a new ledger: a log appended to by a restarted peer keeps the last. */
static int parse_line(ledger *l, const char *line)
{
    int id, peer;
    long round;
    unsigned long long inc, seq;
    double w, a;
    if (strncmp(line, "{\"ledger\": ", 11) != 0)
        return 0;
    if (sscanf(line,
               "{\"ledger\": \"peer\", \"id\": %d, \"incarnation\": %llu, \"w\": %lf, \"round\": %ld, "
               "\"w_adopted\": %lf}",
               &id, &inc, &w, &round, &a) == 5) {
        l->seen = 1, l->incarnation = inc, l->w = w, l->n_out = l->n_in = 0;
        l->adopted += a;
        return 0;
    }
    if (sscanf(line, "{\"ledger\": \"resume\", \"w_checkpoint\": %lf, \"w\": %lf}", &a, &w) == 2) {
        l->rescaled += w - a;
        return 0;
    }
    if (sscanf(line, "{\"ledger\": \"out\", \"to\": %d, \"seq\": %llu, \"w_total\": %lf}", &peer, &seq, &w) == 3)
        return push(&l->out, &l->n_out, &l->cap_out, (ledger_edge){peer, 0, w});
    if (sscanf(line, "{\"ledger\": \"in\", \"from\": %d, \"incarnation\": %llu, \"seq\": %llu, \"w_total\": %lf}", &peer,
               &inc, &seq, &w) == 4)
        return push(&l->in, &l->n_in, &l->cap_in, (ledger_edge){peer, inc, w});
    return -EBADMSG;
}

static int read_ledger(const char *run_dir, int i, ledger *l, char *err, size_t errlen)
{
    char path[1100];
    snprintf(path, sizeof path, "%.1024s/peer%d.jsonl", run_dir, i);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -ENOENT;
    }
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    for (long no = 1; rc == 0 && getline(&line, &cap, f) > 0; no++)
        if ((rc = parse_line(l, line)) == -EBADMSG)
            snprintf(err, errlen, "%s:%ld: not a ledger line sgp peer writes", path, no);
    free(line);
    fclose(f);
    if (rc == -ENOMEM)
        snprintf(err, errlen, "out of memory reading %s", path);
    if (rc == 0 && !l->seen) {
        snprintf(err, errlen, "%s: no ledger (the peer did not finish, or its log is elsewhere)", path);
        rc = -ENOENT;
    }
    return rc;
}

/* What receiver r applied of sender s's current incarnation. */
static double applied(const ledger *r, int s, unsigned long long incarnation)
{
    for (int k = 0; k < r->n_in; k++)
        if (r->in[k].peer == s)
            return r->in[k].incarnation == incarnation ? r->in[k].w : 0.0;
    return 0.0;
}

int launch_ledger(const char *run_dir, int n, const uint8_t *absent, launch_mass *m, char *err, size_t errlen)
{
    *m = (launch_mass){0};
    ledger *l = calloc((size_t)n, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "out of memory for %d ledgers", n);
        return -ENOMEM;
    }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        if (!absent || !absent[i])
            rc = read_ledger(run_dir, i, &l[i], err, errlen);
    for (int i = 0; i < n && rc == 0; i++) {
        if (absent && absent[i])
            continue;
        m->held += l[i].w;
        m->adopted += l[i].adopted;
        m->rescaled += l[i].rescaled;
        for (int k = 0; k < l[i].n_out; k++) {
            const int j = l[i].out[k].peer;
            if (j >= 0 && j < n && !(absent && absent[j]))
                m->in_flight += l[i].out[k].w - applied(&l[j], i, l[i].incarnation);
        }
    }
    for (int i = 0; i < n; i++)
        free(l[i].out), free(l[i].in);
    free(l);
    return rc;
}
