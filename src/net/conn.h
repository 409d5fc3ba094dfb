/* conn.h - one accepted connection on the client port: reads frames into a
 * bounded buffer, hands each request to a dispatch callback, and writes the
 * answers, in whatever order they come, as gather writes of memory buffers
 * and file regions (sendfile on the thread pool).
 *
 * States (one setter, conn_set_state(), logs and asserts each transition):
 *
 *   CONN_OPEN ---- conn_close(), peer EOF, a malformed or oversized frame
 *     |            (answered with an error_resp first) -------> CONN_DRAINING
 *     |  read/write error, idle or write timeout (conn_on_timer)   |
 *     v                                                             |
 *   CONN_CLOSING <--- every request answered and every byte written,|
 *     |               FIN sent and the peer's EOF seen, or the      |
 *     |               close grace expired (conn_drain_check,        |
 *     |               conn_on_timer) -------------------------------+
 *     |  in-flight requests canceled, handles closed (conn_close_now)
 *     v
 *   CONN_CLOSED   the handles' close callbacks have fired and every
 *                 request has been finished: closed_cb, then freed.
 *
 * In CONN_DRAINING nothing new is dispatched; bytes that still arrive are
 * read and discarded (so the peer is not reset before it reads our last
 * answer); answers to earlier requests are still sent.
 *
 * Limits (struct conn_limits), each checked where it grows:
 *   - the read buffer is CONN_READ_BUF_INITIAL bytes, freed when nothing
 *     has been read for a sweep period (a quarter of the shorter timeout)
 *     and made again on the next read; a larger frame (its header checked
 *     against max_frame_bytes first) is read into a block of its exact
 *     size, at most CONN_READ_BUF_LIMIT(max_frame_bytes), that becomes the
 *     request: one such block per conn at a time;
 *   - reading stops (uv_read_stop) while unanswered requests hold more than
 *     max_inflight_bytes (frame bytes) or number max_inflight_requests, or
 *     answers not yet written exceed max_write_queue_bytes; it resumes when
 *     they drop. A peer that never reads therefore costs at most about one
 *     frame and one answer above those limits, and is closed once it has
 *     taken no answer bytes for write_timeout_ms;
 *   - frame bytes held by all conns of a port are bounded by the shared
 *     budget (net/rbudget.h): a large frame's block is made only once the
 *     budget grants its size, else the conn stops reading and waits;
 *   - a frame begun and not complete within frame_timeout_ms closes the
 *     conn (a peer trickling a frame holds its budget no longer); a conn
 *     waiting for budget is not trickling and is not timed;
 *   - before the conn has a principal, frames are bounded by
 *     preauth_max_frame_bytes when it is set (authentication required).
 *
 * TLS (conn_start_tls, src/net/tls.h): the session sits between the socket
 * and the frame decoder. Ciphertext is read into a fixed buffer of
 * TLS_UV_IN_SIZE bytes (src/net/tls_uv.h) and fed to the session; plaintext
 * is pulled into the read buffer (or a large frame's block) only while the
 * limits allow reading, so backpressure holds: what is left waits inside
 * the session (at most one read's ciphertext and one record) and is pulled
 * by the kick timer when reading resumes. Answers are encrypted when issued
 * and the ciphertext is written instead; a file part cannot be sendfile'd
 * through TLS, so its region is read (pread on the thread pool, the session
 * never leaves the loop thread), then encrypted and written. A handshake
 * not done within TLS_HANDSHAKE_TIMEOUT_MS, a failed one, or a bad record:
 * closed with a log line. A clean close sends close_notify before the FIN.
 *
 * Context: everything here runs on the loop thread. */
#ifndef CAIRN_CONN_H
#define CAIRN_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "client.pb-c.h"
#include "net/rbudget.h"

#define CONN_READ_BUF_INITIAL (64u * 1024)
#define CONN_READ_BUF_LIMIT(max_frame_bytes) ((size_t)(max_frame_bytes) + 8)
#define CONN_DEFAULT_MAX_INFLIGHT_BYTES (64u * 1024 * 1024)
#define CONN_DEFAULT_MAX_INFLIGHT_REQUESTS 1024
#define CONN_DEFAULT_MAX_WRITE_QUEUE_BYTES (64u * 1024 * 1024)
#define CONN_DEFAULT_IDLE_TIMEOUT_MS (10u * 60 * 1000)
#define CONN_DEFAULT_CLOSE_GRACE_MS 5000
#define CONN_DEFAULT_WRITE_TIMEOUT_MS 30000
#define CONN_DEFAULT_FRAME_TIMEOUT_MS 30000
#define CONN_PREAUTH_MAX_FRAME_BYTES (64u * 1024)
#define CONN_ERRMSG_SIZE 256
#define CONN_PRINCIPAL_MAX 256
#define CONN_AUTHZ_LOGGED 16 /* resources whose refusal a conn logs */

/* Phases a handler may mark on a request (conn_request.mark_ns), read by
 * the answered callback to trace slow requests: the request was handed to
 * its Raft group, its entry was committed (applying began), and applied. */
enum conn_mark { CONN_MARK_PROPOSED, CONN_MARK_COMMITTED, CONN_MARK_APPLIED, CONN_MARKS };

#define CONN_STATE_TABLE(X)                                                                        \
  X(CONN_OPEN)                                                                                     \
  X(CONN_DRAINING)                                                                                 \
  X(CONN_CLOSING)                                                                                  \
  X(CONN_CLOSED)

enum conn_state {
#define CONN_STATE_ENUM(name) name,
  CONN_STATE_TABLE(CONN_STATE_ENUM)
#undef CONN_STATE_ENUM
};

/* The state's name ("CONN_OPEN"), a static string. */
const char *conn_state_name(enum conn_state state);

struct conn_framing;

/* Zero in a max_* field or write_timeout_ms means its default; zero
 * idle_timeout_ms means never, zero close_grace_ms means at once. */
struct conn_limits {
  uint32_t max_frame_bytes;       /* bound on a frame's L; at most FRAME_MAX_BYTES_LIMIT */
  uint64_t max_inflight_bytes;    /* frame bytes of unanswered requests before reads pause */
  uint32_t max_inflight_requests; /* unanswered requests before reads pause */
  uint64_t max_write_queue_bytes; /* answer bytes not yet written before reads pause */
  unsigned idle_timeout_ms;       /* nothing read and nothing in flight this long: close; 0 never */
  unsigned close_grace_ms;        /* how long a draining conn waits for answers and the peer */
  unsigned write_timeout_ms;      /* answers queued and nothing written this long (the
                                   * peer does not read): close */
  unsigned frame_timeout_ms;      /* a frame begun and not complete this long (a peer
                                   * trickling it): close; 0 never */
  uint32_t preauth_max_frame_bytes; /* bound on a frame's L before the conn has a
                                     * principal (authentication required); 0: none */
  struct rbudget *budget;         /* shared by a port's conns (borrowed: outlives
                                   * them); NULL: no node-wide bound */
  const struct conn_framing *framing; /* how frames are cut and answers framed
                                       * (static, borrowed); NULL: Cairn's own
                                       * (frame.h). Not a limit, but set per port
                                       * like them. */
};

/* Fills lim with the CONN_DEFAULT_* values and FRAME_DEFAULT_MAX_BYTES. */
void conn_limits_default(struct conn_limits *lim);

struct conn;
struct conn_request;

/* A new request. The handler owns req from now on and finishes it with
 * exactly one conn_respond() or conn_respond_error(), now or later (other
 * requests of the same conn may be dispatched and answered before). */
typedef void (*conn_dispatch_cb)(struct conn_request *req, void *data);

/* The conn is closing before req was answered: the handler stops its work
 * and finishes req (conn_respond drops the answer), now or soon. Fires at
 * most once, on the loop thread. The conn stays allocated until every
 * request is finished, so a handler never writes to a freed conn. */
typedef void (*conn_cancel_cb)(struct conn_request *req);

/* req is being finished with the answer env (borrowed: the envelope as
 * given to conn_respond, valid during the call), bytes_out answer bytes
 * queued (0 when dropped). For metrics and tracing: it may read req (its
 * api, arrival_ns, mark_ns, charge) but not finish or keep it. data is the
 * conn's dispatch data. Fires once per request, on the loop thread. */
typedef void (*conn_answered_cb)(const struct conn_request *req,
                                 const Cairn__Client__Envelope *env, uint64_t bytes_out,
                                 void *data);

/* The conn is gone (CONN_CLOSED); c is freed when this returns. */
typedef void (*conn_closed_cb)(struct conn *c);

/* A response part has been sent (status 0) or dropped (a negative code:
 * the conn closed or the write failed). Fires exactly once per part given
 * to conn_respond(). */
typedef void (*conn_release_cb)(void *arg, int status);

struct frame;
struct conn_part;

/* A port's wire framing. Cairn's own (frame.h) is the default; the Kafka
 * port supplies its own (src/kafka/kafka_conn.c). Every limit, the budget,
 * the timeouts and the write path are the conn's, whatever the framing.
 * All functions are pure (no conn state), callable on any thread. */
struct conn_framing {
  const char *name;
  /* Bytes at the start of a frame that decide its size (the length field):
   * a frame larger than the read buffer moves to its own block once these
   * are in. */
  size_t size_field_bytes;
  /* As frame_decode(): FRAME_WHOLE, FRAME_NEED_MORE (f->need), or a
   * negative code for a malformed or oversized frame (f->length set once
   * read). f->payload/payload_len are what the request will carry. */
  int (*decode)(const uint8_t *p, size_t len, uint32_t max_frame_bytes, struct frame *f);
  /* From a whole frame: the request's correlation id, api, api version and
   * envelope (*env owned by the request; NULL for a framing without one).
   * Returns 0 or a negative code: the frame is malformed. */
  int (*unpack)(const struct frame *f, uint64_t *correlation_id, Cairn__Client__Api *api,
                uint32_t *api_version, Cairn__Client__Envelope **env);
  /* The answer's header for a payload of payload_len bytes: returns 0 with
   * *hdr (owned: free()) and *hdr_len, or a negative code. env is NULL for
   * a framing without envelopes. */
  int (*encode_header)(uint64_t correlation_id, const Cairn__Client__Envelope *env,
                       uint64_t payload_len, uint8_t **hdr, size_t *hdr_len);
  /* Whether a malformed frame is answered with an error envelope before
   * the conn drains (Cairn's); false: it is only logged (Kafka has no
   * generic error answer). */
  bool answers_protocol_errors;
  /* Whether answers go out in the order their requests came (Kafka:
   * clients match answers to requests by order); false: as they complete
   * (Cairn's, matched by correlation id). An answer that completes early
   * is held, with its request and its in-flight charge, until every
   * earlier request is answered or finished unanswered. */
  bool ordered_answers;
  /* Whether req must run with no other request of its conn in flight:
   * it waits for the earlier ones to finish, and the conn reads nothing
   * more until it has (Kafka: every API but Produce, because Apache Kafka
   * handles a connection's requests one at a time and clients rely on the
   * order of their effects, e.g. an OffsetCommit before a LeaveGroup).
   * NULL: every request may overlap. */
  bool (*runs_alone)(const struct conn_request *req);
};

/* A relayed request (conn_request_relay) is being answered with env (may
 * be NULL for a dropped answer) and parts: the callback takes the parts
 * (it must call each part's release exactly once, now or later) and must
 * not keep env. The request is freed when the callback returns. Fires
 * exactly once, on the loop thread. */
typedef void (*conn_relay_cb)(struct conn_request *req, const Cairn__Client__Envelope *env,
                              const struct conn_part *parts, size_t nparts);

struct conn_request {
  /* Read-only for the handler. */
  struct conn *c;
  uint64_t correlation_id;
  Cairn__Client__Api api;
  uint32_t api_version;
  Cairn__Client__Envelope *env; /* owned by the request, freed with it */
  const uint8_t *payload;       /* owned by the request (a copy of a small
                                 * frame's, or read in place for a large one):
                                 * valid until it is finished, whatever else
                                 * is read meanwhile */
  size_t payload_len;
  bool canceled; /* the conn is closing: the answer will be dropped */
  uint64_t arrival_ns; /* uv_hrtime() when it was dispatched */
  /* Free for the handler. */
  void *handler_data;
  uint64_t mark_ns[CONN_MARKS]; /* phase times (uv_hrtime(), 0: not reached)
                                 * for slow-request tracing */
  /* Private. */
  conn_relay_cb relay; /* non-NULL: a relayed request (conn_request_relay) */
  void *relay_data;
  conn_cancel_cb cancel_cb;
  size_t charge; /* bytes counted in the conn's in-flight total */
  uint64_t seq;  /* arrival order on its conn (ordered_answers) */
  /* ordered_answers: answered (or finished unanswered) ahead of an earlier
   * request: the answer's parts (owned, held_n of them) wait here. */
  bool held;
  bool alone; /* runs with no other request of its conn (runs_alone) */
  bool held_unanswered;
  struct conn_part *held_parts;
  size_t held_n;
  struct conn_request *prev, *next;
};

enum conn_part_kind { CONN_PART_MEM = 0, CONN_PART_FILE };

/* One region of a response payload. */
struct conn_part {
  enum conn_part_kind kind;
  const void *base; /* CONN_PART_MEM: len bytes from base */
  int fd;           /* CONN_PART_FILE: len bytes of fd from offset */
  int64_t offset;
  size_t len;
  conn_release_cb release; /* may be NULL */
  void *arg;
};

struct conn_out;
struct conn_sendfile;
struct tls_ctx;
struct tls_session;

struct conn {
  uv_loop_t *loop;
  uv_tcp_t tcp;
  uv_timer_t timer; /* idle/write timeout sweep in CONN_OPEN, close grace in CONN_DRAINING */
  uv_timer_t kick;  /* resumes dispatch of buffered frames outside callers' stacks */
  uv_shutdown_t shutdown_req;
  struct conn_limits lim;
  enum conn_state state;
  uint64_t id;
  char peer[64];
  conn_dispatch_cb dispatch;
  void *data;
  conn_closed_cb closed_cb;
  conn_answered_cb answered; /* may be NULL; set by the creator after conn_new */
  void *owner;              /* for the creator (the listener) */
  struct conn *prev, *next; /* the owner's list */

  /* Read side: bytes [rstart, rend) of rbuf are received and not consumed.
   * A frame larger than rbuf is read into `direct` instead: a block that
   * becomes its request (struct conn_request, then the frame), so large
   * payloads are never copied. */
  uint8_t *rbuf;
  size_t rcap, rstart, rend;
  struct conn_request *direct;
  size_t direct_size, direct_have;
  bool reading;
  bool backlog; /* whole frames wait in rbuf for the limits to allow them */
  bool budget_blocked;     /* waits for the shared budget (bwait queued) */
  struct rbudget_waiter bwait;
  uint64_t frame_since_ms; /* uv_now() when the incomplete frame began, 0: none */
  bool frame_timed_out;    /* closed for trickling a frame (for the owner's counters) */
  bool peer_eof;
  bool shutdown_sent;

  /* Requests dispatched and not finished. */
  struct conn_request *reqs;
  uint32_t nreqs;
  uint64_t next_seq;        /* the seq the next request dispatched gets */
  uint64_t next_answer_seq; /* ordered_answers: the seq whose answer goes out next */
  /* runs_alone: a request read and linked, waiting for the earlier ones to
   * finish before it is dispatched; and whether one is running. */
  struct conn_request *waiting_alone;
  bool alone_running;
  uint64_t inflight_bytes;

  /* Write side: answers whose parts are not all issued, in order. */
  struct conn_out *outq_head, *outq_tail;
  uint32_t nouts;             /* answers not fully written (queued or issued) */
  uint64_t write_queue_bytes; /* answer bytes not yet written */
  uint32_t writes_pending;    /* uv_write requests in flight */
  struct conn_sendfile *sf;   /* the file region on the thread pool, or NULL */

  uint64_t last_activity_ms; /* uv_now() of the last read or write progress */
  uint64_t last_write_ms;    /* ... of the last write progress, or since answers queued */
  size_t last_unsent;        /* libuv's unwritten bytes at the last sweep */
  uint64_t sweep_ms;         /* the timer's period in CONN_OPEN */

  /* Authentication (src/server/handle_auth.c): the principal once
   * authenticated ("" before), the exchange in progress, failures. */
  char principal[CONN_PRINCIPAL_MAX];
  void *auth; /* owned by the auth handler; freed with auth_free */
  void (*auth_free)(void *auth);
  uint32_t auth_failures;
  int proto_state; /* the port's own protocol state, 0 at start (the Kafka
                    * port: its SASL step, src/kafka/kafka_handle_sasl.c) */
  /* Authorization refusals logged on this conn (src/server/authz.c): a
   * hash per resource, the first CONN_AUTHZ_LOGGED of them. */
  uint64_t authz_logged[CONN_AUTHZ_LOGGED];
  uint32_t authz_nlogged; /* CONN_AUTHZ_LOGGED + 1: "no more" was logged */

  /* TLS (NULL: plain TCP) */
  struct tls_session *tls;
  uint8_t *tls_in;     /* ciphertext read buffer (tls_uv_in_buf) */
  uint64_t created_ms; /* for the handshake deadline */

  int handles_open;
  bool handles_closing;
  int busy; /* > 0 while a function up the stack still uses c */

  /* Counters for tests and metrics. */
  uint64_t requests;
  uint64_t responses;
  uint64_t peak_inflight_bytes;
  uint64_t peak_write_queue_bytes;
  size_t peak_rbuf;              /* the largest read buffer or direct block */
  char errmsg[CONN_ERRMSG_SIZE]; /* why it closed, when it did not close cleanly */
};

/* Accepts one pending connection from server into a new conn in CONN_OPEN
 * and starts reading. lim is copied. dispatch(req, data) fires once per
 * request; closed_cb(c) fires once when the conn is gone (after any close
 * reason), then c is freed. Returns 0 and *out (owned by the loop: it frees
 * itself after closed_cb), or a negative code (nothing to free, closed_cb
 * never fires). Context: loop thread. */
__attribute__((warn_unused_result)) int conn_new(uv_loop_t *loop, uv_stream_t *server,
                                                 const struct conn_limits *lim,
                                                 conn_dispatch_cb dispatch, void *data,
                                                 conn_closed_cb closed_cb, struct conn **out);

/* Makes c speak TLS with ctx's settings. Call it right after conn_new(),
 * before control returns to the loop (no byte has been read yet). Returns
 * 0, or CAIRN_ENOMEM (then close the conn with conn_close()). ctx is
 * borrowed only during the call. Context: loop thread. */
__attribute__((warn_unused_result)) int conn_start_tls(struct conn *c, struct tls_ctx *ctx);

/* Does c speak TLS (conn_start_tls)? */
bool conn_encrypted(const struct conn *c);

/* The client certificate's principal under mutual TLS ("" when none).
 * Returns borrowed, valid while c is. */
const char *conn_tls_principal(const struct conn *c);

/* Starts a clean close: nothing new is dispatched, answers to dispatched
 * requests are still sent for up to close_grace_ms, then the requests left
 * are canceled and the conn closes; closed_cb fires when it is gone. No-op
 * if already draining or closing. Context: loop thread. */
void conn_close(struct conn *c);

/* Sets the cancel callback of req. Set it from the dispatch callback (a
 * request is never canceled before that returns); set later, check
 * req->canceled first. Context: loop thread. */
void conn_request_set_cancel(struct conn_request *req, conn_cancel_cb cb);

/* Finishes req by queuing its answer: env (its correlation_id and api are
 * replaced by the request's) then the parts' bytes as the payload, in
 * order. Memory parts are not copied: they must stay valid until their
 * release callback. File parts are sent with sendfile on the thread pool.
 * If the conn is closing (req->canceled) the answer is dropped.
 * Ownership: always consumes req (freed here, with its env and payload)
 * and the parts (each release callback fires exactly once: 0 when the
 * bytes were written, a negative code when dropped; when dropped at once,
 * for a closing conn or an answer too large to encode, before this
 * returns); borrows env and the parts array. A file part's fd must stay
 * open until its release callback. A closing conn whose last request req
 * was is freed before this returns: req->c must not be used after (close
 * it first, if it is to be closed). Context: loop thread. */
void conn_respond(struct conn_request *req, const Cairn__Client__Envelope *env,
                  const struct conn_part *parts, size_t nparts);

/* Finishes req with an envelope holding only error_resp {code, message}.
 * Ownership and context as conn_respond(). */
void conn_respond_error(struct conn_request *req, Cairn__Client__ErrorCode code,
                        const char *message);

/* For a framing without envelopes (conn_framing.encode_header gets env
 * NULL): finishes req with the parts as its answer's payload. Ownership
 * and context as conn_respond(). */
void conn_respond_bytes(struct conn_request *req, const struct conn_part *parts, size_t nparts);

/* Finishes req without any answer (a Kafka produce with acks 0): its
 * charge is released, nothing is written. Always consumes req; as with
 * conn_respond(), a closing conn whose last request req was is freed
 * before this returns, so req->c must not be used after. Context: loop
 * thread. */
void conn_finish_unanswered(struct conn_request *req);

/* A request a front-end makes on c's behalf for a core handler (the Kafka
 * port runs the native handlers this way): it carries env (borrowed: must
 * stay valid and unchanged, except by the handler, until cb fires) and
 * payload (borrowed likewise), the principal and authorization state of c,
 * and is finished like any request (conn_respond and friends), which calls
 * cb instead of writing to c. It is not counted in c's in-flight requests:
 * the front-end keeps its own request to c unfinished until cb fires, which
 * keeps c allocated. Returns the request (owned by the handler it is given
 * to) or NULL (no memory). Context: loop thread. */
struct conn_request *conn_request_relay(struct conn *c, Cairn__Client__Api api,
                                        Cairn__Client__Envelope *env, const uint8_t *payload,
                                        size_t payload_len, conn_relay_cb cb, void *data);

/* Cancels req as a closing conn would (its cancel callback fires if it has
 * one and was not canceled yet): for a front-end whose own request was
 * canceled, to stop the relayed one. Context: loop thread. */
void conn_request_cancel(struct conn_request *req);


#endif
