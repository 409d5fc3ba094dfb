/* vouch.c - sparse coalesced beats: the per-peer table (vouch.h). */
#include "cluster/vouch.h"

#include "common/err.h"

#include <stdlib.h>
#include <string.h>

void vouch_init(struct vouch_table *t, uint64_t seed)
{
  memset(t, 0, sizeof *t);
  t->seed = seed;
}

void vouch_free(struct vouch_table *t)
{
  for (size_t i = 0; i < t->n; i++) {
    free(t->v[i].nacks.v);
    free(t->v[i].revokes.v);
  }
  free(t->v);
  free(t->to_name);
  memset(t, 0, sizeof *t);
}

struct vouch_peer *vouch_get(struct vouch_table *t, uint64_t id)
{
  for (size_t i = 0; i < t->n; i++) {
    if (t->v[i].id == id) {
      return &t->v[i];
    }
  }
  return NULL;
}

struct vouch_peer *vouch_add(struct vouch_table *t, uint64_t id)
{
  struct vouch_peer *p = vouch_get(t, id);
  if (p != NULL) {
    return p;
  }
  if (t->n == t->cap) {
    size_t cap = t->cap > 0 ? t->cap * 2 : 8;
    struct vouch_peer *v = realloc(t->v, cap * sizeof *v);
    if (v == NULL) {
      return NULL;
    }
    t->v = v;
    t->cap = cap;
  }
  p = &t->v[t->n++];
  memset(p, 0, sizeof *p);
  p->id = id;
  /* An epoch no earlier run of this node is likely to have used with this
   * peer: a follower that kept vouches from before this node restarted
   * sees another epoch and drops them. */
  p->out_epoch = (t->seed ^ (id * 0x9E3779B97F4A7C15ull)) | 1;
  return p;
}

void vouch_bump(struct vouch_peer *p)
{
  p->out_epoch += 2; /* stays odd, never 0 */
  p->out_bumped = true;
  p->answered_ms = 0;
  p->revokes.n = 0; /* nothing is vouched for at the new epoch: nothing to revoke */
}

int vouch_list_add(struct vouch_list *l, uint64_t group_id, uint64_t term, uint64_t index)
{
  if (l->n == l->cap) {
    size_t cap = l->cap > 0 ? l->cap * 2 : 16;
    struct vouch_entry *v = realloc(l->v, cap * sizeof *v);
    if (v == NULL) {
      return CAIRN_ENOMEM;
    }
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = (struct vouch_entry){.group_id = group_id, .term = term, .index = index};
  return 0;
}

void vouch_revoke(struct vouch_table *t, uint64_t id, uint64_t group_id, uint64_t term)
{
  struct vouch_peer *p = vouch_get(t, id);
  if (p == NULL) {
    return; /* never beaten: nothing vouched for there */
  }
  if (vouch_list_add(&p->revokes, group_id, term, VOUCH_REVOKED) != 0) {
    vouch_bump(p);
  }
}

void vouch_nack(struct vouch_table *t, uint64_t id, uint64_t group_id, uint64_t term,
                uint64_t index)
{
  struct vouch_peer *p = vouch_get(t, id);
  if (p != NULL && vouch_list_add(&p->nacks, group_id, term, index) != 0) {
    return; /* dropped (vouch.h) */
  }
}

int vouch_to_name(struct vouch_table *t, uint64_t group_id)
{
  if (t->nto_name == t->cap_to_name) {
    size_t cap = t->cap_to_name > 0 ? t->cap_to_name * 2 : 64;
    uint64_t *v = realloc(t->to_name, cap * sizeof *v);
    if (v == NULL) {
      return CAIRN_ENOMEM;
    }
    t->to_name = v;
    t->cap_to_name = cap;
  }
  t->to_name[t->nto_name++] = group_id;
  return 0;
}
