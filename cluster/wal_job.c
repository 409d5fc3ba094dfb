/* wal_job.c - the node-wide log's write path off the loop: one thread-pool
 * job per loop turn writes and fdatasyncs everything pending (wal.h,
 * "Write path"), its end fires the callbacks, drops unneeded segments or
 * latches the log fatal. */
#include "cluster/wal_internal.h"

#include "common/err.h"
#include "common/fault.h"
#include "common/fsutil.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the job: one write and one fdatasync per segment touched ---- */

static void wal_job_fail(struct wal_job *job, int err, const char *what, uint64_t seq, uint64_t off)
{
  char name[32];
  wal_seg_name(seq, name, sizeof name);
  job->status = err;
  wal_fmt(job->errmsg, sizeof job->errmsg, "%s/%s: %s at %" PRIu64 ": %s", job->dir, name, what,
          off, cairn_strerror(err));
}

static int wal_job_sync_dir(struct wal_job *job)
{
  int rv = fault_check(FAULT_WAL_SYNC);
  if (rv == 0) {
    rv = fs_fsync_dir(job->dir);
  }
  if (rv != 0) {
    job->status = rv;
    wal_fmt(job->errmsg, sizeof job->errmsg, "%s: directory fsync: %s", job->dir,
            cairn_strerror(rv));
  }
  return rv;
}

/* Opens the file a chunk creates: a spare file to overwrite (it takes its
 * segment's name before it is written, wal_job_adopt), or a new one. */
static int wal_job_open(struct wal_job *job, struct wal_chunk *c)
{
  char name[32], path[PATH_MAX];
  if (c->spare != 0) {
    wal_spare_name(c->spare, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", job->dir, name);
    c->fd = open(path, O_RDWR | O_CLOEXEC);
    if (c->fd >= 0) {
      return 0;
    }
    log_warn("wal", "%s: %s: creating a new segment instead", path, strerror(errno));
    c->spare = 0;
  }
  wal_seg_name(c->seq, name, sizeof name);
  snprintf(path, sizeof path, "%s/%s", job->dir, name);
  c->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (c->fd < 0) {
    wal_job_fail(job, -errno, "create", c->seq, 0);
    return job->status;
  }
  return 0;
}

/* Renames the spare a chunk overwrites to its segment's name, before any
 * byte of the segment is written to it. So no file under a spare's name
 * ever holds records of a segment to come: a job that wrote them and
 * died before a rename would have left, in a spare, records that check
 * under the sequence the next attempt gives the same segment, and a
 * replay could take them after that attempt's records. Until its header
 * is written the file shows its previous life's header, whose sequence
 * is not the name's: replay removes it as a torn new segment. */
static int wal_job_adopt(struct wal_job *job, const struct wal_chunk *c)
{
  char from[PATH_MAX], to[PATH_MAX], name[32];
  wal_spare_name(c->spare, name, sizeof name);
  snprintf(from, sizeof from, "%s/%s", job->dir, name);
  wal_seg_name(c->seq, name, sizeof name);
  snprintf(to, sizeof to, "%s/%s", job->dir, name);
  if (rename(from, to) != 0) {
    wal_job_fail(job, -errno, "rename of a spare", c->seq, 0);
    return job->status;
  }
  return 0;
}

static int wal_job_chunk(struct wal_job *job, struct wal_chunk *c)
{
  if (c->create && wal_job_open(job, c) != 0) {
    return job->status;
  }
  bool adopt = c->create && c->spare != 0;
  if (adopt && (wal_job_adopt(job, c) != 0 || wal_job_sync_dir(job) != 0)) {
    return job->status;
  }
  int rv = fault_check(FAULT_WAL_WRITE);
  if (rv == 0) {
    rv = fs_pwrite_all(c->fd, c->buf, c->len, (off_t)c->off);
  }
  if (rv != 0) {
    wal_job_fail(job, rv, "pwrite", c->seq, c->off);
    return rv;
  }
  rv = fault_check(FAULT_WAL_SYNC);
  if (rv == 0 && fdatasync(c->fd) != 0) {
    rv = -errno;
  }
  if (rv != 0) {
    wal_job_fail(job, rv, "fdatasync", c->seq, c->off + c->len);
    return rv;
  }
  /* A new file's directory entry must be durable before a later segment
   * is written: replay refuses a gap in the sequence. */
  return c->create && !adopt ? wal_job_sync_dir(job) : 0;
}

/* Removes a segment file no group needs, or keeps it as a spare. */
static void wal_job_drop(struct wal_drop *d, const char *dir)
{
  if (d->spare != 0) {
    char name[32], to[PATH_MAX];
    wal_spare_name(d->spare, name, sizeof name);
    snprintf(to, sizeof to, "%s/%s", dir, name);
    if (rename(d->path, to) == 0) {
      d->kept = true;
      return;
    }
    log_warn("wal", "rename %s to %s: %s", d->path, to, strerror(errno));
  }
  if (unlink(d->path) != 0 && errno != ENOENT) {
    log_warn("wal", "unlink %s: %s", d->path, strerror(errno));
  }
}

static void wal_job_run(uv_work_t *work)
{
  struct wal_job *job = work->data;
  for (size_t i = 0; i < job->ndrops; i++) {
    wal_job_drop(&job->drops[i], job->dir);
  }
  if (job->ndrops > 0 && wal_job_sync_dir(job) != 0) {
    return;
  }
  for (size_t i = 0; i < job->nchunks; i++) {
    if (wal_job_chunk(job, &job->chunks[i]) != 0) {
      return;
    }
  }
}

static void wal_job_run_signal(uv_work_t *work)
{
  struct wal_job *job = work->data;
  job->ran_ns = uv_hrtime();
  wal_job_run(work);
  job->io_done_ns = uv_hrtime();
  pthread_mutex_lock(&job->mu);
  job->ran = true;
  pthread_cond_signal(&job->cv);
  pthread_mutex_unlock(&job->mu);
}

static void wal_job_free(struct wal_job *job)
{
  for (size_t i = 0; i < job->nchunks; i++) {
    free(job->chunks[i].buf);
  }
  for (size_t i = 0; i < job->ndrops; i++) {
    free(job->drops[i].path);
  }
  free(job->chunks);
  free(job->drops);
  pthread_mutex_destroy(&job->mu);
  pthread_cond_destroy(&job->cv);
  free(job);
}

void wal_fire(struct wal_req *r, int status)
{
  while (r != NULL) {
    struct wal_req *next = r->next;
    r->cb(r, status);
    r = next;
  }
}

/* Takes the pending requests off the log (before firing them, so a
 * callback that appends queues onto an empty list). */
struct wal_req *wal_take_reqs(struct wal *w)
{
  struct wal_req *r = w->req_head;
  w->req_head = w->req_tail = NULL;
  return r;
}

void wal_latch(struct wal *w, int err, const char *msg)
{
  if (w->fatal == 0) {
    w->fatal = err;
    wal_fmt(w->errmsg, sizeof w->errmsg, "%s", msg);
    log_error("wal", "log is fatal: %s", msg);
  }
}

static void wal_phase_note(struct wal_phase_hist *h, uint64_t from_ns, uint64_t to_ns)
{
  uint64_t us = to_ns > from_ns ? (to_ns - from_ns) / 1000 : 0;
  unsigned k = 0;
  while (k + 1 < WAL_HIST_BUCKETS && ((uint64_t)1 << k) < us) {
    k++;
  }
  h->buckets[k]++;
  h->count++;
  h->sum_us += us;
}

/* A job's phases (wal.h, struct wal_phase_hist), for a job that ran. */
static void wal_job_timed(struct wal *w, const struct wal_job *job)
{
  if (job->ran_ns == 0 || job->io_done_ns == 0) {
    return; /* cancelled, or run by wal_flush_sync's wait */
  }
  wal_phase_note(&w->st.phase[WAL_PHASE_QUEUE], job->queued_ns, job->ran_ns);
  wal_phase_note(&w->st.phase[WAL_PHASE_IO], job->ran_ns, job->io_done_ns);
  wal_phase_note(&w->st.phase[WAL_PHASE_CALLBACK], job->io_done_ns, uv_hrtime());
}

/* The files the job kept as spares are ready for new segments. */
static void wal_job_spares(struct wal *w, const struct wal_job *job)
{
  for (size_t i = 0; i < job->ndrops; i++) {
    const struct wal_drop *d = &job->drops[i];
    if (d->spare == 0) {
      continue;
    }
    w->spares_coming--;
    if (d->kept && w->nspares < WAL_SPARES_MAX) {
      w->spares[w->nspares++] = (struct wal_spare){.id = d->spare, .bytes = d->bytes};
    }
  }
}

static void wal_job_done(uv_work_t *work, int status)
{
  struct wal_job *job = work->data;
  struct wal *w = job->w;
  w->job = NULL;
  if (status != 0 && job->status == 0) {
    job->status = status;
    wal_fmt(job->errmsg, sizeof job->errmsg, "%s: write job: %s", w->dir, cairn_strerror(status));
  }
  for (size_t i = 0; i < job->nchunks; i++) {
    struct wal_chunk *c = &job->chunks[i];
    struct wal_seg *s = wal_seg_find(w, c->seq);
    if (s != NULL && c->create && c->fd >= 0) {
      s->fd = c->fd;
    }
    if (s != NULL && job->status == 0 && c->off + c->len > s->written) {
      s->written = c->off + c->len; /* wal_flush_sync may have gone further */
    }
    if (s != NULL && c->create && c->spare == 0) {
      s->file_bytes = 0; /* a new file after all (the spare could not be opened) */
    }
    if (s != NULL && job->status == 0 && s->written > s->file_bytes) {
      s->file_bytes = s->written;
    }
  }
  wal_job_spares(w, job);
  struct wal_req *failed = NULL;
  if (job->status == 0) {
    if (job->end_lsn > w->durable_lsn) {
      w->durable_lsn = job->end_lsn;
    }
    w->st.jobs++;
    wal_job_timed(w, job);
  } else {
    wal_latch(w, job->status, job->errmsg);
    failed = wal_take_reqs(w);
  }
  struct wal_req *done = job->req_head;
  int job_status = job->status;
  bool closing = w->closing;
  wal_job_free(job);
  /* A callback may close the log: wal_close then leaves the rest to us. */
  w->in_done = true;
  wal_fire(done, job_status);
  wal_fire(failed, job_status);
  w->in_done = false;
  if (w->closing || closing) {
    w->closing = true;
    wal_close_if_drained(w); /* else the cleaner's read ends it */
    return;
  }
  if (w->fatal == 0) {
    wal_collect(w);
    wal_kick(w);
  }
}

/* Hands everything pending to one job. */
static void wal_start_job(struct wal *w)
{
  struct wal_job *job = calloc(1, sizeof *job);
  if (job == NULL) {
    return; /* retried at the next loop turn */
  }
  job->w = w;
  job->dir = w->dir;
  job->chunks = w->pend;
  job->nchunks = w->npend;
  job->drops = w->drops;
  job->ndrops = w->ndrops;
  job->req_head = wal_take_reqs(w);
  job->end_lsn = w->lsn;
  job->work.data = job;
  pthread_mutex_init(&job->mu, NULL);
  pthread_cond_init(&job->cv, NULL);
  w->chunk_hint = 0;
  /* A chunk queued while the job creating its file ran learns its fd now. */
  for (size_t i = 0; i < job->nchunks; i++) {
    if (job->chunks[i].len > w->chunk_hint) {
      w->chunk_hint = job->chunks[i].len < WAL_CHUNK_HINT_MAX ? job->chunks[i].len
                                                               : WAL_CHUNK_HINT_MAX;
    }
    const struct wal_seg *s = wal_seg_find(w, job->chunks[i].seq);
    if (!job->chunks[i].create && s != NULL) {
      job->chunks[i].fd = s->fd;
    }
  }
  w->pend = NULL;
  w->npend = w->pend_cap = 0;
  w->drops = NULL;
  w->ndrops = w->drops_cap = 0;
  w->job = job;
  job->queued_ns = uv_hrtime();
  int rv = uv_queue_work(w->loop, &job->work, wal_job_run_signal, wal_job_done);
  if (rv != 0) {
    /* Cannot happen with a live loop; nothing was written. */
    w->job = NULL;
    wal_latch(w, rv, "uv_queue_work failed");
    wal_fire(job->req_head, rv);
    wal_job_free(job);
  }
}

static void wal_on_prepare(uv_prepare_t *h)
{
  struct wal *w = h->data;
  if (w->job != NULL || w->closing) {
    return; /* the job's end starts the next one */
  }
  uv_prepare_stop(h);
  w->prepare_on = false;
  if (w->fatal != 0) { /* latched by wal_flush_sync: fail what waits */
    wal_fire(wal_take_reqs(w), w->fatal);
    return;
  }
  /* Requests alone: wal_flush_sync wrote their records; an empty job
   * calls them back in order. */
  if (w->npend > 0 || w->ndrops > 0 || w->req_head != NULL) {
    wal_start_job(w);
  }
}

/* Makes sure pending work goes out at this loop turn's end. */
void wal_kick(struct wal *w)
{
  if (w->prepare_on || w->closing || (w->npend == 0 && w->ndrops == 0 && w->req_head == NULL)) {
    return;
  }
  uv_prepare_start(&w->prepare, wal_on_prepare);
  w->prepare_on = true;
}

/* Rewrites the metadata records that alone pin the oldest segment. */
static void wal_unpin_meta(struct wal *w, uint64_t seq)
{
  for (size_t i = 0; i < w->ngroups && w->fatal == 0; i++) {
    const struct wal_group *g = w->groups[i];
    if (g->has_meta && g->meta_seq == seq) {
      int rv =
          wal_emit_meta(w, false, g->id, g->term, g->vote, g->snap_index, g->snap_term, g->first);
      w->st.meta_rewrites++;
      if (rv != 0) {
        wal_latch(w, rv, "rewriting group metadata: out of memory");
      }
    }
  }
}

/* Queues segment s's file for the next job: kept as a spare while fewer
 * than WAL_SPARES_MAX are kept or coming and it is at least half a
 * segment long, else unlinked. Returns 0 or CAIRN_ENOMEM. */
static int wal_drop_queue(struct wal *w, const struct wal_seg *s)
{
  char path[PATH_MAX];
  wal_seg_path(w, s->seq, path, sizeof path);
  char *p = strdup(path);
  if (p == NULL || wal_grow(&w->drops, &w->drops_cap, w->ndrops, sizeof *w->drops) != 0) {
    free(p);
    return CAIRN_ENOMEM;
  }
  struct wal_drop d = {.path = p, .bytes = s->file_bytes};
  if (w->nspares + w->spares_coming < WAL_SPARES_MAX && s->file_bytes >= w->segment_bytes / 2) {
    d.spare = s->seq;
    w->spares_coming++;
  }
  w->drops[w->ndrops++] = d;
  return 0;
}

/* Drops the oldest segments no group needs, once the records that freed
 * them are durable; an oldest segment still pinned by live entries goes
 * to the cleaner. */
void wal_collect(struct wal *w)
{
  if (w->nsegs == 1 && w->fatal == 0 && !w->closing) {
    wal_clean_consider(w); /* the head alone may be worth sealing and cleaning */
    return;
  }
  while (w->nsegs > 1 && w->fatal == 0 && !w->closing) {
    struct wal_seg *s = &w->segs[0];
    if (s->entry_refs > 0) {
      wal_clean_consider(w);
      return;
    }
    if (s->meta_refs > 0) {
      wal_unpin_meta(w, s->seq);
      return;
    }
    if (s->release_lsn > w->durable_lsn || s->fd < 0 || wal_clean_reading(w, s->seq)) {
      return;
    }
    if (wal_drop_queue(w, s) != 0) {
      return; /* retried after the next job */
    }
    close(s->fd);
    memmove(w->segs, w->segs + 1, (w->nsegs - 1) * sizeof *w->segs);
    w->nsegs--;
    w->st.first_seq = w->segs[0].seq;
    w->st.segments_deleted++;
  }
}

/* ---- the blocking flush ---- */

/* Waits for the job in flight to finish its I/O (its end still runs
 * later, from the loop) and takes what it learnt: new files' fds. */
static int wal_flush_wait_job(struct wal *w)
{
  struct wal_job *job = w->job;
  pthread_mutex_lock(&job->mu);
  while (!job->ran) {
    pthread_cond_wait(&job->cv, &job->mu);
  }
  pthread_mutex_unlock(&job->mu);
  if (job->status != 0) {
    wal_latch(w, job->status, job->errmsg);
    return CAIRN_EFATAL;
  }
  for (size_t i = 0; i < job->nchunks; i++) {
    struct wal_seg *s = wal_seg_find(w, job->chunks[i].seq);
    if (s != NULL && job->chunks[i].create) {
      s->fd = job->chunks[i].fd;
    }
  }
  return 0;
}

int wal_flush_sync(struct wal *w)
{
  if (w->closing) {
    return CAIRN_ECLOSED;
  }
  if (w->fatal != 0) {
    return CAIRN_EFATAL;
  }
  if (w->job != NULL && wal_flush_wait_job(w) != 0) {
    return CAIRN_EFATAL;
  }
  struct wal_job sync = {.w = w, .dir = w->dir, .chunks = w->pend, .nchunks = w->npend};
  w->pend = NULL;
  w->npend = w->pend_cap = 0;
  for (size_t i = 0; i < sync.nchunks; i++) {
    struct wal_chunk *c = &sync.chunks[i];
    struct wal_seg *s = wal_seg_find(w, c->seq);
    if (!c->create && s != NULL) {
      c->fd = s->fd;
    }
    if (sync.status == 0) {
      (void)wal_job_chunk(&sync, c);
    }
    if (s != NULL && c->create && c->fd >= 0) {
      s->fd = c->fd;
    }
    if (s != NULL && sync.status == 0) {
      s->written = c->off + c->len;
    }
    free(c->buf);
  }
  free(sync.chunks);
  if (sync.status != 0) {
    wal_latch(w, sync.status, sync.errmsg);
    wal_kick(w); /* the waiting requests fail from the loop */
    return CAIRN_EFATAL;
  }
  w->durable_lsn = w->lsn;
  wal_kick(w); /* the waiting requests succeed from the loop */
  return 0;
}
