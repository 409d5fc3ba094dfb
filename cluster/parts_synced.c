/* parts_synced.c - the replica directories found at start, made durable by
 * one syncfs. See parts_synced.h. */
#include "cluster/parts_synced.h"

#include "common/err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int psync_cmp(const void *a, const void *b)
{
  return strcmp(((const struct psync_dir *)a)->name, ((const struct psync_dir *)b)->name);
}

static int psync_push(struct psync *ps, size_t *cap, const char *name)
{
  if (ps->n == *cap) {
    size_t ncap = *cap != 0 ? *cap * 2 : 64;
    struct psync_dir *v = realloc(ps->v, ncap * sizeof *v);
    if (v == NULL) {
      return CAIRN_ENOMEM;
    }
    ps->v = v;
    *cap = ncap;
  }
  char *copy = strdup(name);
  if (copy == NULL) {
    return CAIRN_ENOMEM;
  }
  ps->v[ps->n++] = (struct psync_dir){.name = copy, .taken = false};
  return 0;
}

/* The directories of root on root's file system (not "." nor ".."). */
static int psync_list(struct psync *ps, int dfd)
{
  struct stat root_st;
  if (fstat(dfd, &root_st) != 0) {
    return -errno;
  }
  int lfd = dup(dfd);
  DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
  if (d == NULL) {
    int rv = -errno;
    if (lfd >= 0) {
      close(lfd);
    }
    return rv;
  }
  size_t cap = 0;
  int rv = 0;
  struct dirent *e;
  while (rv == 0 && (e = readdir(d)) != NULL) {
    struct stat st;
    if (e->d_name[0] == '.' || fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      continue;
    }
    if (S_ISDIR(st.st_mode) && st.st_dev == root_st.st_dev) {
      rv = psync_push(ps, &cap, e->d_name);
    }
  }
  closedir(d);
  return rv;
}

static double psync_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One syncfs of dfd's file system; *ms how long it took. */
static int psync_syncfs(int dfd, double *ms)
{
  double t0 = psync_now_ms();
  int rv = syncfs(dfd) == 0 ? 0 : -errno;
  *ms = psync_now_ms() - t0;
  return rv;
}

int psync_end(const char *root, double *ms)
{
  *ms = 0;
  int dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    return -errno;
  }
  int rv = psync_syncfs(dfd, ms);
  close(dfd);
  return rv;
}

int psync_begin(struct psync *ps, const char *root)
{
  int dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    return -errno;
  }
  int rv = psync_list(ps, dfd);
  /* After the listing: whatever was written into a listed directory
   * before this call is made durable by it. */
  if (rv == 0) {
    rv = psync_syncfs(dfd, &ps->syncfs_ms);
  }
  close(dfd);
  if (rv != 0) {
    psync_free(ps);
    return rv;
  }
  if (ps->n > 1) {
    qsort(ps->v, ps->n, sizeof *ps->v, psync_cmp);
  }
  return 0;
}

bool psync_take(struct psync *ps, const char *dir)
{
  if (ps->n == 0) {
    return false;
  }
  const char *slash = strrchr(dir, '/');
  struct psync_dir key = {.name = (char *)(slash != NULL ? slash + 1 : dir)};
  struct psync_dir *hit = bsearch(&key, ps->v, ps->n, sizeof *ps->v, psync_cmp);
  if (hit == NULL || hit->taken) {
    return false;
  }
  hit->taken = true;
  return true;
}

size_t psync_left(const struct psync *ps)
{
  size_t left = 0;
  for (size_t i = 0; i < ps->n; i++) {
    left += ps->v[i].taken ? 0 : 1;
  }
  return left;
}

void psync_free(struct psync *ps)
{
  for (size_t i = 0; i < ps->n; i++) {
    free(ps->v[i].name);
  }
  free(ps->v);
  ps->v = NULL;
  ps->n = 0;
}
