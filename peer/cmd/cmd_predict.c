/* sgp predict: a saved model's classes and probabilities for images or rows
 * given as files (IDX, PGM, CSV: nn_inputs_load). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_blas.h"
#include "nn/nn_data.h"
#include "nn/nn_model.h"
#include "peer/cmd/cli.h"
#include "peer/cmd/commands.h"
#include "peer/store/modelfile.h"

static const char *CMD = "sgp predict";

static void help(void)
{
    fputs("usage: sgp predict --model-file FILE [OPTIONS] INPUT...\n\n"
          "Classify inputs with a saved model: one line per input with the predicted\n"
          "class and its probability, then the next most likely classes.\n"
          "Each INPUT is IDX images (raw or .gz, as MNIST's t10k-images-idx3-ubyte), a PGM\n"
          "image (P2 or P5; `convert in.png -colorspace gray out.pgm` makes one), or a CSV\n"
          "file of rows of C*H*W values in [0, 1] (or a label and the values).\n\n"
          "  --model-file FILE     the model (safetensors, peer/store/MODELFILE.md)\n"
          "  --model SPEC          the architecture, for a file that records none\n"
          "  --top K               classes shown per input [3]\n"
          "  --csv                 CSV instead: input, index, label (-1 unknown), class, then every\n"
          "                        class's probability\n"
          "  --threads N           OpenBLAS threads [1]\n"
          "  -h, --help            this text\n",
          stdout);
}

enum { P_FILE = 1, P_MODEL, P_TOP, P_CSV, P_THREADS };

typedef struct predict_opts {
    const char *file, *spec;
    long top, threads;
    int csv;
} predict_opts;

static int parse(int argc, char **argv, predict_opts *o)
{
    static const struct option opts[] = {{"model-file", required_argument, 0, P_FILE},
                                         {"model", required_argument, 0, P_MODEL},
                                         {"top", required_argument, 0, P_TOP},
                                         {"csv", no_argument, 0, P_CSV},
                                         {"threads", required_argument, 0, P_THREADS},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    *o = (predict_opts){.top = 3, .threads = 1};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'h':
            help();
            return -1;
        case P_FILE: o->file = optarg; break;
        case P_MODEL: o->spec = optarg; break;
        case P_CSV: o->csv = 1; break;
        case P_TOP:
            if (cli_long(CMD, "--top", optarg, 1, 1000, &o->top))
                return CLI_USAGE;
            break;
        case P_THREADS:
            if (cli_long(CMD, "--threads", optarg, 1, 256, &o->threads))
                return CLI_USAGE;
            break;
        default:
            return cli_getopt_error(CMD, c, argv);
        }
    }
    if (!o->file)
        return cli_usage(CMD, "--model-file FILE is required");
    if (optind >= argc)
        return cli_usage(CMD, "no INPUT to classify");
    return 0;
}

static void print_text(const char *input, const nn_dataset *d, int i, int K, int label, const float *p, long top)
{
    if (d->n > 1)
        printf("%s[%d]: ", input, i);
    else
        printf("%s: ", input);
    printf("%d (%.2f%%)", label, 100.0 * p[label]);
    /* the next most likely: selection by repeated scans (K is small) */
    float last = p[label];
    int last_k = label;
    for (long t = 1; t < top && t < K; t++) {
        int best = -1;
        for (int k = 0; k < K; k++) {
            const int after = p[k] < last || (p[k] == last && k > last_k);
            if (k != label && after && (best < 0 || p[k] > p[best]))
                best = k;
        }
        if (best < 0)
            break;
        printf("%s %d (%.2f%%)", t == 1 ? "  then" : ",", best, 100.0 * p[best]);
        last = p[best], last_k = best;
    }
    if (d->y[i] >= 0)
        printf("  [label %d%s]", d->y[i], d->y[i] == label ? "" : ", wrong");
    putchar('\n');
}

int cmd_predict(int argc, char **argv)
{
    predict_opts o;
    int status = parse(argc, argv, &o);
    if (status)
        return status < 0 ? 0 : status;
    nn_blas_set_threads((int)o.threads);
    char err[1024];
    nn_model m = {0};
    if (modelfile_load(o.file, o.spec, NN_EVAL_ONLY, &m, NULL, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        return 1;
    }
    if (nn_model_is_seq(&m)) {
        fprintf(stderr, "%s: %s: a model of '%s' is a language model: generate text with "
                "'sgp sample --model-file %s'\n",
                CMD, o.file, m.spec, o.file);
        nn_model_free(&m);
        return 1;
    }
    const int K = m.n_classes;
    if (o.csv) {
        printf("input,index,label,class");
        for (int k = 0; k < K; k++)
            printf(",p%d", k);
        putchar('\n');
    }
    status = 0;
    for (int a = optind; a < argc; a++) {
        nn_dataset d;
        if (nn_inputs_load(argv[a], m.in_c, m.in_h, m.in_w, &d, err, sizeof err) < 0) {
            fprintf(stderr, "%s: %s\n", CMD, err);
            status = 1;
            continue; /* the other inputs are still worth their answers */
        }
        int *label = malloc((size_t)d.n * sizeof *label);
        float *probs = malloc((size_t)d.n * K * sizeof *probs);
        if (!label || !probs) {
            fprintf(stderr, "%s: %s: out of memory\n", CMD, argv[a]);
            status = 1;
        } else {
            nn_model_predict(&m, d.x, d.n, label, probs);
            for (int i = 0; i < d.n; i++) {
                const float *p = probs + (size_t)i * K;
                if (!o.csv) {
                    print_text(argv[a], &d, i, K, label[i], p, o.top);
                    continue;
                }
                printf("%s,%d,%d,%d", argv[a], i, d.y[i], label[i]);
                for (int k = 0; k < K; k++)
                    printf(",%.6g", p[k]);
                putchar('\n');
            }
        }
        free(label);
        free(probs);
        nn_dataset_free(&d);
    }
    nn_model_free(&m);
    if (fflush(stdout) != 0)
        status = 1;
    return status;
}
