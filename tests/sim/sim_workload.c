/* sim_workload.c - the simulated producers: idempotent ones (a producer
 * id, an epoch, sequences counted per record, at most SIM_MAX_INFLIGHT
 * batches unacknowledged, every retry of a batch the same bytes) and plain
 * ones (no producer id: a retry may store a batch twice, which is
 * allowed). A producer sends to a replica that believes it leads (if two
 * do, either); an answer is handled as libcairn does: acknowledged, or
 * resent unchanged at the producer's next turn (not leader, in doubt, out
 * of order or unknown producer while an earlier batch is unresolved), and
 * a batch unanswered for SIM_REQUEST_TIMEOUT_MS is resent too. Resends go
 * in sequence order, except that now and then they are shuffled or spread
 * over two leaders (requests overtaking one another). Between two
 * batches, an idempotent producer with nothing unacknowledged sometimes
 * bumps its epoch (sequences restart at 0). */
#include "sim.h"

#include "common/err.h"
#include "format/batch.h"
#include "format/batch_builder.h"

#include <stdlib.h>
#include <string.h>

static int sim_workload_build(struct sim *s, struct sim_producer *p)
{
  struct batch_builder bb;
  int rv = batch_builder_init(&bb, 1u << 16);
  if (rv != 0) {
    return rv;
  }
  struct sim_batch *b = calloc(1, sizeof *b);
  if (b == NULL) {
    batch_builder_close(&bb);
    return CAIRN_ENOMEM;
  }
  b->p = p;
  b->count = 1 + (int32_t)sim_rng_below(&s->rng, 3);
  b->epoch = p->producer_id >= 0 ? p->epoch : -1;
  b->seq = p->producer_id >= 0 ? p->next_seq : -1;
  b->offset = -1;
  if (p->producer_id >= 0) {
    batch_builder_set_producer(&bb, p->producer_id, p->epoch, p->next_seq);
  }
  for (int32_t k = 0; k < b->count && rv == 0; k++) {
    char value[64];
    int vlen =
        snprintf(value, sizeof value, "p%u-e%d-b%zu-r%d", p->index, (int)b->epoch, p->n, (int)k);
    rv = batch_builder_add(&bb, sim_now(s), NULL, 0, value, (size_t)vlen, NULL, 0);
  }
  if (rv == 0) {
    rv = batch_builder_finish(&bb, &b->bytes, &b->len);
  }
  batch_builder_close(&bb);
  if (rv == 0 && p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 64;
    struct sim_batch **nb = realloc(p->batches, cap * sizeof *nb);
    if (nb == NULL) {
      rv = CAIRN_ENOMEM;
    } else {
      p->batches = nb;
      p->cap = cap;
    }
  }
  if (rv != 0) {
    free(b->bytes);
    free(b);
    return rv;
  }
  b->hash = sim_hash(b->bytes + BATCH_BROKER_FIELDS_SIZE, b->len - BATCH_BROKER_FIELDS_SIZE);
  p->batches[p->n++] = b;
  if (p->producer_id >= 0) {
    int64_t next = (int64_t)p->next_seq + b->count;
    p->next_seq = (int32_t)(next % ((int64_t)INT32_MAX + 1));
  }
  s->stats.batches++;
  sim_trace(s, "build p%u batch=%zu epoch=%d seq=%d count=%d", p->index, p->n - 1, (int)b->epoch,
            (int)b->seq, (int)b->count);
  return 0;
}

int sim_workload_init(struct sim *s)
{
  for (unsigned i = 0; i < s->nproducers; i++) {
    struct sim_producer *p = &s->producers[i];
    memset(p, 0, sizeof *p);
    p->index = i;
    /* Producer 0 is always idempotent; about one in four others is plain. */
    p->producer_id = i > 0 && sim_rng_chance(&s->rng, 1, 4) ? -1 : 1000 + (int64_t)i;
    p->epoch = 0;
    p->last_acked_offset = -1;
    p->last_acked_seq = -1;
    p->next_turn_ms = sim_rng_below(&s->rng, 50);
  }
  return 0;
}

void sim_workload_close(struct sim *s)
{
  for (unsigned i = 0; i < s->nproducers; i++) {
    struct sim_producer *p = &s->producers[i];
    for (size_t k = 0; k < p->n; k++) {
      free(p->batches[k]->bytes);
      free(p->batches[k]);
    }
    free(p->batches);
    p->batches = NULL;
    p->n = p->cap = 0;
  }
}

/* A replica that believes it leads (alive), or NULL. */
static struct sim_replica *sim_workload_pick_leader(struct sim *s)
{
  unsigned cand[SIM_MAX_REPLICAS], nc = 0;
  for (unsigned i = 0; i < s->n; i++) {
    if (sim_replica_up(&s->reps[i]) && raft_state(sim_replica_raft(&s->reps[i])) == RAFT_LEADER) {
      cand[nc++] = i;
    }
  }
  return nc == 0 ? NULL : &s->reps[cand[sim_rng_below(&s->rng, nc)]];
}

static void sim_workload_send(struct sim *s, struct sim_replica *rep, struct sim_batch *b)
{
  struct sim_req *req = calloc(1, sizeof *req);
  if (req == NULL) {
    sim_fail(s, "out of memory");
    return;
  }
  b->attempt++;
  b->attempts++;
  b->state = SIM_BATCH_SENT;
  b->sent_ms = sim_now(s);
  req->b = b;
  req->attempt = b->attempt;
  sim_trace(s, "send p%u batch seq=%d epoch=%d attempt=%llu to r%u", b->p->index, (int)b->seq,
            (int)b->epoch, (unsigned long long)b->attempt, rep->index);
  int rv = sim_replica_produce(rep, req);
  if (rv != 0) {
    b->state = SIM_BATCH_WAITING;
    free(req);
  }
}

/* Batches from the oldest unacknowledged one on, acknowledged or not:
 * the partition remembers a producer's last PRODUCER_STATE_WINDOW appended
 * batches, so a retry is recognised only if no more than that many were
 * built from the oldest unresolved one on (libcairn's max_in_flight, like
 * Kafka's). Counting only the unacknowledged ones is not enough: with the
 * oldest in doubt and a later one acknowledged, a sixth would push the
 * oldest out of the window and its retries would be refused for ever. */
static size_t sim_workload_open(const struct sim_producer *p)
{
  return p->n - p->first_open;
}

static void sim_workload_producer_turn(struct sim *s, struct sim_producer *p, bool build)
{
  int64_t now = sim_now(s);
  while (p->first_open < p->n && p->batches[p->first_open]->state == SIM_BATCH_ACKED) {
    p->first_open++;
  }
  for (size_t k = p->first_open; k < p->n; k++) {
    struct sim_batch *b = p->batches[k];
    if (b->state == SIM_BATCH_SENT && now - b->sent_ms >= SIM_REQUEST_TIMEOUT_MS) {
      sim_trace(s, "timeout p%u seq=%d attempt=%llu", p->index, (int)b->seq,
                (unsigned long long)b->attempt);
      b->state = SIM_BATCH_WAITING; /* the old attempt's answer is ignored from now on */
    }
  }
  size_t open = sim_workload_open(p);
  if (build && open < SIM_MAX_INFLIGHT && sim_rng_chance(&s->rng, 1, 2)) {
    if (p->producer_id >= 0 && open == 0 && p->n > 0 && sim_rng_chance(&s->rng, 1, 40)) {
      p->epoch++;
      p->next_seq = 0;
      sim_trace(s, "epoch p%u -> %d", p->index, (int)p->epoch);
    }
    if (sim_workload_build(s, p) != 0) {
      sim_fail(s, "building a batch failed");
      return;
    }
  }
  /* The batches to (re)send, in sequence order as libcairn sends them;
   * sometimes shuffled, or each to its own choice of leader, as happens
   * when requests overtake one another on the way: the table must then
   * refuse the ones that arrive early (out of order) and keep the order. */
  struct sim_batch *send[SIM_MAX_INFLIGHT + 1];
  size_t nsend = 0;
  for (size_t k = p->first_open; k < p->n && nsend < SIM_MAX_INFLIGHT + 1; k++) {
    if (p->batches[k]->state == SIM_BATCH_WAITING) {
      send[nsend++] = p->batches[k];
    }
  }
  if (nsend > 1 && sim_rng_chance(&s->rng, 1, 6)) {
    for (size_t k = nsend - 1; k > 0; k--) {
      size_t o = sim_rng_below(&s->rng, (uint32_t)k + 1);
      struct sim_batch *t = send[k];
      send[k] = send[o];
      send[o] = t;
    }
    sim_trace(s, "shuffle p%u %zu batches", p->index, nsend);
  }
  bool scatter = sim_rng_chance(&s->rng, 1, 6);
  struct sim_replica *rep = NULL;
  for (size_t k = 0; k < nsend; k++) {
    if ((rep == NULL || scatter) && (rep = sim_workload_pick_leader(s)) == NULL) {
      return;
    }
    sim_workload_send(s, rep, send[k]);
  }
}

void sim_workload_turn(struct sim *s, bool build)
{
  int64_t now = sim_now(s);
  for (unsigned i = 0; i < s->nproducers && !s->failed; i++) {
    struct sim_producer *p = &s->producers[i];
    if (now < p->next_turn_ms) {
      continue;
    }
    p->next_turn_ms = now + 5 + sim_rng_below(&s->rng, 60);
    sim_workload_producer_turn(s, p, build);
  }
}

void sim_workload_on_result(struct sim *s, struct sim_req *req, int status, int64_t offset)
{
  struct sim_batch *b = req->b;
  struct sim_producer *p = b->p;
  bool current = req->attempt == b->attempt && b->state == SIM_BATCH_SENT;
  sim_trace(s, "answer p%u seq=%d attempt=%llu%s: %s offset=%lld", p->index, (int)b->seq,
            (unsigned long long)req->attempt, current ? "" : " (stale)",
            status == 0 ? "ok" : cairn_strerror(status), (long long)offset);
  if (status == 0) {
    /* Even a stale attempt's acknowledgement must hold: check it too. */
    sim_check_ack(s, b, offset);
    if (b->state == SIM_BATCH_ACKED) {
      if (p->producer_id >= 0 && offset != b->offset) {
        sim_fail(s, "producer %u batch seq %d acknowledged at offset %lld and at %lld", p->index,
                 (int)b->seq, (long long)b->offset, (long long)offset);
      }
      return;
    }
    b->state = SIM_BATCH_ACKED; /* even if resent meanwhile: this answer settles it */
    b->offset = offset;
    s->stats.acks++;
    if (p->producer_id >= 0) {
      /* Order within the producer: a later sequence of the same epoch at
       * a higher offset (checked again against the reference log). */
      if (p->last_acked_epoch == b->epoch && p->last_acked_offset >= 0 &&
          ((b->seq > p->last_acked_seq) != (offset > p->last_acked_offset))) {
        sim_fail(s, "producer %u: seq %d at offset %lld but seq %d at offset %lld", p->index,
                 (int)b->seq, (long long)offset, (int)p->last_acked_seq,
                 (long long)p->last_acked_offset);
      }
      p->last_acked_epoch = b->epoch;
      p->last_acked_seq = b->seq;
      p->last_acked_offset = offset;
    }
    return;
  }
  if (!current) {
    return;
  }
  switch (status) {
  case CAIRN_ENOTLEADER:
  case CAIRN_EINDOUBT:
  case CAIRN_EOUT_OF_ORDER:
  case CAIRN_EUNKNOWN_PRODUCER:
  case CAIRN_ESHUTDOWN:
    b->state = SIM_BATCH_WAITING; /* resent unchanged at the producer's next turn */
    break;
  default:
    sim_fail(s, "producer %u batch seq %d epoch %d: unexpected answer %s", p->index, (int)b->seq,
             (int)b->epoch, cairn_strerror(status));
  }
}

bool sim_workload_done(struct sim *s)
{
  for (unsigned i = 0; i < s->nproducers; i++) {
    const struct sim_producer *p = &s->producers[i];
    for (size_t k = p->first_open; k < p->n; k++) {
      if (p->batches[k]->state != SIM_BATCH_ACKED) {
        return false;
      }
    }
  }
  return true;
}
