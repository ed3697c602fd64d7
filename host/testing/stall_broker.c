/* stall_broker: holding back a stalled host's replies (stall_broker.h). */
#include "stall_broker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memreply.h"

struct sbroker;

struct sconn {
  bk_conn *inner;
  struct sbroker *b;
  bk_state_cb *state_cb;
  bk_fault_cb *fault_cb;
  void *data;
  unsigned calls; /* commands sent and not answered by the broker beneath */
  bool closed;    /* by the host: freed once calls is 0 */
};

/* A reply (cb) or a state change (cb NULL) held for a stalled host. */
struct held_back {
  struct held_back *next;
  struct sconn *c;
  bk_reply_cb *cb;
  void *data;
  bk_reply *reply;
  char *err;
  int up;
};

struct sbroker {
  broker base; /* first */
  broker *inner;
  bool stalled;
  struct held_back *head, *tail;
  ltimer *deliver;
};

struct call {
  struct sconn *c;
  bk_reply_cb *cb;
  void *data;
};

static void hold(struct sbroker *b, struct held_back *h) {
  if (b->tail)
    b->tail->next = h;
  else
    b->head = h;
  b->tail = h;
}

static void release(struct held_back *h) {
  mr_free(h->reply);
  free(h->err);
  free(h);
}

static void maybe_free(struct sconn *c) {
  if (c->closed && c->calls == 0) free(c);
}

/* The 0-ms timer after a stall: what was held, in order. */
static void deliver(ltimer *t, void *data) {
  (void)t;
  struct sbroker *b = data;
  while (b->head && !b->stalled) {
    struct held_back *h = b->head;
    b->head = h->next;
    if (b->head == NULL) b->tail = NULL;
    if (h->cb)
      h->cb(h->data, h->reply, h->err);
    else if (h->c->state_cb && !h->c->closed)
      h->c->state_cb(h->c->data, (bk_conn *)h->c, h->up);
    release(h);
  }
}

static void on_reply(void *data, const bk_reply *reply, const char *err) {
  struct call *call = data;
  struct sconn *c = call->c; /* counts this call until its callback returns: it may close c */
  if (c->b->stalled && !c->closed) {
    struct held_back *h = mr_alloc(sizeof *h);
    *h = (struct held_back){.c = c, .cb = call->cb, .data = call->data};
    h->reply = reply ? mr_copy(reply) : NULL;
    h->err = err ? strdup(err) : NULL;
    hold(c->b, h);
  } else if (call->cb) {
    call->cb(call->data, reply, err);
  }
  free(call);
  c->calls--;
  maybe_free(c);
}

static void on_state(void *data, bk_conn *conn, int up) {
  (void)conn;
  struct sconn *c = data;
  if (c->closed) return;
  if (c->b->stalled) {
    struct held_back *h = mr_alloc(sizeof *h);
    *h = (struct held_back){.c = c, .up = up};
    hold(c->b, h);
  } else if (c->state_cb) {
    c->state_cb(c->data, (bk_conn *)c, up);
  }
}

static void on_fault(void *data, bk_conn *conn, enum bk_fault fault, const char *why) {
  (void)conn;
  struct sconn *c = data;
  if (c->fault_cb && !c->closed) c->fault_cb(c->data, (bk_conn *)c, fault, why);
}

static bk_conn *s_open(broker *bb, const char *name, bk_state_cb *state_cb, void *data) {
  struct sbroker *b = (struct sbroker *)bb;
  struct sconn *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  *c = (struct sconn){.b = b, .state_cb = state_cb, .data = data};
  if ((c->inner = bk_conn_open(b->inner, name, on_state, c)) == NULL) {
    free(c);
    return NULL;
  }
  return (bk_conn *)c;
}

static int s_command(bk_conn *bc, int argc, const char **argv, const size_t *argvlen,
                     bk_reply_cb *cb, void *data) {
  struct sconn *c = (struct sconn *)bc;
  struct call *call = malloc(sizeof *call);
  if (call == NULL) return -1;
  *call = (struct call){c, cb, data};
  c->calls++;
  if (bk_command(c->b->inner, c->inner, argc, argv, argvlen, on_reply, call) != 0) {
    c->calls--;
    free(call);
    return -1;
  }
  return 0;
}

static int s_connected(bk_conn *bc) {
  struct sconn *c = (struct sconn *)bc;
  return bk_connected(c->b->inner, c->inner);
}

static void s_flush(bk_conn *bc) {
  struct sconn *c = (struct sconn *)bc;
  bk_flush(c->b->inner, c->inner);
}

static void s_close(bk_conn *bc) {
  struct sconn *c = (struct sconn *)bc;
  struct sbroker *b = c->b;
  c->closed = true;
  /* What was held for c ends as its pending calls do: "connection closed". */
  for (struct held_back **p = &b->head, *prev = NULL; *p;) {
    struct held_back *h = *p;
    if (h->c != c) {
      prev = h;
      p = &h->next;
      continue;
    }
    *p = h->next;
    if (b->tail == h) b->tail = prev;
    if (h->cb) h->cb(h->data, NULL, "connection closed");
    release(h);
  }
  c->calls++; /* the callbacks of the close may not free c under us */
  bk_conn_close(b->inner, c->inner);
  c->calls--;
  maybe_free(c);
}

static void s_free(broker *bb) {
  struct sbroker *b = (struct sbroker *)bb;
  while (b->head) {
    struct held_back *h = b->head;
    b->head = h->next;
    release(h);
  }
  timer_free(b->deliver);
  free(b);
}

static enum bk_fault s_fault(bk_conn *bc, char *why, size_t len) {
  struct sconn *c = (struct sconn *)bc;
  return bk_conn_fault(c->b->inner, c->inner, why, len);
}

static void s_on_fault(bk_conn *bc, bk_fault_cb *cb) {
  struct sconn *c = (struct sconn *)bc;
  c->fault_cb = cb;
  bk_conn_on_fault(c->b->inner, c->inner, on_fault);
}

static int s_cluster(broker *bb) { return bk_is_cluster(((struct sbroker *)bb)->inner); }

static void s_reply_limit(bk_conn *bc, size_t bulk_max, size_t reply_max) {
  struct sconn *c = (struct sconn *)bc;
  bk_conn_reply_limit(c->b->inner, c->inner, bulk_max, reply_max);
}

static const struct broker_ops stall_ops = {
    .conn_open = s_open,
    .command = s_command,
    .connected = s_connected,
    .flush = s_flush,
    .conn_close = s_close,
    .free = s_free,
    .fault = s_fault,
    .on_fault = s_on_fault,
    .cluster = s_cluster,
    .reply_limit = s_reply_limit,
};

broker *stall_broker_new(broker *inner, lclock *clock) {
  struct sbroker *b = calloc(1, sizeof *b);
  if (b == NULL) return NULL;
  b->base.ops = &stall_ops;
  memcpy(b->base.name, inner->name, sizeof b->base.name);
  b->inner = inner;
  if ((b->deliver = timer_new(clock, deliver, b)) == NULL) {
    free(b);
    return NULL;
  }
  return &b->base;
}

void stall_broker_stall(broker *bb, bool stalled) {
  struct sbroker *b = (struct sbroker *)bb;
  b->stalled = stalled;
  if (!stalled && b->head) timer_start(b->deliver, 0);
}
