/* fuzz_meta.c - libFuzzer target: the metadata group's state machine
 * (cluster/meta_state.h): meta_apply() over a sequence of commands, and
 * meta_snapshot_decode() over a snapshot, both from arbitrary bytes.
 *
 * Input: byte 0 is the mode:
 *   bit 0  start from a bootstrapped cluster of three registered nodes
 *          (built with the real command encoders) instead of an empty state
 *   bit 1  the rest is a snapshot, not commands
 *   bit 2  (snapshot) its header gets the magic, version, length and CRC
 * Commands: each a 2-byte little-endian length and its bytes (a
 * cairn.meta.MetaCommand), applied at Raft indexes 1, 2, ...
 *
 * Oracle: nothing crashes or leaks; meta_apply answers 0 or a negative code
 * with a message; after every command, taken or refused, the state passes
 * meta_state_check (an invariant broken by one accepted command would sit
 * in every replica's state); a refused command changes nothing but the
 * last index. At the end the state's snapshot decodes to a state that
 * encodes to the same bytes. A snapshot that decodes passes the check
 * (meta_snapshot_decode runs it) and encodes back to a snapshot that
 * decodes to the same bytes again.
 *
 * FUZZ_META_SEEDS=DIR writes seed inputs of real commands into DIR. */
#include "cluster/meta_state.h"
#include "common/err.h"
#include "common/log.h"
#include "format/crc32c.h"
#include "format/endian.h"
#include "fuzz_util.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FM_SNAPSHOT_HEADER 16 /* meta_state.h, "snapshot" */

/* The built-in start: bootstrap, then nodes 1-3 registered. */
static uint8_t *fm_start[4];
static size_t fm_start_len[4];

static void fm_need(int rv)
{
  if (rv != 0) {
    abort();
  }
}

static void fm_build_start(void)
{
  const uint64_t voters[3] = {1, 2, 3};
  fm_need(meta_cmd_bootstrap("fuzz-cluster", voters, 3, &fm_start[0], &fm_start_len[0]));
  for (uint64_t id = 1; id <= 3; id++) {
    char client[32], cluster[32];
    snprintf(client, sizeof client, "127.0.0.1:%llu", (unsigned long long)(7400 + 10 * id));
    snprintf(cluster, sizeof cluster, "127.0.0.1:%llu", (unsigned long long)(7401 + 10 * id));
    struct meta_node_info info = {
        .node_id = id, .incarnation = 100 + id, .client_addr = client, .cluster_addr = cluster};
    fm_need(meta_cmd_register_node(&info, 0, &fm_start[id], &fm_start_len[id]));
  }
}

/* Appends one command (2-byte length, bytes) to a seed being built. */
static void fm_seed_add(uint8_t *seed, size_t *len, uint8_t *cmd, size_t cmd_len)
{
  le_put16(seed + *len, (uint16_t)cmd_len);
  memcpy(seed + *len + 2, cmd, cmd_len);
  *len += 2 + cmd_len;
  free(cmd);
}

static void fm_write_seeds(const char *dir)
{
  static uint8_t seed[1 << 16];
  size_t len = 1;
  seed[0] = 1; /* from the built-in start */
  uint8_t *c;
  size_t n;
  struct meta_topic_config cfg = {.retention_bytes = 1 << 20, .retention_ms = 60000};
  fm_need(meta_cmd_create_topic("orders", 3, 3, &cfg, &c, &n));
  fm_seed_add(seed, &len, c, n);
  fm_need(meta_cmd_add_partitions("orders", 5, &c, &n));
  fm_seed_add(seed, &len, c, n);
  fm_need(meta_cmd_report_leader(1, 0, 2, 3, &c, &n));
  fm_seed_add(seed, &len, c, n);
  const uint64_t replicas[3] = {3, 1, 2};
  fm_need(meta_cmd_set_replicas(1, 1, replicas, 3, 0, &c, &n));
  fm_seed_add(seed, &len, c, n);
  fm_need(meta_cmd_allocate_producer_id(0, &c, &n));
  fm_seed_add(seed, &len, c, n);
  fm_need(meta_cmd_set_node_state(2, META_NODE_DEAD, 0, 1000, &c, &n));
  fm_seed_add(seed, &len, c, n);
  fm_need(meta_cmd_delete_topic("orders", &c, &n));
  fm_seed_add(seed, &len, c, n);
  fuzz_dir_write(dir, "topic_life", seed, len);
  /* The same state as a snapshot. */
  struct meta_state st;
  meta_state_init(&st);
  struct meta_result res;
  for (int i = 0; i < 4; i++) {
    fm_need(meta_apply(&st, fm_start[i], fm_start_len[i], 0, &res));
  }
  fm_need(meta_cmd_create_topic("events", 4, 2, NULL, &c, &n));
  fm_need(meta_apply(&st, c, n, 0, &res));
  free(c);
  uint8_t *snap;
  size_t snap_len;
  fm_need(meta_snapshot_encode(&st, &snap, &snap_len));
  seed[0] = 2 | 4;
  memcpy(seed + 1, snap, snap_len);
  fuzz_dir_write(dir, "snapshot", seed, snap_len + 1);
  free(snap);
  meta_state_close(&st);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  log_set_level(LOG_OFF);
  fm_build_start();
  const char *dir = getenv("FUZZ_META_SEEDS");
  if (dir != NULL) {
    fm_write_seeds(dir);
  }
  return 0;
}

/* encode(st) decodes to a state that encodes to the same bytes. */
static void fm_round_trip(const struct meta_state *st)
{
  uint8_t *a, *b;
  size_t alen, blen;
  fm_need(meta_snapshot_encode(st, &a, &alen));
  struct meta_state back;
  meta_state_init(&back);
  int rv = meta_snapshot_decode(&back, a, alen);
  if (rv != 0) {
    fprintf(stderr, "a state's own snapshot does not decode: %s\n", cairn_strerror(rv));
    abort();
  }
  fm_need(meta_snapshot_encode(&back, &b, &blen));
  if (alen != blen || memcmp(a, b, alen) != 0) {
    fprintf(stderr, "a snapshot decodes to another state\n");
    abort();
  }
  free(a);
  free(b);
  meta_state_close(&back);
}

static void fm_check(const struct meta_state *st, const char *after)
{
  char why[256];
  if (meta_state_check(st, why, sizeof why) != 0) {
    fprintf(stderr, "after %s: %s\n", after, why);
    abort();
  }
}

static void fm_commands(const uint8_t *p, size_t len, bool bootstrapped)
{
  struct meta_state st;
  meta_state_init(&st);
  struct meta_result res;
  uint64_t index = 0;
  for (int i = 0; bootstrapped && i < 4; i++) {
    fm_need(meta_apply(&st, fm_start[i], fm_start_len[i], ++index, &res));
  }
  size_t at = 0;
  while (len - at >= 2) {
    size_t n = le_get16(p + at);
    at += 2;
    n = n < len - at ? n : len - at;
    uint8_t *before = NULL;
    size_t before_len = 0;
    fm_need(meta_snapshot_encode(&st, &before, &before_len));
    int rv = meta_apply(&st, p + at, n, ++index, &res);
    at += n;
    if (getenv("FUZZ_META_LOG") != NULL) { /* FUZZ_META_LOG=1: each command's outcome */
      fprintf(stderr, "command %llu: %s %s\n", (unsigned long long)index, cairn_strerror(rv),
              res.msg);
    }
    if (rv > 0 || rv != res.code || (rv != 0 && res.msg[0] == '\0')) {
      abort(); /* 0, or a negative code with its message */
    }
    if (rv == CAIRN_ENOMEM) {
      free(before);
      break; /* the one result allowed to differ between replicas */
    }
    fm_check(&st, rv == 0 ? "an accepted command" : "a refused command");
    if (rv != 0) {
      /* Refused: the state is what it was, but for the last index. */
      uint8_t *after;
      size_t after_len;
      fm_need(meta_snapshot_encode(&st, &after, &after_len));
      struct meta_state was;
      meta_state_init(&was);
      fm_need(meta_snapshot_decode(&was, before, before_len));
      was.last_index = st.last_index;
      uint8_t *expect;
      size_t expect_len;
      fm_need(meta_snapshot_encode(&was, &expect, &expect_len));
      if (after_len != expect_len || memcmp(after, expect, after_len) != 0) {
        fprintf(stderr, "a refused command (%s) changed the state\n", res.msg);
        abort();
      }
      meta_state_close(&was);
      free(after);
      free(expect);
    }
    free(before);
  }
  fm_round_trip(&st);
  meta_state_close(&st);
}

static void fm_snapshot(uint8_t *p, size_t len, uint8_t mode)
{
  if ((mode & 4) && len >= FM_SNAPSHOT_HEADER) {
    le_put32(p, META_SNAPSHOT_MAGIC);
    le_put32(p + 4, META_SNAPSHOT_VERSION);
    le_put32(p + 8, (uint32_t)(len - FM_SNAPSHOT_HEADER));
    le_put32(p + 12, crc32c(p + FM_SNAPSHOT_HEADER, len - FM_SNAPSHOT_HEADER));
  }
  struct meta_state st;
  meta_state_init(&st);
  int rv = meta_snapshot_decode(&st, p, len);
  if (rv > 0) {
    abort();
  }
  if (rv == 0) {
    fm_check(&st, "a decoded snapshot");
    fm_round_trip(&st);
  }
  meta_state_close(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  uint8_t mode;
  size_t len;
  uint8_t *p = fuzz_body(data, size, &mode, &len);
  if (p == NULL) {
    return 0;
  }
  if (mode & 2) {
    fm_snapshot(p, len, mode);
  } else {
    fm_commands(p, len, mode & 1);
  }
  free(p);
  return 0;
}
