/* status_judge: what needs attention in one group after a refresh
 * (status_rules.h's rules applied to status_query.h's rows), for `status`
 * and the web console. */
#include "status_judge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status_rules.h"

static bool parse_id(const char *s, unsigned long long *ms, unsigned long long *seq) {
  char *end;
  *ms = strtoull(s, &end, 10);
  if (end == s || *end != '-') return false;
  *seq = strtoull(end + 1, &end, 10);
  return *end == '\0';
}

/* Entries of k not yet delivered to the group: its lag, else 1 when its last
 * delivered id is behind the stream's last id (some, how many unknown), else 0. */
static long long waiting(const struct st_key *k) {
  if (!k->group_exists) return 0;
  if (k->lag >= 0) return k->lag;
  unsigned long long dm, ds, lm, ls;
  if (!parse_id(k->delivered, &dm, &ds) || !parse_id(k->last_id, &lm, &ls)) return 0;
  return dm < lm || (dm == lm && ds < ls) ? 1 : 0;
}

/* The group's lag on the stream and its retry stream; -1 when either is unknown. */
static long long total_lag(const struct st_group *g) {
  if (!g->src.group_exists) return -1;
  if (g->src.lag < 0 || (g->retry.group_exists && g->retry.lag < 0)) return -1;
  return g->src.lag + (g->retry.group_exists ? g->retry.lag : 0);
}

static const char *plural(long long n, const char *one, const char *many) {
  return n == 1 ? one : many;
}

void status_judge(const struct status_query *q, struct st_group *g) {
  char a[32], b[32];
  long long limit = status_stall_after(g->min_idle_ms);
  char why_limit[64];
  if (g->min_idle_ms > 0)
    snprintf(why_limit, sizeof why_limit, "min_idle %s", status_format_ms(limit, a, sizeof a));
  else
    snprintf(why_limit, sizeof why_limit, "the default %s", status_format_ms(limit, a, sizeof a));
  if (g->src.error)
    status_query_attention(g, "error",
                           status_query_text("cannot read %s: %s", g->src.key, g->src.error));
  if (g->retry.error)
    status_query_attention(g, "error",
                           status_query_text("cannot read %s: %s", g->retry.key, g->retry.error));
  if (g->side_error) status_query_attention(g, "error", status_query_text("%s", g->side_error));
  if (!g->src.exists && g->src.error == NULL) {
    status_query_attention(
        g, "missing-stream",
        q->dir_mode ? status_query_text("stream %s does not exist (no host of %s has started)",
                                        g->stream, g->handlers)
                    : status_query_text("stream %s does not exist", g->stream));
    return;
  }
  if (g->group == NULL) return;
  if (!g->src.group_exists && g->src.error == NULL)
    status_query_attention(
        g, "missing-group",
        status_query_text("group %s does not exist on %s (no host of %s has started)", g->group,
                          g->stream, g->handlers ? g->handlers : "it"));
  long long freshest = -1;
  for (size_t i = 0; i < g->nconsumers; i++) {
    const struct st_consumer *c = &g->consumers[i];
    if (c->idle_ms >= 0 && (freshest < 0 || c->idle_ms < freshest)) freshest = c->idle_ms;
    if (!c->lease_read || !status_consumer_stalled(c->pending, c->lease_ttl_ms)) continue;
    long long age = status_lease_age(c->lease_ttl_ms);
    char *text = age < 0 ? status_query_text(
                               "consumer %s holds %lld pending %s and no running host holds its "
                               "name (its lease is gone): the process stopped",
                               c->name, c->pending, plural(c->pending, "entry", "entries"))
                         : status_query_text(
                               "consumer %s holds %lld pending %s and its lease was last renewed "
                               "%s ago (every %ds while its host runs): the process is stopped, "
                               "paused or stalled",
                               c->name, c->pending, plural(c->pending, "entry", "entries"),
                               status_format_ms(age, b, sizeof b), LEASE_RENEW_MS / 1000);
    status_query_attention(g, "stalled-consumer", text);
  }
  long long oldest = -1; /* the first pending entry's idle time, the longer of the two keys' */
  if (g->src.pending > 0) oldest = g->src.oldest_idle_ms;
  if (g->retry.pending > 0 && g->retry.oldest_idle_ms > oldest) oldest = g->retry.oldest_idle_ms;
  if (g->handlers && status_pending_unretried(g->claims, oldest, limit)) {
    long long n = g->src.pending + g->retry.pending;
    status_query_attention(
        g, "unretried",
        status_query_text("%lld pending %s (the first idle for %s, past %s) and no handler of the "
                          "group claims pending entries: read = \"new\" takes an entry again only "
                          "when its consumer's host starts again under the same name. Add a "
                          "handler with read = \"reclaim\" and min_idle for the group, or read "
                          "= \"claiming\"",
                          n, plural(n, "entry", "entries"), status_format_ms(oldest, b, sizeof b),
                          why_limit));
  }
  /* Paused, entries wait unread on purpose: the pause says why, and a
   * breaker's is worth a look (an operator's pause is shown, not judged). */
  bool paused = g->pause.state != ST_RUNNING;
  if (paused && strcmp(g->pause.kind, "breaker") == 0) {
    char *text = status_pause_text(&g->pause);
    status_query_attention(g, "breaker-open",
                           status_query_text("%s (`luastream resume %s %s` ends it now)", text,
                                             g->pause.stream, g->group));
    free(text);
  }
  long long w = waiting(&g->src) + waiting(&g->retry);
  if (!paused && status_waiting_unread(w, freshest, limit)) {
    char count[32];
    if (total_lag(g) >= 0)
      snprintf(count, sizeof count, "%lld %s", w, plural(w, "entry waits", "entries wait"));
    else
      snprintf(count, sizeof count, "entries wait");
    if (freshest < 0)
      status_query_attention(g, "unread",
                             status_query_text("%s and the group has no consumer", count));
    else
      status_query_attention(
          g, "unread",
          status_query_text("%s and no consumer has read for %s (past %s)", count,
                            status_format_ms(freshest, b, sizeof b), why_limit));
  }
  if (!paused && status_lag_growing(g->lags, g->nlags)) {
    char rise[160] = "";
    size_t n = 0;
    for (int i = g->nlags - STATUS_LAG_RISES - 1; i < g->nlags && n < sizeof rise; i++)
      n += (size_t)snprintf(rise + n, sizeof rise - n, "%s%lld", n ? " -> " : "", g->lags[i]);
    status_query_attention(g, "lag-growing",
                           status_query_text("the lag grew at each of the last %d refreshes: %s",
                                             STATUS_LAG_RISES, rise));
  }
  if (g->dead_letters > 0)
    status_query_attention(
        g, "dead-letters",
        status_query_text("%lld dead %s on %s (luastream dead-letters list %s)", g->dead_letters,
                          plural(g->dead_letters, "letter", "letters"), g->dead_letter,
                          g->dead_letter));
}

void status_carry_lags(const struct status_query *q, struct st_group *g) {
  struct st_group *p =
      g->group ? status_query_group_find(q->prev, q->nprev, g->stream, g->group) : NULL;
  if (p) {
    memcpy(g->lags, p->lags, sizeof g->lags);
    g->nlags = p->nlags;
  }
  if (g->nlags == STATUS_LAG_HISTORY) {
    memmove(g->lags, g->lags + 1, (STATUS_LAG_HISTORY - 1) * sizeof g->lags[0]);
    g->nlags--;
  }
  g->lags[g->nlags++] = total_lag(g);
}

/* The file in DIR's first tick strictly after t; -1 when its schedule
 * could not be read. */
static long long file_next(const struct st_schedule *s, long long t) {
  if (s->every_ms > 0) return cron_every_next(s->every_ms, t);
  if (s->has_cron) return cron_next(&s->cron, s->tz, t);
  return -1;
}

/* When the next tick is due. After a tick done: the later of the hash's
 * next (its hosts' schedule) and DIR's file's (after a change to a rarer
 * schedule, the hosts' old next passes with nothing due). Before any: the
 * file's first after now (a host starts with its next tick). -1: none. */
static long long next_due(const struct status_query *q, const struct st_schedule *s) {
  long long due = s->next_tick;
  if (s->last_tick <= 0) return due > 0 || q->server_ms <= 0 ? due : file_next(s, q->server_ms);
  long long mine = file_next(s, s->last_tick);
  return mine > due ? mine : due;
}

bool status_judge_schedule(const struct status_query *q, struct st_schedule *s) {
  free(s->attention);
  s->attention = NULL;
  char when[64], ago[32];
  /* A host holding the lease runs a tick now (one longer than the period
   * holds the next back): the schedule is not late, it is busy. */
  bool running = s->lease_until > 0 && q->server_ms > 0 && s->lease_until > q->server_ms;
  long long due = next_due(q, s);
  s->next_tick = due; /* what status shows as the next tick */
  if (due > 0 && q->server_ms > 0 && q->server_ms - due > STATUS_TICK_LATE_MS && !running) {
    s->attention = status_query_text(
        "schedule %s: its next tick was due at %s (%s ago) and has not run: no host runs %s",
        s->name, status_format_utc(due, when, sizeof when),
        status_format_ms(q->server_ms - due, ago, sizeof ago), s->handlers);
  } else if (s->last_outcome && !strcmp(s->last_outcome, "error")) {
    size_t n = s->last_error ? strcspn(s->last_error, "\n") : 0;
    s->attention = status_query_text("schedule %s: its last tick (%s) raised: %.*s", s->name,
                                     status_format_utc(s->last_tick, when, sizeof when), (int)n,
                                     s->last_error ? s->last_error : "");
  }
  return s->attention != NULL;
}
