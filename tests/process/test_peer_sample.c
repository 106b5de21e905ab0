/* sgp sample: text from a saved byte-level GPT, reproducible by seed, greedy
 * and top-k, its next-byte probabilities checked against NumPy alone
 * (peer/python/examples/sample_numpy.py), and its errors. Real build/sgp
 * processes on a tiny model trained in a fraction of a second. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/sgp_run.h"

static sgp_out o;

TestSuite(peer_sample, .timeout = 120);

#define PROMPT "The quick"
/* The options after --model-file F, as sample() takes them. */
#define ARGS(...) ((const char *[]){__VA_ARGS__, NULL})

/* A scratch directory with a few KB of English and a gpt:1:16:2 trained on
 * it for two epochs: DIR/lm.safetensors. */
static void trained_lm(char *dir, char *model, size_t cap)
{
    cr_assert(mkdtemp(dir));
    char text[256];
    snprintf(text, sizeof text, "%s/text.txt", dir);
    FILE *f = fopen(text, "w");
    cr_assert(f);
    for (int i = 0; i < 60; i++)
        fputs("The quick brown fox jumps over the lazy dog. A stitch in time saves nine. ", f);
    fclose(f);
    char data[300];
    snprintf(data, sizeof data, "text:%s", text);
    snprintf(model, cap, "%s/lm.safetensors", dir);
    sgp_run(&o, "train", "--model", "gpt:1:16:2", "--data", data, "--context", "16", "--epochs", "2", "--optimizer",
            "adamw", "--lr", "0.01", "--save-model", model, "--no-progress", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
}

/* `sgp sample --model-file MODEL ARGS...` with stdout (it may hold any byte,
 * NUL too) into DIR/NAME; its bytes into buf, their count returned. */
static size_t sample(const char *dir, const char *name, const char *model, const char *const *args, char *buf,
                     size_t cap)
{
    char *argv[32] = {(char *)sgp_bin(), "sample", "--model-file", (char *)model};
    int argc = 4;
    for (; *args && argc < 31; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    char out[256];
    snprintf(out, sizeof out, "%s/%s", dir, name);
    pid_t pid = sgp_spawn(argv, out); /* stdout and stderr, but a run that succeeds writes no stderr */
    const int status = sgp_wait_exit(pid, SGP_EVENT_LIMIT_S);
    FILE *f = fopen(out, "rb");
    cr_assert(f, "%s", out);
    const size_t n = fread(buf, 1, cap, f);
    fclose(f);
    cr_assert_eq(status, 0, "sgp sample %s: status %d: %.*s", name, status, (int)n, buf);
    return n;
}

static int same(const char *a, size_t na, const char *b, size_t nb) { return na == nb && !memcmp(a, b, na); }

Test(peer_sample, the_same_seed_gives_the_same_text_and_another_seed_other_text)
{
    char dir[] = "/tmp/sgp-sample-XXXXXX", model[128];
    trained_lm(dir, model, sizeof model);
    static char a[4096], b[4096], c[4096];
    const size_t na = sample(dir, "a", model, ARGS("--prompt", PROMPT, "--tokens", "100", "--seed", "7"), a, sizeof a);
    const size_t nb = sample(dir, "b", model, ARGS("--prompt", PROMPT, "--tokens", "100", "--seed", "7"), b, sizeof b);
    const size_t nc = sample(dir, "c", model, ARGS("--prompt", PROMPT, "--tokens", "100", "--seed", "8"), c, sizeof c);
    cr_assert_eq(na, strlen(PROMPT) + 100, "the prompt and 100 bytes, got %zu", na);
    cr_assert(!memcmp(a, PROMPT, strlen(PROMPT)), "starts with the prompt: %.*s", (int)na, a);
    cr_assert(same(a, na, b, nb), "seed 7 twice: '%.*s' then '%.*s'", (int)na, a, (int)nb, b);
    cr_assert(!same(a, na, c, nc), "seeds 7 and 8 gave the same text '%.*s'", (int)na, a);

    /* the default prompt is a newline, the default length 200 bytes */
    const size_t nd = sample(dir, "d", model, (const char *[]){NULL}, a, sizeof a);
    cr_assert_eq(nd, 201);
    cr_assert_eq(a[0], '\n');
}

Test(peer_sample, greedy_is_deterministic_and_top_1_is_greedy)
{
    char dir[] = "/tmp/sgp-sample-XXXXXX", model[128];
    trained_lm(dir, model, sizeof model);
    static char a[4096], b[4096], c[4096];
    /* longer than the context (16): the window slides */
    const size_t na =
        sample(dir, "a", model, ARGS("--prompt", PROMPT, "--tokens", "40", "--temperature", "0", "--seed", "1"), a,
               sizeof a);
    const size_t nb =
        sample(dir, "b", model, ARGS("--prompt", PROMPT, "--tokens", "40", "--temperature", "0", "--seed", "2"), b,
               sizeof b);
    const size_t nc =
        sample(dir, "c", model, ARGS("--prompt", PROMPT, "--tokens", "40", "--top-k", "1", "--seed", "3"), c, sizeof c);
    cr_assert_eq(na, strlen(PROMPT) + 40);
    cr_assert(same(a, na, b, nb), "greedy with seeds 1 and 2: '%.*s' then '%.*s'", (int)na, a, (int)nb, b);
    cr_assert(same(a, na, c, nc), "greedy '%.*s', top-k 1 '%.*s'", (int)na, a, (int)nc, c);
}

/* The 256 "byte probability" lines of OUT into p; checks there are 256 in order. */
static void read_probs(const char *out, size_t n, double p[256], const char *who)
{
    const char *s = out, *end = out + n;
    for (int k = 0; k < 256; k++) {
        char *next;
        cr_assert(s < end, "%s: %d lines, not 256", who, k);
        cr_assert_eq(strtol(s, &next, 10), k, "%s: line %d: %.40s", who, k + 1, s);
        p[k] = strtod(next, &next);
        cr_assert_eq(*next, '\n', "%s: line %d", who, k + 1);
        s = next + 1;
    }
    cr_assert_eq(s, end, "%s: more than 256 lines", who);
}

Test(peer_sample, probs_agree_with_numpy_alone)
{
    if (!sgp_python_has("numpy"))
        cr_skip_test("no /usr/bin/python3 with numpy (make deps installs python3-numpy)");
    char dir[] = "/tmp/sgp-sample-XXXXXX", model[128];
    trained_lm(dir, model, sizeof model);
    /* within the context, and longer than it (only the last 16 bytes count) */
    const char *prompts[] = {"T", PROMPT, "The quick brown fox jumps over the lazy"};
    static char a[16384], b[16384];
    double worst = 0;
    for (int i = 0; i < 3; i++) {
        const size_t na = sample(dir, "sgp", model, ARGS("--prompt", prompts[i], "--probs"), a, sizeof a);
        char out[256];
        snprintf(out, sizeof out, "%s/numpy", dir);
        char *argv[] = {"/usr/bin/python3", "peer/python/examples/sample_numpy.py", model, (char *)prompts[i], NULL};
        const int status = sgp_wait_exit(sgp_spawn(argv, out), SGP_EVENT_LIMIT_S);
        FILE *f = fopen(out, "rb");
        cr_assert(f);
        const size_t nb = fread(b, 1, sizeof b, f);
        fclose(f);
        cr_assert_eq(status, 0, "the NumPy script failed: %.*s", (int)nb, b);
        double p[256], q[256], sum = 0;
        read_probs(a, na, p, "sgp sample --probs");
        read_probs(b, nb, q, "sample_numpy.py");
        for (int k = 0; k < 256; k++) {
            cr_assert(fabs(p[k] - q[k]) <= 1e-5, "prompt '%s', byte %d: sgp %.9g, NumPy %.9g", prompts[i], k, p[k],
                      q[k]);
            worst = fmax(worst, fabs(p[k] - q[k]));
            sum += p[k];
        }
        cr_assert_float_eq(sum, 1.0, 1e-6);
    }
    cr_log_info("sgp sample --probs and NumPy agree to %.3g", worst);
}

Test(peer_sample, refuses_image_models_missing_files_and_bad_values)
{
    char dir[] = "/tmp/sgp-sample-XXXXXX", model[128], mlp[128];
    trained_lm(dir, model, sizeof model);
    snprintf(mlp, sizeof mlp, "%s/mlp.safetensors", dir);
    sgp_run(&o, "train", "--model", "mlp", "--epochs", "1", "--save-model", mlp, "--no-progress", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);

    sgp_run(&o, "sample", "--model-file", mlp, NULL);
    cr_assert_eq(o.status, 1, "%s", o.err);
    cr_assert(strstr(o.err, "a model of 'mlp' is not a language model"), "%s", o.err);
    cr_assert(strstr(o.err, mlp), "names the file: %s", o.err);
    cr_assert_eq(sgp_lines(o.err), 1, "%s", o.err);

    /* and predict sends a language model to sample */
    sgp_run(&o, "predict", "--model-file", model, model, NULL);
    cr_assert_eq(o.status, 1, "%s", o.err);
    cr_assert(strstr(o.err, "is a language model") && strstr(o.err, "sgp sample"), "%s", o.err);

    char missing[160];
    snprintf(missing, sizeof missing, "%s/none.safetensors", dir);
    sgp_run(&o, "sample", "--model-file", missing, NULL);
    cr_assert_eq(o.status, 1, "%s", o.err);
    cr_assert(strstr(o.err, missing), "%s", o.err);

    const struct {
        const char *opt, *value, *says;
    } bad[] = {{"--temperature", "-1", "--temperature"}, {"--temperature", "warm", "--temperature"},
               {"--tokens", "-5", "--tokens"},           {"--top-k", "x", "--top-k"},
               {"--seed", "-1", "--seed"},               {"--prompt", "", "--prompt is empty"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sgp_run(&o, "sample", "--model-file", model, bad[i].opt, bad[i].value, "--probs", NULL);
        cr_assert_eq(o.status, 2, "%s '%s': %s", bad[i].opt, bad[i].value, o.err);
        cr_assert(strstr(o.err, bad[i].says), "%s", o.err);
        cr_assert_eq(sgp_lines(o.err), 1, "%s", o.err);
        cr_assert_eq(o.out[0], 0, "nothing on stdout: %s", o.out);
    }
    sgp_run(&o, "sample", NULL);
    cr_assert_eq(o.status, 2);
    cr_assert(strstr(o.err, "--model-file"), "%s", o.err);
    sgp_run(&o, "sample", "--help", NULL);
    cr_assert_eq(o.status, 0);
    cr_assert(strstr(o.out, "--temperature"), "%s", o.out);
}
