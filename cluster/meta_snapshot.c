/* meta_snapshot.c - the metadata state as a versioned, checksummed snapshot
 * (layout in meta_state.h, docs/metadata.md). Encoding walks the state in its
 * fixed order, so equal states give equal bytes; decoding trusts nothing and
 * checks every invariant before it replaces the state. */
#include "cluster/meta_state.h"

#include "common/err.h"
#include "format/crc32c.h"
#include "format/endian.h"
#include "meta.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Everything the protobuf view of a state points to, freed in one place. */
struct meta_snap_view {
  Cairn__Meta__NodeRecord *nodes;
  Cairn__Meta__NodeRecord **node_ptrs;
  Cairn__Meta__TopicRecord *topics;
  Cairn__Meta__TopicRecord **topic_ptrs;
  Cairn__Meta__TopicConfig *configs;
  Cairn__Meta__PartitionRecord *parts;
  Cairn__Meta__PartitionRecord **part_ptrs;
  Cairn__Meta__ProducerEpoch *producers;
  Cairn__Meta__ProducerEpoch **producer_ptrs;
  Cairn__Meta__UserRecord *users;
  Cairn__Meta__UserRecord **user_ptrs;
  Cairn__Meta__AclEntry *acls;
  Cairn__Meta__AclEntry **acl_ptrs;
};

static void meta_snap_view_free(struct meta_snap_view *v)
{
  free(v->nodes);
  free(v->node_ptrs);
  free(v->topics);
  free(v->topic_ptrs);
  free(v->configs);
  free(v->parts);
  free(v->part_ptrs);
  free(v->producers);
  free(v->producer_ptrs);
  free(v->users);
  free(v->user_ptrs);
  free(v->acls);
  free(v->acl_ptrs);
}

int meta_snapshot_encode(const struct meta_state *st, uint8_t **buf, size_t *len)
{
  struct meta_snap_view v;
  memset(&v, 0, sizeof v);
  /* +1: calloc(0) may return NULL. */
  v.nodes = calloc(st->nnodes + 1, sizeof *v.nodes);
  v.node_ptrs = calloc(st->nnodes + 1, sizeof *v.node_ptrs);
  v.topics = calloc(st->ntopics + 1, sizeof *v.topics);
  v.topic_ptrs = calloc(st->ntopics + 1, sizeof *v.topic_ptrs);
  v.configs = calloc(st->ntopics + 1, sizeof *v.configs);
  v.parts = calloc(st->total_partitions + 1, sizeof *v.parts);
  v.part_ptrs = calloc(st->total_partitions + 1, sizeof *v.part_ptrs);
  v.producers = calloc(st->nproducers + 1, sizeof *v.producers);
  v.producer_ptrs = calloc(st->nproducers + 1, sizeof *v.producer_ptrs);
  v.users = calloc(st->nusers + 1, sizeof *v.users);
  v.user_ptrs = calloc(st->nusers + 1, sizeof *v.user_ptrs);
  v.acls = calloc(st->nacls + 1, sizeof *v.acls);
  v.acl_ptrs = calloc(st->nacls + 1, sizeof *v.acl_ptrs);
  if (v.nodes == NULL || v.node_ptrs == NULL || v.topics == NULL || v.topic_ptrs == NULL ||
      v.configs == NULL || v.parts == NULL || v.part_ptrs == NULL || v.producers == NULL ||
      v.producer_ptrs == NULL || v.users == NULL || v.user_ptrs == NULL || v.acls == NULL ||
      v.acl_ptrs == NULL) {
    meta_snap_view_free(&v);
    return CAIRN_ENOMEM;
  }
  Cairn__Meta__MetaSnapshot snap = CAIRN__META__META_SNAPSHOT__INIT;
  /* The casts drop const for protobuf-c's field types; pack only reads. */
  snap.cluster_id = (char *)st->cluster_id;
  snap.voters = (uint64_t *)st->voters;
  snap.n_voters = st->nvoters;
  snap.next_topic_id = st->next_topic_id;
  snap.last_index = st->last_index;
  for (size_t i = 0; i < st->nnodes; i++) {
    const struct meta_node *n = &st->nodes[i];
    Cairn__Meta__NodeRecord *r = &v.nodes[i];
    cairn__meta__node_record__init(r);
    r->id = n->id;
    r->incarnation = n->incarnation;
    r->client_addr = (char *)n->client_addr;
    r->cluster_addr = (char *)n->cluster_addr;
    r->admin_addr = (char *)n->admin_addr;
    r->kafka_addr = (char *)n->kafka_addr;
    r->external_addr = (char *)n->external_addr;
    r->rack = (char *)n->rack;
    r->state = (Cairn__Meta__NodeState)n->state;
    r->state_since_ms = n->state_since_ms;
    r->capabilities = n->caps;
    v.node_ptrs[i] = r;
  }
  snap.nodes = v.node_ptrs;
  snap.n_nodes = st->nnodes;
  size_t k = 0;
  for (size_t i = 0; i < st->ntopics; i++) {
    const struct meta_topic *t = &st->topics[i];
    Cairn__Meta__TopicRecord *r = &v.topics[i];
    cairn__meta__topic_record__init(r);
    r->id = t->id;
    r->name = (char *)t->name;
    r->replication_factor = t->replication_factor;
    cairn__meta__topic_config__init(&v.configs[i]);
    v.configs[i].retention_bytes = t->config.retention_bytes;
    v.configs[i].retention_ms = t->config.retention_ms;
    v.configs[i].segment_bytes = t->config.segment_bytes;
    v.configs[i].max_batch_bytes = t->config.max_batch_bytes;
    v.configs[i].storage = t->config.storage;
    r->config = &v.configs[i];
    r->partitions = &v.part_ptrs[k];
    r->n_partitions = t->npartitions;
    for (uint32_t p = 0; p < t->npartitions; p++, k++) {
      const struct meta_partition *part = &t->partitions[p];
      Cairn__Meta__PartitionRecord *pr = &v.parts[k];
      cairn__meta__partition_record__init(pr);
      pr->replicas = (uint64_t *)part->replicas;
      pr->n_replicas = part->nreplicas;
      pr->initial_replicas = (uint64_t *)part->initial_replicas;
      pr->n_initial_replicas = part->ninitial;
      pr->leader_id = part->leader_id;
      pr->leader_term = part->leader_term;
      pr->replica_epoch = part->replica_epoch;
      pr->initial_gone = part->initial_gone;
      v.part_ptrs[k] = pr;
    }
    v.topic_ptrs[i] = r;
  }
  snap.topics = v.topic_ptrs;
  snap.n_topics = st->ntopics;
  /* Both absent (0, empty) until a producer id is handed out: a state
   * without producers encodes as it did before they existed. */
  snap.producer_ids = st->producer_ids;
  for (size_t i = 0; i < st->nproducers; i++) {
    cairn__meta__producer_epoch__init(&v.producers[i]);
    v.producers[i].id = st->producers[i].id;
    v.producers[i].epoch = st->producers[i].epoch;
    v.producer_ptrs[i] = &v.producers[i];
  }
  snap.producer_epochs = v.producer_ptrs;
  snap.n_producer_epochs = st->nproducers;
  /* Absent until a user is created: a state without users encodes as it
   * did before they existed. */
  for (size_t i = 0; i < st->nusers; i++) {
    const struct meta_user *u = &st->users[i];
    Cairn__Meta__UserRecord *r = &v.users[i];
    cairn__meta__user_record__init(r);
    struct meta_user_fields f;
    meta_user_fields_of(u, &f);
    r->name = (char *)f.name;
    r->salt = (ProtobufCBinaryData){f.salt_len, (uint8_t *)f.salt};
    r->iterations = f.iterations;
    r->stored_key = (ProtobufCBinaryData){f.stored_len, (uint8_t *)f.stored_key};
    r->server_key = (ProtobufCBinaryData){f.server_len, (uint8_t *)f.server_key};
    r->stored_key_512 = (ProtobufCBinaryData){f.stored_512_len, (uint8_t *)f.stored_key_512};
    r->server_key_512 = (ProtobufCBinaryData){f.server_512_len, (uint8_t *)f.server_key_512};
    v.user_ptrs[i] = r;
  }
  snap.users = v.user_ptrs;
  snap.n_users = st->nusers;
  for (size_t i = 0; i < st->nacls; i++) {
    meta_acl_to_record(&st->acls[i], &v.acls[i]);
    v.acl_ptrs[i] = &v.acls[i];
  }
  snap.acls = v.acl_ptrs;
  snap.n_acls = st->nacls;

  size_t plen = cairn__meta__meta_snapshot__get_packed_size(&snap);
  uint8_t *out = malloc(META_SNAPSHOT_HEADER_BYTES + plen);
  if (out == NULL) {
    meta_snap_view_free(&v);
    return CAIRN_ENOMEM;
  }
  cairn__meta__meta_snapshot__pack(&snap, out + META_SNAPSHOT_HEADER_BYTES);
  meta_snap_view_free(&v);
  le_put32(out, META_SNAPSHOT_MAGIC);
  le_put32(out + 4, META_SNAPSHOT_VERSION);
  le_put32(out + 8, (uint32_t)plen);
  le_put32(out + 12, crc32c(out + META_SNAPSHOT_HEADER_BYTES, plen));
  *buf = out;
  *len = META_SNAPSHOT_HEADER_BYTES + plen;
  return 0;
}

static bool meta_snap_str(char *dst, size_t cap, const char *s)
{
  size_t n = strlen(s);
  if (n >= cap)
    return false;
  memcpy(dst, s, n + 1);
  return true;
}

/* Copies a replica list if it fits the fixed array; the invariants (non-zero,
 * distinct) are meta_state_check's. */
static bool meta_snap_ids(uint64_t *dst, uint32_t *ndst, const uint64_t *ids, size_t n)
{
  if (n > META_MAX_REPLICAS)
    return false;
  if (n > 0)
    memcpy(dst, ids, n * sizeof *ids);
  *ndst = (uint32_t)n;
  return true;
}

/* Fills st (zeroed) from snap as far as the fixed-size fields and the limits
 * allow (memory safety); meta_state_check judges the meaning afterwards.
 * Returns 0, CAIRN_ECORRUPT or CAIRN_ENOMEM. */
static int meta_snap_fill(struct meta_state *st, const Cairn__Meta__MetaSnapshot *snap)
{
  if (!meta_snap_str(st->cluster_id, sizeof st->cluster_id, snap->cluster_id) ||
      snap->n_voters > META_MAX_VOTERS || snap->n_nodes > META_MAX_NODES ||
      snap->n_topics > META_MAX_TOPICS)
    return CAIRN_ECORRUPT;
  if (snap->n_voters > 0)
    memcpy(st->voters, snap->voters, snap->n_voters * sizeof *snap->voters);
  st->nvoters = (uint32_t)snap->n_voters;
  st->next_topic_id = snap->next_topic_id;
  st->last_index = snap->last_index;
  if (snap->n_producer_epochs > META_MAX_PRODUCER_EPOCHS || snap->n_users > META_MAX_USERS)
    return CAIRN_ECORRUPT;
  st->users = calloc(snap->n_users + 1, sizeof *st->users);
  st->acls = calloc(snap->n_acls + 1, sizeof *st->acls);
  if (st->users == NULL || st->acls == NULL || snap->n_acls > META_MAX_ACLS)
    return st->users == NULL || st->acls == NULL ? CAIRN_ENOMEM : CAIRN_ECORRUPT;
  for (size_t i = 0; i < snap->n_acls; i++) {
    if (!meta_acl_of_record(snap->acls[i], &st->acls[i]))
      return CAIRN_ECORRUPT;
    st->nacls++;
  }
  for (size_t i = 0; i < snap->n_users; i++) {
    const Cairn__Meta__UserRecord *r = snap->users[i];
    struct meta_user_fields f = {r->name,
                                 r->salt.data,
                                 r->salt.len,
                                 r->iterations,
                                 r->stored_key.data,
                                 r->server_key.data,
                                 r->stored_key.len,
                                 r->server_key.len,
                                 r->stored_key_512.data,
                                 r->server_key_512.data,
                                 r->stored_key_512.len,
                                 r->server_key_512.len};
    if (meta_user_set(&st->users[i], &f) != 0)
      return CAIRN_ECORRUPT;
    st->nusers++;
  }
  st->producer_ids = snap->producer_ids;
  st->nodes = calloc(snap->n_nodes + 1, sizeof *st->nodes);
  st->topics = calloc(snap->n_topics + 1, sizeof *st->topics);
  st->producers = calloc(snap->n_producer_epochs + 1, sizeof *st->producers);
  if (st->nodes == NULL || st->topics == NULL || st->producers == NULL)
    return CAIRN_ENOMEM;
  for (size_t i = 0; i < snap->n_producer_epochs; i++) {
    st->producers[i].id = snap->producer_epochs[i]->id;
    st->producers[i].epoch = snap->producer_epochs[i]->epoch;
    st->nproducers++;
  }
  for (size_t i = 0; i < snap->n_nodes; i++) {
    const Cairn__Meta__NodeRecord *r = snap->nodes[i];
    struct meta_node *n = &st->nodes[i];
    if (!meta_snap_str(n->client_addr, sizeof n->client_addr, r->client_addr) ||
        !meta_snap_str(n->cluster_addr, sizeof n->cluster_addr, r->cluster_addr) ||
        !meta_snap_str(n->admin_addr, sizeof n->admin_addr, r->admin_addr) ||
        !meta_snap_str(n->kafka_addr, sizeof n->kafka_addr, r->kafka_addr) ||
        !meta_snap_str(n->external_addr, sizeof n->external_addr, r->external_addr) ||
        !meta_snap_str(n->rack, sizeof n->rack, r->rack))
      return CAIRN_ECORRUPT;
    n->id = r->id;
    n->incarnation = r->incarnation;
    n->state = (enum meta_node_state)r->state; /* range checked by meta_state_check */
    n->state_since_ms = r->state_since_ms;
    n->caps = r->capabilities & META_NODE_CAPS_KNOWN; /* older snapshots: 0 */
    st->nnodes++;
  }
  for (size_t i = 0; i < snap->n_topics; i++) {
    const Cairn__Meta__TopicRecord *r = snap->topics[i];
    struct meta_topic *t = &st->topics[i];
    if (r->n_partitions == 0 || r->n_partitions > META_MAX_PARTITIONS ||
        st->total_partitions + r->n_partitions > META_MAX_TOTAL_PARTITIONS ||
        !meta_snap_str(t->name, sizeof t->name, r->name))
      return CAIRN_ECORRUPT;
    t->id = r->id;
    t->replication_factor = r->replication_factor;
    if (r->config != NULL) {
      t->config.retention_bytes = r->config->retention_bytes;
      t->config.retention_ms = r->config->retention_ms;
      t->config.segment_bytes = r->config->segment_bytes;
      t->config.max_batch_bytes = r->config->max_batch_bytes;
      t->config.storage = r->config->storage;
    }
    t->partitions = calloc(r->n_partitions, sizeof *t->partitions);
    if (t->partitions == NULL)
      return CAIRN_ENOMEM;
    st->ntopics++; /* owns t->partitions from here on, for meta_state_close */
    t->npartitions = (uint32_t)r->n_partitions;
    st->total_partitions += r->n_partitions;
    for (uint32_t p = 0; p < t->npartitions; p++) {
      const Cairn__Meta__PartitionRecord *pr = r->partitions[p];
      struct meta_partition *part = &t->partitions[p];
      if (!meta_snap_ids(part->replicas, &part->nreplicas, pr->replicas, pr->n_replicas) ||
          !meta_snap_ids(part->initial_replicas, &part->ninitial, pr->initial_replicas,
                         pr->n_initial_replicas))
        return CAIRN_ECORRUPT;
      part->initial_gone = pr->initial_gone;
      part->group_id = meta_group_id(t->id, p);
      part->leader_id = pr->leader_id;
      part->leader_term = pr->leader_term;
      part->replica_epoch = pr->replica_epoch;
    }
  }
  return 0;
}

int meta_snapshot_decode(struct meta_state *st, const uint8_t *buf, size_t len)
{
  if (len < META_SNAPSHOT_HEADER_BYTES)
    return CAIRN_ETRUNCATED;
  if (le_get32(buf) != META_SNAPSHOT_MAGIC || le_get32(buf + 4) != META_SNAPSHOT_VERSION)
    return CAIRN_EBADMAGIC;
  uint32_t plen = le_get32(buf + 8);
  if (plen > META_SNAPSHOT_MAX_BYTES)
    return CAIRN_ETOOLARGE;
  if (len - META_SNAPSHOT_HEADER_BYTES < plen)
    return CAIRN_ETRUNCATED;
  if (len - META_SNAPSHOT_HEADER_BYTES > plen)
    return CAIRN_ECORRUPT;
  const uint8_t *payload = buf + META_SNAPSHOT_HEADER_BYTES;
  if (crc32c(payload, plen) != le_get32(buf + 12))
    return CAIRN_EBADCRC;
  Cairn__Meta__MetaSnapshot *snap = cairn__meta__meta_snapshot__unpack(NULL, plen, payload);
  if (snap == NULL)
    return CAIRN_ECORRUPT;
  struct meta_state fresh;
  meta_state_init(&fresh);
  int rc = meta_snap_fill(&fresh, snap);
  cairn__meta__meta_snapshot__free_unpacked(snap, NULL);
  if (rc == 0)
    rc = meta_state_check(&fresh, NULL, 0);
  if (rc != 0) {
    meta_state_close(&fresh);
    return rc;
  }
  meta_state_close(st);
  *st = fresh;
  return 0;
}
