/* Generators: the standard schedules, defined edge by edge in
 * topologies/FORMAT.md ("Generators"). Every one ends in topo_build, so a
 * generated schedule passes the same validation as a hand-written file. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topologies/topo_impl.h"

#define MAX_PARAMS 3
#define RANDOM_TRIES 100

typedef struct gen {
    const char *name;
    int n, n_phases;
    size_t *at;
    topo_edge *edges;
    size_t m;
    uint64_t val[MAX_PARAMS];
    int given[MAX_PARAMS];
    char kind[64];
    parse_error *e;
} gen;

typedef struct gen_kind {
    const char *name;
    const char *keys[MAX_PARAMS];
    int (*make)(gen *g);
} gen_kind;

/* Smallest L >= 1 with 2^L >= n: the period of the exponential graphs. */
static int log2_ceil(int n)
{
    int L = 0;
    while ((1L << L) < n)
        L++;
    return L ? L : 1;
}

static int fail(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(gen *g, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    topo_err(g->e, 0, "%s: %s", g->name, msg);
    return -EINVAL;
}

/* Room for n_phases phases of at most per_peer out-edges per peer. */
static int alloc(gen *g, int n_phases, int per_peer)
{
    if ((long)n_phases * (g->n + 1) > TOPO_MAX_PEER_PHASES)
        return fail(g, "%d phases of %d peers exceed the limit of %ld peer-phases", n_phases, g->n,
                    TOPO_MAX_PEER_PHASES);
    if ((long)n_phases * g->n * per_peer > TOPO_MAX_EDGES)
        return fail(g, "%ld edges exceed the limit of %ld", (long)n_phases * g->n * per_peer, TOPO_MAX_EDGES);
    size_t cap = (size_t)n_phases * (size_t)g->n * (size_t)per_peer;
    g->n_phases = n_phases;
    g->at = calloc((size_t)n_phases + 1, sizeof *g->at);
    g->edges = malloc((cap ? cap : 1) * sizeof *g->edges);
    g->m = 0;
    if (!g->at || !g->edges) {
        topo_err(g->e, 0, "out of memory");
        return -ENOMEM;
    }
    return 0;
}

/* A self-edge only arises for n = 1, where every offset is 0 mod n. */
static void add(gen *g, int src, int dst)
{
    if (src != dst)
        g->edges[g->m++] = (topo_edge){src, dst, -1.0};
}

static void end_phase(gen *g, int p) { g->at[p + 1] = g->m; }

static int make_ring(gen *g)
{
    int rc = alloc(g, 1, 1);
    for (int i = 0; rc == 0 && i < g->n; i++)
        add(g, i, (i + 1) % g->n);
    if (rc == 0)
        end_phase(g, 0);
    snprintf(g->kind, sizeof g->kind, "ring");
    return rc;
}

static int make_exponential(gen *g)
{
    int L = log2_ceil(g->n), rc = alloc(g, L, 1);
    for (int p = 0; rc == 0 && p < L; p++) {
        for (int i = 0; i < g->n; i++)
            add(g, i, (int)((i + (1L << p)) % g->n));
        end_phase(g, p);
    }
    snprintf(g->kind, sizeof g->kind, "exponential");
    return rc;
}

static int make_npeer(gen *g)
{
    int L = log2_ceil(g->n);
    long K = g->given[0] ? (long)g->val[0] : (L < 2 ? L : 2);
    if (K < 1 || K > L)
        return fail(g, "out=%llu must be from 1 to log2 n = %d for %d peers", (unsigned long long)g->val[0], L, g->n);
    int rc = alloc(g, L, (int)K);
    for (int p = 0; rc == 0 && p < L; p++) {
        for (int i = 0; i < g->n; i++)
            for (int j = 0; j < K; j++)
                add(g, i, (int)((i + (1L << ((p + j) % L))) % g->n));
        end_phase(g, p);
    }
    snprintf(g->kind, sizeof g->kind, "n-peer-exponential out=%ld", K);
    return rc;
}

static int make_bipartite(gen *g)
{
    if (g->n % 2)
        return fail(g, "needs an even peer count (even peers send to odd ones and back), not %d", g->n);
    int L = log2_ceil(g->n), rc = alloc(g, L, 1);
    for (int p = 0; rc == 0 && p < L; p++) {
        long s = p == 0 ? 1 : 1 + (1L << p); /* odd, so every edge crosses the even/odd halves */
        for (int i = 0; i < g->n; i++)
            add(g, i, (int)((i + s) % g->n));
        end_phase(g, p);
    }
    snprintf(g->kind, sizeof g->kind, "bipartite-exponential");
    return rc;
}

static int make_torus(gen *g)
{
    long n = g->n, R = (long)g->val[0], C = (long)g->val[1];
    if (g->given[0] && (R < 1 || R > n))
        return fail(g, "rows=%ld out of range 1..%ld", R, n);
    if (g->given[1] && (C < 1 || C > n))
        return fail(g, "cols=%ld out of range 1..%ld", C, n);
    if (!g->given[0] && !g->given[1]) {
        /* Near-square: the largest divisor of n not above sqrt(n). */
        for (R = 1; (R + 1) * (R + 1) <= n; R++)
            ;
        while (n % R)
            R--;
        C = n / R;
    } else if (!g->given[1]) {
        C = n / R;
    } else if (!g->given[0]) {
        R = n / C;
    }
    if (R * C != n) {
        if (g->given[0] && g->given[1])
            return fail(g, "rows=%ld x cols=%ld is not the peer count %ld", R, C, n);
        return fail(g, "%s=%ld does not divide the peer count %ld", g->given[0] ? "rows" : "cols",
                    g->given[0] ? R : C, n);
    }
    int rc = alloc(g, 1, 2);
    for (long r = 0; rc == 0 && r < R; r++)
        for (long c = 0; c < C; c++) {
            add(g, (int)(r * C + c), (int)(r * C + (c + 1) % C)); /* right */
            add(g, (int)(r * C + c), (int)(((r + 1) % R) * C + c)); /* down */
        }
    if (rc == 0)
        end_phase(g, 0);
    snprintf(g->kind, sizeof g->kind, "torus rows=%ld cols=%ld", R, C);
    return rc;
}

static int make_complete(gen *g)
{
    if (g->n - 1 > TOPO_MAX_OUT)
        return fail(g, "%d peers would give each %d out-neighbours, at most %d", g->n, g->n - 1, TOPO_MAX_OUT);
    int rc = alloc(g, 1, g->n);
    for (int i = 0; rc == 0 && i < g->n; i++)
        for (int j = 0; j < g->n; j++)
            add(g, i, j);
    if (rc == 0)
        end_phase(g, 0);
    snprintf(g->kind, sizeof g->kind, "complete");
    return rc;
}

static int make_star(gen *g)
{
    uint64_t c = g->val[0];
    if (c >= (uint64_t)g->n)
        return fail(g, "center=%llu out of range 0..%d", (unsigned long long)c, g->n - 1);
    if (g->n - 1 > TOPO_MAX_OUT)
        return fail(g, "%d peers would give the center %d out-neighbours, at most %d", g->n, g->n - 1,
                    TOPO_MAX_OUT);
    int rc = alloc(g, 1, 2); /* 2(n - 1) edges: n - 1 out of the center, one out of each leaf */
    for (int i = 0; rc == 0 && i < g->n; i++)
        if (i != (int)c)
            add(g, (int)c, i), add(g, i, (int)c);
    if (rc == 0)
        end_phase(g, 0);
    snprintf(g->kind, sizeof g->kind, "star center=%llu", (unsigned long long)c);
    return rc;
}

static int make_random(gen *g)
{
    const int n = g->n;
    if (n < 2)
        return fail(g, "needs at least 2 peers");
    long K = g->given[0] ? (long)g->val[0] : (n - 1 < 2 ? n - 1 : 2);
    uint64_t seed = g->given[1] ? g->val[1] : 1;
    long P = g->given[2] ? (long)g->val[2] : 4;
    long maxK = n - 1 < TOPO_MAX_OUT ? n - 1 : TOPO_MAX_OUT;
    if (K < 1 || K > maxK)
        return fail(g, "out=%llu out of range 1..%ld for %d peers", (unsigned long long)g->val[0], maxK, n);
    if (P < 1 || P > TOPO_MAX_PHASES)
        return fail(g, "phases=%llu out of range 1..%d", (unsigned long long)g->val[2], TOPO_MAX_PHASES);
    int rc = alloc(g, (int)P, (int)K);
    if (rc < 0)
        return rc;
    snprintf(g->kind, sizeof g->kind, "random out=%ld seed=%llu phases=%ld", K, (unsigned long long)seed, P);
    /* Redraw the whole schedule from the continuing stream until its union is
     * strongly connected: the result is still a function of the seed alone. */
    uint64_t s = seed;
    for (int attempt = 0; attempt < RANDOM_TRIES; attempt++) {
        g->m = 0;
        for (int p = 0; p < P; p++) {
            for (int i = 0; i < n; i++) {
                size_t first = g->m;
                while (g->m - first < (size_t)K) {
                    /* uniform over the n - 1 others: draw in [0, n-1), skip self */
                    int d = (int)topo_rng_below(&s, (uint64_t)n - 1);
                    d += d >= i;
                    int dup = 0;
                    for (size_t k = first; k < g->m && !dup; k++)
                        dup = g->edges[k].dst == d;
                    if (!dup)
                        add(g, i, d);
                }
            }
            end_phase(g, p);
        }
        int who, from_zero;
        int c = topo_connected(n, (int)P, g->at, g->edges, &who, &from_zero);
        if (c < 0) {
            topo_err(g->e, 0, "out of memory");
            return c;
        }
        if (c)
            return 0;
    }
    return fail(g, "no strongly connected schedule in %d draws from seed %llu: raise out or phases", RANDOM_TRIES,
                (unsigned long long)seed);
}

static const gen_kind KINDS[] = {
    {"ring", {0}, make_ring},
    {"exponential", {0}, make_exponential},
    {"n-peer-exponential", {"out"}, make_npeer},
    {"bipartite-exponential", {0}, make_bipartite},
    {"torus", {"rows", "cols"}, make_torus},
    {"complete", {0}, make_complete},
    {"star", {"center"}, make_star},
    {"random", {"out", "seed", "phases"}, make_random},
};

/* Both strings hold "key=value" words; kind's first word is the name. */
static int parse_params(gen *g, const gen_kind *k, const char *s)
{
    while (s && *s) {
        while (*s == ' ' || *s == '\t' || *s == ',')
            s++;
        if (!*s)
            break;
        size_t len = strcspn(s, " \t,");
        const char *eq = memchr(s, '=', len);
        char word[48];
        snprintf(word, sizeof word, "%.*s", (int)(len < 40 ? len : 40), s);
        if (!eq)
            return fail(g, "bad parameter '%s' (expected key=value)", word);
        int idx = -1;
        for (int j = 0; j < MAX_PARAMS && k->keys[j]; j++)
            if (strlen(k->keys[j]) == (size_t)(eq - s) && !strncmp(k->keys[j], s, (size_t)(eq - s)))
                idx = j;
        if (idx < 0) {
            if (!k->keys[0])
                return fail(g, "takes no parameters, got '%s'", word);
            char keys[64] = "";
            for (int j = 0; j < MAX_PARAMS && k->keys[j]; j++)
                snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s%s", j ? ", " : "", k->keys[j]);
            return fail(g, "unknown parameter '%s' (takes %s)", word, keys);
        }
        if (g->given[idx])
            return fail(g, "parameter '%s' given twice", k->keys[idx]);
        uint64_t v = 0;
        const char *p = eq + 1, *end = s + len;
        if (p == end)
            return fail(g, "'%s' has no value", word);
        for (; p < end; p++) {
            if (*p < '0' || *p > '9' || v > (UINT64_MAX - 9) / 10)
                return fail(g, "'%s': the value must be a non-negative integer", word);
            v = v * 10 + (uint64_t)(*p - '0');
        }
        /* Parameters other than a seed are small; clamp so they stay printable as long. */
        if (strcmp(k->keys[idx], "seed") && v > 1u << 30)
            v = 1u << 30;
        g->val[idx] = v;
        g->given[idx] = 1;
        s += len;
    }
    return 0;
}

int topo_generate(topo *t, const char *kind, int n_peers, const char *params, parse_error *e)
{
    parse_error dummy;
    if (!e)
        e = &dummy;
    memset(e, 0, sizeof *e);
    if (t)
        memset(t, 0, sizeof *t);
    if (!t || !kind) {
        topo_err(e, 0, "no topology or generator name");
        return -EINVAL;
    }
    while (*kind == ' ' || *kind == '\t')
        kind++;
    size_t len = strcspn(kind, " \t,");
    const gen_kind *k = NULL;
    for (size_t i = 0; i < sizeof KINDS / sizeof *KINDS; i++)
        if (strlen(KINDS[i].name) == len && !strncmp(KINDS[i].name, kind, len))
            k = &KINDS[i];
    if (!k) {
        topo_err(e, 0,
                 "unknown generator '%.*s' (expected ring, exponential, n-peer-exponential, "
                 "bipartite-exponential, torus, complete, star or random)",
                 (int)(len < 40 ? len : 40), kind);
        return -EINVAL;
    }
    gen g = {.name = k->name, .n = n_peers, .e = e};
    if (n_peers < 1 || n_peers > TOPO_MAX_PEERS)
        return fail(&g, "peer count %d out of range 1..%d", n_peers, TOPO_MAX_PEERS);
    int rc = parse_params(&g, k, kind + len);
    if (rc == 0)
        rc = parse_params(&g, k, params);
    if (rc == 0)
        rc = k->make(&g);
    if (rc < 0) {
        free(g.at);
        free(g.edges);
        return rc;
    }
    return topo_build(t, g.n, g.n_phases, 0, g.at, g.edges, g.kind, e);
}
