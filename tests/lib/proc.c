/* proc.c - processes, ports and the control client for integration tests. */
#include "proc.h"

#include "testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TU_PROC_MAX 64

/* Test ports: below Linux's ephemeral range (32768-60999), where no
 * outgoing connection on the machine can take one while a node that owns
 * it is down between a kill and its restart, and below the shell tests'
 * 20000-32000 (tests/lib/ports.sh). */
#define TU_PORT_FIRST 10000
#define TU_PORT_COUNT 10000
#define TU_PORT_DIR "/tmp/cairn-test-ports"

static pid_t tu_procs[TU_PROC_MAX];
static bool tu_procs_hooked;

static void tu_proc_reap_all(void)
{
  for (int i = 0; i < TU_PROC_MAX; i++) {
    if (tu_procs[i] > 0) {
      kill(tu_procs[i], SIGKILL);
      waitpid(tu_procs[i], NULL, 0);
      tu_procs[i] = 0;
    }
  }
}

static void tu_proc_track(pid_t pid, bool add)
{
  for (int i = 0; i < TU_PROC_MAX; i++) {
    if (add && tu_procs[i] == 0) {
      tu_procs[i] = pid;
      return;
    }
    if (!add && tu_procs[i] == pid) {
      tu_procs[i] = 0;
      return;
    }
  }
}

long long tu_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int tu_proc_start(struct tu_proc *p, char *const argv[], const char *log_path)
{
  if (!tu_procs_hooked) {
    atexit(tu_proc_reap_all);
    tu_procs_hooked = true;
  }
  snprintf(p->log_path, sizeof p->log_path, "%s", log_path);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    return -1;
  }
  if (pid == 0) {
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execv(argv[0], argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  p->pid = pid;
  tu_proc_track(pid, true);
  return 0;
}

void tu_proc_signal(struct tu_proc *p, int sig)
{
  if (p->pid > 0) {
    kill(p->pid, sig);
  }
}

int tu_proc_wait(struct tu_proc *p, int timeout_ms)
{
  long long deadline = tu_now_ms() + timeout_ms;
  while (p->pid > 0) {
    int status;
    pid_t r = waitpid(p->pid, &status, WNOHANG);
    if (r == p->pid) {
      tu_proc_track(p->pid, false);
      p->pid = 0;
      return status;
    }
    if (tu_now_ms() >= deadline) {
      return -1;
    }
    usleep(10000);
  }
  return -1;
}

void tu_proc_kill(struct tu_proc *p)
{
  if (p->pid <= 0) {
    return;
  }
  kill(p->pid, SIGKILL);
  waitpid(p->pid, NULL, 0);
  tu_proc_track(p->pid, false);
  p->pid = 0;
}

/* Can a TCP socket bind 127.0.0.1:port right now? */
static bool tu_port_bindable(int port)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return false;
  }
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  bool ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
  close(fd);
  return ok;
}

/* Is the process that wrote the reservation file at path still alive?
 * (Our own reservations count as alive: a port is handed out once.) */
static bool tu_port_owner_alive(const char *path)
{
  FILE *f = fopen(path, "r");
  long pid = 0;
  if (f == NULL) {
    return false;
  }
  if (fscanf(f, "%ld", &pid) != 1) {
    pid = 0;
  }
  fclose(f);
  return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* Reserves port for this process: a file TU_PORT_DIR/PORT holding our pid.
 * Called with the directory's lock held, so that taking over the file of a
 * dead owner cannot race with another test doing the same. */
static bool tu_port_reserve(int port)
{
  char path[64];
  snprintf(path, sizeof path, TU_PORT_DIR "/%d", port);
  if (access(path, F_OK) == 0) {
    if (tu_port_owner_alive(path)) {
      return false;
    }
    unlink(path);
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    return false;
  }
  char pid[32];
  int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  bool ok = write(fd, pid, (size_t)n) == n;
  close(fd);
  return ok;
}

int tu_free_port(void)
{
  static uint64_t rng;
  if (rng == 0) {
    rng = (uint64_t)tu_now_ms() * 2654435761u ^ (uint64_t)getpid();
  }
  mkdir(TU_PORT_DIR, 01777);
  int lock = open(TU_PORT_DIR "/lock", O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (lock < 0 || flock(lock, LOCK_EX) != 0) {
    fprintf(stderr, "tu_free_port: cannot lock " TU_PORT_DIR "/lock: %s\n", strerror(errno));
    if (lock >= 0) {
      close(lock);
    }
    return -1;
  }
  int port = -1;
  for (int tries = 0; tries < 20000 && port < 0; tries++) {
    int p = TU_PORT_FIRST + (int)(tu_rand(&rng) % TU_PORT_COUNT);
    if (tu_port_bindable(p) && tu_port_reserve(p)) {
      port = p;
    }
  }
  close(lock); /* releases the flock */
  return port;
}

int tu_file_count(const char *path, const char *text)
{
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    return 0;
  }
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    n += strstr(line, text) != NULL;
  }
  fclose(f);
  return n;
}

bool tu_file_contains(const char *path, const char *text)
{
  return tu_file_count(path, text) > 0;
}

int tu_ctl_connect(struct tu_ctl *c, int port, int timeout_ms)
{
  long long deadline = tu_now_ms() + timeout_ms;
  c->len = 0;
  for (;;) {
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
      return 0;
    }
    close(c->fd);
    c->fd = -1;
    if (tu_now_ms() >= deadline) {
      return -1;
    }
    usleep(20000);
  }
}

int tu_ctl_send(struct tu_ctl *c, const char *fmt, ...)
{
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  line[n++] = '\n';
  size_t off = 0;
  while (off < (size_t)n) {
    ssize_t w = send(c->fd, line + off, (size_t)n - off, MSG_NOSIGNAL);
    if (w <= 0) {
      return -1;
    }
    off += (size_t)w;
  }
  return 0;
}

int tu_ctl_line(struct tu_ctl *c, char *out, size_t n, int timeout_ms)
{
  long long deadline = tu_now_ms() + timeout_ms;
  for (;;) {
    char *nl = memchr(c->buf, '\n', c->len);
    if (nl != NULL) {
      size_t used = (size_t)(nl - c->buf);
      snprintf(out, n, "%.*s", (int)used, c->buf);
      memmove(c->buf, nl + 1, c->len - used - 1);
      c->len -= used + 1;
      return 1;
    }
    long long left = deadline - tu_now_ms();
    if (left <= 0) {
      return 0;
    }
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    int pr = poll(&pfd, 1, (int)left);
    if (pr == 0) {
      return 0;
    }
    if (pr < 0 && errno == EINTR) {
      continue;
    }
    ssize_t r = pr < 0 ? -1 : recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
    if (r <= 0) {
      return -1;
    }
    c->len += (size_t)r;
  }
}

void tu_ctl_close(struct tu_ctl *c)
{
  if (c->fd >= 0) {
    close(c->fd);
  }
  c->fd = -1;
}
