/* test_config.c - cairnd's settings: the defaults, every flag, the file and
 * its precedence below the flags, the derived advertise addresses and
 * voters, and a precise message for every kind of bad input. */
#include "common/err.h"
#include "server/config.h"
#include "server/config_value.h"
#include "testutil.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NO_ARGS ((const char *const[]){NULL})

static char errmsg[CONFIG_ERRMSG_SIZE];

/* Runs config_load on "cairnd" followed by args. */
static int load(struct config *cfg, const char *const *args)
{
  char *argv[64];
  int argc = 0;
  argv[argc++] = "cairnd";
  for (size_t i = 0; args[i] != NULL; i++) {
    argv[argc++] = (char *)args[i];
  }
  argv[argc] = NULL;
  memset(errmsg, 'x', sizeof errmsg); /* a stale message must not pass */
  errmsg[sizeof errmsg - 1] = '\0';
  return config_load(cfg, argc, argv, errmsg, sizeof errmsg);
}

static void load_ok(struct config *cfg, const char *const *args)
{
  int rv = load(cfg, args);
  if (rv != 0) {
    fail_msg("config_load failed (%s): %s", cairn_errname(rv), errmsg);
  }
}

/* Expects CAIRN_ECONFIG and a message holding want (and want2 if not NULL). */
static void load_fails(const char *const *args, const char *want, const char *want2)
{
  struct config cfg;
  int rv = load(&cfg, args);
  if (rv != CAIRN_ECONFIG) {
    fail_msg("expected CAIRN_ECONFIG, got %s (%s); args[0] %s", cairn_errname(rv), errmsg,
             args[0] != NULL ? args[0] : "(none)");
  }
  if (strstr(errmsg, want) == NULL || (want2 != NULL && strstr(errmsg, want2) == NULL)) {
    fail_msg("message '%s' lacks '%s'%s%s", errmsg, want, want2 ? " or " : "", want2 ? want2 : "");
  }
}

/* Writes text to dir/name; returns the path (owned, free()). */
static char *write_file(const char *dir, const char *name, const char *text)
{
  char *path = NULL;
  assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(fputs(text, f) >= 0, 1);
  assert_int_equal(fclose(f), 0);
  return path;
}

/* Loads a config file holding text plus the extra flags. */
static int load_text(struct config *cfg, const char *text, const char *const *extra)
{
  char *dir = tu_tmpdir("config");
  char *path = write_file(dir, "c.conf", text);
  const char *args[32] = {"--config", path};
  size_t n = 2;
  for (size_t i = 0; extra[i] != NULL; i++) {
    args[n++] = extra[i];
  }
  args[n] = NULL;
  int rv = load(cfg, args);
  free(path);
  tu_tmpdir_free(dir);
  return rv;
}

static void load_text_fails(const char *text, const char *want, const char *want2)
{
  struct config cfg;
  int rv = load_text(&cfg, text, NO_ARGS);
  if (rv != CAIRN_ECONFIG) {
    fail_msg("expected CAIRN_ECONFIG, got %s (%s) for:\n%s", cairn_errname(rv), errmsg, text);
  }
  if (strstr(errmsg, want) == NULL || (want2 != NULL && strstr(errmsg, want2) == NULL)) {
    fail_msg("message '%s' lacks '%s'%s%s", errmsg, want, want2 ? " or " : "", want2 ? want2 : "");
  }
}

static void assert_configs_equal(const struct config *a, const struct config *b)
{
  assert_int_equal(a->node_id, b->node_id);
  assert_string_equal(a->data_dir, b->data_dir);
  assert_string_equal(a->rack, b->rack);
  assert_int_equal(a->log_level, b->log_level);
  assert_int_equal(a->slow_request_ms, b->slow_request_ms);
  assert_string_equal(a->listen.str, b->listen.str);
  assert_string_equal(a->cluster_listen.str, b->cluster_listen.str);
  assert_string_equal(a->admin_listen.str, b->admin_listen.str);
  assert_string_equal(a->advertise_client.str, b->advertise_client.str);
  assert_string_equal(a->advertise_cluster.str, b->advertise_cluster.str);
  assert_string_equal(a->kafka_listen.str, b->kafka_listen.str);
  assert_string_equal(a->kafka_advertise.str, b->kafka_advertise.str);
  assert_int_equal(a->kafka_auto_create_topics, b->kafka_auto_create_topics);
  assert_int_equal(a->voters_len, b->voters_len);
  for (size_t i = 0; i < a->voters_len; i++) {
    assert_int_equal(a->voters[i].id, b->voters[i].id);
    assert_string_equal(a->voters[i].addr.str, b->voters[i].addr.str);
  }
  assert_int_equal(a->join_set, b->join_set);
  if (a->join_set) {
    assert_string_equal(a->join.str, b->join.str);
  }
  assert_int_equal(a->node_timeout_ms, b->node_timeout_ms);
  assert_int_equal(a->replace_delay_ms, b->replace_delay_ms);
  assert_int_equal(a->max_connections, b->max_connections);
  assert_int_equal(a->max_frame_bytes, b->max_frame_bytes);
  assert_int_equal(a->max_inflight_bytes, b->max_inflight_bytes);
  assert_int_equal(a->idle_timeout_ms, b->idle_timeout_ms);
  assert_int_equal(a->max_connections_per_ip, b->max_connections_per_ip);
  assert_int_equal(a->max_queued_request_bytes, b->max_queued_request_bytes);
  assert_int_equal(a->frame_timeout_ms, b->frame_timeout_ms);
  assert_int_equal(a->heartbeat_ms, b->heartbeat_ms);
  assert_int_equal(a->election_ms, b->election_ms);
  assert_int_equal(a->idle_heartbeat_ms, b->idle_heartbeat_ms);
  assert_int_equal(a->raft_segment_bytes, b->raft_segment_bytes);
  assert_int_equal(a->raft_log_budget_bytes, b->raft_log_budget_bytes);
  assert_int_equal(a->raft_log_node_budget_bytes, b->raft_log_node_budget_bytes);
  assert_string_equal(a->authorizer, b->authorizer);
  assert_string_equal(a->raft_log, b->raft_log);
  assert_string_equal(a->coalesce_heartbeats, b->coalesce_heartbeats);
  assert_string_equal(a->raft_mux, b->raft_mux);
  assert_string_equal(a->raft_meta_commit, b->raft_meta_commit);
  assert_string_equal(a->super_users, b->super_users);
}

/* config_write then config_load of what it wrote gives the same settings. */
static void assert_round_trips(const struct config *cfg)
{
  char *dir = tu_tmpdir("config");
  char *path = NULL;
  assert_true(asprintf(&path, "%s/written.conf", dir) > 0);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(config_write(cfg, f), 0);
  assert_int_equal(fclose(f), 0);
  struct config again;
  load_ok(&again, ARGS("--config", path));
  assert_configs_equal(cfg, &again);
  free(path);
  tu_tmpdir_free(dir);
}

/* ---- defaults, help ---- */

static void test_config_no_arguments_give_the_single_node_cluster(void **state)
{
  (void)state;
  struct config cfg;
  load_ok(&cfg, NO_ARGS);
  assert_string_equal(errmsg, "");
  assert_string_equal(cfg.config_file, "");
  assert_int_equal(cfg.node_id, 1);
  assert_string_equal(cfg.data_dir, "./data");
  assert_string_equal(cfg.rack, "");
  assert_int_equal(cfg.log_level, LOG_INFO);
  assert_int_equal(cfg.slow_request_ms, 1000);
  assert_string_equal(cfg.listen.str, "127.0.0.1:7400");
  assert_string_equal(cfg.listen.host, "127.0.0.1");
  assert_int_equal(cfg.listen.port, 7400);
  assert_string_equal(cfg.cluster_listen.str, "127.0.0.1:7401");
  assert_string_equal(cfg.admin_listen.str, "127.0.0.1:7402");
  assert_string_equal(cfg.advertise_client.str, "127.0.0.1:7400");
  assert_string_equal(cfg.advertise_cluster.str, "127.0.0.1:7401");
  assert_string_equal(cfg.kafka_listen.str, "127.0.0.1:9092");
  assert_string_equal(cfg.kafka_advertise.str, "127.0.0.1:9092");
  assert_true(cfg.kafka_listen_default);
  assert_int_equal(cfg.kafka_auto_create_topics, 0);
  assert_int_equal(cfg.voters_len, 1);
  assert_int_equal(cfg.voters[0].id, 1);
  assert_string_equal(cfg.voters[0].addr.str, "127.0.0.1:7401");
  assert_false(cfg.join_set);
  assert_int_equal(cfg.max_connections, 1024);
  assert_int_equal(cfg.max_frame_bytes, 16u << 20);
  assert_int_equal(cfg.max_inflight_bytes, 64u << 20);
  assert_int_equal(cfg.idle_timeout_ms, 600000);
  assert_int_equal(cfg.heartbeat_ms, 100);
  assert_int_equal(cfg.election_ms, 1000);
  assert_int_equal(cfg.raft_segment_bytes, 1u << 20);
  assert_int_equal(cfg.node_timeout_ms, 10000);
  assert_int_equal(cfg.replace_delay_ms, 60000);
  assert_round_trips(&cfg);
}

static void test_config_help_and_version_are_positive_results(void **state)
{
  (void)state;
  struct config cfg;
  assert_int_equal(load(&cfg, ARGS("--help")), CONFIG_HELP);
  assert_int_equal(load(&cfg, ARGS("-h")), CONFIG_HELP);
  assert_int_equal(load(&cfg, ARGS("--version")), CONFIG_VERSION);
  /* wherever they are, and before anything else is read */
  assert_int_equal(load(&cfg, ARGS("--node-id", "0", "--config", "/nonexistent", "--help")),
                   CONFIG_HELP);
}

static void test_config_usage_lists_every_flag_key_and_default(void **state)
{
  (void)state;
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  config_usage(f);
  assert_int_equal(fclose(f), 0);
  static const char *const want[] = {
      "--config FILE",
      "--node-id N",
      "[node] id, default 1",
      "--data-dir DIR",
      "default ./data",
      "--listen HOST:PORT",
      "[network] listen, default 127.0.0.1:7400",
      "--cluster-listen HOST:PORT",
      "default 127.0.0.1:7401",
      "--admin-listen HOST:PORT",
      "default 127.0.0.1:7402",
      "--advertise HOST",
      "--advertise-client HOST:PORT",
      "--advertise-cluster HOST:PORT",
      "--kafka-listen HOST:PORT",
      "[network] kafka_listen, default 127.0.0.1:9092 for the single-node cluster",
      "--kafka-advertise HOST:PORT",
      "--kafka-auto-create-topics 0|1",
      "--voters ID@HOST:PORT,...",
      "--join HOST:PORT",
      "--rack NAME",
      "--log-level LEVEL",
      "default info",
      "--max-connections N",
      "default 1024",
      "--max-frame-bytes N",
      "default 16777216 (16 MiB)",
      "--max-inflight-bytes N",
      "default 67108864 (64 MiB)",
      "--idle-timeout-ms N",
      "default 600000",
      "--max-connections-per-ip N",
      "--max-queued-request-bytes N",
      "--frame-timeout-ms N",
      "--heartbeat-ms N",
      "default 100",
      "--election-ms N",
      "default 1000",
      "--raft-segment-bytes N",
      "[raft] segment_bytes, default 1048576 (1 MiB)",
      "--node-timeout-ms N",
      "default 10000",
      "--replace-delay-ms N",
      "default 60000",
      "--help",
      "--version",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    if (strstr(text, want[i]) == NULL) {
      fail_msg("--help lacks '%s':\n%s", want[i], text);
    }
  }
  free(text);
}

/* ---- flags ---- */

static void test_config_every_flag_sets_its_setting(void **state)
{
  (void)state;
  struct config cfg;
  load_ok(&cfg,
          ARGS("--node-id", "7", "--data-dir=/srv/cairn", "--rack", "r1", "--log-level", "debug",
               "--listen", "10.0.0.7:9000", "--cluster-listen=10.0.0.7:9001", "--admin-listen",
               "127.0.0.1:9002", "--voters", "7@10.0.0.7:9001,8@10.0.0.8:9001", "--join",
               "10.0.0.8:9000", "--max-connections", "10", "--max-frame-bytes", "65536",
               "--max-inflight-bytes", "131072", "--idle-timeout-ms", "0", "--heartbeat-ms", "100",
               "--election-ms", "1000", "--raft-segment-bytes", "8388608", "--node-timeout-ms",
               "5000", "--replace-delay-ms", "0"));
  assert_int_equal(cfg.node_id, 7);
  assert_string_equal(cfg.data_dir, "/srv/cairn");
  assert_string_equal(cfg.rack, "r1");
  assert_int_equal(cfg.log_level, LOG_DEBUG);
  assert_string_equal(cfg.listen.str, "10.0.0.7:9000");
  assert_string_equal(cfg.cluster_listen.str, "10.0.0.7:9001");
  assert_string_equal(cfg.admin_listen.str, "127.0.0.1:9002");
  assert_string_equal(cfg.advertise_client.str, "10.0.0.7:9000");
  assert_string_equal(cfg.advertise_cluster.str, "10.0.0.7:9001");
  assert_int_equal(cfg.voters_len, 2);
  assert_int_equal(cfg.voters[1].id, 8);
  assert_string_equal(cfg.voters[1].addr.host, "10.0.0.8");
  assert_int_equal(cfg.voters[1].addr.port, 9001);
  assert_true(cfg.join_set);
  assert_string_equal(cfg.join.str, "10.0.0.8:9000");
  assert_int_equal(cfg.max_connections, 10);
  assert_int_equal(cfg.max_frame_bytes, 65536);
  assert_int_equal(cfg.max_inflight_bytes, 131072);
  assert_int_equal(cfg.idle_timeout_ms, 0);
  assert_int_equal(cfg.heartbeat_ms, 100);
  assert_int_equal(cfg.election_ms, 1000);
  assert_int_equal(cfg.raft_segment_bytes, 8u << 20);
  assert_int_equal(cfg.node_timeout_ms, 5000);
  assert_int_equal(cfg.replace_delay_ms, 0);
  assert_round_trips(&cfg);

  /* log levels; the last of a repeated flag wins */
  load_ok(&cfg, ARGS("--log-level", "warn"));
  assert_int_equal(cfg.log_level, LOG_WARN);
  load_ok(&cfg, ARGS("--log-level", "error", "--node-id", "3", "--node-id", "4"));
  assert_int_equal(cfg.log_level, LOG_ERROR);
  assert_int_equal(cfg.node_id, 4);
  assert_int_equal(cfg.voters[0].id, 4);
  /* an empty rack is no rack */
  load_ok(&cfg, ARGS("--rack="));
  assert_string_equal(cfg.rack, "");
}

static void test_config_kafka_port_follows_the_client_port_rules(void **state)
{
  (void)state;
  struct config cfg;
  /* multi-node: off unless given */
  load_ok(&cfg, ARGS("--voters", "1@127.0.0.1:7401,2@127.0.0.1:7411"));
  assert_true(config_addr_is_off(&cfg.kafka_listen));
  assert_true(config_addr_is_off(&cfg.kafka_advertise));
  assert_round_trips(&cfg);
  load_ok(&cfg, ARGS("--join", "127.0.0.1:7500"));
  assert_true(config_addr_is_off(&cfg.kafka_listen));
  /* given: on, advertised like the client port */
  load_ok(&cfg, ARGS("--voters", "1@kafka1.example:7401", "--cluster-listen", "10.0.0.1:7401",
                     "--kafka-listen", "0.0.0.0:9093", "--advertise", "kafka1.example"));
  assert_string_equal(cfg.kafka_listen.str, "0.0.0.0:9093");
  assert_string_equal(cfg.kafka_advertise.str, "kafka1.example:9093");
  assert_false(cfg.kafka_listen_default);
  assert_round_trips(&cfg);
  load_ok(&cfg, ARGS("--kafka-listen", "127.0.0.1:9094", "--kafka-advertise", "k.example:19094",
                     "--kafka-auto-create-topics", "1"));
  assert_string_equal(cfg.kafka_advertise.str, "k.example:19094");
  assert_int_equal(cfg.kafka_auto_create_topics, 1);
  assert_round_trips(&cfg);
  /* off on purpose in a single-node setup */
  load_ok(&cfg, ARGS("--kafka-listen", "off"));
  assert_true(config_addr_is_off(&cfg.kafka_listen));
  assert_round_trips(&cfg);
  /* a wildcard without an advertised host, a clash, an advertise without a port */
  assert_int_equal(load(&cfg, ARGS("--kafka-listen", "0.0.0.0:9092")), CAIRN_ECONFIG);
  assert_non_null(strstr(errmsg, "--kafka-advertise"));
  assert_int_equal(load(&cfg, ARGS("--kafka-listen", "127.0.0.1:7400")), CAIRN_ECONFIG);
  assert_non_null(strstr(errmsg, "same port"));
  assert_int_equal(load(&cfg, ARGS("--kafka-listen", "off", "--kafka-advertise", "a:1")),
                   CAIRN_ECONFIG);
  assert_non_null(strstr(errmsg, "no Kafka port"));
}

static void test_config_unknown_flag_is_named(void **state)
{
  (void)state;
  load_fails(ARGS("--lisen", "127.0.0.1:1"), "unknown flag --lisen (did you mean --listen?)", NULL);
  load_fails(ARGS("--nodeid=2"), "unknown flag --nodeid (did you mean --node-id?)", NULL);
  load_fails(ARGS("--confg", "x"), "unknown flag --confg (did you mean --config?)", NULL);
  load_fails(ARGS("--node-id", "2", "--bogus=1"), "unknown flag --bogus (see --help)", NULL);
  load_fails(ARGS("--"), "unexpected argument '--'", NULL);
  load_fails(ARGS("-v"), "unexpected argument '-v'", NULL);
  load_fails(ARGS("start"), "unexpected argument 'start'", NULL);
  load_fails(ARGS("--help=yes"), "--help takes no value", NULL);
  load_fails(ARGS("--version=1"), "--version takes no value", NULL);
  /* syntax errors come before the file is read */
  load_fails(ARGS("--config", "/nonexistent/c.conf", "--nope"), "unknown flag --nope", NULL);
}

static void test_config_missing_value_is_named(void **state)
{
  (void)state;
  load_fails(ARGS("--listen"), "--listen needs a value (HOST:PORT)", NULL);
  load_fails(ARGS("--node-id", "--listen", "127.0.0.1:1"), "--node-id needs a value (N)", NULL);
  load_fails(ARGS("--config"), "--config needs a value (FILE)", NULL);
  load_fails(ARGS("--config="), "--config: the file name is empty", NULL);
  load_fails(ARGS("--data-dir="), "--data-dir: the directory is empty", NULL);
  load_fails(ARGS("--heartbeat-ms="), "--heartbeat-ms: the value is empty", NULL);
}

static void test_config_bad_numbers_name_the_flag_and_the_range(void **state)
{
  (void)state;
  load_fails(ARGS("--max-connections", "many"), "--max-connections: 'many' is not a number", NULL);
  load_fails(ARGS("--heartbeat-ms", "-5"), "--heartbeat-ms: '-5' is not a number", NULL);
  load_fails(ARGS("--heartbeat-ms", "1.5"), "'1.5' is not a number", NULL);
  load_fails(ARGS("--heartbeat-ms", "12ms"), "'12ms' is not a number", NULL);
  load_fails(ARGS("--heartbeat-ms", " 12"), "' 12' is not a number", NULL);
  load_fails(ARGS("--max-connections", "0"), "--max-connections: 0 is out of range (1..1000000)",
             NULL);
  load_fails(ARGS("--heartbeat-ms", "5"), "--heartbeat-ms: 5 is out of range (10..60000)", NULL);
  load_fails(ARGS("--max-frame-bytes", "99999999999"),
             "--max-frame-bytes: 99999999999 is out of range (4096..1073741824)", NULL);
  load_fails(ARGS("--node-id", "18446744073709551616"),
             "--node-id: 18446744073709551616 is out of range", NULL);
  load_fails(ARGS("--election-ms", "4294967296"), "--election-ms: 4294967296 is out of range",
             NULL);
  load_fails(ARGS("--raft-segment-bytes", "100000"),
             "--raft-segment-bytes: 100000 is not a multiple of 4096", NULL);
  struct config cfg;
  load_ok(&cfg, ARGS("--node-id", "18446744073709551615"));
  assert_int_equal(cfg.node_id, UINT64_MAX);
}

static void test_config_node_id_zero_is_refused(void **state)
{
  (void)state;
  load_fails(ARGS("--node-id", "0"), "--node-id: node id 0 is not allowed", NULL);
  load_fails(ARGS("--node-id=000"), "node id 0 is not allowed", NULL);
  load_text_fails("[node]\nid = 0\n", "c.conf:2: [node] id: node id 0 is not allowed", NULL);
}

static void test_config_bad_addresses_say_what_is_wrong(void **state)
{
  (void)state;
  static const struct {
    const char *flag;
    const char *value;
    const char *want;
  } cases[] = {
      {"--listen", "localhost", "'localhost' is not HOST:PORT"},
      {"--listen", "127.0.0.1:", "the port is missing"},
      {"--listen", ":7400", "the host is empty"},
      {"--listen", "127.0.0.1:65536", "the port must be 0..65535"},
      {"--listen", "127.0.0.1:http", "the port must be 0..65535"},
      {"--listen", "::1:7400", "an IPv6 address needs brackets"},
      {"--listen", "[::1]7400", "is not [IPV6]:PORT"},
      {"--listen", "[::g]:7400", "'::g' is not a valid IPv6 address"},
      {"--listen", "bad host:7400", "is not a valid host name"},
      {"--listen", "-a:7400", "is not a valid host name"},
      {"--listen", "a-.b:7400", "is not a valid host name"},
      {"--listen", "a..b:7400", "is not a valid host name"},
      {"--listen", "999.1.1.1:7400", "'999.1.1.1' is not a valid IPv4 address"},
      {"--cluster-listen", "h:-1", "the port must be 0..65535"},
      {"--join", "node-1:0", "the port must be 1..65535"},
      {"--join", "0.0.0.0:7400", "wildcard address"},
      {"--advertise-client", "h:0", "the port must be 1..65535"},
      {"--advertise-cluster", "[::]:7401", "wildcard address"},
      {"--advertise", "bad_host", "not a valid host name"},
      {"--advertise", "0.0.0.0", "wildcard address"},
      {"--advertise", "", "the host is empty"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char flag[64];
    snprintf(flag, sizeof flag, "%s:", cases[i].flag);
    load_fails(ARGS(cases[i].flag, cases[i].value), flag, cases[i].want);
  }
}

static void test_config_accepts_names_ipv6_and_port_zero_for_listeners(void **state)
{
  (void)state;
  struct config cfg;
  load_ok(&cfg, ARGS("--listen", "[::1]:7400", "--cluster-listen", "localhost:0", "--admin-listen",
                     "Node-1.Example.com:7402"));
  assert_string_equal(cfg.listen.host, "::1");
  assert_string_equal(cfg.listen.str, "[::1]:7400");
  assert_string_equal(cfg.advertise_client.str, "[::1]:7400");
  assert_int_equal(cfg.cluster_listen.port, 0);
  assert_string_equal(cfg.advertise_cluster.str, "localhost:0");
  assert_string_equal(cfg.voters[0].addr.str, "localhost:0");
  assert_string_equal(cfg.admin_listen.host, "Node-1.Example.com");

  /* the bound port fills in the listener, its advertised address and our voter */
  assert_int_equal(config_set_bound_port(&cfg, CONFIG_CLUSTER, 40123), 0);
  assert_string_equal(cfg.cluster_listen.str, "localhost:40123");
  assert_string_equal(cfg.advertise_cluster.str, "localhost:40123");
  assert_string_equal(cfg.voters[0].addr.str, "localhost:40123");
  assert_int_equal(config_set_bound_port(&cfg, CONFIG_CLUSTER, 40124), CAIRN_EINVAL);
  assert_int_equal(config_set_bound_port(&cfg, CONFIG_CLIENT, 1), CAIRN_EINVAL);
  load_ok(&cfg, ARGS("--admin-listen", "127.0.0.1:0"));
  assert_int_equal(config_set_bound_port(&cfg, CONFIG_ADMIN, 0), CAIRN_EINVAL);
  assert_int_equal(config_set_bound_port(&cfg, CONFIG_ADMIN, 5555), 0);
  assert_string_equal(cfg.admin_listen.str, "127.0.0.1:5555");
}

static void test_config_voters_lists_are_parsed_and_checked(void **state)
{
  (void)state;
  struct config cfg;
  load_ok(&cfg, ARGS("--voters", "3@c:7401, 1@127.0.0.1:7401 ,2@[fe80::1]:9"));
  assert_int_equal(cfg.voters_len, 3);
  assert_int_equal(cfg.voters[0].id, 3);
  assert_string_equal(cfg.voters[0].addr.str, "c:7401");
  assert_int_equal(cfg.voters[1].id, 1);
  assert_string_equal(cfg.voters[2].addr.host, "fe80::1");
  assert_string_equal(cfg.voters[2].addr.str, "[fe80::1]:9");

  static const struct {
    const char *value;
    const char *want;
  } cases[] = {
      {"", "the voters list is empty"},
      {"1@a:1,,2@b:1", "empty entry in the voters list"},
      {"1@a:1,", "empty entry in the voters list"},
      {",1@a:1", "empty entry in the voters list"},
      {"a:1", "voter 'a:1' is not ID@HOST:PORT"},
      {"@a:1", "the id is missing"},
      {"x@a:1", "voter 'x@a:1': the id is not a number"},
      {"0@a:1", "id 0 is not allowed"},
      {"1@a", "voter 1: 'a' is not HOST:PORT"},
      {"1@a:0", "voter 1: 'a:0': the port must be 1..65535"},
      {"1@127.0.0.1:7401,1@b:1", "voter id 1 appears twice (127.0.0.1:7401 and b:1)"},
      {"1@127.0.0.1:7401,2@127.0.0.1:7401", "voters 1 and 2 have the same address"},
      {"1@127.0.0.1:7401,2@b:1,3@c:1,4@d:1,5@e:1,6@f:1,7@g:1,8@h:1", "more than 7 voters"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    load_fails(ARGS("--voters", cases[i].value), "--voters: ", cases[i].want);
  }
}

static void test_config_this_node_as_voter_needs_its_advertised_cluster_address(void **state)
{
  (void)state;
  load_fails(ARGS("--node-id", "2", "--voters", "1@a:7401,2@b:7401"),
             "--voters: voter 2 is this node (node id 2) but its address b:7401 is not this "
             "node's advertised cluster address 127.0.0.1:7401",
             NULL);
  struct config cfg;
  /* matching through --advertise (host names compare without case) */
  load_ok(&cfg, ARGS("--node-id", "2", "--voters", "1@a:7401,2@B:7401", "--advertise", "b"));
  assert_string_equal(cfg.advertise_cluster.str, "b:7401");
  /* a node outside the voters needs no match */
  load_ok(&cfg, ARGS("--node-id", "9", "--voters", "1@a:7401,2@b:7401"));
  assert_int_equal(cfg.voters_len, 2);
}

static void test_config_advertised_addresses_follow_their_rules(void **state)
{
  (void)state;
  struct config cfg;
  load_ok(&cfg, ARGS("--listen", "0.0.0.0:9000", "--cluster-listen", "0.0.0.0:9001", "--advertise",
                     "node-1"));
  assert_string_equal(cfg.advertise_client.str, "node-1:9000");
  assert_string_equal(cfg.advertise_cluster.str, "node-1:9001");
  assert_string_equal(cfg.voters[0].addr.str, "node-1:9001");

  /* the specific one wins over the general one */
  load_ok(&cfg, ARGS("--advertise", "node-1", "--advertise-client", "lb.example:443"));
  assert_string_equal(cfg.advertise_client.str, "lb.example:443");
  assert_string_equal(cfg.advertise_cluster.str, "node-1:7401");
  load_ok(&cfg, ARGS("--advertise", "::1"));
  assert_string_equal(cfg.advertise_client.str, "[::1]:7400");
  load_ok(&cfg, ARGS("--advertise", "[::1]"));
  assert_string_equal(cfg.advertise_cluster.str, "[::1]:7401");

  /* a wildcard listener needs an advertised host */
  load_fails(ARGS("--listen", "0.0.0.0:9000"), "--listen: 0.0.0.0:9000 listens on every interface",
             "--advertise HOST");
  load_fails(ARGS("--cluster-listen", "[::]:9001", "--advertise-client", "a:1"),
             "--cluster-listen: [::]:9001 listens on every interface", "--advertise-cluster");
  load_ok(&cfg,
          ARGS("--cluster-listen", "[::]:9001", "--advertise-cluster", "a:1", "--voters", "1@a:1"));
  assert_string_equal(cfg.advertise_cluster.str, "a:1");
}

static void test_config_join_leaves_voters_to_the_cluster(void **state)
{
  (void)state;
  struct config cfg;
  load_ok(&cfg, ARGS("--node-id", "4", "--join", "node-1:7400"));
  assert_true(cfg.join_set);
  assert_string_equal(cfg.join.str, "node-1:7400");
  assert_int_equal(cfg.voters_len, 0);
  assert_round_trips(&cfg);
  load_fails(ARGS("--join", "127.0.0.1:7400"),
             "--join: 127.0.0.1:7400 is this node's own client address", NULL);
  load_fails(ARGS("--join", "node-1:7400", "--advertise", "NODE-1"),
             "--join: node-1:7400 is this node's own client address", NULL);
}

static void test_config_write_refuses_what_it_cannot_read_back(void **state)
{
  (void)state;
  struct config cfg;
  char path[300];
  FILE *f = tmpfile();
  assert_non_null(f);
  /* data_dir values inih would change */
  load_ok(&cfg, ARGS("--data-dir", "/srv/a ;b"));
  assert_int_equal(config_write(&cfg, f), CAIRN_EINVAL);
  load_ok(&cfg, ARGS("--data-dir", "/srv/a "));
  assert_int_equal(config_write(&cfg, f), CAIRN_EINVAL);
  load_ok(&cfg, ARGS("--data-dir", "/srv/a;b"));
  assert_int_equal(config_write(&cfg, f), 0);
  /* a line over inih's limit */
  snprintf(path, sizeof path, "/%0250d", 0);
  load_ok(&cfg, ARGS("--data-dir", path));
  assert_int_equal(config_write(&cfg, f), CAIRN_ETOOLARGE);
  /* nothing was written by the refused calls */
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long size_after_one = ftell(f);
  load_ok(&cfg, ARGS("--data-dir", "/srv/a;b"));
  assert_int_equal(fseek(f, 0, SEEK_SET), 0);
  assert_int_equal(ftruncate(fileno(f), 0), 0);
  assert_int_equal(config_write(&cfg, f), 0);
  assert_int_equal(ftell(f), size_after_one);
  fclose(f);
  load_ok(&cfg, ARGS("--data-dir", "/srv/a;b"));
  assert_round_trips(&cfg);
}

static void test_config_file_accepts_colons_comments_and_blank_space(void **state)
{
  (void)state;
  struct config cfg;
  assert_int_equal(load_text(&cfg,
                             "\xEF\xBB\xBF; leading byte-order mark and a comment\n"
                             "# another comment\n"
                             "\n"
                             "[node]\r\n"
                             "id: 9\r\n"
                             "  \n"
                             "data_dir   =   /srv/nine   ; trailing comment\n"
                             "[raft]\n"
                             "heartbeat_ms=100\n",
                             NO_ARGS),
                   0);
  assert_int_equal(cfg.node_id, 9);
  assert_string_equal(cfg.data_dir, "/srv/nine");
  assert_int_equal(cfg.heartbeat_ms, 100);
}

static void test_config_combinations_are_checked(void **state)
{
  (void)state;
  load_fails(ARGS("--heartbeat-ms", "2000"),
             "the election timeout must be at least twice the heartbeat",
             "--election-ms 1000 (the default), --heartbeat-ms 2000");
  /* 2 x (1100 + 100) > 1000: an idle leader's heartbeat could come late. */
  load_fails(ARGS("--idle-heartbeat-ms", "1100"),
             "the idle heartbeat plus one heartbeat (its greatest lateness) must be at most half "
             "the election timeout",
             "--idle-heartbeat-ms 1100, --election-ms 1000 (the default)");
  load_fails(ARGS("--max-inflight-bytes", "8192", "--max-frame-bytes", "16384"),
             "--max-inflight-bytes 8192 is smaller than --max-frame-bytes 16384", NULL);
  load_fails(ARGS("--admin-listen", "127.0.0.1:7400"),
             "--listen 127.0.0.1:7400 (the default) and --admin-listen 127.0.0.1:7400 would "
             "listen on the same port",
             NULL);
  load_fails(ARGS("--cluster-listen", "0.0.0.0:7400", "--advertise", "a"),
             "would listen on the same port", NULL);
  load_fails(ARGS("--authorizer", "opa"), "--authorizer: 'opa' is not none or acl", NULL);
  load_fails(ARGS("--authorizer", "acl", "--voters", "1@127.0.0.1:7401,2@127.0.0.1:7411"),
             "--authorizer acl in a cluster of several nodes needs --cluster-secret-file", NULL);
  load_fails(ARGS("--super-users", "User:admin,*"), "--super-users: super-user '*'", NULL);
  load_fails(ARGS("--super-users", "admin"), "--super-users: super-user 'admin'", NULL);
  struct config cfg;
  load_ok(&cfg, ARGS("--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"));
  load_ok(&cfg, ARGS("--authorizer", "acl", "--super-users", "User:admin , Node:3,User:ops"));
  assert_string_equal(cfg.authorizer, "acl");
  assert_round_trips(&cfg);
  load_fails(ARGS("--raft-log", "shared"), "--raft-log: 'shared' is not node, group or auto",
             NULL);
  load_ok(&cfg, ARGS("--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"));
  assert_string_equal(cfg.raft_log, "auto");
  load_ok(&cfg, ARGS("--raft-log", "node"));
  assert_string_equal(cfg.raft_log, "node");
  load_ok(&cfg, ARGS("--raft-log", "group"));
  assert_string_equal(cfg.raft_log, "group");
  assert_round_trips(&cfg);
}

/* ---- the file ---- */

static void test_config_file_sets_values_and_flags_override_it_in_any_order(void **state)
{
  (void)state;
  static const char text[] = "[node]\n"
                             "id = 5\n"
                             "data_dir = /srv/five\n"
                             "log_level = warn\n"
                             "[network]\n"
                             "listen = 127.0.0.5:7400\n"
                             "cluster_listen = 127.0.0.5:7401\n"
                             "admin_listen = 127.0.0.5:7402\n"
                             "[raft]\n"
                             "heartbeat_ms = 100\n"
                             "election_ms = 1000\n";
  struct config cfg;
  assert_int_equal(load_text(&cfg, text, NO_ARGS), 0);
  assert_int_equal(cfg.node_id, 5);
  assert_string_equal(cfg.data_dir, "/srv/five");
  assert_int_equal(cfg.log_level, LOG_WARN);
  assert_string_equal(cfg.advertise_cluster.str, "127.0.0.5:7401");
  assert_string_equal(cfg.voters[0].addr.str, "127.0.0.5:7401");
  assert_int_equal(cfg.voters[0].id, 5);
  assert_int_equal(cfg.heartbeat_ms, 100);
  assert_int_equal(cfg.max_connections, 1024); /* untouched: the default */

  /* a flag before --config and a flag after it both beat the file */
  char *dir = tu_tmpdir("config");
  char *path = write_file(dir, "c.conf", text);
  load_ok(&cfg, ARGS("--node-id", "6", "--config", path, "--log-level", "debug"));
  assert_string_equal(cfg.config_file, path);
  assert_int_equal(cfg.node_id, 6);
  assert_int_equal(cfg.log_level, LOG_DEBUG);
  assert_string_equal(cfg.data_dir, "/srv/five");
  assert_int_equal(cfg.voters[0].id, 6);

  /* the flag's value is checked with the file's values in place */
  load_fails(ARGS("--config", path, "--heartbeat-ms", "600"), "[raft] election_ms = 1000 (",
             "c.conf:11), --heartbeat-ms 600");

  /* a flag's --advertise beats the file's advertise_client */
  char *path2 = write_file(dir, "d.conf", "[network]\nadvertise_client = a:1\nadvertise = b\n");
  load_ok(&cfg, ARGS("--config", path2));
  assert_string_equal(cfg.advertise_client.str, "a:1");
  assert_string_equal(cfg.advertise_cluster.str, "b:7401");
  load_ok(&cfg, ARGS("--config", path2, "--advertise", "c"));
  assert_string_equal(cfg.advertise_client.str, "c:7400");
  load_ok(&cfg, ARGS("--advertise", "c", "--config", path2, "--advertise-client", "d:2"));
  assert_string_equal(cfg.advertise_client.str, "d:2");
  assert_string_equal(cfg.advertise_cluster.str, "c:7401");

  /* the last --config wins */
  load_ok(&cfg, ARGS("--config", path2, "--config", path));
  assert_int_equal(cfg.node_id, 5);
  free(path);
  free(path2);
  tu_tmpdir_free(dir);
}

static void test_config_file_errors_name_file_and_line(void **state)
{
  (void)state;
  load_text_fails("[network]\nlisten = 127.0.0.1:7400\nlisen = 1\n",
                  "c.conf:3: unknown key 'lisen' in [network] (keys: listen, cluster_listen", NULL);
  load_text_fails("# c\n[netwrk]\nlisten = 127.0.0.1:7400\n", "c.conf:2: unknown section [netwrk]",
                  NULL);
  load_text_fails("[node]\nid = 1\n[empty]\n", "c.conf:3: unknown section [empty]", NULL);
  load_text_fails("id = 1\n", "c.conf:1: key 'id' is outside any section", NULL);
  load_text_fails("[node]\nid = 1\nthis is not ini\nlog_level = nope\n",
                  "c.conf:3: 'this is not ini' is not 'key = value'", NULL);
  load_text_fails("[node]\nlog_level = nope\nthis is not ini\n",
                  "c.conf:2: [node] log_level: 'nope' is not a log level", NULL);
  load_text_fails("[node\nid = 1\n", "c.conf:1: '[node' is not", NULL);
  load_text_fails("[node]\nid = 2\n\n[node]\nid = 3\n",
                  "c.conf:5: [node] id is already set on line 2", NULL);
  load_text_fails("[limits]\nmax_connections = lots\n",
                  "c.conf:2: [limits] max_connections: 'lots' is not a number", NULL);
}

static void test_config_unknown_key_in_cluster_section_is_named(void **state)
{
  (void)state;
  /* join lives in [cluster]; the same key in another section is unknown there */
  load_text_fails("[network]\njoin = a:1\n",
                  "c.conf:2: unknown key 'join' in [network]: join belongs in [cluster]", NULL);
  load_text_fails("[raft]\nraft_segment_bytes = 4096\n",
                  "c.conf:2: unknown key 'raft_segment_bytes' in [raft] (keys: heartbeat_ms, "
                  "election_ms, idle_heartbeat_ms, segment_bytes, log_budget_bytes, "
                  "log_node_budget_bytes, log, "
                  "coalesce_heartbeats, raft_mux, meta_commit)",
                  NULL);
}

static void test_config_unreadable_file_gives_errno_and_path(void **state)
{
  (void)state;
  struct config cfg;
  assert_int_equal(load(&cfg, ARGS("--config", "/nonexistent/cairnd.conf")), -ENOENT);
  assert_string_equal(errmsg, "/nonexistent/cairnd.conf: cannot read: No such file or directory");
  char *dir = tu_tmpdir("config");
  int rv = load(&cfg, ARGS("--config", dir));
  /* fopen of a directory succeeds for reading; the read fails with EISDIR */
  assert_int_equal(rv, -EISDIR);
  assert_non_null(strstr(errmsg, dir));
  tu_tmpdir_free(dir);
}

static void test_config_file_lines_have_a_length_limit(void **state)
{
  (void)state;
  char text[512];
  /* 199 characters fit inih's line buffer, 200 do not */
  snprintf(text, sizeof text, "[node]\ndata_dir = /%0*d\nid = 3\n", 199 - 12, 0);
  struct config cfg;
  assert_int_equal(load_text(&cfg, text, NO_ARGS), 0);
  assert_int_equal(strlen(cfg.data_dir), 199 - 11);
  assert_int_equal(cfg.node_id, 3);
  snprintf(text, sizeof text, "[node]\ndata_dir = /%0*d\r\nid = 3\n", 198 - 12, 0);
  assert_int_equal(load_text(&cfg, text, NO_ARGS), 0);
  assert_int_equal(strlen(cfg.data_dir), 198 - 11);
  assert_int_equal(cfg.node_id, 3);
  snprintf(text, sizeof text, "[node]\ndata_dir = /%0*d\nid = 3\n", 200 - 12, 0);
  load_text_fails(text, "c.conf:2: the line is longer than 199 characters", NULL);
  /* the last line needs no newline */
  snprintf(text, sizeof text, "[node]\ndata_dir = /%0*d", 199 - 12, 0);
  assert_int_equal(load_text(&cfg, text, NO_ARGS), 0);
  assert_int_equal(strlen(cfg.data_dir), 199 - 11);
}

static void test_config_file_voters_may_span_indented_lines(void **state)
{
  (void)state;
  struct config cfg;
  assert_int_equal(load_text(&cfg,
                             "[cluster]\n"
                             "voters = 1@127.0.0.1:7401,\n"
                             "  # a comment between\n"
                             "    2@b:7401\n"
                             "    3@c:7401, 4@d:7401,\n"
                             "    5@e:7401\n"
                             "join = b:7400\n",
                             NO_ARGS),
                   0);
  assert_int_equal(cfg.voters_len, 5);
  assert_int_equal(cfg.voters[4].id, 5);
  assert_string_equal(cfg.voters[3].addr.str, "d:7401");

  /* a flag replaces the file's whole list */
  assert_int_equal(load_text(&cfg, "[cluster]\nvoters = 1@127.0.0.1:7401,\n  2@b:7401\n",
                             ARGS("--voters", "1@127.0.0.1:7401")),
                   0);
  assert_int_equal(cfg.voters_len, 1);

  load_text_fails("[cluster]\nvoters = 1@127.0.0.1:7401,\njoin = b:7400\n",
                  "c.conf:2: [cluster] voters: the list ends with ',' but no indented line "
                  "continues it",
                  NULL);
  load_text_fails("[cluster]\nvoters = 1@127.0.0.1:7401,\n",
                  "c.conf:2: [cluster] voters: the list ends", NULL);
  load_text_fails("[cluster]\nvoters = 1@127.0.0.1:7401\n    1@b:7401\n",
                  "c.conf:3: [cluster] voters: voter id 1 appears twice", NULL);
  load_text_fails("[cluster]\nvoters = 1@127.0.0.1:7401,\n    2@b:7401,,3@c:1\n",
                  "c.conf:3: [cluster] voters: empty entry", NULL);
  load_text_fails("[network]\nlisten = 127.0.0.1:7400\n  cluster_listen = 127.0.0.1:7401\n",
                  "c.conf:3: this line is indented, which continues the value of listen on line 2",
                  NULL);
  /* an indented line after a section header is a key of its own, not a continuation */
  load_text_fails("[cluster]\nvoters = 1@127.0.0.1:7401\n[cluster]\n  voters = 2@b:7401\n",
                  "c.conf:4: [cluster] voters is already set on line 2", NULL);
  assert_int_equal(load_text(&cfg, "[node]\nid = 2\n[cluster]\n  join = a:1\n", NO_ARGS), 0);
  assert_string_equal(cfg.join.str, "a:1");
  load_text_fails("[cluster]\nvoters =\n", "c.conf:2: [cluster] voters: the voters list is empty",
                  NULL);
}

static void test_config_example_file_loads_and_round_trips(void **state)
{
  (void)state;
  const char *golden = getenv("CAIRN_GOLDEN_DIR");
  assert_non_null(golden);
  char *path = NULL;
  assert_true(asprintf(&path, "%s/../../deploy/cairnd.conf", golden) > 0);
  struct config cfg;
  load_ok(&cfg, ARGS("--config", path));
  assert_int_equal(cfg.node_id, 2);
  assert_string_equal(cfg.data_dir, "/var/lib/cairn");
  assert_string_equal(cfg.rack, "rack-b");
  assert_int_equal(cfg.log_level, LOG_INFO);
  assert_string_equal(cfg.listen.str, "0.0.0.0:7400");
  assert_string_equal(cfg.admin_listen.str, "127.0.0.1:7402");
  assert_string_equal(cfg.advertise_client.str, "node-2.cairn.internal:7400");
  assert_string_equal(cfg.advertise_cluster.str, "node-2.cairn.internal:7401");
  assert_int_equal(cfg.voters_len, 3);
  for (size_t i = 0; i < 3; i++) {
    char want[64];
    snprintf(want, sizeof want, "node-%zu.cairn.internal:7401", i + 1);
    assert_int_equal(cfg.voters[i].id, i + 1);
    assert_string_equal(cfg.voters[i].addr.str, want);
  }
  assert_false(cfg.join_set);
  assert_int_equal(cfg.max_frame_bytes, 16u << 20);
  assert_int_equal(cfg.raft_segment_bytes, 1u << 20);
  assert_int_equal(cfg.raft_log_budget_bytes, 64u << 20);
  assert_int_equal(cfg.raft_log_node_budget_bytes, 1u << 30);
  assert_round_trips(&cfg);

  /* the example with flags on top: a fourth node joining */
  load_ok(&cfg, ARGS("--config", path, "--node-id", "4", "--advertise", "node-4.cairn.internal",
                     "--join", "node-1.cairn.internal:7400"));
  assert_int_equal(cfg.voters_len, 3); /* the file's voters stay: they were given */
  assert_string_equal(cfg.advertise_cluster.str, "node-4.cairn.internal:7401");
  free(path);
}

static void test_config_raft_mux_is_auto_on_or_off_default_auto(void **state)
{
  (void)state;
  struct config cfg;
  load_ok(&cfg, ARGS("--node-id", "1"));
  assert_string_equal(cfg.raft_mux, "auto");
  assert_round_trips(&cfg);
  load_ok(&cfg, ARGS("--node-id", "1", "--raft-mux", "on"));
  assert_string_equal(cfg.raft_mux, "on");
  assert_round_trips(&cfg);
  load_ok(&cfg, ARGS("--node-id", "1", "--raft-mux", "off"));
  assert_string_equal(cfg.raft_mux, "off");
  assert_round_trips(&cfg);
  load_ok(&cfg, ARGS("--node-id", "1", "--raft-mux", "auto"));
  assert_string_equal(cfg.raft_mux, "auto");
  load_fails(ARGS("--node-id", "1", "--raft-mux", "yes"),
             "--raft-mux: 'yes' is not auto, on or off", NULL);
}

static void test_config_loads_are_independent(void **state)
{
  (void)state;
  struct config a;
  struct config b;
  load_ok(&a, ARGS("--node-id", "11", "--rack", "x"));
  load_fails(ARGS("--rack", "no spaces"), "--rack: 'no spaces' has a character", NULL);
  load_ok(&b, NO_ARGS);
  assert_int_equal(a.node_id, 11);
  assert_string_equal(a.rack, "x");
  assert_int_equal(b.node_id, 1);
  assert_string_equal(b.rack, "");
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_config_no_arguments_give_the_single_node_cluster),
      cmocka_unit_test(test_config_help_and_version_are_positive_results),
      cmocka_unit_test(test_config_usage_lists_every_flag_key_and_default),
      cmocka_unit_test(test_config_kafka_port_follows_the_client_port_rules),
      cmocka_unit_test(test_config_every_flag_sets_its_setting),
      cmocka_unit_test(test_config_unknown_flag_is_named),
      cmocka_unit_test(test_config_missing_value_is_named),
      cmocka_unit_test(test_config_bad_numbers_name_the_flag_and_the_range),
      cmocka_unit_test(test_config_node_id_zero_is_refused),
      cmocka_unit_test(test_config_bad_addresses_say_what_is_wrong),
      cmocka_unit_test(test_config_accepts_names_ipv6_and_port_zero_for_listeners),
      cmocka_unit_test(test_config_voters_lists_are_parsed_and_checked),
      cmocka_unit_test(test_config_this_node_as_voter_needs_its_advertised_cluster_address),
      cmocka_unit_test(test_config_advertised_addresses_follow_their_rules),
      cmocka_unit_test(test_config_join_leaves_voters_to_the_cluster),
      cmocka_unit_test(test_config_combinations_are_checked),
      cmocka_unit_test(test_config_write_refuses_what_it_cannot_read_back),
      cmocka_unit_test(test_config_file_accepts_colons_comments_and_blank_space),
      cmocka_unit_test(test_config_file_sets_values_and_flags_override_it_in_any_order),
      cmocka_unit_test(test_config_file_errors_name_file_and_line),
      cmocka_unit_test(test_config_unknown_key_in_cluster_section_is_named),
      cmocka_unit_test(test_config_unreadable_file_gives_errno_and_path),
      cmocka_unit_test(test_config_file_lines_have_a_length_limit),
      cmocka_unit_test(test_config_file_voters_may_span_indented_lines),
      cmocka_unit_test(test_config_example_file_loads_and_round_trips),
      cmocka_unit_test(test_config_raft_mux_is_auto_on_or_off_default_auto),
      cmocka_unit_test(test_config_loads_are_independent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
