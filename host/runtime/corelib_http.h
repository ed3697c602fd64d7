/* corelib_http: ls.http's primitives in luastream.core (http, http_result)
 * and the body decoder a response's :json() uses (json_decode). */
#ifndef LUASTREAM_CORELIB_HTTP_H
#define LUASTREAM_CORELIB_HTTP_H

#include <lua.h>

#include "corelib.h"

/* Adds them to the luastream.core table on top of L, bound to c.  [-0, +0] */
void core_http_open(lua_State *L, struct core *c);

#endif
