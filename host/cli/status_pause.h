/* status_pause: a group's pause as `luastream status` and the web console
 * show it, from one HGETALL of its pause key (flow_keys.h; SCRIPT_PAUSE
 * writes it) and the server's TIME of the same refresh. The state follows
 * the hosts' look (keepalive.lua): paused until its until_ms (none: until
 * resumed); past it, a breaker's pause is half-open (one entry probes), an
 * operator's is over (its key expiring). */
#ifndef LUASTREAM_STATUS_PAUSE_H
#define LUASTREAM_STATUS_PAUSE_H

#include <stdbool.h>
#include <stdio.h>

#include "broker.h"

enum st_pause_state { ST_RUNNING, ST_PAUSED, ST_HALF_OPEN };

struct st_pause {
  char *key;                 /* the pause key (NULL: not asked, a stream without group) */
  char *stream;              /* the stream it is named by (a partitioned handler's base stream) */
  bool read;                 /* HGETALL answered */
  enum st_pause_state state; /* after status_pause_settle */
  char kind[16];             /* "manual" or "breaker"; "" when there is none */
  char *reason, *by, *probe; /* NULL when absent */
  long long since_ms, until_ms; /* Unix ms by the server's clock; until_ms -1: until resumed */
  long long left_ms;            /* until_ms - now; -1: until resumed or unknown */
  long long trips;              /* the breaker's, 0 for an operator's pause */
  long long now_ms;             /* status_pause_settle's; -1 unknown */
};

/* The pause key of stream's group (base: the stream the hosts name it by,
 * a partitioned handler's base stream). Out of memory ends the program. */
void status_pause_init(struct st_pause *p, const char *base, const char *group);
void status_pause_free(struct st_pause *p);

/* HGETALL's reply; false when it is an error (the caller says so). */
bool status_pause_take(struct st_pause *p, const bk_reply *r);

/* The state at now_ms (the server's; < 0 unknown: a pause with until_ms is
 * taken as still on). */
void status_pause_settle(struct st_pause *p, long long now_ms);

/* One line saying the pause (a new string), e.g. "paused by NAME 2m ago,
 * until resumed: REASON"; NULL while the group runs. */
char *status_pause_text(const struct st_pause *p);

/* The JSON value: null while running, else {"state", "kind", "reason",
 * "by", "since_ms", "until_ms", "left_ms", "trips", "probe", "key"}. */
void status_pause_json(FILE *out, const struct st_pause *p);

#endif
