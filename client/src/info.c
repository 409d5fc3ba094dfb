/* info.c - the public result structs of the admin calls, built from the
 * protobuf answers (deep copies: the callee owns them), and their frees. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *lc_info_strdup(const char *s) { return strdup(s != NULL ? s : ""); }

static void lc_info_topic_clear(struct cairn_topic_info *t)
{
  free(t->name);
  for (size_t i = 0; i < t->partition_info_count; i++) {
    struct cairn_partition_info *p = &t->partitions[i];
    free(p->replicas);
    free(p->isr);
    for (size_t k = 0; k < p->store_failure_count; k++) {
      free(p->store_failures[k].reason);
    }
    free(p->store_failures);
  }
  free(t->partitions);
  memset(t, 0, sizeof *t);
}

static uint64_t *lc_info_ids(const uint64_t *ids, size_t n)
{
  uint64_t *out = calloc(n + 1, sizeof *out);
  if (out != NULL && n > 0) {
    memcpy(out, ids, n * sizeof *out);
  }
  return out;
}

/* Copies a partition's store failures into p. Returns 0 or -1 (out of
 * memory: what was copied stays in p for lc_info_topic_clear). */
static int lc_info_store_failures(struct cairn_partition_info *p,
                                  const Cairn__Client__PartitionInfo *pi)
{
  if (pi->n_store_failures == 0) {
    return 0;
  }
  p->store_failures = calloc(pi->n_store_failures, sizeof *p->store_failures);
  if (p->store_failures == NULL) {
    return -1;
  }
  for (size_t k = 0; k < pi->n_store_failures; k++) {
    const Cairn__Client__StoreFailure *sf = pi->store_failures[k];
    struct cairn_store_failure *out = &p->store_failures[k];
    out->node_id = sf->node_id;
    out->since_ms = sf->since_ms;
    out->reason = lc_info_strdup(sf->reason);
    p->store_failure_count = k + 1;
    if (out->reason == NULL) {
      return -1;
    }
  }
  return 0;
}

int lc_info_topic_fill(struct cairn_topic_info *dst, const Cairn__Client__TopicInfo *t)
{
  memset(dst, 0, sizeof *dst);
  dst->name = lc_info_strdup(t->name);
  dst->topic_id = t->topic_id;
  dst->partition_count = t->partition_count;
  dst->replication_factor = t->replication_factor;
  if (t->config != NULL) {
    dst->config.retention_bytes = t->config->retention_bytes;
    dst->config.retention_ms = t->config->retention_ms;
    dst->config.segment_bytes = t->config->segment_bytes;
    dst->config.max_batch_bytes = t->config->max_batch_bytes;
    snprintf(dst->config.storage, sizeof dst->config.storage, "%s",
             t->config->storage[0] != '\0' ? t->config->storage : "file");
  }
  if (dst->name == NULL) {
    return -1;
  }
  if (t->n_partitions > 0) {
    dst->partitions = calloc(t->n_partitions, sizeof *dst->partitions);
    if (dst->partitions == NULL) {
      lc_info_topic_clear(dst);
      return -1;
    }
    dst->partition_info_count = t->n_partitions;
    for (size_t i = 0; i < t->n_partitions; i++) {
      const Cairn__Client__PartitionInfo *pi = t->partitions[i];
      struct cairn_partition_info *p = &dst->partitions[i];
      p->partition = pi->partition;
      p->leader_id = pi->leader_id;
      p->leader_term = pi->leader_term;
      p->log_start_offset = pi->log_start_offset;
      p->high_watermark = pi->high_watermark;
      p->replicas = lc_info_ids(pi->replicas, pi->n_replicas);
      p->replica_count = pi->n_replicas;
      p->isr = lc_info_ids(pi->isr, pi->n_isr);
      p->isr_count = pi->n_isr;
      if (p->replicas == NULL || p->isr == NULL || lc_info_store_failures(p, pi) != 0) {
        lc_info_topic_clear(dst);
        return -1;
      }
    }
  }
  return 0;
}

struct cairn_topic_info *lc_info_topic(const Cairn__Client__TopicInfo *t)
{
  struct cairn_topic_info *out = calloc(1, sizeof *out);
  if (out != NULL && lc_info_topic_fill(out, t) != 0) {
    free(out);
    return NULL;
  }
  return out;
}

static struct cairn_topic_info *lc_info_topics(Cairn__Client__TopicInfo **ts, size_t n,
                                               size_t *count)
{
  struct cairn_topic_info *out = calloc(n + 1, sizeof *out);
  if (out == NULL) {
    return NULL;
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (ts[i]->error != NULL && ts[i]->error->code != CAIRN__CLIENT__ERROR_CODE__OK) {
      continue;
    }
    if (lc_info_topic_fill(&out[k], ts[i]) != 0) {
      for (size_t j = 0; j < k; j++) {
        lc_info_topic_clear(&out[j]);
      }
      free(out);
      return NULL;
    }
    k++;
  }
  *count = k;
  return out;
}

struct cairn_topic_list *lc_info_topic_list(const Cairn__Client__ListTopicsResponse *r)
{
  struct cairn_topic_list *l = calloc(1, sizeof *l);
  if (l == NULL) {
    return NULL;
  }
  if ((l->topics = lc_info_topics(r->topics, r->n_topics, &l->count)) == NULL) {
    free(l);
    return NULL;
  }
  return l;
}

struct cairn_cluster_info *lc_info_cluster(const Cairn__Client__DescribeClusterResponse *r)
{
  struct cairn_cluster_info *ci = calloc(1, sizeof *ci);
  if (ci == NULL) {
    return NULL;
  }
  ci->cluster_id = lc_info_strdup(r->cluster_id);
  ci->controller_id = r->controller_id;
  ci->nodes = calloc(r->n_nodes + 1, sizeof *ci->nodes);
  if (ci->cluster_id == NULL || ci->nodes == NULL) {
    cairn_cluster_info_free(ci);
    return NULL;
  }
  for (size_t i = 0; i < r->n_nodes; i++) {
    const Cairn__Client__NodeInfo *ni = r->nodes[i];
    struct cairn_node_info *n = &ci->nodes[i];
    n->id = ni->id;
    n->client_address = lc_info_strdup(ni->client_address);
    n->cluster_address = lc_info_strdup(ni->cluster_address);
    n->admin_address = lc_info_strdup(ni->admin_address);
    n->rack = lc_info_strdup(ni->rack);
    n->state = lc_info_strdup(ni->state);
    n->has_database = ni->has_database;
    ci->node_count = i + 1;
    if (n->client_address == NULL || n->cluster_address == NULL || n->admin_address == NULL ||
        n->rack == NULL || n->state == NULL) {
      cairn_cluster_info_free(ci);
      return NULL;
    }
  }
  if ((ci->topics = lc_info_topics(r->topics, r->n_topics, &ci->topic_count)) == NULL) {
    cairn_cluster_info_free(ci);
    return NULL;
  }
  return ci;
}

void cairn_topic_info_free(struct cairn_topic_info *t)
{
  if (t != NULL) {
    lc_info_topic_clear(t);
    free(t);
  }
}

void cairn_topic_list_free(struct cairn_topic_list *l)
{
  if (l == NULL) {
    return;
  }
  for (size_t i = 0; i < l->count; i++) {
    lc_info_topic_clear(&l->topics[i]);
  }
  free(l->topics);
  free(l);
}

void cairn_cluster_info_free(struct cairn_cluster_info *ci)
{
  if (ci == NULL) {
    return;
  }
  free(ci->cluster_id);
  for (size_t i = 0; i < ci->node_count; i++) {
    struct cairn_node_info *n = &ci->nodes[i];
    free(n->client_address);
    free(n->cluster_address);
    free(n->admin_address);
    free(n->rack);
    free(n->state);
  }
  free(ci->nodes);
  for (size_t i = 0; i < ci->topic_count; i++) {
    lc_info_topic_clear(&ci->topics[i]);
  }
  free(ci->topics);
  free(ci);
}
