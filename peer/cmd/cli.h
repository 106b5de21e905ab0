/* Command-line helpers shared by every subcommand: strict number parsing and
 * one-line usage errors (exit status 2), in one voice.
 *
 *   long epochs;
 *   if (cli_long("sgp train", "--epochs", optarg, 1, 100000, &epochs)) return 2;
 *   ...
 *   return cli_usage(cmd, "unknown option '%s'", argv[optind - 1]);
 */
#ifndef PEER_CMD_CLI_H
#define PEER_CMD_CLI_H

#include <getopt.h>
#include <stdint.h>

#define CLI_USAGE 2

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

#endif
