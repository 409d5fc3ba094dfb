/* handle_target.h - for the data-path handlers (produce, fetch, list
 * offsets): which hosted replica may serve a (topic, partition), and
 * otherwise the wire error and leader hint to answer with. */
#ifndef CAIRN_HANDLE_TARGET_H
#define CAIRN_HANDLE_TARGET_H

#include "client.pb-c.h"

#include <stdbool.h>
#include <stdint.h>

#define HANDLE_MESSAGE_SIZE 512 /* room for a 249-byte topic name */
#define HANDLE_ADDRESS_SIZE 264 /* META_ADDR_MAX + 1 */

struct node;
struct part;

/* Where one (topic, partition) of a request can be served. */
struct handle_target {
  struct part *p;                /* the hosted leader replica when code is OK; borrowed,
                                  * valid until the next loop iteration */
  Cairn__Client__ErrorCode code; /* OK, SHUTTING_DOWN, UNKNOWN_TOPIC, UNKNOWN_PARTITION,
                                  * NOT_LEADER or REPLICA_NOT_AVAILABLE */
  uint64_t leader_id;            /* with NOT_LEADER: the leader as known here, 0 unknown */
  char leader_address[HANDLE_ADDRESS_SIZE]; /* its client address, "" unknown */
  char message[HANDLE_MESSAGE_SIZE];        /* why, "" with OK */
};

/* Finds the replica of (topic, partition) that may serve a data request
 * here: hosted, open, the leader, and not catching up. The leader hint is
 * the hosted replica's Raft view, else the metadata's last reported
 * leader, with that node's client address when the metadata knows it.
 * Fills t; cannot fail otherwise. Ownership: borrows topic. Context: loop
 * thread. */
void handle_find_leader(struct node *n, const char *topic, uint32_t partition,
                        struct handle_target *t);

/* handle_find_leader for reads (Fetch, ListOffsets): also refuses with
 * REPLICA_NOT_AVAILABLE while a new leader has not applied its term's first
 * entry (rgroup_leader_caught_up), when its high watermark may be behind
 * what the previous leader served. Context: loop thread. */
void handle_find_reader(struct node *n, const char *topic, uint32_t partition,
                        struct handle_target *t);

/* t's leader address as the client on c should dial it
 * (node_client_address_via): what an answer's leader_address carries.
 * Returns borrowed, valid until the next loop iteration. */
struct conn;
const char *handle_target_address(struct node *n, const struct handle_target *t,
                                  const struct conn *c);

/* Whether c may do op (META_ACL_READ, META_ACL_WRITE) on topic
 * (server/authz.h; always with authorization off). On a refusal fills t
 * with AUTHORIZATION_FAILED and the message (logged once per conn and
 * topic) and returns false. Borrows everything. Context: loop thread. */
struct conn;
bool handle_target_authorized(struct node *n, struct conn *c, const char *topic, uint32_t op,
                              struct handle_target *t);

#endif
