/* test_offset_record.c - the records of __cairn_offsets: a batch of a
 * commit, a tombstone and a marker matches the golden file byte for byte,
 * the golden bytes decode to the known fields, bad keys are refused, and a
 * group's membership record restores its members and generation in a new
 * coordinator's group (native and client-assigned) or empties it.
 * CAIRN_GOLDEN_WRITE=1 rewrites the golden file (a deliberate format change
 * only, with a new OFFSET_RECORD_VERSION). */
#include "common/err.h"
#include "format/batch.h"
#include "format/batch_builder.h"
#include "server/group/offset_record.h"

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define GOLDEN_NAME "offsets_records_v1.bin"
#define GOLDEN_TS 1700000000000LL

static void golden_path(char *buf, size_t n)
{
  const char *dir = getenv("CAIRN_GOLDEN_DIR");
  snprintf(buf, n, "%s/%s", dir != NULL && dir[0] != '\0' ? dir : "tests/golden", GOLDEN_NAME);
}

/* The batch the golden file holds. Returns owned (free with free()). */
static uint8_t *golden_batch(size_t *len)
{
  struct batch_builder b;
  assert_int_equal(batch_builder_init(&b, 1 << 16), 0);
  struct offset_record *r = calloc(1, sizeof *r);
  assert_non_null(r);
  r->kind = OFFSET_RECORD_COMMIT;
  strcpy(r->group, "billing");
  strcpy(r->topic, "orders");
  r->partition = 3;
  r->offset = 42;
  strcpy(r->metadata, "host-a");
  r->commit_time_ms = GOLDEN_TS;
  r->generation = 7;
  assert_int_equal(offset_record_add(&b, r, GOLDEN_TS), 0);
  r->kind = OFFSET_RECORD_TOMBSTONE;
  r->partition = 4;
  assert_int_equal(offset_record_add(&b, r, GOLDEN_TS + 1), 0);
  memset(r, 0, sizeof *r);
  r->kind = OFFSET_RECORD_MARKER;
  assert_int_equal(offset_record_add(&b, r, GOLDEN_TS + 2), 0);
  free(r);
  uint8_t *out = NULL;
  assert_int_equal(batch_builder_finish(&b, &out, len), 0);
  batch_builder_close(&b);
  return out;
}

static int golden_setup(void **state)
{
  const char *w = getenv("CAIRN_GOLDEN_WRITE");
  if (w == NULL || strcmp(w, "1") != 0) {
    return 0;
  }
  size_t len = 0;
  uint8_t *buf = golden_batch(&len);
  char path[PATH_MAX];
  golden_path(path, sizeof path);
  FILE *f = fopen(path, "wb");
  int ok = f != NULL && fwrite(buf, 1, len, f) == len;
  if (f != NULL && fclose(f) != 0) {
    ok = 0;
  }
  free(buf);
  fprintf(stderr, "%s %s\n", ok ? "wrote" : "FAILED to write", path);
  return ok ? 0 : -1;
}

static uint8_t *golden_read(size_t *len)
{
  char path[PATH_MAX];
  golden_path(path, sizeof path);
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fail_msg("cannot open golden file %s (set CAIRN_GOLDEN_DIR, or run from the repo root)", path);
  }
  uint8_t *buf = malloc(4096);
  assert_non_null(buf);
  *len = fread(buf, 1, 4096, f);
  assert_true(feof(f));
  fclose(f);
  return buf;
}

static void test_offset_records_match_the_golden_file(void **state)
{
  size_t len = 0, glen = 0;
  uint8_t *buf = golden_batch(&len);
  uint8_t *g = golden_read(&glen);
  assert_int_equal(len, glen);
  assert_memory_equal(buf, g, len);
  free(buf);

  assert_int_equal(batch_validate(g, glen, 1 << 20, NULL, 0), 0);
  struct batch_iter it;
  assert_int_equal(batch_iter_init(&it, g, glen), 0);
  struct batch_record rec;
  struct offset_record *r = malloc(sizeof *r);
  assert_non_null(r);
  assert_int_equal(batch_iter_next(&it, &rec), 1);
  assert_int_equal(offset_record_decode(rec.key, rec.key_len, rec.value, rec.value_len, r), 0);
  assert_int_equal(r->kind, OFFSET_RECORD_COMMIT);
  assert_string_equal(r->group, "billing");
  assert_string_equal(r->topic, "orders");
  assert_int_equal(r->partition, 3);
  assert_int_equal(r->offset, 42);
  assert_string_equal(r->metadata, "host-a");
  assert_int_equal(r->commit_time_ms, GOLDEN_TS);
  assert_int_equal(r->generation, 7);
  assert_int_equal(rec.timestamp, GOLDEN_TS);
  assert_int_equal(batch_iter_next(&it, &rec), 1);
  assert_null(rec.value);
  assert_int_equal(offset_record_decode(rec.key, rec.key_len, rec.value, rec.value_len, r), 0);
  assert_int_equal(r->kind, OFFSET_RECORD_TOMBSTONE);
  assert_int_equal(r->partition, 4);
  assert_int_equal(batch_iter_next(&it, &rec), 1);
  assert_int_equal(offset_record_decode(rec.key, rec.key_len, rec.value, rec.value_len, r), 0);
  assert_int_equal(r->kind, OFFSET_RECORD_MARKER);
  assert_int_equal(batch_iter_next(&it, &rec), 0);
  free(r);
  free(g);
}

/* Finishes b (closed) and reads its first record into rec, which points
 * into the returned batch (free it). */
static uint8_t *finish_first_record(struct batch_builder *b, struct batch_record *rec)
{
  uint8_t *out = NULL;
  size_t len = 0;
  assert_int_equal(batch_builder_finish(b, &out, &len), 0);
  batch_builder_close(b);
  struct batch_iter it;
  assert_int_equal(batch_iter_init(&it, out, len), 0);
  assert_int_equal(batch_iter_next(&it, rec), 1);
  return out;
}

static void test_offset_records_refuse_bad_keys_and_names(void **state)
{
  struct offset_record *r = calloc(1, sizeof *r);
  assert_non_null(r);
  static const uint8_t junk[] = {0xff, 0xff, 0xff};
  assert_int_equal(offset_record_decode(junk, sizeof junk, NULL, 0, r), CAIRN_ECORRUPT);
  assert_int_equal(offset_record_decode(NULL, 0, NULL, 0, r), CAIRN_ECORRUPT);
  /* A key of version 2: 08 02 (field 1, varint 2). */
  static const uint8_t v2[] = {0x08, 0x02};
  assert_int_equal(offset_record_decode(v2, sizeof v2, NULL, 0, r), CAIRN_ECORRUPT);
  /* A commit without a group. */
  struct batch_builder b;
  assert_int_equal(batch_builder_init(&b, 1 << 16), 0);
  r->kind = OFFSET_RECORD_COMMIT;
  strcpy(r->topic, "t");
  assert_int_equal(offset_record_add(&b, r, 1), CAIRN_EINVAL);
  /* A commit with all-default fields has an empty value, not a null one. */
  strcpy(r->group, "g");
  assert_int_equal(offset_record_add(&b, r, 1), 0);
  struct batch_record rec;
  uint8_t *out = finish_first_record(&b, &rec);
  assert_int_equal(offset_record_decode(rec.key, rec.key_len, rec.value, rec.value_len, r), 0);
  assert_int_equal(r->kind, OFFSET_RECORD_COMMIT);
  assert_int_equal(r->offset, 0);
  free(out);
  free(r);
}

/* ---- a group's membership ---- */

static uint32_t env_partitions(void *ctx, const char *topic)
{
  (void)ctx;
  return strcmp(topic, "orders") == 0 ? 6 : 0;
}

static const struct group_env env = {.partitions = env_partitions};
static const char *const topics[] = {"orders"};

static void step_as(struct group *g, enum group_event_type type, const char *member,
                    const char *instance, int32_t gen, uint64_t now, const char *ptype)
{
  static const char *const strategies[] = {"range"};
  static const struct group_opaque_in protocols[] = {{"range", (const uint8_t *)"sub", 3}};
  static const struct group_opaque_in assignments[] = {{"a", (const uint8_t *)"A-bytes", 7}};
  struct group_actions acts = {0};
  struct group_event ev = {.type = type,
                           .now_ms = now,
                           .wall_ms = 1000000 + now,
                           .member_id = type == GROUP_EV_JOIN ? "" : member,
                           .new_member_id = member,
                           .instance_id = instance,
                           .generation = gen,
                           .client_id = "t",
                           .session_timeout_ms = 3000,
                           .rebalance_timeout_ms = 5000,
                           .topics = topics,
                           .ntopics = 1,
                           .strategies = strategies,
                           .nstrategies = 1,
                           .protocol_type = ptype,
                           .protocols = protocols,
                           .nprotocols = 1,
                           .assignments = assignments,
                           .nassignments = strcmp(member, "a") == 0 ? 1 : 0};
  assert_int_equal(group_step(g, &env, &ev, &acts), 0);
  group_actions_free(&acts);
}

static void step(struct group *g, enum group_event_type type, const char *member, int32_t gen,
                 uint64_t now, const char *ptype)
{
  step_as(g, type, member, NULL, gen, now, ptype);
}

/* g's membership through a GROUP record into a fresh group (a new
 * coordinator loading the log). */
static void restore_via_record(const struct group *g, struct group *into)
{
  struct batch_builder b;
  assert_int_equal(batch_builder_init(&b, 1 << 16), 0);
  assert_int_equal(offset_record_add_group(&b, g, 5), 0);
  struct batch_record rec;
  uint8_t *out = finish_first_record(&b, &rec);
  struct offset_record *r = calloc(1, sizeof *r);
  assert_non_null(r);
  assert_int_equal(offset_record_decode(rec.key, rec.key_len, rec.value, rec.value_len, r), 0);
  assert_int_equal(r->kind, OFFSET_RECORD_GROUP);
  assert_string_equal(r->group, g->name);
  assert_int_equal(offset_record_restore(into, rec.value, rec.value_len, &env, 50000, 60000), 0);
  free(r);
  free(out);
}

/* Two members of a Cairn-assigned group, stable at generation 1: a new
 * coordinator knows both, their generation and partitions; their commits
 * and heartbeats go on; a stranger is still refused. */
static void test_group_record_restores_a_native_group(void **state)
{
  (void)state;
  struct group g, h;
  assert_int_equal(group_init(&g, "billing", 0, 0), 0);
  step(&g, GROUP_EV_JOIN, "a", 0, 0, NULL);
  step(&g, GROUP_EV_JOIN, "b", 0, 10, NULL);
  step(&g, GROUP_EV_TICK, "", 0, 10 + GROUP_INITIAL_DELAY_MS, NULL);
  step(&g, GROUP_EV_SYNC, "a", 1, 1100, NULL);
  step(&g, GROUP_EV_SYNC, "b", 1, 1100, NULL);
  /* The record is written while the syncs wait for it. */
  assert_int_equal(g.state, GROUP_STORING);
  assert_int_equal(group_init(&h, "billing", 0, 0), 0);
  restore_via_record(&g, &h);
  step(&g, GROUP_EV_STORED, "", 1, 1100, NULL);
  assert_int_equal(g.state, GROUP_STABLE);
  assert_int_equal(h.state, GROUP_STABLE);
  assert_int_equal(h.generation, 1);
  assert_int_equal(h.nmembers, 2);
  assert_string_equal(h.leader, g.leader);
  for (uint32_t p = 0; p < 6; p++) {
    const struct group_member *o = group_owner(&g, "orders", p);
    assert_non_null(o);
    assert_true(group_member_owns(&h, o->id, "orders", p));
  }
  assert_int_equal(group_commit_check(&h, "a", NULL, 1, 50100), 0);
  assert_int_equal(group_commit_check(&h, "a", NULL, 0, 50100), CAIRN_EILLEGAL_GENERATION);
  assert_int_equal(group_commit_check(&h, "x", NULL, 1, 50100), CAIRN_EUNKNOWN_MEMBER);
  step(&h, GROUP_EV_HEARTBEAT, "b", 1, 50200, NULL);
  /* The sessions restarted at the load: a silent member expires later. */
  step(&h, GROUP_EV_HEARTBEAT, "a", 1, 52000, NULL);
  step(&h, GROUP_EV_TICK, "", 0, 53500, NULL);
  assert_non_null(group_member_find(&h, "a"));
  assert_null(group_member_find(&h, "b"));
  assert_int_equal(h.state, GROUP_PREPARING);
  group_close(&g);
  group_close(&h);
}

/* A Kafka (client-assigned) member: the leader's bytes and the protocol
 * survive; a new member can join with that protocol; the group's record
 * once empty empties the restored group. */
static void test_group_record_restores_a_client_assigned_group(void **state)
{
  (void)state;
  struct group g, h;
  assert_int_equal(group_init(&g, "kg", 0, 0), 0);
  step(&g, GROUP_EV_JOIN, "a", 0, 0, "consumer");
  step(&g, GROUP_EV_TICK, "", 0, GROUP_INITIAL_DELAY_MS, "consumer");
  step(&g, GROUP_EV_SYNC, "a", 1, 1100, "consumer");
  assert_int_equal(g.state, GROUP_STORING); /* the leader's bytes are in: kept first */
  assert_int_equal(group_init(&h, "kg", 0, 0), 0);
  restore_via_record(&g, &h);
  step(&g, GROUP_EV_STORED, "", 1, 1100, "consumer");
  assert_int_equal(g.state, GROUP_STABLE);
  assert_int_equal(h.state, GROUP_STABLE);
  assert_string_equal(h.protocol_type, "consumer");
  assert_string_equal(h.protocol, "range");
  const struct group_member *m = group_member_find(&h, "a");
  assert_non_null(m);
  assert_int_equal(m->assignment_len, 7);
  assert_memory_equal(m->assignment, "A-bytes", 7);
  const struct group_protocol *gp = group_member_protocol(&h, m);
  assert_non_null(gp);
  assert_int_equal(gp->len, 3);
  assert_memory_equal(gp->meta, "sub", 3);
  assert_int_equal(group_commit_check(&h, "a", NULL, 1, 50100), 0);
  step(&h, GROUP_EV_JOIN, "b", 0, 50200, "consumer");
  assert_int_equal(h.state, GROUP_PREPARING);
  step(&g, GROUP_EV_LEAVE, "a", 0, 2000, "consumer");
  assert_int_equal(g.state, GROUP_EMPTY);
  restore_via_record(&g, &h);
  assert_int_equal(h.nmembers, 0);
  assert_int_equal(h.state, GROUP_EMPTY);
  assert_int_equal(h.generation, g.generation);
  group_close(&g);
  group_close(&h);
}

/* A static member's instance id survives the record: the new coordinator
 * fences the old member id once the instance restarts, and a restart
 * under it takes over the member without a rebalance. */
static void test_group_record_keeps_static_members(void **state)
{
  (void)state;
  struct group g, h;
  assert_int_equal(group_init(&g, "ks", 0, 0), 0);
  step_as(&g, GROUP_EV_JOIN, "a", "host-1", 0, 0, "consumer");
  step_as(&g, GROUP_EV_TICK, "", NULL, 0, GROUP_INITIAL_DELAY_MS, "consumer");
  step_as(&g, GROUP_EV_SYNC, "a", "host-1", 1, 1100, "consumer");
  assert_int_equal(g.state, GROUP_STORING);
  assert_int_equal(group_init(&h, "ks", 0, 0), 0);
  restore_via_record(&g, &h);
  assert_string_equal(group_member_find(&h, "a")->instance_id, "host-1");
  assert_int_equal(group_commit_check(&h, "zz", "host-1", 1, 50100), CAIRN_EFENCED_INSTANCE);
  step_as(&h, GROUP_EV_JOIN, "a2", "host-1", 0, 50200, "consumer");
  assert_null(group_member_find(&h, "a"));
  assert_int_equal(h.state, GROUP_STORING);
  assert_int_equal(h.generation, 1);
  assert_memory_equal(group_member_find(&h, "a2")->assignment, "A-bytes", 7);
  assert_int_equal(group_commit_check(&h, "a", "host-1", 1, 50300), CAIRN_EFENCED_INSTANCE);
  group_close(&g);
  group_close(&h);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_offset_records_match_the_golden_file),
      cmocka_unit_test(test_offset_records_refuse_bad_keys_and_names),
      cmocka_unit_test(test_group_record_restores_a_native_group),
      cmocka_unit_test(test_group_record_restores_a_client_assigned_group),
      cmocka_unit_test(test_group_record_keeps_static_members),
  };
  return cmocka_run_group_tests(tests, golden_setup, NULL);
}
