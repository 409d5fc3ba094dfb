/* fuzz_group.c - libFuzzer target: a consumer group's state machine
 * (src/server/group/group.h) over events from the input, static members
 * included, and its membership record (offset_record.h) both from the
 * group and from arbitrary bytes (a GROUP record in __cairn_offsets is read
 * back from disk by every new coordinator).
 *
 * Input: byte 0 is the mode:
 *   bit 0  client-assigned (Kafka's model, protocol type "consumer")
 *          instead of Cairn-assigned
 *   bit 1  start by restoring the group from a GROUP record value: the
 *          next 2 bytes (little-endian) are its length, then its bytes
 * then events of 4 bytes each: kind, member, instance, time step:
 *   kind % 8: 0 JOIN as a new member (member id ""), 1 JOIN again as an
 *     existing member, 2 SYNC, 3 HEARTBEAT, 4 LEAVE, 5 TICK, 6 the
 *     outcome of a store in flight (kind bit 3: failed), 7 a commit check
 *   member: which existing member (index mod count), or for kind 0 the
 *     subscription/protocol bytes variant (bit 0: topic t1 too; bit 1:
 *     other protocol bytes)
 *   instance: bit 7 clear: instance "i<instance % 4>", else dynamic
 *   time step: milliseconds added (times 40)
 *
 * Oracle: nothing crashes or leaks; every step answers 0 or a negative
 * code and then: no two members have one member id or one instance id; the group is EMPTY
 * exactly when it has no member; a member-less leader never leads; the
 * generation never goes back; a STORING group has a store of its
 * generation in flight; a Cairn-assigned STORING or STABLE group's
 * assignment gives every partition of every subscribed topic to exactly
 * one member; and a STORING or STABLE group's record restores into a new
 * group with the same generation, leader, members and instance ids. A
 * restored start (bit 1) is held to the same after group_restore accepts
 * it (but for the assignment of the generation it restored, which is the
 * record's).
 *
 * FUZZ_GROUP_SEEDS=DIR writes seed inputs into DIR. */
#include "common/err.h"
#include "common/log.h"
#include "format/batch.h"
#include "format/batch_builder.h"
#include "format/endian.h"
#include "fuzz_util.h"
#include "server/group/group.h"
#include "server/group/offset_record.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FG_TOPIC0_PARTS 5
#define FG_TOPIC1_PARTS 3
#define FG_MAX_PENDING 64

static uint32_t fg_partitions(void *ctx, const char *topic)
{
  (void)ctx;
  if (strcmp(topic, "t0") == 0) {
    return FG_TOPIC0_PARTS;
  }
  return strcmp(topic, "t1") == 0 ? FG_TOPIC1_PARTS : 0;
}

static const struct group_env fg_env = {.partitions = fg_partitions};

struct fg_run {
  struct group g;
  struct group_actions acts;
  bool client;
  uint64_t now;
  int32_t last_gen;
  int32_t pending[FG_MAX_PENDING]; /* generations whose STORE is in flight */
  size_t npending;
  unsigned next_id;
  int32_t restored_gen; /* a restored record's generation: its assignment is
                         * the record's, not this code's (-1: none) */
};

static void fg_fail(const char *what)
{
  fprintf(stderr, "fuzz_group: %s\n", what);
  abort();
}

/* The STORE actions of the last step join the stores in flight. */
static void fg_take_actions(struct fg_run *r)
{
  for (size_t i = 0; i < r->acts.n; i++) {
    if (r->acts.v[i].type != GROUP_ACT_STORE) {
      continue;
    }
    if (r->acts.v[i].generation != r->g.generation) {
      fg_fail("a store asked for another generation than the group's");
    }
    if (r->npending == FG_MAX_PENDING) {
      /* Full: the oldest store is forgotten (never answered), the newest
       * is the one a STORING group waits for. */
      memmove(r->pending, r->pending + 1, (FG_MAX_PENDING - 1) * sizeof r->pending[0]);
      r->npending--;
    }
    r->pending[r->npending++] = r->acts.v[i].generation;
  }
  r->acts.n = 0;
}

/* Every partition of every subscribed topic held by exactly one member. */
static void fg_check_assignment(const struct group *g)
{
  for (size_t t = 0; t < g->ntopics; t++) {
    bool subscribed = false;
    for (size_t i = 0; i < g->nmembers && !subscribed; i++) {
      for (size_t k = 0; k < g->members[i].ntopics && !subscribed; k++) {
        subscribed = g->members[i].topics[k] == t;
      }
    }
    uint32_t count = fg_partitions(NULL, g->topics[t]);
    for (uint32_t p = 0; subscribed && p < count; p++) {
      unsigned owners = 0;
      for (size_t i = 0; i < g->nmembers; i++) {
        for (size_t k = 0; k < g->members[i].nassigned; k++) {
          owners +=
              g->members[i].assigned[k].topic == t && g->members[i].assigned[k].partition == p;
        }
      }
      if (owners != 1) {
        fg_fail("a subscribed partition is not held by exactly one member");
      }
    }
  }
}

/* g's record restores into a group with the same membership. */
static void fg_check_record(const struct group *g, uint64_t now)
{
  struct batch_builder b;
  if (batch_builder_init(&b, 1 << 16) != 0) {
    return;
  }
  uint8_t *out = NULL;
  size_t len = 0;
  int rv = offset_record_add_group(&b, g, 5);
  if (rv == 0) {
    rv = batch_builder_finish(&b, &out, &len);
  }
  batch_builder_close(&b);
  if (rv != 0) {
    return; /* out of memory only */
  }
  struct batch_iter it;
  struct batch_record rec;
  if (batch_iter_init(&it, out, len) != 0 || batch_iter_next(&it, &rec) != 1) {
    fg_fail("the group's record does not read back");
  }
  struct group h;
  if (group_init(&h, g->name, 0, 0) != 0) {
    fg_fail("group_init");
  }
  rv = offset_record_restore(&h, rec.value, rec.value_len, &fg_env, now, now);
  if (rv != 0 && rv != CAIRN_ENOMEM) {
    fg_fail("the group's own record is refused");
  }
  if (rv == 0) {
    if (h.generation != g->generation || h.nmembers != g->nmembers ||
        strcmp(h.leader, g->leader) != 0) {
      fg_fail("the record restores another generation, leader or member count");
    }
    for (size_t i = 0; i < g->nmembers; i++) {
      const struct group_member *m = group_member_find(&h, g->members[i].id);
      if (m == NULL || strcmp(m->instance_id, g->members[i].instance_id) != 0) {
        fg_fail("the record restores another member or instance id");
      }
    }
  }
  group_close(&h);
  free(out);
}

static void fg_check(struct fg_run *r)
{
  const struct group *g = &r->g;
  for (size_t i = 0; i < g->nmembers; i++) {
    for (size_t k = i + 1; k < g->nmembers; k++) {
      if (strcmp(g->members[i].id, g->members[k].id) == 0) {
        fg_fail("two members have one member id");
      }
      if (g->members[i].instance_id[0] != '\0' &&
          strcmp(g->members[i].instance_id, g->members[k].instance_id) == 0) {
        fg_fail("two members hold one instance id");
      }
    }
  }
  if ((g->state == GROUP_EMPTY) != (g->nmembers == 0)) {
    fg_fail("EMPTY and member-less differ");
  }
  if (g->leader[0] != '\0' && group_member_find(g, g->leader) == NULL) {
    fg_fail("the leader is not a member");
  }
  if (g->generation < r->last_gen) {
    fg_fail("the generation went back");
  }
  r->last_gen = g->generation;
  bool in_flight = false;
  for (size_t k = 0; k < r->npending; k++) {
    in_flight = in_flight || r->pending[k] == g->generation;
  }
  if (g->state == GROUP_STORING && !in_flight) {
    fg_fail("STORING with no store of its generation in flight");
  }
  if (g->state == GROUP_STORING || g->state == GROUP_STABLE) {
    if (!r->client && g->generation != r->restored_gen) {
      fg_check_assignment(g);
    }
    fg_check_record(g, r->now);
  }
}

static void fg_join(struct fg_run *r, const uint8_t *ev, bool again)
{
  static const char *const one[] = {"t0"};
  static const char *const two[] = {"t0", "t1"};
  static const char *const strategies[] = {"sticky", "range", "roundrobin"};
  char member[GROUP_MEMBER_ID_MAX + 1] = "", fresh[32], instance[8];
  snprintf(fresh, sizeof fresh, "m%u", r->next_id++);
  if (again && r->g.nmembers > 0) {
    snprintf(member, sizeof member, "%s", r->g.members[ev[1] % r->g.nmembers].id);
  }
  snprintf(instance, sizeof instance, "i%u", ev[2] % 4u);
  bool both = (ev[1] & 1) != 0;
  struct group_opaque_in protocols[] = {
      {"range", (const uint8_t *)((ev[1] & 2) != 0 ? "other" : "sub"), (ev[1] & 2) != 0 ? 5 : 3}};
  struct group_event e = {.type = GROUP_EV_JOIN,
                          .now_ms = r->now,
                          .wall_ms = r->now,
                          .member_id = member,
                          .instance_id = (ev[2] & 0x80) == 0 ? instance : NULL,
                          .new_member_id = fresh,
                          .client_id = "fuzz",
                          .session_timeout_ms = 3000,
                          .rebalance_timeout_ms = 5000,
                          .topics = both ? two : one,
                          .ntopics = both ? 2 : 1,
                          .strategies = strategies,
                          .nstrategies = 3,
                          .protocol_type = r->client ? "consumer" : NULL,
                          .protocols = protocols,
                          .nprotocols = 1};
  (void)group_step(&r->g, &fg_env, &e, &r->acts);
}

/* The member an event names (an existing one's id, "gone" when none) and
 * its instance id (NULL: dynamic). */
static const char *fg_who(const struct fg_run *r, const uint8_t *ev,
                          char member[GROUP_MEMBER_ID_MAX + 1], char instance[8])
{
  snprintf(member, GROUP_MEMBER_ID_MAX + 1, "%s",
           r->g.nmembers > 0 ? r->g.members[ev[1] % r->g.nmembers].id : "gone");
  snprintf(instance, 8, "i%u", ev[2] % 4u);
  return (ev[2] & 0x80) == 0 ? instance : NULL;
}

static void fg_commit(struct fg_run *r, const uint8_t *ev)
{
  char member[GROUP_MEMBER_ID_MAX + 1], instance[8];
  const char *inst = fg_who(r, ev, member, instance);
  (void)group_commit_check(&r->g, member, inst, r->g.generation - (ev[3] & 1), r->now);
}

static void fg_member_event(struct fg_run *r, const uint8_t *ev, enum group_event_type type)
{
  char member[GROUP_MEMBER_ID_MAX + 1], instance[8];
  const char *inst = fg_who(r, ev, member, instance);
  /* The leader's SYNC of a client-assigned group hands out bytes for the
   * first members. */
  struct group_opaque_in as[2];
  size_t nas = 0;
  for (size_t i = 0; i < r->g.nmembers && nas < 2; i++) {
    as[nas++] = (struct group_opaque_in){r->g.members[i].id, (const uint8_t *)"A", 1};
  }
  struct group_event e = {.type = type,
                          .now_ms = r->now,
                          .wall_ms = r->now,
                          .member_id = member,
                          .instance_id = inst,
                          .generation = r->g.generation - (ev[3] & 1),
                          .assignments = as,
                          .nassignments = nas};
  (void)group_step(&r->g, &fg_env, &e, &r->acts);
}

static void fg_stored(struct fg_run *r, const uint8_t *ev)
{
  if (r->npending == 0) {
    return;
  }
  size_t k = ev[1] % r->npending;
  struct group_event e = {.type = GROUP_EV_STORED,
                          .now_ms = r->now,
                          .wall_ms = r->now,
                          .member_id = "",
                          .generation = r->pending[k],
                          .err = (ev[0] & 8) != 0 ? CAIRN_ENOTLEADER : 0};
  r->pending[k] = r->pending[--r->npending];
  (void)group_step(&r->g, &fg_env, &e, &r->acts);
}

static void fg_step(struct fg_run *r, const uint8_t *ev)
{
  r->now += (uint64_t)ev[3] * 40;
  switch (ev[0] % 8) {
  case 0:
  case 1:
    fg_join(r, ev, ev[0] % 8 == 1);
    break;
  case 2:
    fg_member_event(r, ev, GROUP_EV_SYNC);
    break;
  case 3:
    fg_member_event(r, ev, GROUP_EV_HEARTBEAT);
    break;
  case 4:
    fg_member_event(r, ev, GROUP_EV_LEAVE);
    break;
  case 5: {
    struct group_event e = {
        .type = GROUP_EV_TICK, .now_ms = r->now, .wall_ms = r->now, .member_id = ""};
    (void)group_step(&r->g, &fg_env, &e, &r->acts);
    break;
  }
  case 6:
    fg_stored(r, ev);
    break;
  default:
    fg_commit(r, ev);
    break;
  }
  fg_take_actions(r);
  fg_check(r);
}

/* Seeds: a group forming, storing and a static member's restart, in
 * both models, and the same events after a restored record. */
static const uint8_t fg_seed_events[] = {
    0, 0, 0,    0,   /* JOIN, new member, instance i0 */
    0, 1, 1,    0,   /* JOIN, new member (t0 and t1), instance i1 */
    0, 0, 0x80, 0,   /* JOIN, new dynamic member */
    5, 0, 0,    30,  /* TICK 1.2 s later: the rebalance completes */
    2, 0, 0,    1,   /* the first member's SYNC (a client-assigned leader's) */
    6, 0, 0,    1,   /* the store commits */
    2, 1, 1,    1,   /* SYNC */
    3, 2, 0x80, 1,   /* HEARTBEAT */
    0, 0, 1,    2,   /* i1 restarts: JOIN with "" and its instance */
    6, 0, 0,    1,   /* stored again */
    7, 1, 1,    0,   /* a commit check */
    4, 2, 0x80, 1,   /* LEAVE */
    5, 0, 0,    200, /* TICK far later: sessions expire */
};

static void fg_write_seeds(const char *dir)
{
  static uint8_t seed[4096];
  for (uint8_t client = 0; client < 2; client++) {
    seed[0] = client;
    memcpy(seed + 1, fg_seed_events, sizeof fg_seed_events);
    fuzz_dir_write(dir, client ? "kafka_model" : "cairn_model", seed, 1 + sizeof fg_seed_events);
  }
  /* A record of a stable client-assigned group with two static members. */
  struct fg_run *r = calloc(1, sizeof *r);
  if (r == NULL || group_init(&r->g, "fuzz", 0, 0) != 0) {
    abort();
  }
  r->client = true;
  r->restored_gen = -1;
  for (size_t at = 0; at + 4 <= 6 * 4; at += 4) {
    fg_step(r, fg_seed_events + at);
  }
  struct batch_builder b;
  uint8_t *out = NULL;
  size_t len = 0;
  struct batch_iter it;
  struct batch_record rec;
  if (batch_builder_init(&b, 1 << 16) != 0 || offset_record_add_group(&b, &r->g, 5) != 0 ||
      batch_builder_finish(&b, &out, &len) != 0 || batch_iter_init(&it, out, len) != 0 ||
      batch_iter_next(&it, &rec) != 1 || rec.value_len > sizeof seed - 3 - 16) {
    abort();
  }
  batch_builder_close(&b);
  seed[0] = 2 | 1;
  le_put16(seed + 1, (uint16_t)rec.value_len);
  memcpy(seed + 3, rec.value, rec.value_len);
  memcpy(seed + 3 + rec.value_len, fg_seed_events + 8 * 4, 16); /* restart, stored, ... */
  fuzz_dir_write(dir, "restored", seed, 3 + rec.value_len + 16);
  free(out);
  group_actions_free(&r->acts);
  group_close(&r->g);
  free(r);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  log_set_level(LOG_OFF);
  const char *dir = getenv("FUZZ_GROUP_SEEDS");
  if (dir != NULL) {
    fg_write_seeds(dir);
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  uint8_t mode;
  size_t len;
  uint8_t *body = fuzz_body(data, size, &mode, &len);
  if (body == NULL) {
    return 0;
  }
  struct fg_run *r = calloc(1, sizeof *r);
  if (r == NULL || group_init(&r->g, "fuzz", 0, 0) != 0) {
    free(r);
    free(body);
    return 0;
  }
  r->client = (mode & 1) != 0;
  r->now = 1000;
  r->restored_gen = -1;
  size_t at = 0;
  if ((mode & 2) != 0 && len >= 2) {
    size_t rec = le_get16(body);
    rec = rec <= len - 2 ? rec : len - 2;
    /* Arbitrary bytes as a GROUP record value: refused, or a membership
     * that the oracle then holds to the same rules. */
    if (offset_record_restore(&r->g, body + 2, rec, &fg_env, r->now, r->now) == 0) {
      r->client = r->g.protocol_type[0] != '\0';
      r->last_gen = r->g.generation;
      r->restored_gen = r->g.generation;
      if (r->g.state == GROUP_STABLE) {
        fg_check(r);
      }
    }
    at = 2 + rec;
  }
  for (; at + 4 <= len; at += 4) {
    fg_step(r, body + at);
  }
  group_actions_free(&r->acts);
  group_close(&r->g);
  free(r);
  free(body);
  return 0;
}
