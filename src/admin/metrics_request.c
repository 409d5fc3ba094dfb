/* metrics_request.c - the client port's answered hook: counts each request
 * by api and wire error code with its bytes and latency (metrics.h), and
 * traces requests slower than slow_request_ms with one log line:
 *
 *   slow request: produce corr=7 from 127.0.0.1:5123 took 1520.3 ms
 *     (queue 0.1, raft commit 1500.2, apply 0.4, send 19.6 ms) code=ok
 *
 * Phases come from the request's marks (conn.h, enum conn_mark), where its
 * handler set them: queue is dispatch to proposal, raft commit is proposal
 * to the start of the state machine's apply of its (last) entry, apply is
 * until the replica called back, send is from there to the answer being
 * queued on the connection. A request without marks logs its total only.
 * A fetch's threshold is raised by its max_wait_ms (a long poll waits on
 * purpose).
 * See admin.h. */
#include "admin/admin.h"

#include "admin/metrics.h"
#include "common/log.h"
#include "server/node.h"

#include <inttypes.h>
#include <stdio.h>

/* The answer's wire error code: an error_resp, or a response's own
 * top-level error; partition-level errors are not the request's. */
static unsigned metrics_request_code(const Cairn__Client__Envelope *env)
{
  const Cairn__Client__Error *err = NULL;
  switch (env->body_case) {
  case CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP:
    err = env->error_resp;
    break;
  case CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP:
    err = env->produce_resp != NULL ? env->produce_resp->error : NULL;
    break;
  default:
    break;
  }
  return err != NULL && err->code > 0 ? (unsigned)err->code : 0;
}

static double metrics_request_ms(uint64_t from_ns, uint64_t to_ns)
{
  return to_ns > from_ns ? (double)(to_ns - from_ns) / 1e6 : 0.0;
}

static void metrics_request_trace(const struct conn_request *req, unsigned code, uint64_t now)
{
  const ProtobufCEnumValue *api =
      protobuf_c_enum_descriptor_get_value(&cairn__client__api__descriptor, (int)req->api);
  const ProtobufCEnumValue *cv =
      protobuf_c_enum_descriptor_get_value(&cairn__client__error_code__descriptor, (int)code);
  const char *api_name = api != NULL ? api->name : "?";
  const char *code_name = cv != NULL ? cv->name : "?";
  double total = metrics_request_ms(req->arrival_ns, now);
  const uint64_t *mk = req->mark_ns;
  if (mk[CONN_MARK_PROPOSED] == 0 || mk[CONN_MARK_APPLIED] == 0) {
    log_warn("slow", "slow request: %s corr=%" PRIu64 " from %s took %.1f ms code=%s", api_name,
             req->correlation_id, req->c->peer, total, code_name);
    return;
  }
  uint64_t committed =
      mk[CONN_MARK_COMMITTED] != 0 ? mk[CONN_MARK_COMMITTED] : mk[CONN_MARK_APPLIED];
  log_warn("slow",
           "slow request: %s corr=%" PRIu64 " from %s took %.1f ms (queue %.1f, raft commit %.1f, "
           "apply %.1f, send %.1f ms) code=%s",
           api_name, req->correlation_id, req->c->peer, total,
           metrics_request_ms(req->arrival_ns, mk[CONN_MARK_PROPOSED]),
           metrics_request_ms(mk[CONN_MARK_PROPOSED], committed),
           metrics_request_ms(committed, mk[CONN_MARK_APPLIED]),
           metrics_request_ms(mk[CONN_MARK_APPLIED], now), code_name);
}

void admin_on_answered(const struct conn_request *req, const Cairn__Client__Envelope *env,
                       uint64_t bytes_out, void *data)
{
  struct node *n = data;
  uint64_t now = uv_hrtime();
  uint64_t elapsed_ns = now > req->arrival_ns ? now - req->arrival_ns : 0;
  unsigned code = metrics_request_code(env);
  metrics_request(&n->metrics, (unsigned)req->api, code, req->charge, bytes_out, elapsed_ns / 1000);
  uint64_t slow_ms = n->cfg.slow_request_ms;
  if (slow_ms > 0 && req->env != NULL &&
      req->env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_FETCH_REQ) {
    slow_ms += req->env->fetch_req->max_wait_ms; /* a long poll waits on purpose */
  }
  if (slow_ms > 0 && elapsed_ns >= slow_ms * 1000000u) {
    n->metrics.slow_requests++;
    metrics_request_trace(req, code, now);
  }
}
