/* raft_io_wal.c - raft 0.15's storage methods over the node-wide log
 * (raft_io_wal.h). The entries, term, vote and snapshot position are wal
 * records of the group; snapshot data goes to one file per snapshot. */
#include "cluster/raft_io_wal.h"

#include "common/err.h"
#include "common/fsutil.h"
#include "format/crc32c.h"
#include "format/endian.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RIOW_MAGIC "CAIRNSNP"

/* vsnprintf: messages naming paths may be cut short (snprintf's
 * truncation warning does not apply to a message). */
static void riow_fmt(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void riow_fmt(char *buf, size_t len, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}

static void riow_err(struct riow *x, const char *what, int rv)
{
  riow_fmt(x->errmsg, RAFT_ERRMSG_BUF_SIZE, "group %" PRIu64 ": %s: %s", x->gid, what,
           cairn_strerror(rv));
}

/* The raft code for a wal or file error. */
static int riow_raft_code(int rv)
{
  switch (rv) {
  case 0:
    return 0;
  case CAIRN_ENOMEM:
    return RAFT_NOMEM;
  case CAIRN_ECLOSED:
    return RAFT_CANCELED;
  case CAIRN_ECORRUPT:
    return RAFT_CORRUPT;
  default:
    return RAFT_IOERR;
  }
}

static void riow_snap_name(uint64_t term, uint64_t index, char *buf, size_t len)
{
  snprintf(buf, len, "snap-%016" PRIx64 "-%016" PRIx64, term, index);
}

int riow_init(struct riow *x, uv_loop_t *loop, struct wal *w, uint64_t gid, const char *dir,
              char *errmsg)
{
  memset(x, 0, sizeof *x);
  if (strlen(dir) >= PATH_MAX) {
    return CAIRN_EINVAL;
  }
  /* On the heap, at its length: one struct riow per replica, 10,000 of
   * them on a node (a PATH_MAX array was 4 KiB of each). */
  x->dir = strdup(dir);
  if (x->dir == NULL) {
    return CAIRN_ENOMEM;
  }
  x->loop = loop;
  x->w = w;
  x->gid = gid;
  x->errmsg = errmsg;
  return 0;
}

void riow_release(struct riow *x)
{
  free(x->dir);
  x->dir = NULL;
}

static void riow_done(struct riow *x)
{
  x->pending--;
  if (x->closing && x->pending == 0 && x->on_idle != NULL) {
    void (*cb)(struct riow *) = x->on_idle;
    x->on_idle = NULL;
    riow_release(x);
    cb(x);
  }
}

void riow_close(struct riow *x, void (*on_idle)(struct riow *x), void *data)
{
  x->closing = true;
  x->close_data = data;
  if (x->pending == 0) {
    riow_release(x);
    on_idle(x);
    return;
  }
  x->on_idle = on_idle;
}

/* ---- configuration and snapshot files ---- */

/* raft 0.15's configuration encoding (configuration.c): u8 format 1, u64
 * n, then per server u64 id, the address NUL-terminated, u8 role. raft
 * exports the encoder only. */
static int riow_conf_decode(const uint8_t *p, size_t len, struct raft_configuration *c)
{
  raft_configuration_init(c);
  if (len < 9 || p[0] != 1) {
    return RAFT_MALFORMED;
  }
  uint64_t n = le_get64(p + 1);
  size_t off = 9;
  for (uint64_t i = 0; i < n; i++) {
    if (len - off < 8) {
      return RAFT_MALFORMED;
    }
    uint64_t id = le_get64(p + off);
    off += 8;
    const uint8_t *nul = memchr(p + off, 0, len - off);
    if (nul == NULL || (size_t)(nul - p) + 1 >= len) {
      return RAFT_MALFORMED;
    }
    const char *address = (const char *)(p + off);
    off = (size_t)(nul - p) + 1;
    int role = p[off++];
    int rv = raft_configuration_add(c, id, address, role);
    if (rv != 0) {
      return rv;
    }
  }
  return 0;
}

/* Reads snapshot (term, index) of dir into a raft_snapshot (raft_malloc'd,
 * as raft frees it). Blocking. */
static int riow_snap_read(const char *dir, uint64_t term, uint64_t index,
                          struct raft_snapshot **out, char *why, size_t why_len)
{
  char name[64];
  riow_snap_name(term, index, name, sizeof name);
  uint8_t *buf;
  size_t len;
  int rv = fs_read_file(dir, name, RIOW_MAX_SNAPSHOT_BYTES, &buf, &len);
  if (rv != 0) {
    riow_fmt(why, why_len, "%s/%s: %s", dir, name, cairn_strerror(rv));
    return rv == CAIRN_ENOMEM ? RAFT_NOMEM : RAFT_IOERR;
  }
  uint64_t conf_len = len >= RIOW_SNAP_HEADER ? le_get64(buf + 40) : 0;
  if (len < RIOW_SNAP_HEADER || memcmp(buf, RIOW_MAGIC, 8) != 0 ||
      le_get32(buf + 8) != RIOW_SNAP_VERSION || le_get32(buf + 12) != crc32c(buf + 16, len - 16) ||
      le_get64(buf + 16) != index || le_get64(buf + 24) != term ||
      conf_len > len - RIOW_SNAP_HEADER) {
    riow_fmt(why, why_len, "%s/%s: damaged snapshot file", dir, name);
    free(buf);
    return RAFT_CORRUPT;
  }
  struct raft_snapshot *s = raft_calloc(1, sizeof *s);
  size_t data_len = len - RIOW_SNAP_HEADER - conf_len;
  void *data = raft_malloc(data_len ? data_len : 1);
  struct raft_buffer *bufs = raft_malloc(sizeof *bufs);
  rv = s && data && bufs ? 0 : RAFT_NOMEM;
  if (rv == 0) {
    s->index = index;
    s->term = term;
    s->configuration_index = le_get64(buf + 32);
    rv = riow_conf_decode(buf + RIOW_SNAP_HEADER, conf_len, &s->configuration);
  }
  if (rv != 0) {
    riow_fmt(why, why_len, "%s/%s: configuration: %s", dir, name, raft_strerror(rv));
    if (s) {
      raft_configuration_close(&s->configuration);
    }
    raft_free(s);
    raft_free(data);
    raft_free(bufs);
    free(buf);
    return rv;
  }
  memcpy(data, buf + RIOW_SNAP_HEADER + conf_len, data_len);
  bufs[0] = (struct raft_buffer){data, data_len};
  s->bufs = bufs;
  s->n_bufs = 1;
  free(buf);
  *out = s;
  return 0;
}

/* The bytes of a snapshot file (owned, free()). */
static uint8_t *riow_snap_encode(const struct raft_snapshot *snap, size_t *len)
{
  struct raft_buffer conf = {0};
  if (raft_configuration_encode(&snap->configuration, &conf) != 0) {
    return NULL;
  }
  size_t data_len = 0;
  for (unsigned i = 0; i < snap->n_bufs; i++) {
    data_len += snap->bufs[i].len;
  }
  *len = RIOW_SNAP_HEADER + conf.len + data_len;
  uint8_t *b = malloc(*len);
  if (b == NULL) {
    raft_free(conf.base);
    return NULL;
  }
  memcpy(b, RIOW_MAGIC, 8);
  le_put32(b + 8, RIOW_SNAP_VERSION);
  le_put64(b + 16, snap->index);
  le_put64(b + 24, snap->term);
  le_put64(b + 32, snap->configuration_index);
  le_put64(b + 40, conf.len);
  memcpy(b + RIOW_SNAP_HEADER, conf.base, conf.len);
  size_t off = RIOW_SNAP_HEADER + conf.len;
  for (unsigned i = 0; i < snap->n_bufs; i++) {
    memcpy(b + off, snap->bufs[i].base, snap->bufs[i].len);
    off += snap->bufs[i].len;
  }
  le_put32(b + 12, crc32c(b + 16, *len - 16));
  raft_free(conf.base);
  return b;
}

/* ---- load, bootstrap, recover, term and vote ---- */

/* The group's state now (all 0 but first = next = 1 for a new group). */
static void riow_meta(struct riow *x, struct wal_group_info *gi)
{
  if (wal_group_info(x->w, x->gid, gi) != 0) {
    *gi = (struct wal_group_info){.first = 1, .next = 1};
  }
}

/* The index raft's next append has: after the last entry, or after the
 * snapshot when none is held. load's start_index agrees with it. */
static uint64_t riow_next(const struct wal_group_info *gi)
{
  if (gi->next > gi->first) {
    return gi->next;
  }
  return gi->next > gi->snap_index + 1 ? gi->next : gi->snap_index + 1;
}

static int riow_load_entries(struct riow *x, const struct wal_group_info *gi,
                             struct raft_entry **out, size_t *n)
{
  *out = NULL;
  *n = 0;
  size_t count = gi->next - gi->first;
  if (count == 0) {
    return 0;
  }
  struct raft_entry *es = raft_calloc(count, sizeof *es);
  if (es == NULL) {
    return RAFT_NOMEM;
  }
  for (size_t i = 0; i < count; i++) {
    struct wal_entry e;
    int rv = wal_read(x->w, x->gid, gi->first + i, &e);
    void *base = rv == 0 ? raft_malloc(e.len ? e.len : 1) : NULL;
    if (base == NULL) {
      riow_err(x, "load", rv ? rv : CAIRN_ENOMEM);
      if (rv == 0) {
        free((void *)e.buf);
      }
      for (size_t k = 0; k < i; k++) {
        raft_free(es[k].batch);
      }
      raft_free(es);
      return rv ? riow_raft_code(rv) : RAFT_NOMEM;
    }
    if (e.len) {
      memcpy(base, e.buf, e.len);
    }
    free((void *)e.buf);
    es[i] =
        (struct raft_entry){.term = e.term, .type = e.type, .buf = {base, e.len}, .batch = base};
  }
  *out = es;
  *n = count;
  return 0;
}

int riow_load(struct riow *x, raft_term *term, raft_id *voted_for, struct raft_snapshot **snapshot,
              raft_index *start_index, struct raft_entry *entries[], size_t *n_entries)
{
  struct wal_group_info gi;
  *snapshot = NULL;
  *entries = NULL;
  *n_entries = 0;
  if (wal_group_info(x->w, x->gid, &gi) != 0) {
    *term = 0;
    *voted_for = 0;
    *start_index = 1;
    return 0;
  }
  *term = gi.term;
  *voted_for = gi.vote;
  if (gi.snap_index > 0) {
    int rv = riow_snap_read(x->dir, gi.snap_term, gi.snap_index, snapshot, x->errmsg,
                            RAFT_ERRMSG_BUF_SIZE);
    if (rv != 0) {
      return rv;
    }
  }
  *start_index = gi.next > gi.first ? gi.first : riow_next(&gi);
  int rv = riow_load_entries(x, &gi, entries, n_entries);
  if (rv != 0 && *snapshot != NULL) {
    raft_configuration_close(&(*snapshot)->configuration);
    raft_free((*snapshot)->bufs[0].base);
    raft_free((*snapshot)->bufs);
    raft_free(*snapshot);
    *snapshot = NULL;
  }
  return rv;
}

static int riow_flush(struct riow *x, int rv, const char *what)
{
  if (rv == 0) {
    rv = wal_flush_sync(x->w);
  }
  if (rv != 0) {
    riow_err(x, what, rv);
  }
  return riow_raft_code(rv);
}

/* One term or vote record in flight (group-commit mode). */
struct riow_meta_req {
  struct wal_req wr;
  struct riow *x;
};

static void riow_on_meta(struct wal_req *wr, int status)
{
  struct riow_meta_req *mr = wr->data;
  struct riow *x = mr->x;
  free(mr);
  if (status != 0) {
    riow_err(x, "term or vote record", status);
  }
  x->meta_pending--;
  x->on_meta(x, status);
  riow_done(x);
}

/* Records (term, vote): durable on return (blocking flush), or, in
 * group-commit mode, queued with its callback (x->on_meta). */
static int riow_put_meta(struct riow *x, uint64_t term, uint64_t vote, const char *what)
{
  if (x->on_meta == NULL) {
    return riow_flush(x, wal_set_meta(x->w, NULL, x->gid, term, vote, NULL), what);
  }
  if (x->closing) {
    return RAFT_CANCELED;
  }
  struct riow_meta_req *mr = malloc(sizeof *mr);
  if (mr == NULL) {
    return RAFT_NOMEM;
  }
  mr->x = x;
  mr->wr.data = mr;
  int rv = wal_set_meta(x->w, &mr->wr, x->gid, term, vote, riow_on_meta);
  if (rv != 0) {
    free(mr);
    riow_err(x, what, rv);
    return riow_raft_code(rv);
  }
  x->pending++;
  x->meta_pending++;
  return 0;
}

void riow_set_meta_async(struct riow *x, void (*on_meta)(struct riow *x, int status))
{
  x->on_meta = on_meta;
}

int riow_set_term(struct riow *x, raft_term term)
{
  return riow_put_meta(x, term, 0, "set_term");
}

int riow_set_vote(struct riow *x, raft_id server_id)
{
  struct wal_group_info gi;
  riow_meta(x, &gi); /* the term just set, durable or not */
  return riow_put_meta(x, gi.term, server_id, "set_vote");
}

/* Appends a configuration entry at the group's next index in term. */
static int riow_append_conf(struct riow *x, const struct raft_configuration *conf, uint64_t index,
                            uint64_t term)
{
  struct raft_buffer buf;
  int rv = raft_configuration_encode(conf, &buf);
  if (rv != 0) {
    return rv;
  }
  struct wal_entry e = {term, RAFT_CHANGE, buf.base, (uint32_t)buf.len};
  rv = wal_append(x->w, NULL, x->gid, index, &e, 1, NULL);
  raft_free(buf.base);
  return rv;
}

int riow_bootstrap(struct riow *x, const struct raft_configuration *conf)
{
  struct wal_group_info gi;
  riow_meta(x, &gi);
  if (gi.term != 0 || gi.next > gi.first || gi.snap_index != 0) {
    return RAFT_CANTBOOTSTRAP;
  }
  int rv = riow_append_conf(x, conf, 1, 1);
  if (rv == 0) {
    rv = wal_set_meta(x->w, NULL, x->gid, 1, 0, NULL);
  }
  return riow_flush(x, rv, "bootstrap");
}

int riow_recover(struct riow *x, const struct raft_configuration *conf)
{
  struct wal_group_info gi;
  riow_meta(x, &gi);
  return riow_flush(x, riow_append_conf(x, conf, riow_next(&gi), gi.term), "recover");
}

/* ---- append and truncate ---- */

struct riow_append {
  struct wal_req wr;
  struct raft_io_append *req;
  raft_io_append_cb cb;
  struct riow *x;
};

static void riow_on_append(struct wal_req *wr, int status)
{
  struct riow_append *a = wr->data;
  struct riow *x = a->x;
  if (status != 0) {
    riow_err(x, "append", status);
  }
  a->cb(a->req, riow_raft_code(status));
  free(a);
  riow_done(x);
}

int riow_append(struct riow *x, struct raft_io_append *req, const struct raft_entry entries[],
                unsigned n, raft_io_append_cb cb)
{
  struct wal_group_info gi;
  riow_meta(x, &gi);
  uint64_t index = riow_next(&gi);
  struct wal_entry stack[16];
  struct wal_entry *es = n <= 16 ? stack : malloc(n * sizeof *es);
  struct riow_append *a = malloc(sizeof *a);
  if (es == NULL || a == NULL || x->closing) {
    if (es != stack) {
      free(es);
    }
    free(a);
    return x->closing ? RAFT_CANCELED : RAFT_NOMEM;
  }
  for (unsigned i = 0; i < n; i++) {
    es[i] = (struct wal_entry){entries[i].term, (uint8_t)entries[i].type, entries[i].buf.base,
                               (uint32_t)entries[i].buf.len};
  }
  *a = (struct riow_append){.req = req, .cb = cb, .x = x};
  a->wr.data = a;
  int rv = wal_append(x->w, &a->wr, x->gid, index, es, n, riow_on_append);
  if (es != stack) {
    free(es);
  }
  if (rv != 0) {
    free(a);
    riow_err(x, "append", rv);
    return riow_raft_code(rv);
  }
  x->pending++;
  return 0;
}

int riow_truncate(struct riow *x, raft_index index)
{
  int rv = wal_truncate(x->w, NULL, x->gid, index, NULL);
  if (rv == CAIRN_ENOTFOUND) {
    return 0; /* nothing held */
  }
  if (rv != 0) {
    riow_err(x, "truncate", rv);
  }
  return riow_raft_code(rv);
}

/* ---- snapshots ---- */

struct riow_snap {
  uv_work_t work;
  struct wal_req wr;
  struct riow *x;
  char dir[PATH_MAX];
  char keep[64], name[64]; /* the file the log names now; the new one */
  uint8_t *buf;            /* put: the file's bytes */
  size_t len;
  uint64_t index, term, first;
  struct raft_io_snapshot_put *put;
  raft_io_snapshot_put_cb put_cb;
  struct raft_io_snapshot_get *get;
  raft_io_snapshot_get_cb get_cb;
  struct raft_snapshot *got;
  int status;
  char why[256];
};

/* Removes snapshot files other than keep and name. */
static void riow_snap_prune(const struct riow_snap *s)
{
  DIR *d = opendir(s->dir);
  if (d == NULL) {
    return;
  }
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strncmp(de->d_name, "snap-", 5) == 0 && strcmp(de->d_name, s->keep) != 0 &&
        strcmp(de->d_name, s->name) != 0) {
      char path[PATH_MAX + 300];
      riow_fmt(path, sizeof path, "%s/%s", s->dir, de->d_name);
      (void)unlink(path);
    }
  }
  closedir(d);
}

static void riow_put_run(uv_work_t *work)
{
  struct riow_snap *s = work->data;
  riow_snap_prune(s);
  s->status = fs_replace_file(s->dir, s->name, s->buf, s->len);
}

static void riow_put_finish(struct riow_snap *s, int status)
{
  struct riow *x = s->x;
  if (status != 0) {
    riow_err(x, "snapshot_put", status);
  }
  s->put_cb(s->put, riow_raft_code(status));
  free(s->buf);
  free(s);
  riow_done(x);
}

static void riow_on_put_logged(struct wal_req *wr, int status)
{
  riow_put_finish(wr->data, status);
}

static void riow_on_put_written(uv_work_t *work, int status)
{
  struct riow_snap *s = work->data;
  int rv = status ? status : s->status;
  /* Closing or not, a written snapshot is recorded: raft_uv's close also
   * waits for its snapshot write. */
  if (rv == 0) {
    s->wr.data = s;
    rv = s->first == 0
             ? wal_reset(s->x->w, &s->wr, s->x->gid, s->index, s->term, riow_on_put_logged)
             : wal_snapshot(s->x->w, &s->wr, s->x->gid, s->index, s->term, s->first,
                            riow_on_put_logged);
    if (rv == 0) {
      return;
    }
  }
  riow_put_finish(s, rv);
}

static struct riow_snap *riow_snap_new(struct riow *x)
{
  struct riow_snap *s = calloc(1, sizeof *s);
  if (s == NULL) {
    return NULL;
  }
  s->x = x;
  s->work.data = s;
  snprintf(s->dir, sizeof s->dir, "%s", x->dir); /* riow_init bounded it */
  struct wal_group_info gi;
  riow_meta(x, &gi);
  riow_snap_name(gi.snap_term, gi.snap_index, s->keep, sizeof s->keep);
  s->index = gi.snap_index;
  s->term = gi.snap_term;
  return s;
}

int riow_snapshot_put(struct riow *x, unsigned trailing, struct raft_io_snapshot_put *req,
                      const struct raft_snapshot *snapshot, raft_io_snapshot_put_cb cb)
{
  if (x->closing) {
    return RAFT_CANCELED;
  }
  struct riow_snap *s = riow_snap_new(x);
  if (s == NULL || (s->buf = riow_snap_encode(snapshot, &s->len)) == NULL) {
    free(s);
    return RAFT_NOMEM;
  }
  uint64_t index = snapshot->index;
  /* trailing 0 (a snapshot installed from the leader; first 0 marks it):
   * the whole log goes, the next append follows the snapshot. */
  uint64_t first = trailing == 0 ? 0 : index > trailing ? index - trailing + 1 : 1;
  s->index = index;
  s->term = snapshot->term;
  s->first = first;
  s->put = req;
  s->put_cb = cb;
  riow_snap_name(snapshot->term, index, s->name, sizeof s->name);
  int rv = uv_queue_work(x->loop, &s->work, riow_put_run, riow_on_put_written);
  if (rv != 0) {
    free(s->buf);
    free(s);
    return RAFT_IOERR;
  }
  x->pending++;
  return 0;
}

static void riow_get_run(uv_work_t *work)
{
  struct riow_snap *s = work->data;
  s->status = riow_snap_read(s->dir, s->term, s->index, &s->got, s->why, sizeof s->why);
}

static void riow_on_got(uv_work_t *work, int status)
{
  struct riow_snap *s = work->data;
  struct riow *x = s->x;
  int rv = status ? RAFT_IOERR : s->status;
  if (rv != 0) {
    riow_fmt(x->errmsg, RAFT_ERRMSG_BUF_SIZE, "group %" PRIu64 ": snapshot_get: %s", x->gid,
             s->why);
  }
  s->get_cb(s->get, rv == 0 ? s->got : NULL, rv);
  free(s);
  riow_done(x);
}

int riow_snapshot_get(struct riow *x, struct raft_io_snapshot_get *req, raft_io_snapshot_get_cb cb)
{
  if (x->closing) {
    return RAFT_CANCELED;
  }
  struct riow_snap *s = riow_snap_new(x);
  if (s == NULL) {
    return RAFT_NOMEM;
  }
  if (s->index == 0) {
    free(s);
    return RAFT_NOTFOUND;
  }
  s->get = req;
  s->get_cb = cb;
  if (uv_queue_work(x->loop, &s->work, riow_get_run, riow_on_got) != 0) {
    free(s);
    return RAFT_IOERR;
  }
  x->pending++;
  return 0;
}
