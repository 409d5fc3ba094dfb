/* admin_page.h - the status page served at / on the admin port: one
 * self-contained HTML document (inline CSS and JavaScript, no libraries,
 * nothing fetched from elsewhere) that polls /v1/cluster and /metrics of
 * the node serving it every ADMIN_PAGE_POLL_MS and draws: the nodes and
 * their state, the controller leader, the topics with their partitions'
 * leaders and replicas (under-replicated and offline ones highlighted),
 * and small canvas charts of produce and fetch throughput and of the
 * replica lag this node knows as a leader.
 *
 * Element ids the script fills (and tests look for): summary, nodes,
 * topics, chart-throughput, chart-lag, updated, error; rows it draws:
 * node-<id> per node, part-<topic>-<partition> per partition. */
#ifndef CAIRN_ADMIN_PAGE_H
#define CAIRN_ADMIN_PAGE_H

#define ADMIN_PAGE_POLL_MS 3000

/* The page, NUL-terminated; static. */
extern const char admin_page_html[];

#endif
