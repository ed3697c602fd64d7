/* luastream: the command line.
 *
 *   luastream run [--redis URL] [--consumer NAME] [--log-level LEVEL] DIR
 *   luastream check DIR
 *   luastream publish [--redis URL] STREAM JSON [--key K] [--header NAME=VALUE]...
 *
 * main builds the loop, clock and broker, hands them to the host and maps
 * signals: the first SIGTERM/SIGINT drains, a second one exits at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "broker.h"
#include "clock.h"
#include "host.h"
#include "log.h"
#include "runtime.h"
#include "url.h"

#ifndef LUASTREAM_VERSION
#define LUASTREAM_VERSION "0.0.0"
#endif

#define DEFAULT_URL "redis://127.0.0.1:6379"
#define PUBLISH_TIMEOUT_MS 10000
#define MAX_HEADERS 64

static const char usage_main[] =
    "usage: luastream <command> [options]\n"
    "\n"
    "Runs Redis Streams consumer groups with handlers written in Lua.\n"
    "\n"
    "commands:\n"
    "  run       run the handlers of a directory\n"
    "  check     load and validate the handlers of a directory without connecting\n"
    "  publish   add one entry to a stream\n"
    "\n"
    "`luastream <command> --help` describes each command. REDIS_URL sets the\n"
    "default server (" DEFAULT_URL " when unset).\n";

static const char usage_run[] =
    "usage: luastream run [--redis URL] [--consumer NAME] [--log-level LEVEL] DIR\n"
    "\n"
    "Runs every handler file (*.lua) of DIR as a subscription: creates missing\n"
    "groups, reads, calls the handlers and applies their outcomes. SIGTERM or\n"
    "SIGINT stops reading, lets running handlers finish and flushes acks.\n"
    "\n"
    "  --redis URL        redis://[[user]:password@]host[:port][/db] or\n"
    "                     unix:///path/to/socket[?db=N] (default: $REDIS_URL)\n"
    "  --consumer NAME    consumer name for handlers that do not set one\n"
    "                     (default: luastream-0, luastream-1, ... in load order)\n"
    "  --log-level LEVEL  debug, info (default), warn or error\n";

static const char usage_check[] =
    "usage: luastream check DIR\n"
    "\n"
    "Loads and validates every handler file of DIR without connecting to Redis.\n"
    "Prints `file:line: message` for each problem and exits 1 if there is any.\n";

static const char usage_publish[] =
    "usage: luastream publish [--redis URL] STREAM JSON [--key K] [--header NAME=VALUE]...\n"
    "\n"
    "Adds one entry to STREAM with JSON as its body (field `data`) and prints the\n"
    "new entry id.\n"
    "\n"
    "  --redis URL            server (default: $REDIS_URL)\n"
    "  --key K                partition key (header partition-key)\n"
    "  --header NAME=VALUE    an extra header; repeatable\n";

struct options {
  const char *redis;
  const char *consumer;
  const char *log_level;
  const char *key;
  const char *headers[MAX_HEADERS];
  int nheaders;
  const char *pos[3];   /* positional arguments */
  int npos;
};

/* Parses argv after the command name. Returns 0, 1 when help or version was
 * printed, -1 on a usage error (already reported). */
static int parse(int argc, char **argv, const char *usage, int max_pos, struct options *o) {
  memset(o, 0, sizeof *o);
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(usage, stdout);
      return 1;
    }
    if (!strcmp(a, "--version")) {
      printf("luastream %s\n", LUASTREAM_VERSION);
      return 1;
    }
    if (a[0] == '-' && a[1] == '-') {
      const char *name = a + 2, *eq = strchr(name, '=');
      size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
      const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
      const char **slot = NULL;
      if (nlen == 5 && !strncmp(name, "redis", 5)) slot = &o->redis;
      else if (nlen == 8 && !strncmp(name, "consumer", 8)) slot = &o->consumer;
      else if (nlen == 9 && !strncmp(name, "log-level", 9)) slot = &o->log_level;
      else if (nlen == 3 && !strncmp(name, "key", 3)) slot = &o->key;
      else if (nlen == 6 && !strncmp(name, "header", 6)) {
        if (o->nheaders == MAX_HEADERS) {
          fprintf(stderr, "luastream: too many --header options (at most %d)\n", MAX_HEADERS);
          return -1;
        }
        slot = &o->headers[o->nheaders++];
      }
      char opt[32];
      snprintf(opt, sizeof opt, "--%.*s ", (int)nlen, name);
      if (slot == NULL || strstr(usage, opt) == NULL) { /* not an option of this command */
        fprintf(stderr, "luastream: unknown option %.*s\n\n%s", (int)(nlen + 2), a, usage);
        return -1;
      }
      if (value == NULL) {
        fprintf(stderr, "luastream: option --%.*s needs a value\n", (int)nlen, name);
        return -1;
      }
      *slot = value;
      continue;
    }
    if (o->npos == max_pos) {
      fprintf(stderr, "luastream: unexpected argument \"%s\"\n\n%s", a, usage);
      return -1;
    }
    o->pos[o->npos++] = a;
  }
  if (o->npos < max_pos) {
    fprintf(stderr, "luastream: missing arguments\n\n%s", usage);
    return -1;
  }
  return 0;
}

static int setup_url(const struct options *o, struct redis_url *url) {
  const char *text = o->redis ? o->redis : getenv("REDIS_URL");
  if (text == NULL || *text == '\0') text = DEFAULT_URL;
  char err[512];
  if (url_parse(text, url, err, sizeof err) != 0) {
    fprintf(stderr, "luastream: %s\n", err);
    return -1;
  }
  return 0;
}

static int setup_log(const struct options *o) {
  if (o->log_level == NULL) return 0;
  int level = log_level_parse(o->log_level);
  if (level < 0) {
    fprintf(stderr, "luastream: --log-level must be debug, info, warn or error\n");
    return -1;
  }
  log_set_level((enum log_level)level);
  return 0;
}

/* Closes every handle left and the loop itself. */
static void close_walk(uv_handle_t *handle, void *arg) {
  (void)arg;
  if (!uv_is_closing(handle)) uv_close(handle, NULL);
}

static int finish_loop(uv_loop_t *loop) {
  uv_run(loop, UV_RUN_DEFAULT);
  uv_walk(loop, close_walk, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  return uv_loop_close(loop);
}

/* ---- run ---- */

struct run_state {
  host *host;
  uv_signal_t sigterm, sigint;
  int signals;
};

static void close_signals(struct run_state *rs) {
  uv_close((uv_handle_t *)&rs->sigterm, NULL);
  uv_close((uv_handle_t *)&rs->sigint, NULL);
}

static void host_stopped(void *data) { close_signals(data); }

static void on_signal(uv_signal_t *sig, int signum) {
  struct run_state *rs = sig->data;
  if (++rs->signals > 1) {
    log_line(LOG_WARN, NULL, "second signal: exiting now", "signal",
             signum == SIGINT ? "SIGINT" : "SIGTERM", NULL);
    exit(1);
  }
  log_line(LOG_INFO, NULL, "signal received", "signal", signum == SIGINT ? "SIGINT" : "SIGTERM",
           NULL);
  host_stop(rs->host);
}

static int cmd_run(int argc, char **argv) {
  struct options o;
  int rc = parse(argc, argv, usage_run, 1, &o);
  if (rc != 0) return rc > 0 ? 0 : 2;
  struct redis_url url;
  if (setup_url(&o, &url) != 0 || setup_log(&o) != 0) return 2;

  uv_loop_t loop;
  uv_loop_init(&loop);
  lclock *clock = clock_uv_new(&loop);
  broker *b = broker_redis_new(&loop, &url);
  struct run_state rs = {0};
  char *problems = NULL;
  rs.host = host_new(o.pos[0], b, clock, o.consumer, &problems);
  if (rs.host == NULL) {
    if (problems) fputs(problems, stderr);
    free(problems);
    log_line(LOG_ERROR, NULL, "handlers failed to load; not starting", "dir", o.pos[0], NULL);
    broker_free(b);
    clock->ops->free(clock);
    finish_loop(&loop);
    return 1;
  }
  uv_signal_init(&loop, &rs.sigterm);
  uv_signal_init(&loop, &rs.sigint);
  rs.sigterm.data = rs.sigint.data = &rs;
  uv_signal_start(&rs.sigterm, on_signal, SIGTERM);
  uv_signal_start(&rs.sigint, on_signal, SIGINT);
  host_start(rs.host, host_stopped, &rs);
  uv_run(&loop, UV_RUN_DEFAULT);
  const char *why = host_failed(rs.host);
  if (why) fputs(why, stderr);
  int status = why ? 1 : 0;
  host_free(rs.host);
  broker_free(b);
  clock->ops->free(clock);
  return finish_loop(&loop) == 0 ? status : 1;
}

/* ---- check ---- */

static int cmd_check(int argc, char **argv) {
  struct options o;
  int rc = parse(argc, argv, usage_check, 1, &o);
  if (rc != 0) return rc > 0 ? 0 : 2;
  int problems = host_check(o.pos[0]);
  if (problems) {
    fprintf(stderr, "%s: %d handler file%s with problems\n", o.pos[0], problems, problems == 1 ? "" : "s");
    return 1;
  }
  printf("%s: every handler file is valid\n", o.pos[0]);
  return 0;
}

/* ---- publish ---- */

struct publish_state {
  broker *b;
  bk_conn *conn;
  struct bk_args args;
  ltimer *timeout;
  int status;      /* exit code */
};

static void publish_finish(struct publish_state *ps) {
  timer_stop(ps->timeout);
  if (ps->conn) bk_conn_close(ps->b, ps->conn);
  ps->conn = NULL;
}

static void publish_done(void *data, const bk_reply *r, const char *err) {
  struct publish_state *ps = data;
  if (r && r->type == BK_STRING) {
    printf("%.*s\n", (int)r->len, r->str);
    ps->status = 0;
  } else {
    fprintf(stderr, "luastream: XADD on %s failed: %s\n", ps->b->name,
            r && r->type == BK_ERROR ? r->str : err ? err : "unexpected reply");
  }
  publish_finish(ps);
}

static void publish_state_cb(void *data, bk_conn *c, int up) {
  struct publish_state *ps = data;
  if (!up || ps->conn != c) return;
  if (bk_command(ps->b, c, ps->args.argc, ps->args.argv, ps->args.argvlen, publish_done, ps) != 0)
    return; /* dropped again: the timeout reports it */
}

static void publish_timeout(ltimer *t, void *data) {
  (void)t;
  struct publish_state *ps = data;
  fprintf(stderr, "luastream: cannot reach %s within %d s\n", ps->b->name,
          PUBLISH_TIMEOUT_MS / 1000);
  publish_finish(ps);
}

static int cmd_publish(int argc, char **argv) {
  struct options o;
  int rc = parse(argc, argv, usage_publish, 2, &o);
  if (rc != 0) return rc > 0 ? 0 : 2;
  struct redis_url url;
  if (setup_url(&o, &url) != 0) return 2;
  log_set_level(LOG_WARN); /* the id is the output; connection chatter is not */
  const char *stream = o.pos[0], *json = o.pos[1];
  char err[256];
  if (!rt_json_valid(json, strlen(json), err, sizeof err)) {
    fprintf(stderr, "luastream: the message is not valid JSON: %s\n", err);
    return 2;
  }
  struct publish_state ps = {.status = 1};
  bk_args_init(&ps.args);
  bk_args_str(&ps.args, "XADD");
  bk_args_str(&ps.args, stream);
  bk_args_str(&ps.args, "*");
  bk_args_str(&ps.args, "data");
  bk_args_str(&ps.args, json);
  if (o.key) {
    bk_args_str(&ps.args, "partition-key");
    bk_args_str(&ps.args, o.key);
  }
  for (int i = 0; i < o.nheaders; i++) {
    const char *eq = strchr(o.headers[i], '=');
    if (eq == NULL || eq == o.headers[i]) {
      fprintf(stderr, "luastream: --header needs NAME=VALUE, got \"%s\"\n", o.headers[i]);
      bk_args_free(&ps.args);
      return 2;
    }
    bk_args_add(&ps.args, o.headers[i], (size_t)(eq - o.headers[i]));
    bk_args_str(&ps.args, eq + 1);
  }

  uv_loop_t loop;
  uv_loop_init(&loop);
  lclock *clock = clock_uv_new(&loop);
  ps.b = broker_redis_new(&loop, &url);
  ps.timeout = timer_new(clock, publish_timeout, &ps);
  timer_start(ps.timeout, PUBLISH_TIMEOUT_MS);
  ps.conn = bk_conn_open(ps.b, "publish", publish_state_cb, &ps);
  uv_run(&loop, UV_RUN_DEFAULT);
  timer_free(ps.timeout);
  broker_free(ps.b);
  clock->ops->free(clock);
  bk_args_free(&ps.args);
  finish_loop(&loop);
  return ps.status;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage_main, stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    fputs(usage_main, stdout);
    return 0;
  }
  if (!strcmp(cmd, "--version")) {
    printf("luastream %s\n", LUASTREAM_VERSION);
    return 0;
  }
  if (!strcmp(cmd, "run")) return cmd_run(argc - 2, argv + 2);
  if (!strcmp(cmd, "check")) return cmd_check(argc - 2, argv + 2);
  if (!strcmp(cmd, "publish")) return cmd_publish(argc - 2, argv + 2);
  fprintf(stderr, "luastream: unknown command \"%s\"\n\n%s", cmd, usage_main);
  return 2;
}
