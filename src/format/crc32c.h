/* crc32c.h - CRC-32C (Castagnoli), the checksum of every on-disk and
 * on-wire structure. Uses the SSE4.2 crc32 instruction when the CPU has it,
 * a table otherwise; both give identical results. */
#ifndef CAIRN_CRC32C_H
#define CAIRN_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues a checksum: crc32c_extend(0, buf, len) is the CRC of buf;
 * crc32c_extend(crc32c_extend(0, a, n), b, m) is the CRC of a||b.
 * Context: any thread. */
uint32_t crc32c_extend(uint32_t crc, const void *buf, size_t len);

static inline uint32_t crc32c(const void *buf, size_t len) { return crc32c_extend(0, buf, len); }

/* The table-driven version, exposed so tests can check the fast path
 * against it. */
uint32_t crc32c_extend_sw(uint32_t crc, const void *buf, size_t len);

#endif
