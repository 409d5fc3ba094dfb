/* wire_err.c - internal error codes to wire ErrorCode values: one table. */
#include "net/wire_err.h"

#include "common/err.h"

#include <errno.h>
#include <stddef.h>

#define WIRE(name) CAIRN__CLIENT__ERROR_CODE__##name

/* Internal code -> wire code. Codes that say nothing a client can act on
 * (CAIRN_EINVAL, CAIRN_ENOMEM, ...) are left out: they map to UNKNOWN. */
static const struct {
  int err;
  Cairn__Client__ErrorCode code;
} wire_err_table[] = {
    {CAIRN_ETOOLARGE, WIRE(REQUEST_TOO_LARGE)},
    {CAIRN_EFRAMEEMPTY, WIRE(MALFORMED_REQUEST)},
    {CAIRN_EBADFRAME, WIRE(MALFORMED_REQUEST)},
    {CAIRN_EBADENVELOPE, WIRE(MALFORMED_REQUEST)},
    {CAIRN_EBADREQUEST, WIRE(MALFORMED_REQUEST)},
    /* A produced batch that fails batch_validate(). */
    {CAIRN_EBADLEN, WIRE(CORRUPT_BATCH)},
    {CAIRN_EBADCRC, WIRE(CORRUPT_BATCH)},
    {CAIRN_EBADMAGIC, WIRE(CORRUPT_BATCH)},
    {CAIRN_EBADCOUNT, WIRE(CORRUPT_BATCH)},
    {CAIRN_EBADVARINT, WIRE(CORRUPT_BATCH)},
    {CAIRN_EBADATTR, WIRE(CORRUPT_BATCH)},
    {CAIRN_EBADRECORD, WIRE(CORRUPT_BATCH)},
    {CAIRN_ETRUNCATED, WIRE(CORRUPT_BATCH)},
    {CAIRN_EOFFSET, WIRE(OFFSET_OUT_OF_RANGE)},
    /* The replica's disk: a latched log, damage found on disk, I/O errors. */
    {CAIRN_EFATAL, WIRE(STORAGE_ERROR)},
    {CAIRN_ECORRUPT, WIRE(STORAGE_ERROR)},
    /* A PostgreSQL store: the database failed a read, or one is running
     * (a caller that cannot wait for it answers "try again"). */
    {CAIRN_EDATABASE, WIRE(STORAGE_ERROR)},
    {CAIRN_EPENDING, WIRE(TIMEOUT)},
    {-EIO, WIRE(STORAGE_ERROR)},
    {-ENOSPC, WIRE(STORAGE_ERROR)},
    {-EDQUOT, WIRE(STORAGE_ERROR)},
    {-EROFS, WIRE(STORAGE_ERROR)},
    {CAIRN_EUNSUPPORTED, WIRE(UNSUPPORTED_VERSION)},
    {CAIRN_ENOTLEADER, WIRE(NOT_LEADER)},
    {CAIRN_ESHUTDOWN, WIRE(SHUTTING_DOWN)},
    {CAIRN_EINDOUBT, WIRE(IN_DOUBT)},
    {CAIRN_ETOOMANYCONNS, WIRE(RATE_LIMITED)},
    /* Idempotent producers: a partition's producer table refused a batch. */
    {CAIRN_EOUT_OF_ORDER, WIRE(OUT_OF_ORDER_SEQUENCE)},
    {CAIRN_EUNKNOWN_PRODUCER, WIRE(UNKNOWN_PRODUCER)},
    {CAIRN_EPRODUCER_FENCED, WIRE(PRODUCER_FENCED)},
    /* Metadata (the controller). */
    {CAIRN_ETOPIC_EXISTS, WIRE(TOPIC_EXISTS)},
    {CAIRN_EUNKNOWN_TOPIC, WIRE(UNKNOWN_TOPIC)},
    {CAIRN_EINVALID_TOPIC_NAME, WIRE(INVALID_TOPIC)},
    {CAIRN_EINVALID_RF, WIRE(INVALID_REPLICATION_FACTOR)},
    {CAIRN_EINVALID_PARTITIONS, WIRE(INVALID_PARTITIONS)},
    {CAIRN_ENODE_ID_IN_USE, WIRE(NODE_ID_IN_USE)},
    {CAIRN_ECLUSTER_ID_MISMATCH, WIRE(CLUSTER_ID_MISMATCH)},
    {CAIRN_EUNKNOWN_NODE, WIRE(UNKNOWN_NODE)},
    {CAIRN_EINTERNAL_TOPIC, WIRE(INTERNAL_TOPIC)},
    {CAIRN_EINVALID_CONFIG, WIRE(INVALID_CONFIG)},
    {CAIRN_EPOLICY, WIRE(POLICY_VIOLATION)},
    {-ETIMEDOUT, WIRE(TIMEOUT)},
    /* Consumer groups. */
    {CAIRN_ENOT_COORDINATOR, WIRE(NOT_COORDINATOR)},
    {CAIRN_ECOORDINATOR_LOADING, WIRE(COORDINATOR_LOADING)},
    {CAIRN_EUNKNOWN_MEMBER, WIRE(UNKNOWN_MEMBER_ID)},
    {CAIRN_EILLEGAL_GENERATION, WIRE(ILLEGAL_GENERATION)},
    {CAIRN_EREBALANCE, WIRE(REBALANCE_IN_PROGRESS)},
    {CAIRN_EINCONSISTENT_PROTOCOL, WIRE(INCONSISTENT_PROTOCOL)},
    {CAIRN_EGROUP_NOT_EMPTY, WIRE(GROUP_NOT_EMPTY)},
    {CAIRN_ENOT_ASSIGNED, WIRE(NOT_ASSIGNED)},
    {CAIRN_EUNKNOWN_GROUP, WIRE(UNKNOWN_GROUP)},
    {CAIRN_EINVALID_GROUP, WIRE(INVALID_GROUP)},
    {CAIRN_EFENCED_INSTANCE, WIRE(FENCED_INSTANCE_ID)},
    /* Security. */
    {CAIRN_ECLUSTER_AUTH, WIRE(CLUSTER_AUTH_FAILED)},
    {CAIRN_EAUTH, WIRE(AUTHENTICATION_FAILED)},
    {CAIRN_EUNKNOWN_USER, WIRE(UNKNOWN_USER)},
    {CAIRN_EAUTHZ, WIRE(AUTHORIZATION_FAILED)},
    {CAIRN_EUNKNOWN_ACL, WIRE(UNKNOWN_ACL)},
};

Cairn__Client__ErrorCode wire_err_from(int err)
{
  if (err == 0) {
    return WIRE(OK);
  }
  for (size_t i = 0; i < sizeof wire_err_table / sizeof wire_err_table[0]; i++) {
    if (wire_err_table[i].err == err) {
      return wire_err_table[i].code;
    }
  }
  return WIRE(UNKNOWN);
}

const char *wire_err_name(Cairn__Client__ErrorCode code)
{
  const ProtobufCEnumValue *v =
      protobuf_c_enum_descriptor_get_value(&cairn__client__error_code__descriptor, (int)code);
  return v != NULL ? v->name : "?";
}
