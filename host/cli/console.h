/* console: the web console (docs/operations.md, "The web console"): pages
 * for operators on a listener of its own, over a Redis connection of its
 * own, on the caller's loop. `luastream run --console` and `luastream
 * console` start one; under `run --processes N` the supervisor does.
 *
 * It shows the streams and groups of DIR's handlers (or the streams named),
 * as `luastream status` sees them, refreshed from Redis at most once per
 * interval whatever the number of pages open; a group's pending entries; an
 * entry; the dead letters, filtered; the handler files. It replays and
 * deletes dead letters and reloads the handlers (where they run), each
 * action shown first and then done on exactly the ids shown, and logged
 * with the name of the token that did it. Who may use it: console_auth.h;
 * the HTTP server: console_http.h; the pages: host/cli/console/. */
#ifndef LUASTREAM_CONSOLE_H
#define LUASTREAM_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trust.h"
#include "url.h"

#define CONSOLE_INTERVAL_MS 5000 /* the default refresh of the overview */

/* What the process running the console offers it. */
struct console_host {
  /* Reloads every handler (as SIGHUP does); NULL where no handlers run. */
  void (*reload)(void *data);
  /* The Prometheus page of the process (malloc'd, *len bytes); NULL: none. */
  char *(*metrics)(void *data, size_t *len);
  /* Calls fn for each handler file running (its path and script version);
   * NULL where the process does not know (the supervisor). */
  void (*each_running)(void *data, void (*fn)(void *arg, const char *path, const char *version),
                       void *arg);
  void *data;
};

struct console_config {
  const char *addr;        /* --console ADDR:PORT */
  const char *tokens_path; /* --console-tokens PATH */
  const char *origin;      /* --console-origin: the public origin behind a proxy, or NULL */
  const struct redis_url *url;
  const char *dir;            /* the handler directory, or NULL */
  const char *const *streams; /* without dir: the streams named */
  int nstreams;               /* (their groups all shown) */
  uint64_t load_timeout_ms;   /* for loading the handler files */
  const struct trust *trust;  /* who may change them (NULL: no check) */
  uint64_t interval_ms;       /* 0: CONSOLE_INTERVAL_MS */
  struct console_host host;   /* zeroed: nothing runs here */
  const char *mode;           /* "run", "supervisor" or "console", for the page */
};

typedef struct console console;

struct uv_loop_s;
/* Reads the tokens, loads DIR's handler files (their problems are shown,
 * not refused), listens, and logs `msg="console listening" addr=...`. All
 * of cfg is borrowed until console_close. Returns NULL with one line in err
 * when the tokens or the address are refused. */
console *console_start(struct uv_loop_s *loop, const struct console_config *cfg, char *err,
                       size_t errlen);

/* The port bound. */
int console_port(const console *c);

/* Reads --console-tokens again (SIGHUP): a token removed or changed there
 * ends its sessions; a file refused now keeps the tokens read before
 * (logged). */
void console_reload_tokens(console *c);

/* Stops listening, ends its Redis connection and every request (answered
 * into the void); the rest goes once the loop has closed the handles. */
void console_close(console *c);

#endif
