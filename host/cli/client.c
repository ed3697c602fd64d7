/* client: the one-shot Redis client of publish and dead-letters (client.h). */
#include "client.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "log.h"
#include "loop.h"

void client_done(struct client *c, int status) {
  if (c->finished) return;
  c->finished = true;
  c->status = status;
  if (c->timeout) timer_stop(c->timeout);
  if (c->conn) {
    bk_conn *conn = c->conn;
    c->conn = NULL;
    bk_conn_close(c->b, conn); /* pending callbacks fire now, and see finished */
  }
  if (c->ended) c->ended(c);
}

void client_say(struct client *c, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (c->ended)
    log_line(LOG_WARN, NULL, line, "server", c->b->name, NULL);
  else
    fprintf(stderr, "luastream: %s\n", line);
}

/* Sends a, its reply to cb(data); the session ends (status 1) when it
 * cannot be sent. */
static int send_args(struct client *c, const struct bk_args *a, bk_reply_cb *cb, void *data) {
  if (bk_command(c->b, c->conn, a->argc, a->argv, a->argvlen, cb, data) != 0) {
    client_say(c, "lost the connection to %s", c->b->name);
    client_done(c, 1);
    return -1;
  }
  timer_start(c->timeout, CLIENT_TIMEOUT_MS);
  return 0;
}

int client_send(struct client *c, const struct bk_args *a, bk_reply_cb *cb) {
  if (c->finished) return -1;
  return send_args(c, a, cb, c);
}

/* One command of client_send_with: what its reply is handed to. */
struct client_request {
  struct client *c;
  client_reply_fn *cb;
  void *arg;
};

static void request_answered(void *data, const bk_reply *r, const char *err) {
  struct client_request req = *(struct client_request *)data;
  free(data);
  /* an attached session waits between requests without a deadline */
  if (--req.c->inflight == 0 && req.c->ended && req.c->timeout) timer_stop(req.c->timeout);
  req.cb(req.c, req.arg, r, err);
}

int client_send_with(struct client *c, const struct bk_args *a, client_reply_fn *cb, void *arg) {
  if (c->finished) return -1;
  struct client_request *req = malloc(sizeof *req);
  if (req == NULL) {
    client_say(c, "out of memory");
    client_done(c, 1);
    return -1;
  }
  *req = (struct client_request){c, cb, arg};
  if (send_args(c, a, request_answered, req) != 0) {
    free(req);
    return -1;
  }
  c->inflight++;
  return 0;
}

const bk_reply *client_field(const bk_reply *r, const char *name) {
  size_t len = strlen(name);
  if (r == NULL || r->type != BK_ARRAY) return NULL;
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    const bk_reply *k = r->element[i];
    if ((k->type == BK_STRING || k->type == BK_STATUS) && k->len == len &&
        !memcmp(k->str, name, len))
      return r->element[i + 1];
  }
  return NULL;
}

const char *client_error(const bk_reply *r, const char *err) {
  if (r == NULL) return err ? err : "no reply";
  return r->type == BK_ERROR ? r->str : NULL;
}

static void client_state(void *data, bk_conn *conn, int up) {
  struct client *c = data;
  if (!up || c->started || c->finished || conn != c->conn) return;
  c->started = true;
  c->start(c);
}

/* A one-shot command does not wait for a server that refused it or is not
 * there: the first failed attempt ends it (a person is waiting). */
static void client_fault(void *data, bk_conn *conn, enum bk_fault fault, const char *why) {
  struct client *c = data;
  if (c->started || c->finished || conn != c->conn || fault == BK_FAULT_NONE) return;
  client_say(c, "cannot %s %s: %s", fault == BK_FAULT_DENIED ? "use" : "reach", c->b->name, why);
  client_done(c, 1);
}

static void client_timeout(ltimer *t, void *data) {
  (void)t;
  struct client *c = data;
  client_say(c, "%s %s within %d s", c->started ? "no reply from" : "cannot reach", c->b->name,
             CLIENT_TIMEOUT_MS / 1000);
  client_done(c, 1);
}

int client_attach(struct client *c, uv_loop_t *loop, lclock *clock, broker *b, const char *name,
                  client_start_fn *start, void (*ended)(struct client *c), void *data) {
  *c = (struct client){
      .b = b, .clock = clock, .loop = loop, .start = start, .data = data, .status = 1};
  if ((c->timeout = timer_new(clock, client_timeout, c)) == NULL) return -1;
  timer_start(c->timeout, CLIENT_TIMEOUT_MS);
  if ((c->conn = bk_conn_open(b, name, client_state, c)) == NULL) {
    timer_free(c->timeout);
    c->timeout = NULL;
    return -1;
  }
  bk_conn_on_fault(b, c->conn, client_fault);
  c->ended = ended;
  return 0;
}

void client_detach(struct client *c) {
  if (c->timeout) timer_free(c->timeout);
  c->timeout = NULL;
}

static void drop_log_line(void *data, enum log_level level, const char *line, size_t len) {
  (void)data, (void)level, (void)line, (void)len;
}

int client_run(const struct redis_url *url, const char *name, client_start_fn *start, void *data) {
  /* The output is the result, and every failure is said once on stderr by
   * the command itself; the broker's log lines would say it again. */
  log_set_sink(drop_log_line, NULL);
  struct client c = {.start = start, .data = data, .status = 1};
  uv_loop_t loop;
  lclock *clock = NULL;
  int rc = uv_loop_init(&loop);
  if (rc != 0) {
    fprintf(stderr, "luastream: cannot create the event loop: %s\n", uv_strerror(rc));
    return 1;
  }
  if ((clock = clock_uv_new(&loop)) == NULL) {
    fprintf(stderr, "luastream: cannot create the clock: out of memory\n");
  } else if ((c.b = broker_cluster_new(&loop, url)) == NULL) {
    fprintf(stderr, "luastream: cannot create a client for %s: out of memory\n", url->redacted);
  } else if ((c.timeout = timer_new(clock, client_timeout, &c)) == NULL) {
    fprintf(stderr, "luastream: cannot create a timer: out of memory\n");
  } else {
    c.clock = clock;
    c.loop = &loop;
    timer_start(c.timeout, CLIENT_TIMEOUT_MS);
    c.conn = bk_conn_open(c.b, name, client_state, &c);
    if (c.conn == NULL) {
      fprintf(stderr, "luastream: cannot open a connection to %s\n", c.b->name);
    } else {
      bk_conn_on_fault(c.b, c.conn, client_fault);
      uv_run(&loop, UV_RUN_DEFAULT);
    }
  }
  client_done(&c, c.status); /* the loop ended without it: nothing left to wait for */
  if (c.timeout) timer_free(c.timeout);
  if (c.b) broker_free(c.b);
  if (clock) clock->ops->free(clock);
  loop_finish(&loop);
  return c.status;
}
