/* metrics.h - the node's own counters: requests by api and error code,
 * log-linear latency histograms, bytes in and out, and per-partition
 * traffic and replica-lag samples. Everything else the admin port reports
 * is read from existing state when scraped (metrics_text.c).
 *
 * Cost on the request path: a few additions and one array index per
 * answered request, one binary search per produced or fetched partition;
 * no locks, because every update and every read happens on the loop
 * thread.
 *
 * Histogram layout (struct metrics_hist): values are unsigned integers
 * (microseconds for latencies). An observation v is filed by w = v - 1
 * (0 for v = 0), so that every bucket is closed at its top, as Prometheus'
 * `le` is:
 *   w < METRICS_HIST_SUB          bucket w (exact)
 *   2^g <= w < 2^(g+1), g >= 2    METRICS_HIST_SUB linear sub-buckets of
 *                                 width 2^(g-2): bucket
 *                                 SUB + (g-2)*SUB + ((w >> (g-2)) & 3)
 *   w >= 2^(METRICS_HIST_MAX_LOG2+1)   the last bucket
 * Bucket i holds the values v with metrics_hist_lower(i) < v <=
 * metrics_hist_upper(i) (bucket 0 also holds 0). The relative width of a bucket is at most 1/4, and
 * the count of values <= B is exact for every B that is a bucket's upper
 * bound (every power of two among them).
 *
 * Replica lag (struct metrics_part): a partition leader samples (time, Raft
 * index, next offset) of its log when it starts leading and, at most every
 * METRICS_LAG_SAMPLE_MS, when it applies entries (metrics_node_applied; a
 * sample not yet due is taken by the admin port's periodic sample, which
 * touches no other replica: an idle group costs nothing); a follower
 * whose match index is m lags by the offsets appended since the newest
 * sample at or below m, and by the time since the leader first held an
 * entry above m. The offsets are within one sample period of the truth,
 * the time within two (a sample not yet due waits for the next periodic
 * one); both are capped at the ring's span (at least METRICS_LAG_SAMPLES *
 * METRICS_LAG_SAMPLE_MS).
 *
 * Context: loop thread only; no I/O, no globals. */
#ifndef CAIRN_METRICS_H
#define CAIRN_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define METRICS_HIST_SUB 4
#define METRICS_HIST_MAX_LOG2 40
#define METRICS_HIST_BUCKETS (METRICS_HIST_SUB + (METRICS_HIST_MAX_LOG2 - 1) * METRICS_HIST_SUB)
#define METRICS_API_SLOTS 64  /* wire api numbers 0..63 (groups 30..39, security 50..56) */
#define METRICS_CODE_SLOTS 80 /* wire error codes 0..78; larger ones share the last */
/* The Kafka port's requests (metrics_kafka_request): api keys 0..62, the
 * rest share the last slot; slot 0 of the codes counts requests closed
 * without an answer, slot c + 2 Kafka error code c (-1 .. 126), larger
 * codes share the last. */
#define METRICS_KAFKA_API_SLOTS 64
#define METRICS_KAFKA_CODE_SLOTS 129
#define METRICS_LAG_SAMPLES 64
#define METRICS_LAG_FIRST 4 /* a ring's first size */
#define METRICS_LAG_SAMPLE_MS 250
#define METRICS_TERM_SAMPLES 16  /* lag samples per walk over every group's term (4 s) */
#define METRICS_MAX_PARTS 200000 /* the cluster's own partition limit */

struct metrics_hist {
  uint64_t buckets[METRICS_HIST_BUCKETS];
  uint64_t count;
  uint64_t sum;
};

enum metrics_latency { METRICS_LAT_PRODUCE, METRICS_LAT_FETCH, METRICS_LAT_COUNT };

struct metrics_lag_sample {
  uint64_t ms;         /* loop time of the sample */
  uint64_t index;      /* the leader's last applied Raft index then */
  int64_t next_offset; /* its log's next offset then */
};

/* One hosted partition's counters, by Raft group id. */
struct metrics_part {
  uint64_t group_id;
  uint64_t produced_bytes; /* batch bytes acknowledged to producers */
  uint64_t produced_batches;
  uint64_t fetched_bytes; /* record bytes sent to consumers */
  uint64_t fetches;       /* partition reads answered */
  uint64_t last_term;     /* the Raft term seen at the last sample */
  bool term_seen;
  /* owned: ring_cap samples, allocated at the first one (only leaders
   * sample) and doubled as it fills, up to METRICS_LAG_SAMPLES: a quiet
   * partition's few samples do not cost a full ring (1.5 KiB) */
  struct metrics_lag_sample *ring;
  unsigned ring_cap;
  unsigned ring_len;  /* samples held */
  unsigned ring_next; /* where the next one goes */
  bool applied;       /* listed in metrics.applied: a lag sample is due later */
};

struct metrics {
  uint64_t requests[METRICS_API_SLOTS][METRICS_CODE_SLOTS];
  struct metrics_hist latency[METRICS_LAT_COUNT];
  uint64_t kafka_requests[METRICS_KAFKA_API_SLOTS][METRICS_KAFKA_CODE_SLOTS];
  struct metrics_hist kafka_latency[METRICS_LAT_COUNT]; /* Produce, Fetch */
  uint64_t bytes_in;          /* request frame bytes */
  uint64_t bytes_out;         /* answer bytes queued for sending */
  uint64_t slow_requests;     /* answered later than the slow-request threshold */
  uint64_t elections;         /* Raft term changes seen in hosted groups */
  struct metrics_part *parts; /* owned, ascending group id */
  size_t nparts, cap;
  uint64_t pruned_gen; /* the hosted set's generation at the last prune
                          (metrics_node_sample; parts.gen) */
  uint64_t *applied;   /* owned: group ids marked by metrics_part_mark */
  size_t napplied, applied_cap;
  bool applied_lost;       /* a mark found no room: sample every leader once */
  unsigned term_countdown; /* samples until the next walk over every group's term */
};

/* ---- histograms ---- */

/* The bucket that holds v. */
unsigned metrics_hist_index(uint64_t v);

/* Bucket i holds lower < v <= upper. metrics_hist_upper of the last bucket
 * is UINT64_MAX. */
uint64_t metrics_hist_lower(unsigned i);
uint64_t metrics_hist_upper(unsigned i);

void metrics_hist_observe(struct metrics_hist *h, uint64_t v);

/* Observations <= bound, counting whole buckets only: exact when bound is
 * a bucket's upper bound (any power of two is), otherwise the count up to
 * the last bucket upper bound below it. */
uint64_t metrics_hist_count_le(const struct metrics_hist *h, uint64_t bound);

/* ---- the node's counters ---- */

/* Caller allocates m; init zeroes it, close frees what it owns. */
void metrics_init(struct metrics *m);
void metrics_close(struct metrics *m);

/* One answered request: api and code are wire numbers (out of range codes
 * share the last slot, out of range apis are not counted by api).
 * latency_us is observed in the matching histogram (produce, fetch). */
void metrics_request(struct metrics *m, unsigned api, unsigned code, uint64_t bytes_in,
                     uint64_t bytes_out, uint64_t latency_us);

/* One request of the Kafka port finished: api_key as the client sent it,
 * answered false when the connection was closed instead of an answer
 * (code is then ignored), else code the first non-zero Kafka error code
 * the answer carries (0 when none; a Produce with acks 0 that succeeded
 * counts as answered with 0, a failed one as closed). latency_us is observed for Produce and Fetch. */
void metrics_kafka_request(struct metrics *m, int api_key, bool answered, int code,
                           uint64_t latency_us);

/* The slot of metrics.kafka_requests' second index for (answered, code),
 * and back: *answered false for slot 0, else *code (the last slot names
 * its smallest code). */
unsigned metrics_kafka_code_slot(bool answered, int code);
void metrics_kafka_slot_code(unsigned slot, bool *answered, int *code);

/* The counters of group_id, created at zero on first use. Returns
 * borrowed, valid until the next metrics_part or metrics_prune call; NULL
 * when out of memory or at METRICS_MAX_PARTS (the caller skips counting). */
struct metrics_part *metrics_part(struct metrics *m, uint64_t group_id);

/* Counts one batch of bytes acknowledged to a producer, or one partition
 * read of bytes answered to a consumer, on group_id. */
void metrics_part_produced(struct metrics *m, uint64_t group_id, uint64_t bytes);
void metrics_part_fetched(struct metrics *m, uint64_t group_id, uint64_t bytes);

/* Forgets every partition for which keep(group_id, data) is false. */
void metrics_prune(struct metrics *m, bool (*keep)(uint64_t group_id, void *data), void *data);

/* The counters of group_id if it has any, else NULL. Borrowed as for
 * metrics_part. */
struct metrics_part *metrics_part_find(struct metrics *m, uint64_t group_id);

/* Lists mp's group (once) in m->applied, for a lag sample that is due
 * later (metrics_node_applied). When the list cannot grow, sets
 * m->applied_lost instead. */
void metrics_part_mark(struct metrics *m, struct metrics_part *mp);

/* Leader side of the lag estimate: records (now_ms, index, next_offset)
 * unless the newest sample has the same index or is younger than
 * METRICS_LAG_SAMPLE_MS. Returns false only in the second case (the sample
 * is due later), true when recorded or nothing new, or when the ring could
 * not be allocated (nothing recorded: the estimate knows less). */
bool metrics_lag_sample(struct metrics_part *mp, uint64_t now_ms, uint64_t index,
                        int64_t next_offset);

/* A follower at match index `match` while the leader is at (index,
 * next_offset): its lag in offsets and in milliseconds, from the samples
 * (see the top of this file). 0 and 0 when match >= index. */
void metrics_lag_estimate(const struct metrics_part *mp, uint64_t now_ms, uint64_t index,
                          int64_t next_offset, uint64_t match, int64_t *lag_offsets,
                          uint64_t *lag_ms);

/* Notes the Raft term of a hosted group; a rise since the last call adds
 * to m->elections (the first call only records it). */
void metrics_note_term(struct metrics *m, struct metrics_part *mp, uint64_t term);

#endif
