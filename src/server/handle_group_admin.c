/* handle_group_admin.c - FindCoordinator (any node), ListGroups (the
 * groups this node coordinates) and DescribeGroups (members, assignment,
 * committed offsets and lag, at the coordinator). */
#include "server/handlers.h"
#include "server/authz.h"
#include "server/handle_group.h"
#include "server/handle_target.h"

#include "common/err.h"
#include "net/wire_err.h"
#include "server/node.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- FindCoordinator ---- */

void handle_find_coordinator(struct node *n, struct conn_request *req)
{
  const char *group = req->env->find_coordinator_req->group;
  Cairn__Client__FindCoordinatorResponse resp = CAIRN__CLIENT__FIND_COORDINATOR_RESPONSE__INIT;
  const struct meta_topic *t = meta_topic_find(ctl_state(&n->ctl), COORD_OFFSETS_TOPIC);
  size_t len = strlen(group);
  uint64_t id = 0;
  const char *addr = NULL;
  int rv;
  if (len == 0 || len > GROUP_NAME_MAX) {
    rv = CAIRN_EINVALID_GROUP;
  } else if (t == NULL) {
    struct coord_slot *slot = NULL;
    rv = coord_lookup(&n->coord, group, &slot, &id, &addr); /* starts the topic's creation */
  } else {
    resp.offsets_partition = coord_partition_of(group, t->npartitions);
    struct handle_target tg;
    handle_find_leader(n, COORD_OFFSETS_TOPIC, resp.offsets_partition, &tg);
    if (tg.code == CAIRN__CLIENT__ERROR_CODE__OK) {
      rv = 0; /* this node, loaded or about to be */
      id = n->cfg.node_id;
      addr = node_conn_is_external(n, req->c) ? n->cfg.external_advertise.str
                                               : n->cfg.advertise_client.str;
    } else if (tg.code == CAIRN__CLIENT__ERROR_CODE__NOT_LEADER && tg.leader_id != 0 &&
               node_client_address_via(n, tg.leader_id, req->c) != NULL) {
      rv = 0;
      id = tg.leader_id;
      addr = node_client_address_via(n, tg.leader_id, req->c);
    } else if (tg.code == CAIRN__CLIENT__ERROR_CODE__REPLICA_NOT_AVAILABLE) {
      rv = CAIRN_ECOORDINATOR_LOADING;
    } else {
      rv = CAIRN_ENOT_COORDINATOR;
    }
  }
  struct handle_group_err he;
  handle_group_err_set(&he, rv, group, 0, NULL);
  resp.error = &he.e;
  resp.coordinator_id = id;
  resp.coordinator_address = (char *)(addr != NULL ? addr : "");
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_FIND_COORDINATOR_RESP;
  env.find_coordinator_resp = &resp;
  conn_respond(req, &env, NULL, 0);
}

/* ---- ListGroups ---- */

void handle_list_groups(struct node *n, struct conn_request *req)
{
  struct coord *c = &n->coord;
  size_t total = 0;
  for (size_t i = 0; i < c->nslots; i++) {
    total += c->slots[i].state == COORD_LOADED ? c->slots[i].ngroups : 0;
  }
  Cairn__Client__GroupListing *v = calloc(total + 1, sizeof *v);
  Cairn__Client__GroupListing **p = calloc(total + 1, sizeof *p);
  Cairn__Client__ListGroupsResponse resp = CAIRN__CLIENT__LIST_GROUPS_RESPONSE__INIT;
  struct handle_group_err he;
  handle_group_err_set(&he, v == NULL || p == NULL ? CAIRN_ENOMEM : 0, "*", 0, NULL);
  size_t k = 0;
  for (size_t i = 0; v != NULL && p != NULL && i < c->nslots; i++) {
    const struct coord_slot *s = &c->slots[i];
    for (size_t j = 0; s->state == COORD_LOADED && j < s->ngroups; j++) {
      const struct group *g = s->groups[j];
      if (group_gone(g)) {
        continue; /* forgotten at the coordinator's next tick */
      }
      if (!authz_allows(n, req->c, META_ACL_GROUP, g->name, META_ACL_DESCRIBE)) {
        continue; /* left out, as Kafka does */
      }
      cairn__client__group_listing__init(&v[k]);
      v[k].group = (char *)g->name;
      v[k].state = (char *)group_state_name(g->state);
      v[k].members = (uint32_t)g->nmembers;
      v[k].coordinator_id = n->cfg.node_id;
      v[k].protocol_type = (char *)g->protocol_type;
      p[k] = &v[k];
      k++;
    }
  }
  resp.error = &he.e;
  resp.groups = p;
  resp.n_groups = k;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_GROUPS_RESP;
  env.list_groups_resp = &resp;
  conn_respond(req, &env, NULL, 0);
  free(v);
  free(p);
}

/* ---- DescribeGroups ---- */

/* What one group's description owns while the response is built. */
struct handle_describe {
  struct handle_group_err he;
  Cairn__Client__GroupDescription d;
  Cairn__Client__GroupMember *mv;
  Cairn__Client__GroupMember **mp;
  char ***topics;
  Cairn__Client__TopicPartitions ***tps;
  size_t *ntps;
  size_t nm;
  Cairn__Client__GroupPartitionOffset *ov;
  Cairn__Client__GroupPartitionOffset **op;
  struct coord_lag *lag; /* coord_group_lag's rows the offsets point into */
};

static void handle_describe_free(struct handle_describe *hd)
{
  for (size_t i = 0; i < hd->nm; i++) {
    if (hd->topics != NULL) {
      free(hd->topics[i]);
    }
    if (hd->tps != NULL) {
      handle_group_tps_free(hd->tps[i], hd->ntps[i]);
    }
  }
  free(hd->topics);
  free(hd->tps);
  free(hd->ntps);
  free(hd->mv);
  free(hd->mp);
  free(hd->ov);
  free(hd->op);
  free(hd->lag);
}

/* The offsets part: every committed offset, and every assigned partition
 * without one, with their lag (coord_group_lag). */
static int handle_describe_offsets(struct node *n, const struct group *g,
                                   struct handle_describe *hd)
{
  size_t k = 0;
  int rv = coord_group_lag(&n->coord, g, &hd->lag, &k);
  if (rv != 0) {
    return rv;
  }
  hd->ov = calloc(k + 1, sizeof *hd->ov);
  hd->op = calloc(k + 1, sizeof *hd->op);
  if (hd->ov == NULL || hd->op == NULL) {
    return CAIRN_ENOMEM;
  }
  for (size_t i = 0; i < k; i++) {
    const struct coord_lag *l = &hd->lag[i];
    Cairn__Client__GroupPartitionOffset *x = &hd->ov[i];
    cairn__client__group_partition_offset__init(x);
    x->topic = (char *)l->topic;
    x->partition = l->partition;
    x->committed = l->committed;
    x->member_id = (char *)l->member_id;
    x->high_watermark = l->high_watermark;
    x->lag = l->lag;
    hd->op[i] = x;
  }
  hd->d.offsets = hd->op;
  hd->d.n_offsets = k;
  return 0;
}

static int handle_describe_members(const struct group *g, struct handle_describe *hd)
{
  size_t nm = g->nmembers;
  hd->mv = calloc(nm + 1, sizeof *hd->mv);
  hd->mp = calloc(nm + 1, sizeof *hd->mp);
  hd->topics = calloc(nm + 1, sizeof *hd->topics);
  hd->tps = calloc(nm + 1, sizeof *hd->tps);
  hd->ntps = calloc(nm + 1, sizeof *hd->ntps);
  if (hd->mv == NULL || hd->mp == NULL || hd->topics == NULL || hd->tps == NULL ||
      hd->ntps == NULL) {
    return CAIRN_ENOMEM;
  }
  hd->nm = nm;
  for (size_t i = 0; i < nm; i++) {
    const struct group_member *m = &g->members[i];
    Cairn__Client__GroupMember *x = &hd->mv[i];
    cairn__client__group_member__init(x);
    x->member_id = (char *)m->id;
    x->client_id = (char *)m->client_id;
    x->group_instance_id = (char *)m->instance_id;
    x->session_timeout_ms = m->session_timeout_ms;
    const struct group_protocol *gp = group_client_assigned(g) ? group_member_protocol(g, m) : NULL;
    if (gp != NULL) {
      x->metadata.data = gp->meta;
      x->metadata.len = gp->len;
    }
    x->assignment_data.data = m->assignment;
    x->assignment_data.len = m->assignment_len;
    hd->topics[i] = calloc(m->ntopics + 1, sizeof *hd->topics[i]);
    if (hd->topics[i] == NULL) {
      return CAIRN_ENOMEM;
    }
    for (size_t k = 0; k < m->ntopics; k++) {
      hd->topics[i][k] = g->topics[m->topics[k]];
    }
    x->topics = hd->topics[i];
    x->n_topics = m->ntopics;
    int rv = handle_group_tps(g, m->assigned, m->nassigned, &hd->tps[i], &hd->ntps[i]);
    if (rv != 0) {
      return rv;
    }
    x->assignment = hd->tps[i];
    x->n_assignment = hd->ntps[i];
    hd->mp[i] = x;
  }
  hd->d.members = hd->mp;
  hd->d.n_members = nm;
  return 0;
}

static void handle_describe_one(struct node *n, const char *name, struct handle_describe *hd)
{
  cairn__client__group_description__init(&hd->d);
  hd->d.group = (char *)name;
  struct coord_slot *slot = NULL;
  int rv = handle_group_lookup(n, name, &slot, &hd->he);
  const struct group *g = rv == 0 ? coord_group(slot, name, false) : NULL;
  if (rv == 0 && (g == NULL || group_gone(g))) {
    rv = CAIRN_EUNKNOWN_GROUP;
    handle_group_err_set(&hd->he, rv, name, 0, NULL);
  }
  if (rv == 0) {
    hd->d.state = (char *)group_state_name(g->state);
    hd->d.strategy = g->nmembers == 0           ? ""
                     : group_client_assigned(g) ? (char *)g->protocol
                                                : (char *)assign_strategy_name(g->strategy);
    hd->d.protocol_type = (char *)g->protocol_type;
    hd->d.generation = g->generation;
    hd->d.leader_id = (char *)g->leader;
    hd->d.coordinator_id = n->cfg.node_id;
    hd->d.coordinator_address = n->cfg.advertise_client.str;
    rv = handle_describe_members(g, hd);
    if (rv == 0) {
      rv = handle_describe_offsets(n, g, hd);
    }
    if (rv != 0) {
      handle_group_err_set(&hd->he, rv, name, 0, NULL);
      hd->d.n_members = 0;
      hd->d.n_offsets = 0;
    }
  } else {
    hd->d.coordinator_id = hd->he.coordinator_id;
    hd->d.coordinator_address = hd->he.coordinator_address;
  }
  hd->d.error = &hd->he.e;
}

void handle_describe_groups(struct node *n, struct conn_request *req)
{
  const Cairn__Client__DescribeGroupsRequest *r = req->env->describe_groups_req;
  size_t ng = r->n_groups;
  struct handle_describe *hd = calloc(ng + 1, sizeof *hd);
  Cairn__Client__GroupDescription **dp = calloc(ng + 1, sizeof *dp);
  if (hd == NULL || dp == NULL) {
    free(hd);
    free(dp);
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, cairn_strerror(CAIRN_ENOMEM));
    return;
  }
  for (size_t i = 0; i < ng; i++) {
    handle_describe_one(n, r->groups[i], &hd[i]);
    dp[i] = &hd[i].d;
  }
  Cairn__Client__Error e = CAIRN__CLIENT__ERROR__INIT;
  Cairn__Client__DescribeGroupsResponse resp = CAIRN__CLIENT__DESCRIBE_GROUPS_RESPONSE__INIT;
  resp.error = &e;
  resp.groups = dp;
  resp.n_groups = ng;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_GROUPS_RESP;
  env.describe_groups_resp = &resp;
  conn_respond(req, &env, NULL, 0);
  for (size_t i = 0; i < ng; i++) {
    handle_describe_free(&hd[i]);
  }
  free(hd);
  free(dp);
}
