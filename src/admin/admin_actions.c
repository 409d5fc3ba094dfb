/* admin_actions.c - the console's actions: client-protocol requests built
 * from a POST's query string and relayed through the node's dispatch on a
 * stand-in conn. See admin_actions.h. */
#include "admin/admin_actions.h"

#include "admin/admin_buf.h"
#include "admin/admin_json.h"
#include "net/frame.h"
#include "server/handlers.h"
#include "server/node.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ADMIN_ACTION_MAX_PARTS 10000u /* partitions one reset may name */
#define ADMIN_ACTION_NAME_MAX 255u

enum admin_action_state { ADMIN_ACTION_RUNNING, ADMIN_ACTION_ANSWERED };

struct admin_action {
  struct admin_actions *aa; /* NULL once the admin port closed */
  struct MHD_Connection *mc;
  enum admin_action_state state;
  bool completed; /* MHD is done with the connection */
  bool suspended;
  struct admin_buf answer; /* the JSON answer, once ANSWERED */
  struct admin_action *prev, *next;
  /* The request (borrowed by the relayed conn_request until it answers). */
  Cairn__Client__Envelope env;
  union {
    Cairn__Client__CreateTopicRequest create;
    Cairn__Client__DeleteTopicRequest del;
    Cairn__Client__AddPartitionsRequest add;
    Cairn__Client__AlterTopicConfigRequest alter;
    Cairn__Client__DecommissionNodeRequest decom;
    Cairn__Client__ResetOffsetsRequest reset;
  } body;
  char name[ADMIN_ACTION_NAME_MAX + 1]; /* topic or group */
  char topic[ADMIN_ACTION_NAME_MAX + 1];
  /* alter-config's one change: key (in topic[]) and value. */
  char value[ADMIN_ACTION_NAME_MAX + 1];
  Cairn__Client__ConfigEntry entry;
  Cairn__Client__ConfigEntry *entryp[1];
  char *resetp[1];
  Cairn__Client__OffsetCommitPartition *parts;
  Cairn__Client__OffsetCommitPartition **partp;
};

void admin_actions_init(struct admin_actions *aa, void (*kick)(void *data),
                        void (*decorate)(void *data, struct MHD_Connection *mc,
                                         struct MHD_Response *r),
                        void *data)
{
  memset(aa, 0, sizeof *aa);
  snprintf(aa->console.principal, sizeof aa->console.principal, "%s", ADMIN_ACTION_PRINCIPAL);
  snprintf(aa->console.peer, sizeof aa->console.peer, "admin port");
  aa->kick = kick;
  aa->decorate = decorate;
  aa->data = data;
}

static void admin_action_free(struct admin_action *act)
{
  if (act->aa != NULL) {
    if (act->prev != NULL) {
      act->prev->next = act->next;
    } else {
      act->aa->pending = act->next;
    }
    if (act->next != NULL) {
      act->next->prev = act->prev;
    }
  }
  admin_buf_close(&act->answer);
  free(act->parts);
  free(act->partp);
  free(act);
}

/* ---- arguments ---- */

static const char *admin_action_arg(struct MHD_Connection *mc, const char *name)
{
  const char *v = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, name);
  return v != NULL && v[0] != '\0' ? v : NULL;
}

bool admin_actions_query_i64(struct MHD_Connection *mc, const char *name, int64_t lo, int64_t hi,
                             int64_t dflt, int64_t *out)
{
  const char *v = admin_action_arg(mc, name);
  *out = dflt;
  if (v == NULL) {
    return true;
  }
  char *end = NULL;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno != 0 || *end != '\0' || x < lo || x > hi) {
    return false;
  }
  *out = x;
  return true;
}

/* A required decimal argument in [lo, hi]. */
static bool admin_action_num(struct MHD_Connection *mc, const char *name, int64_t lo, int64_t hi,
                             int64_t *out)
{
  return admin_action_arg(mc, name) != NULL && admin_actions_query_i64(mc, name, lo, hi, 0, out);
}

static bool admin_action_copy(char *dst, const char *src)
{
  if (src == NULL || strlen(src) > ADMIN_ACTION_NAME_MAX) {
    return false;
  }
  strcpy(dst, src);
  return true;
}

/* ---- building the requests ---- */

static bool admin_action_create(struct admin_action *act, struct MHD_Connection *mc)
{
  int64_t parts = 0, rf = 0;
  if (!admin_action_copy(act->name, admin_action_arg(mc, "name")) ||
      !admin_action_num(mc, "partitions", 1, 100000, &parts) ||
      !admin_action_num(mc, "replication_factor", 1, META_MAX_REPLICAS, &rf)) {
    return false;
  }
  cairn__client__create_topic_request__init(&act->body.create);
  act->body.create.name = act->name;
  act->body.create.partitions = (uint32_t)parts;
  act->body.create.replication_factor = (uint32_t)rf;
  act->env.api = CAIRN__CLIENT__API__API_CREATE_TOPIC;
  act->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_REQ;
  act->env.create_topic_req = &act->body.create;
  return true;
}

static bool admin_action_delete(struct admin_action *act, struct MHD_Connection *mc)
{
  if (!admin_action_copy(act->name, admin_action_arg(mc, "name"))) {
    return false;
  }
  cairn__client__delete_topic_request__init(&act->body.del);
  act->body.del.name = act->name;
  act->env.api = CAIRN__CLIENT__API__API_DELETE_TOPIC;
  act->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_DELETE_TOPIC_REQ;
  act->env.delete_topic_req = &act->body.del;
  return true;
}

static bool admin_action_add_partitions(struct admin_action *act, struct MHD_Connection *mc)
{
  int64_t parts = 0;
  if (!admin_action_copy(act->name, admin_action_arg(mc, "name")) ||
      !admin_action_num(mc, "partitions", 1, 100000, &parts)) {
    return false;
  }
  cairn__client__add_partitions_request__init(&act->body.add);
  act->body.add.name = act->name;
  act->body.add.partitions = (uint32_t)parts;
  act->env.api = CAIRN__CLIENT__API__API_ADD_PARTITIONS;
  act->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_ADD_PARTITIONS_REQ;
  act->env.add_partitions_req = &act->body.add;
  return true;
}

/* One change: key takes value, or goes back to its default when value is
 * absent. The handler checks the key and the value. */
static bool admin_action_alter_config(struct admin_action *act, struct MHD_Connection *mc)
{
  const char *value = admin_action_arg(mc, "value");
  if (!admin_action_copy(act->name, admin_action_arg(mc, "name")) ||
      !admin_action_copy(act->topic, admin_action_arg(mc, "key")) ||
      (value != NULL && !admin_action_copy(act->value, value))) {
    return false;
  }
  Cairn__Client__AlterTopicConfigRequest *r = &act->body.alter;
  cairn__client__alter_topic_config_request__init(r);
  r->name = act->name;
  if (value != NULL) {
    cairn__client__config_entry__init(&act->entry);
    act->entry.key = act->topic;
    act->entry.value = act->value;
    act->entryp[0] = &act->entry;
    r->set = act->entryp;
    r->n_set = 1;
  } else {
    act->resetp[0] = act->topic;
    r->reset = act->resetp;
    r->n_reset = 1;
  }
  act->env.api = CAIRN__CLIENT__API__API_ALTER_TOPIC_CONFIG;
  act->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_ALTER_TOPIC_CONFIG_REQ;
  act->env.alter_topic_config_req = r;
  return true;
}

static bool admin_action_decommission(struct admin_action *act, struct MHD_Connection *mc,
                                      bool recommission)
{
  int64_t id = 0;
  if (!admin_action_num(mc, "node", 1, INT64_MAX, &id)) {
    return false;
  }
  cairn__client__decommission_node_request__init(&act->body.decom);
  act->body.decom.node_id = (uint64_t)id;
  act->body.decom.recommission = recommission;
  act->env.api = CAIRN__CLIENT__API__API_DECOMMISSION_NODE;
  act->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_DECOMMISSION_REQ;
  act->env.decommission_req = &act->body.decom;
  return true;
}

/* The new offset of one partition: a number, or the log start or end of
 * this node's replica (-1: not hosted here). */
static int64_t admin_action_target(struct node *n, const char *topic, uint32_t partition,
                                   const char *to)
{
  if (strcmp(to, "earliest") != 0 && strcmp(to, "latest") != 0) {
    char *end = NULL;
    errno = 0;
    long long x = strtoll(to, &end, 10);
    return errno == 0 && *end == '\0' && x >= 0 ? x : -1;
  }
  struct part *p = node_find_part(n, topic, partition, NULL);
  if (p == NULL || p->state != PART_OPEN) {
    return -1;
  }
  struct store_info si;
  store_info(rgroup_store(&p->rg), &si);
  return strcmp(to, "earliest") == 0 ? si.start_offset : si.next_offset;
}

static bool admin_action_reset(struct admin_action *act, struct node *n, struct MHD_Connection *mc)
{
  const char *to = admin_action_arg(mc, "to");
  if (!admin_action_copy(act->name, admin_action_arg(mc, "group")) ||
      !admin_action_copy(act->topic, admin_action_arg(mc, "topic")) || to == NULL) {
    return false;
  }
  const struct meta_topic *t = meta_topic_find(ctl_state(&n->ctl), act->topic);
  if (t == NULL) {
    return false;
  }
  int64_t one = -1;
  bool single = admin_action_arg(mc, "partition") != NULL;
  if (single && !admin_action_num(mc, "partition", 0, (int64_t)t->npartitions - 1, &one)) {
    return false;
  }
  uint32_t first = single ? (uint32_t)one : 0, count = single ? 1 : t->npartitions;
  if (count > ADMIN_ACTION_MAX_PARTS) {
    return false;
  }
  act->parts = calloc(count, sizeof *act->parts);
  act->partp = calloc(count, sizeof *act->partp);
  if (act->parts == NULL || act->partp == NULL) {
    return false;
  }
  for (uint32_t i = 0; i < count; i++) {
    Cairn__Client__OffsetCommitPartition *x = &act->parts[i];
    cairn__client__offset_commit_partition__init(x);
    x->topic = act->topic;
    x->partition = first + i;
    x->offset = admin_action_target(n, act->topic, first + i, to);
    if (x->offset < 0) {
      return false; /* not a number, or the partition not hosted here */
    }
    act->partp[i] = x;
  }
  cairn__client__reset_offsets_request__init(&act->body.reset);
  act->body.reset.group = act->name;
  act->body.reset.partitions = act->partp;
  act->body.reset.n_partitions = count;
  act->env.api = CAIRN__CLIENT__API__API_RESET_OFFSETS;
  act->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_RESET_OFFSETS_REQ;
  act->env.reset_offsets_req = &act->body.reset;
  return true;
}

/* ---- the answer ---- */

/* The first error of the answer: its own, else the first partition's of a
 * ResetOffsets. NULL: none. */
static const Cairn__Client__Error *admin_action_error(const Cairn__Client__Envelope *env)
{
  const Cairn__Client__Error *e = frame_body_error(env);
  if (e != NULL && e->code != CAIRN__CLIENT__ERROR_CODE__OK) {
    return e;
  }
  if (env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_RESET_OFFSETS_RESP) {
    const Cairn__Client__ResetOffsetsResponse *r = env->reset_offsets_resp;
    for (size_t i = 0; i < r->n_partitions; i++) {
      e = r->partitions[i]->error;
      if (e != NULL && e->code != CAIRN__CLIENT__ERROR_CODE__OK) {
        return e;
      }
    }
  }
  return NULL;
}

static void admin_action_on_answer(struct conn_request *req, const Cairn__Client__Envelope *env,
                                   const struct conn_part *parts, size_t nparts)
{
  struct admin_action *act = req->relay_data;
  for (size_t i = 0; i < nparts; i++) {
    if (parts[i].release != NULL) {
      parts[i].release(parts[i].arg, 0);
    }
  }
  act->state = ADMIN_ACTION_ANSWERED;
  struct admin_json w;
  admin_json_init(&w, &act->answer);
  admin_json_object_begin(&w);
  const Cairn__Client__Error *e = env != NULL ? admin_action_error(env) : NULL;
  admin_json_key(&w, "ok");
  admin_json_bool(&w, env != NULL && e == NULL);
  if (env == NULL || e != NULL) {
    const ProtobufCEnumValue *ev =
        e != NULL ? protobuf_c_enum_descriptor_get_value(&cairn__client__error_code__descriptor,
                                                         (int)e->code)
                  : NULL;
    admin_json_key(&w, "code");
    admin_json_string(&w, ev != NULL ? ev->name : "SHUTTING_DOWN");
    admin_json_key(&w, "error");
    admin_json_string(&w, e != NULL && e->message != NULL ? e->message : "no answer");
  }
  admin_json_object_end(&w);
  admin_buf_puts(&act->answer, "\n");
  if (act->aa == NULL || act->completed) {
    admin_action_free(act); /* nobody waits for it any more */
    return;
  }
  if (act->suspended) {
    act->suspended = false;
    MHD_resume_connection(act->mc);
    act->aa->kick(act->aa->data);
  }
}

static enum MHD_Result admin_action_queue(struct admin_actions *aa, struct MHD_Connection *mc,
                                          unsigned status, struct admin_buf *b)
{
  size_t len = 0;
  char *body = admin_buf_take(b, &len);
  if (body == NULL) {
    return MHD_NO;
  }
  struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  if (r == NULL) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", "application/json");
  MHD_add_response_header(r, "Cache-Control", "no-store");
  aa->decorate(aa->data, mc, r);
  enum MHD_Result rv = MHD_queue_response(mc, status, r);
  MHD_destroy_response(r);
  return rv;
}

enum MHD_Result admin_action_answer(struct admin_action *act, struct MHD_Connection *mc)
{
  if (act->state != ADMIN_ACTION_ANSWERED) {
    return MHD_YES; /* resumed early: wait */
  }
  if (act->aa == NULL) {
    return MHD_NO; /* the port is closing */
  }
  return admin_action_queue(act->aa, mc, MHD_HTTP_OK, &act->answer);
}

void admin_action_completed(struct admin_action *act)
{
  act->completed = true;
  if (act->state == ADMIN_ACTION_ANSWERED) {
    admin_action_free(act);
  }
}

/* ---- starting ---- */

static enum MHD_Result admin_action_refuse(struct admin_actions *aa, struct MHD_Connection *mc,
                                           unsigned status, const char *msg)
{
  struct admin_buf b;
  admin_buf_init(&b, 4096);
  struct admin_json w;
  admin_json_init(&w, &b);
  admin_json_object_begin(&w);
  admin_json_key(&w, "ok");
  admin_json_bool(&w, false);
  admin_json_key(&w, "error");
  admin_json_string(&w, msg);
  admin_json_object_end(&w);
  admin_buf_puts(&b, "\n");
  return admin_action_queue(aa, mc, status, &b);
}

enum MHD_Result admin_action_start(struct admin_actions *aa, struct node *n,
                                   struct MHD_Connection *mc, const char *url, void **con_cls)
{
  static const char prefix[] = "/v1/actions/";
  if (strncmp(url, prefix, sizeof prefix - 1) != 0) {
    return admin_action_refuse(aa, mc, MHD_HTTP_NOT_FOUND, "no such action");
  }
  const char *what = url + sizeof prefix - 1;
  struct admin_action *act = calloc(1, sizeof *act);
  if (act == NULL) {
    return MHD_NO;
  }
  admin_buf_init(&act->answer, 4096);
  cairn__client__envelope__init(&act->env);
  act->env.api_version = 1;
  bool ok = false, known = true;
  if (strcmp(what, "create-topic") == 0) {
    ok = admin_action_create(act, mc);
  } else if (strcmp(what, "delete-topic") == 0) {
    ok = admin_action_delete(act, mc);
  } else if (strcmp(what, "add-partitions") == 0) {
    ok = admin_action_add_partitions(act, mc);
  } else if (strcmp(what, "alter-config") == 0) {
    ok = admin_action_alter_config(act, mc);
  } else if (strcmp(what, "reset-offsets") == 0) {
    ok = admin_action_reset(act, n, mc);
  } else if (strcmp(what, "decommission") == 0 || strcmp(what, "recommission") == 0) {
    ok = admin_action_decommission(act, mc, what[0] == 'r');
  } else {
    known = false;
  }
  struct conn_request *req = ok ? conn_request_relay(&aa->console, act->env.api, &act->env, NULL, 0,
                                                     admin_action_on_answer, act)
                                : NULL;
  if (req == NULL) {
    admin_action_free(act);
    return admin_action_refuse(aa, mc, known ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_NOT_FOUND,
                               !known ? "no such action"
                               : ok   ? "out of memory"
                                      : "bad or missing arguments (docs/operations.md, "
                                        "\"Actions\"; reset-offsets to earliest or latest "
                                        "needs the partitions hosted on this node)");
  }
  act->aa = aa;
  act->mc = mc;
  act->next = aa->pending;
  if (aa->pending != NULL) {
    aa->pending->prev = act;
  }
  aa->pending = act;
  *con_cls = act;
  act->suspended = true;
  MHD_suspend_connection(mc);
  dispatch_request(n, req); /* may answer at once: admin_action_on_answer resumes */
  return MHD_YES;
}

void admin_actions_close(struct admin_actions *aa)
{
  struct admin_action *act = aa->pending;
  while (act != NULL) {
    struct admin_action *next = act->next;
    act->aa = NULL; /* freed by whichever of the answer and MHD comes last */
    act->prev = act->next = NULL;
    if (act->suspended) {
      act->suspended = false;
      MHD_resume_connection(act->mc);
    }
    act = next;
  }
  aa->pending = NULL;
}
