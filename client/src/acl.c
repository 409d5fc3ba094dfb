/* acl.c - access control entries (docs/security.md, "Authorization"):
 * add, remove, list. Each call is an lc_op (retried within
 * request_timeout_ms); any node forwards add and remove to the controller
 * leader and answers a list from its copy of the metadata. */
#include "internal.h"

#include "common/err.h"

#include <stdlib.h>
#include <string.h>

#define LC_ACL_STR_MAX 255 /* the node's longest principal or resource */

enum lc_acl_kind { LC_ACL_ADD, LC_ACL_REMOVE, LC_ACL_LIST };

/* One call: its request (env first, so the op frees it by cast). */
struct lc_acl {
  Cairn__Client__Envelope env;
  union {
    Cairn__Client__AddAclRequest add;
    Cairn__Client__RemoveAclRequest rm;
    Cairn__Client__ListAclsRequest list;
  } u;
  Cairn__Client__AclEntry entry;
  char principal[LC_ACL_STR_MAX + 1];
  char resource[LC_ACL_STR_MAX + 1];
  enum lc_acl_kind kind;
  cairn_done_cb done;
  cairn_acl_list_cb list_cb;
  void *data;
  struct cairn_acl_list *result;
};

void cairn_acl_list_free(struct cairn_acl_list *l)
{
  if (l == NULL) {
    return;
  }
  for (size_t i = 0; i < l->count; i++) {
    free((char *)l->entries[i].principal);
    free((char *)l->entries[i].resource);
  }
  free(l->entries);
  free(l);
}

static void lc_acl_free(Cairn__Client__Envelope *env)
{
  struct lc_acl *a = (struct lc_acl *)env;
  cairn_acl_list_free(a->result);
  free(a);
}

static const int lc_acl_body[] = {
    [LC_ACL_ADD] = CAIRN__CLIENT__ENVELOPE__BODY_ADD_ACL_RESP,
    [LC_ACL_REMOVE] = CAIRN__CLIENT__ENVELOPE__BODY_REMOVE_ACL_RESP,
    [LC_ACL_LIST] = CAIRN__CLIENT__ENVELOPE__BODY_LIST_ACLS_RESP,
};

static const Cairn__Client__Error *lc_acl_error(const Cairn__Client__Envelope *env)
{
  switch (env->body_case) {
  case CAIRN__CLIENT__ENVELOPE__BODY_ADD_ACL_RESP:
    return env->add_acl_resp->error;
  case CAIRN__CLIENT__ENVELOPE__BODY_REMOVE_ACL_RESP:
    return env->remove_acl_resp->error;
  case CAIRN__CLIENT__ENVELOPE__BODY_LIST_ACLS_RESP:
    return env->list_acls_resp->error;
  default:
    return NULL;
  }
}

/* A copy of the answer's entries into a new list; NULL when out of memory. */
static struct cairn_acl_list *lc_acl_copy(const Cairn__Client__ListAclsResponse *r)
{
  struct cairn_acl_list *l = calloc(1, sizeof *l);
  struct cairn_acl *es = calloc(r->n_entries + 1, sizeof *es);
  if (l == NULL || es == NULL) {
    free(l);
    free(es);
    return NULL;
  }
  l->entries = es;
  for (size_t i = 0; i < r->n_entries; i++) {
    const Cairn__Client__AclEntry *e = r->entries[i];
    struct cairn_acl *a = &es[i];
    a->principal = strdup(e->principal != NULL ? e->principal : "");
    a->resource = strdup(e->resource != NULL ? e->resource : "");
    a->resource_type = (enum cairn_acl_resource)e->resource_type;
    a->prefix = e->prefix;
    a->operation = (enum cairn_acl_op)e->operation;
    a->allow = e->allow;
    l->count++;
    if (a->principal == NULL || a->resource == NULL) {
      cairn_acl_list_free(l);
      return NULL;
    }
  }
  return l;
}

static enum lc_op_verdict lc_acl_on_answer(struct lc_op *op, Cairn__Client__Envelope *env)
{
  struct lc_acl *a = op->data;
  if ((int)env->body_case != lc_acl_body[a->kind]) {
    op->status = CAIRN_EPROTOCOL;
    return LC_OP_DONE;
  }
  const Cairn__Client__Error *e = lc_acl_error(env);
  if (e != NULL && e->code != CAIRN__CLIENT__ERROR_CODE__OK) {
    op->status = lc_wire_err((int)e->code);
    lc_fmt(op->errmsg, sizeof op->errmsg, "%s%s%s", cairn_strerror(op->status),
           e->message != NULL && e->message[0] != '\0' ? ": " : "",
           e->message != NULL ? e->message : "");
    return lc_retriable(op->status) ? LC_OP_RETRY : LC_OP_DONE;
  }
  op->status = 0;
  if (a->kind == LC_ACL_LIST) {
    struct cairn_acl_list *l = lc_acl_copy(env->list_acls_resp);
    if (l == NULL) {
      op->status = CAIRN_ENOMEM;
      return LC_OP_DONE;
    }
    cairn_acl_list_free(a->result);
    a->result = l;
  }
  return LC_OP_DONE;
}

static void lc_acl_on_done(struct lc_op *op)
{
  struct lc_acl *a = op->data;
  const char *msg = op->status == 0 ? "" : op->errmsg;
  if (a->kind == LC_ACL_LIST) {
    struct cairn_acl_list *l = op->status == 0 ? a->result : NULL;
    if (l != NULL) {
      a->result = NULL; /* handed to the callback */
    }
    a->list_cb(op->c, op->status, msg, l, a->data);
    return;
  }
  a->done(op->c, op->status, msg, a->data);
}

static int lc_acl_run(struct cairn_client *c, struct lc_acl *a)
{
  struct lc_op *op = lc_op_new(c);
  if (op == NULL) {
    lc_acl_free(&a->env);
    return CAIRN_ENOMEM;
  }
  op->target = LC_OP_ANY;
  op->req = &a->env;
  op->free_req = lc_acl_free;
  op->answer = lc_acl_on_answer;
  op->done = lc_acl_on_done;
  op->data = a;
  lc_op_start(c, op);
  return 0;
}

/* A new call with its strings copied; NULL when a string is too long or
 * memory runs out (*err says which). */
static struct lc_acl *lc_acl_new(enum lc_acl_kind kind, const char *principal,
                                 const char *resource, int *err)
{
  principal = principal != NULL ? principal : "";
  resource = resource != NULL ? resource : "";
  if (strlen(principal) > LC_ACL_STR_MAX || strlen(resource) > LC_ACL_STR_MAX) {
    *err = CAIRN_EINVAL;
    return NULL;
  }
  struct lc_acl *a = calloc(1, sizeof *a);
  if (a == NULL) {
    *err = CAIRN_ENOMEM;
    return NULL;
  }
  cairn__client__envelope__init(&a->env);
  memcpy(a->principal, principal, strlen(principal) + 1);
  memcpy(a->resource, resource, strlen(resource) + 1);
  a->kind = kind;
  return a;
}

static int lc_acl_change(struct cairn_client *c, const struct cairn_acl *acl, bool add,
                         cairn_done_cb cb, void *data)
{
  if (cb == NULL || acl == NULL || acl->principal == NULL) {
    return CAIRN_EINVAL;
  }
  if (c->closing) {
    return CAIRN_ECLOSED;
  }
  int err = 0;
  struct lc_acl *a =
      lc_acl_new(add ? LC_ACL_ADD : LC_ACL_REMOVE, acl->principal, acl->resource, &err);
  if (a == NULL) {
    return err;
  }
  cairn__client__acl_entry__init(&a->entry);
  a->entry.principal = a->principal;
  a->entry.resource_type = (uint32_t)acl->resource_type;
  a->entry.resource = a->resource;
  a->entry.prefix = acl->prefix;
  a->entry.operation = (uint32_t)acl->operation;
  a->entry.allow = acl->allow;
  if (add) {
    cairn__client__add_acl_request__init(&a->u.add);
    a->u.add.entry = &a->entry;
    a->env.api = CAIRN__CLIENT__API__API_ADD_ACL;
    a->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_ADD_ACL_REQ;
    a->env.add_acl_req = &a->u.add;
  } else {
    cairn__client__remove_acl_request__init(&a->u.rm);
    a->u.rm.entry = &a->entry;
    a->env.api = CAIRN__CLIENT__API__API_REMOVE_ACL;
    a->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_REMOVE_ACL_REQ;
    a->env.remove_acl_req = &a->u.rm;
  }
  a->done = cb;
  a->data = data;
  return lc_acl_run(c, a);
}

int cairn_acl_add(struct cairn_client *c, const struct cairn_acl *a, cairn_done_cb cb, void *data)
{
  return lc_acl_change(c, a, true, cb, data);
}

int cairn_acl_remove(struct cairn_client *c, const struct cairn_acl *a, cairn_done_cb cb,
                     void *data)
{
  return lc_acl_change(c, a, false, cb, data);
}

int cairn_list_acls(struct cairn_client *c, const char *principal, int resource_type,
                    const char *resource, cairn_acl_list_cb cb, void *data)
{
  if (cb == NULL || resource_type < 0) {
    return CAIRN_EINVAL;
  }
  if (c->closing) {
    return CAIRN_ECLOSED;
  }
  int err = 0;
  struct lc_acl *a = lc_acl_new(LC_ACL_LIST, principal, resource, &err);
  if (a == NULL) {
    return err;
  }
  cairn__client__list_acls_request__init(&a->u.list);
  a->u.list.principal = a->principal;
  a->u.list.resource_type = (uint32_t)resource_type;
  a->u.list.resource = a->resource;
  a->env.api = CAIRN__CLIENT__API__API_LIST_ACLS;
  a->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_ACLS_REQ;
  a->env.list_acls_req = &a->u.list;
  a->list_cb = cb;
  a->data = data;
  return lc_acl_run(c, a);
}
