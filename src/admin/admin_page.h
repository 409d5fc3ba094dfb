/* admin_page.h - the console served at / on the admin port: one
 * self-contained HTML document (admin_page.html: inline CSS and
 * JavaScript, no libraries, nothing fetched but the cluster's own admin
 * ports), embedded at build time (admin_page_embed.cmake). Every
 * ADMIN_PAGE_POLL_MS it reads /v1/cluster of the node serving it and
 * /v1/history of every live node (cross-origin, admin_server.c's CORS
 * rule), and on its tabs shows:
 *   Overview  the cluster summary, produce and fetch bytes per second of
 *             the whole cluster and per topic over the last hour (time
 *             axes, units), the nodes;
 *   Topics    user topics with their configuration and size, internal
 *             topics apart, every partition's leader, replicas and health;
 *   Consumer groups  every coordinator's /v1/groups: members, assignment,
 *             committed offsets and lag per partition and in total;
 *   Messages  a browser over /v1/messages (from an offset or a time; keys,
 *             headers, values as text, JSON or hex), read on the
 *             partition's leader.
 * and, behind the admin token, actions (admin_actions.h), each after an
 * in-page confirmation: create and delete topics, reset a group's
 * offsets, decommission and recommission nodes.
 *
 * Element ids the script fills (and tests look for): summary, nodes,
 * topics, topics-internal, partitions, chart-throughput, chart-topics,
 * topic-rates, groups, messages, updated, error; tabs tab-overview,
 * tab-topics, tab-groups, tab-messages; rows node-<id>,
 * part-<topic>-<partition>, topic-<name>, rate-<topic>, group-<name>,
 * group-lag-<name>, msg-<offset>. */
#ifndef CAIRN_ADMIN_PAGE_H
#define CAIRN_ADMIN_PAGE_H

#define ADMIN_PAGE_POLL_MS 3000

/* The page, NUL-terminated; static. */
extern const char admin_page_html[];

#endif
