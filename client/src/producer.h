/* producer.h - the producer's private state, shared by producer.c (API,
 * partitioning, the round), produce_send.c (ProduceRequests and their
 * answers) and producer_id.c (InitProducerId, epochs). Never installed. */
#ifndef CAIRN_LC_PRODUCER_H
#define CAIRN_LC_PRODUCER_H

#include "internal.h"

#include "accumulator.h"

/* An idempotent producer whose request has had no answer this long asks
 * for metadata; when it names another leader for the request's
 * partitions (the old one is paused, cut off or dead), the batches are
 * sent there at once instead of waiting for the request timeout. Half a
 * second: with the nodes' default election timeout (1 s, randomized up to
 * 1.5 s) a new leader is found within one probe of its election, and writes
 * resume within 2 s of the fault (docs/fault-tolerance.md). */
#define LC_PROD_PROBE_MS 500

/* Once a probe found the same leader named, the next one comes this soon:
 * the followers name the new leader as soon as it is elected, and a
 * Metadata answer is cheap. */
#define LC_PROD_REPROBE_MS 100

/* Batches in flight per partition for an idempotent producer at most (the
 * partition's duplicate window, docs/protocol.md). */
#define LC_PROD_MAX_IDEMPOTENT_IN_FLIGHT 5

/* A ProduceRequest's payload stays below this (frames allow 16 MiB). */
#define LC_PROD_MAX_REQUEST_BYTES (8u * 1024 * 1024)

/* One partition's producer state. */
struct lc_ppart {
  struct lc_acc acc;
  uint64_t wake_ms; /* not before: backoff after a failure */
  bool retrying;    /* a batch came back: resend from the head once idle */
  uint64_t failed_leader; /* the leader a batch last failed at (0: none): once the
                             cache names another, the backoff ends early */
  struct lc_backoff bk;
  bool unknown;         /* a node answered UNKNOWN_TOPIC/PARTITION ... */
  uint64_t unknown_gen; /* ... at this metadata generation: a later refresh decides */
  char last_addr[LC_ADDR_MAX]; /* where its batches last went, "" never: named by a
                                  delivery timeout's error (lc_prod_complete) */
};

struct lc_ptopic {
  char *name;
  int32_t count;
  struct lc_ppart *parts;
  int32_t sticky; /* keyless messages go here; -1: pick one */
  bool sticky_used;
};

/* A message waiting for its topic's metadata (copied, owned). */
struct lc_held {
  struct lc_held *next;
  char *topic;
  struct cairn_message m; /* pointers into buf */
  struct cairn_header *headers;
  uint8_t *buf;
  struct lc_msg msg;
  uint64_t deadline_ms;
  uint64_t meta_gen; /* metadata generation when it was held */
};

struct lc_flush {
  struct lc_flush *next;
  uint64_t upto; /* messages with id < upto count */
  size_t remaining;
  cairn_producer_cb cb;
  void *data;
};

enum lc_pid_state { LC_PID_UNKNOWN, LC_PID_ASKING, LC_PID_READY };

struct cairn_producer {
  struct cairn_producer *next; /* in c->producers */
  struct cairn_client *c;
  struct cairn_producer_options o;
  struct lc_ptopic **topics;
  size_t ntopics;
  struct lc_held *held, *held_tail;
  bool held_refreshing;
  uint64_t held_wake_ms; /* no refresh for held messages before this */
  struct lc_backoff held_bk;
  uint64_t mem;
  size_t pending;
  uint64_t next_id;
  struct lc_flush *flushes;
  bool force_seal;
  enum lc_pid_state pid_state;
  bool bump_needed; /* an idempotent batch failed for good: new epoch first */
  bool resolving;   /* bump_needed and batches maybe written: those are resent
                     * under the old epoch until the partition says whether
                     * it holds them (producer.c, "Epoch bumps") */
  int64_t pid;
  int16_t epoch;
  uint64_t pid_wake_ms;
  int reqs_in_flight;
  struct lc_preq *preqs; /* requests in flight (not abandoned) */
  uint64_t silent_node;  /* a node that left a request unanswered past LC_PROD_PROBE_MS and
                            has not answered since (0: none): a request sent to it is
                            probed after LC_PROD_REPROBE_MS, so a batch of another
                            partition it led does not wait out a whole probe there */
  uv_timer_t kick;
  bool kick_armed;
  uint64_t kick_due_ms; /* when the armed kick fires (loop time) */
  bool closing;
  bool closed; /* kick handle closing */
  cairn_producer_cb close_cb;
  void *close_data;
};

/* One batch of a ProduceRequest in flight. */
struct lc_preq_item {
  struct lc_ptopic *t;
  int32_t partition;
  struct lc_batch *b;
};

struct lc_preq {
  struct cairn_producer *p;
  struct lc_preq_item *items;
  size_t n;
  struct lc_preq *prev, *next; /* in p->preqs while in flight and not abandoned */
  uint64_t node;               /* the leader it went to (its items' leader then) */
  uint64_t since_ms;            /* sent, or last probed and found at the same leader */
  unsigned probe_wait_ms;       /* from since_ms to the next probe: LC_PROD_PROBE_MS,
                                   then LC_PROD_REPROBE_MS (0: LC_PROD_PROBE_MS) */
  uint64_t probe_gen;          /* metadata generation when the probe began, 0: none */
  bool abandoned;              /* its batches went to a new leader; the answer is dropped */
};


/* Runs a round on the next loop iteration (never inside the caller). */
void lc_prod_kick(struct cairn_producer *p);

/* Runs a round at due_ms (loop time) or earlier. */
void lc_prod_kick_at(struct cairn_producer *p, uint64_t due_ms);

/* Pops and reports the done batches at the head of a partition's queue. */
void lc_prod_complete(struct cairn_producer *p, struct lc_ptopic *t, int32_t partition);

/* Marks b answered for good (status, and base_offset when delivered). */
void lc_prod_batch_done(struct lc_batch *b, int status, int64_t base_offset);

/* b failed for good; a sequenced batch makes the producer bump its epoch. */
void lc_prod_batch_failed_for_good(struct cairn_producer *p, struct lc_batch *b, int status);

/* Sends every sendable batch, one ProduceRequest per leader address;
 * while p->resolving only the batches maybe written (a prefix of each
 * partition's unanswered batches). */
void lc_prod_send_all(struct cairn_producer *p);

/* Idempotent producers: requests without an answer for LC_PROD_PROBE_MS
 * start a metadata refresh; once one names another leader for their
 * partitions they are abandoned (their batches retried there at once, as
 * after a timeout: the partition drops what it already holds). Such a
 * request's node is p->silent_node until it answers anything: requests
 * sent to it meanwhile are probed after LC_PROD_REPROBE_MS. */
void lc_prod_probe_leaders(struct cairn_producer *p);

/* Asks for a producer id, or a new epoch of the one in use. */
void lc_prod_ask_pid(struct cairn_producer *p);

#endif
