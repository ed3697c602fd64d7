/* pg_request: what the pool is asked for (pg.h), from the call to its one
 * answer: a query (its SQL text and parameters copied) or a session wanted,
 * with its deadline timer, waiting in the pool's queue (pg_pool.c) or running
 * on a connection (pg_connection.c). No libpq here.
 *
 * Who does what:
 * - pg_pool.c makes a request, starts its deadline, queues it and hands it
 *   to a connection;
 * - pg_connection.c sends it and answers it (done) or fails it;
 * - pg_request_fail answers with an error and frees: every request is
 *   answered exactly once, then freed with pg_request_free.
 *
 * Every uv handle of a pool (its requests' timers, its connections' polls
 * and timers, its own) is counted in one struct pg_handles: the pool's memory
 * goes only after the last of them has closed. */
#ifndef LUASTREAM_PG_REQUEST_H
#define LUASTREAM_PG_REQUEST_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "pg.h"

/* The uv handles of one pool still open. */
struct pg_handles {
  uv_loop_t *loop;
  int open;                      /* handles made and not closed yet */
  void (*all_closed)(void *own); /* once open reaches 0, when set (the pool's free) */
  void *own;
};

/* One of h's handles closed: calls all_closed after the last one. */
void pg_handles_closed(struct pg_handles *h);

struct pg_connection;

struct pg_request {
  struct pg_handles *handles;
  bool session; /* pg_session_open's, else a query */
  pg_done_fn *done;
  pg_session_fn *ready;
  void *data;
  uint64_t timeout_ms;
  uv_timer_t timer;               /* the deadline (the pool starts it); data is the request */
  struct pg_connection *conn;     /* running on, else NULL */
  struct pg_request *prev, *next; /* the pool's waiting queue */
  struct pg_request *then;        /* statements deferred before it, sent in its batch first */
  int parse_step, exec_step;      /* where its Parse and its execution sit in the batch */
  char *sql;                      /* points into the same allocation */
  int nparams;
  char **params;
};

/* A request with copies of q's text and parameters (q NULL: a session's),
 * its timer made on h's loop and not started; NULL when memory is short. */
struct pg_request *pg_request_new(struct pg_handles *h, const struct pg_query *q);

/* Frees r and the deferred statements it carries (then), once their
 * timers have closed. Never calls back. */
void pg_request_free(struct pg_request *r);

/* Answers r with an error (its state, e.g. PG_STATE_LOST, and message;
 * lost: the connection failed; timed_out: the deadline passed), then frees
 * it. r must be detached from its connection and the queue. */
void pg_request_fail(struct pg_request *r, const char *state, const char *msg, bool lost,
                     bool timed_out);

#endif
