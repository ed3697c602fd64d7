/* log_writer: the log written to stderr by a thread of its own (see
 * log_writer.h).
 *
 * While stderr keeps up, a line is written at once by the thread that logs it
 * (the lines before a crash are not lost). Once stderr has no room, lines
 * wait: the loop appends to `fill` under the lock; the thread swaps it with
 * its empty `out`, lets go of the lock and writes `out` line by line. The
 * loop never waits for stderr, only for the lock, which the thread holds for
 * a swap. */
#include "log_writer.h"

#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

struct buf {
  char *p;
  size_t len;
};

static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake;    /* the thread: lines to write, or stop */
  pthread_cond_t written; /* log_writer_stop: the thread wrote what it had */
  pthread_t thread;
  struct buf fill, out;
  bool running, stopping, writing;
  uint64_t dropped;    /* since start, for log_writer_dropped */
  uint64_t unreported; /* dropped and not yet said in a warning */
} w = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .wake = PTHREAD_COND_INITIALIZER,
       .written = PTHREAD_COND_INITIALIZER};

/* Each line with one write(), as the default sink does. */
static void write_lines(const char *p, size_t len) {
  while (len > 0) {
    const char *nl = memchr(p, '\n', len);
    size_t n = nl ? (size_t)(nl - p) + 1 : len;
    log_write_stderr(p, n);
    p += n;
    len -= n;
  }
}

static void *writer_main(void *arg) {
  (void)arg;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
  pthread_mutex_lock(&w.lock);
  for (;;) {
    while (w.fill.len == 0 && !w.stopping) pthread_cond_wait(&w.wake, &w.lock);
    if (w.fill.len == 0) break; /* stopping, and everything written */
    struct buf t = w.out;
    w.out = w.fill;
    w.fill = t;
    w.writing = true;
    pthread_mutex_unlock(&w.lock);
    /* Only while writing may log_writer_stop cancel the thread (see there). */
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
    write_lines(w.out.p, w.out.len);
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    pthread_mutex_lock(&w.lock);
    w.out.len = 0;
    w.writing = false;
    pthread_cond_broadcast(&w.written);
  }
  pthread_mutex_unlock(&w.lock);
  return NULL;
}

static bool append(const char *line, size_t n) {
  if (LOG_WRITER_CAPACITY - w.fill.len < n) return false;
  memcpy(w.fill.p + w.fill.len, line, n);
  w.fill.len += n;
  return true;
}

static void report_dropped(uint64_t lost) {
  char n[24];
  snprintf(n, sizeof n, "%llu", (unsigned long long)lost);
  log_line(LOG_WARN, NULL, "log lines dropped: stderr was not taking them", LOG_NUMBER "dropped", n,
           NULL);
}

/* stderr takes a line of n bytes now without blocking: a pipe (or a
 * terminal) with room, or a file. */
static bool writable_now(size_t n) {
  struct pollfd p = {.fd = STDERR_FILENO, .events = POLLOUT};
  return n <= PIPE_BUF && poll(&p, 1, 0) == 1 && (p.revents & POLLOUT);
}

static void sink(void *data, enum log_level level, const char *line, size_t len) {
  (void)data;
  (void)level;
  pthread_mutex_lock(&w.lock);
  /* Nothing waiting and room on stderr: written here and now, so the lines
   * just before a crash are not lost in the buffer. */
  if (w.fill.len == 0 && !w.writing && !w.unreported && writable_now(len + 1)) {
    write_lines(line, len + 1);
    pthread_mutex_unlock(&w.lock);
    return;
  }
  uint64_t lost = w.unreported;
  bool ok = append(line, len + 1); /* with its newline */
  if (!ok) w.dropped++, w.unreported++;
  if (ok && lost) w.unreported = 0;
  pthread_cond_signal(&w.wake);
  pthread_mutex_unlock(&w.lock);
  /* Said after the first line that fits again: log_line re-enters this sink
   * with the warning, which is dropped and counted in turn if it does not fit. */
  if (ok && lost) report_dropped(lost);
}

int log_writer_start(void) {
  if (w.running) return 0;
  w.fill.p = malloc(LOG_WRITER_CAPACITY);
  w.out.p = malloc(LOG_WRITER_CAPACITY);
  w.fill.len = w.out.len = 0;
  w.stopping = false;
  w.dropped = w.unreported = 0;
  if (w.fill.p == NULL || w.out.p == NULL ||
      pthread_create(&w.thread, NULL, writer_main, NULL) != 0) {
    free(w.fill.p);
    free(w.out.p);
    w.fill.p = w.out.p = NULL;
    return -1;
  }
  w.running = true;
  log_set_sink(sink, NULL);
  return 0;
}

void log_writer_stop(uint64_t timeout_ms) {
  if (!w.running) return;
  log_set_sink(NULL, NULL); /* from here on lines are written as they come */
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until); /* the condition variable's clock */
  until.tv_sec += (time_t)(timeout_ms / 1000);
  until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&w.lock);
  w.stopping = true;
  pthread_cond_signal(&w.wake);
  int rc = 0;
  while ((w.fill.len || w.writing) && rc == 0)
    rc = pthread_cond_timedwait(&w.written, &w.lock, &until);
  bool stuck = w.fill.len || w.writing;
  pthread_mutex_unlock(&w.lock);
  /* A thread still inside write() after the deadline is cancelled there
   * (write is a cancellation point); what it held is lost. */
  if (stuck) pthread_cancel(w.thread);
  pthread_join(w.thread, NULL);
  free(w.fill.p);
  free(w.out.p);
  w.fill.p = w.out.p = NULL;
  w.running = false;
  if (w.unreported && !stuck) report_dropped(w.unreported); /* written as it comes now */
  w.unreported = 0;
}

uint64_t log_writer_dropped(void) {
  pthread_mutex_lock(&w.lock);
  uint64_t n = w.dropped;
  pthread_mutex_unlock(&w.lock);
  return n;
}
