/* zset: the sorted-set data structure of the in-memory server: members kept
 * in an array sorted by score, then by member bytes (ZADD and the other
 * commands are in cmd_zset.c). O(n) and simple on purpose. */
#ifndef LUASTREAM_MEMREDIS_ZSET_H
#define LUASTREAM_MEMREDIS_ZSET_H

#include <stdbool.h>
#include <stddef.h>

/* A member: binary-safe bytes and a score (never NaN). */
struct ms_zmember {
  double score;
  char *m; /* NUL-terminated copy */
  size_t len;
};

struct ms_zset {
  struct ms_zmember *v; /* sorted by score, then member (memcmp, shorter first) */
  size_t n, cap;        /* n > 0: a set that empties is deleted */
};

struct ms_zset *ms_zset_new(void);
void ms_zset_free(struct ms_zset *z);
/* The index of member m, or z->n. */
size_t ms_zset_find(const struct ms_zset *z, const char *m, size_t len);
/* Takes e.m. */
void ms_zset_insert(struct ms_zset *z, struct ms_zmember e);
/* Removes v[i] and returns it (the caller owns .m). */
struct ms_zmember ms_zset_take(struct ms_zset *z, size_t i);
/* The first index whose score is above min (or at it, unless excl). */
size_t ms_zset_first_from(const struct ms_zset *z, double min, bool excl);
/* One past the last index whose score is below max (or at it, unless excl). */
size_t ms_zset_end_at(const struct ms_zset *z, double max, bool excl);

#endif
