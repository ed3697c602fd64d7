/* pg_pool: the pool that lends the host's PostgreSQL connections; see
 * pg_pool.h. It holds the connections (pg_connection.h), the queue of
 * requests waiting for one (pg_request.h), their deadlines and the pool's
 * uv handles; the connections tell it, through the hooks it gives them,
 * when one came up idle or went down. No libpq here. */
#include "pg_pool.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_connection.h"
#include "pg_request.h"

struct pg_session {
  struct pg_connection *conn;
};

struct pg_pool {
  char *conninfo;
  char setup[256]; /* the settings of a new connection, one statement */
  uint64_t timeout_ms;
  int size;
  struct pg_connection *conns;
  struct pg_session *sessions;        /* sessions[i] lends conns[i] */
  struct pg_request *head, *tail;     /* waiting */
  uv_timer_t kick;                    /* runs dispatch from the loop */
  struct pg_handles handles;          /* kick, request timers, the connections' */
  struct pg_connection_shared shared; /* what the connections are given */
  bool closed;
};

uint64_t pg_statement_timeout(uint64_t timeout_ms) {
  /* room for connecting and the round trips around the statement */
  uint64_t margin = timeout_ms / 10;
  if (margin < 100) margin = 100;
  if (margin > 1000) margin = 1000;
  return timeout_ms > 2 * margin ? timeout_ms - margin : timeout_ms / 2 + 1;
}

/* ---- the pool's handles ---- */

static void pool_release(void *own) {
  pg_pool *p = own;
  free(p->conns);
  free(p->sessions);
  free(p->conninfo);
  free(p);
}

static void kick_closed(uv_handle_t *h) { pg_handles_closed(&((pg_pool *)h->data)->handles); }

static void on_kick(uv_timer_t *t);
static void kick(pg_pool *p) {
  if (!p->closed) uv_timer_start(&p->kick, on_kick, 0, 0);
}

/* ---- the waiting queue ---- */

static void queue_remove(pg_pool *p, struct pg_request *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    p->head = r->next;
  if (r->next)
    r->next->prev = r->prev;
  else
    p->tail = r->prev;
  r->prev = r->next = NULL;
}

static void queue_push(pg_pool *p, struct pg_request *r) {
  r->prev = p->tail;
  if (p->tail)
    p->tail->next = r;
  else
    p->head = r;
  p->tail = r;
}

/* Fails every waiting request when no connection is up or coming: a server
 * that refuses connections fails queries at once instead of at their
 * deadline. */
static void fail_waiting_if_hopeless(pg_pool *p, const char *why) {
  for (int i = 0; i < p->size; i++)
    if (p->conns[i].state != PG_CONNECTION_DOWN && !p->conns[i].checked_out) return;
  while (p->head) {
    struct pg_request *r = p->head;
    queue_remove(p, r);
    pg_request_fail(r, PG_STATE_CONNECT, why, false, false);
  }
}

/* ---- the connections' hooks ---- */

static void on_connection_changed(void *own) { kick(own); }

static void on_connect_failed(void *own, const char *why) { fail_waiting_if_hopeless(own, why); }

/* ---- lending ---- */

static void on_deadline(uv_timer_t *t) {
  struct pg_request *r = t->data;
  pg_pool *p = r->handles->own;
  char why[160];
  if (r->conn) {
    /* The server may still run it: closing the connection ends it there. */
    pg_connection_close(r->conn);
    snprintf(why, sizeof why, "no result within %llums (the connection was closed)",
             (unsigned long long)r->timeout_ms);
  } else {
    queue_remove(p, r);
    snprintf(why, sizeof why, "no connection within %llums (%d in use)",
             (unsigned long long)r->timeout_ms, p->size);
  }
  pg_request_fail(r, PG_STATE_TIMEOUT, why, false, true);
  kick(p);
}

/* c (idle) for one transaction: its first statement goes after a BEGIN. */
static pg_session *checkout(pg_pool *p, struct pg_connection *c) {
  pg_connection_checkout(c);
  return &p->sessions[c - p->conns];
}

/* Hands waiting requests to idle connections, and starts connections for
 * those no connection is coming for. Runs from the loop only (kick, a
 * finished command), never inside a call of pg.h: it calls back. */
static void dispatch(pg_pool *p) {
  while (p->head && !p->closed) {
    struct pg_connection *idle = NULL;
    int coming = 0;
    for (int i = 0; i < p->size; i++) {
      struct pg_connection *c = &p->conns[i];
      if (c->checked_out) continue;
      if (c->state == PG_CONNECTION_IDLE && idle == NULL) idle = c;
      if (c->state == PG_CONNECTION_CONNECTING || c->state == PG_CONNECTION_SETUP) coming++;
    }
    if (idle == NULL) {
      int waiting = 0;
      for (struct pg_request *r = p->head; r; r = r->next) waiting++;
      for (int i = 0; i < p->size && coming < waiting; i++) {
        struct pg_connection *c = &p->conns[i];
        if (c->state != PG_CONNECTION_DOWN || c->checked_out) continue;
        char err[256];
        if (pg_connection_start(c, err, sizeof err) != 0) {
          fail_waiting_if_hopeless(p, err);
          return;
        }
        coming++;
      }
      return;
    }
    struct pg_request *r = p->head;
    queue_remove(p, r);
    if (r->session) {
      r->ready(r->data, checkout(p, idle), NULL);
      pg_request_free(r);
    } else {
      char why[256];
      if (pg_connection_send(idle, r, why, sizeof why) != 0)
        pg_request_fail(r, PG_STATE_LOST, why, true, false);
    }
  }
}

static void on_kick(uv_timer_t *t) { dispatch(t->data); }

/* ---- pg.h ---- */

static void start_deadline(pg_pool *p, struct pg_request *r, uint64_t timeout_ms) {
  r->timeout_ms = timeout_ms ? timeout_ms : p->timeout_ms;
  uv_timer_start(&r->timer, on_deadline, r->timeout_ms, 0);
}

/* A request on p, its deadline running; NULL (said in err) when p is
 * closed or memory is short. */
static struct pg_request *request_open(pg_pool *p, const struct pg_query *q, uint64_t timeout_ms,
                                       void *data, char *err, size_t errlen) {
  if (p->closed) {
    snprintf(err, errlen, "the PostgreSQL client is closed");
    return NULL;
  }
  struct pg_request *r = pg_request_new(&p->handles, q);
  if (r == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  r->data = data;
  start_deadline(p, r, timeout_ms);
  return r;
}

int pg_query(pg_pool *p, const struct pg_query *q, pg_done_fn *done, void *data, char *err,
             size_t errlen) {
  struct pg_request *r = request_open(p, q, q->timeout_ms, data, err, errlen);
  if (r == NULL) return -1;
  r->done = done;
  /* An idle connection takes it at once; else it waits for dispatch. */
  for (int i = 0; i < p->size && p->head == NULL; i++) {
    struct pg_connection *c = &p->conns[i];
    if (c->state != PG_CONNECTION_IDLE || c->checked_out) continue;
    char why[256];
    if (pg_connection_send(c, r, why, sizeof why) == 0) return 0;
    /* broken (closed now): the query waits for another */
  }
  queue_push(p, r);
  kick(p);
  return 0;
}

pg_session *pg_session_take(pg_pool *p) {
  if (p->closed || p->head) return NULL; /* the waiting go first */
  for (int i = 0; i < p->size; i++)
    if (p->conns[i].state == PG_CONNECTION_IDLE && !p->conns[i].checked_out)
      return checkout(p, &p->conns[i]);
  return NULL;
}

int pg_session_open(pg_pool *p, uint64_t timeout_ms, pg_session_fn *ready, void *data, char *err,
                    size_t errlen) {
  struct pg_request *r = request_open(p, NULL, timeout_ms, data, err, errlen);
  if (r == NULL) return -1;
  r->session = true;
  r->ready = ready;
  queue_push(p, r);
  kick(p);
  return 0;
}

static pg_pool *session_pool(const pg_session *s) { return s->conn->shared->own; }

int pg_session_query(pg_session *s, const struct pg_query *q, pg_done_fn *done, void *data,
                     char *err, size_t errlen) {
  struct pg_connection *c = s->conn;
  pg_pool *p = session_pool(s);
  if (p->closed) {
    snprintf(err, errlen, "the PostgreSQL client is closed");
    return -1;
  }
  if (c->state != PG_CONNECTION_IDLE) {
    snprintf(err, errlen, "%s",
             c->state == PG_CONNECTION_DOWN ? "the connection was lost" : "a query is running");
    return -1;
  }
  struct pg_request *r = pg_request_new(&p->handles, q);
  if (r == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  r->done = done;
  r->data = data;
  start_deadline(p, r, q->timeout_ms);
  if (pg_connection_send(c, r, err, errlen) != 0) {
    pg_request_free(r);
    return -1;
  }
  return 0;
}

void pg_session_discard(pg_session *s) { pg_connection_discard(s->conn); }

int pg_session_defer(pg_session *s, const struct pg_query *q, char *err, size_t errlen) {
  struct pg_connection *c = s->conn;
  pg_pool *p = session_pool(s);
  if (p->closed || c->state == PG_CONNECTION_DOWN) {
    snprintf(err, errlen, "%s",
             p->closed ? "the PostgreSQL client is closed" : "the connection was lost");
    return -1;
  }
  struct pg_request *r = pg_request_new(&p->handles, q);
  if (r == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  pg_connection_defer(c, r);
  return 0;
}

void pg_session_close(pg_session *s) {
  struct pg_connection *c = s->conn;
  pg_connection_checkin(c);
  if (!pg_connection_reusable(c)) {
    /* mid-transaction or mid-query: only closing ends it for sure */
    struct pg_request *r = pg_connection_close(c);
    if (r) pg_request_fail(r, PG_STATE_LOST, "the transaction was abandoned", true, false);
  }
  kick(session_pool(s));
}

bool pg_pool_busy(const pg_pool *p) {
  if (p->head) return true;
  for (int i = 0; i < p->size; i++)
    if (p->conns[i].req) return true;
  return false;
}

void pg_pool_close(pg_pool *p) {
  if (p->closed) return;
  p->closed = true;
  uv_close((uv_handle_t *)&p->kick, kick_closed);
  while (p->head) {
    struct pg_request *r = p->head;
    queue_remove(p, r);
    pg_request_fail(r, PG_STATE_LOST, "the PostgreSQL client closed", true, false);
  }
  for (int i = 0; i < p->size; i++) {
    struct pg_request *r = pg_connection_release(&p->conns[i]);
    if (r) pg_request_fail(r, PG_STATE_LOST, "the PostgreSQL client closed", true, false);
  }
}

void pg_pool_free(pg_pool *p) {
  if (p == NULL) return;
  pg_pool_close(p);
  if (p->handles.open == 0)
    pool_release(p);
  else
    p->handles.all_closed = pool_release;
}

pg_pool *pg_pool_new(uv_loop_t *loop, const struct pg_options *o, char *err, size_t errlen) {
  const char *conninfo = o->conninfo ? o->conninfo : "";
  if (pg_connection_check_settings(conninfo, err, errlen) != 0) return NULL;
  pg_pool *p = calloc(1, sizeof *p);
  if (p == NULL || (p->conninfo = strdup(conninfo)) == NULL) {
    free(p);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  p->size = o->size > 0 ? o->size : PG_POOL_SIZE;
  p->timeout_ms = o->timeout_ms ? o->timeout_ms : PG_TIMEOUT_MS;
  p->conns = calloc((size_t)p->size, sizeof *p->conns);
  p->sessions = calloc((size_t)p->size, sizeof *p->sessions);
  if (p->conns == NULL || p->sessions == NULL) {
    free(p->conns);
    free(p->sessions);
    free(p->conninfo);
    free(p);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  snprintf(p->setup, sizeof p->setup,
           "SELECT set_config('statement_timeout', '%llu', false), "
           "set_config('DateStyle', 'ISO, YMD', false), set_config('TimeZone', 'UTC', false), "
           "set_config('extra_float_digits', '1', false)",
           (unsigned long long)pg_statement_timeout(p->timeout_ms));
  p->handles = (struct pg_handles){.loop = loop, .own = p};
  p->shared = (struct pg_connection_shared){.handles = &p->handles,
                                            .conninfo = p->conninfo,
                                            .setup = p->setup,
                                            .timeout_ms = p->timeout_ms,
                                            .changed = on_connection_changed,
                                            .connect_failed = on_connect_failed,
                                            .own = p};
  for (int i = 0; i < p->size; i++) {
    pg_connection_init(&p->conns[i], &p->shared); /* its timer: a handle counted */
    p->sessions[i].conn = &p->conns[i];
  }
  uv_timer_init(loop, &p->kick);
  p->kick.data = p;
  p->handles.open++; /* kick */
  return p;
}
