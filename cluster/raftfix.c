/* raftfix.c - rules every Raft group applies to raft 0.15's messages
 * (raftfix.h). */
#include "cluster/raftfix.h"

#include <stdlib.h>
#include <string.h>

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

bool raftfix_snapshot_refused(const struct raft *r)
{
  return r->configuration_uncommitted_index != 0;
}

/* What replicationInstallSnapshot checks before it drops the message. */
static bool raftfix_snapshot_busy(const struct raft *r)
{
  return r->snapshot.pending.term != 0 || r->snapshot.put.data != NULL;
}

void raftfix_discard_snapshot(struct raft_install_snapshot *is)
{
  raft_configuration_close(&is->conf);
  raft_free(is->data.base);
  is->data.base = NULL;
}

bool raftfix_snapshot_hold(struct raftfix_held *h, const struct raft *r, struct raft_message *m)
{
  if (m->type != RAFT_IO_INSTALL_SNAPSHOT || !raftfix_snapshot_busy(r) ||
      m->install_snapshot.term < r->current_term) {
    return false; /* (an older term's: raft answers it with a refusal) */
  }
  /* The sender's address lives only as long as raft's receive callback:
   * copied after the message, in the same block. */
  const char *addr = m->server_address != NULL ? m->server_address : "";
  size_t alen = strlen(addr) + 1;
  struct raft_message *copy = malloc(sizeof *copy + alen);
  if (copy == NULL) {
    return false; /* raft drops it, as without the rule */
  }
  *copy = *m; /* the configuration and data move to the copy */
  char *a = (char *)(copy + 1);
  memcpy(a, addr, alen);
  copy->server_address = a;
  raftfix_snapshot_close(h); /* a newer message replaces it */
  h->m = copy;
  return true;
}

struct raft_message *raftfix_snapshot_release(struct raftfix_held *h, const struct raft *r)
{
  if (h->m == NULL || raftfix_snapshot_busy(r)) {
    return NULL;
  }
  struct raft_message *m = h->m;
  h->m = NULL;
  return m;
}

void raftfix_snapshot_close(struct raftfix_held *h)
{
  if (h->m != NULL) {
    raftfix_discard_snapshot(&h->m->install_snapshot);
    free(h->m);
    h->m = NULL;
  }
}

unsigned raftfix_install_snapshot_ms(unsigned election_ms)
{
  return RAFTFIX_INSTALL_SNAPSHOT_ELECTIONS * election_ms;
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

/* ---- raftfix_log_trim ---- */

static size_t raftfix_log_entries(const struct raft_log *l)
{
  if (l->front <= l->back) {
    return l->back - l->front;
  }
  return l->size - l->front + l->back; /* the circular buffer is wrapped */
}

/* Copies the live slots of l's table into t of size slots, keyed as raft
 * keys them ((index - 1) % size). Returns false on a collision. */
static bool raftfix_refs_rehash(const struct raft_log *l, struct raft_entry_ref *t, size_t size)
{
  for (size_t i = 0; i < l->refs_size; i++) {
    const struct raft_entry_ref *s = &l->refs[i];
    if (s->count == 0) {
      continue;
    }
    struct raft_entry_ref *d = &t[(s->index - 1) % size];
    if (d->count != 0) {
      return false;
    }
    *d = *s;
  }
  return true;
}

static size_t raftfix_refs_trim(struct raft_log *l)
{
  /* The entries held bound the live references from below: a table at
   * most about twice their number has nothing worth giving back (and the
   * scan below is skipped). */
  if (l->refs == NULL || l->refs_size <= 2 * raftfix_log_entries(l) + RAFTFIX_REFS_MIN) {
    return 0;
  }
  size_t live = 0;
  for (size_t i = 0; i < l->refs_size; i++) {
    if (l->refs[i].count == 0) {
      continue;
    }
    if (l->refs[i].next != NULL) {
      return 0; /* two terms at one index: chained slots, left to raft */
    }
    live++;
  }
  size_t size = RAFTFIX_REFS_MIN;
  while (size < live) {
    size *= 2;
  }
  /* Live indexes are nearly always consecutive, so the first size that
   * holds them all fits; a scattered few may need a larger one. */
  for (; size < l->refs_size; size *= 2) {
    struct raft_entry_ref *t = raft_calloc(size, sizeof *t);
    if (t == NULL) {
      return 0;
    }
    if (!raftfix_refs_rehash(l, t, size)) {
      raft_free(t);
      continue;
    }
    size_t freed = (l->refs_size - size) * sizeof *t;
    raft_free(l->refs);
    l->refs = t;
    l->refs_size = size;
    return freed;
  }
  return 0;
}

static size_t raftfix_entries_trim(struct raft_log *l)
{
  size_t n = raftfix_log_entries(l);
  if (l->entries == NULL || l->size <= 2 * (n + 2)) {
    return 0;
  }
  size_t freed = l->size * sizeof *l->entries;
  if (n == 0) {
    raft_free(l->entries); /* as raft's clearIfEmpty leaves an empty log */
    l->entries = NULL;
    l->size = l->front = l->back = 0;
    return freed;
  }
  size_t size = n + 2; /* raft grows an array with fewer than 2 free slots */
  struct raft_entry *e = raft_calloc(size, sizeof *e);
  if (e == NULL) {
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    e[i] = l->entries[(l->front + i) % l->size];
  }
  raft_free(l->entries);
  l->entries = e;
  l->size = size;
  l->front = 0;
  l->back = n;
  return freed - size * sizeof *e;
}

size_t raftfix_log_trim(struct raft *r)
{
  return raftfix_refs_trim(&r->log) + raftfix_entries_trim(&r->log);
}

/* ---- the committed configuration kept aside (raftfix_conf) ---- */

void raftfix_conf_init(struct raftfix_conf *k)
{
  raft_configuration_init(&k->conf);
  k->index = 0;
}

void raftfix_conf_close(struct raftfix_conf *k)
{
  raft_configuration_close(&k->conf);
  raftfix_conf_init(k);
}

/* A copy of from into to (initialized, empty). Returns 0 or RAFT_NOMEM. */
static int raftfix_conf_copy(const struct raft_configuration *from, struct raft_configuration *to)
{
  for (unsigned i = 0; i < from->n; i++) {
    const struct raft_server *s = &from->servers[i];
    int rv = raft_configuration_add(to, s->id, s->address, s->role);
    if (rv != 0) {
      raft_configuration_close(to);
      raft_configuration_init(to);
      return rv;
    }
  }
  return 0;
}

/* Is the entry at index in r's in-memory log? */
static bool raftfix_in_log(const struct raft *r, raft_index index)
{
  return index > r->log.offset && index <= r->log.offset + raftfix_log_entries(&r->log);
}

/* Is there a committed configuration raft would need and k lacks? */
static bool raftfix_conf_wanted(const struct raftfix_conf *k, const struct raft *r)
{
  return r->configuration_uncommitted_index == 0 && r->configuration_index != 0 &&
         !raftfix_in_log(r, r->configuration_index) && k->index != r->configuration_index;
}

void raftfix_conf_keep_now(struct raftfix_conf *k, const struct raft *r)
{
  if (!raftfix_conf_wanted(k, r)) {
    return; /* nothing committed to keep, raft has it, or kept already */
  }
  raftfix_conf_close(k);
  if (raftfix_conf_copy(&r->configuration, &k->conf) == 0) {
    k->index = r->configuration_index;
  }
}

void raftfix_conf_keep(struct raftfix_conf *k, const struct raft *r, const struct raft_message *m)
{
  if (m->type != RAFT_IO_APPEND_ENTRIES || !raftfix_conf_wanted(k, r)) {
    return;
  }
  const struct raft_append_entries *ae = &m->append_entries;
  for (unsigned i = 0; i < ae->n_entries; i++) {
    if (ae->entries[i].type == RAFT_CHANGE) {
      raftfix_conf_keep_now(k, r);
      return;
    }
  }
}

void raftfix_conf_keep_loaded(struct raftfix_conf *k, const struct raft_snapshot *snapshot,
                              const struct raft_entry *entries, size_t n)
{
  if (snapshot == NULL || snapshot->configuration_index == 0) {
    return;
  }
  for (size_t i = 0; i < n; i++) {
    if (entries[i].type == RAFT_CHANGE) {
      raftfix_conf_close(k);
      if (raftfix_conf_copy(&snapshot->configuration, &k->conf) == 0) {
        k->index = snapshot->configuration_index;
      }
      return;
    }
  }
}

/* The term of the entry at index as raft 0.15's logTermOf gives it: from
 * the in-memory log, the snapshot's at its index, 0 otherwise. */
static raft_term raftfix_term_of(const struct raft *r, raft_index index)
{
  const struct raft_log *l = &r->log;
  if (raftfix_in_log(r, index)) {
    return l->entries[(l->front + (index - l->offset - 1)) % l->size].term;
  }
  return index != 0 && index == l->snapshot.last_index ? l->snapshot.last_term : 0;
}

/* Where raft 0.15, receiving ae, would truncate its log (replication.c:
 * checkLogMatchingProperty, then deleteConflictingEntries): the first
 * index whose entry's term differs, above the commit index; 0 if it would
 * not truncate. */
static raft_index raftfix_conflict_at(const struct raft *r, const struct raft_append_entries *ae)
{
  if (ae->term < r->current_term) {
    return 0; /* refused */
  }
  if (ae->prev_log_index != 0 && raftfix_term_of(r, ae->prev_log_index) != ae->prev_log_term) {
    return 0; /* refused: the logs do not match there */
  }
  for (unsigned j = 0; j < ae->n_entries; j++) {
    raft_index index = ae->prev_log_index + 1 + j;
    raft_term local = raftfix_term_of(r, index);
    if (local > 0 && local != ae->entries[j].term) {
      return index > r->commit_index ? index : 0; /* (committed: raft shuts down) */
    }
  }
  return 0;
}

bool raftfix_conf_rollback(const struct raftfix_conf *k, struct raft *r,
                           const struct raft_message *m)
{
  if (m->type != RAFT_IO_APPEND_ENTRIES || k->conf.n == 0) {
    return false;
  }
  raft_index at = raftfix_conflict_at(r, &m->append_entries);
  /* 1. 0.15 would roll back an uncommitted change by decoding a compacted
   *    entry (a NULL one). 2. After a restart 0.15 takes the log's last
   *    configuration as committed (start.c, restoreEntries) and would keep
   *    it although it is truncated away: back to the snapshot's. */
  bool crash = r->configuration_uncommitted_index != 0 &&
               r->configuration_uncommitted_index >= at &&
               !raftfix_in_log(r, r->configuration_index) && k->index == r->configuration_index;
  bool stale =
      r->configuration_uncommitted_index == 0 && r->configuration_index >= at && k->index < at;
  if (at == 0 || (!crash && !stale)) {
    return false;
  }
  struct raft_configuration conf;
  raft_configuration_init(&conf);
  if (raftfix_conf_copy(&k->conf, &conf) != 0) {
    return false;
  }
  raft_configuration_close(&r->configuration);
  r->configuration = conf;
  r->configuration_index = k->index;
  r->configuration_uncommitted_index = 0; /* what membershipRollback does */
  return true;
}
