/* args: the call's arguments, stream IDs and the shared error replies of the
 * in-memory server (see args.h). */
#include "args.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "memreply.h"

int ms_bytecmp(const char *a, size_t alen, const char *b, size_t blen) {
  int c = memcmp(a, b, alen < blen ? alen : blen);
  if (c) return c;
  return alen < blen ? -1 : alen > blen;
}

int ms_idcmp(msid a, msid b) {
  if (a.ms != b.ms) return a.ms < b.ms ? -1 : 1;
  if (a.seq != b.seq) return a.seq < b.seq ? -1 : 1;
  return 0;
}

bool ms_id_is_zero(msid id) { return id.ms == 0 && id.seq == 0; }
bool ms_id_is_max(msid id) { return id.ms == UINT64_MAX && id.seq == UINT64_MAX; }

bool ms_arg_is(const struct ms_call *c, int i, const char *word) {
  size_t n = strlen(word);
  return i < c->argc && c->argvlen[i] == n && strncasecmp(c->argv[i], word, n) == 0;
}

bool ms_arg_char(const struct ms_call *c, int i, char ch) {
  return i < c->argc && c->argvlen[i] == 1 && c->argv[i][0] == ch;
}

bool ms_parse_ll(const char *s, size_t len, long long *out) {
  size_t i = 0;
  int neg = 0;
  unsigned long long v = 0;
  if (len == 0 || len > 20) return false;
  if (len == 1 && s[0] == '0') {
    *out = 0;
    return true;
  }
  if (s[0] == '-') {
    neg = 1;
    i++;
    if (i == len) return false;
  }
  if (s[i] < '1' || s[i] > '9') return false; /* no leading zeros, no "-0" */
  for (; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    if (v > (ULLONG_MAX - (unsigned)(s[i] - '0')) / 10) return false;
    v = v * 10 + (unsigned)(s[i] - '0');
  }
  if (neg) {
    if (v > (unsigned long long)LLONG_MAX + 1) return false;
    *out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
  } else {
    if (v > LLONG_MAX) return false;
    *out = (long long)v;
  }
  return true;
}

/* Redis' string2ull: its strict integer syntax first, then strtoull, so
 * "01", "+3" and " 5" pass while "-5" does not (but " -5" wraps around, as
 * strtoull has it). s is NUL-terminated. */
static bool string2ull(const char *s, uint64_t *out) {
  long long ll;
  if (ms_parse_ll(s, strlen(s), &ll)) {
    if (ll < 0) return false;
    *out = (uint64_t)ll;
    return true;
  }
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno == EINVAL || errno == ERANGE || !(*s != '\0' && *end == '\0')) return false;
  *out = v;
  return true;
}

/* streamGenericParseIDOrReply, step by step: a C string of at most 127
 * bytes (an embedded NUL ends it), split at the first '-'. */
bool ms_parse_id(const char *s, size_t len, msid *out, uint64_t missing_seq, bool strict,
                 bool *seq_star) {
  char buf[128];
  if (seq_star) *seq_star = false;
  if (len > sizeof buf - 1) return false;
  memcpy(buf, s, len);
  buf[len] = '\0';
  if ((buf[0] == '-' || buf[0] == '+') && buf[1] == '\0') {
    if (strict) return false;
    out->ms = out->seq = buf[0] == '-' ? 0 : UINT64_MAX;
    return true;
  }
  char *dash = strchr(buf, '-');
  if (dash) *dash = '\0';
  if (!string2ull(buf, &out->ms)) return false;
  if (dash == NULL) {
    out->seq = missing_seq;
    return true;
  }
  if (seq_star && strcmp(dash + 1, "*") == 0) {
    out->seq = 0;
    *seq_star = true;
    return true;
  }
  return string2ull(dash + 1, &out->seq);
}

bool ms_parse_range_id(const char *s, size_t len, msid *out, bool *excl, uint64_t missing_seq) {
  *excl = len > 1 && s[0] == '(';
  if (*excl) return ms_parse_id(s + 1, len - 1, out, missing_seq, true, NULL);
  return ms_parse_id(s, len, out, missing_seq, false, NULL);
}

bool ms_id_incr(msid *id) {
  if (id->seq == UINT64_MAX) {
    if (id->ms == UINT64_MAX) return false;
    id->ms++;
    id->seq = 0;
  } else {
    id->seq++;
  }
  return true;
}

bool ms_id_decr(msid *id) {
  if (id->seq == 0) {
    if (id->ms == 0) return false;
    id->ms--;
    id->seq = UINT64_MAX;
  } else {
    id->seq--;
  }
  return true;
}

bk_reply *ms_err_syntax(void) { return mr_err("ERR syntax error"); }
bk_reply *ms_err_int(void) { return mr_err("ERR value is not an integer or out of range"); }
bk_reply *ms_err_wrongtype(void) {
  return mr_err("WRONGTYPE Operation against a key holding the wrong kind of value");
}
bk_reply *ms_err_badid(void) {
  return mr_err("ERR Invalid stream ID specified as stream command argument");
}

bk_reply *ms_err_arity(const char *cmd) {
  return mr_err("ERR wrong number of arguments for '%s' command", cmd);
}

bk_reply *ms_reply_id(msid id) {
  char buf[48];
  int n =
      snprintf(buf, sizeof buf, "%llu-%llu", (unsigned long long)id.ms, (unsigned long long)id.seq);
  return mr_bulk(buf, (size_t)n);
}
