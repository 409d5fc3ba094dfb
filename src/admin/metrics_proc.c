/* metrics_proc.c - the process and host series of the node's metrics:
 * Prometheus' standard process_* metrics read from /proc/self (as the
 * official client libraries export them, so dashboards built for them
 * work), the data directory's filesystem, and cairn_build_info. See
 * metrics_node.h.
 *
 * /proc/self/stat: after the command's closing ')', field 14 utime and 15
 * stime (clock ticks), 22 starttime (ticks after boot), 23 vsize (bytes),
 * 24 rss (pages) - proc(5). Boot time is /proc/stat's btime line. */
#include "admin/metrics_node.h"

#include "server/node.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define METRICS_PROC_STAT_MAX 1024
#ifdef __clang__
#define METRICS_PROC_COMPILER __VERSION__ /* "Debian Clang 14.0.6" */
#else
#define METRICS_PROC_COMPILER "gcc " __VERSION__
#endif

struct metrics_proc_stat {
  uint64_t utime, stime, starttime, vsize, rss_pages;
};

/* Parses /proc/self/stat; false when it cannot be read or parsed. */
static bool metrics_proc_read_stat(struct metrics_proc_stat *ps)
{
  char buf[METRICS_PROC_STAT_MAX];
  FILE *f = fopen("/proc/self/stat", "r");
  if (f == NULL) {
    return false;
  }
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[len] = '\0';
  const char *p = strrchr(buf, ')'); /* the command may hold spaces and ')' */
  if (p == NULL) {
    return false;
  }
  /* Fields 3..24 follow: skip 3..13, read 14, 15, skip 16..21, read 22..24. */
  int got = sscanf(p + 1,
                   " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %" SCNu64 " %" SCNu64
                   " %*d %*d %*d %*d %*d %*d %" SCNu64 " %" SCNu64 " %" SCNu64,
                   &ps->utime, &ps->stime, &ps->starttime, &ps->vsize, &ps->rss_pages);
  return got == 5;
}

/* The boot time in seconds since the epoch (/proc/stat btime), or 0. */
static uint64_t metrics_proc_boot_time(void)
{
  FILE *f = fopen("/proc/stat", "r");
  if (f == NULL) {
    return 0;
  }
  char line[256];
  uint64_t btime = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    if (sscanf(line, "btime %" SCNu64, &btime) == 1) {
      break;
    }
  }
  fclose(f);
  return btime;
}

static void metrics_proc_family(struct admin_buf *b, const char *name, const char *type,
                                const char *help)
{
  admin_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metrics_proc_stat_series(struct admin_buf *b)
{
  struct metrics_proc_stat ps;
  long tck = sysconf(_SC_CLK_TCK);
  long page = sysconf(_SC_PAGESIZE);
  if (!metrics_proc_read_stat(&ps) || tck <= 0 || page <= 0) {
    return;
  }
  uint64_t cpu_ticks = ps.utime + ps.stime;
  metrics_proc_family(b, "process_cpu_seconds_total", "counter",
                      "User and system CPU time spent by the process, in seconds.");
  admin_buf_printf(b, "process_cpu_seconds_total %" PRIu64 ".%02" PRIu64 "\n",
                   cpu_ticks / (uint64_t)tck, (cpu_ticks % (uint64_t)tck) * 100 / (uint64_t)tck);
  metrics_proc_family(b, "process_resident_memory_bytes", "gauge",
                      "Resident memory size in bytes.");
  admin_buf_printf(b, "process_resident_memory_bytes %" PRIu64 "\n", ps.rss_pages * (uint64_t)page);
  metrics_proc_family(b, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
  admin_buf_printf(b, "process_virtual_memory_bytes %" PRIu64 "\n", ps.vsize);
  uint64_t btime = metrics_proc_boot_time();
  if (btime > 0) {
    uint64_t t = ps.starttime;
    metrics_proc_family(b, "process_start_time_seconds", "gauge",
                        "Start time of the process since the Unix epoch, in seconds.");
    admin_buf_printf(b, "process_start_time_seconds %" PRIu64 ".%02" PRIu64 "\n",
                     btime + t / (uint64_t)tck, (t % (uint64_t)tck) * 100 / (uint64_t)tck);
  }
}

static void metrics_proc_fds(struct admin_buf *b)
{
  DIR *d = opendir("/proc/self/fd");
  if (d != NULL) {
    uint64_t fds = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
      fds += e->d_name[0] != '.' ? 1 : 0;
    }
    closedir(d);
    metrics_proc_family(b, "process_open_fds", "gauge", "Number of open file descriptors.");
    /* Less the one opendir holds. */
    admin_buf_printf(b, "process_open_fds %" PRIu64 "\n", fds > 0 ? fds - 1 : 0);
  }
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    metrics_proc_family(b, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
    admin_buf_printf(b, "process_max_fds %" PRIu64 "\n", (uint64_t)rl.rlim_cur);
  }
}

static void metrics_proc_data_dir(struct node *n, struct admin_buf *b)
{
  struct statvfs vfs;
  if (statvfs(n->cfg.data_dir, &vfs) != 0) {
    return;
  }
  metrics_proc_family(b, "cairn_data_dir_filesystem_size_bytes", "gauge",
                      "Size of the filesystem holding the data directory.");
  admin_buf_printf(b, "cairn_data_dir_filesystem_size_bytes %" PRIu64 "\n",
                   (uint64_t)vfs.f_blocks * vfs.f_frsize);
  metrics_proc_family(b, "cairn_data_dir_filesystem_avail_bytes", "gauge",
                      "Bytes of that filesystem still available to the node.");
  admin_buf_printf(b, "cairn_data_dir_filesystem_avail_bytes %" PRIu64 "\n",
                   (uint64_t)vfs.f_bavail * vfs.f_frsize);
}

void metrics_node_write_process(struct node *n, struct admin_buf *b)
{
  metrics_proc_family(b, "cairn_build_info", "gauge",
                      "The cairnd build: its version and compiler (always 1).");
  admin_buf_printf(b, "cairn_build_info{version=\"%s\",compiler=\"%s\"} 1\n", NODE_VERSION,
                   METRICS_PROC_COMPILER);
  metrics_proc_data_dir(n, b);
  metrics_proc_stat_series(b);
  metrics_proc_fds(b);
}
