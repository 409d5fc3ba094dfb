/* kafka_handlers.h - the Kafka port's request handlers, one file per API
 * (kafka_handle_<api>.c), reached through one table (kafka_dispatch.c).
 *
 * A handler decodes the Kafka request, calls the broker core and encodes
 * the Kafka answer. The core it calls is the one the native port uses:
 * each handler builds the native request (the protobuf-c structs, in
 * memory, never packed) and runs it through the native dispatch as a
 * relayed request (conn_request_relay): authorization, forwarding to the
 * controller leader, produce into the partition's Raft group, long-polling
 * fetches, and cancellation all happen exactly as for a native client.
 * The native answer comes back to kafka_relay_fn and is encoded for Kafka.
 *
 * Every kafka_req is finished exactly once, by kafka_req_respond or
 * kafka_req_finish_silent, after its relayed request (if any) has called
 * back: the Kafka request then keeps the conn allocated while the relayed
 * one runs.
 *
 * Context: loop thread only. */
#ifndef CAIRN_KAFKA_HANDLERS_H
#define CAIRN_KAFKA_HANDLERS_H

#include "kafka/kafka_codec.h"
#include "kafka/kafka_conn.h"
#include "net/conn.h"
#include "server/node.h"

#include <stdbool.h>
#include <stdint.h>

/* Kafka's error codes used here (Apache Kafka's Errors.java). */
enum kafka_error {
  KAFKA_ERR_UNKNOWN_SERVER = -1,
  KAFKA_ERR_NONE = 0,
  KAFKA_ERR_OFFSET_OUT_OF_RANGE = 1,
  KAFKA_ERR_CORRUPT_MESSAGE = 2,
  KAFKA_ERR_UNKNOWN_TOPIC_OR_PARTITION = 3,
  KAFKA_ERR_LEADER_NOT_AVAILABLE = 5,
  KAFKA_ERR_NOT_LEADER_OR_FOLLOWER = 6,
  KAFKA_ERR_REQUEST_TIMED_OUT = 7,
  KAFKA_ERR_REPLICA_NOT_AVAILABLE = 9,
  KAFKA_ERR_MESSAGE_TOO_LARGE = 10,
  KAFKA_ERR_OFFSET_METADATA_TOO_LARGE = 12,
  KAFKA_ERR_COORDINATOR_LOAD_IN_PROGRESS = 14,
  KAFKA_ERR_COORDINATOR_NOT_AVAILABLE = 15,
  KAFKA_ERR_NOT_COORDINATOR = 16,
  KAFKA_ERR_INVALID_TOPIC = 17,
  KAFKA_ERR_INVALID_REQUIRED_ACKS = 21,
  KAFKA_ERR_ILLEGAL_GENERATION = 22,
  KAFKA_ERR_INCONSISTENT_GROUP_PROTOCOL = 23,
  KAFKA_ERR_INVALID_GROUP_ID = 24,
  KAFKA_ERR_UNKNOWN_MEMBER_ID = 25,
  KAFKA_ERR_REBALANCE_IN_PROGRESS = 27,
  KAFKA_ERR_TOPIC_AUTHORIZATION_FAILED = 29,
  KAFKA_ERR_GROUP_AUTHORIZATION_FAILED = 30,
  KAFKA_ERR_CLUSTER_AUTHORIZATION_FAILED = 31,
  KAFKA_ERR_UNSUPPORTED_SASL_MECHANISM = 33,
  KAFKA_ERR_ILLEGAL_SASL_STATE = 34,
  KAFKA_ERR_UNSUPPORTED_VERSION = 35,
  KAFKA_ERR_TOPIC_ALREADY_EXISTS = 36,
  KAFKA_ERR_INVALID_PARTITIONS = 37,
  KAFKA_ERR_INVALID_REPLICATION_FACTOR = 38,
  KAFKA_ERR_INVALID_CONFIG = 40,
  KAFKA_ERR_NOT_CONTROLLER = 41,
  KAFKA_ERR_INVALID_REQUEST = 42,
  KAFKA_ERR_POLICY_VIOLATION = 44,
  KAFKA_ERR_OUT_OF_ORDER_SEQUENCE = 45,
  KAFKA_ERR_INVALID_PRODUCER_EPOCH = 47,
  KAFKA_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53,
  KAFKA_ERR_KAFKA_STORAGE_ERROR = 56,
  KAFKA_ERR_SASL_AUTHENTICATION_FAILED = 58,
  KAFKA_ERR_UNKNOWN_PRODUCER_ID = 59,
  KAFKA_ERR_NON_EMPTY_GROUP = 68,
  KAFKA_ERR_GROUP_ID_NOT_FOUND = 69,
  KAFKA_ERR_FETCH_SESSION_ID_NOT_FOUND = 70,
  KAFKA_ERR_UNSUPPORTED_COMPRESSION_TYPE = 76,
  KAFKA_ERR_FENCED_INSTANCE_ID = 82,
};

/* Kafka api keys of this slice. */
enum kafka_api {
  KAFKA_API_PRODUCE = 0,
  KAFKA_API_FETCH = 1,
  KAFKA_API_LIST_OFFSETS = 2,
  KAFKA_API_METADATA = 3,
  KAFKA_API_OFFSET_COMMIT = 8,
  KAFKA_API_OFFSET_FETCH = 9,
  KAFKA_API_FIND_COORDINATOR = 10,
  KAFKA_API_JOIN_GROUP = 11,
  KAFKA_API_HEARTBEAT = 12,
  KAFKA_API_LEAVE_GROUP = 13,
  KAFKA_API_SYNC_GROUP = 14,
  KAFKA_API_DESCRIBE_GROUPS = 15,
  KAFKA_API_LIST_GROUPS = 16,
  KAFKA_API_SASL_HANDSHAKE = 17,
  KAFKA_API_API_VERSIONS = 18,
  KAFKA_API_CREATE_TOPICS = 19,
  KAFKA_API_DELETE_TOPICS = 20,
  KAFKA_API_DELETE_RECORDS = 21,
  KAFKA_API_INIT_PRODUCER_ID = 22,
  KAFKA_API_DESCRIBE_ACLS = 29,
  KAFKA_API_CREATE_ACLS = 30,
  KAFKA_API_DELETE_ACLS = 31,
  KAFKA_API_DESCRIBE_CONFIGS = 32,
  KAFKA_API_ALTER_CONFIGS = 33,
  KAFKA_API_SASL_AUTHENTICATE = 36,
  KAFKA_API_CREATE_PARTITIONS = 37,
  KAFKA_API_DELETE_GROUPS = 42,
  KAFKA_API_INCREMENTAL_ALTER_CONFIGS = 44,
  KAFKA_API_OFFSET_DELETE = 47,
};

#define KAFKA_TOPIC_MAX 249 /* Kafka's topic name limit */

struct kafka_req;

/* The native answer of a relayed request: env NULL when the relay could
 * not start (no memory). Takes the parts (release each). */
typedef void (*kafka_relay_fn)(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts);

struct kafka_req {
  struct node *n;
  struct conn_request *req; /* the Kafka request on the conn */
  struct kafka_header h;
  struct kafka_reader body;   /* positioned at the body */
  size_t body_at;             /* where the body starts in body.p */
  struct conn_request *inner; /* the relayed native request in flight, NULL none */
  kafka_relay_fn on_answer;
  void *op; /* the handler's state, freed with op_free when kr is finished */
  void (*op_free)(void *op);
};

typedef void (*kafka_handler_fn)(struct kafka_req *kr);

/* Sends b's bytes as the answer body (after the correlation id) and
 * finishes kr. Always consumes kr and b's memory. A buffer that failed
 * (b->err) is logged and answered by closing the conn. */
void kafka_req_respond(struct kafka_req *kr, struct kafka_buf *b);

/* A request body that does not parse: logged, kr finished without an
 * answer and the conn closed (a Kafka client cannot match anything else
 * to it). Consumes kr. */
void kafka_req_malformed(struct kafka_req *kr);

/* Grows the array *arr (of *cap elements of elem bytes) to hold need:
 * the request's partition lists, whose count each handler bounds before
 * calling. Returns 0, or CAIRN_ENOMEM with *arr and *cap unchanged. */
__attribute__((warn_unused_result)) int kafka_reserve(void **arr, size_t *cap, size_t need,
                                                      size_t elem);

/* Finishes kr without an answer (Produce with acks 0), counted as
 * answered without error. Consumes kr. */
void kafka_req_finish_silent(struct kafka_req *kr);

/* Finishes kr without an answer and closes its conn (a client could not
 * match anything else to it), counted as CLOSED. Consumes kr. */
void kafka_req_close(struct kafka_req *kr);

/* Runs the native request env (borrowed, with payload, until fn fires) on
 * kr's conn through the native dispatch; fn(kr, answer) fires exactly
 * once, possibly before this returns: the caller must not touch kr after
 * calling this. */
void kafka_req_relay(struct kafka_req *kr, Cairn__Client__Api api, Cairn__Client__Envelope *env,
                     const uint8_t *payload, size_t payload_len, kafka_relay_fn fn);

/* A native answer's error code as Kafka's. */
int16_t kafka_err_from_wire(Cairn__Client__ErrorCode code);

/* kafka_err_from_wire for a request on the cluster resource (users,
 * ACLs): a refusal is CLUSTER_AUTHORIZATION_FAILED. */
int16_t kafka_cluster_err_from_wire(Cairn__Client__ErrorCode code);

/* The native answer's top-level error code when it is an error_resp (the
 * dispatch refused it), else OK. */
Cairn__Client__ErrorCode kafka_relay_error(const Cairn__Client__Envelope *env);

/* The outcome of a relayed native request whose answer body should be
 * want: the relay's refusal (kafka_relay_error), UNKNOWN for another body,
 * else the body's own error (OK when it has none). Borrows env (NULL:
 * UNKNOWN). */
Cairn__Client__ErrorCode kafka_relay_code(const Cairn__Client__Envelope *env,
                                          Cairn__Client__Envelope__BodyCase want);

/* The message of a relayed native answer's error (its refusal, or its
 * body's Error), NULL when it has none. Returns borrowed (valid while env
 * is). */
const char *kafka_relay_message(const Cairn__Client__Envelope *env);

/* Copies a Kafka string into dst[KAFKA_TOPIC_MAX + 1]; false when null,
 * empty, too long or holding a NUL. */
bool kafka_topic_name(struct kafka_str s, char *dst);

/* For an answer that echoes the name: kafka_topic_name, else what can be
 * echoed of s (its first KAFKA_TOPIC_MAX bytes, "" when null or holding a
 * NUL) in dst. Returns KAFKA_ERR_NONE or KAFKA_ERR_INVALID_TOPIC. */
int16_t kafka_topic_name_echo(struct kafka_str s, char *dst);

/* Reads a request's top-level array count (elements of at least min_elem
 * bytes on the wire, at most max of them) and allocates that many zeroed
 * elements of elem bytes in *out (owned: free()). Returns the count (0 for
 * a null array), or -1 for a malformed or too large count, or no memory:
 * the caller then answers with kafka_req_malformed. */
int32_t kafka_get_array_alloc(struct kafka_reader *r, size_t min_elem, int32_t max, size_t elem,
                              void **out);

/* ---- what the consumer-group handlers share (kafka_group.c) ---- */

/* A handler's native request memory: every block is freed with the op
 * (kr->op), when kr is finished. */
struct kafka_gop {
  Cairn__Client__Envelope env;
  void **blocks; /* owned */
  size_t nblocks, cap;
};

/* A new op owned by kr (kr->op, freed with it). Returns NULL when out of
 * memory. */
struct kafka_gop *kafka_gop_new(struct kafka_req *kr);

/* size zeroed bytes owned by op, or NULL. */
void *kafka_gop_alloc(struct kafka_gop *op, size_t size);

/* s as a NUL-terminated copy owned by op ("" for null), or NULL when out of
 * memory or s holds a NUL. */
char *kafka_gop_str(struct kafka_gop *op, struct kafka_str s);

/* A member's group_instance_id as Kafka writes it: null for a dynamic
 * member (the native "", or NULL). */
const char *kafka_instance_or_null(const char *instance_id);

/* A group's native state ("empty", "preparing", "completing", "storing",
 * "stable"; "" or NULL: none) as Kafka names it ("Empty",
 * "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"). Returns a
 * static string. */
const char *kafka_group_state(const char *s);

/* A consumer-group answer's native error code as Kafka's. */
int16_t kafka_group_err(Cairn__Client__ErrorCode code);

/* Answers kr with a body of only throttle_time_ms (v1 and later) and err:
 * Heartbeat's and LeaveGroup's answer. Context: the loop thread. */
void kafka_group_answer_err(struct kafka_req *kr, int16_t err);

/* Splits "host:port" or "[v6]:port" into host (cap bytes) and *port. */
bool kafka_addr_split(const char *addr, char *host, size_t cap, int32_t *port);

void kafka_handle_api_versions(struct kafka_req *kr);
void kafka_handle_metadata(struct kafka_req *kr);
void kafka_handle_produce(struct kafka_req *kr);
void kafka_handle_fetch(struct kafka_req *kr);
void kafka_handle_list_offsets(struct kafka_req *kr);
void kafka_handle_create_topics(struct kafka_req *kr);
void kafka_handle_init_producer_id(struct kafka_req *kr);
void kafka_handle_find_coordinator(struct kafka_req *kr);
void kafka_handle_join_group(struct kafka_req *kr);
void kafka_handle_sync_group(struct kafka_req *kr);
void kafka_handle_heartbeat(struct kafka_req *kr);
void kafka_handle_leave_group(struct kafka_req *kr);
void kafka_handle_offset_commit(struct kafka_req *kr);
void kafka_handle_offset_fetch(struct kafka_req *kr);
void kafka_handle_describe_groups(struct kafka_req *kr);
void kafka_handle_list_groups(struct kafka_req *kr);
void kafka_handle_delete_topics(struct kafka_req *kr);
void kafka_handle_describe_configs(struct kafka_req *kr);
void kafka_handle_delete_groups(struct kafka_req *kr);
void kafka_handle_create_partitions(struct kafka_req *kr);
void kafka_handle_alter_configs(struct kafka_req *kr);
void kafka_handle_incremental_alter_configs(struct kafka_req *kr);
void kafka_handle_describe_acls(struct kafka_req *kr);
void kafka_handle_create_acls(struct kafka_req *kr);
void kafka_handle_delete_acls(struct kafka_req *kr);
void kafka_handle_offset_delete(struct kafka_req *kr);
void kafka_handle_delete_records(struct kafka_req *kr);
void kafka_handle_sasl_handshake(struct kafka_req *kr);
void kafka_handle_sasl_authenticate(struct kafka_req *kr);

/* A conn's SASL step (conn.proto_state; kafka_handle_sasl.c). */
enum kafka_sasl_state {
  KAFKA_SASL_NONE = 0,  /* no exchange under way (authenticated or not) */
  KAFKA_SASL_RAW,       /* SCRAM-SHA-256 after SaslHandshake v0: the next frames are raw tokens */
  KAFKA_SASL_FRAMED,    /* SCRAM-SHA-256 after SaslHandshake v1: SaslAuthenticate requests */
  KAFKA_SASL_RAW_PLAIN, /* PLAIN (TLS only), as KAFKA_SASL_RAW */
  KAFKA_SASL_FRAMED_PLAIN, /* PLAIN (TLS only), as KAFKA_SASL_FRAMED */
  KAFKA_SASL_RAW_512,      /* SCRAM-SHA-512, as KAFKA_SASL_RAW */
  KAFKA_SASL_FRAMED_512,   /* SCRAM-SHA-512, as KAFKA_SASL_FRAMED */
};

/* Are the next frames of a conn in state s raw SASL tokens? */
static inline bool kafka_sasl_raw(int s)
{
  return s == KAFKA_SASL_RAW || s == KAFKA_SASL_RAW_PLAIN || s == KAFKA_SASL_RAW_512;
}

/* A frame on a conn in KAFKA_SASL_RAW: kr's body is the whole frame, a
 * SCRAM message without a request header (kr->h unset). Answered with a
 * raw token, or the conn closed on a refusal. Consumes kr. */
void kafka_sasl_raw_token(struct kafka_req *kr);

/* For ApiVersions: the table's entries, in api key order. */
struct kafka_api_range {
  int16_t api_key;
  int16_t min_version;
  int16_t max_version;
};
size_t kafka_api_ranges(const struct kafka_api_range **out);

#endif
