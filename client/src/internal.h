/* internal.h - libcairn's internal types shared by its modules: the client
 * object, connections (conn.c), the metadata cache (metadata.c), routing
 * and retries (router.c, backoff.c) and the generic retried request
 * (op.c). Never installed. Every symbol here has the lc_ prefix. */
#ifndef CAIRN_LC_INTERNAL_H
#define CAIRN_LC_INTERNAL_H

#include <cairn/cairn.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.pb-c.h"
#include "net/frame.h"

struct tls_ctx;
struct tls_session;
struct scram_client;

#define LC_TICK_MS 10          /* the client's sweep: timeouts, retries, linger */
#define LC_ADDR_MAX 256        /* "host:port" */
#define LC_ERRMSG_SIZE 256
#define LC_MAX_BOOTSTRAP 32
#define LC_MAX_APIS 64
#define LC_READ_CHUNK 65536 /* the read buffer of small frames; larger ones get their own */

/* ---- backoff.c: exponential backoff with jitter (pure) ---- */

struct lc_backoff {
  uint32_t base_ms;
  uint32_t max_ms;
  uint32_t attempt; /* retries so far */
  uint64_t rng;     /* xorshift state */
};

/* Starts a backoff; seed picks the jitter sequence (any value). */
void lc_backoff_init(struct lc_backoff *b, uint32_t base_ms, uint32_t max_ms, uint64_t seed);

/* The next delay: d = min(base * 2^attempt, max), drawn uniformly from
 * [0.8 d, 1.2 d] and capped at max; then attempt grows. Never 0 unless
 * base_ms is 0. */
uint32_t lc_backoff_next(struct lc_backoff *b);

/* Back to the first delay (after a success). */
void lc_backoff_reset(struct lc_backoff *b);

/* ---- partitioner.c (pure) ---- */

/* The documented key hash: CRC-32C of the key bytes. */
uint32_t lc_partition_hash(const void *key, size_t key_len);

/* crc32c(key) % count. count > 0. */
int32_t lc_partition_for_key(const void *key, size_t key_len, int32_t count);

/* ---- reader.c: incoming bytes cut into frames, payloads by reference ---- */

/* A read buffer: counted references, so a payload outlives the read that
 * brought it for as long as someone holds the buffer. The count is not
 * atomic: every lc_buf_* call on a buffer comes from the loop thread of
 * the client whose connection read it. */
struct lc_buf {
  int refs;
  size_t cap;
  uint8_t data[];
};

/* A buffer of cap bytes with one reference. Returns owned (release with
 * lc_buf_release), NULL on no memory. */
struct lc_buf *lc_buf_new(size_t cap);

/* Another reference to b. Returns owned (release with lc_buf_release). */
struct lc_buf *lc_buf_ref(struct lc_buf *b);

/* Drops one reference (NULL: nothing); the last one frees b. */
void lc_buf_release(struct lc_buf *b);

/* The frames of one byte stream. A frame whose size is above
 * LC_READ_CHUNK is read into a buffer of its own size (and nothing else is
 * read into it); smaller frames share an LC_READ_CHUNK buffer. Memory held
 * by the reader itself: one buffer of at most max(LC_READ_CHUNK, 4 +
 * max_frame_bytes) bytes; a frame announcing more is refused from its
 * first 4 bytes. Holders of handed-out buffers keep them alive on their
 * own. Context: one thread at a time (the connection's loop thread). */
struct lc_reader {
  struct lc_buf *buf; /* where bytes are read; NULL before the first read */
  size_t start, end;  /* unread bytes: buf->data[start..end) */
  size_t want;        /* the whole size of the frame at start once known; 0 */
  uint32_t max_frame_bytes; /* bound on a frame's L */
  bool after_large;   /* the last frame had its own buffer */
  bool head_told;     /* lc_reader_head reported the frame at start */
};

/* An empty reader refusing frames with L > max_frame_bytes. */
void lc_reader_init(struct lc_reader *rd, uint32_t max_frame_bytes);

/* Drops the reader's buffer (holders keep theirs). */
void lc_reader_close(struct lc_reader *rd);

/* Where the next bytes read go: *p, room for *len (> 0) bytes. Returns 0,
 * or CAIRN_ENOMEM (rd unchanged). *p is borrowed: valid until the next
 * call on rd. */
__attribute__((warn_unused_result)) int lc_reader_room(struct lc_reader *rd, uint8_t **p,
                                                       size_t *len);

/* n bytes (at most the *len of the last lc_reader_room) were written at
 * the *p it gave. */
void lc_reader_commit(struct lc_reader *rd, size_t n);

/* The next whole frame, consumed: FRAME_WHOLE with *f pointing into
 * (*buf)->data, FRAME_NEED_MORE, or a negative frame_decode code (the
 * stream is then unusable). *buf is borrowed: valid until the next call on
 * rd; take lc_buf_ref to keep the frame's bytes longer (they are never
 * written again). */
__attribute__((warn_unused_result)) int lc_reader_next(struct lc_reader *rd, struct frame *f,
                                                       struct lc_buf **buf);

/* The envelope of the frame at the reader's start while its payload is
 * still arriving: true once per frame, when the envelope's bytes are all
 * there but not the whole frame, with f->envelope / f->envelope_len set
 * (borrowed: valid until the next call on rd) and the rest of *f zeroed;
 * false otherwise (nothing read yet, the frame already whole, or already
 * reported). The frame is still handed out whole by lc_reader_next. */
bool lc_reader_head(struct lc_reader *rd, struct frame *f);

/* ---- conn.c: one connection per node address ---- */

enum lc_conn_state {
  LC_CONN_RESOLVING, /* getaddrinfo */
  LC_CONN_CONNECTING,
  LC_CONN_HELLO, /* Hello sent, its answer awaited */
  LC_CONN_READY,
  LC_CONN_CLOSING /* failed or closed: uv_close pending */
};

struct lc_req;

/* Fires exactly once per lc_conn_call that returned 0: status 0 with the
 * answer (env and payload borrowed for the callback; buf is the buffer
 * holding payload, borrowed too: lc_buf_ref keeps the payload's bytes
 * past the callback without a copy; NULL when there is no answer), or a
 * negative code
 * (CAIRN_EREQUEST_TIMEOUT, a libuv connection error such as
 * UV_ECONNREFUSED, CAIRN_ECLOSED when the node closed, CAIRN_EPROTOCOL,
 * UV_ECANCELED when the client closes). */
typedef void (*lc_req_cb)(struct cairn_client *c, int status, Cairn__Client__Envelope *env,
                          const uint8_t *payload, size_t payload_len, struct lc_buf *buf,
                          void *data);

/* Fires at most once per request, before its lc_req_cb, when the
 * answer's envelope has been read but its payload is still arriving (large
 * answers only; see lc_reader_head). env is borrowed for the call. The
 * callback must not fail or free the connection (it may send requests). */
typedef void (*lc_head_cb)(struct cairn_client *c, const Cairn__Client__Envelope *env,
                           void *data);

struct lc_req {
  struct lc_conn *cn;
  uint64_t corr;
  uint64_t deadline_ms;
  uint8_t *frame; /* the whole frame, owned */
  uint8_t *cipher; /* with TLS: the frame encrypted, as written (owned) */
  size_t frame_len;
  uv_write_t wr;
  int refs; /* 1 for the answer, 1 while the write is queued */
  bool answered;
  bool written;
  lc_req_cb cb;
  lc_head_cb head; /* NULL: none */
  void *data;
  struct lc_req *prev, *next; /* in cn->reqs */
};

struct lc_conn {
  struct cairn_client *c;
  char addr[LC_ADDR_MAX];
  enum lc_conn_state state;
  uv_tcp_t tcp;
  uv_getaddrinfo_t gai;
  uv_connect_t connect_req;
  bool tcp_open;   /* tcp initialized: needs uv_close */
  bool gai_active; /* getaddrinfo pending */
  int handles;     /* callbacks libuv still owes (close, connect, gai, writes) */
  uint64_t connect_deadline_ms;
  uint64_t next_corr;
  uint64_t node_id; /* from Hello */
  uint32_t max_frame_bytes;
  bool apis[LC_MAX_APIS];
  struct lc_reader rd; /* answers (plaintext, after TLS) */
  struct lc_req *reqs; /* sent or waiting for READY */
  struct tls_session *tls; /* with TLS: the session (src/net/tls.h) */
  struct scram_client *scram; /* the login in progress (opts.user), else NULL */
  uint8_t *tls_in;         /* ciphertext read buffer (tls_uv_in_buf) */
  int rcvlowat;            /* SO_RCVLOWAT set on the socket (0: the kernel's 1) */
  char host[LC_ADDR_MAX];  /* the host dialed: the node's certificate must name it */
  int fail_status;
  char errmsg[LC_ERRMSG_SIZE];
  struct lc_conn *next; /* in c->conns */
};

/* The connection to addr: the existing one, or a new one that starts
 * connecting. Returns 0 with *out (borrowed: valid until it fails; never
 * keep it past a callback), or CAIRN_ENOMEM. */
int lc_conn_get(struct cairn_client *c, const char *addr, struct lc_conn **out);

/* Sends env (api set by the caller; correlation id set here) with an
 * optional payload (copied) on cn, answered within timeout_ms. Returns 0
 * (cb fires exactly once), or CAIRN_ENOMEM / CAIRN_ETOOLARGE. */
int lc_conn_call(struct lc_conn *cn, Cairn__Client__Envelope *env, const uv_buf_t *payload,
                 int npayload, uint32_t timeout_ms, lc_req_cb cb, void *data);

/* Sends to addr (lc_conn_get + lc_conn_call). */
int lc_call(struct cairn_client *c, const char *addr, Cairn__Client__Envelope *env,
            const uv_buf_t *payload, int npayload, uint32_t timeout_ms, lc_req_cb cb, void *data);

/* lc_call, and head (unless NULL) is told the answer's envelope early
 * when the answer is large (lc_head_cb), with the same data. */
int lc_call_head(struct cairn_client *c, const char *addr, Cairn__Client__Envelope *env,
                 uint32_t timeout_ms, lc_head_cb head, lc_req_cb cb, void *data);

/* Fails requests past their deadline and connections past their connect
 * deadline. Called from the client's tick. */
void lc_conn_sweep(struct cairn_client *c);

/* Fails every request of cn with status and closes it. */
void lc_conn_fail(struct lc_conn *cn, int status, const char *why);

/* Whether the node behind addr is connected and listed api in Hello;
 * -1 when not known yet. */
int lc_conn_has_api(struct cairn_client *c, const char *addr, int api);

/* ---- metadata.c: the cache ---- */

struct lc_node {
  uint64_t id;
  char addr[LC_ADDR_MAX];
  bool alive;
};

/* Replicas of a partition the cache keeps (Cairn's replication factor
 * is at most the metadata group's node count; more are not kept). */
#define LC_PART_REPLICAS 7

struct lc_part {
  uint64_t leader_id; /* 0: none known */
  uint64_t replicas[LC_PART_REPLICAS];
  uint8_t nreplicas;
};

struct lc_topic {
  char *name;
  int32_t count;
  struct lc_part *parts;
};

typedef void (*lc_meta_cb)(struct cairn_client *c, int status, const char *errmsg, void *data);

struct lc_meta_waiter {
  lc_meta_cb cb;
  void *data;
  struct lc_meta_waiter *next;
};

/* A refresh waits this long for one node's Metadata answer at most (a
 * healthy node answers in a millisecond; a paused or cut-off one must not
 * hold up the search for a new leader: docs/fault-tolerance.md). */
#define LC_META_TIMEOUT_MS 500u

struct lc_meta {
  struct lc_node *nodes;
  size_t nnodes;
  struct lc_topic *topics;
  size_t ntopics;
  uint64_t updated_ms; /* 0: never */
  uint64_t generation; /* bumped on every successful refresh */
  bool refreshing;
  bool stale; /* a failure says the cache may be wrong: refresh soon */
  size_t cursor; /* next candidate address to ask */
  size_t tried;  /* candidates tried in this refresh */
  uint64_t prefer; /* a node to ask first at the next refresh (0: none) */
  uint64_t asking; /* the preferred node this refresh is asking (0: none) */
  unsigned prefer_turn; /* rotates lc_meta_prefer_replica over replicas */
  struct lc_meta_waiter *waiters;
  char errmsg[LC_ERRMSG_SIZE * 2];
};

void lc_meta_init(struct lc_meta *m);
void lc_meta_close(struct lc_meta *m);

/* Refreshes the cache from any reachable node (known nodes, then the
 * bootstrap list, in turn). Joins a refresh in flight. cb fires exactly
 * once: 0, or CAIRN_EUNREACHABLE when every candidate failed (errmsg says
 * why), UV_ECANCELED on close. Returns 0 or CAIRN_ENOMEM. */
int lc_meta_refresh(struct cairn_client *c, lc_meta_cb cb, void *data);

/* Address i of the nodes to ask for anything a node answers: live known
 * nodes, then the bootstrap list; *count says how many there are.
 * Returns borrowed (until the next refresh), NULL when i >= *count. */
const char *lc_meta_candidate(const struct cairn_client *c, size_t i, size_t *count);

/* Replaces the cache with a Metadata answer listing every topic. Returns
 * 0 or CAIRN_ENOMEM (the cache is unchanged then). */
int lc_meta_apply(struct cairn_client *c, const Cairn__Client__MetadataResponse *r);

/* Marks the cache stale: the next tick refreshes it. */
void lc_meta_invalidate(struct cairn_client *c);

/* The cached topic, or NULL. Borrowed until the next refresh. */
const struct lc_topic *lc_meta_topic(const struct cairn_client *c, const char *name);

/* The address of node id, or NULL. Borrowed until the next refresh. */
const char *lc_meta_node_addr(const struct cairn_client *c, uint64_t id);

/* The next refresh asks first one of (topic, partition)'s replicas other
 * than avoid (in turn, one more each call), before the usual candidates:
 * a node hosting no replica of it names the leader the metadata group
 * last recorded, which stays the old one while the controller itself is
 * on the silent node; the partition's replicas know a new leader first
 * hand (handle_metadata.c). Nothing when the cache knows no other
 * replica. */
void lc_meta_prefer_replica(struct cairn_client *c, const char *topic, int32_t partition,
                            uint64_t avoid);

/* The cached leader of (topic, partition), 0 if unknown. */
uint64_t lc_meta_leader(const struct cairn_client *c, const char *topic, int32_t partition);

/* Updates a partition's leader from a NOT_LEADER hint. */
void lc_meta_set_leader(struct cairn_client *c, const char *topic, int32_t partition,
                        uint64_t leader_id, const char *leader_addr);

/* Called by the tick: refreshes when stale or older than the max age. */
void lc_meta_tick(struct cairn_client *c);

/* ---- router.c: where partition requests go; wire codes ---- */

/* Route results beyond 0 and final errors. */
#define LC_ROUTE_WAIT 1 /* leader or topic unknown yet: refresh and retry */

/* The leader address of (topic, partition). Returns 0 with *addr
 * (borrowed until the next refresh), LC_ROUTE_WAIT, or
 * CAIRN_EUNKNOWN_TOPIC / CAIRN_EUNKNOWN_PARTITION when the cache was
 * refreshed after since_generation and still says so. */
int lc_route(struct cairn_client *c, const char *topic, int32_t partition,
             uint64_t since_generation, const char **addr);

/* Maps a wire error code to a library code (0 for OK). */
int lc_wire_err(int wire_code);

/* Whether a library code (from lc_wire_err or a connection) is worth
 * retrying within a deadline: leader moves, unavailable replicas,
 * timeouts, connection failures. */
bool lc_retriable(int err);

/* Whether err is a negative errno from the system or libuv (connection
 * trouble), not a library code and not a cancellation. */
bool lc_is_errno(int err);

/* Whether err means "the routing is wrong": refresh metadata first. */
bool lc_needs_refresh(int err);

/* ---- op.c: a request retried within a deadline ---- */

enum lc_op_target {
  LC_OP_ANY,        /* any node: admin calls */
  LC_OP_LEADER,     /* the leader of (topic, partition) */
  LC_OP_COORDINATOR /* the coordinator of the group named by topic: found with
                       FindCoordinator at any node, again after NOT_COORDINATOR
                       or a connection failure (docs/consumer-groups.md) */
};

/* What an op's answer handler decided. */
enum lc_op_verdict { LC_OP_DONE, LC_OP_RETRY };

struct lc_op;

/* Looks at an answer: returns LC_OP_DONE (op->status set: 0 or final) or
 * LC_OP_RETRY (op->status: the retriable code). May set op->errmsg. */
typedef enum lc_op_verdict (*lc_op_answer_fn)(struct lc_op *op, Cairn__Client__Envelope *env);
typedef void (*lc_op_done_fn)(struct lc_op *op);

struct lc_op {
  struct cairn_client *c;
  enum lc_op_target target;
  char *topic;
  int32_t partition;
  Cairn__Client__Envelope *req; /* built by the owner, freed with op */
  void (*free_req)(Cairn__Client__Envelope *req);
  lc_op_answer_fn answer;
  lc_op_done_fn done;
  void *data; /* the owner's */
  uint64_t deadline_ms;
  uint64_t wake_ms; /* 0: not waiting */
  struct lc_backoff bk;
  uint64_t meta_gen; /* metadata generation when routing last failed */
  char addr[LC_ADDR_MAX]; /* where the last attempt went */
  char coord[LC_ADDR_MAX]; /* LC_OP_COORDINATOR: the coordinator, "" to find */
  uint32_t timeout_ms;     /* 0: request_timeout_ms; else the deadline and each
                              call's timeout (a JoinGroup waits a rebalance) */
  size_t any_cursor;
  bool fail_refused; /* finish once every candidate refused in a row */
  size_t refused;    /* consecutive attempts refused (ECONNREFUSED) */
  char refused_addrs[LC_ERRMSG_SIZE / 2]; /* "A, B" of those attempts */
  bool in_flight;
  bool canceled;
  bool answer_errors; /* the answer fn sees error_resp bodies too */
  int status;
  char errmsg[LC_ERRMSG_SIZE];
  struct lc_op *prev, *next; /* in c->ops */
};

/* Starts op (filled by the caller: target, req, answer, done, data,
 * topic/partition for LC_OP_LEADER, topic = the group for
 * LC_OP_COORDINATOR, optionally coord and timeout_ms); its deadline is now
 * + timeout_ms (0: request_timeout_ms). done fires exactly once, then the op is freed (with
 * its req). */
void lc_op_start(struct cairn_client *c, struct lc_op *op);

/* Allocates a zeroed op. NULL on no memory. */
struct lc_op *lc_op_new(struct cairn_client *c);

void lc_op_tick(struct cairn_client *c);
void lc_op_cancel_all(struct cairn_client *c);

/* ---- the client ---- */

/* Counters of what the client worked around (tests print them). */
struct lc_stats {
  uint64_t not_leader;      /* NOT_LEADER answers followed */
  uint64_t conn_failures;   /* connections that failed (refused, reset, timeout) */
  uint64_t retries;         /* batches or ops retried */
  uint64_t meta_refreshes;  /* successful metadata refreshes */
  uint64_t fetch_piped;     /* fetches sent before the answer ahead had arrived */
  uint64_t fetch_pipe_lost; /* their partitions' bytes dropped (not where the one ahead ended) */
};

struct cairn_client {
  uv_loop_t *loop;
  struct cairn_options opts;
  char client_id[128];
  char bootstrap[LC_MAX_BOOTSTRAP][LC_ADDR_MAX];
  size_t nbootstrap;
  uv_timer_t tick;
  struct lc_conn *conns;
  struct tls_ctx *tls; /* opts.tls: every connection's TLS settings, else NULL */
  char user[65];       /* opts.user: every connection logs in as this user, "" none */
  char password[256];  /* its password (wiped when the client is freed) */
  struct lc_meta meta;
  struct lc_op *ops;
  int nproducers;
  int nconsumers;
  struct cairn_producer *producers; /* for the tick */
  struct cairn_consumer *consumers;
  uint64_t rng;
  struct lc_stats stats;
  bool closing;
  int handles; /* the tick timer */
  cairn_client_close_cb close_cb;
  void *close_data;
};

/* A random 64-bit value from the client's generator. */
uint64_t lc_rand(struct cairn_client *c);

/* Now, in loop milliseconds. */
static inline uint64_t lc_now(const struct cairn_client *c)
{
  uv_update_time(c->loop); /* deadlines count from the call, not the loop turn */
  return uv_now(c->loop);
}

/* Called by the tick (producer.c, consumer.c); *_next walks c's lists. */
struct cairn_producer *lc_producer_next(struct cairn_producer *p);
struct cairn_consumer *lc_consumer_next(struct cairn_consumer *cons);
void lc_producer_tick(struct cairn_producer *p);
void lc_consumer_tick(struct cairn_consumer *cons);

/* snprintf for messages, where truncation is acceptable. */
void lc_fmt(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The seek count of an assigned partition (0 when not assigned): records
 * handed out under another value are stale. */
uint64_t lc_consumer_epoch(const struct cairn_consumer *cons, const char *topic,
                           int32_t partition);

/* What an assigned partition holds for the application (*buffered), the
 * payload bytes of the answer arriving for it as told by its envelope
 * (*inflight), and whether a pipelined fetch is in flight behind that
 * answer (*piped). Returns 0, or CAIRN_ENOTFOUND when not assigned. For
 * tests. */
int lc_consumer_held(const struct cairn_consumer *cons, const char *topic, int32_t partition,
                     size_t *buffered, size_t *inflight, bool *piped);

/* Copies at most n-1 bytes of a protobuf string (NULL is ""). */
void lc_strlcpy(char *dst, const char *src, size_t n);

/* info.c: protobuf answers to the public result structs (returns owned or
 * NULL on no memory). */
struct cairn_topic_info *lc_info_topic(const Cairn__Client__TopicInfo *t);
int lc_info_topic_fill(struct cairn_topic_info *dst, const Cairn__Client__TopicInfo *t);
struct cairn_topic_list *lc_info_topic_list(const Cairn__Client__ListTopicsResponse *r);
struct cairn_cluster_info *lc_info_cluster(const Cairn__Client__DescribeClusterResponse *r);

#endif
