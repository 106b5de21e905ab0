/* What the drivers see of the peer engine: its getters (engine.h). */
#include <string.h>

#include "gossip/gsp_pool.h"
#include "peer/core/engine_state.h"

long engine_round(const engine *e) { return e->rp.g.round; }
long engine_start_round(const engine *e) { return e->start_round; }
long engine_step_round(const engine *e) { return e->computing ? e->step_round : e->rp.g.round; }
const gsp_peer *engine_gossip(const engine *e) { return &e->rp.g; }
const gsp_pace *engine_pace(const engine *e) { return &e->rp.pace; }
const local_state *engine_local(const engine *e) { return &e->rp.local; }
typedef struct copy_job {
    float *dst;
    const float *src;
} copy_job;

static void copy_span(void *arg, size_t s, size_t e)
{
    const copy_job *a = arg;
    memcpy(a->dst + s, a->src + s, (e - s) * sizeof *a->dst);
}

void engine_model_to(engine *e, float *z)
{
    if (e->rp.c->overlap && e->computing && e->z_start) { /* (the running steps' model, which a fold took) */
        const int there = z == e->start_in; /* (the fold wrote it there too) */
        e->start_in = NULL;
        if (there)
            return;
        copy_job a = {.dst = z, .src = e->z_start};
        gsp_pool_spans(e->rp.g.pool, e->rp.g.dim, copy_span, &a);
    } else
        gsp_debias_to(&e->rp.g, z);
}
const float *engine_eval_params(engine *e, nn_model *m) { return local_eval_params(m, &e->rp.g); }
float *engine_take_model(engine *e) { return gsp_take_model(&e->rp.g); }

const gsp_msg *engine_inbox(const engine *e, int *n)
{
    *n = e->rp.n_inbox;
    return e->rp.inbox;
}

int engine_joining(const engine *e) { return e->joining; }
int engine_refreshing(const engine *e) { return e->refreshing; }
int engine_computing(const engine *e) { return e->computing; }
int engine_stopping(const engine *e) { return e->stopping; }
int engine_left(const engine *e) { return e->rp.g.left; }
int engine_rounds_done(const engine *e) { return e->rounds_done; }
int engine_promise_pending(const engine *e) { return e->promised; }

void engine_stats_of(const engine *e, engine_stats *s)
{
    *s = (engine_stats){.steps = e->rp.steps, .loss = e->rp.loss, .absorbed = e->rp.absorbed,
                        .wait_seconds = e->wait_seconds};
}

const char *engine_diverged(const engine *e) { return e->diverged; }

void engine_diverged_text(const engine *e, char *buf, size_t len)
{
    round_diverged_text(&e->rp, e->diverged ? e->diverged : "the parameters", buf, len);
}

void engine_memory(const engine *e, mem_parts *m)
{
    round_memory(&e->rp, m);
    if (e->z_start)
        m->gossip += e->rp.g.dim * sizeof *e->z_start;
    if (e->z_work)
        m->gossip += e->rp.g.dim * sizeof *e->z_work;
}

void engine_model_values(const engine_send *s, float *dst)
{
    if (s->scale == 1.0f)
        memcpy(dst, s->model, s->dim * sizeof *dst);
    else
        for (size_t i = 0; i < s->dim; i++)
            dst[i] = s->model[i] * s->scale;
}
