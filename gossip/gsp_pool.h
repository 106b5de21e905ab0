/* Threads that share the vector loops of one emit or absorb: a loop over a
 * model of n values runs as ceil(n / GSP_CHUNK) chunks, taken in turn by
 * the pool's threads and the calling one. A chunk's bounds are multiples of
 * GSP_CHUNK and its sums are added up in chunk order, so what a loop
 * computes does not depend on how many threads ran it (the simulator with
 * one thread and a peer with sixteen compute the same floats); a model of
 * at most one chunk is one chunk, computed as the loop always did.
 *
 *   gsp_pool *p;
 *   if (gsp_pool_new(&p, gsp_pool_auto()) < 0) ...    // the calling thread is one of them
 *   gsp_set_pool(&g, p);                               // every peer of the process may share it
 *   ... emits and absorbs (one at a time uses the threads; another meanwhile runs on its caller) ...
 *   gsp_pool_free(p);                                  // after the peers that use it
 */
#ifndef GOSSIP_GSP_POOL_H
#define GOSSIP_GSP_POOL_H

#include <stddef.h>

/* Values a chunk: 4 MB of floats, long enough that handing one to a thread
 * costs nothing next to it, short enough that a 5M-parameter model keeps
 * five threads busy. */
#define GSP_CHUNK ((size_t)1 << 20)

/* The most threads a pool runs (the memory bus saturates well before). */
#define GSP_POOL_MAX 64

typedef struct gsp_pool gsp_pool;

/* A pool of `threads` threads, the caller's included (1: none started; the
 * loops run on the caller as before). -EINVAL outside [1, GSP_POOL_MAX],
 * -ENOMEM, or pthread_create's error. */
int gsp_pool_new(gsp_pool **p, int threads);
/* The host's cores, at most GSP_POOL_MAX: what a pool gets by default. */
int gsp_pool_auto(void);
/* Threads of p (1 for NULL). */
int gsp_pool_threads(const gsp_pool *p);
/* task(arg, i) for every i in [0, n), each once, on p's threads and the
 * caller's; returns when every one has. p NULL, or a run already in
 * progress on p (another thread's): in order on the caller. */
void gsp_pool_run(gsp_pool *p, size_t n, void (*task)(void *arg, size_t i), void *arg);
/* fn(arg, s, e) for the chunks [s, e) of [0, n) (gsp_chunks(n) of them),
 * as gsp_pool_run runs tasks: a loop that is elementwise computes the same
 * floats on any pool. */
void gsp_pool_spans(gsp_pool *p, size_t n, void (*fn)(void *arg, size_t s, size_t e), void *arg);
/* Stops and joins its threads; NULL is fine. */
void gsp_pool_free(gsp_pool *p);

/* The chunks of a vector of n values (at least 1). */
static inline size_t gsp_chunks(size_t n) { return n > GSP_CHUNK ? (n + GSP_CHUNK - 1) / GSP_CHUNK : 1; }

#endif
