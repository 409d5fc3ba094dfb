/* handle_group.h - what the consumer-group handlers (handle_group_*.c)
 * share: the error with its coordinator hint, and partition lists in wire
 * form. docs/consumer-groups.md describes the APIs. */
#ifndef CAIRN_HANDLE_GROUP_H
#define CAIRN_HANDLE_GROUP_H

#include "client.pb-c.h"
#include "server/group/coord.h"

#include <stddef.h>
#include <stdint.h>

#define HANDLE_GROUP_MESSAGE_SIZE 320

/* A group request's outcome in wire form. */
struct handle_group_err {
  Cairn__Client__Error e; /* e.message points at msg */
  char msg[HANDLE_GROUP_MESSAGE_SIZE];
  uint64_t coordinator_id;       /* with NOT_COORDINATOR, 0 unknown */
  char coordinator_address[264]; /* "" unknown */
};

/* Fills he from an internal code (0: OK) about group, with the coordinator
 * hint (leader_address may be NULL). Borrows the strings. */
void handle_group_err_set(struct handle_group_err *he, int err, const char *group,
                          uint64_t leader_id, const char *leader_address);

/* Finds group's coordinator slot here: 0 with *slot, or the code (he set). */
int handle_group_lookup(struct node *n, const char *group, struct coord_slot **slot,
                        struct handle_group_err *he);

/* tps[0..n) (sorted by topic index) as TopicPartitions messages. Returns 0
 * with *out (free with handle_group_tps_free) and *nout, or CAIRN_ENOMEM.
 * The topic names are borrowed from g (valid until its next change). */
int handle_group_tps(const struct group *g, const struct assign_tp *tps, size_t n,
                     Cairn__Client__TopicPartitions ***out, size_t *nout);
void handle_group_tps_free(Cairn__Client__TopicPartitions **tps, size_t n);

#endif
