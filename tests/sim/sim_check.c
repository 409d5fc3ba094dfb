/* sim_check.c - the simulation's invariants.
 *
 * A reference log holds, per batch position, what the first replica to
 * apply it stored (base offset, record count, Raft index, a hash of the
 * producer's bytes). Checked at every apply, on the batches the store
 * itself returns:
 *   - every replica stores exactly the reference log's batches, in order
 *     (the stores are prefixes of one another), at gap-free offsets, each
 *     stamped with the index of the entry that carried it;
 *   - in the reference log an idempotent producer's batches follow one
 *     another: within an epoch each starts at the sequence after the
 *     previous one's last (no duplicate, no gap, no reorder), a new epoch
 *     starts at 0, an older epoch never comes back;
 *   - after the same Raft index every replica's producer table encodes to
 *     the same bytes (producer_state_encode).
 * At every acknowledgement: the acknowledged batch is the reference log's
 * batch at the acknowledged offset (so every replica that applied past it
 * holds it there, and by the sequence rule nowhere else).
 * Every step: each store's end is what the checker saw appended, and no term
 * has two leaders (Raft's election safety).
 * At the end of a seed: every store again in full, and each replica's
 * table equal to the one rgroup_apply_scan() rebuilds from its store (what
 * a restart does). */
#include "sim.h"

#include "common/err.h"
#include "format/batch.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

uint64_t sim_hash(const uint8_t *p, size_t len)
{
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

void sim_check_init(struct sim_check *c)
{
  memset(c, 0, sizeof *c);
}

void sim_check_close(struct sim_check *c)
{
  free(c->ref);
  free(c->table_hash);
  free(c->start_at);
  free(c->term_leader);
  memset(c, 0, sizeof *c);
}

static struct sim_ref_producer *sim_check_ref_producer(struct sim_check *c, int64_t pid)
{
  for (size_t i = 0; i < c->nrp; i++) {
    if (c->rp[i].producer_id == pid) {
      return &c->rp[i];
    }
  }
  return NULL;
}

/* A batch new to the reference log: the sequence rules. */
static void sim_check_ref_append(struct sim *s, const struct sim_ref_batch *rb)
{
  struct sim_check *c = &s->check;
  if (rb->producer_id >= 0) {
    struct sim_ref_producer *rp = sim_check_ref_producer(c, rb->producer_id);
    if (rp == NULL) {
      if (c->nrp == SIM_MAX_PRODUCERS || rb->seq != 0) {
        sim_fail(s, "offset %lld: first batch of producer %lld starts at sequence %d",
                 (long long)rb->base_offset, (long long)rb->producer_id, (int)rb->seq);
        return;
      }
      rp = &c->rp[c->nrp++];
      rp->producer_id = rb->producer_id;
      rp->epoch = rb->epoch;
      rp->next_seq = 0;
    }
    if (rb->epoch < rp->epoch) {
      sim_fail(s, "offset %lld: producer %lld epoch %d after epoch %d (fenced epoch stored)",
               (long long)rb->base_offset, (long long)rb->producer_id, (int)rb->epoch,
               (int)rp->epoch);
      return;
    }
    if (rb->epoch > rp->epoch) {
      rp->epoch = rb->epoch;
      rp->next_seq = 0;
    }
    if (rb->seq != rp->next_seq) {
      sim_fail(s, "offset %lld: producer %lld epoch %d stores sequence %d where %d was next (%s)",
               (long long)rb->base_offset, (long long)rb->producer_id, (int)rb->epoch, (int)rb->seq,
               (int)rp->next_seq,
               rb->seq < rp->next_seq ? "a duplicate or a reorder" : "a gap or a reorder");
      return;
    }
    int64_t next = (int64_t)rb->seq + rb->count;
    rp->next_seq = (int32_t)(next % ((int64_t)INT32_MAX + 1));
  }
  if (c->nref == c->capref) {
    size_t cap = c->capref ? c->capref * 2 : 256;
    struct sim_ref_batch *nr = realloc(c->ref, cap * sizeof *nr);
    if (nr == NULL) {
      sim_fail(s, "out of memory");
      return;
    }
    c->ref = nr;
    c->capref = cap;
  }
  c->ref[c->nref++] = *rb;
}

/* Compares the batches of rep's store in [from, to) with the reference
 * log from position *k on (appending what is new when extend), advancing
 * *k and *next. expect_index: the entry index each must carry (0: any). */
static void sim_check_range(struct sim *s, struct sim_replica *rep, int64_t from, int64_t to,
                            uint64_t expect_index, bool extend, size_t *k, int64_t *next)
{
  struct sim_check *c = &s->check;
  int64_t off = from;
  while (off < to && !s->failed) {
    struct store_region r;
    int rv = store_read(rep->store, off, 1u << 20, &r);
    if (rv != 0 || r.len == 0 || r.mem == NULL) {
      sim_fail(s, "replica %u: reading offset %lld: %s", rep->index, (long long)off,
               rv != 0 ? cairn_strerror(rv) : "no batch");
      store_region_release(&r);
      return;
    }
    size_t pos = 0;
    while (pos + BATCH_HEADER_SIZE <= r.len && !s->failed) {
      struct batch_header h;
      batch_header_decode(r.mem + pos, &h);
      size_t size = batch_total_size(h.batch_length);
      struct sim_ref_batch rb = {
          .base_offset = h.base_offset,
          .count = h.record_count,
          .source_index = h.source_index,
          .hash = sim_hash(r.mem + pos + BATCH_BROKER_FIELDS_SIZE, size - BATCH_BROKER_FIELDS_SIZE),
          .producer_id = h.producer_id,
          .epoch = h.producer_epoch,
          .seq = h.base_sequence,
      };
      if (h.base_offset != *next) {
        sim_fail(s, "replica %u: batch at offset %lld where %lld was next (a gap or overlap)",
                 rep->index, (long long)h.base_offset, (long long)*next);
      } else if (expect_index != 0 && h.source_index != expect_index) {
        sim_fail(s, "replica %u: batch at offset %lld stamped with index %llu, applied at %llu",
                 rep->index, (long long)h.base_offset, (unsigned long long)h.source_index,
                 (unsigned long long)expect_index);
      } else if (*k < c->nref) {
        const struct sim_ref_batch *want = &c->ref[*k];
        if (want->base_offset != rb.base_offset || want->count != rb.count ||
            want->hash != rb.hash || want->source_index != rb.source_index) {
          sim_fail(s,
                   "replicas diverge: replica %u holds at offset %lld the batch of producer "
                   "%lld seq %d (index %llu), another replica holds there producer %lld seq %d "
                   "(index %llu)",
                   rep->index, (long long)rb.base_offset, (long long)rb.producer_id, (int)rb.seq,
                   (unsigned long long)rb.source_index, (long long)want->producer_id,
                   (int)want->seq, (unsigned long long)want->source_index);
        }
      } else if (extend) {
        sim_check_ref_append(s, &rb);
      } else {
        sim_fail(s, "replica %u: batch at offset %lld beyond the reference log", rep->index,
                 (long long)rb.base_offset);
      }
      (*k)++;
      *next = h.base_offset + h.record_count;
      pos += size;
    }
    off = r.next_offset;
    store_region_release(&r);
  }
}

static uint64_t sim_check_table_hash(struct sim *s, struct sim_replica *rep,
                                     const struct producer_state *ps, uint64_t index)
{
  struct store_info info;
  store_info(rep->store, &info);
  uint8_t *enc = NULL;
  size_t len = 0;
  if (producer_state_encode(ps, info.next_offset, index, &enc, &len) != 0) {
    sim_fail(s, "out of memory");
    return 0;
  }
  uint64_t h = sim_hash(enc, len);
  free(enc);
  return h == 0 ? 1 : h;
}

void sim_check_applied(struct sim *s, struct sim_replica *rep, uint64_t index, int64_t from)
{
  struct sim_check *c = &s->check;
  c->checks++;
  struct store_info info;
  store_info(rep->store, &info);
  if (from != rep->checked_next) {
    sim_fail(s, "replica %u: its store grew from %lld outside the checked applies (seen to %lld)",
             rep->index, (long long)from, (long long)rep->checked_next);
    return;
  }
  sim_check_range(s, rep, from, info.next_offset, index, true, &rep->checked_batches,
                  &rep->checked_next);
  if (s->failed || index <= rep->store_index_at_start) {
    /* A replay after a restart that the store already held (skipped): its
     * table is the one of the store's end, not of this index. */
    return;
  }
  if (index >= c->ntable) {
    size_t n = c->ntable ? c->ntable : 256;
    while (n <= index) {
      n *= 2;
    }
    uint64_t *nt = realloc(c->table_hash, n * sizeof *nt);
    if (nt != NULL) {
      c->table_hash = nt;
    }
    int64_t *ns = nt != NULL ? realloc(c->start_at, n * sizeof *ns) : NULL;
    if (ns == NULL) {
      sim_fail(s, "out of memory");
      return;
    }
    memset(nt + c->ntable, 0, (n - c->ntable) * sizeof *nt);
    memset(ns + c->ntable, 0, (n - c->ntable) * sizeof *ns);
    c->start_at = ns;
    c->ntable = n;
  }
  /* LOG_START commands (opts.log_start): every replica's log starts at the
   * same offset after the same index; a replay up to what was applied
   * before a crash may find it already moved by a later command. */
  bool replayed = index <= rep->applied_at_crash;
  if (!replayed && c->start_at[index] == 0) {
    c->start_at[index] = info.start_offset + 1;
  } else if (!replayed && c->start_at[index] != info.start_offset + 1) {
    sim_fail(s, "replica %u: its log starts at %lld after index %llu, another replica's at %lld",
             rep->index, (long long)info.start_offset, (unsigned long long)index,
             (long long)c->start_at[index] - 1);
    return;
  }
  uint64_t h = sim_check_table_hash(s, rep, &rep->producers, index);
  if (c->table_hash[index] == 0) {
    c->table_hash[index] = h;
  } else if (c->table_hash[index] != h) {
    sim_fail(s, "replica %u: producer table after index %llu differs from another replica's",
             rep->index, (unsigned long long)index);
  }
}

static const struct sim_ref_batch *sim_check_find(const struct sim_check *c, int64_t offset)
{
  size_t lo = 0, hi = c->nref;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->ref[mid].base_offset < offset) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < c->nref && c->ref[lo].base_offset == offset ? &c->ref[lo] : NULL;
}

void sim_check_ack(struct sim *s, const struct sim_batch *b, int64_t offset)
{
  s->check.acks++;
  const struct sim_ref_batch *rb = sim_check_find(&s->check, offset);
  if (rb == NULL || rb->hash != b->hash) {
    sim_fail(s, "producer %u batch seq %d epoch %d acknowledged at offset %lld, which holds %s",
             b->p->index, (int)b->seq, (int)b->epoch, (long long)offset,
             rb == NULL ? "no batch start" : "another batch");
  }
}

/* Raft's election safety: at most one leader in a term. Every replica that
 * leads is looked at each step; a term is never led by two ids. */
static void sim_check_term_leader(struct sim *s, const struct raft *r)
{
  struct sim_check *c = &s->check;
  raft_term t = r->current_term;
  if (t >= c->nterms) {
    size_t n = c->nterms == 0 ? 64 : c->nterms;
    while (n <= t) {
      n *= 2;
    }
    raft_id *v = realloc(c->term_leader, n * sizeof *v);
    if (v == NULL) {
      sim_fail(s, "out of memory for the term table");
      return;
    }
    memset(v + c->nterms, 0, (n - c->nterms) * sizeof *v);
    c->term_leader = v;
    c->nterms = n;
  }
  if (c->term_leader[t] != 0 && c->term_leader[t] != r->id) {
    sim_fail(s, "two leaders of term %llu: replicas %llu and %llu", (unsigned long long)t,
             (unsigned long long)c->term_leader[t] - 1, (unsigned long long)r->id - 1);
    return;
  }
  c->term_leader[t] = r->id;
}

void sim_check_step(struct sim *s)
{
  for (unsigned i = 0; i < s->n && !s->failed; i++) {
    struct sim_replica *rep = &s->reps[i];
    if (sim_replica_up(rep) && raft_state(sim_replica_raft(rep)) == RAFT_LEADER) {
      sim_check_term_leader(s, sim_replica_raft(rep));
    }
    struct store_info info;
    store_info(rep->store, &info);
    if (info.next_offset != rep->checked_next) {
      sim_fail(s, "replica %u: store ends at %lld, the checked applies at %lld", i,
               (long long)info.next_offset, (long long)rep->checked_next);
    }
    if (!sim_replica_up(rep)) {
      continue;
    }
    /* After a restart the store may be ahead of what Raft re-applied. */
    uint64_t applied = raft_last_applied(sim_replica_raft(rep));
    if (info.last_index > applied && info.last_index > rep->store_index_at_start) {
      sim_fail(s, "replica %u: store holds index %llu, Raft applied only %llu", i,
               (unsigned long long)info.last_index, (unsigned long long)applied);
    }
  }
}

void sim_check_rewind(struct sim *s, struct sim_replica *rep)
{
  const struct sim_check *c = &s->check;
  struct store_info info;
  store_info(rep->store, &info);
  size_t k = 0;
  while (k < rep->checked_batches && c->ref[k].base_offset < info.next_offset) {
    k++;
  }
  if (k > 0 && c->ref[k - 1].base_offset + c->ref[k - 1].count != info.next_offset) {
    sim_fail(s, "replica %u: its store was cut at offset %lld, inside a batch", rep->index,
             (long long)info.next_offset);
  }
  rep->checked_batches = k;
  rep->checked_next = info.next_offset;
}

void sim_check_final(struct sim *s)
{
  const struct sim_check *c = &s->check;
  int64_t ref_end = c->nref == 0 ? 0 : c->ref[c->nref - 1].base_offset + c->ref[c->nref - 1].count;
  for (unsigned i = 0; i < s->n && !s->failed; i++) {
    struct sim_replica *rep = &s->reps[i];
    struct store_info info;
    store_info(rep->store, &info);
    if (info.next_offset != ref_end) {
      /* Every batch some replica applied (every acknowledged one among
       * them) must be in every replica's log once all have applied the
       * same index: a shorter log lost committed entries. */
      sim_fail(s,
               "replica %u: its log ends at offset %lld, the reference log at %lld: "
               "committed batches lost",
               i, (long long)info.next_offset, (long long)ref_end);
      return;
    }
    /* From the reference batch that holds the log start (a LOG_START may
     * have moved it inside a batch: a read returns that whole batch). */
    size_t k = 0;
    while (k < c->nref && c->ref[k].base_offset + c->ref[k].count <= info.start_offset) {
      k++;
    }
    int64_t next = k < c->nref ? c->ref[k].base_offset : info.start_offset;
    sim_check_range(s, rep, info.start_offset, info.next_offset, 0, false, &k, &next);
    if (s->failed) {
      return;
    }
    if (info.start_offset > 0) {
      /* The deleted batches' producers are in the table and not in the
       * log: a rebuild from the log cannot match (the node keeps the table
       * in <replica>/producers.cmd for that: rgroup_fsm.c). */
      continue;
    }
    struct producer_state rebuilt;
    producer_state_init(&rebuilt);
    int rv = rgroup_apply_scan(rep->store, &rebuilt, info.start_offset, info.next_offset);
    if (rv != 0) {
      sim_fail(s, "replica %u: rebuilding its producer table: %s", i, cairn_strerror(rv));
    } else if (sim_check_table_hash(s, rep, &rebuilt, info.last_index) !=
               sim_check_table_hash(s, rep, &rep->producers, info.last_index)) {
      sim_fail(s, "replica %u: its producer table differs from the one rebuilt from its store", i);
    }
    producer_state_close(&rebuilt);
  }
}
