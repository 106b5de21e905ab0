/* `sgp train` on text files, as a user meets it (real build/sgp processes):
 * a bad file is named in one line, and --init from a language model takes
 * its context. (The loader itself: tests/unit/test_nn_text.c.) */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/sgp_run.h"

TestSuite(nn_text);

static char g_dir[] = "/tmp/sgp-text-XXXXXX";

static void setup(void) { cr_assert_not_null(mkdtemp(g_dir)); }
static void teardown(void) { sgp_rm_rf(g_dir); }

Test(nn_text, sgp_train_names_a_bad_text_file, .init = setup, .fini = teardown)
{
    char path[300];
    snprintf(path, sizeof path, "%s/tiny.txt", g_dir);
    sgp_write_noise(path, 40);
    char spec[400];
    snprintf(spec, sizeof spec, "text:%s", path);
    sgp_out o;
    sgp_run(&o, "train", "--model", "gpt:1:8:2", "--data", spec, "--context", "32", NULL);
    cr_assert_eq(o.status, 1, "exit 1 for a data file: %s", o.err);
    cr_assert(strstr(o.err, path), "%s", o.err);
    cr_assert_eq(strchr(o.err, '\n'), o.err + strlen(o.err) - 1, "one line: %s", o.err);
    sgp_run(&o, "train", "--model", "gpt:1:8:2", "--data", "text:/nonexistent/x.txt", NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "/nonexistent/x.txt"), "%s", o.err);
    sgp_run(&o, "train", "--model", "gpt:1:8:2", "--data", spec, "--context", "0", NULL);
    cr_assert_eq(o.status, 2, "a bad --context is a usage error: %s", o.err);
}

Test(nn_text, init_from_a_language_model_takes_its_context, .init = setup, .fini = teardown)
{
    char path[300], spec[400], model[400];
    snprintf(path, sizeof path, "%s/t.txt", g_dir);
    sgp_write_noise(path, 3000);
    snprintf(spec, sizeof spec, "text:%s", path);
    snprintf(model, sizeof model, "%s/lm.safetensors", g_dir);
    sgp_out o;
    sgp_run(&o, "train", "--model", "gpt:1:8:2", "--data", spec, "--context", "16", "--epochs", "1",
            "--save-model", model, "--no-progress", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    sgp_run(&o, "train", "--init", model, "--data", spec, "--epochs", "1", "--no-progress", NULL);
    cr_assert_eq(o.status, 0, "--init without --context trains at the file's 16: %s", o.err);
    cr_assert(strstr(o.out, "context 16"), "%s", o.out);
    sgp_run(&o, "train", "--init", model, "--data", spec, "--context", "32", "--epochs", "1", "--no-progress", NULL);
    cr_assert_eq(o.status, 1, "another --context does not fit the file's model: %s", o.err);
    cr_assert(strstr(o.err, "1x1x16"), "%s", o.err);
}

/* Evaluating a language model goes in batches of the training step's size
 * (or 4,096 tokens), so its memory does not grow with the validation file
 * and is no more than a training step's: `sgp eval` of a 3.5 MB gpt:4:128:4
 * held 736 MB of activations for 256 windows at a time. */
Test(nn_text, eval_memory_does_not_grow_with_the_validation_file, .init = setup, .fini = teardown, .timeout = 300)
{
    char train[300], small[300], large[300], model[300], spec[1000], summary[300];
    snprintf(train, sizeof train, "%s/train.txt", g_dir);
    snprintf(small, sizeof small, "%s/small.txt", g_dir);
    snprintf(large, sizeof large, "%s/large.txt", g_dir);
    snprintf(model, sizeof model, "%s/lm.safetensors", g_dir);
    snprintf(summary, sizeof summary, "%s/eval.json", g_dir);
    sgp_write_noise(train, 2000);
    sgp_write_noise(small, 20000);
    sgp_write_noise(large, 200000);
    snprintf(spec, sizeof spec, "text:%s,%s", train, small);
    sgp_out o;
    sgp_run(&o, "train", "--model", "gpt:2:64:4", "--data", spec, "--context", "64", "--epochs", "1", "--save-model",
            model, "--no-progress", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    double rss[2];
    const char *val[2] = {small, large};
    for (int k = 0; k < 2; k++) {
        snprintf(spec, sizeof spec, "text:%s,%s", train, val[k]);
        sgp_run(&o, "eval", "--model-file", model, "--data", spec, "--summary", summary, NULL);
        cr_assert_eq(o.status, 0, "%s", o.err);
        char *text = sgp_read_file(summary);
        rss[k] = sgp_json_number(text, "peak_rss_bytes");
        cr_assert_gt(sgp_json_number(text, "tokens"), k ? 190000 : 19000, "%s", text);
        free(text);
    }
    cr_log_info("sgp eval peak RSS: %.1f MB on 20 KB, %.1f MB on 200 KB", rss[0] / 1e6, rss[1] / 1e6);
    cr_assert_leq(rss[1], 1.1 * rss[0], "%.1f MB on a 10x larger file, %.1f MB on the small one", rss[1] / 1e6,
                  rss[0] / 1e6);
    /* (64 windows of 64 tokens: the model, its 64-window buffers, the data and
     * the runtime; 256 windows at a time took 4x the activations) */
    cr_assert_lt(rss[1], 120e6, "%.1f MB", rss[1] / 1e6);
}
