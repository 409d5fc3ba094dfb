/* acl_wire.h - an access control entry between the metadata's form
 * (struct meta_acl, cluster/meta_state.h) and the client protocol's
 * (Cairn__Client__AclEntry): the one mapping that ListAcls, AddAcl and
 * RemoveAcl (handle_acl.c) and Kafka's CreateAcls, DescribeAcls and
 * DeleteAcls (src/kafka/) share. Pure functions: no I/O, no node.
 * Context: any thread. */
#ifndef CAIRN_ACL_WIRE_H
#define CAIRN_ACL_WIRE_H

#include "client.pb-c.h"
#include "cluster/meta_state.h"

/* Fills e (initialized here) from a. e's strings point into a: a must
 * outlive e's use. */
void acl_wire_of(const struct meta_acl *a, Cairn__Client__AclEntry *e);

/* Fills a (zeroed first) from e, copying its strings; a NULL string is ""
 * and one too long for a's fields is cut. Checks nothing: a caller that
 * takes an entry from a request checks it first (handle_acl.c), or with
 * meta_acl_ok after. */
void acl_wire_to(const Cairn__Client__AclEntry *e, struct meta_acl *a);

#endif
