/* parts_synced.h - the replica directories a node found at start, made
 * durable with one syncfs(2) instead of a few fsyncs per replica.
 *
 * After a crash (SIGKILL, OOM kill) the page cache still holds what the
 * old process wrote, durable or not. A partition log's recovery used to
 * make everything it kept durable with fdatasync of each segment and
 * index, a directory fsync and a checkpoint rewrite: about 7 syncs per
 * replica, most of a 10,000-replica node's restart (docs/performance.md,
 * "Restart at 10,000"). PostgreSQL's recovery_init_sync_method=syncfs
 * answers the same problem: one syncfs of the file system makes every
 * file in it durable at once.
 *
 * psync_begin lists the directories under <data>/partitions that are on
 * the same file system as it (mount points and symlinks are left out),
 * then calls syncfs on it. A directory of that list was written by no one
 * since (nothing in this process opened it yet), so its first open may
 * trust the disk (plog_opts.disk_synced); psync_take hands that out once
 * per directory: a later open of the same directory finds what this
 * process wrote, not yet synced, and syncs as usual.
 *
 * Context: loop thread (psync_begin blocks on readdir, fstatat and
 * syncfs: once, at start). */
#ifndef CAIRN_PARTS_SYNCED_H
#define CAIRN_PARTS_SYNCED_H

#include <stdbool.h>
#include <stddef.h>

struct psync_dir {
  char *name; /* the entry's name under root */
  bool taken; /* psync_take handed it out */
};

struct psync {
  struct psync_dir *v; /* sorted by name */
  size_t n;
  double syncfs_ms; /* how long the syncfs took (for the log) */
};

/* Lists root's replica directories and syncfs's root's file system. On
 * success the set holds them (possibly none); on failure (listing or
 * syncfs) it is empty, so no open trusts the disk, and the error is
 * returned: 0 or a negative code. The caller initializes ps to zeros and
 * frees it with psync_free in any case. */
__attribute__((warn_unused_result)) int psync_begin(struct psync *ps, const char *root);

/* Was dir (a path whose last component is an entry of root) in the set
 * and not taken yet? Marks it taken. */
bool psync_take(struct psync *ps, const char *dir);

/* Directories in the set not taken yet. */
size_t psync_left(const struct psync *ps);

void psync_free(struct psync *ps);

/* At a node's stop, once its replicas closed without their own flushes
 * (store_close_unflushed): one syncfs of root's file system, so a clean
 * stop leaves their logs on disk (their Raft log holds the same entries,
 * so this is not what keeps them; a replica on another file system is
 * left to its Raft log). *ms: how long it took. Returns 0 or a negative
 * code. Context: blocks (once, at stop). */
__attribute__((warn_unused_result)) int psync_end(const char *root, double *ms);

#endif
