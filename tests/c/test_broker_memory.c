/* Tests for broker_memory.c and the in-memory server behind it (the cmd_*.c
 * files, script.c), driven only through bk_command on a
 * virtual clock. Replies are compared exactly in a compact rendering:
 *   bulk as its text, :n integer, +status, -error, nil, [a,b] array.
 * Expected texts are those of Redis 7.0 and 8.4. */
#include <stdio.h>
#include <string.h>

#include "broker.h"
#include "broker_memory.h"
#include "clock.h"
#include "clock_virtual.h"
#include "entry.h"
#include "read_reply.h"
#include "memreply.h"
#include "scripts.h"
#include "task.h"

#define WALL0 1000000ULL /* XADD * ids start at 1000000-0 */

static lclock *clk;
static broker *b;
static bk_conn *conn;

/* ---- rendering ---- */

static void render_into(const bk_reply *r, char *buf, size_t cap, size_t *n) {
#define OUT(...)                                                       \
  do {                                                                 \
    int w_ = snprintf(buf + *n, *n < cap ? cap - *n : 0, __VA_ARGS__); \
    if (w_ > 0) *n += (size_t)w_;                                      \
  } while (0)
  if (r == NULL) {
    OUT("(null)");
    return;
  }
  switch (r->type) {
    case BK_STRING: OUT("%.*s", (int)r->len, r->str); break;
    case BK_STATUS: OUT("+%.*s", (int)r->len, r->str); break;
    case BK_ERROR: OUT("-%.*s", (int)r->len, r->str); break;
    case BK_INTEGER: OUT(":%lld", r->integer); break;
    case BK_NIL: OUT("nil"); break;
    case BK_ARRAY:
      OUT("[");
      for (size_t i = 0; i < r->elements; i++) {
        if (i) OUT(",");
        render_into(r->element[i], buf, cap, n);
      }
      OUT("]");
      break;
    default: OUT("?%d", r->type);
  }
#undef OUT
}

static const char *show(const bk_reply *r) {
  static char bufs[4][8192];
  static int k;
  char *buf = bufs[k++ % 4];
  size_t n = 0;
  buf[0] = '\0';
  render_into(r, buf, sizeof bufs[0], &n);
  return buf;
}

/* ---- sending ---- */

struct res {
  int n;         /* callbacks so far */
  bk_reply *r;   /* copy of the last reply */
  char err[128]; /* last err, "" for none */
  int order;     /* global completion order of the last callback */
};

static int completions;

static void on_reply(void *data, const bk_reply *r, const char *err) {
  struct res *x = data;
  x->n++;
  mr_free(x->r);
  x->r = r ? mr_copy(r) : NULL;
  snprintf(x->err, sizeof x->err, "%s", err ? err : "");
  x->order = ++completions;
}

static int sendv(bk_conn *c, struct res *x, const char **argv) {
  size_t len[64];
  int argc = 0;
  while (argv[argc]) {
    len[argc] = strlen(argv[argc]);
    argc++;
  }
  return bk_command(b, c, argc, argv, len, on_reply, x);
}

/* Sends, checks nothing came back synchronously, settles, returns the reply. */
static const char *cmdv(bk_conn *c, const char **argv) {
  struct res x = {0};
  ASSERT_OK(sendv(c, &x, argv));
  ASSERT_INT_EQ(x.n, 0);
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(x.n, 1);
  const char *s = show(x.r);
  mr_free(x.r);
  return s;
}

#define CMD(...) cmdv(conn, (const char *[]){__VA_ARGS__, NULL})
#define CHECK(expect, ...) ASSERT_STR_EQ(CMD(__VA_ARGS__), expect)
#define SEND(c, x, ...) ASSERT_OK(sendv(c, x, (const char *[]){__VA_ARGS__, NULL}))

static void setup(const char *version) {
  clk = clock_virtual_new(WALL0);
  ASSERT_NOT_NULL(clk);
  b = broker_memory_new(clk, version);
  ASSERT_NOT_NULL(b);
  conn = bk_conn_open(b, "test", NULL, NULL);
  ASSERT_NOT_NULL(conn);
  ASSERT(bk_connected(b, conn));
  clock_virtual_settle(clk);
}

static void teardown(void) {
  bk_conn_close(b, conn);
  broker_free(b);
  clk->ops->free(clk);
}

/* Three entries 1-0 f=1, 2-0 f=2, 3-0 f=3 in "s", group g from 0. */
static void three_entries(void) {
  CHECK("1-0", "XADD", "s", "1-0", "f", "1");
  CHECK("2-0", "XADD", "s", "2-0", "f", "2");
  CHECK("3-0", "XADD", "s", "3-0", "f", "3");
  CHECK("+OK", "XGROUP", "CREATE", "s", "g", "0");
}

/* ---- basics ---- */

TEST_IMPL(broker_memory_replies_only_from_the_clock) {
  struct res up = {0};
  setup(NULL);
  struct res x = {0};
  SEND(conn, &x, "PING");
  SEND(conn, &up, "PING", "hello");
  ASSERT_INT_EQ(x.n, 0); /* never from inside bk_command */
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(x.n, 1);
  ASSERT_STR_EQ(show(x.r), "+PONG");
  ASSERT_STR_EQ(show(up.r), "hello");
  ASSERT(x.order < up.order); /* in order */
  mr_free(x.r);
  mr_free(up.r);
  teardown();
}

TEST_IMPL(broker_memory_info_reports_the_version) {
  setup(NULL);
  struct res x = {0};
  SEND(conn, &x, "INFO", "server");
  clock_virtual_settle(clk);
  char text[32];
  ASSERT_INT_EQ(bk_info_version(x.r, text, sizeof text), 80400);
  ASSERT_STR_EQ(text, "8.4.0");
  broker_memory_set_version(b, "7.0.15");
  SEND(conn, &x, "INFO");
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(bk_info_version(x.r, text, sizeof text), 70015);
  mr_free(x.r);
  CHECK(
      "-ERR unknown command 'XDELEX' (the in-memory Redis of luastream.testing does not have it: "
      "testing.app(dir, {redis = URL}) runs on a real server)",
      "XDELEX", "s", "IDS");
  CHECK("-ERR wrong number of arguments for 'xlen' command", "XLEN");
  teardown();
}

/* ---- XADD, XRANGE, XDEL, XTRIM ---- */

TEST_IMPL(broker_memory_xadd_ids_and_errors) {
  setup(NULL);
  CHECK("1000000-0", "XADD", "s", "*", "f", "v");
  CHECK("1000000-1", "XADD", "s", "*", "f", "v"); /* same ms: never backwards */
  clock_virtual_advance(clk, 5);
  CHECK("1000005-0", "XADD", "s", "*", "f", "v");
  CHECK("1000005-7", "XADD", "s", "1000005-7", "f", "v");
  CHECK("1000005-8", "XADD", "s", "1000005-*", "f", "v");
  CHECK("2000000-0", "XADD", "s", "2000000-*", "f", "v");
  CHECK("-ERR The ID specified in XADD is equal or smaller than the target stream top item", "XADD",
        "s", "5-0", "f", "v");
  CHECK("-ERR The ID specified in XADD must be greater than 0-0", "XADD", "t", "0-0", "f", "v");
  CHECK(":0", "EXISTS", "t");
  CHECK("0-1", "XADD", "t", "0-*", "f", "v");
  CHECK("nil", "XADD", "u", "NOMKSTREAM", "*", "f", "v");
  CHECK(":0", "EXISTS", "u");
  CHECK("-ERR wrong number of arguments for 'xadd' command", "XADD", "s", "*", "f");
  CHECK("-ERR Invalid stream ID specified as stream command argument", "XADD", "s", "x", "f", "v");
  CHECK("-ERR syntax error, LIMIT cannot be used without the special ~ option", "XADD", "s",
        "MAXLEN", "2", "LIMIT", "5", "*", "f", "v");
  CHECK("-ERR The MAXLEN argument must be >= 0.", "XADD", "s", "MAXLEN", "-1", "*", "f", "v");
  CHECK("2000000-1", "XADD", "s", "MAXLEN", "=", "2", "*", "f", "w");
  CHECK(":2", "XLEN", "s");
  CHECK("[[2000000-0,[f,v]],[2000000-1,[f,w]]]", "XRANGE", "s", "-", "+");
  CHECK("1-0", "XADD", "m", "MAXLEN", "0", "1-0", "f", "v"); /* trimmed away at once */
  CHECK(":0", "XLEN", "m");
  CHECK("-ERR The ID specified in XADD is equal or smaller than the target stream top item", "XADD",
        "m", "1-0", "f", "v"); /* last_id survives trimming */
  teardown();
}

TEST_IMPL(broker_memory_xrange_xdel_xtrim) {
  setup(NULL);
  for (int i = 1; i <= 5; i++) {
    char id[8], v[8];
    snprintf(id, sizeof id, "%d-0", i);
    snprintf(v, sizeof v, "%d", i);
    CHECK(id, "XADD", "r", id, "f", v);
  }
  CHECK("[[1-0,[f,1]],[2-0,[f,2]]]", "XRANGE", "r", "-", "+", "COUNT", "2");
  CHECK("[[5-0,[f,5]],[4-0,[f,4]]]", "XREVRANGE", "r", "+", "-", "COUNT", "2");
  CHECK("[[3-0,[f,3]],[4-0,[f,4]]]", "XRANGE", "r", "(2-0", "4");
  CHECK("nil", "XRANGE", "r", "-", "+", "COUNT", "0");
  CHECK("[]", "XRANGE", "nokey", "-", "+");
  CHECK("-ERR Invalid stream ID specified as stream command argument", "XRANGE", "r", "(-", "+");
  CHECK("-ERR syntax error", "XRANGE", "r", "-", "+", "LIMIT");
  CHECK(":1", "XDEL", "r", "2-0", "9-0");
  CHECK("-ERR Invalid stream ID specified as stream command argument", "XDEL", "r", "3-0", "+");
  CHECK(":4", "XLEN", "r");                      /* nothing deleted by the failed XDEL */
  CHECK(":0", "XTRIM", "r", "MAXLEN", "~", "1"); /* ~ on a small stream keeps everything */
  CHECK(":2", "XTRIM", "r", "MAXLEN", "=", "2");
  CHECK("[[4-0,[f,4]],[5-0,[f,5]]]", "XRANGE", "r", "-", "+");
  CHECK(":1", "XTRIM", "r", "MINID", "5");
  CHECK(":0", "XTRIM", "nokey", "MAXLEN", "0");
  CHECK("-ERR wrong number of arguments for 'xtrim' command", "XTRIM", "r");
  CHECK("-ERR syntax error", "XTRIM", "r", "FOO", "1");
  CHECK("-ERR syntax error, LIMIT cannot be used without specifying a trimming strategy", "XTRIM",
        "r", "LIMIT", "10");
  CHECK("-ERR syntax error, MAXLEN and MINID options at the same time are not compatible", "XTRIM",
        "r", "MAXLEN", "1", "MINID", "1");
  teardown();
}

/* ---- XGROUP ---- */

TEST_IMPL(broker_memory_xgroup) {
  setup(NULL);
  CHECK(
      "-ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want "
      "to use the MKSTREAM option to create an empty stream automatically.",
      "XGROUP", "CREATE", "s", "g", "$");
  CHECK("+OK", "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM");
  CHECK("-BUSYGROUP Consumer Group name already exists", "XGROUP", "CREATE", "s", "g", "$");
  CHECK("-NOGROUP No such consumer group 'x' for key name 's'", "XGROUP", "SETID", "s", "x", "0");
  CHECK("-ERR value for ENTRIESREAD must be positive or -1", "XGROUP", "CREATE", "s", "g2", "0",
        "ENTRIESREAD", "-2");
  CHECK("-ERR Invalid stream ID specified as stream command argument", "XGROUP", "CREATE", "s",
        "g2", "-");
  CHECK("+OK", "XGROUP", "SETID", "s", "g", "-"); /* SETID parses loosely */
  CHECK("-ERR unknown subcommand 'FOO'. Try XGROUP HELP.", "XGROUP", "FOO", "s");
  CHECK("-ERR wrong number of arguments for 'xgroup|create' command", "XGROUP", "CREATE", "s");
  CHECK(":1", "XGROUP", "CREATECONSUMER", "s", "g", "alice");
  CHECK(":0", "XGROUP", "CREATECONSUMER", "s", "g", "alice");
  CHECK("1-0", "XADD", "s", "1-0", "f", "1");
  CHECK("2-0", "XADD", "s", "2-0", "f", "2");
  CMD("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">");
  CHECK("[:2,1-0,2-0,[[alice,2]]]", "XPENDING", "s", "g");
  CHECK(":2", "XGROUP", "DELCONSUMER", "s", "g", "alice"); /* pending entries are dropped */
  CHECK("[:0,nil,nil,nil]", "XPENDING", "s", "g");
  CHECK(":0", "XGROUP", "DELCONSUMER", "s", "g", "nobody");
  CHECK(":1", "XGROUP", "DESTROY", "s", "g");
  CHECK(":0", "XGROUP", "DESTROY", "s", "g");
  teardown();
}

/* ---- XREADGROUP ---- */

TEST_IMPL(broker_memory_xreadgroup_new_history_noack) {
  setup(NULL);
  three_entries();
  CHECK("[[s,[[1-0,[f,1]],[2-0,[f,2]]]]]", "XREADGROUP", "GROUP", "g", "alice", "COUNT", "2",
        "STREAMS", "s", ">");
  CHECK("[[s,[[3-0,[f,3]]]]]", "XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s",
        ">");
  CHECK("nil", "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">");
  CHECK("[[s,[[1-0,[f,1]],[2-0,[f,2]],[3-0,[f,3]]]]]", "XREADGROUP", "GROUP", "g", "alice",
        "STREAMS", "s", "0");
  CHECK(":1", "XDEL", "s", "2-0");
  CHECK("[[s,[[1-0,[f,1]],[2-0,nil],[3-0,[f,3]]]]]", "XREADGROUP", "GROUP", "g", "alice", "STREAMS",
        "s", "0-0");
  CHECK("[[s,[[3-0,[f,3]]]]]", "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "2");
  /* history counts deliveries; the deleted entry kept its count */
  CHECK("[[1-0,alice,:0,:3],[2-0,alice,:0,:2],[3-0,alice,:0,:4]]", "XPENDING", "s", "g", "-", "+",
        "10");
  CHECK("[[s,[]]]", "XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", "0");
  CHECK("4-0", "XADD", "s", "4-0", "f", "4");
  CHECK("[[s,[[4-0,[f,4]]]]]", "XREADGROUP", "GROUP", "g", "bob", "NOACK", "STREAMS", "s", ">");
  CHECK("[:3,1-0,3-0,[[alice,3]]]", "XPENDING", "s", "g");
  teardown();
}

static void xreadgroup_errors(const char *version) {
  setup(version);
  three_entries();
  bool v84 = strcmp(version, "8.4.0") == 0;
  CHECK(
      "-ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history "
      "of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ "
      "ID would just return an empty result set.",
      "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$");
  CHECK("-NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option",
        "XREADGROUP", "GROUP", "nog", "c", "STREAMS", "s", ">");
  CHECK(v84 ? "-ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' "
              "must be specified."
            : "-ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be "
              "specified.",
        "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "t", ">");
  CHECK("-ERR value is not an integer or out of range", "XREADGROUP", "GROUP", "g", "c", "COUNT",
        "x", "STREAMS", "s", ">");
  CHECK("-ERR timeout is negative", "XREADGROUP", "GROUP", "g", "c", "BLOCK", "-1", "STREAMS", "s",
        ">");
  CHECK("-ERR timeout is not an integer or out of range", "XREADGROUP", "GROUP", "g", "c", "BLOCK",
        "1.5", "STREAMS", "s", ">");
  CHECK("-ERR Missing GROUP option for XREADGROUP", "XREADGROUP", "COUNT", "1", "NOACK", "STREAMS",
        "s", ">");
  CHECK("-ERR wrong number of arguments for 'xreadgroup' command", "XREADGROUP", "GROUP", "g", "c",
        "STREAMS", "s");
  CHECK(v84 ? "-ERR min-idle-time is not an integer" : "-ERR syntax error", "XREADGROUP", "CLAIM",
        "-0", "GROUP", "g", "c", "STREAMS", "s", ">");
  CHECK(v84 ? "-ERR min-idle-time must be a positive integer" : "-ERR syntax error", "XREADGROUP",
        "GROUP", "g", "c", "CLAIM", "-5", "STREAMS", "s", ">");
  ASSERT_CONTAINS(CMD("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "+"),
                  v84 ? "The + ID is meaningless" : "Invalid stream ID specified");
  teardown();
}

TEST_IMPL(broker_memory_xreadgroup_errors_8_4) { xreadgroup_errors("8.4.0"); }
TEST_IMPL(broker_memory_xreadgroup_errors_7_0) { xreadgroup_errors("7.0.15"); }

static void consumer_creation(const char *version, const char *expect) {
  setup(version);
  CHECK("+OK", "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM");
  CHECK("nil", "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">");
  CHECK(expect, "XINFO", "CONSUMERS", "s", "g");
  teardown();
}

TEST_IMPL(broker_memory_consumer_created_by_a_read_on_8_4_only) {
  consumer_creation("8.4.0", "[[name,alice,pending,:0,idle,:0,inactive,:-1]]");
  consumer_creation("7.0.15", "[]");
}

/* ---- idle times, XPENDING, XINFO, XACK ---- */

static void idle_and_info(const char *version) {
  setup(version);
  CHECK("+OK", "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM");
  CHECK("1-0", "XADD", "s", "1-0", "f", "v");
  CMD("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">");
  clock_virtual_advance(clk, 1500);
  CHECK("[[1-0,alice,:1500,:1]]", "XPENDING", "s", "g", "-", "+", "10");
  CHECK("[]", "XPENDING", "s", "g", "IDLE", "1501", "-", "+", "10");
  CHECK("[[1-0,alice,:1500,:1]]", "XPENDING", "s", "g", "IDLE", "1500", "-", "+", "10", "alice");
  CHECK("[]", "XPENDING", "s", "g", "-", "+", "10", "bob");
  CHECK("[]", "XPENDING", "s", "g", "-", "+", "0");
  CHECK("-ERR syntax error", "XPENDING", "s", "g", "-", "+");
  CHECK("-NOGROUP No such key 's' or consumer group 'nog'", "XPENDING", "s", "nog");
  CHECK(strcmp(version, "8.4.0") == 0 ? "[[name,alice,pending,:1,idle,:1500,inactive,:1500]]"
                                      : "[[name,alice,pending,:1,idle,:1500]]",
        "XINFO", "CONSUMERS", "s", "g");
  CHECK("[[name,g,consumers,:1,pending,:1,last-delivered-id,1-0,entries-read,:1,lag,:0]]", "XINFO",
        "GROUPS", "s");
  CHECK("2-0", "XADD", "s", "2-0", "f", "w");
  CHECK("[[name,g,consumers,:1,pending,:1,last-delivered-id,1-0,entries-read,:1,lag,:1]]", "XINFO",
        "GROUPS", "s");
  CHECK(
      "[length,:2,radix-tree-keys,:1,radix-tree-nodes,:2,last-generated-id,2-0,"
      "max-deleted-entry-id,0-0,entries-added,:2,recorded-first-entry-id,1-0,groups,:1,"
      "first-entry,[1-0,[f,v]],last-entry,[2-0,[f,w]]]",
      "XINFO", "STREAM", "s");
  CHECK("-ERR no such key", "XINFO", "STREAM", "nokey");
  CHECK("-NOGROUP No such consumer group 'nog' for key name 's'", "XINFO", "CONSUMERS", "s", "nog");
  CHECK(":0", "XACK", "s", "nog", "1-0");
  CHECK(":0", "XACK", "nokey", "g", "bad"); /* ids are not even parsed */
  CHECK("-ERR Invalid stream ID specified as stream command argument", "XACK", "s", "g", "1-0",
        "bad");
  CHECK(":1", "XACK", "s", "g", "1-0", "9-0");
  CHECK("[:0,nil,nil,nil]", "XPENDING", "s", "g");
  teardown();
}

TEST_IMPL(broker_memory_idle_xpending_xinfo_xack_8_4) { idle_and_info("8.4.0"); }
TEST_IMPL(broker_memory_idle_xpending_xinfo_xack_7_0) { idle_and_info("7.0.15"); }

/* ---- XCLAIM, XAUTOCLAIM ---- */

TEST_IMPL(broker_memory_xclaim) {
  setup(NULL);
  three_entries();
  CMD("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">");
  clock_virtual_advance(clk, 100);
  CHECK(":1", "XDEL", "s", "2-0");
  CHECK("[[3-0,[f,3]]]", "XCLAIM", "s", "g", "bob", "10", "2-0", "3-0");
  CHECK("[[1-0,alice,:100,:1],[3-0,bob,:0,:2]]", "XPENDING", "s", "g", "-", "+", "10");
  CHECK("[]", "XCLAIM", "s", "g", "carol", "50", "3-0"); /* idle 0 < 50 */
  clock_virtual_advance(clk, 50);
  CHECK("[3-0]", "XCLAIM", "s", "g", "carol", "50", "3-0", "JUSTID"); /* idle == min: claimed */
  CHECK("[[1-0,[f,1]]]", "XCLAIM", "s", "g", "dave", "0", "1-0", "IDLE", "500", "RETRYCOUNT", "7");
  CHECK("[[1-0,dave,:500,:7],[3-0,carol,:0,:2]]", "XPENDING", "s", "g", "-", "+", "10");
  /* a negative idle time (the future) means now, however large */
  CHECK("[3-0]", "XCLAIM", "s", "g", "carol", "0", "3-0", "IDLE", "-9223372036854775808", "JUSTID");
  CHECK("[3-0]", "XCLAIM", "s", "g", "carol", "0", "3-0", "IDLE", "9223372036854775807", "JUSTID");
  CHECK("[[1-0,dave,:500,:7],[3-0,carol,:0,:2]]", "XPENDING", "s", "g", "-", "+", "10");
  CHECK("4-0", "XADD", "s", "4-0", "f", "4");
  CHECK("[[4-0,[f,4]]]", "XCLAIM", "s", "g", "erin", "0", "4-0", "FORCE");
  CHECK("[[4-0,erin,:0,:2]]", "XPENDING", "s", "g", "4", "4", "1"); /* FORCE ends at 2 */
  CHECK("[]", "XCLAIM", "s", "g", "erin", "0", "9-0", "LASTID", "9-0");
  CHECK("[[name,g,consumers,:5,pending,:3,last-delivered-id,9-0,entries-read,:3,lag,:1]]", "XINFO",
        "GROUPS", "s");
  CHECK("-ERR Unrecognized XCLAIM option 'FOO'", "XCLAIM", "s", "g", "erin", "0", "4-0", "FOO");
  CHECK("-ERR Invalid min-idle-time argument for XCLAIM", "XCLAIM", "s", "g", "erin", "x", "4-0");
  CHECK("-NOGROUP No such key 's' or consumer group 'nog'", "XCLAIM", "s", "nog", "erin", "0",
        "4-0");
  teardown();
}

TEST_IMPL(broker_memory_xautoclaim) {
  setup(NULL);
  CHECK("+OK", "XGROUP", "CREATE", "x", "grp", "$", "MKSTREAM");
  for (int i = 1; i <= 4; i++) {
    char id[8], v[8];
    snprintf(id, sizeof id, "%d-0", i);
    snprintf(v, sizeof v, "v%d", i);
    CHECK(id, "XADD", "x", id, "f", v);
  }
  CMD("XREADGROUP", "GROUP", "grp", "alice", "STREAMS", "x", ">");
  CHECK(":1", "XDEL", "x", "2-0");
  clock_virtual_advance(clk, 10);
  CHECK("[3-0,[[1-0,[f,v1]]],[2-0]]", "XAUTOCLAIM", "x", "grp", "Bob", "0", "0-0", "COUNT", "2");
  CHECK("[0-0,[],[]]", "XAUTOCLAIM", "x", "grp", "Bob", "20", "3-0");
  CHECK("[0-0,[3-0,4-0],[]]", "XAUTOCLAIM", "x", "grp", "Bob", "10", "(2-0", "JUSTID");
  CHECK("[[1-0,Bob,:0,:2],[3-0,Bob,:0,:1],[4-0,Bob,:0,:1]]", "XPENDING", "x", "grp", "-", "+",
        "10");
  CHECK("-ERR COUNT must be > 0", "XAUTOCLAIM", "x", "grp", "Bob", "0", "0", "COUNT", "0");
  CHECK("-ERR Invalid min-idle-time argument for XAUTOCLAIM", "XAUTOCLAIM", "x", "grp", "Bob", "x",
        "0");
  CHECK("-NOGROUP No such key 'x' or consumer group 'nog'", "XAUTOCLAIM", "x", "nog", "Bob", "0",
        "0");
  teardown();
}

/* ---- XREADGROUP CLAIM (8.4) ---- */

TEST_IMPL(broker_memory_xreadgroup_claim) {
  setup(NULL);
  three_entries();
  CMD("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">");
  clock_virtual_advance(clk, 100);
  CHECK("[[s,[[1-0,[f,1],:100,:1],[2-0,[f,2],:100,:1],[3-0,[f,3],:0,:0]]]]", "XREADGROUP", "GROUP",
        "g", "bob", "COUNT", "3", "CLAIM", "50", "STREAMS", "s", ">");
  CHECK("[[1-0,bob,:0,:2],[2-0,bob,:0,:2],[3-0,bob,:0,:1]]", "XPENDING", "s", "g", "-", "+", "10");
  CHECK("nil", "XREADGROUP", "GROUP", "g", "bob", "CLAIM", "50", "STREAMS", "s", ">");
  clock_virtual_advance(clk, 100);
  /* COUNT is shared, oldest delivery first, ties in id order */
  struct res x = {0};
  SEND(conn, &x, "XREADGROUP", "CLAIM", "50", "GROUP", "g", "carol", "COUNT", "1", "STREAMS", "s",
       ">");
  clock_virtual_settle(clk);
  ASSERT_STR_EQ(show(x.r), "[[s,[[1-0,[f,1],:100,:2]]]]");
  struct entry *list = NULL;
  size_t n = 0;
  char why[128];
  ASSERT_OK(read_reply_parse_read(x.r, &list, &n, NULL, why, sizeof why)); /* the host reads it */
  ASSERT_INT_EQ(n, 1);
  ASSERT_INT_EQ(list->idle_ms, 100);
  ASSERT_INT_EQ(list->deliveries, 2);
  entry_free(list);
  mr_free(x.r);
  /* a history read ignores CLAIM: plain two-element entries */
  CHECK("[[s,[[1-0,[f,1]]]]]", "XREADGROUP", "GROUP", "g", "carol", "CLAIM", "0", "STREAMS", "s",
        "0");
  teardown();
}

/* ---- blocking ---- */

TEST_IMPL(broker_memory_block_times_out_with_nil) {
  setup(NULL);
  CHECK("+OK", "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM");
  struct res x = {0}, ping = {0};
  SEND(conn, &x, "XREADGROUP", "GROUP", "g", "a", "BLOCK", "1000", "STREAMS", "s", ">");
  SEND(conn, &ping, "PING"); /* waits behind the blocked read */
  clock_virtual_settle(clk);
  clock_virtual_advance(clk, 999);
  ASSERT_INT_EQ(x.n, 0);
  ASSERT_INT_EQ(ping.n, 0);
  clock_virtual_advance(clk, 1);
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(x.n, 1);
  ASSERT_STR_EQ(show(x.r), "nil");
  ASSERT_INT_EQ(ping.n, 1);
  ASSERT(x.order < ping.order);
  mr_free(x.r);
  mr_free(ping.r);
  teardown();
}

static void block_wake(const char *version) {
  setup(version);
  CHECK("+OK", "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM");
  bk_conn *c1 = bk_conn_open(b, "c1", NULL, NULL), *c2 = bk_conn_open(b, "c2", NULL, NULL);
  struct res r1 = {0}, r2 = {0};
  SEND(c1, &r1, "XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", ">");
  clock_virtual_settle(clk);
  SEND(c2, &r2, "XREADGROUP", "GROUP", "g", "two", "BLOCK", "0", "STREAMS", "s", ">");
  clock_virtual_settle(clk);
  clock_virtual_advance(clk, 60000);
  ASSERT_INT_EQ(r1.n + r2.n, 0);
  CHECK("1-0", "XADD", "s", "1-0", "f", "1");
  ASSERT_INT_EQ(r1.n, 1); /* first blocked, first served */
  ASSERT_STR_EQ(show(r1.r), "[[s,[[1-0,[f,1]]]]]");
  ASSERT_INT_EQ(r2.n, 0); /* nothing left for the second: still waiting */
  CHECK("+OK", "MULTI");
  CHECK("+QUEUED", "XADD", "s", "2-0", "f", "2");
  CHECK("+QUEUED", "XADD", "s", "3-0", "f", "3");
  ASSERT_INT_EQ(r2.n, 0);
  CHECK("[2-0,3-0]", "EXEC");
  ASSERT_INT_EQ(r2.n, 1); /* woken after EXEC with both */
  ASSERT_STR_EQ(show(r2.r), "[[s,[[2-0,[f,2]],[3-0,[f,3]]]]]");
  CHECK("[[1-0,one,:0,:1],[2-0,two,:0,:1],[3-0,two,:0,:1]]", "XPENDING", "s", "g", "-", "+", "10");
  mr_free(r1.r);
  mr_free(r2.r);
  bk_conn_close(b, c1);
  bk_conn_close(b, c2);
  teardown();
}

TEST_IMPL(broker_memory_block_woken_by_xadd_in_block_order_8_4) { block_wake("8.4.0"); }
TEST_IMPL(broker_memory_block_woken_by_xadd_in_block_order_7_0) { block_wake("7.0.15"); }

static void block_gone(const char *version, const char *const *cmd, const char *expect) {
  setup(version);
  CHECK("+OK", "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM");
  bk_conn *c1 = bk_conn_open(b, "c1", NULL, NULL);
  struct res r1 = {0};
  SEND(c1, &r1, "XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", ">");
  clock_virtual_settle(clk);
  cmdv(conn, (const char **)cmd);
  ASSERT_INT_EQ(r1.n, 1);
  ASSERT_STR_EQ(show(r1.r), expect);
  mr_free(r1.r);
  bk_conn_close(b, c1);
  teardown();
}

TEST_IMPL(broker_memory_block_ends_when_key_or_group_goes) {
  static const char *const del[] = {"DEL", "s", NULL};
  static const char *const flush[] = {"FLUSHALL", NULL};
  static const char *const destroy[] = {"XGROUP", "DESTROY", "s", "g", NULL};
  static const char nogroup84[] =
      "-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option";
  block_gone("8.4.0", del, nogroup84);
  block_gone("8.4.0", flush, nogroup84);
  block_gone("8.4.0", destroy, nogroup84);
  block_gone("7.0.15", del, "-UNBLOCKED the stream key no longer exists");
  block_gone("7.0.15", flush, "-UNBLOCKED the stream key no longer exists");
  block_gone("7.0.15", destroy,
             "-NOGROUP the consumer group this client was blocked on no longer exists");
}

static void add_then_delete(const char *version, int woken, const char *expect) {
  setup(version);
  CHECK("+OK", "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM");
  bk_conn *c1 = bk_conn_open(b, "c1", NULL, NULL);
  struct res r1 = {0};
  SEND(c1, &r1, "XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", ">");
  clock_virtual_settle(clk);
  CMD("MULTI");
  CMD("XADD", "s", "5-0", "f", "v");
  CMD("XDEL", "s", "5-0");
  CHECK("[5-0,:1]", "EXEC");
  ASSERT_INT_EQ(r1.n, woken);
  if (woken) ASSERT_STR_EQ(show(r1.r), expect);
  mr_free(r1.r);
  bk_conn_close(b, c1); /* a still blocked read completes with an error */
  ASSERT_INT_EQ(r1.n, 1);
  if (!woken) ASSERT_STR_EQ(r1.err, "connection closed");
  teardown();
}

TEST_IMPL(broker_memory_block_add_then_delete_wakes_7_0_only) {
  add_then_delete("7.0.15", 1, "[[s,[]]]");
  add_then_delete("8.4.0", 0, NULL);
}

TEST_IMPL(broker_memory_block_claim_wakes_when_claimable) {
  setup(NULL);
  CHECK("+OK", "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM");
  CHECK("1-0", "XADD", "s", "1-0", "f", "1");
  CMD("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">");
  bk_conn *c1 = bk_conn_open(b, "c1", NULL, NULL);
  struct res r1 = {0};
  SEND(c1, &r1, "XREADGROUP", "GROUP", "g", "bob", "BLOCK", "5000", "CLAIM", "1000", "STREAMS", "s",
       ">");
  clock_virtual_settle(clk);
  clock_virtual_advance(clk, 999);
  ASSERT_INT_EQ(r1.n, 0);
  clock_virtual_advance(clk, 1);
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(r1.n, 1);
  ASSERT_STR_EQ(show(r1.r), "[[s,[[1-0,[f,1],:1000,:1]]]]");
  /* new entries wake a claiming reader before anything is claimable */
  SEND(c1, &r1, "XREADGROUP", "GROUP", "g", "bob", "BLOCK", "5000", "CLAIM", "1000", "STREAMS", "s",
       ">");
  clock_virtual_advance(clk, 100);
  CHECK("2-0", "XADD", "s", "2-0", "f", "2");
  ASSERT_INT_EQ(r1.n, 2);
  ASSERT_STR_EQ(show(r1.r), "[[s,[[2-0,[f,2],:0,:0]]]]");
  /* an ack before the moment cancels the wake-up: the timeout answers */
  SEND(c1, &r1, "XREADGROUP", "GROUP", "g", "bob", "BLOCK", "5000", "CLAIM", "1000", "STREAMS", "s",
       ">");
  clock_virtual_settle(clk);
  CHECK(":2", "XACK", "s", "g", "1-0", "2-0");
  clock_virtual_advance(clk, 4999);
  ASSERT_INT_EQ(r1.n, 2);
  clock_virtual_advance(clk, 1);
  ASSERT_INT_EQ(r1.n, 3);
  ASSERT_STR_EQ(show(r1.r), "nil");
  mr_free(r1.r);
  bk_conn_close(b, c1);
  teardown();
}

TEST_IMPL(broker_memory_block_claim_two_readers_one_entry) {
  setup(NULL);
  CHECK("+OK", "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM");
  bk_conn *c1 = bk_conn_open(b, "c1", NULL, NULL), *c2 = bk_conn_open(b, "c2", NULL, NULL);
  struct res r1 = {0}, r2 = {0};
  SEND(c1, &r1, "XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "CLAIM", "100", "STREAMS", "s",
       ">");
  SEND(c2, &r2, "XREADGROUP", "GROUP", "g", "two", "BLOCK", "0", "CLAIM", "100", "STREAMS", "s",
       ">");
  clock_virtual_settle(clk);
  CHECK("1-0", "XADD", "s", "1-0", "f", "1");
  ASSERT_STR_EQ(show(r1.r), "[[s,[[1-0,[f,1],:0,:0]]]]");
  ASSERT_INT_EQ(r2.n, 0);
  clock_virtual_advance(clk, 99);
  ASSERT_INT_EQ(r2.n, 0);
  clock_virtual_advance(clk, 1); /* idle 100: the second reader claims it */
  ASSERT_INT_EQ(r2.n, 1);
  ASSERT_STR_EQ(show(r2.r), "[[s,[[1-0,[f,1],:100,:1]]]]");
  mr_free(r1.r);
  mr_free(r2.r);
  bk_conn_close(b, c1);
  bk_conn_close(b, c2);
  teardown();
}

/* A CLAIM min-idle too large to add to any delivery time: the wake-up
 * saturates (no timer due at once, again and again) and nothing is claimed. */
TEST_IMPL(broker_memory_block_claim_huge_min_idle) {
  setup(NULL);
  CHECK("+OK", "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM");
  CHECK("1-0", "XADD", "s", "1-0", "f", "1");
  CMD("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">");
  bk_conn *c1 = bk_conn_open(b, "c1", NULL, NULL);
  struct res r1 = {0};
  SEND(c1, &r1, "XREADGROUP", "GROUP", "g", "bob", "BLOCK", "5000", "CLAIM", "9223372036854775807",
       "STREAMS", "s", ">");
  clock_virtual_settle(clk); /* returns */
  ASSERT_INT_EQ(r1.n, 0);
  clock_virtual_advance(clk, 5000);
  ASSERT_INT_EQ(r1.n, 1);
  ASSERT_STR_EQ(show(r1.r), "nil");
  CHECK("[[1-0,alice,:5000,:1]]", "XPENDING", "s", "g", "-", "+", "10");
  mr_free(r1.r);
  bk_conn_close(b, c1);
  teardown();
}

/* ---- MULTI/EXEC ---- */

TEST_IMPL(broker_memory_multi_exec) {
  setup(NULL);
  CHECK("+OK", "MULTI");
  CHECK("+QUEUED", "XADD", "s", "1-0", "f", "v");
  CHECK("+QUEUED", "XADD", "s", "1-0", "f", "v");
  CHECK("+QUEUED", "XLEN", "s");
  CHECK("+QUEUED", "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">");
  CHECK(
      "[1-0,-ERR The ID specified in XADD is equal or smaller than the target stream top item,"
      ":1,-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option]",
      "EXEC");
  CHECK("+OK", "MULTI");
  CHECK(
      "-ERR unknown command 'FOO' (the in-memory Redis of luastream.testing does not have it: "
      "testing.app(dir, {redis = URL}) runs on a real server)",
      "FOO");
  CHECK("+QUEUED", "XADD", "s", "2-0", "f", "v");
  CHECK("-EXECABORT Transaction discarded because of previous errors.", "EXEC");
  CHECK(":1", "XLEN", "s");
  CHECK("+OK", "MULTI");
  CHECK("-ERR wrong number of arguments for 'xlen' command", "XLEN");
  CHECK("-EXECABORT Transaction discarded because of previous errors.", "EXEC");
  CHECK("-ERR EXEC without MULTI", "EXEC");
  CHECK("-ERR DISCARD without MULTI", "DISCARD");
  CHECK("+OK", "MULTI");
  CHECK("-ERR MULTI calls can not be nested", "MULTI");
  CHECK("+QUEUED", "XADD", "s", "3-0", "f", "v");
  CHECK("+OK", "DISCARD");
  CHECK(":1", "XLEN", "s");
  CHECK("+OK", "XGROUP", "CREATE", "s", "g", "$");
  CHECK("+OK", "MULTI");
  CHECK("+QUEUED", "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">");
  CHECK("[nil]", "EXEC"); /* BLOCK inside MULTI never blocks */
  teardown();
}

/* ---- EVAL ---- */

TEST_IMPL(broker_memory_eval_conversions_and_errors) {
  setup(NULL);
  CHECK("[:1,a,+fine,nil,:3,-My Error]", "EVAL",
        "return {1, 'a', {ok='fine'}, false, 3.9, {err='My Error'}, nil, 'after'}", "0");
  CHECK("ky", "EVAL", "return KEYS[1] .. ARGV[2]", "1", "k", "x", "y");
  CHECK(":0", "EVAL", "return redis.call('XLEN', KEYS[1])", "1", "s");
  CHECK("1-0", "EVAL", "return redis.call('XADD', KEYS[1], 1, 'f', 10)", "1", "s");
  CHECK("[1-0,[f,10]]", "EVAL", "return redis.call('XRANGE', 's', '-', '+')[1]", "0");
  CHECK("-NOGROUP No such consumer group 'nog' for key name 's'", "EVAL",
        "return redis.pcall('XGROUP', 'SETID', 's', 'nog', '0')", "0");
  CHECK(
      "-NOGROUP No such consumer group 'nog' for key name 's' script: "
      "e3c0bf4c617895fcb5457fd64b12f9ce4855c562, on @user_script:2.",
      "EVAL", "local x = 1\nreturn redis.call('XGROUP', 'SETID', 's', 'nog', '0')", "0");
  CHECK(
      "-ERR user_script:1: attempt to perform arithmetic on a nil value script: "
      "d13bc48d895ba57f297c4db70c1d256548a54e2d, on @user_script:1.",
      "EVAL", "return nil + 1", "0");
  ASSERT_CONTAINS(CMD("EVAL", "return +", "0"),
                  "-ERR Error compiling script (new function): user_script:1:");
  CHECK("-ERR Number of keys can't be greater than number of args", "EVAL", "return 1", "2", "k");
  CHECK("-ERR Number of keys can't be negative", "EVAL", "return 1", "-1");
  CHECK("-ERR This Redis command is not allowed from script", "EVAL", "return redis.pcall('MULTI')",
        "0");
  CHECK("-ERR Unknown Redis command called from script", "EVAL", "return redis.pcall('FOO')", "0");
  CHECK("+OK", "XGROUP", "CREATE", "s", "g", "$");
  CHECK("nil", "EVAL",
        "return redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'BLOCK', 0, 'STREAMS', "
        "'s', '>')",
        "0"); /* 8.4: BLOCK in a script never blocks */
  broker_memory_set_version(b, "7.0.15");
  ASSERT_CONTAINS(CMD("EVAL",
                      "return redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'BLOCK', 0, "
                      "'STREAMS', 's', '>')",
                      "0"),
                  "-ERR XREADGROUP command is not allowed with BLOCK option from scripts");
  teardown();
}

static void claim_script_setup(void) {
  three_entries();
  CMD("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">");
  clock_virtual_advance(clk, 100);
}

TEST_IMPL(broker_memory_eval_claim_script) {
  setup("7.0.15");
  claim_script_setup();
  CHECK("[[0-0],[[s,[[1-0,[f,1],:100,:1],[2-0,[f,2],:100,:1],[3-0,[f,3],:0,:0]]]],[]]", "EVAL",
        SCRIPT_CLAIM, "1", "s", "g", "bob", "50", "10");
  CHECK("[[1-0,bob,:0,:2],[2-0,bob,:0,:2],[3-0,bob,:0,:1]]", "XPENDING", "s", "g", "-", "+", "10");
  clock_virtual_advance(clk, 100);
  CHECK(":1", "XDEL", "s", "2-0");
  struct res x = {0};
  SEND(conn, &x, "EVAL", SCRIPT_CLAIM, "1", "s", "g", "carol", "50", "2");
  clock_virtual_settle(clk);
  ASSERT_STR_EQ(show(x.r), "[[0-0],[[s,[[1-0,[f,1],:100,:2]]]],[[s,2-0]]]");
  char cursor[48], why[128];
  struct entry *list = NULL;
  size_t n = 0;
  const bk_reply *deleted = NULL;
  const char *keys[] = {"s"};
  ASSERT_OK(read_reply_parse_claimed(x.r, keys, 1, UINT64_MAX, cursor, sizeof cursor, &list, &n,
                                     &deleted, why, sizeof why));
  ASSERT_STR_EQ(cursor, "0-0");
  ASSERT_INT_EQ(n, 1);
  ASSERT_INT_EQ(list->idle_ms, 100);
  ASSERT_INT_EQ(list->deliveries, 2);
  ASSERT_INT_EQ(deleted->elements, 1);
  entry_free(list);
  mr_free(x.r);
  /* 3-0 (bob's) is still idle */
  CHECK("[[0-0],[[s,[[3-0,[f,3],:100,:1]]]],[]]", "EVAL", SCRIPT_CLAIM, "1", "s", "g", "carol",
        "50", "2");
  CHECK("[[0-0],[],[]]", "EVAL", SCRIPT_CLAIM, "1", "s", "g", "carol", "50", "2");
  teardown();
}

/* A COUNT beyond what Lua's unpack passes (8000 values): the script claims
 * in chunks, all of them, oldest delivery first as one XCLAIM would. */
TEST_IMPL(broker_memory_eval_claim_script_large_count) {
  setup("7.0.15");
  CHECK("+OK", "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM");
  for (int i = 1; i <= 9000; i++) {
    char id[32];
    snprintf(id, sizeof id, "%d-0", i);
    CMD("XADD", "s", id, "f", "v");
  }
  CMD("XREADGROUP", "GROUP", "g", "alice", "COUNT", "9000", "STREAMS", "s", ">");
  clock_virtual_advance(clk, 100);
  struct res x = {0};
  SEND(conn, &x, "EVAL", SCRIPT_CLAIM, "1", "s", "g", "bob", "50", "9000");
  clock_virtual_settle(clk);
  ASSERT_NOT_NULL(x.r);
  ASSERT_STR_EQ(x.r->type == BK_ERROR ? x.r->str : "", "");
  const bk_reply *got = x.r->element[1]->element[0]->element[1];
  ASSERT_INT_EQ(got->elements, 9000);
  ASSERT_STR_EQ(show(got->element[0]), "[1-0,[f,v],:100,:1]");
  ASSERT_STR_EQ(show(got->element[8999]), "[9000-0,[f,v],:100,:1]");
  mr_free(x.r);
  CHECK("[:9000,1-0,9000-0,[[bob,9000]]]", "XPENDING", "s", "g");
  teardown();
}

/* redis.call takes as many arguments as a script can pass: unpack stops
 * at Lua's C stack (8000 values, counting its own arguments), with the error
 * Redis gives. */
TEST_IMPL(broker_memory_eval_many_arguments_and_unpack_limit) {
  setup(NULL);
  CHECK(":3999", "EVAL",
        "local t = {'z'} for i = 1, 7998 do t[i + 1] = i end\n"
        "return redis.call('ZADD', unpack(t))",
        "0");
  CHECK(":3999", "EVAL", "return redis.call('ZCARD', 'z')", "0");
  ASSERT_CONTAINS(CMD("EVAL",
                      "local t = {} for i = 1, 8000 do t[i] = i end\n"
                      "return #{unpack(t)}",
                      "0"),
                  "-ERR user_script:2: too many results to unpack script: ");
  teardown();
}

/* The reply of a table nested past Lua's stack (here one that contains
 * itself) ends in an error element, as in Redis, and nothing aborts. */
TEST_IMPL(broker_memory_eval_self_referencing_table) {
  setup(NULL);
  struct res x = {0};
  SEND(conn, &x, "EVAL", "local t = {} t[1] = t return t", "0");
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(x.n, 1);
  const bk_reply *r = x.r;
  int depth = 0;
  while (r->type == BK_ARRAY) {
    ASSERT_INT_EQ(r->elements, 1);
    r = r->element[0];
    depth++;
  }
  ASSERT_INT_EQ(r->type, BK_ERROR);
  ASSERT_STR_EQ(r->str, "reached lua stack limit");
  ASSERT(depth > 1000 && depth < 8000);
  mr_free(x.r);
  /* a metatable is not consulted: err and ok are the table's own fields */
  CHECK("[:1]", "EVAL", "return setmetatable({1}, {__index = function() error('no') end})", "0");
  CHECK(":-9223372036854775808", "EVAL", "return 1e300", "0");
  CHECK(":0", "EVAL", "return redis.call('XLEN', 1e300)", "0");
  teardown();
}

/* A subscription's two keys, the stream and its retry stream: each key on
 * its own (COUNT per key), entries tagged with their key when parsed. */
TEST_IMPL(broker_memory_eval_claim_script_two_keys) {
  setup("7.0.15");
  claim_script_setup(); /* s: 1-0, 2-0 pending (alice, idle 100), 3-0 new */
  CHECK("5-0", "XADD", "s:retry:g", "5-0", "f", "5");
  CHECK("+OK", "XGROUP", "CREATE", "s:retry:g", "g", "0");
  CHECK("[[s:retry:g,[[5-0,[f,5]]]]]", "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s:retry:g",
        ">");
  CHECK("6-0", "XADD", "s:retry:g", "6-0", "f", "6");
  clock_virtual_advance(clk, 100);
  struct res x = {0};
  SEND(conn, &x, "EVAL", SCRIPT_CLAIM, "2", "s", "s:retry:g", "g", "bob", "50", "2");
  clock_virtual_settle(clk);
  ASSERT_STR_EQ(show(x.r),
                "[[0-0,0-0],[[s,[[1-0,[f,1],:200,:1],[2-0,[f,2],:200,:1]]],"
                "[s:retry:g,[[5-0,[f,5],:100,:1],[6-0,[f,6],:0,:0]]]],[]]");
  char cursor[2][48], why[128];
  struct entry *list = NULL;
  size_t n = 0;
  const bk_reply *deleted = NULL;
  const char *keys[] = {"s", "s:retry:g"};
  ASSERT_OK(read_reply_parse_claimed(x.r, keys, 2, UINT64_MAX, cursor[0], sizeof cursor[0], &list,
                                     &n, &deleted, why, sizeof why));
  ASSERT_INT_EQ(n, 4);
  int want_key[] = {0, 0, 1, 1};
  int i = 0;
  for (struct entry *e = list, *next; e; e = next, i++) {
    next = e->next;
    ASSERT_INT_EQ(e->key, want_key[i]);
    entry_free(e);
  }
  mr_free(x.r);
  /* reclaim: one XAUTOCLAIM per key from its own cursor */
  clock_virtual_advance(clk, 100);
  CHECK("[[2-0,6-0],[[s,[[1-0,[f,1],:100,:3]]],[s:retry:g,[[5-0,[f,5],:100,:3]]]],[]]", "EVAL",
        SCRIPT_RECLAIM, "2", "s", "s:retry:g", "g", "carol", "50", "1", "0-0", "0-0");
  CHECK("[[0-0,0-0],[[s,[[2-0,[f,2],:100,:3]]],[s:retry:g,[[6-0,[f,6],:100,:2]]]],[]]", "EVAL",
        SCRIPT_RECLAIM, "2", "s", "s:retry:g", "g", "carol", "50", "1", "2-0", "0-0");
  teardown();
}

TEST_IMPL(broker_memory_eval_reclaim_script) {
  setup("7.0.15");
  claim_script_setup();
  CHECK("[[0-0],[[s,[[1-0,[f,1],:100,:2],[2-0,[f,2],:100,:2]]]],[]]", "EVAL", SCRIPT_RECLAIM, "1",
        "s", "g", "bob", "50", "10", "0-0");
  CHECK(":1", "XDEL", "s", "1-0");
  clock_virtual_advance(clk, 60);
  CHECK("[[2-0],[],[[s,1-0]]]", "EVAL", SCRIPT_RECLAIM, "1", "s", "g", "bob", "50", "1", "0-0");
  CHECK("[[0-0],[[s,[[2-0,[f,2],:60,:3]]]],[]]", "EVAL", SCRIPT_RECLAIM, "1", "s", "g", "bob", "50",
        "1", "2-0");
  teardown();
}

/* ---- sorted sets (cmd_zset.c) ---- */

#define WRONGTYPE "-WRONGTYPE Operation against a key holding the wrong kind of value"

/* Sends argv with explicit lengths (binary-safe); returns the reply, owned. */
static bk_reply *cmd_bin(int argc, const char **argv, const size_t *len) {
  struct res x = {0};
  ASSERT_OK(bk_command(b, conn, argc, argv, len, on_reply, &x));
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(x.n, 1);
  ASSERT_NOT_NULL(x.r);
  return x.r;
}

static void check_bin(const char *expect, int argc, const char **argv, const size_t *len) {
  bk_reply *r = cmd_bin(argc, argv, len);
  ASSERT_STR_EQ(show(r), expect);
  mr_free(r);
}

TEST_IMPL(broker_memory_zset_order_scores_ranges) {
  setup("7.0.15");
  CHECK(":4", "ZADD", "z", "2", "b", "1", "aa", "1", "a", "1", "ab");
  CHECK(":0", "ZADD", "z", "1", "b"); /* a new score, not a new member */
  CHECK("[a,aa,ab,b]", "ZRANGE", "z", "0", "-1");
  /* Members are bytes: "a\0" after "a" (a prefix first), before "aa";
   * 0xff after every ASCII byte (all six have score 1). */
  check_bin(":2", 6, (const char *[]){"ZADD", "z", "1", "a\0", "1", "\xff"},
            (const size_t[]){4, 1, 1, 2, 1, 1});
  bk_reply *r =
      cmd_bin(4, (const char *[]){"ZRANGE", "z", "0", "-1"}, (const size_t[]){6, 1, 1, 2});
  ASSERT_INT_EQ(r->elements, 6);
  ASSERT_MEM_EQ(r->element[0]->str, r->element[0]->len, "a");
  ASSERT_INT_EQ(r->element[1]->len, 2);
  ASSERT(memcmp(r->element[1]->str, "a\0", 2) == 0);
  ASSERT_MEM_EQ(r->element[2]->str, r->element[2]->len, "aa");
  ASSERT_MEM_EQ(r->element[4]->str, r->element[4]->len, "b");
  ASSERT_MEM_EQ(r->element[5]->str, r->element[5]->len, "\xff");
  mr_free(r);
  check_bin("1", 3, (const char *[]){"ZSCORE", "z", "a\0"}, (const size_t[]){6, 1, 2});
  check_bin("nil", 3, (const char *[]){"ZSCORE", "z", "a\0x"}, (const size_t[]){6, 1, 3});
  check_bin(":2", 4, (const char *[]){"ZREM", "z", "a\0", "\xff"}, (const size_t[]){4, 1, 2, 1});
  /* ranges */
  CHECK("[a,aa]", "ZRANGEBYSCORE", "z", "1", "1", "LIMIT", "0", "2");
  CHECK("[ab,b]", "ZRANGEBYSCORE", "z", "1", "(2", "LIMIT", "2", "5");
  CHECK("[]", "ZRANGEBYSCORE", "z", "(1", "+inf");
  CHECK("[]", "ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "5");
  CHECK("[b,1,ab,1]", "ZRANGE", "z", "0", "1", "REV", "WITHSCORES");
  CHECK("[ab,aa]", "ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "2");
  CHECK("[aa,ab]", "ZRANGE", "z", "-3", "-2");
  CHECK("-ERR BYLEX is not supported by the in-memory broker", "ZRANGE", "z", "-", "+", "BYLEX");
  /* scores as 7.0 prints them, then as 7.2 and later do */
  CHECK(":5", "ZADD", "n", "0.1", "x", "1767225601000", "t", "1e21", "e", "-inf", "m", "2.5", "h");
  CHECK("0.10000000000000001", "ZSCORE", "n", "x");
  CHECK("1767225601000", "ZSCORE", "n", "t");
  CHECK("1e+21", "ZSCORE", "n", "e");
  CHECK("[m,-inf,x,0.10000000000000001,h,2.5]", "ZRANGE", "n", "0", "2", "WITHSCORES");
  broker_memory_set_version(b, "8.4.0");
  CHECK("0.1", "ZSCORE", "n", "x");
  CHECK("1767225601000", "ZSCORE", "n", "t");
  CHECK("1e+21", "ZSCORE", "n", "e");
  CHECK("6", "ZADD", "n", "INCR", "3.5", "h");
  CHECK("0.30000000000000004", "ZADD", "n", "INCR", "0.2", "x");
  /* NX, XX, GT, LT, CH */
  CHECK(":1", "ZADD", "n", "NX", "7", "x", "7", "new");
  CHECK(":0", "ZADD", "n", "XX", "8", "x", "8", "other");
  CHECK(":2", "ZADD", "n", "GT", "CH", "1", "x", "9", "x", "9", "t2");
  CHECK("9", "ZSCORE", "n", "x");
  CHECK(":0", "ZADD", "n", "LT", "CH", "10", "x");
  CHECK("nil", "ZSCORE", "n", "other");
  CHECK("-ERR XX and NX options at the same time are not compatible", "ZADD", "n", "XX", "NX", "1",
        "x");
  CHECK("-ERR value is not a valid float", "ZADD", "n", "1", "x", "nan", "y");
  CHECK("-ERR syntax error", "ZADD", "n", "1", "x", "2");
  /* a set that empties is gone */
  CHECK(":4", "ZREM", "z", "a", "aa", "ab", "b", "a");
  CHECK(":0", "EXISTS", "z");
  CHECK("+none", "TYPE", "z");
  CHECK(":0", "ZCARD", "z");
  CHECK("[]", "ZRANGE", "z", "0", "-1");
  teardown();
}

TEST_IMPL(broker_memory_zset_one_key_one_type) {
  setup(NULL);
  CHECK(":1", "ZADD", "d", "1", "m");
  CHECK("1-0", "XADD", "s", "1-0", "f", "v");
  CHECK("+OK", "XGROUP", "CREATE", "s", "g", "0");
  CHECK(WRONGTYPE, "XADD", "d", "*", "f", "v");
  CHECK(WRONGTYPE, "XLEN", "d");
  CHECK(WRONGTYPE, "XGROUP", "CREATE", "d", "g", "$", "MKSTREAM");
  CHECK(WRONGTYPE, "XINFO", "STREAM", "d");
  CHECK(WRONGTYPE, "XACK", "d", "g", "1-0");
  /* answered at once, never parked */
  CHECK(WRONGTYPE, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", "d", ">", ">");
  CHECK("[]", "XPENDING", "s", "g", "-", "+", "10"); /* s was not read either */
  CHECK(WRONGTYPE, "ZADD", "s", "1", "m");
  CHECK(WRONGTYPE, "ZRANGEBYSCORE", "s", "-inf", "+inf");
  CHECK(WRONGTYPE, "ZREM", "s", "m");
  CHECK(WRONGTYPE, "ZSCORE", "s", "m");
  CHECK(":1", "ZCARD", "d");
  CHECK(":1", "XLEN", "s");
  CHECK("+zset", "TYPE", "d");
  CHECK("+stream", "TYPE", "s");
  CHECK("[-WRONGTYPE Operation against a key holding the wrong kind of value,:1]", "EVAL",
        "return {redis.pcall('XADD', 'd', '*', 'f', 'v'), redis.call('ZCARD', 'd')}", "0");
  CHECK(":2", "EXISTS", "d", "s");
  CHECK(":2", "DEL", "d", "s", "nokey");
  CHECK("1-0", "XADD", "d", "1-0", "f", "v"); /* the names are free for either type again */
  CHECK(":1", "ZADD", "s", "1", "m");
  CHECK(":1", "ZADD", "t", "1", "m");
  CHECK("+OK", "FLUSHALL");
  CHECK(":0", "EXISTS", "d", "s", "t");
  CHECK(":1", "ZADD", "t", "1", "m"); /* memdb_free frees what is left (LeakSanitizer) */
  teardown();
}

/* A delay-set member as outcome.c's delay_member builds it: the netstrings
 * ("<len>:<bytes>") of the id, then field, value, ... */
static size_t netstrings(char *out, const char *const *s, const size_t *len, int n) {
  size_t k = 0;
  for (int i = 0; i < n; i++) {
    k += (size_t)sprintf(out + k, "%zu:", len[i]);
    memcpy(out + k, s[i], len[i]);
    k += len[i];
  }
  return k;
}

/* SCRIPT_SWEEP on the memory broker: due members (score <= now, lowest
 * first, at most count) go back onto the stream as new entries with their
 * fields, bytes intact, and leave the set; the rest stay, the first of them
 * due at the reply's last number (-1: none left); the set goes when it
 * empties. A member that is not netstrings of an id and field pairs goes
 * to the third key with its score, and the members after it still move. */
TEST_IMPL(broker_memory_eval_sweep_script) {
  setup(NULL);
  char m1[256], m2[256], m3[256], now[32];
  size_t l1 = netstrings(m1,
                         (const char *[]){"1-0", "data", "a\0b", "delivery-count", "2",
                                          "retry-group", "g", "original-id", "1-0"},
                         (const size_t[]){3, 4, 3, 14, 1, 11, 1, 11, 3}, 9);
  size_t l2 = netstrings(m2,
                         (const char *[]){"2-0", "data", "x:1:", "delivery-count", "3",
                                          "retry-group", "g", "original-id", "0-1"},
                         (const size_t[]){3, 4, 4, 14, 1, 11, 1, 11, 3}, 9);
  size_t l3 =
      netstrings(m3, (const char *[]){"3-0", "data", "later"}, (const size_t[]){3, 4, 5}, 3);
  CHECK("+OK", "MULTI");
  const char *zadd[] = {"ZADD", "s:delayed:g", "999990", m1};
  check_bin("+QUEUED", 4, zadd, (const size_t[]){4, 11, 6, l1});
  zadd[2] = "1000000", zadd[3] = m2;
  check_bin("+QUEUED", 4, zadd, (const size_t[]){4, 11, 7, l2});
  zadd[2] = "1000500", zadd[3] = m3;
  check_bin("+QUEUED", 4, zadd, (const size_t[]){4, 11, 7, l3});
  CHECK("[:1,:1,:1]", "EXEC");

  snprintf(now, sizeof now, "%llu", (unsigned long long)clock_wall(clk)); /* 1000000 */
  /* the earliest, then the one due now (inclusive) */
  /* ... each reporting when the first left is due */
  CHECK("[:1,:0,:0,:1000000]", "EVAL", SCRIPT_SWEEP, "3", "s:delayed:g", "s", "s:bad", now, "1",
        "g");
  CHECK("[:1,:0,:0,:1000500]", "EVAL", SCRIPT_SWEEP, "3", "s:delayed:g", "s", "s:bad", now, "10",
        "g");
  CHECK("[:0,:0,:0,:1000500]", "EVAL", SCRIPT_SWEEP, "3", "s:delayed:g", "s", "s:bad", now, "10",
        "g");
  bk_reply *r = cmd_bin(4, (const char *[]){"XRANGE", "s", "-", "+"}, (const size_t[]){6, 1, 1, 1});
  ASSERT_INT_EQ(r->elements, 2);
  const bk_reply *f = r->element[0]->element[1];
  ASSERT_MEM_EQ(r->element[0]->element[0]->str, r->element[0]->element[0]->len, "1000000-0");
  ASSERT_INT_EQ(f->elements, 8);
  ASSERT_INT_EQ(f->element[1]->len, 3);
  ASSERT(memcmp(f->element[1]->str, "a\0b", 3) == 0);
  ASSERT_STR_EQ(show(r->element[1]),
                "[1000000-1,[data,x:1:,delivery-count,3,retry-group,g,original-id,0-1]]");
  mr_free(r);
  check_bin(":1", 2, (const char *[]){"ZCARD", "s:delayed:g"}, (const size_t[]){5, 11});

  /* Unreadable members, due first: set aside; the readable one still moves. */
  CHECK(":1", "ZADD", "s:delayed:g", "1000100", "3:4-0");          /* an id, no field */
  CHECK(":1", "ZADD", "s:delayed:g", "1000200", "3:5-04:data");    /* a field, no value */
  CHECK(":1", "ZADD", "s:delayed:g", "1000300", "3:6-09:toolong"); /* past the end */
  CHECK(":1", "ZADD", "s:delayed:g", "1000400", "x:6-0");          /* no length */
  clock_virtual_advance(clk, 500);
  snprintf(now, sizeof now, "%llu", (unsigned long long)clock_wall(clk));
  CHECK("[:5,:4,:0,:-1]", "EVAL", SCRIPT_SWEEP, "3", "s:delayed:g", "s", "s:bad", now, "10", "g");
  CHECK(":0", "EXISTS", "s:delayed:g");
  CHECK("[[1000500-0,[data,later]]]", "XRANGE", "s", "(1000000-1", "+");
  CHECK("[3:4-0,1000100,3:5-04:data,1000200,3:6-09:toolong,1000300,x:6-0,1000400]", "ZRANGE",
        "s:bad", "0", "-1", "WITHSCORES");
  teardown();
}

/* ---- connections ---- */

struct closer {
  bk_conn *c;
  int n;
  int refused; /* bk_command from inside the callback returned -1 */
};

static void close_in_callback(void *data, const bk_reply *r, const char *err) {
  (void)r, (void)err;
  struct closer *k = data;
  if (k->n++ == 0) {
    bk_conn_close(b, k->c);
    const char *argv[] = {"PING"};
    size_t len[] = {4};
    k->refused = bk_command(b, k->c, 1, argv, len, close_in_callback, k) == -1;
  }
}

TEST_IMPL(broker_memory_close_completes_pending_commands) {
  setup(NULL);
  CHECK("+OK", "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM");
  bk_conn *c1 = bk_conn_open(b, "c1", NULL, NULL);
  struct res r1 = {0}, r2 = {0};
  SEND(c1, &r1, "XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", ">");
  clock_virtual_settle(clk);
  SEND(c1, &r2, "PING");
  bk_conn_close(b, c1);
  ASSERT_INT_EQ(r1.n, 1);
  ASSERT_NULL(r1.r);
  ASSERT_STR_EQ(r1.err, "connection closed");
  ASSERT_INT_EQ(r2.n, 1);
  ASSERT_STR_EQ(r2.err, "connection closed");
  clock_virtual_settle(clk);

  /* closed from inside its own callback, with another command pending */
  struct closer k = {0};
  k.c = bk_conn_open(b, "c2", NULL, NULL);
  const char *argv[] = {"PING"};
  size_t len[] = {4};
  ASSERT_OK(bk_command(b, k.c, 1, argv, len, close_in_callback, &k));
  ASSERT_OK(bk_command(b, k.c, 1, argv, len, close_in_callback, &k));
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(k.n, 2);
  ASSERT(k.refused);
  CHECK("+PONG", "PING"); /* the others carry on */
  teardown();
}

struct states {
  int ups, downs;
};

static void on_state(void *data, bk_conn *c, int up) {
  (void)c;
  struct states *s = data;
  if (up)
    s->ups++;
  else
    s->downs++;
}

TEST_IMPL(broker_memory_outage) {
  setup(NULL);
  struct states st = {0};
  bk_conn *c1 = bk_conn_open(b, "c1", on_state, &st);
  ASSERT_INT_EQ(st.ups, 0); /* reported from the clock */
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(st.ups, 1);
  CHECK("1-0", "XADD", "s", "1-0", "f", "v");
  struct res r1 = {0};
  SEND(c1, &r1, "XLEN", "s");
  broker_memory_set_down(b, true);
  ASSERT(!bk_connected(b, c1));
  const char *argv[] = {"PING"};
  size_t len[] = {4};
  ASSERT_INT_EQ(bk_command(b, c1, 1, argv, len, on_reply, &r1), -1);
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(st.downs, 1);
  ASSERT_INT_EQ(r1.n, 1);
  ASSERT_CONTAINS(r1.err, "connection lost");
  broker_memory_set_down(b, false);
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(st.ups, 2);
  ASSERT(bk_connected(b, c1));
  SEND(c1, &r1, "XLEN", "s");
  clock_virtual_settle(clk);
  ASSERT_STR_EQ(show(r1.r), ":1"); /* the data survived */
  mr_free(r1.r);
  bk_conn_close(b, c1);
  teardown();
}
