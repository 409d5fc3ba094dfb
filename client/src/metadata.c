/* metadata.c - the client's cache of nodes, topics and partition leaders,
 * refreshed from any reachable node: the known nodes and the bootstrap
 * list are asked in turn until one answers Metadata. One refresh at a
 * time; callers that arrive during it wait for its outcome. */
#include "internal.h"

#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lc_meta_init(struct lc_meta *m) { memset(m, 0, sizeof *m); }

static void lc_meta_free_topics(struct lc_topic *t, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    free(t[i].name);
    free(t[i].parts);
  }
  free(t);
}

void lc_meta_close(struct lc_meta *m)
{
  lc_meta_free_topics(m->topics, m->ntopics);
  free(m->nodes);
  m->topics = NULL;
  m->nodes = NULL;
  m->ntopics = m->nnodes = 0;
}

/* Candidate i of this refresh: live known nodes first, then the
 * bootstrap addresses. Returns NULL past the end. */
const char *lc_meta_candidate(const struct cairn_client *c, size_t i, size_t *count)
{
  const struct lc_meta *m = &c->meta;
  size_t n = 0;
  const char *found = NULL;
  for (size_t k = 0; k < m->nnodes; k++) {
    if (m->nodes[k].alive && m->nodes[k].addr[0] != '\0') {
      if (n == i) {
        found = m->nodes[k].addr;
      }
      n++;
    }
  }
  for (size_t k = 0; k < c->nbootstrap; k++) {
    if (n == i) {
      found = c->bootstrap[k];
    }
    n++;
  }
  *count = n;
  return found;
}

static void lc_meta_notify(struct cairn_client *c, int status)
{
  struct lc_meta *m = &c->meta;
  struct lc_meta_waiter *w = m->waiters;
  m->waiters = NULL;
  m->refreshing = false;
  m->asking = 0;
  while (w != NULL) {
    struct lc_meta_waiter *next = w->next;
    w->cb(c, status, status == 0 ? "" : m->errmsg, w->data);
    free(w);
    w = next;
  }
}

/* A node behind on the metadata lists fewer topics than exist: the
 * cache's topics that topics[0..nt) lacks are moved over (the cache gives
 * them up). Returns the new count; topics has room for them. */
static size_t lc_meta_carry_over(struct lc_meta *m, struct lc_topic *topics, size_t nt)
{
  size_t listed = nt;
  for (size_t i = 0; i < m->ntopics; i++) {
    struct lc_topic *old = &m->topics[i];
    bool found = false;
    for (size_t k = 0; k < listed && !found; k++) {
      found = strcmp(topics[k].name, old->name) == 0;
    }
    if (!found) {
      topics[nt++] = *old;
      old->name = NULL;
      old->parts = NULL;
    }
  }
  return nt;
}

static void lc_meta_set_part(struct lc_part *part, const Cairn__Client__PartitionInfo *pi)
{
  part->leader_id = pi->leader_id;
  part->nreplicas = 0;
  for (size_t r = 0; r < pi->n_replicas && part->nreplicas < LC_PART_REPLICAS; r++) {
    part->replicas[part->nreplicas++] = pi->replicas[r];
  }
}

/* Replaces the cache with a Metadata answer (of every topic); an answer
 * from a node behind on the metadata (r->behind) adds to it instead of
 * dropping topics and does not count as a fresh refresh. */
int lc_meta_apply(struct cairn_client *c, const Cairn__Client__MetadataResponse *r)
{
  struct lc_meta *m = &c->meta;
  struct lc_node *nodes = calloc(r->n_nodes + 1, sizeof *nodes);
  size_t keep = r->behind ? m->ntopics : 0; /* room for topics carried over */
  struct lc_topic *topics = calloc(r->n_topics + keep + 1, sizeof *topics);
  if (nodes == NULL || topics == NULL) {
    free(nodes);
    free(topics);
    return CAIRN_ENOMEM;
  }
  for (size_t i = 0; i < r->n_nodes; i++) {
    nodes[i].id = r->nodes[i]->id;
    lc_strlcpy(nodes[i].addr, r->nodes[i]->client_address, sizeof nodes[i].addr);
    const char *st = r->nodes[i]->state;
    nodes[i].alive = st == NULL || strcmp(st, "dead") != 0;
  }
  size_t nt = 0;
  for (size_t i = 0; i < r->n_topics; i++) {
    const Cairn__Client__TopicInfo *ti = r->topics[i];
    if ((ti->error != NULL && ti->error->code != CAIRN__CLIENT__ERROR_CODE__OK) ||
        ti->name == NULL) {
      continue;
    }
    struct lc_topic *t = &topics[nt];
    t->count = (int32_t)ti->partition_count;
    t->name = strdup(ti->name);
    t->parts = calloc((size_t)t->count + 1, sizeof *t->parts);
    if (t->name == NULL || t->parts == NULL) {
      free(t->name);
      free(t->parts);
      lc_meta_free_topics(topics, nt);
      free(nodes);
      return CAIRN_ENOMEM;
    }
    for (size_t k = 0; k < ti->n_partitions; k++) {
      uint32_t p = ti->partitions[k]->partition;
      if (p < (uint32_t)t->count) {
        lc_meta_set_part(&t->parts[p], ti->partitions[k]);
      }
    }
    nt++;
  }
  if (r->behind) {
    nt = lc_meta_carry_over(m, topics, nt);
  }
  lc_meta_close(m);
  m->nodes = nodes;
  m->nnodes = r->n_nodes;
  m->topics = topics;
  m->ntopics = nt;
  m->updated_ms = lc_now(c);
  if (r->behind) {
    /* What such a node leaves out may exist: no negative answer rests on
     * it (lc_route's "fresh"), and another node is asked soon. */
    m->stale = true;
    m->cursor++;
  } else {
    m->generation++;
    m->stale = false;
  }
  c->stats.meta_refreshes++;
  return 0;
}

static void lc_meta_ask_next(struct cairn_client *c);

static void lc_meta_on_answer(struct cairn_client *c, int status, Cairn__Client__Envelope *env,
                              const uint8_t *payload, size_t len, struct lc_buf *buf,
                              void *data)
{
  struct lc_meta *m = &c->meta;
  const char *addr = data;
  if (status == UV_ECANCELED && c->closing) {
    free(data);
    lc_meta_notify(c, UV_ECANCELED);
    return;
  }
  char why[LC_ERRMSG_SIZE];
  why[0] = '\0';
  if (status == 0) {
    if (env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_METADATA_RESP) {
      status = CAIRN_EPROTOCOL;
    } else if (env->metadata_resp->error != NULL &&
               env->metadata_resp->error->code != CAIRN__CLIENT__ERROR_CODE__OK) {
      status = lc_wire_err((int)env->metadata_resp->error->code);
    } else {
      status = lc_meta_apply(c, env->metadata_resp);
      if (status == 0) {
        free(data);
        lc_meta_notify(c, 0);
        return;
      }
    }
  }
  lc_fmt(why, sizeof why, "%s: %s", addr, cairn_strerror(status));
  size_t used = strlen(m->errmsg);
  if (used + 3 < sizeof m->errmsg) {
    lc_fmt(m->errmsg + used, sizeof m->errmsg - used, "%s%s", used > 0 ? "; " : "", why);
  }
  free(data);
  if (m->asking != 0) {
    m->asking = 0; /* the preferred node: the usual candidates follow */
  } else {
    m->cursor++;
    m->tried++;
  }
  lc_meta_ask_next(c);
}

/* Sends Metadata to addr (copied); lc_meta_on_answer goes on from
 * there. Returns 0 or the error of sending. */
static int lc_meta_ask(struct cairn_client *c, const char *addr)
{
  char *copy = strdup(addr);
  if (copy == NULL) {
    return CAIRN_ENOMEM;
  }
  Cairn__Client__MetadataRequest mr = CAIRN__CLIENT__METADATA_REQUEST__INIT;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_METADATA;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_METADATA_REQ;
  env.metadata_req = &mr;
  /* A Metadata answer takes a millisecond: a node silent for longer than
   * LC_META_TIMEOUT_MS (paused, cut off) is passed over for the next. */
  uint32_t timeout = c->opts.request_timeout_ms < LC_META_TIMEOUT_MS ? c->opts.request_timeout_ms
                                                                      : LC_META_TIMEOUT_MS;
  int rv = lc_call(c, copy, &env, NULL, 0, timeout, lc_meta_on_answer, copy);
  if (rv != 0) {
    free(copy);
  }
  return rv;
}

static void lc_meta_ask_next(struct cairn_client *c)
{
  struct lc_meta *m = &c->meta;
  if (m->prefer != 0) {
    const char *addr = lc_meta_node_addr(c, m->prefer);
    m->asking = m->prefer;
    m->prefer = 0;
    if (addr != NULL && lc_meta_ask(c, addr) == 0) {
      return;
    }
    m->asking = 0;
  }
  for (;;) {
    size_t count;
    lc_meta_candidate(c, 0, &count);
    if (m->tried >= count || c->closing) {
      char tmp[sizeof m->errmsg];
      lc_strlcpy(tmp, m->errmsg, sizeof tmp);
      lc_fmt(m->errmsg, sizeof m->errmsg, "no node answered Metadata (%s)", tmp);
      lc_meta_notify(c, c->closing ? UV_ECANCELED : CAIRN_EUNREACHABLE);
      return;
    }
    const char *addr = lc_meta_candidate(c, m->cursor % count, &count);
    int rv = lc_meta_ask(c, addr);
    if (rv == CAIRN_ENOMEM) {
      lc_meta_notify(c, rv);
      return;
    }
    if (rv == 0) {
      return;
    }
    m->cursor++;
    m->tried++;
  }
}

int lc_meta_refresh(struct cairn_client *c, lc_meta_cb cb, void *data)
{
  struct lc_meta *m = &c->meta;
  struct lc_meta_waiter *w = calloc(1, sizeof *w);
  if (w == NULL) {
    return CAIRN_ENOMEM;
  }
  w->cb = cb;
  w->data = data;
  w->next = m->waiters;
  m->waiters = w;
  if (!m->refreshing) {
    m->refreshing = true;
    m->tried = 0;
    m->errmsg[0] = '\0';
    lc_meta_ask_next(c);
  }
  return 0;
}

void lc_meta_invalidate(struct cairn_client *c) { c->meta.stale = true; }

void lc_meta_prefer_replica(struct cairn_client *c, const char *topic, int32_t partition,
                            uint64_t avoid)
{
  struct lc_meta *m = &c->meta;
  const struct lc_topic *t = lc_meta_topic(c, topic);
  if (t == NULL || partition < 0 || partition >= t->count) {
    return;
  }
  const struct lc_part *part = &t->parts[partition];
  for (unsigned k = 0; k < part->nreplicas; k++) {
    uint64_t id = part->replicas[(m->prefer_turn + k) % part->nreplicas];
    if (id != avoid && lc_meta_node_addr(c, id) != NULL) {
      m->prefer = id;
      m->prefer_turn += k + 1;
      return;
    }
  }
}

const struct lc_topic *lc_meta_topic(const struct cairn_client *c, const char *name)
{
  for (size_t i = 0; i < c->meta.ntopics; i++) {
    if (strcmp(c->meta.topics[i].name, name) == 0) {
      return &c->meta.topics[i];
    }
  }
  return NULL;
}

uint64_t lc_meta_leader(const struct cairn_client *c, const char *topic, int32_t partition)
{
  const struct lc_topic *t = lc_meta_topic(c, topic);
  if (t == NULL || partition < 0 || partition >= t->count) {
    return 0;
  }
  return t->parts[partition].leader_id;
}

const char *lc_meta_node_addr(const struct cairn_client *c, uint64_t id)
{
  for (size_t i = 0; i < c->meta.nnodes; i++) {
    if (c->meta.nodes[i].id == id) {
      return c->meta.nodes[i].addr[0] != '\0' ? c->meta.nodes[i].addr : NULL;
    }
  }
  return NULL;
}

void lc_meta_set_leader(struct cairn_client *c, const char *topic, int32_t partition,
                        uint64_t leader_id, const char *leader_addr)
{
  struct lc_meta *m = &c->meta;
  for (size_t i = 0; i < m->ntopics; i++) {
    if (strcmp(m->topics[i].name, topic) == 0 && partition >= 0 &&
        partition < m->topics[i].count) {
      m->topics[i].parts[partition].leader_id = leader_id;
    }
  }
  if (leader_id == 0 || leader_addr == NULL || leader_addr[0] == '\0') {
    return;
  }
  for (size_t i = 0; i < m->nnodes; i++) {
    if (m->nodes[i].id == leader_id) {
      lc_strlcpy(m->nodes[i].addr, leader_addr, sizeof m->nodes[i].addr);
      m->nodes[i].alive = true;
      return;
    }
  }
  struct lc_node *nodes = realloc(m->nodes, (m->nnodes + 1) * sizeof *nodes);
  if (nodes == NULL) {
    return; /* the next refresh learns it */
  }
  m->nodes = nodes;
  m->nodes[m->nnodes].id = leader_id;
  lc_strlcpy(m->nodes[m->nnodes].addr, leader_addr, sizeof m->nodes[m->nnodes].addr);
  m->nodes[m->nnodes].alive = true;
  m->nnodes++;
}

static void lc_meta_on_background(struct cairn_client *c, int status, const char *errmsg,
                                  void *data)
{
  (void)c;
  (void)status;
  (void)errmsg;
  (void)data;
}

void lc_meta_tick(struct cairn_client *c)
{
  struct lc_meta *m = &c->meta;
  if (m->refreshing || m->updated_ms == 0) {
    return; /* nothing to refresh before the first use asks */
  }
  uint64_t now = lc_now(c);
  bool old = now - m->updated_ms >= c->opts.metadata_max_age_ms;
  /* A stale cache is refreshed, but not more often than the retry
   * backoff's base, so a dead node does not cause a refresh storm. */
  bool due = m->stale && now - m->updated_ms >= c->opts.retry_backoff_ms;
  if (old || due) {
    m->updated_ms = now; /* paces the next attempt if this one fails */
    (void)lc_meta_refresh(c, lc_meta_on_background, NULL);
  }
}
