/* service.c - the node's sd_notify conversation with systemd (service.h). */
#include "server/service.h"

#include "admin/admin_state.h"
#include "common/err.h"
#include "common/log.h"
#include "server/node.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define SERVICE_LOG "service"

#define SERVICE_STATE_NAME(name, text) [name] = text,
static const char *const service_state_names[] = {SERVICE_STATE_TABLE(SERVICE_STATE_NAME)};
#undef SERVICE_STATE_NAME

static void service_set_state(struct service *s, enum service_state to)
{
  assert(to > s->state);
  log_debug(SERVICE_LOG, "%s -> %s", service_state_names[s->state], service_state_names[to]);
  s->state = to;
}

static void service_send(struct service *s, const char *msg)
{
  int rv = sdnotify_send(&s->sd, msg);
  if (rv != 0 && rv != -EAGAIN) {
    log_warn(SERVICE_LOG, "NOTIFY_SOCKET: %s: %s", msg, cairn_strerror(rv));
  }
}

/* Tells systemd what readiness waits for, when that changes
 * (`systemctl status` shows it). */
static void service_tell_status(struct service *s, const char *why)
{
  if (strcmp(s->status, why) == 0) {
    return;
  }
  snprintf(s->status, sizeof s->status, "%s", why);
  char msg[sizeof s->status + 16];
  snprintf(msg, sizeof msg, "STATUS=%s", s->status);
  service_send(s, msg);
}

static void service_on_poll(uv_timer_t *t)
{
  struct service *s = t->data;
  char why[sizeof s->status];
  if (!admin_ready(s->n, why, sizeof why)) {
    service_tell_status(s, why);
    return;
  }
  /* READY=1 must arrive: a full queue is tried again on the next tick;
   * another failure will not heal by retrying. */
  int rv = sdnotify_send(&s->sd, "READY=1\nSTATUS=serving clients");
  if (rv == -EAGAIN) {
    return;
  }
  if (rv != 0) {
    log_warn(SERVICE_LOG, "NOTIFY_SOCKET: READY=1: %s", cairn_strerror(rv));
  } else {
    log_info(SERVICE_LOG, "ready: told the service manager");
  }
  uv_timer_stop(&s->poll_timer);
  service_set_state(s, SERVICE_READY);
}

static void service_on_watchdog(uv_timer_t *t)
{
  struct service *s = t->data;
  service_send(s, "WATCHDOG=1");
}

int service_start(struct service *s, uv_loop_t *loop, struct node *n)
{
  memset(s, 0, sizeof *s);
  s->n = n;
  s->state = SERVICE_STARTING;
  uv_timer_init(loop, &s->poll_timer);
  uv_timer_init(loop, &s->watchdog_timer);
  s->poll_timer.data = s->watchdog_timer.data = s;
  int rv = sdnotify_open(&s->sd);
  if (rv != 0) {
    return rv;
  }
  if (s->sd.fd < 0) {
    return 0; /* no service manager: nothing to tell */
  }
  uv_timer_start(&s->poll_timer, service_on_poll, 0, SERVICE_READY_POLL_MS);
  uint64_t usec = sdnotify_watchdog_usec();
  if (usec > 0) {
    /* Half the interval, as sd_watchdog_enabled(3) advises: one late tick
     * does not get the node killed. */
    s->watchdog_ms = usec / 2000 > 0 ? usec / 2000 : 1;
    uv_timer_start(&s->watchdog_timer, service_on_watchdog, 0, s->watchdog_ms);
    log_info(SERVICE_LOG, "watchdog: pinging every %llu ms", (unsigned long long)s->watchdog_ms);
  }
  return 0;
}

void service_stopping(struct service *s)
{
  if (s->state >= SERVICE_STOPPING) {
    return;
  }
  uv_timer_stop(&s->poll_timer);
  service_send(s, "STOPPING=1\nSTATUS=stopping");
  service_set_state(s, SERVICE_STOPPING);
}

static void service_on_timer_closed(uv_handle_t *h) { (void)h; }

void service_close(struct service *s)
{
  if (s->state == SERVICE_CLOSED) {
    return;
  }
  service_stopping(s);
  uv_close((uv_handle_t *)&s->poll_timer, service_on_timer_closed);
  uv_close((uv_handle_t *)&s->watchdog_timer, service_on_timer_closed);
  sdnotify_close(&s->sd);
  service_set_state(s, SERVICE_CLOSED);
}
