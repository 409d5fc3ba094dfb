/* testutil.h - fixtures shared by the unit tests: temporary directories,
 * seeded randomness that prints its seed, and batch makers. */
#ifndef CAIRN_TESTUTIL_H
#define CAIRN_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* Creates a fresh directory under $TMPDIR (or /tmp). Returns owned (free
 * with tu_tmpdir_free(), which also removes it and everything in it). */
char *tu_tmpdir(const char *tag);
void tu_tmpdir_free(char *dir);

/* The seed for randomized tests: $CAIRN_TEST_SEED if set, else from the
 * clock. Prints "seed: N (replay with CAIRN_TEST_SEED=N)". */
uint64_t tu_seed(const char *test_name);

/* xorshift64* step: a small deterministic PRNG. *state must be non-zero. */
uint64_t tu_rand(uint64_t *state);

/* Builds a valid batch of n records of value_size bytes each, timestamps
 * ts, ts+1, ...; record i has key "k<tag>-<i>" and a value derived from
 * (tag, i) so its content can be checked later with tu_check_batch().
 * Returns owned (free with free()); *len is its size. Aborts the test on
 * failure. */
uint8_t *tu_make_batch(uint64_t tag, int n, size_t value_size, int64_t ts, size_t *len);

/* Stamps the batch at b[0..len) as an idempotent producer's (producer id,
 * epoch, base sequence) and recomputes its CRC. */
void tu_stamp_batch(uint8_t *b, size_t len, int64_t producer_id, int16_t epoch, int32_t seq);

/* Checks that the batch at p[0..len) is valid and is the one
 * tu_make_batch(tag, n, value_size, ts) built. Returns 0 or -1. */
int tu_check_batch(const uint8_t *p, size_t len, uint64_t tag, int n, size_t value_size);

/* Reads a file region fully (pread). Returns owned buffer or NULL. */
uint8_t *tu_read_region(int fd, int64_t pos, size_t len);

/* File helpers for damage tests: size, truncate, overwrite bytes. */
int64_t tu_file_size(const char *dir, const char *name);
void tu_truncate(const char *dir, const char *name, int64_t size);
void tu_write_at(const char *dir, const char *name, int64_t pos, const void *buf, size_t len);
void tu_read_at(const char *dir, const char *name, int64_t pos, void *buf, size_t len);

/* The 20-digit segment file name of base with extension ext ("log",
 * "index", "timeindex") into buf (at least 40 bytes). */
const char *tu_segname(char *buf, int64_t base, const char *ext);

#endif
