/* ctx:publish: entries written with the ack, in order, the reply last;
 * dropped without an ack; bad arguments; across a sleep. */
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

/* ============================================================ publish */

/* ctx:publish buffers its entries in Lua; they come back as the result's
 * writes, in call order, and the subscription writes them with the ack. */
static const char PUBLISHER[] =
    "local ls = require \"luastream\"\n"
    "return { stream = \"s\", group = \"g\", reply_to = \"r\",\n"
    "  handle = function(msg, ctx)\n"
    "    if msg.bad == 1 then ctx:publish(\"\", {}) end\n"
    "    if msg.bad == 2 then ctx:publish(\"x\", function() end) end\n"
    "    if msg.bad == 3 then ctx:publish(\"x\", {}, 5) end\n"
    "    if msg.bad == 4 then ctx:publish(\"x\", {}, { headers = 5 }) end\n"
    "    if msg.bad == 5 then ctx:publish(nil, {}) end\n"
    "    local ok = ctx:publish(\"audit\", { n = msg.n }, { key = \"k1\", headers = { h = \"v\" } })\n"
    "    local caught = pcall(ctx.publish, ctx, \"\", {})\n"
    "    if msg.sleep then ls.sleep(msg.sleep) end\n"
    "    ctx:publish(\"audit2\", \"plain\")\n"
    "    ctx:publish(\"audit3\", { 1, 2 }, { key = 7 })\n"
    "    local out = msg.out\n"
    "    if out == \"reply\" then return ls.reply({ ok, caught }) end\n"
    "    if out == \"retry\" then return ls.retry() end\n"
    "    if out == \"raise\" then error(\"late failure\") end\n"
    "    if out == \"reject\" then return ls.reject(\"nope\") end\n"
    "    if out == \"after\" then return ls.retry_after(\"2s\") end\n"
    "    if out == \"bad\" then return 42 end\n"
    "    if out == \"none\" then return end\n"
    "    return ls.ack()\n"
    "  end }\n";

/* The three entries PUBLISHER publishes on {"n":1}, in call order. */
static void expect_published(const struct captured *c) {
  const struct cwrite *w = &c->writes[0];
  ASSERT_STR_EQ(w->stream, "audit");
  ASSERT_INT_EQ(w->nfields, 6);
  ASSERT_STR_EQ(w->field[0], "data");
  ASSERT_STR_EQ(w->field[1], "{\"n\":1}");
  ASSERT_INT_EQ(w->field_len[1], 7);
  ASSERT_STR_EQ(w->field[2], "partition-key");
  ASSERT_STR_EQ(w->field[3], "k1");
  ASSERT_STR_EQ(w->field[4], "h");
  ASSERT_STR_EQ(w->field[5], "v");
  w = &c->writes[1];
  ASSERT_STR_EQ(w->stream, "audit2");
  ASSERT_INT_EQ(w->nfields, 2);
  ASSERT_STR_EQ(w->field[0], "data");
  ASSERT_STR_EQ(w->field[1], "\"plain\"");
  w = &c->writes[2];
  ASSERT_STR_EQ(w->stream, "audit3");
  ASSERT_INT_EQ(w->nfields, 4);
  ASSERT_STR_EQ(w->field[1], "[1,2]");
  ASSERT_STR_EQ(w->field[2], "partition-key");
  ASSERT_STR_EQ(w->field[3], "7"); /* keys are strings */
}

static struct captured run_out(handler *h, const char *id, const char *out) {
  char json[64];
  snprintf(json, sizeof json, "{\"n\":1,\"out\":\"%s\"}", out);
  return run_json(h, id, json);
}

TEST_IMPL(runtime_publish_buffered_with_ack) {
  handler *h = load_ok("publisher.lua", PUBLISHER, NULL); /* no clock, no connection */
  struct captured c = run_out(h, "20-1", "ack");
  ASSERT_INT_EQ(c.kind, RT_ACK);
  ASSERT(!c.has_text && !c.has_reason);
  ASSERT_INT_EQ(c.nwrites, 3); /* the failed (caught) publish added nothing */
  expect_published(&c);
  /* returning nothing acks too, with the writes */
  c = run_out(h, "20-2", "none");
  ASSERT_INT_EQ(c.kind, RT_ACK);
  ASSERT_INT_EQ(c.nwrites, 3);
  expect_published(&c);
  /* each entry has its own ctx: nothing carried over to the next one */
  c = run_json(h, "20-3", "{\"n\":2}");
  ASSERT_INT_EQ(c.nwrites, 3);
  ASSERT_STR_EQ(c.writes[0].field[1], "{\"n\":2}");
  handler_release(h);
  LEAK_CHECK();
}

TEST_IMPL(runtime_publish_then_reply_last) {
  handler *h = load_ok("publisher.lua", PUBLISHER, NULL);
  struct entry *e =
      mk_entry("21-1", "data", "{\"n\":1,\"out\":\"reply\"}", "partition-key", "acct-1", NULL);
  struct captured c = run_sync(h, e);
  ASSERT_INT_EQ(c.kind, RT_REPLY);
  ASSERT_INT_EQ(c.nwrites, 4);
  expect_published(&c);
  /* the reply is the last write; ctx:publish returned true */
  ASSERT_STR_EQ(c.stream, "r");
  ASSERT_STR_EQ(c.writes[3].stream, "r");
  ASSERT_INT_EQ(c.nfields, 8); /* ... handler-version last */
  ASSERT_STR_EQ(c.field[0], "data");
  ASSERT_STR_EQ(c.field[1], "[true,false]");
  ASSERT_STR_EQ(c.field[2], "original-id");
  ASSERT_STR_EQ(c.field[3], "21-1");
  ASSERT_STR_EQ(c.field[4], "partition-key");
  ASSERT_STR_EQ(c.field[5], "acct-1");
  entry_free(e);
  handler_release(h);
  LEAK_CHECK();
}

TEST_IMPL(runtime_publish_dropped_without_ack) {
  handler *h = load_ok("publisher.lua", PUBLISHER, NULL);
  /* on_done checks that none of these carries writes */
  struct captured c = run_out(h, "22-1", "retry");
  expect_plain(&c, RT_RETRY);
  c = run_out(h, "22-2", "raise");
  expect_fail(&c, RT_ERROR, "handler-error");
  ASSERT_CONTAINS(c.text, "late failure");
  c = run_out(h, "22-3", "reject");
  ASSERT_INT_EQ(c.kind, RT_REJECT);
  ASSERT_STR_EQ(c.text, "nope");
  ASSERT_INT_EQ(c.nwrites, 0);
  c = run_out(h, "22-4", "after");
  ASSERT_INT_EQ(c.kind, RT_RETRY_AFTER);
  ASSERT_INT_EQ(c.delay_ms, 2000);
  ASSERT_INT_EQ(c.nwrites, 0);
  c = run_out(h, "22-5", "bad");
  expect_fail(&c, RT_ERROR, "bad-return");
  /* and the next ack still has exactly its own */
  c = run_out(h, "22-6", "ack");
  ASSERT_INT_EQ(c.nwrites, 3);
  expect_published(&c);
  handler_release(h);
  LEAK_CHECK();
}

TEST_IMPL(runtime_publish_bad_arguments) {
  const char *path = write_file("publisher.lua", PUBLISHER);
  handler *h = NULL;
  ASSERT_OK(handler_load(path, NULL, &h, load_error, sizeof load_error));
  ASSERT_OK(handler_bind(h, "c-1"));
  struct captured c = run_json(h, "23-1", "{\"bad\":1}");
  expect_fail(&c, RT_ERROR, "handler-error");
  /* raised at the caller's line */
  ASSERT(strncmp(c.text, at(path, 4, "ctx:publish: stream must be a non-empty string"),
                 strlen(at(path, 4, "ctx:publish: stream must be a non-empty string"))) == 0);
  c = run_json(h, "23-2", "{\"bad\":2}");
  expect_fail(&c, RT_ERROR, "handler-error");
  ASSERT_CONTAINS(c.text, at(path, 5, "ctx:publish: cannot encode the message as JSON"));
  c = run_json(h, "23-3", "{\"bad\":3}");
  expect_fail(&c, RT_ERROR, "handler-error");
  ASSERT_CONTAINS(c.text, at(path, 6, "ctx:publish: options must be a table"));
  c = run_json(h, "23-4", "{\"bad\":4}");
  expect_fail(&c, RT_ERROR, "handler-error");
  ASSERT_CONTAINS(c.text, at(path, 7, "ctx:publish: options.headers must be a table"));
  c = run_json(h, "23-5", "{\"bad\":5}");
  expect_fail(&c, RT_ERROR, "handler-error");
  ASSERT_CONTAINS(c.text, at(path, 8, "ctx:publish: stream must be a non-empty string"));
  handler_release(h);
  LEAK_CHECK();
}

/* Publishes on both sides of a wait stay with their entry, also when two
 * entries wait at the same time. */
TEST_IMPL(runtime_publish_across_sleep) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  lclock *clk = clock_uv_new(&loop);
  struct rt_env env = {.clock = clk};
  handler *h = load_ok("publisher.lua", PUBLISHER, &env);
  struct entry *e1 = mk_entry("24-1", "data", "{\"n\":1,\"sleep\":20,\"out\":\"reply\"}", NULL);
  struct entry *e2 = mk_entry("24-2", "data", "{\"n\":1,\"sleep\":5}", NULL);
  struct captured a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  ASSERT_OK(handler_run(h, e1, on_done, &a));
  ASSERT_OK(handler_run(h, e2, on_done, &b));
  ASSERT_INT_EQ(a.calls + b.calls, 0);
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_INT_EQ(a.calls, 1);
  ASSERT_INT_EQ(b.calls, 1);
  ASSERT_INT_EQ(a.kind, RT_REPLY);
  ASSERT_INT_EQ(a.nwrites, 4);
  expect_published(&a);
  ASSERT_STR_EQ(a.field[3], "24-1");
  ASSERT_INT_EQ(b.kind, RT_ACK);
  ASSERT_INT_EQ(b.nwrites, 3);
  expect_published(&b);
  entry_free(e1);
  entry_free(e2);
  handler_release(h);
  loop_finish(&loop, clk);
  LEAK_CHECK();
}
