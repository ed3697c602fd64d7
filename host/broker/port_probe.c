/* port_probe: PING on a connection of its own (port_probe.h). */
#include "port_probe.h"

#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "resp_conn.h"
#include "tls.h"
#include "url.h"

struct port_probe {
  uv_timer_t timer; /* the deadline; at 0 ms, a failure to start */
  struct resp_conn *rc;
  struct tls_ctx *tls;
  port_probe_cb *cb; /* NULL once answered or cancelled */
  void *data;
};

static void on_closed(uv_handle_t *h) { free(h->data); }

/* Lets go of everything; the memory goes with the timer. */
static void stop(struct port_probe *p) {
  p->cb = NULL;
  resp_conn_close(p->rc, "probe done"); /* inside its reply callback: when that returns */
  p->rc = NULL;
  tls_ctx_put(p->tls);
  p->tls = NULL;
  uv_close((uv_handle_t *)&p->timer, on_closed);
}

static void finish(struct port_probe *p, int answered) {
  port_probe_cb *cb = p->cb;
  void *data = p->data;
  if (cb == NULL) return;
  stop(p);
  cb(data, answered);
}

/* Any reply, +PONG as -NOAUTH: a Redis that speaks the scheme asked. */
static void on_reply(void *data, redisReply *reply, const char *err) {
  (void)err;
  if (reply) finish(data, 1);
}

static void on_down(void *data, const char *why, enum transport_end how) {
  struct port_probe *p = data;
  p->rc = NULL;
  /* A TLS server that wants a client certificate refuses this one, which
   * has none: it answered in TLS all the same. */
  finish(p, p->tls && how == TRANSPORT_REFUSED && strstr(why, "not speaking TLS") == NULL);
}

static void on_timer(uv_timer_t *t) { finish(t->data, 0); }

struct port_probe *port_probe_start(uv_loop_t *loop, const char *ip, int port, int tls,
                                    port_probe_cb *cb, void *data) {
  struct port_probe *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  uv_timer_init(loop, &p->timer);
  p->timer.data = p;
  p->cb = cb;
  p->data = data;
  char err[512];
  struct url_tls any = {.on = 1, .skip_verify = 1};
  if (tls) p->tls = tls_ctx_get(&any, err, sizeof err);
  struct transport_target to = {ip, port, NULL, p->tls, ip};
  const char *ping[] = {"PING"};
  const size_t len[] = {4};
  if ((!tls || p->tls) &&
      (p->rc = resp_conn_open(loop, &to, "probe", on_down, p, err, sizeof err)) != NULL &&
      resp_conn_send(p->rc, 1, ping, len, on_reply, p) == 0) {
    uv_timer_start(&p->timer, on_timer, PORT_PROBE_TIMEOUT_MS, 0);
  } else {
    uv_timer_start(&p->timer, on_timer, 0, 0); /* cb never runs before this returns */
  }
  return p;
}

void port_probe_cancel(struct port_probe *p) {
  if (p && p->cb) stop(p);
}
