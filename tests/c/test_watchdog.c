/* Tests for watchdog.c: a fed watchdog leaves the process alone and stops
 * cleanly; a starved one writes its line (logfmt or JSON, as the log) and
 * exits 70 (in a child process, its stderr on a pipe). */
#include <poll.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "runtime.h"
#include "task.h"
#include "watchdog.h"

static void pause_ms(int ms) { poll(NULL, 0, ms); }

TEST_IMPL(watchdog_fed_stays_quiet_and_stops) {
  char err[128];
  ASSERT_OK(watchdog_start(200, err, sizeof err));
  ASSERT_INT_EQ(watchdog_start(200, err, sizeof err), -1); /* one per process */
  ASSERT_INT_EQ(watchdog_interval_ms(), 50);
  /* Fed for 3 times the limit: by beats, then by handlers that return. */
  for (int i = 0; i < 12; i++) {
    watchdog_beat();
    pause_ms(25);
  }
  for (int i = 0; i < 12; i++) {
    watchdog_enter("h", "h.lua", "s", "g", "1-1");
    pause_ms(25);
    watchdog_leave();
  }
  watchdog_stop();
  watchdog_stop(); /* twice is fine */
  /* Stopped: nothing watches, however long nothing beats. */
  pause_ms(300);
  ASSERT_OK(watchdog_start(100, err, sizeof err)); /* and it can start again */
  watchdog_stop();
  LEAK_CHECK();
}

/* Runs a child that starts the watchdog (limit ms), enters a handler and
 * never leaves; returns its exit status, its stderr in out. */
static int starve(uint64_t ms, char *out, size_t cap) {
  int fds[2];
  ASSERT_OK(pipe(fds));
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    char err[128];
    if (watchdog_start(ms, err, sizeof err) != 0) _exit(3);
    watchdog_enter("spin", "/h/spin.lua", "payments", "ledger", "1700000000000-7");
    for (;;) pause_ms(1000); /* the loop never comes back */
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t r;
  while (n + 1 < cap && (r = read(fds[0], out + n, cap - n - 1)) > 0) n += (size_t)r;
  out[n] = '\0';
  close(fds[0]);
  int status;
  ASSERT_INT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT(WIFEXITED(status));
  return WEXITSTATUS(status);
}

TEST_IMPL(watchdog_starved_logs_what_ran_and_exits_70) {
  char out[4096];
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  ASSERT_INT_EQ(starve(200, out, sizeof out), WATCHDOG_EXIT_STATUS);
  clock_gettime(CLOCK_MONOTONIC, &b);
  long ms = (long)(b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
  ASSERT(ms >= 200 && ms < 5000);
  ASSERT(strncmp(out, "time=", 5) == 0);
  ASSERT_CONTAINS(out,
                  " level=error handler=spin msg=\"watchdog: the event loop has not turned "
                  "within the limit, exiting\" phase=handle file=/h/spin.lua stream=payments "
                  "group=ledger id=1700000000000-7 running_ms=");
  ASSERT_CONTAINS(out, " limit=200ms stalled_ms=");
  ASSERT_CONTAINS(out, " exit_status=70\n");
  ASSERT_INT_EQ(strchr(out, '\n') - out + 1, (long)strlen(out)); /* one line */
  LEAK_CHECK();
}

/* With JSON logs the exit line is a JSON object like every other line. */
TEST_IMPL(watchdog_starved_logs_json) {
  char out[4096], e[256];
  log_set_format(LOG_FORMAT_JSON); /* the child inherits it */
  ASSERT_INT_EQ(starve(100, out, sizeof out), WATCHDOG_EXIT_STATUS);
  log_set_format(LOG_FORMAT_LOGFMT);
  ASSERT(strncmp(out, "{\"time\":\"", 9) == 0);
  ASSERT_CONTAINS(out,
                  "\",\"level\":\"error\",\"handler\":\"spin\",\"msg\":\"watchdog: the "
                  "event loop has not turned within the limit, exiting\",\"phase\":\"handle\","
                  "\"file\":\"/h/spin.lua\",\"stream\":\"payments\",\"group\":\"ledger\","
                  "\"id\":\"1700000000000-7\",\"running_ms\":");
  ASSERT_CONTAINS(out, ",\"limit\":\"100ms\",\"stalled_ms\":");
  ASSERT_CONTAINS(out, ",\"exit_status\":70}\n");
  size_t len = strlen(out);
  ASSERT_INT_EQ(strchr(out, '\n') - out + 1, (long)len); /* one line */
  ASSERT(rt_json_valid(out, len - 1, e, sizeof e));
  LEAK_CHECK();
}
