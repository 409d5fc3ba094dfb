/* testutil.c - shared unit-test fixtures. */
#include "testutil.h"

#include "common/fsutil.h"
#include "format/batch.h"
#include "format/batch_builder.h"
#include "format/crc32c.h"
#include "format/endian.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void tu_die(const char *what)
{
  fprintf(stderr, "testutil: %s\n", what);
  abort();
}

char *tu_tmpdir(const char *tag)
{
  const char *base = getenv("TMPDIR");
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/cairn-%s-XXXXXX", base ? base : "/tmp", tag);
  if (mkdtemp(path) == NULL) {
    tu_die("mkdtemp failed");
  }
  return strdup(path);
}

void tu_tmpdir_free(char *dir)
{
  if (dir == NULL) {
    return;
  }
  if (fs_remove_tree(dir) != 0) {
    fprintf(stderr, "testutil: could not remove %s\n", dir);
  }
  free(dir);
}

uint64_t tu_seed(const char *test_name)
{
  const char *env = getenv("CAIRN_TEST_SEED");
  uint64_t seed;
  if (env != NULL) {
    seed = strtoull(env, NULL, 10);
  } else {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
  }
  if (seed == 0) {
    seed = 1;
  }
  printf("%s: seed: %llu (replay with CAIRN_TEST_SEED=%llu)\n", test_name,
         (unsigned long long)seed, (unsigned long long)seed);
  fflush(stdout);
  return seed;
}

uint64_t tu_rand(uint64_t *state)
{
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static void tu_fill_value(uint8_t *v, size_t n, uint64_t tag, int i)
{
  uint64_t s = (tag * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)i + 1);
  for (size_t k = 0; k < n; k++) {
    if (k % 8 == 0) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
    }
    v[k] = (uint8_t)(s >> (8 * (k % 8)));
  }
}

uint8_t *tu_make_batch(uint64_t tag, int n, size_t value_size, int64_t ts, size_t *len)
{
  struct batch_builder b;
  if (batch_builder_init(&b, BATCH_DEFAULT_MAX_BYTES) != 0) {
    tu_die("builder init");
  }
  uint8_t *v = malloc(value_size + 1);
  for (int i = 0; i < n; i++) {
    char key[64];
    int kl = snprintf(key, sizeof key, "k%llu-%d", (unsigned long long)tag, i);
    tu_fill_value(v, value_size, tag, i);
    if (batch_builder_add(&b, ts + i, key, (size_t)kl, v, value_size, NULL, 0) != 0) {
      tu_die("builder add");
    }
  }
  free(v);
  uint8_t *out;
  if (batch_builder_finish(&b, &out, len) != 0) {
    tu_die("builder finish");
  }
  batch_builder_close(&b);
  return out;
}

int tu_check_batch(const uint8_t *p, size_t len, uint64_t tag, int n, size_t value_size)
{
  if (batch_validate(p, len, BATCH_DEFAULT_MAX_BYTES, NULL, 0) != 0) {
    return -1;
  }
  struct batch_iter it;
  if (batch_iter_init(&it, p, len) != 0 || it.h.record_count != n) {
    return -1;
  }
  uint8_t *v = malloc(value_size + 1);
  struct batch_record r;
  int i = 0;
  int rv = 0;
  while (batch_iter_next(&it, &r) == 1) {
    char key[64];
    int kl = snprintf(key, sizeof key, "k%llu-%d", (unsigned long long)tag, i);
    tu_fill_value(v, value_size, tag, i);
    if (r.key_len != (size_t)kl || memcmp(r.key, key, (size_t)kl) != 0 ||
        r.value_len != value_size || memcmp(r.value, v, value_size) != 0) {
      rv = -1;
      break;
    }
    i++;
  }
  free(v);
  return rv == 0 && i == n ? 0 : -1;
}

uint8_t *tu_read_region(int fd, int64_t pos, size_t len)
{
  uint8_t *buf = malloc(len + 1);
  size_t got = 0;
  if (fs_pread_full(fd, buf, len, pos, &got) != 0 || got != len) {
    free(buf);
    return NULL;
  }
  return buf;
}

static void tu_path(char *buf, size_t n, const char *dir, const char *name)
{
  snprintf(buf, n, "%s/%s", dir, name);
}

int64_t tu_file_size(const char *dir, const char *name)
{
  char p[PATH_MAX];
  tu_path(p, sizeof p, dir, name);
  struct stat st;
  return stat(p, &st) == 0 ? (int64_t)st.st_size : -1;
}

void tu_truncate(const char *dir, const char *name, int64_t size)
{
  char p[PATH_MAX];
  tu_path(p, sizeof p, dir, name);
  if (truncate(p, size) != 0) {
    tu_die("truncate");
  }
}

void tu_write_at(const char *dir, const char *name, int64_t pos, const void *buf, size_t len)
{
  char p[PATH_MAX];
  tu_path(p, sizeof p, dir, name);
  int fd = open(p, O_WRONLY | O_CREAT, 0644);
  if (fd < 0 || fs_pwrite_all(fd, buf, len, pos) != 0) {
    tu_die("write_at");
  }
  close(fd);
}

void tu_read_at(const char *dir, const char *name, int64_t pos, void *buf, size_t len)
{
  char p[PATH_MAX];
  tu_path(p, sizeof p, dir, name);
  int fd = open(p, O_RDONLY);
  size_t got = 0;
  if (fd < 0 || fs_pread_full(fd, buf, len, pos, &got) != 0 || got != len) {
    tu_die("read_at");
  }
  close(fd);
}

const char *tu_segname(char *buf, int64_t base, const char *ext)
{
  snprintf(buf, 40, "%020lld.%s", (long long)base, ext);
  return buf;
}

void tu_stamp_batch(uint8_t *b, size_t len, int64_t producer_id, int16_t epoch, int32_t seq)
{
  le_put64(b + BATCH_OFF_PRODUCER_ID, (uint64_t)producer_id);
  le_put16(b + BATCH_OFF_PRODUCER_EPOCH, (uint16_t)epoch);
  le_put32(b + BATCH_OFF_BASE_SEQUENCE, (uint32_t)seq);
  le_put32(b + BATCH_OFF_CRC, crc32c(b + BATCH_CRC_START, len - BATCH_CRC_START));
}
