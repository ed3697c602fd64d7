/* codes: the codes C and Lua share about a handler's runs, and their
 * names (the reasons an entry fails are the other such list: enum
 * wire_reason, base/wire.h). Each list here is defined once, with one table
 * of names in codes.c: luastream.core exports the codes to Lua (core.outcomes,
 * corelib.c), the Lua side returns them, and C switches on them; the names
 * are only for people (logs, metric labels, the test harness) and for the
 * values a handler file writes (`read = "claiming"`). */
#ifndef LUASTREAM_CODES_H
#define LUASTREAM_CODES_H

enum read_mode { READ_NEW, READ_CLAIMING, READ_RECLAIM };
#define READ_MODES (READ_RECLAIM + 1)
/* The value of a handler file's `read` field for mode ("new", "claiming",
 * "reclaim"), as logs name it too: the one table of them; NULL when mode is
 * none. */
const char *rt_read_mode_name(int mode);

/* How a run ended. The codes are shared with Lua: luastream.core.outcomes
 * holds them under their names without the prefix (core.outcomes.ACK is
 * RT_ACK), the dispatcher (lua/luastream/handler.lua) returns one, and the
 * jobs switch on it; a value that is no code is reported as bad-return. */
enum rt_outcome {
  RT_ACK,         /* done: acknowledge (with the writes, if any) */
  RT_RETRY,       /* deliver again (how depends on the read mode) */
  RT_REPLY,       /* the last write is the reply; acknowledge with the writes */
  RT_ERROR,       /* the handler raised or returned a malformed value: leave pending */
  RT_INVALID,     /* bad input, the handler was not called */
  RT_RETRY_AFTER, /* deliver again after delay_ms */
  RT_REJECT,      /* dead-letter now; text is the handler's reason */
  /* ls.pause: give the entry back uncounted and pause the subscription on
   * every host for delay_ms (the breaker, pause.h); text is the reason */
  RT_PAUSE,
};
#define RT_OUTCOMES (RT_PAUSE + 1)

/* The name of outcome code kind as logs, metric labels and the test harness
 * show it ("ack", "retry_after", ...; upper-cased, its name in
 * core.outcomes), from the one table of them; NULL when kind is no code. */
const char *rt_outcome_name(long long kind);

#endif
