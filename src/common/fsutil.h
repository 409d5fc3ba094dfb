/* fsutil.h - small file-system helpers that return 0 or -errno and retry
 * EINTR: whole-buffer pread/pwrite, directory fsync, atomic file replace. */
#ifndef CAIRN_FSUTIL_H
#define CAIRN_FSUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Writes all len bytes at off. Returns 0 or -errno (a short write that makes
 * no progress is -EIO). Context: any thread. */
__attribute__((warn_unused_result)) int fs_pwrite_all(int fd, const void *buf, size_t len,
                                                      off_t off);

/* Reads up to len bytes at off into buf; *got is what was read (less than
 * len only at end of file). Returns 0 or -errno. Context: any thread. */
__attribute__((warn_unused_result)) int fs_pread_full(int fd, void *buf, size_t len, off_t off,
                                                      size_t *got);

/* fsync(2) of the directory at path, so that creates, renames and unlinks in
 * it are durable. Returns 0 or -errno. Blocks. Context: any thread. */
__attribute__((warn_unused_result)) int fs_fsync_dir(const char *path);

/* Atomically replaces dir/name with len bytes: write dir/name.tmp, fsync it,
 * rename over name, fsync dir. Returns 0 or -errno; on failure the old file
 * is untouched. Blocks. Context: any thread. */
__attribute__((warn_unused_result)) int fs_replace_file(const char *dir, const char *name,
                                                        const void *buf, size_t len);

/* Reads the whole of dir/name if it is at most max bytes. *out is owned by
 * the caller (free with free()). Returns 0, -ENOENT, CAIRN_ETOOLARGE or
 * -errno. Context: any thread. */
__attribute__((warn_unused_result)) int fs_read_file(const char *dir, const char *name,
                                                     size_t max, uint8_t **out, size_t *len);

/* Removes dir and everything below it (no symlinks followed). Returns 0
 * (also when dir does not exist) or -errno. Context: any thread. */
__attribute__((warn_unused_result)) int fs_remove_tree(const char *dir);

/* Does dir hold an entry whose name starts with prefix? false also when
 * dir cannot be read. Blocks (readdir). Context: any thread. */
bool fs_dir_has_prefix(const char *dir, const char *prefix);

/* Creates dir and missing parents (mode 0755). Returns 0 or -errno. */
__attribute__((warn_unused_result)) int fs_mkdir_p(const char *dir);

/* Raises this process's soft limit on open files (RLIMIT_NOFILE) to its
 * hard limit: a node holds ~11 descriptors per Raft group (sockets, raft's
 * open segments, the partition log, an eventfd), and Debian's default soft
 * limit of 1,024 runs out at ~90 groups. *limit (may be NULL) is the soft
 * limit in force afterwards. Returns 0 or -errno. Context: process start,
 * before other threads. */
__attribute__((warn_unused_result)) int fs_raise_nofile(uint64_t *limit);

#include <sys/uio.h>
/* Writes every byte of iov[0..n) at off (pwritev, continuing after short
 * writes; iov is not modified). Returns 0 or -errno. Context: any thread. */
__attribute__((warn_unused_result)) int fs_pwritev_all(int fd, const struct iovec *iov, size_t n,
                                                       off_t off);

#endif
