/* rgroup_ticker.h - the node's driver of its partition replicas' Raft
 * ticks: one timer ticks the awake groups every heartbeat interval, a
 * second one ticks the asleep groups (the idle ones a coalesced heartbeat
 * keeps) once per slow period, so an idle node's tick work does not grow
 * with the partitions it holds at the heartbeat's rate
 * (docs/replication.md, "Asleep groups").
 *
 * Why: raft 0.15 wants its tick every heartbeat interval. 10,000 replicas
 * on one node at the default 100 ms were 100,000 ticks a second (raft's
 * tick, rgroup's, the io's clock), most of an idle node's CPU with every
 * group idle. An idle group's tick has nothing to do while the coalesced
 * beat stands in for its heartbeats: a coalesced leader sends no Raft
 * heartbeat and each of its followers has its election timer restarted by
 * the beat.
 *
 * States of a group on the ticker (rg->ticker_asleep; the clock raft reads,
 * io->time, runs on in both, so whatever raft times from it is as
 * before):
 *
 *   from    event                                         to      by
 *   (none)  raft_start                                    AWAKE   rgroup_ticker_add
 *   AWAKE   after a fast tick: rgroup_pace_may_sleep      ASLEEP  rgroup_ticker_on_fast
 *   ASLEEP  after a slow tick: not rgroup_pace_may_sleep  AWAKE   rgroup_ticker_on_slow
 *   ASLEEP  a Raft message for the group, a proposal or   AWAKE   rgroup_ticker_wake
 *           a transfer, its coalesced beat refused or
 *           not sent, its leader's node seen gone
 *           (rgroup_leader_gone)
 *   ASLEEP  the node leading it stopped beating (hbeat.h) AWAKE   rgroup_ticker_wake_following
 *   any     raft_close                                    (none)  rgroup_ticker_remove
 *
 * Context: loop thread only. */
#ifndef CAIRN_RGROUP_TICKER_H
#define CAIRN_RGROUP_TICKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct rgroup;

/* Groups ticked at one speed. Slots emptied while the list is being
 * ticked are NULL until the tick ends (holes). */
struct rgroup_tick_list {
  struct rgroup **v;
  size_t n, cap;
  bool ticking;
  bool holes;
};

/* One node's driver of Raft ticks, for the groups given it in their
 * options (rgroup_opts.ticker): each is on it from raft_start until
 * raft_close, and the io's own tick timer is parked meanwhile (an hour's
 * period). */
struct rgroup_ticker {
  uv_timer_t timer;      /* fast: every msecs, the awake groups */
  uv_timer_t slow_timer; /* every slow_ms, the asleep groups */
  struct rgroup_tick_list awake, asleep;
  unsigned msecs;   /* the shortest tick any group asked; 0: none yet */
  unsigned slow_ms; /* the shortest election timeout of any group; 0: none yet */
  unsigned closing; /* timers still closing */
  uint64_t sleeps;  /* groups put to sleep (metrics) */
  uint64_t wakes;   /* groups woken (metrics) */
  void (*close_cb)(struct rgroup_ticker *t);
  void *data; /* for the owner */
};

/* Initializes a ticker with no group on loop. Returns 0 or CAIRN_EFATAL. */
__attribute__((warn_unused_result)) int rgroup_ticker_init(struct rgroup_ticker *t,
                                                           uv_loop_t *loop);

/* Closes both timers and frees t's memory; no group may be on it.
 * Callback (may be NULL): fires exactly once, from the loop. */
void rgroup_ticker_close(struct rgroup_ticker *t, void (*cb)(struct rgroup_ticker *t));

/* Puts rg (raft started) on its options' ticker, awake; nothing without a
 * ticker or if already on it. Returns 0 or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int rgroup_ticker_add(struct rgroup *rg);

/* Takes rg off its ticker, if on it. */
void rgroup_ticker_remove(struct rgroup *rg);

/* Back to the fast tick at once, if asleep (cheap otherwise). */
void rgroup_ticker_wake(struct rgroup *rg);

/* Wakes every asleep group of t that follows a leader on node node_id
 * (0: every asleep group). Returns how many were woken. */
size_t rgroup_ticker_wake_following(struct rgroup_ticker *t, uint64_t node_id);

/* How many groups are asleep now. */
size_t rgroup_ticker_asleep(const struct rgroup_ticker *t);

#endif
