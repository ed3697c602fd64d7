/* pg: the seam between handlers (ls.pg) and PostgreSQL.
 *
 * A query (SQL text with $1..$n, text-format parameters, a deadline) goes in,
 * rows or the reason there are none come back. Queries run on a pool of
 * connections (pg_pool.h), on any free one, or on a session: a connection
 * checked out for one job, for the statements of a transaction.
 *
 * Rules every implementation keeps:
 * - a query accepted (return 0) completes exactly once: its callback receives
 *   a result, or res == NULL with err set (an SQL error, the connection lost,
 *   the deadline passed, the pool closed);
 * - the callback never runs inside the call that sent the query;
 * - a query refused (return -1) never calls back; err says why;
 * - the query's text and parameters are copied before the call returns;
 * - a result is the pool's, valid only during the callback;
 * - pg_pool_close fails every query in flight or waiting and accepts no
 *   more; the pool is freed with pg_pool_free once closed, after every
 *   session was given back. */
#ifndef LUASTREAM_PG_H
#define LUASTREAM_PG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pg_query {
  const char *sql;
  int nparams;
  const char *const *params; /* text format, NUL-terminated; NULL: SQL NULL */
  uint64_t timeout_ms;       /* queueing for a connection and connecting included */
};

/* Why a query has no result. sqlstate is the server's code, or one of
 * PostgreSQL's own codes for what happened on the client's side:
 * PG_STATE_CONNECT, PG_STATE_LOST, PG_STATE_TIMEOUT. */
struct pg_error {
  char sqlstate[6];
  const char *message; /* the primary message, one line; never the password */
  const char *sql;     /* the statement that failed when not the query itself (a deferred
                          one, pg_session_defer), else NULL */
  bool lost;           /* the connection failed: the query may or may not have run */
  bool timed_out;      /* the client's deadline passed (the connection was closed) */
};

#define PG_STATE_CONNECT "08001" /* sqlclient_unable_to_establish_sqlconnection */
#define PG_STATE_LOST "08006"    /* connection_failure */
#define PG_STATE_TIMEOUT "57014" /* query_canceled, as the server's statement_timeout */

typedef struct pg_result pg_result;

int pg_result_rows(const pg_result *r);
int pg_result_columns(const pg_result *r);
const char *pg_result_name(const pg_result *r, int col);
uint32_t pg_result_type(const pg_result *r, int col); /* the column's type OID */
/* The value's text (NUL-terminated) and its length, or NULL for SQL NULL. */
const char *pg_result_value(const pg_result *r, int row, int col, size_t *len);
/* Rows the statement inserted, updated, deleted, selected...; 0 when it
 * says none (CREATE, BEGIN). */
double pg_result_affected(const pg_result *r);

/* res valid during the call only; err NULL with a result, else why none. */
typedef void pg_done_fn(void *data, const pg_result *res, const struct pg_error *err);

typedef struct pg_pool pg_pool;
typedef struct pg_session pg_session;

/* s NULL with err set when no connection could be had in time. A session
 * given to a callback whose caller went away must still be closed. */
typedef void pg_session_fn(void *data, pg_session *s, const struct pg_error *err);

/* Sends q on a free connection of the pool (connecting one when none is
 * free and the pool is not full; else q waits). Returns 0, or -1 (closed,
 * out of memory) with a reason in err. */
int pg_query(pg_pool *p, const struct pg_query *q, pg_done_fn *done, void *data, char *err,
             size_t errlen);
/* Checks out a connection for one transaction, within timeout_ms: its
 * first query goes after a BEGIN, in the same round trip, and answers with
 * its own result or the BEGIN's error. A session closed before any query
 * began no transaction. Returns 0, or -1 as pg_query. */
int pg_session_open(pg_pool *p, uint64_t timeout_ms, pg_session_fn *ready, void *data, char *err,
                    size_t errlen);
/* A session at once, when a connection is idle and nothing waits for one;
 * else NULL (pg_session_open then waits for one). */
pg_session *pg_session_take(pg_pool *p);
/* pg_query on the session's connection, one query at a time. -1 also when
 * the connection was lost (the transaction is gone with it). */
int pg_session_query(pg_session *s, const struct pg_query *q, pg_done_fn *done, void *data,
                     char *err, size_t errlen);
/* Keeps q (copied) for the session's next query, which sends it first, in
 * the same round trip; its result is dropped, its error is that query's
 * answer (pg_error.sql names it). For statements whose result the caller
 * does not need: a transaction's writes go with its COMMIT. -1 when the
 * connection was lost or the pool closed. */
int pg_session_defer(pg_session *s, const struct pg_query *q, char *err, size_t errlen);
/* Drops the statements deferred and not sent yet (a transaction rolling
 * back). */
void pg_session_discard(pg_session *s);
/* Gives the connection back: kept when it is idle outside a transaction
 * and no statement changed its settings (SET, RESET, DISCARD, DEALLOCATE),
 * else closed (a query in flight then fails, as any abandoned query). The
 * pool's own queries follow the same rule. */
void pg_session_close(pg_session *s);

void pg_pool_close(pg_pool *p);
void pg_pool_free(pg_pool *p);

/* ---- pure helpers (pg.c) ---- */

/* conninfo with its password replaced by "***": a "password=..." keyword
 * (quoted or not) and the password of a postgresql:// URL's userinfo or of
 * its ?password= parameter. Into out (always terminated; cut at len). What
 * messages and logs show. */
const char *pg_redact(const char *conninfo, char *out, size_t len);

/* The beginning of sql for messages: its first words (at most max - 1
 * bytes, whitespace runs as one space, "..." when cut). */
const char *pg_sql_head(const char *sql, char *out, size_t max);

/* The SQLSTATE a failure's text starts with ("23505: duplicate key ..."):
 * its five characters (digits and capital letters) followed by ": ", into
 * state (NUL-terminated); false, state "", when text does not start so. */
bool pg_sqlstate_of(const char *text, char state[6]);

/* How a value of a type reaches Lua. */
enum pg_value_kind { PG_VALUE_STRING, PG_VALUE_NUMBER, PG_VALUE_BOOLEAN };

struct pg_value {
  enum pg_value_kind kind;
  double number;
  bool boolean;
  const char *str; /* PG_VALUE_STRING: the text itself, or buf */
  size_t len;
};

/* Room pg_value_from_text may need in buf beyond the text's length. */
#define PG_VALUE_SLACK 8

/* The value of a column of type oid from its text (DateStyle ISO, TimeZone
 * UTC): int2/int4/int8/oid a number when exact (|v| <= 2^53) else its
 * digits; numeric a number when its text is an integer literal up to 2^53
 * else the exact text; float4/float8 a number; bool a boolean; bytea the raw
 * bytes (decoded from hex); timestamptz "YYYY-MM-DDTHH:MM:SS[.ffffff]Z",
 * timestamp the same without the Z; anything else its text. buf holds at
 * least len + PG_VALUE_SLACK bytes. */
void pg_value_from_text(uint32_t oid, const char *text, size_t len, char *buf, struct pg_value *v);

/* x as a parameter's text into out (at least 32 bytes): integral values as
 * the integer (no exponent) when |x| < 2^63, else the fewest digits that read
 * back as x ("Infinity", "-Infinity", "NaN" as PostgreSQL writes them).
 * Returns the length. */
size_t pg_format_number(double x, char *out, size_t len);

#endif
