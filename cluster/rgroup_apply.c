/* rgroup_apply.c - applying one Raft entry to a partition's store and
 * producer table (rgroup_apply.h): the part of the replica's state machine
 * that the node (rgroup_fsm.c) and the simulation (tests/sim/) share. */
#include "cluster/rgroup_apply.h"

#include "cluster/rgroup_cmd.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "format/batch.h"
#include "format/endian.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define RGROUP_APPLY_READ_BYTES (1u << 20) /* per store_read while scanning */

void rgroup_apply_init(struct rgroup_apply *ap)
{
  memset(ap, 0, sizeof *ap);
}

void rgroup_apply_close(struct rgroup_apply *ap)
{
  free(ap->batches);
  free(ap->results);
  rgroup_apply_init(ap);
}

static int rgroup_apply_batches(struct rgroup_apply *ap, size_t n)
{
  if (n <= ap->batches_cap) {
    return 0;
  }
  size_t cap = ap->batches_cap ? ap->batches_cap * 2 : 1;
  while (cap < n) {
    cap *= 2;
  }
  struct store_batch *nb = realloc(ap->batches, cap * sizeof *nb);
  if (nb == NULL) {
    return CAIRN_ENOMEM;
  }
  ap->batches = nb;
  ap->batches_cap = cap;
  return 0;
}

static int rgroup_apply_results(struct rgroup_apply *ap, size_t n)
{
  if (n <= ap->results_cap) {
    return 0;
  }
  size_t cap = ap->results_cap ? ap->results_cap * 2 : 1;
  while (cap < n) {
    cap *= 2;
  }
  struct rgroup_batch_result *nr = realloc(ap->results, cap * sizeof *nr);
  if (nr == NULL) {
    return CAIRN_ENOMEM;
  }
  ap->results = nr;
  ap->results_cap = cap;
  return 0;
}

/* Is p[0..n) the zero padding that ends an entry (fewer than 8 bytes)? */
static bool rgroup_apply_is_padding(const uint8_t *p, size_t n)
{
  if (n >= 8) {
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    if (p[i] != 0) {
      return false;
    }
  }
  return true;
}

/* Splits an entry into ap->batches: its batches and commands
 * (rgroup_cmd.h), in order. Returns their count or a negative code. */
static int rgroup_apply_split(struct rgroup_apply *ap, const uint8_t *p, size_t len)
{
  size_t pos = 0;
  int n = 0;
  while (pos < len && !rgroup_apply_is_padding(p + pos, len - pos)) {
    size_t size = 0;
    int err = 0;
    struct rgroup_cmd cmd;
    int is_cmd = rgroup_cmd_probe(p + pos, len - pos, &cmd, &size);
    if (is_cmd < 0) {
      return is_cmd;
    }
    if (is_cmd == 0 && batch_probe(p + pos, len - pos, len - pos, &size, &err) != BATCH_PROBE_OK) {
      return err != 0 ? err : CAIRN_ETRUNCATED;
    }
    if (rgroup_apply_batches(ap, (size_t)n + 1) != 0) {
      return CAIRN_ENOMEM;
    }
    ap->batches[n].data = p + pos;
    ap->batches[n].len = size;
    n++;
    pos += size;
  }
  return n;
}

bool rgroup_apply_has_command(const uint8_t *entry, size_t len)
{
  size_t pos = 0;
  while (pos + BATCH_LENGTH_FIELD_END <= len && !rgroup_apply_is_padding(entry + pos, len - pos)) {
    if (rgroup_cmd_is(entry + pos, len - pos)) {
      return true;
    }
    int32_t blen = (int32_t)le_get32(entry + pos + BATCH_OFF_LENGTH);
    if (blen <= 0) {
      return false; /* malformed: rgroup_apply_entry says why */
    }
    pos += batch_total_size(blen);
  }
  return false;
}

static void rgroup_apply_batch_info(const struct batch_header *h, struct producer_batch_info *b)
{
  b->producer_id = h->producer_id;
  b->epoch = h->producer_epoch;
  b->base_sequence = h->base_sequence;
  b->record_count = h->record_count;
  b->max_timestamp = h->max_timestamp;
}

int rgroup_apply_scan(struct store *store, struct producer_state *ps, int64_t from, int64_t to)
{
  int64_t off = from;
  while (off < to) {
    struct store_region r;
    int rv = store_read_wait(store, off, RGROUP_APPLY_READ_BYTES, &r);
    if (rv != 0) {
      return rv;
    }
    if (r.len == 0) {
      store_region_release(&r);
      break;
    }
    size_t pos = 0;
    while (rv == 0 && pos + BATCH_HEADER_SIZE <= r.len) {
      uint8_t hdr[BATCH_HEADER_SIZE];
      const uint8_t *p = r.mem != NULL ? r.mem + pos : hdr;
      if (r.fd >= 0) {
        size_t got = 0;
        rv = fs_pread_full(r.fd, hdr, sizeof hdr, (off_t)(r.pos + (int64_t)pos), &got);
        if (rv == 0 && got != sizeof hdr) {
          rv = CAIRN_ETRUNCATED;
        }
        p = hdr;
      }
      if (rv != 0) {
        break;
      }
      struct batch_header h;
      batch_header_decode(p, &h);
      struct producer_batch_info b;
      rgroup_apply_batch_info(&h, &b);
      rv = producer_state_record(ps, &b, h.base_offset, h.source_index);
      pos += batch_total_size(h.batch_length);
    }
    off = r.next_offset;
    store_region_release(&r);
    if (rv != 0) {
      return rv;
    }
  }
  return 0;
}

/* Runs the entry's commands on the store (info: the store before the
 * entry, updated), each answered in ap->results with the log start after
 * it. A LOG_START offset above the log's end is taken as the end (the same
 * on every replica: each applies it at the same point of the log). */
static int rgroup_apply_commands(struct rgroup_apply *ap, struct store *store, int n,
                                 struct store_info *info)
{
  for (int i = 0; i < n; i++) {
    struct rgroup_cmd cmd;
    size_t size;
    if (rgroup_cmd_probe(ap->batches[i].data, ap->batches[i].len, &cmd, &size) != 1) {
      continue;
    }
    int64_t to = cmd.offset < info->next_offset ? cmd.offset : info->next_offset;
    if (to > info->start_offset) {
      int rv = store_delete_before(store, to);
      if (rv != 0) {
        return rv;
      }
      store_info(store, info);
    }
    ap->results[i].status = 0;
    ap->results[i].offset = info->start_offset;
  }
  return 0;
}

int rgroup_apply_entry(struct rgroup_apply *ap, struct store *store, struct producer_state *ps,
                       const uint8_t *entry, size_t len, uint64_t index, struct rgroup_applied *out)
{
  out->results = ap->results;
  out->n = 0;
  out->appended = 0;
  int n = rgroup_apply_split(ap, entry, len);
  if (n <= 0) {
    return n == 0 ? CAIRN_EINVAL : n;
  }
  struct store_info info;
  store_info(store, &info);
  if (rgroup_apply_results(ap, (size_t)n) != 0) {
    return CAIRN_ENOMEM;
  }
  /* Commands first: each moves the log start within what the store held
   * before this entry (the leader accepted the offset at or below its
   * high watermark then), so the entry's batches are never touched by
   * them. Also for an entry applied before a restart: a command is
   * idempotent, and its effect may not have reached the disk. */
  int rv = rgroup_apply_commands(ap, store, n, &info);
  if (rv != 0) {
    return rv;
  }
  if (index <= info.last_index) {
    return 0; /* applied before a restart: nobody waits for it */
  }
  /* Judge each batch in entry order, recording the ones to append at the
   * offsets the store will give them (gap-free from next_offset), so that a
   * later batch of the same producer in this entry sees the earlier one. */
  int64_t next = info.next_offset;
  size_t nappend = 0;
  for (int i = 0; i < n; i++) {
    if (rgroup_cmd_is(ap->batches[i].data, ap->batches[i].len)) {
      continue; /* answered by rgroup_apply_commands */
    }
    struct batch_header h;
    batch_header_decode(ap->batches[i].data, &h);
    struct producer_batch_info b;
    rgroup_apply_batch_info(&h, &b);
    bool duplicate = false;
    int64_t original = -1;
    int verdict = producer_state_check(ps, &b, &duplicate, &original);
    if (verdict != 0 || duplicate) {
      ap->results[i].status = verdict;
      ap->results[i].offset = verdict == 0 ? original : -1;
      if (duplicate) {
        ap->duplicates++;
      } else {
        ap->refusals++;
      }
      continue;
    }
    rv = producer_state_record(ps, &b, next, index);
    if (rv != 0) {
      return rv;
    }
    ap->results[i].status = 0;
    ap->results[i].offset = next;
    next += h.record_count;
    ap->batches[nappend++] = ap->batches[i];
  }
  out->results = ap->results;
  if (nappend == 0) {
    out->n = (size_t)n;
    return 0; /* every batch refused or a duplicate: the store is unchanged */
  }
  int64_t base = -1;
  rv = store_append(store, ap->batches, nappend, index, &base);
  if (rv == 0 && base != info.next_offset) {
    rv = CAIRN_ECORRUPT; /* the store numbered the batches otherwise */
  }
  if (rv != 0) {
    return rv;
  }
  out->n = (size_t)n;
  out->appended = nappend;
  return 0;
}
