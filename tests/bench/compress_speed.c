/* Codec throughput next to memcpy of the same data, measured in the same run
 * (absolute times drift on a shared machine; the ratio to memcpy does not as
 * much). One core. Usage: compress_speed [--sizes 1000000,25000000] [--reps 5]
 *
 * Prints, per codec and size: bytes per element on the wire, encode and
 * decode_add throughput in G elements/s, and encode time / memcpy time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compress/cmp.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *const specs[] = {"none",       "fp16",      "bf16",       "qsgd:16",      "terngrad",
                                    "natural",    "sign",      "topk:0.001", "topk:0.01",    "topk:0.01:sampled",
                                    "randk:0.01", "stc:0.001", "stc:0.01",   "sketch:0.001", "sketch:0.01"};

int main(int argc, char **argv)
{
    size_t sizes[2] = {1000000, 25000000};
    int reps = 5;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--help")) {
            puts("usage: compress_speed [--reps N] [--small]   (--small: 1M floats only)");
            return 0;
        } else if (!strcmp(argv[a], "--reps") && a + 1 < argc)
            reps = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--small"))
            sizes[1] = 0;
        else {
            fprintf(stderr, "compress_speed: unknown argument '%s'\n", argv[a]);
            return 2;
        }
    }
    printf("%-18s %10s %9s %11s %11s %9s\n", "codec", "n", "bytes/el", "enc Gel/s", "dec Gel/s", "enc/memcpy");
    for (int si = 0; si < 2 && sizes[si]; si++) {
        size_t n = sizes[si];
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        srand(1);
        for (size_t i = 0; i < n; i++) /* roughly normal: sum of uniforms */
            x[i] = ((float)rand() + (float)rand() + (float)rand()) / (float)RAND_MAX - 1.5f;
        double t_copy = 1e9;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            memcpy(y, x, n * sizeof *x);
            double dt = now() - t0;
            t_copy = dt < t_copy ? dt : t_copy;
        }
        printf("%-18s %10zu %9s %11.2f %11s %9s\n", "memcpy", n, "4.000", n / t_copy / 1e9, "-", "1.00x");
        for (size_t c = 0; c < sizeof specs / sizeof *specs; c++) {
            cmp_spec s;
            char err[128];
            if (cmp_spec_parse(&s, specs[c], err, sizeof err) < 0) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            uint8_t *msg = malloc(cmp_bound(&s, n));
            void *work = malloc(cmp_work_size(&s, n) + 1);
            double t_enc = 1e9, t_dec = 1e9;
            long len = 0;
            for (int r = 0; r < reps; r++) {
                double t0 = now();
                len = cmp_encode(&s, x, n, (uint64_t)r, work, msg, cmp_bound(&s, n));
                double t1 = now();
                if (len < 0 || cmp_decode_add(msg, (size_t)len, n, 0.5f, y) < 0) {
                    fprintf(stderr, "%s: encode/decode failed\n", specs[c]);
                    return 1;
                }
                double t2 = now();
                t_enc = t1 - t0 < t_enc ? t1 - t0 : t_enc;
                t_dec = t2 - t1 < t_dec ? t2 - t1 : t_dec;
            }
            printf("%-18s %10zu %9.4f %11.2f %11.2f %8.2fx\n", specs[c], n, (double)len / n, n / t_enc / 1e9,
                   n / t_dec / 1e9, t_enc / t_copy);
            free(msg);
            free(work);
        }
        free(x);
        free(y);
    }
    return 0;
}
