/* scripts: server-side Lua scripts for reads Redis has no single command for.
 *
 * Both run atomically on the server (EVAL), so two hosts never claim the same
 * entry, and both answer in one shape (entry_parse_claimed in entry.h):
 *
 *   [cursor, [[stream, [[id, fields, idle_ms, deliveries], ...]]], [deleted ids]]
 *
 * SCRIPT_CLAIM gives Redis 8.4's claiming read to older servers: pending
 * entries idle at least min_idle (any consumer, longest idle first) claimed
 * with XCLAIM, then new entries with `>`, sharing COUNT. deliveries is the
 * count before this delivery (0 for new entries), as the 8.4 CLAIM reply says.
 *   KEYS: stream   ARGV: group consumer min_idle count
 *
 * SCRIPT_RECLAIM is XAUTOCLAIM plus what it does not report: each entry's
 * idle time before the claim and its delivery count after it.
 *   KEYS: stream   ARGV: group consumer min_idle cursor count */
#ifndef LUASTREAM_SCRIPTS_H
#define LUASTREAM_SCRIPTS_H

extern const char SCRIPT_CLAIM[];
extern const char SCRIPT_RECLAIM[];

#endif
