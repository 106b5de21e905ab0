/* gossip/gsp_pool.h: the chunk pool runs every task once, a second caller
 * while a run is in progress runs its own tasks, and the vector loops of
 * emits and absorbs (sparseloco's selection among them) give the same
 * floats with no pool, a pool of one thread and a pool of several, on a
 * model of three chunks with a ragged end. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/gsp.h"
#include "gossip/gsp_pool.h"

TestSuite(gossip_pool, .timeout = 120);

#define TASKS 1000

typedef struct counts {
    atomic_int ran[TASKS];
} counts;

static void count_task(void *arg, size_t i)
{
    counts *c = arg;
    atomic_fetch_add(&c->ran[i], 1);
}

Test(gossip_pool, every_task_runs_once_on_any_pool)
{
    for (int threads = 1; threads <= 4; threads++) {
        gsp_pool *p;
        cr_assert_eq(gsp_pool_new(&p, threads), 0);
        cr_assert_eq(gsp_pool_threads(p), threads);
        for (int run = 0; run < 50; run++) { /* (runs after runs: no worker may see a stale one) */
            counts *c = calloc(1, sizeof *c);
            const size_t n = (size_t)(run * 37 % TASKS) + 1;
            gsp_pool_run(p, n, count_task, c);
            for (size_t i = 0; i < TASKS; i++)
                cr_assert_eq(atomic_load(&c->ran[i]), i < n, "%d threads, run %d: task %zu ran %d times", threads, run,
                             i, atomic_load(&c->ran[i]));
            free(c);
        }
        gsp_pool_free(p);
    }
    cr_assert_eq(gsp_pool_threads(NULL), 1);
    gsp_pool *p;
    cr_assert_eq(gsp_pool_new(&p, 0), -EINVAL);
    cr_assert_eq(gsp_pool_new(&p, GSP_POOL_MAX + 1), -EINVAL);
    gsp_pool_free(NULL);
}

/* Two threads run on one pool at once: both finish, every task of each once. */
typedef struct caller {
    gsp_pool *p;
    counts c;
} caller;

static void *call(void *arg)
{
    caller *k = arg;
    for (int run = 0; run < 200; run++)
        gsp_pool_run(k->p, TASKS / 200, count_task, &k->c);
    return NULL;
}

Test(gossip_pool, two_callers_at_once_both_finish)
{
    gsp_pool *p;
    cr_assert_eq(gsp_pool_new(&p, 3), 0);
    caller *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    a->p = b->p = p;
    pthread_t ta, tb;
    pthread_create(&ta, NULL, call, a);
    pthread_create(&tb, NULL, call, b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    for (size_t i = 0; i < TASKS; i++) {
        const int want = i < TASKS / 200 ? 200 : 0;
        cr_assert_eq(atomic_load(&a->c.ran[i]), want);
        cr_assert_eq(atomic_load(&b->c.ran[i]), want);
    }
    free(a), free(b);
    gsp_pool_free(p);
}

/* ---- the same floats whatever the pool ---------------------------------------- */

#define DIM (2 * GSP_CHUNK + 4099) /* three chunks, the last one short and not a whole block */
#define ROUNDS 5

/* n peers on `kind`, a codec, ROUNDS rounds (a step, the emit, every share
 * absorbed); their x and w after, in xs (n * DIM) and ws. */
static void run(const char *kind, int n, const char *codec_text, gsp_pool *pool, float *xs, double *ws)
{
    topo t;
    parse_error te;
    cr_assert_eq(topo_generate(&t, kind, n, NULL, &te), 0, "%s", te.msg);
    cmp_spec spec;
    char err[128];
    cr_assert_eq(cmp_spec_parse(&spec, codec_text, err, sizeof err), 0, "%s", err);
    gsp_peer *p = calloc((size_t)n, sizeof *p);
    float *x0 = malloc(DIM * sizeof *x0);
    for (int i = 0; i < n; i++) {
        for (size_t d = 0; d < DIM; d++)
            x0[d] = (float)((d * 2654435761u + (unsigned)i * 40503u) % 1000003u) * 1e-6f - 0.5f;
        cr_assert_eq(gsp_init(&p[i], i, n, DIM, 0, x0), 0);
        cr_assert_eq(gsp_set_codec(&p[i], &spec, 7, 0.5f), 0);
        gsp_set_pool(&p[i], pool);
    }
    free(x0);
    uint8_t alive[8];
    memset(alive, 1, sizeof alive);
    for (int r = 0; r < ROUNDS; r++) {
        gsp_msg all[8][TOPO_MAX_OUT];
        int m[8];
        for (int i = 0; i < n; i++) {
            for (size_t d = (size_t)(r * 131 + i); d < DIM; d += 97) /* a step: a sparse nudge, then a dense one */
                p[i].x[d] += 0.01f * (float)(i + 1);
            for (size_t d = 0; d < DIM; d++)
                p[i].x[d] *= 0.999f;
            topo_out out;
            topo_route(&t, r, i, alive, &out);
            m[i] = gsp_emit(&p[i], &out, all[i]);
            cr_assert_eq(m[i], out.n);
            for (int k = 0; k < m[i]; k++) {
                gsp_msg copy;
                cr_assert_eq(gsp_msg_copy(&copy, &all[i][k]), 0);
                all[i][k] = copy;
            }
        }
        for (int i = 0; i < n; i++)
            for (int k = 0; k < m[i]; k++) {
                cr_assert_geq(gsp_absorb(&p[all[i][k].dst], &all[i][k]), 0);
                gsp_msg_free(&all[i][k]);
            }
    }
    for (int i = 0; i < n; i++) {
        if (gsp_pool_threads(pool) > 1 && cmp_chunks(&spec, DIM) > 1)
            cr_assert_gt(p[i].select_bytes, 0, "%s: peer %d encoded on the pool's threads", codec_text, i);
        memcpy(xs + (size_t)i * DIM, p[i].x, DIM * sizeof *xs);
        ws[i] = p[i].w;
        gsp_free(&p[i]);
    }
    free(p);
    topo_free(&t);
}

static void same_floats(const char *kind, int n, const char *codec)
{
    float *a = malloc((size_t)n * DIM * sizeof *a), *b = malloc((size_t)n * DIM * sizeof *b);
    double wa[8], wb[8];
    run(kind, n, codec, NULL, a, wa);
    for (int threads = 1; threads <= 3; threads += 2) {
        gsp_pool *p;
        cr_assert_eq(gsp_pool_new(&p, threads), 0);
        run(kind, n, codec, p, b, wb);
        gsp_pool_free(p);
        for (int i = 0; i < n; i++)
            cr_assert_eq(wa[i], wb[i], "%s %s, %d threads: peer %d's weight", kind, codec, threads, i);
        cr_assert_eq(memcmp(a, b, (size_t)n * DIM * sizeof *a), 0, "%s %s, %d threads: the models differ", kind, codec,
                     threads);
    }
    free(a), free(b);
}

/* One out-edge a round: the sender's sweep (x gives up the reference and
 * takes the message's changes, block by block). */
Test(gossip_pool, a_ring_with_stc_computes_the_same_floats_on_any_pool) { same_floats("ring", 3, "stc:0.05"); }

/* A codec that selects chunk by chunk: its chunks selected on the pool's
 * threads (gsp_encode). */
Test(gossip_pool, a_ring_with_sparseloco_computes_the_same_floats_on_any_pool)
{
    same_floats("ring", 3, "sparseloco:32");
}

/* Two out-edges a round: x split over the references, two absorbs a peer. */
Test(gossip_pool, an_exponential_graph_with_topk_computes_the_same_floats_on_any_pool)
{
    same_floats("exponential", 4, "topk:0.02");
}
