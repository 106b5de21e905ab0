/* libsgp: Stochastic Gradient Push on your own model and training loop.
 *
 * You keep your model, your data and your optimizer; sgp keeps the gossip.
 * After each of your optimizer steps, hand sgp your flat float parameter
 * vector: it pushes a (compressed) share to this round's out-neighbours,
 * waits for the round's shares from its in-neighbours (never for a straggler
 * or a dead peer beyond a deadline), mixes them in, and gives you back the
 * de-biased mixed parameters in place. No coordinator, a directed and
 * time-varying topology from the cluster file, authenticated encrypted TCP,
 * exact push-sum mass under compression.
 *
 *   #include "sgp.h"
 *
 *   sgp_options o;
 *   sgp_options_init(&o);
 *   o.cluster = "run/cluster.conf";   // peers, addresses, keys, topology (sgp launch --prepare)
 *   o.id = -1;                        // -1: the rank from mpirun / srun
 *   o.rounds = 1000;                  // every peer's number of steps
 *   o.codec = "stc:0.04";             // NULL: uncompressed
 *   char err[512];
 *   sgp_peer *p;
 *   if (sgp_open(&p, &o, params, n, err, sizeof err) < 0) {   // blocks until the cluster is up
 *       fprintf(stderr, "%s\n", err);
 *       return 1;
 *   }
 *   int rc;
 *   do {
 *       my_optimizer_step(params, n);          // at the parameters sgp handed you
 *       rc = sgp_step(p, params, n);           // 0: mixed; SGP_DONE: the final model
 *   } while (rc == 0);
 *   if (rc < 0) fprintf(stderr, "%s\n", sgp_error(p));
 *   sgp_close(p);
 *
 * Rounds. Round r is: your step from the parameters handed to you, the push
 * of shares, and the wait for and absorption of the shares that round r + 1
 * starts from (o.overlap moves that wait a round later: Overlap, below).
 * sgp_step returns SGP_DONE after the last round, once the in-neighbours'
 * last shares are in; a peer that fell far behind catches up by skipping
 * rounds (gossip/GUARANTEES.md), so loop until SGP_DONE rather than
 * counting. sgp_status_get tells the round.
 *
 * Threads and ownership. sgp_open starts one network thread per peer (libuv;
 * it blocks every signal, so SIGINT and SIGTERM stay yours). All calls on one
 * peer must come from one thread at a time: a call made while another is in
 * progress on the same peer returns -EBUSY. Between two calls the parameter
 * buffer is yours alone; during sgp_step sgp reads and writes it. Strings in
 * sgp_options are copied or used only during sgp_open. sgp_close frees the
 * peer: any later call with that pointer returns -EBADF (like a closed file
 * descriptor, the pointer may be reused by a later sgp_open).
 *
 * Errors. Every function returns 0 (or SGP_DONE) or a negative errno:
 * -EINVAL for a bad argument, -EBADF for a pointer that is not an open peer,
 * -EBUSY as above, others from the network or the files. sgp_error gives the
 * one-line reason of the last failure on a peer; sgp_open writes its reason
 * into err. Nothing here exits or aborts the process.
 *
 * Checkpoints. With o.checkpoint set, sgp_checkpoint writes the gossip
 * state (push-sum weight and numerator, per-edge running sums, codec
 * references) atomically at the current round boundary; save your own
 * optimizer state right after it, tagged with sgp_status_get's round. With
 * o.resume, sgp_open restores the checkpoint (or, without one, pulls the
 * current model from a neighbour) and writes the model to continue from into
 * params: restore your optimizer state for that round. A peer with a codec
 * and a checkpoint keeps the params it was opened with in a file beside it
 * (CHECKPOINT.origin, removed at sgp_close) instead of a copy in memory.
 *
 * Local steps (the 1000x setting of `sgp peer`). With o.local_steps = H
 * you take H optimizer steps between two sgp_step calls: each call is one
 * round, and messages go out once per H steps. o.outer adds the outer
 * optimizer: the round's progress (the model handed out minus the one you
 * come back with) is a pseudo-gradient for SGD or Nesterov momentum, whose
 * velocity stays on this peer and goes into its checkpoint.
 *
 * Overlap. With o.overlap = 1 the exchange runs during your steps instead
 * of between them: the in-neighbours' shares of the round before are
 * absorbed while you step (they had your steps' time to arrive), sgp_step
 * folds your step onto that mixed model and returns it at once, and this
 * round's push (the codec's encode and the send) runs on sgp's thread
 * during your next steps. So the parameters handed back after a step are
 * your own step plus what the neighbours sent one round earlier: the first
 * sgp_step hands back your own step unmixed, and a round's mix is one round
 * late (asynchronous DiLoCo's delay; gossip/GUARANTEES.md, `--overlap`).
 * sgp_step then blocks only for the fold and the copy of the model (and for
 * shares that are later than your steps).
 *
 * Building. After `make install PREFIX=...`: cc app.c $(pkg-config --cflags
 * --libs sgp) (PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a prefix of your
 * own; the library path is built into the program). From the source tree:
 * -Ipeer/lib -Lbuild -lsgp, or build/libsgp.a and `pkg-config --libs
 * openblas msgpack libuv libsodium zlib` -lm -lpthread.
 *
 * Versions. sgp_options_init is a macro that passes the size of the struct
 * your program was built with: a program built with an older sgp.h keeps
 * working with a newer library (the fields it did not know take their
 * defaults).
 */
#ifndef SGP_H
#define SGP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SGP_VERSION "0.5.0"
#define SGP_DONE 1 /* sgp_step: the run is over, params hold the final model */

typedef struct sgp_peer sgp_peer;

typedef struct sgp_options {
    size_t size;             /* sizeof(sgp_options), set by sgp_options_init: a header of another version is refused */
    const char *cluster;     /* the cluster file (peer/config/CLUSTER.md): required */
    int id;                  /* this peer; -1: from OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID [-1] */
    const char *key;         /* this peer's secret key file; NULL: ID.key beside the cluster file */
    long rounds;             /* steps every peer of the run takes: required, >= 1 */
    long rounds_per_epoch;   /* the unit of codec_warmup; 0: rounds [0] */
    const char *codec;       /* NULL or "none": float32 messages; "exact": float64 running sums; or
                              * fp16, bf16, topk:F, randk:F, qsgd:S, terngrad, natural, sign, stc:F, sketch:F[:C],
                              * sparseloco:K[:CHUNK][:whole|:stat] [NULL] */
    double step;             /* consensus step with a codec, (0, 1]; 0: the codec's default [0] */
    double codec_warmup;     /* epochs of sparsity warm-up for topk/randk/stc/sketch [0] */
    int tau;                 /* staleness bound: rounds a peer may run ahead of what it absorbed [0] */
    double dead_timeout;     /* seconds of silence before a neighbour is routed around [5] */
    double round_timeout;    /* seconds a round (and sgp_open's wait for the cluster, and a peer that has
                              * lost every in-neighbour waiting for one to come back) waits at most [30] */
    double round_deadline;   /* seconds a round waits for a late neighbour; 0: derived from recent rounds (with
                              * gather, at least round_timeout) [0] */
    const char *checkpoint;  /* the gossip state's checkpoint file; NULL: none [NULL] */
    double checkpoint_every; /* seconds between automatic checkpoints; 0: only sgp_checkpoint and close [0] */
    int resume;              /* 1: continue from the checkpoint, or join at a neighbour's model [0] */
    uint64_t seed;           /* the codecs' random streams; the same on every peer of a run [1] */
    const char *log;         /* JSON lines per round and per event (appended to with resume); NULL: none */
    int verbose;             /* 1: events (neighbour lost, catch-up, ...) as lines on stderr [0] */
    /* ---- from 0.2.0 on (a program built with an older sgp.h gets the defaults) ---- */
    int local_steps;         /* H: your optimizer steps between two sgp_step calls; a round is H steps
                              * (rounds and rounds_per_epoch count rounds). The codec's lag limit
                              * follows H, as in `sgp peer --local-steps` [1] */
    const char *outer;       /* the outer optimizer on each round's progress (DiLoCo-style): NULL or
                              * "none", "sgd:LR[:MOMENTUM]", "nesterov:LR:MOMENTUM", as `sgp peer --outer`;
                              * its velocity goes into the checkpoint [NULL] */
    /* ---- from 0.3.0 on (a program built with an older sgp.h gets the defaults) ---- */
    int overlap;             /* 1: overlap the exchange with your steps, as `sgp peer --overlap`: the
                              * parameters sgp_step hands back are your own step folded into the model
                              * mixed one round late (the in-neighbours' shares of the round before,
                              * not of the round just sent; the first sgp_step hands back your own
                              * step), and sgp_step waits neither for the shares of the round it just
                              * sent nor for their encode; 0: each round's shares are mixed in before
                              * sgp_step returns [0] */
    /* ---- from 0.4.0 on (a program built with an older sgp.h gets the defaults) ---- */
    int gossip_threads;      /* threads for sgp's vector loops (absorb, encode, the fold, the hand-out), in
                              * chunks of 1M values, the same result for any number; 0: the host's cores. Fewer
                              * leave cores to your data loaders [0] */
    /* ---- from 0.5.0 on (a program built with an older sgp.h gets the defaults) ---- */
    double gather;           /* >= 0: the exact sparse all-gather in place of push-sum, with this error-feedback
                              * decay (0.9), as `sgp peer --gather`: every peer's compressed round to every
                              * other, the same model everywhere. Needs a sparse codec (sparseloco:32), a
                              * complete topology in the cluster file (sgp launch --prepare --topology
                              * complete), tau 0, no overlap nor outer; < 0: push-sum [-1] */
} sgp_options;

typedef struct sgp_status {
    int id, peers;           /* this peer's id and the cluster's size (to shard your data) */
    long round;              /* the round the parameters last handed to you start */
    long start_round;        /* 0, or the round this peer resumed or joined at */
    long local_steps;        /* your steps applied so far */
    double weight;           /* the push-sum weight w (about 1; with overlap, before the round's emit,
                              * which follows the hand-out); the model is x / w */
    int neighbours;          /* peers this one sends to or hears from in some round */
    int neighbours_alive;    /* of them, not routed around now */
    uint64_t bytes_sent, bytes_received, messages_sent, messages_absorbed;
    long late_marks;         /* in-neighbours not waited for past a deadline */
    long catch_ups;          /* jumps forward after falling behind */
    long neighbours_lost;    /* times a neighbour was routed around */
    long checkpoints;        /* written */
    int done;                /* the run is over */
} sgp_status;

/* Defaults, and o->size = size: the size of the sgp_options your program
 * was compiled with, which is how the library tells which fields it has
 * (sgp_open refuses a size it does not know). Use the macro. */
void sgp_options_init_sized(sgp_options *o, size_t size);
#define sgp_options_init(o) sgp_options_init_sized((o), sizeof(sgp_options))

/* Join the run as peer o->id with n parameters (the same n on every peer).
 * params holds your initial parameters; on return it holds the model to
 * take your first step from (the same values, or the checkpoint's or a
 * neighbour's with o->resume). Blocks until every neighbour has connected
 * (at most o->round_timeout). With a codec, peers that start from the same
 * parameters (the same seed) send compressed messages from the first one;
 * peers that start apart pay one uncompressed SYNC per edge first
 * (gossip/GUARANTEES.md). 0 and *peer, or a negative errno with the
 * reason in err. */
int sgp_open(sgp_peer **peer, const sgp_options *o, float *params, size_t n, char *err, size_t errlen);

/* params: your parameters after your optimizer step from the ones handed to
 * you. On return they hold the mixed model of the next round (0; with
 * o->overlap, mixed with the shares of the round before), or the final
 * model (SGP_DONE, and every later call says SGP_DONE), unless a negative
 * errno is returned (params then unchanged, sgp_error says why). */
int sgp_step(sgp_peer *peer, float *params, size_t n);

/* As of the last round handed to you. */
int sgp_status_get(sgp_peer *peer, sgp_status *s);

/* Write the checkpoint now (o->checkpoint): 0, -EINVAL without a checkpoint
 * file, or the write's negative errno. */
int sgp_checkpoint(sgp_peer *peer);

/* Leave the run and free the peer: before the last round, the gossip state
 * is checkpointed (with o->checkpoint) and the neighbours are told at once,
 * so they route around it. 0, or the negative errno the run ended with. */
int sgp_close(sgp_peer *peer);

/* The reason for the last failure on peer ("" if none; a fixed text for a
 * pointer that is not an open peer). Valid until the next call on peer. */
const char *sgp_error(const sgp_peer *peer);

/* SGP_VERSION of the library actually loaded. */
const char *sgp_version(void);

#ifdef __cplusplus
}
#endif

#endif
