/* The line lexer of the project's text files: a .topo file (FORMAT.md) and
 * the cluster file (peer/config/CLUSTER.md) are both read line by line,
 * '#' starts a comment, blank lines are skipped, tokens are separated by
 * blanks, and every error names "file:line". It lives here because
 * topologies/ is the lowest floor that reads such a file; peer/config/ uses
 * it from above.
 *
 *   topo_lex L;
 *   topo_lex_init(&L, text, len, 0);              // TOPO_LEX_COMMA: ',' separates too
 *   const char *s, *end;
 *   int rc;
 *   while ((rc = topo_lex_line(&L, &s, &end)) == TOPO_LEX_LINE) { // L.line: its number
 *       topo_span kw;
 *       if (!topo_lex_token(&L, &s, end, &kw))
 *           continue;                              // blank or comment only
 *       if (topo_span_is(kw, "peers")) ...
 *       char q[40];
 *       ... "unknown keyword '%s'", topo_span_quote(kw, q, sizeof q) ...
 *   }
 *   if (rc < 0) ... "too many lines" at L.line ...  // else rc == TOPO_LEX_END
 *
 * The input is untrusted (both parsers are fuzzed): a token is a span into
 * the text, never NUL-terminated, and nothing here allocates. What a line
 * may contain (a NUL byte, say) is the parser's rule, not the lexer's.
 */
#ifndef TOPOLOGIES_TOPO_LEX_H
#define TOPOLOGIES_TOPO_LEX_H

#include <stddef.h>

/* The text of one token: n bytes at p, inside the lexed text. */
typedef struct topo_span {
    const char *p;
    size_t n;
} topo_span;

enum { TOPO_LEX_COMMA = 1 }; /* a ',' separates tokens as a blank does (.topo edge lists) */

typedef struct topo_lex {
    const char *p, *end; /* the text not yet returned as lines */
    int line;            /* number of the line last returned (1, 2, ...); 0 before the first */
    int flags;
} topo_lex;

void topo_lex_init(topo_lex *L, const char *text, size_t len, int flags);

/* What topo_lex_line found when it did not fail. */
enum topo_lex_result { TOPO_LEX_END = 0, TOPO_LEX_LINE = 1 };

/* The next line, without its '\n' and without its comment (from the first
 * '#'): TOPO_LEX_LINE with the line in [*s, *end), TOPO_LEX_END after the
 * last line, or -ERANGE when the line number would pass INT_MAX (L->line
 * stays at INT_MAX). A text that ends without '\n' still ends with a line;
 * an empty text has none. */
int topo_lex_line(topo_lex *L, const char **s, const char **end);

/* Whether c separates tokens: blank characters (space, tab, CR, VT, FF),
 * and ',' with TOPO_LEX_COMMA. */
int topo_lex_space(const topo_lex *L, char c);

/* The next token of [*s, end): 1 with it in *t and *s just past it, or 0 when
 * only separators are left (*s = end). */
int topo_lex_token(const topo_lex *L, const char **s, const char *end, topo_span *t);

/* Whether the token is exactly word. */
int topo_span_is(topo_span t, const char *word);

/* The token as it may be quoted in a one-line message: printable ASCII
 * (anything else becomes '?'), cut to cap - 4 bytes with "..." after. cap >= 8.
 * Returns buf. */
const char *topo_span_quote(topo_span t, char *buf, size_t cap);

/* Read a whole file of at most max bytes into *text (malloc'd, *len bytes,
 * not NUL-terminated; free it). 0, -EFBIG when the file is longer than max,
 * -ENOMEM, or the negative errno of opening or reading it (a directory gives
 * -EISDIR). */
int topo_lex_read_file(const char *path, size_t max, char **text, size_t *len);

#endif
