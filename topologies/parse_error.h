/* Where a parser found a problem in a text, and what it is: the one shape
 * every parser of a file reports in (topology files and generators here,
 * the cluster file in peer/config). A caller turns it into the one-line
 * message of the `char *err, size_t errlen` rule:
 *
 *   parse_error e;
 *   if ((rc = topo_load(&t, path, &e)) < 0)
 *       parse_error_text(&e, err, sizeof err);   // "ring.topo:3: expected ..."
 */
#ifndef TOPOLOGIES_PARSE_ERROR_H
#define TOPOLOGIES_PARSE_ERROR_H

#include <stddef.h>

typedef struct parse_error {
    char file[256]; /* the file, or the name a text in memory was given; "" for none */
    int line;       /* 1, 2, ...; 0 when the problem is not on one line (a missing line, the graph) */
    char msg[256];
} parse_error;

/* "file:line: msg", "file: msg" when on no line, "msg" without a file; returns err. */
const char *parse_error_text(const parse_error *e, char *err, size_t errlen);

#endif
