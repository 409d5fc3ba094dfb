/* rgroup_cap.c - bounded AppendEntries for raft 0.15 (rgroup_cap.h).
 * Writes a follower's next_index in raft's public progress structure
 * (raft.h of 0.15). */
#include "cluster/rgroup_cap.h"

#include <string.h>

#define RGROUP_CAP_ENTRY_HEADER 16 /* raft_uv's per-entry header: term, type */
#define RGROUP_CAP_PIPELINE 1      /* raft 0.15 progress.h: PROGRESS__PIPELINE */

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
