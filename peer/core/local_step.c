/* The local half of an SGP round. */
#include <errno.h>
#include <string.h>

#include "peer/core/local_step.h"

int local_init(local_state *l, const train_opts *o, const outer_opts *outer, const nn_dataset *shard, int peer,
                   int batch, size_t n_params)
{
    memset(l, 0, sizeof *l);
    l->clip = o->clip;
    l->batch = batch;
    const nn_optimizer_config oc = train_opts_optimizer(o);
    int rc = nn_optimizer_init(&l->opt, n_params, &oc);
    if (rc == 0)
        rc = outer_init(&l->outer, outer, n_params);
    if (rc == 0)
        rc = nn_batcher_init(&l->batches, shard, batch, o->seed, (uint64_t)peer + 1);
    if (rc < 0)
        local_free(l);
    return rc;
}

int local_init_external(local_state *l, const outer_opts *outer, size_t n_params)
{
    memset(l, 0, sizeof *l);
    l->external = 1;
    return outer_init(&l->outer, outer, n_params);
}

/* One step of z itself (weight 1) with the batch B already drawn. */
static float step_at(local_state *l, nn_model *m, float *z, size_t dim, int B, float lr, int *correct)
{
    float *own = m->params;
    m->params = z;
    float loss = nn_model_grad(m, l->batches.x, l->batches.y, B, correct);
    m->params = own;
    if (l->clip > 0)
        nn_clip_norm(m->grads, dim, l->clip);
    nn_optimizer_step(&l->opt, z, m->grads, lr, z);
    return loss;
}

float local_step(local_state *l, nn_model *m, gsp_peer *g, float lr, int *correct, int *batch_size)
{
    int B = nn_batcher_next(&l->batches);
    *batch_size = B;
    *correct = 0;
    if (B == 0)
        return 0.0f;
    /* The step is taken on z = x / w and x moves by w times it: x holds z
     * for the step (gsp_debias_in_place), then w z again. Without the factor
     * a peer whose weight has shrunk (shares lost to a peer that died, a
     * joiner's fresh unit among peers that lost some, a round that started
     * before a late share) would take steps of lr / w on its model and
     * diverge; a z beside x would be one more copy of the model from the
     * first such step on. On a regular graph with no faults w stays exactly
     * 1 and neither changes a bit. */
    gsp_debias_in_place(g);
    float loss = step_at(l, m, g->x, g->dim, B, lr, correct);
    gsp_rebias_in_place(g);
    return loss;
}

float local_step_at(local_state *l, nn_model *m, float *z, size_t dim, float lr, int *correct, int *batch_size)
{
    int B = nn_batcher_next(&l->batches);
    *batch_size = B;
    *correct = 0;
    return B == 0 ? 0.0f : step_at(l, m, z, dim, B, lr, correct);
}

const float *local_eval_params(nn_model *m, gsp_peer *g)
{
    if (g->w == 1.0 || !m->grads)
        return gsp_debias(g);
    gsp_debias_to(g, m->grads);
    return m->grads;
}

void local_free(local_state *l)
{
    if (!l)
        return;
    nn_optimizer_free(&l->opt);
    outer_free(&l->outer);
    nn_batcher_free(&l->batches);
    memset(l, 0, sizeof *l);
}

/* What of l a checkpoint keeps: the optimizer and batches only when they
 * are ours (a caller stepping itself keeps its own), the outer velocity
 * whenever there is an outer optimizer. */
static ckpt_local ckpt_parts(const local_state *l)
{
    ckpt_local p = {0};
    if (!l)
        return p;
    if (!l->external) {
        p.opt = (nn_optimizer *)&l->opt;
        p.batches = (nn_batcher *)&l->batches;
    }
    if (outer_on(&l->outer))
        p.outer_velocity = l->outer.sgd.velocity;
    return p;
}

int ckpt_save(const char *path, const ckpt_run *run, const gsp_peer *g, const local_state *l, char *err, size_t errlen)
{
    const ckpt_local p = ckpt_parts(l);
    return ckpt_write(path, run, g, &p, err, errlen);
}

int ckpt_save_final(const char *path, const ckpt_run *run, const gsp_peer *g, const local_state *l, char *err,
                    size_t errlen)
{
    const ckpt_local p = ckpt_parts(l);
    return ckpt_write_final(path, run, g, &p, err, errlen);
}

int ckpt_load(const char *path, const ckpt_run *run, gsp_peer *g, local_state *l, char *used, size_t usedlen, char *err,
              size_t errlen)
{
    const ckpt_local p = ckpt_parts(l);
    return ckpt_read(path, run, g, &p, used, usedlen, err, errlen);
}
