/* status_pause: a group's pause in `status` and the console (status_pause.h). */
#include "status_pause.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "console_json.h"
#include "flow_keys.h"
#include "status_rules.h"

/* printf into a new string; out of memory ends the program (status_query.c
 * has the same, but calls this file: no circle). */
static char *text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *text(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = malloc((size_t)n + 1);
  if (s == NULL) {
    fputs("luastream: out of memory\n", stderr);
    exit(1);
  }
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

void status_pause_init(struct st_pause *p, const char *base, const char *group) {
  memset(p, 0, sizeof *p);
  p->since_ms = p->until_ms = p->left_ms = p->now_ms = -1;
  if (group == NULL) return;
  p->key = flow_key("pause", base, group, NULL);
  p->stream = strdup(base);
  if (p->key == NULL || p->stream == NULL) {
    fputs("luastream: out of memory\n", stderr);
    exit(1);
  }
}

void status_pause_free(struct st_pause *p) {
  free(p->key);
  free(p->stream);
  free(p->reason);
  free(p->by);
  free(p->probe);
}

/* A field of the pause hash, only as a string. */
static const bk_reply *hfield(const bk_reply *r, const char *name) {
  const bk_reply *v = client_field(r, name);
  return v && v->type == BK_STRING ? v : NULL;
}

static char *hstr(const bk_reply *r, const char *name) {
  const bk_reply *v = hfield(r, name);
  return v ? text("%.*s", (int)v->len, v->str) : NULL;
}

static long long hnum(const bk_reply *r, const char *name, long long missing) {
  const bk_reply *v = hfield(r, name);
  if (v == NULL || v->len == 0 || v->len > 20) return missing;
  char buf[24], *end;
  snprintf(buf, sizeof buf, "%.*s", (int)v->len, v->str);
  long long n = strtoll(buf, &end, 10);
  return *end == '\0' ? n : missing;
}

bool status_pause_take(struct st_pause *p, const bk_reply *r) {
  if (r->type != BK_ARRAY) return false;
  p->read = true;
  const bk_reply *kind = hfield(r, "kind");
  if (kind == NULL) return true; /* no pause */
  snprintf(p->kind, sizeof p->kind, "%.*s", (int)kind->len, kind->str);
  p->reason = hstr(r, "reason");
  p->by = hstr(r, "by");
  p->probe = hstr(r, "probe");
  p->since_ms = hnum(r, "since_ms", -1);
  p->until_ms = hnum(r, "until_ms", -1);
  p->trips = hnum(r, "trips", 0);
  return true;
}

void status_pause_settle(struct st_pause *p, long long now_ms) {
  p->state = ST_RUNNING;
  p->left_ms = -1;
  p->now_ms = now_ms;
  if (!p->read || p->kind[0] == '\0') return;
  if (p->until_ms < 0 || now_ms < 0 || now_ms < p->until_ms) {
    p->state = ST_PAUSED;
    if (p->until_ms >= 0 && now_ms >= 0) p->left_ms = p->until_ms - now_ms;
    return;
  }
  if (strcmp(p->kind, "breaker") == 0) p->state = ST_HALF_OPEN;
}

char *status_pause_text(const struct st_pause *p) {
  char a[32], b[32];
  const char *reason = p->reason && p->reason[0] ? p->reason : "no reason given";
  const char *by = p->by && p->by[0] ? p->by : "?";
  bool breaker = strcmp(p->kind, "breaker") == 0;
  switch (p->state) {
    case ST_RUNNING: return NULL;
    case ST_HALF_OPEN:
      return text("breaker half-open after %lld %s: one entry probes%s%s: %s", p->trips,
                  p->trips == 1 ? "trip" : "trips", p->probe ? " on " : "",
                  p->probe ? p->probe : "", reason);
    case ST_PAUSED: break;
  }
  if (breaker)
    return text("breaker open (trip %lld), %s left, then one entry probes: %s", p->trips,
                p->left_ms < 0 ? "?" : status_format_ms(p->left_ms, a, sizeof a), reason);
  char since[48] = "";
  if (p->since_ms >= 0 && p->now_ms >= p->since_ms)
    snprintf(since, sizeof since, " %s ago",
             status_format_ms(p->now_ms - p->since_ms, a, sizeof a));
  if (p->left_ms >= 0)
    return text("paused by %s%s, %s left: %s", by, since, status_format_ms(p->left_ms, b, sizeof b),
                reason);
  return text("paused by %s%s, until resumed: %s", by, since, reason);
}

void status_pause_json(FILE *out, const struct st_pause *p) {
  if (p->state == ST_RUNNING) {
    fputs("null", out);
    return;
  }
  fprintf(out, "{\"state\":\"%s\",\"kind\":", p->state == ST_PAUSED ? "paused" : "half-open");
  cj_str(out, p->kind);
  fputs(",\"reason\":", out);
  cj_str(out, p->reason);
  fputs(",\"by\":", out);
  cj_str(out, p->by);
  fputs(",\"since_ms\":", out);
  cj_num(out, p->since_ms);
  fputs(",\"until_ms\":", out);
  cj_num(out, p->until_ms);
  fputs(",\"left_ms\":", out);
  cj_num(out, p->left_ms);
  fprintf(out, ",\"trips\":%lld,\"probe\":", p->trips);
  cj_str(out, p->probe);
  fputs(",\"key\":", out);
  cj_str(out, p->key);
  fputc('}', out);
}
