/* authz_principal.h - the authorizer's settings and principal names,
 * free of node state (the config check uses them too); authz.h has the
 * decisions.
 * Context: any thread (no global state). */
#ifndef CAIRN_AUTHZ_PRINCIPAL_H
#define CAIRN_AUTHZ_PRINCIPAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AUTHZ_PRINCIPAL_MAX 128 /* META_PRINCIPAL_MAX */
#define AUTHZ_MAX_SUPER_USERS 32
#define AUTHZ_ANONYMOUS "User:ANONYMOUS"

/* The authorizer's settings, from --authorizer and --super-users. */
struct authz {
  bool enabled;
  size_t nsuper;
  char super_users[AUTHZ_MAX_SUPER_USERS][AUTHZ_PRINCIPAL_MAX + 1];
};

/* Parses a comma-separated list of principals ("User:admin,User:ops";
 * blanks around entries ignored, "" none) into az->super_users. Returns 0,
 * or CAIRN_EINVAL with why filled (a bad principal, too many). Borrows list.
 * Context: any thread. */
__attribute__((warn_unused_result)) int authz_parse_super_users(struct authz *az,
                                                                const char *list, char *why,
                                                                size_t cap);

/* True for "*", "User:NAME" (NAME as a SCRAM user name, or ANONYMOUS) and
 * "Node:ID" (decimal, 1..20 digits). Context: any thread. */
bool authz_principal_ok(const char *principal);

/* Names for logs and messages: "READ".."ALTER", "topic"/"group"/"cluster";
 * "?" for out-of-range values. Returns static strings. */
const char *authz_op_name(uint32_t op);
const char *authz_type_name(uint32_t type);

#endif
