/* sentinel: questions to Redis Sentinel and the +switch-master subscription
 * (sentinel.h), on RESP connections (resp_conn.h) on the loop, over TLS
 * with rediss+sentinel://.
 *
 * Both jobs are a probe: one connection to one sentinel at a time. A probe
 * resolves a sentinel's host name off the loop (uv_getaddrinfo), connects,
 * sends AUTH when the URL gives sentinel credentials, then its command. A
 * failure (refused, dropped, no answer in time, an error reply) moves it on
 * to the next sentinel: at once for a question, which gives up once every
 * sentinel failed, after SENTINEL_WATCH_RETRY_MS for the subscription, which
 * never gives up while watching. A probe that is done forgets its sentinel
 * object and lives on only until its timer is closed; its connections are
 * always gone by then (one closed inside its reply callback ends when that
 * callback returns). */
#include "sentinel.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "log.h"
#include "resp_conn.h"
#include "transport.h"
#include "url.h"

#define container_of(ptr, type, field) ((type *)((char *)(ptr)-offsetof(type, field)))

struct sentinel {
  uv_loop_t *loop;
  struct redis_url url; /* a copy: the sentinels, the service, their credentials */
  char name[URL_TEXT_MAX];
  struct tls_ctx *tls; /* rediss+sentinel://, else NULL */
  sentinel_switch_cb *on_switch;
  void *data;
  int preferred;       /* the sentinel that answered last: asked first */
  struct probe *watch; /* the subscription, NULL when not watching */
};

enum probe_kind { PROBE_ASK, PROBE_WATCH };

struct probe {
  struct sentinel *s; /* NULL once done */
  enum probe_kind kind;
  int idx;               /* the sentinel tried now */
  int tried;             /* sentinels tried in this round (questions) */
  int refused;           /* ... of which refused the credentials */
  struct resp_conn *rc;  /* the connection to it, NULL in between */
  struct lookup *lookup; /* the host name lookup in flight, NULL if none */
  uv_timer_t timer;      /* a question's timeout; the subscription's retry */
  int timer_closed;
  int subscribed;         /* the subscription was confirmed on this connection */
  char addr[300];         /* "host:port" of the sentinel tried now, for messages */
  sentinel_answer_cb *cb; /* questions */
  void *data;
  char why[1024]; /* what each sentinel said, for a failed question */
};

struct sentinel_ask {
  struct probe p;
};

/* A host name lookup; let go (p = NULL) when the probe no longer waits for
 * it, and freed by its callback, which always runs. */
struct lookup {
  uv_getaddrinfo_t req;
  struct probe *p;
};

static void try_sentinel(struct probe *p);
static void on_timer(uv_timer_t *t);

/* ---- probe lifetime ---- */

static void probe_maybe_free(struct probe *p) {
  if (p->s == NULL && p->timer_closed) free(p);
}

static void on_timer_closed(uv_handle_t *h) {
  struct probe *p = container_of((uv_timer_t *)h, struct probe, timer);
  p->timer_closed = 1;
  probe_maybe_free(p);
}

/* Drops the connection or lookup (if any) so that their callbacks see
 * nothing more to do. */
static void probe_disconnect(struct probe *p) {
  if (p->lookup) {
    p->lookup->p = NULL;
    uv_cancel((uv_req_t *)&p->lookup->req);
    p->lookup = NULL;
  }
  struct resp_conn *rc = p->rc;
  if (rc == NULL) return;
  p->rc = NULL;
  p->subscribed = 0;
  resp_conn_close(rc, "closed"); /* deferred inside one of its reply callbacks */
}

static void probe_done(struct probe *p) {
  probe_disconnect(p);
  p->s = NULL;
  p->cb = NULL;
  uv_close((uv_handle_t *)&p->timer, on_timer_closed);
}

/* ---- moving on ---- */

static void ask_answer(struct probe *p, const char *ip, int port) {
  sentinel_answer_cb *cb = p->cb;
  void *data = p->data;
  int denied = ip == NULL && p->refused == p->tried;
  char why[sizeof p->why + 192];
  snprintf(why, sizeof why, "no sentinel gave the master of %s: %s", p->s->url.service, p->why);
  probe_done(p);
  if (cb) cb(data, ip, port, ip ? NULL : why, denied);
}

/* The sentinel tried now failed. refused: it refused the credentials. */
static void probe_failed(struct probe *p, const char *what, int refused) {
  struct sentinel *s = p->s;
  int was_subscribed = p->subscribed;
  probe_disconnect(p);
  uv_timer_stop(&p->timer);
  if (p->kind == PROBE_WATCH) {
    log_line(was_subscribed ? LOG_WARN : LOG_DEBUG, NULL,
             "sentinel subscription failed, trying the next sentinel", "redis", s->name, "sentinel",
             p->addr, "error", what, NULL);
    p->idx = (p->idx + 1) % s->url.nsentinels;
    uv_timer_start(&p->timer, on_timer, SENTINEL_WATCH_RETRY_MS, 0);
    return;
  }
  size_t len = strlen(p->why);
  snprintf(p->why + len, sizeof p->why - len, "%s%s: %s", len ? "; " : "", p->addr, what);
  p->refused += refused;
  if (++p->tried == s->url.nsentinels) {
    ask_answer(p, NULL, 0);
    return;
  }
  p->idx = (p->idx + 1) % s->url.nsentinels;
  try_sentinel(p);
}

static int is_refusal(const char *err) {
  return strncmp(err, "WRONGPASS", 9) == 0 || strncmp(err, "NOAUTH", 6) == 0 ||
         strncmp(err, "NOPERM", 6) == 0 || strncmp(err, "ERR AUTH", 8) == 0 ||
         strstr(err, "invalid password") != NULL;
}

/* ---- replies ---- */

/* A TLS failure that retrying cannot fix counts as the sentinel refusing:
 * when every sentinel refuses, the question fails as denied. */
static void on_down(void *data, const char *why, enum transport_end how) {
  struct probe *p = data;
  p->rc = NULL;
  char what[600];
  snprintf(what, sizeof what,
           how == TRANSPORT_REFUSED ? "%s"
           : how == TRANSPORT_UNANSWERED
               ? "connection lost: %s (a TLS port takes rediss+sentinel://)"
               : "connection lost: %s",
           why);
  probe_failed(p, what, how == TRANSPORT_REFUSED);
}

static void on_auth(void *privdata, redisReply *reply, const char *err) {
  struct probe *p = privdata;
  (void)err;
  if (reply == NULL) return; /* whoever ended the connection handles it */
  if (reply->type == REDIS_REPLY_ERROR) {
    char what[300];
    snprintf(what, sizeof what, "AUTH failed: %s", reply->str);
    probe_failed(p, what, is_refusal(reply->str));
  }
}

static void on_addr(void *privdata, redisReply *reply, const char *err) {
  struct probe *p = privdata;
  (void)err;
  if (reply == NULL) return;
  if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
      reply->element[0]->type == REDIS_REPLY_STRING &&
      reply->element[1]->type == REDIS_REPLY_STRING) {
    char ip[64];
    snprintf(ip, sizeof ip, "%s", reply->element[0]->str);
    int port = atoi(reply->element[1]->str);
    if (port > 0 && port <= 65535) {
      p->s->preferred = p->idx;
      log_line(LOG_DEBUG, NULL, "sentinel gave the master", "redis", p->s->name, "sentinel",
               p->addr, "service", p->s->url.service, "master_ip", ip, LOG_NUMBER "master_port",
               reply->element[1]->str, NULL);
      ask_answer(p, ip, port);
      return;
    }
  }
  char what[300];
  if (reply->type == REDIS_REPLY_NIL)
    snprintf(what, sizeof what, "does not know the service %s", p->s->url.service);
  else if (reply->type == REDIS_REPLY_ERROR)
    snprintf(what, sizeof what, "%s", reply->str);
  else
    snprintf(what, sizeof what, "unexpected reply to SENTINEL GET-MASTER-ADDR-BY-NAME");
  probe_failed(p, what, reply->type == REDIS_REPLY_ERROR && is_refusal(reply->str));
}

/* "+switch-master" carries "<service> <old ip> <old port> <new ip> <new port>". */
static void on_message(void *privdata, redisReply *reply, const char *err) {
  struct probe *p = privdata;
  (void)err;
  if (reply == NULL) return;
  struct sentinel *s = p->s;
  if (reply->type == REDIS_REPLY_ERROR) {
    char what[300];
    snprintf(what, sizeof what, "SUBSCRIBE failed: %s", reply->str);
    probe_failed(p, what, 0);
    return;
  }
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
      reply->element[0]->type != REDIS_REPLY_STRING)
    return;
  if (strcmp(reply->element[0]->str, "subscribe") == 0) {
    p->subscribed = 1;
    uv_timer_stop(&p->timer);
    log_line(LOG_DEBUG, NULL, "sentinel subscription ready", "redis", s->name, "sentinel", p->addr,
             NULL);
    return;
  }
  if (strcmp(reply->element[0]->str, "message") != 0 ||
      reply->element[2]->type != REDIS_REPLY_STRING)
    return;
  char service[128], old_ip[64], new_ip[64];
  int old_port, new_port;
  if (sscanf(reply->element[2]->str, "%127s %63s %d %63s %d", service, old_ip, &old_port, new_ip,
             &new_port) != 5 ||
      strcmp(service, s->url.service) != 0)
    return;
  char from[96], to[96];
  snprintf(from, sizeof from, "%s:%d", old_ip, old_port);
  snprintf(to, sizeof to, "%s:%d", new_ip, new_port);
  log_line(LOG_INFO, NULL, "redis master switched", "redis", s->name, "service", s->url.service,
           "from", from, "to", to, "sentinel", p->addr, NULL);
  /* May stop the watch (the last connection closed from a callback): p is
   * not touched after this. */
  s->on_switch(s->data, new_ip, new_port);
}

/* ---- attempts ---- */

static int probe_send(struct probe *p, int argc, const char **argv, resp_reply_fn *fn) {
  size_t len[3];
  for (int i = 0; i < argc; i++) len[i] = strlen(argv[i]);
  return resp_conn_send(p->rc, argc, argv, len, fn, p);
}

static int send_first(struct probe *p) {
  const struct redis_url *u = &p->s->url;
  if (u->sentinel_password[0]) {
    const char *auth[3] = {"AUTH", u->sentinel_user[0] ? u->sentinel_user : u->sentinel_password,
                           u->sentinel_password};
    if (probe_send(p, u->sentinel_user[0] ? 3 : 2, auth, on_auth) != 0) return -1;
  }
  if (p->kind == PROBE_ASK) {
    const char *argv[3] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", u->service};
    return probe_send(p, 3, argv, on_addr);
  }
  const char *argv[2] = {"SUBSCRIBE", "+switch-master"};
  resp_conn_on_push(p->rc, on_message, p); /* the messages after the confirmation */
  return probe_send(p, 2, argv, on_message);
}

static void connect_ip(struct probe *p, const char *ip) {
  struct sentinel *s = p->s;
  const struct url_sentinel *u = &s->url.sentinels[p->idx];
  struct transport_target to = {ip, u->port, NULL, s->tls, u->host};
  char what[600];
  if ((p->rc = resp_conn_open(s->loop, &to, s->name, on_down, p, what, sizeof what)) == NULL) {
    probe_failed(p, what, 0);
    return;
  }
  if (send_first(p) != 0) {
    probe_failed(p, "out of memory", 0);
    return;
  }
  uv_timer_start(&p->timer, on_timer, SENTINEL_ASK_TIMEOUT_MS, 0);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  struct lookup *l = container_of(req, struct lookup, req);
  struct probe *p = l->p;
  free(l);
  if (p == NULL) { /* let go meanwhile */
    uv_freeaddrinfo(res);
    return;
  }
  p->lookup = NULL;
  if (status < 0) {
    char what[160];
    snprintf(what, sizeof what, "cannot resolve: %s", uv_strerror(status));
    probe_failed(p, what, 0);
    return;
  }
  const struct addrinfo *pick = res; /* IPv4 first, as for the master */
  for (const struct addrinfo *ai = res; ai; ai = ai->ai_next)
    if (ai->ai_family == AF_INET) {
      pick = ai;
      break;
    }
  char ip[64];
  if (pick->ai_family == AF_INET)
    uv_ip4_name((const struct sockaddr_in *)(const void *)pick->ai_addr, ip, sizeof ip);
  else
    uv_ip6_name((const struct sockaddr_in6 *)(const void *)pick->ai_addr, ip, sizeof ip);
  uv_freeaddrinfo(res);
  connect_ip(p, ip);
}

static void try_sentinel(struct probe *p) {
  const struct url_sentinel *u = &p->s->url.sentinels[p->idx];
  snprintf(p->addr, sizeof p->addr, strchr(u->host, ':') ? "[%s]:%d" : "%s:%d", u->host, u->port);
  if (url_is_ip(u->host)) {
    connect_ip(p, u->host);
    return;
  }
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct lookup *l = malloc(sizeof *l);
  if (l == NULL) {
    probe_failed(p, "out of memory", 0);
    return;
  }
  l->p = p;
  int rc = uv_getaddrinfo(p->s->loop, &l->req, on_resolved, u->host, NULL, &hints);
  if (rc != 0) {
    free(l);
    char what[160];
    snprintf(what, sizeof what, "cannot resolve: %s", uv_strerror(rc));
    probe_failed(p, what, 0);
    return;
  }
  p->lookup = l;
  uv_timer_start(&p->timer, on_timer, SENTINEL_ASK_TIMEOUT_MS, 0);
}

/* A question's (or an unconfirmed subscription's) timeout, or the
 * subscription's wait before its next try. */
static void on_timer(uv_timer_t *t) {
  struct probe *p = container_of(t, struct probe, timer);
  if (p->s == NULL) return;
  if (p->rc || p->lookup) {
    char what[64];
    snprintf(what, sizeof what, "no answer within %d ms", SENTINEL_ASK_TIMEOUT_MS);
    probe_failed(p, what, 0);
    return;
  }
  try_sentinel(p); /* the subscription's next try */
}

static struct probe *probe_new(struct sentinel *s, enum probe_kind kind, size_t size) {
  struct probe *p = calloc(1, size);
  if (p == NULL) return NULL;
  p->s = s;
  p->kind = kind;
  p->idx = s->preferred;
  uv_timer_init(s->loop, &p->timer);
  return p;
}

/* ---- public ---- */

struct sentinel *sentinel_new(struct uv_loop_s *loop, const struct redis_url *url, const char *name,
                              struct tls_ctx *tls, sentinel_switch_cb *on_switch, void *data) {
  if (url->nsentinels <= 0) return NULL;
  struct sentinel *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->loop = loop;
  s->url = *url;
  snprintf(s->name, sizeof s->name, "%s", name);
  s->tls = tls;
  s->on_switch = on_switch;
  s->data = data;
  return s;
}

/* A question starts on the next loop turn, so cb never runs before
 * sentinel_ask returns (a refused connect can fail at once). */
static void on_ask_start(uv_timer_t *t) {
  struct probe *p = container_of(t, struct probe, timer);
  try_sentinel(p);
}

struct sentinel_ask *sentinel_ask(struct sentinel *s, sentinel_answer_cb *cb, void *data) {
  struct sentinel_ask *q = (struct sentinel_ask *)probe_new(s, PROBE_ASK, sizeof *q);
  if (q == NULL) return NULL;
  q->p.cb = cb;
  q->p.data = data;
  uv_timer_start(&q->p.timer, on_ask_start, 0, 0);
  return q;
}

void sentinel_ask_cancel(struct sentinel_ask *q) {
  if (q && q->p.s) probe_done(&q->p);
}

void sentinel_watch(struct sentinel *s, int on) {
  if (on && s->watch == NULL) {
    s->watch = probe_new(s, PROBE_WATCH, sizeof *s->watch);
    if (s->watch) try_sentinel(s->watch);
  } else if (!on && s->watch) {
    probe_done(s->watch);
    s->watch = NULL;
  }
}

void sentinel_free(struct sentinel *s) {
  if (s == NULL) return;
  sentinel_watch(s, 0);
  free(s);
}
