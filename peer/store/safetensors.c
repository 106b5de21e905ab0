/* The safetensors format; see safetensors.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/store/safetensors.h"
#include "peer/store/wholefile.h"

static const struct {
    const char *name;
    size_t size;
} DTYPES[] = {[ST_F32] = {"F32", 4}, [ST_F16] = {"F16", 2}, [ST_BF16] = {"BF16", 2}, [ST_F64] = {"F64", 8},
              [ST_I64] = {"I64", 8}, [ST_I32] = {"I32", 4}, [ST_I16] = {"I16", 2},  [ST_I8] = {"I8", 1},
              [ST_U8] = {"U8", 1},   [ST_BOOL] = {"BOOL", 1}};
#define N_DTYPES (int)(sizeof DTYPES / sizeof DTYPES[0])

const char *st_dtype_name(st_dtype t) { return DTYPES[t].name; }
size_t st_dtype_size(st_dtype t) { return DTYPES[t].size; }

/* ---- reading ------------------------------------------------------------------ */

typedef struct parser {
    const char *p, *start, *end;
    const char *name;
    char *err;
    size_t errlen;
    int failed;
} parser;

static int fail(parser *ps, const char *fmt, ...)
{
    if (!ps->failed) {
        char why[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof why, fmt, ap);
        va_end(ap);
        snprintf(ps->err, ps->errlen, "%s: header byte %td: %s", ps->name, ps->p - ps->start, why);
        ps->failed = 1;
    }
    return -EBADMSG;
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int expect(parser *ps, char c)
{
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != c)
        return fail(ps, "expected '%c'", c);
    ps->p++;
    return 0;
}

/* 1 and consumes c if it is next, else 0. */
static int accept(parser *ps, char c)
{
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        return 1;
    }
    return 0;
}

static int hex4(parser *ps, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++, ps->p++) {
        if (ps->p >= ps->end)
            return fail(ps, "a \\u escape is cut short");
        const char c = *ps->p;
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return fail(ps, "a \\u escape needs four hex digits");
        *v = *v << 4 | (unsigned)d;
    }
    return 0;
}

/* A JSON string into out (UTF-8, NUL-terminated); -E2BIG when it needs more
 * than cap - 1 bytes. out may be NULL with cap 0 to measure: *n says how long. */
static int string(parser *ps, char *out, size_t cap, size_t *n)
{
    if (expect(ps, '"') < 0)
        return -EBADMSG;
    size_t k = 0;
    for (;;) {
        if (ps->p >= ps->end)
            return fail(ps, "a string is not closed");
        unsigned c = (unsigned char)*ps->p++;
        if (c == '"')
            break;
        if (c < 0x20)
            return fail(ps, "a control character in a string");
        if (c == '\\') {
            if (ps->p >= ps->end)
                return fail(ps, "a string is not closed");
            const char e = *ps->p++;
            switch (e) {
            case '"': case '\\': case '/': c = (unsigned char)e; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u': {
                if (hex4(ps, &c) < 0)
                    return -EBADMSG;
                if (c >= 0xD800 && c < 0xDC00) { /* a surrogate pair */
                    unsigned lo;
                    if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
                        return fail(ps, "a lone surrogate in a \\u escape");
                    ps->p += 2;
                    if (hex4(ps, &lo) < 0)
                        return -EBADMSG;
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return fail(ps, "a lone surrogate in a \\u escape");
                    c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                } else if (c >= 0xDC00 && c <= 0xDFFF) {
                    return fail(ps, "a lone surrogate in a \\u escape");
                }
                char u[4];
                int m = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
                if (m == 1)
                    u[0] = (char)c;
                else {
                    for (int i = m - 1; i > 0; i--, c >>= 6)
                        u[i] = (char)(0x80 | (c & 0x3F));
                    u[0] = (char)((m == 2 ? 0xC0 : m == 3 ? 0xE0 : 0xF0) | c);
                }
                for (int i = 0; i < m; i++, k++)
                    if (out && k + 1 < cap)
                        out[k] = u[i];
                continue;
            }
            default:
                return fail(ps, "an unknown escape \\%c", e);
            }
        }
        if (out && k + 1 < cap)
            out[k] = (char)c;
        k++;
    }
    if (n)
        *n = k;
    if (out) {
        if (k + 1 > cap)
            return fail(ps, "a string longer than %zu bytes", cap - 1);
        out[k] = 0;
    }
    return 0;
}

/* A non-negative integer below 2^53 (what JSON numbers carry exactly). */
static int integer(parser *ps, uint64_t *v)
{
    skip_ws(ps);
    const char *s = ps->p;
    *v = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        *v = *v * 10 + (uint64_t)(*ps->p++ - '0');
        if (*v >= (1ull << 53))
            return fail(ps, "a number over 2^53");
    }
    if (ps->p == s)
        return fail(ps, "expected a non-negative integer");
    if (ps->p - s > 1 && *s == '0')
        return fail(ps, "a number with a leading zero");
    return 0;
}

/* [n, n, ...] into v (at most max); *count says how many. */
static int int_array(parser *ps, uint64_t *v, int max, int *count)
{
    *count = 0;
    if (expect(ps, '[') < 0)
        return -EBADMSG;
    if (accept(ps, ']'))
        return 0;
    do {
        if (*count == max)
            return fail(ps, "more than %d numbers in an array", max);
        if (integer(ps, &v[(*count)++]) < 0)
            return -EBADMSG;
    } while (accept(ps, ','));
    return expect(ps, ']');
}

static int metadata(parser *ps, st_file *f)
{
    if (expect(ps, '{') < 0)
        return -EBADMSG;
    if (accept(ps, '}'))
        return 0;
    do {
        if (f->n_meta == ST_MAX_META)
            return fail(ps, "more than %d metadata entries", ST_MAX_META);
        st_meta_entry *e = &f->meta[f->n_meta];
        if (string(ps, e->key, sizeof e->key, NULL) < 0 || expect(ps, ':') < 0)
            return -EBADMSG;
        for (int i = 0; i < f->n_meta; i++)
            if (!strcmp(f->meta[i].key, e->key))
                return fail(ps, "metadata key \"%s\" twice", e->key);
        parser probe = *ps;
        size_t n;
        if (string(&probe, NULL, 0, &n) < 0)
            return fail(ps, "metadata \"%s\" is not a string", e->key);
        if (!(e->value = malloc(n + 1)))
            return -ENOMEM;
        f->n_meta++;
        if (string(ps, e->value, n + 1, NULL) < 0)
            return -EBADMSG;
    } while (accept(ps, ','));
    return expect(ps, '}');
}

static int dtype_of(parser *ps, st_dtype *t)
{
    char name[16];
    if (string(ps, name, sizeof name, NULL) < 0)
        return -EBADMSG;
    for (int i = 0; i < N_DTYPES; i++)
        if (!strcmp(name, DTYPES[i].name)) {
            *t = (st_dtype)i;
            return 0;
        }
    return fail(ps, "unknown dtype \"%s\"", name);
}

/* {"dtype": ..., "shape": [...], "data_offsets": [b, e]} in any order. */
static int tensor(parser *ps, st_tensor *t)
{
    int seen = 0;
    if (expect(ps, '{') < 0)
        return -EBADMSG;
    if (!accept(ps, '}'))
        do {
            char key[32];
            if (string(ps, key, sizeof key, NULL) < 0 || expect(ps, ':') < 0)
                return -EBADMSG;
            int bit = !strcmp(key, "dtype") ? 1 : !strcmp(key, "shape") ? 2 : !strcmp(key, "data_offsets") ? 4 : 0;
            if (!bit)
                return fail(ps, "tensor \"%s\": unknown field \"%s\"", t->name, key);
            if (seen & bit)
                return fail(ps, "tensor \"%s\": \"%s\" twice", t->name, key);
            seen |= bit;
            uint64_t v[ST_MAX_DIMS];
            int n;
            if (bit == 1 && dtype_of(ps, &t->dtype) < 0)
                return -EBADMSG;
            if (bit == 2) {
                if (int_array(ps, v, ST_MAX_DIMS, &n) < 0)
                    return -EBADMSG;
                t->ndim = n;
                for (int i = 0; i < n; i++)
                    t->dims[i] = (int64_t)v[i];
            }
            if (bit == 4) {
                if (int_array(ps, v, 2, &n) < 0)
                    return -EBADMSG;
                if (n != 2 || v[0] > v[1])
                    return fail(ps, "tensor \"%s\": data_offsets must be [begin, end] with begin <= end", t->name);
                t->begin = v[0], t->end = v[1];
            }
        } while (accept(ps, ','));
    if (expect(ps, '}') < 0)
        return -EBADMSG;
    if (seen != 7)
        return fail(ps, "tensor \"%s\": needs dtype, shape and data_offsets", t->name);
    return 0;
}

static int header(parser *ps, st_file *f)
{
    if (expect(ps, '{') < 0)
        return -EBADMSG;
    int cap = 0;
    if (!accept(ps, '}'))
        do {
            char name[ST_MAX_NAME];
            if (string(ps, name, sizeof name, NULL) < 0 || expect(ps, ':') < 0)
                return -EBADMSG;
            if (!strcmp(name, "__metadata__")) {
                if (f->n_meta)
                    return fail(ps, "__metadata__ twice");
                int rc = metadata(ps, f);
                if (rc < 0)
                    return rc;
                continue;
            }
            if (st_find(f, name))
                return fail(ps, "tensor \"%s\" twice", name);
            if (f->n_tensors == ST_MAX_TENSORS)
                return fail(ps, "more than %d tensors", ST_MAX_TENSORS);
            if (f->n_tensors == cap) {
                cap = cap ? 2 * cap : 16;
                st_tensor *t = realloc(f->tensors, (size_t)cap * sizeof *t);
                if (!t)
                    return -ENOMEM;
                f->tensors = t;
            }
            st_tensor *t = &f->tensors[f->n_tensors++];
            memset(t, 0, sizeof *t);
            memcpy(t->name, name, sizeof name);
            if (tensor(ps, t) < 0)
                return -EBADMSG;
        } while (accept(ps, ','));
    if (expect(ps, '}') < 0)
        return -EBADMSG;
    skip_ws(ps);
    if (ps->p != ps->end)
        return fail(ps, "something after the header's object");
    return 0;
}

static int by_begin(const void *a, const void *b)
{
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* Each tensor's byte range is its shape's size, and together they tile the data. */
static int check_layout(st_file *f, const char *data, uint64_t data_len, const char *name, char *err, size_t errlen)
{
    const st_tensor **order = malloc((size_t)(f->n_tensors ? f->n_tensors : 1) * sizeof *order);
    if (!order)
        return -ENOMEM;
    int rc = 0;
    for (int i = 0; i < f->n_tensors && !rc; i++) {
        st_tensor *t = &f->tensors[i];
        uint64_t n = st_dtype_size(t->dtype);
        for (int d = 0; d < t->ndim && n; d++) {
            if (t->dims[d] && n > UINT64_MAX / (uint64_t)t->dims[d])
                n = UINT64_MAX; /* never a byte range */
            else
                n *= (uint64_t)t->dims[d];
        }
        if (n != t->end - t->begin) {
            snprintf(err, errlen, "%s: tensor \"%s\": its shape needs %llu bytes, data_offsets give %llu", name,
                     t->name, (unsigned long long)n, (unsigned long long)(t->end - t->begin));
            rc = -EBADMSG;
        }
        t->data = data + t->begin;
        order[i] = t;
    }
    if (!rc) {
        qsort(order, (size_t)f->n_tensors, sizeof *order, by_begin);
        uint64_t at = 0;
        for (int i = 0; i < f->n_tensors && !rc; i++) {
            if (order[i]->begin != at) {
                snprintf(err, errlen, "%s: tensor \"%s\" starts at byte %llu of the data, expected %llu (%s)", name,
                         order[i]->name, (unsigned long long)order[i]->begin, (unsigned long long)at,
                         order[i]->begin < at ? "an overlap" : "a hole");
                rc = -EBADMSG;
            }
            at = order[i]->end;
        }
        if (!rc && at != data_len) {
            snprintf(err, errlen, "%s: the tensors take %llu bytes, the file holds %llu after its header%s", name,
                     (unsigned long long)at, (unsigned long long)data_len, at > data_len ? " (truncated?)" : "");
            rc = -EBADMSG;
        }
    }
    free(order);
    return rc;
}

int st_parse(char *buf, size_t len, const char *name, st_file *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->buf = buf, f->len = len;
    if (len < 8) {
        snprintf(err, errlen, "%s: %zu bytes, not a safetensors file (too short for its header length)", name, len);
        st_free(f);
        return -EBADMSG;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | (unsigned char)buf[i];
    if (n > ST_MAX_HEADER || n > len - 8 || n < 2 || buf[8] != '{') {
        if (n > len - 8 && n <= ST_MAX_HEADER && (len == 8 || buf[8] == '{'))
            snprintf(err, errlen, "%s: the header says %llu bytes, the file has %zu after the length (truncated?)",
                     name, (unsigned long long)n, len - 8);
        else
            snprintf(err, errlen, "%s: not a safetensors file (header length %llu, first byte 0x%02x)", name,
                     (unsigned long long)n, len > 8 ? (unsigned char)buf[8] : 0);
        st_free(f);
        return -EBADMSG;
    }
    parser ps = {.p = buf + 8, .start = buf + 8, .end = buf + 8 + n, .name = name, .err = err, .errlen = errlen};
    int rc = header(&ps, f);
    if (rc == -ENOMEM)
        snprintf(err, errlen, "%s: out of memory", name);
    if (rc == 0)
        rc = check_layout(f, buf + 8 + n, len - 8 - n, name, err, errlen);
    if (rc < 0)
        st_free(f);
    return rc;
}

int st_read(const char *path, size_t max_bytes, st_file *f, char *err, size_t errlen)
{
    char *buf;
    size_t len;
    memset(f, 0, sizeof *f);
    int rc = wholefile_read(path, max_bytes, &buf, &len);
    if (rc < 0) {
        if (rc == -EFBIG)
            snprintf(err, errlen, "%s: larger than %zu bytes", path, max_bytes);
        else
            snprintf(err, errlen, "%s: %s", path, strerror(-rc));
        return rc;
    }
    return st_parse(buf, len, path, f, err, errlen);
}

const st_tensor *st_find(const st_file *f, const char *name)
{
    for (int i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

const char *st_meta(const st_file *f, const char *key)
{
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta[i].key, key))
            return f->meta[i].value;
    return NULL;
}

void st_free(st_file *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->n_meta; i++)
        free(f->meta[i].value);
    free(f->tensors);
    free(f->buf);
    memset(f, 0, sizeof *f);
}

/* ---- writing ------------------------------------------------------------------ */

void st_writer_init(st_writer *w) { memset(w, 0, sizeof *w); }
void st_writer_free(st_writer *w) { st_free(w); }

int st_writer_meta(st_writer *w, const char *key, const char *value)
{
    if (strlen(key) >= ST_MAX_NAME)
        return -EINVAL;
    for (int i = 0; i < w->n_meta; i++)
        if (!strcmp(w->meta[i].key, key)) {
            char *v = strdup(value);
            if (!v)
                return -ENOMEM;
            free(w->meta[i].value);
            w->meta[i].value = v;
            return 0;
        }
    if (w->n_meta == ST_MAX_META)
        return -E2BIG;
    st_meta_entry *e = &w->meta[w->n_meta];
    if (!(e->value = strdup(value)))
        return -ENOMEM;
    snprintf(e->key, sizeof e->key, "%s", key);
    w->n_meta++;
    return 0;
}

int st_writer_tensor(st_writer *w, const char *name, const int64_t *dims, int ndim, const float *data)
{
    if (strlen(name) >= ST_MAX_NAME || ndim < 0 || ndim > ST_MAX_DIMS || !strcmp(name, "__metadata__"))
        return -EINVAL;
    if (w->n_tensors == ST_MAX_TENSORS)
        return -E2BIG;
    if ((w->n_tensors & (w->n_tensors - 1)) == 0) { /* grows at powers of two */
        st_tensor *t = realloc(w->tensors, (size_t)(w->n_tensors ? 2 * w->n_tensors : 1) * sizeof *t);
        if (!t)
            return -ENOMEM;
        w->tensors = t;
    }
    st_tensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = ST_F32, t->ndim = ndim, t->data = data;
    uint64_t n = 4;
    for (int i = 0; i < ndim; i++)
        t->dims[i] = dims[i], n *= (uint64_t)dims[i];
    t->begin = w->n_tensors ? w->tensors[w->n_tensors - 1].end : 0;
    t->end = t->begin + n;
    w->n_tensors++;
    return 0;
}

static void put_string(FILE *o, const char *s)
{
    fputc('"', o);
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(o, "\\%c", c);
        else if (c < 0x20)
            fprintf(o, "\\u%04x", c);
        else
            fputc(c, o);
    }
    fputc('"', o);
}

int st_writer_encode(const st_writer *w, char **out, size_t *len)
{
    char *head = NULL;
    size_t head_len = 0;
    FILE *o = open_memstream(&head, &head_len);
    if (!o)
        return -ENOMEM;
    fputc('{', o);
    if (w->n_meta) {
        fputs("\"__metadata__\":{", o);
        for (int i = 0; i < w->n_meta; i++) {
            if (i)
                fputc(',', o);
            put_string(o, w->meta[i].key);
            fputc(':', o);
            put_string(o, w->meta[i].value);
        }
        fputc('}', o);
    }
    for (int i = 0; i < w->n_tensors; i++) {
        const st_tensor *t = &w->tensors[i];
        if (i || w->n_meta)
            fputc(',', o);
        put_string(o, t->name);
        fprintf(o, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++)
            fprintf(o, "%s%lld", d ? "," : "", (long long)t->dims[d]);
        fprintf(o, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)t->begin, (unsigned long long)t->end);
    }
    fputc('}', o);
    while ((ftell(o) + 8) % 8) /* the format pads the header with spaces so the data is 8-byte aligned */
        fputc(' ', o);
    if (fclose(o) != 0) {
        free(head);
        return -ENOMEM;
    }
    const uint64_t data_len = w->n_tensors ? w->tensors[w->n_tensors - 1].end : 0;
    *len = 8 + head_len + data_len;
    char *buf = malloc(*len);
    if (!buf) {
        free(head);
        return -ENOMEM;
    }
    for (int i = 0; i < 8; i++)
        buf[i] = (char)((uint64_t)head_len >> (8 * i));
    memcpy(buf + 8, head, head_len);
    free(head);
    /* float32 as little-endian bytes: this machine's order (x86-64, aarch64 Linux) */
    for (int i = 0; i < w->n_tensors; i++)
        memcpy(buf + 8 + head_len + w->tensors[i].begin, w->tensors[i].data,
               w->tensors[i].end - w->tensors[i].begin);
    *out = buf;
    return 0;
}

int st_writer_save(const st_writer *w, const char *path, char *err, size_t errlen)
{
    char *buf;
    size_t len;
    int rc = st_writer_encode(w, &buf, &len);
    if (rc < 0) {
        snprintf(err, errlen, "%s: out of memory", path);
        return rc;
    }
    rc = wholefile_write(path, buf, len, 0644, 0, err, errlen);
    free(buf);
    return rc;
}
