/* run: `luastream run` (run.h). Every piece is built in order into one
 * struct run; whatever was built is taken down by run_teardown, the one
 * way out after the options are read. */
#include "run.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include "broker.h"
#include "clock.h"
#include "console.h"
#include "console_cmd.h"
#include "health.h"
#include "host.h"
#include "http.h"
#include "http_curl.h"
#include "pg.h"
#include "pg_pool.h"
#include "pg_prune.h"
#include "log.h"
#include "log_writer.h"
#include "loop.h"
#include "metrics.h"
#include "options.h"
#include "process_metrics.h"
#include "servers.h"
#include "stop_signal.h"
#include "tls.h"
#include "subscription.h"
#include "supervisor.h"
#include "trust.h"
#include "watchdog.h"

#define LOG_DRAIN_MS 5000     /* how long the buffered log may take at exit */
#define LOG_DRAIN_EXIT_MS 200 /* the same after a second signal */
#define DIR_POLL_MS 1000      /* how often DIR itself is looked at */

struct run {
  const char *dir;
  uint64_t shutdown_ms; /* --shutdown-timeout */
  struct trust trust;   /* --trust-owner, --allow-writable-dir: the host keeps a pointer */
  /* built in this order; each is NULL or false until it is */
  bool log_writer;
  bool loop_ready;
  uv_loop_t loop;
  lclock *clock;
  broker *broker;
  http_client *http;     /* ls.http */
  pg_pool *pg;           /* ls.pg, when PostgreSQL is configured */
  struct pg_prune prune; /* --pg-once-keep */
  host *host;
  health *health;   /* --http, else NULL */
  console *console; /* --console, else NULL */
  bool signals;     /* sigterm, sigint and sighup are initialised */
  uv_signal_t sigterm, sigint, sighup;
  bool watching;             /* watch and dir_poll are initialised (not --no-reload) */
  uv_fs_event_t watch;       /* DIR's entries */
  uv_fs_poll_t dir_poll;     /* DIR itself: gone, back or replaced */
  bool dir_missing;          /* the last stat of DIR failed */
  bool beating;              /* beat is initialised */
  uv_timer_t beat;           /* feeds the watchdog */
  struct stop_signals stops; /* SIGTERM/SIGINT received */
  bool worker;               /* a worker of the supervisor (supervisor.h) */
};

/* Closes the handles that keep the loop running; each once. */
static void close_handles(struct run *r) {
  if (r->signals) {
    uv_close((uv_handle_t *)&r->sigterm, NULL);
    uv_close((uv_handle_t *)&r->sigint, NULL);
    uv_close((uv_handle_t *)&r->sighup, NULL);
    r->signals = false;
  }
  if (r->watching) {
    uv_close((uv_handle_t *)&r->watch, NULL);
    uv_close((uv_handle_t *)&r->dir_poll, NULL);
    r->watching = false;
  }
  if (r->beating) {
    uv_close((uv_handle_t *)&r->beat, NULL);
    r->beating = false;
  }
  pg_prune_stop(&r->prune);
}

/* Takes down whatever of r was built, in the reverse order, and returns
 * status (1 when the loop cannot be closed). */
static int run_teardown(struct run *r, int status) {
  watchdog_stop(); /* before its timer goes: nothing feeds it from here on */
  close_handles(r);
  health_close(r->health);
  r->health = NULL;
  console_close(r->console);
  r->console = NULL;
  if (r->host) host_free(r->host);
  http_free(r->http);  /* after the host: its jobs' requests are let go */
  pg_pool_free(r->pg); /* after the host: its jobs' transactions are given back */
  if (r->broker) broker_free(r->broker);
  if (r->clock) {
    log_set_clock(NULL);
    r->clock->ops->free(r->clock);
  }
  if (r->loop_ready && loop_finish(&r->loop) != 0) status = 1;
  if (r->log_writer) log_writer_stop(LOG_DRAIN_MS);
  process_metrics_stop();
  metrics_reset();
  return status;
}

/* The brokers of the servers handlers connect to (ls.redis.connect): one
 * per URL on the host's loop, freed by the host once their connection closed. */
static broker *open_server(void *data, const struct redis_url *url) {
  struct run *r = data;
  return broker_cluster_new(&r->loop, url);
}

static void release_server(void *data, broker *b) {
  (void)data;
  broker_free(b);
}

/* Something changed in DIR: reload once it has been quiet a while (editors
 * write a file in several steps). */
static void on_dir_change(uv_fs_event_t *w, const char *file, int events, int status) {
  (void)file, (void)events;
  struct run *r = w->data;
  if (status < 0) {
    log_line(LOG_WARN, NULL, "watching the handler directory failed", "error", uv_strerror(status),
             NULL);
    return;
  }
  host_reload_soon(r->host);
}

/* (Re)starts the uv_fs_event on DIR: after the directory was deleted and
 * made again (or replaced by a rename), the old watch follows the old inode
 * and never fires again. loudly: say so in the log. */
static void watch_dir(struct run *r, bool again, bool loudly) {
  if (again) uv_fs_event_stop(&r->watch);
  int rc = uv_fs_event_start(&r->watch, on_dir_change, r->dir, 0);
  if (rc < 0)
    log_line(LOG_WARN, NULL, "cannot watch the handler directory: reload with SIGHUP", "dir",
             r->dir, "error", uv_strerror(rc), NULL);
  else if (loudly)
    log_line(LOG_INFO, NULL, "watching the handler directory again", "dir", r->dir, NULL);
}

/* DIR's own stat changed: it went (the reload stops its subscriptions), came
 * back, was replaced, or its entries changed. A new directory can reuse the
 * old one's inode number, so the watch is made anew on every change (cheap,
 * and the reload that follows sees whatever happened in between). */
static void on_dir_stat(uv_fs_poll_t *p, int status, const uv_stat_t *prev, const uv_stat_t *curr) {
  struct run *r = p->data;
  if (status < 0) {
    r->dir_missing = true;
  } else {
    bool other = r->dir_missing || prev->st_ino != curr->st_ino || prev->st_dev != curr->st_dev;
    r->dir_missing = false;
    watch_dir(r, true, other);
  }
  host_reload_soon(r->host);
}

static void on_beat(uv_timer_t *t) {
  (void)t;
  watchdog_beat();
}

static void on_sighup(uv_signal_t *sig, int signum) {
  (void)signum;
  struct run *r = sig->data;
  log_line(LOG_INFO, NULL, "signal received: reloading every handler and the TLS files", "signal",
           "SIGHUP", NULL);
  tls_reload(); /* rotated certificates: connections made from now on use them */
  console_reload_tokens(r->console);
  host_reload(r->host, true);
}

static void on_signal(uv_signal_t *sig, int signum) {
  struct run *r = sig->data;
  const char *name = signum == SIGINT ? "SIGINT" : "SIGTERM";
  enum stop_signal_kind kind = stop_signal_take(&r->stops, signum, uv_hrtime() / 1000000);
  if (kind != STOP_FIRST && r->worker) {
    /* The same stop again (systemd or pkill signal every process, besides the
     * supervisor passing it on); the supervisor ends a worker at once with
     * SIGKILL. */
    return;
  }
  if (kind == STOP_AGAIN) {
    /* GNU timeout signals the child and then its process group. */
    log_line(LOG_INFO, NULL, "the same signal again: still stopping", "signal", name, NULL);
    return;
  }
  if (kind == STOP_NOW) {
    log_line(LOG_WARN, NULL, "second signal: exiting now", "signal", name, NULL);
    /* At once: no atexit handlers (a leak check would report the Lua states
     * still open), only a moment for the log lines still buffered. Entries
     * not acked stay pending in Redis. */
    log_writer_stop(LOG_DRAIN_EXIT_MS);
    _exit(1);
  }
  log_line(LOG_INFO, NULL, "signal received", "signal", name, NULL);
  host_stop_within(r->host, r->shutdown_ms);
}

/* The host has stopped: nothing may keep the loop running any more. */
static void host_stopped(void *data) {
  struct run *r = data;
  watchdog_stop(); /* before its timer goes: nothing feeds it from here on */
  close_handles(r);
  health_close(r->health);
  r->health = NULL;
  console_close(r->console);
  r->console = NULL;
  http_close(r->http); /* requests of abandoned handlers; kept connections */
  if (r->pg) pg_pool_close(r->pg);
}

/* ---- what the web console asks of the host ---- */

static void console_reload(void *data) {
  struct run *r = data;
  tls_reload();
  host_reload(r->host, true);
}

static char *console_metrics(void *data, size_t *len) {
  (void)data;
  return metrics_page(len);
}

static void console_each_running(void *data,
                                 void (*fn)(void *arg, const char *path, const char *version),
                                 void *arg) {
  struct run *r = data;
  for (size_t i = 0; i < host_subscriptions(r->host); i++) {
    const subscription *s = host_subscription(r->host, i);
    if (s) fn(arg, sub_spec(s)->path, sub_version(s));
  }
}

static bool run_ready(void *data, char *why, size_t len) {
  if (!host_is_ready(((struct run *)data)->host, why, len)) return false;
  host_ready_notes(((struct run *)data)->host, why, len); /* a pause: ready all the same */
  return true;
}

/* Starts catching signum with cb; -1 when libuv refuses (reported). */
static int catch_signal(struct run *r, uv_signal_t *sig, uv_signal_cb cb, int signum,
                        const char *name) {
  sig->data = r;
  int rc = uv_signal_start(sig, cb, signum);
  if (rc != 0) fprintf(stderr, "luastream: cannot handle %s: %s\n", name, uv_strerror(rc));
  return rc == 0 ? 0 : -1;
}

/* The signals, the watch on DIR and the watchdog with its timer; -1 when
 * one cannot be set up (reported). */
static int run_attach(struct run *r, bool reload, uint64_t watchdog_ms) {
  char err[256];
  int rc;
  if ((rc = uv_signal_init(&r->loop, &r->sigterm)) != 0 ||
      (rc = uv_signal_init(&r->loop, &r->sigint)) != 0 ||
      (rc = uv_signal_init(&r->loop, &r->sighup)) != 0) {
    /* a handle made before the failure is closed by loop_finish */
    fprintf(stderr, "luastream: cannot handle signals: %s\n", uv_strerror(rc));
    return -1;
  }
  r->signals = true;
  if (catch_signal(r, &r->sigterm, on_signal, SIGTERM, "SIGTERM") != 0 ||
      catch_signal(r, &r->sigint, on_signal, SIGINT, "SIGINT") != 0 ||
      catch_signal(r, &r->sighup, on_sighup, SIGHUP, "SIGHUP") != 0)
    return -1;
  /* A worker held them while it loaded (supervisor_worker_setup): what came
   * meanwhile arrives now. */
  supervisor_hold_signals(false);
  if (reload) {
    if ((rc = uv_fs_event_init(&r->loop, &r->watch)) != 0 ||
        (rc = uv_fs_poll_init(&r->loop, &r->dir_poll)) != 0) {
      fprintf(stderr, "luastream: cannot watch %s: %s\n", r->dir, uv_strerror(rc));
      return -1;
    }
    r->watch.data = r->dir_poll.data = r;
    r->watching = true;
    watch_dir(r, false, false);
    rc = uv_fs_poll_start(&r->dir_poll, on_dir_stat, r->dir, DIR_POLL_MS);
    if (rc != 0)
      log_line(LOG_WARN, NULL, "cannot watch the handler directory: reload with SIGHUP", "dir",
               r->dir, "error", uv_strerror(rc), NULL);
  }
  /* Without the watchdog a stalled loop could outlive the consumer leases. */
  if (watchdog_start(watchdog_ms, err, sizeof err) != 0) {
    fprintf(stderr, "luastream: cannot start the watchdog: %s\n", err);
    return -1;
  }
  if ((rc = uv_timer_init(&r->loop, &r->beat)) != 0) {
    fprintf(stderr, "luastream: cannot start the watchdog's timer: %s\n", uv_strerror(rc));
    return -1;
  }
  r->beating = true;
  /* Unreferenced: it feeds the watchdog but keeps no loop alive. */
  uv_timer_start(&r->beat, on_beat, watchdog_interval_ms(), watchdog_interval_ms());
  uv_unref((uv_handle_t *)&r->beat);
  return 0;
}

/* Why run stops, for the person at the terminal: text lines as they are, or
 * with --log-format json one error record per line, so that every line on
 * stderr is JSON. */
static void say_lines(const char *msg, const char *text) {
  if (log_get_format() == LOG_FORMAT_JSON)
    log_text(LOG_ERROR, msg, text);
  else
    fputs(text, stderr);
}

/* One such line, formatted: "luastream: ..." as text. */
static void say(const char *fmt, ...) {
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (log_get_format() == LOG_FORMAT_JSON)
    log_line(LOG_ERROR, NULL, line, NULL);
  else
    fprintf(stderr, "luastream: %s\n", line);
}

/* Warnings about the command line, as log lines in the log's format: those
 * cli_parse kept, and a password in --postgres, which ps shows as it shows
 * one in --redis. */
static void warn_command_line(const struct cli_options *o) {
  cli_log_warnings(o);
  const struct cli_value *pg = &o->v[OPT_POSTGRES];
  char shown[1024];
  if (pg->given && !pg->from_env && strlen(pg->text) < sizeof shown &&
      strcmp(pg_redact(pg->text, shown, sizeof shown), pg->text) != 0)
    log_line(LOG_WARN, NULL,
             "the password in --postgres can be seen by every user of this machine (ps): use "
             "LUASTREAM_POSTGRES, PGPASSWORD or a PGPASSFILE instead",
             NULL);
}

/* PostgreSQL is configured: --postgres or LUASTREAM_POSTGRES, or libpq's
 * own variables naming a server (PGHOST, PGSERVICE, PGDATABASE). */
static bool pg_configured(const struct cli_options *o) {
  if (cli_given(o, OPT_POSTGRES)) return true;
  const char *vars[] = {"PGHOST", "PGSERVICE", "PGDATABASE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return true;
  }
  return false;
}

/* The pool of ls.pg, when PostgreSQL is configured; connections are made
 * when queries need them. -1 when the settings do not parse (said). */
static int open_pg(struct run *r, const struct cli_options *o) {
  if (!pg_configured(o)) return 0;
  const char *conninfo = cli_text(o, OPT_POSTGRES);
  struct pg_options po = {.conninfo = conninfo ? conninfo : "",
                          .size = (int)cli_num(o, OPT_PG_POOL),
                          .timeout_ms = (uint64_t)cli_num(o, OPT_PG_TIMEOUT)};
  char err[512], shown[512];
  if ((r->pg = pg_pool_new(&r->loop, &po, err, sizeof err)) == NULL) {
    fprintf(stderr, "luastream: --postgres: %s\n", err);
    return -1;
  }
  host_set_pg(r->host, r->pg, NULL, cli_text(o, OPT_PG_ONCE_TABLE));
  uint64_t keep_ms = (uint64_t)cli_num(o, OPT_PG_ONCE_KEEP);
  if (keep_ms > 0 &&
      pg_prune_start(&r->prune, &r->loop, r->pg, cli_text(o, OPT_PG_ONCE_TABLE), keep_ms) != 0) {
    fprintf(stderr, "luastream: cannot start the --pg-once-keep timer\n");
    return -1;
  }
  char pool[16];
  snprintf(pool, sizeof pool, "%d", po.size);
  log_line(LOG_INFO, NULL, "postgres configured", "conninfo",
           pg_redact(po.conninfo, shown, sizeof shown), LOG_NUMBER "pool", pool, NULL);
  return 0;
}

/* Raises the soft open-file limit to the hard one and logs the limit: Redis
 * and PostgreSQL connections, handler files and the health endpoint's
 * connections (a share of this, health_pool.h) all take descriptors, and a
 * soft limit of 1024 is the default of many shells and service managers. */
static void raise_nofile(void) {
  struct rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  char was[24], now[24];
  snprintf(was, sizeof was, "%llu", (unsigned long long)lim.rlim_cur);
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) {
      log_line(LOG_WARN, NULL, "cannot raise the open file limit", LOG_NUMBER "limit", was, "error",
               strerror(errno), NULL);
      return;
    }
    snprintf(now, sizeof now, "%llu", (unsigned long long)lim.rlim_cur);
    log_line(LOG_INFO, NULL, "open file limit raised", LOG_NUMBER "limit", now, LOG_NUMBER "from",
             was, NULL);
    return;
  }
  log_line(LOG_INFO, NULL, "open file limit", LOG_NUMBER "limit", was, NULL);
}

int cmd_run(int argc, char **argv) {
  struct cli_options o;
  int rc = cli_parse(CLI_RUN, argc, argv, &o, stdout, stderr);
  if (rc != CLI_OK) return rc == CLI_DONE ? 0 : 2;
  if (console_options_check(&o, false) != 0) return 2;
  log_set_level((enum log_level)cli_num(&o, OPT_LOG_LEVEL));
  log_set_format((enum log_format)cli_num(&o, OPT_LOG_FORMAT));
  uint64_t watchdog_ms = (uint64_t)cli_num(&o, OPT_WATCHDOG);
  uint64_t load_ms = (uint64_t)cli_num(&o, OPT_LOAD_TIMEOUT);
  /* A reload runs on the loop: its limit must come before the watchdog's.
   * Without --load-timeout a short watchdog shortens it to half its own. */
  if (!cli_given(&o, OPT_LOAD_TIMEOUT) && load_ms >= watchdog_ms) load_ms = watchdog_ms / 2;
  if (load_ms >= watchdog_ms) {
    say("--load-timeout (%llums) must be below --watchdog (%llums)", (unsigned long long)load_ms,
        (unsigned long long)watchdog_ms);
    return 2;
  }

  struct supervisor_worker worker = {.index = -1, .http_fd = -1};
  int is_worker = supervisor_worker_setup(&worker);
  if (is_worker < 0) return 1;
  if (!is_worker) {
    warn_command_line(&o); /* workers have the same command line */
    raise_nofile();        /* workers inherit the supervisor's */
  }
  if (!is_worker && cli_num(&o, OPT_PROCESSES) > 1) return supervisor_run(&o, argc, argv);

  struct run r = {.dir = o.pos[0], .shutdown_ms = (uint64_t)cli_num(&o, OPT_SHUTDOWN_TIMEOUT)};
  if (cli_trust(&o, &r.trust, stderr) != 0) return 2;
  int status = 1;
  char err[512];
  char *problems = NULL;
  struct host_names names = {.consumer = cli_text(&o, OPT_CONSUMER), .instance = -1};
  if (cli_text(&o, OPT_INSTANCE)) names.instance = (int)cli_num(&o, OPT_INSTANCE);
  /* Neither name given: a process started beside a live one numbers its
   * names (host.h), -1, -2, ...; worker I of N tries I, I + N, I + 2N, ... */
  bool numbered = names.instance < 0 && names.consumer == NULL;
  if (numbered) names.number_step = 1;
  char worker_consumer[512];
  r.worker = is_worker == 1;
  if (is_worker) { /* the names of worker I of N (supervisor.h) */
    int nprocs = (int)cli_num(&o, OPT_PROCESSES);
    names.instance = supervisor_worker_names(worker.index, nprocs, names.instance, names.consumer,
                                             worker_consumer, sizeof worker_consumer);
    if (names.consumer) names.consumer = worker_consumer;
    if (numbered) names.number_step = nprocs;
  }
  /* A stalled reader of stderr must not stop the host: the log is written
   * by a thread of its own, given a few seconds at the end. */
  if (log_writer_start() != 0) {
    say("cannot start the log writer thread");
    goto out;
  }
  r.log_writer = true;
  if ((rc = uv_loop_init(&r.loop)) != 0) {
    say("cannot create the event loop: %s", uv_strerror(rc));
    goto out;
  }
  r.loop_ready = true;
  if ((r.clock = clock_uv_new(&r.loop)) == NULL) {
    say("cannot create the clock: out of memory");
    goto out;
  }
  log_set_clock(r.clock); /* log times from the clock the host runs on */
  if ((r.broker = broker_cluster_new(&r.loop, &o.url)) == NULL) {
    say("cannot create the client for %s: out of memory", o.url.redacted);
    goto out;
  }
  if (r.trust.allow_writable)
    log_line(LOG_WARN, NULL,
             "--allow-writable-dir: handler code other users can change is loaded; whoever can "
             "write it runs code as this user",
             "dir", r.dir, NULL);
  r.host = host_new(r.dir, r.broker, r.clock, &names, load_ms, &r.trust, &problems);
  if (r.host == NULL) {
    if (problems)
      say_lines("load problem", problems);
    else
      say("cannot create the host: out of memory");
    free(problems);
    log_line(LOG_ERROR, NULL, "handlers failed to load; not starting", "dir", r.dir, NULL);
    goto out;
  }
  const char *ca_file = cli_text(&o, OPT_HTTP_CA_FILE);
  if (ca_file && access(ca_file, R_OK) != 0) {
    say("--http-ca-file %s: cannot be read", ca_file);
    goto out;
  }
  struct http_curl_options ho = {.max_per_host = (long)cli_num(&o, OPT_HTTP_PER_HOST),
                                 .ca_file = ca_file};
  if ((r.http = http_curl_new(&r.loop, &ho, err, sizeof err)) == NULL) {
    say("%s", err);
    goto out;
  }
  host_set_watchdog(r.host, watchdog_ms);
  host_set_http(r.host, r.http, (uint64_t)cli_num(&o, OPT_HTTP_TIMEOUT),
                (size_t)cli_num(&o, OPT_HTTP_MAX_BODY));
  if (open_pg(&r, &o) != 0) goto out;
  process_metrics_start();
  if (worker.http_fd >= 0) /* a worker's health endpoint, asked by the supervisor */
    r.health = health_start_fd(&r.loop, worker.http_fd, run_ready, &r, err, sizeof err);
  else if (cli_text(&o, OPT_HTTP) && !is_worker)
    r.health = health_start(&r.loop, cli_text(&o, OPT_HTTP), run_ready, &r, err, sizeof err);
  if ((worker.http_fd >= 0 || (cli_text(&o, OPT_HTTP) && !is_worker)) && r.health == NULL) {
    say("%s", err);
    goto out;
  }
  if (cli_text(&o, OPT_CONSOLE) && !is_worker) {
    struct console_config cc = {
        .addr = cli_text(&o, OPT_CONSOLE),
        .tokens_path = cli_text(&o, OPT_CONSOLE_TOKENS),
        .origin = cli_text(&o, OPT_CONSOLE_ORIGIN),
        .url = &o.url,
        .dir = r.dir,
        .load_timeout_ms = load_ms,
        .trust = &r.trust,
        .interval_ms = (uint64_t)cli_num(&o, OPT_CONSOLE_INTERVAL),
        .host = {console_reload, console_metrics, console_each_running, &r},
        .mode = "run",
    };
    if ((r.console = console_start(&r.loop, &cc, err, sizeof err)) == NULL) {
      say("%s", err);
      goto out;
    }
  }
  if (run_attach(&r, !cli_given(&o, OPT_NO_RELOAD), watchdog_ms) != 0) goto out;

  host_set_servers(r.host, &(struct servers_backend){open_server, release_server, &r});
  host_start(r.host, host_stopped, &r);
  uv_run(&r.loop, UV_RUN_DEFAULT);
  watchdog_stop();
  if (host_failed(r.host)) say_lines("host failed", host_failed(r.host));
  status = host_failed(r.host) ? 1 : 0;
out:
  return run_teardown(&r, status);
}
