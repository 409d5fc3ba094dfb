/* wallclock.h - the node's wall clock (CLOCK_REALTIME in milliseconds) for
 * everything that keeps or compares calendar time: record timestamps the
 * broker sets, retention by time, group offsets' expiry, the admin views.
 * Timers and timeouts use the loop's monotonic clock (uv_now), never this.
 *
 * One process-wide offset lets the fault rig jump one node's clock without
 * touching the machine's (a test hook: CAIRN_CLOCK_OFFSET_FILE, read by
 * node.c, holds the offset in milliseconds). */
#ifndef CAIRN_WALLCLOCK_H
#define CAIRN_WALLCLOCK_H

#include <stdint.h>

/* Milliseconds since the Unix epoch, plus the offset. Context: any thread. */
int64_t wallclock_ms(void);

/* Sets the offset added to every later wallclock_ms(). Context: any thread. */
void wallclock_set_offset_ms(int64_t offset_ms);

int64_t wallclock_offset_ms(void);

/* Reads an offset from path: one decimal integer (milliseconds, may be
 * negative), surrounding whitespace allowed. A missing or empty file is an
 * offset of 0. Returns 0, -errno, or CAIRN_EINVAL for anything else.
 * Blocks (one small read). Context: any thread. */
int wallclock_read_offset_file(const char *path, int64_t *offset_ms);

#endif
