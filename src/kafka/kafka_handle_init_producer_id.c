/* kafka_handle_init_producer_id.c - InitProducerId v0-1 for idempotent
 * producers: the native InitProducerId (a new id from the controller's
 * replicated counter, epoch 0; forwarded to the controller leader by any
 * node). A transactional id is refused: this slice has no transactions. */
#include "kafka/kafka_handlers.h"

#include <stdlib.h>

static void kafka_init_pid_answer(struct kafka_req *kr, int16_t err, int64_t id, int16_t epoch)
{
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_i32(&b, 0); /* throttle_time_ms */
  kafka_put_err(&b, err);
  kafka_put_i64(&b, id);
  kafka_put_i16(&b, epoch);
  kafka_req_respond(kr, &b);
}

static void kafka_init_pid_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                                     const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts; /* InitProducerId answers carry no payload */
  Cairn__Client__ErrorCode code = kafka_relay_error(env);
  const Cairn__Client__InitProducerIdResponse *r =
      env != NULL && env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_INIT_PRODUCER_ID_RESP
          ? env->init_producer_id_resp
          : NULL;
  if (code == CAIRN__CLIENT__ERROR_CODE__OK && r != NULL && r->error != NULL) {
    code = r->error->code;
  }
  if (code != CAIRN__CLIENT__ERROR_CODE__OK || r == NULL) {
    kafka_init_pid_answer(kr, kafka_err_from_wire(code != 0 ? code : 1), -1, -1);
    return;
  }
  if (r->producer_id > INT64_MAX || r->producer_epoch > INT16_MAX) {
    kafka_init_pid_answer(kr, KAFKA_ERR_UNKNOWN_SERVER, -1, -1); /* not expressible in Kafka */
    return;
  }
  kafka_init_pid_answer(kr, KAFKA_ERR_NONE, (int64_t)r->producer_id, (int16_t)r->producer_epoch);
}

struct kafka_init_pid_op {
  Cairn__Client__Envelope env;
  Cairn__Client__InitProducerIdRequest ir;
};

void kafka_handle_init_producer_id(struct kafka_req *kr)
{
  struct kafka_str tid = kafka_get_string(&kr->body);
  (void)kafka_get_i32(&kr->body); /* transaction_timeout_ms */
  if (kr->body.err != 0) {
    kafka_init_pid_answer(kr, KAFKA_ERR_INVALID_REQUEST, -1, -1);
    return;
  }
  if (tid.ptr != NULL) {
    kafka_init_pid_answer(kr, KAFKA_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1);
    return;
  }
  struct kafka_init_pid_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    kafka_init_pid_answer(kr, KAFKA_ERR_UNKNOWN_SERVER, -1, -1);
    return;
  }
  kr->op = op;
  kr->op_free = free;
  cairn__client__envelope__init(&op->env);
  cairn__client__init_producer_id_request__init(&op->ir);
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_INIT_PRODUCER_ID_REQ;
  op->env.init_producer_id_req = &op->ir;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_INIT_PRODUCER_ID, &op->env, NULL, 0,
                  kafka_init_pid_on_answer);
}
