/* test_wire_err.c - internal codes map to the documented wire codes; every
 * ErrorCode has its schema name. */
#include "common/err.h"
#include "net/wire_err.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static void test_wire_err_maps_the_codes_clients_act_on(void **state)
{
  assert_int_equal(wire_err_from(0), CAIRN__CLIENT__ERROR_CODE__OK);
  assert_int_equal(wire_err_from(CAIRN_ETOOLARGE), CAIRN__CLIENT__ERROR_CODE__REQUEST_TOO_LARGE);
  assert_int_equal(wire_err_from(CAIRN_EBADFRAME), CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST);
  assert_int_equal(wire_err_from(CAIRN_EBADENVELOPE), CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST);
  assert_int_equal(wire_err_from(CAIRN_EBADCRC), CAIRN__CLIENT__ERROR_CODE__CORRUPT_BATCH);
  assert_int_equal(wire_err_from(CAIRN_ENOTLEADER), CAIRN__CLIENT__ERROR_CODE__NOT_LEADER);
  assert_int_equal(wire_err_from(CAIRN_EINDOUBT), CAIRN__CLIENT__ERROR_CODE__IN_DOUBT);
  assert_int_equal(wire_err_from(CAIRN_EOFFSET), CAIRN__CLIENT__ERROR_CODE__OFFSET_OUT_OF_RANGE);
  assert_int_equal(wire_err_from(CAIRN_EFATAL), CAIRN__CLIENT__ERROR_CODE__STORAGE_ERROR);
  assert_int_equal(wire_err_from(-ENOSPC), CAIRN__CLIENT__ERROR_CODE__STORAGE_ERROR);
  assert_int_equal(wire_err_from(CAIRN_EOUT_OF_ORDER),
                   CAIRN__CLIENT__ERROR_CODE__OUT_OF_ORDER_SEQUENCE);
  assert_int_equal(wire_err_from(CAIRN_EUNKNOWN_PRODUCER),
                   CAIRN__CLIENT__ERROR_CODE__UNKNOWN_PRODUCER);
  assert_int_equal(wire_err_from(CAIRN_EPRODUCER_FENCED),
                   CAIRN__CLIENT__ERROR_CODE__PRODUCER_FENCED);
  assert_int_equal(wire_err_from(-ETIMEDOUT), CAIRN__CLIENT__ERROR_CODE__TIMEOUT);
  assert_int_equal(wire_err_from(CAIRN_ESHUTDOWN), CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN);
  assert_int_equal(wire_err_from(CAIRN_ETOPIC_EXISTS), CAIRN__CLIENT__ERROR_CODE__TOPIC_EXISTS);
  assert_int_equal(wire_err_from(CAIRN_EUNKNOWN_TOPIC), CAIRN__CLIENT__ERROR_CODE__UNKNOWN_TOPIC);
  assert_int_equal(wire_err_from(CAIRN_EINVALID_RF),
                   CAIRN__CLIENT__ERROR_CODE__INVALID_REPLICATION_FACTOR);
  assert_int_equal(wire_err_from(CAIRN_EUNKNOWN_NODE), CAIRN__CLIENT__ERROR_CODE__UNKNOWN_NODE);
}

static void test_wire_err_maps_the_group_codes(void **state)
{
  assert_int_equal(wire_err_from(CAIRN_ENOT_COORDINATOR),
                   CAIRN__CLIENT__ERROR_CODE__NOT_COORDINATOR);
  assert_int_equal(wire_err_from(CAIRN_ECOORDINATOR_LOADING),
                   CAIRN__CLIENT__ERROR_CODE__COORDINATOR_LOADING);
  assert_int_equal(wire_err_from(CAIRN_EUNKNOWN_MEMBER),
                   CAIRN__CLIENT__ERROR_CODE__UNKNOWN_MEMBER_ID);
  assert_int_equal(wire_err_from(CAIRN_EILLEGAL_GENERATION),
                   CAIRN__CLIENT__ERROR_CODE__ILLEGAL_GENERATION);
  assert_int_equal(wire_err_from(CAIRN_EREBALANCE),
                   CAIRN__CLIENT__ERROR_CODE__REBALANCE_IN_PROGRESS);
  assert_int_equal(wire_err_from(CAIRN_EINCONSISTENT_PROTOCOL),
                   CAIRN__CLIENT__ERROR_CODE__INCONSISTENT_PROTOCOL);
  assert_int_equal(wire_err_from(CAIRN_EGROUP_NOT_EMPTY),
                   CAIRN__CLIENT__ERROR_CODE__GROUP_NOT_EMPTY);
  assert_int_equal(wire_err_from(CAIRN_ENOT_ASSIGNED), CAIRN__CLIENT__ERROR_CODE__NOT_ASSIGNED);
  assert_int_equal(wire_err_from(CAIRN_EUNKNOWN_GROUP), CAIRN__CLIENT__ERROR_CODE__UNKNOWN_GROUP);
  assert_int_equal(wire_err_from(CAIRN_EINVALID_GROUP), CAIRN__CLIENT__ERROR_CODE__INVALID_GROUP);
  assert_int_equal(wire_err_from(CAIRN_ECLUSTER_AUTH),
                   CAIRN__CLIENT__ERROR_CODE__CLUSTER_AUTH_FAILED);
  for (int i = 40; i <= 49; i++) {
    assert_string_not_equal(wire_err_name((Cairn__Client__ErrorCode)i), "?");
  }
}

static void test_wire_err_defaults_to_unknown(void **state)
{
  assert_int_equal(wire_err_from(CAIRN_ENOMEM), CAIRN__CLIENT__ERROR_CODE__UNKNOWN);
  assert_int_equal(wire_err_from(-EPERM), CAIRN__CLIENT__ERROR_CODE__UNKNOWN);
  assert_int_equal(wire_err_from(-99999), CAIRN__CLIENT__ERROR_CODE__UNKNOWN);
}

static void test_wire_err_names_come_from_the_schema(void **state)
{
  assert_string_equal(wire_err_name(CAIRN__CLIENT__ERROR_CODE__OK), "OK");
  assert_string_equal(wire_err_name(CAIRN__CLIENT__ERROR_CODE__NOT_LEADER), "NOT_LEADER");
  assert_string_equal(wire_err_name(CAIRN__CLIENT__ERROR_CODE__RATE_LIMITED), "RATE_LIMITED");
  assert_string_equal(wire_err_name((Cairn__Client__ErrorCode)999), "?");
  /* Every value 0..24 has a name. */
  for (int i = 0; i <= 24; i++) {
    assert_string_not_equal(wire_err_name((Cairn__Client__ErrorCode)i), "?");
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wire_err_maps_the_codes_clients_act_on),
      cmocka_unit_test(test_wire_err_maps_the_group_codes),
      cmocka_unit_test(test_wire_err_defaults_to_unknown),
      cmocka_unit_test(test_wire_err_names_come_from_the_schema),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
