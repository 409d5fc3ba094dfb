/* ctl_claims.c - ReportLeader proposals in flight (ctl_claims.h). */
#include "cluster/ctl_claims.h"

#include <stdlib.h>

#define CTL_CLAIMS_FIRST 64

void ctl_claims_init(struct ctl_claims *c)
{
  c->v = NULL;
  c->n = c->cap = 0;
}

void ctl_claims_free(struct ctl_claims *c)
{
  free(c->v);
  ctl_claims_init(c);
}

void ctl_claims_clear(struct ctl_claims *c)
{
  for (size_t i = 0; i < c->cap; i++) {
    c->v[i].used = false;
  }
  c->n = 0;
}

static uint64_t ctl_claims_key(uint32_t topic_id, uint32_t partition)
{
  return (uint64_t)topic_id << 32 | partition;
}

/* The slot of key, or the free slot where it would go (cap > n). */
static size_t ctl_claims_slot(const struct ctl_claims *c, uint64_t key)
{
  size_t mask = c->cap - 1;
  size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
  while (c->v[i].used && c->v[i].key != key) {
    i = (i + 1) & mask;
  }
  return i;
}

/* Room for one more at a load of at most a half. Returns false without
 * memory (the set is unchanged). */
static bool ctl_claims_room(struct ctl_claims *c)
{
  if (2 * (c->n + 1) <= c->cap) {
    return true;
  }
  size_t cap = c->cap > 0 ? 2 * c->cap : CTL_CLAIMS_FIRST;
  struct ctl_claim *v = calloc(cap, sizeof *v);
  if (v == NULL) {
    return false;
  }
  struct ctl_claims grown = {.v = v, .n = c->n, .cap = cap};
  for (size_t i = 0; i < c->cap; i++) {
    if (c->v[i].used) {
      grown.v[ctl_claims_slot(&grown, c->v[i].key)] = c->v[i];
    }
  }
  free(c->v);
  *c = grown;
  return true;
}

bool ctl_claims_take(struct ctl_claims *c, uint32_t topic_id, uint32_t partition, uint64_t node_id,
                     uint64_t term)
{
  uint64_t key = ctl_claims_key(topic_id, partition);
  if (c->cap > 0) {
    struct ctl_claim *e = &c->v[ctl_claims_slot(c, key)];
    if (e->used && e->node_id == node_id && e->term >= term) {
      return false;
    }
    if (e->used) {
      e->node_id = node_id; /* a newer term or another node replaces it */
      e->term = term;
      return true;
    }
  }
  if (!ctl_claims_room(c)) {
    return true;
  }
  c->v[ctl_claims_slot(c, key)] =
      (struct ctl_claim){.key = key, .node_id = node_id, .term = term, .used = true};
  c->n++;
  return true;
}

/* Empties slot i and moves back the entries after it that probed past it
 * (linear probing without tombstones). */
static void ctl_claims_remove_at(struct ctl_claims *c, size_t i)
{
  size_t mask = c->cap - 1;
  c->v[i].used = false;
  c->n--;
  for (size_t j = (i + 1) & mask; c->v[j].used; j = (j + 1) & mask) {
    size_t home = (size_t)((c->v[j].key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
    /* j's entry may move to i if i lies cyclically in [home, j). */
    bool movable = i <= j ? home <= i || home > j : home <= i && home > j;
    if (movable) {
      c->v[i] = c->v[j];
      c->v[j].used = false;
      i = j;
    }
  }
}

void ctl_claims_end(struct ctl_claims *c, uint32_t topic_id, uint32_t partition, uint64_t node_id,
                    uint64_t term)
{
  if (c->cap == 0) {
    return;
  }
  size_t i = ctl_claims_slot(c, ctl_claims_key(topic_id, partition));
  if (c->v[i].used && c->v[i].node_id == node_id && c->v[i].term == term) {
    ctl_claims_remove_at(c, i);
  }
}
