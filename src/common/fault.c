/* fault.c - I/O fault injection points for tests. A point may be checked
 * from a thread-pool worker (a log sync runs there: plog_sync.h), so the
 * slots are guarded by a mutex; an atomic count of armed points keeps the
 * unarmed check to one load. */
#include "common/fault.h"

#include <pthread.h>
#include <stdatomic.h>

struct fault_slot {
  int armed;
  int skip;
  int err;
};

static struct fault_slot fault_slots[FAULT_POINT_COUNT];
static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int fault_armed_count;

void fault_arm(enum fault_point point, int skip, int err)
{
  pthread_mutex_lock(&fault_mu);
  if (!fault_slots[point].armed) {
    atomic_fetch_add(&fault_armed_count, 1);
  }
  fault_slots[point].armed = 1;
  fault_slots[point].skip = skip;
  fault_slots[point].err = err;
  pthread_mutex_unlock(&fault_mu);
}

void fault_reset(void)
{
  pthread_mutex_lock(&fault_mu);
  for (int i = 0; i < FAULT_POINT_COUNT; i++) {
    fault_slots[i].armed = 0;
  }
  atomic_store(&fault_armed_count, 0);
  pthread_mutex_unlock(&fault_mu);
}

int fault_check(enum fault_point point)
{
  if (atomic_load_explicit(&fault_armed_count, memory_order_acquire) == 0) {
    return 0;
  }
  int rv = 0;
  pthread_mutex_lock(&fault_mu);
  struct fault_slot *f = &fault_slots[point];
  if (f->armed) {
    if (f->skip > 0) {
      f->skip--;
    } else {
      f->armed = 0;
      atomic_fetch_sub(&fault_armed_count, 1);
      rv = f->err;
    }
  }
  pthread_mutex_unlock(&fault_mu);
  return rv;
}
