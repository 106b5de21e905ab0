/* Per-peer shards of a data set, computed independently by every peer.
 *
 * There is no coordinator to hand out shards, so each peer draws the complete
 * split from a stream seeded by the run seed alone (never the peer id) and keeps
 * its own part. All peers therefore agree on the split, which is what makes the
 * shards disjoint and covering. (This assumes the same libm on every peer: the
 * Dirichlet draws go through log/pow, and peers run the same binary.)
 *
 * Non-iid shards follow the usual federated-learning benchmark (Hsu et al.
 * 2019): for each class, proportions p ~ Dir(alpha) over the peers, and that
 * class's samples cut in contiguous runs of those sizes. Small alpha gives each
 * peer a few dominant classes; large alpha tends to iid.
 */
#include "nn/nn_data.h"
#include "nn/nn_rng.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Stream ids, so the iid and Dirichlet splits of one seed are unrelated to
 * each other and to the peers' own streams (which use the peer id). */
#define SHARD_STREAM_IID 0x5348415244494944ULL /* "SHARDIID" */
#define SHARD_STREAM_DIR 0x5348415244444952ULL /* "SHARDDIR" */

static void shuffle(int *a, size_t n, nn_rng *r)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)nn_rng_below(r, i);
        int t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static size_t shard_iid(int n, int peer, int n_peers, uint64_t seed, int *out)
{
    nn_rng r;
    nn_rng_seed(&r, seed, SHARD_STREAM_IID);
    for (int i = 0; i < n; i++)
        out[i] = i;
    shuffle(out, (size_t)n, &r);
    /* Cut points floor(p*n/P): part sizes differ by at most one. */
    size_t lo = (size_t)((int64_t)peer * n / n_peers), hi = (size_t)((int64_t)(peer + 1) * n / n_peers);
    memmove(out, out + lo, (hi - lo) * sizeof *out);
    return hi - lo;
}

/* Bounds [lo, hi) of `peer`'s run among m samples, from one Dirichlet draw
 * over all peers (every peer draws all of them, so the stream stays in step). */
static void dirichlet_run(nn_rng *r, double alpha, int peer, int n_peers, double *g, size_t m,
                          size_t *lo, size_t *hi)
{
    double sum = 0;
    for (int j = 0; j < n_peers; j++)
        sum += g[j] = nn_rng_gamma(r, alpha);
    if (!(sum > 0)) {
        /* Tiny alpha: every gamma underflowed. The limit of Dir(alpha -> 0) is
         * "one peer takes all", so do exactly that. */
        int pick = (int)nn_rng_below(r, (uint64_t)n_peers);
        *lo = 0;
        *hi = peer == pick ? m : 0;
        return;
    }
    /* Cut at round(cumulative share * m); the cumulative sums are monotone, so
     * the runs tile [0, m) whatever the rounding does. */
    double cum = 0;
    size_t prev = 0;
    for (int j = 0; j <= peer; j++) {
        cum += g[j];
        size_t b = j == n_peers - 1 ? m : (size_t)floor(cum / sum * (double)m + 0.5);
        if (b > m)
            b = m;
        if (b < prev)
            b = prev;
        *lo = prev;
        *hi = b;
        prev = b;
    }
}

static int shard_dirichlet(const nn_dataset *d, int peer, int n_peers, double alpha, uint64_t seed,
                           int *out, size_t *count)
{
    int n = d->n, k = d->n_classes;
    for (int i = 0; i < n; i++)
        if (d->y[i] < 0 || d->y[i] >= k)
            return -EINVAL;
    /* Group sample indices by class (counting sort keeps each class ascending,
     * so the shuffle below is the only source of order). */
    size_t *start = calloc((size_t)k + 1, sizeof *start);
    int *byclass = malloc((size_t)n * sizeof *byclass);
    double *g = malloc((size_t)n_peers * sizeof *g);
    if (!start || !byclass || !g) {
        free(start);
        free(byclass);
        free(g);
        return -ENOMEM;
    }
    for (int i = 0; i < n; i++)
        start[d->y[i] + 1]++;
    for (int c = 0; c < k; c++)
        start[c + 1] += start[c];
    size_t *fill = calloc((size_t)k, sizeof *fill);
    if (!fill) {
        free(start);
        free(byclass);
        free(g);
        return -ENOMEM;
    }
    for (int i = 0; i < n; i++)
        byclass[start[d->y[i]] + fill[d->y[i]]++] = i;
    free(fill);

    nn_rng r;
    nn_rng_seed(&r, seed, SHARD_STREAM_DIR);
    size_t got = 0;
    for (int c = 0; c < k; c++) {
        size_t m = start[c + 1] - start[c], lo, hi;
        int *cls = byclass + start[c];
        shuffle(cls, m, &r);
        dirichlet_run(&r, alpha, peer, n_peers, g, m, &lo, &hi);
        memcpy(out + got, cls + lo, (hi - lo) * sizeof *out);
        got += hi - lo;
    }
    free(start);
    free(byclass);
    free(g);
    *count = got;
    return 0;
}

int nn_shard_indices(const nn_dataset *d, int peer, int n_peers, double alpha, uint64_t seed,
                     int **idx, int *count)
{
    if (!idx || !count)
        return -EINVAL;
    *idx = NULL;
    *count = 0;
    if (!d || d->n < 0 || (d->n && !d->y) || n_peers < 1 || peer < 0 || peer >= n_peers || isnan(alpha) ||
        isinf(alpha))
        return -EINVAL;
    /* A peer's share is at most all of d; one extra slot keeps *idx non-NULL when empty. */
    int *out = malloc(((size_t)d->n + 1) * sizeof *out);
    if (!out)
        return -ENOMEM;
    size_t got = 0;
    if (alpha <= 0)
        got = shard_iid(d->n, peer, n_peers, seed, out);
    else if (d->n > 0) {
        int rc = shard_dirichlet(d, peer, n_peers, alpha, seed, out, &got);
        if (rc < 0) {
            free(out);
            return rc;
        }
    }
    qsort(out, got, sizeof *out, cmp_int);
    *idx = out;
    *count = (int)got;
    return 0;
}

/* Text is cut in contiguous runs of bytes rather than drawn windows: a window
 * that straddled two peers' runs would be data both of them hold. */
static int shard_text(const nn_dataset *d, int peer, int n_peers, nn_dataset *dst, char *err, size_t errlen)
{
    const size_t lo = (size_t)((unsigned __int128)d->text_len * (unsigned)peer / (unsigned)n_peers);
    const size_t hi = (size_t)((unsigned __int128)d->text_len * (unsigned)(peer + 1) / (unsigned)n_peers);
    char name[64];
    snprintf(name, sizeof name, "peer %d's shard of the text", peer);
    return nn_text_parse(d->text + lo, hi - lo, name, d->w, dst, err, errlen);
}

int nn_dataset_shard(const nn_dataset *d, int peer, int n_peers, double alpha, uint64_t seed, nn_dataset *dst,
                     char *err, size_t errlen)
{
    if (!d || !dst || n_peers < 1 || peer < 0 || peer >= n_peers)
        return -EINVAL;
    if (d->text) {
        if (alpha > 0)
            return nn_data_errf(err, errlen, -EINVAL,
                                "non-iid shards (a Dirichlet alpha) need class labels: text is cut in "
                                "contiguous parts");
        return shard_text(d, peer, n_peers, dst, err, errlen);
    }
    int *idx = NULL, count = 0;
    int rc = nn_shard_indices(d, peer, n_peers, alpha, seed, &idx, &count);
    if (rc == 0)
        rc = nn_dataset_subset(d, idx, count, dst);
    free(idx);
    if (rc < 0)
        nn_data_errf(err, errlen, rc, "peer %d's shard: %s", peer, rc == -ENOMEM ? "out of memory" : "bad split");
    return rc;
}
