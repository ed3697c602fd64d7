/* outcome_batch: one SCRIPT_OUTCOME call's arguments (see outcome_batch.h). */
#include "outcome_batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "scripts.h"

/* Appends one argument; -1 when out of memory. */
static int put(struct outcome_batch *b, const char *s, size_t n) {
  char *bytes = grow(b->bytes, &b->bytes_cap, b->nbytes + n + 1, 1, 16);
  if (bytes == NULL) return -1;
  b->bytes = bytes;
  if (b->nargs == b->args_cap) {
    size_t cap = b->args_cap ? b->args_cap * 2 : 64;
    size_t *off = realloc(b->off, cap * sizeof *off);
    if (off == NULL) return -1;
    b->off = off;
    size_t *len = realloc(b->len, cap * sizeof *len);
    if (len == NULL) return -1;
    b->len = len;
    b->args_cap = cap;
  }
  memcpy(b->bytes + b->nbytes, s, n);
  b->bytes[b->nbytes + n] = '\0';
  b->off[b->nargs] = b->nbytes;
  b->len[b->nargs++] = n;
  b->nbytes += n + 1;
  return 0;
}

static int put_str(struct outcome_batch *b, const char *s) { return put(b, s, strlen(s)); }

static int put_num(struct outcome_batch *b, size_t n) {
  char num[24];
  return put(b, num, (size_t)snprintf(num, sizeof num, "%zu", n));
}

static const char *arg(const struct outcome_batch *b, size_t i) {
  return i < b->nargs ? b->bytes + b->off[i] : "";
}

struct outcome_batch *outcome_batch_new(void) {
  return calloc(1, sizeof(struct outcome_batch));
}

void outcome_batch_free(struct outcome_batch *b) {
  if (b == NULL) return;
  free(b->bytes);
  free(b->off);
  free(b->len);
  free(b->argv);
  free(b->argvlen);
  free(b->items);
  free(b);
}

int outcome_batch_start(struct outcome_batch *b, const char *key, const char *group,
                        const char *consumer) {
  b->resent = false;
  b->delays = false;
  b->nbytes = b->nargs = b->nitems = 0;
  return put_str(b, "1") != 0 || put_str(b, key) != 0 || put_str(b, group) != 0 ||
                 put_str(b, consumer) != 0
             ? -1
             : 0;
}

int outcome_batch_add(struct outcome_batch *b, const struct txn *t, const char *id,
                      const char *what, bool ack) {
  size_t nbytes = b->nbytes, nargs = b->nargs;
  if (put_str(b, id) != 0 || put_str(b, ack ? "ack" : "pending") != 0 ||
      put_num(b, (size_t)t->n) != 0)
    goto undo;
  size_t first = b->nargs;
  for (int i = 0; i < t->n; i++) {
    if (put_num(b, (size_t)t->cmd[i].argc) != 0) goto undo;
    for (int k = 0; k < t->cmd[i].argc; k++)
      if (put(b, t->cmd[i].argv[k], t->cmd[i].argvlen[k]) != 0) goto undo;
  }
  struct outcome_item *items = grow(b->items, &b->items_cap, b->nitems + 1, sizeof *items, 16);
  if (items == NULL) goto undo;
  b->items = items;
  struct outcome_item *it = &b->items[b->nitems++];
  size_t n = strlen(id);
  if (n >= OUTCOME_ID_MAX) n = OUTCOME_ID_MAX - 1;
  memcpy(it->id, id, n);
  it->id[n] = '\0';
  it->what = what;
  it->ack = ack;
  it->first_cmd = first;
  b->delays |= t->delays;
  return 0;
undo: /* the outcomes before it stay whole */
  b->nbytes = nbytes;
  b->nargs = nargs;
  return -1;
}

int outcome_batch_argv(struct outcome_batch *b, int *argc, const char ***argv,
                       const size_t **argvlen) {
  static size_t script_len;
  if (script_len == 0) script_len = strlen(SCRIPT_OUTCOME);
  size_t n = b->nargs + 2;
  if (n > b->argv_cap) {
    const char **v = realloc(b->argv, n * sizeof *v);
    if (v == NULL) return -1;
    b->argv = v;
    size_t *l = realloc(b->argvlen, n * sizeof *l);
    if (l == NULL) return -1;
    b->argvlen = l;
    b->argv_cap = n;
  }
  b->argv[0] = "EVAL", b->argvlen[0] = 4;
  b->argv[1] = SCRIPT_OUTCOME, b->argvlen[1] = script_len;
  for (size_t i = 0; i < b->nargs; i++) {
    b->argv[i + 2] = b->bytes + b->off[i];
    b->argvlen[i + 2] = b->len[i];
  }
  *argc = (int)n;
  *argv = b->argv;
  *argvlen = b->argvlen;
  return 0;
}

void outcome_batch_cmd(const struct outcome_batch *b, const struct outcome_item *it, long c,
                       const char **name, const char **key) {
  size_t p = it->first_cmd;
  for (long j = 1; j < c && p < b->nargs; j++) p += 1 + strtoul(arg(b, p), NULL, 10);
  *name = arg(b, p + 1);
  *key = strtoul(arg(b, p), NULL, 10) >= 2 ? arg(b, p + 2) : ""; /* INCR alone has none */
}

size_t outcome_batch_capacity(const struct outcome_batch *b) { return b->bytes_cap; }
