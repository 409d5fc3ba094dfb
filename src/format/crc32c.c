/* crc32c.c - CRC-32C with the SSE4.2 instruction where present, and a
 * slicing-by-8 table fallback.
 *
 * The crc32 instruction has a latency of 3 cycles but can start one per
 * cycle, so the hardware path runs three independent CRCs over three
 * adjacent blocks and then joins them: the CRC of A||B is the CRC of A
 * "shifted" over len(B) zero bytes, xored with the CRC of B. Shifting over a
 * fixed length is a linear map on 32 bits, precomputed once as four
 * 256-entry tables per block length (the method Mark Adler described for
 * crc32c in zlib's style). */
#include "format/crc32c.h"

#include <string.h>

#define CRC32C_POLY 0x82F63B78u /* reflected Castagnoli polynomial */

#define CRC32C_LONG 8192 /* bytes per lane in the long interleaved loop */
#define CRC32C_SHORT 256 /* bytes per lane in the short one */

static uint32_t crc32c_table[8][256];
static uint32_t crc32c_long[4][256];  /* shift a CRC over CRC32C_LONG zero bytes */
static uint32_t crc32c_short[4][256]; /* ... over CRC32C_SHORT zero bytes */
static uint32_t crc32c_x2n[64]; /* x^(2^k) modulo the polynomial */
static int crc32c_ready;
static int crc32c_have_hw;

/* mat (a 32x32 GF(2) matrix, one column per word) times vec. */
static uint32_t crc32c_gf2_times(const uint32_t *mat, uint32_t vec)
{
  uint32_t sum = 0;
  while (vec != 0) {
    if (vec & 1) {
      sum ^= *mat;
    }
    vec >>= 1;
    mat++;
  }
  return sum;
}

static void crc32c_gf2_square(uint32_t *square, const uint32_t *mat)
{
  for (int n = 0; n < 32; n++) {
    square[n] = crc32c_gf2_times(mat, mat[n]);
  }
}

/* The operator that appends len zero bytes (len a power of two) to a CRC
 * in its internal (inverted) form, into even. */
static void crc32c_zeros_op(uint32_t *even, size_t len)
{
  uint32_t odd[32];
  odd[0] = CRC32C_POLY; /* one zero bit */
  uint32_t row = 1;
  for (int n = 1; n < 32; n++) {
    odd[n] = row;
    row <<= 1;
  }
  crc32c_gf2_square(even, odd); /* two zero bits */
  crc32c_gf2_square(odd, even); /* four */
  for (;;) {                    /* one zero byte, then doubling */
    crc32c_gf2_square(even, odd);
    len >>= 1;
    if (len == 0) {
      return;
    }
    crc32c_gf2_square(odd, even);
    len >>= 1;
    if (len == 0) {
      break;
    }
  }
  memcpy(even, odd, sizeof odd);
}

static void crc32c_zeros(uint32_t zeros[4][256], size_t len)
{
  uint32_t op[32];
  crc32c_zeros_op(op, len);
  for (uint32_t n = 0; n < 256; n++) {
    zeros[0][n] = crc32c_gf2_times(op, n);
    zeros[1][n] = crc32c_gf2_times(op, n << 8);
    zeros[2][n] = crc32c_gf2_times(op, n << 16);
    zeros[3][n] = crc32c_gf2_times(op, n << 24);
  }
}

static uint32_t crc32c_shift(uint32_t zeros[4][256], uint32_t crc)
{
  return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^ zeros[2][(crc >> 16) & 0xff] ^
         zeros[3][crc >> 24];
}

/* a times b modulo the polynomial, both in the reflected form the CRC
 * register has (bit 31 is the coefficient of x^0). */
static uint32_t crc32c_mulmod(uint32_t a, uint32_t b)
{
  uint32_t prod = 0;
  for (uint32_t m = 1u << 31; m != 0; m >>= 1) {
    if (a & m) {
      prod ^= b;
    }
    b = (b & 1) ? (b >> 1) ^ CRC32C_POLY : b >> 1; /* b times x */
  }
  return prod;
}

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
  crc32c_x2n[0] = 1u << 30; /* x^1 */
  for (int k = 1; k < 64; k++) {
    crc32c_x2n[k] = crc32c_mulmod(crc32c_x2n[k - 1], crc32c_x2n[k - 1]);
  }
  crc32c_zeros(crc32c_long, CRC32C_LONG);
  crc32c_zeros(crc32c_short, CRC32C_SHORT);
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
/* Three lanes of `block` bytes each, joined by shifting. */
__attribute__((target("sse4.2"))) static uint64_t
crc32c_hw_lanes(uint64_t c0, const uint8_t **pp, size_t *len, size_t block,
                uint32_t zeros[4][256])
{
  const uint8_t *p = *pp;
  while (*len >= 3 * block) {
    uint64_t c1 = 0, c2 = 0;
    for (const uint8_t *end = p + block; p < end; p += 8) {
      uint64_t w0, w1, w2;
      memcpy(&w0, p, 8);
      memcpy(&w1, p + block, 8);
      memcpy(&w2, p + 2 * block, 8);
      c0 = __builtin_ia32_crc32di(c0, w0);
      c1 = __builtin_ia32_crc32di(c1, w1);
      c2 = __builtin_ia32_crc32di(c2, w2);
    }
    c0 = crc32c_shift(zeros, (uint32_t)c0) ^ c1;
    c0 = crc32c_shift(zeros, (uint32_t)c0) ^ c2;
    p += 2 * block;
    *len -= 3 * block;
  }
  *pp = p;
  return c0;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_extend_hw(uint32_t crc, const void *buf,
                                                                    size_t len)
{
  const uint8_t *p = buf;
  uint64_t c = ~crc;
  c = crc32c_hw_lanes(c, &p, &len, CRC32C_LONG, crc32c_long);
  c = crc32c_hw_lanes(c, &p, &len, CRC32C_SHORT, crc32c_short);
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

/* Appending len_b bytes to A multiplies its CRC by x^(8 len_b); the
 * conditioning (~ in and out) cancels between crc_a and crc_b. */
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
  if (!__atomic_load_n(&crc32c_ready, __ATOMIC_ACQUIRE)) {
    crc32c_init();
  }
  uint32_t shift = 1u << 31; /* x^0 */
  uint64_t bits = len_b << 3;
  for (int k = 0; bits != 0 && k < 64; k++, bits >>= 1) {
    if (bits & 1) {
      shift = crc32c_mulmod(crc32c_x2n[k], shift);
    }
  }
  return crc32c_mulmod(shift, crc_a) ^ crc_b;
}
