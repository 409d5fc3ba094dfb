/* main.c - cairnd, the Cairn node daemon: reads the configuration (see
 * docs/configuration.md), runs one node on one libuv loop until SIGTERM or
 * SIGINT, then stops it cleanly (leaderships handed off first).
 *
 * Exit codes: 0 after a clean stop; 1 when the node cannot start (a port
 * in use, an unreadable data dir); 2 for a bad configuration or a refused
 * identity (a data dir of another node or cluster, a node id in use). */
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "server/config.h"
#include "server/node.h"
#include "server/service.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* A clean stop that takes longer than this ends the process anyway. */
#define CAIRND_STOP_TIMEOUT_MS 30000

struct cairnd {
  struct node node;
  uv_signal_t sigterm;
  uv_signal_t sigint;
  uv_signal_t sighup; /* reloads the client port's TLS certificate and key */
  uv_timer_t stop_timer;
  struct service svc; /* READY=1, WATCHDOG=1, STOPPING=1 to systemd */
  bool stopping;
};

static void cairnd_on_closed(uv_handle_t *h) { (void)h; }

static void cairnd_on_stopped(struct node *n)
{
  struct cairnd *d = (struct cairnd *)((char *)n - offsetof(struct cairnd, node));
  service_close(&d->svc);
  uv_close((uv_handle_t *)&d->sigterm, cairnd_on_closed);
  uv_close((uv_handle_t *)&d->sigint, cairnd_on_closed);
  uv_close((uv_handle_t *)&d->sighup, cairnd_on_closed);
  uv_close((uv_handle_t *)&d->stop_timer, cairnd_on_closed);
}

static void cairnd_on_stop_timeout(uv_timer_t *t)
{
  log_error("cairnd", "clean stop took over %d ms: exiting", CAIRND_STOP_TIMEOUT_MS);
  exit(1);
}

static void cairnd_on_signal(uv_signal_t *s, int signum)
{
  struct cairnd *d = s->data;
  if (d->stopping) {
    log_warn("cairnd", "second signal: exiting at once");
    exit(1);
  }
  d->stopping = true;
  log_info("cairnd", "signal %d: stopping", signum);
  service_stopping(&d->svc);
  uv_timer_start(&d->stop_timer, cairnd_on_stop_timeout, CAIRND_STOP_TIMEOUT_MS, 0);
  node_stop(&d->node, cairnd_on_stopped);
}

static void cairnd_on_sighup(uv_signal_t *s, int signum)
{
  struct cairnd *d = s->data;
  if (!d->stopping) {
    (void)node_reload_tls(&d->node);
  }
}

/* glibc's fastbins off (tcache still serves small blocks): with them, every
 * allocation of 1 KiB or more first merges every free fastbin chunk
 * (malloc_consolidate), and a node under a produce over 10,000 partitions
 * frees small blocks by the million between its larger ones (frames,
 * corked writes, request buffers). Profiled there, malloc was over a
 * quarter of a node's CPU; without fastbins the same run went from 25-28k
 * to 34-42k msg/s in three runs, with far fewer dropped frames
 * (docs/performance.md). */
static void main_tune_malloc(void)
{
#ifdef M_MXFAST
  (void)mallopt(M_MXFAST, 0);
#endif
}

int main(int argc, char **argv)
{
  main_tune_malloc();
  static struct config cfg;
  char errmsg[CONFIG_ERRMSG_SIZE];
  /* --check-config belongs to this program, not to the settings: taken out
   * of argv before the settings are read. */
  bool check_only = false;
  int nargs = 0;
  for (int i = 0; i < argc; i++) {
    if (i > 0 && strcmp(argv[i], "--check-config") == 0) {
      check_only = true;
    } else {
      argv[nargs++] = argv[i];
    }
  }
  argc = nargs;
  int rv = config_load(&cfg, argc, argv, errmsg, sizeof errmsg);
  if (rv == CONFIG_HELP) {
    config_usage(stdout);
    printf("  --check-config\n      check the settings, print them as a config file (every\n"
           "      key, derived addresses written out) and exit: 0 valid, 2 not\n");
    return 0;
  }
  if (rv == CONFIG_VERSION) {
    printf("cairnd %s\n", NODE_VERSION);
    return 0;
  }
  if (rv != 0) {
    fprintf(stderr, "cairnd: %s\n", errmsg);
    fprintf(stderr, "cairnd: see cairnd --help\n");
    return 2;
  }
  if (check_only) {
    if (config_write(&cfg, stdout) != 0) {
      fprintf(stderr, "cairnd: the settings are valid but cannot be written out as a file\n");
      return 2;
    }
    return 0;
  }
  log_set_level(cfg.log_level);
  log_set_node((unsigned long long)cfg.node_id);
  signal(SIGPIPE, SIG_IGN);
  /* Each partition replica holds a few files and sockets. */
  uint64_t nofile = 0;
  if (fs_raise_nofile(&nofile) != 0) {
    log_warn("cairnd", "could not raise the open-file limit");
  }
  uv_loop_t *loop = uv_default_loop();
  static struct cairnd d;
  /* The handlers first: a SIGTERM while the node starts (opening its
   * partitions can take seconds) is then served by the loop's first turn,
   * a clean stop, rather than the default action killing the process
   * half-way through its start. */
  uv_signal_init(loop, &d.sigterm);
  uv_signal_init(loop, &d.sigint);
  uv_timer_init(loop, &d.stop_timer);
  d.sigterm.data = d.sigint.data = &d;
  uv_signal_start(&d.sigterm, cairnd_on_signal, SIGTERM);
  uv_signal_start(&d.sigint, cairnd_on_signal, SIGINT);
  uv_signal_init(loop, &d.sighup);
  d.sighup.data = &d;
  uv_signal_start(&d.sighup, cairnd_on_sighup, SIGHUP);
  rv = node_start(&d.node, loop, &cfg);
  if (rv != 0) {
    fprintf(stderr, "cairnd: %s\n", d.node.errmsg);
    return rv == CAIRN_EINVAL || rv == CAIRN_ECORRUPT ? 2 : 1;
  }
  if (service_start(&d.svc, loop, &d.node) != 0) {
    log_warn("cairnd", "%s: systemd is not told when the node is ready", d.svc.sd.errmsg);
  }
  /* A fatal condition found while running stops the node by itself. */
  d.node.stop_cb = cairnd_on_stopped;
  uv_run(loop, UV_RUN_DEFAULT);
  int code = d.node.exit_code;
  uv_loop_close(loop);
  return code;
}
