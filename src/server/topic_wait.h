/* topic_wait.h - holds a CreateTopic answer until the new topic is ready
 * for Produce and Fetch, as this node's metadata shows it.
 *
 * A topic is ready when every partition has a leader registered in the
 * metadata (the leader's own ReportLeader, applied here) and that leader is
 * the partition's preferred replica (replicas[0]), unless that replica's
 * node is not ALIVE. The preferred condition matters: a partition's first
 * leader is whichever replica's timer ran out first, and it hands the
 * leadership to the preferred replica about a second later
 * (rgroup_on_raft_tick); a produce sent to the first leader around then
 * would be refused with NOT_LEADER. A registered leader accepts a produce
 * at once (rgroup_produce queues it until its term's first entry applies).
 *
 * The waits are checked when this node applies a metadata change
 * (twait_check, from the node's reconcile) and by a 100 ms timer that also
 * ends the waits whose deadline passed; no wait blocks the loop.
 *
 * At the deadline the weaker rule decides: every partition has a
 * registered leader, preferred or not (a preferred replica whose node was
 * just killed stays ALIVE in the metadata until the node timeout; Kafka's
 * own rule is "every partition has a leader").
 *
 *   twait_start -> held --ready (twait_check/timer)--> cb(req, true)
 *                       --deadline (timer)----------> cb(req, every partition led)
 *                       --conn closing--------------> freed, cb never fires
 *                       --twaits_close--------------> cb(req, false)
 *
 * Context: loop thread only. */
#ifndef CAIRN_TOPIC_WAIT_H
#define CAIRN_TOPIC_WAIT_H

#include "cluster/controller.h"
#include "net/conn.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* The default hold of a native CreateTopic that names none (ms): well
 * under libcairn's default request timeout (30 s), the CLI's (10 s) and
 * the 5 s of the tests' helpers, forwarding included, so the answer
 * comes first. */
#define TWAIT_DEFAULT_MS 3000
/* The longest hold a request may ask for (ms). */
#define TWAIT_MAX_MS 60000
/* How often the held waits are looked at besides metadata changes (ms). */
#define TWAIT_TICK_MS 100

struct twait;

/* Answers req: ready says whether the topic became ready before the
 * deadline (false also when the node stops). */
typedef void (*twait_cb)(struct conn_request *req, uint32_t topic_id, bool ready);

struct twaits {
  uv_timer_t timer;
  struct controller *ctl; /* borrowed: the metadata the waits read */
  struct twait *head;     /* the held answers, newest first */
  size_t n;
  bool closing;
  void (*closed_cb)(void *data); /* twaits_close's */
  void *closed_data;
};

/* Initializes tw on loop (caller allocates; the timer runs only while
 * answers are held). ctl is borrowed until twaits_close's callback. */
void twaits_init(struct twaits *tw, uv_loop_t *loop, struct controller *ctl);

/* Holds req's answer until topic_id is ready or timeout_ms passes, then
 * calls cb once (at once, before returning, when it is ready already).
 * Borrows req until cb or until the conn cancels req (then cb never
 * fires: the wait is freed and the request answered SHUTTING_DOWN as the
 * other admin requests are). Returns 0, or CAIRN_ENOMEM / CAIRN_ESHUTDOWN
 * (cb never fires then: the caller answers). */
__attribute__((warn_unused_result)) int twait_start(struct twaits *tw, struct conn_request *req,
                                                    uint32_t topic_id, uint32_t timeout_ms,
                                                    twait_cb cb);

/* How far topic_id is in st: not applied here or some partition without
 * a registered leader; every partition led; every partition led by its
 * preferred replica (or any, when that replica's node is not ALIVE). */
enum twait_stage { TWAIT_UNLED, TWAIT_LED, TWAIT_READY };
enum twait_stage twait_topic_stage(const struct meta_state *st, uint32_t topic_id);

/* twait_topic_stage(st, topic_id) == TWAIT_READY. */
bool twait_topic_ready(const struct meta_state *st, uint32_t topic_id);

/* Answers the waits that are ready now. */
void twait_check(struct twaits *tw);

/* Answers every held wait with ready false and closes the timer; cb(data)
 * fires once it is closed. */
void twaits_close(struct twaits *tw, void (*cb)(void *data), void *data);

#endif
