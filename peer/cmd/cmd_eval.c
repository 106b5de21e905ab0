/* sgp eval: a saved model (peer/store/modelfile.h) on a data set: accuracy,
 * loss, per-class accuracy and the confusion matrix. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_blas.h"
#include "nn/nn_data.h"
#include "nn/nn_model.h"
#include "peer/cmd/cli.h"
#include "peer/cmd/commands.h"
#include "peer/core/memory.h"
#include "peer/store/json.h"
#include "peer/store/modelfile.h"

static const char *CMD = "sgp eval";

static void help(void)
{
    fputs("usage: sgp eval --model-file FILE [--data SPEC] [OPTIONS]\n\n"
          "Evaluate a saved model (sgp train/sim/peer/launch --save-model) on a data set:\n"
          "accuracy, mean cross-entropy loss, accuracy per class and the confusion matrix.\n\n"
          "  --model-file FILE     the model (safetensors, peer/store/MODELFILE.md)\n"
          "  --data SPEC           as for sgp train [the data the file says it was trained on]\n"
          "  --split test|train    which part of the data [test]\n"
          "  --limit N             only the first N samples [all]\n"
          "  --model SPEC          the architecture, for a file that records none\n"
          "  --predictions FILE    CSV: index, label, predicted class, then each class's probability\n"
          "  --summary FILE        JSON: accuracy, loss, samples, per-class accuracy, confusion matrix\n"
          "  --threads N           OpenBLAS threads [1]\n"
          "  -h, --help            this text\n",
          stdout);
}

enum { E_FILE = 1, E_DATA, E_SPLIT, E_LIMIT, E_MODEL, E_PRED, E_SUMMARY, E_THREADS };

typedef struct eval_opts {
    const char *file, *data, *spec, *predictions, *summary;
    int train_split;
    long limit, threads;
} eval_opts;

static int parse(int argc, char **argv, eval_opts *o)
{
    static const struct option opts[] = {
        {"model-file", required_argument, 0, E_FILE}, {"data", required_argument, 0, E_DATA},
        {"split", required_argument, 0, E_SPLIT},     {"limit", required_argument, 0, E_LIMIT},
        {"model", required_argument, 0, E_MODEL},     {"predictions", required_argument, 0, E_PRED},
        {"summary", required_argument, 0, E_SUMMARY}, {"threads", required_argument, 0, E_THREADS},
        {"help", no_argument, 0, 'h'},                {0, 0, 0, 0}};
    *o = (eval_opts){.threads = 1};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'h':
            help();
            return -1;
        case E_FILE: o->file = optarg; break;
        case E_DATA: o->data = optarg; break;
        case E_MODEL: o->spec = optarg; break;
        case E_PRED: o->predictions = optarg; break;
        case E_SUMMARY: o->summary = optarg; break;
        case E_SPLIT:
            if (strcmp(optarg, "test") && strcmp(optarg, "train"))
                return cli_usage(CMD, "--split expects test or train, got '%s'", optarg);
            o->train_split = !strcmp(optarg, "train");
            break;
        case E_LIMIT:
            if (cli_long(CMD, "--limit", optarg, 1, 1L << 30, &o->limit))
                return CLI_USAGE;
            break;
        case E_THREADS:
            if (cli_long(CMD, "--threads", optarg, 1, 256, &o->threads))
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
    return 0;
}

typedef struct eval_result {
    int n, K;
    long correct;
    double loss;
    long long *confusion; /* [K][K]: true class, predicted class */
} eval_result;

static int write_predictions(const char *path, const nn_dataset *d, int n, int K, const int *pred, const float *probs)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    fputs("index,label,predicted", f);
    for (int k = 0; k < K; k++)
        fprintf(f, ",p%d", k);
    fputc('\n', f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%d,%d,%d", i, d->y[i], pred[i]);
        for (int k = 0; k < K; k++)
            fprintf(f, ",%.9g", probs[(size_t)i * K + k]);
        fputc('\n', f);
    }
    int bad = ferror(f);
    return fclose(f) != 0 || bad ? -EIO : 0;
}

static void print_report(const eval_result *r, FILE *out)
{
    fprintf(out, "accuracy %.2f%% (%ld of %d)  loss %.4f\n", 100.0 * r->correct / r->n, r->correct, r->n, r->loss);
    fputs("\nconfusion matrix (rows: true class, columns: predicted)\n      ", out);
    for (int k = 0; k < r->K; k++)
        fprintf(out, " %6d", k);
    fputs("  accuracy\n", out);
    for (int t = 0; t < r->K; t++) {
        long long row = 0;
        fprintf(out, "%5d ", t);
        for (int k = 0; k < r->K; k++)
            fprintf(out, " %6lld", r->confusion[(size_t)t * r->K + k]), row += r->confusion[(size_t)t * r->K + k];
        if (row)
            fprintf(out, "  %7.2f%%\n", 100.0 * r->confusion[(size_t)t * r->K + t] / row);
        else
            fputs("        -\n", out);
    }
}

static int write_summary(const char *path, const eval_opts *o, const nn_model *m, const char *data,
                         const eval_result *r, char *err, size_t errlen)
{
    json_obj j;
    json_open(&j, path);
    json_str(&j, "command", "eval");
    json_str(&j, "model_file", o->file);
    json_str(&j, "model", m->spec);
    json_str(&j, "data", data && *data ? data : "embedded");
    json_str(&j, "split", o->train_split ? "train" : "test");
    json_int(&j, "samples", r->n);
    json_num(&j, "accuracy", (double)r->correct / r->n);
    json_num(&j, "loss", r->loss);
    for (int t = 0; t < r->K; t++) {
        long long row = 0;
        for (int k = 0; k < r->K; k++)
            row += r->confusion[(size_t)t * r->K + k];
        char key[32];
        snprintf(key, sizeof key, "accuracy_class_%d", t);
        json_num(&j, key, row ? (double)r->confusion[(size_t)t * r->K + t] / row : NAN);
    }
    json_int_rows(&j, "confusion", r->confusion, r->K, r->K);
    int rc = json_close(&j);
    if (rc < 0)
        snprintf(err, errlen, "%s", j.err);
    return rc;
}

/* A language model on text: loss per token over every evaluation window
 * (--limit counts windows), bits per byte and next-byte accuracy. */
static int eval_text(const eval_opts *o, nn_model *m, const nn_dataset *d, const char *data)
{
    nn_dataset part = *d;
    if (o->limit && o->limit < nn_text_windows(d))
        part.text_len = (size_t)o->limit * (size_t)d->w + 1;
    if (o->predictions) {
        fprintf(stderr, "%s: --predictions is for classifiers; a language model's next-byte probabilities come "
                "from sgp sample --probs\n", CMD);
        return CLI_USAGE;
    }
    float loss, acc;
    nn_model_evaluate(m, NULL, &part, &loss, &acc);
    const long tokens = (long)nn_text_windows(&part) * d->w;
    printf("sgp eval: %s (%s, %zu parameters) on %s, %s split, %ld tokens in windows of %d\n", o->file, m->spec,
           m->n_params, data, o->train_split ? "train" : "validation", tokens, d->w);
    printf("loss %.4f nats/token  %.4f bits/byte  next byte %.2f%%\n", loss, nn_bits_per_byte(loss), 100 * acc);
    if (!o->summary)
        return 0;
    json_obj j;
    json_open(&j, o->summary);
    json_str(&j, "command", "eval");
    json_str(&j, "model_file", o->file);
    json_str(&j, "model", m->spec);
    json_str(&j, "data", data);
    json_str(&j, "split", o->train_split ? "train" : "test");
    json_int(&j, "tokens", tokens);
    json_int(&j, "context", d->w);
    json_num(&j, "loss", loss);
    json_num(&j, "bits_per_byte", nn_bits_per_byte(loss));
    json_num(&j, "accuracy", acc);
    mem_parts mem = {0};
    mem_measure(&mem); /* (the evaluation's activations are m's buffers: they do not grow with the data) */
    json_int(&j, "peak_rss_bytes", (long)mem.peak_rss);
    if (json_close(&j) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, j.err);
        return 1;
    }
    return 0;
}

int cmd_eval(int argc, char **argv)
{
    eval_opts o;
    int status = parse(argc, argv, &o);
    if (status)
        return status < 0 ? 0 : status;
    nn_blas_set_threads((int)o.threads);
    char err[1024];
    nn_model m = {0};
    nn_dataset train = {0}, test = {0};
    modelfile_arch a;
    int *pred = NULL;
    float *probs = NULL;
    eval_result r = {0};
    status = 1;
    if (modelfile_load(o.file, o.spec, NN_EVAL_ONLY, &m, &a, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        goto out;
    }
    const char *data = o.data ? o.data : strcmp(a.data, "embedded") ? a.data : NULL;
    if (nn_data_load(data, m.tokens > 1 ? m.tokens : 0, &train, &test, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        goto out;
    }
    const nn_dataset *d = o.train_split ? &train : &test;
    if (d->c != m.in_c || d->h != m.in_h || d->w != m.in_w || d->n_classes > m.n_classes) {
        fprintf(stderr, "%s: %s is a model for %dx%dx%d inputs and %d classes; the data is %dx%dx%d with %d\n", CMD,
                o.file, m.in_c, m.in_h, m.in_w, m.n_classes, d->c, d->h, d->w, d->n_classes);
        goto out;
    }
    if (d->text) {
        status = eval_text(&o, &m, d, data);
        goto out;
    }
    if (nn_model_is_seq(&m)) {
        fprintf(stderr, "%s: %s is a language model; give it text data (--data text:FILE or brown)\n", CMD, o.file);
        goto out;
    }
    r.n = o.limit && o.limit < d->n ? (int)o.limit : d->n;
    r.K = m.n_classes;
    pred = malloc((size_t)r.n * sizeof *pred);
    probs = malloc((size_t)r.n * r.K * sizeof *probs);
    r.confusion = calloc((size_t)r.K * r.K, sizeof *r.confusion);
    if (!pred || !probs || !r.confusion) {
        fprintf(stderr, "%s: out of memory\n", CMD);
        goto out;
    }
    printf("sgp eval: %s (%s, %zu parameters) on %s, %s split, %d samples\n", o.file, m.spec, m.n_params,
           data ? data : "the embedded MNIST", o.train_split ? "train" : "test", r.n);
    nn_model_predict(&m, d->x, r.n, pred, probs);
    double loss = 0;
    for (int i = 0; i < r.n; i++) {
        const int y = d->y[i];
        r.correct += pred[i] == y;
        r.confusion[(size_t)y * r.K + pred[i]]++;
        loss -= log(fmax(probs[(size_t)i * r.K + y], 1e-30));
    }
    r.loss = loss / r.n;
    print_report(&r, stdout);
    status = 0;
    int rc;
    if (o.predictions && (rc = write_predictions(o.predictions, d, r.n, r.K, pred, probs)) < 0) {
        fprintf(stderr, "%s: cannot write %s: %s\n", CMD, o.predictions, strerror(-rc));
        status = 1;
    }
    if (o.summary && write_summary(o.summary, &o, &m, data, &r, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        status = 1;
    }
out:
    free(pred);
    free(probs);
    free(r.confusion);
    nn_model_free(&m);
    nn_dataset_free(&train);
    nn_dataset_free(&test);
    return status;
}
