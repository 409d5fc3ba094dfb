/* handle_acl.c - the access control entries' admin requests: AddAcl and
 * RemoveAcl (proposed by the controller leader, forwarded there by any
 * other node), ListAcls (any node, from its copy of the metadata).
 * docs/security.md.
 *
 * Bad input: an entry is checked here before any proposal (principal
 * "*", "User:NAME" or "Node:ID"; a known resource type and operation; a
 * name of at most META_RESOURCE_MAX bytes, "" only as a prefix or for the
 * cluster) and answered MALFORMED_REQUEST with what is wrong; the
 * metadata refuses an entry past META_MAX_ACLS. */
#include "server/handlers.h"

#include "common/err.h"
#include "common/log.h"
#include "net/wire_err.h"
#include "server/acl_wire.h"
#include "server/authz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct acl_op {
  struct ctl_propose prop;
  struct conn_request *req; /* NULL once the conn canceled it */
  bool add;
};

static void acl_respond(struct conn_request *req, bool add, Cairn__Client__ErrorCode code,
                        const char *msg)
{
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  err.code = code;
  err.message = (char *)(msg != NULL ? msg : "");
  Cairn__Client__AddAclResponse ar = CAIRN__CLIENT__ADD_ACL_RESPONSE__INIT;
  Cairn__Client__RemoveAclResponse rr = CAIRN__CLIENT__REMOVE_ACL_RESPONSE__INIT;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  if (add) {
    ar.error = &err;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_ADD_ACL_RESP;
    env.add_acl_resp = &ar;
  } else {
    rr.error = &err;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_REMOVE_ACL_RESP;
    env.remove_acl_resp = &rr;
  }
  conn_respond(req, &env, NULL, 0);
}

static void acl_on_cancel(struct conn_request *req)
{
  struct acl_op *op = req->handler_data;
  op->req = NULL;
  conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN, "connection closing");
}

static void acl_on_applied(struct ctl_propose *prop, int status, const struct meta_result *res)
{
  struct acl_op *op = prop->data;
  if (op->req != NULL) {
    op->req->handler_data = NULL;
    if (status != 0) {
      acl_respond(op->req, op->add, CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER,
                  cairn_strerror(status));
    } else {
      acl_respond(op->req, op->add, wire_err_from(res->code), res->code != 0 ? res->msg : "");
    }
  }
  free(op);
}

/* Copies the wire entry e into a; 0, or CAIRN_EINVAL with why filled. */
static int acl_from_wire(const Cairn__Client__AclEntry *e, struct meta_acl *a, char *why,
                         size_t cap)
{
  memset(a, 0, sizeof *a);
  if (e == NULL) {
    snprintf(why, cap, "the request carries no entry");
    return CAIRN_EINVAL;
  }
  const char *p = e->principal != NULL ? e->principal : "";
  const char *r = e->resource != NULL ? e->resource : "";
  if (!authz_principal_ok(p)) {
    snprintf(why, cap, "principal '%.*s': not *, User:NAME (1..64 of A-Z a-z 0-9 . _ @ -) or "
             "Node:ID", 80, p);
    return CAIRN_EINVAL;
  }
  if (e->resource_type < META_ACL_TOPIC || e->resource_type > META_ACL_CLUSTER) {
    snprintf(why, cap, "resource type %u: not 1 (topic), 2 (group) or 3 (cluster)",
             e->resource_type);
    return CAIRN_EINVAL;
  }
  if (e->operation < META_ACL_READ || e->operation > META_ACL_ALL) {
    snprintf(why, cap,
             "operation %u: not 1 (read), 2 (write), 3 (create), 4 (delete), 5 (describe), "
             "6 (alter) or 7 (all)",
             e->operation);
    return CAIRN_EINVAL;
  }
  size_t rn = strlen(r);
  if (rn > META_RESOURCE_MAX) {
    snprintf(why, cap, "resource name of %zu bytes: at most %u", rn, META_RESOURCE_MAX);
    return CAIRN_EINVAL;
  }
  acl_wire_to(e, a);
  if (!meta_acl_ok(a)) {
    snprintf(why, cap,
             a->resource_type == META_ACL_CLUSTER
                 ? "the cluster resource has no name and no prefix"
                 : "a topic or group entry needs a name (or a prefix, \"\" for all)");
    return CAIRN_EINVAL;
  }
  return 0;
}

static void acl_change(struct node *n, struct conn_request *req, bool add)
{
  if (handle_forward(n, req)) {
    return;
  }
  const Cairn__Client__AclEntry *e =
      add ? req->env->add_acl_req->entry : req->env->remove_acl_req->entry;
  struct meta_acl a;
  char why[200];
  int rv = acl_from_wire(e, &a, why, sizeof why);
  if (rv != 0) {
    acl_respond(req, add, CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST, why);
    return;
  }
  const struct meta_state *st = ctl_state(&n->ctl);
  if (add && st->nacls >= META_MAX_ACLS) {
    snprintf(why, sizeof why, "the cluster holds %u access control entries already: remove some",
             META_MAX_ACLS);
    acl_respond(req, add, CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST, why);
    return;
  }
  uint8_t *cmd = NULL;
  size_t len = 0;
  rv = meta_cmd_acl(&a, add, &cmd, &len);
  if (rv != 0) {
    acl_respond(req, add, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, cairn_strerror(rv));
    return;
  }
  struct acl_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    free(cmd);
    acl_respond(req, add, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, cairn_strerror(CAIRN_ENOMEM));
    return;
  }
  op->req = req;
  op->add = add;
  op->prop.data = op;
  rv = ctl_propose(&n->ctl, &op->prop, cmd, len, acl_on_applied);
  free(cmd);
  if (rv != 0) {
    free(op);
    acl_respond(req, add, CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER, cairn_strerror(rv));
    return;
  }
  req->handler_data = op;
  conn_request_set_cancel(req, acl_on_cancel);
  if (a.resource_type == META_ACL_CLUSTER) {
    log_info("authz", "%s acl: %s %s %s the cluster (by %s)", add ? "adding" : "removing",
             a.allow ? "allow" : "deny", a.principal, authz_op_name(a.operation),
             authz_principal_of(req->c));
  } else {
    log_info("authz", "%s acl: %s %s %s %s%s '%s' (by %s)", add ? "adding" : "removing",
             a.allow ? "allow" : "deny", a.principal, authz_op_name(a.operation),
             authz_type_name(a.resource_type), a.prefix ? "s prefixed" : "", a.resource,
             authz_principal_of(req->c));
  }
}

void handle_add_acl(struct node *n, struct conn_request *req) { acl_change(n, req, true); }

void handle_remove_acl(struct node *n, struct conn_request *req) { acl_change(n, req, false); }

void handle_list_acls(struct node *n, struct conn_request *req)
{
  const Cairn__Client__ListAclsRequest *r = req->env->list_acls_req;
  const char *fp = r->principal != NULL ? r->principal : "";
  const char *fr = r->resource != NULL ? r->resource : "";
  if (strlen(fp) > META_PRINCIPAL_MAX || strlen(fr) > META_RESOURCE_MAX ||
      r->resource_type > META_ACL_CLUSTER) {
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST,
                       "a filter's principal, resource type or resource is out of range");
    return;
  }
  const struct meta_state *st = ctl_state(&n->ctl);
  Cairn__Client__AclEntry *es = calloc(st->nacls + 1, sizeof *es);
  Cairn__Client__AclEntry **ptrs = calloc(st->nacls + 1, sizeof *ptrs);
  if (es == NULL || ptrs == NULL) {
    free(es);
    free(ptrs);
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, cairn_strerror(CAIRN_ENOMEM));
    return;
  }
  size_t k = 0;
  for (size_t i = 0; i < st->nacls; i++) {
    const struct meta_acl *a = &st->acls[i];
    if ((fp[0] != '\0' && strcmp(fp, a->principal) != 0) ||
        (r->resource_type != 0 && r->resource_type != a->resource_type) ||
        (fr[0] != '\0' && strcmp(fr, a->resource) != 0)) {
      continue;
    }
    acl_wire_of(a, &es[k]);
    ptrs[k] = &es[k];
    k++;
  }
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  Cairn__Client__ListAclsResponse resp = CAIRN__CLIENT__LIST_ACLS_RESPONSE__INIT;
  resp.error = &err;
  resp.entries = ptrs;
  resp.n_entries = k;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_ACLS_RESP;
  env.list_acls_resp = &resp;
  conn_respond(req, &env, NULL, 0);
  free(es);
  free(ptrs);
}
