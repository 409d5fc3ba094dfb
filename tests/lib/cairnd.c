/* cairnd.c - a cluster of real cairnd processes for integration tests. See
 * cairnd.h. */
#include "cairnd.h"

#include "testutil.h"
#include "wire_client.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#define CD_CALL_RETRY_MS 100

static void cd_node_setup(struct cd_cluster *c, int i, bool voter)
{
  struct cd_node *nd = &c->nodes[i];
  memset(nd, 0, sizeof *nd);
  nd->id = (uint64_t)i + 1;
  nd->voter = voter;
  nd->client_port = tu_free_port();
  nd->cluster_port = tu_free_port();
  nd->admin_port = tu_free_port();
  snprintf(nd->dir, sizeof nd->dir, "%s/node%d", c->root, i + 1);
  snprintf(nd->log, sizeof nd->log, "%s/node%d.log", c->root, i + 1);
  snprintf(nd->client_addr, sizeof nd->client_addr, "127.0.0.1:%d", nd->client_port);
}

int cd_init(struct cd_cluster *c, const char *bin, int n, int nvoters, const char *extra)
{
  memset(c, 0, sizeof *c);
  if (n > CD_MAX_NODES || nvoters < 1 || nvoters > n) {
    return -1;
  }
  c->bin = bin;
  char *root = tu_tmpdir("cairnd");
  snprintf(c->root, sizeof c->root, "%s", root);
  free(root);
  fprintf(stderr, "cairnd cluster in %s\n", c->root);
  snprintf(c->extra, sizeof c->extra, "%s", extra != NULL ? extra : "");
  c->n = n;
  c->nvoters = nvoters;
  for (int i = 0; i < n; i++) {
    cd_node_setup(c, i, i < nvoters);
  }
  size_t off = 0;
  for (int i = 0; i < nvoters; i++) {
    off += (size_t)snprintf(c->voters + off, sizeof c->voters - off, "%s%d@127.0.0.1:%d",
                            i > 0 ? "," : "", i + 1, c->nodes[i].cluster_port);
  }
  return 0;
}

int cd_add_node(struct cd_cluster *c)
{
  if (c->n >= CD_MAX_NODES) {
    return -1;
  }
  cd_node_setup(c, c->n, false);
  return c->n++;
}

int cd_start(struct cd_cluster *c, int i)
{
  struct cd_node *nd = &c->nodes[i];
  char id[32], listen[64], cluster[64], admin[64], join[64];
  snprintf(id, sizeof id, "%llu", (unsigned long long)nd->id);
  snprintf(listen, sizeof listen, "127.0.0.1:%d", nd->client_port);
  snprintf(cluster, sizeof cluster, "127.0.0.1:%d", nd->cluster_port);
  snprintf(admin, sizeof admin, "127.0.0.1:%d", nd->admin_port);
  snprintf(join, sizeof join, "127.0.0.1:%d", c->nodes[0].client_port);
  char extra[1100];
  /* CAIRN_TEST_RAFT_MUX=on|off runs a test's nodes with --raft-mux so
   * (a later --raft-mux in the test's own options wins). */
  const char *mux = getenv("CAIRN_TEST_RAFT_MUX");
  char muxopt[32] = "";
  if (mux != NULL && (strcmp(mux, "on") == 0 || strcmp(mux, "off") == 0)) {
    snprintf(muxopt, sizeof muxopt, "--raft-mux %s", mux);
  }
  snprintf(extra, sizeof extra, "%s %s %s", muxopt, c->extra, nd->extra);
  char *argv[64];
  int k = 0;
  argv[k++] = (char *)c->bin;
  argv[k++] = "--node-id";
  argv[k++] = id;
  argv[k++] = "--data-dir";
  argv[k++] = nd->dir;
  argv[k++] = "--listen";
  argv[k++] = listen;
  argv[k++] = "--cluster-listen";
  argv[k++] = cluster;
  argv[k++] = "--admin-listen";
  argv[k++] = admin;
  if (nd->voter) {
    argv[k++] = "--voters";
    argv[k++] = c->voters;
  } else {
    argv[k++] = "--join";
    argv[k++] = join;
  }
  for (char *tok = strtok(extra, " "); tok != NULL && k < 62; tok = strtok(NULL, " ")) {
    argv[k++] = tok;
  }
  argv[k] = NULL;
  return tu_proc_start(&nd->proc, argv, nd->log);
}

void cd_kill(struct cd_cluster *c, int i)
{
  tu_proc_kill(&c->nodes[i].proc);
}

int cd_term(struct cd_cluster *c, int i, int timeout_ms)
{
  tu_proc_signal(&c->nodes[i].proc, SIGTERM);
  int st = tu_proc_wait(&c->nodes[i].proc, timeout_ms);
  if (st == -1) {
    tu_proc_kill(&c->nodes[i].proc);
  }
  return st;
}

bool cd_running(const struct cd_cluster *c, int i)
{
  return c->nodes[i].proc.pid != 0;
}

void cd_destroy(struct cd_cluster *c)
{
  for (int i = 0; i < c->n; i++) {
    tu_proc_kill(&c->nodes[i].proc);
  }
  if (getenv("CAIRN_KEEP_TEST_DIR") != NULL) {
    fprintf(stderr, "kept %s\n", c->root);
    return;
  }
  tu_tmpdir_free(strdup(c->root));
}

void cd_print_log_lines(const struct cd_cluster *c, const char *substr, int max_lines)
{
  for (int i = 0; i < c->n; i++) {
    FILE *f = fopen(c->nodes[i].log, "r");
    if (f == NULL) {
      continue;
    }
    /* A ring of the last max_lines matching lines. */
    char **ring = calloc((size_t)max_lines, sizeof *ring);
    int seen = 0;
    char line[1024];
    while (ring != NULL && fgets(line, sizeof line, f) != NULL) {
      if (strstr(line, substr) == NULL) {
        continue;
      }
      free(ring[seen % max_lines]);
      ring[seen % max_lines] = strdup(line);
      seen++;
    }
    fclose(f);
    fprintf(stderr, "== node %d (%s): the last %d lines with \"%s\"\n", i, c->nodes[i].log,
            seen < max_lines ? seen : max_lines, substr);
    for (int k = seen < max_lines ? 0 : seen - max_lines; ring != NULL && k < seen; k++) {
      fputs(ring[k % max_lines] != NULL ? ring[k % max_lines] : "", stderr);
    }
    for (int k = 0; ring != NULL && k < max_lines; k++) {
      free(ring[k]);
    }
    free(ring);
  }
}

int cd_index(const struct cd_cluster *c, uint64_t id)
{
  for (int i = 0; i < c->n; i++) {
    if (c->nodes[i].id == id) {
      return i;
    }
  }
  return -1;
}

int cd_call(struct cd_cluster *c, int i, Cairn__Client__Envelope *req, const void *payload,
            size_t payload_len, int timeout_ms, Cairn__Client__Envelope **resp,
            uint8_t **payload_out, size_t *payload_len_out)
{
  return wc_call(c->nodes[i].client_addr, timeout_ms, req, payload, payload_len, timeout_ms, resp,
                 payload_out, payload_len_out, NULL);
}

Cairn__Client__MetadataResponse *cd_metadata(struct cd_cluster *c, int i,
                                             Cairn__Client__Envelope **env_out)
{
  Cairn__Client__MetadataRequest mr = CAIRN__CLIENT__METADATA_REQUEST__INIT;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_METADATA;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_METADATA_REQ;
  env.metadata_req = &mr;
  Cairn__Client__Envelope *resp = NULL;
  if (cd_call(c, i, &env, NULL, 0, 2000, &resp, NULL, NULL) != 0) {
    return NULL;
  }
  if (resp->body_case != CAIRN__CLIENT__ENVELOPE__BODY_METADATA_RESP) {
    cairn__client__envelope__free_unpacked(resp, NULL);
    return NULL;
  }
  *env_out = resp;
  return resp->metadata_resp;
}

static bool cd_all_alive(const Cairn__Client__MetadataResponse *md, const uint64_t *ids, size_t n)
{
  if (md->cluster_id == NULL || md->cluster_id[0] == '\0') {
    return false;
  }
  for (size_t k = 0; k < n; k++) {
    bool ok = false;
    for (size_t j = 0; j < md->n_nodes; j++) {
      ok = ok || (md->nodes[j]->id == ids[k] && strcmp(md->nodes[j]->state, "alive") == 0);
    }
    if (!ok) {
      return false;
    }
  }
  return true;
}

int cd_wait_alive(struct cd_cluster *c, int i, const uint64_t *ids, size_t n, int timeout_ms)
{
  long long end = tu_now_ms() + timeout_ms;
  while (tu_now_ms() < end) {
    Cairn__Client__Envelope *env = NULL;
    Cairn__Client__MetadataResponse *md = cd_metadata(c, i, &env);
    bool ok = md != NULL && cd_all_alive(md, ids, n);
    if (env != NULL) {
      cairn__client__envelope__free_unpacked(env, NULL);
    }
    if (ok) {
      return 0;
    }
    usleep(CD_CALL_RETRY_MS * 1000);
  }
  return -1;
}

int cd_start_all(struct cd_cluster *c, int timeout_ms)
{
  uint64_t ids[CD_MAX_NODES];
  for (int i = 0; i < c->n; i++) {
    int rv = cd_start(c, i);
    if (rv != 0) {
      return rv;
    }
    ids[i] = c->nodes[i].id;
  }
  return cd_wait_alive(c, 0, ids, (size_t)c->n, timeout_ms);
}

int cd_create_topic(struct cd_cluster *c, int i, const char *name, uint32_t partitions, uint32_t rf,
                    int timeout_ms, char *msg, size_t msglen)
{
  long long end = tu_now_ms() + timeout_ms;
  int code = -1;
  while (tu_now_ms() < end) {
    Cairn__Client__CreateTopicRequest r = CAIRN__CLIENT__CREATE_TOPIC_REQUEST__INIT;
    r.name = (char *)name;
    r.partitions = partitions;
    r.replication_factor = rf;
    Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
    env.api = CAIRN__CLIENT__API__API_CREATE_TOPIC;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_REQ;
    env.create_topic_req = &r;
    Cairn__Client__Envelope *resp = NULL;
    if (cd_call(c, i, &env, NULL, 0, 5000, &resp, NULL, NULL) != 0) {
      usleep(CD_CALL_RETRY_MS * 1000);
      continue;
    }
    const Cairn__Client__Error *e = NULL;
    if (resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP) {
      e = resp->create_topic_resp->error;
    } else if (resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP) {
      e = resp->error_resp;
    }
    code = e != NULL ? (int)e->code : 0;
    if (msg != NULL) {
      snprintf(msg, msglen, "%s", e != NULL && e->message != NULL ? e->message : "");
    }
    cairn__client__envelope__free_unpacked(resp, NULL);
    if (code != CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER) {
      return code;
    }
    usleep(CD_CALL_RETRY_MS * 1000);
  }
  return code;
}

/* The leader of (topic, partition) as some running node's metadata says:
 * an index into c->nodes, or -1. */
static int cd_find_leader(struct cd_cluster *c, const char *topic, uint32_t partition)
{
  for (int i = 0; i < c->n; i++) {
    if (!cd_running(c, i)) {
      continue;
    }
    Cairn__Client__Envelope *env = NULL;
    Cairn__Client__MetadataResponse *md = cd_metadata(c, i, &env);
    int found = -1;
    for (size_t t = 0; md != NULL && t < md->n_topics; t++) {
      const Cairn__Client__TopicInfo *ti = md->topics[t];
      if (strcmp(ti->name, topic) != 0 || partition >= ti->n_partitions) {
        continue;
      }
      uint64_t leader = ti->partitions[partition]->leader_id;
      found = leader != 0 ? cd_index(c, leader) : -1;
    }
    if (env != NULL) {
      cairn__client__envelope__free_unpacked(env, NULL);
    }
    if (found >= 0 && cd_running(c, found)) {
      return found;
    }
  }
  return -1;
}

/* Whether node i's metadata shows every partition of topic led by its
 * first replica. */
static bool cd_settled_at(struct cd_cluster *c, int i, const char *topic)
{
  Cairn__Client__Envelope *env = NULL;
  Cairn__Client__MetadataResponse *md = cd_metadata(c, i, &env);
  bool settled = false;
  for (size_t t = 0; md != NULL && t < md->n_topics; t++) {
    const Cairn__Client__TopicInfo *ti = md->topics[t];
    if (strcmp(ti->name, topic) != 0) {
      continue;
    }
    settled = ti->n_partitions > 0;
    for (size_t p = 0; p < ti->n_partitions; p++) {
      const Cairn__Client__PartitionInfo *pi = ti->partitions[p];
      settled = settled && pi->n_replicas > 0 && pi->leader_id == pi->replicas[0];
    }
  }
  if (env != NULL) {
    cairn__client__envelope__free_unpacked(env, NULL);
  }
  return settled;
}

int cd_wait_settled(struct cd_cluster *c, const char *topic, int timeout_ms)
{
  long long end = tu_now_ms() + timeout_ms;
  while (tu_now_ms() < end) {
    for (int i = 0; i < c->n; i++) {
      if (cd_running(c, i) && cd_settled_at(c, i, topic)) {
        return 0;
      }
    }
    usleep(CD_CALL_RETRY_MS * 1000);
  }
  return -1;
}

/* Node i's first-hand log end of each partition of topic it hosts (-1
 * when its replica is not open; CD_NOT_HOSTED where it hosts none), in
 * ends[0..cap); the partition count, or -1 when node i did not answer or
 * does not know topic. */
#define CD_NOT_HOSTED (-2)
static int cd_log_ends(struct cd_cluster *c, int i, const char *topic, int64_t *ends, size_t cap,
                       int64_t *starts)
{
  Cairn__Client__Envelope *env = NULL;
  Cairn__Client__MetadataResponse *md = cd_metadata(c, i, &env);
  int n = -1;
  for (size_t t = 0; md != NULL && t < md->n_topics; t++) {
    const Cairn__Client__TopicInfo *ti = md->topics[t];
    if (strcmp(ti->name, topic) != 0 || ti->n_partitions > cap) {
      continue;
    }
    n = (int)ti->n_partitions;
    for (size_t k = 0; k < ti->n_partitions; k++) {
      const Cairn__Client__PartitionInfo *pi = ti->partitions[k];
      bool hosts = false;
      for (size_t r = 0; r < pi->n_replicas; r++) {
        hosts = hosts || pi->replicas[r] == c->nodes[i].id;
      }
      ends[k] = hosts ? pi->high_watermark : CD_NOT_HOSTED;
      if (starts != NULL) {
        starts[k] = hosts ? pi->log_start_offset : CD_NOT_HOSTED;
      }
    }
  }
  if (env != NULL) {
    cairn__client__envelope__free_unpacked(env, NULL);
  }
  return n;
}

/* One look for cd_wait_replicas_equal. */
static bool cd_replicas_equal(struct cd_cluster *c, const char *topic)
{
  enum { CD_MAX_PARTS = 256 };
  int64_t first[CD_MAX_PARTS], ends[CD_MAX_PARTS];
  int nparts = -1;
  for (int i = 0; i < c->n; i++) {
    if (!cd_running(c, i)) {
      continue;
    }
    int n = cd_log_ends(c, i, topic, ends, CD_MAX_PARTS, NULL);
    if (n < 0 || (nparts >= 0 && n != nparts)) {
      return false;
    }
    for (int k = 0; k < n; k++) {
      if (ends[k] == -1) {
        return false; /* hosted, not open yet */
      }
      if (nparts < 0 || first[k] == CD_NOT_HOSTED) {
        first[k] = ends[k];
      } else if (ends[k] != CD_NOT_HOSTED && ends[k] != first[k]) {
        return false;
      }
    }
    nparts = n;
  }
  return nparts >= 0;
}

int cd_wait_replicas_equal(struct cd_cluster *c, const char *topic, int timeout_ms)
{
  long long end = tu_now_ms() + timeout_ms;
  while (!cd_replicas_equal(c, topic)) {
    if (tu_now_ms() > end) {
      return -1;
    }
    usleep(CD_CALL_RETRY_MS * 1000);
  }
  return 0;
}

/* One look for cd_wait_replicas_start. */
static bool cd_replicas_start(struct cd_cluster *c, const char *topic, uint32_t partition,
                              int64_t start)
{
  enum { CD_MAX_PARTS = 256 };
  int64_t ends[CD_MAX_PARTS], starts[CD_MAX_PARTS];
  for (int i = 0; i < c->n; i++) {
    if (!cd_running(c, i)) {
      continue;
    }
    int n = cd_log_ends(c, i, topic, ends, CD_MAX_PARTS, starts);
    if (n <= (int)partition || (starts[partition] != CD_NOT_HOSTED && starts[partition] != start)) {
      return false;
    }
  }
  return true;
}

int cd_wait_replicas_start(struct cd_cluster *c, const char *topic, uint32_t partition,
                           int64_t start, int timeout_ms)
{
  long long end = tu_now_ms() + timeout_ms;
  while (!cd_replicas_start(c, topic, partition, start)) {
    if (tu_now_ms() > end) {
      return -1;
    }
    usleep(CD_CALL_RETRY_MS * 1000);
  }
  return 0;
}

int cd_produce(struct cd_cluster *c, const char *topic, uint32_t partition, const void *batch,
               size_t len, int timeout_ms, int64_t *base_offset)
{
  long long end = tu_now_ms() + timeout_ms;
  int code = -1;
  int hint = -1;
  while (tu_now_ms() < end) {
    int i = hint >= 0 && cd_running(c, hint) ? hint : cd_find_leader(c, topic, partition);
    hint = -1;
    if (i < 0) {
      usleep(CD_CALL_RETRY_MS * 1000);
      continue;
    }
    struct wc_produce p;
    wc_produce_init(&p, topic, partition, len, 5000);
    Cairn__Client__Envelope *resp = NULL;
    if (cd_call(c, i, &p.env, batch, len, 7000, &resp, NULL, NULL) != 0) {
      usleep(CD_CALL_RETRY_MS * 1000);
      continue;
    }
    code = -1;
    if (resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP &&
        resp->produce_resp->n_partitions == 1) {
      const Cairn__Client__ProducePartitionResult *pr = resp->produce_resp->partitions[0];
      code = pr->error != NULL ? (int)pr->error->code : 0;
      if (code == 0) {
        *base_offset = pr->base_offset;
      } else if (code == CAIRN__CLIENT__ERROR_CODE__NOT_LEADER && pr->leader_id != 0) {
        hint = cd_index(c, pr->leader_id);
      }
    }
    cairn__client__envelope__free_unpacked(resp, NULL);
    if (code == 0 || code == CAIRN__CLIENT__ERROR_CODE__IN_DOUBT ||
        code == CAIRN__CLIENT__ERROR_CODE__CORRUPT_BATCH) {
      return code;
    }
    usleep(CD_CALL_RETRY_MS * 1000);
  }
  return code;
}

int cd_fetch(struct cd_cluster *c, const char *topic, uint32_t partition, int64_t offset,
             uint32_t max_bytes, int timeout_ms, uint8_t **data, size_t *len,
             int64_t *high_watermark)
{
  long long end = tu_now_ms() + timeout_ms;
  int code = -1;
  while (tu_now_ms() < end) {
    int i = cd_find_leader(c, topic, partition);
    if (i < 0) {
      usleep(CD_CALL_RETRY_MS * 1000);
      continue;
    }
    Cairn__Client__FetchPartition fp = CAIRN__CLIENT__FETCH_PARTITION__INIT;
    fp.topic = (char *)topic;
    fp.partition = partition;
    fp.offset = offset;
    fp.max_bytes = max_bytes;
    Cairn__Client__FetchPartition *fpp = &fp;
    Cairn__Client__FetchRequest r = CAIRN__CLIENT__FETCH_REQUEST__INIT;
    r.max_bytes = max_bytes;
    r.n_partitions = 1;
    r.partitions = &fpp;
    Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
    env.api = CAIRN__CLIENT__API__API_FETCH;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_FETCH_REQ;
    env.fetch_req = &r;
    Cairn__Client__Envelope *resp = NULL;
    uint8_t *p = NULL;
    size_t plen = 0;
    if (cd_call(c, i, &env, NULL, 0, 5000, &resp, &p, &plen) != 0) {
      usleep(CD_CALL_RETRY_MS * 1000);
      continue;
    }
    code = -1;
    if (resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_FETCH_RESP &&
        resp->fetch_resp->n_partitions == 1) {
      const Cairn__Client__FetchPartitionResult *fr = resp->fetch_resp->partitions[0];
      code = fr->error != NULL ? (int)fr->error->code : 0;
      if (code == 0) {
        *data = p;
        *len = plen;
        *high_watermark = fr->high_watermark;
        p = NULL;
      }
    }
    free(p);
    cairn__client__envelope__free_unpacked(resp, NULL);
    if (code == 0 || code == CAIRN__CLIENT__ERROR_CODE__OFFSET_OUT_OF_RANGE) {
      return code;
    }
    usleep(CD_CALL_RETRY_MS * 1000);
  }
  return code;
}

#define CD_METRICS_MAX (1u << 20)


/* The value of an unlabeled metric on the admin port of 127.0.0.1:port,
 * or -1 when the port does not answer or has no such line. */
long long cd_metric(int admin_port, const char *name)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    return -1;
  }
  struct timeval tv = {.tv_sec = 10};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)admin_port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const char req[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) {
    close(fd);
    return -1;
  }
  char *buf = malloc(CD_METRICS_MAX + 1);
  size_t len = 0;
  ssize_t r;
  while (len < CD_METRICS_MAX && (r = read(fd, buf + len, CD_METRICS_MAX - len)) > 0) {
    len += (size_t)r;
  }
  close(fd);
  buf[len] = '\0';
  char needle[128];
  snprintf(needle, sizeof needle, "\n%s ", name);
  const char *at = strstr(buf, needle);
  long long v = at != NULL ? strtoll(at + strlen(needle), NULL, 10) : -1;
  free(buf);
  return v;
}

void cd_replica_log_dir(struct cd_cluster *c, int i, const char *topic, uint32_t p, char *out,
                        size_t n)
{
  char parts[700], prefix[300];
  snprintf(parts, sizeof parts, "%s/partitions", c->nodes[i].dir);
  snprintf(prefix, sizeof prefix, "%s-%u.", topic, p);
  DIR *d = opendir(parts);
  if (d == NULL) {
    fail_msg("%s: %s", parts, strerror(errno));
  }
  struct dirent *de;
  out[0] = '\0';
  while ((de = readdir(d)) != NULL) {
    if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) {
      int w = snprintf(out, n, "%s/%.200s/log", parts, de->d_name);
      assert_true(w > 0 && (size_t)w < n);
    }
  }
  closedir(d);
  assert_true(out[0] != '\0');
}
