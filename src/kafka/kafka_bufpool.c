/* kafka_bufpool.c - reused large answer buffers (see kafka_bufpool.h). */
#include "kafka/kafka_bufpool.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Each buffer carries its usable size in front of the bytes handed out. */
struct kafka_bufpool_hdr {
  alignas(max_align_t) size_t cap;
};

static pthread_mutex_t kafka_bufpool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct kafka_bufpool_hdr *kafka_bufpool_free_list[KAFKA_BUFPOOL_SLOTS];
static size_t kafka_bufpool_nfree;
static size_t kafka_bufpool_bytes;

/* Takes the smallest idle buffer of at least min bytes, or NULL. */
static struct kafka_bufpool_hdr *kafka_bufpool_take(size_t min)
{
  size_t best = SIZE_MAX;
  pthread_mutex_lock(&kafka_bufpool_mu);
  for (size_t i = 0; i < kafka_bufpool_nfree; i++) {
    size_t cap = kafka_bufpool_free_list[i]->cap;
    if (cap >= min && (best == SIZE_MAX || cap < kafka_bufpool_free_list[best]->cap)) {
      best = i;
    }
  }
  struct kafka_bufpool_hdr *h = NULL;
  if (best != SIZE_MAX) {
    h = kafka_bufpool_free_list[best];
    kafka_bufpool_free_list[best] = kafka_bufpool_free_list[--kafka_bufpool_nfree];
    kafka_bufpool_bytes -= h->cap;
  }
  pthread_mutex_unlock(&kafka_bufpool_mu);
  return h;
}

void *kafka_bufpool_get(size_t min, size_t *cap)
{
  struct kafka_bufpool_hdr *h = min >= KAFKA_BUFPOOL_MIN ? kafka_bufpool_take(min) : NULL;
  if (h == NULL) {
    /* Pooled sizes are rounded up to 1 MiB so that answers of nearby
     * sizes can share buffers. */
    size_t want = min;
    if (min >= KAFKA_BUFPOOL_MIN && min <= SIZE_MAX - (1u << 20)) {
      want = (min + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1);
    }
    if (want > SIZE_MAX - sizeof *h) {
      return NULL;
    }
    h = malloc(sizeof *h + want);
    if (h == NULL) {
      return NULL;
    }
    h->cap = want;
  }
  *cap = h->cap;
  return h + 1;
}

void kafka_bufpool_put(void *p)
{
  if (p == NULL) {
    return;
  }
  struct kafka_bufpool_hdr *h = (struct kafka_bufpool_hdr *)p - 1;
  if (h->cap >= KAFKA_BUFPOOL_MIN && h->cap <= KAFKA_BUFPOOL_IDLE_MAX) {
    pthread_mutex_lock(&kafka_bufpool_mu);
    bool kept = kafka_bufpool_nfree < KAFKA_BUFPOOL_SLOTS &&
                kafka_bufpool_bytes + h->cap <= KAFKA_BUFPOOL_IDLE_MAX;
    if (kept) {
      kafka_bufpool_free_list[kafka_bufpool_nfree++] = h;
      kafka_bufpool_bytes += h->cap;
    }
    pthread_mutex_unlock(&kafka_bufpool_mu);
    if (kept) {
      return;
    }
  }
  free(h);
}

void kafka_bufpool_drain(void)
{
  pthread_mutex_lock(&kafka_bufpool_mu);
  while (kafka_bufpool_nfree > 0) {
    free(kafka_bufpool_free_list[--kafka_bufpool_nfree]);
  }
  kafka_bufpool_bytes = 0;
  pthread_mutex_unlock(&kafka_bufpool_mu);
}

void kafka_bufpool_idle(size_t *count, size_t *bytes)
{
  pthread_mutex_lock(&kafka_bufpool_mu);
  *count = kafka_bufpool_nfree;
  *bytes = kafka_bufpool_bytes;
  pthread_mutex_unlock(&kafka_bufpool_mu);
}
