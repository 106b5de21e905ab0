/* Strict number parsing for the benchmark programs' flags: a typo in a flag
 * must not silently become 0. */
#ifndef TESTS_BENCH_BENCH_ARGS_H
#define TESTS_BENCH_BENCH_ARGS_H

#include <errno.h>
#include <stdlib.h>

static inline int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -EINVAL;
    *out = v;
    return 0;
}

static inline int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return -EINVAL;
    *out = v;
    return 0;
}

#endif
