/* pg_prune: --pg-once-keep, the host's own pruning of ctx:pg_once's table:
 * every so often, the rows recorded longer ago than the keep period are
 * deleted, on the host's PostgreSQL pool. Every host of a group may prune:
 * the DELETEs are idempotent. */
#ifndef LUASTREAM_PG_PRUNE_H
#define LUASTREAM_PG_PRUNE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "pg.h"

struct pg_prune {
  pg_pool *pool;
  uint64_t keep_ms;
  char sql[192];
  char keep[32]; /* the parameter: "<keep_ms> milliseconds" */
  bool running;  /* a DELETE is in flight */
  bool armed;    /* timer is initialised */
  uv_timer_t timer;
};

/* How often a host prunes for a keep period: a quarter of it, from 1 s to
 * 1 h. */
uint64_t pg_prune_period(uint64_t keep_ms);

/* Starts pruning table (a checked name) of rows older than keep_ms on
 * pool; the first prune comes one period after. Returns 0, or -1 when the
 * loop refuses a timer. */
int pg_prune_start(struct pg_prune *p, uv_loop_t *loop, pg_pool *pool, const char *table,
                   uint64_t keep_ms);
/* Stops the timer (closed on the loop); a DELETE in flight ends with the
 * pool. */
void pg_prune_stop(struct pg_prune *p);

#endif
