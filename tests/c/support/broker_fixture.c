/* broker_fixture: shared by the broker_redis tests (broker_fixture.h). */
#include "broker_fixture.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "url.h"

uv_loop_t loop;
static uv_timer_t deadline; /* bounds every wait, so a hang fails with a line number */
static int timed_out;
struct redis_server srv;

/* ---- log capture ---- */

static char logbuf[1 << 18];
static size_t loglen;

static void capture(void *data, enum log_level level, const char *line, size_t len) {
  (void)data;
  (void)level;
  if (getenv("TEST_LOG")) fprintf(stderr, "%s", line);
  if (loglen + len + 2 >= sizeof logbuf) return;
  memcpy(logbuf + loglen, line, len + 1); /* with the newline */
  loglen += len + 1;
  logbuf[loglen] = '\0';
}

int log_count(const char *a, const char *b) {
  int n = 0;
  for (const char *line = logbuf; *line;) {
    const char *nl = strchr(line, '\n');
    size_t len = (size_t)(nl - line);
    char tmp[2048];
    if (len >= sizeof tmp) len = sizeof tmp - 1;
    memcpy(tmp, line, len);
    tmp[len] = '\0';
    if (strstr(tmp, a) && (b == NULL || strstr(tmp, b))) n++;
    line = nl + 1;
  }
  return n;
}

/* ---- loop helpers ---- */

/* uv_stop too: a deadline that fires in UV_RUN_ONCE's timers before the
 * poll (libuv 1.44) would otherwise leave the poll blocked till the next
 * event. */
static void on_deadline(uv_timer_t *t) {
  timed_out = 1;
  uv_stop(t->loop);
}

int run_until(const int *counter, int want, int ms) {
  timed_out = 0;
  uv_timer_start(&deadline, on_deadline, (uint64_t)ms, 0);
  while (*counter < want && !timed_out) uv_run(&loop, UV_RUN_ONCE);
  uv_timer_stop(&deadline);
  return *counter >= want ? 0 : -1;
}

void run_for(int ms) {
  static const int never = 0;
  run_until(&never, 1, ms);
}

void setup(const char *const *server_args) {
  log_set_sink(capture, NULL);
  log_set_level(LOG_DEBUG);
  loglen = 0;
  logbuf[0] = '\0';
  ASSERT_OK(uv_loop_init(&loop));
  uv_timer_init(&loop, &deadline);
  if (server_args) ASSERT_OK(redis_server_start(&srv, server_args));
}

const char *const no_args[] = {NULL};

void teardown(void) {
  uv_close((uv_handle_t *)&deadline, NULL);
  ASSERT_OK(uv_run(&loop, UV_RUN_DEFAULT)); /* close callbacks; returns when nothing is left */
  ASSERT_OK(uv_loop_close(&loop));
  redis_server_stop(&srv);
  log_set_sink(NULL, NULL);
  LEAK_CHECK();
}

broker *make_broker(const char *text) {
  struct redis_url u;
  char err[512];
  if (url_parse(text, &u, err, sizeof err) != 0) TEST_FAIL_("%s", err);
  broker *b = broker_redis_new(&loop, &u);
  ASSERT_NOT_NULL(b);
  return b;
}

/* ---- callbacks that record ---- */

void on_state(void *data, bk_conn *c, int up) {
  struct state *s = data;
  if (up)
    s->ups++;
  else
    s->downs++;
  if ((up && s->close_on_up) || (!up && s->close_on_down)) bk_conn_close(s->b, c);
}

void on_call(void *data, const bk_reply *r, const char *err) {
  struct call *c = data;
  c->calls++;
  c->type = r ? r->type : 0;
  snprintf(c->err, sizeof c->err, "%s", err ? err : "");
  if (r) {
    ASSERT_NULL(err);
    c->integer = r->integer;
    c->elements = r->elements;
    if (r->str) snprintf(c->str, sizeof c->str, "%.*s", (int)r->len, r->str);
  } else {
    ASSERT_NOT_NULL(err);
  }
}

int cmdv(broker *b, bk_conn *c, bk_reply_cb *cb, void *data, ...) {
  const char *argv[16];
  size_t len[16];
  int argc = 0;
  va_list ap;
  va_start(ap, data);
  for (const char *s; (s = va_arg(ap, const char *)) != NULL && argc < 16; argc++) {
    argv[argc] = s;
    len[argc] = strlen(s);
  }
  va_end(ap);
  return bk_command(b, c, argc, argv, len, cb, data);
}

bk_conn *open_up(broker *b, const char *name, struct state *st) {
  st->b = b;
  bk_conn *c = bk_conn_open(b, name, on_state, st);
  ASSERT_NOT_NULL(c);
  WAIT(st->ups, 1, 5000);
  ASSERT_INT_EQ(bk_connected(b, c), 1);
  return c;
}

bk_conn *open_watched(broker *b, const char *name, struct state *st, bk_fault_cb *fault) {
  st->b = b;
  bk_conn *c = bk_conn_open(b, name, on_state, st);
  ASSERT_NOT_NULL(c);
  bk_conn_on_fault(b, c, fault);
  return c;
}

void close_and_free(broker *b, bk_conn *c) {
  bk_conn_close(b, c);
  broker_free(b);
}

void on_fault(void *data, bk_conn *c, enum bk_fault fault, const char *why) {
  (void)c;
  struct faults *f = ((struct state *)data)->faults;
  f->calls++;
  f->last = fault;
  snprintf(f->why, sizeof f->why, "%s", why);
}

int in_order_next, in_order_bad;

void on_incr(void *data, const bk_reply *r, const char *err) {
  int idx = (int)(intptr_t)data;
  if (err || r == NULL || r->type != BK_INTEGER || r->integer != idx + 1 || idx != in_order_next)
    in_order_bad++;
  in_order_next++;
}
