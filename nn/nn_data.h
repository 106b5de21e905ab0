/* Data sets: MNIST IDX files (raw or .gz), CIFAR-10 binary batches, CSV, the
 * embedded MNIST subset, the Fashion-MNIST cache, and per-peer shards.
 *
 *   nn_dataset train = {0}, test = {0};
 *   char err[256];
 *   if (nn_data_load("cifar10:/data/cifar", 0, &train, &test, err, sizeof err) < 0)
 *       fprintf(stderr, "sgp: %s\n", err);   // "FILE: what is wrong"
 *   ...
 *   nn_dataset_free(&train); nn_dataset_free(&test);
 *
 * Samples are stored as float in [0, 1] (images) or as given (CSV), NCHW per
 * sample, contiguous, so a batch is a gather of rows.
 */
#ifndef NN_NN_DATA_H
#define NN_NN_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct nn_dataset {
    int n;         /* number of samples; for text, windows in one epoch (bytes / context) */
    int c, h, w;   /* per-sample shape; CSV features are c = 1, h = 1, w = features; text 1 x 1 x context */
    int n_classes; /* max label + 1 over the files loaded together; text: 256 */
    float *x;      /* n * c*h*w values (NULL for text) */
    int *y;        /* n labels in [0, n_classes) (NULL for text) */
    uint8_t *text; /* text: the bytes themselves, each a token; a sample is any window of w + 1 of them */
    size_t text_len;
} nn_dataset;

static inline size_t nn_dataset_dim(const nn_dataset *d) { return (size_t)d->c * d->h * d->w; }

/* Bytes of its samples and labels, or of its text. */
static inline size_t nn_dataset_bytes(const nn_dataset *d)
{
    return (d->x ? (size_t)d->n * nn_dataset_dim(d) * sizeof(float) : 0) + (d->y ? (size_t)d->n * sizeof(int) : 0) +
           (d->text ? d->text_len : 0);
}

/* Text: the default context (tokens a sample sees) and the held-out share
 * when a text spec names no validation file. */
#define NN_TEXT_CONTEXT 64
#define NN_TEXT_VAL_PERCENT 10

/* spec: NULL or "" -> the embedded MNIST subset; "text:FILE[,VALFILE]" -> any
 * file as bytes (tokens 0..255), samples of `context` tokens (<= 0: NN_TEXT_CONTEXT)
 * each predicting the next byte at every position, the last NN_TEXT_VAL_PERCENT
 * of FILE held out when no VALFILE is given; "brown" -> the Brown corpus that
 * `make data` writes (build/data/brown/brown.txt, looked up as for "fashion"); "fashion" -> Fashion-MNIST
 * (60,000/10,000) from the cache `make data` writes, looked up in
 * $SGP_DATA_DIR/fashion if SGP_DATA_DIR is set, else build/data/fashion in the
 * current directory, else data/fashion beside the executable (a directory named
 * fashion is "./fashion"); "DIR" -> MNIST IDX files in DIR
 * (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
 * t10k-labels-idx1-ubyte, each raw or with .gz); "cifar10:DIR" -> data_batch_1..5.bin
 * and test_batch.bin; "csv:TRAIN,TEST" -> CSV files, label first (split at the
 * first comma; either file may be gzip'ed).
 * Returns 0, or a negative errno with a one-line message "FILE: problem" in err.
 * train and test are overwritten (pass zeroed or freed structs) and left zeroed
 * on error. They agree on shape (else -EBADMSG); n_classes is set to the larger
 * of the two, so a test split lacking the top class still sizes the model right. */
int nn_data_load(const char *spec, int context, nn_dataset *train, nn_dataset *test, char *err, size_t errlen);

/* Text data from bytes in memory: at least context + 1 of them (else -EINVAL
 * with "NAME: N bytes, shorter than one window of context + 1"). d is
 * overwritten on success; the bytes are copied. */
int nn_text_parse(const uint8_t *buf, size_t len, const char *name, int context, nn_dataset *d, char *err,
                  size_t errlen);

/* Evaluation windows of a text set: every byte after the first is predicted
 * once, in windows of context + 1 bytes at stride context (a tail shorter
 * than a window is left out). nn_text_window fills window i's tokens x[w] and
 * targets y[w]. */
static inline int nn_text_windows(const nn_dataset *d) { return d->w && d->text_len ? (int)((d->text_len - 1) / (size_t)d->w) : 0; }
void nn_text_window(const nn_dataset *d, int i, float *x, int *y);

/* Labels a sample carries: one, or one per position for text. */
static inline int nn_dataset_labels(const nn_dataset *d) { return d->text ? d->w : 1; }

/* Parse one IDX images buffer (magic 0x00000803, any rows x cols) and one labels
 * buffer (0x00000801) into d (lbl NULL: images alone, every label -1 and
 * n_classes 0). Each buffer's length must equal what its header
 * declares; counts must match. Pixels become float / 255. name_* are used in
 * error messages only. d is overwritten on success, untouched on error. */
int nn_idx_parse(const uint8_t *img, size_t img_len, const char *img_name,
                 const uint8_t *lbl, size_t lbl_len, const char *lbl_name,
                 nn_dataset *d, char *err, size_t errlen);

/* Load an IDX pair from files; each may be gzip-compressed (detected by magic). */
int nn_idx_load(const char *img_path, const char *lbl_path, nn_dataset *d, char *err, size_t errlen);

/* CIFAR-10 binary records: 1 label byte (< 10) + 3072 pixel bytes (R, G, B planes);
 * buf must hold a whole number of records. Shape 3x32x32, n_classes 10. */
int nn_cifar10_parse(const uint8_t *buf, size_t len, const char *name, nn_dataset *d,
                     char *err, size_t errlen);

/* CSV, one sample a line, label (integer in [0, NN_DATA_MAX_CLASSES)) first, then
 * finite numbers as features (kept as given); shape 1x1xfeatures. Comma separated,
 * no quoting. An optional header line (first field not a number) is skipped, as are
 * blank lines; CRLF is fine. Every row must have the first row's field count;
 * errors read "NAME:LINE: problem". text need not be NUL-terminated. */
int nn_csv_parse(const char *text, size_t len, const char *name, nn_dataset *d, char *err, size_t errlen);

/* Inputs to classify, for a model of inputs c x h x w, from one file: IDX
 * images (raw or .gz), a PGM image (P2 or P5, one channel, values / maxval),
 * or CSV rows of c*h*w values (or a label and c*h*w values; blank lines and
 * a header line skipped). Labels are -1 where the file has none. Errors name
 * the file (and line for CSV) and say what does not fit. */
int nn_inputs_load(const char *path, int c, int h, int w, nn_dataset *d, char *err, size_t errlen);

/* The embedded 8,000 train / 2,000 test MNIST digits. */
int nn_data_embedded(nn_dataset *train, nn_dataset *test, char *err, size_t errlen);

/* Read a whole file, inflating it if it is gzip (magic 1f 8b). *buf is malloc'ed
 * (non-NULL even for an empty file); caller frees. Files and inflated data over
 * NN_DATA_MAX_BYTES give -EFBIG. */
int nn_file_read(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen);

/* Gunzip a buffer in memory (used by the embedded set and by nn_file_read).
 * Concatenated gzip members are joined, as gzip does; anything else after the
 * last member, a truncated or corrupt stream give -EBADMSG. */
int nn_gunzip(const uint8_t *in, size_t in_len, const char *name, uint8_t **out, size_t *out_len,
              char *err, size_t errlen);

/* Peer `peer` of `n_peers` gets a disjoint shard of d's indices, the shards
 * covering all of d. alpha <= 0: iid (a seeded permutation cut in parts whose
 * sizes differ by at most one); alpha > 0: non-iid, for each class a
 * Dirichlet(alpha) split of that class's (shuffled) samples over the peers.
 * Deterministic from seed alone, so every peer computes the same split. *idx is
 * malloc'ed (sorted ascending, non-NULL even when *count is 0, as it may be for
 * a tiny alpha). Only d->n, d->y and d->n_classes are read; a label outside
 * [0, n_classes), a bad peer or a non-finite alpha give -EINVAL. */
int nn_shard_indices(const nn_dataset *d, int peer, int n_peers, double alpha, uint64_t seed,
                     int **idx, int *count);

/* Peer `peer`'s shard of d as a data set of its own (dst overwritten): the
 * rows nn_shard_indices picks, or for text a contiguous 1/n_peers of the
 * bytes (alpha must then be <= 0; a share shorter than one window is -EINVAL
 * with a message). */
int nn_dataset_shard(const nn_dataset *d, int peer, int n_peers, double alpha, uint64_t seed, nn_dataset *dst,
                     char *err, size_t errlen);

/* dst = the rows idx[0..n) of src (copies; n may be 0). -EINVAL if an index is
 * out of range or src is text. dst is overwritten. */
int nn_dataset_subset(const nn_dataset *src, const int *idx, int n, nn_dataset *dst);

/* Frees and zeroes d; safe on NULL, zeroed or already freed datasets. */
void nn_dataset_free(nn_dataset *d);

/* Limits the loaders enforce before allocating: a decompressed or raw file may
 * not exceed NN_DATA_MAX_BYTES, and CSV labels must be below NN_DATA_MAX_CLASSES
 * (a stray huge label would otherwise size the model's output layer). */
#define NN_DATA_MAX_BYTES ((size_t)2 << 30)
#define NN_DATA_MAX_CLASSES 65536

/* Internal to the nn_data loaders: "text:SPEC" after its prefix. */
int nn_text_load(const char *spec, int context, nn_dataset *train, nn_dataset *test, char *err, size_t errlen);

/* Internal to the nn_data loaders: format a message into err (if any) and return rc. */
int nn_data_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
