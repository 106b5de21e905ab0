/* Where a peer's memory goes: bytes by part, next to what the process holds.
 * Every summary (train, sim, peer, launch's combined one) reports this, so a
 * user sees what a bigger model or a denser graph will cost before trying it.
 *
 *   mem_parts m = {0};
 *   round_memory(&rp, &m);                 // gossip, codec, optimizer, shard, inbox
 *   m.model += model.bytes; m.data += nn_dataset_bytes(&train);
 *   mem_measure(&m);                       // rss, peak_rss, runtime
 *   mem_print(stdout, &m, 1);
 */
#ifndef PEER_CORE_MEMORY_H
#define PEER_CORE_MEMORY_H

#include <stddef.h>
#include <stdio.h>

#include "peer/store/json.h"

typedef struct mem_parts {
    size_t model;     /* parameters, gradients, activations, optimizer state (local and outer) */
    size_t gossip;    /* push-sum state: x, z, edge references (codec) or totals, changes kept for a SYNC, origin */
    size_t codec;     /* codec scratch: the difference, decoded values, sparse lists, message buffers */
    size_t in_flight; /* messages held: arrived and not absorbed, queued to send, transport buffers */
    size_t data;      /* training and test sets, this peer's shard, the batch buffers */
    size_t runtime;   /* the process before any of it: code, libraries, BLAS (mem_start) */
    size_t rss;       /* resident now */
    size_t peak_rss;  /* the most ever resident */
} mem_parts;

/* Note the process's resident memory before the job allocates anything: the
 * runtime part. Called once, first thing in a command. */
void mem_start(void);
/* Fill rss, peak_rss and runtime. */
void mem_measure(mem_parts *m);
/* /proc/meminfo's MemAvailable and MemTotal in bytes (0 if unknown). */
size_t mem_available(void);
size_t mem_total(void);
/* The parts added up (runtime included). */
size_t mem_accounted(const mem_parts *m);
/* "memory: peak RSS 870.1 MB, now 860.2 MB = model and optimizer 92.3 + ..." with the
 * parts divided by `per` (the simulator's peers: "a peer" figures). */
void mem_print(FILE *f, const mem_parts *m, int per);
/* The parts as memory_*_bytes keys, rss_bytes and peak_rss_bytes. */
void mem_json(json_obj *j, const mem_parts *m);

#endif
