/* The line lexer shared by the .topo parser and the cluster file parser
 * (topo_lex.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topologies/topo_lex.h"

void topo_lex_init(topo_lex *L, const char *text, size_t len, int flags)
{
    L->p = text;
    L->end = text ? text + len : text;
    L->line = 0;
    L->flags = flags;
}

int topo_lex_line(topo_lex *L, const char **s, const char **end)
{
    if (!L->p || L->p >= L->end)
        return TOPO_LEX_END;
    /* An int counts the lines because messages print them with %d; a text
     * of 2^31 lines is no configuration anyone wrote. */
    if (L->line == INT_MAX)
        return -ERANGE;
    L->line++;
    const char *nl = memchr(L->p, '\n', (size_t)(L->end - L->p)), *le = nl ? nl : L->end;
    const char *hash = memchr(L->p, '#', (size_t)(le - L->p));
    *s = L->p;
    *end = hash ? hash : le;
    L->p = nl ? nl + 1 : L->end;
    return TOPO_LEX_LINE;
}

int topo_lex_space(const topo_lex *L, char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || (c == ',' && (L->flags & TOPO_LEX_COMMA));
}

int topo_lex_token(const topo_lex *L, const char **s, const char *end, topo_span *t)
{
    const char *p = *s;
    while (p < end && topo_lex_space(L, *p))
        p++;
    if (p == end) {
        *s = p;
        return 0;
    }
    t->p = p;
    while (p < end && !topo_lex_space(L, *p))
        p++;
    t->n = (size_t)(p - t->p);
    *s = p;
    return 1;
}

int topo_span_is(topo_span t, const char *word) { return t.n == strlen(word) && !memcmp(t.p, word, t.n); }

const char *topo_span_quote(topo_span t, char *buf, size_t cap)
{
    size_t k = 0, lim = cap - 4;
    for (size_t i = 0; i < t.n && k < lim; i++)
        buf[k++] = t.p[i] >= 0x20 && t.p[i] < 0x7f ? t.p[i] : '?';
    if (t.n > lim)
        buf[k++] = '.', buf[k++] = '.', buf[k++] = '.';
    buf[k] = 0;
    return buf;
}

int topo_lex_read_file(const char *path, size_t max, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (n == cap) {
            /* One byte past max is enough to know the file is too long:
             * memory follows the bytes read, never a size claimed. */
            if (n > max) {
                rc = -EFBIG;
                break;
            }
            cap = cap ? 2 * cap : 4096;
            if (cap > max + 1)
                cap = max + 1;
            char *nb = realloc(buf, cap);
            if (!nb) {
                rc = -ENOMEM;
                break;
            }
            buf = nb;
        }
        errno = 0;
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f))
                rc = errno ? -errno : -EIO; /* a directory opens, then fails here with EISDIR */
            break;
        }
    }
    fclose(f);
    if (rc == 0 && n > max)
        rc = -EFBIG;
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *text = buf;
    *len = n;
    return 0;
}
