/* A codec's encode on the pool's threads, for a codec that selects chunk by
 * chunk (sparseloco): the emit of a large model otherwise runs its whole
 * selection on one core, the sparse all-gather's longest part on a host of
 * many. Each chunk's selection is the codec's own and the message is made
 * from them in chunk order, so a pool of any size sends the same bytes. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "gossip/gsp_internal.h"
#include "gossip/gsp_pool.h"

typedef struct encode_job {
    const cmp_spec *s;
    const float *x;
    size_t n, chunks, tasks;
    void *work;
    uint8_t *select;   /* one select area a thread, `each` bytes */
    size_t each;
    int slots;
    atomic_int taken[GSP_POOL_MAX];
    atomic_int rc;
} encode_job;

/* Task i's share of the codec's chunks, in a select area no other thread
 * holds meanwhile (at most one task a thread runs at a time, so a free one
 * is there). */
static void encode_task(void *arg, size_t i)
{
    encode_job *j = arg;
    int slot = 0;
    while (atomic_exchange(&j->taken[slot], 1))
        slot = (slot + 1) % j->slots;
    const int rc = cmp_encode_chunks(j->s, j->x, j->n, i * j->chunks / j->tasks, (i + 1) * j->chunks / j->tasks,
                                     j->select + (size_t)slot * j->each, j->work);
    atomic_store(&j->taken[slot], 0);
    if (rc < 0)
        atomic_store(&j->rc, rc);
}

long gsp_encode(gsp_peer *g, const cmp_spec *s, const float *x, size_t n, uint64_t seed, uint8_t *out, size_t cap)
{
    const int threads = gsp_pool_threads(g->pool);
    const size_t chunks = cmp_chunks(s, n), tasks = gsp_chunks(n);
    if (threads == 1 || tasks == 1 || chunks < 2 || cap < cmp_bound(s, n))
        return cmp_encode(s, x, n, seed, g->work, out, cap);
    const size_t each = (cmp_chunk_work(s, n) + 63) & ~(size_t)63, want = each * (size_t)threads;
    if (g->select_bytes < want) {
        void *p = malloc(want);
        if (!p)
            return -ENOMEM;
        free(g->select);
        g->select = p, g->select_bytes = want;
    }
    encode_job j = {.s = s, .x = x, .n = n, .chunks = chunks, .tasks = tasks < chunks ? tasks : chunks,
                    .work = g->work, .select = g->select, .each = each, .slots = threads};
    for (int t = 0; t < threads; t++)
        atomic_init(&j.taken[t], 0);
    atomic_init(&j.rc, 0);
    gsp_pool_run(g->pool, j.tasks, encode_task, &j);
    const int rc = atomic_load(&j.rc);
    return rc < 0 ? rc : cmp_encode_chosen(s, n, g->work, out, cap);
}
