/* sgp train: one model, one process. The baseline every decentralized run is
 * compared against, and the smallest end-to-end use of nn/. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_batch.h"
#include "nn/nn_blas.h"
#include "nn/nn_data.h"
#include "nn/nn_model.h"
#include "nn/nn_optim.h"
#include "peer/core/clock.h"
#include "peer/cmd/cli.h"
#include "peer/core/memory.h"
#include "peer/cmd/train_cli.h"
#include "peer/cmd/commands.h"
#include "peer/store/json.h"
#include "peer/store/progress.h"
#include "peer/core/train_opts.h"

static const char *CMD = "sgp train";

static void help(void)
{
    fputs("usage: sgp train [OPTIONS]\n\n"
          "Train one model on one machine and report test accuracy every epoch.\n\n",
          stdout);
    fputs(TRAIN_OPTS_HELP, stdout);
    fputs("  -h, --help          this text\n", stdout);
}

typedef struct train_result {
    float train_loss, train_accuracy, test_loss, test_accuracy;
    double train_seconds, wall_seconds;
    long samples;
    mem_parts memory;
} train_result;

static void put_summary(json_obj *j, const train_opts *o, const nn_model *m, const train_result *r)
{
    json_str(j, "command", "train");
    json_str(j, "model", m->spec);
    json_str(j, "data", o->data ? o->data : "embedded");
    json_int(j, "parameters", (long long)m->n_params);
    json_int(j, "epochs", o->epochs);
    json_int(j, "batch", o->batch);
    json_str(j, "optimizer", nn_opt_kind_name(o->optimizer));
    json_num(j, "lr", o->lr);
    json_int(j, "seed", (long long)o->seed);
    json_int(j, "threads", o->threads);
    json_num(j, "test_accuracy", r->test_accuracy);
    json_num(j, "test_loss", r->test_loss);
    if (nn_model_is_seq(m)) {
        json_int(j, "context", m->tokens);
        json_num(j, "test_bits_per_byte", nn_bits_per_byte(r->test_loss));
        json_num(j, "tokens_per_second", r->samples * (double)m->tokens / r->train_seconds);
    }
    json_num(j, "train_accuracy", r->train_accuracy);
    json_num(j, "train_loss", r->train_loss);
    json_num(j, "samples_per_second", r->samples / r->train_seconds);
    json_num(j, "train_seconds", r->train_seconds);
    json_num(j, "wall_seconds", r->wall_seconds);
    mem_json(j, &r->memory);
}

/* Trains o->epochs epochs, printing each; -EDOM at the first step whose loss
 * is not finite (the model diverged: nothing after it can learn), with the
 * epoch and step in *at_epoch, *at_step. */
static int run(const train_opts *o, nn_model *m, nn_optimizer *opt, nn_batcher *b, const nn_dataset *test,
               train_result *r, long *at_epoch, int *at_step)
{
    progress bar;
    progress_init(&bar, stdout, o->progress);
    const int per_epoch = nn_batcher_per_epoch(b);
    long step = 0;
    for (long e = 0; e < o->epochs; e++) {
        double t0 = clock_now(), loss_sum = 0;
        long seen = 0, correct = 0;
        const int labels = m->tokens; /* predictions a sample makes */
        for (int s = 0; s < per_epoch; s++, step++) {
            int B = nn_batcher_next(b), hits;
            float loss = nn_model_grad(m, b->x, b->y, B, &hits);
            if (!isfinite(loss)) {
                progress_clear(&bar);
                *at_epoch = e + 1, *at_step = s + 1;
                return -EDOM;
            }
            if (o->clip > 0)
                nn_clip_norm(m->grads, m->n_params, o->clip);
            nn_optimizer_step(opt, m->params, m->grads, nn_lr_at(&o->schedule, step, per_epoch), m->params);
            loss_sum += (double)loss * B, seen += B, correct += hits;
            char text[96];
            snprintf(text, sizeof text, "epoch %ld/%ld  loss %.4f", e + 1, o->epochs, loss_sum / seen);
            progress_update(&bar, s + 1, per_epoch, text);
        }
        double dt = clock_now() - t0;
        r->train_seconds += dt, r->samples += seen;
        r->train_loss = (float)(loss_sum / seen);
        r->train_accuracy = (float)correct / ((float)seen * labels);
        nn_model_evaluate(m, NULL, test, &r->test_loss, &r->test_accuracy);
        progress_clear(&bar);
        if (nn_model_is_seq(m))
            printf("epoch %3ld/%ld  loss %.4f (%.3f bits/byte)  val loss %.4f (%.3f bits/byte)  next byte %6.2f%%  "
                   "%8.0f tokens/s  %.1fs\n",
                   e + 1, o->epochs, r->train_loss, nn_bits_per_byte(r->train_loss), r->test_loss,
                   nn_bits_per_byte(r->test_loss), 100 * r->test_accuracy, (double)seen * labels / dt, dt);
        else
            printf("epoch %3ld/%ld  loss %.4f  train %6.2f%%  test %6.2f%% (loss %.4f)  %8.0f samples/s  %.1fs\n",
                   e + 1, o->epochs, r->train_loss, 100 * r->train_accuracy, 100 * r->test_accuracy, r->test_loss,
                   seen / dt, dt);
        fflush(stdout);
    }
    return 0;
}

static int train_option(void *o, int code, const char *value) { return train_opts_parse(o, CMD, code, value); }

int cmd_train(int argc, char **argv)
{
    static const struct option long_opts[] = {TRAIN_OPTS_LONG, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    train_opts o;
    train_opts_defaults(&o);
    int helped, parsed = cli_parse(CMD, argc, argv, long_opts, help, train_option, &o, &helped);
    if (parsed || helped)
        return parsed;
    int checked = train_opts_check(&o, CMD);
    if (checked)
        return checked;

    double t_start = clock_now();
    nn_blas_set_threads((int)o.threads);
    nn_dataset train = {0}, test = {0};
    nn_model m = {0};
    nn_optimizer opt = {0};
    nn_batcher b = {0};
    train_result r = {0};
    char err[512];
    int status = 1;
    if (nn_data_load(o.data, (int)o.context, &train, &test, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", CMD, err);
        goto out;
    }
    if (train.n == 0 || test.n == 0) {
        fprintf(stderr, "%s: the %s set is empty\n", CMD, train.n ? "test" : "training");
        goto out;
    }
    int rc = train_opts_model(&o, &train, nn_eval_batch((int)o.batch, train.text ? train.w : 0), &m, err, sizeof err);
    if (rc < 0) {
        status = rc == -ENOMEM || o.init ? 1 : CLI_USAGE;
        fprintf(stderr, "%s: %s\n", CMD, err);
        goto out;
    }
    const nn_optimizer_config oc = train_opts_optimizer(&o);
    if (nn_optimizer_init(&opt, m.n_params, &oc) < 0 ||
        nn_batcher_init(&b, &train, (int)o.batch, o.seed, 0) < 0) {
        fprintf(stderr, "%s: out of memory\n", CMD);
        goto out;
    }
    if (train.text)
        printf("sgp train: %s, %zu parameters; data %s: %zu train / %zu validation bytes, context %d, %d windows an "
               "epoch\n",
               m.spec, m.n_params, o.data, train.text_len, test.text_len, train.w, train.n);
    else
        printf("sgp train: %s, %zu parameters; data %s: %d train / %d test, %dx%dx%d, %d classes\n", m.spec,
               m.n_params, o.data ? o.data : "embedded MNIST", train.n, test.n, train.c, train.h, train.w,
               train.n_classes);
    const char *decay = o.schedule.decay == NN_LR_COSINE ? "cosine" : o.schedule.decay == NN_LR_STEP ? "step" : "constant";
    if (o.optimizer == NN_OPT_ADAMW)
        printf("           batch %ld, AdamW lr %g (%s), betas %g,%g, eps %g, weight decay %g, seed %llu\n", o.batch,
               o.lr, decay, o.beta1, o.beta2, o.eps, o.weight_decay, (unsigned long long)o.seed);
    else
        printf("           batch %ld, lr %g (%s), momentum %g%s, weight decay %g, seed %llu\n", o.batch, o.lr, decay,
               o.momentum, o.nesterov ? " Nesterov" : "", o.weight_decay, (unsigned long long)o.seed);
    printf("           BLAS: %s\n", nn_blas_describe());
    if (nn_blas_downgraded())
        printf("           note: this CPU has AVX-512 but OpenBLAS runs %s kernels%s; large matrix products run slower"
               " (unset it to let OpenBLAS choose)\n",
               nn_blas_core(), getenv("OPENBLAS_CORETYPE") ? " because OPENBLAS_CORETYPE is set" : "");
    fflush(stdout);
    long bad_epoch;
    int bad_step;
    if (run(&o, &m, &opt, &b, &test, &r, &bad_epoch, &bad_step) < 0) {
        fprintf(stderr, "%s: the model diverged at epoch %ld, step %d (the loss is NaN or infinite): try a lower --lr "
                "or --clip\n", CMD, bad_epoch, bad_step);
        goto out;
    }
    r.wall_seconds = clock_now() - t_start;
    if (nn_model_is_seq(&m))
        printf("validation loss %.4f nats/token, %.4f bits/byte, next byte %.2f%%  %.0f tokens/s  %.1fs wall\n",
               r.test_loss, nn_bits_per_byte(r.test_loss), 100 * r.test_accuracy,
               r.samples * (double)m.tokens / r.train_seconds, r.wall_seconds);
    else
        printf("test accuracy %.2f%%  (loss %.4f)  %.0f samples/s  %.1fs wall\n", 100 * r.test_accuracy, r.test_loss,
               r.samples / r.train_seconds, r.wall_seconds);
    r.memory = (mem_parts){.model = m.bytes + nn_optimizer_bytes(&opt),
                           .data = nn_dataset_bytes(&train) + nn_dataset_bytes(&test) + nn_batcher_bytes(&b)};
    mem_measure(&r.memory);
    mem_print(stdout, &r.memory, 1);
    status = 0;
    json_obj j;
    if (o.summary) {
        json_open(&j, o.summary);
        put_summary(&j, &o, &m, &r);
        if (json_close(&j) < 0) {
            fprintf(stderr, "%s: %s\n", CMD, j.err);
            status = 1;
        }
    }
    if (o.save_model) {
        json_open(&j, o.save_model);
        put_summary(&j, &o, &m, &r);
        char *text = json_close_text(&j);
        status |= train_cli_save_model(&o, &m, m.params, text, CMD);
        free(text);
    }
out:
    nn_batcher_free(&b);
    nn_optimizer_free(&opt);
    nn_model_free(&m);
    nn_dataset_free(&train);
    nn_dataset_free(&test);
    return status;
}
