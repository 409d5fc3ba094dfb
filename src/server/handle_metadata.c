/* handle_metadata.c - Metadata, ListTopics, DescribeTopic and
 * DescribeCluster: views of this node's copy of the metadata, completed
 * with what the node knows first hand of the partitions it hosts (leader,
 * high watermark, log start, in-sync replicas when it leads).
 *
 * Any node answers from its own replica of the metadata group (every node
 * holds one), so a client discovers leaders from whichever node it reaches;
 * a node's copy may lag the controller by a heartbeat or so, and a client
 * that is sent to a stale leader gets NOT_LEADER with a better hint. For
 * a partition it hosts, a node names the leader its own replica follows
 * (of a term no older than the metadata's), which is ahead of the
 * metadata right after a failover. */
#include "server/handlers.h"

#include "common/err.h"
#include "server/authz.h"
#include "server/handle_target.h"
#include "storage/store.h"

#include <stdlib.h>
#include <string.h>

/* A replica is in sync when the leader heard from it lately and it is at
 * most this many Raft entries behind. */
#define MD_ISR_MAX_LAG_ENTRIES 64

static const char *md_state_name(enum meta_node_state s)
{
  switch (s) {
  case META_NODE_ALIVE: return "alive";
  case META_NODE_DEAD: return "dead";
  case META_NODE_DRAINING: return "draining";
  case META_NODE_REMOVED: return "removed";
  }
  return "unknown";
}

/* via: the connection asking. Through the external client port, a node's
 * client address is its external one when it registered one (Kafka's
 * advertised.listeners: answer with the listener the request came in on). */
static void md_node(struct node *n, Cairn__Client__NodeInfo *ni, const struct meta_node *nd,
                    const struct conn *via)
{
  cairn__client__node_info__init(ni);
  ni->id = nd->id;
  ni->client_address = (char *)nd->client_addr;
  if (node_conn_is_external(n, via) && nd->external_addr[0] != '\0') {
    ni->client_address = (char *)nd->external_addr;
  }
  ni->external_address = (char *)nd->external_addr;
  ni->cluster_address = (char *)nd->cluster_addr;
  ni->admin_address = (char *)nd->admin_addr;
  ni->kafka_address = (char *)nd->kafka_addr;
  ni->rack = (char *)nd->rack;
  ni->state = (char *)md_state_name(nd->state);
  ni->has_database = (nd->caps & META_NODE_CAP_POSTGRESQL) != 0;
}

/* Everything a response borrows and must free after conn_respond(). */
struct md_frees {
  void **v;
  size_t n, cap;
  bool failed;
};

static void *md_alloc(struct md_frees *f, size_t size)
{
  if (f->n == f->cap) {
    size_t cap = f->cap ? f->cap * 2 : 16;
    void **nv = realloc(f->v, cap * sizeof *nv);
    if (nv == NULL) {
      f->failed = true;
      return NULL;
    }
    f->v = nv;
    f->cap = cap;
  }
  void *p = calloc(1, size > 0 ? size : 1);
  if (p == NULL) {
    f->failed = true;
    return NULL;
  }
  f->v[f->n++] = p;
  return p;
}

static void md_free_all(struct md_frees *f)
{
  for (size_t i = 0; i < f->n; i++) {
    free(f->v[i]);
  }
  free(f->v);
}

/* Without first-hand knowledge: the replicas whose nodes are alive. */
static size_t md_isr_alive(const struct meta_state *st, const struct meta_partition *mp,
                           uint64_t *out)
{
  size_t k = 0;
  for (uint32_t i = 0; i < mp->nreplicas; i++) {
    const struct meta_node *nd = meta_node_find(st, mp->replicas[i]);
    if (nd != NULL && nd->state == META_NODE_ALIVE) {
      out[k++] = mp->replicas[i];
    }
  }
  return k;
}

size_t handle_metadata_isr(struct node *n, const struct meta_partition *mp, struct part *p,
                           uint64_t *out)
{
  if (p != NULL && rgroup_is_leader(&p->rg)) {
    return rgroup_in_sync(&p->rg, MD_ISR_MAX_LAG_ENTRIES, out);
  }
  return md_isr_alive(ctl_state(&n->ctl), mp, out);
}

/* A node's copy of the controller's table of failed stores is shown only
 * while fresh: heartbeats are answered every NODE_HEARTBEAT_MS, so one
 * this old means the controller leader is out of reach. */
#define MD_SFAULT_STALE_MS (NODE_RPC_TIMEOUT_MS + 3 * NODE_HEARTBEAT_MS)

/* Inserts f into out[0..*k) by node id, if there is room. */
static void md_sfault_insert(struct handle_store_failure *out, size_t cap, size_t *k,
                             struct handle_store_failure f)
{
  if (*k == cap) {
    return;
  }
  size_t i = (*k)++;
  for (; i > 0 && out[i - 1].node_id > f.node_id; i--) {
    out[i] = out[i - 1];
  }
  out[i] = f;
}

size_t handle_metadata_store_failures(struct node *n, uint32_t topic_id, uint32_t partition,
                                      struct part *p, struct handle_store_failure *out, size_t cap)
{
  size_t k = 0;
  if (p != NULL) {
    struct rgroup_store_failure sf;
    rgroup_store_failure(&p->rg, &sf);
    if (sf.failed) {
      struct handle_store_failure f = {n->cfg.node_id, sf.reason, sf.since_ms};
      md_sfault_insert(out, cap, &k, f);
    }
  }
  const struct part_damaged *d =
      p == NULL ? parts_find_damaged(&n->parts, topic_id, partition) : NULL;
  if (d != NULL) {
    struct handle_store_failure f = {n->cfg.node_id, d->reason, d->since_ms};
    md_sfault_insert(out, cap, &k, f);
  }
  bool fresh =
      ctl_is_leader(&n->ctl) ||
      (n->sfaults_heard_ms != 0 && uv_now(n->loop) - n->sfaults_heard_ms <= MD_SFAULT_STALE_MS);
  const struct meta_state *st = ctl_state(&n->ctl);
  for (size_t i = 0; fresh && i < n->sfaults.n; i++) {
    const struct sfault *sf = &n->sfaults.v[i];
    if (sf->topic_id != topic_id || sf->partition != partition || sf->node_id == n->cfg.node_id ||
        !sfault_node_counts(st, sf->node_id)) {
      continue;
    }
    struct handle_store_failure f = {sf->node_id, sf->reason, sf->since_ms};
    md_sfault_insert(out, cap, &k, f);
  }
  return k;
}

/* Every replica of the partition whose store failed: which node, why,
 * since when. Reasons are copied (a store's errmsg changes as it retries). */
static void md_store_failures(struct node *n, struct md_frees *f, Cairn__Client__PartitionInfo *pi,
                              const struct meta_topic *t, struct part *p)
{
  struct handle_store_failure hf[META_MAX_REPLICAS];
  size_t k = handle_metadata_store_failures(n, t->id, pi->partition, p, hf, META_MAX_REPLICAS);
  if (k == 0) {
    return;
  }
  Cairn__Client__StoreFailure *fl = md_alloc(f, k * sizeof *fl);
  Cairn__Client__StoreFailure **fp = md_alloc(f, k * sizeof *fp);
  if (fl == NULL || fp == NULL) {
    return;
  }
  for (size_t i = 0; i < k; i++) {
    char *reason = md_alloc(f, strlen(hf[i].reason) + 1);
    if (reason == NULL) {
      return;
    }
    memcpy(reason, hf[i].reason, strlen(hf[i].reason) + 1);
    cairn__client__store_failure__init(&fl[i]);
    fl[i].node_id = hf[i].node_id;
    fl[i].reason = reason;
    fl[i].since_ms = hf[i].since_ms;
    fp[i] = &fl[i];
  }
  pi->store_failures = fp;
  pi->n_store_failures = k;
}

static void md_partition(struct node *n, struct md_frees *f, Cairn__Client__PartitionInfo *pi,
                         const struct meta_topic *t, uint32_t index)
{
  const struct meta_partition *mp = &t->partitions[index];
  cairn__client__partition_info__init(pi);
  pi->partition = index;
  pi->group_id = mp->group_id;
  pi->leader_id = mp->leader_id;
  pi->leader_term = mp->leader_term;
  pi->n_replicas = mp->nreplicas;
  pi->replicas = (uint64_t *)mp->replicas;
  pi->log_start_offset = -1;
  pi->high_watermark = -1;
  uint64_t *isr = md_alloc(f, META_MAX_REPLICAS * sizeof *isr);
  if (isr == NULL) {
    return;
  }
  pi->isr = isr;
  struct part *p = parts_find(&n->parts, t->id, index);
  pi->n_isr = handle_metadata_isr(n, mp, p, isr);
  md_store_failures(n, f, pi, t, p);
  if (p == NULL) {
    return;
  }
  struct store_info si;
  store_info(rgroup_store(&p->rg), &si);
  pi->log_start_offset = si.start_offset;
  pi->high_watermark = si.next_offset;
  if (rgroup_is_leader(&p->rg)) {
    pi->leader_id = n->cfg.node_id;
    pi->leader_term = p->rg.raft.current_term;
    return;
  }
  /* A follower here knows its group's leader first hand, ahead of the
   * metadata (which learns it from the leader's next report): after a
   * failover the client is sent to the new leader at once. Only a
   * leader of a term at least the reported one, and one still known:
   * right after an election this replica may name none yet. */
  uint64_t lid;
  const char *addr;
  rgroup_leader(&p->rg, &lid, &addr);
  if (lid != 0 && p->rg.raft.current_term >= mp->leader_term) {
    pi->leader_id = lid;
    pi->leader_term = p->rg.raft.current_term;
  }
}

static void md_topic(struct node *n, struct md_frees *f, Cairn__Client__TopicInfo *ti,
                     const struct meta_topic *t, bool with_partitions)
{
  cairn__client__topic_info__init(ti);
  ti->name = (char *)t->name;
  ti->topic_id = t->id;
  ti->partition_count = t->npartitions;
  ti->replication_factor = t->replication_factor;
  Cairn__Client__TopicConfig *tc = md_alloc(f, sizeof *tc);
  if (tc != NULL) {
    cairn__client__topic_config__init(tc);
    tc->retention_bytes = (int64_t)t->config.retention_bytes;
    tc->retention_ms = (int64_t)t->config.retention_ms;
    tc->segment_bytes = t->config.segment_bytes;
    tc->max_batch_bytes = (uint32_t)t->config.max_batch_bytes;
    tc->storage = (char *)store_kind_name(t->config.storage); /* static: never freed */
    ti->config = tc;
  }
  if (!with_partitions) {
    return;
  }
  Cairn__Client__PartitionInfo *pis = md_alloc(f, t->npartitions * sizeof *pis);
  Cairn__Client__PartitionInfo **pp = md_alloc(f, t->npartitions * sizeof *pp);
  if (pis == NULL || pp == NULL) {
    return;
  }
  for (uint32_t i = 0; i < t->npartitions; i++) {
    md_partition(n, f, &pis[i], t, i);
    pp[i] = &pis[i];
  }
  ti->partitions = pp;
  ti->n_partitions = t->npartitions;
}

static Cairn__Client__Error md_unknown_topic = {PROTOBUF_C_MESSAGE_INIT(&cairn__client__error__descriptor),
                                                CAIRN__CLIENT__ERROR_CODE__UNKNOWN_TOPIC,
                                                (char *)"no such topic"};

/* Topics named by names[0..nnames) (all when nnames is 0), in name order
 * of the request, or id order for all. With authorization on, a named
 * topic c may not describe is answered AUTHORIZATION_FAILED (whether or
 * not it exists), and one it may not describe is left out of "all". */
static Cairn__Client__TopicInfo **md_topics(struct node *n, struct conn *c, struct md_frees *f,
                                            char **names, size_t nnames, bool with_partitions,
                                            size_t *count)
{
  const struct meta_state *st = ctl_state(&n->ctl);
  size_t k = nnames > 0 ? nnames : st->ntopics;
  Cairn__Client__TopicInfo *tis = md_alloc(f, (k > 0 ? k : 1) * sizeof *tis);
  Cairn__Client__TopicInfo **tp = md_alloc(f, (k > 0 ? k : 1) * sizeof *tp);
  if (tis == NULL || tp == NULL) {
    *count = 0;
    return NULL;
  }
  size_t out = 0;
  for (size_t i = 0; i < k; i++) {
    Cairn__Client__TopicInfo *ti = &tis[out];
    if (nnames == 0) {
      if (!authz_allows(n, c, META_ACL_TOPIC, st->topics[i].name, META_ACL_DESCRIBE)) {
        continue;
      }
      md_topic(n, f, ti, &st->topics[i], with_partitions);
      tp[out++] = ti;
      continue;
    }
    char msg[HANDLE_MESSAGE_SIZE];
    if (authz_check(n, c, META_ACL_TOPIC, names[i], META_ACL_DESCRIBE, msg, sizeof msg) != 0) {
      Cairn__Client__Error *err = md_alloc(f, sizeof *err);
      char *text = md_alloc(f, strlen(msg) + 1);
      if (err == NULL || text == NULL) {
        *count = 0;
        return NULL;
      }
      cairn__client__error__init(err);
      err->code = CAIRN__CLIENT__ERROR_CODE__AUTHORIZATION_FAILED;
      memcpy(text, msg, strlen(msg) + 1);
      err->message = text;
      cairn__client__topic_info__init(ti);
      ti->name = names[i];
      ti->error = err;
      tp[out++] = ti;
      continue;
    }
    const struct meta_topic *t = meta_topic_find(st, names[i]);
    if (t != NULL) {
      md_topic(n, f, ti, t, with_partitions);
    } else {
      cairn__client__topic_info__init(ti);
      ti->name = names[i];
      ti->error = &md_unknown_topic;
    }
    tp[out++] = ti;
  }
  *count = out;
  return tp;
}

static Cairn__Client__NodeInfo **md_nodes(struct node *n, struct md_frees *f, size_t *count,
                                          const struct conn *via)
{
  const struct meta_state *st = ctl_state(&n->ctl);
  Cairn__Client__NodeInfo *nis = md_alloc(f, st->nnodes * sizeof *nis);
  Cairn__Client__NodeInfo **np = md_alloc(f, st->nnodes * sizeof *np);
  if (nis == NULL || np == NULL) {
    *count = 0;
    return NULL;
  }
  for (size_t i = 0; i < st->nnodes; i++) {
    md_node(n, &nis[i], &st->nodes[i], via);
    np[i] = &nis[i];
  }
  *count = st->nnodes;
  return np;
}

static uint64_t md_controller(struct node *n)
{
  uint64_t id = 0;
  const char *addr = NULL;
  ctl_leader(&n->ctl, &id, &addr);
  return id;
}

/* Answers env, or an error if building it ran out of memory. */
static void md_respond(struct conn_request *req, Cairn__Client__Envelope *env, struct md_frees *f)
{
  if (f->failed) {
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, "out of memory");
  } else {
    conn_respond(req, env, NULL, 0);
  }
  md_free_all(f);
}

void handle_metadata(struct node *n, struct conn_request *req)
{
  const Cairn__Client__MetadataRequest *mr = req->env->metadata_req;
  struct md_frees f = {0};
  Cairn__Client__MetadataResponse resp = CAIRN__CLIENT__METADATA_RESPONSE__INIT;
  resp.cluster_id = (char *)ctl_state(&n->ctl)->cluster_id;
  resp.controller_id = md_controller(n);
  resp.behind = !node_meta_current(n);
  resp.nodes = md_nodes(n, &f, &resp.n_nodes, req->c);
  resp.topics = md_topics(n, req->c, &f, mr->topics, mr->n_topics, true, &resp.n_topics);
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_METADATA_RESP;
  env.metadata_resp = &resp;
  md_respond(req, &env, &f);
}

void handle_list_topics(struct node *n, struct conn_request *req)
{
  struct md_frees f = {0};
  Cairn__Client__ListTopicsResponse resp = CAIRN__CLIENT__LIST_TOPICS_RESPONSE__INIT;
  resp.topics = md_topics(n, req->c, &f, NULL, 0, false, &resp.n_topics);
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_TOPICS_RESP;
  env.list_topics_resp = &resp;
  md_respond(req, &env, &f);
}

void handle_describe_topic(struct node *n, struct conn_request *req)
{
  char *name = req->env->describe_topic_req->name;
  struct md_frees f = {0};
  Cairn__Client__DescribeTopicResponse resp = CAIRN__CLIENT__DESCRIBE_TOPIC_RESPONSE__INIT;
  size_t count = 0;
  Cairn__Client__TopicInfo **tp = md_topics(n, req->c, &f, &name, 1, true, &count);
  if (tp != NULL) {
    resp.topic = tp[0];
    resp.error = tp[0]->error;
  }
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_TOPIC_RESP;
  env.describe_topic_resp = &resp;
  md_respond(req, &env, &f);
}

void handle_describe_cluster(struct node *n, struct conn_request *req)
{
  struct md_frees f = {0};
  Cairn__Client__DescribeClusterResponse resp = CAIRN__CLIENT__DESCRIBE_CLUSTER_RESPONSE__INIT;
  resp.cluster_id = (char *)ctl_state(&n->ctl)->cluster_id;
  resp.controller_id = md_controller(n);
  resp.nodes = md_nodes(n, &f, &resp.n_nodes, req->c);
  resp.topics = md_topics(n, req->c, &f, NULL, 0, true, &resp.n_topics);
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_CLUSTER_RESP;
  env.describe_cluster_resp = &resp;
  md_respond(req, &env, &f);
}
