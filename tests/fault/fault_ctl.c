/* fault_ctl.c - cairn-fault-ctl, the fault rig's probe and knife: asks a
 * cluster who leads what (for the nemesis's targeted faults), decommissions
 * a node, and cuts the unsynced tail off a stopped node's partition log
 * (the "lost page cache" fault).
 *
 *   cairn-fault-ctl controller NODES            the controller leader's id
 *   cairn-fault-ctl leader NODES TOPIC P        partition P's leader id
 *   cairn-fault-ctl state NODES ID              node ID's state (alive, dead, draining, removed)
 *   cairn-fault-ctl decommission NODES ID       DecommissionNode(ID); prints the wire code
 *   cairn-fault-ctl create-topic NODES TOPIC P RF
 *   cairn-fault-ctl cut-unsynced LOGDIR SEED    see ctl_cut_unsynced
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CTL_NAME_LEN 20 /* a segment's base offset, zero-padded */

static int ctl_usage(void)
{
  fprintf(stderr, "usage: cairn-fault-ctl controller|leader|state|decommission|create-topic "
                  "NODES ... | cut-unsynced LOGDIR SEED\n");
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
  /* splitmix64 of the seed: callers pass small seeds. */
  uint64_t z = seed + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
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

int main(int argc, char **argv)
{
  if (argc < 3) {
    return ctl_usage();
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "cut-unsynced") == 0) {
    return argc == 4 ? ctl_cut_unsynced(argv[2], strtoull(argv[3], NULL, 10)) : ctl_usage();
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
                               (uint32_t)strtoul(argv[5], NULL, 10), 60000);
    printf("%d\n", code);
    return code == 0 ? 0 : 1;
  }
  return ctl_usage();
}
