/* console_internal: what the files of the web console share (console.h):
 * the console itself, answering a request, and sending Redis commands on
 * its connection. console.c serves pages, sessions, the overview and the
 * handlers; console_answer.c answering; console_redis.c the connection to
 * Redis; console_browse.c the pending entries and an entry;
 * console_dead_letters.c the dead letters, replaying and deleting them;
 * console_pause.c pausing and resuming a group. */
#ifndef LUASTREAM_CONSOLE_INTERNAL_H
#define LUASTREAM_CONSOLE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "client.h"
#include "console.h"
#include "console_auth.h"
#include "console_http.h"
#include "status_query.h"

/* A stream and group whose dead letters go to dead_letter: where they may be
 * replayed to (the handlers of DIR say so, never the entries). */
struct console_pair {
  char *dead_letter, *stream, *group;
};

/* Something waiting for the Redis connection to be up. */
struct console_wait {
  void (*go)(struct console *c, void *arg);                    /* the connection is up: send */
  void (*fail)(struct console *c, void *arg, const char *why); /* it cannot be */
  void *arg;
  struct console_wait *next;
};

struct console {
  struct uv_loop_s *loop;
  lclock *clock;
  struct console_config cfg;
  console_http *http;
  struct console_auth *auth;
  broker *b;
  struct client client;
  bool attached; /* client is a session: connecting (not started) or up */
  struct console_wait *waits, **waits_tail;
  /* the overview: the last refresh's document and the requests waiting for
   * the one under way */
  struct status_query q;
  bool refreshing;               /* pages wait for a refresh: queued or sent */
  bool refresh_sent;             /* its commands went to Redis */
  bool refresh_retried;          /* it lost its connection once already */
  ltimer *retry;                 /* sends it again */
  unsigned long long refresh_ns; /* when the refresh under way started */
  char *overview;
  size_t overview_len;
  uint64_t overview_ms; /* when it was made, on the loop's clock; 0: never */
  struct console_request **waiting;
  size_t nwaiting, capwaiting;
  /* DIR's handlers as last loaded */
  struct console_pair *pairs;
  size_t npairs, cappairs;
  char *problems;   /* `file:line: message` lines, or "" */
  uint64_t dir_sig; /* DIR as last loaded (console.c dir_signature) */
  bool closing;
  void (*ended)(struct console *c); /* the Redis connection ended */
};

/* Who made the request (the token's name), from its session or bearer. */
const char *console_who(const struct console_request *req);

/* Answers with a JSON body (taking nothing), or an error as
 * {"error": why}. */
void console_json(struct console_request *req, int status, const char *body, size_t len);
void console_error(struct console_request *req, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A memory stream for a JSON body; console_json_end answers with it. */
FILE *console_json_begin(char **buf, size_t *len);
void console_json_end(struct console_request *req, FILE *f, char **buf, size_t *len);

/* Runs go(c, arg) once the Redis connection is up (now when it is), or
 * fail(c, arg, why) when it cannot be. */
void console_redis(struct console *c, void (*go)(struct console *, void *),
                   void (*fail)(struct console *, void *, const char *), void *arg);

/* Sends argv on the console's connection (call from a go of
 * console_redis); cb gets the reply with arg. Returns 0, or -1 when the
 * connection is gone (cb is not called). */
int console_send(struct console *c, const char *const *argv, int argc, client_reply_fn *cb,
                 void *arg);

static inline bool console_is_str(const bk_reply *r) { return r && r->type == BK_STRING; }

/* s is a stream of DIR's handlers (or, without DIR, one named). */
bool console_known_stream(const struct console *c, const char *s);

/* s is a dead_letter stream of DIR's handlers (or, without DIR, a stream
 * named). */
bool console_known_dead_letter(const struct console *c, const char *s);

/* id is a whole entry id, ms-seq. */
bool console_valid_id(const char *id);

/* The routes of console_browse.c and console_actions.c. */
void console_pending(struct console *c, struct console_request *req);
void console_entry(struct console *c, struct console_request *req);
void console_dead_letters(struct console *c, struct console_request *req);
void console_dl_preview(struct console *c, struct console_request *req);
void console_dl_replay(struct console *c, struct console_request *req);
void console_dl_delete(struct console *c, struct console_request *req);
/* console_pause.c's */
void console_pause(struct console *c, struct console_request *req);
void console_resume(struct console *c, struct console_request *req);

#endif
