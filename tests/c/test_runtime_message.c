/* The entry as a handler sees it (corelib.c core.message, core.entry):
 * bad input decided before the handler runs, messages from fields or of
 * another content-type, ctx.id/headers/fields and when they can be read. */
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

/* ============================================================ bad input */

static const char STRICT[] =
    "local ls = require \"luastream\"\n"
    "return { stream = \"s\", group = \"g\", max_body = 8,\n"
    "  handle = function(m) error(\"handle must not be called\") end }\n";

TEST_IMPL(runtime_invalid_decode_error) {
  handler *h = load_ok("strict.lua", STRICT, NULL);
  struct captured c = run_json(h, "5-1", "{nope");
  expect_fail(&c, RT_INVALID, "decode-error");
  ASSERT(strncmp(c.text, "body is not valid JSON: ", 24) == 0);
  ASSERT(strlen(c.text) > 24);
  c = run_json(h, "5-2", "");
  expect_fail(&c, RT_INVALID, "decode-error");
  /* application/json still decodes */
  struct entry *e = mk_entry("5-3", "data", "[1,", "content-type", "application/json", NULL);
  c = run_sync(h, e);
  expect_fail(&c, RT_INVALID, "decode-error");
  entry_free(e);
  handler_release(h);
  LEAK_CHECK();
}

TEST_IMPL(runtime_invalid_too_large) {
  handler *h = load_ok("strict.lua", STRICT, NULL);
  struct captured c = run_json(h, "6-1", "\"1234567\""); /* 9 bytes > 8 */
  expect_fail(&c, RT_INVALID, "too-large");
  ASSERT_STR_EQ(c.text, "body is 9 bytes, over max_body (8)");
  /* Exactly max_body reaches the handler (which raises here). */
  c = run_json(h, "6-2", "\"123456\"");
  expect_fail(&c, RT_ERROR, "handler-error");
  ASSERT_CONTAINS(c.text, "handle must not be called");
  /* The size check comes before decoding. */
  c = run_json(h, "6-3", "{{{{{{{{{");
  expect_fail(&c, RT_INVALID, "too-large");
  handler_release(h);
  LEAK_CHECK();
}

TEST_IMPL(runtime_invalid_no_fields) {
  handler *h = load_ok("strict.lua", STRICT, NULL);
  struct entry *e = mk_entry("7-1", "partition-key", "k", NULL);
  struct captured c = run_sync(h, e);
  expect_fail(&c, RT_INVALID, "no-fields");
  ASSERT_STR_EQ(c.text, "entry has no data field and no other field to deliver");
  entry_free(e);
  /* luastream's own headers only */
  e = mk_entry("7-2", "delivery-count", "2", "retry-group", "g", "original-id", "1-0", NULL);
  c = run_sync(h, e);
  expect_fail(&c, RT_INVALID, "no-fields");
  entry_free(e);
  /* no fields at all */
  e = mk_entry("7-3", NULL);
  c = run_sync(h, e);
  expect_fail(&c, RT_INVALID, "no-fields");
  entry_free(e);
  handler_release(h);
  LEAK_CHECK();
}

/* ============================================================ messages */

static const char ECHO_HANDLER[] =
    "local ls = require \"luastream\"\n"
    "local function show(v)\n"
    "  if type(v) ~= \"table\" then return type(v) .. \":\" .. tostring(v) end\n"
    "  local keys = {}\n"
    "  for k in pairs(v) do keys[#keys + 1] = k end\n"
    "  table.sort(keys)\n"
    "  for i, k in ipairs(keys) do keys[i] = k .. \"=\" .. tostring(v[k]) end\n"
    "  return \"table:\" .. table.concat(keys, \",\")\n"
    "end\n"
    "return { stream = \"orders\", group = \"billing\", reply_to = \"echo\",\n"
    "  handle = function(msg, ctx)\n"
    "    if ctx.headers.what == \"ctx\" then\n"
    "      return ls.reply(table.concat({ ctx.id, ctx.stream, ctx.group, ctx.consumer,\n"
    "        show(ctx.headers), show(ctx.fields), type(ctx.publish) }, \"|\"))\n"
    "    end\n"
    "    return ls.reply(show(msg))\n"
    "  end }\n";

TEST_IMPL(runtime_message_field_table) {
  handler *h = load_ok("echo.lua", ECHO_HANDLER, NULL);
  struct entry *e =
      mk_entry("8-1", "b", "two", "a", "1", "delivery-count", "3", "partition-key", "k7", NULL);
  struct captured c = run_sync(h, e);
  ASSERT_INT_EQ(c.kind, RT_REPLY);
  ASSERT_STR_EQ(c.stream, "echo");
  ASSERT_INT_EQ(c.nfields, 8); /* ... handler-version last */
  /* luastream's own headers are not part of the message */
  ASSERT_STR_EQ(c.field[1], "\"table:a=1,b=two\"");
  ASSERT_STR_EQ(c.field[3], "8-1");
  ASSERT_STR_EQ(c.field[4], "partition-key");
  ASSERT_STR_EQ(c.field[5], "k7");
  entry_free(e);
  handler_release(h);
  LEAK_CHECK();
}

TEST_IMPL(runtime_message_content_type) {
  handler *h = load_ok("echo.lua", ECHO_HANDLER, NULL);
  struct entry *e = mk_entry("8-2", "data", "hello world", "content-type", "text/plain", NULL);
  struct captured c = run_sync(h, e);
  expect_reply(&c, "echo", "\"string:hello world\"", "8-2");
  entry_free(e);
  e = mk_entry("8-3", "data", "{\"k\":5}", "content-type", "application/json", NULL);
  c = run_sync(h, e);
  expect_reply(&c, "echo", "\"table:k=5\"", "8-3");
  entry_free(e);
  /* no content-type: JSON */
  c = run_json(h, "8-4", "[true]");
  expect_reply(&c, "echo", "\"table:1=true\"", "8-4");
  c = run_json(h, "8-5", "12.5");
  expect_reply(&c, "echo", "\"number:12.5\"", "8-5");
  handler_release(h);
  LEAK_CHECK();
}

TEST_IMPL(runtime_ctx_fields) {
  handler *h = load_ok("echo.lua", ECHO_HANDLER, NULL);
  struct entry *e =
      mk_entry("1700000000001-2", "data", "[1]", "what", "ctx", "x-trace", "t77", NULL);
  struct captured c = run_sync(h, e);
  expect_reply(&c, "echo",
               "\"1700000000001-2|orders|billing|c-1|table:what=ctx,x-trace=t77|"
               "table:data=[1],what=ctx,x-trace=t77|function\"",
               "1700000000001-2");
  entry_free(e);
  /* rebinding changes ctx.consumer */
  ASSERT_OK(handler_bind(h, "luastream-3"));
  e = mk_entry("9-9", "what", "ctx", NULL);
  c = run_sync(h, e);
  expect_reply(&c, "echo",
               "\"9-9|orders|billing|luastream-3|table:what=ctx|table:what=ctx|function\"", "9-9");
  entry_free(e);
  handler_release(h);
  LEAK_CHECK();
}

/* ctx.id, ctx.headers and ctx.fields are built from the host's entry when
 * first read: a ctx kept past its handler keeps what was read and refuses
 * the rest, instead of reading an entry that is gone. */
static const char KEEPER[] =
    "local ls = require 'luastream'\n"
    "local kept\n"
    "return { stream = 'orders', group = 'billing', reply_to = 'out',\n"
    "  handle = function(msg, ctx)\n"
    "    if msg.step == 'keep' then kept = ctx; local _ = ctx.id; return ls.ack() end\n"
    "    local ok, why = pcall(function() return kept.headers end)\n"
    "    return ls.reply(table.concat({ kept.id, tostring(ok),\n"
    "      tostring(why):match('can be read only while the handler runs') or tostring(why),\n"
    "      ctx.id, ctx.headers.tag }, '|'))\n"
    "  end }\n";

TEST_IMPL(runtime_ctx_read_after_return) {
  handler *h = load_ok("keeper.lua", KEEPER, NULL);
  struct entry *e = mk_entry("1-1", "data", "{\"step\":\"keep\"}", "tag", "first", NULL);
  struct captured c = run_sync(h, e);
  ASSERT_INT_EQ(c.kind, RT_ACK);
  entry_free(e);
  e = mk_entry("2-1", "data", "{\"step\":\"look\"}", "tag", "second", NULL);
  c = run_sync(h, e);
  expect_reply(&c, "out", "\"1-1|false|can be read only while the handler runs|2-1|second\"",
               "2-1");
  entry_free(e);
  handler_release(h);
  LEAK_CHECK();
}

/* A coroutine whose handler returned runs the next entry; one whose handler
 * raised is not used again. */
