/* MNIST IDX files (http://yann.lecun.com/exdb/mnist/): a big-endian header
 * (magic, then one u32 per dimension) followed by the u8 payload.
 *
 * The payload length must equal what the header declares, exactly: a short file
 * is a partial download, a long one is probably the wrong file, and checking
 * before allocating means a header claiming 4 billion images costs nothing.
 */
#include "nn/nn_data.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#define IDX_IMAGES 0x00000803u /* u8, 3 dims: count, rows, cols */
#define IDX_LABELS 0x00000801u /* u8, 1 dim: count */

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int check_header(const uint8_t *buf, size_t len, const char *name, uint32_t magic,
                        size_t hdr, const char *what, char *err, size_t errlen)
{
    if (len == 0)
        return nn_data_errf(err, errlen, -EBADMSG, "%s: empty file", name);
    /* Magic before header length: a labels file given as images is "bad magic",
     * not "truncated". */
    if (len >= 4 && be32(buf) != magic)
        return nn_data_errf(err, errlen, -EBADMSG, "%s: bad magic 0x%08x, expected 0x%08x (IDX %s)", name,
                            be32(buf), magic, what);
    if (len < hdr)
        return nn_data_errf(err, errlen, -EBADMSG,
                            "%s: truncated: IDX %s header needs %zu bytes, file has %zu",
                            name, what, hdr, len);
    return 0;
}

static int check_length(size_t want, size_t len, const char *name, const char *decl, char *err, size_t errlen)
{
    if (len < want)
        return nn_data_errf(err, errlen, -EBADMSG,
                            "%s: truncated: header says %s (%zu bytes), file has %zu bytes",
                            name, decl, want, len);
    if (len > want)
        return nn_data_errf(err, errlen, -EBADMSG,
                            "%s: %zu bytes of trailing data: header says %s (%zu bytes)",
                            name, len - want, decl, want);
    return 0;
}

int nn_idx_parse(const uint8_t *img, size_t img_len, const char *img_name,
                 const uint8_t *lbl, size_t lbl_len, const char *lbl_name,
                 nn_dataset *d, char *err, size_t errlen)
{
    if (!d || (!img && img_len) || (!lbl && lbl_len))
        return -EINVAL;
    if (!img_name)
        img_name = "images";
    if (!lbl_name)
        lbl_name = "labels";

    int rc = check_header(img, img_len, img_name, IDX_IMAGES, 16, "images", err, errlen);
    if (rc < 0)
        return rc;
    uint32_t n = be32(img + 4), rows = be32(img + 8), cols = be32(img + 12);
    char decl[96];
    snprintf(decl, sizeof decl, "%u images of %ux%u", n, rows, cols);
    if (n == 0 || rows == 0 || cols == 0)
        return nn_data_errf(err, errlen, -EBADMSG, "%s: header says %s", img_name, decl);
    /* Three u32s multiplied overflow a 64-bit size_t (and two overflow a 32-bit
     * one), so every product is checked; n and dim must also fit nn_dataset's ints. */
    size_t dim, total;
    if (__builtin_mul_overflow((size_t)rows, (size_t)cols, &dim) || dim > INT_MAX || n > INT_MAX ||
        __builtin_mul_overflow(dim, (size_t)n, &total) || total > SIZE_MAX - 16)
        return nn_data_errf(err, errlen, -EBADMSG, "%s: header says %s, too large (file has %zu bytes)",
                            img_name, decl, img_len);
    if ((rc = check_length(total + 16, img_len, img_name, decl, err, errlen)) < 0)
        return rc;

    if (lbl) {
        if ((rc = check_header(lbl, lbl_len, lbl_name, IDX_LABELS, 8, "labels", err, errlen)) < 0)
            return rc;
        uint32_t nl = be32(lbl + 4);
        snprintf(decl, sizeof decl, "%u labels", nl);
        if ((rc = check_length((size_t)nl + 8, lbl_len, lbl_name, decl, err, errlen)) < 0)
            return rc;
        if (nl != n)
            return nn_data_errf(err, errlen, -EBADMSG, "%s has %u labels but %s has %u images", lbl_name, nl,
                                img_name, n);
    }

    /* total floats fit in size_t bytes only if total * 4 does; the byte payload
     * being in memory does not guarantee that. */
    size_t xbytes;
    if (__builtin_mul_overflow(total, sizeof(float), &xbytes))
        return nn_data_errf(err, errlen, -ENOMEM, "%s: too large for memory", img_name);
    float *x = malloc(xbytes);
    int *y = malloc((size_t)n * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return nn_data_errf(err, errlen, -ENOMEM, "%s: out of memory for %s", img_name, decl);
    }
    const uint8_t *px = img + 16;
    for (size_t i = 0; i < total; i++)
        x[i] = px[i] / 255.0f; /* divide, not multiply by 1/255: 255 must map to exactly 1 */
    int max_label = lbl ? 0 : -1;
    for (uint32_t i = 0; i < n; i++) {
        y[i] = lbl ? lbl[8 + i] : -1;
        if (y[i] > max_label)
            max_label = y[i];
    }
    *d = (nn_dataset){.n = (int)n, .c = 1, .h = (int)rows, .w = (int)cols,
                      .n_classes = max_label + 1, .x = x, .y = y};
    return 0;
}

int nn_idx_load(const char *img_path, const char *lbl_path, nn_dataset *d, char *err, size_t errlen)
{
    if (!img_path || !lbl_path || !d)
        return -EINVAL;
    uint8_t *img = NULL, *lbl = NULL;
    size_t img_len = 0, lbl_len = 0;
    int rc = nn_file_read(img_path, &img, &img_len, err, errlen);
    if (rc == 0)
        rc = nn_file_read(lbl_path, &lbl, &lbl_len, err, errlen);
    if (rc == 0)
        rc = nn_idx_parse(img, img_len, img_path, lbl, lbl_len, lbl_path, d, err, errlen);
    free(img);
    free(lbl);
    return rc;
}
