/* user.c - users of the client port (docs/security.md): set (create or
 * change the password), delete, list. A user's SCRAM-SHA-256 credential is
 * derived here from the password with a fresh random salt
 * (src/net/scram.h); only the credential is sent, never the password.
 * Each call is an lc_op (retried within request_timeout_ms); any node
 * forwards set and delete to the controller leader. */
#include "internal.h"

#include "common/err.h"
#include "net/scram.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

enum lc_user_kind { LC_USER_SET, LC_USER_DELETE, LC_USER_LIST };

/* One call: its request (env first, so the op frees it by cast). */
struct lc_user {
  Cairn__Client__Envelope env;
  union {
    Cairn__Client__UpsertUserRequest upsert;
    Cairn__Client__DeleteUserRequest del;
    Cairn__Client__ListUsersRequest list;
  } u;
  struct scram_cred cred;
  char name[SCRAM_USER_MAX + 1];
  enum lc_user_kind kind;
  cairn_done_cb done;
  cairn_user_list_cb list_cb;
  void *data;
  struct cairn_user_list *result;
};

void cairn_user_list_free(struct cairn_user_list *l)
{
  if (l == NULL) {
    return;
  }
  for (size_t i = 0; i < l->count; i++) {
    free(l->names[i]);
  }
  free(l->names);
  free(l);
}

static void lc_user_free(Cairn__Client__Envelope *env)
{
  struct lc_user *a = (struct lc_user *)env;
  OPENSSL_cleanse(&a->cred, sizeof a->cred);
  cairn_user_list_free(a->result);
  free(a);
}

static const Cairn__Client__Error *lc_user_error(const Cairn__Client__Envelope *env)
{
  switch (env->body_case) {
  case CAIRN__CLIENT__ENVELOPE__BODY_UPSERT_USER_RESP:
    return env->upsert_user_resp->error;
  case CAIRN__CLIENT__ENVELOPE__BODY_DELETE_USER_RESP:
    return env->delete_user_resp->error;
  case CAIRN__CLIENT__ENVELOPE__BODY_LIST_USERS_RESP:
    return env->list_users_resp->error;
  default:
    return NULL;
  }
}

static const int lc_user_body[] = {
    [LC_USER_SET] = CAIRN__CLIENT__ENVELOPE__BODY_UPSERT_USER_RESP,
    [LC_USER_DELETE] = CAIRN__CLIENT__ENVELOPE__BODY_DELETE_USER_RESP,
    [LC_USER_LIST] = CAIRN__CLIENT__ENVELOPE__BODY_LIST_USERS_RESP,
};

static enum lc_op_verdict lc_user_on_answer(struct lc_op *op, Cairn__Client__Envelope *env)
{
  struct lc_user *a = op->data;
  if ((int)env->body_case != lc_user_body[a->kind]) {
    op->status = CAIRN_EPROTOCOL;
    return LC_OP_DONE;
  }
  const Cairn__Client__Error *e = lc_user_error(env);
  if (e != NULL && e->code != CAIRN__CLIENT__ERROR_CODE__OK) {
    op->status = lc_wire_err((int)e->code);
    lc_fmt(op->errmsg, sizeof op->errmsg, "%s%s%s", cairn_strerror(op->status),
           e->message != NULL && e->message[0] != '\0' ? ": " : "",
           e->message != NULL ? e->message : "");
    return lc_retriable(op->status) ? LC_OP_RETRY : LC_OP_DONE;
  }
  op->status = 0;
  if (a->kind == LC_USER_LIST) {
    const Cairn__Client__ListUsersResponse *r = env->list_users_resp;
    struct cairn_user_list *l = calloc(1, sizeof *l);
    char **names = calloc(r->n_names + 1, sizeof *names);
    if (l == NULL || names == NULL) {
      free(l);
      free(names);
      op->status = CAIRN_ENOMEM;
      return LC_OP_DONE;
    }
    l->names = names;
    for (size_t i = 0; i < r->n_names; i++) {
      if ((names[i] = strdup(r->names[i])) == NULL) {
        cairn_user_list_free(l);
        op->status = CAIRN_ENOMEM;
        return LC_OP_DONE;
      }
      l->count++;
    }
    cairn_user_list_free(a->result);
    a->result = l;
  }
  return LC_OP_DONE;
}

static void lc_user_on_done(struct lc_op *op)
{
  struct lc_user *a = op->data;
  const char *msg = op->status == 0 ? "" : op->errmsg;
  if (a->kind == LC_USER_LIST) {
    struct cairn_user_list *l = op->status == 0 ? a->result : NULL;
    if (l != NULL) {
      a->result = NULL; /* handed to the callback */
    }
    a->list_cb(op->c, op->status, msg, l, a->data);
    return;
  }
  a->done(op->c, op->status, msg, a->data);
}

static int lc_user_run(struct cairn_client *c, struct lc_user *a)
{
  struct lc_op *op = lc_op_new(c);
  if (op == NULL) {
    lc_user_free(&a->env);
    return CAIRN_ENOMEM;
  }
  op->target = LC_OP_ANY;
  op->req = &a->env;
  op->free_req = lc_user_free;
  op->answer = lc_user_on_answer;
  op->done = lc_user_on_done;
  op->data = a;
  lc_op_start(c, op);
  return 0;
}

static struct lc_user *lc_user_new(struct cairn_client *c, enum lc_user_kind kind,
                                   Cairn__Client__Api api, Cairn__Client__Envelope__BodyCase body)
{
  struct lc_user *a = calloc(1, sizeof *a);
  if (a == NULL) {
    return NULL;
  }
  cairn__client__envelope__init(&a->env);
  a->env.api = api;
  a->env.body_case = body;
  a->kind = kind;
  return a;
}

int cairn_user_set(struct cairn_client *c, const char *name, const char *password, cairn_done_cb cb,
                   void *data)
{
  if (cb == NULL || name == NULL || password == NULL || !scram_user_ok(name)) {
    return CAIRN_EINVAL;
  }
  if (c->closing) {
    return CAIRN_ECLOSED;
  }
  struct lc_user *a = lc_user_new(c, LC_USER_SET, CAIRN__CLIENT__API__API_UPSERT_USER,
                                  CAIRN__CLIENT__ENVELOPE__BODY_UPSERT_USER_REQ);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  uint8_t salt[16];
  if (RAND_bytes(salt, sizeof salt) != 1 ||
      scram_cred_make(password, salt, sizeof salt, SCRAM_ITERATIONS_DEFAULT, &a->cred) != 0) {
    lc_user_free(&a->env);
    return CAIRN_EINVAL;
  }
  memcpy(a->name, name, strlen(name) + 1);
  cairn__client__upsert_user_request__init(&a->u.upsert);
  a->u.upsert.name = a->name;
  a->u.upsert.salt.data = a->cred.salt;
  a->u.upsert.salt.len = a->cred.salt_len;
  a->u.upsert.iterations = a->cred.iterations;
  a->u.upsert.stored_key.data = a->cred.stored_key;
  a->u.upsert.stored_key.len = SCRAM_KEY_LEN;
  a->u.upsert.server_key.data = a->cred.server_key;
  a->u.upsert.server_key.len = SCRAM_KEY_LEN;
  a->env.upsert_user_req = &a->u.upsert;
  a->done = cb;
  a->data = data;
  return lc_user_run(c, a);
}

int cairn_user_delete(struct cairn_client *c, const char *name, cairn_done_cb cb, void *data)
{
  if (cb == NULL || name == NULL || !scram_user_ok(name)) {
    return CAIRN_EINVAL;
  }
  if (c->closing) {
    return CAIRN_ECLOSED;
  }
  struct lc_user *a = lc_user_new(c, LC_USER_DELETE, CAIRN__CLIENT__API__API_DELETE_USER,
                                  CAIRN__CLIENT__ENVELOPE__BODY_DELETE_USER_REQ);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  memcpy(a->name, name, strlen(name) + 1);
  cairn__client__delete_user_request__init(&a->u.del);
  a->u.del.name = a->name;
  a->env.delete_user_req = &a->u.del;
  a->done = cb;
  a->data = data;
  return lc_user_run(c, a);
}

int cairn_list_users(struct cairn_client *c, cairn_user_list_cb cb, void *data)
{
  if (cb == NULL) {
    return CAIRN_EINVAL;
  }
  if (c->closing) {
    return CAIRN_ECLOSED;
  }
  struct lc_user *a = lc_user_new(c, LC_USER_LIST, CAIRN__CLIENT__API__API_LIST_USERS,
                                  CAIRN__CLIENT__ENVELOPE__BODY_LIST_USERS_REQ);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  cairn__client__list_users_request__init(&a->u.list);
  a->env.list_users_req = &a->u.list;
  a->list_cb = cb;
  a->data = data;
  return lc_user_run(c, a);
}
