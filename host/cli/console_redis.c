/* console_redis: the web console's connection to Redis
 * (console_internal.h): opened when a page first needs it, and again after
 * it ended; what needs it waits until it is up. */
#include <stdlib.h>

#include "console_internal.h"

int console_send(struct console *c, const char *const *argv, int argc, client_reply_fn *cb,
                 void *arg) {
  struct bk_args a;
  bk_args_init(&a);
  for (int i = 0; i < argc; i++) bk_args_str(&a, argv[i]);
  int rc = client_send_with(&c->client, &a, cb, arg);
  bk_args_free(&a);
  return rc;
}

/* The client's data is the overview's query (status_query.c reads it so);
 * the query's is the console. */
static struct console *console_of(struct client *cl) {
  return ((struct status_query *)cl->data)->data;
}

static void client_started(struct client *cl) {
  struct console *c = console_of(cl);
  while (c->waits && c->attached && !cl->finished) {
    struct console_wait *w = c->waits;
    c->waits = w->next;
    if (c->waits == NULL) c->waits_tail = &c->waits;
    w->go(c, w->arg);
    free(w);
  }
}

static void client_ended(struct client *cl) {
  struct console *c = console_of(cl);
  c->attached = false;
  if (c->ended) c->ended(c); /* the overview's refresh under way will not finish */
  while (c->waits) {
    struct console_wait *w = c->waits;
    c->waits = w->next;
    w->fail(c, w->arg, "cannot reach Redis (the log says why)");
    free(w);
  }
  c->waits_tail = &c->waits;
}

void console_redis(struct console *c, void (*go)(struct console *, void *),
                   void (*fail)(struct console *, void *, const char *), void *arg) {
  if (c->closing) return fail(c, arg, "the console is closing");
  if (c->attached && c->client.started && !c->client.finished) {
    if (bk_connected(c->b, c->client.conn)) return go(c, arg);
    /* the connection dropped since: a session afresh, rather than a
     * command refused */
    client_done(&c->client, 1);
  }
  struct console_wait *w = malloc(sizeof *w);
  if (w == NULL) return fail(c, arg, "out of memory");
  *w = (struct console_wait){go, fail, arg, NULL};
  *c->waits_tail = w;
  c->waits_tail = &w->next;
  if (c->attached) return; /* connecting */
  client_detach(&c->client);
  if (client_attach(&c->client, c->loop, c->clock, c->b, "console", client_started, client_ended,
                    &c->q) != 0) {
    c->waits = NULL;
    c->waits_tail = &c->waits;
    for (struct console_wait *n; w; w = n) {
      n = w->next;
      w->fail(c, w->arg, "cannot open a connection to Redis");
      free(w);
    }
    return;
  }
  c->attached = true;
}
