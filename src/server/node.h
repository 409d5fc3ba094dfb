/* node.h - one cairnd node: the parts a node is made of, started and
 * stopped together on one libuv loop.
 *
 *   cluster port (transport.h)  <- Raft of every group, catch-up fetches
 *   controller (controller.h)   the metadata group's replica on this node
 *   partitions (partitions.h)   the partition replicas the metadata assigns here
 *   client port (listener.h)    requests, dispatched by api (dispatch.h)
 *   Kafka port (kafka_port.h)   Kafka requests, run through the same handlers
 *   peer (peer.h)               this node's own requests to the controller leader
 *   admin port (admin.h)        metrics, health, JSON views, the status page
 *   coord (group/coord.h)       the consumer groups whose offsets partition
 *                               this node leads
 *
 * Once a second (node_on_tick): the controller leader bootstraps the
 * cluster id if the metadata has none; this node registers itself if the
 * metadata does not hold its current incarnation, heartbeats the
 * controller leader with the partitions it leads, and, as partition leader,
 * steps each group's Raft membership towards the metadata's replica set.
 * Every applied metadata change reconciles the hosted partitions.
 *
 * The data directory:
 *   <data>/NODE         node id and cluster id of this directory (a data dir
 *                       of another node or cluster is refused)
 *   <data>/meta/        the metadata group's Raft log and snapshots
 *   <data>/partitions/  one directory per hosted partition replica
 *
 * Lifecycle:
 *   node_start -> NODE_RUNNING --node_stop--> NODE_STOPPING -> cb -> NODE_STOPPED
 *   (a fatal condition, such as a data dir of another cluster, calls
 *   node_stop itself with exit_code set.)
 *
 * Context: loop thread only. */
#ifndef CAIRN_NODE_H
#define CAIRN_NODE_H

#include "admin/looplag.h"
#include "admin/metrics.h"
#include "cluster/wal.h"
#include "cluster/controller.h"
#include "cluster/ctl_claims.h"
#include "cluster/partitions.h"
#include "cluster/chs.h"
#include "cluster/hbeat.h"
#include "cluster/metaheal.h"
#include "cluster/nodewatch.h"
#include "cluster/raftmux.h"
#include "cluster/store_faults.h"
#include "cluster/transport.h"
#include "common/heaptrim.h"
#include "net/admit.h"
#include "net/listener.h"
#include "net/tls.h"
#include "net/peer.h"
#include "server/config.h"
#include "server/authz_principal.h"
#include "server/group/coord.h"
#include "server/topic_wait.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define NODE_VERSION "0.1.0" /* cairnd --version, cairn_build_info */
#define NODE_TICK_MS 500
#define NODE_HEARTBEAT_MS 1000
#define NODE_RPC_TIMEOUT_MS 5000
#define NODE_ERRMSG_SIZE 512
#define NODE_ID_FILE "NODE"

enum node_state { NODE_RUNNING, NODE_STOPPING, NODE_STOPPED };

struct node;
struct fetch_wait;
struct admin;
typedef void (*node_stop_cb)(struct node *n);

struct node {
  uv_loop_t *loop;
  struct config cfg;
  enum node_state state;
  uint64_t incarnation;      /* random per process start */
  char cluster_id[META_CLUSTER_ID_MAX + 1]; /* of the data dir, "" before known */
  struct transport tr;
  struct nodewatch nw;       /* peers' processes seen gone (cluster/nodewatch.h) */
  struct hbeat hb;           /* coalesced heartbeats over nw (cluster/hbeat.h) */
  struct mheal mheal;        /* the metadata replica after its log was damaged (metaheal.h) */
  struct raftmux mx;         /* --raft-mux: partitions' Raft messages over nw (raftmux.h) */
  uint8_t *cluster_key; /* --cluster-secret-file's key (chs.h), NULL: none */
  size_t cluster_key_len;
  uint8_t *admin_token; /* --admin-token-file's token (chs_key_load), NULL: none */
  size_t admin_token_len;
  bool auth_required;          /* --auth required */
  struct authz authz;          /* --authorizer, --super-users (server/authz.h) */
  struct tls_ctx *peer_tls;     /* TLS of this node's own requests to other nodes, NULL: none */
  struct tls_ctx *tls;          /* the client port's TLS (src/net/tls.h), NULL: plain TCP */
  uint64_t auth_refused_id;     /* node whose unproven request was logged last */
  uint64_t auth_refused_log_ms; /* and when */
  struct controller ctl;
  struct parts parts;
  struct listener lis;
  struct rbudget request_budget; /* shared by lis's and kafka_lis's conns (net/rbudget.h) */
  struct heaptrim heaptrim;      /* freed heap pages given back after bursts (common/heaptrim.h) */
  struct admit admit;            /* holds request_budget while peers' queues are long */
  struct listener kafka_lis; /* the Kafka port (src/kafka/kafka_port.h), when kafka_on */
  struct listener ext_lis;   /* the external client port, when cfg.external_listen is set:
                                the client protocol, with Metadata naming every node's
                                external address (node_client_address_via) */
  bool kafka_on;
  struct peer peer;          /* to the controller leader or the join address */
  struct admin *admin;       /* the admin HTTP port (src/admin/admin.h) */
  struct metrics metrics;    /* counters the request path updates (src/admin/metrics.h) */
  uv_timer_t tick;
  struct looplag looplag; /* cairn_loop_lag_seconds (src/admin/looplag.h) */
  struct wal *wal;        /* --raft-log node: every partition's Raft log (cluster/wal.h) */
  struct wal *meta_wal;   /* --raft-log node: the metadata group's Raft log (meta/wal), NULL
                             when it is in raft_uv's files (a data dir from before) */
  uv_idle_t reconcile;       /* runs a reconcile after metadata changes */
  bool reconcile_pending;
  uint64_t last_heartbeat_ms;
  uint64_t last_retention_ms; /* loop time of the last retention pass */
  const char *clock_offset_file; /* test hook CAIRN_CLOCK_OFFSET_FILE, or NULL */
  bool register_inflight;
  uint64_t id_refused_ms;    /* first NODE_ID_IN_USE answer to this process, 0: none */
  bool heartbeat_inflight;
  uint64_t meta_target_index; /* the controller leader's applied index in its last
                               * heartbeat answer (0: none yet): node_meta_current */
  bool bootstrap_inflight;
  bool join_checked;         /* the --join node's cluster id matches ours */
  bool join_inflight;
  struct peer_call join_call;
  struct peer_call register_call;
  struct peer_call heartbeat_call;
  /* The heartbeat's partition reports (handle_node.c), in buffers kept
   * between heartbeats (freed by handle_node_free): what the controller
   * acknowledged, what the heartbeat in flight says, and the next one. */
  struct hn_led *hb_acked, *hb_sent, *hb_cur;
  size_t hb_nacked, hb_nsent;
  uint64_t hb_seq;             /* the last report's number */
  uint64_t hb_acked_seq;       /* the acknowledged one's, 0: send a full report */
  bool hb_sent_full;
  uint64_t hb_full_ms;         /* loop time of the last full report sent */
  struct Cairn__Client__PartitionReport *hb_reps;
  struct Cairn__Client__PartitionReport **hb_rp;
  uint64_t *hb_stopped;
  size_t hb_cap;
  struct ctl_report *hb_apply; /* the controller leader's copy of one heartbeat's */
  size_t hb_apply_cap;
  struct ctl_claims hb_claims; /* ReportLeader proposals in flight (zeroed: empty) */
  uint64_t hb_claims_held;     /* heartbeats' claims not proposed again: one in flight */
  /* Every node's failed replica stores (cluster/store_faults.h): on the
   * controller leader, what each node's heartbeats said; elsewhere, the
   * copy from the last heartbeat answer (handle_node.c). */
  struct sfault_table sfaults;
  uint64_t sfaults_heard_ms; /* loop time of that answer, 0: none */
  struct ctl_propose bootstrap_req;
  struct fetch_wait *waits;  /* long-polling fetches (handle_fetch.c) */
  struct twaits twaits;      /* CreateTopic answers held until ready (topic_wait.h) */
  struct coord coord;        /* consumer groups this node coordinates */
  int parts_open;            /* parts of the current stop stage still closing */
  int stop_stage;
  int exit_code;             /* what main returns */
  node_stop_cb stop_cb;
  char errmsg[NODE_ERRMSG_SIZE];
};

/* Opens the data dir, binds the cluster, client and admin ports, starts
 * the metadata group and the hosted partitions. cfg is copied; listen
 * ports of 0 are replaced by the ports bound. Caller allocates n. Returns 0,
 * or a negative code with n->errmsg set (nothing to stop then). */
__attribute__((warn_unused_result)) int node_start(struct node *n, uv_loop_t *loop,
                                                   const struct config *cfg);

/* A clean stop: stops accepting clients, hands off leaderships (each
 * partition replica transfers before closing), lets in-flight requests
 * finish, closes everything, then cb. Callback: fires exactly once; a
 * second call does nothing. */
void node_stop(struct node *n, node_stop_cb cb);

/* Reloads the client port's TLS certificate and key from their files
 * (SIGHUP): new connections use them, open ones keep theirs. Returns 0 (or
 * 0 without TLS), or CAIRN_ETLS with a log line (the old ones stay).
 * Context: loop thread. */
int node_reload_tls(struct node *n);

/* The client address of the node with this id, from the metadata; NULL if
 * unknown. Returns borrowed, valid until the next loop iteration. */
const char *node_client_address(struct node *n, uint64_t node_id);

/* node_client_address as a client connected through c should dial it: a
 * connection that came in through the external client port gets the
 * node's registered external address (the node's client address when it
 * registered none); any other gets the client address. c may be NULL.
 * Returns borrowed, valid until the next loop iteration. */
const char *node_client_address_via(struct node *n, uint64_t node_id, const struct conn *c);

/* Whether c came in through the external client port. */
bool node_conn_is_external(const struct node *n, const struct conn *c);

/* Whether this node's metadata is current: it leads the controller and
 * has applied its term's barrier, or it has applied at least what the
 * controller leader had applied when it last answered a heartbeat. A node
 * that is not current (just restarted, never heard from a leader) cannot
 * say a topic does not exist: it answers "retry" instead. */
bool node_meta_current(struct node *n);

/* A hosted partition by topic name, or NULL (unknown topic, partition out
 * of range, or not hosted here); *topic_out gets the topic (may be NULL
 * then). Returns borrowed, valid until the next loop iteration. */
struct part *node_find_part(struct node *n, const char *topic, uint32_t partition,
                            const struct meta_topic **topic_out);

/* Wakes long-polling fetches waiting on p (its high watermark moved). */
void node_wake_fetches(struct node *n, struct part *p);

#endif
