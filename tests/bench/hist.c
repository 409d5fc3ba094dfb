/* hist.c - the log-linear latency histogram of the benchmarks (hist.h). */
#include "hist.h"

#include <string.h>

void hist_init(struct hist *h)
{
  memset(h, 0, sizeof *h);
  h->min = UINT64_MAX;
}

unsigned hist_bucket_of(uint64_t v)
{
  if (v < HIST_SUB) {
    return (unsigned)v;
  }
  unsigned m = 63u - (unsigned)__builtin_clzll(v);
  unsigned s = m - HIST_SUB_BITS;
  return (s + 1) * HIST_SUB + (unsigned)((v >> s) - HIST_SUB);
}

uint64_t hist_bucket_low(unsigned b)
{
  if (b < HIST_SUB) {
    return b;
  }
  unsigned s = b / HIST_SUB - 1;
  uint64_t mant = (uint64_t)(b % HIST_SUB) + HIST_SUB;
  return mant << s;
}

uint64_t hist_bucket_high(unsigned b)
{
  if (b < HIST_SUB) {
    return b;
  }
  unsigned s = b / HIST_SUB - 1;
  uint64_t mant = (uint64_t)(b % HIST_SUB) + HIST_SUB;
  /* The last bucket's bound is 2^64 - 1: compute it without overflowing. */
  return (mant << s) + ((UINT64_C(1) << s) - 1);
}

void hist_record(struct hist *h, uint64_t v)
{
  h->buckets[hist_bucket_of(v)]++;
  h->count++;
  h->sum += (double)v;
  if (v < h->min) {
    h->min = v;
  }
  if (v > h->max) {
    h->max = v;
  }
}

void hist_merge(struct hist *dst, const struct hist *src)
{
  for (unsigned b = 0; b < HIST_BUCKETS; b++) {
    dst->buckets[b] += src->buckets[b];
  }
  dst->count += src->count;
  dst->sum += src->sum;
  if (src->min < dst->min) {
    dst->min = src->min;
  }
  if (src->max > dst->max) {
    dst->max = src->max;
  }
}

uint64_t hist_quantile(const struct hist *h, double q)
{
  if (h->count == 0) {
    return 0;
  }
  if (q >= 1.0) {
    return h->max;
  }
  if (q < 0) {
    q = 0;
  }
  /* The rank of the wanted value, 1-based: ceil(q * count), at least 1. */
  double r = q * (double)h->count;
  uint64_t rank = (uint64_t)r;
  if ((double)rank < r) {
    rank++;
  }
  if (rank == 0) {
    rank = 1;
  }
  uint64_t seen = 0;
  for (unsigned b = 0; b < HIST_BUCKETS; b++) {
    seen += h->buckets[b];
    if (seen >= rank) {
      uint64_t v = hist_bucket_high(b);
      if (v > h->max) {
        v = h->max;
      }
      if (v < h->min) {
        v = h->min;
      }
      return v;
    }
  }
  return h->max;
}

double hist_mean(const struct hist *h)
{
  return h->count == 0 ? 0 : h->sum / (double)h->count;
}
