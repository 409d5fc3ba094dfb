/* cairn.h - libcairn, the C client library of Cairn: admin calls, a
 * producer and a consumer that find partition leaders by themselves.
 *
 * Two layers:
 *   - the asynchronous API (cairn_client_*, cairn_producer_*,
 *     cairn_consumer_*, the admin calls) runs on the caller's uv_loop_t;
 *   - the blocking API (cairn_sync_*) runs a private loop of its own until
 *     each call completes, for programs without a loop.
 *
 * The client's timer keeps the loop alive until cairn_client_close.
 *
 * Signals: a write to a node that just died raises SIGPIPE; if SIGPIPE
 * still has its default action (terminate) when a client is created,
 * cairn_client_new sets it to ignored. An application that installs its
 * own handler keeps it.
 *
 * Conventions (as libuv's):
 *   - every int-returning function returns 0 or a negative code: a
 *     CAIRN_E* code from <cairn/err.h> or a negative errno / UV_E* code
 *     passed through; cairn_strerror() names any of them;
 *   - Callback: a function that takes a callback and returns 0 calls it
 *     exactly once, later, from the loop (never from inside the call); if
 *     it returns an error the callback never fires. Objects being closed
 *     call pending callbacks with UV_ECANCELED;
 *   - Context: every function of the asynchronous API must be called from
 *     the thread running the loop the client was created on (callbacks run
 *     there too); cairn_strerror()/cairn_errname() and the *_init/_free
 *     helpers of plain structs work on any thread. A cairn_sync object
 *     belongs to one thread at a time.
 *   - Ownership words: "borrows" (used for the call only, or as stated),
 *     "returns owned (free with X)", "returns borrowed (valid until Y)".
 *
 * Leader discovery: every partition request goes to the partition's leader
 * from a metadata cache. NOT_LEADER follows the node's hint; a refused or
 * closed connection, a request timeout or an unknown leader refreshes the
 * metadata from any reachable node and retries after a backoff with jitter,
 * until the operation's deadline. Leader changes are seen by the
 * application as latency only.
 *
 * Deadlines: a produced message must be acknowledged within
 * delivery_timeout_ms of its send call, else its delivery callback gets
 * CAIRN_EDELIVERY_TIMEOUT (or the last error seen, when it is final). An
 * admin or ListOffsets call, retried the same way, must complete within
 * request_timeout_ms of the call. A client whose bootstrap nodes are all
 * unreachable fails calls with CAIRN_EUNREACHABLE at that deadline.
 */
#ifndef CAIRN_CAIRN_H
#define CAIRN_CAIRN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include <cairn/err.h> /* the error table: enum cairn_err, cairn_strerror() */

#ifdef __cplusplus
extern "C" {
#endif

#define CAIRN_VERSION_MAJOR 0
#define CAIRN_VERSION_MINOR 1

/* ------------------------------------------------------------------------
 * Plain data
 * ------------------------------------------------------------------------ */

#define CAIRN_PARTITION_ANY (-1)        /* let the partitioner choose */
#define CAIRN_TIMESTAMP_NOW INT64_MIN   /* stamp the message at send time */
#define CAIRN_OFFSET_LATEST (-1)        /* the high watermark: new records only */
#define CAIRN_OFFSET_EARLIEST (-2)      /* the log start */

/* One record header. key is required (key_len may be 0); value NULL is a
 * null value. */
struct cairn_header {
  const void *key;
  size_t key_len;
  const void *value;
  size_t value_len;
};

/* A message to produce. Initialize with cairn_message_init(), then set
 * fields. key NULL is a null key; value NULL a null value. */
struct cairn_message {
  const char *topic;
  int32_t partition;    /* CAIRN_PARTITION_ANY or 0..count-1 */
  const void *key;
  size_t key_len;
  const void *value;
  size_t value_len;
  const struct cairn_header *headers;
  size_t header_count;
  int64_t timestamp_ms; /* ms since the epoch, or CAIRN_TIMESTAMP_NOW */
};

/* Sets m to: no topic, CAIRN_PARTITION_ANY, null key and value, no
 * headers, CAIRN_TIMESTAMP_NOW. Context: any thread. */
void cairn_message_init(struct cairn_message *m);

/* One consumed record. Every pointer is borrowed from the library (valid
 * as the function that handed the record out says). key/value NULL means
 * null (an empty one has a non-NULL pointer and length 0). */
struct cairn_record {
  const char *topic;
  int32_t partition;
  int64_t offset;
  int64_t timestamp_ms;
  const void *key;
  size_t key_len;
  const void *value;
  size_t value_len;
  const struct cairn_header *headers;
  size_t header_count;
};

/* Compression of produced batches (docs/format.md: batch attributes bits
 * 0-2). The consumer decompresses whatever it receives. */
enum cairn_compression {
  CAIRN_COMPRESSION_NONE = 0,
  CAIRN_COMPRESSION_LZ4 = 1,  /* LZ4 frame format (liblz4) */
  CAIRN_COMPRESSION_ZSTD = 2, /* zstd frame format (libzstd) */
};

/* How a partition's start position or a ListOffsets query is given. */
enum cairn_offset_spec {
  CAIRN_OFFSET_SPEC_LATEST = 0,    /* the high watermark */
  CAIRN_OFFSET_SPEC_EARLIEST = 1,  /* the log start */
  CAIRN_OFFSET_SPEC_TIMESTAMP = 2, /* first offset with timestamp >= ts */
};

/* ------------------------------------------------------------------------
 * Client options and the client
 * ------------------------------------------------------------------------ */

struct cairn_options {
  const char *client_id;         /* sent in Hello; copied. Default "libcairn" */
  uint32_t request_timeout_ms;   /* one request's answer, and the deadline of
                                    admin/ListOffsets calls with retries. 30000 */
  uint32_t connect_timeout_ms;   /* TCP connect + Hello. 5000 */
  uint32_t delivery_timeout_ms;  /* a produced message, retries included. 120000 */
  uint32_t metadata_max_age_ms;  /* refresh the cache at least this often. 300000 */
  uint32_t retry_backoff_ms;     /* first retry delay. 100 */
  uint32_t retry_backoff_max_ms; /* delays double up to this. 1000 */
  /* Each delay is drawn uniformly from [0.8 d, 1.2 d] (jitter), d the
   * doubling delay above, capped at retry_backoff_max_ms. */
  /* TLS (nodes started with --tls-cert; docs/security.md). The files are
   * read by cairn_client_new; the strings are not kept. */
  int tls;                   /* nonzero: every connection speaks TLS 1.2+. 0 */
  const char *tls_ca_file;   /* PEM CAs the nodes' certificates must chain to;
                                NULL: the system's CAs. The certificate must also
                                name the host or IP address dialed */
  const char *tls_cert_file; /* PEM client certificate for mutual TLS, or NULL */
  const char *tls_key_file;  /* its private key (with tls_cert_file) */
  /* Authentication (nodes started with --auth required; docs/security.md):
   * every connection logs in with SCRAM-SHA-256 after Hello. Copied; NULL:
   * none. A refused login fails the connection with CAIRN_EAUTH. */
  const char *user;
  const char *password;
  /* Nonzero: cairn_client_ready (so cairn_sync_new) fails at once with
   * CAIRN_EUNREACHABLE once every address it tries refused the connection
   * (ECONNREFUSED: nothing listens there), rather than retrying until
   * request_timeout_ms. For command-line tools; a program that starts
   * with the cluster leaves it 0 and waits. 0 */
  int fail_fast_refused;
};

/* Fills o with the defaults listed above. Context: any thread. */
void cairn_options_init(struct cairn_options *o);

struct cairn_client;

/* Creates a client on loop from a bootstrap list "host:port[,host:port...]"
 * (any node of the cluster will do; the cluster's own addresses are learnt
 * from Metadata). Nothing is dialed until the first call needs it.
 * Ownership: borrows loop (it must outlive the client), bootstrap and o
 * (copied; o NULL = defaults); *out returns owned (close with
 * cairn_client_close). Returns 0, CAIRN_EINVAL (empty or malformed list,
 * e.g. a missing port), CAIRN_ETLS (o->tls and a CA, certificate or key
 * file that does not load) or CAIRN_ENOMEM. Context: the loop thread. */
__attribute__((warn_unused_result)) int cairn_client_new(uv_loop_t *loop, const char *bootstrap,
                                                         const struct cairn_options *o,
                                                         struct cairn_client **out);

typedef void (*cairn_client_close_cb)(struct cairn_client *c, void *data);

/* Closes the client: requests still pending call back with UV_ECANCELED,
 * connections and timers close, then cb fires (may be NULL) and the client
 * is freed. Producers and consumers on it must have been closed first
 * (their close callbacks fired); otherwise returns UV_EBUSY and nothing
 * happens. Returns 0, UV_EBUSY, or CAIRN_ECLOSED (already closing).
 * Context: the loop thread. */
int cairn_client_close(struct cairn_client *c, cairn_client_close_cb cb, void *data);

/* The loop the client runs on. Returns borrowed. */
uv_loop_t *cairn_client_loop(const struct cairn_client *c);

typedef void (*cairn_done_cb)(struct cairn_client *c, int status, const char *errmsg, void *data);

/* Fetches metadata from some bootstrap or known node, retrying until
 * request_timeout_ms (with fail_fast_refused: until every address refused
 * the connection once in a row): a connectivity check. cb gets 0, or
 * CAIRN_EUNREACHABLE / another code, with errmsg (borrowed for the
 * callback; "" on success) saying which addresses failed and why.
 * Callback: as at the top. Context: the loop thread. */
__attribute__((warn_unused_result)) int cairn_client_ready(struct cairn_client *c,
                                                           cairn_done_cb cb, void *data);

/* ------------------------------------------------------------------------
 * Admin calls (any node answers; creation and deletion go through the
 * controller leader, which the node forwards to; NOT_CONTROLLER while it
 * elects is retried within request_timeout_ms)
 * ------------------------------------------------------------------------ */

struct cairn_topic_config {
  int64_t retention_bytes;  /* 0: unlimited */
  int64_t retention_ms;     /* 0: unlimited */
  uint64_t segment_bytes;   /* 0: node default */
  uint32_t max_batch_bytes; /* 0: node default */
  char storage[16];         /* "file" or "postgresql"; "": file */
};

struct cairn_node_info {
  uint64_t id;
  char *client_address; /* host:port */
  char *cluster_address;
  char *admin_address;
  char *rack;
  char *state; /* "alive" | "dead" | "draining" | "removed" */
  bool has_database; /* the node has a PostgreSQL database (--pg-conninfo): it may host
                        replicas of postgresql topics */
};

/* A replica whose store failed: it stopped applying until the store is
 * back (a PostgreSQL store resumes by itself). */
struct cairn_store_failure {
  uint64_t node_id; /* the node holding the replica */
  char *reason;     /* the store's message, e.g. "postgresql: BEGIN: FATAL: ..." */
  uint64_t since_ms; /* wall clock (ms since 1970) of the failure; 0: not known */
};

struct cairn_partition_info {
  uint32_t partition;
  uint64_t leader_id; /* 0: none known */
  uint64_t leader_term;
  uint64_t *replicas; /* replicas[0] is the preferred leader */
  size_t replica_count;
  uint64_t *isr; /* in sync, as the leader sees them */
  size_t isr_count;
  int64_t log_start_offset; /* -1: unknown to the answering node */
  int64_t high_watermark;   /* -1: unknown to the answering node */
  struct cairn_store_failure *store_failures; /* every replica whose store failed, on any
                                                 node, by node id; NULL/0 when none */
  size_t store_failure_count;
};

struct cairn_topic_info {
  char *name;
  uint32_t topic_id;
  uint32_t partition_count;
  uint32_t replication_factor;
  struct cairn_topic_config config;
  struct cairn_partition_info *partitions; /* NULL/0 in cairn_list_topics */
  size_t partition_info_count;
};

struct cairn_topic_list {
  struct cairn_topic_info *topics;
  size_t count;
};

struct cairn_cluster_info {
  char *cluster_id;
  uint64_t controller_id; /* 0: none known */
  struct cairn_node_info *nodes;
  size_t node_count;
  struct cairn_topic_info *topics; /* with partitions */
  size_t topic_count;
};

/* Free what the admin calls return; NULL is fine. Context: any thread. */
void cairn_topic_info_free(struct cairn_topic_info *t);
void cairn_topic_list_free(struct cairn_topic_list *l);

/* ---- users of the client port (docs/security.md) ---- */

/* Names of the users, ascending. Free with cairn_user_list_free. */
struct cairn_user_list {
  char **names;
  size_t count;
};
void cairn_user_list_free(struct cairn_user_list *l);

typedef void (*cairn_user_list_cb)(struct cairn_client *c, int status, const char *errmsg,
                                   struct cairn_user_list *list, void *data);

/* Creates user name (1..64 of A-Z a-z 0-9 . _ @ -) or changes its password.
 * The SCRAM-SHA-256 and SCRAM-SHA-512 credentials are derived here with
 * one fresh salt; the password is never sent. cb gets 0 or a code (CAIRN_ENOT_CONTROLLER after
 * the retries, ...). Ownership: borrows name and password (not kept).
 * Returns 0 (cb fires exactly once), CAIRN_EINVAL (bad name, NULL
 * arguments), CAIRN_ECLOSED or CAIRN_ENOMEM. Context: the loop thread. */
__attribute__((warn_unused_result)) int cairn_user_set(struct cairn_client *c, const char *name,
                                                       const char *password, cairn_done_cb cb,
                                                       void *data);

/* Deletes user name: cb gets 0, CAIRN_EUNKNOWN_USER, or another code. As
 * cairn_user_set otherwise. */
__attribute__((warn_unused_result)) int cairn_user_delete(struct cairn_client *c, const char *name,
                                                          cairn_done_cb cb, void *data);

/* The users' names: cb gets 0 with a list (owned by cb: free with
 * cairn_user_list_free), or a code and NULL. */
__attribute__((warn_unused_result)) int cairn_list_users(struct cairn_client *c,
                                                         cairn_user_list_cb cb, void *data);

/* ---- access control entries (docs/security.md, "Authorization") ---- */

enum cairn_acl_resource { CAIRN_ACL_TOPIC = 1, CAIRN_ACL_GROUP = 2, CAIRN_ACL_CLUSTER = 3 };
enum cairn_acl_op {
  CAIRN_ACL_READ = 1,
  CAIRN_ACL_WRITE = 2,
  CAIRN_ACL_CREATE = 3,
  CAIRN_ACL_DELETE = 4,
  CAIRN_ACL_DESCRIBE = 5,
  CAIRN_ACL_ALTER = 6,
  CAIRN_ACL_ALL = 7 /* every operation: matches any (Kafka's ALL) */
};

/* One entry: principal may (allow) or may not (deny) do operation on a
 * resource; a deny wins over any allow. */
struct cairn_acl {
  const char *principal; /* "User:NAME", "User:ANONYMOUS", "Node:ID" or "*" */
  enum cairn_acl_resource resource_type;
  const char *resource; /* a name, or a prefix; "" or NULL for the cluster */
  bool prefix;          /* resource is a name prefix ("" with prefix: every one) */
  enum cairn_acl_op operation;
  bool allow; /* false: deny */
};

/* Entries, in the cluster's order; the strings belong to the list. Free
 * with cairn_acl_list_free (NULL is fine). */
struct cairn_acl_list {
  struct cairn_acl *entries;
  size_t count;
};
void cairn_acl_list_free(struct cairn_acl_list *l);

typedef void (*cairn_acl_list_cb)(struct cairn_client *c, int status, const char *errmsg,
                                  struct cairn_acl_list *list, void *data);

/* Adds entry a (an identical one already there: no change) or removes it
 * (CAIRN_EUNKNOWN_ACL when there is none). Any node forwards to the
 * controller leader. cb gets 0 or a code (CAIRN_EAUTHZ without ALTER on
 * the cluster, CAIRN_EBADREQUEST for an entry the node refuses, ...).
 * Ownership: borrows a and its strings (copied before return). Returns 0
 * (cb fires exactly once), CAIRN_EINVAL (NULL arguments, a principal or
 * resource longer than 255 bytes), CAIRN_ECLOSED or CAIRN_ENOMEM.
 * Context: the loop thread. */
__attribute__((warn_unused_result)) int cairn_acl_add(struct cairn_client *c,
                                                      const struct cairn_acl *a, cairn_done_cb cb,
                                                      void *data);
__attribute__((warn_unused_result)) int cairn_acl_remove(struct cairn_client *c,
                                                         const struct cairn_acl *a,
                                                         cairn_done_cb cb, void *data);

/* The entries matching the filters (principal and resource exactly, NULL
 * or "" any; resource_type 0 any): cb gets 0 with a list (owned by cb:
 * free with cairn_acl_list_free), or a code and NULL. As cairn_acl_add
 * otherwise. */
__attribute__((warn_unused_result)) int cairn_list_acls(struct cairn_client *c,
                                                        const char *principal,
                                                        int resource_type, const char *resource,
                                                        cairn_acl_list_cb cb, void *data);
void cairn_cluster_info_free(struct cairn_cluster_info *ci);

/* Result callbacks: status 0 with the result (returns owned: the callee
 * frees it with the matching *_free), or a code with result NULL and
 * errmsg (borrowed for the callback) saying what the node or the client
 * found. */
typedef void (*cairn_topic_cb)(struct cairn_client *c, int status, const char *errmsg,
                               struct cairn_topic_info *t, void *data);
typedef void (*cairn_topic_list_cb)(struct cairn_client *c, int status, const char *errmsg,
                                    struct cairn_topic_list *l, void *data);
typedef void (*cairn_cluster_cb)(struct cairn_client *c, int status, const char *errmsg,
                                 struct cairn_cluster_info *ci, void *data);
typedef void (*cairn_offset_cb)(struct cairn_client *c, int status, const char *errmsg,
                                int64_t offset, int64_t timestamp_ms, void *data);

/* Creates a topic. config may be NULL (all defaults). cb gets 0,
 * CAIRN_ETOPIC_EXISTS, CAIRN_EINVALID_TOPIC_NAME, CAIRN_EINVALID_RF,
 * CAIRN_EINVALID_PARTITIONS, CAIRN_ENOT_CONTROLLER (none elected within
 * the deadline), CAIRN_EUNREACHABLE, ... Ownership: borrows name and config
 * for the call. Callback, context: as at the top. */
__attribute__((warn_unused_result)) int cairn_create_topic(struct cairn_client *c, const char *name,
                                                           uint32_t partitions,
                                                           uint32_t replication_factor,
                                                           const struct cairn_topic_config *config,
                                                           cairn_done_cb cb, void *data);

/* Deletes a topic; cb gets 0 or CAIRN_EUNKNOWN_TOPIC, ... */
__attribute__((warn_unused_result)) int cairn_delete_topic(struct cairn_client *c, const char *name,
                                                           cairn_done_cb cb, void *data);

/* Grows a topic to `partitions` partitions in all (a total, as Kafka's
 * CreatePartitions and rpk take it; partitions are never removed): cb gets
 * 0, CAIRN_EINVALID_PARTITIONS for a count not above the current one,
 * CAIRN_EUNKNOWN_TOPIC, CAIRN_EINTERNAL_TOPIC, ... The new partitions are
 * placed like a new topic's, with the topic's replication factor; like a
 * created topic's, they may need a moment to elect leaders. Borrows name
 * for the call. */
__attribute__((warn_unused_result)) int cairn_add_partitions(struct cairn_client *c,
                                                             const char *name, uint32_t partitions,
                                                             cairn_done_cb cb, void *data);

/* One change of a topic's configuration: key (Kafka's name, e.g.
 * "retention.ms") takes value (text, as typed), or goes back to its
 * default when value is NULL. */
struct cairn_config_change {
  const char *key;
  const char *value;
};

/* Changes a running topic's configuration: the n changes (each key once)
 * apply together or not at all. cb gets 0, CAIRN_EINVALID_CONFIG (errmsg
 * says which key and why: unknown, a bad value, or one that cannot change,
 * such as the replication factor or the storage), CAIRN_EUNKNOWN_TOPIC,
 * CAIRN_EINTERNAL_TOPIC, ... retention.ms and retention.bytes change live:
 * each replica applies them at its next retention pass. Borrows name and
 * changes for the call. */
__attribute__((warn_unused_result)) int
cairn_alter_topic_config(struct cairn_client *c, const char *name,
                         const struct cairn_config_change *changes, size_t n, cairn_done_cb cb,
                         void *data);

/* Lists topics (without partitions). */
__attribute__((warn_unused_result)) int cairn_list_topics(struct cairn_client *c,
                                                          cairn_topic_list_cb cb, void *data);

/* One topic with its partitions (leader, replicas, isr, watermarks as the
 * answering node knows them); cb gets CAIRN_EUNKNOWN_TOPIC if none. */
__attribute__((warn_unused_result)) int cairn_describe_topic(struct cairn_client *c,
                                                             const char *name, cairn_topic_cb cb,
                                                             void *data);

/* DescribeCluster: nodes, controller, every topic's partitions. */
__attribute__((warn_unused_result)) int cairn_describe_cluster(struct cairn_client *c,
                                                               cairn_cluster_cb cb, void *data);

/* Decommissions node id (its partitions move away, then it is removed);
 * cb gets 0 or CAIRN_EUNKNOWN_NODE, CAIRN_EINVALID_RF (a partition it
 * holds has no other alive node to go to: errmsg names them), ... */
__attribute__((warn_unused_result)) int cairn_decommission_node(struct cairn_client *c,
                                                                uint64_t node_id,
                                                                cairn_done_cb cb, void *data);

/* Cancels a decommission: a DRAINING node id back to ALIVE (replicas not
 * yet moved stay). cb gets 0, CAIRN_EUNKNOWN_NODE or CAIRN_EINVAL (the
 * node is not draining). */
__attribute__((warn_unused_result)) int cairn_recommission_node(struct cairn_client *c,
                                                                uint64_t node_id,
                                                                cairn_done_cb cb, void *data);

/* ListOffsets at the partition's leader: the offset for spec (timestamp_ms
 * is used with CAIRN_OFFSET_SPEC_TIMESTAMP only). cb gets the offset (-1:
 * no record at or after the timestamp) and, for TIMESTAMP, the found
 * record's timestamp (else -1). */
__attribute__((warn_unused_result)) int cairn_list_offsets(struct cairn_client *c,
                                                           const char *topic, int32_t partition,
                                                           enum cairn_offset_spec spec,
                                                           int64_t timestamp_ms,
                                                           cairn_offset_cb cb, void *data);

/* DeleteRecords at the partition's leader: every record below offset goes,
 * on every replica (Kafka's DeleteRecords; -1 names the high watermark:
 * the partition is emptied). cb gets the log start afterwards as its offset
 * (an offset at or below the start changes nothing) and -1 as its
 * timestamp; or CAIRN_EOFFSET (offset above the high watermark),
 * CAIRN_EPOLICY (a postgresql topic: not offered), CAIRN_EAUTHZ (needs
 * DELETE on the topic), CAIRN_EUNKNOWN_TOPIC, ... Retried through leader
 * changes within request_timeout_ms, as ListOffsets. */
__attribute__((warn_unused_result)) int cairn_delete_records(struct cairn_client *c,
                                                             const char *topic, int32_t partition,
                                                             int64_t offset, cairn_offset_cb cb,
                                                             void *data);

/* ------------------------------------------------------------------------
 * Producer
 *
 * Partitioner, in this order:
 *   1. message.partition when not CAIRN_PARTITION_ANY;
 *   2. a non-NULL key: partition = crc32c(key) % partition_count, where
 *      crc32c is CRC-32C (Castagnoli, reflected polynomial 0x82F63B78,
 *      initial value and final xor 0xFFFFFFFF: crc32c("123456789") =
 *      0xE3069283), key bytes only. Stable across clients and versions;
 *      it changes only if the partition count does;
 *   3. no key: sticky: every keyless message goes to one partition until
 *      that partition's open batch is sent, then another (randomly) is
 *      picked, so keyless batches fill up instead of being spread thin.
 *
 * Batching: one open batch per partition; it is sent when it reaches
 * batch_bytes, after linger_ms, on flush, or when a message would not fit.
 * Each batch is compressed as a whole (the records section) when
 * compression is set and it saves space.
 *
 * Memory: the bytes of messages accepted and not yet delivered or failed
 * are bounded by buffer_bytes; a send beyond it fails at once with
 * CAIRN_EQUEUE_FULL (the blocking API waits instead).
 *
 * Idempotence: when enabled and the node's Hello lists InitProducerId, the
 * producer obtains (producer id, epoch) and stamps every batch with it and
 * a per-partition base sequence (a batch of n records takes n sequences,
 * counted from 0 per partition); a retry resends the same batch bytes, so
 * the partition drops duplicates; up to max_in_flight batches per
 * partition are in flight. A batch that fails for good leaves a gap in
 * its partition's sequences: the producer then takes a new epoch and
 * renumbers what it has not delivered yet (a batch in doubt at that
 * moment may then be written twice; docs/client.md). Otherwise batches carry producer id -1 (at-least-once: a
 * retry after IN_DOUBT or a timeout may write a batch twice), still up to
 * max_in_flight per partition, resent in order.
 * ------------------------------------------------------------------------ */

struct cairn_producer_options {
  uint32_t linger_ms;       /* wait this long for a batch to fill. 5 */
  uint32_t batch_bytes;     /* send a batch at this size. 65536 */
  uint32_t max_batch_bytes; /* no batch (so no message) is larger,
                               uncompressed; a bigger message fails with
                               CAIRN_ETOOLARGE. 1048576 (the node's default
                               entry bound, which a compressed batch must
                               also meet once decompressed) */
  uint64_t buffer_bytes;    /* memory for undelivered messages. 33554432 */
  enum cairn_compression compression; /* CAIRN_COMPRESSION_NONE */
  int compression_level;    /* 0: the codec's default */
  uint32_t max_in_flight;   /* batches in flight per partition. 5 (at most 5
                               when idempotent: the partition's duplicate
                               window) */
  bool idempotence;         /* use InitProducerId when offered. true */
};

/* Fills o with the defaults listed above. Context: any thread. */
void cairn_producer_options_init(struct cairn_producer_options *o);

struct cairn_producer;

/* What became of one message. topic is borrowed for the callback. */
struct cairn_delivery {
  const char *topic;
  int32_t partition; /* -1 if none was chosen (e.g. unknown topic) */
  int64_t offset;    /* -1 unless delivered */
  int64_t timestamp_ms;
  /* NULL when delivered; else what failed, in words, naming the node
   * address the batch could not reach where that is why ("not delivered
   * within the delivery timeout: partition 0's leader cairn-0:7400 was not
   * reached: unknown node or service"). Borrowed: valid during the
   * callback only. */
  const char *error;
};

/* status 0: committed (acknowledged by a majority) at d->offset. Else a
 * final error: CAIRN_EDELIVERY_TIMEOUT, CAIRN_EUNKNOWN_TOPIC,
 * CAIRN_EUNKNOWN_PARTITION, CAIRN_ETOOLARGE, CAIRN_ECORRUPT,
 * CAIRN_EPRODUCER_FENCED, UV_ECANCELED (closed), ... */
typedef void (*cairn_delivery_cb)(struct cairn_producer *p, int status,
                                  const struct cairn_delivery *d, void *data);

/* Creates a producer on c. Ownership: borrows c (it must outlive the
 * producer) and o (copied; NULL = defaults); *out returns owned (close
 * with cairn_producer_close). Returns 0, CAIRN_EINVAL (a zero batch size,
 * an unknown codec, batch_bytes > max_batch_bytes) or CAIRN_ENOMEM.
 * Context: the loop thread. */
__attribute__((warn_unused_result)) int cairn_producer_new(struct cairn_client *c,
                                                           const struct cairn_producer_options *o,
                                                           struct cairn_producer **out);

/* Queues one message. Ownership: borrows m and everything it points to
 * for the call only (the bytes are copied into a batch). Returns 0 (then
 * cb, which may be NULL, fires exactly once with the outcome), or at once
 * CAIRN_EINVAL (no topic, a negative partition other than ANY),
 * CAIRN_ETOOLARGE (the record alone would pass max_batch_bytes),
 * CAIRN_EQUEUE_FULL (buffer_bytes reached: retry after deliveries),
 * CAIRN_ECLOSED (closing). Errors found later (unknown topic, partition
 * out of range, ...) come through cb. Context: the loop thread. */
__attribute__((warn_unused_result)) int cairn_producer_send(struct cairn_producer *p,
                                                            const struct cairn_message *m,
                                                            cairn_delivery_cb cb, void *data);

typedef void (*cairn_producer_cb)(struct cairn_producer *p, int status, void *data);

/* Sends every open batch now and calls cb once every message sent before
 * the call has its delivery callback fired (status 0; UV_ECANCELED if the
 * producer is closed first). Callback, context: as at the top. */
__attribute__((warn_unused_result)) int cairn_producer_flush(struct cairn_producer *p,
                                                             cairn_producer_cb cb, void *data);

/* Messages accepted whose delivery callback has not fired yet. */
size_t cairn_producer_pending(const struct cairn_producer *p);

/* The producer id and epoch in use; -1/-1 when not idempotent (or not yet
 * known). Context: the loop thread. */
void cairn_producer_id(const struct cairn_producer *p, int64_t *producer_id, int16_t *epoch);

/* Closes the producer: messages not yet sent get UV_ECANCELED at once;
 * batches in flight get the node's answer (or UV_ECANCELED if it fails
 * retriably), which takes at most request_timeout_ms; then cb (may be
 * NULL) fires with status 0 and the producer is freed (do not use p in or
 * after cb). To deliver everything, flush first and close from the flush
 * callback. Closing a closing producer does nothing. Context: the loop
 * thread. */
void cairn_producer_close(struct cairn_producer *p, cairn_producer_cb cb, void *data);

/* ------------------------------------------------------------------------
 * Consumer: assigned partitions (no groups), long-poll fetch at each
 * partition's leader, prefetching up to prefetch_bytes per partition while
 * the application is busy; follows leader changes like the producer.
 * ------------------------------------------------------------------------ */

struct cairn_consumer_options {
  uint32_t fetch_max_wait_ms;   /* long-poll wait. 500 */
  uint32_t fetch_min_bytes;     /* answer once this much is there. 1 */
  uint32_t fetch_max_bytes;     /* per fetch response. 16777216 */
  uint32_t partition_max_bytes; /* per partition per fetch. 1048576 */
  uint64_t prefetch_bytes;      /* fetched but not handed out, per partition. 4194304 */
  /* When the position is out of the partition's range (retention removed
   * it, or a seek past the end): CAIRN_OFFSET_SPEC_EARLIEST or _LATEST
   * resets there; -1 reports CAIRN_EOFFSET to the application and pauses
   * the partition until the next seek. Default EARLIEST. */
  int offset_reset;
  /* 1: send a partition's next fetch as soon as the answer's envelope has
   * arrived, before its payload, when the node says where that payload
   * ends (nodes without FetchPartitionResult.next_offset get one fetch at
   * a time). Overlaps the fetch round trip with the transfer; costs CPU on
   * both sides on a saturated machine (docs/performance.md, read-back).
   * 0 (default): the next fetch goes once the answer is whole. */
  int fetch_pipeline;
};

/* Fills o with the defaults listed above. Context: any thread. */
void cairn_consumer_options_init(struct cairn_consumer_options *o);

struct cairn_consumer;

/* Creates a consumer on c with nothing assigned. Ownership: as
 * cairn_producer_new. Returns 0, CAIRN_EINVAL or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int cairn_consumer_new(struct cairn_client *c,
                                                           const struct cairn_consumer_options *o,
                                                           struct cairn_consumer **out);

/* Assigns (topic, partition) starting at offset: an offset >= 0,
 * CAIRN_OFFSET_EARLIEST or CAIRN_OFFSET_LATEST (resolved with ListOffsets
 * at the leader). Assigning an assigned partition seeks it. Ownership:
 * borrows topic (copied). Returns 0, CAIRN_EINVAL or CAIRN_ENOMEM; an
 * unknown topic or partition is reported through the records callback.
 * Context: the loop thread. */
__attribute__((warn_unused_result)) int cairn_consumer_assign(struct cairn_consumer *cons,
                                                              const char *topic, int32_t partition,
                                                              int64_t offset);

/* Removes a partition; records prefetched for it are dropped. Returns 0 or
 * CAIRN_ENOTFOUND. */
int cairn_consumer_unassign(struct cairn_consumer *cons, const char *topic, int32_t partition);

/* Moves an assigned partition to offset (>= 0, CAIRN_OFFSET_EARLIEST or
 * CAIRN_OFFSET_LATEST); prefetched records are dropped and a paused
 * partition resumes. Returns 0 or CAIRN_ENOTFOUND / CAIRN_EINVAL. */
__attribute__((warn_unused_result)) int cairn_consumer_seek(struct cairn_consumer *cons,
                                                            const char *topic, int32_t partition,
                                                            int64_t offset);

/* Moves an assigned partition to the first offset whose timestamp is >=
 * timestamp_ms (ListOffsets); to the high watermark if none is. */
__attribute__((warn_unused_result)) int cairn_consumer_seek_timestamp(struct cairn_consumer *cons,
                                                                      const char *topic,
                                                                      int32_t partition,
                                                                      int64_t timestamp_ms);

/* The next offset to hand out of an assigned partition (-1 while a
 * symbolic start is being resolved) and the last high watermark a fetch
 * reported (-1 before the first answer). Returns 0 or CAIRN_ENOTFOUND. */
int cairn_consumer_position(const struct cairn_consumer *cons, const char *topic,
                            int32_t partition, int64_t *position, int64_t *high_watermark);

/* Records of one partition, in offset order, or a partition error:
 * status 0 with count >= 1 records (the array and everything it points to
 * are borrowed until the callback returns); or status < 0 and count 0:
 * CAIRN_EUNKNOWN_TOPIC, CAIRN_EUNKNOWN_PARTITION, CAIRN_EOFFSET (with
 * offset_reset -1), CAIRN_ECORRUPT (a batch failed its CRC or would not
 * decompress): the partition is paused until it is sought or reassigned.
 * Transient errors (leader moves, nodes down) are retried silently. */
typedef void (*cairn_records_cb)(struct cairn_consumer *cons, int status, const char *topic,
                                 int32_t partition, const struct cairn_record *records,
                                 size_t count, void *data);

/* Starts handing records to cb as they arrive (fetching runs from
 * cairn_consumer_new on, so this only opens the tap). Starting a started
 * consumer replaces cb. Returns 0 or CAIRN_ECLOSED. Context: the loop
 * thread. */
__attribute__((warn_unused_result)) int cairn_consumer_start(struct cairn_consumer *cons,
                                                             cairn_records_cb cb, void *data);

/* Stops handing out records (safe from inside cb: the current callback
 * finishes, no further one fires); prefetching goes on up to
 * prefetch_bytes. */
void cairn_consumer_stop(struct cairn_consumer *cons);

typedef void (*cairn_consumer_close_cb)(struct cairn_consumer *cons, void *data);

/* Stops everything, drops prefetched records, waits for requests in
 * flight to be answered (a long poll ends within fetch_max_wait_ms), then
 * cb (may be NULL) fires and the consumer is freed (do not use cons in or
 * after cb). Context: the loop thread (not from inside its
 * records callback: stop there and close afterwards). */
void cairn_consumer_close(struct cairn_consumer *cons, cairn_consumer_close_cb cb, void *data);

/* ------------------------------------------------------------------------
 * The blocking API: a private loop and client per cairn_sync object; each
 * call runs that loop until it completes. Delivery and records callbacks
 * given to producers/consumers made on cairn_sync_client(s) fire inside
 * cairn_sync_* calls, on the caller's thread.
 * ------------------------------------------------------------------------ */

struct cairn_sync;

/* Creates the loop and a client (cairn_client_new) and checks
 * connectivity (cairn_client_ready). Returns 0 with *out (owned: free with
 * cairn_sync_free), or CAIRN_EINVAL, CAIRN_EUNREACHABLE (no node answered
 * within request_timeout_ms; cairn_sync_errmsg-style text goes to errmsg
 * when not NULL: errmsg_len bytes, NUL-terminated), ... Context: any
 * thread; the object then belongs to it. */
__attribute__((warn_unused_result)) int cairn_sync_new(const char *bootstrap,
                                                       const struct cairn_options *o,
                                                       struct cairn_sync **out, char *errmsg,
                                                       size_t errmsg_len);

/* Closes every producer and consumer made through cairn_sync_producer_new
 * / cairn_sync_consumer_new (undelivered messages fail with UV_ECANCELED:
 * flush first), the client and the loop, and frees s. NULL is fine. */
void cairn_sync_free(struct cairn_sync *s);

/* The client, to read options or make objects by hand. Returns borrowed
 * (valid until cairn_sync_free). */
struct cairn_client *cairn_sync_client(struct cairn_sync *s);

/* Text about the last failed cairn_sync_* call ("" if none): the node's
 * message or what the client saw. Returns borrowed (valid until the next
 * cairn_sync_* call on s). */
const char *cairn_sync_errmsg(const struct cairn_sync *s);

/* Admin calls: as the asynchronous ones, returning the callback's status;
 * results are returned owned (free with the matching *_free). */
__attribute__((warn_unused_result)) int cairn_sync_create_topic(struct cairn_sync *s,
                                                                const char *name,
                                                                uint32_t partitions,
                                                                uint32_t replication_factor,
                                                                const struct cairn_topic_config *cfg);
__attribute__((warn_unused_result)) int cairn_sync_delete_topic(struct cairn_sync *s,
                                                                const char *name);
__attribute__((warn_unused_result)) int cairn_sync_add_partitions(struct cairn_sync *s,
                                                                  const char *name,
                                                                  uint32_t partitions);
__attribute__((warn_unused_result)) int
cairn_sync_alter_topic_config(struct cairn_sync *s, const char *name,
                              const struct cairn_config_change *changes, size_t n);
__attribute__((warn_unused_result)) int cairn_sync_list_topics(struct cairn_sync *s,
                                                               struct cairn_topic_list **out);
__attribute__((warn_unused_result)) int cairn_sync_describe_topic(struct cairn_sync *s,
                                                                  const char *name,
                                                                  struct cairn_topic_info **out);
__attribute__((warn_unused_result)) int cairn_sync_describe_cluster(struct cairn_sync *s,
                                                                    struct cairn_cluster_info **out);
__attribute__((warn_unused_result)) int cairn_sync_decommission_node(struct cairn_sync *s,
                                                                     uint64_t node_id);
__attribute__((warn_unused_result)) int cairn_sync_recommission_node(struct cairn_sync *s,
                                                                     uint64_t node_id);
__attribute__((warn_unused_result)) int cairn_sync_user_set(struct cairn_sync *s, const char *name,
                                                            const char *password);
__attribute__((warn_unused_result)) int cairn_sync_user_delete(struct cairn_sync *s,
                                                               const char *name);
__attribute__((warn_unused_result)) int cairn_sync_list_users(struct cairn_sync *s,
                                                              struct cairn_user_list **out);
__attribute__((warn_unused_result)) int cairn_sync_acl_add(struct cairn_sync *s,
                                                           const struct cairn_acl *a);
__attribute__((warn_unused_result)) int cairn_sync_acl_remove(struct cairn_sync *s,
                                                              const struct cairn_acl *a);
__attribute__((warn_unused_result)) int cairn_sync_list_acls(struct cairn_sync *s,
                                                             const char *principal,
                                                             int resource_type,
                                                             const char *resource,
                                                             struct cairn_acl_list **out);
/* cairn_delete_records, waited for: *low_watermark the log start after it
 * (-1 on an error). */
__attribute__((warn_unused_result)) int cairn_sync_delete_records(struct cairn_sync *s,
                                                                  const char *topic,
                                                                  int32_t partition, int64_t offset,
                                                                  int64_t *low_watermark);
__attribute__((warn_unused_result)) int cairn_sync_list_offsets(struct cairn_sync *s,
                                                                const char *topic,
                                                                int32_t partition,
                                                                enum cairn_offset_spec spec,
                                                                int64_t timestamp_ms,
                                                                int64_t *offset,
                                                                int64_t *timestamp_out);

/* A producer on s's client (cairn_producer_new), closed by
 * cairn_sync_free if not before by cairn_sync_producer_close. *out
 * returns borrowed (valid until either). */
__attribute__((warn_unused_result)) int cairn_sync_producer_new(struct cairn_sync *s,
                                                                const struct cairn_producer_options *o,
                                                                struct cairn_producer **out);

/* cairn_producer_send, except that when the buffer is full it runs the
 * loop (firing delivery callbacks) until there is room, for at most
 * delivery_timeout_ms, then returns CAIRN_EQUEUE_FULL. cb fires later,
 * inside some cairn_sync_* call on s. */
__attribute__((warn_unused_result)) int cairn_sync_send(struct cairn_sync *s,
                                                        struct cairn_producer *p,
                                                        const struct cairn_message *m,
                                                        cairn_delivery_cb cb, void *data);

/* Sends one message and waits for its delivery: returns its status, with
 * *partition and *offset when not NULL. */
__attribute__((warn_unused_result)) int cairn_sync_produce(struct cairn_sync *s,
                                                           struct cairn_producer *p,
                                                           const struct cairn_message *m,
                                                           int32_t *partition, int64_t *offset);

/* cairn_producer_flush and wait: returns 0 once every message sent before
 * has had its delivery callback (whatever its status). */
__attribute__((warn_unused_result)) int cairn_sync_flush(struct cairn_sync *s,
                                                         struct cairn_producer *p);

/* Closes p (cairn_producer_close) and waits until it is freed. */
void cairn_sync_producer_close(struct cairn_sync *s, struct cairn_producer *p);

/* A consumer on s's client, closed by cairn_sync_free if not before by
 * cairn_sync_consumer_close. *out returns borrowed (valid until either).
 * Use cairn_consumer_assign/seek/position on it directly; do not start it
 * (cairn_sync_poll does). */
__attribute__((warn_unused_result)) int cairn_sync_consumer_new(struct cairn_sync *s,
                                                                const struct cairn_consumer_options *o,
                                                                struct cairn_consumer **out);

/* Waits up to timeout_ms (0: only what is already there; -1: no limit)
 * for the next record of cons. Returns 0 with *rec (returns borrowed:
 * valid until the next cairn_sync_poll on cons, its close, or
 * cairn_sync_free), UV_ETIMEDOUT when none came, or a partition error as
 * the records callback describes (*rec NULL; the error's partition in
 * *err_topic / *err_partition when not NULL). */
__attribute__((warn_unused_result)) int cairn_sync_poll(struct cairn_sync *s,
                                                        struct cairn_consumer *cons, int timeout_ms,
                                                        const struct cairn_record **rec,
                                                        const char **err_topic,
                                                        int32_t *err_partition);

/* Closes cons (cairn_consumer_close) and waits until it is freed. */
void cairn_sync_consumer_close(struct cairn_sync *s, struct cairn_consumer *cons);

#ifdef __cplusplus
}
#endif

#endif
