/* aio_defer.h - takes raft 0.15's kernel AIO context teardown (io_destroy)
 * off the loop thread.
 *
 * Why: raft 0.15's libuv I/O creates a kernel AIO context to probe the disk
 * at every raft_init and one per open segment it writes, and destroys each
 * with io_destroy(2) on the loop thread. io_destroy waits for an RCU grace
 * period: ~33 ms on the machines measured (docs/replication.md, per-group
 * cost), during which every group on the node is stalled. Opening 1,000
 * groups took 38-60 s, and each full open segment stalled the node once.
 *
 * How: Debian's libraft calls io_destroy through libc's syscall(3) (its own
 * io_destroy wrapper is internal). This module defines syscall() in the
 * program, which the dynamic linker then binds libraft's (and libuv's) calls
 * to; every call is passed on to libc's syscall() unchanged, except that
 * once aio_defer_start() has run, SYS_io_destroy is queued for a small pool
 * of threads and answered 0 at once. The threads destroy the contexts in
 * parallel (their grace periods overlap), so a burst of 1,000 is done in
 * about two seconds with 16 threads.
 *
 * Why it is safe with raft 0.15 (v0.15.0 sources, src/uv_fs.c,
 * src/uv_writer.c, src/uv_append.c): every context raft destroys is idle.
 * The probe waits for its one write (io_getevents) before io_destroy; a
 * segment writer is closed only once no write is in flight on it (raft
 * finalizes a segment "once idle", also when closing); the remaining calls
 * are on failure paths before any submission. So no kernel write can still
 * read raft's buffers after the call returns, which is the one guarantee a
 * synchronous io_destroy gives that a deferred one would not. What a
 * deferred context still holds until its thread gets to it: its ring pages
 * and its share of fs.aio-max-nr; both are bounded by max_pending, beyond
 * which io_destroy runs synchronously as before. A destroy that fails
 * (only EINVAL for an unknown context, which raft never passes) is logged
 * and counted instead of returned.
 *
 * Only programs that call aio_defer_start() link this file (a static
 * library member is pulled in by a reference), so nothing else changes for
 * other programs. It must not be used with a raft whose contexts can be
 * destroyed with writes in flight: re-check the above on a raft upgrade.
 *
 * Context: aio_defer_start/stop on the main thread before/after the loop
 * runs; syscall() from any thread. */
#ifndef CAIRN_AIO_DEFER_H
#define CAIRN_AIO_DEFER_H

#include <stdint.h>

#define AIO_DEFER_DEFAULT_THREADS 16
#define AIO_DEFER_DEFAULT_MAX_PENDING 1024

struct aio_defer_stats {
  uint64_t deferred;    /* io_destroy calls queued for the threads */
  uint64_t synchronous; /* run on the caller's thread: not started, or the queue was full */
  uint64_t failed;      /* deferred destroys the kernel refused */
  unsigned pending;     /* queued or in progress now */
};

/* Starts `threads` threads (1-64) and defers io_destroy from now on, with
 * at most max_pending contexts queued or in progress. Returns 0, CAIRN_EINVAL
 * (bad counts), CAIRN_EEXIST (already started), CAIRN_ENOMEM, or -errno from
 * pthread_create (nothing started then). Context: main thread, before the
 * loop runs and before other threads that may call io_destroy. */
__attribute__((warn_unused_result)) int aio_defer_start(unsigned threads, unsigned max_pending);

/* Waits until every deferred io_destroy has returned. Blocks. Context: any
 * thread but the deferring threads. */
void aio_defer_drain(void);

/* Drains, stops the threads and goes back to synchronous io_destroy. Does
 * nothing if not started. Context: main thread, with no other thread
 * calling io_destroy. */
void aio_defer_stop(void);

/* A consistent snapshot of the counters (since the program started).
 * Context: any thread. */
void aio_defer_stats(struct aio_defer_stats *st);

#endif
