/* fuzz_util.c - the fuzz targets' shared helpers (fuzz_util.h). */
#include "fuzz_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

uint8_t *fuzz_body(const uint8_t *data, size_t size, uint8_t *mode, size_t *len)
{
  if (size < 1) {
    return NULL;
  }
  *mode = data[0];
  *len = size - 1;
  uint8_t *p = malloc(*len + 1);
  if (p != NULL && *len > 0) {
    memcpy(p, data + 1, *len);
  }
  return p;
}

void fuzz_dir_name(char *dir, size_t cap, const char *what)
{
  const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(dir, cap, "%s/cairn-fuzz-%s-%d", base, what, (int)getpid());
}

int fuzz_dir_reset(const char *dir)
{
  DIR *d = opendir(dir);
  if (d != NULL) {
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] != '.') {
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
      }
    }
    closedir(d);
  }
  return mkdir(dir, 0755) == 0 || access(dir, W_OK) == 0 ? 0 : -1;
}

int fuzz_dir_write(const char *dir, const char *name, const uint8_t *p, size_t len)
{
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return -1;
  }
  ssize_t n = len > 0 ? write(fd, p, len) : 0;
  close(fd);
  return n == (ssize_t)len ? 0 : -1;
}
