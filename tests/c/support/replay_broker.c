/* replay_broker: see replay_broker.h. Tests only.
 *
 * Every connection opening and every command gets a sequence number. The
 * delivery timer handles, in sequence order, what existed when it fired: it
 * announces connections (up) and answers commands that head their
 * connection's queue and have a reply. Anything sent meanwhile re-arms it. */
#include "replay_broker.h"

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* bk_reply is redisReply (broker_redis.c checks every field). */
_Static_assert(sizeof(bk_reply) == sizeof(redisReply) && BK_ARRAY == REDIS_REPLY_ARRAY &&
                   offsetof(bk_reply, element) == offsetof(redisReply, element),
               "bk_reply must be laid out as redisReply");

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (p == NULL) abort();
  return p;
}

static char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(xmalloc(n), s, n);
}

struct rule {
  struct rule *next;
  char *pattern;
  char *resp;
  bool used;
};

struct alias {
  struct alias *next;
  char *word, *name;
};

struct text {
  struct text *next;
  char s[];
};

struct sent {
  char *full;       /* "conn: command" */
  const char *text; /* the command, inside full */
  size_t connlen;
};

struct rcmd {
  struct rcmd *next;
  uint64_t seq;
  char *resp;  /* NULL: no answer, pending until the connection closes */
  size_t sent; /* index in rb->sent */
  bk_reply_cb *cb;
  void *data;
};

struct bk_conn {
  struct replay_broker *rb;
  struct bk_conn *next;
  char *name;
  bk_state_cb *state_cb;
  bk_fault_cb *fault_cb;
  void *data;
  uint64_t seq; /* when it was opened */
  bool up, closing;
  struct rcmd *head, *tail;
  size_t bulk_max, reply_max; /* the last bk_conn_reply_limit */
};

struct replay_broker {
  broker base; /* first */
  ltimer *timer;
  uint64_t seq;
  struct bk_conn *conns;
  struct rule *expects, *defaults;
  struct alias *aliases;
  struct sent *sent;
  size_t nsent, sent_cap;
  struct text *logs; /* every replay_log result, freed with the broker */
  replay_hook_fn *hook;
  void *hook_data;
  replay_respond_fn *respond;
  void *respond_data;
  bool held;     /* replay_hold: nothing is delivered */
  bool dropped;  /* replay_drop: nothing comes up, commands are refused */
  char why[200]; /* replay_drop's reason */
};

/* ---- matching ---- */

/* Matches argv words against a pattern; *rest gets how many words `**` took. */
static bool match(const char *pattern, int argc, char **words, int *rest) {
  char *copy = xstrdup(pattern), *save = NULL;
  int i = 0;
  bool ok = true;
  *rest = 0;
  for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
    if (strcmp(w, "**") == 0) {
      *rest = argc - i;
      i = argc;
      break;
    }
    if (i >= argc || (strcmp(w, "*") != 0 && strcmp(w, words[i]) != 0)) {
      ok = false;
      break;
    }
    i++;
  }
  free(copy);
  return ok && i == argc;
}

/* resp with "%n" replaced by n. */
static char *fill(const char *resp, int n) {
  char num[16];
  snprintf(num, sizeof num, "%d", n);
  char *out = xmalloc(strlen(resp) * (strlen(num) + 1) + 1), *o = out;
  for (const char *p = resp; *p;) {
    if (p[0] == '%' && p[1] == 'n') {
      o = stpcpy(o, num);
      p += 2;
    } else {
      *o++ = *p++;
    }
  }
  *o = '\0';
  return out;
}

static char *answer(struct replay_broker *rb, const char *conn, int argc, char **words) {
  int rest;
  for (struct rule *r = rb->expects; r; r = r->next)
    if (!r->used && match(r->pattern, argc, words, &rest)) {
      r->used = true;
      return fill(r->resp, rest);
    }
  if (rb->respond) {
    char *resp = rb->respond(rb->respond_data, conn, argc, words);
    if (resp) return resp;
  }
  for (struct rule *r = rb->defaults; r; r = r->next)
    if (match(r->pattern, argc, words, &rest)) return fill(r->resp, rest);
  return NULL;
}

/* ---- delivery ---- */

static bk_reply *parse(const char *resp) {
  redisReader *rd = redisReaderCreate();
  void *reply = NULL, *extra = NULL;
  if (rd == NULL) abort();
  redisReaderFeed(rd, resp, strlen(resp));
  if (redisReaderGetReply(rd, &reply) != REDIS_OK || reply == NULL ||
      redisReaderGetReply(rd, &extra) != REDIS_OK || extra != NULL) {
    fprintf(stderr, "replay_broker: not exactly one RESP reply (%s): %s\n",
            rd->err ? rd->errstr : "incomplete or extra data", resp);
    abort();
  }
  redisReaderFree(rd);
  return reply;
}

static void deliver(ltimer *t, void *data) {
  (void)t;
  struct replay_broker *rb = data;
  uint64_t limit = rb->seq; /* later ones wait for the next turn */
  while (!rb->held) {
    /* The oldest thing due: a connection to announce or a reply. */
    struct bk_conn *up = NULL, *ready = NULL;
    for (struct bk_conn *c = rb->conns; c; c = c->next) {
      if (!c->up && !rb->dropped && c->seq < limit && (!up || c->seq < up->seq)) up = c;
      if (c->up && c->head && c->head->resp && c->head->seq < limit &&
          (!ready || c->head->seq < ready->head->seq))
        ready = c;
    }
    if (up && (!ready || up->seq < ready->head->seq)) {
      up->up = true;
      if (up->state_cb) up->state_cb(up->data, up, 1);
      continue;
    }
    if (!ready) break;
    struct rcmd *cmd = ready->head;
    ready->head = cmd->next;
    if (ready->head == NULL) ready->tail = NULL;
    bk_reply *reply = parse(cmd->resp);
    /* may close `ready` or send more (rb->sent grows) */
    if (cmd->cb) cmd->cb(cmd->data, reply, NULL);
    freeReplyObject(reply);
    if (rb->hook) {
      const struct sent *s = &rb->sent[cmd->sent];
      char conn[256];
      snprintf(conn, sizeof conn, "%.*s", (int)s->connlen, s->full);
      rb->hook(rb->hook_data, conn, s->text);
    }
    free(cmd->resp);
    free(cmd);
  }
  /* Whatever arrived during this turn is due now. */
  for (struct bk_conn *c = rb->conns; c && !rb->held; c = c->next)
    if ((!c->up && !rb->dropped) || (c->up && c->head && c->head->resp)) {
      timer_start(rb->timer, 0);
      break;
    }
}

/* ---- broker_ops ---- */

static bk_conn *rp_conn_open(broker *b, const char *name, bk_state_cb *state_cb, void *data) {
  struct replay_broker *rb = (struct replay_broker *)b;
  bk_conn *c = calloc(1, sizeof *c);
  if (c == NULL) abort();
  c->rb = rb;
  c->name = xstrdup(name);
  c->state_cb = state_cb;
  c->data = data;
  c->seq = rb->seq++;
  bk_conn **tail = &rb->conns;
  while (*tail) tail = &(*tail)->next;
  *tail = c;
  timer_start(rb->timer, 0);
  return c;
}

static int rp_command(bk_conn *c, int argc, const char **argv, const size_t *argvlen,
                      bk_reply_cb *cb, void *data) {
  struct replay_broker *rb = c->rb;
  if (!c->up || c->closing) return -1;
  /* The words as recorded: C strings, aliases applied. */
  char **words = xmalloc((size_t)argc * sizeof *words);
  size_t textlen = strlen(c->name) + 2;
  for (int i = 0; i < argc; i++) {
    words[i] = xmalloc(argvlen[i] + 1);
    memcpy(words[i], argv[i], argvlen[i]);
    words[i][argvlen[i]] = '\0';
    for (struct alias *a = rb->aliases; a; a = a->next)
      if (strcmp(words[i], a->word) == 0) {
        free(words[i]);
        words[i] = xstrdup(a->name);
        break;
      }
    textlen += strlen(words[i]) + 1;
  }
  if (rb->nsent == rb->sent_cap) {
    rb->sent_cap = rb->sent_cap ? rb->sent_cap * 2 : 32;
    rb->sent = realloc(rb->sent, rb->sent_cap * sizeof *rb->sent);
    if (rb->sent == NULL) abort();
  }
  struct sent *s = &rb->sent[rb->nsent];
  s->full = xmalloc(textlen + 1);
  char *p = stpcpy(stpcpy(s->full, c->name), ": ");
  s->connlen = strlen(c->name);
  s->text = p;
  for (int i = 0; i < argc; i++) p = stpcpy(stpcpy(p, i ? " " : ""), words[i]);

  struct rcmd *cmd = xmalloc(sizeof *cmd);
  cmd->next = NULL;
  cmd->seq = rb->seq++;
  cmd->resp = answer(rb, c->name, argc, words);
  cmd->sent = rb->nsent++;
  cmd->cb = cb;
  cmd->data = data;
  if (c->tail)
    c->tail->next = cmd;
  else
    c->head = cmd;
  c->tail = cmd;
  for (int i = 0; i < argc; i++) free(words[i]);
  free(words);
  if (cmd->resp) timer_start(rb->timer, 0);
  return 0;
}

static int rp_connected(bk_conn *c) { return c->up && !c->closing; }

/* Down since replay_drop: its reason, as broker_redis tells why it cannot
 * connect. */
static enum bk_fault rp_fault(bk_conn *c, char *why, size_t len) {
  if (c->up || !c->rb->dropped) return BK_FAULT_NONE;
  snprintf(why, len, "%s", c->rb->why);
  return BK_FAULT_DOWN;
}

static void rp_on_fault(bk_conn *c, bk_fault_cb *cb) { c->fault_cb = cb; }

/* A command is recorded as sent by rp_command already. */
static void rp_flush(bk_conn *c) { (void)c; }

static void rp_conn_close(bk_conn *c) {
  if (c->closing) return;
  c->closing = true;
  struct replay_broker *rb = c->rb;
  for (bk_conn **pp = &rb->conns; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  /* Exactly once: every command still queued learns the connection is gone. */
  while (c->head) {
    struct rcmd *cmd = c->head;
    c->head = cmd->next;
    if (cmd->cb) cmd->cb(cmd->data, NULL, "connection closed");
    free(cmd->resp);
    free(cmd);
  }
  free(c->name);
  free(c);
}

/* The open connection opened at seq, or NULL: a callback may have closed
 * (and freed) any connection. */
static struct bk_conn *conn_at(struct replay_broker *rb, uint64_t seq) {
  for (struct bk_conn *c = rb->conns; c; c = c->next)
    if (c->seq == seq) return c;
  return NULL;
}

static void free_rules(struct rule *r) {
  while (r) {
    struct rule *next = r->next;
    free(r->pattern);
    free(r->resp);
    free(r);
    r = next;
  }
}

static void rp_free(broker *b) {
  struct replay_broker *rb = (struct replay_broker *)b;
  if (rb->conns) {
    fprintf(stderr, "replay_broker: freed with connection %s open\n", rb->conns->name);
    abort();
  }
  timer_free(rb->timer);
  free_rules(rb->expects);
  free_rules(rb->defaults);
  while (rb->aliases) {
    struct alias *a = rb->aliases;
    rb->aliases = a->next;
    free(a->word);
    free(a->name);
    free(a);
  }
  for (size_t i = 0; i < rb->nsent; i++) free(rb->sent[i].full);
  free(rb->sent);
  while (rb->logs) {
    struct text *l = rb->logs;
    rb->logs = l->next;
    free(l);
  }
  free(rb);
}

static void rp_reply_limit(bk_conn *c, size_t bulk_max, size_t reply_max) {
  c->bulk_max = bulk_max;
  c->reply_max = reply_max;
}

static const struct broker_ops replay_ops = {
    .conn_open = rp_conn_open,
    .command = rp_command,
    .connected = rp_connected,
    .flush = rp_flush,
    .conn_close = rp_conn_close,
    .free = rp_free,
    .fault = rp_fault,
    .on_fault = rp_on_fault,
    .reply_limit = rp_reply_limit,
};

/* ---- the test-facing API ---- */

replay_broker *replay_new(lclock *clock) {
  struct replay_broker *rb = calloc(1, sizeof *rb);
  if (rb == NULL) abort();
  rb->base.ops = &replay_ops;
  snprintf(rb->base.name, sizeof rb->base.name, "replay");
  rb->timer = timer_new(clock, deliver, rb);
  if (rb->timer == NULL) abort();
  return rb;
}

broker *replay_base(replay_broker *rb) { return &rb->base; }

static void add_rule(struct rule **list, const char *pattern, const char *resp) {
  struct rule *r = xmalloc(sizeof *r);
  r->next = NULL;
  r->pattern = xstrdup(pattern);
  r->resp = xstrdup(resp);
  r->used = false;
  while (*list) list = &(*list)->next;
  *list = r;
}

void replay_expect(replay_broker *rb, const char *pattern, const char *resp) {
  add_rule(&rb->expects, pattern, resp);
}

void replay_default(replay_broker *rb, const char *pattern, const char *resp) {
  add_rule(&rb->defaults, pattern, resp);
}

void replay_alias(replay_broker *rb, const char *word, const char *name) {
  struct alias *a = xmalloc(sizeof *a);
  a->word = xstrdup(word);
  a->name = xstrdup(name);
  a->next = rb->aliases;
  rb->aliases = a;
}

void replay_respond(replay_broker *rb, replay_respond_fn *fn, void *data) {
  rb->respond = fn;
  rb->respond_data = data;
}

void replay_hold(replay_broker *rb) { rb->held = true; }

void replay_release(replay_broker *rb) {
  rb->held = false;
  timer_start(rb->timer, 0);
}

void replay_drop(replay_broker *rb, const char *why) {
  rb->dropped = true;
  snprintf(rb->why, sizeof rb->why, "%s", why);
  char err[256];
  /* A reply refused for its size keeps its kind, as broker_redis says it. */
  snprintf(err, sizeof err, "%s%s", bk_error_is_too_large(why) ? "" : "connection lost: ", why);
  /* Oldest first; a callback may close or open connections, so each round
   * looks the next one up again. */
  for (;;) {
    struct bk_conn *c = rb->conns;
    while (c && !c->up) c = c->next;
    if (c == NULL) break;
    uint64_t seq = c->seq;
    c->up = false;
    struct rcmd *cmd = c->head;
    c->head = c->tail = NULL;
    while (cmd) {
      struct rcmd *next = cmd->next;
      if (cmd->cb) cmd->cb(cmd->data, NULL, err);
      free(cmd->resp);
      free(cmd);
      cmd = next;
    }
    c = conn_at(rb, seq);
    if (c && c->state_cb) c->state_cb(c->data, c, 0);
    c = conn_at(rb, seq);
    if (c && c->fault_cb) c->fault_cb(c->data, c, BK_FAULT_DOWN, why);
  }
}

bool replay_reply_limit(replay_broker *rb, const char *conn, size_t *bulk_max, size_t *reply_max) {
  for (struct bk_conn *c = rb->conns; c; c = c->next)
    if (!c->closing && strcmp(c->name, conn) == 0) {
      *bulk_max = c->bulk_max;
      *reply_max = c->reply_max;
      return true;
    }
  return false;
}

void replay_restore(replay_broker *rb) {
  rb->dropped = false;
  timer_start(rb->timer, 0);
}

void replay_on_reply(replay_broker *rb, replay_hook_fn *fn, void *data) {
  rb->hook = fn;
  rb->hook_data = data;
}

static bool on_conn(const struct sent *s, const char *conn) {
  return conn == NULL || (strlen(conn) == s->connlen && memcmp(s->full, conn, s->connlen) == 0);
}

size_t replay_nsent(replay_broker *rb, const char *conn) {
  size_t n = 0;
  for (size_t i = 0; i < rb->nsent; i++) n += on_conn(&rb->sent[i], conn);
  return n;
}

const char *replay_sent(replay_broker *rb, const char *conn, size_t i) {
  for (size_t k = 0; k < rb->nsent; k++)
    if (on_conn(&rb->sent[k], conn) && i-- == 0) return conn ? rb->sent[k].text : rb->sent[k].full;
  return NULL;
}

const char *replay_log(replay_broker *rb, const char *conn) {
  size_t len = 1;
  for (size_t i = 0; i < rb->nsent; i++) len += strlen(rb->sent[i].full) + 1;
  struct text *l = xmalloc(sizeof *l + len);
  char *p = l->s;
  l->next = rb->logs;
  rb->logs = l;
  *p = '\0';
  for (size_t i = 0; i < rb->nsent; i++)
    if (on_conn(&rb->sent[i], conn))
      p = stpcpy(stpcpy(p, conn ? rb->sent[i].text : rb->sent[i].full), "\n");
  return l->s;
}

size_t replay_unused(const replay_broker *rb) {
  size_t n = 0;
  for (const struct rule *r = rb->expects; r; r = r->next) n += !r->used;
  return n;
}

size_t replay_outstanding(const replay_broker *rb) {
  size_t n = 0;
  for (const struct bk_conn *c = rb->conns; c; c = c->next)
    for (const struct rcmd *cmd = c->head; cmd; cmd = cmd->next) n++;
  return n;
}
