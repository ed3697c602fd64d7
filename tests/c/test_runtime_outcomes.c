/* What a handler returns, turned into an rt_result (luastream.handler's
 * outcome(), jobs.c): acks, retries, replies and their fields, bad returns,
 * errors with tracebacks; bodies read through the FFI. */
#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "clock.h"
#include "entry.h"
#include "fixtures.h"
#include "json_shapes.h"
#include "log.h"
#include "runtime.h"
#include "task.h"
#include "test_runtime_support.h"

/* ================================================================ outcomes */

TEST_IMPL(runtime_outcomes_ack_retry) {
  handler *h = load_ok("modes.lua", MODES, NULL);
  struct captured c = run_json(h, "1-1", "{\"mode\":\"none\"}");
  expect_plain(&c, RT_ACK);
  c = run_json(h, "1-2", "{\"mode\":\"ack\"}");
  expect_plain(&c, RT_ACK);
  c = run_json(h, "1-3", "{\"mode\":\"rawack\"}");
  expect_plain(&c, RT_ACK);
  c = run_json(h, "1-4", "{\"mode\":\"retry\"}");
  expect_plain(&c, RT_RETRY);
  c = run_json(h, "1-5", "{\"mode\":\"rawretry\"}");
  expect_plain(&c, RT_RETRY);
  handler_release(h);
  LEAK_CHECK();
}

/* A handler requires a module beside it (files starting with `_` are not
 * handlers), and the standard package.path stays searchable after it. */
TEST_IMPL(runtime_require_sibling_module) {
  write_file("_rules.lua", "return { verdict = function() return { retry = true } end }\n");
  handler *h = load_ok(
      "uses_sibling.lua",
      "local rules = require \"_rules\"\n"
      "local cjson = require \"cjson\"\n"
      "return { stream = \"s\", group = \"g\",\n"
      "  handle = function() assert(cjson.encode({1}) == \"[1]\"); return rules.verdict() end }\n",
      NULL);
  struct captured c = run_json(h, "1-1", "{}");
  expect_plain(&c, RT_RETRY);
  handler_release(h);
  LEAK_CHECK();
}

/* A handler that rejects with its message written out: keys sorted, each
 * value with its type. */
static const char DESCRIBER[] =
    "local ls = require \"luastream\"\n"
    "return { stream = \"s\", group = \"g\", handle = function(m)\n"
    "  local keys = {}\n"
    "  for k in pairs(m) do keys[#keys + 1] = k end\n"
    "  table.sort(keys)\n"
    "  local out = {}\n"
    "  for _, k in ipairs(keys) do\n"
    "    local v = m[k]\n"
    "    local shown = type(v) == 'userdata' and 'null' or type(v) == 'table' and '#' .. #v or tostring(v)\n"
    "    out[#out + 1] = k .. '=' .. shown .. ':' .. type(v)\n"
    "  end\n"
    "  return ls.reject(table.concat(out, ' '))\n"
    "end }\n";

static void described_as(handler *h, const char *json, const char *want) {
  struct captured c = run_json(h, "1-1", json);
  ASSERT_INT_EQ(c.kind, RT_REJECT);
  ASSERT_STR_EQ(c.text, want);
}

/* From a shape's third body on (the second compiles its constructor) a flat
 * body is read through the FFI: the same values as core.message gives. */
TEST_IMPL(runtime_flat_bodies_read_through_the_ffi) {
  handler *h = load_ok("describer.lua", DESCRIBER, NULL);
  const char *want1 = "a=1:number b=x y:string c=true:boolean d=null:userdata e=-2.5:number";
  described_as(h, "{\"a\":1,\"b\":\"x y\",\"c\":true,\"d\":null,\"e\":-2.5}", want1);
  described_as(h, "{\"a\":1,\"b\":\"x y\",\"c\":true,\"d\":null,\"e\":-2.5}", want1);
  ASSERT_INT_EQ(handler_flat_reads(h), 0);
  described_as(h, "{\"a\":1,\"b\":\"x y\",\"c\":true,\"d\":null,\"e\":-2.5}", want1);
  ASSERT_INT_EQ(handler_flat_reads(h), 1);
  /* other values, the same shape: other types in the same places too */
  described_as(h, " { \"a\" : \"1\" , \"b\":1e3,\"c\":false,\"d\":0,\"e\":\"\"}",
               "a=1:string b=1000:number c=false:boolean d=0:number e=:string");
  described_as(
      h, "{\"a\":-0,\"b\":123456789012345678,\"c\":null,\"d\":\"\xc3\xa9\",\"e\":0.1}",
      "a=-0:number b=123456789012345678:string c=null:userdata d=\xc3\xa9:string e=0.1:number");
  ASSERT_INT_EQ(handler_flat_reads(h), 3);
  /* what the FFI path leaves to core.message: an escape, a nested value */
  described_as(h, "{\"a\":1,\"b\":\"x\\ny\",\"c\":true,\"d\":null,\"e\":2}",
               "a=1:number b=x\ny:string c=true:boolean d=null:userdata e=2:number");
  described_as(h, "{\"a\":1,\"b\":[],\"c\":true,\"d\":null,\"e\":2}",
               "a=1:number b=#0:table c=true:boolean d=null:userdata e=2:number");
  ASSERT_INT_EQ(handler_flat_reads(h), 3);

  char json[64], want[64];
  /* Hot enough for the JIT: values of every kind taking turns in each place. */
  const char *kinds[] = {"7", "\"seven\"", "true", "null", "-7.5"};
  const char *shown[] = {"7:number", "seven:string", "true:boolean", "null:userdata",
                         "-7.5:number"};
  size_t before = handler_flat_reads(h);
  for (int i = 0; i < 400; i++) {
    snprintf(json, sizeof json, "{\"x\":%s,\"y\":%s}", kinds[i % 5], kinds[(i / 5) % 5]);
    snprintf(want, sizeof want, "x=%s y=%s", shown[i % 5], shown[(i / 5) % 5]);
    described_as(h, json, want);
  }
  ASSERT(handler_flat_reads(h) >= before + 398);

  /* Keys of any bytes but an escape, and a repeated key (the last wins). */
  const char *odd = "{\"]]=\":1,\"\x01\":2,\"\xff\":3,\"\":4,\"a\":5,\"a\":6}";
  before = handler_flat_reads(h);
  for (int i = 0; i < 3; i++)
    described_as(h, odd, "=4:number \x01=2:number ]]==1:number a=6:number \xff=3:number");
  ASSERT_INT_EQ(handler_flat_reads(h), before + 1);

  /* More shapes of one size than a handler keeps, in turn: each slot's
   * constructor is made again when the slot takes another shape. */
  for (int round = 0; round < 3; round++) {
    for (int k = 0; k < JSON_SHAPES + 2; k++) {
      snprintf(json, sizeof json, "{\"k%d\":%d}", k, round);
      snprintf(want, sizeof want, "k%d=%d:number", k, round);
      for (int i = 0; i < 3; i++) described_as(h, json, want);
    }
  }
  ASSERT(handler_flat_reads(h) > before + 1);

  handler_release(h);
  LEAK_CHECK();
}

TEST_IMPL(runtime_outcome_reply_fields) {
  handler *h = load_ok("modes.lua", MODES, NULL);
  struct entry *e = mk_entry("1700000000000-5", "data", "{\"mode\":\"reply\",\"v\":\"hi\"}",
                             "partition-key", "acct-9", NULL);
  struct captured c = run_sync(h, e);
  ASSERT_INT_EQ(c.kind, RT_REPLY);
  ASSERT_STR_EQ(c.stream, "answers");
  ASSERT(!c.has_reason && !c.has_text);
  ASSERT_INT_EQ(c.nfields, 8); /* ... handler-version last */
  ASSERT_STR_EQ(c.field[0], "data");
  ASSERT_STR_EQ(c.field[1], "{\"echo\":\"hi\"}");
  ASSERT_STR_EQ(c.field[2], "original-id");
  ASSERT_STR_EQ(c.field[3], "1700000000000-5");
  ASSERT_STR_EQ(c.field[4], "partition-key");
  ASSERT_STR_EQ(c.field[5], "acct-9");
  ASSERT_INT_EQ(c.field_len[1], 13);
  entry_free(e);

  /* A duplicated partition-key: the last one, as everywhere else. */
  e = mk_entry("1700000000000-8", "partition-key", "first", "data",
               "{\"mode\":\"reply\",\"v\":\"hi\"}", "partition-key", "last", NULL);
  c = run_sync(h, e);
  ASSERT_INT_EQ(c.kind, RT_REPLY);
  ASSERT_STR_EQ(c.field[4], "partition-key");
  ASSERT_STR_EQ(c.field[5], "last");
  entry_free(e);

  /* No partition-key on the entry: none on the reply. */
  c = run_json(h, "1700000000000-6", "{\"mode\":\"reply\",\"v\":\"yo\"}");
  expect_reply(&c, "answers", "{\"echo\":\"yo\"}", "1700000000000-6");

  /* An explicit key replaces the entry's. */
  e = mk_entry("1700000000000-7", "data", "{\"mode\":\"keyed\",\"v\":1}", "partition-key", "acct-9",
               NULL);
  c = run_sync(h, e);
  ASSERT_INT_EQ(c.kind, RT_REPLY);
  ASSERT_INT_EQ(c.nfields, 8); /* ... handler-version last */
  ASSERT_STR_EQ(c.field[0], "data");
  ASSERT_STR_EQ(c.field[1], "{\"echo\":1}");
  ASSERT_STR_EQ(c.field[2], "partition-key");
  ASSERT_STR_EQ(c.field[3], "k2");
  ASSERT_STR_EQ(c.field[4], "original-id");
  ASSERT_STR_EQ(c.field[5], "1700000000000-7");
  entry_free(e);
  handler_release(h);
  LEAK_CHECK();
}

TEST_IMPL(runtime_outcome_reply_without_reply_to) {
  handler *h = load_ok("noreply.lua",
                       "local ls = require \"luastream\"\n"
                       "return { stream = \"s\", group = \"g\",\n"
                       "  handle = function(m) return ls.reply({ ok = true }) end }\n",
                       NULL);
  struct captured c = run_json(h, "2-1", "{}");
  expect_fail(&c, RT_ERROR, "bad-return");
  ASSERT_STR_EQ(c.text, "handle returned ls.reply(...) but the handler has no reply_to stream");
  handler_release(h);
  LEAK_CHECK();
}

TEST_IMPL(runtime_outcome_bad_returns) {
  handler *h = load_ok("modes.lua", MODES, NULL);
  struct captured c = run_json(h, "3-1", "{\"mode\":\"number\"}");
  expect_fail(&c, RT_ERROR, "bad-return");
  ASSERT_STR_EQ(c.text,
                "handle returned number 42; expected ls.ack(), ls.retry(), ls.reply(...) or "
                "nothing");
  c = run_json(h, "3-2", "{\"mode\":\"empty\"}");
  expect_fail(&c, RT_ERROR, "bad-return");
  ASSERT_STR_EQ(c.text,
                "handle returned a table with keys {}; expected ls.ack(), ls.retry(), "
                "ls.reply(...) or nothing");
  handler_release(h);
  LEAK_CHECK();
}

TEST_IMPL(runtime_outcome_handler_error) {
  const char *path = write_file("modes.lua", MODES);
  handler *h = NULL;
  ASSERT_OK(handler_load(path, NULL, &h, load_error, sizeof load_error));
  ASSERT_OK(handler_bind(h, "c-1"));
  struct captured c = run_json(h, "4-1", "{\"mode\":\"raise\"}");
  expect_fail(&c, RT_ERROR, "handler-error");
  ASSERT(strncmp(c.text, at(path, 12, "x\n"), strlen(at(path, 12, "x\n"))) == 0);
  ASSERT_CONTAINS(c.text, "stack traceback");
  ASSERT_INT_EQ(c.text_len, strlen(c.text));

  /* A non-string error object is described, not lost. */
  c = run_json(h, "4-2", "{\"mode\":\"errtable\"}");
  expect_fail(&c, RT_ERROR, "handler-error");
  ASSERT_CONTAINS(c.text, "(error object is a table value)");
  ASSERT_CONTAINS(c.text, "stack traceback");

  /* The outcome helpers no longer raise (retry_after used to). */
  c = run_json(h, "4-3", "{\"mode\":\"later\"}");
  ASSERT_INT_EQ(c.kind, RT_RETRY_AFTER);
  ASSERT_INT_EQ(c.delay_ms, 5);

  /* The state is still usable after errors. */
  c = run_json(h, "4-4", "{\"mode\":\"ack\"}");
  expect_plain(&c, RT_ACK);
  handler_release(h);
  LEAK_CHECK();
}
