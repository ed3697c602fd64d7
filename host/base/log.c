/* log: builds logfmt lines and hands each one, whole, to the sink.
 *
 * A line is assembled in a stack buffer and only moves to the heap when it
 * outgrows it (a long traceback), so ordinary logging never allocates. The
 * default sink writes the line and its newline with a single write(2) on
 * stderr: lines from several processes sharing a pipe then never interleave
 * mid-line (pipes keep writes up to PIPE_BUF whole). */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define LINE_STACK 4096 /* bytes built on the stack before moving to the heap */

static enum log_level min_level = LOG_INFO;
static log_sink_fn *sink_fn; /* NULL: stderr */
static void *sink_data;
static lclock *wall_clock; /* NULL: the OS wall clock */

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_set_level(enum log_level min) { min_level = min; }
enum log_level log_get_level(void) { return min_level; }

void log_set_sink(log_sink_fn *sink, void *data) {
  sink_fn = sink;
  sink_data = sink ? data : NULL;
}

log_sink_fn *log_get_sink(void **data) {
  if (data) *data = sink_data;
  return sink_fn;
}

void log_set_clock(lclock *clock) { wall_clock = clock; }
lclock *log_get_clock(void) { return wall_clock; }

/* Unix ms of the line: the log's clock, else the OS. */
static uint64_t wall_ms(void) {
  if (wall_clock) return clock_wall(wall_clock);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int log_level_parse(const char *name) {
  if (name == NULL) return -1;
  for (int i = 0; i <= LOG_ERROR; i++)
    if (strcasecmp(name, level_names[i]) == 0) return i;
  if (strcasecmp(name, "warning") == 0) return LOG_WARN;
  return -1;
}

const char *log_level_name(enum log_level level) {
  if ((int)level < LOG_DEBUG || level > LOG_ERROR) return "unknown";
  return level_names[level];
}

/* ---- value encoding ---- */

/* A bounded output: counts every byte offered, stores those that fit. */
struct out {
  char *p;
  size_t cap; /* bytes that may be stored */
  size_t n;   /* bytes offered so far */
};

static void put(struct out *o, char c) {
  if (o->n < o->cap) o->p[o->n] = c;
  o->n++;
}

static int needs_quotes(const char *s, size_t len) {
  if (len == 0) return 1;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c <= ' ' || c == '=' || c == '"' || c == '\\' || c == 0x7f) return 1;
  }
  return 0;
}

static void encode_value(struct out *o, const char *s, size_t len) {
  static const char hex[] = "0123456789abcdef";
  if (!needs_quotes(s, len)) {
    for (size_t i = 0; i < len; i++) put(o, s[i]);
    return;
  }
  put(o, '"');
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = NULL;
    switch (c) {
      case '"': esc = "\\\""; break;
      case '\\': esc = "\\\\"; break;
      case '\n': esc = "\\n"; break;
      case '\r': esc = "\\r"; break;
      case '\t': esc = "\\t"; break;
      default: break;
    }
    if (esc) {
      put(o, esc[0]);
      put(o, esc[1]);
    } else if (c < ' ' || c == 0x7f) {
      /* JSON's form, which logfmt readers (go-logfmt, jq) decode. */
      put(o, '\\');
      put(o, 'u');
      put(o, '0');
      put(o, '0');
      put(o, hex[c >> 4]);
      put(o, hex[c & 15]);
    } else {
      put(o, (char)c); /* UTF-8 and other bytes pass through */
    }
  }
  put(o, '"');
}

size_t log_format_value(char *buf, size_t cap, const char *s, size_t len) {
  struct out o = {buf, cap ? cap - 1 : 0, 0};
  encode_value(&o, s, len);
  if (cap) buf[o.n < cap - 1 ? o.n : cap - 1] = '\0';
  return o.n;
}

/* ---- line assembly ---- */

/* The line being built: starts on the caller's stack buffer, moves to the
 * heap once when it outgrows it. Room for the closing "\n\0" is always kept. */
struct line {
  char *p;
  size_t len;
  size_t cap;
  int heap;
  int cut; /* out of memory: the rest of the line was dropped */
};

/* Makes room for n more bytes (plus "\n\0"); returns 0, or -1 when the line
 * cannot grow, in which case the caller drops the piece. */
static int reserve(struct line *l, size_t n) {
  if (l->cut) return -1;
  if (l->len + n + 2 <= l->cap) return 0;
  size_t cap = l->cap * 2;
  if (cap < l->len + n + 2) cap = l->len + n + 2;
  char *p = l->heap ? realloc(l->p, cap) : malloc(cap);
  if (p == NULL) {
    l->cut = 1;
    return -1;
  }
  if (!l->heap) memcpy(p, l->p, l->len);
  l->p = p;
  l->cap = cap;
  l->heap = 1;
  return 0;
}

static void add_raw(struct line *l, const char *s, size_t n) {
  if (reserve(l, n) != 0) return;
  memcpy(l->p + l->len, s, n);
  l->len += n;
}

static void add_str(struct line *l, const char *s) { add_raw(l, s, strlen(s)); }

static void add_value(struct line *l, const char *s, size_t n) {
  struct out count = {NULL, 0, 0};
  encode_value(&count, s, n);
  if (reserve(l, count.n) != 0) return;
  struct out o = {l->p + l->len, count.n, 0};
  encode_value(&o, s, n);
  l->len += count.n;
}

/* Appends " key=" with the characters a logfmt key cannot hold replaced. */
static void add_key(struct line *l, const char *key, size_t n) {
  if (reserve(l, n + 3) != 0) return;
  char *p = l->p + l->len;
  *p++ = ' ';
  if (n == 0) {
    *p++ = '_';
  }
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)key[i];
    *p++ = (c <= ' ' || c == '=' || c == '"' || c == 0x7f) ? '_' : (char)c;
  }
  *p++ = '=';
  l->len = (size_t)(p - l->p);
}

static void add_head(struct line *l, enum log_level level, const char *handler,
                     const char *msg) {
  struct tm tm;
  char tbuf[64];
  uint64_t ms = wall_ms();
  time_t sec = (time_t)(ms / 1000u);
  gmtime_r(&sec, &tm);
  int n = snprintf(tbuf, sizeof tbuf, "time=%04d-%02d-%02dT%02d:%02d:%02d.%03dZ level=",
                   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                   tm.tm_sec, (int)(ms % 1000u));
  add_raw(l, tbuf, (size_t)n);
  add_str(l, log_level_name(level));
  if (handler) {
    add_str(l, " handler=");
    add_value(l, handler, strlen(handler));
  }
  add_str(l, " msg=");
  if (msg == NULL) msg = "";
  add_value(l, msg, strlen(msg));
}

void log_write_stderr(const char *line, size_t n) {
  while (n > 0) {
    ssize_t w = write(STDERR_FILENO, line, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return; /* stderr is gone or non-blocking and full: nowhere to report it */
    }
    line += w;
    n -= (size_t)w;
  }
}

static void finish(struct line *l, enum log_level level) {
  if (l->cut) {
    /* Keep what was built and say so; the reserve kept room for "\n\0" only,
     * so the marker replaces the tail when it does not fit. */
    static const char mark[] = " log_truncated=true";
    size_t m = sizeof mark - 1;
    if (l->cap >= m + 2) {
      if (l->len + m + 2 > l->cap) l->len = l->cap - m - 2;
      memcpy(l->p + l->len, mark, m);
      l->len += m;
    }
  }
  l->p[l->len] = '\n';
  l->p[l->len + 1] = '\0';
  if (sink_fn)
    sink_fn(sink_data, level, l->p, l->len);
  else
    log_write_stderr(l->p, l->len + 1); /* the default sink: the line and its newline */
  if (l->heap) free(l->p);
}

void log_line(enum log_level level, const char *handler, const char *msg, ...) {
  if (level < min_level) return;
  int saved_errno = errno;
  char stack[LINE_STACK];
  struct line l = {stack, 0, sizeof stack, 0, 0};
  va_list ap;

  add_head(&l, level, handler, msg);
  va_start(ap, msg);
  for (;;) {
    const char *key = va_arg(ap, const char *);
    if (key == NULL) break;
    const char *value = va_arg(ap, const char *);
    if (value == NULL) continue;
    add_key(&l, key, strlen(key));
    add_value(&l, value, strlen(value));
  }
  va_end(ap);
  finish(&l, level);
  errno = saved_errno;
}

void log_line_pairs(enum log_level level, const char *handler, const char *msg, size_t n,
                    const char *const *kv, const size_t *kvlen) {
  if (level < min_level) return;
  int saved_errno = errno;
  char stack[LINE_STACK];
  struct line l = {stack, 0, sizeof stack, 0, 0};

  add_head(&l, level, handler, msg);
  for (size_t i = 0; i < n; i++) {
    add_key(&l, kv[2 * i], kvlen[2 * i]);
    add_value(&l, kv[2 * i + 1], kvlen[2 * i + 1]);
  }
  finish(&l, level);
  errno = saved_errno;
}
