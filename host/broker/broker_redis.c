/* broker_redis: the broker seam on a real Redis server: reconnection,
 * the handshake, command timeouts, scripts by SHA and Sentinel, on the
 * RESP connections of resp_conn.h (which own the socket, plaintext or TLS).
 *
 * Each bk_conn owns at most one resp_conn at a time: the current connection
 * attempt or the live connection. An attempt resolves the host name off the
 * loop (uv_getaddrinfo), connects without blocking (with TLS, the handshake
 * follows), and pipelines AUTH, SELECT and PING; the connection counts as up
 * when the last of those replies arrives, and only then are commands
 * accepted. When an attempt fails or a live connection drops, the resp_conn
 * is dropped, pending commands complete with an error, and a uv_timer_t
 * waits out a jittered, capped exponential backoff before the next attempt.
 * The same timer bounds a connect or handshake that gets no answer.
 *
 * With a redis+sentinel:// URL an attempt asks the sentinels for the master
 * (sentinel.h) instead of resolving a host name, and the handshake adds ROLE
 * (a server that is not the master is a failed attempt). A READONLY reply (a
 * master demoted by a failover) or a sentinel's +switch-master drops the
 * connection, and the next attempt asks again.
 *
 * Replies are handed to callers without copying: bk_reply is laid out exactly
 * like hiredis' redisReply (checked below).
 *
 * The compiled-in scripts (scripts.h) go by SHA: an `EVAL <SCRIPT_*> ...` is
 * sent as EVAL the first time on each connection since it came up (which
 * puts the script in the server's cache) and as EVALSHA after that, with a
 * copy of its arguments kept until the reply. A NOSCRIPT reply (the cache
 * was flushed, or the server evicted the script) means nothing ran: the same
 * call goes again as EVAL, and its caller sees only that reply; it may then
 * run after commands sent after it on the same connection. A user whose ACL
 * refuses EVALSHA gets EVAL from then on (logged once). */
#include "broker.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "backoff.h"
#include "grow.h"
#include "log.h"
#include "metrics.h"
#include "port_probe.h"
#include "resp_conn.h"
#include "scripts.h"
#include "sentinel.h"
#include "sha1.h"
#include "tls.h"
#include "transport.h"
#include "url.h"

#define BACKOFF_MIN_MS 100  /* first wait after a failure */
#define BACKOFF_MAX_MS 5000 /* the wait doubles up to this */
/* An attempt that gets no answer this long (a black-holed address, a stuck
 * server) is abandoned and retried like a refused one. */
#define CONNECT_TIMEOUT_MS 5000
/* A command unanswered this long (plus its own BLOCK time) means the server
 * or the path to it hangs: the connection is dropped and made again, and the
 * command fails with "connection lost". */
#define COMMAND_TIMEOUT_MS 10000

#define container_of(ptr, type, field) ((type *)((char *)(ptr)-offsetof(type, field)))

/* ---- bk_reply is redisReply ---- */

_Static_assert(BK_STRING == REDIS_REPLY_STRING && BK_ARRAY == REDIS_REPLY_ARRAY &&
                   BK_INTEGER == REDIS_REPLY_INTEGER && BK_NIL == REDIS_REPLY_NIL &&
                   BK_STATUS == REDIS_REPLY_STATUS && BK_ERROR == REDIS_REPLY_ERROR,
               "BK_* must equal REDIS_REPLY_*");
_Static_assert(sizeof(bk_reply) == sizeof(redisReply), "bk_reply size differs from redisReply");
#define SAME_FIELD(f, T)                                                 \
  _Static_assert(offsetof(bk_reply, f) == offsetof(redisReply, f) &&     \
                     _Generic(((redisReply *)0)->f, T : 1, default : 0), \
                 "bk_reply." #f " differs from redisReply." #f)
SAME_FIELD(type, int);
SAME_FIELD(integer, long long);
SAME_FIELD(len, size_t);
SAME_FIELD(str, char *);
SAME_FIELD(elements, size_t);
SAME_FIELD(element, struct redisReply **);
#undef SAME_FIELD

/* ---- types ---- */

struct rbroker {
  broker base;          /* first: a broker * is an rbroker * */
  uv_loop_t *loop;      /* borrowed */
  struct redis_url url; /* a copy; holds the password */
  int nopen;            /* connections opened and not yet closed */
  uint64_t command_timeout_ms;
  uint64_t rng;               /* xorshift state for the backoff jitter */
  char sha[SCRIPT_COUNT][41]; /* each compiled-in script's SHA1 */
  int evalsha_refused;        /* the ACL refused EVALSHA: scripts go as EVAL */
  struct tls_ctx *tls;        /* rediss://: the TLS settings; else NULL */
  struct sentinel *sentinel;  /* redis+sentinel://: where the master is; else NULL */
  struct rconn *conns;        /* open connections (for a master switch) */
};

struct rconn {
  struct rbroker *b;     /* not used once closing: the broker may be freed first */
  char name[64];         /* for log lines */
  bk_state_cb *state_cb; /* NULL allowed */
  bk_fault_cb *fault_cb; /* NULL allowed */
  void *data;
  struct resp_conn *rc;                /* current attempt or live connection; NULL in between */
  uv_timer_t timer;                    /* backoff between attempts; timeout during one */
  uv_getaddrinfo_t gai;                /* host name lookup while resolving */
  int resolving;                       /* gai is in flight; its callback is still due */
  int handshake_left;                  /* AUTH / SELECT / ROLE / PING replies still awaited */
  int step;                            /* index in steps of the next handshake reply */
  const char *steps[4];                /* the command each handshake reply answers */
  struct rconn *next_conn, *prev_conn; /* in b->conns */
  struct sentinel_ask *ask;            /* asking the sentinels for the master, NULL if not */
  struct port_probe *probe;            /* asking the port what it speaks, NULL if not */
  char ip[64];                         /* the address of this attempt or connection */
  int port;
  char addr[80];                /* "ip:port" with a sentinel, for log lines; else "" */
  int up;                       /* handshake done: commands accepted */
  int ever_up;                  /* it was up once: a failure now is a loss, not a first connect */
  int closing;                  /* bk_conn_close was called */
  unsigned sent_scripts;        /* bit i: script i went as EVAL since the connection came up */
  int timer_closed;             /* the timer's close callback ran */
  uv_timer_t watchdog;          /* fires when the oldest unanswered command is overdue */
  int watchdog_closed;          /* its close callback ran */
  struct rcmd *oldest, *newest; /* unanswered commands, in send order */
  struct rcmd *spare;           /* answered command records, kept for the next commands */
  int nspare;
  int attempts;          /* attempts since the connection was last up */
  int failures;          /* failed attempts and drops since last up: the backoff step */
  int in_outage;         /* an attempt failed since the connection was last up */
  uint64_t outage_start; /* loop ms of the first failure of this outage */
  const char *denied;    /* this attempt was refused (BK_FAULT_DENIED): the log message */
  const char *hint;      /* ... and what to do about it */
  int logged_lost;       /* this outage was logged */
  enum bk_fault fault;   /* the last failure since last up */
  char fault_why[512];   /* ... and why */
  char reason[512];      /* why we ended this attempt ourselves, "" if we did not */
  char lost[640];        /* "connection lost: ..." for drained callbacks */
  int timed_out;         /* the drop was the command timeout's (counted as such) */
  size_t bulk_max;       /* reply_limit: a longer bulk string drops the connection; 0: none */
  size_t reply_max;      /* ... and a reply that takes more; 0: none */
};

/* One accepted command: what its reply goes to. */
struct rcmd {
  struct rconn *c;
  bk_reply_cb *cb;
  void *data;
  struct rcmd *prev, *next; /* in c's list of unanswered commands */
  uint64_t deadline;        /* loop ms after which it is overdue */
  uint64_t sent_ms;         /* loop ms when it was sent; 0 for a blocking read (not timed) */
  struct resend *resend;    /* an EVALSHA: what to send as EVAL on NOSCRIPT */
};

/* luastream_redis_command_duration_seconds: from sending a command to its
 * reply, on the loop's clock (a millisecond's resolution), blocking reads
 * left out; luastream_redis_errors_total{kind}. */
static const double RTT_BOUNDS[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                    0.1,   0.25,   0.5,   1,    2.5};

static struct metric *rtt_series(void) {
  static struct metric *m;
  static unsigned generation;
  if (m == NULL || generation != metrics_generation()) {
    generation = metrics_generation();
    m = metrics_series(metrics_family("luastream_redis_command_duration_seconds",
                                      "From sending a command to Redis to its reply (blocking "
                                      "reads left out)",
                                      METRIC_HISTOGRAM, 0, NULL, RTT_BOUNDS,
                                      (int)(sizeof RTT_BOUNDS / sizeof *RTT_BOUNDS)),
                       NULL);
  }
  return m;
}

/* Every kind's series is made with the broker, at 0: Prometheus cannot see
 * the first increase of a series whose first sample is already 1. */
enum error_kind {
  ERR_CONNECTION_LOST,
  ERR_CONNECT_FAILED,
  ERR_DENIED,
  ERR_TIMEOUT,
  ERR_REPLY,
  ERR_KINDS
};
static const char *const ERROR_KINDS[ERR_KINDS] = {"connection_lost", "connect_failed", "denied",
                                                   "timeout", "error_reply"};

static struct metric *error_series(enum error_kind kind) {
  static const char *const labels[] = {"kind"};
  struct metric_family *f = metrics_family(
      "luastream_redis_errors_total",
      "Redis failures by kind: connection_lost, connect_failed, denied, timeout, error_reply",
      METRIC_COUNTER, 1, labels, NULL, 0);
  const char *values[] = {ERROR_KINDS[kind]};
  return metrics_series(f, values);
}

static void count_error(enum error_kind kind) { metric_add(error_series(kind), 1); }

/* An EVALSHA's arguments, copied: argv[0] and argv[1] are set to the command
 * and the script (its SHA, or its compiled-in text), the others point into
 * bytes. One allocation. */
struct resend {
  int script;
  int argc;
  const char **argv;
  size_t *argvlen;
  char bytes[];
};

static void start_attempt(struct rconn *c);

/* ---- up and down ---- */

static uint64_t next_rand(struct rbroker *b) {
  uint64_t x = b->rng;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return b->rng = x;
}

/* Logs a failed attempt: one error when an outage starts and the rest at
 * debug (a server that stays down for an hour must not write a line every 5
 * seconds), but a refusal at every attempt: that needs a person, and the
 * backoff already spaces the lines out. */
static void report(struct rconn *c, const char *why) {
  if (!c->timed_out)
    count_error(c->denied                       ? ERR_DENIED
                : !c->logged_lost && c->ever_up ? ERR_CONNECTION_LOST
                                                : ERR_CONNECT_FAILED);
  c->timed_out = 0;
  char attempt[16];
  snprintf(attempt, sizeof attempt, "%d", c->attempts);
  if (bk_error_is_too_large(why)) {
    /* Not an outage: the server is fine, a reply was refused (reply_limit). */
    log_line(LOG_WARN, NULL, "redis reply refused as too large, reconnecting", "redis",
             c->b->base.name, "conn", c->name, "master", c->addr[0] ? c->addr : NULL, "error", why,
             NULL);
  } else if (c->denied) {
    c->logged_lost = 1;
    log_line(LOG_ERROR, NULL, c->denied, "redis", c->b->base.name, "conn", c->name, "master",
             c->addr[0] ? c->addr : NULL, LOG_NUMBER "attempt", attempt, "error", why, "hint",
             c->hint, NULL);
  } else if (!c->logged_lost) {
    c->logged_lost = 1;
    log_line(
        LOG_ERROR, NULL,
        c->ever_up ? "redis connection lost, reconnecting" : "cannot connect to redis, retrying",
        "redis", c->b->base.name, "conn", c->name, "master", c->addr[0] ? c->addr : NULL, "error",
        why, NULL);
  } else {
    log_line(LOG_DEBUG, NULL, "redis connect attempt failed", "redis", c->b->base.name, "conn",
             c->name, "master", c->addr[0] ? c->addr : NULL, LOG_NUMBER "attempt", attempt, "error",
             why, NULL);
  }
}

static void on_timer(uv_timer_t *t);

static void schedule_retry(struct rconn *c) {
  uint64_t base = backoff_nth(c->failures, BACKOFF_MIN_MS, BACKOFF_MAX_MS);
  /* Half fixed, half random: hosts that lost the same server do not come
   * back in lockstep, and the wait still grows. */
  uint64_t delay = base / 2 + next_rand(c->b) % (base / 2 + 1);
  uv_timer_start(&c->timer, on_timer, delay, 0);
}

/* An attempt failed or a live connection dropped; the context, if there was
 * one, is gone or going. */
static void went_down(struct rconn *c, const char *why) {
  int was_up = c->up;
  c->up = 0;
  if (c->closing) return;
  if (!c->in_outage) {
    c->in_outage = 1;
    c->outage_start = uv_now(c->b->loop);
  }
  c->failures++;
  report(c, why);
  c->fault = c->denied ? BK_FAULT_DENIED : BK_FAULT_DOWN;
  if (!c->denied) snprintf(c->fault_why, sizeof c->fault_why, "%s", why);
  if (was_up && c->state_cb) {
    c->state_cb(c->data, (bk_conn *)c, 0);
    if (c->closing) return; /* closed from the callback */
  }
  if (c->fault_cb) {
    char copy[sizeof c->fault_why];
    snprintf(copy, sizeof copy, "%s", c->fault_why);
    c->fault_cb(c->data, (bk_conn *)c, c->fault, copy);
    if (c->closing) return;
  }
  schedule_retry(c);
}

static void went_up(struct rconn *c) {
  char attempts[16], down_ms[24];
  int had_outage = c->in_outage;
  /* A +switch-master during the handshake (on_switch) set why this server
   * is no longer the one, and armed the timer that drops it: let it. */
  if (c->reason[0]) return;
  uv_timer_stop(&c->timer); /* the handshake timeout */
  c->up = 1;
  c->ever_up = 1;
  c->sent_scripts = 0; /* perhaps a server that never saw them */
  snprintf(attempts, sizeof attempts, "%d", c->attempts);
  snprintf(down_ms, sizeof down_ms, "%llu",
           (unsigned long long)(uv_now(c->b->loop) - c->outage_start));
  /* A first connect at the first try is routine; a recovery is news. */
  enum log_level level = had_outage || c->attempts > 1 ? LOG_INFO : LOG_DEBUG;
  log_line(level, NULL, "redis connected", "redis", c->b->base.name, "conn", c->name, "master",
           c->addr[0] ? c->addr : NULL, LOG_NUMBER "attempts", attempts, LOG_NUMBER "down_ms",
           had_outage ? down_ms : NULL, NULL);
  c->attempts = 0;
  c->failures = 0;
  c->in_outage = 0;
  c->logged_lost = 0;
  c->fault = BK_FAULT_NONE;
  c->fault_why[0] = '\0';
  if (c->state_cb) c->state_cb(c->data, (bk_conn *)c, 1);
}

/* The resp_conn ended (it told us, or we dropped it). Called from several
 * places for the same connection; only the first counts. */
static void ctx_gone(struct rconn *c, const char *why) {
  if (c->rc == NULL) return;
  c->rc = NULL;
  if (c->closing) return;
  uv_timer_stop(&c->timer);
  went_down(c, why);
}

/* Ends the connection as a failure would: pending commands fail with why
 * (when the reply callback running now returns, if one does), then
 * on_down reports it. */
static void drop(struct rconn *c, const char *why) {
  if (why != c->reason) snprintf(c->reason, sizeof c->reason, "%s", why);
  resp_conn_drop(c->rc, c->reason);
}

/* A TLS failure that retrying cannot fix: what failed and what to pass are
 * in why. A cluster node that does not speak TLS was announced with its
 * plaintext port. */
static const char *tls_denied(struct rconn *c, const char *why) {
  c->denied = "redis TLS handshake failed";
  c->hint = NULL;
  if (c->b->url.cluster_node && strstr(why, "not speaking TLS"))
    snprintf(c->fault_why, sizeof c->fault_why,
             "TLS: cluster node %s:%d is not speaking TLS: the cluster announces its plaintext "
             "ports; with rediss:// every node must announce its TLS port (tls-cluster yes)",
             c->ip, c->port);
  else
    snprintf(c->fault_why, sizeof c->fault_why, "%s", why);
  return c->fault_why;
}

/* ---- the wrong scheme? ---- */

static void on_probed(void *data, int answered) {
  struct rconn *c = data;
  c->probe = NULL;
  if (answered && c->b->tls)
    snprintf(c->reason, sizeof c->reason, "%s",
             tls_denied(c,
                        "TLS: the server is not speaking TLS (it answers in plaintext): a "
                        "plaintext port takes redis://, not rediss://"));
  if (answered && !c->b->tls) {
    c->denied = "redis refused the connection";
    c->hint = NULL;
    snprintf(c->fault_why, sizeof c->fault_why,
             "TLS: the server speaks TLS on this port and closed the plaintext connection "
             "before answering: use rediss://, not redis://");
    snprintf(c->reason, sizeof c->reason, "%s", c->fault_why);
  }
  went_down(c, c->reason);
}

/* A first connection that failed as the wrong scheme would make it fail:
 * the port is asked in the other scheme before the failure counts (a
 * refusal then, so that the start stops; else a failure retried). The
 * resp_conn is gone. */
static void probe_scheme(struct rconn *c, const char *why) {
  if (why != c->reason) snprintf(c->reason, sizeof c->reason, "%s", why);
  uv_timer_stop(&c->timer);
  c->probe = port_probe_start(c->b->loop, c->ip, c->port, c->b->tls == NULL, on_probed, c);
  if (c->probe == NULL) went_down(c, c->reason);
}

/* Whether a failure of this connection could be the wrong scheme's: a
 * first TCP connection (one that was up once has the right scheme). */
static bool scheme_in_doubt(const struct rconn *c) {
  return !c->ever_up && !c->closing && c->ip[0];
}

/* The connection ended by itself, or by drop. */
static void on_down(void *data, const char *why, enum transport_end how) {
  struct rconn *c = data;
  if (how == TRANSPORT_REFUSED && !c->denied) why = tls_denied(c, why);
  if (how == TRANSPORT_UNANSWERED && scheme_in_doubt(c)) {
    c->rc = NULL;
    probe_scheme(c, why);
    return;
  }
  ctx_gone(c, why);
}

static bool starts(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A handshake step answered with an error: is it a refusal that only a
 * person can lift? Sets c->denied, c->hint and c->fault_why if so. A busy
 * server (LOADING, BUSY, MASTERDOWN, too many clients) is not one. */
static void classify_refusal(struct rconn *c, const char *step, const char *err) {
  c->denied = NULL;
  if (strstr(err, "max number of clients") != NULL) return;
  const char *what;
  if (starts(err, "WRONGPASS") || starts(err, "NOAUTH") ||
      (!strcmp(step, "AUTH") && starts(err, "ERR"))) {
    c->denied = "redis authentication failed";
    c->hint = "check the user and password of the redis URL";
    what = "authentication failed";
  } else if (starts(err, "NOPERM")) {
    c->denied = "redis permission denied";
    c->hint = "grant the user this command (ACL SETUSER) or use another user";
    what = "permission denied";
  } else if (!strcmp(step, "SELECT") && starts(err, "ERR")) {
    c->denied = "redis refused the database";
    c->hint = "check the db number of the redis URL";
    what = "SELECT failed";
  } else {
    return;
  }
  snprintf(c->fault_why, sizeof c->fault_why, "%s: %s", what, err);
}

static bool role_is_master(const redisReply *r) {
  return r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
         r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, "master") == 0;
}

static void on_handshake(void *privdata, redisReply *reply, const char *err) {
  struct rconn *c = privdata;
  (void)err;
  if (reply == NULL || c->closing) return; /* torn down: whoever did it reports why */
  const char *step = c->steps[c->step++];
  if (reply->type == REDIS_REPLY_ERROR) {
    snprintf(c->reason, sizeof c->reason, "%s failed: %s", step, reply->str);
    classify_refusal(c, step, reply->str);
    drop(c, c->reason);
    return;
  }
  if (!strcmp(step, "ROLE") && !role_is_master(reply)) {
    /* The sentinels' answer is stale (a failover under way): a failed
     * attempt like any other; the next one asks them again. */
    snprintf(c->reason, sizeof c->reason, "%.70s is not the master of %.60s (ROLE: %.16s)", c->addr,
             c->b->url.service,
             reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 &&
                     reply->element[0]->type == REDIS_REPLY_STRING
                 ? reply->element[0]->str
                 : "unexpected reply");
    drop(c, c->reason);
    return;
  }
  if (--c->handshake_left == 0) went_up(c);
}

/* ---- command timeouts ---- */

static void on_watchdog(uv_timer_t *t);

/* Arms the watchdog for the oldest unanswered command, or stops it. */
static void watch(struct rconn *c) {
  if (c->closing) return;
  if (c->oldest == NULL) {
    uv_timer_stop(&c->watchdog);
    return;
  }
  uint64_t now = uv_now(c->b->loop);
  uv_timer_start(&c->watchdog, on_watchdog,
                 c->oldest->deadline > now ? c->oldest->deadline - now : 0, 0);
}

static void on_watchdog(uv_timer_t *t) {
  struct rconn *c = container_of(t, struct rconn, watchdog);
  if (c->oldest == NULL || c->rc == NULL) return;
  if (uv_now(c->b->loop) < c->oldest->deadline) return watch(c);
  char why[96];
  snprintf(why, sizeof why, "no reply to a command within %llu ms",
           (unsigned long long)c->b->command_timeout_ms);
  count_error(ERR_TIMEOUT);
  c->timed_out = 1;
  drop(c, why);
}

/* BLOCK ms in argv: how long the server may rightly take to answer. */
static uint64_t block_ms(int argc, const char **argv, const size_t *argvlen) {
  for (int i = 0; i + 1 < argc; i++)
    if (argvlen[i] == 5 && strncasecmp(argv[i], "BLOCK", 5) == 0)
      return strtoull(argv[i + 1], NULL, 10);
  return 0;
}

static void unlink_cmd(struct rconn *c, struct rcmd *k) {
  if (k->prev)
    k->prev->next = k->next;
  else
    c->oldest = k->next;
  if (k->next)
    k->next->prev = k->prev;
  else
    c->newest = k->prev;
}

#define SPARE_CMDS_MAX 256

static void link_cmd(struct rconn *c, struct rcmd *k) {
  k->next = NULL;
  k->prev = c->newest;
  if (c->newest)
    c->newest->next = k;
  else
    c->oldest = k;
  c->newest = k;
  if (k->prev == NULL) watch(c);
}

static void on_reply(void *privdata, redisReply *r, const char *err);

static bool reply_starts(const redisReply *r, const char *prefix) {
  size_t n = strlen(prefix);
  return r->type == REDIS_REPLY_ERROR && r->len >= n && memcmp(r->str, prefix, n) == 0;
}

/* An EVALSHA answered: NOSCRIPT, or the ACL refusing EVALSHA itself, mean
 * nothing ran; then the same call goes again as EVAL and true is returned
 * (the caller gets that call's reply instead). */
static bool resent_as_eval(struct rconn *c, struct rcmd *k, const redisReply *r) {
  struct resend *s = k->resend;
  if (r == NULL || c->closing || c->rc == NULL) return false;
  bool refused = reply_starts(r, "NOPERM") && strstr(r->str, "'evalsha'") != NULL;
  if (!reply_starts(r, "NOSCRIPT") && !refused) return false;
  if (refused && !c->b->evalsha_refused) {
    c->b->evalsha_refused = 1;
    log_line(LOG_WARN, NULL, "the redis user may not run EVALSHA: scripts are sent as text",
             "redis", c->b->base.name, "hint", "grant +evalsha (ACL SETUSER)", NULL);
  }
  s->argv[0] = "EVAL";
  s->argvlen[0] = 4;
  s->argv[1] = script_text(s->script);
  s->argvlen[1] = strlen(s->argv[1]);
  if (resp_conn_send(c->rc, s->argc, s->argv, s->argvlen, on_reply, k) != 0) return false;
  free(s);
  k->resend = NULL;
  k->deadline = uv_now(c->b->loop) + c->b->command_timeout_ms;
  link_cmd(c, k);
  return true;
}

/* With sentinels, a READONLY reply means the server was demoted to a
 * replica by a failover: the connection is dropped (when this callback
 * returns) and made again, and the sentinels asked anew. The commands on it
 * fail as after any lost connection, so the host sends what it must again. */
static bool demoted(struct rconn *c, const redisReply *r) {
  if (c->closing || c->b->sentinel == NULL || c->rc == NULL || r->type != REDIS_REPLY_ERROR ||
      (strncmp(r->str, "READONLY", 8) != 0 && strstr(r->str, "READONLY You can't write") == NULL))
    return false;
  if (!c->reason[0])
    snprintf(c->reason, sizeof c->reason, "%.70s answered READONLY: no longer the master of %.60s",
             c->addr, c->b->url.service);
  drop(c, c->reason); /* when this callback returns */
  return true;
}

static void on_reply(void *privdata, redisReply *r, const char *why) {
  struct rcmd *k = privdata;
  struct rconn *c = k->c;
  unlink_cmd(c, k);
  if (c->oldest == NULL || k->prev == NULL) watch(c);
  if (k->resend) {
    if (resent_as_eval(c, k, r)) return;
    free(k->resend);
    k->resend = NULL;
  }
  const char *err = NULL;
  if (r && k->sent_ms) {
    metrics_observe(rtt_series(), (double)(uv_now(c->b->loop) - k->sent_ms) / 1000.0);
  }
  /* BUSYGROUP answers the create every start sends for a group that exists:
   * expected, not a failure an operator should see. */
  if (r && ((redisReply *)r)->type == REDIS_REPLY_ERROR &&
      strncmp(((redisReply *)r)->str, "BUSYGROUP ", 10) != 0)
    count_error(ERR_REPLY);
  if (r && demoted(c, r)) {
    r = NULL; /* fails as if the connection was lost */
    why = c->reason;
  }
  if (r == NULL) {
    if (c->closing) {
      err = "connection closed";
    } else if (bk_error_is_too_large(why)) {
      err = why;
    } else {
      snprintf(c->lost, sizeof c->lost, "connection lost: %s", why);
      err = c->lost;
    }
  }
  if (k->cb) k->cb(k->data, (const bk_reply *)r, err);
  if (c->nspare < SPARE_CMDS_MAX) { /* a command per handler call: no malloc each */
    k->next = c->spare;
    c->spare = k;
    c->nspare++;
  } else {
    free(k);
  }
}

/* ---- attempts ---- */

static int handshake_cmd(struct rconn *c, const char *step, int argc, const char **argv) {
  size_t len[3];
  for (int i = 0; i < argc; i++) len[i] = strlen(argv[i]);
  if (resp_conn_send(c->rc, argc, argv, len, on_handshake, c) != 0) return -1;
  c->steps[c->handshake_left++] = step;
  return 0;
}

/* AUTH, SELECT, ROLE (with sentinels: the server must be the master) and
 * PING, pipelined. PING always goes last: the connection is
 * up when it answers, which proves the server serves commands (not LOADING),
 * and makes the state callback run inside a reply callback (where closing the
 * connection is safe). */
static int send_handshake(struct rconn *c) {
  const struct redis_url *u = &c->b->url;
  char db[16];
  snprintf(db, sizeof db, "%d", u->db);
  /* AUTH user password (Redis 6 ACL) or AUTH password. */
  const char *auth[3] = {"AUTH", u->user[0] ? u->user : u->password, u->password};
  const char *select[2] = {"SELECT", db};
  const char *ping[1] = {"PING"};
  c->step = 0;
  c->handshake_left = 0;
  if (u->password[0]) {
    if (handshake_cmd(c, "AUTH", u->user[0] ? 3 : 2, auth) != 0) return -1;
  }
  if (u->db) {
    if (handshake_cmd(c, "SELECT", 2, select) != 0) return -1;
  }
  if (c->b->sentinel) {
    const char *role[1] = {"ROLE"};
    if (handshake_cmd(c, "ROLE", 1, role) != 0) return -1;
  }
  return handshake_cmd(c, "PING", 1, ping);
}

/* ip: a numeric address for TCP, NULL for the unix socket. */
static void connect_now(struct rconn *c, const char *ip, int port) {
  const struct redis_url *u = &c->b->url;
  char why[600];
  snprintf(c->ip, sizeof c->ip, "%s", ip ? ip : "");
  c->port = port;
  if (c->b->sentinel)
    snprintf(c->addr, sizeof c->addr, strchr(c->ip, ':') ? "[%s]:%d" : "%s:%d", c->ip, port);
  /* A node named by the sentinels or CLUSTER SLOTS is verified by its
   * address; the URL's own host by the name written there. */
  struct transport_target to = {ip, port, ip ? NULL : u->path, c->b->tls,
                                c->b->sentinel ? ip : u->host};
  c->rc = resp_conn_open(c->b->loop, &to, c->b->base.name, on_down, c, why, sizeof why);
  if (c->rc == NULL) {
    went_down(c, why);
    return;
  }
  resp_conn_limit(c->rc, c->bulk_max, c->reply_max);
  if (send_handshake(c) != 0) {
    drop(c, "out of memory");
    return;
  }
  uv_timer_start(&c->timer, on_timer, CONNECT_TIMEOUT_MS, 0);
}

static void maybe_free(struct rconn *c);

static void resolve_failed(struct rconn *c, int uv_err) {
  char why[320];
  snprintf(why, sizeof why, "cannot resolve %s: %s", c->b->url.host, uv_strerror(uv_err));
  went_down(c, why);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  struct rconn *c = container_of(req, struct rconn, gai);
  char ip[64];
  c->resolving = 0;
  if (c->closing) {
    uv_freeaddrinfo(res);
    maybe_free(c);
    return;
  }
  if (status < 0) {
    resolve_failed(c, status);
    return;
  }
  /* Prefer IPv4 as hiredis' own lookup does, so "localhost" reaches a server
   * bound to 127.0.0.1 only. */
  const struct addrinfo *pick = res;
  for (const struct addrinfo *ai = res; ai; ai = ai->ai_next)
    if (ai->ai_family == AF_INET) {
      pick = ai;
      break;
    }
  if (pick->ai_family == AF_INET)
    uv_ip4_name((const struct sockaddr_in *)(const void *)pick->ai_addr, ip, sizeof ip);
  else
    uv_ip6_name((const struct sockaddr_in6 *)(const void *)pick->ai_addr, ip, sizeof ip);
  uv_freeaddrinfo(res);
  connect_now(c, ip, c->b->url.port);
}

/* The sentinels' answer: connect to the master they gave. */
static void on_master(void *data, const char *ip, int port, const char *why, int denied) {
  struct rconn *c = data;
  c->ask = NULL;
  if (ip) {
    connect_now(c, ip, port);
    return;
  }
  if (denied && strstr(why, "TLS: ")) {
    c->denied = "redis TLS handshake failed";
    c->hint = NULL;
    snprintf(c->fault_why, sizeof c->fault_why, "%s", why);
  } else if (denied) {
    c->denied = "redis sentinels refused the credentials";
    c->hint = "check sentinel_user and sentinel_password in the redis URL";
    snprintf(c->fault_why, sizeof c->fault_why, "%s", why);
  }
  went_down(c, why);
}

/* A sentinel announced a new master: connections to any other address are
 * dropped (from their timers, not from inside this callback) and made again,
 * which asks the sentinels anew; one waiting out its backoff tries now. */
static void on_switch(void *data, const char *ip, int port) {
  struct rbroker *b = data;
  for (struct rconn *c = b->conns; c; c = c->next_conn) {
    if (c->closing || c->ask || c->probe) continue;
    if (c->rc == NULL) {
      if (!c->up) uv_timer_start(&c->timer, on_timer, 0, 0);
      continue;
    }
    if (c->port == port && strcmp(c->ip, ip) == 0) continue;
    snprintf(c->reason, sizeof c->reason, "+switch-master: the master of %.60s moved to %.63s:%d",
             b->url.service, ip, port);
    uv_timer_start(&c->timer, on_timer, 0, 0);
  }
}

static void start_attempt(struct rconn *c) {
  const struct redis_url *u = &c->b->url;
  char attempt[16];
  c->attempts++;
  c->reason[0] = '\0';
  c->denied = NULL;
  snprintf(attempt, sizeof attempt, "%d", c->attempts);
  log_line(LOG_DEBUG, NULL, "redis connecting", "redis", c->b->base.name, "conn", c->name,
           LOG_NUMBER "attempt", attempt, NULL);
  if (c->b->sentinel) {
    c->addr[0] = '\0';
    if ((c->ask = sentinel_ask(c->b->sentinel, on_master, c)) == NULL)
      went_down(c, "out of memory");
    return;
  }
  if (u->path[0]) {
    connect_now(c, NULL, 0);
    return;
  }
  if (url_is_ip(u->host)) {
    connect_now(c, u->host, u->port);
    return;
  }
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = uv_getaddrinfo(c->b->loop, &c->gai, on_resolved, u->host, NULL, &hints);
  if (rc != 0) {
    resolve_failed(c, rc);
    return;
  }
  c->resolving = 1;
}

/* One timer, two jobs: while an attempt runs it is the timeout, otherwise
 * the backoff before the next attempt. */
static void on_timer(uv_timer_t *t) {
  struct rconn *c = container_of(t, struct rconn, timer);
  if (c->rc) {
    if (c->reason[0]) { /* on_switch asked for the drop */
    } else if (resp_conn_tls_unanswered(c->rc) && scheme_in_doubt(c)) {
      /* A plaintext Redis waits for the end of a line that never comes; a
       * stalled TLS server looks the same until asked. */
      snprintf(c->reason, sizeof c->reason, "no answer to the TLS handshake within %d ms",
               CONNECT_TIMEOUT_MS);
      resp_conn_close(c->rc, c->reason); /* not inside its callbacks: at once */
      c->rc = NULL;
      probe_scheme(c, c->reason);
      return;
    } else {
      snprintf(c->reason, sizeof c->reason, "no answer within %d ms", CONNECT_TIMEOUT_MS);
    }
    drop(c, c->reason);
    return;
  }
  start_attempt(c);
}

/* ---- broker_ops ---- */

static void maybe_free(struct rconn *c) {
  /* No resp_conn is left by now: one closed inside its reply callback ends
   * when that callback returns, and the loop runs close callbacks and
   * lookups only after that. */
  if (!c->timer_closed || !c->watchdog_closed || c->resolving) return;
  while (c->spare) {
    struct rcmd *k = c->spare;
    c->spare = k->next;
    free(k);
  }
  free(c);
}

static void on_timer_closed(uv_handle_t *h) {
  struct rconn *c = container_of(h, struct rconn, timer);
  c->timer_closed = 1;
  maybe_free(c);
}

static void on_watchdog_closed(uv_handle_t *h) {
  struct rconn *c = container_of(h, struct rconn, watchdog);
  c->watchdog_closed = 1;
  maybe_free(c);
}

static bk_conn *rconn_open(broker *bb, const char *name, bk_state_cb *state_cb, void *data) {
  struct rbroker *b = (struct rbroker *)bb;
  struct rconn *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  c->b = b;
  snprintf(c->name, sizeof c->name, "%s", name ? name : "");
  c->state_cb = state_cb;
  c->data = data;
  uv_timer_init(b->loop, &c->timer);
  uv_timer_init(b->loop, &c->watchdog);
  b->nopen++;
  c->next_conn = b->conns;
  if (b->conns) b->conns->prev_conn = c;
  b->conns = c;
  if (b->sentinel) sentinel_watch(b->sentinel, 1);
  start_attempt(c); /* never calls back synchronously: up needs a reply */
  return (bk_conn *)c;
}

/* A copy of an EVAL's arguments from the third on (numkeys, keys, args). */
static struct resend *resend_new(int script, int argc, const char **argv, const size_t *argvlen) {
  size_t bytes = 0;
  for (int i = 2; i < argc; i++) bytes += argvlen[i];
  size_t ptrs = (size_t)argc * (sizeof(char *) + sizeof(size_t));
  struct resend *s = malloc(sizeof *s + ptrs + bytes);
  if (s == NULL) return NULL;
  s->script = script;
  s->argc = argc;
  s->argv = (const char **)(void *)s->bytes;
  s->argvlen = (size_t *)(void *)(s->bytes + (size_t)argc * sizeof(char *));
  char *p = s->bytes + ptrs;
  for (int i = 2; i < argc; i++) {
    memcpy(p, argv[i], argvlen[i]);
    s->argv[i] = p;
    s->argvlen[i] = argvlen[i];
    p += argvlen[i];
  }
  return s;
}

/* Up, not closing, with a context to write to. */
static bool rconn_usable(const struct rconn *c) { return c->up && !c->closing && c->rc != NULL; }

static int rconn_command(bk_conn *bc, int argc, const char **argv, const size_t *argvlen,
                         bk_reply_cb *cb, void *data) {
  struct rconn *c = (struct rconn *)bc;
  if (!rconn_usable(c)) return -1;
  struct rcmd *k = c->spare;
  if (k) {
    c->spare = k->next;
    c->nspare--;
  } else if ((k = malloc(sizeof *k)) == NULL) {
    return -1;
  }
  k->c = c;
  k->cb = cb;
  k->data = data;
  k->resend = NULL;
  int script = argc >= 3 && argvlen[0] == 4 && strncasecmp(argv[0], "EVAL", 4) == 0
                   ? script_index(argv[1])
                   : -1;
  if (script >= 0 && (c->sent_scripts & (1u << script)) && !c->b->evalsha_refused) {
    if ((k->resend = resend_new(script, argc, argv, argvlen)) == NULL) {
      free(k);
      return -1;
    }
    k->resend->argv[0] = "EVALSHA";
    k->resend->argvlen[0] = 7;
    k->resend->argv[1] = c->b->sha[script];
    k->resend->argvlen[1] = 40;
    argv = k->resend->argv;
    argvlen = k->resend->argvlen;
  }
  /* Refused while the connection ends, e.g. when a callback that learned of
   * the drop tries to send more. */
  if (resp_conn_send(c->rc, argc, argv, argvlen, on_reply, k) != 0) {
    free(k->resend);
    free(k);
    return -1;
  }
  if (script >= 0) c->sent_scripts |= 1u << script; /* the server caches what EVAL ran */
  uint64_t blocks = block_ms(argc, argv, argvlen);
  k->sent_ms = blocks ? 0 : uv_now(c->b->loop);
  k->deadline = uv_now(c->b->loop) + c->b->command_timeout_ms + blocks;
  link_cmd(c, k);
  return 0;
}

static int rconn_connected(bk_conn *bc) {
  struct rconn *c = (struct rconn *)bc;
  return c->up && !c->closing;
}

static void rconn_flush(bk_conn *bc) {
  struct rconn *c = (struct rconn *)bc;
  if (rconn_usable(c)) resp_conn_flush(c->rc);
}

static enum bk_fault rconn_fault(bk_conn *bc, char *why, size_t len) {
  struct rconn *c = (struct rconn *)bc;
  if (len) snprintf(why, len, "%s", c->fault == BK_FAULT_NONE ? "" : c->fault_why);
  return c->fault;
}

static void rconn_on_fault(bk_conn *bc, bk_fault_cb *cb) { ((struct rconn *)bc)->fault_cb = cb; }

static void rconn_reply_limit(bk_conn *bc, size_t bulk_max, size_t reply_max) {
  struct rconn *c = (struct rconn *)bc;
  c->bulk_max = bulk_max;
  c->reply_max = reply_max;
  if (c->rc) resp_conn_limit(c->rc, bulk_max, reply_max);
}

static void rconn_close(bk_conn *bc) {
  struct rconn *c = (struct rconn *)bc;
  if (c == NULL || c->closing) return;
  c->closing = 1;
  c->up = 0;
  if (c->prev_conn)
    c->prev_conn->next_conn = c->next_conn;
  else
    c->b->conns = c->next_conn;
  if (c->next_conn) c->next_conn->prev_conn = c->prev_conn;
  if (--c->b->nopen == 0 && c->b->sentinel) sentinel_watch(c->b->sentinel, 0);
  sentinel_ask_cancel(c->ask);
  c->ask = NULL;
  port_probe_cancel(c->probe);
  c->probe = NULL;
  c->b = NULL; /* the broker may be freed before this conn's memory */
  if (c->resolving) uv_cancel((uv_req_t *)&c->gai); /* its callback still runs */
  if (c->rc) {
    /* Pending commands fail with "connection closed", now or, inside one of
     * this connection's reply callbacks, as soon as that callback returns. */
    resp_conn_close(c->rc, "connection closed");
    c->rc = NULL;
  }
  uv_close((uv_handle_t *)&c->timer, on_timer_closed);
  uv_close((uv_handle_t *)&c->watchdog, on_watchdog_closed);
}

static void rbroker_free(broker *bb) {
  struct rbroker *b = (struct rbroker *)bb;
  if (b == NULL) return;
  if (b->nopen != 0) {
    /* Open connections point at the broker: freeing it now would turn into
     * a use-after-free on their next reconnect. */
    log_line(LOG_ERROR, NULL, "broker freed with open connections", "redis", b->base.name, NULL);
    abort();
  }
  sentinel_free(b->sentinel);
  tls_ctx_put(b->tls);
  free(b);
}

void broker_redis_set_command_timeout(broker *bb, uint64_t ms) {
  ((struct rbroker *)bb)->command_timeout_ms = ms;
}

static const struct broker_ops redis_ops = {
    .conn_open = rconn_open,
    .command = rconn_command,
    .connected = rconn_connected,
    .flush = rconn_flush,
    .conn_close = rconn_close,
    .free = rbroker_free,
    .fault = rconn_fault,
    .on_fault = rconn_on_fault,
    .reply_limit = rconn_reply_limit,
};

broker *broker_redis_new(struct uv_loop_s *loop, const struct redis_url *url) {
  if (loop == NULL || url == NULL) return NULL;
  struct rbroker *b = calloc(1, sizeof *b);
  if (b == NULL) return NULL;
  b->base.ops = &redis_ops;
  snprintf(b->base.name, sizeof b->base.name, "%s", url->redacted);
  b->loop = loop;
  b->url = *url;
  b->rng = (uv_hrtime() ^ (uint64_t)(uintptr_t)b) | 1;
  b->command_timeout_ms = COMMAND_TIMEOUT_MS;
  for (int k = 0; k < ERR_KINDS; k++) error_series(k);
  char err[600];
  if (url->tls.on && (b->tls = tls_ctx_get(&url->tls, err, sizeof err)) == NULL) {
    log_line(LOG_ERROR, NULL, "cannot set up TLS", "redis", b->base.name, "error", err, NULL);
    free(b);
    return NULL;
  }
  if (url->nsentinels > 0 &&
      (b->sentinel = sentinel_new(loop, url, b->base.name, b->tls, on_switch, b)) == NULL) {
    tls_ctx_put(b->tls);
    free(b);
    return NULL;
  }
  for (int i = 0; i < SCRIPT_COUNT; i++) {
    const char *text = script_text(i);
    sha1_hex(text, strlen(text), b->sha[i]);
  }

  /* OpenSSL writes with write(2): a server that vanished between two
   * commands would kill the whole host with SIGPIPE. Ignored, the write fails
   * with EPIPE and the connection is retried. A disposition the program chose
   * itself is left alone. */
  struct sigaction sa;
  if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sigaction(SIGPIPE, &sa, NULL);
  }
  return &b->base;
}
