/* test_aio_defer.c - io_destroy through syscall() is deferred to threads
 * once started (and the context really is destroyed later), falls back to
 * the caller when the queue is full or the module is stopped, and every
 * other system call passes through syscall() unchanged. */
#include "cluster/aio_defer.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#define CONTEXTS 32

static aio_context_t new_context(void)
{
  aio_context_t ctx = 0;
  assert_int_equal(syscall(SYS_io_setup, 1, &ctx), 0);
  assert_true(ctx != 0);
  return ctx;
}

/* io_destroy of a context that no longer exists fails with EINVAL: the
 * proof that a deferred destroy happened. */
static void assert_destroyed(aio_context_t ctx)
{
  errno = 0;
  assert_int_equal(syscall(SYS_io_destroy, ctx), -1);
  assert_int_equal(errno, EINVAL);
}

static void test_aio_defer_passes_other_calls_through(void **state)
{
  (void)state;
  assert_int_equal(syscall(SYS_getpid), getpid());
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  assert_int_equal(syscall(SYS_write, fds[1], "abc", 3), 3);
  char buf[4] = {0};
  assert_int_equal(syscall(SYS_read, fds[0], buf, 3), 3);
  assert_string_equal(buf, "abc");
  errno = 0;
  assert_int_equal(syscall(SYS_close, 100000), -1); /* errno comes back too */
  assert_int_equal(errno, EBADF);
  close(fds[0]);
  close(fds[1]);
  /* Before start, io_destroy runs on the caller's thread. */
  struct aio_defer_stats st0, st1;
  aio_defer_stats(&st0);
  aio_context_t ctx = new_context();
  assert_int_equal(syscall(SYS_io_destroy, ctx), 0);
  aio_defer_stats(&st1);
  assert_int_equal(st1.deferred, st0.deferred);
  assert_true(st1.synchronous > st0.synchronous);
}

static void test_aio_defer_destroys_contexts_on_its_threads(void **state)
{
  (void)state;
  assert_int_equal(aio_defer_start(0, 8), CAIRN_EINVAL);
  assert_int_equal(aio_defer_start(4, 0), CAIRN_EINVAL);
  assert_int_equal(aio_defer_start(4, CONTEXTS), 0);
  assert_int_equal(aio_defer_start(4, CONTEXTS), CAIRN_EEXIST);
  struct aio_defer_stats st0, st1;
  aio_defer_stats(&st0);
  aio_context_t ctx[CONTEXTS];
  for (int i = 0; i < CONTEXTS; i++) {
    ctx[i] = new_context();
  }
  for (int i = 0; i < CONTEXTS; i++) {
    assert_int_equal(syscall(SYS_io_destroy, ctx[i]), 0);
  }
  aio_defer_drain();
  aio_defer_stats(&st1);
  assert_int_equal(st1.deferred - st0.deferred, CONTEXTS);
  assert_int_equal(st1.failed, st0.failed);
  assert_int_equal(st1.pending, 0);
  aio_defer_stop();
  for (int i = 0; i < CONTEXTS; i++) {
    assert_destroyed(ctx[i]);
  }
}

/* Past max_pending the caller destroys its context itself, and a failing
 * deferred destroy is counted, not lost silently. */
static void test_aio_defer_falls_back_when_full_and_counts_failures(void **state)
{
  (void)state;
  assert_int_equal(aio_defer_start(1, 1), 0);
  struct aio_defer_stats st0, st1;
  aio_defer_stats(&st0);
  aio_context_t a = new_context(), b = new_context(), c = new_context();
  assert_int_equal(syscall(SYS_io_destroy, a), 0);
  /* While a's destroy is pending (it takes a grace period), b cannot be
   * queued; if a was already done, b is deferred instead. Either way both
   * end destroyed. */
  assert_int_equal(syscall(SYS_io_destroy, b), 0);
  aio_defer_drain();
  assert_int_equal(syscall(SYS_io_destroy, c), 0);
  aio_defer_drain();
  assert_int_equal(syscall(SYS_io_destroy, c), 0); /* deferred: the failure is counted */
  aio_defer_drain();
  aio_defer_stats(&st1);
  assert_int_equal(st1.deferred + st1.synchronous - st0.deferred - st0.synchronous, 4);
  assert_int_equal(st1.failed - st0.failed, 1);
  aio_defer_stop();
  assert_destroyed(a);
  assert_destroyed(b);
  /* Stopped: synchronous again, with the kernel's answer. */
  errno = 0;
  assert_int_equal(syscall(SYS_io_destroy, c), -1);
  assert_int_equal(errno, EINVAL);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_aio_defer_passes_other_calls_through),
      cmocka_unit_test(test_aio_defer_destroys_contexts_on_its_threads),
      cmocka_unit_test(test_aio_defer_falls_back_when_full_and_counts_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
