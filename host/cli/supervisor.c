/* supervisor: worker processes under one parent (supervisor.h). */
#include "supervisor.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "backoff.h"
#include "console.h"
#include "health.h"
#include "log.h"
#include "scrape.h"
#include "stop_signal.h"

extern char **environ;

#define WORKER_HTTP_FD 3 /* where a worker finds its health socket */

/* ---- the pure parts ---- */

uint64_t supervisor_backoff(uint64_t prev_ms, uint64_t ran_ms) {
  /* a worker that ran a while starts again soon */
  if (ran_ms >= SUPERVISOR_STEADY_MS) prev_ms = 0;
  return backoff_next(prev_ms, SUPERVISOR_BACKOFF_MIN_MS, SUPERVISOR_BACKOFF_MAX_MS);
}

int supervisor_worker_names(int index, int nprocs, int base_instance, const char *base_consumer,
                            char *consumer, size_t cap) {
  if (cap > 0) consumer[0] = '\0';
  if (base_consumer) {
    snprintf(consumer, cap, "%s-%d", base_consumer, index);
    return -1;
  }
  return base_instance >= 0 ? base_instance * nprocs + index : index;
}

const char *supervisor_signal_name(int sig, char *buf, size_t cap) {
  static const struct {
    int sig;
    const char *name;
  } names[] = {{SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
               {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},
               {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
               {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
               {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
               {SIGXCPU, "SIGXCPU"}, {SIGSYS, "SIGSYS"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].sig == sig) return names[i].name;
  snprintf(buf, cap, "signal %d", sig);
  return buf;
}

/* ---- the worker's side ---- */

/* A whole decimal number from 0 to max, else -1. */
static long env_number(const char *text, long max) {
  if (text == NULL || text[0] == '\0' || strspn(text, "0123456789") != strlen(text) ||
      strlen(text) > 9)
    return -1;
  long v = strtol(text, NULL, 10);
  return v <= max ? v : -1;
}

void supervisor_hold_signals(bool hold) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigprocmask(hold ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

int supervisor_worker_setup(struct supervisor_worker *w) {
  const char *index = getenv(SUPERVISOR_ENV_WORKER);
  if (index == NULL) return 0;
  long i = env_number(index, 1023);
  long parent = env_number(getenv(SUPERVISOR_ENV_PARENT), 1L << 30);
  const char *fd_text = getenv(SUPERVISOR_ENV_HTTP_FD);
  long fd = fd_text ? env_number(fd_text, 1 << 20) : -1;
  unsetenv(SUPERVISOR_ENV_WORKER);
  unsetenv(SUPERVISOR_ENV_PARENT);
  unsetenv(SUPERVISOR_ENV_HTTP_FD);
  if (i < 0 || parent <= 0 || (fd_text && fd < 0)) {
    fprintf(stderr, "luastream: %s, %s or %s is not what the supervisor sets\n",
            SUPERVISOR_ENV_WORKER, SUPERVISOR_ENV_PARENT, SUPERVISOR_ENV_HTTP_FD);
    return -1;
  }
#ifdef __linux__
  /* SIGTERM (a graceful stop) when the supervisor dies, even by SIGKILL. It
   * may have died before this call: then this process has a new parent. */
  prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
  if (getppid() != (pid_t)parent) {
    fprintf(stderr, "luastream: worker %ld: the supervisor (pid %ld) is gone\n", i, parent);
    return -1;
  }
  /* A stop or a reload the supervisor passes on while this worker still
   * loads its handlers waits until run catches them (run_attach unblocks
   * them), rather than killing the worker with the default action. */
  supervisor_hold_signals(true);
  w->index = (int)i;
  w->http_fd = (int)fd;
  return 1;
}

/* ---- the supervisor ---- */

struct sv;

struct worker {
  struct sv *sv;
  int index;
  uv_process_t *proc; /* NULL while not running */
  int pid;
  uint64_t started_ms;
  uint64_t backoff_ms; /* the last wait before a restart, 0 for none */
  uv_timer_t restart;  /* the wait before starting it again */
  int listen_fd, port; /* its health socket (with --http), else -1, 0 */
  unsigned restarts;
};

struct sv {
  uv_loop_t loop;
  int n;
  struct worker *w;
  char **args;          /* the workers' argv */
  char **env;           /* the workers' environment; the last three slots are ours */
  size_t nenv;          /* the inherited part */
  bool signals, timers; /* initialised handles */
  uv_signal_t sigterm, sigint, sighup;
  struct stop_signals stops; /* SIGTERM/SIGINT received */
  bool stopping;
  int running; /* workers with a process */
  int status;  /* the exit status */
  health *health;
  console *console; /* --console, else NULL */
  struct trust trust;
};

/* A request to the supervisor's --http, waiting for every worker. */
struct ask {
  struct sv *sv;
  health_request *req;
  enum health_route route;
  int waiting;
  int *status; /* per worker, 0 when it did not answer */
  char **body; /* per worker, malloc'd or NULL */
};

static void log_worker(enum log_level level, const char *msg, const struct worker *w,
                       const char *key, const char *value, const char *key2, const char *value2) {
  char index[16], pid[16];
  snprintf(index, sizeof index, "%d", w->index);
  snprintf(pid, sizeof pid, "%d", w->pid);
  log_line(level, NULL, msg, LOG_NUMBER "worker", index, LOG_NUMBER "pid", pid, key, value, key2,
           value2, NULL);
}

/* Closes every handle of the supervisor: the loop then ends once the last
 * request to --http has had its answer. */
static void close_all(struct sv *sv) {
  if (sv->signals) {
    uv_close((uv_handle_t *)&sv->sigterm, NULL);
    uv_close((uv_handle_t *)&sv->sigint, NULL);
    uv_close((uv_handle_t *)&sv->sighup, NULL);
    sv->signals = false;
  }
  if (sv->timers) {
    for (int i = 0; i < sv->n; i++) uv_close((uv_handle_t *)&sv->w[i].restart, NULL);
    sv->timers = false;
  }
  health_close(sv->health);
  sv->health = NULL;
  console_close(sv->console);
  sv->console = NULL;
}

static void schedule_restart(struct worker *w, uint64_t ran_ms);
static void pass_on(struct sv *sv, int signum);

static void proc_closed(uv_handle_t *h) { free(h); }

static void on_worker_exit(uv_process_t *p, int64_t exit_status, int term_signal) {
  struct worker *w = p->data;
  struct sv *sv = w->sv;
  uv_close((uv_handle_t *)p, proc_closed);
  w->proc = NULL;
  sv->running--;
  uv_update_time(&sv->loop);
  uint64_t ran_ms = uv_now(&sv->loop) - w->started_ms;
  bool failed = term_signal != 0 || exit_status != 0;
  char text[32], sig[24];
  snprintf(text, sizeof text, "%lld", (long long)exit_status);
  enum log_level level = failed || !sv->stopping ? LOG_WARN : LOG_INFO;
  const char *msg = sv->stopping ? "worker exited" : "worker exited: starting it again";
  if (sv->stopping) {
    if (failed && sv->status == 0) sv->status = 1;
    if (term_signal)
      log_worker(level, msg, w, "signal", supervisor_signal_name(term_signal, sig, sizeof sig),
                 NULL, NULL);
    else
      log_worker(level, msg, w, LOG_NUMBER "status", text, NULL, NULL);
    if (sv->running == 0) {
      char st[16];
      snprintf(st, sizeof st, "%d", sv->status);
      log_line(sv->status ? LOG_WARN : LOG_INFO, NULL, "every worker stopped", LOG_NUMBER "status",
               st, NULL);
      close_all(sv);
    }
    return;
  }
  if (w->restarts == 0 && term_signal == 0 && (exit_status == 1 || exit_status == 2) &&
      ran_ms < SUPERVISOR_STEADY_MS) {
    /* As `run` alone would: the handlers or the server refused to start. */
    log_worker(LOG_ERROR, "worker failed to start: stopping every worker", w, LOG_NUMBER "status",
               text, NULL, NULL);
    sv->status = (int)exit_status;
    sv->stopping = true;
    stop_signal_begun(&sv->stops); /* a signal from here on is a second stop */
    for (int i = 0; i < sv->n; i++) uv_timer_stop(&sv->w[i].restart);
    pass_on(sv, SIGTERM);
    if (sv->running == 0) close_all(sv);
    return;
  }
  w->backoff_ms = supervisor_backoff(w->backoff_ms, ran_ms);
  char wait[24];
  snprintf(wait, sizeof wait, "%llu", (unsigned long long)w->backoff_ms);
  if (term_signal)
    log_worker(level, msg, w, "signal", supervisor_signal_name(term_signal, sig, sizeof sig),
               LOG_NUMBER "restart_in_ms", wait);
  else
    log_worker(level, msg, w, LOG_NUMBER "status", text, LOG_NUMBER "restart_in_ms", wait);
  schedule_restart(w, ran_ms);
}

/* Starts worker w; when that fails, tries again after the backoff. */
static void start_worker(struct worker *w) {
  struct sv *sv = w->sv;
  uv_process_t *p = calloc(1, sizeof *p);
  char index[32], parent[48], fd[48];
  snprintf(index, sizeof index, "%s=%d", SUPERVISOR_ENV_WORKER, w->index);
  snprintf(parent, sizeof parent, "%s=%ld", SUPERVISOR_ENV_PARENT, (long)getpid());
  snprintf(fd, sizeof fd, "%s=%d", SUPERVISOR_ENV_HTTP_FD, WORKER_HTTP_FD);
  sv->env[sv->nenv] = index;
  sv->env[sv->nenv + 1] = parent;
  sv->env[sv->nenv + 2] = w->listen_fd >= 0 ? fd : NULL;
  sv->env[sv->nenv + 3] = NULL;
  uv_stdio_container_t stdio[4] = {
      {.flags = UV_INHERIT_FD, .data.fd = 0},
      {.flags = UV_INHERIT_FD, .data.fd = 1},
      {.flags = UV_INHERIT_FD, .data.fd = 2},
      {.flags = UV_INHERIT_FD, .data.fd = w->listen_fd},
  };
  uv_process_options_t po = {
      .exit_cb = on_worker_exit,
      .file = "/proc/self/exe",
      .args = sv->args,
      .env = sv->env,
      /* a session of its own: a terminal's Ctrl-C comes through the supervisor once */
      .flags = UV_PROCESS_DETACHED,
      .stdio_count = w->listen_fd >= 0 ? 4 : 3,
      .stdio = stdio,
  };
  int rc = p ? uv_spawn(&sv->loop, p, &po) : UV_ENOMEM;
  uv_update_time(&sv->loop);
  w->started_ms = uv_now(&sv->loop);
  if (rc != 0) {
    /* libuv keeps a handle that failed to spawn: it must be closed */
    if (p) uv_close((uv_handle_t *)p, proc_closed);
    w->backoff_ms = supervisor_backoff(w->backoff_ms, 0);
    char wait[24];
    snprintf(wait, sizeof wait, "%llu", (unsigned long long)w->backoff_ms);
    log_worker(LOG_ERROR, "cannot start a worker", w, "error", uv_strerror(rc),
               LOG_NUMBER "restart_in_ms", wait);
    schedule_restart(w, 0);
    return;
  }
  p->data = w;
  w->proc = p;
  w->pid = p->pid;
  sv->running++;
  char port[16];
  snprintf(port, sizeof port, "%d", w->port);
  log_worker(LOG_INFO, "worker started", w, w->listen_fd >= 0 ? LOG_NUMBER "http_port" : NULL, port,
             NULL, NULL);
}

static void on_restart(uv_timer_t *t) {
  struct worker *w = t->data;
  if (w->sv->stopping) return;
  w->restarts++;
  start_worker(w);
}

static void schedule_restart(struct worker *w, uint64_t ran_ms) {
  (void)ran_ms;
  uv_timer_start(&w->restart, on_restart, w->backoff_ms, 0);
}

/* Sends signum to every running worker. */
static void pass_on(struct sv *sv, int signum) {
  for (int i = 0; i < sv->n; i++)
    if (sv->w[i].proc) uv_process_kill(sv->w[i].proc, signum);
}

static void on_stop_signal(uv_signal_t *s, int signum) {
  struct sv *sv = s->data;
  char buf[24];
  const char *name = supervisor_signal_name(signum, buf, sizeof buf);
  enum stop_signal_kind kind = stop_signal_take(&sv->stops, signum, uv_hrtime() / 1000000);
  if (kind == STOP_AGAIN) {
    /* GNU timeout signals the supervisor and then its process group. */
    log_line(LOG_INFO, NULL, "the same signal again: still stopping", "signal", name, NULL);
    return;
  }
  if (kind == STOP_NOW) {
    log_line(LOG_WARN, NULL, "second signal: killing every worker (SIGKILL)", "signal", name, NULL);
    sv->status = 1;
    /* A worker takes SIGTERM and SIGINT as one graceful stop however often
     * they come (a service manager may signal every process of the service):
     * only SIGKILL ends it at once. Its unacked entries stay pending. */
    pass_on(sv, SIGKILL);
    return;
  }
  log_line(LOG_INFO, NULL, "signal received: stopping every worker", "signal", name, NULL);
  sv->stopping = true;
  for (int i = 0; i < sv->n; i++) uv_timer_stop(&sv->w[i].restart);
  pass_on(sv, signum);
  if (sv->running == 0) close_all(sv);
}

static void on_sighup(uv_signal_t *s, int signum) {
  struct sv *sv = s->data;
  log_line(LOG_INFO, NULL, "signal received: every worker reloads", "signal", "SIGHUP", NULL);
  console_reload_tokens(sv->console);
  pass_on(sv, signum);
}

/* The web console's reload: every worker reloads, as on SIGHUP. */
static void console_reload(void *data) {
  struct sv *sv = data;
  pass_on(sv, SIGHUP);
}

/* ---- --http ---- */

static bool sv_live(void *data, char *why, size_t len) {
  (void)data, (void)why, (void)len;
  return true; /* /readyz is deferred: only /healthz gets here */
}

static void ask_free(struct ask *a) {
  for (int i = 0; i < a->sv->n; i++) free(a->body[i]);
  free(a->body);
  free(a->status);
  free(a);
}

static void ask_answer(struct ask *a) {
  struct sv *sv = a->sv;
  if (a->route == HEALTH_READY) {
    char why[600] = "";
    for (int i = 0; i < sv->n && !why[0]; i++) {
      if (a->status[i] == 200) continue;
      if (a->status[i] == 0) {
        snprintf(why, sizeof why, "worker %d: %s", i,
                 sv->w[i].proc ? "no answer" : "not running (restarting)");
      } else {
        const char *b = a->body[i] ? a->body[i] : "";
        int n = (int)strcspn(b, "\r\n");
        snprintf(why, sizeof why, "worker %d: %.*s", i, n, b);
      }
    }
    if (sv->stopping && !why[0]) snprintf(why, sizeof why, "stopping");
    if (why[0]) {
      health_reply_text(a->req, 503, why);
    } else { /* the workers' notes (a paused group), each once */
      char notes[1024];
      scrape_ready_notes((const char *const *)a->body, sv->n, notes, sizeof notes);
      health_reply_ready(a->req, notes);
    }
  } else {
    const char **pages = calloc((size_t)sv->n, sizeof *pages);
    unsigned *restarts = calloc((size_t)sv->n, sizeof *restarts);
    char *page = NULL;
    size_t len = 0;
    if (pages && restarts) {
      for (int i = 0; i < sv->n; i++) {
        pages[i] = a->status[i] == 200 ? a->body[i] : NULL;
        restarts[i] = sv->w[i].restarts;
      }
      page = scrape_merge(pages, restarts, sv->n, &len);
    }
    free(pages);
    free(restarts);
    health_reply_page(a->req, page, len);
  }
  ask_free(a);
}

static void on_scraped(void *data, int index, int status, char *body, size_t len) {
  (void)len;
  struct ask *a = data;
  a->status[index] = status;
  a->body[index] = body;
  if (--a->waiting == 0) ask_answer(a);
}

static void on_http(void *data, enum health_route route, health_request *req) {
  struct sv *sv = data;
  struct ask *a = calloc(1, sizeof *a);
  if (a) {
    a->status = calloc((size_t)sv->n, sizeof *a->status);
    a->body = calloc((size_t)sv->n, sizeof *a->body);
  }
  if (a == NULL || a->status == NULL || a->body == NULL) {
    if (a) free(a->status), free(a->body), free(a);
    return health_reply_text(req, 500, "out of memory");
  }
  a->sv = sv;
  a->req = req;
  a->route = route;
  a->waiting = sv->n;
  const char *path = route == HEALTH_READY ? "/readyz" : "/metrics";
  for (int i = 0; i < sv->n; i++)
    if (scrape_get(&sv->loop, sv->w[i].port, path, SUPERVISOR_SCRAPE_MS, on_scraped, a, i) != 0)
      on_scraped(a, i, 0, NULL, 0);
}

/* A loopback socket on a free port, listening, for worker w's health
 * endpoint. It stays open in the supervisor so that every process of the
 * worker serves the same port. -1 when it cannot be made (said). */
static int worker_socket(struct worker *w) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof addr;
  if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, (struct sockaddr *)&addr, &alen) != 0) {
    fprintf(stderr, "luastream: cannot make worker %d's health socket: %s\n", w->index,
            strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  w->listen_fd = fd;
  w->port = ntohs(addr.sin_port);
  return 0;
}

/* ---- the whole ---- */

/* The workers' argv and environment (the supervisor's own, without a
 * worker's variables, and room for them). -1 when out of memory. */
static int build_exec(struct sv *sv, int argc, char **argv) {
  sv->args = calloc((size_t)argc + 3, sizeof *sv->args);
  size_t n = 0;
  while (environ[n]) n++;
  sv->env = calloc(n + 4, sizeof *sv->env);
  if (sv->args == NULL || sv->env == NULL) return -1;
  sv->args[0] = "luastream";
  sv->args[1] = "run";
  for (int i = 0; i < argc; i++) sv->args[i + 2] = argv[i];
  for (size_t i = 0; i < n; i++) {
    const char *e = environ[i];
    if (!strncmp(e, SUPERVISOR_ENV_WORKER "=", strlen(SUPERVISOR_ENV_WORKER) + 1) ||
        !strncmp(e, SUPERVISOR_ENV_PARENT "=", strlen(SUPERVISOR_ENV_PARENT) + 1) ||
        !strncmp(e, SUPERVISOR_ENV_HTTP_FD "=", strlen(SUPERVISOR_ENV_HTTP_FD) + 1))
      continue;
    sv->env[sv->nenv++] = environ[i];
  }
  return 0;
}

static int catch_signal(struct sv *sv, uv_signal_t *s, uv_signal_cb cb, int signum) {
  s->data = sv;
  return uv_signal_start(s, cb, signum);
}

int supervisor_run(const struct cli_options *o, int argc, char **argv) {
  struct sv sv = {.n = (int)cli_num(o, OPT_PROCESSES), .status = 0};
  int status = 1;
  bool loop_ready = false;
  if (cli_text(o, OPT_INSTANCE)) {
    long long top = cli_num(o, OPT_INSTANCE) * sv.n + sv.n - 1;
    if (top > 999999) {
      fprintf(stderr,
              "luastream: --instance %lld with --processes %d numbers workers up to %lld, above "
              "999999: give a smaller --instance\n",
              cli_num(o, OPT_INSTANCE), sv.n, top);
      return 2;
    }
  }
  sv.w = calloc((size_t)sv.n, sizeof *sv.w);
  if (sv.w == NULL || build_exec(&sv, argc, argv) != 0) {
    fprintf(stderr, "luastream: out of memory\n");
    goto out;
  }
  for (int i = 0; i < sv.n; i++) sv.w[i] = (struct worker){.sv = &sv, .index = i, .listen_fd = -1};
  int rc = uv_loop_init(&sv.loop);
  if (rc != 0) {
    fprintf(stderr, "luastream: cannot create the event loop: %s\n", uv_strerror(rc));
    goto out;
  }
  loop_ready = true;
  if (cli_text(o, OPT_HTTP)) {
    char err[512];
    for (int i = 0; i < sv.n; i++)
      if (worker_socket(&sv.w[i]) != 0) goto out;
    sv.health = health_start(&sv.loop, cli_text(o, OPT_HTTP), sv_live, &sv, err, sizeof err);
    if (sv.health == NULL) {
      fprintf(stderr, "luastream: %s\n", err);
      goto out;
    }
    health_set_defer(sv.health, on_http, &sv);
  }
  if (cli_text(o, OPT_CONSOLE)) {
    char err[512];
    if (cli_trust(o, &sv.trust, stderr) != 0) goto out;
    struct console_config cc = {
        .addr = cli_text(o, OPT_CONSOLE),
        .tokens_path = cli_text(o, OPT_CONSOLE_TOKENS),
        .origin = cli_text(o, OPT_CONSOLE_ORIGIN),
        .url = &o->url,
        .dir = o->pos[0],
        .load_timeout_ms = (uint64_t)cli_num(o, OPT_LOAD_TIMEOUT),
        .trust = &sv.trust,
        .interval_ms = (uint64_t)cli_num(o, OPT_CONSOLE_INTERVAL),
        .host = {.reload = console_reload, .data = &sv},
        .mode = "supervisor",
    };
    if ((sv.console = console_start(&sv.loop, &cc, err, sizeof err)) == NULL) {
      fprintf(stderr, "luastream: %s\n", err);
      goto out;
    }
  }
  uv_signal_init(&sv.loop, &sv.sigterm);
  uv_signal_init(&sv.loop, &sv.sigint);
  uv_signal_init(&sv.loop, &sv.sighup);
  sv.signals = true;
  if (catch_signal(&sv, &sv.sigterm, on_stop_signal, SIGTERM) != 0 ||
      catch_signal(&sv, &sv.sigint, on_stop_signal, SIGINT) != 0 ||
      catch_signal(&sv, &sv.sighup, on_sighup, SIGHUP) != 0) {
    fprintf(stderr, "luastream: cannot handle signals\n");
    goto out;
  }
  for (int i = 0; i < sv.n; i++) {
    uv_timer_init(&sv.loop, &sv.w[i].restart);
    sv.w[i].restart.data = &sv.w[i];
  }
  sv.timers = true;
  char n[16];
  snprintf(n, sizeof n, "%d", sv.n);
  log_line(LOG_INFO, NULL, "supervisor started", LOG_NUMBER "processes", n, NULL);
  for (int i = 0; i < sv.n; i++) start_worker(&sv.w[i]);
  uv_run(&sv.loop, UV_RUN_DEFAULT);
  status = sv.status;
out:
  if (loop_ready) {
    close_all(&sv);
    /* a worker still running here (a failed start-up): stop it and let go */
    for (int i = 0; sv.w && i < sv.n; i++)
      if (sv.w[i].proc) {
        uv_process_kill(sv.w[i].proc, SIGTERM);
        uv_close((uv_handle_t *)sv.w[i].proc, proc_closed);
      }
    uv_run(&sv.loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&sv.loop) != 0) status = 1;
  }
  for (int i = 0; sv.w && i < sv.n; i++)
    if (sv.w[i].listen_fd >= 0) close(sv.w[i].listen_fd);
  free(sv.w);
  free(sv.args);
  free(sv.env);
  return status;
}
