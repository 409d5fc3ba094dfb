/* crc32c.c - CRC-32C with the SSE4.2 instruction where present, and a
 * slicing-by-8 table fallback. */
#include "format/crc32c.h"

#include <string.h>

#define CRC32C_POLY 0x82F63B78u /* reflected Castagnoli polynomial */

static uint32_t crc32c_table[8][256];
static int crc32c_ready;
static int crc32c_have_hw;

static void crc32c_init(void)
{
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) {
      c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
    }
    crc32c_table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++) {
    for (int t = 1; t < 8; t++) {
      uint32_t prev = crc32c_table[t - 1][i];
      crc32c_table[t][i] = (prev >> 8) ^ crc32c_table[0][prev & 0xff];
    }
  }
#if defined(__x86_64__)
  __builtin_cpu_init();
  crc32c_have_hw = __builtin_cpu_supports("sse4.2");
#endif
  /* Benign race: every thread computes the same tables. */
  __atomic_store_n(&crc32c_ready, 1, __ATOMIC_RELEASE);
}

uint32_t crc32c_extend_sw(uint32_t crc, const void *buf, size_t len)
{
  if (!__atomic_load_n(&crc32c_ready, __ATOMIC_ACQUIRE)) {
    crc32c_init();
  }
  const uint8_t *p = buf;
  uint32_t c = ~crc;
  while (len >= 8) {
    uint64_t w;
    memcpy(&w, p, 8); /* little-endian hosts only; see CMake */
    w ^= c;
    c = crc32c_table[7][w & 0xff] ^ crc32c_table[6][(w >> 8) & 0xff] ^
        crc32c_table[5][(w >> 16) & 0xff] ^ crc32c_table[4][(w >> 24) & 0xff] ^
        crc32c_table[3][(w >> 32) & 0xff] ^ crc32c_table[2][(w >> 40) & 0xff] ^
        crc32c_table[1][(w >> 48) & 0xff] ^ crc32c_table[0][w >> 56];
    p += 8;
    len -= 8;
  }
  while (len-- > 0) {
    c = (c >> 8) ^ crc32c_table[0][(c ^ *p++) & 0xff];
  }
  return ~c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_extend_hw(uint32_t crc, const void *buf,
                                                                    size_t len)
{
  const uint8_t *p = buf;
  uint64_t c = ~crc;
  while (len >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c = __builtin_ia32_crc32di(c, w);
    p += 8;
    len -= 8;
  }
  uint32_t c32 = (uint32_t)c;
  while (len-- > 0) {
    c32 = __builtin_ia32_crc32qi(c32, *p++);
  }
  return ~c32;
}
#endif

uint32_t crc32c_extend(uint32_t crc, const void *buf, size_t len)
{
  if (!__atomic_load_n(&crc32c_ready, __ATOMIC_ACQUIRE)) {
    crc32c_init();
  }
#if defined(__x86_64__)
  if (crc32c_have_hw) {
    return crc32c_extend_hw(crc, buf, len);
  }
#endif
  return crc32c_extend_sw(crc, buf, len);
}
