/* admin_actions.h - the console's actions on the admin port, each a
 * client-protocol request run through the node's own dispatch (authz and
 * the same handlers as the client port: handle_admin.c,
 * handle_group_offsets.c), so an action is exactly what the CLI's is:
 *
 *   POST /v1/actions/create-topic?name=T&partitions=N&replication_factor=R
 *   POST /v1/actions/delete-topic?name=T
 *   POST /v1/actions/add-partitions?name=T&partitions=N   (the new total)
 *   POST /v1/actions/alter-config?name=T&key=K[&value=V]
 *        (K takes V; without value, K goes back to its default: the same
 *         AlterTopicConfig as `cairn topic alter-config`)
 *   POST /v1/actions/reset-offsets?group=G&topic=T&to=earliest|latest|OFFSET
 *        [&partition=P]   (every partition of T when absent; earliest and
 *                          latest from this node's replicas, so ask the
 *                          group's coordinator, which /v1/groups names)
 *   POST /v1/actions/decommission?node=ID
 *   POST /v1/actions/recommission?node=ID
 *
 * Arguments are in the query string; a body is never read. Actions exist
 * only behind the admin token: without --admin-token-file every POST is
 * 403. The requests act as the principal ADMIN_ACTION_PRINCIPAL (with
 * --authorizer, make it a super user or grant it the ACLs).
 *
 * The answer is {"ok": true} or {"ok": false, "error": "...", "code":
 * "..."} (the wire error's name), 200 either way once the request ran;
 * 400 for bad arguments. The HTTP connection is suspended while the
 * request runs (a controller proposal, a commit to the offsets topic).
 *
 * Lifecycle of one action: admin_action_start (suspends the connection,
 * dispatches) -> the request's answer (resumes it) -> admin_action_answer
 * queues the HTTP answer -> admin_action_completed (MHD is done with the
 * connection). The action is freed when both the request has answered and
 * MHD has completed, in either order.
 *
 * Context: loop thread only. */
#ifndef CAIRN_ADMIN_ACTIONS_H
#define CAIRN_ADMIN_ACTIONS_H

#include "net/conn.h"

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

#define ADMIN_ACTION_PRINCIPAL "User:admin-port"

struct node;
struct admin_action;

/* The admin port's part of the actions: a stand-in conn the requests are
 * relayed on (never opened: it carries the principal), and the actions in
 * flight. Caller allocates; init before use. */
struct admin_actions {
  struct conn console; /* the principal of every action */
  struct admin_action *pending;
  void (*kick)(void *data); /* runs MHD soon (a resumed connection) */
  /* adds the port's headers (cross-origin) to an answer for mc */
  void (*decorate)(void *data, struct MHD_Connection *mc, struct MHD_Response *r);
  void *data; /* of kick and decorate */
};

void admin_actions_init(struct admin_actions *aa, void (*kick)(void *data),
                        void (*decorate)(void *data, struct MHD_Connection *mc,
                                         struct MHD_Response *r),
                        void *data);

/* Starts the action of url for mc (a POST whose headers are in). On
 * success *con_cls is the action (the connection suspended until its
 * answer) and MHD_YES is returned; otherwise an error answer is queued
 * (400, 404) and its result returned. */
enum MHD_Result admin_action_start(struct admin_actions *aa, struct node *n,
                                   struct MHD_Connection *mc, const char *url, void **con_cls);

/* A later call of MHD's handler for the action's connection: queues the
 * answer once there is one. */
enum MHD_Result admin_action_answer(struct admin_action *act, struct MHD_Connection *mc);

/* MHD is done with the connection (its completed callback). */
void admin_action_completed(struct admin_action *act);

/* A decimal query argument of mc in [lo, hi] into *out, dflt when absent
 * or empty; false when present and not such a number. (Also the message
 * browser's arguments.) */
bool admin_actions_query_i64(struct MHD_Connection *mc, const char *name, int64_t lo, int64_t hi,
                             int64_t dflt, int64_t *out);

/* The admin port closes: every suspended connection is resumed (MHD must
 * not stop with one suspended); actions whose request has not answered yet
 * are freed when it does. */
void admin_actions_close(struct admin_actions *aa);

#endif
