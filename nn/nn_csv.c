/* CSV data sets: one sample a line, "label,f1,f2,...".
 *
 * Deliberately a small dialect: no quoting, comma only, because a feature file
 * with quoted fields is almost always the wrong file. What real exports do
 * produce is accepted: a header line, blank lines, CRLF, a UTF-8 byte-order
 * mark, spaces around fields. Every row must have the first row's field count
 * so a missing value is reported at its line instead of shifting every
 * feature after it.
 */
#include "nn/nn_data.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct csv_out {
    float *x;
    int *y;
    size_t rows, cap; /* rows stored, rows allocated */
    size_t features;
} csv_out;

static char *trim(char *s, char *end)
{
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *end = '\0';
    return s;
}

/* Whether the line's first field is a number; decides if line 1 is a header.
 * Reads only, because the line is parsed again if it is data. */
static int first_field_is_number(const char *line)
{
    char *end;
    strtod(line, &end);
    while (*end == ' ' || *end == '\t')
        end++;
    return end != line && (*end == ',' || *end == '\0');
}

static size_t count_fields(const char *line)
{
    size_t n = 1;
    for (const char *p = line; (p = strchr(p, ',')); p++)
        n++;
    return n;
}

static int csv_grow(csv_out *o)
{
    size_t cap = o->cap ? o->cap * 2 : 1024, xbytes;
    if (cap > (size_t)INT_MAX + 1 || __builtin_mul_overflow(cap, o->features, &xbytes) ||
        __builtin_mul_overflow(xbytes, sizeof(float), &xbytes))
        return -ENOMEM;
    float *x = realloc(o->x, xbytes);
    if (!x)
        return -ENOMEM;
    o->x = x;
    int *y = realloc(o->y, cap * sizeof *y);
    if (!y)
        return -ENOMEM;
    o->y = y;
    o->cap = cap;
    return 0;
}

/* Parse one data line (NUL-terminated, commas intact) into row o->rows. */
static int parse_row(char *line, csv_out *o, const char *name, size_t lineno, char *err, size_t errlen)
{
    size_t nf = count_fields(line);
    if (o->features == 0) {
        if (nf < 2)
            return nn_data_errf(err, errlen, -EBADMSG,
                                "%s:%zu: expected a label and at least one feature, found 1 field",
                                name, lineno);
        o->features = nf - 1;
    }
    if (nf != o->features + 1)
        return nn_data_errf(err, errlen, -EBADMSG, "%s:%zu: expected %zu fields, found %zu", name, lineno,
                            o->features + 1, nf);
    if (o->rows == o->cap && csv_grow(o) < 0)
        return nn_data_errf(err, errlen, -ENOMEM, "%s:%zu: out of memory", name, lineno);

    char *p = line;
    for (size_t f = 0; f < nf; f++) {
        char *comma = strchr(p, ',');
        char *fend = comma ? comma : p + strlen(p);
        char *s = trim(p, fend), *end;
        p = fend + 1;
        if (f == 0) {
            errno = 0;
            long v = strtol(s, &end, 10);
            if (!*s || *end || errno)
                return nn_data_errf(err, errlen, -EBADMSG, "%s:%zu: label '%.32s' is not an integer", name,
                                    lineno, s);
            if (v < 0)
                return nn_data_errf(err, errlen, -EBADMSG, "%s:%zu: label %ld is negative", name, lineno, v);
            if (v >= NN_DATA_MAX_CLASSES)
                return nn_data_errf(err, errlen, -EBADMSG,
                                    "%s:%zu: label %ld too large (max %d)", name, lineno,
                                    v, NN_DATA_MAX_CLASSES - 1);
            o->y[o->rows] = (int)v;
            continue;
        }
        float v = strtof(s, &end);
        if (!*s || *end || !isfinite(v))
            return nn_data_errf(err, errlen, -EBADMSG,
                                "%s:%zu: field %zu: '%.32s' is not a finite number", name, lineno, f + 1, s);
        o->x[o->rows * o->features + f - 1] = v;
    }
    o->rows++;
    return 0;
}

static int parse_text(char *buf, size_t len, const char *name, csv_out *o, char *err, size_t errlen)
{
    char *p = buf, *end = buf + len;
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3;
    int seen_first = 0;
    for (size_t lineno = 1; p < end; lineno++) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *lend = nl ? nl : end;
        if (memchr(p, '\0', (size_t)(lend - p)))
            return nn_data_errf(err, errlen, -EBADMSG, "%s:%zu: NUL byte (binary file?)", name, lineno);
        if (lend > p && lend[-1] == '\r')
            lend--;
        char *line = trim(p, lend);
        p = nl ? nl + 1 : end;
        if (!*line)
            continue;
        if (!seen_first) {
            seen_first = 1;
            int header = !first_field_is_number(line);
            if (header)
                continue;
        }
        int rc = parse_row(line, o, name, lineno, err, errlen);
        if (rc < 0)
            return rc;
    }
    if (o->rows == 0)
        return nn_data_errf(err, errlen, -EBADMSG, "%s: no data rows", name);
    return 0;
}

int nn_csv_parse(const char *text, size_t len, const char *name, nn_dataset *d, char *err, size_t errlen)
{
    if (!d || (!text && len))
        return -EINVAL;
    if (!name)
        name = "csv";
    if (len > NN_DATA_MAX_BYTES)
        return nn_data_errf(err, errlen, -EFBIG, "%s: larger than %zu MiB", name, NN_DATA_MAX_BYTES >> 20);
    /* A private NUL-terminated copy: strtof needs a terminator, and fields are
     * cut in place. */
    char *buf = malloc(len + 1);
    if (!buf)
        return nn_data_errf(err, errlen, -ENOMEM, "%s: out of memory", name);
    if (len)
        memcpy(buf, text, len);
    buf[len] = '\0';
    csv_out o = {0};
    int rc = parse_text(buf, len, name, &o, err, errlen);
    free(buf);
    if (rc < 0) {
        free(o.x);
        free(o.y);
        return rc;
    }
    int max_label = 0;
    for (size_t i = 0; i < o.rows; i++)
        if (o.y[i] > max_label)
            max_label = o.y[i];
    *d = (nn_dataset){.n = (int)o.rows, .c = 1, .h = 1, .w = (int)o.features,
                      .n_classes = max_label + 1, .x = o.x, .y = o.y};
    return 0;
}
