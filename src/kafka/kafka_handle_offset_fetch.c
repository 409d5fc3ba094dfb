/* kafka_handle_offset_fetch.c - OffsetFetch v1-5: the native OffsetFetch
 * at the group's coordinator. Explicit partitions are answered in the
 * request's order (offset -1 and metadata "" when nothing is committed);
 * null topics (v2+) lists every committed offset. An unknown group has
 * nothing committed (no error, as in Kafka). committed_leader_epoch (v5)
 * is -1: Cairn has no leader epochs on the Kafka port. */
#include "kafka/kafka_handlers.h"

#include <string.h>

static void kafka_of_part(struct kafka_buf *b, int16_t v, int32_t partition, int64_t offset,
                          const char *metadata, int16_t err)
{
  kafka_put_i32(b, partition);
  kafka_put_i64(b, offset);
  if (v >= 5) {
    kafka_put_i32(b, -1); /* committed_leader_epoch */
  }
  kafka_put_string(b, metadata);
  kafka_put_err(b, err);
}

/* Writes the answer: for explicit topics from the request (read again from
 * its body), else from the native result list r (may be NULL). */
static void kafka_of_answer(struct kafka_req *kr, int16_t err,
                            const Cairn__Client__OffsetFetchResponse *r)
{
  int16_t v = kr->h.api_version;
  struct kafka_reader rd = kr->body;
  rd.pos = kr->body_at;
  rd.err = 0;
  (void)kafka_get_string(&rd); /* group */
  int32_t nt = kafka_get_array_len(&rd, 6);
  struct kafka_buf b;
  kafka_buf_init(&b);
  if (v >= 3) {
    kafka_put_i32(&b, 0); /* throttle_time_ms */
  }
  /* v2+: a whole-request error is the top-level code and no topics. */
  if (nt < 0 || (v >= 2 && err != 0)) {
    size_t at = kafka_buf_reserve(&b, 4);
    int32_t ntopics = 0;
    for (size_t i = 0; err == 0 && r != NULL && i < r->n_partitions;) {
      size_t j = i;
      while (j < r->n_partitions && strcmp(r->partitions[j]->topic, r->partitions[i]->topic) == 0) {
        j++;
      }
      kafka_put_string(&b, r->partitions[i]->topic);
      kafka_put_array_len(&b, (int32_t)(j - i));
      for (size_t k = i; k < j; k++) {
        const Cairn__Client__OffsetFetchPartitionResult *p = r->partitions[k];
        kafka_of_part(&b, v, (int32_t)p->partition, p->offset, p->metadata, KAFKA_ERR_NONE);
      }
      ntopics++;
      i = j;
    }
    kafka_buf_set_i32(&b, at, ntopics);
  } else {
    kafka_put_array_len(&b, nt);
    size_t k = 0;
    for (int32_t t = 0; t < nt; t++) {
      kafka_put_kstr(&b, kafka_get_string(&rd));
      int32_t np = kafka_get_array_len(&rd, 4);
      kafka_put_array_len(&b, np < 0 ? 0 : np);
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
    }
  }
  if (v >= 2) {
    kafka_put_err(&b, err);
  }
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
  struct kafka_str group = kafka_get_string(rd);
  int32_t nt = kafka_get_array_len(rd, 6);
  size_t at = rd->pos;
  size_t total = 0;
  for (int32_t t = 0; rd->err == 0 && t < nt; t++) {
    (void)kafka_get_string(rd);
    int32_t np = kafka_get_array_len(rd, 4);
    for (int32_t i = 0; rd->err == 0 && i < np; i++) {
      (void)kafka_get_i32(rd);
      total++;
    }
  }
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
    tv[t].topic = kafka_gop_str(op, kafka_get_string(rd));
    int32_t np = kafka_get_array_len(rd, 4);
    tv[t].partitions = &parts[k];
    for (int32_t i = 0; i < np; i++) {
      int32_t p = kafka_get_i32(rd);
      parts[k++] = p < 0 ? UINT32_MAX : (uint32_t)p; /* never committed: -1 */
    }
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
