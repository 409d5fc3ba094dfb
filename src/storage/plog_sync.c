/* plog_sync.c - a partition log flush whose fsyncs run on a worker thread
 * (plog_sync.h has the steps, the states and why appends may go on). */
#include "storage/plog_sync.h"

#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "storage/checkpoint.h"
#include "storage/plog_internal.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PLOG_SYNC_STATE_TABLE(X) \
  X(PLOG_SYNC_CAPTURED, "captured") \
  X(PLOG_SYNC_RUNNING, "running")   \
  X(PLOG_SYNC_DONE, "done")         \
  X(PLOG_SYNC_CANCELED, "canceled")

enum plog_sync_state {
#define PLOG_SYNC_STATE_ENUM(name, text) name,
  PLOG_SYNC_STATE_TABLE(PLOG_SYNC_STATE_ENUM)
#undef PLOG_SYNC_STATE_ENUM
};

struct plog_sync {
  struct plog *pl; /* the log until it collects the job; loop only */
  pthread_mutex_t mu;
  pthread_cond_t done; /* signalled when the run leaves RUNNING */
  enum plog_sync_state state; /* under mu */
  /* captured by plog_sync_begin, read by the run */
  char *dir;
  struct segment_sync *segs;
  size_t nsegs;
  bool sync_dir;         /* files were created or removed since the last dir fsync */
  bool write_checkpoint; /* the durable marks move */
  struct checkpoint cp;  /* the marks once every captured byte is durable */
  int64_t start_offset;
  int64_t next_offset;
  uint64_t last_index;
  /* written by the run, read after it (mu orders both) */
  int status;
  bool durable;   /* every fsync and the checkpoint succeeded */
  bool checksums; /* every segment's CRC reaches its captured size */
  uint64_t run_ns;
  char errmsg[STORE_ERRMSG_SIZE];
};

static const char *plog_sync_state_name(enum plog_sync_state st)
{
  switch (st) {
#define PLOG_SYNC_STATE_NAME(name, text) \
  case name:                             \
    return text;
    PLOG_SYNC_STATE_TABLE(PLOG_SYNC_STATE_NAME)
#undef PLOG_SYNC_STATE_NAME
  }
  return "?";
}

/* The one setter of job->state (under job->mu): asserts the transitions
 * of the diagram in plog_sync.h. */
static void plog_sync_set_state(struct plog_sync *job, enum plog_sync_state to)
{
  enum plog_sync_state from = job->state;
  bool ok = (from == PLOG_SYNC_CAPTURED && (to == PLOG_SYNC_RUNNING || to == PLOG_SYNC_CANCELED)) ||
            (from == PLOG_SYNC_RUNNING && to == PLOG_SYNC_DONE);
  if (!ok) {
    log_error("plog", "sync job: bad transition %s -> %s", plog_sync_state_name(from),
              plog_sync_state_name(to));
  }
  assert(ok);
  job->state = to;
}

static uint64_t plog_sync_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void plog_sync_free(struct plog_sync *job)
{
  for (size_t i = 0; i < job->nsegs; i++) {
    segment_sync_release(&job->segs[i]);
  }
  free(job->segs);
  free(job->dir);
  pthread_cond_destroy(&job->done);
  pthread_mutex_destroy(&job->mu);
  free(job);
}

/* The durable marks once every captured segment is synced: as
 * plog_do_flush computes them. */
static void plog_sync_marks(const struct plog *pl, struct plog_sync *job)
{
  int64_t durable = pl->durable_offset;
  uint64_t durable_index = pl->durable_index;
  for (size_t i = 0; i < job->nsegs; i++) {
    const struct segment_sync *ss = &job->segs[i];
    if (ss->next_offset > durable || (ss->size > 0 && ss->last_index > durable_index)) {
      durable = ss->next_offset;
      if (ss->size > 0 && ss->last_index > durable_index) {
        durable_index = ss->last_index;
      }
    }
  }
  job->cp.durable_offset = durable;
  job->cp.durable_index = durable_index;
  job->cp.start_offset = pl->start_offset;
  job->write_checkpoint = durable != pl->durable_offset || durable_index != pl->durable_index;
}

int plog_sync_begin(struct store *st, struct plog_sync **out)
{
  struct plog *pl = (struct plog *)st;
  if (pl->base.fatal) {
    return CAIRN_EFATAL;
  }
  if (pl->sync != NULL) {
    return CAIRN_EEXIST;
  }
  struct plog_sync *job = calloc(1, sizeof *job);
  if (job == NULL) {
    return CAIRN_ENOMEM;
  }
  job->dir = strdup(pl->dir);
  job->segs = calloc(pl->nsegs + 1, sizeof *job->segs);
  if (job->dir == NULL || job->segs == NULL) {
    free(job->dir);
    free(job->segs);
    free(job);
    return CAIRN_ENOMEM;
  }
  pthread_mutex_init(&job->mu, NULL);
  pthread_cond_init(&job->done, NULL);
  job->state = PLOG_SYNC_CAPTURED;
  for (size_t i = 0; i < pl->nsegs; i++) {
    int rv = segment_sync_capture(pl->segs[i], &job->segs[i]);
    if (rv != 0) {
      plog_sync_free(job);
      return plog_fail(pl, rv, "writing an index");
    }
    job->nsegs++;
  }
  job->start_offset = pl->start_offset;
  job->next_offset = pl->next_offset;
  job->last_index = pl->last_index;
  plog_sync_marks(pl, job);
  /* Given back at collect if the job is canceled before it ran. */
  job->sync_dir = pl->dir_dirty;
  pl->dir_dirty = false;
  job->pl = pl;
  pl->sync = job;
  *out = job;
  return 0;
}

/* The work itself; fills job->errmsg on failure. Touches no log state. */
static int plog_sync_work(struct plog_sync *job)
{
  int rv = 0;
  for (size_t i = 0; i < job->nsegs; i++) {
    rv = segment_sync_run(&job->segs[i]);
    if (rv != 0) {
      snprintf(job->errmsg, sizeof job->errmsg, "%s: fsync of segment %020lld: %s", job->dir,
               (long long)job->segs[i].base_offset, cairn_strerror(rv));
      return rv;
    }
  }
  if (job->sync_dir && (rv = fs_fsync_dir(job->dir)) != 0) {
    snprintf(job->errmsg, sizeof job->errmsg, "%s: fsync of the directory: %s", job->dir,
             cairn_strerror(rv));
    return rv;
  }
  if (job->write_checkpoint && (rv = checkpoint_write(job->dir, &job->cp)) != 0) {
    snprintf(job->errmsg, sizeof job->errmsg, "%s: writing the checkpoint: %s", job->dir,
             cairn_strerror(rv));
    return rv;
  }
  job->durable = true;
  for (size_t i = 0; i < job->nsegs; i++) {
    rv = segment_sync_crc(&job->segs[i]);
    if (rv != 0) {
      snprintf(job->errmsg, sizeof job->errmsg, "%s: reading segment %020lld for its checksum: %s",
               job->dir, (long long)job->segs[i].base_offset, cairn_strerror(rv));
      return rv;
    }
  }
  job->checksums = true;
  return 0;
}

int plog_sync_run(struct plog_sync *job)
{
  pthread_mutex_lock(&job->mu);
  if (job->state == PLOG_SYNC_CANCELED) {
    pthread_mutex_unlock(&job->mu);
    return CAIRN_ESYNC_CANCELED;
  }
  plog_sync_set_state(job, PLOG_SYNC_RUNNING);
  pthread_mutex_unlock(&job->mu);

  uint64_t t0 = plog_sync_now_ns();
  int rv = plog_sync_work(job);
  uint64_t t1 = plog_sync_now_ns();

  pthread_mutex_lock(&job->mu);
  job->status = rv;
  job->run_ns = t1 - t0;
  plog_sync_set_state(job, PLOG_SYNC_DONE);
  pthread_cond_broadcast(&job->done);
  pthread_mutex_unlock(&job->mu);
  return rv;
}

int plog_sync_collect(struct plog *pl)
{
  struct plog_sync *job = pl->sync;
  if (job == NULL) {
    return 0;
  }
  assert(job->pl == pl);
  pthread_mutex_lock(&job->mu);
  if (job->state == PLOG_SYNC_CAPTURED) {
    plog_sync_set_state(job, PLOG_SYNC_CANCELED);
  }
  while (job->state == PLOG_SYNC_RUNNING) {
    pthread_cond_wait(&job->done, &job->mu);
  }
  enum plog_sync_state st = job->state;
  pthread_mutex_unlock(&job->mu);
  pl->sync = NULL;
  job->pl = NULL;
  if (st == PLOG_SYNC_CANCELED) {
    job->status = CAIRN_ESYNC_CANCELED;
    pl->dir_dirty = pl->dir_dirty || job->sync_dir;
    return job->status;
  }
  if (!job->durable) {
    /* Never retried: what the failed fsync covered is unknown. */
    if (!pl->base.fatal) {
      pl->base.fatal = true;
      snprintf(pl->base.errmsg, sizeof pl->base.errmsg, "%s", job->errmsg);
      log_error("plog", "%s (log is now read-only)", pl->base.errmsg);
    }
    return job->status;
  }
  for (size_t i = 0; i < job->nsegs; i++) {
    segment_sync_commit(&job->segs[i]);
  }
  pl->durable_offset = job->cp.durable_offset;
  pl->durable_index = job->cp.durable_index;
  if (job->status != 0) {
    /* Durable, but a checksum could not be read: only the manifest fails. */
    snprintf(pl->base.errmsg, sizeof pl->base.errmsg, "%s", job->errmsg);
  }
  return job->status;
}

int plog_sync_manifest(const struct plog_sync *job, struct manifest *m)
{
  memset(m, 0, sizeof *m);
  if (job->status != 0 || !job->checksums) {
    return CAIRN_EINVAL;
  }
  m->segments = calloc(job->nsegs + 1, sizeof *m->segments);
  if (m->segments == NULL) {
    return CAIRN_ENOMEM;
  }
  for (size_t i = 0; i < job->nsegs; i++) {
    const struct segment_sync *ss = &job->segs[i];
    m->segments[i].base_offset = ss->base_offset;
    m->segments[i].next_offset = ss->next_offset;
    m->segments[i].size_bytes = ss->size;
    m->segments[i].crc32c = ss->crc;
  }
  m->nsegments = job->nsegs;
  m->start_offset = job->start_offset;
  m->next_offset = job->next_offset;
  m->last_index = job->last_index;
  return 0;
}

uint64_t plog_sync_run_ns(const struct plog_sync *job) { return job->run_ns; }

int plog_sync_end(struct plog_sync *job)
{
  if (job->pl != NULL) {
    plog_sync_collect(job->pl);
  }
  int status = job->status;
  plog_sync_free(job);
  return status;
}
