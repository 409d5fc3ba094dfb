/* varint.h - zigzag variable-length integers (as in Kafka's and protobuf's
 * sint encodings): 1 to 5 bytes for 32 bits, 1 to 10 for 64 bits. */
#ifndef CAIRN_VARINT_H
#define CAIRN_VARINT_H

#include <stddef.h>
#include <stdint.h>

#define VARINT32_MAX_BYTES 5
#define VARINT64_MAX_BYTES 10

/* Encodes v at p (room for VARINT64_MAX_BYTES). Returns bytes written. */
size_t varint_put64(uint8_t *p, int64_t v);
size_t varint_put32(uint8_t *p, int32_t v);

/* Bytes varint_put64(v) would write. */
size_t varint_size64(int64_t v);

/* Decodes from p[0..len). Returns bytes consumed (> 0), or
 * CAIRN_ETRUNCATED if the input ends inside the varint, or
 * CAIRN_EBADVARINT if it is longer than allowed or overflows. */
int varint_get64(const uint8_t *p, size_t len, int64_t *out);
int varint_get32(const uint8_t *p, size_t len, int32_t *out);

#endif
