/* handle_target.c - which hosted replica serves a data request, and if none
 * does, the error and leader hint the client gets. */
#include "server/handlers.h"
#include "server/handle_target.h"

#include "server/authz.h"
#include "server/node.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The leader hint: the replica's own view when hosted, else the metadata's
 * last reported leader. */
static void handle_target_hint(struct node *n, struct handle_target *t, struct part *p,
                               const struct meta_topic *mt, const char *topic, uint32_t partition)
{
  uint64_t id = 0;
  if (p != NULL) {
    const char *cluster_address = NULL;
    rgroup_leader(&p->rg, &id, &cluster_address);
  } else if (mt != NULL && partition < mt->npartitions) {
    id = mt->partitions[partition].leader_id;
  }
  if (id == n->cfg.node_id) {
    id = 0; /* stale: this node would be serving it */
  }
  t->leader_id = id;
  const char *addr = id != 0 ? node_client_address(n, id) : NULL;
  if (addr != NULL) {
    snprintf(t->leader_address, sizeof t->leader_address, "%s", addr);
  }
  if (id == 0) {
    snprintf(t->message, sizeof t->message, "not the leader of %s/%" PRIu32 "; leader unknown",
             topic, partition);
  } else {
    snprintf(t->message, sizeof t->message,
             "not the leader of %s/%" PRIu32 "; the leader is node %" PRIu64 " at %s", topic,
             partition, id,
             t->leader_address[0] != '\0' ? t->leader_address : "an unknown address");
  }
}

const char *handle_target_address(struct node *n, const struct handle_target *t,
                                  const struct conn *c)
{
  const char *addr = t->leader_id != 0 ? node_client_address_via(n, t->leader_id, c) : NULL;
  return addr != NULL ? addr : t->leader_address;
}

void handle_find_leader(struct node *n, const char *topic, uint32_t partition,
                        struct handle_target *t)
{
  memset(t, 0, sizeof *t);
  t->code = CAIRN__CLIENT__ERROR_CODE__OK;
  if (n->state != NODE_RUNNING) {
    t->code = CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN;
    snprintf(t->message, sizeof t->message, "node %" PRIu64 " is stopping", n->cfg.node_id);
    return;
  }
  const struct meta_topic *mt = NULL;
  struct part *p = node_find_part(n, topic, partition, &mt);
  if (p == NULL && mt == NULL && !node_meta_current(n)) {
    /* It may exist: this node has not caught up with the metadata. */
    t->code = CAIRN__CLIENT__ERROR_CODE__NOT_LEADER;
    snprintf(t->message, sizeof t->message,
             "node %" PRIu64 " is catching up with the metadata and does not know %s yet",
             n->cfg.node_id, topic);
    return;
  }
  if (p == NULL && mt == NULL) {
    t->code = CAIRN__CLIENT__ERROR_CODE__UNKNOWN_TOPIC;
    snprintf(t->message, sizeof t->message, "no topic named \"%s\"", topic);
    return;
  }
  if (p == NULL && partition >= mt->npartitions) {
    t->code = CAIRN__CLIENT__ERROR_CODE__UNKNOWN_PARTITION;
    snprintf(t->message, sizeof t->message,
             "topic %s has %" PRIu32 " partitions; there is no partition %" PRIu32, mt->name,
             mt->npartitions, partition);
    return;
  }
  if (p == NULL || p->state != PART_OPEN) {
    t->code = CAIRN__CLIENT__ERROR_CODE__NOT_LEADER;
    handle_target_hint(n, t, NULL, mt, topic, partition);
    return;
  }
  if (rgroup_is_catching_up(&p->rg)) {
    t->code = CAIRN__CLIENT__ERROR_CODE__REPLICA_NOT_AVAILABLE;
    snprintf(t->message, sizeof t->message,
             "the replica of %s/%" PRIu32 " on node %" PRIu64 " is catching up", p->topic,
             partition, n->cfg.node_id);
    return;
  }
  if (!rgroup_is_leader(&p->rg)) {
    t->code = CAIRN__CLIENT__ERROR_CODE__NOT_LEADER;
    handle_target_hint(n, t, p, mt, topic, partition);
    return;
  }
  t->p = p;
}

void handle_find_reader(struct node *n, const char *topic, uint32_t partition,
                        struct handle_target *t)
{
  handle_find_leader(n, topic, partition, t);
  if (t->code != CAIRN__CLIENT__ERROR_CODE__OK || rgroup_leader_caught_up(&t->p->rg)) {
    return;
  }
  /* A new leader whose high watermark may still be behind the previous
   * leader's: an offset a consumer already read would look out of range.
   * (A produce may go ahead: its entry queues behind the term's first.) */
  t->code = CAIRN__CLIENT__ERROR_CODE__REPLICA_NOT_AVAILABLE;
  snprintf(t->message, sizeof t->message,
           "node %" PRIu64 " leads %s/%" PRIu32 " since a moment and is still applying what "
           "earlier leaders committed: retry shortly",
           n->cfg.node_id, t->p->topic, partition);
  t->p = NULL;
}

bool handle_target_authorized(struct node *n, struct conn *c, const char *topic, uint32_t op,
                              struct handle_target *t)
{
  if (authz_check(n, c, META_ACL_TOPIC, topic, op, t->message, sizeof t->message) == 0) {
    return true;
  }
  t->p = NULL;
  t->code = CAIRN__CLIENT__ERROR_CODE__AUTHORIZATION_FAILED;
  t->leader_id = 0;
  t->leader_address[0] = '\0';
  return false;
}
