/* sgp sample: text from a saved byte-level language model (gpt:L:C:H), one
 * byte at a time, or the next byte's probabilities after a prompt. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_blas.h"
#include "nn/nn_model.h"
#include "nn/nn_rng.h"
#include "peer/cmd/cli.h"
#include "peer/cmd/commands.h"
#include "peer/store/modelfile.h"

static const char *CMD = "sgp sample";

static void help(void)
{
    fputs("usage: sgp sample --model-file FILE [OPTIONS]\n\n"
          "Generate text with a saved language model (sgp train --model gpt:L:C:H --data text:FILE\n"
          "--save-model FILE): writes the prompt, then each byte drawn from the model's\n"
          "distribution given the last `context` bytes before it.\n\n"
          "  --model-file FILE     the model (safetensors, peer/store/MODELFILE.md)\n"
          "  --prompt TEXT         the bytes to continue [a newline]\n"
          "  --tokens N            bytes to generate [200]\n"
          "  --temperature T       logits are divided by T before the softmax; 0: always the most\n"
          "                        likely byte [1]\n"
          "  --top-k K             draw only among the K most likely bytes; 0: all [0]\n"
          "  --seed S              of the random draws: the same seed, the same text [1]\n"
          "  --probs               instead, the model's probability of each next byte after the\n"
          "                        prompt, one \"BYTE PROBABILITY\" line per byte (no temperature\n"
          "                        or top-k)\n"
          "  -h, --help            this text\n",
          stdout);
}

enum { S_FILE = 1, S_PROMPT, S_TOKENS, S_TEMP, S_TOPK, S_SEED, S_PROBS };

typedef struct sample_opts {
    const char *file, *prompt;
    long tokens, top_k;
    double temperature;
    uint64_t seed;
    int probs;
} sample_opts;

static int parse(int argc, char **argv, sample_opts *o)
{
    static const struct option opts[] = {
        {"model-file", required_argument, 0, S_FILE}, {"prompt", required_argument, 0, S_PROMPT},
        {"tokens", required_argument, 0, S_TOKENS},   {"temperature", required_argument, 0, S_TEMP},
        {"top-k", required_argument, 0, S_TOPK},      {"seed", required_argument, 0, S_SEED},
        {"probs", no_argument, 0, S_PROBS},           {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    *o = (sample_opts){.prompt = "\n", .tokens = 200, .temperature = 1.0, .seed = 1};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'h':
            help();
            return -1;
        case S_FILE: o->file = optarg; break;
        case S_PROMPT: o->prompt = optarg; break;
        case S_PROBS: o->probs = 1; break;
        case S_TOKENS:
            if (cli_long(CMD, "--tokens", optarg, 0, 1L << 30, &o->tokens))
                return CLI_USAGE;
            break;
        case S_TEMP:
            if (cli_double(CMD, "--temperature", optarg, 0, 1000, &o->temperature))
                return CLI_USAGE;
            break;
        case S_TOPK:
            if (cli_long(CMD, "--top-k", optarg, 0, 1L << 20, &o->top_k))
                return CLI_USAGE;
            break;
        case S_SEED:
            if (cli_u64(CMD, "--seed", optarg, &o->seed))
                return CLI_USAGE;
            break;
        default:
            return cli_getopt_error(CMD, c, argv);
        }
    }
    if (optind < argc)
        return cli_usage(CMD, "unexpected argument '%s'", argv[optind]);
    if (!o->file)
        return cli_usage(CMD, "--model-file FILE is required");
    if (!*o->prompt) /* no start token: the first byte needs one before it */
        return cli_usage(CMD, "--prompt is empty: give at least one byte to continue");
    return 0;
}

/* The logits of the byte after text[0..len) (len > 0): its last min(len, T)
 * bytes as positions 0.. of one window; the positions after them, padding,
 * cannot change these (the attention is causal). */
static const float *next_logits(nn_model *m, float *window, const unsigned char *text, size_t len)
{
    const size_t T = (size_t)m->tokens, n = len < T ? len : T;
    for (size_t t = 0; t < T; t++)
        window[t] = t < n ? (float)text[len - n + t] : 0.0f;
    return nn_model_forward(m, window, 1) + (n - 1) * (size_t)m->n_classes;
}

typedef struct ranked {
    float logit;
    int token;
    double weight;
} ranked;

static int by_logit(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit < y->logit ? 1 : -1;
    return x->token - y->token; /* ties: the lower byte first, as arg-max */
}

/* A byte drawn from softmax(logits / temperature) over the top_k largest
 * (all when 0); temperature 0: the first largest. */
static int draw(const float *logits, int K, const sample_opts *o, nn_rng *r, ranked *rank)
{
    for (int k = 0; k < K; k++)
        rank[k] = (ranked){logits[k], k, 0.0};
    qsort(rank, (size_t)K, sizeof *rank, by_logit);
    const int keep = o->top_k > 0 && o->top_k < K ? (int)o->top_k : K;
    if (o->temperature == 0.0 || keep == 1)
        return rank[0].token;
    double sum = 0.0;
    for (int k = 0; k < keep; k++)
        sum += rank[k].weight = exp(((double)rank[k].logit - rank[0].logit) / o->temperature);
    const double u = nn_rng_uniform_d(r) * sum;
    double acc = 0.0;
    for (int k = 0; k < keep - 1; k++)
        if (u < (acc += rank[k].weight))
            return rank[k].token;
    return rank[keep - 1].token;
}

int cmd_sample(int argc, char **argv)
{
    sample_opts o;
    int status = parse(argc, argv, &o);
    if (status)
        return status < 0 ? 0 : status;
    nn_blas_set_threads(1);
    char err[1024];
    nn_model m = {0};
    if (modelfile_load(o.file, NULL, 1, &m, NULL, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        return 1;
    }
    if (!nn_model_is_seq(&m) || m.n_classes > 256) {
        fprintf(stderr,
                "%s: %s: a model of '%s' is not a language model (sgp sample needs one that starts with embed, "
                "e.g. gpt:L:C:H)\n",
                CMD, o.file, m.spec);
        nn_model_free(&m);
        return 1;
    }
    const int K = m.n_classes;
    const size_t plen = strlen(o.prompt);
    unsigned char *text = malloc(plen + (size_t)o.tokens);
    float *window = malloc((size_t)m.tokens * sizeof *window);
    ranked *rank = malloc((size_t)K * sizeof *rank);
    status = 1;
    if (!text || !window || !rank) {
        fprintf(stderr, "%s: out of memory\n", CMD);
        goto out;
    }
    memcpy(text, o.prompt, plen);
    if (o.probs) {
        const float *z = next_logits(&m, window, text, plen);
        float zmax = z[0];
        for (int k = 1; k < K; k++)
            zmax = z[k] > zmax ? z[k] : zmax;
        double sum = 0.0;
        for (int k = 0; k < K; k++)
            sum += exp((double)z[k] - zmax);
        for (int k = 0; k < K; k++)
            printf("%d %.9g\n", k, exp((double)z[k] - zmax) / sum);
    } else {
        nn_rng r;
        nn_rng_seed(&r, o.seed, 0x73616d706c65ULL); /* "sample" */
        fwrite(text, 1, plen, stdout);
        for (size_t len = plen; len < plen + (size_t)o.tokens; len++) {
            text[len] = (unsigned char)draw(next_logits(&m, window, text, len), K, &o, &r, rank);
            putchar(text[len]);
            fflush(stdout); /* a byte at a time, as it is made */
        }
    }
    status = fflush(stdout) != 0 || ferror(stdout) ? 1 : 0;
out:
    free(text);
    free(window);
    free(rank);
    nn_model_free(&m);
    return status;
}
