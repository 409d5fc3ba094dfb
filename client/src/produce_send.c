/* produce_send.c - ProduceRequests: batches grouped by leader node, the
 * answers matched back to batches, and what each outcome means (delivered,
 * retried after a backoff, failed for good). See producer.c for the
 * happy path and failure modes. */
#include "producer.h"

#include "common/err.h"
#include "format/batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void lc_prod_preq_free(struct lc_preq *r)
{
  free(r->items);
  free(r);
}

static void lc_prod_preq_unlink(struct cairn_producer *p, struct lc_preq *r)
{
  if (r->prev != NULL) {
    r->prev->next = r->next;
  } else {
    p->preqs = r->next;
  }
  if (r->next != NULL) {
    r->next->prev = r->prev;
  }
  r->prev = r->next = NULL;
}

/* Looks up the result for (topic, partition) in a ProduceResponse; the
 * node answers in request order, so entry i is tried first. */
static const Cairn__Client__ProducePartitionResult *
lc_prod_result(const Cairn__Client__ProduceResponse *resp, size_t i, const char *topic,
               int32_t partition)
{
  if (i < resp->n_partitions && resp->partitions[i]->topic != NULL &&
      strcmp(resp->partitions[i]->topic, topic) == 0 &&
      resp->partitions[i]->partition == (uint32_t)partition) {
    return resp->partitions[i];
  }
  for (size_t k = 0; k < resp->n_partitions; k++) {
    if (resp->partitions[k]->topic != NULL && strcmp(resp->partitions[k]->topic, topic) == 0 &&
        resp->partitions[k]->partition == (uint32_t)partition) {
      return resp->partitions[k];
    }
  }
  return NULL;
}

/* Whether a batch that came back with err may still have been written:
 * the request reached the node and the answer does not say it was not
 * (a timeout, a lost connection, IN_DOUBT, a node stopping or failing
 * its disk after proposing). Refusals (NOT_LEADER, OUT_OF_ORDER_SEQUENCE,
 * REQUEST_TOO_LARGE, ...) are answered before anything is proposed. */
static bool lc_prod_outcome_unknown(int err)
{
  switch (err) {
  case CAIRN_EINDOUBT:
  case CAIRN_EREQUEST_TIMEOUT:
  case CAIRN_ESHUTDOWN:
  case CAIRN_ESTORAGE:
  case CAIRN_ECLOSED:
    return true;
  default:
    return lc_is_errno(err);
  }
}

/* Whether a batch queued before b in its partition is not answered for
 * good yet (in flight, or waiting for its retry). */
static bool lc_prod_earlier_pending(const struct lc_ppart *pp, const struct lc_batch *b)
{
  for (const struct lc_batch *e = pp->acc.head; e != NULL && e != b; e = e->next) {
    if (!e->done) {
      return true;
    }
  }
  return false;
}

/* The partition's unanswered batches go again, from its head, once none
 * is in flight and not before wait_ms from now (lc_prod_send_all). */
static void lc_prod_retry_from_head(struct cairn_producer *p, struct lc_ppart *pp, uint64_t now,
                                    uint64_t wait_ms)
{
  pp->retrying = true;
  p->c->stats.retries++;
  if (now + wait_ms > pp->wake_ms) {
    pp->wake_ms = now + wait_ms;
  }
}

/* A batch came back with err: retry it later, or fail it for good. */
static void lc_prod_batch_failed(struct cairn_producer *p, struct lc_ptopic *t,
                                 int32_t partition, struct lc_batch *b, int err, bool hinted)
{
  struct lc_ppart *pp = &t->parts[partition];
  uint64_t now = lc_now(p->c);
  b->in_flight = false;
  b->last_err = err;
  bool refused_seq = err == CAIRN_EOUT_OF_ORDER || err == CAIRN_EUNKNOWN_PRODUCER;
  if (refused_seq && !p->closing) {
    /* The partition refused the batch's sequence, so it does not hold it
     * (a copy it held would be answered with its offset). */
    b->maybe_written = false;
  }
  if (refused_seq && p->bump_needed && !p->closing) {
    /* After a gap: it is renumbered under the new epoch (producer.c,
     * "Epoch bumps"). */
    return;
  }
  if (refused_seq && !p->closing && lc_prod_earlier_pending(pp, b)) {
    /* A batch before it is not in the partition yet: it went to a node
     * that stopped leading, or its proposal was lost in an election, and
     * it is being retried (or its answer is on the way). This one was
     * refused for that gap, not for a gap of its own: it goes again after
     * the earlier one, as librdkafka retries OUT_OF_ORDER_SEQUENCE behind
     * an unacknowledged batch. Failing it instead lost a batch to every
     * leader change under load (the scale stage at 10,000 partitions). */
    if (now >= b->deadline_ms) {
      lc_prod_batch_failed_for_good(p, b, CAIRN_EDELIVERY_TIMEOUT);
      return;
    }
    lc_prod_retry_from_head(p, pp, now, 1);
    return;
  }
  if (err == CAIRN_EUNKNOWN_PRODUCER && !p->closing) {
    /* The first batch not delivered, and the partition has no state for
     * this producer: it dropped it (its bound, producer_state.h). As
     * Kafka clients after UNKNOWN_PRODUCER_ID: a new epoch, this batch
     * and the rest renumbered from sequence 0 (which a partition without
     * state takes), nothing failed. */
    p->bump_needed = true;
    return;
  }
  if (lc_prod_outcome_unknown(err)) {
    b->maybe_written = true;
  }
  bool unknown = err == CAIRN_EUNKNOWN_TOPIC || err == CAIRN_EUNKNOWN_PARTITION;
  if (unknown && !p->closing && now < b->deadline_ms) {
    /* The node does not know the partition: it may be behind on the
     * metadata (restarted, or the topic is seconds old). As Kafka's
     * UNKNOWN_TOPIC_OR_PARTITION, this is retried; the batch fails with
     * it only once a metadata refresh after this answer, from a node that
     * is not behind, says so too (lc_prod_send_all), or at the deadline. */
    if (!pp->unknown) {
      pp->unknown = true;
      pp->unknown_gen = p->c->meta.generation;
    }
    lc_meta_invalidate(p->c);
    lc_prod_retry_from_head(p, pp, now, lc_backoff_next(&pp->bk));
    return;
  }
  if (!lc_retriable(err) || p->closing) {
    lc_prod_batch_failed_for_good(p, b, p->closing && lc_retriable(err) ? UV_ECANCELED : err);
    return;
  }
  if (now >= b->deadline_ms) {
    lc_prod_batch_failed_for_good(p, b, CAIRN_EDELIVERY_TIMEOUT);
    return;
  }
  if (lc_needs_refresh(err) && !hinted) {
    lc_meta_invalidate(p->c);
    /* The leader as cached (where the batch went): when a refresh names
     * another one (a failover), the batch goes there at once rather than
     * after the rest of the backoff (lc_prod_send_all). */
    pp->failed_leader = lc_meta_leader(p->c, t->name, partition);
  }
  lc_prod_retry_from_head(p, pp, now, hinted ? 1 : lc_backoff_next(&pp->bk));
}

static void lc_prod_on_answer(struct cairn_client *c, int status, Cairn__Client__Envelope *env,
                              const uint8_t *payload, size_t len, struct lc_buf *buf,
                              void *data)
{
  struct lc_preq *r = data;
  if (r->abandoned) {
    lc_prod_preq_free(r); /* its batches were sent again elsewhere; p may be gone */
    return;
  }
  struct cairn_producer *p = r->p;
  lc_prod_preq_unlink(p, r);
  p->reqs_in_flight--;
  if (env != NULL && r->node == p->silent_node) {
    p->silent_node = 0; /* it answers again */
  }
  const Cairn__Client__ProduceResponse *resp = NULL;
  if (status == 0) {
    if (env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP) {
      status = CAIRN_EPROTOCOL;
    } else {
      resp = env->produce_resp;
      if (resp->error != NULL && resp->error->code != CAIRN__CLIENT__ERROR_CODE__OK) {
        status = lc_wire_err((int)resp->error->code);
      }
    }
  }
  /* Items are grouped by partition in request order: result index k. */
  size_t k = 0;
  for (size_t i = 0; i < r->n; i++) {
    struct lc_preq_item *it = &r->items[i];
    it->t->parts[it->partition].acc.in_flight--;
    if (i > 0 && (it->t != r->items[i - 1].t || it->partition != r->items[i - 1].partition)) {
      k++;
    }
    size_t nth = 0; /* the batch's index within its partition's entry */
    for (size_t j = i; j > 0 && r->items[j - 1].t == it->t &&
                       r->items[j - 1].partition == it->partition;
         j--) {
      nth++;
    }
    if (status != 0) {
      lc_prod_batch_failed(p, it->t, it->partition, it->b, status, false);
      continue;
    }
    const Cairn__Client__ProducePartitionResult *pr =
        lc_prod_result(resp, k, it->t->name, it->partition);
    if (pr == NULL) {
      lc_prod_batch_failed(p, it->t, it->partition, it->b, CAIRN_EPROTOCOL, false);
      continue;
    }
    int64_t base = nth < pr->n_base_offsets ? pr->base_offsets[nth]
                                            : (nth == 0 ? pr->base_offset : -1);
    if (base >= 0) {
      /* Committed, whatever the partition's error says about others. */
      lc_backoff_reset(&it->t->parts[it->partition].bk);
      lc_prod_batch_done(it->b, 0, base);
      continue;
    }
    int err = pr->error != NULL ? lc_wire_err((int)pr->error->code) : CAIRN_EPROTOCOL;
    if (err == 0) {
      err = CAIRN_EPROTOCOL; /* OK without an offset */
    }
    bool hinted = false;
    if (err == CAIRN_ENOTLEADER) {
      c->stats.not_leader++;
      lc_meta_set_leader(c, it->t->name, it->partition, pr->leader_id, pr->leader_address);
      hinted = pr->leader_id != 0 && pr->leader_address != NULL && pr->leader_address[0] != '\0';
    }
    lc_prod_batch_failed(p, it->t, it->partition, it->b, err, hinted);
  }
  for (size_t i = 0; i < r->n; i++) {
    lc_prod_complete(p, r->items[i].t, r->items[i].partition);
  }
  lc_prod_preq_free(r);
  lc_prod_kick(p);
}

/* Whether a refresh after r's probe began names another leader than the
 * node r went to for any of its partitions. */
static bool lc_prod_preq_leader_moved(struct cairn_client *c, const struct lc_preq *r)
{
  for (size_t i = 0; i < r->n; i++) {
    uint64_t now_leader = lc_meta_leader(c, r->items[i].t->name, r->items[i].partition);
    if (now_leader != 0 && now_leader != r->node) {
      return true;
    }
  }
  return false;
}

/* r's batches go to the new leader: each is retried at once (as after a
 * timeout: it may be written, so it is resent unchanged and the
 * partition answers a copy it holds with its offset). */
static void lc_prod_preq_abandon(struct cairn_producer *p, struct lc_preq *r)
{
  lc_prod_preq_unlink(p, r);
  r->abandoned = true;
  p->reqs_in_flight--;
  p->c->stats.retries++;
  for (size_t i = 0; i < r->n; i++) {
    struct lc_preq_item *it = &r->items[i];
    it->t->parts[it->partition].acc.in_flight--;
    lc_prod_batch_failed(p, it->t, it->partition, it->b, CAIRN_EREQUEST_TIMEOUT, true);
  }
  for (size_t i = 0; i < r->n; i++) {
    lc_prod_complete(p, r->items[i].t, r->items[i].partition);
  }
}

void lc_prod_probe_leaders(struct cairn_producer *p)
{
  struct cairn_client *c = p->c;
  if (p->pid < 0) {
    return; /* not idempotent: a resend could store a batch twice */
  }
  uint64_t now = lc_now(c);
  struct lc_preq *next;
  for (struct lc_preq *r = p->preqs; r != NULL; r = next) {
    next = r->next;
    if (now - r->since_ms < (r->probe_wait_ms != 0 ? r->probe_wait_ms : LC_PROD_PROBE_MS)) {
      continue;
    }
    if (r->probe_gen == 0) {
      r->probe_gen = c->meta.generation; /* a refresh starts at the next tick */
      lc_meta_invalidate(c);
      lc_meta_prefer_replica(c, r->items[0].t->name, r->items[0].partition, r->node);
      if (r->node != 0 && r->probe_wait_ms != LC_PROD_REPROBE_MS) {
        p->silent_node = r->node; /* silent for a whole probe */
      }
    } else if (c->meta.generation > r->probe_gen) {
      if (lc_prod_preq_leader_moved(c, r)) {
        lc_prod_preq_abandon(p, r);
        continue;
      }
      /* The same leader still: ask again soon (of another of the
       * partition's replicas first: lc_meta_prefer_replica above). */
      r->probe_gen = 0;
      r->since_ms = now;
      r->probe_wait_ms = LC_PROD_REPROBE_MS;
      lc_prod_kick_at(p, now + LC_PROD_REPROBE_MS);
      continue;
    }
    lc_prod_kick_at(p, now + 100); /* until the refresh answers */
  }
}

/* Has the cache named a new leader since a batch of the partition failed
 * at the old one? Then its backoff is over: the failure was the old
 * leader's, and the new one has not been tried. */
static bool lc_prod_leader_moved(struct cairn_client *c, const struct lc_ptopic *t,
                                 int32_t partition)
{
  uint64_t failed = t->parts[partition].failed_leader;
  if (failed == 0) {
    return false;
  }
  uint64_t now_leader = lc_meta_leader(c, t->name, partition);
  return now_leader != 0 && now_leader != failed;
}

/* Fails every batch of the partition not in flight with err, which a
 * metadata refresh confirmed (the topic or partition does not exist). */
static void lc_prod_fail_partition(struct cairn_producer *p, struct lc_ptopic *t,
                                   int32_t partition, int err)
{
  struct lc_ppart *pp = &t->parts[partition];
  pp->unknown = false;
  for (struct lc_batch *b = pp->acc.head; b != NULL; b = b->next) {
    if (!b->open && !b->in_flight && !b->done) {
      lc_prod_batch_failed_for_good(p, b, err);
    }
  }
  lc_prod_complete(p, t, partition);
}

/* Sends every sendable batch, one ProduceRequest per leader address. */
void lc_prod_send_all(struct cairn_producer *p)
{
  struct cairn_client *c = p->c;
  uint64_t now = lc_now(c);
  /* Collect (address, item) pairs, then group by address. */
  size_t cap = 0, n = 0;
  struct lc_preq_item *items = NULL;
  const char **addrs = NULL;
  bool need_refresh = false;
  for (size_t ti = 0; ti < p->ntopics; ti++) {
    struct lc_ptopic *t = p->topics[ti];
    for (int32_t pi = 0; pi < t->count; pi++) {
      struct lc_ppart *pp = &t->parts[pi];
      struct lc_acc *a = &pp->acc;
      if (a->head == NULL || (now < pp->wake_ms && !lc_prod_leader_moved(c, t, pi))) {
        continue;
      }
      if (pp->retrying) {
        if (a->in_flight > 0) {
          continue; /* resend from the head once the others are back */
        }
        pp->retrying = false;
      }
      const char *addr;
      int rv = lc_route(c, t->name, pi, pp->unknown ? pp->unknown_gen : UINT64_MAX, &addr);
      if (rv == CAIRN_EUNKNOWN_TOPIC || rv == CAIRN_EUNKNOWN_PARTITION) {
        lc_prod_fail_partition(p, t, pi, rv); /* confirmed by a fresh refresh */
        continue;
      }
      if (rv != 0) {
        need_refresh = true;
        pp->wake_ms = now + lc_backoff_next(&pp->bk);
        continue;
      }
      pp->failed_leader = 0;
      pp->unknown = false;
      if (strcmp(pp->last_addr, addr) != 0) { /* every partition, every round: no printf */
        snprintf(pp->last_addr, sizeof pp->last_addr, "%s", addr);
      }
      for (struct lc_batch *b = a->head; b != NULL; b = b->next) {
        if (b->open || (uint32_t)a->in_flight >= p->o.max_in_flight) {
          break;
        }
        if (b->in_flight || b->done) {
          continue;
        }
        if (p->resolving && !b->maybe_written) {
          break; /* only what may be written goes out before the new epoch */
        }
        if (n == cap) {
          cap = cap == 0 ? 32 : cap * 2;
          struct lc_preq_item *ni = realloc(items, cap * sizeof *ni);
          const char **na = realloc(addrs, cap * sizeof *na);
          if (ni != NULL) {
            items = ni;
          }
          if (na != NULL) {
            addrs = na;
          }
          if (ni == NULL || na == NULL) {
            goto send;
          }
        }
        items[n] = (struct lc_preq_item){t, pi, b};
        addrs[n] = addr;
        n++;
        b->in_flight = true; /* claimed; undone below if not sent */
        a->in_flight++;
      }
    }
  }
send:
  if (need_refresh) {
    lc_meta_invalidate(c);
  }
  bool *used = calloc(n + 1, sizeof *used);
  for (size_t i = 0; i < n && used != NULL; i++) {
    if (used[i]) {
      continue;
    }
    struct lc_preq *r = calloc(1, sizeof *r);
    struct lc_preq_item *ri = calloc(n - i, sizeof *ri);
    uv_buf_t *bufs = calloc(n - i, sizeof *bufs);
    Cairn__Client__ProducePartition *pps = calloc(n - i, sizeof *pps);
    Cairn__Client__ProducePartition **ppp = calloc(n - i, sizeof *ppp);
    uint32_t *lens = calloc(n - i, sizeof *lens);
    int rv = CAIRN_ENOMEM;
    if (r != NULL && ri != NULL && bufs != NULL && pps != NULL && ppp != NULL && lens != NULL) {
      /* Items of one address, in collection order (so grouped by
       * partition, batches in queue order), up to the request bound. */
      size_t m = 0, np = 0, bytes = 0;
      for (size_t j = i; j < n; j++) {
        if (used[j] || strcmp(addrs[j], addrs[i]) != 0) {
          continue;
        }
        if (m > 0 && bytes + items[j].b->len > LC_PROD_MAX_REQUEST_BYTES) {
          break; /* the rest goes in another request, right after this one */
        }
        bool same = m > 0 && ri[m - 1].t == items[j].t && ri[m - 1].partition == items[j].partition;
        if (!same) {
          cairn__client__produce_partition__init(&pps[np]);
          pps[np].topic = items[j].t->name;
          pps[np].partition = (uint32_t)items[j].partition;
          pps[np].batch_lengths = &lens[m];
          ppp[np] = &pps[np];
          np++;
        }
        pps[np - 1].n_batch_lengths++;
        lens[m] = (uint32_t)items[j].b->len;
        bufs[m] = uv_buf_init((char *)items[j].b->bytes, (unsigned)items[j].b->len);
        bytes += items[j].b->len;
        ri[m++] = items[j];
        used[j] = true;
      }
      Cairn__Client__ProduceRequest req = CAIRN__CLIENT__PRODUCE_REQUEST__INIT;
      req.acks = CAIRN__CLIENT__ACKS__ACKS_ALL;
      req.timeout_ms = c->opts.request_timeout_ms > 1000 ? c->opts.request_timeout_ms - 500
                                                          : c->opts.request_timeout_ms;
      req.n_partitions = np;
      req.partitions = ppp;
      Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
      env.api = CAIRN__CLIENT__API__API_PRODUCE;
      env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_REQ;
      env.produce_req = &req;
      r->p = p;
      r->items = ri;
      r->n = m;
      rv = lc_call(c, addrs[i], &env, bufs, (int)m, c->opts.request_timeout_ms, lc_prod_on_answer,
                   r);
      if (rv == 0) {
        p->reqs_in_flight++;
        r->node = lc_meta_leader(c, ri[0].t->name, ri[0].partition);
        r->since_ms = now;
        bool silent = r->node != 0 && r->node == p->silent_node;
        r->probe_wait_ms = silent ? LC_PROD_REPROBE_MS : LC_PROD_PROBE_MS;
        r->next = p->preqs;
        if (p->preqs != NULL) {
          p->preqs->prev = r;
        }
        p->preqs = r;
        if (p->pid >= 0) {
          lc_prod_kick_at(p, now + r->probe_wait_ms);
        }
        ri = NULL;
        r = NULL;
      } else {
        /* Not sent: undo the claims; retried after a backoff. Nothing
         * reached a node, so what was known of each batch's fate holds. */
        for (size_t j = 0; j < m; j++) {
          bool maybe_written = ri[j].b->maybe_written;
          ri[j].b->in_flight = false;
          ri[j].t->parts[ri[j].partition].acc.in_flight--;
          lc_prod_batch_failed(p, ri[j].t, ri[j].partition, ri[j].b, rv, false);
          ri[j].b->maybe_written = maybe_written;
        }
      }
    } else {
      used[i] = true;
      items[i].b->in_flight = false;
      items[i].t->parts[items[i].partition].acc.in_flight--;
    }
    free(bufs);
    free(pps);
    free(ppp);
    /* lens is referenced by the packed request only during lc_call. */
    free(lens);
    free(ri);
    free(r);
  }
  if (used == NULL) {
    for (size_t i = 0; i < n; i++) {
      items[i].b->in_flight = false;
      items[i].t->parts[items[i].partition].acc.in_flight--;
    }
  }
  free(used);
  free(items);
  free(addrs);
}

