/* fault_ctl.c - cairn-fault-ctl, the fault rig's probe and knife: asks a
 * cluster who leads what (for the nemesis's targeted faults), decommissions
 * a node, deletes records, and cuts the unsynced tail off a stopped node's partition log
 * (the "lost page cache" fault).
 *
 *   cairn-fault-ctl controller NODES            the controller leader's id
 *   cairn-fault-ctl leader NODES TOPIC P        partition P's leader id
 *   cairn-fault-ctl replicas NODES TOPIC P      partition P's replica ids
 *   cairn-fault-ctl delete-records NODES TOPIC P PERCENT
 *                                               see ctl_delete_records
 *   cairn-fault-ctl state NODES ID              node ID's state (alive, dead, draining, removed)
 *   cairn-fault-ctl decommission NODES ID       DecommissionNode(ID); prints the wire code
 *   cairn-fault-ctl create-topic NODES TOPIC P RF
 *   cairn-fault-ctl cut-unsynced LOGDIR SEED    see ctl_cut_unsynced
 *   cairn-fault-ctl tear-raft RAFTDIR SEED      see ctl_tear_raft
 *   cairn-fault-ctl tear-wal WALDIR SEED        see ctl_tear_wal
 *   cairn-fault-ctl garble-wal WALDIR SEED      see ctl_garble_wal
 *   cairn-fault-ctl garble-log LOGDIR SEED      see ctl_garble_log
 *
 * NODES is ID@HOST:PORT,... (client ports). Exit status 0 when answered,
 * 1 otherwise (nothing printed), 2 on a usage error. */
#include "fault_client.h"

#include "format/batch.h"
#include "storage/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CTL_NAME_LEN 20 /* a segment's base offset, zero-padded */

static int ctl_usage(void)
{
  fprintf(stderr, "usage: cairn-fault-ctl controller|leader|replicas|state|decommission|"
                  "create-topic|delete-records NODES ... | cut-unsynced LOGDIR SEED | tear-raft "
                  "RAFTDIR SEED | tear-wal WALDIR "
                  "SEED | garble-wal WALDIR SEED | garble-log LOGDIR SEED\n");
  return 2;
}

/* The newest segment of dir (largest base offset): its base in *base and
 * path in path. Returns 0, or -1 when the directory holds none. */
static int ctl_newest_segment(const char *dir, int64_t *base, char *path, size_t len)
{
  DIR *d = opendir(dir);
  if (d == NULL) {
    return -1;
  }
  int64_t best = -1;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    size_t n = strlen(de->d_name);
    if (n != CTL_NAME_LEN + 4 || strcmp(de->d_name + CTL_NAME_LEN, ".log") != 0) {
      continue;
    }
    int64_t b = strtoll(de->d_name, NULL, 10);
    if (b > best) {
      best = b;
    }
  }
  closedir(d);
  if (best < 0) {
    return -1;
  }
  *base = best;
  snprintf(path, len, "%s/%020" PRId64 ".log", dir, best);
  return 0;
}

static uint64_t ctl_mix(uint64_t seed)
{
  /* splitmix64 of the seed: callers pass small seeds. */
  uint64_t z = seed + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Simulates losing the page cache of a stopped node's partition log: the
 * bytes the log never fsynced are those of its newest segment at or after
 * the checkpoint's durable offset (rolled segments were fsynced when they
 * rolled; docs/format.md). Of those, a seeded random prefix survives (the
 * kernel may have written some back), cut anywhere, even mid-batch. */
static int ctl_cut_unsynced(const char *dir, uint64_t seed)
{
  struct checkpoint cp;
  int64_t durable = 0;
  if (checkpoint_read(dir, &cp) == 0) {
    durable = cp.durable_offset;
  }
  int64_t base;
  char path[1200];
  if (ctl_newest_segment(dir, &base, path, sizeof path) != 0) {
    printf("%s: no segment\n", dir);
    return 0;
  }
  int fd = open(path, O_RDWR);
  if (fd < 0) {
    fprintf(stderr, "cairn-fault-ctl: %s: %s\n", path, strerror(errno));
    return 1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return 1;
  }
  /* The byte position of the first batch at or after the durable offset. */
  off_t pos = 0;
  uint8_t hdr[BATCH_HEADER_SIZE];
  while (base < durable && pos + BATCH_HEADER_SIZE <= st.st_size &&
         pread(fd, hdr, sizeof hdr, pos) == (ssize_t)sizeof hdr) {
    struct batch_header h;
    batch_header_decode(hdr, &h);
    if (h.base_offset >= durable || h.batch_length <= 0) {
      break;
    }
    pos += (off_t)batch_total_size(h.batch_length);
  }
  if (pos > st.st_size) {
    pos = st.st_size;
  }
  off_t span = st.st_size - pos;
  uint64_t z = ctl_mix(seed);
  off_t keep = span > 0 ? (off_t)(z % (uint64_t)(span + 1)) : 0;
  /* Half the time nothing of the unsynced part survives. */
  if ((z >> 63) == 0) {
    keep = 0;
  }
  int rv = ftruncate(fd, pos + keep);
  close(fd);
  printf("%s: durable offset %" PRId64 ", cut %lld of %lld bytes (from %lld)\n", path, durable,
         (long long)(span - keep), (long long)st.st_size, (long long)(pos + keep));
  return rv == 0 ? 0 : 1;
}

static uint64_t ctl_le64(const uint8_t *p)
{
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) {
    v = v << 8 | p[i];
  }
  return v;
}

/* Reads path whole into *buf (owned: free()). Returns 0 or -1. */
static int ctl_read_all(const char *path, uint8_t **buf, size_t *size)
{
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) {
      close(fd);
    }
    return -1;
  }
  *size = (size_t)st.st_size;
  *buf = malloc(*size + 1);
  ssize_t r = *buf != NULL ? pread(fd, *buf, *size, 0) : -1;
  close(fd);
  if (r != (ssize_t)*size) {
    free(*buf);
    return -1;
  }
  return 0;
}

/* The newest raft_uv open segment of dir that holds a batch ("open-N",
 * largest N whose first batch has entries; raft preallocates the next
 * ones empty), read whole into *buf. Returns 0 or -1. */
static int ctl_newest_open(const char *dir, char *path, size_t len, uint8_t **buf, size_t *size)
{
  DIR *d = opendir(dir);
  if (d == NULL) {
    return -1;
  }
  long best = -1;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    long k = strncmp(de->d_name, "open-", 5) == 0 ? strtol(de->d_name + 5, NULL, 10) : -1;
    if (k <= best) {
      continue;
    }
    char p[1200];
    uint8_t *b;
    size_t n;
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    if (ctl_read_all(p, &b, &n) != 0) {
      continue;
    }
    bool has_batch = n >= 24 && ctl_le64(b + 16) != 0;
    free(b);
    if (has_batch) {
      best = k;
    }
  }
  closedir(d);
  if (best < 0) {
    return -1;
  }
  snprintf(path, len, "%s/open-%ld", dir, best);
  return ctl_read_all(path, buf, size);
}

/* Simulates a write torn by a crash in a stopped node's partition Raft
 * log: the newest open segment is cut at a seeded point inside its last
 * batch (raft_uv's layout, cluster/raft_files.h: a u64 format word, then
 * batches of two CRC words, u64 n, n 16-byte entry headers and the
 * entries' data), leaving the preallocated zeros after it. Only the last
 * batch: a torn write damages only what was being written. */
static int ctl_tear_raft(const char *dir, uint64_t seed)
{
  char path[1200];
  uint8_t *buf;
  size_t size;
  if (ctl_newest_open(dir, path, sizeof path, &buf, &size) != 0) {
    printf("%s: no open segment\n", dir);
    return 0;
  }
  size_t off = 8, last = 0;
  while (off + 16 <= size) {
    uint64_t n = ctl_le64(buf + off + 8);
    if (n == 0 || n > 262144 || off + 16 + 16 * n > size) {
      break;
    }
    uint64_t data = 0;
    for (uint64_t i = 0; i < n; i++) {
      data += (ctl_le64(buf + off + 16 + 16 * i + 8) >> 32) & 0xffffffffu;
    }
    if (off + 16 + 16 * n + data > size) {
      break;
    }
    last = off;
    off += 16 + 16 * n + data;
  }
  free(buf);
  if (last == 0) {
    printf("%s: no batch\n", path);
    return 0;
  }
  /* Zero the last batch from a point inside it: what a torn sector write
   * leaves of a preallocated file. */
  size_t at = last + 1 + (size_t)(ctl_mix(seed) % (off - last - 1));
  int fd = open(path, O_WRONLY);
  if (fd < 0) {
    return 1;
  }
  size_t n = off - at;
  uint8_t *zeros = calloc(1, n);
  ssize_t w = zeros != NULL ? pwrite(fd, zeros, n, (off_t)at) : -1;
  free(zeros);
  close(fd);
  printf("%s: last batch [%zu, %zu) torn at %zu\n", path, last, off, at);
  return w == (ssize_t)n ? 0 : 1;
}

/* The newest segment of a node-wide wal directory ("wal-S.log", largest
 * S), read whole into *buf. Returns 0 or -1. */
static int ctl_newest_wal(const char *dir, char *path, size_t len, uint8_t **buf, size_t *size)
{
  DIR *d = opendir(dir);
  if (d == NULL) {
    return -1;
  }
  unsigned long long best = 0;
  bool found = false;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    unsigned long long seq;
    char tail[8];
    if (sscanf(de->d_name, "wal-%16llx%7s", &seq, tail) == 2 && strcmp(tail, ".log") == 0 &&
        (!found || seq > best)) {
      best = seq;
      found = true;
    }
  }
  closedir(d);
  if (!found) {
    return -1;
  }
  snprintf(path, len, "%s/wal-%016llx.log", dir, best);
  return ctl_read_all(path, buf, size);
}

/* Simulates a write torn by a crash in a stopped node's node-wide Raft log
 * (--raft-log node; layout in docs/format.md: a 24-byte segment header,
 * then records of a 40-byte header whose u32 at 4 is the payload length
 * and whose u32 at 12 (job_back) leads back to the first byte its write
 * job put in this segment). The newest segment is cut at a seeded point
 * inside the last job's bytes; half the time the rest is zeros instead
 * (a file extended, its data not written). Only the last job: a torn write
 * damages only what was being written. */
static int ctl_tear_wal(const char *dir, uint64_t seed)
{
  char path[1200];
  uint8_t *buf;
  size_t size;
  if (ctl_newest_wal(dir, path, sizeof path, &buf, &size) != 0) {
    printf("%s: no segment\n", dir);
    return 0;
  }
  size_t off = 24, last = 0, job = 0;
  while (off + 40 <= size) {
    uint64_t w = ctl_le64(buf + off);
    size_t len = (size_t)(w >> 32);
    if (w == 0 || off + 40 + len > size) {
      break;
    }
    size_t back = (size_t)(ctl_le64(buf + off + 8) >> 32);
    last = off;
    job = back <= off ? off - back : off;
    off += 40 + len;
  }
  free(buf);
  if (last == 0 || off - job < 2) {
    printf("%s: no record\n", path);
    return 0;
  }
  uint64_t z = ctl_mix(seed);
  size_t at = job + 1 + (size_t)(z % (off - job - 1));
  int fd = open(path, O_WRONLY);
  if (fd < 0) {
    return 1;
  }
  int rv = ftruncate(fd, (off_t)at);
  if (rv == 0 && (z >> 63) != 0) {
    rv = ftruncate(fd, (off_t)off); /* zeros from the cut on */
  }
  close(fd);
  printf("%s: last job [%zu, %zu) torn at %zu%s\n", path, job, off, at,
         (z >> 63) != 0 ? ", zeros after" : "");
  return rv == 0 ? 0 : 1;
}

/* Simulates media damage in the middle of a stopped node's node-wide log
 * (the metadata group's, meta/wal, in the torn nemesis): 32 seeded bytes
 * over the start of a seeded record of the newest segment written by an
 * earlier job than the last one. A later job's records stay intact after
 * it, so the damage was synced and is refused, never cut as a torn tail
 * (docs/metadata.md, "A damaged metadata log"). */
static int ctl_garble_wal(const char *dir, uint64_t seed)
{
  char path[1200];
  uint8_t *buf;
  size_t size;
  if (ctl_newest_wal(dir, path, sizeof path, &buf, &size) != 0) {
    printf("%s: no segment\n", dir);
    return 0;
  }
  size_t offs[4096];
  size_t n = 0, off = 24, job = 0;
  while (off + 40 <= size && n < sizeof offs / sizeof offs[0]) {
    uint64_t w = ctl_le64(buf + off);
    size_t len = (size_t)(w >> 32);
    if (w == 0 || off + 40 + len > size) {
      break;
    }
    size_t back = (size_t)(ctl_le64(buf + off + 8) >> 32);
    offs[n++] = off;
    job = back <= off ? off - back : off;
    off += 40 + len;
  }
  free(buf);
  size_t cand = 0;
  while (cand < n && offs[cand] < job) {
    cand++;
  }
  if (cand == 0) {
    printf("%s: no record before the last job\n", path);
    return 0;
  }
  uint64_t z = ctl_mix(seed);
  size_t at = offs[z % cand];
  uint8_t junk[32];
  for (size_t i = 0; i < sizeof junk; i++) {
    z = ctl_mix(z);
    junk[i] = (uint8_t)z;
  }
  junk[0] ^= 0x5a;
  int fd = open(path, O_WRONLY);
  if (fd < 0) {
    return 1;
  }
  size_t k = at + sizeof junk <= off ? sizeof junk : off - at;
  ssize_t wr = pwrite(fd, junk, k, (off_t)at);
  close(fd);
  printf("%s: record at byte %zu garbled (%zu bytes; last job at %zu)\n", path, at, k, job);
  return wr == (ssize_t)k ? 0 : 1;
}

/* Simulates media damage in a stopped node's partition log: 64 seeded
 * random bytes over a seeded place of its newest segment. */
static int ctl_garble_log(const char *dir, uint64_t seed)
{
  int64_t base;
  char path[1200];
  if (ctl_newest_segment(dir, &base, path, sizeof path) != 0) {
    printf("%s: no segment\n", dir);
    return 0;
  }
  int fd = open(path, O_WRONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 128) {
    if (fd >= 0) {
      close(fd);
    }
    printf("%s: too small to garble\n", path);
    return 0;
  }
  uint64_t z = ctl_mix(seed);
  off_t at = (off_t)(z % (uint64_t)(st.st_size - 64));
  uint8_t junk[64];
  for (size_t i = 0; i < sizeof junk; i++) {
    z = ctl_mix(z);
    junk[i] = (uint8_t)z;
  }
  ssize_t w = pwrite(fd, junk, sizeof junk, at);
  close(fd);
  printf("%s: 64 random bytes at %lld of %lld\n", path, (long long)at, (long long)st.st_size);
  return w == (ssize_t)sizeof junk ? 0 : 1;
}

/* Node id's state in the metadata of the first node that answers. */
static int ctl_state(const struct fc_nodes *ns, uint64_t id)
{
  for (int i = 0; i < ns->n; i++) {
    Cairn__Client__Envelope *env = NULL;
    Cairn__Client__MetadataResponse *md = fc_metadata(ns, i, &env);
    if (md == NULL) {
      continue;
    }
    int found = 0;
    for (size_t k = 0; k < md->n_nodes; k++) {
      if (md->nodes[k]->id == id) {
        printf("%s\n", md->nodes[k]->state);
        found = 1;
      }
    }
    if (!found && md->cluster_id != NULL && md->cluster_id[0] != '\0') {
      printf("unknown\n");
      found = 1;
    }
    cairn__client__envelope__free_unpacked(env, NULL);
    if (found) {
      return 0;
    }
  }
  return 1;
}

static const char *ctl_outcome_name(enum fc_outcome o)
{
  return o == FC_ACK ? "ack" : o == FC_FAIL ? "fail" : "indeterminate";
}

/* DeleteRecords of topic/q below the offset `percent` of the way from its
 * log start to its high watermark, as its leader's Metadata says, sent to
 * that leader; again (up to 3 times, a new target each) while refused for
 * certain (no leader, NOT_LEADER). Prints "OUTCOME target OFFSET code CODE
 * low LOW node ID" (OUTCOME ack, fail or indeterminate: the workload's
 * check reads it from the faults file). Returns 0 when a request was
 * sent, 1 when none could be. */
static int ctl_delete_records(const struct fc_nodes *ns, const char *topic, uint32_t q, int percent)
{
  char last[160] = "";
  for (int attempt = 0; attempt < 3; attempt++) {
    if (attempt > 0) {
      usleep(300 * 1000);
    }
    int i = fc_find_leader(ns, attempt % ns->n, topic, q);
    struct fc_partition pi;
    if (i < 0 || fc_partition_info(ns, i, topic, q, &pi) != 0 || pi.log_start < 0 ||
        pi.high_watermark < pi.log_start) {
      continue;
    }
    int64_t target = pi.log_start + (pi.high_watermark - pi.log_start) * percent / 100;
    int code;
    int64_t low;
    enum fc_outcome o = fc_delete_records(ns, i, topic, q, target, 5000, &code, &low);
    snprintf(last, sizeof last, "%s target %" PRId64 " code %d low %" PRId64 " node %" PRIu64,
             ctl_outcome_name(o), target, code, low, ns->id[i]);
    if (o != FC_FAIL) {
      break;
    }
  }
  if (last[0] == '\0') {
    return 1;
  }
  printf("%s\n", last);
  return 0;
}

/* Prints the replica ids of topic/q, as the first node to answer says. */
static int ctl_replicas(const struct fc_nodes *ns, const char *topic, uint32_t q)
{
  for (int i = 0; i < ns->n; i++) {
    struct fc_partition pi;
    if (fc_partition_info(ns, i, topic, q, &pi) != 0 || pi.replicas == 0) {
      continue;
    }
    const char *sep = "";
    for (int k = 0; k < ns->n; k++) {
      if ((pi.replicas >> k & 1) != 0) {
        printf("%s%" PRIu64, sep, ns->id[k]);
        sep = " ";
      }
    }
    printf("\n");
    return 0;
  }
  return 1;
}

int main(int argc, char **argv)
{
  if (argc < 3) {
    return ctl_usage();
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "cut-unsynced") == 0) {
    return argc == 4 ? ctl_cut_unsynced(argv[2], strtoull(argv[3], NULL, 10)) : ctl_usage();
  }
  if (strcmp(cmd, "tear-raft") == 0) {
    return argc == 4 ? ctl_tear_raft(argv[2], strtoull(argv[3], NULL, 10)) : ctl_usage();
  }
  if (strcmp(cmd, "tear-wal") == 0) {
    return argc == 4 ? ctl_tear_wal(argv[2], strtoull(argv[3], NULL, 10)) : ctl_usage();
  }
  if (strcmp(cmd, "garble-wal") == 0) {
    return argc == 4 ? ctl_garble_wal(argv[2], strtoull(argv[3], NULL, 10)) : ctl_usage();
  }
  if (strcmp(cmd, "garble-log") == 0) {
    return argc == 4 ? ctl_garble_log(argv[2], strtoull(argv[3], NULL, 10)) : ctl_usage();
  }
  struct fc_nodes ns;
  if (fc_nodes_parse(&ns, argv[2]) != 0) {
    fprintf(stderr, "cairn-fault-ctl: bad node list '%s'\n", argv[2]);
    return 2;
  }
  if (strcmp(cmd, "controller") == 0) {
    int i = fc_find_controller(&ns);
    if (i < 0) {
      return 1;
    }
    printf("%" PRIu64 "\n", ns.id[i]);
    return 0;
  }
  if (strcmp(cmd, "leader") == 0 && argc == 5) {
    int i = fc_find_leader(&ns, 0, argv[3], (uint32_t)strtoul(argv[4], NULL, 10));
    if (i < 0) {
      return 1;
    }
    printf("%" PRIu64 "\n", ns.id[i]);
    return 0;
  }
  if (strcmp(cmd, "replicas") == 0 && argc == 5) {
    return ctl_replicas(&ns, argv[3], (uint32_t)strtoul(argv[4], NULL, 10));
  }
  if (strcmp(cmd, "delete-records") == 0 && argc == 6) {
    return ctl_delete_records(&ns, argv[3], (uint32_t)strtoul(argv[4], NULL, 10), atoi(argv[5]));
  }
  if (strcmp(cmd, "state") == 0 && argc == 4) {
    return ctl_state(&ns, strtoull(argv[3], NULL, 10));
  }
  if (strcmp(cmd, "decommission") == 0 && argc == 4) {
    int code = fc_decommission(&ns, strtoull(argv[3], NULL, 10), 30000);
    printf("%d\n", code);
    return code == 0 ? 0 : 1;
  }
  if (strcmp(cmd, "create-topic") == 0 && argc == 6) {
    int code = fc_create_topic(&ns, argv[3], (uint32_t)strtoul(argv[4], NULL, 10),
                               (uint32_t)strtoul(argv[5], NULL, 10), NULL, 60000);
    printf("%d\n", code);
    return code == 0 ? 0 : 1;
  }
  return ctl_usage();
}
