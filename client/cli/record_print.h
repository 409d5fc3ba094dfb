/* record_print.h - how `cairn consume` prints a record, whether it reads
 * partitions itself or as a member of a group (-g): the value and a
 * newline, a -f FORMAT, or one JSON line (JSON Lines).
 *
 * Context: the CLI's one thread; everything goes to stdout. */
#ifndef CAIRN_CLI_RECORD_PRINT_H
#define CAIRN_CLI_RECORD_PRINT_H

#include <cairn/cairn.h>
#include <stdbool.h>
#include <stddef.h>

#define RP_FORMAT_MAX 4096

/* A parsed -f FORMAT: the bytes with escapes turned into bytes and every
 * conversion checked. len 0: no format given (the value and a newline). */
struct rp_format {
  char text[RP_FORMAT_MAX];
  size_t len;
};

/* Parses arg (the -f option of command cmd) into f. Returns CLI_OK, or
 * CLI_USAGE after printing what is wrong (too long, a bad escape, an
 * unknown conversion). */
int rp_format_parse(const char *cmd, const char *arg, struct rp_format *f);

/* Prints r: as one JSON line when json, else through f (NULL or empty:
 * the value's bytes and a newline). Borrows everything. */
void rp_print(const struct rp_format *f, bool json, const struct cairn_record *r);

/* The help lines of -f and --json, for the commands that take them. */
extern const char rp_format_help[];

#endif
