/* test_authz.c - authorization of real cairnd processes on loopback
 * (--authorizer acl, docs/security.md "Authorization"): ACL allow and deny
 * on produce, fetch, create, delete and consumer groups; deny wins over
 * allow; prefix entries; the super-user bypass; User:ANONYMOUS and "*";
 * a refusal logged once per connection and resource; bad AddAcl/RemoveAcl
 * input; the entries surviving a restart from a metadata snapshot; and a
 * three-node cluster with authentication and authorization whose nodes
 * still register, replicate and forward.
 *
 * Usage: test_authz <path of cairnd> <path of cairn>
 * CAIRN_TEST_FILTER='*three*' runs a subset; CAIRN_KEEP_TEST_DIR=1 keeps
 * the data dirs and node logs. */
#include "cairnd.h"
#include "net/scram.h"
#include "wire_client.h"
#include "proc.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define WAIT_MS 30000
#define FAST "--heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000 --replace-delay-ms 2000"
#define AUTHZ " --authorizer acl --super-users User:admin"

static const char *cairnd_bin;
static const char *cairn_bin;

/* ---- helpers ---- */

/* `cairn ARGS` against node i as user (NULL: not logged in) with stdin;
 * returns the exit code, out gets stdout and stderr. */
static int cli(struct cd_cluster *c, int i, const char *user, const char *stdin_text, char *out,
               size_t cap, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static int cli(struct cd_cluster *c, int i, const char *user, const char *stdin_text, char *out,
               size_t cap, const char *fmt, ...)
{
  char args[1024], login[160] = "", file[700], cmd[2600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  if (user != NULL) {
    /* every test user's password is its name followed by "-pw" */
    snprintf(login, sizeof login, "CAIRN_PASSWORD=%s-pw", user);
  }
  snprintf(file, sizeof file, "%s/cli.out", c->root);
  snprintf(cmd, sizeof cmd, "printf '%s' | env %s %s -b 127.0.0.1:%d --timeout-ms 8000 %s%s %s > %s 2>&1",
           stdin_text, login, cairn_bin, c->nodes[i].client_port, user != NULL ? "--user " : "",
           user != NULL ? user : "", args, file);
  int st = system(cmd);
  FILE *f = fopen(file, "r");
  size_t n = f != NULL ? fread(out, 1, cap - 1, f) : 0;
  out[n] = '\0';
  if (f != NULL) {
    fclose(f);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* cli() that must succeed, retried while the cluster settles (a fresh
 * node registering, a new topic's leaders being elected). */
#define CLI_OK(c, i, user, in, out, ...)                                                           \
  do {                                                                                             \
    long long end_ = tu_now_ms() + WAIT_MS;                                                        \
    while (cli(c, i, user, in, out, sizeof out, __VA_ARGS__) != 0) {                               \
      if (tu_now_ms() >= end_) {                                                                   \
        fail_msg("cairn %s as %s: %s", #__VA_ARGS__, user != NULL ? user : "-", out);              \
      }                                                                                            \
      usleep(300 * 1000);                                                                          \
    }                                                                                              \
  } while (0)

/* cli() that must be refused by the ACLs: exit 1 and the message. */
#define CLI_REFUSED(c, i, user, in, out, what, ...)                                                \
  do {                                                                                             \
    int rv_ = cli(c, i, user, in, out, sizeof out, __VA_ARGS__);                                   \
    if (rv_ != 1 || strstr(out, what) == NULL) {                                                   \
      fail_msg("cairn %s as %s: exit %d, want 1 and '%s': %s", #__VA_ARGS__,                       \
               user != NULL ? user : "-", rv_, what, out);                                         \
    }                                                                                              \
  } while (0)

/* How many times text occurs in the file at path. */
static int count_in_file(const char *path, const char *text)
{
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    return 0;
  }
  int n = 0;
  char line[4096];
  while (fgets(line, sizeof line, f) != NULL) {
    n += strstr(line, text) != NULL;
  }
  fclose(f);
  return n;
}

static void wconnect(struct cd_cluster *c, int i, struct wc *w)
{
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", c->nodes[i].client_port);
  long long end = tu_now_ms() + WAIT_MS;
  while (wc_connect(w, addr, 1000) != 0) {
    assert_true(tu_now_ms() < end);
    usleep(100 * 1000);
  }
}

/* One request on w and its answer (owned: free_unpacked). */
static Cairn__Client__Envelope *wcall(struct wc *w, Cairn__Client__Envelope *env)
{
  assert_int_equal(wc_send(w, env, NULL, 0), 0);
  Cairn__Client__Envelope *resp = NULL;
  assert_int_equal(wc_recv(w, 10000, &resp, NULL, NULL), 0);
  return resp;
}

static Cairn__Client__Envelope *auth_step(struct wc *w, const char *msg)
{
  Cairn__Client__AuthenticateRequest r = CAIRN__CLIENT__AUTHENTICATE_REQUEST__INIT;
  r.mechanism = "SCRAM-SHA-256";
  r.message.data = (uint8_t *)msg;
  r.message.len = strlen(msg);
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_AUTHENTICATE;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_AUTHENTICATE_REQ;
  env.authenticate_req = &r;
  Cairn__Client__Envelope *resp = wcall(w, &env);
  assert_int_equal(resp->body_case, CAIRN__CLIENT__ENVELOPE__BODY_AUTHENTICATE_RESP);
  assert_true(resp->authenticate_resp->error == NULL ||
              resp->authenticate_resp->error->code == CAIRN__CLIENT__ERROR_CODE__OK);
  return resp;
}

/* A SCRAM login on w as user (password user-pw); must succeed. */
static void wlogin(struct wc *w, const char *user)
{
  char pw[80], first[SCRAM_MSG_MAX], final[SCRAM_MSG_MAX];
  snprintf(pw, sizeof pw, "%s-pw", user);
  struct scram_client sc;
  assert_true(scram_client_start(&sc, user, pw, "authztestnonce", first, sizeof first) > 0);
  Cairn__Client__Envelope *resp = auth_step(w, first);
  const ProtobufCBinaryData *m = &resp->authenticate_resp->message;
  assert_true(scram_client_final(&sc, (const char *)m->data, m->len, final, sizeof final) > 0);
  cairn__client__envelope__free_unpacked(resp, NULL);
  resp = auth_step(w, final);
  assert_true(resp->authenticate_resp->done);
  cairn__client__envelope__free_unpacked(resp, NULL);
  scram_client_wipe(&sc);
}

/* The wire error code of an answer: its body's error, or error_resp. */
static int resp_code(const Cairn__Client__Envelope *resp)
{
  const Cairn__Client__Error *e = NULL;
  switch (resp->body_case) {
  case CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP: e = resp->error_resp; break;
  case CAIRN__CLIENT__ENVELOPE__BODY_ADD_ACL_RESP: e = resp->add_acl_resp->error; break;
  case CAIRN__CLIENT__ENVELOPE__BODY_REMOVE_ACL_RESP: e = resp->remove_acl_resp->error; break;
  case CAIRN__CLIENT__ENVELOPE__BODY_LIST_ACLS_RESP: e = resp->list_acls_resp->error; break;
  case CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP: e = resp->create_topic_resp->error; break;
  default: break;
  }
  return e != NULL ? (int)e->code : 0;
}

/* AddAcl (add) or RemoveAcl of entry e on w; returns the wire code. */
static int wacl(struct wc *w, bool add, Cairn__Client__AclEntry *e)
{
  Cairn__Client__AddAclRequest ar = CAIRN__CLIENT__ADD_ACL_REQUEST__INIT;
  Cairn__Client__RemoveAclRequest rr = CAIRN__CLIENT__REMOVE_ACL_REQUEST__INIT;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  if (add) {
    ar.entry = e;
    env.api = CAIRN__CLIENT__API__API_ADD_ACL;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_ADD_ACL_REQ;
    env.add_acl_req = &ar;
  } else {
    rr.entry = e;
    env.api = CAIRN__CLIENT__API__API_REMOVE_ACL;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_REMOVE_ACL_REQ;
    env.remove_acl_req = &rr;
  }
  Cairn__Client__Envelope *resp = wcall(w, &env);
  int code = resp_code(resp);
  cairn__client__envelope__free_unpacked(resp, NULL);
  return code;
}

static Cairn__Client__AclEntry entry(const char *principal, uint32_t type, const char *resource,
                                     uint32_t op, bool allow)
{
  Cairn__Client__AclEntry e = CAIRN__CLIENT__ACL_ENTRY__INIT;
  e.principal = (char *)principal;
  e.resource_type = type;
  e.resource = (char *)resource;
  e.operation = op;
  e.allow = allow;
  return e;
}

/* ListAcls on w with a resource filter; returns the code, *count the
 * entries. */
static int wlist(struct wc *w, const char *resource, size_t *count)
{
  Cairn__Client__ListAclsRequest r = CAIRN__CLIENT__LIST_ACLS_REQUEST__INIT;
  r.resource = (char *)resource;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_LIST_ACLS;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_ACLS_REQ;
  env.list_acls_req = &r;
  Cairn__Client__Envelope *resp = wcall(w, &env);
  int code = resp_code(resp);
  *count = resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_LIST_ACLS_RESP
               ? resp->list_acls_resp->n_entries
               : 0;
  cairn__client__envelope__free_unpacked(resp, NULL);
  return code;
}

static int wcreate_topic(struct wc *w, const char *name)
{
  Cairn__Client__CreateTopicRequest r = CAIRN__CLIENT__CREATE_TOPIC_REQUEST__INIT;
  r.name = (char *)name;
  r.partitions = 1;
  r.replication_factor = 1;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_CREATE_TOPIC;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_REQ;
  env.create_topic_req = &r;
  Cairn__Client__Envelope *resp = wcall(w, &env);
  int code = resp_code(resp);
  cairn__client__envelope__free_unpacked(resp, NULL);
  return code;
}

/* A raft snapshot file in dir (the metadata group's). */
/* Whether dir holds a file whose name starts with prefix. */
static bool has_file(const char *dir, const char *prefix)
{
  DIR *d = opendir(dir);
  if (d == NULL) {
    return false;
  }
  bool found = false;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    found = found || strncmp(de->d_name, prefix, strlen(prefix)) == 0;
  }
  closedir(d);
  return found;
}

/* Whether the metadata group in dir (<data>/meta) took a snapshot: in
 * raft_uv's files, or on the node's log (wal-snapshots/snap-*). */
static bool has_snapshot(const char *dir)
{
  char snaps[800];
  snprintf(snaps, sizeof snaps, "%.700s/wal-snapshots", dir);
  return has_file(dir, "snapshot-") || has_file(snaps, "snap-");
}

/* Creates admin (the first user, open while the cluster has none) and the
 * users named, through node i. */
static void make_users(struct cd_cluster *c, int i, const char *const *users, size_t n)
{
  char out[4096];
  CLI_OK(c, i, NULL, "admin-pw\\n", out, "user create admin");
  for (size_t k = 0; k < n; k++) {
    char in[80];
    snprintf(in, sizeof in, "%s-pw\\n", users[k]);
    CLI_OK(c, i, "admin", in, out, "user create %s", users[k]);
  }
}

/* ---- tests ---- */

static void test_authz_acls_decide_every_kind_of_request(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 1, 1, FAST " --auth required" AUTHZ), 0);
  assert_int_equal(cd_start(&c, 0), 0);
  char out[8192];
  static const char *const users[] = {"alice", "bob"};
  make_users(&c, 0, users, 2);
  /* The super-user needs no entry. */
  CLI_OK(&c, 0, "admin", "", out, "topic create orders --partitions 2 --replication-factor 1");
  CLI_OK(&c, 0, "admin", "", out, "topic create secret --partitions 1 --replication-factor 1");
  CLI_OK(&c, 0, "admin", "", out, "topic create logs --partitions 1 --replication-factor 1");
  CLI_OK(&c, 0, "admin", "s1\\n", out, "produce secret");
  CLI_OK(&c, 0, "admin", "l1\\n", out, "produce logs");

  /* No entry: nothing, and the topics are not even listed. */
  CLI_REFUSED(&c, 0, "alice", "a1\\n", out, "User:alice may not", "produce orders");
  CLI_OK(&c, 0, "alice", "", out, "topic list");
  assert_null(strstr(out, "orders"));

  /* WRITE: produce (and DESCRIBE with it), not yet fetch. */
  CLI_OK(&c, 0, "admin", "", out,
         "acl add --principal User:alice --topic orders --operation write");
  CLI_OK(&c, 0, "alice", "a1\\n", out, "produce orders -p 0");
  CLI_OK(&c, 0, "alice", "", out, "topic list");
  assert_non_null(strstr(out, "orders"));
  CLI_REFUSED(&c, 0, "alice", "", out, "may not READ topic 'orders'",
              "consume orders -o beginning -e");
  CLI_OK(&c, 0, "admin", "", out, "acl add --principal User:alice --topic orders --operation read");
  CLI_OK(&c, 0, "alice", "", out, "consume orders -o beginning -e");
  assert_string_equal(out, "a1\n");

  /* CREATE and DELETE through a prefix entry. */
  CLI_REFUSED(&c, 0, "alice", "", out, "may not CREATE topic 'alice.t1'",
              "topic create alice.t1 --partitions 1 --replication-factor 1");
  CLI_OK(&c, 0, "admin", "", out,
         "acl add --principal User:alice --topic-prefix alice. --operation create,delete");
  CLI_OK(&c, 0, "alice", "", out, "topic create alice.t1 --partitions 1 --replication-factor 1");
  CLI_REFUSED(&c, 0, "alice", "", out, "may not CREATE topic 'other.t1'",
              "topic create other.t1 --partitions 1 --replication-factor 1");
  CLI_REFUSED(&c, 0, "alice", "", out, "may not DELETE topic 'orders'", "topic delete orders");
  CLI_OK(&c, 0, "alice", "", out, "topic delete alice.t1");

  /* A deny wins over an allow: READ on every topic, but not secret. */
  CLI_OK(&c, 0, "admin", "", out,
         "acl add --principal User:alice --topic-prefix '' --operation read");
  CLI_OK(&c, 0, "admin", "", out,
         "acl add --principal User:alice --topic secret --operation read --deny");
  CLI_OK(&c, 0, "alice", "", out, "consume logs -o beginning -e");
  assert_string_equal(out, "l1\n");
  CLI_REFUSED(&c, 0, "alice", "", out, "may not", "consume secret -o beginning -e");
  CLI_OK(&c, 0, "admin", "", out, "acl list --principal User:alice --json");
  assert_non_null(strstr(out, "\"permission\": \"deny\""));
  CLI_OK(&c, 0, "admin", "", out, "acl list --topic secret");
  assert_non_null(strstr(out, "User:alice  deny"));

  /* Consumer groups: READ on the group (and on the topics committed). */
  CLI_REFUSED(&c, 0, "alice", "", out, "may not", "consume -g g1 orders -n 1");
  CLI_OK(&c, 0, "admin", "", out, "acl add --principal User:alice --group g1 --operation read");
  CLI_OK(&c, 0, "alice", "", out, "consume -g g1 orders -n 1");
  assert_string_equal(out, "a1\n");
  CLI_OK(&c, 0, "alice", "", out, "group list");
  assert_non_null(strstr(out, "g1"));
  CLI_OK(&c, 0, "alice", "", out, "group describe g1");
  CLI_OK(&c, 0, "bob", "", out, "group list");
  assert_null(strstr(out, "g1"));
  CLI_REFUSED(&c, 0, "bob", "", out, "may not DESCRIBE group 'g1'", "group describe g1");
  /* Bob reads orders but not group g1's: no joining as g1. */
  CLI_OK(&c, 0, "admin", "", out, "acl add --principal User:bob --topic orders --operation read");
  CLI_REFUSED(&c, 0, "bob", "", out, "may not", "consume -g g1 orders -n 1");

  /* A commit is refused per partition: alice reads orders but not secret;
   * the orders offset is committed, the secret one refused on its own. */
  CLI_OK(&c, 0, "admin", "", out, "acl add --principal User:alice --group g2 --operation read");
  {
    struct wc cw;
    wconnect(&c, 0, &cw);
    wlogin(&cw, "alice");
    Cairn__Client__OffsetCommitPartition op[2];
    Cairn__Client__OffsetCommitPartition *opp[2] = {&op[0], &op[1]};
    const char *topics[2] = {"orders", "secret"};
    for (int k = 0; k < 2; k++) {
      cairn__client__offset_commit_partition__init(&op[k]);
      op[k].topic = (char *)topics[k];
      op[k].partition = 0;
      op[k].offset = 1;
      op[k].metadata = "";
    }
    Cairn__Client__OffsetCommitRequest oc = CAIRN__CLIENT__OFFSET_COMMIT_REQUEST__INIT;
    oc.group = "g2";
    oc.member_id = "";
    oc.generation = -1; /* outside membership: the group is empty */
    oc.partitions = opp;
    oc.n_partitions = 2;
    Cairn__Client__Envelope cenv = CAIRN__CLIENT__ENVELOPE__INIT;
    cenv.api = CAIRN__CLIENT__API__API_OFFSET_COMMIT;
    cenv.body_case = CAIRN__CLIENT__ENVELOPE__BODY_OFFSET_COMMIT_REQ;
    cenv.offset_commit_req = &oc;
    Cairn__Client__Envelope *cr = wcall(&cw, &cenv);
    assert_int_equal(cr->body_case, CAIRN__CLIENT__ENVELOPE__BODY_OFFSET_COMMIT_RESP);
    const Cairn__Client__OffsetCommitResponse *r = cr->offset_commit_resp;
    assert_true(r->error == NULL || r->error->code == CAIRN__CLIENT__ERROR_CODE__OK);
    assert_int_equal(r->n_partitions, 2);
    for (size_t k = 0; k < 2; k++) {
      const Cairn__Client__OffsetCommitPartitionResult *pr = r->partitions[k];
      int code = pr->error != NULL ? (int)pr->error->code : 0;
      printf("commit %s/0: code %d\n", pr->topic, code);
      assert_int_equal(code, strcmp(pr->topic, "secret") == 0
                                 ? CAIRN__CLIENT__ERROR_CODE__AUTHORIZATION_FAILED
                                 : CAIRN__CLIENT__ERROR_CODE__OK);
    }
    cairn__client__envelope__free_unpacked(cr, NULL);
    wc_close(&cw);
  }
  CLI_OK(&c, 0, "admin", "", out, "group describe g2");
  assert_non_null(strstr(out, "orders"));
  assert_null(strstr(out, "secret"));

  /* Only a super-user (or ALTER on the cluster) manages entries and users. */
  CLI_REFUSED(&c, 0, "alice", "", out, "may not ALTER the cluster",
              "acl add --principal User:alice --cluster --operation alter");
  CLI_REFUSED(&c, 0, "alice", "", out, "may not DESCRIBE the cluster", "acl list");
  CLI_REFUSED(&c, 0, "alice", "x-pw\\n", out, "may not ALTER the cluster", "user create x");

  /* A refusal is logged once per connection and resource. */
  struct wc w;
  wconnect(&c, 0, &w);
  wlogin(&w, "bob");
  for (int k = 0; k < 3; k++) {
    assert_int_equal(wcreate_topic(&w, "bob.x1"), CAIRN__CLIENT__ERROR_CODE__AUTHORIZATION_FAILED);
  }
  assert_int_equal(wcreate_topic(&w, "bob.x2"), CAIRN__CLIENT__ERROR_CODE__AUTHORIZATION_FAILED);
  wc_close(&w);
  wconnect(&c, 0, &w);
  wlogin(&w, "bob");
  assert_int_equal(wcreate_topic(&w, "bob.x1"), CAIRN__CLIENT__ERROR_CODE__AUTHORIZATION_FAILED);
  wc_close(&w);
  long long end = tu_now_ms() + 5000;
  while (count_in_file(c.nodes[0].log, "refused: User:bob may not CREATE topic 'bob.x1'") < 2) {
    assert_true(tu_now_ms() < end);
    usleep(100 * 1000);
  }
  assert_int_equal(count_in_file(c.nodes[0].log, "refused: User:bob may not CREATE topic 'bob.x1'"),
                   2); /* two connections, four refusals */
  assert_int_equal(count_in_file(c.nodes[0].log, "refused: User:bob may not CREATE topic 'bob.x2'"),
                   1);

  /* Bad input, as the super-user over the wire. */
  wconnect(&c, 0, &w);
  wlogin(&w, "admin");
  char big[300];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  struct {
    Cairn__Client__AclEntry e;
    int code;
  } bad[] = {
      {entry("alice", 1, "t", 1, true), CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST},
      {entry("User:", 1, "t", 1, true), CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST},
      {entry("User:bad name", 1, "t", 1, true), CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST},
      {entry("Node:x1", 1, "t", 1, true), CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST},
      {entry("User:alice", 9, "t", 1, true), CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST},
      {entry("User:alice", 1, "t", 0, true), CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST},
      {entry("User:alice", 1, "t", 8, true), CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST},
      {entry("User:alice", 1, big, 1, true), CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST},
      {entry("User:alice", 1, "", 1, true), CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST},
      {entry("User:alice", 3, "c", 6, true), CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    assert_int_equal(wacl(&w, true, &bad[k].e), bad[k].code);
  }
  Cairn__Client__AddAclRequest none = CAIRN__CLIENT__ADD_ACL_REQUEST__INIT;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_ADD_ACL;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_ADD_ACL_REQ;
  env.add_acl_req = &none;
  Cairn__Client__Envelope *resp = wcall(&w, &env);
  assert_int_equal(resp_code(resp), CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST);
  cairn__client__envelope__free_unpacked(resp, NULL);
  Cairn__Client__AclEntry gone = entry("User:nobody", 2, "g", 1, true);
  assert_int_equal(wacl(&w, false, &gone), CAIRN__CLIENT__ERROR_CODE__UNKNOWN_ACL);
  size_t count = 0;
  assert_int_equal(wlist(&w, big, &count), CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST);
  /* the same entry twice: one entry */
  Cairn__Client__AclEntry twice = entry("*", 2, "shared.", 5, true);
  twice.prefix = true;
  assert_int_equal(wacl(&w, true, &twice), 0);
  assert_int_equal(wacl(&w, true, &twice), 0);
  assert_int_equal(wlist(&w, "shared.", &count), 0);
  assert_int_equal(count, 1);
  assert_int_equal(wacl(&w, false, &twice), 0);
  assert_int_equal(wlist(&w, "shared.", &count), 0);
  assert_int_equal(count, 0);

  /* Enough entries for a metadata snapshot (every 256 commands), then a
   * restart: the entries and their effect come back. */
  for (int k = 0; k < 300; k++) {
    char who[40], topic[40];
    snprintf(who, sizeof who, "User:gen%d", k);
    snprintf(topic, sizeof topic, "gen-%d", k);
    Cairn__Client__AclEntry e = entry(who, 1, topic, 1, true);
    assert_int_equal(wacl(&w, true, &e), 0);
  }
  size_t before = 0;
  assert_int_equal(wlist(&w, "", &before), 0);
  assert_true(before >= 300);
  wc_close(&w);
  char meta[700];
  snprintf(meta, sizeof meta, "%s/meta", c.nodes[0].dir);
  assert_true(has_snapshot(meta));
  assert_int_equal(cd_term(&c, 0, 30000), 0);
  assert_int_equal(cd_start(&c, 0), 0);
  CLI_OK(&c, 0, "alice", "", out, "consume orders -o beginning -e");
  assert_string_equal(out, "a1\n");
  CLI_REFUSED(&c, 0, "alice", "", out, "may not", "consume secret -o beginning -e");
  wconnect(&c, 0, &w);
  wlogin(&w, "admin");
  size_t after = 0;
  assert_int_equal(wlist(&w, "", &after), 0);
  assert_int_equal(after, before);
  wc_close(&w);
  assert_false(tu_file_contains(c.nodes[0].log, "Sanitizer"));
  cd_destroy(&c);
}

/* Without --auth required: a connection that did not log in is
 * User:ANONYMOUS and gets what entries for it or for "*" grant. */
static void test_authz_anonymous_gets_what_its_entries_grant(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 1, 1, FAST AUTHZ), 0);
  assert_int_equal(cd_start(&c, 0), 0);
  char out[8192];
  make_users(&c, 0, NULL, 0);
  CLI_OK(&c, 0, "admin", "", out, "topic create t --partitions 1 --replication-factor 1");
  /* no one may log in as the anonymous principal */
  CLI_REFUSED(&c, 0, "admin", "x-pw\\n", out, "ANONYMOUS is reserved", "user create ANONYMOUS");
  CLI_REFUSED(&c, 0, NULL, "", out, "User:ANONYMOUS may not CREATE topic 'u'",
              "topic create u --partitions 1 --replication-factor 1");
  CLI_REFUSED(&c, 0, NULL, "m1\\n", out, "User:ANONYMOUS may not", "produce t");
  CLI_OK(&c, 0, "admin", "", out,
         "acl add --principal User:ANONYMOUS --topic t --operation write");
  CLI_OK(&c, 0, NULL, "m1\\n", out, "produce t");
  CLI_REFUSED(&c, 0, NULL, "", out, "may not READ topic 't'", "consume t -o beginning -e");
  CLI_OK(&c, 0, "admin", "", out, "acl add --principal '*' --topic t --operation read");
  CLI_OK(&c, 0, NULL, "", out, "consume t -o beginning -e");
  assert_string_equal(out, "m1\n");
  /* a deny for everyone wins over the anonymous allow */
  CLI_OK(&c, 0, "admin", "", out, "acl add --principal '*' --topic t --operation write --deny");
  CLI_REFUSED(&c, 0, NULL, "m2\\n", out, "not authorized", "produce t");
  assert_non_null(strstr(out, "nothing refused was written"));
  /* The idempotent producer asks for its id first: without WRITE on any
   * topic nor the cluster (Kafka's rule) that is refused, and the
   * messages fail with it (never sent without an id). */
  assert_true(tu_file_contains(c.nodes[0].log, "refused: User:ANONYMOUS may not WRITE the cluster"));
  CLI_OK(&c, 0, "admin", "", out, "acl remove --principal '*' --topic t --operation write --deny");
  CLI_OK(&c, 0, NULL, "m2\\n", out, "produce t");
  CLI_REFUSED(&c, 0, "admin", "", out, "no such access control entry",
              "acl remove --principal '*' --topic t --operation write --deny");
  cd_destroy(&c);
}

/* Three nodes with the cluster secret, --auth required and the
 * authorizer: nodes pass as Node:ID (registration, heartbeats, forwarded
 * admin requests); clients are checked at the node they reach. */
static void test_authz_three_nodes_replicate_and_forward(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 3, 3, FAST " --auth required" AUTHZ), 0);
  char secret[600];
  snprintf(secret, sizeof secret, "%s/secret", c.root);
  FILE *f = fopen(secret, "w");
  assert_non_null(f);
  fprintf(f, "9f8e7d6c5b4a39281706f5e4d3c2b1a0\n");
  fclose(f);
  assert_int_equal(chmod(secret, 0600), 0);
  for (int i = 0; i < 3; i++) {
    int n = snprintf(c.nodes[i].extra, sizeof c.nodes[i].extra, "--cluster-secret-file %.400s",
                     secret);
    assert_true(n > 0 && (size_t)n < sizeof c.nodes[i].extra && strlen(secret) <= 400);
    assert_int_equal(cd_start(&c, i), 0);
  }
  char out[8192];
  static const char *const users[] = {"alice"};
  make_users(&c, 2, users, 1); /* through a node that may not lead: forwarded */
  long long end = tu_now_ms() + WAIT_MS;
  for (;;) {
    int alive = 0;
    if (cli(&c, 1, "admin", "", out, sizeof out, "cluster status --json") == 0) {
      for (const char *p = out; (p = strstr(p, "\"alive\"")) != NULL; p++) {
        alive++;
      }
    }
    if (alive >= 3) {
      break;
    }
    assert_true(tu_now_ms() < end);
    usleep(300 * 1000);
  }
  CLI_OK(&c, 1, "admin", "", out, "topic create r3 --partitions 3 --replication-factor 3");
  CLI_OK(&c, 2, "admin", "", out,
         "acl add --principal User:alice --topic r3 --operation read,write");
  CLI_OK(&c, 0, "alice", "x\\ny\\nz\\n", out, "produce r3 -p 1");
  CLI_OK(&c, 2, "alice", "", out, "consume r3 -o beginning -e");
  assert_string_equal(out, "x\ny\nz\n");
  CLI_REFUSED(&c, 1, "alice", "", out, "may not CREATE topic 'r4'",
              "topic create r4 --partitions 1 --replication-factor 3");
  /* Every node sees the entries (ListAcls from its own copy). */
  for (int i = 0; i < 3; i++) {
    CLI_OK(&c, i, "admin", "", out, "acl list --principal User:alice");
    assert_non_null(strstr(out, "write"));
  }
  for (int i = 0; i < 3; i++) {
    assert_false(tu_file_contains(c.nodes[i].log, "refused: Node:"));
    assert_false(tu_file_contains(c.nodes[i].log, "Sanitizer"));
  }
  cd_destroy(&c);
}

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: %s CAIRND CAIRN\n", argv[0]);
    return 2;
  }
  cairnd_bin = argv[1];
  cairn_bin = argv[2];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_authz_acls_decide_every_kind_of_request),
      cmocka_unit_test(test_authz_anonymous_gets_what_its_entries_grant),
      cmocka_unit_test(test_authz_three_nodes_replicate_and_forward),
  };
  const char *filter = getenv("CAIRN_TEST_FILTER");
  if (filter != NULL) {
    cmocka_set_test_filter(filter);
  }
  return cmocka_run_group_tests(tests, NULL, NULL);
}
