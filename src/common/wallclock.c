/* wallclock.c - the node's wall clock and its test offset (wallclock.h). */
#include "common/wallclock.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"

static _Atomic int64_t wallclock_offset;

int64_t wallclock_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  return ms + atomic_load_explicit(&wallclock_offset, memory_order_relaxed);
}

void wallclock_set_offset_ms(int64_t offset_ms)
{
  atomic_store_explicit(&wallclock_offset, offset_ms, memory_order_relaxed);
}

int64_t wallclock_offset_ms(void)
{
  return atomic_load_explicit(&wallclock_offset, memory_order_relaxed);
}

int wallclock_read_offset_file(const char *path, int64_t *offset_ms)
{
  *offset_ms = 0;
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    return errno == ENOENT ? 0 : -errno;
  }
  char buf[64];
  size_t got = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[got] = '\0';
  char *p = buf;
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
    p++;
  }
  if (*p == '\0') {
    return 0;
  }
  char *end = NULL;
  errno = 0;
  long long v = strtoll(p, &end, 10);
  if (errno != 0 || end == p || strspn(end, " \t\r\n") != strlen(end)) {
    return CAIRN_EINVAL;
  }
  *offset_ms = (int64_t)v;
  return 0;
}
