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

/* The CRC of A||B from crc_a = crc32c(A), crc_b = crc32c(B) and len_b =
 * len(B), without reading either: O(log len_b) multiplications modulo the
 * polynomial. Also, for any A1, A2 of one length, crc32c(A2||B) =
 * crc32c(A1||B) ^ crc32c_combine(crc32c(A1) ^ crc32c(A2), 0, len(B)):
 * a header rewritten in front of unread bytes gets its CRC this way.
 * Context: any thread. */
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* The table-driven version, exposed so tests can check the fast path
 * against it. */
uint32_t crc32c_extend_sw(uint32_t crc, const void *buf, size_t len);

#endif
