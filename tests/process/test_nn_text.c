/* `sgp train` on text files, as a user meets it (real build/sgp processes):
 * a bad file is named in one line, and --init from a language model takes
 * its context. (The loader itself: tests/unit/test_nn_text.c.) */
#include <criterion/criterion.h>
#include <stdio.h>
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
