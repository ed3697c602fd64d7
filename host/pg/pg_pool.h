/* pg_pool: the PostgreSQL client of a running host (pg.h's seam): a pool of
 * at most size connections (pg_connection.h: libpq in pipeline mode on the
 * host's libuv loop) for the whole host, made when queries need them, each
 * set up with statement_timeout (the query timeout less a margin, so the
 * server gives up first), DateStyle ISO and TimeZone UTC.
 *
 * The pool lends its connections: a query goes to any idle one, a session
 * (a transaction) checks one out until it is given back; what finds none
 * idle waits in a queue, first come first served, while connections are
 * made for it. Every query has a client-side deadline too, waiting and
 * connecting included: past it the query fails and, when it was running,
 * its connection is closed (libpq has no asynchronous cancel) and made again
 * later. A connection the server closed (a restart) fails its query in
 * flight, and the next query connects anew; one not made within the
 * timeout is given up; when no connection can be made the waiting fail at
 * once rather than at their deadline. */
#ifndef LUASTREAM_PG_POOL_H
#define LUASTREAM_PG_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "pg.h"

struct pg_options {
  const char *conninfo; /* any libpq connection string or URL; "": libpq's PG* variables */
  int size;             /* connections at most; 0: PG_POOL_SIZE */
  uint64_t timeout_ms;  /* a query's deadline when it gives none; 0: PG_TIMEOUT_MS */
};

#define PG_POOL_SIZE 8
#define PG_TIMEOUT_MS 10000

/* A pool on loop; NULL with a reason in err (the settings do not parse;
 * never the password). Close it (pg_pool_close) before the loop's last run;
 * pg_pool_free then releases the rest once its handles have closed. */
pg_pool *pg_pool_new(uv_loop_t *loop, const struct pg_options *o, char *err, size_t errlen);

/* Whether a query is waiting or running (the test harness runs the loop
 * until none is). */
bool pg_pool_busy(const pg_pool *p);

/* The statement_timeout a connection gets for a query deadline of
 * timeout_ms: a little less, so that the server's error comes first. */
uint64_t pg_statement_timeout(uint64_t timeout_ms);

#endif
