/* catchup.h - a replica whose Raft snapshot descriptor is ahead of its log
 * fetches the missing batches from a peer replica (fetch_proto.h) and
 * appends them with their original Raft indexes, so its log ends up
 * byte-identical to the peer's. Meanwhile entries Raft applies after the
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

enum catchup_state { CATCHUP_OFF, CATCHUP_DIALING, CATCHUP_FETCHING, CATCHUP_BACKOFF, CATCHUP_CLOSED };

struct catchup;
struct catchup_pending;

/* Applies one deferred Raft entry (owned by the callee only for the call). */
typedef int (*catchup_apply_fn)(void *data, const uint8_t *entry, size_t len, uint64_t index);
typedef void (*catchup_close_cb)(struct catchup *cu);

struct catchup_peer {
  uint64_t id;
  char *address;
};

struct catchup {
  uv_loop_t *loop;
  struct transport *tr;
  struct store *store; /* borrowed */
  uint64_t group_id;
  uint64_t self_id;
  char *self_address;
  struct catchup_peer *peers; /* the other replicas */
  unsigned npeers;
  unsigned next_peer;
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
  catchup_apply_fn apply;
  void *apply_data;
  bool failed; /* pending entries overflowed: the replica must be rebuilt */
  int handles; /* open handles to wait for at close */
  catchup_close_cb close_cb;
  uint64_t fetched_bytes;
  void *data; /* for the owner */
};

/* Initializes cu (caller allocates) for a group. peers are the other
 * replicas (copied). Returns 0 or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int catchup_init(struct catchup *cu, uv_loop_t *loop,
                                                     struct transport *tr, struct store *store,
                                                     uint64_t group_id, uint64_t self_id,
                                                     const char *self_address,
                                                     const struct catchup_peer *peers,
                                                     unsigned npeers, catchup_apply_fn apply,
                                                     void *apply_data);

/* Starts (or retargets) catching up to target_next / target_index. */
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
