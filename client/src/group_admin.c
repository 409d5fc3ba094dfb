/* group_admin.c - the group admin calls of <cairn/group.h>: ListGroups at
 * every alive node (merged), DescribeGroups and ResetOffsets at the
 * group's coordinator (an LC_OP_COORDINATOR op), and their blocking
 * versions on a cairn_sync's loop. */
#include "internal.h"

#include <cairn/group.h>

#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- freeing ---- */

void cairn_group_list_free(struct cairn_group_list *l)
{
  if (l == NULL) {
    return;
  }
  for (size_t i = 0; i < l->count; i++) {
    free(l->groups[i].group);
    free(l->groups[i].state);
  }
  free(l->groups);
  free(l);
}

void cairn_group_info_free(struct cairn_group_info *g)
{
  if (g == NULL) {
    return;
  }
  for (size_t i = 0; i < g->member_count; i++) {
    struct cairn_group_member_info *m = &g->members[i];
    free(m->member_id);
    free(m->client_id);
    free(m->group_instance_id);
    for (size_t k = 0; k < m->assignment_count; k++) {
      free((char *)m->assignment[k].topic);
    }
    free(m->assignment);
  }
  free(g->members);
  for (size_t i = 0; i < g->offset_count; i++) {
    free(g->offsets[i].topic);
    free(g->offsets[i].member_id);
  }
  free(g->offsets);
  free(g->group);
  free(g->state);
  free(g->strategy);
  free(g->leader_id);
  free(g);
}

static char *lc_gdup(const char *s)
{
  return strdup(s != NULL ? s : "");
}

/* ---- DescribeGroups and ResetOffsets at the coordinator ---- */

struct lc_gadmin {
  Cairn__Client__Envelope env;
  Cairn__Client__DescribeGroupsRequest describe;
  Cairn__Client__ResetOffsetsRequest reset;
  Cairn__Client__LeaveGroupRequest leave;
  char *names[3]; /* the group; a removal's member id and instance id */
  Cairn__Client__OffsetCommitPartition *parts;
  Cairn__Client__OffsetCommitPartition **ptrs;
  char **topics;
  size_t nparts;
  struct cairn_group_info *info; /* DescribeGroups' answer */
  cairn_group_info_cb info_cb;
  cairn_done_cb done_cb;
  void *data;
};

static void lc_gadmin_free(struct lc_gadmin *a)
{
  for (size_t i = 0; i < sizeof a->names / sizeof a->names[0]; i++) {
    free(a->names[i]);
  }
  for (size_t i = 0; a->topics != NULL && i < a->nparts; i++) {
    free(a->topics[i]);
  }
  free(a->topics);
  free(a->parts);
  free(a->ptrs);
  cairn_group_info_free(a->info);
  free(a);
}

static void lc_gadmin_free_req(Cairn__Client__Envelope *env)
{
  (void)env;
}

static struct cairn_group_info *lc_gadmin_info(const Cairn__Client__GroupDescription *d)
{
  struct cairn_group_info *g = calloc(1, sizeof *g);
  if (g == NULL) {
    return NULL;
  }
  g->group = lc_gdup(d->group);
  g->state = lc_gdup(d->state);
  g->strategy = lc_gdup(d->strategy);
  g->leader_id = lc_gdup(d->leader_id);
  g->generation = d->generation;
  g->coordinator_id = d->coordinator_id;
  g->members = calloc(d->n_members + 1, sizeof *g->members);
  g->offsets = calloc(d->n_offsets + 1, sizeof *g->offsets);
  bool ok = g->group != NULL && g->state != NULL && g->strategy != NULL && g->leader_id != NULL &&
            g->members != NULL && g->offsets != NULL;
  for (size_t i = 0; ok && i < d->n_members; i++) {
    const Cairn__Client__GroupMember *m = d->members[i];
    struct cairn_group_member_info *x = &g->members[g->member_count++];
    x->member_id = lc_gdup(m->member_id);
    x->client_id = lc_gdup(m->client_id);
    x->group_instance_id = lc_gdup(m->group_instance_id);
    size_t n = 0;
    for (size_t k = 0; k < m->n_assignment; k++) {
      n += m->assignment[k]->n_partitions;
    }
    x->assignment = calloc(n + 1, sizeof *x->assignment);
    ok = x->member_id != NULL && x->client_id != NULL && x->group_instance_id != NULL &&
         x->assignment != NULL;
    for (size_t k = 0; ok && k < m->n_assignment; k++) {
      for (size_t j = 0; ok && j < m->assignment[k]->n_partitions; j++) {
        struct cairn_group_partition *p = &x->assignment[x->assignment_count];
        p->topic = lc_gdup(m->assignment[k]->topic);
        p->partition = (int32_t)m->assignment[k]->partitions[j];
        ok = p->topic != NULL;
        x->assignment_count += ok;
      }
    }
  }
  for (size_t i = 0; ok && i < d->n_offsets; i++) {
    const Cairn__Client__GroupPartitionOffset *o = d->offsets[i];
    struct cairn_group_offset_info *x = &g->offsets[g->offset_count++];
    x->topic = lc_gdup(o->topic);
    x->member_id = lc_gdup(o->member_id);
    x->partition = (int32_t)o->partition;
    x->committed = o->committed;
    x->high_watermark = o->high_watermark;
    x->lag = o->lag;
    ok = x->topic != NULL && x->member_id != NULL;
  }
  if (!ok) {
    cairn_group_info_free(g);
    return NULL;
  }
  return g;
}

static enum lc_op_verdict lc_gadmin_verdict(struct lc_op *op, const Cairn__Client__Error *e)
{
  if (e == NULL || e->code == CAIRN__CLIENT__ERROR_CODE__OK) {
    op->status = 0;
    return LC_OP_DONE;
  }
  op->status = lc_wire_err((int)e->code);
  lc_fmt(op->errmsg, sizeof op->errmsg, "%s",
         e->message != NULL && e->message[0] != '\0' ? e->message : cairn_strerror(op->status));
  return lc_retriable(op->status) ? LC_OP_RETRY : LC_OP_DONE;
}

static enum lc_op_verdict lc_gadmin_on_answer(struct lc_op *op, Cairn__Client__Envelope *env)
{
  struct lc_gadmin *a = op->data;
  if (a->info_cb != NULL) {
    if (env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_GROUPS_RESP ||
        env->describe_groups_resp->n_groups != 1) {
      op->status = CAIRN_EPROTOCOL;
      return LC_OP_DONE;
    }
    const Cairn__Client__GroupDescription *d = env->describe_groups_resp->groups[0];
    enum lc_op_verdict v = lc_gadmin_verdict(op, d->error);
    if (op->status != 0) {
      return v;
    }
    a->info = lc_gadmin_info(d);
    op->status = a->info != NULL ? 0 : CAIRN_ENOMEM;
    return LC_OP_DONE;
  }
  if (a->env.body_case == CAIRN__CLIENT__ENVELOPE__BODY_LEAVE_GROUP_REQ) {
    if (env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_LEAVE_GROUP_RESP) {
      op->status = CAIRN_EPROTOCOL;
      return LC_OP_DONE;
    }
    return lc_gadmin_verdict(op, env->leave_group_resp->error);
  }
  if (env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_RESET_OFFSETS_RESP) {
    op->status = CAIRN_EPROTOCOL;
    return LC_OP_DONE;
  }
  const Cairn__Client__ResetOffsetsResponse *r = env->reset_offsets_resp;
  enum lc_op_verdict v = lc_gadmin_verdict(op, r->error);
  if (op->status != 0) {
    return v;
  }
  for (size_t i = 0; i < r->n_partitions; i++) {
    const Cairn__Client__Error *e = r->partitions[i]->error;
    if (e != NULL && e->code != CAIRN__CLIENT__ERROR_CODE__OK) {
      op->status = lc_wire_err((int)e->code);
      lc_fmt(op->errmsg, sizeof op->errmsg, "%s/%u: %s", r->partitions[i]->topic,
             r->partitions[i]->partition, e->message != NULL ? e->message : "");
      return LC_OP_DONE;
    }
  }
  return LC_OP_DONE;
}

static void lc_gadmin_on_done(struct lc_op *op)
{
  struct lc_gadmin *a = op->data;
  if (a->info_cb != NULL) {
    struct cairn_group_info *g = op->status == 0 ? a->info : NULL;
    a->info = NULL;
    a->info_cb(op->c, op->status, op->status != 0 ? op->errmsg : "", g, a->data);
  } else {
    a->done_cb(op->c, op->status, op->status != 0 ? op->errmsg : "", a->data);
  }
  lc_gadmin_free(a);
}

static int lc_gadmin_run(struct cairn_client *c, const char *group, struct lc_gadmin *a)
{
  struct lc_op *op = lc_op_new(c);
  if (op == NULL || (op->topic = strdup(group)) == NULL) {
    free(op);
    lc_gadmin_free(a);
    return CAIRN_ENOMEM;
  }
  op->target = LC_OP_COORDINATOR;
  op->req = &a->env;
  op->free_req = lc_gadmin_free_req;
  op->answer = lc_gadmin_on_answer;
  op->done = lc_gadmin_on_done;
  op->data = a;
  lc_op_start(c, op);
  return 0;
}

int cairn_describe_group(struct cairn_client *c, const char *group, cairn_group_info_cb cb,
                         void *data)
{
  if (group == NULL || group[0] == '\0' || cb == NULL) {
    return CAIRN_EINVAL;
  }
  struct lc_gadmin *a = calloc(1, sizeof *a);
  if (a == NULL || (a->names[0] = strdup(group)) == NULL) {
    free(a);
    return CAIRN_ENOMEM;
  }
  cairn__client__envelope__init(&a->env);
  cairn__client__describe_groups_request__init(&a->describe);
  a->describe.groups = a->names;
  a->describe.n_groups = 1;
  a->env.api = CAIRN__CLIENT__API__API_DESCRIBE_GROUPS;
  a->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_GROUPS_REQ;
  a->env.describe_groups_req = &a->describe;
  a->info_cb = cb;
  a->data = data;
  return lc_gadmin_run(c, group, a);
}

/* ResetOffsets of resets, or (drop) the deletion of their committed
 * offsets (delete_offsets: their offsets are not sent). */
static int lc_reset_offsets(struct cairn_client *c, const char *group,
                            const struct cairn_group_reset *resets, size_t count, bool drop,
                            cairn_done_cb cb, void *data)
{
  if (group == NULL || group[0] == '\0' || cb == NULL || resets == NULL || count == 0) {
    return CAIRN_EINVAL;
  }
  for (size_t i = 0; i < count; i++) {
    if (resets[i].topic == NULL || resets[i].partition < 0 || resets[i].offset < 0) {
      return CAIRN_EINVAL;
    }
  }
  struct lc_gadmin *a = calloc(1, sizeof *a);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  a->names[0] = strdup(group);
  a->parts = calloc(count, sizeof *a->parts);
  a->ptrs = calloc(count, sizeof *a->ptrs);
  a->topics = calloc(count, sizeof *a->topics);
  bool ok = a->names[0] != NULL && a->parts != NULL && a->ptrs != NULL && a->topics != NULL;
  for (size_t i = 0; ok && i < count; i++) {
    ok = (a->topics[i] = strdup(resets[i].topic)) != NULL;
    a->nparts += ok;
    cairn__client__offset_commit_partition__init(&a->parts[i]);
    a->parts[i].topic = a->topics[i];
    a->parts[i].partition = (uint32_t)resets[i].partition;
    a->parts[i].offset = resets[i].offset;
    a->ptrs[i] = &a->parts[i];
  }
  if (!ok) {
    lc_gadmin_free(a);
    return CAIRN_ENOMEM;
  }
  cairn__client__envelope__init(&a->env);
  cairn__client__reset_offsets_request__init(&a->reset);
  a->reset.group = a->names[0];
  a->reset.partitions = a->ptrs;
  a->reset.n_partitions = count;
  a->reset.delete_offsets = drop;
  a->env.api = CAIRN__CLIENT__API__API_RESET_OFFSETS;
  a->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_RESET_OFFSETS_REQ;
  a->env.reset_offsets_req = &a->reset;
  a->done_cb = cb;
  a->data = data;
  return lc_gadmin_run(c, group, a);
}

int cairn_reset_offsets(struct cairn_client *c, const char *group,
                        const struct cairn_group_reset *resets, size_t count, cairn_done_cb cb,
                        void *data)
{
  return lc_reset_offsets(c, group, resets, count, false, cb, data);
}

int cairn_delete_group_offsets(struct cairn_client *c, const char *group,
                               const struct cairn_group_partition *parts, size_t count,
                               cairn_done_cb cb, void *data)
{
  if (parts == NULL || count == 0 || count > SIZE_MAX / sizeof(struct cairn_group_reset)) {
    return CAIRN_EINVAL;
  }
  struct cairn_group_reset *v = calloc(count, sizeof *v);
  if (v == NULL) {
    return CAIRN_ENOMEM;
  }
  for (size_t i = 0; i < count; i++) {
    v[i] = (struct cairn_group_reset){parts[i].topic, parts[i].partition, 0};
  }
  int rv = lc_reset_offsets(c, group, v, count, true, cb, data); /* copies what it keeps */
  free(v);
  return rv;
}

int cairn_delete_group(struct cairn_client *c, const char *group, cairn_done_cb cb, void *data)
{
  if (group == NULL || group[0] == '\0' || cb == NULL) {
    return CAIRN_EINVAL;
  }
  struct lc_gadmin *a = calloc(1, sizeof *a);
  if (a == NULL || (a->names[0] = strdup(group)) == NULL) {
    free(a);
    return CAIRN_ENOMEM;
  }
  cairn__client__envelope__init(&a->env);
  cairn__client__reset_offsets_request__init(&a->reset);
  a->reset.group = a->names[0];
  a->reset.delete_group = 1; /* ResetOffsets to nothing: wire-compatible */
  a->env.api = CAIRN__CLIENT__API__API_RESET_OFFSETS;
  a->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_RESET_OFFSETS_REQ;
  a->env.reset_offsets_req = &a->reset;
  a->done_cb = cb;
  a->data = data;
  return lc_gadmin_run(c, group, a);
}

int cairn_remove_group_member(struct cairn_client *c, const char *group, const char *member_id,
                              const char *group_instance_id, cairn_done_cb cb, void *data)
{
  member_id = member_id != NULL ? member_id : "";
  group_instance_id = group_instance_id != NULL ? group_instance_id : "";
  if (group == NULL || group[0] == '\0' || cb == NULL ||
      (member_id[0] == '\0' && group_instance_id[0] == '\0')) {
    return CAIRN_EINVAL;
  }
  struct lc_gadmin *a = calloc(1, sizeof *a);
  if (a == NULL) {
    return CAIRN_ENOMEM;
  }
  a->names[0] = strdup(group);
  a->names[1] = strdup(member_id);
  a->names[2] = strdup(group_instance_id);
  if (a->names[0] == NULL || a->names[1] == NULL || a->names[2] == NULL) {
    lc_gadmin_free(a);
    return CAIRN_ENOMEM;
  }
  cairn__client__envelope__init(&a->env);
  cairn__client__leave_group_request__init(&a->leave);
  a->leave.group = a->names[0];
  a->leave.member_id = a->names[1];
  a->leave.group_instance_id = a->names[2];
  a->env.api = CAIRN__CLIENT__API__API_LEAVE_GROUP;
  a->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LEAVE_GROUP_REQ;
  a->env.leave_group_req = &a->leave;
  a->done_cb = cb;
  a->data = data;
  return lc_gadmin_run(c, group, a);
}

/* ---- ListGroups at every alive node ---- */

struct lc_glist {
  struct cairn_client *c;
  struct cairn_group_list *out;
  int pending;
  int answered;
  int status; /* the last failure */
  char errmsg[LC_ERRMSG_SIZE];
  cairn_group_list_cb cb;
  void *data;
};

static void lc_glist_finish(struct lc_glist *l)
{
  if (l->answered > 0 || l->status == 0) {
    l->cb(l->c, 0, "", l->out, l->data);
  } else {
    cairn_group_list_free(l->out);
    l->cb(l->c, l->status, l->errmsg, NULL, l->data);
  }
  free(l);
}

static int lc_glist_add(struct cairn_group_list *out, const Cairn__Client__GroupListing *g)
{
  for (size_t i = 0; i < out->count; i++) {
    if (strcmp(out->groups[i].group, g->group) == 0) {
      return 0; /* a coordinator that moved: listed by both for a moment */
    }
  }
  struct cairn_group_listing *v = realloc(out->groups, (out->count + 1) * sizeof *v);
  if (v == NULL) {
    return CAIRN_ENOMEM;
  }
  out->groups = v;
  struct cairn_group_listing *x = &v[out->count];
  x->group = lc_gdup(g->group);
  x->state = lc_gdup(g->state);
  x->members = g->members;
  x->coordinator_id = g->coordinator_id;
  if (x->group == NULL || x->state == NULL) {
    free(x->group);
    free(x->state);
    return CAIRN_ENOMEM;
  }
  out->count++;
  return 0;
}

static void lc_glist_on_answer(struct cairn_client *c, int status, Cairn__Client__Envelope *env,
                               const uint8_t *payload, size_t len, struct lc_buf *buf,
                              void *data)
{
  struct lc_glist *l = data;
  if (status == 0 && env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_LIST_GROUPS_RESP) {
    status = CAIRN_EPROTOCOL;
  }
  if (status == 0) {
    l->answered++;
    const Cairn__Client__ListGroupsResponse *r = env->list_groups_resp;
    for (size_t i = 0; i < r->n_groups && status == 0; i++) {
      status = lc_glist_add(l->out, r->groups[i]);
    }
  }
  if (status != 0) {
    l->status = status;
    lc_strlcpy(l->errmsg, cairn_strerror(status), sizeof l->errmsg);
  }
  if (--l->pending == 0) {
    lc_glist_finish(l);
  }
}

static int lc_glist_by_name(const void *a, const void *b)
{
  return strcmp(((const struct cairn_group_listing *)a)->group,
                ((const struct cairn_group_listing *)b)->group);
}

static void lc_glist_on_meta(struct cairn_client *c, int status, const char *errmsg, void *data)
{
  struct lc_glist *l = data;
  if (status != 0) {
    l->status = status;
    lc_strlcpy(l->errmsg, errmsg, sizeof l->errmsg);
    lc_glist_finish(l);
    return;
  }
  Cairn__Client__ListGroupsRequest r = CAIRN__CLIENT__LIST_GROUPS_REQUEST__INIT;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_LIST_GROUPS;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_GROUPS_REQ;
  env.list_groups_req = &r;
  l->pending = 1; /* held while sending */
  for (size_t i = 0; i < c->meta.nnodes; i++) {
    const struct lc_node *nd = &c->meta.nodes[i];
    if (!nd->alive || nd->addr[0] == '\0') {
      continue;
    }
    l->pending++;
    if (lc_call(c, nd->addr, &env, NULL, 0, c->opts.request_timeout_ms, lc_glist_on_answer, l) !=
        0) {
      l->pending--;
      l->status = CAIRN_ENOMEM;
    }
  }
  if (--l->pending == 0) {
    lc_glist_finish(l);
  }
}

int cairn_list_groups(struct cairn_client *c, cairn_group_list_cb cb, void *data)
{
  if (cb == NULL) {
    return CAIRN_EINVAL;
  }
  struct lc_glist *l = calloc(1, sizeof *l);
  if (l == NULL || (l->out = calloc(1, sizeof *l->out)) == NULL) {
    free(l);
    return CAIRN_ENOMEM;
  }
  l->c = c;
  l->cb = cb;
  l->data = data;
  int rv = lc_meta_refresh(c, lc_glist_on_meta, l);
  if (rv != 0) {
    free(l->out);
    free(l);
  }
  return rv;
}

/* ---- blocking versions ---- */

struct lc_gsync {
  bool done;
  int status;
  char *errmsg;
  size_t errmsg_len;
  void *result;
};

static void lc_gsync_msg(struct lc_gsync *w, int status, const char *errmsg)
{
  w->done = true;
  w->status = status;
  if (w->errmsg != NULL && w->errmsg_len > 0) {
    lc_strlcpy(w->errmsg, errmsg, w->errmsg_len);
  }
}

static void lc_gsync_on_list(struct cairn_client *c, int status, const char *errmsg,
                             struct cairn_group_list *l, void *data)
{
  struct lc_gsync *w = data;
  if (l != NULL && l->count > 1) {
    qsort(l->groups, l->count, sizeof *l->groups, lc_glist_by_name);
  }
  w->result = l;
  lc_gsync_msg(w, status, errmsg);
}

static void lc_gsync_on_info(struct cairn_client *c, int status, const char *errmsg,
                             struct cairn_group_info *g, void *data)
{
  struct lc_gsync *w = data;
  w->result = g;
  lc_gsync_msg(w, status, errmsg);
}

static void lc_gsync_on_done(struct cairn_client *c, int status, const char *errmsg, void *data)
{
  lc_gsync_msg(data, status, errmsg);
}

static int lc_gsync_wait(struct cairn_sync *s, struct lc_gsync *w, int rv)
{
  if (rv != 0) {
    lc_gsync_msg(w, rv, cairn_strerror(rv));
    return rv;
  }
  uv_loop_t *loop = cairn_client_loop(cairn_sync_client(s));
  while (!w->done) {
    uv_run(loop, UV_RUN_ONCE);
  }
  return w->status;
}

int cairn_sync_list_groups(struct cairn_sync *s, struct cairn_group_list **out, char *errmsg,
                           size_t errmsg_len)
{
  struct lc_gsync w = {.errmsg = errmsg, .errmsg_len = errmsg_len};
  int rv = lc_gsync_wait(s, &w, cairn_list_groups(cairn_sync_client(s), lc_gsync_on_list, &w));
  *out = w.result;
  return rv;
}

int cairn_sync_describe_group(struct cairn_sync *s, const char *group,
                              struct cairn_group_info **out, char *errmsg, size_t errmsg_len)
{
  struct lc_gsync w = {.errmsg = errmsg, .errmsg_len = errmsg_len};
  int rv =
      lc_gsync_wait(s, &w, cairn_describe_group(cairn_sync_client(s), group, lc_gsync_on_info, &w));
  *out = w.result;
  return rv;
}

int cairn_sync_delete_group(struct cairn_sync *s, const char *group, char *errmsg,
                            size_t errmsg_len)
{
  struct lc_gsync w = {.errmsg = errmsg, .errmsg_len = errmsg_len};
  return lc_gsync_wait(s, &w, cairn_delete_group(cairn_sync_client(s), group, lc_gsync_on_done, &w));
}

int cairn_sync_delete_group_offsets(struct cairn_sync *s, const char *group,
                                    const struct cairn_group_partition *parts, size_t count,
                                    char *errmsg, size_t errmsg_len)
{
  struct lc_gsync w = {.errmsg = errmsg, .errmsg_len = errmsg_len};
  return lc_gsync_wait(
      s, &w,
      cairn_delete_group_offsets(cairn_sync_client(s), group, parts, count, lc_gsync_on_done, &w));
}

int cairn_sync_remove_group_member(struct cairn_sync *s, const char *group, const char *member_id,
                                   const char *group_instance_id, char *errmsg, size_t errmsg_len)
{
  struct lc_gsync w = {.errmsg = errmsg, .errmsg_len = errmsg_len};
  return lc_gsync_wait(s, &w,
                       cairn_remove_group_member(cairn_sync_client(s), group, member_id,
                                                 group_instance_id, lc_gsync_on_done, &w));
}

int cairn_sync_reset_offsets(struct cairn_sync *s, const char *group,
                             const struct cairn_group_reset *resets, size_t count, char *errmsg,
                             size_t errmsg_len)
{
  struct lc_gsync w = {.errmsg = errmsg, .errmsg_len = errmsg_len};
  return lc_gsync_wait(
      s, &w, cairn_reset_offsets(cairn_sync_client(s), group, resets, count, lc_gsync_on_done, &w));
}
