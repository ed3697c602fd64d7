/* redis_reply: Redis replies as Lua values, the way Redis scripting converts
 * them for redis.call, so handlers read replies as script authors expect.
 *
 *   bulk string  -> string          integer -> number
 *   nil          -> false           array   -> table (nested as deep as it is)
 *   status       -> {ok = "..."}    error   -> {err = "..."}
 *
 * An integer beyond 2^53 loses precision (a Lua number is a double); ask for
 * such values as strings (GET rather than INCR's reply, or a script). */
#ifndef LUASTREAM_REDIS_REPLY_H
#define LUASTREAM_REDIS_REPLY_H

#include <lua.h>

#include "broker.h"

/* Pushes r converted (see above). Raises a Lua error when out of memory or
 * nested too deep for the Lua stack, so call it where an error is caught
 * (inside the job's coroutine). */
void redis_reply_push(lua_State *L, const bk_reply *r);

#endif
