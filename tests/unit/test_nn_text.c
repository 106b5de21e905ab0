/* Text data: the loader's split and its refusals (empty, a directory, a
 * missing file, shorter than one window), random-window batches, evaluation
 * windows and text shards. (`sgp train` on text files:
 * tests/process/test_nn_text.c.) */
#include "nn/nn_batch.h"
#include "nn/nn_data.h"
#include "tests/sgp_files.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(nn_text);

static char g_dir[] = "/tmp/sgp-text-XXXXXX";

static void setup(void) { cr_assert_not_null(mkdtemp(g_dir)); }
static void teardown(void) { sgp_rm_rf(g_dir); }

/* DIR/name holding len bytes of a fixed pseudo-random text (printable and not). */
static const char *write_text(const char *name, size_t len, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", g_dir, name);
    sgp_write_noise(path, len);
    return path;
}

static int load(const char *file, const char *val, int context, nn_dataset *tr, nn_dataset *te, char *err,
                size_t errlen)
{
    char spec[1300];
    snprintf(spec, sizeof spec, "text:%.600s%s%.600s", file, val ? "," : "", val ? val : "");
    return nn_data_load(spec, context, tr, te, err, errlen);
}

Test(nn_text, the_last_tenth_is_held_out_byte_for_byte, .init = setup, .fini = teardown)
{
    char path[300], err[512];
    write_text("a.txt", 10007, path, sizeof path);
    nn_dataset tr = {0}, te = {0};
    cr_assert_eq(load(path, NULL, 16, &tr, &te, err, sizeof err), 0, "%s", err);
    cr_assert_eq(te.text_len, 1000); /* 10% of 10007, rounded down */
    cr_assert_eq(tr.text_len + te.text_len, 10007);
    FILE *f = fopen(path, "rb");
    uint8_t all[10007];
    cr_assert_eq(fread(all, 1, sizeof all, f), sizeof all);
    fclose(f);
    cr_assert_eq(memcmp(tr.text, all, tr.text_len), 0);
    cr_assert_eq(memcmp(te.text, all + tr.text_len, te.text_len), 0);
    cr_assert_eq(tr.w, 16);
    cr_assert_eq(tr.c * tr.h, 1);
    cr_assert_eq(tr.n, (int)(tr.text_len / 16), "an epoch is bytes / context windows");
    cr_assert_eq(tr.n_classes, 256);
    cr_assert_eq(nn_dataset_labels(&tr), 16);
    nn_dataset_free(&tr), nn_dataset_free(&te);
}

Test(nn_text, a_validation_file_is_used_whole, .init = setup, .fini = teardown)
{
    char a[300], b[300], err[512];
    write_text("a.txt", 500, a, sizeof a);
    write_text("b.txt", 70, b, sizeof b);
    nn_dataset tr = {0}, te = {0};
    cr_assert_eq(load(a, b, 8, &tr, &te, err, sizeof err), 0, "%s", err);
    cr_assert_eq(tr.text_len, 500);
    cr_assert_eq(te.text_len, 70);
    nn_dataset_free(&tr), nn_dataset_free(&te);
}

/* Each unusable file is -errno and one line naming the file and the reason. */
static void refused(int rc, const char *err, const char *path, const char *why)
{
    cr_assert_lt(rc, 0);
    cr_assert(strstr(err, path), "message names %s: %s", path, err);
    cr_assert(strstr(err, why), "message says '%s': %s", why, err);
    cr_assert_null(strchr(err, '\n'), "one line: %s", err);
}

Test(nn_text, unusable_files_are_refused_with_their_name, .init = setup, .fini = teardown)
{
    char path[300], val[300], err[512];
    nn_dataset tr = {0}, te = {0};
    write_text("empty.txt", 0, path, sizeof path);
    refused(load(path, NULL, 16, &tr, &te, err, sizeof err), err, path, "empty");
    write_text("short.txt", 16, path, sizeof path);
    refused(load(path, NULL, 16, &tr, &te, err, sizeof err), err, path, "too short");
    write_text("long.txt", 4000, path, sizeof path);
    write_text("v.txt", 16, val, sizeof val);
    refused(load(path, val, 16, &tr, &te, err, sizeof err), err, val, "shorter than one window of 17");
    refused(load(g_dir, NULL, 16, &tr, &te, err, sizeof err), err, g_dir, "directory");
    snprintf(path, sizeof path, "%s/missing.txt", g_dir);
    cr_assert_eq(load(path, NULL, 16, &tr, &te, err, sizeof err), -ENOENT);
    refused(-ENOENT, err, path, "No such file");
    cr_assert_eq(nn_data_load("text:", 16, &tr, &te, err, sizeof err), -EINVAL);
    cr_assert_null(tr.text);
    cr_assert_null(te.text);
}

Test(nn_text, batches_are_windows_whose_targets_are_the_next_bytes, .init = setup, .fini = teardown)
{
    char path[300], err[512];
    write_text("a.txt", 3001, path, sizeof path);
    nn_dataset d = {0};
    uint8_t *buf;
    size_t len;
    cr_assert_eq(nn_file_read(path, &buf, &len, err, sizeof err), 0);
    cr_assert_eq(nn_text_parse(buf, len, path, 10, &d, err, sizeof err), 0, "%s", err);
    nn_batcher b = {0}, again = {0};
    cr_assert_eq(nn_batcher_init(&b, &d, 7, 42, 3), 0);
    cr_assert_eq(nn_batcher_init(&again, &d, 7, 42, 3), 0);
    int first = -1, last = -1, seen = 0;
    for (int step = 0; step < nn_batcher_per_epoch(&b) + 1; step++) {
        int B = nn_batcher_next(&b);
        cr_assert_eq(nn_batcher_next(&again), B);
        cr_assert_eq(memcmp(b.x, again.x, (size_t)B * 10 * sizeof(float)), 0, "same seed, same windows");
        for (int i = 0; i < B; i++) {
            /* Find the window in the text: its bytes then the next one. */
            const float *x = b.x + (size_t)i * 10;
            const int *y = b.y + (size_t)i * 10;
            for (int t = 0; t + 1 < 10; t++)
                cr_assert_eq(y[t], (int)x[t + 1], "target t is token t + 1");
            int found = 0;
            for (size_t off = 0; off + 10 < len && !found; off++) {
                int ok = 1;
                for (int t = 0; t < 10 && ok; t++)
                    ok = buf[off + t] == (uint8_t)x[t] && buf[off + t + 1] == (uint8_t)y[t];
                if (ok) {
                    found = 1;
                    first = first < 0 || (int)off < first ? (int)off : first;
                    last = (int)off > last ? (int)off : last;
                }
            }
            cr_assert(found, "every window is context + 1 consecutive bytes of the text");
        }
        seen += B;
        if (step < nn_batcher_per_epoch(&b))
            cr_assert_eq(b.epoch, 0);
    }
    cr_assert_eq(b.epoch, 1, "an epoch is bytes / context windows (%d seen)", seen);
    cr_assert_lt(first, 300, "offsets spread over the text");
    cr_assert_gt(last, 2600, "offsets spread over the text");
    nn_batcher_free(&b), nn_batcher_free(&again);
    nn_dataset_free(&d);
    free(buf);
}

Test(nn_text, evaluation_windows_predict_every_byte_once)
{
    uint8_t text[103];
    for (int i = 0; i < 103; i++)
        text[i] = (uint8_t)(i * 7);
    nn_dataset d = {0};
    char err[256];
    cr_assert_eq(nn_text_parse(text, sizeof text, "t", 17, &d, err, sizeof err), 0);
    const int n = nn_text_windows(&d);
    cr_assert_eq(n, 102 / 17);
    float x[17];
    int y[17], next = 1;
    for (int i = 0; i < n; i++) {
        nn_text_window(&d, i, x, y);
        for (int t = 0; t < 17; t++, next++) {
            cr_assert_eq(y[t], text[next]);
            cr_assert_eq((int)x[t], text[next - 1]);
        }
    }
    cr_assert_eq(next, 103, "bytes 1..102 are each a target once");
    nn_dataset_free(&d);
}

Test(nn_text, shards_are_contiguous_disjoint_and_cover_the_text)
{
    uint8_t text[1000];
    for (int i = 0; i < 1000; i++)
        text[i] = (uint8_t)(i % 251);
    nn_dataset d = {0}, s = {0};
    char err[256];
    cr_assert_eq(nn_text_parse(text, sizeof text, "t", 8, &d, err, sizeof err), 0);
    size_t at = 0;
    for (int p = 0; p < 7; p++) {
        cr_assert_eq(nn_dataset_shard(&d, p, 7, 0, 99, &s, err, sizeof err), 0, "%s", err);
        cr_assert_eq(memcmp(s.text, text + at, s.text_len), 0, "peer %d's shard follows peer %d's", p, p - 1);
        cr_assert_eq(s.w, 8);
        at += s.text_len;
        nn_dataset_free(&s);
    }
    cr_assert_eq(at, sizeof text);
    cr_assert_eq(nn_dataset_shard(&d, 0, 2, 0.5, 99, &s, err, sizeof err), -EINVAL);
    cr_assert(strstr(err, "non-iid"), "%s", err);
    cr_assert_lt(nn_dataset_shard(&d, 0, 200, 0, 99, &s, err, sizeof err), 0, "5-byte shards hold no window");
    cr_assert(strstr(err, "shorter than one window"), "%s", err);
    nn_dataset_free(&d);
}
