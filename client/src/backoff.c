/* backoff.c - exponential retry delays with +-20% jitter, so clients that
 * failed together do not retry together. Pure: no loop, no clock. */
#include "internal.h"

static uint64_t lc_backoff_rand(struct lc_backoff *b)
{
  /* xorshift64*: cheap, good enough for jitter. */
  uint64_t x = b->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  b->rng = x;
  return x * 0x2545F4914F6CDD1Dull;
}

void lc_backoff_init(struct lc_backoff *b, uint32_t base_ms, uint32_t max_ms, uint64_t seed)
{
  b->base_ms = base_ms;
  b->max_ms = max_ms < base_ms ? base_ms : max_ms;
  b->attempt = 0;
  b->rng = seed != 0 ? seed : 0x9E3779B97F4A7C15ull;
}

uint32_t lc_backoff_next(struct lc_backoff *b)
{
  uint64_t d = b->base_ms;
  for (uint32_t i = 0; i < b->attempt && d < b->max_ms; i++) {
    d *= 2;
  }
  if (d > b->max_ms) {
    d = b->max_ms;
  }
  if (b->attempt < 64) {
    b->attempt++;
  }
  /* Uniform in [0.8 d, 1.2 d]: d * (800 + r % 401) / 1000. */
  uint64_t j = d * (800 + lc_backoff_rand(b) % 401) / 1000;
  if (j > b->max_ms) {
    j = b->max_ms;
  }
  if (j == 0 && b->base_ms > 0) {
    j = 1;
  }
  return (uint32_t)j;
}

void lc_backoff_reset(struct lc_backoff *b) { b->attempt = 0; }
