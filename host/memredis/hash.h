/* hash: the hash data structure of the in-memory server: fields kept in an
 * array in insertion order, which is the order Redis gives for a hash small
 * enough for a listpack (at most 128 fields, none longer than 64 bytes; a
 * bigger hash is a hashtable there, whose order this does not model). An
 * update keeps a field where it is, as a listpack does. O(n) and simple on
 * purpose (the commands are in cmd_hash.c). */
#ifndef LUASTREAM_MEMREDIS_HASH_H
#define LUASTREAM_MEMREDIS_HASH_H

#include <stddef.h>

struct ms_hfield {
  char *f, *v; /* NUL-terminated copies, binary-safe with their lengths */
  size_t flen, vlen;
};

struct ms_hash {
  struct ms_hfield *v; /* insertion order */
  size_t n, cap;       /* n > 0: a hash that empties is deleted */
};

struct ms_hash *ms_hash_new(void);
void ms_hash_free(struct ms_hash *h);
/* The field, or NULL. */
struct ms_hfield *ms_hash_get(struct ms_hash *h, const char *f, size_t flen);
/* Sets f to v (copies both): 1 if the field is new, 0 if it was updated. */
int ms_hash_set(struct ms_hash *h, const char *f, size_t flen, const char *v, size_t vlen);
/* Removes f: 1 if it was there. */
int ms_hash_del(struct ms_hash *h, const char *f, size_t flen);

#endif
