/* catchup.h - a replica whose Raft snapshot descriptor is ahead of its log
 * fetches the missing batches from a peer replica (fetch_proto.h) and
 * appends them with their original Raft indexes, so its log ends up
 * byte-identical to the peer's. When the owner's producer table would not
 * cover the log's start (the log restarted at the peer's start: retention
 * or a LOG_START deleted below it), it first asks the peer for its table
 * (catchup_owner.table) and catches up at least to the point that table
 * covers. Meanwhile entries Raft applies after the
 * snapshot are held in memory (at most CATCHUP_MAX_PENDING_BYTES) and applied
 * in order once the log has caught up; the replica serves nothing of the
 * missing range because its store does not have it, and refuses produce.
 *
 * States (catchup_set_state logs every transition):
 *
 *   OFF --catchup_start--> DIALING --connected--> FETCHING --target reached--> OFF
 *                             ^  |                    |
 *                             |  +--failed---+        +--error/peer gone--+
 *                             |              v                            v
 *                             +----------- BACKOFF <----------------------+
 *   any --catchup_close--> CLOSED (callback once every handle is closed)
 *
 * Context: loop thread. */
#ifndef CAIRN_CATCHUP_H
#define CAIRN_CATCHUP_H

#include "cluster/fetch_proto.h"
#include "cluster/transport.h"
#include "storage/store.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define CATCHUP_MAX_PENDING_BYTES (256u << 20)
#define CATCHUP_BACKOFF_MS 200
/* Table requests that may fail (a peer catching up itself, or of a
 * version without them, which closes the connection) before the catch-up
 * goes on without one, as it did before tables were served. */
#define CATCHUP_TABLE_TRIES 6

enum catchup_state { CATCHUP_OFF, CATCHUP_DIALING, CATCHUP_FETCHING, CATCHUP_BACKOFF, CATCHUP_CLOSED };

struct catchup;
struct catchup_pending;

/* Applies one deferred Raft entry (owned by the callee only for the call). */
typedef int (*catchup_apply_fn)(void *data, const uint8_t *entry, size_t len, uint64_t index);
/* The address of the n-th peer to try (n counts up from 0 over the
 * catch-up's life; the callee wraps it around its replicas other than
 * this one), or NULL if none is known now (retried after a pause). The
 * string need only live until the call returns. */
typedef const char *(*catchup_pick_fn)(void *data, unsigned n);
/* The log reached the target and the held entries were applied: cu is
 * OFF, and the owner may close it from within this call. */
typedef void (*catchup_done_fn)(void *data, struct catchup *cu);
/* Would the owner's producer table, once caught up, cover less than its
 * log, which starts at log_start? */
typedef bool (*catchup_table_wanted_fn)(void *data, int64_t log_start);
/* Takes a peer's encoded producer table (borrowed for the call; untrusted)
 * and sets the log offset and Raft index it covers. Returns 0, or a
 * negative code (the table is refused: another peer is asked). */
typedef int (*catchup_table_fn)(void *data, const uint8_t *buf, size_t len, int64_t *offset,
                                uint64_t *index);
typedef void (*catchup_close_cb)(struct catchup *cu);

struct catchup {
  uv_loop_t *loop;
  struct transport *tr;
  struct store *store; /* borrowed */
  uint64_t group_id;
  uint64_t self_id;
  const char *self_address; /* borrowed: outlives cu */
  unsigned next_peer;       /* what the next dial passes to pick */
  enum catchup_state state;
  int64_t target_next;
  uint64_t target_index;
  struct transport_dial dial;
  uv_tcp_t *tcp;
  uv_timer_t timer;
  uint8_t header[64];
  struct fetch_response response;
  size_t header_got;
  uint8_t *payload;
  size_t payload_len;
  size_t payload_got;
  uint32_t max_bytes;
  struct catchup_pending *pending_head, *pending_tail;
  size_t pending_bytes;
  catchup_pick_fn pick;
  catchup_apply_fn apply;
  catchup_done_fn done;
  void *apply_data; /* the owner's, for pick, apply and done */
  catchup_table_wanted_fn table_wanted;
  catchup_table_fn table;
  bool asking_table;       /* the request in flight asks for the peer's table */
  bool restart_pending;    /* our log restarts at the peer's start once its table is in */
  unsigned table_failures; /* table requests refused or failed (CATCHUP_TABLE_TRIES) */
  bool failed; /* pending entries overflowed: the replica must be rebuilt */
  int handles; /* open handles to wait for at close */
  catchup_close_cb close_cb;
  uint64_t fetched_bytes;
  void *data; /* for the owner */
};

/* What catchup_init needs besides the group. */
struct catchup_owner {
  catchup_pick_fn pick;   /* the peers, asked at each dial */
  catchup_apply_fn apply; /* held entries, once caught up */
  catchup_done_fn done;   /* may be NULL */
  catchup_table_wanted_fn table_wanted; /* may be NULL (with table): never asked */
  catchup_table_fn table;
  void *data;
};

/* Initializes cu (caller allocates) for a group; self_address is
 * borrowed and must outlive cu. Cannot fail (no system call); cu holds a
 * timer from here until catchup_close. */
void catchup_init(struct catchup *cu, uv_loop_t *loop, struct transport *tr, struct store *store,
                  uint64_t group_id, uint64_t self_id, const char *self_address,
                  const struct catchup_owner *owner);

/* Starts (or retargets) catching up to target_next / target_index. The
 * first dial happens from the loop, not within this call (a snapshot
 * restored inside raft_start has no configuration to pick peers from
 * until raft_start returns). */
void catchup_start(struct catchup *cu, int64_t target_next, uint64_t target_index);

/* Is the replica behind its snapshot? */
static inline bool catchup_active(const struct catchup *cu)
{
  return cu->state != CATCHUP_OFF && cu->state != CATCHUP_CLOSED;
}

/* Holds one entry Raft applied while catching up (copied). Returns 0, or
 * CAIRN_ENOMEM / CAIRN_ETOOLARGE (then cu->failed is set). */
__attribute__((warn_unused_result)) int catchup_defer(struct catchup *cu, const uint8_t *entry,
                                                      size_t len, uint64_t index);

/* Stops everything and frees what cu holds; cb fires exactly once. */
void catchup_close(struct catchup *cu, catchup_close_cb cb);

#endif
