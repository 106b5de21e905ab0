/* Training-step throughput of an nn/ sequence model (a byte-level GPT), timed
 * the way a PyTorch loop is: forward + next-token cross-entropy over every
 * position + backward + AdamW step (torch.optim.AdamW's semantics: betas 0.9,
 * 0.999, eps 1e-8, decoupled weight decay 0.01, lr 1e-3).
 * tests/bench/gpt_step_torch.py is the same model and loop in PyTorch and
 * tests/bench/run.sh runs both side by side (the GPT rows of `make bench`).
 *
 *   build/bench/gpt_step --model gpt:4:128:4 --context 64 --batch 32 --threads 1 --seconds 3
 *   tokens_per_second=51234.5 samples_per_second=800.5 steps=... model=gpt:4:128:4 context=64 ... data=brown
 *
 * Data: windows of context + 1 bytes at uniformly drawn offsets of a text
 * buffer (nn_batcher's text batches: x the first T bytes as token ids, y the
 * T that follow), 8 batches gathered before the clock starts and then cycled,
 * so data loading is not timed (torch's side does the same). The buffer is
 * --text FILE (default build/data/brown/brown.txt, `make data`'s Brown corpus)
 * or, when that cannot be read, 1 MiB of deterministic pseudo-random bytes:
 * the speed does not depend on the values (data=brown|file|random says which).
 * The output is ONE line of key=value fields, no spaces inside values, for
 * run.sh to pick apart; messages go to stderr.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn/nn_batch.h"
#include "nn/nn_blas.h"
#include "nn/nn_data.h"
#include "nn/nn_model.h"
#include "nn/nn_optim.h"
#include "tests/bench/bench_args.h"

#define N_BATCHES 8            /* pre-made batches cycled through, as train_step.c */
#define RANDOM_BYTES (1 << 20) /* the fallback buffer */
#define DEFAULT_TEXT "build/data/brown/brown.txt"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpt_step [options]\n"
            "Times forward + next-token cross-entropy + backward + AdamW steps of an nn/\n"
            "sequence model on pre-gathered batches of random text windows; prints one line\n"
            "tokens_per_second=X samples_per_second=Y steps=N seconds=T ... (key=value fields).\n"
            "\n"
            "  --model SPEC        a sequence model spec of nn/MODELS.md or gpt:L:C:H (default gpt:4:128:4)\n"
            "  --context T         tokens per window (default 64)\n"
            "  --batch N           windows per step (default 32)\n"
            "  --threads N         OpenBLAS threads (default 1)\n"
            "  --seconds S         time steps for about S seconds (default 3)\n"
            "  --steps N           time exactly N steps instead (overrides --seconds)\n"
            "  --warmup-steps N    untimed steps first (default 2)\n"
            "  --lr LR             learning rate (default 1e-3)\n"
            "  --weight-decay WD   AdamW's decoupled weight decay (default 0.01)\n"
            "  --text FILE         the text to draw windows from (default " DEFAULT_TEXT ";\n"
            "                      random bytes if it cannot be read)\n"
            "  --seed N            parameter and window seed (default 1)\n"
            "  --describe          print the OpenBLAS configuration, core and threads, and exit\n"
            "  --help              this text\n");
}

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The whole file, or NULL (errno set). */
static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : (1u << 20);
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

int main(int argc, char **argv)
{
    const char *spec = "gpt:4:128:4", *text_path = NULL;
    long batch = 32, context = 64, threads = 1, steps = 0, warmup = 2, seed = 1;
    double seconds = 3.0, lr = 1e-3, wd = 0.01;

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
            fprintf(stderr, "gpt_step: unknown option or missing value: %s\n", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        int rc = 0;
        if (strcmp(a, "--model") == 0)
            spec = v;
        else if (strcmp(a, "--context") == 0)
            rc = parse_long(v, 1, 1 << 16, &context);
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
        else if (strcmp(a, "--weight-decay") == 0)
            rc = parse_double(v, 0.0, 10.0, &wd);
        else if (strcmp(a, "--text") == 0)
            text_path = v;
        else if (strcmp(a, "--seed") == 0)
            rc = parse_long(v, 0, 1L << 62, &seed);
        else {
            fprintf(stderr, "gpt_step: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
        if (rc < 0) {
            fprintf(stderr, "gpt_step: bad value for %s: '%s'\n", a, v);
            return 2;
        }
    }

    nn_blas_set_threads((int)threads);
    const int B = (int)batch, T = (int)context;

    /* The text: the file if it can be read and holds a window, else random bytes. */
    const char *path = text_path ? text_path : DEFAULT_TEXT;
    const char *data = "random";
    size_t len = 0;
    uint8_t *buf = read_file(path, &len);
    if (buf && len >= (size_t)T + 1) {
        data = strstr(path, "brown") ? "brown" : "file";
    } else {
        fprintf(stderr, "gpt_step: %s: %s; using %d pseudo-random bytes\n", path,
                buf ? "shorter than one window" : strerror(errno), RANDOM_BYTES);
        free(buf);
        len = RANDOM_BYTES;
        buf = malloc(len);
        if (!buf) {
            fprintf(stderr, "gpt_step: out of memory\n");
            return 1;
        }
        uint64_t s = 0x9E3779B97F4A7C15ull ^ (uint64_t)seed;
        for (size_t i = 0; i < len; i++) { /* xorshift64* */
            s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
            buf[i] = (uint8_t)((s * 0x2545F4914F6CDD1Dull) >> 56);
        }
    }
    char err[256];
    nn_dataset text = {0};
    if (nn_text_parse(buf, len, path, T, &text, err, sizeof err) < 0) {
        fprintf(stderr, "gpt_step: %s\n", err);
        return 1;
    }
    free(buf);

    /* N_BATCHES batches of random windows, gathered once. */
    nn_batcher bt = {0};
    if (nn_batcher_init(&bt, &text, B, (uint64_t)seed, 0) < 0) {
        fprintf(stderr, "gpt_step: out of memory\n");
        return 1;
    }
    float *bx = malloc((size_t)N_BATCHES * B * T * sizeof(float));
    int *by = malloc((size_t)N_BATCHES * B * T * sizeof(int));
    if (!bx || !by) {
        fprintf(stderr, "gpt_step: out of memory\n");
        return 1;
    }
    for (int k = 0; k < N_BATCHES; k++) {
        int got = 0;
        while (got < B) { /* an epoch's last batch may be short: top up from the next */
            int n = nn_batcher_next(&bt);
            if (n > B - got)
                n = B - got;
            memcpy(bx + ((size_t)k * B + got) * T, bt.x, (size_t)n * T * sizeof(float));
            memcpy(by + ((size_t)k * B + got) * T, bt.y, (size_t)n * T * sizeof(int));
            got += n;
        }
    }
    nn_batcher_free(&bt);

    nn_model m = {0};
    if (nn_model_init(&m, spec, 1, 1, T, 256, B, (uint64_t)seed, err, sizeof err) < 0) {
        fprintf(stderr, "gpt_step: %s\n", err);
        return 1;
    }
    if (!nn_model_is_seq(&m)) {
        fprintf(stderr, "gpt_step: %s is not a sequence model (it must start with embed:C); use train_step\n", spec);
        return 2;
    }
    nn_optimizer opt = {0};
    const nn_optimizer_config oc = {
        .kind = NN_OPT_ADAMW, .weight_decay = (float)wd, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    if (nn_optimizer_init(&opt, m.n_params, &oc) < 0) {
        fprintf(stderr, "gpt_step: out of memory\n");
        return 1;
    }

    long step = 0;
    float loss_first = NAN, loss = NAN;
#define ONE_STEP()                                                                                      \
    do {                                                                                                \
        const size_t k = (size_t)(step % N_BATCHES) * B * T;                                            \
        loss = nn_model_grad(&m, bx + k, by + k, B, NULL);                                              \
        nn_optimizer_step(&opt, m.params, m.grads, (float)lr, m.params);                                \
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
        do {
            ONE_STEP();
            timed++;
        } while ((t1 = now_seconds()) - t0 < seconds);
    }
    const double elapsed = t1 - t0;
    const double sps = elapsed > 0 ? (double)timed * B / elapsed : 0.0;

    printf("tokens_per_second=%.1f samples_per_second=%.2f steps=%ld seconds=%.3f model=%s context=%d batch=%d "
           "threads=%d core=%s params=%zu data=%s opt=adamw loss_after_warmup=%.4f loss_last=%.4f\n",
           sps * T, sps, timed, elapsed, spec, T, B, nn_blas_threads(), nn_blas_core(), m.n_params, data,
           (double)loss_first, (double)loss);

    nn_optimizer_free(&opt);
    nn_model_free(&m);
    nn_dataset_free(&text);
    free(bx);
    free(by);
    return isfinite(loss) ? 0 : 1;
}
