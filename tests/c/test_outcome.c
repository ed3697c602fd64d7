/* Tests for outcome.c: the builders of the commands behind each outcome,
 * checked argv by argv without a broker. Every test frees its txn and ends
 * with a leak check, so a string a builder made and did not hand to the txn
 * shows up as a leak. Then policy.c: what a finished delivery comes to, on
 * literal inputs. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "entry.h"
#include "outcome.h"
#include "policy.h"
#include "runtime.h"
#include "wire.h"
#include "fixtures.h"
#include "task.h"

/* ---- fixtures ---- */

static struct handler_spec spec(void) {
  return (struct handler_spec){
      .path = (char *)"/srv/handlers/post_payment.lua",
      .name = (char *)"post_payment",
      .stream = (char *)"payments",
      .group = (char *)"ledger",
      .consumer = (char *)"c-1",
      .start = (char *)"new",
      .read = READ_CLAIMING,
      .min_idle_ms = 30000,
      .batch = 10,
      .workers = 1,
      .max_body = 1048576,
      .max_deliveries = 3,
      .dead_letter = (char *)"payments.dead",
  };
}

/* Command i of t as its words joined by single spaces; bytes outside
 * printable ASCII as \xNN. One of 8 rotating buffers. */
static const char *cmd(const struct txn *t, int i) {
  static char bufs[8][4096];
  static int next;
  ASSERT(i >= 0 && i < t->n);
  char *out = bufs[next++ % 8], *o = out, *end = out + sizeof bufs[0];
  const struct bk_args *a = &t->cmd[i];
  for (int w = 0; w < a->argc; w++) {
    if (w) *o++ = ' ';
    for (size_t k = 0; k < a->argvlen[w]; k++) {
      unsigned char c = (unsigned char)a->argv[w][k];
      ASSERT(end - o > 8);
      if (c >= 0x20 && c < 0x7f)
        *o++ = (char)c;
      else
        o += snprintf(o, (size_t)(end - o), "\\x%02x", c);
    }
  }
  *o = '\0';
  return out;
}

/* ================================================================ ack, writes */

TEST_IMPL(outcome_writes_argv) {
  /* a ctx:write, a publish and a reply, as the runtime hands them over */
  const char *c1[] = {"HINCRBY", "balances", "acct-1", "250"};
  size_t l1[] = {7, 8, 6, 3};
  const char *c2[] = {"XADD", "audit2", "*", "data", "a\0b"}; /* lengths, not NULs, delimit */
  size_t l2[] = {4, 6, 1, 4, 3};
  const char *c3[] = {"XADD", "replies", "*", "data", "{\"ok\":true}", "original-id", "1-0"};
  size_t l3[] = {4, 7, 1, 4, 11, 11, 3};
  struct rt_write w[] = {{4, c1, l1}, {5, c2, l2}, {7, c3, l3}};
  struct rt_result res = {.kind = RT_REPLY, .nwrites = 3, .writes = w};
  struct entry *e = mk_entry("1-0", "data", "{}", NULL);
  struct txn t;
  outcome_txn_init(&t);
  ASSERT_OK(outcome_writes(&t, &res));
  ASSERT_INT_EQ(t.n, 3);
  ASSERT_STR_EQ(cmd(&t, 0), "HINCRBY balances acct-1 250");
  ASSERT_STR_EQ(cmd(&t, 1), "XADD audit2 * data a\\x00b");
  ASSERT_INT_EQ(t.cmd[1].argvlen[4], 3);
  ASSERT_STR_EQ(cmd(&t, 2), "XADD replies * data {\"ok\":true} original-id 1-0");
  /* the strings are the caller's: borrowed, not copied */
  ASSERT(t.cmd[0].argv[2] == c1[2]);
  ASSERT_INT_EQ(t.nowned, 0);
  outcome_txn_free(&t);

  /* no writes: nothing */
  struct rt_result none = {.kind = RT_ACK};
  outcome_txn_init(&t);
  ASSERT_OK(outcome_writes(&t, &none));
  ASSERT_INT_EQ(t.n, 0);
  outcome_txn_free(&t);
  entry_free(e);
  LEAK_CHECK();
}

TEST_IMPL(outcome_writes_too_many) {
  const char *f[] = {"INCR", "n"};
  size_t l[] = {4, 1};
  struct rt_write w[TXN_MAX];
  for (int i = 0; i < TXN_MAX; i++) w[i] = (struct rt_write){2, f, l};
  struct txn t;
  outcome_txn_init(&t);
  /* with room to spare they must fit in one outcome */
  struct rt_result res = {.kind = RT_ACK, .nwrites = TXN_MAX - 1, .writes = w};
  ASSERT_INT_EQ(outcome_writes(&t, &res), -1);
  ASSERT_INT_EQ(t.n, 0); /* nothing added */
  res.nwrites = TXN_MAX - 2;
  ASSERT_OK(outcome_writes(&t, &res));
  ASSERT_INT_EQ(t.n, TXN_MAX - 2);
  outcome_txn_free(&t);
  LEAK_CHECK();
}

/* ================================================================ retry copy */

TEST_IMPL(outcome_retry_copy_headers) {
  struct handler_spec s = spec();
  s.read = READ_NEW;
  char *retry = outcome_retry_key(&s);
  ASSERT_STR_EQ(retry, "payments:retry:ledger");
  /* a first delivery: original-id is its own id; the copy goes to the
   * group's retry stream, never to the shared stream */
  struct entry *e = mk_entry("5-0", "data", "{\"n\":5}", "partition-key", "acct-7", NULL);
  struct txn t;
  outcome_txn_init(&t);
  outcome_retry_copy(&t, retry, e, 1, "5-0");
  ASSERT_INT_EQ(t.n, 1);
  ASSERT_STR_EQ(cmd(&t, 0),
                "XADD payments:retry:ledger * data {\"n\":5} partition-key acct-7 "
                "delivery-count 1 original-id 5-0");
  outcome_txn_free(&t);
  entry_free(e);

  /* luastream's header names are rewritten wherever they were (retry-group
   * dropped): original-id is what the caller says, the other fields keep
   * their order */
  e = mk_entry("9-0", "delivery-count", "2", "data", "{\"n\":5}", "retry-group", "ledger",
               "x-trace", "t1", "original-id", "4-0", "partition-key", "acct-7", NULL);
  outcome_txn_init(&t);
  outcome_retry_copy(&t, retry, e, 3, "5-0");
  ASSERT_STR_EQ(cmd(&t, 0),
                "XADD payments:retry:ledger * data {\"n\":5} x-trace t1 "
                "partition-key acct-7 delivery-count 3 original-id 5-0");
  ASSERT_INT_EQ(t.nowned, 1); /* the count */
  outcome_txn_free(&t);
  entry_free(e);
  free(retry);
  LEAK_CHECK();
}

/* ================================================================ dead letter */

#define PROV(id, n, reason, error)                                                                \
  " dead-letter-stream payments dead-letter-group ledger dead-letter-id " id                      \
  " dead-letter-deliveries " n " dead-letter-handler post_payment.lua dead-letter-reason " reason \
  " dead-letter-error " error " dead-letter-time 1700000000123"

TEST_IMPL(outcome_dead_letter_argv) {
  struct handler_spec s = spec();
  struct entry *e = mk_entry("7-0", "data", "{\"n\":7}", "partition-key", "acct-1", NULL);
  struct txn t;
  outcome_txn_init(&t);
  outcome_dead_letter(&t, &s, e, "7-0", "rejected", "card expired", 12, 2, 1700000000123ULL);
  ASSERT_INT_EQ(t.n, 1);
  ASSERT_STR_EQ(cmd(&t, 0), "XADD payments.dead * data {\"n\":7} partition-key acct-1" PROV(
                                "7-0", "2", "rejected", "card expired"));
  ASSERT_INT_EQ(t.cmd[0].argc, 3 + 4 + 16);
  outcome_txn_free(&t);

  /* error_len counts, not the NUL; no error: an empty value */
  outcome_txn_init(&t);
  outcome_dead_letter(&t, &s, e, "7-0", "handler-error", "boom\nstack traceback", 4, 3,
                      1700000000123ULL);
  ASSERT_STR_EQ(cmd(&t, 0), "XADD payments.dead * data {\"n\":7} partition-key acct-1" PROV(
                                "7-0", "3", "handler-error", "boom"));
  outcome_dead_letter(&t, &s, e, "7-0", "max-deliveries", NULL, 99, 3, 1700000000123ULL);
  ASSERT_INT_EQ(t.cmd[1].argvlen[3 + 4 + 13], 0);
  ASSERT_STR_EQ(cmd(&t, 1), "XADD payments.dead * data {\"n\":7} partition-key acct-1" PROV(
                                "7-0", "3", "max-deliveries", ""));
  outcome_txn_free(&t);

  /* a handler path without a folder names itself */
  s.path = (char *)"local.lua";
  outcome_txn_init(&t);
  outcome_dead_letter(&t, &s, e, "7-0", "rejected", "x", 1, 1, 0);
  ASSERT_CONTAINS(cmd(&t, 0), " dead-letter-handler local.lua ");
  ASSERT_CONTAINS(cmd(&t, 0), " dead-letter-time 0");
  outcome_txn_free(&t);
  entry_free(e);
  LEAK_CHECK();
}

/* A dead letter that was replayed and failed again gets fresh provenance:
 * the old dead-letter-* headers go, wherever they were. */
TEST_IMPL(outcome_dead_letter_replaces_old_provenance) {
  struct handler_spec s = spec();
  struct entry *e = mk_entry(
      "20-0", "dead-letter-stream", "other", "data", "{\"n\":7}", "dead-letter-group", "g0",
      "dead-letter-id", "7-0", "dead-letter-deliveries", "9", "dead-letter-handler", "old.lua",
      "partition-key", "acct-1", "dead-letter-reason", "rejected", "dead-letter-error", "old",
      "dead-letter-time", "1", "original-id", "7-0", "retry-group", "ledger", NULL);
  struct txn t;
  outcome_txn_init(&t);
  /* dead-letter-id is the id on the source stream the caller names */
  outcome_dead_letter(&t, &s, e, "7-0", "max-deliveries", "again", 5, 3, 1700000000123ULL);
  ASSERT_STR_EQ(cmd(&t, 0),
                "XADD payments.dead * data {\"n\":7} partition-key acct-1 "
                "original-id 7-0 retry-group ledger" PROV("7-0", "3", "max-deliveries", "again"));
  outcome_txn_free(&t);
  entry_free(e);
  LEAK_CHECK();
}

/* ================================================================ delay set */

TEST_IMPL(outcome_delay_key_name) {
  struct handler_spec s = spec();
  char *k = outcome_delay_key(&s);
  ASSERT_STR_EQ(k, "payments:delayed:ledger");
  free(k);
  s.stream = (char *)"{orders}.in";
  s.group = (char *)"g";
  k = outcome_delay_key(&s);
  ASSERT_STR_EQ(k, "{orders}.in:delayed:g");
  free(k);
  LEAK_CHECK();
}

TEST_IMPL(outcome_delay_member) {
  struct handler_spec s = spec();
  struct entry *e = mk_entry("5-0", "data", "{\"n\":5}", "partition-key", "acct-7", NULL);
  struct txn t;
  outcome_txn_init(&t);
  outcome_delay(&t, &s, e, 1, "5-0", 1700000002500ULL);
  ASSERT_INT_EQ(t.n, 1);
  ASSERT_INT_EQ(t.cmd[0].argc, 4);
  /* netstrings: the id, the fields, delivery-count, original-id */
  ASSERT_STR_EQ(cmd(&t, 0),
                "ZADD payments:delayed:ledger 1700000002500 "
                "3:5-04:data7:{\"n\":5}13:partition-key6:acct-7"
                "14:delivery-count1:111:original-id3:5-0");
  outcome_txn_free(&t);
  entry_free(e);

  /* luastream's header names rewritten (count, original id) or dropped (group) */
  e = mk_entry("9-0", "data", "{}", "delivery-count", "4", "retry-group", "other", "original-id",
               "4-0", NULL);
  outcome_txn_init(&t);
  outcome_delay(&t, &s, e, 12, "5-0", 1ULL);
  ASSERT_STR_EQ(cmd(&t, 0),
                "ZADD payments:delayed:ledger 1 3:9-04:data2:{}"
                "14:delivery-count2:1211:original-id3:5-0");
  outcome_txn_free(&t);
  entry_free(e);
  LEAK_CHECK();
}

/* Lengths count bytes: colons, digits, NULs and long values inside a value
 * do not confuse the encoding. */
TEST_IMPL(outcome_delay_member_binary) {
  struct handler_spec s = spec();
  char big[1000];
  memset(big, 'x', sizeof big);
  const char *field[] = {"data", "12:a\0b", "big", big};
  size_t len[] = {4, 6, 3, sizeof big};
  struct entry *e = entry_new("1-1", 3, 4, field, len);
  ASSERT_NOT_NULL(e);
  struct txn t;
  outcome_txn_init(&t);
  outcome_delay(&t, &s, e, 1, "1-1", 5);
  const struct bk_args *a = &t.cmd[0];
  char want[1200];
  int n = snprintf(want, sizeof want, "3:1-14:data6:12:a");
  want[n++] = '\0';
  n += snprintf(want + n, sizeof want - (size_t)n, "b3:big1000:");
  memset(want + n, 'x', 1000);
  n += 1000;
  n += snprintf(want + n, sizeof want - (size_t)n, "14:delivery-count1:111:original-id3:1-1");
  ASSERT_INT_EQ(a->argvlen[3], n);
  ASSERT(memcmp(a->argv[3], want, (size_t)n) == 0);
  outcome_txn_free(&t);
  entry_free(e);
  LEAK_CHECK();
}

/* ================================================================ restamp */

TEST_IMPL(outcome_restamp_argv) {
  struct handler_spec s = spec(); /* min_idle 30000 */
  struct entry *e = mk_entry("3-0", "data", "{}", NULL);
  struct txn t;
  outcome_txn_init(&t);
  outcome_restamp(&t, &s, s.stream, e, 5000);
  outcome_restamp(&t, &s, s.stream, e, 30000);
  outcome_restamp(&t, &s, s.stream, e, 0);
  outcome_restamp(&t, &s, s.stream, e, 45000); /* longer than min_idle: at least claimable now */
  ASSERT_INT_EQ(t.n, 4);
  ASSERT_STR_EQ(cmd(&t, 0), "XCLAIM payments ledger c-1 0 3-0 IDLE 25000 JUSTID");
  ASSERT_STR_EQ(cmd(&t, 1), "XCLAIM payments ledger c-1 0 3-0 IDLE 0 JUSTID");
  ASSERT_STR_EQ(cmd(&t, 2), "XCLAIM payments ledger c-1 0 3-0 IDLE 30000 JUSTID");
  ASSERT_STR_EQ(cmd(&t, 3), "XCLAIM payments ledger c-1 0 3-0 IDLE 0 JUSTID");
  outcome_txn_free(&t);
  entry_free(e);
  LEAK_CHECK();
}

/* ================================================================ txn */

/* A full transaction of every builder, freed, then built again in the same
 * txn: nothing left over, nothing leaked. */
TEST_IMPL(outcome_txn_free_reuse) {
  struct handler_spec s = spec();
  struct entry *e =
      mk_entry("4-0", "data", "{\"n\":4}", "delivery-count", "1", "original-id", "2-0", NULL);
  const char *f[] = {"XADD", "audit", "*", "data", "1"};
  size_t l[] = {4, 5, 1, 4, 1};
  struct rt_write w[] = {{5, f, l}};
  struct rt_result res = {.kind = RT_ACK, .nwrites = 1, .writes = w};
  struct txn t;
  outcome_txn_init(&t);
  for (int round = 0; round < 3; round++) {
    ASSERT_OK(outcome_writes(&t, &res));
    outcome_retry_copy(&t, "payments:retry:ledger", e, 2, "2-0");
    outcome_dead_letter(&t, &s, e, "2-0", "rejected", "r", 1, 2, 7);
    outcome_delay(&t, &s, e, 2, "2-0", 9);
    outcome_restamp(&t, &s, s.stream, e, 10);
    ASSERT_INT_EQ(t.n, 5);
    ASSERT_STR_EQ(cmd(&t, 0), "XADD audit * data 1");
    outcome_txn_free(&t);
    ASSERT_INT_EQ(t.n, 0);
    ASSERT_INT_EQ(t.nowned, 0);
  }
  outcome_txn_free(&t); /* twice is harmless */
  entry_free(e);
  LEAK_CHECK();
}

/* ================================================================ policy */

/* A claiming subscription with a cap of 3 and a dead-letter stream, the
 * handler's result `kind`, delivered `before` times before. */
static struct policy_in pin(enum rt_outcome kind, long long before) {
  return (struct policy_in){.kind = kind,
                            .before = before,
                            .read = READ_CLAIMING,
                            .min_idle_ms = 30000,
                            .max_deliveries = 3,
                            .dead_letter = true};
}

TEST_IMPL(policy_deliveries_before_by_mode) {
  /* `new`: a `>` read (-1) takes the carried count; the own pending list's read reports it */
  ASSERT_INT_EQ(policy_deliveries_before(READ_NEW, -1, 2), 2);
  ASSERT_INT_EQ(policy_deliveries_before(READ_NEW, -1, 0), 0);
  ASSERT_INT_EQ(policy_deliveries_before(READ_NEW, 4, 2), 4);
  /* claiming reports those before; reclaim counts this one */
  ASSERT_INT_EQ(policy_deliveries_before(READ_CLAIMING, 2, 9), 2);
  ASSERT_INT_EQ(policy_deliveries_before(READ_RECLAIM, 3, 9), 2);
}

TEST_IMPL(policy_ack_and_writes) {
  struct policy_out o;
  struct policy_in in = pin(RT_ACK, 0);
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_ACK);
  ASSERT_INT_EQ(o.note, POLICY_NOTE_NONE);
  ASSERT(!o.handler_failed);
  in.kind = RT_REPLY;
  in.nwrites = 1;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_WRITE);
  /* the writes and the ack must fit in one transaction, with room to spare */
  in.nwrites = TXN_MAX - 2;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_WRITE);
  in.nwrites = TXN_MAX - 1;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_LEAVE);
  ASSERT_INT_EQ(o.note, POLICY_NOTE_TOO_MANY_WRITES);
}

TEST_IMPL(policy_retry_by_mode) {
  struct policy_out o;
  struct policy_in in = pin(RT_RETRY, 0);
  in.read = READ_NEW;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_RETRY_COPY);
  ASSERT_INT_EQ(o.note, POLICY_NOTE_RETRIED);
  ASSERT_INT_EQ(o.deliveries, 1); /* this delivery counts */
  /* claiming and reclaim: nothing written, it is claimed again */
  in.read = READ_CLAIMING;
  in.before = 1;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_LEAVE);
  ASSERT_INT_EQ(o.note, POLICY_NOTE_RETRIED);
  ASSERT_INT_EQ(o.deliveries, 2);
  in.read = READ_RECLAIM;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_LEAVE);
}

TEST_IMPL(policy_retry_after) {
  struct policy_out o;
  struct policy_in in = pin(RT_RETRY_AFTER, 0);
  /* claimed and within min_idle: stays pending, re-stamped */
  in.delay_ms = 30000;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_RESTAMP);
  ASSERT_INT_EQ(o.delay_ms, 30000);
  ASSERT_INT_EQ(o.note, POLICY_NOTE_RETRIED);
  /* longer than min_idle: the delay set */
  in.delay_ms = 30001;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_DELAY);
  ASSERT_INT_EQ(o.delay_ms, 30001);
  /* `new` always goes through the delay set */
  in.read = READ_NEW;
  in.min_idle_ms = -1;
  in.delay_ms = 5;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_DELAY);
  ASSERT_INT_EQ(o.deliveries, 1);
}

TEST_IMPL(policy_retry_at_the_cap) {
  struct policy_out o;
  struct policy_in in = pin(RT_RETRY, 2); /* this is delivery 3 of 3 */
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_DEAD_LETTER);
  ASSERT_INT_EQ(o.note, POLICY_NOTE_DEAD_LETTERED);
  ASSERT_STR_EQ(o.reason, REASON_MAX_DELIVERIES);
  ASSERT_STR_EQ(o.why, "retried on delivery 3 of 3");
  ASSERT_INT_EQ(o.deliveries, 3);
  in.kind = RT_RETRY_AFTER;
  in.delay_ms = 10;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_DEAD_LETTER);
  /* no dead-letter stream: logged and left pending */
  in.dead_letter = false;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_LEAVE);
  ASSERT_INT_EQ(o.note, POLICY_NOTE_LIMIT_LEFT);
  /* no cap: retried forever */
  in.max_deliveries = 0;
  in.before = 100;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_RESTAMP);
  ASSERT_INT_EQ(o.deliveries, 101);
}

TEST_IMPL(policy_reject) {
  struct policy_out o;
  struct policy_in in = pin(RT_REJECT, 0);
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_DEAD_LETTER);
  ASSERT_STR_EQ(o.reason, REASON_REJECTED);
  ASSERT_STR_EQ(o.why, ""); /* the handler's own reason is the error */
  ASSERT_INT_EQ(o.deliveries, 1);
  /* no dead-letter stream: acked, not left to come back */
  in.dead_letter = false;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_ACK);
  ASSERT_INT_EQ(o.note, POLICY_NOTE_REJECTED_ACKED);
}

TEST_IMPL(policy_handler_error) {
  struct policy_out o;
  struct policy_in in = pin(RT_ERROR, 0);
  in.reason = REASON_HANDLER_ERROR;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_LEAVE);
  ASSERT(o.handler_failed);
  ASSERT_INT_EQ(o.note, POLICY_NOTE_NONE);
  /* the last delivery the cap allows failed: dead-lettered with its error */
  in.before = 2;
  policy_decide(&in, &o);
  ASSERT(o.handler_failed);
  ASSERT_INT_EQ(o.action, POLICY_DEAD_LETTER);
  ASSERT_STR_EQ(o.reason, REASON_HANDLER_ERROR);
  ASSERT_STR_EQ(o.why, "");
  ASSERT_INT_EQ(o.deliveries, 3);
  in.dead_letter = false;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_LEAVE);
  ASSERT_INT_EQ(o.note, POLICY_NOTE_LIMIT_LEFT);
}

TEST_IMPL(policy_bad_input) {
  struct policy_out o;
  struct policy_in in = pin(RT_INVALID, 1);
  in.reason = REASON_INPUT_DECODE;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_DEAD_LETTER);
  ASSERT_STR_EQ(o.reason, REASON_INPUT_DECODE);
  ASSERT_INT_EQ(o.deliveries, 2);
  ASSERT(!o.handler_failed);
  in.dead_letter = false;
  policy_decide(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_LEAVE);
  ASSERT_INT_EQ(o.note, POLICY_NOTE_BAD_INPUT_LEFT);
}

TEST_IMPL(policy_admit_at_the_cap) {
  struct policy_out o;
  struct policy_in in = pin(RT_ACK, 2);
  policy_admit(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_RUN);
  ASSERT_INT_EQ(o.note, POLICY_NOTE_NONE);
  /* delivered 3 times without an ack: not run again */
  in.before = 3;
  policy_admit(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_DEAD_LETTER);
  ASSERT_STR_EQ(o.reason, REASON_MAX_DELIVERIES);
  ASSERT_STR_EQ(o.why, "delivered 3 times without an ack");
  ASSERT_INT_EQ(o.deliveries, 3);
  in.dead_letter = false;
  policy_admit(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_LEAVE);
  ASSERT_INT_EQ(o.note, POLICY_NOTE_LIMIT_LEFT);
  /* no cap */
  in.max_deliveries = 0;
  in.before = 50;
  policy_admit(&in, &o);
  ASSERT_INT_EQ(o.action, POLICY_RUN);
}
