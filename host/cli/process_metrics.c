/* process_metrics: see process_metrics.h. */
#include "process_metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"

static double started_s;

static struct metric *gauge(const char *name, const char *help, enum metric_type type) {
  return metrics_series(metrics_family(name, help, type, 0, NULL, NULL, 0), NULL);
}

/* rss (pages) from /proc/self/stat; -1 when it cannot be read. The command
 * name (field 2) may hold spaces and parentheses: the fields are counted
 * from its last ')'. */
static int read_rss(long *rss) {
  char buf[1024];
  FILE *f = fopen("/proc/self/stat", "r");
  if (f == NULL) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  if (p == NULL) return -1;
  /* after ")": state(3) ... rss(24) */
  return sscanf(p + 1,
                " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d "
                "%*u %*u %ld",
                rss) == 1
             ? 0
             : -1;
}

static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the directory's own fd */
}

static void collect(void *data) {
  (void)data;
  long rss;
  if (read_rss(&rss) == 0)
    metric_set(
        gauge("process_resident_memory_bytes", "Resident memory size in bytes", METRIC_GAUGE),
        (double)rss * (double)sysconf(_SC_PAGESIZE));
  /* getrusage, not /proc's clock ticks: a process that used under a tick
   * (10 ms) there reads 0. */
  struct rusage use;
  if (getrusage(RUSAGE_SELF, &use) == 0)
    metric_set(gauge("process_cpu_seconds_total", "Total user and system CPU time spent in seconds",
                     METRIC_COUNTER),
               (double)(use.ru_utime.tv_sec + use.ru_stime.tv_sec) +
                   (double)(use.ru_utime.tv_usec + use.ru_stime.tv_usec) / 1e6);
  int fds = open_fds();
  if (fds >= 0)
    metric_set(gauge("process_open_fds", "Number of open file descriptors", METRIC_GAUGE), fds);
  struct rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    metric_set(gauge("process_max_fds", "Maximum number of open file descriptors", METRIC_GAUGE),
               (double)lim.rlim_cur);
  metric_set(gauge("process_start_time_seconds",
                   "Start time of the process since unix epoch in seconds", METRIC_GAUGE),
             started_s);
}

int process_metrics_start(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  started_s = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
  return metrics_add_collector(collect, NULL);
}

void process_metrics_stop(void) { metrics_remove_collector(collect, NULL); }
