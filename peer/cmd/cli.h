/* Command-line helpers shared by every subcommand: strict number parsing and
 * one-line usage errors (exit status 2), in one voice.
 *
 *   long epochs;
 *   if (cli_long("sgp train", "--epochs", optarg, 1, 100000, &epochs)) return CLI_USAGE;
 *   ...
 *   return cli_usage(cmd, "--cluster FILE is required");
 */
#ifndef PEER_CMD_CLI_H
#define PEER_CMD_CLI_H

#include <getopt.h>
#include <stdint.h>

/* A command's exit statuses, and the one answer of an option parser that
 * is not an exit status. */
enum cli_status {
    CLI_OK = 0,       /* done; an option parser: the option is taken */
    CLI_FAILED = 1,   /* a failure such as an unusable file (said on stderr) */
    CLI_USAGE = 2,    /* a usage error (said on stderr) */
    CLI_NOT_MINE = 3, /* an option parser: not one of its options (the next parser's turn) */
};

/* Prints "CMD: message (see 'CMD --help')" on stderr; returns CLI_USAGE. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Whole-string parses with range checks; on failure print a usage error and
 * return CLI_USAGE, else 0. */
int cli_long(const char *cmd, const char *opt, const char *arg, long min, long max, long *out);
int cli_int(const char *cmd, const char *opt, const char *arg, int min, int max, int *out);
int cli_u64(const char *cmd, const char *opt, const char *arg, uint64_t *out);
int cli_double(const char *cmd, const char *opt, const char *arg, double min, double max, double *out);

/* The usage error for getopt_long's '?' or ':' (run with opterr = 0 and a
 * leading ':' in the short-option string). */
int cli_getopt_error(const char *cmd, int c, char *const argv[]);

/* A command line over getopt_long: --help ('h' in opts) prints help and
 * sets *helped; every other option goes to option(ctx, code, value), which
 * takes it (CLI_OK), refuses its value (CLI_USAGE, said) or does not know it
 * (CLI_NOT_MINE). CLI_OK, or the exit status of the first usage error: an
 * unknown option, one not for this command, a missing value, a stray
 * argument. */
typedef int (*cli_option_fn)(void *ctx, int code, const char *value);
int cli_parse(const char *cmd, int argc, char **argv, const struct option *opts, void (*help)(void),
              cli_option_fn option, void *ctx, int *helped);

#endif
