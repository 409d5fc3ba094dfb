/* proc.h - real processes for integration tests: start with output to a
 * log file, signal and reap by PID, free loopback ports, and a line-based
 * control client (the drivers' control protocol). Every process a test
 * starts is killed and reaped by tu_proc_stop() or at exit. */
#ifndef CAIRN_TU_PROC_H
#define CAIRN_TU_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct tu_proc {
  pid_t pid; /* 0 when not running */
  char log_path[512];
};

/* Starts argv[0] with stdout and stderr appended to log_path. Returns 0 or
 * -1. The process is also killed (SIGKILL) by an atexit handler. */
int tu_proc_start(struct tu_proc *p, char *const argv[], const char *log_path);

/* Sends sig to the process if it is running. */
void tu_proc_signal(struct tu_proc *p, int sig);

/* Waits up to timeout_ms for the process to exit. Returns its wait status,
 * or -1 on timeout (the process keeps running). */
int tu_proc_wait(struct tu_proc *p, int timeout_ms);

/* SIGKILL and reap. */
void tu_proc_kill(struct tu_proc *p);

/* A TCP port on 127.0.0.1, free now and reserved for this process while
 * it lives: no other test process is handed it (a file per port in
 * /tmp/cairn-test-ports names the owner's pid; a dead owner's is taken
 * over), and it lies below the kernel's ephemeral range, so no outgoing
 * connection takes it while its node is down for a restart. Never the same
 * port twice in one process. Returns -1 if none is found. */
int tu_free_port(void);

/* Does the file contain the text? */
bool tu_file_contains(const char *path, const char *text);

/* How many of the file's lines contain the text (0 if it cannot be read). */
int tu_file_count(const char *path, const char *text);

struct tu_ctl {
  int fd;
  char buf[1 << 16];
  size_t len;
};

/* Connects to 127.0.0.1:port, retrying until timeout_ms. Returns 0/-1. */
int tu_ctl_connect(struct tu_ctl *c, int port, int timeout_ms);

/* Sends one line (a newline is added). Returns 0 or -1. */
int tu_ctl_send(struct tu_ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reads one line into out (without the newline). Returns 1 with a line, 0
 * on timeout, -1 when the peer closed or on error. */
int tu_ctl_line(struct tu_ctl *c, char *out, size_t n, int timeout_ms);

void tu_ctl_close(struct tu_ctl *c);

/* Milliseconds on a monotonic clock. */
long long tu_now_ms(void);

#endif
