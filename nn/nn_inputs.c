/* Inputs to classify (sgp predict): IDX images, a PGM image or CSV rows, told
 * apart by their first bytes, checked against the model's input shape. */
#include "nn/nn_data.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int alloc_set(nn_dataset *d, int n, int c, int h, int w)
{
    *d = (nn_dataset){.n = n, .c = c, .h = h, .w = w};
    d->x = malloc((size_t)n * c * h * w * sizeof *d->x);
    d->y = malloc((size_t)n * sizeof *d->y);
    if (!d->x || !d->y) {
        nn_dataset_free(d);
        return -ENOMEM;
    }
    for (int i = 0; i < n; i++)
        d->y[i] = -1;
    return 0;
}

/* The next PGM header token (comments from '#' to the end of the line skipped). */
static int pgm_int(const uint8_t **p, const uint8_t *end, long *v)
{
    for (;;) {
        while (*p < end && isspace(**p))
            (*p)++;
        if (*p < end && **p == '#') {
            while (*p < end && **p != '\n')
                (*p)++;
            continue;
        }
        break;
    }
    if (*p >= end || !isdigit(**p))
        return -1;
    *v = 0;
    while (*p < end && isdigit(**p)) {
        *v = *v * 10 + (**p - '0');
        (*p)++;
        if (*v > 1 << 24)
            return -1;
    }
    return 0;
}

static int pgm(const uint8_t *buf, size_t len, const char *path, int c, int h, int w, nn_dataset *d, char *err,
               size_t errlen)
{
    const int binary = buf[1] == '5';
    const uint8_t *p = buf + 2, *end = buf + len;
    long W, H, maxval;
    if (pgm_int(&p, end, &W) < 0 || pgm_int(&p, end, &H) < 0 || pgm_int(&p, end, &maxval) < 0 || W < 1 || H < 1 ||
        maxval < 1 || maxval > 65535)
        return nn_data_errf(err, errlen, -EBADMSG, "%s: a malformed PGM header (P%c WIDTH HEIGHT MAXVAL)", path,
                            buf[1]);
    if (c != 1 || H != h || W != w)
        return nn_data_errf(err, errlen, -EINVAL, "%s: a %ldx%ld grey image; the model takes %dx%dx%d inputs", path,
                            W, H, c, h, w);
    if (binary)
        p++; /* exactly one whitespace byte before the raster */
    const size_t n = (size_t)W * H, bytes = maxval < 256 ? 1 : 2;
    if (binary && (size_t)(end - p) < n * bytes)
        return nn_data_errf(err, errlen, -EBADMSG, "%s: truncated: %ldx%ld pixels need %zu bytes, %td left", path, W,
                            H, n * bytes, end - p);
    if (alloc_set(d, 1, 1, h, w) < 0)
        return nn_data_errf(err, errlen, -ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) {
        long v;
        if (binary)
            v = bytes == 1 ? p[i] : (long)p[2 * i] << 8 | p[2 * i + 1];
        else if (pgm_int(&p, end, &v) < 0) {
            nn_dataset_free(d);
            return nn_data_errf(err, errlen, -EBADMSG, "%s: pixel %zu of %zu is missing or not a number", path,
                                i + 1, n);
        }
        if (v > maxval) {
            nn_dataset_free(d);
            return nn_data_errf(err, errlen, -EBADMSG, "%s: pixel %zu is %ld, over maxval %ld", path, i + 1, v,
                                maxval);
        }
        d->x[i] = (float)v / (float)maxval;
    }
    return 0;
}

/* One CSV line's numbers into row (at most cap); the count, or -1 if a field is not a number. */
static long csv_row(char *line, float *row, long cap)
{
    long n = 0;
    for (char *s = line;; s++) {
        char *end;
        const float v = strtof(s, &end);
        while (*end == ' ' || *end == '\t' || *end == '\r')
            end++;
        if (end == s || (*end != ',' && *end))
            return -1;
        if (n < cap)
            row[n] = v;
        n++;
        if (!*end)
            return n;
        s = end;
    }
}

static int csv(char *text, const char *path, int c, int h, int w, nn_dataset *d, char *err, size_t errlen)
{
    const long dim = (long)c * h * w;
    float *row = malloc((size_t)(dim + 1) * sizeof *row);
    if (!row)
        return nn_data_errf(err, errlen, -ENOMEM, "%s: out of memory", path);
    int rows = 0, cap = 0, line_no = 0, rc = 0;
    *d = (nn_dataset){.c = c, .h = h, .w = w};
    for (char *line = text, *next; line && !rc; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        line_no++;
        while (*line == ' ' || *line == '\t')
            line++;
        if (!*line || *line == '\r')
            continue;
        const long n = csv_row(line, row, dim + 1);
        if (n < 0) {
            if (rows == 0 && line_no == 1)
                continue; /* a header line */
            rc = nn_data_errf(err, errlen, -EBADMSG, "%s:%d: a field is not a number", path, line_no);
        } else if (n != dim && n != dim + 1) {
            rc = nn_data_errf(err, errlen, -EINVAL, "%s:%d: %ld values; the model takes %ld (%dx%dx%d), or a label "
                              "and %ld", path, line_no, n, dim, c, h, w, dim);
        } else {
            if (rows == cap) {
                cap = cap ? 2 * cap : 64;
                float *x = cap < INT_MAX / 2 ? realloc(d->x, (size_t)cap * dim * sizeof *x) : NULL;
                int *y = x ? realloc(d->y, (size_t)cap * sizeof *y) : NULL;
                if (x)
                    d->x = x;
                if (!x || !y) {
                    rc = nn_data_errf(err, errlen, -ENOMEM, "%s: out of memory", path);
                    break;
                }
                d->y = y;
            }
            d->y[rows] = n == dim + 1 ? (int)row[0] : -1;
            memcpy(d->x + (size_t)rows * dim, row + (n - dim), (size_t)dim * sizeof *row);
            rows++;
        }
    }
    free(row);
    d->n = rows;
    if (!rc && rows == 0)
        rc = nn_data_errf(err, errlen, -EBADMSG, "%s: no rows of numbers", path);
    if (rc < 0)
        nn_dataset_free(d);
    return rc;
}

int nn_inputs_load(const char *path, int c, int h, int w, nn_dataset *d, char *err, size_t errlen)
{
    uint8_t *buf;
    size_t len;
    memset(d, 0, sizeof *d);
    int rc = nn_file_read(path, &buf, &len, err, errlen);
    if (rc < 0)
        return rc;
    if (len >= 4 && buf[0] == 0 && buf[1] == 0 && buf[2] == 8 && buf[3] == 3) {
        rc = nn_idx_parse(buf, len, path, NULL, 0, NULL, d, err, errlen);
        if (rc == 0 && (c != 1 || d->h != h || d->w != w)) {
            rc = nn_data_errf(err, errlen, -EINVAL, "%s: %dx%d images; the model takes %dx%dx%d inputs", path, d->h,
                              d->w, c, h, w);
            nn_dataset_free(d);
        }
    } else if (len >= 2 && buf[0] == 'P' && (buf[1] == '2' || buf[1] == '5')) {
        rc = pgm(buf, len, path, c, h, w, d, err, errlen);
    } else if (memchr(buf, 0, len)) {
        rc = nn_data_errf(err, errlen, -EBADMSG, "%s: neither IDX images, a PGM image nor CSV text", path);
    } else {
        char *text = realloc(buf, len + 1);
        if (!text) {
            free(buf);
            return nn_data_errf(err, errlen, -ENOMEM, "%s: out of memory", path);
        }
        buf = (uint8_t *)text;
        text[len] = 0;
        rc = csv(text, path, c, h, w, d, err, errlen);
    }
    free(buf);
    return rc;
}
