/* test_gstart.c - the staggered group starter: jobs run once each, in
 * order, spread over loop iterations so timers fire between them; closing
 * cancels the rest exactly once; nothing is left on the loop. */
#include "cluster/gstart.h"
#include "common/err.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define JOBS 40

struct fixture {
  uv_loop_t loop;
  struct gstart gs;
  uv_timer_t timer;
  struct gstart_job jobs[JOBS];
  int calls[JOBS];  /* callbacks per job */
  int status[JOBS]; /* last status */
  int order[JOBS];  /* job index by call order */
  int ncalls;
  unsigned ticks_at[JOBS]; /* timer ticks seen when the job ran */
  unsigned ticks;
  int close_after; /* close the starter once this many jobs ran (0: never) */
  int job_ms;      /* how long each job takes */
  bool closed;
};

static void spin_ms(int ms)
{
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

static void on_gstart_closed(struct gstart *gs)
{
  struct fixture *f = (struct fixture *)((char *)gs - offsetof(struct fixture, gs));
  f->closed = true;
}

static void on_job(struct gstart_job *job, int status)
{
  struct fixture *f = job->data;
  int i = (int)(job - f->jobs);
  f->calls[i]++;
  f->status[i] = status;
  f->order[f->ncalls++] = i;
  f->ticks_at[i] = f->ticks;
  if (status == 0) {
    spin_ms(f->job_ms); /* an open that takes a few ms, like rgroup_open */
  }
  int ran = 0;
  for (int k = 0; k < JOBS; k++) {
    ran += f->calls[k] > 0 && f->status[k] == 0;
  }
  if (f->close_after > 0 && ran == f->close_after && !f->gs.closing) {
    gstart_close(&f->gs, on_gstart_closed);
    uv_close((uv_handle_t *)&f->timer, NULL);
  }
}

static void on_tick(uv_timer_t *t)
{
  struct fixture *f = t->data;
  f->ticks++;
  if (gstart_queued(&f->gs) == 0 && !f->gs.closing) {
    gstart_close(&f->gs, on_gstart_closed);
    uv_close((uv_handle_t *)&f->timer, NULL);
  }
}

static void fixture_setup(struct fixture *f, unsigned budget_ms, int job_ms)
{
  memset(f, 0, sizeof *f);
  f->job_ms = job_ms;
  assert_int_equal(uv_loop_init(&f->loop), 0);
  assert_int_equal(gstart_init(&f->gs, &f->loop, budget_ms), 0);
  assert_int_equal(uv_timer_init(&f->loop, &f->timer), 0);
  f->timer.data = f;
  assert_int_equal(uv_timer_start(&f->timer, on_tick, 1, 1), 0);
  for (int i = 0; i < JOBS; i++) {
    f->jobs[i].data = f;
    assert_int_equal(gstart_push(&f->gs, &f->jobs[i], on_job), 0);
  }
  assert_int_equal(gstart_queued(&f->gs), JOBS);
  assert_int_equal(f->ncalls, 0); /* never from inside push */
}

static void fixture_run_and_close(struct fixture *f)
{
  assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
  assert_true(f->closed);
  /* Nothing of the starter is left on the loop. */
  assert_int_equal(uv_loop_close(&f->loop), 0);
}

/* Every job runs once, in push order; quick jobs share a loop iteration
 * (40 jobs that take no time fit a 10 ms budget many times over). */
static void test_gstart_runs_each_job_once_in_order(void **state)
{
  (void)state;
  static struct fixture f;
  fixture_setup(&f, 10, 0);
  fixture_run_and_close(&f);
  assert_int_equal(f.ncalls, JOBS);
  for (int i = 0; i < JOBS; i++) {
    assert_int_equal(f.calls[i], 1);
    assert_int_equal(f.status[i], 0);
    assert_int_equal(f.order[i], i);
  }
  assert_int_equal(f.gs.run, JOBS);
  assert_true(f.gs.turns < JOBS);
}

/* A job longer than the budget ends its turn: one job per loop iteration,
 * and the 1 ms timer fires between any two (a job takes 3 ms, so the timer
 * is always due by the next iteration). */
static void test_gstart_yields_to_the_loop_between_long_jobs(void **state)
{
  (void)state;
  static struct fixture f;
  fixture_setup(&f, 1, 3);
  fixture_run_and_close(&f);
  assert_int_equal(f.gs.run, JOBS);
  assert_int_equal(f.gs.turns, JOBS);
  for (int i = 1; i < JOBS; i++) {
    assert_true(f.ticks_at[i] > f.ticks_at[i - 1]); /* a timer turn between any two */
  }
}

/* Closing with jobs queued calls each of them once with CAIRN_ESHUTDOWN,
 * in order, and refuses new ones. */
static void test_gstart_close_cancels_queued_jobs_once(void **state)
{
  (void)state;
  static struct fixture f;
  fixture_setup(&f, 1, 3);
  f.close_after = 5;
  fixture_run_and_close(&f);
  assert_int_equal(f.ncalls, JOBS);
  for (int i = 0; i < JOBS; i++) {
    assert_int_equal(f.calls[i], 1);
    assert_int_equal(f.status[i], i < 5 ? 0 : CAIRN_ESHUTDOWN);
    assert_int_equal(f.order[i], i);
  }
  struct gstart_job late = {.data = &f};
  assert_int_equal(gstart_push(&f.gs, &late, on_job), CAIRN_ECLOSED);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gstart_runs_each_job_once_in_order),
      cmocka_unit_test(test_gstart_yields_to_the_loop_between_long_jobs),
      cmocka_unit_test(test_gstart_close_cancels_queued_jobs_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
