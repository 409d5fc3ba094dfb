/* admin_views.c - the admin port's JSON views of the cluster. See
 * admin_views.h. */
#include "admin/admin_views.h"

#include "admin/admin_state.h"
#include "server/handlers.h"
#include "server/node.h"
#include "storage/store.h"

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

static void admin_view_partition(struct node *n, struct admin_json *w, const struct meta_topic *t,
                                 uint32_t index)
{
  const struct meta_state *st = ctl_state(&n->ctl);
  const struct meta_partition *mp = &t->partitions[index];
  struct part *p = parts_find(&n->parts, t->id, index);
  uint64_t leader = mp->leader_id, term = mp->leader_term;
  int64_t start = -1, hw = -1;
  if (p != NULL) {
    struct store_info si;
    store_info(rgroup_store(&p->rg), &si);
    start = si.start_offset;
    hw = si.next_offset;
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
  admin_json_key(w, "group_id");
  admin_json_u64(w, mp->group_id);
  admin_json_key(w, "health");
  admin_json_string(w, admin_part_health_name(admin_part_health(st, t, mp)));
  admin_json_key(w, "hosted_here");
  admin_json_bool(w, p != NULL);
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
