/* acl_wire.c - see acl_wire.h. */
#include "server/acl_wire.h"

#include <stdio.h>
#include <string.h>

void acl_wire_of(const struct meta_acl *a, Cairn__Client__AclEntry *e)
{
  cairn__client__acl_entry__init(e);
  e->principal = (char *)a->principal;
  e->resource_type = a->resource_type;
  e->resource = (char *)a->resource;
  e->prefix = a->prefix;
  e->operation = a->operation;
  e->allow = a->allow;
}

void acl_wire_to(const Cairn__Client__AclEntry *e, struct meta_acl *a)
{
  memset(a, 0, sizeof *a);
  snprintf(a->principal, sizeof a->principal, "%s", e->principal != NULL ? e->principal : "");
  snprintf(a->resource, sizeof a->resource, "%s", e->resource != NULL ? e->resource : "");
  a->resource_type = e->resource_type;
  a->prefix = e->prefix;
  a->operation = e->operation;
  a->allow = e->allow;
}
