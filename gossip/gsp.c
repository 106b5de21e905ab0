/* Running-sum push-sum, plain or compressed: emit, absorb, de-bias, readiness. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress/cmp_rng.h"
#include "gossip/gsp.h"
#include "gossip/gsp_gather.h"
#include "gossip/gsp_kernels.h"
#include "gossip/gsp_internal.h"
#include "gossip/gsp_pool.h"

/* A reference further than this (relative, in norm) from the model is sent
 * again whole (bf16) instead of corrected with the codec. */
#define GSP_MAX_LAG 0.25

int gsp_init(gsp_peer *g, int id, int n_peers, size_t dim, int tau, const float *x0)
{
    memset(g, 0, sizeof *g);
    if (n_peers < 1 || id < 0 || id >= n_peers || tau < 0)
        return -EINVAL;
    g->id = id, g->n_peers = n_peers, g->dim = dim, g->tau = tau;
    g->x = calloc(dim ? dim : 1, sizeof(float));
    g->z = calloc(dim ? dim : 1, sizeof(float));
    if (!g->x || !g->z) {
        gsp_free(g);
        return -ENOMEM;
    }
    if (x0)
        memcpy(g->x, x0, dim * sizeof(float));
    g->w = 1.0;
    g->lag_scale = 1.0;
    return 0;
}

/* Forget the kept changes of the messages up to seq (all: UINT64_MAX). */
static void log_trim(gsp_edge *e, uint64_t seq, gsp_sent *spare)
{
    int k = 0;
    while (k < e->n_log && e->log[k].seq <= seq) {
        gsp_sent *s = &e->log[k];
        if (spare && s->idx && s->cap > spare->cap) { /* kept as the spare (the larger) */
            free(spare->idx), free(spare->old);
            *spare = *s;
        } else
            free(s->idx), free(s->old);
        k++;
    }
    if (k)
        memmove(e->log, e->log + k, (size_t)(e->n_log - k) * sizeof *e->log);
    e->n_log -= k;
}

static void free_edges(gsp_edge *e, int n)
{
    for (int i = 0; i < n; i++) {
        log_trim(&e[i], UINT64_MAX, NULL);
        free(e[i].log);
        free(e[i].x);
        free(e[i].ref);
    }
    free(e);
}

int gsp_set_codec(gsp_peer *g, const cmp_spec *codec, uint64_t seed, float step)
{
    if (g->n_out || g->n_in || !(step > 0.0f && step <= 1.0f))
        return -EINVAL;
    char err[64];
    if (cmp_spec_parse(&g->first, "bf16", err, sizeof err) < 0)
        return -EINVAL;
    g->step = step;
    size_t work = cmp_work_size(codec, g->dim);
    g->work = work ? malloc(work) : NULL;
    g->sp_cap = cmp_sparse_bound(codec, g->dim);
    g->sp_idx = malloc((g->sp_cap ? g->sp_cap : 1) * sizeof *g->sp_idx);
    g->sp_val = malloc((g->sp_cap ? g->sp_cap : 1) * sizeof *g->sp_val);
    if ((work && !g->work) || !g->sp_idx || !g->sp_val) {
        free(g->work), free(g->sp_idx), free(g->sp_val);
        g->sp_val = NULL, g->work = NULL, g->sp_idx = NULL, g->sp_cap = 0;
        return -ENOMEM;
    }
    g->codec = codec;
    g->seed = seed;
    return 0;
}

void gsp_free(gsp_peer *g)
{
    if (!g)
        return;
    gsp_gather_free(g);
    free(g->x);
    free(g->z);
    free(g->c);
    if (!g->scratch)
        free(g->v), free(g->work), free(g->sp_idx), free(g->sp_val);
    free(g->origin_copy), free(g->origin_drawn), free(g->select);
    free(g->spare.idx), free(g->spare.old);
    for (int k = 0; k <= TOPO_MAX_OUT; k++)
        free(g->msg_buf[k]);
    gsp_corr_release(g);
    free_edges(g->out, g->n_out);
    free_edges(g->in, g->n_in);
    memset(g, 0, sizeof *g);
}

float gsp_default_step(const cmp_spec *codec, size_t dim)
{
    /* Stable when the step is about the share of ||share - r|| one message
     * removes (CHOCO-SGD's gamma ~ delta); constants from the sweep in
     * gossip/GUARANTEES.md (ring and exponential graph, 8 peers, 7,850 values). */
    const char *name = codec->ops->name;
    const double root = sqrt((double)(dim ? dim : 1));
    double step = 1.0;
    if (!strcmp(name, "topk") || !strcmp(name, "stc") || !strcmp(name, "sketch") || !strcmp(name, "sparseloco"))
        step = 2.0 * codec->fraction;
    else if (!strcmp(name, "randk"))
        step = 0.8 * codec->fraction;
    else if (!strcmp(name, "qsgd"))
        step = codec->levels / (codec->levels + root);
    else if (!strcmp(name, "terngrad"))
        step = fmin(0.2, 16.0 / root);
    else if (!strcmp(name, "sign"))
        step = 0.05; /* averaging alone converges slowly at any step for large dim; 0.05 trains best measured */
    return (float)(step < 1e-3 ? 1e-3 : step > 1.0 ? 1.0 : step);
}

typedef struct debias_job {
    const float *x;
    float *dst, inv;
} debias_job;

static void debias_span(void *arg, size_t s, size_t e)
{
    const debias_job *a = arg;
    for (size_t j = s; j < e; j++)
        a->dst[j] = a->x[j] * a->inv;
}

void gsp_debias_to(const gsp_peer *g, float *dst)
{
    debias_job a = {.x = g->x, .dst = dst, .inv = gsp_debias_factor(g)};
    gsp_pool_spans(g->pool, g->dim, debias_span, &a);
}

const float *gsp_debias(gsp_peer *g)
{
    if (g->w == 1.0 || g->left) /* x / 1 is x, bit for bit: a regular graph without faults keeps w exactly 1 */
        return g->x;
    gsp_debias_to(g, g->z);
    g->z_written = 1;
    return g->z;
}

void gsp_scale_by_w(gsp_peer *g, const float *z)
{
    for (size_t i = 0; i < g->dim; i++)
        g->x[i] = (float)(g->w * z[i]);
}

void gsp_debias_in_place(gsp_peer *g)
{
    if (g->w != 1.0)
        gsp_debias_to(g, g->x);
}

void gsp_rebias_in_place(gsp_peer *g)
{
    if (g->w != 1.0)
        gsp_scale_by_w(g, g->x);
}

float *gsp_take_model(gsp_peer *g)
{
    float *m = g->x;
    gsp_debias_in_place(g); /* z would be one more copy at the end */
    g->x = NULL;
    return m;
}

size_t gsp_msg_room(const gsp_peer *g)
{
    size_t a = cmp_bound(g->codec, g->dim), b = cmp_bound(&g->first, g->dim);
    return a > b ? a : b;
}

/* The edge to/from `peer`, created on first use. Edges are few (the
 * neighbours a schedule ever uses, plus reroutes), so a linear scan is the
 * fastest lookup; creation happens once per edge, not per round. */
static gsp_edge *edge(gsp_peer *g, gsp_edge **list, int *n, int *cap, int peer, int outgoing)
{
    const size_t dim = g->dim;
    for (int i = 0; i < *n; i++)
        if ((*list)[i].peer == peer)
            return &(*list)[i];
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 8;
        gsp_edge *grown = realloc(*list, (size_t)nc * sizeof **list);
        if (!grown)
            return NULL;
        *list = grown, *cap = nc;
    }
    gsp_edge *e = &(*list)[*n];
    memset(e, 0, sizeof *e);
    e->peer = peer;
    e->round = -1;
    e->adopt = !outgoing && g->adopt;
    if (g->gather) /* (no mass moves: nothing to keep per edge) */
        ;
    else if (g->codec)
        e->ref = gsp_ref_new(g);
    else
        e->x = calloc(dim ? dim : 1, sizeof(double));
    if (!g->gather && (g->codec ? !e->ref : !e->x)) {
        free(e->x), free(e->ref);
        return NULL;
    }
    (*n)++;
    return e;
}

gsp_edge *gsp_edge_at(gsp_peer *g, int peer, int outgoing)
{
    return outgoing ? edge(g, &g->out, &g->n_out, &g->cap_out, peer, 1) : edge(g, &g->in, &g->n_in, &g->cap_in, peer, 0);
}

/* Totals back to zero for a sender's new incarnation. */
static void edge_restart(gsp_peer *g, gsp_edge *e, uint64_t incarnation)
{
    if (e->x)
        memset(e->x, 0, (g->dim ? g->dim : 1) * sizeof(double));
    if (e->ref)
        gsp_ref_start(g, &e->ref);
    log_trim(e, UINT64_MAX, NULL);
    e->w = 0, e->seq = 0, e->round = -1, e->sync = 0, e->adopt = 0;
    e->incarnation = incarnation;
}

void gsp_restart(gsp_peer *g, uint64_t incarnation)
{
    g->incarnation = incarnation;
    for (int k = 0; k < g->n_out; k++)
        edge_restart(g, &g->out[k], incarnation);
}

gsp_edge *gsp_in_edge(gsp_peer *g, int src)
{
    if (src < 0 || src >= g->n_peers || src == g->id)
        return NULL;
    return edge(g, &g->in, &g->n_in, &g->cap_in, src, 0);
}



/* A new entry at the end of e's log for its next message: n changed
 * positions (idx NULL: all of them). NULL on -ENOMEM. A whole message sent
 * before the edge moved any weight (its first) keeps no old values: a
 * SYNC's correction is w_before times the change, 0 for it whatever the
 * values were (gsp_corrections_since), and so its log costs no copy of the
 * model while it waits for its acknowledgement. */
static gsp_sent *log_add(gsp_edge *e, double w_before, const uint32_t *idx, size_t n, gsp_sent *spare)
{
    if (e->n_log == e->cap_log) {
        int nc = e->cap_log ? 2 * e->cap_log : 4;
        gsp_sent *grown = realloc(e->log, (size_t)nc * sizeof *grown);
        if (!grown)
            return NULL;
        e->log = grown, e->cap_log = nc;
    }
    gsp_sent *s = &e->log[e->n_log];
    *s = (gsp_sent){.seq = e->seq + 1, .w_before = w_before, .n = n, .cap = n ? n : 1};
    const int keep_old = idx || w_before > 0.0;
    if (idx && spare->idx && spare->cap >= n) { /* the spare's room, already in memory */
        s->idx = spare->idx, s->old = spare->old, s->cap = spare->cap;
        *spare = (gsp_sent){0};
    } else {
        s->old = keep_old ? malloc(s->cap * sizeof(float)) : NULL;
        s->idx = idx ? malloc(s->cap * sizeof(uint32_t)) : NULL;
    }
    if ((keep_old && !s->old) || (idx && !s->idx)) {
        free(s->old), free(s->idx);
        return NULL;
    }
    if (idx)
        memcpy(s->idx, idx, n * sizeof(uint32_t));
    e->n_log++;
    return s;
}

/* A message's decoded values: its non-zeros into the sparse scratch when the
 * codec is sparse and they fit (*idx set, count returned), else all n values
 * into g->c (*idx NULL, n returned). -EBADMSG if it does not decode, -ENOMEM. */
static long decode_msg(gsp_peer *g, const uint8_t *msg, size_t len, const uint32_t **idx, const float **c)
{
    long k = g->sp_cap ? cmp_decode_sparse(msg, len, g->dim, g->sp_idx, g->sp_val, g->sp_cap) : -ENOTSUP;
    if (k >= 0) {
        *idx = g->sp_idx, *c = g->sp_val;
        return k;
    }
    if (k == -EBADMSG)
        return -EBADMSG;
    /* Dense values (a dense codec, or a whole bf16 message): room at the first one. */
    if (!g->c && !(g->c = malloc((g->dim ? g->dim : 1) * sizeof(float))))
        return -ENOMEM;
    if (cmp_decode(msg, len, g->dim, g->c) < 0)
        return -EBADMSG;
    *idx = NULL, *c = g->c;
    return (long)g->dim;
}

/* Room for the dense difference v = z - r, at first use: only dense codecs,
 * whole messages and a top-k codec whose candidates missed need it (in the
 * peers' shared scratch where there is one). */
static float *diff_buf(gsp_peer *g)
{
    float **v = g->scratch ? &g->scratch->v : &g->v;
    if (!*v)
        *v = malloc((g->dim ? g->dim : 1) * sizeof(float));
    return *v;
}

/* Whether a reference lags the model by more than GSP_MAX_LAG (times
 * lag_scale) of its norm (vv = ||z - r||^2, zz = ||z||^2): then z goes whole.
 * Each emit moves z away from r by (moved / w) of the lag, and a lag that
 * big (a peer whose z jumped, e.g. a small weight taking in a large share)
 * compounds into divergence faster than a sparse codec closes it (seen in a
 * 10-minute soak). */
static int lagging(const gsp_peer *g, double vv, double zz)
{
    const double max_lag = GSP_MAX_LAG * g->lag_scale;
    return vv > max_lag * max_lag * zz;
}

/* A top-k codec's message for v = src * inv - ref without storing v: the
 * threshold from a sample of v, then one pass that takes the norms and
 * collects the candidates (gsp_diff_collect). Its length, -EINVAL for a NaN
 * or an infinity in z (as cmp_encode), or -EAGAIN when this codec or size
 * does not stream, the candidates missed or z lags (then v is made and
 * encoded as usual: the same message either way; *lags set when z lags). */
static long encode_streamed(gsp_peer *g, const float *src, float inv, const float *ref, uint64_t seed, uint8_t *buf,
                            int *lags)
{
    const size_t n = g->dim;
    cmp_list c;
    uint32_t t;
    double vv, zz;
    if (cmp_stream_begin(g->codec, n, seed, g->work, &c) < 0)
        return -EAGAIN;
    for (size_t j = 0; j < c.m; j++) {
        if (j + PREFETCH < c.m) /* (the sample's positions are too far apart for the hardware prefetcher) */
            __builtin_prefetch(&src[c.pos[j + PREFETCH]]), __builtin_prefetch(&ref[c.pos[j + PREFETCH]]);
        c.key[j] = cmp_list_bits(src[c.pos[j]] * inv - ref[c.pos[j]]);
    }
    if (cmp_stream_threshold(g->codec, &c, n, g->work, &t) < 0 || gsp_diff_collect(src, inv, ref, n, &vv, &zz, t, &c, g->pool) < 0)
        return -EAGAIN;
    if (!isfinite(zz))
        return -EDOM;
    if (lagging(g, vv, zz)) /* sent whole */
        return *lags = 1, -EAGAIN;
    return cmp_encode_list(g->codec, &c, n, g->work, buf, gsp_msg_room(g)); /* -EINVAL: a NaN or inf in z */
}

/* Compress v = z - e->ref, z = src * inv (x / w straight from x for a
 * round's one out-edge, split_x's z for several), into buf (*len bytes) and
 * move e->ref; the edge then carries `moved` (the weight it moves this
 * round) times the new reference. x gives up moved times the old reference
 * here when `give` (else split_x did), and the change of it in any case.
 * Returns 0 or a negative errno. */
static int compress_share(gsp_peer *g, gsp_edge *e, const float *src, float inv, int give, uint8_t *buf,
                          size_t *len_out, double w_before, double moved, float *gain_out)
{
    const size_t n = g->dim;
    uint64_t seed = cmp_rng_at(g->seed ^ ((uint64_t)g->id << 32 | (uint32_t)e->peer), e->seq + 1); /* the message's seq */
    /* Without an origin, an edge's first message sends all of z (in bf16):
     * the reference starts at the model instead of at zero, which would move
     * w at once and x only as fast as the codec fills the reference in
     * (z = x / w blows up for the rounds that takes: a restarted peer's model
     * was ruined that way). 2 bytes a value, once per edge. With one, the
     * reference starts at the run's common start, and the lag rule
     * decides (a restarted peer far from it still sends z whole). */
    const int whole = (e->seq == 0 && !g->origin_id) || g->refresh;
    const cmp_spec *codec = g->codec;
    int lags = 0;
    long len = whole ? -EAGAIN : encode_streamed(g, src, inv, e->ref, seed, buf, &lags);
    const float *v = NULL; /* the dense difference, where it was made */
    cmp_values mv = {0};   /* a value-by-value codec's message, made a block at a time (no v, no decoded c) */
    double vc = 0, cc = 0;
    if (len == -EAGAIN) {
        if (!lags) {
            const int stored = !whole && !codec->ops->width; /* only such a codec encodes a stored v */
            float *d = stored ? diff_buf(g) : NULL;
            if (stored && !d)
                return -ENOMEM;
            double vv, zz;
            gsp_diff_norms(src, inv, e->ref, d, n, &vv, &zz);
            if (!isfinite(zz))
                return -EDOM;
            v = d;
            lags = lagging(g, vv, zz);
        }
        if (whole || lags)
            codec = &g->first;
        len = codec->ops->width ? gsp_values_encode(codec, src, inv, e->ref, n, buf, gsp_msg_room(g), &mv, &vc, &cc)
                                : gsp_encode(g, codec, v, n, seed, buf, gsp_msg_room(g));
    }
    if (len < 0)
        return (int)len;
    *len_out = (size_t)len;
    if (mv.ops) {
        const float gain = cc > 0 ? (float)(vc / cc) : 0.0f;
        gsp_sent *kept = log_add(e, w_before, NULL, n, &g->spare);
        if (!kept)
            return -ENOMEM;
        gsp_values_move(e, &mv, buf, n, gain, g->x, -moved, kept->old, give, g->pool);
        *gain_out = gain;
        return 0;
    }
    /* What the receiver will see, exactly: a sparse codec says what it sent,
     * anything else is decoded. */
    const uint32_t *idx = g->sp_idx;
    const float *c = g->sp_val;
    long k = codec == g->codec && g->sp_cap ? cmp_encoded_sparse(codec, v, n, g->work, g->sp_idx, g->sp_val, g->sp_cap)
                                            : -ENOTSUP;
    if (k < 0 && (k = decode_msg(g, buf, *len_out, &idx, &c)) < 0)
        return k == -ENOMEM ? -ENOMEM : -EPROTO;
    /* <v, c> from the values a top-k codec selected (the same values in
     * the same order as gathered from v at the message's positions). */
    const float *vs = codec == g->codec ? cmp_selected_values(codec, n, g->work) : NULL;
    gsp_dot_norm(vs ? vs : v, vs ? NULL : idx, c, (size_t)k, &vc, &cc);
    float gain = cc > 0 ? (float)(vc / cc) : 0.0f;
    gsp_sent *kept = log_add(e, w_before, idx, (size_t)k, &g->spare);
    if (!kept)
        return -ENOMEM;
    gsp_edge_move(e, idx, c, (size_t)k, gain, g->x, -moved, kept->old, give, n, g->pool);
    *gain_out = gain;
    return 0;
}

static int raw_split(gsp_peer *g, int n_out, const double *weight, gsp_edge **edges);

/* Room for the k-th message of an emit (k = TOPO_MAX_OUT: gsp_sync_msg's):
 * an encoded message, or a SYNC's materialised totals. Per peer, not per
 * edge: a message is only valid until the next emit, so an edge needs no
 * buffer of its own between its messages. */
static uint8_t *msg_buf(gsp_peer *g, int k)
{
    if (!g->msg_buf[k])
        g->msg_buf[k] = malloc(gsp_msg_room(g));
    return g->msg_buf[k];
}

/* A buffer whose last message was longer than the codec's longest (a whole
 * model in bf16) goes once that message is no longer valid: the codec's own
 * messages touch a fraction of the room, so a fresh one is resident only
 * that far, where the whole one would stay half a model's size. */
static void release_whole_buffers(gsp_peer *g)
{
    const size_t own = g->codec ? cmp_bound(g->codec, g->dim) : 0;
    for (int k = 0; k <= TOPO_MAX_OUT; k++)
        if (g->msg_len[k] > own) {
            free(g->msg_buf[k]);
            g->msg_buf[k] = NULL, g->msg_len[k] = 0;
        }
}

int gsp_emit(gsp_peer *g, const topo_out *out, gsp_msg *msgs)
{
    if (g->gather)
        return gsp_gather_emit(g, out, msgs);
    gsp_edge *edges[TOPO_MAX_OUT];
    float gains[TOPO_MAX_OUT];
    double moved[TOPO_MAX_OUT];
    uint8_t *bufs[TOPO_MAX_OUT];
    size_t lens[TOPO_MAX_OUT];
    release_whole_buffers(g);
    for (int k = 0; k < out->n; k++)
        if (!(edges[k] = edge(g, &g->out, &g->n_out, &g->cap_out, out->peer[k], 1)) ||
            (g->codec && !(bufs[k] = msg_buf(g, k))))
            return -ENOMEM;
    gsp_corr_release(g); /* (the last emit's and SYNC's messages are no longer valid) */
    /* Weight first. With a codec each edge moves step * weight * w (the
     * consensus step), without one weight * w. `moved` is the difference of
     * the edge's running totals, which the receiver recomputes bit for bit
     * as w_total minus its own total. */
    const double wstep = g->codec ? (double)g->step : 1.0;
    double w_sent = 0.0, before[TOPO_MAX_OUT], weight[TOPO_MAX_OUT];
    for (int k = 0; k < out->n; k++) {
        gsp_edge *e = edges[k];
        before[k] = e->w;
        /* What an edge moves is the difference of its running total, exact
         * to the total's last bit: a share below GSP_SHARE_BITS bits of the
         * total would be mostly round-off (and could exceed w itself), so it
         * stays home and the message moves nothing. Only a peer that gives
         * for thousands of rounds and takes nothing gets there. */
        const double share = wstep * out->weight[k] * g->w;
        weight[k] = share < ldexp(e->w, -GSP_SHARE_BITS) ? 0.0 : out->weight[k];
        e->w += weight[k] > 0.0 ? share : 0.0;
        moved[k] = e->w - before[k];
        w_sent += moved[k];
    }
    if (g->codec) {
        /* The reference tracks the sender's model z, not its share of x, and
         * x moves as `moved` times it: what x gives up over what w gives up
         * is the (lagging) model, never a lagging share of a weight that has
         * changed since. So z = x / w stays a model however fast w moves (a
         * peer that gossips faster or slower than its neighbours). */
        /* One out-edge (the exponential graphs' rounds): z straight from x,
         * never stored. */
        const int one = out->n == 1;
        if (out->n > 1) /* (none: a round that keeps every share home moves nothing) */
            gsp_split_x(g, edges, moved, out->n);
        for (int k = 0; k < out->n; k++) {
            int rc = compress_share(g, edges[k], one ? g->x : g->z, one ? gsp_debias_factor(g) : 1.0f, one, bufs[k],
                                    &lens[k], before[k], moved[k], &gains[k]);
            if (rc < 0)
                return rc;
            g->msg_len[k] = lens[k];
        }
    } else if (raw_split(g, out->n, weight, edges) < 0)
        return -EDOM;
    for (int k = 0; k < out->n; k++) {
        gsp_edge *e = edges[k];
        e->seq++;
        e->round = g->round;
        gsp_msg *m = &msgs[k];
        *m = (gsp_msg){.src = g->id, .dst = e->peer, .round = g->round, .seq = e->seq, .w_total = e->w,
                       .dim = g->dim, .kind = GSP_RAW, .x_total = e->x, .incarnation = g->incarnation};
        if (g->codec && e->sync) {
            if (gsp_sync_fill(g, e, e->sync_base, k, m) < 0)
                return -ENOMEM;
            e->sync = 0;
        } else if (g->codec) {
            m->kind = GSP_DELTA, m->x_total = NULL;
            m->payload = bufs[k], m->payload_len = lens[k], m->gain = gains[k], m->step = g->step;
            m->origin = e->seq == 1 ? g->origin_id : 0;
        }
    }
    g->w -= w_sent;
    g->round++;
    g->refresh = 0;
    g->stats.sent += (uint64_t)out->n;
    return out->n;
}

/* Without a codec: shares in double straight onto the edge totals. */
static int raw_split(gsp_peer *g, int n_out, const double *weight, gsp_edge **edges)
{
    /* Shares are computed in double and added to the edge totals; x keeps
     * x * (1 - sum of weights), so what leaves x and what the totals gain
     * differ only by double round-off (the float store of x rounds once more).
     * Edge-major loops so each one is a plain vectorisable pass. */
    double kept = 1.0;
    for (int k = 0; k < n_out; k++) {
        const double wk = weight[k];
        if (wk == 0.0) /* (a share that stays home: GSP_SHARE_BITS) */
            continue;
        double *restrict sx = edges[k]->x;
        const float *restrict x = g->x;
        for (size_t i = 0; i < g->dim; i++)
            sx[i] += wk * (double)x[i];
        kept -= wk;
    }
    unsigned bad = 0; /* (checked in this pass: no pass of its own) */
    for (size_t i = 0; i < g->dim; i++) {
        const float xi = (float)((double)g->x[i] * kept);
        bad |= gsp_not_finite(xi);
        g->x[i] = xi;
    }
    return bad ? -EDOM : 0;
}

/* x += a - rho, rho = a: the running-sum step of RAW messages. */
static void apply_totals(gsp_peer *g, gsp_edge *e, const gsp_msg *m)
{
    float *restrict x = g->x;
    double *restrict rho = e->x;
    const double *restrict a = m->x_total;
    for (size_t i = 0; i < g->dim; i++) {
        x[i] = (float)((double)x[i] + (a[i] - rho[i]));
        rho[i] = a[i];
    }
}

/* Totals meant for an earlier holder of this id, or mass we lost: a
 * baseline (nothing applied), from which the edge carries on. */
static void adopt_baseline(gsp_peer *g, gsp_edge *e, const gsp_msg *m)
{
    if (m->kind == GSP_SYNC)
        memcpy(e->ref, m->ref, g->dim * sizeof(float));
    else
        memcpy(e->x, m->x_total, g->dim * sizeof(double));
    g->stats.w_adopted += m->w_total - e->w;
    e->w = m->w_total, e->seq = m->seq, e->round = m->round;
    e->adopt = 0, e->sync = 0;
    g->stats.ignored++;
}

/* The in-edge waits for a SYNC from seq `from` (kept while it waits). */
static int need_sync(gsp_edge *e, uint64_t from)
{
    if (!e->sync)
        e->sync = 1, e->sync_base = from;
    return GSP_NEED_SYNC;
}

/* A delta into its in-edge: the reference moves by gain * c at the message's
 * positions, then x takes `moved` (the sender's, bit for bit) times the
 * moved reference. With the positions (ascending) both go block by block in
 * one sweep, so the reference's scattered updates land in the lines the
 * dense pass reads next instead of missing the cache on their own. */
static void absorb_delta(gsp_peer *g, gsp_edge *e, const uint32_t *idx, const float *c, size_t k, float gain,
                         double moved)
{
    const size_t n = g->dim;
    if (!idx)
        gsp_edge_move(e, NULL, c, k, gain, NULL, 0.0, NULL, 0, n, g->pool);
    gsp_absorb_sweep(g, e, idx, c, k, gain, moved);
}

int gsp_absorb(gsp_peer *g, const gsp_msg *m)
{
    if (m->dst != g->id || m->src < 0 || m->src >= g->n_peers || m->src == g->id || m->dim != g->dim)
        return -EINVAL;
    if ((m->kind == GSP_RAW && !m->x_total) || (m->kind == GSP_SYNC && !gsp_sync_sound(m)) ||
        (gsp_kind_payload(m->kind) && !m->payload))
        return -EINVAL;
    if ((m->kind == GSP_GATHER) != (g->gather != NULL))
        return gsp_refuse(g, NULL, "a message of another mixing than this peer's (every peer needs the same --gather)");
    /* A sender of another configuration (the handshake does not compare
     * codecs): nothing of it can be applied, and a SYNC would not help. */
    if ((m->kind == GSP_RAW) != !g->codec)
        return gsp_refuse(g, NULL, "a share of another codec than this peer's (every peer needs the same --codec)");
    gsp_edge *e = edge(g, &g->in, &g->n_in, &g->cap_in, m->src, 0);
    if (!e)
        return -ENOMEM;
    const char *why = gsp_unsound(g, m);
    if (why)
        return gsp_refuse(g, e, why);
    if (e->seq == 0 && e->round < 0 && e->w == 0.0) /* nothing heard yet: the sender's current run */
        e->incarnation = m->incarnation;
    if (m->incarnation < e->incarnation) { /* from before the sender restarted */
        g->stats.ignored++;
        return GSP_IGNORED;
    }
    if (m->incarnation > e->incarnation) /* the sender restarted: its totals start again from zero */
        edge_restart(g, e, m->incarnation);
    if (g->gather)
        return gsp_gather_take(g, e, m);
    if (e->adopt && m->seq > e->seq + 1) {
        /* A gap after a comeback: the messages in it were meant for an
         * earlier holder of this id (or for this peer's run that crashed
         * after absorbing them), so the totals are a baseline, not mass.
         * A DELTA cannot be adopted (it is relative to a reference we lack). */
        if (m->kind == GSP_DELTA)
            return need_sync(e, m->seq - 1);
        adopt_baseline(g, e, m);
        return GSP_IGNORED;
    }
    e->adopt = 0;
    if (m->seq <= e->seq) { /* its mass arrived with this or a later message */
        g->stats.ignored++;
        return GSP_IGNORED;
    }
    if (m->kind == GSP_SYNC && m->base != e->seq) {
        if (m->base < e->seq) /* (from before messages we applied since: ask again from here) */
            return need_sync(e, e->seq);
        /* The sender no longer keeps what we lack: we lost messages we had
         * acknowledged (a crash). Their mass is gone; the rest continues. */
        adopt_baseline(g, e, m);
        return GSP_IGNORED;
    }
    /* A sender's running total of weight only grows, and no share is more
     * than the run's whole weight (a unit a peer, joins and resumes keep it
     * near that): anything else is refused, not mixed in. */
    const double moved = m->w_total - e->w;
    if (!(moved >= 0))
        return gsp_refuse(g, e, "a weight total below the one it sent before");
    if (moved > GSP_MAX_SHARE * g->n_peers)
        return gsp_refuse(g, e, "more weight than the run holds");
    /* (An immediate SYNC repeats the seq of the delta the receiver lost or
     * refused, which is always above the receiver's own: it is taken.) */
    if (m->kind == GSP_DELTA) {
        /* An edge's first delta is relative to where the sender's reference
         * started: unless that is ours too, the references differ. */
        const int apart = m->seq == 1 && m->origin != g->origin_id;
        if (e->sync || m->seq != e->seq + 1 || apart) { /* a delta was lost: the references differ now */
            g->stats.gaps++;
            return need_sync(e, e->seq);
        }
        cmp_values mv;
        const int values = cmp_values_of(m->payload, m->payload_len, g->dim, &mv);
        if (values == -EBADMSG)
            return -EBADMSG;
        if (values == 0) { /* value by value: read a block at a time, twice (checked whole, then applied) */
            if (!gsp_values_finite(&mv, m->payload, g->dim))
                return gsp_refuse(g, e, "a NaN or an infinity in its values");
            gsp_values_absorb(g, e, &mv, m->payload, m->gain, moved);
        } else {
            const uint32_t *idx;
            const float *c;
            long k = decode_msg(g, m->payload, m->payload_len, &idx, &c);
            if (k < 0)
                return (int)k;
            if (!gsp_floats_finite(c, (size_t)k))
                return gsp_refuse(g, e, "a NaN or an infinity in its values");
            absorb_delta(g, e, idx, c, (size_t)k, m->gain, moved);
        }
    } else if (m->kind == GSP_SYNC) {
        gsp_apply_sync(g, e, m);
        e->sync = 0;
    } else
        apply_totals(g, e, m);
    g->w += m->w_total - e->w;
    e->w = m->w_total;
    e->seq = m->seq;
    e->round = m->round;
    g->stats.absorbed++;
    g->stats.stale_sum += (uint64_t)(g->round > m->round ? g->round - m->round : 0);
    return GSP_APPLIED;
}

static gsp_edge *out_edge(const gsp_peer *g, int dst)
{
    for (int j = 0; j < g->n_out; j++)
        if (g->out[j].peer == dst)
            return &g->out[j];
    return NULL;
}

uint64_t gsp_in_seq(const gsp_peer *g, int src)
{
    for (int j = 0; j < g->n_in; j++)
        if (g->in[j].peer == src)
            return g->in[j].seq;
    return 0;
}

uint64_t gsp_nack_seq(const gsp_peer *g, const gsp_msg *m)
{
    for (int j = 0; j < g->n_in; j++)
        if (g->in[j].peer == m->src)
            return g->in[j].sync ? g->in[j].sync_base : g->in[j].seq;
    return 0;
}

void gsp_request_sync(gsp_peer *g, int dst, uint64_t base)
{
    gsp_edge *e = out_edge(g, dst);
    if (e && (!e->sync || base < e->sync_base))
        e->sync = 1, e->sync_base = base;
}

int gsp_sync_msg(gsp_peer *g, int dst, uint64_t base, gsp_msg *m)
{
    gsp_edge *e = out_edge(g, dst);
    if (!e || e->seq == 0)
        return -ENOENT;
    if (base >= e->seq)
        return -EALREADY;
    /* Without a codec the totals alone are a complete message: resend them. */
    *m = (gsp_msg){.src = g->id, .dst = dst, .round = e->round, .seq = e->seq, .kind = GSP_RAW, .w_total = e->w,
                   .dim = g->dim, .x_total = e->x, .incarnation = g->incarnation};
    return g->codec ? gsp_sync_fill(g, e, base, TOPO_MAX_OUT, m) : 0;
}

void gsp_acked(gsp_peer *g, int dst, uint64_t seq)
{
    gsp_edge *e = out_edge(g, dst);
    if (e)
        log_trim(e, seq, &g->spare);
}

int gsp_ready(const gsp_peer *g, const topo *t, const uint8_t *alive)
{
    return gsp_ready_with(g, t, alive, NULL, 0);
}

int gsp_ready_with(const gsp_peer *g, const topo *t, const uint8_t *alive, const gsp_msg *inbox, int n_inbox)
{
    return gsp_missing(g, t, alive, inbox, n_inbox, NULL, 0) == 0;
}

int gsp_missing(const gsp_peer *g, const topo *t, const uint8_t *alive, const gsp_msg *inbox, int n_inbox, int *peers,
                int max)
{
    long need = g->round - 1 - g->tau;
    if (need < g->since)
        return 0;
    int in[TOPO_MAX_OUT * 4], missing = 0;
    int n = topo_in(t, need, g->id, alive, in, (int)(sizeof in / sizeof *in));
    for (int k = 0; k < n; k++) {
        const gsp_edge *e = NULL;
        for (int j = 0; j < g->n_in && !e; j++)
            if (g->in[j].peer == in[k])
                e = &g->in[j];
        long heard = e ? e->round : -1;
        for (int m = 0; m < n_inbox; m++)
            if (inbox[m].src == in[k] && inbox[m].round > heard)
                heard = inbox[m].round;
        if (heard >= need)
            continue;
        if (missing < max)
            peers[missing] = in[k];
        missing++;
        if (!peers)
            break; /* gsp_ready_with only needs to know there is one */
    }
    return missing;
}

double gsp_edge_pending(const gsp_peer *sender, const gsp_peer *receiver, double *acc_x)
{
    const gsp_edge *s = NULL, *r = NULL;
    for (int j = 0; j < sender->n_out && !s; j++)
        if (sender->out[j].peer == receiver->id)
            s = &sender->out[j];
    if (!s)
        return 0.0;
    for (int j = 0; j < receiver->n_in && !r; j++)
        if (receiver->in[j].peer == sender->id && receiver->in[j].incarnation == sender->incarnation)
            r = &receiver->in[j]; /* (totals of an earlier run of the sender: nothing of this run applied yet) */
    if (acc_x && !sender->codec)
        for (size_t i = 0; i < sender->dim; i++)
            acc_x[i] += s->x[i] - (r ? r->x[i] : 0.0);
    if (acc_x && sender->codec) {
        /* What a SYNC from the receiver's seq would bring (gsp_sync_msg), when the sender still keeps it. */
        gsp_corr c = {0};
        size_t n;
        const uint64_t a = r ? r->seq : 0;
        if (a < s->seq && gsp_corrections_since(s, a, &c, sender->dim, &n) == a && n != SIZE_MAX)
            for (size_t i = 0, j = 0; i < sender->dim; i++)
                acc_x[i] += gsp_sync_at(i, s->w, s->ref, r ? r->w : 0.0, r ? r->ref : NULL, c.idx, c.val, n, &j);
        free(c.idx), free(c.val);
    }
    return s->w - (r ? r->w : 0.0);
}
