/* group_stats: see group_stats.h. */
#include "group_stats.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "outcome.h"
#include "scripts.h"

#define SPECS_MAX 2048 /* a partitioned handler counts once per partition */

enum ask { ASK_GROUPS, ASK_OLDEST, ASK_DELAYED, ASK_DEAD, ASK_AGES };

struct group_stats {
  broker *b;
  bk_conn *cmd;
  lclock *clock;
  uint64_t asked_ms; /* when the last questions went out; 0: never */
  group_stats_list_fn *list;
  void *data;
  unsigned waiting; /* replies on their way */
  bool freed;       /* group_stats_free came while some were */
};

/* One question about one group, answered once. */
struct question {
  group_stats *g;
  enum ask ask;
  const char *group; /* into text, after the stream */
  char text[];       /* stream NUL group NUL */
};

static const char *const LABELS[] = {"stream", "group"};

static void set(const char *name, const char *help, const struct question *q, double v) {
  struct metric_family *f = metrics_family(name, help, METRIC_GAUGE, 2, LABELS, NULL, 0);
  const char *values[] = {q->text, q->group};
  metric_set(metrics_series(f, values), v);
}

static bool str_is(const bk_reply *r, const char *s) {
  return r && (r->type == BK_STRING || r->type == BK_STATUS) && r->len == strlen(s) &&
         memcmp(r->str, s, r->len) == 0;
}

/* XINFO GROUPS: an array of maps (name, value, ...); the group's lag and
 * pending. A lag Redis cannot tell (nil: entries were deleted or added
 * with explicit ids) is NaN. */
static void read_groups(const struct question *q, const bk_reply *r) {
  for (size_t i = 0; i < r->elements; i++) {
    const bk_reply *m = r->element[i];
    if (m->type != BK_ARRAY) continue;
    bool ours = false;
    for (size_t k = 0; k + 1 < m->elements; k += 2)
      if (str_is(m->element[k], "name") && str_is(m->element[k + 1], q->group)) ours = true;
    if (!ours) continue;
    for (size_t k = 0; k + 1 < m->elements; k += 2) {
      const bk_reply *v = m->element[k + 1];
      if (str_is(m->element[k], "lag")) /* nil while Redis cannot tell: NaN, not the old value */
        set("luastream_group_lag", "Entries of the stream not yet delivered to the group", q,
            v->type == BK_INTEGER ? (double)v->integer : NAN);
      else if (v->type != BK_INTEGER)
        continue;
      else if (str_is(m->element[k], "pending"))
        set("luastream_group_pending", "Entries delivered to the group and not acknowledged", q,
            (double)v->integer);
    }
    return;
  }
}

/* SCRIPT_LAG over the stream and its retry stream: per key [lag_ms,
 * oldest_pending_ms, ...], [] for a key without the group. The group's
 * values are the larger of the two keys': an entry waits as long on
 * either. */
static void read_ages(const struct question *q, const bk_reply *r) {
  long long lag = 0, pending = 0;
  for (size_t i = 0; i < r->elements; i++) {
    const bk_reply *k = r->element[i];
    if (k->type != BK_ARRAY || k->elements < 2 || k->element[0]->type != BK_INTEGER ||
        k->element[1]->type != BK_INTEGER)
      continue;
    if (k->element[0]->integer > lag) lag = k->element[0]->integer;
    if (k->element[1]->integer > pending) pending = k->element[1]->integer;
  }
  set("luastream_group_lag_seconds",
      "Age of the oldest entry not yet delivered to the group, on the stream or its retry stream, "
      "by the server's clock (0: none)",
      q, (double)lag / 1000.0);
  set("luastream_group_oldest_pending_seconds",
      "Age of the group's oldest pending entry (its id's time, not its idle time) by the server's "
      "clock (0: none pending)",
      q, (double)pending / 1000.0);
}

static void answered(void *data, const bk_reply *r, const char *err) {
  (void)err;
  struct question *q = data;
  group_stats *g = q->g;
  if (!g->freed && r && r->type != BK_ERROR) {
    if (q->ask == ASK_GROUPS && r->type == BK_ARRAY) {
      read_groups(q, r);
    } else if (q->ask == ASK_OLDEST && r->type == BK_ARRAY) { /* [[id, consumer, idle, n]] */
      const bk_reply *e = r->elements ? r->element[0] : NULL;
      double idle =
          e && e->type == BK_ARRAY && e->elements >= 3 && e->element[2]->type == BK_INTEGER
              ? (double)e->element[2]->integer / 1000.0
              : 0;
      set("luastream_group_oldest_pending_idle_seconds",
          "How long the group's oldest pending entry has waited since its last delivery (0: none "
          "pending)",
          q, idle);
    } else if (q->ask == ASK_AGES && r->type == BK_ARRAY) {
      read_ages(q, r);
    } else if (q->ask == ASK_DELAYED && r->type == BK_INTEGER) {
      set("luastream_group_delayed_entries", "Entries in the group's delay set (ls.retry_after)", q,
          (double)r->integer);
    } else if (q->ask == ASK_DEAD && r->type == BK_INTEGER) {
      set("luastream_dead_letter_stream_length",
          "Entries on the dead-letter stream of the group's handlers", q, (double)r->integer);
    }
  }
  free(q);
  if (--g->waiting == 0 && g->freed) free(g);
}

static void ask(group_stats *g, enum ask what, const struct handler_spec *s, int argc,
                const char **argv) {
  size_t slen = strlen(s->stream) + 1, glen = strlen(s->group) + 1;
  struct question *q = malloc(sizeof *q + slen + glen);
  if (q == NULL) return;
  q->g = g;
  q->ask = what;
  memcpy(q->text, s->stream, slen);
  memcpy(q->text + slen, s->group, glen);
  q->group = q->text + slen;
  size_t len[8];
  for (int i = 0; i < argc; i++) len[i] = strlen(argv[i]);
  if (bk_command(g->b, g->cmd, argc, argv, len, answered, q) != 0) {
    free(q); /* not connected: the next poll asks again */
    return;
  }
  g->waiting++;
}

/* metrics_collect_fn: asks again when the last answers are old. */
static void poll_groups(void *data) {
  group_stats *g = data;
  uint64_t now = clock_now(g->clock);
  if (g->asked_ms && now - g->asked_ms < GROUP_STATS_MS) return;
  g->asked_ms = now ? now : 1;
  const struct handler_spec *specs[SPECS_MAX];
  size_t n = g->list(g->data, specs, SPECS_MAX);
  for (size_t i = 0; i < n; i++) {
    const struct handler_spec *s = specs[i];
    bool seen = false; /* a new + reclaim pair shares its group */
    for (size_t k = 0; k < i && !seen; k++)
      seen = strcmp(specs[k]->stream, s->stream) == 0 && strcmp(specs[k]->group, s->group) == 0;
    if (seen) continue;
    ask(g, ASK_GROUPS, s, 3, (const char *[]){"XINFO", "GROUPS", s->stream});
    ask(g, ASK_OLDEST, s, 8,
        (const char *[]){"XPENDING", s->stream, s->group, "IDLE", "0", "-", "+", "1"});
    /* One call for both keys: a host on Redis Cluster runs only when they
     * share a slot (cluster_keys.h). */
    char *retry = outcome_retry_key(s);
    if (retry)
      ask(g, ASK_AGES, s, 6, (const char *[]){"EVAL", SCRIPT_LAG, "2", s->stream, retry, s->group});
    free(retry);
    char *delayed = outcome_delay_key(s);
    if (delayed) ask(g, ASK_DELAYED, s, 2, (const char *[]){"ZCARD", delayed});
    free(delayed);
    if (s->dead_letter) ask(g, ASK_DEAD, s, 2, (const char *[]){"XLEN", s->dead_letter});
  }
}

group_stats *group_stats_new(broker *b, bk_conn *cmd, lclock *clock, group_stats_list_fn *list,
                             void *data) {
  group_stats *g = calloc(1, sizeof *g);
  if (g == NULL) return NULL;
  g->b = b;
  g->cmd = cmd;
  g->clock = clock;
  g->list = list;
  g->data = data;
  if (metrics_add_collector(poll_groups, g) != 0) {
    free(g);
    return NULL;
  }
  return g;
}

void group_stats_free(group_stats *g) {
  if (g == NULL) return;
  metrics_remove_collector(poll_groups, g);
  if (g->waiting)
    g->freed = true;
  else
    free(g);
}
