/* wal_recover.c - replays the node-wide log at open: lists the segments,
 * checks every record, rebuilds each group's state and index, cuts a torn
 * tail of the newest segment and refuses any other damage (wal.h says
 * which is which). Blocking file I/O, at node start. */
#include "cluster/wal_internal.h"

#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "format/endian.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int wal_recover_fail(struct wal *w, int err, uint64_t seq, size_t at, const char *why)
{
  char name[32];
  wal_seg_name(seq, name, sizeof name);
  wal_fmt(w->errmsg, sizeof w->errmsg, "%s/%s: record at byte %zu: %s", w->dir, name, at, why);
  return err;
}

static int wal_cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Takes spare file name (spare-IIIIIIIIIIIIIIII.log) for recycling, or
 * removes it when WAL_SPARES_MAX are kept already. Returns whether name
 * is a spare's. */
static bool wal_recover_spare(struct wal *w, const char *name)
{
  uint64_t id;
  char check[32];
  if (sscanf(name, "spare-%16" SCNx64 ".log", &id) != 1) {
    return false;
  }
  wal_spare_name(id, check, sizeof check);
  if (strcmp(check, name) != 0 || id == 0) {
    return false;
  }
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", w->dir, name);
  struct stat st;
  if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && w->nspares < WAL_SPARES_MAX) {
    w->spares[w->nspares++] = (struct wal_spare){.id = id, .bytes = (uint64_t)st.st_size};
    return true;
  }
  if (unlink(path) != 0) {
    log_warn("wal", "unlink %s: %s", path, strerror(errno));
  }
  return true;
}

/* The sequences of dir's segment files, ascending; spare files are taken
 * (wal_recover_spare); other files are not the log's and are left
 * alone. */
static int wal_recover_list(struct wal *w, uint64_t **out, size_t *n)
{
  DIR *d = opendir(w->dir);
  if (d == NULL) {
    wal_fmt(w->errmsg, sizeof w->errmsg, "%s: opendir: %s", w->dir, strerror(errno));
    return -errno;
  }
  uint64_t *v = NULL;
  size_t cap = 0;
  *n = 0;
  struct dirent *de;
  int rv = 0;
  while (rv == 0 && (de = readdir(d)) != NULL) {
    uint64_t seq;
    char check[32];
    if (wal_recover_spare(w, de->d_name) ||
        sscanf(de->d_name, "wal-%16" SCNx64 ".log", &seq) != 1) {
      continue;
    }
    wal_seg_name(seq, check, sizeof check);
    if (strcmp(check, de->d_name) != 0) {
      continue;
    }
    rv = wal_grow(&v, &cap, *n, sizeof *v);
    if (rv != 0) {
      break;
    }
    v[(*n)++] = seq;
  }
  closedir(d);
  if (rv != 0) {
    free(v);
    wal_fmt(w->errmsg, sizeof w->errmsg, "%s: out of memory", w->dir);
    return rv;
  }
  if (*n > 0) {
    qsort(v, *n, sizeof *v, wal_cmp_u64);
  }
  *out = v;
  return 0;
}

/* Applies one checked record found at off of segment seq. */
static int wal_recover_apply(struct wal *w, uint64_t seq, size_t off, const struct wal_rec *r)
{
  int rv = 0;
  switch (r->type) {
  case WAL_REC_ENTRY:
    rv = wal_apply_entry(w, r->gid, r->index, r->term, r->etype, seq, off, r->len, 0);
    break;
  case WAL_REC_MOVE:
    rv = wal_apply_move(w, r->gid, r->index, r->term, r->etype, seq, off, r->len, 0);
    break;
  case WAL_REC_TRUNCATE:
    rv = wal_apply_truncate(w, r->gid, r->index, 0);
    break;
  case WAL_REC_META: {
    uint64_t m[5];
    for (int i = 0; i < 5; i++) {
      m[i] = le_get64(r->payload + 8 * i);
    }
    rv = wal_apply_meta(w, r->gid, m, r->etype & WAL_META_RESET, seq, 0);
    break;
  }
  default:
    wal_apply_remove(w, r->gid, 0);
    break;
  }
  if (rv == CAIRN_EINDEX) {
    const struct wal_group *g = wal_group_find(w, r->gid);
    char why[160];
    snprintf(why, sizeof why, "group %" PRIu64 " entry %" PRIu64 " does not follow %" PRIu64 "%s",
             r->gid, r->index, g ? g->first + g->n : 0,
             r->type == WAL_REC_MOVE ? " (a moved entry too far from the others)" : "");
    return wal_recover_fail(w, CAIRN_ECORRUPT, seq, off, why);
  }
  if (rv != 0) {
    return wal_recover_fail(w, rv, seq, off, cairn_strerror(rv));
  }
  return 0;
}

/* What follows the last good record (at bad) of the newest segment: the
 * first record intact under this segment's checksum seed that a later job
 * wrote (which started only after the job that wrote the damaged bytes
 * had been fdatasynced: then the damage is not a torn tail), and the end
 * of the farthest intact record (the torn job's records that made it to
 * disk after a torn one). A recycled file's old records fail the seed. */
struct wal_tail {
  size_t later;    /* 0: none */
  size_t live_end; /* 0: no intact record after bad */
};

static struct wal_tail wal_recover_scan_tail(const struct wal_seg *s, const uint8_t *buf,
                                             size_t len, size_t bad)
{
  struct wal_tail t = {0, 0};
  for (size_t p = bad + 1; p + WAL_REC_HEADER <= len; p++) {
    const uint8_t *h = buf + p;
    if (h[8] < WAL_REC_ENTRY || h[8] > WAL_REC_END || le_get16(h + 10) != 0) {
      continue; /* cheap filter before the checksum */
    }
    struct wal_rec r;
    char why[128];
    if (!wal_rec_decode(s, buf, len, p, &r, why, sizeof why)) {
      continue;
    }
    if (r.job_back <= p && p - r.job_back > bad) {
      t.later = p;
      return t;
    }
    size_t end = p + WAL_REC_HEADER + (size_t)r.len;
    t.live_end = end > t.live_end ? end : t.live_end;
  }
  return t;
}

/* Ends the newest segment at bad: removed when not even its header is
 * whole; else every byte from bad to live_end (the torn job's intact
 * records) is zeroed, so that no position past the end holds a record
 * that checks. Nothing else after bad can ever check: a recycled file's
 * old bytes fail the seed, a torn record fails its checksum, and the
 * writer only writes from bad on. The file keeps its length (a recycled
 * file's blocks stay allocated).
 *
 * A version 1 segment is cut to bad instead (ftruncate, as version 1
 * did): nothing is ever written to it again (the log goes on in a new
 * segment), so the torn bytes would stay, and the next replay reads an
 * older segment to its end, where they would be damage. Version 1 never
 * recycled files: no blocks to keep. Returns 0 or -errno. */
static int wal_recover_cut(struct wal *w, struct wal_seg *s, size_t bad, size_t live_end)
{
  char path[PATH_MAX];
  wal_seg_path(w, s->seq, path, sizeof path);
  int rv = 0;
  if (bad < WAL_SEG_HEADER) {
    close(s->fd);
    s->fd = -1;
    rv = unlink(path) == 0 ? fs_fsync_dir(w->dir) : -errno;
  } else if (s->version < 2) {
    live_end = s->file_bytes; /* for the log line: every byte from bad on goes */
    rv = ftruncate(s->fd, (off_t)bad) == 0 && fdatasync(s->fd) == 0 ? 0 : -errno;
    s->file_bytes = bad;
  } else if (live_end > bad) {
    static const uint8_t zeros[4096];
    for (size_t at = bad; rv == 0 && at < live_end; at += sizeof zeros) {
      size_t n = live_end - at < sizeof zeros ? live_end - at : sizeof zeros;
      rv = fs_pwrite_all(s->fd, zeros, n, (off_t)at);
    }
    if (rv == 0 && fdatasync(s->fd) != 0) {
      rv = -errno;
    }
  }
  if (rv != 0) {
    wal_fmt(w->errmsg, sizeof w->errmsg, "%s: cutting a torn tail at %zu: %s", path, bad,
            cairn_strerror(rv));
    return rv;
  }
  if (bad < WAL_SEG_HEADER || live_end > bad) {
    size_t cut = bad < WAL_SEG_HEADER ? WAL_SEG_HEADER : live_end - bad;
    log_warn("wal", "%s: cut a torn tail of %zu bytes at byte %zu", path, cut, bad);
    w->st.torn_bytes_cut += cut;
  }
  return 0;
}

/* Replays segment seq (its bytes in buf). */
static int wal_recover_segment(struct wal *w, struct wal_seg *s, const uint8_t *buf, size_t len,
                               bool newest)
{
  size_t off = 0;
  char why[128] = "segment header is damaged";
  s->file_bytes = len;
  s->version = wal_seg_header_ok(buf, len, s->seq);
  /* A damaged header's segment is looked through (wal_recover_scan_tail)
   * with the seed its name gives it in the current format: not with
   * version 1's seed 0, which a recycled file's version 1 past checks. */
  s->seed = wal_seg_seed(s->version != 0 ? s->version : WAL_FORMAT_VERSION, s->seq);
  bool damaged = s->version == 0;
  if (!damaged) {
    off = WAL_SEG_HEADER;
  }
  while (!damaged && off < len && !s->sealed) {
    struct wal_rec r;
    if (!wal_rec_decode(s, buf, len, off, &r, why, sizeof why)) {
      damaged = true;
      break;
    }
    if (r.job_back > off) { /* its job would start before the file */
      return wal_recover_fail(w, CAIRN_ECORRUPT, s->seq, off, "job offset before the file start");
    }
    if (r.type == WAL_REC_END) {
      s->sealed = true; /* what follows is a recycled file's past */
    } else {
      int rv = wal_recover_apply(w, s->seq, off, &r);
      if (rv != 0) {
        return rv;
      }
    }
    off += WAL_REC_HEADER + (size_t)r.len;
  }
  if (!damaged && !newest && s->version >= 2 && !s->sealed) {
    /* Every segment but the newest was closed before the next one was
     * written: an older one without its END record lost its tail. */
    return wal_recover_fail(w, CAIRN_ECORRUPT, s->seq, off,
                            "the segment ends without its END record (its tail is missing)");
  }
  if (!damaged) {
    s->size = s->written = off;
    return 0;
  }
  if (!newest) {
    return wal_recover_fail(w, CAIRN_ECORRUPT, s->seq, off, why);
  }
  struct wal_tail t = wal_recover_scan_tail(s, buf, len, off);
  if (t.later != 0) {
    char msg[200];
    wal_fmt(msg, sizeof msg, "%s (the record at byte %zu, written after it was synced, is intact)",
            why, t.later);
    return wal_recover_fail(w, CAIRN_ECORRUPT, s->seq, off, msg);
  }
  int rv = wal_recover_cut(w, s, off, t.live_end);
  s->size = s->written = off;
  return rv;
}

static int wal_recover_one(struct wal *w, uint64_t seq, bool newest)
{
  char name[32], path[PATH_MAX];
  wal_seg_name(seq, name, sizeof name);
  wal_seg_path(w, seq, path, sizeof path);
  uint8_t *buf = NULL;
  size_t len = 0;
  int rv = fs_read_file(w->dir, name, WAL_MAX_FILE_BYTES, &buf, &len);
  if (rv != 0) {
    wal_fmt(w->errmsg, sizeof w->errmsg, "%s: read: %s", path, cairn_strerror(rv));
    return rv;
  }
  rv = wal_seg_push(w, seq);
  struct wal_seg *s = rv == 0 ? &w->segs[w->nsegs - 1] : NULL;
  if (s != NULL) {
    s->fd = open(path, O_RDWR | O_CLOEXEC);
    rv = s->fd < 0 ? -errno : 0;
    if (rv != 0) {
      wal_fmt(w->errmsg, sizeof w->errmsg, "%s: open: %s", path, cairn_strerror(rv));
    }
  } else {
    wal_fmt(w->errmsg, sizeof w->errmsg, "%s: out of memory", path);
  }
  if (rv == 0) {
    rv = wal_recover_segment(w, s, buf, len, newest);
  }
  free(buf);
  if (rv == 0 && s->fd < 0) { /* the torn segment was removed */
    w->nsegs--;
    w->next_seq = seq;
  }
  return rv;
}

int wal_recover(struct wal *w)
{
  uint64_t *seqs = NULL;
  size_t n = 0;
  int rv = wal_recover_list(w, &seqs, &n);
  if (rv != 0) {
    return rv;
  }
  for (size_t i = 0; rv == 0 && i < n; i++) {
    if (i > 0 && seqs[i] != seqs[i - 1] + 1) {
      char why[96];
      snprintf(why, sizeof why, "segment %016" PRIx64 " is missing", seqs[i - 1] + 1);
      rv = wal_recover_fail(w, CAIRN_ECORRUPT, seqs[i], 0, why);
      break;
    }
    rv = wal_recover_one(w, seqs[i], i + 1 == n);
  }
  if (rv == 0 && w->nsegs > 0) {
    w->next_seq = w->segs[w->nsegs - 1].seq + 1;
  }
  if (rv == 0) {
    rv = wal_check_holes(w); /* every entry moved out of a deleted segment came back */
  }
  free(seqs);
  return rv;
}
