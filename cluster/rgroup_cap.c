/* rgroup_cap.c - bounded AppendEntries and verified follower answers for
 * raft 0.15 (rgroup_cap.h). Reads and, on the leader, writes raft's
 * public progress and log structures (raft.h of 0.15). */
#include "cluster/rgroup_cap.h"

#include <string.h>

#define RGROUP_CAP_ENTRY_HEADER 16 /* raft_uv's per-entry header: term, type */
#define RGROUP_CAP_PIPELINE 1      /* raft 0.15 progress.h: PROGRESS__PIPELINE */

/* The term of raft's log at index, 0 if the log neither holds the entry
 * nor ends a snapshot there (what raft's own logTermOf answers). */
static raft_term rgroup_cap_term_of(const struct raft *r, raft_index index)
{
  const struct raft_log *l = &r->log;
  if (index == 0) {
    return 0;
  }
  size_t n = l->front <= l->back ? l->back - l->front : l->size - l->front + l->back;
  if (index > l->offset + n) {
    return 0;
  }
  if (index == l->snapshot.last_index) {
    return l->snapshot.last_term;
  }
  if (index <= l->offset) {
    return 0;
  }
  return l->entries[(l->front + (size_t)(index - 1 - l->offset)) % l->size].term;
}

unsigned rgroup_cap_count(const struct raft_append_entries *m)
{
  size_t bytes = 0;
  for (unsigned i = 0; i < m->n_entries; i++) {
    bytes += m->entries[i].buf.len + RGROUP_CAP_ENTRY_HEADER;
    if (bytes > RGROUP_CAP_BYTES && i > 0) {
      return i;
    }
  }
  return m->n_entries;
}

static struct rgroup_cap_peer *rgroup_cap_peer(struct rgroup_cap *cap, raft_id id, bool add)
{
  struct rgroup_cap_peer *free_slot = NULL;
  for (size_t i = 0; i < RGROUP_CAP_PEERS; i++) {
    if (cap->peers[i].id == id) {
      return &cap->peers[i];
    }
    if (cap->peers[i].id == 0 && free_slot == NULL) {
      free_slot = &cap->peers[i];
    }
  }
  if (add && free_slot != NULL) {
    free_slot->id = id;
  }
  return add ? free_slot : NULL;
}

void rgroup_cap_sent(struct rgroup_cap *cap, raft_term term, raft_id id,
                     const struct raft_append_entries *m, unsigned n)
{
  struct rgroup_cap_peer *p = rgroup_cap_peer(cap, id, true);
  if (p == NULL) {
    return;
  }
  p->term = term;
  p->end = m->prev_log_index + n;
  cap->bounded++;
}

void rgroup_cap_on_result(struct rgroup_cap *cap, struct raft *r, raft_id id,
                          const struct raft_append_entries_result *res)
{
  struct rgroup_cap_peer *p = rgroup_cap_peer(cap, id, false);
  if (p == NULL || p->end == 0 || r->state != RAFT_LEADER || res->rejected != 0 ||
      res->term != r->current_term || p->term != r->current_term || res->last_log_index < p->end) {
    return; /* not an answer that covers the bounded message */
  }
  p->end = 0;
  for (unsigned i = 0; i < r->configuration.n; i++) {
    if (r->configuration.servers[i].id != id) {
      continue;
    }
    struct raft_progress *pr = &r->leader_state.progress[i];
    raft_index last = res->last_log_index;
    /* raft's pipeline state moved next_index past the entries left out;
     * probe and snapshot states do not move it on send. A result older
     * than the match already known changes nothing. */
    if (pr->state == RGROUP_CAP_PIPELINE && last >= pr->match_index && pr->next_index > last + 1) {
      pr->next_index = last + 1;
    }
    return;
  }
}

void rgroup_cap_recv_begin(struct rgroup_cap *cap, const struct raft_message *m)
{
  cap->cur.end_term = 0;
  if (m->type == RAFT_IO_APPEND_ENTRIES) {
    const struct raft_append_entries *a = &m->append_entries;
    cap->cur.term = a->term;
    cap->cur.end = a->prev_log_index + a->n_entries;
    cap->cur.end_term = a->n_entries > 0 ? a->entries[a->n_entries - 1].term : a->prev_log_term;
  } else if (m->type == RAFT_IO_INSTALL_SNAPSHOT) {
    const struct raft_install_snapshot *s = &m->install_snapshot;
    cap->snap = (struct rgroup_cap_mark){s->term, s->last_index, s->last_term};
  }
}

/* Raises verified_end by mark if the log now holds the leader's term there. */
static void rgroup_cap_verify(struct rgroup_cap *cap, struct raft *r,
                              const struct rgroup_cap_mark *mark)
{
  if (mark->end_term == 0 || mark->term != r->current_term) {
    return;
  }
  if (cap->verified_term != r->current_term) {
    cap->verified_term = r->current_term;
    cap->verified_end = 0;
  }
  if (mark->end > cap->verified_end && rgroup_cap_term_of(r, mark->end) == mark->end_term) {
    cap->verified_end = mark->end;
  }
}

void rgroup_cap_recv_end(struct rgroup_cap *cap, struct raft *r)
{
  rgroup_cap_verify(cap, r, &cap->cur);
  cap->cur.end_term = 0;
}

raft_index rgroup_cap_bound(struct rgroup_cap *cap, struct raft *r, raft_index stored)
{
  /* raft answers some messages from inside its receive (nothing new to
   * write), before recv_end: check the one being received too. */
  rgroup_cap_verify(cap, r, &cap->cur);
  rgroup_cap_verify(cap, r, &cap->snap);
  raft_index bound = cap->verified_term == r->current_term ? cap->verified_end : 0;
  if (stored <= bound) {
    return stored;
  }
  cap->clamped++;
  return bound;
}
