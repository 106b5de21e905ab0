/* The API path's overhead: sgp peer's model, data shard and local step
 * (nn/), but the gossip driven through the public API (peer/lib/sgp.h) as a
 * user's training loop drives it. tests/bench/api_overhead.sh runs it
 * against `sgp peer` with the same settings and compares rounds per second.
 *
 *   api_peer CLUSTER ID EPOCHS CODEC     (model mlp:256, total batch 64, SGD lr 0.1 momentum 0.9)
 *
 * Prints "rounds R seconds S accuracy A" of its own final model.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nn/nn_batch.h"
#include "nn/nn_blas.h"
#include "nn/nn_data.h"
#include "nn/nn_model.h"
#include "nn/nn_optim.h"
#include "peer/lib/sgp.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: api_peer CLUSTER ID EPOCHS CODEC\n");
        return 2;
    }
    nn_blas_set_threads(1);
    char err[512];
    nn_dataset train, test, shard;
    if (nn_data_load(NULL, 0, &train, &test, err, sizeof err) < 0)
        return fprintf(stderr, "api_peer: %s\n", err), 1;
    const int total_batch = 64, epochs = atoi(argv[3]);
    nn_model m;
    if (nn_model_init(&m, "mlp:256", train.c, train.h, train.w, train.n_classes, 256, 1, err, sizeof err) < 0)
        return fprintf(stderr, "api_peer: %s\n", err), 1;
    const long rounds_per_epoch = (train.n + total_batch - 1) / total_batch;
    sgp_options o;
    sgp_options_init(&o);
    o.cluster = argv[1], o.id = atoi(argv[2]), o.codec = argv[4];
    o.rounds = rounds_per_epoch * epochs, o.rounds_per_epoch = rounds_per_epoch;
    sgp_peer *p;
    double t0 = now();
    if (sgp_open(&p, &o, m.params, m.n_params, err, sizeof err) < 0)
        return fprintf(stderr, "api_peer: %s\n", err), 1;
    sgp_status s;
    sgp_status_get(p, &s);
    int *idx, count;
    nn_shard_indices(&train, s.id, s.peers, 0, 1, &idx, &count);
    nn_dataset_subset(&train, idx, count, &shard);
    nn_batcher b;
    nn_sgd opt;
    nn_batcher_init(&b, &shard, total_batch / s.peers, 1, (uint64_t)s.id + 1);
    nn_sgd_init(&opt, m.n_params, 0.9f, 0.0f, 0);
    int rc, correct;
    do {
        int B = nn_batcher_next(&b);
        nn_model_grad(&m, b.x, b.y, B, &correct);
        nn_sgd_step(&opt, m.params, m.grads, 0.1f);
        rc = sgp_step(p, m.params, m.n_params);
    } while (rc == 0);
    if (rc < 0)
        return fprintf(stderr, "api_peer: %s\n", sgp_error(p)), 1;
    double t = now() - t0;
    sgp_status_get(p, &s);
    sgp_close(p);
    float loss, acc;
    nn_model_evaluate(&m, m.params, &test, &loss, &acc);
    printf("rounds %ld seconds %.3f accuracy %.2f\n", s.round, t, 100 * acc);
    free(idx);
    nn_batcher_free(&b), nn_sgd_free(&opt), nn_model_free(&m);
    nn_dataset_free(&shard), nn_dataset_free(&train), nn_dataset_free(&test);
    return 0;
}
