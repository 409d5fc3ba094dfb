/* service.h - tells the service manager (systemd, Type=notify) about the
 * node: READY=1 once, at the moment the admin port's /ready probe first
 * answers 200 (admin_ready: registered in the metadata, every assigned
 * partition replica open); STATUS= with what readiness still waits for;
 * WATCHDOG=1 every half of $WATCHDOG_USEC from the loop, so a stalled loop
 * misses its pings and systemd restarts the node; STOPPING=1 on shutdown.
 * Without $NOTIFY_SOCKET it does nothing (plain runs, containers).
 *
 * States: SERVICE_STARTING -(node ready: service_on_poll)-> SERVICE_READY
 *         any -(service_stopping)-> SERVICE_STOPPING -(service_close)-> SERVICE_CLOSED
 *
 * Context: loop thread only. */
#ifndef CAIRN_SERVICE_H
#define CAIRN_SERVICE_H

#include "common/sdnotify.h"

#include <stdint.h>
#include <uv.h>

struct node;

/* How often readiness is checked until it is reached. */
#define SERVICE_READY_POLL_MS 100

#define SERVICE_STATE_TABLE(X)                                                                   \
  X(SERVICE_STARTING, "starting")                                                                \
  X(SERVICE_READY, "ready")                                                                      \
  X(SERVICE_STOPPING, "stopping")                                                                \
  X(SERVICE_CLOSED, "closed")

#define SERVICE_STATE_ENUM(name, text) name,
enum service_state { SERVICE_STATE_TABLE(SERVICE_STATE_ENUM) };
#undef SERVICE_STATE_ENUM

struct service {
  struct node *n; /* borrowed: outlives the service until service_close */
  struct sdnotify sd;
  enum service_state state;
  uv_timer_t poll_timer;     /* readiness checks, until ready */
  uv_timer_t watchdog_timer; /* only started with a watchdog interval */
  uint64_t watchdog_ms;      /* the ping period; 0 without a watchdog */
  char status[160];          /* the last STATUS= sent, to send changes only */
};

/* Starts watching n for readiness and, with $WATCHDOG_USEC, pinging the
 * watchdog. Returns 0, or a negative code with s->sd.errmsg saying why
 * ($NOTIFY_SOCKET unusable: then nothing is sent). Either way the caller
 * ends with service_close. Borrows n. */
__attribute__((warn_unused_result)) int service_start(struct service *s, uv_loop_t *loop,
                                                      struct node *n);

/* Sends STOPPING=1 (once) and stops the readiness checks; the watchdog
 * keeps pinging while the node stops cleanly. */
void service_stopping(struct service *s);

/* Sends STOPPING=1 if not yet sent, closes the timers and the socket.
 * The timers' close callbacks run on the next loop iteration; s must stay
 * valid until then. */
void service_close(struct service *s);

#endif
