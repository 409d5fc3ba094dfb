/* group.c - the group consumer (<cairn/group.h>): a cairn_consumer whose
 * partitions the group's coordinator assigns.
 *
 * Membership, one request at a time (each an lc_op to the coordinator,
 * which it finds and follows by itself):
 *
 *   JOINING --JoinGroup ok--> SYNCING --SyncGroup ok--> FETCHING
 *      ^                                                   | OffsetFetch: each
 *      |                                                   | partition assigned
 *      |                                                   v at its committed offset
 *      +--- REVOKING <--Heartbeat: REBALANCE_IN_PROGRESS-- STABLE
 *           (commit with auto commit, unassign everything,  (heartbeats and
 *            on_revoked)                                     auto commits)
 *
 *   UNKNOWN_MEMBER_ID anywhere clears the member id; ILLEGAL_GENERATION and
 *   REBALANCE_IN_PROGRESS lead to JOINING (through REVOKING when
 *   partitions are held); a final error (INCONSISTENT_PROTOCOL,
 *   INVALID_GROUP, AUTHORIZATION_FAILED, FENCED_INSTANCE_ID: a newer
 *   process holds this static member's instance id) to FAILED and
 *   on_error. A step that runs out of retries (coordinator unreachable)
 *   is tried again a second later.
 *
 * Positions: a partition's position is the offset after the last record
 * whose records callback returned (at-least-once); commits send those.
 *
 * Close: waits for the join, sync or offset fetch in flight (a JoinGroup
 * answered after the close would leave a member behind until its session
 * expires), commits with auto commit, sends LeaveGroup (not for a static
 * member: as Kafka's clients, so that its restart takes its place back
 * without a rebalance), closes the consumer and the timer, and frees once
 * every request has called back. */
#include "internal.h"

#include <cairn/group.h>

#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LC_G_TICK_MS 50
#define LC_G_RETRY_MS 1000
#define LC_G_JOIN_SLACK_MS 10000 /* a JoinGroup waits the rebalance, plus this */

enum lc_gstate {
  LC_G_JOINING,
  LC_G_SYNCING,
  LC_G_FETCHING,
  LC_G_STABLE,
  LC_G_REVOKING,
  LC_G_FAILED,
};

enum lc_gkind { LC_G_JOIN, LC_G_SYNC, LC_G_FETCH, LC_G_HEARTBEAT, LC_G_COMMIT, LC_G_LEAVE };

struct lc_gpart {
  char *topic;
  int32_t partition;
  int64_t pos; /* -1: nothing processed yet */
};

/* A commit callback owed from the tick (never from inside the call). */
struct lc_gdone {
  cairn_done_cb cb;
  void *data;
  int status;
  struct lc_gdone *next;
};

struct cairn_group_consumer {
  struct cairn_client *c;
  struct cairn_consumer *cons;
  struct cairn_group_options o;
  char *group;
  char *instance; /* group_instance_id: "" for a dynamic member */
  char **topics;
  size_t ntopics;
  char *strategies[3];
  size_t nstrategies;
  char member[128];
  int32_t gen;
  char coord[LC_ADDR_MAX];
  enum lc_gstate state;
  bool step_inflight; /* JOIN, SYNC or FETCH */
  bool hb_inflight;
  uint64_t retry_ms; /* JOINING: not before */
  uint64_t next_hb_ms;
  uint64_t next_commit_ms;
  struct lc_gpart *parts;
  size_t nparts;
  int inflight; /* ops that will call back */
  struct lc_gdone *dones;
  cairn_records_cb cb;
  void *cb_data;
  uv_timer_t timer;
  bool closing;
  bool timer_closed;
  bool freed_cons;
  cairn_group_close_cb close_cb;
  void *close_data;
};

/* One request of gc: the envelope and everything it points to. */
struct lc_gop {
  struct cairn_group_consumer *gc;
  enum lc_gkind kind;
  Cairn__Client__Envelope env;
  union {
    Cairn__Client__JoinGroupRequest join;
    Cairn__Client__SyncGroupRequest sync;
    Cairn__Client__OffsetFetchRequest fetch;
    Cairn__Client__HeartbeatRequest hb;
    Cairn__Client__OffsetCommitRequest commit;
    Cairn__Client__LeaveGroupRequest leave;
  } u;
  int32_t gen; /* of the request */
  /* commit */
  Cairn__Client__OffsetCommitPartition *cparts;
  Cairn__Client__OffsetCommitPartition **cptrs;
  size_t ncparts;
  bool outside; /* resent outside membership (member "", generation -1) */
  cairn_done_cb user_cb;
  void *user_data;
  void (*then)(struct cairn_group_consumer *gc, int status); /* after a commit */
  /* fetch */
  Cairn__Client__TopicPartitions *ftps;
  Cairn__Client__TopicPartitions **fptrs;
  uint32_t *fparts;
  int64_t *offsets; /* per gc->parts index, from OffsetFetch */
  /* answers */
  char member[128];
  int32_t answer_gen;
  struct lc_gpart *assigned;
  size_t nassigned;
};

static void lc_group_start_join(struct cairn_group_consumer *gc);
static void lc_group_revoke(struct cairn_group_consumer *gc);
static void lc_group_revoked(struct cairn_group_consumer *gc, int status);
static void lc_group_maybe_free(struct cairn_group_consumer *gc);
static void lc_group_close_leave(struct cairn_group_consumer *gc, int status);

/* ---- small helpers ---- */

void cairn_group_options_init(struct cairn_group_options *o)
{
  memset(o, 0, sizeof *o);
  o->session_timeout_ms = 10000;
  o->auto_commit_interval_ms = 5000;
  o->strategy = "sticky";
  o->offset_reset = CAIRN_OFFSET_SPEC_EARLIEST;
  cairn_consumer_options_init(&o->consumer);
}

const char *cairn_group_member_id(const struct cairn_group_consumer *gc)
{
  return gc->member;
}

int32_t cairn_group_generation(const struct cairn_group_consumer *gc)
{
  return gc->gen;
}

size_t cairn_group_assigned_count(const struct cairn_group_consumer *gc)
{
  return gc->nparts;
}

static void lc_gparts_free(struct lc_gpart *v, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    free(v[i].topic);
  }
  free(v);
}

static uint32_t lc_group_hb_interval(const struct cairn_group_consumer *gc)
{
  return gc->o.heartbeat_interval_ms != 0 ? gc->o.heartbeat_interval_ms
                                          : gc->o.session_timeout_ms / 3;
}

static void lc_gop_free_req(Cairn__Client__Envelope *env)
{
  (void)env; /* lives in the gop */
}

static void lc_gop_free(struct lc_gop *g)
{
  free(g->cparts);
  free(g->cptrs);
  free(g->ftps);
  free(g->fptrs);
  free(g->fparts);
  free(g->offsets);
  lc_gparts_free(g->assigned, g->nassigned);
  free(g);
}

/* The Error of a group answer, or NULL when the body is not kind's. */
static const Cairn__Client__Error *lc_gop_error(const struct lc_gop *g,
                                                const Cairn__Client__Envelope *env, bool *ok)
{
  *ok = true;
  switch (g->kind) {
  case LC_G_JOIN:
    if (env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_JOIN_GROUP_RESP) {
      return env->join_group_resp->error;
    }
    break;
  case LC_G_SYNC:
    if (env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_SYNC_GROUP_RESP) {
      return env->sync_group_resp->error;
    }
    break;
  case LC_G_FETCH:
    if (env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_OFFSET_FETCH_RESP) {
      return env->offset_fetch_resp->error;
    }
    break;
  case LC_G_HEARTBEAT:
    if (env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_HEARTBEAT_RESP) {
      return env->heartbeat_resp->error;
    }
    break;
  case LC_G_COMMIT:
    if (env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_OFFSET_COMMIT_RESP) {
      return env->offset_commit_resp->error;
    }
    break;
  case LC_G_LEAVE:
    if (env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_LEAVE_GROUP_RESP) {
      return env->leave_group_resp->error;
    }
    break;
  }
  *ok = false;
  return NULL;
}

/* Copies what the answer says into g (the envelope is freed after). */
static int lc_gop_take(struct lc_gop *g, const Cairn__Client__Envelope *env)
{
  struct cairn_group_consumer *gc = g->gc;
  switch (g->kind) {
  case LC_G_JOIN:
    lc_strlcpy(g->member, env->join_group_resp->member_id, sizeof g->member);
    g->answer_gen = env->join_group_resp->generation;
    return 0;
  case LC_G_SYNC: {
    const Cairn__Client__SyncGroupResponse *r = env->sync_group_resp;
    size_t n = 0;
    for (size_t i = 0; i < r->n_assignment; i++) {
      n += r->assignment[i]->n_partitions;
    }
    g->assigned = calloc(n + 1, sizeof *g->assigned);
    if (g->assigned == NULL) {
      return CAIRN_ENOMEM;
    }
    for (size_t i = 0; i < r->n_assignment; i++) {
      for (size_t k = 0; k < r->assignment[i]->n_partitions; k++) {
        struct lc_gpart *p = &g->assigned[g->nassigned];
        p->topic = strdup(r->assignment[i]->topic != NULL ? r->assignment[i]->topic : "");
        if (p->topic == NULL) {
          return CAIRN_ENOMEM;
        }
        p->partition = (int32_t)r->assignment[i]->partitions[k];
        p->pos = -1;
        g->nassigned++;
      }
    }
    return 0;
  }
  case LC_G_FETCH: {
    const Cairn__Client__OffsetFetchResponse *r = env->offset_fetch_resp;
    g->offsets = malloc((gc->nparts + 1) * sizeof *g->offsets);
    if (g->offsets == NULL) {
      return CAIRN_ENOMEM;
    }
    for (size_t i = 0; i < gc->nparts; i++) {
      g->offsets[i] = -1;
      for (size_t k = 0; k < r->n_partitions; k++) {
        const Cairn__Client__OffsetFetchPartitionResult *x = r->partitions[k];
        if ((int32_t)x->partition == gc->parts[i].partition && x->topic != NULL &&
            strcmp(x->topic, gc->parts[i].topic) == 0) {
          g->offsets[i] = x->offset;
        }
      }
    }
    return 0;
  }
  case LC_G_COMMIT: {
    const Cairn__Client__OffsetCommitResponse *r = env->offset_commit_resp;
    for (size_t k = 0; k < r->n_partitions; k++) {
      if (r->partitions[k]->error != NULL &&
          r->partitions[k]->error->code != CAIRN__CLIENT__ERROR_CODE__OK) {
        return lc_wire_err((int)r->partitions[k]->error->code);
      }
    }
    return 0;
  }
  default:
    return 0;
  }
}

static enum lc_op_verdict lc_gop_on_answer(struct lc_op *op, Cairn__Client__Envelope *env)
{
  struct lc_gop *g = op->data;
  bool ok;
  const Cairn__Client__Error *e = lc_gop_error(g, env, &ok);
  if (!ok) {
    op->status = CAIRN_EPROTOCOL;
    return LC_OP_DONE;
  }
  if (e != NULL && e->code != CAIRN__CLIENT__ERROR_CODE__OK) {
    op->status = lc_wire_err((int)e->code);
    lc_fmt(op->errmsg, sizeof op->errmsg, "%s",
           e->message != NULL && e->message[0] != '\0' ? e->message : cairn_strerror(op->status));
    /* A UNKNOWN_GROUP at OffsetFetch: nothing committed yet. */
    if (g->kind == LC_G_FETCH && op->status == CAIRN_EUNKNOWN_GROUP) {
      op->status = 0;
      g->offsets = NULL;
      return LC_OP_DONE;
    }
    return lc_retriable(op->status) ? LC_OP_RETRY : LC_OP_DONE;
  }
  op->status = lc_gop_take(g, env);
  return LC_OP_DONE;
}

static void lc_gop_on_done(struct lc_op *op);

/* Sends g (env filled) to the coordinator. Returns 0 or CAIRN_ENOMEM. */
static int lc_gop_run(struct lc_gop *g, uint32_t timeout_ms)
{
  struct cairn_group_consumer *gc = g->gc;
  struct lc_op *op = lc_op_new(gc->c);
  if (op == NULL || (op->topic = strdup(gc->group)) == NULL) {
    free(op);
    lc_gop_free(g);
    return CAIRN_ENOMEM;
  }
  op->target = LC_OP_COORDINATOR;
  lc_strlcpy(op->coord, gc->coord, sizeof op->coord);
  op->timeout_ms = timeout_ms;
  op->req = &g->env;
  op->free_req = lc_gop_free_req;
  op->answer = lc_gop_on_answer;
  op->done = lc_gop_on_done;
  op->data = g;
  gc->inflight++;
  lc_op_start(gc->c, op);
  return 0;
}

static struct lc_gop *lc_gop_new(struct cairn_group_consumer *gc, enum lc_gkind kind)
{
  struct lc_gop *g = calloc(1, sizeof *g);
  if (g == NULL) {
    return NULL;
  }
  g->gc = gc;
  g->kind = kind;
  g->gen = gc->gen;
  cairn__client__envelope__init(&g->env);
  return g;
}

/* ---- the steps ---- */

/* A step failed: final errors stop the member; the rest retry later. */
static void lc_group_step_failed(struct cairn_group_consumer *gc, int status, const char *errmsg)
{
  if (status == CAIRN_EUNKNOWN_MEMBER || status == CAIRN_EUNKNOWN_GROUP) {
    gc->member[0] = '\0';
  }
  bool final = status == CAIRN_EINCONSISTENT_PROTOCOL || status == CAIRN_EINVALID_GROUP ||
               status == CAIRN_EBADREQUEST || status == CAIRN_EUNSUPPORTED ||
               status == CAIRN_EPROTOCOL || status == CAIRN_EAUTHZ ||
               status == CAIRN_EFENCED_INSTANCE;
  if (final) {
    if (gc->nparts > 0) {
      lc_group_revoked(gc, 0); /* nothing more is read (a fenced member's are another's) */
    }
    gc->state = LC_G_FAILED;
    if (gc->o.on_error != NULL) {
      gc->o.on_error(gc, status, errmsg, gc->o.cb_data);
    }
    return;
  }
  if (gc->nparts > 0) {
    lc_group_revoke(gc);
    return;
  }
  gc->state = LC_G_JOINING;
  bool at_once = status == CAIRN_EUNKNOWN_MEMBER || status == CAIRN_EREBALANCE ||
                 status == CAIRN_EILLEGAL_GENERATION || status == CAIRN_EUNKNOWN_GROUP;
  gc->retry_ms = lc_now(gc->c) + (at_once ? 0 : LC_G_RETRY_MS);
}

static void lc_group_start_sync(struct cairn_group_consumer *gc);
static void lc_group_start_fetch(struct cairn_group_consumer *gc);

static void lc_group_assigned(struct cairn_group_consumer *gc, const int64_t *offsets)
{
  struct cairn_group_partition *v = calloc(gc->nparts + 1, sizeof *v);
  for (size_t i = 0; i < gc->nparts; i++) {
    struct lc_gpart *p = &gc->parts[i];
    int64_t start = offsets != NULL && offsets[i] >= 0               ? offsets[i]
                    : gc->o.offset_reset == CAIRN_OFFSET_SPEC_LATEST ? CAIRN_OFFSET_LATEST
                                                                     : CAIRN_OFFSET_EARLIEST;
    p->pos = offsets != NULL && offsets[i] >= 0 ? offsets[i] : -1;
    int rv = cairn_consumer_assign(gc->cons, p->topic, p->partition, start);
    (void)rv; /* CAIRN_ENOMEM leaves the partition unread until the next rebalance */
    if (v != NULL) {
      v[i].topic = p->topic;
      v[i].partition = p->partition;
    }
  }
  gc->state = LC_G_STABLE;
  uint64_t now = lc_now(gc->c);
  gc->next_hb_ms = now + lc_group_hb_interval(gc);
  gc->next_commit_ms = now + gc->o.auto_commit_interval_ms;
  if (gc->o.on_assigned != NULL && v != NULL) {
    gc->o.on_assigned(gc, v, gc->nparts, gc->o.cb_data);
  }
  free(v);
}

static void lc_gop_on_done(struct lc_op *op)
{
  struct lc_gop *g = op->data;
  struct cairn_group_consumer *gc = g->gc;
  int status = op->status;
  gc->inflight--;
  if (op->coord[0] != '\0') {
    lc_strlcpy(gc->coord, op->coord, sizeof gc->coord);
  }
  switch (g->kind) {
  case LC_G_JOIN:
  case LC_G_SYNC:
  case LC_G_FETCH:
    gc->step_inflight = false;
    if (gc->closing) {
      /* The close waited for this step: a member that joined leaves. */
      if (g->kind == LC_G_JOIN && status == 0) {
        lc_strlcpy(gc->member, g->member, sizeof gc->member);
      }
      lc_group_close_leave(gc, 0);
      break;
    }
    if (status == UV_ECANCELED) {
      break;
    }
    if (status != 0) {
      lc_group_step_failed(gc, status, op->errmsg);
      break;
    }
    if (g->kind == LC_G_JOIN) {
      lc_strlcpy(gc->member, g->member, sizeof gc->member);
      gc->gen = g->answer_gen;
      lc_group_start_sync(gc);
    } else if (g->kind == LC_G_SYNC) {
      lc_gparts_free(gc->parts, gc->nparts);
      gc->parts = g->assigned;
      gc->nparts = g->nassigned;
      g->assigned = NULL;
      g->nassigned = 0;
      lc_group_start_fetch(gc);
    } else {
      lc_group_assigned(gc, g->offsets);
    }
    break;
  case LC_G_HEARTBEAT:
    gc->hb_inflight = false;
    if (gc->closing || status == UV_ECANCELED || gc->state != LC_G_STABLE || g->gen != gc->gen) {
      break;
    }
    if (status == CAIRN_EFENCED_INSTANCE) {
      lc_group_step_failed(gc, status, op->errmsg); /* final: stops with on_error */
      break;
    }
    if (status == CAIRN_EREBALANCE || status == CAIRN_EILLEGAL_GENERATION ||
        status == CAIRN_EUNKNOWN_MEMBER || status == CAIRN_EUNKNOWN_GROUP) {
      if (status == CAIRN_EUNKNOWN_MEMBER || status == CAIRN_EUNKNOWN_GROUP) {
        gc->member[0] = '\0';
      }
      lc_group_revoke(gc);
    }
    break;
  case LC_G_COMMIT:
    if ((status == CAIRN_EUNKNOWN_MEMBER || status == CAIRN_EUNKNOWN_GROUP) && !g->outside) {
      /* The coordinator moved and does not know this member (membership
       * is not replicated): the positions it processed are still worth
       * keeping, and the coordinator takes them outside membership while
       * the group has no member. */
      g->outside = true;
      g->u.commit.member_id = "";
      g->u.commit.generation = -1;
      cairn_done_cb user_cb = g->user_cb;
      void *user_data = g->user_data;
      void (*then)(struct cairn_group_consumer *, int) = g->then;
      int rv = lc_gop_run(g, 0); /* g goes on, or is freed when this fails */
      if (rv != 0) {
        if (user_cb != NULL) {
          user_cb(gc->c, status, op->errmsg, user_data);
        }
        if (then != NULL) {
          then(gc, status);
        }
        lc_group_maybe_free(gc);
      }
      return;
    }
    if (g->user_cb != NULL) {
      g->user_cb(gc->c, status, status != 0 ? op->errmsg : "", g->user_data);
    }
    if (g->then != NULL) {
      g->then(gc, status);
    }
    break;
  case LC_G_LEAVE:
    break;
  }
  lc_gop_free(g);
  lc_group_maybe_free(gc);
}

static void lc_group_start_join(struct cairn_group_consumer *gc)
{
  struct lc_gop *g = lc_gop_new(gc, LC_G_JOIN);
  if (g == NULL) {
    gc->retry_ms = lc_now(gc->c) + LC_G_RETRY_MS;
    return;
  }
  Cairn__Client__JoinGroupRequest *r = &g->u.join;
  cairn__client__join_group_request__init(r);
  r->group = gc->group;
  r->member_id = gc->member;
  r->group_instance_id = gc->instance;
  r->client_id = gc->c->client_id;
  r->session_timeout_ms = gc->o.session_timeout_ms;
  r->rebalance_timeout_ms = gc->o.rebalance_timeout_ms;
  r->topics = gc->topics;
  r->n_topics = gc->ntopics;
  r->strategies = gc->strategies;
  r->n_strategies = gc->nstrategies;
  g->env.api = CAIRN__CLIENT__API__API_JOIN_GROUP;
  g->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_JOIN_GROUP_REQ;
  g->env.join_group_req = r;
  uint32_t rebalance =
      gc->o.rebalance_timeout_ms != 0 ? gc->o.rebalance_timeout_ms : gc->o.session_timeout_ms;
  gc->state = LC_G_JOINING;
  gc->step_inflight = true;
  if (lc_gop_run(g, rebalance + LC_G_JOIN_SLACK_MS) != 0) {
    gc->step_inflight = false;
    gc->retry_ms = lc_now(gc->c) + LC_G_RETRY_MS;
  }
}

static void lc_group_start_sync(struct cairn_group_consumer *gc)
{
  struct lc_gop *g = lc_gop_new(gc, LC_G_SYNC);
  if (g == NULL) {
    lc_group_step_failed(gc, CAIRN_ENOMEM, "out of memory");
    return;
  }
  cairn__client__sync_group_request__init(&g->u.sync);
  g->u.sync.group = gc->group;
  g->u.sync.member_id = gc->member;
  g->u.sync.group_instance_id = gc->instance;
  g->u.sync.generation = gc->gen;
  g->env.api = CAIRN__CLIENT__API__API_SYNC_GROUP;
  g->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_SYNC_GROUP_REQ;
  g->env.sync_group_req = &g->u.sync;
  gc->state = LC_G_SYNCING;
  gc->step_inflight = true;
  if (lc_gop_run(g, 0) != 0) {
    gc->step_inflight = false;
    lc_group_step_failed(gc, CAIRN_ENOMEM, "out of memory");
  }
}

static void lc_group_start_fetch(struct cairn_group_consumer *gc)
{
  if (gc->nparts == 0) {
    lc_group_assigned(gc, NULL);
    return;
  }
  struct lc_gop *g = lc_gop_new(gc, LC_G_FETCH);
  if (g != NULL) {
    g->ftps = calloc(gc->nparts, sizeof *g->ftps);
    g->fptrs = calloc(gc->nparts, sizeof *g->fptrs);
    g->fparts = calloc(gc->nparts, sizeof *g->fparts);
  }
  if (g == NULL || g->ftps == NULL || g->fptrs == NULL || g->fparts == NULL) {
    if (g != NULL) {
      lc_gop_free(g);
    }
    lc_group_step_failed(gc, CAIRN_ENOMEM, "out of memory");
    return;
  }
  /* One TopicPartitions per partition: simple, and the lists are short. */
  for (size_t i = 0; i < gc->nparts; i++) {
    cairn__client__topic_partitions__init(&g->ftps[i]);
    g->ftps[i].topic = gc->parts[i].topic;
    g->fparts[i] = (uint32_t)gc->parts[i].partition;
    g->ftps[i].partitions = &g->fparts[i];
    g->ftps[i].n_partitions = 1;
    g->fptrs[i] = &g->ftps[i];
  }
  cairn__client__offset_fetch_request__init(&g->u.fetch);
  g->u.fetch.group = gc->group;
  g->u.fetch.partitions = g->fptrs;
  g->u.fetch.n_partitions = gc->nparts;
  g->env.api = CAIRN__CLIENT__API__API_OFFSET_FETCH;
  g->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_OFFSET_FETCH_REQ;
  g->env.offset_fetch_req = &g->u.fetch;
  gc->state = LC_G_FETCHING;
  gc->step_inflight = true;
  if (lc_gop_run(g, 0) != 0) {
    gc->step_inflight = false;
    lc_group_step_failed(gc, CAIRN_ENOMEM, "out of memory");
  }
}

static void lc_group_heartbeat(struct cairn_group_consumer *gc)
{
  struct lc_gop *g = lc_gop_new(gc, LC_G_HEARTBEAT);
  if (g == NULL) {
    return;
  }
  cairn__client__heartbeat_request__init(&g->u.hb);
  g->u.hb.group = gc->group;
  g->u.hb.member_id = gc->member;
  g->u.hb.group_instance_id = gc->instance;
  g->u.hb.generation = gc->gen;
  g->env.api = CAIRN__CLIENT__API__API_HEARTBEAT;
  g->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_HEARTBEAT_REQ;
  g->env.heartbeat_req = &g->u.hb;
  gc->hb_inflight = true;
  if (lc_gop_run(g, lc_group_hb_interval(gc)) != 0) {
    gc->hb_inflight = false;
  }
}

/* Sends the positions; then(gc, status) and user_cb fire when answered.
 * Nothing to commit: they fire from the next tick with 0. */
static int lc_group_commit(struct cairn_group_consumer *gc, cairn_done_cb user_cb, void *user_data,
                           void (*then)(struct cairn_group_consumer *gc, int status))
{
  size_t n = 0;
  for (size_t i = 0; i < gc->nparts; i++) {
    n += gc->parts[i].pos >= 0;
  }
  if (n == 0 || gc->member[0] == '\0') {
    if (then != NULL) {
      then(gc, 0);
    }
    if (user_cb != NULL) {
      struct lc_gdone *d = calloc(1, sizeof *d);
      if (d == NULL) {
        return CAIRN_ENOMEM;
      }
      d->cb = user_cb;
      d->data = user_data;
      d->next = gc->dones;
      gc->dones = d;
    }
    return 0;
  }
  struct lc_gop *g = lc_gop_new(gc, LC_G_COMMIT);
  if (g != NULL) {
    g->cparts = calloc(n, sizeof *g->cparts);
    g->cptrs = calloc(n, sizeof *g->cptrs);
  }
  if (g == NULL || g->cparts == NULL || g->cptrs == NULL) {
    if (g != NULL) {
      lc_gop_free(g);
    }
    return CAIRN_ENOMEM;
  }
  for (size_t i = 0; i < gc->nparts; i++) {
    if (gc->parts[i].pos < 0) {
      continue;
    }
    Cairn__Client__OffsetCommitPartition *p = &g->cparts[g->ncparts];
    cairn__client__offset_commit_partition__init(p);
    p->topic = gc->parts[i].topic;
    p->partition = (uint32_t)gc->parts[i].partition;
    p->offset = gc->parts[i].pos;
    g->cptrs[g->ncparts++] = p;
  }
  cairn__client__offset_commit_request__init(&g->u.commit);
  g->u.commit.group = gc->group;
  g->u.commit.member_id = gc->member;
  g->u.commit.group_instance_id = gc->instance;
  g->u.commit.generation = gc->gen;
  g->u.commit.partitions = g->cptrs;
  g->u.commit.n_partitions = g->ncparts;
  g->env.api = CAIRN__CLIENT__API__API_OFFSET_COMMIT;
  g->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_OFFSET_COMMIT_REQ;
  g->env.offset_commit_req = &g->u.commit;
  g->user_cb = user_cb;
  g->user_data = user_data;
  g->then = then;
  return lc_gop_run(g, 0);
}

int cairn_group_commit(struct cairn_group_consumer *gc, cairn_done_cb cb, void *data)
{
  if (gc->closing) {
    return CAIRN_ECLOSED;
  }
  return lc_group_commit(gc, cb, data, NULL);
}

/* After the revoke's commit: give everything up and join again. */
static void lc_group_revoked(struct cairn_group_consumer *gc, int status)
{
  (void)status; /* a refused commit leaves those records to be read again */
  struct cairn_group_partition *v = calloc(gc->nparts + 1, sizeof *v);
  for (size_t i = 0; i < gc->nparts; i++) {
    int rv = cairn_consumer_unassign(gc->cons, gc->parts[i].topic, gc->parts[i].partition);
    (void)rv; /* CAIRN_ENOTFOUND: never assigned (no memory then) */
    if (v != NULL) {
      v[i].topic = gc->parts[i].topic;
      v[i].partition = gc->parts[i].partition;
    }
  }
  if (gc->o.on_revoked != NULL && v != NULL && gc->nparts > 0) {
    gc->o.on_revoked(gc, v, gc->nparts, gc->o.cb_data);
  }
  free(v);
  lc_gparts_free(gc->parts, gc->nparts);
  gc->parts = NULL;
  gc->nparts = 0;
  if (gc->closing) {
    return;
  }
  gc->state = LC_G_JOINING;
  gc->retry_ms = 0;
}

static void lc_group_revoke(struct cairn_group_consumer *gc)
{
  gc->state = LC_G_REVOKING;
  if (gc->o.auto_commit_interval_ms == 0 ||
      lc_group_commit(gc, NULL, NULL, lc_group_revoked) != 0) {
    lc_group_revoked(gc, 0);
  }
}

/* ---- the tick ---- */

static void lc_group_on_tick(uv_timer_t *t)
{
  struct cairn_group_consumer *gc = t->data;
  while (gc->dones != NULL) {
    struct lc_gdone *d = gc->dones;
    gc->dones = d->next;
    d->cb(gc->c, 0, "", d->data);
    free(d);
  }
  if (gc->closing) {
    return;
  }
  uint64_t now = lc_now(gc->c);
  if (gc->state == LC_G_JOINING && !gc->step_inflight && now >= gc->retry_ms) {
    lc_group_start_join(gc);
    return;
  }
  if (gc->state != LC_G_STABLE) {
    return;
  }
  if (!gc->hb_inflight && now >= gc->next_hb_ms) {
    gc->next_hb_ms = now + lc_group_hb_interval(gc);
    lc_group_heartbeat(gc);
  }
  if (gc->o.auto_commit_interval_ms != 0 && now >= gc->next_commit_ms && gc->state == LC_G_STABLE) {
    gc->next_commit_ms = now + gc->o.auto_commit_interval_ms;
    int rv = lc_group_commit(gc, NULL, NULL, NULL);
    (void)rv; /* no memory: the next interval tries again */
  }
}

/* ---- records ---- */

static void lc_group_on_records(struct cairn_consumer *cons, int status, const char *topic,
                                int32_t partition, const struct cairn_record *records, size_t count,
                                void *data)
{
  struct cairn_group_consumer *gc = data;
  uint64_t epoch = lc_consumer_epoch(cons, topic, partition);
  if (gc->cb != NULL) {
    gc->cb(cons, status, topic, partition, records, count, gc->cb_data);
  }
  if (status != 0 || count == 0) {
    return;
  }
  int64_t pos = records[count - 1].offset + 1;
  /* A seek from inside the callback says where processing stopped (a
   * reader that wanted only some of the batch): commit that, not the end
   * of the batch, so that records handed out but not processed are read
   * again. */
  int64_t sought = -1, hw = -1;
  if (lc_consumer_epoch(cons, topic, partition) != epoch &&
      cairn_consumer_position(cons, topic, partition, &sought, &hw) == 0 && sought >= 0) {
    pos = sought;
  }
  for (size_t i = 0; i < gc->nparts; i++) {
    if (gc->parts[i].partition == partition && strcmp(gc->parts[i].topic, topic) == 0) {
      gc->parts[i].pos = pos;
      return;
    }
  }
}

bool cairn_group_at_end(const struct cairn_group_consumer *gc)
{
  if (gc->state != LC_G_STABLE) {
    return false;
  }
  for (size_t i = 0; i < gc->nparts; i++) {
    int64_t pos = -1, hw = -1;
    if (cairn_consumer_position(gc->cons, gc->parts[i].topic, gc->parts[i].partition, &pos,
                                &hw) != 0 ||
        pos < 0 || hw < 0 || pos < hw) {
      return false;
    }
  }
  return true;
}

int cairn_group_consumer_start(struct cairn_group_consumer *gc, cairn_records_cb cb, void *data)
{
  if (gc->closing) {
    return CAIRN_ECLOSED;
  }
  gc->cb = cb;
  gc->cb_data = data;
  return cairn_consumer_start(gc->cons, lc_group_on_records, gc);
}

/* ---- new and close ---- */

static void lc_group_free(struct cairn_group_consumer *gc)
{
  free(gc->group);
  free(gc->instance);
  for (size_t i = 0; i < gc->ntopics; i++) {
    free(gc->topics[i]);
  }
  free(gc->topics);
  for (size_t i = 0; i < gc->nstrategies; i++) {
    free(gc->strategies[i]);
  }
  lc_gparts_free(gc->parts, gc->nparts);
  while (gc->dones != NULL) {
    struct lc_gdone *d = gc->dones;
    gc->dones = d->next;
    d->cb(gc->c, UV_ECANCELED, "the group consumer closed", d->data);
    free(d);
  }
  free(gc);
}

int cairn_group_consumer_new(struct cairn_client *c, const char *group, const char *const *topics,
                             size_t ntopics, const struct cairn_group_options *o,
                             struct cairn_group_consumer **out)
{
  *out = NULL;
  if (group == NULL || group[0] == '\0' || topics == NULL || ntopics == 0) {
    return CAIRN_EINVAL;
  }
  struct cairn_group_consumer *gc = calloc(1, sizeof *gc);
  if (gc == NULL) {
    return CAIRN_ENOMEM;
  }
  gc->c = c;
  if (o != NULL) {
    gc->o = *o;
  } else {
    cairn_group_options_init(&gc->o);
  }
  if (gc->o.session_timeout_ms == 0) {
    gc->o.session_timeout_ms = 10000;
  }
  gc->gen = -1;
  gc->group = strdup(group);
  gc->instance = strdup(gc->o.group_instance_id != NULL ? gc->o.group_instance_id : "");
  gc->o.group_instance_id = NULL; /* borrowed: not kept */
  gc->topics = calloc(ntopics, sizeof *gc->topics);
  bool ok = gc->group != NULL && gc->instance != NULL && gc->topics != NULL;
  for (size_t i = 0; ok && i < ntopics; i++) {
    ok = (gc->topics[i] = strdup(topics[i])) != NULL;
    gc->ntopics += ok;
  }
  static const char *const all[] = {"sticky", "range", "roundrobin"};
  const char *first = gc->o.strategy != NULL ? gc->o.strategy : "sticky";
  if (ok) {
    ok = (gc->strategies[gc->nstrategies++] = strdup(first)) != NULL;
  }
  for (size_t i = 0; ok && i < 3; i++) {
    if (strcmp(all[i], first) != 0) {
      ok = (gc->strategies[gc->nstrategies++] = strdup(all[i])) != NULL;
    }
  }
  gc->o.strategy = NULL; /* borrowed: not kept */
  int rv = ok ? cairn_consumer_new(c, &gc->o.consumer, &gc->cons) : CAIRN_ENOMEM;
  if (rv != 0) {
    lc_group_free(gc);
    return rv;
  }
  uv_timer_init(c->loop, &gc->timer);
  gc->timer.data = gc;
  uv_timer_start(&gc->timer, lc_group_on_tick, LC_G_TICK_MS, LC_G_TICK_MS);
  gc->state = LC_G_JOINING;
  gc->retry_ms = 0;
  *out = gc;
  return 0;
}

static void lc_group_maybe_free(struct cairn_group_consumer *gc)
{
  if (!gc->closing || gc->inflight > 0 || !gc->timer_closed || !gc->freed_cons) {
    return;
  }
  if (gc->close_cb != NULL) {
    gc->close_cb(gc, gc->close_data);
  }
  lc_group_free(gc);
}

static void lc_group_on_timer_closed(uv_handle_t *h)
{
  struct cairn_group_consumer *gc = h->data;
  gc->timer_closed = true;
  lc_group_maybe_free(gc);
}

static void lc_group_on_cons_closed(struct cairn_consumer *cons, void *data)
{
  struct cairn_group_consumer *gc = data;
  gc->freed_cons = true;
  uv_close((uv_handle_t *)&gc->timer, lc_group_on_timer_closed);
}

/* Close, after the commit: leave, then close the consumer. */
static void lc_group_close_leave(struct cairn_group_consumer *gc, int status)
{
  (void)status;
  lc_group_revoked(gc, 0); /* unassign, on_revoked */
  if (gc->member[0] != '\0' && gc->instance[0] == '\0') {
    struct lc_gop *g = lc_gop_new(gc, LC_G_LEAVE);
    if (g != NULL) {
      cairn__client__leave_group_request__init(&g->u.leave);
      g->u.leave.group = gc->group;
      g->u.leave.member_id = gc->member;
      g->env.api = CAIRN__CLIENT__API__API_LEAVE_GROUP;
      g->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LEAVE_GROUP_REQ;
      g->env.leave_group_req = &g->u.leave;
      int rv = lc_gop_run(g, 0);
      (void)rv; /* not sent: the session timeout removes the member */
    }
  }
  cairn_consumer_close(gc->cons, lc_group_on_cons_closed, gc);
}

void cairn_group_consumer_close(struct cairn_group_consumer *gc, cairn_group_close_cb cb,
                                void *data)
{
  if (gc->closing) {
    return;
  }
  gc->closing = true;
  gc->close_cb = cb;
  gc->close_data = data;
  cairn_consumer_stop(gc->cons);
  if (gc->step_inflight) {
    return; /* its answer goes on with the close (lc_gop_on_done) */
  }
  if (gc->state == LC_G_STABLE && gc->o.auto_commit_interval_ms != 0 &&
      lc_group_commit(gc, NULL, NULL, lc_group_close_leave) == 0) {
    return;
  }
  lc_group_close_leave(gc, 0);
}
