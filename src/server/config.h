/* config.h - the settings of the node daemon cairnd: defaults, then an INI
 * file (--config), then command-line flags, validated into one struct.
 *
 * Precedence: a flag overrides the file whatever their order on the command
 * line; the file overrides the defaults. Within one layer the specific
 * advertise setting (advertise_client, advertise_cluster) beats the general
 * one (advertise HOST); a flag of either kind beats the file. The keys, their
 * sections and every check are listed in docs/configuration.md.
 *
 * Derived values (filled by config_load, never read from the user as such):
 *   advertise_client / advertise_cluster  when not given: the --advertise
 *       host (else the listen host) with the listen port. A wildcard listen
 *       host (0.0.0.0, ::) without an advertised one is an error.
 *   kafka_listen  when not given: 127.0.0.1:9092 for the single-node
 *       cluster, off otherwise; kafka_advertise follows advertise_client's
 *       rule with the Kafka port.
 *   voters  when not given: this node alone, "<node_id>@<advertise_cluster>"
 *       (the embedded single-node cluster); left empty (voters_len 0) when
 *       join is set, since the node learns the controller from the node it
 *       joins.
 *
 * No global state: any number of configs may be loaded, from any thread,
 * each with its own struct. */
#ifndef CAIRN_SERVER_CONFIG_H
#define CAIRN_SERVER_CONFIG_H

#include "common/log.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CONFIG_HOST_MAX 253    /* a DNS name's length limit */
#define CONFIG_ADDR_MAX 263    /* "[" host "]:" 5-digit port */
#define CONFIG_PATH_MAX 4096   /* bytes of a path, with its terminating NUL */
#define CONFIG_RACK_MAX 64     /* characters of a rack name */
#define CONFIG_MAX_VOTERS 7    /* the controller's limit (CTL_MAX_VOTERS) */
#define CONFIG_ERRMSG_SIZE 512 /* enough for any config_load message */
#define CONFIG_KAFKA_DEFAULT_PORT 9092

/* Positive results of config_load: print and exit 0. */
enum config_result { CONFIG_OK = 0, CONFIG_HELP = 1, CONFIG_VERSION = 2 };

/* A validated network address. */
struct config_addr {
  char host[CONFIG_HOST_MAX + 1]; /* name, IPv4 or IPv6 (no brackets); never empty */
  uint16_t port;                  /* 0 only in a listen address (any free port) or in an
                                     advertised address derived from one */
  char str[CONFIG_ADDR_MAX + 1];  /* "host:port", or "[v6]:port": what peers dial */
};

struct config_voter {
  uint64_t id;             /* >= 1 */
  struct config_addr addr; /* its cluster address */
};

/* Which listener config_set_bound_port() fills in. */
enum config_listener { CONFIG_CLIENT, CONFIG_CLUSTER, CONFIG_ADMIN, CONFIG_KAFKA, CONFIG_EXTERNAL };

/* Every setting of cairnd. Owns no heap memory: copy it freely. Strings are
 * NUL-terminated arrays inside the struct. */
struct config {
  char config_file[CONFIG_PATH_MAX]; /* the --config path, "" when none */

  /* [node] */
  uint64_t node_id;               /* id (--node-id), >= 1; default 1 */
  char data_dir[CONFIG_PATH_MAX]; /* data_dir (--data-dir), never empty; default ./data */
  char rack[CONFIG_RACK_MAX + 1]; /* rack (--rack), "" when none */
  enum log_level log_level;       /* log_level (--log-level): debug..error; default info */
  unsigned slow_request_ms;       /* slow_request_ms (--slow-request-ms): log requests slower
                                     than this with their phases; 0: never; default 1000 */

  /* [network] */
  struct config_addr listen;            /* clients; default 127.0.0.1:7400 */
  struct config_addr cluster_listen;    /* other nodes (Raft, catch-up); default 127.0.0.1:7401 */
  struct config_addr admin_listen;      /* operators; default 127.0.0.1:7402 */
  struct config_addr advertise_client;  /* where clients dial this node (derived, above) */
  struct config_addr advertise_cluster; /* where other nodes dial it (derived, above) */
  struct config_addr kafka_listen;      /* the Kafka port (docs/kafka.md); off (host "",
                                           config_addr_is_off): none. Default
                                           127.0.0.1:9092 for the single-node cluster (no
                                           voters, no join), else off */
  struct config_addr kafka_advertise;   /* what Kafka Metadata names for this node (derived
                                           like advertise_client); off with kafka_listen */
  bool kafka_listen_default;            /* kafka_listen is the default, not asked for: a
                                           port in use is a warning, not a fatal error */
  struct config_addr external_listen;   /* a second client port (Kafka's listeners); off
                                           (config_addr_is_off) unless given */
  struct config_addr external_advertise; /* what Metadata asked through external_listen
                                            names for this node; off with it */

  /* [cluster] */
  struct config_voter voters[CONFIG_MAX_VOTERS]; /* controller voters, distinct ids
                                                    and addresses */
  size_t voters_len;                             /* 0 only when join_set and no voters were given */
  bool join_set;                                 /* join (--join) was given */
  struct config_addr join;                       /* client address of an existing node */
  unsigned node_timeout_ms;  /* a node silent this long is dead; default 10000 */
  unsigned replace_delay_ms; /* a dead node's replicas move after this; default 60000 */
  unsigned offsets_partitions;   /* of __cairn_offsets when this node creates it; default 8 */
  unsigned offsets_replication_factor; /* of __cairn_offsets; 0: min(3, registered nodes) */
  unsigned offsets_retention_ms; /* an empty group's offsets live this long; default 7 days */
  unsigned retention_check_ms;   /* topics' retention applied this often; default 5 min */
  unsigned kafka_auto_create_topics; /* 1: a Kafka Metadata request may create the unknown
                                        topics it names (as Kafka's
                                        auto.create.topics.enable); default 0 */

  /* [limits] */
  unsigned max_connections;  /* client connections; default 1024 */
  size_t max_frame_bytes;    /* one request or response frame; default 16 MiB */
  size_t max_inflight_bytes; /* per connection, >= max_frame_bytes; default 64 MiB */
  unsigned idle_timeout_ms;  /* close a silent client after this, 0: never;
                                default 600000 */
  unsigned max_connections_per_ip; /* from one address; default 512 */
  size_t max_queued_request_bytes; /* all client conns' unanswered request bytes
                                    * (net/rbudget.h); >= 2 * max_frame_bytes;
                                    * default 256 MiB */
  unsigned frame_timeout_ms; /* a request frame begun must be complete within
                                this, 0: never; default 30000 */

  /* [raft] */
  unsigned heartbeat_ms;     /* default 100 */
  unsigned election_ms;      /* >= 2 * heartbeat_ms; default 1000 */
  unsigned idle_heartbeat_ms; /* a quiesced leader's heartbeat; 0 (default):
                                 election_ms / 2 - heartbeat_ms; at most
                                 heartbeat_ms: never quiesce; otherwise
                                 2 * (idle + heartbeat) <= election */
  size_t raft_segment_bytes; /* segment_bytes; multiple of 4096; default 1 MiB */
  size_t raft_log_budget_bytes; /* log_budget_bytes: a partition's Raft entries in
                                   memory, which sets its snapshot interval
                                   (rgroup.h); default 64 MiB */
  size_t raft_log_node_budget_bytes; /* log_node_budget_bytes: every partition's Raft
                                        entries in memory together (rgroup_mem.h);
                                        0: no bound; default 1 GiB */
  char raft_log[CONFIG_PATH_MAX]; /* log (--raft-log): "node" (one wal per node), "group"
                                     (raft_uv's files per partition replica) or "auto"
                                     (default: node unless the data directory holds group
                                     files; node.c resolves it at start) */
  char raft_meta_commit[CONFIG_PATH_MAX];    /* meta_commit (--raft-meta-commit): "group"
                                                (default: group-committed, messages held
                                                until durable; riow_mux.h) or "sync" (term and
                                                vote durable on return, one fdatasync each) */
  char coalesce_heartbeats[CONFIG_PATH_MAX]; /* coalesce_heartbeats (--coalesce-heartbeats):
                                                "on" (default) or "off": idle partition
                                                leaders' heartbeats go as one message per
                                                node pair (cluster/hbeat.h) */
  char raft_mux[CONFIG_PATH_MAX]; /* raft_mux (--raft-mux): "auto" (default: on with the
                                     node-wide log), "on" or "off": with the node-wide log,
                                     partition groups' Raft messages go over one
                                     connection per peer (cluster/raftmux.h) */

  /* [security] */
  char cluster_secret_file[CONFIG_PATH_MAX]; /* cluster_secret_file (--cluster-secret-file):
                                                the cluster port's shared key; "" when none */
  char tls_cert[CONFIG_PATH_MAX];    /* tls_cert (--tls-cert): TLS on the client port; "" none */
  char tls_key[CONFIG_PATH_MAX];     /* tls_key (--tls-key): with tls_cert */
  char tls_ca[CONFIG_PATH_MAX];      /* tls_ca (--tls-ca): verify client certificates; "" none */
  char tls_ciphers[CONFIG_PATH_MAX]; /* tls_ciphers (--tls-ciphers): "" OpenSSL's defaults */
  char auth[CONFIG_PATH_MAX]; /* auth (--auth): "none" (default) or "required" */
  char authorizer[CONFIG_PATH_MAX];  /* authorizer (--authorizer): "none" (default) or "acl" */
  char super_users[CONFIG_PATH_MAX]; /* super_users (--super-users): principals the ACLs do
                                        not restrict, comma-separated; "" none */
  char admin_token_file[CONFIG_PATH_MAX]; /* admin_token_file (--admin-token-file): the
                                             admin port's bearer token; "" when none */
  char pg_conninfo[CONFIG_PATH_MAX];      /* pg_conninfo (--pg-conninfo): the database of
                                             postgresql topics' replicas; "" none */
  char pg_password_file[CONFIG_PATH_MAX]; /* pg_password_file (--pg-password-file); "" none */
};

/* Fills *cfg from the defaults, then the file named by --config (if any),
 * then the other flags in argv[1..argc). argv[0] is the program name and is
 * not read.
 *
 * Returns CONFIG_OK (0) with *cfg complete and validated; CONFIG_HELP or
 * CONFIG_VERSION when --help (-h) or --version is among the arguments (then
 * nothing else is read, and the caller prints config_usage() or its version
 * and exits 0); CAIRN_ECONFIG for a bad flag, value, file line or
 * combination; or a negative errno when the file cannot be read. On a
 * negative result errmsg holds one line saying what is wrong and where: the
 * flag ("--listen: ...") or the file and line ("cairnd.conf:12: ...").
 *
 * Ownership: borrows argv (nothing is kept) and fills the caller's *cfg and
 * errmsg[0..errlen). *cfg holds defaults or partial values after a non-zero
 * result; do not use it then.
 * Context: any thread; no global state is touched (inih's options are its
 * compiled defaults and are not changed). */
__attribute__((warn_unused_result)) int config_load(struct config *cfg, int argc, char **argv,
                                                    char *errmsg, size_t errlen);

/* Writes the --help text to out: every flag, its config-file key and its
 * default. Ownership: borrows out. Context: any thread. */
void config_usage(FILE *out);

/* Writes cfg as a config file that config_load reads back to the same
 * settings: every key, the derived advertise addresses and voters written
 * out explicitly (voters and join commented out when not set). Returns 0;
 * CAIRN_ETOOLARGE when a line would pass inih's 199-character limit (a very
 * long data_dir or host name); CAIRN_EINVAL when data_dir or cluster_secret_file cannot be an INI
 * value (blank space at either end, a line break, or ';' after blank space);
 * CAIRN_ENOMEM; or a negative errno when writing to out failed. Nothing is
 * written unless the whole text could be built.
 * Ownership: borrows both. Context: any thread. */
__attribute__((warn_unused_result)) int config_write(const struct config *cfg, FILE *out);

/* Records the port a listener configured with port 0 actually bound: sets
 * the listen address's port, the advertised address derived from it (if its
 * port is 0) and this node's own voter entry (if its port is 0). Call it
 * after binding, before the addresses are used.
 * Returns 0, or CAIRN_EINVAL when port is 0 or that listener was not
 * configured with port 0.
 * Ownership: borrows cfg. Context: the thread that owns cfg. */
__attribute__((warn_unused_result)) int
config_set_bound_port(struct config *cfg, enum config_listener which, uint16_t port);

#endif
