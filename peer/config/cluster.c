/* The cluster file parser (format in peer/config/CLUSTER.md). Line by line, in the
 * manner of wg(8)'s config parser: the first problem in file order is
 * reported with its line, and problems of the whole file (a missing line)
 * with line 0. Lines, comments and tokens come from topologies/topo_lex.h,
 * the .topo parser's lexer, so both files are written by the same rules. The
 * input is untrusted (it is fuzzed): tokens are spans, not NUL-terminated
 * strings, and memory grows with the lines read, never with a number read. */
#include <arpa/inet.h>
#include <errno.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/config/cluster.h"
#include "peer/config/keyfile.h"
#include "topologies/topo_lex.h"

typedef struct parser {
    cluster *c;
    parse_error *e;
    topo_lex L;
    int line; /* for messages: the line being parsed (L.line), or the one a problem belongs to */
    int name_line, topo_line, slots_line, admit_line;
    unsigned long slots;
    uint8_t *seen;        /* bitmap over ids 0..CLUSTER_MAX_PEERS-1 */
    uint32_t *keys, *addrs; /* open-addressing sets of peer index + 1 (0: empty) */
    size_t tcap;
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
    P->e->line = P->line;
    snprintf(P->e->msg, sizeof P->e->msg, "out of memory");
    return -ENOMEM;
}

static int is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Decimal digits only, value at most max. */
static int parse_uint(topo_span t, unsigned long max, unsigned long *v)
{
    if (!t.n || t.n > 10)
        return -1;
    unsigned long x = 0;
    for (size_t i = 0; i < t.n; i++) {
        if (!is_digit(t.p[i]))
            return -1;
        x = x * 10 + (unsigned long)(t.p[i] - '0');
    }
    if (x > max)
        return -1;
    *v = x;
    return 0;
}

static int name_ok(const char *s, size_t n)
{
    if (!n || n > CLUSTER_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_alnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
            return 0;
    return 1;
}

/* Any bytes but whitespace, control characters and '#' (which starts a
 * comment), so that what cluster_write writes reads back the same. */
static int path_ok(const char *s, size_t n)
{
    if (!n || n > CLUSTER_PATH_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= 0x20 || ch == 0x7f || ch == '#')
            return 0;
    }
    return 1;
}

/* Is [s, s+n) a host we can write down: an IPv4 literal, an IPv6 literal
 * (bracketed in the file, given here without brackets, optionally with a
 * %zone), or a DNS name? Sets *family; *why says what is wrong. */
static int host_check(const char *s, size_t n, int bracketed, int *family, const char **why)
{
    char buf[64];
    if (bracketed) {
        const char *pct = memchr(s, '%', n);
        size_t ipn = pct ? (size_t)(pct - s) : n;
        if (ipn >= sizeof buf) {
            *why = "bad IPv6 address";
            return -1;
        }
        memcpy(buf, s, ipn);
        buf[ipn] = 0;
        struct in6_addr a6;
        if (inet_pton(AF_INET6, buf, &a6) != 1) {
            *why = "bad IPv6 address";
            return -1;
        }
        if (pct) {
            size_t zn = n - ipn - 1;
            if (!zn || zn > 15) {
                *why = "bad IPv6 zone";
                return -1;
            }
            for (size_t i = 0; i < zn; i++)
                if (!is_alnum(pct[1 + i]) && pct[1 + i] != '_' && pct[1 + i] != '.' && pct[1 + i] != '-') {
                    *why = "bad IPv6 zone";
                    return -1;
                }
        }
        *family = CLUSTER_IPV6;
        return 0;
    }
    if (!n) {
        *why = "missing host";
        return -1;
    }
    if (memchr(s, ':', n)) {
        *why = "IPv6 addresses go in brackets, as in [::1]:7000";
        return -1;
    }
    if (n > CLUSTER_HOST_MAX) {
        *why = "host name longer than 253 characters";
        return -1;
    }
    /* A name whose last label is all digits can only be meant as an IPv4
     * address (no top-level domain is numeric), so it must be one. */
    size_t last = n;
    while (last > 0 && s[last - 1] != '.')
        last--;
    int numeric = last < n;
    for (size_t i = last; i < n; i++)
        numeric &= is_digit(s[i]);
    if (numeric) {
        if (n >= sizeof buf) {
            *why = "bad IPv4 address";
            return -1;
        }
        memcpy(buf, s, n);
        buf[n] = 0;
        struct in_addr a4;
        if (inet_pton(AF_INET, buf, &a4) != 1) {
            *why = "bad IPv4 address";
            return -1;
        }
        *family = CLUSTER_IPV4;
        return 0;
    }
    /* RFC 1123 labels, plus '_' (container runtimes hand out such names). */
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            size_t ln = i - start;
            if (!ln || ln > 63 || s[start] == '-' || s[i - 1] == '-') {
                *why = "bad host name";
                return -1;
            }
            start = i + 1;
        } else if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_') {
            *why = "bad host name";
            return -1;
        }
    }
    *family = CLUSTER_HOST_NAME;
    return 0;
}

/* The address in one canonical spelling, for spotting two peers at one
 * address however they are written ("::1" and "0::1", "Node" and "node"). */
static void addr_canon(const cluster_peer *p, char *buf, size_t cap)
{
    if (p->family == CLUSTER_HOST_NAME) {
        size_t i = 0;
        for (; p->host[i] && i + 1 < cap; i++)
            buf[i] = p->host[i] >= 'A' && p->host[i] <= 'Z' ? (char)(p->host[i] - 'A' + 'a') : p->host[i];
        buf[i] = 0;
        return;
    }
    char ip[64];
    const char *pct = strchr(p->host, '%');
    size_t ipn = pct ? (size_t)(pct - p->host) : strlen(p->host);
    snprintf(ip, sizeof ip, "%.*s", (int)ipn, p->host);
    unsigned char bin[16];
    int af = p->family == CLUSTER_IPV6 ? AF_INET6 : AF_INET;
    char canon[INET6_ADDRSTRLEN];
    if (inet_pton(af, ip, bin) == 1 && inet_ntop(af, bin, canon, sizeof canon))
        snprintf(buf, cap, "%s%s", canon, pct ? pct : "");
    else
        snprintf(buf, cap, "%s", p->host);
}

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const uint8_t *b = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t key_hash(const cluster_peer *p) { return fnv(0xcbf29ce484222325ULL, p->pk, SEC_KEY_BYTES); }

static uint64_t addr_hash(const cluster_peer *p)
{
    char canon[CLUSTER_HOST_MAX + 1];
    addr_canon(p, canon, sizeof canon);
    uint64_t h = fnv(0xcbf29ce484222325ULL, canon, strlen(canon));
    return fnv(h, &p->port, sizeof p->port);
}

static int same_addr(const cluster_peer *a, const cluster_peer *b)
{
    if (a->port != b->port)
        return 0;
    char ca[CLUSTER_HOST_MAX + 1], cb[CLUSTER_HOST_MAX + 1];
    addr_canon(a, ca, sizeof ca);
    addr_canon(b, cb, sizeof cb);
    return strcmp(ca, cb) == 0;
}

/* Find the peer in set tab equal to c->peers[k] (by key or by address), or
 * insert k. Returns the earlier peer's index, or -1 after inserting. */
static long set_probe(parser *P, uint32_t *tab, int by_key, uint32_t k)
{
    const cluster_peer *peers = P->c->peers, *q = &peers[k];
    size_t mask = P->tcap - 1, i = (size_t)(by_key ? key_hash(q) : addr_hash(q)) & mask;
    for (; tab[i]; i = (i + 1) & mask) {
        const cluster_peer *o = &peers[tab[i] - 1];
        if (by_key ? !memcmp(o->pk, q->pk, SEC_KEY_BYTES) : same_addr(o, q))
            return (long)tab[i] - 1;
    }
    tab[i] = k + 1;
    return -1;
}

static int sets_grow(parser *P)
{
    size_t cap = P->tcap ? 2 * P->tcap : 64;
    uint32_t *keys = calloc(cap, sizeof *keys), *addrs = calloc(cap, sizeof *addrs);
    if (!keys || !addrs) {
        free(keys);
        free(addrs);
        return nomem(P);
    }
    free(P->keys);
    free(P->addrs);
    P->keys = keys, P->addrs = addrs, P->tcap = cap;
    /* Re-insert in file order: no duplicates among them, so nothing is found. */
    for (int k = 0; k < P->c->n_peers - 1; k++) {
        set_probe(P, P->keys, 1, (uint32_t)k);
        set_probe(P, P->addrs, 0, (uint32_t)k);
    }
    return 0;
}

static int grow_peers(cluster *c)
{
    if (c->n_peers < c->cap)
        return 0;
    int cap = c->cap ? 2 * c->cap : 8;
    cluster_peer *p = realloc(c->peers, (size_t)cap * sizeof *p);
    if (!p)
        return -ENOMEM;
    c->peers = p, c->cap = cap;
    return 0;
}

/* "HOST:PORT" or "[IPV6]:PORT" into p->host, p->port, p->family. */
static int parse_addr(parser *P, topo_span t, uint32_t id, cluster_peer *p)
{
    char q[64], qp[16];
    topo_span host, port;
    int bracketed = t.n && t.p[0] == '[';
    if (bracketed) {
        const char *rb = memchr(t.p, ']', t.n);
        if (!rb || (size_t)(rb - t.p) + 1 == t.n || rb[1] != ':')
            return perr(P, "peer %u: '%s' is not [IPV6]:PORT", (unsigned)id, topo_span_quote(t, q, sizeof q));
        host = (topo_span){t.p + 1, (size_t)(rb - t.p) - 1};
        port = (topo_span){rb + 2, t.n - (size_t)(rb - t.p) - 2};
    } else {
        const char *colon = NULL;
        for (size_t i = t.n; i > 0; i--)
            if (t.p[i - 1] == ':') {
                colon = t.p + i - 1;
                break;
            }
        if (!colon)
            return perr(P, "peer %u: '%s' is not HOST:PORT", (unsigned)id, topo_span_quote(t, q, sizeof q));
        host = (topo_span){t.p, (size_t)(colon - t.p)};
        port = (topo_span){colon + 1, t.n - (size_t)(colon - t.p) - 1};
    }
    const char *why;
    if (host_check(host.p, host.n, bracketed, &p->family, &why) < 0)
        return perr(P, "peer %u: %s '%s'", (unsigned)id, why, topo_span_quote(host, q, sizeof q));
    unsigned long v;
    if (parse_uint(port, 65535, &v) < 0 || v == 0)
        return perr(P, "peer %u: port '%s' is not a number from 1 to 65535", (unsigned)id,
                    topo_span_quote(port, qp, sizeof qp));
    memcpy(p->host, host.p, host.n);
    p->host[host.n] = 0;
    p->port = (uint16_t)v;
    return 0;
}

static int parse_peer(parser *P, topo_span *tok, int nt)
{
    char q[64];
    if (nt != 4)
        return perr(P, "expected 'peer ID HOST:PORT KEY'%s", nt > 4 ? ", found more" : "");
    unsigned long id;
    if (parse_uint(tok[1], CLUSTER_MAX_PEERS - 1, &id) < 0)
        return perr(P, "peer id '%s' is not a number from 0 to %d", topo_span_quote(tok[1], q, sizeof q),
                    CLUSTER_MAX_PEERS - 1);
    cluster *c = P->c;
    if (grow_peers(c) < 0)
        return nomem(P);
    cluster_peer *p = &c->peers[c->n_peers];
    memset(p, 0, sizeof *p);
    p->id = (uint32_t)id;
    p->line = P->line;
    int rc = parse_addr(P, tok[2], p->id, p);
    if (rc < 0)
        return rc;
    const char *why;
    if (keyfile_pub_decode(p->pk, tok[3].p, tok[3].n, &why) < 0)
        return perr(P, "peer %lu: bad key: %s", id, why);
    if (P->seen[id >> 3] & (1u << (id & 7))) {
        for (int k = 0; k < c->n_peers; k++)
            if (c->peers[k].id == id)
                return perr(P, "peer %lu already defined on line %d", id, c->peers[k].line);
    }
    P->seen[id >> 3] |= (uint8_t)(1u << (id & 7));
    c->n_peers++;
    if ((size_t)c->n_peers * 2 > P->tcap && (rc = sets_grow(P)) < 0)
        return rc;
    uint32_t k = (uint32_t)c->n_peers - 1;
    long o = set_probe(P, P->keys, 1, k);
    if (o >= 0)
        return perr(P, "peer %lu has the same key as peer %u (line %d)", id, (unsigned)c->peers[o].id,
                    c->peers[o].line);
    if ((o = set_probe(P, P->addrs, 0, k)) >= 0)
        return perr(P, "peer %lu has the same address as peer %u (line %d)", id, (unsigned)c->peers[o].id,
                    c->peers[o].line);
    return 0;
}

static int parse_line(parser *P, const char *s, const char *end)
{
    topo_span tok[5];
    int nt = 0;
    while (nt < 5 && topo_lex_token(&P->L, &s, end, &tok[nt]))
        nt++;
    if (!nt)
        return 0;
    char q[64];
    cluster *c = P->c;
    if (topo_span_is(tok[0], "cluster")) {
        if (nt != 2)
            return perr(P, "expected 'cluster NAME'");
        if (P->name_line)
            return perr(P, "'cluster' given twice (first on line %d)", P->name_line);
        if (!name_ok(tok[1].p, tok[1].n))
            return perr(P, "cluster name '%s' must be 1 to %d letters, digits, '.', '_' or '-'",
                        topo_span_quote(tok[1], q, sizeof q), CLUSTER_NAME_MAX);
        memcpy(c->name, tok[1].p, tok[1].n);
        c->name[tok[1].n] = 0;
        P->name_line = P->line;
        return 0;
    }
    if (topo_span_is(tok[0], "topology")) {
        if (nt != 2)
            return perr(P, "expected 'topology PATH' (a path without spaces)");
        if (P->topo_line)
            return perr(P, "'topology' given twice (first on line %d)", P->topo_line);
        if (!path_ok(tok[1].p, tok[1].n))
            return perr(P, "topology path '%s' is longer than %d bytes or has control characters",
                        topo_span_quote(tok[1], q, sizeof q), CLUSTER_PATH_MAX);
        memcpy(c->topology, tok[1].p, tok[1].n);
        c->topology[tok[1].n] = 0;
        P->topo_line = P->line;
        return 0;
    }
    if (topo_span_is(tok[0], "peer"))
        return parse_peer(P, tok, nt);
    if (topo_span_is(tok[0], "slots")) {
        if (nt != 2 || parse_uint(tok[1], CLUSTER_MAX_PEERS, &P->slots) < 0 || P->slots < 1)
            return perr(P, "expected 'slots N' with N from 1 to %d", CLUSTER_MAX_PEERS);
        if (P->slots_line)
            return perr(P, "'slots' given twice (first on line %d)", P->slots_line);
        P->slots_line = P->line;
        return 0;
    }
    if (topo_span_is(tok[0], "admit")) {
        const char *why;
        if (nt != 2)
            return perr(P, "expected 'admit KEY' (the admission key of sgp cluster keygen)");
        if (P->admit_line)
            return perr(P, "'admit' given twice (first on line %d)", P->admit_line);
        if (keyfile_pub_decode(c->admit_pk, tok[1].p, tok[1].n, &why) < 0)
            return perr(P, "bad admission key: %s", why);
        c->has_admit = 1;
        P->admit_line = P->line;
        return 0;
    }
    return perr(P, "unknown keyword '%s' (expected cluster, topology, peer, slots or admit)",
                topo_span_quote(tok[0], q, sizeof q));
}

static char *resolve(const char *dir, const char *path)
{
    if (path[0] == '/' || !dir || !dir[0] || !strcmp(dir, "."))
        return strdup(path);
    size_t dn = strlen(dir), pn = strlen(path);
    char *r = malloc(dn + pn + 2);
    if (r)
        snprintf(r, dn + pn + 2, "%s%s%s", dir, dir[dn - 1] == '/' ? "" : "/", path);
    return r;
}

/* After the last line: ids must be exactly 0..n-1. With duplicates already
 * refused, that fails only if some id is >= n; report the first such line
 * and the smallest id that is missing. */
static int check_ids(parser *P)
{
    cluster *c = P->c;
    const uint32_t n = (uint32_t)c->n_peers;
    for (int k = 0; k < c->n_peers; k++)
        if (c->peers[k].id >= n) {
            uint32_t miss = 0;
            while (P->seen[miss >> 3] & (1u << (miss & 7)))
                miss++;
            P->line = c->peers[k].line;
            return perr(P, "peer id %u is out of range: %u peers have ids 0 to %u (peer %u is missing)",
                        (unsigned)c->peers[k].id, (unsigned)n, (unsigned)n - 1, (unsigned)miss);
        }
    /* Put peer i at index i: the ids are a permutation of 0..n-1. */
    for (uint32_t i = 0; i < n; i++)
        while (c->peers[i].id != i) {
            cluster_peer t = c->peers[c->peers[i].id];
            c->peers[c->peers[i].id] = c->peers[i];
            c->peers[i] = t;
        }
    return 0;
}

/* `slots N`: ids n..N-1 are vacant, for peers a credential admits. */
static int add_slots(parser *P)
{
    cluster *c = P->c;
    c->n_founders = c->n_peers;
    if (!P->slots_line)
        return 0;
    P->line = P->slots_line;
    if (P->slots < (unsigned long)c->n_peers)
        return perr(P, "slots %lu is fewer than the %d peer lines", P->slots, c->n_peers);
    if (P->slots > (unsigned long)c->n_peers && !c->has_admit)
        return perr(P, "slots past the peer lines are for admitted peers: the file needs an 'admit KEY' line");
    if ((int)P->slots == c->n_peers)
        return 0;
    return cluster_add_slots(c, (int)P->slots, c->admit_pk) < 0 ? nomem(P) : 0;
}

int cluster_parse(cluster *c, const char *text, size_t len, const char *name, const char *dir, parse_error *e)
{
    parse_error dummy;
    if (!e)
        e = &dummy;
    memset(e, 0, sizeof *e);
    snprintf(e->file, sizeof e->file, "%s", name ? name : "cluster");
    if (c)
        memset(c, 0, sizeof *c);
    if (!c || (!text && len)) {
        snprintf(e->msg, sizeof e->msg, "no cluster or no text");
        return -EINVAL;
    }
    if (len > (size_t)CLUSTER_FILE_MAX) {
        snprintf(e->msg, sizeof e->msg, "larger than %ld MiB: not a cluster file", CLUSTER_FILE_MAX >> 20);
        return -EFBIG;
    }
    parser P = {.c = c, .e = e};
    int rc = 0;
    if (!(P.seen = calloc(CLUSTER_MAX_PEERS / 8, 1))) {
        rc = nomem(&P);
        goto out;
    }
    topo_lex_init(&P.L, text, len, 0);
    const char *s, *end;
    while ((rc = topo_lex_line(&P.L, &s, &end)) == TOPO_LEX_LINE) {
        P.line = P.L.line;
        if ((rc = parse_line(&P, s, end)) < 0)
            goto out;
    }
    if (rc < 0) { /* 2^31 lines cannot fit under CLUSTER_FILE_MAX; the lexer says so all the same */
        rc = perr(&P, "too many lines");
        goto out;
    }
    P.line = 0;
    if (!P.name_line)
        rc = perr(&P, "no 'cluster NAME' line");
    else if (!P.topo_line)
        rc = perr(&P, "no 'topology PATH' line");
    else if (!c->n_peers)
        rc = perr(&P, "no 'peer' lines");
    else if ((rc = check_ids(&P)) == 0 && (rc = add_slots(&P)) == 0 &&
             !(c->topology_path = resolve(dir, c->topology)))
        rc = nomem(&P);
out:
    free(P.seen);
    free(P.keys);
    free(P.addrs);
    if (rc < 0)
        cluster_free(c);
    return rc;
}

int cluster_load(cluster *c, const char *path, parse_error *e)
{
    parse_error dummy;
    if (!e)
        e = &dummy;
    memset(e, 0, sizeof *e);
    if (c)
        memset(c, 0, sizeof *c);
    if (!c || !path) {
        snprintf(e->msg, sizeof e->msg, "no cluster or no path");
        return -EINVAL;
    }
    snprintf(e->file, sizeof e->file, "%s", path);
    char *buf;
    size_t len;
    int rc = topo_lex_read_file(path, CLUSTER_FILE_MAX, &buf, &len);
    if (rc == -EFBIG)
        snprintf(e->msg, sizeof e->msg, "larger than %ld MiB: not a cluster file", CLUSTER_FILE_MAX >> 20);
    else if (rc == -ENOMEM)
        snprintf(e->msg, sizeof e->msg, "out of memory");
    else if (rc < 0)
        snprintf(e->msg, sizeof e->msg, "%s", strerror(-rc));
    if (rc == 0) {
        char *copy = strdup(path), *slash = copy ? strrchr(copy, '/') : NULL;
        if (!copy) {
            snprintf(e->msg, sizeof e->msg, "out of memory");
            rc = -ENOMEM;
        } else {
            if (slash)
                slash[slash == copy] = 0; /* "/c.conf" -> "/", "a/b/c.conf" -> "a/b" */
            rc = cluster_parse(c, buf, len, path, slash ? copy : NULL, e);
        }
        free(copy);
    }
    free(buf);
    return rc;
}

/* ---- building and writing -------------------------------------------------- */

int cluster_init(cluster *c, const char *name, const char *topology)
{
    if (!c)
        return -EINVAL;
    memset(c, 0, sizeof *c);
    if (!name || !topology || !name_ok(name, strlen(name)) || !path_ok(topology, strlen(topology)))
        return -EINVAL;
    strcpy(c->name, name);
    strcpy(c->topology, topology);
    if (!(c->topology_path = strdup(topology)))
        return -ENOMEM;
    return 0;
}

int cluster_peer_at(cluster_peer *p, const char *host, size_t n, unsigned port, const char **why)
{
    *why = "no host, or a port outside 1..65535";
    if (!host || !n || port == 0 || port > 65535)
        return -EINVAL;
    int bracketed = n >= 2 && host[0] == '[' && host[n - 1] == ']';
    const char *h = bracketed ? host + 1 : host;
    size_t hn = bracketed ? n - 2 : n;
    /* An IPv6 literal may come with or without its brackets here. */
    if (!bracketed && memchr(host, ':', n))
        bracketed = 1;
    memset(p, 0, sizeof *p);
    if (host_check(h, hn, bracketed, &p->family, why) < 0)
        return -EINVAL;
    memcpy(p->host, h, hn);
    p->port = (uint16_t)port;
    return 0;
}

int cluster_add_peer(cluster *c, const char *host, unsigned port, const uint8_t pk[SEC_KEY_BYTES])
{
    if (!c || !host || !pk || c->n_peers >= CLUSTER_MAX_PEERS)
        return -EINVAL;
    cluster_peer p;
    const char *why;
    if (cluster_peer_at(&p, host, strlen(host), port, &why) < 0)
        return -EINVAL;
    p.id = (uint32_t)c->n_peers;
    memcpy(p.pk, pk, SEC_KEY_BYTES);
    for (int k = 0; k < c->n_peers; k++)
        if (!memcmp(c->peers[k].pk, pk, SEC_KEY_BYTES) || same_addr(&c->peers[k], &p))
            return -EEXIST;
    if (grow_peers(c) < 0)
        return -ENOMEM;
    c->peers[c->n_peers] = p;
    c->n_founders = c->n_peers + 1;
    return c->n_peers++;
}

int cluster_add_slots(cluster *c, int slots, const uint8_t admit_pk[SEC_KEY_BYTES])
{
    if (!c || !admit_pk || slots < c->n_peers || slots > CLUSTER_MAX_PEERS)
        return -EINVAL;
    c->n_founders = c->n_peers;
    while (c->n_peers < slots) {
        if (grow_peers(c) < 0)
            return -ENOMEM;
        c->peers[c->n_peers] = (cluster_peer){.id = (uint32_t)c->n_peers, .vacant = 1};
        c->n_peers++;
    }
    memcpy(c->admit_pk, admit_pk, SEC_KEY_BYTES);
    c->has_admit = 1;
    return 0;
}

void cluster_peer_addr(const cluster_peer *p, char *buf, size_t cap)
{
    if (p->family == CLUSTER_IPV6)
        snprintf(buf, cap, "[%s]:%u", p->host, (unsigned)p->port);
    else
        snprintf(buf, cap, "%s:%u", p->host, (unsigned)p->port);
}

int cluster_write(const cluster *c, FILE *f, const char *comment)
{
    if (!c || !f || !c->name[0] || !c->topology[0] || c->n_peers < 1 || !c->peers)
        return -EINVAL;
    if (comment) {
        for (const char *s = comment; *s;) {
            size_t n = strcspn(s, "\n");
            fprintf(f, "# %.*s\n", (int)n, s);
            s += n + (s[n] == '\n');
        }
    }
    fprintf(f, "cluster %s\ntopology %s\n", c->name, c->topology);
    const int founders = c->n_founders > 0 ? c->n_founders : c->n_peers;
    if (founders < c->n_peers)
        fprintf(f, "slots %d\n", c->n_peers);
    if (c->has_admit) {
        char key[KEYFILE_B64];
        keyfile_pub_encode(c->admit_pk, key);
        fprintf(f, "admit %s\n", key);
    }
    fputc('\n', f);
    /* Keys in one column: the file is read by people too. */
    int width = 0;
    char addr[CLUSTER_HOST_MAX + 16];
    for (int i = 0; i < founders; i++) {
        cluster_peer_addr(&c->peers[i], addr, sizeof addr);
        int w = (int)strlen(addr);
        width = w > width ? w : width;
    }
    fprintf(f, "#    id   %-*s  public key\n", width, "host:port");
    for (int i = 0; i < founders; i++) {
        char key[KEYFILE_B64];
        cluster_peer_addr(&c->peers[i], addr, sizeof addr);
        keyfile_pub_encode(c->peers[i].pk, key);
        fprintf(f, "peer %-4u %-*s  %s\n", (unsigned)c->peers[i].id, width, addr, key);
    }
    return ferror(f) ? -EIO : 0;
}

int cluster_pubkey_lookup(void *ctx, uint32_t id, uint8_t pk[SEC_KEY_BYTES])
{
    const cluster *c = ctx;
    if (!c || id >= (uint32_t)c->n_peers || c->peers[id].vacant)
        return -ENOENT;
    memcpy(pk, c->peers[id].pk, SEC_KEY_BYTES);
    return 0;
}

void cluster_id(const cluster *c, uint8_t id[SEC_CLUSTER_ID_BYTES])
{
    static const char DOMAIN[] = "sgp-v1 cluster";
    crypto_generichash_state h;
    uint8_t b[4];
    sec_init();
    crypto_generichash_init(&h, NULL, 0, SEC_CLUSTER_ID_BYTES);
    crypto_generichash_update(&h, (const uint8_t *)DOMAIN, sizeof DOMAIN); /* with its NUL: a separator */
    b[0] = (uint8_t)strlen(c->name);
    crypto_generichash_update(&h, b, 1);
    crypto_generichash_update(&h, (const uint8_t *)c->name, b[0]);
    const int founders = c->n_founders > 0 ? c->n_founders : c->n_peers;
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)((uint32_t)founders >> 8 * i);
    crypto_generichash_update(&h, b, 4);
    for (int i = 0; i < founders; i++)
        crypto_generichash_update(&h, c->peers[i].pk, SEC_KEY_BYTES);
    if (founders < c->n_peers || c->has_admit) { /* (a file without them keeps the id it always had) */
        static const char ELASTIC[] = "slots and admit";
        crypto_generichash_update(&h, (const uint8_t *)ELASTIC, sizeof ELASTIC);
        for (int i = 0; i < 4; i++)
            b[i] = (uint8_t)((uint32_t)c->n_peers >> 8 * i);
        crypto_generichash_update(&h, b, 4);
        if (c->has_admit)
            crypto_generichash_update(&h, c->admit_pk, SEC_KEY_BYTES);
    }
    crypto_generichash_final(&h, id, SEC_CLUSTER_ID_BYTES);
}

void cluster_free(cluster *c)
{
    if (!c)
        return;
    free(c->peers);
    free(c->topology_path);
    memset(c, 0, sizeof *c);
}
