/* Saved models through the command line: --save-model, sgp eval, sgp
 * predict, --init, and a model file read by NumPy alone. Real build/sgp
 * processes on the embedded MNIST. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nn/nn_data.h"
#include "nn/nn_model.h"
#include "peer/store/modelfile.h"
#include "tests/sgp_run.h"

static sgp_out o;

TestSuite(peer_modelcli, .timeout = 300);

/* The embedded test images, as sgp reads them (nn/data, beside the tests). */
#define TEST_IMAGES "nn/data/t10k-images-idx3-ubyte.gz"

static char *slurp(const char *path)
{
    static char text[1 << 20];
    cr_assert(sgp_read_text(path, text, sizeof text), "cannot read %s", path);
    return text;
}

/* A scratch directory and one model trained in it for an epoch: DIR/m.safetensors. */
static void trained(char *dir, char *model, size_t cap)
{
    cr_assert(mkdtemp(dir));
    snprintf(model, cap, "%s/m.safetensors", dir);
    sgp_run(&o, "train", "--model", "mlp:64", "--epochs", "1", "--save-model", model, "--no-progress", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
}

static void load(const char *path, nn_model *m)
{
    char err[512];
    cr_assert_eq(modelfile_load(path, NULL, 256, m, NULL, err, sizeof err), 0, "%s", err);
}

/* The model in PATH has a's parameters, each to 1e-6 of its size (averaging round-off). */
static void close_to(const nn_model *a, const char *path, const char *who)
{
    nn_model b = {0};
    load(path, &b);
    for (size_t d = 0; d < a->n_params; d++)
        cr_assert_float_eq(b.params[d], a->params[d], 1e-6f * (1 + fabsf(a->params[d])), "%s: parameter %zu", who, d);
    nn_model_free(&b);
}

Test(peer_modelcli, eval_agrees_with_training_and_writes_a_confusion_matrix)
{
    char dir[] = "/tmp/sgp-mcli-XXXXXX", model[128], summary[128], eval[128];
    cr_assert(mkdtemp(dir));
    snprintf(model, sizeof model, "%s/m.safetensors", dir);
    snprintf(summary, sizeof summary, "%s/train.json", dir);
    snprintf(eval, sizeof eval, "%s/eval.json", dir);
    sgp_run(&o, "train", "--model", "mlp:64", "--epochs", "1", "--save-model", model, "--summary", summary,
            "--no-progress", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    const double trained_acc = sgp_json_number(slurp(summary), "test_accuracy");
    sgp_run(&o, "eval", "--model-file", model, "--summary", eval, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert(strstr(o.out, "confusion matrix"), "%s", o.out);
    const char *text = slurp(eval);
    cr_assert_float_eq(sgp_json_number(text, "accuracy"), trained_acc, 1e-7, "eval %s, train %g", text, trained_acc);
    cr_assert_eq(sgp_json_number(text, "samples"), 2000);
    /* the matrix counts every test sample once, its diagonal the correct ones */
    const char *p = strstr(text, "\"confusion\": [[");
    cr_assert(p, "%s", text);
    p += strlen("\"confusion\": [");
    long total = 0, diagonal = 0;
    for (int r = 0; r < 10; r++) {
        cr_assert_eq(*p, '[', "row %d: %s", r, p);
        p++;
        for (int c = 0; c < 10; c++) {
            char *end;
            long v = strtol(p, &end, 10);
            total += v, diagonal += r == c ? v : 0;
            p = end + (c < 9 ? 2 : 1); /* ", " or "]" */
        }
        p += r < 9 ? 2 : 0;
    }
    cr_assert_eq(total, 2000);
    cr_assert_eq(diagonal, lround(trained_acc * 2000));
}

Test(peer_modelcli, numpy_alone_reads_the_file_and_predicts_the_same)
{
    if (!sgp_python_has("numpy"))
        cr_skip_test("no /usr/bin/python3 with numpy (make deps installs python3-numpy)");
    char dir[] = "/tmp/sgp-mcli-XXXXXX", model[128], preds[128], out[128];
    trained(dir, model, sizeof model);
    snprintf(preds, sizeof preds, "%s/eval.csv", dir);
    snprintf(out, sizeof out, "%s/numpy.csv", dir);
    sgp_run(&o, "eval", "--model-file", model, "--limit", "100", "--predictions", preds, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    char *argv[] = {"/usr/bin/python3", "peer/python/examples/safetensors_numpy.py", model, TEST_IMAGES, "--limit",
                    "100", NULL};
    pid_t pid = sgp_spawn(argv, out);
    cr_assert_eq(sgp_wait_exit(pid, SGP_EVENT_LIMIT_S), 0, "the NumPy script failed: %s", slurp(out));

    FILE *a = fopen(preds, "r"), *b = fopen(out, "r");
    cr_assert(a && b);
    char la[4096], lb[256];
    cr_assert(fgets(la, sizeof la, a)); /* the header */
    int n = 0;
    while (fgets(la, sizeof la, a)) {
        cr_assert(fgets(lb, sizeof lb, b), "NumPy gave fewer than %d answers", n + 1);
        int i, label, cls, j, k;
        cr_assert_eq(sscanf(la, "%d,%d,%d", &i, &label, &cls), 3);
        double pk;
        cr_assert_eq(sscanf(lb, "%d,%d,%lf", &j, &k, &pk), 3, "%s", lb);
        cr_assert_eq(i, j);
        cr_assert_eq(k, cls, "image %d: NumPy says %d, sgp eval %d", i, k, cls);
        /* and the same probability: column p<cls> of sgp's row */
        const char *f = la;
        for (int c = 0; c < 3 + cls; c++)
            f = strchr(f, ',') + 1;
        cr_assert_float_eq(strtod(f, NULL), pk, 1e-5, "image %d", i);
        n++;
    }
    cr_assert_eq(n, 100);
    fclose(a), fclose(b);
}

Test(peer_modelcli, predict_reads_idx_pgm_and_csv)
{
    char dir[] = "/tmp/sgp-mcli-XXXXXX", model[128], pgm[128], csv[128], preds[128];
    trained(dir, model, sizeof model);
    snprintf(pgm, sizeof pgm, "%s/first.pgm", dir);
    snprintf(csv, sizeof csv, "%s/rows.csv", dir);
    snprintf(preds, sizeof preds, "%s/eval.csv", dir);
    sgp_run(&o, "eval", "--model-file", model, "--limit", "3", "--predictions", preds, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    int want[3];
    FILE *f = fopen(preds, "r");
    char line[4096];
    cr_assert(fgets(line, sizeof line, f));
    for (int i = 0; i < 3; i++) {
        cr_assert(fgets(line, sizeof line, f));
        int idx, label;
        cr_assert_eq(sscanf(line, "%d,%d,%d", &idx, &label, &want[i]), 3);
    }
    fclose(f);

    /* the first test images as a binary PGM and as CSV rows (the second with its label) */
    nn_dataset train = {0}, test = {0};
    char err[256];
    cr_assert_eq(nn_data_embedded(&train, &test, err, sizeof err), 0, "%s", err);
    f = fopen(pgm, "wb");
    fprintf(f, "P5\n# the first test digit\n28 28\n255\n");
    for (int i = 0; i < 784; i++)
        fputc((int)lroundf(test.x[i] * 255), f);
    fclose(f);
    f = fopen(csv, "w");
    fprintf(f, "pixels\n");
    for (int r = 0; r < 2; r++) {
        if (r == 1)
            fprintf(f, "%d,", test.y[1]);
        for (int i = 0; i < 784; i++)
            fprintf(f, "%s%.9g", i ? "," : "", test.x[784 * r + i]);
        fputc('\n', f);
    }
    fclose(f);
    char idx[128];
    snprintf(idx, sizeof idx, "%s/three.idx", dir);
    f = fopen(idx, "wb");
    const unsigned char head3[16] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 28, 0, 0, 0, 28};
    fwrite(head3, 1, 16, f);
    for (int i = 0; i < 3 * 784; i++)
        fputc((int)lroundf(test.x[i] * 255), f);
    fclose(f);

    sgp_run(&o, "predict", "--model-file", model, "--csv", pgm, csv, idx, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert_eq(sgp_lines(o.out), 1 + 1 + 2 + 3, "header, the PGM, 2 rows, 3 images: %s", o.out);
    char head[256];
    snprintf(head, sizeof head, "%s,0,-1,%d,", pgm, want[0]);
    cr_assert(strstr(o.out, head), "the PGM of image 0 is class %d: %.300s", want[0], o.out);
    snprintf(head, sizeof head, "%s,1,%d,%d,", csv, test.y[1], want[1]);
    cr_assert(strstr(o.out, head), "CSV row 2 (label %d) is class %d", test.y[1], want[1]);
    snprintf(head, sizeof head, "%s,2,-1,%d,", idx, want[2]);
    cr_assert(strstr(o.out, head), "IDX image 2 is class %d", want[2]);

    sgp_run(&o, "predict", "--model-file", model, "--top", "2", TEST_IMAGES, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert(strstr(o.out, "[0]: ") && strstr(o.out, "  then "), "%.300s", o.out);

    /* an input of another shape, and one that is no input at all: named, the others still answered */
    sgp_write_text(csv, "0.5,0.5\n");
    sgp_run(&o, "predict", "--model-file", model, csv, pgm, model, NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "rows.csv:1: 2 values; the model takes 784"), "%s", o.err);
    cr_assert(strstr(o.err, "m.safetensors: neither IDX images, a PGM image nor CSV text"), "%s", o.err);
    cr_assert_eq(sgp_lines(o.out), 1, "the PGM is still classified: %s", o.out);
    nn_dataset_free(&train);
    nn_dataset_free(&test);
}

Test(peer_modelcli, init_starts_from_the_file_in_train_sim_and_launch)
{
    char dir[] = "/tmp/sgp-mcli-XXXXXX", model[128], again[128], run[128];
    trained(dir, model, sizeof model);
    snprintf(again, sizeof again, "%s/again.safetensors", dir);
    snprintf(run, sizeof run, "%s/run", dir);
    nn_model a = {0}, b = {0};
    load(model, &a);

    /* with a zero learning rate a run ends where it starts: where --init put it */
    sgp_run(&o, "train", "--init", model, "--lr", "0", "--epochs", "1", "--save-model", again, "--no-progress", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert(strstr(o.out, "mlp:64"), "--model comes from the file: %.200s", o.out);
    load(again, &b);
    cr_assert_eq(memcmp(a.params, b.params, a.n_params * sizeof(float)), 0, "train --init --lr 0 moved the model");
    nn_model_free(&b);

    sgp_run(&o, "sim", "--peers", "4", "--init", model, "--lr", "0", "--epochs", "1", "--save-model", again,
            "--no-progress", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    close_to(&a, again, "sim");

    sgp_run(&o, "launch", "--peers", "2", "--run-dir", run, "--init", model, "--lr", "0", "--epochs", "1", "--codec",
            "none", "--save-model", again, "--no-progress", NULL);
    cr_assert_eq(o.status, 0, "%s\n%s", o.out, o.err);
    close_to(&a, again, "launch");
    nn_model_free(&a);
}

Test(peer_modelcli, bad_model_files_are_named_and_nothing_is_written)
{
    char dir[] = "/tmp/sgp-mcli-XXXXXX", model[128], cut[128], out[128];
    trained(dir, model, sizeof model);
    snprintf(cut, sizeof cut, "%s/cut.safetensors", dir);
    snprintf(out, sizeof out, "%s/out.safetensors", dir);
    struct stat st;
    cr_assert_eq(stat(model, &st), 0);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "head -c %lld %s > %s", (long long)st.st_size / 2, model, cut);
    cr_assert_eq(system(cmd), 0);

    sgp_run(&o, "train", "--init", cut, "--save-model", out, NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "cut.safetensors") && strstr(o.err, "truncated"), "%s", o.err);
    cr_assert_eq(sgp_lines(o.err), 1, "%s", o.err);
    cr_assert_neq(stat(out, &st), 0, "nothing written on an error");

    sgp_run(&o, "train", "--init", model, "--model", "lenet", "--save-model", out, NULL);
    cr_assert_eq(o.status, 2);
    cr_assert(strstr(o.err, "'mlp:64'") && strstr(o.err, "'lenet'"), "both models named: %s", o.err);
    cr_assert_neq(stat(out, &st), 0, "nothing written on an error");

    sgp_run(&o, "eval", "--model-file", cut, NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "truncated"), "%s", o.err);
    sgp_run(&o, "eval", "--model-file", "/no/such.safetensors", NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "/no/such.safetensors: No such file"), "%s", o.err);
    sgp_run(&o, "predict", "--model-file", TEST_IMAGES, TEST_IMAGES, NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "not a safetensors file"), "%s", o.err);
    sgp_run(&o, "eval", NULL);
    cr_assert_eq(o.status, 2);
    cr_assert(strstr(o.err, "--model-file FILE is required"), "%s", o.err);
    sgp_run(&o, "train", "--model-format", "onnx", NULL);
    cr_assert_eq(o.status, 2);
    cr_assert(strstr(o.err, "safetensors or raw"), "%s", o.err);
}

Test(peer_modelcli, every_new_command_has_help)
{
    const char *cmds[] = {"eval", "predict"};
    for (int i = 0; i < 2; i++) {
        sgp_run(&o, cmds[i], "--help", NULL);
        cr_assert_eq(o.status, 0);
        cr_assert(strstr(o.out, "--model-file FILE"), "%s", o.out);
    }
    sgp_run(&o, "--help", NULL);
    cr_assert(strstr(o.out, "eval") && strstr(o.out, "predict"), "%s", o.out);
}
