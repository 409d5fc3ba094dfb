/* kafka_handle_offset_fetch.c - OffsetFetch v1-7: the native OffsetFetch
 * at the group's coordinator. Explicit partitions are answered in the
 * request's order (offset -1 and metadata "" when nothing is committed);
 * null topics (v2+) lists every committed offset. An unknown group has
 * nothing committed (no error, as in Kafka). committed_leader_epoch (v5)
 * is -1: Cairn has no leader epochs on the Kafka port. v6 and v7 are
 * flexible (librdkafka 2.0.2's consumers ask v7); v7's require_stable
 * changes nothing: Cairn has no transactions, so no offset is pending. */
#include "kafka/kafka_handlers.h"

#include <string.h>

#define KAFKA_OF_FLEXIBLE 6 /* the first flexible version */

static void kafka_of_part(struct kafka_buf *b, int16_t v, int32_t partition, int64_t offset,
                          const char *metadata, int16_t err)
{
  bool f = v >= KAFKA_OF_FLEXIBLE;
  kafka_put_i32(b, partition);
  kafka_put_i64(b, offset);
  if (v >= 5) {
    kafka_put_i32(b, -1); /* committed_leader_epoch */
  }
  kafka_put_string_f(b, metadata, f);
  kafka_put_err(b, err);
  kafka_put_tags(b, f);
}

/* The index after the run of results of r's topic at i (results come
 * grouped by topic). */
static size_t kafka_of_run_end(const Cairn__Client__OffsetFetchResponse *r, size_t i)
{
  size_t j = i;
  while (j < r->n_partitions && strcmp(r->partitions[j]->topic, r->partitions[i]->topic) == 0) {
    j++;
  }
  return j;
}

/* Every committed offset of r (may be NULL), grouped by topic. */
static void kafka_of_put_all(struct kafka_buf *b, int16_t v,
                             const Cairn__Client__OffsetFetchResponse *r)
{
  bool f = v >= KAFKA_OF_FLEXIBLE;
  int32_t ntopics = 0;
  for (size_t i = 0; r != NULL && i < r->n_partitions; i = kafka_of_run_end(r, i)) {
    ntopics++;
  }
  kafka_put_array_len_f(b, ntopics, f);
  for (size_t i = 0; r != NULL && i < r->n_partitions;) {
    size_t j = kafka_of_run_end(r, i);
    kafka_put_string_f(b, r->partitions[i]->topic, f);
    kafka_put_array_len_f(b, (int32_t)(j - i), f);
    for (size_t k = i; k < j; k++) {
      const Cairn__Client__OffsetFetchPartitionResult *p = r->partitions[k];
      kafka_of_part(b, v, (int32_t)p->partition, p->offset, p->metadata, KAFKA_ERR_NONE);
    }
    kafka_put_tags(b, f);
    i = j;
  }
}

/* Writes the answer: for explicit topics from the request (read again from
 * its body), else from the native result list r (may be NULL). */
static void kafka_of_answer(struct kafka_req *kr, int16_t err,
                            const Cairn__Client__OffsetFetchResponse *r)
{
  int16_t v = kr->h.api_version;
  bool f = v >= KAFKA_OF_FLEXIBLE;
  struct kafka_reader rd = kr->body;
  rd.pos = kr->body_at;
  rd.err = 0;
  (void)kafka_get_string_f(&rd, f); /* group */
  int32_t nt = kafka_get_array_len_f(&rd, f ? 3 : 6, f);
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_tags(&b, f); /* response header v1 */
  if (v >= 3) {
    kafka_put_i32(&b, 0); /* throttle_time_ms */
  }
  /* v2+: a whole-request error is the top-level code and no topics. */
  if (nt < 0 || (v >= 2 && err != 0)) {
    kafka_of_put_all(&b, v, err == 0 ? r : NULL);
  } else {
    kafka_put_array_len_f(&b, nt, f);
    size_t k = 0;
    for (int32_t t = 0; t < nt; t++) {
      kafka_put_kstr_f(&b, kafka_get_string_f(&rd, f), f);
      int32_t np = kafka_get_array_len_f(&rd, 4, f);
      kafka_put_array_len_f(&b, np < 0 ? 0 : np, f);
      for (int32_t i = 0; i < np; i++, k++) {
        int32_t partition = kafka_get_i32(&rd);
        const Cairn__Client__OffsetFetchPartitionResult *p =
            r != NULL && k < r->n_partitions ? r->partitions[k] : NULL;
        int16_t perr = err;
        if (perr == 0 && p != NULL && p->error != NULL && p->error->code != 0) {
          perr = kafka_group_err(p->error->code);
        }
        kafka_of_part(&b, v, partition, p != NULL && perr == 0 ? p->offset : -1,
                      p != NULL && perr == 0 ? p->metadata : "", perr);
      }
      kafka_get_tags(&rd, f);
      kafka_put_tags(&b, f);
    }
  }
  if (v >= 2) {
    kafka_put_err(&b, err);
  }
  kafka_put_tags(&b, f);
  kafka_req_respond(kr, &b);
}

static void kafka_of_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_OFFSET_FETCH_RESP);
  const Cairn__Client__OffsetFetchResponse *r =
      code == CAIRN__CLIENT__ERROR_CODE__OK ? env->offset_fetch_resp : NULL;
  if (code == CAIRN__CLIENT__ERROR_CODE__UNKNOWN_GROUP) {
    kafka_of_answer(kr, KAFKA_ERR_NONE, NULL); /* nothing committed */
    return;
  }
  kafka_of_answer(kr, kafka_group_err(code), code == CAIRN__CLIENT__ERROR_CODE__OK ? r : NULL);
}

void kafka_handle_offset_fetch(struct kafka_req *kr)
{
  struct kafka_reader *rd = &kr->body;
  bool f = kr->h.api_version >= KAFKA_OF_FLEXIBLE;
  struct kafka_str group = kafka_get_string_f(rd, f);
  int32_t nt = kafka_get_array_len_f(rd, f ? 3 : 6, f);
  size_t at = rd->pos;
  size_t total = 0;
  for (int32_t t = 0; rd->err == 0 && t < nt; t++) {
    (void)kafka_get_string_f(rd, f);
    int32_t np = kafka_get_array_len_f(rd, 4, f);
    for (int32_t i = 0; rd->err == 0 && i < np; i++) {
      (void)kafka_get_i32(rd);
      total++;
    }
    kafka_get_tags(rd, f);
  }
  if (kr->h.api_version >= 7) {
    (void)kafka_get_i8(rd); /* require_stable: no offset is ever pending */
  }
  kafka_get_tags(rd, f);
  if (rd->err != 0 || (nt < 0 && kr->h.api_version < 2)) {
    kafka_req_malformed(kr);
    return;
  }
  struct kafka_gop *op = kafka_gop_new(kr);
  Cairn__Client__OffsetFetchRequest *r = op != NULL ? kafka_gop_alloc(op, sizeof *r) : NULL;
  size_t ntopics = nt > 0 ? (size_t)nt : 0;
  Cairn__Client__TopicPartitions *tv =
      r != NULL ? kafka_gop_alloc(op, (ntopics + 1) * sizeof *tv) : NULL;
  Cairn__Client__TopicPartitions **tp =
      tv != NULL ? kafka_gop_alloc(op, (ntopics + 1) * sizeof *tp) : NULL;
  uint32_t *parts = tp != NULL ? kafka_gop_alloc(op, (total + 1) * sizeof *parts) : NULL;
  if (parts == NULL) {
    kafka_of_answer(kr, KAFKA_ERR_UNKNOWN_SERVER, NULL);
    return;
  }
  cairn__client__offset_fetch_request__init(r);
  r->group = kafka_gop_str(op, group);
  bool ok = r->group != NULL;
  rd->pos = at;
  size_t k = 0;
  for (size_t t = 0; ok && t < ntopics; t++) {
    cairn__client__topic_partitions__init(&tv[t]);
    tv[t].topic = kafka_gop_str(op, kafka_get_string_f(rd, f));
    int32_t np = kafka_get_array_len_f(rd, 4, f);
    tv[t].partitions = &parts[k];
    for (int32_t i = 0; i < np; i++) {
      int32_t p = kafka_get_i32(rd);
      parts[k++] = p < 0 ? UINT32_MAX : (uint32_t)p; /* never committed: -1 */
    }
    kafka_get_tags(rd, f);
    tv[t].n_partitions = np > 0 ? (size_t)np : 0;
    tp[t] = &tv[t];
    ok = tv[t].topic != NULL;
  }
  if (!ok) {
    kafka_of_answer(kr, KAFKA_ERR_INVALID_REQUEST, NULL);
    return;
  }
  if (nt >= 0 && total == 0) {
    /* Nothing asked: an empty answer (the native request would mean all). */
    kafka_of_answer(kr, KAFKA_ERR_NONE, NULL);
    return;
  }
  r->partitions = tp;
  r->n_partitions = ntopics;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_OFFSET_FETCH_REQ;
  op->env.offset_fetch_req = r;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_OFFSET_FETCH, &op->env, NULL, 0, kafka_of_on_answer);
}
