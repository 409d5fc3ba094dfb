/* sim.h - the deterministic simulation of one partition's Raft group
 * (docs/fault-tolerance.md, "Deterministic simulation"): N replicas of
 * canonical/raft over raft_fixture's in-memory network and disk, or over
 * the simulation's own raft_io (sim_io.c: crashes, torn writes), each
 * applying entries with Cairn's own state machine core (rgroup_apply.c over
 * a memlog store and a producer table), driven by a seeded workload of
 * producers and a seeded schedule of faults, with invariants checked after
 * every step. One process, one thread, no real I/O, no clock: a seed
 * replays exactly.
 *
 * Modules: sim_replica.c (the raft_fsm adapter, the leader's produce queue,
 * the start-of-term rules of rgroup_raft.c, crash and restart), sim_io.c
 * (the crash engine's raft_io, disk and network), sim_workload.c (the
 * producers), sim_check.c (the invariants), sim_partition.c (the driver,
 * the faults and the command line). */
#ifndef CAIRN_SIM_H
#define CAIRN_SIM_H

#include "cluster/producer_state.h"
#include "cluster/rgroup.h"
#include "cluster/rgroup_apply.h"
#include "storage/store.h"

#include <raft.h>
#include <raft/fixture.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SIM_MAX_REPLICAS 5
#define SIM_MAX_PRODUCERS 8
#define SIM_MAX_INFLIGHT 5              /* batches from a producer's oldest unacknowledged one on */
#define SIM_MAX_ENTRY_BYTES (64u << 10) /* group commit bound, as max_entry_bytes */
#define SIM_REQUEST_TIMEOUT_MS 3000     /* a producer resends a batch unanswered this long */
#define SIM_ERRMSG_SIZE 512
#define SIM_ELECTION_MS 1000 /* raft_fixture's election timeout; the io engine's too */
#define SIM_HEARTBEAT_MS 100

/* ---- the seeded generator (splitmix64): the only source of choices ---- */

struct sim_rng {
  uint64_t s;
};

static inline uint64_t sim_rng_next(struct sim_rng *r)
{
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0. */
static inline uint32_t sim_rng_below(struct sim_rng *r, uint32_t n)
{
  return (uint32_t)(sim_rng_next(r) % n);
}

/* True with probability num / den. */
static inline bool sim_rng_chance(struct sim_rng *r, uint32_t num, uint32_t den)
{
  return sim_rng_below(r, den) < num;
}

/* ---- the io engine (sim_io.c): the simulation's own raft_io ---- */

struct sim_io_rec;
struct sim_io_op;
struct sim_io_send;
struct sim_io_msg;

/* What a replica's disk holds durably: the term, the vote and the log
 * records from index 1 (a torn last record is possible after a crash). */
struct sim_io_disk {
  raft_term term;
  raft_id vote;
  struct sim_io_rec *recs;
  size_t n, cap;
};

/* One replica's raft_io; survives its crashes (the disk is kept). */
struct sim_io {
  struct raft_io io;
  struct sim_net *net;
  unsigned index;
  raft_id id;
  char address[16];
  bool up;      /* a raft instance runs on it (start .. close) */
  bool started; /* ticks and messages flow */
  struct sim_io_disk disk;
  struct sim_io_op *ops; /* writes in flight, completed in order */
  int64_t last_done_ms;  /* completion time of the last write asked */
  unsigned disk_latency;
  struct sim_io_send *sends;
  unsigned tick_ms;
  int64_t next_tick_ms;
  raft_io_tick_cb tick;
  raft_io_recv_cb recv;
  uint64_t torn_entries, torn_cut,
      torn_dropped; /* whole / cut records left by crashes; dropped at load */
};

/* The network and the clock of the io engine. */
struct sim_net {
  int64_t now;
  struct sim_rng rng;
  struct sim_io *ios[SIM_MAX_REPLICAS];
  unsigned n;
  bool cut[SIM_MAX_REPLICAS][SIM_MAX_REPLICAS]; /* messages i -> j dropped at delivery */
  unsigned latency[SIM_MAX_REPLICAS];           /* per sender, ms, at least 1 */
  uint32_t loss_ppm, dup_ppm;
  bool torn_writes;         /* a crash may leave a prefix of the write in progress */
  bool early_ack;           /* the mutant: an append acknowledged before it is durable */
  bool cancel_oldest_first; /* raft_uv's order for writes cancelled at close */
  bool failed;              /* out of memory inside the io */
  struct sim_io_msg *msgs;
  uint64_t seq, lost, duplicated, dropped, delivered;
};

enum sim_io_event {
  SIM_IO_EV_NONE,
  SIM_IO_EV_SEND,
  SIM_IO_EV_ACK,
  SIM_IO_EV_DISK,
  SIM_IO_EV_NET,
  SIM_IO_EV_TICK,
};

/* Sets up replica index's io on net (its disk empty). */
void sim_io_init_replica(struct sim_io *sio, struct sim_net *net, unsigned index);
/* Frees a disk's records (after its raft instance is closed). */
void sim_io_disk_close(struct sim_io_disk *d);
/* Frees the messages still on the wire. */
void sim_net_close(struct sim_net *net);
/* Fires the earliest event due no later than until_ms (sim_io.c); returns
 * its kind, or SIM_IO_EV_NONE with the clock moved to until_ms. */
enum sim_io_event sim_net_step(struct sim_net *net, int64_t until_ms, unsigned *who);

/* ---- the workload's objects ---- */

enum sim_batch_state {
  SIM_BATCH_WAITING, /* built or to be resent: goes out at the producer's next turn */
  SIM_BATCH_SENT,    /* an attempt is queued or proposed at a replica */
  SIM_BATCH_ACKED,
};

/* One batch a producer built; every attempt sends the same bytes. */
struct sim_batch {
  struct sim_producer *p;
  uint8_t *bytes; /* owned; the producer's bytes (broker fields zero) */
  size_t len;
  uint64_t hash; /* of bytes[BATCH_BROKER_FIELDS_SIZE, len): what a store keeps unchanged */
  int16_t epoch;
  int32_t seq; /* base sequence, -1 for a plain producer */
  int32_t count;
  enum sim_batch_state state;
  uint64_t attempt; /* the current attempt; answers to older ones are ignored */
  unsigned attempts;
  int64_t sent_ms;
  int64_t offset; /* acknowledged base offset */
};

struct sim_producer {
  unsigned index;
  int64_t producer_id; /* -1: plain (not idempotent) */
  int16_t epoch;
  int32_t next_seq;
  struct sim_batch **batches; /* every batch built, in order; owned */
  size_t n, cap;
  size_t first_open; /* batches below are all acknowledged */
  int64_t next_turn_ms;
  int64_t last_acked_offset; /* of the newest acknowledged batch of the epoch */
  int32_t last_acked_seq;
  int16_t last_acked_epoch;
};

/* One attempt to produce a batch, queued at a replica (as struct
 * rgroup_produce is); freed by the replica after its answer. */
struct sim_req {
  struct sim_batch *b;
  uint64_t attempt;
  struct sim_req *next;
};

/* One proposed entry and the requests it carries (as struct rgroup_entry). */
struct sim_entry {
  struct raft_apply apply;
  struct sim_replica *rep;
  struct sim_req *reqs;
};

/* One replica: its Raft instance is the fixture's server of the same
 * index; the rest is Cairn's state machine state. */
struct sim_replica {
  struct sim *sim;
  unsigned index;
  struct raft_fsm fsm;
  struct store *store; /* memlog */
  struct producer_state producers;
  struct rgroup_apply ap;
  struct rgroup_applied applied; /* the last apply's results, for the leader's callback */
  /* the leader's produce queue (group commit: one entry in flight) */
  struct sim_req *queue_head, *queue_tail;
  struct sim_entry *inflight;
  /* the start-of-term rules of rgroup_raft.c (docs/raft-0.15.md, row 1) */
  raft_term term_appended;
  raft_index term_first_index;
  int (*io_start)(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv);
  raft_io_recv_cb raft_recv;
  int (*io_append)(struct raft_io *io, struct raft_io_append *req,
                   const struct raft_entry entries[], unsigned n, raft_io_append_cb cb);
  /* The clamp (the io engine, as rgroup_raft.c): the send method under the
   * interposer, whether an AppendEntries is being received and its end
   * (prev_log_index + n_entries). */
  int (*io_send)(struct raft_io *io, struct raft_io_send *req, const struct raft_message *m,
                 raft_io_send_cb cb);
  int (*io_random)(struct raft_io *io, int min, int max); /* the io engine's sim_io_random */
  struct raftfix_clamp clamp;                             /* raftfix_clamp, as every node's group */
  /* The disk: raft_uv writes appends one after the other, so they complete
   * in the order they were asked. The fixture completes each at its own
   * "now + latency", which reorders them when the latency drops; raft 0.15
   * (updateLastStored adds counts to last_stored) and the fixture's own log
   * (it appends entries in completion order) both assume FIFO. */
  unsigned disk_latency; /* what the faults ask for, in ms */
  raft_time append_done; /* completion time of the last append asked */
  uint64_t results_held;
  uint64_t barriers;
  uint64_t votes_unstuck; /* vote requests taken despite a silent leader */
  /* rgroup_elect_on_start: started with no leader known, the short
   * election timeout until one is (the io engine's restarts) */
  bool start_short;
  raft_time started_at;
  uint64_t start_short_used;
  uint64_t prevote_terms_taken;   /* rgroup_elect_prevote_refused */
  uint64_t second_votes_withheld; /* rgroup_elect_second_vote */
  /* what the checker has verified of this replica's store */
  size_t checked_batches; /* batches compared with the reference log */
  int64_t checked_next;   /* the offset after them */
  uint64_t applies;
  /* the io engine: the raft instance (NULL while crashed) and its io */
  struct raft *raft;
  struct sim_io sio;
  uint64_t store_index_at_start; /* the store's last index when raft last started */
  uint64_t crashes, store_cut_batches;
  /* <replica>/producers.cmd (rgroup_fsm_producers_cover): before a
   * LOG_START runs, the node flushes its log and saves its producer table
   * as of the log's end; a restart takes it and scans what follows. The
   * crash engine keeps the encoded table here, and never cuts the store
   * below flushed_offset. */
  uint8_t *cmd_table;
  size_t cmd_table_len;
  int64_t flushed_offset;
  uint64_t cmd_tables_used; /* restarts that took it */
  /* The last index applied before the last crash: a replay up to it may
   * find the log start already past where it was at that index (a
   * LOG_START's delete is durable, an entry with nothing appended leaves
   * no trace in the store and is replayed). */
  uint64_t applied_at_crash;
};

/* One batch of the reference log: the first replica to apply an offset
 * defines it, every other replica must store the same there. */
struct sim_ref_batch {
  int64_t base_offset;
  int32_t count;
  uint64_t source_index;
  uint64_t hash;
  int64_t producer_id;
  int16_t epoch;
  int32_t seq;
};

/* What one producer id's batches in the reference log look like so far. */
struct sim_ref_producer {
  int64_t producer_id;
  int16_t epoch;
  int32_t next_seq; /* the sequence its next batch must start at */
};

struct sim_check {
  struct sim_ref_batch *ref;
  size_t nref, capref;
  struct sim_ref_producer rp[SIM_MAX_PRODUCERS];
  size_t nrp;
  uint64_t *table_hash; /* per Raft index: the producer table after applying it (0 unset) */
  int64_t *start_at;    /* per Raft index: the log start after applying it, + 1 (0 unset) */
  size_t ntable;
  uint64_t acks, duplicates_answered, checks;
  raft_id *term_leader; /* per term: the replica seen leading it (0 none): one per term */
  size_t nterms;
};

/* What runs Raft's I/O: raft_fixture (no crash), or sim_io.c (crashes). */
enum sim_engine {
  SIM_ENGINE_FIXTURE,
  SIM_ENGINE_IO,
};

struct sim_opts {
  enum sim_engine engine;
  bool early_ack;            /* the io engine's mutant (sim_io.c) */
  bool no_torn;              /* the io engine without torn writes */
  bool cancel_oldest_first;  /* the io engine: sim_io.c's close as raft_uv orders it */
  bool no_clamp_results;     /* the io engine without rgroup's fix for seed 13488: raft 0.15's
                                answers as they are (sim_replica.c) */
  bool no_prevote_terms;     /* without rgroup_elect_prevote_answer/_refused: raft 0.15's
                                pre-vote stall (a longest log with the lowest term) */
  bool no_second_vote_guard; /* without rgroup_elect_second_vote: raft 0.15 votes twice in a
                                term for the target of its leadership transfer */
  bool wide_timers;          /* election timers as raft 0.15 runs them: drawn from [T, 2T],
                                not the nodes' [T, 1.5T] (rgroup_elect_spread_max), and a
                                candidate's next try a full timeout later, not on the short
                                one (rgroup_elect_on_candidacy) */
  bool log_start;            /* leaders propose LOG_START commands (DeleteRecords,
                                cluster/rgroup_cmd.h) now and then; the fixture engine */
  unsigned replicas;         /* 3 or 5; 0: chosen by the seed */
  unsigned producers;        /* 0: chosen by the seed */
  int64_t fault_ms;          /* simulated time with faults */
  int64_t settle_ms;         /* then without, until every batch is acknowledged */
  bool trace;
  FILE *out; /* the trace */
};

struct sim_stats {
  uint64_t steps, acks, batches, entries, faults, leader_changes, results_held, barriers;
  uint64_t duplicates_answered, refusals, sim_ms, votes_unstuck;
  uint64_t start_short_used, prevote_terms_taken; /* rgroup_elect.c's start and pre-vote rules */
  uint64_t second_votes_withheld;                 /* rgroup_elect_second_vote */
  uint64_t crashes, torn_entries, torn_cut, torn_dropped, store_cut_batches;
  uint64_t msgs_lost, msgs_duplicated, results_clamped;
  uint64_t log_starts; /* LOG_START commands proposed (opts.log_start) */
  uint64_t cmd_tables_used; /* restarts that took a LOG_START's saved producer table */
};

struct sim {
  uint64_t seed;
  struct sim_opts opts;
  struct sim_rng rng;
  struct raft_fixture f; /* SIM_ENGINE_FIXTURE */
  struct sim_net net;    /* SIM_ENGINE_IO */
  unsigned n;
  struct sim_replica reps[SIM_MAX_REPLICAS];
  struct sim_producer producers[SIM_MAX_PRODUCERS];
  unsigned nproducers;
  struct sim_check check;
  uint64_t step;
  bool failed;
  char errmsg[SIM_ERRMSG_SIZE];
  struct sim_stats stats;
  raft_id last_leader;
};

/* A violated invariant: records the first one (with the step) in
 * s->errmsg and sets s->failed; the driver stops at the end of the step. */
void sim_fail(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A line of the step trace (only with opts.trace). */
void sim_trace(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Simulated time in ms. */
int64_t sim_now(struct sim *s);

/* sim_replica.c */
int sim_replica_init(struct sim *s, struct sim_replica *rep, unsigned index);
void sim_replica_close(struct sim_replica *rep);
void sim_replica_interpose(struct sim_replica *rep); /* before raft_fixture_start */
void sim_replica_set_disk_latency(struct sim_replica *rep, unsigned ms);
struct raft *sim_replica_raft(struct sim_replica *rep);
/* Is a raft instance running for rep (not paused, not crashed)? */
bool sim_replica_up(struct sim_replica *rep);
/* The io engine: starts (or restarts) rep's raft instance from its disk
 * (bootstrapping it first when bootstrap is not NULL). 0 or a negative code. */
int sim_replica_start(struct sim_replica *rep, const struct raft_configuration *bootstrap);
/* The io engine: rep's process dies (sim_replica.c): raft closed, writes
 * not durable lost or torn, the store cut to a random entry boundary. */
void sim_replica_crash(struct sim_replica *rep);
/* Queues one attempt (rgroup_produce): 0, or CAIRN_ENOTLEADER at once. */
int sim_replica_produce(struct sim_replica *rep, struct sim_req *req);

/* As rgroup_delete_records: a LOG_START command with offset (within the
 * leader's log) proposed as an entry of its own. Returns 0 or
 * CAIRN_ENOTLEADER (or a raft error as a negative code). */
int sim_replica_log_start(struct sim_replica *rep, int64_t offset);
/* After each fixture step: the barrier of a new leader (rgroup_raft.c). */
void sim_replica_after_step(struct sim_replica *rep);

/* sim_workload.c */
int sim_workload_init(struct sim *s);
void sim_workload_close(struct sim *s);
void sim_workload_turn(struct sim *s, bool build);
/* An answer to an attempt, from inside Raft (never calls back into it). */
void sim_workload_on_result(struct sim *s, struct sim_req *req, int status, int64_t offset);
/* Are all batches acknowledged? */
bool sim_workload_done(struct sim *s);

/* sim_check.c */
void sim_check_init(struct sim_check *c);
void sim_check_close(struct sim_check *c);
/* After rep appended: compares the new batches with the reference log and
 * the producer table with the other replicas' at the same index. */
void sim_check_applied(struct sim *s, struct sim_replica *rep, uint64_t index, int64_t from);
/* An acknowledgement of b at offset (idempotent duplicates: the original). */
void sim_check_ack(struct sim *s, const struct sim_batch *b, int64_t offset);
/* Every step: cheap whole-state checks. */
void sim_check_step(struct sim *s);
/* The end of a seed: every store whole against the reference log, each
 * producer table equal to the one rebuilt from its store. */
void sim_check_final(struct sim *s);
/* After rep's store was cut by a crash: what of it stays checked. */
void sim_check_rewind(struct sim *s, struct sim_replica *rep);

/* FNV-1a. */
uint64_t sim_hash(const uint8_t *p, size_t len);

#endif
