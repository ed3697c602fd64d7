/* watchdog: the thread that ends a process whose loop stopped (watchdog.h).
 *
 * The loop publishes two things: a beat counter (atomic, bumped on every turn
 * and every handler return) and what runs now (copied into fixed buffers
 * under a mutex held only for the copy, so the thread never waits on a
 * stalled loop). The thread wakes every interval, and counts the time during
 * which the counter did not move; a wake-up that comes late (the process was
 * stopped, the machine suspended) counts as one interval only, so a pause of
 * the whole process is not taken for a stall. The exit line is built here,
 * in the log's format with log_format_line (pure) and written with write(2):
 * log_line's sink belongs to the loop thread. */
#include "watchdog.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

struct running {
  bool on;           /* a handler runs (enter without leave) */
  uint64_t since_ms; /* when it was entered, monotonic */
  char handler[64];
  char file[256];
  char stream[128];
  char group[128];
  char id[48]; /* "" while a file loads */
};

static atomic_bool armed; /* the thread runs: the loop publishes */
static atomic_uint_fast64_t beats;
static pthread_mutex_t now_mu = PTHREAD_MUTEX_INITIALIZER;
static struct running now; /* under now_mu */

static pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ctl_cond; /* on CLOCK_MONOTONIC */
static bool stopping;           /* under ctl_mu */
static bool started;            /* the thread exists (loop thread only) */
static pthread_t thread;
static uint64_t limit_ms, interval_ms;

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void copy(char *dst, size_t cap, const char *src) {
  size_t n = src ? strlen(src) : 0;
  if (n >= cap) n = cap - 1;
  if (n) memcpy(dst, src, n);
  dst[n] = '\0';
}

/* ---- the loop's side ---- */

void watchdog_beat(void) {
  if (atomic_load_explicit(&armed, memory_order_relaxed))
    atomic_fetch_add_explicit(&beats, 1, memory_order_relaxed);
}

void watchdog_enter(const char *handler, const char *file, const char *stream, const char *group,
                    const char *id) {
  if (!atomic_load_explicit(&armed, memory_order_relaxed)) return;
  pthread_mutex_lock(&now_mu);
  now.on = true;
  now.since_ms = mono_ms();
  copy(now.handler, sizeof now.handler, handler);
  copy(now.file, sizeof now.file, file);
  copy(now.stream, sizeof now.stream, stream);
  copy(now.group, sizeof now.group, group);
  copy(now.id, sizeof now.id, id);
  pthread_mutex_unlock(&now_mu);
}

void watchdog_leave(void) {
  if (!atomic_load_explicit(&armed, memory_order_relaxed)) return;
  pthread_mutex_lock(&now_mu);
  now.on = false;
  pthread_mutex_unlock(&now_mu);
  atomic_fetch_add_explicit(&beats, 1, memory_order_relaxed);
}

/* ---- the thread ---- */

/* The exit line's key/value pairs; an empty value is skipped. */
struct fields {
  const char *kv[20];
  size_t kvlen[20];
  unsigned char numeric[10];
  size_t n;
};

static void add(struct fields *f, const char *key, const char *value, bool number) {
  if (value == NULL || value[0] == '\0' || f->n == 10) return;
  f->kv[2 * f->n] = key;
  f->kvlen[2 * f->n] = strlen(key);
  f->kv[2 * f->n + 1] = value;
  f->kvlen[2 * f->n + 1] = strlen(value);
  f->numeric[f->n++] = number;
}

/* Writes all of buf to stderr; a full non-blocking pipe gets a second or so. */
static void write_all(const char *buf, size_t len) {
  for (int waits = 0; len > 0;) {
    ssize_t w = write(STDERR_FILENO, buf, len);
    if (w >= 0) {
      buf += w;
      len -= (size_t)w;
      continue;
    }
    if (errno == EINTR) continue;
    if ((errno != EAGAIN && errno != EWOULDBLOCK) || ++waits > 10) return;
    struct pollfd p = {.fd = STDERR_FILENO, .events = POLLOUT};
    poll(&p, 1, 100);
  }
}

/* The stall is confirmed: one error line, then the exit. */
static void fire(uint64_t stalled_ms) {
  struct running r;
  pthread_mutex_lock(&now_mu);
  r = now;
  pthread_mutex_unlock(&now_mu);
  char line[2048], running[32], limit[32], stalled[32], status[16];
  struct timespec ts;
  struct fields f = {.n = 0};
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t wall = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
  if (r.on) {
    add(&f, "phase", r.id[0] ? "handle" : "load", false);
    add(&f, "file", r.file, false);
    add(&f, "stream", r.stream, false);
    add(&f, "group", r.group, false);
    add(&f, "id", r.id, false);
    snprintf(running, sizeof running, "%llu", (unsigned long long)(mono_ms() - r.since_ms));
    add(&f, "running_ms", running, true);
  } else {
    add(&f, "phase", "loop", false); /* stuck outside any handler */
  }
  snprintf(limit, sizeof limit, "%llums", (unsigned long long)limit_ms);
  add(&f, "limit", limit, false);
  snprintf(stalled, sizeof stalled, "%llu", (unsigned long long)stalled_ms);
  add(&f, "stalled_ms", stalled, true);
  snprintf(status, sizeof status, "%d", WATCHDOG_EXIT_STATUS);
  add(&f, "exit_status", status, true);
  size_t at =
      log_format_line(line, sizeof line, wall, LOG_ERROR, r.on && r.handler[0] ? r.handler : NULL,
                      "watchdog: the event loop has not turned within the limit, exiting", f.n,
                      f.kv, f.kvlen, f.numeric);
  write_all(line, at);
  /* At once, from this thread: the loop thread cannot run exit handlers. */
  _exit(WATCHDOG_EXIT_STATUS);
}

static void *watch(void *arg) {
  (void)arg;
  uint64_t last = mono_ms(), stalled = 0;
  uint_fast64_t seen = atomic_load(&beats);
  pthread_mutex_lock(&ctl_mu);
  while (!stopping) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)(interval_ms / 1000);
    until.tv_nsec += (long)(interval_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    int rc = 0;
    while (!stopping && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&ctl_cond, &ctl_mu, &until);
    if (stopping) break;
    uint64_t t = mono_ms(), step = t - last;
    last = t;
    if (step > 2 * interval_ms) step = 2 * interval_ms; /* the whole process was paused */
    uint_fast64_t b = atomic_load(&beats);
    if (b != seen) {
      seen = b;
      stalled = 0;
      continue;
    }
    stalled += step;
    if (stalled >= limit_ms) fire(stalled);
  }
  pthread_mutex_unlock(&ctl_mu);
  return NULL;
}

int watchdog_start(uint64_t limit, char *err, size_t errlen) {
  if (started || limit == 0) {
    snprintf(err, errlen, started ? "the watchdog runs already" : "the watchdog needs a limit");
    return -1;
  }
  limit_ms = limit;
  interval_ms = limit / 4 < 1000 ? limit / 4 : 1000;
  /* cppcheck-suppress knownConditionTrueFalse ; false positive: limit / 4 is 0 for a limit below 4 ms */
  if (interval_ms == 0) interval_ms = 1;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&ctl_cond, &attr);
  pthread_condattr_destroy(&attr);
  stopping = false;
  atomic_store(&armed, true);
  int rc = pthread_create(&thread, NULL, watch, NULL);
  if (rc != 0) {
    atomic_store(&armed, false);
    pthread_cond_destroy(&ctl_cond);
    snprintf(err, errlen, "cannot start the watchdog thread: %s", strerror(rc));
    return -1;
  }
  started = true;
  return 0;
}

uint64_t watchdog_interval_ms(void) { return interval_ms; }

void watchdog_stop(void) {
  if (!started) return;
  pthread_mutex_lock(&ctl_mu);
  stopping = true;
  pthread_cond_signal(&ctl_cond);
  pthread_mutex_unlock(&ctl_mu);
  pthread_join(thread, NULL);
  pthread_cond_destroy(&ctl_cond);
  atomic_store(&armed, false);
  started = false;
}
