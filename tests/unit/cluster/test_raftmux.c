/* test_raftmux.c - the multiplexed Raft frame codec (raftmux.h): every raft
 * 0.15 message type round-trips with its entries, configuration and data;
 * the golden header pins the layout; every truncation of a valid frame and
 * seeded random damage are refused without a leak or a crash; the largest
 * messages a partition replica sends fit the size bounds. */
#include "cluster/raftmux.h"
#include "cluster/rgroup.h"
#include "common/err.h"
#include "storage/manifest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define ADDR "127.0.0.1:7001"

static uint8_t *encode(const struct raft_message *m, uint64_t gid, size_t *len)
{
  size_t need = raftmux_encoded_size(m, strlen(ADDR));
  assert_true(need > 0);
  uint8_t *buf = malloc(need);
  assert_non_null(buf);
  long n = raftmux_encode(buf, need, gid, 3, ADDR, m);
  assert_int_equal(n, (long)need);
  /* One byte short of room is refused, not overrun. */
  assert_int_equal(raftmux_encode(buf, need - 1, gid, 3, ADDR, m), CAIRN_ETOOLARGE);
  *len = need;
  return buf;
}

/* Decodes p and checks the header fields every type shares. */
static void decode_ok(const uint8_t *p, size_t len, struct raft_message *out, char *addr,
                      uint64_t want_gid, unsigned short type)
{
  uint64_t gid = 0;
  assert_int_equal(raftmux_decode(p, len, out, &gid, addr), 0);
  assert_int_equal(gid, want_gid);
  assert_int_equal(out->type, type);
  assert_int_equal(out->server_id, 3);
  assert_string_equal(out->server_address, ADDR);
}

/* Every proper prefix of a valid frame is refused (and frees what it took:
 * the sanitizer build checks leaks). */
static void every_prefix_refused(const uint8_t *p, size_t len)
{
  for (size_t k = 0; k < len; k++) {
    struct raft_message m;
    uint64_t gid;
    char addr[RAFTMUX_ADDRESS_MAX + 1];
    int rv = raftmux_decode(p, k, &m, &gid, addr);
    assert_true(rv < 0);
  }
  /* One byte more is refused too: nothing may follow the body. */
  uint8_t *longer = malloc(len + 1);
  memcpy(longer, p, len);
  longer[len] = 0;
  struct raft_message m;
  uint64_t gid;
  char addr[RAFTMUX_ADDRESS_MAX + 1];
  assert_int_equal(raftmux_decode(longer, len + 1, &m, &gid, addr), CAIRN_ETRUNCATED);
  free(longer);
}

static void test_header_matches_documented_layout(void **state)
{
  (void)state;
  struct raft_message m = {.type = RAFT_IO_TIMEOUT_NOW};
  m.timeout_now = (struct raft_timeout_now){.term = 5, .last_log_index = 9, .last_log_term = 4};
  size_t len;
  uint8_t *p = encode(&m, 0x0102030405060708ull, &len);
  static const uint8_t golden[] = {
      0x52, 0x01, RAFT_IO_TIMEOUT_NOW,
      14,   0,    0,
      0,    0, /* tag, version, type, addr len, 0 */
      0x08, 0x07, 0x06,
      0x05, 0x04, 0x03,
      0x02, 0x01, /* group */
      0x03, 0,    0,
      0,    0,    0,
      0,    0, /* sender id 3 */
  };
  assert_int_equal(len, sizeof golden + 14 + 24);
  assert_memory_equal(p, golden, sizeof golden);
  assert_memory_equal(p + sizeof golden, ADDR, 14);
  assert_int_equal(p[sizeof golden + 14], 5); /* term, little-endian */
  uint64_t gid;
  assert_int_equal(raftmux_peek(p, len, &gid), 0);
  assert_int_equal(gid, 0x0102030405060708ull);
  free(p);
}

static void test_small_messages_round_trip(void **state)
{
  (void)state;
  struct raft_message in[5];
  memset(in, 0, sizeof in);
  in[0].type = RAFT_IO_REQUEST_VOTE;
  in[0].request_vote = (struct raft_request_vote){7, 3, 100, 6, true, true};
  in[1].type = RAFT_IO_REQUEST_VOTE_RESULT;
  in[1].request_vote_result = (struct raft_request_vote_result){7, true, raft_tribool_false};
  in[2].type = RAFT_IO_APPEND_ENTRIES_RESULT;
  in[2].append_entries_result = (struct raft_append_entries_result){8, 41, 40};
  in[3].type = RAFT_IO_TIMEOUT_NOW;
  in[3].timeout_now = (struct raft_timeout_now){9, 55, 8};
  in[4].type = RAFT_IO_REQUEST_VOTE_RESULT;
  in[4].request_vote_result = (struct raft_request_vote_result){1, false, raft_tribool_unknown};
  for (int i = 0; i < 5; i++) {
    size_t len;
    uint8_t *p = encode(&in[i], 42, &len);
    struct raft_message out;
    char addr[RAFTMUX_ADDRESS_MAX + 1];
    decode_ok(p, len, &out, addr, 42, in[i].type);
    switch (in[i].type) {
    case RAFT_IO_REQUEST_VOTE:
      assert_int_equal(out.request_vote.term, 7);
      assert_int_equal(out.request_vote.candidate_id, 3);
      assert_int_equal(out.request_vote.last_log_index, 100);
      assert_int_equal(out.request_vote.last_log_term, 6);
      assert_true(out.request_vote.disrupt_leader);
      assert_true(out.request_vote.pre_vote);
      break;
    case RAFT_IO_REQUEST_VOTE_RESULT:
      assert_int_equal(out.request_vote_result.term, in[i].request_vote_result.term);
      assert_int_equal(out.request_vote_result.vote_granted,
                       in[i].request_vote_result.vote_granted);
      assert_int_equal(out.request_vote_result.pre_vote, in[i].request_vote_result.pre_vote);
      break;
    case RAFT_IO_APPEND_ENTRIES_RESULT:
      assert_int_equal(out.append_entries_result.term, 8);
      assert_int_equal(out.append_entries_result.rejected, 41);
      assert_int_equal(out.append_entries_result.last_log_index, 40);
      break;
    default:
      assert_int_equal(out.timeout_now.term, 9);
      assert_int_equal(out.timeout_now.last_log_index, 55);
      assert_int_equal(out.timeout_now.last_log_term, 8);
      break;
    }
    raftmux_message_free(&out);
    every_prefix_refused(p, len);
    free(p);
  }
}

static void test_append_entries_round_trip_in_one_batch(void **state)
{
  (void)state;
  static char a[] = "first", b[] = "", c[] = "the third entry's bytes";
  struct raft_entry es[3] = {
      {.term = 4, .type = RAFT_COMMAND, .buf = {a, sizeof a - 1}},
      {.term = 4, .type = RAFT_BARRIER, .buf = {b, 0}},
      {.term = 5, .type = RAFT_CHANGE, .buf = {c, sizeof c - 1}},
  };
  struct raft_message in = {.type = RAFT_IO_APPEND_ENTRIES};
  in.append_entries = (struct raft_append_entries){5, 10, 4, 9, es, 3};
  size_t len;
  uint8_t *p = encode(&in, 7, &len);
  struct raft_message out;
  char addr[RAFTMUX_ADDRESS_MAX + 1];
  decode_ok(p, len, &out, addr, 7, RAFT_IO_APPEND_ENTRIES);
  const struct raft_append_entries *ae = &out.append_entries;
  assert_int_equal(ae->term, 5);
  assert_int_equal(ae->prev_log_index, 10);
  assert_int_equal(ae->prev_log_term, 4);
  assert_int_equal(ae->leader_commit, 9);
  assert_int_equal(ae->n_entries, 3);
  for (unsigned i = 0; i < 3; i++) {
    assert_int_equal(ae->entries[i].term, es[i].term);
    assert_int_equal(ae->entries[i].type, es[i].type);
    assert_int_equal(ae->entries[i].buf.len, es[i].buf.len);
    assert_memory_equal(ae->entries[i].buf.base, es[i].buf.base, es[i].buf.len);
    assert_ptr_equal(ae->entries[i].batch, ae->entries[0].batch); /* raft frees it once */
  }
  raftmux_message_free(&out);
  every_prefix_refused(p, len);
  free(p);
  /* No entries at all (a heartbeat): no array, no batch. */
  in.append_entries.n_entries = 0;
  in.append_entries.entries = NULL;
  p = encode(&in, 7, &len);
  decode_ok(p, len, &out, addr, 7, RAFT_IO_APPEND_ENTRIES);
  assert_int_equal(out.append_entries.n_entries, 0);
  assert_null(out.append_entries.entries);
  raftmux_message_free(&out);
  free(p);
}

static void test_install_snapshot_round_trip_with_conf_and_data(void **state)
{
  (void)state;
  struct raft_message in = {.type = RAFT_IO_INSTALL_SNAPSHOT};
  struct raft_install_snapshot *is = &in.install_snapshot;
  is->term = 6;
  is->last_index = 1000;
  is->last_term = 5;
  is->conf_index = 3;
  raft_configuration_init(&is->conf);
  assert_int_equal(raft_configuration_add(&is->conf, 1, "127.0.0.1:7001", RAFT_VOTER), 0);
  assert_int_equal(raft_configuration_add(&is->conf, 2, "127.0.0.1:7002", RAFT_VOTER), 0);
  assert_int_equal(raft_configuration_add(&is->conf, 9, "h:1", RAFT_SPARE), 0);
  static char data[] = "snapshot payload";
  is->data = (struct raft_buffer){data, sizeof data};
  size_t len;
  uint8_t *p = encode(&in, 11, &len);
  struct raft_message out;
  char addr[RAFTMUX_ADDRESS_MAX + 1];
  decode_ok(p, len, &out, addr, 11, RAFT_IO_INSTALL_SNAPSHOT);
  const struct raft_install_snapshot *os = &out.install_snapshot;
  assert_int_equal(os->term, 6);
  assert_int_equal(os->last_index, 1000);
  assert_int_equal(os->last_term, 5);
  assert_int_equal(os->conf_index, 3);
  assert_int_equal(os->conf.n, 3);
  for (unsigned i = 0; i < 3; i++) {
    assert_int_equal(os->conf.servers[i].id, is->conf.servers[i].id);
    assert_int_equal(os->conf.servers[i].role, is->conf.servers[i].role);
    assert_string_equal(os->conf.servers[i].address, is->conf.servers[i].address);
  }
  assert_int_equal(os->data.len, sizeof data);
  assert_memory_equal(os->data.base, data, sizeof data);
  raftmux_message_free(&out);
  every_prefix_refused(p, len);
  free(p);
  raft_configuration_close(&is->conf);
}

/* Damage no checksum would catch at this layer (the nodewatch frame has one):
 * bad tag, version, type, flags, entry types, counts. */
static void test_malformed_fields_refused(void **state)
{
  (void)state;
  static char a[] = "x";
  struct raft_entry e = {.term = 1, .type = RAFT_COMMAND, .buf = {a, 1}};
  struct raft_message in = {.type = RAFT_IO_APPEND_ENTRIES};
  in.append_entries = (struct raft_append_entries){1, 0, 0, 0, &e, 1};
  size_t len;
  uint8_t *p = encode(&in, 1, &len);
  struct raft_message out;
  uint64_t gid;
  char addr[RAFTMUX_ADDRESS_MAX + 1];
  size_t body = RAFTMUX_HEADER + strlen(ADDR);
  struct {
    size_t at;
    uint8_t v;
    int want;
  } cases[] = {
      {0, 0x01, CAIRN_EBADMAGIC},              /* a heartbeat's first byte */
      {1, 2, CAIRN_EUNSUPPORTED},              /* version */
      {2, 99, CAIRN_EUNSUPPORTED},             /* message type */
      {3, 0, CAIRN_EBADFRAME},                 /* empty address */
      {4, 1, CAIRN_EBADFRAME},                 /* reserved */
      {body + 32, 2, CAIRN_ETRUNCATED},        /* entry count 2, one entry's bytes */
      {body + 32 + 3, 0x80, CAIRN_ETRUNCATED}, /* entry count 2^31 */
      {body + 36 + 8, 77, CAIRN_EBADFRAME},    /* entry type */
      {body + 36 + 10, 1, CAIRN_EBADFRAME},    /* an entry's padding (fuzz_raftmux) */
      {body + 36 + 12, 5, CAIRN_ETRUNCATED},   /* entry length past the end */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint8_t saved = p[cases[i].at];
    p[cases[i].at] = cases[i].v;
    assert_int_equal(raftmux_decode(p, len, &out, &gid, addr), cases[i].want);
    p[cases[i].at] = saved;
  }
  free(p);
  /* An address with a NUL inside. */
  struct raft_message tn = {.type = RAFT_IO_TIMEOUT_NOW};
  p = encode(&tn, 1, &len);
  p[RAFTMUX_HEADER + 2] = 0;
  assert_int_equal(raftmux_decode(p, len, &out, &gid, addr), CAIRN_EBADFRAME);
  free(p);
  /* Bad request-vote flags and vote values. */
  struct raft_message rv = {.type = RAFT_IO_REQUEST_VOTE};
  p = encode(&rv, 1, &len);
  p[len - 4] = 4;
  assert_int_equal(raftmux_decode(p, len, &out, &gid, addr), CAIRN_EBADFRAME);
  free(p);
  /* Encoding refuses what it cannot describe. */
  uint8_t buf[256];
  struct raft_message bad = {.type = 42};
  assert_int_equal(raftmux_encode(buf, sizeof buf, 1, 1, ADDR, &bad), CAIRN_EINVAL);
  assert_int_equal(raftmux_encode(buf, sizeof buf, 1, 1, "", &tn), CAIRN_EINVAL);
}

/* Seeded random corruption of valid frames: each decodes or is refused,
 * and a decoded one is freed cleanly. */
static void test_random_damage_never_crashes(void **state)
{
  (void)state;
  unsigned seed = (unsigned)strtoul(getenv("RAFTMUX_SEED") ? getenv("RAFTMUX_SEED") : "1", 0, 10);
  printf("seed %u (RAFTMUX_SEED replays)\n", seed);
  srand(seed);
  static char a[] = "abcdefgh", c[] = "0123456789";
  struct raft_entry es[2] = {{.term = 2, .type = RAFT_COMMAND, .buf = {a, 8}},
                             {.term = 2, .type = RAFT_COMMAND, .buf = {c, 10}}};
  struct raft_message ae = {.type = RAFT_IO_APPEND_ENTRIES};
  ae.append_entries = (struct raft_append_entries){2, 1, 1, 1, es, 2};
  struct raft_message is = {.type = RAFT_IO_INSTALL_SNAPSHOT};
  raft_configuration_init(&is.install_snapshot.conf);
  assert_int_equal(raft_configuration_add(&is.install_snapshot.conf, 1, "a:1", RAFT_VOTER), 0);
  is.install_snapshot.data = (struct raft_buffer){c, 10};
  const struct raft_message *ms[2] = {&ae, &is};
  for (int round = 0; round < 20000; round++) {
    size_t len;
    uint8_t *p = encode(ms[round % 2], 5, &len);
    int flips = 1 + rand() % 3;
    for (int f = 0; f < flips; f++) {
      p[(size_t)rand() % len] = (uint8_t)rand();
    }
    size_t cut = rand() % 4 == 0 ? (size_t)rand() % len : len;
    struct raft_message out;
    uint64_t gid;
    char addr[RAFTMUX_ADDRESS_MAX + 1];
    if (raftmux_decode(p, cut, &out, &gid, addr) == 0) {
      raftmux_message_free(&out);
    }
    free(p);
  }
  raft_configuration_close(&is.install_snapshot.conf);
}

/* The largest messages a partition replica can send fit raftmux.h's
 * bounds: a bounded AppendEntries (a prefix within RGROUP_CAP_BYTES, or
 * one entry of max_entry_bytes alone) within RAFTMUX_AE_MAX, a snapshot of
 * the largest manifest a receiver takes with the largest configuration
 * within RAFTMUX_MSG_MAX; and the send queue holds two AppendEntries. */
static void test_largest_messages_fit_the_bounds(void **state)
{
  (void)state;
  char addr[RAFTMUX_ADDRESS_MAX + 1];
  memset(addr, 'a', RAFTMUX_ADDRESS_MAX);
  addr[RAFTMUX_ADDRESS_MAX] = '\0';

  struct raft_entry one = {.term = 1, .type = RAFT_COMMAND};
  one.buf.len = RGROUP_DEFAULT_MAX_ENTRY_BYTES;
  struct raft_message m = {.type = RAFT_IO_APPEND_ENTRIES};
  m.append_entries.entries = &one;
  m.append_entries.n_entries = 1;
  size_t ae_one = raftmux_encoded_size(&m, RAFTMUX_ADDRESS_MAX);
  assert_true(ae_one <= RAFTMUX_AE_MAX);

  /* A prefix that rgroup_cap_count keeps whole: 16 bytes per entry
   * counted with its bytes, at most RGROUP_CAP_BYTES in all. */
  enum { N = 64 };
  struct raft_entry many[N];
  memset(many, 0, sizeof many);
  for (int i = 0; i < N; i++) {
    many[i].type = RAFT_COMMAND;
    many[i].buf.len = RGROUP_CAP_BYTES / N - 16;
  }
  m.append_entries.entries = many;
  m.append_entries.n_entries = N;
  assert_true(raftmux_encoded_size(&m, RAFTMUX_ADDRESS_MAX) <= RAFTMUX_AE_MAX);

  struct raft_message is = {.type = RAFT_IO_INSTALL_SNAPSHOT};
  is.install_snapshot.data.len = MANIFEST_MAX_BYTES;
  struct raft_server *servers = calloc(RAFTMUX_CONF_MAX, sizeof *servers);
  assert_non_null(servers);
  for (unsigned i = 0; i < RAFTMUX_CONF_MAX; i++) {
    servers[i].id = i + 1;
    servers[i].address = addr;
  }
  is.install_snapshot.conf.servers = servers;
  is.install_snapshot.conf.n = RAFTMUX_CONF_MAX;
  size_t is_max = raftmux_encoded_size(&is, RAFTMUX_ADDRESS_MAX);
  assert_int_equal(is_max, RAFTMUX_MSG_MAX);
  free(servers);

  assert_true(RAFTMUX_MSG_MAX > NWATCH_FRAME_MAX);
  /* The queue to a peer holds a burst of the largest AppendEntries, and
   * stays a bounded share of memory per peer. */
  assert_true(RAFTMUX_SENDQ_MAX >= 16 * ae_one);
  assert_true(RAFTMUX_SENDQ_MAX <= 32u * NWATCH_FRAME_MAX);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_header_matches_documented_layout),
      cmocka_unit_test(test_small_messages_round_trip),
      cmocka_unit_test(test_append_entries_round_trip_in_one_batch),
      cmocka_unit_test(test_install_snapshot_round_trip_with_conf_and_data),
      cmocka_unit_test(test_malformed_fields_refused),
      cmocka_unit_test(test_random_damage_never_crashes),
      cmocka_unit_test(test_largest_messages_fit_the_bounds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
