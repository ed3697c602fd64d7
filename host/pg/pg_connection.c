/* pg_connection: one libpq connection on libuv; see pg_connection.h. The
 * only file in the project that includes libpq.
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
#include "pg_connection.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define STEP_NONE (-1)

struct pg_connection_poll {
  uv_poll_t h; /* first: the close callback gets it; data is the connection */
  struct pg_handles *handles;
};

static void changed(struct pg_connection *c) { c->shared->changed(c->shared->own); }

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

/* ---- handles ---- */

static void poll_closed(uv_handle_t *h) {
  struct pg_connection_poll *pl = (struct pg_connection_poll *)h;
  struct pg_handles *handles = pl->handles;
  free(pl);
  pg_handles_closed(handles);
}

static void connecting_closed(uv_handle_t *h) {
  pg_handles_closed(((struct pg_connection *)h->data)->shared->handles);
}

/* ---- failures ---- */

/* libpq's message on one line: whitespace runs as one space, none at the
 * ends. */
static void one_line(const char *msg, char *out, size_t len) {
  if (msg == NULL || *msg == '\0') msg = "unknown error";
  size_t at = 0;
  bool space = false, line = false;
  for (const char *q = msg; *q && at + 3 < len; q++) {
    if (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r') {
      space = at > 0;
      line = line || (at > 0 && *q == '\n');
      continue;
    }
    /* libpq's next line is a sentence of its own ("Connection refused\n\tIs
     * the server running ..."): end the one before it */
    if (line && !strchr(".:;,!?", out[at - 1])) out[at++] = '.';
    if (space) out[at++] = ' ';
    space = line = false;
    out[at++] = *q;
  }
  out[at] = '\0';
}

struct pg_request *pg_connection_close(struct pg_connection *c) {
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
  c->state = PG_CONNECTION_DOWN;
  uv_timer_stop(&c->connecting);
  c->events = 0;
  c->want_write = false;
  c->begin_wanted = c->reset_wanted = false;
  pg_request_free(c->deferred);
  c->deferred = c->deferred_last = NULL;
  c->failed = NULL;
  struct pg_request *r = c->req;
  c->req = NULL;
  if (r) r->conn = NULL;
  return r;
}

static bool result_ok(const PGresult *res) {
  ExecStatusType st = PQresultStatus(res);
  return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY;
}

/* c's connection failed: its query (or its connecting) fails with why. */
static void conn_fail(struct pg_connection *c, const char *why) {
  bool connecting = c->state == PG_CONNECTION_CONNECTING || c->state == PG_CONNECTION_SETUP;
  /* the server's reason when it gave one as it went (a FATAL error:
   * terminated, shutting down) */
  const char *severity =
      c->result ? PQresultErrorField(c->result, PG_DIAG_SEVERITY_NONLOCALIZED) : NULL;
  const char *reason = c->result ? PQresultErrorField(c->result, PG_DIAG_MESSAGE_PRIMARY) : NULL;
  if (reason && severity && (strcmp(severity, "FATAL") == 0 || strcmp(severity, "PANIC") == 0))
    why = reason;
  one_line(why, c->why, sizeof c->why);
  struct pg_request *r = pg_connection_close(c);
  if (r) pg_request_fail(r, PG_STATE_LOST, c->why, true, false);
  if (connecting) c->shared->connect_failed(c->shared->own, c->why);
  changed(c);
}

/* ---- the socket ---- */

static void on_poll(uv_poll_t *h, int status, int events);

/* Watches c's socket for what its state waits for. */
static int watch(struct pg_connection *c) {
  int fd = PQsocket(c->pg);
  if (c->poll && c->fd != fd) {
    uv_close((uv_handle_t *)&c->poll->h, poll_closed);
    c->poll = NULL;
  }
  if (c->poll == NULL) {
    struct pg_connection_poll *pl = malloc(sizeof *pl);
    if (pl == NULL) return -1;
    if (uv_poll_init_socket(c->shared->handles->loop, &pl->h, fd) != 0) {
      free(pl);
      return -1;
    }
    pl->handles = c->shared->handles;
    pl->h.data = c;
    c->shared->handles->open++;
    c->poll = pl;
    c->fd = fd;
    c->events = 0;
  }
  int ev = UV_READABLE;
  if (c->state == PG_CONNECTION_CONNECTING)
    ev = c->waits == PGRES_POLLING_WRITING ? UV_WRITABLE : UV_READABLE;
  else if (c->want_write)
    ev |= UV_WRITABLE;
  /* unchanged: uv_poll_start would still cost an epoll_ctl. Not while
   * connecting: libpq may have moved to a new socket (the next address)
   * under the same number, which epoll has dropped with the old one. */
  if (ev == c->events && c->state != PG_CONNECTION_CONNECTING) return 0;
  if (uv_poll_start(&c->poll->h, ev, on_poll) != 0) return -1;
  c->events = ev;
  return 0;
}

static int flush(struct pg_connection *c) {
  int rc = PQflush(c->pg);
  if (rc < 0) return -1;
  c->want_write = rc == 1;
  return 0;
}

/* ---- queries ---- */

static int stmt_find(const struct pg_connection *c, const char *sql) {
  for (int i = 0; i < c->nstmts; i++)
    if (strcmp(c->stmts[i].sql, sql) == 0) return i;
  return -1;
}

/* Forgets sql's prepared statement: the server refuses to run it again
 * ("cached plan must not change result type" after a table it reads
 * changed), so the next use prepares it anew, under a new name. */
static void stmt_forget(struct pg_connection *c, const char *sql) {
  int i = stmt_find(c, sql);
  if (i < 0) return;
  free(c->stmts[i].sql);
  c->stmts[i] = c->stmts[--c->nstmts];
}

/* Ends a batch: the sync point, sent. */
static int send_sync(struct pg_connection *c) {
  return PQpipelineSync(c->pg) && flush(c) == 0 && watch(c) == 0 ? 0 : -1;
}

/* Adds r's statement to c's batch: its prepared statement; one not
 * prepared yet is prepared in the same batch while the cache has room, else
 * sent unnamed. 0 when libpq refuses. */
static int send_stmt(struct pg_connection *c, struct pg_request *r) {
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
    c->stmts[c->nstmts++] =
        (struct pg_connection_stmt){copy, c->next_stmt++}; /* forgotten if the Parse fails */
  }
  const char *const *params = (const char *const *)r->params;
  r->exec_step = c->nsteps++;
  if (ok && i >= 0) {
    snprintf(name, sizeof name, "ls%u", c->stmts[i].id);
    return PQsendQueryPrepared(c->pg, name, r->nparams, params, NULL, NULL, 0);
  }
  return ok && PQsendQueryParams(c->pg, r->sql, r->nparams, NULL, params, NULL, NULL, 0);
}

/* pg_connection_send's batch. -1 when libpq refuses (the connection is
 * broken: the caller closes it); r is then not attached. */
static int send_req(struct pg_connection *c, struct pg_request *r) {
  int ok = 1;
  c->step = c->nsteps = 0;
  c->failed = NULL;
  if (c->begin_wanted) {
    ok = PQsendQueryParams(c->pg, "BEGIN", 0, NULL, NULL, NULL, NULL, 0);
    c->nsteps++;
  }
  for (struct pg_request *d = c->deferred; d && ok; d = d->then) ok = send_stmt(c, d);
  if (!ok || !send_stmt(c, r) || send_sync(c) != 0) return -1;
  c->begin_wanted = false;
  r->then = c->deferred; /* r carries them until its answer */
  c->deferred = c->deferred_last = NULL;
  c->state = PG_CONNECTION_BUSY;
  c->req = r;
  r->conn = c;
  return 0;
}

/* libpq's default writes NOTICEs and WARNINGs to stderr, which is the
 * host's log: a line in no log format. Handlers get results and errors;
 * the server's notices ("already exists, skipping") are dropped. */
static void drop_notice(void *arg, const char *message) {
  (void)arg;
  (void)message;
}

static void on_connect_deadline(uv_timer_t *t) {
  struct pg_connection *c = t->data;
  char why[128];
  snprintf(why, sizeof why, "no connection within %llums (the server did not answer)",
           (unsigned long long)c->shared->timeout_ms);
  if (c->state == PG_CONNECTION_CONNECTING || c->state == PG_CONNECTION_SETUP) conn_fail(c, why);
}

int pg_connection_start(struct pg_connection *c, char *err, size_t errlen) {
  c->pg = PQconnectStart(c->shared->conninfo);
  if (c->pg == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if (PQstatus(c->pg) == CONNECTION_BAD) {
    one_line(PQerrorMessage(c->pg), err, errlen);
    pg_connection_close(c);
    return -1;
  }
  PQsetnonblocking(c->pg, 1);
  PQsetNoticeProcessor(c->pg, drop_notice, NULL);
  c->state = PG_CONNECTION_CONNECTING;
  c->waits = PGRES_POLLING_WRITING;
  if (watch(c) != 0) {
    snprintf(err, errlen, "cannot watch the connection's socket");
    pg_connection_close(c);
    return -1;
  }
  uv_timer_start(&c->connecting, on_connect_deadline, c->shared->timeout_ms, 0);
  return 0;
}

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
static void command_done(struct pg_connection *c) {
  PGresult *res = c->result;
  c->result = NULL;
  enum pg_connection_state was = c->state;
  c->state = PG_CONNECTION_IDLE;
  bool ok = res && result_ok(res);
  if (was == PG_CONNECTION_SETUP) {
    if (!ok) {
      conn_fail(c, res ? PQresultErrorMessage(res) : "setting up the connection failed");
    } else {
      uv_timer_stop(&c->connecting);
      changed(c);
    }
    PQclear(res);
    return;
  }
  struct pg_request *r = c->req;
  c->req = NULL;
  r->conn = NULL;
  /* A pool query that left a transaction open (a BEGIN of its own, or an
   * error inside one) or changed the session must not hand that to the next
   * job: closing the connection ends both. */
  if (!c->checked_out && (c->reset_wanted || PQtransactionStatus(c->pg) != PQTRANS_IDLE))
    pg_connection_close(c);
  if (!c->checked_out) changed(c);
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
    const struct pg_request *culprit = c->failed ? c->failed : r;
    struct pg_error e = {.message = line, .sql = culprit != r ? culprit->sql : NULL};
    snprintf(e.sqlstate, sizeof e.sqlstate, "%s", state ? state : "XX000");
    /* a stale plan (0A000), or a statement a DEALLOCATE took (26000): the
     * next use prepares it anew */
    if (strcmp(e.sqlstate, "0A000") == 0 || strcmp(e.sqlstate, "26000") == 0)
      stmt_forget(c, culprit->sql);
    r->done(r->data, NULL, &e);
  }
  PQclear(res);
  pg_request_free(r);
}

/* Takes one result of c's batch: the first error wins (its Parse failing
 * forgets the statement), else the last statement's result. */
static void take_result(struct pg_connection *c, PGresult *res) {
  const struct pg_request *q = c->req; /* the statement this result is of: NULL for BEGIN, setup */
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
static void conn_read(struct pg_connection *c) {
  if (!PQconsumeInput(c->pg)) {
    conn_fail(c, PQerrorMessage(c->pg));
    return;
  }
  PGnotify *n;
  while ((n = PQnotifies(c->pg)) != NULL) PQfreemem(n);
  if (c->state == PG_CONNECTION_IDLE) {
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

static void connect_step(struct pg_connection *c) {
  PostgresPollingStatusType st = PQconnectPoll(c->pg);
  if (st == PGRES_POLLING_FAILED) {
    conn_fail(c, PQerrorMessage(c->pg));
    return;
  }
  if (st == PGRES_POLLING_OK) {
    c->state = PG_CONNECTION_SETUP;
    c->step = 0;
    c->nsteps = 1;
    if (!PQenterPipelineMode(c->pg) ||
        !PQsendQueryParams(c->pg, c->shared->setup, 0, NULL, NULL, NULL, NULL, 0) ||
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
  struct pg_connection *c = h->data;
  if (c->state == PG_CONNECTION_DOWN) return;
  if (status < 0) c->events = 0; /* libuv stopped the handle */
  if (c->state == PG_CONNECTION_CONNECTING) {
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

/* ---- pg_connection.h ---- */

void pg_connection_init(struct pg_connection *c, const struct pg_connection_shared *shared) {
  *c = (struct pg_connection){.shared = shared, .fd = -1};
  uv_timer_init(shared->handles->loop, &c->connecting);
  c->connecting.data = c;
  shared->handles->open++;
}

int pg_connection_send(struct pg_connection *c, struct pg_request *r, char *err, size_t errlen) {
  if (send_req(c, r) == 0) return 0;
  one_line(PQerrorMessage(c->pg), err, errlen);
  pg_connection_close(c);
  return -1;
}

struct pg_request *pg_connection_release(struct pg_connection *c) {
  struct pg_request *r = pg_connection_close(c);
  uv_close((uv_handle_t *)&c->connecting, connecting_closed);
  return r;
}

void pg_connection_checkout(struct pg_connection *c) {
  c->checked_out = true;
  c->begin_wanted = true;
}

void pg_connection_checkin(struct pg_connection *c) {
  c->checked_out = false;
  c->begin_wanted = false;
  pg_connection_discard(c);
}

bool pg_connection_reusable(const struct pg_connection *c) {
  return c->state == PG_CONNECTION_IDLE && !c->reset_wanted &&
         PQtransactionStatus(c->pg) == PQTRANS_IDLE;
}

void pg_connection_defer(struct pg_connection *c, struct pg_request *r) {
  if (c->deferred_last)
    c->deferred_last->then = r;
  else
    c->deferred = r;
  c->deferred_last = r;
}

void pg_connection_discard(struct pg_connection *c) {
  pg_request_free(c->deferred);
  c->deferred = c->deferred_last = NULL;
}

int pg_connection_check_settings(const char *conninfo, char *err, size_t errlen) {
  char *perr = NULL;
  PQconninfoOption *parsed = PQconninfoParse(conninfo, &perr);
  if (parsed) {
    PQconninfoFree(parsed);
    return 0;
  }
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
  return -1;
}
