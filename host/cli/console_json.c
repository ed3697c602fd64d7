/* console_json: JSON out, form and query parameters in (console_json.h). */
#include "console_json.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"

/* The length of the valid UTF-8 sequence at s (n bytes left), 0 when the
 * byte there does not start one. Overlong forms, surrogates and code points
 * past U+10FFFF are invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len;
  unsigned min;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf)
    len = 2, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef)
    len = 3, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4)
    len = 4, min = 0x10000;
  else
    return 0;
  if (len > n) return 0;
  unsigned cp = c & (0x3f >> (len - 1));
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

bool cj_text(FILE *out, const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  bool escaped = false;
  fputc('"', out);
  for (size_t i = 0; i < n;) {
    unsigned c = p[i];
    size_t len = utf8_len(p + i, n - i);
    if (c == '\n') {
      fputs("\\n", out);
    } else if (c == '\t') {
      fputs("\\t", out);
    } else if (len == 0 || c < 0x20 || c == 0x7f) {
      fprintf(out, "\\\\x%02x", c); /* the text \xNN */
      escaped = true;
      len = 1;
    } else if (c == '\\' || c == '"') {
      fprintf(out, "\\%c", c);
    } else if (c == '<' || c == '>' || c == '&') {
      fprintf(out, "\\u%04x", c); /* never markup, even in a page that forgot */
    } else {
      fwrite(p + i, 1, len, out);
    }
    i += len;
  }
  fputc('"', out);
  return escaped;
}

void cj_str(FILE *out, const char *s) {
  if (s == NULL)
    fputs("null", out);
  else
    cj_text(out, s, strlen(s));
}

void cj_num(FILE *out, long long n) {
  if (n < 0)
    fputs("null", out);
  else
    fprintf(out, "%lld", n);
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* The n bytes at s decoded ('+' a space, %XX a byte) into a new string;
 * NULL when malformed or when a 0 byte comes out. */
static char *decode(const char *s, size_t n) {
  char *out = malloc(n + 1), *o = out;
  if (out == NULL) return NULL;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '+') {
      *o++ = ' ';
    } else if (s[i] == '%') {
      if (i + 2 >= n || hex_value(s[i + 1]) < 0 || hex_value(s[i + 2]) < 0) {
        free(out);
        return NULL;
      }
      int v = hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]);
      if (v == 0) {
        free(out);
        return NULL;
      }
      *o++ = (char)v;
      i += 2;
    } else {
      *o++ = s[i];
    }
  }
  *o = '\0';
  return out;
}

/* Calls found(name's value) for each pair named name; stops when it returns false. */
static void each_param(const char *query, const char *name,
                       bool (*found)(void *data, const char *v, size_t n), void *data) {
  size_t nlen = strlen(name);
  const char *p = query;
  while (p && *p) {
    const char *end = strchr(p, '&');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char *eq = memchr(p, '=', len);
    if (eq && (size_t)(eq - p) == nlen && !memcmp(p, name, nlen)) {
      if (!found(data, eq + 1, len - nlen - 1)) return;
    }
    p = end ? end + 1 : NULL;
  }
}

static bool take_first(void *data, const char *v, size_t n) {
  char **out = data;
  *out = decode(v, n);
  return false;
}

char *cj_param(const char *query, const char *name) {
  char *v = NULL;
  each_param(query, name, take_first, &v);
  return v;
}

struct many {
  char **v;
  size_t n, cap, max;
  bool failed;
};

static bool take_each(void *data, const char *v, size_t n) {
  struct many *m = data;
  if (m->n == m->max) return false;
  char **grown = grow(m->v, &m->cap, m->n + 1, sizeof *grown, 16);
  char *s = grown ? decode(v, n) : NULL;
  if (grown) m->v = grown;
  if (s == NULL) {
    m->failed = true;
    return false;
  }
  m->v[m->n++] = s;
  return true;
}

char **cj_params(const char *query, const char *name, size_t max, size_t *n) {
  struct many m = {.max = max};
  each_param(query, name, take_each, &m);
  if (m.failed || m.n == 0) {
    cj_params_free(m.v, m.n);
    *n = 0;
    return NULL;
  }
  *n = m.n;
  return m.v;
}

void cj_params_free(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}
