/* fsutil.c - whole-buffer I/O, directory fsync and atomic file replace. */
#include "common/fsutil.h"

#include "common/err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

int fs_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
  const uint8_t *p = buf;
  while (len > 0) {
    ssize_t n = pwrite(fd, p, len, off);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return -errno;
    }
    if (n == 0) {
      return -EIO;
    }
    p += n;
    len -= (size_t)n;
    off += n;
  }
  return 0;
}

int fs_pread_full(int fd, void *buf, size_t len, off_t off, size_t *got)
{
  uint8_t *p = buf;
  size_t done = 0;
  while (done < len) {
    ssize_t n = pread(fd, p + done, len - done, off + (off_t)done);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return -errno;
    }
    if (n == 0) {
      break;
    }
    done += (size_t)n;
  }
  *got = done;
  return 0;
}

int fs_fsync_dir(const char *path)
{
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return -errno;
  }
  int rv = fsync(fd) == 0 ? 0 : -errno;
  close(fd);
  return rv;
}

int fs_replace_file(const char *dir, const char *name, const void *buf, size_t len)
{
  char tmp[PATH_MAX];
  char dst[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name) >= (int)sizeof tmp ||
      snprintf(dst, sizeof dst, "%s/%s", dir, name) >= (int)sizeof dst) {
    return -ENAMETOOLONG;
  }
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return -errno;
  }
  int rv = fs_pwrite_all(fd, buf, len, 0);
  if (rv == 0 && fdatasync(fd) != 0) {
    rv = -errno;
  }
  close(fd);
  if (rv == 0 && rename(tmp, dst) != 0) {
    rv = -errno;
  }
  if (rv != 0) {
    unlink(tmp);
    return rv;
  }
  return fs_fsync_dir(dir);
}

int fs_read_file(const char *dir, const char *name, size_t max, uint8_t **out, size_t *len)
{
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
    return -ENAMETOOLONG;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return -errno;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int rv = -errno;
    close(fd);
    return rv;
  }
  if ((uint64_t)st.st_size > max) {
    close(fd);
    return CAIRN_ETOOLARGE;
  }
  uint8_t *buf = malloc((size_t)st.st_size + 1);
  if (buf == NULL) {
    close(fd);
    return CAIRN_ENOMEM;
  }
  size_t got = 0;
  int rv = fs_pread_full(fd, buf, (size_t)st.st_size, 0, &got);
  close(fd);
  if (rv != 0) {
    free(buf);
    return rv;
  }
  *out = buf;
  *len = got;
  return 0;
}

int fs_remove_tree(const char *dir)
{
  DIR *d = opendir(dir);
  if (d == NULL) {
    return errno == ENOENT ? 0 : -errno;
  }
  int rv = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
      continue;
    }
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) {
      rv = -ENAMETOOLONG;
      break;
    }
    struct stat st;
    if (lstat(path, &st) != 0) {
      rv = -errno;
      break;
    }
    rv = S_ISDIR(st.st_mode) ? fs_remove_tree(path) : (unlink(path) == 0 ? 0 : -errno);
    if (rv != 0) {
      break;
    }
  }
  closedir(d);
  if (rv == 0 && rmdir(dir) != 0) {
    rv = -errno;
  }
  return rv;
}

bool fs_dir_has_prefix(const char *dir, const char *prefix)
{
  DIR *d = opendir(dir);
  if (d == NULL) {
    return false;
  }
  size_t len = strlen(prefix);
  bool found = false;
  struct dirent *de;
  while (!found && (de = readdir(d)) != NULL) {
    found = strncmp(de->d_name, prefix, len) == 0;
  }
  closedir(d);
  return found;
}

int fs_mkdir_p(const char *dir)
{
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
    return -ENAMETOOLONG;
  }
  /* Usually the directory or its parent exists: one call instead of one
   * per component (a restart opens 10,000 replicas' directories). */
  if (mkdir(path, 0755) == 0 || errno == EEXIST) {
    return 0;
  }
  if (errno != ENOENT) {
    return -errno;
  }
  for (char *p = path + 1; *p != '\0'; p++) {
    if (*p != '/') {
      continue;
    }
    *p = '\0';
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
      return -errno;
    }
    *p = '/';
  }
  if (mkdir(path, 0755) != 0 && errno != EEXIST) {
    return -errno;
  }
  return 0;
}

int fs_pwritev_all(int fd, const struct iovec *iov, size_t n, off_t off)
{
  size_t i = 0;
  size_t skip = 0; /* bytes of iov[i] already written */
  while (i < n) {
    struct iovec local[64];
    size_t k = 0;
    for (size_t j = i; j < n && k < 64; j++, k++) {
      local[k] = iov[j];
      if (j == i) {
        local[k].iov_base = (uint8_t *)local[k].iov_base + skip;
        local[k].iov_len -= skip;
      }
    }
    ssize_t w = pwritev(fd, local, (int)k, off);
    if (w < 0) {
      if (errno == EINTR) {
        continue;
      }
      return -errno;
    }
    if (w == 0) {
      return -EIO;
    }
    off += w;
    size_t left = (size_t)w;
    while (i < n && left >= iov[i].iov_len - skip) {
      left -= iov[i].iov_len - skip;
      skip = 0;
      i++;
    }
    skip += left;
  }
  return 0;
}

int fs_raise_nofile(uint64_t *limit)
{
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    return -errno;
  }
  if (rl.rlim_cur != rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
      return -errno;
    }
  }
  if (limit != NULL) {
    *limit = (uint64_t)rl.rlim_cur;
  }
  return 0;
}
