/* A training program of its own that gossips through libsgp: softmax
 * regression on MNIST (IDX files, gzipped or not), written from scratch with
 * nothing of sgp's but sgp.h. Alone it trains on all the data; with
 * --cluster it is one peer of a run and trains on its shard (every n-th
 * example), taking its steps between sgp_step calls.
 *
 *   build/examples/softmax                                   # alone
 *   build/sgp launch --peers 4 --prepare --run-dir run       # keys and cluster file
 *   for i in 0 1 2 3; do build/examples/softmax --cluster run/cluster.conf --id $i --codec stc:0.1 & done
 *
 * Prints one line per epoch and, at the end, "test accuracy A%" of its own
 * final model.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "sgp.h"

#define PIXELS 784
#define CLASSES 10

typedef struct data {
    int n;
    float *x;     /* n x PIXELS, in [0, 1] */
    uint8_t *y;
} data;

/* An IDX file (gzip or plain: zlib reads both): its items after the header. */
static uint8_t *read_idx(const char *path, int dims, int *count)
{
    gzFile f = gzopen(path, "rb");
    if (!f) {
        fprintf(stderr, "softmax: cannot open %s: %s\n", path, strerror(errno));
        return NULL;
    }
    uint8_t head[16];
    int hlen = 4 + 4 * dims;
    uint8_t *items = NULL;
    if (gzread(f, head, (unsigned)hlen) == hlen && head[2] == 8 && head[3] == dims) {
        long n = (long)head[4] << 24 | head[5] << 16 | head[6] << 8 | head[7];
        long size = n * (dims == 3 ? PIXELS : 1);
        items = malloc((size_t)size);
        if (items && gzread(f, items, (unsigned)size) == size)
            *count = (int)n;
        else
            free(items), items = NULL;
    }
    if (!items)
        fprintf(stderr, "softmax: %s is not an IDX file of %d dimensions\n", path, dims);
    gzclose(f);
    return items;
}

static int load(data *d, const char *dir, const char *images, const char *labels)
{
    char path[4096];
    int n_images = 0, n_labels = 0;
    snprintf(path, sizeof path, "%s/%s", dir, images);
    uint8_t *px = read_idx(path, 3, &n_images);
    snprintf(path, sizeof path, "%s/%s", dir, labels);
    d->y = read_idx(path, 1, &n_labels);
    if (!px || !d->y || n_images != n_labels) {
        free(px);
        return -1;
    }
    d->n = n_images;
    d->x = malloc((size_t)d->n * PIXELS * sizeof(float));
    for (long i = 0; d->x && i < (long)d->n * PIXELS; i++)
        d->x[i] = px[i] / 255.0f;
    free(px);
    return d->x ? 0 : -1;
}

/* Class probabilities of one example under params = [W (CLASSES x PIXELS), b]. */
static void forward(const float *params, const float *x, float *p)
{
    float max = -INFINITY;
    for (int c = 0; c < CLASSES; c++) {
        const float *w = params + c * PIXELS;
        float s = params[CLASSES * PIXELS + c];
        for (int j = 0; j < PIXELS; j++)
            s += w[j] * x[j];
        p[c] = s;
        max = s > max ? s : max;
    }
    float sum = 0;
    for (int c = 0; c < CLASSES; c++)
        sum += p[c] = expf(p[c] - max);
    for (int c = 0; c < CLASSES; c++)
        p[c] /= sum;
}

static float accuracy(const float *params, const data *d)
{
    int right = 0;
    float p[CLASSES];
    for (int i = 0; i < d->n; i++) {
        forward(params, d->x + (size_t)i * PIXELS, p);
        int best = 0;
        for (int c = 1; c < CLASSES; c++)
            best = p[c] > p[best] ? c : best;
        right += best == d->y[i];
    }
    return (float)right / (float)d->n;
}

/* One SGD step on a mini-batch of the shard: params -= lr * mean gradient. */
static float sgd_step(float *params, float *grad, const data *d, const int *batch, int b, float lr)
{
    size_t n = CLASSES * PIXELS + CLASSES;
    memset(grad, 0, n * sizeof *grad);
    float p[CLASSES], loss = 0;
    for (int k = 0; k < b; k++) {
        const float *x = d->x + (size_t)batch[k] * PIXELS;
        forward(params, x, p);
        int y = d->y[batch[k]];
        loss -= logf(p[y] > 1e-30f ? p[y] : 1e-30f);
        for (int c = 0; c < CLASSES; c++) {
            float e = p[c] - (c == y);
            for (int j = 0; j < PIXELS; j++)
                grad[c * PIXELS + j] += e * x[j];
            grad[CLASSES * PIXELS + c] += e;
        }
    }
    for (size_t i = 0; i < n; i++)
        params[i] -= lr * grad[i] / (float)b;
    return loss / (float)b;
}

static uint64_t next_random(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static void usage(void)
{
    puts("usage: softmax [--cluster FILE [--id I] [--codec SPEC] [--checkpoint FILE [--resume]]\n"
         "               [--round-deadline S]] [--data DIR] [--epochs E] [--batch B] [--lr LR]\n\n"
         "Softmax regression on MNIST (DIR holds train-images-idx3-ubyte.gz, ...;\n"
         "default nn/data). Alone it uses all the data; with --cluster it is one\n"
         "peer of an sgp run (B is the total batch of all peers, as in sgp sim).\n"
         "--round-deadline S: how long a round waits for a late neighbour [derived].");
}

int main(int argc, char **argv)
{
    const char *cluster = NULL, *codec = NULL, *dir = "nn/data", *checkpoint = NULL;
    int id = -1, epochs = 5, total_batch = 64, resume = 0;
    float lr = 0.1f;
    double round_deadline = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return usage(), 0;
        if (!strcmp(a, "--resume")) {
            resume = 1;
            continue;
        }
        if (!v)
            return fprintf(stderr, "softmax: %s needs a value (see --help)\n", a), 2;
        if (!strcmp(a, "--cluster"))
            cluster = v;
        else if (!strcmp(a, "--id"))
            id = atoi(v);
        else if (!strcmp(a, "--codec"))
            codec = v;
        else if (!strcmp(a, "--checkpoint"))
            checkpoint = v;
        else if (!strcmp(a, "--data"))
            dir = v;
        else if (!strcmp(a, "--epochs"))
            epochs = atoi(v);
        else if (!strcmp(a, "--batch"))
            total_batch = atoi(v);
        else if (!strcmp(a, "--lr"))
            lr = strtof(v, NULL);
        else if (!strcmp(a, "--round-deadline"))
            round_deadline = strtod(v, NULL);
        else
            return fprintf(stderr, "softmax: unknown option %s (see --help)\n", a), 2;
        i++;
    }
    if (epochs < 1 || total_batch < 1 || !(lr > 0))
        return fprintf(stderr, "softmax: --epochs, --batch and --lr must be positive\n"), 2;
    data train = {0}, test = {0};
    if (load(&train, dir, "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz") < 0 ||
        load(&test, dir, "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz") < 0)
        return 1;

    const size_t n = CLASSES * PIXELS + CLASSES;
    float *params = calloc(n, sizeof *params), *grad = malloc(n * sizeof *grad);
    const long rounds_per_epoch = (train.n + total_batch - 1) / total_batch;
    sgp_peer *peer = NULL;
    int me = 0, peers = 1;
    if (cluster) {
        sgp_options o;
        sgp_options_init(&o);
        o.cluster = cluster, o.id = id, o.codec = codec;
        o.rounds = rounds_per_epoch * epochs, o.rounds_per_epoch = rounds_per_epoch;
        o.checkpoint = checkpoint, o.resume = resume, o.round_deadline = round_deadline;
        char err[512];
        if (sgp_open(&peer, &o, params, n, err, sizeof err) < 0)
            return fprintf(stderr, "softmax: %s\n", err), 1;
        sgp_status s;
        sgp_status_get(peer, &s);
        me = s.id, peers = s.peers;
        if (resume)
            printf("peer %d: resumed at round %ld\n", me, s.start_round);
    }
    /* This peer's shard: every peers-th example; its share of the batch. */
    int shard_n = 0, *shard = malloc((size_t)train.n * sizeof *shard);
    for (int i = me; i < train.n; i += peers)
        shard[shard_n++] = i;
    const int batch = total_batch / peers > 0 ? total_batch / peers : 1;
    uint64_t rng = 0x5eed0000ULL + (uint64_t)me;
    int pos = shard_n, rc = 0;
    float loss = 0;
    for (long round = 0;; round++) {
        if (pos + batch > shard_n) { /* a new pass over the shard, freshly shuffled */
            for (int i = shard_n - 1; i > 0; i--) {
                int j = (int)(next_random(&rng) % (uint64_t)(i + 1)), t = shard[i];
                shard[i] = shard[j], shard[j] = t;
            }
            pos = 0;
        }
        loss += sgd_step(params, grad, &train, shard + pos, batch, lr);
        pos += batch;
        if (peer) {
            rc = sgp_step(peer, params, n);
            if (rc < 0) {
                fprintf(stderr, "softmax: %s\n", sgp_error(peer));
                break;
            }
        }
        if ((round + 1) % rounds_per_epoch == 0) {
            printf("peer %d: epoch %ld  loss %.4f  test %.2f%%\n", me, (round + 1) / rounds_per_epoch,
                   loss / (float)rounds_per_epoch, 100 * accuracy(params, &test));
            fflush(stdout);
            loss = 0;
            /* The gossip state at this round boundary; plain SGD has no state of
             * its own to save beside it (momentum or Adam state would go here). */
            if (peer && checkpoint && rc == 0 && sgp_checkpoint(peer) < 0)
                fprintf(stderr, "softmax: %s\n", sgp_error(peer));
        }
        if (peer ? rc == SGP_DONE : round + 1 == rounds_per_epoch * epochs)
            break;
    }
    if (peer) {
        sgp_status s;
        sgp_status_get(peer, &s);
        printf("peer %d: %ld rounds, %ld steps, weight %.4f, %.2f MB sent, %ld late marks, %ld neighbours lost\n", me,
               s.round, s.local_steps, s.weight, s.bytes_sent / 1e6, s.late_marks, s.neighbours_lost);
        if (sgp_close(peer) < 0 && rc == 0)
            rc = -1;
    }
    printf("peer %d: test accuracy %.2f%%\n", me, 100 * accuracy(params, &test));
    free(params), free(grad), free(shard);
    free(train.x), free(train.y), free(test.x), free(test.y);
    return rc < 0 ? 1 : 0;
}
