/* Epoch-shuffled mini-batches; for text, windows drawn at random offsets,
 * d->n of them making an epoch. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_batch.h"

static void shuffle(nn_batcher *b)
{
    for (int i = b->d->n - 1; i > 0; i--) {
        int j = (int)nn_rng_below(&b->rng, (uint64_t)i + 1);
        int t = b->perm[i];
        b->perm[i] = b->perm[j];
        b->perm[j] = t;
    }
    b->pos = 0;
}

int nn_batcher_init(nn_batcher *b, const nn_dataset *d, int batch, uint64_t seed, uint64_t stream)
{
    memset(b, 0, sizeof *b);
    if (batch <= 0)
        return -EINVAL;
    b->d = d, b->batch = batch;
    b->perm = malloc(((size_t)d->n + 1) * sizeof(int));
    b->x = malloc((size_t)batch * (nn_dataset_dim(d) + 1) * sizeof(float));
    b->y = malloc((size_t)batch * (size_t)nn_dataset_labels(d) * sizeof(int));
    if (!b->perm || !b->x || !b->y) {
        nn_batcher_free(b);
        return -ENOMEM;
    }
    for (int i = 0; i < d->n; i++)
        b->perm[i] = i;
    nn_rng_seed(&b->rng, seed, 0x62617463ULL ^ (stream << 20));
    shuffle(b);
    return 0;
}

int nn_batcher_next(nn_batcher *b)
{
    const nn_dataset *d = b->d;
    if (d->n == 0)
        return 0;
    if (b->pos >= d->n) {
        b->epoch++;
        shuffle(b);
    }
    int B = d->n - b->pos < b->batch ? d->n - b->pos : b->batch;
    const size_t dim = nn_dataset_dim(d);
    if (d->text) { /* windows at random offsets; perm only counts them */
        const uint64_t starts = d->text_len - dim; /* a window is dim + 1 bytes */
        for (int i = 0; i < B; i++) {
            const uint8_t *at = d->text + nn_rng_below(&b->rng, starts);
            for (size_t t = 0; t < dim; t++) {
                b->x[(size_t)i * dim + t] = (float)at[t];
                b->y[(size_t)i * dim + t] = at[t + 1];
            }
        }
        b->pos += B;
        return B;
    }
    for (int i = 0; i < B; i++) {
        int src = b->perm[b->pos + i];
        memcpy(b->x + (size_t)i * dim, d->x + (size_t)src * dim, dim * sizeof(float));
        b->y[i] = d->y[src];
    }
    b->pos += B;
    return B;
}

int nn_batcher_per_epoch(const nn_batcher *b)
{
    return (b->d->n + b->batch - 1) / b->batch;
}

size_t nn_batcher_bytes(const nn_batcher *b)
{
    if (!b->perm)
        return 0;
    return ((size_t)b->d->n + 1) * sizeof(int) + (size_t)b->batch * (nn_dataset_dim(b->d) + 1) * sizeof(float) +
           (size_t)b->batch * (size_t)nn_dataset_labels(b->d) * sizeof(int);
}

void nn_batcher_free(nn_batcher *b)
{
    if (!b)
        return;
    free(b->perm);
    free(b->x);
    free(b->y);
    memset(b, 0, sizeof *b);
}
