/* Checkpoint files: serialise, write atomically, verify, restore. See ckpt.h
 * and peer/store/CHECKPOINT.md. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <sodium.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "peer/store/ckpt.h"
#include "peer/store/wholefile.h"

#define CKPT_MAGIC "SGPCKPT\0"
#define CKPT_VERSION 6u
#define CKPT_ENDIAN 0x01020304u /* read back as another value on a host of the other byte order */
#define CKPT_HASH 32
#define CKPT_MAX_TEXT 512 /* a model spec: NN_SPEC_MAX_LEN */
#define CKPT_MAX_BYTES ((size_t)1 << 40)

/* ---- a growable output buffer ------------------------------------------------ */

/* The checkpoint goes straight to its file through a block of STREAM_BLOCK
 * bytes, hashed as it goes: no copy of the state is ever made. */
typedef struct obuf {
    int fd;
    uint8_t *p;
    size_t len, cap;
    int failed; /* an errno */
    crypto_generichash_state hash;
} obuf;

enum { STREAM_BLOCK = 1 << 20 };

static void stream_flush(obuf *b)
{
    if (b->failed || !b->len)
        return;
    crypto_generichash_update(&b->hash, b->p, b->len);
    int rc = wholefile_fd_write(b->fd, b->p, b->len);
    if (rc < 0)
        b->failed = -rc;
    b->len = 0;
}

/* n bytes of src, or n zero bytes when src is NULL. */
/* A compressed edge keeps its reference; the all-gather's edges keep none. */
static int edge_ref(const gsp_peer *g) { return g->codec && !g->gather; }

static void put(obuf *b, const void *src, size_t n)
{
    const uint8_t *s = src;
    while (n && !b->failed) {
        size_t k = b->cap - b->len < n ? b->cap - b->len : n;
        if (s)
            memcpy(b->p + b->len, s, k), s += k;
        else
            memset(b->p + b->len, 0, k);
        b->len += k, n -= k;
        if (b->len == b->cap)
            stream_flush(b);
    }
}

static void put_u32(obuf *b, uint32_t v) { put(b, &v, sizeof v); }
static void put_u64(obuf *b, uint64_t v) { put(b, &v, sizeof v); }
static void put_f64(obuf *b, double v) { put(b, &v, sizeof v); }

static void put_text(obuf *b, const char *s)
{
    uint32_t n = (uint32_t)strnlen(s, CKPT_MAX_TEXT);
    put_u32(b, n);
    put(b, s, n);
}

/* ---- a bounded reader -------------------------------------------------------- */

typedef struct ibuf {
    const uint8_t *p, *end;
    int failed;
} ibuf;

/* The pages of the mapped file wholly inside [p, p + n), given back once
 * read: the file is as big as the state it restores, and every page read
 * would count in the process's memory until the unmap (a copy of the state
 * beside the state, at the peak of a resume). */
static void release(const uint8_t *p, size_t n)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), s = ((uintptr_t)p + page - 1) & ~(page - 1),
                    e = ((uintptr_t)p + n) & ~(page - 1);
    if (e > s)
        madvise((void *)s, e - s, MADV_DONTNEED); /* (a hint: the pages are the page cache's, read again if touched) */
}

/* n bytes of the mapped file into dst, and their pages given back. */
static void copy_out(void *dst, const uint8_t *src, size_t n)
{
    memcpy(dst, src, n);
    release(src, n);
}

static void get(ibuf *b, void *dst, size_t n)
{
    if (b->failed || (size_t)(b->end - b->p) < n) {
        b->failed = 1;
        memset(dst, 0, n);
        return;
    }
    copy_out(dst, b->p, n);
    b->p += n;
}

static uint32_t get_u32(ibuf *b)
{
    uint32_t v;
    get(b, &v, sizeof v);
    return v;
}

static uint64_t get_u64(ibuf *b)
{
    uint64_t v;
    get(b, &v, sizeof v);
    return v;
}

static double get_f64(ibuf *b)
{
    double v;
    get(b, &v, sizeof v);
    return v;
}

/* 1 if the next text field equals s. */
static int text_is(ibuf *b, const char *s)
{
    uint32_t n = get_u32(b);
    if (b->failed || n > CKPT_MAX_TEXT || (size_t)(b->end - b->p) < n) {
        b->failed = 1;
        return 0;
    }
    int same = n == strnlen(s, CKPT_MAX_TEXT) && !memcmp(b->p, s, n);
    b->p += n;
    return same;
}

/* ---- saving ------------------------------------------------------------------ */

/* An in-edge's flags (u32): waiting for a SYNC, adopting the totals after a
 * gap, and written as the run stopped (ckpt_write_final). */
enum { FLAG_SYNC = 1, FLAG_ADOPT = 2, FLAG_FINAL = 4 };

static void serialise(obuf *b, const ckpt_run *run, const gsp_peer *g, const ckpt_local *l, int final)
{
    const size_t dim = g->dim;
    put(b, CKPT_MAGIC, 8);
    put_u32(b, CKPT_VERSION);
    put_u32(b, CKPT_ENDIAN);
    put_u32(b, (uint32_t)run->id);
    put_u32(b, (uint32_t)run->n_peers);
    put_u64(b, dim);
    put_u64(b, run->seed);
    put_text(b, run->model);
    put_text(b, run->codec);
    put_text(b, run->cluster ? run->cluster : "");
    put(b, run->cluster_digest, sizeof run->cluster_digest);
    put_u64(b, (uint64_t)g->round);
    put_f64(b, g->w);
    put(b, g->x, dim * sizeof(float));
    if (l->opt) {
        size_t n;
        long *steps;
        const float *state = nn_optimizer_state(l->opt, &n, &steps);
        put_u32(b, (uint32_t)l->opt->kind);
        put_u64(b, steps ? (uint64_t)*steps : 0);
        put(b, state, n * sizeof(float));
    } else /* the caller's optimizer keeps its own state (libsgp): written as SGD with a zero velocity */
        put(b, NULL, sizeof(uint32_t) + sizeof(uint64_t) + dim * sizeof(float));
    const int outer = l->outer_velocity != NULL;
    put_u32(b, (uint32_t)outer);
    if (outer)
        put(b, l->outer_velocity, dim * sizeof(float));
    if (l->batches) {
        const nn_batcher *bt = l->batches;
        put(b, bt->rng.s, sizeof bt->rng.s);
        put_u64(b, (uint64_t)bt->pos);
        put_u64(b, (uint64_t)bt->epoch);
        put_u64(b, (uint64_t)bt->d->n);
        put(b, bt->perm, (size_t)bt->d->n * sizeof(int));
    } else /* and an empty batch stream */
        put(b, NULL, sizeof l->batches->rng.s + 3 * sizeof(uint64_t));
    put_u32(b, (uint32_t)g->n_in);
    for (int k = 0; k < g->n_in; k++) {
        const gsp_edge *e = &g->in[k];
        put_u32(b, (uint32_t)e->peer);
        put_u64(b, e->incarnation);
        put_u64(b, e->seq);
        put_u64(b, (uint64_t)e->round);
        put_f64(b, e->w);
        put_u32(b, (uint32_t)((e->sync ? FLAG_SYNC : 0) | (e->adopt ? FLAG_ADOPT : 0) | (final ? FLAG_FINAL : 0)));
        if (!g->codec) /* (a compressed edge keeps no totals: gsp.h) */
            put(b, e->x, dim * sizeof(double));
        if (edge_ref(g))
            put(b, e->ref, dim * sizeof(float));
    }
    /* the hash of everything before it, written after it (not hashed itself) */
    uint8_t hash[CKPT_HASH];
    stream_flush(b);
    crypto_generichash_final(&b->hash, hash, sizeof hash);
    int rc = b->failed ? 0 : wholefile_fd_write(b->fd, hash, sizeof hash);
    if (rc < 0)
        b->failed = -rc;
}

/* The file mapped, not read into the heap: it is as big as the state it
 * restores (the model times a few), and its pages are the page cache's. */
static int map_whole(const char *path, uint8_t **data, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = fstat(fd, &st) < 0 ? -errno : st.st_size < 0 || (uint64_t)st.st_size > CKPT_MAX_BYTES ? -EFBIG : 0;
    void *p = rc == 0 && st.st_size > 0 ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    if (rc == 0 && p == MAP_FAILED)
        rc = -errno;
    close(fd);
    if (rc == 0)
        *data = p, *len = (size_t)st.st_size;
    return rc;
}

/* Magic and checksum right (what ckpt_load checks first), read in blocks:
 * the file is as big as the state, and this runs beside it. */
static int file_is_whole(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    enum { BLOCK = 1 << 20 };
    uint8_t *block = malloc(BLOCK + CKPT_HASH), hash[CKPT_HASH];
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, CKPT_HASH);
    size_t held = 0, total = 0; /* block holds the last `held` bytes read, not yet hashed */
    int ok = block != NULL;
    while (ok) {
        size_t got = fread(block + held, 1, BLOCK + CKPT_HASH - held, f);
        if (total == 0 && held + got >= 8 && memcmp(block, CKPT_MAGIC, 8))
            ok = 0;
        held += got, total += got;
        if (held > CKPT_HASH) { /* all but the last CKPT_HASH bytes can be hashed */
            crypto_generichash_update(&st, block, held - CKPT_HASH);
            memmove(block, block + held - CKPT_HASH, CKPT_HASH);
            held = CKPT_HASH;
        }
        if (got == 0)
            break;
    }
    ok = ok && !ferror(f) && total >= 8 + CKPT_HASH;
    if (ok) {
        crypto_generichash_final(&st, hash, sizeof hash);
        ok = !sodium_memcmp(hash, block, CKPT_HASH);
    }
    free(block);
    fclose(f);
    return ok;
}

typedef struct live {
    const ckpt_run *run;
    const gsp_peer *g;
    const ckpt_local *l;
    int final;
} live;

static int stream_state(int fd, void *ctx)
{
    const live *v = ctx;
    obuf b = {.fd = fd, .cap = STREAM_BLOCK, .p = malloc(STREAM_BLOCK)};
    if (!b.p)
        return -ENOMEM;
    crypto_generichash_init(&b.hash, NULL, 0, CKPT_HASH);
    serialise(&b, v->run, v->g, v->l, v->final);
    free(b.p);
    return b.failed ? -b.failed : 0;
}

/* PATH.resumed: a final checkpoint was read as such (ckpt_read), and the
 * run it resumed may have absorbed messages since. */
static int resumed_name(char *out, size_t cap, const char *path)
{
    return snprintf(out, cap, "%s.resumed", path) < (int)cap ? 0 : -ENAMETOOLONG;
}

static int write_state(const char *path, const ckpt_run *run, const gsp_peer *g, const ckpt_local *l, int final,
                       char *err, size_t errlen)
{
    /* Streamed from the state itself in blocks: no copy of it is made, so a
     * checkpoint costs no memory (the caller keeps g and l still meanwhile). */
    const ckpt_local none = {0};
    live v = {run, g, l ? l : &none, final};
    int rc = wholefile_write_with(path, stream_state, &v, 0600, file_is_whole(path) ? WHOLEFILE_KEEP_PREV : 0, err,
                                  errlen);
    char mark[4200];
    if (rc == 0 && resumed_name(mark, sizeof mark, path) == 0)
        unlink(mark); /* (this state is newer than the resume it marked; one left behind only costs a gap's mass) */
    return rc;
}

int ckpt_write(const char *path, const ckpt_run *run, const gsp_peer *g, const ckpt_local *l, char *err,
               size_t errlen)
{
    return write_state(path, run, g, l, 0, err, errlen);
}

int ckpt_write_final(const char *path, const ckpt_run *run, const gsp_peer *g, const ckpt_local *l, char *err,
                     size_t errlen)
{
    return write_state(path, run, g, l, 1, err, errlen);
}

/* ---- loading ----------------------------------------------------------------- */

/* Check one file completely before anything is restored from it; fills
 * *why on failure. On success restores into g and l. */
/* "'name' (id 0123abcd...)" */
static void run_name(char *out, size_t cap, const char *name, size_t name_len, const uint8_t *id)
{
    snprintf(out, cap, "'%.*s' (cluster id %02x%02x%02x%02x...)", (int)name_len, name, id[0], id[1], id[2], id[3]);
}

static int load_one(const char *path, const ckpt_run *run, gsp_peer *g, const ckpt_local *l, int *final,
                    const char **why, char *detail, size_t detail_len)
{
    uint8_t *data = NULL;
    size_t len = 0;
    int rc = map_whole(path, &data, &len);
    if (rc < 0) {
        *why = strerror(-rc);
        return rc;
    }
    uint8_t hash[CKPT_HASH];
    rc = -EBADMSG;
    if (len < 8 + CKPT_HASH || memcmp(data, CKPT_MAGIC, 8) != 0) {
        *why = len < 8 + CKPT_HASH ? "truncated" : "not a checkpoint";
        goto out;
    }
    {
        crypto_generichash_state st;
        crypto_generichash_init(&st, NULL, 0, sizeof hash);
        for (size_t at = 0, block = 16u << 20; at < len - CKPT_HASH; at += block) {
            const size_t n = len - CKPT_HASH - at < block ? len - CKPT_HASH - at : block;
            crypto_generichash_update(&st, data + at, n);
            release(data + at, n);
        }
        crypto_generichash_final(&st, hash, sizeof hash);
    }
    if (sodium_memcmp(hash, data + len - CKPT_HASH, CKPT_HASH) != 0) {
        *why = "checksum mismatch (torn or altered)";
        goto out;
    }
    ibuf b = {data + 8, data + len - CKPT_HASH, 0};
    const uint32_t version = get_u32(&b);
    if (version < 2 || version > CKPT_VERSION || get_u32(&b) != CKPT_ENDIAN) {
        *why = "another version or byte order";
        goto out;
    }
    const size_t dim = g->dim;
    rc = -ESTALE;
    if (get_u32(&b) != (uint32_t)run->id || get_u32(&b) != (uint32_t)run->n_peers || get_u64(&b) != dim ||
        get_u64(&b) != run->seed || !text_is(&b, run->model) || !text_is(&b, run->codec)) {
        *why = b.failed ? "truncated" : "written by another run (id, peers, model, codec or seed differ)";
        goto out;
    }
    {
        uint32_t name_len = get_u32(&b);
        const char *name = (const char *)b.p;
        if (b.failed || name_len > CKPT_MAX_TEXT || (size_t)(b.end - b.p) < name_len + sizeof run->cluster_digest) {
            rc = -EBADMSG;
            *why = "truncated";
            goto out;
        }
        const uint8_t *cid = b.p + name_len;
        b.p += name_len + sizeof run->cluster_digest;
        if (memcmp(cid, run->cluster_digest, sizeof run->cluster_digest) != 0) {
            char theirs[CKPT_MAX_TEXT + 48], ours[CKPT_MAX_TEXT + 48];
            const char *me = run->cluster ? run->cluster : "";
            run_name(theirs, sizeof theirs, name, name_len, cid);
            run_name(ours, sizeof ours, me, strlen(me), run->cluster_digest);
            snprintf(detail, detail_len, "written by another run: run %s, this is run %s", theirs, ours);
            *why = detail;
            goto out;
        }
    }
    rc = -EBADMSG;
    /* Parse into scratch first: a file that fails half-way changes nothing. */
    long round = (long)get_u64(&b);
    double w = get_f64(&b);
    const uint8_t *x = b.p; /* x, then (version 3 on) the optimizer's kind and steps, then its state */
    if (b.failed || (size_t)(b.end - b.p) < dim * sizeof(float))
        goto truncated;
    b.p += dim * sizeof(float);
    uint32_t opt_kind = NN_OPT_SGD; /* version 2: an SGD velocity */
    uint64_t opt_steps = 0;
    if (version >= 3)
        opt_kind = get_u32(&b), opt_steps = get_u64(&b);
    const size_t opt_n = (opt_kind == NN_OPT_ADAMW ? 2 : 1) * dim;
    if (!b.failed && (opt_kind > NN_OPT_ADAMW || (l->opt && opt_kind != (uint32_t)l->opt->kind))) {
        snprintf(detail, detail_len, "written with another optimizer (%s; this run uses %s)",
                 opt_kind > NN_OPT_ADAMW ? "unknown" : nn_opt_kind_name((nn_opt_kind)opt_kind),
                 l->opt ? nn_opt_kind_name(l->opt->kind) : "sgd");
        *why = detail;
        rc = -ESTALE;
        goto out;
    }
    const uint8_t *opt_state = b.p;
    if (b.failed || (size_t)(b.end - b.p) < opt_n * sizeof(float))
        goto truncated;
    b.p += opt_n * sizeof(float);
    /* Version 5 on: the outer optimizer's velocity, if the run has one. */
    const uint32_t outer = version >= 5 ? get_u32(&b) : 0;
    if (!b.failed && outer != (uint32_t)(l->outer_velocity != NULL)) {
        *why = outer ? "written with an outer optimizer (--outer); this run has none"
                     : "written without an outer optimizer; this run has one (--outer)";
        rc = -ESTALE;
        goto out;
    }
    const uint8_t *outer_velocity = b.p;
    if (b.failed || (size_t)(b.end - b.p) < (outer ? dim * sizeof(float) : 0))
        goto truncated;
    b.p += outer ? dim * sizeof(float) : 0;
    nn_rng rng;
    get(&b, rng.s, sizeof rng.s);
    uint64_t pos = get_u64(&b), epoch = get_u64(&b), perm_n = get_u64(&b);
    const uint64_t shard_n = l->batches ? (uint64_t)l->batches->d->n : 0;
    if (b.failed || perm_n != shard_n || pos > perm_n || round < 0 || !(w > 0)) {
        *why = b.failed ? "truncated" : "inconsistent header (shard size, position, round or weight)";
        goto out;
    }
    const uint8_t *perm = b.p;
    if ((size_t)(b.end - b.p) < perm_n * sizeof(int))
        goto truncated;
    b.p += perm_n * sizeof(int);
    for (uint64_t i = 0; i < perm_n; i++) {
        int v;
        memcpy(&v, perm + i * sizeof(int), sizeof v);
        if (v < 0 || (uint64_t)v >= perm_n) {
            *why = "batch permutation out of range";
            goto out;
        }
    }
    uint32_t n_in = get_u32(&b);
    /* (before version 6 a compressed edge's totals or corrections too, which it no longer keeps) */
    const size_t x_bytes = !g->codec || version < 6 ? dim * sizeof(double) : 0;
    const size_t edge_bytes = 4 + 8 + 8 + 8 + 8 + 4 + x_bytes + (edge_ref(g) ? dim * sizeof(float) : 0);
    if (b.failed || n_in > (uint32_t)run->n_peers || (size_t)(b.end - b.p) != n_in * edge_bytes) {
        *why = b.failed ? "truncated" : "in-edge table does not match its count";
        goto out;
    }
    const uint8_t *edges = b.p;
    for (uint32_t k = 0; k < n_in; k++) {
        int32_t peer;
        memcpy(&peer, edges + k * edge_bytes, sizeof peer);
        if (peer < 0 || peer >= run->n_peers || peer == run->id) {
            *why = "in-edge from an impossible peer";
            goto out;
        }
    }
    /* Whole and ours: restore. */
    g->round = round, g->since = round, g->w = w;
    copy_out(g->x, x, dim * sizeof(float));
    if (l->opt) {
        size_t n;
        long *steps;
        float *state = nn_optimizer_state(l->opt, &n, &steps);
        copy_out(state, opt_state, n * sizeof(float));
        if (steps)
            *steps = (long)opt_steps;
    }
    if (l->batches) {
        l->batches->rng = rng;
        l->batches->pos = (int)pos, l->batches->epoch = (long)epoch;
        copy_out(l->batches->perm, perm, perm_n * sizeof(int));
    }
    if (outer)
        copy_out(l->outer_velocity, outer_velocity, dim * sizeof(float));
    ibuf eb = {edges, b.end, 0};
    for (uint32_t k = 0; k < n_in; k++) {
        gsp_edge *e = gsp_in_edge(g, (int)get_u32(&eb));
        if (!e) {
            *why = "out of memory";
            rc = -ENOMEM;
            goto out;
        }
        e->incarnation = get_u64(&eb);
        e->seq = get_u64(&eb);
        e->round = (long)get_u64(&eb);
        e->w = get_f64(&eb);
        uint32_t flags = get_u32(&eb);
        e->sync = (flags & FLAG_SYNC) != 0, e->adopt = (flags & FLAG_ADOPT) != 0;
        *final = (k == 0 || *final) && (flags & FLAG_FINAL); /* (every in-edge says so: written by this version) */
        e->sync_base = e->seq; /* (a wait's seq is not kept: it asks from what it holds) */
        if (!g->codec)
            get(&eb, e->x, dim * sizeof(double));
        else
            eb.p += x_bytes; /* (the table's size was checked above) */
        if (edge_ref(g))
            get(&eb, e->ref, dim * sizeof(float));
    }
    rc = 0;
    goto out;
truncated:
    *why = "truncated";
out:
    if (data)
        munmap(data, len);
    return rc;
}

/* A final checkpoint is final once: the first read leaves PATH.resumed
 * beside it (on disk before the run goes on), so that a run resumed from
 * it that dies before its own next checkpoint comes back from it as from
 * any checkpoint (it may have absorbed messages since). 1 when it is read
 * as final now. */
static int read_as_final(const char *path)
{
    char mark[4200], err[256];
    struct stat st;
    if (resumed_name(mark, sizeof mark, path) < 0 || stat(mark, &st) == 0 || errno != ENOENT)
        return 0;
    return wholefile_write(mark, "", 0, 0600, 0, err, sizeof err) == 0;
}

int ckpt_read(const char *path, const ckpt_run *run, gsp_peer *g, const ckpt_local *l, char *used, size_t usedlen,
              char *err, size_t errlen)
{
    const ckpt_local none = {0};
    if (!l)
        l = &none;
    char prev[4200];
    snprintf(prev, sizeof prev, "%s.prev", path);
    const char *why_cur = NULL, *why_prev = NULL;
    char detail_cur[2 * CKPT_MAX_TEXT + 160], detail_prev[2 * CKPT_MAX_TEXT + 160];
    int final = 0;
    int rc = load_one(path, run, g, l, &final, &why_cur, detail_cur, sizeof detail_cur);
    if (rc == 0) {
        snprintf(used, usedlen, "%s", path);
        return final && read_as_final(path) ? CKPT_FINAL : 0;
    }
    /* (a .prev is older than a state its run went on from: never final) */
    int rc_prev = load_one(prev, run, g, l, &final, &why_prev, detail_prev, sizeof detail_prev);
    if (rc_prev == 0) {
        snprintf(used, usedlen, "%s (%s: %s)", prev, path, why_cur);
        return 0;
    }
    if (rc == -ENOENT && rc_prev == -ENOENT) {
        snprintf(err, errlen, "no checkpoint at %s", path);
        return -ENOENT;
    }
    snprintf(err, errlen, "no whole checkpoint: %s: %s; %s: %s", path, why_cur, prev, why_prev);
    return rc != -ENOENT ? rc : rc_prev;
}

int ckpt_remove(const char *path, char *err, size_t errlen)
{
    static const char *const tails[] = {"", ".prev", ".tmp", ".resumed"};
    char name[4200];
    for (size_t k = 0; k < sizeof tails / sizeof *tails; k++) {
        if (snprintf(name, sizeof name, "%s%s", path, tails[k]) >= (int)sizeof name) {
            snprintf(err, errlen, "%s: path too long", path);
            return -ENAMETOOLONG;
        }
        if (unlink(name) != 0 && errno != ENOENT) {
            const int rc = -errno;
            snprintf(err, errlen, "%s: %s", name, strerror(errno));
            return rc;
        }
    }
    return 0;
}
