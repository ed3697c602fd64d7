/* corelib_pg: ls.pg's primitives in luastream.core (pg_query, pg_result,
 * pg_begin, pg_begun, pg_end, pg_once_table): queries on the host's
 * PostgreSQL pool, their results turned into Lua values by type. */
#ifndef LUASTREAM_CORELIB_PG_H
#define LUASTREAM_CORELIB_PG_H

#include <lua.h>

#include "corelib.h"

/* Adds them to the luastream.core table on top of L, bound to c.  [-0, +0] */
void core_pg_open(lua_State *L, struct core *c);

#endif
