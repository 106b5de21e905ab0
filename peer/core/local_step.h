/* One peer's local SGP computation, shared by the simulator and the networked
 * peer so that both run exactly the same arithmetic:
 *
 *  z = x / w;  g = clip(grad f_i(z));  x -= w * lr * step(g), weight decay taken at z
 *
 * (the step of z itself is the optimizer's step, SGD or AdamW, whatever w
 * has become)
 *
 *   local_state l;
 *   local_init(&l, &opts, NULL, &shard, peer_id, batch_size, n_params);  // NULL: no outer optimizer
 *   int correct, batch;
 *   float loss = local_step(&l, &model, &gossip_peer, lr, &correct, &batch);
 *   local_free(&l);
 *
 * The model is only a compute engine here: its parameter pointer is pointed
 * at z for the step, so one nn_model serves any number of simulated peers.
 * Weight decay is applied at z (the real parameters), not at the numerator x:
 * SGD adds wd * z to the gradient, AdamW subtracts lr * wd * z (decoupled).
 */
#ifndef PEER_CORE_LOCAL_STEP_H
#define PEER_CORE_LOCAL_STEP_H

#include "gossip/gsp.h"
#include "nn/nn_batch.h"
#include "nn/nn_model.h"
#include "nn/nn_optim.h"
#include "peer/core/outer.h"
#include "peer/core/train_opts.h"
#include "peer/store/ckpt.h"

typedef struct local_state {
    nn_optimizer opt; /* its state stays local to the peer (and goes into its checkpoint) */
    outer_state outer; /* --outer: the step on each round's progress (outer.h); its velocity is checkpointed */
    nn_batcher batches;
    double clip;    /* gradient norm limit (0: none), before weight decay */
    int batch;      /* this peer's mini-batch */
    int external;   /* the caller takes the steps with an optimizer of its own (libsgp): only outer is set */
} local_state;

/* batch: this peer's mini-batch size. Streams are seeded by (seed, peer).
 * outer: NULL or an outer optimizer (outer.h). */
int local_init(local_state *l, const train_opts *o, const outer_opts *outer, const nn_dataset *shard, int peer,
                   int batch, size_t n_params);
/* For a caller that steps itself (libsgp): no optimizer and no batches
 * here, only the outer optimizer (outer may be NULL). -ENOMEM. */
int local_init_external(local_state *l, const outer_opts *outer, size_t n_params);
/* One step at the current round; returns the batch loss (0 for an empty shard). */
float local_step(local_state *l, nn_model *m, gsp_peer *g, float lr, int *correct, int *batch_size);
/* The same step of a model z of dim floats held apart from the gossip
 * state (--overlap's steps, which run while the exchange moves x). */
float local_step_at(local_state *l, nn_model *m, float *z, size_t dim, float lr, int *correct, int *batch_size);
/* The model to evaluate between steps, z = x / w, bit for bit as
 * gsp_debias has it: x itself when w is exactly 1, else written into m's
 * gradient buffer, free between steps (every backward pass writes it whole),
 * rather than into g's z, which would then stay resident, a copy of the
 * model, for the rest of the run. Current until the next step. */
const float *local_eval_params(nn_model *m, gsp_peer *g);
void local_free(local_state *l);

/* A checkpoint of g and l (peer/store/ckpt.h: the file, what it keeps, the
 * errors), l's optimizer, batch stream and outer velocity lent to
 * ckpt_write and ckpt_read; for a caller stepping itself
 * (local_init_external) only the outer velocity. l may be NULL. */
int ckpt_save(const char *path, const ckpt_run *run, const gsp_peer *g, const local_state *l, char *err, size_t errlen);
/* ckpt_write_final's: the state the run stops with. */
int ckpt_save_final(const char *path, const ckpt_run *run, const gsp_peer *g, const local_state *l, char *err,
                    size_t errlen);
int ckpt_load(const char *path, const ckpt_run *run, gsp_peer *g, local_state *l, char *used, size_t usedlen, char *err,
              size_t errlen);

#endif
