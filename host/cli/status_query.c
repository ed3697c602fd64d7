/* status_query: what `luastream status` asks the server (status_query.h). */
#include "status_query.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "cron.h"
#include "handler_name.h"
#include "tz.h"
#include "lease.h"
#include "partition.h"
#include "schedule.h"

enum query_kind {
  Q_STREAM,
  Q_GROUPS,
  Q_CONSUMERS,
  Q_PENDING,
  Q_DELAYED,
  Q_DEAD,
  Q_LEASE,
  Q_TIME,
  Q_NEXT,
  Q_PAUSE,
  Q_TICK /* a schedule's hash (phase 1) */
};

/* A command sent and the row its reply fills. Each reply is handed the
 * index of its own command: on Redis Cluster the commands of one round go
 * to several nodes, and their replies come back in any order. */
struct st_command {
  enum query_kind kind;
  size_t target;   /* phase 1: a stream; phases 2 and 3: a group */
  bool retry;      /* phase 2: about the retry stream */
  size_t consumer; /* phase 3: whose lease */
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

char *status_query_when(const struct handler_spec *s) {
  if (s->every_ms > 0) return status_query_text("every %lldms", (long long)s->every_ms);
  return status_query_text("cron %s%s%s", s->cron, s->tz ? " " : "", s->tz ? s->tz : "");
}

char *status_query_text(const char *fmt, ...) {
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
  k->lag_age_ms = k->oldest_age_ms = -1;
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
  status_pause_free(&g->pause);
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
  g->claims = spec && spec->claims;
  g->handlers = spec && spec->handlers ? xstrdup(spec->handlers) : NULL;
  g->dead_letter = spec && spec->dead_letter ? xstrdup(spec->dead_letter) : NULL;
  g->dead_letters = -1;
  key_init(&g->src, xstrdup(stream));
  key_init(&g->retry, group ? status_query_text("%s:retry:%s", stream, group) : NULL);
  status_pause_init(&g->pause, spec && spec->pause.stream ? spec->pause.stream : stream, group);
  return g;
}

struct st_group *status_query_group_find(struct st_group *gs, size_t n, const char *stream,
                                         const char *group) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(gs[i].stream, stream) && gs[i].group && !strcmp(gs[i].group, group)) return &gs[i];
  return NULL;
}

void status_query_attention(struct st_group *g, const char *kind, char *text) {
  g->att = xrealloc(g->att, (g->natt + 1) * sizeof *g->att);
  g->att[g->natt++] = (struct st_attention){kind, text};
}

/* ---- the handlers of DIR ---- */

static void take_one(void *data, const struct handler_spec *s);

/* host_check_each: one row per stream and group, merging the handlers that
 * share one (a `new` and a `reclaim` subscription); a partitioned handler
 * has a row per partition (its keys, partition.h). */
static void schedule_free(struct st_schedule *t) {
  free(t->name), free(t->key), free(t->handlers), free(t->when);
  free(t->last_outcome), free(t->last_host), free(t->last_error), free(t->owner), free(t->error);
  free(t->attention);
  tz_free(t->tz);
}

/* What the last refresh read of t, forgotten before the next. */
static void schedule_reset(struct st_schedule *t) {
  free(t->last_outcome), free(t->last_host), free(t->last_error), free(t->owner), free(t->error);
  free(t->attention);
  t->last_outcome = t->last_host = t->last_error = t->owner = t->error = t->attention = NULL;
  t->read = t->exists = false;
  t->last_tick = t->next_tick = t->last_at = t->runs = t->errors = -1;
  t->lease_until = t->running = -1;
}

static void add_schedule(struct status_query *q, const struct handler_spec *s) {
  const char *name = spec_schedule_name(s);
  const char *file = handler_name_file(s->path);
  for (size_t i = 0; i < q->nschedules; i++)
    if (!strcmp(q->schedules[i].name, name)) {
      char *h = status_query_text("%s, %s", q->schedules[i].handlers, file);
      free(q->schedules[i].handlers);
      q->schedules[i].handlers = h;
      return;
    }
  q->schedules = xrealloc(q->schedules, (q->nschedules + 1) * sizeof *q->schedules);
  struct st_schedule *t = &q->schedules[q->nschedules++];
  memset(t, 0, sizeof *t);
  t->name = xstrdup(name);
  t->key = status_query_text(SCHED_KEY_PREFIX "{%s}", name);
  t->handlers = xstrdup(file);
  char why[600];
  t->when = status_query_when(s);
  if (s->every_ms > 0) {
    t->every_ms = s->every_ms;
  } else {
    t->has_cron = cron_parse(s->cron, &t->cron, why, sizeof why) == 0 &&
                  (s->tz == NULL || tz_load(s->tz, &t->tz, why, sizeof why) == 0);
  }
  schedule_reset(t);
}

/* HGETALL of a schedule's hash: [field, value, ...]. */
static void take_tick(struct st_schedule *t, const bk_reply *r) {
  schedule_reset(t);
  t->read = true;
  if (r->type == BK_ERROR) {
    t->error = status_query_text("%s", r->str);
    return;
  }
  if (r->type != BK_ARRAY) return;
  t->exists = r->elements > 0;
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    const bk_reply *k = r->element[i], *v = r->element[i + 1];
    if (k->type != BK_STRING || v->type != BK_STRING) continue;
    char *text = status_query_text("%.*s", (int)v->len, v->str);
    long long n = strtoll(text, NULL, 10);
    if (!strcmp(k->str, "last_tick"))
      t->last_tick = n;
    else if (!strcmp(k->str, "next"))
      t->next_tick = n > 0 ? n : -1;
    else if (!strcmp(k->str, "last_at"))
      t->last_at = n;
    else if (!strcmp(k->str, "runs"))
      t->runs = n;
    else if (!strcmp(k->str, "errors"))
      t->errors = n;
    else if (!strcmp(k->str, "until"))
      t->lease_until = n;
    else if (!strcmp(k->str, "running"))
      t->running = n;
    else if (!strcmp(k->str, "last_outcome") && !t->last_outcome)
      t->last_outcome = text, text = NULL;
    else if (!strcmp(k->str, "last_host") && !t->last_host)
      t->last_host = text, text = NULL;
    else if (!strcmp(k->str, "last_error") && !t->last_error && v->len)
      t->last_error = text, text = NULL;
    else if (!strcmp(k->str, "owner") && !t->owner)
      t->owner = text, text = NULL;
    free(text);
  }
}

void status_query_add_handler(void *data, const struct handler_spec *s) {
  if (spec_scheduled(s)) return add_schedule(data, s);
  ((struct status_query *)data)->adding_base = s->stream;
  int rc = partition_each(s, take_one, data);
  ((struct status_query *)data)->adding_base = NULL;
  if (rc != 0) {
    fputs("luastream: out of memory\n", stderr);
    exit(1);
  }
}

/* partition_each's: one row per stream and group. */
static void take_one(void *data, const struct handler_spec *s) {
  struct status_query *q = data;
  struct st_group *g = status_query_group_find(q->specs, q->nspecs, s->stream, s->group);
  if (g == NULL) {
    g = group_add(&q->specs, &q->nspecs, s->stream, s->group, NULL);
    /* a partition's group pauses as its handler's: the base stream's key */
    status_pause_free(&g->pause);
    status_pause_init(&g->pause, q->adding_base ? q->adding_base : s->stream, s->group);
  }
  const char *file = handler_name_file(s->path);
  char *handlers = g->handlers ? status_query_text("%s, %s", g->handlers, file) : xstrdup(file);
  free(g->handlers);
  g->handlers = handlers;
  if (s->min_idle_ms > 0 && (g->min_idle_ms <= 0 || s->min_idle_ms < g->min_idle_ms))
    g->min_idle_ms = s->min_idle_ms;
  if (s->dead_letter && g->dead_letter == NULL) g->dead_letter = xstrdup(s->dead_letter);
  if (s->read != READ_NEW) g->claims = true;
}

/* ---- replies ---- */

static long long kv_int(const bk_reply *r, const char *name, long long missing) {
  const bk_reply *v = client_field(r, name);
  return v && v->type == BK_INTEGER ? v->integer : missing;
}

static void kv_str(const bk_reply *r, const char *name, char *out, size_t len) {
  const bk_reply *v = client_field(r, name);
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
  if (error_is(r, "WRONGTYPE")) return status_query_text("%s is not a stream", key);
  if (r->type == BK_ERROR) return status_query_text("%s", r->str);
  return status_query_text("unexpected reply about %s", key);
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
  const bk_reply *v = client_field(info, "name");
  return v && v->type == BK_STRING && v->len == strlen(name) && !memcmp(v->str, name, v->len);
}

/* XINFO GROUPS of a stream named on the command line or read by DIR's handlers. */
static void take_groups(struct status_query *q, size_t si, const bk_reply *r) {
  struct st_key *info = &q->streams[si].info;
  if (r->type != BK_ARRAY) return; /* a missing key: XINFO STREAM said so */
  for (size_t i = 0; i < r->elements; i++) {
    const bk_reply *gi = r->element[i];
    const bk_reply *name = client_field(gi, "name");
    if (name == NULL || name->type != BK_STRING) continue;
    char *group = status_query_text("%.*s", (int)name->len, name->str);
    struct st_group *g = status_query_group_find(q->groups, q->ngroups, info->key, group);
    if (g == NULL && !q->dir_mode) g = group_add(&q->groups, &q->ngroups, info->key, group, NULL);
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
    const bk_reply *name = client_field(ci, "name");
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
      *c = (struct st_consumer){.name = status_query_text("%.*s", (int)name->len, name->str),
                                .idle_ms = idle};
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
      r->element[0]->elements >= 3 && r->element[0]->element[2]->type == BK_INTEGER) {
    k->oldest_idle_ms = r->element[0]->element[2]->integer;
    const bk_reply *id = r->element[0]->element[0];
    if (id->type == BK_STRING && id->len < sizeof k->oldest_id)
      snprintf(k->oldest_id, sizeof k->oldest_id, "%.*s", (int)id->len, id->str);
  }
}

/* XRANGE key (delivered + COUNT 1: [[id, fields]], [] when none. The entry
 * the stream holds now: deleted and trimmed ones are skipped. */
static void take_next(struct st_key *k, const bk_reply *r) {
  if (r->type == BK_ERROR) {
    k->next_unknown = true;
    if (!absent(r) && k->error == NULL) k->error = reply_error(r, k->key);
    return;
  }
  if (r->type == BK_ARRAY && r->elements >= 1 && r->element[0]->type == BK_ARRAY &&
      r->element[0]->elements >= 1) {
    const bk_reply *id = r->element[0]->element[0];
    if (id->type == BK_STRING && id->len < sizeof k->next_id)
      snprintf(k->next_id, sizeof k->next_id, "%.*s", (int)id->len, id->str);
  }
}

/* TIME: [seconds, microseconds]. Refused (an ACL without it): every age
 * is unknown, which each group says. */
static void take_time(struct status_query *q, const bk_reply *r) {
  if (r->type == BK_ERROR) {
    for (size_t i = 0; i < q->ngroups; i++)
      if (q->groups[i].side_error == NULL)
        q->groups[i].side_error = status_query_text(
            "cannot read the server's clock (TIME): %s: the ages are unknown", r->str);
    return;
  }
  if (r->type != BK_ARRAY || r->elements != 2 || r->element[0]->type != BK_STRING ||
      r->element[1]->type != BK_STRING)
    return;
  q->server_ms =
      strtoll(r->element[0]->str, NULL, 10) * 1000 + strtoll(r->element[1]->str, NULL, 10) / 1000;
}

/* How long the entry at id ("": none) has waited at now: 0 for none or one
 * ahead of the clock. */
static long long id_age(const char *id, long long now) {
  if (id[0] == '\0') return 0;
  char *end;
  unsigned long long ms = strtoull(id, &end, 10);
  return *end == '-' && ms < (unsigned long long)now ? now - (long long)ms : 0;
}

static void key_ages(struct st_key *k, long long now) {
  if (now < 0 || !k->group_exists) return;
  k->lag_age_ms = k->next_unknown ? -1 : id_age(k->next_id, now);
  k->oldest_age_ms = k->pending ? id_age(k->oldest_id, now) : 0;
}

/* The last round answered: the ages, then the caller. */
static void finish(struct status_query *q) {
  for (size_t i = 0; i < q->ngroups; i++) {
    key_ages(&q->groups[i].src, q->server_ms);
    key_ages(&q->groups[i].retry, q->server_ms);
    status_pause_settle(&q->groups[i].pause, q->server_ms);
  }
  q->done(q, false);
}

/* XRANGE of the entry after key's delivered id: none after the largest id. */
static bool next_askable(const struct st_key *k) {
  return k->group_exists && strcmp(k->delivered, "18446744073709551615-18446744073709551615");
}

static void take_count(struct st_group *g, long long *out, const char *key, const bk_reply *r) {
  if (r->type == BK_INTEGER) {
    *out = r->integer;
  } else if (g->side_error == NULL) {
    g->side_error =
        error_is(r, "WRONGTYPE")
            ? status_query_text("%s is not a %s", key, out == &g->delayed ? "sorted set" : "stream")
            : reply_error(r, key);
  }
}

static char *consumer_lease_key(const struct st_group *g, const struct st_consumer *c) {
  char *key = lease_key(g->stream, g->group, c->name);
  if (key == NULL) {
    fputs("luastream: out of memory\n", stderr);
    exit(1);
  }
  return key;
}

/* PTTL of a consumer's lease key */
static void take_lease(struct st_group *g, struct st_consumer *c, const bk_reply *r) {
  if (r->type == BK_INTEGER) {
    c->lease_read = true;
    c->lease_ttl_ms = r->integer;
  } else if (g->side_error == NULL) {
    char *key = consumer_lease_key(g, c);
    g->side_error = status_query_text("cannot read the lease %s: %s", key,
                                      r->type == BK_ERROR ? r->str : "unexpected reply");
    free(key);
  }
}

/* ---- one refresh ---- */

static void on_reply(struct client *c, void *arg, const bk_reply *r, const char *err);

static void send_command(struct status_query *q, struct st_command cmd, const char *const *argv,
                         int argc) {
  struct bk_args a;
  bk_args_init(&a);
  for (int i = 0; i < argc; i++) bk_args_str(&a, argv[i]);
  if (q->nsent == q->capsent) {
    q->capsent = q->capsent ? q->capsent * 2 : 16;
    q->sent = xrealloc(q->sent, q->capsent * sizeof *q->sent);
  }
  size_t index = q->nsent++;
  q->sent[index] = cmd;
  /* The index, not a pointer into sent: sent may move as the round grows. */
  if (client_send_with(q->c, &a, on_reply, (void *)(uintptr_t)index) != 0) q->nsent--;
  bk_args_free(&a);
}

static void ask(struct status_query *q, enum query_kind kind, size_t target, bool retry,
                const char *const *argv, int argc) {
  send_command(q, (struct st_command){kind, target, retry, 0}, argv, argc);
}

static int consumer_cmp(const void *a, const void *b) {
  return strcmp(((const struct st_consumer *)a)->name, ((const struct st_consumer *)b)->name);
}

/* By name: the same order whichever of the stream's and the retry stream's
 * XINFO CONSUMERS came back first. */
static void sort_consumers(struct st_group *g) {
  if (g->nconsumers > 1) qsort(g->consumers, g->nconsumers, sizeof *g->consumers, consumer_cmp);
}

static size_t stream_index(const struct status_query *q, const char *stream) {
  for (size_t i = 0; i < q->nstreams; i++)
    if (!strcmp(q->streams[i].info.key, stream)) return i;
  return q->nstreams;
}

/* The rows of the streams named come in the order the streams were named,
 * whichever stream's XINFO GROUPS came back first (a stable insertion sort:
 * one stream's groups keep the order of its reply). */
static void order_groups(struct status_query *q) {
  for (size_t i = 1; i < q->ngroups; i++) {
    struct st_group g = q->groups[i];
    size_t key = stream_index(q, g.stream), j = i;
    for (; j > 0 && stream_index(q, q->groups[j - 1].stream) > key; j--)
      q->groups[j] = q->groups[j - 1];
    q->groups[j] = g;
  }
}

static void ask_next(struct status_query *q, size_t i, bool retry) {
  const struct st_key *k = retry ? &q->groups[i].retry : &q->groups[i].src;
  char *from = status_query_text("(%s", k->delivered);
  ask(q, Q_NEXT, i, retry, (const char *[]){"XRANGE", k->key, from, "+", "COUNT", "1"}, 6);
  free(from);
}

/* Each consumer's lease, to tell a running host from a stopped one; the
 * next entry of each retry stream, whose group phase 2 read. */
static void phase_c(struct status_query *q) {
  q->phase = 3;
  q->nsent = q->answered = 0;
  for (size_t i = 0; i < q->ngroups; i++) sort_consumers(&q->groups[i]);
  for (size_t i = 0; i < q->ngroups && !q->c->finished; i++) {
    const struct st_group *g = &q->groups[i];
    for (size_t j = 0; j < g->nconsumers && !q->c->finished; j++) {
      char *key = consumer_lease_key(g, &g->consumers[j]);
      send_command(q, (struct st_command){Q_LEASE, i, false, j}, (const char *[]){"PTTL", key}, 2);
      free(key);
    }
    if (next_askable(&g->retry) && !q->c->finished) ask_next(q, i, true);
  }
  if (q->nsent == 0 && !q->c->finished) finish(q);
}

static void phase_b(struct status_query *q) {
  q->phase = 2;
  q->nsent = q->answered = 0;
  for (size_t i = 0; i < q->nstreams; i++) {
    /* a stream without groups still gets a row when it was named */
    struct st_key *info = &q->streams[i].info;
    bool any = false;
    for (size_t j = 0; j < q->ngroups && !any; j++) any = !strcmp(q->groups[j].stream, info->key);
    if (!any) group_add(&q->groups, &q->ngroups, info->key, NULL, NULL);
  }
  if (!q->dir_mode) order_groups(q);
  q->server_ms = -1;
  if (q->ngroups || q->nschedules) ask(q, Q_TIME, 0, false, (const char *[]){"TIME"}, 1);
  for (size_t i = 0; i < q->ngroups && !q->c->finished; i++) {
    struct st_group *g = &q->groups[i];
    for (size_t j = 0; j < q->nstreams; j++) {
      const struct st_key *info = &q->streams[j].info;
      if (strcmp(info->key, g->stream)) continue;
      g->src.exists = info->exists;
      g->src.length = info->length;
      memcpy(g->src.last_id, info->last_id, sizeof g->src.last_id);
      if (info->error && g->src.error == NULL) g->src.error = xstrdup(info->error);
    }
    if (g->group == NULL || !g->src.exists) continue;
    const char *s = g->stream, *grp = g->group, *rk = g->retry.key;
    ask(q, Q_PAUSE, i, false, (const char *[]){"HGETALL", g->pause.key}, 2);
    if (g->src.group_exists) {
      ask(q, Q_CONSUMERS, i, false, (const char *[]){"XINFO", "CONSUMERS", s, grp}, 4);
      ask(q, Q_PENDING, i, false, (const char *[]){"XPENDING", s, grp, "-", "+", "1"}, 6);
      if (next_askable(&g->src)) ask_next(q, i, false);
    }
    ask(q, Q_STREAM, i, true, (const char *[]){"XINFO", "STREAM", rk}, 3);
    ask(q, Q_GROUPS, i, true, (const char *[]){"XINFO", "GROUPS", rk}, 3);
    ask(q, Q_CONSUMERS, i, true, (const char *[]){"XINFO", "CONSUMERS", rk, grp}, 4);
    ask(q, Q_PENDING, i, true, (const char *[]){"XPENDING", rk, grp, "-", "+", "1"}, 6);
    char *delayed = status_query_text("%s:delayed:%s", s, grp);
    ask(q, Q_DELAYED, i, false, (const char *[]){"ZCARD", delayed}, 2);
    free(delayed);
    if (g->dead_letter) ask(q, Q_DEAD, i, false, (const char *[]){"XLEN", g->dead_letter}, 2);
    if (q->c->finished) return;
  }
  if (q->nsent == 0 && !q->c->finished) phase_c(q);
}

static void on_reply(struct client *c, void *arg, const bk_reply *r, const char *err) {
  struct status_query *q = c->data;
  if (c->finished) return;
  if (r == NULL) {
    client_say(c, "no reply from %s: %s", c->b->name, err ? err : "connection lost");
    q->done(q, true);
    return;
  }
  struct st_command cmd = q->sent[(uintptr_t)arg];
  q->answered++;
  if (q->phase == 1) {
    if (cmd.kind == Q_TICK)
      take_tick(&q->schedules[cmd.target], r);
    else if (cmd.kind == Q_STREAM)
      take_stream(&q->streams[cmd.target].info, r);
    else
      take_groups(q, cmd.target, r);
  } else if (cmd.kind == Q_TIME) { /* asked with no group too (a DIR of schedules only) */
    take_time(q, r);
  } else {
    struct st_group *g = &q->groups[cmd.target];
    struct st_key *k = cmd.retry ? &g->retry : &g->src;
    switch (cmd.kind) {
      case Q_STREAM: take_stream(k, r); break;
      case Q_GROUPS:
        for (size_t i = 0; r->type == BK_ARRAY && i < r->elements; i++)
          if (name_is(r->element[i], g->group)) take_group_info(k, r->element[i]);
        break;
      case Q_CONSUMERS: take_consumers(g, k, r); break;
      case Q_PENDING: take_pending(k, r); break;
      case Q_DELAYED: {
        char *key = status_query_text("%s:delayed:%s", g->stream, g->group);
        take_count(g, &g->delayed, key, r);
        free(key);
        break;
      }
      case Q_DEAD: take_count(g, &g->dead_letters, g->dead_letter, r); break;
      case Q_LEASE: take_lease(g, &g->consumers[cmd.consumer], r); break;
      case Q_TIME: break; /* above */
      case Q_NEXT: take_next(k, r); break;
      case Q_TICK: break;
      case Q_PAUSE:
        if (!status_pause_take(&g->pause, r) && g->side_error == NULL)
          g->side_error = status_query_text("cannot read the pause %s: %s", g->pause.key,
                                            r->type == BK_ERROR ? r->str : "unexpected reply");
        break;
    }
  }
  if (q->answered < q->nsent) return;
  if (q->phase == 1)
    phase_b(q);
  else if (q->phase == 2)
    phase_c(q);
  else
    finish(q);
}

void status_query_refresh(struct status_query *q) {
  groups_free(q->prev, q->nprev);
  q->prev = q->groups;
  q->nprev = q->ngroups;
  q->groups = NULL;
  q->ngroups = 0;
  for (size_t i = 0; i < q->nstreams; i++) key_free(&q->streams[i].info);
  free(q->streams);
  q->streams = NULL;
  q->nstreams = 0;
  /* the streams to look at: DIR's, each once, or those named */
  size_t n = q->dir_mode ? q->nspecs : (size_t)q->nnames;
  q->streams = xcalloc(n, sizeof *q->streams);
  for (size_t i = 0; i < n; i++) {
    const char *name = q->dir_mode ? q->specs[i].stream : q->names[i];
    bool seen = false;
    for (size_t j = 0; j < q->nstreams && !seen; j++) seen = !strcmp(q->streams[j].info.key, name);
    if (!seen) key_init(&q->streams[q->nstreams++].info, xstrdup(name));
  }
  for (size_t i = 0; i < q->nspecs; i++)
    group_add(&q->groups, &q->ngroups, q->specs[i].stream, q->specs[i].group, &q->specs[i]);
  q->phase = 1;
  q->nsent = q->answered = 0;
  for (size_t i = 0; i < q->nstreams && !q->c->finished; i++) {
    const char *key = q->streams[i].info.key;
    ask(q, Q_STREAM, i, false, (const char *[]){"XINFO", "STREAM", key}, 3);
    ask(q, Q_GROUPS, i, false, (const char *[]){"XINFO", "GROUPS", key}, 3);
  }
  for (size_t i = 0; i < q->nschedules && !q->c->finished; i++)
    ask(q, Q_TICK, i, false, (const char *[]){"HGETALL", q->schedules[i].key}, 2);
}

static void schedules_free(struct status_query *q) {
  for (size_t i = 0; i < q->nschedules; i++) schedule_free(&q->schedules[i]);
  free(q->schedules);
  q->schedules = NULL;
  q->nschedules = 0;
}

void status_query_clear_specs(struct status_query *q) {
  schedules_free(q);
  groups_free(q->specs, q->nspecs);
  q->specs = NULL;
  q->nspecs = 0;
}

void status_query_free(struct status_query *q) {
  schedules_free(q);
  groups_free(q->specs, q->nspecs);
  groups_free(q->groups, q->ngroups);
  groups_free(q->prev, q->nprev);
  for (size_t i = 0; i < q->nstreams; i++) key_free(&q->streams[i].info);
  free(q->streams);
  free(q->sent);
}
