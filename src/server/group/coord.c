/* coord.c - the group coordinator's slots, lookups, waiting joins and tick
 * (coord.h). The log side (commits, loading) is in coord_log.c. */
#include "server/group/coord.h"

#include "common/err.h"
#include "common/log.h"
#include "common/wallclock.h"
#include "net/wire_err.h"
#include "server/handle_group.h"
#include "server/handle_target.h"
#include "server/node.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A JoinGroup waiting for its rebalance to complete, or a SyncGroup
 * waiting for its group to be STABLE in its generation (the leader's
 * assignment, then the membership record committed). */
struct coord_join {
  struct coord *c;
  struct conn_request *req;
  bool sync;          /* a SyncGroup */
  int32_t generation; /* sync: the generation it synced */
  uint32_t partition;
  char group[GROUP_NAME_MAX + 1];
  char member[GROUP_MEMBER_ID_MAX + 1];
  struct coord_join *prev, *next;
};

static void coord_settle_syncs(struct coord *c, const struct coord_slot *slot, struct group *g);
static void coord_after_step(struct coord *c, struct coord_slot *slot, struct group *g,
                             enum group_state before, const struct group_actions *acts);

static uint64_t coord_wall_ms(void)
{
  return (uint64_t)wallclock_ms();
}

void coord_event_clock(struct coord *c, struct group_event *ev)
{
  ev->now_ms = uv_now(c->n->loop);
  ev->wall_ms = coord_wall_ms();
}

uint32_t coord_partition_of(const char *group, uint32_t npartitions)
{
  uint32_t h = 2166136261u;
  for (const unsigned char *p = (const unsigned char *)group; *p != '\0'; p++) {
    h ^= *p;
    h *= 16777619u;
  }
  return npartitions > 0 ? h % npartitions : 0;
}

uint32_t coord_topic_partitions(void *node, const char *topic)
{
  struct node *n = node;
  const struct meta_topic *t = meta_topic_find(ctl_state(&n->ctl), topic);
  return t != NULL ? t->npartitions : 0;
}

/* ---- waiting joins ---- */

static void coord_join_unlink(struct coord *c, struct coord_join *j)
{
  if (j->prev != NULL) {
    j->prev->next = j->next;
  } else {
    c->joins = j->next;
  }
  if (j->next != NULL) {
    j->next->prev = j->prev;
  }
  j->prev = j->next = NULL;
}

static void coord_join_on_cancel(struct conn_request *req)
{
  struct coord_join *j = req->handler_data;
  coord_join_unlink(j->c, j);
  free(j);
  req->handler_data = NULL;
  conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN, "connection closing");
}

void coord_answer_sync(struct group *g, const char *member_id, int err, struct conn_request *req)
{
  Cairn__Client__Error e = CAIRN__CLIENT__ERROR__INIT;
  e.code = wire_err_from(err);
  e.message = err != 0 ? (char *)cairn_strerror(err) : "";
  Cairn__Client__SyncGroupResponse resp = CAIRN__CLIENT__SYNC_GROUP_RESPONSE__INIT;
  resp.error = &e;
  const struct group_member *m = err == 0 ? group_member_find(g, member_id) : NULL;
  Cairn__Client__TopicPartitions **tps = NULL;
  size_t ntps = 0;
  if (m != NULL && !group_client_assigned(g)) {
    int rv = handle_group_tps(g, m->assigned, m->nassigned, &tps, &ntps);
    if (rv != 0) {
      e.code = wire_err_from(rv);
      e.message = (char *)cairn_strerror(rv);
    }
  }
  if (m != NULL && group_client_assigned(g)) {
    resp.assignment_data.data = m->assignment;
    resp.assignment_data.len = m->assignment_len;
  }
  resp.assignment = tps;
  resp.n_assignment = ntps;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_SYNC_GROUP_RESP;
  env.sync_group_resp = &resp;
  conn_respond(req, &env, NULL, 0);
  handle_group_tps_free(tps, ntps);
}

static void coord_join_respond_error(struct conn_request *req, bool sync, int err,
                                     const char *message)
{
  if (sync) {
    Cairn__Client__Error e = CAIRN__CLIENT__ERROR__INIT;
    e.code = wire_err_from(err);
    e.message = (char *)message;
    Cairn__Client__SyncGroupResponse resp = CAIRN__CLIENT__SYNC_GROUP_RESPONSE__INIT;
    resp.error = &e;
    Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_SYNC_GROUP_RESP;
    env.sync_group_resp = &resp;
    req->handler_data = NULL;
    conn_respond(req, &env, NULL, 0);
    return;
  }
  req->handler_data = NULL;
  Cairn__Client__Error e = CAIRN__CLIENT__ERROR__INIT;
  e.code = wire_err_from(err);
  e.message = (char *)message;
  Cairn__Client__JoinGroupResponse resp = CAIRN__CLIENT__JOIN_GROUP_RESPONSE__INIT;
  resp.error = &e;
  resp.generation = -1;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_JOIN_GROUP_RESP;
  env.join_group_resp = &resp;
  conn_respond(req, &env, NULL, 0);
}

void coord_answer_join(struct coord *c, struct group *g, const char *member_id, const char *leader,
                       int err, struct conn_request *req)
{
  (void)c;
  if (err != 0) {
    coord_join_respond_error(req, false, err, cairn_strerror(err));
    return;
  }
  size_t nm = g->nmembers;
  Cairn__Client__GroupMember *mv = calloc(nm + 1, sizeof *mv);
  Cairn__Client__GroupMember **mp = calloc(nm + 1, sizeof *mp);
  char ***topics = calloc(nm + 1, sizeof *topics);
  bool ok = mv != NULL && mp != NULL && topics != NULL;
  for (size_t i = 0; ok && i < nm; i++) {
    const struct group_member *m = &g->members[i];
    cairn__client__group_member__init(&mv[i]);
    mp[i] = &mv[i];
    mv[i].member_id = (char *)m->id;
    mv[i].client_id = (char *)m->client_id;
    mv[i].group_instance_id = (char *)m->instance_id;
    mv[i].session_timeout_ms = m->session_timeout_ms;
    const struct group_protocol *gp = group_client_assigned(g) ? group_member_protocol(g, m) : NULL;
    if (gp != NULL) {
      mv[i].metadata.data = gp->meta;
      mv[i].metadata.len = gp->len;
    }
    topics[i] = calloc(m->ntopics + 1, sizeof *topics[i]);
    ok = topics[i] != NULL;
    for (size_t k = 0; ok && k < m->ntopics; k++) {
      topics[i][k] = g->topics[m->topics[k]];
    }
    mv[i].topics = topics[i];
    mv[i].n_topics = m->ntopics;
  }
  if (!ok) {
    coord_join_respond_error(req, false, CAIRN_ENOMEM, cairn_strerror(CAIRN_ENOMEM));
  } else {
    Cairn__Client__Error e = CAIRN__CLIENT__ERROR__INIT;
    Cairn__Client__JoinGroupResponse resp = CAIRN__CLIENT__JOIN_GROUP_RESPONSE__INIT;
    resp.error = &e;
    resp.generation = g->generation;
    resp.member_id = (char *)member_id;
    resp.leader_id = leader != NULL && leader[0] != '\0' ? (char *)leader : g->leader;
    resp.strategy =
        group_client_assigned(g) ? g->protocol : (char *)assign_strategy_name(g->strategy);
    resp.protocol_type = g->protocol_type;
    resp.members = mp;
    resp.n_members = nm;
    Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_JOIN_GROUP_RESP;
    env.join_group_resp = &resp;
    conn_respond(req, &env, NULL, 0);
  }
  for (size_t i = 0; topics != NULL && i < nm; i++) {
    free(topics[i]);
  }
  free(topics);
  free(mv);
  free(mp);
}

int coord_park_join(struct coord *c, struct coord_slot *slot, struct group *g,
                    const char *member_id, struct conn_request *req)
{
  /* A member joining again while a join of its own waits: the older one is
   * answered (the client gave up on it). */
  for (struct coord_join *j = c->joins; j != NULL; j = j->next) {
    if (j->partition == slot->partition && strcmp(j->group, g->name) == 0 &&
        strcmp(j->member, member_id) == 0) {
      coord_join_unlink(c, j);
      coord_join_respond_error(j->req, j->sync, CAIRN_EREBALANCE,
                               "superseded by a newer request of the same member");
      free(j);
      break;
    }
  }
  struct coord_join *j = calloc(1, sizeof *j);
  if (j == NULL) {
    return CAIRN_ENOMEM;
  }
  j->c = c;
  j->req = req;
  j->partition = slot->partition;
  snprintf(j->group, sizeof j->group, "%s", g->name);
  snprintf(j->member, sizeof j->member, "%s", member_id);
  j->next = c->joins;
  if (c->joins != NULL) {
    c->joins->prev = j;
  }
  c->joins = j;
  req->handler_data = j;
  conn_request_set_cancel(req, coord_join_on_cancel);
  return 0;
}

void coord_unpark_join(struct coord *c, struct conn_request *req)
{
  struct coord_join *j = req->handler_data;
  if (j == NULL) {
    return;
  }
  coord_join_unlink(c, j);
  free(j);
  req->handler_data = NULL;
  conn_request_set_cancel(req, NULL);
}

/* Answers the waiting join of (slot, group, member), if any, with a
 * JOIN_DONE action's outcome. */
static void coord_finish_join(struct coord *c, struct coord_slot *slot, struct group *g,
                              const struct group_action *a)
{
  const char *member_id = a->member_id;
  for (struct coord_join *j = c->joins; j != NULL; j = j->next) {
    if (!j->sync && j->partition == slot->partition && strcmp(j->group, g->name) == 0 &&
        strcmp(j->member, member_id) == 0) {
      coord_join_unlink(c, j);
      struct conn_request *req = j->req;
      free(j);
      req->handler_data = NULL;
      coord_answer_join(c, g, member_id, a->leader, a->err, req);
      return;
    }
  }
}

/* Answers every waiting join of slot (every slot: NULL) with err. */
static void coord_fail_joins(struct coord *c, const struct coord_slot *slot, int err,
                             const char *message)
{
  struct coord_join *j = c->joins;
  while (j != NULL) {
    struct coord_join *next = j->next;
    if (slot == NULL || j->partition == slot->partition) {
      coord_join_unlink(c, j);
      coord_join_respond_error(j->req, j->sync, err, message);
      free(j);
    }
    j = next;
  }
}

/* An emptied group's membership (none) goes to the log, as Kafka writes
 * its GroupMetadata then: nothing waits for it. (A group's assignment is
 * kept by a STORE action, which its members' SyncGroups wait for.) */
static void coord_keep_empty(struct coord *c, struct coord_slot *slot, const struct group *g,
                             enum group_state before)
{
  if (g->state != GROUP_EMPTY || before == GROUP_EMPTY) {
    return;
  }
  int rv = coord_append_group(c, slot, g, NULL, NULL);
  if (rv != 0) {
    log_warn("coord", "group %s: keeping it empty (generation %" PRId32 "): %s", g->name,
             g->generation, cairn_strerror(rv));
  }
}

/* A STORE in flight: which group's which generation it keeps. */
struct coord_store {
  struct coord *c;
  uint32_t partition;
  uint64_t epoch; /* the slot's: an unload in between answered its syncs */
  int32_t generation;
  char group[GROUP_NAME_MAX + 1];
};

/* Answers the parked SyncGroups of g with err. */
static void coord_fail_syncs(struct coord *c, const struct coord_slot *slot, const struct group *g,
                             int err)
{
  struct coord_join *j = c->joins;
  while (j != NULL) {
    struct coord_join *next = j->next;
    if (j->sync && j->partition == slot->partition && strcmp(j->group, g->name) == 0) {
      coord_join_unlink(c, j);
      coord_join_respond_error(j->req, true, err, cairn_strerror(err));
      free(j);
    }
    j = next;
  }
}

/* Feeds g the outcome of its STORE of generation (0: committed). */
static void coord_stored(struct coord *c, struct coord_slot *slot, struct group *g,
                         int32_t generation, int err)
{
  struct group_event ev = {
      .type = GROUP_EV_STORED, .member_id = "", .generation = generation, .err = err};
  coord_event_clock(c, &ev);
  int rv = coord_step(c, slot, g, &ev);
  if (rv != 0) { /* STORED has no refusal: unreachable */
    log_warn("coord", "group %s: the store of generation %" PRId32 ": %s", g->name, generation,
             cairn_strerror(rv));
  }
}

/* The store of generation failed with err: its waiting SyncGroups get the
 * error (Kafka: NOT_COORDINATOR when this node cannot append, the append's
 * own error otherwise) and the group rebalances. */
static void coord_store_failed(struct coord *c, struct coord_slot *slot, struct group *g,
                               int32_t generation, int err)
{
  log_warn("coord", "group %s: keeping generation %" PRId32 ": %s: rebalancing", g->name,
           generation, cairn_strerror(err));
  if (g->state == GROUP_STORING && g->generation == generation) {
    coord_fail_syncs(c, slot, g, err == CAIRN_ENOTLEADER ? CAIRN_ENOT_COORDINATOR : err);
  }
  coord_stored(c, slot, g, generation, err);
}

static void coord_on_stored(void *data, int status)
{
  struct coord_store *st = data;
  struct coord *c = st->c;
  struct coord_slot *slot = st->partition < c->nslots ? &c->slots[st->partition] : NULL;
  /* A failed append unloads the slot first (coord_on_produced): its syncs
   * were answered NOT_COORDINATOR then, and its groups are gone. */
  struct group *g = NULL;
  if (!c->closing && slot != NULL && slot->epoch == st->epoch) {
    g = coord_group(slot, st->group, false);
  }
  if (g != NULL && status != 0) {
    coord_store_failed(c, slot, g, st->generation, status);
  } else if (g != NULL) {
    coord_stored(c, slot, g, st->generation, 0);
  }
  free(st);
}

/* A STORE action: g's membership of generation to the log; its SyncGroups
 * are answered when the record commits (coord_on_stored). */
static void coord_store(struct coord *c, struct coord_slot *slot, struct group *g,
                        int32_t generation)
{
  if (g->state != GROUP_STORING || g->generation != generation) {
    return; /* overtaken within the same step */
  }
  struct coord_store *st = calloc(1, sizeof *st);
  int rv = CAIRN_ENOMEM;
  if (st != NULL) {
    st->c = c;
    st->partition = slot->partition;
    st->epoch = slot->epoch;
    st->generation = generation;
    snprintf(st->group, sizeof st->group, "%s", g->name);
    rv = coord_append_group(c, slot, g, coord_on_stored, st);
  }
  if (rv != 0) {
    free(st);
    coord_store_failed(c, slot, g, generation, rv);
  }
}

/* What follows every group_step: the empty record, the finished joins'
 * answers, the STORE actions, then the parked syncs that can be answered. */
static void coord_after_step(struct coord *c, struct coord_slot *slot, struct group *g,
                             enum group_state before, const struct group_actions *acts)
{
  coord_keep_empty(c, slot, g, before);
  for (size_t i = 0; i < acts->n; i++) {
    if (acts->v[i].type == GROUP_ACT_JOIN_DONE) {
      coord_finish_join(c, slot, g, &acts->v[i]);
    }
  }
  for (size_t i = 0; i < acts->n; i++) {
    if (acts->v[i].type == GROUP_ACT_STORE) {
      coord_store(c, slot, g, acts->v[i].generation);
    }
  }
  coord_settle_syncs(c, slot, g);
}

int coord_step(struct coord *c, struct coord_slot *slot, struct group *g, struct group_event *ev)
{
  struct group_env env = {.partitions = coord_topic_partitions, .ctx = c->n};
  struct group_actions acts = {0};
  enum group_state before = g->state;
  int rv = group_step(g, &env, ev, &acts);
  coord_after_step(c, slot, g, before, &acts);
  group_actions_free(&acts);
  return rv;
}

int coord_sync(struct coord *c, struct coord_slot *slot, struct group *g, struct group_event *ev,
               struct conn_request *req)
{
  struct group_env env = {.partitions = coord_topic_partitions, .ctx = c->n};
  struct group_actions acts = {0};
  enum group_state before = g->state;
  int rv = group_step(g, &env, ev, &acts);
  if (rv == 0 && g->state == GROUP_STABLE) {
    coord_answer_sync(g, ev->member_id, 0, req);
  } else if (rv == 0) {
    /* Parked before the actions run: a store failing at once answers it. */
    rv = coord_park_sync(c, slot, g, ev->member_id, req);
  }
  coord_after_step(c, slot, g, before, &acts);
  group_actions_free(&acts);
  return rv;
}

int coord_park_sync(struct coord *c, struct coord_slot *slot, struct group *g,
                    const char *member_id, struct conn_request *req)
{
  int rv = coord_park_join(c, slot, g, member_id, req);
  if (rv == 0) {
    struct coord_join *j = req->handler_data;
    j->sync = true;
    j->generation = g->generation;
  }
  return rv;
}

/* Answers the parked syncs of g that can be: with the assignment once the
 * group is STABLE in their generation (the record committed),
 * REBALANCE_IN_PROGRESS once that generation is over or rebalancing,
 * UNKNOWN_MEMBER for a member gone. */
static void coord_settle_syncs(struct coord *c, const struct coord_slot *slot, struct group *g)
{
  struct coord_join *j = c->joins;
  while (j != NULL) {
    struct coord_join *next = j->next;
    if (j->sync && j->partition == slot->partition && strcmp(j->group, g->name) == 0) {
      int err = -1; /* still waiting */
      if (group_member_find(g, j->member) == NULL) {
        err = CAIRN_EUNKNOWN_MEMBER;
      } else if (j->generation == g->generation && g->state == GROUP_STABLE) {
        err = 0;
      } else if (j->generation != g->generation ||
                 (g->state != GROUP_COMPLETING && g->state != GROUP_STORING)) {
        err = CAIRN_EREBALANCE;
      }
      if (err == 0) {
        coord_join_unlink(c, j);
        struct conn_request *req = j->req;
        req->handler_data = NULL;
        conn_request_set_cancel(req, NULL);
        coord_answer_sync(g, j->member, 0, req);
        free(j);
      } else if (err != -1) {
        coord_join_unlink(c, j);
        coord_join_respond_error(j->req, j->sync, err, cairn_strerror(err));
        free(j);
      }
    }
    j = next;
  }
}

/* ---- slots and groups ---- */

struct group *coord_group(struct coord_slot *slot, const char *name, bool create)
{
  for (size_t i = 0; i < slot->ngroups; i++) {
    if (strcmp(slot->groups[i]->name, name) == 0) {
      return slot->groups[i];
    }
  }
  if (!create) {
    return NULL;
  }
  struct group **v = realloc(slot->groups, (slot->ngroups + 1) * sizeof *v);
  if (v == NULL) {
    return NULL;
  }
  slot->groups = v;
  struct group *g = malloc(sizeof *g);
  if (g == NULL || group_init(g, name, 0, coord_wall_ms()) != 0) {
    free(g);
    return NULL;
  }
  slot->groups[slot->ngroups++] = g;
  return g;
}

static void coord_drop_group(struct coord_slot *slot, size_t i)
{
  group_close(slot->groups[i]);
  free(slot->groups[i]);
  slot->groups[i] = slot->groups[--slot->ngroups];
}

void coord_unload(struct coord *c, struct coord_slot *slot, const char *why)
{
  if (slot->state != COORD_UNLOADED) {
    log_info("coord", "%s/%" PRIu32 ": no longer coordinating (%s)", COORD_OFFSETS_TOPIC,
             slot->partition, why);
  }
  coord_fail_joins(c, slot, CAIRN_ENOT_COORDINATOR, "the coordinator moved: FindCoordinator");
  while (slot->ngroups > 0) {
    coord_drop_group(slot, slot->ngroups - 1);
  }
  free(slot->groups);
  slot->groups = NULL;
  slot->state = COORD_UNLOADED;
  slot->epoch++;
}

static int coord_ensure_slots(struct coord *c, uint32_t n)
{
  if (n <= c->nslots) {
    return 0;
  }
  struct coord_slot *v = realloc(c->slots, n * sizeof *v);
  if (v == NULL) {
    return CAIRN_ENOMEM;
  }
  for (size_t i = c->nslots; i < n; i++) {
    memset(&v[i], 0, sizeof v[i]);
    v[i].partition = (uint32_t)i;
  }
  c->slots = v;
  c->nslots = n;
  return 0;
}

/* ---- the offsets topic's creation ---- */

struct coord_create {
  struct coord *c;
  struct ctl_propose prop;
  struct peer_call call;
};

static void coord_created(struct coord *c, int status, int code, const char *what)
{
  c->creating = false;
  if (status != 0 || (code != 0 && code != CAIRN_ETOPIC_EXISTS)) {
    c->create_after_ms = uv_now(c->n->loop) + 1000;
    log_warn("coord", "creating %s: %s", COORD_OFFSETS_TOPIC,
             status != 0 ? cairn_strerror(status) : what);
  }
}

static void coord_on_create_applied(struct ctl_propose *prop, int status,
                                    const struct meta_result *res)
{
  struct coord_create *cc = prop->data;
  coord_created(cc->c, status, res != NULL ? res->code : 0, res != NULL ? res->msg : "?");
  free(cc);
}

static void coord_on_create_answer(struct peer_call *call, int status,
                                   const Cairn__Client__Envelope *resp, const uint8_t *payload,
                                   size_t payload_len)
{
  (void)payload;
  (void)payload_len;
  struct coord_create *cc = call->data;
  int code = 0;
  const char *msg = "?";
  if (status == 0 && resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP &&
      resp->create_topic_resp->error != NULL) {
    Cairn__Client__ErrorCode w = resp->create_topic_resp->error->code;
    code = w == CAIRN__CLIENT__ERROR_CODE__OK             ? 0
           : w == CAIRN__CLIENT__ERROR_CODE__TOPIC_EXISTS ? CAIRN_ETOPIC_EXISTS
                                                          : CAIRN_EREMOTE;
    msg = resp->create_topic_resp->error->message;
  } else if (status == 0 && resp->body_case != CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP) {
    code = CAIRN_EREMOTE;
    msg = "the controller leader answered something else";
  }
  if (!cc->c->closing) {
    coord_created(cc->c, status, code, msg);
  }
  free(cc);
}

/* The replication factor __cairn_offsets is created with: the configured
 * one, else 3 or the number of nodes the cluster has (not removed) if
 * smaller. Never the alive count: a node down at that moment would leave
 * the groups' offsets with fewer copies for good. */
static uint32_t coord_offsets_rf(const struct node *n)
{
  if (n->cfg.offsets_replication_factor != 0) {
    return n->cfg.offsets_replication_factor;
  }
  const struct meta_state *st = ctl_state(&n->ctl);
  uint32_t nodes = 0;
  for (size_t i = 0; i < st->nnodes; i++) {
    nodes += st->nodes[i].state != META_NODE_REMOVED;
  }
  return nodes < 3 ? nodes : 3;
}

/* Asks the controller leader to create __cairn_offsets with
 * offsets_partitions partitions and coord_offsets_rf() replicas, once that
 * many nodes are alive. */
static void coord_create_offsets(struct coord *c)
{
  struct node *n = c->n;
  if (c->creating || c->closing || uv_now(n->loop) < c->create_after_ms) {
    return;
  }
  uint32_t alive = meta_alive_count(ctl_state(&n->ctl));
  uint32_t rf = coord_offsets_rf(n);
  if (rf == 0 || alive < rf) {
    if (rf != 0) {
      log_warn("coord",
               "%s needs %" PRIu32 " alive nodes for its replicas, %" PRIu32 " are: waiting",
               COORD_OFFSETS_TOPIC, rf, alive);
    }
    c->create_after_ms = uv_now(n->loop) + 1000;
    return;
  }
  struct coord_create *cc = calloc(1, sizeof *cc);
  if (cc == NULL) {
    return;
  }
  cc->c = c;
  int rv;
  if (ctl_is_leader(&n->ctl)) {
    uint8_t *cmd = NULL;
    size_t len = 0;
    rv =
        meta_cmd_create_topic(COORD_OFFSETS_TOPIC, n->cfg.offsets_partitions, rf, NULL, &cmd, &len);
    if (rv == 0) {
      cc->prop.data = cc;
      rv = ctl_propose(&n->ctl, &cc->prop, cmd, len, coord_on_create_applied);
      free(cmd);
    }
  } else {
    uint64_t id = 0;
    const char *cluster_addr = NULL;
    ctl_leader(&n->ctl, &id, &cluster_addr);
    const char *addr = id != 0 ? node_client_address(n, id) : NULL;
    rv = CAIRN_ENOT_CONTROLLER;
    if (addr != NULL) {
      Cairn__Client__CreateTopicRequest ct = CAIRN__CLIENT__CREATE_TOPIC_REQUEST__INIT;
      ct.name = COORD_OFFSETS_TOPIC;
      ct.partitions = n->cfg.offsets_partitions;
      ct.replication_factor = rf;
      Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
      env.api = CAIRN__CLIENT__API__API_CREATE_TOPIC;
      env.api_version = 1;
      env.forwarded = 1; /* the controller leader serves it, never forwards */
      env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_REQ;
      env.create_topic_req = &ct;
      cc->call.data = cc;
      rv = peer_call(&n->peer, addr, &cc->call, &env, NULL, 0, NODE_RPC_TIMEOUT_MS,
                     coord_on_create_answer);
    }
  }
  if (rv != 0) {
    free(cc);
    c->create_after_ms = uv_now(n->loop) + 1000;
    return;
  }
  c->creating = true;
  log_info("coord", "creating %s: %u partitions, %" PRIu32 " replicas", COORD_OFFSETS_TOPIC,
           n->cfg.offsets_partitions, rf);
}

/* ---- lookup ---- */

int coord_lookup(struct coord *c, const char *group, struct coord_slot **slot, uint64_t *leader_id,
                 const char **leader_address)
{
  struct node *n = c->n;
  *slot = NULL;
  *leader_id = 0;
  *leader_address = NULL;
  size_t len = strlen(group);
  if (len == 0 || len > GROUP_NAME_MAX) {
    return CAIRN_EINVALID_GROUP;
  }
  if (n->state != NODE_RUNNING || c->closing) {
    return CAIRN_ESHUTDOWN;
  }
  const struct meta_topic *t = meta_topic_find(ctl_state(&n->ctl), COORD_OFFSETS_TOPIC);
  if (t == NULL) {
    coord_create_offsets(c);
    return CAIRN_ECOORDINATOR_LOADING;
  }
  uint32_t k = coord_partition_of(group, t->npartitions);
  if (coord_ensure_slots(c, t->npartitions) != 0) {
    return CAIRN_ENOMEM;
  }
  struct handle_target tg;
  handle_find_leader(n, COORD_OFFSETS_TOPIC, k, &tg);
  if (tg.code == CAIRN__CLIENT__ERROR_CODE__OK) {
    struct coord_slot *s = &c->slots[k];
    if (s->state != COORD_LOADED || s->term != tg.p->rg.raft.current_term) {
      coord_load_step(c, s);
      return CAIRN_ECOORDINATOR_LOADING;
    }
    *slot = s;
    return 0;
  }
  if (tg.code == CAIRN__CLIENT__ERROR_CODE__REPLICA_NOT_AVAILABLE) {
    return CAIRN_ECOORDINATOR_LOADING;
  }
  *leader_id = tg.leader_id;
  *leader_address = tg.leader_id != 0 ? node_client_address(n, tg.leader_id) : NULL;
  return CAIRN_ENOT_COORDINATOR;
}

/* ---- the tick ---- */

static void coord_expire(struct coord *c, struct coord_slot *slot, uint64_t wall)
{
  for (size_t i = 0; i < slot->ngroups; i++) {
    struct group *g = slot->groups[i];
    if (g->dropping || !group_expired(g, wall, c->n->cfg.offsets_retention_ms)) {
      continue;
    }
    size_t n = g->noffsets;
    struct coord_record *recs = calloc(n + 1, sizeof *recs);
    bool *tomb = calloc(n + 1, sizeof *tomb);
    int rv = CAIRN_ENOMEM;
    if (recs != NULL && tomb != NULL) {
      for (size_t k = 0; k < n; k++) {
        recs[k].group = g->name;
        recs[k].topic = g->topics[g->offsets[k].topic];
        recs[k].partition = g->offsets[k].partition;
        recs[k].metadata = "";
        tomb[k] = true;
      }
      rv = coord_append(c, slot, recs, tomb, n, NULL, NULL);
    }
    free(recs);
    free(tomb);
    if (rv == 0) {
      g->dropping = true;
      log_info("coord", "group %s: empty and unchanged for %u ms: dropping %zu offsets", g->name,
               c->n->cfg.offsets_retention_ms, n);
    }
  }
}

static void coord_tick_slot(struct coord *c, struct coord_slot *slot)
{
  coord_load_step(c, slot);
  if (slot->state != COORD_LOADED) {
    return;
  }
  struct group_event ev = {.type = GROUP_EV_TICK, .member_id = ""};
  coord_event_clock(c, &ev);
  for (size_t i = 0; i < slot->ngroups; i++) {
    int rv = coord_step(c, slot, slot->groups[i], &ev);
    if (rv != 0) {
      log_warn("coord", "group %s: tick: %s", slot->groups[i]->name, cairn_strerror(rv));
    }
  }
  /* A group with no member and no offset is forgotten. */
  for (size_t i = slot->ngroups; i-- > 0;) {
    if (group_gone(slot->groups[i])) {
      coord_drop_group(slot, i);
    }
  }
  if (ev.now_ms >= slot->last_expire_ms + COORD_EXPIRE_EVERY_MS) {
    slot->last_expire_ms = ev.now_ms;
    coord_expire(c, slot, ev.wall_ms);
  }
}

static void coord_on_timer(uv_timer_t *t)
{
  struct coord *c = t->data;
  if (c->closing || c->n->state != NODE_RUNNING) {
    return;
  }
  const struct meta_topic *mt = meta_topic_find(ctl_state(&c->n->ctl), COORD_OFFSETS_TOPIC);
  if (mt != NULL && coord_ensure_slots(c, mt->npartitions) != 0) {
    return;
  }
  for (size_t i = 0; i < c->nslots; i++) {
    coord_tick_slot(c, &c->slots[i]);
  }
}

void coord_init(struct coord *c, struct node *n)
{
  memset(c, 0, sizeof *c);
  c->n = n;
  uv_timer_init(n->loop, &c->timer);
  c->timer.data = c;
  uv_timer_start(&c->timer, coord_on_timer, COORD_TICK_MS, COORD_TICK_MS);
}

static void coord_on_timer_closed(uv_handle_t *h)
{
  (void)h;
}

void coord_close(struct coord *c)
{
  if (c->closing) {
    return;
  }
  c->closing = true;
  coord_fail_joins(c, NULL, CAIRN_ESHUTDOWN, "the node is stopping");
  for (size_t i = 0; i < c->nslots; i++) {
    coord_unload(c, &c->slots[i], "the node is stopping");
  }
  uv_close((uv_handle_t *)&c->timer, coord_on_timer_closed);
}

void coord_free(struct coord *c)
{
  free(c->slots);
  c->slots = NULL;
  c->nslots = 0;
}
