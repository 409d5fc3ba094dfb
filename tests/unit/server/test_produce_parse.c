/* test_produce_parse.c - produce_plan: a ProduceRequest's batch lengths cut
 * its payload in order, request-level mistakes are refused as a whole, and
 * a corrupt batch fails only its own partition. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/err.h"
#include "format/batch.h"
#include "server/produce_plan.h"
#include "testutil.h"

#define MAX_PARTS 4

/* A request over a payload made of whole test batches. */
struct fixture {
  Cairn__Client__ProduceRequest pr;
  Cairn__Client__ProducePartition parts[MAX_PARTS];
  Cairn__Client__ProducePartition *part_ptrs[MAX_PARTS];
  uint32_t lengths[MAX_PARTS][8];
  uint8_t *payload;
  size_t payload_len;
};

/* Adds partition (topic, partition) with nbatches test batches of n records,
 * tagged tag*100 + b, appended to the payload. */
static void fx_add(struct fixture *fx, const char *topic, uint32_t partition, int nbatches, int n,
                   uint64_t tag)
{
  size_t i = fx->pr.n_partitions++;
  assert_true(i < MAX_PARTS);
  Cairn__Client__ProducePartition *pp = &fx->parts[i];
  cairn__client__produce_partition__init(pp);
  pp->topic = (char *)topic;
  pp->partition = partition;
  pp->batch_lengths = fx->lengths[i];
  pp->n_batch_lengths = (size_t)nbatches;
  for (int b = 0; b < nbatches; b++) {
    size_t len;
    uint8_t *batch = tu_make_batch(tag * 100 + (uint64_t)b, n, 16, 1000, &len);
    fx->payload = realloc(fx->payload, fx->payload_len + len);
    assert_non_null(fx->payload);
    memcpy(fx->payload + fx->payload_len, batch, len);
    fx->payload_len += len;
    fx->lengths[i][b] = (uint32_t)len;
    free(batch);
  }
  fx->part_ptrs[i] = pp;
  fx->pr.partitions = fx->part_ptrs;
}

static int fx_setup(void **state)
{
  struct fixture *fx = calloc(1, sizeof *fx);
  assert_non_null(fx);
  cairn__client__produce_request__init(&fx->pr);
  *state = fx;
  return 0;
}

static int fx_teardown(void **state)
{
  struct fixture *fx = *state;
  free(fx->payload);
  free(fx);
  return 0;
}

static void test_produce_plan_slices_partitions_in_payload_order(void **state)
{
  struct fixture *fx = *state;
  fx_add(fx, "a", 0, 2, 3, 1);
  fx_add(fx, "b", 5, 1, 1, 2);
  fx_add(fx, "a", 1, 3, 2, 3);
  struct produce_plan plan;
  char msg[PRODUCE_PLAN_ERRMSG_SIZE];
  assert_int_equal(
      produce_plan_build(&plan, &fx->pr, fx->payload, fx->payload_len, msg, sizeof msg), 0);
  assert_int_equal(plan.nparts, 3);
  assert_int_equal(plan.nbatches, 6);
  const uint64_t tags[3] = {1, 2, 3};
  const int counts[3] = {3, 1, 2};
  const uint8_t *expect = fx->payload;
  for (size_t i = 0; i < plan.nparts; i++) {
    const struct produce_plan_part *pp = &plan.parts[i];
    assert_ptr_equal(pp->req, &fx->parts[i]);
    assert_int_equal(pp->nbatches, fx->parts[i].n_batch_lengths);
    assert_ptr_equal(pp->batches, &plan.batches[pp->first]);
    for (size_t b = 0; b < pp->nbatches; b++) {
      /* Each slice starts where the previous ended and holds the very
       * batch that was put there. */
      assert_ptr_equal(pp->batches[b].p, expect);
      assert_int_equal(pp->batches[b].len, fx->lengths[i][b]);
      assert_int_equal(
          tu_check_batch(pp->batches[b].p, pp->batches[b].len, tags[i] * 100 + b, counts[i], 16),
          0);
      expect += pp->batches[b].len;
    }
    assert_int_equal(produce_plan_validate_part(pp, BATCH_DEFAULT_MAX_BYTES, msg, sizeof msg), 0);
  }
  assert_ptr_equal(expect, fx->payload + fx->payload_len);
  produce_plan_free(&plan);
  assert_null(plan.parts);
  produce_plan_free(&plan); /* safe twice */
}

static void test_produce_plan_refuses_lengths_that_miss_the_payload(void **state)
{
  struct fixture *fx = *state;
  fx_add(fx, "a", 0, 2, 3, 1);
  struct produce_plan plan;
  char msg[PRODUCE_PLAN_ERRMSG_SIZE];
  /* One byte short, one byte over. */
  assert_int_equal(
      produce_plan_build(&plan, &fx->pr, fx->payload, fx->payload_len - 1, msg, sizeof msg),
      CAIRN_EBADREQUEST);
  assert_non_null(strstr(msg, "add up to"));
  assert_null(plan.parts);
  fx->lengths[0][1] += 1;
  assert_int_equal(
      produce_plan_build(&plan, &fx->pr, fx->payload, fx->payload_len, msg, sizeof msg),
      CAIRN_EBADREQUEST);
  /* Lengths whose 32-bit sum would wrap to the payload length. */
  fx->lengths[0][0] = 0xffffffffu;
  fx->lengths[0][1] = (uint32_t)(fx->payload_len + 1);
  assert_int_equal(
      produce_plan_build(&plan, &fx->pr, fx->payload, fx->payload_len, msg, sizeof msg),
      CAIRN_EBADREQUEST);
}

static void test_produce_plan_refuses_empty_requests_and_other_acks(void **state)
{
  struct fixture *fx = *state;
  struct produce_plan plan;
  char msg[PRODUCE_PLAN_ERRMSG_SIZE];
  assert_int_equal(produce_plan_build(&plan, &fx->pr, NULL, 0, msg, sizeof msg), CAIRN_EBADREQUEST);
  assert_non_null(strstr(msg, "no partitions"));
  fx_add(fx, "a", 0, 1, 1, 1);
  fx_add(fx, "a", 1, 0, 1, 2);
  assert_int_equal(
      produce_plan_build(&plan, &fx->pr, fx->payload, fx->payload_len, msg, sizeof msg),
      CAIRN_EBADREQUEST);
  assert_non_null(strstr(msg, "a/1"));
  fx->parts[1].n_batch_lengths = 1;
  fx->lengths[1][0] = 0;
  /* A zero-length batch slices fine (it fails validation below)... */
  assert_int_equal(
      produce_plan_build(&plan, &fx->pr, fx->payload, fx->payload_len, msg, sizeof msg), 0);
  assert_int_not_equal(
      produce_plan_validate_part(&plan.parts[1], BATCH_DEFAULT_MAX_BYTES, msg, sizeof msg), 0);
  produce_plan_free(&plan);
  /* ...but acks other than ACKS_ALL is refused whole. */
  fx->pr.acks = (Cairn__Client__Acks)1;
  assert_int_equal(
      produce_plan_build(&plan, &fx->pr, fx->payload, fx->payload_len, msg, sizeof msg),
      CAIRN_EBADREQUEST);
  assert_non_null(strstr(msg, "ACKS_ALL"));
}

static void test_produce_plan_corrupt_batch_fails_only_its_partition(void **state)
{
  struct fixture *fx = *state;
  fx_add(fx, "a", 0, 2, 3, 1);
  fx_add(fx, "b", 0, 3, 2, 2);
  /* Flip a byte inside the second partition's third batch, under the CRC. */
  size_t off = fx->lengths[0][0] + fx->lengths[0][1] + fx->lengths[1][0] + fx->lengths[1][1];
  fx->payload[off + BATCH_HEADER_SIZE + 2] ^= 0x40;
  struct produce_plan plan;
  char msg[PRODUCE_PLAN_ERRMSG_SIZE];
  assert_int_equal(
      produce_plan_build(&plan, &fx->pr, fx->payload, fx->payload_len, msg, sizeof msg), 0);
  assert_int_equal(
      produce_plan_validate_part(&plan.parts[0], BATCH_DEFAULT_MAX_BYTES, msg, sizeof msg), 0);
  assert_int_equal(
      produce_plan_validate_part(&plan.parts[1], BATCH_DEFAULT_MAX_BYTES, msg, sizeof msg),
      CAIRN_EBADCRC);
  assert_non_null(strstr(msg, "batch 2 of 3"));
  produce_plan_free(&plan);
}

static void test_produce_plan_refuses_batch_above_the_limit(void **state)
{
  struct fixture *fx = *state;
  fx_add(fx, "a", 0, 1, 50, 1);
  struct produce_plan plan;
  char msg[PRODUCE_PLAN_ERRMSG_SIZE];
  assert_int_equal(
      produce_plan_build(&plan, &fx->pr, fx->payload, fx->payload_len, msg, sizeof msg), 0);
  assert_int_equal(produce_plan_validate_part(&plan.parts[0], fx->lengths[0][0], msg, sizeof msg),
                   0);
  assert_int_equal(
      produce_plan_validate_part(&plan.parts[0], fx->lengths[0][0] - 1, msg, sizeof msg),
      CAIRN_ETOOLARGE);
  produce_plan_free(&plan);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_produce_plan_slices_partitions_in_payload_order,
                                      fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_produce_plan_refuses_lengths_that_miss_the_payload,
                                      fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_produce_plan_refuses_empty_requests_and_other_acks,
                                      fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_produce_plan_corrupt_batch_fails_only_its_partition,
                                      fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_produce_plan_refuses_batch_above_the_limit, fx_setup,
                                      fx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
