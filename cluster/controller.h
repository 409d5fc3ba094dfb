/* controller.h - the metadata Raft group (the controller, like Kafka's
 * KRaft): nodes, topics and the placement of partition replicas.
 *
 * Every node runs one replica of it, as group CTL_GROUP_ID on the node's
 * cluster port. The configured controller voters bootstrap it (all with the
 * same voter list, so they agree without an exchange); every other node
 * starts with an empty Raft log and is added by the leader as a standby
 * (RAFT_STANDBY: it receives the log, it never votes), so every node holds
 * the whole metadata. The state machine is meta_state (meta_state.h);
 * snapshots are full copies of it (it is small).
 *
 * Entries: u32 LE length, an encoded MetaCommand, zero padding to 8 bytes
 * (raft 0.15 needs entry lengths that are multiples of 8).
 *
 * The leader also keeps what is not replicated: when it last heard from
 * each node (ctl_note_heartbeat) and what each partition leader reported of
 * its Raft configuration. Once a second it runs the repair planner
 * (meta_plan.h) on them and proposes what the planner asks for, and brings
 * the metadata group's own membership in line with the node list (one
 * change at a time: add a registered node as standby, remove a removed one).
 *
 * Storage: raft_uv's files in the group's directory, or (ctl_opts.wal) the
 * node-wide log as group CTL_GROUP_ID (META_GROUP_ID: no partition's group
 * id is below 1 << META_PARTITION_BITS), through the same trampolines as
 * the partitions' replicas (riow_uv.h).
 *
 * Failed write (ctl_opts.wal only): the first append, term, vote or
 * truncate write that fails, or is refused because the node's log is
 * fatal, latches the controller (ctl->raft_failed): every later write is
 * refused before it reaches the log, received messages and raft's ticks
 * are dropped (this replica acknowledges, votes and times out no more, and
 * as leader stops its heartbeats so the others elect another), proposals
 * are refused (ctl_propose: CAIRN_ENOTLEADER), and on_fatal is called once
 * so the node can stop. Unlike a partition's replica it is not reopened in
 * place: the node's placement of every partition hangs on its state, and a
 * restart replays it from the log.
 *
 * Refused (ctl_opts.refused: the node's metadata log was damaged and set
 * aside, metaheal.h): ctl_open opens no Raft at all: no transport group, no
 * I/O, no tick; the state is empty, ctl_leader names no one, proposals are
 * refused (CAIRN_ESHUTDOWN). The replica neither votes nor acknowledges
 * until the node, told by the leader that the committed configuration
 * lacks it, calls ctl_rejoin: Raft then starts on the (empty) log without
 * bootstrapping.
 *
 * Refused replicas of other nodes (the leader's side): ctl_note_refused
 * records a node whose replica is refused; for CTL_REFUSED_HOLD_MS after
 * its last report the membership step removes it from the group (even a
 * voter: its lost votes and entries must stop counting) and never adds it
 * back; ctl_note_refused answers whether the committed configuration lacks
 * it. Configured voters (the cluster's Bootstrap voters) that are in the
 * group as spares or standbys (a rebuilt replica added back) are assigned
 * the voter role; raft 0.15 promotes only once the server caught up.
 *
 * Lifecycle:
 *   ctl_open -> CTL_RUNNING --ctl_close--> CTL_CLOSING -> cb -> CTL_CLOSED
 *   ctl_open (opts.refused) -> CTL_REFUSED --ctl_rejoin--> CTL_RUNNING
 *   CTL_REFUSED --ctl_close--> cb -> CTL_CLOSED
 *   (ctl_open failing leaves nothing to close; ctl_rejoin failing leaves
 *   CTL_CLOSING, and ctl_close's callback fires once that is done.)
 *
 * Context: loop thread only. */
#ifndef CAIRN_CONTROLLER_H
#define CAIRN_CONTROLLER_H

#include "cluster/ctl_reports.h"
#include "cluster/raftfix.h"
#include "cluster/meta_plan.h"
#include "cluster/meta_state.h"
#include "cluster/riow_uv.h"
#include "cluster/transport.h"

#include <raft.h>
#include <raft/uv.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define CTL_GROUP_ID 1
#define CTL_TICK_MS 1000
#define CTL_ERRMSG_SIZE 640
#define CTL_MAX_VOTERS 7
#define CTL_MAX_INFLIGHT 64 /* proposals of the planner and of requests */
#define CTL_SNAPSHOT_THRESHOLD 16 /* entries between two snapshots of the metadata (controller.c) */

#define CTL_MAX_REFUSED 16       /* refused replicas the leader tracks at once */
#define CTL_REFUSED_HOLD_MS 3000 /* a refused node is kept out this long after its report */

enum ctl_state {
  CTL_RUNNING, /* Raft runs */
  CTL_CLOSING, /* ctl_close (or a failed ctl_rejoin): Raft closing */
  CTL_CLOSED,  /* everything freed */
  CTL_REFUSED  /* the log was damaged: no Raft until ctl_rejoin */
};

struct ctl_voter {
  uint64_t id;
  const char *address; /* cluster address, "host:port" */
};

struct controller;
struct ctl_append;

/* The metadata group's log went fatal (ctl_opts.wal): data is ctl_open's
 * change_data. */
typedef void (*ctl_fatal_cb)(struct controller *ctl, void *data);

struct ctl_opts {
  /* NULL: raft_uv's files in the group's directory. Otherwise the node's
   * log (borrowed: it must stay open until the close callback), as group
   * CTL_GROUP_ID, snapshot files in <dir>/wal-snapshots; a failed write
   * latches the group (see "Failed write" above) and calls on_fatal. */
  struct wal *wal;
  ctl_fatal_cb on_fatal;     /* may be NULL */
  unsigned heartbeat_ms;     /* 0: 100 */
  unsigned election_ms;      /* 0: 1000 */
  size_t raft_segment_size;  /* 0: 1 MiB */
  unsigned node_timeout_ms;  /* 0: 10000 */
  unsigned replace_delay_ms; /* 0: 60000 */
  bool refused;              /* open in CTL_REFUSED (see "Refused") */
  bool no_bootstrap;         /* a configured voter joins too: the data dir's
                              * replica was rebuilt once (metaheal.h) */
};

struct ctl_propose;

/* status: 0 when the command was applied (res tells whether the state
 * machine accepted it), or a negative code when it never was (
 * CAIRN_ENOTLEADER, CAIRN_EINDOUBT, CAIRN_ESHUTDOWN). res is borrowed, valid
 * during the callback only. */
typedef void (*ctl_propose_cb)(struct ctl_propose *req, int status, const struct meta_result *res);
/* Called after every applied command and after a snapshot is restored. */
typedef void (*ctl_change_cb)(struct controller *ctl, void *data);
typedef void (*ctl_close_cb)(struct controller *ctl);

/* One proposal; caller allocates it and keeps it until the callback. */
struct ctl_propose {
  void *data; /* for the caller */
  /* private */
  struct raft_apply apply;
  struct controller *ctl;
  ctl_propose_cb cb;
};


/* What the leader knows of one node beyond the replicated state. */
struct ctl_seen {
  uint64_t node_id;
  uint64_t last_ms;       /* loop time of the last heartbeat */
  uint64_t incarnation;
  uint64_t report_seq;    /* the node's report the reports hold, 0: none */
};

/* A node that reported its metadata replica refused (leader only). */
struct ctl_refused {
  uint64_t node_id;
  uint64_t heard_ms; /* loop time of its last report */
};

struct controller {
  uv_loop_t *loop;
  struct transport *tr;
  uint64_t self_id;
  char *self_address;
  char *dir;
  enum ctl_state state;
  bool voter;
  struct ctl_opts opts;
  struct meta_state st;
  struct raft_uv_transport rt;
  struct riow_uv wio; /* raft_uv's io; with opts.wal, storage in the node's log */
  struct raft_fsm fsm;
  struct raft raft;
  struct meta_result result; /* of the entry being applied */
  uv_timer_t tick;
  uv_check_t held_check;      /* gives raft snap_held once its own snapshot is done */
  struct raft_change change;  /* the one membership change in flight */
  bool changing;
  bool planning;               /* planner proposals in flight */
  unsigned plan_inflight;
  raft_term leader_term;       /* term in which liveness was reset */
  struct ctl_seen *seen;       /* leader only */
  size_t nseen, seen_cap;
  struct ctl_reports reports; /* partition reports, leader only (ctl_reports.h) */
  struct raft_barrier barrier; /* one per leader term: marks the state current */
  bool barrier_inflight;
  raft_term barrier_issued_term;
  raft_index barrier_index;    /* its index: results of its term held until stored */
  raft_term barrier_term;      /* term whose barrier was applied: as leader in
                                * it, everything committed is applied */
  /* raft_uv's send and raft's receive callback, wrapped for the pre-vote
   * fix (rgroup.h: rgroup_elect_prevote_answer/_refused) */
  int (*io_send)(struct raft_io *io, struct raft_io_send *req, const struct raft_message *m,
                 raft_io_send_cb cb);
  int (*io_start)(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv);
  int (*io_random)(struct raft_io *io, int min, int max); /* raft_uv's, narrowed by ctl_io_random */
  raft_io_recv_cb raft_recv;
  raft_io_tick_cb raft_tick;
  struct raftfix_clamp clamp; /* answers cut back to what was verified (raftfix.h) */
  struct raftfix_conf conf_kept; /* the committed configuration, for a rollback (raftfix.h) */
  struct raftfix_held snap_held; /* an InstallSnapshot raft would drop now (raftfix.h) */
  /* with opts.wal: the storage writes, wrapped to latch a failure */
  int (*io_append)(struct raft_io *io, struct raft_io_append *req,
                   const struct raft_entry entries[], unsigned n, raft_io_append_cb cb);
  int (*io_set_term)(struct raft_io *io, raft_term term);
  int (*io_set_vote)(struct raft_io *io, raft_id id);
  int (*io_truncate)(struct raft_io *io, raft_index index);
  int (*io_load)(struct raft_io *io, raft_term *term, raft_id *voted_for,
                 struct raft_snapshot **snapshot, raft_index *start_index,
                 struct raft_entry *entries[], size_t *n_entries);
  unsigned appends_inflight;   /* interposed appends not called back */
  struct ctl_append *failed;   /* failed appends held back (controller.c) */
  bool raft_failed;            /* a write to the node's log failed: latched */
  bool fatal_reported;         /* on_fatal called */
  bool ticking;                /* the tick timer runs (ctl_open got past raft_start) */
  int last_role;               /* raft_state() at the last tick: role changes are logged */
  uint64_t last_leader;        /* the leader known at the last tick (0: none) */
  bool start_short;            /* on the short election timeout since the start
                                * (or a vote request from a shorter log) until a
                                * leader is known (rgroup.h: rgroup_elect_start_timer) */
  uint64_t started_ms;
  struct ctl_refused refused[CTL_MAX_REFUSED]; /* leader only */
  size_t nrefused;
  ctl_change_cb on_change;
  void *change_data;
  ctl_close_cb close_cb;
  int closing_parts;
  char errmsg[CTL_ERRMSG_SIZE];
};

/* Opens (or creates) this node's replica of the metadata group in dir. If
 * self_id is one of the voters, a fresh replica bootstraps the voter
 * configuration; otherwise (also with no voters at all: a node joining an
 * existing cluster) it starts empty and waits to be added as a standby. on_change (may be NULL) is called after each applied change.
 * Caller allocates ctl and keeps tr open until the close callback. Returns
 * 0, or a negative code with ctl->errmsg set (nothing to close then). */
__attribute__((warn_unused_result)) int ctl_open(struct controller *ctl, uv_loop_t *loop,
                                                 struct transport *tr, uint64_t self_id,
                                                 const char *self_address, const char *dir,
                                                 const struct ctl_voter *voters, unsigned nvoters,
                                                 const struct ctl_opts *opts,
                                                 ctl_change_cb on_change, void *change_data);

/* Proposes an encoded MetaCommand (borrowed: copied before return). Leader
 * only. Callback: fires exactly once if this returns 0. Returns 0,
 * CAIRN_ENOTLEADER, CAIRN_ESHUTDOWN or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int ctl_propose(struct controller *ctl,
                                                    struct ctl_propose *req, const uint8_t *cmd,
                                                    size_t len, ctl_propose_cb cb);

/* The metadata as this replica has applied it. Returns borrowed: valid
 * until the next loop iteration (applies change it). */
const struct meta_state *ctl_state(const struct controller *ctl);

/* The controller leader as this replica knows it: id 0 when unknown;
 * address borrowed (its cluster address), valid until the next iteration. */
void ctl_leader(struct controller *ctl, uint64_t *id, const char **address);

bool ctl_is_leader(struct controller *ctl);

/* The Raft index of the last metadata entry this replica applied. */
uint64_t ctl_applied_index(struct controller *ctl);

/* As leader, once a barrier of its term is applied (so every entry any
 * earlier leader committed is applied here too): ctl_applied_index.
 * Otherwise 0 (not leader, or not yet sure), and a leader starts that
 * barrier if none is in flight. A node whose replica has applied this
 * index has metadata at least as new as the leader had then. */
uint64_t ctl_leader_applied_index(struct controller *ctl);

/* A node's partition report, as ctl_note_heartbeat takes it. base 0: a
 * full report (reports are the partitions the node leads); otherwise a
 * delta on the node's report numbered base (reports are the partitions
 * whose report changed or that it started leading since, stopped the group
 * ids (meta_group_id) of those it no longer leads). seq numbers it (0: an
 * unnumbered full report, never the base of a delta). */
struct ctl_node_report {
  uint64_t seq;
  uint64_t base;
  const struct ctl_report *reports;
  size_t n;
  const uint64_t *stopped;
  size_t nstopped;
};

/* Leader only (ignored otherwise, returns 0): node_id was heard from now,
 * and rep says which partitions it leads (copied). A partition keeps one
 * report: the one of the highest term (a dead leader's last report is
 * replaced by its successor's). A delta applies only on the report it was
 * made on (the node's last one applied, by this leader in this term);
 * otherwise only the liveness is noted. Returns the report the controller
 * now holds for the node: rep->seq when applied, 0 when the node must send
 * a full report. */
uint64_t ctl_note_heartbeat(struct controller *ctl, uint64_t node_id, uint64_t incarnation,
                            const struct ctl_node_report *rep);

/* Is node_id heard from within the node timeout (leader's view)? */
bool ctl_node_is_live(const struct controller *ctl, uint64_t node_id);

/* Has this leader heard from that very incarnation of node_id within the
 * node timeout? (A leader that has not heard from it since it took office
 * says no.) */
bool ctl_incarnation_is_live(const struct controller *ctl, uint64_t node_id,
                             uint64_t incarnation);

/* CTL_REFUSED -> CTL_RUNNING: starts Raft on the group's log without
 * bootstrapping. Only once the leader confirmed the committed
 * configuration lacks this node. Returns 0 or a negative code with
 * ctl->errmsg set (the controller is then CTL_CLOSING: close it). */
__attribute__((warn_unused_result)) int ctl_rejoin(struct controller *ctl);

/* Leader only: node_id reports its metadata replica refused (metaheal.h).
 * Returns 1 when the committed configuration lacks it and no change is
 * uncommitted (the node may drop its state: answer OUT), 0 when not yet
 * (it is removed at the next tick), CAIRN_ENOTLEADER when not leader. */
int ctl_note_refused(struct controller *ctl, uint64_t node_id);

/* Leader only: node_id's replica rejoined empty: it may be added back at
 * once. */
void ctl_note_rejoined(struct controller *ctl, uint64_t node_id);

/* This replica's role in the group's configuration as it knows it
 * (RAFT_VOTER, RAFT_STANDBY, RAFT_SPARE), or -1 when it is not a member or
 * runs no Raft. */
int ctl_self_role(const struct controller *ctl);

/* True once a write to the node's log failed (see "Failed write"). */
bool ctl_failed(const struct controller *ctl);

/* Closes Raft and its I/O, fails proposals in flight (CAIRN_ESHUTDOWN),
 * frees the state. Callback: fires exactly once. */
void ctl_close(struct controller *ctl, ctl_close_cb cb);

#endif
