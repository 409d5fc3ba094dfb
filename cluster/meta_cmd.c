/* meta_cmd.c - encoders of the metadata commands (cairn.meta.MetaCommand),
 * what the controller and the planner propose to the metadata Raft group. */
#include "cluster/meta_state.h"

#include "common/err.h"
#include "meta.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int meta_cmd_pack(const Cairn__Meta__MetaCommand *m, uint8_t **out, size_t *len)
{
  size_t n = cairn__meta__meta_command__get_packed_size(m);
  if (n > META_CMD_MAX_BYTES)
    return CAIRN_EINVAL;
  uint8_t *buf = malloc(n > 0 ? n : 1);
  if (buf == NULL)
    return CAIRN_ENOMEM;
  cairn__meta__meta_command__pack(m, buf);
  *out = buf;
  *len = n;
  return 0;
}

/* protobuf-c's setters take char *; the strings are only read by pack. */
static char *meta_cmd_str(const char *s)
{
  return (char *)(s != NULL ? s : "");
}

int meta_cmd_bootstrap(const char *cluster_id, const uint64_t *voters, size_t nvoters,
                       uint8_t **out, size_t *len)
{
  if (cluster_id == NULL || (nvoters > 0 && voters == NULL))
    return CAIRN_EINVAL;
  Cairn__Meta__Bootstrap b = CAIRN__META__BOOTSTRAP__INIT;
  b.cluster_id = meta_cmd_str(cluster_id);
  b.voters = (uint64_t *)voters;
  b.n_voters = nvoters;
  Cairn__Meta__MetaCommand m = CAIRN__META__META_COMMAND__INIT;
  m.cmd_case = CAIRN__META__META_COMMAND__CMD_BOOTSTRAP;
  m.bootstrap = &b;
  return meta_cmd_pack(&m, out, len);
}

int meta_cmd_register_node(const struct meta_node_info *info, uint64_t replaces_incarnation,
                           uint8_t **out, size_t *len)
{
  if (info == NULL)
    return CAIRN_EINVAL;
  Cairn__Meta__RegisterNode r = CAIRN__META__REGISTER_NODE__INIT;
  r.node_id = info->node_id;
  r.incarnation = info->incarnation;
  r.client_addr = meta_cmd_str(info->client_addr);
  r.cluster_addr = meta_cmd_str(info->cluster_addr);
  r.admin_addr = meta_cmd_str(info->admin_addr);
  r.kafka_addr = meta_cmd_str(info->kafka_addr);
  r.external_addr = meta_cmd_str(info->external_addr);
  r.rack = meta_cmd_str(info->rack);
  r.capabilities = info->caps;
  r.replaces_incarnation = replaces_incarnation;
  Cairn__Meta__MetaCommand m = CAIRN__META__META_COMMAND__INIT;
  m.cmd_case = CAIRN__META__META_COMMAND__CMD_REGISTER_NODE;
  m.register_node = &r;
  return meta_cmd_pack(&m, out, len);
}

int meta_cmd_set_node_state(uint64_t node_id, enum meta_node_state state, uint64_t incarnation,
                            uint64_t at_ms, uint8_t **out, size_t *len)
{
  Cairn__Meta__SetNodeState s = CAIRN__META__SET_NODE_STATE__INIT;
  s.node_id = node_id;
  s.state = (Cairn__Meta__NodeState)state;
  s.incarnation = incarnation;
  s.at_ms = at_ms;
  Cairn__Meta__MetaCommand m = CAIRN__META__META_COMMAND__INIT;
  m.cmd_case = CAIRN__META__META_COMMAND__CMD_SET_NODE_STATE;
  m.set_node_state = &s;
  return meta_cmd_pack(&m, out, len);
}

int meta_cmd_create_topic(const char *name, uint32_t partitions, uint32_t rf,
                          const struct meta_topic_config *cfg, uint8_t **out, size_t *len)
{
  if (name == NULL)
    return CAIRN_EINVAL;
  Cairn__Meta__TopicConfig tc = CAIRN__META__TOPIC_CONFIG__INIT;
  Cairn__Meta__CreateTopic c = CAIRN__META__CREATE_TOPIC__INIT;
  c.name = meta_cmd_str(name);
  c.partitions = partitions;
  c.replication_factor = rf;
  if (cfg != NULL) {
    tc.retention_bytes = cfg->retention_bytes;
    tc.retention_ms = cfg->retention_ms;
    tc.segment_bytes = cfg->segment_bytes;
    tc.max_batch_bytes = cfg->max_batch_bytes;
    tc.storage = cfg->storage;
    c.config = &tc;
  }
  Cairn__Meta__MetaCommand m = CAIRN__META__META_COMMAND__INIT;
  m.cmd_case = CAIRN__META__META_COMMAND__CMD_CREATE_TOPIC;
  m.create_topic = &c;
  return meta_cmd_pack(&m, out, len);
}

int meta_cmd_delete_topic(const char *name, uint8_t **out, size_t *len)
{
  if (name == NULL)
    return CAIRN_EINVAL;
  Cairn__Meta__DeleteTopic d = CAIRN__META__DELETE_TOPIC__INIT;
  d.name = meta_cmd_str(name);
  Cairn__Meta__MetaCommand m = CAIRN__META__META_COMMAND__INIT;
  m.cmd_case = CAIRN__META__META_COMMAND__CMD_DELETE_TOPIC;
  m.delete_topic = &d;
  return meta_cmd_pack(&m, out, len);
}

int meta_cmd_add_partitions(const char *name, uint32_t partitions, uint8_t **out, size_t *len)
{
  if (name == NULL)
    return CAIRN_EINVAL;
  Cairn__Meta__AddPartitions a = CAIRN__META__ADD_PARTITIONS__INIT;
  a.name = meta_cmd_str(name);
  a.partitions = partitions;
  Cairn__Meta__MetaCommand m = CAIRN__META__META_COMMAND__INIT;
  m.cmd_case = CAIRN__META__META_COMMAND__CMD_ADD_PARTITIONS;
  m.add_partitions = &a;
  return meta_cmd_pack(&m, out, len);
}

int meta_cmd_alter_topic_config(const char *name, uint32_t mask,
                                const struct meta_topic_config *cfg, uint8_t **out, size_t *len)
{
  if (name == NULL || cfg == NULL)
    return CAIRN_EINVAL;
  Cairn__Meta__TopicConfig tc = CAIRN__META__TOPIC_CONFIG__INIT;
  tc.retention_bytes = cfg->retention_bytes;
  tc.retention_ms = cfg->retention_ms;
  tc.segment_bytes = cfg->segment_bytes;
  tc.max_batch_bytes = cfg->max_batch_bytes;
  tc.storage = cfg->storage;
  Cairn__Meta__AlterTopicConfig a = CAIRN__META__ALTER_TOPIC_CONFIG__INIT;
  a.name = meta_cmd_str(name);
  a.mask = mask;
  a.config = &tc;
  Cairn__Meta__MetaCommand m = CAIRN__META__META_COMMAND__INIT;
  m.cmd_case = CAIRN__META__META_COMMAND__CMD_ALTER_TOPIC_CONFIG;
  m.alter_topic_config = &a;
  return meta_cmd_pack(&m, out, len);
}

int meta_cmd_report_leader(uint32_t topic_id, uint32_t partition, uint64_t leader_id, uint64_t term,
                           uint8_t **out, size_t *len)
{
  Cairn__Meta__ReportLeader r = CAIRN__META__REPORT_LEADER__INIT;
  r.topic_id = topic_id;
  r.partition = partition;
  r.leader_id = leader_id;
  r.term = term;
  Cairn__Meta__MetaCommand m = CAIRN__META__META_COMMAND__INIT;
  m.cmd_case = CAIRN__META__META_COMMAND__CMD_REPORT_LEADER;
  m.report_leader = &r;
  return meta_cmd_pack(&m, out, len);
}

int meta_cmd_set_replicas(uint32_t topic_id, uint32_t partition, const uint64_t *replicas,
                          size_t nreplicas, uint64_t expected_epoch, uint8_t **out, size_t *len)
{
  if (nreplicas > 0 && replicas == NULL)
    return CAIRN_EINVAL;
  Cairn__Meta__SetReplicas s = CAIRN__META__SET_REPLICAS__INIT;
  s.topic_id = topic_id;
  s.partition = partition;
  s.replicas = (uint64_t *)replicas;
  s.n_replicas = nreplicas;
  s.expected_epoch = expected_epoch;
  Cairn__Meta__MetaCommand m = CAIRN__META__META_COMMAND__INIT;
  m.cmd_case = CAIRN__META__META_COMMAND__CMD_SET_REPLICAS;
  m.set_replicas = &s;
  return meta_cmd_pack(&m, out, len);
}

static void meta_cmd_describe_ids(char *buf, size_t cap, const uint64_t *ids, size_t n)
{
  size_t used = strlen(buf);
  for (size_t i = 0; i < n && used + 1 < cap; i++) {
    int w = snprintf(buf + used, cap - used, "%s%llu", i ? "," : "", (unsigned long long)ids[i]);
    if (w < 0)
      return;
    used += (size_t)w;
  }
}

int meta_cmd_upsert_user(const struct meta_user *mu, uint8_t **out, size_t *len)
{
  struct meta_user_fields f;
  meta_user_fields_of(mu, &f);
  if (!meta_user_cred_ok(f.name, f.salt_len, f.iterations, f.stored_len, f.server_len))
    return CAIRN_EINVAL;
  Cairn__Meta__UpsertUser u = CAIRN__META__UPSERT_USER__INIT;
  u.name = meta_cmd_str(f.name);
  u.salt = (ProtobufCBinaryData){f.salt_len, (uint8_t *)f.salt};
  u.iterations = f.iterations;
  u.stored_key = (ProtobufCBinaryData){f.stored_len, (uint8_t *)f.stored_key};
  u.server_key = (ProtobufCBinaryData){f.server_len, (uint8_t *)f.server_key};
  u.stored_key_512 = (ProtobufCBinaryData){f.stored_512_len, (uint8_t *)f.stored_key_512};
  u.server_key_512 = (ProtobufCBinaryData){f.server_512_len, (uint8_t *)f.server_key_512};
  Cairn__Meta__MetaCommand m = CAIRN__META__META_COMMAND__INIT;
  m.cmd_case = CAIRN__META__META_COMMAND__CMD_UPSERT_USER;
  m.upsert_user = &u;
  return meta_cmd_pack(&m, out, len);
}

int meta_cmd_acl(const struct meta_acl *a, bool add, uint8_t **out, size_t *len)
{
  if (!meta_acl_ok(a))
    return CAIRN_EINVAL;
  Cairn__Meta__AclEntry e;
  meta_acl_to_record(a, &e);
  Cairn__Meta__AddAcl ad = CAIRN__META__ADD_ACL__INIT;
  Cairn__Meta__RemoveAcl rm = CAIRN__META__REMOVE_ACL__INIT;
  Cairn__Meta__MetaCommand m = CAIRN__META__META_COMMAND__INIT;
  if (add) {
    ad.entry = &e;
    m.cmd_case = CAIRN__META__META_COMMAND__CMD_ADD_ACL;
    m.add_acl = &ad;
  } else {
    rm.entry = &e;
    m.cmd_case = CAIRN__META__META_COMMAND__CMD_REMOVE_ACL;
    m.remove_acl = &rm;
  }
  return meta_cmd_pack(&m, out, len);
}

int meta_cmd_delete_user(const char *name, uint8_t **out, size_t *len)
{
  if (name == NULL || !scram_user_ok(name))
    return CAIRN_EINVAL;
  Cairn__Meta__DeleteUser d = CAIRN__META__DELETE_USER__INIT;
  d.name = meta_cmd_str(name);
  Cairn__Meta__MetaCommand m = CAIRN__META__META_COMMAND__INIT;
  m.cmd_case = CAIRN__META__META_COMMAND__CMD_DELETE_USER;
  m.delete_user = &d;
  return meta_cmd_pack(&m, out, len);
}

int meta_cmd_allocate_producer_id(uint64_t producer_id, uint8_t **out, size_t *len)
{
  Cairn__Meta__AllocateProducerId a = CAIRN__META__ALLOCATE_PRODUCER_ID__INIT;
  a.producer_id = producer_id;
  Cairn__Meta__MetaCommand m = CAIRN__META__META_COMMAND__INIT;
  m.cmd_case = CAIRN__META__META_COMMAND__CMD_ALLOCATE_PRODUCER_ID;
  m.allocate_producer_id = &a;
  return meta_cmd_pack(&m, out, len);
}

const char *meta_cmd_describe(const uint8_t *cmd, size_t len, char *buf, size_t cap)
{
  if (cap == 0)
    return buf;
  Cairn__Meta__MetaCommand *m =
      len <= META_CMD_MAX_BYTES ? cairn__meta__meta_command__unpack(NULL, len, cmd) : NULL;
  if (m == NULL) {
    snprintf(buf, cap, "malformed command (%zu bytes)", len);
    return buf;
  }
  switch (m->cmd_case) {
  case CAIRN__META__META_COMMAND__CMD_BOOTSTRAP:
    snprintf(buf, cap, "Bootstrap cluster=%s voters=", m->bootstrap->cluster_id);
    meta_cmd_describe_ids(buf, cap, m->bootstrap->voters, m->bootstrap->n_voters);
    break;
  case CAIRN__META__META_COMMAND__CMD_REGISTER_NODE: {
    const Cairn__Meta__RegisterNode *r = m->register_node;
    snprintf(buf, cap, "RegisterNode %llu incarnation=%llx cluster=%s client=%s rack=%s%s",
             (unsigned long long)r->node_id, (unsigned long long)r->incarnation, r->cluster_addr,
             r->client_addr, r->rack,
             r->replaces_incarnation != 0 ? " (replaces a silent one)" : "");
    break;
  }
  case CAIRN__META__META_COMMAND__CMD_SET_NODE_STATE:
    snprintf(buf, cap, "SetNodeState %llu %s", (unsigned long long)m->set_node_state->node_id,
             meta_node_state_name((int)m->set_node_state->state));
    break;
  case CAIRN__META__META_COMMAND__CMD_CREATE_TOPIC:
    snprintf(buf, cap, "CreateTopic %s partitions=%u rf=%u", m->create_topic->name,
             m->create_topic->partitions, m->create_topic->replication_factor);
    break;
  case CAIRN__META__META_COMMAND__CMD_DELETE_TOPIC:
    snprintf(buf, cap, "DeleteTopic %s", m->delete_topic->name);
    break;
  case CAIRN__META__META_COMMAND__CMD_ADD_PARTITIONS:
    snprintf(buf, cap, "AddPartitions %s partitions=%u", m->add_partitions->name,
             m->add_partitions->partitions);
    break;
  case CAIRN__META__META_COMMAND__CMD_ALTER_TOPIC_CONFIG:
    snprintf(buf, cap, "AlterTopicConfig %s mask=%#x", m->alter_topic_config->name,
             m->alter_topic_config->mask);
    break;
  case CAIRN__META__META_COMMAND__CMD_REPORT_LEADER:
    snprintf(buf, cap, "ReportLeader %u/%u leader=%llu term=%llu", m->report_leader->topic_id,
             m->report_leader->partition, (unsigned long long)m->report_leader->leader_id,
             (unsigned long long)m->report_leader->term);
    break;
  case CAIRN__META__META_COMMAND__CMD_SET_REPLICAS:
    snprintf(buf, cap, "SetReplicas %u/%u epoch=%llu replicas=", m->set_replicas->topic_id,
             m->set_replicas->partition, (unsigned long long)m->set_replicas->expected_epoch);
    meta_cmd_describe_ids(buf, cap, m->set_replicas->replicas, m->set_replicas->n_replicas);
    break;
  case CAIRN__META__META_COMMAND__CMD_ALLOCATE_PRODUCER_ID:
    if (m->allocate_producer_id->producer_id == 0)
      snprintf(buf, cap, "AllocateProducerId new");
    else
      snprintf(buf, cap, "AllocateProducerId bump %llu",
               (unsigned long long)m->allocate_producer_id->producer_id);
    break;
  case CAIRN__META__META_COMMAND__CMD_UPSERT_USER:
    /* the name only: a credential never goes to a log */
    snprintf(buf, cap, "UpsertUser %.64s", m->upsert_user->name);
    break;
  case CAIRN__META__META_COMMAND__CMD_DELETE_USER:
    snprintf(buf, cap, "DeleteUser %.64s", m->delete_user->name);
    break;
  case CAIRN__META__META_COMMAND__CMD_ADD_ACL:
  case CAIRN__META__META_COMMAND__CMD_REMOVE_ACL: {
    const Cairn__Meta__AclEntry *e = m->cmd_case == CAIRN__META__META_COMMAND__CMD_ADD_ACL
                                         ? m->add_acl->entry
                                         : m->remove_acl->entry;
    snprintf(buf, cap, "%s %.128s %s type=%u resource=%.64s%s op=%u",
             m->cmd_case == CAIRN__META__META_COMMAND__CMD_ADD_ACL ? "AddAcl" : "RemoveAcl",
             e != NULL ? e->principal : "?", e != NULL && e->allow ? "allow" : "deny",
             e != NULL ? e->resource_type : 0, e != NULL ? e->resource : "",
             e != NULL && e->prefix ? "*" : "", e != NULL ? e->operation : 0);
    break;
  }
  default:
    snprintf(buf, cap, "unknown command (case %d)", (int)m->cmd_case);
    break;
  }
  cairn__meta__meta_command__free_unpacked(m, NULL);
  return buf;
}
