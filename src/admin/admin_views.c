/* admin_views.c - the admin port's JSON views of the cluster. See
 * admin_views.h. */
#include "admin/admin_views.h"

#include "admin/admin_state.h"
#include "common/err.h"
#include "format/batch.h"
#include "format/codec.h"
#include "server/handlers.h"
#include "server/node.h"
#include "storage/store.h"

#include <stdlib.h>
#include <string.h>

static const char *admin_view_state_name(enum meta_node_state s)
{
  switch (s) {
  case META_NODE_ALIVE:
    return "alive";
  case META_NODE_DEAD:
    return "dead";
  case META_NODE_DRAINING:
    return "draining";
  case META_NODE_REMOVED:
    return "removed";
  }
  return "unknown";
}

static uint64_t admin_view_controller(struct node *n)
{
  uint64_t id = 0;
  const char *addr = NULL;
  ctl_leader(&n->ctl, &id, &addr);
  return id;
}

static void admin_view_ids(struct admin_json *w, const uint64_t *ids, size_t n)
{
  admin_json_array_begin(w);
  for (size_t i = 0; i < n; i++) {
    admin_json_u64(w, ids[i]);
  }
  admin_json_array_end(w);
}

static void admin_view_node(struct node *n, struct admin_json *w, const struct meta_node *nd,
                            uint64_t controller)
{
  const struct meta_state *st = ctl_state(&n->ctl);
  bool voter = false;
  for (uint32_t i = 0; i < st->nvoters; i++) {
    voter = voter || st->voters[i] == nd->id;
  }
  uint32_t replicas = 0, preferred = 0;
  meta_node_load(st, nd->id, &replicas, &preferred);
  admin_json_object_begin(w);
  admin_json_key(w, "id");
  admin_json_u64(w, nd->id);
  admin_json_key(w, "state");
  admin_json_string(w, admin_view_state_name(nd->state));
  admin_json_key(w, "client_address");
  admin_json_string(w, nd->client_addr);
  admin_json_key(w, "cluster_address");
  admin_json_string(w, nd->cluster_addr);
  admin_json_key(w, "admin_address");
  admin_json_string(w, nd->admin_addr);
  admin_json_key(w, "rack");
  admin_json_string(w, nd->rack);
  admin_json_key(w, "has_database");
  admin_json_bool(w, (nd->caps & META_NODE_CAP_POSTGRESQL) != 0);
  admin_json_key(w, "controller_voter");
  admin_json_bool(w, voter);
  admin_json_key(w, "controller_leader");
  admin_json_bool(w, nd->id == controller);
  admin_json_key(w, "replicas");
  admin_json_u64(w, replicas);
  admin_json_key(w, "preferred_leaders");
  admin_json_u64(w, preferred);
  admin_json_key(w, "self");
  admin_json_bool(w, nd->id == n->cfg.node_id);
  admin_json_object_end(w);
}

static void admin_view_node_list(struct node *n, struct admin_json *w)
{
  const struct meta_state *st = ctl_state(&n->ctl);
  uint64_t controller = admin_view_controller(n);
  admin_json_array_begin(w);
  for (size_t i = 0; i < st->nnodes; i++) {
    admin_view_node(n, w, &st->nodes[i], controller);
  }
  admin_json_array_end(w);
}

/* Every replica of the partition whose store failed, on any node:
 * [{node_id, reason, since_ms}] as `cairn --json cluster status` prints
 * them; else []. */
static void admin_view_store_failures(struct node *n, struct admin_json *w,
                                      const struct meta_topic *t, uint32_t index, struct part *p)
{
  struct handle_store_failure hf[META_MAX_REPLICAS];
  size_t k = handle_metadata_store_failures(n, t->id, index, p, hf, META_MAX_REPLICAS);
  admin_json_array_begin(w);
  for (size_t i = 0; i < k; i++) {
    admin_json_object_begin(w);
    admin_json_key(w, "node_id");
    admin_json_u64(w, hf[i].node_id);
    admin_json_key(w, "reason");
    admin_json_string(w, hf[i].reason);
    admin_json_key(w, "since_ms");
    admin_json_u64(w, hf[i].since_ms);
    admin_json_object_end(w);
  }
  admin_json_array_end(w);
}

static void admin_view_partition(struct node *n, struct admin_json *w, const struct meta_topic *t,
                                 uint32_t index)
{
  const struct meta_state *st = ctl_state(&n->ctl);
  const struct meta_partition *mp = &t->partitions[index];
  struct part *p = parts_find(&n->parts, t->id, index);
  uint64_t leader = mp->leader_id, term = mp->leader_term;
  int64_t start = -1, hw = -1, size = -1;
  if (p != NULL) {
    struct store_info si;
    store_info(rgroup_store(&p->rg), &si);
    start = si.start_offset;
    hw = si.next_offset;
    size = (int64_t)si.size_bytes;
    if (rgroup_is_leader(&p->rg)) {
      leader = n->cfg.node_id;
      term = p->rg.raft.current_term;
    }
  }
  uint64_t isr[META_MAX_REPLICAS];
  size_t nisr = handle_metadata_isr(n, mp, p, isr);
  admin_json_object_begin(w);
  /* The fields `cairn --json cluster status` prints come first, in its
   * order: tests compare the two. */
  admin_json_key(w, "partition");
  admin_json_u64(w, index);
  admin_json_key(w, "leader_id");
  admin_json_u64(w, leader);
  admin_json_key(w, "leader_term");
  admin_json_u64(w, term);
  admin_json_key(w, "replicas");
  admin_view_ids(w, mp->replicas, mp->nreplicas);
  admin_json_key(w, "isr");
  admin_view_ids(w, isr, nisr);
  admin_json_key(w, "log_start_offset");
  admin_json_i64(w, start);
  admin_json_key(w, "high_watermark");
  admin_json_i64(w, hw);
  admin_json_key(w, "store_failures");
  admin_view_store_failures(n, w, t, index, p);
  admin_json_key(w, "group_id");
  admin_json_u64(w, mp->group_id);
  admin_json_key(w, "health");
  admin_json_string(w, admin_part_health_name(admin_part_health(st, t, mp)));
  admin_json_key(w, "hosted_here");
  admin_json_bool(w, p != NULL);
  admin_json_key(w, "size_bytes"); /* of the replica hosted here, -1: none */
  admin_json_i64(w, size);
  admin_json_object_end(w);
}

static void admin_view_topic_body(struct node *n, struct admin_json *w, const struct meta_topic *t,
                                  bool with_partitions)
{
  admin_json_object_begin(w);
  admin_json_key(w, "name");
  admin_json_string(w, t->name);
  admin_json_key(w, "topic_id");
  admin_json_u64(w, t->id);
  admin_json_key(w, "partition_count");
  admin_json_u64(w, t->npartitions);
  admin_json_key(w, "replication_factor");
  admin_json_u64(w, t->replication_factor);
  admin_json_key(w, "config");
  admin_json_object_begin(w);
  admin_json_key(w, "retention_bytes");
  admin_json_u64(w, t->config.retention_bytes);
  admin_json_key(w, "retention_ms");
  admin_json_u64(w, t->config.retention_ms);
  admin_json_key(w, "segment_bytes");
  admin_json_u64(w, t->config.segment_bytes);
  admin_json_key(w, "max_batch_bytes");
  admin_json_u64(w, t->config.max_batch_bytes);
  admin_json_key(w, "storage");
  admin_json_string(w, store_kind_name(t->config.storage));
  admin_json_object_end(w);
  if (with_partitions) {
    admin_json_key(w, "partitions");
    admin_json_array_begin(w);
    for (uint32_t i = 0; i < t->npartitions; i++) {
      admin_view_partition(n, w, t, i);
    }
    admin_json_array_end(w);
  }
  admin_json_object_end(w);
}

static void admin_view_summary(struct node *n, struct admin_json *w)
{
  const struct meta_state *st = ctl_state(&n->ctl);
  uint64_t by_state[5] = {0};
  for (size_t i = 0; i < st->nnodes; i++) {
    unsigned s = (unsigned)st->nodes[i].state;
    by_state[s < 5 ? s : 0]++;
  }
  uint64_t under = 0, offline = 0;
  for (size_t i = 0; i < st->ntopics; i++) {
    const struct meta_topic *t = &st->topics[i];
    for (uint32_t k = 0; k < t->npartitions; k++) {
      enum admin_part_health h = admin_part_health(st, t, &t->partitions[k]);
      under += h == ADMIN_PART_UNDER_REPLICATED ? 1 : 0;
      offline += h == ADMIN_PART_OFFLINE ? 1 : 0;
    }
  }
  admin_json_object_begin(w);
  admin_json_key(w, "nodes_alive");
  admin_json_u64(w, by_state[META_NODE_ALIVE]);
  admin_json_key(w, "nodes_dead");
  admin_json_u64(w, by_state[META_NODE_DEAD]);
  admin_json_key(w, "nodes_draining");
  admin_json_u64(w, by_state[META_NODE_DRAINING]);
  admin_json_key(w, "nodes_removed");
  admin_json_u64(w, by_state[META_NODE_REMOVED]);
  admin_json_key(w, "topics");
  admin_json_u64(w, st->ntopics);
  admin_json_key(w, "partitions");
  admin_json_u64(w, st->total_partitions);
  admin_json_key(w, "under_replicated_partitions");
  admin_json_u64(w, under);
  admin_json_key(w, "offline_partitions");
  admin_json_u64(w, offline);
  admin_json_object_end(w);
}

void admin_view_cluster(struct node *n, struct admin_json *w)
{
  const struct meta_state *st = ctl_state(&n->ctl);
  admin_json_object_begin(w);
  admin_json_key(w, "cluster_id");
  admin_json_string(w, st->cluster_id);
  admin_json_key(w, "node_id");
  admin_json_u64(w, n->cfg.node_id);
  admin_json_key(w, "controller_id");
  admin_json_u64(w, admin_view_controller(n));
  admin_json_key(w, "summary");
  admin_view_summary(n, w);
  admin_json_key(w, "nodes");
  admin_view_node_list(n, w);
  admin_json_key(w, "topics");
  admin_json_array_begin(w);
  for (size_t i = 0; i < st->ntopics; i++) {
    admin_view_topic_body(n, w, &st->topics[i], true);
  }
  admin_json_array_end(w);
  admin_json_object_end(w);
}

void admin_view_nodes(struct node *n, struct admin_json *w)
{
  admin_json_object_begin(w);
  admin_json_key(w, "nodes");
  admin_view_node_list(n, w);
  admin_json_object_end(w);
}

void admin_view_topics(struct node *n, struct admin_json *w)
{
  const struct meta_state *st = ctl_state(&n->ctl);
  admin_json_object_begin(w);
  admin_json_key(w, "topics");
  admin_json_array_begin(w);
  for (size_t i = 0; i < st->ntopics; i++) {
    admin_view_topic_body(n, w, &st->topics[i], false);
  }
  admin_json_array_end(w);
  admin_json_object_end(w);
}

bool admin_view_topic(struct node *n, const char *name, struct admin_json *w)
{
  const struct meta_topic *t = meta_topic_find(ctl_state(&n->ctl), name);
  if (t == NULL) {
    return false;
  }
  admin_view_topic_body(n, w, t, true);
  return true;
}

/* ---- consumer groups ---- */

static void admin_view_member(struct admin_json *w, const struct group *g,
                              const struct group_member *m)
{
  admin_json_object_begin(w);
  admin_json_key(w, "member_id");
  admin_json_string(w, m->id);
  admin_json_key(w, "client_id");
  admin_json_string(w, m->client_id);
  admin_json_key(w, "session_timeout_ms");
  admin_json_u64(w, m->session_timeout_ms);
  admin_json_key(w, "topics");
  admin_json_array_begin(w);
  for (size_t k = 0; k < m->ntopics; k++) {
    admin_json_string(w, g->topics[m->topics[k]]);
  }
  admin_json_array_end(w);
  /* Cairn-assigned groups only: a client-assigned group's assignment is
   * the leader's opaque bytes; its offsets name each partition's holder. */
  admin_json_key(w, "assignment");
  admin_json_array_begin(w);
  for (size_t k = 0; k < m->nassigned; k++) {
    admin_json_object_begin(w);
    admin_json_key(w, "topic");
    admin_json_string(w, g->topics[m->assigned[k].topic]);
    admin_json_key(w, "partition");
    admin_json_u64(w, m->assigned[k].partition);
    admin_json_object_end(w);
  }
  admin_json_array_end(w);
  admin_json_object_end(w);
}

/* The partitions with committed offsets and lag; the sum of the known
 * lags into *total (-1 when none is known). */
static void admin_view_group_offsets(struct node *n, struct admin_json *w, const struct group *g,
                                     int64_t *total)
{
  struct coord_lag *rows = NULL;
  size_t nrows = 0;
  *total = -1;
  admin_json_array_begin(w);
  if (coord_group_lag(&n->coord, g, &rows, &nrows) != 0) {
    admin_json_array_end(w);
    return;
  }
  for (size_t i = 0; i < nrows; i++) {
    const struct coord_lag *l = &rows[i];
    if (l->lag >= 0) {
      *total = (*total < 0 ? 0 : *total) + l->lag;
    }
    admin_json_object_begin(w);
    admin_json_key(w, "topic");
    admin_json_string(w, l->topic);
    admin_json_key(w, "partition");
    admin_json_u64(w, l->partition);
    admin_json_key(w, "committed");
    admin_json_i64(w, l->committed);
    admin_json_key(w, "high_watermark");
    admin_json_i64(w, l->high_watermark);
    admin_json_key(w, "lag");
    admin_json_i64(w, l->lag);
    admin_json_key(w, "member_id");
    admin_json_string(w, l->member_id);
    admin_json_object_end(w);
  }
  free(rows);
  admin_json_array_end(w);
}

struct admin_view_groups_walk {
  struct node *n;
  struct admin_json *w;
};

static void admin_view_group(const struct group *g, void *data)
{
  struct admin_view_groups_walk *gw = data;
  struct admin_json *w = gw->w;
  admin_json_object_begin(w);
  admin_json_key(w, "group");
  admin_json_string(w, g->name);
  admin_json_key(w, "state");
  admin_json_string(w, group_state_name(g->state));
  admin_json_key(w, "protocol_type");
  admin_json_string(w, g->protocol_type);
  admin_json_key(w, "strategy");
  admin_json_string(w, g->nmembers == 0           ? ""
                       : group_client_assigned(g) ? g->protocol
                                                  : assign_strategy_name(g->strategy));
  admin_json_key(w, "generation");
  admin_json_i64(w, g->generation);
  admin_json_key(w, "leader_id");
  admin_json_string(w, g->leader);
  admin_json_key(w, "members");
  admin_json_array_begin(w);
  for (size_t i = 0; i < g->nmembers; i++) {
    admin_view_member(w, g, &g->members[i]);
  }
  admin_json_array_end(w);
  admin_json_key(w, "offsets");
  int64_t total = -1;
  admin_view_group_offsets(gw->n, w, g, &total);
  admin_json_key(w, "lag_total");
  admin_json_i64(w, total);
  admin_json_object_end(w);
}

void admin_view_groups(struct node *n, struct admin_json *w)
{
  admin_json_object_begin(w);
  admin_json_key(w, "coordinator_id");
  admin_json_u64(w, n->cfg.node_id);
  admin_json_key(w, "groups");
  admin_json_array_begin(w);
  struct admin_view_groups_walk gw = {.n = n, .w = w};
  coord_each_group(&n->coord, admin_view_group, &gw);
  admin_json_array_end(w);
  admin_json_object_end(w);
}

/* ---- the message browser ---- */

/* bytes as lower-case hex, at most ADMIN_VIEW_VALUE_MAX of them, or null
 * for a NULL key or value. */
static void admin_view_hex(struct admin_json *w, const uint8_t *p, size_t len)
{
  if (p == NULL) {
    admin_json_null(w);
    return;
  }
  size_t n = len < ADMIN_VIEW_VALUE_MAX ? len : ADMIN_VIEW_VALUE_MAX;
  char *hex = malloc(2 * n + 1);
  if (hex == NULL) {
    admin_json_null(w);
    return;
  }
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    hex[2 * i] = digits[p[i] >> 4];
    hex[2 * i + 1] = digits[p[i] & 15];
  }
  hex[2 * n] = '\0';
  admin_json_string(w, hex);
  free(hex);
}

static void admin_view_record(struct admin_json *w, const struct batch_record *r)
{
  admin_json_object_begin(w);
  admin_json_key(w, "offset");
  admin_json_i64(w, r->offset);
  admin_json_key(w, "timestamp");
  admin_json_i64(w, r->timestamp);
  admin_json_key(w, "key");
  admin_view_hex(w, r->key, r->key_len);
  admin_json_key(w, "value");
  admin_view_hex(w, r->value, r->value_len);
  admin_json_key(w, "value_size");
  admin_json_u64(w, r->value_len);
  admin_json_key(w, "headers");
  admin_json_array_begin(w);
  for (int32_t i = 0; i < r->header_count; i++) {
    const uint8_t *k = NULL, *v = NULL;
    size_t kl = 0, vl = 0;
    if (batch_record_header(r, i, &k, &kl, &v, &vl) != 0) {
      break;
    }
    admin_json_object_begin(w);
    admin_json_key(w, "key");
    admin_view_hex(w, k, kl);
    admin_json_key(w, "value");
    admin_view_hex(w, v, vl);
    admin_json_object_end(w);
  }
  admin_json_array_end(w);
  admin_json_object_end(w);
}

/* The records of the batch at p[0..len) from offset `from`, at most *left
 * of them (decremented). Returns false on a batch it cannot read. */
static bool admin_view_batch(struct admin_json *w, const uint8_t *p, size_t len, int64_t from,
                             unsigned *left)
{
  struct batch_header h;
  batch_header_decode(p, &h);
  uint8_t *plain = NULL;
  size_t plain_len = len;
  if ((h.attributes & BATCH_ATTR_CODEC_MASK) != BATCH_CODEC_NONE) {
    if (codec_batch_decompress(p, len, ADMIN_VIEW_BATCH_MAX, &plain, &plain_len) != 0) {
      return false;
    }
    p = plain;
  }
  struct batch_iter it;
  struct batch_record r;
  bool ok = batch_iter_init(&it, p, plain_len) == 0;
  while (ok && *left > 0) {
    int got = batch_iter_next(&it, &r);
    if (got <= 0) {
      ok = got == 0;
      break;
    }
    if (r.offset >= from) {
      admin_view_record(w, &r);
      (*left)--;
    }
  }
  free(plain);
  return ok;
}

unsigned admin_view_messages(struct node *n, const char *topic, uint32_t partition, int64_t offset,
                             int64_t timestamp, unsigned limit, struct admin_json *w)
{
  struct handle_fetch_copy fc;
  int rv = handle_fetch_copy(n, topic, partition, offset, timestamp, ADMIN_VIEW_READ_MAX, &fc);
  admin_json_object_begin(w);
  admin_json_key(w, "topic");
  admin_json_string(w, topic);
  admin_json_key(w, "partition");
  admin_json_u64(w, partition);
  admin_json_key(w, "offset");
  admin_json_i64(w, fc.offset);
  admin_json_key(w, "log_start_offset");
  admin_json_i64(w, fc.log_start_offset);
  admin_json_key(w, "high_watermark");
  admin_json_i64(w, fc.high_watermark);
  unsigned status = 200;
  if (rv != 0 || fc.t.code != CAIRN__CLIENT__ERROR_CODE__OK) {
    /* NOT_LEADER: the page asks the leader's admin port instead. */
    status = rv != 0                                              ? 500
             : fc.t.code == CAIRN__CLIENT__ERROR_CODE__NOT_LEADER ? 421
             : fc.t.code == CAIRN__CLIENT__ERROR_CODE__UNKNOWN_TOPIC ||
                     fc.t.code == CAIRN__CLIENT__ERROR_CODE__UNKNOWN_PARTITION
                 ? 404
                 : 409;
    admin_json_key(w, "error");
    admin_json_string(w, fc.t.message[0] != '\0' ? fc.t.message : cairn_strerror(rv));
    admin_json_key(w, "leader_id");
    admin_json_u64(w, fc.t.leader_id);
    const struct meta_node *ld = meta_node_find(ctl_state(&n->ctl), fc.t.leader_id);
    admin_json_key(w, "leader_admin_address");
    admin_json_string(w, ld != NULL ? ld->admin_addr : "");
  }
  admin_json_key(w, "records");
  admin_json_array_begin(w);
  unsigned left = limit;
  size_t at = 0;
  while (left > 0 && at < fc.len) {
    size_t size = 0;
    int err = 0;
    if (batch_probe(fc.data + at, fc.len - at, fc.len - at, &size, &err) != BATCH_PROBE_OK ||
        !admin_view_batch(w, fc.data + at, size, fc.offset, &left)) {
      break;
    }
    at += size;
  }
  admin_json_array_end(w);
  admin_json_object_end(w);
  free(fc.data);
  return status;
}
