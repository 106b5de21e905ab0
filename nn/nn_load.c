/* nn_data_load: one data-set spec string to a train/test pair, plus the
 * dataset helpers (subset, free). Each format's parser lives in its own file;
 * this one only finds files, dispatches and checks the pair is consistent.
 */
#include "nn/nn_data.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The embedded digits are linked into `sgp` and the tests, not into libsgp
 * (the Makefile's API_OBJ): there the default data set is missing, and this
 * reference is NULL. */
#pragma weak nn_data_embedded

void nn_dataset_free(nn_dataset *d)
{
    if (!d)
        return;
    free(d->x);
    free(d->y);
    free(d->text);
    *d = (nn_dataset){0};
}

int nn_dataset_subset(const nn_dataset *src, const int *idx, int n, nn_dataset *dst)
{
    if (!src || !dst || n < 0 || (n && !idx) || src->text)
        return -EINVAL;
    size_t dim = nn_dataset_dim(src);
    for (int i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= src->n)
            return -EINVAL;
    /* At least one element each, so an empty shard still gets non-NULL arrays. */
    size_t rows = n ? (size_t)n : 1, xbytes;
    if (__builtin_mul_overflow(rows, dim * sizeof(float), &xbytes))
        return -ENOMEM;
    float *x = malloc(xbytes);
    int *y = malloc(rows * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return -ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        memcpy(x + (size_t)i * dim, src->x + (size_t)idx[i] * dim, dim * sizeof *x);
        y[i] = src->y[idx[i]];
    }
    *dst = (nn_dataset){.n = n, .c = src->c, .h = src->h, .w = src->w,
                        .n_classes = src->n_classes, .x = x, .y = y};
    return 0;
}

static int path_join(char *out, size_t outlen, const char *dir, const char *name)
{
    size_t dl = strlen(dir);
    int r = snprintf(out, outlen, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", name);
    return r < 0 || (size_t)r >= outlen ? -ENAMETOOLONG : 0;
}

/* DIR/NAME, else DIR/NAME.gz. The message names the uncompressed file, which
 * is what the user reads about in the MNIST instructions. */
static int find_idx(char *out, size_t outlen, const char *dir, const char *name, char *err, size_t errlen)
{
    struct stat st;
    char gz[256];
    snprintf(gz, sizeof gz, "%s.gz", name);
    if (path_join(out, outlen, dir, name) < 0)
        return nn_data_errf(err, errlen, -ENAMETOOLONG, "%s: path too long", dir);
    if (stat(out, &st) == 0)
        return 0;
    if (path_join(out, outlen, dir, gz) < 0)
        return nn_data_errf(err, errlen, -ENAMETOOLONG, "%s: path too long", dir);
    if (stat(out, &st) == 0)
        return 0;
    path_join(out, outlen, dir, name);
    return nn_data_errf(err, errlen, -ENOENT, "%s: No such file or directory (nor %s)", out, gz);
}

static int load_mnist(const char *dir, nn_dataset *train, nn_dataset *test, char *err, size_t errlen)
{
    static const char *const names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    char path[4][4096];
    for (int i = 0; i < 4; i++) {
        int rc = find_idx(path[i], sizeof path[i], dir, names[i], err, errlen);
        if (rc < 0)
            return rc;
    }
    int rc = nn_idx_load(path[0], path[1], train, err, errlen);
    if (rc == 0)
        rc = nn_idx_load(path[2], path[3], test, err, errlen);
    return rc;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A data set that `make data` caches in build/data/NAME. Where it is looked
 * for, first hit wins:
 *   1. $SGP_DATA_DIR/NAME if SGP_DATA_DIR is set, and then only there, so an
 *      explicit setting is never silently bypassed;
 *   2. build/data/NAME below the current directory (the source tree);
 *   3. data/NAME beside the executable, which for build/sgp is the same cache
 *      reached from any directory.
 * Fashion-MNIST (30 MB gzipped) and the Brown corpus are too big to link in
 * like the embedded MNIST. Fills `dir` with the directory found, or says in
 * err where it looked. */
static int find_cache(const char *name, const char *what, char *dir, size_t dirlen, char *err, size_t errlen)
{
    char dirs[2][4096];
    int n = 0;
    const char *env = getenv("SGP_DATA_DIR");
    if (env && *env) {
        if (path_join(dirs[n++], sizeof dirs[0], env, name) < 0)
            return nn_data_errf(err, errlen, -ENAMETOOLONG, "SGP_DATA_DIR=%s: path too long", env);
    } else {
        snprintf(dirs[n++], sizeof dirs[0], "build/data/%s", name);
        /* The executable's real path, not argv[0]: that may be a bare name found on PATH. */
        char exe[4096];
        ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (len > 0) {
            exe[len] = '\0';
            char *slash = strrchr(exe, '/');
            if (slash) {
                *slash = '\0';
                char sub[64];
                snprintf(sub, sizeof sub, "data/%s", name);
                if (path_join(dirs[n], sizeof dirs[0], exe, sub) == 0)
                    n++;
            }
        }
    }
    for (int i = 0; i < n; i++)
        if (is_dir(dirs[i]) && strlen(dirs[i]) < dirlen) {
            memcpy(dir, dirs[i], strlen(dirs[i]) + 1);
            return 0;
        }
    if (env && *env)
        return nn_data_errf(err, errlen, -ENOENT,
                            "%s: %s: No such directory (SGP_DATA_DIR is set): run `make data` in the sgp "
                            "source tree and set SGP_DATA_DIR to its build/data, or unset SGP_DATA_DIR",
                            name, dirs[0]);
    return nn_data_errf(err, errlen, -ENOENT,
                        "%s: %s is not downloaded (looked in %s%s%s): run `make data` in the sgp source tree", name,
                        what, dirs[0], n > 1 ? " and " : "", n > 1 ? dirs[1] : "");
}

/* After a cache was found: a missing file inside it means a broken cache. */
static int rebuild_hint(int rc, const char *name, char *err, size_t errlen)
{
    if (rc == -ENOENT && err && errlen) {
        char why[512];
        snprintf(why, sizeof why, "%s", err);
        nn_data_errf(err, errlen, rc, "%s: %s: run `make data` in the sgp source tree to rebuild it", name, why);
    }
    return rc;
}

static int load_fashion(nn_dataset *train, nn_dataset *test, char *err, size_t errlen)
{
    char dir[4096];
    int rc = find_cache("fashion", "Fashion-MNIST", dir, sizeof dir, err, errlen);
    return rc < 0 ? rc : rebuild_hint(load_mnist(dir, train, test, err, errlen), "fashion", err, errlen);
}

/* "brown": the corpus file, with the last NN_TEXT_VAL_PERCENT held out. */
static int load_brown(int context, nn_dataset *train, nn_dataset *test, char *err, size_t errlen)
{
    char dir[4096], path[4200];
    int rc = find_cache("brown", "the Brown corpus", dir, sizeof dir, err, errlen);
    if (rc < 0)
        return rc;
    if (path_join(path, sizeof path, dir, "brown.txt") < 0)
        return nn_data_errf(err, errlen, -ENAMETOOLONG, "%s: path too long", dir);
    return rebuild_hint(nn_text_load(path, context, train, test, err, errlen), "brown", err, errlen);
}

/* Append src's rows to dst (same shape), consuming src. */
static int append(nn_dataset *dst, nn_dataset *src)
{
    if (!dst->x) {
        *dst = *src;
        *src = (nn_dataset){0};
        return 0;
    }
    size_t dim = nn_dataset_dim(dst), n = (size_t)dst->n + (size_t)src->n, xbytes;
    if (n > INT_MAX || __builtin_mul_overflow(n, dim * sizeof(float), &xbytes))
        return -ENOMEM;
    float *x = realloc(dst->x, xbytes);
    if (!x)
        return -ENOMEM;
    dst->x = x;
    int *y = realloc(dst->y, n * sizeof *y);
    if (!y)
        return -ENOMEM;
    dst->y = y;
    memcpy(x + (size_t)dst->n * dim, src->x, (size_t)src->n * dim * sizeof *x);
    memcpy(y + dst->n, src->y, (size_t)src->n * sizeof *y);
    dst->n = (int)n;
    nn_dataset_free(src);
    return 0;
}

static int load_cifar_file(const char *dir, const char *name, nn_dataset *d, char *err, size_t errlen)
{
    char path[4096];
    if (path_join(path, sizeof path, dir, name) < 0)
        return nn_data_errf(err, errlen, -ENAMETOOLONG, "%s: path too long", dir);
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = nn_file_read(path, &buf, &len, err, errlen);
    if (rc == 0)
        rc = nn_cifar10_parse(buf, len, path, d, err, errlen);
    free(buf);
    return rc;
}

static int load_cifar(const char *dir, nn_dataset *train, nn_dataset *test, char *err, size_t errlen)
{
    for (int i = 1; i <= 5; i++) {
        char name[32];
        nn_dataset part = {0};
        snprintf(name, sizeof name, "data_batch_%d.bin", i);
        int rc = load_cifar_file(dir, name, &part, err, errlen);
        if (rc == 0 && (rc = append(train, &part)) < 0)
            nn_data_errf(err, errlen, rc, "%s/%s: out of memory", dir, name);
        nn_dataset_free(&part);
        if (rc < 0)
            return rc;
    }
    return load_cifar_file(dir, "test_batch.bin", test, err, errlen);
}

static int load_csv_file(const char *path, nn_dataset *d, char *err, size_t errlen)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = nn_file_read(path, &buf, &len, err, errlen);
    if (rc == 0)
        rc = nn_csv_parse((const char *)buf, len, path, d, err, errlen);
    free(buf);
    return rc;
}

/* "TRAIN,TEST" split at the first comma: a comma in the test path still works. */
static int load_csv(const char *spec, nn_dataset *train, nn_dataset *test, char *err, size_t errlen)
{
    const char *comma = strchr(spec, ',');
    if (!comma || comma == spec || !comma[1])
        return nn_data_errf(err, errlen, -EINVAL, "csv:%s: expected csv:TRAIN,TEST", spec);
    char *tr = strndup(spec, (size_t)(comma - spec));
    if (!tr)
        return nn_data_errf(err, errlen, -ENOMEM, "out of memory");
    int rc = load_csv_file(tr, train, err, errlen);
    if (rc == 0)
        rc = load_csv_file(comma + 1, test, err, errlen);
    free(tr);
    return rc;
}

int nn_data_load(const char *spec, int context, nn_dataset *train, nn_dataset *test, char *err, size_t errlen)
{
    if (!train || !test)
        return -EINVAL;
    *train = (nn_dataset){0};
    *test = (nn_dataset){0};
    if (err && errlen)
        err[0] = '\0';

    if (context <= 0)
        context = NN_TEXT_CONTEXT;
    int rc;
    const char *what = spec && *spec ? spec : "embedded";
    if ((!spec || !*spec) && !nn_data_embedded)
        rc = nn_data_errf(err, errlen, -ENOENT, "no data set given, and this build (libsgp) has no embedded one");
    else if (!spec || !*spec)
        rc = nn_data_embedded(train, test, err, errlen);
    else if (strncmp(spec, "cifar10:", 8) == 0)
        rc = load_cifar(spec + 8, train, test, err, errlen);
    else if (strncmp(spec, "csv:", 4) == 0)
        rc = load_csv(spec + 4, train, test, err, errlen);
    else if (strcmp(spec, "fashion") == 0)
        rc = load_fashion(train, test, err, errlen);
    else if (strncmp(spec, "text:", 5) == 0)
        rc = nn_text_load(spec + 5, context, train, test, err, errlen);
    else if (strcmp(spec, "brown") == 0)
        rc = load_brown(context, train, test, err, errlen);
    else
        rc = load_mnist(spec, train, test, err, errlen);

    if (rc == 0 && (train->c != test->c || train->h != test->h || train->w != test->w))
        rc = nn_data_errf(err, errlen, -EBADMSG,
                          "%s: test samples are %dx%dx%d but training samples are %dx%dx%d",
                          what, test->c, test->h, test->w, train->c, train->h, train->w);
    if (rc < 0) {
        nn_dataset_free(train);
        nn_dataset_free(test);
        return rc;
    }
    /* A test split may lack the top class (or vice versa); the model is sized once. */
    int k = train->n_classes > test->n_classes ? train->n_classes : test->n_classes;
    train->n_classes = test->n_classes = k;
    return 0;
}
