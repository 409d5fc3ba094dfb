/* cluster.h - the three-node fixture of the replication tests: three
 * cairn-rgroup-driver processes on loopback TCP (one per node), their
 * control connections, produce with a record of what was acknowledged, and
 * the checks every such test makes: every acknowledged batch is on every live
 * replica exactly once, at the offset it was acknowledged with; all replicas
 * hold the same batches; and no "doomed" batch (never acknowledged, its Raft
 * index overwritten) shows up anywhere.
 *
 * Checks fail the running cmocka test (fail_msg / assert_*): call them from
 * a test body. Every process started is killed by tc_kill_all() or at exit
 * (proc.h). One cluster per test; a cluster is large: make it static.
 *
 * Context: the test's thread. */
#ifndef CAIRN_TEST_CLUSTER_H
#define CAIRN_TEST_CLUSTER_H

#include "proc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TC_NODES 3
#define TC_MAX_ACKS 4096
#define TC_MAX_DOOMED 256
#define TC_MAX_EXTRA 12
#define TC_DEADLINE_MS 20000 /* for a leader, for replicas to apply */

struct tc_node {
  struct tu_proc proc;
  struct tu_ctl ctl;
  int cluster_port;
  int control_port;
  bool stopped; /* SIGSTOPped */
  bool mounted; /* raft_dir is a filesystem the test mounted */
  char dir[512];
  char log[512];
  char raft_dir[600]; /* set by tests that mount one */
};

struct tc_cluster {
  char *root;
  const char *driver;
  int groups;
  const char *extra[TC_MAX_EXTRA]; /* more driver flags, NULL-terminated */
  /* Leadership moves only by elections (tests that need to know who leads
   * at each step); otherwise rgroup hands it back to the first replica. */
  bool no_preferred_leader;
  struct tc_node n[TC_NODES];
  char replicas[512];
  /* acknowledged batches: tag -> offset */
  uint64_t ack_tag[TC_MAX_ACKS];
  int64_t ack_off[TC_MAX_ACKS];
  int acks;
  /* batches that must never show up (unacknowledged, index overwritten) */
  uint64_t doomed[TC_MAX_DOOMED];
  int ndoomed;
  uint64_t next_tag;
};

/* A replica's log as "dump G" lists it. */
struct tc_dump {
  int64_t base[TC_MAX_ACKS * 2];
  int count[TC_MAX_ACKS * 2];
  uint64_t tag[TC_MAX_ACKS * 2];
  int n;
  int64_t next; /* the log end */
};

/* Sets up c for `groups` groups per node: a fresh temporary directory named
 * after tag, free ports, no process started. driver is borrowed (the
 * cairn-rgroup-driver path); extra (may be NULL) is a NULL-terminated list
 * of more driver flags, borrowed until tc_finish. */
void tc_init(struct tc_cluster *c, const char *driver, const char *tag, int groups,
             const char *const *extra);

/* Starts node i's driver (election 600 ms, heartbeat 60 ms) without
 * connecting to it: for a node expected to exit at once. */
void tc_node_spawn(struct tc_cluster *c, int i);

/* Starts node i's driver and connects to its control port. */
void tc_node_start(struct tc_cluster *c, int i);

void tc_start_all(struct tc_cluster *c);

/* SIGKILL node i and close its control connection (also a frozen node). */
void tc_node_kill(struct tc_cluster *c, int i);

/* Freezes (SIGSTOP) / resumes (SIGCONT) node i. */
void tc_node_stop(struct tc_cluster *c, int i);
void tc_node_cont(struct tc_cluster *c, int i);

/* Running and not frozen: it answers its control port. */
bool tc_node_live(const struct tc_cluster *c, int i);

/* Kills every node. */
void tc_kill_all(struct tc_cluster *c);

/* After tc_kill_all (and after unmounting anything mounted in it): looks
 * for sanitizer reports in the node logs (each is printed), then removes
 * the directory, unless CAIRN_KEEP_TEST_DIR is set or a report was found
 * (then it is kept and named). Returns 0, or -1 if a node reported. */
int tc_finish(struct tc_cluster *c);

/* Sends a command to node i and reads its one-line answer (10 s). Returns
 * 0 or -1. */
int tc_ask(struct tc_cluster *c, int i, char *out, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Node i's role in group g ("leader", "follower", ...), or "down". */
const char *tc_node_role(struct tc_cluster *c, int i, int g, char *buf, size_t n);

/* The live node that says it leads group g, waiting up to ms; -1 if none. */
int tc_wait_leader(struct tc_cluster *c, int g, int ms);

/* The same within TC_DEADLINE_MS, or the test fails (printing roles). */
int tc_find_leader(struct tc_cluster *c, int g);

void tc_print_roles(struct tc_cluster *c, int g);

/* Remembers an acknowledged batch / one that must never show up. */
void tc_record_ack(struct tc_cluster *c, uint64_t tag, int64_t off);
void tc_record_doomed(struct tc_cluster *c, uint64_t tag);

/* Sends one produce of `records` records of vsize bytes to group g on node
 * i without waiting; returns its tag. */
uint64_t tc_send_produce(struct tc_cluster *c, int i, int g, int records, size_t vsize);

/* Reads up to `count` answers from node i within timeout_ms in all,
 * recording the acknowledged ones. Returns how many answers arrived;
 * *acked (may be NULL) counts the "ok" ones. */
int tc_collect(struct tc_cluster *c, int i, int count, int timeout_ms, int *acked);

/* `count` small produces (3 records of 64 bytes) pipelined to group g on
 * node i, each answer awaited up to 15 s; stops early if the node goes
 * away (the rest are unknown, not acknowledged). Returns how many were
 * acknowledged. */
int tc_produce_many(struct tc_cluster *c, int i, int g, int count);

/* Node i's log of group g. */
void tc_dump_node(struct tc_cluster *c, int i, int g, struct tc_dump *d);

bool tc_dump_has(const struct tc_dump *d, uint64_t tag);

/* Waits until node i has applied group g up to `next`; false on timeout. */
bool tc_wait_applied(struct tc_cluster *c, int i, int g, int64_t next, int ms);

/* The log end of group g every live node reports, once they all report the
 * same one, waiting up to ms; -1 if they do not. */
int64_t tc_wait_same_end(struct tc_cluster *c, int g, int ms);

/* Every acknowledged batch is in node i's log of group g exactly once, at
 * the offset it was acknowledged with; offsets are gap-free; no batch
 * appears twice; no doomed batch appears. d receives the dump. */
void tc_check_node(struct tc_cluster *c, int i, int g, struct tc_dump *d);

/* All live nodes hold the same log of group g, containing every
 * acknowledged batch and no doomed one. A node that does not catch up with
 * the leader within TC_DEADLINE_MS fails the test too (a stuck replica). */
void tc_check_all_agree(struct tc_cluster *c, int g);

#endif
