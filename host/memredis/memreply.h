/* memreply: reply trees built by the in-memory broker.
 *
 * The memory broker answers with the same bk_reply trees broker_redis hands
 * over, but allocates them itself: every node and string comes from malloc and
 * mr_free releases a whole tree. Out of memory aborts: this is test-harness
 * code, and a half-built reply would only hide the real failure. */
#ifndef LUASTREAM_MEMREPLY_H
#define LUASTREAM_MEMREPLY_H

#include <stddef.h>

#include "broker.h"

bk_reply *mr_int(long long v);
bk_reply *mr_nil(void);
bk_reply *mr_bulk(const char *s, size_t len); /* copies s */
bk_reply *mr_str(const char *s);              /* bulk from a C string */
bk_reply *mr_status(const char *s);
/* An error whose full text is the formatted string, code first
 * ("ERR syntax error", "NOGROUP ..."). Key names go in with %.*s. */
bk_reply *mr_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bk_reply *mr_arr(void); /* an empty array */
/* Appends el (owned by the array from now on) and returns arr. */
bk_reply *mr_push(bk_reply *arr, bk_reply *el);
void mr_free(bk_reply *r);
/* A deep copy: replies are valid only during the callback, tests keep them. */
bk_reply *mr_copy(const bk_reply *r);

/* malloc/realloc that abort on failure. */
void *mr_alloc(size_t n);
void *mr_realloc(void *p, size_t n);
char *mr_memdup(const char *s, size_t len); /* NUL-terminated copy */

#endif
