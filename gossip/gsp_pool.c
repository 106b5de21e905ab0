/* The chunk pool (gsp_pool.h): workers that sleep on a condition variable
 * between runs (a peer's loops come once a round; spinning would take the
 * cores its local steps need) and take a run's tasks by an atomic counter. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "gossip/gsp_pool.h"

struct gsp_pool {
    int threads;
    pthread_t *worker;
    pthread_mutex_t mu;
    pthread_mutex_t run; /* held by the one run in progress */
    pthread_cond_t go, done;
    unsigned long generation; /* one more per run: a worker wakes for each new one */
    int quit, busy;           /* busy: workers still inside the current run */
    /* The current run. */
    void (*task)(void *arg, size_t i);
    void *arg;
    size_t n;
    atomic_size_t next;
};

/* Tasks of the current run until none is left. */
static void take_tasks(gsp_pool *p)
{
    for (size_t i; (i = atomic_fetch_add(&p->next, 1)) < p->n;)
        p->task(p->arg, i);
}

static void *work(void *arg)
{
    gsp_pool *p = arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->quit)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        take_tasks(p);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int gsp_pool_new(gsp_pool **out, int threads)
{
    *out = NULL;
    if (threads < 1 || threads > GSP_POOL_MAX)
        return -EINVAL;
    gsp_pool *p = calloc(1, sizeof *p);
    if (!p || (threads > 1 && !(p->worker = calloc((size_t)threads - 1, sizeof *p->worker)))) {
        free(p);
        return -ENOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->run, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int t = 0; t < threads - 1; t++) {
        int rc = pthread_create(&p->worker[t], NULL, work, p);
        if (rc != 0) {
            p->threads = t + 1; /* (the ones started, and the caller) */
            gsp_pool_free(p);
            return -rc;
        }
    }
    p->threads = threads;
    *out = p;
    return 0;
}

int gsp_pool_auto(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > GSP_POOL_MAX ? GSP_POOL_MAX : (int)n;
}

int gsp_pool_threads(const gsp_pool *p) { return p ? p->threads : 1; }

void gsp_pool_run(gsp_pool *p, size_t n, void (*task)(void *arg, size_t i), void *arg)
{
    /* A second caller while a run is in progress (a step's thread beside
     * the loop's absorb, --overlap) runs its tasks itself: the same floats. */
    if (!p || p->threads == 1 || n < 2 || pthread_mutex_trylock(&p->run) != 0) {
        for (size_t i = 0; i < n; i++)
            task(arg, i);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->task = task, p->arg = arg, p->n = n;
    atomic_store(&p->next, 0);
    p->busy = p->threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    take_tasks(p);
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0) /* (a worker still inside a task, or not yet woken: it must not see the next run's n) */
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_unlock(&p->run);
}

typedef struct spans {
    void (*fn)(void *arg, size_t s, size_t e);
    void *arg;
    size_t n;
} spans;

static void span_task(void *arg, size_t i)
{
    const spans *a = arg;
    const size_t s = i * GSP_CHUNK;
    a->fn(a->arg, s, a->n - s > GSP_CHUNK ? s + GSP_CHUNK : a->n);
}

void gsp_pool_spans(gsp_pool *p, size_t n, void (*fn)(void *arg, size_t s, size_t e), void *arg)
{
    spans a = {.fn = fn, .arg = arg, .n = n};
    gsp_pool_run(p, gsp_chunks(n), span_task, &a);
}

void gsp_pool_free(gsp_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int t = 0; t < p->threads - 1; t++)
        pthread_join(p->worker[t], NULL);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->run);
    free(p->worker);
    free(p);
}
