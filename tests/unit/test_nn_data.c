/* Data loading: the embedded set, IDX/CIFAR/CSV parsers on good and damaged
 * input (each failure must name the file), and the shard invariants every peer
 * relies on (disjoint, covering, identical on every peer). */
#include "nn/nn_data.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "tests/sgp_files.h"

static char g_dir[64];

static void setup(void) { sgp_tmp_dir(g_dir, sizeof g_dir, "/tmp/test_nn_data_XXXXXX"); }

static void teardown(void) { sgp_rm_rf(g_dir); }

TestSuite(nn_data, .init = setup, .fini = teardown);

/* ---- helpers --------------------------------------------------------------- */

static char *tpath(const char *name) { return sgp_path_in(g_dir, name); }

static void gzip_mem(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len)
{
    z_stream zs = {0};
    cr_assert_eq(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&zs, len);
    *out = malloc(cap);
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)len;
    zs.next_out = *out;
    zs.avail_out = (uInt)cap;
    cr_assert_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
    *out_len = cap - zs.avail_out;
    deflateEnd(&zs);
}

static void put_file(const char *name, const void *buf, size_t len, int gz)
{
    uint8_t *z = NULL;
    if (gz)
        gzip_mem(buf, len, &z, &len), buf = z;
    FILE *f = fopen(tpath(name), "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
    free(z);
}

static void be32(uint8_t *p, uint32_t v)
{
    p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = v;
}

/* IDX images: n of rows x cols, pixel (i, j) = (7*i + j) % 256. *len is the full
 * length; claim_n lets a test lie in the header. */
static uint8_t *idx_images(uint32_t claim_n, uint32_t rows, uint32_t cols, size_t n, size_t *len)
{
    *len = 16 + n * rows * cols;
    uint8_t *b = malloc(*len);
    be32(b, 0x803), be32(b + 4, claim_n), be32(b + 8, rows), be32(b + 12, cols);
    for (size_t i = 0; i < n * rows * cols; i++)
        b[16 + i] = (uint8_t)((7 * (i / (rows * cols)) + i % (rows * cols)) % 256);
    return b;
}

/* IDX labels: label i = i % classes. */
static uint8_t *idx_labels(uint32_t claim_n, size_t n, int classes, size_t *len)
{
    *len = 8 + n;
    uint8_t *b = malloc(*len);
    be32(b, 0x801), be32(b + 4, claim_n);
    for (size_t i = 0; i < n; i++)
        b[8 + i] = (uint8_t)(i % classes);
    return b;
}

static void put_idx_pair(const char *prefix, size_t n, uint32_t rows, uint32_t cols, int classes, int gz)
{
    char name[128];
    size_t len;
    uint8_t *img = idx_images((uint32_t)n, rows, cols, n, &len);
    snprintf(name, sizeof name, "%s-images-idx3-ubyte%s", prefix, gz ? ".gz" : "");
    put_file(name, img, len, gz);
    free(img);
    uint8_t *lbl = idx_labels((uint32_t)n, n, classes, &len);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte%s", prefix, gz ? ".gz" : "");
    put_file(name, lbl, len, gz);
    free(lbl);
}

#define cr_assert_err_has(err, s) cr_assert(strstr((err), (s)), "message \"%s\" lacks \"%s\"", (err), (s))

/* ---- embedded set ---------------------------------------------------------- */

Test(nn_data, embedded_set)
{
    static const int want_train[10] = {801, 902, 793, 826, 784, 690, 811, 856, 755, 782};
    static const int want_test[10] = {200, 225, 198, 206, 196, 173, 203, 214, 189, 196};
    nn_dataset tr = {0}, te = {0};
    char err[256] = "";
    cr_assert_eq(nn_data_load(NULL, 0, &tr, &te, err, sizeof err), 0, "%s", err);
    cr_assert_eq(tr.n, 8000);
    cr_assert_eq(te.n, 2000);
    cr_assert(tr.c == 1 && tr.h == 28 && tr.w == 28 && te.c == 1 && te.h == 28 && te.w == 28);
    cr_assert_eq(tr.n_classes, 10);
    cr_assert_eq(te.n_classes, 10);
    const nn_dataset *sets[2] = {&tr, &te};
    const int *want[2] = {want_train, want_test};
    for (int s = 0; s < 2; s++) {
        int hist[10] = {0};
        for (int i = 0; i < sets[s]->n; i++) {
            cr_assert(sets[s]->y[i] >= 0 && sets[s]->y[i] < 10);
            hist[sets[s]->y[i]]++;
        }
        for (int k = 0; k < 10; k++)
            cr_assert_eq(hist[k], want[s][k], "split %d class %d: %d", s, k, hist[k]);
        float lo = 1, hi = 0;
        double sum = 0;
        for (size_t i = 0; i < (size_t)sets[s]->n * 784; i++) {
            float v = sets[s]->x[i];
            lo = v < lo ? v : lo, hi = v > hi ? v : hi, sum += v;
        }
        cr_assert(lo == 0.0f && hi == 1.0f, "pixel range [%g, %g]", lo, hi);
        /* MNIST is mostly background: mean ink about 0.13. */
        double mean = sum / ((double)sets[s]->n * 784);
        cr_assert(mean > 0.08 && mean < 0.2, "mean pixel %g", mean);
    }
    nn_dataset_free(&tr);
    nn_dataset_free(&te);
    /* "" means the embedded set too. */
    cr_assert_eq(nn_data_load("", 0, &tr, &te, err, sizeof err), 0, "%s", err);
    cr_assert_eq(tr.n, 8000);
    nn_dataset_free(&tr);
    nn_dataset_free(&te);
    nn_dataset_free(&tr); /* free twice and on zeroed structs is fine */
    nn_dataset_free(NULL);
}

/* ---- Fashion-MNIST: the cache `make data` writes ---------------------------- */

/* Each Criterion test runs in a process of its own, so the environment and the
 * working directory these tests change do not leak into other tests. */
Test(nn_data, fashion_missing_says_make_data)
{
    nn_dataset tr = {0}, te = {0};
    char err[1024] = "";
    /* SGP_DATA_DIR is the only place looked at when set, even though the
     * source tree's build/data/fashion may well exist. */
    cr_assert_eq(setenv("SGP_DATA_DIR", g_dir, 1), 0);
    cr_assert_eq(nn_data_load("fashion", 0, &tr, &te, err, sizeof err), -ENOENT, "%s", err);
    cr_assert_err_has(err, tpath("fashion"));
    cr_assert_err_has(err, "run `make data`");
    cr_assert_null(strchr(err, '\n'), "one line: %s", err);
    cr_assert(tr.x == NULL && te.x == NULL);

    /* A fashion/ directory without the files: the first missing one is named. */
    cr_assert_eq(mkdir(tpath("fashion"), 0755), 0);
    cr_assert_eq(nn_data_load("fashion", 0, &tr, &te, err, sizeof err), -ENOENT, "%s", err);
    cr_assert_err_has(err, "fashion/train-images-idx3-ubyte");
    cr_assert_err_has(err, "run `make data`");

    /* Unset, from a directory with no build/: both places looked in are named
     * (the second beside this test binary, where there is no cache). */
    cr_assert_eq(unsetenv("SGP_DATA_DIR"), 0);
    cr_assert_eq(chdir(tpath("fashion")), 0);
    cr_assert_eq(nn_data_load("fashion", 0, &tr, &te, err, sizeof err), -ENOENT, "%s", err);
    cr_assert_err_has(err, "looked in build/data/fashion and /");
    cr_assert_err_has(err, "run `make data`");
}

/* FNV-1a, 64 bits: an order-sensitive checksum to compare with the converter's output. */
static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Labels then pixel bytes, as in the IDX files; every pixel must be k/255 exactly. */
static uint64_t fashion_checksum(const nn_dataset *d, uint64_t *pixel_sum)
{
    uint64_t h = 0xcbf29ce484222325ull;
    uint8_t *b = malloc((size_t)d->n * 784);
    cr_assert_not_null(b);
    for (int i = 0; i < d->n; i++)
        b[i] = (uint8_t)d->y[i];
    h = fnv1a(h, b, (size_t)d->n);
    *pixel_sum = 0;
    for (size_t i = 0; i < (size_t)d->n * 784; i++) {
        float v = d->x[i] * 255.0f;
        long k = lrintf(v);
        cr_assert(k >= 0 && k <= 255 && fabsf(v - (float)k) < 1e-3f, "pixel %zu is %g, not k/255", i, d->x[i]);
        b[i] = (uint8_t)k;
        *pixel_sum += (uint64_t)k;
    }
    h = fnv1a(h, b, (size_t)d->n * 784);
    free(b);
    return h;
}

Test(nn_data, fashion_when_present, .timeout = 60)
{
    nn_dataset tr = {0}, te = {0};
    char err[1024] = "";
    int rc = nn_data_load("fashion", 0, &tr, &te, err, sizeof err);
    if (rc == -ENOENT)
        cr_skip_test("Fashion-MNIST is not downloaded (run `make data` first; `make test` does): %s", err);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_eq(tr.n, 60000);
    cr_assert_eq(te.n, 10000);
    cr_assert(tr.c == 1 && tr.h == 28 && tr.w == 28 && te.c == 1 && te.h == 28 && te.w == 28);
    cr_assert(tr.n_classes == 10 && te.n_classes == 10);
    /* Stratified like the original split: 6,000 train and 1,000 test per class. */
    int hist[2][10] = {{0}};
    for (int i = 0; i < tr.n; i++)
        hist[0][tr.y[i]]++;
    for (int i = 0; i < te.n; i++)
        hist[1][te.y[i]]++;
    for (int k = 0; k < 10; k++)
        cr_assert(hist[0][k] == 6000 && hist[1][k] == 1000, "class %d: %d train, %d test", k, hist[0][k],
                  hist[1][k]);
    /* What nn/data/make_fashion.py wrote (its recorded SHA-256 pin the same bytes). */
    uint64_t sum;
    cr_assert_eq(fashion_checksum(&tr, &sum), 0x0b6933c2cf3b262aull);
    cr_assert_eq(sum, 3430845465ull);
    cr_assert_eq(fashion_checksum(&te, &sum), 0x1d0b6885a4775e63ull);
    cr_assert_eq(sum, 574624558ull);
    nn_dataset_free(&tr);
    nn_dataset_free(&te);
}

/* ---- IDX ------------------------------------------------------------------- */

static void check_idx(const nn_dataset *d, int n, int rows, int cols, int classes)
{
    cr_assert_eq(d->n, n);
    cr_assert(d->c == 1 && d->h == rows && d->w == cols, "shape %dx%dx%d", d->c, d->h, d->w);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(d->y[i], i % classes);
        for (int j = 0; j < rows * cols; j++)
            cr_assert_eq(d->x[(size_t)i * rows * cols + j], (float)((7 * i + j) % 256) / 255.0f);
    }
}

Test(nn_data, idx_round_trip_raw_and_gz)
{
    /* train raw, test gzip'ed; test has only two of the three classes, so its
     * n_classes must be raised to train's. */
    put_idx_pair("train", 11, 5, 7, 3, 0);
    put_idx_pair("t10k", 4, 5, 7, 2, 1);
    nn_dataset tr = {0}, te = {0};
    char err[256] = "";
    cr_assert_eq(nn_data_load(g_dir, 0, &tr, &te, err, sizeof err), 0, "%s", err);
    check_idx(&tr, 11, 5, 7, 3);
    check_idx(&te, 4, 5, 7, 2);
    cr_assert_eq(tr.n_classes, 3);
    cr_assert_eq(te.n_classes, 3);
    nn_dataset_free(&tr);
    nn_dataset_free(&te);

    /* The same through nn_idx_load on the gzip'ed pair directly. */
    put_idx_pair("gz", 6, 7, 5, 3, 1);
    cr_assert_eq(nn_idx_load(tpath("gz-images-idx3-ubyte.gz"), tpath("gz-labels-idx1-ubyte.gz"), &tr, err,
                             sizeof err), 0, "%s", err);
    check_idx(&tr, 6, 7, 5, 3);
    cr_assert_eq(tr.n_classes, 3);
    nn_dataset_free(&tr);
}

Test(nn_data, idx_shape_mismatch_between_train_and_test)
{
    put_idx_pair("train", 3, 5, 7, 3, 0);
    put_idx_pair("t10k", 3, 7, 5, 3, 0);
    nn_dataset tr = {0}, te = {0};
    char err[256] = "";
    cr_assert_eq(nn_data_load(g_dir, 0, &tr, &te, err, sizeof err), -EBADMSG);
    cr_assert_err_has(err, "1x7x5");
    cr_assert(tr.x == NULL && te.x == NULL, "failed load must leave datasets empty");
}

/* Parse a (possibly damaged) pair from memory and from files; both must fail
 * with -EBADMSG and a message naming `blame`. */
static void expect_idx_error(const uint8_t *img, size_t img_len, const uint8_t *lbl, size_t lbl_len,
                             const char *blame, const char *says)
{
    nn_dataset d = {0};
    char err[512] = "";
    int rc = nn_idx_parse(img, img_len, "img.idx", lbl, lbl_len, "lbl.idx", &d, err, sizeof err);
    cr_assert_eq(rc, -EBADMSG, "rc %d (%s)", rc, err);
    cr_assert(d.x == NULL && d.y == NULL);
    cr_assert_err_has(err, blame);
    if (says)
        cr_assert_err_has(err, says);

    put_file("img.idx", img, img_len, 0);
    put_file("lbl.idx", lbl, lbl_len, 0);
    rc = nn_idx_load(tpath("img.idx"), tpath("lbl.idx"), &d, err, sizeof err);
    cr_assert_eq(rc, -EBADMSG, "rc %d (%s)", rc, err);
    cr_assert_err_has(err, g_dir); /* the full path */
    cr_assert_err_has(err, blame);
}

Test(nn_data, idx_truncated_images)
{
    size_t il, ll;
    uint8_t *img = idx_images(60000, 28, 28, 1, &il);
    uint8_t *lbl = idx_labels(60000, 60000, 10, &ll);
    nn_dataset d = {0};
    char err[256];
    cr_assert_eq(nn_idx_parse(img, 1234, "f", lbl, ll, "l", &d, err, sizeof err), -EBADMSG);
    cr_assert_str_eq(err, "f: truncated: header says 60000 images of 28x28 (47040016 bytes), file has 1234 bytes");
    expect_idx_error(img, il, lbl, ll, "img.idx", "truncated");
    expect_idx_error(img, 10, lbl, ll, "img.idx", "truncated"); /* not even a header */
    free(img);
    free(lbl);
}

Test(nn_data, idx_truncated_labels_and_trailing_data)
{
    size_t il, ll;
    uint8_t *img = idx_images(10, 5, 7, 10, &il);
    uint8_t *lbl = idx_labels(10, 10, 3, &ll);
    expect_idx_error(img, il, lbl, ll - 1, "lbl.idx", "truncated");
    expect_idx_error(img, il, lbl, 6, "lbl.idx", "truncated");
    expect_idx_error(img, il - 1, lbl, ll, "img.idx", "truncated");
    uint8_t *longer = calloc(il + 3, 1);
    memcpy(longer, img, il);
    expect_idx_error(longer, il + 3, lbl, ll, "img.idx", "trailing");
    free(longer);
    free(img);
    free(lbl);
}

Test(nn_data, idx_wrong_magic)
{
    size_t il, ll;
    uint8_t *img = idx_images(4, 5, 7, 4, &il);
    uint8_t *lbl = idx_labels(4, 4, 3, &ll);
    /* Swapped files: each has the other's magic. */
    expect_idx_error(lbl, ll, img, il, "img.idx", "magic");
    img[3] = 0x08; /* 0x00000808: a 3-dim float file, not u8 images */
    expect_idx_error(img, il, lbl, ll, "img.idx", "0x00000808");
    img[3] = 0x03;
    lbl[3] = 0x03;
    expect_idx_error(img, il, lbl, ll, "lbl.idx", "magic");
    free(img);
    free(lbl);
}

Test(nn_data, idx_label_count_mismatch_names_both)
{
    size_t il, ll;
    uint8_t *img = idx_images(5, 5, 7, 5, &il);
    uint8_t *lbl = idx_labels(4, 4, 3, &ll);
    expect_idx_error(img, il, lbl, ll, "img.idx", "lbl.idx");
    free(img);
    free(lbl);
}

Test(nn_data, idx_gigantic_header_allocates_nothing)
{
    /* Under ASan a multi-terabyte malloc would abort the test, so passing
     * means the length check ran first. */
    size_t il, ll;
    uint8_t *img = idx_images(0xffffffffu, 0xffff, 0xffff, 0, &il); /* product overflows 64 bits */
    uint8_t *lbl = idx_labels(0xffffffffu, 0, 3, &ll);
    expect_idx_error(img, il, lbl, ll, "img.idx", "too large");
    be32(img + 4, 2000000000), be32(img + 8, 28), be32(img + 12, 28); /* 1.5 TB: fits size_t, not the file */
    expect_idx_error(img, il, lbl, ll, "img.idx", "truncated");
    size_t gl;
    uint8_t *good = idx_images(3, 2, 2, 3, &gl);
    expect_idx_error(good, gl, lbl, ll, "lbl.idx", "truncated"); /* 4 billion labels */
    be32(img + 4, 0);
    expect_idx_error(img, il, lbl, ll, "img.idx", "0 images");
    free(good);
    free(img);
    free(lbl);
}

Test(nn_data, idx_empty_file)
{
    size_t ll;
    uint8_t *lbl = idx_labels(4, 4, 3, &ll);
    expect_idx_error(lbl, 0, lbl, ll, "img.idx", "empty");
    free(lbl);
}

Test(nn_data, gzip_corrupt_and_truncated)
{
    size_t il, zl;
    uint8_t *img = idx_images(20, 5, 7, 20, &il), *z;
    gzip_mem(img, il, &z, &zl);
    uint8_t *out = NULL;
    size_t out_len = 0;
    char err[256] = "";
    cr_assert_eq(nn_gunzip(z, zl, "ok.gz", &out, &out_len, err, sizeof err), 0, "%s", err);
    cr_assert_eq(out_len, il);
    cr_assert_eq(memcmp(out, img, il), 0);
    free(out);

    cr_assert_eq(nn_gunzip(z, zl / 2, "half.gz", &out, &out_len, err, sizeof err), -EBADMSG);
    cr_assert_str_eq(err, "half.gz: truncated gzip stream");
    cr_assert_null(out);
    put_file("half.gz", z, zl / 2, 0);
    cr_assert_eq(nn_file_read(tpath("half.gz"), &out, &out_len, err, sizeof err), -EBADMSG);
    cr_assert_err_has(err, tpath("half.gz"));
    cr_assert_err_has(err, "truncated gzip stream");

    uint8_t *bad = malloc(zl);
    memcpy(bad, z, zl);
    bad[3] = 0xe0; /* reserved FLG bits set: invalid header */
    cr_assert_eq(nn_gunzip(bad, zl, "bad.gz", &out, &out_len, err, sizeof err), -EBADMSG);
    cr_assert_err_has(err, "bad.gz: corrupt gzip");
    memcpy(bad, z, zl);
    bad[zl - 6] ^= 0xff; /* CRC */
    cr_assert_eq(nn_gunzip(bad, zl, "crc.gz", &out, &out_len, err, sizeof err), -EBADMSG);
    cr_assert_err_has(err, "crc.gz: corrupt gzip");
    put_file("crc.gz", bad, zl, 0);
    nn_dataset d = {0};
    size_t ll;
    uint8_t *lbl = idx_labels(20, 20, 3, &ll);
    put_file("lbl", lbl, ll, 0);
    cr_assert_eq(nn_idx_load(tpath("crc.gz"), tpath("lbl"), &d, err, sizeof err), -EBADMSG);
    cr_assert_err_has(err, tpath("crc.gz"));
    cr_assert_eq(nn_gunzip(img, il, "raw", &out, &out_len, err, sizeof err), -EBADMSG);
    free(lbl);
    free(bad);
    free(z);
    free(img);
}

Test(nn_data, gzip_members_concatenate_and_garbage_is_refused)
{
    uint8_t *a, *b;
    size_t al, bl;
    gzip_mem((const uint8_t *)"hello ", 6, &a, &al);
    gzip_mem((const uint8_t *)"world", 5, &b, &bl);
    uint8_t *cat = malloc(al + bl + 1);
    memcpy(cat, a, al);
    memcpy(cat + al, b, bl);
    uint8_t *out;
    size_t n;
    char err[256];
    cr_assert_eq(nn_gunzip(cat, al + bl, "cat.gz", &out, &n, err, sizeof err), 0, "%s", err);
    cr_assert_eq(n, 11);
    cr_assert_eq(memcmp(out, "hello world", 11), 0);
    free(out);
    cat[al] = 0;
    cr_assert_eq(nn_gunzip(cat, al + 1, "junk.gz", &out, &n, err, sizeof err), -EBADMSG);
    cr_assert_err_has(err, "trailing garbage");
    free(cat);
    free(a);
    free(b);
}

Test(nn_data, missing_files_are_named)
{
    uint8_t *buf;
    size_t len;
    char err[512];
    cr_assert_eq(nn_file_read(tpath("nope"), &buf, &len, err, sizeof err), -ENOENT);
    char want[512];
    snprintf(want, sizeof want, "%s: No such file or directory", tpath("nope"));
    cr_assert_str_eq(err, want);

    put_idx_pair("train", 3, 5, 7, 3, 1);
    put_idx_pair("t10k", 3, 5, 7, 3, 0);
    remove(tpath("t10k-labels-idx1-ubyte"));
    nn_dataset tr = {0}, te = {0};
    cr_assert_eq(nn_data_load(g_dir, 0, &tr, &te, err, sizeof err), -ENOENT);
    cr_assert_err_has(err, "t10k-labels-idx1-ubyte");
    cr_assert_err_has(err, g_dir);
    cr_assert(tr.x == NULL && te.x == NULL);
}

/* ---- CIFAR-10 -------------------------------------------------------------- */

static uint8_t *cifar_records(int n, int first_label, size_t *len)
{
    *len = (size_t)n * 3073;
    uint8_t *b = malloc(*len);
    for (int i = 0; i < n; i++) {
        b[(size_t)i * 3073] = (uint8_t)((first_label + i) % 10);
        for (int j = 0; j < 3072; j++)
            b[(size_t)i * 3073 + 1 + j] = (uint8_t)(i + j);
    }
    return b;
}

Test(nn_data, cifar_parse_good)
{
    size_t len;
    uint8_t *b = cifar_records(3, 8, &len);
    nn_dataset d = {0};
    char err[256] = "";
    cr_assert_eq(nn_cifar10_parse(b, len, "batch", &d, err, sizeof err), 0, "%s", err);
    cr_assert(d.n == 3 && d.c == 3 && d.h == 32 && d.w == 32 && d.n_classes == 10);
    cr_assert(d.y[0] == 8 && d.y[1] == 9 && d.y[2] == 0);
    /* Planes stay R, G, B: element 1024 is the first green pixel. */
    cr_assert_eq(d.x[1 * 3072 + 1024], (float)((1 + 1024) % 256) / 255.0f);
    cr_assert_eq(d.x[2 * 3072 + 3071], (float)((2 + 3071) % 256) / 255.0f);
    nn_dataset_free(&d);
    free(b);
}

Test(nn_data, cifar_parse_bad)
{
    size_t len;
    uint8_t *b = cifar_records(2, 0, &len);
    nn_dataset d = {0};
    char err[256] = "";
    cr_assert_eq(nn_cifar10_parse(b, len - 5, "short.bin", &d, err, sizeof err), -EBADMSG);
    cr_assert_err_has(err, "short.bin");
    cr_assert_err_has(err, "3073");
    cr_assert_eq(nn_cifar10_parse(b, 0, "empty.bin", &d, err, sizeof err), -EBADMSG);
    cr_assert_err_has(err, "empty.bin: empty");
    b[3073] = 10;
    cr_assert_eq(nn_cifar10_parse(b, len, "lbl.bin", &d, err, sizeof err), -EBADMSG);
    cr_assert_str_eq(err, "lbl.bin: record 1: label 10 out of range 0..9");
    cr_assert_null(d.x);
    free(b);
}

Test(nn_data, cifar_directory)
{
    size_t len;
    for (int i = 1; i <= 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "data_batch_%d.bin", i);
        uint8_t *b = cifar_records(2, 2 * i, &len);
        put_file(name, b, len, 0);
        free(b);
    }
    uint8_t *b = cifar_records(3, 0, &len);
    put_file("test_batch.bin", b, len, 0);
    free(b);
    char spec[128], err[256] = "";
    snprintf(spec, sizeof spec, "cifar10:%s", g_dir);
    nn_dataset tr = {0}, te = {0};
    cr_assert_eq(nn_data_load(spec, 0, &tr, &te, err, sizeof err), 0, "%s", err);
    cr_assert_eq(tr.n, 10);
    cr_assert_eq(te.n, 3);
    for (int i = 0; i < 10; i++) /* batches in order 1..5, record labels 2i, 2i+1 mod 10 */
        cr_assert_eq(tr.y[i], (i + 2) % 10);
    cr_assert_eq(tr.x[9 * 3072 + 5], (float)((1 + 5) % 256) / 255.0f);
    nn_dataset_free(&tr);
    nn_dataset_free(&te);

    remove(tpath("data_batch_3.bin"));
    cr_assert_eq(nn_data_load(spec, 0, &tr, &te, err, sizeof err), -ENOENT);
    cr_assert_err_has(err, "data_batch_3.bin: No such file");
    cr_assert(tr.x == NULL && te.x == NULL);
}

/* ---- CSV ------------------------------------------------------------------- */

static int csv(const char *text, nn_dataset *d, char *err, size_t errlen)
{
    return nn_csv_parse(text, strlen(text), "f.csv", d, err, errlen);
}

Test(nn_data, csv_good)
{
    nn_dataset d = {0};
    char err[256] = "";
    cr_assert_eq(csv("label,a,b,c\r\n1,0.5,2,3\r\n\r\n  \r\n0, 1e-3 ,-4,5\r\n2,0,0,7", &d, err, sizeof err), 0,
                 "%s", err);
    cr_assert(d.n == 3 && d.c == 1 && d.h == 1 && d.w == 3 && d.n_classes == 3);
    cr_assert(d.y[0] == 1 && d.y[1] == 0 && d.y[2] == 2);
    cr_assert_eq(d.x[0], 0.5f);
    cr_assert_eq(d.x[3], 1e-3f);
    cr_assert_eq(d.x[4], -4.0f);
    cr_assert_eq(d.x[8], 7.0f);
    nn_dataset_free(&d);

    /* No header: the first line is data. */
    cr_assert_eq(csv("4,1.5\n0,2.5\n", &d, err, sizeof err), 0, "%s", err);
    cr_assert(d.n == 2 && d.w == 1 && d.n_classes == 5 && d.x[1] == 2.5f);
    nn_dataset_free(&d);
}

Test(nn_data, csv_ragged_row_names_the_line)
{
    nn_dataset d = {0};
    char err[256] = "";
    /* Line 5 counts the header and the blank line. */
    cr_assert_eq(csv("y,a,b\n1,2,3\n\n0,1,1\n2,5\n1,1,1\n", &d, err, sizeof err), -EBADMSG);
    cr_assert_str_eq(err, "f.csv:5: expected 3 fields, found 2");
    cr_assert_null(d.x);
    cr_assert_eq(csv("1,2,3\r\n0,1,1,4\r\n", &d, err, sizeof err), -EBADMSG);
    cr_assert_str_eq(err, "f.csv:2: expected 3 fields, found 4");
}

Test(nn_data, csv_bad_values)
{
    nn_dataset d = {0};
    char err[256] = "";
    cr_assert_eq(csv("1,2,3\n0,1.2.3,1\n", &d, err, sizeof err), -EBADMSG);
    cr_assert_err_has(err, "f.csv:2: field 2");
    cr_assert_eq(csv("1,2,abc\n", &d, err, sizeof err), -EBADMSG); /* a header needs a non-number first */
    cr_assert_err_has(err, "f.csv:1: field 3: 'abc'");
    cr_assert_eq(csv("1,2,nan\n", &d, err, sizeof err), -EBADMSG);
    cr_assert_err_has(err, "f.csv:1");
    cr_assert_eq(csv("1,2,1e999\n", &d, err, sizeof err), -EBADMSG);
    cr_assert_eq(csv("1,,3\n", &d, err, sizeof err), -EBADMSG);
    cr_assert_eq(csv("1,2\n-1,3\n", &d, err, sizeof err), -EBADMSG);
    cr_assert_str_eq(err, "f.csv:2: label -1 is negative");
    cr_assert_eq(csv("1,2\n1.5,3\n", &d, err, sizeof err), -EBADMSG);
    cr_assert_err_has(err, "f.csv:2: label '1.5'");
    cr_assert_eq(csv("1,2\n99999999,3\n", &d, err, sizeof err), -EBADMSG);
    cr_assert_err_has(err, "too large");
    cr_assert_eq(csv("label,a\n\n", &d, err, sizeof err), -EBADMSG);
    cr_assert_str_eq(err, "f.csv: no data rows");
    cr_assert_eq(csv("3\n", &d, err, sizeof err), -EBADMSG);
    cr_assert_null(d.x);
    /* An embedded NUL is not end of input. */
    cr_assert_eq(nn_csv_parse("1,2\n1,\0" "2\n", 8, "f.csv", &d, err, sizeof err), -EBADMSG);
    cr_assert_err_has(err, "f.csv:2: NUL");
}

Test(nn_data, csv_through_data_load)
{
    put_file("tr.csv", "y,a,b\n0,1,2\n1,3,4\n2,5,6\n", 24, 0);
    const char *te_text = "0,1,1\n1,2,2\n";
    put_file("te.csv.gz", te_text, strlen(te_text), 1);
    char spec[256], err[256] = "";
    snprintf(spec, sizeof spec, "csv:%s,%s", tpath("tr.csv"), tpath("te.csv.gz"));
    nn_dataset tr = {0}, te = {0};
    cr_assert_eq(nn_data_load(spec, 0, &tr, &te, err, sizeof err), 0, "%s", err);
    cr_assert(tr.n == 3 && te.n == 2 && tr.w == 2 && te.n_classes == 3);
    nn_dataset_free(&tr);
    nn_dataset_free(&te);
    cr_assert_eq(nn_data_load("csv:only-one", 0, &tr, &te, err, sizeof err), -EINVAL);
    cr_assert_err_has(err, "csv:TRAIN,TEST");
}

/* ---- shards and subsets ---------------------------------------------------- */

/* Labels with unequal class sizes and a total not divisible by 8. */
static nn_dataset label_set(int n, int classes)
{
    nn_dataset d = {.n = n, .c = 1, .h = 1, .w = 1, .n_classes = classes};
    d.x = calloc((size_t)n, sizeof *d.x);
    d.y = malloc((size_t)n * sizeof *d.y);
    for (int i = 0; i < n; i++) {
        d.y[i] = (int)((unsigned)(i * 2654435761u) >> 16) % classes;
        d.y[i] = d.y[i] < classes / 2 ? d.y[i] : (d.y[i] * 7 + i) % classes;
        d.x[i] = (float)i;
    }
    return d;
}

typedef struct shards {
    int *idx[8];
    int count[8];
} shards;

static shards make_shards(const nn_dataset *d, double alpha, uint64_t seed)
{
    shards s;
    for (int p = 0; p < 8; p++)
        cr_assert_eq(nn_shard_indices(d, p, 8, alpha, seed, &s.idx[p], &s.count[p]), 0);
    return s;
}

static void free_shards(shards *s)
{
    for (int p = 0; p < 8; p++)
        free(s->idx[p]);
}

static void check_partition(const nn_dataset *d, const shards *s)
{
    int *owner = malloc((size_t)d->n * sizeof *owner);
    for (int i = 0; i < d->n; i++)
        owner[i] = -1;
    for (int p = 0; p < 8; p++)
        for (int i = 0; i < s->count[p]; i++) {
            int k = s->idx[p][i];
            cr_assert(k >= 0 && k < d->n, "index %d out of range", k);
            cr_assert(i == 0 || s->idx[p][i - 1] < k, "shard %d not strictly ascending", p);
            cr_assert_eq(owner[k], -1, "index %d in shards %d and %d", k, owner[k], p);
            owner[k] = p;
        }
    for (int i = 0; i < d->n; i++)
        cr_assert_neq(owner[i], -1, "index %d in no shard", i);
    free(owner);
}

static int same_shards(const shards *a, const shards *b)
{
    for (int p = 0; p < 8; p++)
        if (a->count[p] != b->count[p] || memcmp(a->idx[p], b->idx[p], (size_t)a->count[p] * sizeof(int)))
            return 0;
    return 1;
}

/* Largest total-variation distance between a shard's label histogram and the
 * whole set's: 0 for a perfectly representative shard, near 1 for one class. */
static double max_skew(const nn_dataset *d, const shards *s)
{
    double global[10] = {0}, worst = 0;
    for (int i = 0; i < d->n; i++)
        global[d->y[i]] += 1.0 / d->n;
    for (int p = 0; p < 8; p++) {
        double h[10] = {0}, tv = 0;
        for (int i = 0; i < s->count[p]; i++)
            h[d->y[s->idx[p][i]]] += 1.0 / s->count[p];
        for (int k = 0; k < 10; k++)
            tv += fabs(h[k] - global[k]) / 2;
        worst = tv > worst ? tv : worst;
    }
    return worst;
}

/* Shards must be drawn from all over the index range, not cut in runs: data
 * files are often ordered (by class, by source batch). Returns the largest
 * distance of a shard's mean index from the middle, as a fraction of n. */
static double max_mean_offset(const nn_dataset *d, const shards *s)
{
    double worst = 0;
    for (int p = 0; p < 8; p++) {
        double mean = 0;
        for (int i = 0; i < s->count[p]; i++)
            mean += s->idx[p][i];
        double off = fabs(mean / s->count[p] / d->n - 0.5);
        worst = off > worst ? off : worst;
    }
    return worst;
}

Test(nn_data, shard_iid)
{
    nn_dataset d = label_set(10007, 10);
    shards a = make_shards(&d, 0, 42), b = make_shards(&d, 0, 42), c = make_shards(&d, 0, 43);
    check_partition(&d, &a);
    check_partition(&d, &c);
    cr_assert(same_shards(&a, &b), "same seed must give the same shards");
    cr_assert(!same_shards(&a, &c), "another seed must give other shards");
    int lo = d.n, hi = 0;
    for (int p = 0; p < 8; p++)
        lo = a.count[p] < lo ? a.count[p] : lo, hi = a.count[p] > hi ? a.count[p] : hi;
    cr_assert(hi - lo <= 1, "iid sizes %d..%d", lo, hi);
    cr_assert(max_skew(&d, &a) < 0.1, "iid shards skewed: %g", max_skew(&d, &a));
    cr_assert(max_mean_offset(&d, &a) < 0.1, "iid shards not spread: %g", max_mean_offset(&d, &a));
    free_shards(&a), free_shards(&b), free_shards(&c);
    nn_dataset_free(&d);
}

Test(nn_data, shard_dirichlet)
{
    nn_dataset d = label_set(10007, 10);
    shards a = make_shards(&d, 0.5, 42), b = make_shards(&d, 0.5, 42), c = make_shards(&d, 0.5, 43);
    check_partition(&d, &a);
    check_partition(&d, &c);
    cr_assert(same_shards(&a, &b), "same seed must give the same shards");
    cr_assert(!same_shards(&a, &c), "another seed must give other shards");
    double skew = max_skew(&d, &a);
    cr_assert(skew > 0.3, "alpha 0.5 should skew some shard; worst TV distance %g", skew);
    free_shards(&a), free_shards(&b), free_shards(&c);

    /* Large alpha approaches iid; tiny alpha hands each class to about one peer. */
    shards big = make_shards(&d, 1000, 7), tiny = make_shards(&d, 1e-6, 7);
    check_partition(&d, &big);
    check_partition(&d, &tiny);
    cr_assert(max_skew(&d, &big) < 0.1, "alpha 1000 skew %g", max_skew(&d, &big));
    cr_assert(max_mean_offset(&d, &big) < 0.1, "alpha 1000 shards not spread: %g", max_mean_offset(&d, &big));
    cr_assert(max_skew(&d, &tiny) > 0.6, "alpha 1e-6 skew %g", max_skew(&d, &tiny));
    free_shards(&big), free_shards(&tiny);
    nn_dataset_free(&d);
}

Test(nn_data, shard_edge_cases)
{
    nn_dataset d = label_set(5, 3);
    int *idx, n;
    cr_assert_eq(nn_shard_indices(&d, 0, 1, 0.5, 1, &idx, &n), 0);
    cr_assert_eq(n, 5);
    free(idx);
    /* More peers than samples: some shards are empty but still non-NULL. */
    int total = 0;
    for (int p = 0; p < 8; p++) {
        cr_assert_eq(nn_shard_indices(&d, p, 8, 0, 1, &idx, &n), 0);
        cr_assert_not_null(idx);
        total += n;
        free(idx);
    }
    cr_assert_eq(total, 5);
    cr_assert_eq(nn_shard_indices(&d, 8, 8, 0, 1, &idx, &n), -EINVAL);
    cr_assert_eq(nn_shard_indices(&d, -1, 8, 0, 1, &idx, &n), -EINVAL);
    cr_assert_eq(nn_shard_indices(&d, 0, 0, 0, 1, &idx, &n), -EINVAL);
    cr_assert_eq(nn_shard_indices(&d, 0, 2, NAN, 1, &idx, &n), -EINVAL);
    d.y[2] = 3; /* outside n_classes */
    cr_assert_eq(nn_shard_indices(&d, 0, 2, 0.5, 1, &idx, &n), -EINVAL);
    nn_dataset_free(&d);
}

Test(nn_data, subset_copies_rows)
{
    put_idx_pair("s", 6, 2, 3, 3, 0);
    nn_dataset d = {0}, s = {0};
    char err[256] = "";
    cr_assert_eq(nn_idx_load(tpath("s-images-idx3-ubyte"), tpath("s-labels-idx1-ubyte"), &d, err, sizeof err),
                 0, "%s", err);
    int idx[3] = {5, 0, 2};
    cr_assert_eq(nn_dataset_subset(&d, idx, 3, &s), 0);
    cr_assert(s.n == 3 && s.h == 2 && s.w == 3 && s.n_classes == 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(s.y[i], d.y[idx[i]]);
        cr_assert_eq(memcmp(s.x + i * 6, d.x + idx[i] * 6, 6 * sizeof(float)), 0);
    }
    nn_dataset_free(&s);
    idx[1] = 6;
    cr_assert_eq(nn_dataset_subset(&d, idx, 3, &s), -EINVAL);
    cr_assert_eq(nn_dataset_subset(&d, idx, 0, &s), 0);
    cr_assert_eq(s.n, 0);
    nn_dataset_free(&s);
    nn_dataset_free(&d);
}

/* ---- inputs to classify (sgp predict) ---------------------------------------- */

static int inputs(const char *name, const void *buf, size_t len, int h, int w, nn_dataset *d, char *err)
{
    put_file(name, buf, len, 0);
    return nn_inputs_load(tpath(name), 1, h, w, d, err, 256);
}

Test(nn_data, inputs_pgm_ascii_binary_and_sixteen_bit)
{
    nn_dataset d;
    char err[256];
    const char p2[] = "P2\n# a comment\n3 2\n15\n0 15 5\n# another\n10 1 2\n";
    cr_assert_eq(inputs("a.pgm", p2, sizeof p2 - 1, 2, 3, &d, err), 0, "%s", err);
    cr_assert(d.n == 1 && d.c == 1 && d.h == 2 && d.w == 3 && d.y[0] == -1);
    cr_assert_float_eq(d.x[1], 1.0f, 0);
    cr_assert_float_eq(d.x[2], 5.0f / 15.0f, 1e-7);
    nn_dataset_free(&d);

    const uint8_t p5[] = {'P', '5', ' ', '2', ' ', '1', ' ', '6', '5', '5', '3', '5', '\n', 0xff, 0xff, 0x80, 0x00};
    cr_assert_eq(inputs("b.pgm", p5, sizeof p5, 1, 2, &d, err), 0, "%s", err);
    cr_assert_float_eq(d.x[0], 1.0f, 0);
    cr_assert_float_eq(d.x[1], 32768.0f / 65535.0f, 1e-7);
    nn_dataset_free(&d);

    cr_assert_eq(inputs("c.pgm", p5, sizeof p5 - 1, 1, 2, &d, err), -EBADMSG);
    cr_assert(strstr(err, "c.pgm: truncated"), "%s", err);
    cr_assert_eq(inputs("d.pgm", p2, sizeof p2 - 1, 28, 28, &d, err), -EINVAL);
    cr_assert(strstr(err, "a 3x2 grey image; the model takes 1x28x28"), "%s", err);
    const char over[] = "P2 1 1 7 8\n";
    cr_assert_eq(inputs("e.pgm", over, sizeof over - 1, 1, 1, &d, err), -EBADMSG);
    cr_assert(strstr(err, "pixel 1 is 8, over maxval 7"), "%s", err);
    const char bad[] = "P5 x 1 255\n";
    cr_assert_eq(inputs("f.pgm", bad, sizeof bad - 1, 1, 1, &d, err), -EBADMSG);
    cr_assert(strstr(err, "f.pgm: a malformed PGM header"), "%s", err);
}

Test(nn_data, inputs_idx_and_csv)
{
    nn_dataset d;
    char err[256];
    size_t len;
    uint8_t *img = idx_images(3, 2, 2, 3, &len);
    cr_assert_eq(inputs("x.idx", img, len, 2, 2, &d, err), 0, "%s", err);
    cr_assert(d.n == 3 && d.y[2] == -1);
    nn_dataset_free(&d);
    cr_assert_eq(inputs("y.idx", img, len, 3, 3, &d, err), -EINVAL);
    cr_assert(strstr(err, "y.idx: 2x2 images; the model takes 1x3x3"), "%s", err);
    cr_assert_eq(inputs("z.idx", img, len - 1, 2, 2, &d, err), -EBADMSG);
    cr_assert(strstr(err, "z.idx: truncated"), "%s", err);
    free(img);

    const char csv[] = "a,b,c,d\n0.5,0.25,0,1\n\n3,1,1,1,1\r\n";
    cr_assert_eq(inputs("r.csv", csv, sizeof csv - 1, 2, 2, &d, err), 0, "%s", err);
    cr_assert(d.n == 2 && d.y[0] == -1 && d.y[1] == 3);
    cr_assert_float_eq(d.x[1], 0.25f, 0);
    cr_assert_float_eq(d.x[4], 1.0f, 0);
    nn_dataset_free(&d);
    const char ragged[] = "0,0,0,0\n1,2\n";
    cr_assert_eq(inputs("s.csv", ragged, sizeof ragged - 1, 2, 2, &d, err), -EINVAL);
    cr_assert(strstr(err, "s.csv:2: 2 values; the model takes 4"), "%s", err);
    const char word[] = "0,0,0,0\n1,x,1,1\n";
    cr_assert_eq(inputs("t.csv", word, sizeof word - 1, 2, 2, &d, err), -EBADMSG);
    cr_assert(strstr(err, "t.csv:2: a field is not a number"), "%s", err);
    const char none[] = "header only\n";
    cr_assert_eq(inputs("u.csv", none, sizeof none - 1, 2, 2, &d, err), -EBADMSG);
    cr_assert(strstr(err, "u.csv: no rows of numbers"), "%s", err);
}
