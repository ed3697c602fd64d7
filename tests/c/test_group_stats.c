/* Tests for group_stats.c's lag in seconds, on the in-memory server and the
 * virtual clock, where the ages are exact: the age of the entry after the
 * group's last-delivered-id and of the smallest pending id, the older of the
 * stream's and the retry stream's, as time passes, shown from the scrape
 * after the asking; 0 when nothing waits. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker_memory.h"
#include "clock_virtual.h"
#include "group_stats.h"
#include "metrics.h"
#include "task.h"

#define WALL0 1700000000000ULL
#define START_MS 1000 /* the clock at the test's start: not 0, which asking takes for 1 */

static lclock *clk;
static broker *b;
static bk_conn *conn;

static void ignore(void *data, const bk_reply *r, const char *err) {
  (void)data;
  (void)r;
  (void)err;
}

/* Runs the command (its arguments, NULL-terminated) to its end. */
static void run(const char *first, ...) {
  const char *argv[16];
  size_t len[16];
  int argc = 0;
  va_list ap;
  va_start(ap, first);
  for (const char *a = first; a && argc < 16; a = va_arg(ap, const char *)) {
    argv[argc] = a;
    len[argc++] = strlen(a);
  }
  va_end(ap);
  ASSERT_OK(bk_command(b, conn, argc, argv, len, ignore, NULL));
  clock_virtual_settle(clk);
}

/* The id ms_behind the server's clock at the test's start. */
static const char *id_behind(long long ms_behind) {
  static char bufs[4][32];
  static int k;
  char *buf = bufs[k++ % 4];
  snprintf(buf, sizeof bufs[0], "%llu-0",
           (unsigned long long)(WALL0 + START_MS - (unsigned long long)ms_behind));
  return buf;
}

static const struct handler_spec SPEC = {.name = "h", .stream = "s", .group = "g"};

static size_t list_one(void *data, const struct handler_spec **out, size_t max) {
  (void)data;
  if (max) out[0] = &SPEC;
  return 1;
}

/* The value of name{stream="s",group="g"} on a page built after the one
 * that asked (-1: no such series). */
static double gauge(const char *name) {
  size_t len;
  free(metrics_page(&len)); /* asks, when the last answers are a second old */
  clock_virtual_settle(clk);
  char *page = metrics_page(&len);
  char want[128];
  snprintf(want, sizeof want, "\n%s{stream=\"s\",group=\"g\"} ", name);
  const char *at = strstr(page, want);
  double v = at ? strtod(at + strlen(want), NULL) : -1;
  free(page);
  return v;
}

#define ASSERT_AGES(lag, oldest)                                                     \
  do {                                                                               \
    ASSERT_INT_EQ(gauge("luastream_group_lag_seconds") * 1000, (lag));               \
    ASSERT_INT_EQ(gauge("luastream_group_oldest_pending_seconds") * 1000, (oldest)); \
  } while (0)

TEST_IMPL(group_stats_lag_seconds_over_stream_and_retry_stream) {
  clk = clock_virtual_new(WALL0);
  b = broker_memory_new(clk, "7.0.15");
  conn = bk_conn_open(b, "cmd", NULL, NULL);
  clock_virtual_advance(clk, START_MS);
  group_stats *g = group_stats_new(b, conn, clk, list_one, NULL);
  ASSERT_NOT_NULL(g);

  run("XADD", "s", id_behind(30000), "f", "1", NULL);
  run("XADD", "s", id_behind(20000), "f", "2", NULL);
  run("XGROUP", "CREATE", "s", "g", "0", NULL);
  run("XGROUP", "CREATE", "s:retry:g", "g", "0", "MKSTREAM", NULL);
  ASSERT_AGES(30000, 0);
  run("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">", NULL);
  clock_virtual_advance(clk, 1000); /* the last answers are a second old */
  ASSERT_AGES(21000, 31000);

  /* An older entry on the retry stream: waiting, then pending there. */
  run("XADD", "s:retry:g", id_behind(60000), "f", "3", NULL);
  clock_virtual_advance(clk, 1500);
  ASSERT_AGES(62500, 32500);
  run("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s:retry:g", ">", NULL);
  clock_virtual_advance(clk, 1000);
  ASSERT_AGES(23500, 63500);

  /* All acknowledged and delivered: 0. */
  run("XACK", "s:retry:g", "g", id_behind(60000), NULL);
  run("XACK", "s", "g", id_behind(30000), NULL);
  run("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">", NULL);
  run("XACK", "s", "g", id_behind(20000), NULL);
  clock_virtual_advance(clk, 1000);
  ASSERT_AGES(0, 0);

  group_stats_free(g);
  bk_conn_close(b, conn);
  clock_virtual_settle(clk);
  broker_free(b);
  clk->ops->free(clk);
  metrics_reset();
}
