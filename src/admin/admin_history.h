/* admin_history.h - the node's recent traffic, kept for the status page:
 * produce and fetch bytes per second of the partitions this node leads,
 * node-wide and per topic, sampled every ADMIN_HISTORY_STEP_MS into a ring
 * of ADMIN_HISTORY_POINTS (one hour at 2 s, about 500 KB), so a page opened now shows
 * the last hour at once. Every node keeps its own; the page sums the
 * nodes' for cluster-wide figures (each partition has one leader).
 *
 * Memory is fixed when the ring is made: ADMIN_HISTORY_POINTS samples of
 * (ADMIN_HISTORY_TOPICS + 1) series of two rates. The first
 * ADMIN_HISTORY_TOPICS topics seen with traffic get a series of their own;
 * later ones are summed into the "(other topics)" series, and a topic's
 * series is freed for another once the ring holds no traffic of it.
 *
 * A rate is the difference of the metrics counters (metrics.h) between two
 * samples; a counter that fell (the partition's leadership moved away and
 * its counters were forgotten) counts as 0 for that step.
 *
 * Context: loop thread only. */
#ifndef CAIRN_ADMIN_HISTORY_H
#define CAIRN_ADMIN_HISTORY_H

#include "admin/admin_json.h"

#include <stdint.h>

#define ADMIN_HISTORY_STEP_MS 2000u
#define ADMIN_HISTORY_POINTS 1800u /* one hour */
#define ADMIN_HISTORY_TOPICS 32u
#define ADMIN_HISTORY_NAME_MAX 249u

struct node;

struct admin_history_topic {
  char name[ADMIN_HISTORY_NAME_MAX + 1]; /* "" unused */
  uint64_t produced, fetched;            /* counters at the last sample */
  uint64_t seen;                         /* the last sample number with traffic */
};

/* One sample: bytes per second over the step before it, per series
 * (0: the node, 1..ADMIN_HISTORY_TOPICS: the topics, the last: others). */
struct admin_history_point {
  int64_t wall_ms;
  uint32_t produce[ADMIN_HISTORY_TOPICS + 2];
  uint32_t fetch[ADMIN_HISTORY_TOPICS + 2];
};

struct admin_history {
  struct admin_history_point *ring; /* owned, ADMIN_HISTORY_POINTS */
  unsigned len, next;
  uint64_t samples; /* taken so far */
  uint64_t last_ms; /* loop time of the last sample */
  struct admin_history_topic topics[ADMIN_HISTORY_TOPICS];
  uint64_t other_produced, other_fetched;
};

/* Allocates the ring. Caller allocates h. Returns 0 or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int admin_history_init(struct admin_history *h);

/* Frees what h owns. */
void admin_history_close(struct admin_history *h);

/* Takes one sample of n's counters (the admin port's timer). The first
 * call only records the counters. */
void admin_history_sample(struct admin_history *h, struct node *n);

/* {"node_id", "step_ms", "t": [wall ms...], "produce": [B/s...], "fetch":
 * [...], "topics": [{"topic", "produce": [...], "fetch": [...]}]}, oldest
 * first; "(other topics)" is listed as a topic when it had traffic. */
void admin_history_write(const struct admin_history *h, struct node *n, struct admin_json *w);

#endif
