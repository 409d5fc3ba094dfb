/* user.c - users of the client port (docs/security.md): set (create or
 * change the password), delete, list. A user's SCRAM-SHA-256 credential is
 * derived here from the password with a fresh random salt
 * (src/net/scram.h); only the credential is sent, never the password.
 * Each call is an lc_acall (admin_call.h: retried within
 * request_timeout_ms); any node forwards set and delete to the controller
 * leader. */
#include "admin_call.h"

#include "common/err.h"
#include "net/scram.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

/* One call: the admin call with its request, and the caller's callback. */
struct lc_user {
  struct lc_acall call; /* first: the callbacks cast back */
  union {
    Cairn__Client__UpsertUserRequest upsert;
    Cairn__Client__DeleteUserRequest del;
    Cairn__Client__ListUsersRequest list;
  } u;
  struct scram_cred cred;    /* SCRAM-SHA-256 */
  struct scram_cred cred512; /* SCRAM-SHA-512, same salt and iterations */
  char name[SCRAM_USER_MAX + 1];
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

static void lc_user_free(struct lc_acall *ac)
{
  struct lc_user *a = (struct lc_user *)ac;
  OPENSSL_cleanse(&a->cred, sizeof a->cred);
  OPENSSL_cleanse(&a->cred512, sizeof a->cred512);
  cairn_user_list_free(a->result);
  free(a);
}

static enum lc_op_verdict lc_user_on_list(struct lc_acall *ac, struct lc_op *op,
                                          Cairn__Client__Envelope *env)
{
  struct lc_user *a = (struct lc_user *)ac;
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
  return LC_OP_DONE;
}

static void lc_user_on_listed(struct lc_acall *ac, struct cairn_client *c, int status,
                              const char *errmsg)
{
  struct lc_user *a = (struct lc_user *)ac;
  struct cairn_user_list *l = NULL;
  if (status == 0) {
    l = a->result; /* handed to the callback */
    a->result = NULL;
  }
  a->list_cb(c, status, errmsg, l, a->data);
}

static void lc_user_on_changed(struct lc_acall *ac, struct cairn_client *c, int status,
                               const char *errmsg)
{
  struct lc_user *a = (struct lc_user *)ac;
  a->done(c, status, errmsg, a->data);
}

static const struct lc_acall_ops lc_user_change_ops = {
    .done = lc_user_on_changed,
    .free = lc_user_free,
};

static const struct lc_acall_ops lc_user_list_ops = {
    .answer = lc_user_on_list,
    .done = lc_user_on_listed,
    .free = lc_user_free,
};

/* A new call whose envelope is set up for api; NULL on no memory. */
static struct lc_user *lc_user_new(const struct lc_acall_ops *ops, Cairn__Client__Api api,
                                   Cairn__Client__Envelope__BodyCase body,
                                   Cairn__Client__Envelope__BodyCase answer_body)
{
  struct lc_user *a = calloc(1, sizeof *a);
  if (a != NULL) {
    lc_acall_init(&a->call, ops, api, body, answer_body);
  }
  return a;
}

int cairn_user_set(struct cairn_client *c, const char *name, const char *password, cairn_done_cb cb,
                   void *data)
{
  int rv = lc_acall_check(c, cb != NULL && name != NULL && password != NULL &&
                                 scram_user_ok(name));
  if (rv != 0) {
    return rv;
  }
  struct lc_user *a = lc_user_new(&lc_user_change_ops, CAIRN__CLIENT__API__API_UPSERT_USER,
                                  CAIRN__CLIENT__ENVELOPE__BODY_UPSERT_USER_REQ,
                                  CAIRN__CLIENT__ENVELOPE__BODY_UPSERT_USER_RESP);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  uint8_t salt[16];
  /* Both mechanisms' keys from one salt: a Kafka client may log in with
   * either (the node stores keys, never the password). */
  if (RAND_bytes(salt, sizeof salt) != 1 ||
      scram_cred_make(password, salt, sizeof salt, SCRAM_ITERATIONS_DEFAULT, &a->cred) != 0 ||
      scram_cred_make_mech(SCRAM_SHA_512, password, salt, sizeof salt, SCRAM_ITERATIONS_DEFAULT,
                           &a->cred512) != 0) {
    lc_user_free(&a->call);
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
  a->u.upsert.stored_key_512.data = a->cred512.stored_key;
  a->u.upsert.stored_key_512.len = scram_key_len(SCRAM_SHA_512);
  a->u.upsert.server_key_512.data = a->cred512.server_key;
  a->u.upsert.server_key_512.len = scram_key_len(SCRAM_SHA_512);
  a->call.env.upsert_user_req = &a->u.upsert;
  a->done = cb;
  a->data = data;
  return lc_acall_start(c, &a->call, LC_OP_ANY, NULL, 0);
}

int cairn_user_delete(struct cairn_client *c, const char *name, cairn_done_cb cb, void *data)
{
  int rv = lc_acall_check(c, cb != NULL && name != NULL && scram_user_ok(name));
  if (rv != 0) {
    return rv;
  }
  struct lc_user *a = lc_user_new(&lc_user_change_ops, CAIRN__CLIENT__API__API_DELETE_USER,
                                  CAIRN__CLIENT__ENVELOPE__BODY_DELETE_USER_REQ,
                                  CAIRN__CLIENT__ENVELOPE__BODY_DELETE_USER_RESP);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  memcpy(a->name, name, strlen(name) + 1);
  cairn__client__delete_user_request__init(&a->u.del);
  a->u.del.name = a->name;
  a->call.env.delete_user_req = &a->u.del;
  a->done = cb;
  a->data = data;
  return lc_acall_start(c, &a->call, LC_OP_ANY, NULL, 0);
}

int cairn_list_users(struct cairn_client *c, cairn_user_list_cb cb, void *data)
{
  int rv = lc_acall_check(c, cb != NULL);
  if (rv != 0) {
    return rv;
  }
  struct lc_user *a = lc_user_new(&lc_user_list_ops, CAIRN__CLIENT__API__API_LIST_USERS,
                                  CAIRN__CLIENT__ENVELOPE__BODY_LIST_USERS_REQ,
                                  CAIRN__CLIENT__ENVELOPE__BODY_LIST_USERS_RESP);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  cairn__client__list_users_request__init(&a->u.list);
  a->call.env.list_users_req = &a->u.list;
  a->list_cb = cb;
  a->data = data;
  return lc_acall_start(c, &a->call, LC_OP_ANY, NULL, 0);
}
