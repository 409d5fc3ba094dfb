/* fault.h - I/O fault injection points, so tests can make a write or an
 * fsync fail at an exact moment. Off unless a test arms a point; the check
 * is one atomic load on paths that already make a system call. */
#ifndef CAIRN_FAULT_H
#define CAIRN_FAULT_H

enum fault_point {
  FAULT_SEGMENT_WRITE = 0, /* pwritev of batches to a segment */
  FAULT_SEGMENT_SYNC,      /* fdatasync of a segment or index */
  FAULT_CHECKPOINT_WRITE,  /* writing the checkpoint file */
  FAULT_WAL_WRITE,         /* pwrite of a node-wide log job (cluster/wal.c) */
  FAULT_WAL_SYNC,          /* fdatasync of a wal segment, or fsync of its directory */
  FAULT_POINT_COUNT
};

/* Arms point: the (skip+1)-th call from now fails with err (a negative
 * errno), then the point disarms. Context: tests, any thread. */
void fault_arm(enum fault_point point, int skip, int err);

/* Disarms every point. */
void fault_reset(void);

/* Returns 0, or the armed negative errno if this call is the one to fail.
 * Context: any thread (log syncs check it on the thread pool). */
int fault_check(enum fault_point point);

#endif
