/* partitions.h - the partition replicas this node hosts, kept in line with
 * the metadata (meta_state.h): every partition whose target replica set
 * names this node has an open Raft group (rgroup.h); every other one is
 * closed, and its data removed once it is certain the node no longer holds
 * it (the topic was deleted, or the node was moved off the partition and
 * its metadata replica is up to date).
 *
 * Directory of a hosted replica: <data>/partitions/<topic>-<p>.<topic id>/
 * (rgroup.h says what is inside).
 *
 * A node listed in the partition's initial replicas bootstraps its group
 * with them; a node added later (repair, decommission) starts empty and is
 * brought into the Raft configuration by the partition's leader
 * (parts_step_membership), which then catches it up.
 *
 * A replica whose Raft files are refused (raft_files.h: damage that cannot
 * be repaired safely) is rebuilt from its peers, never rejoined with fewer
 * entries than it acknowledged (docs/fault-tolerance.md, "Rebuilding a
 * replica"):
 *   refused  parts_open_one records it in ps->damaged (since_ms names the
 *            refusal); the node reports it with its heartbeat as a store
 *            failure with raft_damaged; the controller leader's table
 *            (store_faults.h) reaches every node.
 *   removed  the partition's leader sees the entry and removes the server
 *            from the group's Raft configuration (parts_step_membership);
 *            it adds no server so reported. Once its committed
 *            configuration lacks the server (parts_replica_out), its
 *            heartbeats say so for that since_ms; the controller marks the
 *            entry rebuild_ready.
 *   rebuilt  the node sees rebuild_ready for its own refusal: parts_rebuild
 *            moves <replica>/raft aside to raft.damaged-<unix seconds>
 *            (PARTS_DAMAGED_KEEP kept), forgets the refusal and opens the
 *            replica empty, joining (never bootstrapping: a replica dir that
 *            holds a raft.damaged-* entry always joins, also after a crash
 *            right after the move). No longer reported, it is added by the
 *            leader as a spare and promoted once caught up. The partition
 *            log stays: it holds applied, hence committed, entries, which
 *            the new Raft log repeats at the same indexes (the state machine
 *            skips an index the store holds; a snapshot it covers needs
 *            nothing, one ahead of it is caught up from a peer).
 * With the node-wide log (opts.wal), a replica is refused when its
 * directory holds the mark a damaged log left (waldamage.h: the log was
 * set aside at node start with the replica's term, vote and entries), and
 * the rebuild makes raft.damaged-<seconds> and moves the replica's
 * snapshot files and then the mark into it.
 * Every step is idempotent and keyed by since_ms, so a leader change or a
 * crash at any point repeats or resumes it. Why a confirmation stays true:
 * a committed configuration lacking the server can only be followed by one
 * naming it as a voter again through raft_assign, which needs the server to
 * answer and catch up, and its replica stays closed from the refusal until
 * it is rebuilt. A deposed leader that does not know yet confirms only
 * from a configuration that was committed, and raft steps such a leader
 * down within an election timeout of losing its majority.
 *
 * Context: loop thread only. */
#ifndef CAIRN_PARTITIONS_H
#define CAIRN_PARTITIONS_H

#include "cluster/gstart.h"
#include "cluster/meta_state.h"
#include "cluster/parts_synced.h"
#include "cluster/rgroup.h"
#include "cluster/rgroup_compact.h"
#include "cluster/rgroup_mem.h"
#include "cluster/vouch.h"
#include "cluster/store_faults.h"
#include "cluster/transport.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define PARTS_DIRNAME "partitions"
/* How long a stopping node waits for its leadership transfers. */
#define PARTS_HANDOFF_MAX_MS 5000

/* raft.damaged-* directories kept in a replica dir (the oldest go). */
#define PARTS_DAMAGED_KEEP 3
/* Partition logs opened (recovered, created) on the thread pool at once;
 * a replica whose turn comes while that many are under way opens its log
 * on the loop, as before. The pool keeps a thread for the logs' sync jobs
 * (libuv's default pool has 4). */
#define PARTS_LOG_OPENS_OFF_LOOP 3u

/* Buckets of the queued opens' hash (a power of 2). */
#define PARTS_OPEN_BUCKETS 4096u

/* Refused replicas remembered (a node hosts fewer). */
#define PARTS_DAMAGED_MAX SFAULT_MAX

enum part_state { PART_OPEN, PART_CLOSING };

/* A replica whose Raft files were refused, waiting to be rebuilt. */
struct part_damaged {
  uint64_t group_id;
  uint32_t topic_id;
  uint32_t partition;
  uint64_t since_ms;                  /* wall clock of the refusal: names it */
  char reason[SFAULT_REASON_MAX + 1]; /* the check's message */
};

struct parts;

/* One hosted replica. */
struct part {
  struct parts *owner;
  uint64_t group_id;
  uint32_t topic_id;
  uint32_t partition;
  char *topic; /* owned: the topic's name */
  char *dir;
  enum part_state state;
  bool remove_data;  /* delete dir once closed */
  bool close_queued; /* PART_CLOSING, waiting for its turn to shut down */
  struct rgroup rg;
  struct raft_change change; /* the one membership change in flight */
  bool changing;
  uint64_t change_epoch; /* replica_epoch the change was made for */
};

typedef void (*parts_close_cb)(struct parts *ps);

/* A replica waiting for its turn to open (opens are spread over loop
 * iterations by a gstart, so a node opening hundreds of replicas keeps
 * serving the ones already open). */
struct part_open {
  struct gstart_job job;
  struct parts *ps;
  struct meta_assignment a;
  struct part_open *next; /* in its bucket of parts.opening */
  /* A postgresql replica: its database half (connect, migrate, load) runs
   * on the thread pool before the open finishes on the loop. A partition
   * log's recovery (or creation) does too, PARTS_LOG_OPENS_OFF_LOOP at a
   * time (plog set; pg_* then name the log's store and options). */
  bool plog;
  char *plog_dir; /* the replica's directory, owned */
  uv_work_t pg_work;
  struct rgroup_opts pg_opts; /* pg_* and topic fields; topic points at pg_topic */
  char pg_topic[256];
  struct store *pg_store;     /* what the work made, NULL on failure */
  int pg_rv;
  char pg_err[512];
};

struct parts {
  uv_loop_t *loop;
  struct transport *tr;
  uint64_t self_id;
  char *root; /* <data>/partitions */
  struct rgroup_opts opts;
  struct part **v; /* sorted by group id */
  uint64_t *ids;   /* v[i]->group_id, in an array of their own: a lookup's binary
                      search touches no part (each a cache miss; hbeat.c looks up
                      every group named in every beat) */
  size_t n, cap;
  uint64_t gen; /* bumped when a part is added, removed or starts closing */
  struct gstart gs;
  struct rgroup_ticker ticker;  /* ticks every hosted replica's Raft (rgroup.h) */
  struct vouch_table vouch;     /* the node's sparse beats (vouch.h) */
  struct rgroup_compact_gate compact_gate; /* quiet-log compactions (rgroup_compact.h) */
  struct rgroup_mem mem; /* the bound on Raft's entries in memory (rgroup_mem.h) */
  /* Queued opens, and postgresql ones connecting, hashed by group id
   * (parts_open_bucket): a node creating 10,000 replicas looks one up per
   * assignment at every reconcile and removes one per open, so a list
   * walked each time cost O(replicas^2). */
  struct part_open *opening[PARTS_OPEN_BUCKETS];
  unsigned pg_opening;          /* of those, connecting on the thread pool (or opening their
                                   partition log there) */
  unsigned plog_opening;        /* of pg_opening, partition logs */
  const struct meta_state *st;  /* the state of the last reconcile */
  rgroup_applied_cb on_applied; /* given to every replica opened */
  rgroup_leading_cb on_leading; /* the owner's (may be NULL): a hosted replica
                                   started leading a term */
  struct psync found; /* replica dirs found at start, synced by one syncfs (parts_synced.h) */
  struct part_damaged *damaged; /* refused replicas, [0, ndamaged) */
  size_t ndamaged, damaged_cap;
  bool faults_damaged;          /* the cluster's table listed a refused replica */
  uint64_t rebuilds;            /* refused replicas whose files were moved aside (metrics) */
  bool synced;                  /* the metadata replica is known to be up to date */
  bool reconcile_closing;       /* a replica the metadata dropped is shutting down */
  /* parts_step_membership's walks */
  bool step_due;         /* walk at the next call */
  uint64_t step_index;   /* st->last_index at the last walk */
  uint64_t step_last_ms; /* uv_now at the last walk */
  uint64_t step_walks;   /* walks made (for tests and metrics) */
  bool closing;
  unsigned closing_count;
  uv_timer_t handoff_timer; /* parts_close: waits for the transfers */
  uint64_t handoff_deadline;
  parts_close_cb close_cb;
  void *data; /* for the owner */
};

/* Initializes an empty set rooted at <data_dir>/partitions (created).
 * opts (borrowed, copied) are the defaults for every group. Returns 0 or a
 * negative code. */
__attribute__((warn_unused_result)) int parts_init(struct parts *ps, uv_loop_t *loop,
                                                   struct transport *tr, uint64_t self_id,
                                                   const char *data_dir,
                                                   const struct rgroup_opts *opts);

/* Queues the opening of what st assigns to this node and is not open
 * (opened over the next loop iterations; st must stay valid, as the
 * controller's state does), closes what it no longer assigns. synced: st is known to be current
 * (then data of replicas moved away is removed, and so are directories left over from before a
 * restart). Failures to open one replica are logged and retried at the
 * next call. */
void parts_reconcile(struct parts *ps, const struct meta_state *st, bool synced);

/* How often parts_step_membership walks every partition when nothing
 * called for a walk (a retry sweep). */
#define PARTS_STEP_SWEEP_MS 5000

/* Leader side of repair: for each hosted partition this node leads whose
 * Raft voters differ from st's target replicas, makes one membership change
 * (add the missing replica as a voter — raft catches it up first — or
 * remove one no longer listed). Called on the node's tick, it walks the
 * partitions only when something may call for a change: st changed
 * (st->last_index), a hosted replica started leading a term, a change
 * finished or could not be made; and otherwise every PARTS_STEP_SWEEP_MS.
 * faults (borrowed for the call) is the cluster's table of failed replicas:
 * a server listed there with raft_damaged is removed first and never added
 * while listed. */
void parts_step_membership(struct parts *ps, const struct meta_state *st,
                           const struct sfault_table *faults);

/* Sums what the hosted replicas' Raft holds in memory and moves the
 * node's scale (rgroup_mem.h). Called on the node's tick: one pass over
 * the replicas, a few arithmetic operations each. */
void parts_mem_tick(struct parts *ps);

/* The cluster's table of failed replicas changed (faults borrowed for the
 * call): while it lists a refused replica, and once more after it listed
 * one, the next parts_step_membership walks (a removal or the re-adding is
 * due now, not at the next sweep). */
void parts_faults_changed(struct parts *ps, const struct sfault_table *faults);

/* Does this node lead (topic id, partition), with a committed Raft
 * configuration (no change pending) that lacks node_id altogether? Then
 * node_id may discard its replica's Raft files: it can only come back as a
 * spare, and a voter once caught up. */
bool parts_replica_out(struct parts *ps, uint32_t topic_id, uint32_t partition, uint64_t node_id);

/* The leader confirmed (parts_replica_out) that the refusal since_ms of
 * this node's replica of (topic id, partition) may be rebuilt: moves its
 * Raft files aside, forgets the refusal and queues the replica's open (it
 * joins empty). Nothing when no such refusal is recorded (done already, or
 * a newer one). Blocking file I/O (a rename and an fsync). Returns 0 or a
 * negative code (logged; the refusal is kept and the next call retries). */
int parts_rebuild(struct parts *ps, uint32_t topic_id, uint32_t partition, uint64_t since_ms);

/* The hosted replica of (topic id, partition), NULL if none. Returns
 * borrowed, valid until the next parts_reconcile or the close. */
struct part *parts_find(struct parts *ps, uint32_t topic_id, uint32_t partition);

/* This node's refused replica of (topic id, partition), waiting to be
 * rebuilt; NULL if none. Returns borrowed, valid until the next
 * parts_reconcile or parts_rebuild. */
const struct part_damaged *parts_find_damaged(struct parts *ps, uint32_t topic_id,
                                              uint32_t partition);

/* The hosted replica of Raft group group_id (in any state), NULL if none.
 * Returns borrowed, as parts_find. */
struct part *parts_get(struct parts *ps, uint64_t group_id);

/* parts_get for lookups that come in increasing group order (a coalesced
 * heartbeat's entries, hbeat.h): tries the slot after the previous find
 * (*hint, 0 to begin) before searching. Returns borrowed, like parts_get;
 * *hint is updated. */
struct part *parts_get_next(struct parts *ps, uint64_t group_id, size_t *hint);

/* Node node_id was seen gone (nodewatch.h): every open replica that
 * follows a leader there starts an election now (rgroup_leader_gone). */
void parts_node_gone(struct parts *ps, uint64_t node_id);

/* Shuts every replica down: hands off every leadership at once, waits for
 * the transfers (at most PARTS_HANDOFF_MAX_MS), then closes the replicas
 * one at a time (raft 0.15 crashes closing many at once), then cb.
 * Callback: fires exactly once. */
void parts_close(struct parts *ps, parts_close_cb cb);

/* Applies each open replica's retention limits (rgroup_retention) at
 * now_ms (wall clock, as record timestamps), the limits its topic has in
 * st now (a topic's configuration changes while its replicas run). Returns
 * the segments deleted in all. Borrows st for the call. */
uint32_t parts_retention(struct parts *ps, const struct meta_state *st, int64_t now_ms);

#endif
