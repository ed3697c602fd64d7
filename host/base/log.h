/* log: one structured logfmt line per event.
 *
 * Every line is `time=... level=... [handler=...] msg="..." key=value ...`, written
 * whole with one write() to a replaceable sink (stderr by default), so tests and
 * operators can grep and parse it. Values are quoted and escaped only when logfmt
 * needs it; a multi-line value (a traceback) keeps its newlines escaped as \n so a
 * record stays on one line. */
#ifndef LUASTREAM_LOG_H
#define LUASTREAM_LOG_H

#include <stddef.h>

#include "clock.h"

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Receives each finished line: `len` bytes without the trailing newline. The
 * buffer goes on with that newline and a NUL (line[len] == '\n', line[len + 1]
 * == '\0'), so a sink may print it as a C string. Valid during the call only. */
typedef void log_sink_fn(void *data, enum log_level level, const char *line, size_t len);

/* Lines below `min` are dropped before any formatting (default LOG_INFO).
 * The log state is process-wide and not locked: the host logs from its loop
 * thread only. */
void log_set_level(enum log_level min);
enum log_level log_get_level(void);
/* NULL restores the default sink (stderr). */
void log_set_sink(log_sink_fn *sink, void *data);
/* The sink in use (NULL for stderr), and its data in *data. */
log_sink_fn *log_get_sink(void **data);
/* time= comes from this clock's wall time (clock_wall): the host's clock, so
 * a host on a virtual clock logs virtual time. NULL (the default) reads the
 * OS wall clock. The clock must outlive every line logged while it is set:
 * set NULL before freeing it. */
void log_set_clock(lclock *clock);
lclock *log_get_clock(void);
/* Writes n bytes to stderr, in one write() when the kernel takes them whole
 * (a line up to PIPE_BUF on a pipe shared by several processes stays whole);
 * gives up when stderr is gone. Thread-safe: it keeps no state. */
void log_write_stderr(const char *p, size_t n);
/* Parses "debug", "info", "warn" (or "warning"), "error", in any case;
 * returns -1 when unknown. */
int log_level_parse(const char *name);
const char *log_level_name(enum log_level level);

/* Writes one line. `handler` may be NULL. The varargs are key, value string
 * pairs ending with a NULL key; a NULL value is skipped. Keys are written as
 * given, except that characters logfmt cannot carry in a key (space, '=', '"',
 * control characters) become '_'. Lines up to a few KB are built on the stack;
 * longer ones (a traceback) go through one heap buffer. errno is preserved. */
void log_line(enum log_level level, const char *handler, const char *msg, ...);

/* Writes one line with n key/value pairs given as kv[2i], kv[2i+1] with their
 * lengths (binary safe); used by the Lua side. Keys and values are cleaned
 * and quoted as in log_line. */
void log_line_pairs(enum log_level level, const char *handler, const char *msg, size_t n,
                    const char *const *kv, const size_t *kvlen);

/* Writes `s` (len bytes) at buf as a logfmt value, snprintf-style: quoted when
 * it is empty or holds a space, '=', '"', '\\' or a control character, with
 * \" \\ \n \r \t escapes (other control bytes as \u00XX). Returns the number
 * of bytes the full value needs, not counting the NUL; writes at most cap-1
 * bytes plus a NUL (nothing when cap is 0), so a result >= cap means the value
 * was cut, possibly in the middle of an escape. */
size_t log_format_value(char *buf, size_t cap, const char *s, size_t len);

#endif
