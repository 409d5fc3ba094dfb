/* fuzz_wal.c - libFuzzer target: the node-wide Raft log's replay
 * (wal_open, cluster/wal_recover.c) over a directory of segment files made
 * from arbitrary bytes: garbage, torn tails, stale records of a recycled
 * file's previous life, forged headers and records that pass their
 * checksum but break the replay rules.
 *
 * Input: byte 0 picks fix-ups that get the fuzzer past the checksums:
 *   bit 0  every file gets a valid segment header (magic, its sequence,
 *          the version, the header CRC)
 *   bit 1  every record gets the CRC its segment's seed gives it
 *   bit 2  every record gets a shape the format allows (a known type, the
 *          length its type needs, zeroed reserved bytes)
 *   bit 3  the last file is a spare instead of a segment
 *   bits 4-5  1 to 4 files
 *   bit 6  version 1 headers (read only, seed 0) instead of version 2
 * then, for each file but the last, a 2-byte little-endian length and its
 * bytes; the last file takes the rest. Segments are numbered from
 * FW_FIRST_SEQ on; a spare is what a dropped older segment leaves
 * (spare-<1 to FW_FIRST_SEQ - 1>.log). A spare never holds a record that
 * checks under a sequence the log has or will give a segment (the writer
 * renames a spare before writing it, wal_job_adopt; sequences only grow),
 * so the harness breaks any such record the fuzzer forges into one.
 *
 * Oracle: wal_open returns 0 or an error with a message, never crashes or
 * leaks. A log that opens passes wal_check, reads back every entry it
 * holds, takes one more append and closes; opened again it must hold the
 * same groups in the same state plus that append (replay is idempotent:
 * whatever the first open cut or zeroed stays consistent). */
#include "cluster/wal.h"
#include "cluster/wal_internal.h"
#include "common/err.h"
#include "common/log.h"
#include "format/crc32c.h"
#include "format/endian.h"
#include "fuzz_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#define FW_MAX_GROUPS 64
#define FW_FIRST_SEQ 5
/* Sequences a replay of these files may give a new segment: up to the
 * newest on disk + 1, and the few a test run rolls to. */
#define FW_LAST_SEQ (FW_FIRST_SEQ + 8)

static uv_loop_t fw_loop;
static char fw_dir[256];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  if (getenv("FUZZ_WAL_LOG") == NULL) {
    log_set_level(LOG_OFF); /* FUZZ_WAL_LOG=1 shows what the replay says */
  }
  fuzz_dir_name(fw_dir, sizeof fw_dir, "wal");
  return uv_loop_init(&fw_loop);
}

/* Rewrites the records of one segment image in place as the mode asks. */
static void fw_fix_records(uint8_t *p, size_t len, uint8_t mode, uint32_t seed)
{
  size_t off = WAL_SEG_HEADER;
  while (len >= off + WAL_REC_HEADER) {
    uint8_t *r = p + off;
    size_t room = len - off - WAL_REC_HEADER;
    uint32_t n = le_get32(r + 4);
    if (mode & 4) {
      r[8] = (uint8_t)(WAL_REC_ENTRY + r[8] % WAL_REC_END);
      r[10] = r[11] = 0;
      if (r[8] == WAL_REC_META) {
        r[9] &= WAL_META_RESET;
        n = WAL_META_PAYLOAD;
      } else if (r[8] == WAL_REC_ENTRY || r[8] == WAL_REC_MOVE) {
        n %= 256;
      } else {
        n = 0;
        r[9] = 0;
      }
      if (r[8] == WAL_REC_END) {
        memset(r + 16, 0, 24);
      }
      if (n > room) {
        return; /* a torn last record: left as it is */
      }
      le_put32(r + 4, n);
    }
    if (n > room) {
      return;
    }
    if (mode & 2) {
      le_put32(r, crc32c_extend(seed, r + 4, WAL_REC_HEADER - 4 + (size_t)n));
    }
    off += WAL_REC_HEADER + n;
  }
}

/* Breaks every record of a spare's image that checks under a sequence
 * from from_seq on, which the log may give a new segment (the writer
 * never leaves one there). A change to one record's checksum byte is a
 * change inside its neighbours' bytes, and CRCs under two seeds differ by
 * a constant of the length: so passes repeat until one changes nothing.
 * Returns 0, or -1 when that does not come (the input is skipped). */
static int fw_spare_precondition(uint8_t *p, size_t len, uint64_t from_seq)
{
  for (int pass = 0; pass < 16; pass++) {
    bool changed = false;
    for (size_t off = 0; off + WAL_REC_HEADER <= len; off++) {
      uint8_t *r = p + off;
      uint32_t n = le_get32(r + 4);
      if (r[8] < WAL_REC_ENTRY || r[8] > WAL_REC_END || n > len - off - WAL_REC_HEADER) {
        continue;
      }
      for (uint64_t seq = from_seq; seq <= FW_LAST_SEQ; seq++) {
        uint32_t seed = wal_seg_seed(WAL_FORMAT_VERSION, seq);
        if (le_get32(r) == crc32c_extend(seed, r + 4, WAL_REC_HEADER - 4 + (size_t)n)) {
          r[0]++;
          changed = true;
        }
      }
    }
    if (!changed) {
      return 0;
    }
  }
  return -1;
}

/* Lays the input out as files in fw_dir. Returns 0, or -1 when it could
 * not (nothing to test then). */
static int fw_make_files(const uint8_t *data, size_t size)
{
  uint8_t mode = data[0];
  unsigned nfiles = 1 + ((mode >> 4) & 3);
  uint32_t version = (mode & 64) ? 1 : WAL_FORMAT_VERSION;
  size_t at = 1;
  for (unsigned i = 0; i < nfiles; i++) {
    size_t len = size - at;
    if (i + 1 < nfiles) {
      if (size - at < 2) {
        return 0; /* fewer files than asked: what was laid out is the input */
      }
      len = le_get16(data + at);
      at += 2;
      len = len < size - at ? len : size - at;
    }
    uint8_t *p = malloc(len + WAL_SEG_HEADER);
    if (p == NULL) {
      return -1;
    }
    memcpy(p, data + at, len);
    at += len;
    bool spare = (mode & 8) && i + 1 == nfiles;
    /* A spare's past: one of the sequences before the segments. */
    uint64_t seq = spare ? 1 + (len > 0 ? p[0] : 0) % (FW_FIRST_SEQ - 1) : FW_FIRST_SEQ + i;
    if ((mode & 1) && len >= WAL_SEG_HEADER) {
      wal_seg_header_put(p, seq);
      le_put32(p + 16, version);
      le_put32(p + 20, crc32c(p, 20));
    }
    fw_fix_records(p, len, mode, wal_seg_seed(version, seq));
    char name[64];
    if (spare) {
      /* With no segment beside it the log starts again at sequence 1. */
      if (fw_spare_precondition(p, len, nfiles == 1 ? 1 : FW_FIRST_SEQ) != 0) {
        free(p);
        return -1;
      }
      wal_spare_name(seq, name, sizeof name);
    } else {
      wal_seg_name(seq, name, sizeof name);
    }
    int rv = fuzz_dir_write(fw_dir, name, p, len);
    free(p);
    if (rv != 0) {
      return -1;
    }
  }
  return 0;
}

struct fw_state {
  size_t n;
  uint64_t ids[FW_MAX_GROUPS];
  struct wal_group_info info[FW_MAX_GROUPS];
};

static void fw_snapshot(const struct wal *w, struct fw_state *st)
{
  size_t n = wal_groups(w, st->ids, FW_MAX_GROUPS);
  st->n = n < FW_MAX_GROUPS ? n : FW_MAX_GROUPS;
  for (size_t i = 0; i < st->n; i++) {
    if (wal_group_info(w, st->ids[i], &st->info[i]) != 0) {
      abort(); /* a group it lists must have a state */
    }
  }
}

/* Every entry a group holds reads back: replay checked each record. */
static void fw_read_all(struct wal *w, const struct fw_state *st)
{
  for (size_t i = 0; i < st->n; i++) {
    for (uint64_t x = st->info[i].first; x < st->info[i].next; x++) {
      struct wal_entry e;
      int rv = wal_read(w, st->ids[i], x, &e);
      if (rv != 0) {
        fprintf(stderr, "group %llu entry %llu: %s\n", (unsigned long long)st->ids[i],
                (unsigned long long)x, cairn_strerror(rv));
        abort();
      }
      free((void *)e.buf);
    }
  }
}

static void fw_on_append(struct wal_req *req, int status)
{
  *(int *)req->data = status == 0 ? 1 : -1;
}

static void fw_on_close(void *data)
{
  *(bool *)data = true;
}

static void fw_close(struct wal *w)
{
  bool closed = false;
  wal_close(w, fw_on_close, &closed);
  while (!closed) {
    uv_run(&fw_loop, UV_RUN_ONCE);
  }
}

/* One more entry on the first group with room below WAL_MAX_INDEX (or
 * on a new group), written through. */
static void fw_append(struct wal *w, const struct fw_state *st, uint64_t *gid, uint64_t *index)
{
  *gid = 7;
  *index = 1;
  uint64_t term = 1;
  bool found = false;
  for (size_t i = 0; i < st->n && !found; i++) {
    found = st->info[i].next < WAL_MAX_INDEX - 1;
    if (found) {
      *gid = st->ids[i];
      *index = st->info[i].next;
      term = st->info[i].term + 1;
    }
  }
  for (size_t i = 0; i < st->n && !found; i++) {
    *gid = st->ids[i] == *gid ? *gid + 1 : *gid; /* ids ascend: one none has */
  }
  static const char payload[] = "fuzz";
  struct wal_entry e = {.term = term, .type = 1, .buf = payload, .len = sizeof payload};
  int done = 0;
  struct wal_req req = {.data = &done};
  if (wal_append(w, &req, *gid, *index, &e, 1, fw_on_append) != 0) {
    abort();
  }
  while (done == 0) {
    uv_run(&fw_loop, UV_RUN_ONCE);
  }
  if (done != 1) {
    abort(); /* a write to tmpfs does not fail */
  }
}

static void fw_check(const struct wal *w)
{
  char why[256];
  if (wal_check(w, why, sizeof why) != 0) {
    fprintf(stderr, "wal_check after replay: %s\n", why);
    abort();
  }
}

static void fw_print(const char *what, const struct fw_state *st)
{
  for (size_t i = 0; i < st->n; i++) {
    const struct wal_group_info *g = &st->info[i];
    fprintf(stderr,
            "  %s: group %llu term %llu vote %llu snapshot %llu/%llu entries [%llu, %llu)\n", what,
            (unsigned long long)st->ids[i], (unsigned long long)g->term,
            (unsigned long long)g->vote, (unsigned long long)g->snap_index,
            (unsigned long long)g->snap_term, (unsigned long long)g->first,
            (unsigned long long)g->next);
  }
}

/* after == before, but for the one entry appended at (gid, index). */
static bool fw_same_but_append(const struct fw_state *before, const struct fw_state *after,
                               uint64_t gid, uint64_t index)
{
  bool had = false;
  for (size_t j = 0; j < before->n; j++) {
    had = had || before->ids[j] == gid;
  }
  if (after->n != before->n + (had ? 0 : 1)) {
    return false;
  }
  for (size_t i = 0; i < after->n; i++) {
    const struct wal_group_info *a = &after->info[i];
    const struct wal_group_info *b = NULL;
    for (size_t j = 0; j < before->n && b == NULL; j++) {
      b = before->ids[j] == after->ids[i] ? &before->info[j] : NULL;
    }
    if (after->ids[i] == gid) {
      bool grown =
          b != NULL ? a->first == b->first && a->snap_index == b->snap_index : a->first == index;
      if (!grown || a->next != index + 1) {
        return false;
      }
    } else if (b == NULL || memcmp(a, b, sizeof *a) != 0) {
      return false;
    }
  }
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1) {
    return 0;
  }
  if (fuzz_dir_reset(fw_dir) != 0) {
    return 0;
  }
  if (fw_make_files(data, size) != 0 || getenv("FUZZ_WAL_FILES_ONLY") != NULL) {
    return 0; /* FUZZ_WAL_FILES_ONLY=1 leaves the files an input makes */
  }
  char errmsg[WAL_ERRMSG_SIZE];
  struct wal *w = NULL;
  int rv = wal_open(&fw_loop, fw_dir, NULL, &w, errmsg);
  if (rv != 0) {
    if (errmsg[0] == '\0') {
      abort(); /* a refusal says why */
    }
    return 0;
  }
  fw_check(w);
  struct fw_state before;
  fw_snapshot(w, &before);
  fw_read_all(w, &before);
  uint64_t gid, index;
  fw_append(w, &before, &gid, &index);
  fw_close(w);

  rv = wal_open(&fw_loop, fw_dir, NULL, &w, errmsg);
  if (rv != 0) {
    fprintf(stderr, "a log that replayed once refuses a second replay: %s\n", errmsg);
    abort();
  }
  fw_check(w);
  struct fw_state after;
  fw_snapshot(w, &after);
  if (before.n < FW_MAX_GROUPS && !fw_same_but_append(&before, &after, gid, index)) {
    fprintf(stderr,
            "the second replay holds another state than the first (append: group %llu "
            "entry %llu)\n",
            (unsigned long long)gid, (unsigned long long)index);
    fw_print("first", &before);
    fw_print("second", &after);
    abort();
  }
  fw_read_all(w, &after);
  fw_close(w);
  return 0;
}
