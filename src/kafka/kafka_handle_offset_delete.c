/* kafka_handle_offset_delete.c - OffsetDelete v0 (kafka-consumer-groups.sh
 * --delete-offsets, librdkafka's rd_kafka_DeleteConsumerGroupOffsets):
 * the native ResetOffsets with delete_offsets at the group's coordinator,
 * the core operation behind `cairn group delete-offsets`: a tombstone per
 * partition named in __cairn_offsets, answered once committed. Needs
 * DELETE on the group and READ on each topic. Differs from Apache Kafka:
 * a group with members is refused whole (NON_EMPTY_GROUP), where Kafka
 * lets a consumer group drop the offsets of topics it is not subscribed
 * to. */
#include "kafka/kafka_handlers.h"

#include <stdlib.h>

#define KAFKA_OD_MAX_PARTITIONS 10000

/* The answer: per topic and partition of the request (read again from its
 * body), the native result at the same position, or err for all. */
static void kafka_od_answer(struct kafka_req *kr, int16_t err,
                            const Cairn__Client__ResetOffsetsResponse *r)
{
  struct kafka_reader rd = kr->body;
  rd.pos = kr->body_at;
  rd.err = 0;
  (void)kafka_get_string(&rd); /* group */
  int32_t nt = kafka_get_array_len(&rd, 6);
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_err(&b, err);
  kafka_put_i32(&b, 0); /* throttle_time_ms */
  kafka_put_array_len(&b, err != 0 || nt < 0 ? 0 : nt);
  size_t k = 0;
  for (int32_t t = 0; err == 0 && t < nt; t++) {
    kafka_put_kstr(&b, kafka_get_string(&rd));
    int32_t np = kafka_get_array_len(&rd, 4);
    kafka_put_array_len(&b, np < 0 ? 0 : np);
    for (int32_t i = 0; i < np; i++, k++) {
      kafka_put_i32(&b, kafka_get_i32(&rd));
      const Cairn__Client__OffsetCommitPartitionResult *p =
          r != NULL && k < r->n_partitions ? r->partitions[k] : NULL;
      kafka_put_err(&b, p == NULL                            ? KAFKA_ERR_UNKNOWN_SERVER
                        : p->error != NULL && p->error->code ? kafka_err_from_wire(p->error->code)
                                                             : KAFKA_ERR_NONE);
    }
  }
  kafka_req_respond(kr, &b);
}

static void kafka_od_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_RESET_OFFSETS_RESP);
  kafka_od_answer(kr, kafka_group_err(code),
                  code == CAIRN__CLIENT__ERROR_CODE__OK ? env->reset_offsets_resp : NULL);
}

/* Counts the request's partitions (checking the body parses). */
static size_t kafka_od_count(struct kafka_reader *rd, int32_t nt)
{
  size_t total = 0;
  for (int32_t t = 0; rd->err == 0 && t < nt; t++) {
    (void)kafka_get_string(rd);
    int32_t np = kafka_get_array_len(rd, 4);
    for (int32_t i = 0; rd->err == 0 && i < np; i++) {
      (void)kafka_get_i32(rd);
      total++;
    }
  }
  return total;
}

void kafka_handle_offset_delete(struct kafka_req *kr)
{
  struct kafka_reader *rd = &kr->body;
  struct kafka_str group = kafka_get_string(rd);
  int32_t nt = kafka_get_array_len(rd, 6);
  size_t at = rd->pos;
  size_t total = kafka_od_count(rd, nt);
  if (rd->err != 0 || total > KAFKA_OD_MAX_PARTITIONS) {
    kafka_req_malformed(kr);
    return;
  }
  struct kafka_gop *op = kafka_gop_new(kr);
  Cairn__Client__ResetOffsetsRequest *r = op != NULL ? kafka_gop_alloc(op, sizeof *r) : NULL;
  Cairn__Client__OffsetCommitPartition *pv =
      r != NULL ? kafka_gop_alloc(op, (total + 1) * sizeof *pv) : NULL;
  Cairn__Client__OffsetCommitPartition **pp =
      pv != NULL ? kafka_gop_alloc(op, (total + 1) * sizeof *pp) : NULL;
  if (pp == NULL) {
    kafka_od_answer(kr, KAFKA_ERR_UNKNOWN_SERVER, NULL);
    return;
  }
  cairn__client__reset_offsets_request__init(r);
  r->group = kafka_gop_str(op, group);
  r->delete_offsets = true;
  if (r->group == NULL || r->group[0] == '\0') {
    kafka_od_answer(kr, KAFKA_ERR_INVALID_GROUP_ID, NULL);
    return;
  }
  bool ok = true;
  rd->pos = at;
  size_t k = 0;
  for (int32_t t = 0; ok && t < nt; t++) {
    char *topic = kafka_gop_str(op, kafka_get_string(rd));
    int32_t np = kafka_get_array_len(rd, 4);
    for (int32_t i = 0; i < np; i++, k++) {
      int32_t p = kafka_get_i32(rd);
      cairn__client__offset_commit_partition__init(&pv[k]);
      pv[k].topic = topic != NULL ? topic : "";
      pv[k].partition = p < 0 ? UINT32_MAX : (uint32_t)p; /* refused as unknown */
      pp[k] = &pv[k];
    }
    ok = topic != NULL;
  }
  if (!ok || total == 0) {
    /* a topic name holding a NUL; or nothing asked (the answer lists the
     * topics with no partition) */
    kafka_od_answer(kr, ok ? KAFKA_ERR_NONE : KAFKA_ERR_INVALID_REQUEST, NULL);
    return;
  }
  r->partitions = pp;
  r->n_partitions = total;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_RESET_OFFSETS_REQ;
  op->env.reset_offsets_req = r;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_RESET_OFFSETS, &op->env, NULL, 0, kafka_od_on_answer);
}
