/* reply_arena: hiredis reply trees cut from one block per connection.
 *
 * hiredis' default reader mallocs every element and every string of a reply
 * and frees them one by one once the reply's callback has returned: for a
 * read of 500 entries, thousands of calls. The host keeps no reply past its
 * callback (broker.h), and a reader builds one reply at a time and frees it
 * before it starts the next, so a reply's objects can all come from one
 * arena that is emptied when hiredis frees the reply. The arena keeps a block
 * the size of the largest reply seen (up to REPLY_ARENA_KEEP_MAX), so reading
 * allocates nothing once warm. The replies are ordinary redisReply trees. */
#ifndef LUASTREAM_REPLY_ARENA_H
#define LUASTREAM_REPLY_ARENA_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/read.h>

/* The largest block kept between replies; a larger reply still works, its
 * extra memory is returned when it is freed. */
#define REPLY_ARENA_KEEP_MAX (4u << 20)

struct reply_arena;

/* NULL when out of memory. */
struct reply_arena *reply_arena_new(void);
/* After the reader that used it is freed. NULL is fine. */
void reply_arena_free(struct reply_arena *a);
/* Whether a reply larger than REPLY_ARENA_KEEP_MAX was freed since the last
 * call (its memory went back to malloc, which may keep it: see
 * broker_redis.c's memory_back). */
bool reply_arena_freed_large(struct reply_arena *a);
/* The bytes the reply being built (not yet complete) has taken so far. */
size_t reply_arena_taken(const struct reply_arena *a);
/* Makes reader r build its replies in a. r must hold no reply yet (a fresh
 * reader), and a must outlive r. */
void reply_arena_attach(struct reply_arena *a, redisReader *r);

#endif
