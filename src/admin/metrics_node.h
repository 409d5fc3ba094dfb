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
struct part;

/* A hosted replica p applied entries or started leading: if it leads, a lag
 * sample of its log now, or, if the last one is too recent, at a later
 * metrics_node_sample. Cheap: p's own state only. (metrics_sample.c) */
void metrics_node_applied(struct node *n, struct part *p);

/* Every METRICS_LAG_SAMPLE_MS (the admin port's timer): takes the lag
 * samples metrics_node_applied left due; every METRICS_TERM_SAMPLES calls, and when the
 * hosted set changed, notes each hosted group's Raft term (elections) and
 * forgets counters of partitions no longer hosted. An idle node's sample
 * touches no replica. (metrics_sample.c) */
void metrics_node_sample(struct node *n);

/* Writes every metric into b. (metrics_text.c) */
void metrics_node_write(struct node *n, struct admin_buf *b);

/* Writes the process_* series (from /proc/self), the data directory's
 * filesystem and cairn_build_info into b. (metrics_proc.c) */
void metrics_node_write_process(struct node *n, struct admin_buf *b);

#endif
