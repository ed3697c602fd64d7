/* watchdog: ends the process when the event loop stops turning.
 *
 * A handler that never yields (a loop without ls.sleep) holds the one loop
 * thread: no entry, signal, health probe or reload is served any more. The
 * watchdog is a thread of its own that the loop feeds: watchdog_beat on every
 * turn (a timer of the loop calls it), watchdog_enter/leave around every
 * resume of a handler's coroutine and every load of a handler file (what runs
 * now). When no beat has come for the limit, the thread writes one error line
 * naming what ran (handler, file, stream, group, entry id) with write(2) and
 * calls _exit(WATCHDOG_EXIT_STATUS): the entry stays pending in Redis, and a
 * supervisor restarts the host.
 *
 * Process-wide: one loop thread feeds it, one watchdog thread reads. Until
 * watchdog_start, the loop-side calls cost a relaxed atomic load and return. */
#ifndef LUASTREAM_WATCHDOG_H
#define LUASTREAM_WATCHDOG_H

#include <stddef.h>
#include <stdint.h>

#define WATCHDOG_EXIT_STATUS 70 /* EX_SOFTWARE */
/* The shortest limit: the loop can be busy this long without anything being
 * stuck (loading handler files, decoding a large entry, a full garbage
 * collection), and a shorter limit would end a healthy process. */
#define WATCHDOG_MIN_MS 1000

/* Starts the thread with a limit of limit_ms (> 0). The loop must then call
 * watchdog_beat at least every watchdog_interval_ms. Returns 0, or -1 with a
 * reason in err (a second start, no thread). */
int watchdog_start(uint64_t limit_ms, char *err, size_t errlen);
/* How often the loop should beat: a quarter of the limit, at most 1 s. */
uint64_t watchdog_interval_ms(void);
/* Stops and joins the thread; nothing happens when it is not running. */
void watchdog_stop(void);

/* Loop thread: the loop has turned. */
void watchdog_beat(void);
/* Loop thread: a handler runs now (handle for an entry, or a file's load when
 * id is NULL). The strings are copied; any may be NULL. */
void watchdog_enter(const char *handler, const char *file, const char *stream, const char *group,
                    const char *id);
/* Loop thread: it returned (finished or yielded); counts as a beat. */
void watchdog_leave(void);

#endif
