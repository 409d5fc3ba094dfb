/* probe.h - a look at a bootstrap address that tells a user what is wrong
 * more plainly than "no node answered within the timeout": the address
 * speaks HTTP (a node's admin port, not its client port).
 *
 * Blocking, bounded by its timeout, and only advisory: a probe that cannot
 * tell returns false. Used only after libcairn failed to reach the
 * cluster, so that a working command never sends a stray request.
 * Context: the CLI's one thread. */
#ifndef CAIRN_CLI_PROBE_H
#define CAIRN_CLI_PROBE_H

#include <stdbool.h>
#include <stddef.h>

/* True if addr (HOST:PORT) answers an HTTP request with an HTTP status
 * line within timeout_ms: the admin port of a node rather than its client
 * port. */
bool probe_is_http(const char *addr, int timeout_ms);

#endif
