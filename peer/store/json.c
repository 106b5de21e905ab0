/* Flat JSON objects: the writer and its strict reader share one layout table,
 * so the reader takes exactly what the writer wrote. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "peer/store/json.h"
#include "peer/store/wholefile.h"

/* What goes before the first member, between members, and after the last. */
static const struct {
    const char *first, *sep, *close;
} LAYOUT[] = {
    [JSON_PRETTY] = {"\n  ", ",\n  ", "\n}\n"},
    [JSON_LINE] = {"", ", ", "}\n"},
};

/* ---- writing ------------------------------------------------------------------ */

int json_open(json_obj *j, const char *path)
{
    memset(j, 0, sizeof *j);
    j->layout = JSON_PRETTY;
    if (snprintf(j->path, sizeof j->path, "%s", path) >= (int)sizeof j->path)
        j->rc = -ENAMETOOLONG;
    else if (!(j->f = open_memstream(&j->buf, &j->len)))
        j->rc = -ENOMEM;
    if (j->rc < 0) {
        snprintf(j->err, sizeof j->err, "cannot write %.400s: %s", path, strerror(-j->rc));
        return j->rc;
    }
    fputc('{', j->f);
    return 0;
}

void json_begin_line(json_obj *j, FILE *f)
{
    memset(j, 0, sizeof *j);
    j->f = f, j->layout = JSON_LINE;
    fputc('{', f);
}

/* 0, or -1 after a failed json_open (every call is then a no-op). */
static int key(json_obj *j, const char *k)
{
    if (!j->f)
        return -1;
    fprintf(j->f, "%s\"%s\": ", j->n++ ? LAYOUT[j->layout].sep : LAYOUT[j->layout].first, k);
    return 0;
}

void json_num(json_obj *j, const char *k, double v)
{
    if (key(j, k) < 0)
        return;
    if (isfinite(v))
        fprintf(j->f, "%.9g", v);
    else
        fputs("null", j->f);
}

void json_int(json_obj *j, const char *k, long long v)
{
    if (key(j, k) < 0)
        return;
    fprintf(j->f, "%lld", v);
}

void json_u64(json_obj *j, const char *k, uint64_t v)
{
    if (key(j, k) < 0)
        return;
    fprintf(j->f, "%llu", (unsigned long long)v);
}

void json_str(json_obj *j, const char *k, const char *v)
{
    if (key(j, k) < 0)
        return;
    fputc('"', j->f);
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(j->f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(j->f, "\\u%04x", *p);
        else
            fputc(*p, j->f);
    }
    fputc('"', j->f);
}

void json_int_rows(json_obj *j, const char *k, const long long *v, int rows, int cols)
{
    if (key(j, k) < 0)
        return;
    fputc('[', j->f);
    for (int r = 0; r < rows; r++) {
        fputs(r ? ", [" : "[", j->f);
        for (int c = 0; c < cols; c++)
            fprintf(j->f, "%s%lld", c ? ", " : "", v[(size_t)r * cols + c]);
        fputc(']', j->f);
    }
    fputc(']', j->f);
}

int json_close(json_obj *j)
{
    if (!j->f)
        return j->rc;
    fputs(LAYOUT[j->layout].close, j->f);
    if (!j->path[0]) { /* a line of the caller's stream */
        if (fflush(j->f) != 0 || ferror(j->f)) {
            snprintf(j->err, sizeof j->err, "cannot write a JSON line: %s", strerror(errno));
            return -EIO;
        }
        return 0;
    }
    int rc = ferror(j->f) ? -ENOMEM : 0;
    if (fclose(j->f) != 0 && rc == 0)
        rc = -ENOMEM;
    j->f = NULL;
    if (rc < 0)
        snprintf(j->err, sizeof j->err, "%.400s: out of memory", j->path);
    else
        rc = wholefile_write(j->path, j->buf, j->len, 0644, 0, j->err, sizeof j->err);
    free(j->buf);
    j->buf = NULL;
    return rc;
}

char *json_close_text(json_obj *j)
{
    if (!j->f)
        return NULL;
    fputs(LAYOUT[j->layout].close, j->f);
    int bad = ferror(j->f);
    bad |= fclose(j->f) != 0;
    j->f = NULL;
    char *text = j->buf;
    j->buf = NULL;
    if (bad) {
        free(text);
        return NULL;
    }
    return text;
}

/* ---- reading ------------------------------------------------------------------ */

static int fail(json_in *r, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(json_in *r, int rc, const char *fmt, ...)
{
    if (r->err)
        return r->err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error.msg, sizeof r->error.msg, fmt, ap);
    va_end(ap);
    r->error.line = r->line;
    return r->err = rc;
}

/* A short quote of what is at p, for messages. */
static const char *found(const json_in *r, char *buf, size_t cap)
{
    if (r->p >= r->end)
        return "the end";
    size_t n = 0;
    while (r->p + n < r->end && r->p[n] != '\n' && n < 24)
        n++;
    snprintf(buf, cap, "'%.*s'", (int)n, r->p);
    return n ? buf : "a line break";
}

/* Consume s exactly, counting lines. */
static int literal(json_in *r, const char *s)
{
    size_t n = strlen(s);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, s, n) != 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        r->line += s[i] == '\n';
    r->p += n;
    return 0;
}

void json_in_init(json_in *r, json_layout layout, const char *name, const char *text, size_t len)
{
    memset(r, 0, sizeof *r);
    r->p = text, r->end = text + len, r->layout = layout, r->line = 1;
    snprintf(r->error.file, sizeof r->error.file, "%s", name ? name : "");
    if (literal(r, "{") < 0)
        fail(r, -EBADMSG, "not a JSON object");
}

/* The separator and "KEY": of the next member. */
static int expect_key(json_in *r, const char *key)
{
    if (r->err)
        return r->err;
    char q[64];
    const char *sep = r->n ? LAYOUT[r->layout].sep : LAYOUT[r->layout].first;
    if (literal(r, sep) < 0)
        return fail(r, -EBADMSG, "expected %s\"%s\", found %s", r->n ? "a comma and " : "", key,
                    found(r, q, sizeof q));
    const char *at = r->p; /* quote from the key on */
    int line = r->line;
    if (literal(r, "\"") < 0 || literal(r, key) < 0 || literal(r, "\": ") < 0) {
        r->p = at, r->line = line;
        return fail(r, -EBADMSG, "expected \"%s\", found %s", key, found(r, q, sizeof q));
    }
    r->n++;
    return 0;
}

int json_in_next_is(const json_in *r, const char *key)
{
    json_in peek = *r;
    return !r->err && expect_key(&peek, key) == 0;
}

static const char *digits(const char *p, const char *end)
{
    while (p < end && *p >= '0' && *p <= '9')
        p++;
    return p;
}

/* Length of the JSON number at p (-?int frac? exp?; integer: -?int), 0 if none. */
static size_t number_len(const char *p, const char *end, int integer)
{
    const char *s = p, *d;
    if (p < end && *p == '-')
        p++;
    if (p < end && *p == '0')
        p++;
    else if ((d = digits(p, end)) == p)
        return 0;
    else
        p = d;
    if (!integer && p < end && *p == '.') {
        if ((d = digits(p + 1, end)) == p + 1)
            return 0;
        p = d;
    }
    if (!integer && p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if ((d = digits(p, end)) == p)
            return 0;
        p = d;
    }
    return (size_t)(p - s);
}

/* What number found when it did not fail. */
enum number_kind { NUMBER_TOKEN = 0, NUMBER_NULL = 1 };

/* The number token of member `key`, NUL-terminated in tok: NUMBER_TOKEN,
 * NUMBER_NULL (a number that was not finite), or the sticky error. */
static int number(json_in *r, const char *key, int integer, char *tok, size_t cap)
{
    char q[64];
    if (expect_key(r, key) < 0)
        return r->err;
    if (!integer && literal(r, "null") == 0)
        return NUMBER_NULL;
    size_t n = number_len(r->p, r->end, integer);
    if (n == 0 || n >= cap)
        return fail(r, -EBADMSG, "\"%s\": expected %s, found %s", key, integer ? "an integer" : "a number",
                    found(r, q, sizeof q));
    memcpy(tok, r->p, n);
    tok[n] = 0;
    r->p += n;
    return NUMBER_TOKEN;
}

int json_in_num(json_in *r, const char *key, double *v)
{
    char tok[64];
    int rc = number(r, key, 0, tok, sizeof tok);
    if (rc >= 0)
        *v = rc == NUMBER_NULL ? NAN : strtod(tok, NULL);
    return rc < 0 ? rc : 0;
}

int json_in_int(json_in *r, const char *key, long long *v)
{
    char tok[32];
    if (number(r, key, 1, tok, sizeof tok) < 0)
        return r->err;
    errno = 0;
    long long x = strtoll(tok, NULL, 10);
    if (errno == ERANGE)
        return fail(r, -ERANGE, "\"%s\": %s is out of range", key, tok);
    *v = x;
    return 0;
}

int json_in_u64(json_in *r, const char *key, uint64_t *v)
{
    char tok[32];
    if (number(r, key, 1, tok, sizeof tok) < 0)
        return r->err;
    errno = 0;
    unsigned long long x = strtoull(tok, NULL, 10);
    if (tok[0] == '-' || errno == ERANGE)
        return fail(r, -ERANGE, "\"%s\": %s is out of range", key, tok);
    *v = x;
    return 0;
}

static int hex(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

int json_in_str(json_in *r, const char *key, char *out, size_t cap)
{
    char q[64];
    if (expect_key(r, key) < 0)
        return r->err;
    if (literal(r, "\"") < 0)
        return fail(r, -EBADMSG, "\"%s\": expected a string, found %s", key, found(r, q, sizeof q));
    size_t o = 0;
    for (;;) {
        if (r->p >= r->end || (unsigned char)*r->p < 0x20)
            return fail(r, -EBADMSG, "\"%s\": unterminated string", key);
        unsigned char c = (unsigned char)*r->p++;
        if (c == '"')
            break;
        if (c == '\\') {
            /* only the escapes the writer makes: \" \\ \u00XX for a control character */
            int hi, lo;
            if (r->p < r->end && (*r->p == '"' || *r->p == '\\'))
                c = (unsigned char)*r->p++;
            else if (r->end - r->p >= 5 && !memcmp(r->p, "u00", 3) && (hi = hex(r->p[3])) >= 0 && hi < 2 &&
                     (lo = hex(r->p[4])) >= 0)
                c = (unsigned char)(hi << 4 | lo), r->p += 5;
            else
                return fail(r, -EBADMSG, "\"%s\": an escape this writer never makes", key);
        }
        if (o + 1 >= cap)
            return fail(r, -EBADMSG, "\"%s\": longer than %zu bytes", key, cap - 1);
        out[o++] = (char)c;
    }
    out[o] = 0;
    return 0;
}

int json_in_end(json_in *r)
{
    char q[64];
    if (r->err)
        return r->err;
    if (literal(r, LAYOUT[r->layout].close) < 0)
        return fail(r, -EBADMSG, "expected the end of the object, found %s", found(r, q, sizeof q));
    if (r->p != r->end)
        return fail(r, -EBADMSG, "%s after the object", found(r, q, sizeof q));
    return 0;
}

/* ---- field tables ------------------------------------------------------------- */

void json_put_fields(json_obj *j, const json_field *f, size_t n, const void *base)
{
    for (size_t k = 0; k < n; k++) {
        const void *v = (const char *)base + f[k].off;
        if (f[k].type == JSON_I64)
            json_int(j, f[k].key, *(const int64_t *)v);
        else if (f[k].type == JSON_U64)
            json_u64(j, f[k].key, *(const uint64_t *)v);
        else if (f[k].type == JSON_NUM)
            json_num(j, f[k].key, *(const double *)v);
        else
            json_str(j, f[k].key, (const char *)v);
    }
}

int json_in_fields(json_in *r, const json_field *f, size_t n, void *base)
{
    for (size_t k = 0; k < n && !r->err; k++) {
        void *v = (char *)base + f[k].off;
        long long i = 0;
        if (f[k].type == JSON_I64 && json_in_int(r, f[k].key, &i) == 0)
            *(int64_t *)v = i;
        else if (f[k].type == JSON_U64)
            json_in_u64(r, f[k].key, v);
        else if (f[k].type == JSON_NUM)
            json_in_num(r, f[k].key, v);
        else if (f[k].type == JSON_TEXT)
            json_in_str(r, f[k].key, v, f[k].cap);
    }
    return r->err;
}
