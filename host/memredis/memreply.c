/* memreply: allocation of bk_reply trees for the in-memory broker. */
#include "memreply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *mr_alloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (p == NULL) {
    fprintf(stderr, "broker_memory: out of memory\n");
    abort();
  }
  return p;
}

void *mr_realloc(void *p, size_t n) {
  p = realloc(p, n ? n : 1);
  if (p == NULL) {
    fprintf(stderr, "broker_memory: out of memory\n");
    abort();
  }
  return p;
}

char *mr_memdup(const char *s, size_t len) {
  char *d = mr_alloc(len + 1);
  if (len) memcpy(d, s, len);
  d[len] = '\0';
  return d;
}

static bk_reply *node(int type) {
  bk_reply *r = mr_alloc(sizeof *r);
  r->type = type;
  return r;
}

bk_reply *mr_int(long long v) {
  bk_reply *r = node(BK_INTEGER);
  r->integer = v;
  return r;
}

bk_reply *mr_nil(void) { return node(BK_NIL); }

static bk_reply *text(int type, const char *s, size_t len) {
  bk_reply *r = node(type);
  r->str = mr_memdup(s, len);
  r->len = len;
  return r;
}

bk_reply *mr_bulk(const char *s, size_t len) { return text(BK_STRING, s, len); }
bk_reply *mr_str(const char *s) { return text(BK_STRING, s, strlen(s)); }
bk_reply *mr_status(const char *s) { return text(BK_STATUS, s, strlen(s)); }

bk_reply *mr_err(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *buf = mr_alloc((size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(buf, (size_t)n + 1, fmt, ap);
  va_end(ap);
  bk_reply *r = node(BK_ERROR);
  r->str = buf;
  r->len = (size_t)n;
  return r;
}

bk_reply *mr_arr(void) { return node(BK_ARRAY); }

bk_reply *mr_push(bk_reply *arr, bk_reply *el) {
  /* Grow by powers of two: the capacity is implied by elements. */
  size_t n = arr->elements;
  if ((n & (n - 1)) == 0) {
    size_t cap = n ? n * 2 : 1;
    arr->element = mr_realloc(arr->element, cap * sizeof *arr->element);
  }
  arr->element[arr->elements++] = el;
  return arr;
}

void mr_free(bk_reply *r) {
  if (r == NULL) return;
  for (size_t i = 0; i < r->elements; i++) mr_free(r->element[i]);
  free(r->element);
  free(r->str);
  free(r);
}

bk_reply *mr_copy(const bk_reply *r) {
  bk_reply *c = node(r->type);
  c->integer = r->integer;
  if (r->str) {
    c->str = mr_memdup(r->str, r->len);
    c->len = r->len;
  }
  for (size_t i = 0; i < r->elements; i++) mr_push(c, mr_copy(r->element[i]));
  return c;
}
