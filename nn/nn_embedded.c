/* The embedded MNIST subset: gzip'ed IDX files linked in by
 * nn/data/embedded_blob.S, parsed exactly like files on disk so the embedded
 * path exercises the same checks.
 */
#include "nn/nn_data.h"

#include <errno.h>
#include <stdlib.h>

extern const uint8_t nn_embed_train_images[], nn_embed_train_images_end[];
extern const uint8_t nn_embed_train_labels[], nn_embed_train_labels_end[];
extern const uint8_t nn_embed_test_images[], nn_embed_test_images_end[];
extern const uint8_t nn_embed_test_labels[], nn_embed_test_labels_end[];

/* Through uintptr_t: subtracting pointers to two different objects is undefined in C. */
#define BLOB_LEN(sym) ((size_t)((uintptr_t)sym##_end - (uintptr_t)sym))

static int load_pair(const uint8_t *img_gz, size_t img_gz_len, const char *img_name,
                     const uint8_t *lbl_gz, size_t lbl_gz_len, const char *lbl_name,
                     nn_dataset *d, char *err, size_t errlen)
{
    uint8_t *img = NULL, *lbl = NULL;
    size_t img_len = 0, lbl_len = 0;
    int rc = nn_gunzip(img_gz, img_gz_len, img_name, &img, &img_len, err, errlen);
    if (rc == 0)
        rc = nn_gunzip(lbl_gz, lbl_gz_len, lbl_name, &lbl, &lbl_len, err, errlen);
    if (rc == 0)
        rc = nn_idx_parse(img, img_len, img_name, lbl, lbl_len, lbl_name, d, err, errlen);
    free(img);
    free(lbl);
    return rc;
}

int nn_data_embedded(nn_dataset *train, nn_dataset *test, char *err, size_t errlen)
{
    if (!train || !test)
        return -EINVAL;
    int rc = load_pair(nn_embed_train_images, BLOB_LEN(nn_embed_train_images),
                       "embedded:train-images-idx3-ubyte.gz", nn_embed_train_labels,
                       BLOB_LEN(nn_embed_train_labels), "embedded:train-labels-idx1-ubyte.gz", train, err,
                       errlen);
    if (rc < 0)
        return rc;
    rc = load_pair(nn_embed_test_images, BLOB_LEN(nn_embed_test_images), "embedded:t10k-images-idx3-ubyte.gz",
                   nn_embed_test_labels, BLOB_LEN(nn_embed_test_labels), "embedded:t10k-labels-idx1-ubyte.gz",
                   test, err, errlen);
    if (rc < 0) {
        nn_dataset_free(train);
        return rc;
    }
    /* Both splits hold all ten digits, but keep the invariant nn_data_load promises. */
    int k = train->n_classes > test->n_classes ? train->n_classes : test->n_classes;
    train->n_classes = test->n_classes = k;
    return 0;
}
