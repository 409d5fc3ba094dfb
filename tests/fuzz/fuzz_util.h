/* fuzz_util.h - what the libFuzzer targets share: the input's first byte
 * as the fix-up mode, and a scratch directory for the targets that lay
 * their input out as files (fuzz_wal, fuzz_plog).
 *
 * Context: one fuzzing thread; not for the node. */
#ifndef CAIRN_FUZZ_UTIL_H
#define CAIRN_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Splits an input into its mode (data[0]) and a writable copy of the
 * rest (*len bytes, one more allocated). Returns the copy (free with
 * free()), or NULL when the input is empty or memory runs out. */
uint8_t *fuzz_body(const uint8_t *data, size_t size, uint8_t *mode, size_t *len);

/* Names a scratch directory for this process in dir (cap bytes):
 * /dev/shm when writable (fsyncs cost nothing there), else /tmp. */
void fuzz_dir_name(char *dir, size_t cap, const char *what);

/* Empties dir and makes sure it exists. Returns 0 or -1. */
int fuzz_dir_reset(const char *dir);

/* Writes dir/name with p[0..len). Returns 0 or -1. */
int fuzz_dir_write(const char *dir, const char *name, const uint8_t *p, size_t len);

#endif
