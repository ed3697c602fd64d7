/* log: builds logfmt or JSON lines and hands each one, whole, to the sink.
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
static enum log_format line_format = LOG_FORMAT_LOGFMT;

static const char *const level_names[] = {"debug", "info", "warn", "error"};
static const char *const format_names[] = {"logfmt", "json"};

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

void log_set_format(enum log_format format) { line_format = format; }
enum log_format log_get_format(void) { return line_format; }

int log_format_parse(const char *name) {
  if (name == NULL) return -1;
  for (int i = 0; i <= LOG_FORMAT_JSON; i++)
    if (strcasecmp(name, format_names[i]) == 0) return i;
  return -1;
}

const char *log_format_name(enum log_format format) {
  if ((int)format < LOG_FORMAT_LOGFMT || format > LOG_FORMAT_JSON) return "unknown";
  return format_names[format];
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

/* ---- JSON encoding ---- */

/* The length of the well-formed UTF-8 sequence at s (n bytes available), or
 * 0 when s[0] does not start one (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n) {
  unsigned char c = s[0], lo = 0x80, hi = 0xbf;
  size_t len;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf)
    len = 2;
  else if (c == 0xe0)
    len = 3, lo = 0xa0;
  else if (c == 0xed)
    len = 3, hi = 0x9f;
  else if (c >= 0xe1 && c <= 0xef)
    len = 3;
  else if (c == 0xf0)
    len = 4, lo = 0x90;
  else if (c == 0xf4)
    len = 4, hi = 0x8f;
  else if (c >= 0xf1 && c <= 0xf3)
    len = 4;
  else
    return 0;
  if (n < len || s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if (s[i] < 0x80 || s[i] > 0xbf) return 0;
  return len;
}

static void put_str(struct out *o, const char *s) {
  while (*s) put(o, *s++);
}

/* The bytes of a JSON string, without its quotes. */
static void encode_json_chars(struct out *o, const char *s, size_t len) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < len;) {
    unsigned char c = u[i];
    if (c >= 0x80) {
      size_t k = utf8_seq(u + i, len - i);
      if (k == 0) {
        put_str(o, "\\ufffd"); /* not UTF-8: the replacement character */
        i++;
      } else {
        for (size_t j = 0; j < k; j++) put(o, (char)u[i + j]);
        i += k;
      }
      continue;
    }
    i++;
    switch (c) {
      case '"': put_str(o, "\\\""); continue;
      case '\\': put_str(o, "\\\\"); continue;
      case '\n': put_str(o, "\\n"); continue;
      case '\r': put_str(o, "\\r"); continue;
      case '\t': put_str(o, "\\t"); continue;
      case '\b': put_str(o, "\\b"); continue;
      case '\f': put_str(o, "\\f"); continue;
      default: break;
    }
    if (c < ' ' || c == 0x7f) {
      put_str(o, "\\u00");
      put(o, hex[c >> 4]);
      put(o, hex[c & 15]);
    } else {
      put(o, (char)c);
    }
  }
}

static void encode_json_string(struct out *o, const char *s, size_t len) {
  put(o, '"');
  encode_json_chars(o, s, len);
  put(o, '"');
}

/* s is a number by RFC 8259's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int is_json_number(const char *s, size_t len) {
  size_t i = 0, d;
  if (i < len && s[i] == '-') i++;
  if (i < len && s[i] == '0') {
    i++;
  } else {
    for (d = i; i < len && s[i] >= '0' && s[i] <= '9'; i++) {}
    if (i == d) return 0;
  }
  if (i < len && s[i] == '.') {
    for (d = ++i; i < len && s[i] >= '0' && s[i] <= '9'; i++) {}
    if (i == d) return 0;
  }
  if (i < len && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < len && (s[i] == '+' || s[i] == '-')) i++;
    for (d = i; i < len && s[i] >= '0' && s[i] <= '9'; i++) {}
    if (i == d) return 0;
  }
  return i == len;
}

size_t log_format_value(char *buf, size_t cap, const char *s, size_t len) {
  struct out o = {buf, cap ? cap - 1 : 0, 0};
  encode_value(&o, s, len);
  if (cap) buf[o.n < cap - 1 ? o.n : cap - 1] = '\0';
  return o.n;
}

/* ---- line assembly ---- */

/* Room kept at the end of every line for a log_truncated marker, so a line
 * cut short can always say so (and a JSON line still closes). */
#define TAIL_ROOM 24
#define PAIRS_STACK 64 /* pairs handled without allocating */

/* The line being built: starts on the caller's stack buffer, moves to the
 * heap once when it outgrows it (unless fixed). Room for TAIL_ROOM bytes and
 * the closing "\n\0" is always kept. */
struct line {
  char *p;
  size_t len;
  size_t cap;
  int heap;
  int fixed;        /* the caller's buffer, which may not grow */
  int cut;          /* out of room: the rest of the line was dropped */
  size_t field_end; /* JSON: the length after the last whole field */
};

/* The key/value pairs of a line. */
struct pairs {
  size_t n;
  const char *const *kv;
  const size_t *kvlen;
  const unsigned char *numeric; /* NULL: no value is a number */
};

/* Makes room for n more bytes (plus the tail); returns 0, or -1 when the
 * line cannot grow, in which case the caller drops the piece. */
static int reserve(struct line *l, size_t n) {
  if (l->cut) return -1;
  if (l->len + n + TAIL_ROOM + 2 <= l->cap) return 0;
  if (l->fixed) {
    l->cut = 1;
    return -1;
  }
  size_t cap = l->cap * 2;
  if (cap < l->len + n + TAIL_ROOM + 2) cap = l->len + n + TAIL_ROOM + 2;
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

/* Appends s encoded by enc: counted first, then written in place. */
static void add_encoded(struct line *l, void (*enc)(struct out *, const char *, size_t),
                        const char *s, size_t n) {
  struct out count = {NULL, 0, 0};
  enc(&count, s, n);
  if (reserve(l, count.n) != 0) return;
  struct out o = {l->p + l->len, count.n, 0};
  enc(&o, s, n);
  l->len += count.n;
}

static void add_value(struct line *l, const char *s, size_t n) {
  add_encoded(l, encode_value, s, n);
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

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" of Unix ms into buf (at least 32 bytes). */
static int format_time(char *buf, size_t cap, uint64_t ms) {
  struct tm tm;
  time_t sec = (time_t)(ms / 1000u);
  gmtime_r(&sec, &tm);
  return snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000u));
}

static void build_logfmt(struct line *l, uint64_t ms, enum log_level level, const char *handler,
                         const char *msg, const struct pairs *pr) {
  char tbuf[64];
  int n = format_time(tbuf, sizeof tbuf, ms);
  add_str(l, "time=");
  add_raw(l, tbuf, (size_t)n);
  add_str(l, " level=");
  add_str(l, log_level_name(level));
  if (handler) {
    add_str(l, " handler=");
    add_value(l, handler, strlen(handler));
  }
  add_str(l, " msg=");
  add_value(l, msg, strlen(msg));
  for (size_t i = 0; i < pr->n; i++) {
    add_key(l, pr->kv[2 * i], pr->kvlen[2 * i]);
    add_value(l, pr->kv[2 * i + 1], pr->kvlen[2 * i + 1]);
  }
}

/* ---- JSON lines ---- */

/* A key already on the line: its escaped text, inside the line buffer. */
struct name {
  size_t off, len;
};

struct names {
  struct name *v;
  size_t n;
};

static int name_taken(const struct line *l, const struct names *taken, size_t off, size_t len) {
  for (size_t i = 0; i < taken->n; i++)
    if (taken->v[i].len == len && memcmp(l->p + taken->v[i].off, l->p + off, len) == 0) return 1;
  return 0;
}

/* A later pair has the same key. */
static int key_repeats(const struct pairs *pr, size_t i) {
  const char *k = pr->kv[2 * i];
  size_t n = pr->kvlen[2 * i];
  for (size_t j = i + 1; j < pr->n; j++)
    if (pr->kvlen[2 * j] == n && memcmp(pr->kv[2 * j], k, n) == 0) return 1;
  return 0;
}

/* Appends `"KEY":` (or `,"KEY":` when not first) under a name no other key of
 * the line has (see log.h): KEY itself when `plain` and free, else
 * fields.KEY, fields.KEY.2, ... Records the name in taken. */
static void add_json_key(struct line *l, struct names *taken, const char *key, size_t n,
                         int plain) {
  size_t start = l->len;
  if (n == 0) key = "_", n = 1;
  for (unsigned k = plain ? 0 : 1;; k++) {
    l->len = start;
    if (start > 1) add_raw(l, ",", 1);
    add_raw(l, "\"", 1);
    size_t off = l->len;
    if (k > 0) add_str(l, "fields.");
    add_encoded(l, encode_json_chars, key, n);
    if (k > 1) {
      char suffix[16];
      int w = snprintf(suffix, sizeof suffix, ".%u", k);
      add_raw(l, suffix, (size_t)w);
    }
    if (l->cut) return;
    size_t len = l->len - off;
    if (name_taken(l, taken, off, len)) continue;
    add_raw(l, "\":", 2);
    taken->v[taken->n++] = (struct name){off, len};
    return;
  }
}

static void end_field(struct line *l) {
  if (!l->cut) l->field_end = l->len;
}

static void add_json_field(struct line *l, struct names *taken, const char *key, const char *value,
                           size_t n) {
  add_json_key(l, taken, key, strlen(key), 1);
  add_encoded(l, encode_json_string, value, n);
  end_field(l);
}

static void build_json(struct line *l, uint64_t ms, enum log_level level, const char *handler,
                       const char *msg, const struct pairs *pr) {
  struct name stack[PAIRS_STACK + 4];
  struct names taken = {stack, 0};
  add_raw(l, "{", 1);
  end_field(l);
  if (pr->n > PAIRS_STACK) {
    taken.v = malloc((pr->n + 4) * sizeof *taken.v);
    if (taken.v == NULL) {
      l->cut = 1;
      return;
    }
  }
  char tbuf[64];
  int tn = format_time(tbuf, sizeof tbuf, ms);
  add_json_field(l, &taken, "time", tbuf, (size_t)tn);
  const char *lname = log_level_name(level);
  add_json_field(l, &taken, "level", lname, strlen(lname));
  if (handler) add_json_field(l, &taken, "handler", handler, strlen(handler));
  add_json_field(l, &taken, "msg", msg, strlen(msg));
  for (size_t i = 0; i < pr->n && !l->cut; i++) {
    const char *v = pr->kv[2 * i + 1];
    size_t vn = pr->kvlen[2 * i + 1];
    add_json_key(l, &taken, pr->kv[2 * i], pr->kvlen[2 * i], !key_repeats(pr, i));
    if (pr->numeric && pr->numeric[i] && is_json_number(v, vn))
      add_raw(l, v, vn);
    else
      add_encoded(l, encode_json_string, v, vn);
    end_field(l);
  }
  add_raw(l, "}", 1);
  if (taken.v != stack) free(taken.v);
}

/* ---- the whole line ---- */

static void build(struct line *l, uint64_t ms, enum log_level level, const char *handler,
                  const char *msg, const struct pairs *pr) {
  if (msg == NULL) msg = "";
  if (line_format == LOG_FORMAT_JSON)
    build_json(l, ms, level, handler, msg, pr);
  else
    build_logfmt(l, ms, level, handler, msg, pr);
  if (l->cut) {
    /* Keep what was built and say so, in the room the reserve kept. */
    if (line_format == LOG_FORMAT_JSON) {
      l->len = l->field_end;
      const char *mark = l->len > 1 ? ",\"log_truncated\":true}" : "\"log_truncated\":true}";
      memcpy(l->p + l->len, mark, strlen(mark));
      l->len += strlen(mark);
    } else {
      static const char mark[] = " log_truncated=true";
      memcpy(l->p + l->len, mark, sizeof mark - 1);
      l->len += sizeof mark - 1;
    }
  }
  l->p[l->len] = '\n';
  l->p[l->len + 1] = '\0';
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

static void emit(enum log_level level, const char *handler, const char *msg,
                 const struct pairs *pr) {
  char stack[LINE_STACK];
  struct line l = {stack, 0, sizeof stack, 0, 0, 0, 0};
  build(&l, wall_ms(), level, handler, msg, pr);
  if (sink_fn)
    sink_fn(sink_data, level, l.p, l.len);
  else
    log_write_stderr(l.p, l.len + 1); /* the default sink: the line and its newline */
  if (l.heap) free(l.p);
}

void log_line(enum log_level level, const char *handler, const char *msg, ...) {
  if (level < min_level) return;
  int saved_errno = errno;
  const char *stack_kv[2 * PAIRS_STACK];
  size_t stack_len[2 * PAIRS_STACK];
  unsigned char stack_num[PAIRS_STACK];
  const char **kv = stack_kv;
  size_t *kvlen = stack_len;
  unsigned char *num = stack_num;
  size_t n = 0, max = PAIRS_STACK;
  va_list ap, count;

  va_start(ap, msg);
  va_copy(count, ap);
  for (size_t all = 0;; all++) {
    if (va_arg(count, const char *) == NULL) {
      if (all > max) {
        kv = malloc(2 * all * sizeof *kv);
        kvlen = malloc(2 * all * sizeof *kvlen);
        num = malloc(all);
        if (kv && kvlen && num) {
          max = all;
        } else { /* the first PAIRS_STACK pairs only */
          free(kv), free(kvlen), free(num);
          kv = stack_kv, kvlen = stack_len, num = stack_num;
        }
      }
      break;
    }
    (void)va_arg(count, const char *);
  }
  va_end(count);
  for (;;) {
    const char *key = va_arg(ap, const char *);
    if (key == NULL) break;
    const char *value = va_arg(ap, const char *);
    if (value == NULL || n == max) continue;
    num[n] = key[0] == LOG_NUMBER[0];
    kv[2 * n] = key + num[n];
    kvlen[2 * n] = strlen(kv[2 * n]);
    kv[2 * n + 1] = value;
    kvlen[2 * n + 1] = strlen(value);
    n++;
  }
  va_end(ap);
  struct pairs pr = {n, kv, kvlen, num};
  emit(level, handler, msg, &pr);
  if (kv != stack_kv) free(kv), free(kvlen), free(num);
  errno = saved_errno;
}

void log_text(enum log_level level, const char *msg, const char *text) {
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    char line[4096];
    snprintf(line, sizeof line, "%.*s", (int)n, p);
    if (msg)
      log_line(level, NULL, msg, "error", line, NULL);
    else
      log_line(level, NULL, line, NULL);
    p += nl ? n + 1 : n;
  }
}

void log_line_pairs(enum log_level level, const char *handler, const char *msg, size_t n,
                    const char *const *kv, const size_t *kvlen, const unsigned char *numeric) {
  if (level < min_level) return;
  int saved_errno = errno;
  struct pairs pr = {n, kv, kvlen, numeric};
  emit(level, handler, msg, &pr);
  errno = saved_errno;
}

size_t log_format_line(char *buf, size_t cap, uint64_t time_ms, enum log_level level,
                       const char *handler, const char *msg, size_t n, const char *const *kv,
                       const size_t *kvlen, const unsigned char *numeric) {
  if (cap < TAIL_ROOM + 2) {
    if (cap) buf[0] = '\0';
    return 0;
  }
  struct line l = {buf, 0, cap, 0, 1, 0, 0};
  struct pairs pr = {n, kv, kvlen, numeric};
  if (line_format == LOG_FORMAT_JSON && n > PAIRS_STACK) pr.n = PAIRS_STACK; /* no allocation */
  build(&l, time_ms, level, handler, msg, &pr);
  return l.len + 1;
}
