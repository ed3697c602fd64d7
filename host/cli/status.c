/* status: `luastream status` (status.h). */
#include "status.h"

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "client.h"
#include "host.h"
#include "options.h"
#include "partition.h"
#include "status_rules.h"

#define WATCH_EVERY_MS 2000
#define ID_MAX 48 /* "ms-seq", two 20-digit numbers */

/* ---- what one refresh learns ---- */

/* A group on one key: the stream itself or the group's retry stream. */
struct st_key {
  char *key;
  bool exists;       /* the key is a stream */
  bool group_exists; /* the group is on it */
  long long length;
  char last_id[ID_MAX];   /* the stream's last-generated-id */
  char delivered[ID_MAX]; /* the group's last-delivered-id */
  long long lag;          /* -1: Redis cannot tell (nil) */
  long long pending;
  long long oldest_idle_ms; /* the lowest pending id's idle time; -1: nothing pending */
  char *error;              /* reading it failed: the reason */
};

struct st_consumer {
  char *name;
  long long pending; /* on the stream and the retry stream together */
  long long idle_ms; /* the smaller of the two */
};

struct st_attention {
  const char *kind;
  char *text;
};

struct st_group {
  char *stream, *group;  /* group NULL: a stream named without DIR that has no group */
  char *handlers;        /* "a.lua, b.lua" (DIR), else NULL */
  long long min_idle_ms; /* the smallest min_idle of its handlers; -1: none */
  char *dead_letter;     /* the handlers' dead_letter stream, or NULL */
  struct st_key src, retry;
  long long delayed;      /* members of STREAM:delayed:GROUP */
  long long dead_letters; /* XLEN of dead_letter; -1 when there is none */
  char *side_error;       /* reading the delay set or the dead letters failed */
  struct st_consumer *consumers;
  size_t nconsumers;
  long long lags[STATUS_LAG_HISTORY]; /* the lag at the last refreshes, oldest first */
  int nlags;
  struct st_attention *att;
  size_t natt;
};

/* A stream as XINFO STREAM tells of it, before its groups are known. */
struct st_stream {
  struct st_key info;
};

enum query_kind { Q_STREAM, Q_GROUPS, Q_CONSUMERS, Q_PENDING, Q_DELAYED, Q_DEAD };

/* A command sent and the row its reply fills: replies come back in the order
 * the commands went out, so the next reply answers q[next]. */
struct query {
  enum query_kind kind;
  size_t target; /* phase A: a stream; phase B: a group */
  bool retry;    /* phase B: about the retry stream */
};

struct status {
  bool json, watch, tty, dir_mode;
  const char *const *names; /* STREAM... */
  int nnames;
  struct st_group *specs; /* DIR: one per stream and group the handlers read */
  size_t nspecs;
  struct st_stream *streams;
  size_t nstreams;
  struct st_group *groups, *prev; /* this refresh's, the last one's (--watch) */
  size_t ngroups, nprev;
  struct query *q;
  size_t nq, capq, next;
  int phase;       /* 1: the streams and their groups; 2: each group's details */
  int last_status; /* of the last refresh printed */
  bool busy;       /* a refresh is under way */
  struct client *c;
  uv_timer_t tick;
  uv_signal_t sigint;
};

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (p == NULL) {
    fputs("luastream: out of memory\n", stderr);
    exit(1);
  }
  return p;
}

static void *xrealloc(void *p, size_t size) {
  p = realloc(p, size);
  if (p == NULL) {
    fputs("luastream: out of memory\n", stderr);
    exit(1);
  }
  return p;
}

static char *xstrdup(const char *s) {
  char *d = xcalloc(1, strlen(s) + 1);
  return strcpy(d, s);
}

static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = xcalloc(1, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

static void key_init(struct st_key *k, char *key) {
  memset(k, 0, sizeof *k);
  k->key = key;
  k->lag = -1;
  k->oldest_idle_ms = -1;
}

static void key_free(struct st_key *k) {
  free(k->key);
  free(k->error);
}

static void group_free(struct st_group *g) {
  free(g->stream);
  free(g->group);
  free(g->handlers);
  free(g->dead_letter);
  key_free(&g->src);
  key_free(&g->retry);
  free(g->side_error);
  for (size_t i = 0; i < g->nconsumers; i++) free(g->consumers[i].name);
  free(g->consumers);
  for (size_t i = 0; i < g->natt; i++) free(g->att[i].text);
  free(g->att);
}

static void groups_free(struct st_group *gs, size_t n) {
  for (size_t i = 0; i < n; i++) group_free(&gs[i]);
  free(gs);
}

/* A new row for stream and group (copied), with what the handlers say of
 * them when spec is given. */
static struct st_group *group_add(struct st_group **gs, size_t *n, const char *stream,
                                  const char *group, const struct st_group *spec) {
  *gs = xrealloc(*gs, (*n + 1) * sizeof **gs);
  struct st_group *g = &(*gs)[(*n)++];
  memset(g, 0, sizeof *g);
  g->stream = xstrdup(stream);
  g->group = group ? xstrdup(group) : NULL;
  g->min_idle_ms = spec ? spec->min_idle_ms : -1;
  g->handlers = spec && spec->handlers ? xstrdup(spec->handlers) : NULL;
  g->dead_letter = spec && spec->dead_letter ? xstrdup(spec->dead_letter) : NULL;
  g->dead_letters = -1;
  key_init(&g->src, xstrdup(stream));
  key_init(&g->retry, group ? xprintf("%s:retry:%s", stream, group) : NULL);
  return g;
}

static struct st_group *group_find(struct st_group *gs, size_t n, const char *stream,
                                   const char *group) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(gs[i].stream, stream) && gs[i].group && !strcmp(gs[i].group, group)) return &gs[i];
  return NULL;
}

static void attention(struct st_group *g, const char *kind, char *text) {
  g->att = xrealloc(g->att, (g->natt + 1) * sizeof *g->att);
  g->att[g->natt++] = (struct st_attention){kind, text};
}

/* ---- the handlers of DIR ---- */

static void take_one(struct status *st, const struct handler_spec *s);

/* host_check_each: one row per stream and group, merging the handlers that
 * share one (a `new` and a `reclaim` subscription); a partitioned handler
 * has a row per partition (its keys, partition.h). */
static void take_spec(void *data, const struct handler_spec *s) {
  struct status *st = data;
  if (s->partitions <= 0) return take_one(st, s);
  for (int p = 0; p < s->partitions; p++) {
    struct handler_spec part;
    if (partition_spec(s, p, &part) != 0) {
      fputs("luastream: out of memory\n", stderr);
      exit(1);
    }
    take_one(st, &part);
    partition_spec_free(&part);
  }
}

static void take_one(struct status *st, const struct handler_spec *s) {
  struct st_group *g = group_find(st->specs, st->nspecs, s->stream, s->group);
  if (g == NULL) g = group_add(&st->specs, &st->nspecs, s->stream, s->group, NULL);
  const char *file = strrchr(s->path, '/') ? strrchr(s->path, '/') + 1 : s->path;
  char *handlers = g->handlers ? xprintf("%s, %s", g->handlers, file) : xstrdup(file);
  free(g->handlers);
  g->handlers = handlers;
  if (s->min_idle_ms > 0 && (g->min_idle_ms <= 0 || s->min_idle_ms < g->min_idle_ms))
    g->min_idle_ms = s->min_idle_ms;
  if (s->dead_letter && g->dead_letter == NULL) g->dead_letter = xstrdup(s->dead_letter);
}

/* ---- replies ---- */

static const bk_reply *kv(const bk_reply *r, const char *name) {
  size_t len = strlen(name);
  if (r == NULL || r->type != BK_ARRAY) return NULL;
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    const bk_reply *k = r->element[i];
    if ((k->type == BK_STRING || k->type == BK_STATUS) && k->len == len &&
        !memcmp(k->str, name, len))
      return r->element[i + 1];
  }
  return NULL;
}

static long long kv_int(const bk_reply *r, const char *name, long long missing) {
  const bk_reply *v = kv(r, name);
  return v && v->type == BK_INTEGER ? v->integer : missing;
}

static void kv_str(const bk_reply *r, const char *name, char *out, size_t len) {
  const bk_reply *v = kv(r, name);
  if (v && v->type == BK_STRING)
    snprintf(out, len, "%.*s", (int)v->len, v->str);
  else
    out[0] = '\0';
}

static bool error_is(const bk_reply *r, const char *text) {
  return r->type == BK_ERROR && r->str && strstr(r->str, text) != NULL;
}

/* A missing key or group: a state to show, not a failure. */
static bool absent(const bk_reply *r) {
  return error_is(r, "no such key") || error_is(r, "No such key") || error_is(r, "NOGROUP");
}

static char *reply_error(const bk_reply *r, const char *key) {
  if (error_is(r, "WRONGTYPE")) return xprintf("%s is not a stream", key);
  if (r->type == BK_ERROR) return xprintf("%s", r->str);
  return xprintf("unexpected reply about %s", key);
}

/* XINFO STREAM key */
static void take_stream(struct st_key *k, const bk_reply *r) {
  if (r->type == BK_ERROR) {
    if (!absent(r)) k->error = reply_error(r, k->key);
    return;
  }
  k->exists = true;
  k->length = kv_int(r, "length", 0);
  kv_str(r, "last-generated-id", k->last_id, sizeof k->last_id);
}

/* One group of XINFO GROUPS into k. */
static void take_group_info(struct st_key *k, const bk_reply *info) {
  k->group_exists = true;
  k->pending = kv_int(info, "pending", 0);
  k->lag = kv_int(info, "lag", -1);
  if (k->lag < 0) k->lag = -1; /* nil, or a negative estimate (7.0 after ENTRIESREAD) */
  kv_str(info, "last-delivered-id", k->delivered, sizeof k->delivered);
}

static bool name_is(const bk_reply *info, const char *name) {
  const bk_reply *v = kv(info, "name");
  return v && v->type == BK_STRING && v->len == strlen(name) && !memcmp(v->str, name, v->len);
}

/* XINFO GROUPS of a stream named on the command line or read by DIR's handlers. */
static void take_groups(struct status *st, size_t si, const bk_reply *r) {
  struct st_key *info = &st->streams[si].info;
  if (r->type != BK_ARRAY) return; /* a missing key: XINFO STREAM said so */
  for (size_t i = 0; i < r->elements; i++) {
    const bk_reply *gi = r->element[i];
    const bk_reply *name = kv(gi, "name");
    if (name == NULL || name->type != BK_STRING) continue;
    char *group = xprintf("%.*s", (int)name->len, name->str);
    struct st_group *g = group_find(st->groups, st->ngroups, info->key, group);
    if (g == NULL && !st->dir_mode)
      g = group_add(&st->groups, &st->ngroups, info->key, group, NULL);
    free(group);
    if (g) take_group_info(&g->src, gi);
  }
}

static void take_consumers(struct st_group *g, struct st_key *k, const bk_reply *r) {
  if (r->type == BK_ERROR) {
    if (!absent(r) && k->error == NULL) k->error = reply_error(r, k->key);
    return;
  }
  for (size_t i = 0; r->type == BK_ARRAY && i < r->elements; i++) {
    const bk_reply *ci = r->element[i];
    const bk_reply *name = kv(ci, "name");
    if (name == NULL || name->type != BK_STRING) continue;
    long long pending = kv_int(ci, "pending", 0), idle = kv_int(ci, "idle", -1);
    struct st_consumer *c = NULL;
    for (size_t j = 0; j < g->nconsumers && c == NULL; j++)
      if (strlen(g->consumers[j].name) == name->len &&
          !memcmp(g->consumers[j].name, name->str, name->len))
        c = &g->consumers[j];
    if (c == NULL) {
      g->consumers = xrealloc(g->consumers, (g->nconsumers + 1) * sizeof *g->consumers);
      c = &g->consumers[g->nconsumers++];
      *c = (struct st_consumer){xprintf("%.*s", (int)name->len, name->str), 0, idle};
    }
    c->pending += pending;
    if (idle >= 0 && (c->idle_ms < 0 || idle < c->idle_ms)) c->idle_ms = idle;
  }
}

/* XPENDING key group - + 1: [[id, consumer, idle, deliveries]] */
static void take_pending(struct st_key *k, const bk_reply *r) {
  if (r->type == BK_ERROR) {
    if (!absent(r) && k->error == NULL) k->error = reply_error(r, k->key);
    return;
  }
  if (r->type == BK_ARRAY && r->elements == 1 && r->element[0]->type == BK_ARRAY &&
      r->element[0]->elements >= 3 && r->element[0]->element[2]->type == BK_INTEGER)
    k->oldest_idle_ms = r->element[0]->element[2]->integer;
}

static void take_count(struct st_group *g, long long *out, const char *key, const bk_reply *r) {
  if (r->type == BK_INTEGER) {
    *out = r->integer;
  } else if (g->side_error == NULL) {
    g->side_error = error_is(r, "WRONGTYPE") ? xprintf("%s is not a %s", key,
                                                       out == &g->delayed ? "sorted set" : "stream")
                                             : reply_error(r, key);
  }
}

/* ---- the attention rules applied ---- */

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

static void judge(struct status *st, struct st_group *g) {
  char a[32], b[32];
  long long limit = status_stall_after(g->min_idle_ms);
  char why_limit[64];
  if (g->min_idle_ms > 0)
    snprintf(why_limit, sizeof why_limit, "min_idle %s", status_format_ms(limit, a, sizeof a));
  else
    snprintf(why_limit, sizeof why_limit, "the default %s", status_format_ms(limit, a, sizeof a));
  if (g->src.error) attention(g, "error", xprintf("cannot read %s: %s", g->src.key, g->src.error));
  if (g->retry.error)
    attention(g, "error", xprintf("cannot read %s: %s", g->retry.key, g->retry.error));
  if (g->side_error) attention(g, "error", xprintf("%s", g->side_error));
  if (!g->src.exists && g->src.error == NULL) {
    attention(g, "missing-stream",
              st->dir_mode ? xprintf("stream %s does not exist (no host of %s has started)",
                                     g->stream, g->handlers)
                           : xprintf("stream %s does not exist", g->stream));
    return;
  }
  if (g->group == NULL) return;
  if (!g->src.group_exists && g->src.error == NULL)
    attention(g, "missing-group",
              xprintf("group %s does not exist on %s (no host of %s has started)", g->group,
                      g->stream, g->handlers ? g->handlers : "it"));
  long long freshest = -1;
  for (size_t i = 0; i < g->nconsumers; i++) {
    const struct st_consumer *c = &g->consumers[i];
    if (c->idle_ms >= 0 && (freshest < 0 || c->idle_ms < freshest)) freshest = c->idle_ms;
    if (status_consumer_stalled(c->pending, c->idle_ms, limit))
      attention(g, "stalled-consumer",
                xprintf("consumer %s holds %lld pending %s and has not read for %s (past %s)",
                        c->name, c->pending, plural(c->pending, "entry", "entries"),
                        status_format_ms(c->idle_ms, b, sizeof b), why_limit));
  }
  long long w = waiting(&g->src) + waiting(&g->retry);
  if (status_waiting_unread(w, freshest, limit)) {
    char count[32];
    if (total_lag(g) >= 0)
      snprintf(count, sizeof count, "%lld %s", w, plural(w, "entry waits", "entries wait"));
    else
      snprintf(count, sizeof count, "entries wait");
    if (freshest < 0)
      attention(g, "unread", xprintf("%s and the group has no consumer", count));
    else
      attention(g, "unread",
                xprintf("%s and no consumer has read for %s (past %s)", count,
                        status_format_ms(freshest, b, sizeof b), why_limit));
  }
  if (status_lag_growing(g->lags, g->nlags)) {
    char rise[160] = "";
    size_t n = 0;
    for (int i = g->nlags - STATUS_LAG_RISES - 1; i < g->nlags && n < sizeof rise; i++)
      n += (size_t)snprintf(rise + n, sizeof rise - n, "%s%lld", n ? " -> " : "", g->lags[i]);
    attention(g, "lag-growing",
              xprintf("the lag grew at each of the last %d refreshes: %s", STATUS_LAG_RISES, rise));
  }
  if (g->dead_letters > 0)
    attention(
        g, "dead-letters",
        xprintf("%lld dead %s on %s (luastream dead-letters list %s)", g->dead_letters,
                plural(g->dead_letters, "letter", "letters"), g->dead_letter, g->dead_letter));
}

/* --watch: the lags of the same group at the refreshes before, then this one's. */
static void carry_lags(struct status *st, struct st_group *g) {
  struct st_group *p = g->group ? group_find(st->prev, st->nprev, g->stream, g->group) : NULL;
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

/* ---- output ---- */

/* Names come from the server: control characters are shown as '?' so that a
 * name cannot move the terminal's cursor. */
static char *cell(const char *s) {
  char *c = xstrdup(s ? s : "-");
  for (char *p = c; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
  return c;
}

static char *cell_num(long long n) { return n < 0 ? xstrdup("?") : xprintf("%lld", n); }

static char *cell_ms(long long ms) {
  char buf[32];
  return xstrdup(ms < 0 ? "-" : status_format_ms(ms, buf, sizeof buf));
}

#define TABLE_COLS 8

struct table {
  int ncols;
  const char *head[TABLE_COLS];
  bool right[TABLE_COLS];
  char **cells; /* rows * ncols */
  size_t nrows;
};

static void table_row(struct table *t, char **row) {
  t->cells = xrealloc(t->cells, (t->nrows + 1) * (size_t)t->ncols * sizeof *t->cells);
  memcpy(t->cells + t->nrows * (size_t)t->ncols, row, (size_t)t->ncols * sizeof *row);
  t->nrows++;
}

static void table_print(struct table *t) {
  size_t width[TABLE_COLS];
  for (int j = 0; j < t->ncols; j++) {
    width[j] = strlen(t->head[j]);
    for (size_t i = 0; i < t->nrows; i++) {
      size_t w = strlen(t->cells[i * (size_t)t->ncols + (size_t)j]);
      if (w > width[j]) width[j] = w;
    }
  }
  for (size_t i = 0; i <= t->nrows; i++) {
    for (int j = 0; j < t->ncols; j++) {
      const char *s = i == 0 ? t->head[j] : t->cells[(i - 1) * (size_t)t->ncols + (size_t)j];
      bool last = j == t->ncols - 1;
      if (t->right[j])
        printf("%*s%s", (int)width[j], s, last ? "" : "  ");
      else if (last)
        printf("%s", s);
      else
        printf("%-*s  ", (int)width[j], s);
    }
    putchar('\n');
  }
  for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++) free(t->cells[i]);
  free(t->cells);
}

static void print_table(struct status *st, bool needs) {
  char when[64];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
  printf("%s at %s", st->c->b->name, when);
  if (st->watch) printf(" (every %ds; Ctrl-C stops)", WATCH_EVERY_MS / 1000);
  printf("\n\n");
  struct table t = {
      8,
      {"STREAM", "GROUP", "LENGTH", "LAG", "PENDING", "OLDEST PENDING", "DELAYED", "DEAD LETTERS"},
      {false, false, true, true, true, true, true, true},
      NULL,
      0};
  for (size_t i = 0; i < st->ngroups; i++) {
    struct st_group *g = &st->groups[i];
    bool have = g->src.exists && g->src.group_exists;
    char *row[8] = {
        cell(g->stream),
        cell(g->group),
        g->src.exists ? cell_num(g->src.length) : xstrdup(g->src.error ? "?" : "missing"),
        have ? cell_num(g->src.lag) : xstrdup("-"),
        have ? cell_num(g->src.pending) : xstrdup("-"),
        cell_ms(have && g->src.pending ? g->src.oldest_idle_ms : -1),
        g->group && g->src.exists ? cell_num(g->delayed) : xstrdup("-"),
        g->dead_letters >= 0 ? cell_num(g->dead_letters) : xstrdup("-")};
    table_row(&t, row);
    if (g->retry.exists && g->retry.group_exists) {
      char *retry[8] = {cell(g->retry.key),
                        cell(g->group),
                        cell_num(g->retry.length),
                        cell_num(g->retry.lag),
                        cell_num(g->retry.pending),
                        cell_ms(g->retry.pending ? g->retry.oldest_idle_ms : -1),
                        xstrdup(""),
                        xstrdup("")};
      table_row(&t, retry);
    }
  }
  table_print(&t);
  struct table ct = {5,
                     {"STREAM", "GROUP", "CONSUMER", "PENDING", "IDLE"},
                     {false, false, false, true, true},
                     NULL,
                     0};
  for (size_t i = 0; i < st->ngroups; i++) {
    struct st_group *g = &st->groups[i];
    for (size_t j = 0; j < g->nconsumers; j++) {
      char *row[5] = {cell(g->stream), cell(g->group), cell(g->consumers[j].name),
                      cell_num(g->consumers[j].pending), cell_ms(g->consumers[j].idle_ms)};
      table_row(&ct, row);
    }
  }
  if (ct.nrows) {
    putchar('\n');
    table_print(&ct);
  } else {
    free(ct.cells);
  }
  putchar('\n');
  if (!needs) {
    printf("nothing needs attention\n");
    return;
  }
  printf("needs attention:\n");
  for (size_t i = 0; i < st->ngroups; i++) {
    struct st_group *g = &st->groups[i];
    for (size_t j = 0; j < g->natt; j++) {
      char *where = cell(g->stream), *group = cell(g->group), *text = cell(g->att[j].text);
      if (g->group)
        printf("  %s %s: %s\n", where, group, text);
      else
        printf("  %s\n", text); /* a stream without group: the text names it */
      free(where);
      free(group);
      free(text);
    }
  }
}

static void json_str(const char *s) {
  if (s == NULL) {
    fputs("null", stdout);
    return;
  }
  putchar('"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      printf("\\%c", *p);
    else if (*p < 0x20 || *p == 0x7f)
      printf("\\u%04x", *p);
    else
      putchar(*p);
  }
  putchar('"');
}

static void json_num(long long n) {
  if (n < 0)
    fputs("null", stdout);
  else
    printf("%lld", n);
}

static void json_key(const struct st_key *k, bool with_stream) {
  putchar('{');
  if (with_stream) {
    fputs("\"stream\":", stdout);
    json_str(k->key);
    putchar(',');
  }
  printf("\"exists\":%s,\"group_exists\":%s,\"length\":", k->exists ? "true" : "false",
         k->group_exists ? "true" : "false");
  json_num(k->exists ? k->length : -1);
  fputs(",\"lag\":", stdout);
  json_num(k->group_exists ? k->lag : -1);
  fputs(",\"pending\":", stdout);
  json_num(k->group_exists ? k->pending : -1);
  fputs(",\"oldest_pending_idle_ms\":", stdout);
  json_num(k->group_exists && k->pending ? k->oldest_idle_ms : -1);
  fputs(",\"last_delivered_id\":", stdout);
  json_str(k->group_exists ? k->delivered : NULL);
  fputs(",\"error\":", stdout);
  json_str(k->error);
  putchar('}');
}

static void print_json(struct status *st, bool needs) {
  printf("{\"server\":");
  json_str(st->c->b->name);
  printf(",\"time_ms\":%llu,\"attention\":%s,\"groups\":[",
         (unsigned long long)clock_wall(st->c->clock), needs ? "true" : "false");
  for (size_t i = 0; i < st->ngroups; i++) {
    struct st_group *g = &st->groups[i];
    printf("%s{\"stream\":", i ? "," : "");
    json_str(g->stream);
    fputs(",\"group\":", stdout);
    json_str(g->group);
    fputs(",\"handlers\":", stdout);
    json_str(g->handlers);
    fputs(",\"min_idle_ms\":", stdout);
    json_num(g->min_idle_ms);
    printf(",\"stall_after_ms\":%lld", status_stall_after(g->min_idle_ms));
    printf(",\"length\":");
    json_num(g->src.exists ? g->src.length : -1);
    fputs(",\"source\":", stdout);
    json_key(&g->src, false);
    fputs(",\"retry\":", stdout);
    if (g->group)
      json_key(&g->retry, true);
    else
      fputs("null", stdout);
    fputs(",\"delayed\":", stdout);
    json_num(g->group && g->src.exists ? g->delayed : -1);
    fputs(",\"dead_letter\":", stdout);
    if (g->dead_letter) {
      fputs("{\"stream\":", stdout);
      json_str(g->dead_letter);
      fputs(",\"length\":", stdout);
      json_num(g->dead_letters);
      putchar('}');
    } else {
      fputs("null", stdout);
    }
    fputs(",\"consumers\":[", stdout);
    long long limit = status_stall_after(g->min_idle_ms);
    for (size_t j = 0; j < g->nconsumers; j++) {
      const struct st_consumer *c = &g->consumers[j];
      printf("%s{\"name\":", j ? "," : "");
      json_str(c->name);
      printf(",\"pending\":%lld,\"idle_ms\":", c->pending);
      json_num(c->idle_ms);
      printf(",\"stalled\":%s}",
             status_consumer_stalled(c->pending, c->idle_ms, limit) ? "true" : "false");
    }
    fputs("],\"attention\":[", stdout);
    for (size_t j = 0; j < g->natt; j++) {
      printf("%s{\"kind\":\"%s\",\"message\":", j ? "," : "", g->att[j].kind);
      json_str(g->att[j].text);
      putchar('}');
    }
    fputs("]}", stdout);
  }
  printf("]}\n");
}

/* ---- one refresh ---- */

static void on_reply(void *data, const bk_reply *r, const char *err);

static void query(struct status *st, enum query_kind kind, size_t target, bool retry,
                  const char *const *argv, int argc) {
  struct bk_args a;
  bk_args_init(&a);
  for (int i = 0; i < argc; i++) bk_args_str(&a, argv[i]);
  if (st->nq == st->capq) {
    st->capq = st->capq ? st->capq * 2 : 16;
    st->q = xrealloc(st->q, st->capq * sizeof *st->q);
  }
  st->q[st->nq++] = (struct query){kind, target, retry};
  if (client_send(st->c, &a, on_reply) != 0) st->nq--;
  bk_args_free(&a);
}

static void finish(struct status *st, int status) {
  uv_timer_stop(&st->tick);
  uv_signal_stop(&st->sigint);
  client_done(st->c, status);
}

static void on_tick(uv_timer_t *t);

static void refresh_done(struct status *st) {
  bool needs = false;
  for (size_t i = 0; i < st->ngroups; i++) {
    carry_lags(st, &st->groups[i]);
    judge(st, &st->groups[i]);
    needs = needs || st->groups[i].natt > 0;
  }
  if (st->tty && st->watch) fputs("\033[H\033[2J", stdout);
  if (st->json)
    print_json(st, needs);
  else
    print_table(st, needs);
  if (st->watch && !st->tty && !st->json) putchar('\n');
  fflush(stdout);
  st->last_status = needs ? 1 : 0;
  st->busy = false;
  if (!st->watch) {
    finish(st, st->last_status);
    return;
  }
  timer_stop(st->c->timeout); /* nothing is asked until the next refresh */
  uv_timer_start(&st->tick, on_tick, WATCH_EVERY_MS, 0);
}

static void phase_b(struct status *st) {
  st->phase = 2;
  st->nq = st->next = 0;
  for (size_t i = 0; i < st->nstreams; i++) {
    /* a stream without groups still gets a row when it was named */
    struct st_key *info = &st->streams[i].info;
    bool any = false;
    for (size_t j = 0; j < st->ngroups && !any; j++) any = !strcmp(st->groups[j].stream, info->key);
    if (!any) group_add(&st->groups, &st->ngroups, info->key, NULL, NULL);
  }
  for (size_t i = 0; i < st->ngroups; i++) {
    struct st_group *g = &st->groups[i];
    for (size_t j = 0; j < st->nstreams; j++) {
      const struct st_key *info = &st->streams[j].info;
      if (strcmp(info->key, g->stream)) continue;
      g->src.exists = info->exists;
      g->src.length = info->length;
      memcpy(g->src.last_id, info->last_id, sizeof g->src.last_id);
      if (info->error && g->src.error == NULL) g->src.error = xstrdup(info->error);
    }
    if (g->group == NULL || !g->src.exists) continue;
    const char *s = g->stream, *grp = g->group, *rk = g->retry.key;
    if (g->src.group_exists) {
      query(st, Q_CONSUMERS, i, false, (const char *[]){"XINFO", "CONSUMERS", s, grp}, 4);
      query(st, Q_PENDING, i, false, (const char *[]){"XPENDING", s, grp, "-", "+", "1"}, 6);
    }
    query(st, Q_STREAM, i, true, (const char *[]){"XINFO", "STREAM", rk}, 3);
    query(st, Q_GROUPS, i, true, (const char *[]){"XINFO", "GROUPS", rk}, 3);
    query(st, Q_CONSUMERS, i, true, (const char *[]){"XINFO", "CONSUMERS", rk, grp}, 4);
    query(st, Q_PENDING, i, true, (const char *[]){"XPENDING", rk, grp, "-", "+", "1"}, 6);
    char *delayed = xprintf("%s:delayed:%s", s, grp);
    query(st, Q_DELAYED, i, false, (const char *[]){"ZCARD", delayed}, 2);
    free(delayed);
    if (g->dead_letter) query(st, Q_DEAD, i, false, (const char *[]){"XLEN", g->dead_letter}, 2);
    if (st->c->finished) return;
  }
  if (st->nq == 0 && !st->c->finished) refresh_done(st);
}

static void on_reply(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct status *st = c->data;
  if (c->finished) return;
  if (r == NULL) {
    fprintf(stderr, "luastream: no reply from %s: %s\n", c->b->name, err ? err : "connection lost");
    finish(st, 1);
    return;
  }
  struct query q = st->q[st->next++];
  if (st->phase == 1) {
    if (q.kind == Q_STREAM)
      take_stream(&st->streams[q.target].info, r);
    else
      take_groups(st, q.target, r);
  } else {
    struct st_group *g = &st->groups[q.target];
    struct st_key *k = q.retry ? &g->retry : &g->src;
    switch (q.kind) {
      case Q_STREAM: take_stream(k, r); break;
      case Q_GROUPS:
        for (size_t i = 0; r->type == BK_ARRAY && i < r->elements; i++)
          if (name_is(r->element[i], g->group)) take_group_info(k, r->element[i]);
        break;
      case Q_CONSUMERS: take_consumers(g, k, r); break;
      case Q_PENDING: take_pending(k, r); break;
      case Q_DELAYED: {
        char *key = xprintf("%s:delayed:%s", g->stream, g->group);
        take_count(g, &g->delayed, key, r);
        free(key);
        break;
      }
      case Q_DEAD: take_count(g, &g->dead_letters, g->dead_letter, r); break;
    }
  }
  if (st->next < st->nq) return;
  if (st->phase == 1)
    phase_b(st);
  else
    refresh_done(st);
}

static void refresh(struct status *st) {
  st->busy = true;
  groups_free(st->prev, st->nprev);
  st->prev = st->groups;
  st->nprev = st->ngroups;
  st->groups = NULL;
  st->ngroups = 0;
  for (size_t i = 0; i < st->nstreams; i++) key_free(&st->streams[i].info);
  free(st->streams);
  st->streams = NULL;
  st->nstreams = 0;
  /* the streams to look at: DIR's, each once, or those named */
  size_t n = st->dir_mode ? st->nspecs : (size_t)st->nnames;
  st->streams = xcalloc(n, sizeof *st->streams);
  for (size_t i = 0; i < n; i++) {
    const char *name = st->dir_mode ? st->specs[i].stream : st->names[i];
    bool seen = false;
    for (size_t j = 0; j < st->nstreams && !seen; j++)
      seen = !strcmp(st->streams[j].info.key, name);
    if (!seen) key_init(&st->streams[st->nstreams++].info, xstrdup(name));
  }
  for (size_t i = 0; i < st->nspecs; i++)
    group_add(&st->groups, &st->ngroups, st->specs[i].stream, st->specs[i].group, &st->specs[i]);
  st->phase = 1;
  st->nq = st->next = 0;
  for (size_t i = 0; i < st->nstreams && !st->c->finished; i++) {
    const char *key = st->streams[i].info.key;
    query(st, Q_STREAM, i, false, (const char *[]){"XINFO", "STREAM", key}, 3);
    query(st, Q_GROUPS, i, false, (const char *[]){"XINFO", "GROUPS", key}, 3);
  }
}

static void on_tick(uv_timer_t *t) {
  struct status *st = t->data;
  if (!st->c->finished && !st->busy) refresh(st);
}

static void on_sigint(uv_signal_t *s, int signum) {
  (void)signum;
  struct status *st = s->data;
  if (st->tty && !st->json) printf("\n");
  fflush(stdout);
  finish(st, st->last_status);
}

static void status_start(struct client *c) {
  struct status *st = c->data;
  st->c = c;
  if (st->watch) {
    uv_timer_init(c->loop, &st->tick);
    st->tick.data = st;
    uv_signal_init(c->loop, &st->sigint);
    st->sigint.data = st;
    uv_signal_start(&st->sigint, on_sigint, SIGINT);
    uv_unref((uv_handle_t *)&st->sigint); /* the loop ends when the client does */
  }
  refresh(st);
}

int cmd_status(int argc, char **argv) {
  struct cli_options o;
  int rc = cli_parse(CLI_STATUS, argc, argv, &o, stdout, stderr);
  if (rc != CLI_OK) return rc == CLI_DONE ? 0 : 2;
  struct status st = {.json = cli_given(&o, OPT_JSON),
                      .watch = cli_given(&o, OPT_WATCH),
                      .tty = isatty(STDOUT_FILENO) == 1,
                      .last_status = 1};
  struct stat sb;
  int dirs = 0;
  for (int i = 0; i < o.npos; i++) dirs += stat(o.pos[i], &sb) == 0 && S_ISDIR(sb.st_mode);
  if (dirs && o.npos > 1) {
    fprintf(stderr,
            "luastream: status takes one DIR or stream names, not both (%s is a "
            "directory)\n\n",
            o.pos[0]);
    cli_print_help(CLI_STATUS, stderr);
    return 2;
  }
  if (dirs) {
    st.dir_mode = true;
    int problems =
        host_check_each(o.pos[0], (uint64_t)cli_num(&o, OPT_LOAD_TIMEOUT), take_spec, &st);
    if (problems) {
      fprintf(stderr, "luastream: %s: %d handler file%s with problems (luastream check %s)\n",
              o.pos[0], problems, problems == 1 ? "" : "s", o.pos[0]);
      groups_free(st.specs, st.nspecs);
      return 1;
    }
    if (st.nspecs == 0) {
      fprintf(stderr, "luastream: %s has no handler files\n", o.pos[0]);
      return 1;
    }
  } else {
    st.names = (const char *const *)o.pos;
    st.nnames = o.npos;
  }
  rc = client_run(&o.url, "status", status_start, &st);
  groups_free(st.specs, st.nspecs);
  groups_free(st.groups, st.ngroups);
  groups_free(st.prev, st.nprev);
  for (size_t i = 0; i < st.nstreams; i++) key_free(&st.streams[i].info);
  free(st.streams);
  free(st.q);
  return rc;
}
