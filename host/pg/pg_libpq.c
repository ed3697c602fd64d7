/* pg_libpq: libpq's asynchronous API on libuv; see pg_libpq.h. The only file
 * in the project that includes libpq.
 *
 * libpq rules this code leans on (libpq docs, "Asynchronous Command
 * Processing" and "Connecting"):
 * - after PQconnectStart, PQconnectPoll is called when the socket is ready
 *   for what its last answer asked (reading or writing), and the socket may
 *   change between calls;
 * - in nonblocking mode a send may leave data unsent: PQflush again when the
 *   socket is writable, until it returns 0;
 * - every connection is in pipeline mode once connected: a request is a
 *   batch of statements (a BEGIN, a Parse for a statement not prepared yet,
 *   the statement) and a sync point, one round trip. PQgetResult gives each
 *   statement's result, then NULL, and after the last one a
 *   PGRES_PIPELINE_SYNC; it blocks only while PQisBusy is true. After an
 *   error, the batch's later statements come back PGRES_PIPELINE_ABORTED;
 * - one batch at a time per connection;
 * - a uv_poll is closed before PQfinish closes its socket: closing it takes
 *   the fd out of epoll, and once closed the number may be another's. */
#include "pg_libpq.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum conn_state {
  C_DOWN,       /* no connection */
  C_CONNECTING, /* PQconnectPoll until OK */
  C_SETUP,      /* the settings' batch runs */
  C_IDLE,       /* ready for a query */
  C_BUSY        /* the batch of the query in req runs */
};

#define STEP_NONE (-1)

struct conn;

/* A query or a session wanted: waiting in the pool's queue, or running. */
struct req {
  pg_pool *pool;
  bool session; /* pg_session_open's, else a query */
  pg_done_fn *done;
  pg_session_fn *ready;
  void *data;
  uint64_t timeout_ms;
  uv_timer_t timer;          /* the deadline */
  struct conn *conn;         /* running on, else NULL */
  struct req *prev, *next;   /* the waiting queue */
  struct req *then;          /* statements deferred before it, sent in its batch first */
  int parse_step, exec_step; /* where its Parse and its execution sit in the batch */
  char *sql;                 /* points into the same allocation */
  int nparams;
  char **params;
};

struct poll {
  uv_poll_t h;
  pg_pool *pool;
};

struct pg_session {
  struct conn *conn;
};

struct conn {
  pg_pool *pool;
  PGconn *pg;
  struct poll *poll;
  uv_timer_t connecting; /* the deadline of making it: a server that accepts and
                                      never answers must not hold the slot */
  int fd;
  int events; /* what the poll watches */
  enum conn_state state;
  PostgresPollingStatusType waits; /* C_CONNECTING: what PQconnectPoll asked for */
  bool want_write;                 /* PQflush has more to send */
  bool checked_out;                /* a session's */
  bool begin_wanted;               /* the session's first statement goes after a BEGIN */
  bool reset_wanted;               /* a statement changed the session: close when given back */
  struct pg_session session;
  struct req *req;                      /* running */
  struct req *deferred, *deferred_last; /* the session's, for its next batch */
  PGresult *result;                     /* the batch's first error, else the statement's result */
  const struct req *failed;             /* the statement whose error result holds */
  int step, nsteps;                     /* statements of the batch answered so far, sent */
  struct stmt {
    char *sql;
    unsigned id; /* prepared as "ls<id>" */
  } stmts[PG_STATEMENTS_KEPT];
  int nstmts;
  unsigned next_stmt; /* the id of the next one prepared */
  char why[256];      /* the last failure, for the queries it fails */
};

struct pg_pool {
  uv_loop_t *loop;
  char *conninfo;
  char setup[256]; /* the settings of a new connection, one statement */
  uint64_t timeout_ms;
  int size;
  struct conn *conns;
  struct req *head, *tail; /* waiting */
  uv_timer_t kick;         /* runs dispatch from the loop */
  int open_handles;        /* kick, polls, request timers, until closed */
  bool closed, free_wanted;
};

uint64_t pg_statement_timeout(uint64_t timeout_ms) {
  /* room for connecting and the round trips around the statement */
  uint64_t margin = timeout_ms / 10;
  if (margin < 100) margin = 100;
  if (margin > 1000) margin = 1000;
  return timeout_ms > 2 * margin ? timeout_ms - margin : timeout_ms / 2 + 1;
}

/* ---- results ---- */

int pg_result_rows(const pg_result *r) { return PQntuples((const PGresult *)r); }
int pg_result_columns(const pg_result *r) { return PQnfields((const PGresult *)r); }
const char *pg_result_name(const pg_result *r, int col) {
  return PQfname((const PGresult *)r, col);
}
uint32_t pg_result_type(const pg_result *r, int col) {
  return (uint32_t)PQftype((const PGresult *)r, col);
}
const char *pg_result_value(const pg_result *r, int row, int col, size_t *len) {
  const PGresult *res = (const PGresult *)r;
  if (PQgetisnull(res, row, col)) return NULL;
  *len = (size_t)PQgetlength(res, row, col);
  return PQgetvalue(res, row, col);
}
double pg_result_affected(const pg_result *r) { return strtod(PQcmdTuples((PGresult *)r), NULL); }

/* ---- the pool's handles ---- */

static void pool_release(pg_pool *p) {
  for (int i = 0; i < p->size; i++)
    if (p->conns[i].pg) PQfinish(p->conns[i].pg);
  free(p->conns);
  free(p->conninfo);
  free(p);
}

static void handle_closed(pg_pool *p) {
  if (--p->open_handles == 0 && p->free_wanted) pool_release(p);
}

static void poll_closed(uv_handle_t *h) {
  struct poll *pl = (struct poll *)h; /* h is its first member; data is the connection */
  pg_pool *p = pl->pool;
  free(pl);
  handle_closed(p);
}

static void kick_closed(uv_handle_t *h) { handle_closed(h->data); }

static void connecting_closed(uv_handle_t *h) { handle_closed(((struct conn *)h->data)->pool); }

static void req_closed(uv_handle_t *h) {
  struct req *r = h->data;
  pg_pool *p = r->pool;
  free(r);
  handle_closed(p);
}

/* Frees r and the deferred statements it carries. */
static void req_free(struct req *r) {
  while (r) {
    struct req *then = r->then;
    uv_timer_stop(&r->timer);
    uv_close((uv_handle_t *)&r->timer, req_closed);
    r = then;
  }
}

static void on_kick(uv_timer_t *t);
static void kick(pg_pool *p) {
  if (!p->closed) uv_timer_start(&p->kick, on_kick, 0, 0);
}

/* ---- failures ---- */

/* libpq's message on one line: whitespace runs as one space, none at the
 * ends. */
static void one_line(const char *msg, char *out, size_t len) {
  if (msg == NULL || *msg == '\0') msg = "unknown error";
  size_t at = 0;
  bool space = false;
  for (const char *q = msg; *q && at + 2 < len; q++) {
    if (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r') {
      space = at > 0;
      continue;
    }
    if (space) out[at++] = ' ';
    space = false;
    out[at++] = *q;
  }
  out[at] = '\0';
}

static void fail(struct req *r, const char *state, const char *msg, bool lost, bool timed_out) {
  struct pg_error e = {.message = msg, .lost = lost, .timed_out = timed_out};
  snprintf(e.sqlstate, sizeof e.sqlstate, "%s", state);
  r->conn = NULL;
  if (r->session)
    r->ready(r->data, NULL, &e);
  else
    r->done(r->data, NULL, &e);
  req_free(r);
}

/* Closes c's connection; returns its running request, detached, for the
 * caller to fail. Never calls back. */
static struct req *conn_close(struct conn *c) {
  if (c->poll) {
    uv_close((uv_handle_t *)&c->poll->h, poll_closed); /* before PQfinish: see the top */
    c->poll = NULL;
  }
  if (c->pg) PQfinish(c->pg);
  c->pg = NULL;
  c->fd = -1;
  if (c->result) PQclear(c->result);
  c->result = NULL;
  for (int i = 0; i < c->nstmts; i++) free(c->stmts[i].sql);
  c->nstmts = 0;
  c->next_stmt = 0;
  c->state = C_DOWN;
  uv_timer_stop(&c->connecting);
  c->events = 0;
  c->want_write = false;
  c->begin_wanted = c->reset_wanted = false;
  req_free(c->deferred);
  c->deferred = c->deferred_last = NULL;
  c->failed = NULL;
  struct req *r = c->req;
  c->req = NULL;
  if (r) r->conn = NULL;
  return r;
}

static void queue_remove(pg_pool *p, struct req *r) {
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

static void queue_push(pg_pool *p, struct req *r, bool front) {
  if (front) {
    r->next = p->head;
    if (p->head)
      p->head->prev = r;
    else
      p->tail = r;
    p->head = r;
  } else {
    r->prev = p->tail;
    if (p->tail)
      p->tail->next = r;
    else
      p->head = r;
    p->tail = r;
  }
}

/* Fails every waiting request when no connection is up or coming: a server
 * that refuses connections fails queries at once instead of at their
 * deadline. */
static void fail_waiting_if_hopeless(pg_pool *p, const char *why) {
  for (int i = 0; i < p->size; i++)
    if (p->conns[i].state != C_DOWN && !p->conns[i].checked_out) return;
  while (p->head) {
    struct req *r = p->head;
    queue_remove(p, r);
    fail(r, PG_STATE_CONNECT, why, false, false);
  }
}

static bool result_ok(const PGresult *res) {
  ExecStatusType st = PQresultStatus(res);
  return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY;
}

/* c's connection failed: its query (or its connecting) fails with why. */
static void conn_fail(struct conn *c, const char *why) {
  pg_pool *p = c->pool;
  bool connecting = c->state == C_CONNECTING || c->state == C_SETUP;
  /* the server's reason when it gave one as it went (a FATAL error:
   * terminated, shutting down) */
  const char *severity =
      c->result ? PQresultErrorField(c->result, PG_DIAG_SEVERITY_NONLOCALIZED) : NULL;
  const char *reason = c->result ? PQresultErrorField(c->result, PG_DIAG_MESSAGE_PRIMARY) : NULL;
  if (reason && severity && (strcmp(severity, "FATAL") == 0 || strcmp(severity, "PANIC") == 0))
    why = reason;
  one_line(why, c->why, sizeof c->why);
  struct req *r = conn_close(c);
  if (r) fail(r, PG_STATE_LOST, c->why, true, false);
  if (connecting) fail_waiting_if_hopeless(p, c->why);
  kick(p);
}

/* ---- the socket ---- */

static void on_poll(uv_poll_t *h, int status, int events);

/* Watches c's socket for what its state waits for. */
static int watch(struct conn *c) {
  int fd = PQsocket(c->pg);
  if (c->poll && c->fd != fd) {
    uv_close((uv_handle_t *)&c->poll->h, poll_closed);
    c->poll = NULL;
  }
  if (c->poll == NULL) {
    struct poll *pl = malloc(sizeof *pl);
    if (pl == NULL) return -1;
    if (uv_poll_init_socket(c->pool->loop, &pl->h, fd) != 0) {
      free(pl);
      return -1;
    }
    pl->pool = c->pool;
    pl->h.data = c;
    c->pool->open_handles++;
    c->poll = pl;
    c->fd = fd;
    c->events = 0;
  }
  int ev = UV_READABLE;
  if (c->state == C_CONNECTING)
    ev = c->waits == PGRES_POLLING_WRITING ? UV_WRITABLE : UV_READABLE;
  else if (c->want_write)
    ev |= UV_WRITABLE;
  /* unchanged: uv_poll_start would still cost an epoll_ctl. Not while
   * connecting: libpq may have moved to a new socket (the next address)
   * under the same number, which epoll has dropped with the old one. */
  if (ev == c->events && c->state != C_CONNECTING) return 0;
  if (uv_poll_start(&c->poll->h, ev, on_poll) != 0) return -1;
  c->events = ev;
  return 0;
}

static int flush(struct conn *c) {
  int rc = PQflush(c->pg);
  if (rc < 0) return -1;
  c->want_write = rc == 1;
  return 0;
}

/* ---- queries ---- */

static int stmt_find(const struct conn *c, const char *sql) {
  for (int i = 0; i < c->nstmts; i++)
    if (strcmp(c->stmts[i].sql, sql) == 0) return i;
  return -1;
}

/* Forgets sql's prepared statement: the server refuses to run it again
 * ("cached plan must not change result type" after a table it reads
 * changed), so the next use prepares it anew, under a new name. */
static void stmt_forget(struct conn *c, const char *sql) {
  int i = stmt_find(c, sql);
  if (i < 0) return;
  free(c->stmts[i].sql);
  c->stmts[i] = c->stmts[--c->nstmts];
}

/* Ends a batch: the sync point, sent. */
static int send_sync(struct conn *c) {
  return PQpipelineSync(c->pg) && flush(c) == 0 && watch(c) == 0 ? 0 : -1;
}

/* Adds r's statement to c's batch: its prepared statement; one not
 * prepared yet is prepared in the same batch while the cache has room, else
 * sent unnamed. 0 when libpq refuses. */
static int send_stmt(struct conn *c, struct req *r) {
  char name[16];
  int ok = 1;
  int i = stmt_find(c, r->sql);
  char *copy = i < 0 && c->nstmts < PG_STATEMENTS_KEPT ? strdup(r->sql) : NULL;
  r->parse_step = STEP_NONE;
  if (copy) {
    snprintf(name, sizeof name, "ls%u", c->next_stmt);
    ok = PQsendPrepare(c->pg, name, r->sql, r->nparams, NULL);
    r->parse_step = c->nsteps++;
    i = c->nstmts;
    c->stmts[c->nstmts++] = (struct stmt){copy, c->next_stmt++}; /* forgotten if the Parse fails */
  }
  const char *const *params = (const char *const *)r->params;
  r->exec_step = c->nsteps++;
  if (ok && i >= 0) {
    snprintf(name, sizeof name, "ls%u", c->stmts[i].id);
    return PQsendQueryPrepared(c->pg, name, r->nparams, params, NULL, NULL, 0);
  }
  return ok && PQsendQueryParams(c->pg, r->sql, r->nparams, NULL, params, NULL, NULL, 0);
}

/* Sends r on c (idle) as one batch: a BEGIN when the session wants one, the
 * session's deferred statements, r's statement, a sync point. -1 when libpq
 * refuses (the connection is broken: the caller closes it); r is then not
 * attached. */
static int send_req(struct conn *c, struct req *r) {
  int ok = 1;
  c->step = c->nsteps = 0;
  c->failed = NULL;
  if (c->begin_wanted) {
    ok = PQsendQueryParams(c->pg, "BEGIN", 0, NULL, NULL, NULL, NULL, 0);
    c->nsteps++;
  }
  for (struct req *d = c->deferred; d && ok; d = d->then) ok = send_stmt(c, d);
  if (!ok || !send_stmt(c, r) || send_sync(c) != 0) return -1;
  c->begin_wanted = false;
  r->then = c->deferred; /* r carries them until its answer */
  c->deferred = c->deferred_last = NULL;
  c->state = C_BUSY;
  c->req = r;
  r->conn = c;
  return 0;
}

static void on_deadline(uv_timer_t *t) {
  struct req *r = t->data;
  pg_pool *p = r->pool;
  char why[160];
  if (r->conn) {
    /* The server may still run it: closing the connection ends it there. */
    conn_close(r->conn);
    snprintf(why, sizeof why, "no result within %llums (the connection was closed)",
             (unsigned long long)r->timeout_ms);
  } else {
    queue_remove(p, r);
    snprintf(why, sizeof why, "no connection within %llums (%d in use)",
             (unsigned long long)r->timeout_ms, p->size);
  }
  fail(r, PG_STATE_TIMEOUT, why, false, true);
  kick(p);
}

/* libpq's default writes NOTICEs and WARNINGs to stderr, which is the
 * host's log: a line in no log format. Handlers get results and errors;
 * the server's notices ("already exists, skipping") are dropped. */
static void drop_notice(void *arg, const char *message) {
  (void)arg;
  (void)message;
}

static void on_connect_deadline(uv_timer_t *t) {
  struct conn *c = t->data;
  char why[128];
  snprintf(why, sizeof why, "no connection within %llums (the server did not answer)",
           (unsigned long long)c->pool->timeout_ms);
  if (c->state == C_CONNECTING || c->state == C_SETUP) conn_fail(c, why);
}

/* Starts making c's connection. */
static int conn_start(struct conn *c, char *err, size_t errlen) {
  c->pg = PQconnectStart(c->pool->conninfo);
  if (c->pg == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if (PQstatus(c->pg) == CONNECTION_BAD) {
    one_line(PQerrorMessage(c->pg), err, errlen);
    conn_close(c);
    return -1;
  }
  PQsetnonblocking(c->pg, 1);
  PQsetNoticeProcessor(c->pg, drop_notice, NULL);
  c->state = C_CONNECTING;
  c->waits = PGRES_POLLING_WRITING;
  if (watch(c) != 0) {
    snprintf(err, errlen, "cannot watch the connection's socket");
    conn_close(c);
    return -1;
  }
  uv_timer_start(&c->connecting, on_connect_deadline, c->pool->timeout_ms, 0);
  return 0;
}

/* c (idle) for one transaction: its first statement goes after a BEGIN. */
static pg_session *checkout(struct conn *c) {
  c->checked_out = true;
  c->begin_wanted = true;
  return &c->session;
}

/* Hands waiting requests to idle connections, and starts connections for
 * those no connection is coming for. Runs from the loop only (kick, a
 * finished command), never inside a call of pg.h: it calls back. */
static void dispatch(pg_pool *p) {
  while (p->head && !p->closed) {
    struct conn *idle = NULL;
    int coming = 0;
    for (int i = 0; i < p->size; i++) {
      struct conn *c = &p->conns[i];
      if (c->checked_out) continue;
      if (c->state == C_IDLE && idle == NULL) idle = c;
      if (c->state == C_CONNECTING || c->state == C_SETUP) coming++;
    }
    if (idle == NULL) {
      int waiting = 0;
      for (struct req *r = p->head; r; r = r->next) waiting++;
      for (int i = 0; i < p->size && coming < waiting; i++) {
        struct conn *c = &p->conns[i];
        if (c->state != C_DOWN || c->checked_out) continue;
        char err[256];
        if (conn_start(c, err, sizeof err) != 0) {
          fail_waiting_if_hopeless(p, err);
          return;
        }
        coming++;
      }
      return;
    }
    struct req *r = p->head;
    queue_remove(p, r);
    if (r->session) {
      r->ready(r->data, checkout(idle), NULL);
      req_free(r);
    } else if (send_req(idle, r) != 0) {
      one_line(PQerrorMessage(idle->pg), idle->why, sizeof idle->why);
      conn_close(idle);
      fail(r, PG_STATE_LOST, idle->why, true, false);
    }
  }
}

static void on_kick(uv_timer_t *t) { dispatch(t->data); }

static bool word_is(const char *tag, const char *word) {
  size_t n = strlen(word);
  return strncmp(tag, word, n) == 0 && (tag[n] == '\0' || tag[n] == ' ');
}

/* Whether sql, which the server answered with this command tag, changed
 * the session for the statements after it (settings, prepared statements):
 * the connection is then not lent to another job. SET LOCAL, SET
 * TRANSACTION and SET CONSTRAINTS end with their transaction. */
static bool changes_session(const char *tag, const char *sql) {
  if (word_is(tag, "SET")) {
    while (*sql == ' ' || *sql == '\t' || *sql == '\n' || *sql == '\r') sql++;
    sql += strncasecmp(sql, "SET", 3) == 0 ? 3 : 0;
    while (*sql == ' ' || *sql == '\t' || *sql == '\n' || *sql == '\r') sql++;
    return strncasecmp(sql, "LOCAL", 5) != 0 && strncasecmp(sql, "TRANSACTION", 11) != 0 &&
           strncasecmp(sql, "CONSTRAINTS", 11) != 0;
  }
  return word_is(tag, "RESET") || word_is(tag, "DISCARD") || word_is(tag, "DEALLOCATE");
}

/* The batch on c finished (its sync point came back). */
static void command_done(struct conn *c) {
  PGresult *res = c->result;
  c->result = NULL;
  enum conn_state was = c->state;
  c->state = C_IDLE;
  bool ok = res && result_ok(res);
  if (was == C_SETUP) {
    if (!ok) {
      conn_fail(c, res ? PQresultErrorMessage(res) : "setting up the connection failed");
    } else {
      uv_timer_stop(&c->connecting);
      kick(c->pool);
    }
    PQclear(res);
    return;
  }
  struct req *r = c->req;
  c->req = NULL;
  r->conn = NULL;
  /* A pool query that left a transaction open (a BEGIN of its own, or an
   * error inside one) or changed the session must not hand that to the next
   * job: closing the connection ends both. */
  if (!c->checked_out && (c->reset_wanted || PQtransactionStatus(c->pg) != PQTRANS_IDLE))
    conn_close(c);
  if (!c->checked_out) kick(c->pool);
  if (ok) {
    r->done(r->data, (const pg_result *)res, NULL);
  } else {
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    char line[512];
    one_line(msg   ? msg
             : res ? PQresultErrorMessage(res)
                   : PQerrorMessage(c->pg),
             line, sizeof line);
    const struct req *culprit = c->failed ? c->failed : r;
    struct pg_error e = {.message = line, .sql = culprit != r ? culprit->sql : NULL};
    snprintf(e.sqlstate, sizeof e.sqlstate, "%s", state ? state : "XX000");
    /* a stale plan (0A000), or a statement a DEALLOCATE took (26000): the
     * next use prepares it anew */
    if (strcmp(e.sqlstate, "0A000") == 0 || strcmp(e.sqlstate, "26000") == 0)
      stmt_forget(c, culprit->sql);
    r->done(r->data, NULL, &e);
  }
  PQclear(res);
  req_free(r);
}

/* Takes one result of c's batch: the first error wins (its Parse failing
 * forgets the statement), else the last statement's result. */
static void take_result(struct conn *c, PGresult *res) {
  const struct req *q = c->req; /* the statement this result is of: NULL for BEGIN, setup */
  while (q && q->parse_step != c->step && q->exec_step != c->step) q = q->then;
  if (PQresultStatus(res) == PGRES_PIPELINE_ABORTED) {         /* after the error that stands */
    if (q && q->parse_step == c->step) stmt_forget(c, q->sql); /* never prepared */
    PQclear(res);
    return;
  }
  if (c->result && !result_ok(c->result)) {
    PQclear(res);
    return;
  }
  if (result_ok(res)) {
    if (q && q->exec_step == c->step && changes_session(PQcmdStatus(res), q->sql))
      c->reset_wanted = true;
  } else if (q) {
    if (q->parse_step == c->step) stmt_forget(c, q->sql);
    c->failed = q;
  }
  if (c->result) PQclear(c->result);
  c->result = res;
}

/* Reads what arrived on c; finishes its batch when complete. */
static void conn_read(struct conn *c) {
  if (!PQconsumeInput(c->pg)) {
    conn_fail(c, PQerrorMessage(c->pg));
    return;
  }
  PGnotify *n;
  while ((n = PQnotifies(c->pg)) != NULL) PQfreemem(n);
  if (c->state == C_IDLE) {
    if (PQstatus(c->pg) == CONNECTION_BAD) conn_fail(c, PQerrorMessage(c->pg));
    return;
  }
  while (!PQisBusy(c->pg)) {
    PGresult *res = PQgetResult(c->pg);
    if (res == NULL) { /* the end of one statement's results */
      if (++c->step > c->nsteps) {
        conn_fail(c, "the server's answers do not match the statements sent");
        return;
      }
      continue;
    }
    ExecStatusType st = PQresultStatus(res);
    if (st == PGRES_PIPELINE_SYNC) {
      PQclear(res);
      command_done(c);
      return;
    }
    if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH) {
      /* libpq would hand out this result forever: no COPY through ls.pg */
      PQclear(res);
      conn_fail(c, "COPY is not supported through ls.pg (the connection was closed)");
      return;
    }
    take_result(c, res);
  }
}

static void connect_step(struct conn *c) {
  PostgresPollingStatusType st = PQconnectPoll(c->pg);
  if (st == PGRES_POLLING_FAILED) {
    conn_fail(c, PQerrorMessage(c->pg));
    return;
  }
  if (st == PGRES_POLLING_OK) {
    c->state = C_SETUP;
    c->step = 0;
    c->nsteps = 1;
    if (!PQenterPipelineMode(c->pg) ||
        !PQsendQueryParams(c->pg, c->pool->setup, 0, NULL, NULL, NULL, NULL, 0) ||
        !PQpipelineSync(c->pg) || flush(c) != 0) {
      conn_fail(c, PQerrorMessage(c->pg));
      return;
    }
  } else {
    c->waits = st;
  }
  if (watch(c) != 0) conn_fail(c, "cannot watch the connection's socket");
}

static void on_poll(uv_poll_t *h, int status, int events) {
  struct conn *c = h->data;
  if (c->state == C_DOWN) return;
  if (status < 0) c->events = 0; /* libuv stopped the handle */
  if (c->state == C_CONNECTING) {
    connect_step(c);
    return;
  }
  /* On POLLERR (a reset connection) libuv stops the handle and calls back
   * with UV_EBADF: nothing would read the socket again, so the connection
   * ends here, with libpq's word for it when it has one. */
  if (status < 0) {
    if (PQconsumeInput(c->pg) && PQstatus(c->pg) != CONNECTION_BAD)
      conn_fail(c, uv_strerror(status));
    else
      conn_fail(c, PQerrorMessage(c->pg));
    return;
  }
  if ((events & UV_WRITABLE) && c->want_write) {
    if (flush(c) != 0) {
      conn_fail(c, PQerrorMessage(c->pg));
      return;
    }
    if (watch(c) != 0) {
      conn_fail(c, "cannot watch the connection's socket");
      return;
    }
  }
  if (events & UV_READABLE) conn_read(c);
}

/* ---- pg.h ---- */

/* A request with copies of q's text and parameters. */
static struct req *req_new(pg_pool *p, const struct pg_query *q) {
  size_t size = sizeof(struct req), sql_len = q ? strlen(q->sql) + 1 : 0;
  int n = q ? q->nparams : 0;
  size += (size_t)n * sizeof(char *) + sql_len;
  for (int i = 0; i < n; i++)
    if (q->params[i]) size += strlen(q->params[i]) + 1;
  struct req *r = calloc(1, size);
  if (r == NULL) return NULL;
  r->pool = p;
  r->params = (char **)(r + 1);
  char *at = (char *)(r->params + n);
  if (q) {
    r->sql = at;
    memcpy(at, q->sql, sql_len);
    at += sql_len;
    r->nparams = n;
    for (int i = 0; i < n; i++) {
      if (q->params[i] == NULL) continue;
      size_t l = strlen(q->params[i]) + 1;
      r->params[i] = at;
      memcpy(at, q->params[i], l);
      at += l;
    }
  }
  uv_timer_init(p->loop, &r->timer);
  r->timer.data = r;
  p->open_handles++;
  return r;
}

static void req_start_deadline(struct req *r, uint64_t timeout_ms) {
  r->timeout_ms = timeout_ms ? timeout_ms : r->pool->timeout_ms;
  uv_timer_start(&r->timer, on_deadline, r->timeout_ms, 0);
}

/* A request on p, its deadline running; NULL (said in err) when p is
 * closed or memory is short. */
static struct req *req_open(pg_pool *p, const struct pg_query *q, uint64_t timeout_ms, void *data,
                            char *err, size_t errlen) {
  if (p->closed) {
    snprintf(err, errlen, "the PostgreSQL client is closed");
    return NULL;
  }
  struct req *r = req_new(p, q);
  if (r == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  r->data = data;
  req_start_deadline(r, timeout_ms);
  return r;
}

int pg_query(pg_pool *p, const struct pg_query *q, pg_done_fn *done, void *data, char *err,
             size_t errlen) {
  struct req *r = req_open(p, q, q->timeout_ms, data, err, errlen);
  if (r == NULL) return -1;
  r->done = done;
  /* An idle connection takes it at once; else it waits for dispatch. */
  for (int i = 0; i < p->size && p->head == NULL; i++) {
    struct conn *c = &p->conns[i];
    if (c->state != C_IDLE || c->checked_out) continue;
    if (send_req(c, r) == 0) return 0;
    conn_close(c); /* broken: the query waits for another */
  }
  queue_push(p, r, false);
  kick(p);
  return 0;
}

pg_session *pg_session_take(pg_pool *p) {
  if (p->closed || p->head) return NULL; /* the waiting go first */
  for (int i = 0; i < p->size; i++)
    if (p->conns[i].state == C_IDLE && !p->conns[i].checked_out) return checkout(&p->conns[i]);
  return NULL;
}

int pg_session_open(pg_pool *p, uint64_t timeout_ms, pg_session_fn *ready, void *data, char *err,
                    size_t errlen) {
  struct req *r = req_open(p, NULL, timeout_ms, data, err, errlen);
  if (r == NULL) return -1;
  r->session = true;
  r->ready = ready;
  queue_push(p, r, false);
  kick(p);
  return 0;
}

int pg_session_query(pg_session *s, const struct pg_query *q, pg_done_fn *done, void *data,
                     char *err, size_t errlen) {
  struct conn *c = s->conn;
  pg_pool *p = c->pool;
  if (p->closed) {
    snprintf(err, errlen, "the PostgreSQL client is closed");
    return -1;
  }
  if (c->state != C_IDLE) {
    snprintf(err, errlen, "%s",
             c->state == C_DOWN ? "the connection was lost" : "a query is running");
    return -1;
  }
  struct req *r = req_new(p, q);
  if (r == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  r->done = done;
  r->data = data;
  req_start_deadline(r, q->timeout_ms);
  if (send_req(c, r) != 0) {
    one_line(PQerrorMessage(c->pg), err, errlen);
    conn_close(c);
    req_free(r);
    return -1;
  }
  return 0;
}

void pg_session_discard(pg_session *s) {
  struct conn *c = s->conn;
  req_free(c->deferred);
  c->deferred = c->deferred_last = NULL;
}

int pg_session_defer(pg_session *s, const struct pg_query *q, char *err, size_t errlen) {
  struct conn *c = s->conn;
  if (c->pool->closed || c->state == C_DOWN) {
    snprintf(err, errlen, "%s",
             c->pool->closed ? "the PostgreSQL client is closed" : "the connection was lost");
    return -1;
  }
  struct req *r = req_new(c->pool, q);
  if (r == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if (c->deferred_last)
    c->deferred_last->then = r;
  else
    c->deferred = r;
  c->deferred_last = r;
  return 0;
}

void pg_session_close(pg_session *s) {
  struct conn *c = s->conn;
  c->checked_out = false;
  c->begin_wanted = false; /* no statement ran: no transaction began */
  pg_session_discard(s);   /* never sent: the transaction ended without them */
  if (c->state != C_IDLE || c->reset_wanted || PQtransactionStatus(c->pg) != PQTRANS_IDLE) {
    /* mid-transaction or mid-query: only closing ends it for sure */
    struct req *r = conn_close(c);
    if (r) fail(r, PG_STATE_LOST, "the transaction was abandoned", true, false);
  }
  kick(c->pool);
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
    struct req *r = p->head;
    queue_remove(p, r);
    fail(r, PG_STATE_LOST, "the PostgreSQL client closed", true, false);
  }
  for (int i = 0; i < p->size; i++) {
    struct req *r = conn_close(&p->conns[i]);
    uv_close((uv_handle_t *)&p->conns[i].connecting, connecting_closed);
    if (r) fail(r, PG_STATE_LOST, "the PostgreSQL client closed", true, false);
  }
}

void pg_pool_free(pg_pool *p) {
  if (p == NULL) return;
  pg_pool_close(p);
  if (p->open_handles == 0)
    pool_release(p);
  else
    p->free_wanted = true;
}

pg_pool *pg_libpq_new(uv_loop_t *loop, const struct pg_options *o, char *err, size_t errlen) {
  const char *conninfo = o->conninfo ? o->conninfo : "";
  char *perr = NULL;
  PQconninfoOption *parsed = PQconninfoParse(conninfo, &perr);
  if (parsed == NULL) {
    char line[256], safe[512];
    one_line(perr ? perr : "out of memory", line, sizeof line);
    PQfreemem(perr);
    /* libpq's message quotes pieces of the text, which may be a password's:
     * with a secret in it, only the redacted settings are shown */
    pg_redact(conninfo, safe, sizeof safe);
    if (strcmp(safe, conninfo) == 0)
      snprintf(err, errlen, "invalid PostgreSQL settings: %s", line);
    else
      snprintf(err, errlen,
               "invalid PostgreSQL settings \"%s\": not a libpq connection string "
               "or postgresql:// URL",
               safe);
    return NULL;
  }
  PQconninfoFree(parsed);
  pg_pool *p = calloc(1, sizeof *p);
  if (p == NULL || (p->conninfo = strdup(conninfo)) == NULL) {
    free(p);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  p->loop = loop;
  p->size = o->size > 0 ? o->size : PG_POOL_SIZE;
  p->timeout_ms = o->timeout_ms ? o->timeout_ms : PG_TIMEOUT_MS;
  p->conns = calloc((size_t)p->size, sizeof *p->conns);
  if (p->conns == NULL) {
    free(p->conninfo);
    free(p);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  for (int i = 0; i < p->size; i++) {
    p->conns[i].pool = p;
    p->conns[i].fd = -1;
    p->conns[i].session.conn = &p->conns[i];
    uv_timer_init(loop, &p->conns[i].connecting);
    p->conns[i].connecting.data = &p->conns[i];
  }
  snprintf(p->setup, sizeof p->setup,
           "SELECT set_config('statement_timeout', '%llu', false), "
           "set_config('DateStyle', 'ISO, YMD', false), set_config('TimeZone', 'UTC', false), "
           "set_config('extra_float_digits', '1', false)",
           (unsigned long long)pg_statement_timeout(p->timeout_ms));
  uv_timer_init(loop, &p->kick);
  p->kick.data = p;
  p->open_handles = 1 + p->size; /* kick, each connection's deadline */
  return p;
}
