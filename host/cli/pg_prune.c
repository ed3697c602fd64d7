/* pg_prune: --pg-once-keep; see pg_prune.h. */
#include "pg_prune.h"

#include <stdio.h>
#include <string.h>

#include "log.h"

uint64_t pg_prune_period(uint64_t keep_ms) {
  uint64_t period = keep_ms / 4;
  if (period < 1000) period = 1000;
  if (period > 3600000) period = 3600000;
  return period;
}

static void pruned(void *data, const pg_result *res, const struct pg_error *err) {
  struct pg_prune *p = data;
  p->running = false;
  if (res) {
    double n = pg_result_affected(res);
    if (n > 0) {
      char count[32];
      snprintf(count, sizeof count, "%.0f", n);
      log_line(LOG_INFO, NULL, "pg_once keys pruned", LOG_NUMBER "count", count, NULL);
    }
    return;
  }
  /* no table yet: nothing recorded, nothing to prune */
  if (strcmp(err->sqlstate, "42P01") == 0) return;
  char state[8];
  snprintf(state, sizeof state, "%s", err->sqlstate);
  log_line(LOG_WARN, NULL, "pg_once keys not pruned", "sqlstate", state, "error", err->message,
           NULL);
}

static void on_timer(uv_timer_t *t) {
  struct pg_prune *p = t->data;
  if (p->running) return;
  const char *params[] = {p->keep};
  struct pg_query q = {.sql = p->sql, .nparams = 1, .params = params};
  char err[256];
  if (pg_query(p->pool, &q, pruned, p, err, sizeof err) == 0) p->running = true;
}

int pg_prune_start(struct pg_prune *p, uv_loop_t *loop, pg_pool *pool, const char *table,
                   uint64_t keep_ms) {
  memset(p, 0, sizeof *p);
  p->pool = pool;
  p->keep_ms = keep_ms;
  snprintf(p->sql, sizeof p->sql, "DELETE FROM %s WHERE done_at < now() - $1::interval", table);
  snprintf(p->keep, sizeof p->keep, "%llu milliseconds", (unsigned long long)keep_ms);
  if (uv_timer_init(loop, &p->timer) != 0) return -1;
  p->timer.data = p;
  p->armed = true;
  uint64_t period = pg_prune_period(keep_ms);
  uv_timer_start(&p->timer, on_timer, period, period);
  return 0;
}

void pg_prune_stop(struct pg_prune *p) {
  if (!p->armed) return;
  uv_close((uv_handle_t *)&p->timer, NULL);
  p->armed = false;
}
