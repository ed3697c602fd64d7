/* pg_connection: one PostgreSQL connection of the pool (pg_pool.h), libpq's
 * asynchronous API driven by the host's libuv loop through one uv_poll.
 * Nothing blocks the loop: the connection is made with
 * PQconnectStart/PQconnectPoll, within a deadline (a server that accepts and
 * never answers must not hold the pool's slot), set up with the pool's
 * settings, and then runs in libpq's pipeline mode: a request
 * (pg_request.h) is one round trip carrying what goes before it (a
 * transaction's BEGIN, its deferred statements, the statement's first
 * Parse), sent with PQsendQueryPrepared (or PQsendQueryParams once the
 * connection's statement cache is full) and read with
 * PQconsumeInput/PQisBusy/PQgetResult as the socket becomes readable.
 *
 * A connection answers its running request itself (its result, or its
 * error) and tells the pool through the hooks of struct pg_connection_shared when
 * it came up idle or went down; it never calls the pool otherwise. The only
 * file that includes libpq. */
#ifndef LUASTREAM_PG_CONNECTION_H
#define LUASTREAM_PG_CONNECTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "pg_request.h"

#define PG_STATEMENTS_KEPT 64 /* prepared statements per connection */

/* What the pool's connections share: set once by the pool. */
struct pg_connection_shared {
  struct pg_handles *handles; /* the pool's: each connection's poll and timer counted */
  const char *conninfo;
  const char *setup;   /* the settings of a new connection, one statement */
  uint64_t timeout_ms; /* making a connection, setup included, within this */
  /* A connection is idle or down now: requests waiting may go. Called from
   * the loop only, never inside a call of this file's. */
  void (*changed)(void *own);
  /* Making a connection failed (why): requests waiting for one may have
   * none coming. */
  void (*connect_failed)(void *own, const char *why);
  void *own;
};

enum pg_connection_state {
  PG_CONNECTION_DOWN,       /* no connection */
  PG_CONNECTION_CONNECTING, /* PQconnectPoll until OK */
  PG_CONNECTION_SETUP,      /* the settings' batch runs */
  PG_CONNECTION_IDLE,       /* ready for a request */
  PG_CONNECTION_BUSY        /* the batch of the request in req runs */
};

struct pg_conn; /* libpq's PGconn (libpq-fe.h) */
struct pg_connection_poll;
struct pg_connection_stmt {
  char *sql;
  unsigned id; /* prepared as "ls<id>" */
};

/* The fields the pool reads: state, checked_out, req. The rest is this
 * file's. */
struct pg_connection {
  const struct pg_connection_shared *shared;
  enum pg_connection_state state;
  bool checked_out;       /* lent for a session (pg_connection_checkout) */
  struct pg_request *req; /* running */
  struct pg_connection_poll *poll;
  struct pg_conn *pg;    /* libpq's PGconn */
  uv_timer_t connecting; /* the deadline of making it */
  int fd;
  int events;        /* what the poll watches */
  int waits;         /* PG_CONNECTION_CONNECTING: what PQconnectPoll asked for */
  bool want_write;   /* PQflush has more to send */
  bool begin_wanted; /* the session's first statement goes after a BEGIN */
  bool reset_wanted; /* a statement changed the session: close when given back */
  struct pg_request *deferred, *deferred_last; /* the session's, for its next batch */
  pg_result *result;               /* libpq's PGresult: the batch's first error, else its result */
  const struct pg_request *failed; /* the statement whose error result holds */
  int step, nsteps;                /* statements of the batch answered so far, sent */
  struct pg_connection_stmt stmts[PG_STATEMENTS_KEPT];
  int nstmts;
  unsigned next_stmt; /* the id of the next one prepared */
  char why[256];      /* the last failure, for the requests it fails */
};

/* c down, with its connecting timer made on the shared loop (one handle
 * counted). */
void pg_connection_init(struct pg_connection *c, const struct pg_connection_shared *shared);

/* Starts making c's connection (c down). -1 with a reason in err when it
 * cannot start (c stays down). */
int pg_connection_start(struct pg_connection *c, char *err, size_t errlen);

/* Sends r on c (idle) as one batch: a BEGIN when the session wants one, the
 * session's deferred statements, r's statement, a sync point; r then runs
 * on c until answered. -1 when libpq refuses: the connection was broken; it
 * is closed, r is not attached, and err says why. */
int pg_connection_send(struct pg_connection *c, struct pg_request *r, char *err, size_t errlen);

/* Closes c's connection (c down; made again by pg_connection_start); returns its
 * running request, detached, for the caller to fail. Never calls back. */
struct pg_request *pg_connection_close(struct pg_connection *c);

/* pg_connection_close, and closes c's timer: c is not used again. */
struct pg_request *pg_connection_release(struct pg_connection *c);

/* c (idle) lent for one transaction: its first statement goes after a
 * BEGIN. */
void pg_connection_checkout(struct pg_connection *c);

/* c given back (pg_connection_checkout): no longer lent, no BEGIN wanted
 * (no statement ran: no transaction began), its deferred statements dropped
 * (never sent: the transaction ended without them). */
void pg_connection_checkin(struct pg_connection *c);

/* Whether c, given back, may be lent again: idle, outside a transaction,
 * no statement changed its settings. */
bool pg_connection_reusable(const struct pg_connection *c);

/* Keeps r (a statement) for c's next batch, sent before its request. */
void pg_connection_defer(struct pg_connection *c, struct pg_request *r);

/* Drops the statements deferred and not sent yet. */
void pg_connection_discard(struct pg_connection *c);

/* 0 when conninfo parses as libpq settings, else -1 with a reason in err
 * that never shows a password. */
int pg_connection_check_settings(const char *conninfo, char *err, size_t errlen);

#endif
