/* The exact sparse all-gather (gossip/gsp_gather.h): emit, take, apply. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gsp_gather.h"
#include "gossip/gsp_internal.h"
#include "gossip/gsp_pool.h"

static void list_free(gsp_gather_list *l)
{
    free(l->idx), free(l->val);
    memset(l, 0, sizeof *l);
}

/* The id of a model that GATHER messages carry (peer/wire/WIRE.md, "The
 * model id of a GATHER"): per chunk of GSP_CHUNK values, four FNV-1a 64
 * lanes, value i (a float32's bits as one uint32 word) into lane i mod 4,
 * and the chunk's id FNV-1a 64 over the four lanes; the model's id FNV-1a
 * 64 over the chunk ids in order, never 0. The chunks hash on the pool's
 * threads and the lanes keep four multiplies in flight: a byte at a time
 * over the whole model (the origin id) was a third of a round's CPU at 85M
 * parameters. */
typedef struct digest_job {
    const float *x;
    size_t n;
    uint64_t *ids;
} digest_job;

#define FNV_BASIS 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static void digest_chunk(void *arg, size_t k)
{
    const digest_job *j = arg;
    const size_t s = k * GSP_CHUNK, e = s + GSP_CHUNK < j->n ? s + GSP_CHUNK : j->n;
    uint64_t h[4] = {FNV_BASIS, FNV_BASIS, FNV_BASIS, FNV_BASIS};
    for (size_t i = s; i < e; i++) {
        uint32_t u;
        memcpy(&u, &j->x[i], sizeof u);
        h[(i - s) & 3] = (h[(i - s) & 3] ^ u) * FNV_PRIME;
    }
    uint64_t id = FNV_BASIS;
    for (int l = 0; l < 4; l++)
        id = (id ^ h[l]) * FNV_PRIME;
    j->ids[k] = id;
}

uint64_t gsp_gather_model_id(gsp_peer *g, const float *x)
{
    digest_job j = {.x = x, .n = g->dim, .ids = g->gather->chunk_ids};
    const size_t n = gsp_chunks(g->dim);
    gsp_pool_run(g->pool, n, digest_chunk, &j);
    uint64_t h = FNV_BASIS;
    for (size_t k = 0; k < n; k++)
        h = (h ^ j.ids[k]) * FNV_PRIME;
    return h ? h : 1;
}

void gsp_gather_free(gsp_peer *g)
{
    gsp_gather *a = g->gather;
    if (!a)
        return;
    for (int s = 0; a->list && s < g->n_peers; s++)
        list_free(&a->list[s]);
    for (int h = 0; h < GSP_GATHER_HISTORY; h++)
        free(a->past[h].idx), free(a->past[h].d);
    if (!a->outside)
        free(a->anchor);
    free(a->list), free(a->err), free(a->buf), free(a->offer), free(a->chunk_ids);
    free(a);
    g->gather = NULL;
}

int gsp_set_gather(gsp_peer *g, float decay)
{
    if (!g->codec || !cmp_sparse_bound(g->codec, g->dim) || g->step != 1.0f || g->n_out || g->n_in ||
        g->round > 0 || !(decay >= 0.0f && decay <= 1.0f))
        return -EINVAL;
    const size_t n = g->dim ? g->dim : 1;
    gsp_gather *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    g->gather = a;
    a->decay = decay;
    a->apart_from = -1;
    a->anchor = malloc(n * sizeof *a->anchor);
    a->err = calloc(n, sizeof *a->err);
    a->list = calloc((size_t)g->n_peers, sizeof *a->list);
    a->chunk_ids = malloc(gsp_chunks(g->dim) * sizeof *a->chunk_ids);
    a->buf_cap = cmp_bound(g->codec, g->dim);
    a->buf = malloc(a->buf_cap ? a->buf_cap : 1);
    if (!a->anchor || !a->err || !a->list || !a->buf || !a->chunk_ids) {
        gsp_gather_free(g);
        return -ENOMEM;
    }
    for (int s = 0; s < g->n_peers; s++)
        a->list[s].round = -1;
    for (int h = 0; h < GSP_GATHER_HISTORY; h++)
        a->past[h].round = -1;
    memcpy(a->anchor, g->x, g->dim * sizeof *g->x);
    a->digest = gsp_gather_model_id(g, a->anchor);
    return 0;
}

void gsp_gather_outside_steps(gsp_peer *g)
{
    gsp_gather *a = g->gather;
    if (a->outside)
        return;
    free(a->anchor);
    a->anchor = g->x, a->outside = 1;
    a->digest = gsp_gather_model_id(g, a->anchor);
}

void gsp_gather_steps_at(gsp_peer *g, const float *z) { g->gather->steps_end = z; }

/* x = the anchor (nothing to do where they are one array). */
static void x_from_anchor(gsp_peer *g)
{
    if (g->x != g->gather->anchor)
        memcpy(g->x, g->gather->anchor, g->dim * sizeof *g->x);
}

/* Room for n positions and values in the pair (idx, val) of capacity *cap. */
static int pair_room(uint32_t **idx, float **val, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < n)
        c *= 2;
    uint32_t *i = realloc(*idx, c * sizeof *i);
    if (!i)
        return -ENOMEM;
    *idx = i;
    float *v = realloc(*val, c * sizeof *v);
    if (!v)
        return -ENOMEM;
    *val = v, *cap = c;
    return 0;
}

/* Append a message's non-zeros to l: -EBADMSG, -ENOSPC (more than the
 * receiver's codec would send: another configuration), -ENOMEM. */
static long list_add(gsp_gather_list *l, const uint8_t *msg, size_t len, size_t dim, size_t bound)
{
    if (pair_room(&l->idx, &l->val, &l->cap, l->n + bound) < 0)
        return -ENOMEM;
    return cmp_decode_sparse(msg, len, dim, l->idx + l->n, l->val + l->n, bound);
}

int gsp_gather_offer(gsp_peer *g, const float *z, long round)
{
    gsp_gather *a = g->gather;
    if (!a->offer && !(a->offer = malloc((g->dim ? g->dim : 1) * sizeof *a->offer)))
        return -ENOMEM;
    memcpy(a->offer, z, g->dim * sizeof *z);
    a->offer_round = round;
    return 0;
}

/* The offer becomes the model this round started from. */
static void take_offer(gsp_peer *g)
{
    gsp_gather *a = g->gather;
    memcpy(a->anchor, a->offer, g->dim * sizeof *a->offer);
    a->digest = gsp_gather_model_id(g, a->anchor);
    free(a->offer);
    a->offer = NULL;
    a->taken++;
}

/* e = decay e + (f - x) over [s, e), on the pool's threads, for steps
 * from f to x: in x from the anchor, or outside x from `from` to z, where
 * x would hold f + (z - f) (a caller's step folded onto x = f: the same
 * floats as engine_step_taken's). A fold also writes the next steps'
 * start, the anchor plus the round's own progress, into `next` (and into z
 * when that is a caller's buffer). */
typedef struct feedback_job {
    gsp_gather *a;
    const float *x;    /* the steps ran in x */
    const float *from; /* else: where they started */
    const float *z;    /* and where they ended */
    float *next;       /* a fold: the next start, or NULL */
    float *handed;     /* a fold: z again when it is a caller's buffer (the start goes there too), or NULL */
    int bad;           /* a value not finite (set, never cleared, by any span) */
} feedback_job;

static void feedback_span(void *arg, size_t s, size_t e)
{
    feedback_job *j = arg;
    gsp_gather *a = j->a;
    unsigned bad = 0;
    if (j->z)
        for (size_t i = s; i < e; i++) {
            const float f = j->from[i], d = j->z[i] - f, x = f + d;
            bad |= gsp_not_finite(x);
            a->err[i] = a->decay * a->err[i] + (f - x);
            if (j->next) {
                const float start = a->anchor[i] + d;
                j->next[i] = start;
                if (j->handed)
                    j->handed[i] = start;
            }
        }
    else
        for (size_t i = s; i < e; i++) {
            bad |= gsp_not_finite(j->x[i]);
            a->err[i] = a->decay * a->err[i] + (a->anchor[i] - j->x[i]);
        }
    if (bad)
        __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
}

void gsp_gather_fold(gsp_peer *g, float *from, float *z, int handed)
{
    gsp_gather *a = g->gather;
    feedback_job j = {.a = a, .from = from, .z = z, .next = from, .handed = handed ? z : NULL};
    gsp_pool_spans(g->pool, g->dim, feedback_span, &j);
    a->folded = 1, a->fold_bad = j.bad;
}

int gsp_gather_emit(gsp_peer *g, const topo_out *out, gsp_msg *msgs)
{
    gsp_gather *a = g->gather;
    gsp_edge *edges[TOPO_MAX_OUT];
    for (int k = 0; k < out->n; k++)
        if (!(edges[k] = gsp_edge_at(g, out->peer[k], 1)))
            return -ENOMEM;
    /* The round's steps into the error feedback (feedback_span; w is 1 throughout). */
    if (a->folded) { /* (gsp_gather_fold took the steps in already) */
        a->folded = 0;
        if (a->fold_bad)
            return -EDOM;
    } else {
        feedback_job j = {.a = a, .x = g->x, .from = a->anchor};
        if (a->outside) {
            if (!(j.z = a->steps_end))
                return -EINVAL;
            a->steps_end = NULL;
        }
        gsp_pool_spans(g->pool, g->dim, feedback_span, &j);
        if (j.bad)
            return -EDOM;
    }
    long len = gsp_encode(g, g->codec, a->err, g->dim, g->seed ^ ((uint64_t)g->id << 40) ^ (uint64_t)g->round,
                          a->buf, a->buf_cap);
    if (len < 0)
        return (int)len;
    a->buf_len = (size_t)len;
    gsp_gather_list *own = &a->list[g->id];
    own->n = 0; /* (this round's message replaces one never applied) */
    long k = list_add(own, a->buf, a->buf_len, g->dim, cmp_sparse_bound(g->codec, g->dim));
    if (k < 0)
        return k == -ENOMEM ? -ENOMEM : -EIO;
    for (long j = 0; j < k; j++)
        a->err[own->idx[j]] -= own->val[j];
    if (a->offer && a->offer_round == g->round) /* (the round's start, as the lowest sender had it) */
        take_offer(g);
    own->n = (size_t)k, own->round = g->round, own->digest = a->digest;
    x_from_anchor(g);
    for (int j = 0; j < out->n; j++) {
        gsp_edge *e = edges[j];
        e->seq++;
        e->round = g->round;
        msgs[j] = (gsp_msg){.src = g->id, .dst = e->peer, .round = g->round, .seq = e->seq, .kind = GSP_GATHER,
                            .w_total = g->w, .dim = g->dim, .payload = a->buf, .payload_len = a->buf_len,
                            .gain = 1.0f, .step = 1.0f, .origin = a->digest, .incarnation = g->incarnation};
    }
    g->round++;
    g->stats.sent += (uint64_t)out->n;
    return out->n;
}

int gsp_gather_take(gsp_peer *g, gsp_edge *e, const gsp_msg *m)
{
    gsp_gather *a = g->gather;
    if (m->seq <= e->seq) { /* a duplicate */
        g->stats.ignored++;
        return GSP_IGNORED;
    }
    if (m->round != g->round - 1) { /* (its round was applied already, or this peer is behind) */
        e->seq = m->seq, e->round = m->round;
        a->stale++;
        g->stats.ignored++;
        return GSP_IGNORED;
    }
    gsp_gather_list *l = &a->list[m->src];
    l->n = 0, l->round = -1;
    long k = list_add(l, m->payload, m->payload_len, g->dim, cmp_sparse_bound(g->codec, g->dim));
    if (k == -ENOMEM)
        return -ENOMEM;
    if (k < 0)
        return k == -EBADMSG ? -EBADMSG
                             : gsp_refuse(g, NULL, "a message of another codec than this peer's (every peer needs "
                                                   "the same --codec)");
    if (!gsp_floats_finite(l->val + l->n, (size_t)k))
        return gsp_refuse(g, NULL, "a NaN or an infinity in its values");
    for (long j = 1; j < k; j++) /* (a position twice would count its sender twice; the apply merges by position) */
        if (l->idx[j] <= l->idx[j - 1])
            return gsp_refuse(g, NULL, "positions not strictly ascending");
    l->n = (size_t)k, l->round = m->round, l->digest = m->origin;
    e->seq = m->seq, e->round = m->round;
    g->stats.absorbed++;
    return GSP_APPLIED;
}

static double list_norm(const gsp_gather_list *l)
{
    double s = 0;
    for (size_t j = 0; j < l->n; j++)
        s += (double)l->val[j] * l->val[j];
    return sqrt(s);
}

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The offer (the start of round `from`) brought to the start of round
 * `to` with this peer's updates of the rounds between, as they were
 * applied; -ENOENT when one of them is no longer kept. */
static int bring_forward(gsp_peer *g, long from, long to)
{
    gsp_gather *a = g->gather;
    if (to - from > GSP_GATHER_HISTORY)
        return -ENOENT;
    for (long r = from; r < to; r++)
        if (a->past[r % GSP_GATHER_HISTORY].round != r)
            return -ENOENT;
    for (long r = from; r < to; r++) {
        const gsp_gather_step *st = &a->past[r % GSP_GATHER_HISTORY];
        for (size_t j = 0; j < st->n; j++)
            a->offer[st->idx[j]] -= st->d[j];
    }
    return 0;
}

/* The senders' lists, each strictly ascending, merged by position: a heap
 * of senders keyed by (the position at their head, the sender's id), so
 * that a position's values come out in the order of the senders' ids. */
typedef struct merge {
    const gsp_gather_list *list;
    size_t *at;    /* per sender: its next entry */
    int *heap, n;  /* senders with entries left */
} merge;

static int merge_before(const merge *m, int s, int t)
{
    const uint32_t i = m->list[s].idx[m->at[s]], j = m->list[t].idx[m->at[t]];
    return i < j || (i == j && s < t);
}

static void merge_sift(merge *m, int k)
{
    for (;;) {
        int c = 2 * k + 1;
        if (c >= m->n)
            return;
        if (c + 1 < m->n && merge_before(m, m->heap[c + 1], m->heap[c]))
            c++;
        if (!merge_before(m, m->heap[c], m->heap[k]))
            return;
        const int t = m->heap[c];
        m->heap[c] = m->heap[k], m->heap[k] = t, k = c;
    }
}

/* The head sender's entry is taken: its next one goes into the heap. */
static void merge_next(merge *m)
{
    const int s = m->heap[0];
    if (++m->at[s] == m->list[s].n)
        m->heap[0] = m->heap[--m->n];
    merge_sift(m, 0);
}

int gsp_gather_apply(gsp_peer *g)
{
    gsp_gather *a = g->gather;
    const size_t np = (size_t)g->n_peers;
    double *norm = malloc(np * sizeof *norm), *sorted = malloc(np * sizeof *sorted);
    float *clip = malloc(np * sizeof *clip);
    merge m = {.list = a->list, .at = calloc(np, sizeof *m.at), .heap = malloc(np * sizeof *m.heap)};
    if (!norm || !sorted || !clip || !m.at || !m.heap) {
        free(norm), free(sorted), free(clip), free(m.at), free(m.heap);
        return -ENOMEM;
    }
    gsp_gather_list *own = &a->list[g->id];
    if (a->offer && own->round == g->round - 1 && a->offer_round <= own->round) {
        if (bring_forward(g, a->offer_round, own->round) == 0) {
            take_offer(g); /* (the round's start, as the lowest sender had it) */
            x_from_anchor(g);
            own->digest = a->digest;
        } else {
            free(a->offer);
            a->offer = NULL;
            a->dropped++;
        }
    }
    /* The round's lowest sender (this peer's own message included) decides
     * which model is the run's: a peer whose model differs takes it. */
    int n = 0, lowest = -1;
    for (int s = 0; s < g->n_peers; s++) {
        gsp_gather_list *l = &a->list[s];
        norm[s] = l->n ? list_norm(l) : 0.0;
        if (l->n)
            sorted[n++] = norm[s];
        if (own->round >= 0 && l->round == own->round) {
            a->apart += l->digest != own->digest;
            if (lowest < 0)
                lowest = s;
        }
    }
    a->apart_from = lowest >= 0 && lowest != g->id && a->list[lowest].digest != own->digest ? lowest : -1;
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    const double median = n ? sorted[(n - 1) / 2] : 0.0; /* (the lower middle, as torch.median) */
    for (int s = 0; s < g->n_peers; s++) {
        clip[s] = norm[s] > median ? (float)(median / norm[s]) : 1.0f;
        if (a->list[s].n)
            m.heap[m.n++] = s;
    }
    for (int k = m.n / 2 - 1; k >= 0; k--)
        merge_sift(&m, k);
    const long round = own->round; /* (the lists are emptied below) */
    gsp_gather_step *st = &a->past[(size_t)(round >= 0 ? round : 0) % GSP_GATHER_HISTORY];
    st->n = 0, st->round = -1;
    size_t total = 0;
    for (int s = 0; s < g->n_peers; s++)
        total += a->list[s].n;
    int rc = pair_room(&st->idx, &st->d, &st->cap, total);
    /* Each position's clipped values summed in the order of the senders'
     * ids, so that peers with the same messages compute the same floats;
     * the mean over those that picked it. */
    while (m.n) {
        const uint32_t i = a->list[m.heap[0]].idx[m.at[m.heap[0]]];
        float sum = 0.0f;
        unsigned picked = 0;
        do {
            const int s = m.heap[0];
            sum += clip[s] * a->list[s].val[m.at[s]];
            picked++;
            merge_next(&m);
        } while (m.n && a->list[m.heap[0]].idx[m.at[m.heap[0]]] == i);
        const float d = sum / (float)picked;
        g->x[i] -= d;
        if (rc == 0)
            st->idx[st->n] = i, st->d[st->n++] = d;
    }
    for (int s = 0; s < g->n_peers; s++)
        a->list[s].n = 0, a->list[s].round = -1;
    if (rc == 0 && round >= 0) /* (without room the round is not kept: an older offer is dropped) */
        st->round = round;
    free(norm), free(sorted), free(clip), free(m.at), free(m.heap);
    if (!a->outside)
        memcpy(a->anchor, g->x, g->dim * sizeof *g->x);
    a->digest = gsp_gather_model_id(g, a->anchor);
    a->applied_rounds++;
    return n;
}

size_t gsp_gather_bytes(const gsp_peer *g)
{
    const gsp_gather *a = g->gather;
    if (!a)
        return 0;
    const size_t n = g->dim ? g->dim : 1;
    size_t b = sizeof *a + n * (a->outside ? 1 : 2) * sizeof(float) + a->buf_cap +
               (size_t)g->n_peers * sizeof *a->list + (a->offer ? n * sizeof(float) : 0);
    for (int s = 0; s < g->n_peers; s++)
        b += a->list[s].cap * (sizeof(uint32_t) + sizeof(float));
    for (int h = 0; h < GSP_GATHER_HISTORY; h++)
        b += a->past[h].cap * (sizeof(uint32_t) + sizeof(float));
    return b;
}
