/* wal_clean.c - copy-forward cleaning of the node-wide log: the oldest
 * segment, pinned by a few live entries (idle groups' last entries, which
 * Raft keeps behind its snapshots), is read a window at a time on the
 * thread pool, and each entry it holds that is still live at that place is
 * appended again, unchanged, as a MOVE record at the head; once the copies
 * are durable the segment holds no reference and wal_collect drops it
 * (wal.h, "Cleaning"; docs/replication.md, "Cleaning the node-wide log").
 *
 * States of the cleaner (struct wal_clean):
 *   IDLE    -> SCANNING  wal_clean_consider: the oldest segment is quiet
 *                        and cleaning it pays (wal_clean_pays)
 *   SCANNING -> READING  wal_clean_consider: a window is read
 *                        (wal_clean_read_start)
 *   READING -> SCANNING  wal_clean_on_read: the window's live entries are
 *                        copied; more of the segment is left
 *   READING -> IDLE      wal_clean_on_read: the segment's end was reached
 *                        (or a read failed: cleaning stops for good)
 * A window is started only while less than a window of bytes waits for
 * the next write job, so the copies go out at most a window per job and
 * never ahead of what the produce path queues.
 *
 * Why a copy is safe against a truncation, snapshot or removal that comes
 * while its window is read: the copy is encoded on the loop, at one point
 * of the log's order, only if the index still places that entry at the
 * very record read (segment and offset); a record that drops it later
 * follows the copy in the log, so a replay drops the copy too. */
#include "cluster/wal_internal.h"

#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "format/endian.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum wal_clean_state { WAL_CLEAN_IDLE, WAL_CLEAN_SCANNING, WAL_CLEAN_READING };

struct wal_clean {
  uv_timer_t timer; /* looks again once the oldest segment has been quiet */
  bool timer_on;
  bool disabled; /* a read failed or found damage: no more cleaning */
  enum wal_clean_state state;
  uint64_t seq;  /* the segment being cleaned (SCANNING, READING) */
  uint64_t pos;  /* its next record */
  uint64_t want; /* a record larger than the window: read it whole */
  /* the read in flight: the worker touches only these */
  uv_work_t work;
  int fd;
  uint64_t rd_off;
  size_t rd_len, got;
  uint8_t *buf;
  int status;
};

static void wal_clean_set_state(struct wal_clean *c, enum wal_clean_state to)
{
  static const char *const names[] = {"idle", "scanning", "reading"};
  log_debug("wal", "cleaner: %s -> %s (segment %" PRIu64 ")", names[c->state], names[to], c->seq);
  c->state = to;
}

static void wal_clean_on_timer(uv_timer_t *t)
{
  struct wal *w = t->data;
  w->clean->timer_on = false;
  if (w->fatal == 0 && !w->closing) {
    wal_collect(w);
    wal_kick(w);
  }
}

int wal_clean_init(struct wal *w)
{
  struct wal_clean *c = calloc(1, sizeof *c);
  if (c == NULL) {
    return CAIRN_ENOMEM;
  }
  int rv = uv_timer_init(w->loop, &c->timer);
  if (rv != 0) {
    free(c);
    return rv;
  }
  c->timer.data = w;
  uv_unref((uv_handle_t *)&c->timer); /* never keeps a loop alive on its own */
  c->fd = -1;
  w->clean = c;
  w->handles_open++;
  return 0;
}

bool wal_clean_busy(const struct wal *w)
{
  return w->clean != NULL && w->clean->state == WAL_CLEAN_READING;
}

bool wal_clean_reading(const struct wal *w, uint64_t seq)
{
  return wal_clean_busy(w) && w->clean->seq == seq;
}

void wal_clean_reset(struct wal *w)
{
  if (w->clean != NULL && w->clean->state != WAL_CLEAN_READING) {
    wal_clean_set_state(w->clean, WAL_CLEAN_IDLE);
  }
}

void wal_clean_close(struct wal *w, uv_close_cb cb)
{
  if (w->clean != NULL) {
    uv_close((uv_handle_t *)&w->clean->timer, cb);
  }
}

/* Bytes waiting for the next write job. */
static uint64_t wal_clean_pending(const struct wal *w)
{
  uint64_t n = 0;
  for (size_t i = 0; i < w->npend; i++) {
    n += w->pend[i].len;
  }
  return n;
}

/* Milliseconds until WAL_CLEAN_QUIET_MS will have passed since t. */
static uint64_t wal_clean_wait(uint64_t now, uint64_t t)
{
  if (now < t) {
    return WAL_CLEAN_QUIET_MS;
  }
  return now - t >= WAL_CLEAN_QUIET_MS ? 0 : WAL_CLEAN_QUIET_MS - (now - t);
}

/* Whether copying s's live entries pays while the node appends: s is
 * sparse (live bytes at most 1/8 of it: the idle tails this is for), or
 * the log is over four times its live bytes (dense old segments are moved
 * on to reach the sparse ones behind them). Copies then cost the produce
 * path at most 1/7, resp. 1/3, of the bytes they free. */
static bool wal_clean_pays_busy(const struct wal_seg *s, uint64_t total, uint64_t live)
{
  return s->live_bytes * 8 <= s->size || total > live * 4;
}

/* The bytes in every segment and the live bytes among them. */
static void wal_clean_totals(const struct wal *w, uint64_t *total, uint64_t *live)
{
  *total = *live = 0;
  for (size_t i = 0; i < w->nsegs; i++) {
    *total += w->segs[i].size;
    *live += w->segs[i].live_bytes;
  }
}

/* The dead bytes a quiet node's log may keep beyond its live ones: half
 * the live bytes (so a pass that moves them all frees at least half as
 * much), at least a window, at most a segment. */
static uint64_t wal_clean_slack(const struct wal *w, uint64_t live)
{
  uint64_t t = live / 2 > WAL_CLEAN_WINDOW ? live / 2 : WAL_CLEAN_WINDOW;
  return t < w->segment_bytes ? t : w->segment_bytes;
}

static void wal_clean_arm(struct wal *w, uint64_t wait)
{
  struct wal_clean *c = w->clean;
  if (!c->timer_on && uv_timer_start(&c->timer, wal_clean_on_timer, wait ? wait : 1, 0) == 0) {
    c->timer_on = true;
  }
}

/* Whether cleaning the oldest segment s pays now. Always only once no
 * reference to s went for WAL_CLEAN_QUIET_MS (a busy group's entries die
 * on their own at its next snapshot). Then, while the node appends, when
 * wal_clean_pays_busy says so; on a node with no append for as long, also
 * when s's live bytes are at most half of it (moving them frees at least
 * as much) or the log's dead bytes pass wal_clean_slack: there is no
 * produce path to slow and no new garbage, so that ends (a pass moves the
 * live bytes once; the head, when it is all that is left, is sealed and
 * cleaned by the same measure, wal_clean_head_pays).
 * When only the quiet times are missing, the timer looks again. */
static bool wal_clean_pays(struct wal *w, const struct wal_seg *s)
{
  if (w->clean_mode == WAL_CLEAN_EAGER) {
    return true;
  }
  uint64_t total, live;
  wal_clean_totals(w, &total, &live);
  bool pays_busy = wal_clean_pays_busy(s, total, live);
  bool pays_idle =
      pays_busy || s->live_bytes * 2 <= s->size || total > live + wal_clean_slack(w, live);
  if (!pays_idle) {
    return false;
  }
  uint64_t now = uv_now(w->loop);
  uint64_t seg_wait = wal_clean_wait(now, s->dropped_ms);
  uint64_t node_wait = wal_clean_wait(now, w->append_ms);
  if (seg_wait == 0 && (pays_busy || node_wait == 0)) {
    return true;
  }
  wal_clean_arm(w, pays_busy || seg_wait > node_wait ? seg_wait : node_wait);
  return false;
}

/* Whether the log's only segment (the head) is worth sealing and
 * cleaning: it is then the whole log, and after a node's load it holds the
 * dead entries of its last snapshots. On a node with no append for
 * WAL_CLEAN_QUIET_MS and no reference dropped for as long, when its dead
 * bytes pass wal_clean_slack (eager: whenever anything in it is dead;
 * moving only live records leaves nothing dead, so that ends). */
static bool wal_clean_head_pays(struct wal *w, const struct wal_seg *s)
{
  uint64_t dead = s->size - WAL_SEG_HEADER - s->live_bytes;
  if (w->clean_mode == WAL_CLEAN_EAGER) {
    return s->size > WAL_SEG_HEADER + s->live_bytes;
  }
  if (dead <= wal_clean_slack(w, s->live_bytes)) {
    return false;
  }
  uint64_t now = uv_now(w->loop);
  uint64_t seg_wait = wal_clean_wait(now, s->dropped_ms);
  uint64_t node_wait = wal_clean_wait(now, w->append_ms);
  if (seg_wait == 0 && node_wait == 0) {
    return true;
  }
  wal_clean_arm(w, seg_wait > node_wait ? seg_wait : node_wait);
  return false;
}

static void wal_clean_read_run(uv_work_t *work)
{
  struct wal_clean *c = work->data;
  c->status = fs_pread_full(c->fd, c->buf, c->rd_len, (off_t)c->rd_off, &c->got);
}

static void wal_clean_on_read(uv_work_t *work, int status);

static void wal_clean_read_start(struct wal *w, const struct wal_seg *s, size_t window)
{
  struct wal_clean *c = w->clean;
  uint64_t left = s->size - c->pos;
  size_t len = c->want > window ? (size_t)c->want : window;
  c->rd_len = left < len ? (size_t)left : len;
  c->rd_off = c->pos;
  c->fd = s->fd;
  c->got = 0;
  c->status = 0;
  c->buf = malloc(c->rd_len);
  if (c->buf == NULL) {
    return; /* tried again after the next job */
  }
  c->work.data = c;
  wal_clean_set_state(c, WAL_CLEAN_READING);
  if (uv_queue_work(w->loop, &c->work, wal_clean_read_run, wal_clean_on_read) != 0) {
    free(c->buf);
    c->buf = NULL;
    wal_clean_set_state(c, WAL_CLEAN_SCANNING);
  }
}

/* Stops cleaning for good (the log goes on as before it): the entries stay
 * where they are; a read of one reports the damage as it would have. */
static void wal_clean_disable(struct wal *w, const char *why)
{
  char name[32];
  wal_seg_name(w->clean->seq, name, sizeof name);
  log_error("wal", "%s/%s: cleaning stops: %s", w->dir, name, why);
  w->clean->disabled = true;
  wal_clean_set_state(w->clean, WAL_CLEAN_IDLE);
}

void wal_clean_consider(struct wal *w)
{
  struct wal_clean *c = w->clean;
  if (c == NULL || c->disabled || w->clean_mode == WAL_CLEAN_OFF || w->fatal != 0 || w->closing ||
      c->state == WAL_CLEAN_READING || w->nsegs == 0) {
    return;
  }
  const struct wal_seg *s = &w->segs[0];
  if (s->fd < 0 || s->written < s->size || s->entry_refs == 0) {
    return; /* its last job still runs; or nothing to move */
  }
  if (c->state == WAL_CLEAN_SCANNING && c->seq != s->seq) {
    wal_clean_set_state(c, WAL_CLEAN_IDLE);
  }
  if (w->nsegs == 1 && c->state == WAL_CLEAN_IDLE) {
    if (!wal_clean_head_pays(w, s)) {
      return;
    }
    if (s->version == WAL_FORMAT_VERSION && !s->sealed) {
      /* Sealed: what comes next, copies first, goes to a new segment. It
       * is read once its END record is written (on ENOMEM: tried again
       * after the next job). */
      (void)wal_seal(w, &w->segs[0]);
      return;
    }
  }
  uint64_t node_wait = wal_clean_wait(uv_now(w->loop), w->append_ms);
  bool busy = w->clean_mode != WAL_CLEAN_EAGER && node_wait > 0;
  if (c->state == WAL_CLEAN_IDLE) {
    if (!wal_clean_pays(w, s)) {
      return;
    }
    c->seq = s->seq;
    c->pos = WAL_SEG_HEADER;
    c->want = 0;
    wal_clean_set_state(c, WAL_CLEAN_SCANNING);
  } else if (busy) {
    uint64_t total, live;
    wal_clean_totals(w, &total, &live);
    if (!wal_clean_pays_busy(s, total, live)) {
      wal_clean_arm(w, node_wait); /* paused while the node appends */
      return;
    }
  }
  /* While the node appends, a window goes only into an empty queue, and a
   * small one: the copies share a write job with at most one loop turn's
   * acknowledgements. Otherwise at most about a window waits per job. */
  uint64_t pending = wal_clean_pending(w);
  if (busy ? pending > 0 : pending > WAL_CLEAN_WINDOW) {
    return; /* the next job's end looks again */
  }
  if (c->pos >= s->size) {
    wal_clean_disable(w, "live entries left after the segment was read through");
    return;
  }
  wal_clean_read_start(w, s, busy ? WAL_CLEAN_WINDOW_BUSY : WAL_CLEAN_WINDOW);
}

/* The loc of entry index of gid if the index holds it at (seq, off). */
static const struct wal_loc *wal_clean_live(const struct wal *w, uint64_t gid, uint64_t index,
                                            uint64_t seq, uint64_t off)
{
  const struct wal_group *g = wal_group_find(w, gid);
  if (g == NULL || index < g->first || index - g->first >= g->n) {
    return NULL;
  }
  const struct wal_loc *l = &g->locs[g->head + (index - g->first)];
  return l->seq == seq && l->off == off ? l : NULL;
}

/* Copies the live entry whose record starts at buf[p] (segment offset at)
 * to the head. Returns 0, CAIRN_ECORRUPT (the bytes do not hold what the
 * index says) or the error of the append. */
static int wal_clean_copy(struct wal *w, const uint8_t *buf, size_t len, size_t p,
                          const struct wal_loc *l)
{
  struct wal_rec r;
  char why[128];
  const struct wal_seg *s = wal_seg_find(w, l->seq);
  if (s == NULL || !wal_rec_decode(s, buf, len, p, &r, why, sizeof why) || r.len != l->len ||
      r.term != l->term || r.etype != l->type) {
    return CAIRN_ECORRUPT;
  }
  uint64_t seq, off;
  int rv = wal_emit(w, WAL_REC_MOVE, r.etype, r.gid, r.index, r.term, r.payload, r.len, &seq, &off);
  if (rv == 0) {
    rv = wal_apply_move(w, r.gid, r.index, r.term, r.etype, seq, off, r.len, w->lsn);
  }
  if (rv == 0) {
    w->st.clean_moved++;
    w->st.clean_moved_bytes += WAL_REC_HEADER + (uint64_t)r.len;
  }
  return rv;
}

/* Walks the window: copies every live entry record in it. Returns the
 * bytes of whole records walked, or -1 with *err set. */
static int64_t wal_clean_walk(struct wal *w, int *err)
{
  struct wal_clean *c = w->clean;
  size_t p = 0;
  while (c->got - p >= WAL_REC_HEADER) {
    const uint8_t *h = c->buf + p;
    uint64_t rec = WAL_REC_HEADER + (uint64_t)le_get32(h + 4);
    if (rec - WAL_REC_HEADER > WAL_MAX_PAYLOAD) {
      *err = CAIRN_ECORRUPT;
      return -1;
    }
    if (rec > c->got - p) {
      c->want = p == 0 ? rec : 0;
      break;
    }
    if (h[8] == WAL_REC_ENTRY || h[8] == WAL_REC_MOVE) {
      const struct wal_loc *l =
          wal_clean_live(w, le_get64(h + 16), le_get64(h + 24), c->seq, c->rd_off + p);
      if (l != NULL) {
        *err = wal_clean_copy(w, c->buf, c->got, p, l);
        if (*err != 0) {
          return -1;
        }
      }
    }
    p += (size_t)rec;
  }
  return (int64_t)p;
}

static void wal_clean_on_read(uv_work_t *work, int status)
{
  struct wal_clean *c = work->data;
  struct wal *w = c->timer.data;
  wal_clean_set_state(c, WAL_CLEAN_SCANNING);
  uint8_t *buf = c->buf;
  if (w->closing || w->fatal != 0) {
    free(buf);
    c->buf = NULL;
    wal_clean_set_state(c, WAL_CLEAN_IDLE);
    wal_close_if_drained(w);
    return;
  }
  int err = status != 0 ? status : c->status;
  if (err == 0 && c->got != c->rd_len) {
    err = CAIRN_ECORRUPT; /* shorter than the index says */
  }
  int64_t walked = err == 0 ? wal_clean_walk(w, &err) : -1;
  free(buf);
  c->buf = NULL;
  w->st.clean_read_bytes += c->got;
  if (walked < 0) {
    if (err == CAIRN_ENOMEM && w->fatal == 0) {
      wal_latch(w, err, "cleaning: appending a moved entry: out of memory");
    }
    if (w->fatal == 0) {
      char why[96];
      snprintf(why, sizeof why, "reading at %" PRIu64 ": %s", c->rd_off, cairn_strerror(err));
      wal_clean_disable(w, why);
    }
    wal_kick(w);
    return;
  }
  c->pos += (uint64_t)walked;
  const struct wal_seg *s = wal_seg_find(w, c->seq);
  if (s != NULL && walked == 0 && c->rd_off + c->got >= s->size) {
    wal_clean_disable(w, "a record runs past the segment's end");
  } else if (s != NULL && c->pos >= s->size) {
    w->st.segments_cleaned++;
    wal_clean_set_state(c, WAL_CLEAN_IDLE);
    if (s->entry_refs > 0) {
      wal_clean_disable(w, "live entries left after the segment was read through");
    }
  }
  wal_collect(w); /* the next window, or the segment goes once the copies are durable */
  wal_kick(w);    /* the copies, and any unlink wal_collect queued */
}
