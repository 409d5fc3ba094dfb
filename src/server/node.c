/* node.c - one cairnd node: start, the once-a-second duties, stop. See
 * node.h. Requests are handled in dispatch.c and handle_*.c. */
#include "server/node.h"
#include "server/config_value.h"

#include "admin/admin.h"
#include "admin/metrics_node.h"
#include "cluster/rgroup_pace.h"
#include "cluster/waldamage.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/wallclock.h"
#include "server/handlers.h"
#include "kafka/kafka_port.h"

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include <sys/stat.h>

static void node_set_errmsg(struct node *n, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void node_set_errmsg(struct node *n, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(n->errmsg, sizeof n->errmsg, fmt, ap);
  va_end(ap);
}

/* ---- the data dir's identity (<data>/NODE) ----
 * Two lines, "node_id=N" and "cluster_id=ID" (empty until the node has seen
 * the cluster's id). Replaced atomically. */

static int node_id_save(struct node *n)
{
  char buf[128 + META_CLUSTER_ID_MAX];
  int len = snprintf(buf, sizeof buf, "node_id=%" PRIu64 "\ncluster_id=%s\n", n->cfg.node_id,
                     n->cluster_id);
  int rv = fs_replace_file(n->cfg.data_dir, NODE_ID_FILE, buf, (size_t)len);
  if (rv != 0) {
    node_set_errmsg(n, "%s/%s: %s", n->cfg.data_dir, NODE_ID_FILE, cairn_strerror(rv));
  }
  return rv;
}

static int node_id_parse(struct node *n, char *text)
{
  uint64_t id = 0;
  bool have_id = false;
  for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    if (strncmp(line, "node_id=", 8) == 0) {
      char *end = NULL;
      id = strtoull(line + 8, &end, 10);
      have_id = *end == '\0' && id != 0;
    } else if (strncmp(line, "cluster_id=", 11) == 0) {
      snprintf(n->cluster_id, sizeof n->cluster_id, "%s", line + 11);
    }
  }
  if (!have_id) {
    node_set_errmsg(n, "%s/%s: no valid node_id line: not a cairnd data dir, or damaged",
                    n->cfg.data_dir, NODE_ID_FILE);
    return CAIRN_ECORRUPT;
  }
  if (id != n->cfg.node_id) {
    node_set_errmsg(n,
                    "data dir %s belongs to node %" PRIu64 ", not %" PRIu64
                    " (use that node id, or another data dir)",
                    n->cfg.data_dir, id, n->cfg.node_id);
    return CAIRN_EINVAL;
  }
  return 0;
}

/* Checks the data dir is this node's, or claims an empty one. */
static int node_id_load(struct node *n)
{
  uint8_t *buf = NULL;
  size_t len = 0;
  int rv = fs_read_file(n->cfg.data_dir, NODE_ID_FILE, 4096, &buf, &len);
  if (rv == -ENOENT) {
    return node_id_save(n);
  }
  if (rv != 0) {
    node_set_errmsg(n, "%s/%s: %s", n->cfg.data_dir, NODE_ID_FILE, cairn_strerror(rv));
    return rv;
  }
  char *text = malloc(len + 1);
  if (text == NULL) {
    free(buf);
    return CAIRN_ENOMEM;
  }
  memcpy(text, buf, len);
  text[len] = '\0';
  free(buf);
  rv = node_id_parse(n, text);
  free(text);
  return rv;
}

/* ---- start ---- */

static void node_on_meta_change(struct controller *ctl, void *data);
static void node_on_tick(uv_timer_t *t);
static void node_follow_clock_offset(struct node *n);
static void node_dispatch(struct conn_request *req, void *data);

static void node_part_applied(struct rgroup *rg)
{
  struct part *p = rg->owner_data;
  struct node *n = p->owner->data;
  metrics_node_applied(n, p); /* its lag sample */
  node_wake_fetches(n, p);
}

/* A hosted replica started leading: its lag samples start from its log's
 * end now, so that a follower already behind it is measured from there
 * (the admin port samples only replicas listed by applies or this). */
static void node_part_leading(struct rgroup *rg)
{
  struct part *p = rg->owner_data;
  struct node *n = p->owner->data;
  metrics_node_applied(n, p);
  /* The controller learns of the new leader at the next tick, not a
   * heartbeat period later: clients find it (and a held CreateTopic
   * answer, topic_wait.h, goes out) sooner. At most one heartbeat per
   * tick however many groups start leading. */
  n->last_heartbeat_ms = 0;
}

static bool node_host_is_loopback(const char *h)
{
  return strncmp(h, "127.", 4) == 0 || strcmp(h, "::1") == 0 || strcmp(h, "localhost") == 0;
}

/* Says at start who can reach the client port: only this host (the
 * default), or the network, loudly when without TLS or authentication;
 * and loudly when the admin port is open to the network without a token. */
static void node_say_exposure(struct node *n)
{
  if (!node_host_is_loopback(n->cfg.admin_listen.host) && n->cfg.admin_token_file[0] == '\0') {
    log_warn("node",
             "WARNING: admin port %s is open to the network without --admin-token-file: anyone "
             "who reaches it can read the cluster's metrics and layout (docs/security.md)",
             n->cfg.admin_listen.str);
  }
  const char *h = n->cfg.listen.host;
  bool loopback = node_host_is_loopback(h);
  bool tls = n->cfg.tls_cert[0] != '\0';
  if (loopback) {
    log_info("node", "client port %s: this host only%s", n->cfg.listen.str,
             tls || n->auth_required ? "" : " (no TLS, no authentication: docs/security.md)");
    return;
  }
  if (!tls || !n->auth_required) {
    log_warn("node",
             "WARNING: client port %s is open to the network %s%s%s: anyone who reaches it can "
             "%s (docs/security.md: --tls-cert, --auth required)",
             n->cfg.listen.str, !tls ? "without TLS" : "", !tls && !n->auth_required ? " and " : "",
             !n->auth_required ? "without authentication" : "",
             !n->auth_required ? "read, write, create and delete topics" : "read the traffic");
  }
}

/* Reads a secret file (--cluster-secret-file, --admin-token-file), if path
 * is set, into *key and *len (chs_key_load's rules). */
static int node_load_secret(struct node *n, const char *path, uint8_t **key, size_t *len)
{
  if (path[0] == '\0') {
    return 0;
  }
  bool warned = false;
  char why[NODE_ERRMSG_SIZE];
  int rv = chs_key_load(path, key, len, &warned, why, sizeof why);
  if (rv != 0) {
    node_set_errmsg(n, "%s", why);
    return rv;
  }
  if (warned) {
    log_warn("node", "%s", why);
  }
  return 0;
}

/* A peer node's process was seen gone: its partitions' followers here
 * elect at once (docs/replication.md, "Failover"). */
static void node_on_node_gone(struct nodewatch *nw, uint64_t node_id, void *data)
{
  (void)nw;
  struct node *n = data;
  if (n->state == NODE_RUNNING) {
    parts_node_gone(&n->parts, node_id);
  }
}

/* Watches the controller voters until the metadata names every node. */
static int node_watch_start(struct node *n)
{
  int rv = nwatch_init(&n->nw, n->loop, &n->tr, n->cfg.node_id, n->cfg.advertise_cluster.str,
                       node_on_node_gone, n);
  if (rv != 0) {
    node_set_errmsg(n, "cluster address %s: too long", n->cfg.advertise_cluster.str);
    return rv;
  }
  uint64_t ids[CONFIG_MAX_VOTERS];
  const char *addrs[CONFIG_MAX_VOTERS];
  for (size_t i = 0; i < n->cfg.voters_len; i++) {
    ids[i] = n->cfg.voters[i].id;
    addrs[i] = n->cfg.voters[i].addr.str;
  }
  rv = nwatch_set_peers(&n->nw, ids, addrs, n->cfg.voters_len);
  if (rv != 0) {
    node_set_errmsg(n, "watching the other nodes: %s", cairn_strerror(rv));
  }
  return rv;
}

/* Watches every node the metadata names and has not removed. */
static void node_watch_peers(struct node *n, const struct meta_state *st)
{
  uint64_t *ids = malloc((st->nnodes + 1) * sizeof *ids);
  const char **addrs = malloc((st->nnodes + 1) * sizeof *addrs);
  size_t k = 0;
  for (size_t i = 0; ids != NULL && addrs != NULL && i < st->nnodes; i++) {
    if (st->nodes[i].state != META_NODE_REMOVED) {
      ids[k] = st->nodes[i].id;
      addrs[k++] = st->nodes[i].cluster_addr;
    }
  }
  if (ids != NULL && addrs != NULL && k > 0) {
    int rv = nwatch_set_peers(&n->nw, ids, addrs, k);
    (void)rv; /* out of memory: the peers already watched stay; next reconcile */
  }
  free(ids);
  free(addrs);
}

static int node_start_ports(struct node *n)
{
  int rv = node_load_secret(n, n->cfg.cluster_secret_file, &n->cluster_key, &n->cluster_key_len);
  if (rv != 0) {
    return rv;
  }
  rv = transport_init(&n->tr, n->loop, n->cfg.cluster_listen.str);
  if (rv != 0) {
    node_set_errmsg(n, "cluster port %s: %s", n->cfg.cluster_listen.str, n->tr.errmsg);
    return rv;
  }
  if (n->cluster_key != NULL) {
    transport_set_key(&n->tr, n->cluster_key, n->cluster_key_len);
    log_info("node", "cluster port: authenticated handshake with the key of %s",
             n->cfg.cluster_secret_file);
  }
  if (n->cfg.cluster_listen.port == 0) {
    rv = config_set_bound_port(&n->cfg, CONFIG_CLUSTER, (uint16_t)transport_port(&n->tr));
  }
  if (rv == 0) {
    rv = node_watch_start(n);
  }
  n->auth_required = strcmp(n->cfg.auth, "required") == 0;
  char azwhy[NODE_ERRMSG_SIZE];
  if (authz_parse_super_users(&n->authz, n->cfg.super_users, azwhy, sizeof azwhy) != 0) {
    node_set_errmsg(n, "--super-users: %s", azwhy);
    return CAIRN_ECONFIG;
  }
  n->authz.enabled = strcmp(n->cfg.authorizer, "acl") == 0;
  node_say_exposure(n);
  if (n->authz.enabled) {
    log_info("node", "client port: requests checked against the ACLs (%zu super-user%s%s%s)",
             n->authz.nsuper, n->authz.nsuper == 1 ? "" : "s", n->authz.nsuper > 0 ? ": " : "",
             n->cfg.super_users);
  }
  if (n->auth_required) {
    log_info("node", "client port: authentication required (SCRAM-SHA-256 or client "
                     "certificates)");
  }
  if (rv == 0 && n->cfg.tls_cert[0] != '\0') {
    struct tls_config tc = {.cert_file = n->cfg.tls_cert,
                            .key_file = n->cfg.tls_key,
                            .ca_file = n->cfg.tls_ca,
                            .ciphers = n->cfg.tls_ciphers};
    char why[TLS_ERRMSG_SIZE];
    rv = tls_ctx_new(&tc, &n->tls, why, sizeof why);
    if (rv != 0) {
      node_set_errmsg(n, "client port TLS: %s", why);
      return rv;
    }
    log_info("node", "client port: TLS with %s%s", n->cfg.tls_cert,
             tls_ctx_mutual(n->tls) ? ", client certificates required" : "");
  }
  struct listener_config lc = {.bind_address = n->cfg.listen.str,
                               .tls = n->tls,
                               .max_conns = n->cfg.max_connections,
                               .dispatch = node_dispatch,
                               .answered = admin_on_answered,
                               .data = n};
  lc.max_conns_per_ip = n->cfg.max_connections_per_ip;
  conn_limits_default(&lc.limits);
  lc.limits.max_frame_bytes = (uint32_t)n->cfg.max_frame_bytes;
  lc.limits.max_inflight_bytes = n->cfg.max_inflight_bytes;
  lc.limits.idle_timeout_ms = n->cfg.idle_timeout_ms;
  lc.limits.frame_timeout_ms = n->cfg.frame_timeout_ms;
  /* Before a client authenticates it sends Hello, Metadata and SCRAM
   * messages: small frames. A large one then is refused, not buffered. */
  lc.limits.preauth_max_frame_bytes = n->auth_required ? CONN_PREAUTH_MAX_FRAME_BYTES : 0;
  rbudget_init(&n->request_budget, n->cfg.max_queued_request_bytes);
  lc.limits.budget = &n->request_budget;
  if (rv == 0) {
    rv = listener_init(&n->lis, n->loop, &lc);
    if (rv != 0) {
      node_set_errmsg(n, "client port %s: %s", n->cfg.listen.str, n->lis.errmsg);
    }
  }
  if (rv == 0 && n->cfg.listen.port == 0) {
    rv = config_set_bound_port(&n->cfg, CONFIG_CLIENT, (uint16_t)n->lis.port);
  }
  if (rv == 0 && !config_addr_is_off(&n->cfg.external_listen)) {
    /* The same client protocol and limits; only the addresses Metadata
     * names differ (node_client_address_via). */
    lc.bind_address = n->cfg.external_listen.str;
    rv = listener_init(&n->ext_lis, n->loop, &lc);
    if (rv != 0) {
      node_set_errmsg(n, "external client port %s: %s", n->cfg.external_listen.str,
                      n->ext_lis.errmsg);
    } else if (n->cfg.external_listen.port == 0) {
      rv = config_set_bound_port(&n->cfg, CONFIG_EXTERNAL, (uint16_t)n->ext_lis.port);
    }
    if (rv == 0) {
      log_info("node", "external client port %s, advertised as %s", n->cfg.external_listen.str,
               n->cfg.external_advertise.str);
    }
  }
  if (rv == 0) {
    rv = kafka_port_start(n);
  }
  if (rv == 0) {
    rv = node_load_secret(n, n->cfg.admin_token_file, &n->admin_token, &n->admin_token_len);
  }
  if (rv == 0) {
    rv = admin_start(n, &n->admin);
  }
  return rv;
}

/* Whether <data>/wal holds a segment of the node-wide log. */
static bool node_has_wal(const struct node *n)
{
  char dir[CONFIG_PATH_MAX + 8];
  snprintf(dir, sizeof dir, "%s/wal", n->cfg.data_dir);
  return fs_dir_has_prefix(dir, "wal-");
}

/* Whether some partition replica under <data>/partitions keeps its Raft
 * log in raft_uv's files (<replica>/raft/metadata1 or metadata2, which
 * raft_uv writes at bootstrap and at every term change). */
static bool node_has_group_raft(const struct node *n)
{
  char dir[CONFIG_PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/%s", n->cfg.data_dir, PARTS_DIRNAME);
  DIR *d = opendir(dir);
  if (d == NULL) {
    return false;
  }
  bool found = false;
  struct dirent *de;
  while (!found && (de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') {
      continue;
    }
    char f[CONFIG_PATH_MAX + 300];
    struct stat st;
    for (int i = 1; i <= 2 && !found; i++) {
      snprintf(f, sizeof f, "%s/%.255s/raft/metadata%d", dir, de->d_name, i);
      found = stat(f, &st) == 0;
    }
  }
  closedir(d);
  return found;
}

/* Turns --raft-log auto into the kind the data directory already holds
 * (node for a new one), and refuses a kind that would ignore the other
 * kind's Raft state: the replicas' terms, votes and unapplied entries. */
static int node_resolve_raft_log(struct node *n)
{
  bool wal = node_has_wal(n);
  bool group = node_has_group_raft(n);
  if (strcmp(n->cfg.raft_log, "auto") == 0) {
    snprintf(n->cfg.raft_log, sizeof n->cfg.raft_log, "%s", group && !wal ? "group" : "node");
    log_info("node", "Raft log: %s (--raft-log auto: %s)", n->cfg.raft_log,
             group && !wal ? "the data directory holds per-replica Raft files"
             : wal         ? "the data directory holds the node-wide log"
                           : "a new data directory");
  }
  if (strcmp(n->cfg.raft_log, "group") == 0 && wal) {
    node_set_errmsg(n, "%s/wal holds the node-wide Raft log (written with --raft-log node): "
                       "switching --raft-log on existing data is not supported",
                    n->cfg.data_dir);
    return CAIRN_ECONFIG;
  }
  if (strcmp(n->cfg.raft_log, "node") == 0 && group) {
    node_set_errmsg(n, "%s/%s holds per-replica Raft files (written with --raft-log group): "
                       "switching --raft-log on existing data is not supported; start with "
                       "--raft-log group (or auto)",
                    n->cfg.data_dir, PARTS_DIRNAME);
    return CAIRN_ECONFIG;
  }
  return 0;
}

/* The node-wide Raft log is damaged beyond a torn tail (why: the file and
 * byte): rather than refuse to start, set it aside and start on a new one;
 * every replica that had state in it stays refused until the cluster
 * rebuilt it from its peers (cluster/waldamage.h). why is overwritten on
 * failure. Returns 0 with n->wal open, or the error (why says it). */
static int node_wal_set_aside(struct node *n, const char *wdir, char *why)
{
  char damage[WAL_ERRMSG_SIZE], moved[CONFIG_PATH_MAX + 64], err[WAL_ERRMSG_SIZE];
  snprintf(damage, sizeof damage, "%s", why);
  log_error("node", "the node's Raft log is damaged: %s", damage);
  unsigned marked = 0;
  int rv =
      waldamage_set_aside(n->cfg.data_dir, damage, moved, sizeof moved, &marked, err, sizeof err);
  if (rv != 0) {
    snprintf(why, WAL_ERRMSG_SIZE, "%.200s; setting it aside failed: %.280s", damage, err);
    return rv;
  }
  log_error("node",
            "moved the damaged Raft log to %s and started a new one: the %u partition replicas "
            "that had state in it stay closed, each until its leader has removed it from its "
            "group; then it rejoins empty and is rebuilt from its peers (a replica with no peer "
            "stays refused)",
            moved, marked);
  rv = wal_open(n->loop, wdir, NULL, &n->wal, why);
  return rv;
}

/* The metadata group's log (meta/wal) is damaged beyond a torn tail (why:
 * the file and byte): the node does not refuse to start; the log is set
 * aside after a durable mark (waldamage_set_aside_log) and a new one
 * opened; the mark keeps the metadata replica refused until the cluster
 * rebuilt it (metaheal.h). why is overwritten on failure. Returns 0 with
 * n->meta_wal open, or the error (why says it). */
static int node_meta_wal_set_aside(struct node *n, const char *wdir, char *why)
{
  char damage[WAL_ERRMSG_SIZE], moved[CONFIG_PATH_MAX + 64], err[WAL_ERRMSG_SIZE];
  char mdir[CONFIG_PATH_MAX + 8];
  snprintf(damage, sizeof damage, "%s", why);
  snprintf(mdir, sizeof mdir, "%s/meta", n->cfg.data_dir);
  log_error("node", "the metadata group's Raft log is damaged: %s", damage);
  int rv = waldamage_set_aside_log(mdir, damage, moved, sizeof moved, err, sizeof err);
  if (rv != 0) {
    snprintf(why, WAL_ERRMSG_SIZE, "%.200s; setting it aside failed: %.280s", damage, err);
    return rv;
  }
  log_error("node",
            "moved the damaged metadata log to %s and started a new one: the node's metadata "
            "replica stays refused (no Raft: it neither votes nor acknowledges) until the "
            "controller leader has removed it from the metadata group; then it rejoins empty and "
            "is rebuilt from its peers; the node serves its partitions once it holds the metadata "
            "again",
            moved);
  return wal_open(n->loop, wdir, NULL, &n->meta_wal, why);
}

/* The metadata log opened holds nothing of the group, but the data
 * directory belongs to a cluster (NODE names its id, saved once this
 * replica applied the cluster's Bootstrap): its log was lost (deleted,
 * emptied, cut to nothing), and with it the votes and entries this
 * replica gave. Opened as it is, a configured voter would bootstrap and
 * vote on an empty log; so it is refused like a damaged one (the mark;
 * metaheal.h). A replica that crashed while rejoining empty (before it
 * received anything) is refused again too: one more removal, never an
 * empty voter. Returns 0, or the mark's error (errmsg set). */
static int node_meta_wal_lost(struct node *n, const char *mdir)
{
  struct wal_group_info gi;
  if (n->cluster_id[0] == '\0' || wal_group_info(n->meta_wal, META_GROUP_ID, &gi) == 0) {
    return 0;
  }
  char why[CONFIG_PATH_MAX + META_CLUSTER_ID_MAX + 200], err[WAL_ERRMSG_SIZE];
  snprintf(why, sizeof why,
           "%s/wal: the metadata group's log holds nothing, but this data directory belongs to "
           "cluster %s: the log was lost",
           mdir, n->cluster_id);
  if (waldamage_marked(mdir, NULL, 0)) {
    return 0;
  }
  log_error("node", "%s", why);
  int rv = waldamage_mark(mdir, why, err, sizeof err);
  if (rv != 0) {
    node_set_errmsg(n, "the metadata group's Raft log: %s; marking it refused: %s", why, err);
  }
  return rv;
}

/* This process's refusal id (metaheal.h): its incarnation, so that an OUT
 * answering another process's report is not taken. */
static uint64_t node_refusal_id(const struct node *n)
{
  return n->incarnation;
}

/* Whether <data>/meta holds the metadata group's Raft state in raft_uv's
 * files (metadata1 or metadata2, written at bootstrap and at every term
 * change, before any entry): a data directory of a node that ran before
 * the metadata group moved onto the node's log. */
static bool node_meta_has_uv(const struct node *n)
{
  for (int i = 1; i <= 2; i++) {
    char f[CONFIG_PATH_MAX + 32];
    struct stat st;
    snprintf(f, sizeof f, "%s/meta/metadata%d", n->cfg.data_dir, i);
    if (stat(f, &st) == 0) {
      return true;
    }
  }
  return false;
}

static void node_fatal(struct node *n, const char *msg);

/* The metadata group failed a write to the node's log (ctl_opts.on_fatal):
 * it acknowledges nothing more; the node stops, and a restart replays the
 * log from disk. */
static void node_on_ctl_fatal(struct controller *ctl, void *data)
{
  struct node *n = data;
  (void)ctl;
  char msg[WAL_ERRMSG_SIZE + 160];
  snprintf(msg, sizeof msg,
           "the metadata group's write to the node's Raft log failed (%s): stopping; a "
           "restart replays the log from disk",
           n->meta_wal != NULL && wal_errmsg(n->meta_wal)[0] ? wal_errmsg(n->meta_wal)
                                                              : "see above");
  node_fatal(n, msg);
}

/* Opens the node's log (--raft-log node) for the partitions, and one for
 * the metadata group (meta/wal) unless its data is in raft_uv's files
 * already, before the metadata group starts. */
static int node_open_wal(struct node *n, struct ctl_opts *co)
{
  int rv = node_resolve_raft_log(n);
  if (rv != 0 || strcmp(n->cfg.raft_log, "node") != 0) {
    return rv;
  }
  char wdir[CONFIG_PATH_MAX + 16], why[WAL_ERRMSG_SIZE];
  snprintf(wdir, sizeof wdir, "%s/wal", n->cfg.data_dir);
  rv = wal_open(n->loop, wdir, NULL, &n->wal, why);
  if (rv == CAIRN_ECORRUPT) {
    rv = node_wal_set_aside(n, wdir, why);
  }
  if (rv != 0) {
    node_set_errmsg(n, "the node's Raft log: %s", why);
    return rv;
  }
  if (node_meta_has_uv(n)) {
    log_info("node",
             "metadata group: raft_uv files in %s/meta (kept: written before the "
             "metadata group moved onto a node-wide log)",
             n->cfg.data_dir);
    return 0;
  }
  /* A log of its own, not the partitions': damage there is set aside too,
   * but only the metadata replica is refused and rebuilt (metaheal.h). */
  snprintf(wdir, sizeof wdir, "%s/meta/wal", n->cfg.data_dir);
  rv = wal_open(n->loop, wdir, NULL, &n->meta_wal, why);
  if (rv == CAIRN_ECORRUPT) {
    rv = node_meta_wal_set_aside(n, wdir, why);
  }
  if (rv != 0) {
    node_set_errmsg(n, "the metadata group's Raft log: %s", why);
    return rv;
  }
  co->wal = n->meta_wal;
  co->on_fatal = node_on_ctl_fatal;
  char mdir[CONFIG_PATH_MAX + 8];
  snprintf(mdir, sizeof mdir, "%s/meta", n->cfg.data_dir);
  rv = node_meta_wal_lost(n, mdir);
  if (rv != 0) {
    return rv;
  }
  co->refused = mheal_begin(&n->mheal, mdir, node_refusal_id(n), uv_now(n->loop)) == MHEAL_REFUSED;
  co->no_bootstrap = n->mheal.rebuilt_before;
  return 0;
}

/* The leader's OUT for this process's refusal: the committed metadata
 * configuration lacks this node, so its replica drops the refused state
 * and starts Raft on its empty log, never bootstrapping. */
static void node_meta_rejoin(struct node *n, uint64_t refusal_id)
{
  int rv = mheal_rebuild(&n->mheal, refusal_id, uv_now(n->loop));
  if (rv <= 0) {
    return; /* nothing to do, or logged: the next OUT retries */
  }
  rv = ctl_rejoin(&n->ctl);
  if (rv != 0) {
    char msg[CTL_ERRMSG_SIZE + 64];
    snprintf(msg, sizeof msg, "rejoining the metadata group: %s", n->ctl.errmsg);
    node_fatal(n, msg);
  }
}

/* Frames on the watch connections: metaheal's (metaheal.h), or the
 * coalesced heartbeats' (hbeat.h). */
static void node_on_frame(struct nodewatch *nw, uint64_t sender_id, const uint8_t *payload,
                          size_t len, void *data)
{
  struct node *n = data;
  enum mheal_type type;
  uint64_t id = 0;
  int rv = mheal_decode(payload, len, &type, &id);
  if (rv == CAIRN_EINVAL) {
    hbeat_frame(nw, sender_id, payload, len, &n->hb);
    return;
  }
  if (rv != 0 || n->state != NODE_RUNNING) {
    return; /* malformed: the sender reports again at its next tick */
  }
  if (type == MHEAL_REFUSED_FRAME && ctl_note_refused(&n->ctl, sender_id) == 1) {
    uint8_t out[MHEAL_FRAME];
    mheal_encode(out, MHEAL_OUT_FRAME, id);
    if (nwatch_send(nw, sender_id, out, sizeof out) == 0) {
      log_info("node",
               "node %llu's refused metadata replica is out of the group: told it to "
               "rejoin empty",
               (unsigned long long)sender_id);
    }
  } else if (type == MHEAL_REJOINED_FRAME) {
    ctl_note_rejoined(&n->ctl, sender_id);
  } else if (type == MHEAL_OUT_FRAME) {
    node_meta_rejoin(n, id);
  }
}

static int node_start_groups(struct node *n)
{
  struct ctl_voter voters[CONFIG_MAX_VOTERS];
  for (size_t i = 0; i < n->cfg.voters_len; i++) {
    voters[i].id = n->cfg.voters[i].id;
    voters[i].address = n->cfg.voters[i].addr.str;
  }
  struct ctl_opts co = {.heartbeat_ms = n->cfg.heartbeat_ms,
                        .election_ms = n->cfg.election_ms,
                        .raft_segment_size = n->cfg.raft_segment_bytes,
                        .node_timeout_ms = n->cfg.node_timeout_ms,
                        .replace_delay_ms = n->cfg.replace_delay_ms};
  int rv = node_open_wal(n, &co);
  if (rv != 0) {
    return rv;
  }
  char dir[CONFIG_PATH_MAX + 8];
  snprintf(dir, sizeof dir, "%s/meta", n->cfg.data_dir);
  rv = ctl_open(&n->ctl, n->loop, &n->tr, n->cfg.node_id, n->cfg.advertise_cluster.str, dir, voters,
                (unsigned)n->cfg.voters_len, &co, node_on_meta_change, n);
  if (rv != 0) {
    node_set_errmsg(n, "%s", n->ctl.errmsg);
    return rv;
  }
  struct rgroup_opts ro;
  memset(&ro, 0, sizeof ro);
  ro.heartbeat_ms = n->cfg.heartbeat_ms;
  ro.election_ms = n->cfg.election_ms;
  ro.idle_heartbeat_ms = n->cfg.idle_heartbeat_ms;
  ro.coalesce = strcmp(n->cfg.coalesce_heartbeats, "on") == 0;
  ro.meta_group_commit = strcmp(n->cfg.raft_meta_commit, "group") == 0;
  ro.raft_segment_size = n->cfg.raft_segment_bytes;
  ro.raft_log_budget = n->cfg.raft_log_budget_bytes;
  ro.raft_log_node_budget = n->cfg.raft_log_node_budget_bytes;
  plog_opts_default(&ro.plog);
  ro.pg_conninfo = n->cfg.pg_conninfo;
  ro.pg_password_file = n->cfg.pg_password_file;
  ro.wal = n->wal;
  /* auto is on wherever the mux can be: raft_uv's own log (--raft-log
   * group) keeps raft_uv's connections. */
  bool mux = strcmp(n->cfg.raft_mux, "off") != 0;
  if (mux && n->wal == NULL && strcmp(n->cfg.raft_mux, "on") == 0) {
    log_warn("node", "--raft-mux on needs the node-wide Raft log: the partitions' Raft "
                     "messages use a connection per partition per peer (--raft-log group)");
  }
  if (mux && n->wal != NULL) {
    rv = raftmux_init(&n->mx, n->loop, &n->nw);
    if (rv != 0) {
      node_set_errmsg(n, "multiplexed Raft messages: %s", cairn_strerror(rv));
      return rv;
    }
    ro.mux = &n->mx;
    log_info("node", "partitions' Raft messages: one connection per peer node (--raft-mux %s)",
             n->cfg.raft_mux);
  }
  rv = parts_init(&n->parts, n->loop, &n->tr, n->cfg.node_id, n->cfg.data_dir, &ro);
  if (rv != 0) {
    node_set_errmsg(n, "%s/%s: %s", n->cfg.data_dir, PARTS_DIRNAME, cairn_strerror(rv));
    return rv;
  }
  n->parts.data = n;
  n->parts.on_applied = node_part_applied;
  n->parts.on_leading = node_part_leading;
  /* Beats go out only when coalescing is on; beats of other nodes are
   * answered either way. */
  unsigned period =
      ro.coalesce ? hbeat_period_ms(n->cfg.heartbeat_ms, rgroup_pace_idle_ms(&ro)) : 0;
  hbeat_init(&n->hb, n->loop, &n->parts, &n->nw, n->cfg.node_id, period);
  nwatch_set_frame_cb(&n->nw, node_on_frame, n); /* hbeat's frames and metaheal's */
  return 0;
}

/* What the client ports' admission control looks at (net/admit.h). */
static size_t node_peer_queue(void *data)
{
  struct node *n = data;
  return nwatch_queued_max(&n->nw);
}

int node_start(struct node *n, uv_loop_t *loop, const struct config *cfg)
{
  memset(n, 0, sizeof *n);
  sfault_init(&n->sfaults);
  n->loop = loop;
  n->cfg = *cfg;
  if (getrandom(&n->incarnation, sizeof n->incarnation, 0) != sizeof n->incarnation ||
      n->incarnation == 0) {
    n->incarnation = (uint64_t)uv_hrtime() | 1;
  }
  const char *clock_file = getenv("CAIRN_CLOCK_OFFSET_FILE");
  n->clock_offset_file = clock_file != NULL && clock_file[0] != '\0' ? clock_file : NULL;
  node_follow_clock_offset(n);
  int rv = fs_mkdir_p(cfg->data_dir);
  if (rv != 0) {
    node_set_errmsg(n, "data dir %s: %s", cfg->data_dir, cairn_strerror(rv));
    return rv;
  }
  /* Opening the metadata group may apply entries at once (a restart), and
   * applies schedule a reconcile: the idle handle must exist first. */
  uv_idle_init(loop, &n->reconcile);
  n->reconcile.data = n;
  rv = node_id_load(n);
  if (rv == 0) {
    rv = node_start_ports(n);
  }
  if (rv == 0) {
    rv = node_start_groups(n);
  }
  if (rv != 0) {
    /* The ports and groups are not yet worth a clean stop: the process
     * exits with the message. */
    return rv;
  }
  rv = peer_init(&n->peer, loop, (uint32_t)n->cfg.max_frame_bytes);
  if (rv != 0) {
    return rv;
  }
  if (n->cluster_key != NULL) {
    /* This node's own requests prove the cluster key (CAIRN-NODE), so
     * nodes requiring authentication serve them. */
    peer_set_node_auth(&n->peer, n->cfg.node_id, n->cluster_key, n->cluster_key_len);
  }
  if (n->tls != NULL) {
    /* Other nodes' client ports speak TLS too: this node dials them with
     * its own certificate (their --tls-ca checks it) and checks theirs
     * against its --tls-ca (the system's CAs without one). */
    struct tls_config pc = {.cert_file = n->cfg.tls_cert,
                            .key_file = n->cfg.tls_key,
                            .ca_file = n->cfg.tls_ca,
                            .ciphers = n->cfg.tls_ciphers};
    char why[TLS_ERRMSG_SIZE];
    rv = tls_client_ctx_new(&pc, &n->peer_tls, why, sizeof why);
    if (rv != 0) {
      node_set_errmsg(n, "TLS to other nodes: %s", why);
      return rv;
    }
    peer_set_tls(&n->peer, n->peer_tls);
  }
  coord_init(&n->coord, n);
  twaits_init(&n->twaits, loop, &n->ctl);
  heaptrim_init(&n->heaptrim);
  uv_timer_init(loop, &n->tick);
  n->tick.data = n;
  uv_timer_start(&n->tick, node_on_tick, NODE_TICK_MS, NODE_TICK_MS);
  n->looplag.timer.data = n;
  looplag_start(loop, &n->looplag);
  n->admit.check.data = n;
  admit_start(loop, &n->admit, node_peer_queue, n, &n->request_budget);
  n->state = NODE_RUNNING;
  log_info("node", "node %" PRIu64 " up: clients %s, cluster %s, data %s", n->cfg.node_id,
           n->cfg.advertise_client.str, n->cfg.advertise_cluster.str, n->cfg.data_dir);
  if (ctl_state(&n->ctl)->last_index > 0) {
    /* Restored from the metadata group's snapshot while starting (before
     * RUNNING, so not reconciled then): open what it assigns to this node
     * now, not once a metadata leader is known (controller.c). */
    node_on_meta_change(&n->ctl, n);
  }
  return 0;
}

/* ---- lookups ---- */

bool node_meta_current(struct node *n)
{
  if (ctl_is_leader(&n->ctl)) {
    return ctl_leader_applied_index(&n->ctl) != 0;
  }
  return n->meta_target_index != 0 && ctl_applied_index(&n->ctl) >= n->meta_target_index;
}

const char *node_client_address(struct node *n, uint64_t node_id)
{
  const struct meta_node *nd = meta_node_find(ctl_state(&n->ctl), node_id);
  return nd != NULL && nd->client_addr[0] != '\0' ? nd->client_addr : NULL;
}

bool node_conn_is_external(const struct node *n, const struct conn *c)
{
  return c != NULL && !config_addr_is_off(&n->cfg.external_listen) && c->owner == &n->ext_lis;
}

const char *node_client_address_via(struct node *n, uint64_t node_id, const struct conn *c)
{
  const struct meta_node *nd = meta_node_find(ctl_state(&n->ctl), node_id);
  if (nd != NULL && node_conn_is_external(n, c) && nd->external_addr[0] != '\0') {
    return nd->external_addr;
  }
  return nd != NULL && nd->client_addr[0] != '\0' ? nd->client_addr : NULL;
}

struct part *node_find_part(struct node *n, const char *topic, uint32_t partition,
                            const struct meta_topic **topic_out)
{
  const struct meta_topic *t = meta_topic_find(ctl_state(&n->ctl), topic);
  if (topic_out != NULL) {
    *topic_out = t;
  }
  if (t == NULL || partition >= t->npartitions) {
    return NULL;
  }
  return parts_find(&n->parts, t->id, partition);
}

/* ---- metadata changes ---- */

/* The metadata replica is current: it knows a leader and has applied
 * everything that leader told it is committed. */
static bool node_meta_synced(struct node *n)
{
  uint64_t id = 0;
  const char *addr = NULL;
  ctl_leader(&n->ctl, &id, &addr);
  struct raft *r = &n->ctl.raft;
  return id != 0 && r->commit_index > 0 && raft_last_applied(r) >= r->commit_index;
}

static void node_fatal(struct node *n, const char *msg)
{
  log_error("node", "%s", msg);
  n->exit_code = 2;
  node_stop(n, n->stop_cb);
}

/* A cluster id differing from the data dir's means this dir was made by
 * another cluster: refuse to touch anything in it. */
static bool node_check_cluster_id(struct node *n, const struct meta_state *st)
{
  if (st->cluster_id[0] == '\0') {
    return true;
  }
  if (n->cluster_id[0] == '\0') {
    snprintf(n->cluster_id, sizeof n->cluster_id, "%s", st->cluster_id);
    if (node_id_save(n) != 0) {
      log_error("node", "%s", n->errmsg);
    }
    return true;
  }
  if (strcmp(n->cluster_id, st->cluster_id) == 0) {
    return true;
  }
  char msg[CONFIG_PATH_MAX + 2 * META_CLUSTER_ID_MAX + 128];
  snprintf(msg, sizeof msg,
           "data dir %s belongs to cluster %s, but this cluster is %s: refusing it",
           n->cfg.data_dir, n->cluster_id, st->cluster_id);
  node_fatal(n, msg);
  return false;
}

/* The configured controller voters must be the ones the cluster was
 * bootstrapped with. */
static bool node_check_voters(struct node *n, const struct meta_state *st)
{
  if (n->cfg.voters_len == 0 || st->nvoters == 0) {
    return true;
  }
  bool same = n->cfg.voters_len == st->nvoters;
  for (size_t i = 0; same && i < n->cfg.voters_len; i++) {
    bool found = false;
    for (uint32_t j = 0; j < st->nvoters; j++) {
      found = found || st->voters[j] == n->cfg.voters[i].id;
    }
    same = found;
  }
  if (same) {
    return true;
  }
  char have[256] = "", want[256] = "";
  size_t off = 0;
  for (uint32_t j = 0; j < st->nvoters && off < sizeof have; j++) {
    off +=
        (size_t)snprintf(have + off, sizeof have - off, "%s%" PRIu64, j ? "," : "", st->voters[j]);
  }
  off = 0;
  for (size_t i = 0; i < n->cfg.voters_len && off < sizeof want; i++) {
    off += (size_t)snprintf(want + off, sizeof want - off, "%s%" PRIu64, i ? "," : "",
                            n->cfg.voters[i].id);
  }
  char msg[sizeof have + sizeof want + 160];
  snprintf(msg, sizeof msg,
           "--voters names nodes %s but the cluster's controller voters are %s: every node must "
           "be given the same voter list",
           want, have);
  node_fatal(n, msg);
  return false;
}

static void node_on_reconcile(uv_idle_t *h)
{
  struct node *n = h->data;
  uv_idle_stop(h);
  n->reconcile_pending = false;
  if (n->state != NODE_RUNNING) {
    return;
  }
  const struct meta_state *st = ctl_state(&n->ctl);
  if (!node_check_cluster_id(n, st) || !node_check_voters(n, st)) {
    return;
  }
  parts_reconcile(&n->parts, st, node_meta_synced(n));
  node_watch_peers(n, st);
  twait_check(&n->twaits);
}

/* Called from inside the metadata group's apply: the work is deferred to
 * the loop's idle phase. */
static void node_on_meta_change(struct controller *ctl, void *data)
{
  struct node *n = data;
  if (n->state == NODE_RUNNING && !n->reconcile_pending) {
    n->reconcile_pending = true;
    uv_idle_start(&n->reconcile, node_on_reconcile);
  }
}

/* ---- the tick ---- */

static void node_on_bootstrapped(struct ctl_propose *req, int status, const struct meta_result *res)
{
  struct node *n = req->data;
  n->bootstrap_inflight = false;
  if (status != 0 || res == NULL || res->code != 0) {
    log_warn("node", "cluster bootstrap: %s",
             status != 0   ? cairn_strerror(status)
             : res != NULL ? res->msg
                           : "?");
  }
}

static void node_random_id(char *out, size_t len)
{
  uint8_t b[16];
  if (getrandom(b, sizeof b, 0) != sizeof b) {
    uint64_t t = uv_hrtime();
    memcpy(b, &t, 8);
    memcpy(b + 8, &t, 8);
  }
  b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* a version 4 UUID */
  b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
  snprintf(out, len, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
           b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
}

/* The controller leader of a new cluster names it. A data dir that already
 * carries a cluster id (a voter whose metadata log was lost) keeps it. */
static void node_maybe_bootstrap(struct node *n)
{
  const struct meta_state *st = ctl_state(&n->ctl);
  if (st->cluster_id[0] != '\0' || n->bootstrap_inflight || !ctl_is_leader(&n->ctl)) {
    return;
  }
  char id[META_CLUSTER_ID_MAX + 1];
  if (n->cluster_id[0] != '\0') {
    snprintf(id, sizeof id, "%s", n->cluster_id);
  } else {
    node_random_id(id, sizeof id);
  }
  uint64_t voters[CONFIG_MAX_VOTERS];
  for (size_t i = 0; i < n->cfg.voters_len; i++) {
    voters[i] = n->cfg.voters[i].id;
  }
  uint8_t *cmd = NULL;
  size_t len = 0;
  int rv = meta_cmd_bootstrap(id, voters, n->cfg.voters_len, &cmd, &len);
  if (rv == 0) {
    n->bootstrap_req.data = n;
    rv = ctl_propose(&n->ctl, &n->bootstrap_req, cmd, len, node_on_bootstrapped);
    free(cmd);
  }
  if (rv != 0) {
    log_warn("node", "cluster bootstrap: %s", cairn_strerror(rv));
    return;
  }
  n->bootstrap_inflight = true;
  log_info("node", "bootstrapping cluster %s", id);
}

/* Every retention_check_ms: each hosted replica deletes the segments its
 * topic's retention lets go (Kafka's log.retention.check.interval.ms). */
static void node_maybe_retention(struct node *n)
{
  uint64_t now = uv_now(n->loop);
  if (now - n->last_retention_ms < n->cfg.retention_check_ms) {
    return;
  }
  n->last_retention_ms = now;
  uint32_t deleted = parts_retention(&n->parts, ctl_state(&n->ctl), wallclock_ms());
  if (deleted > 0) {
    log_debug("node", "retention removed %u segment(s)", deleted);
  }
}

/* The fault rig's clock jump (wallclock.h): the offset in the file named by
 * CAIRN_CLOCK_OFFSET_FILE applies from the next tick on. */
static void node_follow_clock_offset(struct node *n)
{
  if (n->clock_offset_file == NULL) {
    return;
  }
  int64_t offset = 0;
  int rv = wallclock_read_offset_file(n->clock_offset_file, &offset);
  if (rv != 0 || offset == wallclock_offset_ms()) {
    return;
  }
  wallclock_set_offset_ms(offset);
  log_warn("node", "wall clock offset now %+lld ms (test hook %s)", (long long)offset,
           n->clock_offset_file);
}

/* A rejoining metadata replica is rebuilt once it has applied what its
 * leader committed and holds its role again: voter for a configured
 * voter, standby for any other node. */
static bool node_meta_rejoined(struct node *n)
{
  int role = ctl_self_role(&n->ctl);
  return node_meta_synced(n) && role == (n->ctl.voter ? RAFT_VOTER : RAFT_STANDBY);
}

/* Where a refused or rejoining metadata replica reports (metaheal.h): the
 * configured voters and every node watching this one (a node started
 * without --voters learns the others only so, its metadata being empty).
 * While refused this node watches them all, so that its frames can go out
 * (its metadata names no peer to watch). */
static void node_meta_heal_tick(struct node *n)
{
  if (n->mheal.state != MHEAL_REFUSED && n->mheal.state != MHEAL_JOINING) {
    return;
  }
  enum { MAX = CONFIG_MAX_VOTERS + 64 };
  uint64_t ids[MAX];
  const char *addrs[MAX];
  size_t k = 0;
  for (size_t i = 0; i < n->cfg.voters_len; i++) {
    ids[k] = n->cfg.voters[i].id;
    addrs[k++] = n->cfg.voters[i].addr.str;
  }
  uint64_t wids[64];
  const char *waddrs[64];
  size_t nw = nwatch_watchers(&n->nw, wids, waddrs, 64);
  for (size_t i = 0; i < nw; i++) {
    bool dup = false;
    for (size_t j = 0; j < k && !dup; j++) {
      dup = ids[j] == wids[i];
    }
    if (!dup) {
      ids[k] = wids[i];
      addrs[k++] = waddrs[i];
    }
  }
  if (n->mheal.state == MHEAL_REFUSED && k > 0) {
    int rv = nwatch_set_peers(&n->nw, ids, addrs, k);
    (void)rv; /* out of memory: the peers already watched stay */
  }
  mheal_tick(&n->mheal, &n->nw, n->cfg.node_id, ids, k,
             n->mheal.state == MHEAL_JOINING && node_meta_rejoined(n), uv_now(n->loop));
}

static void node_on_tick(uv_timer_t *t)
{
  struct node *n = t->data;
  if (n->state != NODE_RUNNING) {
    return;
  }
  node_follow_clock_offset(n);
  node_meta_heal_tick(n);
  node_maybe_bootstrap(n);
  handle_node_tick(n);
  parts_step_membership(&n->parts, ctl_state(&n->ctl), &n->sfaults);
  parts_mem_tick(&n->parts);
  node_maybe_retention(n);
  heaptrim_tick(&n->heaptrim, uv_now(n->loop));
}

/* ---- requests ---- */

static void node_dispatch(struct conn_request *req, void *data)
{
  struct node *n = data;
  if (n->state != NODE_RUNNING) {
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN, "the node is stopping");
    return;
  }
  if (n->auth_required && req->c->principal[0] == '\0' && !handle_auth_exempt(n, req)) {
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_REQUIRED,
                       "authenticate first (SCRAM-SHA-256, or a client certificate under mutual "
                       "TLS): only Hello and Authenticate are open");
    return;
  }
  dispatch_request(n, req);
}

/* ---- stop ---- */

static void node_stop_step(struct node *n);

static void node_on_peer_closed(struct peer *p)
{
  struct node *n = (struct node *)((char *)p - offsetof(struct node, peer));
  node_stop_step(n);
}

static void node_on_parts_closed(struct parts *ps)
{
  node_stop_step(ps->data);
}

static void node_on_ctl_closed(struct controller *ctl)
{
  struct node *n = (struct node *)((char *)ctl - offsetof(struct node, ctl));
  node_stop_step(n);
}

static void node_on_tr_closed(struct transport *tr)
{
  struct node *n = (struct node *)((char *)tr - offsetof(struct node, tr));
  node_stop_step(n);
}

static void node_on_hb_closed(struct hbeat *hb)
{
  struct node *n = (struct node *)((char *)hb - offsetof(struct node, hb));
  node_stop_step(n);
}

static void node_on_mx_closed(struct raftmux *mx)
{
  struct node *n = (struct node *)((char *)mx - offsetof(struct node, mx));
  node_stop_step(n);
}

static void node_on_nw_closed(struct nodewatch *nw)
{
  struct node *n = (struct node *)((char *)nw - offsetof(struct node, nw));
  node_stop_step(n);
}

static void node_on_lis_closed(struct listener *l)
{
  struct node *n = (struct node *)((char *)l - offsetof(struct node, lis));
  node_stop_step(n);
}

static void node_on_kafka_lis_closed(struct listener *l)
{
  struct node *n = (struct node *)((char *)l - offsetof(struct node, kafka_lis));
  node_stop_step(n);
}

static void node_on_ext_lis_closed(struct listener *l)
{
  struct node *n = (struct node *)((char *)l - offsetof(struct node, ext_lis));
  node_stop_step(n);
}

static void node_on_handle_closed(uv_handle_t *h)
{
  node_stop_step(h->data);
}

static void node_on_wal_closed(void *data)
{
  node_stop_step(data);
}

static void node_on_twaits_closed(void *data) { node_stop_step(data); }

static void node_on_admin_closed(void *data)
{
  node_stop_step(data);
}

/* The stop runs in stages, each started when the previous one is done:
 * clients (answers in flight still go out), partitions (each hands its
 * leadership away first), the peer, the metadata group, the cluster port. */
/* One more close the current stop stage waits for. */
static void node_awaits(struct node *n) { n->parts_open++; }

static void node_stop_step(struct node *n)
{
  if (--n->parts_open > 0) {
    return;
  }
  switch (n->stop_stage++) {
  case 0:
    /* Each close started counts one; the stage's own count, dropped at
     * its end, keeps the stage open while closes are still being started
     * (a hand-kept total went wrong when two changes each added a close). */
    n->parts_open = 1;
    handle_fetch_close_all(n);
    node_awaits(n);
    twaits_close(&n->twaits, node_on_twaits_closed, n);
    node_awaits(n);
    uv_close(looplag_handle(&n->looplag), node_on_handle_closed);
    node_awaits(n);
    uv_close(admit_stop(&n->admit), node_on_handle_closed);
    node_awaits(n);
    admin_close(n->admin, node_on_admin_closed, n);
    coord_close(&n->coord);
    node_awaits(n);
    hbeat_close(&n->hb, node_on_hb_closed); /* before the partitions it walks */
    node_awaits(n);
    uv_close((uv_handle_t *)&n->tick, node_on_handle_closed);
    node_awaits(n);
    uv_close((uv_handle_t *)&n->reconcile, node_on_handle_closed);
    node_awaits(n);
    listener_close(&n->lis, node_on_lis_closed);
    node_awaits(n);
    kafka_port_close(n, node_on_kafka_lis_closed);
    node_awaits(n);
    if (config_addr_is_off(&n->cfg.external_listen)) {
      node_on_ext_lis_closed(&n->ext_lis);
    } else {
      listener_close(&n->ext_lis, node_on_ext_lis_closed);
    }
    node_stop_step(n); /* the stage's own count */
    break;
  case 1:
    n->parts_open = 2;
    parts_close(&n->parts, node_on_parts_closed);
    peer_close(&n->peer, node_on_peer_closed);
    break;
  case 2:
    /* Every partition's Raft has closed: then the metadata group. */
    n->parts_open = 1;
    ctl_close(&n->ctl, node_on_ctl_closed);
    break;
  case 3:
    /* The node's log last: the metadata group may run on it, and its
     * close waited for its requests in the log to call back. */
    n->parts_open = 1;
    if (n->wal != NULL) {
      struct wal *w = n->wal;
      n->wal = NULL;
      node_awaits(n);
      wal_close(w, node_on_wal_closed, n);
    }
    if (n->meta_wal != NULL) {
      struct wal *w = n->meta_wal;
      n->meta_wal = NULL;
      node_awaits(n);
      wal_close(w, node_on_wal_closed, n);
    }
    node_stop_step(n); /* the stage's own count */
    break;
  case 4:
    /* The watches last: until the cluster port closes, peers that see
     * this node's watch connection drop find it still there. */
    n->parts_open = 3;
    raftmux_close(&n->mx, node_on_mx_closed); /* every group closed in stage 1 */
    nwatch_close(&n->nw, node_on_nw_closed);
    transport_close(&n->tr, node_on_tr_closed);
    break;
  default:
    coord_free(&n->coord);
    handle_node_free(n);
    chs_key_free(n->cluster_key, n->cluster_key_len);
    n->cluster_key = NULL;
    chs_key_free(n->admin_token, n->admin_token_len);
    n->admin_token = NULL;
    tls_ctx_free(n->tls);
    n->tls = NULL;
    tls_ctx_free(n->peer_tls);
    n->peer_tls = NULL;
    n->state = NODE_STOPPED;
    metrics_close(&n->metrics);
    log_info("node", "node %" PRIu64 " stopped", n->cfg.node_id);
    if (n->stop_cb != NULL) {
      n->stop_cb(n);
    }
    break;
  }
}

int node_reload_tls(struct node *n)
{
  if (n->tls == NULL) {
    return 0;
  }
  char why[TLS_ERRMSG_SIZE];
  int rv = tls_ctx_reload(n->tls, why, sizeof why);
  if (rv == 0 && n->peer_tls != NULL) {
    rv = tls_ctx_reload(n->peer_tls, why, sizeof why);
  }
  if (rv != 0) {
    log_error("node", "TLS reload failed, the previous certificate stays in use: %s", why);
    return rv;
  }
  log_info("node", "TLS certificate and key reloaded from %s and %s: new connections use them",
           n->cfg.tls_cert, n->cfg.tls_key);
  return 0;
}

void node_stop(struct node *n, node_stop_cb cb)
{
  if (n->state != NODE_RUNNING) {
    return;
  }
  n->state = NODE_STOPPING;
  n->stop_cb = cb;
  log_info("node", "node %" PRIu64 " stopping", n->cfg.node_id);
  n->parts_open = 1;
  n->stop_stage = 0;
  node_stop_step(n);
}
