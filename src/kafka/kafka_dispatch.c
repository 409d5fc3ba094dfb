/* kafka_dispatch.c - the Kafka port: its listener, the one table from an
 * api key to its handler with the versions offered, and the plumbing every
 * handler shares (answers, relayed native requests, error mapping). */
#include "kafka/kafka_port.h"
#include "kafka/kafka_handlers.h"

#include "common/err.h"
#include "common/log.h"
#include "admin/metrics.h"
#include "kafka/kafka_bufpool.h"
#include "net/frame.h"
#include "server/config_value.h"
#include "server/handlers.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define KAFKA_LOG "kafka"
#define KAFKA_MAX_INFLIGHT 16 /* requests of one connection dispatched at once */

struct kafka_dispatch_entry {
  const char *name; /* Kafka's name of the api (metrics) */
  struct kafka_api_range range;
  int16_t flexible_from; /* first flexible version (request header v2); INT16_MAX none */
  kafka_handler_fn fn;
};

/* In api key order (ApiVersions lists it as is). One row per api. */
/* clang-format off */
static const struct kafka_dispatch_entry kafka_dispatch_table[] = {
    {"Produce", {KAFKA_API_PRODUCE, 3, 7}, INT16_MAX, kafka_handle_produce},
    {"Fetch", {KAFKA_API_FETCH, 4, 11}, INT16_MAX, kafka_handle_fetch},
    {"ListOffsets", {KAFKA_API_LIST_OFFSETS, 1, 3}, INT16_MAX, kafka_handle_list_offsets},
    {"Metadata", {KAFKA_API_METADATA, 0, 5}, INT16_MAX, kafka_handle_metadata},
    {"OffsetCommit", {KAFKA_API_OFFSET_COMMIT, 2, 7}, INT16_MAX, kafka_handle_offset_commit},
    {"OffsetFetch", {KAFKA_API_OFFSET_FETCH, 1, 7}, 6, kafka_handle_offset_fetch},
    {"FindCoordinator", {KAFKA_API_FIND_COORDINATOR, 0, 2}, INT16_MAX, kafka_handle_find_coordinator},
    {"JoinGroup", {KAFKA_API_JOIN_GROUP, 0, 5}, INT16_MAX, kafka_handle_join_group},
    {"Heartbeat", {KAFKA_API_HEARTBEAT, 0, 3}, INT16_MAX, kafka_handle_heartbeat},
    {"LeaveGroup", {KAFKA_API_LEAVE_GROUP, 0, 3}, INT16_MAX, kafka_handle_leave_group},
    {"SyncGroup", {KAFKA_API_SYNC_GROUP, 0, 3}, INT16_MAX, kafka_handle_sync_group},
    {"DescribeGroups", {KAFKA_API_DESCRIBE_GROUPS, 0, 4}, INT16_MAX, kafka_handle_describe_groups},
    {"ListGroups", {KAFKA_API_LIST_GROUPS, 0, 4}, 3, kafka_handle_list_groups},
    {"SaslHandshake", {KAFKA_API_SASL_HANDSHAKE, 0, 1}, INT16_MAX, kafka_handle_sasl_handshake},
    {"ApiVersions", {KAFKA_API_API_VERSIONS, 0, 3}, 3, kafka_handle_api_versions},
    {"CreateTopics", {KAFKA_API_CREATE_TOPICS, 0, 4}, INT16_MAX, kafka_handle_create_topics},
    {"DeleteTopics", {KAFKA_API_DELETE_TOPICS, 0, 3}, INT16_MAX, kafka_handle_delete_topics},
    {"DeleteRecords", {KAFKA_API_DELETE_RECORDS, 0, 2}, 2, kafka_handle_delete_records},
    {"InitProducerId", {KAFKA_API_INIT_PRODUCER_ID, 0, 1}, INT16_MAX, kafka_handle_init_producer_id},
    {"DescribeConfigs", {KAFKA_API_DESCRIBE_CONFIGS, 0, 2}, INT16_MAX, kafka_handle_describe_configs},
    {"AlterConfigs", {KAFKA_API_ALTER_CONFIGS, 0, 1}, INT16_MAX, kafka_handle_alter_configs},
    {"SaslAuthenticate", {KAFKA_API_SASL_AUTHENTICATE, 0, 1}, INT16_MAX, kafka_handle_sasl_authenticate},
    {"CreatePartitions", {KAFKA_API_CREATE_PARTITIONS, 0, 1}, INT16_MAX, kafka_handle_create_partitions},
    {"DeleteGroups", {KAFKA_API_DELETE_GROUPS, 0, 1}, INT16_MAX, kafka_handle_delete_groups},
    {"DescribeAcls", {KAFKA_API_DESCRIBE_ACLS, 0, 1}, INT16_MAX, kafka_handle_describe_acls},
    {"CreateAcls", {KAFKA_API_CREATE_ACLS, 0, 1}, INT16_MAX, kafka_handle_create_acls},
    {"DeleteAcls", {KAFKA_API_DELETE_ACLS, 0, 1}, INT16_MAX, kafka_handle_delete_acls},
    {"IncrementalAlterConfigs", {KAFKA_API_INCREMENTAL_ALTER_CONFIGS, 0, 1}, 1, kafka_handle_incremental_alter_configs},
    {"OffsetDelete", {KAFKA_API_OFFSET_DELETE, 0, 0}, INT16_MAX, kafka_handle_offset_delete},
};
/* clang-format on */
#define KAFKA_NAPIS (sizeof kafka_dispatch_table / sizeof kafka_dispatch_table[0])

size_t kafka_api_ranges(const struct kafka_api_range **out)
{
  static struct kafka_api_range ranges[KAFKA_NAPIS];
  for (size_t i = 0; i < KAFKA_NAPIS; i++) {
    ranges[i] = kafka_dispatch_table[i].range;
    /* Produce is listed from version 0 though only 3 and up are served,
     * as Apache Kafka 4.0 lists it (KAFKA-18659): librdkafka 2.0.2 (and
     * the releases around it) compresses with gzip, snappy or lz4 only
     * when the broker's Produce versions overlap [0, 0], and sends its
     * batches plain otherwise (its issue #4956).
     * Clients send the highest version both sides know (7 here); one that
     * sends 0-2 is answered UNSUPPORTED_VERSION, as by Kafka 4.0. */
    if (ranges[i].api_key == KAFKA_API_PRODUCE) {
      ranges[i].min_version = 0;
    }
  }
  *out = ranges;
  return KAFKA_NAPIS;
}

/* ---- finishing a request ---- */

/* Finishes req unanswered and closes its conn, in that order of effect but
 * closing first: conn_finish_unanswered() frees a closing conn whose last
 * request req was (an answer that came back after the client left), so
 * the conn must not be touched after it. */
static void kafka_finish_and_close(struct conn_request *req)
{
  conn_close(req->c);
  conn_finish_unanswered(req);
}

static void kafka_req_free(struct kafka_req *kr)
{
  if (kr->op_free != NULL) {
    kr->op_free(kr->op);
  }
  free(kr);
}

static void kafka_on_sent(void *arg, int status)
{
  (void)status;
  kafka_bufpool_put(arg);
}

/* Counts a request in the node's metrics (metrics_kafka_request). */
static void kafka_count(struct node *n, const struct conn_request *req, int api_key, bool answered,
                        int code)
{
  uint64_t now = uv_hrtime();
  uint64_t us = now > req->arrival_ns ? (now - req->arrival_ns) / 1000 : 0;
  metrics_kafka_request(&n->metrics, api_key, answered, code, us);
}

void kafka_req_respond(struct kafka_req *kr, struct kafka_buf *b)
{
  struct conn_request *req = kr->req;
  kafka_count(kr->n, req, kr->h.api_key, b->err == 0, b->first_err);
  if (b->err != 0) {
    struct conn *c = req->c;
    log_warn(KAFKA_LOG, "conn %" PRIu64 " %s: answer to api %d v%d not encoded: %s; closing", c->id,
             c->peer, kr->h.api_key, kr->h.api_version, cairn_strerror(b->err));
    kafka_buf_free(b);
    kafka_req_free(kr);
    kafka_finish_and_close(req);
    return;
  }
  struct conn_part part = {
      .kind = CONN_PART_MEM, .base = b->p, .len = b->len, .release = kafka_on_sent, .arg = b->p};
  b->p = NULL; /* the part owns it */
  kafka_buf_free(b);
  kafka_req_free(kr);
  conn_respond_bytes(req, &part, 1);
}

int kafka_reserve(void **arr, size_t *cap, size_t need, size_t elem)
{
  if (need <= *cap) {
    return 0;
  }
  void *grown = realloc(*arr, need * elem);
  if (grown == NULL) {
    return CAIRN_ENOMEM;
  }
  *arr = grown;
  *cap = need;
  return 0;
}

void kafka_req_malformed(struct kafka_req *kr)
{
  struct conn *c = kr->req->c;
  log_warn(KAFKA_LOG, "conn %" PRIu64 " %s: api %d v%d: the body does not parse (%s): closing",
           c->id, c->peer, kr->h.api_key, kr->h.api_version,
           cairn_strerror(kr->body.err != 0 ? kr->body.err : CAIRN_EBADREQUEST));
  kafka_req_close(kr);
}

void kafka_req_finish_silent(struct kafka_req *kr)
{
  struct conn_request *req = kr->req;
  kafka_count(kr->n, req, kr->h.api_key, true, KAFKA_ERR_NONE);
  kafka_req_free(kr);
  conn_finish_unanswered(req);
}

void kafka_req_close(struct kafka_req *kr)
{
  struct conn_request *req = kr->req;
  kafka_count(kr->n, req, kr->h.api_key, false, 0);
  kafka_req_free(kr);
  kafka_finish_and_close(req);
}

/* ---- relayed native requests ---- */

static void kafka_on_relayed(struct conn_request *inner, const Cairn__Client__Envelope *env,
                             const struct conn_part *parts, size_t nparts)
{
  struct kafka_req *kr = inner->relay_data;
  kr->inner = NULL;
  kr->on_answer(kr, env, parts, nparts);
}

static void kafka_on_cancel(struct conn_request *req)
{
  struct kafka_req *kr = req->handler_data;
  if (kr != NULL && kr->inner != NULL) {
    conn_request_cancel(kr->inner); /* its answer comes back, then kr finishes */
  }
}

void kafka_req_relay(struct kafka_req *kr, Cairn__Client__Api api, Cairn__Client__Envelope *env,
                     const uint8_t *payload, size_t payload_len, kafka_relay_fn fn)
{
  kr->on_answer = fn;
  env->api = api;
  env->api_version = 1;
  struct conn_request *inner =
      conn_request_relay(kr->req->c, api, env, payload, payload_len, kafka_on_relayed, kr);
  if (inner == NULL) {
    fn(kr, NULL, NULL, 0);
    return;
  }
  kr->inner = inner;
  dispatch_request(kr->n, inner);
}

Cairn__Client__ErrorCode kafka_relay_error(const Cairn__Client__Envelope *env)
{
  if (env == NULL) {
    return CAIRN__CLIENT__ERROR_CODE__UNKNOWN;
  }
  if (env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP && env->error_resp != NULL) {
    return env->error_resp->code;
  }
  return CAIRN__CLIENT__ERROR_CODE__OK;
}

Cairn__Client__ErrorCode kafka_relay_code(const Cairn__Client__Envelope *env,
                                          Cairn__Client__Envelope__BodyCase want)
{
  Cairn__Client__ErrorCode code = kafka_relay_error(env);
  if (code != CAIRN__CLIENT__ERROR_CODE__OK) {
    return code;
  }
  if (env->body_case != want) {
    return CAIRN__CLIENT__ERROR_CODE__UNKNOWN;
  }
  const Cairn__Client__Error *e = frame_body_error(env);
  return e != NULL ? e->code : CAIRN__CLIENT__ERROR_CODE__OK;
}

const char *kafka_relay_message(const Cairn__Client__Envelope *env)
{
  if (env == NULL) {
    return NULL;
  }
  const Cairn__Client__Error *e = env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP
                                      ? env->error_resp
                                      : frame_body_error(env);
  return e != NULL && e->message != NULL && e->message[0] != '\0' ? e->message : NULL;
}

int16_t kafka_err_from_wire(Cairn__Client__ErrorCode code)
{
  switch (code) {
  case CAIRN__CLIENT__ERROR_CODE__OK:
    return KAFKA_ERR_NONE;
  case CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST:
    return KAFKA_ERR_INVALID_REQUEST;
  case CAIRN__CLIENT__ERROR_CODE__UNSUPPORTED_VERSION:
  case CAIRN__CLIENT__ERROR_CODE__UNSUPPORTED_API:
    return KAFKA_ERR_UNSUPPORTED_VERSION;
  case CAIRN__CLIENT__ERROR_CODE__REQUEST_TOO_LARGE:
    return KAFKA_ERR_MESSAGE_TOO_LARGE;
  /* A stopping node is left as a stale leader would be: the client
   * refreshes its metadata and goes elsewhere. */
  case CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN:
  case CAIRN__CLIENT__ERROR_CODE__NOT_LEADER:
    return KAFKA_ERR_NOT_LEADER_OR_FOLLOWER;
  case CAIRN__CLIENT__ERROR_CODE__UNKNOWN_TOPIC:
  case CAIRN__CLIENT__ERROR_CODE__UNKNOWN_PARTITION:
    return KAFKA_ERR_UNKNOWN_TOPIC_OR_PARTITION;
  case CAIRN__CLIENT__ERROR_CODE__OFFSET_OUT_OF_RANGE:
    return KAFKA_ERR_OFFSET_OUT_OF_RANGE;
  case CAIRN__CLIENT__ERROR_CODE__TOPIC_EXISTS:
    return KAFKA_ERR_TOPIC_ALREADY_EXISTS;
  case CAIRN__CLIENT__ERROR_CODE__INVALID_TOPIC:
    return KAFKA_ERR_INVALID_TOPIC;
  case CAIRN__CLIENT__ERROR_CODE__INVALID_REPLICATION_FACTOR:
    return KAFKA_ERR_INVALID_REPLICATION_FACTOR;
  case CAIRN__CLIENT__ERROR_CODE__INVALID_PARTITIONS:
    return KAFKA_ERR_INVALID_PARTITIONS;
  /* Kafka refuses deleting or altering an internal topic as a matter of
   * authorization. */
  case CAIRN__CLIENT__ERROR_CODE__INTERNAL_TOPIC:
    return KAFKA_ERR_TOPIC_AUTHORIZATION_FAILED;
  case CAIRN__CLIENT__ERROR_CODE__INVALID_CONFIG:
    return KAFKA_ERR_INVALID_CONFIG;
  case CAIRN__CLIENT__ERROR_CODE__POLICY_VIOLATION:
    return KAFKA_ERR_POLICY_VIOLATION;
  case CAIRN__CLIENT__ERROR_CODE__CORRUPT_BATCH:
    return KAFKA_ERR_CORRUPT_MESSAGE;
  /* In doubt: the batch may be committed; a timeout makes the client retry,
   * which the idempotent producer table turns into no duplicate. */
  case CAIRN__CLIENT__ERROR_CODE__TIMEOUT:
  case CAIRN__CLIENT__ERROR_CODE__IN_DOUBT:
    return KAFKA_ERR_REQUEST_TIMED_OUT;
  case CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER:
    return KAFKA_ERR_NOT_CONTROLLER;
  case CAIRN__CLIENT__ERROR_CODE__STORAGE_ERROR:
    return KAFKA_ERR_KAFKA_STORAGE_ERROR;
  /* A new leader that has not applied its term's first entry yet: Kafka's
   * "election under way", which every client retries (kafka-python does
   * not retry REPLICA_NOT_AVAILABLE in ListOffsets). */
  case CAIRN__CLIENT__ERROR_CODE__REPLICA_NOT_AVAILABLE:
    return KAFKA_ERR_LEADER_NOT_AVAILABLE;
  case CAIRN__CLIENT__ERROR_CODE__OUT_OF_ORDER_SEQUENCE:
    return KAFKA_ERR_OUT_OF_ORDER_SEQUENCE;
  case CAIRN__CLIENT__ERROR_CODE__UNKNOWN_PRODUCER:
    return KAFKA_ERR_UNKNOWN_PRODUCER_ID;
  case CAIRN__CLIENT__ERROR_CODE__PRODUCER_FENCED:
    return KAFKA_ERR_INVALID_PRODUCER_EPOCH;
  case CAIRN__CLIENT__ERROR_CODE__AUTHORIZATION_FAILED:
    return KAFKA_ERR_TOPIC_AUTHORIZATION_FAILED;
  case CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_REQUIRED:
    return KAFKA_ERR_CLUSTER_AUTHORIZATION_FAILED;
  default:
    return KAFKA_ERR_UNKNOWN_SERVER;
  }
}

int16_t kafka_cluster_err_from_wire(Cairn__Client__ErrorCode code)
{
  if (code == CAIRN__CLIENT__ERROR_CODE__AUTHORIZATION_FAILED) {
    return KAFKA_ERR_CLUSTER_AUTHORIZATION_FAILED;
  }
  return kafka_err_from_wire(code);
}

bool kafka_topic_name(struct kafka_str s, char *dst)
{
  if (s.ptr == NULL || s.len == 0 || s.len > KAFKA_TOPIC_MAX || memchr(s.ptr, 0, s.len) != NULL) {
    return false;
  }
  memcpy(dst, s.ptr, s.len);
  dst[s.len] = '\0';
  return true;
}

int16_t kafka_topic_name_echo(struct kafka_str s, char *dst)
{
  if (kafka_topic_name(s, dst)) {
    return KAFKA_ERR_NONE;
  }
  size_t len = s.len > KAFKA_TOPIC_MAX ? KAFKA_TOPIC_MAX : s.len;
  if (s.ptr == NULL || memchr(s.ptr, 0, len) != NULL) {
    len = 0;
  }
  if (len > 0) {
    memcpy(dst, s.ptr, len);
  }
  dst[len] = '\0';
  return KAFKA_ERR_INVALID_TOPIC;
}

int32_t kafka_get_array_alloc(struct kafka_reader *r, size_t min_elem, int32_t max, size_t elem,
                              void **out)
{
  *out = NULL;
  int32_t n = kafka_get_array_len(r, min_elem);
  if (r->err != 0 || n > max) {
    return -1;
  }
  n = n < 0 ? 0 : n;
  *out = calloc(n > 0 ? (size_t)n : 1, elem);
  return *out != NULL ? n : -1;
}

/* ---- dispatch ---- */

static const struct kafka_dispatch_entry *kafka_dispatch_find(int key)
{
  for (size_t i = 0; i < KAFKA_NAPIS; i++) {
    if (kafka_dispatch_table[i].range.api_key == key) {
      return &kafka_dispatch_table[i];
    }
  }
  return NULL;
}

const char *kafka_api_name(int api_key)
{
  const struct kafka_dispatch_entry *e = kafka_dispatch_find(api_key);
  return e != NULL ? e->name : NULL;
}

/* Kafka's names of the error codes this port answers (Errors.java). */
static const struct {
  int16_t code;
  const char *name;
} kafka_err_names[] = {
    {KAFKA_ERR_UNKNOWN_SERVER, "UNKNOWN_SERVER_ERROR"},
    {KAFKA_ERR_NONE, "NONE"},
    {KAFKA_ERR_OFFSET_OUT_OF_RANGE, "OFFSET_OUT_OF_RANGE"},
    {KAFKA_ERR_CORRUPT_MESSAGE, "CORRUPT_MESSAGE"},
    {KAFKA_ERR_UNKNOWN_TOPIC_OR_PARTITION, "UNKNOWN_TOPIC_OR_PARTITION"},
    {KAFKA_ERR_LEADER_NOT_AVAILABLE, "LEADER_NOT_AVAILABLE"},
    {KAFKA_ERR_NOT_LEADER_OR_FOLLOWER, "NOT_LEADER_OR_FOLLOWER"},
    {KAFKA_ERR_REQUEST_TIMED_OUT, "REQUEST_TIMED_OUT"},
    {KAFKA_ERR_REPLICA_NOT_AVAILABLE, "REPLICA_NOT_AVAILABLE"},
    {KAFKA_ERR_MESSAGE_TOO_LARGE, "MESSAGE_TOO_LARGE"},
    {KAFKA_ERR_OFFSET_METADATA_TOO_LARGE, "OFFSET_METADATA_TOO_LARGE"},
    {KAFKA_ERR_COORDINATOR_LOAD_IN_PROGRESS, "COORDINATOR_LOAD_IN_PROGRESS"},
    {KAFKA_ERR_COORDINATOR_NOT_AVAILABLE, "COORDINATOR_NOT_AVAILABLE"},
    {KAFKA_ERR_NOT_COORDINATOR, "NOT_COORDINATOR"},
    {KAFKA_ERR_INVALID_TOPIC, "INVALID_TOPIC_EXCEPTION"},
    {KAFKA_ERR_INVALID_REQUIRED_ACKS, "INVALID_REQUIRED_ACKS"},
    {KAFKA_ERR_ILLEGAL_GENERATION, "ILLEGAL_GENERATION"},
    {KAFKA_ERR_INCONSISTENT_GROUP_PROTOCOL, "INCONSISTENT_GROUP_PROTOCOL"},
    {KAFKA_ERR_INVALID_GROUP_ID, "INVALID_GROUP_ID"},
    {KAFKA_ERR_UNKNOWN_MEMBER_ID, "UNKNOWN_MEMBER_ID"},
    {KAFKA_ERR_REBALANCE_IN_PROGRESS, "REBALANCE_IN_PROGRESS"},
    {KAFKA_ERR_TOPIC_AUTHORIZATION_FAILED, "TOPIC_AUTHORIZATION_FAILED"},
    {KAFKA_ERR_GROUP_AUTHORIZATION_FAILED, "GROUP_AUTHORIZATION_FAILED"},
    {KAFKA_ERR_CLUSTER_AUTHORIZATION_FAILED, "CLUSTER_AUTHORIZATION_FAILED"},
    {KAFKA_ERR_UNSUPPORTED_SASL_MECHANISM, "UNSUPPORTED_SASL_MECHANISM"},
    {KAFKA_ERR_ILLEGAL_SASL_STATE, "ILLEGAL_SASL_STATE"},
    {KAFKA_ERR_UNSUPPORTED_VERSION, "UNSUPPORTED_VERSION"},
    {KAFKA_ERR_TOPIC_ALREADY_EXISTS, "TOPIC_ALREADY_EXISTS"},
    {KAFKA_ERR_INVALID_PARTITIONS, "INVALID_PARTITIONS"},
    {KAFKA_ERR_INVALID_REPLICATION_FACTOR, "INVALID_REPLICATION_FACTOR"},
    {KAFKA_ERR_INVALID_CONFIG, "INVALID_CONFIG"},
    {KAFKA_ERR_NOT_CONTROLLER, "NOT_CONTROLLER"},
    {KAFKA_ERR_INVALID_REQUEST, "INVALID_REQUEST"},
    {KAFKA_ERR_OUT_OF_ORDER_SEQUENCE, "OUT_OF_ORDER_SEQUENCE_NUMBER"},
    {KAFKA_ERR_INVALID_PRODUCER_EPOCH, "INVALID_PRODUCER_EPOCH"},
    {KAFKA_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"},
    {KAFKA_ERR_KAFKA_STORAGE_ERROR, "KAFKA_STORAGE_ERROR"},
    {KAFKA_ERR_SASL_AUTHENTICATION_FAILED, "SASL_AUTHENTICATION_FAILED"},
    {KAFKA_ERR_UNKNOWN_PRODUCER_ID, "UNKNOWN_PRODUCER_ID"},
    {KAFKA_ERR_NON_EMPTY_GROUP, "NON_EMPTY_GROUP"},
    {KAFKA_ERR_GROUP_ID_NOT_FOUND, "GROUP_ID_NOT_FOUND"},
    {KAFKA_ERR_FETCH_SESSION_ID_NOT_FOUND, "FETCH_SESSION_ID_NOT_FOUND"},
    {KAFKA_ERR_UNSUPPORTED_COMPRESSION_TYPE, "UNSUPPORTED_COMPRESSION_TYPE"},
    {KAFKA_ERR_FENCED_INSTANCE_ID, "FENCED_INSTANCE_ID"},
};

const char *kafka_err_name(int code)
{
  for (size_t i = 0; i < sizeof kafka_err_names / sizeof kafka_err_names[0]; i++) {
    if (kafka_err_names[i].code == code) {
      return kafka_err_names[i].name;
    }
  }
  return NULL;
}

/* A known api at a version not offered: Kafka clients read the error code
 * right after the correlation id of ApiVersions; for the others the same
 * two bytes are the best a broker can say (Apache Kafka closes instead). */
static void kafka_unsupported_version(struct kafka_req *kr)
{
  struct kafka_buf b;
  kafka_buf_init(&b);
  if (kr->h.api_key == KAFKA_API_API_VERSIONS) {
    kafka_handle_api_versions(kr); /* answers v0 with UNSUPPORTED_VERSION */
    return;
  }
  kafka_put_err(&b, KAFKA_ERR_UNSUPPORTED_VERSION);
  kafka_req_respond(kr, &b);
}

static struct kafka_req *kafka_req_new(struct node *n, struct conn_request *req)
{
  struct conn *c = req->c;
  struct kafka_req *kr = calloc(1, sizeof *kr);
  if (kr == NULL) {
    log_warn(KAFKA_LOG, "conn %" PRIu64 " %s: out of memory: closing", c->id, c->peer);
    kafka_finish_and_close(req);
    return NULL;
  }
  kr->n = n;
  kr->req = req;
  req->handler_data = kr;
  conn_request_set_cancel(req, kafka_on_cancel);
  return kr;
}

/* With --auth required, what a conn without a principal may ask: Kafka's
 * own rule for a SASL listener (anything else closes the conn). */
static bool kafka_open_before_auth(int16_t key)
{
  return key == KAFKA_API_API_VERSIONS || key == KAFKA_API_SASL_HANDSHAKE ||
         key == KAFKA_API_SASL_AUTHENTICATE;
}

static void kafka_dispatch(struct conn_request *req, void *data)
{
  struct node *n = data;
  struct conn *c = req->c;
  if (kafka_sasl_raw(c->proto_state)) {
    /* after a SaslHandshake v0: a SCRAM message, no request header */
    struct kafka_req *kr = kafka_req_new(n, req);
    if (kr != NULL) {
      kr->h.api_key = KAFKA_API_SASL_AUTHENTICATE;
      kr->h.api_version = -1;
      kafka_reader_init(&kr->body, req->payload, req->payload_len);
      kafka_sasl_raw_token(kr);
    }
    return;
  }
  int16_t key, version;
  kafka_header_peek(req->payload, &key, &version);
  if (n->auth_required && c->principal[0] == '\0' && !kafka_open_before_auth(key)) {
    log_warn(KAFKA_LOG,
             "conn %" PRIu64 " %s: api %d v%d before SASL authentication, which this node "
             "requires (SCRAM-SHA-256 or -512; docs/kafka.md): closing",
             c->id, c->peer, key, version);
    kafka_count(n, req, key, false, 0);
    kafka_finish_and_close(req);
    return;
  }
  const struct kafka_dispatch_entry *e = kafka_dispatch_find(key);
  if (e == NULL) {
    log_warn(KAFKA_LOG, "conn %" PRIu64 " %s: unknown api key %d (version %d): closing", c->id,
             c->peer, key, version);
    kafka_count(n, req, key, false, 0);
    kafka_finish_and_close(req);
    return;
  }
  struct kafka_req *kr = kafka_req_new(n, req);
  if (kr == NULL) {
    return;
  }
  bool supported = version >= e->range.min_version && version <= e->range.max_version;
  /* An unsupported ApiVersions is answered from a v0 reading of the header
   * (Kafka's rule: the client may not know our flexible versions). */
  bool flexible = supported && version >= e->flexible_from;
  int rv = kafka_header_read(req->payload, req->payload_len, flexible, &kr->h, &kr->body);
  if (rv != 0) {
    log_warn(KAFKA_LOG, "conn %" PRIu64 " %s: api %d v%d: request header: %s: closing", c->id,
             c->peer, key, version, cairn_strerror(rv));
    kafka_req_close(kr);
    return;
  }
  kr->body_at = kr->body.pos;
  if (!supported) {
    log_debug(KAFKA_LOG, "conn %" PRIu64 " %s: api %d v%d not offered (%d-%d)", c->id, c->peer, key,
              version, e->range.min_version, e->range.max_version);
    kafka_unsupported_version(kr);
    return;
  }
  if (n->state != NODE_RUNNING) {
    kafka_req_close(kr);
    return;
  }
  e->fn(kr);
}

/* ---- the port ---- */

/* Apache Kafka handles a connection's requests one at a time, and clients
 * rely on the order of their effects (kafka-python commits, then leaves its
 * group; a SaslHandshake v0 turns the next frame into a raw token). Only
 * Produce overlaps here: the native produce path starts each partition's
 * Raft proposal as the request is dispatched, in arrival order, so a
 * producer's pipelined batches commit together and keep their order. */
static bool kafka_runs_alone(const struct conn_request *req)
{
  if (kafka_sasl_raw(req->c->proto_state) || req->payload_len < 4) {
    return true;
  }
  int16_t key, version;
  kafka_header_peek(req->payload, &key, &version);
  return key != KAFKA_API_PRODUCE;
}

/* kafka_conn_framing (the framing the lower layer knows) with the rule
 * above, which needs the protocol's API keys and SASL states. */
static struct conn_framing kafka_framing;

int kafka_port_start(struct node *n)
{
  n->kafka_on = false;
  if (config_addr_is_off(&n->cfg.kafka_listen)) {
    return 0;
  }
  /* A node with --tls-cert serves its Kafka port with TLS too (Kafka's
   * SSL and SASL_SSL), with the client port's context: one certificate,
   * one CA for client certificates, one SIGHUP reload. A plaintext Kafka
   * port beside a TLS client port would be a way around the TLS the
   * operator asked for. */
  struct listener_config lc = {.bind_address = n->cfg.kafka_listen.str,
                               .tls = n->tls,
                               .max_conns = n->cfg.max_connections,
                               .max_conns_per_ip = n->cfg.max_connections_per_ip,
                               .dispatch = kafka_dispatch,
                               .data = n};
  conn_limits_default(&lc.limits);
  lc.limits.max_frame_bytes = (uint32_t)n->cfg.max_frame_bytes;
  lc.limits.max_inflight_bytes = n->cfg.max_inflight_bytes;
  lc.limits.preauth_max_frame_bytes = n->auth_required ? CONN_PREAUTH_MAX_FRAME_BYTES : 0;
  /* Kafka answers each connection's requests in the order they came, and
   * clients match answers by that order: the framing holds an answer that
   * completes early (ordered_answers). Up to KAFKA_MAX_INFLIGHT produce
   * requests of a connection run at once, so that a client's pipelined
   * produces commit together rather than one Raft round trip after the
   * other; every other request runs alone, as in Apache Kafka
   * (kafka_runs_alone). */
  lc.limits.max_inflight_requests = KAFKA_MAX_INFLIGHT;
  lc.limits.idle_timeout_ms = n->cfg.idle_timeout_ms;
  lc.limits.frame_timeout_ms = n->cfg.frame_timeout_ms;
  lc.limits.budget = &n->request_budget; /* one budget for both ports */
  kafka_framing = kafka_conn_framing;
  kafka_framing.runs_alone = kafka_runs_alone;
  lc.limits.framing = &kafka_framing;
  int rv = listener_init(&n->kafka_lis, n->loop, &lc);
  if (rv != 0) {
    if (n->cfg.kafka_listen_default) {
      log_warn(KAFKA_LOG, "default Kafka port %s: %s: no Kafka port (give --kafka-listen)",
               n->cfg.kafka_listen.str, n->kafka_lis.errmsg);
      return 0;
    }
    int len = snprintf(n->errmsg, sizeof n->errmsg, "Kafka port %s: ", n->cfg.kafka_listen.str);
    if (len > 0 && (size_t)len < sizeof n->errmsg) {
      memcpy(n->errmsg + len, n->kafka_lis.errmsg,
             strnlen(n->kafka_lis.errmsg, sizeof n->errmsg - (size_t)len - 1));
      n->errmsg[len + strnlen(n->kafka_lis.errmsg, sizeof n->errmsg - (size_t)len - 1)] = '\0';
    }
    return rv;
  }
  n->kafka_on = true;
  if (n->cfg.kafka_listen.port == 0) {
    rv = config_set_bound_port(&n->cfg, CONFIG_KAFKA, (uint16_t)n->kafka_lis.port);
    if (rv != 0) {
      return rv;
    }
  }
  log_info(KAFKA_LOG, "Kafka port %s (advertised as %s)%s%s", n->cfg.kafka_listen.str,
           n->cfg.kafka_advertise.str, n->tls == NULL ? "" : ": TLS (SSL, SASL_SSL)",
           n->tls != NULL && n->cfg.tls_ca[0] != '\0' ? ", client certificates required" : "");
  return 0;
}

void kafka_port_close(struct node *n, void (*cb)(struct listener *l))
{
  if (!n->kafka_on) {
    cb(&n->kafka_lis);
    return;
  }
  kafka_bufpool_drain(); /* idle answer buffers; those in flight come back later */
  listener_close(&n->kafka_lis, cb);
}
