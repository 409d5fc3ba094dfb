/* offset_record.c - encoding and decoding the records of __cairn_offsets
 * (offset_record.h). */
#include "server/group/offset_record.h"

#include "common/err.h"
#include "group.pb-c.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int offset_record_add(struct batch_builder *b, const struct offset_record *r, int64_t timestamp)
{
  bool marker = r->kind == OFFSET_RECORD_MARKER;
  if (strlen(r->group) > OFFSET_RECORD_NAME_MAX || strlen(r->topic) > OFFSET_RECORD_NAME_MAX ||
      strlen(r->metadata) > OFFSET_RECORD_METADATA_MAX ||
      (!marker && (r->group[0] == '\0' || r->topic[0] == '\0'))) {
    return CAIRN_EINVAL;
  }
  Cairn__Group__OffsetRecordKey key = CAIRN__GROUP__OFFSET_RECORD_KEY__INIT;
  key.version = OFFSET_RECORD_VERSION;
  key.kind =
      marker ? CAIRN__GROUP__RECORD_KIND__RECORD_MARKER : CAIRN__GROUP__RECORD_KIND__RECORD_OFFSET;
  key.group = (char *)(marker ? "" : r->group);
  key.topic = (char *)(marker ? "" : r->topic);
  key.partition = marker ? 0 : r->partition;
  Cairn__Group__OffsetRecordValue val = CAIRN__GROUP__OFFSET_RECORD_VALUE__INIT;
  val.offset = r->offset;
  val.metadata = (char *)r->metadata;
  val.commit_time_ms = r->commit_time_ms;
  val.generation = r->generation;
  bool has_value = r->kind == OFFSET_RECORD_COMMIT;
  size_t klen = cairn__group__offset_record_key__get_packed_size(&key);
  size_t vlen = has_value ? cairn__group__offset_record_value__get_packed_size(&val) : 0;
  uint8_t *kb = malloc(klen + 1), *vb = malloc(vlen + 1);
  int rv = CAIRN_ENOMEM;
  if (kb != NULL && vb != NULL) {
    cairn__group__offset_record_key__pack(&key, kb);
    if (has_value) {
      cairn__group__offset_record_value__pack(&val, vb);
    }
    rv = batch_builder_add(b, timestamp, kb, klen, has_value ? vb : NULL, vlen, NULL, 0);
  }
  free(kb);
  free(vb);
  return rv;
}

static int offset_record_copy(char *dst, size_t cap, const char *src)
{
  size_t len = src != NULL ? strlen(src) : 0;
  if (len >= cap) {
    return CAIRN_ECORRUPT;
  }
  memcpy(dst, src != NULL ? src : "", len + 1);
  return 0;
}

int offset_record_decode(const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len,
                         struct offset_record *out)
{
  memset(out, 0, sizeof *out);
  if (key == NULL || key_len == 0) {
    return CAIRN_ECORRUPT;
  }
  Cairn__Group__OffsetRecordKey *k = cairn__group__offset_record_key__unpack(NULL, key_len, key);
  if (k == NULL) {
    return CAIRN_ECORRUPT;
  }
  int rv = k->version == OFFSET_RECORD_VERSION ? 0 : CAIRN_ECORRUPT;
  if (rv == 0) {
    rv = offset_record_copy(out->group, sizeof out->group, k->group);
  }
  if (rv == 0) {
    rv = offset_record_copy(out->topic, sizeof out->topic, k->topic);
  }
  out->partition = k->partition;
  bool marker = k->kind == CAIRN__GROUP__RECORD_KIND__RECORD_MARKER;
  bool group = k->kind == CAIRN__GROUP__RECORD_KIND__RECORD_GROUP;
  if (rv == 0 && !marker && !group && k->kind != CAIRN__GROUP__RECORD_KIND__RECORD_OFFSET) {
    rv = CAIRN_ECORRUPT;
  }
  cairn__group__offset_record_key__free_unpacked(k, NULL);
  if (rv != 0) {
    return rv;
  }
  if (marker) {
    out->kind = OFFSET_RECORD_MARKER;
    return 0;
  }
  if (group) {
    out->kind = OFFSET_RECORD_GROUP;
    return out->group[0] != '\0' && value != NULL ? 0 : CAIRN_ECORRUPT;
  }
  if (out->group[0] == '\0' || out->topic[0] == '\0') {
    return CAIRN_ECORRUPT;
  }
  if (value == NULL) {
    out->kind = OFFSET_RECORD_TOMBSTONE;
    return 0;
  }
  Cairn__Group__OffsetRecordValue *v =
      cairn__group__offset_record_value__unpack(NULL, value_len, value);
  if (v == NULL) {
    return CAIRN_ECORRUPT;
  }
  out->kind = OFFSET_RECORD_COMMIT;
  out->offset = v->offset;
  out->commit_time_ms = v->commit_time_ms;
  out->generation = v->generation;
  rv = offset_record_copy(out->metadata, sizeof out->metadata, v->metadata);
  cairn__group__offset_record_value__free_unpacked(v, NULL);
  return rv;
}

/* ---- a group's membership ---- */

/* The protobuf of g's membership; every pointer borrowed from g except the
 * arrays, which one block owns (*block, free()). */
static int offset_record_group_value(const struct group *g, Cairn__Group__GroupRecordValue *v,
                                     void **block)
{
  size_t nassigned = 0;
  for (size_t i = 0; i < g->nmembers; i++) {
    nassigned += g->members[i].nassigned;
  }
  size_t ntopics = 0;
  for (size_t i = 0; i < g->nmembers; i++) {
    ntopics += g->members[i].ntopics;
  }
  size_t n = g->nmembers;
  size_t size = n * (sizeof(Cairn__Group__GroupMemberRecord) + sizeof(void *)) +
                nassigned * (sizeof(Cairn__Group__GroupPartitionRecord) + sizeof(void *)) +
                ntopics * sizeof(char *) + 1;
  uint8_t *p = calloc(1, size);
  if (p == NULL) {
    return CAIRN_ENOMEM;
  }
  *block = p;
  Cairn__Group__GroupMemberRecord *mv = (void *)p;
  Cairn__Group__GroupPartitionRecord *pv = (void *)(mv + n);
  Cairn__Group__GroupMemberRecord **mp = (void *)(pv + nassigned);
  Cairn__Group__GroupPartitionRecord **pp = (void *)(mp + n);
  char **tp = (void *)(pp + nassigned);
  v->generation = g->generation;
  v->protocol_type = (char *)g->protocol_type;
  v->protocol = (char *)g->protocol;
  v->strategy = (uint32_t)g->strategy;
  v->leader = (char *)g->leader;
  v->members = mp;
  v->n_members = n;
  for (size_t i = 0; i < n; i++) {
    const struct group_member *m = &g->members[i];
    Cairn__Group__GroupMemberRecord *r = &mv[i];
    cairn__group__group_member_record__init(r);
    r->member_id = (char *)m->id;
    r->client_id = (char *)m->client_id;
    r->group_instance_id = (char *)m->instance_id;
    r->session_timeout_ms = m->session_timeout_ms;
    r->rebalance_timeout_ms = m->rebalance_timeout_ms;
    r->topics = tp;
    r->n_topics = m->ntopics;
    for (size_t k = 0; k < m->ntopics; k++) {
      *tp++ = g->topics[m->topics[k]];
    }
    r->assignment.data = m->assignment;
    r->assignment.len = m->assignment_len;
    const struct group_protocol *gp = group_member_protocol(g, m);
    if (gp != NULL) {
      r->metadata.data = gp->meta;
      r->metadata.len = gp->len;
    }
    r->assigned = pp;
    r->n_assigned = m->nassigned;
    for (size_t k = 0; k < m->nassigned; k++) {
      cairn__group__group_partition_record__init(pv);
      pv->topic = g->topics[m->assigned[k].topic];
      pv->partition = m->assigned[k].partition;
      *pp++ = pv++;
    }
    mp[i] = r;
  }
  return 0;
}

int offset_record_add_group(struct batch_builder *b, const struct group *g, int64_t timestamp)
{
  Cairn__Group__OffsetRecordKey key = CAIRN__GROUP__OFFSET_RECORD_KEY__INIT;
  key.version = OFFSET_RECORD_VERSION;
  key.kind = CAIRN__GROUP__RECORD_KIND__RECORD_GROUP;
  key.group = (char *)g->name;
  key.topic = "";
  Cairn__Group__GroupRecordValue val = CAIRN__GROUP__GROUP_RECORD_VALUE__INIT;
  void *block = NULL;
  int rv = offset_record_group_value(g, &val, &block);
  if (rv != 0) {
    return rv;
  }
  size_t klen = cairn__group__offset_record_key__get_packed_size(&key);
  size_t vlen = cairn__group__group_record_value__get_packed_size(&val);
  uint8_t *kb = malloc(klen + 1), *vb = malloc(vlen + 1);
  rv = CAIRN_ENOMEM;
  if (kb != NULL && vb != NULL) {
    cairn__group__offset_record_key__pack(&key, kb);
    cairn__group__group_record_value__pack(&val, vb);
    rv = batch_builder_add(b, timestamp, kb, klen, vb, vlen, NULL, 0);
  }
  free(kb);
  free(vb);
  free(block);
  return rv;
}

/* The snapshot of v (pointers into v; arrays in one block, *block). */
static int offset_record_snapshot(const Cairn__Group__GroupRecordValue *v,
                                  struct group_snapshot *s, void **block)
{
  size_t nassigned = 0;
  for (size_t i = 0; i < v->n_members; i++) {
    nassigned += v->members[i]->n_assigned;
  }
  size_t size = v->n_members * sizeof(struct group_snapshot_member) +
                nassigned * (sizeof(char *) + sizeof(uint32_t)) + 1;
  uint8_t *p = calloc(1, size);
  if (p == NULL) {
    return CAIRN_ENOMEM;
  }
  *block = p;
  struct group_snapshot_member *mv = (void *)p;
  const char **at = (void *)(mv + v->n_members);
  uint32_t *ap = (void *)(at + nassigned);
  s->generation = v->generation;
  s->protocol_type = v->protocol_type;
  s->protocol = v->protocol;
  s->strategy = v->strategy;
  s->leader = v->leader;
  s->members = mv;
  s->nmembers = v->n_members;
  for (size_t i = 0; i < v->n_members; i++) {
    const Cairn__Group__GroupMemberRecord *r = v->members[i];
    struct group_snapshot_member *m = &mv[i];
    m->id = r->member_id;
    m->client_id = r->client_id;
    m->instance_id = r->group_instance_id;
    m->session_timeout_ms = r->session_timeout_ms;
    m->rebalance_timeout_ms = r->rebalance_timeout_ms;
    m->topics = (const char *const *)r->topics;
    m->ntopics = r->n_topics;
    m->assignment = r->assignment.data;
    m->assignment_len = r->assignment.len;
    m->metadata = r->metadata.data;
    m->metadata_len = r->metadata.len;
    m->assigned_topics = at;
    m->assigned_partitions = ap;
    m->nassigned = r->n_assigned;
    for (size_t k = 0; k < r->n_assigned; k++) {
      *at++ = r->assigned[k]->topic;
      *ap++ = r->assigned[k]->partition;
    }
  }
  return 0;
}

int offset_record_restore(struct group *g, const uint8_t *value, size_t value_len,
                          const struct group_env *env, uint64_t now_ms, uint64_t wall_ms)
{
  Cairn__Group__GroupRecordValue *v =
      cairn__group__group_record_value__unpack(NULL, value_len, value);
  if (v == NULL) {
    return CAIRN_ECORRUPT;
  }
  struct group_snapshot s;
  void *block = NULL;
  int rv = offset_record_snapshot(v, &s, &block);
  if (rv == 0) {
    rv = group_restore(g, &s, env, now_ms, wall_ms);
  }
  free(block);
  cairn__group__group_record_value__free_unpacked(v, NULL);
  return rv;
}
