/* handle_group_common.c - errors with coordinator hints and partition
 * lists for the consumer-group handlers (handle_group.h). */
#include "server/handle_group.h"

#include "common/err.h"
#include "net/wire_err.h"
#include "server/node.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void handle_group_err_set(struct handle_group_err *he, int err, const char *group,
                          uint64_t leader_id, const char *leader_address)
{
  memset(he, 0, sizeof *he);
  cairn__client__error__init(&he->e);
  he->e.code = wire_err_from(err);
  he->e.message = he->msg;
  if (err == 0) {
    return;
  }
  he->coordinator_id = leader_id;
  snprintf(he->coordinator_address, sizeof he->coordinator_address, "%s",
           leader_address != NULL ? leader_address : "");
  if (err == CAIRN_ENOT_COORDINATOR) {
    if (leader_id != 0) {
      snprintf(he->msg, sizeof he->msg,
               "group %.150s: the coordinator is node %" PRIu64 " at %.100s", group, leader_id,
               he->coordinator_address[0] != '\0' ? he->coordinator_address : "?");
    } else {
      snprintf(he->msg, sizeof he->msg,
               "group %.200s: no coordinator known yet: retry FindCoordinator", group);
    }
    return;
  }
  snprintf(he->msg, sizeof he->msg, "group %.200s: %s", group, cairn_strerror(err));
}

int handle_group_lookup(struct node *n, const char *group, struct coord_slot **slot,
                        struct handle_group_err *he)
{
  uint64_t id = 0;
  const char *addr = NULL;
  int rv = coord_lookup(&n->coord, group, slot, &id, &addr);
  handle_group_err_set(he, rv, group, id, addr);
  return rv;
}

void handle_group_tps_free(Cairn__Client__TopicPartitions **tps, size_t n)
{
  for (size_t i = 0; tps != NULL && i < n; i++) {
    free(tps[i]->partitions);
    free(tps[i]);
  }
  free(tps);
}

int handle_group_tps(const struct group *g, const struct assign_tp *tps, size_t n,
                     Cairn__Client__TopicPartitions ***out, size_t *nout)
{
  *out = NULL;
  *nout = 0;
  Cairn__Client__TopicPartitions **v = calloc(n + 1, sizeof *v);
  if (v == NULL) {
    return CAIRN_ENOMEM;
  }
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && tps[j].topic == tps[i].topic) {
      j++;
    }
    Cairn__Client__TopicPartitions *tp = malloc(sizeof *tp);
    uint32_t *parts = malloc((j - i) * sizeof *parts);
    if (tp == NULL || parts == NULL) {
      free(tp);
      free(parts);
      handle_group_tps_free(v, k);
      return CAIRN_ENOMEM;
    }
    cairn__client__topic_partitions__init(tp);
    tp->topic = g->topics[tps[i].topic];
    for (size_t x = i; x < j; x++) {
      parts[x - i] = tps[x].partition;
    }
    tp->partitions = parts;
    tp->n_partitions = j - i;
    v[k++] = tp;
    i = j;
  }
  *out = v;
  *nout = k;
  return 0;
}
