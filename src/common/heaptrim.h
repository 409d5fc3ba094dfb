/* heaptrim.h - gives the freed memory inside glibc's heap back to the
 * kernel after a burst.
 *
 * glibc returns memory to the kernel only from the top of a heap (and
 * whole mmapped chunks); pages of free chunks in the middle stay resident.
 * After a burst that allocates and frees a lot (creating 10,000
 * partitions: metadata entries, proposals, Metadata answers for the whole
 * topic) a node kept 3-6 MB of such pages resident for good: half a KiB
 * per replica at 10,000 (docs/performance.md, "Memory per replica").
 * malloc_trim(0) releases them (madvise(MADV_DONTNEED) on the free pages).
 *
 * Policy: the heap's free bytes are looked at every HEAPTRIM_PERIOD_MS
 * (mallinfo2); it is trimmed when they are HEAPTRIM_MIN_GROWTH above the
 * lowest seen at a look since the last trim: memory was used and freed
 * again. A trim leaves the chunks free, only their pages released, so an
 * idle node trims once and then not again; a burst that uses and frees
 * the same free memory between two looks goes unnoticed until the next
 * one that spans a look. The trim walks the free chunks: a few
 * milliseconds on the loop with ~100 MB of heap.
 *
 * Context: the loop thread. Without glibc: does nothing. */
#ifndef CAIRN_HEAPTRIM_H
#define CAIRN_HEAPTRIM_H

#include <stddef.h>
#include <stdint.h>

#define HEAPTRIM_PERIOD_MS 5000u
#define HEAPTRIM_MIN_GROWTH ((size_t)2 << 20)

struct heaptrim {
  uint64_t last_ms;  /* when the heap was last looked at */
  size_t free_low;   /* the heap's free bytes: the lowest seen since the last trim */
  uint64_t trims;    /* malloc_trim calls */
  uint64_t released; /* resident bytes they gave back (RSS before - after) */
  uint64_t trim_ns;  /* time spent in them */
};

/* Zeroes h. */
void heaptrim_init(struct heaptrim *h);

/* Trims the heap if the policy above says so; now_ms is the loop's time. */
void heaptrim_tick(struct heaptrim *h, uint64_t now_ms);

#endif
