/* hist.h - a log-linear histogram of non-negative 64-bit values (latencies
 * in nanoseconds) for the benchmarks: exact below HIST_SUB, then HIST_SUB
 * buckets per power of two, so a reported quantile is within 1/HIST_SUB
 * (1.6 %) of the true value, in a fixed 30 KiB with no allocation.
 *
 * Bucket layout: a value v < HIST_SUB has bucket v. Otherwise let m be the
 * index of v's highest set bit and s = m - HIST_SUB_BITS; v's bucket is
 * (s + 1) * HIST_SUB + ((v >> s) - HIST_SUB), covering
 * [(v >> s) << s, (((v >> s) + 1) << s) - 1].
 *
 * Context: a histogram belongs to one thread; merge after joining. */
#ifndef CAIRN_BENCH_HIST_H
#define CAIRN_BENCH_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 6
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_BUCKETS ((64 - HIST_SUB_BITS + 1) * HIST_SUB)

struct hist {
  uint64_t count;
  uint64_t min; /* UINT64_MAX while empty */
  uint64_t max;
  double sum;   /* for the mean */
  uint64_t buckets[HIST_BUCKETS];
};

/* Empties h. Ownership: caller allocates. */
void hist_init(struct hist *h);

/* Counts one value. */
void hist_record(struct hist *h, uint64_t v);

/* Adds every value of src to dst. */
void hist_merge(struct hist *dst, const struct hist *src);

/* The value at quantile q (0 <= q <= 1): the upper bound of the bucket
 * holding the ceil(q * count)-th smallest value, clamped to [min, max];
 * q = 1 gives max exactly. 0 when h is empty. */
uint64_t hist_quantile(const struct hist *h, double q);

/* The mean, 0 when empty. */
double hist_mean(const struct hist *h);

/* The bucket of v and a bucket's lowest and highest values (exposed for
 * the unit test). */
unsigned hist_bucket_of(uint64_t v);
uint64_t hist_bucket_low(unsigned b);
uint64_t hist_bucket_high(unsigned b);

#endif
