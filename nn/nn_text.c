/* Text data: a file's bytes are its tokens (a vocabulary of 256, no
 * tokenizer), and a sample is a window of context + 1 of them whose last
 * `context` bytes are the targets of the first `context`.
 *
 * The bytes are kept as they are (one byte a token, not a float) because a
 * window can start anywhere: training draws windows at random offsets
 * (nn_batch.c), evaluation walks them at stride context so every byte is
 * predicted once. Without a validation file the last NN_TEXT_VAL_PERCENT of
 * the file is held out, cut at a byte boundary: the split is by position, not
 * by random windows, so no held-out byte was ever a training target.
 */
#include "nn/nn_data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int nn_text_parse(const uint8_t *buf, size_t len, const char *name, int context, nn_dataset *d, char *err,
                  size_t errlen)
{
    if (!d || (!buf && len) || context <= 0)
        return -EINVAL;
    if (!name)
        name = "(text)";
    if (len == 0)
        return nn_data_errf(err, errlen, -EINVAL, "%s: empty file (text data needs at least %d bytes)", name,
                            context + 1);
    if (len < (size_t)context + 1)
        return nn_data_errf(err, errlen, -EINVAL,
                            "%s: %zu bytes, shorter than one window of %d (context %d plus the next byte)", name,
                            len, context + 1, context);
    if (len / (size_t)context > (size_t)INT32_MAX)
        return nn_data_errf(err, errlen, -EFBIG, "%s: too many windows of %d bytes", name, context);
    uint8_t *text = malloc(len);
    if (!text)
        return nn_data_errf(err, errlen, -ENOMEM, "%s: out of memory", name);
    memcpy(text, buf, len);
    *d = (nn_dataset){.n = (int)(len / (size_t)context), .c = 1, .h = 1, .w = context, .n_classes = 256,
                      .text = text, .text_len = len};
    return 0;
}

void nn_text_window(const nn_dataset *d, int i, float *x, int *y)
{
    const uint8_t *at = d->text + (size_t)i * (size_t)d->w;
    for (int t = 0; t < d->w; t++) {
        x[t] = (float)at[t];
        y[t] = at[t + 1];
    }
}

/* A directory is read(2)-able as nothing on some systems: say what it is. */
static int read_text(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return nn_data_errf(err, errlen, -EISDIR, "%s: is a directory, not a text file", path);
    return nn_file_read(path, buf, len, err, errlen);
}

static int load_one(const char *path, int context, nn_dataset *d, char *err, size_t errlen)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = read_text(path, &buf, &len, err, errlen);
    if (rc == 0)
        rc = nn_text_parse(buf, len, path, context, d, err, errlen);
    free(buf);
    return rc;
}

/* "FILE[,VALFILE]": split at the first comma, as csv: does. */
int nn_text_load(const char *spec, int context, nn_dataset *train, nn_dataset *test, char *err, size_t errlen)
{
    if (!*spec)
        return nn_data_errf(err, errlen, -EINVAL, "text: expected text:FILE or text:FILE,VALFILE");
    const char *comma = strchr(spec, ',');
    if (comma) {
        if (comma == spec || !comma[1])
            return nn_data_errf(err, errlen, -EINVAL, "text:%s: expected text:FILE or text:FILE,VALFILE", spec);
        char *tr = strndup(spec, (size_t)(comma - spec));
        if (!tr)
            return nn_data_errf(err, errlen, -ENOMEM, "out of memory");
        int rc = load_one(tr, context, train, err, errlen);
        if (rc == 0)
            rc = load_one(comma + 1, context, test, err, errlen);
        free(tr);
        return rc;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = read_text(spec, &buf, &len, err, errlen);
    if (rc < 0)
        return rc;
    const size_t held = len / 100 * NN_TEXT_VAL_PERCENT + len % 100 * NN_TEXT_VAL_PERCENT / 100;
    const size_t min = (size_t)context + 1;
    if (len == 0)
        rc = nn_text_parse(buf, len, spec, context, train, err, errlen);
    else if (len - held < min || held < min)
        rc = nn_data_errf(err, errlen, -EINVAL,
                          "%s: %zu bytes: too short to hold out the last %d%% as validation with windows of %d "
                          "bytes (give a longer file, a VALFILE, or a smaller --context)",
                          spec, len, NN_TEXT_VAL_PERCENT, context + 1);
    if (rc == 0)
        rc = nn_text_parse(buf, len - held, spec, context, train, err, errlen);
    if (rc == 0)
        rc = nn_text_parse(buf + len - held, held, spec, context, test, err, errlen);
    free(buf);
    return rc;
}
