/* resp_conn: RESP over a transport (resp_conn.h). */
#include "resp_conn.h"

#include <hiredis/hiredis.h>
#include <hiredis/sds.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "broker.h"
#include "grow.h"
#include "reply_arena.h"
#include "transport.h"

/* The least room offered to a read: a whole TLS record fits. */
#define READ_ROOM_MIN (16u * 1024)

struct waiting {
  resp_reply_fn *fn;
  void *data;
};

struct resp_conn {
  struct transport *t;
  redisReader *reader;
  struct reply_arena *arena; /* the reader's replies; NULL: hiredis' malloc per object */
  struct waiting *queue;     /* commands sent and not answered: a ring */
  size_t head, count, cap;
  resp_reply_fn *push_fn;
  void *push_data;
  resp_down_fn *down;
  void *data;
  size_t bulk_max, reply_max;
  int dispatching;    /* inside a reply callback */
  int ending;         /* end() runs or ran: nothing is accepted */
  int owner_closed;   /* resp_conn_close was called: no down */
  int close_deferred; /* closed inside a reply callback: end when it returns */
  char why[512];      /* why it ends */
  char label[256];
};

/* ---- the end ---- */

/* Hands the heap's free memory back to the system: glibc keeps what was
 * freed below its mmap threshold, up to its trim threshold (main.c). */
static void trim_heap(void) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

static void end(struct resp_conn *rc, const char *why, enum transport_end how, int notify) {
  if (rc->ending) return;
  rc->ending = 1;
  if (why != rc->why) snprintf(rc->why, sizeof rc->why, "%s", why);
  transport_close(rc->t);
  while (rc->count > 0) {
    struct waiting w = rc->queue[rc->head];
    rc->head = (rc->head + 1) % rc->cap;
    rc->count--;
    if (w.fn) w.fn(w.data, NULL, rc->why);
  }
  if (notify && !rc->owner_closed) rc->down(rc->data, rc->why, how);
  redisReaderFree(rc->reader);
  bool large = rc->arena && reply_arena_freed_large(rc->arena);
  reply_arena_free(rc->arena);
  free(rc->queue);
  free(rc);
  if (large) trim_heap();
}

/* tell: the owner hears it as a failure (down), else not at all. */
static void finish(struct resp_conn *rc, const char *why, int tell) {
  if (rc == NULL || rc->owner_closed) return;
  if (!tell) rc->owner_closed = 1;
  if (rc->ending || rc->close_deferred) return;
  snprintf(rc->why, sizeof rc->why, "%s", why);
  if (rc->dispatching) {
    rc->close_deferred = 1;
    return;
  }
  end(rc, rc->why, TRANSPORT_LOST, tell);
}

void resp_conn_close(struct resp_conn *rc, const char *why) { finish(rc, why, 0); }

void resp_conn_drop(struct resp_conn *rc, const char *why) { finish(rc, why, 1); }

/* ---- replies ---- */

/* After a reply larger than REPLY_ARENA_KEEP_MAX (a burst of large
 * entries), the process goes back to its steady size: the read buffer, once
 * empty, is let go now rather than at the next read (which a blocked read
 * may keep seconds away), and the heap is trimmed. */
static void memory_back(struct resp_conn *rc) {
  redisReader *r = rc->reader;
  bool large = rc->arena && reply_arena_freed_large(rc->arena);
  if (r->len == 0 && r->buf && sdsavail(r->buf) > r->maxbuf) {
    sds fresh = sdsempty();
    if (fresh) {
      sdsfree(r->buf);
      r->buf = fresh;
      r->pos = 0;
      large = true;
    }
  }
  if (large) trim_heap();
}

/* The limits: the reader has parsed every complete item of what arrived,
 * so what its buffer holds from pos on is the item still coming; an
 * incomplete bulk string is a task of type STRING whose `$` is consumed,
 * its length at buf + pos. Refusing it now keeps a huge entry out of memory
 * but for about one read. Returns true when the connection ended. */
static bool refuse(struct resp_conn *rc, const char *what, size_t n, size_t max) {
  snprintf(rc->why, sizeof rc->why,
           BK_ERR_TOO_LARGE ": %s %zu bytes, over this connection's limit of %zu (redis %.96s)",
           what, n, max, rc->label);
  end(rc, rc->why, TRANSPORT_LOST, 1);
  return true;
}

static bool over_limit(struct resp_conn *rc) {
  if (rc->bulk_max == 0 && rc->reply_max == 0) return false;
  const redisReader *r = rc->reader;
  if (rc->reply_max && rc->arena && reply_arena_taken(rc->arena) > rc->reply_max)
    return refuse(rc, "a reply taking", reply_arena_taken(rc->arena), rc->reply_max);
  if (rc->bulk_max == 0 || r->ridx < 0 || r->rstack[r->ridx].type != REDIS_REPLY_STRING)
    return false;
  size_t n = 0;
  for (size_t i = r->pos; i < r->len && r->buf[i] >= '0' && r->buf[i] <= '9'; i++) {
    if (n > (SIZE_MAX - 9) / 10) break; /* over any limit already */
    n = n * 10 + (size_t)(r->buf[i] - '0');
  }
  return n > rc->bulk_max && refuse(rc, "a string of at least", n, rc->bulk_max);
}

/* The longest string in a reply. */
static size_t longest(const redisReply *r) {
  size_t n = r->type == REDIS_REPLY_STRING ? r->len : 0;
  for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
    size_t m = longest(r->element[i]);
    if (m > n) n = m;
  }
  return n;
}

/* A reply that arrived whole within one read, over the limits all the
 * same: refused as it would have been had it come in pieces. What is over
 * (NULL if nothing), its size and the limit. */
static const char *complete_over_limit(const struct resp_conn *rc, const redisReply *reply,
                                       size_t *n, size_t *max) {
  if (rc->reply_max && rc->arena && (*n = reply_arena_taken(rc->arena)) > rc->reply_max) {
    *max = rc->reply_max;
    return "a reply taking";
  }
  /* A string takes at least its length of the arena: a reply that took no
   * more than bulk_max holds none longer, and is not walked. */
  bool may_hold =
      rc->bulk_max && (rc->arena == NULL || reply_arena_taken(rc->arena) > rc->bulk_max);
  *n = may_hold ? longest(reply) : 0;
  *max = rc->bulk_max;
  return *n > rc->bulk_max ? "a string of at least" : NULL;
}

static void free_reply(struct resp_conn *rc, void *reply) {
  if (rc->reader->fn && rc->reader->fn->freeObject) rc->reader->fn->freeObject(reply);
}

/* Hands every complete reply to its command. Returns true when the
 * connection ended. */
static bool dispatch(struct resp_conn *rc) {
  for (;;) {
    void *reply = NULL;
    if (redisReaderGetReply(rc->reader, &reply) != REDIS_OK) {
      snprintf(rc->why, sizeof rc->why, "protocol error: %s", rc->reader->errstr);
      end(rc, rc->why, TRANSPORT_LOST, 1);
      return true;
    }
    if (reply == NULL) return false;
    size_t n, max;
    const char *over =
        rc->bulk_max || rc->reply_max ? complete_over_limit(rc, reply, &n, &max) : NULL;
    if (over) {
      free_reply(rc, reply); /* before refuse: it ends the connection, reader and all */
      return refuse(rc, over, n, max);
    }
    struct waiting w = {rc->push_fn, rc->push_data};
    if (rc->count > 0) {
      w = rc->queue[rc->head];
      rc->head = (rc->head + 1) % rc->cap;
      rc->count--;
    } else if (w.fn == NULL) {
      free_reply(rc, reply);
      end(rc, "protocol error: a reply to no command", TRANSPORT_LOST, 1);
      return true;
    }
    rc->dispatching = 1;
    w.fn(w.data, reply, NULL);
    rc->dispatching = 0;
    free_reply(rc, reply);
    if (rc->close_deferred) {
      end(rc, rc->why, TRANSPORT_LOST, 1);
      return true;
    }
  }
}

/* ---- transport events ---- */

static char *room(void *data, size_t *cap) {
  struct resp_conn *rc = data;
  redisReader *r = rc->reader;
  if (sdsavail(r->buf) < READ_ROOM_MIN) {
    sds grown = sdsMakeRoomFor(r->buf, READ_ROOM_MIN);
    if (grown == NULL) return NULL;
    r->buf = grown;
  }
  *cap = sdsavail(r->buf);
  /* Under reply limits a read takes no more than the limits can be checked
   * against: a whole reply over them must not arrive in one read. */
  if ((rc->bulk_max || rc->reply_max) && *cap > READ_ROOM_MIN) *cap = READ_ROOM_MIN;
  return r->buf + sdslen(r->buf);
}

static void got(void *data, size_t n) {
  struct resp_conn *rc = data;
  redisReader *r = rc->reader;
  sdsIncrLen(r->buf, (int)n);
  r->len = sdslen(r->buf);
  if (dispatch(rc) || over_limit(rc)) return;
  memory_back(rc);
}

static void down(void *data, const char *why, enum transport_end how) { end(data, why, how, 1); }

static const struct transport_events EVENTS = {room, got, down};

/* ---- public ---- */

struct resp_conn *resp_conn_open(uv_loop_t *loop, const struct transport_target *to,
                                 const char *label, resp_down_fn *down_fn, void *data, char *err,
                                 size_t errlen) {
  struct resp_conn *rc = calloc(1, sizeof *rc);
  if (rc == NULL || (rc->reader = redisReaderCreate()) == NULL) {
    free(rc);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  rc->arena = reply_arena_new();
  if (rc->arena) reply_arena_attach(rc->arena, rc->reader); /* no reply read yet */
  /* hiredis frees its read buffer whenever it is empty with more than 16 KB
   * spare, so every read of large entries grew it again from nothing: keep
   * up to the arena's size of it (it holds at most the largest reply element
   * plus one socket read); a larger one goes once empty (memory_back). */
  rc->reader->maxbuf = REPLY_ARENA_KEEP_MAX;
  rc->down = down_fn;
  rc->data = data;
  snprintf(rc->label, sizeof rc->label, "%s", label);
  if ((rc->t = transport_open(loop, to, &EVENTS, rc, err, errlen)) == NULL) {
    redisReaderFree(rc->reader);
    reply_arena_free(rc->arena);
    free(rc);
    return NULL;
  }
  return rc;
}

static char *put_count(char *p, char tag, size_t n) {
  char digits[20];
  int d = 0;
  do digits[d++] = (char)('0' + n % 10);
  while ((n /= 10) != 0);
  *p++ = tag;
  while (d > 0) *p++ = digits[--d];
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

int resp_conn_send(struct resp_conn *rc, int argc, const char **argv, const size_t *argvlen,
                   resp_reply_fn *fn, void *data) {
  if (rc->ending || rc->owner_closed || rc->close_deferred) return -1;
  if (rc->count == rc->cap) { /* the ring is full: grow it, oldest first */
    size_t cap = rc->cap ? rc->cap * 2 : 16;
    struct waiting *q = malloc(cap * sizeof *q);
    if (q == NULL) return -1;
    for (size_t i = 0; i < rc->count; i++) q[i] = rc->queue[(rc->head + i) % rc->cap];
    free(rc->queue);
    rc->queue = q;
    rc->cap = cap;
    rc->head = 0;
  }
  /* RESP straight into the output queue: no formatting buffer in between. */
  size_t need = 24;
  for (int i = 0; i < argc; i++) need += argvlen[i] + 24;
  char *start = transport_reserve(rc->t, need);
  if (start == NULL) return -1;
  char *p = put_count(start, '*', (size_t)argc);
  for (int i = 0; i < argc; i++) {
    p = put_count(p, '$', argvlen[i]);
    memcpy(p, argv[i], argvlen[i]);
    p += argvlen[i];
    *p++ = '\r';
    *p++ = '\n';
  }
  transport_commit(rc->t, (size_t)(p - start));
  rc->queue[(rc->head + rc->count) % rc->cap] = (struct waiting){fn, data};
  rc->count++;
  return 0;
}

void resp_conn_on_push(struct resp_conn *rc, resp_reply_fn *fn, void *data) {
  rc->push_fn = fn;
  rc->push_data = data;
}

void resp_conn_flush(struct resp_conn *rc) {
  if (!rc->ending) transport_flush(rc->t);
}

void resp_conn_limit(struct resp_conn *rc, size_t bulk_max, size_t reply_max) {
  rc->bulk_max = bulk_max;
  rc->reply_max = reply_max;
}

int resp_conn_tls_unanswered(const struct resp_conn *rc) { return transport_tls_unanswered(rc->t); }
