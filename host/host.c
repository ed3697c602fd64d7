/* host: loading a handler directory and running its subscriptions. */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "log.h"
#include "subscription.h"

#define ERR_MAX 4096

struct host {
  broker *b;
  lclock *clock;
  struct rt_env env;        /* what handlers see: the clock, the delivery hook */
  bk_conn *cmd;
  size_t n;
  handler **handlers;       /* loaded, not yet handed to subscriptions */
  subscription **subs;
  bool ready_logged;
  bool started;             /* subscriptions exist */
  bool stopping;
  bool at_deadline;         /* inside deadline_fire: it finishes the stop itself */
  size_t drained;
  ltimer *deadline_timer;   /* host_stop_within: when running handlers are given up */
  host_stopped_fn *stopped;
  void *stopped_data;
  ltimer *info_timer;       /* retries INFO until the server answers */
  char version[32];
  long version_num;         /* bk_version_parse of version */
  bool failed;              /* stopped because it cannot run here (exit non-zero) */
  char *why_failed;         /* what the version gate said, one line per subscription */
};

/* ---- the handler directory ---- */

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int host_list_dir(const char *dir, char ***paths, char *err, size_t errlen) {
  DIR *d = opendir(dir);
  if (d == NULL) {
    snprintf(err, errlen, "%s: cannot open handler directory: %s", dir, strerror(errno));
    return -1;
  }
  size_t n = 0, cap = 8;
  char **list = malloc(cap * sizeof *list);
  struct dirent *de;
  while (list && (de = readdir(d)) != NULL) {
    size_t len = strlen(de->d_name);
    if (len <= 4 || strcmp(de->d_name + len - 4, ".lua") != 0) continue;
    if (de->d_name[0] == '_' || de->d_name[0] == '.') continue;
    if (n + 2 > cap) {
      char **grown = realloc(list, (cap *= 2) * sizeof *list);
      if (grown == NULL) break;
      list = grown;
    }
    size_t plen = strlen(dir) + len + 2;
    if ((list[n] = malloc(plen)) == NULL) break;
    snprintf(list[n++], plen, "%s/%s", dir, de->d_name);
  }
  closedir(d);
  if (list == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  list[n] = NULL;
  qsort(list, n, sizeof *list, by_name);
  if (n == 0) {
    snprintf(err, errlen, "%s: no handler files (*.lua) in this directory", dir);
    host_free_paths(list);
    return -1;
  }
  *paths = list;
  return (int)n;
}

void host_free_paths(char **paths) {
  if (paths == NULL) return;
  for (char **p = paths; *p; p++) free(*p);
  free(paths);
}

/* Loads every file; writes each problem as a line to report. Returns the
 * number of problems. */
static int load_all(const char *dir, const struct rt_env *env, handler ***out, size_t *count,
                    FILE *report) {
  char err[ERR_MAX];
  char **paths = NULL;
  *out = NULL;
  *count = 0;
  int n = host_list_dir(dir, &paths, err, sizeof err);
  if (n < 0) {
    fprintf(report, "%s\n", err);
    return 1;
  }
  handler **hs = calloc((size_t)n, sizeof *hs);
  int problems = hs ? 0 : 1;
  for (int i = 0; hs && i < n; i++) {
    if (handler_load(paths[i], env, &hs[i], err, sizeof err) != 0) {
      fprintf(report, "%s\n", err);
      problems++;
    }
  }
  host_free_paths(paths);
  if (problems && hs) {
    for (int i = 0; i < n; i++)
      if (hs[i]) handler_release(hs[i]);
    free(hs);
    hs = NULL;
  }
  *out = hs;
  *count = (size_t)n;
  return problems;
}

int host_check(const char *dir) {
  handler **hs = NULL;
  size_t n = 0;
  int problems = load_all(dir, NULL, &hs, &n, stderr);
  for (size_t i = 0; hs && i < n; i++) handler_release(hs[i]);
  free(hs);
  return problems;
}

/* ---- consumer names ---- */

/* Generated names count up per process in load order; `consumer` in the file
 * or --consumer wins. Two subscriptions of one stream and group must not share
 * a consumer, so a repeated name gets the load index appended. */
static int name_consumers(host *h, const char *override) {
  int generated = 0;
  for (size_t i = 0; i < h->n; i++) {
    const struct handler_spec *s = handler_spec(h->handlers[i]);
    char name[256];
    if (s->consumer)
      snprintf(name, sizeof name, "%s", s->consumer);
    else if (override)
      snprintf(name, sizeof name, "%s", override);
    else
      snprintf(name, sizeof name, "luastream-%d", generated++);
    for (size_t j = 0; j < i; j++) {
      const struct handler_spec *o = handler_spec(h->handlers[j]);
      if (!strcmp(o->stream, s->stream) && !strcmp(o->group, s->group) &&
          !strcmp(o->consumer, name)) {
        size_t len = strlen(name);
        snprintf(name + len, sizeof name - len, "-%zu", i);
        break;
      }
    }
    if (handler_bind(h->handlers[i], name) != 0) return -1;
  }
  return 0;
}

host *host_new(const char *dir, broker *b, lclock *clock, const char *consumer_override,
               char **problems) {
  size_t len = 0;
  *problems = NULL;
  FILE *report = open_memstream(problems, &len);
  host *h = calloc(1, sizeof *h);
  if (h == NULL || report == NULL) goto error;
  h->b = b;
  h->clock = clock;
  h->env.clock = clock;
  if (load_all(dir, &h->env, &h->handlers, &h->n, report) != 0) goto error;
  if (name_consumers(h, consumer_override) != 0) {
    fprintf(report, "%s: cannot prepare the handlers (see the log)\n", dir);
    goto error;
  }
  fclose(report);
  free(*problems);
  *problems = NULL;
  return h;
error:
  if (report) fclose(report); /* *problems holds the text now */
  else *problems = strdup("out of memory\n");
  host_free(h);
  return NULL;
}

/* ---- running ---- */

static void sub_event(void *data, subscription *s, enum sub_event ev);

static void start_subscriptions(host *h) {
  h->subs = calloc(h->n, sizeof *h->subs);
  if (h->subs == NULL) {
    log_line(LOG_ERROR, NULL, "out of memory starting subscriptions", NULL);
    return;
  }
  for (size_t i = 0; i < h->n; i++) {
    h->subs[i] = sub_new(h->handlers[i], h->b, h->cmd, h->clock, sub_event, h);
    if (h->subs[i] == NULL) {
      log_line(LOG_ERROR, handler_spec(h->handlers[i])->name, "out of memory", NULL);
      continue;
    }
    h->handlers[i] = NULL; /* the subscription owns it now */
  }
  h->started = true;
  for (size_t i = 0; i < h->n; i++)
    if (h->subs[i]) sub_start(h->subs[i], h->version_num);
}

static void finish_stop(host *h) {
  if (h->deadline_timer) timer_stop(h->deadline_timer);
  if (h->cmd) {
    bk_conn_close(h->b, h->cmd);
    h->cmd = NULL;
  }
  log_line(LOG_INFO, NULL, "host stopped", NULL);
  if (h->stopped) h->stopped(h->stopped_data);
}

/* The version gate: a claiming subscription needs XREADGROUP ... CLAIM (Redis
 * 8.4) unless it asked for the script fallback. Says so in one line per
 * subscription, before any group is joined. */
static bool server_supports_all(host *h) {
  char line[1024];
  for (size_t i = 0; i < h->n; i++) {
    const struct handler_spec *s = handler_spec(h->handlers[i]);
    if (s->read != READ_CLAIMING || s->claim_fallback || h->version_num >= SUB_CLAIM_VERSION)
      continue;
    const char *file = strrchr(s->path, '/');
    file = file ? file + 1 : s->path;
    int n = snprintf(line, sizeof line,
                     "%s: read = \"claiming\" (stream %s, group %s) needs Redis 8.4 or later; %s "
                     "runs %s; on this server set claim_fallback = true, or read with read = "
                     "\"new\" beside a read = \"reclaim\" subscription (see handlers/before-8.4/)\n",
                     file, s->stream, s->group, h->b->name, h->version);
    size_t old = h->why_failed ? strlen(h->why_failed) : 0;
    char *grown = realloc(h->why_failed, old + (size_t)n + 1);
    if (grown == NULL) break;
    memcpy(grown + old, line, (size_t)n + 1);
    h->why_failed = grown;
  }
  return h->why_failed == NULL;
}

static void info_done(void *data, const bk_reply *r, const char *err) {
  host *h = data;
  if (h->stopping) return;
  long v = r ? bk_info_version(r, h->version, sizeof h->version) : -1;
  if (v < 0) {
    log_line(LOG_ERROR, NULL, "cannot read the server version, retrying", "redis", h->b->name,
             "error", r && r->type == BK_ERROR ? r->str : err ? err : "no redis_version in INFO",
             NULL);
    timer_start(h->info_timer, 1000);
    return;
  }
  h->version_num = v;
  log_line(LOG_INFO, NULL, "connected", "redis", h->b->name, "version", h->version, NULL);
  if (!server_supports_all(h)) {
    h->failed = h->stopping = true;
    finish_stop(h);
    return;
  }
  start_subscriptions(h);
}

static void ask_version(host *h) {
  const char *argv[] = {"INFO", "server"};
  size_t len[] = {4, 6};
  if (bk_command(h->b, h->cmd, 2, argv, len, info_done, h) != 0) timer_start(h->info_timer, 1000);
}

static void info_retry(ltimer *t, void *data) {
  (void)t;
  ask_version(data);
}

static void cmd_state(void *data, bk_conn *c, int up) {
  (void)c;
  host *h = data;
  if (up && !h->started && !h->stopping) ask_version(h);
}


static void sub_event(void *data, subscription *s, enum sub_event ev) {
  (void)s;
  host *h = data;
  if (ev == SUB_EV_DRAINED) {
    if (++h->drained == h->n && !h->at_deadline) finish_stop(h);
    return;
  }
  if (h->ready_logged) return;
  /* Ready once every subscription reads (a group created again reports
   * reading again: count subscriptions, not events). */
  for (size_t i = 0; i < h->n; i++)
    if (h->subs[i] == NULL || !sub_reading(h->subs[i])) return;
  h->ready_logged = true;
  char count[24];
  snprintf(count, sizeof count, "%zu", h->n);
  log_line(LOG_INFO, NULL, "host ready", "subscriptions", count, "redis", h->b->name, "version",
           h->version, NULL);
}

void host_start(host *h, host_stopped_fn *stopped, void *data) {
  h->stopped = stopped;
  h->stopped_data = data;
  log_line(LOG_INFO, NULL, "connecting", "redis", h->b->name, NULL);
  h->info_timer = timer_new(h->clock, info_retry, h);
  h->cmd = bk_conn_open(h->b, "command", cmd_state, h);
}

/* The shutdown deadline: every subscription still stopping drops its running
 * handlers (sub_abandon); then the command connection goes, which ends the
 * writes still unanswered, so the last subscriptions drain and the host
 * stops. Drained events during this are counted but finish_stop waits until
 * the log line has been written, so it comes before "host stopped". */
static void deadline_fire(ltimer *t, void *data) {
  (void)t;
  host *h = data;
  size_t unfinished = 0, unacked = 0;
  h->at_deadline = true;
  for (size_t i = 0; i < h->n; i++) {
    size_t acks = 0;
    if (h->subs[i]) unfinished += sub_abandon(h->subs[i], &acks);
    unacked += acks;
  }
  char running[24], acks[24];
  snprintf(running, sizeof running, "%zu", unfinished);
  snprintf(acks, sizeof acks, "%zu", unacked);
  log_line(LOG_WARN, NULL, "shutdown deadline reached", "unfinished", running, "unacked",
           unacked ? acks : NULL, NULL);
  h->at_deadline = false;
  if (h->drained == h->n) return finish_stop(h);
  bk_conn *cmd = h->cmd;
  h->cmd = NULL; /* finish_stop may run inside bk_conn_close */
  if (cmd) bk_conn_close(h->b, cmd);
}

static void stop(host *h, bool deadline, uint64_t timeout_ms) {
  if (h->stopping) return;
  h->stopping = true;
  if (h->info_timer) timer_stop(h->info_timer);
  char timeout[32];
  snprintf(timeout, sizeof timeout, "%llums", (unsigned long long)timeout_ms);
  log_line(LOG_INFO, NULL, "stopping: finishing running handlers", "timeout",
           deadline ? timeout : NULL, NULL);
  if (!h->started) return finish_stop(h); /* never got as far as the subscriptions */
  /* Count the missing ones first: a subscription may drain inside sub_stop. */
  for (size_t i = 0; i < h->n; i++)
    if (h->subs[i] == NULL) h->drained++;
  if (h->drained == h->n) return finish_stop(h);
  for (size_t i = 0; i < h->n; i++)
    if (h->subs[i]) sub_stop(h->subs[i]);
  /* Armed after sub_stop, so the acks it flushed go out before even a zero
   * deadline fires. */
  if (deadline && h->drained < h->n) {
    h->deadline_timer = timer_new(h->clock, deadline_fire, h);
    if (h->deadline_timer) timer_start(h->deadline_timer, timeout_ms);
    else log_line(LOG_ERROR, NULL, "out of memory: stopping without a deadline", NULL);
  }
}

void host_stop(host *h) { stop(h, false, 0); }
void host_stop_within(host *h, uint64_t timeout_ms) { stop(h, true, timeout_ms); }

bool host_is_ready(const host *h, char *why, size_t len) {
  if (h->failed) {
    snprintf(why, len, "cannot run on this server (see the log)");
    return false;
  }
  if (h->stopping) {
    snprintf(why, len, "stopping");
    return false;
  }
  if (h->cmd == NULL || !bk_connected(h->b, h->cmd)) {
    snprintf(why, len, "redis unreachable (%s)", h->b->name);
    return false;
  }
  if (!h->started) {
    snprintf(why, len, "starting: reading the server version");
    return false;
  }
  char reason[200];
  for (size_t i = 0; i < h->n; i++) {
    const subscription *s = h->subs[i];
    if (s == NULL) {
      snprintf(why, len, "subscription %zu: not running (out of memory)", i);
      return false;
    }
    if (!sub_healthy(s, reason, sizeof reason)) {
      snprintf(why, len, "subscription %s: %s", sub_spec(s)->name, reason);
      return false;
    }
  }
  return true;
}

size_t host_subscriptions(const host *h) { return h->n; }
subscription *host_subscription(const host *h, size_t i) {
  return h->subs && i < h->n ? h->subs[i] : NULL;
}
const char *host_failed(const host *h) {
  return h->failed ? (h->why_failed ? h->why_failed : "out of memory\n") : NULL;
}

void host_on_delivery(host *h,
                      void (*fn)(void *data, const struct handler_spec *spec,
                                 const struct entry *e, const struct rt_result *res),
                      void *data) {
  h->env.on_delivery = fn;
  h->env.on_delivery_data = data;
}

void host_free(host *h) {
  if (h == NULL) return;
  for (size_t i = 0; i < h->n; i++) {
    if (h->subs && h->subs[i]) sub_free(h->subs[i]);
    if (h->handlers && h->handlers[i]) handler_release(h->handlers[i]);
  }
  if (h->cmd) bk_conn_close(h->b, h->cmd);
  if (h->info_timer) timer_free(h->info_timer);
  if (h->deadline_timer) timer_free(h->deadline_timer);
  free(h->subs);
  free(h->handlers);
  free(h->why_failed);
  free(h);
}
