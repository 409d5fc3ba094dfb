/* log.c - leveled log lines to stderr. */
#include "common/log.h"

#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int log_level_current = -1; /* -1: not read from the environment yet */
static char log_prefix[32];         /* "node=3 " once set */

static const char *const log_level_names[] = {"debug", "info", "warn", "error", "off"};

int log_parse_level(const char *s, enum log_level *out)
{
  for (int i = LOG_DEBUG; i <= LOG_OFF; i++) {
    if (strcmp(s, log_level_names[i]) == 0) {
      *out = (enum log_level)i;
      return 0;
    }
  }
  return CAIRN_EINVAL;
}

void log_set_level(enum log_level level) { log_level_current = (int)level; }

void log_set_node(unsigned long long node_id)
{
  snprintf(log_prefix, sizeof log_prefix, "node=%llu ", node_id);
}

static int log_level_get(void)
{
  if (log_level_current < 0) {
    enum log_level l = LOG_INFO;
    const char *env = getenv("CAIRN_LOG_LEVEL");
    if (env != NULL && log_parse_level(env, &l) != 0) {
      l = LOG_INFO;
    }
    log_level_current = (int)l;
  }
  return log_level_current;
}

void log_write(enum log_level level, const char *module, const char *fmt, ...)
{
  if ((int)level < log_level_get()) {
    return;
  }
  char line[1024];
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s[%s] ",
                   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                   tm.tm_sec, ts.tv_nsec / 1000000, log_level_names[level], log_prefix, module);
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
  if (len > sizeof line - 2) {
    len = sizeof line - 2; /* truncated: still end the line */
  }
  line[len++] = '\n';
  ssize_t w = write(STDERR_FILENO, line, len);
  (void)w; /* nowhere left to report a failed log write */
}
