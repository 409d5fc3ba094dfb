/* metrics_node.h - the node's metrics as the admin port serves them: the
 * periodic samples (replica lag, Raft terms) and the Prometheus text
 * exposition (format 0.0.4) of the counters in n->metrics together with
 * what is read from the node's state when scraped. docs/operations.md
 * lists every metric.
 *
 * Context: loop thread only. */
#ifndef CAIRN_METRICS_NODE_H
#define CAIRN_METRICS_NODE_H

#include "admin/admin_buf.h"

struct node;

/* Every METRICS_LAG_SAMPLE_MS (the admin port's timer): notes each hosted
 * group's Raft term (elections), records a lag sample for each partition
 * this node leads, and forgets counters of partitions no longer hosted.
 * (metrics_sample.c) */
void metrics_node_sample(struct node *n);

/* Writes every metric into b. (metrics_text.c) */
void metrics_node_write(struct node *n, struct admin_buf *b);

#endif
