/* --overlap's arithmetic (gossip/GUARANTEES.md, "Local steps"): where a
 * round's steps start, the steps on a model apart from x, and their fold
 * onto the mixed model. engine.c decides when each runs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gsp_gather.h"
#include "gossip/gsp_pool.h"
#include "peer/core/engine_state.h"

/* Its two models, allocated at its first round: where the steps start, and
 * where they run (a caller's run in its own buffer). */
static int buffers(engine *e)
{
    const size_t n = e->rp.g.dim;
    if (!e->z_start && !(e->z_start = malloc(n * sizeof *e->z_start)))
        return -ENOMEM;
    if (!e->caller_steps && !e->z_work && !(e->z_work = malloc(n * sizeof *e->z_work)))
        return -ENOMEM;
    return 0;
}

void engine_overlap_start(engine *e)
{
    if (buffers(e) < 0) {
        e->fail = -ENOMEM; /* (the run ends when the steps are done) */
        e->steps_void = 1;
    } else {
        if (!e->start_ready)
            gsp_debias_to(&e->rp.g, e->z_start), e->start_in = NULL;
        e->steps_void = 0;
    }
    e->start_ready = 0;
    /* (a caller's outer step takes z_start itself as its anchor at the fold: outer_end_from) */
}

float engine_overlap_compute(engine *e, nn_model *model)
{
    if (!e->z_start || !e->z_work) /* (out of memory at the start: the run ends with this round) */
        return 0.0f;
    memcpy(e->z_work, e->z_start, e->rp.g.dim * sizeof *e->z_work); /* (on a step's thread: not the pool's) */
    return round_step_on(&e->rp, model, e->z_work, e->step_round);
}

typedef struct fold_job {
    float *x, *z0, w, inv;
    float *z;   /* the stepped model */
    int handed; /* z is a caller's buffer: the next start goes into it too */
} fold_job;

/* The fold over [s, e): x += w (z - z0), and the next start z0 = x / w,
 * written into a caller's z as well (its next model: the hand-out is then
 * no pass of its own). */
static void fold_span(void *arg, size_t s, size_t e)
{
    const fold_job *a = arg;
    float *x = a->x, *z0 = a->z0, *z = a->z;
    const float w = a->w, inv = a->inv;
    if (a->handed)
        for (size_t i = s; i < e; i++) {
            x[i] += w * (z[i] - z0[i]);
            z[i] = z0[i] = x[i] * inv;
        }
    else
        for (size_t i = s; i < e; i++) {
            x[i] += w * (z[i] - z0[i]);
            z0[i] = x[i] * inv;
        }
}

void engine_fold_steps(engine *e)
{
    gsp_peer *g = &e->rp.g;
    e->stepped = e->absorbed = 0;
    e->start_in = NULL;
    if (!e->steps_void && e->z_start && g->gather) {
        /* (the all-gather's x is the model applied so far: the steps' progress goes into the
         * error feedback, and the next start is x plus it) */
        float *z = e->caller_steps ? e->caller_z : e->z_work;
        gsp_gather_fold(g, e->z_start, z, e->caller_steps);
        if (e->caller_steps)
            e->start_in = z;
    } else if (!e->steps_void && e->z_start) {
        float *z = e->z_work;
        if (e->caller_steps) { /* (its buffer: the next model is written into it anyway) */
            outer_end_from(&e->rp.local.outer, e->z_start, e->caller_z);
            z = e->caller_z;
        }
        /* (one pass: the fold and the next start, x / w as gsp_debias_to has it) */
        fold_job a = {.x = g->x, .z0 = e->z_start, .w = (float)g->w, .inv = gsp_debias_factor(g), .z = z,
                      .handed = e->caller_steps};
        gsp_pool_spans(g->pool, g->dim, fold_span, &a);
        if (e->caller_steps)
            e->start_in = z;
    } else if (e->z_start)
        gsp_debias_to(g, e->z_start);
    e->steps_void = 0;
    e->caller_z = NULL;
    e->start_ready = e->z_start != NULL;
}
