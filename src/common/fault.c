/* fault.c - I/O fault injection points for tests. */
#include "common/fault.h"

struct fault_slot {
  int armed;
  int skip;
  int err;
};

static struct fault_slot fault_slots[FAULT_POINT_COUNT];

void fault_arm(enum fault_point point, int skip, int err)
{
  fault_slots[point].armed = 1;
  fault_slots[point].skip = skip;
  fault_slots[point].err = err;
}

void fault_reset(void)
{
  for (int i = 0; i < FAULT_POINT_COUNT; i++) {
    fault_slots[i].armed = 0;
  }
}

int fault_check(enum fault_point point)
{
  struct fault_slot *f = &fault_slots[point];
  if (!f->armed) {
    return 0;
  }
  if (f->skip > 0) {
    f->skip--;
    return 0;
  }
  f->armed = 0;
  return f->err;
}
