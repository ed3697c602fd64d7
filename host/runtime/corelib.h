/* corelib: luastream.core, the C primitives behind require "luastream", in
 * one handler's Lua state: logging, ls.sleep, the running entry (id, fields,
 * body), durations, and the wire names (header names and outcome reasons of
 * wire.h) so that Lua spells them as C does. */
#ifndef LUASTREAM_CORELIB_H
#define LUASTREAM_CORELIB_H

#include <lua.h>
#include <stddef.h>

#include "json_shapes.h"
#include "schema.h"

struct jobs;

/* What luastream.core of one handler state works on. */
struct core {
  struct jobs *jobs;             /* the running entries (their spec, version, clock) */
  json_shapes *shapes;           /* constructors for the body shapes seen (core.message) */
  size_t flat_reads;             /* bodies read through luastream_flat (the FFI) */
  struct schema_scratch scratch; /* for checking bodies against the spec's schemas */
};

/* Opens luastream.core for c:  [-0, +1] pushes the module table. c must
 * outlive L. */
int core_open(lua_State *L, struct core *c);

/* luastream.core.duration(v), also luastream_testing's duration(v): v as ms,
 * or nil and why (a phrase: "must be ..." / "needs a unit ..."). */
int core_duration(lua_State *L);
/* luastream.core.cron_check(expr) and tz_check(name), also luastream_testing's:
 * nil when the cron expression (cron.h) or time zone (tz.h) is good, else
 * why. For the fields cron and tz. */
int core_cron_check(lua_State *L);
int core_tz_check(lua_State *L);

/* luastream.core.schema_check(t), also luastream_testing's: nil when t
 * compiles as a message schema (schema.h), else where (the schema's path,
 * "$.properties.amount"), the keyword or property nearest the problem ("" when
 * none) and why. */
int core_schema_check(lua_State *L);

/* Sets t.headers (wire.h's header names as {NAME = "text"}), t.reasons
 * (its reasons as codes, {NAME = enum wire_reason}) and t.outcomes
 * (runtime.h's outcome codes, {ACK = RT_ACK, ...}) on the table at idx:
 * luastream.core has them, and so does luastream_testing for Lua code
 * outside a host.  [-0, +0] */
void core_set_wire_names(lua_State *L, int idx);
/* core.partition(key, n) -> the partition (0 .. n-1) of partition key key
 * (keyslot_partition): for ctx:publish and the test harness's publish. */
int core_partition(lua_State *L);

#endif
