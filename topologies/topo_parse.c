/* The .topo parser (grammar in topologies/FORMAT.md). Line by line, in the
 * manner of wg(8)'s config parser: every problem that belongs to one line is
 * reported with that line; only whole-schedule problems (connectivity) are
 * reported with line 0. Lines, comments and tokens come from topo_lex.h,
 * which the cluster file shares. The input is untrusted (it is fuzzed): no
 * token is assumed NUL-terminated and every count is bounded before it is
 * allocated. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topologies/topo_impl.h"
#include "topologies/topo_lex.h"

#define WEIGHT_TOL 1e-6        /* same as the validator's */
#define MAX_FILE (64L << 20)   /* a .topo is hand-sized; this only stops accidents */

typedef struct parser {
    parse_error *e;
    topo_lex L;
    int line; /* for messages: the line being parsed (L.line), or the one a problem belongs to */
    int n;                   /* peer count, 0 until the peers line */
    int peers_line, gen_line;
    char gen[200];           /* the generator line after the keyword */
    int n_phases, phase_line;
    int weighted, weight_line; /* weighted: -1 until the first edge */
    topo_edge *edges;
    int *eline, *next;       /* per edge: its line; the previous edge of the same sender in this phase */
    size_t m, cap;
    size_t *at, at_cap;      /* phase offsets */
    int *head, *stamp, *deg; /* per peer, valid while stamp == current phase + 1 */
} parser;

static int perr(parser *P, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(parser *P, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    P->e->line = P->line;
    vsnprintf(P->e->msg, sizeof P->e->msg, fmt, ap);
    va_end(ap);
    return -EBADMSG;
}

static int nomem(parser *P)
{
    topo_err(P->e, P->line, "out of memory");
    return -ENOMEM;
}

/* An optionally negative decimal integer; magnitude saturates (the caller
 * range-checks and quotes the token, not the value). */
static int parse_int(topo_span t, long *v)
{
    size_t i = 0;
    int neg = 0;
    if (t.n && t.p[0] == '-')
        neg = 1, i = 1;
    if (i == t.n)
        return -1;
    long x = 0;
    for (; i < t.n; i++) {
        if (t.p[i] < '0' || t.p[i] > '9')
            return -1;
        if (x < 1000000000000L)
            x = x * 10 + (t.p[i] - '0');
    }
    *v = neg ? -x : x;
    return 0;
}

/* digits [. digits] [e [+-] digits], at least one mantissa digit: what a
 * person writes, and nothing strtod would add (hex, inf, nan, locale). */
static int parse_decimal(const char *p, size_t n, double *v)
{
    size_t i = 0, digits = 0;
    while (i < n && p[i] >= '0' && p[i] <= '9')
        i++, digits++;
    if (i < n && p[i] == '.')
        for (i++; i < n && p[i] >= '0' && p[i] <= '9'; i++)
            digits++;
    if (!digits)
        return -1;
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-'))
            i++;
        size_t start = i;
        while (i < n && p[i] >= '0' && p[i] <= '9')
            i++;
        if (i == start)
            return -1;
    }
    if (i != n || n >= 64)
        return -1;
    char buf[64];
    memcpy(buf, p, n);
    buf[n] = 0;
    *v = strtod(buf, NULL);
    return isfinite(*v) ? 0 : -1;
}

/* "0.25" or "1/4". */
static int parse_weight(topo_span t, double *w)
{
    const char *slash = memchr(t.p, '/', t.n);
    double num, den = 1;
    if (!slash)
        return parse_decimal(t.p, t.n, w);
    if (parse_decimal(t.p, (size_t)(slash - t.p), &num) ||
        parse_decimal(slash + 1, t.n - (size_t)(slash - t.p) - 1, &den) || !(den > 0))
        return -1;
    *w = num / den;
    return isfinite(*w) ? 0 : -1;
}

static int need_peers(parser *P, const char *what)
{
    if (P->n)
        return 0;
    return perr(P, "'peers N' must come before the first %s", what);
}

static int start_phase(parser *P)
{
    if (P->n_phases + 1 > TOPO_MAX_PHASES)
        return perr(P, "more than %d phases", TOPO_MAX_PHASES);
    if ((long)(P->n_phases + 1) * (P->n + 1) > TOPO_MAX_PEER_PHASES)
        return perr(P, "%d phases of %d peers exceed the limit of %ld peer-phases", P->n_phases + 1, P->n,
                    TOPO_MAX_PEER_PHASES);
    if ((size_t)P->n_phases + 2 > P->at_cap) {
        size_t cap = P->at_cap ? 2 * P->at_cap : 16;
        size_t *at = realloc(P->at, cap * sizeof *at);
        if (!at)
            return nomem(P);
        P->at = at, P->at_cap = cap;
    }
    P->at[P->n_phases++] = P->m;
    P->phase_line = P->line;
    return 0;
}

/* Weight sums are only known once the phase is complete, so they are checked
 * here and reported at the sender's first edge line in the phase. */
static int close_phase(parser *P)
{
    if (!P->n_phases)
        return 0;
    int cur = P->n_phases;
    P->at[cur] = P->m;
    if (P->weighted != 1)
        return 0;
    for (size_t k = P->at[cur - 1]; k < P->m; k++) {
        int src = P->edges[k].src;
        if (P->stamp[src] != cur)
            continue;
        P->stamp[src] = -cur; /* checked */
        double sum = 0, self = 0;
        int first = P->eline[k];
        for (int j = P->head[src]; j >= 0; j = P->next[j]) {
            sum += P->edges[j].weight;
            if (P->edges[j].dst == src)
                self = P->edges[j].weight;
            first = P->eline[j];
        }
        int save = P->line;
        P->line = first;
        if (fabs(sum - 1) > WEIGHT_TOL)
            return perr(P, "peer %d's weights in phase %d sum to %.9g, not 1 (its kept share '%d -> %d:W' included)",
                        src, cur - 1, sum, src, src);
        if (self <= 0)
            return perr(P, "peer %d keeps no share in phase %d: add '%d -> %d:W' with W > 0 (a peer that keeps nothing can be left with weight 0)",
                        src, cur - 1, src, src);
        P->line = save;
    }
    return 0;
}

static int add_edge(parser *P, int src, int dst, double w)
{
    if (P->m == P->cap) {
        if (P->m >= (size_t)TOPO_MAX_EDGES)
            return perr(P, "more than %ld edges", TOPO_MAX_EDGES);
        size_t cap = P->cap ? 2 * P->cap : 64;
        topo_edge *edges = realloc(P->edges, cap * sizeof *edges);
        if (!edges)
            return nomem(P);
        P->edges = edges;
        int *eline = realloc(P->eline, cap * sizeof *eline);
        if (!eline)
            return nomem(P);
        P->eline = eline;
        int *next = realloc(P->next, cap * sizeof *next);
        if (!next)
            return nomem(P);
        P->next = next;
        P->cap = cap;
    }
    P->edges[P->m] = (topo_edge){src, dst, w};
    P->eline[P->m] = P->line;
    P->next[P->m] = P->head[src];
    P->head[src] = (int)P->m;
    P->m++;
    return 0;
}

static int parse_edge_line(parser *P, const char *s, const char *end)
{
    char q[40];
    int rc = need_peers(P, "edge");
    if (rc)
        return rc;
    if (P->gen_line)
        return perr(P, "edges and a generator (line %d) in one file: use one or the other", P->gen_line);
    const char *arrow = NULL;
    for (const char *p = s; p + 1 < end && !arrow; p++)
        if (p[0] == '-' && p[1] == '>')
            arrow = p;
    if (!arrow)
        return perr(P, "expected 'SRC -> DST ...' or a keyword (peers, generator, phase)");
    topo_span t;
    const char *l = s;
    if (!topo_lex_token(&P->L, &l, arrow, &t))
        return perr(P, "missing sender before '->'");
    long src;
    if (parse_int(t, &src))
        return perr(P, "bad sender '%s' (expected a peer id)", topo_span_quote(t, q, sizeof q));
    if (src < 0 || src >= P->n)
        return perr(P, "peer %s out of range 0..%d", topo_span_quote(t, q, sizeof q), P->n - 1);
    if (topo_lex_token(&P->L, &l, arrow, &t))
        return perr(P, "one sender per line before '->', got also '%s'", topo_span_quote(t, q, sizeof q));
    if (P->n_phases == 0 && (rc = start_phase(P)))
        return rc;
    const int cur = P->n_phases;
    if (P->stamp[src] != cur)
        P->stamp[src] = cur, P->head[src] = -1, P->deg[src] = 0;

    const char *r = arrow + 2;
    int targets = 0;
    while (topo_lex_token(&P->L, &r, end, &t)) {
        targets++;
        const char *colon = memchr(t.p, ':', t.n);
        topo_span id = {t.p, colon ? (size_t)(colon - t.p) : t.n};
        long dst;
        if (parse_int(id, &dst))
            return perr(P, "bad target '%s' (expected a peer id, or id:weight)", topo_span_quote(id, q, sizeof q));
        if (dst < 0 || dst >= P->n)
            return perr(P, "peer %s out of range 0..%d", topo_span_quote(id, q, sizeof q), P->n - 1);
        int has = colon != NULL;
        if (P->weighted < 0)
            P->weighted = has, P->weight_line = P->line;
        else if (has != P->weighted)
            return perr(P, "edge %ld -> %ld %s a weight but the edges from line %d %s: give every edge a weight, or none",
                        src, dst, has ? "has" : "lacks", P->weight_line, has ? "do not" : "do");
        double w = -1;
        if (has) {
            topo_span ws = {colon + 1, t.n - id.n - 1};
            if (parse_weight(ws, &w))
                return perr(P, "bad weight '%s' (expected a number like 0.25 or a fraction like 1/4)",
                            topo_span_quote(ws, q, sizeof q));
            if (!(w > 0 && w <= 1))
                return perr(P, "weight %s of edge %ld -> %ld out of range (0, 1]", topo_span_quote(ws, q, sizeof q), src, dst);
        } else if (dst == src) {
            return perr(P, "self-edge %ld -> %ld without a weight: with uniform mixing the kept share is implicit",
                        src, dst);
        }
        for (int j = P->head[src]; j >= 0; j = P->next[j])
            if (P->edges[j].dst == dst) {
                if (P->eline[j] == P->line)
                    return perr(P, "duplicate edge %ld -> %ld in phase %d", src, dst, cur - 1);
                return perr(P, "duplicate edge %ld -> %ld in phase %d (first on line %d)", src, dst, cur - 1,
                            P->eline[j]);
            }
        if (dst != src && ++P->deg[src] > TOPO_MAX_OUT)
            return perr(P, "peer %ld has more than %d out-neighbours in phase %d", src, TOPO_MAX_OUT, cur - 1);
        if ((rc = add_edge(P, (int)src, (int)dst, w)))
            return rc;
    }
    if (!targets)
        return perr(P, "no targets after '->'");
    return 0;
}

static int parse_keyword(parser *P, topo_span kw, const char *s, const char *end)
{
    char q[40];
    topo_span t;
    int rc;
    if (topo_span_is(kw, "peers")) {
        if (P->n)
            return perr(P, "peers given twice (first on line %d)", P->peers_line);
        if (!topo_lex_token(&P->L, &s, end, &t))
            return perr(P, "peers needs a count, e.g. 'peers 8'");
        long n;
        if (parse_int(t, &n))
            return perr(P, "bad peer count '%s' (expected an integer)", topo_span_quote(t, q, sizeof q));
        if (n < 1 || n > TOPO_MAX_PEERS)
            return perr(P, "peer count %s out of range 1..%d", topo_span_quote(t, q, sizeof q), TOPO_MAX_PEERS);
        if (topo_lex_token(&P->L, &s, end, &t))
            return perr(P, "unexpected '%s' after the peer count", topo_span_quote(t, q, sizeof q));
        P->n = (int)n;
        P->peers_line = P->line;
        P->head = malloc((size_t)n * sizeof *P->head);
        P->stamp = calloc((size_t)n, sizeof *P->stamp);
        P->deg = malloc((size_t)n * sizeof *P->deg);
        if (!P->head || !P->stamp || !P->deg)
            return nomem(P);
        return 0;
    }
    if (topo_span_is(kw, "generator")) {
        if ((rc = need_peers(P, "generator")))
            return rc;
        if (P->gen_line)
            return perr(P, "a second generator (first on line %d)", P->gen_line);
        if (P->n_phases)
            return perr(P, "a generator and explicit phases (line %d) in one file: use one or the other",
                        P->phase_line);
        while (s < end && topo_lex_space(&P->L, *s))
            s++;
        while (end > s && topo_lex_space(&P->L, end[-1]))
            end--;
        if (s == end)
            return perr(P, "generator needs a name, e.g. 'generator exponential'");
        if ((size_t)(end - s) >= sizeof P->gen)
            return perr(P, "generator line too long");
        memcpy(P->gen, s, (size_t)(end - s));
        P->gen[end - s] = 0;
        if (memchr(P->gen, 0, (size_t)(end - s)))
            return perr(P, "NUL byte in the generator line");
        P->gen_line = P->line;
        return 0;
    }
    if (topo_span_is(kw, "phase")) {
        if ((rc = need_peers(P, "phase")))
            return rc;
        if (P->gen_line)
            return perr(P, "explicit phases and a generator (line %d) in one file: use one or the other",
                        P->gen_line);
        if (topo_lex_token(&P->L, &s, end, &t)) {
            long label;
            if (parse_int(t, &label))
                return perr(P, "bad phase number '%s'", topo_span_quote(t, q, sizeof q));
            if (label != P->n_phases)
                return perr(P, "phase %s out of order: this is phase %d", topo_span_quote(t, q, sizeof q), P->n_phases);
            if (topo_lex_token(&P->L, &s, end, &t))
                return perr(P, "unexpected '%s' after the phase number", topo_span_quote(t, q, sizeof q));
        }
        if ((rc = close_phase(P)))
            return rc;
        return start_phase(P);
    }
    return perr(P, "unknown keyword '%s' (expected peers, generator, phase or an edge 'SRC -> DST')",
                topo_span_quote(kw, q, sizeof q));
}

/* One line, its comment already cut off by the lexer. */
static int parse_line(parser *P, const char *s, const char *end)
{
    if (memchr(s, 0, (size_t)(end - s)))
        return perr(P, "NUL byte");
    topo_span kw;
    const char *r = s;
    if (!topo_lex_token(&P->L, &r, end, &kw))
        return 0;
    char c = kw.p[0];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return parse_keyword(P, kw, r, end);
    return parse_edge_line(P, s, end);
}

static void parser_free(parser *P)
{
    free(P->edges), free(P->eline), free(P->next), free(P->at);
    free(P->head), free(P->stamp), free(P->deg);
}

static int finish(parser *P, topo *t, const char *name)
{
    int rc;
    P->line = 0;
    if (!P->n)
        return perr(P, "empty topology: expected 'peers N' and then a generator or phases");
    if (P->gen_line) {
        rc = topo_generate(t, P->gen, P->n, NULL, P->e);
        snprintf(P->e->file, sizeof P->e->file, "%s", name);
        if (rc < 0)
            P->e->line = P->gen_line;
        return rc == -EINVAL ? -EBADMSG : rc;
    }
    if (!P->n_phases) {
        P->line = P->peers_line;
        return perr(P, "no generator and no phases: add 'generator KIND' or edges 'SRC -> DST'");
    }
    if ((rc = close_phase(P)))
        return rc;
    rc = topo_build(t, P->n, P->n_phases, P->weighted == 1, P->at, P->edges, "explicit", P->e);
    P->at = NULL, P->edges = NULL; /* owned by topo_build now */
    return rc == -EINVAL ? -EBADMSG : rc;
}

int topo_parse(topo *t, const char *text, size_t len, const char *name, parse_error *e)
{
    parse_error dummy;
    if (!e)
        e = &dummy;
    memset(e, 0, sizeof *e);
    if (!name)
        name = "<text>";
    snprintf(e->file, sizeof e->file, "%s", name);
    if (t)
        memset(t, 0, sizeof *t);
    if (!t || (!text && len)) {
        topo_err(e, 0, "no topology or no text");
        return -EINVAL;
    }
    parser P = {.e = e, .weighted = -1};
    topo_lex_init(&P.L, text, len, TOPO_LEX_COMMA);
    int rc;
    const char *s, *end;
    while ((rc = topo_lex_line(&P.L, &s, &end)) == TOPO_LEX_LINE) {
        P.line = P.L.line;
        if ((rc = parse_line(&P, s, end)) < 0)
            break;
    }
    if (rc == -ERANGE) /* the lexer's: parse_line says -EBADMSG or -ENOMEM */
        rc = perr(&P, "too many lines");
    if (rc == TOPO_LEX_END)
        rc = finish(&P, t, name);
    parser_free(&P);
    if (rc < 0)
        topo_free(t);
    return rc;
}

int topo_load(topo *t, const char *path, parse_error *e)
{
    parse_error dummy;
    if (!e)
        e = &dummy;
    memset(e, 0, sizeof *e);
    if (t)
        memset(t, 0, sizeof *t);
    if (!path || !t) {
        topo_err(e, 0, "no topology or no path");
        return -EINVAL;
    }
    snprintf(e->file, sizeof e->file, "%s", path);
    char *buf;
    size_t len;
    int rc = topo_lex_read_file(path, MAX_FILE, &buf, &len);
    if (rc == -EFBIG)
        topo_err(e, 0, "larger than %ld MiB: not a topology file", MAX_FILE >> 20);
    else if (rc == -ENOMEM)
        topo_err(e, 0, "out of memory");
    else if (rc < 0)
        topo_err(e, 0, "%s", strerror(-rc));
    if (rc == 0)
        rc = topo_parse(t, buf, len, path, e);
    free(buf);
    return rc;
}
