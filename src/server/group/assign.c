/* assign.c - range, round-robin and sticky assignment (assign.h). */
#include "server/group/assign.h"

#include "common/err.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *const assign_names[ASSIGN_NSTRATEGIES] = {"range", "roundrobin", "sticky"};

const char *assign_strategy_name(enum assign_strategy s)
{
  return (unsigned)s < ASSIGN_NSTRATEGIES ? assign_names[s] : "?";
}

int assign_strategy_parse(const char *name)
{
  for (int i = 0; i < ASSIGN_NSTRATEGIES; i++) {
    if (strcmp(name, assign_names[i]) == 0) {
      return i;
    }
  }
  return -1;
}

/* Scratch shared by the strategies: which member subscribes to which topic,
 * where each topic's partitions start in a flat index, and the output
 * arrays under construction (each member's out has room for every
 * partition its subscription covers). */
struct assign_ctx {
  const uint32_t *counts;
  size_t ntopics;
  struct assign_member *m;
  size_t nm;
  bool *subs;     /* nm * ntopics */
  size_t *base;   /* ntopics + 1: prefix sums of counts */
  int32_t *owner; /* base[ntopics] entries: member index or -1 */
};

static bool assign_subscribes(const struct assign_ctx *c, size_t mi, uint32_t t)
{
  return c->subs[mi * c->ntopics + t];
}

static void assign_give(struct assign_ctx *c, size_t mi, uint32_t t, uint32_t p)
{
  struct assign_member *m = &c->m[mi];
  m->out[m->nout].topic = t;
  m->out[m->nout].partition = p;
  m->nout++;
  c->owner[c->base[t] + p] = (int32_t)mi;
}

static int assign_tp_cmp(const void *a, const void *b)
{
  const struct assign_tp *x = a, *y = b;
  if (x->topic != y->topic) {
    return x->topic < y->topic ? -1 : 1;
  }
  return x->partition < y->partition ? -1 : x->partition > y->partition;
}

static void assign_ctx_free(struct assign_ctx *c)
{
  free(c->subs);
  free(c->base);
  free(c->owner);
}

static int assign_ctx_init(struct assign_ctx *c, const uint32_t *counts, size_t ntopics,
                           struct assign_member *m, size_t nm)
{
  memset(c, 0, sizeof *c);
  c->counts = counts;
  c->ntopics = ntopics;
  c->m = m;
  c->nm = nm;
  c->subs = calloc(nm * ntopics + 1, sizeof *c->subs);
  c->base = calloc(ntopics + 1, sizeof *c->base);
  if (c->subs == NULL || c->base == NULL) {
    assign_ctx_free(c);
    return CAIRN_ENOMEM;
  }
  for (size_t t = 0; t < ntopics; t++) {
    c->base[t + 1] = c->base[t] + counts[t];
  }
  c->owner = malloc((c->base[ntopics] + 1) * sizeof *c->owner);
  if (c->owner == NULL) {
    assign_ctx_free(c);
    return CAIRN_ENOMEM;
  }
  for (size_t i = 0; i < c->base[ntopics]; i++) {
    c->owner[i] = -1;
  }
  for (size_t mi = 0; mi < nm; mi++) {
    size_t room = 0;
    for (size_t k = 0; k < m[mi].ntopics; k++) {
      uint32_t t = m[mi].topics[k];
      if (t >= ntopics) {
        assign_ctx_free(c);
        return CAIRN_EINVAL;
      }
      if (!c->subs[mi * ntopics + t]) {
        c->subs[mi * ntopics + t] = true;
        room += counts[t];
      }
    }
    m[mi].nout = 0;
    m[mi].out = room > 0 ? malloc(room * sizeof *m[mi].out) : NULL;
    if (room > 0 && m[mi].out == NULL) {
      for (size_t j = 0; j <= mi; j++) {
        free(m[j].out);
        m[j].out = NULL;
      }
      assign_ctx_free(c);
      return CAIRN_ENOMEM;
    }
  }
  return 0;
}

/* Range: per topic, its subscribers split the partitions into consecutive
 * ranges, the first (count % subscribers) taking one more. */
static void assign_range(struct assign_ctx *c)
{
  for (uint32_t t = 0; t < c->ntopics; t++) {
    size_t k = 0;
    for (size_t mi = 0; mi < c->nm; mi++) {
      k += assign_subscribes(c, mi, t);
    }
    if (k == 0) {
      continue;
    }
    uint32_t each = c->counts[t] / (uint32_t)k, extra = c->counts[t] % (uint32_t)k;
    uint32_t p = 0;
    size_t rank = 0;
    for (size_t mi = 0; mi < c->nm; mi++) {
      if (!assign_subscribes(c, mi, t)) {
        continue;
      }
      uint32_t take = each + (rank < extra ? 1 : 0);
      for (uint32_t j = 0; j < take; j++) {
        assign_give(c, mi, t, p++);
      }
      rank++;
    }
  }
}

/* Round-robin: every partition in (topic, partition) order goes to the
 * next member in turn that subscribes to its topic. */
static void assign_roundrobin(struct assign_ctx *c)
{
  size_t cur = 0;
  for (uint32_t t = 0; t < c->ntopics; t++) {
    for (uint32_t p = 0; p < c->counts[t]; p++) {
      for (size_t step = 0; step < c->nm; step++) {
        size_t mi = (cur + step) % c->nm;
        if (assign_subscribes(c, mi, t)) {
          assign_give(c, mi, t, p);
          cur = mi + 1;
          break;
        }
      }
    }
  }
}

/* Sticky: quotas as even as the total allows (floor or ceil of
 * partitions/members; the ceil goes to those who keep the most); each
 * member first keeps what it held, up to its quota; the rest go, in
 * (topic, partition) order, to the subscribing member furthest below its
 * quota (with different subscriptions a quota may be unreachable: then to
 * the subscriber holding the fewest). */
static int assign_sticky(struct assign_ctx *c)
{
  size_t nm = c->nm;
  size_t total = 0, active = 0;
  for (uint32_t t = 0; t < c->ntopics; t++) {
    bool any = false;
    for (size_t mi = 0; mi < nm && !any; mi++) {
      any = assign_subscribes(c, mi, t);
    }
    total += any ? c->counts[t] : 0;
  }
  for (size_t mi = 0; mi < nm; mi++) {
    active += c->m[mi].ntopics > 0;
  }
  if (active == 0) {
    return 0;
  }
  size_t *kept = calloc(nm, sizeof *kept);
  size_t *quota = calloc(nm, sizeof *quota);
  size_t *order = calloc(nm, sizeof *order);
  if (kept == NULL || quota == NULL || order == NULL) {
    free(kept);
    free(quota);
    free(order);
    return CAIRN_ENOMEM;
  }
  /* What each member could keep (first claim wins on duplicates). */
  for (size_t mi = 0; mi < nm; mi++) {
    const struct assign_member *m = &c->m[mi];
    for (size_t k = 0; k < m->nprev; k++) {
      uint32_t t = m->prev[k].topic, p = m->prev[k].partition;
      if (t < c->ntopics && p < c->counts[t] && assign_subscribes(c, mi, t) &&
          c->owner[c->base[t] + p] < 0) {
        c->owner[c->base[t] + p] = (int32_t)mi;
        kept[mi]++;
      }
    }
  }
  /* Quotas: the ceil to the members keeping the most (stable by index). */
  for (size_t i = 0; i < nm; i++) {
    order[i] = i;
  }
  for (size_t i = 1; i < nm; i++) {
    for (size_t j = i; j > 0 && kept[order[j]] > kept[order[j - 1]]; j--) {
      size_t tmp = order[j];
      order[j] = order[j - 1];
      order[j - 1] = tmp;
    }
  }
  size_t each = total / active, extra = total % active, rank = 0;
  for (size_t i = 0; i < nm; i++) {
    size_t mi = order[i];
    if (c->m[mi].ntopics == 0) {
      continue;
    }
    quota[mi] = each + (rank++ < extra ? 1 : 0);
  }
  /* Keep up to the quota, in (topic, partition) order; free the excess. */
  for (uint32_t t = 0; t < c->ntopics; t++) {
    for (uint32_t p = 0; p < c->counts[t]; p++) {
      int32_t o = c->owner[c->base[t] + p];
      if (o < 0) {
        continue;
      }
      if (c->m[o].nout < quota[o]) {
        assign_give(c, (size_t)o, t, p);
      } else {
        c->owner[c->base[t] + p] = -1;
      }
    }
  }
  /* The rest. */
  for (uint32_t t = 0; t < c->ntopics; t++) {
    for (uint32_t p = 0; p < c->counts[t]; p++) {
      if (c->owner[c->base[t] + p] >= 0) {
        continue;
      }
      size_t best = nm;
      long best_room = 0;
      for (size_t mi = 0; mi < nm; mi++) {
        if (!assign_subscribes(c, mi, t)) {
          continue;
        }
        /* Below quota: the most room first; else the fewest held. */
        long room = (long)quota[mi] - (long)c->m[mi].nout;
        if (room <= 0) {
          room = -(long)c->m[mi].nout - 1;
        }
        if (best == nm || room > best_room) {
          best = mi;
          best_room = room;
        }
      }
      if (best < nm) {
        assign_give(c, best, t, p);
      }
    }
  }
  free(kept);
  free(quota);
  free(order);
  return 0;
}

int assign_run(enum assign_strategy s, const uint32_t *counts, size_t ntopics,
               struct assign_member *m, size_t nm)
{
  if ((unsigned)s >= ASSIGN_NSTRATEGIES) {
    return CAIRN_EINVAL;
  }
  struct assign_ctx c;
  int rv = assign_ctx_init(&c, counts, ntopics, m, nm);
  if (rv != 0) {
    return rv;
  }
  switch (s) {
  case ASSIGN_RANGE:
    assign_range(&c);
    break;
  case ASSIGN_ROUNDROBIN:
    assign_roundrobin(&c);
    break;
  default:
    rv = assign_sticky(&c);
    break;
  }
  assign_ctx_free(&c);
  for (size_t mi = 0; mi < nm; mi++) {
    if (rv != 0) {
      free(m[mi].out);
      m[mi].out = NULL;
      m[mi].nout = 0;
    } else if (m[mi].nout > 1) {
      qsort(m[mi].out, m[mi].nout, sizeof *m[mi].out, assign_tp_cmp);
    } else if (m[mi].nout == 0) {
      free(m[mi].out);
      m[mi].out = NULL;
    }
  }
  return rv;
}
