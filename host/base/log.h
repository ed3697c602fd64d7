/* log: one structured line per event, logfmt or JSON.
 *
 * Every line is `time=... level=... [handler=...] msg="..." key=value ...`
 * (logfmt, the default) or the same fields in the same order as one JSON
 * object (`{"time":"...","level":"...","handler":"...","msg":"...","key":...}`),
 * written whole with one write() to a replaceable sink (stderr by default), so
 * tests and operators can grep and parse it. logfmt values are quoted and
 * escaped only when logfmt needs it; a multi-line value (a traceback) keeps its
 * newlines escaped as \n so a record stays on one line.
 *
 * JSON lines are valid JSON (RFC 8259) whatever bytes a value holds:
 * - strings escape '"', '\\' and control characters (\n \r \t \b \f, others
 *   and DEL as \u00XX); well-formed UTF-8 passes through; each byte that is
 *   not part of a well-formed UTF-8 sequence becomes U+FFFD, written \ufffd;
 * - a value is a JSON number only when its field is marked numeric (LOG_NUMBER
 *   before a log_line key, the numeric flags of log_line_pairs) and its text
 *   is a JSON number; every other value is a string, even one that looks like
 *   a number (a stream named "42"), so a key keeps one type from line to line;
 * - a key is written once: time, level, handler and msg keep their names;
 *   among the pairs, the last with a key keeps it (a handler's line ends with
 *   the host's version=). Any other pair whose key is already taken becomes
 *   "fields.KEY" (then "fields.KEY.2", "fields.KEY.3", ... while taken). logfmt
 *   writes every pair under its own key, repeats included. */
#ifndef LUASTREAM_LOG_H
#define LUASTREAM_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };
enum log_format { LOG_FORMAT_LOGFMT, LOG_FORMAT_JSON };

/* Put before a log_line key literal whose value is a decimal number the host
 * formatted (a count, ms, an integer id): LOG_NUMBER "attempt". JSON lines
 * write that value as a number; logfmt lines are unchanged by it. */
#define LOG_NUMBER "\x1e"

/* Receives each finished line: `len` bytes without the trailing newline. The
 * buffer goes on with that newline and a NUL (line[len] == '\n', line[len + 1]
 * == '\0'), so a sink may print it as a C string. Valid during the call only. */
typedef void log_sink_fn(void *data, enum log_level level, const char *line, size_t len);

/* Lines below `min` are dropped before any formatting (default LOG_INFO).
 * The log state is process-wide and not locked: the host logs from its loop
 * thread only. */
void log_set_level(enum log_level min);
enum log_level log_get_level(void);
/* The line format (default LOG_FORMAT_LOGFMT). Set it before starting
 * threads that log (the watchdog reads it). */
void log_set_format(enum log_format format);
enum log_format log_get_format(void);
/* Parses "logfmt" or "json", in any case; returns -1 when unknown. */
int log_format_parse(const char *name);
const char *log_format_name(enum log_format format);
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
 * pairs ending with a NULL key; a NULL value is skipped; a key may start with
 * LOG_NUMBER. logfmt keys are written as given, except that characters logfmt
 * cannot carry in a key (space, '=', '"', control characters) become '_'; JSON
 * keys are escaped as strings; an empty key is "_" in both. Lines up to a few
 * KB are built on the stack; longer ones (a traceback) go through one heap
 * buffer, with no limit but memory (a line cut short for want of memory ends
 * with log_truncated=true). errno is preserved. */
void log_line(enum log_level level, const char *handler, const char *msg, ...);

/* Writes each line of text (lines end with '\n'; the last may not) as a line
 * of the log: as its message when msg is NULL, else as msg's `error`. */
void log_text(enum log_level level, const char *msg, const char *text);

/* Writes one line with n key/value pairs given as kv[2i], kv[2i+1] with their
 * lengths (binary safe); used by the Lua side. numeric[i] nonzero marks pair
 * i's value as a number (NULL: none is). Keys and values are cleaned and
 * quoted as in log_line. */
void log_line_pairs(enum log_level level, const char *handler, const char *msg, size_t n,
                    const char *const *kv, const size_t *kvlen, const unsigned char *numeric);

/* Formats the line log_line_pairs would write, in the current format, with
 * time_ms (Unix ms) as its time, into buf: the line, its newline and a NUL.
 * Pure: no sink, no clock, no allocation for up to 64 pairs, so a thread
 * other than the loop's may use it. A line longer than cap-1 bytes is cut
 * short and marked log_truncated. Returns the line's length with its newline
 * (0 when cap is too small for any line). */
size_t log_format_line(char *buf, size_t cap, uint64_t time_ms, enum log_level level,
                       const char *handler, const char *msg, size_t n, const char *const *kv,
                       const size_t *kvlen, const unsigned char *numeric);

/* Writes `s` (len bytes) at buf as a logfmt value, snprintf-style: quoted when
 * it is empty or holds a space, '=', '"', '\\' or a control character, with
 * \" \\ \n \r \t escapes (other control bytes as \u00XX). Returns the number
 * of bytes the full value needs, not counting the NUL; writes at most cap-1
 * bytes plus a NUL (nothing when cap is 0), so a result >= cap means the value
 * was cut, possibly in the middle of an escape. */
size_t log_format_value(char *buf, size_t cap, const char *s, size_t len);

#endif
