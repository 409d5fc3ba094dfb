/* group.c - a consumer group's membership state machine and committed
 * offsets (group.h). */
#include "server/group/group.h"

#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const group_state_names[] = {
#define GROUP_STATE_NAME(name, text) text,
    GROUP_STATE_TABLE(GROUP_STATE_NAME)
#undef GROUP_STATE_NAME
};

const char *group_state_name(enum group_state s)
{
  return (unsigned)s < sizeof group_state_names / sizeof group_state_names[0] ? group_state_names[s]
                                                                              : "?";
}

int group_init(struct group *g, const char *name, int32_t generation, uint64_t wall_ms)
{
  memset(g, 0, sizeof *g);
  size_t len = strlen(name);
  if (len == 0 || len > GROUP_NAME_MAX) {
    return CAIRN_EINVAL;
  }
  memcpy(g->name, name, len + 1);
  g->state = GROUP_EMPTY;
  g->generation = generation;
  g->empty_since_wall_ms = wall_ms;
  return 0;
}

static void group_protocols_free(struct group_protocol *v, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    free(v[i].meta);
  }
  free(v);
}

static void group_member_free(struct group_member *m)
{
  free(m->topics);
  free(m->assigned);
  group_protocols_free(m->protocols, m->nprotocols);
  free(m->assignment);
  m->topics = NULL;
  m->assigned = NULL;
  m->protocols = NULL;
  m->nprotocols = 0;
  m->assignment = NULL;
  m->assignment_len = 0;
}

void group_close(struct group *g)
{
  for (size_t i = 0; i < g->nmembers; i++) {
    group_member_free(&g->members[i]);
  }
  free(g->members);
  for (size_t i = 0; i < g->ntopics; i++) {
    free(g->topics[i]);
  }
  free(g->topics);
  free(g->counts);
  for (size_t i = 0; i < g->noffsets; i++) {
    free(g->offsets[i].metadata);
  }
  free(g->offsets);
  memset(g, 0, sizeof *g);
}

void group_actions_free(struct group_actions *a)
{
  free(a->v);
  memset(a, 0, sizeof *a);
}

static int group_act(struct group_actions *a, enum group_action_type type, const char *member_id,
                     int err)
{
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 8;
    struct group_action *v = realloc(a->v, cap * sizeof *v);
    if (v == NULL) {
      return CAIRN_ENOMEM;
    }
    a->v = v;
    a->cap = cap;
  }
  struct group_action *x = &a->v[a->n++];
  x->type = type;
  snprintf(x->member_id, sizeof x->member_id, "%s", member_id);
  x->err = err;
  x->generation = 0;
  x->leader[0] = '\0';
  return 0;
}

/* ---- topics ---- */

long group_topic_index(struct group *g, const char *topic, bool add)
{
  for (size_t i = 0; i < g->ntopics; i++) {
    if (strcmp(g->topics[i], topic) == 0) {
      return (long)i;
    }
  }
  if (!add) {
    return -1;
  }
  if (g->ntopics >= GROUP_MAX_TOPICS) {
    return CAIRN_ETOOLARGE;
  }
  char **topics = realloc(g->topics, (g->ntopics + 1) * sizeof *topics);
  if (topics == NULL) {
    return CAIRN_ENOMEM;
  }
  g->topics = topics;
  uint32_t *counts = realloc(g->counts, (g->ntopics + 1) * sizeof *counts);
  if (counts == NULL) {
    return CAIRN_ENOMEM;
  }
  g->counts = counts;
  char *copy = strdup(topic);
  if (copy == NULL) {
    return CAIRN_ENOMEM;
  }
  g->topics[g->ntopics] = copy;
  g->counts[g->ntopics] = 0;
  return (long)g->ntopics++;
}

/* ---- members ---- */

static struct group_member *group_member_get(struct group *g, const char *member_id)
{
  for (size_t i = 0; i < g->nmembers; i++) {
    if (strcmp(g->members[i].id, member_id) == 0) {
      return &g->members[i];
    }
  }
  return NULL;
}

const struct group_member *group_member_find(const struct group *g, const char *member_id)
{
  return group_member_get((struct group *)g, member_id);
}

/* The member of a static instance, or NULL (instance_id NULL or "" too). */
static struct group_member *group_instance_get(struct group *g, const char *instance_id)
{
  if (instance_id == NULL || instance_id[0] == '\0') {
    return NULL;
  }
  for (size_t i = 0; i < g->nmembers; i++) {
    if (strcmp(g->members[i].instance_id, instance_id) == 0) {
      return &g->members[i];
    }
  }
  return NULL;
}

/* Is instance_id held by a member other than member_id? (Kafka's
 * isStaticMemberFenced: the caller was replaced by a newer instance.) */
static bool group_fenced(struct group *g, const char *member_id, const char *instance_id)
{
  const struct group_member *s = group_instance_get(g, instance_id);
  return s != NULL && strcmp(s->id, member_id) != 0;
}

static void group_member_remove(struct group *g, struct group_member *m)
{
  size_t i = (size_t)(m - g->members);
  group_member_free(m);
  memmove(&g->members[i], &g->members[i + 1], (g->nmembers - i - 1) * sizeof *m);
  g->nmembers--;
  if (strcmp(g->leader, "") != 0 && group_member_get(g, g->leader) == NULL) {
    g->leader[0] = '\0';
  }
}

static bool group_assigned_has(const struct group_member *m, uint32_t t, uint32_t p)
{
  for (size_t i = 0; i < m->nassigned; i++) {
    if (m->assigned[i].topic == t && m->assigned[i].partition == p) {
      return true;
    }
  }
  return false;
}

bool group_member_owns(const struct group *g, const char *member_id, const char *topic,
                       uint32_t partition)
{
  if (member_id[0] == '\0') {
    return true;
  }
  const struct group_member *m = group_member_find(g, member_id);
  if (group_client_assigned(g)) {
    return m != NULL;
  }
  long t = group_topic_index((struct group *)g, topic, false);
  return m != NULL && t >= 0 && group_assigned_has(m, (uint32_t)t, partition);
}

const struct group_member *group_owner(const struct group *g, const char *topic, uint32_t partition)
{
  long t = group_topic_index((struct group *)g, topic, false);
  if (t < 0) {
    return NULL;
  }
  for (size_t i = 0; i < g->nmembers; i++) {
    if (group_assigned_has(&g->members[i], (uint32_t)t, partition)) {
      return &g->members[i];
    }
  }
  return NULL;
}

/* ---- rebalance ---- */

static void group_start_rebalance(struct group *g, uint64_t now_ms)
{
  /* Members whose SYNC waited are answered now (REBALANCE_IN_PROGRESS or
   * the store's error): their sessions restart from this answer. */
  bool waited = g->state == GROUP_COMPLETING || g->state == GROUP_STORING;
  uint32_t longest = 0;
  for (size_t i = 0; i < g->nmembers; i++) {
    if (waited && g->members[i].synced) {
      g->members[i].last_seen_ms = now_ms;
    }
    g->members[i].joining = false;
    if (g->members[i].rebalance_timeout_ms > longest) {
      longest = g->members[i].rebalance_timeout_ms;
    }
  }
  g->state = GROUP_PREPARING;
  g->rebalance_deadline_ms = now_ms + longest;
  g->initial_until_ms = 0;
}

static void group_become_empty(struct group *g, uint64_t wall_ms)
{
  g->state = GROUP_EMPTY;
  g->leader[0] = '\0';
  g->empty_since_wall_ms = wall_ms;
}

/* The assignment of this generation is complete: STORING, and a STORE
 * action for the caller. If the action cannot be queued the group
 * rebalances (it must never wait for a store nobody makes). */
static int group_store(struct group *g, uint64_t now_ms, struct group_actions *acts)
{
  g->state = GROUP_STORING;
  int rv = group_act(acts, GROUP_ACT_STORE, "", 0);
  if (rv != 0) {
    group_start_rebalance(g, now_ms);
    return rv;
  }
  acts->v[acts->n - 1].generation = g->generation;
  return 0;
}

/* The first strategy of the leader's preferences that every member
 * supports; -1 if none. */
static int group_pick_strategy(const struct group *g)
{
  const struct group_member *lead = &g->members[0];
  for (uint32_t k = 0; k < lead->nstrategies; k++) {
    uint8_t s = lead->strategies[k];
    bool all = true;
    for (size_t i = 1; i < g->nmembers && all; i++) {
      bool has = false;
      for (uint32_t j = 0; j < g->members[i].nstrategies; j++) {
        has = has || g->members[i].strategies[j] == s;
      }
      all = has;
    }
    if (all) {
      return s;
    }
  }
  return -1;
}

/* Client-assigned: the first of the leader's protocols that every member
 * offers; -1 if none. */
static int group_pick_protocol(const struct group *g, const struct group_member *lead)
{
  for (size_t k = 0; k < lead->nprotocols; k++) {
    bool all = true;
    for (size_t i = 0; i < g->nmembers && all; i++) {
      bool has = false;
      for (size_t j = 0; j < g->members[i].nprotocols && !has; j++) {
        has = strcmp(g->members[i].protocols[j].name, lead->protocols[k].name) == 0;
      }
      all = has;
    }
    if (all) {
      return (int)k;
    }
  }
  return -1;
}

const struct group_protocol *group_member_protocol(const struct group *g,
                                                   const struct group_member *m)
{
  for (size_t j = 0; j < m->nprotocols; j++) {
    if (strcmp(m->protocols[j].name, g->protocol) == 0) {
      return &m->protocols[j];
    }
  }
  return NULL;
}

/* Finishes the rebalance: drops who did not rejoin, a new generation, the
 * assignment, every waiting join answered. */
static int group_complete(struct group *g, const struct group_env *env, uint64_t now_ms,
                          uint64_t wall_ms, struct group_actions *acts)
{
  for (size_t i = g->nmembers; i-- > 0;) {
    if (!g->members[i].joining) {
      group_member_remove(g, &g->members[i]);
    }
  }
  g->generation++;
  if (g->nmembers == 0) {
    group_become_empty(g, wall_ms);
    return 0;
  }
  for (size_t t = 0; t < g->ntopics; t++) {
    g->counts[t] = env->partitions(env->ctx, g->topics[t]);
  }
  if (group_client_assigned(g)) {
    /* The leader member assigns: the coordinator only picks the protocol. */
    if (g->leader[0] == '\0') {
      snprintf(g->leader, sizeof g->leader, "%s", g->members[0].id);
    }
    int k = group_pick_protocol(g, group_member_get(g, g->leader));
    if (k < 0) {
      k = 0; /* joins keep a common protocol: unreachable */
    }
    snprintf(g->protocol, sizeof g->protocol, "%s",
             group_member_get(g, g->leader)->protocols[k].name);
    g->assigned = false;
    for (size_t i = 0; i < g->nmembers; i++) {
      struct group_member *m = &g->members[i];
      free(m->assignment);
      m->assignment = NULL;
      m->assignment_len = 0;
      m->joining = false;
      m->synced = false;
      m->last_seen_ms = now_ms;
    }
    g->state = GROUP_COMPLETING;
    for (size_t i = 0; i < g->nmembers; i++) {
      int rv = group_act(acts, GROUP_ACT_JOIN_DONE, g->members[i].id, 0);
      if (rv != 0) {
        return rv;
      }
    }
    return 0;
  }
  int s = group_pick_strategy(g);
  if (s < 0) {
    s = ASSIGN_RANGE; /* joins keep a common strategy: unreachable */
  }
  struct assign_member *am = calloc(g->nmembers, sizeof *am);
  if (am == NULL) {
    g->generation--;
    return CAIRN_ENOMEM;
  }
  for (size_t i = 0; i < g->nmembers; i++) {
    am[i].topics = g->members[i].topics;
    am[i].ntopics = g->members[i].ntopics;
    am[i].prev = g->members[i].assigned;
    am[i].nprev = g->members[i].nassigned;
  }
  int rv = assign_run((enum assign_strategy)s, g->counts, g->ntopics, am, g->nmembers);
  if (rv != 0) {
    free(am);
    g->generation--;
    return rv;
  }
  g->strategy = (enum assign_strategy)s;
  if (g->leader[0] == '\0') {
    snprintf(g->leader, sizeof g->leader, "%s", g->members[0].id);
  }
  for (size_t i = 0; i < g->nmembers; i++) {
    struct group_member *m = &g->members[i];
    free(m->assigned);
    m->assigned = am[i].out;
    m->nassigned = am[i].nout;
    m->joining = false;
    m->synced = false;
    m->last_seen_ms = now_ms;
  }
  free(am);
  /* The assignment is known now: kept before any member reads it. */
  rv = group_store(g, now_ms, acts);
  for (size_t i = 0; rv == 0 && i < g->nmembers; i++) {
    rv = group_act(acts, GROUP_ACT_JOIN_DONE, g->members[i].id, 0);
  }
  return rv;
}

static int group_maybe_complete(struct group *g, const struct group_env *env, uint64_t now_ms,
                                uint64_t wall_ms, struct group_actions *acts)
{
  if (g->state != GROUP_PREPARING) {
    return 0;
  }
  bool all = true;
  for (size_t i = 0; i < g->nmembers && all; i++) {
    all = g->members[i].joining;
  }
  if ((all && now_ms >= g->initial_until_ms) || now_ms >= g->rebalance_deadline_ms) {
    return group_complete(g, env, now_ms, wall_ms, acts);
  }
  return 0;
}

/* A member is gone (left or expired): answer its waiting join, rebalance
 * the rest. */
static int group_drop(struct group *g, struct group_member *m, uint64_t now_ms, uint64_t wall_ms,
                      struct group_actions *acts)
{
  int rv = 0;
  if (m->joining) {
    rv = group_act(acts, GROUP_ACT_JOIN_DONE, m->id, CAIRN_EUNKNOWN_MEMBER);
  }
  group_member_remove(g, m);
  if (g->nmembers == 0) {
    if (g->state != GROUP_EMPTY) {
      g->generation++;
    }
    group_become_empty(g, wall_ms);
  } else if (g->state != GROUP_PREPARING) {
    group_start_rebalance(g, now_ms);
  }
  return rv;
}

/* ---- events ---- */

/* Parses the strategies a JOIN offers; 0 known gives
 * CAIRN_EINCONSISTENT_PROTOCOL. */
static int group_parse_strategies(const struct group_event *ev, uint8_t *out, uint32_t *n)
{
  *n = 0;
  for (size_t i = 0; i < ev->nstrategies; i++) {
    int s = assign_strategy_parse(ev->strategies[i]);
    bool dup = false;
    for (uint32_t j = 0; j < *n; j++) {
      dup = dup || out[j] == s;
    }
    if (s >= 0 && !dup) {
      out[(*n)++] = (uint8_t)s;
    }
  }
  return *n > 0 ? 0 : CAIRN_EINCONSISTENT_PROTOCOL;
}

/* Does every other member support one of the strategies offered? */
static bool group_strategies_fit(const struct group *g, const char *self, const uint8_t *offer,
                                 uint32_t noffer)
{
  for (uint32_t k = 0; k < noffer; k++) {
    bool all = true;
    for (size_t i = 0; i < g->nmembers && all; i++) {
      const struct group_member *m = &g->members[i];
      if (strcmp(m->id, self) == 0) {
        continue;
      }
      bool has = false;
      for (uint32_t j = 0; j < m->nstrategies; j++) {
        has = has || m->strategies[j] == offer[k];
      }
      all = has;
    }
    if (all) {
      return true;
    }
  }
  return false;
}

/* Client-assigned JOIN: copies the protocols offered into *out. Returns 0,
 * CAIRN_EINVALID_GROUP (none, too many, a name empty or too long, metadata
 * too large), CAIRN_EINCONSISTENT_PROTOCOL (none in common with the other
 * members) or CAIRN_ENOMEM. */
static int group_copy_protocols(const struct group *g, const struct group_event *ev,
                                const char *self, struct group_protocol **out)
{
  *out = NULL;
  if (ev->nprotocols == 0 || ev->nprotocols > GROUP_MAX_PROTOCOLS) {
    return CAIRN_EINVALID_GROUP;
  }
  bool fits = false;
  for (size_t k = 0; k < ev->nprotocols; k++) {
    const struct group_opaque_in *p = &ev->protocols[k];
    size_t len = p->name != NULL ? strlen(p->name) : 0;
    if (len == 0 || len > GROUP_PROTOCOL_NAME_MAX || p->len > GROUP_OPAQUE_MAX) {
      return CAIRN_EINVALID_GROUP;
    }
    bool all = true;
    for (size_t i = 0; i < g->nmembers && all; i++) {
      const struct group_member *m = &g->members[i];
      if (strcmp(m->id, self) == 0) {
        continue;
      }
      bool has = false;
      for (size_t j = 0; j < m->nprotocols && !has; j++) {
        has = strcmp(m->protocols[j].name, p->name) == 0;
      }
      all = has;
    }
    fits = fits || all;
  }
  if (!fits) {
    return CAIRN_EINCONSISTENT_PROTOCOL;
  }
  struct group_protocol *v = calloc(ev->nprotocols, sizeof *v);
  if (v == NULL) {
    return CAIRN_ENOMEM;
  }
  for (size_t k = 0; k < ev->nprotocols; k++) {
    const struct group_opaque_in *p = &ev->protocols[k];
    snprintf(v[k].name, sizeof v[k].name, "%s", p->name);
    if (p->len > 0) {
      v[k].meta = malloc(p->len);
      if (v[k].meta == NULL) {
        group_protocols_free(v, k);
        return CAIRN_ENOMEM;
      }
      memcpy(v[k].meta, p->data, p->len);
      v[k].len = p->len;
    }
  }
  *out = v;
  return 0;
}

/* A JOIN's checks that need no member: mode, timeouts, subscription,
 * instance id. Returns 0 or the JOIN's error (group_step). */
static int group_join_check(const struct group *g, const struct group_event *ev, uint32_t session,
                            uint32_t rebalance, const char *ptype)
{
  bool client = ptype[0] != '\0';
  if (strlen(ptype) > GROUP_PROTOCOL_NAME_MAX ||
      (ev->instance_id != NULL && strlen(ev->instance_id) > GROUP_INSTANCE_ID_MAX)) {
    return CAIRN_EINVALID_GROUP;
  }
  /* One mode at a time: an empty group takes the mode of its next join. */
  if (g->nmembers > 0 && strcmp(ptype, g->protocol_type) != 0) {
    return CAIRN_EINCONSISTENT_PROTOCOL;
  }
  if (session < GROUP_MIN_SESSION_MS || session > GROUP_MAX_SESSION_MS ||
      rebalance > GROUP_MAX_SESSION_MS || (ev->ntopics == 0 && !client) ||
      ev->ntopics > GROUP_MAX_SUBSCRIPTION ||
      (ev->client_id != NULL && strlen(ev->client_id) > GROUP_CLIENT_ID_MAX)) {
    return CAIRN_EINVALID_GROUP;
  }
  for (size_t i = 0; i < ev->ntopics; i++) {
    size_t len = strlen(ev->topics[i]);
    if (len == 0 || len > GROUP_NAME_MAX) {
      return CAIRN_EINVALID_GROUP;
    }
  }
  return 0;
}

/* The member a JOIN is for: *m the existing one (NULL: a new member),
 * *id the id it has after the join. A first JOIN (member id "") of a
 * known instance takes over that instance's member (*takeover). Returns 0
 * or the JOIN's error. */
static int group_join_member(struct group *g, const struct group_event *ev, struct group_member **m,
                             const char **id, bool *takeover)
{
  bool first = ev->member_id[0] == '\0';
  struct group_member *st = group_instance_get(g, ev->instance_id);
  *takeover = first && st != NULL;
  *id = first ? ev->new_member_id : ev->member_id;
  *m = first ? st : group_member_get(g, ev->member_id);
  if (!first && group_fenced(g, ev->member_id, ev->instance_id)) {
    return CAIRN_EFENCED_INSTANCE;
  }
  bool unknown_instance = ev->instance_id != NULL && ev->instance_id[0] != '\0' && st == NULL;
  if (!first && (*m == NULL || unknown_instance)) {
    return CAIRN_EUNKNOWN_MEMBER; /* Kafka: reset the member id and join again */
  }
  if (first && (*id == NULL || (*id)[0] == '\0' || strlen(*id) > GROUP_MEMBER_ID_MAX ||
                group_member_get(g, *id) != NULL)) {
    return CAIRN_EINVAL;
  }
  if (first && !*takeover && g->nmembers >= GROUP_MAX_MEMBERS) {
    return CAIRN_ETOOLARGE;
  }
  return 0;
}

/* The subscription, interned (topics added stay: harmless): *out owned.
 * Returns the count or a negative code. */
static long group_join_topics(struct group *g, const struct group_event *ev, uint32_t **out)
{
  uint32_t *topics = malloc((ev->ntopics + 1) * sizeof *topics);
  if (topics == NULL) {
    return CAIRN_ENOMEM;
  }
  size_t ntopics = 0;
  for (size_t i = 0; i < ev->ntopics; i++) {
    long t = group_topic_index(g, ev->topics[i], true);
    if (t < 0) {
      free(topics);
      return t;
    }
    bool dup = false;
    for (size_t j = 0; j < ntopics; j++) {
      dup = dup || topics[j] == (uint32_t)t;
    }
    if (!dup) {
      topics[ntopics++] = (uint32_t)t;
    }
  }
  *out = topics;
  return (long)ntopics;
}

static bool group_topics_same(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
  if (na != nb) {
    return false;
  }
  for (size_t i = 0; i < na; i++) {
    bool has = false;
    for (size_t j = 0; j < nb && !has; j++) {
      has = a[i] == b[j];
    }
    if (!has) {
      return false;
    }
  }
  return true;
}

/* Would a restarted static member's JOIN (protocols, topics, strategies
 * offered) leave the current generation's assignment as it is? */
static bool group_join_same(const struct group *g, const struct group_member *m,
                            const struct group_protocol *protocols, size_t nprotocols,
                            const uint32_t *topics, size_t ntopics, const uint8_t *offer,
                            uint32_t noffer)
{
  if (!group_topics_same(m->topics, m->ntopics, topics, ntopics)) {
    return false;
  }
  if (!group_client_assigned(g)) {
    for (uint32_t k = 0; k < noffer; k++) {
      if (offer[k] == g->strategy) {
        return true;
      }
    }
    return false;
  }
  const struct group_protocol *was = group_member_protocol(g, m);
  for (size_t k = 0; was != NULL && k < nprotocols; k++) {
    const struct group_protocol *p = &protocols[k];
    if (strcmp(p->name, g->protocol) == 0) {
      return p->len == was->len && (p->len == 0 || memcmp(p->meta, was->meta, p->len) == 0);
    }
  }
  return false;
}

/* A static member restarted while its group is STABLE, its metadata the
 * same: it goes on in this generation with its assignment, answered at
 * once (naming the leader from before its takeover), and the membership
 * with its new id is stored again (STORING), as Kafka's coordinator
 * stores it, so that a coordinator taking over fences the old id too. */
static int group_takeover_keep(struct group *g, struct group_member *m, const char *prev_leader,
                               uint64_t now_ms, struct group_actions *acts)
{
  m->joining = false;
  m->synced = false;
  int rv = group_store(g, now_ms, acts);
  if (rv == 0) {
    rv = group_act(acts, GROUP_ACT_JOIN_DONE, m->id, 0);
  }
  if (rv == 0) {
    snprintf(acts->v[acts->n - 1].leader, sizeof acts->v[acts->n - 1].leader, "%s", prev_leader);
  }
  return rv;
}

/* The group's state after a member's JOIN: a rebalance starts or goes on
 * (m joining), and may complete at once. */
static int group_join_rebalance(struct group *g, const struct group_env *env,
                                const struct group_event *ev, struct group_member *m,
                                uint32_t rebalance, struct group_actions *acts)
{
  if (g->state == GROUP_EMPTY) {
    g->state = GROUP_PREPARING;
    g->rebalance_deadline_ms = ev->now_ms + rebalance;
    g->initial_until_ms =
        ev->now_ms + (GROUP_INITIAL_DELAY_MS < rebalance ? GROUP_INITIAL_DELAY_MS : rebalance);
  } else if (g->state != GROUP_PREPARING) {
    group_start_rebalance(g, ev->now_ms);
  } else if (g->initial_until_ms != 0) {
    /* A new group still gathering: each join gives the others a moment. */
    uint64_t until = ev->now_ms + GROUP_INITIAL_DELAY_MS;
    g->initial_until_ms = until < g->rebalance_deadline_ms ? until : g->rebalance_deadline_ms;
  }
  if (ev->now_ms + rebalance > g->rebalance_deadline_ms && g->initial_until_ms == 0) {
    g->rebalance_deadline_ms = ev->now_ms + rebalance;
  }
  m->joining = true;
  return group_maybe_complete(g, env, ev->now_ms, ev->wall_ms, acts);
}

static int group_on_join(struct group *g, const struct group_env *env, const struct group_event *ev,
                         struct group_actions *acts)
{
  uint32_t session = ev->session_timeout_ms ? ev->session_timeout_ms : GROUP_DEFAULT_SESSION_MS;
  uint32_t rebalance = ev->rebalance_timeout_ms ? ev->rebalance_timeout_ms : session;
  const char *ptype = ev->protocol_type != NULL ? ev->protocol_type : "";
  bool client = ptype[0] != '\0';
  int rv = group_join_check(g, ev, session, rebalance, ptype);
  uint8_t offer[ASSIGN_NSTRATEGIES];
  uint32_t noffer = 0;
  if (rv == 0 && !client) {
    rv = group_parse_strategies(ev, offer, &noffer);
  }
  struct group_member *m = NULL;
  const char *id = NULL;
  bool takeover = false;
  if (rv == 0) {
    rv = group_join_member(g, ev, &m, &id, &takeover);
  }
  if (rv != 0) {
    return rv;
  }
  /* The fit checks skip the member's own entry (a takeover's old one). */
  const char *self = m != NULL ? m->id : id;
  if (!client && !group_strategies_fit(g, self, offer, noffer)) {
    return CAIRN_EINCONSISTENT_PROTOCOL;
  }
  struct group_protocol *protocols = NULL;
  size_t nprotocols = client ? ev->nprotocols : 0;
  if (client && (rv = group_copy_protocols(g, ev, self, &protocols)) != 0) {
    return rv;
  }
  uint32_t *topics = NULL;
  long ntopics = group_join_topics(g, ev, &topics);
  if (ntopics < 0) {
    group_protocols_free(protocols, nprotocols);
    return (int)ntopics;
  }
  bool same = takeover &&
              group_join_same(g, m, protocols, nprotocols, topics, (size_t)ntopics, offer, noffer);
  if (m == NULL) {
    struct group_member *v = realloc(g->members, (g->nmembers + 1) * sizeof *v);
    if (v == NULL) {
      free(topics);
      group_protocols_free(protocols, nprotocols);
      return CAIRN_ENOMEM;
    }
    g->members = v;
    m = &g->members[g->nmembers++];
    memset(m, 0, sizeof *m);
    snprintf(m->instance_id, sizeof m->instance_id, "%s", ev->instance_id ? ev->instance_id : "");
  }
  char prev_leader[GROUP_MEMBER_ID_MAX + 1];
  snprintf(prev_leader, sizeof prev_leader, "%s", g->leader);
  if (takeover && m->joining) {
    /* The replaced member's JoinGroup still waits: it is fenced now. */
    rv = group_act(acts, GROUP_ACT_JOIN_DONE, m->id, CAIRN_EFENCED_INSTANCE);
    m->joining = false;
  }
  if (takeover && strcmp(g->leader, m->id) == 0) {
    snprintf(g->leader, sizeof g->leader, "%s", id);
  }
  snprintf(m->id, sizeof m->id, "%s", id);
  snprintf(m->client_id, sizeof m->client_id, "%s", ev->client_id ? ev->client_id : "");
  m->session_timeout_ms = session;
  m->rebalance_timeout_ms = rebalance;
  memcpy(m->strategies, offer, sizeof offer);
  m->nstrategies = noffer;
  free(m->topics);
  m->topics = topics;
  m->ntopics = (size_t)ntopics;
  group_protocols_free(m->protocols, m->nprotocols);
  m->protocols = protocols;
  m->nprotocols = nprotocols;
  m->last_seen_ms = ev->now_ms;
  snprintf(g->protocol_type, sizeof g->protocol_type, "%s", ptype);
  if (rv != 0) {
    return rv; /* no room for the fenced join's answer: the client retries */
  }
  if (same && g->state == GROUP_STABLE) {
    return group_takeover_keep(g, m, prev_leader, ev->now_ms, acts);
  }
  return group_join_rebalance(g, env, ev, m, rebalance, acts);
}

/* SYNC and HEARTBEAT: the instance, member and generation checks. */
static int group_fence(struct group *g, const struct group_event *ev, struct group_member **out)
{
  if (group_fenced(g, ev->member_id, ev->instance_id)) {
    return CAIRN_EFENCED_INSTANCE;
  }
  struct group_member *m = group_member_get(g, ev->member_id);
  if (m == NULL) {
    return CAIRN_EUNKNOWN_MEMBER;
  }
  if (ev->generation != g->generation) {
    return CAIRN_EILLEGAL_GENERATION;
  }
  m->last_seen_ms = ev->now_ms;
  if (g->state == GROUP_PREPARING) {
    return CAIRN_EREBALANCE;
  }
  *out = m;
  return 0;
}

static int group_on_tick(struct group *g, const struct group_env *env, const struct group_event *ev,
                         struct group_actions *acts)
{
  int rv = 0;
  /* A member whose SYNC waits for its answer is alive (Kafka's
   * isAwaitingSync): the wait ends with the leader's SYNC, the store or a
   * rebalance, never with this member's silence. */
  bool waiting = g->state == GROUP_COMPLETING || g->state == GROUP_STORING;
  for (size_t i = g->nmembers; i-- > 0;) {
    struct group_member *m = &g->members[i];
    if (!m->joining && !(waiting && m->synced) &&
        ev->now_ms > m->last_seen_ms + m->session_timeout_ms) {
      int r = group_drop(g, m, ev->now_ms, ev->wall_ms, acts);
      rv = rv != 0 ? rv : r;
    }
  }
  if (g->state == GROUP_STABLE || g->state == GROUP_COMPLETING || g->state == GROUP_STORING) {
    for (size_t i = 0; i < g->nmembers; i++) {
      const struct group_member *m = &g->members[i];
      bool changed = false;
      for (size_t k = 0; k < m->ntopics && !changed; k++) {
        uint32_t t = m->topics[k];
        changed = env->partitions(env->ctx, g->topics[t]) != g->counts[t];
      }
      if (changed) {
        group_start_rebalance(g, ev->now_ms);
        break;
      }
    }
  }
  int r = group_maybe_complete(g, env, ev->now_ms, ev->wall_ms, acts);
  return rv != 0 ? rv : r;
}

/* A client-assigned group's leader SYNC: each member's bytes (members it
 * names that are not in the group are ignored, as Kafka does; members it
 * leaves out get none). All or nothing. */
static int group_take_assignments(struct group *g, const struct group_event *ev)
{
  uint8_t **copies = calloc(g->nmembers + 1, sizeof *copies);
  size_t *lens = calloc(g->nmembers + 1, sizeof *lens);
  int rv = copies != NULL && lens != NULL ? 0 : CAIRN_ENOMEM;
  for (size_t k = 0; rv == 0 && k < ev->nassignments; k++) {
    const struct group_opaque_in *a = &ev->assignments[k];
    struct group_member *m = a->name != NULL ? group_member_get(g, a->name) : NULL;
    if (m == NULL || a->len == 0) {
      continue;
    }
    size_t i = (size_t)(m - g->members);
    if (a->len > GROUP_OPAQUE_MAX) {
      rv = CAIRN_ETOOLARGE;
    } else if (copies[i] == NULL) {
      copies[i] = malloc(a->len);
      if (copies[i] == NULL) {
        rv = CAIRN_ENOMEM;
      } else {
        memcpy(copies[i], a->data, a->len);
        lens[i] = a->len;
      }
    }
  }
  for (size_t i = 0; i < g->nmembers && copies != NULL; i++) {
    if (rv == 0) {
      free(g->members[i].assignment);
      g->members[i].assignment = copies[i];
      g->members[i].assignment_len = lens[i];
    } else {
      free(copies[i]);
    }
  }
  free(copies);
  free(lens);
  if (rv == 0) {
    g->assigned = true;
  }
  return rv;
}

/* The outcome of the STORE of ev->generation. */
static void group_on_stored(struct group *g, const struct group_event *ev)
{
  if (g->state != GROUP_STORING || ev->generation != g->generation) {
    return; /* the group moved on while the record was in flight */
  }
  if (ev->err == 0) {
    g->state = GROUP_STABLE;
    for (size_t i = 0; i < g->nmembers; i++) {
      if (g->members[i].synced) {
        g->members[i].last_seen_ms = ev->now_ms; /* answered now */
      }
    }
    return;
  }
  /* Not kept: nobody may use this assignment. The leader assigns again in
   * the next generation. */
  for (size_t i = 0; i < g->nmembers && group_client_assigned(g); i++) {
    free(g->members[i].assignment);
    g->members[i].assignment = NULL;
    g->members[i].assignment_len = 0;
  }
  g->assigned = false;
  group_start_rebalance(g, ev->now_ms);
}

int group_step(struct group *g, const struct group_env *env, const struct group_event *ev,
               struct group_actions *acts)
{
  struct group_member *m = NULL;
  int rv;
  switch (ev->type) {
  case GROUP_EV_JOIN:
    return group_on_join(g, env, ev, acts);
  case GROUP_EV_SYNC:
    rv = group_fence(g, ev, &m);
    if (rv != 0) {
      return rv;
    }
    m->synced = true;
    if (group_client_assigned(g) && g->state == GROUP_COMPLETING && !g->assigned &&
        strcmp(m->id, g->leader) == 0) {
      rv = group_take_assignments(g, ev);
      if (rv != 0) {
        m->synced = false;
        return rv;
      }
      return group_store(g, ev->now_ms, acts);
    }
    return 0;
  case GROUP_EV_STORED:
    group_on_stored(g, ev);
    return 0;
  case GROUP_EV_HEARTBEAT:
    return group_fence(g, ev, &m);
  case GROUP_EV_LEAVE:
    if (ev->member_id[0] != '\0' && group_fenced(g, ev->member_id, ev->instance_id)) {
      return CAIRN_EFENCED_INSTANCE;
    }
    m = ev->member_id[0] != '\0' ? group_member_get(g, ev->member_id)
                                 : group_instance_get(g, ev->instance_id);
    if (m == NULL) {
      return CAIRN_EUNKNOWN_MEMBER;
    }
    rv = group_drop(g, m, ev->now_ms, ev->wall_ms, acts);
    if (rv == 0) {
      rv = group_maybe_complete(g, env, ev->now_ms, ev->wall_ms, acts);
    }
    return rv;
  case GROUP_EV_TICK:
    return group_on_tick(g, env, ev, acts);
  }
  return CAIRN_EINVAL;
}

/* ---- restoring a loaded membership ---- */

static void group_members_clear(struct group *g)
{
  for (size_t i = 0; i < g->nmembers; i++) {
    group_member_free(&g->members[i]);
  }
  free(g->members);
  g->members = NULL;
  g->nmembers = 0;
  g->leader[0] = '\0';
}

static bool group_name_ok(const char *s, size_t max)
{
  return s != NULL && strlen(s) <= max;
}

/* Fills m (zeroed, already counted in g) from sm. */
static int group_restore_member(struct group *g, struct group_member *m,
                                const struct group_snapshot_member *sm, uint64_t now_ms)
{
  const char *inst = sm->instance_id != NULL ? sm->instance_id : "";
  if (!group_name_ok(sm->id, GROUP_MEMBER_ID_MAX) || sm->id[0] == '\0' ||
      group_member_get(g, sm->id) != NULL || !group_name_ok(sm->client_id, GROUP_CLIENT_ID_MAX) ||
      !group_name_ok(inst, GROUP_INSTANCE_ID_MAX) || group_instance_get(g, inst) != NULL ||
      sm->ntopics > GROUP_MAX_SUBSCRIPTION || sm->assignment_len > GROUP_OPAQUE_MAX ||
      sm->metadata_len > GROUP_OPAQUE_MAX) {
    return CAIRN_EINVAL;
  }
  snprintf(m->id, sizeof m->id, "%s", sm->id);
  snprintf(m->client_id, sizeof m->client_id, "%s", sm->client_id);
  snprintf(m->instance_id, sizeof m->instance_id, "%s", inst);
  m->session_timeout_ms =
      sm->session_timeout_ms ? sm->session_timeout_ms : GROUP_DEFAULT_SESSION_MS;
  m->rebalance_timeout_ms = sm->rebalance_timeout_ms;
  m->last_seen_ms = now_ms;
  m->synced = true;
  m->topics = calloc(sm->ntopics + 1, sizeof *m->topics);
  m->assigned = calloc(sm->nassigned + 1, sizeof *m->assigned);
  if (m->topics == NULL || m->assigned == NULL) {
    return CAIRN_ENOMEM;
  }
  for (size_t k = 0; k < sm->ntopics; k++) {
    long t = group_topic_index(g, sm->topics[k], true);
    if (t < 0) {
      return (int)t;
    }
    m->topics[m->ntopics++] = (uint32_t)t;
  }
  for (size_t k = 0; k < sm->nassigned; k++) {
    long t = group_topic_index(g, sm->assigned_topics[k], true);
    if (t < 0) {
      return (int)t;
    }
    m->assigned[m->nassigned++] = (struct assign_tp){(uint32_t)t, sm->assigned_partitions[k]};
  }
  if (sm->assignment_len > 0) {
    m->assignment = malloc(sm->assignment_len);
    if (m->assignment == NULL) {
      return CAIRN_ENOMEM;
    }
    memcpy(m->assignment, sm->assignment, sm->assignment_len);
    m->assignment_len = sm->assignment_len;
  }
  if (group_client_assigned(g)) {
    m->protocols = calloc(1, sizeof *m->protocols);
    if (m->protocols == NULL) {
      return CAIRN_ENOMEM;
    }
    snprintf(m->protocols[0].name, sizeof m->protocols[0].name, "%s", g->protocol);
    m->nprotocols = 1;
    if (sm->metadata_len > 0) {
      m->protocols[0].meta = malloc(sm->metadata_len);
      if (m->protocols[0].meta == NULL) {
        return CAIRN_ENOMEM;
      }
      memcpy(m->protocols[0].meta, sm->metadata, sm->metadata_len);
      m->protocols[0].len = sm->metadata_len;
    }
  } else {
    m->strategies[0] = (uint8_t)g->strategy;
    m->nstrategies = 1;
  }
  return 0;
}

int group_restore(struct group *g, const struct group_snapshot *s, const struct group_env *env,
                  uint64_t now_ms, uint64_t wall_ms)
{
  group_members_clear(g);
  if (s->nmembers == 0) {
    /* Generations continue from the highest used. */
    g->generation = s->generation > g->generation ? s->generation : g->generation;
    group_become_empty(g, wall_ms);
    return 0;
  }
  const char *ptype = s->protocol_type != NULL ? s->protocol_type : "";
  bool client = ptype[0] != '\0';
  if (s->nmembers > GROUP_MAX_MEMBERS || !group_name_ok(ptype, GROUP_PROTOCOL_NAME_MAX) ||
      !group_name_ok(s->protocol, GROUP_PROTOCOL_NAME_MAX) ||
      !group_name_ok(s->leader, GROUP_MEMBER_ID_MAX) || (client && s->protocol[0] == '\0') ||
      (!client && s->strategy >= ASSIGN_NSTRATEGIES)) {
    group_become_empty(g, wall_ms);
    return CAIRN_EINVAL;
  }
  snprintf(g->protocol_type, sizeof g->protocol_type, "%s", ptype);
  snprintf(g->protocol, sizeof g->protocol, "%s", s->protocol);
  snprintf(g->leader, sizeof g->leader, "%s", s->leader);
  g->strategy = (enum assign_strategy)s->strategy;
  g->members = calloc(s->nmembers, sizeof *g->members);
  int rv = g->members != NULL ? 0 : CAIRN_ENOMEM;
  for (size_t i = 0; rv == 0 && i < s->nmembers; i++) {
    g->nmembers++;
    rv = group_restore_member(g, &g->members[i], &s->members[i], now_ms);
  }
  /* A stable group's leader is one of its members: another is damage (a
   * rebalance would look for the leader's protocols and find none). */
  if (rv == 0 && g->leader[0] != '\0' && group_member_get(g, g->leader) == NULL) {
    rv = CAIRN_EINVAL;
  }
  if (rv != 0) {
    group_members_clear(g);
    group_become_empty(g, wall_ms);
    return rv;
  }
  for (size_t t = 0; t < g->ntopics; t++) {
    g->counts[t] = env->partitions(env->ctx, g->topics[t]);
  }
  g->generation = s->generation;
  g->assigned = true;
  g->state = GROUP_STABLE;
  return 0;
}

int group_commit_check(struct group *g, const char *member_id, const char *instance_id,
                       int32_t generation, uint64_t now_ms)
{
  if (member_id[0] == '\0' && generation == -1) {
    return g->nmembers == 0 ? 0 : CAIRN_EUNKNOWN_MEMBER;
  }
  if (group_fenced(g, member_id, instance_id)) {
    return CAIRN_EFENCED_INSTANCE;
  }
  struct group_member *m = group_member_get(g, member_id);
  if (m == NULL) {
    return CAIRN_EUNKNOWN_MEMBER;
  }
  if (generation != g->generation) {
    return CAIRN_EILLEGAL_GENERATION;
  }
  m->last_seen_ms = now_ms;
  return 0;
}

/* ---- offsets ---- */

/* Index of (t, p) in g->offsets, or where it would go (*found false). */
static size_t group_offset_pos(const struct group *g, uint32_t t, uint32_t p, bool *found)
{
  size_t lo = 0, hi = g->noffsets;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    const struct group_offset *o = &g->offsets[mid];
    if (o->topic < t || (o->topic == t && o->partition < p)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  *found = lo < g->noffsets && g->offsets[lo].topic == t && g->offsets[lo].partition == p;
  return lo;
}

int group_offset_set(struct group *g, const char *topic, uint32_t partition, int64_t offset,
                     const char *metadata, int64_t commit_time_ms)
{
  if (strlen(metadata) > GROUP_METADATA_MAX) {
    return CAIRN_ETOOLARGE;
  }
  long t = group_topic_index(g, topic, true);
  if (t < 0) {
    return (int)t;
  }
  char *md = strdup(metadata);
  if (md == NULL) {
    return CAIRN_ENOMEM;
  }
  bool found = false;
  size_t pos = group_offset_pos(g, (uint32_t)t, partition, &found);
  if (!found) {
    if (g->noffsets == g->offsets_cap) {
      size_t cap = g->offsets_cap ? g->offsets_cap * 2 : 16;
      struct group_offset *v = realloc(g->offsets, cap * sizeof *v);
      if (v == NULL) {
        free(md);
        return CAIRN_ENOMEM;
      }
      g->offsets = v;
      g->offsets_cap = cap;
    }
    memmove(&g->offsets[pos + 1], &g->offsets[pos], (g->noffsets - pos) * sizeof *g->offsets);
    g->noffsets++;
    g->offsets[pos].topic = (uint32_t)t;
    g->offsets[pos].partition = partition;
  } else {
    free(g->offsets[pos].metadata);
  }
  g->offsets[pos].offset = offset;
  g->offsets[pos].metadata = md;
  g->offsets[pos].commit_time_ms = commit_time_ms;
  return 0;
}

const struct group_offset *group_offset_find(const struct group *g, const char *topic,
                                             uint32_t partition)
{
  long t = group_topic_index((struct group *)g, topic, false);
  if (t < 0) {
    return NULL;
  }
  bool found = false;
  size_t pos = group_offset_pos(g, (uint32_t)t, partition, &found);
  return found ? &g->offsets[pos] : NULL;
}

void group_offset_delete(struct group *g, const char *topic, uint32_t partition)
{
  long t = group_topic_index(g, topic, false);
  if (t < 0) {
    return;
  }
  bool found = false;
  size_t pos = group_offset_pos(g, (uint32_t)t, partition, &found);
  if (!found) {
    return;
  }
  free(g->offsets[pos].metadata);
  memmove(&g->offsets[pos], &g->offsets[pos + 1], (g->noffsets - pos - 1) * sizeof *g->offsets);
  g->noffsets--;
}

bool group_gone(const struct group *g)
{
  return g->state == GROUP_EMPTY && g->nmembers == 0 && g->noffsets == 0;
}

bool group_expired(const struct group *g, uint64_t wall_ms, uint64_t retention_ms)
{
  if (g->state != GROUP_EMPTY || g->nmembers > 0) {
    return false;
  }
  uint64_t last = g->empty_since_wall_ms;
  for (size_t i = 0; i < g->noffsets; i++) {
    if (g->offsets[i].commit_time_ms > 0 && (uint64_t)g->offsets[i].commit_time_ms > last) {
      last = (uint64_t)g->offsets[i].commit_time_ms;
    }
  }
  return wall_ms >= last + retention_ms;
}
