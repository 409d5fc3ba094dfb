/* test_groups.c - consumer groups over the wire against real cairnd
 * processes on loopback (docs/consumer-groups.md): three members share 12
 * partitions evenly; bad input (a commit for a partition not owned, an
 * unsupported strategy, a heartbeat of an old generation, an unknown group,
 * a reset while active) gets its documented code and the group goes on; a
 * member that stops heartbeating loses its partitions within the session
 * timeout (the figure is printed); a member of an old generation cannot
 * commit; SIGKILL of the coordinator's node keeps every committed offset
 * and the membership (the new coordinator is found through FindCoordinator
 * and accepts a member's commit of its generation); a reset works once the
 * group is empty; a SyncGroup is answered only once the group's membership
 * record is committed (none while the offsets partition's followers are
 * stopped), so a coordinator SIGKILLed right after the answer leaves a
 * successor that accepts the member's commit of that generation.
 *
 * Usage: test_groups <path of cairnd>
 * CAIRN_TEST_FILTER='*coordinator*' runs a subset; CAIRN_KEEP_TEST_DIR=1
 * keeps the data dirs and node logs. */
#include "cairnd.h"
#include "proc.h"
#include "testutil.h"
#include "wire_client.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define WAIT_MS 30000
#define FAST                                                                                       \
  "--heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000 --replace-delay-ms 600000 "        \
  "--offsets-partitions 4"
#define TOPIC "orders"
#define NPART 12
#define SESSION_MS 3000
#define GROUP "g1"

#define CODE(name) CAIRN__CLIENT__ERROR_CODE__##name

static const char *cairnd_bin;

static int err_code(const Cairn__Client__Error *e)
{
  return e != NULL ? (int)e->code : 0;
}

/* One request on w, the answer in *resp (free with ..._free_unpacked).
 * Returns 0 or a negative code. */
static int call(struct wc *w, Cairn__Client__Envelope *env, Cairn__Client__Envelope **resp)
{
  int rv = wc_send(w, env, NULL, 0);
  if (rv != 0) {
    return rv;
  }
  return wc_recv(w, 15000, resp, NULL, NULL);
}

/* ---- a member ---- */

struct member {
  struct wc w;
  char id[128];
  int32_t gen;
  uint32_t parts[NPART];
  size_t nparts;
};

static int send_join(struct member *m, const char *group, const char *strategy)
{
  char *topics[] = {TOPIC};
  char *strategies[] = {(char *)strategy, "range"};
  Cairn__Client__JoinGroupRequest r = CAIRN__CLIENT__JOIN_GROUP_REQUEST__INIT;
  r.group = (char *)group;
  r.member_id = m->id;
  r.client_id = "test";
  r.session_timeout_ms = SESSION_MS;
  r.rebalance_timeout_ms = 5000;
  r.topics = topics;
  r.n_topics = 1;
  r.strategies = strategies;
  r.n_strategies = strcmp(strategy, "range") == 0 ? 1 : 2;
  if (strcmp(strategy, "cooperative-sticky") == 0) {
    r.n_strategies = 1;
  }
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_JOIN_GROUP;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_JOIN_GROUP_REQ;
  env.join_group_req = &r;
  return wc_send(&m->w, &env, NULL, 0);
}

/* The wire code of the join answer; the member's id and generation on OK. */
static int recv_join(struct member *m)
{
  Cairn__Client__Envelope *resp = NULL;
  int rv = wc_recv(&m->w, 15000, &resp, NULL, NULL);
  if (rv != 0) {
    fail_msg("join: no answer: %d", rv);
  }
  assert_int_equal(resp->body_case, CAIRN__CLIENT__ENVELOPE__BODY_JOIN_GROUP_RESP);
  const Cairn__Client__JoinGroupResponse *jr = resp->join_group_resp;
  int code = err_code(jr->error);
  if (code == 0) {
    snprintf(m->id, sizeof m->id, "%s", jr->member_id);
    m->gen = jr->generation;
  }
  cairn__client__envelope__free_unpacked(resp, NULL);
  return code;
}

static int sync_member(struct member *m)
{
  Cairn__Client__SyncGroupRequest r = CAIRN__CLIENT__SYNC_GROUP_REQUEST__INIT;
  r.group = GROUP;
  r.member_id = m->id;
  r.generation = m->gen;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_SYNC_GROUP;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_SYNC_GROUP_REQ;
  env.sync_group_req = &r;
  Cairn__Client__Envelope *resp = NULL;
  assert_int_equal(call(&m->w, &env, &resp), 0);
  const Cairn__Client__SyncGroupResponse *sr = resp->sync_group_resp;
  int code = err_code(sr->error);
  m->nparts = 0;
  for (size_t i = 0; code == 0 && i < sr->n_assignment; i++) {
    assert_string_equal(sr->assignment[i]->topic, TOPIC);
    for (size_t k = 0; k < sr->assignment[i]->n_partitions; k++) {
      assert_true(m->nparts < NPART);
      m->parts[m->nparts++] = sr->assignment[i]->partitions[k];
    }
  }
  cairn__client__envelope__free_unpacked(resp, NULL);
  return code;
}

static int heartbeat(struct member *m, const char *group, int32_t gen)
{
  Cairn__Client__HeartbeatRequest r = CAIRN__CLIENT__HEARTBEAT_REQUEST__INIT;
  r.group = (char *)group;
  r.member_id = m->id;
  r.generation = gen;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_HEARTBEAT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_HEARTBEAT_REQ;
  env.heartbeat_req = &r;
  Cairn__Client__Envelope *resp = NULL;
  assert_int_equal(call(&m->w, &env, &resp), 0);
  int code = err_code(resp->heartbeat_resp->error);
  cairn__client__envelope__free_unpacked(resp, NULL);
  return code;
}

/* Commits offsets[i] for parts[i]; codes[i] gets each partition's code.
 * Returns the request's code. reset: ResetOffsets instead. */
static int commit_on(struct wc *w, const char *member, int32_t gen, const uint32_t *parts,
                     const int64_t *offsets, size_t n, int *codes, bool reset)
{
  Cairn__Client__OffsetCommitPartition pv[NPART + 1];
  Cairn__Client__OffsetCommitPartition *pp[NPART + 1];
  assert_true(n <= NPART + 1);
  for (size_t i = 0; i < n; i++) {
    cairn__client__offset_commit_partition__init(&pv[i]);
    pv[i].topic = TOPIC;
    pv[i].partition = parts[i];
    pv[i].offset = offsets[i];
    pv[i].metadata = "test";
    pp[i] = &pv[i];
  }
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  Cairn__Client__OffsetCommitRequest r = CAIRN__CLIENT__OFFSET_COMMIT_REQUEST__INIT;
  Cairn__Client__ResetOffsetsRequest rr = CAIRN__CLIENT__RESET_OFFSETS_REQUEST__INIT;
  if (reset) {
    rr.group = GROUP;
    rr.partitions = pp;
    rr.n_partitions = n;
    env.api = CAIRN__CLIENT__API__API_RESET_OFFSETS;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_RESET_OFFSETS_REQ;
    env.reset_offsets_req = &rr;
  } else {
    r.group = GROUP;
    r.member_id = (char *)member;
    r.generation = gen;
    r.partitions = pp;
    r.n_partitions = n;
    env.api = CAIRN__CLIENT__API__API_OFFSET_COMMIT;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_OFFSET_COMMIT_REQ;
    env.offset_commit_req = &r;
  }
  Cairn__Client__Envelope *resp = NULL;
  assert_int_equal(call(w, &env, &resp), 0);
  const Cairn__Client__Error *top =
      reset ? resp->reset_offsets_resp->error : resp->offset_commit_resp->error;
  size_t nres =
      reset ? resp->reset_offsets_resp->n_partitions : resp->offset_commit_resp->n_partitions;
  Cairn__Client__OffsetCommitPartitionResult **res =
      reset ? resp->reset_offsets_resp->partitions : resp->offset_commit_resp->partitions;
  int code = err_code(top);
  if (code == 0) {
    assert_int_equal(nres, n);
    for (size_t i = 0; i < n; i++) {
      codes[i] = err_code(res[i]->error);
    }
  }
  cairn__client__envelope__free_unpacked(resp, NULL);
  return code;
}

/* The committed offsets of every partition (-1 none). Returns the code. */
static int fetch_offsets(struct wc *w, int64_t *out)
{
  Cairn__Client__OffsetFetchRequest r = CAIRN__CLIENT__OFFSET_FETCH_REQUEST__INIT;
  r.group = GROUP;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_OFFSET_FETCH;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_OFFSET_FETCH_REQ;
  env.offset_fetch_req = &r;
  Cairn__Client__Envelope *resp = NULL;
  int rv = call(w, &env, &resp);
  if (rv != 0) {
    return -1;
  }
  const Cairn__Client__OffsetFetchResponse *fr = resp->offset_fetch_resp;
  int code = err_code(fr->error);
  for (int p = 0; p < NPART; p++) {
    out[p] = -1;
  }
  for (size_t i = 0; code == 0 && i < fr->n_partitions; i++) {
    assert_string_equal(fr->partitions[i]->topic, TOPIC);
    assert_true(fr->partitions[i]->partition < NPART);
    out[fr->partitions[i]->partition] = fr->partitions[i]->offset;
  }
  cairn__client__envelope__free_unpacked(resp, NULL);
  return code;
}

/* Asks node `via` for the coordinator until one is named; returns its
 * index. */
static int find_coordinator(struct cd_cluster *c, int via)
{
  long long end = tu_now_ms() + WAIT_MS;
  int last = -1;
  while (tu_now_ms() < end) {
    Cairn__Client__FindCoordinatorRequest r = CAIRN__CLIENT__FIND_COORDINATOR_REQUEST__INIT;
    r.group = GROUP;
    Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
    env.api = CAIRN__CLIENT__API__API_FIND_COORDINATOR;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_FIND_COORDINATOR_REQ;
    env.find_coordinator_req = &r;
    Cairn__Client__Envelope *resp = NULL;
    if (cd_call(c, via, &env, NULL, 0, 2000, &resp, NULL, NULL) == 0) {
      last = err_code(resp->find_coordinator_resp->error);
      int idx = cd_index(c, resp->find_coordinator_resp->coordinator_id);
      cairn__client__envelope__free_unpacked(resp, NULL);
      if (last == 0 && idx >= 0 && cd_running(c, idx)) {
        return idx;
      }
    }
    usleep(100 * 1000);
  }
  fail_msg("no coordinator named for %s (last code %d); logs under %s", GROUP, last, c->root);
  return -1;
}

/* Waits until the coordinator behind w has loaded (OffsetFetch answers
 * something else than LOADING / NOT_COORDINATOR); returns that code. */
static int wait_loaded(struct wc *w)
{
  long long end = tu_now_ms() + WAIT_MS;
  int64_t offs[NPART];
  int code = -1;
  while (tu_now_ms() < end) {
    code = fetch_offsets(w, offs);
    if (code != CODE(COORDINATOR_LOADING) && code != CODE(NOT_COORDINATOR)) {
      return code;
    }
    usleep(100 * 1000);
  }
  fail_msg("the coordinator did not load (last code %d)", code);
  return code;
}

static void produce_everywhere(struct cd_cluster *c)
{
  for (uint32_t p = 0; p < NPART; p++) {
    size_t len = 0;
    uint8_t *b = tu_make_batch(p + 1, 3, 20, 1000, &len);
    int64_t base = -1;
    int rv = cd_produce(c, TOPIC, p, b, len, WAIT_MS, &base);
    free(b);
    if (rv != 0) {
      fail_msg("produce to %s/%u: code %d", TOPIC, p, rv);
    }
  }
}

/* Every partition once across the members. */
static void check_cover(struct member **ms, size_t n)
{
  int seen[NPART] = {0};
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < ms[i]->nparts; k++) {
      seen[ms[i]->parts[k]]++;
    }
  }
  for (int p = 0; p < NPART; p++) {
    assert_int_equal(seen[p], 1);
  }
}

/* Joins every member (pipelined: one rebalance), then syncs them. Returns
 * 0, or the first join's wire code when one is refused. */
static int try_join_all(struct member **ms, size_t n, const char *strategy)
{
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(send_join(ms[i], GROUP, strategy), 0);
  }
  int32_t gen = -1;
  int first = 0;
  for (size_t i = 0; i < n; i++) {
    int code = recv_join(ms[i]);
    if (code != 0) {
      first = first != 0 ? first : code;
      continue;
    }
    if (gen >= 0) {
      assert_int_equal(ms[i]->gen, gen);
    }
    gen = ms[i]->gen;
  }
  if (first != 0) {
    return first;
  }
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(sync_member(ms[i]), 0);
  }
  check_cover(ms, n);
  return 0;
}

static void join_all(struct member **ms, size_t n, const char *strategy)
{
  int code = try_join_all(ms, n, strategy);
  if (code != 0) {
    fail_msg("join: code %d", code);
  }
}

/* Finds the coordinator, connects the members to it and forms the group;
 * starts over while the coordinator moves (the offsets partitions' leaders
 * settle on their preferred replicas shortly after the topic is made), as
 * a client does. Returns the coordinator's index. */
static int form_group(struct cd_cluster *c, struct member **ms, size_t n)
{
  long long end = tu_now_ms() + WAIT_MS;
  while (tu_now_ms() < end) {
    int ci = find_coordinator(c, 1);
    for (size_t i = 0; i < n; i++) {
      memset(ms[i], 0, sizeof *ms[i]);
      assert_int_equal(wc_connect(&ms[i]->w, c->nodes[ci].client_addr, 5000), 0);
    }
    int code = wait_loaded(&ms[0]->w);
    if (code == CODE(UNKNOWN_GROUP)) {
      code = try_join_all(ms, n, "sticky");
    }
    if (code == 0) {
      return ci;
    }
    printf("forming the group at node %" PRIu64 ": code %d: again\n", c->nodes[ci].id, code);
    for (size_t i = 0; i < n; i++) {
      wc_close(&ms[i]->w);
    }
    usleep(300 * 1000);
  }
  fail_msg("the group did not form (logs under %s)", c->root);
  return -1;
}

static Cairn__Client__GroupDescription *describe(struct wc *w, const char *group,
                                                 Cairn__Client__Envelope **resp)
{
  char *groups[] = {(char *)group};
  Cairn__Client__DescribeGroupsRequest r = CAIRN__CLIENT__DESCRIBE_GROUPS_REQUEST__INIT;
  r.groups = groups;
  r.n_groups = 1;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_DESCRIBE_GROUPS;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_GROUPS_REQ;
  env.describe_groups_req = &r;
  assert_int_equal(call(w, &env, resp), 0);
  assert_int_equal((*resp)->describe_groups_resp->n_groups, 1);
  return (*resp)->describe_groups_resp->groups[0];
}

/* The documented hash: FNV-1a 32 of the name, modulo the partitions. */
static uint32_t group_partition(const char *group, uint32_t npartitions)
{
  uint32_t h = 2166136261u;
  for (const unsigned char *p = (const unsigned char *)group; *p != '\0'; p++) {
    h ^= *p;
    h *= 16777619u;
  }
  return h % npartitions;
}

/* Three nodes, TOPIC with NPART partitions at rf 3 and a batch in each,
 * and the offsets topic made with its leaders settled on their preferred
 * replicas: coordinators then stay where they are (a move mid-test
 * answers NOT_COORDINATOR, which a client follows but these steps do
 * not). The first FindCoordinator makes the offsets topic. */
static void start_settled(struct cd_cluster *c)
{
  assert_int_equal(cd_init(c, cairnd_bin, 3, 3, FAST), 0);
  uint64_t ids[3];
  for (int i = 0; i < 3; i++) {
    assert_int_equal(cd_start(c, i), 0);
    ids[i] = c->nodes[i].id;
  }
  if (cd_wait_alive(c, 0, ids, 3, WAIT_MS) != 0) {
    fail_msg("the cluster did not form (logs under %s)", c->root);
  }
  char msg[256] = "";
  int code = cd_create_topic(c, 0, TOPIC, NPART, 3, WAIT_MS, msg, sizeof msg);
  if (code != 0) {
    fail_msg("create %s: %d %s", TOPIC, code, msg);
  }
  produce_everywhere(c);
  (void)find_coordinator(c, 1);
  if (cd_wait_settled(c, "__cairn_offsets", WAIT_MS) != 0) {
    fail_msg("__cairn_offsets' leaders did not settle (logs under %s)", c->root);
  }
}

/* ---- the test ---- */

static void test_groups_share_rebalance_fence_and_survive_the_coordinator(void **state)
{
  struct cd_cluster c;
  start_settled(&c);

  /* The coordinator: FindCoordinator through a node, then it loads. */
  struct member a, b, m3;
  struct member *ms[3] = {&a, &b, &m3};
  /* Three members share 12 partitions evenly. */
  int ci = form_group(&c, ms, 3);
  printf("coordinator of %s: node %" PRIu64 "\n", GROUP, c.nodes[ci].id);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(ms[i]->nparts, 4);
  }
  int32_t gen1 = a.gen;

  /* Each commits offset 1 of its partitions (each holds 3 records). */
  for (int i = 0; i < 3; i++) {
    int64_t offs[NPART];
    int codes[NPART];
    for (size_t k = 0; k < ms[i]->nparts; k++) {
      offs[k] = 1;
    }
    assert_int_equal(commit_on(&ms[i]->w, ms[i]->id, ms[i]->gen, ms[i]->parts, offs, ms[i]->nparts,
                               codes, false),
                     0);
    for (size_t k = 0; k < ms[i]->nparts; k++) {
      assert_int_equal(codes[k], 0);
    }
  }

  /* Bad input: each refused with its code, the group goes on. */
  {
    int codes[1];
    int64_t off = 2;
    assert_int_equal(commit_on(&a.w, a.id, a.gen, &b.parts[0], &off, 1, codes, false), 0);
    assert_int_equal(codes[0], CODE(NOT_ASSIGNED));
    assert_int_equal(heartbeat(&a, GROUP, gen1 - 1), CODE(ILLEGAL_GENERATION));
    /* An unknown group at the same coordinator (same offsets partition). */
    char unknown[32];
    for (int k = 0;; k++) {
      snprintf(unknown, sizeof unknown, "no-such-group-%d", k);
      if (group_partition(unknown, 4) == group_partition(GROUP, 4)) {
        break;
      }
    }
    assert_int_equal(heartbeat(&a, unknown, gen1), CODE(UNKNOWN_GROUP));
    struct member x;
    memset(&x, 0, sizeof x);
    assert_int_equal(wc_connect(&x.w, c.nodes[ci].client_addr, 5000), 0);
    assert_int_equal(send_join(&x, GROUP, "cooperative-sticky"), 0);
    assert_int_equal(recv_join(&x), CODE(INCONSISTENT_PROTOCOL));
    wc_close(&x.w);
    uint32_t p0 = 0;
    assert_int_equal(commit_on(&a.w, "", -1, &p0, &off, 1, codes, true), CODE(GROUP_NOT_EMPTY));
    for (int i = 0; i < 3; i++) {
      assert_int_equal(heartbeat(ms[i], GROUP, ms[i]->gen), 0);
    }
  }

  /* DescribeGroups: three members with their partitions, lag 3 - 1. */
  {
    Cairn__Client__Envelope *resp = NULL;
    Cairn__Client__GroupDescription *d = describe(&a.w, GROUP, &resp);
    assert_int_equal(err_code(d->error), 0);
    assert_string_equal(d->state, "stable");
    assert_int_equal(d->n_members, 3);
    assert_int_equal(d->n_offsets, NPART);
    for (size_t i = 0; i < d->n_offsets; i++) {
      assert_int_equal(d->offsets[i]->committed, 1);
      assert_int_equal(d->offsets[i]->high_watermark, 3);
      assert_int_equal(d->offsets[i]->lag, 2);
      assert_string_not_equal(d->offsets[i]->member_id, "");
    }
    cairn__client__envelope__free_unpacked(resp, NULL);
  }

  /* The third member goes silent: within the session timeout the others
   * are told to rejoin and take its partitions. */
  long long silent = tu_now_ms();
  long long told = 0;
  while (tu_now_ms() < silent + SESSION_MS + 5000) {
    int ca = heartbeat(&a, GROUP, a.gen);
    int cb = heartbeat(&b, GROUP, b.gen);
    if ((ca != 0 && ca != CODE(REBALANCE_IN_PROGRESS)) ||
        (cb != 0 && cb != CODE(REBALANCE_IN_PROGRESS))) {
      fail_msg("heartbeats answered %d and %d (logs under %s)", ca, cb, c.root);
    }
    if (ca == CODE(REBALANCE_IN_PROGRESS) || cb == CODE(REBALANCE_IN_PROGRESS)) {
      told = tu_now_ms();
      break;
    }
    usleep(300 * 1000);
  }
  assert_true(told > 0);
  struct member *two[2] = {&a, &b};
  join_all(two, 2, "sticky");
  long long moved = tu_now_ms();
  printf("silent member's partitions moved %lld ms after its last heartbeat (session %d ms)\n",
         moved - silent, SESSION_MS);
  assert_true(moved - silent < SESSION_MS + 3000); /* expiry, a tick, two rejoins */
  assert_int_equal(a.nparts, 6);
  assert_int_equal(b.nparts, 6);
  assert_true(a.gen > gen1);

  /* The silent member, and the old generation, cannot commit. */
  {
    int codes[1];
    int64_t off = 2;
    assert_int_equal(commit_on(&m3.w, m3.id, gen1, &m3.parts[0], &off, 1, codes, false),
                     CODE(UNKNOWN_MEMBER_ID));
    assert_int_equal(commit_on(&a.w, a.id, gen1, &a.parts[0], &off, 1, codes, false),
                     CODE(ILLEGAL_GENERATION));
  }

  /* a commits 2 on its six; b's stay at 1. */
  int64_t want[NPART];
  for (int p = 0; p < NPART; p++) {
    want[p] = 1;
  }
  {
    int64_t offs[NPART];
    int codes[NPART];
    for (size_t k = 0; k < a.nparts; k++) {
      offs[k] = 2;
      want[a.parts[k]] = 2;
    }
    assert_int_equal(commit_on(&a.w, a.id, a.gen, a.parts, offs, a.nparts, codes, false), 0);
    for (size_t k = 0; k < a.nparts; k++) {
      assert_int_equal(codes[k], 0);
    }
  }
  for (int i = 0; i < 3; i++) {
    wc_close(&ms[i]->w);
  }

  /* SIGKILL the coordinator's node: another node takes over and every
   * committed offset is there. */
  cd_kill(&c, ci);
  int via = (ci + 1) % 3;
  int nci = -1;
  int64_t got[NPART];
  long long end = tu_now_ms() + WAIT_MS;
  long long killed = tu_now_ms();
  int code = -1;
  while (tu_now_ms() < end) {
    nci = find_coordinator(&c, via);
    struct wc w;
    if (wc_connect(&w, c.nodes[nci].client_addr, 2000) == 0) {
      code = fetch_offsets(&w, got);
      wc_close(&w);
    }
    if (code == 0) {
      break;
    }
    usleep(100 * 1000);
  }
  assert_int_equal(code, 0);
  assert_int_not_equal(nci, ci);
  printf("new coordinator node %" PRIu64 " answered %lld ms after the SIGKILL\n", c.nodes[nci].id,
         tu_now_ms() - killed);
  for (int p = 0; p < NPART; p++) {
    if (got[p] != want[p]) {
      fail_msg("partition %d: committed %" PRId64 ", expected %" PRId64, p, got[p], want[p]);
    }
  }

  /* Membership is kept across coordinators (the group's record in its
   * offsets partition): a, with the old coordinator's member id and
   * generation, commits at the new one. */
  {
    struct wc w;
    assert_int_equal(wc_connect(&w, c.nodes[nci].client_addr, 5000), 0);
    int codes[1];
    int64_t off = want[a.parts[0]];
    assert_int_equal(commit_on(&w, a.id, a.gen, &a.parts[0], &off, 1, codes, false), 0);
    assert_int_equal(codes[0], 0);
    wc_close(&w);
  }

  /* The restored members are gone (their connections closed): a reset is
   * refused until their sessions expire, then it works; a member joining
   * makes it refused again. */
  {
    struct member r;
    memset(&r, 0, sizeof r);
    assert_int_equal(wc_connect(&r.w, c.nodes[nci].client_addr, 5000), 0);
    uint32_t parts[NPART];
    int64_t zeros[NPART];
    int codes[NPART];
    for (uint32_t p = 0; p < NPART; p++) {
      parts[p] = p;
      zeros[p] = 0;
    }
    assert_int_equal(commit_on(&r.w, "", -1, parts, zeros, NPART, codes, true),
                     CODE(GROUP_NOT_EMPTY));
    long long until = tu_now_ms() + WAIT_MS;
    int rv;
    while ((rv = commit_on(&r.w, "", -1, parts, zeros, NPART, codes, true)) != 0 &&
           tu_now_ms() < until) {
      usleep(200 * 1000);
    }
    assert_int_equal(rv, 0);
    for (int p = 0; p < NPART; p++) {
      assert_int_equal(codes[p], 0);
    }
    assert_int_equal(fetch_offsets(&r.w, got), 0);
    for (int p = 0; p < NPART; p++) {
      assert_int_equal(got[p], 0);
    }
    struct member *one[1] = {&r};
    join_all(one, 1, "range");
    assert_true(r.gen > a.gen); /* generations continue past the old coordinator's */
    assert_int_equal(r.nparts, NPART);
    assert_int_equal(commit_on(&r.w, "", -1, parts, zeros, 1, codes, true), CODE(GROUP_NOT_EMPTY));
    wc_close(&r.w);
  }
  /* A clean stop of a coordinator with a group loaded (the sanitizers
   * check what it frees). */
  int status = cd_term(&c, nci, 15000);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  cd_destroy(&c);
}

/* OffsetFetch of every partition at the coordinator, found again (through
 * node `via`) while it moves or loads, as a client does. Returns the code
 * of the first answer that is neither NOT_COORDINATOR nor
 * COORDINATOR_LOADING. */
static int fetch_at_coordinator(struct cd_cluster *c, int via, int64_t *got)
{
  long long end = tu_now_ms() + WAIT_MS;
  int code = -1;
  while (tu_now_ms() < end) {
    struct wc w;
    if (wc_connect(&w, c->nodes[find_coordinator(c, via)].client_addr, 2000) == 0) {
      code = fetch_offsets(&w, got);
      wc_close(&w);
    }
    if (code != -1 && code != CODE(NOT_COORDINATOR) && code != CODE(COORDINATOR_LOADING)) {
      return code;
    }
    usleep(100 * 1000);
  }
  fail_msg("no coordinator answered OffsetFetch (last code %d)", code);
  return code;
}

/* Starts every node (after a clean stop of each when stop is set) and
 * waits for the cluster. (A single-node cluster is not used here: SIGTERM
 * of a lone node whose partitions hold data crashes inside libraft, a bug
 * outside consumer groups, reported separately.) */
static void restart_all(struct cd_cluster *c, bool stop)
{
  uint64_t ids[CD_MAX_NODES];
  for (int i = c->n - 1; stop && i >= 0; i--) {
    int st = cd_term(c, i, 20000);
    if (st != 0) {
      fail_msg("node %d: exit status %d (logs under %s)", i + 1, st, c->root);
    }
  }
  for (int i = 0; i < c->n; i++) {
    assert_int_equal(cd_start(c, i), 0);
    ids[i] = c->nodes[i].id;
  }
  if (cd_wait_alive(c, 0, ids, (size_t)c->n, WAIT_MS) != 0) {
    fail_msg("the cluster did not form (logs under %s)", c->root);
  }
}

/* Three nodes, offsets kept 15 s after a group empties: a reset of a group
 * that never had members creates its offsets; they survive a restart of
 * every node (reloaded from the log); once expired they are gone, and stay
 * gone after another restart (the tombstones are in the log). */
static void test_groups_offsets_of_a_gone_group_expire_and_stay_gone(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 3, 3,
                           "--heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000 "
                           "--offsets-partitions 2 --offsets-retention-ms 15000"),
                   0);
  restart_all(&c, false);
  char msg[256] = "";
  assert_int_equal(cd_create_topic(&c, 0, TOPIC, NPART, 3, WAIT_MS, msg, sizeof msg), 0);
  int64_t got[NPART];
  assert_int_equal(fetch_at_coordinator(&c, 0, got), CODE(UNKNOWN_GROUP));
  uint32_t parts[2] = {0, 5};
  int64_t offs[2] = {7, 9};
  int codes[2];
  int code = -1;
  for (int attempt = 0; attempt < 50; attempt++) {
    /* The coordinator may move (to the partition's preferred replica). */
    struct wc w;
    assert_int_equal(wc_connect(&w, c.nodes[find_coordinator(&c, 0)].client_addr, 5000), 0);
    code = commit_on(&w, "", -1, parts, offs, 2, codes, true);
    wc_close(&w);
    if (code != CODE(NOT_COORDINATOR) && code != CODE(COORDINATOR_LOADING)) {
      break;
    }
    usleep(200 * 1000);
  }
  assert_int_equal(code, 0);
  assert_int_equal(codes[0], 0);
  assert_int_equal(codes[1], 0);
  long long committed = tu_now_ms();

  /* A restart of every node: reloaded from the log. */
  restart_all(&c, true);
  assert_int_equal(fetch_at_coordinator(&c, 0, got), 0);
  if (tu_now_ms() - committed < 15000) {
    assert_int_equal(got[0], 7);
    assert_int_equal(got[5], 9);
  } else {
    printf("the restart took %lld ms: the offsets may have expired already\n",
           tu_now_ms() - committed);
  }

  /* Expired: gone. */
  long long end = tu_now_ms() + WAIT_MS;
  while (tu_now_ms() < end && (code = fetch_at_coordinator(&c, 0, got)) == 0) {
    usleep(200 * 1000);
  }
  assert_int_equal(code, CODE(UNKNOWN_GROUP));
  printf("offsets dropped %lld ms after the commit (retention 15000 ms)\n",
         tu_now_ms() - committed);

  /* And after a restart still gone. */
  restart_all(&c, true);
  assert_int_equal(fetch_at_coordinator(&c, 0, got), CODE(UNKNOWN_GROUP));
  cd_destroy(&c);
}

/* A member's full rejoin through node `via`, as a client does after an
 * error: FindCoordinator, JoinGroup with its id (a fresh one if the
 * coordinator does not know it), SyncGroup; again until synced. Leaves
 * m->w connected to the coordinator; returns its index. */
static int rejoin(struct cd_cluster *c, int via, struct member *m)
{
  long long end = tu_now_ms() + WAIT_MS;
  int code = -1;
  while (tu_now_ms() < end) {
    int ci = find_coordinator(c, via);
    if (wc_connect(&m->w, c->nodes[ci].client_addr, 5000) == 0) {
      assert_int_equal(send_join(m, GROUP, "sticky"), 0);
      code = recv_join(m);
      if (code == CODE(UNKNOWN_MEMBER_ID)) {
        m->id[0] = '\0';
      } else if (code == 0) {
        code = sync_member(m);
        if (code == 0) {
          return ci;
        }
      }
      wc_close(&m->w);
    }
    usleep(200 * 1000);
  }
  fail_msg("the member did not rejoin (last code %d; logs under %s)", code, c->root);
  return -1;
}

/* Kafka's storeGroup: the SyncGroup answer (the assignment) waits for the
 * group's membership record to commit in its __cairn_offsets partition.
 * With both followers of that partition stopped the record cannot commit,
 * so no assignment is handed out (the leader gives up its leadership and
 * answers NOT_COORDINATOR, or nothing comes). And once a member is synced,
 * a SIGKILL of its coordinator at once leaves a successor that knows the
 * member: its commit of that generation is accepted. */
static void test_groups_sync_waits_for_the_membership_record(void **state)
{
  struct cd_cluster c;
  start_settled(&c);
  struct member a;
  struct member *one[1] = {&a};
  int ci = form_group(&c, one, 1);
  int32_t gen1 = a.gen;

  /* The followers of the group's offsets partition (every other node:
   * three replicas on three nodes) stop; a rejoin completes in memory. */
  int f1 = (ci + 1) % 3, f2 = (ci + 2) % 3;
  tu_proc_signal(&c.nodes[f1].proc, SIGSTOP);
  tu_proc_signal(&c.nodes[f2].proc, SIGSTOP);
  assert_int_equal(send_join(&a, GROUP, "sticky"), 0);
  int code = recv_join(&a);
  if (code != 0) {
    tu_proc_signal(&c.nodes[f1].proc, SIGCONT);
    tu_proc_signal(&c.nodes[f2].proc, SIGCONT);
    fail_msg("the rejoin with the followers stopped: code %d (logs under %s)", code, c.root);
  }
  assert_true(a.gen > gen1);
  Cairn__Client__SyncGroupRequest r = CAIRN__CLIENT__SYNC_GROUP_REQUEST__INIT;
  r.group = GROUP;
  r.member_id = a.id;
  r.generation = a.gen;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_SYNC_GROUP;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_SYNC_GROUP_REQ;
  env.sync_group_req = &r;
  assert_int_equal(wc_send(&a.w, &env, NULL, 0), 0);
  long long sent = tu_now_ms();
  Cairn__Client__Envelope *resp = NULL;
  int rv = wc_recv(&a.w, 5000, &resp, NULL, NULL);
  code = -1;
  if (rv == 0) {
    assert_int_equal(resp->body_case, CAIRN__CLIENT__ENVELOPE__BODY_SYNC_GROUP_RESP);
    code = err_code(resp->sync_group_resp->error);
    cairn__client__envelope__free_unpacked(resp, NULL);
  }
  tu_proc_signal(&c.nodes[f1].proc, SIGCONT);
  tu_proc_signal(&c.nodes[f2].proc, SIGCONT);
  if (code == 0) {
    fail_msg("SyncGroup of generation %" PRId32 " answered with an assignment while its record "
             "could not commit (logs under %s)",
             a.gen, c.root);
  }
  if (rv == 0) {
    printf("with the followers stopped SyncGroup was answered %d after %lld ms\n", code,
           tu_now_ms() - sent);
    assert_int_equal(code, CODE(NOT_COORDINATOR));
  } else {
    printf("with the followers stopped SyncGroup was not answered in 5 s\n");
  }
  wc_close(&a.w);

  /* The member rejoins as a client does; its coordinator is SIGKILLed
   * the moment the assignment arrives; the successor accepts its commit of
   * that generation with that member id. */
  for (int round = 0; round < 2; round++) {
    int via = (ci + 1) % 3;
    if (!cd_running(&c, via)) {
      via = (ci + 2) % 3;
    }
    ci = rejoin(&c, via, &a);
    cd_kill(&c, ci);
    wc_close(&a.w);
    via = (ci + 1) % 3; /* the coordinator may have moved to `via` meanwhile */
    printf("round %d: member %s synced generation %" PRId32 " at node %" PRIu64
           ", which was SIGKILLed at once\n",
           round, a.id, a.gen, c.nodes[ci].id);
    int codes[1];
    int64_t off = 1;
    long long end = tu_now_ms() + WAIT_MS;
    code = -1;
    while (tu_now_ms() < end) {
      struct wc w;
      if (wc_connect(&w, c.nodes[find_coordinator(&c, via)].client_addr, 2000) == 0) {
        code = commit_on(&w, a.id, a.gen, &a.parts[0], &off, 1, codes, false);
        wc_close(&w);
      }
      if (code != -1 && code != CODE(NOT_COORDINATOR) && code != CODE(COORDINATOR_LOADING)) {
        break;
      }
      usleep(100 * 1000);
    }
    if (code != 0) {
      fail_msg("round %d: the new coordinator refused member %s of generation %" PRId32
               ": code %d (logs under %s)",
               round, a.id, a.gen, code, c.root);
    }
    assert_int_equal(codes[0], 0);
    /* Back to three nodes for the next round. */
    assert_int_equal(cd_start(&c, ci), 0);
    uint64_t ids[3] = {c.nodes[0].id, c.nodes[1].id, c.nodes[2].id};
    if (cd_wait_alive(&c, via, ids, 3, WAIT_MS) != 0) {
      fail_msg("node %" PRIu64 " did not come back (logs under %s)", c.nodes[ci].id, c.root);
    }
  }
  cd_destroy(&c);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s CAIRND\n", argv[0]);
    return 2;
  }
  cairnd_bin = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_groups_share_rebalance_fence_and_survive_the_coordinator),
      cmocka_unit_test(test_groups_offsets_of_a_gone_group_expire_and_stay_gone),
      cmocka_unit_test(test_groups_sync_waits_for_the_membership_record),
  };
  if (getenv("CAIRN_TEST_FILTER") != NULL) {
    cmocka_set_test_filter(getenv("CAIRN_TEST_FILTER"));
  }
  return cmocka_run_group_tests(tests, NULL, NULL);
}
