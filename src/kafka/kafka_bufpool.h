/* kafka_bufpool.h - the Kafka port's answer buffers: a small node-wide
 * pool that keeps a few large buffers for the next answer instead of
 * giving them back to the system.
 *
 * Why: a Fetch answer is converted into memory (kafka_handle_fetch.c), and
 * a buffer of a few MiB is above glibc's mmap threshold, so malloc maps
 * fresh pages for every answer and free unmaps them: each answer then
 * page-faults over every byte again (a 4 MiB-per-partition read-back was
 * ~4x slower than with reused memory; docs/kafka.md).
 *
 * Bounds: at most KAFKA_BUFPOOL_SLOTS idle buffers and
 * KAFKA_BUFPOOL_IDLE_MAX idle bytes; a buffer that does not fit is freed.
 * Buffers in use are not the pool's: they are bounded by what bounds the
 * answers (the node-wide request budget, rbudget.h, and each API's
 * limits). Buffers below KAFKA_BUFPOOL_MIN are plain malloc/free (glibc's
 * heap reuses those without new mappings).
 *
 * Context: any thread (a mutex guards the idle list; nodes of one test
 * process may share it). */
#ifndef CAIRN_KAFKA_BUFPOOL_H
#define CAIRN_KAFKA_BUFPOOL_H

#include <stddef.h>

#define KAFKA_BUFPOOL_MIN (128u * 1024)
#define KAFKA_BUFPOOL_SLOTS 8
#define KAFKA_BUFPOOL_IDLE_MAX (48u * 1024 * 1024)

/* A buffer of at least min bytes (min > 0); *cap is set to its usable size
 * (>= min). Returns owned (give back with kafka_bufpool_put), or NULL when
 * out of memory. */
void *kafka_bufpool_get(size_t min, size_t *cap);

/* Gives back a buffer from kafka_bufpool_get (NULL is ignored): kept idle
 * when it fits the bounds, freed otherwise. Always consumes p. */
void kafka_bufpool_put(void *p);

/* Frees every idle buffer (at a port's close; also for leak checkers). */
void kafka_bufpool_drain(void);

/* Idle buffers and bytes now, for tests. */
void kafka_bufpool_idle(size_t *count, size_t *bytes);

#endif
