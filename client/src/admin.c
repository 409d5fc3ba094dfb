/* admin.c - the admin calls (topics, cluster status, decommission) and
 * ListOffsets, each an lc_acall (admin_call.h): retried within
 * request_timeout_ms. A created topic is reported once every partition
 * has a leader in a node's metadata (or at the deadline), so a produce
 * right after it routes. */
#include "admin_call.h"

#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum lc_admin_kind {
  LC_ADMIN_CREATE,
  LC_ADMIN_CREATE_WAIT, /* the metadata poll after a create */
  LC_ADMIN_DELETE,
  LC_ADMIN_ADD_PARTITIONS,
  LC_ADMIN_ALTER_CONFIG,
  LC_ADMIN_LIST,
  LC_ADMIN_DESCRIBE,
  LC_ADMIN_CLUSTER,
  LC_ADMIN_DECOMMISSION,
  LC_ADMIN_OFFSETS,
  LC_ADMIN_DELETE_RECORDS
};

/* One admin call: the lc_acall with its request, and the caller's
 * callback. */
struct lc_admin {
  struct lc_acall call; /* first: the callbacks cast back */
  union {
    Cairn__Client__CreateTopicRequest create;
    Cairn__Client__DeleteTopicRequest del;
    Cairn__Client__AddPartitionsRequest add;
    Cairn__Client__AlterTopicConfigRequest alter;
    Cairn__Client__ListTopicsRequest list;
    Cairn__Client__DescribeTopicRequest describe;
    Cairn__Client__DescribeClusterRequest cluster;
    Cairn__Client__DecommissionNodeRequest decommission;
    Cairn__Client__MetadataRequest metadata;
    Cairn__Client__ListOffsetsRequest offsets;
    Cairn__Client__DeleteRecordsRequest delrec;
  } u;
  Cairn__Client__TopicConfig cfg;
  char storage[16]; /* cfg.storage points here */
  Cairn__Client__ListOffsetsPartition lop;
  Cairn__Client__ListOffsetsPartition *lops[1];
  Cairn__Client__DeleteRecordsPartition drp;
  Cairn__Client__DeleteRecordsPartition *drps[1];
  char *topics[1];
  char *name;
  /* An AlterTopicConfig's changes: copies of the caller's strings. */
  Cairn__Client__ConfigEntry *sets;
  Cairn__Client__ConfigEntry **setp;
  char **resets;
  char **strs; /* every string copied, nstrs of them */
  size_t nstrs;
  enum lc_admin_kind kind;
  union {
    cairn_done_cb done;
    cairn_topic_cb topic;
    cairn_topic_list_cb list;
    cairn_cluster_cb cluster;
    cairn_offset_cb offset;
  } cb;
  void *data;
  void *result; /* the result struct, handed to the callback */
  int64_t offset;
  int64_t timestamp;
};

static void lc_admin_free(struct lc_acall *ac)
{
  struct lc_admin *a = (struct lc_admin *)ac;
  for (size_t i = 0; i < a->nstrs; i++) {
    free(a->strs[i]);
  }
  free(a->strs);
  free(a->sets);
  free(a->setp);
  free(a->resets);
  free(a->name);
  free(a);
}

/* The body each kind's answer must carry. */
static const Cairn__Client__Envelope__BodyCase lc_admin_body[] = {
    [LC_ADMIN_CREATE] = CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP,
    [LC_ADMIN_CREATE_WAIT] = CAIRN__CLIENT__ENVELOPE__BODY_METADATA_RESP,
    [LC_ADMIN_DELETE] = CAIRN__CLIENT__ENVELOPE__BODY_DELETE_TOPIC_RESP,
    [LC_ADMIN_ADD_PARTITIONS] = CAIRN__CLIENT__ENVELOPE__BODY_ADD_PARTITIONS_RESP,
    [LC_ADMIN_ALTER_CONFIG] = CAIRN__CLIENT__ENVELOPE__BODY_ALTER_TOPIC_CONFIG_RESP,
    [LC_ADMIN_LIST] = CAIRN__CLIENT__ENVELOPE__BODY_LIST_TOPICS_RESP,
    [LC_ADMIN_DESCRIBE] = CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_TOPIC_RESP,
    [LC_ADMIN_CLUSTER] = CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_CLUSTER_RESP,
    [LC_ADMIN_DECOMMISSION] = CAIRN__CLIENT__ENVELOPE__BODY_DECOMMISSION_RESP,
    [LC_ADMIN_OFFSETS] = CAIRN__CLIENT__ENVELOPE__BODY_LIST_OFFSETS_RESP,
    [LC_ADMIN_DELETE_RECORDS] = CAIRN__CLIENT__ENVELOPE__BODY_DELETE_RECORDS_RESP,
};

/* The verdict on one partition's result from its leader (ListOffsets,
 * DeleteRecords): a NOT_LEADER hint goes into the metadata first, so that
 * the retry goes to the new leader. */
static enum lc_op_verdict lc_admin_at_leader(struct lc_op *op, const Cairn__Client__Error *err,
                                             uint64_t leader_id, const char *leader_address)
{
  if (err != NULL && err->code == CAIRN__CLIENT__ERROR_CODE__NOT_LEADER) {
    op->c->stats.not_leader++;
    lc_meta_set_leader(op->c, op->topic, op->partition, leader_id, leader_address);
  }
  return lc_acall_verdict(op, err);
}

/* An answer of the expected body without an error (admin_call.h). */
static enum lc_op_verdict lc_admin_on_answer(struct lc_acall *ac, struct lc_op *op,
                                             Cairn__Client__Envelope *env)
{
  struct lc_admin *a = (struct lc_admin *)ac;
  switch (a->kind) {
  case LC_ADMIN_CREATE_WAIT: {
    const Cairn__Client__MetadataResponse *m = env->metadata_resp;
    for (size_t i = 0; i < m->n_topics; i++) {
      const Cairn__Client__TopicInfo *t = m->topics[i];
      if (t->name == NULL || strcmp(t->name, a->name) != 0 ||
          (t->error != NULL && t->error->code != CAIRN__CLIENT__ERROR_CODE__OK) ||
          t->n_partitions < t->partition_count) {
        continue;
      }
      bool led = true;
      for (size_t k = 0; k < t->n_partitions; k++) {
        led = led && t->partitions[k]->leader_id != 0;
      }
      if (led) {
        return LC_OP_DONE;
      }
    }
    op->status = CAIRN_EREPLICA_NOT_AVAILABLE; /* not led yet: poll again */
    return LC_OP_RETRY;
  }
  case LC_ADMIN_LIST:
    a->result = lc_info_topic_list(env->list_topics_resp);
    break;
  case LC_ADMIN_DESCRIBE:
    if (env->describe_topic_resp->topic == NULL) {
      op->status = CAIRN_EPROTOCOL;
      return LC_OP_DONE;
    }
    a->result = lc_info_topic(env->describe_topic_resp->topic);
    break;
  case LC_ADMIN_CLUSTER:
    a->result = lc_info_cluster(env->describe_cluster_resp);
    break;
  case LC_ADMIN_OFFSETS: {
    const Cairn__Client__ListOffsetsResponse *r = env->list_offsets_resp;
    if (r->n_partitions != 1) {
      op->status = CAIRN_EPROTOCOL;
      return LC_OP_DONE;
    }
    const Cairn__Client__ListOffsetsPartitionResult *pr = r->partitions[0];
    enum lc_op_verdict v = lc_admin_at_leader(op, pr->error, pr->leader_id, pr->leader_address);
    if (op->status != 0) {
      return v;
    }
    a->offset = pr->offset;
    a->timestamp = pr->timestamp;
    return LC_OP_DONE;
  }
  case LC_ADMIN_DELETE_RECORDS: {
    const Cairn__Client__DeleteRecordsResponse *r = env->delete_records_resp;
    if (r->n_partitions != 1) {
      op->status = CAIRN_EPROTOCOL;
      return LC_OP_DONE;
    }
    const Cairn__Client__DeleteRecordsPartitionResult *pr = r->partitions[0];
    enum lc_op_verdict v = lc_admin_at_leader(op, pr->error, pr->leader_id, pr->leader_address);
    if (op->status != 0) {
      return v;
    }
    a->offset = pr->low_watermark;
    return LC_OP_DONE;
  }
  default:
    return LC_OP_DONE;
  }
  if (a->result == NULL) {
    op->status = CAIRN_ENOMEM;
  }
  return LC_OP_DONE;
}

static int lc_admin_start_wait(struct cairn_client *c, struct lc_admin *created);

static void lc_admin_on_done(struct lc_acall *ac, struct cairn_client *c, int status,
                             const char *msg)
{
  struct lc_admin *a = (struct lc_admin *)ac;
  switch (a->kind) {
  case LC_ADMIN_CREATE:
    if (status == 0) {
      lc_meta_invalidate(c);
      if (lc_admin_start_wait(c, a) == 0) {
        return; /* the wait op calls back */
      }
    }
    a->cb.done(c, status, msg, a->data);
    break;
  case LC_ADMIN_CREATE_WAIT:
    /* The topic exists whether or not its leaders showed up in time. */
    lc_meta_invalidate(c);
    a->cb.done(c, status == UV_ECANCELED ? UV_ECANCELED : 0, "", a->data);
    break;
  case LC_ADMIN_DELETE:
  case LC_ADMIN_ADD_PARTITIONS:
  case LC_ADMIN_ALTER_CONFIG:
  case LC_ADMIN_DECOMMISSION:
    if (status == 0) {
      lc_meta_invalidate(c);
    }
    a->cb.done(c, status, msg, a->data);
    break;
  case LC_ADMIN_LIST:
    a->cb.list(c, status, msg, status == 0 ? a->result : NULL, a->data);
    if (status != 0) {
      cairn_topic_list_free(a->result);
    }
    break;
  case LC_ADMIN_DESCRIBE:
    a->cb.topic(c, status, msg, status == 0 ? a->result : NULL, a->data);
    if (status != 0) {
      cairn_topic_info_free(a->result);
    }
    break;
  case LC_ADMIN_CLUSTER:
    a->cb.cluster(c, status, msg, status == 0 ? a->result : NULL, a->data);
    if (status != 0) {
      cairn_cluster_info_free(a->result);
    }
    break;
  case LC_ADMIN_OFFSETS:
    a->cb.offset(c, status, msg, status == 0 ? a->offset : -1,
                 status == 0 ? a->timestamp : -1, a->data);
    break;
  case LC_ADMIN_DELETE_RECORDS:
    a->cb.offset(c, status, msg, status == 0 ? a->offset : -1, -1, a->data);
    break;
  }
}

static const struct lc_acall_ops lc_admin_ops = {
    .answer = lc_admin_on_answer,
    .done = lc_admin_on_done,
    .free = lc_admin_free,
};

/* A new call of kind with its env's api and body case set. */
static struct lc_admin *lc_admin_new(enum lc_admin_kind kind, Cairn__Client__Api api,
                                     Cairn__Client__Envelope__BodyCase body, const char *name)
{
  struct lc_admin *a = calloc(1, sizeof *a);
  if (a == NULL) {
    return NULL;
  }
  if (name != NULL && (a->name = strdup(name)) == NULL) {
    free(a);
    return NULL;
  }
  lc_acall_init(&a->call, &lc_admin_ops, api, body, lc_admin_body[kind]);
  a->kind = kind;
  return a;
}

static int lc_admin_start_wait(struct cairn_client *c, struct lc_admin *created)
{
  struct lc_admin *a = lc_admin_new(LC_ADMIN_CREATE_WAIT, CAIRN__CLIENT__API__API_METADATA,
                                    CAIRN__CLIENT__ENVELOPE__BODY_METADATA_REQ, created->name);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  cairn__client__metadata_request__init(&a->u.metadata);
  a->topics[0] = a->name;
  a->u.metadata.n_topics = 1;
  a->u.metadata.topics = a->topics;
  a->call.env.metadata_req = &a->u.metadata;
  a->cb.done = created->cb.done;
  a->data = created->data;
  return lc_acall_start(c, &a->call, LC_OP_ANY, NULL, 0);
}

int cairn_create_topic(struct cairn_client *c, const char *name, uint32_t partitions,
                       uint32_t replication_factor, const struct cairn_topic_config *config,
                       cairn_done_cb cb, void *data)
{
  int rv = lc_acall_check(c, cb != NULL);
  if (rv != 0 || name == NULL) {
    return rv != 0 ? rv : CAIRN_EINVAL;
  }
  struct lc_admin *a = lc_admin_new(LC_ADMIN_CREATE, CAIRN__CLIENT__API__API_CREATE_TOPIC,
                                    CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_REQ, name);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  cairn__client__create_topic_request__init(&a->u.create);
  a->u.create.name = a->name;
  a->u.create.partitions = partitions;
  a->u.create.replication_factor = replication_factor;
  if (config != NULL) {
    cairn__client__topic_config__init(&a->cfg);
    a->cfg.retention_bytes = config->retention_bytes;
    a->cfg.retention_ms = config->retention_ms;
    a->cfg.segment_bytes = config->segment_bytes;
    a->cfg.max_batch_bytes = config->max_batch_bytes;
    snprintf(a->storage, sizeof a->storage, "%s", config->storage);
    a->cfg.storage = a->storage;
    a->u.create.config = &a->cfg;
  }
  a->call.env.create_topic_req = &a->u.create;
  a->cb.done = cb;
  a->data = data;
  return lc_acall_start(c, &a->call, LC_OP_ANY, NULL, 0);
}

int cairn_delete_topic(struct cairn_client *c, const char *name, cairn_done_cb cb, void *data)
{
  int rv = lc_acall_check(c, cb != NULL);
  if (rv != 0 || name == NULL) {
    return rv != 0 ? rv : CAIRN_EINVAL;
  }
  struct lc_admin *a = lc_admin_new(LC_ADMIN_DELETE, CAIRN__CLIENT__API__API_DELETE_TOPIC,
                                    CAIRN__CLIENT__ENVELOPE__BODY_DELETE_TOPIC_REQ, name);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  cairn__client__delete_topic_request__init(&a->u.del);
  a->u.del.name = a->name;
  a->call.env.delete_topic_req = &a->u.del;
  a->cb.done = cb;
  a->data = data;
  return lc_acall_start(c, &a->call, LC_OP_ANY, NULL, 0);
}

int cairn_add_partitions(struct cairn_client *c, const char *name, uint32_t partitions,
                         cairn_done_cb cb, void *data)
{
  int rv = lc_acall_check(c, cb != NULL);
  if (rv != 0 || name == NULL || partitions == 0) {
    return rv != 0 ? rv : CAIRN_EINVAL;
  }
  struct lc_admin *a = lc_admin_new(LC_ADMIN_ADD_PARTITIONS, CAIRN__CLIENT__API__API_ADD_PARTITIONS,
                                    CAIRN__CLIENT__ENVELOPE__BODY_ADD_PARTITIONS_REQ, name);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  cairn__client__add_partitions_request__init(&a->u.add);
  a->u.add.name = a->name;
  a->u.add.partitions = partitions;
  a->call.env.add_partitions_req = &a->u.add;
  a->cb.done = cb;
  a->data = data;
  return lc_acall_start(c, &a->call, LC_OP_ANY, NULL, 0);
}

/* A copy of s that a's free releases; NULL when out of memory. */
static char *lc_admin_keep(struct lc_admin *a, const char *s)
{
  char *copy = strdup(s != NULL ? s : "");
  if (copy != NULL) {
    a->strs[a->nstrs++] = copy;
  }
  return copy;
}

/* Fills a's AlterTopicConfig request with copies of the n changes.
 * Returns 0 or CAIRN_ENOMEM. */
static int lc_admin_alter_fill(struct lc_admin *a, const struct cairn_config_change *changes,
                               size_t n)
{
  a->sets = calloc(n, sizeof *a->sets);
  a->setp = calloc(n, sizeof *a->setp);
  a->resets = calloc(n, sizeof *a->resets);
  a->strs = calloc(2 * n, sizeof *a->strs);
  if (a->sets == NULL || a->setp == NULL || a->resets == NULL || a->strs == NULL) {
    return CAIRN_ENOMEM;
  }
  Cairn__Client__AlterTopicConfigRequest *r = &a->u.alter;
  r->set = a->setp;
  r->reset = a->resets;
  for (size_t i = 0; i < n; i++) {
    char *key = lc_admin_keep(a, changes[i].key);
    if (key == NULL) {
      return CAIRN_ENOMEM;
    }
    if (changes[i].value == NULL) {
      r->reset[r->n_reset++] = key;
      continue;
    }
    Cairn__Client__ConfigEntry *e = &a->sets[r->n_set];
    cairn__client__config_entry__init(e);
    e->key = key;
    if ((e->value = lc_admin_keep(a, changes[i].value)) == NULL) {
      return CAIRN_ENOMEM;
    }
    r->set[r->n_set++] = e;
  }
  return 0;
}

int cairn_alter_topic_config(struct cairn_client *c, const char *name,
                             const struct cairn_config_change *changes, size_t n,
                             cairn_done_cb cb, void *data)
{
  int rv = lc_acall_check(c, cb != NULL);
  if (rv != 0 || name == NULL || changes == NULL || n == 0) {
    return rv != 0 ? rv : CAIRN_EINVAL;
  }
  struct lc_admin *a =
      lc_admin_new(LC_ADMIN_ALTER_CONFIG, CAIRN__CLIENT__API__API_ALTER_TOPIC_CONFIG,
                   CAIRN__CLIENT__ENVELOPE__BODY_ALTER_TOPIC_CONFIG_REQ, name);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  cairn__client__alter_topic_config_request__init(&a->u.alter);
  a->u.alter.name = a->name;
  if ((rv = lc_admin_alter_fill(a, changes, n)) != 0) {
    lc_admin_free(&a->call);
    return rv;
  }
  a->call.env.alter_topic_config_req = &a->u.alter;
  a->cb.done = cb;
  a->data = data;
  return lc_acall_start(c, &a->call, LC_OP_ANY, NULL, 0);
}

int cairn_list_topics(struct cairn_client *c, cairn_topic_list_cb cb, void *data)
{
  int rv = lc_acall_check(c, cb != NULL);
  if (rv != 0) {
    return rv;
  }
  struct lc_admin *a = lc_admin_new(LC_ADMIN_LIST, CAIRN__CLIENT__API__API_LIST_TOPICS,
                                    CAIRN__CLIENT__ENVELOPE__BODY_LIST_TOPICS_REQ, NULL);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  cairn__client__list_topics_request__init(&a->u.list);
  a->call.env.list_topics_req = &a->u.list;
  a->cb.list = cb;
  a->data = data;
  return lc_acall_start(c, &a->call, LC_OP_ANY, NULL, 0);
}

int cairn_describe_topic(struct cairn_client *c, const char *name, cairn_topic_cb cb, void *data)
{
  int rv = lc_acall_check(c, cb != NULL);
  if (rv != 0 || name == NULL) {
    return rv != 0 ? rv : CAIRN_EINVAL;
  }
  struct lc_admin *a = lc_admin_new(LC_ADMIN_DESCRIBE, CAIRN__CLIENT__API__API_DESCRIBE_TOPIC,
                                    CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_TOPIC_REQ, name);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  cairn__client__describe_topic_request__init(&a->u.describe);
  a->u.describe.name = a->name;
  a->call.env.describe_topic_req = &a->u.describe;
  a->cb.topic = cb;
  a->data = data;
  return lc_acall_start(c, &a->call, LC_OP_ANY, NULL, 0);
}

int cairn_describe_cluster(struct cairn_client *c, cairn_cluster_cb cb, void *data)
{
  int rv = lc_acall_check(c, cb != NULL);
  if (rv != 0) {
    return rv;
  }
  struct lc_admin *a = lc_admin_new(LC_ADMIN_CLUSTER, CAIRN__CLIENT__API__API_DESCRIBE_CLUSTER,
                                    CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_CLUSTER_REQ, NULL);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  cairn__client__describe_cluster_request__init(&a->u.cluster);
  a->call.env.describe_cluster_req = &a->u.cluster;
  a->cb.cluster = cb;
  a->data = data;
  return lc_acall_start(c, &a->call, LC_OP_ANY, NULL, 0);
}

/* DecommissionNode, or its cancel (recommission). */
static int lc_admin_node_state(struct cairn_client *c, uint64_t node_id, bool recommission,
                               cairn_done_cb cb, void *data)
{
  int rv = lc_acall_check(c, cb != NULL);
  if (rv != 0) {
    return rv;
  }
  struct lc_admin *a = lc_admin_new(LC_ADMIN_DECOMMISSION,
                                    CAIRN__CLIENT__API__API_DECOMMISSION_NODE,
                                    CAIRN__CLIENT__ENVELOPE__BODY_DECOMMISSION_REQ, NULL);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  cairn__client__decommission_node_request__init(&a->u.decommission);
  a->u.decommission.node_id = node_id;
  a->u.decommission.recommission = recommission;
  a->call.env.decommission_req = &a->u.decommission;
  a->cb.done = cb;
  a->data = data;
  return lc_acall_start(c, &a->call, LC_OP_ANY, NULL, 0);
}

int cairn_decommission_node(struct cairn_client *c, uint64_t node_id, cairn_done_cb cb,
                            void *data)
{
  return lc_admin_node_state(c, node_id, false, cb, data);
}

int cairn_recommission_node(struct cairn_client *c, uint64_t node_id, cairn_done_cb cb,
                            void *data)
{
  return lc_admin_node_state(c, node_id, true, cb, data);
}

int cairn_list_offsets(struct cairn_client *c, const char *topic, int32_t partition,
                       enum cairn_offset_spec spec, int64_t timestamp_ms, cairn_offset_cb cb,
                       void *data)
{
  int rv = lc_acall_check(c, cb != NULL);
  if (rv != 0 || topic == NULL || partition < 0 || spec < CAIRN_OFFSET_SPEC_LATEST ||
      spec > CAIRN_OFFSET_SPEC_TIMESTAMP) {
    return rv != 0 ? rv : CAIRN_EINVAL;
  }
  struct lc_admin *a = lc_admin_new(LC_ADMIN_OFFSETS, CAIRN__CLIENT__API__API_LIST_OFFSETS,
                                    CAIRN__CLIENT__ENVELOPE__BODY_LIST_OFFSETS_REQ, topic);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  cairn__client__list_offsets_request__init(&a->u.offsets);
  cairn__client__list_offsets_partition__init(&a->lop);
  a->lop.topic = a->name;
  a->lop.partition = (uint32_t)partition;
  a->lop.spec = (Cairn__Client__OffsetSpec)spec; /* same numbers as the wire enum */
  a->lop.timestamp = timestamp_ms;
  a->lops[0] = &a->lop;
  a->u.offsets.n_partitions = 1;
  a->u.offsets.partitions = a->lops;
  a->call.env.list_offsets_req = &a->u.offsets;
  a->cb.offset = cb;
  a->data = data;
  return lc_acall_start(c, &a->call, LC_OP_LEADER, topic, partition);
}

int cairn_delete_records(struct cairn_client *c, const char *topic, int32_t partition,
                         int64_t offset, cairn_offset_cb cb, void *data)
{
  int rv = lc_acall_check(c, cb != NULL);
  if (rv != 0 || topic == NULL || partition < 0 || offset < -1) {
    return rv != 0 ? rv : CAIRN_EINVAL;
  }
  struct lc_admin *a = lc_admin_new(LC_ADMIN_DELETE_RECORDS, CAIRN__CLIENT__API__API_DELETE_RECORDS,
                                    CAIRN__CLIENT__ENVELOPE__BODY_DELETE_RECORDS_REQ, topic);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  cairn__client__delete_records_request__init(&a->u.delrec);
  cairn__client__delete_records_partition__init(&a->drp);
  a->drp.topic = a->name;
  a->drp.partition = (uint32_t)partition;
  a->drp.offset = offset;
  a->drps[0] = &a->drp;
  a->u.delrec.n_partitions = 1;
  a->u.delrec.partitions = a->drps;
  a->call.env.delete_records_req = &a->u.delrec;
  a->cb.offset = cb;
  a->data = data;
  return lc_acall_start(c, &a->call, LC_OP_LEADER, topic, partition);
}
