/* Outcomes that deliver again or set aside: ls.retry_after (durations
 * through the host), ls.reject, and ls.backoff reading the delivery count the
 * host keeps. The arithmetic of ls.backoff is tested in
 * tests/spec/backoff_spec.lua. */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "clock.h"
#include "entry.h"
#include "fixtures.h"
#include "log.h"
#include "runtime.h"
#include "task.h"
#include "test_runtime_support.h"

/* ============================================================ retry_after, reject */

static const char LATER[] =
    "local ls = require \"luastream\"\n"                                             /* 1 */
    "return { stream = \"s\", group = \"g\",\n"                                      /* 2 */
    "  handle = function(msg)\n"                                                     /* 3 */
    "    local m = msg.mode\n"                                                       /* 4 */
    "    if m == \"helper\" then return ls.retry_after(msg.delay) end\n"             /* 5 */
    "    if m == \"raw\" then return { retry_after = msg.delay } end\n"              /* 6 */
    "    if m == \"reject\" then return ls.reject(msg.reason) end\n"                 /* 7 */
    "    if m == \"rawreject\" then return { reject = msg.reason } end\n"            /* 8 */
    "    if m == \"noreason\" then return ls.reject() end\n"                         /* 9 */
    "    if m == \"local\" then local r = ls.retry_after(msg.delay); return r end\n" /* 10 */
    "  end }\n";

/* {"mode": mode, "delay": delay_json}; no delay when delay_json is NULL. */
static struct captured run_later(handler *h, const char *mode, const char *delay_json) {
  char json[1024];
  if (delay_json)
    snprintf(json, sizeof json, "{\"mode\":\"%s\",\"delay\":%s}", mode, delay_json);
  else
    snprintf(json, sizeof json, "{\"mode\":\"%s\"}", mode);
  return run_json(h, "30-1", json);
}

static void expect_after(const struct captured *c, int64_t ms) {
  ASSERT_INT_EQ(c->kind, RT_RETRY_AFTER);
  ASSERT_INT_EQ(c->delay_ms, ms);
  ASSERT(!c->has_text && !c->has_reason && !c->has_stream);
  ASSERT_INT_EQ(c->nwrites, 0);
}

TEST_IMPL(runtime_retry_after) {
  const char *path = write_file("later.lua", LATER);
  handler *h = NULL;
  ASSERT_OK(handler_load(path, NULL, &h, load_error, sizeof load_error));
  ASSERT_OK(handler_bind(h, "c-1"));
  struct captured c = run_later(h, "helper", "1500");
  expect_after(&c, 1500);
  c = run_later(h, "helper", "\"30s\"");
  expect_after(&c, 30000);
  c = run_later(h, "helper", "\"250ms\"");
  expect_after(&c, 250);
  c = run_later(h, "helper", "\"5m\"");
  expect_after(&c, 300000);
  c = run_later(h, "helper", "\"1h\"");
  expect_after(&c, 3600000);
  c = run_later(h, "helper", "\"1.5s\"");
  expect_after(&c, 1500);
  c = run_later(h, "helper", "12.7"); /* whole milliseconds */
  expect_after(&c, 12);
  c = run_later(h, "helper", "0");
  expect_after(&c, 0);

  /* a bad delay is a bad return value, however ls.retry_after was called */
  const char *how[] = {"helper", "local"};
  for (size_t m = 0; m < 2; m++) {
    c = run_later(h, how[m], "\"soon\"");
    expect_fail(&c, RT_ERROR, "bad-return");
    ASSERT_STR_EQ(
        c.text,
        "ls.retry_after: delay must be a duration such as \"500ms\", \"30s\", \"2m\" or \"1h\"");
  }
  c = run_later(h, "helper", "-1");
  expect_fail(&c, RT_ERROR, "bad-return");
  ASSERT_STR_EQ(c.text, "ls.retry_after: delay must be a non-negative number of milliseconds");
  c = run_later(h, "helper", NULL);
  expect_fail(&c, RT_ERROR, "bad-return");
  ASSERT_STR_EQ(c.text,
                "ls.retry_after: delay must be a number of milliseconds or a duration "
                "such as \"30s\", got nil");

  /* the plain table works the same, a bad one is a bad return */
  c = run_later(h, "raw", "100");
  expect_after(&c, 100);
  c = run_later(h, "raw", "\"2s\"");
  expect_after(&c, 2000);
  c = run_later(h, "raw", "\"never\"");
  expect_fail(&c, RT_ERROR, "bad-return");
  ASSERT_STR_EQ(
      c.text,
      "ls.retry_after: delay must be a duration such as \"500ms\", \"30s\", \"2m\" or \"1h\"");
  c = run_later(h, "raw", "-5");
  expect_fail(&c, RT_ERROR, "bad-return");
  ASSERT_STR_EQ(c.text, "ls.retry_after: delay must be a non-negative number of milliseconds");
  handler_release(h);
  LEAK_CHECK();
}

/* `return ls.retry_after(x)` is a tail call: no error position could name
 * the handler's line, so a bad delay is a bad return value (named for
 * ls.retry_after), never an error pointing into luastream's own files. */
TEST_IMPL(runtime_retry_after_bad_delay_is_a_bad_return) {
  handler *h = load_ok("later.lua", LATER, NULL);
  struct captured c = run_later(h, "helper", "\"soon\"");
  expect_fail(&c, RT_ERROR, "bad-return");
  ASSERT_NULL(strstr(c.text, "luastream/handler.lua:"));
  ASSERT_CONTAINS(c.text, "ls.retry_after: delay must be a duration such as");
  handler_release(h);
  LEAK_CHECK();
}

/* Fixed (luastream.lua ls.duration): a delay past what a 64-bit count of
 * milliseconds holds reached the host, which converts it to int64_t
 * (undefined for such a double: INT64_MIN on x86) and adds it to the clock:
 * ls.retry_after(1e300) became a delay-set entry due at once, or a signed
 * overflow in the XCLAIM IDLE re-stamp. Durations are now capped at 2^53 ms. */
TEST_IMPL(runtime_retry_after_huge_delay) {
  handler *h = load_ok("later.lua", LATER, NULL);
  char digits[400];
  memset(digits, '9', sizeof digits - 1);
  digits[sizeof digits - 1] = '\0';
  char big[512];
  snprintf(big, sizeof big, "\"%sh\"", digits); /* tonumber() of it is inf */
  const char *delays[] = {"1e300", "\"99999999999999999999999h\"", big, "9.007199254740994e15"};
  const char *modes[] = {"helper", "raw"};
  for (size_t m = 0; m < 2; m++)
    for (size_t i = 0; i < 4; i++) {
      struct captured c = run_later(h, modes[m], delays[i]);
      if (c.kind == RT_RETRY_AFTER)
        TEST_FAIL_("%s(%.40s) gave RT_RETRY_AFTER with delay_ms %lld", modes[m], delays[i],
                   (long long)c.delay_ms);
      expect_fail(&c, RT_ERROR, "bad-return");
      ASSERT_CONTAINS(c.text, "ls.retry_after: delay must be at most 2^53 milliseconds");
    }
  /* 2^53 itself is accepted */
  struct captured c = run_later(h, "raw", "9007199254740992");
  expect_after(&c, (int64_t)1 << 53);
  handler_release(h);
  LEAK_CHECK();
}

TEST_IMPL(runtime_reject) {
  handler *h = load_ok("later.lua", LATER, NULL);
  struct captured c = run_json(h, "31-1", "{\"mode\":\"reject\",\"reason\":\"card expired\"}");
  ASSERT_INT_EQ(c.kind, RT_REJECT);
  ASSERT(c.has_text);
  ASSERT_STR_EQ(c.text, "card expired");
  ASSERT_INT_EQ(c.text_len, 12);
  ASSERT(!c.has_reason && !c.has_stream);
  ASSERT_INT_EQ(c.nwrites, 0);
  c = run_json(h, "31-2", "{\"mode\":\"noreason\"}");
  ASSERT_INT_EQ(c.kind, RT_REJECT);
  ASSERT_STR_EQ(c.text, "rejected");
  c = run_json(h, "31-3", "{\"mode\":\"reject\",\"reason\":42}");
  ASSERT_INT_EQ(c.kind, RT_REJECT);
  ASSERT_STR_EQ(c.text, "42");
  c = run_json(h, "31-4", "{\"mode\":\"rawreject\",\"reason\":\"by hand\"}");
  ASSERT_INT_EQ(c.kind, RT_REJECT);
  ASSERT_STR_EQ(c.text, "by hand");
  ASSERT(!c.has_reason);
  handler_release(h);
  LEAK_CHECK();
}

/* ============================================================ backoff */

/* ls.backoff's delay from ctx: what the host counts as deliveries. */
static const char BACKOFF[] =
    "local ls = require \"luastream\"\n"
    "local b = ls.backoff{ base = \"1s\", factor = 2, max = \"5m\" }\n"
    "return { stream = \"s\", group = \"g\", reply_to = \"r\",\n"
    "  handle = function(msg, ctx) return ls.reply(b(ctx)) end }\n";

TEST_IMPL(runtime_backoff_reads_delivery_count) {
  handler *h = load_ok("backoff.lua", BACKOFF, NULL);
  /* a retry copy's header, on the retry stream */
  struct entry *e = mk_entry("33-1", "data", "{\"mode\":\"ctx\"}", "delivery-count", "2", NULL);
  e->key = ENTRY_KEY_RETRY;
  struct captured c = run_sync(h, e);
  ASSERT_STR_EQ(c.field[1], "4000");
  entry_free(e);
  /* the same header from a producer on the shared stream counts for nothing */
  e = mk_entry("33-4", "data", "{\"mode\":\"ctx\"}", "delivery-count", "2", NULL);
  c = run_sync(h, e);
  ASSERT_STR_EQ(c.field[1], "1000");
  entry_free(e);
  /* a claimed entry's count (delivered 3 times before) */
  e = mk_entry("33-2", "data", "{\"mode\":\"ctx\"}", NULL);
  e->deliveries = 3;
  e->idle_ms = 40000;
  c = run_sync(h, e);
  ASSERT_STR_EQ(c.field[1], "8000");
  entry_free(e);
  /* never delivered before: base */
  c = run_json(h, "33-3", "{\"mode\":\"ctx\"}");
  ASSERT_STR_EQ(c.field[1], "1000");
  handler_release(h);
  LEAK_CHECK();
}
