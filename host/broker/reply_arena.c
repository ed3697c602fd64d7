/* reply_arena: see reply_arena.h.
 *
 * The reader calls the create functions below for every object of a reply,
 * in order, each with its task: task->parent is NULL for the reply itself
 * (the root) and the array being filled otherwise, task->privdata the arena
 * (set on the reader). hiredis calls freeObject with roots only (after the
 * callback, on a protocol error, when the reader is freed), so a root
 * carries a pointer back to its arena just in front of it. */
#include "reply_arena.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#define FIRST_BLOCK (16u << 10)
#define ALIGN alignof(max_align_t)

struct block {
  struct block *next;
  size_t cap, used;
  alignas(max_align_t) unsigned char data[];
};

struct reply_arena {
  struct block *main;  /* kept from reply to reply */
  struct block *extra; /* added while a reply outgrew main; freed with the reply */
  size_t taken;        /* bytes the reply being built has taken */
  bool freed_large;    /* a reply over REPLY_ARENA_KEEP_MAX was freed */
};

/* A root: the arena it came from, then the reply hiredis sees. */
struct root {
  struct reply_arena *arena;
  redisReply reply;
};

static struct block *block_new(size_t cap) {
  struct block *b = malloc(sizeof *b + cap);
  if (b) {
    b->next = NULL;
    b->cap = cap;
    b->used = 0;
  }
  return b;
}

static void *take(struct reply_arena *a, size_t n) {
  n = (n + ALIGN - 1) / ALIGN * ALIGN;
  a->taken += n;
  struct block *b = a->main;
  if (b->cap - b->used < n) {
    b = a->extra;
    if (b == NULL || b->cap - b->used < n) {
      b = block_new(n > FIRST_BLOCK ? n : FIRST_BLOCK);
      if (b == NULL) return NULL; /* hiredis reports out of memory */
      b->next = a->extra;
      a->extra = b;
    }
  }
  void *p = b->data + b->used;
  b->used += n;
  return p;
}

/* The reply is freed: everything goes, and main grows to fit a reply this
 * size next time (up to REPLY_ARENA_KEEP_MAX). */
static void reset(struct reply_arena *a) {
  if (a->taken > REPLY_ARENA_KEEP_MAX) a->freed_large = true;
  while (a->extra) {
    struct block *b = a->extra;
    a->extra = b->next;
    free(b);
  }
  if (a->taken > a->main->cap && a->main->cap < REPLY_ARENA_KEEP_MAX) {
    size_t cap = a->main->cap;
    while (cap < a->taken && cap < REPLY_ARENA_KEEP_MAX) cap *= 2;
    struct block *bigger = block_new(cap);
    if (bigger) {
      free(a->main);
      a->main = bigger;
    }
  }
  a->main->used = 0;
  a->taken = 0;
}

/* A new object of task's type, linked into its parent array. */
static redisReply *object(const redisReadTask *task, int type) {
  struct reply_arena *a = task->privdata;
  redisReply *r;
  if (task->parent == NULL) {
    struct root *root = take(a, sizeof *root);
    if (root == NULL) return NULL;
    root->arena = a;
    r = &root->reply;
  } else {
    r = take(a, sizeof *r);
    if (r == NULL) return NULL;
  }
  memset(r, 0, sizeof *r);
  r->type = type;
  if (task->parent) {
    redisReply *parent = task->parent->obj;
    parent->element[task->idx] = r;
  }
  return r;
}

static void *create_string(const redisReadTask *task, char *str, size_t len) {
  redisReply *r = object(task, task->type);
  char *copy = r ? take(task->privdata, len + 1) : NULL;
  if (copy == NULL) return NULL;
  memcpy(copy, str, len);
  copy[len] = '\0';
  r->str = copy;
  r->len = len;
  return r;
}

static void *create_array(const redisReadTask *task, int elements) {
  redisReply *r = object(task, REDIS_REPLY_ARRAY);
  if (r == NULL) return NULL;
  if (elements > 0) {
    r->element = take(task->privdata, (size_t)elements * sizeof *r->element);
    if (r->element == NULL) return NULL;
    memset(r->element, 0, (size_t)elements * sizeof *r->element);
  }
  r->elements = (size_t)elements;
  return r;
}

static void *create_integer(const redisReadTask *task, long long value) {
  redisReply *r = object(task, REDIS_REPLY_INTEGER);
  if (r) r->integer = value;
  return r;
}

static void *create_nil(const redisReadTask *task) { return object(task, REDIS_REPLY_NIL); }

static void free_object(void *reply) {
  struct root *root = (struct root *)(void *)((char *)reply - offsetof(struct root, reply));
  reset(root->arena);
}

static redisReplyObjectFunctions arena_functions = {
    create_string, create_array, create_integer, create_nil, free_object,
};

struct reply_arena *reply_arena_new(void) {
  struct reply_arena *a = calloc(1, sizeof *a);
  if (a == NULL) return NULL;
  a->main = block_new(FIRST_BLOCK);
  if (a->main == NULL) {
    free(a);
    return NULL;
  }
  return a;
}

void reply_arena_free(struct reply_arena *a) {
  if (a == NULL) return;
  reset(a);
  free(a->main);
  free(a);
}

bool reply_arena_freed_large(struct reply_arena *a) {
  bool large = a->freed_large;
  a->freed_large = false;
  return large;
}

size_t reply_arena_taken(const struct reply_arena *a) { return a->taken; }

void reply_arena_attach(struct reply_arena *a, redisReader *r) {
  r->fn = &arena_functions;
  r->privdata = a;
}
