/* config.c - cairnd's settings: one table of keys drives the flags, the INI
 * file (parsed by inih), the --help text and config_write(); values are
 * checked where they are parsed, combinations once at the end.
 *
 * Flow of config_load:
 *   config_defaults -> config_walk_flags (syntax only: unknown flag, missing
 *   value; finds --config) -> config_read_file (inih, through our line
 *   reader for line numbers and long-line detection) -> config_walk_flags
 *   again (values) -> config_check (derives advertise addresses and voters,
 *   then checks combinations). */
#include "server/config.h"
#include "server/authz_principal.h"

#include "server/config_value.h"

#include "common/err.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CONFIG_KIB ((uint64_t)1024)
#define CONFIG_MIB (CONFIG_KIB * 1024)
#define CONFIG_GIB (CONFIG_MIB * 1024)
#define CONFIG_DAY_MS ((uint64_t)24 * 3600 * 1000)
#define CONFIG_SEGMENT_ALIGN 4096 /* raft writes its segments in blocks */

enum config_kind {
  CONFIG_KIND_ID,     /* uint64_t, >= 1 */
  CONFIG_KIND_UINT,   /* unsigned, min..max */
  CONFIG_KIND_SIZE,   /* size_t, min..max */
  CONFIG_KIND_PATH,   /* char[CONFIG_PATH_MAX], not empty */
  CONFIG_KIND_RACK,   /* char[CONFIG_RACK_MAX + 1], may be empty */
  CONFIG_KIND_LEVEL,  /* enum log_level, debug..error */
  CONFIG_KIND_LISTEN, /* struct config_addr, port 0..65535 */
  CONFIG_KIND_OPT_LISTEN, /* as LISTEN, or "off": host "" (config_addr_off) */
  CONFIG_KIND_ADDR,   /* struct config_addr, port 1..65535 */
  CONFIG_KIND_HOST,   /* the advertise host, kept in the parse state */
  CONFIG_KIND_VOTERS, /* ID@HOST:PORT,... */
  CONFIG_KIND_FILE,   /* char[CONFIG_PATH_MAX], "" when not set: a path or a list */
};

enum config_key_id {
  CONFIG_K_NODE_ID,
  CONFIG_K_DATA_DIR,
  CONFIG_K_RACK,
  CONFIG_K_LOG_LEVEL,
  CONFIG_K_SLOW_REQUEST,
  CONFIG_K_LISTEN,
  CONFIG_K_CLUSTER_LISTEN,
  CONFIG_K_ADMIN_LISTEN,
  CONFIG_K_ADVERTISE,
  CONFIG_K_ADVERTISE_CLIENT,
  CONFIG_K_ADVERTISE_CLUSTER,
  CONFIG_K_KAFKA_LISTEN,
  CONFIG_K_KAFKA_ADVERTISE,
  CONFIG_K_EXTERNAL_LISTEN,
  CONFIG_K_EXTERNAL_ADVERTISE,
  CONFIG_K_VOTERS,
  CONFIG_K_JOIN,
  CONFIG_K_NODE_TIMEOUT,
  CONFIG_K_REPLACE_DELAY,
  CONFIG_K_OFFSETS_PARTITIONS,
  CONFIG_K_OFFSETS_RF,
  CONFIG_K_OFFSETS_RETENTION,
  CONFIG_K_RETENTION_CHECK,
  CONFIG_K_KAFKA_AUTO_CREATE,
  CONFIG_K_MAX_CONNECTIONS,
  CONFIG_K_MAX_FRAME,
  CONFIG_K_MAX_INFLIGHT,
  CONFIG_K_IDLE_TIMEOUT,
  CONFIG_K_MAX_CONNECTIONS_PER_IP,
  CONFIG_K_MAX_QUEUED_REQUEST,
  CONFIG_K_FRAME_TIMEOUT,
  CONFIG_K_HEARTBEAT,
  CONFIG_K_ELECTION,
  CONFIG_K_IDLE_HEARTBEAT,
  CONFIG_K_SEGMENT,
  CONFIG_K_RAFT_LOG_BUDGET,
  CONFIG_K_RAFT_LOG_NODE_BUDGET,
  CONFIG_K_RAFT_LOG,
  CONFIG_K_COALESCE_HEARTBEATS,
  CONFIG_K_RAFT_MUX,
  CONFIG_K_RAFT_META_COMMIT,
  CONFIG_K_CLUSTER_SECRET_FILE,
  CONFIG_K_TLS_CERT,
  CONFIG_K_TLS_KEY,
  CONFIG_K_TLS_CA,
  CONFIG_K_TLS_CIPHERS,
  CONFIG_K_AUTH,
  CONFIG_K_AUTHORIZER,
  CONFIG_K_SUPER_USERS,
  CONFIG_K_ADMIN_TOKEN_FILE,
  CONFIG_K_PG_CONNINFO,
  CONFIG_K_PG_PASSWORD_FILE,
  CONFIG_K_COUNT
};

struct config_key {
  const char *flag;    /* the flag without "--" */
  const char *section; /* its file section */
  const char *name;    /* its file key */
  const char *meta;    /* the value's shape in --help */
  enum config_kind kind;
  size_t offset;     /* into struct config (unused for CONFIG_KIND_HOST) */
  uint64_t min, max; /* numbers only */
  const char *help;
  const char *dflt; /* default text for --help when not printed from the defaults */
};

#define CONFIG_OFF(field) offsetof(struct config, field)

/* Indexed by enum config_key_id. The order is the order of --help, of
 * config_write and of docs/configuration.md. */
static const struct config_key config_keys[CONFIG_K_COUNT] = {
    [CONFIG_K_NODE_ID] = {"node-id", "node", "id", "N", CONFIG_KIND_ID, CONFIG_OFF(node_id), 1,
                          UINT64_MAX, "this node's id, unique in the cluster", NULL},
    [CONFIG_K_DATA_DIR] = {"data-dir", "node", "data_dir", "DIR", CONFIG_KIND_PATH,
                           CONFIG_OFF(data_dir), 0, 0, "where the node keeps its data", NULL},
    [CONFIG_K_RACK] = {"rack", "node", "rack", "NAME", CONFIG_KIND_RACK, CONFIG_OFF(rack), 0, 0,
                       "failure domain; replicas of a partition go to different racks", "none"},
    [CONFIG_K_LOG_LEVEL] = {"log-level", "node", "log_level", "LEVEL", CONFIG_KIND_LEVEL,
                            CONFIG_OFF(log_level), 0, 0, "debug, info, warn or error", NULL},
    [CONFIG_K_SLOW_REQUEST] = {"slow-request-ms", "node", "slow_request_ms", "N", CONFIG_KIND_UINT,
                               CONFIG_OFF(slow_request_ms), 0, CONFIG_DAY_MS,
                               "log requests slower than this, with their phases (0: never)", NULL},
    [CONFIG_K_LISTEN] = {"listen", "network", "listen", "HOST:PORT", CONFIG_KIND_LISTEN,
                         CONFIG_OFF(listen), 0, 0, "client port (port 0: any free port)", NULL},
    [CONFIG_K_CLUSTER_LISTEN] = {"cluster-listen", "network", "cluster_listen", "HOST:PORT",
                                 CONFIG_KIND_LISTEN, CONFIG_OFF(cluster_listen), 0, 0,
                                 "cluster port: Raft and catch-up between nodes", NULL},
    [CONFIG_K_ADMIN_LISTEN] = {"admin-listen", "network", "admin_listen", "HOST:PORT",
                               CONFIG_KIND_LISTEN, CONFIG_OFF(admin_listen), 0, 0,
                               "admin port for operators", NULL},
    [CONFIG_K_ADVERTISE] = {"advertise", "network", "advertise", "HOST", CONFIG_KIND_HOST, 0, 0, 0,
                            "host that clients and other nodes dial; ports from the listen "
                            "addresses",
                            "the listen hosts"},
    [CONFIG_K_ADVERTISE_CLIENT] = {"advertise-client", "network", "advertise_client", "HOST:PORT",
                                   CONFIG_KIND_ADDR, CONFIG_OFF(advertise_client), 0, 0,
                                   "client address other parties dial (overrides advertise)",
                                   "advertise host, listen port"},
    [CONFIG_K_ADVERTISE_CLUSTER] = {"advertise-cluster", "network", "advertise_cluster",
                                    "HOST:PORT", CONFIG_KIND_ADDR, CONFIG_OFF(advertise_cluster), 0,
                                    0, "cluster address other nodes dial (overrides advertise)",
                                    "advertise host, cluster-listen port"},
    [CONFIG_K_KAFKA_LISTEN] = {"kafka-listen", "network", "kafka_listen", "HOST:PORT",
                               CONFIG_KIND_OPT_LISTEN, CONFIG_OFF(kafka_listen), 0, 0,
                               "Kafka protocol port (docs/kafka.md); off: none",
                               "127.0.0.1:9092 for the single-node cluster (no --voters, no "
                               "--join), else off"},
    [CONFIG_K_KAFKA_ADVERTISE] = {"kafka-advertise", "network", "kafka_advertise", "HOST:PORT",
                                  CONFIG_KIND_ADDR, CONFIG_OFF(kafka_advertise), 0, 0,
                                  "Kafka address clients dial, in Metadata answers (overrides "
                                  "advertise)",
                                  "advertise host, kafka-listen port"},
    [CONFIG_K_EXTERNAL_LISTEN] = {"external-listen", "network", "external_listen", "HOST:PORT",
                                  CONFIG_KIND_OPT_LISTEN, CONFIG_OFF(external_listen), 0, 0,
                                  "a second client port, for clients that reach the nodes by "
                                  "other addresses (docs/configuration.md, \"Listeners\"); "
                                  "off: none",
                                  "off"},
    [CONFIG_K_EXTERNAL_ADVERTISE] = {"external-advertise", "network", "external_advertise",
                                     "HOST:PORT", CONFIG_KIND_ADDR, CONFIG_OFF(external_advertise),
                                     0, 0,
                                     "the address clients of the external port dial: what "
                                     "Metadata asked there names for this node",
                                     "advertise host, external-listen port"},
    [CONFIG_K_VOTERS] = {"voters", "cluster", "voters", "ID@HOST:PORT,...", CONFIG_KIND_VOTERS, 0,
                         0, 0, "cluster addresses of the controller voters",
                         "this node alone (none with --join)"},
    [CONFIG_K_JOIN] = {"join", "cluster", "join", "HOST:PORT", CONFIG_KIND_ADDR, CONFIG_OFF(join),
                       0, 0, "client address of any node of an existing cluster", "none"},
    [CONFIG_K_NODE_TIMEOUT] = {"node-timeout-ms", "cluster", "node_timeout_ms", "N",
                               CONFIG_KIND_UINT, CONFIG_OFF(node_timeout_ms), 100, CONFIG_DAY_MS,
                               "a node silent this long is marked dead", NULL},
    [CONFIG_K_REPLACE_DELAY] = {"replace-delay-ms", "cluster", "replace_delay_ms", "N",
                                CONFIG_KIND_UINT, CONFIG_OFF(replace_delay_ms), 0,
                                7 * CONFIG_DAY_MS,
                                "a dead node's replicas are placed elsewhere after this", NULL},
    [CONFIG_K_OFFSETS_PARTITIONS] = {"offsets-partitions", "cluster", "offsets_partitions", "N",
                                     CONFIG_KIND_UINT, CONFIG_OFF(offsets_partitions), 1, 1000,
                                     "partitions of __cairn_offsets, where consumer groups "
                                     "commit (read when the cluster creates it)",
                                     NULL},
    [CONFIG_K_OFFSETS_RF] = {"offsets-replication-factor", "cluster", "offsets_replication_factor",
                             "N", CONFIG_KIND_UINT, CONFIG_OFF(offsets_replication_factor), 1, 7,
                             "replicas of __cairn_offsets (read when the cluster creates it; "
                             "it waits until that many nodes are alive)",
                             "3, or the cluster's node count if smaller"},
    [CONFIG_K_OFFSETS_RETENTION] = {"offsets-retention-ms", "cluster", "offsets_retention_ms", "N",
                                    CONFIG_KIND_UINT, CONFIG_OFF(offsets_retention_ms), 1000,
                                    30 * CONFIG_DAY_MS,
                                    "an empty group's offsets are dropped after this", NULL},
    [CONFIG_K_RETENTION_CHECK] = {"retention-check-ms", "cluster", "retention_check_ms", "N",
                                  CONFIG_KIND_UINT, CONFIG_OFF(retention_check_ms), 100,
                                  CONFIG_DAY_MS,
                                  "how often each replica deletes the segments its topic's "
                                  "retention limits let go",
                                  NULL},
    [CONFIG_K_KAFKA_AUTO_CREATE] = {"kafka-auto-create-topics", "cluster",
                                    "kafka_auto_create_topics", "0|1", CONFIG_KIND_UINT,
                                    CONFIG_OFF(kafka_auto_create_topics), 0, 1,
                                    "1: a Kafka Metadata request naming an unknown topic creates "
                                    "it (when the client allows it)",
                                    NULL},
    [CONFIG_K_MAX_CONNECTIONS] = {"max-connections", "limits", "max_connections", "N",
                                  CONFIG_KIND_UINT, CONFIG_OFF(max_connections), 1, 1000000,
                                  "client connections at once", NULL},
    [CONFIG_K_MAX_FRAME] = {"max-frame-bytes", "limits", "max_frame_bytes", "N", CONFIG_KIND_SIZE,
                            CONFIG_OFF(max_frame_bytes), 4 * CONFIG_KIB, CONFIG_GIB,
                            "largest request or response frame", NULL},
    [CONFIG_K_MAX_INFLIGHT] = {"max-inflight-bytes", "limits", "max_inflight_bytes", "N",
                               CONFIG_KIND_SIZE, CONFIG_OFF(max_inflight_bytes), 4 * CONFIG_KIB,
                               64 * CONFIG_GIB, "bytes of requests in progress per connection",
                               NULL},
    [CONFIG_K_IDLE_TIMEOUT] = {"idle-timeout-ms", "limits", "idle_timeout_ms", "N",
                               CONFIG_KIND_UINT, CONFIG_OFF(idle_timeout_ms), 0, CONFIG_DAY_MS,
                               "close a silent client connection after this (0: never)", NULL},
    [CONFIG_K_MAX_CONNECTIONS_PER_IP] = {"max-connections-per-ip", "limits",
                                         "max_connections_per_ip", "N", CONFIG_KIND_UINT,
                                         CONFIG_OFF(max_connections_per_ip), 1, 1000000,
                                         "client connections at once from one address", NULL},
    [CONFIG_K_MAX_QUEUED_REQUEST] =
        {"max-queued-request-bytes", "limits", "max_queued_request_bytes", "N", CONFIG_KIND_SIZE,
         CONFIG_OFF(max_queued_request_bytes), CONFIG_MIB, 64 * CONFIG_GIB,
         "request bytes received and not yet answered, all client "
         "connections together; reads pause above it",
         NULL},
    [CONFIG_K_FRAME_TIMEOUT] = {"frame-timeout-ms", "limits", "frame_timeout_ms", "N",
                                CONFIG_KIND_UINT, CONFIG_OFF(frame_timeout_ms), 0, CONFIG_DAY_MS,
                                "close a client connection whose request frame is not complete "
                                "this long after it began (0: never)",
                                NULL},
    [CONFIG_K_HEARTBEAT] = {"heartbeat-ms", "raft", "heartbeat_ms", "N", CONFIG_KIND_UINT,
                            CONFIG_OFF(heartbeat_ms), 10, 60000, "Raft leader heartbeat interval",
                            NULL},
    [CONFIG_K_ELECTION] = {"election-ms", "raft", "election_ms", "N", CONFIG_KIND_UINT,
                           CONFIG_OFF(election_ms), 20, 600000,
                           "Raft election timeout, at least twice the heartbeat", NULL},
    [CONFIG_K_IDLE_HEARTBEAT] = {"idle-heartbeat-ms", "raft", "idle_heartbeat_ms", "N",
                                 CONFIG_KIND_UINT, CONFIG_OFF(idle_heartbeat_ms), 0, 300000,
                                 "heartbeat of a partition leader with nothing to replicate "
                                 "(0: election/2 - heartbeat; at most heartbeat: never slower)",
                                 "0 (1000 with the default timings)"},
    [CONFIG_K_SEGMENT] = {"raft-segment-bytes", "raft", "segment_bytes", "N", CONFIG_KIND_SIZE,
                          CONFIG_OFF(raft_segment_bytes), 64 * CONFIG_KIB, CONFIG_GIB,
                          "size of Raft's log segments, a multiple of 4096", NULL},
    [CONFIG_K_RAFT_LOG_BUDGET] = {"raft-log-budget-bytes", "raft", "log_budget_bytes", "N",
                                  CONFIG_KIND_SIZE, CONFIG_OFF(raft_log_budget_bytes),
                                  4 * CONFIG_KIB, 16 * CONFIG_GIB,
                                  "bytes of entries a partition's Raft keeps in memory; sets "
                                  "how often it snapshots",
                                  NULL},
    [CONFIG_K_RAFT_LOG_NODE_BUDGET] = {"raft-log-node-budget-bytes", "raft",
                                       "log_node_budget_bytes", "N", CONFIG_KIND_SIZE,
                                       CONFIG_OFF(raft_log_node_budget_bytes), 0, 1024 * CONFIG_GIB,
                                       "bytes of entries all the node's partitions' Raft keep "
                                       "in memory; above it they snapshot and compact sooner "
                                       "(0: no bound)",
                                       NULL},
    [CONFIG_K_RAFT_LOG] = {"raft-log", "raft", "log", "MODE", CONFIG_KIND_FILE,
                           CONFIG_OFF(raft_log), 0, 0,
                           "node: one write-ahead log per node for every partition "
                           "(cluster/wal.h); group: a Raft log per partition replica (raft_uv's "
                           "files); auto (default): node for a new data directory, else the "
                           "kind the directory holds",
                           NULL},
    [CONFIG_K_COALESCE_HEARTBEATS] = {"coalesce-heartbeats", "raft", "coalesce_heartbeats",
                                      "on|off", CONFIG_KIND_FILE, CONFIG_OFF(coalesce_heartbeats),
                                      0, 0,
                                      "idle partition leaders stop Raft's heartbeats; one "
                                      "message per node pair stands in for them "
                                      "(docs/replication.md, \"Coalesced heartbeats\")",
                                      NULL},
    [CONFIG_K_RAFT_MUX] = {"raft-mux", "raft", "raft_mux", "auto|on|off", CONFIG_KIND_FILE,
                           CONFIG_OFF(raft_mux), 0, 0,
                           "with --raft-log node, the partitions' Raft messages go over one "
                           "connection per peer node instead of one per partition per peer; "
                           "auto (default): on with the node-wide log "
                           "(docs/replication.md, \"Multiplexed Raft messages\")",
                           NULL},
    [CONFIG_K_RAFT_META_COMMIT] = {"raft-meta-commit", "raft", "meta_commit", "sync|group",
                                   CONFIG_KIND_FILE, CONFIG_OFF(raft_meta_commit), 0, 0,
                                   "with the mux on: sync (default): a partition replica's Raft "
                                   "term and vote are durable when written (one fdatasync on the "
                                   "loop each); group: group-committed with the other writes, "
                                   "the replica's messages held until they are "
                                   "(docs/replication.md, \"Term and vote by group commit\")",
                                   NULL},
    [CONFIG_K_CLUSTER_SECRET_FILE] = {"cluster-secret-file", "security", "cluster_secret_file",
                                      "PATH", CONFIG_KIND_FILE, CONFIG_OFF(cluster_secret_file), 0,
                                      0,
                                      "file holding the cluster's shared secret (16+ bytes); "
                                      "set on every node or none (docs/security.md)",
                                      "none"},
    [CONFIG_K_TLS_CERT] = {"tls-cert", "security", "tls_cert", "PATH", CONFIG_KIND_FILE,
                           CONFIG_OFF(tls_cert), 0, 0,
                           "PEM certificate (chain) of the client port: clients speak TLS",
                           "none (plain TCP)"},
    [CONFIG_K_TLS_KEY] = {"tls-key", "security", "tls_key", "PATH", CONFIG_KIND_FILE,
                          CONFIG_OFF(tls_key), 0, 0, "PEM private key of --tls-cert", "none"},
    [CONFIG_K_TLS_CA] = {"tls-ca", "security", "tls_ca", "PATH", CONFIG_KIND_FILE,
                         CONFIG_OFF(tls_ca), 0, 0,
                         "PEM CAs: clients must present a certificate they signed (mutual TLS)",
                         "none"},
    [CONFIG_K_TLS_CIPHERS] = {"tls-ciphers", "security", "tls_ciphers", "LIST", CONFIG_KIND_FILE,
                              CONFIG_OFF(tls_ciphers), 0, 0,
                              "OpenSSL cipher list for TLS 1.2 (1.3 uses OpenSSL's suites)",
                              "OpenSSL's defaults"},
    [CONFIG_K_AUTH] = {"auth", "security", "auth", "MODE", CONFIG_KIND_FILE, CONFIG_OFF(auth), 0, 0,
                       "none, or required: clients must authenticate (SCRAM or a client "
                       "certificate) before anything but Hello",
                       NULL},
    [CONFIG_K_AUTHORIZER] = {"authorizer", "security", "authorizer", "MODE", CONFIG_KIND_FILE,
                             CONFIG_OFF(authorizer), 0, 0,
                             "none, or acl: every request is checked against the access control "
                             "entries (cairn acl)",
                             NULL},
    [CONFIG_K_SUPER_USERS] = {"super-users", "security", "super_users", "LIST", CONFIG_KIND_FILE,
                              CONFIG_OFF(super_users), 0, 0,
                              "principals the ACLs do not restrict, e.g. User:admin,User:ops "
                              "(nodes, Node:ID, always are)",
                              "none"},
    [CONFIG_K_ADMIN_TOKEN_FILE] = {"admin-token-file", "security", "admin_token_file", "PATH",
                                   CONFIG_KIND_FILE, CONFIG_OFF(admin_token_file), 0, 0,
                                   "file holding a token (16+ bytes) the admin port asks of "
                                   "every request but /health and /ready (Authorization: "
                                   "Bearer TOKEN)",
                                   "none"},
    [CONFIG_K_PG_CONNINFO] = {"pg-conninfo", "node", "pg_conninfo", "CONNINFO", CONFIG_KIND_FILE,
                              CONFIG_OFF(pg_conninfo), 0, 0,
                              "PostgreSQL database (a libpq connection string or URI) for "
                              "the replicas of topics created with --storage postgresql; "
                              "without it the node hosts none",
                              "none"},
    [CONFIG_K_PG_PASSWORD_FILE] = {"pg-password-file", "node", "pg_password_file", "PATH",
                                   CONFIG_KIND_FILE, CONFIG_OFF(pg_password_file), 0, 0,
                                   "file whose first line is the PostgreSQL password "
                                   "(default: libpq's own, PGPASSFILE)",
                                   "none"},
};

static const char *const config_sections[] = {"node",   "network", "cluster",
                                              "limits", "raft",    "security"};
#define CONFIG_SECTIONS_LEN (sizeof config_sections / sizeof config_sections[0])

static const char *const config_level_names[] = {"debug", "info", "warn", "error"};

/* Where each setting came from, and the reading state of the file. */
struct config_parse {
  struct config *cfg;
  char *errmsg;
  size_t errlen;
  int err;                          /* first error, 0 while none */
  unsigned err_line;                /* its file line, 0 when not from the file */
  unsigned line_of[CONFIG_K_COUNT]; /* file line that set the key, 0: not in the file */
  bool by_flag[CONFIG_K_COUNT];     /* a flag set it */
  char advertise_host[CONFIG_HOST_MAX + 1];
  /* the file being read */
  const char *file;
  FILE *f;
  unsigned lineno;           /* line the reader returned last */
  bool indented;             /* that line starts with blank space */
  unsigned section_line;     /* line of the last [section] header */
  int last_key;              /* key of the last handler call, -1: none */
  unsigned voters_open_line; /* a voters line ending in ',' waits for a continuation */
};

static void config_fail(struct config_parse *ps, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records the first error only: later ones are consequences or noise. */
static void config_fail(struct config_parse *ps, int err, const char *fmt, ...)
{
  if (ps->err != 0) {
    return;
  }
  ps->err = err;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ps->errmsg, ps->errlen, fmt, ap);
  va_end(ap);
}

/* Parses value into the setting k. continued: a continuation line of the
 * file (voters only). Returns 0, or CAIRN_ECONFIG with why filled. */
static int config_set(struct config_parse *ps, enum config_key_id k, const char *value,
                      bool in_file, bool continued, char *why, size_t whylen)
{
  const struct config_key *key = &config_keys[k];
  struct config *cfg = ps->cfg;
  char *field = (char *)cfg + key->offset;
  uint64_t v;
  switch (key->kind) {
  case CONFIG_KIND_ID:
    if (config_parse_u64(value, 0, key->max, &v, why, whylen) != 0) {
      return CAIRN_ECONFIG;
    }
    if (v == 0) {
      snprintf(why, whylen, "node id 0 is not allowed (ids start at 1)");
      return CAIRN_ECONFIG;
    }
    memcpy(field, &v, sizeof(uint64_t));
    return 0;
  case CONFIG_KIND_UINT: {
    if (config_parse_u64(value, key->min, key->max, &v, why, whylen) != 0) {
      return CAIRN_ECONFIG;
    }
    unsigned u = (unsigned)v;
    memcpy(field, &u, sizeof u);
    return 0;
  }
  case CONFIG_KIND_SIZE: {
    if (config_parse_u64(value, key->min, key->max, &v, why, whylen) != 0) {
      return CAIRN_ECONFIG;
    }
    if (k == CONFIG_K_SEGMENT && v % CONFIG_SEGMENT_ALIGN != 0) {
      snprintf(why, whylen, "%s is not a multiple of %d", value, CONFIG_SEGMENT_ALIGN);
      return CAIRN_ECONFIG;
    }
    size_t z = (size_t)v;
    memcpy(field, &z, sizeof z);
    return 0;
  }
  case CONFIG_KIND_PATH:
    if (value[0] == '\0') {
      snprintf(why, whylen, "the directory is empty");
      return CAIRN_ECONFIG;
    }
    if (strlen(value) >= CONFIG_PATH_MAX) {
      snprintf(why, whylen, "the path is longer than %d bytes", CONFIG_PATH_MAX - 1);
      return CAIRN_ECONFIG;
    }
    snprintf(field, CONFIG_PATH_MAX, "%s", value);
    return 0;
  case CONFIG_KIND_FILE:
    if (strlen(value) >= CONFIG_PATH_MAX) {
      snprintf(why, whylen, "the path is longer than %d bytes", CONFIG_PATH_MAX - 1);
      return CAIRN_ECONFIG;
    }
    snprintf(field, CONFIG_PATH_MAX, "%s", value); /* "": not set */
    return 0;
  case CONFIG_KIND_RACK:
    if (strlen(value) > CONFIG_RACK_MAX) {
      snprintf(why, whylen, "the rack name is longer than %d characters", CONFIG_RACK_MAX);
      return CAIRN_ECONFIG;
    }
    for (const char *p = value; *p != '\0'; p++) {
      if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.') {
        snprintf(why, whylen, "'%s' has a character other than letters, digits, '-', '_', '.'",
                 value);
        return CAIRN_ECONFIG;
      }
    }
    snprintf(field, CONFIG_RACK_MAX + 1, "%s", value);
    return 0;
  case CONFIG_KIND_LEVEL:
    for (size_t i = 0; i < sizeof config_level_names / sizeof config_level_names[0]; i++) {
      if (strcmp(value, config_level_names[i]) == 0) {
        enum log_level level = (enum log_level)((int)LOG_DEBUG + (int)i);
        memcpy(field, &level, sizeof level);
        return 0;
      }
    }
    snprintf(why, whylen, "'%s' is not a log level (debug, info, warn or error)", value);
    return CAIRN_ECONFIG;
  case CONFIG_KIND_OPT_LISTEN:
    if (strcmp(value, "off") == 0) {
      struct config_addr off;
      config_addr_off(&off);
      memcpy(field, &off, sizeof off);
      return 0;
    }
    __attribute__((fallthrough)); /* an address as for a listener */
  case CONFIG_KIND_LISTEN:
  case CONFIG_KIND_ADDR: {
    struct config_addr a;
    if (config_parse_addr(value, key->kind != CONFIG_KIND_ADDR, &a, why, whylen) != 0) {
      return CAIRN_ECONFIG;
    }
    if (key->kind == CONFIG_KIND_ADDR && config_host_is_wildcard(a.host)) {
      snprintf(why, whylen, "'%s' is a wildcard address, which nobody can dial", value);
      return CAIRN_ECONFIG;
    }
    memcpy(field, &a, sizeof a);
    if (k == CONFIG_K_JOIN) {
      cfg->join_set = true;
    }
    return 0;
  }
  case CONFIG_KIND_HOST: {
    char host[CONFIG_HOST_MAX + 3];
    size_t n = strlen(value);
    if (n >= sizeof host) {
      snprintf(why, whylen, "the host is longer than %d characters", CONFIG_HOST_MAX);
      return CAIRN_ECONFIG;
    }
    /* "[::1]" as well as "::1" */
    if (n >= 2 && value[0] == '[' && value[n - 1] == ']') {
      memcpy(host, value + 1, n - 2);
      host[n - 2] = '\0';
    } else {
      memcpy(host, value, n + 1);
    }
    if (config_check_host(host, why, whylen) != 0) {
      return CAIRN_ECONFIG;
    }
    if (config_host_is_wildcard(host)) {
      snprintf(why, whylen, "'%s' is a wildcard address, which nobody can dial", value);
      return CAIRN_ECONFIG;
    }
    size_t hn = strlen(host); /* <= CONFIG_HOST_MAX: config_check_host checked it */
    memcpy(ps->advertise_host, host, hn + 1);
    return 0;
  }
  case CONFIG_KIND_VOTERS: {
    if (!continued) {
      cfg->voters_len = 0;
    }
    bool open = false;
    int rv = config_parse_voters(cfg, value, in_file, &open, why, whylen);
    if (rv == 0 && in_file) {
      ps->voters_open_line = open ? ps->lineno : 0;
    }
    return rv;
  }
  }
  snprintf(why, whylen, "internal error: unknown kind");
  return CAIRN_ECONFIG;
}

/* Formats the value of k in cfg as the file and the flags write it. */
static void config_format(const struct config *cfg, enum config_key_id k, char *buf, size_t len)
{
  const struct config_key *key = &config_keys[k];
  const char *field = (const char *)cfg + key->offset;
  buf[0] = '\0';
  switch (key->kind) {
  case CONFIG_KIND_ID: {
    uint64_t v;
    memcpy(&v, field, sizeof v);
    snprintf(buf, len, "%" PRIu64, v);
    break;
  }
  case CONFIG_KIND_UINT: {
    unsigned u;
    memcpy(&u, field, sizeof u);
    snprintf(buf, len, "%u", u);
    break;
  }
  case CONFIG_KIND_SIZE: {
    size_t z;
    memcpy(&z, field, sizeof z);
    snprintf(buf, len, "%zu", z);
    break;
  }
  case CONFIG_KIND_PATH:
  case CONFIG_KIND_FILE:
  case CONFIG_KIND_RACK:
    snprintf(buf, len, "%s", field);
    break;
  case CONFIG_KIND_LEVEL: {
    enum log_level level;
    memcpy(&level, field, sizeof level);
    snprintf(buf, len, "%s", config_level_names[level - LOG_DEBUG]);
    break;
  }
  case CONFIG_KIND_LISTEN:
  case CONFIG_KIND_OPT_LISTEN:
  case CONFIG_KIND_ADDR:
    snprintf(buf, len, "%s", ((const struct config_addr *)(const void *)field)->str);
    break;
  case CONFIG_KIND_HOST:
    break;
  case CONFIG_KIND_VOTERS: {
    size_t used = 0;
    for (size_t i = 0; i < cfg->voters_len && used < len; i++) {
      int n = snprintf(buf + used, len - used, "%s%" PRIu64 "@%s", i == 0 ? "" : ",",
                       cfg->voters[i].id, cfg->voters[i].addr.str);
      used += n < 0 ? 0 : (size_t)n;
    }
    break;
  }
  }
}

/* Levenshtein distance between a[0..an) and b, for "did you mean"; names
 * longer than 47 characters are never close. */
static size_t config_distance(const char *a, size_t an, const char *b)
{
  size_t bn = strlen(b);
  size_t row[48];
  if (an >= 48 || bn >= 48) {
    return SIZE_MAX;
  }
  for (size_t j = 0; j <= bn; j++) {
    row[j] = j;
  }
  for (size_t i = 1; i <= an; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= bn; j++) {
      size_t up = row[j];
      size_t best = diag + (a[i - 1] == b[j - 1] ? 0 : 1);
      if (up + 1 < best) {
        best = up + 1;
      }
      if (row[j - 1] + 1 < best) {
        best = row[j - 1] + 1;
      }
      row[j] = best;
      diag = up;
    }
  }
  return row[bn];
}

/* The flag closest to name[0..n), if a typo away (at most 2 edits), else -1. */
static int config_closest_flag(const char *name, size_t n)
{
  int best = -1;
  size_t best_d = 3;
  for (int k = 0; k < CONFIG_K_COUNT; k++) {
    size_t d = config_distance(name, n, config_keys[k].flag);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

static int config_find_flag(const char *name, size_t n)
{
  for (int k = 0; k < CONFIG_K_COUNT; k++) {
    if (strlen(config_keys[k].flag) == n && strncmp(config_keys[k].flag, name, n) == 0) {
      return k;
    }
  }
  return -1;
}

static bool config_section_known(const char *section)
{
  for (size_t i = 0; i < CONFIG_SECTIONS_LEN; i++) {
    if (strcmp(config_sections[i], section) == 0) {
      return true;
    }
  }
  return false;
}

/* "N" as in 16777216, with "(16 MiB)" when it is whole mebibytes. */
static void config_size_note(size_t z, char *buf, size_t len)
{
  buf[0] = '\0';
  if (z >= CONFIG_MIB && z % CONFIG_MIB == 0) {
    snprintf(buf, len, " (%zu MiB)", z / CONFIG_MIB);
  } else if (z >= CONFIG_KIB && z % CONFIG_KIB == 0) {
    snprintf(buf, len, " (%zu KiB)", z / CONFIG_KIB);
  }
}

/* Where the current value of k came from, for messages about checks that
 * involve more than one value. With show_value: "--listen 127.0.0.1:7400",
 * "[network] listen = 127.0.0.1:7400 (cairnd.conf:3)" or "--listen
 * 127.0.0.1:7400 (the default)"; without: "--listen", "cairnd.conf:3:
 * [network] listen" or "default --listen". */
static void config_origin(const struct config_parse *ps, enum config_key_id k, bool show_value,
                          char *buf, size_t len)
{
  const struct config_key *key = &config_keys[k];
  char value[CONFIG_ADDR_MAX + 32] = "";
  if (show_value) {
    config_format(ps->cfg, k, value, sizeof value);
  }
  if (!show_value) {
    if (ps->by_flag[k]) {
      snprintf(buf, len, "--%s", key->flag);
    } else if (ps->line_of[k] != 0) {
      snprintf(buf, len, "%s:%u: [%s] %s", ps->file, ps->line_of[k], key->section, key->name);
    } else {
      snprintf(buf, len, "default --%s", key->flag);
    }
  } else if (ps->by_flag[k]) {
    snprintf(buf, len, "--%s %s", key->flag, value);
  } else if (ps->line_of[k] != 0) {
    snprintf(buf, len, "[%s] %s = %s (%s:%u)", key->section, key->name, value, ps->file,
             ps->line_of[k]);
  } else {
    snprintf(buf, len, "--%s %s (the default)", key->flag, value);
  }
}

/* ---- defaults ---- */

static void config_defaults(struct config *cfg)
{
  memset(cfg, 0, sizeof *cfg);
  cfg->node_id = 1;
  snprintf(cfg->data_dir, sizeof cfg->data_dir, "./data");
  cfg->log_level = LOG_INFO;
  cfg->slow_request_ms = 1000;
  config_addr_set(&cfg->listen, "127.0.0.1", 7400);
  config_addr_set(&cfg->cluster_listen, "127.0.0.1", 7401);
  config_addr_set(&cfg->admin_listen, "127.0.0.1", 7402);
  config_addr_off(&cfg->external_listen);
  config_addr_off(&cfg->external_advertise);
  cfg->node_timeout_ms = 10000;
  cfg->replace_delay_ms = 60000;
  cfg->offsets_partitions = 8;
  cfg->offsets_retention_ms = 7 * CONFIG_DAY_MS;
  cfg->retention_check_ms = 5 * 60 * 1000;
  cfg->max_connections = 1024;
  cfg->max_frame_bytes = 16 * CONFIG_MIB;
  cfg->max_inflight_bytes = 64 * CONFIG_MIB;
  cfg->idle_timeout_ms = 10 * 60 * 1000;
  cfg->max_connections_per_ip = 512;
  cfg->max_queued_request_bytes = 256 * CONFIG_MIB;
  cfg->frame_timeout_ms = 30000;
  cfg->heartbeat_ms = 100;
  cfg->election_ms = 1000;
  cfg->raft_segment_bytes = 1 * CONFIG_MIB;
  cfg->raft_log_budget_bytes = 64 * CONFIG_MIB;
  cfg->raft_log_node_budget_bytes = CONFIG_GIB;
  snprintf(cfg->raft_log, sizeof cfg->raft_log, "auto");
  snprintf(cfg->coalesce_heartbeats, sizeof cfg->coalesce_heartbeats, "on");
  snprintf(cfg->raft_mux, sizeof cfg->raft_mux, "auto");
  snprintf(cfg->raft_meta_commit, sizeof cfg->raft_meta_commit, "group");
  snprintf(cfg->auth, sizeof cfg->auth, "none");
  snprintf(cfg->authorizer, sizeof cfg->authorizer, "none");
}

/* ---- flags ---- */

/* Walks argv. When apply is false only the syntax is checked and --config
 * is recorded; when true every flag's value is parsed into the config. */
static int config_walk_flags(struct config_parse *ps, int argc, char **argv, bool apply)
{
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
      config_fail(ps, CAIRN_ECONFIG, "unexpected argument '%s' (flags start with --; see --help)",
                  arg);
      return ps->err;
    }
    const char *name = arg + 2;
    const char *eq = strchr(name, '=');
    size_t n = eq != NULL ? (size_t)(eq - name) : strlen(name);
    if (eq != NULL && (strncmp(name, "help=", 5) == 0 || strncmp(name, "version=", 8) == 0)) {
      config_fail(ps, CAIRN_ECONFIG, "--%.*s takes no value", (int)n, name);
      return ps->err;
    }
    bool is_config = n == strlen("config") && strncmp(name, "config", n) == 0;
    int k = is_config ? -1 : config_find_flag(name, n);
    if (!is_config && k < 0) {
      int close = config_closest_flag(name, n);
      const char *hint = close >= 0 ? config_keys[close].flag : NULL;
      if (config_distance(name, n, "config") <= 2 &&
          (hint == NULL || config_distance(name, n, "config") < config_distance(name, n, hint))) {
        hint = "config";
      }
      if (hint != NULL) {
        config_fail(ps, CAIRN_ECONFIG, "unknown flag --%.*s (did you mean --%s?)", (int)n, name,
                    hint);
      } else {
        config_fail(ps, CAIRN_ECONFIG, "unknown flag --%.*s (see --help)", (int)n, name);
      }
      return ps->err;
    }
    const char *value;
    if (eq != NULL) {
      value = eq + 1;
    } else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
      value = argv[++i];
    } else {
      config_fail(ps, CAIRN_ECONFIG, "--%.*s needs a value (%s)", (int)n, name,
                  is_config ? "FILE" : config_keys[k].meta);
      return ps->err;
    }
    if (is_config) {
      if (value[0] == '\0' || strlen(value) >= sizeof ps->cfg->config_file) {
        config_fail(ps, CAIRN_ECONFIG, "--config: %s",
                    value[0] == '\0' ? "the file name is empty" : "the path is too long");
        return ps->err;
      }
      if (!apply) {
        snprintf(ps->cfg->config_file, sizeof ps->cfg->config_file, "%s", value);
      }
      continue;
    }
    if (!apply) {
      continue;
    }
    char why[CONFIG_ERRMSG_SIZE];
    if (config_set(ps, (enum config_key_id)k, value, false, false, why, sizeof why) != 0) {
      config_fail(ps, CAIRN_ECONFIG, "--%s: %s", config_keys[k].flag, why);
      return ps->err;
    }
    ps->by_flag[k] = true;
  }
  return 0;
}

/* ---- the file ---- */

/* inih's line reader: fgets that counts lines, notices indentation (inih
 * reads an indented line as a continuation of the previous value) and
 * refuses lines longer than inih's buffer instead of letting it split them. */
static char *config_read_line(char *str, int num, void *stream)
{
  struct config_parse *ps = stream;
  if (ps->err != 0) {
    return NULL;
  }
  errno = 0;
  if (fgets(str, num, ps->f) == NULL) {
    if (ferror(ps->f)) {
      int err = errno != 0 ? -errno : -EIO;
      ps->err_line = ps->lineno + 1;
      config_fail(ps, err, "%s: cannot read line %u: %s", ps->file, ps->lineno + 1,
                  cairn_strerror(err));
    }
    return NULL;
  }
  ps->lineno++;
  size_t len = strlen(str);
  if (len > 0 && str[len - 1] != '\n' && len == (size_t)num - 1) {
    /* The buffer is full: fine if the line ends right here. */
    int c = getc(ps->f);
    if (c != EOF && c != '\n') {
      ps->err_line = ps->lineno;
      config_fail(ps, CAIRN_ECONFIG, "%s:%u: the line is longer than %d characters", ps->file,
                  ps->lineno, num - 1);
      return NULL;
    }
  }
  ps->indented = str[0] == ' ' || str[0] == '\t';
  const char *p = str + strspn(str, " \t");
  if (ps->lineno == 1 && strncmp(p, "\xEF\xBB\xBF", 3) == 0) {
    p += 3;
  }
  if (*p == '[' && !ps->indented) {
    ps->section_line = ps->lineno;
    ps->last_key = -1; /* inih continues no value across a header */
    const char *close = strchr(p, ']');
    if (close != NULL) {
      char section[64];
      size_t n = (size_t)(close - p - 1);
      if (n >= sizeof section) {
        n = sizeof section - 1;
      }
      memcpy(section, p + 1, n);
      section[n] = '\0';
      if (!config_section_known(section)) {
        ps->err_line = ps->lineno;
        config_fail(ps, CAIRN_ECONFIG,
                    "%s:%u: unknown section [%s] (sections: node, network, cluster, limits, "
                    "raft, security)",
                    ps->file, ps->lineno, section);
        return NULL;
      }
    }
  }
  return str;
}

static void config_file_fail(struct config_parse *ps, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void config_file_fail(struct config_parse *ps, const char *fmt, ...)
{
  if (ps->err != 0) {
    return;
  }
  char what[CONFIG_ERRMSG_SIZE];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  ps->err_line = ps->lineno;
  config_fail(ps, CAIRN_ECONFIG, "%s:%u: %s", ps->file, ps->lineno, what);
}

/* A voters line that ended in ',' must be continued by the next value line. */
static void config_check_open_voters(struct config_parse *ps)
{
  if (ps->voters_open_line != 0 && ps->err == 0) {
    ps->err_line = ps->voters_open_line;
    config_fail(ps, CAIRN_ECONFIG,
                "%s:%u: [cluster] voters: the list ends with ',' but no indented line continues it",
                ps->file, ps->voters_open_line);
  }
}

static int config_on_key(void *user, const char *section, const char *name, const char *value)
{
  struct config_parse *ps = user;
  if (ps->err != 0) {
    return 1; /* the reader stops at the next line */
  }
  int last = ps->last_key;
  bool continued = ps->indented && last >= 0 && strcmp(config_keys[last].name, name) == 0 &&
                   strcmp(config_keys[last].section, section) == 0;
  if (continued && last != CONFIG_K_VOTERS) {
    config_file_fail(ps,
                     "this line is indented, which continues the value of %s on line %u; only "
                     "voters may span lines (remove the indentation)",
                     config_keys[last].name, ps->line_of[last]);
    return 0;
  }
  if (!continued) {
    config_check_open_voters(ps);
    if (ps->err != 0) {
      return 0;
    }
  }
  ps->voters_open_line = 0;
  if (section[0] == '\0') {
    config_file_fail(ps,
                     "key '%s' is outside any section (put it under [node], [network], "
                     "[cluster], [limits] or [raft])",
                     name);
    return 0;
  }
  if (!config_section_known(section)) {
    config_file_fail(ps,
                     "unknown section [%s] (sections: node, network, cluster, limits, raft, "
                     "security)",
                     section);
    return 0;
  }
  int k = -1;
  for (int i = 0; i < CONFIG_K_COUNT; i++) {
    if (strcmp(config_keys[i].section, section) == 0 && strcmp(config_keys[i].name, name) == 0) {
      k = i;
      break;
    }
  }
  if (k < 0) {
    for (int i = 0; i < CONFIG_K_COUNT; i++) {
      if (strcmp(config_keys[i].name, name) == 0) {
        config_file_fail(ps, "unknown key '%s' in [%s]: %s belongs in [%s]", name, section, name,
                         config_keys[i].section);
        return 0;
      }
    }
    char known[CONFIG_ERRMSG_SIZE] = "";
    size_t used = 0;
    for (int i = 0; i < CONFIG_K_COUNT && used < sizeof known; i++) {
      if (strcmp(config_keys[i].section, section) == 0) {
        int n = snprintf(known + used, sizeof known - used, "%s%s", used == 0 ? "" : ", ",
                         config_keys[i].name);
        used += n < 0 ? 0 : (size_t)n;
      }
    }
    config_file_fail(ps, "unknown key '%s' in [%s] (keys: %s)", name, section, known);
    return 0;
  }
  if (!continued && ps->line_of[k] != 0) {
    config_file_fail(ps, "[%s] %s is already set on line %u", section, name, ps->line_of[k]);
    return 0;
  }
  char why[CONFIG_ERRMSG_SIZE];
  if (config_set(ps, (enum config_key_id)k, value, true, continued, why, sizeof why) != 0) {
    config_file_fail(ps, "[%s] %s: %s", section, name, why);
    return 0;
  }
  if (!continued) {
    ps->line_of[k] = ps->lineno;
  }
  ps->last_key = k;
  return 1;
}

/* Reads line `line` of the file again, for the message about a line inih
 * refused (it reports only the number). */
static void config_file_line(FILE *f, unsigned line, char *buf, size_t len)
{
  buf[0] = '\0';
  if (fseek(f, 0, SEEK_SET) != 0) {
    return;
  }
  unsigned at = 1;
  int c;
  size_t n = 0;
  while ((c = getc(f)) != EOF && at <= line) {
    if (c == '\n') {
      at++;
    } else if (at == line && n + 1 < len && c != '\r') {
      buf[n++] = (char)c;
    }
  }
  buf[n] = '\0';
}

static int config_read_file(struct config_parse *ps)
{
  ps->file = ps->cfg->config_file;
  ps->f = fopen(ps->file, "r");
  if (ps->f == NULL) {
    int err = -errno;
    config_fail(ps, err, "%s: cannot read: %s", ps->file, strerror(errno));
    return err;
  }
  ps->last_key = -1;
  int rv = ini_parse_stream(config_read_line, ps, config_on_key, ps);
  config_check_open_voters(ps);
  if (rv > 0 && (ps->err == 0 || (unsigned)rv < ps->err_line)) {
    /* inih's own complaint comes first in the file: report it instead. */
    char text[80];
    config_file_line(ps->f, (unsigned)rv, text, sizeof text);
    ps->err = 0;
    config_fail(ps, CAIRN_ECONFIG,
                "%s:%d: '%s' is not 'key = value', a [section] header or a comment", ps->file, rv,
                text);
  } else if (rv < 0 && ps->err == 0) {
    config_fail(ps, CAIRN_ENOMEM, "%s: out of memory while parsing", ps->file);
  }
  fclose(ps->f);
  ps->f = NULL;
  return ps->err;
}

/* ---- derived values and combinations ---- */

/* The advertised address of one listener: the specific setting beats the
 * general advertise host within a layer, a flag beats the file. */
static void config_derive_advertise(struct config_parse *ps, enum config_key_id specific,
                                    struct config_addr *out, const struct config_addr *listen)
{
  int rank_specific = ps->by_flag[specific] ? 4 : (ps->line_of[specific] != 0 ? 2 : 0);
  int rank_general =
      ps->by_flag[CONFIG_K_ADVERTISE] ? 3 : (ps->line_of[CONFIG_K_ADVERTISE] != 0 ? 1 : 0);
  if (rank_specific > 0 && rank_specific > rank_general) {
    return; /* *out holds the parsed specific address */
  }
  config_addr_set(out, rank_general > 0 ? ps->advertise_host : listen->host, listen->port);
}

static int config_check_listen_wildcard(struct config_parse *ps, enum config_key_id listen_k,
                                        enum config_key_id specific, const struct config_addr *adv)
{
  if (!config_host_is_wildcard(adv->host)) {
    return 0;
  }
  char where[CONFIG_ERRMSG_SIZE];
  config_origin(ps, listen_k, false, where, sizeof where);
  config_fail(ps, CAIRN_ECONFIG,
              "%s: %s listens on every interface, which nobody can dial; give --advertise HOST "
              "(or --%s HOST:PORT) with the address others should dial",
              where, adv->str, config_keys[specific].flag);
  return ps->err;
}

static bool config_listeners_clash(const struct config_addr *a, const struct config_addr *b)
{
  if (a->port == 0 || a->port != b->port) {
    return false;
  }
  return strcasecmp(a->host, b->host) == 0 || config_host_is_wildcard(a->host) ||
         config_host_is_wildcard(b->host);
}

/* A port that may be off (Kafka, external): when on, its advertised
 * address is derived like the client port's; when off, an advertised
 * address for it is an error and it is off too. what names the port. */
static int config_check_optional_port(struct config_parse *ps, enum config_key_id listen_k,
                                      enum config_key_id adv_k, const char *what)
{
  struct config *cfg = ps->cfg;
  const struct config_addr *listen =
      (const struct config_addr *)(const void *)((char *)cfg + config_keys[listen_k].offset);
  struct config_addr *adv = (struct config_addr *)(void *)((char *)cfg + config_keys[adv_k].offset);
  if (!config_addr_is_off(listen)) {
    config_derive_advertise(ps, adv_k, adv, listen);
    return config_check_listen_wildcard(ps, listen_k, adv_k, adv);
  }
  if (ps->by_flag[adv_k] || ps->line_of[adv_k] != 0) {
    char where[CONFIG_ERRMSG_SIZE];
    config_origin(ps, adv_k, false, where, sizeof where);
    config_fail(ps, CAIRN_ECONFIG, "%s: there is no %s port to advertise (give --%s)", where, what,
                config_keys[listen_k].flag);
    return ps->err;
  }
  config_addr_off(adv);
  return 0;
}

/* The Kafka port: on by default only for the embedded single-node cluster
 * (where 127.0.0.1:9092 is what every Kafka tool tries first); in a
 * multi-node setup each node names its own, as it does its other ports on
 * a shared host. Its advertised address follows the client port's rules. */
static int config_check_kafka(struct config_parse *ps, bool voters_given)
{
  struct config *cfg = ps->cfg;
  bool given = ps->by_flag[CONFIG_K_KAFKA_LISTEN] || ps->line_of[CONFIG_K_KAFKA_LISTEN] != 0;
  cfg->kafka_listen_default = false;
  if (!given) {
    if (!voters_given && !cfg->join_set) {
      config_addr_set(&cfg->kafka_listen, "127.0.0.1", CONFIG_KAFKA_DEFAULT_PORT);
      cfg->kafka_listen_default = true;
    } else {
      config_addr_off(&cfg->kafka_listen);
    }
  }
  return config_check_optional_port(ps, CONFIG_K_KAFKA_LISTEN, CONFIG_K_KAFKA_ADVERTISE, "Kafka");
}

/* The external client port: off unless given. Its advertised address is
 * what Metadata answers through it name for this node (Kafka's
 * advertised.listeners), derived like the client port's. */
static int config_check_external(struct config_parse *ps)
{
  return config_check_optional_port(ps, CONFIG_K_EXTERNAL_LISTEN, CONFIG_K_EXTERNAL_ADVERTISE,
                                    "external");
}

static int config_check(struct config_parse *ps)
{
  struct config *cfg = ps->cfg;
  char a[CONFIG_ERRMSG_SIZE];
  char b[CONFIG_ERRMSG_SIZE];

  config_derive_advertise(ps, CONFIG_K_ADVERTISE_CLIENT, &cfg->advertise_client, &cfg->listen);
  config_derive_advertise(ps, CONFIG_K_ADVERTISE_CLUSTER, &cfg->advertise_cluster,
                          &cfg->cluster_listen);
  if (config_check_listen_wildcard(ps, CONFIG_K_LISTEN, CONFIG_K_ADVERTISE_CLIENT,
                                   &cfg->advertise_client) != 0 ||
      config_check_listen_wildcard(ps, CONFIG_K_CLUSTER_LISTEN, CONFIG_K_ADVERTISE_CLUSTER,
                                   &cfg->advertise_cluster) != 0) {
    return ps->err;
  }
  bool voters_given = ps->by_flag[CONFIG_K_VOTERS] || ps->line_of[CONFIG_K_VOTERS] != 0;
  if (config_check_kafka(ps, voters_given) != 0 || config_check_external(ps) != 0) {
    return ps->err;
  }

  static const enum config_key_id listeners[] = {CONFIG_K_LISTEN, CONFIG_K_CLUSTER_LISTEN,
                                                 CONFIG_K_ADMIN_LISTEN, CONFIG_K_KAFKA_LISTEN,
                                                 CONFIG_K_EXTERNAL_LISTEN};
  enum { CONFIG_NLISTENERS = sizeof listeners / sizeof listeners[0] };
  for (size_t i = 0; i < CONFIG_NLISTENERS; i++) {
    for (size_t j = i + 1; j < CONFIG_NLISTENERS; j++) {
      const struct config_addr *x =
          (const struct config_addr *)(const void *)((char *)cfg +
                                                     config_keys[listeners[i]].offset);
      const struct config_addr *y =
          (const struct config_addr *)(const void *)((char *)cfg +
                                                     config_keys[listeners[j]].offset);
      if (config_listeners_clash(x, y)) {
        config_origin(ps, listeners[i], true, a, sizeof a);
        config_origin(ps, listeners[j], true, b, sizeof b);
        config_fail(ps, CAIRN_ECONFIG, "%s and %s would listen on the same port", a, b);
        return ps->err;
      }
    }
  }

  if (!voters_given) {
    cfg->voters_len = 0;
    if (!cfg->join_set) {
      cfg->voters[0] = (struct config_voter){.id = cfg->node_id, .addr = cfg->advertise_cluster};
      cfg->voters_len = 1;
    }
  }
  for (size_t i = 0; i < cfg->voters_len; i++) {
    const struct config_voter *v = &cfg->voters[i];
    if (v->id == cfg->node_id && !config_addr_equal(&v->addr, &cfg->advertise_cluster)) {
      config_origin(ps, CONFIG_K_VOTERS, false, a, sizeof a);
      config_fail(ps, CAIRN_ECONFIG,
                  "%s: voter %" PRIu64 " is this node (node id %" PRIu64
                  ") but its address %s is not this node's advertised cluster address %s (set "
                  "by --cluster-listen, --advertise or --advertise-cluster)",
                  a, v->id, cfg->node_id, v->addr.str, cfg->advertise_cluster.str);
      return ps->err;
    }
  }

  if (cfg->join_set && config_addr_equal(&cfg->join, &cfg->advertise_client)) {
    config_origin(ps, CONFIG_K_JOIN, false, a, sizeof a);
    config_fail(ps, CAIRN_ECONFIG,
                "%s: %s is this node's own client address; join names a node already in the "
                "cluster",
                a, cfg->join.str);
    return ps->err;
  }

  if (cfg->election_ms < 2 * cfg->heartbeat_ms) {
    config_origin(ps, CONFIG_K_ELECTION, true, a, sizeof a);
    config_origin(ps, CONFIG_K_HEARTBEAT, true, b, sizeof b);
    config_fail(ps, CAIRN_ECONFIG,
                "the election timeout must be at least twice the heartbeat, or followers start "
                "elections against a healthy leader: %s, %s",
                a, b);
    return ps->err;
  }
  if (cfg->idle_heartbeat_ms != 0 && cfg->idle_heartbeat_ms > cfg->heartbeat_ms &&
      2 * (cfg->idle_heartbeat_ms + cfg->heartbeat_ms) > cfg->election_ms) {
    config_origin(ps, CONFIG_K_IDLE_HEARTBEAT, true, a, sizeof a);
    config_origin(ps, CONFIG_K_ELECTION, true, b, sizeof b);
    config_fail(ps, CAIRN_ECONFIG,
                "the idle heartbeat plus one heartbeat (its greatest lateness) must be at most "
                "half the election timeout, or followers start elections against an idle "
                "leader: %s, %s (0 picks the largest allowed)",
                a, b);
    return ps->err;
  }
  if (strcmp(cfg->raft_log, "group") != 0 && strcmp(cfg->raft_log, "node") != 0 &&
      strcmp(cfg->raft_log, "auto") != 0) {
    config_fail(ps, CAIRN_ECONFIG, "--raft-log: '%s' is not node, group or auto", cfg->raft_log);
    return ps->err;
  }
  if (strcmp(cfg->raft_meta_commit, "sync") != 0 && strcmp(cfg->raft_meta_commit, "group") != 0) {
    config_fail(ps, CAIRN_ECONFIG, "--raft-meta-commit: '%s' is not sync or group",
                cfg->raft_meta_commit);
    return ps->err;
  }
  if (strcmp(cfg->coalesce_heartbeats, "on") != 0 && strcmp(cfg->coalesce_heartbeats, "off") != 0) {
    config_fail(ps, CAIRN_ECONFIG, "--coalesce-heartbeats: '%s' is not on or off",
                cfg->coalesce_heartbeats);
    return ps->err;
  }
  if (strcmp(cfg->raft_mux, "auto") != 0 && strcmp(cfg->raft_mux, "on") != 0 &&
      strcmp(cfg->raft_mux, "off") != 0) {
    config_fail(ps, CAIRN_ECONFIG, "--raft-mux: '%s' is not auto, on or off", cfg->raft_mux);
    return ps->err;
  }
  if (strcmp(cfg->auth, "none") != 0 && strcmp(cfg->auth, "required") != 0) {
    config_fail(ps, CAIRN_ECONFIG, "--auth: '%s' is not none or required", cfg->auth);
    return ps->err;
  }
  if (strcmp(cfg->auth, "required") == 0 && cfg->cluster_secret_file[0] == '\0' &&
      (cfg->voters_len > 1 || cfg->join_set)) {
    config_fail(ps, CAIRN_ECONFIG,
                "--auth required in a cluster of several nodes needs --cluster-secret-file: "
                "nodes authenticate to each other with it");
    return ps->err;
  }
  if (strcmp(cfg->authorizer, "none") != 0 && strcmp(cfg->authorizer, "acl") != 0) {
    config_fail(ps, CAIRN_ECONFIG, "--authorizer: '%s' is not none or acl", cfg->authorizer);
    return ps->err;
  }
  if (strcmp(cfg->authorizer, "acl") == 0 && cfg->cluster_secret_file[0] == '\0' &&
      (cfg->voters_len > 1 || cfg->join_set)) {
    config_fail(ps, CAIRN_ECONFIG,
                "--authorizer acl in a cluster of several nodes needs --cluster-secret-file: "
                "nodes prove it to each other to pass the ACLs as Node:ID");
    return ps->err;
  }
  {
    struct authz az;
    char why[200];
    if (authz_parse_super_users(&az, cfg->super_users, why, sizeof why) != 0) {
      config_fail(ps, CAIRN_ECONFIG, "--super-users: %s", why);
      return ps->err;
    }
  }
  bool cert = cfg->tls_cert[0] != '\0', key = cfg->tls_key[0] != '\0';
  if (cert != key || (!cert && (cfg->tls_ca[0] != '\0' || cfg->tls_ciphers[0] != '\0'))) {
    config_fail(ps, CAIRN_ECONFIG,
                "TLS on the client port needs both --tls-cert and --tls-key; --tls-ca and "
                "--tls-ciphers only go with them");
    return ps->err;
  }
  if (cfg->max_queued_request_bytes < 2 * cfg->max_frame_bytes) {
    config_origin(ps, CONFIG_K_MAX_QUEUED_REQUEST, true, a, sizeof a);
    config_origin(ps, CONFIG_K_MAX_FRAME, true, b, sizeof b);
    config_fail(ps, CAIRN_ECONFIG,
                "the node-wide request budget must hold two largest frames: %s is smaller than "
                "twice %s",
                a, b);
    return ps->err;
  }
  if (cfg->max_inflight_bytes < cfg->max_frame_bytes) {
    config_origin(ps, CONFIG_K_MAX_INFLIGHT, true, a, sizeof a);
    config_origin(ps, CONFIG_K_MAX_FRAME, true, b, sizeof b);
    config_fail(ps, CAIRN_ECONFIG,
                "the in-flight limit must hold at least one largest frame: %s is smaller than %s",
                a, b);
    return ps->err;
  }
  return 0;
}

/* ---- public ---- */

int config_load(struct config *cfg, int argc, char **argv, char *errmsg, size_t errlen)
{
  config_defaults(cfg);
  if (errlen > 0) {
    errmsg[0] = '\0';
  }
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      return CONFIG_HELP;
    }
    if (strcmp(argv[i], "--version") == 0) {
      return CONFIG_VERSION;
    }
  }
  struct config_parse ps = {.cfg = cfg, .errmsg = errmsg, .errlen = errlen, .last_key = -1};
  if (config_walk_flags(&ps, argc, argv, false) != 0) {
    return ps.err;
  }
  if (cfg->config_file[0] != '\0' && config_read_file(&ps) != 0) {
    return ps.err;
  }
  if (config_walk_flags(&ps, argc, argv, true) != 0) {
    return ps.err;
  }
  return config_check(&ps);
}

void config_usage(FILE *out)
{
  struct config d;
  config_defaults(&d);
  fprintf(out, "usage: cairnd [--config FILE] [flags]\n"
               "\n"
               "Runs one Cairn node. With no arguments: a single-node cluster on 127.0.0.1\n"
               "keeping its data in ./data. Every flag has a key in the config file (shown\n"
               "in brackets); a flag overrides the file, whatever their order.\n"
               "\n"
               "  --config FILE\n"
               "      read settings from this INI file (docs/configuration.md)\n");
  for (int k = 0; k < CONFIG_K_COUNT; k++) {
    const struct config_key *key = &config_keys[k];
    char dflt[CONFIG_PATH_MAX + 64];
    if (key->dflt != NULL) {
      snprintf(dflt, sizeof dflt, "%s", key->dflt);
    } else {
      config_format(&d, (enum config_key_id)k, dflt, sizeof dflt);
      if (key->kind == CONFIG_KIND_SIZE) {
        size_t z;
        memcpy(&z, (const char *)&d + key->offset, sizeof z);
        char note[32];
        config_size_note(z, note, sizeof note);
        strncat(dflt, note, sizeof dflt - strlen(dflt) - 1);
      }
    }
    fprintf(out, "  --%s %s\n      %s\n      [%s] %s, default %s\n", key->flag, key->meta,
            key->help, key->section, key->name, dflt);
  }
  fprintf(out, "  --help\n      print this help and exit\n"
               "  --version\n      print the version and exit\n");
}

/* Appends one line to the text being built; CAIRN_ETOOLARGE when the line
 * would not fit inih's line buffer (when reading it back). */
static int config_emit(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int config_emit(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *used, len - *used, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= len - *used || (size_t)n > INI_MAX_LINE - 1) {
    buf[*used] = '\0';
    return CAIRN_ETOOLARGE;
  }
  *used += (size_t)n;
  return 0;
}

/* False for a value inih would not read back as written: blank space at
 * either end (stripped), a line break, or ';' after blank space (a comment). */
static bool config_writable(const char *value)
{
  size_t n = strlen(value);
  if (n > 0 && (isspace((unsigned char)value[0]) || isspace((unsigned char)value[n - 1]))) {
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    if (value[i] == '\n' || value[i] == '\r' ||
        (value[i] == ';' && i > 0 && isspace((unsigned char)value[i - 1]))) {
      return false;
    }
  }
  return true;
}

int config_write(const struct config *cfg, FILE *out)
{
  if (!config_writable(cfg->data_dir) || !config_writable(cfg->cluster_secret_file) ||
      !config_writable(cfg->admin_token_file) ||
      !config_writable(cfg->tls_cert) || !config_writable(cfg->tls_key) ||
      !config_writable(cfg->tls_ca) || !config_writable(cfg->tls_ciphers)) {
    return CAIRN_EINVAL;
  }
  size_t len = 64 * 1024;
  char *buf = malloc(len);
  if (buf == NULL) {
    return CAIRN_ENOMEM;
  }
  size_t used = 0;
  int rv = 0;
  const char *section = "";
  for (int k = 0; k < CONFIG_K_COUNT && rv == 0; k++) {
    const struct config_key *key = &config_keys[k];
    if (strcmp(section, key->section) != 0) {
      rv = config_emit(buf, len, &used, "%s[%s]\n", section[0] == '\0' ? "" : "\n", key->section);
      section = key->section;
    }
    if (rv != 0 || k == CONFIG_K_ADVERTISE) {
      continue; /* advertise is written out as advertise_client and advertise_cluster */
    }
    if ((k == CONFIG_K_VOTERS && cfg->voters_len == 0) || (k == CONFIG_K_JOIN && !cfg->join_set) ||
        (k == CONFIG_K_KAFKA_ADVERTISE && config_addr_is_off(&cfg->kafka_advertise)) ||
        (k == CONFIG_K_EXTERNAL_ADVERTISE && config_addr_is_off(&cfg->external_advertise)) ||
        (k == CONFIG_K_OFFSETS_RF && cfg->offsets_replication_factor == 0) ||
        (key->kind == CONFIG_KIND_FILE && ((const char *)cfg + key->offset)[0] == '\0')) {
      rv = config_emit(buf, len, &used, "# %s: not set\n", key->name);
      continue;
    }
    if (k == CONFIG_K_VOTERS) {
      /* One voter a line, so long host names stay within inih's line limit. */
      for (size_t i = 0; i < cfg->voters_len && rv == 0; i++) {
        rv = config_emit(buf, len, &used, "%s%" PRIu64 "@%s%s\n", i == 0 ? "voters = " : "    ",
                         cfg->voters[i].id, cfg->voters[i].addr.str,
                         i + 1 < cfg->voters_len ? "," : "");
      }
      continue;
    }
    char value[CONFIG_PATH_MAX];
    config_format(cfg, (enum config_key_id)k, value, sizeof value);
    rv = config_emit(buf, len, &used, "%s = %s\n", key->name, value);
  }
  if (rv == 0 && (fwrite(buf, 1, used, out) != used || fflush(out) != 0)) {
    rv = errno != 0 ? -errno : -EIO;
  }
  free(buf);
  return rv;
}

int config_set_bound_port(struct config *cfg, enum config_listener which, uint16_t port)
{
  struct config_addr *listen;
  struct config_addr *adv = NULL;
  switch (which) {
  case CONFIG_CLIENT:
    listen = &cfg->listen;
    adv = &cfg->advertise_client;
    break;
  case CONFIG_CLUSTER:
    listen = &cfg->cluster_listen;
    adv = &cfg->advertise_cluster;
    break;
  case CONFIG_ADMIN:
    listen = &cfg->admin_listen;
    break;
  case CONFIG_KAFKA:
    listen = &cfg->kafka_listen;
    adv = &cfg->kafka_advertise;
    break;
  case CONFIG_EXTERNAL:
    listen = &cfg->external_listen;
    adv = &cfg->external_advertise;
    break;
  default:
    return CAIRN_EINVAL;
  }
  if (port == 0 || listen->port != 0) {
    return CAIRN_EINVAL;
  }
  config_addr_set(listen, listen->host, port);
  if (adv == NULL || adv->port != 0) {
    return 0;
  }
  config_addr_set(adv, adv->host, port);
  if (which == CONFIG_CLUSTER) {
    for (size_t i = 0; i < cfg->voters_len; i++) {
      if (cfg->voters[i].id == cfg->node_id && cfg->voters[i].addr.port == 0) {
        config_addr_set(&cfg->voters[i].addr, cfg->voters[i].addr.host, port);
      }
    }
  }
  return 0;
}
