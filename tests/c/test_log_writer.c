/* Tests for log_writer.c: the log written by a thread of its own while the
 * loop thread keeps logging. Each test runs the writer in a child whose
 * stderr is a pipe read by the test: a stalled reader makes the lines wait
 * in the buffer (and drop once it is full), a reader that keeps up gets
 * every line in order. Under ./dev tsan these are the tests that run the
 * writer thread beside the thread that logs. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "log_writer.h"
#include "task.h"

#define FILLER 8192 /* above PIPE_BUF: such a line always goes through the buffer */

/* Runs a child that logs `lines` lines of `size` bytes of filler through the
 * writer with its stderr on a pipe, then stops the writer; the test reads
 * the pipe only after the child has logged every line when `stall` is set,
 * else all along. Returns the child's exit status (0: the writer stopped and
 * counted what it dropped), what it wrote in out (*len bytes, malloc'd). */
static int run_writer(int lines, size_t size, int stall, char **out, size_t *len) {
  int fds[2], done[2];
  ASSERT_OK(pipe(fds));
  ASSERT_OK(pipe(done));
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    close(done[0]);
    log_set_level(LOG_INFO);
    log_set_format(LOG_FORMAT_LOGFMT);
    if (log_writer_start() != 0) _exit(3);
    char *filler = malloc(size + 1), n[16];
    if (filler == NULL) _exit(4);
    memset(filler, 'x', size);
    filler[size] = '\0';
    for (int i = 0; i < lines; i++) {
      snprintf(n, sizeof n, "%d", i);
      log_line(LOG_INFO, NULL, "line", LOG_NUMBER "i", n, "filler", filler, NULL);
    }
    free(filler);
    if (write(done[1], "!", 1) != 1) _exit(5); /* the test starts reading */
    log_writer_stop(10000);
    /* stopped: lines are written as they come, by this thread */
    snprintf(n, sizeof n, "%llu", (unsigned long long)log_writer_dropped());
    log_line(LOG_INFO, NULL, "stopped", LOG_NUMBER "dropped", n, NULL);
    _exit(0);
  }
  close(fds[1]);
  close(done[1]);
  if (stall) {
    char c;
    ASSERT_INT_EQ(read(done[0], &c, 1), 1);
  }
  size_t cap = 1 << 20, n = 0;
  char *buf = malloc(cap);
  ASSERT_NOT_NULL(buf);
  ssize_t r;
  while ((r = read(fds[0], buf + n, cap - n - 1)) > 0) {
    n += (size_t)r;
    if (cap - n < 65536) {
      cap *= 2;
      char *bigger = realloc(buf, cap);
      ASSERT_NOT_NULL(bigger);
      buf = bigger;
    }
  }
  buf[n] = '\0';
  close(fds[0]);
  close(done[0]);
  int status;
  ASSERT_INT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT(WIFEXITED(status));
  /* a failed child (a sanitizer's report, exit 66 under ./dev tsan) shows why */
  if (WEXITSTATUS(status) != 0) fprintf(stderr, "the child's stderr:\n%s\n", buf);
  *out = buf;
  *len = n;
  return WEXITSTATUS(status);
}

/* Checks the lines of out: each "line" record whole and in order; returns
 * how many there were, the dropped count of the warning in *warned (0 when
 * none) and of the closing "stopped" line in *dropped. */
static int check_lines(const char *out, long *warned, long *dropped) {
  int seen = 0, last = -1;
  *warned = 0;
  *dropped = -1;
  for (const char *p = out; *p;) {
    const char *nl = strchr(p, '\n');
    ASSERT_NOT_NULL(nl); /* every line ends */
    const char *at;
    if ((at = strstr(p, " msg=line i=")) != NULL && at < nl) {
      int i = atoi(at + strlen(" msg=line i="));
      ASSERT(i > last);            /* in order, none twice */
      ASSERT(nl - p > FILLER / 2); /* whole: one write per line */
      last = i;
      seen++;
    } else if ((at = strstr(p, "stderr was not taking them\" dropped=")) != NULL && at < nl) {
      *warned += atol(at + strlen("stderr was not taking them\" dropped="));
    } else if ((at = strstr(p, " msg=stopped dropped=")) != NULL && at < nl) {
      *dropped = atol(at + strlen(" msg=stopped dropped="));
    } else {
      fprintf(stderr, "unexpected line: %.200s\n", p);
      ASSERT(0);
    }
    p = nl + 1;
  }
  return seen;
}

/* 200 lines of 8 KB (1.6 MB) while nobody reads: the pipe and the 1 MB
 * buffer fill, the rest is dropped and counted, the buffer is written once
 * the reader is back, and the warning says how many were lost. */
TEST_IMPL(log_writer_stalled_reader_buffers_then_drops_and_counts) {
  char *out;
  size_t len;
  ASSERT_OK(run_writer(200, FILLER, 1, &out, &len));
  long warned, dropped;
  int seen = check_lines(out, &warned, &dropped);
  ASSERT(seen > 0 && seen < 200);
  ASSERT(dropped > 0);
  ASSERT_INT_EQ(warned, dropped);
  ASSERT_INT_EQ(seen + dropped, 200);
  free(out);
  LEAK_CHECK();
}

/* 400 lines of 8 KB read as they come: the loop thread appends while the
 * writer thread swaps and writes; every line arrives whole and in order, or
 * is counted as dropped (a slow reader under a sanitizer). */
TEST_IMPL(log_writer_reader_keeping_up_gets_lines_in_order) {
  char *out;
  size_t len;
  ASSERT_OK(run_writer(400, FILLER, 0, &out, &len));
  long warned, dropped;
  int seen = check_lines(out, &warned, &dropped);
  ASSERT_INT_EQ(warned, dropped);
  ASSERT_INT_EQ(seen + dropped, 400);
  ASSERT(seen > 0);
  free(out);
  LEAK_CHECK();
}
