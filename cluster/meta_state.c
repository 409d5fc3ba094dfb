/* meta_state.c - the metadata state: lookups and meta_apply(), one function
 * per command. Each apply_* validates everything first and changes the state
 * only once nothing can fail any more, so a refused command leaves no trace. */
#include "cluster/meta_state.h"

#include "cluster/placement.h"
#include "cluster/topic_conf.h"
#include "common/err.h"
#include "meta.pb-c.h"
#include "storage/store.h"

#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void meta_state_init(struct meta_state *st)
{
  memset(st, 0, sizeof *st);
}

void meta_state_close(struct meta_state *st)
{
  for (size_t i = 0; i < st->ntopics; i++)
    free(st->topics[i].partitions);
  free(st->topics);
  free(st->nodes);
  free(st->producers);
  if (st->users != NULL)
    OPENSSL_cleanse(st->users, st->nusers * sizeof *st->users);
  free(st->users);
  free(st->acls);
  memset(st, 0, sizeof *st);
}

/* ---- lookups ---- */

static size_t meta_node_lower_bound(const struct meta_state *st, uint64_t id)
{
  size_t lo = 0, hi = st->nnodes;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (st->nodes[mid].id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

const struct meta_node *meta_node_find(const struct meta_state *st, uint64_t node_id)
{
  size_t i = meta_node_lower_bound(st, node_id);
  return i < st->nnodes && st->nodes[i].id == node_id ? &st->nodes[i] : NULL;
}

const struct meta_topic *meta_topic_find(const struct meta_state *st, const char *name)
{
  for (size_t i = 0; i < st->ntopics; i++)
    if (strcmp(st->topics[i].name, name) == 0)
      return &st->topics[i];
  return NULL;
}

static size_t meta_topic_index(const struct meta_state *st, uint32_t topic_id)
{
  size_t lo = 0, hi = st->ntopics;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (st->topics[mid].id < topic_id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

const struct meta_topic *meta_topic_find_id(const struct meta_state *st, uint32_t topic_id)
{
  size_t i = meta_topic_index(st, topic_id);
  return i < st->ntopics && st->topics[i].id == topic_id ? &st->topics[i] : NULL;
}

const struct meta_partition *meta_partition_find(const struct meta_state *st, uint32_t topic_id,
                                                 uint32_t partition)
{
  const struct meta_topic *t = meta_topic_find_id(st, topic_id);
  if (t == NULL || partition >= t->npartitions)
    return NULL;
  return &t->partitions[partition];
}

bool meta_group_split(uint64_t group_id, uint32_t *topic_id, uint32_t *partition)
{
  uint64_t tid = group_id >> META_PARTITION_BITS;
  uint64_t p = group_id & ((1u << META_PARTITION_BITS) - 1);
  if (tid == 0 || tid > UINT32_MAX || p >= META_MAX_PARTITIONS)
    return false;
  *topic_id = (uint32_t)tid;
  *partition = (uint32_t)p;
  return true;
}

bool meta_replicas_contain(const uint64_t *replicas, uint32_t n, uint64_t node_id)
{
  for (uint32_t i = 0; i < n; i++)
    if (replicas[i] == node_id)
      return true;
  return false;
}

bool meta_partition_bootstraps(const struct meta_partition *p, uint64_t node_id)
{
  for (uint32_t i = 0; i < p->ninitial; i++)
    if (p->initial_replicas[i] == node_id)
      return (p->initial_gone & (1u << i)) == 0;
  return false;
}

int meta_node_assignments(const struct meta_state *st, uint64_t node_id,
                          struct meta_assignment **out, size_t *n)
{
  *out = NULL;
  *n = 0;
  size_t count = 0;
  for (size_t i = 0; i < st->ntopics; i++)
    for (uint32_t p = 0; p < st->topics[i].npartitions; p++) {
      const struct meta_partition *part = &st->topics[i].partitions[p];
      if (meta_replicas_contain(part->replicas, part->nreplicas, node_id))
        count++;
    }
  if (count == 0)
    return 0;
  struct meta_assignment *a = calloc(count, sizeof *a);
  if (a == NULL)
    return CAIRN_ENOMEM;
  size_t k = 0;
  for (size_t i = 0; i < st->ntopics; i++)
    for (uint32_t p = 0; p < st->topics[i].npartitions; p++) {
      const struct meta_partition *part = &st->topics[i].partitions[p];
      if (!meta_replicas_contain(part->replicas, part->nreplicas, node_id))
        continue;
      a[k].topic_id = st->topics[i].id;
      a[k].partition = p;
      a[k].group_id = part->group_id;
      a[k].bootstraps = meta_partition_bootstraps(part, node_id);
      k++;
    }
  *out = a;
  *n = count;
  return 0;
}

void meta_node_load(const struct meta_state *st, uint64_t node_id, uint32_t *replicas,
                    uint32_t *preferred_leaders)
{
  uint32_t r = 0, l = 0;
  for (size_t i = 0; i < st->ntopics; i++)
    for (uint32_t p = 0; p < st->topics[i].npartitions; p++) {
      const struct meta_partition *part = &st->topics[i].partitions[p];
      if (meta_replicas_contain(part->replicas, part->nreplicas, node_id))
        r++;
      if (part->nreplicas > 0 && part->replicas[0] == node_id)
        l++;
    }
  *replicas = r;
  *preferred_leaders = l;
}

uint32_t meta_alive_count(const struct meta_state *st)
{
  uint32_t n = 0;
  for (size_t i = 0; i < st->nnodes; i++)
    if (st->nodes[i].state == META_NODE_ALIVE)
      n++;
  return n;
}

uint32_t meta_topic_needs(const struct meta_topic_config *cfg)
{
  return cfg->storage == STORE_KIND_POSTGRESQL ? META_NODE_CAP_POSTGRESQL : 0;
}

uint32_t meta_capable_count(const struct meta_state *st, uint32_t caps)
{
  uint32_t n = 0;
  for (size_t i = 0; i < st->nnodes; i++)
    if (st->nodes[i].state == META_NODE_ALIVE && (st->nodes[i].caps & caps) == caps)
      n++;
  return n;
}

const char *meta_node_state_name(int state)
{
  switch (state) {
  case META_NODE_ALIVE:
    return "ALIVE";
  case META_NODE_DEAD:
    return "DEAD";
  case META_NODE_DRAINING:
    return "DRAINING";
  case META_NODE_REMOVED:
    return "REMOVED";
  default:
    return "?";
  }
}

bool meta_topic_name_valid(const char *name)
{
  size_t len = strlen(name);
  if (len == 0 || len > META_TOPIC_NAME_MAX || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
    return false;
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok)
      return false;
  }
  return true;
}

bool meta_topic_internal(const char *name) { return strncmp(name, "__", 2) == 0; }

/* ---- invariants ---- */

static bool meta_cluster_id_valid(const char *id);

__attribute__((format(printf, 3, 4))) static int meta_check_fail(char *why, size_t cap,
                                                                 const char *fmt, ...)
{
  if (why != NULL && cap > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
  }
  return CAIRN_ECORRUPT;
}

static bool meta_ids_valid(const uint64_t *ids, uint32_t n, uint32_t max)
{
  if (n == 0 || n > max)
    return false;
  for (uint32_t i = 0; i < n; i++)
    if (ids[i] == 0 || meta_replicas_contain(ids, i, ids[i]))
      return false;
  return true;
}

static int meta_check_name_cmp(const void *a, const void *b)
{
  const struct meta_topic *ta = *(const struct meta_topic *const *)a;
  const struct meta_topic *tb = *(const struct meta_topic *const *)b;
  return strcmp(ta->name, tb->name);
}

static int meta_check_names_unique(const struct meta_state *st, char *why, size_t cap)
{
  if (st->ntopics < 2)
    return 0;
  const struct meta_topic **by_name = calloc(st->ntopics, sizeof *by_name);
  if (by_name == NULL)
    return CAIRN_ENOMEM;
  for (size_t i = 0; i < st->ntopics; i++)
    by_name[i] = &st->topics[i];
  qsort(by_name, st->ntopics, sizeof *by_name, meta_check_name_cmp);
  int rc = 0;
  for (size_t i = 1; i < st->ntopics && rc == 0; i++)
    if (strcmp(by_name[i - 1]->name, by_name[i]->name) == 0)
      rc = meta_check_fail(why, cap, "topic name %s used twice", by_name[i]->name);
  free(by_name);
  return rc;
}

int meta_state_check(const struct meta_state *st, char *why, size_t cap)
{
  if (st->cluster_id[0] == '\0') {
    if (st->nvoters != 0 || st->nnodes != 0 || st->ntopics != 0 || st->next_topic_id != 0 ||
        st->producer_ids != 0 || st->nproducers != 0)
      return meta_check_fail(why, cap, "not bootstrapped, yet holds voters, nodes or topics");
    return 0;
  }
  if (!meta_cluster_id_valid(st->cluster_id))
    return meta_check_fail(why, cap, "invalid cluster id");
  if (!meta_ids_valid(st->voters, st->nvoters, META_MAX_VOTERS))
    return meta_check_fail(why, cap, "voters: none, too many, 0 or repeated");
  if (st->next_topic_id == 0)
    return meta_check_fail(why, cap, "next topic id 0 after bootstrap");
  if (st->nnodes > META_MAX_NODES || st->ntopics > META_MAX_TOPICS)
    return meta_check_fail(why, cap, "%zu nodes, %zu topics: over the limits", st->nnodes,
                           st->ntopics);
  for (size_t i = 0; i < st->nnodes; i++) {
    const struct meta_node *n = &st->nodes[i];
    if (n->id == 0 || (i > 0 && n->id <= st->nodes[i - 1].id))
      return meta_check_fail(why, cap, "node ids not ascending or 0 at index %zu", i);
    if ((int)n->state < META_NODE_ALIVE || (int)n->state > META_NODE_REMOVED)
      return meta_check_fail(why, cap, "node %llu: invalid state %d", (unsigned long long)n->id,
                             (int)n->state);
    if (n->incarnation == 0)
      return meta_check_fail(why, cap, "node %llu: incarnation 0", (unsigned long long)n->id);
  }
  size_t total = 0;
  for (size_t i = 0; i < st->ntopics; i++) {
    const struct meta_topic *t = &st->topics[i];
    if (t->id == 0 || t->id >= st->next_topic_id || (i > 0 && t->id <= st->topics[i - 1].id))
      return meta_check_fail(why, cap, "topic ids not ascending, 0 or not below %u at index %zu",
                             st->next_topic_id, i);
    if (!meta_topic_name_valid(t->name))
      return meta_check_fail(why, cap, "topic %u: invalid name", t->id);
    if (t->replication_factor == 0 || t->replication_factor > META_MAX_RF)
      return meta_check_fail(why, cap, "topic %u: replication factor %u", t->id,
                             t->replication_factor);
    if (t->npartitions == 0 || t->npartitions > META_MAX_PARTITIONS)
      return meta_check_fail(why, cap, "topic %u: %u partitions", t->id, t->npartitions);
    total += t->npartitions;
    for (uint32_t p = 0; p < t->npartitions; p++) {
      const struct meta_partition *part = &t->partitions[p];
      if (part->group_id != meta_group_id(t->id, p))
        return meta_check_fail(why, cap, "partition %u/%u: group id %llu", t->id, p,
                               (unsigned long long)part->group_id);
      if (!meta_ids_valid(part->replicas, part->nreplicas, META_MAX_REPLICAS))
        return meta_check_fail(why, cap, "partition %u/%u: replicas none, too many, 0 or repeated",
                               t->id, p);
      if (!meta_ids_valid(part->initial_replicas, part->ninitial, META_MAX_RF))
        return meta_check_fail(
            why, cap, "partition %u/%u: initial replicas none, too many, 0 or repeated", t->id, p);
      if ((part->initial_gone >> part->ninitial) != 0)
        return meta_check_fail(why, cap, "partition %u/%u: initial_gone names no initial replica",
                               t->id, p);
    }
  }
  if (total != st->total_partitions || total > META_MAX_TOTAL_PARTITIONS)
    return meta_check_fail(why, cap, "%zu partitions, total_partitions says %zu", total,
                           st->total_partitions);
  if (st->nacls > META_MAX_ACLS)
    return meta_check_fail(why, cap, "%zu acl entries: over the limit", st->nacls);
  for (size_t i = 0; i < st->nacls; i++) {
    if (!meta_acl_ok(&st->acls[i]) || (i > 0 && meta_acl_cmp(&st->acls[i - 1], &st->acls[i]) >= 0))
      return meta_check_fail(why, cap, "acl entry %zu: bad, or not ascending", i);
  }
  if (st->nusers > META_MAX_USERS)
    return meta_check_fail(why, cap, "%zu users: over the limit", st->nusers);
  for (size_t i = 0; i < st->nusers; i++) {
    const struct meta_user *u = &st->users[i];
    if (!meta_user_cred_ok(u->name, u->cred.salt_len, u->cred.iterations, SCRAM_KEY_LEN,
                           SCRAM_KEY_LEN) ||
        (i > 0 && strcmp(u->name, st->users[i - 1].name) <= 0))
      return meta_check_fail(why, cap, "user %zu: bad name or credential, or not ascending", i);
  }
  if (st->producer_ids > META_MAX_PRODUCER_ID || st->nproducers > META_MAX_PRODUCER_EPOCHS)
    return meta_check_fail(why, cap, "producer ids %llu, %zu bumped epochs: over the limits",
                           (unsigned long long)st->producer_ids, st->nproducers);
  for (size_t i = 0; i < st->nproducers; i++) {
    const struct meta_producer *pr = &st->producers[i];
    if (pr->id == 0 || pr->id > st->producer_ids || (i > 0 && pr->id <= st->producers[i - 1].id))
      return meta_check_fail(why, cap, "producer ids not ascending, 0 or not handed out at %zu",
                             i);
    if (pr->epoch == 0 || pr->epoch > META_MAX_PRODUCER_EPOCH)
      return meta_check_fail(why, cap, "producer %llu: epoch %u", (unsigned long long)pr->id,
                             pr->epoch);
  }
  return meta_check_names_unique(st, why, cap);
}

/* ---- apply ---- */

__attribute__((format(printf, 3, 4))) static int meta_fail(struct meta_result *res, int code,
                                                           const char *fmt, ...)
{
  res->code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(res->msg, sizeof res->msg, fmt, ap);
  va_end(ap);
  return code;
}

/* Copies s into dst[cap] if it fits (and is not NULL); false otherwise. */
static bool meta_str_fits(const char *s, size_t cap)
{
  return s == NULL || strlen(s) < cap;
}

static void meta_str_set(char *dst, size_t cap, const char *s)
{
  snprintf(dst, cap, "%s", s != NULL ? s : "");
}

static bool meta_cluster_id_valid(const char *id)
{
  size_t len = strlen(id);
  if (len == 0 || len > META_CLUSTER_ID_MAX)
    return false;
  for (size_t i = 0; i < len; i++)
    if (id[i] < '!' || id[i] > '~')
      return false;
  return true;
}

static uint32_t meta_node_replica_count(const struct meta_state *st, uint64_t node_id)
{
  uint32_t r, l;
  meta_node_load(st, node_id, &r, &l);
  return r;
}

static int apply_bootstrap(struct meta_state *st, const Cairn__Meta__Bootstrap *b,
                           struct meta_result *res)
{
  if (!meta_cluster_id_valid(b->cluster_id))
    return meta_fail(res, CAIRN_EINVAL, "bootstrap: cluster id must be 1..%u printable characters",
                     META_CLUSTER_ID_MAX);
  if (st->cluster_id[0] != '\0') {
    if (strcmp(st->cluster_id, b->cluster_id) == 0)
      return 0; /* a repeated bootstrap of the same cluster changes nothing */
    return meta_fail(res, CAIRN_ECLUSTER_ID_MISMATCH,
                     "bootstrap: this metadata belongs to cluster %s, not %s", st->cluster_id,
                     b->cluster_id);
  }
  if (b->n_voters == 0 || b->n_voters > META_MAX_VOTERS)
    return meta_fail(res, CAIRN_EINVAL, "bootstrap: 1..%u voters needed, got %zu", META_MAX_VOTERS,
                     b->n_voters);
  for (size_t i = 0; i < b->n_voters; i++) {
    if (b->voters[i] == 0)
      return meta_fail(res, CAIRN_EINVAL, "bootstrap: voter id 0");
    for (size_t j = 0; j < i; j++)
      if (b->voters[j] == b->voters[i])
        return meta_fail(res, CAIRN_EINVAL, "bootstrap: voter %llu listed twice",
                         (unsigned long long)b->voters[i]);
  }
  meta_str_set(st->cluster_id, sizeof st->cluster_id, b->cluster_id);
  memcpy(st->voters, b->voters, b->n_voters * sizeof *b->voters);
  st->nvoters = (uint32_t)b->n_voters;
  st->next_topic_id = 1;
  return 0;
}

static void meta_node_set_info(struct meta_node *n, const Cairn__Meta__RegisterNode *r)
{
  n->incarnation = r->incarnation;
  meta_str_set(n->client_addr, sizeof n->client_addr, r->client_addr);
  meta_str_set(n->cluster_addr, sizeof n->cluster_addr, r->cluster_addr);
  meta_str_set(n->admin_addr, sizeof n->admin_addr, r->admin_addr);
  meta_str_set(n->kafka_addr, sizeof n->kafka_addr, r->kafka_addr);
  meta_str_set(n->external_addr, sizeof n->external_addr, r->external_addr);
  meta_str_set(n->rack, sizeof n->rack, r->rack);
  /* Bits this version does not know are dropped: nothing could use them. */
  n->caps = r->capabilities & META_NODE_CAPS_KNOWN;
}

/* Node identity (docs/metadata.md): a different incarnation may take over an
 * id only from a DEAD or REMOVED record, or from a live one the proposer
 * found silent and names in replaces_incarnation (compare-and-swap: if the
 * record changed meanwhile, the command is refused). */
static int apply_register_node(struct meta_state *st, const Cairn__Meta__RegisterNode *r,
                               struct meta_result *res)
{
  if (r->node_id == 0 || r->incarnation == 0)
    return meta_fail(res, CAIRN_EINVAL, "register: node id and incarnation must be non-zero");
  if (r->client_addr[0] == '\0' || r->cluster_addr[0] == '\0' ||
      !meta_str_fits(r->client_addr, META_ADDR_MAX + 1) ||
      !meta_str_fits(r->cluster_addr, META_ADDR_MAX + 1) ||
      !meta_str_fits(r->admin_addr, META_ADDR_MAX + 1) ||
      !meta_str_fits(r->kafka_addr, META_ADDR_MAX + 1) ||
      !meta_str_fits(r->external_addr, META_ADDR_MAX + 1) ||
      !meta_str_fits(r->rack, META_RACK_MAX + 1))
    return meta_fail(res, CAIRN_EINVAL,
                     "register node %llu: client and cluster addresses needed (at most %u "
                     "bytes), rack at most %u",
                     (unsigned long long)r->node_id, META_ADDR_MAX, META_RACK_MAX);
  size_t i = meta_node_lower_bound(st, r->node_id);
  if (i < st->nnodes && st->nodes[i].id == r->node_id) {
    struct meta_node *n = &st->nodes[i];
    if (n->incarnation == r->incarnation) {
      if (n->state == META_NODE_REMOVED)
        return meta_fail(res, CAIRN_EINVAL,
                         "register node %llu: it was removed; only a restarted process "
                         "(new incarnation) may rejoin",
                         (unsigned long long)r->node_id);
      meta_node_set_info(n, r);
      if (n->state == META_NODE_DEAD)
        n->state = META_NODE_ALIVE;
      return 0;
    }
    bool live = n->state == META_NODE_ALIVE || n->state == META_NODE_DRAINING;
    if (live && r->replaces_incarnation != n->incarnation)
      return meta_fail(res, CAIRN_ENODE_ID_IN_USE,
                       "register node %llu incarnation %llx: incarnation %llx holds the id and "
                       "is %s",
                       (unsigned long long)r->node_id, (unsigned long long)r->incarnation,
                       (unsigned long long)n->incarnation, meta_node_state_name(n->state));
    meta_node_set_info(n, r);
    if (n->state != META_NODE_DRAINING)
      n->state = META_NODE_ALIVE; /* a restarted draining node keeps draining */
    return 0;
  }
  if (st->nnodes >= META_MAX_NODES)
    return meta_fail(res, CAIRN_ETOOLARGE, "register: the cluster has %u nodes already",
                     META_MAX_NODES);
  struct meta_node *nodes = realloc(st->nodes, (st->nnodes + 1) * sizeof *nodes);
  if (nodes == NULL)
    return meta_fail(res, CAIRN_ENOMEM, "register: out of memory");
  st->nodes = nodes;
  memmove(&nodes[i + 1], &nodes[i], (st->nnodes - i) * sizeof *nodes);
  st->nnodes++;
  memset(&nodes[i], 0, sizeof nodes[i]);
  nodes[i].id = r->node_id;
  nodes[i].state = META_NODE_ALIVE;
  meta_node_set_info(&nodes[i], r);
  return 0;
}

static bool meta_transition_allowed(enum meta_node_state from, enum meta_node_state to)
{
  switch (from) {
  case META_NODE_ALIVE:
    return to == META_NODE_DEAD || to == META_NODE_DRAINING;
  case META_NODE_DEAD:
    return to == META_NODE_ALIVE || to == META_NODE_DRAINING || to == META_NODE_REMOVED;
  case META_NODE_DRAINING:
    return to == META_NODE_ALIVE || to == META_NODE_REMOVED;
  case META_NODE_REMOVED:
    return false;
  }
  return false;
}

static int apply_set_node_state(struct meta_state *st, const Cairn__Meta__SetNodeState *s,
                                struct meta_result *res)
{
  size_t i = meta_node_lower_bound(st, s->node_id);
  if (i >= st->nnodes || st->nodes[i].id != s->node_id)
    return meta_fail(res, CAIRN_EUNKNOWN_NODE, "set state: unknown node %llu",
                     (unsigned long long)s->node_id);
  struct meta_node *n = &st->nodes[i];
  int to = (int)s->state;
  if (to < META_NODE_ALIVE || to > META_NODE_REMOVED)
    return meta_fail(res, CAIRN_EINVAL, "set state of node %llu: invalid state %d",
                     (unsigned long long)s->node_id, to);
  if (s->incarnation != 0 && s->incarnation != n->incarnation)
    return meta_fail(res, CAIRN_ESTALE,
                     "set state of node %llu: meant for incarnation %llx, registered is %llx",
                     (unsigned long long)s->node_id, (unsigned long long)s->incarnation,
                     (unsigned long long)n->incarnation);
  if ((int)n->state == to)
    return 0;
  if (!meta_transition_allowed(n->state, (enum meta_node_state)to))
    return meta_fail(res, CAIRN_EINVAL, "set state of node %llu: %s -> %s is not allowed",
                     (unsigned long long)s->node_id, meta_node_state_name(n->state),
                     meta_node_state_name(to));
  if (to == META_NODE_REMOVED) {
    uint32_t held = meta_node_replica_count(st, n->id);
    if (held > 0)
      return meta_fail(res, CAIRN_EINVALID_REPLICAS,
                       "set state of node %llu: REMOVED needs it to hold no replica, it holds %u",
                       (unsigned long long)s->node_id, held);
  }
  n->state = (enum meta_node_state)to;
  n->state_since_ms = s->at_ms;
  return 0;
}

static int apply_create_topic(struct meta_state *st, const Cairn__Meta__CreateTopic *c,
                              struct meta_result *res)
{
  if (!meta_topic_name_valid(c->name))
    return meta_fail(res, CAIRN_EINVALID_TOPIC_NAME,
                     "create topic: invalid name (1..%u of [A-Za-z0-9._-], not . or ..)",
                     META_TOPIC_NAME_MAX);
  if (meta_topic_find(st, c->name) != NULL)
    return meta_fail(res, CAIRN_ETOPIC_EXISTS, "create topic %s: it exists", c->name);
  if (c->partitions == 0 || c->partitions > META_MAX_PARTITIONS)
    return meta_fail(res, CAIRN_EINVALID_PARTITIONS, "create topic %s: partitions must be 1..%u",
                     c->name, META_MAX_PARTITIONS);
  if (st->total_partitions + c->partitions > META_MAX_TOTAL_PARTITIONS)
    return meta_fail(res, CAIRN_EINVALID_PARTITIONS,
                     "create topic %s: the cluster would exceed %u partitions", c->name,
                     META_MAX_TOTAL_PARTITIONS);
  uint32_t alive = meta_alive_count(st);
  if (c->replication_factor == 0 || c->replication_factor > META_MAX_RF ||
      c->replication_factor > alive)
    return meta_fail(res, CAIRN_EINVALID_RF,
                     "create topic %s: replication factor %u, must be 1..%u with %u alive nodes",
                     c->name, c->replication_factor, META_MAX_RF, alive);
  struct meta_topic_config cfg = {0};
  if (c->config != NULL)
    cfg.storage = c->config->storage;
  uint32_t need = meta_topic_needs(&cfg);
  uint32_t capable = meta_capable_count(st, need);
  if (need != 0 && c->replication_factor > capable)
    return meta_fail(res, CAIRN_EINVALID_RF,
                     "create topic %s: replication factor %u, but only %u alive node%s ha%s a "
                     "PostgreSQL database (--pg-conninfo); a postgresql topic's replicas go only "
                     "to those",
                     c->name, c->replication_factor, capable, capable == 1 ? "" : "s",
                     capable == 1 ? "s" : "ve");
  if (st->ntopics >= META_MAX_TOPICS || st->next_topic_id == UINT32_MAX)
    return meta_fail(res, CAIRN_ETOOLARGE, "create topic %s: too many topics", c->name);

  uint32_t rf = c->replication_factor;
  struct placement_table t;
  uint64_t *rows = calloc((size_t)c->partitions * rf, sizeof *rows);
  struct meta_partition *parts = calloc(c->partitions, sizeof *parts);
  struct meta_topic *topics = realloc(st->topics, (st->ntopics + 1) * sizeof *topics);
  if (topics != NULL)
    st->topics = topics; /* capacity only: ntopics is unchanged until the end */
  if (rows == NULL || parts == NULL || topics == NULL || placement_table_build(st, &t) != 0) {
    free(rows);
    free(parts);
    return meta_fail(res, CAIRN_ENOMEM, "create topic %s: out of memory", c->name);
  }
  placement_table_require(&t, need);
  int rc = placement_assign(&t, c->partitions, rf, rows);
  placement_table_free(&t);
  if (rc != 0) {
    free(rows);
    free(parts);
    return meta_fail(res, rc, "create topic %s: cannot place %u replicas", c->name, rf);
  }
  uint32_t id = st->next_topic_id;
  for (uint32_t p = 0; p < c->partitions; p++) {
    parts[p].group_id = meta_group_id(id, p);
    memcpy(parts[p].replicas, &rows[(size_t)p * rf], rf * sizeof *rows);
    memcpy(parts[p].initial_replicas, &rows[(size_t)p * rf], rf * sizeof *rows);
    parts[p].nreplicas = rf;
    parts[p].ninitial = rf;
  }
  free(rows);
  struct meta_topic *tp = &st->topics[st->ntopics];
  memset(tp, 0, sizeof *tp);
  tp->id = id;
  meta_str_set(tp->name, sizeof tp->name, c->name);
  tp->replication_factor = rf;
  if (c->config != NULL) {
    tp->config.retention_bytes = c->config->retention_bytes;
    tp->config.retention_ms = c->config->retention_ms;
    tp->config.segment_bytes = c->config->segment_bytes;
    tp->config.max_batch_bytes = c->config->max_batch_bytes;
    tp->config.storage = c->config->storage;
  }
  tp->partitions = parts;
  tp->npartitions = c->partitions;
  st->ntopics++;
  st->next_topic_id++;
  st->total_partitions += c->partitions;
  res->topic_id = id;
  return 0;
}

/* Places `add` new partitions of t after its last: rows of rf ids. */
static int add_partitions_place(const struct meta_state *st, const struct meta_topic *tp,
                                uint32_t add, uint32_t rf, uint64_t *rows)
{
  struct placement_table t;
  if (placement_table_build(st, &t) != 0)
    return CAIRN_ENOMEM;
  placement_table_require(&t, meta_topic_needs(&tp->config));
  int rc = placement_assign(&t, add, rf, rows);
  placement_table_free(&t);
  return rc;
}

/* The refusal of what (e.g. "delete topic") on an internal topic: checked
 * here too (not only in the handlers) so that no path, a forwarded or
 * hand-made request included, loses or changes the groups' offsets. */
static int meta_refuse_internal(struct meta_result *res, const char *what, const char *name)
{
  return meta_fail(res, CAIRN_EINTERNAL_TOPIC,
                   "%s %s: it is an internal topic, kept by the cluster (names starting "
                   "\"__\"); users may not delete or alter it",
                   what, name);
}

/* The user topic named name, for what ("delete topic", ...): 0 with *out,
 * or the refusal (no such topic, an internal one) filled in res. */
static int meta_user_topic(struct meta_state *st, const char *what, const char *name,
                           struct meta_result *res, struct meta_topic **out)
{
  const struct meta_topic *found = meta_topic_find(st, name);
  if (found == NULL)
    return meta_fail(res, CAIRN_EUNKNOWN_TOPIC, "%s %s: no such topic", what, name);
  if (meta_topic_internal(name))
    return meta_refuse_internal(res, what, name);
  *out = &st->topics[found - st->topics];
  return 0;
}

static int apply_alter_topic_config(struct meta_state *st, const Cairn__Meta__AlterTopicConfig *a,
                                    struct meta_result *res)
{
  struct meta_topic *tp;
  int rc = meta_user_topic(st, "alter config of", a->name, res, &tp);
  if (rc != 0)
    return rc;
  if (a->config == NULL || a->mask == 0 || (a->mask & ~(uint32_t)TOPIC_CONF_LIVE) != 0)
    return meta_fail(res, CAIRN_EINVALID_CONFIG,
                     "alter config of %s: only retention.ms and retention.bytes change on a "
                     "running topic (mask %#x)",
                     a->name, a->mask);
  struct meta_topic_config to = {
      .retention_bytes = a->config->retention_bytes,
      .retention_ms = a->config->retention_ms,
  };
  topic_conf_merge(&tp->config, &to, a->mask);
  res->topic_id = tp->id;
  return 0;
}

static int apply_add_partitions(struct meta_state *st, const Cairn__Meta__AddPartitions *a,
                                struct meta_result *res)
{
  struct meta_topic *tp;
  int rc = meta_user_topic(st, "add partitions to", a->name, res, &tp);
  if (rc != 0)
    return rc;
  if (a->partitions <= tp->npartitions)
    return meta_fail(res, CAIRN_EINVALID_PARTITIONS,
                     "add partitions to %s: it has %u partitions; the new count (%u) must be "
                     "larger (partitions are never removed)",
                     a->name, tp->npartitions, a->partitions);
  uint32_t add = a->partitions - tp->npartitions;
  if (a->partitions > META_MAX_PARTITIONS ||
      st->total_partitions + add > META_MAX_TOTAL_PARTITIONS)
    return meta_fail(res, CAIRN_EINVALID_PARTITIONS,
                     "add partitions to %s: at most %u per topic and %u in the cluster", a->name,
                     META_MAX_PARTITIONS, META_MAX_TOTAL_PARTITIONS);
  uint32_t rf = tp->replication_factor;
  uint64_t *rows = calloc((size_t)add * rf, sizeof *rows);
  struct meta_partition *parts =
      rows != NULL ? realloc(tp->partitions, a->partitions * sizeof *parts) : NULL;
  if (parts == NULL) {
    free(rows);
    return meta_fail(res, CAIRN_ENOMEM, "add partitions to %s: out of memory", a->name);
  }
  tp->partitions = parts; /* capacity only: npartitions is unchanged until the end */
  rc = add_partitions_place(st, tp, add, rf, rows);
  if (rc != 0) {
    free(rows);
    return meta_fail(res, rc, "add partitions to %s: cannot place %u replicas on the alive nodes%s",
                     a->name, rf,
                     meta_topic_needs(&tp->config) != 0 ? " with a PostgreSQL database" : "");
  }
  for (uint32_t k = 0; k < add; k++) {
    struct meta_partition *p = &parts[tp->npartitions + k];
    memset(p, 0, sizeof *p);
    p->group_id = meta_group_id(tp->id, tp->npartitions + k);
    memcpy(p->replicas, &rows[(size_t)k * rf], rf * sizeof *rows);
    memcpy(p->initial_replicas, &rows[(size_t)k * rf], rf * sizeof *rows);
    p->nreplicas = rf;
    p->ninitial = rf;
  }
  free(rows);
  tp->npartitions = a->partitions;
  st->total_partitions += add;
  res->topic_id = tp->id;
  return 0;
}

static int apply_delete_topic(struct meta_state *st, const Cairn__Meta__DeleteTopic *d,
                              struct meta_result *res)
{
  struct meta_topic *t;
  int rc = meta_user_topic(st, "delete topic", d->name, res, &t);
  if (rc != 0)
    return rc;
  size_t i = (size_t)(t - st->topics);
  st->total_partitions -= st->topics[i].npartitions;
  free(st->topics[i].partitions);
  memmove(&st->topics[i], &st->topics[i + 1], (st->ntopics - i - 1) * sizeof *st->topics);
  st->ntopics--;
  return 0;
}

static struct meta_partition *meta_partition_find_mut(struct meta_state *st, uint32_t topic_id,
                                                      uint32_t partition)
{
  return (struct meta_partition *)meta_partition_find(st, topic_id, partition);
}

static int apply_report_leader(struct meta_state *st, const Cairn__Meta__ReportLeader *r,
                               struct meta_result *res)
{
  struct meta_partition *p = meta_partition_find_mut(st, r->topic_id, r->partition);
  if (p == NULL)
    return meta_fail(res, CAIRN_EUNKNOWN_TOPIC, "report leader: no partition %u/%u", r->topic_id,
                     r->partition);
  if (r->leader_id == 0)
    return meta_fail(res, CAIRN_EINVAL, "report leader: leader id 0");
  if (r->term < p->leader_term)
    return meta_fail(
        res, CAIRN_ESTALE, "report leader of %u/%u: term %llu is older than the recorded %llu",
        r->topic_id, r->partition, (unsigned long long)r->term, (unsigned long long)p->leader_term);
  p->leader_id = r->leader_id;
  p->leader_term = r->term;
  return 0;
}

static int apply_set_replicas(struct meta_state *st, const Cairn__Meta__SetReplicas *s,
                              struct meta_result *res)
{
  struct meta_partition *p = meta_partition_find_mut(st, s->topic_id, s->partition);
  if (p == NULL)
    return meta_fail(res, CAIRN_EUNKNOWN_TOPIC, "set replicas: no partition %u/%u", s->topic_id,
                     s->partition);
  if (s->expected_epoch != p->replica_epoch)
    return meta_fail(res, CAIRN_ESTALE,
                     "set replicas of %u/%u: expected epoch %llu, the partition is at %llu",
                     s->topic_id, s->partition, (unsigned long long)s->expected_epoch,
                     (unsigned long long)p->replica_epoch);
  if (s->n_replicas == 0 || s->n_replicas > META_MAX_REPLICAS)
    return meta_fail(res, CAIRN_EINVALID_REPLICAS, "set replicas of %u/%u: 1..%u replicas needed",
                     s->topic_id, s->partition, META_MAX_REPLICAS);
  uint32_t n = (uint32_t)s->n_replicas;
  uint32_t added = 0, removed = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t id = s->replicas[i];
    if (id == 0 || meta_replicas_contain(s->replicas, i, id))
      return meta_fail(res, CAIRN_EINVALID_REPLICAS,
                       "set replicas of %u/%u: node id 0 or listed twice", s->topic_id,
                       s->partition);
    if (meta_replicas_contain(p->replicas, p->nreplicas, id))
      continue;
    added++;
    const struct meta_node *node = meta_node_find(st, id);
    if (node == NULL)
      return meta_fail(res, CAIRN_EUNKNOWN_NODE, "set replicas of %u/%u: unknown node %llu",
                       s->topic_id, s->partition, (unsigned long long)id);
    if (node->state != META_NODE_ALIVE)
      return meta_fail(res, CAIRN_EINVALID_REPLICAS,
                       "set replicas of %u/%u: cannot add node %llu, it is %s", s->topic_id,
                       s->partition, (unsigned long long)id, meta_node_state_name(node->state));
  }
  for (uint32_t i = 0; i < p->nreplicas; i++)
    if (!meta_replicas_contain(s->replicas, n, p->replicas[i]))
      removed++;
  if (added + removed > 1)
    return meta_fail(res, CAIRN_EINVALID_REPLICAS,
                     "set replicas of %u/%u: one change at a time (%u added, %u removed)",
                     s->topic_id, s->partition, added, removed);
  for (uint32_t i = 0; i < p->ninitial; i++)
    if (!meta_replicas_contain(s->replicas, n, p->initial_replicas[i]))
      p->initial_gone |= 1u << i;
  memcpy(p->replicas, s->replicas, n * sizeof *p->replicas);
  p->nreplicas = n;
  p->replica_epoch++;
  return 0;
}

static size_t meta_producer_lower_bound(const struct meta_state *st, uint64_t id)
{
  size_t lo = 0, hi = st->nproducers;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (st->producers[mid].id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

uint32_t meta_producer_epoch(const struct meta_state *st, uint64_t producer_id)
{
  size_t i = meta_producer_lower_bound(st, producer_id);
  return i < st->nproducers && st->producers[i].id == producer_id ? st->producers[i].epoch : 0;
}

/* Producer ids (docs/metadata.md): a new one is the next of a counter, so
 * never handed out twice; a bump raises a known id's epoch, or hands out a
 * new id when the epoch or the table of bumped epochs is exhausted. */
static int apply_allocate_producer_id(struct meta_state *st,
                                      const Cairn__Meta__AllocateProducerId *a,
                                      struct meta_result *res)
{
  uint64_t id = a->producer_id;
  if (id > st->producer_ids)
    return meta_fail(res, CAIRN_EUNKNOWN_PRODUCER, "allocate producer id: %llu was never handed out",
                     (unsigned long long)id);
  size_t i = meta_producer_lower_bound(st, id);
  bool known = id != 0 && i < st->nproducers && st->producers[i].id == id;
  uint32_t epoch = known ? st->producers[i].epoch + 1 : 1;
  bool fresh = id == 0 || epoch > META_MAX_PRODUCER_EPOCH ||
               (!known && st->nproducers >= META_MAX_PRODUCER_EPOCHS);
  if (fresh) {
    if (st->producer_ids >= META_MAX_PRODUCER_ID)
      return meta_fail(res, CAIRN_EINVAL, "allocate producer id: every id was handed out");
    st->producer_ids++;
    res->producer_id = st->producer_ids;
    res->producer_epoch = 0;
    return 0;
  }
  if (!known) {
    struct meta_producer *np =
        realloc(st->producers, (st->nproducers + 1) * sizeof *st->producers);
    if (np == NULL)
      return meta_fail(res, CAIRN_ENOMEM, "allocate producer id: out of memory");
    st->producers = np;
    memmove(&st->producers[i + 1], &st->producers[i],
            (st->nproducers - i) * sizeof *st->producers);
    st->nproducers++;
    st->producers[i].id = id;
  }
  st->producers[i].epoch = epoch;
  res->producer_id = id;
  res->producer_epoch = epoch;
  return 0;
}

/* ---- users ---- */

static size_t meta_user_lower_bound(const struct meta_state *st, const char *name)
{
  size_t lo = 0, hi = st->nusers;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (strcmp(st->users[mid].name, name) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

const struct meta_user *meta_user_find(const struct meta_state *st, const char *name)
{
  size_t i = meta_user_lower_bound(st, name);
  return i < st->nusers && strcmp(st->users[i].name, name) == 0 ? &st->users[i] : NULL;
}

/* A credential as it travels in commands and snapshots. */
bool meta_user_cred_ok(const char *name, size_t salt_len, uint32_t iterations, size_t stored_len,
                       size_t server_len)
{
  return name != NULL && scram_user_ok(name) && salt_len >= 1 && salt_len <= SCRAM_SALT_MAX &&
         iterations >= SCRAM_ITERATIONS_MIN && iterations <= SCRAM_ITERATIONS_MAX &&
         stored_len == SCRAM_KEY_LEN && server_len == SCRAM_KEY_LEN;
}

int meta_user_set(struct meta_user *u, const struct meta_user_fields *f)
{
  bool has512 = f->stored_512_len != 0 || f->server_512_len != 0;
  if (!meta_user_cred_ok(f->name, f->salt_len, f->iterations, f->stored_len, f->server_len) ||
      (has512 && (f->stored_512_len != 64 || f->server_512_len != 64)))
    return CAIRN_EINVAL;
  memset(u, 0, sizeof *u);
  snprintf(u->name, sizeof u->name, "%s", f->name);
  struct scram_cred *c = &u->cred;
  c->mech = SCRAM_SHA_256;
  memcpy(c->salt, f->salt, f->salt_len);
  c->salt_len = f->salt_len;
  c->iterations = f->iterations;
  memcpy(c->stored_key, f->stored_key, SCRAM_KEY_LEN);
  memcpy(c->server_key, f->server_key, SCRAM_KEY_LEN);
  if (has512) {
    u->cred512 = *c;
    u->cred512.mech = SCRAM_SHA_512;
    memcpy(u->cred512.stored_key, f->stored_key_512, 64);
    memcpy(u->cred512.server_key, f->server_key_512, 64);
  }
  return 0;
}

void meta_user_fields_of(const struct meta_user *u, struct meta_user_fields *f)
{
  memset(f, 0, sizeof *f);
  f->name = u->name;
  f->salt = u->cred.salt;
  f->salt_len = u->cred.salt_len;
  f->iterations = u->cred.iterations;
  f->stored_key = u->cred.stored_key;
  f->server_key = u->cred.server_key;
  f->stored_len = f->server_len = SCRAM_KEY_LEN;
  if (u->cred512.salt_len != 0) {
    f->stored_key_512 = u->cred512.stored_key;
    f->server_key_512 = u->cred512.server_key;
    f->stored_512_len = f->server_512_len = 64;
  }
}

static int apply_upsert_user(struct meta_state *st, const Cairn__Meta__UpsertUser *u,
                             struct meta_result *res)
{
  struct meta_user made;
  struct meta_user_fields f = {u->name,
                               u->salt.data,
                               u->salt.len,
                               u->iterations,
                               u->stored_key.data,
                               u->server_key.data,
                               u->stored_key.len,
                               u->server_key.len,
                               u->stored_key_512.data,
                               u->server_key_512.data,
                               u->stored_key_512.len,
                               u->server_key_512.len};
  if (meta_user_set(&made, &f) != 0)
    return meta_fail(res, CAIRN_EINVAL, "upsert user: a bad name or credential");
  size_t i = meta_user_lower_bound(st, u->name);
  bool known = i < st->nusers && strcmp(st->users[i].name, u->name) == 0;
  if (!known) {
    if (st->nusers >= META_MAX_USERS)
      return meta_fail(res, CAIRN_EINVAL, "upsert user %s: %u users already", u->name,
                       META_MAX_USERS);
    struct meta_user *nu = realloc(st->users, (st->nusers + 1) * sizeof *st->users);
    if (nu == NULL)
      return meta_fail(res, CAIRN_ENOMEM, "upsert user: out of memory");
    st->users = nu;
    memmove(&st->users[i + 1], &st->users[i], (st->nusers - i) * sizeof *st->users);
    st->nusers++;
  }
  st->users[i] = made;
  return 0;
}

static int apply_delete_user(struct meta_state *st, const Cairn__Meta__DeleteUser *d,
                             struct meta_result *res)
{
  const char *name = d->name != NULL ? d->name : "";
  size_t i = meta_user_lower_bound(st, name);
  if (i >= st->nusers || strcmp(st->users[i].name, name) != 0)
    return meta_fail(res, CAIRN_EUNKNOWN_USER, "delete user: no user '%.64s'", name);
  OPENSSL_cleanse(&st->users[i], sizeof st->users[i]);
  memmove(&st->users[i], &st->users[i + 1], (st->nusers - i - 1) * sizeof *st->users);
  st->nusers--;
  return 0;
}

/* ---- access control entries ---- */

bool meta_acl_ok(const struct meta_acl *a)
{
  size_t pn = strnlen(a->principal, sizeof a->principal);
  size_t rn = strnlen(a->resource, sizeof a->resource);
  if (pn == 0 || pn > META_PRINCIPAL_MAX || rn > META_RESOURCE_MAX ||
      a->operation < META_ACL_READ || a->operation > META_ACL_ALL ||
      a->resource_type < META_ACL_TOPIC || a->resource_type > META_ACL_CLUSTER)
    return false;
  if (a->resource_type == META_ACL_CLUSTER)
    return rn == 0 && !a->prefix;
  return rn > 0 || a->prefix; /* "" with prefix: every topic (or group) */
}

int meta_acl_cmp(const struct meta_acl *a, const struct meta_acl *b)
{
  int c = strcmp(a->principal, b->principal);
  if (c == 0)
    c = (a->resource_type > b->resource_type) - (a->resource_type < b->resource_type);
  if (c == 0)
    c = strcmp(a->resource, b->resource);
  if (c == 0)
    c = (int)a->prefix - (int)b->prefix;
  if (c == 0)
    c = (a->operation > b->operation) - (a->operation < b->operation);
  if (c == 0)
    c = (int)a->allow - (int)b->allow;
  return c;
}

static size_t meta_acl_lower_bound(const struct meta_state *st, const struct meta_acl *a)
{
  size_t lo = 0, hi = st->nacls;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (meta_acl_cmp(&st->acls[mid], a) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The entries of principal: [*lo, *hi) (entries are sorted by principal
 * first, so they are contiguous). */
static void meta_acl_principal_range(const struct meta_state *st, const char *principal,
                                     size_t *lo, size_t *hi)
{
  size_t a = 0, b = st->nacls;
  while (a < b) {
    size_t mid = a + (b - a) / 2;
    if (strcmp(st->acls[mid].principal, principal) < 0)
      a = mid + 1;
    else
      b = mid;
  }
  *lo = a;
  while (a < st->nacls && strcmp(st->acls[a].principal, principal) == 0)
    a++;
  *hi = a;
}

/* -1, 0 or 1 over the entries [lo, hi) (meta_acl_decide). */
static int meta_acl_decide_range(const struct meta_state *st, size_t lo, size_t hi, uint32_t type,
                                 const char *name, uint32_t op)
{
  int decision = 0;
  for (size_t i = lo; i < hi; i++) {
    const struct meta_acl *a = &st->acls[i];
    if (a->resource_type != type || (a->operation != op && a->operation != META_ACL_ALL))
      continue;
    bool match = a->prefix ? strncmp(name, a->resource, strlen(a->resource)) == 0
                           : strcmp(name, a->resource) == 0;
    if (!match)
      continue;
    if (!a->allow)
      return -1; /* a deny wins */
    decision = 1;
  }
  return decision;
}

int meta_acl_decide(const struct meta_state *st, const char *principal, uint32_t type,
                    const char *name, uint32_t op)
{
  /* Only the principal's own entries and those of "*" can match: two
   * binary searches, then a walk over those entries alone. */
  size_t lo, hi;
  meta_acl_principal_range(st, principal, &lo, &hi);
  int own = meta_acl_decide_range(st, lo, hi, type, name, op);
  if (own < 0 || strcmp(principal, "*") == 0)
    return own;
  meta_acl_principal_range(st, "*", &lo, &hi);
  int all = meta_acl_decide_range(st, lo, hi, type, name, op);
  if (all < 0)
    return -1;
  return own > 0 || all > 0 ? 1 : 0;
}

bool meta_acl_allows(const struct meta_state *st, const char *principal, uint32_t type,
                     const char *name, uint32_t op)
{
  return meta_acl_decide(st, principal, type, name, op) > 0;
}

void meta_acl_to_record(const struct meta_acl *a, Cairn__Meta__AclEntry *e)
{
  cairn__meta__acl_entry__init(e);
  e->principal = (char *)a->principal;
  e->resource_type = a->resource_type;
  e->resource = (char *)a->resource;
  e->prefix = a->prefix;
  e->operation = a->operation;
  e->allow = a->allow;
}

bool meta_acl_of_record(const Cairn__Meta__AclEntry *e, struct meta_acl *a)
{
  memset(a, 0, sizeof *a);
  if (e == NULL || e->principal == NULL || e->resource == NULL ||
      strlen(e->principal) > META_PRINCIPAL_MAX || strlen(e->resource) > META_RESOURCE_MAX)
    return false;
  snprintf(a->principal, sizeof a->principal, "%s", e->principal);
  snprintf(a->resource, sizeof a->resource, "%s", e->resource);
  a->resource_type = e->resource_type;
  a->prefix = e->prefix;
  a->operation = e->operation;
  a->allow = e->allow;
  return true;
}

static int apply_acl(struct meta_state *st, const Cairn__Meta__AclEntry *e, bool add,
                     struct meta_result *res)
{
  struct meta_acl a;
  if (!meta_acl_of_record(e, &a) || !meta_acl_ok(&a))
    return meta_fail(res, CAIRN_EINVAL, "acl: a bad principal, resource or operation");
  size_t i = meta_acl_lower_bound(st, &a);
  bool known = i < st->nacls && meta_acl_cmp(&st->acls[i], &a) == 0;
  if (!add) {
    if (!known)
      return meta_fail(res, CAIRN_EUNKNOWN_ACL, "remove acl: no such entry for %s", a.principal);
    memmove(&st->acls[i], &st->acls[i + 1], (st->nacls - i - 1) * sizeof *st->acls);
    st->nacls--;
    return 0;
  }
  if (known)
    return 0; /* already there */
  if (st->nacls >= META_MAX_ACLS)
    return meta_fail(res, CAIRN_EINVAL, "add acl: %u entries already", META_MAX_ACLS);
  struct meta_acl *na = realloc(st->acls, (st->nacls + 1) * sizeof *st->acls);
  if (na == NULL)
    return meta_fail(res, CAIRN_ENOMEM, "add acl: out of memory");
  st->acls = na;
  memmove(&st->acls[i + 1], &st->acls[i], (st->nacls - i) * sizeof *st->acls);
  st->acls[i] = a;
  st->nacls++;
  return 0;
}

int meta_apply(struct meta_state *st, const uint8_t *cmd, size_t len, uint64_t raft_index,
               struct meta_result *res)
{
  memset(res, 0, sizeof *res);
  if (raft_index != 0 && raft_index <= st->last_index)
    return meta_fail(res, CAIRN_EINDEX, "raft index %llu is not after the last applied %llu",
                     (unsigned long long)raft_index, (unsigned long long)st->last_index);
  if (raft_index != 0)
    st->last_index = raft_index;
  if (len > META_CMD_MAX_BYTES)
    return meta_fail(res, CAIRN_ETOOLARGE, "command of %zu bytes", len);
  Cairn__Meta__MetaCommand *m = cairn__meta__meta_command__unpack(NULL, len, cmd);
  if (m == NULL)
    return meta_fail(res, CAIRN_ECORRUPT, "malformed command (%zu bytes)", len);
  int rc;
  if (m->cmd_case != CAIRN__META__META_COMMAND__CMD_BOOTSTRAP && st->cluster_id[0] == '\0') {
    rc = meta_fail(res, CAIRN_EINVAL, "not bootstrapped: the first command must be Bootstrap");
    cairn__meta__meta_command__free_unpacked(m, NULL);
    return rc;
  }
  switch (m->cmd_case) {
  case CAIRN__META__META_COMMAND__CMD_BOOTSTRAP:
    rc = apply_bootstrap(st, m->bootstrap, res);
    break;
  case CAIRN__META__META_COMMAND__CMD_REGISTER_NODE:
    rc = apply_register_node(st, m->register_node, res);
    break;
  case CAIRN__META__META_COMMAND__CMD_SET_NODE_STATE:
    rc = apply_set_node_state(st, m->set_node_state, res);
    break;
  case CAIRN__META__META_COMMAND__CMD_CREATE_TOPIC:
    rc = apply_create_topic(st, m->create_topic, res);
    break;
  case CAIRN__META__META_COMMAND__CMD_DELETE_TOPIC:
    rc = apply_delete_topic(st, m->delete_topic, res);
    break;
  case CAIRN__META__META_COMMAND__CMD_ADD_PARTITIONS:
    rc = apply_add_partitions(st, m->add_partitions, res);
    break;
  case CAIRN__META__META_COMMAND__CMD_ALTER_TOPIC_CONFIG:
    rc = apply_alter_topic_config(st, m->alter_topic_config, res);
    break;
  case CAIRN__META__META_COMMAND__CMD_REPORT_LEADER:
    rc = apply_report_leader(st, m->report_leader, res);
    break;
  case CAIRN__META__META_COMMAND__CMD_SET_REPLICAS:
    rc = apply_set_replicas(st, m->set_replicas, res);
    break;
  case CAIRN__META__META_COMMAND__CMD_ALLOCATE_PRODUCER_ID:
    rc = apply_allocate_producer_id(st, m->allocate_producer_id, res);
    break;
  case CAIRN__META__META_COMMAND__CMD_UPSERT_USER:
    rc = apply_upsert_user(st, m->upsert_user, res);
    break;
  case CAIRN__META__META_COMMAND__CMD_DELETE_USER:
    rc = apply_delete_user(st, m->delete_user, res);
    break;
  case CAIRN__META__META_COMMAND__CMD_ADD_ACL:
    rc = apply_acl(st, m->add_acl->entry, true, res);
    break;
  case CAIRN__META__META_COMMAND__CMD_REMOVE_ACL:
    rc = apply_acl(st, m->remove_acl->entry, false, res);
    break;
  default:
    /* Empty, or a command of a newer version this node does not know. */
    rc = meta_fail(res, CAIRN_EUNSUPPORTED, "unknown command (case %d)", (int)m->cmd_case);
    break;
  }
  cairn__meta__meta_command__free_unpacked(m, NULL);
  res->code = rc;
  return rc;
}
