/* client: the one-shot Redis client of the commands that are not `run`
 * (publish, dead-letters): connect, send a few commands, print, exit. A
 * person is waiting, so nothing is retried: a server that is not there or
 * refuses the connection, or a reply that does not come within
 * CLIENT_TIMEOUT_MS, ends the command with status 1 and one line on stderr. */
#ifndef LUASTREAM_CLIENT_H
#define LUASTREAM_CLIENT_H

#include <stdbool.h>

#include "broker.h"
#include "clock.h"
#include "url.h"

#define CLIENT_TIMEOUT_MS 10000 /* to connect, then for each reply */

struct client;
/* Called once, when the connection is first up: sends the first command(s). */
typedef void client_start_fn(struct client *c);

struct uv_loop_s;

struct client {
  broker *b;
  lclock *clock;          /* for a command's own timers (status --watch) */
  struct uv_loop_s *loop; /* for a command's own handles (status --watch's SIGINT);
                             * unref them, so that client_done still ends the loop */
  bk_conn *conn;
  ltimer *timeout; /* to connect, then for each reply */
  client_start_fn *start;
  void *data;    /* the command's own state */
  bool started;  /* start has run */
  bool finished; /* client_done has run: replies still arriving are ignored */
  int status;    /* the exit code */
  /* client_attach's: called once by client_done (the connection is closed);
   * NULL for client_run's. */
  void (*ended)(struct client *c);
  int inflight; /* client_send_with's commands unanswered */
};

/* Connects to url (the connection named name), calls start once connected
 * and runs until client_done. Returns the status client_done was given (1
 * on a timeout or when the client cannot be set up, reported). */
int client_run(const struct redis_url *url, const char *name, client_start_fn *start, void *data);

/* A session on a loop the caller runs (the web console's): c's fields but
 * ended, start and data are set here; b and clock stay the caller's, and so
 * does c. What would end a one-shot command ends the session instead (the
 * log says why at warn level) and calls ended, once. Returns 0, or -1 when
 * the connection cannot be opened (ended is not called). */
int client_attach(struct client *c, struct uv_loop_s *loop, lclock *clock, broker *b,
                  const char *name, client_start_fn *start, void (*ended)(struct client *c),
                  void *data);

/* Frees what client_attach made, after client_done. */
void client_detach(struct client *c);

/* Says why the session cannot go on: one line on stderr, or in the log for
 * an attached client. */
void client_say(struct client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Ends the session: the loop then runs out of work and client_run returns
 * status. Safe inside any callback of the client. */
void client_done(struct client *c, int status);

/* Sends one command; cb gets the reply (data = the client). Commands go out
 * in order, but on Redis Cluster their replies need not come back in it:
 * commands on different slots go to different nodes, and one redirected by
 * ASK is answered after those behind it. A caller with several commands in
 * flight tells them apart with client_send_with. Returns 0, or -1 when the
 * connection is gone (reported; the session has ended with status 1). */
int client_send(struct client *c, const struct bk_args *a, bk_reply_cb *cb);

/* A reply, with the arg its command was sent with. */
typedef void client_reply_fn(struct client *c, void *arg, const bk_reply *r, const char *err);

/* client_send, with arg handed to cb with this command's reply (and only
 * with it). cb runs exactly once when this returns 0, as client_send's. */
int client_send_with(struct client *c, const struct bk_args *a, client_reply_fn *cb, void *arg);

/* The value of field name in a reply of [name, value, ...] pairs (HGETALL,
 * an entry's fields, XINFO), or NULL: no such field, or r no array. */
const bk_reply *client_field(const bk_reply *r, const char *name);

/* The error text of a failed reply: the server's message, or why no reply
 * came. NULL when r is a reply of another type than an error. */
const char *client_error(const bk_reply *r, const char *err);

#endif
