/* waldamage.c - sets a damaged node-wide Raft log aside and marks the
 * replicas it held as refused. See waldamage.h. */
#include "cluster/waldamage.h"

#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/wallclock.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define WALDAMAGE_PARTS "partitions" /* PARTS_DIRNAME (partitions.h) */
#define WALDAMAGE_REASON_MAX 1024

static void waldamage_fmt(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void waldamage_fmt(char *buf, size_t len, const char *fmt, ...)
{
  if (buf == NULL || len == 0) {
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}

static bool waldamage_exists(const char *path)
{
  struct stat sb;
  return lstat(path, &sb) == 0;
}

bool waldamage_marked(const char *dir, char *reason, size_t len)
{
  uint8_t *buf = NULL;
  size_t n = 0;
  int rv = fs_read_file(dir, WALDAMAGE_MARK, WALDAMAGE_REASON_MAX, &buf, &n);
  if (rv == -ENOENT) {
    return false;
  }
  if (reason != NULL && len > 0) {
    if (rv != 0) {
      snprintf(reason, len, "%s/%s: %s", dir, WALDAMAGE_MARK, cairn_strerror(rv));
    } else {
      size_t k = n < len - 1 ? n : len - 1;
      memcpy(reason, buf, k);
      while (k > 0 && (reason[k - 1] == '\n' || reason[k - 1] == '\0')) {
        k--;
      }
      reason[k] = '\0';
    }
  }
  free(buf);
  return true; /* unreadable counts as marked: refusing is the safe side */
}

/* Is name a replica directory's (<topic>-<partition>.<topic id>)? */
static bool waldamage_replica_name(const char *name)
{
  const char *dot = strrchr(name, '.');
  const char *dash = strrchr(name, '-');
  if (name[0] == '.' || dot == NULL || dash == NULL || dash > dot || dot[1] == '\0') {
    return false;
  }
  char *end = NULL;
  unsigned long long tid = strtoull(dot + 1, &end, 10);
  return *end == '\0' && tid != 0;
}

/* Writes the mark into every replica directory under root. */
static int waldamage_mark_all(const char *root, const char *why, unsigned *marked, char *errmsg,
                              size_t errlen)
{
  DIR *d = opendir(root);
  if (d == NULL) {
    if (errno == ENOENT) {
      return 0; /* no replica ever opened here */
    }
    int rv = -errno;
    waldamage_fmt(errmsg, errlen, "%s: opendir: %s", root, cairn_strerror(rv));
    return rv;
  }
  char line[WALDAMAGE_REASON_MAX];
  int w = snprintf(line, sizeof line, "%s\n", why);
  size_t line_len = w > 0 && (size_t)w < sizeof line ? (size_t)w : sizeof line - 1;
  int rv = 0;
  struct dirent *de;
  while (rv == 0 && (de = readdir(d)) != NULL) {
    char path[PATH_MAX];
    struct stat sb;
    if (!waldamage_replica_name(de->d_name) ||
        snprintf(path, sizeof path, "%s/%s", root, de->d_name) >= (int)sizeof path ||
        stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
      continue;
    }
    if (!waldamage_marked(path, NULL, 0)) {
      rv = fs_replace_file(path, WALDAMAGE_MARK, line, line_len);
      if (rv != 0) {
        waldamage_fmt(errmsg, errlen, "%s/%s: %s", path, WALDAMAGE_MARK, cairn_strerror(rv));
      }
    }
    *marked += rv == 0;
  }
  closedir(d);
  if (rv == 0) {
    rv = fs_fsync_dir(root);
    if (rv != 0) {
      waldamage_fmt(errmsg, errlen, "%s: fsync: %s", root, cairn_strerror(rv));
    }
  }
  return rv;
}

/* The first free name dir/<prefix><seconds>[-<k>] into out. */
static int waldamage_aside_name(const char *dir, const char *prefix, char *out, size_t len)
{
  long long secs = (long long)(wallclock_ms() / 1000);
  for (int k = 0; k < 10; k++) {
    int w = k == 0 ? snprintf(out, len, "%s/%s%lld", dir, prefix, secs)
                   : snprintf(out, len, "%s/%s%lld-%d", dir, prefix, secs, k);
    if (w < 0 || (size_t)w >= len) {
      return CAIRN_EINVAL;
    }
    if (!waldamage_exists(out)) {
      return 0;
    }
  }
  return -EEXIST;
}

/* Renames the log from to moved (chosen by waldamage_aside_name in
 * parent), makes that durable, and prunes the oldest set-aside logs. */
static int waldamage_move_log(const char *parent, const char *from, const char *moved, char *errmsg,
                              size_t errlen)
{
  int rv = rename(from, moved) == 0 ? 0 : -errno;
  if (rv == 0) {
    rv = fs_fsync_dir(parent);
  }
  if (rv != 0) {
    waldamage_fmt(errmsg, errlen, "%s: moving it to %s: %s", from, moved, cairn_strerror(rv));
    return rv;
  }
  waldamage_prune(parent, WALDAMAGE_PREFIX, WALDAMAGE_KEEP);
  return 0;
}

int waldamage_set_aside(const char *data_dir, const char *why, char *moved, size_t len,
                        unsigned *marked, char *errmsg, size_t errlen)
{
  *marked = 0;
  char root[PATH_MAX], from[PATH_MAX];
  if (snprintf(root, sizeof root, "%s/%s", data_dir, WALDAMAGE_PARTS) >= (int)sizeof root ||
      snprintf(from, sizeof from, "%s/wal", data_dir) >= (int)sizeof from) {
    waldamage_fmt(errmsg, errlen, "%s: path too long", data_dir);
    return CAIRN_EINVAL;
  }
  /* The name is chosen first, so that each mark can say where the log went. */
  int rv = waldamage_aside_name(data_dir, WALDAMAGE_PREFIX, moved, len);
  if (rv != 0) {
    waldamage_fmt(errmsg, errlen, "%s: no free name to move the log to: %s", data_dir,
                  cairn_strerror(rv));
    return rv;
  }
  char line[WALDAMAGE_REASON_MAX];
  snprintf(line, sizeof line, "%s (the log was moved to %s)", why, moved);
  /* Every mark durable before the log goes: after the move nothing else
   * says these replicas lost their Raft state. */
  rv = waldamage_mark_all(root, line, marked, errmsg, errlen);
  if (rv != 0) {
    return rv;
  }
  return waldamage_move_log(data_dir, from, moved, errmsg, errlen);
}

int waldamage_set_aside_log(const char *dir, const char *why, char *moved, size_t len, char *errmsg,
                            size_t errlen)
{
  char from[PATH_MAX];
  if (snprintf(from, sizeof from, "%s/wal", dir) >= (int)sizeof from) {
    waldamage_fmt(errmsg, errlen, "%s: path too long", dir);
    return CAIRN_EINVAL;
  }
  int rv = waldamage_aside_name(dir, WALDAMAGE_PREFIX, moved, len);
  if (rv != 0) {
    waldamage_fmt(errmsg, errlen, "%s: no free name to move the log to: %s", dir,
                  cairn_strerror(rv));
    return rv;
  }
  /* The mark durable before the log goes (a mark already there stays: it
   * names the first damage). */
  char line[WALDAMAGE_REASON_MAX];
  snprintf(line, sizeof line, "%s (the log was moved to %s)", why, moved);
  rv = waldamage_mark(dir, line, errmsg, errlen);
  if (rv != 0) {
    return rv;
  }
  return waldamage_move_log(dir, from, moved, errmsg, errlen);
}

int waldamage_mark(const char *dir, const char *why, char *errmsg, size_t errlen)
{
  if (waldamage_marked(dir, NULL, 0)) {
    return 0;
  }
  char line[WALDAMAGE_REASON_MAX];
  int w = snprintf(line, sizeof line, "%s\n", why);
  size_t line_len = w > 0 && (size_t)w < sizeof line ? (size_t)w : sizeof line - 1;
  int rv = fs_replace_file(dir, WALDAMAGE_MARK, line, line_len);
  if (rv == 0) {
    rv = fs_fsync_dir(dir);
  }
  if (rv != 0) {
    waldamage_fmt(errmsg, errlen, "%s/%s: %s", dir, WALDAMAGE_MARK, cairn_strerror(rv));
  }
  return rv;
}

bool waldamage_was_rebuilt(const char *dir)
{
  return fs_dir_has_prefix(dir, WALDAMAGE_DISCARDED_PREFIX);
}

int waldamage_discard(const char *dir, char *moved, size_t len)
{
  int rv = waldamage_aside_name(dir, WALDAMAGE_DISCARDED_PREFIX, moved, len);
  if (rv == 0) {
    rv = mkdir(moved, 0755) == 0 ? 0 : -errno;
  }
  if (rv == 0) {
    rv = waldamage_move_state(dir, moved); /* fsyncs dir: the new directory too */
  }
  return rv;
}

/* Moves dir/name into moved/name when it exists. */
static int waldamage_move_in(const char *dir, const char *name, const char *moved)
{
  char from[PATH_MAX], to[PATH_MAX];
  if (snprintf(from, sizeof from, "%s/%s", dir, name) >= (int)sizeof from ||
      snprintf(to, sizeof to, "%s/%s", moved, name) >= (int)sizeof to) {
    return CAIRN_EINVAL;
  }
  if (!waldamage_exists(from)) {
    return 0;
  }
  return rename(from, to) == 0 ? 0 : -errno;
}

int waldamage_move_state(const char *dir, const char *moved)
{
  int rv = waldamage_move_in(dir, "wal-snapshots", moved);
  if (rv == 0) {
    rv = waldamage_move_in(dir, "raft", moved);
  }
  if (rv == 0) {
    rv = fs_fsync_dir(moved);
  }
  if (rv == 0) {
    rv = fs_fsync_dir(dir); /* moved/ is there for good before the mark goes */
  }
  if (rv == 0) {
    rv = waldamage_move_in(dir, WALDAMAGE_MARK, moved);
  }
  if (rv == 0) {
    rv = fs_fsync_dir(moved);
  }
  if (rv == 0) {
    rv = fs_fsync_dir(dir);
  }
  return rv;
}

void waldamage_prune(const char *dir, const char *prefix, unsigned keep)
{
  size_t plen = strlen(prefix);
  for (;;) {
    DIR *d = opendir(dir);
    if (d == NULL) {
      return;
    }
    char oldest[NAME_MAX + 1] = "";
    unsigned long long oldest_key = ULLONG_MAX;
    unsigned count = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
      if (strncmp(de->d_name, prefix, plen) != 0) {
        continue;
      }
      char *end = NULL;
      unsigned long long secs = strtoull(de->d_name + plen, &end, 10);
      unsigned long long k = *end == '-' ? strtoull(end + 1, NULL, 10) : 0;
      unsigned long long key = secs * 16 + (k < 16 ? k : 15);
      count++;
      if (key < oldest_key) {
        oldest_key = key;
        snprintf(oldest, sizeof oldest, "%s", de->d_name);
      }
    }
    closedir(d);
    if (count <= keep || oldest[0] == '\0') {
      return;
    }
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, oldest) >= (int)sizeof path) {
      return;
    }
    int rv = fs_remove_tree(path);
    log_info("waldamage", "removed %s (%u kept)%s%s", path, keep, rv != 0 ? ": " : "",
             rv != 0 ? cairn_strerror(rv) : "");
    if (rv != 0) {
      return;
    }
  }
}
