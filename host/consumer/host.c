/* host: loading a handler directory and running its subscriptions. */
#include <dirent.h>
#include <errno.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entry.h"
#include "host.h"
#include "lease.h"
#include "log.h"
#include "subscription.h"

#define ERR_MAX 4096
#define RELOAD_DEBOUNCE_MS 200 /* host_reload_soon: quiet time before a reload */

/* One handler file and what runs it. A reload restart stops `sub` (it becomes
 * `old`) and starts `next` once old has drained; a removed file's slot goes
 * once its subscription has drained. Invariant: sub and old are never both
 * set. */
struct slot {
  char *path;               /* the handler file, as listed */
  handler *loaded;          /* before start: loaded and bound, not yet running */
  subscription *sub;        /* running */
  subscription *old;        /* stopping (restart or removal); freed once drained */
  handler *next;            /* restart: bound, starts once old has drained */
  char *consumer;           /* the consumer name bound last */
  bool initial;             /* started with the host: a refused lease fails the host */
  bool removed;             /* the file is gone */
  char failed[RT_VERSION_LEN]; /* content that failed to load (reported once); "" none */
};

struct host {
  char *dir;                /* the handler directory */
  char *consumer_override;  /* --consumer, or NULL */
  int instance;             /* --instance, or -1 */
  char hostname[256];       /* the machine, in generated consumer names */
  char identity[LEASE_IDENTITY_MAX]; /* this host's lease value */
  broker *b;
  lclock *clock;
  struct rt_env env;        /* what handlers see: the clock, the delivery hook */
  bk_conn *cmd;
  struct slot *slots;       /* by load order; files added later at the end */
  size_t nslots, slots_cap;
  size_t undrained;         /* subscriptions created and not drained yet */
  bool ready_logged;
  bool connected;           /* the command connection has been up once */
  bool started;             /* subscriptions exist */
  bool stopping;
  bool at_deadline;         /* inside deadline_fire: it finishes the stop itself */
  bool reload_wanted;       /* a reload asked for before the start: runs after it */
  ltimer *deadline_timer;   /* host_stop_within: when running handlers are given up */
  ltimer *reap_timer;       /* frees drained subscriptions, starts their successors */
  ltimer *reload_timer;     /* host_reload_soon */
  host_stopped_fn *stopped;
  void *stopped_data;
  ltimer *info_timer;       /* retries INFO until the server answers */
  char version[32];
  long version_num;         /* bk_version_parse of version */
  bool dir_gone;            /* the last reload found no handler directory */
  bool failed;              /* stopped because it cannot run here (exit non-zero) */
  char *why_failed;         /* what the version gate said, one line per subscription */
};

/* ---- the handler directory ---- */

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* host_list_dir; an empty directory is an error only when !allow_empty.
 * Returns -2 (with err) when the directory does not exist. */
static int list_dir(const char *dir, bool allow_empty, char ***paths, char *err, size_t errlen) {
  DIR *d = opendir(dir);
  if (d == NULL) {
    int gone = errno == ENOENT || errno == ENOTDIR;
    snprintf(err, errlen, "%s: cannot open handler directory: %s", dir, strerror(errno));
    return gone ? -2 : -1;
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
  if (n == 0 && !allow_empty) {
    snprintf(err, errlen, "%s: no handler files (*.lua) in this directory", dir);
    host_free_paths(list);
    return -1;
  }
  *paths = list;
  return (int)n;
}

int host_list_dir(const char *dir, char ***paths, char *err, size_t errlen) {
  int n = list_dir(dir, false, paths, err, errlen);
  return n < 0 ? -1 : n;
}

void host_free_paths(char **paths) {
  if (paths == NULL) return;
  for (char **p = paths; *p; p++) free(*p);
  free(paths);
}

/* Two handler files reading one stream as one group split its entries
 * between them, unless they are the new + reclaim pair (one reads new
 * entries, the other only recovers idle pending ones). True, with why, when
 * a and b would. */
static bool split_group(const struct handler_spec *a, const struct handler_spec *b, char *why,
                        size_t len) {
  if (strcmp(a->stream, b->stream) != 0 || strcmp(a->group, b->group) != 0) return false;
  bool pair = (a->read == READ_NEW && b->read == READ_RECLAIM) ||
              (a->read == READ_RECLAIM && b->read == READ_NEW);
  if (pair) return false;
  snprintf(why, len,
           "%s and %s both read stream %s as group %s: they would split its entries between "
           "them; use one file per group, or the pair of one read = \"new\" file and one read = "
           "\"reclaim\" file (see docs/consumer-groups-and-crash-recovery.md)",
           a->path, b->path, a->stream, a->group);
  return true;
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
  for (int i = 0; hs && i < n; i++)
    for (int j = i + 1; hs[i] && j < n; j++)
      if (hs[j] && split_group(handler_spec(hs[i]), handler_spec(hs[j]), err, sizeof err)) {
        fprintf(report, "%s: %s\n", handler_spec(hs[j])->path, err);
        problems++;
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

int host_check(const char *dir, uint64_t load_timeout_ms) {
  handler **hs = NULL;
  size_t n = 0;
  struct rt_env env = {.load_timeout_ms = load_timeout_ms}; /* no clock: nothing runs */
  int problems = load_all(dir, &env, &hs, &n, stderr);
  for (size_t i = 0; hs && i < n; i++) handler_release(hs[i]);
  free(hs);
  return problems;
}

/* ---- slots ---- */

/* The handler a slot runs or is about to run, or NULL. */
static handler *slot_handler(const struct slot *sl) {
  if (sl->next) return sl->next;
  if (sl->loaded) return sl->loaded;
  return NULL;
}

/* The spec of what the slot runs (or will run once restarted), or NULL. */
static const struct handler_spec *slot_spec(const struct slot *sl) {
  handler *hd = slot_handler(sl);
  if (hd) return handler_spec(hd);
  return sl->sub ? sub_spec(sl->sub) : NULL;
}

static const char *slot_version(const struct slot *sl) {
  handler *hd = slot_handler(sl);
  if (hd) return handler_version(hd);
  return sl->sub ? sub_version(sl->sub) : NULL;
}

/* basename without .lua, for log lines about a file without a handler */
static const char *slot_name(const struct slot *sl, char *buf, size_t len) {
  const char *base = strrchr(sl->path, '/');
  base = base ? base + 1 : sl->path;
  size_t n = strlen(base);
  if (n > 4 && strcmp(base + n - 4, ".lua") == 0) n -= 4;
  snprintf(buf, len, "%.*s", (int)n, base);
  return buf;
}

static struct slot *slot_add(host *h, const char *path) {
  if (h->nslots == h->slots_cap) {
    size_t cap = h->slots_cap ? h->slots_cap * 2 : 8;
    struct slot *grown = realloc(h->slots, cap * sizeof *grown);
    if (grown == NULL) return NULL;
    h->slots = grown;
    h->slots_cap = cap;
  }
  struct slot *sl = &h->slots[h->nslots];
  memset(sl, 0, sizeof *sl);
  if ((sl->path = strdup(path)) == NULL) return NULL;
  h->nslots++;
  return sl;
}

/* Only once nothing runs in it. */
static void slot_delete(host *h, size_t i) {
  struct slot *sl = &h->slots[i];
  free(sl->path);
  free(sl->consumer);
  memmove(sl, sl + 1, (h->nslots - i - 1) * sizeof *sl);
  h->nslots--;
}

static struct slot *slot_find(host *h, const char *path) {
  for (size_t i = 0; i < h->nslots; i++)
    if (strcmp(h->slots[i].path, path) == 0) return &h->slots[i];
  return NULL;
}

/* ---- consumer names ---- */

/* Binds hd to its consumer name (struct host_names in host.h) and remembers
 * it in the slot. A name another subscription of the same stream and group
 * uses already gets -<handler> appended, so the two stay distinct. */
static int bind_consumer(host *h, struct slot *sl, handler *hd) {
  const struct handler_spec *s = handler_spec(hd);
  size_t self = (size_t)(sl - h->slots);
  char name[512];
  if (s->consumer)
    snprintf(name, sizeof name, "%s", s->consumer);
  else if (h->consumer_override)
    snprintf(name, sizeof name, "%s", h->consumer_override);
  else if (h->instance >= 0)
    snprintf(name, sizeof name, "%s-%s-%d", h->hostname, s->name, h->instance);
  else
    snprintf(name, sizeof name, "%s-%s", h->hostname, s->name);
  for (size_t j = 0; j < h->nslots; j++) {
    const struct handler_spec *o = slot_spec(&h->slots[j]);
    if (j == self || o == NULL || o->consumer == NULL || h->slots[j].removed) continue;
    if (!strcmp(o->stream, s->stream) && !strcmp(o->group, s->group) &&
        !strcmp(o->consumer, name)) {
      size_t len = strlen(name);
      snprintf(name + len, sizeof name - len, "-%s", s->name);
      break;
    }
  }
  if (handler_bind(hd, name) != 0) return -1;
  char *copy = strdup(name);
  if (copy == NULL) return -1;
  free(sl->consumer);
  sl->consumer = copy;
  return 0;
}

host *host_new(const char *dir, broker *b, lclock *clock, const struct host_names *names,
               uint64_t load_timeout_ms, char **problems) {
  const char *consumer_override = names ? names->consumer : NULL;
  size_t len = 0;
  *problems = NULL;
  FILE *report = open_memstream(problems, &len);
  host *h = calloc(1, sizeof *h);
  handler **hs = NULL;
  size_t n = 0;
  if (h == NULL || report == NULL) goto error;
  h->b = b;
  h->clock = clock;
  h->env.clock = clock;
  h->env.load_timeout_ms = load_timeout_ms;
  h->dir = strdup(dir);
  h->consumer_override = consumer_override ? strdup(consumer_override) : NULL;
  if (h->dir == NULL || (consumer_override && h->consumer_override == NULL)) goto oom;
  h->instance = names ? names->instance : -1;
  if (names && names->hostname)
    snprintf(h->hostname, sizeof h->hostname, "%s", names->hostname);
  else if (gethostname(h->hostname, sizeof h->hostname - 1) != 0 || h->hostname[0] == '\0')
    snprintf(h->hostname, sizeof h->hostname, "localhost");
  if (lease_identity(h->hostname, h->identity, sizeof h->identity) != 0) goto oom;
  if (load_all(dir, &h->env, &hs, &n, report) != 0) goto error;
  for (size_t i = 0; i < n; i++) {
    struct slot *sl = slot_add(h, handler_spec(hs[i])->path);
    if (sl == NULL) goto oom;
    sl->loaded = hs[i];
    hs[i] = NULL;
  }
  /* A new + reclaim pair sharing a name: the reclaim one is bound second,
   * so it is the one that gets -<handler>, whatever the file order. */
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < h->nslots; i++) {
      if ((handler_spec(h->slots[i].loaded)->read == READ_RECLAIM) != (pass == 1)) continue;
      if (bind_consumer(h, &h->slots[i], h->slots[i].loaded) != 0) {
        fprintf(report, "%s: cannot prepare the handlers (see the log)\n", dir);
        goto error;
      }
    }
  }
  free(hs);
  fclose(report);
  free(*problems);
  *problems = NULL;
  return h;
oom:
  fprintf(report, "out of memory\n");
error:
  for (size_t i = 0; hs && i < n; i++)
    if (hs[i]) handler_release(hs[i]);
  free(hs);
  if (report) fclose(report); /* *problems holds the text now */
  else *problems = strdup("out of memory\n");
  host_free(h);
  return NULL;
}

/* ---- running ---- */

static void sub_event(void *data, subscription *s, enum sub_event ev);

/* Starts a subscription for hd in sl (hd is the subscription's from here on,
 * also when that fails). keep_cursor: it takes over from an earlier one. */
static void start_slot(host *h, struct slot *sl, handler *hd, bool keep_cursor) {
  const char *name = handler_spec(hd)->name;
  log_line(LOG_INFO, name, "handler loaded", "version", handler_version(hd), NULL);
  subscription *s = sub_new(hd, h->b, h->cmd, h->clock, h->identity, sub_event, h);
  if (s == NULL) { /* sub_new released hd */
    log_line(LOG_ERROR, NULL, "out of memory: subscription not started", "file", sl->path, NULL);
    return;
  }
  sl->sub = s;
  h->undrained++;
  if (keep_cursor) sub_keep_cursor(s);
  sub_start(s, h->version_num);
}

static void start_subscriptions(host *h) {
  h->started = true;
  for (size_t i = 0; i < h->nslots; i++) {
    handler *hd = h->slots[i].loaded;
    h->slots[i].loaded = NULL;
    h->slots[i].initial = true;
    if (hd) start_slot(h, &h->slots[i], hd, false);
  }
  if (h->reload_wanted) host_reload(h, false);
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

/* Appends a line to why_failed (host_failed). */
static int add_failure(host *h, const char *line) {
  size_t old = h->why_failed ? strlen(h->why_failed) : 0, n = strlen(line);
  char *grown = realloc(h->why_failed, old + n + 1);
  if (grown == NULL) return -1;
  memcpy(grown + old, line, n + 1);
  h->why_failed = grown;
  return 0;
}

/* The version gate for one spec: true when it cannot run on this server. */
static bool needs_claim(const host *h, const struct handler_spec *s) {
  return s->read == READ_CLAIMING && !s->claim_fallback && h->version_num < SUB_CLAIM_VERSION;
}

/* The version gate: a claiming subscription needs XREADGROUP ... CLAIM (Redis
 * 8.4) unless it asked for the script fallback. Says so in one line per
 * subscription, before any group is joined. */
static bool server_supports_all(host *h) {
  char line[1024];
  for (size_t i = 0; i < h->nslots; i++) {
    const struct handler_spec *s = slot_spec(&h->slots[i]);
    if (s == NULL || !needs_claim(h, s)) continue;
    const char *file = strrchr(s->path, '/');
    file = file ? file + 1 : s->path;
    int n = snprintf(line, sizeof line,
                     "%s: read = \"claiming\" (stream %s, group %s) needs Redis 8.4 or later; %s "
                     "runs %s; on this server set claim_fallback = true, or read with read = "
                     "\"new\" beside a read = \"reclaim\" subscription (see handlers/before-8.4/)\n",
                     file, s->stream, s->group, h->b->name, h->version);
    (void)n;
    if (add_failure(h, line) != 0) break;
  }
  return h->why_failed == NULL;
}

/* At start-up, before the server was ever reached: the server refused the
 * credentials or a right that every run needs. Waiting cannot help, so the
 * host stops and exits non-zero, saying what to fix. */
static void fail_start(host *h, const char *why) {
  log_line(LOG_ERROR, NULL, "redis refused luastream: not starting", "redis", h->b->name,
           "error", why, NULL);
  char line[768];
  int n = snprintf(line, sizeof line, "luastream: cannot start: %s refused: %s\n", h->b->name, why);
  free(h->why_failed);
  h->why_failed = n > 0 ? strdup(line) : NULL;
  h->failed = h->stopping = true;
  finish_stop(h);
}

static void info_done(void *data, const bk_reply *r, const char *err) {
  host *h = data;
  if (h->stopping) return;
  if (!h->started && bk_reply_is_error(r, "NOPERM")) {
    char why[512];
    snprintf(why, sizeof why, "permission denied: INFO server: %s", r->str);
    fail_start(h, why);
    return;
  }
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
  if (up) h->connected = true;
  if (up && !h->started && !h->stopping) ask_version(h);
}

/* A subscription's consumer name is held by another live process (refused),
 * or went to one while it ran (lost); the subscription logged the details
 * and stops. A file added or changed by a hot reload: only it does not
 * start. Otherwise the host stops and fails (exit non-zero): a host that
 * silently runs without some of its handlers is worse than one that a
 * supervisor restarts, and at start-up the operator must choose another
 * name. */
static void name_taken(host *h, subscription *s, bool lost) {
  struct slot *sl = NULL;
  for (size_t i = 0; i < h->nslots && sl == NULL; i++)
    if (h->slots[i].sub == s || h->slots[i].old == s) sl = &h->slots[i];
  const struct handler_spec *sp = sub_spec(s);
  if (!lost && sl && !sl->initial) {
    log_line(LOG_ERROR, sp->name, "handler reload failed, not started", "error",
             "its consumer name is in use by a live process (see the line before)", "consumer",
             sp->consumer, NULL);
    snprintf(sl->failed, sizeof sl->failed, "%s", sub_version(s));
    if (sl->sub == s) { /* freed by reap once drained */
      sl->old = s;
      sl->sub = NULL;
    }
    return;
  }
  char line[2048];
  snprintf(line, sizeof line,
           lost ? "%s: the consumer lease of %s (stream %s, group %s) went to another process "
                  "while running; stopped\n"
                : "%s: consumer %s (stream %s, group %s) is in use by a live process (see the "
                  "log for which); give each process its own name with --instance N or "
                  "--consumer NAME\n",
           sp->path, sp->consumer, sp->stream, sp->group);
  add_failure(h, line);
  h->failed = true;
  host_stop(h);
}

/* A refusal before the first connect ends the start-up; later the broker
 * keeps trying (and logging) and /readyz says why. */
static void cmd_fault(void *data, bk_conn *c, enum bk_fault fault, const char *why) {
  (void)c;
  host *h = data;
  if (fault == BK_FAULT_DENIED && !h->connected && !h->stopping) fail_start(h, why);
}

static void sub_event(void *data, subscription *s, enum sub_event ev) {
  host *h = data;
  if (ev == SUB_EV_REFUSED || ev == SUB_EV_LOST) return name_taken(h, s, ev == SUB_EV_LOST);
  if (ev == SUB_EV_DENIED) {
    /* At start-up a missing right is fatal, like a refused INFO; a handler
     * added later keeps retrying (logged, and /readyz says why). */
    if (!h->ready_logged && !h->failed) {
      char line[1600];
      snprintf(line, sizeof line,
               "luastream: cannot start: %s refused %s: permission denied: %s (see the Redis "
               "ACL in docs/operations.md)\n",
               h->b->name, sub_spec(s)->path, sub_denied(s));
      log_line(LOG_ERROR, sub_spec(s)->name, "redis refused luastream: not starting", "redis",
               h->b->name, "error", sub_denied(s), NULL);
      add_failure(h, line);
      h->failed = true;
      host_stop(h);
    }
    return;
  }
  if (ev == SUB_EV_DRAINED) {
    h->undrained--;
    if (h->stopping) {
      if (h->undrained == 0 && !h->at_deadline) finish_stop(h);
    } else {
      /* A reload stopped it: freed, and its successor started, outside the
       * subscription's own callback. */
      timer_start(h->reap_timer, 0);
    }
    return;
  }
  if (h->ready_logged) return;
  /* Ready once every subscription reads (a group created again reports
   * reading again: count subscriptions, not events). */
  for (size_t i = 0; i < h->nslots; i++) {
    const struct slot *sl = &h->slots[i];
    if (sl->sub ? !sub_reading(sl->sub) : sl->next != NULL) return;
  }
  h->ready_logged = true;
  char count[24];
  snprintf(count, sizeof count, "%zu", h->nslots);
  log_line(LOG_INFO, NULL, "host ready", "subscriptions", count, "redis", h->b->name, "version",
           h->version, NULL);
}

/* ---- hot reload ---- */

static bool same_str(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

/* The subscription fields that differ between a and b, comma-separated into
 * buf ("" when none: only `handle` may have changed). */
static const char *changed_fields(const struct handler_spec *a, const struct handler_spec *b,
                                  char *buf, size_t len) {
  struct {
    const char *name;
    bool same;
  } f[] = {
      {"stream", same_str(a->stream, b->stream)},
      {"group", same_str(a->group, b->group)},
      {"read", a->read == b->read},
      {"min_idle", a->min_idle_ms == b->min_idle_ms},
      {"consumer", same_str(a->consumer, b->consumer)},
      {"start", same_str(a->start, b->start)},
      {"workers", a->workers == b->workers},
      {"by_key", a->by_key == b->by_key},
      {"batch", a->batch == b->batch},
      {"claim_fallback", a->claim_fallback == b->claim_fallback},
      {"reply_to", same_str(a->reply_to, b->reply_to)},
      {"dead_letter", same_str(a->dead_letter, b->dead_letter)},
      {"max_deliveries", a->max_deliveries == b->max_deliveries},
      {"max_body", a->max_body == b->max_body},
  };
  size_t at = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    if (f[i].same) continue;
    int n = snprintf(buf + at, len - at, "%s%s", at ? "," : "", f[i].name);
    if (n < 0 || (size_t)n >= len - at) break;
    at += (size_t)n;
  }
  return buf;
}

/* Drained subscriptions of reloads: freed; a restart's successor starts; a
 * removed file's slot goes. */
static void reap(ltimer *t, void *data) {
  (void)t;
  host *h = data;
  if (h->stopping) return; /* host_free frees them */
  for (size_t i = 0; i < h->nslots;) {
    struct slot *sl = &h->slots[i];
    if (sl->old && sub_drained(sl->old)) {
      sub_free(sl->old);
      sl->old = NULL;
      if (sl->next) {
        handler *hd = sl->next;
        sl->next = NULL;
        sl->initial = false;
        start_slot(h, sl, hd, true);
      }
    }
    if (sl->removed && !sl->old && !sl->sub && !sl->next) {
      slot_delete(h, i);
      continue;
    }
    i++;
  }
}

/* A handler file that is no longer in the directory. */
static void file_gone(host *h, size_t i) {
  struct slot *sl = &h->slots[i];
  char name[256];
  sl->removed = true;
  sl->failed[0] = '\0';
  if (sl->next) {
    handler_release(sl->next);
    sl->next = NULL;
  }
  if (sl->sub) {
    log_line(LOG_INFO, slot_name(sl, name, sizeof name),
             "handler file removed, stopping its subscription", "version", sub_version(sl->sub),
             NULL);
    sl->old = sl->sub;
    sl->sub = NULL;
    sub_stop(sl->old); /* may drain at once: reap frees it */
  } else if (!sl->old) {
    slot_delete(h, i);
  }
}

/* A changed or new file that cannot run: logged once (sl->failed remembers
 * the version), and whatever runs keeps running. */
static void reload_refused(struct slot *sl, const char *version, const char *name, const char *cur,
                           const char *err) {
  snprintf(sl->failed, sizeof sl->failed, "%s", version);
  log_line(LOG_ERROR, name,
           cur ? "handler reload failed, the running version stays"
               : "handler reload failed, not started",
           "version", cur, "error", err, NULL);
}

/* A handler file that is in the directory: loaded again when it changed. */
static void file_seen(host *h, const char *path, bool force) {
  char now[RT_VERSION_LEN], err[ERR_MAX], name[256], versions[2 * RT_VERSION_LEN + 4];
  struct slot *sl = slot_find(h, path);
  if (handler_file_version(path, now) != 0) return; /* gone again: the next reload sees it */
  if (sl && sl->removed) sl->removed = false;       /* back while its old one drains */
  const char *cur = sl ? slot_version(sl) : NULL;
  if (!force && cur && strcmp(cur, now) == 0) {
    if (sl) sl->failed[0] = '\0'; /* back to what runs: a later failure is news */
    return;
  }
  if (!force && sl && strcmp(sl->failed, now) == 0) return; /* reported already */
  if (sl == NULL && (sl = slot_add(h, path)) == NULL) {
    log_line(LOG_ERROR, NULL, "out of memory: handler file not loaded", "file", path, NULL);
    return;
  }
  slot_name(sl, name, sizeof name);
  handler *hd = NULL;
  if (handler_load(path, &h->env, &hd, err, sizeof err) != 0) {
    reload_refused(sl, now, name, cur, err);
    return;
  }
  const struct handler_spec *ns = handler_spec(hd);
  bool refused = false;
  if (needs_claim(h, ns)) {
    snprintf(err, sizeof err,
             "%s: read = \"claiming\" needs Redis 8.4 or later (this server runs %s); set "
             "claim_fallback = true",
             path, h->version);
    refused = true;
  }
  for (size_t j = 0; j < h->nslots && !refused; j++) {
    const struct handler_spec *o = slot_spec(&h->slots[j]);
    if (&h->slots[j] == sl || o == NULL || h->slots[j].removed) continue;
    refused = split_group(o, ns, err, sizeof err);
  }
  if (refused) {
    reload_refused(sl, handler_version(hd), name, cur, err);
    handler_release(hd);
    return;
  }
  if (bind_consumer(h, sl, hd) != 0) {
    snprintf(sl->failed, sizeof sl->failed, "%s", handler_version(hd));
    handler_release(hd);
    return;
  }
  sl->failed[0] = '\0';
  snprintf(versions, sizeof versions, "%s->%s", cur ? cur : "", handler_version(hd));
  const struct handler_spec *cs = slot_spec(sl);
  char changed[256] = "";
  if (cs) changed_fields(cs, ns, changed, sizeof changed);
  if (cs && changed[0] == '\0') { /* only `handle` (or nothing) changed: swap in place */
    log_line(LOG_INFO, name, "handler reloaded", "version", versions, NULL);
    if (sl->next) {
      handler_release(sl->next);
      sl->next = hd;
    } else {
      sub_swap_handler(sl->sub, hd);
    }
    return;
  }
  if (sl->sub) { /* subscription fields changed: stop, drain, start anew */
    log_line(LOG_INFO, name, "handler reloaded, restarting its subscription", "version", versions,
             "changed", changed, NULL);
    sl->next = hd;
    sl->old = sl->sub;
    sl->sub = NULL;
    sub_stop(sl->old); /* may drain at once: reap starts next */
    return;
  }
  if (sl->next || sl->old) { /* a restart or removal still draining: next waits for it */
    log_line(LOG_INFO, name,
             sl->next ? "handler reloaded, restarting its subscription"
                      : "handler added, starting once its old subscription has drained",
             "version", versions, "changed", changed[0] ? changed : NULL, NULL);
    if (sl->next) handler_release(sl->next);
    sl->next = hd;
    return;
  }
  log_line(LOG_INFO, name, "handler added", "version", handler_version(hd), NULL);
  sl->initial = false;
  start_slot(h, sl, hd, false);
}

void host_reload(host *h, bool force) {
  if (h->stopping || h->failed) return;
  if (!h->started) { /* the server's version is not known yet */
    h->reload_wanted = true;
    return;
  }
  h->reload_wanted = false;
  if (h->reload_timer) timer_stop(h->reload_timer);
  char err[ERR_MAX];
  char **paths = NULL;
  int n = list_dir(h->dir, true, &paths, err, sizeof err);
  if (n == -2) {
    /* Gone (a deploy replacing it): so are its files. Their subscriptions
     * stop; the directory is looked for again at the next reload. */
    if (!h->dir_gone)
      log_line(LOG_WARN, NULL, "handler directory is gone: stopping its subscriptions until it is back",
               "dir", h->dir, NULL);
    h->dir_gone = true;
    n = 0;
    paths = NULL;
  } else if (n < 0) {
    log_line(LOG_ERROR, NULL, "reload failed: cannot list the handler directory", "error", err,
             NULL);
    return;
  } else if (h->dir_gone) {
    h->dir_gone = false;
    log_line(LOG_INFO, NULL, "handler directory is back", "dir", h->dir, NULL);
  }
  for (int i = 0; i < n; i++) file_seen(h, paths[i], force);
  for (size_t i = h->nslots; i-- > 0;) {
    struct slot *sl = &h->slots[i];
    if (sl->removed) continue;
    bool present = false;
    for (int j = 0; j < n && !present; j++) present = strcmp(paths[j], sl->path) == 0;
    if (!present) file_gone(h, i);
  }
  host_free_paths(paths);
}

static void reload_fire(ltimer *t, void *data) {
  (void)t;
  host_reload(data, false);
}

void host_reload_soon(host *h) {
  if (h->stopping || h->reload_timer == NULL) return;
  timer_start(h->reload_timer, RELOAD_DEBOUNCE_MS);
}

void host_start(host *h, host_stopped_fn *stopped, void *data) {
  h->stopped = stopped;
  h->stopped_data = data;
  log_line(LOG_INFO, NULL, "connecting", "redis", h->b->name, NULL);
  h->info_timer = timer_new(h->clock, info_retry, h);
  h->reap_timer = timer_new(h->clock, reap, h);
  h->reload_timer = timer_new(h->clock, reload_fire, h);
  h->cmd = bk_conn_open(h->b, "command", cmd_state, h);
  if (h->cmd) bk_conn_on_fault(h->b, h->cmd, cmd_fault);
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
  for (size_t i = 0; i < h->nslots; i++) {
    subscription *subs[2] = {h->slots[i].sub, h->slots[i].old};
    for (int k = 0; k < 2; k++) {
      size_t acks = 0;
      if (subs[k]) unfinished += sub_abandon(subs[k], &acks);
      unacked += acks;
    }
  }
  char running[24], acks[24];
  snprintf(running, sizeof running, "%zu", unfinished);
  snprintf(acks, sizeof acks, "%zu", unacked);
  log_line(LOG_WARN, NULL, "shutdown deadline reached", "unfinished", running, "unacked",
           unacked ? acks : NULL, NULL);
  h->at_deadline = false;
  if (h->undrained == 0) return finish_stop(h);
  bk_conn *cmd = h->cmd;
  h->cmd = NULL; /* finish_stop may run inside bk_conn_close */
  if (cmd) bk_conn_close(h->b, cmd);
}

static void stop(host *h, bool deadline, uint64_t timeout_ms) {
  if (h->stopping) return;
  h->stopping = true;
  if (h->info_timer) timer_stop(h->info_timer);
  if (h->reload_timer) timer_stop(h->reload_timer);
  char timeout[32];
  snprintf(timeout, sizeof timeout, "%llums", (unsigned long long)timeout_ms);
  log_line(LOG_INFO, NULL, "stopping: finishing running handlers", "timeout",
           deadline ? timeout : NULL, NULL);
  if (!h->started) return finish_stop(h); /* never got as far as the subscriptions */
  for (size_t i = 0; i < h->nslots; i++) { /* restarts waiting for a drain never start */
    if (h->slots[i].next) handler_release(h->slots[i].next);
    h->slots[i].next = NULL;
  }
  if (h->undrained == 0) return finish_stop(h);
  /* A subscription may drain inside sub_stop; the last one finishes the stop. */
  for (size_t i = 0; i < h->nslots; i++)
    if (h->slots[i].sub) sub_stop(h->slots[i].sub);
  /* Armed after sub_stop, so the acks it flushed go out before even a zero
   * deadline fires. */
  if (deadline && h->undrained > 0) {
    h->deadline_timer = timer_new(h->clock, deadline_fire, h);
    if (h->deadline_timer) timer_start(h->deadline_timer, timeout_ms);
    else log_line(LOG_ERROR, NULL, "out of memory: stopping without a deadline", NULL);
  }
}

void host_stop(host *h) { stop(h, false, 0); }
void host_stop_within(host *h, uint64_t timeout_ms) { stop(h, true, timeout_ms); }

bool host_is_ready(const host *h, char *why, size_t len) {
  if (h->failed) {
    snprintf(why, len, "stopped: %.*s", h->why_failed ? (int)strcspn(h->why_failed, "\n") : 11,
             h->why_failed ? h->why_failed : "see the log");
    return false;
  }
  if (h->stopping) {
    snprintf(why, len, "stopping");
    return false;
  }
  if (h->cmd == NULL || !bk_connected(h->b, h->cmd)) {
    char fault[256];
    if (h->cmd && bk_conn_fault(h->b, h->cmd, fault, sizeof fault) == BK_FAULT_DENIED)
      snprintf(why, len, "redis %s (%s)", fault, h->b->name);
    else
      snprintf(why, len, "redis unreachable (%s)", h->b->name);
    return false;
  }
  if (!h->started) {
    snprintf(why, len, "starting: reading the server version");
    return false;
  }
  char reason[200], name[256];
  size_t running = 0;
  for (size_t i = 0; i < h->nslots; i++) {
    const struct slot *sl = &h->slots[i];
    running += sl->sub != NULL;
    if (sl->next) {
      snprintf(why, len, "subscription %s: restarting (hot reload)", slot_name(sl, name, sizeof name));
      return false;
    }
    if (sl->sub && !sub_healthy(sl->sub, reason, sizeof reason)) {
      snprintf(why, len, "subscription %s: %s", sub_spec(sl->sub)->name, reason);
      return false;
    }
  }
  if (running == 0) { /* every file removed, or the directory gone */
    snprintf(why, len, "no handlers running");
    return false;
  }
  return true;
}

/* Running subscriptions first, then those a reload is stopping. */
size_t host_subscriptions(const host *h) {
  if (!h->started) return h->nslots;
  size_t n = 0;
  for (size_t i = 0; i < h->nslots; i++) n += (h->slots[i].sub != NULL) + (h->slots[i].old != NULL);
  return n;
}

subscription *host_subscription(const host *h, size_t i) {
  if (!h->started) return NULL;
  for (size_t k = 0; k < h->nslots; k++)
    if (h->slots[k].sub && i-- == 0) return h->slots[k].sub;
  for (size_t k = 0; k < h->nslots; k++)
    if (h->slots[k].old && i-- == 0) return h->slots[k].old;
  return NULL;
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
  for (size_t i = 0; i < h->nslots; i++) {
    struct slot *sl = &h->slots[i];
    if (sl->sub) sub_free(sl->sub);
    if (sl->old) sub_free(sl->old);
    if (sl->loaded) handler_release(sl->loaded);
    if (sl->next) handler_release(sl->next);
    free(sl->path);
    free(sl->consumer);
  }
  if (h->cmd) bk_conn_close(h->b, h->cmd);
  if (h->info_timer) timer_free(h->info_timer);
  if (h->deadline_timer) timer_free(h->deadline_timer);
  if (h->reap_timer) timer_free(h->reap_timer);
  if (h->reload_timer) timer_free(h->reload_timer);
  free(h->slots);
  free(h->dir);
  free(h->consumer_override);
  free(h->why_failed);
  free(h);
  entry_pool_trim();
}
