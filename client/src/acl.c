/* acl.c - access control entries (docs/security.md, "Authorization"):
 * add, remove, list. Each call is an lc_acall (admin_call.h: retried within
 * request_timeout_ms); any node forwards add and remove to the controller
 * leader and answers a list from its copy of the metadata. */
#include "admin_call.h"

#include "common/err.h"

#include <stdlib.h>
#include <string.h>

#define LC_ACL_STR_MAX 255 /* the node's longest principal or resource */

/* One call: the admin call with its request, and the caller's callback. */
struct lc_acl {
  struct lc_acall call; /* first: the callbacks cast back */
  union {
    Cairn__Client__AddAclRequest add;
    Cairn__Client__RemoveAclRequest rm;
    Cairn__Client__ListAclsRequest list;
  } u;
  Cairn__Client__AclEntry entry;
  char principal[LC_ACL_STR_MAX + 1];
  char resource[LC_ACL_STR_MAX + 1];
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

static void lc_acl_free(struct lc_acall *ac)
{
  struct lc_acl *a = (struct lc_acl *)ac;
  cairn_acl_list_free(a->result);
  free(a);
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

static enum lc_op_verdict lc_acl_on_list(struct lc_acall *ac, struct lc_op *op,
                                         Cairn__Client__Envelope *env)
{
  struct lc_acl *a = (struct lc_acl *)ac;
  struct cairn_acl_list *l = lc_acl_copy(env->list_acls_resp);
  if (l == NULL) {
    op->status = CAIRN_ENOMEM;
    return LC_OP_DONE;
  }
  cairn_acl_list_free(a->result);
  a->result = l;
  return LC_OP_DONE;
}

static void lc_acl_on_listed(struct lc_acall *ac, struct cairn_client *c, int status,
                             const char *errmsg)
{
  struct lc_acl *a = (struct lc_acl *)ac;
  struct cairn_acl_list *l = NULL;
  if (status == 0) {
    l = a->result; /* handed to the callback */
    a->result = NULL;
  }
  a->list_cb(c, status, errmsg, l, a->data);
}

static void lc_acl_on_changed(struct lc_acall *ac, struct cairn_client *c, int status,
                              const char *errmsg)
{
  struct lc_acl *a = (struct lc_acl *)ac;
  a->done(c, status, errmsg, a->data);
}

static const struct lc_acall_ops lc_acl_change_ops = {
    .done = lc_acl_on_changed,
    .free = lc_acl_free,
};

static const struct lc_acall_ops lc_acl_list_ops = {
    .answer = lc_acl_on_list,
    .done = lc_acl_on_listed,
    .free = lc_acl_free,
};

/* A new call with its strings copied; NULL when a string is too long or
 * memory runs out (*err says which). */
static struct lc_acl *lc_acl_new(const char *principal, const char *resource, int *err)
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
  memcpy(a->principal, principal, strlen(principal) + 1);
  memcpy(a->resource, resource, strlen(resource) + 1);
  return a;
}

static int lc_acl_change(struct cairn_client *c, const struct cairn_acl *acl, bool add,
                         cairn_done_cb cb, void *data)
{
  int err = lc_acall_check(c, cb != NULL && acl != NULL && acl->principal != NULL);
  if (err != 0) {
    return err;
  }
  struct lc_acl *a = lc_acl_new(acl->principal, acl->resource, &err);
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
    lc_acall_init(&a->call, &lc_acl_change_ops, CAIRN__CLIENT__API__API_ADD_ACL,
                  CAIRN__CLIENT__ENVELOPE__BODY_ADD_ACL_REQ,
                  CAIRN__CLIENT__ENVELOPE__BODY_ADD_ACL_RESP);
    cairn__client__add_acl_request__init(&a->u.add);
    a->u.add.entry = &a->entry;
    a->call.env.add_acl_req = &a->u.add;
  } else {
    lc_acall_init(&a->call, &lc_acl_change_ops, CAIRN__CLIENT__API__API_REMOVE_ACL,
                  CAIRN__CLIENT__ENVELOPE__BODY_REMOVE_ACL_REQ,
                  CAIRN__CLIENT__ENVELOPE__BODY_REMOVE_ACL_RESP);
    cairn__client__remove_acl_request__init(&a->u.rm);
    a->u.rm.entry = &a->entry;
    a->call.env.remove_acl_req = &a->u.rm;
  }
  a->done = cb;
  a->data = data;
  return lc_acall_start(c, &a->call, LC_OP_ANY, NULL, 0);
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
  int err = lc_acall_check(c, cb != NULL && resource_type >= 0);
  if (err != 0) {
    return err;
  }
  struct lc_acl *a = lc_acl_new(principal, resource, &err);
  if (a == NULL) {
    return err;
  }
  lc_acall_init(&a->call, &lc_acl_list_ops, CAIRN__CLIENT__API__API_LIST_ACLS,
                CAIRN__CLIENT__ENVELOPE__BODY_LIST_ACLS_REQ,
                CAIRN__CLIENT__ENVELOPE__BODY_LIST_ACLS_RESP);
  cairn__client__list_acls_request__init(&a->u.list);
  a->u.list.principal = a->principal;
  a->u.list.resource_type = (uint32_t)resource_type;
  a->u.list.resource = a->resource;
  a->call.env.list_acls_req = &a->u.list;
  a->list_cb = cb;
  a->data = data;
  return lc_acall_start(c, &a->call, LC_OP_ANY, NULL, 0);
}
