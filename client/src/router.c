/* router.c - where a partition's requests go (its leader, from the
 * metadata cache) and what a node's answer means for a retry: the one
 * table from wire error codes to library codes, and which codes are worth
 * retrying within a deadline. */
#include "internal.h"

#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int lc_route(struct cairn_client *c, const char *topic, int32_t partition,
             uint64_t since_generation, const char **addr)
{
  bool fresh = c->meta.generation > since_generation;
  const struct lc_topic *t = lc_meta_topic(c, topic);
  if (t == NULL) {
    return fresh ? CAIRN_EUNKNOWN_TOPIC : LC_ROUTE_WAIT;
  }
  if (partition < 0 || partition >= t->count) {
    return fresh ? CAIRN_EUNKNOWN_PARTITION : LC_ROUTE_WAIT;
  }
  uint64_t leader = t->parts[partition].leader_id;
  const char *a = leader != 0 ? lc_meta_node_addr(c, leader) : NULL;
  if (a == NULL) {
    return LC_ROUTE_WAIT;
  }
  *addr = a;
  return 0;
}

/* Wire ErrorCode (proto/client.proto) to library code; stable both ways. */
static const int lc_wire_table[] = {
    [CAIRN__CLIENT__ERROR_CODE__OK] = 0,
    [CAIRN__CLIENT__ERROR_CODE__UNKNOWN] = CAIRN_EREMOTE,
    [CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST] = CAIRN_EBADREQUEST,
    [CAIRN__CLIENT__ERROR_CODE__UNSUPPORTED_VERSION] = CAIRN_EUNSUPPORTED,
    [CAIRN__CLIENT__ERROR_CODE__UNSUPPORTED_API] = CAIRN_EUNSUPPORTED,
    [CAIRN__CLIENT__ERROR_CODE__REQUEST_TOO_LARGE] = CAIRN_ETOOLARGE,
    [CAIRN__CLIENT__ERROR_CODE__NOT_LEADER] = CAIRN_ENOTLEADER,
    [CAIRN__CLIENT__ERROR_CODE__UNKNOWN_TOPIC] = CAIRN_EUNKNOWN_TOPIC,
    [CAIRN__CLIENT__ERROR_CODE__UNKNOWN_PARTITION] = CAIRN_EUNKNOWN_PARTITION,
    [CAIRN__CLIENT__ERROR_CODE__OFFSET_OUT_OF_RANGE] = CAIRN_EOFFSET,
    [CAIRN__CLIENT__ERROR_CODE__TOPIC_EXISTS] = CAIRN_ETOPIC_EXISTS,
    [CAIRN__CLIENT__ERROR_CODE__INVALID_TOPIC] = CAIRN_EINVALID_TOPIC_NAME,
    [CAIRN__CLIENT__ERROR_CODE__INVALID_REPLICATION_FACTOR] = CAIRN_EINVALID_RF,
    [CAIRN__CLIENT__ERROR_CODE__INVALID_PARTITIONS] = CAIRN_EINVALID_PARTITIONS,
    [CAIRN__CLIENT__ERROR_CODE__CORRUPT_BATCH] = CAIRN_ECORRUPT,
    [CAIRN__CLIENT__ERROR_CODE__TIMEOUT] = CAIRN_EREQUEST_TIMEOUT,
    [CAIRN__CLIENT__ERROR_CODE__IN_DOUBT] = CAIRN_EINDOUBT,
    [CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER] = CAIRN_ENOT_CONTROLLER,
    [CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN] = CAIRN_ESHUTDOWN,
    [CAIRN__CLIENT__ERROR_CODE__NODE_ID_IN_USE] = CAIRN_ENODE_ID_IN_USE,
    [CAIRN__CLIENT__ERROR_CODE__CLUSTER_ID_MISMATCH] = CAIRN_ECLUSTER_ID_MISMATCH,
    [CAIRN__CLIENT__ERROR_CODE__UNKNOWN_NODE] = CAIRN_EUNKNOWN_NODE,
    [CAIRN__CLIENT__ERROR_CODE__STORAGE_ERROR] = CAIRN_ESTORAGE,
    [CAIRN__CLIENT__ERROR_CODE__REPLICA_NOT_AVAILABLE] = CAIRN_EREPLICA_NOT_AVAILABLE,
    [CAIRN__CLIENT__ERROR_CODE__RATE_LIMITED] = CAIRN_ERATE_LIMITED,
    [CAIRN__CLIENT__ERROR_CODE__OUT_OF_ORDER_SEQUENCE] = CAIRN_EOUT_OF_ORDER,
    [CAIRN__CLIENT__ERROR_CODE__UNKNOWN_PRODUCER] = CAIRN_EUNKNOWN_PRODUCER,
    [CAIRN__CLIENT__ERROR_CODE__PRODUCER_FENCED] = CAIRN_EPRODUCER_FENCED,
    [CAIRN__CLIENT__ERROR_CODE__INTERNAL_TOPIC] = CAIRN_EINTERNAL_TOPIC,
    [CAIRN__CLIENT__ERROR_CODE__INVALID_CONFIG] = CAIRN_EINVALID_CONFIG,
    [CAIRN__CLIENT__ERROR_CODE__POLICY_VIOLATION] = CAIRN_EPOLICY,
    [CAIRN__CLIENT__ERROR_CODE__NOT_COORDINATOR] = CAIRN_ENOT_COORDINATOR,
    [CAIRN__CLIENT__ERROR_CODE__COORDINATOR_LOADING] = CAIRN_ECOORDINATOR_LOADING,
    [CAIRN__CLIENT__ERROR_CODE__UNKNOWN_MEMBER_ID] = CAIRN_EUNKNOWN_MEMBER,
    [CAIRN__CLIENT__ERROR_CODE__ILLEGAL_GENERATION] = CAIRN_EILLEGAL_GENERATION,
    [CAIRN__CLIENT__ERROR_CODE__REBALANCE_IN_PROGRESS] = CAIRN_EREBALANCE,
    [CAIRN__CLIENT__ERROR_CODE__INCONSISTENT_PROTOCOL] = CAIRN_EINCONSISTENT_PROTOCOL,
    [CAIRN__CLIENT__ERROR_CODE__GROUP_NOT_EMPTY] = CAIRN_EGROUP_NOT_EMPTY,
    [CAIRN__CLIENT__ERROR_CODE__NOT_ASSIGNED] = CAIRN_ENOT_ASSIGNED,
    [CAIRN__CLIENT__ERROR_CODE__UNKNOWN_GROUP] = CAIRN_EUNKNOWN_GROUP,
    [CAIRN__CLIENT__ERROR_CODE__INVALID_GROUP] = CAIRN_EINVALID_GROUP,
    [CAIRN__CLIENT__ERROR_CODE__FENCED_INSTANCE_ID] = CAIRN_EFENCED_INSTANCE,
    [CAIRN__CLIENT__ERROR_CODE__CLUSTER_AUTH_FAILED] = CAIRN_ECLUSTER_AUTH,
    [CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED] = CAIRN_EAUTH,
    [CAIRN__CLIENT__ERROR_CODE__UNKNOWN_USER] = CAIRN_EUNKNOWN_USER,
    [CAIRN__CLIENT__ERROR_CODE__AUTHORIZATION_FAILED] = CAIRN_EAUTHZ,
    [CAIRN__CLIENT__ERROR_CODE__UNKNOWN_ACL] = CAIRN_EUNKNOWN_ACL,
};

int lc_wire_err(int wire_code)
{
  if (wire_code < 0 || (size_t)wire_code >= sizeof lc_wire_table / sizeof lc_wire_table[0]) {
    return CAIRN_EREMOTE;
  }
  int e = lc_wire_table[wire_code];
  return e == 0 && wire_code != 0 ? CAIRN_EREMOTE : e;
}

bool lc_is_errno(int err) { return err < 0 && err > -4096 && err != UV_ECANCELED; }

bool lc_retriable(int err)
{
  switch (err) {
  case CAIRN_ENOTLEADER:
  case CAIRN_EREQUEST_TIMEOUT:
  case CAIRN_EINDOUBT:
  case CAIRN_ENOT_CONTROLLER:
  case CAIRN_ESHUTDOWN:
  case CAIRN_ESTORAGE:
  case CAIRN_EREPLICA_NOT_AVAILABLE:
  case CAIRN_ERATE_LIMITED:
  case CAIRN_ECLOSED:
  case CAIRN_EUNREACHABLE:
  case CAIRN_ENOT_COORDINATOR:
  case CAIRN_ECOORDINATOR_LOADING:
    return true;
  default:
    return lc_is_errno(err);
  }
}

bool lc_needs_refresh(int err)
{
  switch (err) {
  case CAIRN_ENOTLEADER:
  case CAIRN_EREQUEST_TIMEOUT:
  case CAIRN_EINDOUBT:
  case CAIRN_ESHUTDOWN:
  case CAIRN_ESTORAGE:
  case CAIRN_EREPLICA_NOT_AVAILABLE:
  case CAIRN_ECLOSED:
    return true;
  default:
    return lc_is_errno(err);
  }
}

void lc_strlcpy(char *dst, const char *src, size_t n)
{
  if (n == 0) {
    return;
  }
  if (src == NULL) {
    src = "";
  }
  size_t l = strlen(src);
  if (l >= n) {
    l = n - 1;
  }
  memcpy(dst, src, l);
  dst[l] = '\0';
}

void lc_fmt(char *buf, size_t n, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, n, fmt, ap); /* truncation is fine: these are messages */
  va_end(ap);
}
