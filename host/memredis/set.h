/* set: the set data structure of the in-memory server, in the order Redis
 * lists a set. A set whose members were all integers from its creation on
 * (and that never held more than 512) is an intset there, sorted by value:
 * it is kept sorted here too. Once a member that is not an integer comes,
 * the members stay in that order and new ones are appended, which is what
 * Redis 7.2+ gives for a set small enough for a listpack (at most 128
 * members of at most 64 bytes). Redis 7.0 has no listpack sets: such a set
 * is a hashtable, listed in an order of its own (the differential test
 * compares those replies sorted). O(n) and simple on purpose (the commands
 * are in cmd_set.c). */
#ifndef LUASTREAM_MEMREDIS_SET_H
#define LUASTREAM_MEMREDIS_SET_H

#include <stdbool.h>
#include <stddef.h>

struct ms_smember {
  char *m; /* NUL-terminated copy, binary-safe with len */
  size_t len;
  long long ll; /* its value while the set is an intset */
};

struct ms_set {
  struct ms_smember *v;
  size_t n, cap; /* n > 0: a set that empties is deleted */
  bool intset;   /* every member an integer so far: v sorted by ll */
};

struct ms_set *ms_set_new(void);
void ms_set_free(struct ms_set *s);
/* The index of m, or s->n. */
size_t ms_set_find(const struct ms_set *s, const char *m, size_t len);
/* Adds m (copied): 1 if it is new. */
int ms_set_add(struct ms_set *s, const char *m, size_t len);
/* Removes m: 1 if it was there. */
int ms_set_rem(struct ms_set *s, const char *m, size_t len);

#endif
