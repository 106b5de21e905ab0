/* peer/wire/WIRE.md as a client reads it: its "Examples" block, read from
 * the page at run time (the unit binary runs from the repository root), and
 * its recipe for the PUSH origin id. Every example is decoded with
 * wire_decode and checked against the values or the error the page states;
 * every `ok` one is encoded again from the page's values with the
 * wire_encode_* functions, byte for byte; the wire fuzz corpus holds every
 * example as a seed (page_NAME, written by tests/fuzz/corpus_from_wire_page.sh).
 * A page and a code that disagree fail here. */
#include "peer/wire/wire.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "compress/cmp.h"
#include "gossip/gsp.h"

TestSuite(peer_wire_page, .timeout = 60);

#define PAGE "peer/wire/WIRE.md"
#define CORPUS "tests/fuzz/corpus/wire"
#define MAX_EXAMPLES 128
#define MAX_VALUES 16

typedef struct example {
    char name[64];
    uint8_t bytes[512];
    size_t len;
    char expect[1024]; /* "ok TYPE k=v ...", "accepted TYPE k=v ...", "refused FIELD" */
    int line;
} example;

static example g_ex[MAX_EXAMPLES];
static int g_n;

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s: %s (the unit binary runs from the repository root)", path, strerror(errno));
    char *buf = NULL;
    size_t cap = 0, n = 0, k;
    do {
        if (n + 4096 + 1 > cap) {
            cap = 2 * cap + 4096 + 1;
            buf = realloc(buf, cap);
            cr_assert_not_null(buf);
        }
        k = fread(buf + n, 1, cap - n - 1, f);
        n += k;
    } while (k > 0);
    fclose(f);
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

static int hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Hex digits into out (spaces skipped); the byte count, or -1. */
static long unhex(const char *s, size_t n, uint8_t *out, size_t cap)
{
    size_t k = 0;
    int hi = -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ')
            continue;
        int v = hexval(s[i]);
        if (v < 0)
            return -1;
        if (hi < 0) {
            hi = v;
        } else {
            if (k == cap)
                return -1;
            out[k++] = (uint8_t)(hi << 4 | v);
            hi = -1;
        }
    }
    return hi < 0 ? (long)k : -1;
}

static int line_at(const char *page, const char *p)
{
    int line = 1;
    for (; page < p; page++)
        line += *page == '\n';
    return line;
}

/* The page's examples: the fenced block after "## Examples". */
static void load(void)
{
    if (g_n)
        return;
    cr_assert_geq(sodium_init(), 0);
    char *page = read_all(PAGE, NULL);
    char *at = strstr(page, "\n## Examples\n");
    cr_assert_not_null(at, PAGE " has no \"## Examples\" section");
    char *open = strstr(at, "\n```");
    cr_assert_not_null(open, PAGE ": no block under Examples");
    char *p = strchr(open + 1, '\n');
    cr_assert_not_null(p);
    for (p++; strncmp(p, "```", 3) != 0;) {
        char *end = strchr(p, '\n');
        cr_assert_not_null(end, PAGE ": the Examples block does not end");
        cr_assert_lt(g_n, MAX_EXAMPLES);
        example *x = &g_ex[g_n++];
        x->line = line_at(page, p);
        char *bar1 = strstr(p, " | "), *bar2 = bar1 ? strstr(bar1 + 3, " | ") : NULL;
        cr_assert(bar1 && bar2 && bar2 < end, PAGE ":%d: not `name | hex | expect`", x->line);
        cr_assert_lt((size_t)(bar1 - p), sizeof x->name);
        memcpy(x->name, p, (size_t)(bar1 - p));
        long n = unhex(bar1 + 3, (size_t)(bar2 - bar1 - 3), x->bytes, sizeof x->bytes);
        cr_assert_geq(n, 1, PAGE ":%d: %s: not hex", x->line, x->name);
        x->len = (size_t)n;
        cr_assert_lt((size_t)(end - bar2 - 3), sizeof x->expect);
        memcpy(x->expect, bar2 + 3, (size_t)(end - bar2 - 3));
        p = end + 1;
    }
    free(page);
    cr_assert_gt(g_n, 0, PAGE ": no examples");
}

/* ---- the values an example states ----------------------------------------- */

/* The value of key in x's expect line (static buffer), or NULL. */
static const char *val(const example *x, const char *key)
{
    static char buf[512];
    const size_t kl = strlen(key);
    for (const char *p = x->expect; (p = strstr(p, key)); p++)
        if ((p == x->expect || p[-1] == ' ') && p[kl] == '=') {
            size_t n = strcspn(p + kl + 1, " ");
            cr_assert_lt(n, sizeof buf);
            memcpy(buf, p + kl + 1, n);
            buf[n] = 0;
            return buf;
        }
    return NULL;
}

static const char *need(const example *x, const char *key)
{
    const char *v = val(x, key);
    cr_assert_not_null(v, PAGE ":%d: %s states no %s", x->line, x->name, key);
    return v;
}

static uint64_t u64_of(const example *x, const char *key) { return strtoull(need(x, key), NULL, 10); }

/* A comma-separated list of numbers; their count. */
static size_t list_of(const example *x, const char *key, double *v)
{
    const char *s = need(x, key);
    size_t n = 0;
    for (char *end; *s; s = *end ? end + 1 : end) {
        cr_assert_lt(n, MAX_VALUES);
        v[n++] = strtod(s, &end);
        cr_assert(end != s && (*end == ',' || !*end), PAGE ":%d: %s: %s is no list of numbers", x->line, x->name, key);
    }
    return n;
}

static size_t hex_of(const example *x, const char *key, uint8_t *out, size_t cap)
{
    const char *s = need(x, key);
    long n = unhex(s, strlen(s), out, cap);
    cr_assert_geq(n, 0, PAGE ":%d: %s: %s is not hex", x->line, x->name, key);
    return (size_t)n;
}

/* Every key the line states is one this test checks (a typo would go unchecked). */
static void only_keys(const example *x, const char *const *keys)
{
    const char *p = strchr(x->expect, ' ');
    p = p ? strchr(p + 1, ' ') : NULL; /* past "ok TYPE" */
    while (p && *p) {
        p++;
        size_t kl = strcspn(p, "=");
        int known = 0;
        for (const char *const *k = keys; *k; k++)
            known |= strlen(*k) == kl && !strncmp(*k, p, kl);
        cr_assert(known, PAGE ":%d: %s: no such field for its type: %.*s", x->line, x->name, (int)kl, p);
        p = strchr(p, ' ');
    }
}

/* ---- checking one example -------------------------------------------------- */

static const char *const kind_names[] = {"RAW", "DELTA", "SYNC", "GATHER"};
static const char *kind_name(gsp_kind k) { return kind_names[k]; }

/* The PUSH the page states, as a gsp_msg (arrays in the caller's). */
static gsp_msg push_of(const example *x, double *xt, float *ref, uint32_t *idx, double *corr, uint8_t *payload)
{
    gsp_msg g = {.round = (long)u64_of(x, "round"), .seq = u64_of(x, "seq"), .incarnation = u64_of(x, "incarnation"),
                 .w_total = strtod(need(x, "w_total"), NULL), .gain = strtof(need(x, "gain"), NULL),
                 .step = strtof(need(x, "step"), NULL), .origin = u64_of(x, "origin"), .base = u64_of(x, "base"),
                 .dim = u64_of(x, "dim")};
    const char *k = need(x, "kind");
    int kind = -1;
    for (int j = 0; j < 4; j++)
        if (!strcmp(k, kind_names[j]))
            kind = j;
    cr_assert(kind >= 0, "%s: kind %s", x->name, k);
    g.kind = (gsp_kind)kind;
    double v[MAX_VALUES];
    if (g.kind == GSP_RAW) {
        cr_assert_eq(list_of(x, "x", xt), g.dim, "%s: x has dim values", x->name);
        g.x_total = xt;
    } else if (gsp_kind_payload(g.kind)) {
        g.payload_len = hex_of(x, "payload", payload, 256);
        g.payload = payload;
    } else {
        cr_assert_eq(list_of(x, "ref", v), g.dim, "%s: ref has dim values", x->name);
        for (size_t i = 0; i < g.dim; i++)
            ref[i] = (float)v[i];
        g.ref = ref;
        g.n_corr = list_of(x, "corr", corr);
        g.corr = corr;
        if (val(x, "idx")) {
            cr_assert_eq(list_of(x, "idx", v), g.n_corr, "%s: as many positions as corrections", x->name);
            for (size_t j = 0; j < g.n_corr; j++)
                idx[j] = (uint32_t)v[j];
            g.corr_idx = idx;
        }
    }
    return g;
}

static void check_push(const example *x, const wire_msg *m)
{
    static const char *const keys[] = {"round", "seq",  "incarnation", "kind", "w_total", "gain", "step", "origin",
                                       "base",  "dim",  "x",           "payload", "values", "ref", "idx", "corr", NULL};
    only_keys(x, keys);
    double xt[MAX_VALUES], corr[MAX_VALUES], v[MAX_VALUES];
    float ref[MAX_VALUES];
    uint32_t idx[MAX_VALUES];
    uint8_t payload[256];
    const gsp_msg want = push_of(x, xt, ref, idx, corr, payload);
    const wire_push *p = &m->push;
    cr_assert_eq(p->round, want.round, "%s: round", x->name);
    cr_assert_eq(p->seq, want.seq, "%s: seq", x->name);
    cr_assert_eq(p->incarnation, want.incarnation, "%s: incarnation", x->name);
    cr_assert_str_eq(kind_name(p->kind), need(x, "kind"), "%s: kind", x->name);
    cr_assert(p->w_total == want.w_total, "%s: w_total %.17g", x->name, p->w_total);
    cr_assert(p->gain == want.gain && p->step == want.step, "%s: gain %g step %g", x->name, p->gain, p->step);
    cr_assert_eq(p->origin, want.origin, "%s: origin %llu", x->name, (unsigned long long)p->origin);
    cr_assert_eq(p->base, want.base, "%s: base", x->name);
    cr_assert_eq(p->dim, want.dim, "%s: dim", x->name);
    /* the tensors as gossip/ gets them */
    uint8_t scratch[1024];
    gsp_msg g;
    cr_assert_eq(wire_push_to_gsp(m, &g, scratch, sizeof scratch), 0, "%s", x->name);
    switch (p->kind) {
    case GSP_RAW:
        for (size_t i = 0; i < p->dim; i++)
            cr_assert(g.x_total[i] == xt[i], "%s: x[%zu] = %g", x->name, i, g.x_total[i]);
        break;
    case GSP_DELTA:
    case GSP_GATHER: {
        cr_assert_eq(p->payload_len, want.payload_len, "%s: payload length", x->name);
        cr_assert_eq(memcmp(p->payload, payload, want.payload_len), 0, "%s: payload", x->name);
        float d[MAX_VALUES];
        cr_assert_eq(list_of(x, "values", v), p->dim, "%s: values has dim values", x->name);
        cr_assert_eq(cmp_decode(p->payload, p->payload_len, p->dim, d), 0, "%s: the payload decodes", x->name);
        for (size_t i = 0; i < p->dim; i++)
            cr_assert(d[i] == (float)v[i], "%s: value %zu = %g", x->name, i, d[i]);
        break;
    }
    case GSP_SYNC:
        for (size_t i = 0; i < p->dim; i++)
            cr_assert(g.ref[i] == ref[i], "%s: ref[%zu] = %g", x->name, i, g.ref[i]);
        cr_assert_eq(g.n_corr, want.n_corr, "%s: corrections", x->name);
        cr_assert_eq(!g.corr_idx, !want.corr_idx, "%s: a list of positions or every correction", x->name);
        for (size_t j = 0; j < g.n_corr; j++) {
            cr_assert(g.corr[j] == corr[j], "%s: corr[%zu] = %g", x->name, j, g.corr[j]);
            cr_assert(!g.corr_idx || g.corr_idx[j] == idx[j], "%s: idx[%zu]", x->name, j);
        }
        break;
    }
}

/* The fields of the page's line against the decoded m. */
static void check_fields(const example *x, const wire_msg *m)
{
    uint8_t h[64];
    double v[MAX_VALUES];
    switch (m->type) {
    case WIRE_AUTH:
        only_keys(x, (const char *const[]){"hash", NULL});
        cr_assert_eq(hex_of(x, "hash", h, sizeof h), WIRE_HASH_LEN);
        cr_assert_eq(memcmp(m->auth.hash, h, WIRE_HASH_LEN), 0, "%s: hash", x->name);
        break;
    case WIRE_PUSH:
        check_push(x, m);
        break;
    case WIRE_NACK:
    case WIRE_ACK:
        only_keys(x, (const char *const[]){"seq", NULL});
        cr_assert_eq(m->type == WIRE_NACK ? m->nack.seq : m->ack.seq, u64_of(x, "seq"), "%s: seq", x->name);
        break;
    case WIRE_HEARTBEAT:
    case WIRE_MODEL_SOON:
        only_keys(x, (const char *const[]){"round", NULL});
        cr_assert_eq(m->type == WIRE_HEARTBEAT ? m->heartbeat.round : m->model_soon.round, (long)u64_of(x, "round"),
                     "%s: round", x->name);
        break;
    case WIRE_GOODBYE: {
        only_keys(x, (const char *const[]){"reason", NULL});
        const char *r = need(x, "reason");
        cr_assert(m->goodbye.len == strlen(r) && !memcmp(m->goodbye.reason, r, m->goodbye.len), "%s: reason %.*s",
                  x->name, (int)m->goodbye.len, m->goodbye.reason);
        break;
    }
    case WIRE_MODEL_REQUEST:
        only_keys(x, (const char *const[]){"dim", NULL});
        cr_assert_eq(m->model_request.dim, u64_of(x, "dim"), "%s: dim", x->name);
        break;
    case WIRE_MODEL: {
        only_keys(x, (const char *const[]){"round", "dim", "hash", "z", NULL});
        cr_assert_eq(m->model.round, (long)u64_of(x, "round"), "%s: round", x->name);
        cr_assert_eq(m->model.dim, u64_of(x, "dim"), "%s: dim", x->name);
        cr_assert_eq(hex_of(x, "hash", h, sizeof h), WIRE_HASH_LEN);
        cr_assert_eq(memcmp(m->model.hash, h, WIRE_HASH_LEN), 0, "%s: hash", x->name);
        uint8_t real[WIRE_HASH_LEN];
        crypto_generichash(real, sizeof real, m->model.payload, m->model.dim * sizeof(float), NULL, 0);
        cr_assert_eq(memcmp(real, h, WIRE_HASH_LEN), 0, "%s: the hash is the payload's BLAKE2b-256", x->name);
        cr_assert_eq(list_of(x, "z", v), m->model.dim, "%s: z has dim values", x->name);
        for (size_t i = 0; i < m->model.dim; i++) {
            float f;
            memcpy(&f, m->model.payload + 4 * i, 4); /* (little-endian host: the wire's order) */
            cr_assert(f == (float)v[i], "%s: z[%zu] = %g", x->name, i, f);
        }
        break;
    }
    case WIRE_MEMBERS: {
        /* The page's lines have at most one entry and one revocation. */
        only_keys(x, (const char *const[]){"entries", "id", "since", "host", "port", "flags", "cred", "revoked",
                                           "serial", "sig", NULL});
        cr_assert_eq(m->members.n, u64_of(x, "entries"), "%s: entries", x->name);
        cr_assert_eq(m->members.n_revoked, u64_of(x, "revoked"), "%s: revoked", x->name);
        if (m->members.n) {
            const wire_member *e = &m->members.m[0];
            char host[WIRE_HOST_MAX + 1];
            snprintf(host, sizeof host, "%s", need(x, "host")); /* (need's buffer is the next call's too) */
            cr_assert_eq(e->id, u64_of(x, "id"), "%s: id", x->name);
            cr_assert_eq(e->since, u64_of(x, "since"), "%s: since", x->name);
            cr_assert(e->host_len == strlen(host) && !memcmp(e->host, host, e->host_len), "%s: host", x->name);
            cr_assert_eq(e->port, u64_of(x, "port"), "%s: port", x->name);
            cr_assert_eq(e->flags, u64_of(x, "flags"), "%s: flags", x->name);
            uint8_t cred[WIRE_CRED_LEN];
            const int has = strcmp(need(x, "cred"), "none") != 0;
            cr_assert_eq(!!e->cred, has, "%s: cred", x->name);
            if (has) {
                cr_assert_eq(hex_of(x, "cred", cred, sizeof cred), WIRE_CRED_LEN);
                cr_assert_eq(memcmp(e->cred, cred, WIRE_CRED_LEN), 0, "%s: cred", x->name);
            }
        }
        if (m->members.n_revoked) {
            cr_assert_eq(m->members.r[0].serial, u64_of(x, "serial"), "%s: serial", x->name);
            cr_assert_eq(hex_of(x, "sig", h, sizeof h), WIRE_SIG_LEN);
            cr_assert_eq(memcmp(m->members.r[0].sig, h, WIRE_SIG_LEN), 0, "%s: sig", x->name);
        }
        break;
    }
    }
}

/* What an encoder writes from the page's values alone (not from the decoded
 * message): the function of the message's type. */
static long encode_from_page(const example *x, wire_type type, uint8_t *out, size_t cap)
{
    uint8_t h[64];
    double v[MAX_VALUES];
    switch (type) {
    case WIRE_AUTH:
        hex_of(x, "hash", h, sizeof h);
        return wire_encode_auth(out, cap, h);
    case WIRE_PUSH: {
        double xt[MAX_VALUES], corr[MAX_VALUES];
        float ref[MAX_VALUES];
        uint32_t idx[MAX_VALUES];
        uint8_t payload[256];
        const gsp_msg g = push_of(x, xt, ref, idx, corr, payload);
        return wire_encode_push(out, cap, &g);
    }
    case WIRE_NACK:
        return wire_encode_nack(out, cap, u64_of(x, "seq"));
    case WIRE_ACK:
        return wire_encode_ack(out, cap, u64_of(x, "seq"));
    case WIRE_HEARTBEAT:
        return wire_encode_heartbeat(out, cap, (long)u64_of(x, "round"));
    case WIRE_MODEL_SOON:
        return wire_encode_model_soon(out, cap, (long)u64_of(x, "round"));
    case WIRE_GOODBYE: {
        const char *r = need(x, "reason");
        return wire_encode_goodbye(out, cap, r, strlen(r));
    }
    case WIRE_MODEL_REQUEST:
        return wire_encode_model_request(out, cap, u64_of(x, "dim"));
    case WIRE_MODEL: {
        float z[MAX_VALUES];
        size_t n = list_of(x, "z", v);
        for (size_t i = 0; i < n; i++)
            z[i] = (float)v[i];
        hex_of(x, "hash", h, sizeof h);
        return wire_encode_model(out, cap, (long)u64_of(x, "round"), z, u64_of(x, "dim"), h);
    }
    case WIRE_MEMBERS: {
        static char host[WIRE_HOST_MAX + 1];
        static uint8_t cred[WIRE_CRED_LEN];
        wire_member e = {0};
        wire_revocation r = {0};
        const size_t n = u64_of(x, "entries"), nr = u64_of(x, "revoked");
        if (n) {
            snprintf(host, sizeof host, "%s", need(x, "host"));
            e = (wire_member){.id = (uint32_t)u64_of(x, "id"), .since = u64_of(x, "since"), .host = host,
                              .host_len = strlen(host), .port = (uint16_t)u64_of(x, "port"),
                              .flags = (unsigned)u64_of(x, "flags")};
            if (strcmp(need(x, "cred"), "none") && hex_of(x, "cred", cred, sizeof cred) == WIRE_CRED_LEN)
                e.cred = cred;
        }
        if (nr) {
            hex_of(x, "sig", h, sizeof h);
            r = (wire_revocation){.serial = u64_of(x, "serial"), .sig = h};
        }
        return wire_encode_members(out, cap, &e, n, &r, nr);
    }
    }
    return -EINVAL;
}

static void check(const example *x)
{
    wire_msg m;
    wire_err e;
    char verdict[16] = "", what[64] = "";
    cr_assert_eq(sscanf(x->expect, "%15s %63s", verdict, what), 2, PAGE ":%d: %s: no verdict", x->line, x->name);
    /* exactly-sized input, so that a read past the message is a read past the block */
    uint8_t *in = malloc(x->len);
    memcpy(in, x->bytes, x->len);
    int rc = wire_decode(&m, in, x->len, &e);
    if (!strcmp(verdict, "refused")) {
        cr_assert_eq(rc, -EBADMSG, PAGE ":%d: %s: decodes (rc %d), the page says refused", x->line, x->name, rc);
        cr_assert_str_eq(e.field, what, PAGE ":%d: %s: refused at %s (%s), the page says %s", x->line, x->name,
                         e.field, e.why, what);
        free(in);
        return;
    }
    cr_assert(!strcmp(verdict, "ok") || !strcmp(verdict, "accepted"), PAGE ":%d: verdict %s", x->line, verdict);
    cr_assert_eq(rc, 0, PAGE ":%d: %s: refused at byte %zu, %s: %s", x->line, x->name, e.offset, e.field, e.why);
    cr_assert_str_eq(wire_type_name(m.type), what, PAGE ":%d: %s: a %s", x->line, x->name, wire_type_name(m.type));
    check_fields(x, &m);
    uint8_t out[512];
    long n = wire_encode(out, sizeof out, &m);
    cr_assert_gt(n, 0, "%s: re-encodes", x->name);
    if (!strcmp(verdict, "ok")) {
        cr_assert(n == (long)x->len && !memcmp(out, x->bytes, x->len), PAGE ":%d: %s: the decoded message encodes to other bytes",
                  x->line, x->name);
        n = encode_from_page(x, m.type, out, sizeof out);
        cr_assert(n == (long)x->len && !memcmp(out, x->bytes, x->len),
                  PAGE ":%d: %s: wire_encode_* writes other bytes (%ld) from the page's values", x->line, x->name, n);
    } else {
        cr_assert(n <= (long)x->len && (n != (long)x->len || memcmp(out, x->bytes, x->len)),
                  PAGE ":%d: %s: accepted, not ok: an encoder writes a shorter or other form", x->line, x->name);
    }
    free(in);
}

/* ---- the tests ---------------------------------------------------------------- */

Test(peer_wire_page, every_example_decodes_as_the_page_says_and_encodes_to_its_bytes)
{
    load();
    int types = 0, raw = 0, delta_origin = 0, sync_list = 0, sync_every = 0, refused = 0, accepted = 0;
    for (int k = 0; k < g_n; k++) {
        const example *x = &g_ex[k];
        for (int j = 0; j < k; j++)
            cr_assert_str_neq(g_ex[j].name, x->name, PAGE ":%d: a second %s", x->line, x->name);
        check(x);
        refused += !strncmp(x->expect, "refused ", 8);
        accepted += !strncmp(x->expect, "accepted ", 9);
        if (strncmp(x->expect, "ok ", 3))
            continue;
        for (int t = 0; t < 9; t++) {
            char w[32];
            snprintf(w, sizeof w, "ok %s ", wire_type_name(t));
            types |= !strncmp(x->expect, w, strlen(w)) << t;
        }
        const char *kind = val(x, "kind");
        raw += kind && !strcmp(kind, "RAW");
        delta_origin += kind && !strcmp(kind, "DELTA") && strcmp(need(x, "origin"), "0");
        sync_list += kind && !strcmp(kind, "SYNC") && val(x, "idx");
        sync_every += kind && !strcmp(kind, "SYNC") && !val(x, "idx");
    }
    cr_assert_eq(types, (1 << 9) - 1, "every message type has an ok example (%#x)", types);
    cr_assert(raw && delta_origin && sync_list && sync_every, "every kind of PUSH has one");
    cr_assert(refused && accepted);
}

/* make check replays tests/fuzz/corpus/wire: the page's examples are seeds there. */
Test(peer_wire_page, the_wire_fuzz_corpus_holds_every_example_as_written_on_the_page)
{
    load();
    const char *fix = "run `bash tests/fuzz/corpus_from_wire_page.sh` after changing the examples";
    for (int k = 0; k < g_n; k++) {
        char path[sizeof CORPUS + sizeof "/page_" + sizeof g_ex[k].name];
        snprintf(path, sizeof path, CORPUS "/page_%.63s", g_ex[k].name);
        FILE *f = fopen(path, "rb");
        cr_assert_not_null(f, "%s is missing: %s", path, fix);
        uint8_t buf[600];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        cr_assert(n == g_ex[k].len && !memcmp(buf, g_ex[k].bytes, n), "%s differs from the page: %s", path, fix);
    }
    DIR *d = opendir(CORPUS);
    cr_assert_not_null(d);
    for (struct dirent *de; (de = readdir(d));) {
        if (strncmp(de->d_name, "page_", 5))
            continue;
        int found = 0;
        for (int k = 0; k < g_n && !found; k++)
            found = !strcmp(de->d_name + 5, g_ex[k].name);
        cr_assert(found, CORPUS "/%s is no example of the page: %s", de->d_name, fix);
    }
    closedir(d);
}

/* "The origin id": FNV-1a 64 over the model's float32 little-endian bytes,
 * as a client would write it from the page. */
static uint64_t page_origin(const float *x0, size_t dim)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < dim; i++) {
        uint32_t u;
        memcpy(&u, &x0[i], 4);
        for (int b = 0; b < 4; b++) /* little-endian, whatever the host */
            h = (h ^ ((u >> (8 * b)) & 0xff)) * 0x100000001b3ULL;
    }
    return h ? h : 1;
}

Test(peer_wire_page, the_origin_id_is_fnv1a_of_the_model_s_little_endian_bytes)
{
    load();
    cmp_spec none;
    char err[128];
    cr_assert_eq(cmp_spec_parse(&none, "none", err, sizeof err), 0, "%s", err);
    enum { D = 1000 };
    static float x0[D];
    for (int i = 0; i < D; i++)
        x0[i] = (float)(i % 17) * 0.37f - 2.5f;
    const float small[2] = {1.5f, -2.0f};
    const struct {
        const float *x;
        size_t dim;
    } cases[] = {{small, 2}, {x0, D}, {x0 + 3, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        gsp_peer a = {0};
        cr_assert_eq(gsp_init(&a, 0, 2, cases[c].dim, 0, cases[c].x), 0);
        cr_assert_eq(gsp_set_codec(&a, &none, 1, 0.5f), 0);
        cr_assert_eq(gsp_set_origin(&a, cases[c].x), 0);
        cr_assert_eq(a.origin_id, page_origin(cases[c].x, cases[c].dim), "dim %zu", cases[c].dim);
        /* and an edge's first DELTA carries it */
        topo_out out = {.n = 1, .peer = {1}, .weight = {0.5}};
        gsp_msg m;
        cr_assert_eq(gsp_emit(&a, &out, &m), 1);
        cr_assert_eq(m.kind, GSP_DELTA);
        cr_assert_eq(m.seq, 1);
        cr_assert_eq(m.origin, a.origin_id);
        gsp_free(&a);
    }
    /* the page's worked example: the model (1.5, -2), and its DELTA example */
    cr_assert_eq(page_origin(small, 2), 16420226713695273112ULL);
    int seen = 0;
    for (int k = 0; k < g_n; k++)
        if (!strcmp(g_ex[k].name, "push_delta_origin")) {
            cr_assert_eq(u64_of(&g_ex[k], "origin"), page_origin(small, 2));
            seen = 1;
        }
    cr_assert(seen, PAGE ": no push_delta_origin example");
}
