/* broker: helpers shared by every broker user and implementation.
 *
 * Reply predicates, server version parsing (the host refuses to start a
 * subscription whose read mode needs a newer server, so the versions must
 * compare as numbers), and the argv builder that turns a command into the
 * (pointer, length) arrays bk_command takes. No I/O here. */
#include "broker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- replies ---- */

int bk_reply_is_error(const bk_reply *r, const char *code) {
  if (r == NULL || r->type != BK_ERROR) return 0;
  if (code == NULL) return 1;
  size_t n = strlen(code);
  /* The code is the first word: "ERR" must not match "ERRX ...". */
  return r->len >= n && memcmp(r->str, code, n) == 0 && (r->len == n || r->str[n] == ' ');
}

void bk_reply_text(const bk_reply *r, const char *err, char *buf, size_t len) {
  if (r == NULL)
    snprintf(buf, len, "%s", err ? err : "no reply");
  else if (r->type == BK_ERROR)
    snprintf(buf, len, "%.*s", (int)r->len, r->str);
  else
    snprintf(buf, len, "unexpected reply type %d", r->type);
}

int bk_error_is_denied(const char *text) {
  return text && (strncmp(text, "NOPERM", 6) == 0 ||
                  strstr(text, "The user executing the script can't") != NULL);
}

int bk_error_is_too_large(const char *err) {
  return err && strncmp(err, BK_ERR_TOO_LARGE, sizeof BK_ERR_TOO_LARGE - 1) == 0;
}

long bk_version_parse(const char *text, size_t len) {
  long part[3] = {0, 0, 0};
  static const long limit[3] = {9999, 99, 99}; /* beyond these the packing collides */
  size_t i = 0;
  if (text == NULL) return -1;
  for (int k = 0; k < 3; k++) {
    size_t start = i;
    while (i < len && text[i] >= '0' && text[i] <= '9') {
      part[k] = part[k] * 10 + (text[i] - '0');
      /* A release candidate's patch ("8.3.224") saturates: it still sorts
       * below the next minor release. */
      if (part[k] > limit[k]) {
        if (k < 2) return -1;
        part[k] = limit[k];
      }
      i++;
    }
    if (i == start) return -1; /* an empty component */
    if (k < 2) {
      if (i == len || text[i] != '.') return -1;
      i++;
    }
  }
  if (i != len) return -1;
  return part[0] * 10000 + part[1] * 100 + part[2];
}

long bk_info_version(const bk_reply *info, char *out, size_t outlen) {
  static const char key[] = "redis_version:";
  const size_t klen = sizeof key - 1;
  if (out && outlen) out[0] = '\0';
  if (info == NULL || (info->type != BK_STRING && info->type != BK_STATUS) || info->str == NULL)
    return -1;
  const char *s = info->str, *end = info->str + info->len;
  /* The key must start a line: another section could hold a field whose name
   * ends in "redis_version". */
  for (const char *line = s; line < end;) {
    const char *nl = memchr(line, '\n', (size_t)(end - line));
    const char *eol = nl ? nl : end;
    if ((size_t)(eol - line) >= klen && memcmp(line, key, klen) == 0) {
      const char *v = line + klen, *ve = eol;
      if (ve > v && ve[-1] == '\r') ve--;
      size_t vlen = (size_t)(ve - v);
      if (out && outlen) {
        size_t n = vlen < outlen - 1 ? vlen : outlen - 1;
        memcpy(out, v, n);
        out[n] = '\0';
      }
      return bk_version_parse(v, vlen);
    }
    line = nl ? nl + 1 : end;
  }
  return -1;
}

/* ---- argv builder ---- */

void bk_args_init(struct bk_args *a) { memset(a, 0, sizeof *a); }

void bk_args_reset(struct bk_args *a) {
  a->argc = 0;
  a->nnum = 0;
}

void bk_args_free(struct bk_args *a) {
  free(a->argv);
  free(a->argvlen);
  bk_args_init(a);
}

/* The builder has no error return, and running out of memory for a few
 * pointers leaves nothing sensible to do: stop loudly. */
static void die(const char *why) {
  fprintf(stderr, "luastream: bk_args: %s\n", why);
  abort();
}

void bk_args_add(struct bk_args *a, const char *s, size_t len) {
  if (a->argc == a->cap) {
    int cap = a->cap ? a->cap * 2 : 8;
    const char **argv = realloc(a->argv, (size_t)cap * sizeof *argv);
    if (argv == NULL) die("out of memory");
    a->argv = argv;
    size_t *argvlen = realloc(a->argvlen, (size_t)cap * sizeof *argvlen);
    if (argvlen == NULL) die("out of memory");
    a->argvlen = argvlen;
    a->cap = cap;
  }
  a->argv[a->argc] = s;
  a->argvlen[a->argc] = len;
  a->argc++;
}

void bk_args_str(struct bk_args *a, const char *s) { bk_args_add(a, s, strlen(s)); }

void bk_args_num(struct bk_args *a, long long n) {
  const int slots = (int)(sizeof a->numbuf / sizeof a->numbuf[0]);
  if (a->nnum == slots) die("more than 8 numbers in one command (raise numbuf)");
  char *buf = a->numbuf[a->nnum++];
  int len = snprintf(buf, sizeof a->numbuf[0], "%lld", n);
  bk_args_add(a, buf, (size_t)len);
}
