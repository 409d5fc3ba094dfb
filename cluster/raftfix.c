/* raftfix.c - rules every Raft group applies to raft 0.15's messages
 * (raftfix.h). */
#include "cluster/raftfix.h"

void raftfix_clamp_begin(struct raftfix_clamp *c, const struct raft_message *m)
{
  if (m->type != RAFT_IO_APPEND_ENTRIES) {
    return;
  }
  /* read before raft takes the entries */
  c->end = m->append_entries.prev_log_index + m->append_entries.n_entries;
  c->receiving = true;
}

void raftfix_clamp_end(struct raftfix_clamp *c)
{
  c->receiving = false;
}

bool raftfix_clamp(struct raftfix_clamp *c, const struct raft_message *m, struct raft_message *copy)
{
  if (!c->receiving || m->type != RAFT_IO_APPEND_ENTRIES_RESULT ||
      m->append_entries_result.rejected != 0 || m->append_entries_result.last_log_index <= c->end) {
    return false;
  }
  *copy = *m;
  copy->append_entries_result.last_log_index = c->end;
  c->clamped++;
  return true;
}

void raftfix_discard_entries(struct raft_append_entries *ae)
{
  void *freed = NULL;
  for (unsigned i = 0; i < ae->n_entries; i++) {
    if (ae->entries[i].batch != NULL && ae->entries[i].batch != freed) {
      freed = ae->entries[i].batch;
      raft_free(freed);
    }
  }
  raft_free(ae->entries);
  ae->entries = NULL;
  ae->n_entries = 0;
}

bool raftfix_below_snapshot(const struct raft *r, struct raft_message *m)
{
  if (m->type != RAFT_IO_APPEND_ENTRIES) {
    return false;
  }
  struct raft_append_entries *ae = &m->append_entries;
  raft_index s = r->log.snapshot.last_index;
  if (s == 0 || ae->prev_log_index >= s || ae->prev_log_index > r->log.offset) {
    return false; /* no snapshot, or prev is at s or in the log: raft checks it */
  }
  if (ae->term < r->current_term || r->last_stored < s) {
    return false; /* an old leader's (raft refuses it), or a snapshot being installed */
  }
  raftfix_discard_entries(ae);
  ae->prev_log_index = s;
  ae->prev_log_term = r->log.snapshot.last_term;
  if (ae->leader_commit > s) {
    ae->leader_commit = s;
  }
  return true;
}

bool raftfix_vote_unstick(const struct raft *r, struct raft_message *m, unsigned election_ms)
{
  if (m->type != RAFT_IO_REQUEST_VOTE || r->state != RAFT_FOLLOWER ||
      m->request_vote.disrupt_leader) {
    return false;
  }
  raft_time now = r->io->time(r->io);
  if (now < r->election_timer_start || now - r->election_timer_start < election_ms) {
    return false;
  }
  m->request_vote.disrupt_leader = true;
  return true;
}

bool raftfix_hold_result(const struct raft *r, const struct raft_message *m,
                         raft_term term_appended, raft_index first_index)
{
  if (m->type != RAFT_IO_APPEND_ENTRIES_RESULT || r->state != RAFT_LEADER ||
      m->append_entries_result.term != r->current_term) {
    return false;
  }
  return term_appended != r->current_term || r->last_stored < first_index;
}
