/* metrics_text.c - the Prometheus text exposition (format 0.0.4) of the
 * node's metrics: its counters (metrics.h) and what is read, when scraped,
 * from the client port, the hosted Raft groups, their stores and the
 * metadata. See metrics_node.h; docs/operations.md lists every metric.
 *
 * Counters summed over hosted groups (snapshots, catch-up bytes) drop when
 * a replica moves away; Prometheus' rate() treats a drop as a reset. */
#include "admin/metrics_node.h"

#include "admin/admin_state.h"
#include "admin/metrics.h"
#include "cluster/rgroup_pace.h"
#include "kafka/kafka_port.h"
#include "server/node.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Latency buckets exported: powers of two microseconds, 2^7 (128 us) to
 * 2^25 (33.5 s), each an exact bucket bound of metrics_hist. */
#define METRICS_TEXT_LE_MIN_LOG2 7
#define METRICS_TEXT_LE_MAX_LOG2 25

static void metrics_text_family(struct admin_buf *b, const char *name, const char *type,
                                const char *help)
{
  admin_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A metric without labels: its family (HELP, TYPE) and its one sample. */
static void metrics_text_scalar(struct admin_buf *b, const char *name, const char *type,
                                const char *help, uint64_t value)
{
  metrics_text_family(b, name, type, help);
  admin_buf_printf(b, "%s %" PRIu64 "\n", name, value);
}

/* The node-wide bound on Raft's entries in memory (cluster/rgroup_mem.h). */
static void metrics_text_raft_memory(struct node *n, struct admin_buf *b)
{
  const struct rgroup_mem *m = &n->parts.mem;
  metrics_text_scalar(b, "cairn_raft_log_memory_bytes", "gauge",
                      "Bytes of entries the hosted replicas' Raft holds in memory, estimated "
                      "(from up to 16 of each group's entries, sampled) at the last tick.",
                      m->bytes);
  metrics_text_scalar(b, "cairn_raft_log_memory_budget_bytes", "gauge",
                      "The node's bound on those bytes (--raft-log-node-budget-bytes; 0: none).",
                      m->budget);
  metrics_text_family(b, "cairn_raft_log_memory_scale", "gauge",
                      "What each group's Raft log budget and the quiet compaction's floor are "
                      "multiplied by to keep the node under its bound (1: not pressed).");
  admin_buf_printf(b, "cairn_raft_log_memory_scale %.6f\n", m->scale);
}

/* A label value with Prometheus' escapes (\\, \", \n). */
static void metrics_text_label_value(struct admin_buf *b, const char *v)
{
  for (const char *p = v; *p != '\0'; p++) {
    if (*p == '\\' || *p == '"') {
      char esc[2] = {'\\', *p};
      admin_buf_put(b, esc, 2);
    } else if (*p == '\n') {
      admin_buf_puts(b, "\\n");
    } else {
      admin_buf_put(b, p, 1);
    }
  }
}

/* A lower-case copy of an enum value name without its prefix:
 * "API_PRODUCE" -> "produce", "NOT_LEADER" -> "not_leader". */
static void metrics_text_enum_name(const ProtobufCEnumDescriptor *d, int v, const char *prefix,
                                   char *out, size_t cap)
{
  const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, v);
  if (ev == NULL) {
    snprintf(out, cap, "%d", v);
    return;
  }
  const char *s = ev->name;
  size_t plen = strlen(prefix);
  if (strncmp(s, prefix, plen) == 0) {
    s += plen;
  }
  size_t i = 0;
  for (; s[i] != '\0' && i + 1 < cap; i++) {
    out[i] = (char)tolower((unsigned char)s[i]);
  }
  out[i] = '\0';
}

/* ---- node ---- */

/* One latency histogram (microseconds) of family name, labelled api, in
 * seconds at the exported bucket bounds. */
static void metrics_text_latency(struct admin_buf *b, const char *name, const char *api,
                                 const struct metrics_hist *h)
{
  for (int e = METRICS_TEXT_LE_MIN_LOG2; e <= METRICS_TEXT_LE_MAX_LOG2; e++) {
    uint64_t le_us = (uint64_t)1 << e;
    admin_buf_printf(b, "%s_bucket{api=\"%s\",le=\"%" PRIu64 ".%06" PRIu64 "\"} %" PRIu64 "\n",
                     name, api, le_us / 1000000, le_us % 1000000, metrics_hist_count_le(h, le_us));
  }
  admin_buf_printf(b, "%s_bucket{api=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name, api, h->count);
  admin_buf_printf(b, "%s_sum{api=\"%s\"} %" PRIu64 ".%06" PRIu64 "\n", name, api, h->sum / 1000000,
                   h->sum % 1000000);
  admin_buf_printf(b, "%s_count{api=\"%s\"} %" PRIu64 "\n", name, api, h->count);
}

/* The Kafka port's requests by Kafka's own api and error names (as its
 * brokers' RequestMetrics name them); CLOSED: closed without an answer. */
static void metrics_text_kafka_requests(struct node *n, struct admin_buf *b)
{
  const struct metrics *m = &n->metrics;
  metrics_text_family(b, "cairn_kafka_requests_total", "counter",
                      "Kafka port requests, by api and the first error code the answer carries "
                      "(NONE: none; CLOSED: the connection was closed instead).");
  for (unsigned api = 0; api < METRICS_KAFKA_API_SLOTS; api++) {
    char an[24];
    const char *aname = kafka_api_name((int)api);
    if (aname == NULL) {
      snprintf(an, sizeof an, api + 1 < METRICS_KAFKA_API_SLOTS ? "%u" : "other", api);
      aname = an;
    }
    for (unsigned slot = 0; slot < METRICS_KAFKA_CODE_SLOTS; slot++) {
      if (m->kafka_requests[api][slot] == 0) {
        continue;
      }
      bool answered;
      int code;
      metrics_kafka_slot_code(slot, &answered, &code);
      char cn[24];
      const char *cname = answered ? kafka_err_name(code) : "CLOSED";
      if (cname == NULL) {
        snprintf(cn, sizeof cn, "%d", code);
        cname = cn;
      }
      admin_buf_printf(b, "cairn_kafka_requests_total{api=\"%s\",code=\"%s\"} %" PRIu64 "\n", aname,
                       cname, m->kafka_requests[api][slot]);
    }
  }
  metrics_text_family(b, "cairn_kafka_request_duration_seconds", "histogram",
                      "Kafka port Produce and Fetch: time from dispatch to the answer being "
                      "queued (a Fetch includes its long-poll wait).");
  static const char *const names[METRICS_LAT_COUNT] = {"Produce", "Fetch"};
  for (int k = 0; k < METRICS_LAT_COUNT; k++) {
    metrics_text_latency(b, "cairn_kafka_request_duration_seconds", names[k], &m->kafka_latency[k]);
  }
  metrics_text_family(b, "cairn_kafka_connections", "gauge", "Open Kafka port connections.");
  admin_buf_printf(b, "cairn_kafka_connections %u\n", n->kafka_on ? n->kafka_lis.nconns : 0);
  metrics_text_scalar(b, "cairn_kafka_connections_accepted_total", "counter",
                      "Kafka port connections accepted.", n->kafka_on ? n->kafka_lis.accepted : 0);
}

static void metrics_text_requests(struct node *n, struct admin_buf *b)
{
  const struct metrics *m = &n->metrics;
  metrics_text_family(b, "cairn_requests_total", "counter",
                      "Client requests answered, by api and the answer's error code.");
  for (unsigned api = 0; api < METRICS_API_SLOTS; api++) {
    for (unsigned code = 0; code < METRICS_CODE_SLOTS; code++) {
      if (m->requests[api][code] == 0) {
        continue;
      }
      char an[48], cn[48];
      metrics_text_enum_name(&cairn__client__api__descriptor, (int)api, "API_", an, sizeof an);
      metrics_text_enum_name(&cairn__client__error_code__descriptor, (int)code, "", cn, sizeof cn);
      admin_buf_printf(b, "cairn_requests_total{api=\"%s\",code=\"%s\"} %" PRIu64 "\n", an, cn,
                       m->requests[api][code]);
    }
  }
  metrics_text_family(b, "cairn_request_duration_seconds", "histogram",
                      "Time from a request's dispatch to its answer being queued (a fetch "
                      "includes its long-poll wait).");
  static const char *const names[METRICS_LAT_COUNT] = {"produce", "fetch"};
  for (int k = 0; k < METRICS_LAT_COUNT; k++) {
    metrics_text_latency(b, "cairn_request_duration_seconds", names[k], &m->latency[k]);
  }
  metrics_text_scalar(b, "cairn_slow_requests_total", "counter",
                      "Requests answered later than slow_request_ms (each logged with its "
                      "phases).",
                      m->slow_requests);
}

static void metrics_text_client_port(struct node *n, struct admin_buf *b)
{
  const struct metrics *m = &n->metrics;
  metrics_text_family(b, "cairn_client_connections", "gauge", "Open client connections.");
  admin_buf_printf(b, "cairn_client_connections %u\n", n->lis.nconns);
  metrics_text_scalar(b, "cairn_client_connections_accepted_total", "counter",
                      "Client connections accepted.", n->lis.accepted);
  metrics_text_scalar(b, "cairn_client_connections_rejected_total", "counter",
                      "Client connections closed at once because max_connections were open.",
                      n->lis.rejected);
  metrics_text_scalar(b, "cairn_client_connections_rejected_per_address_total", "counter",
                      "Client connections refused over --max-connections-per-ip (also counted "
                      "in cairn_client_connections_rejected_total).",
                      n->lis.rejected_per_ip);
  metrics_text_scalar(b, "cairn_client_frames_timed_out_total", "counter",
                      "Client connections closed for a request frame not complete within "
                      "--frame-timeout-ms.",
                      n->lis.frames_timed_out);
  metrics_text_scalar(b, "cairn_client_request_budget_bytes", "gauge",
                      "Request bytes received and not yet answered, all client connections "
                      "together (--max-queued-request-bytes bounds it).",
                      n->request_budget.used);
  metrics_text_scalar(b, "cairn_client_request_budget_waits_total", "counter",
                      "Times a client connection stopped reading because the request budget "
                      "was spent.",
                      n->request_budget.waits);
  metrics_text_scalar(b, "cairn_client_reads_held_total", "counter",
                      "Times the client and Kafka ports stopped reading new requests because "
                      "the queue to a peer node was long (admission control, net/admit.h).",
                      n->admit.holds);
  metrics_text_family(b, "cairn_client_reads_held_seconds_total", "counter",
                      "Time the client and Kafka ports spent not reading for that.");
  admin_buf_printf(b, "cairn_client_reads_held_seconds_total %.6f\n",
                   admit_held_seconds(&n->admit));
  metrics_text_scalar(b, "cairn_peer_queue_peak_bytes", "gauge",
                      "The largest queue of bytes to a peer node seen since start.",
                      n->admit.peak_queued);
  metrics_text_scalar(b, "cairn_client_received_bytes_total", "counter",
                      "Request frame bytes received from clients (counted when answered).",
                      m->bytes_in);
  metrics_text_scalar(b, "cairn_client_sent_bytes_total", "counter",
                      "Answer bytes queued for clients (frames and payloads).", m->bytes_out);
}

/* Sums over the hosted partition groups. */
struct metrics_text_sums {
  uint64_t roles[4]; /* leader, follower, candidate, other */
  uint64_t snapshots_taken, snapshots_sent, snapshots_installed, recoveries, prompt_elections;
  uint64_t second_votes_withheld, second_leaders, compactions, below_snapshot, log_trimmed;
  uint64_t snapshots_held;
  uint64_t barriers, results_held, results_clamped;
  uint64_t catchup_in, catchup_out, log_bytes, catching_up;
  uint64_t quiesced, quiesces, coalesced, raft_sent;
};

static void metrics_text_sum(struct node *n, struct metrics_text_sums *s)
{
  memset(s, 0, sizeof *s);
  for (size_t i = 0; i < n->parts.n; i++) {
    struct rgroup *rg = &n->parts.v[i]->rg;
    int role = 3;
    if (rg->raft_open && !rg->raft_closing) {
      int st = raft_state(&rg->raft);
      role = st == RAFT_LEADER ? 0 : st == RAFT_FOLLOWER ? 1 : st == RAFT_CANDIDATE ? 2 : 3;
    }
    s->roles[role]++;
    s->snapshots_taken += rg->snapshots;
    s->snapshots_sent += rg->snapshots_sent;
    s->snapshots_installed += rg->restores;
    s->recoveries += rg->recoveries;
    s->prompt_elections += rg->elections_prompted;
    s->second_votes_withheld += rg->second_votes_withheld;
    s->second_leaders += rg->second_leaders;
    s->below_snapshot += rg->below_snapshot;
    s->snapshots_held += rg->snapshots_held;
    s->log_trimmed += rg->log_trimmed;
    s->barriers += rg->barriers;
    s->results_held += rg->results_held;
    s->results_clamped += rg->clamp.clamped;
    s->compactions += rg->compactions;
    s->catchup_in += rgroup_catchup_fetched(rg);
    s->catchup_out += rg->fetch.served_bytes;
    s->catching_up += rgroup_is_catching_up(rg) ? 1 : 0;
    s->quiesced += rgroup_pace_idle(rg) ? 1 : 0;
    s->quiesces += rg->pace_quiesces;
    s->coalesced += rg->coal_quiet ? 1 : 0;
    s->raft_sent += rg->raft_sent;
    struct store_info si;
    store_info(rgroup_store(rg), &si);
    s->log_bytes += si.size_bytes;
  }
}

static void metrics_text_raft(struct node *n, struct admin_buf *b)
{
  struct metrics_text_sums s;
  metrics_text_sum(n, &s);
  metrics_text_family(b, "cairn_raft_groups", "gauge",
                      "Hosted partition Raft groups by this replica's role.");
  static const char *const roles[4] = {"leader", "follower", "candidate", "unavailable"};
  for (int i = 0; i < 4; i++) {
    admin_buf_printf(b, "cairn_raft_groups{role=\"%s\"} %" PRIu64 "\n", roles[i], s.roles[i]);
  }
  metrics_text_scalar(b, "cairn_raft_groups_catching_up", "gauge",
                      "Hosted replicas fetching their log from a peer after a snapshot.",
                      s.catching_up);
  metrics_text_scalar(b, "cairn_raft_groups_quiesced", "gauge",
                      "Hosted groups led by this node on the idle heartbeat (nothing to "
                      "replicate).",
                      s.quiesced);
  metrics_text_scalar(b, "cairn_raft_quiesces_total", "counter",
                      "Times a leader hosted here dropped to the idle heartbeat.", s.quiesces);
  metrics_text_scalar(b, "cairn_raft_groups_coalesced", "gauge",
                      "Hosted groups led by this node whose Raft heartbeats are stopped: the "
                      "node's coalesced heartbeat stands in (cluster/hbeat.h).",
                      s.coalesced);
  metrics_text_scalar(b, "cairn_raft_messages_sent_total", "counter",
                      "Raft messages the hosted partition replicas sent (of the replicas open "
                      "now).",
                      s.raft_sent);
  const struct raftmux *mx = &n->mx;
  metrics_text_family(b, "cairn_raftmux_frames_total", "counter",
                      "Partition Raft messages over the per-peer connection (--raft-mux, "
                      "cluster/raftmux.h), by outcome: sent (queued), dropped (not connected, "
                      "queue full, too large), received (handed to a group), unknown (no such "
                      "group open here), malformed (its connection closed).");
  admin_buf_printf(b, "cairn_raftmux_frames_total{outcome=\"sent\"} %" PRIu64 "\n", mx->sent);
  admin_buf_printf(b, "cairn_raftmux_frames_total{outcome=\"dropped\"} %" PRIu64 "\n", mx->dropped);
  admin_buf_printf(b, "cairn_raftmux_frames_total{outcome=\"received\"} %" PRIu64 "\n",
                   mx->received);
  admin_buf_printf(b, "cairn_raftmux_frames_total{outcome=\"unknown\"} %" PRIu64 "\n", mx->unknown);
  admin_buf_printf(b, "cairn_raftmux_frames_total{outcome=\"malformed\"} %" PRIu64 "\n",
                   mx->malformed);
  metrics_text_scalar(b, "cairn_raftmux_held_total", "counter",
                      "Partition Raft messages held until their group's term or vote record "
                      "was durable (group commit of term and vote, cluster/riow_mux.h).",
                      mx->held);
  const struct hbeat *hb = &n->hb;
  metrics_text_scalar(b, "cairn_coalesced_beats_sent_total", "counter",
                      "Coalesced heartbeat frames sent to peer nodes.", hb->beats_sent);
  metrics_text_scalar(b, "cairn_coalesced_beat_groups_sent_total", "counter",
                      "(group, peer) pairs named in the coalesced heartbeats sent.",
                      hb->entries_sent);
  metrics_text_scalar(b, "cairn_coalesced_beats_received_total", "counter",
                      "Coalesced heartbeat frames received from peer nodes.", hb->beats_received);
  metrics_text_family(b, "cairn_coalesced_beat_groups_total", "counter",
                      "Groups named in coalesced heartbeats received, by this follower's answer.");
  admin_buf_printf(b, "cairn_coalesced_beat_groups_total{answer=\"accepted\"} %" PRIu64 "\n",
                   hb->accepted);
  admin_buf_printf(b, "cairn_coalesced_beat_groups_total{answer=\"refused\"} %" PRIu64 "\n",
                   hb->refused);
  metrics_text_scalar(b, "cairn_coalesced_wakes_total", "counter",
                      "Coalesced groups led here sent back to Raft's heartbeats (refused, "
                      "unanswered or unsendable beat).",
                      hb->woken);
  metrics_text_scalar(b, "cairn_coalesced_silent_leaders_total", "counter",
                      "Times a node that beat this one stopped beating it: its asleep "
                      "followers here went back to the fast tick.",
                      hb->silent_leaders);
  metrics_text_scalar(b, "cairn_coalesced_full_beats_total", "counter",
                      "Beats that looked at every coalesced group led here (every 25th, or "
                      "after a follower was out of reach or asked for everything again).",
                      hb->scans);
  metrics_text_scalar(b, "cairn_coalesced_beat_gaps_total", "counter",
                      "Beats received here after one from the same node was missed: what it "
                      "vouched for here no longer holds until it names it again (cluster/vouch.h).",
                      hb->gaps);
  metrics_text_scalar(b, "cairn_coalesced_beat_resets_total", "counter",
                      "Answers asking this node to name every group again.", hb->resets);
  metrics_text_scalar(b, "cairn_coalesced_frames_unsent_total", "counter",
                      "Beat and answer frames the connection to a peer refused (its queue "
                      "full): a beat's groups go back to Raft's heartbeats.",
                      hb->unsent);
  const struct rgroup_ticker *tk = &n->parts.ticker;
  metrics_text_family(b, "cairn_raft_groups_asleep", "gauge",
                      "Hosted groups ticked only every slow period (an election timeout): "
                      "idle, kept by the coalesced heartbeat (cluster/rgroup_ticker.h).");
  admin_buf_printf(b, "cairn_raft_groups_asleep %zu\n", rgroup_ticker_asleep(tk));
  metrics_text_family(b, "cairn_raft_ticker_moves_total", "counter",
                      "Hosted groups moved between the fast and the slow tick.");
  admin_buf_printf(b, "cairn_raft_ticker_moves_total{to=\"asleep\"} %" PRIu64 "\n", tk->sleeps);
  admin_buf_printf(b, "cairn_raft_ticker_moves_total{to=\"awake\"} %" PRIu64 "\n", tk->wakes);
  metrics_text_scalar(b, "cairn_raft_elections_total", "counter",
                      "Raft term changes seen in the hosted groups and the metadata group "
                      "(each is an election).",
                      n->metrics.elections);
  metrics_text_scalar(b, "cairn_raft_prompt_elections_total", "counter",
                      "Elections hosted replicas started at once because their leader's node "
                      "was seen gone (docs/replication.md, \"Failover\").",
                      s.prompt_elections);
  metrics_text_scalar(b, "cairn_raft_second_votes_withheld_total", "counter",
                      "RequestVotes hosted replicas kept from raft 0.15: the target of their "
                      "leadership transfer asking for a vote in a term they already voted in "
                      "(docs/replication.md, \"Raft 0.15 weak spots\").",
                      s.second_votes_withheld);
  metrics_text_scalar(b, "cairn_raft_same_term_leaders_total", "counter",
                      "AppendEntries or InstallSnapshots of a hosted leader's own term from "
                      "another replica, dropped (never expected: two leaders of one term).",
                      s.second_leaders);
  metrics_text_scalar(b, "cairn_raft_below_snapshot_total", "counter",
                      "AppendEntries hosted followers took as a heartbeat at their snapshot: "
                      "the leader probed below it (docs/replication.md, \"Raft 0.15 weak "
                      "spots\").",
                      s.below_snapshot);
  metrics_text_scalar(b, "cairn_raft_snapshots_held_total", "counter",
                      "InstallSnapshot messages hosted followers held until their own snapshot "
                      "was done (raft 0.15 drops them unanswered; docs/raft-0.15.md).",
                      s.snapshots_held);
  metrics_text_scalar(b, "cairn_heap_trims_total", "counter",
                      "Times the node gave the pages of freed heap memory back to the kernel "
                      "after the heap's free bytes grew by 2 MiB (malloc_trim, "
                      "src/common/heaptrim.h).",
                      n->heaptrim.trims);
  metrics_text_scalar(b, "cairn_heap_released_bytes_total", "counter",
                      "Resident bytes those trims gave back.", n->heaptrim.released);
  metrics_text_scalar(b, "cairn_raft_log_trimmed_bytes_total", "counter",
                      "Bytes of raft 0.15's in-memory log tables (entry reference counts, the "
                      "entries' array) hosted replicas gave back after raft_start and when "
                      "falling asleep: raft itself only grows them (docs/raft-0.15.md).",
                      s.log_trimmed);
  metrics_text_scalar(b, "cairn_raft_barriers_total", "counter",
                      "Barrier entries hosted replicas appended as they started to lead a term "
                      "(docs/raft-0.15.md, \"The figure 8 fix\").",
                      s.barriers);
  metrics_text_scalar(b, "cairn_raft_results_held_total", "counter",
                      "AppendEntries results hosted leaders dropped until their term's first "
                      "entry was on disk (docs/raft-0.15.md, \"The figure 8 fix\").",
                      s.results_held);
  metrics_text_scalar(b, "cairn_raft_results_clamped_total", "counter",
                      "AppendEntries answers of hosted followers cut back to what the message "
                      "verified (raft 0.15 counted a stale tail; docs/raft-0.15.md).",
                      s.results_clamped);
  metrics_text_scalar(b, "cairn_raft_quiet_compactions_total", "counter",
                      "Barriers hosted leaders proposed to compact a quiet group's Raft log to "
                      "one entry (docs/replication.md, \"Quiet groups compact their log\").",
                      s.compactions);
  metrics_text_raft_memory(n, b);
  metrics_text_scalar(b, "cairn_nodes_seen_gone_total", "counter",
                      "Times a peer node's process was seen gone (its watch connection dropped "
                      "and a new one failed).",
                      n->nw.gone);
  metrics_text_scalar(b, "cairn_node_watch_blips_total", "counter",
                      "Watch connections to a peer node that dropped while the node still "
                      "accepted a new one (no election).",
                      n->nw.blips);
  metrics_text_scalar(b, "cairn_raft_snapshots_taken_total", "counter",
                      "Snapshots taken by hosted replicas.", s.snapshots_taken);
  metrics_text_scalar(b, "cairn_raft_snapshots_sent_total", "counter",
                      "InstallSnapshot messages sent by hosted leaders.", s.snapshots_sent);
  metrics_text_scalar(b, "cairn_raft_snapshots_installed_total", "counter",
                      "Snapshots installed (restored) by hosted replicas.", s.snapshots_installed);
  metrics_text_scalar(b, "cairn_raft_recoveries_total", "counter",
                      "Raft instances reopened after a failed write.", s.recoveries);
  metrics_text_family(b, "cairn_raft_replicas_refused", "gauge",
                      "Hosted replicas whose Raft files were refused, waiting to be rebuilt "
                      "from their peers (docs/fault-tolerance.md).");
  admin_buf_printf(b, "cairn_raft_replicas_refused %zu\n", n->parts.ndamaged);
  metrics_text_scalar(b, "cairn_raft_replicas_rebuilt_total", "counter",
                      "Refused replicas whose Raft files this node moved aside to rejoin empty.",
                      n->parts.rebuilds);
  metrics_text_scalar(b, "cairn_catchup_received_bytes_total", "counter",
                      "Log bytes fetched from peers by catching-up replicas.", s.catchup_in);
  metrics_text_scalar(b, "cairn_catchup_served_bytes_total", "counter",
                      "Log bytes served to catching-up peers.", s.catchup_out);
  metrics_text_scalar(b, "cairn_log_bytes", "gauge",
                      "Bytes of record batches held by the hosted partition logs.", s.log_bytes);
}

/* ---- partitions ---- */

static void metrics_text_part_labels(struct admin_buf *b, const struct part *p)
{
  admin_buf_puts(b, "{topic=\"");
  metrics_text_label_value(b, p->topic);
  admin_buf_printf(b, "\",partition=\"%" PRIu32 "\"", p->partition);
}

/* The per-partition series, one value each per hosted replica. */
enum metrics_text_pm {
  MT_HIGH_WATERMARK,
  MT_LOG_START,
  MT_SIZE,
  MT_LEADER,
  MT_PRODUCED_BYTES,
  MT_PRODUCED_BATCHES,
  MT_FETCHED_BYTES,
  MT_FETCHES,
  MT_STORE_FAILED,
  MT_COUNT
};

static const struct {
  const char *name, *type, *help;
} metrics_text_pms[MT_COUNT] = {
    [MT_HIGH_WATERMARK] = {"cairn_partition_high_watermark", "gauge",
                           "Next offset of the hosted replica's log (everything below is "
                           "committed)."},
    [MT_LOG_START] = {"cairn_partition_log_start_offset", "gauge",
                      "First offset still held by the hosted replica's log."},
    [MT_SIZE] = {"cairn_partition_size_bytes", "gauge",
                 "Bytes of record batches held by the hosted replica's log."},
    [MT_LEADER] = {"cairn_partition_leader", "gauge",
                   "1 when this node's replica leads the partition, else 0."},
    [MT_PRODUCED_BYTES] = {"cairn_partition_produced_bytes_total", "counter",
                           "Batch bytes acknowledged to producers by this node as leader."},
    [MT_PRODUCED_BATCHES] = {"cairn_partition_produced_batches_total", "counter",
                             "Batches acknowledged to producers by this node as leader."},
    [MT_FETCHED_BYTES] = {"cairn_partition_fetched_bytes_total", "counter",
                          "Record bytes answered to consumers by this node as leader."},
    [MT_FETCHES] = {"cairn_partition_fetches_total", "counter",
                    "Partition reads answered to consumers by this node as leader."},
    [MT_STORE_FAILED] = {"cairn_partition_store_failed", "gauge",
                         "1 when the hosted replica's store failed a write (a file write or "
                         "fsync, or a PostgreSQL statement: the node's log, /v1/cluster and "
                         "cairn cluster status say why) and the replica stopped applying, else "
                         "0."},
};

static int64_t metrics_text_pm_value(struct node *n, struct part *p, enum metrics_text_pm k)
{
  struct store_info si;
  store_info(rgroup_store(&p->rg), &si);
  const struct metrics_part *mp = metrics_part(&n->metrics, p->group_id);
  struct metrics_part zero = {0};
  if (mp == NULL) {
    mp = &zero;
  }
  switch (k) {
  case MT_HIGH_WATERMARK:
    return si.next_offset;
  case MT_LOG_START:
    return si.start_offset;
  case MT_SIZE:
    return (int64_t)si.size_bytes;
  case MT_LEADER:
    return rgroup_is_leader(&p->rg) ? 1 : 0;
  case MT_PRODUCED_BYTES:
    return (int64_t)mp->produced_bytes;
  case MT_PRODUCED_BATCHES:
    return (int64_t)mp->produced_batches;
  case MT_FETCHED_BYTES:
    return (int64_t)mp->fetched_bytes;
  case MT_FETCHES:
    return (int64_t)mp->fetches;
  case MT_STORE_FAILED: {
    struct rgroup_store_failure sf;
    rgroup_store_failure(&p->rg, &sf);
    return sf.failed ? 1 : 0;
  }
  case MT_COUNT:
    break;
  }
  return 0;
}

static void metrics_text_partitions(struct node *n, struct admin_buf *b)
{
  for (int k = 0; k < MT_COUNT; k++) {
    metrics_text_family(b, metrics_text_pms[k].name, metrics_text_pms[k].type,
                        metrics_text_pms[k].help);
    for (size_t i = 0; i < n->parts.n; i++) {
      struct part *p = n->parts.v[i];
      admin_buf_puts(b, metrics_text_pms[k].name);
      metrics_text_part_labels(b, p);
      admin_buf_printf(b, "} %" PRId64 "\n", metrics_text_pm_value(n, p, (enum metrics_text_pm)k));
    }
  }
}

/* Per follower of each partition this node leads. */
static void metrics_text_lag(struct node *n, struct admin_buf *b)
{
  static const char *const names[3] = {"cairn_partition_replica_lag_entries",
                                       "cairn_partition_replica_lag_offsets",
                                       "cairn_partition_replica_lag_seconds"};
  static const char *const helps[3] = {
      "Raft entries a follower lacks, as this node, its leader, knows (match index).",
      "Offsets a follower lacks, estimated by its leader from its log samples.",
      "How long ago, in seconds, the leader first held an entry the follower lacks (0 when "
      "caught up)."};
  uint64_t now = uv_now(n->loop);
  for (int k = 0; k < 3; k++) {
    metrics_text_family(b, names[k], "gauge", helps[k]);
    for (size_t i = 0; i < n->parts.n; i++) {
      struct part *p = n->parts.v[i];
      struct raft *r = &p->rg.raft;
      if (!rgroup_is_leader(&p->rg)) {
        continue;
      }
      struct store_info si;
      store_info(rgroup_store(&p->rg), &si);
      struct metrics_part *mp = metrics_part(&n->metrics, p->group_id);
      raft_index last = raft_last_index(r);
      for (unsigned s = 0; s < r->configuration.n; s++) {
        const struct raft_server *srv = &r->configuration.servers[s];
        if (srv->id == r->id) {
          continue;
        }
        raft_index match = r->leader_state.progress[s].match_index;
        int64_t lag_offsets = 0;
        uint64_t lag_ms = 0;
        if (mp != NULL) {
          metrics_lag_estimate(mp, now, last, si.next_offset, match, &lag_offsets, &lag_ms);
        }
        admin_buf_puts(b, names[k]);
        metrics_text_part_labels(b, p);
        admin_buf_printf(b, ",replica=\"%" PRIu64 "\"} ", (uint64_t)srv->id);
        if (k == 2) {
          admin_buf_printf(b, "%" PRIu64 ".%03" PRIu64 "\n", lag_ms / 1000, lag_ms % 1000);
        } else {
          admin_buf_printf(b, "%" PRId64 "\n",
                           k == 0 ? (int64_t)(last > match ? last - match : 0) : lag_offsets);
        }
      }
    }
  }
}

/* ---- consumer groups ---- */

enum metrics_text_gm { MT_GROUP_MEMBERS, MT_GROUP_COMMITTED, MT_GROUP_LAG };

struct metrics_text_groups {
  struct node *n;
  struct admin_buf *b;
  enum metrics_text_gm k;
};

static void metrics_text_group_labels(struct admin_buf *b, const char *name, const char *group)
{
  admin_buf_printf(b, "%s{group=\"", name);
  metrics_text_label_value(b, group);
  admin_buf_puts(b, "\"");
}

/* One family's series of group g (coord_each_group's callback). */
static void metrics_text_group(const struct group *g, void *data)
{
  struct metrics_text_groups *mg = data;
  struct admin_buf *b = mg->b;
  if (mg->k == MT_GROUP_MEMBERS) {
    metrics_text_group_labels(b, "cairn_group_members", g->name);
    admin_buf_printf(b, "} %zu\n", g->nmembers);
    return;
  }
  struct coord_lag *rows = NULL;
  size_t nrows = 0;
  if (coord_group_lag(&mg->n->coord, g, &rows, &nrows) != 0) {
    return;
  }
  const char *name =
      mg->k == MT_GROUP_COMMITTED ? "cairn_group_committed_offset" : "cairn_group_lag";
  for (size_t i = 0; i < nrows; i++) {
    const struct coord_lag *l = &rows[i];
    int64_t v = mg->k == MT_GROUP_COMMITTED ? l->committed : l->lag;
    if (v < 0) {
      continue; /* unknown: nothing committed, or the partition not hosted here */
    }
    metrics_text_group_labels(b, name, g->name);
    admin_buf_puts(b, ",topic=\"");
    metrics_text_label_value(b, l->topic);
    admin_buf_printf(b, "\",partition=\"%" PRIu32 "\"} %" PRId64 "\n", l->partition, v);
  }
  free(rows);
}

/* The groups this node coordinates (every node's scrape together covers
 * them all: each group has one coordinator). */
static void metrics_text_groups(struct node *n, struct admin_buf *b)
{
  static const struct {
    const char *name, *help;
  } fams[3] = {
      {"cairn_group_members", "Members of a consumer group this node coordinates."},
      {"cairn_group_committed_offset",
       "A consumer group's committed offset of a partition (the next offset it will read)."},
      {"cairn_group_lag",
       "Offsets a consumer group has yet to consume in a partition: the high watermark minus "
       "its committed offset (only where this node hosts the partition)."},
  };
  for (int k = 0; k < 3; k++) {
    metrics_text_family(b, fams[k].name, "gauge", fams[k].help);
    struct metrics_text_groups mg = {.n = n, .b = b, .k = (enum metrics_text_gm)k};
    coord_each_group(&n->coord, metrics_text_group, &mg);
  }
}

/* ---- the metadata ---- */

static void metrics_text_cluster(struct node *n, struct admin_buf *b)
{
  const struct meta_state *st = ctl_state(&n->ctl);
  metrics_text_family(b, "cairn_controller_leader", "gauge",
                      "1 when this node leads the metadata group (the controller).");
  admin_buf_printf(b, "cairn_controller_leader %d\n", ctl_is_leader(&n->ctl) ? 1 : 0);
  metrics_text_scalar(b, "cairn_controller_leader_claims_held_total", "counter",
                      "Leaderships named by heartbeats that this controller leader did not "
                      "propose again: the same ReportLeader was in flight (cluster/ctl_claims.h).",
                      n->hb_claims_held);
  metrics_text_family(b, "cairn_meta_replica_state", "gauge",
                      "This node's metadata replica after its log was damaged (metaheal.h): 0 "
                      "intact, 1 refused (no Raft), 2 joining empty, 3 rebuilt.");
  admin_buf_printf(b, "cairn_meta_replica_state %d\n", (int)n->mheal.state);
  metrics_text_family(b, "cairn_meta_replica_voter", "gauge",
                      "1 when this node's metadata replica is a voter in the group's "
                      "configuration as it knows it.");
  admin_buf_printf(b, "cairn_meta_replica_voter %d\n",
                   ctl_self_role(&n->ctl) == RAFT_VOTER ? 1 : 0);
  uint64_t by_state[5] = {0};
  for (size_t i = 0; i < st->nnodes; i++) {
    unsigned s = (unsigned)st->nodes[i].state;
    by_state[s < 5 ? s : 0]++;
  }
  metrics_text_family(b, "cairn_cluster_nodes", "gauge",
                      "Registered nodes by state, in this node's copy of the metadata.");
  static const char *const states[5] = {"", "alive", "dead", "draining", "removed"};
  for (int s = 1; s < 5; s++) {
    admin_buf_printf(b, "cairn_cluster_nodes{state=\"%s\"} %" PRIu64 "\n", states[s], by_state[s]);
  }
  uint64_t under = 0, offline = 0;
  for (size_t i = 0; i < st->ntopics; i++) {
    const struct meta_topic *t = &st->topics[i];
    for (uint32_t k = 0; k < t->npartitions; k++) {
      enum admin_part_health h = admin_part_health(st, t, &t->partitions[k]);
      under += h == ADMIN_PART_UNDER_REPLICATED ? 1 : 0;
      offline += h == ADMIN_PART_OFFLINE ? 1 : 0;
    }
  }
  metrics_text_family(b, "cairn_cluster_topics", "gauge", "Topics in the metadata.");
  admin_buf_printf(b, "cairn_cluster_topics %zu\n", st->ntopics);
  metrics_text_family(b, "cairn_cluster_partitions", "gauge", "Partitions in the metadata.");
  admin_buf_printf(b, "cairn_cluster_partitions %zu\n", st->total_partitions);
  metrics_text_scalar(b, "cairn_cluster_under_replicated_partitions", "gauge",
                      "Partitions with a replica on a node that is not live, or fewer "
                      "replicas than their replication factor.",
                      under);
  metrics_text_scalar(b, "cairn_cluster_offline_partitions", "gauge",
                      "Partitions with fewer than a majority of their replicas on live nodes.",
                      offline);
}

/* cairn_loop_lag_seconds: how late the loop ran its lag timer
 * (src/admin/looplag.h), in the request histograms' buckets. */
static void metrics_text_loop_lag(struct node *n, struct admin_buf *b)
{
  const struct metrics_hist *h = &n->looplag.hist;
  metrics_text_family(b, "cairn_loop_lag_seconds", "histogram",
                      "How late the event loop ran a timer due every 100 ms: time the loop "
                      "spent in other callbacks.");
  for (int e = METRICS_TEXT_LE_MIN_LOG2; e <= METRICS_TEXT_LE_MAX_LOG2; e++) {
    uint64_t le_us = (uint64_t)1 << e;
    admin_buf_printf(
        b, "cairn_loop_lag_seconds_bucket{le=\"%" PRIu64 ".%06" PRIu64 "\"} %" PRIu64 "\n",
        le_us / 1000000, le_us % 1000000, metrics_hist_count_le(h, le_us));
  }
  admin_buf_printf(b, "cairn_loop_lag_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n", h->count);
  admin_buf_printf(b, "cairn_loop_lag_seconds_sum %" PRIu64 ".%06" PRIu64 "\n", h->sum / 1000000,
                   h->sum % 1000000);
  admin_buf_printf(b, "cairn_loop_lag_seconds_count %" PRIu64 "\n", h->count);
}

/* cairn_wal_job_seconds: the node-wide Raft log's write jobs by phase
 * (cluster/wal.h, struct wal_phase_hist); absent without that log. */
static void metrics_text_wal(struct node *n, struct admin_buf *b)
{
  if (n->wal == NULL) {
    return;
  }
  struct wal_stats st;
  wal_get_stats(n->wal, &st);
  metrics_text_family(b, "cairn_wal_job_seconds", "histogram",
                      "Write jobs of the partitions' node-wide Raft log, by phase: queue (handed "
                      "to the thread pool until a worker ran it), io (its writes and "
                      "fdatasyncs), callback (done until the loop ran its callbacks).");
  static const char *const names[WAL_PHASES] = {"queue", "io", "callback"};
  for (int p = 0; p < WAL_PHASES; p++) {
    const struct wal_phase_hist *h = &st.phase[p];
    uint64_t cum = 0;
    for (int k = 0; k < WAL_HIST_BUCKETS - 1; k++) {
      cum += h->buckets[k];
      if (k < 3) {
        continue; /* from 8 us */
      }
      uint64_t le_us = (uint64_t)1 << k;
      admin_buf_printf(b,
                       "cairn_wal_job_seconds_bucket{phase=\"%s\",le=\"%" PRIu64 ".%06" PRIu64
                       "\"} %" PRIu64 "\n",
                       names[p], le_us / 1000000, le_us % 1000000, cum);
    }
    admin_buf_printf(b, "cairn_wal_job_seconds_bucket{phase=\"%s\",le=\"+Inf\"} %" PRIu64 "\n",
                     names[p], h->count);
    admin_buf_printf(b, "cairn_wal_job_seconds_sum{phase=\"%s\"} %" PRIu64 ".%06" PRIu64 "\n",
                     names[p], h->sum_us / 1000000, h->sum_us % 1000000);
    admin_buf_printf(b, "cairn_wal_job_seconds_count{phase=\"%s\"} %" PRIu64 "\n", names[p],
                     h->count);
  }
  metrics_text_family(b, "cairn_wal_bytes", "gauge",
                      "Bytes of the partitions' node-wide Raft log: in its segment files "
                      "(total), and of the records still needed in them (live).");
  admin_buf_printf(b, "cairn_wal_bytes{kind=\"total\"} %" PRIu64 "\n", st.total_bytes);
  admin_buf_printf(b, "cairn_wal_bytes{kind=\"live\"} %" PRIu64 "\n", st.live_bytes);
  metrics_text_scalar(b, "cairn_wal_cleaner_moved_bytes_total", "counter",
                      "Bytes the log's cleaner appended again (live entries copied forward out "
                      "of the oldest segment so that it can go).",
                      st.clean_moved_bytes);
  metrics_text_scalar(b, "cairn_wal_segments_recycled_total", "counter",
                      "New segments of the log written over the file of a segment it no longer "
                      "needed (an fdatasync after an overwrite waits for no journal commit).",
                      st.segments_recycled);
}

void metrics_node_write(struct node *n, struct admin_buf *b)
{
  metrics_text_family(b, "cairn_node_info", "gauge", "This node's id and cluster (always 1).");
  admin_buf_printf(b, "cairn_node_info{node_id=\"%" PRIu64 "\",cluster_id=\"", n->cfg.node_id);
  metrics_text_label_value(b, ctl_state(&n->ctl)->cluster_id);
  admin_buf_puts(b, "\"} 1\n");
  metrics_text_client_port(n, b);
  metrics_text_requests(n, b);
  metrics_text_kafka_requests(n, b);
  metrics_text_raft(n, b);
  metrics_node_write_process(n, b);
  metrics_text_partitions(n, b);
  metrics_text_lag(n, b);
  metrics_text_groups(n, b);
  metrics_text_cluster(n, b);
  metrics_text_loop_lag(n, b);
  metrics_text_wal(n, b);
}
