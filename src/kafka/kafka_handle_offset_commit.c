/* kafka_handle_offset_commit.c - OffsetCommit v2-7: the native
 * OffsetCommit (member and generation checked, the offsets appended to the
 * group's __cairn_offsets partition and answered once committed), one
 * answer per requested partition in the request's order.
 * retention_time_ms (v2-4) and committed_leader_epoch (v6) are read and
 * ignored; group_instance_id (v7) is a static member's (group.h); a null
 * metadata is "". */
#include "kafka/kafka_handlers.h"

#include <stdlib.h>
#include <string.h>

#define KAFKA_OC_MAX_PARTITIONS 10000

struct kafka_oc_part {
  struct kafka_str topic;
  int32_t partition;
  int16_t err;   /* refused here, before the native request */
  size_t native; /* index in the native request */
};

struct kafka_oc_state {
  struct kafka_oc_part *parts; /* owned by the gop */
  size_t n;
};

static void kafka_oc_answer(struct kafka_req *kr, const struct kafka_oc_state *st, int16_t all,
                            const Cairn__Client__OffsetCommitResponse *r)
{
  struct kafka_buf b;
  kafka_buf_init(&b);
  if (kr->h.api_version >= 3) {
    kafka_put_i32(&b, 0); /* throttle_time_ms */
  }
  /* Topics in request order; a topic named twice in a row is one entry. */
  size_t at = kafka_buf_reserve(&b, 4);
  int32_t ntopics = 0;
  for (size_t i = 0; i < st->n;) {
    size_t j = i;
    while (j < st->n && st->parts[j].topic.len == st->parts[i].topic.len &&
           (st->parts[i].topic.len == 0 ||
            memcmp(st->parts[j].topic.ptr, st->parts[i].topic.ptr, st->parts[i].topic.len) == 0)) {
      j++;
    }
    kafka_put_kstr(&b, st->parts[i].topic);
    kafka_put_array_len(&b, (int32_t)(j - i));
    for (size_t k = i; k < j; k++) {
      const struct kafka_oc_part *p = &st->parts[k];
      int16_t err = p->err;
      if (err == 0) {
        err = all;
      }
      if (err == 0 && r != NULL && p->native < r->n_partitions &&
          r->partitions[p->native]->error != NULL) {
        Cairn__Client__ErrorCode code = r->partitions[p->native]->error->code;
        err = code == CAIRN__CLIENT__ERROR_CODE__REQUEST_TOO_LARGE
                  ? KAFKA_ERR_OFFSET_METADATA_TOO_LARGE
              : code == CAIRN__CLIENT__ERROR_CODE__AUTHORIZATION_FAILED
                  ? KAFKA_ERR_TOPIC_AUTHORIZATION_FAILED
                  : kafka_group_err(code);
      }
      kafka_put_i32(&b, p->partition);
      kafka_put_err(&b, err);
    }
    ntopics++;
    i = j;
  }
  kafka_buf_set_i32(&b, at, ntopics);
  kafka_req_respond(kr, &b);
}

static void kafka_oc_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct kafka_gop *op = kr->op;
  const struct kafka_oc_state *st = op->blocks[0];
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_OFFSET_COMMIT_RESP);
  const Cairn__Client__OffsetCommitResponse *r =
      code == CAIRN__CLIENT__ERROR_CODE__OK ? env->offset_commit_resp : NULL;
  kafka_oc_answer(kr, st, kafka_group_err(code), code == CAIRN__CLIENT__ERROR_CODE__OK ? r : NULL);
}

void kafka_handle_offset_commit(struct kafka_req *kr)
{
  int16_t v = kr->h.api_version;
  struct kafka_reader *rd = &kr->body;
  struct kafka_gop *op = kafka_gop_new(kr);
  /* blocks[0]: the state, so the answer finds it */
  struct kafka_oc_state *st = op != NULL ? kafka_gop_alloc(op, sizeof *st) : NULL;
  Cairn__Client__OffsetCommitRequest *r = st != NULL ? kafka_gop_alloc(op, sizeof *r) : NULL;
  if (r == NULL) {
    kafka_req_malformed(kr); /* no memory: nothing better to say */
    return;
  }
  cairn__client__offset_commit_request__init(r);
  struct kafka_str group = kafka_get_string(rd);
  int32_t generation = kafka_get_i32(rd);
  struct kafka_str member = kafka_get_string(rd);
  struct kafka_str instance = v >= 7 ? kafka_get_string(rd) : (struct kafka_str){NULL, 0};
  if (v <= 4) {
    (void)kafka_get_i64(rd); /* retention_time_ms */
  }
  int32_t nt = kafka_get_array_len(rd, 6);
  /* First pass: count. */
  size_t at = rd->pos;
  size_t total = 0;
  for (int32_t t = 0; rd->err == 0 && t < nt; t++) {
    (void)kafka_get_string(rd);
    int32_t np = kafka_get_array_len(rd, 14);
    for (int32_t i = 0; rd->err == 0 && i < np; i++) {
      (void)kafka_get_i32(rd);
      (void)kafka_get_i64(rd);
      if (v >= 6) {
        (void)kafka_get_i32(rd);
      }
      (void)kafka_get_string(rd);
      total++;
    }
  }
  if (rd->err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  st->parts = kafka_gop_alloc(op, (total + 1) * sizeof *st->parts);
  Cairn__Client__OffsetCommitPartition *pv =
      st->parts != NULL ? kafka_gop_alloc(op, (total + 1) * sizeof *pv) : NULL;
  Cairn__Client__OffsetCommitPartition **pp =
      pv != NULL ? kafka_gop_alloc(op, (total + 1) * sizeof *pp) : NULL;
  r->group = kafka_gop_str(op, group);
  r->member_id = kafka_gop_str(op, member);
  r->group_instance_id = kafka_gop_str(op, instance);
  r->generation = generation;
  if (pp == NULL || r->group == NULL || r->member_id == NULL || r->group_instance_id == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  int16_t all = total > KAFKA_OC_MAX_PARTITIONS ? KAFKA_ERR_INVALID_REQUEST : KAFKA_ERR_NONE;
  rd->pos = at;
  size_t k = 0;
  for (int32_t t = 0; t < nt; t++) {
    struct kafka_str topic = kafka_get_string(rd);
    char *name = kafka_gop_str(op, topic);
    int32_t np = kafka_get_array_len(rd, 14);
    for (int32_t i = 0; i < np; i++) {
      struct kafka_oc_part *p = &st->parts[st->n++];
      p->topic = topic;
      p->partition = kafka_get_i32(rd);
      int64_t offset = kafka_get_i64(rd);
      if (v >= 6) {
        (void)kafka_get_i32(rd); /* committed_leader_epoch */
      }
      struct kafka_str md = kafka_get_string(rd);
      char *mds = kafka_gop_str(op, md);
      if (name == NULL || mds == NULL) {
        p->err = KAFKA_ERR_INVALID_REQUEST;
        continue;
      }
      if (p->partition < 0) {
        p->err = KAFKA_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        continue;
      }
      if (all != 0) {
        continue;
      }
      cairn__client__offset_commit_partition__init(&pv[k]);
      pv[k].topic = name;
      pv[k].partition = (uint32_t)p->partition;
      pv[k].offset = offset;
      pv[k].metadata = mds;
      pp[k] = &pv[k];
      p->native = k++;
    }
  }
  if (all != 0 || k == 0) {
    kafka_oc_answer(kr, st, all, NULL);
    return;
  }
  r->partitions = pp;
  r->n_partitions = k;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_OFFSET_COMMIT_REQ;
  op->env.offset_commit_req = r;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_OFFSET_COMMIT, &op->env, NULL, 0, kafka_oc_on_answer);
}
