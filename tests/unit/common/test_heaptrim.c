/* test_heaptrim.c - heaptrim gives back the pages of freed chunks in the
 * middle of glibc's heap once, and not again until the heap's free bytes
 * grow. Built without the sanitizers (ASan replaces malloc: there would be
 * no glibc heap to measure). */
#include "common/heaptrim.h"

#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define BLOCKS 40000
#define BLOCK 1000

/* 40 MB of small blocks, touched. */
static void **fill_heap(void)
{
  void **v = calloc(BLOCKS, sizeof *v);
  assert_non_null(v);
  for (int i = 0; i < BLOCKS; i++) {
    v[i] = malloc(BLOCK);
    assert_non_null(v[i]);
    memset(v[i], 0x5a, BLOCK);
  }
  return v;
}

/* Frees all but every 64th block: the pages between the survivors are
 * free chunks in the middle of the heap, which free() never returns. */
static void **thin(void **v)
{
  for (int i = 0; i < BLOCKS; i++) {
    if (i % 64 != 63) {
      free(v[i]);
      v[i] = NULL;
    }
  }
  return v;
}

static void release(void **v)
{
  for (int i = 0; i < BLOCKS; i++) {
    free(v[i]);
  }
  free(v);
}

static void test_trims_once_after_a_burst_and_not_again(void **state)
{
  (void)state;
  /* Keep glibc from trimming by itself while we fragment the heap. */
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  struct heaptrim h;
  heaptrim_init(&h);
  heaptrim_tick(&h, 1000); /* a quiet heap: nothing to give back */
  assert_int_equal(h.trims, 0);

  void **v = thin(fill_heap());
  heaptrim_tick(&h, 5000); /* within the period: not even looked at */
  assert_int_equal(h.trims, 0);
  heaptrim_tick(&h, 1000 + HEAPTRIM_PERIOD_MS);
  assert_int_equal(h.trims, 1);
  /* ~39 MB were freed in the middle; most of their pages go back. */
  assert_true(h.released > (uint64_t)20 << 20);
  assert_true(h.free_low >= (size_t)30 << 20);

  /* Nothing new freed: the next looks find no growth. */
  heaptrim_tick(&h, 1000 + 3 * HEAPTRIM_PERIOD_MS);
  assert_int_equal(h.trims, 1);

  /* A second burst reuses the freed memory (a look sees it in use) and
   * frees it again: trimmed again. */
  void **w = fill_heap();
  heaptrim_tick(&h, 1000 + 4 * HEAPTRIM_PERIOD_MS);
  assert_int_equal(h.trims, 1);
  assert_true(h.free_low < (size_t)30 << 20);
  thin(w);
  release(v);
  uint64_t before = h.released;
  heaptrim_tick(&h, 1000 + 5 * HEAPTRIM_PERIOD_MS);
  assert_int_equal(h.trims, 2);
  assert_true(h.released - before > (uint64_t)20 << 20);
  release(w);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trims_once_after_a_burst_and_not_again),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
