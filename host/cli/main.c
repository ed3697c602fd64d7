/* luastream: the command line.
 *
 *   luastream run [--redis URL | --redis-file PATH] [--instance N | --consumer NAME]
 *                 [--log-level LEVEL] [--shutdown-timeout DURATION] [--http ADDR:PORT]
 *                 [--no-reload] [--load-timeout DURATION] [--watchdog DURATION] DIR
 *   luastream check [--load-timeout DURATION] DIR
 *   luastream publish [--redis URL | --redis-file PATH] STREAM JSON [--key K] [--header NAME=VALUE]...
 *   luastream dead-letters list [--redis URL | --redis-file PATH] STREAM [--count N]
 *   luastream dead-letters replay [--redis URL | --redis-file PATH] STREAM (--id ID... | --all)
 *
 * main builds the loop, clock and broker, hands them to the host and maps
 * signals: the first SIGTERM/SIGINT drains (within --shutdown-timeout), a
 * second one exits at once. With --http it also serves /healthz and /readyz
 * (health.c) from the host's readiness. Hot reload: a uv_fs_event on DIR
 * (unless --no-reload) asks the host to reload after 200 ms of quiet
 * (host_reload_soon), and a uv_fs_poll on DIR notices when the directory
 * itself goes or is replaced (a deploy), reloads and watches the new one;
 * SIGHUP reloads every handler file at once. The watchdog thread
 * (watchdog.c, --watchdog, always on and shorter than the consumer leases)
 * ends the process with status 70 when the loop stops turning, fed by a
 * timer of the loop and by every handler resume. The
 * other commands that talk to Redis are one-shot clients (struct client):
 * connect, run a few commands, print, exit. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "broker.h"
#include "clock.h"
#include "duration.h"
#include "entry.h"
#include "health.h"
#include "host.h"
#include "lease.h"
#include "log.h"
#include "log_writer.h"
#include "outcome.h"
#include "runtime.h"
#include "scripts.h"
#include "url.h"
#include "watchdog.h"

#ifndef LUASTREAM_VERSION
#define LUASTREAM_VERSION "0.0.0"
#endif

#define DEFAULT_URL "redis://127.0.0.1:6379"
#define CLIENT_TIMEOUT_MS 10000 /* one-shot clients: to connect, then for each reply */
#define MAX_HEADERS 64
#define MAX_IDS 1024
#define LIST_COUNT 100      /* dead-letters list: entries shown by default */
#define REPLAY_BATCH 500    /* dead-letters replay --all: entries per script call */
#define SHUTDOWN_TIMEOUT_MS 30000 /* run: --shutdown-timeout default */
#define LOG_DRAIN_MS 5000       /* run: how long the buffered log may take at exit */
#define LOG_DRAIN_EXIT_MS 200   /* the same after a second signal */
/* run: --watchdog default and most: a handler is started only while the
 * consumer lease stays valid for this long and 2 s more (lease.h). */
#define WATCHDOG_MS LEASE_STALL_MAX_MS
#define WATCHDOG_MAX_MS LEASE_STALL_MAX_MS
#define DIR_POLL_MS 1000          /* run: how often DIR itself is looked at */

static const char usage_main[] =
    "usage: luastream <command> [options]\n"
    "\n"
    "Runs Redis Streams consumer groups with handlers written in Lua.\n"
    "\n"
    "commands:\n"
    "  run            run the handlers of a directory\n"
    "  check          load and validate the handlers of a directory without\n"
    "                 connecting\n"
    "  publish        add one entry to a stream\n"
    "  dead-letters   list the dead letters of a stream (list), or hand them back\n"
    "                 to the group that gave up on them (replay)\n"
    "\n"
    "`luastream <command> --help` describes each command. The server comes from\n"
    "--redis URL, --redis-file PATH or REDIS_URL (" DEFAULT_URL " when none is\n"
    "given). A password in --redis is visible to every user of the machine (ps):\n"
    "put the URL in a file only you can read and pass --redis-file, or set\n"
    "REDIS_URL.\n";

static const char usage_run[] =
    "usage: luastream run [--redis URL | --redis-file PATH]\n"
    "                     [--instance N | --consumer NAME] [--log-level LEVEL]\n"
    "                     [--shutdown-timeout DURATION] [--http ADDR:PORT]\n"
    "                     [--no-reload] [--load-timeout DURATION]\n"
    "                     [--watchdog DURATION] DIR\n"
    "\n"
    "Runs every handler file (*.lua) of DIR as a subscription: creates missing\n"
    "groups, reads, calls the handlers and applies their outcomes. Edited,\n"
    "added and removed handler files are picked up while running (hot reload:\n"
    "a file that fails to load keeps the running version); SIGHUP reloads\n"
    "every handler file. SIGTERM or\n"
    "SIGINT stops reading, lets running handlers finish, flushes acks and\n"
    "exits 0; handlers still running at the shutdown timeout are abandoned\n"
    "(their entries stay pending for another host) and the exit is still 0.\n"
    "A second signal exits at once (status 1).\n"
    "\n"
    "  --redis URL        redis://[[user]:password@]host[:port][/db] or\n"
    "                     unix:///path/to/socket[?db=N] (default: $REDIS_URL);\n"
    "                     a password here shows in ps: prefer --redis-file\n"
    "  --redis-file PATH  read the URL from the first line of PATH (keep it\n"
    "                     readable by this user only)\n"
    "  --instance N       this process's number on this machine, for running\n"
    "                     several (one per core): consumer names become\n"
    "                     HOSTNAME-HANDLER-N (default: $LUASTREAM_INSTANCE; without\n"
    "                     it HOSTNAME-HANDLER, HANDLER being the file name\n"
    "                     without .lua)\n"
    "  --consumer NAME    consumer name for handlers that do not set one\n"
    "                     (instead of the generated names). A name is held by one\n"
    "                     live process at a time: a second process with the same\n"
    "                     name in a group refuses to start\n"
    "  --log-level LEVEL  debug, info (default), warn or error\n"
    "  --shutdown-timeout DURATION\n"
    "                     how long running handlers may take to finish after\n"
    "                     the first signal, with a unit: 500ms, 30s (the\n"
    "                     default), 2m, 1h\n"
    "  --http ADDR:PORT   serve GET /healthz (200 while running) and GET /readyz\n"
    "                     (200 when connected and every subscription reads, at\n"
    "                     least one, else 503 and why) on ADDR:PORT, e.g.\n"
    "                     127.0.0.1:8080;\n"
    "                     port 0 picks a free port (logged)\n"
    "  --no-reload        do not watch DIR for changes (SIGHUP still reloads)\n"
    "  --load-timeout DURATION\n"
    "                     how long a handler file may run when it is loaded\n"
    "                     (at start-up and on reload; default 5s): longer is\n"
    "                     a load error naming the file\n"
    "  --watchdog DURATION\n"
    "                     when the event loop has not turned for this long (a\n"
    "                     handler that never yields), log which handler and\n"
    "                     entry were running and exit with status 70 (default\n"
    "                     and most 10s, so that a stalled process ends before\n"
    "                     its consumer leases can expire; keep it above\n"
    "                     --load-timeout; it cannot be off)\n"
    "\n"
    "Handler files are code: they run with this process's rights and\n"
    "environment (docs/handlers.md says what is contained).\n";

static const char usage_check[] =
    "usage: luastream check [--load-timeout DURATION] DIR\n"
    "\n"
    "Loads and validates every handler file of DIR without connecting to Redis.\n"
    "Prints `file:line: message` for each problem and exits 1 if there is any.\n"
    "Loading runs each file's top-level code (with the rights of this process):\n"
    "check only what you would run.\n"
    "\n"
    "  --load-timeout DURATION  how long one file may run at load (default 5s)\n";

static const char usage_publish[] =
    "usage: luastream publish [--redis URL | --redis-file PATH] STREAM JSON [--key K]\n"
    "                         [--header NAME=VALUE]...\n"
    "\n"
    "Adds one entry to STREAM with JSON as its body (field `data`) and prints the\n"
    "new entry id.\n"
    "\n"
    "  --redis URL            server (default: $REDIS_URL)\n"
    "  --redis-file PATH      read the server's URL from the first line of PATH\n"
    "  --key K                partition key (header partition-key)\n"
    "  --header NAME=VALUE    an extra header; repeatable\n";

static const char usage_dead_letters[] =
    "usage: luastream dead-letters list [--redis URL | --redis-file PATH] STREAM [--count N]\n"
    "       luastream dead-letters replay [--redis URL | --redis-file PATH] STREAM\n"
    "                                     (--id ID | --all)\n"
    "\n"
    "A handler with dead_letter = \"STREAM\" moves the entries it rejects, cannot\n"
    "decode or gives up on (max_deliveries) to STREAM, each with where it came\n"
    "from and why (the dead-letter-* fields).\n"
    "\n"
    "  list     prints the dead letters of STREAM, oldest first\n"
    "  replay   puts dead letters back for their group (its retry stream)\n"
    "\n"
    "`luastream dead-letters list --help` and `... replay --help` say more.\n";

static const char usage_dl_list[] =
    "usage: luastream dead-letters list [--redis URL | --redis-file PATH] STREAM [--count N]\n"
    "\n"
    "Prints the dead letters of STREAM, oldest first: for each, its id, where it\n"
    "came from (source stream, group, original id, handler), why (reason,\n"
    "error), how often it was delivered, when it was dead-lettered (UTC), its\n"
    "other headers and its body.\n"
    "\n"
    "  --redis URL   server (default: $REDIS_URL)\n"
    "  --redis-file PATH\n"
    "                read the server's URL from the first line of PATH\n"
    "  --count N     show at most N entries (default 100)\n";

static const char usage_dl_replay[] =
    "usage: luastream dead-letters replay [--redis URL | --redis-file PATH] STREAM\n"
    "                                     (--id ID | --all)\n"
    "\n"
    "Puts dead letters of STREAM back for the group that dead-lettered them: on\n"
    "the retry stream SOURCE:retry:GROUP of the source stream and group luastream\n"
    "recorded in each (never on the source stream, so the stream's other groups\n"
    "never see them), as new entries with their body and headers but without the\n"
    "dead-letter-* fields, so their delivery count starts afresh. An entry without\n"
    "that provenance is refused. Each entry is added there and deleted from STREAM\n"
    "in one server-side script, so it is never on both streams nor on neither.\n"
    "Prints `ID -> RETRY-STREAM NEW-ID` per entry and a count.\n"
    "\n"
    "  --redis URL   server (default: $REDIS_URL)\n"
    "  --redis-file PATH\n"
    "                read the server's URL from the first line of PATH\n"
    "  --id ID       the dead letter with this id; repeatable. Nothing is replayed\n"
    "                if one of them is missing or not a dead letter.\n"
    "  --all         every dead letter on STREAM when the command starts (in\n"
    "                batches of 500; entries that are not dead letters stay)\n";

struct options {
  const char *redis;
  const char *redis_file;
  const char *consumer;
  const char *instance;
  const char *log_level;
  const char *shutdown_timeout;
  const char *http;
  const char *load_timeout;
  const char *watchdog;
  const char *key;
  const char *count;
  const char *headers[MAX_HEADERS];
  int nheaders;
  const char *ids[MAX_IDS];
  int nids;
  bool all;
  bool no_reload;
  const char *pos[3];   /* positional arguments */
  int npos;
};

/* Finds option `name` (nlen bytes): *slot for one with a value, *flag for
 * one without; both NULL when luastream has no such option. Returns -1 when a
 * repeatable option was given too often (reported). */
static int option_slot(struct options *o, const char *name, size_t nlen, const char ***slot,
                       bool **flag) {
#define IS(lit) (nlen == sizeof lit - 1 && !strncmp(name, lit, nlen))
  *slot = NULL;
  *flag = NULL;
  if (IS("redis")) *slot = &o->redis;
  else if (IS("redis-file")) *slot = &o->redis_file;
  else if (IS("consumer")) *slot = &o->consumer;
  else if (IS("instance")) *slot = &o->instance;
  else if (IS("log-level")) *slot = &o->log_level;
  else if (IS("shutdown-timeout")) *slot = &o->shutdown_timeout;
  else if (IS("http")) *slot = &o->http;
  else if (IS("load-timeout")) *slot = &o->load_timeout;
  else if (IS("watchdog")) *slot = &o->watchdog;
  else if (IS("key")) *slot = &o->key;
  else if (IS("count")) *slot = &o->count;
  else if (IS("all")) *flag = &o->all;
  else if (IS("no-reload")) *flag = &o->no_reload;
  else if (IS("header") || IS("id")) {
    bool header = IS("header");
    int *n = header ? &o->nheaders : &o->nids, max = header ? MAX_HEADERS : MAX_IDS;
    if (*n == max) {
      fprintf(stderr, "luastream: too many --%.*s options (at most %d)\n", (int)nlen, name, max);
      return -1;
    }
    *slot = header ? &o->headers[(*n)++] : &o->ids[(*n)++];
  }
  return 0;
#undef IS
}

/* Parses argv after the command name. Returns 0, 1 when help or version was
 * printed, -1 on a usage error (already reported). An option is accepted when
 * the command's usage text lists it ("--name " in usage). */
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
      const char **slot;
      bool *flag;
      if (option_slot(o, name, nlen, &slot, &flag) != 0) return -1;
      char opt[40];
      snprintf(opt, sizeof opt, "--%.*s ", (int)nlen, name);
      if ((slot == NULL && flag == NULL) || strstr(usage, opt) == NULL) {
        /* not an option of this command */
        fprintf(stderr, "luastream: unknown option %.*s\n\n%s", (int)(nlen + 2), a, usage);
        return -1;
      }
      if (flag) {
        if (eq) {
          fprintf(stderr, "luastream: option --%.*s takes no value\n", (int)nlen, name);
          return -1;
        }
        *flag = true;
        continue;
      }
      const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
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

/* The first line of path, trailing blanks and line end stripped, into buf.
 * Returns 0, or -1 (reported). Warns when others may read the file. */
static int read_url_file(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "luastream: --redis-file %s: cannot read it: %s\n", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)))
    fprintf(stderr,
            "luastream: warning: --redis-file %s can be read by %s (mode %03o): "
            "chmod 600 it\n",
            path, (st.st_mode & S_IROTH) ? "every user" : "its group",
            (unsigned)(st.st_mode & 0777));
  bool got = fgets(buf, (int)len, f) != NULL;
  bool error = ferror(f) != 0;
  fclose(f);
  if (error) {
    fprintf(stderr, "luastream: --redis-file %s: cannot read it\n", path);
    return -1;
  }
  size_t n = got ? strlen(buf) : 0;
  if (n == len - 1 && buf[n - 1] != '\n') {
    fprintf(stderr, "luastream: --redis-file %s: the first line is longer than %zu bytes\n", path,
            len - 2);
    return -1;
  }
  while (n > 0 && strchr(" \t\r\n", buf[n - 1])) buf[--n] = '\0';
  if (n == 0) {
    fprintf(stderr,
            "luastream: --redis-file %s: the first line is empty: write the URL there, "
            "e.g. redis://:PASSWORD@127.0.0.1:6379\n",
            path);
    return -1;
  }
  return 0;
}

/* The server: --redis, --redis-file, $REDIS_URL or the default. An empty
 * value is an error, never a silent default. */
static int setup_url(const struct options *o, struct redis_url *url) {
  char file[URL_TEXT_MAX + 2], from[64 + 1024];
  const char *text = DEFAULT_URL;
  snprintf(from, sizeof from, "the default server");
  if (o->redis && o->redis_file) {
    fprintf(stderr, "luastream: give --redis or --redis-file, not both\n");
    return -1;
  }
  if (o->redis) {
    text = o->redis;
    snprintf(from, sizeof from, "--redis");
  } else if (o->redis_file) {
    if (read_url_file(o->redis_file, file, sizeof file) != 0) return -1;
    text = file;
    snprintf(from, sizeof from, "--redis-file %s", o->redis_file);
  } else if (getenv("REDIS_URL")) {
    text = getenv("REDIS_URL");
    snprintf(from, sizeof from, "REDIS_URL");
  }
  if (text[0] == '\0') {
    fprintf(stderr,
            "luastream: %s is empty: give a URL such as redis://127.0.0.1:6379%s\n", from,
            strcmp(from, "REDIS_URL") ? "" : ", or unset it for " DEFAULT_URL);
    return -1;
  }
  char err[512];
  int rc = url_parse(text, url, err, sizeof err);
  memset(file, 0, sizeof file); /* held a password, maybe */
  if (rc != 0) {
    fprintf(stderr, "luastream: %s: %s\n", from, err);
    return -1;
  }
  if (o->redis && url->password[0])
    fprintf(stderr, "luastream: warning: the password in --redis can be seen by every user of "
                    "this machine (ps): use --redis-file PATH or REDIS_URL instead\n");
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

/* --NAME TEXT as a duration in ms (duration.h: text needs a unit); reports
 * and returns -1 when it is not one. */
static int option_duration(const char *name, const char *text, uint64_t *ms) {
  char why[160];
  double v;
  if (duration_parse(text, strlen(text), &v, why, sizeof why) == 0) {
    *ms = (uint64_t)v;
    return 0;
  }
  size_t digits = strspn(text, "0123456789");
  if (digits > 0 && text[digits] == '\0')
    fprintf(stderr, "luastream: --%s %s: add a unit, e.g. %ss (or %sms, %sm, %sh)\n", name, text,
            text, text, text, text);
  else
    fprintf(stderr, "luastream: --%s \"%s\" %s\n", name, text, why);
  return -1;
}

/* --watchdog: a duration from 1 ms to WATCHDOG_MAX_MS into *ms (unchanged
 * when not given); -1 when it is not one, or off (reported). */
static int parse_watchdog(const char *text, uint64_t *ms) {
  if (text == NULL) return 0;
  const bool off = strcmp(text, "off") == 0;
  if (!off && option_duration("watchdog", text, ms) != 0) return -1;
  if (off || *ms == 0) {
    fprintf(stderr,
            "luastream: --watchdog cannot be off: a loop stalled for longer than the consumer lease's "
            "time to live (%ds) lets another process take this process's consumer names and run "
            "the same entries while this one still runs; give a limit of at most %ds\n",
            LEASE_TTL_MS / 1000, WATCHDOG_MAX_MS / 1000);
    return -1;
  }
  if (*ms > WATCHDOG_MAX_MS) {
    fprintf(stderr,
            "luastream: --watchdog must be at most %ds, got %s: consumer names are leased for %ds "
            "and renewed every %ds, so a loop stalled for longer can outlive a lease, and another "
            "process can take the name and run the same entries while this one still runs\n",
            WATCHDOG_MAX_MS / 1000, text, LEASE_TTL_MS / 1000, LEASE_RENEW_MS / 1000);
    return -1;
  }
  return 0;
}

/* --load-timeout: a duration above 0 into *ms (unchanged when not given);
 * -1 when it is not one (reported). */
static int parse_load_timeout(const char *text, uint64_t *ms) {
  if (text == NULL) return 0;
  if (option_duration("load-timeout", text, ms) != 0) return -1;
  if (*ms == 0) {
    fprintf(stderr, "luastream: --load-timeout needs a duration above 0 such as 5s or 500ms\n");
    return -1;
  }
  return 0;
}

struct run_state {
  host *host;
  health *health;           /* --http, else NULL */
  uv_signal_t sigterm, sigint, sighup;
  const char *dir;
  uv_fs_event_t watch;      /* DIR, unless --no-reload */
  uv_fs_poll_t dir_poll;    /* DIR itself: gone, back or replaced */
  bool dir_missing;         /* the last stat of DIR failed */
  bool watching;
  uv_timer_t beat;          /* feeds the watchdog (unless it could not start) */
  bool beating;
  int signals;
  uint64_t shutdown_ms;     /* --shutdown-timeout */
};

static void close_signals(struct run_state *rs) {
  uv_close((uv_handle_t *)&rs->sigterm, NULL);
  uv_close((uv_handle_t *)&rs->sigint, NULL);
  uv_close((uv_handle_t *)&rs->sighup, NULL);
  if (rs->watching) {
    uv_close((uv_handle_t *)&rs->watch, NULL);
    uv_close((uv_handle_t *)&rs->dir_poll, NULL);
  }
  rs->watching = false;
  if (rs->beating) uv_close((uv_handle_t *)&rs->beat, NULL);
  rs->beating = false;
}

/* Something changed in DIR: reload once it has been quiet a while (editors
 * write a file in several steps). */
static void on_dir_change(uv_fs_event_t *w, const char *file, int events, int status) {
  (void)file, (void)events;
  struct run_state *rs = w->data;
  if (status < 0) {
    log_line(LOG_WARN, NULL, "watching the handler directory failed", "error", uv_strerror(status),
             NULL);
    return;
  }
  host_reload_soon(rs->host);
}

/* (Re)starts the uv_fs_event on DIR: after the directory was deleted and
 * made again (or replaced by a rename), the old watch follows the old inode
 * and never fires again. loudly: say so in the log. */
static void watch_dir(struct run_state *rs, bool again, bool loudly) {
  if (again) uv_fs_event_stop(&rs->watch);
  int rc = uv_fs_event_start(&rs->watch, on_dir_change, rs->dir, 0);
  if (rc < 0)
    log_line(LOG_WARN, NULL, "cannot watch the handler directory: reload with SIGHUP", "dir",
             rs->dir, "error", uv_strerror(rc), NULL);
  else if (loudly)
    log_line(LOG_INFO, NULL, "watching the handler directory again", "dir", rs->dir, NULL);
}

/* DIR's own stat changed: it went (the reload stops its subscriptions), came
 * back, was replaced, or its entries changed. A new directory can reuse the
 * old one's inode number, so the watch is made anew on every change (cheap,
 * and the reload that follows sees whatever happened in between). */
static void on_dir_stat(uv_fs_poll_t *p, int status, const uv_stat_t *prev, const uv_stat_t *curr) {
  struct run_state *rs = p->data;
  if (status < 0) {
    rs->dir_missing = true;
  } else {
    bool other = rs->dir_missing || prev->st_ino != curr->st_ino || prev->st_dev != curr->st_dev;
    rs->dir_missing = false;
    watch_dir(rs, true, other);
  }
  host_reload_soon(rs->host);
}

static void on_beat(uv_timer_t *t) {
  (void)t;
  watchdog_beat();
}

static void on_sighup(uv_signal_t *sig, int signum) {
  (void)signum;
  struct run_state *rs = sig->data;
  log_line(LOG_INFO, NULL, "signal received: reloading every handler", "signal", "SIGHUP", NULL);
  host_reload(rs->host, true);
}

/* The host has stopped: nothing may keep the loop running any more. */
static void host_stopped(void *data) {
  struct run_state *rs = data;
  watchdog_stop(); /* before its timer goes: nothing feeds it from here on */
  close_signals(rs);
  health_close(rs->health);
  rs->health = NULL;
}

static bool run_ready(void *data, char *why, size_t len) {
  return host_is_ready(((struct run_state *)data)->host, why, len);
}

static void on_signal(uv_signal_t *sig, int signum) {
  struct run_state *rs = sig->data;
  if (++rs->signals > 1) {
    log_line(LOG_WARN, NULL, "second signal: exiting now", "signal",
             signum == SIGINT ? "SIGINT" : "SIGTERM", NULL);
    /* At once: no atexit handlers (a leak check would report the Lua states
     * still open), only a moment for the log lines still buffered. Entries
     * not acked stay pending in Redis. */
    log_writer_stop(LOG_DRAIN_EXIT_MS);
    _exit(1);
  }
  log_line(LOG_INFO, NULL, "signal received", "signal", signum == SIGINT ? "SIGINT" : "SIGTERM",
           NULL);
  host_stop_within(rs->host, rs->shutdown_ms);
}

#define INSTANCE_MAX 999999

/* --instance N / LUASTREAM_INSTANCE: digits only, 0 .. INSTANCE_MAX. */
static int parse_instance(const char *text, int *out) {
  if (*text == '\0' || strlen(text) > 6) return -1;
  for (const char *p = text; *p; p++)
    if (*p < '0' || *p > '9') return -1;
  *out = atoi(text);
  return 0;
}

static int cmd_run(int argc, char **argv) {
  struct options o;
  int rc = parse(argc, argv, usage_run, 1, &o);
  if (rc != 0) return rc > 0 ? 0 : 2;
  struct redis_url url;
  if (setup_url(&o, &url) != 0 || setup_log(&o) != 0) return 2;
  int instance = -1;
  if (o.consumer && o.consumer[0] == '\0') {
    fprintf(stderr, "luastream: --consumer needs a non-empty name\n");
    return 2;
  }
  if (o.consumer && o.instance) {
    fprintf(stderr, "luastream: --instance numbers generated consumer names; with --consumer NAME "
                    "give each process its own NAME instead\n");
    return 2;
  }
  const char *inst = o.instance ? o.instance : o.consumer ? NULL : getenv("LUASTREAM_INSTANCE");
  if (inst && parse_instance(inst, &instance) != 0) {
    fprintf(stderr, "luastream: %s needs a number from 0 to %d, got \"%s\"\n",
            o.instance ? "--instance" : "LUASTREAM_INSTANCE", INSTANCE_MAX, inst);
    return 2;
  }
  uint64_t shutdown_ms = SHUTDOWN_TIMEOUT_MS;
  if (o.shutdown_timeout && option_duration("shutdown-timeout", o.shutdown_timeout, &shutdown_ms))
    return 2;
  uint64_t load_ms = RT_LOAD_TIMEOUT_MS, watchdog_ms = WATCHDOG_MS;
  if (parse_load_timeout(o.load_timeout, &load_ms) != 0) return 2;
  if (parse_watchdog(o.watchdog, &watchdog_ms) != 0) return 2;
  /* A reload runs on the loop: its limit must come before the watchdog's.
   * Without --load-timeout a short watchdog shortens it to half its own. */
  if (o.load_timeout == NULL && load_ms >= watchdog_ms) load_ms = watchdog_ms / 2;
  if (load_ms >= watchdog_ms) {
    fprintf(stderr, "luastream: --load-timeout (%llums) must be below --watchdog (%llums)\n",
            (unsigned long long)load_ms, (unsigned long long)watchdog_ms);
    return 2;
  }
  char err[512];
  char host_part[256];
  int port;
  if (o.http && health_parse_addr(o.http, host_part, sizeof host_part, &port, err, sizeof err)) {
    fprintf(stderr, "luastream: %s\n", err);
    return 2;
  }

  uv_loop_t loop;
  uv_loop_init(&loop);
  lclock *clock = clock_uv_new(&loop);
  log_set_clock(clock); /* time= from the host's clock */
  broker *b = broker_redis_new(&loop, &url);
  struct run_state rs = {.shutdown_ms = shutdown_ms, .dir = o.pos[0]};
  char *problems = NULL;
  struct host_names names = {.consumer = o.consumer, .instance = instance};
  rs.host = host_new(o.pos[0], b, clock, &names, load_ms, &problems);
  if (rs.host == NULL) {
    if (problems) fputs(problems, stderr);
    free(problems);
    log_line(LOG_ERROR, NULL, "handlers failed to load; not starting", "dir", o.pos[0], NULL);
    broker_free(b);
    clock->ops->free(clock);
    finish_loop(&loop);
    return 1;
  }
  if (o.http && (rs.health = health_start(&loop, o.http, run_ready, &rs, err, sizeof err)) == NULL) {
    fprintf(stderr, "luastream: %s\n", err);
    host_free(rs.host);
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
  uv_signal_init(&loop, &rs.sighup);
  rs.sighup.data = &rs;
  uv_signal_start(&rs.sighup, on_sighup, SIGHUP);
  if (!o.no_reload) {
    uv_fs_event_init(&loop, &rs.watch);
    uv_fs_poll_init(&loop, &rs.dir_poll);
    rs.watch.data = rs.dir_poll.data = &rs;
    rs.watching = true;
    watch_dir(&rs, false, false);
    uv_fs_poll_start(&rs.dir_poll, on_dir_stat, o.pos[0], DIR_POLL_MS);
  }
  if (watchdog_ms > 0) {
    if (watchdog_start(watchdog_ms, err, sizeof err) != 0) {
      /* Without it a stalled loop could outlive the consumer leases. */
      fprintf(stderr, "luastream: cannot start the watchdog: %s\n", err);
      if (rs.health) health_close(rs.health);
      host_free(rs.host);
      broker_free(b);
      clock->ops->free(clock);
      finish_loop(&loop);
      return 1;
    } else {
      /* Unreferenced: it feeds the watchdog but keeps no loop alive. */
      uv_timer_init(&loop, &rs.beat);
      uv_timer_start(&rs.beat, on_beat, watchdog_interval_ms(), watchdog_interval_ms());
      uv_unref((uv_handle_t *)&rs.beat);
      rs.beating = true;
    }
  }
  host_start(rs.host, host_stopped, &rs);
  uv_run(&loop, UV_RUN_DEFAULT);
  watchdog_stop();
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
  uint64_t load_ms = RT_LOAD_TIMEOUT_MS;
  if (parse_load_timeout(o.load_timeout, &load_ms) != 0) return 2;
  int problems = host_check(o.pos[0], load_ms);
  if (problems) {
    fprintf(stderr, "%s: %d handler file%s with problems\n", o.pos[0], problems, problems == 1 ? "" : "s");
    return 1;
  }
  printf("%s: every handler file is valid\n", o.pos[0]);
  return 0;
}

/* ---- one-shot clients: connect, run a few commands, exit ---- */

struct client;
/* Called once, when the connection is first up: sends the first command(s). */
typedef void client_start_fn(struct client *c);

struct client {
  broker *b;
  bk_conn *conn;
  ltimer *timeout;          /* to connect, then for each reply */
  client_start_fn *start;
  void *data;               /* the command's own state */
  bool started;             /* start has run */
  bool finished;            /* client_done has run: replies still arriving are ignored */
  int status;               /* the exit code */
};

/* Ends the session: the loop then runs out of work and client_run returns
 * status. Safe inside any callback of the client. */
static void client_done(struct client *c, int status) {
  if (c->finished) return;
  c->finished = true;
  c->status = status;
  timer_stop(c->timeout);
  if (c->conn) {
    bk_conn *conn = c->conn;
    c->conn = NULL;
    bk_conn_close(c->b, conn); /* pending callbacks fire now, and see finished */
  }
}

/* Sends one command; cb gets the reply (data = the client). Commands on the
 * connection go out and come back in order. Returns 0, or -1 when the
 * connection is gone (reported; the session has ended with status 1). */
static int client_send(struct client *c, const struct bk_args *a, bk_reply_cb *cb) {
  if (c->finished) return -1;
  if (bk_command(c->b, c->conn, a->argc, a->argv, a->argvlen, cb, c) != 0) {
    fprintf(stderr, "luastream: lost the connection to %s\n", c->b->name);
    client_done(c, 1);
    return -1;
  }
  timer_start(c->timeout, CLIENT_TIMEOUT_MS);
  return 0;
}

/* The error text of a failed reply: the server's message, or why no reply
 * came. NULL when r is a reply of another type than an error. */
static const char *client_error(const bk_reply *r, const char *err) {
  if (r == NULL) return err ? err : "no reply";
  return r->type == BK_ERROR ? r->str : NULL;
}

static void client_state(void *data, bk_conn *conn, int up) {
  struct client *c = data;
  if (!up || c->started || c->finished || conn != c->conn) return;
  c->started = true;
  c->start(c);
}

/* A one-shot command does not wait for a server that refused it or is not
 * there: the first failed attempt ends it (a person is waiting). */
static void client_fault(void *data, bk_conn *conn, enum bk_fault fault, const char *why) {
  struct client *c = data;
  if (c->started || c->finished || conn != c->conn || fault == BK_FAULT_NONE) return;
  fprintf(stderr, "luastream: cannot %s %s: %s\n",
          fault == BK_FAULT_DENIED ? "use" : "reach", c->b->name, why);
  client_done(c, 1);
}

static void client_timeout(ltimer *t, void *data) {
  (void)t;
  struct client *c = data;
  if (c->started)
    fprintf(stderr, "luastream: no reply from %s within %d s\n", c->b->name,
            CLIENT_TIMEOUT_MS / 1000);
  else
    fprintf(stderr, "luastream: cannot reach %s within %d s\n", c->b->name,
            CLIENT_TIMEOUT_MS / 1000);
  client_done(c, 1);
}

static void drop_log_line(void *data, enum log_level level, const char *line, size_t len) {
  (void)data, (void)level, (void)line, (void)len;
}

/* Connects to url, calls start once connected and runs until client_done.
 * Returns the status client_done was given (1 on a timeout). */
static int client_run(const struct redis_url *url, const char *name, client_start_fn *start,
                      void *data) {
  /* The output is the result, and every failure is said once on stderr by
   * the command itself; the broker's log lines would say it again. */
  log_set_sink(drop_log_line, NULL);
  uv_loop_t loop;
  uv_loop_init(&loop);
  lclock *clock = clock_uv_new(&loop);
  struct client c = {.start = start, .data = data, .status = 1};
  c.b = broker_redis_new(&loop, url);
  c.timeout = timer_new(clock, client_timeout, &c);
  timer_start(c.timeout, CLIENT_TIMEOUT_MS);
  c.conn = bk_conn_open(c.b, name, client_state, &c);
  if (c.conn) bk_conn_on_fault(c.b, c.conn, client_fault);
  uv_run(&loop, UV_RUN_DEFAULT);
  client_done(&c, c.status); /* the loop ended without it: nothing left to wait for */
  timer_free(c.timeout);
  broker_free(c.b);
  clock->ops->free(clock);
  finish_loop(&loop);
  return c.status;
}

/* ---- publish ---- */

static void publish_done(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  if (c->finished) return;
  if (r && r->type == BK_STRING) {
    printf("%.*s\n", (int)r->len, r->str);
    client_done(c, 0);
    return;
  }
  const char *why = client_error(r, err);
  const struct bk_args *a = c->data; /* XADD stream ... */
  fprintf(stderr, "luastream: XADD %s on %s failed: %s\n", a->argv[1], c->b->name,
          why ? why : "unexpected reply");
  client_done(c, 1);
}

static void publish_start(struct client *c) { client_send(c, c->data, publish_done); }

/* A header luastream writes itself, or the body: a producer who sets one
 * would forge what luastream records (a delivery count, a dead letter's
 * origin) or lose the body. NULL when name is free to use, else why not. */
static const char *reserved_header(const char *name, size_t len) {
  static const char *const own[] = {HDR_DATA,        HDR_DELIVERY_COUNT, HDR_IDLE_MS,
                                    HDR_RETRY_GROUP, HDR_ORIGINAL_ID,    "handler-version"};
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
    if (strlen(own[i]) == len && strncasecmp(name, own[i], len) == 0)
      return i == 0 ? "the body's field: the JSON argument is the body"
                    : "luastream writes it itself";
  if (strlen(HDR_PARTITION_KEY) == len && strncasecmp(name, HDR_PARTITION_KEY, len) == 0)
    return "set it with --key";
  if (len >= 12 && strncasecmp(name, "dead-letter-", 12) == 0)
    return "luastream writes the dead-letter-* headers itself";
  return NULL;
}

static int cmd_publish(int argc, char **argv) {
  struct options o;
  int rc = parse(argc, argv, usage_publish, 2, &o);
  if (rc != 0) return rc > 0 ? 0 : 2;
  struct redis_url url;
  if (setup_url(&o, &url) != 0) return 2;
  const char *stream = o.pos[0], *json = o.pos[1];
  char err[256];
  if (!rt_json_valid(json, strlen(json), err, sizeof err)) {
    fprintf(stderr, "luastream: the message is not valid JSON: %s\n", err);
    return 2;
  }
  struct bk_args args;
  bk_args_init(&args);
  bk_args_str(&args, "XADD");
  bk_args_str(&args, stream);
  bk_args_str(&args, "*");
  bk_args_str(&args, "data");
  bk_args_str(&args, json);
  if (o.key) {
    bk_args_str(&args, "partition-key");
    bk_args_str(&args, o.key);
  }
  for (int i = 0; i < o.nheaders; i++) {
    const char *eq = strchr(o.headers[i], '=');
    if (eq == NULL || eq == o.headers[i]) {
      fprintf(stderr, "luastream: --header needs NAME=VALUE, got \"%s\"\n", o.headers[i]);
      bk_args_free(&args);
      return 2;
    }
    const char *why = reserved_header(o.headers[i], (size_t)(eq - o.headers[i]));
    if (why) {
      fprintf(stderr, "luastream: --header %.*s: a reserved header name (%s)\n",
              (int)(eq - o.headers[i]), o.headers[i], why);
      bk_args_free(&args);
      return 2;
    }
    bk_args_add(&args, o.headers[i], (size_t)(eq - o.headers[i]));
    bk_args_str(&args, eq + 1);
  }
  int status = client_run(&url, "publish", publish_start, &args);
  bk_args_free(&args);
  return status;
}

/* ---- dead-letters ---- */

/* Writes n bytes of s for a person to read: control characters (but tab) as
 * \xNN, and each line after the first indented by `indent` spaces. Trailing
 * newlines are dropped. */
static void put_text(const char *s, size_t n, int indent) {
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r')) n--;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '\n')
      printf("\n%*s", indent, "");
    else if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
      printf("\\x%02x", ch);
    else
      putchar(ch);
  }
}

#define LABEL_WIDTH 13 /* "original id" and two spaces */

static void put_line(const char *label, const char *s, size_t n) {
  printf("  %-*s", LABEL_WIDTH, label);
  put_text(s, n, LABEL_WIDTH + 2);
  putchar('\n');
}

/* dead-letter-time (Unix ms) as ISO-8601 UTC; false when it is not a number. */
static bool iso_time(const char *s, size_t n, char *out, size_t outlen) {
  char *end;
  char buf[32];
  if (n == 0 || n >= sizeof buf) return false;
  memcpy(buf, s, n);
  buf[n] = '\0';
  long long ms = strtoll(buf, &end, 10);
  if (*end != '\0' || ms < 0) return false;
  time_t secs = (time_t)(ms / 1000);
  struct tm tm;
  if (gmtime_r(&secs, &tm) == NULL) return false;
  size_t len = strftime(out, outlen, "%Y-%m-%dT%H:%M:%S", &tm);
  if (len == 0) return false;
  snprintf(out + len, outlen - len, ".%03dZ", (int)(ms % 1000));
  return true;
}

static const bk_reply *field_value(const bk_reply *fields, const char *name) {
  size_t len = strlen(name);
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    const bk_reply *k = fields->element[i];
    if (k->type == BK_STRING && k->len == len && memcmp(k->str, name, len) == 0)
      return fields->element[i + 1];
  }
  return NULL;
}

/* One entry of XRANGE as a block: its id, the provenance in a fixed order,
 * the other headers, the body. */
static void print_dead_letter(const bk_reply *e) {
  static const struct {
    const char *field, *label;
  } provenance[] = {
      {HDR_DL_STREAM, "source"},         {HDR_DL_GROUP, "group"},
      {HDR_DL_ID, "original id"},        {HDR_DL_DELIVERIES, "deliveries"},
      {HDR_DL_HANDLER, "handler"},       {HDR_DL_REASON, "reason"},
      {HDR_DL_ERROR, "error"},           {HDR_DL_TIME, "time"},
  };
  const bk_reply *id = e->element[0], *fields = e->element[1];
  printf("dead letter %.*s\n", (int)id->len, id->str);
  if (field_value(fields, HDR_DL_STREAM) == NULL)
    printf("  (no %s field: not a dead letter luastream wrote)\n", HDR_DL_STREAM);
  for (size_t p = 0; p < sizeof provenance / sizeof provenance[0]; p++) {
    const bk_reply *v = field_value(fields, provenance[p].field);
    if (v == NULL || v->type != BK_STRING || v->len == 0) continue;
    char when[48];
    if (!strcmp(provenance[p].field, HDR_DL_TIME) && iso_time(v->str, v->len, when, sizeof when))
      put_line("time", when, strlen(when));
    else
      put_line(provenance[p].label, v->str, v->len);
  }
  const bk_reply *data = NULL;
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    const bk_reply *k = fields->element[i], *v = fields->element[i + 1];
    if (k->len == strlen(HDR_DATA) && !memcmp(k->str, HDR_DATA, k->len)) {
      data = v;
      continue;
    }
    if (k->len >= 12 && !memcmp(k->str, "dead-letter-", 12)) continue;
    printf("  %-*s", LABEL_WIDTH, "header");
    put_text(k->str, k->len, LABEL_WIDTH + 2);
    printf(": ");
    put_text(v->str, v->len, LABEL_WIDTH + 2);
    putchar('\n');
  }
  if (data) put_line("data", data->str, data->len);
}

/* An XRANGE reply: [[id, [field, value, ...]], ...]. */
static bool is_range(const bk_reply *r) {
  if (r == NULL || r->type != BK_ARRAY) return false;
  for (size_t i = 0; i < r->elements; i++) {
    const bk_reply *e = r->element[i];
    if (e->type != BK_ARRAY || e->elements != 2 || e->element[0]->type != BK_STRING ||
        e->element[1]->type != BK_ARRAY)
      return false;
    for (size_t j = 0; j < e->element[1]->elements; j++)
      if (e->element[1]->element[j]->type != BK_STRING) return false;
  }
  return true;
}

/* TYPE's answer for a dead-letter stream: true when it is one; else says
 * why not (missing, another type) and ends the session with status 1. */
static bool dl_stream_exists(struct client *c, const char *stream, const bk_reply *r,
                             const char *err) {
  const char *why = client_error(r, err);
  if (why == NULL && (r->type == BK_STATUS || r->type == BK_STRING)) {
    if (r->len == 6 && !memcmp(r->str, "stream", 6)) return true;
    if (r->len == 4 && !memcmp(r->str, "none", 4))
      fprintf(stderr, "luastream: stream %s does not exist on %s (check the name: a handler's "
                      "dead_letter stream is made by its first dead letter)\n",
              stream, c->b->name);
    else
      fprintf(stderr, "luastream: %s on %s is a %.*s, not a stream\n", stream, c->b->name,
              (int)r->len, r->str);
  } else {
    fprintf(stderr, "luastream: cannot read %s on %s: TYPE %s: %s\n", stream, c->b->name, stream,
            why ? why : "unexpected reply to TYPE");
  }
  client_done(c, 1);
  return false;
}

/* TYPE stream, answered by cb. */
static int dl_send_type(struct client *c, const char *stream, bk_reply_cb *cb) {
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "TYPE");
  bk_args_str(&a, stream);
  int rc = client_send(c, &a, cb);
  bk_args_free(&a);
  return rc;
}

struct dl_list {
  const char *stream;
  long long count;
  long long total;          /* XLEN */
};

static void dl_list_range(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct dl_list *l = c->data;
  if (c->finished) return;
  const char *why = client_error(r, err);
  if (why || !is_range(r)) {
    fprintf(stderr, "luastream: cannot list %s on %s: XRANGE %s: %s\n", l->stream, c->b->name,
            l->stream, why ? why : "unexpected reply to XRANGE");
    client_done(c, 1);
    return;
  }
  for (size_t i = 0; i < r->elements; i++) {
    if (i) putchar('\n');
    print_dead_letter(r->element[i]);
  }
  if (r->elements) putchar('\n');
  if (r->elements == 0)
    printf("no dead letters on %s\n", l->stream);
  else if ((long long)r->elements < l->total)
    printf("%zu of %lld entries on %s shown, oldest first (--count N shows more)\n", r->elements,
           l->total, l->stream);
  else
    printf("%zu dead letter%s on %s\n", r->elements, r->elements == 1 ? "" : "s", l->stream);
  client_done(c, 0);
}

static void dl_list_len(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct dl_list *l = c->data;
  if (c->finished) return;
  if (r && r->type == BK_INTEGER) {
    l->total = r->integer;
    return; /* the XRANGE sent behind it prints */
  }
  const char *why = client_error(r, err);
  fprintf(stderr, "luastream: cannot list %s on %s: XLEN %s: %s\n", l->stream, c->b->name,
          l->stream, why ? why : "unexpected reply to XLEN");
  client_done(c, 1);
}

static void dl_list_type(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  if (c->finished) return;
  dl_stream_exists(c, ((struct dl_list *)c->data)->stream, r, err); /* XLEN and XRANGE follow */
}

static void dl_list_start(struct client *c) {
  struct dl_list *l = c->data;
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "XLEN");
  bk_args_str(&a, l->stream);
  int rc = dl_send_type(c, l->stream, dl_list_type);
  if (rc == 0) rc = client_send(c, &a, dl_list_len);
  bk_args_reset(&a);
  bk_args_str(&a, "XRANGE");
  bk_args_str(&a, l->stream);
  bk_args_str(&a, "-");
  bk_args_str(&a, "+");
  bk_args_str(&a, "COUNT");
  bk_args_num(&a, l->count);
  if (rc == 0) client_send(c, &a, dl_list_range);
  bk_args_free(&a);
}

static int cmd_dl_list(int argc, char **argv) {
  struct options o;
  int rc = parse(argc, argv, usage_dl_list, 1, &o);
  if (rc != 0) return rc > 0 ? 0 : 2;
  struct redis_url url;
  if (setup_url(&o, &url) != 0) return 2;
  struct dl_list l = {.stream = o.pos[0], .count = LIST_COUNT};
  if (o.count) {
    char *end;
    l.count = strtoll(o.count, &end, 10);
    if (*o.count == '\0' || *end != '\0' || l.count < 1 || l.count > 1000000000) {
      fprintf(stderr, "luastream: --count must be a positive integer, got \"%s\"\n", o.count);
      return 2;
    }
  }
  return client_run(&url, "dead-letters", dl_list_start, &l);
}

struct dl_replay {
  const char *stream;
  const char *const *ids;   /* --id, or NULL for --all */
  int nids;
  char after[64], last[64]; /* --all: where the next batch starts and ends */
  long long replayed;
  long long skipped;
};

static void dl_replay_send(struct client *c);

static bool is_string_reply(const bk_reply *r) { return r && r->type == BK_STRING; }

static void dl_replay_done(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct dl_replay *rp = c->data;
  if (c->finished) return;
  const char *why = client_error(r, err);
  bool ok = why == NULL && r->type == BK_ARRAY && r->elements == 4 &&
            r->element[0]->type == BK_ARRAY && r->element[1]->type == BK_ARRAY &&
            is_string_reply(r->element[2]) && is_string_reply(r->element[3]) &&
            r->element[2]->len < sizeof rp->after && r->element[3]->len < sizeof rp->last;
  for (size_t i = 0; ok && i < r->element[0]->elements; i++) {
    const bk_reply *m = r->element[0]->element[i];
    ok = m->type == BK_ARRAY && m->elements == 3 && is_string_reply(m->element[0]) &&
         is_string_reply(m->element[1]) && is_string_reply(m->element[2]);
  }
  for (size_t i = 0; ok && i < r->element[1]->elements; i++) {
    const bk_reply *sk = r->element[1]->element[i];
    ok = sk->type == BK_ARRAY && sk->elements == 2 && is_string_reply(sk->element[0]) &&
         is_string_reply(sk->element[1]);
  }
  if (!ok) {
    if (why && !strncmp(why, "ERR ", 4)) why += 4;
    /* Refused by the ACL: Redis names neither the script nor the key. */
    bool refused = why && (strstr(why, "NOPERM") || strstr(why, "can't access") ||
                           strstr(why, "can't run"));
    if (refused)
      fprintf(stderr,
              "luastream: replay from %s failed: the replay script (EVAL on %s: TYPE, XRANGE, "
              "XREVRANGE and XDEL there, TYPE and XADD on the retry stream "
              "<dead-letter-stream>:retry:<dead-letter-group> each entry names) was refused: %s\n",
              rp->stream, rp->stream, why);
    else
      fprintf(stderr, "luastream: replay from %s failed: %s\n", rp->stream,
              why ? why : "unexpected reply to the replay script");
    if (rp->replayed)
      printf("replayed %lld dead letter%s from %s before the failure\n", rp->replayed,
             rp->replayed == 1 ? "" : "s", rp->stream);
    client_done(c, 1);
    return;
  }
  const bk_reply *moved = r->element[0], *skipped = r->element[1];
  for (size_t i = 0; i < moved->elements; i++) {
    const bk_reply *m = moved->element[i];
    printf("%.*s -> %.*s %.*s\n", (int)m->element[0]->len, m->element[0]->str,
           (int)m->element[1]->len, m->element[1]->str, (int)m->element[2]->len,
           m->element[2]->str);
  }
  for (size_t i = 0; i < skipped->elements; i++) {
    const bk_reply *sk = skipped->element[i];
    fprintf(stderr, "luastream: skipped: %.*s\n", (int)sk->element[1]->len, sk->element[1]->str);
  }
  rp->replayed += (long long)moved->elements;
  rp->skipped += (long long)skipped->elements;
  fflush(stdout);
  if (r->element[2]->len > 0) { /* --all: another batch */
    snprintf(rp->after, sizeof rp->after, "%.*s", (int)r->element[2]->len, r->element[2]->str);
    snprintf(rp->last, sizeof rp->last, "%.*s", (int)r->element[3]->len, r->element[3]->str);
    dl_replay_send(c);
    return;
  }
  printf("replayed %lld dead letter%s from %s", rp->replayed, rp->replayed == 1 ? "" : "s",
         rp->stream);
  if (rp->skipped)
    printf(" (%lld entr%s skipped, left on %s)", rp->skipped, rp->skipped == 1 ? "y" : "ies",
           rp->stream);
  putchar('\n');
  client_done(c, 0);
}

static void dl_replay_send(struct client *c) {
  struct dl_replay *rp = c->data;
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "EVAL");
  bk_args_str(&a, SCRIPT_REPLAY);
  bk_args_str(&a, "1");
  bk_args_str(&a, rp->stream);
  if (rp->ids) {
    bk_args_str(&a, "ids");
    for (int i = 0; i < rp->nids; i++) bk_args_str(&a, rp->ids[i]);
  } else {
    bk_args_str(&a, "all");
    bk_args_str(&a, rp->after);
    bk_args_str(&a, rp->last);
    bk_args_num(&a, REPLAY_BATCH);
  }
  client_send(c, &a, dl_replay_done);
  bk_args_free(&a);
}

static void dl_replay_type(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  if (c->finished) return;
  if (dl_stream_exists(c, ((struct dl_replay *)c->data)->stream, r, err)) dl_replay_send(c);
}

static void dl_replay_start(struct client *c) {
  dl_send_type(c, ((struct dl_replay *)c->data)->stream, dl_replay_type);
}

/* "ms-seq", as XADD returns ids: the script looks each one up exactly. */
static bool full_id(const char *s) {
  size_t ms = strspn(s, "0123456789");
  if (ms == 0 || ms > 20 || s[ms] != '-') return false;
  size_t seq = strspn(s + ms + 1, "0123456789");
  return seq > 0 && seq <= 20 && s[ms + 1 + seq] == '\0';
}

static int cmd_dl_replay(int argc, char **argv) {
  struct options o;
  int rc = parse(argc, argv, usage_dl_replay, 1, &o);
  if (rc != 0) return rc > 0 ? 0 : 2;
  if ((o.nids > 0) == o.all) {
    fprintf(stderr, "luastream: replay needs either --id ID (repeatable) or --all\n\n%s",
            usage_dl_replay);
    return 2;
  }
  for (int i = 0; i < o.nids; i++) {
    if (!full_id(o.ids[i])) {
      fprintf(stderr, "luastream: --id needs an entry id such as 1700000000000-0, got \"%s\"\n",
              o.ids[i]);
      return 2;
    }
  }
  struct redis_url url;
  if (setup_url(&o, &url) != 0) return 2;
  struct dl_replay rp = {.stream = o.pos[0], .ids = o.nids ? o.ids : NULL, .nids = o.nids};
  strcpy(rp.after, "-");
  strcpy(rp.last, "+");
  return client_run(&url, "dead-letters", dl_replay_start, &rp);
}

static int cmd_dead_letters(int argc, char **argv) {
  const char *sub = argc > 0 ? argv[0] : NULL;
  if (sub && (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help"))) {
    fputs(usage_dead_letters, stdout);
    return 0;
  }
  if (sub && !strcmp(sub, "--version")) {
    printf("luastream %s\n", LUASTREAM_VERSION);
    return 0;
  }
  if (sub && !strcmp(sub, "list")) return cmd_dl_list(argc - 1, argv + 1);
  if (sub && !strcmp(sub, "replay")) return cmd_dl_replay(argc - 1, argv + 1);
  if (sub)
    fprintf(stderr, "luastream: unknown dead-letters command \"%s\"\n\n%s", sub, usage_dead_letters);
  else
    fputs(usage_dead_letters, stderr);
  return 2;
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
  if (!strcmp(cmd, "run")) {
    /* A stalled reader of stderr must not stop the host: the log is written
     * by a thread of its own, given a few seconds at the end. */
    log_writer_start();
    int status = cmd_run(argc - 2, argv + 2);
    log_writer_stop(LOG_DRAIN_MS);
    return status;
  }
  if (!strcmp(cmd, "check")) return cmd_check(argc - 2, argv + 2);
  if (!strcmp(cmd, "publish")) return cmd_publish(argc - 2, argv + 2);
  if (!strcmp(cmd, "dead-letters")) return cmd_dead_letters(argc - 2, argv + 2);
  fprintf(stderr, "luastream: unknown command \"%s\"\n\n%s", cmd, usage_main);
  return 2;
}
