/* host: loading a handler directory and running its subscriptions; hot
 * reload is reload.c's. */
#include <unistd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_keys.h"
#include "entry.h"
#include "handler_dir.h"
#include "handler_name.h"
#include "host.h"
#include "lease.h"
#include "log.h"
#include "group_stats.h"
#include "metrics.h"
#include "min_idle_margin.h"
#include "partition.h"
#include "reload.h"
#include "servers.h"
#include "slots.h"
#include "subscription.h"

#define ERR_MAX 4096
#define RELOAD_DEBOUNCE_MS 200 /* host_reload_soon: quiet time before a reload */
/* After the shutdown deadline: how long the hand-back of abandoned entries
 * and writes in flight have to be answered before the host stops anyway. */
#define DEADLINE_GRACE_MS 1000

struct host {
  char *dir;                         /* the handler directory */
  char *consumer_override;           /* --consumer, or NULL */
  int instance;                      /* --instance, or -1 */
  int number_step;                   /* numbering on demand (host_names), 0: off */
  struct number_probe *probe;        /* numbering: the round in flight */
  char hostname[256];                /* the machine, in generated consumer names */
  char identity[LEASE_IDENTITY_MAX]; /* this host's lease value */
  lease_keepalive *keepalive;        /* renews every lease of this host, on cmd */
  broker *b;
  lclock *clock;
  struct rt_env env; /* what handlers see: the clock, the delivery hook, calls */
  bk_conn *cmd;
  group_stats *stats;     /* the groups' lag, pending, ... for /metrics, on cmd */
  bk_conn *calls;         /* handlers' own commands (ls.redis.call), in env too */
  struct servers servers; /* other servers' connections (ls.redis.connect), in env too */
  struct slots slots;     /* the handler files and what runs each */
  struct reloader reload; /* hot reload of dir */
  size_t undrained;       /* subscriptions created and not drained yet */
  bool ready_logged;
  bool connected; /* the command connection has been up once */
  bool started;   /* subscriptions exist */
  bool stopping;
  bool at_deadline;       /* inside deadline_fire: it finishes the stop itself */
  bool reload_wanted;     /* a reload asked for before the start: runs after it */
  ltimer *deadline_timer; /* host_stop_within: when running handlers are given up */
  bool past_deadline;     /* deadline_timer now ends the grace (DEADLINE_GRACE_MS) */
  ltimer *reap_timer;     /* frees drained subscriptions, starts their successors */
  ltimer *reload_timer;   /* host_reload_soon */
  host_stopped_fn *stopped;
  void *stopped_data;
  ltimer *info_timer; /* retries INFO until the server answers */
  char version[32];
  long version_num; /* bk_version_parse of version */
  bool failed;      /* stopped because it cannot run here (exit non-zero) */
  char *why_failed; /* what the version gate said, one line per subscription */
  /* --watchdog (host_set_watchdog), for min_idle_margin.h; 0: not warned of */
  uint64_t watchdog_ms;
};

/* ---- the handler directory ---- */

int host_list_dir(const char *dir, const struct trust *trust, char ***paths, char *err,
                  size_t errlen) {
  int n = handler_dir_list(dir, trust, false, paths, err, errlen);
  return n < 0 ? -1 : n;
}

void host_free_paths(char **paths) { handler_dir_free(paths); }

/* Loads every file; writes each problem as a line to report. Returns the
 * number of problems. */
static int load_all(const char *dir, const struct rt_env *env, handler ***out, size_t *count,
                    FILE *report) {
  char err[ERR_MAX];
  char **paths = NULL;
  *out = NULL;
  *count = 0;
  int n = host_list_dir(dir, env->trust, &paths, err, sizeof err);
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
      if (hs[j] &&
          handler_dir_split_group(handler_spec(hs[i]), handler_spec(hs[j]), err, sizeof err)) {
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

int host_check_each(const char *dir, uint64_t load_timeout_ms, const struct trust *trust,
                    host_spec_fn *each, void *data) {
  return host_check_report(dir, load_timeout_ms, trust, stderr, each, data);
}

int host_check_all(const char *dir, uint64_t load_timeout_ms, const struct trust *trust,
                   FILE *report, host_handlers_fn *all, void *data) {
  handler **hs = NULL;
  size_t n = 0;
  /* no clock: nothing runs */
  struct rt_env env = {.load_timeout_ms = load_timeout_ms, .trust = trust};
  int problems = load_all(dir, &env, &hs, &n, report);
  if (hs) problems += all(data, hs, n);
  for (size_t i = 0; hs && i < n; i++) handler_release(hs[i]);
  free(hs);
  return problems;
}

struct each_spec {
  host_spec_fn *each;
  void *data;
};

/* host_handlers_fn: each(data, spec) of every handler, in order. */
static int each_spec(void *data, handler *const *hs, size_t n) {
  const struct each_spec *e = data;
  for (size_t i = 0; e->each && i < n; i++) e->each(e->data, handler_spec(hs[i]));
  return 0;
}

int host_check_report(const char *dir, uint64_t load_timeout_ms, const struct trust *trust,
                      FILE *report, host_spec_fn *each, void *data) {
  struct each_spec e = {each, data};
  return host_check_all(dir, load_timeout_ms, trust, report, each_spec, &e);
}

int host_check(const char *dir, uint64_t load_timeout_ms, const struct trust *trust) {
  return host_check_each(dir, load_timeout_ms, trust, NULL, NULL);
}

/* ---- consumer names ---- */

/* Binds hd to its consumer name (struct host_names in host.h) and remembers
 * it in the slot. A name another subscription of the same stream and group
 * uses already gets -<handler> appended, so the two stay distinct. */
/* The generated name of handler hname for instance (-1: unnumbered). */
static void generated_name(const host *h, const char *hname, int instance, char *out, size_t cap) {
  if (instance >= 0)
    snprintf(out, cap, "%s-%s-%d", h->hostname, hname, instance);
  else
    snprintf(out, cap, "%s-%s", h->hostname, hname);
}

/* fresh: hd was just loaded (its spec's consumer is the file's own field, if
 * any); else it was bound before and is bound again (numbering). */
static int bind_consumer(host *h, struct slot *sl, handler *hd, bool fresh) {
  const struct handler_spec *s = handler_spec(hd);
  size_t self = (size_t)(sl - h->slots.v);
  char name[512];
  if (fresh) sl->own_consumer = s->consumer != NULL;
  if (sl->own_consumer)
    snprintf(name, sizeof name, "%s", s->consumer);
  else if (h->consumer_override)
    snprintf(name, sizeof name, "%s", h->consumer_override);
  else
    generated_name(h, s->name, h->instance, name, sizeof name);
  for (size_t j = 0; j < h->slots.n; j++) {
    const struct handler_spec *o = slot_spec(&h->slots.v[j]);
    if (j == self || o == NULL || o->consumer == NULL || h->slots.v[j].removed) continue;
    if (spec_scheduled(o) || spec_scheduled(s)) continue; /* no group: a name of its own */
    if (!strcmp(o->stream, s->stream) && !strcmp(o->group, s->group) &&
        !strcmp(o->consumer, name)) {
      size_t len = strlen(name);
      snprintf(name + len, sizeof name - len, "-%s", s->name);
      break;
    }
  }
  if (!fresh && s->consumer && strcmp(s->consumer, name) == 0) return 0;
  if (handler_bind(hd, name) != 0) return -1;
  char *copy = strdup(name);
  if (copy == NULL) return -1;
  free(sl->consumer);
  sl->consumer = copy;
  return 0;
}

/* metrics_collect_fn: luastream_handler_info{handler, version} 1 for each
 * handler file that runs, the version its last load had, and each
 * subscription's gauges. */
static void collect_handlers(void *data) {
  host *h = data;
  static const char *const labels[] = {"handler", "version"};
  struct metric_family *f = metrics_family("luastream_handler_info",
                                           "The handler files running and their script versions",
                                           METRIC_GAUGE, 2, labels, NULL, 0);
  metrics_clear(f);
  sub_metrics_clear();
  char name[256];
  for (size_t i = 0; i < h->slots.n; i++) {
    if (h->slots.v[i].sub) sub_collect_metrics(h->slots.v[i].sub, false);
    if (h->slots.v[i].old) sub_collect_metrics(h->slots.v[i].old, h->slots.v[i].sub != NULL);
    const char *version = slot_version(&h->slots.v[i]);
    if (version == NULL) continue;
    const char *values[] = {slot_name(&h->slots.v[i], name, sizeof name), version};
    metric_set(metrics_series(f, values), 1);
  }
}

/* Binds every loaded handler; a new + reclaim pair sharing a name: the
 * reclaim one is bound second, so it is the one that gets -<handler>,
 * whatever the file order. */
static int bind_all(host *h, bool fresh) {
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < h->slots.n; i++) {
      handler *hd = h->slots.v[i].loaded;
      if (hd == NULL || (handler_spec(hd)->read == READ_RECLAIM) != (pass == 1)) continue;
      if (bind_consumer(h, &h->slots.v[i], hd, fresh) != 0) return -1;
    }
  }
  return 0;
}

host *host_new(const char *dir, broker *b, lclock *clock, const struct host_names *names,
               uint64_t load_timeout_ms, const struct trust *trust, char **problems) {
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
  h->env.trust = trust;
  h->env.connect = servers_connect; /* registers at load; opens once started */
  h->env.connect_data = &h->servers;
  h->dir = strdup(dir);
  h->consumer_override = consumer_override ? strdup(consumer_override) : NULL;
  if (h->dir == NULL || (consumer_override && h->consumer_override == NULL)) goto oom;
  h->instance = names ? names->instance : -1;
  h->number_step = names && !consumer_override ? names->number_step : 0;
  if (names && names->hostname)
    snprintf(h->hostname, sizeof h->hostname, "%s", names->hostname);
  else if (gethostname(h->hostname, sizeof h->hostname - 1) != 0 || h->hostname[0] == '\0')
    snprintf(h->hostname, sizeof h->hostname, "localhost");
  if (lease_identity(names ? names->machine : NULL, h->hostname, h->identity, sizeof h->identity) !=
      0)
    goto oom;
  if (load_all(dir, &h->env, &hs, &n, report) != 0) goto error;
  for (size_t i = 0; i < n; i++) {
    struct slot *sl = slot_add(&h->slots, handler_spec(hs[i])->path);
    if (sl == NULL) goto oom;
    sl->loaded = hs[i];
    hs[i] = NULL;
  }
  if (bind_all(h, true) != 0) {
    fprintf(report, "%s: cannot prepare the handlers (see the log)\n", dir);
    goto error;
  }
  if (metrics_add_collector(collect_handlers, h) != 0) goto oom;
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
  if (report)
    fclose(report); /* *problems holds the text now */
  else
    *problems = strdup("out of memory\n");
  host_free(h);
  return NULL;
}

/* ---- running ---- */

static void sub_event(void *data, subscription *s, enum sub_event ev);

/* Starts a subscription for hd in sl (hd is the subscription's from here on,
 * also when that fails). keep_cursor: it takes over from an earlier one. */
static void start_slot(host *h, struct slot *sl, handler *hd, bool keep_cursor) {
  const char *name = handler_spec(hd)->name;
  char why[1024];
  if (h->env.cluster && cluster_keys_check(handler_spec(hd), why, sizeof why) != 0) {
    log_line(LOG_ERROR, name, "handler reload failed, not started", "file", sl->path, "error", why,
             NULL);
    snprintf(sl->failed, sizeof sl->failed, "%s", handler_version(hd));
    handler_release(hd);
    return;
  }
  log_line(LOG_INFO, name, "handler loaded", "version", handler_version(hd), NULL);
  if (h->watchdog_ms && min_idle_margin_short(handler_spec(hd), h->watchdog_ms)) {
    char min_idle[32], watchdog[32];
    snprintf(min_idle, sizeof min_idle, "%lld", (long long)handler_spec(hd)->min_idle_ms);
    snprintf(watchdog, sizeof watchdog, "%llu", (unsigned long long)h->watchdog_ms);
    min_idle_margin_advice(h->watchdog_ms, why, sizeof why);
    log_line(LOG_WARN, name, MIN_IDLE_MARGIN_MSG, "file", sl->path, LOG_NUMBER "min_idle_ms",
             min_idle, LOG_NUMBER "watchdog_ms", watchdog, "advice", why, NULL);
  }
  subscription *s =
      h->keepalive ? sub_new(hd, h->b, h->cmd, h->clock, h->keepalive, sub_event, h) : NULL;
  if (h->keepalive == NULL) handler_release(hd);
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
  for (size_t i = 0; i < h->slots.n; i++) {
    handler *hd = h->slots.v[i].loaded;
    h->slots.v[i].loaded = NULL;
    h->slots.v[i].initial = true;
    if (hd) start_slot(h, &h->slots.v[i], hd, false);
  }
  if (h->reload_wanted) host_reload(h, false);
}

/* Closes the handlers' connection: calls still in flight fail ("connection
 * closed"), and a job abandoned meanwhile is never touched (jobs.c). */
static void close_calls(host *h) {
  bk_conn *calls = h->calls;
  h->calls = NULL;
  h->env.calls = NULL;
  if (calls) bk_conn_close(h->b, calls);
}

static void finish_stop(host *h) {
  if (h->deadline_timer) timer_stop(h->deadline_timer);
  group_stats_free(h->stats);
  h->stats = NULL;
  close_calls(h);
  servers_close(&h->servers);
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
  for (size_t i = 0; i < h->slots.n; i++) {
    const struct handler_spec *s = slot_spec(&h->slots.v[i]);
    if (s == NULL || !needs_claim(h, s)) continue;
    const char *file = handler_name_file(s->path);
    int n =
        snprintf(line, sizeof line,
                 "%s: read = \"claiming\" (stream %s, group %s) needs Redis 8.4 or later; %s "
                 "runs %s; on this server set claim_fallback = true, or read with read = "
                 "\"new\" beside a read = \"reclaim\" subscription (see handlers/before-8.4/)\n",
                 file, s->stream, s->group, h->b->name, h->version);
    (void)n;
    if (add_failure(h, line) != 0) break;
  }
  return h->why_failed == NULL;
}

/* On Redis Cluster, every subscription's keys must share a slot
 * (cluster_keys.h): one line per file whose keys do not, before any group is
 * joined. */
static bool keys_fit_cluster(host *h) {
  h->env.cluster = bk_is_cluster(h->b) != 0;
  if (!h->env.cluster) return true;
  char why[1024], line[1400];
  for (size_t i = 0; i < h->slots.n; i++) {
    const struct handler_spec *s = slot_spec(&h->slots.v[i]);
    if (s == NULL || cluster_keys_check(s, why, sizeof why) == 0) continue;
    snprintf(line, sizeof line, "%s: %s\n", s->path, why);
    if (add_failure(h, line) != 0) break;
  }
  return h->why_failed == NULL;
}

/* At start-up, before the server was ever reached: the server refused the
 * credentials or a right that every run needs, or TLS failed in a way only
 * a person can fix (a certificate that does not verify, ...). Waiting cannot
 * help, so the host stops and exits non-zero, saying what to fix. */
static void fail_start(host *h, const char *why) {
  bool tls = strncmp(why, "TLS:", 4) == 0;
  log_line(LOG_ERROR, NULL,
           tls ? "TLS to redis failed: not starting" : "redis refused luastream: not starting",
           "redis", h->b->name, "error", why, NULL);
  char line[1024];
  int n = snprintf(line, sizeof line, "luastream: cannot start: %s%s %s\n", h->b->name,
                   tls ? ":" : " refused:", why);
  free(h->why_failed);
  h->why_failed = n > 0 ? strdup(line) : NULL;
  h->failed = h->stopping = true;
  finish_stop(h);
}

static void number_then_start(host *h);

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
             "error",
             r && r->type == BK_ERROR ? r->str
             : err                    ? err
                                      : "no redis_version in INFO",
             NULL);
    timer_start(h->info_timer, 1000);
    return;
  }
  h->version_num = v;
  log_line(LOG_INFO, NULL, "connected", "redis", h->b->name, "version", h->version, NULL);
  bool supported = server_supports_all(h);
  if (!keys_fit_cluster(h) || !supported) { /* both said at once */
    h->failed = h->stopping = true;
    finish_stop(h);
    return;
  }
  number_then_start(h);
}

/* ---- numbering: the lowest free instance number on this machine ---- */

/* One round of numbering: whether any generated name of instance `candidate`
 * is held by a live process of this machine (a GET of each lease). */
struct number_probe {
  host *h;         /* NULL once the host gave the round up */
  int candidate;   /* -1: the unnumbered names */
  size_t waiting;  /* GETs not answered yet */
  bool busy;       /* a lease held by a live process here */
  bool lost;       /* a GET failed with the connection */
  char error[300]; /* a GET the server refused */
};

#define NUMBER_MAX_TRIES 1024

static void number_round(host *h, int candidate);

/* The stream whose lease a handler takes (a partitioned one's: partition 0's;
 * the others are taken with it). Owned by out (partition_spec_free) when
 * *part is set. */
static const char *lease_stream(const struct handler_spec *s, struct handler_spec *out,
                                bool *part) {
  *part = s->partitions > 0 && partition_spec(s, 0, out) == 0;
  return *part ? out->stream : s->stream;
}

static void numbered(host *h, int candidate) {
  if (candidate != h->instance) {
    int first = h->instance;
    h->instance = candidate;
    if (bind_all(h, false) != 0) {
      log_line(LOG_ERROR, NULL, "out of memory: cannot number the consumer names", NULL);
      h->failed = true;
      host_stop(h);
      return;
    }
    char n[16], was[32];
    snprintf(n, sizeof n, "%d", candidate);
    if (first < 0)
      snprintf(was, sizeof was, "unnumbered");
    else
      snprintf(was, sizeof was, "%d", first);
    log_line(LOG_INFO, NULL,
             "consumer names numbered: a live process on this machine holds the names before",
             LOG_NUMBER "instance", n, "first", was, NULL);
  }
  start_subscriptions(h);
}

/* One GET fewer outstanding; the round decides once none is. */
static void number_release(struct number_probe *p) {
  if (--p->waiting > 0) return;
  host *h = p->h;
  int candidate = p->candidate;
  bool busy = p->busy, lost = p->lost;
  char error[300];
  snprintf(error, sizeof error, "%s", p->error);
  free(p);
  if (h == NULL) return; /* given up (host_free) */
  h->probe = NULL;
  if (h->stopping || h->started) return;
  if (lost && !busy) return; /* the connection went: numbering starts over once it is back */
  if (error[0] && !busy) {
    /* Numbering is a courtesy: the leases themselves keep the names apart. */
    log_line(LOG_WARN, NULL, "cannot look for free consumer names: using the first", "redis",
             h->b->name, "command", "GET", "error", error, NULL);
    return numbered(h, h->instance);
  }
  if (!busy) return numbered(h, candidate);
  int next = (candidate < 0 ? 0 : candidate) + h->number_step;
  if ((next - (h->instance < 0 ? 0 : h->instance)) / h->number_step > NUMBER_MAX_TRIES)
    return numbered(h, candidate); /* the lease refuses it, saying who holds it */
  number_round(h, next);
}

static void number_answer(void *data, const bk_reply *r, const char *err) {
  (void)err;
  struct number_probe *p = data;
  if (p->h && r && r->type == BK_STRING && lease_holder_alive_here(r->str, p->h->identity))
    p->busy = true;
  if (r && r->type == BK_ERROR && !p->error[0]) snprintf(p->error, sizeof p->error, "%s", r->str);
  if (r == NULL) p->lost = true;
  number_release(p);
}

static void number_round(host *h, int candidate) {
  struct number_probe *p = calloc(1, sizeof *p);
  if (p == NULL) return numbered(h, h->instance);
  if (h->probe) h->probe->h = NULL; /* a round from before a reconnect: superseded */
  p->h = h;
  p->candidate = candidate;
  p->waiting = 1; /* this function's own hold, released at the end */
  h->probe = p;
  for (size_t i = 0; i < h->slots.n; i++) {
    const struct slot *sl = &h->slots.v[i];
    if (sl->loaded == NULL || sl->own_consumer) continue;
    const struct handler_spec *s = handler_spec(sl->loaded);
    if (spec_scheduled(s)) continue; /* no consumer lease */
    char name[512];
    generated_name(h, s->name, candidate, name, sizeof name);
    struct handler_spec part;
    bool is_part;
    const char *stream = lease_stream(s, &part, &is_part);
    char *key = lease_key(stream, s->group, name);
    if (is_part) partition_spec_free(&part);
    if (key == NULL) continue;
    const char *argv[] = {"GET", key};
    size_t len[] = {3, strlen(key)};
    if (bk_command(h->b, h->cmd, 2, argv, len, number_answer, p) == 0) p->waiting++;
    free(key);
  }
  number_release(p); /* this function's hold: decides now when nothing was sent */
}

/* Neither --instance nor --consumer: the first number whose names no live
 * process of this machine holds (host_names). */
static void number_then_start(host *h) {
  if (h->number_step <= 0) return start_subscriptions(h);
  number_round(h, h->instance);
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

/* luastream_redis_connected and luastream_redis_reconnects_total, for the
 * host's command connection (acks and outcomes go on it). */
static void count_connection(bool up, bool again) {
  struct metric_family *f = metrics_family("luastream_redis_connected",
                                           "1 while the host's command connection to Redis is up",
                                           METRIC_GAUGE, 0, NULL, NULL, 0);
  metric_set(metrics_series(f, NULL), up ? 1 : 0);
  f = metrics_family("luastream_redis_reconnects_total",
                     "Times the command connection came up again after it was lost", METRIC_COUNTER,
                     0, NULL, NULL, 0);
  metric_add(metrics_series(f, NULL), again ? 1 : 0);
}

static void cmd_state(void *data, bk_conn *c, int up) {
  (void)c;
  host *h = data;
  count_connection(up, up && h->connected);
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
  for (size_t i = 0; i < h->slots.n && sl == NULL; i++)
    if (h->slots.v[i].sub == s || h->slots.v[i].old == s) sl = &h->slots.v[i];
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
  for (size_t i = 0; i < h->slots.n; i++) {
    const struct slot *sl = &h->slots.v[i];
    if (sl->sub ? !sub_reading(sl->sub) : sl->next != NULL) return;
  }
  h->ready_logged = true;
  char count[24];
  snprintf(count, sizeof count, "%zu", h->slots.n);
  log_line(LOG_INFO, NULL, "host ready", LOG_NUMBER "subscriptions", count, "redis", h->b->name,
           "version", h->version, NULL);
}

/* ---- hot reload (reload.h) ---- */

static void reload_start(void *data, struct slot *sl, handler *hd, bool keep_cursor) {
  start_slot(data, sl, hd, keep_cursor);
}

static int reload_bind(void *data, struct slot *sl, handler *hd) {
  return bind_consumer(data, sl, hd, true);
}

/* The version gate for a file added or changed by a reload. */
static bool reload_refuse(void *data, const char *path, const struct handler_spec *spec, char *why,
                          size_t len) {
  host *h = data;
  if (!needs_claim(h, spec)) return false;
  snprintf(why, len,
           "%s: read = \"claiming\" needs Redis 8.4 or later (this server runs %s); set "
           "claim_fallback = true",
           path, h->version);
  return true;
}

/* Drained subscriptions of reloads, outside the subscription's own callback. */
static void reap(ltimer *t, void *data) {
  (void)t;
  host *h = data;
  if (h->stopping) return; /* host_free frees them */
  reload_reap(&h->reload);
}

void host_reload(host *h, bool force) {
  if (h->stopping || h->failed) return;
  if (!h->started) { /* the server's version is not known yet */
    h->reload_wanted = true;
    return;
  }
  h->reload_wanted = false;
  if (h->reload_timer) timer_stop(h->reload_timer);
  reload_dir(&h->reload, force);
}

static void reload_fire(ltimer *t, void *data) {
  (void)t;
  host_reload(data, false);
}

void host_reload_soon(host *h) {
  if (h->stopping || h->reload_timer == NULL) return;
  timer_start(h->reload_timer, RELOAD_DEBOUNCE_MS);
}

/* group_stats_list_fn: the specs of the subscriptions that run, one per
 * partition of a partitioned one (the keys it reads). */
static size_t running_specs(void *data, const struct handler_spec **out, size_t max) {
  host *h = data;
  size_t n = 0;
  for (size_t i = 0; i < h->slots.n; i++) {
    subscription *s = h->slots.v[i].sub;
    for (size_t p = 0; s && p < sub_parts(s) && n < max; p++) out[n++] = sub_part_spec(s, p);
  }
  return n;
}

void host_start(host *h, host_stopped_fn *stopped, void *data) {
  h->stopped = stopped;
  h->stopped_data = data;
  log_line(LOG_INFO, NULL, "connecting", "redis", h->b->name, NULL);
  h->info_timer = timer_new(h->clock, info_retry, h);
  h->reap_timer = timer_new(h->clock, reap, h);
  h->reload_timer = timer_new(h->clock, reload_fire, h);
  const struct reload_ops ops = {h, reload_start, reload_bind, reload_refuse};
  reload_init(&h->reload, h->dir, &h->env, &h->slots, &ops);
  count_connection(false, false); /* 0 until it is up: a host that never connects shows it */
  h->cmd = bk_conn_open(h->b, "command", cmd_state, h);
  if (h->cmd) bk_conn_on_fault(h->b, h->cmd, cmd_fault);
  if (h->cmd) h->stats = group_stats_new(h->b, h->cmd, h->clock, running_specs, h);
  if (h->cmd) h->keepalive = lease_keepalive_new(h->b, h->cmd, h->clock, h->identity);
  /* Not the read connections (they sit in BLOCK) nor the writer's: a slow
   * handler command must delay no ack. */
  h->calls = bk_conn_open(h->b, "calls", NULL, NULL);
  h->env.broker = h->b;
  h->env.calls = h->calls;
  servers_start(&h->servers);
}

void host_set_servers(host *h, const struct servers_backend *backend) {
  h->servers.backend = *backend;
}

void host_set_http(host *h, struct http_client *client, uint64_t timeout_ms, size_t max_body) {
  h->env.http = client;
  h->env.http_timeout_ms = timeout_ms;
  h->env.http_max_body = max_body;
}

void host_set_watchdog(host *h, uint64_t watchdog_ms) { h->watchdog_ms = watchdog_ms; }

void host_set_pg(host *h, struct pg_pool *pool, const char *missing, const char *once_table) {
  h->env.pg = pool;
  h->env.pg_missing = missing;
  h->env.pg_once_table = once_table;
}

/* Ends what the command connection still has unanswered. */
static void close_cmd(host *h) {
  bk_conn *cmd = h->cmd;
  h->cmd = NULL; /* finish_stop may run inside bk_conn_close */
  if (cmd) bk_conn_close(h->b, cmd);
}

/* The shutdown deadline: every subscription still stopping drops its running
 * handlers (sub_abandon), which gives their entries back; what is still
 * unanswered then (that hand-back, writes in flight) has DEADLINE_GRACE_MS
 * to be answered, then the command connection goes, which ends it, so the
 * last subscriptions drain and the host stops. Drained events during this
 * are counted but finish_stop waits until the log line has been written, so
 * it comes before "host stopped". */
static void deadline_fire(ltimer *t, void *data) {
  host *h = data;
  if (h->past_deadline) return close_cmd(h);
  size_t unfinished = 0, unacked = 0;
  h->at_deadline = true;
  for (size_t i = 0; i < h->slots.n; i++) {
    subscription *subs[2] = {h->slots.v[i].sub, h->slots.v[i].old};
    for (int k = 0; k < 2; k++) {
      size_t acks = 0;
      if (subs[k]) unfinished += sub_abandon(subs[k], &acks);
      unacked += acks;
    }
  }
  char running[24], acks[24];
  snprintf(running, sizeof running, "%zu", unfinished);
  snprintf(acks, sizeof acks, "%zu", unacked);
  log_line(LOG_WARN, NULL, "shutdown deadline reached", LOG_NUMBER "unfinished", running,
           LOG_NUMBER "unacked", unacked ? acks : NULL, NULL);
  h->at_deadline = false;
  if (h->undrained == 0) return finish_stop(h);
  h->past_deadline = true;
  timer_start(t, DEADLINE_GRACE_MS);
}

/* The deadline of a stop, for the subscriptions still draining; armed once. */
static void arm_deadline(host *h, uint64_t timeout_ms) {
  if (h->deadline_timer || h->undrained == 0) return;
  h->deadline_timer = timer_new(h->clock, deadline_fire, h);
  if (h->deadline_timer)
    timer_start(h->deadline_timer, timeout_ms);
  else
    log_line(LOG_ERROR, NULL, "out of memory: stopping without a deadline", NULL);
}

static void stop(host *h, bool deadline, uint64_t timeout_ms) {
  char timeout[32];
  snprintf(timeout, sizeof timeout, "%llums", (unsigned long long)timeout_ms);
  if (h->stopping) {
    /* Stopping already by itself (a consumer name lost or refused, the ACL
     * at start-up), without a deadline: a stop asked for now still ends
     * within its own. */
    if (deadline && h->started && !h->deadline_timer && h->undrained > 0) {
      log_line(LOG_INFO, NULL, "stopping: finishing running handlers", "timeout", timeout, NULL);
      arm_deadline(h, timeout_ms);
    }
    return;
  }
  h->stopping = true;
  if (h->info_timer) timer_stop(h->info_timer);
  if (h->reload_timer) timer_stop(h->reload_timer);
  log_line(LOG_INFO, NULL, "stopping: finishing running handlers", "timeout",
           deadline ? timeout : NULL, NULL);
  if (!h->started) return finish_stop(h);   /* never got as far as the subscriptions */
  for (size_t i = 0; i < h->slots.n; i++) { /* restarts waiting for a drain never start */
    if (h->slots.v[i].next) handler_release(h->slots.v[i].next);
    h->slots.v[i].next = NULL;
  }
  if (h->undrained == 0) return finish_stop(h);
  /* A subscription may drain inside sub_stop; the last one finishes the stop. */
  for (size_t i = 0; i < h->slots.n; i++)
    if (h->slots.v[i].sub) sub_stop(h->slots.v[i].sub);
  /* Armed after sub_stop, so the acks it flushed go out before even a zero
   * deadline fires. */
  if (deadline) arm_deadline(h, timeout_ms);
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
  for (size_t i = 0; i < h->slots.n; i++) {
    const struct slot *sl = &h->slots.v[i];
    running += sl->sub != NULL;
    if (sl->next) {
      snprintf(why, len, "subscription %s: restarting (hot reload)",
               slot_name(sl, name, sizeof name));
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

void host_ready_notes(const host *h, char *out, size_t len) {
  size_t n = 0;
  char note[400];
  if (len) out[0] = '\0';
  for (size_t i = 0; i < h->slots.n && n < len; i++) {
    const struct slot *sl = &h->slots.v[i];
    if (sl->sub && sub_note(sl->sub, note, sizeof note))
      n += (size_t)snprintf(out + n, len - n, "%ssubscription %s: %s", n ? "\n" : "",
                            sub_spec(sl->sub)->name, note);
  }
}

/* Running subscriptions first, then those a reload is stopping. */
size_t host_subscriptions(const host *h) {
  if (!h->started) return h->slots.n;
  size_t n = 0;
  for (size_t i = 0; i < h->slots.n; i++)
    n += (h->slots.v[i].sub != NULL) + (h->slots.v[i].old != NULL);
  return n;
}

subscription *host_subscription(const host *h, size_t i) {
  if (!h->started) return NULL;
  for (size_t k = 0; k < h->slots.n; k++)
    if (h->slots.v[k].sub && i-- == 0) return h->slots.v[k].sub;
  for (size_t k = 0; k < h->slots.n; k++)
    if (h->slots.v[k].old && i-- == 0) return h->slots.v[k].old;
  return NULL;
}

const char *host_failed(const host *h) {
  return h->failed ? (h->why_failed ? h->why_failed : "out of memory\n") : NULL;
}

void host_on_delivery(host *h,
                      void (*fn)(void *data, const struct handler_spec *spec, const struct entry *e,
                                 const struct rt_result *res),
                      void *data) {
  h->env.on_delivery = fn;
  h->env.on_delivery_data = data;
}

void host_free(host *h) {
  if (h == NULL) return;
  if (h->probe) h->probe->h = NULL;
  metrics_remove_collector(collect_handlers, h);
  group_stats_free(h->stats);
  for (size_t i = 0; i < h->slots.n; i++) {
    struct slot *sl = &h->slots.v[i];
    if (sl->sub) sub_free(sl->sub);
    if (sl->old) sub_free(sl->old);
    if (sl->loaded) handler_release(sl->loaded);
    if (sl->next) handler_release(sl->next);
    free(sl->path);
    free(sl->consumer);
  }
  lease_keepalive_free(h->keepalive); /* after the subscriptions' leases */
  if (h->cmd) bk_conn_close(h->b, h->cmd);
  close_calls(h);
  servers_free(&h->servers);
  if (h->info_timer) timer_free(h->info_timer);
  if (h->deadline_timer) timer_free(h->deadline_timer);
  if (h->reap_timer) timer_free(h->reap_timer);
  if (h->reload_timer) timer_free(h->reload_timer);
  free(h->slots.v);
  free(h->dir);
  free(h->consumer_override);
  free(h->why_failed);
  free(h);
  entry_pool_trim();
  rt_trim();
}
