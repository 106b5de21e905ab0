/* A parser's problem as one line of text. */
#include <stdio.h>

#include "topologies/parse_error.h"

const char *parse_error_text(const parse_error *e, char *err, size_t errlen)
{
    if (e->file[0] && e->line > 0)
        snprintf(err, errlen, "%s:%d: %s", e->file, e->line, e->msg);
    else if (e->file[0])
        snprintf(err, errlen, "%s: %s", e->file, e->msg);
    else
        snprintf(err, errlen, "%s", e->msg);
    return err;
}
