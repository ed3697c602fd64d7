/* Partitioned streams: the partition's key names (partition.c), the
 * `partitions` field as the host reads it, and what a handler sees of the
 * partition it runs in (handler_run_partition): ctx.partition,
 * ctx.partition_tag, ctx.stream, its reply_to, ctx:publish with partitions. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "entry.h"
#include "fixtures.h"
#include "handler_dir.h"
#include "keyslot.h"
#include "partition.h"
#include "runtime.h"
#include "task.h"
#include "test_runtime_support.h"

TEST_IMPL(partition_key_names) {
  char buf[32];
  ASSERT_INT_EQ(partition_key_into("payments", 3, buf, sizeof buf), 12);
  ASSERT_STR_EQ(buf, "payments:{3}");
  ASSERT_INT_EQ(partition_key_into("payments", 1023, buf, 15), -1); /* does not fit */
  char *k = partition_key("payments.dead", 15);
  ASSERT_STR_EQ(k, "payments.dead:{15}");
  /* The hash tag alone decides the slot: every partition's key is in the
   * slot of its number, whatever the stream is called. */
  ASSERT_INT_EQ(keyslot_of(k, strlen(k)), keyslot_of("15", 2));
  free(k);
  k = partition_key("orders", 0);
  ASSERT_INT_EQ(keyslot_of(k, strlen(k)), keyslot_of("{0}:retry:ledger", 16));
  free(k);
}

TEST_IMPL(partition_spec_keys) {
  struct handler_spec base = {.name = "h",
                              .stream = "payments",
                              .group = "ledger",
                              .reply_to = "out",
                              .dead_letter = "payments.dead",
                              .partitions = 16,
                              .workers = 4};
  struct handler_spec p;
  ASSERT_OK(partition_spec(&base, 7, &p));
  ASSERT_STR_EQ(p.stream, "payments:{7}");
  ASSERT_STR_EQ(p.reply_to, "out:{7}");
  ASSERT_STR_EQ(p.dead_letter, "payments.dead:{7}");
  ASSERT(p.group == base.group); /* borrowed */
  ASSERT_INT_EQ(p.workers, 4);
  ASSERT_INT_EQ(p.partitions, 16);
  partition_spec_free(&p);
  ASSERT_NULL(p.stream);
  base.reply_to = base.dead_letter = NULL;
  ASSERT_OK(partition_spec(&base, 0, &p));
  ASSERT_STR_EQ(p.stream, "payments:{0}");
  ASSERT_NULL(p.reply_to);
  ASSERT_NULL(p.dead_letter);
  partition_spec_free(&p);
}

/* partition_each's callback: the streams and dead letters seen, in order. */
static void seen_spec(void *data, const struct handler_spec *s) {
  char *out = data;
  size_t n = strlen(out);
  snprintf(out + n, 256 - n, "%s%s>%s", n ? " " : "", s->stream, s->dead_letter);
}

TEST_IMPL(partition_each_spec) {
  struct handler_spec base = {.stream = "payments", .group = "ledger", .dead_letter = "dl"};
  char seen[256] = "";
  ASSERT_OK(partition_each(&base, seen_spec, seen));
  ASSERT_STR_EQ(seen, "payments>dl");
  base.partitions = 3;
  seen[0] = '\0';
  ASSERT_OK(partition_each(&base, seen_spec, seen));
  ASSERT_STR_EQ(seen, "payments:{0}>dl:{0} payments:{1}>dl:{1} payments:{2}>dl:{2}");
}

TEST_IMPL(partition_spec_field) {
  handler *h = load_ok("parts.lua",
                       "return { stream = \"payments\", group = \"ledger\", partitions = 16,\n"
                       "  handle = function() end }\n",
                       NULL);
  ASSERT_INT_EQ(handler_spec(h)->partitions, 16);
  handler *u = load_ok(
      "plain.lua",
      "return { stream = \"payments\", group = \"ledger\", handle = function() end }\n", NULL);
  ASSERT_INT_EQ(handler_spec(u)->partitions, 0);
  char diff[128];
  ASSERT_STR_EQ(handler_spec_diff(handler_spec(u), handler_spec(h), diff, sizeof diff),
                "partitions"); /* a change restarts the subscription */
  handler_release(h);
  handler_release(u);
  const char *path = NULL;
  const char *err = load_err("zero.lua",
                             "return { stream = \"s\", group = \"g\", partitions = 0,\n"
                             "  handle = function() end }\n",
                             &path);
  ASSERT_CONTAINS(err, at(path, 1, "field 'partitions' must be a positive integer"));
  err = load_err("many.lua",
                 "return { stream = \"s\", group = \"g\", partitions = 1025,\n"
                 "  handle = function() end }\n",
                 &path);
  ASSERT_CONTAINS(err, at(path, 1, "field 'partitions' must be at most 1024, got 1025"));
  err = load_err("tagged.lua",
                 "return { stream = \"s\", group = \"g\", partitions = 2,\n"
                 "  dead_letter = \"d{x}\", handle = function() end }\n",
                 &path);
  ASSERT_CONTAINS(err,
                  at(path, 2, "field 'dead_letter' must not hold '{' in a partitioned handler"));
  LEAK_CHECK();
}

/* Runs {data = json} in partition p; the entry must finish at once. */
static struct captured run_in(handler *h, int p, const char *json) {
  struct captured c;
  memset(&c, 0, sizeof c);
  struct entry *e = mk_entry("5-0", "data", json, NULL);
  ASSERT_OK(handler_run_partition(h, e, p, on_done, &c));
  ASSERT_INT_EQ(c.calls, 1);
  entry_free(e);
  return c;
}

static const char PARTITIONED[] =
    "local ls = require \"luastream\"\n"
    "return { stream = \"orders\", group = \"g\", partitions = 8, reply_to = \"out\",\n"
    "  handle = function(msg, ctx)\n"
    "    ctx:write(\"SET\", \"seen:\" .. ctx.partition_tag,\n"
    "              tostring(ctx.partition) .. \" \" .. ctx.stream .. \" \" .. ctx.idempotency_key)\n"
    "    ctx:publish(\"audit\", 1, { key = \"123456789\", partitions = 16 })\n"
    "    if msg == \"bad\" then ctx:publish(\"audit\", 1, { partitions = 16 }) end\n"
    "    return ls.reply(true)\n"
    "  end }\n";

TEST_IMPL(partition_ctx) {
  handler *h = load_ok("orders.lua", PARTITIONED, NULL);
  struct captured c = run_in(h, 5, "1");
  ASSERT_INT_EQ(c.kind, RT_REPLY);
  ASSERT_INT_EQ(c.nwrites, 3);
  ASSERT_STR_EQ(c.writes[0].cmd, "SET");
  ASSERT_STR_EQ(c.writes[0].stream, "seen:{5}");
  ASSERT_STR_EQ(c.writes[0].field[0], "5 orders:{5} orders:{5}/g/5-0");
  /* crc16("123456789") = 0x31C3; 0x31C3 % 16 = 3 */
  ASSERT_STR_EQ(c.writes[1].stream, "audit:{3}");
  ASSERT_STR_EQ(c.stream, "out:{5}"); /* the reply: the partition's reply_to */
  c = run_in(h, 0, "1");
  ASSERT_STR_EQ(c.writes[0].stream, "seen:{0}");
  ASSERT_STR_EQ(c.stream, "out:{0}");
  c = run_in(h, 0, "\"bad\"");
  ASSERT_INT_EQ(c.kind, RT_ERROR);
  ASSERT_CONTAINS(c.text, "ctx:publish: partitions needs a key");
  handler_release(h);
  /* Unpartitioned: no partition, an empty tag, the stream's own name. */
  h = load_ok(
      "plain2.lua",
      "return { stream = \"orders\", group = \"g\", handle = function(msg, ctx)\n"
      "  ctx:write(\"SET\", \"seen:\" .. ctx.partition_tag, tostring(ctx.partition) .. \" \" .. ctx.stream)\n"
      "end }\n",
      NULL);
  c = run_json(h, "1-0", "1");
  ASSERT_INT_EQ(c.kind, RT_ACK);
  ASSERT_STR_EQ(c.writes[0].stream, "seen:");
  ASSERT_STR_EQ(c.writes[0].field[0], "nil orders");
  handler_release(h);
  LEAK_CHECK();
}

/* Two files reading a key as one group split its entries: a partitioned
 * file reads each partition's key. */
TEST_IMPL(partition_split_group) {
  char why[1024];
  struct handler_spec parts = {
      .path = "a.lua", .stream = "orders", .group = "g", .partitions = 4, .read = READ_NEW};
  struct handler_spec plain = {
      .path = "b.lua", .stream = "orders:{3}", .group = "g", .read = READ_NEW};
  ASSERT(handler_dir_split_group(&parts, &plain, why, sizeof why));
  ASSERT_CONTAINS(why, "both read stream orders:{3} as group g");
  ASSERT(handler_dir_split_group(&plain, &parts, why, sizeof why));
  plain.stream = "orders:{4}"; /* no such partition */
  ASSERT(!handler_dir_split_group(&parts, &plain, why, sizeof why));
  plain.stream = "orders"; /* the unpartitioned name: another key */
  ASSERT(!handler_dir_split_group(&parts, &plain, why, sizeof why));
  struct handler_spec other = parts;
  other.path = "c.lua";
  other.partitions = 8;
  ASSERT(handler_dir_split_group(&parts, &other, why, sizeof why));
  ASSERT_CONTAINS(why, "both read stream orders:{0} as group g");
  other.read = READ_RECLAIM; /* the new + reclaim pair */
  ASSERT(!handler_dir_split_group(&parts, &other, why, sizeof why));
  other.group = "h";
  other.read = READ_NEW;
  ASSERT(!handler_dir_split_group(&parts, &other, why, sizeof why));
}
