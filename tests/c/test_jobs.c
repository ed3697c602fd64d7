/* Jobs (jobs.c): coroutines reused after a return, ls.sleep on the clock,
 * concurrent jobs, yields that are not waits, releasing a handler while jobs
 * wait or from a done callback. */
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

static const char COROUTINES[] =
    "local ls = require 'luastream'\n"
    "local seen, n = {}, 0\n"
    "return { stream = 'orders', group = 'billing', reply_to = 'out',\n"
    "  handle = function(msg)\n"
    "    local co = coroutine.running()\n"
    "    if not seen[co] then n = n + 1; seen[co] = true end\n"
    "    if msg.fail then error('boom') end\n"
    "    return ls.reply(n)\n"
    "  end }\n";

TEST_IMPL(runtime_coroutines_reused_after_return) {
  handler *h = load_ok("coroutines.lua", COROUTINES, NULL);
  struct captured c = run_json(h, "1-1", "{}");
  expect_reply(&c, "out", "1", "1-1");
  c = run_json(h, "2-1", "{}");
  expect_reply(&c, "out", "1", "2-1"); /* the same coroutine */
  c = run_json(h, "3-1", "{\"fail\":true}");
  ASSERT_INT_EQ(c.kind, RT_ERROR);
  c = run_json(h, "4-1", "{}");
  expect_reply(&c, "out", "2", "4-1"); /* a new one after the error */
  c = run_json(h, "5-1", "{}");
  expect_reply(&c, "out", "2", "5-1");
  handler_release(h);
  LEAK_CHECK();
}

/* A handle declared with one parameter gets no ctx built; a vararg one may
 * read it, so it gets one. */
static const char VARARG[] =
    "local ls = require 'luastream'\n"
    "return { stream = 'orders', group = 'billing', reply_to = 'out',\n"
    "  handle = function(...)\n"
    "    local msg, ctx = ...\n"
    "    return ls.reply(select('#', ...) .. '|' .. ctx.id .. '|' .. msg.n)\n"
    "  end }\n";

TEST_IMPL(runtime_vararg_handle_gets_ctx) {
  handler *h = load_ok("vararg.lua", VARARG, NULL);
  struct captured c = run_json(h, "7-1", "{\"n\":3}");
  expect_reply(&c, "out", "\"2|7-1|3\"", "7-1");
  handler_release(h);
  LEAK_CHECK();
}

/* ============================================================ waiting */

static const char CAUGHT_SLEEP[] =
    "local ls = require \"luastream\"\n"
    "return { stream = \"s\", group = \"g\", reply_to = \"r\",\n"
    "  handle = function(msg)\n"
    "    local ok, why = pcall(string.gsub, \"x\", \"x\", function() ls.sleep(5) end)\n"
    "    return ls.reply(tostring(ok) .. \"|\" .. tostring(why):match(\"yield across\"))\n"
    "  end }\n";

TEST_IMPL(runtime_caught_sleep_leaves_no_timer) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  lclock *clk = clock_uv_new(&loop);
  ASSERT_NOT_NULL(clk);
  struct rt_env env = {.clock = clk};
  handler *h = load_ok("caught_sleep.lua", CAUGHT_SLEEP, &env);
  struct captured c = run_json(h, "1-1", "{}");
  expect_reply(&c, "r", "\"false|yield across\"", "1-1");
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT)); /* nothing armed: returns at once, no resume */
  ASSERT_INT_EQ(handler_jobs(h), 0);
  c = run_json(h, "1-2", "{}"); /* the same coroutine, still fine */
  expect_reply(&c, "r", "\"false|yield across\"", "1-2");
  handler_release(h);
  loop_finish(&loop, clk);
  LEAK_CHECK();
}

TEST_IMPL(runtime_sleep_waits_on_the_clock) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  lclock *clk = clock_uv_new(&loop);
  ASSERT_NOT_NULL(clk);
  struct rt_env env = {.clock = clk};
  handler *h = load_ok("sleeper.lua", SLEEPER, &env);

  struct entry *e = mk_entry("10-1", "data", "{\"ms\":20}", NULL);
  struct captured c;
  memset(&c, 0, sizeof c);
  uv_update_time(&loop);
  uint64_t start = uv_now(&loop);
  ASSERT_OK(handler_run(h, e, on_done, &c));
  ASSERT_INT_EQ(c.calls, 0); /* waiting */
  ASSERT_INT_EQ(handler_jobs(h), 1);
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_INT_EQ(c.calls, 1);
  ASSERT(c.e == e);
  expect_plain(&c, RT_ACK);
  ASSERT(uv_now(&loop) - start >= 20);
  ASSERT_INT_EQ(handler_jobs(h), 0);

  /* Two waits in a row reuse the job's timer. */
  entry_free(e);
  e = mk_entry("10-4", "data", "{\"ms\":10,\"again\":15}", NULL);
  memset(&c, 0, sizeof c);
  uv_update_time(&loop);
  start = uv_now(&loop);
  ASSERT_OK(handler_run(h, e, on_done, &c));
  ASSERT_INT_EQ(uv_run(&loop, UV_RUN_ONCE), 1); /* still a timer armed */
  ASSERT_INT_EQ(c.calls, 0);                    /* the first wait is over, the second is not */
  ASSERT_INT_EQ(handler_jobs(h), 1);
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_INT_EQ(c.calls, 1);
  expect_plain(&c, RT_ACK);
  ASSERT(uv_now(&loop) - start >= 25);

  /* A duration string works too. */
  entry_free(e);
  e = mk_entry("10-2", "data", "{\"ms\":\"5ms\"}", NULL);
  memset(&c, 0, sizeof c);
  ASSERT_OK(handler_run(h, e, on_done, &c));
  ASSERT_INT_EQ(c.calls, 0);
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_INT_EQ(c.calls, 1);
  expect_plain(&c, RT_ACK);
  entry_free(e);

  /* A bad delay raises in the handler, without waiting. */
  e = mk_entry("10-3", "data", "{\"ms\":\"soon\"}", NULL);
  c = run_sync(h, e);
  expect_fail(&c, RT_ERROR, "handler-error");
  ASSERT_CONTAINS(c.text, "ls.sleep: delay must be a duration such as");
  entry_free(e);

  handler_release(h);
  loop_finish(&loop, clk);
  LEAK_CHECK();
}

TEST_IMPL(runtime_sleep_concurrent_jobs) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  lclock *clk = clock_uv_new(&loop);
  struct rt_env env = {.clock = clk};
  handler *h = load_ok("sleeper.lua", SLEEPER, &env);

  struct entry *slow = mk_entry("11-1", "data", "{\"ms\":60,\"reply\":true}", NULL);
  struct entry *fast = mk_entry("11-2", "data", "{\"ms\":10,\"reply\":true}", NULL);
  struct captured a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  completions = 0;
  ASSERT_OK(handler_run(h, slow, on_done, &a));
  ASSERT_OK(handler_run(h, fast, on_done, &b));
  ASSERT_INT_EQ(handler_jobs(h), 2);
  ASSERT_INT_EQ(a.calls + b.calls, 0);
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_INT_EQ(a.calls, 1);
  ASSERT_INT_EQ(b.calls, 1);
  ASSERT(a.e == slow && b.e == fast);
  /* The one started second finished first: they waited at the same time. */
  ASSERT_INT_EQ(b.order, 1);
  ASSERT_INT_EQ(a.order, 2);
  expect_reply(&a, "r", "{\"peak\":2}", "11-1");
  expect_reply(&b, "r", "{\"peak\":2}", "11-2");
  ASSERT_INT_EQ(handler_jobs(h), 0);

  entry_free(slow);
  entry_free(fast);
  handler_release(h);
  loop_finish(&loop, clk);
  LEAK_CHECK();
}

TEST_IMPL(runtime_yield_and_misplaced_waits) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  lclock *clk = clock_uv_new(&loop);
  struct rt_env env = {.clock = clk};
  const char *path = write_file("modes.lua", MODES);
  handler *h = NULL;
  ASSERT_OK(handler_load(path, &env, &h, load_error, sizeof load_error));
  ASSERT_OK(handler_bind(h, "c-1"));

  /* coroutine.yield directly: an error naming the functions that may wait */
  struct captured c = run_json(h, "12-1", "{\"mode\":\"yield\"}");
  expect_fail(&c, RT_ERROR, "handler-error");
  ASSERT_CONTAINS(c.text, "coroutine.yield called in a handler");
  ASSERT_CONTAINS(c.text, "ls.sleep");
  ASSERT_CONTAINS(c.text, "stack traceback");

  /* ls.sleep from a coroutine the handler made itself */
  c = run_json(h, "12-2", "{\"mode\":\"nested\"}");
  expect_fail(&c, RT_ERROR, "handler-error");
  ASSERT_CONTAINS(c.text,
                  "ls.sleep may only be called while handling an entry, from the handler's own "
                  "coroutine");

  /* ctx:publish does not wait: it buffers and returns true (returned
   * as is, true is a bad return, and the publish is dropped with it)... */
  c = run_json(h, "12-3", "{\"mode\":\"publish\"}");
  expect_fail(&c, RT_ERROR, "bad-return");
  ASSERT_STR_EQ(c.text,
                "handle returned boolean true; expected ls.ack(), ls.retry(), "
                "ls.reply(...) or nothing");
  /* ...and is written with the ack */
  c = run_json(h, "12-4", "{\"mode\":\"trypublish\"}");
  ASSERT_INT_EQ(c.kind, RT_ACK);
  ASSERT_INT_EQ(c.nwrites, 1);
  ASSERT_STR_EQ(c.writes[0].stream, "other");
  ASSERT_INT_EQ(c.writes[0].nfields, 2);
  ASSERT_STR_EQ(c.writes[0].field[0], "data");
  ASSERT_STR_EQ(c.writes[0].field[1], "{\"a\":1}");

  /* nothing was left waiting on the loop */
  ASSERT_INT_EQ(handler_jobs(h), 0);
  ASSERT_OK(uv_run(&loop, UV_RUN_NOWAIT));
  handler_release(h);
  loop_finish(&loop, clk);
  LEAK_CHECK();
}

TEST_IMPL(runtime_sleep_without_clock) {
  handler *h = load_ok("modes.lua", MODES, NULL);
  struct captured c = run_json(h, "13-1", "{\"mode\":\"sleep\"}");
  expect_fail(&c, RT_ERROR, "handler-error");
  ASSERT_CONTAINS(c.text, "ls.sleep: no clock in this host");
  /* ctx:publish needs neither a clock nor a connection */
  c = run_json(h, "13-2", "{\"mode\":\"trypublish\"}");
  ASSERT_INT_EQ(c.kind, RT_ACK);
  ASSERT_INT_EQ(c.nwrites, 1);
  handler_release(h);
  LEAK_CHECK();
}

TEST_IMPL(runtime_sleep_at_load_time) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  lclock *clk = clock_uv_new(&loop);
  struct rt_env env = {.clock = clk};
  const char *path =
      write_file("sleepy_load.lua",
                 "local ls = require \"luastream\"\n"
                 "ls.sleep(10)\n"
                 "return { stream = \"s\", group = \"g\", handle = function() end }\n");
  handler *h = NULL;
  ASSERT_INT_EQ(handler_load(path, &env, &h, load_error, sizeof load_error), -1);
  ASSERT_NULL(h);
  ASSERT_CONTAINS(load_error,
                  "ls.sleep may only be called while handling an entry, from the handler's own "
                  "coroutine");
  ASSERT_NULL(strchr(load_error, '\n'));
  /* `file:line:` of the ls.sleep call */
  ASSERT(strncmp(load_error, at(path, 2, ""), strlen(at(path, 2, ""))) == 0);
  loop_finish(&loop, clk);
  LEAK_CHECK();
}

/* ============================================================ release */

static handler *released_h;

static void on_done_release(void *data, struct entry *e, const struct rt_result *res) {
  on_done(data, e, res);
  handler_release(released_h);
}

TEST_IMPL(runtime_release_while_sleeping) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  lclock *clk = clock_uv_new(&loop);
  struct rt_env env = {.clock = clk};
  handler *h = load_ok("sleeper.lua", SLEEPER, &env);
  struct entry *e1 = mk_entry("14-1", "data", "{\"ms\":20,\"reply\":true}", NULL);
  struct entry *e2 = mk_entry("14-2", "data", "{\"ms\":30,\"reply\":true}", NULL);
  struct captured a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  ASSERT_OK(handler_run(h, e1, on_done, &a));
  ASSERT_OK(handler_run(h, e2, on_done, &b));
  handler_release(h); /* the state lives on while the jobs wait */
  ASSERT_INT_EQ(a.calls + b.calls, 0);
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT));
  /* both ran Lua after the release: the state was still open */
  ASSERT_INT_EQ(a.calls, 1);
  ASSERT_INT_EQ(b.calls, 1);
  expect_reply(&a, "r", "{\"peak\":2}", "14-1");
  expect_reply(&b, "r", "{\"peak\":2}", "14-2");
  entry_free(e1);
  entry_free(e2);
  loop_finish(&loop, clk);
  LEAK_CHECK(); /* and closed after the last one */
}

TEST_IMPL(runtime_release_in_done_callback) {
  released_h = load_ok("modes.lua", MODES, NULL);
  struct entry *e = mk_entry("15-1", "data", "{\"mode\":\"ack\"}", NULL);
  struct captured c;
  memset(&c, 0, sizeof c);
  ASSERT_OK(handler_run(released_h, e, on_done_release, &c));
  ASSERT_INT_EQ(c.calls, 1);
  expect_plain(&c, RT_ACK);
  entry_free(e);
  LEAK_CHECK();
}

/* BUG (jobs.c finish_failed): after finish() -- which may close the state
 * through job_free -> handler_destroy when the handler was released -- it does
 * lua_settop(L, 0) on the closed lua_State. Reached when a handler released
 * while a job waits has that job raise afterwards (or when the done callback
 * of an erroring job releases the handler, as a shutting-down host would). */
TEST_IMPL(runtime_release_while_sleeping_then_error) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  lclock *clk = clock_uv_new(&loop);
  struct rt_env env = {.clock = clk};
  handler *h = load_ok("sleeper.lua", SLEEPER, &env);
  struct entry *e = mk_entry("16-1", "data", "{\"ms\":10,\"fail\":true}", NULL);
  struct captured c;
  memset(&c, 0, sizeof c);
  ASSERT_OK(handler_run(h, e, on_done, &c));
  handler_release(h);
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_INT_EQ(c.calls, 1);
  expect_fail(&c, RT_ERROR, "handler-error");
  ASSERT_CONTAINS(c.text, "failed after sleep");
  entry_free(e);
  loop_finish(&loop, clk);
  LEAK_CHECK();
}

TEST_IMPL(runtime_release_in_done_callback_after_error) {
  released_h = load_ok("modes.lua", MODES, NULL);
  struct entry *e = mk_entry("17-1", "data", "{\"mode\":\"raise\"}", NULL);
  struct captured c;
  memset(&c, 0, sizeof c);
  ASSERT_OK(handler_run(released_h, e, on_done_release, &c));
  ASSERT_INT_EQ(c.calls, 1);
  expect_fail(&c, RT_ERROR, "handler-error");
  entry_free(e);
  LEAK_CHECK();
}
