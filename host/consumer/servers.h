/* servers: the other Redis servers handlers talk to (ls.redis.connect).
 *
 * One connection per distinct URL (as the handler wrote it) for the whole
 * host, shared by every handler and job that asks for that URL, so their
 * calls are pipelined on it. A URL is registered when a handler makes its
 * client (also at load, before the host runs) and its connection opens when
 * the host starts, or at once when the host already runs. The broker of each
 * URL comes from whoever runs the host (servers_backend): the host itself
 * knows nothing of libuv, and the test harness hands out in-memory servers.
 * A connection reconnects by itself (the broker's backoff) and fails the
 * calls in flight when it drops; nothing is sent again. Connections stay
 * across hot reloads (a URL no handler uses any more keeps its idle
 * connection until the host stops) and close when the host stops. */
#ifndef LUASTREAM_SERVERS_H
#define LUASTREAM_SERVERS_H

#include <stdbool.h>
#include <stddef.h>

#include "broker.h"

struct redis_url;

/* Where the brokers of other servers come from. open returns the broker for
 * url (NULL: out of memory); release (NULL: the backend keeps them) is
 * handed each such broker once its connection has closed. */
struct servers_backend {
  broker *(*open)(void *data, const struct redis_url *url);
  void (*release)(void *data, broker *b);
  void *data;
};

struct server {
  char *url;      /* as the handler wrote it: the key */
  char *redacted; /* the password as "***": what the log shows */
  broker *b;      /* NULL until opened */
  bk_conn *conn;  /* NULL until opened, and once closed */
};

struct servers {
  struct server *v;
  size_t n, cap;
  struct servers_backend backend; /* open NULL: nothing is ever opened */
  bool running;                   /* between servers_start and servers_close */
};

/* rt_env.connect for the servers s (data): registers url (and opens its
 * connection while running) and gives its broker and connection. */
int servers_connect(void *data, const char *url, broker **b, bk_conn **conn, char *err,
                    size_t errlen);
/* Opens the connection of every URL registered so far; later ones open when
 * registered. */
void servers_start(struct servers *s);
/* Closes every connection: calls in flight fail ("connection closed"); none
 * opens again. The brokers go to the backend's release. */
void servers_close(struct servers *s);
/* servers_close, then frees what s holds. */
void servers_free(struct servers *s);

#endif
