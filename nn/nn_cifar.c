/* CIFAR-10 binary version (https://www.cs.toronto.edu/~kriz/cifar.html): a file
 * is a plain sequence of records, 1 label byte then 32x32 pixels as 1024 red,
 * 1024 green, 1024 blue bytes. That plane order is already NCHW, so a record
 * converts with no transpose. There is no header, so the length and the label
 * range are the only checks that tell a CIFAR file from anything else.
 */
#include "nn/nn_data.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#define CIFAR_PIXELS (3 * 32 * 32)
#define CIFAR_RECORD (1 + CIFAR_PIXELS)
#define CIFAR_CLASSES 10

int nn_cifar10_parse(const uint8_t *buf, size_t len, const char *name, nn_dataset *d,
                     char *err, size_t errlen)
{
    if (!d || (!buf && len))
        return -EINVAL;
    if (!name)
        name = "cifar10";
    if (len == 0)
        return nn_data_errf(err, errlen, -EBADMSG, "%s: empty file", name);
    if (len % CIFAR_RECORD)
        return nn_data_errf(err, errlen, -EBADMSG,
                            "%s: %zu bytes is not a whole number of %d-byte records (%zu left over)", name,
                            len, CIFAR_RECORD, len % CIFAR_RECORD);
    size_t n = len / CIFAR_RECORD;
    if (n > INT_MAX)
        return nn_data_errf(err, errlen, -EBADMSG, "%s: %zu records, too many", name, n);
    /* Labels first: a bad file is rejected before the big allocation. */
    for (size_t i = 0; i < n; i++)
        if (buf[i * CIFAR_RECORD] >= CIFAR_CLASSES)
            return nn_data_errf(err, errlen, -EBADMSG, "%s: record %zu: label %u out of range 0..%d", name,
                                i, buf[i * CIFAR_RECORD], CIFAR_CLASSES - 1);

    size_t xbytes;
    if (__builtin_mul_overflow(n, CIFAR_PIXELS * sizeof(float), &xbytes))
        return nn_data_errf(err, errlen, -ENOMEM, "%s: %zu images do not fit in memory", name, n);
    float *x = malloc(xbytes);
    int *y = malloc(n * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return nn_data_errf(err, errlen, -ENOMEM, "%s: out of memory for %zu images", name, n);
    }
    for (size_t i = 0; i < n; i++) {
        const uint8_t *rec = buf + i * CIFAR_RECORD;
        y[i] = rec[0];
        for (size_t j = 0; j < CIFAR_PIXELS; j++)
            x[i * CIFAR_PIXELS + j] = rec[1 + j] / 255.0f;
    }
    *d = (nn_dataset){.n = (int)n, .c = 3, .h = 32, .w = 32, .n_classes = CIFAR_CLASSES, .x = x, .y = y};
    return 0;
}
