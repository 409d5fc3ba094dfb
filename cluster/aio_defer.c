/* aio_defer.c - raft 0.15's io_destroy(2) on a pool of threads instead of
 * the loop thread, through a syscall() wrapper (why and why it is safe:
 * aio_defer.h). */
#include "cluster/aio_defer.h"

#include "common/err.h"
#include "common/log.h"

#include <dlfcn.h>
#include <errno.h>
#include <linux/aio_abi.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define AIO_DEFER_MAX_THREADS 64

typedef long (*aio_defer_syscall_fn)(long number, ...);

static pthread_once_t aio_defer_once = PTHREAD_ONCE_INIT;
static aio_defer_syscall_fn aio_defer_libc_syscall;

static pthread_mutex_t aio_defer_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t aio_defer_work = PTHREAD_COND_INITIALIZER; /* queue non-empty or stopping */
static pthread_cond_t aio_defer_idle = PTHREAD_COND_INITIALIZER; /* pending reached 0 */
static bool aio_defer_running;
static bool aio_defer_stopping;
static aio_context_t *aio_defer_ring; /* max_pending slots */
static unsigned aio_defer_cap, aio_defer_head, aio_defer_count;
static unsigned aio_defer_pending; /* queued + being destroyed */
static pthread_t aio_defer_threads[AIO_DEFER_MAX_THREADS];
static unsigned aio_defer_nthreads;
static struct aio_defer_stats aio_defer_st;

static void aio_defer_resolve(void)
{
  aio_defer_libc_syscall = (aio_defer_syscall_fn)dlsym(RTLD_NEXT, "syscall");
}

/* libc's syscall(), which this file's syscall() hides from the program. */
static aio_defer_syscall_fn aio_defer_libc(void)
{
  pthread_once(&aio_defer_once, aio_defer_resolve);
  if (aio_defer_libc_syscall == NULL) {
    /* No libc below us is not a state a dynamically linked program can be
     * in; fail loudly rather than pass calls into nothing. */
    abort();
  }
  return aio_defer_libc_syscall;
}

/* Queues ctx for the threads. Returns false when the caller must destroy
 * it itself (not started, stopping, or the queue is full). */
static bool aio_defer_push(aio_context_t ctx)
{
  bool queued = false;
  pthread_mutex_lock(&aio_defer_mu);
  if (aio_defer_running && !aio_defer_stopping && aio_defer_pending < aio_defer_cap) {
    aio_defer_ring[(aio_defer_head + aio_defer_count) % aio_defer_cap] = ctx;
    aio_defer_count++;
    aio_defer_pending++;
    aio_defer_st.deferred++;
    queued = true;
    pthread_cond_signal(&aio_defer_work);
  } else {
    aio_defer_st.synchronous++;
  }
  pthread_mutex_unlock(&aio_defer_mu);
  return queued;
}

static void *aio_defer_thread(void *arg)
{
  (void)arg;
  aio_defer_syscall_fn libc = aio_defer_libc();
  pthread_mutex_lock(&aio_defer_mu);
  for (;;) {
    while (aio_defer_count == 0 && !aio_defer_stopping) {
      pthread_cond_wait(&aio_defer_work, &aio_defer_mu);
    }
    if (aio_defer_count == 0) {
      break; /* stopping, and nothing left */
    }
    aio_context_t ctx = aio_defer_ring[aio_defer_head];
    aio_defer_head = (aio_defer_head + 1) % aio_defer_cap;
    aio_defer_count--;
    pthread_mutex_unlock(&aio_defer_mu);
    long rv = libc(SYS_io_destroy, ctx);
    int err = errno;
    if (rv != 0) {
      log_error("aio_defer", "io_destroy of AIO context %#llx: %s", (unsigned long long)ctx,
                strerror(err));
    }
    pthread_mutex_lock(&aio_defer_mu);
    aio_defer_st.failed += rv != 0;
    if (--aio_defer_pending == 0) {
      pthread_cond_broadcast(&aio_defer_idle);
    }
  }
  pthread_mutex_unlock(&aio_defer_mu);
  return NULL;
}

/* Every call of syscall() in the program and its libraries comes here. A
 * system call takes at most six word-sized arguments and the wrapper cannot
 * know how many its caller passed, so it reads six, exactly as libc's own
 * syscall() does: on x86-64 the sixth is a word of the caller's stack frame
 * that may not be an argument (mapped, never used by the kernel for a call
 * that takes fewer). ASan would report that read, hence no_sanitize. */
__attribute__((no_sanitize("address"))) long syscall(long number, ...)
{
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (int i = 0; i < 6; i++) {
    a[i] = va_arg(ap, long);
  }
  va_end(ap);
  if (number == SYS_io_destroy && aio_defer_push((aio_context_t)a[0])) {
    return 0;
  }
  return aio_defer_libc()(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

int aio_defer_start(unsigned threads, unsigned max_pending)
{
  if (threads == 0 || threads > AIO_DEFER_MAX_THREADS || max_pending == 0) {
    return CAIRN_EINVAL;
  }
  (void)aio_defer_libc(); /* resolve before any thread needs it */
  pthread_mutex_lock(&aio_defer_mu);
  bool running = aio_defer_running;
  pthread_mutex_unlock(&aio_defer_mu);
  if (running) {
    return CAIRN_EEXIST;
  }
  aio_context_t *ring = calloc(max_pending, sizeof *ring);
  if (ring == NULL) {
    return CAIRN_ENOMEM;
  }
  pthread_mutex_lock(&aio_defer_mu);
  aio_defer_ring = ring;
  aio_defer_cap = max_pending;
  aio_defer_head = aio_defer_count = aio_defer_pending = 0;
  aio_defer_stopping = false;
  pthread_mutex_unlock(&aio_defer_mu);
  for (aio_defer_nthreads = 0; aio_defer_nthreads < threads; aio_defer_nthreads++) {
    int rv = pthread_create(&aio_defer_threads[aio_defer_nthreads], NULL, aio_defer_thread, NULL);
    if (rv != 0) {
      pthread_mutex_lock(&aio_defer_mu);
      aio_defer_running = true; /* so that stop joins the ones started */
      pthread_mutex_unlock(&aio_defer_mu);
      aio_defer_stop();
      return -rv;
    }
  }
  pthread_mutex_lock(&aio_defer_mu);
  aio_defer_running = true;
  pthread_mutex_unlock(&aio_defer_mu);
  return 0;
}

void aio_defer_drain(void)
{
  pthread_mutex_lock(&aio_defer_mu);
  while (aio_defer_pending > 0) {
    pthread_cond_wait(&aio_defer_idle, &aio_defer_mu);
  }
  pthread_mutex_unlock(&aio_defer_mu);
}

void aio_defer_stop(void)
{
  pthread_mutex_lock(&aio_defer_mu);
  if (!aio_defer_running) {
    pthread_mutex_unlock(&aio_defer_mu);
    return;
  }
  aio_defer_stopping = true; /* no new work; the threads finish the queue */
  pthread_cond_broadcast(&aio_defer_work);
  pthread_mutex_unlock(&aio_defer_mu);
  for (unsigned i = 0; i < aio_defer_nthreads; i++) {
    pthread_join(aio_defer_threads[i], NULL);
  }
  pthread_mutex_lock(&aio_defer_mu);
  aio_defer_nthreads = 0;
  aio_defer_running = false;
  aio_defer_stopping = false;
  free(aio_defer_ring);
  aio_defer_ring = NULL;
  aio_defer_cap = 0;
  pthread_mutex_unlock(&aio_defer_mu);
}

void aio_defer_stats(struct aio_defer_stats *st)
{
  pthread_mutex_lock(&aio_defer_mu);
  *st = aio_defer_st;
  st->pending = aio_defer_pending;
  pthread_mutex_unlock(&aio_defer_mu);
}
