/* metrics.c - the node's counters and log-linear histograms. See metrics.h. */
#include "admin/metrics.h"

#include <stdlib.h>
#include <string.h>

/* ---- histograms ---- */

unsigned metrics_hist_index(uint64_t v)
{
  uint64_t w = v > 0 ? v - 1 : 0;
  if (w < METRICS_HIST_SUB) {
    return (unsigned)w;
  }
  unsigned g = 63u - (unsigned)__builtin_clzll(w);
  if (g > METRICS_HIST_MAX_LOG2) {
    return METRICS_HIST_BUCKETS - 1;
  }
  unsigned sub = (unsigned)((w >> (g - 2)) & (METRICS_HIST_SUB - 1));
  return METRICS_HIST_SUB + (g - 2) * METRICS_HIST_SUB + sub;
}

uint64_t metrics_hist_lower(unsigned i)
{
  if (i < METRICS_HIST_SUB) {
    return i;
  }
  unsigned k = i - METRICS_HIST_SUB;
  unsigned g = 2 + k / METRICS_HIST_SUB;
  uint64_t sub = k % METRICS_HIST_SUB;
  return (METRICS_HIST_SUB + sub) << (g - 2);
}

uint64_t metrics_hist_upper(unsigned i)
{
  if (i >= METRICS_HIST_BUCKETS - 1) {
    return UINT64_MAX;
  }
  return metrics_hist_lower(i + 1);
}

void metrics_hist_observe(struct metrics_hist *h, uint64_t v)
{
  h->buckets[metrics_hist_index(v)]++;
  h->count++;
  h->sum += v;
}

uint64_t metrics_hist_count_le(const struct metrics_hist *h, uint64_t bound)
{
  uint64_t n = 0;
  for (unsigned i = 0; i < METRICS_HIST_BUCKETS && metrics_hist_upper(i) <= bound; i++) {
    n += h->buckets[i];
  }
  return n;
}

/* ---- the node's counters ---- */

void metrics_init(struct metrics *m)
{
  memset(m, 0, sizeof *m);
}

void metrics_close(struct metrics *m)
{
  for (size_t i = 0; i < m->nparts; i++) {
    free(m->parts[i].ring);
  }
  free(m->parts);
  free(m->applied);
  memset(m, 0, sizeof *m);
}

void metrics_request(struct metrics *m, unsigned api, unsigned code, uint64_t bytes_in,
                     uint64_t bytes_out, uint64_t latency_us)
{
  if (api < METRICS_API_SLOTS) {
    m->requests[api][code < METRICS_CODE_SLOTS ? code : METRICS_CODE_SLOTS - 1]++;
  }
  m->bytes_in += bytes_in;
  m->bytes_out += bytes_out;
  /* Wire numbers of API_PRODUCE and API_FETCH (proto/client.proto). */
  if (api == 7) {
    metrics_hist_observe(&m->latency[METRICS_LAT_PRODUCE], latency_us);
  } else if (api == 8) {
    metrics_hist_observe(&m->latency[METRICS_LAT_FETCH], latency_us);
  }
}

unsigned metrics_kafka_code_slot(bool answered, int code)
{
  if (!answered) {
    return 0;
  }
  if (code < -1) {
    code = -1;
  }
  return code + 2 < METRICS_KAFKA_CODE_SLOTS ? (unsigned)(code + 2) : METRICS_KAFKA_CODE_SLOTS - 1;
}

void metrics_kafka_slot_code(unsigned slot, bool *answered, int *code)
{
  *answered = slot != 0;
  *code = slot != 0 ? (int)slot - 2 : 0;
}

void metrics_kafka_request(struct metrics *m, int api_key, bool answered, int code,
                           uint64_t latency_us)
{
  unsigned api = api_key >= 0 && api_key < METRICS_KAFKA_API_SLOTS ? (unsigned)api_key
                                                                   : METRICS_KAFKA_API_SLOTS - 1;
  m->kafka_requests[api][metrics_kafka_code_slot(answered, code)]++;
  /* Kafka's api keys of Produce and Fetch. */
  if (api_key == 0) {
    metrics_hist_observe(&m->kafka_latency[METRICS_LAT_PRODUCE], latency_us);
  } else if (api_key == 1) {
    metrics_hist_observe(&m->kafka_latency[METRICS_LAT_FETCH], latency_us);
  }
}

/* The position of group_id in m->parts, or where it would go. */
static size_t metrics_part_pos(const struct metrics *m, uint64_t group_id)
{
  size_t lo = 0, hi = m->nparts;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->parts[mid].group_id < group_id) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

struct metrics_part *metrics_part(struct metrics *m, uint64_t group_id)
{
  size_t pos = metrics_part_pos(m, group_id);
  if (pos < m->nparts && m->parts[pos].group_id == group_id) {
    return &m->parts[pos];
  }
  if (m->nparts >= METRICS_MAX_PARTS) {
    return NULL;
  }
  if (m->nparts == m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 16;
    struct metrics_part *v = realloc(m->parts, cap * sizeof *v);
    if (v == NULL) {
      return NULL;
    }
    m->parts = v;
    m->cap = cap;
  }
  memmove(&m->parts[pos + 1], &m->parts[pos], (m->nparts - pos) * sizeof *m->parts);
  m->nparts++;
  struct metrics_part *mp = &m->parts[pos];
  memset(mp, 0, sizeof *mp);
  mp->group_id = group_id;
  return mp;
}

struct metrics_part *metrics_part_find(struct metrics *m, uint64_t group_id)
{
  size_t pos = metrics_part_pos(m, group_id);
  return pos < m->nparts && m->parts[pos].group_id == group_id ? &m->parts[pos] : NULL;
}

void metrics_part_mark(struct metrics *m, struct metrics_part *mp)
{
  if (mp->applied) {
    return;
  }
  if (m->napplied == m->applied_cap) {
    size_t cap = m->applied_cap ? m->applied_cap * 2 : 64;
    uint64_t *v = realloc(m->applied, cap * sizeof *v);
    if (v == NULL) {
      m->applied_lost = true;
      return;
    }
    m->applied = v;
    m->applied_cap = cap;
  }
  m->applied[m->napplied++] = mp->group_id;
  mp->applied = true;
}

void metrics_part_produced(struct metrics *m, uint64_t group_id, uint64_t bytes)
{
  struct metrics_part *mp = metrics_part(m, group_id);
  if (mp != NULL) {
    mp->produced_bytes += bytes;
    mp->produced_batches++;
  }
}

void metrics_part_fetched(struct metrics *m, uint64_t group_id, uint64_t bytes)
{
  struct metrics_part *mp = metrics_part(m, group_id);
  if (mp != NULL) {
    mp->fetched_bytes += bytes;
    mp->fetches++;
  }
}

void metrics_prune(struct metrics *m, bool (*keep)(uint64_t group_id, void *data), void *data)
{
  size_t k = 0;
  for (size_t i = 0; i < m->nparts; i++) {
    if (!keep(m->parts[i].group_id, data)) {
      free(m->parts[i].ring);
      continue;
    }
    if (k != i) {
      m->parts[k] = m->parts[i];
    }
    k++;
  }
  m->nparts = k;
}

/* The i-th newest sample (0 = newest); i < ring_len. */
static const struct metrics_lag_sample *metrics_lag_at(const struct metrics_part *mp, unsigned i)
{
  unsigned pos = (mp->ring_next + mp->ring_cap - 1 - i) % mp->ring_cap;
  return &mp->ring[pos];
}

/* A full ring below METRICS_LAG_SAMPLES doubles (the samples oldest
 * first). Returns false without memory: a ring already there is kept and
 * its oldest sample is overwritten, as in a full one. */
static bool metrics_lag_grow(struct metrics_part *mp)
{
  if (mp->ring_len < mp->ring_cap || mp->ring_cap == METRICS_LAG_SAMPLES) {
    return true;
  }
  unsigned cap = mp->ring_cap == 0 ? METRICS_LAG_FIRST : mp->ring_cap * 2;
  if (cap > METRICS_LAG_SAMPLES) {
    cap = METRICS_LAG_SAMPLES;
  }
  struct metrics_lag_sample *v = malloc(cap * sizeof *v);
  if (v == NULL) {
    return mp->ring != NULL;
  }
  for (unsigned i = 0; i < mp->ring_len; i++) {
    v[i] = *metrics_lag_at(mp, mp->ring_len - 1 - i);
  }
  free(mp->ring);
  mp->ring = v;
  mp->ring_cap = cap;
  mp->ring_next = mp->ring_len;
  return true;
}

bool metrics_lag_sample(struct metrics_part *mp, uint64_t now_ms, uint64_t index,
                        int64_t next_offset)
{
  if (mp->ring_len > 0) {
    const struct metrics_lag_sample *last = metrics_lag_at(mp, 0);
    if (last->index == index) {
      return true;
    }
    if (now_ms < last->ms + METRICS_LAG_SAMPLE_MS) {
      return false;
    }
  }
  if (!metrics_lag_grow(mp)) {
    return true;
  }
  mp->ring[mp->ring_next] =
      (struct metrics_lag_sample){.ms = now_ms, .index = index, .next_offset = next_offset};
  mp->ring_next = (mp->ring_next + 1) % mp->ring_cap;
  if (mp->ring_len < mp->ring_cap) {
    mp->ring_len++;
  }
  return true;
}

void metrics_lag_estimate(const struct metrics_part *mp, uint64_t now_ms, uint64_t index,
                          int64_t next_offset, uint64_t match, int64_t *lag_offsets,
                          uint64_t *lag_ms)
{
  *lag_offsets = 0;
  *lag_ms = 0;
  if (match >= index) {
    return;
  }
  /* Walk from the newest sample back to the newest one at or below match;
   * `above` is the oldest sample seen above match: the leader has held an
   * entry the follower lacks since then. */
  const struct metrics_lag_sample *above = NULL;
  const struct metrics_lag_sample *at = NULL;
  for (unsigned i = 0; i < mp->ring_len; i++) {
    const struct metrics_lag_sample *s = metrics_lag_at(mp, i);
    if (s->index <= match) {
      at = s;
      break;
    }
    above = s;
  }
  if (at != NULL) {
    *lag_offsets = next_offset > at->next_offset ? next_offset - at->next_offset : 0;
  } else if (mp->ring_len > 0) {
    /* Behind everything the ring holds: at least this much. */
    const struct metrics_lag_sample *oldest = metrics_lag_at(mp, mp->ring_len - 1);
    *lag_offsets = next_offset > oldest->next_offset ? next_offset - oldest->next_offset : 0;
  }
  if (above != NULL && now_ms > above->ms) {
    *lag_ms = now_ms - above->ms;
  }
}

void metrics_note_term(struct metrics *m, struct metrics_part *mp, uint64_t term)
{
  if (mp->term_seen && term > mp->last_term) {
    m->elections += term - mp->last_term;
  }
  mp->last_term = term;
  mp->term_seen = true;
}
