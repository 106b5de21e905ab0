/* Mini-batches: a fresh seeded permutation every epoch, rows gathered into
 * one contiguous buffer the model reads directly.
 *
 *   nn_batcher b = {0};
 *   nn_batcher_init(&b, &train, 64, seed, peer_id);
 *   int B = nn_batcher_next(&b);     // b.x = B rows, b.y = B labels
 *   ... b.epoch counts completed passes ...
 *   nn_batcher_free(&b);
 *
 * The last batch of an epoch may be short (no sample is skipped). Text data
 * has no fixed samples: a batch is windows of w + 1 bytes at offsets drawn
 * uniformly (b.x the first w bytes of each, b.y the w that follow), and an
 * epoch is d->n of them, so --epochs still means one pass over the bytes.
 */
#ifndef NN_NN_BATCH_H
#define NN_NN_BATCH_H

#include <stdint.h>

#include "nn/nn_data.h"
#include "nn/nn_rng.h"

typedef struct nn_batcher {
    const nn_dataset *d;
    int batch;
    int *perm;  /* this epoch's order */
    int pos;    /* next index into perm */
    long epoch; /* completed epochs */
    nn_rng rng;
    float *x;   /* [batch][dim] */
    int *y;     /* [batch], or [batch][w] for text */
} nn_batcher;

int nn_batcher_init(nn_batcher *b, const nn_dataset *d, int batch, uint64_t seed, uint64_t stream);
/* Gathers the next batch into b->x / b->y; returns its size (>= 1), or 0 for an empty set. */
int nn_batcher_next(nn_batcher *b);
/* Batches in one epoch. */
int nn_batcher_per_epoch(const nn_batcher *b);
/* Bytes it holds: the epoch's order and one batch. */
size_t nn_batcher_bytes(const nn_batcher *b);
void nn_batcher_free(nn_batcher *b);

#endif
