/* config_value.c - parsing and checking one configuration value: decimal
 * numbers, host names and addresses, HOST:PORT, voter lists. Every function
 * fills a "why" text that the caller prefixes with the flag or file:line. */
#include "server/config_value.h"

#include "common/err.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A decimal number with nothing around it. Returns 0, or CAIRN_ECONFIG with
 * why filled. */
int config_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out, char *why,
                     size_t whylen)
{
  if (*s == '\0') {
    snprintf(why, whylen, "the value is empty, expected a number");
    return CAIRN_ECONFIG;
  }
  for (const char *p = s; *p != '\0'; p++) {
    if (!isdigit((unsigned char)*p)) {
      snprintf(why, whylen, "'%s' is not a number (decimal digits only)", s);
      return CAIRN_ECONFIG;
    }
  }
  errno = 0;
  unsigned long long v = strtoull(s, NULL, 10);
  if (errno == ERANGE || v < min || v > max) {
    snprintf(why, whylen, "%s is out of range (%" PRIu64 "..%" PRIu64 ")", s, min, max);
    return CAIRN_ECONFIG;
  }
  *out = v;
  return 0;
}

static bool config_host_is_ip6(const char *host)
{
  struct in6_addr a6;
  return inet_pton(AF_INET6, host, &a6) == 1;
}

bool config_host_is_wildcard(const char *host)
{
  struct in_addr a4;
  struct in6_addr a6;
  if (inet_pton(AF_INET, host, &a4) == 1) {
    return a4.s_addr == htonl(INADDR_ANY);
  }
  if (inet_pton(AF_INET6, host, &a6) == 1) {
    return memcmp(&a6, &in6addr_any, sizeof a6) == 0;
  }
  return false;
}

/* A DNS name, an IPv4 address or an IPv6 address (no brackets). */
int config_check_host(const char *host, char *why, size_t whylen)
{
  size_t len = strlen(host);
  if (len == 0) {
    snprintf(why, whylen, "the host is empty");
    return CAIRN_ECONFIG;
  }
  if (strchr(host, ':') != NULL) {
    if (!config_host_is_ip6(host)) {
      snprintf(why, whylen, "'%s' is not a valid IPv6 address", host);
      return CAIRN_ECONFIG;
    }
    return 0;
  }
  if (len > CONFIG_HOST_MAX) {
    snprintf(why, whylen, "the host is longer than %d characters", CONFIG_HOST_MAX);
    return CAIRN_ECONFIG;
  }
  bool numeric = true;
  size_t label = 0;
  for (const char *p = host;; p++) {
    if (*p == '.' || *p == '\0') {
      if (label == 0 || label > 63 || p[-1] == '-') {
        snprintf(why, whylen, "'%s' is not a valid host name", host);
        return CAIRN_ECONFIG;
      }
      if (*p == '\0') {
        break;
      }
      label = 0;
      continue;
    }
    if (!isalnum((unsigned char)*p) && !(*p == '-' && label > 0)) {
      snprintf(why, whylen, "'%s' is not a valid host name (letters, digits, '-' and '.' only)",
               host);
      return CAIRN_ECONFIG;
    }
    if (!isdigit((unsigned char)*p)) {
      numeric = false;
    }
    label++;
  }
  struct in_addr a4;
  if (numeric && inet_pton(AF_INET, host, &a4) != 1) {
    snprintf(why, whylen, "'%s' is not a valid IPv4 address", host);
    return CAIRN_ECONFIG;
  }
  return 0;
}

/* host may be a->host itself. */
void config_addr_set(struct config_addr *a, const char *host, uint16_t port)
{
  if (host != a->host) {
    snprintf(a->host, sizeof a->host, "%s", host);
  }
  host = a->host;
  a->port = port;
  bool v6 = strchr(host, ':') != NULL;
  snprintf(a->str, sizeof a->str, v6 ? "[%s]:%u" : "%s:%u", host, (unsigned)port);
}

void config_addr_off(struct config_addr *a)
{
  memset(a, 0, sizeof *a);
  snprintf(a->str, sizeof a->str, "off");
}

bool config_addr_is_off(const struct config_addr *a)
{
  return a->host[0] == '\0';
}

/* HOST:PORT or [IPV6]:PORT; port 0 only when allow_port0. */
int config_parse_addr(const char *s, bool allow_port0, struct config_addr *out, char *why,
                      size_t whylen)
{
  char host[CONFIG_HOST_MAX + 1];
  const char *port;
  if (s[0] == '[') {
    const char *close = strchr(s, ']');
    if (close == NULL || close[1] != ':') {
      snprintf(why, whylen, "'%s' is not [IPV6]:PORT", s);
      return CAIRN_ECONFIG;
    }
    size_t n = (size_t)(close - s - 1);
    if (n >= sizeof host) {
      snprintf(why, whylen, "the host in '%s' is too long", s);
      return CAIRN_ECONFIG;
    }
    memcpy(host, s + 1, n);
    host[n] = '\0';
    if (!config_host_is_ip6(host)) {
      snprintf(why, whylen, "'%s' is not a valid IPv6 address", host);
      return CAIRN_ECONFIG;
    }
    port = close + 2;
  } else {
    const char *colon = strrchr(s, ':');
    if (colon == NULL) {
      snprintf(why, whylen, "'%s' is not HOST:PORT", s);
      return CAIRN_ECONFIG;
    }
    if (strchr(s, ':') != colon) {
      snprintf(why, whylen, "'%s': an IPv6 address needs brackets, as in [::1]:7400", s);
      return CAIRN_ECONFIG;
    }
    size_t n = (size_t)(colon - s);
    if (n >= sizeof host) {
      snprintf(why, whylen, "the host in '%s' is longer than %d characters", s, CONFIG_HOST_MAX);
      return CAIRN_ECONFIG;
    }
    memcpy(host, s, n);
    host[n] = '\0';
    char hwhy[CONFIG_ERRMSG_SIZE];
    if (config_check_host(host, hwhy, sizeof hwhy) != 0) {
      snprintf(why, whylen, "'%s': %s", s, hwhy);
      return CAIRN_ECONFIG;
    }
    port = colon + 1;
  }
  uint64_t p;
  char pwhy[CONFIG_ERRMSG_SIZE];
  if (config_parse_u64(port, allow_port0 ? 0 : 1, 65535, &p, pwhy, sizeof pwhy) != 0) {
    snprintf(why, whylen, "'%s': the port %s", s,
             *port == '\0' ? "is missing"
                           : (allow_port0 ? "must be 0..65535" : "must be 1..65535"));
    return CAIRN_ECONFIG;
  }
  config_addr_set(out, host, (uint16_t)p);
  return 0;
}

bool config_addr_equal(const struct config_addr *a, const struct config_addr *b)
{
  return a->port == b->port && strcasecmp(a->host, b->host) == 0;
}

/* Copies s without the blank space around it into buf; false if too long. */
static bool config_trim(const char *s, size_t n, char *buf, size_t buflen)
{
  while (n > 0 && isspace((unsigned char)*s)) {
    s++;
    n--;
  }
  while (n > 0 && isspace((unsigned char)s[n - 1])) {
    n--;
  }
  if (n >= buflen) {
    return false;
  }
  memcpy(buf, s, n);
  buf[n] = '\0';
  return true;
}

/* Appends the entries of one voters text to cfg->voters. A trailing ',' is
 * allowed only when open_ok (a file line continued on the next line); then
 * *open says whether there was one. */
int config_parse_voters(struct config *cfg, const char *s, bool open_ok, bool *open, char *why,
                        size_t whylen)
{
  *open = false;
  size_t entry_no = cfg->voters_len;
  const char *p = s;
  for (;;) {
    const char *comma = strchr(p, ',');
    size_t n = comma != NULL ? (size_t)(comma - p) : strlen(p);
    char entry[CONFIG_ADDR_MAX + 32];
    entry_no++;
    if (!config_trim(p, n, entry, sizeof entry)) {
      snprintf(why, whylen, "voter %zu is too long", entry_no);
      return CAIRN_ECONFIG;
    }
    if (entry[0] == '\0') {
      if (comma == NULL && open_ok && entry_no > 1 && p != s) {
        *open = true; /* "a, b," continued on the next line */
        return 0;
      }
      snprintf(why, whylen, "%s",
               s[strspn(s, " \t")] == '\0' ? "the voters list is empty"
                                           : "empty entry in the voters list (stray ',')");
      return CAIRN_ECONFIG;
    }
    char *at = strchr(entry, '@');
    if (at == NULL) {
      snprintf(why, whylen, "voter '%s' is not ID@HOST:PORT", entry);
      return CAIRN_ECONFIG;
    }
    *at = '\0';
    uint64_t id;
    char nwhy[CONFIG_ERRMSG_SIZE];
    if (config_parse_u64(entry, 0, UINT64_MAX, &id, nwhy, sizeof nwhy) != 0) {
      snprintf(why, whylen, "voter '%s@%s': the id %s", entry, at + 1,
               entry[0] == '\0' ? "is missing" : "is not a number");
      return CAIRN_ECONFIG;
    }
    if (id == 0) {
      snprintf(why, whylen, "voter '0@%s': id 0 is not allowed (ids start at 1)", at + 1);
      return CAIRN_ECONFIG;
    }
    struct config_addr addr;
    char awhy[CONFIG_ERRMSG_SIZE];
    if (config_parse_addr(at + 1, false, &addr, awhy, sizeof awhy) != 0) {
      snprintf(why, whylen, "voter %" PRIu64 ": %s", id, awhy);
      return CAIRN_ECONFIG;
    }
    for (size_t i = 0; i < cfg->voters_len; i++) {
      if (cfg->voters[i].id == id) {
        snprintf(why, whylen, "voter id %" PRIu64 " appears twice (%s and %s)", id,
                 cfg->voters[i].addr.str, addr.str);
        return CAIRN_ECONFIG;
      }
      if (config_addr_equal(&cfg->voters[i].addr, &addr)) {
        snprintf(why, whylen, "voters %" PRIu64 " and %" PRIu64 " have the same address %s",
                 cfg->voters[i].id, id, addr.str);
        return CAIRN_ECONFIG;
      }
    }
    if (cfg->voters_len == CONFIG_MAX_VOTERS) {
      snprintf(why, whylen, "more than %d voters (the controller has at most %d)",
               CONFIG_MAX_VOTERS, CONFIG_MAX_VOTERS);
      return CAIRN_ECONFIG;
    }
    cfg->voters[cfg->voters_len++] = (struct config_voter){.id = id, .addr = addr};
    if (comma == NULL) {
      return 0;
    }
    p = comma + 1;
  }
}
