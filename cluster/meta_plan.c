/* meta_plan.c - the repair planner (rules in meta_plan.h): liveness marks,
 * one-step replica moves, and the end of a decommission. */
#include "cluster/meta_plan.h"

#include "cluster/placement.h"
#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void meta_plan_opts_default(struct meta_plan_opts *o)
{
  o->node_timeout_ms = 10000;
  o->replace_delay_ms = 5 * 60 * 1000;
  o->max_commands = 32;
  o->max_moves = 16;
}

void meta_plan_out_free(struct meta_plan_out *out)
{
  for (size_t i = 0; i < out->ncmds; i++)
    free(out->cmds[i].cmd);
  free(out->cmds);
  memset(out, 0, sizeof *out);
}

struct meta_plan_ctx {
  const struct meta_plan_input *in;
  struct meta_plan_out *out;
  struct placement_table table;
  bool *leaving;                           /* per st->nodes index: its replicas move away */
  const struct meta_plan_config **configs; /* in->configs by (topic, partition) */
  size_t moves;                            /* partitions over rf, with this run's additions */
};

static bool meta_plan_full(const struct meta_plan_ctx *x)
{
  return x->out->ncmds >= x->in->opts.max_commands;
}

/* Appends a command; takes cmd. The caller checked there is room. */
__attribute__((format(printf, 4, 5))) static int
meta_plan_emit(struct meta_plan_ctx *x, uint8_t *cmd, size_t len, const char *fmt, ...)
{
  struct meta_plan_cmd *c = &x->out->cmds[x->out->ncmds++];
  c->cmd = cmd;
  c->len = len;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, sizeof c->why, fmt, ap);
  va_end(ap);
  return 0;
}

/* ms since the registered incarnation of n was last heard, or -1 when the
 * view has no entry for that incarnation (no opinion). */
static int64_t meta_plan_silence(const struct meta_plan_input *in, const struct meta_node *n)
{
  for (size_t i = 0; i < in->nlive; i++)
    if (in->live[i].node_id == n->id)
      return in->live[i].incarnation == n->incarnation ? (int64_t)in->live[i].ms_since_heartbeat
                                                       : -1;
  return -1;
}

static int meta_plan_liveness(struct meta_plan_ctx *x)
{
  const struct meta_state *st = x->in->st;
  const struct meta_plan_opts *o = &x->in->opts;
  for (size_t i = 0; i < st->nnodes && !meta_plan_full(x); i++) {
    const struct meta_node *n = &st->nodes[i];
    int64_t silent = meta_plan_silence(x->in, n);
    if (silent < 0)
      continue;
    enum meta_node_state to;
    if (n->state == META_NODE_ALIVE && (uint64_t)silent >= o->node_timeout_ms)
      to = META_NODE_DEAD;
    else if (n->state == META_NODE_DEAD && (uint64_t)silent < o->node_timeout_ms)
      to = META_NODE_ALIVE;
    else
      continue;
    uint8_t *cmd;
    size_t len;
    int rc = meta_cmd_set_node_state(n->id, to, n->incarnation, x->in->now_ms, &cmd, &len);
    if (rc != 0)
      return rc;
    /* No replica moves to a node this run declares dead (SetReplicas would
     * be refused after the DEAD mark). One declared alive again becomes a
     * candidate in the next run, once the state says so. */
    if (to == META_NODE_DEAD)
      placement_set_eligible(&x->table, n->id, false);
    meta_plan_emit(x, cmd, len, "node %llu %s: silent for %lld ms (timeout %llu)",
                   (unsigned long long)n->id, to == META_NODE_DEAD ? "is dead" : "is back",
                   (long long)silent, (unsigned long long)o->node_timeout_ms);
  }
  return 0;
}

static bool meta_plan_node_leaving(const struct meta_plan_input *in, const struct meta_node *n)
{
  switch (n->state) {
  case META_NODE_DRAINING:
  case META_NODE_REMOVED:
    return true;
  case META_NODE_DEAD: {
    int64_t silent = meta_plan_silence(in, n);
    return silent >= 0 && (uint64_t)silent >= in->opts.node_timeout_ms + in->opts.replace_delay_ms;
  }
  case META_NODE_ALIVE:
    return false;
  }
  return false;
}

static bool meta_plan_leaving(const struct meta_plan_ctx *x, uint64_t node_id)
{
  const struct meta_node *n = meta_node_find(x->in->st, node_id);
  if (n == NULL)
    return true; /* a replica on a node the state does not know cannot serve */
  return x->leaving[n - x->in->st->nodes];
}

static int meta_plan_config_cmp(const void *a, const void *b)
{
  const struct meta_plan_config *ca = *(const struct meta_plan_config *const *)a;
  const struct meta_plan_config *cb = *(const struct meta_plan_config *const *)b;
  if (ca->topic_id != cb->topic_id)
    return ca->topic_id < cb->topic_id ? -1 : 1;
  if (ca->partition != cb->partition)
    return ca->partition < cb->partition ? -1 : 1;
  return 0;
}

static const struct meta_plan_config *meta_plan_config_find(const struct meta_plan_ctx *x,
                                                            uint32_t topic_id, uint32_t partition)
{
  struct meta_plan_config key = {.topic_id = topic_id, .partition = partition};
  const struct meta_plan_config *kp = &key;
  const struct meta_plan_config **hit =
      bsearch(&kp, x->configs, x->in->nconfigs, sizeof *x->configs, meta_plan_config_cmp);
  return hit != NULL ? *hit : NULL;
}

/* The per-run indexes: which nodes are leaving, configurations by key. */
static int meta_plan_index(struct meta_plan_ctx *x)
{
  const struct meta_plan_input *in = x->in;
  x->leaving = calloc(in->st->nnodes + 1, sizeof *x->leaving);
  x->configs = calloc(in->nconfigs + 1, sizeof *x->configs);
  if (x->leaving == NULL || x->configs == NULL)
    return CAIRN_ENOMEM;
  for (size_t i = 0; i < in->st->nnodes; i++)
    x->leaving[i] = meta_plan_node_leaving(in, &in->st->nodes[i]);
  for (size_t i = 0; i < in->nconfigs; i++)
    x->configs[i] = &in->configs[i];
  for (size_t i = 0; i < in->st->ntopics; i++) {
    const struct meta_topic *t = &in->st->topics[i];
    for (uint32_t p = 0; p < t->npartitions; p++)
      if (t->partitions[p].nreplicas > t->replication_factor)
        x->moves++;
  }
  if (in->nconfigs > 1)
    qsort(x->configs, in->nconfigs, sizeof *x->configs, meta_plan_config_cmp);
  return 0;
}

/* Every staying replica is a voter of the configuration reported for this
 * very replica epoch. */
static bool meta_plan_caught_up(const struct meta_plan_ctx *x, uint32_t topic_id,
                                uint32_t partition, const struct meta_partition *p,
                                const uint64_t *staying, uint32_t nstaying)
{
  const struct meta_plan_config *c = meta_plan_config_find(x, topic_id, partition);
  if (c == NULL || c->replica_epoch != p->replica_epoch)
    return false;
  for (uint32_t i = 0; i < nstaying; i++) {
    bool voter = false;
    for (size_t j = 0; j < c->nvoters && !voter; j++)
      voter = c->voters[j] == staying[i];
    if (!voter)
      return false;
  }
  return true;
}

/* Proposes replicas = p's list without the one at index `drop`. */
static int meta_plan_remove(struct meta_plan_ctx *x, const struct meta_topic *t, uint32_t part,
                            const struct meta_partition *p, uint32_t drop, const char *reason)
{
  uint64_t next[META_MAX_REPLICAS];
  uint32_t n = 0;
  for (uint32_t i = 0; i < p->nreplicas; i++)
    if (i != drop)
      next[n++] = p->replicas[i];
  uint8_t *cmd;
  size_t len;
  int rc = meta_cmd_set_replicas(t->id, part, next, n, p->replica_epoch, &cmd, &len);
  if (rc != 0)
    return rc;
  placement_unload(&x->table, p->replicas[drop], drop == 0);
  return meta_plan_emit(x, cmd, len, "%s/%u: remove replica %llu (%s)", t->name, part,
                        (unsigned long long)p->replicas[drop], reason);
}

/* A node without a capability the topic needs (a postgresql topic placed
 * on a node without a database by older metadata) cannot open the replica:
 * it moves away like one on a leaving node. */
static bool meta_plan_unfit(const struct meta_plan_ctx *x, const struct meta_topic *t,
                            uint64_t node_id)
{
  uint32_t need = meta_topic_needs(&t->config);
  const struct meta_node *n = meta_node_find(x->in->st, node_id);
  return need != 0 && n != NULL && (n->caps & need) != need;
}

static int meta_plan_partition(struct meta_plan_ctx *x, const struct meta_topic *t, uint32_t part)
{
  const struct meta_partition *p = &t->partitions[part];
  uint64_t staying[META_MAX_REPLICAS];
  uint32_t nstaying = 0;
  int64_t first_leaving = -1;
  for (uint32_t i = 0; i < p->nreplicas; i++) {
    if (meta_plan_leaving(x, p->replicas[i]) || meta_plan_unfit(x, t, p->replicas[i])) {
      if (first_leaving < 0)
        first_leaving = i;
    } else {
      staying[nstaying++] = p->replicas[i];
    }
  }
  if (nstaying < t->replication_factor) {
    if (p->nreplicas >= META_MAX_REPLICAS)
      return 0;
    /* Only an addition that takes the partition over rf starts a move; one
     * to a partition already over rf continues its move (blocking it would
     * deadlock: it cannot shrink before it has rf staying replicas), one to
     * a partition under rf restores redundancy and is never held back. */
    bool starts_move = p->nreplicas == t->replication_factor;
    if (starts_move && x->in->opts.max_moves != 0 && x->moves >= x->in->opts.max_moves)
      return 0; /* enough replicas catching up already */
    uint64_t leaving = first_leaving >= 0 ? p->replicas[first_leaving] : 0;
    uint64_t pick;
    placement_table_require(&x->table, meta_topic_needs(&t->config));
    if (placement_pick(&x->table, p->replicas, p->nreplicas, leaving, &pick) != 0)
      return 0; /* no ALIVE (and capable) node outside the partition: wait for one */
    uint64_t next[META_MAX_REPLICAS];
    memcpy(next, p->replicas, p->nreplicas * sizeof *next);
    next[p->nreplicas] = pick;
    uint8_t *cmd;
    size_t len;
    int rc =
        meta_cmd_set_replicas(t->id, part, next, p->nreplicas + 1, p->replica_epoch, &cmd, &len);
    if (rc != 0)
      return rc;
    if (starts_move)
      x->moves++;
    return meta_plan_emit(x, cmd, len, "%s/%u: add replica %llu (%u of %u replicas staying)",
                          t->name, part, (unsigned long long)pick, nstaying, t->replication_factor);
  }
  if (first_leaving < 0 && p->nreplicas <= t->replication_factor)
    return 0;
  if (!meta_plan_caught_up(x, t->id, part, p, staying, nstaying))
    return 0; /* wait until the new replica is a voter */
  if (first_leaving >= 0)
    return meta_plan_remove(x, t, part, p, (uint32_t)first_leaving,
                            meta_plan_unfit(x, t, p->replicas[first_leaving])
                                ? "its node has no PostgreSQL database"
                                : "its node is leaving");
  return meta_plan_remove(x, t, part, p, p->nreplicas - 1, "more replicas than rf");
}

static int meta_plan_drained(struct meta_plan_ctx *x)
{
  const struct meta_state *st = x->in->st;
  for (size_t i = 0; i < st->nnodes && !meta_plan_full(x); i++) {
    const struct meta_node *n = &st->nodes[i];
    if (n->state != META_NODE_DRAINING)
      continue;
    uint32_t replicas, leaders;
    meta_node_load(st, n->id, &replicas, &leaders);
    if (replicas > 0)
      continue;
    uint8_t *cmd;
    size_t len;
    int rc = meta_cmd_set_node_state(n->id, META_NODE_REMOVED, n->incarnation, x->in->now_ms, &cmd,
                                     &len);
    if (rc != 0)
      return rc;
    meta_plan_emit(x, cmd, len, "node %llu drained: no replica left", (unsigned long long)n->id);
  }
  return 0;
}

int meta_plan_run(const struct meta_plan_input *in, struct meta_plan_out *out)
{
  memset(out, 0, sizeof *out);
  if (in->opts.max_commands == 0)
    return 0;
  struct meta_plan_ctx x = {.in = in, .out = out};
  out->cmds = calloc(in->opts.max_commands, sizeof *out->cmds);
  if (out->cmds == NULL)
    return CAIRN_ENOMEM;
  int rc = placement_table_build(in->st, &x.table);
  if (rc == 0)
    rc = meta_plan_index(&x);
  if (rc == 0)
    rc = meta_plan_liveness(&x);
  const struct meta_state *st = in->st;
  for (size_t i = 0; rc == 0 && i < st->ntopics && !meta_plan_full(&x); i++)
    for (uint32_t p = 0; rc == 0 && p < st->topics[i].npartitions && !meta_plan_full(&x); p++)
      rc = meta_plan_partition(&x, &st->topics[i], p);
  if (rc == 0)
    rc = meta_plan_drained(&x);
  placement_table_free(&x.table);
  free(x.leaving);
  free(x.configs);
  if (rc != 0)
    meta_plan_out_free(out);
  return rc;
}
