/* Training-step throughput of one nn/ model, timed the way a PyTorch loop is:
 * forward + softmax cross-entropy + backward + SGD step (momentum 0.9, no
 * weight decay, not Nesterov: torch.optim.SGD(momentum=0.9)'s semantics).
 * tests/bench/train_step_torch.py is the same loop in PyTorch and
 * tests/bench/run.sh runs both side by side.
 *
 *   build/bench/train_step --model mlp:256,256 --batch 64 --threads 1 --seconds 3
 *   samples_per_second=91234.5 steps=4277 seconds=3.000 model=mlp:256,256 batch=64 threads=1 core=SkylakeX ...
 *
 * Batches are gathered from the embedded MNIST training set before the clock
 * starts and then cycled, so data loading is not timed (torch's side does the
 * same). The output is ONE line of key=value fields, no spaces inside values,
 * for run.sh to pick apart; messages go to stderr.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn/nn_blas.h"
#include "nn/nn_data.h"
#include "nn/nn_model.h"
#include "nn/nn_optim.h"
#include "tests/bench/bench_args.h"

#define N_BATCHES 8 /* pre-made batches cycled through: more than one, so no batch stays in cache by accident */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: train_step [options]\n"
            "Times forward + cross-entropy + backward + SGD(momentum 0.9) steps of an nn/ model\n"
            "on pre-gathered batches of the embedded MNIST set; prints one line\n"
            "samples_per_second=X steps=N seconds=T ... (key=value fields).\n"
            "\n"
            "  --model SPEC        a spec of nn/MODELS.md or a preset (default mlp:256,256)\n"
            "  --batch N           samples per step (default 64)\n"
            "  --threads N         OpenBLAS threads (default 1)\n"
            "  --seconds S         time steps for about S seconds (default 3)\n"
            "  --steps N           time exactly N steps instead (overrides --seconds)\n"
            "  --warmup-steps N    untimed steps first (default 20)\n"
            "  --lr LR             learning rate (default 0.01)\n"
            "  --seed N            parameter seed (default 1)\n"
            "  --describe          print the OpenBLAS configuration, core and threads, and exit\n"
            "  --help              this text\n"
            "\n"
            "OpenBLAS reads OPENBLAS_CORETYPE (kernel choice) at load time; the core it\n"
            "picked is printed as core=NAME.\n");
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    const char *spec = "mlp:256,256";
    long batch = 64, threads = 1, steps = 0, warmup = 20, seed = 1;
    double seconds = 3.0, lr = 0.01;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--describe") == 0) {
            printf("%s\n", nn_blas_describe());
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "train_step: unknown option or missing value: %s\n", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        int rc = 0;
        if (strcmp(a, "--model") == 0)
            spec = v;
        else if (strcmp(a, "--batch") == 0)
            rc = parse_long(v, 1, 1 << 16, &batch);
        else if (strcmp(a, "--threads") == 0)
            rc = parse_long(v, 1, 1024, &threads);
        else if (strcmp(a, "--seconds") == 0)
            rc = parse_double(v, 0.001, 3600.0, &seconds);
        else if (strcmp(a, "--steps") == 0)
            rc = parse_long(v, 1, 1L << 40, &steps);
        else if (strcmp(a, "--warmup-steps") == 0)
            rc = parse_long(v, 0, 1L << 40, &warmup);
        else if (strcmp(a, "--lr") == 0)
            rc = parse_double(v, 0.0, 10.0, &lr);
        else if (strcmp(a, "--seed") == 0)
            rc = parse_long(v, 0, 1L << 62, &seed);
        else {
            fprintf(stderr, "train_step: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
        if (rc < 0) {
            fprintf(stderr, "train_step: bad value for %s: '%s'\n", a, v);
            return 2;
        }
    }

    nn_blas_set_threads((int)threads);

    char err[256];
    nn_dataset train = {0}, test = {0};
    if (nn_data_embedded(&train, &test, err, sizeof err) < 0) {
        fprintf(stderr, "train_step: %s\n", err);
        return 1;
    }
    const size_t dim = nn_dataset_dim(&train);
    const int B = (int)batch;

    /* N_BATCHES consecutive windows of the training set (wrapping round), gathered once. */
    float *bx = malloc((size_t)N_BATCHES * B * dim * sizeof(float));
    int *by = malloc((size_t)N_BATCHES * B * sizeof(int));
    if (!bx || !by) {
        fprintf(stderr, "train_step: out of memory\n");
        return 1;
    }
    for (size_t s = 0; s < (size_t)N_BATCHES * B; s++) {
        size_t src = s % (size_t)train.n;
        memcpy(bx + s * dim, train.x + src * dim, dim * sizeof(float));
        by[s] = train.y[src];
    }

    nn_model m = {0};
    if (nn_model_init(&m, spec, train.c, train.h, train.w, train.n_classes, B, (uint64_t)seed, err, sizeof err) <
        0) {
        fprintf(stderr, "train_step: %s\n", err);
        return 1;
    }
    nn_sgd opt = {0};
    if (nn_sgd_init(&opt, m.n_params, 0.9f, 0.0f, 0) < 0) {
        fprintf(stderr, "train_step: out of memory\n");
        return 1;
    }

    long step = 0;
    float loss_first = NAN, loss = NAN;
#define ONE_STEP()                                                                                      \
    do {                                                                                                \
        const size_t k = (size_t)(step % N_BATCHES) * B;                                                \
        loss = nn_model_grad(&m, bx + k * dim, by + k, B, NULL);                                        \
        nn_sgd_step(&opt, m.params, m.grads, (float)lr);                                                \
        step++;                                                                                         \
    } while (0)

    for (long i = 0; i < warmup; i++)
        ONE_STEP();
    loss_first = loss;

    long timed = 0;
    const double t0 = now_seconds();
    double t1 = t0;
    if (steps > 0) {
        for (; timed < steps; timed++)
            ONE_STEP();
        t1 = now_seconds();
    } else {
        /* Reading the clock costs ~20 ns, far below one step: check it every
         * step. At least one step is timed, so the rate is never 0/0. */
        do {
            ONE_STEP();
            timed++;
        } while ((t1 = now_seconds()) - t0 < seconds);
    }
    const double elapsed = t1 - t0;

    printf("samples_per_second=%.1f steps=%ld seconds=%.3f model=%s batch=%d threads=%d core=%s params=%zu "
           "loss_after_warmup=%.4f loss_last=%.4f\n",
           elapsed > 0 ? (double)timed * B / elapsed : 0.0, timed, elapsed, spec, B, nn_blas_threads(),
           nn_blas_core(), m.n_params, (double)loss_first, (double)loss);

    nn_sgd_free(&opt);
    nn_model_free(&m);
    nn_dataset_free(&train);
    nn_dataset_free(&test);
    free(bx);
    free(by);
    return isfinite(loss) ? 0 : 1;
}
