/* dispatch.c - the one table from a request's api to its handler. */
#include "server/handlers.h"
#include "server/authz.h"

#include <stddef.h>

typedef void (*dispatch_fn)(struct node *n, struct conn_request *req);

struct dispatch_entry {
  Cairn__Client__Api api;
  Cairn__Client__Envelope__BodyCase body; /* the request body it must carry */
  dispatch_fn fn;
};

static const struct dispatch_entry dispatch_table[] = {
    {CAIRN__CLIENT__API__API_HELLO, CAIRN__CLIENT__ENVELOPE__BODY_HELLO_REQ, handle_hello},
    {CAIRN__CLIENT__API__API_METADATA, CAIRN__CLIENT__ENVELOPE__BODY_METADATA_REQ, handle_metadata},
    {CAIRN__CLIENT__API__API_CREATE_TOPIC, CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_REQ,
     handle_create_topic},
    {CAIRN__CLIENT__API__API_DELETE_TOPIC, CAIRN__CLIENT__ENVELOPE__BODY_DELETE_TOPIC_REQ,
     handle_delete_topic},
    {CAIRN__CLIENT__API__API_ADD_PARTITIONS, CAIRN__CLIENT__ENVELOPE__BODY_ADD_PARTITIONS_REQ,
     handle_add_partitions},
    {CAIRN__CLIENT__API__API_ALTER_TOPIC_CONFIG,
     CAIRN__CLIENT__ENVELOPE__BODY_ALTER_TOPIC_CONFIG_REQ, handle_alter_topic_config},
    {CAIRN__CLIENT__API__API_LIST_TOPICS, CAIRN__CLIENT__ENVELOPE__BODY_LIST_TOPICS_REQ,
     handle_list_topics},
    {CAIRN__CLIENT__API__API_DESCRIBE_TOPIC, CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_TOPIC_REQ,
     handle_describe_topic},
    {CAIRN__CLIENT__API__API_PRODUCE, CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_REQ, handle_produce},
    {CAIRN__CLIENT__API__API_FETCH, CAIRN__CLIENT__ENVELOPE__BODY_FETCH_REQ, handle_fetch},
    {CAIRN__CLIENT__API__API_LIST_OFFSETS, CAIRN__CLIENT__ENVELOPE__BODY_LIST_OFFSETS_REQ,
     handle_list_offsets},
    {CAIRN__CLIENT__API__API_DELETE_RECORDS, CAIRN__CLIENT__ENVELOPE__BODY_DELETE_RECORDS_REQ,
     handle_delete_records},
    {CAIRN__CLIENT__API__API_DESCRIBE_CLUSTER, CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_CLUSTER_REQ,
     handle_describe_cluster},
    {CAIRN__CLIENT__API__API_DECOMMISSION_NODE, CAIRN__CLIENT__ENVELOPE__BODY_DECOMMISSION_REQ,
     handle_decommission},
    {CAIRN__CLIENT__API__API_FIND_COORDINATOR, CAIRN__CLIENT__ENVELOPE__BODY_FIND_COORDINATOR_REQ,
     handle_find_coordinator},
    {CAIRN__CLIENT__API__API_JOIN_GROUP, CAIRN__CLIENT__ENVELOPE__BODY_JOIN_GROUP_REQ,
     handle_join_group},
    {CAIRN__CLIENT__API__API_SYNC_GROUP, CAIRN__CLIENT__ENVELOPE__BODY_SYNC_GROUP_REQ,
     handle_sync_group},
    {CAIRN__CLIENT__API__API_HEARTBEAT, CAIRN__CLIENT__ENVELOPE__BODY_HEARTBEAT_REQ,
     handle_heartbeat},
    {CAIRN__CLIENT__API__API_LEAVE_GROUP, CAIRN__CLIENT__ENVELOPE__BODY_LEAVE_GROUP_REQ,
     handle_leave_group},
    {CAIRN__CLIENT__API__API_OFFSET_COMMIT, CAIRN__CLIENT__ENVELOPE__BODY_OFFSET_COMMIT_REQ,
     handle_offset_commit},
    {CAIRN__CLIENT__API__API_OFFSET_FETCH, CAIRN__CLIENT__ENVELOPE__BODY_OFFSET_FETCH_REQ,
     handle_offset_fetch},
    {CAIRN__CLIENT__API__API_LIST_GROUPS, CAIRN__CLIENT__ENVELOPE__BODY_LIST_GROUPS_REQ,
     handle_list_groups},
    {CAIRN__CLIENT__API__API_DESCRIBE_GROUPS, CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_GROUPS_REQ,
     handle_describe_groups},
    {CAIRN__CLIENT__API__API_RESET_OFFSETS, CAIRN__CLIENT__ENVELOPE__BODY_RESET_OFFSETS_REQ,
     handle_reset_offsets},
    {CAIRN__CLIENT__API__API_NODE_REGISTER, CAIRN__CLIENT__ENVELOPE__BODY_NODE_REGISTER_REQ,
     handle_node_register},
    {CAIRN__CLIENT__API__API_INIT_PRODUCER_ID, CAIRN__CLIENT__ENVELOPE__BODY_INIT_PRODUCER_ID_REQ,
     handle_init_producer_id},
    {CAIRN__CLIENT__API__API_NODE_HEARTBEAT, CAIRN__CLIENT__ENVELOPE__BODY_NODE_HEARTBEAT_REQ,
     handle_node_heartbeat},
    {CAIRN__CLIENT__API__API_AUTHENTICATE, CAIRN__CLIENT__ENVELOPE__BODY_AUTHENTICATE_REQ,
     handle_authenticate},
    {CAIRN__CLIENT__API__API_UPSERT_USER, CAIRN__CLIENT__ENVELOPE__BODY_UPSERT_USER_REQ,
     handle_upsert_user},
    {CAIRN__CLIENT__API__API_DELETE_USER, CAIRN__CLIENT__ENVELOPE__BODY_DELETE_USER_REQ,
     handle_delete_user},
    {CAIRN__CLIENT__API__API_LIST_USERS, CAIRN__CLIENT__ENVELOPE__BODY_LIST_USERS_REQ,
     handle_list_users},
    {CAIRN__CLIENT__API__API_ADD_ACL, CAIRN__CLIENT__ENVELOPE__BODY_ADD_ACL_REQ, handle_add_acl},
    {CAIRN__CLIENT__API__API_REMOVE_ACL, CAIRN__CLIENT__ENVELOPE__BODY_REMOVE_ACL_REQ,
     handle_remove_acl},
    {CAIRN__CLIENT__API__API_LIST_ACLS, CAIRN__CLIENT__ENVELOPE__BODY_LIST_ACLS_REQ,
     handle_list_acls},
};

void dispatch_request(struct node *n, struct conn_request *req)
{
  for (size_t i = 0; i < sizeof dispatch_table / sizeof dispatch_table[0]; i++) {
    const struct dispatch_entry *e = &dispatch_table[i];
    if (e->api != req->api) {
      continue;
    }
    if (req->env->body_case != e->body) {
      conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST,
                         "the envelope's body does not match its api");
      return;
    }
    if (req->api_version > 1) {
      conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNSUPPORTED_VERSION,
                         "api version 1 is the only one offered");
      return;
    }
    if (!authz_request(n, req)) {
      return; /* refused and answered */
    }
    e->fn(n, req);
    return;
  }
  conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNSUPPORTED_API, "unknown api");
}
