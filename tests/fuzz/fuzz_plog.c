/* fuzz_plog.c - libFuzzer target: a partition log's recovery (plog_open,
 * src/storage/plog_recover.c) over a replica directory made from arbitrary
 * bytes: segments with garbage, torn or forged batches, damaged or lying
 * index files, a checkpoint that claims anything.
 *
 * Input: byte 0 picks fix-ups that get the fuzzer past the checksums:
 *   bit 0  every batch of a segment gets a length that fits the file and
 *          its CRC
 *   bit 1  every batch's base offset follows the one before it (from the
 *          segment's base)
 *   bit 2  the checkpoint gets its magic, version and CRC (its offsets
 *          and index stay the input's)
 *   bit 3  a second segment, based where the first one's batches end
 *   bit 4  an index and a time index file for the first segment
 * then each file, in this order, as a 2-byte little-endian length and its
 * bytes (the last one present takes the rest): the first segment, the
 * checkpoint, the second segment (bit 3), the index and the time index
 * (bit 4).
 *
 * Oracle: plog_open returns 0 or an error with a message, never crashes
 * or leaks. A log that opens hands back, from its start to its end, only
 * whole batches whose frame checks (length, magic, CRC), at the offsets it
 * says; it takes one more
 * batch and a flush, closes, and opens again with that batch at its end
 * and everything before it as it was. */
#include "common/err.h"
#include "common/log.h"
#include "format/batch.h"
#include "format/batch_builder.h"
#include "format/crc32c.h"
#include "format/endian.h"
#include "fuzz_util.h"
#include "storage/checkpoint.h"
#include "storage/plog.h"
#include "storage/segment.h"
#include "storage/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FP_READ_BYTES (64u << 10)
#define FP_MAX_INDEX ((uint64_t)1 << 62) /* Raft indexes stay far below */

static char fp_dir[256];
static uint8_t *fp_batch; /* the batch appended after a successful open */
static size_t fp_batch_len;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  if (getenv("FUZZ_PLOG_LOG") == NULL) {
    log_set_level(LOG_OFF); /* FUZZ_PLOG_LOG=1 shows what recovery says */
  }
  fuzz_dir_name(fp_dir, sizeof fp_dir, "plog");
  struct batch_builder b;
  if (batch_builder_init(&b, BATCH_DEFAULT_MAX_BYTES) != 0 ||
      batch_builder_add(&b, 1700000000000, "k", 1, "fuzz", 4, NULL, 0) != 0 ||
      batch_builder_add(&b, 1700000000001, "k", 1, "plog", 4, NULL, 0) != 0 ||
      batch_builder_finish(&b, &fp_batch, &fp_batch_len) != 0) {
    abort();
  }
  batch_builder_close(&b);
  return 0;
}

/* Rewrites the batches of a segment image in place as the mode asks;
 * returns the offset after the last batch walked. */
static int64_t fp_fix_batches(uint8_t *p, size_t len, uint8_t mode, int64_t base)
{
  int64_t next = base;
  size_t off = 0;
  while (len - off >= BATCH_HEADER_SIZE) {
    uint8_t *b = p + off;
    size_t room = len - off - BATCH_LENGTH_FIELD_END;
    uint32_t blen = le_get32(b + BATCH_OFF_LENGTH);
    uint32_t least = BATCH_HEADER_SIZE - BATCH_LENGTH_FIELD_END;
    if ((mode & 1) && (blen < least || blen > room)) {
      blen = least + blen % 4096;
      blen = blen <= room ? blen : (uint32_t)room;
      le_put32(b + BATCH_OFF_LENGTH, blen);
    }
    if (blen > room || blen < least) {
      break;
    }
    if (mode & 2) {
      le_put64(b + BATCH_OFF_BASE_OFFSET, (uint64_t)next);
    }
    size_t total = BATCH_LENGTH_FIELD_END + (size_t)blen;
    if (mode & 1) {
      le_put32(b + BATCH_OFF_CRC, crc32c_extend(0, b + BATCH_CRC_START, total - BATCH_CRC_START));
    }
    int32_t delta = (int32_t)le_get32(b + BATCH_OFF_LAST_OFFSET_DELTA);
    next = (int64_t)le_get64(b + BATCH_OFF_BASE_OFFSET) + (delta >= 0 ? delta : 0) + 1;
    off += total;
  }
  return next;
}

/* The input's next file: a 2-byte length and its bytes, or the rest. */
static size_t fp_next_part(const uint8_t *data, size_t size, size_t *at, bool last,
                           const uint8_t **out)
{
  size_t len = size - *at;
  if (!last) {
    if (size - *at < 2) {
      *out = data + *at;
      return 0;
    }
    len = le_get16(data + *at);
    *at += 2;
    len = len < size - *at ? len : size - *at;
  }
  *out = data + *at;
  *at += len;
  return len;
}

static int fp_put(const char *name, const uint8_t *src, size_t len, uint8_t mode, bool segment,
                  int64_t base, int64_t *next)
{
  uint8_t *p = malloc(len + 1);
  if (p == NULL) {
    return -1;
  }
  memcpy(p, src, len);
  if (segment) {
    *next = fp_fix_batches(p, len, mode, base);
  }
  int rv = fuzz_dir_write(fp_dir, name, p, len);
  free(p);
  return rv;
}

static int fp_make_files(const uint8_t *data, size_t size)
{
  uint8_t mode = data[0];
  bool two = mode & 8, indexes = mode & 16;
  size_t at = 1;
  const uint8_t *part;
  char name[64];
  int64_t next = 0;
  /* first segment */
  size_t len = fp_next_part(data, size, &at, false, &part);
  segment_name(name, 0, "log");
  if (fp_put(name, part, len, mode, true, 0, &next) != 0) {
    return -1;
  }
  /* checkpoint */
  bool last = !two && !indexes;
  len = fp_next_part(data, size, &at, last, &part);
  if (len > 0) {
    uint8_t cp[CHECKPOINT_SIZE] = {0};
    memcpy(cp, part, len < sizeof cp ? len : sizeof cp);
    if (mode & 4) {
      le_put32(cp, CHECKPOINT_MAGIC);
      cp[4] = CHECKPOINT_VERSION;
      cp[5] = cp[6] = cp[7] = 0;
      memset(cp + 32, 0, 4);
      le_put32(cp + 36, crc32c(cp, 36));
    }
    bool fixed = mode & 4;
    if (fuzz_dir_write(fp_dir, CHECKPOINT_FILE, fixed ? cp : part, fixed ? sizeof cp : len) != 0) {
      return -1;
    }
  }
  if (two) {
    len = fp_next_part(data, size, &at, !indexes, &part);
    segment_name(name, next, "log");
    int64_t next2 = 0;
    if (fp_put(name, part, len, mode, true, next, &next2) != 0) {
      return -1;
    }
  }
  if (indexes) {
    len = fp_next_part(data, size, &at, false, &part);
    segment_name(name, 0, "index");
    if (fp_put(name, part, len, mode, false, 0, NULL) != 0) {
      return -1;
    }
    len = fp_next_part(data, size, &at, true, &part);
    segment_name(name, 0, "timeindex");
    if (fp_put(name, part, len, mode, false, 0, NULL) != 0) {
      return -1;
    }
  }
  return 0;
}

/* The region's bytes (from its file or memory); NULL when it has none. */
static uint8_t *fp_region_bytes(const struct store_region *r)
{
  uint8_t *buf = malloc(r->len + 1);
  if (buf == NULL) {
    abort();
  }
  if (r->fd < 0) {
    memcpy(buf, r->mem, r->len);
  } else if (pread(r->fd, buf, r->len, r->pos) != (ssize_t)r->len) {
    abort(); /* a region names bytes its file holds */
  }
  return buf;
}

/* Reads [start, next) whole: only batches that validate, each where the
 * one before it ended. */
static void fp_read_all(struct store *s)
{
  struct store_info info;
  store_info(s, &info);
  int64_t at = info.start_offset;
  while (at < info.next_offset) {
    struct store_region r;
    int rv = store_read(s, at, FP_READ_BYTES, &r);
    if (rv != 0 || r.len == 0 || r.first_offset > at || r.next_offset <= at) {
      fprintf(stderr, "read at %lld of [%lld, %lld): %s, %zu bytes\n", (long long)at,
              (long long)info.start_offset, (long long)info.next_offset, cairn_strerror(rv),
              rv == 0 ? r.len : 0);
      abort();
    }
    uint8_t *buf = fp_region_bytes(&r);
    int64_t expect = r.first_offset;
    for (size_t off = 0; off < r.len;) {
      struct batch_header h;
      if (r.len - off < BATCH_HEADER_SIZE) {
        abort(); /* a region holds whole batches */
      }
      batch_header_decode(buf + off, &h);
      size_t total = batch_total_size(h.batch_length);
      /* Recovery checks each batch's frame (length, magic, CRC, offsets
       * in sequence), not its records: only a forged CRC gets a batch
       * with malformed records past it, and readers validate those. */
      bool ok = h.base_offset == expect && total <= r.len - off && h.magic == BATCH_MAGIC &&
                h.crc == crc32c_extend(0, buf + off + BATCH_CRC_START, total - BATCH_CRC_START);
      if (!ok) {
        fprintf(stderr, "batch at %lld (base %lld): not what was checked at open\n",
                (long long)expect, (long long)h.base_offset);
        abort();
      }
      expect = h.base_offset + h.last_offset_delta + 1;
      off += total;
    }
    if (expect != r.next_offset) {
      abort();
    }
    free(buf);
    at = r.next_offset;
    store_region_release(&r);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1) {
    return 0;
  }
  if (fuzz_dir_reset(fp_dir) != 0) {
    return 0;
  }
  if (fp_make_files(data, size) != 0) {
    return 0;
  }
  struct plog_opts opts;
  plog_opts_default(&opts);
  struct store *s = NULL;
  char errmsg[STORE_ERRMSG_SIZE];
  errmsg[0] = '\0';
  int rv = plog_open(fp_dir, &opts, &s, errmsg, sizeof errmsg);
  if (rv != 0) {
    if (errmsg[0] == '\0') {
      abort(); /* a refusal says why */
    }
    if (getenv("FUZZ_PLOG_LOG") != NULL) {
      fprintf(stderr, "refused: %s\n", errmsg);
    }
    return 0;
  }
  fp_read_all(s);
  struct store_info before;
  store_info(s, &before);
  if (before.last_index >= FP_MAX_INDEX) {
    store_close(s); /* a checkpoint's forged index: no Raft entry can follow it */
    return 0;
  }
  struct store_batch b = {fp_batch, fp_batch_len};
  int64_t base = -1;
  rv = store_append(s, &b, 1, before.last_index + 1, &base);
  if (rv == 0) {
    rv = store_flush(s, before.next_offset + 2);
  }
  if (rv != 0 || base != before.next_offset) {
    fprintf(stderr, "append after open: %s (base %lld, end %lld): %s\n", cairn_strerror(rv),
            (long long)base, (long long)before.next_offset, store_errmsg(s));
    abort();
  }
  store_close(s);
  if (getenv("FUZZ_PLOG_LOG") != NULL) {
    fprintf(stderr, "opened [%lld, %lld), appended at %lld; opening again\n",
            (long long)before.start_offset, (long long)before.next_offset, (long long)base);
  }

  rv = plog_open(fp_dir, &opts, &s, errmsg, sizeof errmsg);
  if (rv != 0) {
    fprintf(stderr, "a log that opened and was flushed refuses a second open: %s\n", errmsg);
    abort();
  }
  struct store_info after;
  store_info(s, &after);
  if (after.start_offset != before.start_offset || after.next_offset != before.next_offset + 2 ||
      after.last_index != before.last_index + 1) {
    fprintf(stderr, "second open: [%lld, %lld) index %llu, was [%lld, %lld) index %llu + 2\n",
            (long long)after.start_offset, (long long)after.next_offset,
            (unsigned long long)after.last_index, (long long)before.start_offset,
            (long long)before.next_offset, (unsigned long long)before.last_index);
    abort();
  }
  fp_read_all(s);
  store_close(s);
  return 0;
}
