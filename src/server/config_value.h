/* config_value.h - parsers for single configuration values (numbers,
 * hosts, HOST:PORT, voter lists), internal to src/server/config*.c.
 *
 * Each parser returns 0, or CAIRN_ECONFIG with why[0..whylen) saying what is
 * wrong with the value ("'x' is not a number (decimal digits only)"); the
 * caller adds where the value came from. All of them borrow their inputs,
 * keep nothing, and may run on any thread. */
#ifndef CAIRN_SERVER_CONFIG_VALUE_H
#define CAIRN_SERVER_CONFIG_VALUE_H

#include "server/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A decimal number, digits only, within min..max. */
__attribute__((warn_unused_result)) int config_parse_u64(const char *s, uint64_t min, uint64_t max,
                                                         uint64_t *out, char *why, size_t whylen);

/* A DNS name (labels of letters, digits and inner '-'), a dotted IPv4
 * address or an IPv6 address without brackets. */
__attribute__((warn_unused_result)) int config_check_host(const char *host, char *why,
                                                          size_t whylen);

/* True for 0.0.0.0 and ::, the addresses that listen everywhere. */
bool config_host_is_wildcard(const char *host);

/* Fills *a from a checked host (which may be a->host itself) and port. */
void config_addr_set(struct config_addr *a, const char *host, uint16_t port);

/* An optional listener turned off: host "", port 0, str "off". */
void config_addr_off(struct config_addr *a);
bool config_addr_is_off(const struct config_addr *a);

/* HOST:PORT or [IPV6]:PORT into *out; port 0 only when allow_port0. */
__attribute__((warn_unused_result)) int config_parse_addr(const char *s, bool allow_port0,
                                                          struct config_addr *out, char *why,
                                                          size_t whylen);

/* Same port and same host, host names compared without case. */
bool config_addr_equal(const struct config_addr *a, const struct config_addr *b);

/* Appends the entries of "ID@HOST:PORT, ..." to cfg->voters, refusing empty
 * entries, id 0, a repeated id or address and more than CONFIG_MAX_VOTERS.
 * A trailing ',' is allowed only when open_ok (a file line continued on the
 * next one); *open then says whether there was one. On failure cfg->voters
 * may hold the entries before the bad one. */
__attribute__((warn_unused_result)) int config_parse_voters(struct config *cfg, const char *s,
                                                            bool open_ok, bool *open, char *why,
                                                            size_t whylen);

#endif
