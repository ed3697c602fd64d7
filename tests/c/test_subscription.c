/* Tests for subscription.c: a real subscription, real handler files and the
 * replay broker (replay_broker.h), which answers each command with a recorded
 * reply. Redis 8.4 is not installed here, so the XREADGROUP ... CLAIM wire path
 * is checked against recorded 8.4 replies (integers in GA, bulk strings in the
 * release candidates).
 *
 * Time is virtual (clock_virtual_new): it moves only in settle() and
 * advance(), so waits cost nothing and times in commands (dead-letter-time,
 * delay-set scores, the sweeper's now) are exact: wall = WALL0 + now.
 * Handlers log what they get (`msg=got`), captured through log_set_sink.
 *
 * Every subscription sweeps its delay set on the command connection at start
 * and every second after (answered ":0" by default); cmd_log() leaves those
 * EVALs out, the sweeper tests look at them. */
#include <stdbool.h>
#include <unistd.h>
#include <uv.h>

#include "clock.h"
#include "clock_virtual.h"
#include "log.h"
#include "replay_broker.h"
#include "runtime.h"
#include "scripts.h"
#include "subscription.h"
#include "fixtures.h"
#include "task.h"

/* ---- handler files in a temporary folder ---- */

static char tmpdir[64];
static char path[256];

static void tmp_cleanup(void) {
  if (path[0]) unlink(path);
  if (tmpdir[0]) rmdir(tmpdir);
}

/* A handler on stream payments, group ledger, with `opts` as more fields. It
 * logs what it got, sleeps msg.sleep ms when asked, publishes {n = msg.n}
 * (key "k<n>") to msg.publish, then: raises msg.fail, rejects with
 * msg.reject, retries after msg.after, retries when msg.retry, replies {n =
 * msg.n} when msg.reply, else acks. */
static const char *write_handler(const char *name, const char *opts) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lssub.XXXXXX");
  ASSERT_NOT_NULL(mkdtemp(tmpdir));
  atexit(tmp_cleanup);
  unsetenv("LUASTREAM_LUA_DIR"); /* the compiled-in lua/ folder */
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "wb");
  ASSERT_NOT_NULL(f);
  fprintf(
      f,
      "local ls = require \"luastream\"\n"
      "return {\n"
      "  stream = \"payments\", group = \"ledger\", %s,\n"
      "  handle = function(msg, ctx)\n"
      "    local h = ctx.headers\n"
      "    ls.log.info(\"got\", { id = ctx.id, n = msg.n, deliveries = h[\"delivery-count\"],\n"
      "                         idle = h[\"idle-ms\"], key = h[\"partition-key\"] })\n"
      "    if msg.sleep then ls.sleep(msg.sleep) end\n"
      "    if msg.publish then ctx:publish(msg.publish, { n = msg.n }, { key = \"k\" .. msg.n }) end\n"
      "    if msg.fail then error(msg.fail, 0) end\n"
      "    if msg.reject then return ls.reject(msg.reject) end\n"
      "    if msg.after then return ls.retry_after(msg.after) end\n"
      "    if msg.retry then return ls.retry() end\n"
      "    if msg.reply then return ls.reply({ n = msg.n }) end\n"
      "    return ls.ack()\n"
      "  end,\n"
      "}\n",
      opts);
  ASSERT_OK(fclose(f));
  return path;
}

/* ---- log capture ---- */

static char logbuf[65536];
static size_t log_len;

/* The last script version strip_versions took out of a captured line. */
static char last_version[16];

/* How many commands the subscription's read connection had sent when the
 * handler logged `got`, for each of its first 8 lines (read-ahead tests). */
static replay_broker *reads_rb;
static size_t reads_at_got[8];
static int ngot;

#define READER "sub/read" /* the subscription's own connection: handler name + "/read" */

static void log_capture(void *data, enum log_level level, const char *line, size_t len) {
  (void)data, (void)level;
  if (reads_rb && ngot < 8 && strstr(line, " msg=got "))
    reads_at_got[ngot++] = replay_nsent(reads_rb, READER);
  ASSERT(log_len + len + 2 < sizeof logbuf);
  log_len += strip_versions(logbuf + log_len, line, len, last_version);
  logbuf[log_len++] = '\n';
  logbuf[log_len] = '\0';
}

/* What the handler logged: the part after `msg=got ` of each of its lines. */
static const char *got(void) {
  static char out[8192];
  char *o = out;
  *o = '\0';
  for (const char *p = logbuf; (p = strstr(p, " msg=got ")) != NULL;) {
    p += strlen(" msg=got ");
    const char *nl = strchr(p, '\n');
    ASSERT((size_t)(o - out) + (size_t)(nl - p) + 2 < sizeof out);
    memcpy(o, p, (size_t)(nl - p) + 1);
    o += nl - p + 1;
    *o = '\0';
  }
  return out;
}

/* ---- the fixture: one loop, one replay broker, one subscription ---- */

#define WALL0 1700000000000ULL /* wall_ms when virtual now is 0 */
/* How far settle() moves time: past any backoff or poll a test waits for,
 * short of the sweeper's second. */
#define SETTLE_MS 900

static struct {
  lclock *clk;
  replay_broker *rb;
  broker *b;
  bk_conn *cmd;
  struct rt_env env;
  subscription *s;
  int reading, drained;
  uint64_t reading_at[4];
  size_t outstanding_at_drain;
  char cmd_log_at_drain[8192];
} F;

/* What every script read ends with: max_body's limits (1 MB), read_plan.c. */
#define LIMITS " 1048576 1114112 1024 64"
#define OWN_READ "EVAL <own> 2 payments payments:retry:ledger ledger c-1 * 0-0 0-0 **"
/* `new` reads `>` with a plain XREADGROUP; after a reply too large, with
 * SCRIPT_READ (max_body's limits) until a read brings no cut entry. */
#define NEW_READ_N(count)                    \
  "XREADGROUP GROUP ledger c-1 COUNT " count \
  " BLOCK 4000 STREAMS payments payments:retry:ledger > >"
#define NEW_READ NEW_READ_N("10")

/* log without the lines starting with "EVAL <sweep> " (one of 4 rotating buffers). */
static const char *without_sweeps(const char *log) {
  static char buf[4][16384];
  static int next;
  char *out = buf[next++ % 4], *o = out;
  for (const char *p = log; *p;) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
    if (strncmp(p, "EVAL <sweep> ", 13) != 0) {
      ASSERT((size_t)(o - out) + n < sizeof buf[0]);
      memcpy(o, p, n);
      o += n;
    }
    p += n;
  }
  *o = '\0';
  return out;
}

/* The command connection's commands, one a line, without the sweeper's. */
/* Redis's answer to the next SCRIPT_OUTCOME call, of n entries: each
 * written. */
static void expect_outcomes(int n) {
  char resp[256];
  char *o = resp + snprintf(resp, sizeof resp, "*%d\r\n", n);
  for (int i = 0; i < n; i++) o += snprintf(o, sizeof resp - (size_t)(o - resp), ":1\r\n");
  replay_expect(F.rb, "EVAL <outcome> **", resp);
}

/* The start of a SCRIPT_OUTCOME call on key by consumer c-1 (then per
 * entry: id, "ack" or "pending", the number of commands, and per command its
 * argc and argv). */
#define OUTCOMES(key) "EVAL <outcome> 1 " key " ledger c-1"

static const char *cmd_log(void);

static void on_event(void *data, subscription *s, enum sub_event ev) {
  ASSERT(data == &F && s == F.s);
  if (ev == SUB_EV_READING) {
    ASSERT(F.reading < 4);
    F.reading_at[F.reading++] = clock_now(F.clk);
    return;
  }
  F.drained++;
  F.outstanding_at_drain = replay_outstanding(F.rb);
  snprintf(F.cmd_log_at_drain, sizeof F.cmd_log_at_drain, "%s", cmd_log());
}

static const char *cmd_log(void) { return without_sweeps(replay_log(F.rb, "cmd")); }

/* A clock for the subscription whose fresh_ms runs 10 ms further ahead of
 * now_ms at every call, as if each step took 10 ms of CPU; the rest is the
 * virtual clock's (its timers are the virtual clock's own). */
static struct busy_clock {
  lclock base;
  lclock *inner;
  uint64_t ahead;
} busy;
static bool busy_cpu; /* fx_init gives the subscription the busy clock */

static uint64_t busy_now(lclock *c) { return clock_now(((struct busy_clock *)c)->inner); }
static uint64_t busy_fresh(lclock *c) {
  struct busy_clock *b = (struct busy_clock *)c;
  b->ahead += 10;
  return clock_now(b->inner) + b->ahead;
}
static uint64_t busy_wall(lclock *c) { return clock_wall(((struct busy_clock *)c)->inner); }
static ltimer *busy_timer_new(lclock *c, ltimer_cb *cb, void *data) {
  return timer_new(((struct busy_clock *)c)->inner, cb, data);
}
static void busy_free(lclock *c) { (void)c; }
static const struct lclock_ops busy_ops = {.now_ms = busy_now,
                                           .fresh_ms = busy_fresh,
                                           .wall_ms = busy_wall,
                                           .timer_new = busy_timer_new,
                                           .free = busy_free};

/* Loads DIR/sub.lua with `opts` over a replay broker whose defaults create
 * groups and ack; the test adds its recorded replies, then calls fx_run. */
static void fx_init(const char *opts) {
  memset(&F, 0, sizeof F);
  log_len = 0;
  logbuf[0] = '\0';
  log_set_sink(log_capture, NULL);
  F.clk = clock_virtual_new(WALL0);
  ASSERT_NOT_NULL(F.clk);
  F.rb = replay_new(F.clk);
  F.b = replay_base(F.rb);
  reads_rb = F.rb;
  ngot = 0;
  replay_alias(F.rb, SCRIPT_CLAIM, "<claim>");
  replay_alias(F.rb, SCRIPT_RECLAIM, "<reclaim>");
  replay_alias(F.rb, SCRIPT_SWEEP, "<sweep>");
  replay_alias(F.rb, SCRIPT_OWN, "<own>");
  replay_alias(F.rb, SCRIPT_READ, "<read>");
  replay_alias(F.rb, SCRIPT_OUTCOME, "<outcome>");
  replay_alias(F.rb, SCRIPT_HANDBACK, "<handback>");
  replay_alias(F.rb, SCRIPT_HANDBACK_RETRY, "<handback_retry>");
  replay_default(F.rb, "XGROUP CREATE **", "+OK\r\n");
  replay_default(F.rb, "XACK * * **", ":%n\r\n");
  replay_default(F.rb, "EVAL <sweep> **", "*4\r\n:0\r\n:0\r\n:0\r\n:-1\r\n"); /* set empty */
  replay_default(F.rb, "EVAL <handback> **", "*2\r\n:0\r\n:0\r\n");
  replay_default(F.rb, "EVAL <handback_retry> **", ":0\r\n");
  /* `new` reads its own pending list first (a host back under its name):
   * empty unless a test says otherwise. */
  replay_default(F.rb, OWN_READ, "*3\r\n*2\r\n$3\r\n0-0\r\n$3\r\n0-0\r\n*0\r\n*0\r\n");
  F.cmd = bk_conn_open(F.b, "cmd", NULL, NULL);
  F.env = (struct rt_env){.clock = F.clk};

  char err[4096];
  handler *h = NULL;
  if (handler_load(write_handler("sub.lua", opts), &F.env, &h, err, sizeof err) != 0)
    TEST_FAIL_("handler_load: %s", err);
  ASSERT_OK(handler_bind(h, "c-1"));
  busy = (struct busy_clock){.base = {&busy_ops}, .inner = F.clk};
  F.s = sub_new(h, F.b, F.cmd, busy_cpu ? &busy.base : F.clk, NULL, on_event, &F);
  ASSERT_NOT_NULL(F.s);
}

/* Moves time by SETTLE_MS: everything due by then runs, and what is left is
 * reads nobody answers and the next sweep. */
static void settle(void) { clock_virtual_advance(F.clk, SETTLE_MS); }

static void fx_run(long server_version) {
  ASSERT(!bk_connected(F.b, F.cmd)); /* connections come up from the clock */
  clock_virtual_settle(F.clk);
  ASSERT(bk_connected(F.b, F.cmd));
  sub_start(F.s, server_version);
  settle();
}

/* Stops (unless the test did), checks the drain, and frees everything. */
static void fx_finish(void) {
  if (F.drained == 0) {
    sub_stop(F.s);
    settle();
  }
  ASSERT_INT_EQ(F.drained, 1);
  ASSERT_INT_EQ(replay_unused(F.rb), 0); /* every recorded reply was asked for */
  ASSERT(!sub_reading(F.s));
  sub_free(F.s);
  bk_conn_close(F.b, F.cmd);
  broker_free(F.b);
  F.clk->ops->free(F.clk); /* every timer freed by now */
  reads_rb = NULL;
  busy_cpu = false;
  log_set_sink(NULL, NULL);
  LEAK_CHECK();
}

/* ---- recorded replies ---- */

/* XREADGROUP ... CLAIM 30000 on Redis 8.4.0 GA: one entry claimed (idle
 * 31000 ms, delivered once before), one claimed but deleted from the stream
 * (nil fields), one new (0, 0). */
static const char CLAIM_REPLY_INT[] =
    "*1\r\n"
    "*2\r\n$8\r\npayments\r\n"
    "*3\r\n"
    "*4\r\n$15\r\n1700000000000-0\r\n*2\r\n$4\r\ndata\r\n$7\r\n{\"n\":1}\r\n:31000\r\n:1\r\n"
    "*4\r\n$15\r\n1700000000001-0\r\n*-1\r\n:45000\r\n:2\r\n"
    "*4\r\n$15\r\n1700000000002-0\r\n*2\r\n$4\r\ndata\r\n$7\r\n{\"n\":2}\r\n:0\r\n:0\r\n";

/* The same on an 8.4 release candidate: idle and count as bulk strings. */
static const char CLAIM_REPLY_STR[] =
    "*1\r\n"
    "*2\r\n$8\r\npayments\r\n"
    "*3\r\n"
    "*4\r\n$15\r\n1700000000000-0\r\n*2\r\n$4\r\ndata\r\n$7\r\n{\"n\":1}\r\n"
    "$5\r\n31000\r\n$1\r\n1\r\n"
    "*4\r\n$15\r\n1700000000001-0\r\n*-1\r\n$5\r\n45000\r\n$1\r\n2\r\n"
    "*4\r\n$15\r\n1700000000002-0\r\n*2\r\n$4\r\ndata\r\n$7\r\n{\"n\":2}\r\n"
    "$1\r\n0\r\n$1\r\n0\r\n";

#define CLAIMING "read = \"claiming\", min_idle = 30000, batch = 10"
/* BLOCK is recovery_wait_ms: min_idle / 2, at most 1000. */
#define CLAIM_READ(count)                    \
  "XREADGROUP GROUP ledger c-1 COUNT " count \
  " BLOCK 1000 CLAIM 30000 STREAMS payments payments:retry:ledger > >"
#define CREATE \
  "XGROUP CREATE payments ledger $ MKSTREAM\nXGROUP CREATE payments:retry:ledger ledger 0 MKSTREAM"

/* ================================================================ replay broker */

struct calls {
  int n;
  char what[4][64];
};

static void record(void *data, const bk_reply *r, const char *err) {
  struct calls *c = data;
  ASSERT(c->n < 4);
  if (r && r->type == BK_INTEGER)
    snprintf(c->what[c->n++], sizeof c->what[0], "%lld", r->integer);
  else if (r)
    snprintf(c->what[c->n++], sizeof c->what[0], "%.*s", (int)r->len, r->str);
  else
    snprintf(c->what[c->n++], sizeof c->what[0], "err %s", err);
}

static void count_up(void *data, bk_conn *c, int up) {
  (void)c;
  ASSERT_INT_EQ(up, 1);
  (*(int *)data)++;
}

static int send_text(broker *b, bk_conn *c, const char *text, struct calls *out) {
  const char *argv[8];
  size_t len[8];
  char buf[256];
  int argc = 0;
  snprintf(buf, sizeof buf, "%s", text);
  for (char *save, *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
    argv[argc] = w;
    len[argc++] = strlen(w);
  }
  return bk_command(b, c, argc, argv, len, record, out);
}

TEST_IMPL(replay_broker_async_ordered_exactly_once) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  lclock *clk = clock_uv_new(&loop);
  replay_broker *rb = replay_new(clk);
  broker *b = replay_base(rb);
  replay_expect(rb, "GET *", "$3\r\nbar\r\n");
  replay_expect(rb, "PING", "+PONG\r\n");
  replay_default(rb, "DEL **", ":%n\r\n");

  int ups = 0;
  bk_conn *a = bk_conn_open(b, "a", count_up, &ups);
  struct calls ca = {0}, cb = {0};
  ASSERT_INT_EQ(ups, 0);
  ASSERT_INT_EQ(send_text(b, a, "PING", &ca), -1); /* not up yet: refused, never calls back */
  ASSERT_OK(uv_run(&loop, UV_RUN_NOWAIT));
  ASSERT_INT_EQ(ups, 1);

  /* Nothing answers BLPOP: it holds back the PING behind it on `a`. */
  ASSERT_OK(send_text(b, a, "BLPOP q 0", &ca));
  ASSERT_OK(send_text(b, a, "PING", &ca));
  bk_conn *c2 = bk_conn_open(b, "b", NULL, NULL);
  ASSERT_OK(uv_run(&loop, UV_RUN_NOWAIT));
  ASSERT_OK(send_text(b, c2, "GET foo", &cb));
  ASSERT_OK(send_text(b, c2, "DEL x y z", &cb));
  ASSERT_INT_EQ(cb.n, 0); /* never from inside bk_command */
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_INT_EQ(cb.n, 2);
  ASSERT_STR_EQ(cb.what[0], "bar");
  ASSERT_STR_EQ(cb.what[1], "3");
  ASSERT_INT_EQ(ca.n, 0);
  ASSERT_INT_EQ(replay_outstanding(rb), 2);

  bk_conn_close(b, a); /* both fire now, once, in order */
  ASSERT_INT_EQ(ca.n, 2);
  ASSERT_STR_EQ(ca.what[0], "err connection closed");
  ASSERT_STR_EQ(ca.what[1], "err connection closed");
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_INT_EQ(ca.n, 2);
  ASSERT_INT_EQ(replay_outstanding(rb), 0);
  ASSERT_INT_EQ(replay_unused(rb), 0);

  ASSERT_STR_EQ(replay_log(rb, NULL), "a: BLPOP q 0\na: PING\nb: GET foo\nb: DEL x y z\n");
  ASSERT_STR_EQ(replay_log(rb, "a"), "BLPOP q 0\nPING\n");
  ASSERT_INT_EQ(replay_nsent(rb, "b"), 2);
  ASSERT_STR_EQ(replay_sent(rb, "b", 1), "DEL x y z");
  ASSERT_NULL(replay_sent(rb, "b", 2));

  bk_conn_close(b, c2);
  broker_free(b);
  clk->ops->free(clk);
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT));
  ASSERT_OK(uv_loop_close(&loop));
  LEAK_CHECK();
}

/* ================================================================ claiming, 8.4 */

static void claim_reply_handled(const char *reply) {
  fx_init(CLAIMING);
  replay_expect(F.rb, CLAIM_READ("10"), reply);
  fx_run(80400);

  ASSERT_CONTAINS(logbuf, "msg=\"subscription reading\"");
  ASSERT_CONTAINS(logbuf, "read=claiming via=\"XREADGROUP CLAIM\"");
  /* Claimed first, then new; the deleted entry never reaches the handler. */
  ASSERT_STR_EQ(got(),
                "id=1700000000000-0 deliveries=1 idle=31000 n=1\n"
                "id=1700000000002-0 deliveries=0 idle=0 n=2\n");
  /* The next read waited until the acks of what finished were written: a
   * claiming read must not take an entry back before its ack lands. */
  ASSERT_STR_EQ(replay_log(F.rb, READER), CLAIM_READ("10") "\n" CLAIM_READ("10") "\n");
  /* Both handled entries in one XACK; the deleted one is not acked. */
  ASSERT_STR_EQ(cmd_log(), CREATE "\nXACK payments ledger 1700000000000-0 1700000000002-0\n");
  ASSERT_INT_EQ(replay_outstanding(F.rb), 1); /* the second read blocks */
  ASSERT_NULL(strstr(logbuf, "level=error"));
  fx_finish();
}

TEST_IMPL(sub_claim_native_integer_reply) { claim_reply_handled(CLAIM_REPLY_INT); }

TEST_IMPL(sub_claim_native_string_reply) { claim_reply_handled(CLAIM_REPLY_STR); }

TEST_IMPL(sub_claim_native_nil_reply_reads_again) {
  fx_init(CLAIMING);
  replay_expect(F.rb, CLAIM_READ("10"), "*-1\r\n"); /* BLOCK ran out, nothing claimable */
  fx_run(80400);
  ASSERT_STR_EQ(got(), "");
  ASSERT_STR_EQ(replay_log(F.rb, READER), CLAIM_READ("10") "\n" CLAIM_READ("10") "\n");
  ASSERT_STR_EQ(cmd_log(), CREATE "\n");
  ASSERT_NULL(strstr(logbuf, "level=warn"));
  ASSERT_NULL(strstr(logbuf, "level=error"));
  fx_finish();
}

TEST_IMPL(sub_claim_native_retry_writes_nothing) {
  fx_init(CLAIMING);
  replay_expect(F.rb, CLAIM_READ("10"),
                "*1\r\n*2\r\n$8\r\npayments\r\n*2\r\n"
                "*4\r\n$3\r\n1-0\r\n*2\r\n$4\r\ndata\r\n$20\r\n{\"n\":1,\"retry\":true}\r\n"
                ":31000\r\n:1\r\n"
                "*4\r\n$3\r\n2-0\r\n*2\r\n$4\r\ndata\r\n$7\r\n{\"n\":2}\r\n:0\r\n:0\r\n");
  fx_run(80400);
  ASSERT_STR_EQ(got(), "id=1-0 deliveries=1 idle=31000 n=1\nid=2-0 deliveries=0 idle=0 n=2\n");
  /* 1-0 stays pending under its own id: no copy, no transaction, no ack. */
  ASSERT_STR_EQ(cmd_log(), CREATE "\nXACK payments ledger 2-0\n");
  fx_finish();
}

/* 8.4 with two keys: one [key, entries] pair per
 * stream served, in argument order, each claimed entry then new ones, all
 * with 4 elements. The same id on both keys is two entries; each is acked on
 * its own key, and a delayed entry's re-stamp goes to the key it came from.
 * An entry on the retry stream adds the deliveries its header carries. */
TEST_IMPL(sub_claim_native_two_streams) {
  fx_init(CLAIMING);
  replay_expect(F.rb, CLAIM_READ("10"),
                "*2\r\n"
                "*2\r\n$8\r\npayments\r\n*2\r\n"
                "*4\r\n$3\r\n1-0\r\n*2\r\n$4\r\ndata\r\n$7\r\n{\"n\":1}\r\n:31000\r\n:1\r\n"
                "*4\r\n$3\r\n2-0\r\n*2\r\n$4\r\ndata\r\n$7\r\n{\"n\":2}\r\n:0\r\n:0\r\n"
                "*2\r\n$21\r\npayments:retry:ledger\r\n*2\r\n"
                "*4\r\n$3\r\n1-0\r\n*6\r\n$4\r\ndata\r\n$19\r\n{\"n\":3,\"after\":100}\r\n"
                "$14\r\ndelivery-count\r\n$1\r\n2\r\n$11\r\noriginal-id\r\n$3\r\n0-5\r\n"
                ":40000\r\n:1\r\n"
                "*4\r\n$3\r\n2-0\r\n*2\r\n$4\r\ndata\r\n$7\r\n{\"n\":4}\r\n:0\r\n:0\r\n");
  expect_outcomes(1);
  fx_run(80400);
  ASSERT_STR_EQ(got(),
                "id=1-0 deliveries=1 idle=31000 n=1\nid=2-0 deliveries=0 idle=0 n=2\n"
                "id=1-0 deliveries=3 idle=40000 n=3\nid=2-0 deliveries=0 idle=0 n=4\n");
  ASSERT_STR_EQ(cmd_log(), CREATE "\n"
                           OUTCOMES("payments:retry:ledger") " 1-0 pending 1 9 XCLAIM "
                           "payments:retry:ledger ledger c-1 0 1-0 IDLE 29900 JUSTID\n"
                           "XACK payments ledger 1-0 2-0\n"
                           "XACK payments:retry:ledger ledger 2-0\n");
  fx_finish();
}

/* ================================================================ claiming, script */

TEST_IMPL(sub_claim_fallback_script) {
  fx_init(CLAIMING ", claim_fallback = true");
  /* One entry claimed (idle 45000, delivered 3 times before); 4-0 was no
   * longer in the stream (XCLAIM dropped it). */
  replay_expect(F.rb, "EVAL <claim> 2 payments payments:retry:ledger ledger c-1 30000 10" LIMITS,
                "*3\r\n*2\r\n$3\r\n0-0\r\n$3\r\n0-0\r\n"
                "*1\r\n*2\r\n$8\r\npayments\r\n*1\r\n"
                "*4\r\n$3\r\n5-0\r\n*2\r\n$4\r\ndata\r\n$7\r\n{\"n\":5}\r\n:45000\r\n:3\r\n"
                "*1\r\n*2\r\n$8\r\npayments\r\n$3\r\n4-0\r\n");
  /* Nothing claimable and nothing new: the next read blocks on `>`. */
  replay_expect(F.rb, "EVAL <claim> 2 payments payments:retry:ledger ledger c-1 30000 10" LIMITS,
                "*3\r\n*2\r\n$3\r\n0-0\r\n$3\r\n0-0\r\n*1\r\n*2\r\n$8\r\npayments\r\n*0\r\n*0\r\n");
  replay_expect(
      F.rb,
      "XREADGROUP GROUP ledger c-1 COUNT 10 BLOCK 1000 STREAMS payments payments:retry:ledger > >",
      "*1\r\n*2\r\n$8\r\npayments\r\n*1\r\n"
      "*2\r\n$3\r\n6-0\r\n*2\r\n$4\r\ndata\r\n$7\r\n{\"n\":6}\r\n");
  fx_run(70015);

  ASSERT_CONTAINS(logbuf, "read=claiming via=\"claim script (claim_fallback)\"");
  ASSERT_CONTAINS(logbuf,
                  "level=warn handler=sub msg=\"pending entry no longer in the stream, "
                  "dropped\" stream=payments group=ledger consumer=c-1 id=4-0\n");
  /* The plain read's entries count as new: 0 and 0, as CLAIM would say. */
  ASSERT_STR_EQ(got(), "id=5-0 deliveries=3 idle=45000 n=5\nid=6-0 deliveries=0 idle=0 n=6\n");
  ASSERT_STR_EQ(
      replay_log(F.rb, READER),
      "EVAL <claim> 2 payments payments:retry:ledger ledger c-1 30000 10" LIMITS
      "\n"
      "EVAL <claim> 2 payments payments:retry:ledger ledger c-1 30000 10" LIMITS
      "\n"
      "XREADGROUP GROUP ledger c-1 COUNT 10 BLOCK 1000 STREAMS payments payments:retry:ledger > >\n"
      "EVAL <claim> 2 payments payments:retry:ledger ledger c-1 30000 10" LIMITS "\n");
  ASSERT_STR_EQ(cmd_log(), CREATE "\nXACK payments ledger 5-0\nXACK payments ledger 6-0\n");
  fx_finish();
}

/* ================================================================ reclaim */

TEST_IMPL(sub_reclaim_cursor_deleted_and_headers) {
  fx_init("read = \"reclaim\", min_idle = 200, batch = 10"); /* polls every 100 ms */
  /* [cursor, [[key, entries]], [deleted]]: the 4th element is Redis's
   * delivery count after the claim. */
  replay_expect(F.rb,
                "EVAL <reclaim> 2 payments payments:retry:ledger ledger c-1 200 10 0-0 0-0" LIMITS,
                "*3\r\n*2\r\n$3\r\n9-0\r\n$3\r\n0-0\r\n"
                "*1\r\n*2\r\n$8\r\npayments\r\n*1\r\n"
                "*4\r\n$3\r\n3-0\r\n"
                "*4\r\n$4\r\ndata\r\n$7\r\n{\"n\":3}\r\n$13\r\npartition-key\r\n$6\r\nacct-7\r\n"
                ":40000\r\n:2\r\n"
                "*2\r\n*2\r\n$8\r\npayments\r\n$3\r\n4-0\r\n*2\r\n$8\r\npayments\r\n$3\r\n6-0\r\n");
  /* The rest of the pending list, from 9-0: nothing idle enough. */
  replay_expect(F.rb,
                "EVAL <reclaim> 2 payments payments:retry:ledger ledger c-1 200 10 9-0 0-0" LIMITS,
                "*3\r\n*2\r\n$3\r\n0-0\r\n$3\r\n0-0\r\n*1\r\n*2\r\n$8\r\npayments\r\n*0\r\n*0\r\n");
  uint64_t start = clock_now(F.clk);
  fx_run(80400);

  ASSERT_STR_EQ(got(), "id=3-0 deliveries=2 idle=40000 key=acct-7 n=3\n");
  ASSERT_CONTAINS(logbuf,
                  "msg=\"pending entry no longer in the stream, dropped\" "
                  "stream=payments group=ledger consumer=c-1 id=4-0\n");
  ASSERT_CONTAINS(logbuf,
                  "msg=\"pending entry no longer in the stream, dropped\" "
                  "stream=payments group=ledger consumer=c-1 id=6-0\n");
  /* The cursor is carried; a full pass with nothing to claim waits a poll. */
  ASSERT_STR_EQ(replay_log(F.rb, READER),
                "EVAL <reclaim> 2 payments payments:retry:ledger ledger c-1 200 10 0-0 0-0" LIMITS
                "\n"
                "EVAL <reclaim> 2 payments payments:retry:ledger ledger c-1 200 10 9-0 0-0" LIMITS
                "\n"
                "EVAL <reclaim> 2 payments payments:retry:ledger ledger c-1 200 10 0-0 0-0" LIMITS
                "\n");
  ASSERT(clock_now(F.clk) - start >= 100);
  ASSERT_STR_EQ(cmd_log(), CREATE "\nXACK payments ledger 3-0\n");
  fx_finish();
}

/* ================================================================ new */

/* Both keys in one read: a retry copy goes to the group's retry stream, an
 * entry read from there is acked there and copied there again, and on the
 * shared stream luastream's header names written by a producer are data: a
 * forged retry-group (another group's, or ours) skips nothing, a forged
 * delivery-count counts nothing (max_deliveries) and a forged original-id is
 * not carried into the copy. */
TEST_IMPL(sub_new_retry_copy_to_retry_stream_forged_headers_ignored) {
  fx_init("batch = 10, max_deliveries = 5, dead_letter = \"payments.dead\"");
  replay_expect(
      F.rb, NEW_READ,
      "*2\r\n*2\r\n$8\r\npayments\r\n*3\r\n"
      "*2\r\n$3\r\n5-0\r\n*4\r\n$4\r\ndata\r\n$20\r\n{\"n\":5,\"retry\":true}\r\n$13\r\npartition-key\r\n$6\r\nacct-7\r\n"
      "*2\r\n$3\r\n7-0\r\n*8\r\n$4\r\ndata\r\n$7\r\n{\"n\":7}\r\n$11\r\nretry-group\r\n$5\r\naudit\r\n$14\r\ndelivery-count\r\n$3\r\n999\r\n$11\r\noriginal-id\r\n$3\r\n1-0\r\n"
      "*2\r\n$3\r\n8-0\r\n*4\r\n$4\r\ndata\r\n$7\r\n{\"n\":8}\r\n$11\r\nretry-group\r\n$6\r\nledger\r\n"
      "*2\r\n$21\r\npayments:retry:ledger\r\n*1\r\n*2\r\n$3\r\n6-0\r\n*6\r\n$4\r\ndata\r\n$20\r\n{\"n\":6,\"retry\":true}\r\n$14\r\ndelivery-count\r\n$1\r\n2\r\n$11\r\noriginal-id\r\n$3\r\n5-0\r\n");
  expect_outcomes(1); /* one call per key */
  expect_outcomes(1);
  fx_run(80400);

  /* every entry handled, the forged headers handed over as data */
  ASSERT_STR_EQ(got(),
                "id=5-0 key=acct-7 n=5\nid=7-0 deliveries=999 n=7\nid=8-0 n=8\n"
                "id=6-0 deliveries=2 n=6\n");
  ASSERT_STR_EQ(cmd_log(),
                CREATE "\n"
                OUTCOMES("payments") " 5-0 ack 1 11 XADD payments:retry:ledger * "
                "data {\"n\":5,\"retry\":true} partition-key acct-7 delivery-count 1 original-id 5-0\n"
                OUTCOMES("payments:retry:ledger") " 6-0 ack 1 9 XADD payments:retry:ledger * "
                "data {\"n\":6,\"retry\":true} delivery-count 3 original-id 5-0\n"
                "XACK payments ledger 7-0 8-0\n");
  ASSERT_INT_EQ(replay_nsent(F.rb, READER), 3); /* own pending list, the batch, the next read */
  ASSERT_NULL(strstr(logbuf, "level=error"));
  ASSERT_NULL(strstr(logbuf, "dead-lettered"));
  fx_finish();
}

/* ================================================================ errors */

TEST_IMPL(sub_nogroup_creates_group_again) {
  fx_init(CLAIMING);
  replay_expect(F.rb, CLAIM_READ("10"),
                "-NOGROUP No such key 'payments' or consumer group 'ledger' in XREADGROUP "
                "with GROUP option\r\n");
  fx_run(80400);

  ASSERT_CONTAINS(logbuf,
                  "level=error handler=sub msg=\"group or stream disappeared, creating "
                  "it again\"");
  ASSERT_STR_EQ(cmd_log(), CREATE "\n" CREATE "\n");
  ASSERT_STR_EQ(replay_log(F.rb, READER), CLAIM_READ("10") "\n" CLAIM_READ("10") "\n");
  ASSERT_INT_EQ(F.reading, 2);
  ASSERT(F.reading_at[1] - F.reading_at[0] >= 100); /* after the first backoff */
  fx_finish();
}

/* A script's error carries the code inside (7.0 appends the script). The new
 * group has a new pending list: the scan starts again at 0-0. */
TEST_IMPL(sub_reclaim_nogroup_restarts_cursor) {
  fx_init("read = \"reclaim\", min_idle = 200, batch = 10");
  replay_expect(F.rb,
                "EVAL <reclaim> 2 payments payments:retry:ledger ledger c-1 200 10 0-0 0-0" LIMITS,
                "*3\r\n*2\r\n$3\r\n9-0\r\n$3\r\n0-0\r\n"
                "*1\r\n*2\r\n$8\r\npayments\r\n*1\r\n"
                "*4\r\n$3\r\n3-0\r\n*2\r\n$4\r\ndata\r\n$7\r\n{\"n\":3}\r\n:40000\r\n:2\r\n"
                "*0\r\n");
  replay_expect(F.rb,
                "EVAL <reclaim> 2 payments payments:retry:ledger ledger c-1 200 10 9-0 0-0" LIMITS,
                "-NOGROUP No such key 'payments' or consumer group 'ledger' script: "
                "0d1b4c0a4c3f8b9c2f1e6e4d7a5b3c2d1e0f9a8b, on @user_script:9.\r\n");
  fx_run(80400);

  ASSERT_CONTAINS(logbuf, "msg=\"group or stream disappeared, creating it again\"");
  ASSERT_STR_EQ(cmd_log(), CREATE "\nXACK payments ledger 3-0\n" CREATE "\n");
  ASSERT_STR_EQ(replay_log(F.rb, READER),
                "EVAL <reclaim> 2 payments payments:retry:ledger ledger c-1 200 10 0-0 0-0" LIMITS
                "\n"
                "EVAL <reclaim> 2 payments payments:retry:ledger ledger c-1 200 10 9-0 0-0" LIMITS
                "\n"
                "EVAL <reclaim> 2 payments payments:retry:ledger ledger c-1 200 10 0-0 0-0" LIMITS
                "\n");
  fx_finish();
}

/* ================================================================ stop */

static size_t outstanding_before, outstanding_after;
static int drained_in_stop = -1;

/* Stops right after the first read was handled: its acks are queued, not yet
 * flushed, and the next read blocks. */
static void stop_after_first_read(void *data, const char *conn, const char *command) {
  (void)data, (void)command;
  if (strcmp(conn, READER) != 0 || drained_in_stop != -1) return;
  outstanding_before = replay_outstanding(F.rb);
  sub_stop(F.s);
  drained_in_stop = F.drained;
  outstanding_after = replay_outstanding(F.rb);
}

TEST_IMPL(sub_stop_cancels_read_and_flushes_acks) {
  fx_init(CLAIMING);
  replay_expect(F.rb, CLAIM_READ("10"), CLAIM_REPLY_INT);
  replay_on_reply(F.rb, stop_after_first_read, NULL);
  fx_run(80400);

  /* The first sweep went out with the first read and is not answered yet;
   * the next read waits for it and for the acks (claiming). */
  ASSERT_INT_EQ(outstanding_before, 1); /* the sweep */
  ASSERT_INT_EQ(drained_in_stop, 0);    /* the acks were not written yet */
  ASSERT_INT_EQ(outstanding_after, 2);  /* the sweep and the XACK that went out */
  ASSERT_STR_EQ(replay_log(F.rb, READER), CLAIM_READ("10") "\n");
  ASSERT_INT_EQ(F.drained, 1);
  ASSERT_INT_EQ(F.outstanding_at_drain, 0); /* drained once the XACK was answered */
  ASSERT_STR_EQ(F.cmd_log_at_drain,
                CREATE "\nXACK payments ledger 1700000000000-0 1700000000002-0\n");
  ASSERT_STR_EQ(cmd_log(), F.cmd_log_at_drain);
  ASSERT_CONTAINS(logbuf, "msg=\"subscription stopped\"");
  fx_finish();
}

TEST_IMPL(sub_stop_waits_for_running_handler) {
  fx_init(CLAIMING);
  replay_expect(F.rb, CLAIM_READ("10"),
                "*1\r\n*2\r\n$8\r\npayments\r\n*1\r\n"
                "*4\r\n$3\r\n1-0\r\n*2\r\n$4\r\ndata\r\n$18\r\n{\"n\":1,\"sleep\":30}\r\n"
                ":31000\r\n:1\r\n");
  replay_on_reply(F.rb, stop_after_first_read, NULL);
  fx_run(80400);

  /* 1-0 sleeps; the next read waits for the first sweep's answer */
  ASSERT_INT_EQ(outstanding_before, 1); /* the sweep */
  ASSERT_INT_EQ(drained_in_stop, 0);    /* 1-0 still running */
  ASSERT_INT_EQ(outstanding_after, 1);  /* the sweep */
  ASSERT_INT_EQ(F.drained, 1);
  ASSERT_INT_EQ(F.outstanding_at_drain, 0);
  ASSERT_STR_EQ(F.cmd_log_at_drain, CREATE "\nXACK payments ledger 1-0\n");
  fx_finish();
}

/* ================================================================ host bugs */

static uint64_t xack_at[4];
static int nxack;

/* Times the failing XACK replies; the third attempt is answered normally. */
static void time_xacks(void *data, const char *conn, const char *command) {
  (void)data;
  if (strcmp(conn, "cmd") != 0 || strncmp(command, "XACK ", 5) != 0) return;
  ASSERT(nxack < 4);
  xack_at[nxack++] = clock_now(F.clk);
  if (nxack == 2) replay_expect(F.rb, "XACK payments ledger 1-0", ":1\r\n");
}

/* An XACK answered with an error (READONLY after a failover, NOGROUP after
 * the group was deleted) keeps its ids and is sent again after a backoff,
 * not at once on every loop turn for as long as the error lasts. */
TEST_IMPL(sub_failed_ack_retried_after_backoff) {
  fx_init(CLAIMING);
  replay_expect(F.rb, CLAIM_READ("10"),
                "*1\r\n*2\r\n$8\r\npayments\r\n*1\r\n"
                "*4\r\n$3\r\n1-0\r\n*2\r\n$4\r\ndata\r\n$7\r\n{\"n\":1}\r\n:31000\r\n:1\r\n");
  for (int i = 0; i < 2; i++)
    replay_expect(F.rb, "XACK payments ledger 1-0",
                  "-READONLY You can't write against a read only replica.\r\n");
  /* time_xacks adds the third, successful answer once two have failed. */
  replay_on_reply(F.rb, time_xacks, NULL);
  fx_run(80400);

  ASSERT_INT_EQ(nxack, 3);
  ASSERT_STR_EQ(cmd_log(), CREATE
                "\nXACK payments ledger 1-0\n"
                "XACK payments ledger 1-0\nXACK payments ledger 1-0\n");
  ASSERT_CONTAINS(logbuf, "msg=\"ack failed, will retry\"");
  if (xack_at[1] - xack_at[0] < 100)
    TEST_FAIL_("failed XACK sent again after %llu ms; expected a backoff (>= 100 ms)",
               (unsigned long long)(xack_at[1] - xack_at[0]));
  fx_finish();
}

/* Entries read before a NOGROUP error still wait in the lanes while the
 * group is created again; they run as soon as reading resumes, not after the
 * next read's BLOCK. */
TEST_IMPL(sub_entries_run_after_group_recreated) {
  fx_init("batch = 10"); /* one worker */
  replay_expect(F.rb, NEW_READ,
                "*1\r\n*2\r\n$8\r\npayments\r\n*3\r\n"
                "*2\r\n$3\r\n1-0\r\n*2\r\n$4\r\ndata\r\n$18\r\n{\"n\":1,\"sleep\":30}\r\n"
                "*2\r\n$3\r\n2-0\r\n*2\r\n$4\r\ndata\r\n$7\r\n{\"n\":2}\r\n"
                "*2\r\n$3\r\n3-0\r\n*2\r\n$4\r\ndata\r\n$7\r\n{\"n\":3}\r\n");
  /* Read ahead, before 1-0 runs: a whole batch. */
  replay_expect(F.rb, NEW_READ,
                "-NOGROUP No such key 'payments' or consumer group 'ledger' in XREADGROUP "
                "with GROUP option\r\n");
  fx_run(80400);

  ASSERT_INT_EQ(F.reading, 2); /* the group is back and the next read blocks */
  ASSERT_STR_EQ(replay_log(F.rb, READER),
                "EVAL <own> 2 payments payments:retry:ledger ledger c-1 10 0-0 0-0" LIMITS
                "\n" NEW_READ "\n" NEW_READ "\n"
                /* the group is back: a batch more, whatever still waits */
                NEW_READ "\n");
  ASSERT_STR_EQ(got(), "id=1-0 n=1\nid=2-0 n=2\nid=3-0 n=3\n");
  fx_finish();
}

/* ================================================================ outcomes in transactions */

/* One entry of a recorded read reply: fields NULL-terminated; idle and
 * deliveries only for claiming reads. */
struct ent {
  const char *id;
  const char *f[12];
  long long idle, deliveries;
};

/* The RESP of a read of `payments` with these entries (4 elements each when
 * claim: the CLAIM reply). Valid until the test ends. */
static const char *read_resp_on(const char *key, bool claim, const struct ent *e, size_t n) {
  static char bufs[4][8192];
  static int next;
  char *out = bufs[next++ % 4], *o = out, *end = out + sizeof bufs[0];
  o += snprintf(o, (size_t)(end - o), "*1\r\n*2\r\n$%zu\r\n%s\r\n*%zu\r\n", strlen(key), key, n);
  for (size_t i = 0; i < n; i++) {
    size_t nf = 0;
    while (e[i].f[nf]) nf++;
    o += snprintf(o, (size_t)(end - o), "*%d\r\n$%zu\r\n%s\r\n*%zu\r\n", claim ? 4 : 2,
                  strlen(e[i].id), e[i].id, nf);
    for (size_t k = 0; k < nf; k++)
      o += snprintf(o, (size_t)(end - o), "$%zu\r\n%s\r\n", strlen(e[i].f[k]), e[i].f[k]);
    if (claim)
      o += snprintf(o, (size_t)(end - o), ":%lld\r\n:%lld\r\n", e[i].idle, e[i].deliveries);
    ASSERT(o < end);
  }
  return out;
}

static const char *read_resp(bool claim, const struct ent *e, size_t n) {
  return read_resp_on("payments", claim, e, n);
}
#define RETRY_KEY "payments:retry:ledger"

/* An entry of a `new` read, of a claiming read (idle, deliveries before). */
#define NE(id, ...) \
  { id, {__VA_ARGS__}, 0, 0 }
#define CE(id, idle, deliveries, ...) \
  { id, {__VA_ARGS__}, idle, deliveries }

/* The entries given, and how many: read_resp(claim, ENTS(NE(...), ...)). */
#define ENTS(...) \
  (const struct ent[]){__VA_ARGS__}, sizeof((const struct ent[]){__VA_ARGS__}) / sizeof(struct ent)

/* The i-th command on the command connection, sweeps left out (a command may
 * hold newlines: an error text with its traceback). */
static const char *cmd_sent(size_t i) {
  for (size_t k = 0; k < replay_nsent(F.rb, "cmd"); k++) {
    const char *c = replay_sent(F.rb, "cmd", k);
    if (strncmp(c, "EVAL <sweep> ", 13) == 0) continue;
    if (i-- == 0) return c;
  }
  return NULL;
}

#define DL_HEAD(id, deliveries)                                              \
  " dead-letter-stream payments dead-letter-group ledger dead-letter-id " id \
  " dead-letter-deliveries " deliveries " dead-letter-handler sub.lua dead-letter-reason "
#define DL_TIME " dead-letter-time 1700000000000"

TEST_IMPL(sub_publish_written_with_ack_in_one_txn) {
  fx_init("batch = 10");
  replay_expect(
      F.rb, NEW_READ,
      read_resp(false, ENTS(NE("1-0", "data", "{\"n\":1,\"publish\":\"audit\"}"),
                            NE("2-0", "data", "{\"n\":2}"), NE("3-0", "data", "{\"n\":3}"))));
  expect_outcomes(1);
  fx_run(80400);

  ASSERT_STR_EQ(got(), "id=1-0 n=1\nid=2-0 n=2\nid=3-0 n=3\n");
  /* The publish goes with its ack, in one script call; the plain acks coalesced. */
  ASSERT_STR_EQ(cmd_log(), CREATE "\n" OUTCOMES("payments")
                " 1-0 ack 1 7 XADD audit * data {\"n\":1} partition-key k1\n"
                "XACK payments ledger 2-0 3-0\n");
  ASSERT_NULL(strstr(logbuf, "level=error"));
  fx_finish();
}

TEST_IMPL(sub_reply_written_with_ack_in_one_txn) {
  fx_init("reply_to = \"payments.replies\", batch = 10");
  replay_expect(
      F.rb, NEW_READ,
      read_resp(false,
                ENTS(NE("1-0", "data", "{\"n\":1,\"reply\":true}", "partition-key", "acct-1"),
                     NE("2-0", "data", "{\"n\":2,\"reply\":true,\"publish\":\"audit\"}"))));
  expect_outcomes(2);
  fx_run(80400);

  /* each reply says which script version wrote it; ctx:publish entries
   * first, the reply last; both entries' outcomes in one call */
  char want[1024];
  snprintf(want, sizeof want,
           CREATE "\n" OUTCOMES("payments")
           " 1-0 ack 1 11 XADD payments.replies * data {\"n\":1} original-id 1-0 partition-key "
           "acct-1 handler-version %s"
           " 2-0 ack 2 7 XADD audit * data {\"n\":2} partition-key k2"
           " 9 XADD payments.replies * data {\"n\":2} original-id 2-0 handler-version %s\n",
           sub_version(F.s), sub_version(F.s));
  ASSERT_STR_EQ(cmd_log(), want);
  ASSERT_NULL(strstr(logbuf, "level=error"));
  fx_finish();
}

TEST_IMPL(sub_reject_dead_lettered) {
  fx_init("dead_letter = \"payments.dead\", batch = 10");
  replay_expect(F.rb, NEW_READ,
                read_resp(false, ENTS(NE("1-0", "data", "{\"n\":1,\"reject\":\"card expired\"}",
                                         "partition-key", "acct-1"))));
  expect_outcomes(1);
  fx_run(80400);

  /* The original fields, then the provenance. */
  ASSERT_STR_EQ(cmd_log(), CREATE "\n" OUTCOMES("payments")
                " 1-0 ack 1 23 XADD payments.dead * data {\"n\":1,\"reject\":\"card expired\"} "
                "partition-key acct-1" DL_HEAD("1-0", "1") "rejected dead-letter-error "
                "card expired" DL_TIME "\n");
  ASSERT_CONTAINS(logbuf,
                  "level=warn handler=sub msg=\"entry dead-lettered\" stream=payments "
                  "group=ledger id=1-0 reason=rejected deliveries=1 "
                  "dead_letter=payments.dead\n");
  ASSERT_NULL(strstr(logbuf, "level=error"));
  fx_finish();
}

TEST_IMPL(sub_reject_without_dead_letter_logged_and_acked) {
  fx_init("batch = 10");
  replay_expect(F.rb, NEW_READ,
                read_resp(false, ENTS(NE("1-0", "data", "{\"n\":1,\"reject\":\"nope\"}"),
                                      NE("2-0", "data", "{\"n\":2}"))));
  fx_run(80400);
  ASSERT_CONTAINS(logbuf,
                  "level=error handler=sub msg=\"entry rejected, acked (no dead_letter "
                  "stream)\" stream=payments group=ledger id=1-0 reason=rejected "
                  "deliveries=1 error=nope\n");
  /* acked with the others: nothing else to write */
  ASSERT_STR_EQ(cmd_log(), CREATE "\nXACK payments ledger 1-0 2-0\n");
  fx_finish();
}

#define CAPPED CLAIMING ", max_deliveries = 3, dead_letter = \"payments.dead\""

TEST_IMPL(sub_max_deliveries_claimed_dead_lettered_unhandled) {
  fx_init(CAPPED);
  replay_expect(F.rb, CLAIM_READ("10"),
                read_resp(true, ENTS(CE("1-0", 31000, 3, "data", "{\"n\":1}"),
                                     CE("2-0", 31000, 2, "data", "{\"n\":2}"),
                                     CE("3-0", 0, 0, "data", "{\"n\":3}"))));
  expect_outcomes(1);
  fx_run(80400);

  /* 1-0 was delivered 3 times before: the handler never sees it again */
  ASSERT_STR_EQ(got(), "id=2-0 deliveries=2 idle=31000 n=2\nid=3-0 deliveries=0 idle=0 n=3\n");
  ASSERT_STR_EQ(
      cmd_log(),
      CREATE "\n" OUTCOMES("payments") " 1-0 ack 1 21 XADD payments.dead * data {\"n\":1}" DL_HEAD(
          "1-0", "3") "max-deliveries dead-letter-error delivered 3 times without an ack" DL_TIME
                      "\n"
                      "XACK payments ledger 2-0 3-0\n");
  fx_finish();
}

/* Without a dead-letter stream the capped entry is logged and left pending:
 * never lost silently, never handled again. */
TEST_IMPL(sub_max_deliveries_without_dead_letter_left_pending) {
  fx_init(CLAIMING ", max_deliveries = 3");
  replay_expect(F.rb, CLAIM_READ("10"),
                read_resp(true, ENTS(CE("1-0", 31000, 3, "data", "{\"n\":1}"),
                                     CE("3-0", 0, 0, "data", "{\"n\":3}"))));
  fx_run(80400);
  ASSERT_STR_EQ(got(), "id=3-0 deliveries=0 idle=0 n=3\n");
  ASSERT_CONTAINS(logbuf,
                  "level=error handler=sub msg=\"delivery limit reached, entry left pending "
                  "(no dead_letter stream)\" stream=payments group=ledger id=1-0 "
                  "reason=max-deliveries deliveries=3 error=\"delivered 3 times without "
                  "an ack\"\n");
  ASSERT_STR_EQ(cmd_log(), CREATE "\nXACK payments ledger 3-0\n");
  fx_finish();
}

/* On `new` the count travels in the copies' delivery-count header. */
/* Copies on the retry stream carry their count (trusted there only). */
TEST_IMPL(sub_max_deliveries_new_copies) {
  fx_init("max_deliveries = 3, dead_letter = \"payments.dead\", batch = 10");
  replay_expect(F.rb, NEW_READ,
                read_resp_on(RETRY_KEY, false,
                             ENTS(NE("6-0", "data", "{\"n\":6,\"retry\":true}", "delivery-count",
                                     "2", "original-id", "5-0"),
                                  NE("7-0", "data", "{\"n\":7,\"retry\":true}", "delivery-count",
                                     "1", "original-id", "4-0"),
                                  NE("8-0", "data", "{\"n\":8}", "delivery-count", "3",
                                     "original-id", "3-0"))));
  expect_outcomes(3);
  fx_run(80400);

  /* 8-0 reached the cap before: dead-lettered as it was read, unhandled;
   * a dead letter names the source stream and the id there */
  ASSERT_STR_EQ(got(), "id=6-0 deliveries=2 n=6\nid=7-0 deliveries=1 n=7\n");
  ASSERT_STR_EQ(cmd_log(), CREATE "\n" OUTCOMES(RETRY_KEY)
                " 8-0 ack 1 25 XADD payments.dead * data {\"n\":8} delivery-count 3 "
                "original-id 3-0" DL_HEAD("3-0", "3") "max-deliveries dead-letter-error "
                "delivered 3 times without an ack" DL_TIME
                /* 6-0's retry was its third delivery: dead-lettered instead of copied */
                " 6-0 ack 1 25 XADD payments.dead * data {\"n\":6,\"retry\":true} delivery-count 2 "
                "original-id 5-0" DL_HEAD("5-0", "3") "max-deliveries "
                "dead-letter-error retried on delivery 3 of 3" DL_TIME
                /* 7-0's second: copied with the count, to the retry stream again */
                " 7-0 ack 1 9 XADD " RETRY_KEY " * data {\"n\":7,\"retry\":true} delivery-count 2 "
                "original-id 4-0\n");
  fx_finish();
}

TEST_IMPL(sub_handler_error_on_last_delivery_dead_lettered) {
  fx_init(CAPPED);
  replay_expect(F.rb, CLAIM_READ("10"),
                read_resp(true, ENTS(CE("1-0", 31000, 2, "data", "{\"n\":1,\"fail\":\"boom\"}"),
                                     CE("2-0", 31000, 1, "data", "{\"n\":2,\"fail\":\"boom\"}"))));
  expect_outcomes(1);
  fx_run(80400);

  ASSERT_CONTAINS(logbuf,
                  "msg=\"handler failed, entry left pending\" stream=payments "
                  "group=ledger id=1-0 reason=handler-error error=\"boom");
  ASSERT_CONTAINS(logbuf,
                  "msg=\"handler failed, entry left pending\" stream=payments "
                  "group=ledger id=2-0 reason=handler-error error=\"boom");
  ASSERT_CONTAINS(logbuf,
                  "msg=\"entry dead-lettered\" stream=payments group=ledger id=1-0 "
                  "reason=handler-error deliveries=3");
  ASSERT_STR_EQ(cmd_sent(0), "XGROUP CREATE payments ledger $ MKSTREAM");
  ASSERT_STR_EQ(cmd_sent(1), "XGROUP CREATE payments:retry:ledger ledger 0 MKSTREAM");
  /* the error that ended it, traceback included */
  const char *xadd = cmd_sent(2);
  const char *head = OUTCOMES("payments") " 1-0 ack 1 21 XADD payments.dead * data "
      "{\"n\":1,\"fail\":\"boom\"}" DL_HEAD("1-0", "3")
      "handler-error dead-letter-error boom\nstack traceback:\n";
  if (strncmp(xadd, head, strlen(head)) != 0) TEST_FAIL_("dead letter: %s", xadd);
  ASSERT(strlen(xadd) > strlen(DL_TIME));
  ASSERT_STR_EQ(xadd + strlen(xadd) - strlen(DL_TIME), DL_TIME);
  ASSERT_NULL(cmd_sent(3)); /* 2-0 (second delivery) stays pending */
  fx_finish();
}

TEST_IMPL(sub_bad_input_dead_lettered) {
  fx_init("dead_letter = \"payments.dead\", max_body = 10, batch = 10");
  replay_expect(
      F.rb, NEW_READ,
      read_resp(false, ENTS(NE("1-0", "data", "{nope"), NE("2-0", "data", "\"0123456789\""))));
  expect_outcomes(2);
  fx_run(80400);

  ASSERT_STR_EQ(got(), ""); /* the handler saw neither */
  /* 2-0 is over max_body as read: kept cut (whole here, under 1024 bytes)
   * and dead-lettered before anything runs, saying how large it was. */
  const char *call = cmd_sent(2);
  const char *head =
      OUTCOMES("payments") " 2-0 ack 1 23 XADD payments.dead * data \"0123456789\"" DL_HEAD(
          "2-0", "1") "too-large dead-letter-error body is 12 bytes, over max_body (10)" DL_TIME
                      " dead-letter-cut 80 1-0 ack 1 21 XADD payments.dead * data {nope" DL_HEAD(
                          "1-0", "1") "decode-error dead-letter-error body is not valid JSON: ";
  if (strncmp(call, head, strlen(head)) != 0) TEST_FAIL_("dead letter: %s", call);
  ASSERT_NULL(cmd_sent(3));
  ASSERT_CONTAINS(logbuf,
                  "level=warn handler=sub msg=\"entry dead-lettered\" stream=payments "
                  "group=ledger id=1-0 reason=decode-error");
  fx_finish();
}

/* A plain read's reply refused as too large (broker_redis' reply limit):
 * the entries it delivered are read again from the own pending list with
 * the script that cuts (the huge one dead-lettered cut), `>` with
 * SCRIPT_READ until a read brings no cut entry, then plain reads again. */
TEST_IMPL(sub_new_too_large_reads_cut_then_plain) {
  fx_init("dead_letter = \"payments.dead\", max_body = 10, batch = 10");
  fx_run(80400); /* the own pending list (empty), then `>`: pending */
  /* A plain read: no string over an entry's limit (max_body + 64 KB), the
   * reply no more than 2 keys x 10 entries of twice that. */
  size_t bulk_max = 0, reply_max = 0;
  ASSERT(replay_reply_limit(F.rb, READER, &bulk_max, &reply_max));
  ASSERT_INT_EQ(bulk_max, 10 + 65536);
  ASSERT_INT_EQ(reply_max, 2 * 10 * 2 * (10 + 65536));
#define OWN_10(c0) \
  "EVAL <own> 2 payments payments:retry:ledger ledger c-1 10 " c0 " 0-0 10 65546 1024 64"
  /* 5-0 comes cut: [id, fields, idle, deliveries, [body bytes, entry bytes]] */
  replay_expect(F.rb, OWN_10("0-0"),
                "*3\r\n*2\r\n$3\r\n5-0\r\n$3\r\n0-0\r\n*1\r\n*2\r\n$8\r\npayments\r\n*1\r\n"
                "*5\r\n$3\r\n5-0\r\n*2\r\n$4\r\ndata\r\n$4\r\nhuge\r\n:0\r\n:0\r\n"
                "*2\r\n:104857600\r\n:104857604\r\n*0\r\n");
  replay_expect(F.rb, OWN_10("5-0"), "*3\r\n*2\r\n$3\r\n5-0\r\n$3\r\n0-0\r\n*0\r\n*0\r\n");
#define FRESH_10 "EVAL <read> 2 payments payments:retry:ledger ledger c-1 10 10 65546 1024 64"
  replay_expect(F.rb, FRESH_10, read_resp(false, ENTS(NE("6-0", "data", "{\"n\":6}"))));
  expect_outcomes(1);
  replay_drop(F.rb,
              "reply too large: a string of 104857600 bytes, over this connection's "
              "limit of 65546 (redis test)");
  replay_restore(F.rb);
  settle();

  ASSERT_CONTAINS(logbuf,
                  "level=warn handler=sub msg=\"a read's reply was too large, reading "
                  "its entries again cut\" stream=payments group=ledger consumer=c-1 "
                  "error=\"reply too large: a string of 104857600 bytes");
  ASSERT_STR_EQ(got(), "id=6-0 n=6\n");
  ASSERT_STR_EQ(replay_log(F.rb, READER),
                "EVAL <own> 2 payments payments:retry:ledger ledger c-1 10 0-0 0-0 10 65546 1024 "
                "64\n" NEW_READ "\n" OWN_10("0-0") "\n" OWN_10(
                    "5-0") "\n" FRESH_10 "\n" /* none cut: plain again */ NEW_READ "\n");
  const char *call = cmd_sent(2);
  const char *head = OUTCOMES("payments") " 5-0 ack 1 23 XADD payments.dead * data huge" DL_HEAD(
      "5-0", "1") "too-large dead-letter-error body is 104857600 bytes, over max_body (10)";
  ASSERT_NOT_NULL(call);
  if (strncmp(call, head, strlen(head)) != 0) TEST_FAIL_("dead letter: %s", call);
  ASSERT_CONTAINS(call, "dead-letter-cut");
#undef OWN_10
#undef FRESH_10
  fx_finish();
}

TEST_IMPL(sub_bad_input_without_dead_letter_left_pending) {
  fx_init("batch = 10");
  replay_expect(F.rb, NEW_READ,
                read_resp(false, ENTS(NE("1-0", "data", "{nope"), NE("2-0", "data", "{\"n\":2}"))));
  fx_run(80400);
  ASSERT_CONTAINS(logbuf,
                  "level=error handler=sub msg=\"bad entry left pending\" "
                  "stream=payments group=ledger id=1-0 reason=decode-error");
  ASSERT_STR_EQ(cmd_log(), CREATE "\nXACK payments ledger 2-0\n");
  fx_finish();
}

/* ================================================================ retry_after */

TEST_IMPL(sub_retry_after_claiming) {
  fx_init(CLAIMING); /* min_idle 30000 */
  replay_expect(F.rb, CLAIM_READ("10"),
                read_resp(true, ENTS(CE("1-0", 31000, 1, "data", "{\"n\":1,\"after\":5000}"),
                                     CE("2-0", 30000, 1, "data", "{\"n\":2,\"after\":\"30s\"}"),
                                     CE("3-0", 0, 0, "data", "{\"n\":3,\"after\":\"1m\"}"))));
  expect_outcomes(3);
  fx_run(80400);

  /* Within min_idle: left pending (so only while still pending), re-stamped
   * to turn claimable after the delay (idle min_idle - delay), not acked.
   * Longer: the delay set. */
  ASSERT_STR_EQ(cmd_log(), CREATE "\n" OUTCOMES("payments")
                " 1-0 pending 1 9 XCLAIM payments ledger c-1 0 1-0 IDLE 25000 JUSTID"
                " 2-0 pending 1 9 XCLAIM payments ledger c-1 0 2-0 IDLE 0 JUSTID"
                " 3-0 ack 1 4 ZADD payments:delayed:ledger 1700000060000 "
                "3:3-04:data20:{\"n\":3,\"after\":\"1m\"}14:delivery-count1:1"
                "11:original-id3:3-0\n");
  ASSERT_NULL(strstr(logbuf, "level=error"));
  fx_finish();
}

TEST_IMPL(sub_retry_after_new_moves_to_delay_set) {
  fx_init("batch = 10");
  replay_expect(
      F.rb, NEW_READ,
      read_resp(
          false,
          ENTS(NE("5-0", "data", "{\"n\":5,\"after\":2500}", "partition-key", "acct-7"),
               NE("6-0", "data", "{\"n\":6,\"after\":\"1m\"}", "delivery-count", "2",
                  "partition-key", "acct-7", "retry-group", "ledger", "original-id", "5-0"))));
  expect_outcomes(2);
  fx_run(80400);

  /* due = wall + delay; the member: netstrings of the id, the fields, then
   * delivery-count (this delivery included), original-id */
  ASSERT_STR_EQ(cmd_log(), CREATE "\n" OUTCOMES("payments")
                " 5-0 ack 1 4 ZADD payments:delayed:ledger 1700000002500 "
                "3:5-04:data20:{\"n\":5,\"after\":2500}13:partition-key6:acct-7"
                "14:delivery-count1:111:original-id3:5-0"
                /* luastream's header names written by a producer on the shared
                 * stream: not believed (count 1, its own id) and not carried */
                " 6-0 ack 1 4 ZADD payments:delayed:ledger 1700000060000 "
                "3:6-04:data20:{\"n\":6,\"after\":\"1m\"}13:partition-key6:acct-7"
                "14:delivery-count1:111:original-id3:6-0\n");
  ASSERT_NULL(strstr(logbuf, "level=error"));
  fx_finish();
}

/* ================================================================ the sweeper */

#define SWEEP(now)                                                \
  "EVAL <sweep> 3 payments:delayed:ledger payments:retry:ledger " \
  "payments:delayed:ledger:unreadable " now " 100 ledger"

static size_t nsweeps(void) {
  size_t n = 0;
  for (size_t k = 0; k < replay_nsent(F.rb, "cmd"); k++)
    n += strncmp(replay_sent(F.rb, "cmd", k), "EVAL <sweep> ", 13) == 0;
  return n;
}

TEST_IMPL(sub_sweeper_sweeps_when_due_else_every_minute) {
  fx_init("batch = 10");
  log_set_level(LOG_DEBUG);
  /* another host's delay, due at 65 s */
  replay_expect(F.rb, SWEEP("1700000060000"), "*4\r\n:0\r\n:0\r\n:0\r\n:1700000065000\r\n");
  /* then many due at once: the most one sweep moves */
  replay_expect(F.rb, SWEEP("1700000065000"), "*4\r\n:100\r\n:0\r\n:0\r\n:1700000065000\r\n");
  replay_expect(F.rb, SWEEP("1700000125000"), "-ERR something broke\r\n");
  /* the first left is due in an hour: a minute is the longest wait */
  replay_expect(F.rb, SWEEP("1700000126000"), "*4\r\n:0\r\n:0\r\n:0\r\n:1700003600000\r\n");
  fx_run(80400);

  /* at start, right after the group exists; the set is empty */
  ASSERT_STR_EQ(replay_log(F.rb, "cmd"), CREATE "\n" SWEEP("1700000000000") "\n");
  ASSERT_INT_EQ(clock_now(F.clk), 900);
  clock_virtual_advance(F.clk, 59099); /* 59,999 */
  ASSERT_INT_EQ(nsweeps(), 1);
  clock_virtual_advance(F.clk, 1); /* 60,000: a minute later */
  ASSERT_INT_EQ(nsweeps(), 2);
  ASSERT_STR_EQ(replay_sent(F.rb, "cmd", 3), SWEEP("1700000060000"));
  /* 65,000: when the member left falls due */
  clock_virtual_advance(F.clk, 4999);
  ASSERT_INT_EQ(nsweeps(), 2);
  clock_virtual_advance(F.clk, 1);
  ASSERT_INT_EQ(nsweeps(), 4); /* it moved 100: at once again */
  ASSERT_STR_EQ(replay_sent(F.rb, "cmd", 4), SWEEP("1700000065000"));
  ASSERT_STR_EQ(replay_sent(F.rb, "cmd", 5), SWEEP("1700000065000"));
  ASSERT_CONTAINS(logbuf,
                  "level=debug handler=sub msg=\"delayed entries back on the retry stream\" "
                  "stream=payments group=ledger consumer=c-1 entries=100\n");
  /* that one found the set empty: a minute; 125,000: an error is logged and
   * the sweep tried again a second later */
  clock_virtual_advance(F.clk, 59999);
  ASSERT_INT_EQ(nsweeps(), 4);
  clock_virtual_advance(F.clk, 1);
  ASSERT_INT_EQ(nsweeps(), 5);
  ASSERT_CONTAINS(logbuf,
                  "level=warn handler=sub msg=\"the delay-set sweep failed, "
                  "retrying\" stream=payments group=ledger consumer=c-1 command=EVAL "
                  "script=\"the delay-set sweep\" keys=\"payments:delayed:ledger "
                  "payments:retry:ledger payments:delayed:ledger:unreadable\" "
                  "error=\"ERR something broke\"\n");
  clock_virtual_advance(F.clk, 1000);
  ASSERT_INT_EQ(nsweeps(), 6);
  ASSERT_STR_EQ(replay_sent(F.rb, "cmd", 7), SWEEP("1700000126000"));
  clock_virtual_advance(F.clk, 59999);
  ASSERT_INT_EQ(nsweeps(), 6);
  clock_virtual_advance(F.clk, 1);
  ASSERT_INT_EQ(nsweeps(), 7);
  ASSERT_STR_EQ(replay_sent(F.rb, "cmd", 8), SWEEP("1700000186000"));
  /* stopped: no more */
  sub_stop(F.s);
  clock_virtual_advance(F.clk, 120000);
  ASSERT_INT_EQ(nsweeps(), 7);
  ASSERT_INT_EQ(F.drained, 1);
  fx_finish();
}

/* Members the sweep could not read are its server's to move aside; the host
 * says how many and where they went (and how many acknowledged entries the
 * sweep trimmed from the retry stream), and sweeps on. */
TEST_IMPL(sub_sweeper_reports_unreadable_members) {
  fx_init("batch = 10");
  log_set_level(LOG_DEBUG);
  replay_expect(F.rb, SWEEP("1700000000000"), "*4\r\n:3\r\n:1\r\n:5\r\n:-1\r\n");
  fx_run(80400); /* the sweep at start */
  ASSERT_INT_EQ(nsweeps(), 1);
  ASSERT_CONTAINS(logbuf,
                  "level=debug handler=sub msg=\"delayed entries back on the retry stream\" "
                  "stream=payments group=ledger consumer=c-1 entries=2\n");
  ASSERT_CONTAINS(logbuf,
                  "level=debug handler=sub msg=\"acknowledged entries trimmed from the "
                  "retry stream\" stream=payments group=ledger consumer=c-1 entries=5 "
                  "retry_stream=payments:retry:ledger\n");
  ASSERT_CONTAINS(logbuf,
                  "level=error handler=sub msg=\"unreadable members of the delay set "
                  "moved aside, not delivered\" stream=payments group=ledger members=1 "
                  "moved_to=payments:delayed:ledger:unreadable\n");
  clock_virtual_advance(F.clk, 59100); /* the next sweep, a minute later: the set is empty */
  ASSERT_INT_EQ(nsweeps(), 2);
  sub_stop(F.s);
  clock_virtual_advance(F.clk, 5000);
  fx_finish();
}

/* ================================================================ failed transactions */

/* A write refused (here by the ACL) while the XACK went through: the log
 * says the entry was acked and names the refused command, its key and
 * Redis's error, not that it was left pending. */
TEST_IMPL(sub_outcome_write_refused_reported_as_acked) {
  fx_init("dead_letter = \"payments.dead\", batch = 10");
  replay_expect(F.rb, NEW_READ,
                read_resp(false, ENTS(NE("1-0", "data", "{\"n\":1,\"reject\":\"no\"}"))));
#define NOPERM "1 NOPERM this user has no permissions to access one of the keys used as arguments"
  char resp[256];
  snprintf(resp, sizeof resp, "*1\r\n$%zu\r\n%s\r\n", strlen(NOPERM), NOPERM);
#undef NOPERM
  replay_expect(F.rb, "EVAL <outcome> **", resp);
  fx_run(80400);
  ASSERT_CONTAINS(logbuf,
                  "level=error handler=sub msg=\"outcome partly written: entry acked, a "
                  "write failed\" stream=payments group=ledger id=1-0 "
                  "outcome=\"dead letter\" command=XADD key=payments.dead "
                  "error=\"NOPERM this user has no permissions to access one of the "
                  "keys used as arguments\"\n");
  if (strstr(logbuf, "entry left pending"))
    TEST_FAIL_("an acked entry whose dead letter failed is logged as left pending:\n%s", logbuf);
  fx_finish();
}

/* The ack itself refused (the group gone): nothing written, entry pending;
 * an entry another consumer acknowledged first: its effects skipped, said
 * at warn. Each entry of one call answered on its own. */
TEST_IMPL(sub_outcome_per_entry_answers) {
  fx_init("reply_to = \"payments.replies\", batch = 10");
  replay_expect(F.rb, NEW_READ,
                read_resp(false, ENTS(NE("1-0", "data", "{\"n\":1,\"reply\":true}"),
                                      NE("2-0", "data", "{\"n\":2,\"reply\":true}"),
                                      NE("3-0", "data", "{\"n\":3,\"reply\":true}"))));
  replay_expect(F.rb, "EVAL <outcome> **",
                "*3\r\n$33\r\n0 NOGROUP No such key or consumer\r\n:0\r\n:1\r\n");
  fx_run(80400);
  ASSERT_CONTAINS(logbuf,
                  "level=error handler=sub msg=\"outcome not written, entry left "
                  "pending\" stream=payments group=ledger id=1-0 outcome=reply "
                  "command=XACK key=payments error=\"NOGROUP No such key or consumer\"\n");
  ASSERT_CONTAINS(logbuf,
                  "level=warn handler=sub msg=\"already acknowledged by another "
                  "consumer; effects skipped\" stream=payments group=ledger "
                  "consumer=c-1 id=2-0 outcome=reply\n");
  ASSERT_NULL(strstr(logbuf, "id=3-0 outcome"));
  fx_finish();
}

/* The RESP of SCRIPT_OWN: the cursor per key, then the entries of the
 * stream and of the retry stream (idle, deliveries before), a key only when
 * it gave entries. Valid until the test ends. */
static const char *own_resp(const char *c0, const char *c1, const struct ent *se, size_t ns,
                            const struct ent *re, size_t nr) {
  static char bufs[2][16384];
  static int next;
  char *out = bufs[next++ % 2], *o = out, *end = out + sizeof bufs[0];
  o += snprintf(o, (size_t)(end - o), "*3\r\n*2\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n*%d\r\n", strlen(c0),
                c0, strlen(c1), c1, (ns > 0) + (nr > 0));
  /* read_resp_on's reply holds one [key, entries] pair after its "*1\r\n" */
  if (ns) o += snprintf(o, (size_t)(end - o), "%s", read_resp_on("payments", true, se, ns) + 4);
  if (nr) o += snprintf(o, (size_t)(end - o), "%s", read_resp_on(RETRY_KEY, true, re, nr) + 4);
  o += snprintf(o, (size_t)(end - o), "*0\r\n");
  ASSERT(o < end);
  return out;
}
#define NO_ENTS NULL, 0

/* `new` reads its own pending list before `>`: entries delivered to this
 * consumer earlier (a host back under the same name, a read reply lost with
 * the connection) are handled and acked, page by page, then `>` goes on. The
 * handler sees the deliveries before this one, as on a claiming read. */
TEST_IMPL(sub_new_reads_own_pending_list_first) {
  fx_init("batch = 10");
  replay_expect(F.rb, "EVAL <own> 2 payments payments:retry:ledger ledger c-1 10 0-0 0-0" LIMITS,
                own_resp("4-0", "0-0",
                         ENTS(CE("3-0", 5000, 1, "data", "{\"n\":3}"),
                              CE("4-0", 5000, 2, "data", "{\"n\":4}")),
                         NO_ENTS));
  /* Both cursors back as sent: the list is read to its end. */
  replay_expect(F.rb, "EVAL <own> 2 payments payments:retry:ledger ledger c-1 10 4-0 0-0" LIMITS,
                own_resp("4-0", "0-0", NO_ENTS, NO_ENTS));
  fx_run(80400);
  ASSERT_STR_EQ(got(), "id=3-0 deliveries=1 idle=5000 n=3\nid=4-0 deliveries=2 idle=5000 n=4\n");
  ASSERT_CONTAINS(logbuf, "msg=\"entries delivered here earlier and never acked, handled now\"");
  /* the next page waited for the acks of the first; then `>` */
  ASSERT_STR_EQ(replay_log(F.rb, READER),
                "EVAL <own> 2 payments payments:retry:ledger ledger c-1 10 0-0 0-0" LIMITS
                "\n"
                "EVAL <own> 2 payments payments:retry:ledger ledger c-1 10 4-0 0-0" LIMITS
                "\n" NEW_READ "\n");
  ASSERT_STR_EQ(cmd_log(), CREATE "\nXACK payments ledger 3-0 4-0\n");
  fx_finish();
}

/* A page of the own pending list may hold only entries deleted from the
 * stream (the script reads past them and moves the cursor): reading goes
 * on until the cursors stop moving. */
TEST_IMPL(sub_new_own_pending_list_read_past_deleted_entries) {
  fx_init("batch = 10");
  replay_expect(F.rb, "EVAL <own> 2 payments payments:retry:ledger ledger c-1 10 0-0 0-0" LIMITS,
                own_resp("2-0", "0-0", NO_ENTS, NO_ENTS));
  replay_expect(F.rb, "EVAL <own> 2 payments payments:retry:ledger ledger c-1 10 2-0 0-0" LIMITS,
                own_resp("3-0", "0-0", ENTS(CE("3-0", 5000, 1, "data", "{\"n\":3}")), NO_ENTS));
  replay_expect(F.rb, "EVAL <own> 2 payments payments:retry:ledger ledger c-1 10 3-0 0-0" LIMITS,
                own_resp("3-0", "0-0", NO_ENTS, NO_ENTS));
  fx_run(80400);
  ASSERT_STR_EQ(got(), "id=3-0 deliveries=1 idle=5000 n=3\n");
  ASSERT_STR_EQ(replay_log(F.rb, READER),
                "EVAL <own> 2 payments payments:retry:ledger ledger c-1 10 0-0 0-0" LIMITS
                "\n"
                "EVAL <own> 2 payments payments:retry:ledger ledger c-1 10 2-0 0-0" LIMITS
                "\n"
                "EVAL <own> 2 payments payments:retry:ledger ledger c-1 10 3-0 0-0" LIMITS
                "\n" NEW_READ "\n");
  fx_finish();
}

/* max_deliveries on the own pending list, as on claimed entries: Redis's
 * count of the id, plus the carried delivery-count on the retry stream only
 * (a producer's on the stream is data). Entries at the cap are dead-lettered
 * without running: a host that a handler kills on every delivery stops
 * crashing once the same name has read the entry max_deliveries times. */
TEST_IMPL(sub_new_own_pending_list_counts_deliveries) {
  fx_init("max_deliveries = 3, dead_letter = \"payments.dead\", batch = 10");
  replay_expect(F.rb, "EVAL <own> 2 payments payments:retry:ledger ledger c-1 10 0-0 0-0" LIMITS,
                own_resp("5-0", "9-0",
                         ENTS(CE("3-0", 40000, 3, "data", "{\"n\":3}"),
                              CE("5-0", 40000, 1, "data", "{\"n\":5}", "delivery-count", "999")),
                         ENTS(CE("8-0", 40000, 1, "data", "{\"n\":8}", "delivery-count", "1",
                                 "original-id", "2-0"),
                              CE("9-0", 40000, 1, "data", "{\"n\":9}", "delivery-count", "2",
                                 "original-id", "4-0"))));
  replay_expect(F.rb, "EVAL <own> 2 payments payments:retry:ledger ledger c-1 10 5-0 9-0" LIMITS,
                own_resp("5-0", "9-0", NO_ENTS, NO_ENTS));
  expect_outcomes(1);
  expect_outcomes(1);
  fx_run(80400);

  ASSERT_STR_EQ(got(), "id=5-0 deliveries=1 idle=40000 n=5\nid=8-0 deliveries=2 idle=40000 n=8\n");
  ASSERT_CONTAINS(
      cmd_log(),
      OUTCOMES("payments") " 3-0 ack 1 21 XADD payments.dead * data {\"n\":3}" DL_HEAD(
          "3-0", "3") "max-deliveries dead-letter-error delivered 3 times without an ack" DL_TIME
                      "\n");
  ASSERT_CONTAINS(cmd_log(), OUTCOMES(RETRY_KEY)
                  " 9-0 ack 1 25 XADD payments.dead * data {\"n\":9} delivery-count 2 "
                  "original-id 4-0" DL_HEAD("4-0", "3") "max-deliveries dead-letter-error "
                  "delivered 3 times without an ack" DL_TIME "\n");
  ASSERT_CONTAINS(cmd_log(), "XACK payments ledger 5-0\n");
  ASSERT_CONTAINS(cmd_log(), "XACK " RETRY_KEY " ledger 8-0\n");
  fx_finish();
}

/* ================================================================ read-ahead */

/* A `new` subscription sends its next read of `>` before it runs the batch
 * just read, asking for a whole batch: the server answers it while the
 * handlers work. */
TEST_IMPL(sub_new_reads_ahead_before_the_batch_runs) {
  fx_init("batch = 10");
  replay_expect(
      F.rb, NEW_READ,
      read_resp(false, ENTS(NE("1-0", "data", "{\"n\":1}"), NE("2-0", "data", "{\"n\":2}"),
                            NE("3-0", "data", "{\"n\":3}"))));
  /* The read ahead: nobody answers, it stays blocked. */
  fx_run(80400);

  ASSERT_STR_EQ(got(), "id=1-0 n=1\nid=2-0 n=2\nid=3-0 n=3\n");
  /* When the first entry's handler ran, the read after its batch was out. */
  ASSERT_INT_EQ(ngot, 3);
  ASSERT_INT_EQ(reads_at_got[0], 3);
  ASSERT_STR_EQ(replay_log(F.rb, READER),
                "EVAL <own> 2 payments payments:retry:ledger ledger c-1 10 0-0 0-0" LIMITS
                "\n" NEW_READ "\n" NEW_READ "\n");
  ASSERT_STR_EQ(cmd_log(), CREATE "\nXACK payments ledger 1-0 2-0 3-0\n");
  fx_finish();
}

/* Handlers that finish at once are started for DISPATCH_SLICE_MS (50 ms) of
 * the loop's time, then the loop turns (I/O, timers, the watchdog's beat)
 * before the rest start: here each step takes 10 ms, so the first five of a
 * read of 8 entries run and their acks go out before the other three start
 * (all in one go, they would be acked together). */
TEST_IMPL(sub_dispatch_lets_the_loop_turn) {
  busy_cpu = true;
  fx_init("batch = 10, workers = 10");
  replay_expect(
      F.rb, NEW_READ,
      read_resp(false, ENTS(NE("1-0", "data", "{\"n\":1}"), NE("2-0", "data", "{\"n\":2}"),
                            NE("3-0", "data", "{\"n\":3}"), NE("4-0", "data", "{\"n\":4}"),
                            NE("5-0", "data", "{\"n\":5}"), NE("6-0", "data", "{\"n\":6}"),
                            NE("7-0", "data", "{\"n\":7}"), NE("8-0", "data", "{\"n\":8}"))));
  fx_run(80400);
  ASSERT_INT_EQ(ngot, 8);
  ASSERT_STR_EQ(got(),
                "id=1-0 n=1\nid=2-0 n=2\nid=3-0 n=3\nid=4-0 n=4\nid=5-0 n=5\nid=6-0 "
                "n=6\nid=7-0 n=7\nid=8-0 n=8\n");
  ASSERT_STR_EQ(cmd_log(), CREATE
                "\nXACK payments ledger 1-0 2-0 3-0 4-0 5-0\n"
                "XACK payments ledger 6-0 7-0 8-0\n");
  fx_finish();
}

/* Reading ahead holds at most 2 x batch entries: the next batch is asked for
 * only while at most one batch is in the lanes. */
TEST_IMPL(sub_new_holds_at_most_two_batches) {
  fx_init("batch = 4"); /* one worker: the entries run one after another */
#define READ4 NEW_READ_N("4")
#define SLOW(id, n) NE(id, "data", "{\"n\":" #n ",\"sleep\":1000}")
  replay_expect(
      F.rb, READ4,
      read_resp(false, ENTS(SLOW("1-0", 1), SLOW("2-0", 2), SLOW("3-0", 3), SLOW("4-0", 4))));
  replay_expect(
      F.rb, READ4,
      read_resp(false, ENTS(SLOW("5-0", 5), SLOW("6-0", 6), SLOW("7-0", 7), SLOW("8-0", 8))));
#undef SLOW
  fx_run(80400); /* 1-0 runs until 1000 ms */
  /* 8 held, 2 x batch: no third read. */
  ASSERT_INT_EQ(replay_nsent(F.rb, READER), 3);
  clock_virtual_advance(F.clk, 2200);
  /* 1-0 .. 3-0 finished: 5 held, still more than a batch. */
  ASSERT_STR_EQ(got(), "id=1-0 n=1\nid=2-0 n=2\nid=3-0 n=3\nid=4-0 n=4\n");
  ASSERT_INT_EQ(replay_nsent(F.rb, READER), 3);
  clock_virtual_advance(F.clk, 1000);
  /* 4-0 finished: 4 held, so a batch more may come. */
  ASSERT_INT_EQ(replay_nsent(F.rb, READER), 4);
  ASSERT_STR_EQ(replay_sent(F.rb, READER, 3), READ4);
#undef READ4
  sub_stop(F.s); /* 5-0 runs on; 6-0 .. 8-0 are given back through the retry stream */
  clock_virtual_advance(F.clk, 2000);
  const char *given = NULL;
  for (size_t k = 0; k < replay_nsent(F.rb, "cmd"); k++)
    if (strncmp(replay_sent(F.rb, "cmd", k), "EVAL <handback_retry> ", 22) == 0)
      given = replay_sent(F.rb, "cmd", k);
#define COPY(id, n) \
  " 1 " id " 6 data {\"n\":" #n ",\"sleep\":1000} delivery-count 0 original-id " id
  ASSERT_STR_EQ(given, "EVAL <handback_retry> 2 payments payments:retry:ledger ledger c-1" COPY(
                           "6-0", 6) COPY("7-0", 7) COPY("8-0", 8));
#undef COPY
  fx_finish();
}

/* At most one batch of outcomes is written while reading goes on: with every
 * reply unanswered (nothing answers the outcome script), reading stops after
 * three batches (one handled and being written, one more handled, one read
 * ahead of it) instead of reading the whole backlog into memory. */
TEST_IMPL(sub_new_reading_waits_for_unwritten_outcomes) {
  fx_init("reply_to = \"payments.replies\", batch = 4");
#define READ4 NEW_READ_N("4")
#define REPLY(id, n) NE(id, "data", "{\"n\":" #n ",\"reply\":true}")
  replay_expect(
      F.rb, READ4,
      read_resp(false, ENTS(REPLY("1-0", 1), REPLY("2-0", 2), REPLY("3-0", 3), REPLY("4-0", 4))));
  replay_expect(
      F.rb, READ4,
      read_resp(false, ENTS(REPLY("5-0", 5), REPLY("6-0", 6), REPLY("7-0", 7), REPLY("8-0", 8))));
  replay_expect(F.rb, READ4,
                read_resp(false, ENTS(REPLY("9-0", 9), REPLY("10-0", 10), REPLY("11-0", 11),
                                      REPLY("12-0", 12))));
#undef REPLY
#undef READ4
  fx_run(80400);
  int ran = 0; /* every handler ran and returned its reply */
  for (const char *p = logbuf; (p = strstr(p, " msg=got ")) != NULL; p++) ran++;
  ASSERT_INT_EQ(ran, 12);
  /* 12 replies unwritten, 3 x batch: the own-list read and three batches, no fourth. */
  ASSERT_INT_EQ(replay_nsent(F.rb, READER), 4);
  clock_virtual_advance(F.clk, 5000);
  ASSERT_INT_EQ(replay_nsent(F.rb, READER), 4);

  sub_stop(F.s);
  size_t unacked;
  ASSERT_INT_EQ(sub_abandon(F.s, &unacked), 0);
  bk_conn_close(F.b, F.cmd); /* the replies' commands end with "connection closed" */
  settle();
  ASSERT_INT_EQ(F.drained, 1);
  sub_free(F.s);
  broker_free(F.b);
  F.clk->ops->free(F.clk);
  reads_rb = NULL;
  busy_cpu = false;
  log_set_sink(NULL, NULL);
  LEAK_CHECK();
}
