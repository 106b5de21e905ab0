/* Push-sum / Stochastic Gradient Push state of one peer, in running-sum form,
 * optionally with compressed messages. Pure: no I/O, no clock, no globals.
 * The driver (simulator or networked peer) moves the messages and decides
 * when a round starts.
 *
 *   gsp_peer g = {0};
 *   gsp_init(&g, id, n_peers, dim, tau, x0);       // x = x0, w = 1
 *   gsp_set_codec(&g, &spec, seed, step);          // optional: compressed messages
 *   for (;;) {
 *       const float *z = gsp_debias(&g);            // z = x / w: the model to use
 *       ... gradient at z, optimizer step applied to g.x ...
 *       topo_out out; topo_route(&t, g.round, id, alive, &out);
 *       gsp_msg msgs[TOPO_MAX_OUT];
 *       int n = gsp_emit(&g, &out, msgs);            // split (x, w); g.round++
 *       ... deliver msgs (gsp_msg_copy gives a message its own payload) ...
 *       ... gsp_absorb(&g, &incoming) for what arrived, in (sender, seq) order;
 *           GSP_NEED_SYNC asks the driver to tell the sender: gsp_request_sync ...
 *       while (!gsp_ready(&g, &t, alive)) ... wait for more messages ...
 *   }
 *   gsp_free(&g);
 *
 * Running sums (Hadjicostis, Dominguez-Garcia, Vaidya): for each directed edge
 * i -> j the sender keeps the cumulative totals (sigma_x, sigma_w) of the mass
 * it moved to j, with a per-edge sequence number; j keeps (rho_x, rho_w), the
 * totals it has applied. Without a codec a message carries sigma itself and j
 * adds sigma - rho. With a codec (CHOCO-SGD / Taheri et al. 2020 style), both
 * ends also hold a reference r_ij; the sender compresses v = share - r into q,
 * both sides set r += gain * decode(q), the sender gives up exactly step * r
 * and the receiver adds exactly that: what leaves one peer arrives at the
 * other and the compression error stays home, to be sent later. gain = <v, c> / ||c||^2
 * (c = decode(q)) is the best step along c, carried in the message: it makes
 * every codec, biased or not, shrink ||share - r|| (for topk and scaled sign
 * it is 1; for randk it undoes the n/k scaling). w always travels exact (as a
 * running total). A lost compressed message breaks the shared reference: the
 * receiver sees the gap in seq, ignores deltas and asks for a SYNC from the
 * last seq it applied (its base), which carries r and what the totals grew
 * by since the base beyond w * r (the corrections), so the lost mass arrives
 * then. Neither end keeps the totals of a compressed edge: the receiver's are
 * w * r (of the base) minus the sender's corrections up to it, and the
 * sender keeps, until the receiver acknowledges them, what each message
 * changed in r (gsp_sent), from which it rebuilds the corrections since any
 * base still unacknowledged. So an edge holds one float vector at each end.
 * Guarantees in gossip/GUARANTEES.md, tested in tests/unit/test_gossip_*.c
 * and test_peer_sim.c. RAW totals are double so that their growth over many
 * rounds does not eat the float precision of the differences.
 */
#ifndef GOSSIP_GSP_H
#define GOSSIP_GSP_H

#include <stddef.h>
#include <stdint.h>

#include "topologies/topo.h"

#include "compress/cmp.h"

typedef enum gsp_kind {
    GSP_RAW,   /* no codec: x_total = sigma_x */
    GSP_DELTA, /* codec: payload = q, gain */
    GSP_SYNC,  /* codec, after a gap: ref = r, corr = the corrections since `base`, uncompressed */
    GSP_GATHER, /* --gather (gossip/gsp_gather.h): the sender's compressed pseudo-gradient, payload = the
                 * codec's message, origin = the digest of the model its steps started from */
} gsp_kind;

/* The kinds whose message is the payload alone (no tensor of dim values). */
static inline int gsp_kind_payload(gsp_kind k) { return k == GSP_DELTA || k == GSP_GATHER; }

/* What gsp_absorb returns for a message whose mass it applied, and for one
 * that moved no mass: a duplicate or an older one (its mass is already in),
 * or one adopted as its edge's new baseline. */
#define GSP_IGNORED 0
#define GSP_APPLIED 1

/* What gsp_absorb returns when a compressed edge lost a message: the driver
 * tells the sender, whose next message on that edge is then a SYNC. */
#define GSP_NEED_SYNC 2

/* What gsp_absorb returns for a message no honest sender makes (a NaN or an
 * infinity in its values, a weight total that goes down or moves more than
 * GSP_MAX_SHARE units a peer of the run): nothing of it is applied,
 * g->refused_why says why, and a compressed edge waits for a SYNC. */
#define GSP_REFUSED 3
#define GSP_MAX_SHARE 2.0

/* A share of weight below 2^-GSP_SHARE_BITS of its edge's running total
 * stays home (gsp_emit sends the message, moving nothing): the weight an
 * edge moves is the difference of that double total, so below this it
 * would be round-off beyond float precision, and could take more than the
 * sender holds. So w > 0 always, whatever a peer gives without taking. */
#define GSP_SHARE_BITS 30

/* One message on one edge. A message made by gsp_emit or gsp_sync_msg points
 * into the sender's state (valid until its next emit or gsp_sync_msg);
 * gsp_msg_copy gives the driver its own copy for messages in flight. */
typedef struct gsp_msg {
    int src, dst;
    long round;            /* the sender's round when it was sent */
    uint64_t seq;          /* 1, 2, ... per directed edge */
    gsp_kind kind;
    double w_total;        /* sigma_w: w always travels exact */
    size_t dim;
    const double *x_total; /* RAW: sigma_x, dim values */
    uint64_t base;         /* SYNC: the seq its corrections start after (the receiver's last applied) */
    const float *ref;      /* SYNC: the reference r after this message */
    size_t n_corr;         /* SYNC: the corrections of the messages after base, where they changed r: the
                            * receiver adds w_total * ref - (its applied w) * (its ref) - corr */
    const uint32_t *corr_idx; /* SYNC: their positions, strictly ascending (NULL: all dim, n_corr == dim) */
    const double *corr;    /* SYNC: their values */
    const uint8_t *payload; /* DELTA: the codec's message (compress/FORMAT.md) */
    size_t payload_len;
    float gain;            /* DELTA: r += gain * decode(payload) */
    float step;            /* DELTA: the receiver takes step * r (the sender gave up as much) */
    uint64_t incarnation;  /* the sender's (gsp_peer.incarnation): a higher one restarts the edge */
    uint64_t origin;       /* DELTA with seq 1: the id of the reference the edge started from
                            * (gsp_set_origin; 0: zeros); GATHER: the digest of the sender's model */
    void *owned;           /* non-NULL when this message owns its arrays (gsp_msg_copy) */
    int finite;            /* 1: its totals, reference and corrections were found finite as they were copied
                            * (gsp_msg_copy), so gsp_absorb need not read them again; 0: not known */
} gsp_msg;

/* What one compressed message changed in its edge's reference, kept by the
 * sender until the receiver acknowledges it: the positions (idx NULL: all
 * dim of them), the values before (NULL for a whole message sent while the
 * weight total was 0: its correction is 0), and the edge's weight total
 * before. The corrections of the messages after a base are rebuilt from
 * these (a SYNC). */
typedef struct gsp_sent {
    uint64_t seq;
    double w_before;
    size_t n, cap; /* changed positions; room for (a reused entry may have more) */
    uint32_t *idx;
    float *old;
} gsp_sent;

/* A SYNC's corrections as the sender builds them: positions and values,
 * room for cap. */
typedef struct gsp_corr {
    uint32_t *idx;
    double *val;
    size_t cap;
} gsp_corr;

/* One directed edge: sent totals (out-edges) or applied totals (in-edges). */
typedef struct gsp_edge {
    int peer;       /* the other end */
    uint64_t seq;   /* last sent / last applied */
    long round;     /* round of that message */
    double w;       /* sigma_w or rho_w */
    double *x;      /* without a codec: sigma_x or rho_x, dim values; NULL with one */
    float *ref;     /* codec: the reference both ends hold */
    gsp_sent *log;  /* codec, out-edges: the messages not acknowledged yet, in seq order */
    int n_log, cap_log;
    uint64_t sync_base; /* out: the base of the SYNC the next emit sends; in: the seq it asks from while it
                         * waits (one for every NACK of one wait: gsp_nack_seq) */
    int sync;       /* out: next message is a SYNC; in: waiting for one */
    uint64_t incarnation; /* in-edges: the sender's incarnation these totals belong to */
    int adopt;      /* in-edges after a comeback: totals after a gap in seq are a baseline, not mass */
} gsp_edge;

typedef struct gsp_stats {
    uint64_t sent, absorbed, ignored; /* ignored: duplicates and messages older than one applied */
    uint64_t stale_sum;               /* sum over absorbed messages of (own round - message round) */
    uint64_t syncs_sent, gaps;        /* codec: SYNCs sent; deltas that found a gap */
    uint64_t refused;                 /* messages refused (GSP_REFUSED) */
    double w_adopted; /* weight in totals adopted as a baseline after a comeback: sent to this id, never
                       * applied (taken in by a crashed run of it, or meant for an earlier holder) */
} gsp_stats;

typedef struct gsp_peer {
    int id, n_peers, tau;
    size_t dim;
    long round;   /* rounds whose shares have been emitted */
    long since;   /* first round it takes part in (a rejoin): earlier rounds' messages are not awaited */
    float *x;     /* push-sum numerator: the optimizer steps on it */
    double w;     /* push-sum weight, > 0 (0 once the peer has left: gsp_hand_off) */
    float *z;     /* x / w, refreshed by gsp_debias */
    int z_written; /* z has been written: resident from then (until then its pages are untouched) */
    gsp_edge *out, *in;
    int n_out, n_in, cap_out, cap_in;
    gsp_stats stats;
    const cmp_spec *codec; /* NULL: RAW running sums */
    cmp_spec first;        /* codec: "bf16", for the first message of an edge (its reference from nothing) */
    double lag_scale;      /* codec: a reference lagging z by more than 0.25 lag_scale of its norm is
                            * replaced by z whole (1 from gsp_init; more for a model that moves further
                            * between messages: local steps) */
    int refresh;           /* codec: the next emit sends z whole (bf16) on every edge, e.g. before moving an
                            * unusually large weight, so that what x gives up is the model, not a lagging copy */
    float step;            /* consensus step: the share of r that moves each round */
    uint64_t seed;         /* codec randomness, per (seed, sender, receiver, seq) */
    float *v, *c;          /* codec scratch, at first use: the difference z - r (dense codecs, whole messages, a
                            * top-k codec's rare misses), a decoded q (dense codecs, whole messages) */
    uint8_t *msg_buf[TOPO_MAX_OUT + 1]; /* codec: the k-th message of an emit, encoded (at first use); the
                                          * last slot is gsp_sync_msg's */
    size_t msg_len[TOPO_MAX_OUT + 1];  /* codec: the length of the k-th buffer's last encoded message */
    gsp_corr sync_corr[TOPO_MAX_OUT + 1]; /* codec: a SYNC's corrections (held from its making until the
                                           * next emit) */
    uint32_t *sp_idx;      /* sparse codecs: a message's non-zeros (cmp_decode_sparse), sp_cap of them */
    float *sp_val;
    size_t sp_cap;
    void *work;            /* codec workspace */
    void *select;          /* a codec that selects chunk by chunk: a select area a pool thread (gsp_encode), at
                            * first use */
    size_t select_bytes;
    uint64_t incarnation;  /* this run of the peer's process; sent with every message (0 in the simulator) */
    const char *refused_why; /* why the last message refused (GSP_REFUSED) was */
    const float *origin;   /* codec: where every edge's reference starts (gsp_set_origin), or NULL: zeros */
    float *origin_copy;    /* origin when this peer holds its own copy (NULL when it borrows it) */
    int (*origin_fill)(void *ctx, float *dst); /* or this makes it again where an edge starts */
    void *origin_ctx;
    int origin_edges;      /* with origin_fill: the edge that takes the copy (the schedule's last) */
    int origin_checked;    /* with origin_fill: a draw has matched origin_id */
    float *origin_drawn;   /* with origin_fill: a draw the driver made ahead (gsp_origin_ahead), or NULL */
    uint64_t origin_id;    /* a hash of origin's bits (never 0), or 0 */
    int adopt;             /* joined late without state: new in-edges adopt their first totals */
    struct gsp_scratch *scratch; /* v, work, sp_idx and sp_val belong to this one (gsp_share_scratch), or NULL */
    struct gsp_pool *pool; /* threads for the vector loops (gsp_set_pool; NULL: this thread alone) */
    struct gsp_gather *gather; /* the exact sparse all-gather in place of push-sum (gossip/gsp_gather.h), or NULL */
    int left;              /* gsp_hand_off gave (x, w) away: x is the model it left with, w 0 */
    gsp_sent spare;        /* codec: an acknowledged sparse log entry's room (idx and old for spare.cap
                            * changes; NULL: none), for the next message's, so that a message's changes are
                            * not allocated and faulted in again each time */
} gsp_peer;

/* Codec scratch for peers of one process that never emit or absorb at the
 * same time (the simulator's): the difference v, the codec's workspace and
 * the sparse lists (the difference only where a peer needs it: at first
 * use, gsp_peer.v). */
typedef struct gsp_scratch {
    float *v;
    void *work;
    uint32_t *sp_idx;
    float *sp_val;
    size_t sp_cap, work_bytes, dim;
} gsp_scratch;

/* x = x0 (zeros if NULL), w = 1. tau >= 0 is the staleness bound in rounds.
 * Edges are allocated for the peer's scheduled neighbours at first use. */
int gsp_init(gsp_peer *g, int id, int n_peers, size_t dim, int tau, const float *x0);
void gsp_free(gsp_peer *g);

/* Compress every message with `codec` (which must outlive g), drawing the
 * stochastic codecs' randomness from `seed`. `step` in (0, 1] is the
 * consensus step (CHOCO-SGD's gamma): each round a sender gives up, and the
 * receiver takes, step * r instead of r. Below 1 it trades mixing speed for
 * stability: a reference that lags its share keeps moving a stale amount, and
 * the drift that causes grows unless step is about as small as the share of
 * the error one message removes (gsp_default_step). Call before the first
 * emit. -ENOMEM, or -EINVAL (bad step, or messages already sent). */
int gsp_set_codec(gsp_peer *g, const cmp_spec *codec, uint64_t seed, float step);

/* Start every edge's reference at x0 (copied), the model every peer of the
 * run starts from, instead of at zeros: an edge's first message is then an
 * ordinary compressed difference, not the whole model (in bf16). It carries
 * origin_id; a receiver whose own origin differs (another x0, or none) asks
 * for a SYNC instead of applying it, so peers that started apart lose
 * nothing but the bytes of one SYNC per edge. After gsp_set_codec, before
 * the first message. -ENOMEM, -EINVAL. */
int gsp_set_origin(gsp_peer *g, const float *x0);
/* The same without a copy: x0 must stay as it is while g lives (peers of one
 * process that all start from it, the simulator's, share one). */
int gsp_share_origin(gsp_peer *g, const float *x0);
/* After gsp_set_origin: the copy of the origin goes, as its reference, to
 * the `edges`-th edge that starts (the last the schedule has: topo_degree),
 * and any edge that starts or restarts after that gets the origin made
 * again (fill(ctx, dst) writes it into the new reference): one copy of the
 * model fewer for a process that can make it (a model initialised from its
 * seed), without drawing it for the schedule's own edges. Its first draw is
 * checked against origin_id (the copy is gone by then: one draw is seconds
 * at 100M parameters, too long to spend at every start for a check): a draw
 * that differs leaves the peer without an origin (origin_id 0, references
 * from zeros), so each edge that starts after it asks for, or is answered
 * with, a SYNC instead of mixing references that differ; so does a fill
 * that returns a negative errno (it could not make it: a file that went).
 * -EINVAL (nothing set) unless g holds its own copy and no edge has
 * started. */
int gsp_set_origin_fill(gsp_peer *g, int (*fill)(void *ctx, float *dst), void *ctx, int edges);
/* Drawing ahead: a draw takes seconds at 100M parameters, and an edge that
 * starts after the copy went (a neighbour that restarts, a route around a
 * lost one) would take them from the driver's loop, where heartbeats wait.
 * gsp_origin_ahead_wanted says whether g would draw for its next edge and
 * holds no draw made ahead; the driver then makes one off its loop (fill
 * from gsp_set_origin_fill into dim floats it allocated with malloc) and
 * hands it over with gsp_origin_ahead, which takes ownership: the next edge
 * that starts takes that buffer as its reference instead of drawing (its
 * first use is checked as a draw is). NULL, or one while g holds one or no
 * longer draws, is freed. */
int gsp_origin_ahead_wanted(const gsp_peer *g);
void gsp_origin_ahead(gsp_peer *g, float *drawn);

/* The vector loops of g's emits and absorbs run on pool's threads (NULL:
 * on the caller's), chunk by chunk (gossip/gsp_pool.h): the same floats
 * whatever the pool. p must outlive g's use of it. */
static inline void gsp_set_pool(gsp_peer *g, struct gsp_pool *pool) { g->pool = pool; }

/* g's codec scratch becomes s's: the first peer gives s its own, the
 * others free theirs and use s's. After gsp_set_codec; s ({0} at first)
 * must outlive every peer that shares it, and they must not emit or absorb
 * concurrently. -EINVAL if g's codec needs other sizes than s holds. */
int gsp_share_scratch(gsp_peer *g, gsp_scratch *s);
/* What s holds (gsp_bytes counts a sharing peer's scratch as none). */
size_t gsp_scratch_bytes(const gsp_scratch *s);
void gsp_scratch_free(gsp_scratch *s);

/* A consensus step for `codec` on vectors of dim values that measured stable
 * on the ring and the exponential graph (gossip/GUARANTEES.md has the table). */
float gsp_default_step(const cmp_spec *codec, size_t dim);

/* z = x / w, into g->z, or x itself when w is exactly 1. The pointer is
 * only current until x changes (a step, gsp_emit, gsp_absorb). */
const float *gsp_debias(gsp_peer *g);
/* What gsp_debias computes, bit for bit: z[i] = x[i] * gsp_debias_factor(g)
 * (1 when w is exactly 1), one value at a time or into dst (dst may be x). A
 * report that looks at every peer's model needs no z of each. */
static inline float gsp_debias_factor(const gsp_peer *g)
{
    return g->w == 1.0 || g->left ? 1.0f : (float)(1.0 / g->w);
}
void gsp_debias_to(const gsp_peer *g, float *dst);
/* x = w z, rounded to float once (z may be x itself). */
void gsp_scale_by_w(gsp_peer *g, const float *z);
/* z = x / w with no z beside x, for a step: gsp_debias_in_place makes x
 * hold z (bit for bit what gsp_debias writes), the step moves it by its own
 * lr, and gsp_rebias_in_place makes it w z again, so x moves by w times the
 * step (up to one rounding of each value). Both do nothing when w is
 * exactly 1. Nothing may read x as the push-sum numerator between the two. */
void gsp_debias_in_place(gsp_peer *g);
void gsp_rebias_in_place(gsp_peer *g);
/* The run is over: z = x / w, handed to the caller, who frees it. g keeps
 * no parameters after (only gsp_free may follow), so the final model costs
 * no copy at the peak of the run. */
float *gsp_take_model(gsp_peer *g);

/* Split for this round: for each routed out-neighbour k, sigma_k += weight_k * x
 * and sigma_w_k += weight_k * w; x and w keep the rest (x loses exactly what
 * the totals gained, computed in double). Fills msgs[0 .. out->n) and
 * increments g->round. Returns out->n, -ENOMEM if a new edge (a reroute)
 * could not be allocated (nothing is sent then), or -EDOM when z is not
 * finite (a NaN or an infinity: the model diverged; nothing may be sent, and
 * the peer must stop, its state part-way through the emit). */
int gsp_emit(gsp_peer *g, const topo_out *out, gsp_msg *msgs);

/* Apply a message addressed to this peer: returns GSP_APPLIED, GSP_IGNORED
 * (duplicate or older than one already applied: its mass is already in),
 * GSP_NEED_SYNC (a compressed edge lost a message: nothing applied until a
 * SYNC comes), GSP_REFUSED (a share no honest sender makes: nothing applied,
 * see above), -EINVAL (wrong destination, sender out of range, dim or kind
 * mismatch), -EBADMSG (a payload that does not decode; nothing applied),
 * -ENOMEM. */
int gsp_absorb(gsp_peer *g, const gsp_msg *m);

/* Incarnations (a peer process that restarts, with or without a checkpoint):
 * a restarted sender starts its out-edges from zero under a higher
 * incarnation, and a receiver that sees the higher incarnation on a message
 * drops its totals for that edge first (messages of a lower incarnation are
 * stale and ignored). A peer that comes back (joins late without state, or
 * resumes from a checkpoint) sets g->adopt and each restored in-edge's
 * adopt: on each in-edge, the first message that does not follow the edge's
 * last seq carries totals meant for an earlier holder of its id (or for the
 * run that crashed after absorbing them), so they become the baseline
 * (nothing applied) instead of arriving as mass a second time; a message
 * that follows on applies as usual. See gossip/GUARANTEES.md, "Stragglers,
 * leave and join". */

/* Coming back and moving forward, as gsp_ operations so that every driver
 * does them the same way (gossip/GUARANTEES.md, "Stragglers, leave and join"):
 *
 * gsp_jump: skip to `round` (catch-up): nothing is emitted for the rounds
 * jumped over and their messages are not awaited (since = round).
 *
 * gsp_join: enter a run under way without state: x = z, one unit of weight
 * (as every peer had at round 0), at `round`; in-edges adopt totals meant
 * for an earlier holder of this id.
 *
 * gsp_resume: come back with the state held before (a checkpoint restored
 * into g, or the simulator's crashed peer): in-edges adopt the totals that
 * follow a gap (the old process may have absorbed, and passed on, the
 * messages in it), unless `final`: the state its run stopped with, after
 * which nothing was absorbed, so a gap is lost messages, which a SYNC
 * brings as after any loss; and the weight is brought back to
 * [1/sqrt 2, sqrt 2) by a power of two (x scaled by the same factor, exact,
 * z unchanged). Each comeback loses the shares that were in flight to the
 * old process; without
 * the renormalisation the run's total weight decays with every restart
 * (a soak: from 8 to 0.013 over 175 restarts), with it every comeback pulls
 * the total back towards one unit per peer. Returns the factor applied. */
void gsp_jump(gsp_peer *g, long round);
/* A new process for this peer (a restart): out-edges start from zero under
 * `incarnation`, which must be higher than the last one. */
void gsp_restart(gsp_peer *g, uint64_t incarnation);
void gsp_join(gsp_peer *g, const float *z, long round);
/* A peer far behind takes a neighbour's model z and keeps its weight
 * (x = w z): the run's total weight is unchanged, the stale model is gone. */
void gsp_adopt(gsp_peer *g, const float *z);
double gsp_resume(gsp_peer *g, int final);
/* Leave on purpose: hand all of (x, w) to the peers of `to` (its weights
 * are ignored: an equal part each) in one emit, so that the weight is not
 * lost with the peer. w moves exactly (as every share: to the running
 * totals' round-off); with a codec the messages carry z whole (bf16), as
 * after a jump, so x gives up the model to bf16's rounding. Afterwards the
 * peer holds no mass: w is 0, x is the model it left with (z, for its
 * reports and final model) and g->left is set; it may not emit or absorb
 * again. Returns to->n, or -EDOM / -ENOMEM as gsp_emit (nothing moved:
 * -ENOMEM; the peer must stop: -EDOM). */
int gsp_hand_off(gsp_peer *g, const topo_out *to, gsp_msg *msgs);

/* The in-edge from `src`, created if new (to restore a checkpoint into);
 * NULL on -ENOMEM or a bad src. */
gsp_edge *gsp_in_edge(gsp_peer *g, int src);

/* The last seq applied on the in-edge from src (0: none): the base a SYNC
 * request names. */
uint64_t gsp_in_seq(const gsp_peer *g, int src);

/* The seq a NACK for m (absorbed with GSP_NEED_SYNC) names: gsp_in_seq,
 * except on an edge that will adopt the SYNC as a baseline (a gap after a
 * comeback or a join): the seq before the first message it could not apply.
 * The receiver takes none of the mass of the messages before that SYNC, so
 * their corrections (after many unacknowledged sparse messages, one at every
 * position: the SYNC three times the reference's size) would be read by no
 * one; from there the sender always has something to send. The same seq for
 * every NACK until the SYNC comes, so that a sender can tell a repeat. */
uint64_t gsp_nack_seq(const gsp_peer *g, const gsp_msg *m);

/* The receiver `dst` holds this peer's messages up to seq `base` and asked
 * for the rest: the next message to it is a SYNC from there. */
void gsp_request_sync(gsp_peer *g, int dst, uint64_t base);

/* Or answer at once: a SYNC of the edge to `dst` as it stands (its reference
 * after the last message, same seq, and the corrections since `base`),
 * without waiting for the schedule to use the edge again; without a codec,
 * the totals as a RAW message. Also what a driver sends a reconnected
 * neighbour that says what it holds. Returns 0, -EALREADY when the receiver
 * holds everything (base >= the last seq sent), -ENOENT if nothing was ever
 * sent to dst, or -ENOMEM. A base older than the messages kept (acknowledged
 * since: the receiver lost them in a crash) gives a SYNC from the oldest
 * kept, which the receiver takes as a baseline. */
int gsp_sync_msg(gsp_peer *g, int dst, uint64_t base, gsp_msg *m);

/* The receiver `dst` acknowledged this peer's messages up to `seq` (it holds
 * them, or they are on their way into it in order): their reference changes
 * are no longer kept. */
void gsp_acked(gsp_peer *g, int dst, uint64_t seq);

/* Bytes this message takes on the wire: a fixed header plus the payload
 * (RAW carries doubles, SYNC its float reference and corrections). */
size_t gsp_msg_bytes(const gsp_msg *m);

/* A SYNC's payload (peer/wire/WIRE.md): the reference, the count, and the
 * corrections as a list of positions and values, or every value where
 * that is shorter (12 n > 8 dim: gsp_sync_dense). */
int gsp_sync_dense(size_t dim, size_t n_corr);
size_t gsp_sync_bytes(size_t dim, size_t n_corr);

/* May the peer start round g->round (i.e. emit again)? True when every live
 * scheduled in-neighbour of round g->round - 1 - tau has delivered that round's
 * message (rounds before g->since need nothing: the first rounds, or the
 * rounds a rejoining peer missed). A peer is never held by a dead one. */
int gsp_ready(const gsp_peer *g, const topo *t, const uint8_t *alive);
/* The same, counting also messages that have arrived but are not absorbed
 * yet (a driver that absorbs at round start keeps them in an inbox). */
int gsp_ready_with(const gsp_peer *g, const topo *t, const uint8_t *alive, const gsp_msg *inbox, int n_inbox);

/* The live scheduled in-neighbours gsp_ready_with is still waiting for (at
 * most max of them into peers); 0 when ready. */
int gsp_missing(const gsp_peer *g, const topo *t, const uint8_t *alive, const gsp_msg *inbox, int n_inbox, int *peers,
                int max);

/* Mass this peer has sent on its out-edges and the receivers have not applied
 * yet is sigma - rho: for invariant checks the driver sums, over all edges,
 * gsp_edge_pending(sender, receiver) (sigma - rho, x into acc unless NULL, w returned). */
double gsp_edge_pending(const gsp_peer *sender, const gsp_peer *receiver, double *acc_x);

/* Bytes this peer holds, by part: its push-sum state (x, z, the origin, every
 * edge's totals or reference and the changes kept for a SYNC) into *state, the codec's
 * scratch (v, c, the sparse lists, the workspace, message buffers) into
 * *codec. What the memory breakdown of a summary reports. */
void gsp_bytes(const gsp_peer *g, size_t *state, size_t *codec);
/* Bytes a message owns (gsp_msg_copy, or a driver's own block): 0 for a view. */
size_t gsp_msg_owned_bytes(const gsp_msg *m);

/* No NaN and no infinity among v[0 .. n) (one vectorised pass). */
int gsp_floats_finite(const float *v, size_t n);

/* Deep copy of a message's payload (for messages in flight), checking its
 * totals, reference and corrections for NaN and infinity on the way (one
 * pass for both: dst->finite). */
int gsp_msg_copy(gsp_msg *dst, const gsp_msg *src);
void gsp_msg_free(gsp_msg *m);

#endif
