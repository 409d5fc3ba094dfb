/* test_plog_sync.c - a partition log flush run off the loop thread
 * (plog_sync.h): what it makes durable and claims while appends go on,
 * the fatal latch after a failed fsync or checkpoint write, and the
 * operations that collect a job (cancel it before it ran, wait for it while
 * it runs). */
#include "common/err.h"
#include "common/fault.h"
#include "format/batch.h"
#include "format/crc32c.h"
#include "storage/checkpoint.h"
#include "storage/manifest.h"
#include "storage/plog.h"
#include "storage/plog_sync.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dirent.h>
#include <limits.h>

#include <cmocka.h>

static int64_t test_now;
static int64_t test_clock(void) { return test_now; }

struct fixture {
  char *dir;
  struct store *s;
  struct plog_opts opts;
  uint64_t next_index; /* Raft index of the next entry appended */
};

static int setup(void **state)
{
  struct fixture *f = calloc(1, sizeof *f);
  f->dir = tu_tmpdir("plogsync");
  plog_opts_default(&f->opts);
  f->opts.segment_bytes = 16 * 1024; /* rolls every few entries */
  f->opts.index_interval = 1024;
  f->opts.now_ms = test_clock;
  test_now = 1700000000000;
  f->next_index = 1;
  char err[256];
  assert_int_equal(plog_open(f->dir, &f->opts, &f->s, err, sizeof err), 0);
  *state = f;
  return 0;
}

static int teardown(void **state)
{
  struct fixture *f = *state;
  if (f->s != NULL) {
    store_close(f->s);
  }
  fault_reset();
  tu_tmpdir_free(f->dir);
  free(f);
  return 0;
}

static void reopen(struct fixture *f)
{
  store_close(f->s);
  char err[256];
  assert_int_equal(plog_open(f->dir, &f->opts, &f->s, err, sizeof err), 0);
}

/* Appends one entry of a batch of 10 records with 100-byte values (tag =
 * its Raft index); returns the store's answer. */
static int append_entry(struct fixture *f)
{
  size_t len;
  uint64_t index = f->next_index;
  uint8_t *b = tu_make_batch(index, 10, 100, test_now, &len);
  struct store_batch sb = {b, len};
  int64_t base = -1;
  int rv = store_append(f->s, &sb, 1, index, &base);
  free(b);
  if (rv == 0) {
    f->next_index++;
  }
  return rv;
}

static void append_entries(struct fixture *f, int n)
{
  for (int i = 0; i < n; i++) {
    assert_int_equal(append_entry(f), 0);
  }
}

/* Every entry appended so far is there, in order, once: batch i holds
 * offsets [10 (i - 1), 10 i) and tag i. */
static void expect_entries(struct fixture *f, uint64_t entries)
{
  struct store_info info;
  store_info(f->s, &info);
  assert_int_equal(info.next_offset, (int64_t)entries * 10);
  assert_int_equal(info.last_index, entries);
  for (uint64_t i = 1; i <= entries; i++) {
    struct store_region r;
    assert_int_equal(store_read(f->s, (int64_t)(i - 1) * 10, 1, &r), 0);
    uint8_t *buf = tu_read_region(r.fd, r.pos, r.len);
    assert_non_null(buf);
    assert_int_equal(tu_check_batch(buf, r.len, i, 10, 100), 0);
    free(buf);
    store_region_release(&r);
  }
}

/* The CRC-32C of the first size bytes of segment base's .log file. */
static uint32_t file_crc(const char *dir, int64_t base, uint64_t size)
{
  char name[64];
  tu_segname(name, base, "log");
  uint8_t *buf = malloc(size + 1);
  tu_read_at(dir, name, 0, buf, size);
  uint32_t crc = crc32c(buf, size);
  free(buf);
  return crc;
}

static void test_plog_sync_claims_only_what_was_captured(void **state)
{
  struct fixture *f = *state;
  append_entries(f, 40); /* several segments */
  struct store_info before;
  store_info(f->s, &before);
  assert_true(before.segments > 2);
  struct plog_sync *job;
  assert_int_equal(plog_sync_begin(f->s, &job), 0);
  append_entries(f, 30); /* beside the job: rolls included */
  assert_int_equal(plog_sync_run(job), 0);
  struct manifest m;
  assert_int_equal(plog_sync_manifest(job, &m), 0);
  assert_int_equal(plog_sync_end(job), 0);

  struct store_info info;
  store_info(f->s, &info);
  assert_false(info.fatal);
  assert_int_equal(info.durable_offset, before.next_offset);
  assert_int_equal(info.durable_index, before.last_index);
  struct checkpoint cp;
  assert_int_equal(checkpoint_read(f->dir, &cp), 0);
  assert_int_equal(cp.durable_offset, before.next_offset);
  assert_int_equal(cp.durable_index, 40);
  /* The manifest describes the log at capture, checksummed. */
  assert_int_equal(m.next_offset, before.next_offset);
  assert_int_equal(m.last_index, 40);
  assert_int_equal(m.nsegments, before.segments);
  assert_int_equal(m.segments[m.nsegments - 1].next_offset, before.next_offset);
  for (size_t i = 0; i < m.nsegments; i++) {
    assert_int_equal(m.segments[i].crc32c,
                     file_crc(f->dir, m.segments[i].base_offset, m.segments[i].size_bytes));
  }
  manifest_free(&m);
  /* A manifest built on the loop now agrees (its CRC cache came from the
   * job for the segments that did not grow). */
  assert_int_equal(manifest_build(f->s, &m), 0);
  for (size_t i = 0; i < m.nsegments; i++) {
    assert_int_equal(m.segments[i].crc32c,
                     file_crc(f->dir, m.segments[i].base_offset, m.segments[i].size_bytes));
  }
  manifest_free(&m);
  reopen(f);
  expect_entries(f, 70);
}

/* The run on a real thread while this one appends and rolls segments. */
struct worker {
  struct plog_sync *job;
  int rv;
};

static void *worker_main(void *arg)
{
  struct worker *w = arg;
  w->rv = plog_sync_run(w->job);
  return NULL;
}

static void test_plog_sync_runs_on_a_thread_while_appends_go_on(void **state)
{
  struct fixture *f = *state;
  for (int round = 0; round < 20; round++) {
    append_entries(f, 7);
    struct store_info before;
    store_info(f->s, &before);
    struct worker w = {0};
    assert_int_equal(plog_sync_begin(f->s, &w.job), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, worker_main, &w), 0);
    append_entries(f, 5); /* concurrent with the fsyncs */
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(w.rv, 0);
    assert_int_equal(plog_sync_end(w.job), 0);
    struct store_info info;
    store_info(f->s, &info);
    assert_int_equal(info.durable_offset, before.next_offset);
    assert_int_equal(info.durable_index, before.last_index);
  }
  reopen(f);
  expect_entries(f, 20 * 12);
}

static void test_plog_sync_failed_fsync_latches_fatal_and_claims_nothing(void **state)
{
  struct fixture *f = *state;
  append_entries(f, 5);
  assert_int_equal(store_flush(f->s, INT64_MAX), 0);
  append_entries(f, 5);
  struct plog_sync *job;
  assert_int_equal(plog_sync_begin(f->s, &job), 0);
  fault_arm(FAULT_SEGMENT_SYNC, 0, -EIO);
  assert_int_equal(plog_sync_run(job), -EIO);
  struct manifest m;
  assert_int_equal(plog_sync_manifest(job, &m), CAIRN_EINVAL); /* no descriptor */
  assert_int_equal(plog_sync_end(job), -EIO);
  struct store_info info;
  store_info(f->s, &info);
  assert_true(info.fatal);
  assert_non_null(strstr(store_errmsg(f->s), "fsync of segment"));
  assert_int_equal(info.durable_offset, 50); /* the first flush only */
  struct checkpoint cp;
  assert_int_equal(checkpoint_read(f->dir, &cp), 0);
  assert_int_equal(cp.durable_offset, 50);
  /* Latched: never retried, nothing more accepted. */
  assert_int_equal(append_entry(f), CAIRN_EFATAL);
  assert_int_equal(store_flush(f->s, INT64_MAX), CAIRN_EFATAL);
  assert_int_equal(plog_sync_begin(f->s, &job), CAIRN_EFATAL);
  /* What was appended is read back after a restart (recovery scans it). */
  reopen(f);
  expect_entries(f, 10);
}

static void test_plog_sync_failed_checkpoint_write_latches_fatal(void **state)
{
  struct fixture *f = *state;
  append_entries(f, 5);
  struct plog_sync *job;
  assert_int_equal(plog_sync_begin(f->s, &job), 0);
  fault_arm(FAULT_CHECKPOINT_WRITE, 0, -ENOSPC);
  assert_int_equal(plog_sync_run(job), -ENOSPC);
  assert_int_equal(plog_sync_end(job), -ENOSPC);
  struct store_info info;
  store_info(f->s, &info);
  assert_true(info.fatal);
  assert_int_equal(info.durable_offset, 0);
  assert_non_null(strstr(store_errmsg(f->s), "checkpoint"));
  assert_int_equal(append_entry(f), CAIRN_EFATAL);
}

static void test_plog_sync_truncate_cancels_a_job_not_started(void **state)
{
  struct fixture *f = *state;
  append_entries(f, 20);
  struct plog_sync *job;
  assert_int_equal(plog_sync_begin(f->s, &job), 0);
  assert_int_equal(plog_sync_begin(f->s, &job), CAIRN_EEXIST); /* one at a time */
  assert_int_equal(store_truncate(f->s, 100), 0); /* collects: cancels */
  assert_int_equal(plog_sync_run(job), CAIRN_ESYNC_CANCELED);
  assert_int_equal(plog_sync_end(job), CAIRN_ESYNC_CANCELED);
  struct store_info info;
  store_info(f->s, &info);
  assert_false(info.fatal);
  assert_int_equal(info.next_offset, 100);
  assert_int_equal(info.durable_offset, 0); /* nothing claimed */
  /* The log goes on: a new job syncs what is there now. */
  f->next_index = 11;
  append_entries(f, 3);
  assert_int_equal(plog_sync_begin(f->s, &job), 0);
  assert_int_equal(plog_sync_run(job), 0);
  assert_int_equal(plog_sync_end(job), 0);
  store_info(f->s, &info);
  assert_int_equal(info.durable_offset, 130);
  reopen(f);
  expect_entries(f, 13);
}

static void test_plog_sync_flush_and_delete_collect_a_finished_job(void **state)
{
  struct fixture *f = *state;
  append_entries(f, 30);
  struct store_info before;
  store_info(f->s, &before);
  struct plog_sync *job;
  assert_int_equal(plog_sync_begin(f->s, &job), 0);
  assert_int_equal(plog_sync_run(job), 0);
  append_entries(f, 2);
  /* The flush applies the job's outcome first, then flushes the rest. */
  assert_int_equal(store_flush(f->s, INT64_MAX), 0);
  struct store_info info;
  store_info(f->s, &info);
  assert_int_equal(info.durable_offset, 320);
  /* Deleting a prefix after that writes the last checkpoint. */
  assert_int_equal(store_delete_before(f->s, 200), 0);
  assert_int_equal(plog_sync_end(job), 0); /* collected already: just freed */
  struct checkpoint cp;
  assert_int_equal(checkpoint_read(f->dir, &cp), 0);
  assert_int_equal(cp.start_offset, 200);
  assert_int_equal(cp.durable_offset, 320);
  (void)before;
}

/* Close while a worker may be starting, running or done: it cancels or
 * waits, never frees what the worker uses; the job's owner ends it after
 * the worker returned. Many rounds for different interleavings. */
static void test_plog_sync_close_during_a_run_is_ordered(void **state)
{
  struct fixture *f = *state;
  int canceled = 0, ran = 0;
  for (int round = 0; round < 40; round++) {
    append_entries(f, 3);
    struct worker w = {0};
    assert_int_equal(plog_sync_begin(f->s, &w.job), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, worker_main, &w), 0);
    if (round % 2 == 1) {
      usleep(200);
    }
    store_close(f->s); /* collects the job: cancel or wait */
    f->s = NULL;
    assert_int_equal(pthread_join(t, NULL), 0);
    int rv = plog_sync_end(w.job);
    assert_true(rv == 0 || rv == CAIRN_ESYNC_CANCELED);
    assert_int_equal(w.rv, rv);
    rv == 0 ? ran++ : canceled++;
    char err[256];
    assert_int_equal(plog_open(f->dir, &f->opts, &f->s, err, sizeof err), 0);
  }
  printf("close during a run: %d ran, %d canceled\n", ran, canceled);
  expect_entries(f, 40 * 3);
}

/* Descriptors this process holds open on files under dir whose name ends
 * with suffix. */
static int open_fds_ending(const char *dir, const char *suffix)
{
  DIR *d = opendir("/proc/self/fd");
  assert_non_null(d);
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    char link[PATH_MAX], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%s", de->d_name);
    ssize_t len = readlink(link, target, sizeof target - 1);
    if (len <= 0) {
      continue;
    }
    target[len] = '\0';
    size_t sl = strlen(suffix);
    if (strncmp(target, dir, strlen(dir)) == 0 && (size_t)len >= sl &&
        strcmp(target + len - sl, suffix) == 0) {
      n++;
    }
  }
  closedir(d);
  return n;
}

/* Index files stay open only while a sync is owed to them (index.h): once
 * a job has made the log durable, a log holds one descriptor per segment,
 * and everything written is there after a reopen. */
static void test_plog_sync_leaves_index_files_closed_once_synced(void **state)
{
  struct fixture *f = *state;
  append_entries(f, 40); /* several segments: rolls sync the closed ones */
  struct plog_sync *job;
  assert_int_equal(plog_sync_begin(f->s, &job), 0);
  assert_true(open_fds_ending(f->dir, "index") > 0); /* the active segment's, pinned */
  append_entries(f, 5);
  assert_int_equal(plog_sync_run(job), 0);
  assert_int_equal(plog_sync_end(job), 0);
  /* The 5 entries appended beside the job may owe a sync; a second job
   * takes it. */
  assert_int_equal(plog_sync_begin(f->s, &job), 0);
  assert_int_equal(plog_sync_run(job), 0);
  assert_int_equal(plog_sync_end(job), 0);
  struct store_info info;
  store_info(f->s, &info);
  assert_int_equal(open_fds_ending(f->dir, ".index"), 0);
  assert_int_equal(open_fds_ending(f->dir, ".timeindex"), 0);
  assert_int_equal(open_fds_ending(f->dir, ".log"), (int)info.segments);
  assert_int_equal(info.durable_offset, info.next_offset);
  reopen(f);
  expect_entries(f, 45);
  assert_int_equal(open_fds_ending(f->dir, ".index"), 0); /* recovery synced and closed them */
  assert_int_equal(open_fds_ending(f->dir, ".timeindex"), 0);
  append_entries(f, 10);
  reopen(f); /* close persists and syncs through the reopened files */
  expect_entries(f, 55);
  /* The time index came back from its file: the first batch at or after
   * test_now is offset 0. */
  int64_t off = -1;
  assert_int_equal(store_lookup_time(f->s, test_now, &off), 0);
  assert_int_equal(off, 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_plog_sync_claims_only_what_was_captured, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_plog_sync_runs_on_a_thread_while_appends_go_on,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_plog_sync_failed_fsync_latches_fatal_and_claims_nothing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plog_sync_failed_checkpoint_write_latches_fatal,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_plog_sync_truncate_cancels_a_job_not_started, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_plog_sync_flush_and_delete_collect_a_finished_job,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_plog_sync_leaves_index_files_closed_once_synced,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_plog_sync_close_during_a_run_is_ordered, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
