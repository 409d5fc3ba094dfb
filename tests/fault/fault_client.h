/* fault_client.h - the blocking calls the fault rig's programs make to a
 * cluster whose nodes are listed as ID@HOST:PORT (client ports): Metadata,
 * leader lookup, CreateTopic, DecommissionNode, one Produce attempt and one
 * Fetch, each over a fresh connection (tests/lib/wire_client.h), so a node
 * killed or cut off mid-call costs one timeout and nothing else.
 *
 * Context: every function may be called from any thread; a struct fc_nodes
 * is read-only after fc_nodes_parse. */
#ifndef CAIRN_FAULT_CLIENT_H
#define CAIRN_FAULT_CLIENT_H

#include "client.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FC_MAX_NODES 8

struct fc_nodes {
  int n;
  uint64_t id[FC_MAX_NODES];
  char addr[FC_MAX_NODES][64];
};

/* The outcome of one produce attempt. */
enum fc_outcome {
  FC_ACK,           /* acknowledged at *offset */
  FC_FAIL,          /* definitely not written (refused before any append) */
  FC_INDETERMINATE, /* may or may not be written (IN_DOUBT, TIMEOUT, lost answer) */
};

/* Parses "1@10.77.0.1:7400,2@..." into ns. Returns 0 or -1. */
int fc_nodes_parse(struct fc_nodes *ns, const char *list);

/* The index of node id in ns, or -1. */
int fc_index(const struct fc_nodes *ns, uint64_t id);

/* Milliseconds on the monotonic clock. */
long long fc_now_ms(void);

/* One request to addr and its answer within timeout_ms. Returns 0 with
 * *resp (owned: free with cairn__client__envelope__free_unpacked) and, when
 * payload_out is not NULL, the payload (owned: free()); or a negative code;
 * *sent says whether the request left entirely (a failure after that is
 * an unknown outcome). Borrows req and payload. */
int fc_call(const char *addr, Cairn__Client__Envelope *req, const void *payload, size_t len,
            int timeout_ms, Cairn__Client__Envelope **resp, uint8_t **payload_out,
            size_t *payload_len_out, bool *sent);

/* Metadata from node index i; NULL on failure. Returns borrowed from *env
 * (owned: free with cairn__client__envelope__free_unpacked). */
Cairn__Client__MetadataResponse *fc_metadata(const struct fc_nodes *ns, int i,
                                             Cairn__Client__Envelope **env);

/* A partition as one node's Metadata describes it. */
struct fc_partition {
  int leader;        /* node index, -1: none named */
  uint64_t replicas; /* a bit per node index */
  int64_t log_start; /* -1 when the node cannot tell */
  int64_t high_watermark;
};

/* (topic, partition) as node index i's Metadata says. Returns 0 with *out,
 * or -1 (no answer, or the partition is not in it). */
int fc_partition_info(const struct fc_nodes *ns, int i, const char *topic, uint32_t partition,
                      struct fc_partition *out);

/* The leader of (topic, partition) as the first answering node (starting
 * at node index `first`) says: a node index, or -1. */
int fc_find_leader(const struct fc_nodes *ns, int first, const char *topic, uint32_t partition);

/* As fc_find_leader, but node index avoid (silent: paused or cut off) is
 * not asked, and a node that names it as the leader is not believed at
 * once: the partition's other replicas are asked, as they learn a new
 * leader first hand, while a node that hosts no replica names the leader
 * the metadata group last recorded (which cannot change while the
 * controller is on the silent node). Returns avoid only if every node
 * that answered named it, -1 if none named a leader. */
int fc_find_leader_avoiding(const struct fc_nodes *ns, int first, const char *topic,
                            uint32_t partition, int avoid);

/* The controller leader's node index as the first answering node says, or -1. */
int fc_find_controller(const struct fc_nodes *ns);

/* CreateTopic through any node, with config (NULL: the defaults), retrying
 * while the controller elects, until timeout_ms. Returns the wire code (0;
 * TOPIC_EXISTS counts as 0) or -1 with no answer. Borrows config. */
int fc_create_topic(const struct fc_nodes *ns, const char *topic, uint32_t partitions, uint32_t rf,
                    const Cairn__Client__TopicConfig *config, int timeout_ms);

/* DecommissionNode(id) through any node, retrying NOT_CONTROLLER until
 * timeout_ms. Returns the wire code or -1. */
int fc_decommission(const struct fc_nodes *ns, uint64_t id, int timeout_ms);

/* InitProducerId (a new id) through any node, retrying while the
 * controller elects, until timeout_ms. Returns 0 with *producer_id and
 * *epoch, the wire code (UNSUPPORTED_API: the nodes offer no idempotence),
 * or -1 with no answer. */
int fc_init_producer(const struct fc_nodes *ns, int timeout_ms, int64_t *producer_id,
                     int16_t *epoch);

/* One produce of batch to node index i, waiting answer_ms for the answer
 * (the node's own produce timeout is 5 s). Returns the outcome; *code gets
 * the wire code (or a negative transport code), *offset the base offset
 * on FC_ACK, *hint the NOT_LEADER hint's node index or -1. Borrows batch. */
enum fc_outcome fc_produce_once(const struct fc_nodes *ns, int i, const char *topic,
                                uint32_t partition, const uint8_t *batch, size_t len,
                                int answer_ms, int *code, int64_t *offset, int *hint);

/* One fetch at node index i from offset. Returns 0 with *data (owned:
 * free(); NULL when empty), *len and *hw; a positive wire code; or a
 * negative transport code. *log_start gets the partition's log start when
 * the node answered for it (also with OFFSET_OUT_OF_RANGE), else -1. */
int fc_fetch_once(const struct fc_nodes *ns, int i, const char *topic, uint32_t partition,
                  int64_t offset, uint32_t max_bytes, uint8_t **data, size_t *len, int64_t *hw,
                  int64_t *log_start);

/* One DeleteRecords of (topic, partition) below offset, sent to node index
 * i, which has answer_ms to apply it. Returns the outcome (FC_FAIL: not
 * proposed; FC_INDETERMINATE: it may still be applied); *code gets the
 * wire code (or a negative transport code), *low_watermark the log start
 * after it on FC_ACK, else -1. */
enum fc_outcome fc_delete_records(const struct fc_nodes *ns, int i, const char *topic,
                                  uint32_t partition, int64_t offset, int answer_ms, int *code,
                                  int64_t *low_watermark);

#endif
