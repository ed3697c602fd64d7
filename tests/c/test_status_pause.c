/* Tests for status_pause.c: a group's pause as `status` and the console
 * show it, from HGETALL's reply and the server's time. */
#include <stdlib.h>
#include <string.h>

#include "status_pause.h"
#include "task.h"

/* An HGETALL reply of n/2 field-value pairs. */
static bk_reply *hash(const char *const *kv, size_t n) {
  bk_reply *r = calloc(1, sizeof *r);
  r->type = BK_ARRAY;
  r->elements = n;
  r->element = calloc(n ? n : 1, sizeof *r->element);
  for (size_t i = 0; i < n; i++) {
    bk_reply *s = calloc(1, sizeof *s);
    s->type = BK_STRING;
    s->str = (char *)kv[i];
    s->len = strlen(kv[i]);
    r->element[i] = s;
  }
  return r;
}

static void hash_free(bk_reply *r) {
  for (size_t i = 0; i < r->elements; i++) free(r->element[i]);
  free(r->element);
  free(r);
}

static struct st_pause taken(const char *const *kv, size_t n, long long now) {
  struct st_pause p;
  status_pause_init(&p, "payments", "ledger");
  bk_reply *r = hash(kv, n);
  ASSERT(status_pause_take(&p, r));
  hash_free(r);
  status_pause_settle(&p, now);
  return p;
}

TEST_IMPL(status_pause_key_and_running) {
  struct st_pause p = taken(NULL, 0, 5000);
  ASSERT_STR_EQ(p.key, "luastream:pause:{payments}:ledger");
  ASSERT_INT_EQ(p.state, ST_RUNNING);
  ASSERT_NULL(status_pause_text(&p));
  status_pause_free(&p);
  /* an error reply is not a pause read */
  status_pause_init(&p, "payments", "ledger");
  bk_reply err = {.type = BK_ERROR, .str = "NOPERM", .len = 6};
  ASSERT(!status_pause_take(&p, &err));
  status_pause_free(&p);
}

TEST_IMPL(status_pause_manual) {
  static const char *const until_resumed[] = {
      "kind", "manual", "reason", "deploy", "by", "luastream pause by a@b", "since_ms", "1000"};
  struct st_pause p = taken(until_resumed, 8, 121000);
  ASSERT_INT_EQ(p.state, ST_PAUSED);
  ASSERT_INT_EQ(p.left_ms, -1);
  char *text = status_pause_text(&p);
  ASSERT_STR_EQ(text, "paused by luastream pause by a@b 2m ago, until resumed: deploy");
  free(text);
  status_pause_free(&p);
  static const char *const for_a_while[] = {"kind", "manual",   "reason", "",         "by",
                                            "x",    "since_ms", "1000",   "until_ms", "61000"};
  p = taken(for_a_while, 10, 31000);
  ASSERT_INT_EQ(p.left_ms, 30000);
  text = status_pause_text(&p);
  ASSERT_STR_EQ(text, "paused by x 30s ago, 30s left: no reason given");
  free(text);
  status_pause_free(&p);
  /* past its until_ms (the key expiring): over */
  p = taken(for_a_while, 10, 61000);
  ASSERT_INT_EQ(p.state, ST_RUNNING);
  status_pause_free(&p);
}

TEST_IMPL(status_pause_breaker) {
  static const char *const open[] = {"kind",     "breaker",      "reason",   "api 503",
                                     "by",       "breaker of h", "since_ms", "1000",
                                     "until_ms", "21000",        "trips",    "2"};
  struct st_pause p = taken(open, 12, 11000);
  ASSERT_INT_EQ(p.state, ST_PAUSED);
  ASSERT_INT_EQ(p.trips, 2);
  char *text = status_pause_text(&p);
  ASSERT_STR_EQ(text, "breaker open (trip 2), 10s left, then one entry probes: api 503");
  free(text);
  status_pause_free(&p);
  /* past it: half-open, one entry probes */
  p = taken(open, 12, 21000);
  ASSERT_INT_EQ(p.state, ST_HALF_OPEN);
  text = status_pause_text(&p);
  ASSERT_STR_EQ(text, "breaker half-open after 2 trips: one entry probes: api 503");
  free(text);
  status_pause_free(&p);
  /* the server's time unknown: a pause with an end is taken as on */
  p = taken(open, 12, -1);
  ASSERT_INT_EQ(p.state, ST_PAUSED);
  status_pause_free(&p);
}
