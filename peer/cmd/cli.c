/* Strict option values and uniform usage errors. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "peer/cmd/cli.h"

int cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see '%s --help')\n", cmd);
    va_end(ap);
    return CLI_USAGE;
}

int cli_long(const char *cmd, const char *opt, const char *arg, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v < min || v > max)
        return cli_usage(cmd, "%s expects an integer from %ld to %ld, got '%s'", opt, min, max, arg);
    *out = v;
    return 0;
}

int cli_int(const char *cmd, const char *opt, const char *arg, int min, int max, int *out)
{
    long v;
    int rc = cli_long(cmd, opt, arg, min, max, &v);
    if (rc == 0)
        *out = (int)v;
    return rc;
}

int cli_u64(const char *cmd, const char *opt, const char *arg, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (errno || end == arg || *end || arg[0] == '-')
        return cli_usage(cmd, "%s expects a non-negative integer, got '%s'", opt, arg);
    *out = (uint64_t)v;
    return 0;
}

int cli_double(const char *cmd, const char *opt, const char *arg, double min, double max, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !isfinite(v) || v < min || v > max)
        return cli_usage(cmd, "%s expects a number from %g to %g, got '%s'", opt, min, max, arg);
    *out = v;
    return 0;
}

int cli_getopt_error(const char *cmd, int c, char *const argv[])
{
    const char *what = argv[optind - 1];
    if (c == ':')
        return cli_usage(cmd, "option '%s' needs a value", what);
    if (optopt && optopt < 256)
        return cli_usage(cmd, "unknown option '-%c'", optopt);
    return cli_usage(cmd, "unknown option '%s'", what);
}

int cli_parse(const char *cmd, int argc, char **argv, const struct option *opts, void (*help)(void),
              cli_option_fn option, void *ctx, int *helped)
{
    *helped = 0;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == 'h') {
            help();
            *helped = 1;
            return CLI_OK;
        }
        if (c == '?' || c == ':')
            return cli_getopt_error(cmd, c, argv);
        int rc = option(ctx, c, optarg);
        if (rc == CLI_NOT_MINE)
            return cli_usage(cmd, "option '%s' is not for this command", argv[optind - 1]);
        if (rc != CLI_OK)
            return rc;
    }
    if (optind < argc)
        return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    return CLI_OK;
}
