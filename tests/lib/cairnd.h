/* cairnd.h - a cluster of real cairnd processes on loopback for
 * integration tests: ports, data dirs, start/stop by PID, and blocking
 * client-protocol calls (wire_client.h) with the retries a client needs
 * (NOT_CONTROLLER while the controller elects, NOT_LEADER hints).
 *
 * Every process is started through tests/lib/proc.h, so an atexit handler
 * kills whatever a failing test leaves behind. */
#ifndef CAIRN_TU_CAIRND_H
#define CAIRN_TU_CAIRND_H

#include "proc.h"

#include "client.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CD_MAX_NODES 8

struct cd_node {
  uint64_t id;
  int client_port;
  int cluster_port;
  int admin_port;
  bool voter;
  char dir[600];
  char log[600];
  char client_addr[64];
  char extra[512]; /* flags for this node only, after the cluster's */
  struct tu_proc proc;
};

struct cd_cluster {
  const char *bin; /* path of cairnd */
  char root[400];
  int n;           /* nodes set up (started or not) */
  int nvoters;     /* nodes [0, nvoters) are the controller voters */
  char voters[512];
  char extra[512]; /* flags added to every start, space separated */
  struct cd_node nodes[CD_MAX_NODES];
};

/* Sets up n nodes (ids 1..n) under a fresh temporary root; the first
 * nvoters are controller voters, the others join through node 0. extra:
 * flags for every node ("--node-timeout-ms 2000 ..."), may be NULL.
 * Returns 0 or -1. */
int cd_init(struct cd_cluster *c, const char *bin, int n, int nvoters, const char *extra);

/* Adds one more (non-voter) node; returns its index or -1. */
int cd_add_node(struct cd_cluster *c);

/* Starts node i (its log appended to c->nodes[i].log). Returns 0 or -1. */
int cd_start(struct cd_cluster *c, int i);

/* SIGKILL and reap. */
void cd_kill(struct cd_cluster *c, int i);

/* SIGTERM; returns the exit status (or -1 if it did not exit within
 * timeout_ms, then it is killed). */
int cd_term(struct cd_cluster *c, int i, int timeout_ms);

bool cd_running(const struct cd_cluster *c, int i);

/* Stops everything (SIGKILL) and removes the root unless
 * CAIRN_KEEP_TEST_DIR is set (then prints it). */
void cd_destroy(struct cd_cluster *c);

/* The partition log directory of node i's replica of topic's partition p
 * (<node dir>/partitions/<topic>-<p>.<id>/log) into out; the test fails if
 * there is none. */
void cd_replica_log_dir(struct cd_cluster *c, int i, const char *topic, uint32_t p, char *out,
                        size_t n);

/* One request to node i: sends req (+payload), waits for the answer.
 * Returns 0 with *resp (free with cairn__client__envelope__free_unpacked)
 * and, if payload_out is not NULL, the payload (free()), or a negative
 * code (connection refused, timeout...). */
int cd_call(struct cd_cluster *c, int i, Cairn__Client__Envelope *req, const void *payload,
            size_t payload_len, int timeout_ms, Cairn__Client__Envelope **resp,
            uint8_t **payload_out, size_t *payload_len_out);

/* Metadata from node i; NULL on failure. Free with
 * cairn__client__envelope__free_unpacked(env, NULL) through *env_out. */
Cairn__Client__MetadataResponse *cd_metadata(struct cd_cluster *c, int i,
                                             Cairn__Client__Envelope **env_out);

/* Waits until node i answers Metadata listing every node in want_alive
 * (ids) as "alive" with a cluster id. Returns 0 or -1 on timeout. */
int cd_wait_alive(struct cd_cluster *c, int i, const uint64_t *want_alive, size_t n,
                  int timeout_ms);

/* Starts every node set up (0..c->n-1) and waits until node 0 lists them
 * all alive. Returns 0, the failing cd_start's code, or -1 on timeout. */
int cd_start_all(struct cd_cluster *c, int timeout_ms);

/* Creates a topic through node i, retrying while the controller elects
 * (NOT_CONTROLLER). Returns the wire error code (0 = OK) or -1 when no
 * answer came within timeout_ms; msg (may be NULL) gets the message. */
int cd_create_topic(struct cd_cluster *c, int i, const char *name, uint32_t partitions,
                    uint32_t rf, int timeout_ms, char *msg, size_t msglen);

/* Waits until every partition of topic is led by its preferred replica
 * (replicas[0]), where leadership settles a few seconds after a topic is
 * made: a test that pins a partition's leader or a group's coordinator
 * needs it not to move afterwards. Returns 0, or -1 after timeout_ms. */
int cd_wait_settled(struct cd_cluster *c, const char *topic, int timeout_ms);

/* Waits until, for every partition of topic, each running node hosting a
 * replica reports the same log end for it (its store's next offset, which
 * its Metadata answer gives first hand): the replicas have applied the
 * same batches. What a test waits for after a restart, before it stops
 * the nodes to compare their logs, instead of a fixed sleep. Returns 0, or
 * -1 after timeout_ms. */
int cd_wait_replicas_equal(struct cd_cluster *c, const char *topic, int timeout_ms);

/* Waits until every running node hosting a replica of topic/partition
 * reports its log start as start (its Metadata answer, first hand): every
 * replica has applied a DeleteRecords. Returns 0, or -1 after timeout_ms. */
int cd_wait_replicas_start(struct cd_cluster *c, const char *topic, uint32_t partition,
                           int64_t start, int timeout_ms);

/* The value of an unlabeled metric in the /metrics of the admin port
 * (plain HTTP, no token), or -1 when absent or unreachable. */
long long cd_metric(int admin_port, const char *name);

/* The index of node id, or -1. */
/* Prints to stderr, for each node, the last max_lines lines of its log
 * that contain substr: what a failing test shows of the nodes' side. */
void cd_print_log_lines(const struct cd_cluster *c, const char *substr, int max_lines);

int cd_index(const struct cd_cluster *c, uint64_t id);

/* Produces one batch to (topic, partition), asking any running node for
 * the leader and following NOT_LEADER, until it is acknowledged or
 * timeout_ms passes. Returns 0 with *base_offset, or the last wire error
 * code (positive), or -1. IN_DOUBT is returned as such (the caller decides). */
int cd_produce(struct cd_cluster *c, const char *topic, uint32_t partition, const void *batch,
               size_t len, int timeout_ms, int64_t *base_offset);

/* Fetches from offset at the partition's leader; returns 0 with the raw
 * batches (owned, free()) or a wire code / -1. */
int cd_fetch(struct cd_cluster *c, const char *topic, uint32_t partition, int64_t offset,
             uint32_t max_bytes, int timeout_ms, uint8_t **data, size_t *len,
             int64_t *high_watermark);

#endif
