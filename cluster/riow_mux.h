/* riow_mux.h - a complete raft 0.15 raft_io for one Raft group on the
 * node-wide log with the node's Raft multiplexer (--raft-log node with
 * --raft-mux on): storage in the node's log (raft_io_wal.h), messages
 * over the node's one connection per peer (raftmux.h), a libuv timer for
 * raft's tick unless the owner ticks raft itself (io->start with msecs 0:
 * no timer), uv_now for its time, a per-io generator for its random
 * numbers, the thread pool for its async_work. No raft_uv: no directory
 * probe, no kernel AIO context, no per-group connection, listener state or
 * buffers (docs/replication.md, "A replica's own raft_io").
 *
 * The owner embeds a struct riow_mux, calls riow_mux_init, may wrap the
 * io's methods with its own interposers on top, and hands &m->io to
 * raft_init. The methods find the riow_mux from the io they are called
 * with, so the io must stay inside its struct riow_mux.
 *
 * The group's transport (optional, transport.h; cairnd's replicas route
 * their fetches with transport_route_add instead and pass none): the io
 * drives it the way raft_uv drives its own (init at io->init, listen at
 * io->start, close at io->close), so the node's listener routes the
 * group's catch-up fetch connections (transport_group_set_fetch). A
 * raft_uv connection from a peer without --raft-mux is closed on arrival
 * (with one log line per io): the replica speaks to its peers only
 * through the mux.
 *
 *   state     event                                       to        by
 *   INIT      raft's io->start                            STARTED   riow_mux_on_start
 *   INIT      raft's io->close (raft_start failed)        CLOSING   riow_mux_on_close
 *   STARTED   raft's io->close                            CLOSING   riow_mux_on_close
 *   CLOSING   sends, log requests and async work drained,
 *             transport and timer closed: raft's cb       CLOSED    riow_mux_closed
 *
 * Term and vote (docs/replication.md, "Term and vote by group commit"),
 * unless riow_mux_set_group_commit turned it off: set_term and set_vote
 * do not block. Their record is queued in the
 * node's log (riow_set_meta_async) and made durable by the next write job
 * with every other group's records, one fdatasync for all of them, off the
 * loop. Until it is, raft 0.15's contract (durable when set_term/set_vote
 * return) is kept where it matters: the group's sends are held in order
 * (raftmux_hold) from the set_term/set_vote on, and go out when every such
 * record of the group is durable, so no RequestVote, vote granted,
 * AppendEntries, result or TimeoutNow reveals a term or vote the node
 * could forget in a crash. Entries appended after the record are after it
 * in the log: durable only after it. If the record's write fails, the log
 * latches fatal (wal.h), the held sends call back with RAFT_IOERR unsent,
 * every later send of this io too, and the owner's failure callback
 * (riow_mux_on_failed) fires so it can close and reopen the replica from
 * disk. Whatever else reveals a term outside raft's messages (cairnd's
 * coalesced heartbeats) asks riow_mux_meta_pending first.
 *
 * Close: raft_close's io close waits, in this order, for every send of the
 * group to call back (raftmux_io_close), for every request of the group in
 * the log (riow_close) and every async_work to call back, then closes the
 * transport and the timer (without a timer, raftmux_defer stands in for
 * its close callback); raft's close callback fires from the loop after
 * that, when nothing of the io is pending: raft (and the riow_mux) may be
 * freed from it.
 *
 * Context: the loop thread; async_work's work function runs on the thread
 * pool. */
#ifndef CAIRN_RIOW_MUX_H
#define CAIRN_RIOW_MUX_H

#include "cluster/raft_io_wal.h"
#include "cluster/raftmux.h"

#include <raft.h>
#include <raft/uv.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

enum riow_mux_state { RIOW_MUX_INIT, RIOW_MUX_STARTED, RIOW_MUX_CLOSING, RIOW_MUX_CLOSED };

struct riow_mux {
  struct raft_io io; /* first: raft hands this back */
  struct riow riow;
  struct raftmux_group mxg;
  /* private */
  uv_loop_t *loop;
  struct raft_uv_transport *rt; /* borrowed, NULL: none */
  uv_timer_t *timer;            /* owned: raft's tick, from a start with msecs > 0; NULL */
  raft_io_tick_cb tick_cb;
  raft_io_close_cb close_cb;
  uint64_t rand_state;    /* xorshift64*; never 0 */
  unsigned works;         /* async_work requests that have not called back */
  unsigned refused;       /* raft_uv connections refused (logged once) */
  unsigned meta_failures; /* term/vote records whose write failed */
  void (*on_failed)(struct riow_mux *m, int status); /* riow_mux_on_failed */
  enum riow_mux_state state;
  bool rt_init;  /* rt->init succeeded: rt->close is due */
  bool wal_idle; /* closing: no request of the group left in the log */
  bool drained;  /* closing: the transport's and timer's close begun */
};

/* Sets up m->io for group gid: storage in w (snapshot files in snap_dir,
 * created if missing), messages through mx as server self_id at
 * self_address, and optionally the group's transport rt (set up by
 * transport_group_init; NULL: none). Then raft_init(&m->io, ...): raft's
 * io->init records nothing more than rt's init. Ownership: borrows w and
 * mx (both must outlive the io's close callback) and rt (the same; the
 * owner releases it after the close callback), copies snap_dir and
 * self_address. Returns 0, CAIRN_EINVAL (snap_dir too long, self_address
 * empty or too long), CAIRN_ENOMEM or the error of creating snap_dir;
 * nothing to undo then. After 0: either raft_close (through raft) or,
 * for an io raft never initialized successfully, riow_mux_release. */
__attribute__((warn_unused_result)) int riow_mux_init(struct riow_mux *m, uv_loop_t *loop,
                                                      struct wal *w, uint64_t gid,
                                                      const char *snap_dir, struct raftmux *mx,
                                                      uint64_t self_id, const char *self_address,
                                                      struct raft_uv_transport *rt);

/* Group commit of term and vote (above) on or off; on after riow_mux_init.
 * Off: set_term and set_vote are durable when they return (a blocking
 * wal_flush_sync, raft 0.15's own contract) and nothing is held. Call
 * before raft uses the io. */
void riow_mux_set_group_commit(struct riow_mux *m, bool on);

/* cb fires (from the loop) when a term or vote record of m failed to
 * become durable: the log is fatal, m's sends fail from now on, and its
 * raft believes a term or vote the disk may not hold, so the owner must
 * close this raft and reopen it from disk. status: the log's error. Call
 * after riow_mux_init; NULL: none. */
void riow_mux_on_failed(struct riow_mux *m, void (*cb)(struct riow_mux *m, int status));

/* Is a term or vote record of m not yet durable (so m's sends are held)?
 * Whatever reveals m's raft term other than its sends asks this first. */
bool riow_mux_meta_pending(const struct riow_mux *m);

/* Undoes riow_mux_init at once for an io whose raft_init failed (no
 * io->start, no send was made; rt never listened). */
void riow_mux_release(struct riow_mux *m);

#endif
