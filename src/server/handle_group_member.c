/* handle_group_member.c - JoinGroup, SyncGroup, Heartbeat, LeaveGroup: a
 * member's requests to its group's coordinator, fed to the group's state
 * machine (group.h) through the coordinator. A JoinGroup waits (parked in
 * the coordinator) until its rebalance completes; a SyncGroup until its
 * group's assignment is committed in the log (coord_sync); Heartbeat and
 * LeaveGroup answer at once. */
#include "server/handlers.h"
#include "server/handle_group.h"

#include "common/err.h"
#include "net/wire_err.h"
#include "server/node.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- JoinGroup ---- */

static void handle_join_respond(struct conn_request *req, const struct handle_group_err *he)
{
  Cairn__Client__JoinGroupResponse resp = CAIRN__CLIENT__JOIN_GROUP_RESPONSE__INIT;
  Cairn__Client__Error e = he->e;
  resp.error = &e;
  resp.generation = -1;
  resp.coordinator_id = he->coordinator_id;
  resp.coordinator_address = (char *)he->coordinator_address;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_JOIN_GROUP_RESP;
  env.join_group_resp = &resp;
  conn_respond(req, &env, NULL, 0);
}

void handle_join_group(struct node *n, struct conn_request *req)
{
  const Cairn__Client__JoinGroupRequest *r = req->env->join_group_req;
  struct handle_group_err he;
  struct coord_slot *slot = NULL;
  if (handle_group_lookup(n, r->group, &slot, &he) != 0) {
    handle_join_respond(req, &he);
    return;
  }
  for (size_t i = 0; i < r->n_topics; i++) {
    if (!meta_topic_name_valid(r->topics[i])) {
      handle_group_err_set(&he, CAIRN_EINVALID_GROUP, r->group, 0, NULL);
      snprintf(he.msg, sizeof he.msg, "group %.100s: \"%.100s\" is not a topic name", r->group,
               r->topics[i]);
      handle_join_respond(req, &he);
      return;
    }
  }
  if (strlen(r->member_id) > GROUP_MEMBER_ID_MAX) {
    handle_group_err_set(&he, CAIRN_EUNKNOWN_MEMBER, r->group, 0, NULL);
    handle_join_respond(req, &he);
    return;
  }
  struct group *g = coord_group(slot, r->group, true);
  if (g == NULL) {
    handle_group_err_set(&he, CAIRN_ENOMEM, r->group, 0, NULL);
    handle_join_respond(req, &he);
    return;
  }
  /* A new member's id: its client id (cut), this node, the term and a
   * counter, so no two coordinators hand out the same id. */
  char new_id[GROUP_MEMBER_ID_MAX + 1] = "";
  if (r->member_id[0] == '\0') {
    snprintf(new_id, sizeof new_id, "%.40s-n%" PRIu64 "-t%" PRIu64 "-%" PRIu64,
             r->client_id[0] != '\0' ? r->client_id : "member", n->cfg.node_id, slot->term,
             ++slot->next_member);
  }
  const char *member = r->member_id[0] != '\0' ? r->member_id : new_id;
  if (r->n_protocols > GROUP_MAX_PROTOCOLS) {
    handle_group_err_set(&he, CAIRN_EINVALID_GROUP, r->group, 0, NULL);
    handle_join_respond(req, &he);
    return;
  }
  struct group_opaque_in protocols[GROUP_MAX_PROTOCOLS];
  for (size_t i = 0; i < r->n_protocols; i++) {
    protocols[i] = (struct group_opaque_in){.name = r->protocols[i]->name,
                                            .data = r->protocols[i]->metadata.data,
                                            .len = r->protocols[i]->metadata.len};
  }
  struct group_event ev = {.type = GROUP_EV_JOIN,
                           .member_id = r->member_id,
                           .instance_id = r->group_instance_id,
                           .new_member_id = new_id,
                           .client_id = r->client_id,
                           .session_timeout_ms = r->session_timeout_ms,
                           .rebalance_timeout_ms = r->rebalance_timeout_ms,
                           .topics = (const char *const *)r->topics,
                           .ntopics = r->n_topics,
                           .strategies = (const char *const *)r->strategies,
                           .nstrategies = r->n_strategies,
                           .protocol_type = r->protocol_type,
                           .protocols = protocols,
                           .nprotocols = r->n_protocols};
  coord_event_clock(&n->coord, &ev);
  /* Parked first: the step may complete the rebalance at once. */
  int rv = coord_park_join(&n->coord, slot, g, member, req);
  if (rv != 0) {
    handle_group_err_set(&he, rv, r->group, 0, NULL);
    handle_join_respond(req, &he);
    return;
  }
  rv = coord_step(&n->coord, slot, g, &ev);
  if (rv != 0 && req->handler_data != NULL) {
    coord_unpark_join(&n->coord, req);
    handle_group_err_set(&he, rv, r->group, 0, NULL);
    if (rv == CAIRN_EINCONSISTENT_PROTOCOL) {
      snprintf(he.msg, sizeof he.msg,
               r->protocol_type[0] != '\0'
                   ? "group %.200s: no protocol offered is one every member offers, or the "
                     "group's members use another protocol type"
                   : "group %.200s: no strategy offered is one this node implements (range, "
                     "roundrobin, sticky) and every member supports",
               r->group);
    }
    handle_join_respond(req, &he);
  }
}

/* ---- SyncGroup ---- */

static void handle_sync_respond(struct conn_request *req, const struct handle_group_err *he,
                                Cairn__Client__TopicPartitions **tps, size_t ntps)
{
  Cairn__Client__SyncGroupResponse resp = CAIRN__CLIENT__SYNC_GROUP_RESPONSE__INIT;
  Cairn__Client__Error e = he->e;
  resp.error = &e;
  resp.assignment = tps;
  resp.n_assignment = ntps;
  resp.coordinator_id = he->coordinator_id;
  resp.coordinator_address = (char *)he->coordinator_address;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_SYNC_GROUP_RESP;
  env.sync_group_resp = &resp;
  conn_respond(req, &env, NULL, 0);
}

/* The group of a member request, or NULL with he set (UNKNOWN_GROUP or the
 * coordinator's code). */
static struct group *handle_group_of(struct node *n, const char *name, struct coord_slot **slot,
                                     struct handle_group_err *he)
{
  if (handle_group_lookup(n, name, slot, he) != 0) {
    return NULL;
  }
  struct group *g = coord_group(*slot, name, false);
  if (g == NULL) {
    handle_group_err_set(he, CAIRN_EUNKNOWN_GROUP, name, 0, NULL);
  }
  return g;
}

static int handle_member_step(struct node *n, struct coord_slot *slot, struct group *g,
                              enum group_event_type type, const char *member, const char *instance,
                              int32_t generation)
{
  struct group_event ev = {
      .type = type, .member_id = member, .instance_id = instance, .generation = generation};
  coord_event_clock(&n->coord, &ev);
  return coord_step(&n->coord, slot, g, &ev);
}

void handle_sync_group(struct node *n, struct conn_request *req)
{
  const Cairn__Client__SyncGroupRequest *r = req->env->sync_group_req;
  struct handle_group_err he;
  struct coord_slot *slot = NULL;
  struct group *g = handle_group_of(n, r->group, &slot, &he);
  if (g == NULL) {
    handle_sync_respond(req, &he, NULL, 0);
    return;
  }
  if (r->n_assignments > GROUP_MAX_MEMBERS) {
    handle_group_err_set(&he, CAIRN_EINVALID_GROUP, r->group, 0, NULL);
    handle_sync_respond(req, &he, NULL, 0);
    return;
  }
  struct group_opaque_in *as = calloc(r->n_assignments + 1, sizeof *as);
  if (as == NULL) {
    handle_group_err_set(&he, CAIRN_ENOMEM, r->group, 0, NULL);
    handle_sync_respond(req, &he, NULL, 0);
    return;
  }
  for (size_t i = 0; i < r->n_assignments; i++) {
    as[i] = (struct group_opaque_in){.name = r->assignments[i]->member_id,
                                     .data = r->assignments[i]->data.data,
                                     .len = r->assignments[i]->data.len};
  }
  struct group_event ev = {.type = GROUP_EV_SYNC,
                           .member_id = r->member_id,
                           .instance_id = r->group_instance_id,
                           .generation = r->generation,
                           .assignments = as,
                           .nassignments = r->n_assignments};
  coord_event_clock(&n->coord, &ev);
  /* Answered by the coordinator, now or once the assignment is kept. */
  int rv = coord_sync(&n->coord, slot, g, &ev, req);
  free(as);
  if (rv != 0) {
    handle_group_err_set(&he, rv, r->group, 0, NULL);
    handle_sync_respond(req, &he, NULL, 0);
  }
}

/* ---- Heartbeat, LeaveGroup ---- */

void handle_heartbeat(struct node *n, struct conn_request *req)
{
  const Cairn__Client__HeartbeatRequest *r = req->env->heartbeat_req;
  struct handle_group_err he;
  struct coord_slot *slot = NULL;
  struct group *g = handle_group_of(n, r->group, &slot, &he);
  if (g != NULL) {
    int rv = handle_member_step(n, slot, g, GROUP_EV_HEARTBEAT, r->member_id, r->group_instance_id,
                                r->generation);
    handle_group_err_set(&he, rv, r->group, 0, NULL);
  }
  Cairn__Client__HeartbeatResponse resp = CAIRN__CLIENT__HEARTBEAT_RESPONSE__INIT;
  resp.error = &he.e;
  resp.coordinator_id = he.coordinator_id;
  resp.coordinator_address = he.coordinator_address;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_HEARTBEAT_RESP;
  env.heartbeat_resp = &resp;
  conn_respond(req, &env, NULL, 0);
}

void handle_leave_group(struct node *n, struct conn_request *req)
{
  const Cairn__Client__LeaveGroupRequest *r = req->env->leave_group_req;
  struct handle_group_err he;
  struct coord_slot *slot = NULL;
  struct group *g = handle_group_of(n, r->group, &slot, &he);
  if (g != NULL) {
    int rv = handle_member_step(n, slot, g, GROUP_EV_LEAVE, r->member_id, r->group_instance_id, 0);
    handle_group_err_set(&he, rv, r->group, 0, NULL);
  }
  Cairn__Client__LeaveGroupResponse resp = CAIRN__CLIENT__LEAVE_GROUP_RESPONSE__INIT;
  resp.error = &he.e;
  resp.coordinator_id = he.coordinator_id;
  resp.coordinator_address = he.coordinator_address;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LEAVE_GROUP_RESP;
  env.leave_group_resp = &resp;
  conn_respond(req, &env, NULL, 0);
}
