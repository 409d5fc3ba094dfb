/* log.h - leveled log lines to stderr: "time level [module] message".
 * No log line per message on a hot path; use these for state changes,
 * recoveries and errors. */
#ifndef CAIRN_LOG_H
#define CAIRN_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_OFF };

/* Sets the lowest level printed (default LOG_INFO; the CAIRN_LOG_LEVEL
 * environment variable, read on first use, overrides the default).
 * Context: call before starting threads. */
void log_set_level(enum log_level level);

/* Tags every later line with "node=<id>" (cairnd calls it once at start).
 * Context: call before starting threads. */
void log_set_node(unsigned long long node_id);

/* Parses "debug|info|warn|error|off". Returns 0 or CAIRN_EINVAL. */
int log_parse_level(const char *s, enum log_level *out);

/* Prints one line if level is enabled. Context: any thread (one write(2) per
 * line, so lines from threads do not interleave). */
void log_write(enum log_level level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_debug(mod, ...) log_write(LOG_DEBUG, mod, __VA_ARGS__)
#define log_info(mod, ...) log_write(LOG_INFO, mod, __VA_ARGS__)
#define log_warn(mod, ...) log_write(LOG_WARN, mod, __VA_ARGS__)
#define log_error(mod, ...) log_write(LOG_ERROR, mod, __VA_ARGS__)

#endif
