/* entry: one stream entry as the host carries it from a read to its outcome.
 *
 * An entry owns a single allocation holding its id and fields, so reading a
 * batch costs at most one malloc per entry (none once the pool is warm) and
 * freeing it one free. The field `data`
 * is the body; every other field is a header. */
#ifndef LUASTREAM_ENTRY_H
#define LUASTREAM_ENTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire.h"

struct entry {
  struct entry *next; /* queue link, owned by whoever holds the entry */
  char *id;           /* "ms-seq", NUL-terminated */
  size_t nfields;     /* number of field/value strings (2 per pair) */
  const char **field; /* field[2i] = name, field[2i+1] = value, NUL-terminated */
  size_t *field_len;
  int64_t idle_ms;          /* claimed or own pending: idle before this delivery; else -1 */
  int64_t deliveries;       /* claimed or own pending: deliveries before this one; else -1 */
  void *owner_data;         /* free for the subscription that holds the entry */
  unsigned char size_class; /* the pool's (entry.c) */
  unsigned char key;   /* which of the keys read it came from (read_reply_parse_streams): 0 first */
  uint32_t started_ms; /* when its handler started, on the host's clock (wraps: differences only) */
  /* Over the limits when read (entry_over): its fields are cut
   * (ENTRY_CUT_KEEP, ENTRY_CUT_PAIRS) and these are the sizes it had;
   * entry_size 0: a whole entry. */
  uint64_t body_size;  /* its largest `data` value, in bytes */
  uint64_t entry_size; /* its names and values in all, in bytes, and ENTRY_PAIR_COST a pair */
};

/* An entry too large to hold whole: its `data` is over max_body, or its
 * size, its names and values in all plus ENTRY_PAIR_COST for each pair
 * (what holding a field costs beside its bytes, so that a million empty
 * fields are not "0 bytes"), is over max_body + ENTRY_HEADERS_MAX. Such an
 * entry never runs: it is kept cut, its first ENTRY_CUT_PAIRS fields with
 * each name and value cut to ENTRY_CUT_KEEP bytes, for its dead letter. The
 * read scripts (broker/scripts/{read,own,claim,reclaim}.lua) count the same. */
#define ENTRY_HEADERS_MAX (64u << 10)
#define ENTRY_PAIR_COST 64u
#define ENTRY_CUT_KEEP 1024u
#define ENTRY_CUT_PAIRS 64u
static inline uint64_t entry_max_size(uint64_t max_body) {
  return max_body > UINT64_MAX - ENTRY_HEADERS_MAX ? UINT64_MAX : max_body + ENTRY_HEADERS_MAX;
}
static inline bool entry_over(uint64_t max_body, uint64_t body, uint64_t size) {
  return body > max_body || size > entry_max_size(max_body);
}

/* A subscription reads two keys (reader_loop.c): key 0 is the
 * shared stream, key 1 the group's retry stream, which only luastream
 * writes. The entry's id on the source stream: its original-id header when
 * it came from the retry stream, else its own id. A producer's original-id
 * on the shared stream is data, never believed. */
#define ENTRY_KEY_RETRY 1
const char *entry_source_id(const struct entry *e);
/* The deliveries a copy or delayed entry on the retry stream carries in its
 * delivery-count header (0 when absent or not a count, at most 1e9); 0 for
 * an entry of the shared stream, where that header is a producer's data. */
long long entry_carried_deliveries(const struct entry *e);

/* Copies id and fields (pairs of strings) into one allocation. NULL on OOM, on
 * a size that overflows, or when nfields is odd. */
struct entry *entry_new(const char *id, size_t idlen, size_t nfields, const char *const *field,
                        const size_t *field_len);
/* For builders that place the strings themselves (read_reply.c): an entry
 * with room for nfields strings of `bytes` total bytes (string bytes plus
 * their NULs, id included; summed with entry_size_add, false on overflow),
 * NULL when the size overflows or malloc fails. The id then the fields go in
 * order with entry_put from cursor = entry_strings(e), which returns each
 * copy (NUL-terminated). */
struct entry *entry_alloc(size_t nfields, size_t bytes);
/* Inline: they run once per string of every entry read. */
static inline bool entry_size_add(size_t *acc, size_t n) {
  if (n > SIZE_MAX - *acc) return false;
  *acc += n;
  return true;
}
static inline char *entry_strings(struct entry *e) { return (char *)(e->field_len + e->nfields); }
static inline char *entry_put(char **cursor, const char *s, size_t len) {
  char *dst = *cursor;
  if (len) memcpy(dst, s, len);
  dst[len] = '\0';
  *cursor = dst + len + 1;
  return dst;
}

/* Frees e (NULL is fine). Blocks of common sizes go to a pool that later
 * entries are cut from; the pool is the process's, for its one loop thread. */
void entry_free(struct entry *e);
/* Frees the pooled blocks (at exit, so that nothing is left allocated). */
void entry_pool_trim(void);

/* Looks a field up by name; returns its value (and length) or NULL. The last
 * occurrence wins, as with HGET-like readers of duplicate names. */
const char *entry_get(const struct entry *e, const char *name, size_t *len);

#endif
