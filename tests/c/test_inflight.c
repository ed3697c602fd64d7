/* Tests for inflight.c's calls, on a replay broker: an entry starts only
 * once its slot is granted; a call whose answer was lost asks for the same
 * member again (the script grants a member already held again: no slot
 * leaks); a maybe-held slot no entry needs any more is given back; a refused
 * reader asks again after INFLIGHT_POLL_MS; a finished handler's slot goes
 * back in the next call. */
#include <stdlib.h>
#include <string.h>

#include "clock_virtual.h"
#include "entry.h"
#include "inflight.h"
#include "replay_broker.h"
#include "scripts.h"
#include "task.h"

struct probe {
  int started, answered;
  bool grant; /* what the responder answers to each member wanted */
};

static bool start(void *data, struct entry *e) {
  ((struct probe *)data)->started++;
  entry_free(e);
  return true;
}
static void answered(void *data) { ((struct probe *)data)->answered++; }

/* Answers SCRIPT_INFLIGHT: every renewal 1, every want probe->grant. */
static char *respond(void *data, const char *conn, int argc, char **words) {
  (void)conn;
  struct probe *p = data;
  if (argc < 13 || strcmp(words[1], "<inflight>") != 0) return NULL;
  int nrenew = atoi(words[11]), nwant = atoi(words[12]);
  char *out = malloc(64 + 8 * (size_t)(nrenew + nwant));
  size_t at = (size_t)sprintf(out, "*3\r\n*%d\r\n", nrenew);
  for (int i = 0; i < nrenew; i++) at += (size_t)sprintf(out + at, ":1\r\n");
  at += (size_t)sprintf(out + at, "*%d\r\n", nwant);
  for (int i = 0; i < nwant; i++) at += (size_t)sprintf(out + at, ":%d\r\n", p->grant ? 1 : 0);
  sprintf(out + at, p->grant || nwant == 0 ? "$0\r\n\r\n" : "$3\r\n1|w\r\n");
  return out;
}

/* Word i of the n-th command sent on "cmd", copied into out. */
static const char *word(replay_broker *rb, size_t n, int i, char *out, size_t len) {
  const char *s = replay_sent(rb, "cmd", n);
  out[0] = '\0';
  for (int w = 0; s && w < i; w++) {
    s = strchr(s, ' ');
    if (s) s++;
  }
  if (s == NULL) return out;
  size_t k = strcspn(s, " ");
  if (k >= len) k = len - 1;
  memcpy(out, s, k);
  out[k] = '\0';
  return out;
}

static struct entry *one(const char *id) { return entry_new(id, strlen(id), 0, NULL, NULL); }

TEST_IMPL(inflight_lost_answer_asks_for_the_same_member_again) {
  lclock *clk = clock_virtual_new(0);
  replay_broker *rb = replay_new(clk);
  broker *b = replay_base(rb);
  replay_alias(rb, SCRIPT_INFLIGHT, "<inflight>");
  struct probe probe = {.grant = true};
  replay_respond(rb, respond, &probe);
  bk_conn *c = bk_conn_open(b, "cmd", NULL, NULL);
  clock_virtual_settle(clk);
  struct handler_spec spec = {
      .name = "h", .stream = "s", .group = "g", .consumer = "c", .workers = 4, .max_in_flight = 2};
  inflight *f = inflight_new(b, c, clk, &spec, "s", -1, start, answered, &probe);
  ASSERT_NOT_NULL(f);
  ASSERT_STR_EQ(inflight_key(f), "luastream:inflight:{s}:g");

  /* The answer is lost: the entry does not start. */
  replay_hold(rb);
  inflight_admit(f, one("1-0"));
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), 1);
  char first[600], again[600], n[32];
  word(rb, 0, 12, n, sizeof n);
  ASSERT_STR_EQ(n, "1"); /* one wanted */
  word(rb, 0, 13, first, sizeof first);
  replay_drop(rb, "gone");
  replay_release(rb);
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(probe.started, 0);
  ASSERT_INT_EQ(inflight_waiting(f), 1);
  replay_restore(rb);
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), 1); /* not before INFLIGHT_POLL_MS */
  clock_virtual_advance(clk, INFLIGHT_POLL_MS);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), 2);
  word(rb, 1, 13, again, sizeof again);
  ASSERT_STR_EQ(again, first); /* the same member: granted again, not twice */
  ASSERT_INT_EQ(probe.started, 1);
  ASSERT_INT_EQ(inflight_held(f), 1);

  /* Its handler finished: the slot goes back in the next call. */
  inflight_done(f);
  ASSERT(inflight_pending(f) > 0);
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), 3);
  word(rb, 2, 10, n, sizeof n);
  ASSERT_STR_EQ(n, "1"); /* one released */
  word(rb, 2, 13, again, sizeof again);
  ASSERT_STR_EQ(again, first);
  ASSERT_INT_EQ(inflight_held(f), 0);
  ASSERT_INT_EQ(inflight_pending(f), 0);

  inflight_free(f);
  bk_conn_close(b, c);
  broker_free(b);
  clk->ops->free(clk);
  LEAK_CHECK();
}

TEST_IMPL(inflight_refused_asks_again_and_a_stop_gives_back_what_may_be_held) {
  lclock *clk = clock_virtual_new(0);
  replay_broker *rb = replay_new(clk);
  broker *b = replay_base(rb);
  replay_alias(rb, SCRIPT_INFLIGHT, "<inflight>");
  struct probe probe = {.grant = false};
  replay_respond(rb, respond, &probe);
  bk_conn *c = bk_conn_open(b, "cmd", NULL, NULL);
  clock_virtual_settle(clk);
  struct handler_spec spec = {
      .name = "h", .stream = "s", .group = "g", .consumer = "c", .workers = 1, .max_in_flight = 5};
  inflight *f = inflight_new(b, c, clk, &spec, "s", -1, start, answered, &probe);
  ASSERT_NOT_NULL(f);
  inflight_admit(f, one("1-0"));
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), 1);
  ASSERT_INT_EQ(probe.started, 0);
  char w[600];
  clock_virtual_advance(clk, INFLIGHT_POLL_MS - 1);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), 1);
  clock_virtual_advance(clk, 1);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), 2); /* asked again, keeping its place */
  word(rb, 1, 8, w, sizeof w);
  ASSERT_STR_EQ(w, "1|w");

  /* A call out, its answer lost, and the reader stops: the member that may
   * be held goes back, and its place in the queue is dropped. */
  clock_virtual_advance(clk, INFLIGHT_POLL_MS - 1);
  replay_hold(rb);
  clock_virtual_advance(clk, 1);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), 3);
  replay_drop(rb, "gone");
  replay_release(rb);
  clock_virtual_settle(clk);
  replay_restore(rb);
  clock_virtual_settle(clk);
  inflight_stop(f);
  struct entry *left = inflight_take_waiting(f);
  ASSERT_NOT_NULL(left);
  ASSERT_NULL(left->next);
  entry_free(left);
  ASSERT(inflight_pending(f) > 0);
  clock_virtual_advance(clk, INFLIGHT_POLL_MS);
  ASSERT_INT_EQ(replay_nsent(rb, "cmd"), 4);
  word(rb, 3, 10, w, sizeof w);
  ASSERT_STR_EQ(w, "1"); /* released */
  word(rb, 3, 12, w, sizeof w);
  ASSERT_STR_EQ(w, "0"); /* nothing wanted */
  ASSERT_INT_EQ(inflight_pending(f), 0);

  inflight_free(f);
  bk_conn_close(b, c);
  broker_free(b);
  clk->ops->free(clk);
  LEAK_CHECK();
}
