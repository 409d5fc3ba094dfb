/* authz_principal.c - principal names and the super-user list
 * (authz_principal.h). */
#include "server/authz_principal.h"

#include "common/err.h"
#include "net/scram.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

bool authz_principal_ok(const char *p)
{
  if (strcmp(p, "*") == 0) {
    return true;
  }
  if (strncmp(p, "User:", 5) == 0) {
    return scram_user_ok(p + 5) || strcmp(p, AUTHZ_ANONYMOUS) == 0;
  }
  if (strncmp(p, "Node:", 5) == 0) {
    size_t len = strlen(p + 5);
    if (len == 0 || len > 20) {
      return false;
    }
    for (size_t i = 5; p[i] != '\0'; i++) {
      if (!isdigit((unsigned char)p[i])) {
        return false;
      }
    }
    return true;
  }
  return false;
}

int authz_parse_super_users(struct authz *az, const char *list, char *why, size_t cap)
{
  az->nsuper = 0;
  const char *s = list;
  while (*s != '\0') {
    while (*s == ' ' || *s == '\t' || *s == ',') {
      s++;
    }
    if (*s == '\0') {
      break;
    }
    const char *end = s;
    while (*end != '\0' && *end != ',') {
      end++;
    }
    size_t len = (size_t)(end - s);
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t')) {
      len--;
    }
    if (az->nsuper == AUTHZ_MAX_SUPER_USERS) {
      snprintf(why, cap, "more than %d super-users", AUTHZ_MAX_SUPER_USERS);
      return CAIRN_EINVAL;
    }
    char *dst = az->super_users[az->nsuper];
    if (len > AUTHZ_PRINCIPAL_MAX) {
      snprintf(why, cap, "a super-user of %zu bytes: at most %u", len, AUTHZ_PRINCIPAL_MAX);
      return CAIRN_EINVAL;
    }
    memcpy(dst, s, len);
    dst[len] = '\0';
    if (strcmp(dst, "*") == 0 || !authz_principal_ok(dst)) {
      snprintf(why, cap, "super-user '%s': not User:NAME or Node:ID", dst);
      return CAIRN_EINVAL;
    }
    az->nsuper++;
    s = end;
  }
  return 0;
}

const char *authz_op_name(uint32_t op)
{
  static const char *const names[] = {"?",      "READ",     "WRITE", "CREATE",
                                      "DELETE", "DESCRIBE", "ALTER", "ALL"};
  return op < sizeof names / sizeof names[0] ? names[op] : "?";
}

const char *authz_type_name(uint32_t type)
{
  switch (type) {
  case 1: return "topic";
  case 2: return "group";
  case 3: return "cluster";
  default: return "?";
  }
}

