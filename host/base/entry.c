/* entry: one stream entry (read_reply.c builds them from XREADGROUP replies).
 *
 * Memory layout of one entry (a single malloc, freed with one free):
 *
 *   struct entry | const char *field[nfields] | size_t field_len[nfields] |
 *   id bytes NUL | field 0 bytes NUL | field 1 bytes NUL | ...
 *
 * Each string keeps its length and a trailing NUL, so values are binary safe
 * (an embedded NUL is kept, the length says where the value ends) and yet can
 * be handed to C string functions when they are known to be text.
 *
 * Freed entries of common sizes are kept for the next read (the pool below):
 * a host in steady state reads, runs and acks without calling malloc. */
#include "entry.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocation ---- */

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* *acc += n, false on overflow. */

/* ---- the pool: freed blocks by size class (256, 512, 1024, 2048 bytes) ---- */

#define POOL_CLASSES 4
#define POOL_MIN_SHIFT 8
#define POOL_KEEP 4096 /* blocks kept per class: a few batches' worth */
#define UNPOOLED 0xff

static struct {
  struct entry *head; /* linked through next */
  size_t n;
} pool[POOL_CLASSES];

/* The class of a block of total bytes, UNPOOLED when larger than the largest. */
static unsigned size_class(size_t total) {
  for (unsigned c = 0; c < POOL_CLASSES; c++)
    if (total <= (size_t)1 << (POOL_MIN_SHIFT + c)) return c;
  return UNPOOLED;
}

void entry_pool_trim(void) {
  for (unsigned c = 0; c < POOL_CLASSES; c++) {
    while (pool[c].head) {
      struct entry *e = pool[c].head;
      pool[c].head = e->next;
      free(e);
    }
    pool[c].n = 0;
  }
}

struct entry *entry_alloc(size_t nfields, size_t bytes) {
  const size_t per_field = sizeof(const char *) + sizeof(size_t);
  if (nfields > (SIZE_MAX / 2) / per_field) return NULL;
  size_t off_field = align_up(sizeof(struct entry), _Alignof(const char *));
  size_t off_len = align_up(off_field + nfields * sizeof(const char *), _Alignof(size_t));
  size_t total = off_len + nfields * sizeof(size_t);
  if (!entry_size_add(&total, bytes)) return NULL;
  unsigned c = size_class(total);
  char *base;
  if (c != UNPOOLED && pool[c].head) {
    base = (char *)pool[c].head;
    pool[c].head = pool[c].head->next;
    pool[c].n--;
  } else {
    base = malloc(c == UNPOOLED ? total : (size_t)1 << (POOL_MIN_SHIFT + c));
    if (!base) return NULL;
  }
  struct entry *e = (struct entry *)(void *)base;
  *e = (struct entry){0};
  e->size_class = (unsigned char)c;
  e->field = (const char **)(void *)(base + off_field);
  e->field_len = (size_t *)(void *)(base + off_len);
  e->nfields = nfields;
  e->idle_ms = -1;
  e->deliveries = -1;
  return e;
}

struct entry *entry_new(const char *id, size_t idlen, size_t nfields, const char *const *field,
                        const size_t *field_len) {
  /* Fields come in name/value pairs; an odd count would make entry_get read
   * past the arrays. */
  if (nfields % 2 != 0) return NULL;
  size_t bytes = idlen;
  if (!entry_size_add(&bytes, 1)) return NULL;
  for (size_t i = 0; i < nfields; i++)
    if (!entry_size_add(&bytes, field_len[i]) || !entry_size_add(&bytes, 1)) return NULL;
  struct entry *e = entry_alloc(nfields, bytes);
  if (!e) return NULL;
  char *cursor = entry_strings(e);
  e->id = entry_put(&cursor, id, idlen);
  for (size_t i = 0; i < nfields; i++) {
    e->field[i] = entry_put(&cursor, field[i], field_len[i]);
    e->field_len[i] = field_len[i];
  }
  return e;
}

void entry_free(struct entry *e) {
  if (e == NULL) return;
  unsigned c = e->size_class;
  if (c == UNPOOLED || pool[c].n == POOL_KEEP) {
    free(e);
    return;
  }
  e->next = pool[c].head;
  pool[c].head = e;
  pool[c].n++;
}

const char *entry_get(const struct entry *e, const char *name, size_t *len) {
  size_t namelen = strlen(name);
  /* Walk backwards so the last occurrence of a duplicated name wins. */
  for (size_t i = e->nfields; i >= 2; i -= 2) {
    size_t k = i - 2;
    if (e->field_len[k] == namelen && memcmp(e->field[k], name, namelen) == 0) {
      if (len) *len = e->field_len[k + 1];
      return e->field[k + 1];
    }
  }
  return NULL;
}

const char *entry_source_id(const struct entry *e) {
  const char *orig = e->key == ENTRY_KEY_RETRY ? entry_get(e, HDR_ORIGINAL_ID, NULL) : NULL;
  return orig && *orig ? orig : e->id;
}

long long entry_carried_deliveries(const struct entry *e) {
  if (e->key != ENTRY_KEY_RETRY) return 0;
  size_t len = 0;
  const char *v = entry_get(e, HDR_DELIVERY_COUNT, &len);
  long long n = 0;
  if (v == NULL || len == 0 || len > 10) return 0;
  for (size_t i = 0; i < len; i++) {
    if (v[i] < '0' || v[i] > '9') return 0;
    n = n * 10 + (v[i] - '0');
  }
  return n > 1000000000 ? 1000000000 : n;
}
