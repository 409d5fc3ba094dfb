/* plog_internal.h - the partition log object, shared by plog.c (the
 * running log) and plog_recover.c (open and recovery). Not for other
 * modules. */
#ifndef CAIRN_PLOG_INTERNAL_H
#define CAIRN_PLOG_INTERNAL_H

#include "storage/plog.h"
#include "storage/segment.h"

struct plog {
  struct store base; /* first: a struct store * is a struct plog * */
  char *dir;
  struct plog_opts opts;
  struct segment **segs; /* oldest first; the last one is active */
  size_t nsegs;
  size_t cap;
  int64_t start_offset;
  int64_t next_offset;
  uint64_t last_index;
  int64_t durable_offset;
  uint64_t durable_index;
  bool dir_dirty;         /* files created or removed since the last dir fsync */
  struct plog_sync *sync; /* a sync job out (plog_sync.h: "syncing"), or NULL */
  struct plog_recovery rec;
};

/* Adds s as the newest segment. Returns 0 or CAIRN_ENOMEM. */
int plog_push_segment(struct plog *pl, struct segment *s);

/* Removes segment i's files and drops the log's reference. */
int plog_drop_segment(struct plog *pl, size_t i);

/* Makes everything below up_to durable and writes the checkpoint. */
int plog_do_flush(struct plog *pl, int64_t up_to);

/* Runs recovery over pl->dir, filling pl's segments and offsets. Defined
 * in plog_recover.c. */
int plog_recover(struct plog *pl);

/* If a sync job is out, applies its outcome now: cancels it if no worker
 * started it, waits for it if one is running (plog_sync.h). Returns the
 * job's status (0 when there was none); the log is fatal if it failed.
 * Defined in plog_sync.c. Context: the loop. */
int plog_sync_collect(struct plog *pl);

/* Latches the fatal state with the message "<dir>: <what>: <error>". */
int plog_fail(struct plog *pl, int err, const char *what);

/* Sets pl->base.errmsg. */
void plog_set_errmsg(struct plog *pl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

extern const struct store_ops plog_ops;

#endif
