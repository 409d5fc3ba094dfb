/* acked.h - the acknowledged batches of a test's topic, per partition, and
 * the two checks every data-loss test makes over them: each acknowledged
 * batch is served at its offset by the partition's leader, and the
 * replicas of stopped nodes hold the same batches, every acknowledged one
 * exactly once, at its offset, in acknowledgment order (read straight
 * from their partition logs). Batches are tu_make_batch's, told apart by
 * a tag carried in their first timestamp (1000 + tag).
 *
 * Context: a cmocka test's thread. Every function fails the running test
 * (fail_msg, assert_*) instead of returning an error. */
#ifndef CAIRN_TEST_ACKED_H
#define CAIRN_TEST_ACKED_H

#include "cairnd.h"

#include <stdint.h>

#define AK_MAX_PARTS 64
#define AK_MAX_ACKED 256

struct ak_batch {
  int64_t offset;
  uint64_t tag;
};

/* One batch as a replica's partition log holds it. */
struct ak_held {
  int64_t offset;
  uint64_t tag; /* from its first timestamp (1000 + tag) */
  uint32_t crc;
};

struct ak_log {
  const char *topic; /* borrowed */
  uint32_t nparts;
  int records;   /* per batch */
  int value_len; /* per record */
  struct ak_batch acked[AK_MAX_PARTS][AK_MAX_ACKED];
  int nacked[AK_MAX_PARTS];
  uint64_t next_tag;
};

/* Forgets every acknowledged batch; topic is borrowed for l's lifetime. */
void ak_init(struct ak_log *l, const char *topic, uint32_t nparts, int records, int value_len);

/* Produces one batch to partition p through any running node; it must be
 * acknowledged, at an offset after the ones before it. */
void ak_produce(struct ak_log *l, struct cd_cluster *c, uint32_t p, int timeout_ms);

/* Every acknowledged batch is served at its offset (the leaders'). */
void ak_check_served(const struct ak_log *l, struct cd_cluster *c, int timeout_ms);

/* Reads every batch of the partition log in log_dir (its node stopped)
 * into out, at most cap; returns how many. */
int ak_read_log(const char *log_dir, struct ak_held *out, int cap);

/* The partition logs in dirs[0..n) (replicas of partition p, their nodes
 * stopped) hold the same batches, and every acknowledged batch of p once,
 * at its offset, in acknowledgment order. */
void ak_check_replicas(const struct ak_log *l, uint32_t p, const char *const *dirs, int n);

/* A waitpid status as an exit code; -1 when the process did not exit. */
int ak_exit_code(int status);

#endif
