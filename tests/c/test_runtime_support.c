/* Support for the runtime tests (test_runtime_*.c, test_jobs.c): handler
 * files in a temporary folder, loaded and bound; entries run with their
 * results copied out of the done callback; a libuv loop each test owns and
 * closes; log capture; handler files several topics share. */
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

/* ---- handler files in a temporary folder ---- */

static char tmpdir[64];
static char files[MAX_FILES][256];
static size_t nfiles;

static void tmp_cleanup(void) {
  for (size_t i = 0; i < nfiles; i++) unlink(files[i]);
  nfiles = 0;
  if (tmpdir[0]) rmdir(tmpdir);
  tmpdir[0] = '\0';
}

/* Writes len bytes to DIR/name and returns the path (valid for the test). */
const char *write_bytes(const char *name, const char *text, size_t len) {
  if (tmpdir[0] == '\0') {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lsrt.XXXXXX");
    ASSERT_NOT_NULL(mkdtemp(tmpdir));
    atexit(tmp_cleanup);
    unsetenv("LUASTREAM_LUA_DIR"); /* the compiled-in lua/ folder */
  }
  ASSERT(nfiles < MAX_FILES);
  char *path = files[nfiles++];
  snprintf(path, sizeof files[0], "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "wb");
  ASSERT_NOT_NULL(f);
  ASSERT_INT_EQ(fwrite(text, 1, len, f), len);
  ASSERT_OK(fclose(f));
  return path;
}

const char *write_file(const char *name, const char *text) {
  return write_bytes(name, text, strlen(text));
}

char load_error[8192];

/* Loads text as DIR/name and expects it to fail; returns the message. */
const char *load_err(const char *name, const char *text, const char **path_out) {
  const char *path = write_file(name, text);
  if (path_out) *path_out = path;
  handler *h = (handler *)0x1;
  load_error[0] = '\0';
  ASSERT_INT_EQ(handler_load(path, NULL, &h, load_error, sizeof load_error), -1);
  ASSERT(h == (handler *)0x1); /* *out untouched on failure */
  return load_error;
}

/* Loads and binds text as DIR/name (consumer "c-1"). */
handler *load_ok(const char *name, const char *text, const struct rt_env *env) {
  const char *path = write_file(name, text);
  handler *h = NULL;
  load_error[0] = '\0';
  int rc = handler_load(path, env, &h, load_error, sizeof load_error);
  if (rc != 0) TEST_FAIL_("handler_load(%s) failed: %s", name, load_error);
  ASSERT_NOT_NULL(h);
  ASSERT_OK(handler_bind(h, "c-1"));
  return h;
}

/* "DIR/name:line: msg" */
const char *at(const char *path, int line, const char *msg) {
  static char buf[4][1024];
  static int next;
  char *b = buf[next++ % 4];
  snprintf(b, sizeof buf[0], "%s:%d: %s", path, line, msg);
  return b;
}

/* ---- entries and results ---- */

int completions;

static void copy_str(char *dst, size_t cap, const char *s, size_t len) {
  ASSERT(len < cap);
  memcpy(dst, s, len);
  dst[len] = '\0';
}

static void copy_write(struct cwrite *w, const struct rt_write *in) {
  ASSERT(in->argc >= 2);
  copy_str(w->cmd, sizeof w->cmd, in->argv[0], in->argvlen[0]);
  copy_str(w->stream, sizeof w->stream, in->argv[1], in->argvlen[1]);
  size_t first = 2;
  if (strcmp(w->cmd, "XADD") == 0) {
    ASSERT(in->argc >= 3 && strcmp(in->argv[2], "*") == 0);
    ASSERT_INT_EQ((in->argc - 3) % 2, 0);
    first = 3;
  }
  ASSERT(in->argc - first <= MAX_FIELDS);
  w->nfields = in->argc - first;
  for (size_t i = 0; i < w->nfields; i++) {
    ASSERT_NOT_NULL(in->argv[first + i]);
    copy_str(w->field[i], sizeof w->field[i], in->argv[first + i], in->argvlen[first + i]);
    w->field_len[i] = in->argvlen[first + i];
  }
}

void on_done(void *data, struct entry *e, const struct rt_result *res) {
  struct captured *c = data;
  c->calls++;
  c->order = ++completions;
  c->e = e;
  c->kind = res->kind;
  c->has_text = res->text != NULL;
  if (res->text) {
    copy_str(c->text, sizeof c->text, res->text, res->text_len);
    ASSERT_INT_EQ(strlen(c->text), res->text_len);
  }
  c->text_len = res->text_len;
  c->has_reason = res->reason != NULL;
  if (res->reason) copy_str(c->reason, sizeof c->reason, res->reason, strlen(res->reason));
  c->delay_ms = res->delay_ms;
  ASSERT(res->nwrites <= MAX_WRITES);
  ASSERT(res->nwrites == 0 || res->writes != NULL);
  c->nwrites = res->nwrites;
  for (size_t w = 0; w < res->nwrites; w++) copy_write(&c->writes[w], &res->writes[w]);
  /* Only acks and replies carry writes; a reply is the last of them. */
  if (res->kind != RT_ACK && res->kind != RT_REPLY) ASSERT_INT_EQ(res->nwrites, 0);
  c->has_stream = res->kind == RT_REPLY;
  c->nfields = 0;
  if (res->kind == RT_REPLY) {
    ASSERT(res->nwrites >= 1);
    const struct cwrite *last = &c->writes[res->nwrites - 1];
    memcpy(c->stream, last->stream, sizeof c->stream);
    c->nfields = last->nfields;
    memcpy(c->field, last->field, sizeof c->field);
    memcpy(c->field_len, last->field_len, sizeof c->field_len);
  }
}

/* Runs one entry that must finish before handler_run returns. */
struct captured run_sync(handler *h, struct entry *e) {
  struct captured c;
  memset(&c, 0, sizeof c);
  ASSERT_OK(handler_run(h, e, on_done, &c));
  ASSERT_INT_EQ(c.calls, 1);
  ASSERT(c.e == e);
  ASSERT_INT_EQ(handler_jobs(h), 0);
  return c;
}

/* Runs a one-field entry {data = json} and returns the result. */
struct captured run_json(handler *h, const char *id, const char *json) {
  struct entry *e = mk_entry(id, "data", json, NULL);
  struct captured c = run_sync(h, e);
  entry_free(e);
  return c;
}

void expect_plain(const struct captured *c, enum rt_outcome kind) {
  ASSERT_INT_EQ(c->kind, kind);
  ASSERT(!c->has_text);
  ASSERT(!c->has_reason);
  ASSERT(!c->has_stream);
  ASSERT_INT_EQ(c->nfields, 0);
  ASSERT_INT_EQ(c->nwrites, 0);
  ASSERT_INT_EQ(c->delay_ms, 0);
}

void expect_fail(const struct captured *c, enum rt_outcome kind, const char *reason) {
  ASSERT_INT_EQ(c->kind, kind);
  ASSERT(c->has_reason);
  ASSERT_STR_EQ(c->reason, reason);
  ASSERT(c->has_text);
  ASSERT(!c->has_stream);
  ASSERT_INT_EQ(c->nfields, 0);
  ASSERT_INT_EQ(c->nwrites, 0);
}

/* A reply whose only content is `data` = json, plus original-id = id. */
void expect_reply(const struct captured *c, const char *stream, const char *json, const char *id) {
  ASSERT_INT_EQ(c->kind, RT_REPLY);
  ASSERT_INT_EQ(c->nwrites, 1); /* the reply alone */
  ASSERT_STR_EQ(c->stream, stream);
  ASSERT(!c->has_reason);
  ASSERT(!c->has_text);
  ASSERT_INT_EQ(c->nfields, 6);
  ASSERT_STR_EQ(c->field[0], "data");
  ASSERT_STR_EQ(c->field[1], json);
  ASSERT_STR_EQ(c->field[2], "original-id");
  ASSERT_STR_EQ(c->field[3], id);
  ASSERT_STR_EQ(c->field[4], "handler-version"); /* the script version that replied */
  ASSERT_INT_EQ(strlen(c->field[5]), 8);
}

/* ---- libuv loop and clock ---- */

static void noop_close(uv_handle_t *hd) { (void)hd; }
static void close_any(uv_handle_t *hd, void *arg) {
  (void)arg;
  if (!uv_is_closing(hd)) uv_close(hd, noop_close);
}

void loop_finish(uv_loop_t *loop, lclock *clk) {
  clk->ops->free(clk);
  uv_walk(loop, close_any, NULL);
  ASSERT_OK(uv_run(loop, UV_RUN_DEFAULT));
  ASSERT_OK(uv_loop_close(loop));
}

/* ---- log capture ---- */

char logbuf[65536];
size_t log_len;
int log_lines;

/* The last script version strip_versions took out of a captured line. */
char last_version[16];

static void log_capture(void *data, enum log_level level, const char *line, size_t len) {
  (void)level;
  ASSERT(data == &log_lines);
  ASSERT(log_len + len + 2 < sizeof logbuf);
  log_len += strip_versions(logbuf + log_len, line, len, last_version);
  logbuf[log_len++] = '\n';
  logbuf[log_len] = '\0';
  log_lines++;
}

void log_capture_start(void) {
  log_len = 0;
  logbuf[0] = '\0';
  log_lines = 0;
  log_set_sink(log_capture, &log_lines);
}

/* ---- shared handler files ---- */

/* msg.mode picks what handle returns; line numbers matter for tracebacks. */
const char MODES[] =
    "local ls = require \"luastream\"\n"                                             /* 1 */
    "local modes = {\n"                                                              /* 2 */
    "  none = function() end,\n"                                                     /* 3 */
    "  ack = function() return ls.ack() end,\n"                                      /* 4 */
    "  rawack = function() return { ack = true } end,\n"                             /* 5 */
    "  retry = function() return ls.retry() end,\n"                                  /* 6 */
    "  rawretry = function() return { retry = true } end,\n"                         /* 7 */
    "  reply = function(m) return ls.reply({ echo = m.v }) end,\n"                   /* 8 */
    "  keyed = function(m) return ls.reply({ echo = m.v }, { key = \"k2\" }) end,\n" /* 9 */
    "  number = function() return 42 end,\n"                                         /* 10 */
    "  empty = function() return {} end,\n"                                          /* 11 */
    "  raise = function() error(\"x\") end,\n"                                       /* 12 */
    "  later = function() local r = ls.retry_after(5) return r end,\n"               /* 13 */
    "  yield = function() coroutine.yield() return ls.ack() end,\n"                  /* 14 */
    "  publish = function(m, ctx) return ctx:publish(\"other\", { a = 1 }) end,\n"   /* 15 */
    "  trypublish = function(m, ctx)\n"                                              /* 16 */
    "    local ok, e = pcall(ctx.publish, ctx, \"other\", { a = 1 })\n"              /* 17 */
    "    if ok then return ls.ack() end\n"                                           /* 18 */
    "    return ls.reply({ err = e })\n"                                             /* 19 */
    "  end,\n"                                                                       /* 20 */
    "  sleep = function() ls.sleep(1) return ls.ack() end,\n"                        /* 21 */
    "  nested = function()\n"                                                        /* 22 */
    "    coroutine.wrap(function() ls.sleep(1) end)()\n"                             /* 23 */
    "  end,\n"                                                                       /* 24 */
    "  errtable = function() error({ code = 1 }) end,\n"                             /* 25 */
    "}\n"                                                                            /* 26 */
    "return {\n"                                                                     /* 27 */
    "  stream = \"orders\", group = \"billing\", reply_to = \"answers\",\n"          /* 28 */
    "  handle = function(msg, ctx) return modes[msg.mode](msg, ctx) end,\n"          /* 29 */
    "}\n";

const char SLEEPER[] =
    "local ls = require \"luastream\"\n"
    "local active, peak = 0, 0\n"
    "return { stream = \"s\", group = \"g\", reply_to = \"r\",\n"
    "  handle = function(msg, ctx)\n"
    "    active = active + 1\n"
    "    if active > peak then peak = active end\n"
    "    ls.sleep(msg.ms)\n"
    "    if msg.again then ls.sleep(msg.again) end\n"
    "    active = active - 1\n"
    "    if msg.fail then error(\"failed after sleep\") end\n"
    "    if msg.reply then return ls.reply({ peak = peak }) end\n"
    "    return ls.ack()\n"
    "  end }\n";

/* ls.sleep where it cannot yield (under a C function) raises after arming
 * its timer; a handler that catches that and returns leaves its coroutine
 * to the next entry, and the timer must not fire on it. */
