/* hbeat.h - coalesced heartbeats: one message per node pair every beat
 * period stands in for the Raft heartbeats of every idle partition group
 * this node leads (docs/replication.md, "Coalesced heartbeats").
 *
 * raft 0.15 sends one empty AppendEntries per group per follower every
 * heartbeat, each answered, each over the group's own connection: at 1,000
 * idle partitions that was most of a node's idle CPU even on the slow
 * idle pace (docs/performance.md). A leader whose group is quiet stops
 * them (rgroup_pace.h, "Coalesced"); every beat period this node sends each
 * peer node one frame on its watch connection (nodewatch.h, "Frames")
 * naming (group, term, last index) for each such group the peer follows.
 * The peer answers with one frame of the groups it accepted (their
 * election timers restarted) and one of those it refused; an accepted
 * group counts as heard from on the leader (its majority check), a
 * refused one goes back to Raft's heartbeats. A peer that is not connected,
 * or that has not answered for HBEAT_ANSWER_PERIODS beat periods, has every
 * group it follows here woken likewise, so nothing depends on a frame
 * that cannot arrive. Silence is counted in beats as well as in time: a
 * peer is silent only when more than HBEAT_ANSWER_PERIODS beats in a row
 * went unanswered. This node's own loop may stall past that time (under a
 * produce over thousands of partitions it did, 600-900 ms) with the
 * answers waiting unread in the socket (timers run before the loop
 * reads), and waking thousands of groups onto Raft's heartbeats then only
 * adds to what stalled it. When this node stops (SIGSTOP, SIGKILL, a cut
 * link) its beats stop with it and the followers elect after their
 * election timeout, as when Raft's heartbeats stop.
 *
 * Asleep followers (rgroup_ticker.h): a follower kept by the beat is ticked
 * only every slow period. So that a leader's node falling silent is still
 * seen at the follower's own timing, the answering side notes when each
 * node last beat it, and a node silent for HBEAT_ANSWER_PERIODS check
 * periods (the beat period, or HBEAT_CHECK_MS on a node that does not
 * beat; more than that many checks in a row, as above) has every asleep
 * group following it woken back to the fast tick
 * (hbeat_on_timer), where its election timer, last restarted by the last
 * beat, runs out as before.
 *
 * Sparse beats (vouch.h): a beat names a group only until every follower
 * has accepted it at its (term, last index); after that the beat frame
 * itself vouches for it, the follower applying the vouch at the group's
 * own tick. Every frame of a beat, even one naming nothing, is answered
 * with an ACK frame, which is what keeps the leader's groups heard from.
 * Revocations, frame sequence numbers and epochs keep the vouch exact
 * (vouch.h); every HBEAT_FULL_PERIODS periods every group is named again.
 *
 * Payload (inside a nodewatch frame, which carries the length and a
 * CRC-32C), little-endian, version HBEAT_VERSION = 2:
 *    0  u8  version
 *    1  u8  type: HBEAT_BEAT (leader to follower), HBEAT_ACK (accepted),
 *           HBEAT_NACK (refused)
 *    2  u16 flags: HBEAT_F_RESET in an answer (a beat was missed)
 *    4  u32 count n (0..HBEAT_MAX_GROUPS)
 *    8  u64 epoch: the leader node's epoch for this follower (answers echo it)
 *   16  u64 sequence number of the beat frame (answers echo it)
 *   24  n × { u64 group id, u64 term, u64 last index (VOUCH_REVOKED: the
 *           group is no longer vouched for) }
 * A payload that does not parse is dropped with a log line (at most one a
 * second); the groups it would have named wake by the missing answer.
 * Version 1 (no epoch or sequence, every group named in every beat) is
 * not understood by this version, nor this by it: during a rolling
 * upgrade the leaders of the nodes that differ see no answers and go back
 * to Raft's heartbeats for the groups concerned.
 *
 * The receiving side always runs (a node answers beats whatever its own
 * --coalesce-heartbeats); the beating side only when coalescing is on.
 *
 * Context: loop thread only. */
#ifndef CAIRN_HBEAT_H
#define CAIRN_HBEAT_H

#include "cluster/nodewatch.h"
#include "cluster/partitions.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define HBEAT_VERSION 2
#define HBEAT_HEADER 24 /* at most HBEAT_ENTRY: hbeat_send_list puts it over a sent entry */
#define HBEAT_ENTRY 24
#define HBEAT_MAX_GROUPS 32768 /* per payload: 786 KiB, below NWATCH_FRAME_MAX */
#define HBEAT_ANSWER_PERIODS 3 /* a peer silent this many beat periods wakes its groups */
#define HBEAT_CHECK_MS 200     /* the silence check's period on a node that does not beat */
#define HBEAT_FULL_PERIODS 25  /* every this many beats, every coalesced group is named */
#define HBEAT_F_RESET 1u       /* answer flag: a beat was missed, name everything again */
/* Bytes already queued to a peer above which a beat or answer frame is
 * refused: they stand in for Raft's heartbeats and answers, which queue
 * behind Raft's data up to the mux's bound (RAFTMUX_SENDQ_MAX, 16 MiB), so
 * they do too; under NWATCH_SENDQ_MAX (1 MiB) a produce's data made every
 * beat unsendable and each such beat woke its groups and started a new
 * epoch (docs/performance.md, "Admission control"). */
#define HBEAT_SENDQ_MAX (17u << 20)

enum hbeat_type { HBEAT_BEAT = 1, HBEAT_ACK = 2, HBEAT_NACK = 3 };

/* A payload's header (above). */
struct hbeat_hdr {
  enum hbeat_type type;
  uint16_t flags;
  uint32_t n;
  uint64_t epoch, seq;
};

/* A list of entries being built, with room for the header in front. */
struct hbeat_list {
  uint8_t *buf;
  size_t n, cap; /* entries */
};

struct hbeat_peer {
  uint64_t id;
  uint64_t waiting_ms; /* first beat sent since its last answer (uv_now); 0: none */
  unsigned unanswered;   /* beats sent since its last answer */
  bool healthy;        /* this beat: connected and answering */
  uint64_t beat_ms;    /* when it last beat this node (uv_now); 0: not since its silence */
  unsigned quiet_checks; /* this node's silence checks since its last beat */
  struct hbeat_list out;
};

struct hbeat;
typedef void (*hbeat_close_cb)(struct hbeat *hb);

struct hbeat {
  uv_loop_t *loop;
  struct parts *ps;
  struct nodewatch *nw;
  uint64_t self_id;
  unsigned period_ms; /* 0: this node does not beat (it still answers) */
  unsigned check_ms;  /* the timer's period: period_ms, or HBEAT_CHECK_MS */
  bool open;
  uv_timer_t timer;
  struct hbeat_peer *peers;
  size_t npeers, cap;
  struct hbeat_list ack, nack; /* answers being built */
  hbeat_close_cb close_cb;
  uint64_t bad_log_ms; /* when a malformed payload was last logged */
  /* Counters (metrics). */
  uint64_t beats_sent;     /* frames of beats sent */
  uint64_t entries_sent;   /* (group, peer) pairs named in them */
  uint64_t beats_received; /* frames of beats received */
  uint64_t accepted;       /* groups this node accepted as a follower */
  uint64_t refused;        /* groups this node refused as a follower */
  uint64_t woken;          /* groups this node leads woken: refused, unanswered, unsendable */
  uint64_t silent_peers;   /* times a peer was found not answering */
  uint64_t silent_leaders; /* times a peer that beat this node stopped beating */
  uint64_t sleepers_woken; /* asleep followers woken for that */
  uint64_t bad;            /* malformed payloads */
  uint64_t periods;        /* beat periods so far */
  uint64_t scans;          /* beats that looked at every coalesced group */
  uint64_t gaps;           /* beats received after one was missed */
  uint64_t resets;         /* answers asking this node to name everything again */
  uint64_t unsent;         /* beat and answer frames the watch connection refused (full) */
};

/* hb's frame callback (nwatch_frame_cb, data = hb); hbeat_init installs
 * it, and a node that shares the watch connections with other frames
 * (metaheal.h) calls it for the payloads that are not its own. */
void hbeat_frame(struct nodewatch *nw, uint64_t sender_id, const uint8_t *payload, size_t len,
                 void *data);

/* Starts hb: answers beats from now on (nwatch_set_frame_cb), watches for
 * nodes that stop beating (every period_ms, or HBEAT_CHECK_MS) and, with
 * period_ms > 0, beats every period_ms for the coalesced groups of ps.
 * Ownership: borrows ps and nw, which must stay open until hbeat_close's
 * callback. Caller allocates hb. */
void hbeat_init(struct hbeat *hb, uv_loop_t *loop, struct parts *ps, struct nodewatch *nw,
                uint64_t self_id, unsigned period_ms);

/* Stops beating and answering, frees hb's memory, then cb (from the loop).
 * An hb never initialized (zeroed) calls cb at once. Callback: fires
 * exactly once. */
void hbeat_close(struct hbeat *hb, hbeat_close_cb cb);

/* The beat period for the given timings: half the idle heartbeat interval
 * (rgroup_pace_idle_ms), at least the heartbeat; 0 when leaders never
 * quiesce (then nothing coalesces). */
unsigned hbeat_period_ms(unsigned heartbeat_ms, unsigned idle_ms);

/* Encodes a payload header into buf (HBEAT_HEADER bytes). */
void hbeat_encode_header(uint8_t *buf, const struct hbeat_hdr *h);

/* Parses a payload: 0 with *h set (the entries follow the header), or
 * CAIRN_EUNSUPPORTED (version, type) / CAIRN_EBADLEN. */
__attribute__((warn_unused_result)) int hbeat_decode(const uint8_t *p, size_t len,
                                                     struct hbeat_hdr *h);

/* Entry i of a parsed payload p. */
void hbeat_entry(const uint8_t *p, uint32_t i, uint64_t *group_id, uint64_t *term, uint64_t *index);

/* Makes room for n entries (and the header) in l. Returns 0 or
 * CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int hbeat_list_reserve(struct hbeat_list *l, size_t n);

/* Appends an entry to l. Returns 0 or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int hbeat_list_add(struct hbeat_list *l, uint64_t group_id,
                                                       uint64_t term, uint64_t index);

#endif
