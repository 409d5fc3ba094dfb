/* handle_node.c - node registration and heartbeats, from both ends.
 *
 * A node registers itself when the metadata does not hold its current
 * incarnation (first start, restart, after removal), and heartbeats the
 * controller leader once a second with the partitions it leads: their Raft
 * term and voters. It sends both to the controller leader's client port,
 * or to its --join address while it knows no leader (that node forwards);
 * when it is the controller leader itself, it calls the leader side
 * directly.
 *
 * The controller leader refuses a registration of an id whose registered
 * incarnation it heard from within the node timeout (NODE_ID_IN_USE: two
 * live processes with one id), and one carrying another cluster's id
 * (CLUSTER_ID_MISMATCH). Heartbeats feed its liveness view and partition
 * reports (ctl_note_heartbeat); a reported leadership newer than the
 * metadata's is proposed as ReportLeader.
 *
 * With a cluster secret (--cluster-secret-file) both requests carry a
 * cluster_proof, an HMAC with the cluster key over what they claim; the
 * leader refuses one without a valid proof (CLUSTER_AUTH_FAILED), so a
 * node without the secret cannot register, and a refused node exits. */
#include "server/handlers.h"

#include "cluster/chs.h"
#include "common/err.h"
#include "common/log.h"
#include "format/endian.h"
#include "net/wire_err.h"
#include "server/config_value.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- proofs with the cluster key ---- */

#define HN_LABEL_REGISTER "cairn node register v1"
#define HN_LABEL_HEARTBEAT "cairn node heartbeat v1"

/* A heartbeat reports every partition the node leads at least this often;
 * in between, only what changed since the report the controller
 * acknowledged. */
#define HN_FULL_REPORT_MS 30000

/* Appends a string as u16 length (clamped: the request is refused anyway
 * when longer) and bytes. */
static size_t hn_put_str(uint8_t *p, const char *str)
{
  size_t n = str != NULL ? strlen(str) : 0;
  if (n > UINT16_MAX) {
    n = UINT16_MAX;
  }
  le_put16(p, (uint16_t)n);
  if (n > 0) {
    memcpy(p + 2, str, n);
  }
  return 2 + n;
}

static size_t hn_str_size(const char *str)
{
  size_t n = str != NULL ? strlen(str) : 0;
  return 2 + (n > UINT16_MAX ? UINT16_MAX : n);
}

/* HMAC over a registration's id, incarnation, addresses, rack and cluster
 * id. Returns 0 or CAIRN_ENOMEM. */
static int hn_register_proof(const struct node *n, const Cairn__Client__NodeRegisterRequest *r,
                             uint8_t mac[CHS_MAC_LEN])
{
  const Cairn__Client__NodeInfo *ni = r->node;
  /* The Kafka address is covered only when there is one, so a node
   * without a Kafka port proves its registration as older nodes do. */
  bool ext = ni->external_address != NULL && ni->external_address[0] != '\0';
  /* Likewise the external address; with one, the Kafka address is always
   * written (maybe empty), so no field can pass for the other. A node with
   * a database writes both addresses (maybe empty), then one byte 1. */
  bool db = ni->has_database;
  ext = ext || db;
  bool kafka = ext || (ni->kafka_address != NULL && ni->kafka_address[0] != '\0');
  size_t len = 16 + hn_str_size(ni->client_address) + hn_str_size(ni->cluster_address) +
               hn_str_size(ni->admin_address) + hn_str_size(ni->rack) + hn_str_size(r->cluster_id) +
               (kafka ? hn_str_size(ni->kafka_address) : 0) +
               (ext ? hn_str_size(ni->external_address) : 0) + (db ? 1 : 0);
  uint8_t *buf = malloc(len);
  if (buf == NULL) {
    return CAIRN_ENOMEM;
  }
  le_put64(buf, ni->id);
  le_put64(buf + 8, r->incarnation);
  size_t at = 16;
  at += hn_put_str(buf + at, ni->client_address);
  at += hn_put_str(buf + at, ni->cluster_address);
  at += hn_put_str(buf + at, ni->admin_address);
  at += hn_put_str(buf + at, ni->rack);
  at += hn_put_str(buf + at, r->cluster_id);
  if (kafka) {
    at += hn_put_str(buf + at, ni->kafka_address);
  }
  if (ext) {
    at += hn_put_str(buf + at, ni->external_address);
  }
  if (db) {
    buf[at++] = 1;
  }
  chs_mac(n->cluster_key, n->cluster_key_len, HN_LABEL_REGISTER, buf, at, mac);
  free(buf);
  return 0;
}

static void hn_heartbeat_proof(const struct node *n, uint64_t node_id, uint64_t incarnation,
                               uint8_t mac[CHS_MAC_LEN])
{
  uint8_t buf[16];
  le_put64(buf, node_id);
  le_put64(buf + 8, incarnation);
  chs_mac(n->cluster_key, n->cluster_key_len, HN_LABEL_HEARTBEAT, buf, sizeof buf, mac);
}

/* True when the proof verifies (or the cluster has no secret). */
static bool hn_proof_ok(const uint8_t expected[CHS_MAC_LEN], ProtobufCBinaryData got)
{
  return got.len == CHS_MAC_LEN && chs_mac_equal(expected, got.data);
}

/* One log line per refused node id and ten seconds (a refused node retries). */
static void hn_log_auth_refused(struct node *n, const char *what, uint64_t node_id,
                                const char *address)
{
  uint64_t now = uv_now(n->loop);
  if (n->auth_refused_id == node_id && now - n->auth_refused_log_ms < 10000) {
    return;
  }
  n->auth_refused_id = node_id;
  n->auth_refused_log_ms = now;
  log_warn("node",
           "%s from node %" PRIu64 " (%s) refused: no valid cluster proof (its "
           "cluster secret is missing or differs)",
           what, node_id, address != NULL ? address : "?");
}

/* ---- leader side: registration ---- */

typedef void (*hn_done_cb)(struct node *n, void *data, Cairn__Client__ErrorCode code,
                           const char *msg);

struct hn_register {
  struct ctl_propose prop;
  struct node *n;
  hn_done_cb done;
  void *data;
};

static void hn_on_registered(struct ctl_propose *prop, int status, const struct meta_result *res)
{
  struct hn_register *op = prop->data;
  struct node *n = op->n;
  hn_done_cb done = op->done;
  void *data = op->data;
  free(op);
  if (status != 0) {
    done(n, data, CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER, cairn_strerror(status));
  } else if (res->code != 0) {
    done(n, data, wire_err_from(res->code), res->msg);
  } else {
    done(n, data, CAIRN__CLIENT__ERROR_CODE__OK, "");
  }
}

/* Checks and proposes a registration; done fires exactly once. */
static void hn_register_apply(struct node *n, const Cairn__Client__NodeRegisterRequest *r,
                              hn_done_cb done, void *data)
{
  const struct meta_state *st = ctl_state(&n->ctl);
  char msg[512];
  if (r->node == NULL || r->node->id == 0 || r->incarnation == 0) {
    done(n, data, CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST, "node id and incarnation needed");
    return;
  }
  if (n->cluster_key != NULL) {
    uint8_t mac[CHS_MAC_LEN];
    if (hn_register_proof(n, r, mac) != 0) {
      done(n, data, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, "out of memory");
      return;
    }
    if (!hn_proof_ok(mac, r->cluster_proof)) {
      hn_log_auth_refused(n, "registration", r->node->id, r->node->cluster_address);
      snprintf(msg, sizeof msg,
               "node %" PRIu64 ": no valid cluster proof; every node of this cluster needs its "
               "cluster secret (--cluster-secret-file)",
               r->node->id);
      done(n, data, CAIRN__CLIENT__ERROR_CODE__CLUSTER_AUTH_FAILED, msg);
      return;
    }
  }
  if (st->cluster_id[0] == '\0') {
    done(n, data, CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER, "the cluster is not bootstrapped yet");
    return;
  }
  if (r->cluster_id[0] != '\0' && strcmp(r->cluster_id, st->cluster_id) != 0) {
    snprintf(msg, sizeof msg, "node %" PRIu64 " has data of cluster %s; this cluster is %s",
             r->node->id, r->cluster_id, st->cluster_id);
    done(n, data, CAIRN__CLIENT__ERROR_CODE__CLUSTER_ID_MISMATCH, msg);
    return;
  }
  const struct meta_node *old = meta_node_find(st, r->node->id);
  uint64_t replaces = 0;
  if (old != NULL && old->incarnation != r->incarnation) {
    if (old->state == META_NODE_ALIVE &&
        ctl_incarnation_is_live(&n->ctl, old->id, old->incarnation)) {
      snprintf(msg, sizeof msg,
               "node id %" PRIu64 " is in use by a live process (clients %s): pick another id",
               old->id, old->client_addr);
      done(n, data, CAIRN__CLIENT__ERROR_CODE__NODE_ID_IN_USE, msg);
      return;
    }
    replaces = old->incarnation;
  }
  struct meta_node_info info = {.node_id = r->node->id,
                                .incarnation = r->incarnation,
                                .client_addr = r->node->client_address,
                                .cluster_addr = r->node->cluster_address,
                                .admin_addr = r->node->admin_address,
                                .kafka_addr = r->node->kafka_address,
                                .external_addr = r->node->external_address,
                                .rack = r->node->rack,
                                .caps = r->node->has_database ? META_NODE_CAP_POSTGRESQL : 0};
  uint8_t *cmd = NULL;
  size_t len = 0;
  int rv = meta_cmd_register_node(&info, replaces, &cmd, &len);
  struct hn_register *op = rv == 0 ? calloc(1, sizeof *op) : NULL;
  if (op == NULL) {
    free(cmd);
    done(n, data, CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST,
         rv != 0 ? cairn_strerror(rv) : "out of memory");
    return;
  }
  op->n = n;
  op->done = done;
  op->data = data;
  op->prop.data = op;
  rv = ctl_propose(&n->ctl, &op->prop, cmd, len, hn_on_registered);
  free(cmd);
  if (rv != 0) {
    free(op);
    done(n, data, CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER, cairn_strerror(rv));
  }
}

/* ---- leader side: heartbeats ---- */

/* A ReportLeader proposal and the claim it carries (ctl_claims.h). */
struct hn_claim {
  struct ctl_propose prop; /* first: the callback's pointer is the claim's */
  struct node *n;
  uint32_t topic_id, partition;
  uint64_t node_id, term;
};

static void hn_on_reported(struct ctl_propose *prop, int status, const struct meta_result *res)
{
  (void)status, (void)res;
  struct hn_claim *c = (struct hn_claim *)prop;
  ctl_claims_end(&c->n->hb_claims, c->topic_id, c->partition, c->node_id, c->term);
  free(c);
}

/* Proposes ReportLeader for a leadership the metadata does not show yet,
 * unless the same claim is in flight already (ctl_claims.h). */
static void hn_report_leader(struct node *n, uint64_t node_id,
                             const Cairn__Client__PartitionReport *pr)
{
  const struct meta_partition *mp =
      meta_partition_find(ctl_state(&n->ctl), pr->topic_id, pr->partition);
  if (mp == NULL || !pr->leader || (mp->leader_id == node_id && mp->leader_term >= pr->term) ||
      mp->leader_term > pr->term) {
    return;
  }
  if (!ctl_claims_take(&n->hb_claims, pr->topic_id, pr->partition, node_id, pr->term)) {
    n->hb_claims_held++;
    return;
  }
  uint8_t *cmd = NULL;
  size_t len = 0;
  struct hn_claim *c = calloc(1, sizeof *c);
  if (c == NULL ||
      meta_cmd_report_leader(pr->topic_id, pr->partition, node_id, pr->term, &cmd, &len) != 0) {
    ctl_claims_end(&n->hb_claims, pr->topic_id, pr->partition, node_id, pr->term);
    free(c);
    return;
  }
  *c = (struct hn_claim){.n = n,
                         .topic_id = pr->topic_id,
                         .partition = pr->partition,
                         .node_id = node_id,
                         .term = pr->term};
  if (ctl_propose(&n->ctl, &c->prop, cmd, len, hn_on_reported) != 0) {
    ctl_claims_end(&n->hb_claims, pr->topic_id, pr->partition, node_id, pr->term);
    free(c);
  }
  free(cmd);
}

/* ---- failed replica stores (cluster/store_faults.h) ---- */

/* After the table changed: the leaders walk their partitions
 * (parts_faults_changed), and a replica of this node's that a leader
 * confirmed out of its group is rebuilt (cluster/partitions.h). */
static void hn_rebuild_watch(struct node *n)
{
  parts_faults_changed(&n->parts, &n->sfaults);
  for (size_t i = 0; i < n->sfaults.n; i++) {
    const struct sfault *f = &n->sfaults.v[i];
    if (f->raft_damaged && f->node_id == n->cfg.node_id && f->rebuild_ready) {
      (void)parts_rebuild(&n->parts, f->topic_id, f->partition, f->since_ms); /* logged */
    }
  }
}

/* On the controller leader: node_id's heartbeat lists the failed stores of
 * its replicas now (all of them: none means every one recovered). Entries
 * of nodes no longer counted are dropped on the way. A refusal a leader
 * confirmed (rebuild_ready) stays confirmed while the node reports the
 * same refusal (same since_ms). */
static void hn_sfault_note(struct node *n, uint64_t node_id, Cairn__Client__StoreFailure *const *v,
                           size_t nv)
{
  const struct meta_state *st = ctl_state(&n->ctl);
  struct sfault_table *t = &n->sfaults;
  struct {
    uint32_t topic_id, partition;
    uint64_t since_ms;
  } ready[SFAULT_MAX];
  size_t nready = 0;
  for (size_t i = 0; i < t->n; i++) {
    if (t->v[i].node_id == node_id && t->v[i].rebuild_ready) {
      ready[nready].topic_id = t->v[i].topic_id;
      ready[nready].partition = t->v[i].partition;
      ready[nready++].since_ms = t->v[i].since_ms;
    }
  }
  sfault_drop_node(t, node_id);
  for (size_t i = 0; i < t->n;) {
    if (sfault_node_counts(st, t->v[i].node_id)) {
      i++;
    } else {
      sfault_drop_node(t, t->v[i].node_id);
    }
  }
  for (size_t i = 0; i < nv && i < SFAULT_MAX; i++) {
    if (!sfault_add(t, node_id, v[i]->topic_id, v[i]->partition, v[i]->since_ms, v[i]->reason)) {
      break;
    }
    struct sfault *f = &t->v[t->n - 1];
    f->raft_damaged = v[i]->raft_damaged;
    for (size_t j = 0; j < nready && f->raft_damaged; j++) {
      f->rebuild_ready |= ready[j].topic_id == f->topic_id && ready[j].partition == f->partition &&
                          ready[j].since_ms == f->since_ms;
    }
  }
  n->sfaults_heard_ms = uv_now(n->loop);
}

/* On the controller leader: a partition leader's confirmations that
 * refused replicas are out of its committed configuration
 * (parts_replica_out). Each marks the matching refusal rebuild_ready; one
 * for another refusal (an older since_ms) marks nothing. */
static void hn_rebuild_note(struct node *n, Cairn__Client__StoreFailure *const *v, size_t nv)
{
  for (size_t i = 0; i < nv && i < SFAULT_MAX; i++) {
    struct sfault *f = sfault_find(&n->sfaults, v[i]->node_id, v[i]->topic_id, v[i]->partition);
    if (f != NULL && f->raft_damaged && f->since_ms == v[i]->since_ms && !f->rebuild_ready) {
      f->rebuild_ready = true;
      log_info("node", "node %llu's replica of topic %u partition %u: out of its group",
               (unsigned long long)f->node_id, f->topic_id, f->partition);
    }
  }
}

/* Points sfp[i] at sfs[i], filled from t's entries of counted nodes.
 * Reasons are borrowed from t. Returns how many (at most SFAULT_MAX). */
static size_t hn_sfault_fill(const struct meta_state *st, const struct sfault_table *t,
                             Cairn__Client__StoreFailure *sfs, Cairn__Client__StoreFailure **sfp)
{
  size_t k = 0;
  for (size_t i = 0; i < t->n; i++) {
    const struct sfault *f = &t->v[i];
    if (!sfault_node_counts(st, f->node_id)) {
      continue;
    }
    cairn__client__store_failure__init(&sfs[k]);
    sfs[k].node_id = f->node_id;
    sfs[k].topic_id = f->topic_id;
    sfs[k].partition = f->partition;
    sfs[k].since_ms = f->since_ms;
    sfs[k].reason = (char *)f->reason;
    sfs[k].raft_damaged = f->raft_damaged;
    sfs[k].rebuild_ready = f->rebuild_ready;
    sfp[k] = &sfs[k];
    k++;
  }
  return k;
}

/* Applies a heartbeat on the controller leader; *seq is what
 * ctl_note_heartbeat returned (0 unless applied). */
static Cairn__Client__ErrorCode hn_heartbeat_apply(struct node *n,
                                                   const Cairn__Client__NodeHeartbeatRequest *hb,
                                                   uint64_t *seq)
{
  *seq = 0;
  if (n->cluster_key != NULL) {
    uint8_t mac[CHS_MAC_LEN];
    hn_heartbeat_proof(n, hb->node_id, hb->incarnation, mac);
    if (!hn_proof_ok(mac, hb->cluster_proof)) {
      hn_log_auth_refused(n, "heartbeat", hb->node_id, NULL);
      return CAIRN__CLIENT__ERROR_CODE__CLUSTER_AUTH_FAILED;
    }
  }
  const struct meta_node *nd = meta_node_find(ctl_state(&n->ctl), hb->node_id);
  if (nd == NULL || nd->incarnation != hb->incarnation) {
    return CAIRN__CLIENT__ERROR_CODE__UNKNOWN_NODE; /* it registers again */
  }
  size_t k = hb->n_partitions;
  if (k > n->hb_apply_cap) {
    struct ctl_report *grown = realloc(n->hb_apply, k * sizeof *grown);
    if (grown == NULL) {
      return CAIRN__CLIENT__ERROR_CODE__UNKNOWN;
    }
    n->hb_apply = grown;
    n->hb_apply_cap = k;
  }
  struct ctl_report *reps = n->hb_apply;
  for (size_t i = 0; i < k; i++) {
    const Cairn__Client__PartitionReport *pr = hb->partitions[i];
    memset(&reps[i], 0, sizeof reps[i]);
    reps[i].topic_id = pr->topic_id;
    reps[i].partition = pr->partition;
    reps[i].replica_epoch = pr->replica_epoch;
    reps[i].term = pr->term;
    reps[i].nvoters = pr->n_voters < META_MAX_REPLICAS ? pr->n_voters : META_MAX_REPLICAS;
    memcpy(reps[i].voters, pr->voters, reps[i].nvoters * sizeof(uint64_t));
    hn_report_leader(n, hb->node_id, pr);
  }
  struct ctl_node_report rep = {.seq = hb->report_seq,
                                 .base = hb->report_base,
                                 .reports = reps,
                                 .n = k,
                                 .stopped = hb->stopped,
                                 .nstopped = hb->n_stopped};
  *seq = ctl_note_heartbeat(&n->ctl, hb->node_id, hb->incarnation, &rep);
  hn_sfault_note(n, hb->node_id, hb->store_failures, hb->n_store_failures);
  hn_rebuild_note(n, hb->rebuild_ready, hb->n_rebuild_ready);
  hn_rebuild_watch(n);
  return CAIRN__CLIENT__ERROR_CODE__OK;
}

/* ---- requests from other nodes ---- */

static void hn_respond_register(struct node *n, void *data, Cairn__Client__ErrorCode code,
                                const char *msg)
{
  struct conn_request *req = data;
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  err.code = code;
  err.message = (char *)msg;
  Cairn__Client__NodeRegisterResponse resp = CAIRN__CLIENT__NODE_REGISTER_RESPONSE__INIT;
  resp.error = &err;
  resp.cluster_id = (char *)ctl_state(&n->ctl)->cluster_id;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_NODE_REGISTER_RESP;
  env.node_register_resp = &resp;
  if (req->canceled) {
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN, "connection closing");
    return;
  }
  conn_respond(req, &env, NULL, 0);
}

void handle_node_register(struct node *n, struct conn_request *req)
{
  if (handle_forward(n, req)) {
    return;
  }
  /* The proposal's callback answers; a conn closing meanwhile drops it
   * (conn keeps req until it is finished). */
  hn_register_apply(n, req->env->node_register_req, hn_respond_register, req);
}

void handle_node_heartbeat(struct node *n, struct conn_request *req)
{
  if (handle_forward(n, req)) {
    return;
  }
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  Cairn__Client__NodeHeartbeatResponse resp = CAIRN__CLIENT__NODE_HEARTBEAT_RESPONSE__INIT;
  err.code = hn_heartbeat_apply(n, req->env->node_heartbeat_req, &resp.report_seq);
  resp.error = &err;
  resp.applied_index = ctl_leader_applied_index(&n->ctl);
  /* The whole table back, so every node's Metadata names every failed
   * store; conn_respond packs it before returning. */
  Cairn__Client__StoreFailure sfs[SFAULT_MAX];
  Cairn__Client__StoreFailure *sfp[SFAULT_MAX];
  if (err.code == CAIRN__CLIENT__ERROR_CODE__OK) {
    resp.n_store_failures = hn_sfault_fill(ctl_state(&n->ctl), &n->sfaults, sfs, sfp);
    resp.store_failures = sfp;
  }
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_NODE_HEARTBEAT_RESP;
  env.node_heartbeat_resp = &resp;
  conn_respond(req, &env, NULL, 0);
}

/* ---- this node's side ---- */

/* A refusal that means this process must not run: another live process
 * has its id, or its data dir is another cluster's. */
static void hn_registered(struct node *n, void *data, Cairn__Client__ErrorCode code,
                          const char *msg)
{
  n->register_inflight = false;
  if (code == CAIRN__CLIENT__ERROR_CODE__OK) {
    log_info("node", "node %" PRIu64 " registered (incarnation %016" PRIx64 ")", n->cfg.node_id,
             n->incarnation);
    return;
  }
  if (code == CAIRN__CLIENT__ERROR_CODE__NODE_ID_IN_USE) {
    /* A process restarted right after a crash finds its previous
     * incarnation still counted live; the controller takes that one over
     * once it has been silent long enough (docs/metadata.md). The old
     * process's last heartbeat can reach the controller leader seconds
     * after its death (4 s once in the fault rig), so its silence starts
     * late: only a refusal lasting past twice the node timeout means
     * another live process (which heartbeats every second and stays
     * refused). */
    uint64_t now = uv_now(n->loop);
    uint64_t grace = 2 * (uint64_t)n->cfg.node_timeout_ms + NODE_HEARTBEAT_MS;
    if (n->id_refused_ms == 0) {
      n->id_refused_ms = now;
      log_warn("node", "registration refused (%s); retrying for up to %" PRIu64 " ms in case "
               "that process is this node's previous one, gone",
               msg, grace);
    }
    if (now - n->id_refused_ms < grace) {
      return;
    }
  }
  if (code == CAIRN__CLIENT__ERROR_CODE__NODE_ID_IN_USE ||
      code == CAIRN__CLIENT__ERROR_CODE__CLUSTER_ID_MISMATCH ||
      code == CAIRN__CLIENT__ERROR_CODE__CLUSTER_AUTH_FAILED) {
    log_error("node", "registration refused: %s", msg);
    n->exit_code = 2;
    node_stop(n, n->stop_cb);
    return;
  }
  log_debug("node", "registration: %s: %s", wire_err_name(code), msg);
}

static void hn_on_register_answer(struct peer_call *call, int status,
                                  const Cairn__Client__Envelope *resp, const uint8_t *payload,
                                  size_t len)
{
  struct node *n = call->data;
  if (status == CAIRN_EAUTH) {
    /* The node there refused this node's CAIRN-NODE proof (peer.c). */
    hn_registered(n, NULL, CAIRN__CLIENT__ERROR_CODE__CLUSTER_AUTH_FAILED,
                  "the cluster refused this node's proof: its cluster secret differs "
                  "(--cluster-secret-file)");
    return;
  }
  if (status != 0) {
    hn_registered(n, NULL, CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER, cairn_strerror(status));
    return;
  }
  const Cairn__Client__Error *e = NULL;
  if (resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_NODE_REGISTER_RESP) {
    e = resp->node_register_resp->error;
  } else if (resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP) {
    e = resp->error_resp;
  }
  hn_registered(n, NULL, e != NULL ? e->code : CAIRN__CLIENT__ERROR_CODE__OK,
                e != NULL && e->message != NULL ? e->message : "");
}

/* Where this node sends its own requests: the controller leader's client
 * port, or the join address while no leader is known. NULL: nowhere yet. */
static const char *hn_target(struct node *n)
{
  uint64_t id = 0;
  const char *addr = NULL;
  ctl_leader(&n->ctl, &id, &addr);
  const char *client = id != 0 ? node_client_address(n, id) : NULL;
  if (client != NULL) {
    return client;
  }
  return n->cfg.join_set ? n->cfg.join.str : NULL;
}

static void hn_node_info(struct node *n, Cairn__Client__NodeInfo *ni)
{
  cairn__client__node_info__init(ni);
  ni->id = n->cfg.node_id;
  ni->client_address = n->cfg.advertise_client.str;
  ni->cluster_address = n->cfg.advertise_cluster.str;
  ni->admin_address = n->cfg.admin_listen.str;
  ni->kafka_address = config_addr_is_off(&n->cfg.kafka_advertise) ? "" : n->cfg.kafka_advertise.str;
  ni->external_address =
      config_addr_is_off(&n->cfg.external_advertise) ? "" : n->cfg.external_advertise.str;
  ni->rack = n->cfg.rack;
  ni->has_database = n->cfg.pg_conninfo[0] != '\0';
}

static void hn_register(struct node *n)
{
  Cairn__Client__NodeInfo ni;
  hn_node_info(n, &ni);
  Cairn__Client__NodeRegisterRequest r = CAIRN__CLIENT__NODE_REGISTER_REQUEST__INIT;
  r.node = &ni;
  r.incarnation = n->incarnation;
  r.cluster_id = n->cluster_id;
  uint8_t proof[CHS_MAC_LEN];
  if (n->cluster_key != NULL) {
    if (hn_register_proof(n, &r, proof) != 0) {
      return; /* out of memory: the next tick tries again */
    }
    r.cluster_proof.data = proof;
    r.cluster_proof.len = sizeof proof;
  }
  n->register_inflight = true;
  if (ctl_is_leader(&n->ctl)) {
    hn_register_apply(n, &r, hn_registered, NULL);
    return;
  }
  const char *target = hn_target(n);
  if (target == NULL) {
    n->register_inflight = false;
    return;
  }
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_NODE_REGISTER;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_NODE_REGISTER_REQ;
  env.node_register_req = &r;
  n->register_call.data = n;
  if (peer_call(&n->peer, target, &n->register_call, &env, NULL, 0, NODE_RPC_TIMEOUT_MS,
                hn_on_register_answer) != 0) {
    n->register_inflight = false;
  }
}

/* One partition this node leads, as its report describes it. */
struct hn_led {
  uint64_t group_id;
  uint32_t topic_id;
  uint32_t partition;
  uint64_t term;
  uint64_t replica_epoch;
  uint64_t voters[META_MAX_REPLICAS];
  uint32_t nvoters;
  bool unconfirmed; /* the metadata does not show this leadership yet */
  struct part *p;   /* valid during the heartbeat that built it only */
};

/* The controller answered the report numbered n->hb_seq (sent) with seq:
 * the report it holds for this node now (0: none, a full one is due). */
static void hn_report_answered(struct node *n, uint64_t seq)
{
  if (seq != 0 && seq == n->hb_seq) {
    struct hn_led *t = n->hb_acked;
    n->hb_acked = n->hb_sent;
    n->hb_sent = t;
    n->hb_nacked = n->hb_nsent;
    n->hb_acked_seq = seq;
    return;
  }
  n->hb_nacked = 0;
  if (n->hb_acked_seq != 0 && !n->hb_sent_full && seq == 0) {
    /* A controller (a new leader, say) that did not hold the report the
     * delta was made on: the full report goes at the next tick. */
    n->last_heartbeat_ms = 0;
  }
  n->hb_acked_seq = 0;
}

/* Keeps the controller leader's table of failed stores, from its answer.
 * A peer's answer is bounded here too (at most SFAULT_MAX, reasons cut). */
static void hn_sfault_copy(struct node *n, const Cairn__Client__NodeHeartbeatResponse *r)
{
  sfault_clear(&n->sfaults);
  for (size_t i = 0; i < r->n_store_failures && i < SFAULT_MAX; i++) {
    const Cairn__Client__StoreFailure *f = r->store_failures[i];
    if (!sfault_add(&n->sfaults, f->node_id, f->topic_id, f->partition, f->since_ms, f->reason)) {
      break;
    }
    n->sfaults.v[n->sfaults.n - 1].raft_damaged = f->raft_damaged;
    n->sfaults.v[n->sfaults.n - 1].rebuild_ready = f->raft_damaged && f->rebuild_ready;
  }
  n->sfaults_heard_ms = uv_now(n->loop);
  hn_rebuild_watch(n);
}

/* The replicas on this node whose store failed now, into sfs/sfp (at most
 * SFAULT_MAX). Reasons are borrowed from the stores: valid until the loop
 * runs again. Returns how many. */
static size_t hn_sfault_own(struct node *n, Cairn__Client__StoreFailure *sfs,
                            Cairn__Client__StoreFailure **sfp)
{
  size_t k = 0;
  for (size_t i = 0; i < n->parts.n && k < SFAULT_MAX; i++) {
    struct part *p = n->parts.v[i];
    struct rgroup_store_failure sf;
    rgroup_store_failure(&p->rg, &sf);
    if (!sf.failed) {
      continue;
    }
    cairn__client__store_failure__init(&sfs[k]);
    sfs[k].node_id = n->cfg.node_id;
    sfs[k].topic_id = p->topic_id;
    sfs[k].partition = p->partition;
    sfs[k].since_ms = sf.since_ms;
    sfs[k].reason = (char *)sf.reason;
    sfp[k] = &sfs[k];
    k++;
  }
  /* Replicas whose Raft files were refused (closed, so not in parts.v). */
  for (size_t i = 0; i < n->parts.ndamaged && k < SFAULT_MAX; i++) {
    const struct part_damaged *d = &n->parts.damaged[i];
    cairn__client__store_failure__init(&sfs[k]);
    sfs[k].node_id = n->cfg.node_id;
    sfs[k].topic_id = d->topic_id;
    sfs[k].partition = d->partition;
    sfs[k].since_ms = d->since_ms;
    sfs[k].reason = (char *)d->reason;
    sfs[k].raft_damaged = true;
    sfp[k] = &sfs[k];
    k++;
  }
  return k;
}

/* Refused replicas of other nodes in partitions this node leads whose
 * committed configuration lacks them, into rr/rrp (no reason). Returns
 * how many. */
static size_t hn_rebuild_confirm(struct node *n, Cairn__Client__StoreFailure *rr,
                                 Cairn__Client__StoreFailure **rrp)
{
  size_t k = 0;
  for (size_t i = 0; i < n->sfaults.n && k < SFAULT_MAX; i++) {
    const struct sfault *f = &n->sfaults.v[i];
    if (!f->raft_damaged || f->node_id == n->cfg.node_id ||
        !parts_replica_out(&n->parts, f->topic_id, f->partition, f->node_id)) {
      continue;
    }
    cairn__client__store_failure__init(&rr[k]);
    rr[k].node_id = f->node_id;
    rr[k].topic_id = f->topic_id;
    rr[k].partition = f->partition;
    rr[k].since_ms = f->since_ms;
    rr[k].raft_damaged = true;
    rrp[k] = &rr[k];
    k++;
  }
  return k;
}

static void hn_on_heartbeat_answer(struct peer_call *call, int status,
                                   const Cairn__Client__Envelope *resp, const uint8_t *payload,
                                   size_t len)
{
  struct node *n = call->data;
  n->heartbeat_inflight = false;
  uint64_t seq = 0;
  if (status == 0 && resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_NODE_HEARTBEAT_RESP) {
    const Cairn__Client__NodeHeartbeatResponse *r = resp->node_heartbeat_resp;
    if (r->error == NULL || r->error->code == CAIRN__CLIENT__ERROR_CODE__OK) {
      seq = r->report_seq;
      if (r->applied_index != 0) {
        n->meta_target_index = r->applied_index;
      }
      hn_sfault_copy(n, r);
    }
  }
  hn_report_answered(n, seq);
}

/* Grows the heartbeat's buffers (n->hb_*) to hold cap reports. */
static int hn_reports_reserve(struct node *n, size_t cap)
{
  if (cap <= n->hb_cap) {
    return 0;
  }
  void **bufs[] = {(void **)&n->hb_acked, (void **)&n->hb_sent, (void **)&n->hb_cur,
                   (void **)&n->hb_reps, (void **)&n->hb_rp, (void **)&n->hb_stopped};
  size_t sizes[] = {sizeof *n->hb_acked, sizeof *n->hb_sent, sizeof *n->hb_cur,
                    sizeof *n->hb_reps, sizeof *n->hb_rp, sizeof *n->hb_stopped};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
    void *grown = realloc(*bufs[i], cap * sizes[i]);
    if (grown == NULL) {
      return CAIRN_ENOMEM; /* what did grow is kept; hb_cap says what all hold */
    }
    *bufs[i] = grown;
  }
  n->hb_cap = cap;
  return 0;
}

/* The partitions this node leads, ascending group id, into n->hb_cur
 * (the report arrays grow as it fills: a third of the replicas lead, so
 * they are not sized by the replicas). Sets *nled. Voters past
 * META_MAX_REPLICAS are left out: the controller keeps no more. Returns
 * 0 or CAIRN_ENOMEM. */
static int hn_led(struct node *n, size_t *nled)
{
  const struct meta_state *st = ctl_state(&n->ctl);
  size_t k = 0;
  for (size_t i = 0; i < n->parts.n; i++) {
    struct part *p = n->parts.v[i];
    if (p->state != PART_OPEN || !rgroup_is_leader(&p->rg)) {
      continue;
    }
    if (k == n->hb_cap && hn_reports_reserve(n, k > 0 ? 2 * k : 64) != 0) {
      return CAIRN_ENOMEM;
    }
    struct hn_led *l = &n->hb_cur[k++];
    l->group_id = p->group_id;
    l->topic_id = p->topic_id;
    l->partition = p->partition;
    l->term = p->rg.raft.current_term;
    const struct meta_partition *mp = meta_partition_find(st, p->topic_id, p->partition);
    l->replica_epoch = mp != NULL ? mp->replica_epoch : 0;
    l->unconfirmed =
        mp == NULL || mp->leader_id != n->cfg.node_id || mp->leader_term < l->term;
    l->p = p;
    const struct raft_configuration *c = &p->rg.raft.configuration;
    l->nvoters = 0;
    for (unsigned j = 0; j < c->n && l->nvoters < META_MAX_REPLICAS; j++) {
      if (c->servers[j].role == RAFT_VOTER) {
        l->voters[l->nvoters++] = c->servers[j].id;
      }
    }
  }
  *nled = k;
  return 0;
}

static bool hn_led_same(const struct hn_led *a, const struct hn_led *b)
{
  return a->term == b->term && a->replica_epoch == b->replica_epoch &&
         a->nvoters == b->nvoters && memcmp(a->voters, b->voters, a->nvoters * sizeof a->voters[0]) == 0;
}

/* Adds l to the heartbeat as a PartitionReport (n->hb_reps[*k]). */
static void hn_put_report(struct node *n, struct hn_led *l, size_t *k)
{
  Cairn__Client__PartitionReport *pr = &n->hb_reps[*k];
  cairn__client__partition_report__init(pr);
  n->hb_rp[(*k)++] = pr;
  pr->topic_id = l->topic_id;
  pr->partition = l->partition;
  pr->term = l->term;
  pr->leader = true;
  pr->replica_epoch = l->replica_epoch;
  pr->voters = l->voters;
  pr->n_voters = l->nvoters;
  struct store_info si;
  store_info(rgroup_store(&l->p->rg), &si);
  pr->high_watermark = si.next_offset;
  pr->log_start_offset = si.start_offset;
}

/* Fills hb with the report: a full one (every partition led) when no
 * report is acknowledged or the last full one is HN_FULL_REPORT_MS old;
 * otherwise a delta on the acknowledged one: the partitions whose report
 * changed, that this node started leading, or whose leadership the
 * metadata does not show yet (so that a ReportLeader that failed is
 * proposed again), and the group ids it no longer leads. Returns 0 or
 * CAIRN_ENOMEM (then no report is due: the acknowledged one stays). */
static int hn_fill_report(struct node *n, Cairn__Client__NodeHeartbeatRequest *hb)
{
  size_t nled = 0;
  int rv = hn_led(n, &nled);
  if (rv != 0) {
    return rv;
  }
  uint64_t now = uv_now(n->loop);
  bool full = n->hb_acked_seq == 0 || now - n->hb_full_ms >= HN_FULL_REPORT_MS;
  size_t k = 0, nstopped = 0;
  if (full) {
    for (size_t i = 0; i < nled; i++) {
      hn_put_report(n, &n->hb_cur[i], &k);
    }
    n->hb_full_ms = now;
  } else {
    size_t a = 0;
    for (size_t i = 0; i < nled; i++) {
      struct hn_led *l = &n->hb_cur[i];
      while (a < n->hb_nacked && n->hb_acked[a].group_id < l->group_id) {
        n->hb_stopped[nstopped++] = n->hb_acked[a++].group_id;
      }
      bool known = a < n->hb_nacked && n->hb_acked[a].group_id == l->group_id;
      if (!known || !hn_led_same(&n->hb_acked[a], l) || l->unconfirmed) {
        hn_put_report(n, l, &k);
      }
      a += known ? 1 : 0;
    }
    while (a < n->hb_nacked) {
      n->hb_stopped[nstopped++] = n->hb_acked[a++].group_id;
    }
  }
  hb->n_partitions = k;
  hb->partitions = n->hb_rp;
  hb->n_stopped = nstopped;
  hb->stopped = n->hb_stopped;
  hb->report_seq = ++n->hb_seq;
  hb->report_base = full ? 0 : n->hb_acked_seq;
  n->hb_sent_full = full;
  /* What this report says becomes the acknowledged one with its answer. */
  struct hn_led *t = n->hb_sent;
  n->hb_sent = n->hb_cur;
  n->hb_cur = t;
  n->hb_nsent = nled;
  return 0;
}

static void hn_heartbeat(struct node *n)
{
  /* hb_stopped holds up to the acknowledged count, which is at most the
   * partitions led at once: the capacity never shrinks. */
  Cairn__Client__NodeHeartbeatRequest hb = CAIRN__CLIENT__NODE_HEARTBEAT_REQUEST__INIT;
  hb.node_id = n->cfg.node_id;
  hb.incarnation = n->incarnation;
  if (hn_fill_report(n, &hb) != 0) {
    return; /* out of memory: the next tick tries again */
  }
  Cairn__Client__StoreFailure sfs[SFAULT_MAX];
  Cairn__Client__StoreFailure *sfp[SFAULT_MAX];
  hb.n_store_failures = hn_sfault_own(n, sfs, sfp);
  hb.store_failures = sfp;
  Cairn__Client__StoreFailure rr[SFAULT_MAX];
  Cairn__Client__StoreFailure *rrp[SFAULT_MAX];
  hb.n_rebuild_ready = hn_rebuild_confirm(n, rr, rrp);
  hb.rebuild_ready = rrp;
  uint8_t proof[CHS_MAC_LEN];
  if (n->cluster_key != NULL) {
    hn_heartbeat_proof(n, hb.node_id, hb.incarnation, proof);
    hb.cluster_proof.data = proof;
    hb.cluster_proof.len = sizeof proof;
  }
  n->last_heartbeat_ms = uv_now(n->loop);
  if (ctl_is_leader(&n->ctl)) {
    uint64_t seq = 0;
    Cairn__Client__ErrorCode code = hn_heartbeat_apply(n, &hb, &seq);
    hn_report_answered(n, code == CAIRN__CLIENT__ERROR_CODE__OK ? seq : 0);
    return;
  }
  /* peer_call packs the request before returning: the buffers are free
   * again for the next heartbeat. */
  const char *target = hn_target(n);
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_NODE_HEARTBEAT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_NODE_HEARTBEAT_REQ;
  env.node_heartbeat_req = &hb;
  n->heartbeat_call.data = n;
  if (target != NULL && peer_call(&n->peer, target, &n->heartbeat_call, &env, NULL, 0,
                                  NODE_RPC_TIMEOUT_MS, hn_on_heartbeat_answer) == 0) {
    n->heartbeat_inflight = true;
  } else {
    hn_report_answered(n, 0);
  }
}

void handle_node_free(struct node *n)
{
  free(n->hb_acked);
  free(n->hb_sent);
  free(n->hb_cur);
  free(n->hb_reps);
  free(n->hb_rp);
  free(n->hb_stopped);
  free(n->hb_apply);
  ctl_claims_free(&n->hb_claims);
  n->hb_acked = n->hb_sent = n->hb_cur = NULL;
  n->hb_reps = NULL;
  n->hb_rp = NULL;
  n->hb_stopped = NULL;
  n->hb_apply = NULL;
  n->hb_nacked = n->hb_nsent = 0;
  n->hb_acked_seq = 0;
  n->hb_cap = 0;
  n->hb_apply_cap = 0;
}

/* A node joining through --join checks first that the cluster there is
 * the one its data dir belongs to. */
static void hn_on_join_hello(struct peer_call *call, int status,
                             const Cairn__Client__Envelope *resp, const uint8_t *payload,
                             size_t len)
{
  struct node *n = call->data;
  n->join_inflight = false;
  if (status == CAIRN_EAUTH) {
    /* The node there refused this node's CAIRN-NODE proof (peer.c). */
    log_error("node",
              "--join %s: the cluster refused this node's proof: its cluster secret "
              "differs (--cluster-secret-file)",
              n->cfg.join.str);
    n->exit_code = 2;
    node_stop(n, n->stop_cb);
    return;
  }
  if (status != 0 || resp->body_case != CAIRN__CLIENT__ENVELOPE__BODY_HELLO_RESP) {
    log_warn("node", "--join %s: %s", n->cfg.join.str,
             status != 0 ? cairn_strerror(status) : "unexpected answer");
    return;
  }
  const char *theirs = resp->hello_resp->cluster_id;
  if (theirs == NULL || theirs[0] == '\0') {
    return; /* that cluster is not bootstrapped yet: ask again */
  }
  if (n->cluster_id[0] != '\0' && strcmp(n->cluster_id, theirs) != 0) {
    log_error("node",
              "data dir %s belongs to cluster %s, but the cluster at %s is %s: refusing to join",
              n->cfg.data_dir, n->cluster_id, n->cfg.join.str, theirs);
    n->exit_code = 2;
    node_stop(n, n->stop_cb);
    return;
  }
  n->join_checked = true;
}

static void hn_join_check(struct node *n)
{
  Cairn__Client__HelloRequest hr = CAIRN__CLIENT__HELLO_REQUEST__INIT;
  hr.min_version = 1;
  hr.max_version = 1;
  hr.client_id = "cairnd-join";
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_HELLO;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_HELLO_REQ;
  env.hello_req = &hr;
  n->join_call.data = n;
  if (peer_call(&n->peer, n->cfg.join.str, &n->join_call, &env, NULL, 0, NODE_RPC_TIMEOUT_MS,
                hn_on_join_hello) == 0) {
    n->join_inflight = true;
  }
}

void handle_node_tick(struct node *n)
{
  if (n->mheal.state == MHEAL_REFUSED) {
    /* No metadata to register against or report on: a registration sent
     * through --join each tick would add an entry a second to the
     * metadata log for as long as the replica stays refused. */
    return;
  }
  if (n->cfg.join_set && !n->join_checked) {
    if (!n->join_inflight) {
      hn_join_check(n);
    }
    return;
  }
  const struct meta_state *st = ctl_state(&n->ctl);
  const struct meta_node *self = meta_node_find(st, n->cfg.node_id);
  bool registered = self != NULL && self->incarnation == n->incarnation;
  if (registered && self->state == META_NODE_REMOVED) {
    /* Decommissioned: it holds nothing and waits to be stopped. A new
     * process (a new incarnation) may register again. */
    return;
  }
  if (!registered) {
    if (!n->register_inflight) {
      hn_register(n);
    }
    return;
  }
  if (!n->heartbeat_inflight && uv_now(n->loop) - n->last_heartbeat_ms >= NODE_HEARTBEAT_MS) {
    hn_heartbeat(n);
  }
}
