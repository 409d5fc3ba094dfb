/* heaptrim.c - malloc_trim after a burst (heaptrim.h). */
#include "common/heaptrim.h"

#include "common/log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

void heaptrim_init(struct heaptrim *h)
{
  memset(h, 0, sizeof *h);
}

#ifdef __GLIBC__
/* Resident bytes of this process (/proc/self/statm), 0 if unreadable. */
static uint64_t heaptrim_rss(void)
{
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL) {
    return 0;
  }
  unsigned long size = 0, resident = 0;
  int got = fscanf(f, "%lu %lu", &size, &resident);
  fclose(f);
  return got == 2 ? (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

static uint64_t heaptrim_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void heaptrim_tick(struct heaptrim *h, uint64_t now_ms)
{
  if (h->last_ms != 0 && now_ms - h->last_ms < HEAPTRIM_PERIOD_MS) {
    return;
  }
  h->last_ms = now_ms;
  struct mallinfo2 mi = mallinfo2();
  if (mi.fordblks < h->free_low) {
    h->free_low = mi.fordblks; /* reused since: growth counts from here */
  }
  if (mi.fordblks < h->free_low + HEAPTRIM_MIN_GROWTH) {
    return;
  }
  uint64_t rss0 = heaptrim_rss();
  uint64_t t0 = heaptrim_now_ns();
  (void)malloc_trim(0);
  uint64_t ns = heaptrim_now_ns() - t0;
  uint64_t rss1 = heaptrim_rss();
  h->trims++;
  h->trim_ns += ns;
  h->released += rss0 > rss1 ? rss0 - rss1 : 0;
  h->free_low = mallinfo2().fordblks;
  log_debug("heaptrim",
            "heap trimmed in %.1f ms: %zu bytes free in the heap, resident %llu -> %llu",
            (double)ns / 1e6, h->free_low, (unsigned long long)rss0, (unsigned long long)rss1);
}
#else
void heaptrim_tick(struct heaptrim *h, uint64_t now_ms)
{
  (void)h;
  (void)now_ms;
}
#endif
