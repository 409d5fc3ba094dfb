/* admin_state.h - judgements the admin port derives from the node's state,
 * shared by the metrics, the JSON views and the readiness probe.
 *
 * Partition health, from a metadata replica (no first-hand knowledge):
 *   ADMIN_PART_OFFLINE           fewer than a majority of its replicas are on
 *                                live nodes (ALIVE or DRAINING): it can
 *                                neither elect a leader nor commit;
 *   ADMIN_PART_UNDER_REPLICATED  some replica is on a node that is not live,
 *                                or it has fewer replicas than its topic's
 *                                replication factor;
 *   ADMIN_PART_OK                otherwise.
 *
 * Context: loop thread only. */
#ifndef CAIRN_ADMIN_STATE_H
#define CAIRN_ADMIN_STATE_H

#include "cluster/meta_state.h"

#include <stdbool.h>
#include <stddef.h>

struct node;

enum admin_part_health { ADMIN_PART_OK, ADMIN_PART_UNDER_REPLICATED, ADMIN_PART_OFFLINE };

enum admin_part_health admin_part_health(const struct meta_state *st, const struct meta_topic *t,
                                         const struct meta_partition *mp);

/* "ok", "under_replicated", "offline": static strings. */
const char *admin_part_health_name(enum admin_part_health h);

/* Is the node ready to serve: running, registered in the metadata with
 * this process's incarnation, and every partition replica the metadata
 * assigns to it open and running? When not, why[0..cap) says what is
 * missing. */
bool admin_ready(struct node *n, char *why, size_t cap);

#endif
