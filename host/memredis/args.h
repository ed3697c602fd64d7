/* args: what every command of the in-memory server shares about its
 * arguments: the call itself, stream IDs and their arithmetic, Redis' number
 * and ID syntaxes, and the error replies Redis words the same way for every
 * command. Nothing here knows a key or a data type. */
#ifndef LUASTREAM_MEMREDIS_ARGS_H
#define LUASTREAM_MEMREDIS_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker.h"

/* A stream ID. */
typedef struct {
  uint64_t ms, seq;
} msid;

/* What a command that wants to block (XREADGROUP, DEBUG SLEEP) leaves in
 * the call. */
struct ms_block {
  long long timeout_ms; /* 0: forever */
  long long claim_ms;   /* CLAIM min-idle-time (8.4), -1 without */
  int first_key, nkeys; /* the keys it waits on: argv[first_key ...] */
  bool ok_at_timeout;   /* answer +OK, not nil, when the time is up (DEBUG SLEEP) */
};

/* One command invocation. */
struct ms_call {
  int argc;
  const char **argv;
  const size_t *argvlen;
  uint64_t now;          /* Unix ms, one reading per command */
  bool script;           /* from EVAL: never blocks */
  bool multi;            /* inside EXEC: never blocks */
  bool blocked;          /* out: XREADGROUP returned NULL to block */
  struct ms_block block; /* out: valid when blocked */
};

bool ms_arg_is(const struct ms_call *c, int i, const char *word);
/* argv[i] is exactly the one character ch ("$", ">", "*" ...). */
bool ms_arg_char(const struct ms_call *c, int i, char ch);

/* memcmp order, a shorter string first on a common prefix. */
int ms_bytecmp(const char *a, size_t alen, const char *b, size_t blen);

/* ---- numbers and IDs ---- */

/* Redis' strict integer syntax (string2ll): no '+', no leading zeros. */
bool ms_parse_ll(const char *s, size_t len, long long *out);
/* Parses an ID. strict refuses "-" and "+"; a missing seq becomes
 * missing_seq. seq_star (may be NULL) accepts "ms-*" and reports it. */
bool ms_parse_id(const char *s, size_t len, msid *out, uint64_t missing_seq, bool strict,
                 bool *seq_star);
/* An interval bound: "(" makes it exclusive (then parsed strictly). */
bool ms_parse_range_id(const char *s, size_t len, msid *out, bool *excl, uint64_t missing_seq);

int ms_idcmp(msid a, msid b);
bool ms_id_is_zero(msid id);
bool ms_id_is_max(msid id); /* 18446744073709551615-18446744073709551615 */
bool ms_id_incr(msid *id);  /* false at the maximal id */
bool ms_id_decr(msid *id);  /* false at 0-0 */

/* ---- replies every command words alike ---- */

bk_reply *ms_err_syntax(void);
bk_reply *ms_err_int(void);
bk_reply *ms_err_badid(void);
bk_reply *ms_err_wrongtype(void);
bk_reply *ms_err_arity(const char *cmd);
bk_reply *ms_reply_id(msid id);

#endif
