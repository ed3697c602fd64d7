/* Tests for read_plan: which read comes next in each read mode and state, the
 * state a good reply leaves (cursors, the claiming block, the end of the own
 * pending read), the waits, and the commands built, on literal inputs. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "broker.h"
#include "read_plan.h"
#include "scripts.h"
#include "task.h"

static struct handler_spec spec_of(enum read_mode mode, int64_t min_idle_ms) {
  struct handler_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.stream = "orders";
  spec.group = "billing";
  spec.consumer = "c1";
  spec.read = mode;
  spec.min_idle_ms = min_idle_ms;
  spec.batch = 10;
  return spec;
}

/* The command of a read of kind, its words joined by spaces; a script's text
 * shows as <own>, <claim> or <reclaim>. */
static const char *command(const struct read_plan *p, enum read_kind kind, long long count) {
  static char out[1024];
  struct bk_args a;
  bk_args_init(&a);
  plan_add_args(p, &a, kind, count);
  out[0] = '\0';
  for (int i = 0; i < a.argc; i++) {
    const char *w = a.argv[i] == SCRIPT_OWN       ? "<own>"
                    : a.argv[i] == SCRIPT_READ    ? "<read>"
                    : a.argv[i] == SCRIPT_CLAIM   ? "<claim>"
                    : a.argv[i] == SCRIPT_RECLAIM ? "<reclaim>"
                                                  : a.argv[i];
    ASSERT_INT_EQ(strlen(a.argv[i]), a.argvlen[i]);
    if (i) strcat(out, " ");
    strcat(out, w);
  }
  bk_args_free(&a);
  return out;
}

static void set_cursor(char cursor[PLAN_NKEYS][PLAN_ID_MAX], const char *stream,
                       const char *retry) {
  snprintf(cursor[PLAN_KEY_STREAM], PLAN_ID_MAX, "%s", stream);
  snprintf(cursor[PLAN_KEY_RETRY], PLAN_ID_MAX, "%s", retry);
}

TEST_IMPL(read_plan_new_reads_ahead_on_gt) {
  struct handler_spec spec = spec_of(READ_NEW, -1);
  spec.max_body = 1000;
  struct read_plan p;
  plan_init(&p, &spec, "orders:retry:billing");
  /* Steady state: a plain blocking XREADGROUP of `>`, no script. */
  ASSERT_INT_EQ(plan_next(&p), READ_PLAIN);
  ASSERT(plan_reads_ahead(&p, READ_PLAIN));
  ASSERT(!plan_reads_new_only(&p, READ_PLAIN));
  ASSERT(!plan_is_script(READ_PLAIN));
  ASSERT_INT_EQ(plan_read_wait_ms(&p), PLAN_BLOCK_MS);
  ASSERT_STR_EQ(command(&p, READ_PLAIN, 7),
                "XREADGROUP GROUP billing c1 COUNT 7 BLOCK 4000 STREAMS orders "
                "orders:retry:billing > >");
  /* Its reply may hold no string over an entry's limit (1000 + 64 KB), and
   * in all 2 keys x 7 entries of twice that. */
  size_t bulk, total;
  plan_reply_limits(&p, READ_PLAIN, 7, &bulk, &total);
  ASSERT_INT_EQ(bulk, 1000 + 65536);
  ASSERT_INT_EQ(total, 2 * 7 * 2 * (1000 + 65536));
  /* A reply to `>` changes nothing, nor does a timeout. */
  char cursor[PLAN_NKEYS][PLAN_ID_MAX];
  set_cursor(cursor, "junk", "junk");
  ASSERT(!plan_read_done(&p, READ_PLAIN, 3, cursor));
  plan_cut_seen(&p, READ_PLAIN, 0);
  ASSERT_INT_EQ(plan_next(&p), READ_PLAIN);
  ASSERT(!plan_read_done(&p, READ_PLAIN, 0, cursor));
  ASSERT_INT_EQ(plan_next(&p), READ_PLAIN);
}

/* A plain read refused as too large: the own pending list with the script
 * that cuts, then `>` with SCRIPT_READ until a read brings no cut entry,
 * then plain reads again. */
TEST_IMPL(read_plan_new_too_large_reads_cut_until_none) {
  struct handler_spec spec = spec_of(READ_NEW, -1);
  spec.max_body = 1000;
  struct read_plan p;
  plan_init(&p, &spec, "orders:retry:billing");
  plan_too_large(&p);
  ASSERT_INT_EQ(plan_next(&p), READ_OWN);
  char cursor[PLAN_NKEYS][PLAN_ID_MAX];
  set_cursor(cursor, "7-0", "0-0");
  ASSERT(!plan_read_done(&p, READ_OWN, 3, cursor));
  plan_cut_seen(&p, READ_OWN, 0); /* the own read does not end the detour */
  ASSERT_INT_EQ(plan_next(&p), READ_OWN);
  ASSERT(!plan_read_done(&p, READ_OWN, 0, cursor));
  ASSERT_INT_EQ(plan_next(&p), READ_FRESH);
  ASSERT(plan_reads_ahead(&p, READ_FRESH));
  ASSERT(plan_is_script(READ_FRESH));
  ASSERT(!plan_replies_claimed(READ_FRESH));
  ASSERT_STR_EQ(command(&p, READ_FRESH, 7),
                "EVAL <read> 2 orders orders:retry:billing billing c1 7 1000 66536 1024 64");
  /* A script's reply is bounded per string only: it cuts what is over. */
  size_t bulk, total;
  plan_reply_limits(&p, READ_FRESH, 7, &bulk, &total);
  ASSERT_INT_EQ(bulk, 1000 + 65536);
  ASSERT_INT_EQ(total, 0);
  /* Another entry over max_body, cut: read on with the script. */
  ASSERT(!plan_read_done(&p, READ_FRESH, 4, cursor));
  plan_cut_seen(&p, READ_FRESH, 1);
  ASSERT_INT_EQ(plan_next(&p), READ_FRESH);
  /* None cut (or nothing at all): plain reads again. */
  ASSERT(!plan_read_done(&p, READ_FRESH, 4, cursor));
  plan_cut_seen(&p, READ_FRESH, 0);
  ASSERT_INT_EQ(plan_next(&p), READ_PLAIN);
}

/* On 8.4 a claiming read is XREADGROUP ... CLAIM, plain: refused as too
 * large, the claim script (which cuts) reads from then on: the refused read
 * claimed its entries, and a native read would claim them whole again. */
TEST_IMPL(read_plan_native_claim_too_large_uses_script) {
  struct handler_spec spec = spec_of(READ_CLAIMING, 60000);
  struct read_plan p;
  plan_init(&p, &spec, "r");
  plan_set_native_claim(&p, true);
  ASSERT_INT_EQ(plan_next(&p), READ_CLAIM_NATIVE);
  plan_too_large(&p);
  ASSERT(!p.recover);
  ASSERT_INT_EQ(plan_next(&p), READ_CLAIM_SCRIPT);
  plan_cut_seen(&p, READ_CLAIM_SCRIPT, 2);
  ASSERT_INT_EQ(plan_next(&p), READ_CLAIM_SCRIPT);
  plan_cut_seen(&p, READ_CLAIM_SCRIPT, 0);
  ASSERT_INT_EQ(plan_next(&p), READ_CLAIM_SCRIPT);
  plan_set_native_claim(&p, true); /* a reconnect to the same server */
  ASSERT_INT_EQ(plan_next(&p), READ_CLAIM_SCRIPT);
}

TEST_IMPL(read_plan_new_own_pending_until_cursors_stay) {
  struct handler_spec spec = spec_of(READ_NEW, -1);
  struct read_plan p;
  plan_init(&p, &spec, "orders:retry:billing");
  plan_recover_own(&p);
  ASSERT_INT_EQ(plan_next(&p), READ_OWN);
  ASSERT(plan_is_script(READ_OWN));
  ASSERT(!plan_reads_ahead(&p, READ_OWN));
  ASSERT_STR_EQ(command(&p, READ_OWN, 10),
                "EVAL <own> 2 orders orders:retry:billing billing c1 10 0-0 0-0 0 65536 1024 64");
  /* The history read moved on: read again from where it stopped. */
  char cursor[PLAN_NKEYS][PLAN_ID_MAX];
  set_cursor(cursor, "5-1", "0-0");
  ASSERT(!plan_read_done(&p, READ_OWN, 2, cursor));
  ASSERT_INT_EQ(plan_next(&p), READ_OWN);
  ASSERT_STR_EQ(command(&p, READ_OWN, 10),
                "EVAL <own> 2 orders orders:retry:billing billing c1 10 5-1 0-0 0 65536 1024 64");
  set_cursor(cursor, "5-1", "9-0");
  ASSERT(!plan_read_done(&p, READ_OWN, 1, cursor));
  ASSERT_INT_EQ(plan_next(&p), READ_OWN);
  /* Both cursors where they were: the own pending list is read, on to `>`. */
  ASSERT(!plan_read_done(&p, READ_OWN, 0, cursor));
  ASSERT_INT_EQ(plan_next(&p), READ_PLAIN);
  /* Recovering again (the reader reconnected) starts over from 0-0. */
  plan_recover_own(&p);
  ASSERT_INT_EQ(plan_next(&p), READ_OWN);
  ASSERT_STR_EQ(command(&p, READ_OWN, 4),
                "EVAL <own> 2 orders orders:retry:billing billing c1 4 0-0 0-0 0 65536 1024 64");
}

TEST_IMPL(read_plan_recover_own_only_on_new) {
  struct handler_spec spec = spec_of(READ_CLAIMING, 60000);
  struct read_plan p;
  plan_init(&p, &spec, "r");
  plan_recover_own(&p);
  ASSERT(!p.recover);
  ASSERT_INT_EQ(plan_next(&p), READ_CLAIM_SCRIPT);
  spec.read = READ_RECLAIM;
  plan_recover_own(&p);
  ASSERT_INT_EQ(plan_next(&p), READ_RECLAIM_SCRIPT);
}

TEST_IMPL(read_plan_claiming_native) {
  struct handler_spec spec = spec_of(READ_CLAIMING, 60000);
  struct read_plan p;
  plan_init(&p, &spec, "orders:retry:billing");
  plan_set_native_claim(&p, true);
  ASSERT_INT_EQ(plan_next(&p), READ_CLAIM_NATIVE);
  ASSERT(!plan_is_script(READ_CLAIM_NATIVE));
  ASSERT(!plan_reads_ahead(&p, READ_CLAIM_NATIVE));
  ASSERT(!plan_reads_new_only(&p, READ_CLAIM_NATIVE));
  /* Blocks for the recovery wait, capped at a second. */
  ASSERT_STR_EQ(command(&p, READ_CLAIM_NATIVE, 5),
                "XREADGROUP GROUP billing c1 COUNT 5 BLOCK 1000 CLAIM 60000 STREAMS orders "
                "orders:retry:billing > >");
  char cursor[PLAN_NKEYS][PLAN_ID_MAX];
  set_cursor(cursor, "0-0", "0-0");
  ASSERT(!plan_read_done(&p, READ_CLAIM_NATIVE, 0, cursor));
  ASSERT_INT_EQ(plan_next(&p), READ_CLAIM_NATIVE); /* never the blocking `>` */
}

TEST_IMPL(read_plan_claiming_script_blocks_after_nothing) {
  struct handler_spec spec = spec_of(READ_CLAIMING, 400);
  struct read_plan p;
  plan_init(&p, &spec, "orders:retry:billing");
  ASSERT_INT_EQ(plan_next(&p), READ_CLAIM_SCRIPT);
  ASSERT(plan_is_script(READ_CLAIM_SCRIPT));
  /* No cursors: the claim script scans from the start each time. */
  ASSERT_STR_EQ(command(&p, READ_CLAIM_SCRIPT, 10),
                "EVAL <claim> 2 orders orders:retry:billing billing c1 400 10 0 65536 1024 64");
  char cursor[PLAN_NKEYS][PLAN_ID_MAX];
  set_cursor(cursor, "0-0", "0-0");
  ASSERT(!plan_read_done(&p, READ_CLAIM_SCRIPT, 2, cursor));
  ASSERT_INT_EQ(plan_next(&p), READ_CLAIM_SCRIPT); /* found some: claim again */
  ASSERT(!plan_read_done(&p, READ_CLAIM_SCRIPT, 0, cursor));
  ASSERT_INT_EQ(plan_next(&p), READ_PLAIN); /* found none: block on `>` */
  ASSERT(plan_reads_new_only(&p, READ_PLAIN));
  ASSERT(!plan_reads_ahead(&p, READ_PLAIN));
  /* Half of min_idle. */
  ASSERT_INT_EQ(plan_read_wait_ms(&p), 200);
  ASSERT_STR_EQ(command(&p, READ_PLAIN, 10),
                "XREADGROUP GROUP billing c1 COUNT 10 BLOCK 200 STREAMS orders "
                "orders:retry:billing > >");
  ASSERT(!plan_read_done(&p, READ_PLAIN, 0, cursor));
  ASSERT_INT_EQ(plan_next(&p), READ_CLAIM_SCRIPT); /* then claims first again */
  /* A group made again claims first too. */
  ASSERT(!plan_read_done(&p, READ_CLAIM_SCRIPT, 0, cursor));
  ASSERT_INT_EQ(plan_next(&p), READ_PLAIN);
  plan_group_new(&p);
  ASSERT_INT_EQ(plan_next(&p), READ_CLAIM_SCRIPT);
}

TEST_IMPL(read_plan_reclaim_cursors_and_poll) {
  struct handler_spec spec = spec_of(READ_RECLAIM, 30);
  struct read_plan p;
  plan_init(&p, &spec, "orders:retry:billing");
  ASSERT_INT_EQ(plan_next(&p), READ_RECLAIM_SCRIPT);
  ASSERT(!plan_reads_ahead(&p, READ_RECLAIM_SCRIPT));
  ASSERT_INT_EQ(plan_recovery_wait_ms(&p), PLAN_RECOVERY_WAIT_MIN_MS); /* 15 raised to 50 */
  ASSERT_STR_EQ(
      command(&p, READ_RECLAIM_SCRIPT, 10),
      "EVAL <reclaim> 2 orders orders:retry:billing billing c1 30 10 0-0 0-0 0 65536 1024 64");
  char cursor[PLAN_NKEYS][PLAN_ID_MAX];
  /* The pass goes on where each key's XAUTOCLAIM stopped. */
  set_cursor(cursor, "12-3", "0-0");
  ASSERT(!plan_read_done(&p, READ_RECLAIM_SCRIPT, 0, cursor)); /* not a full pass */
  ASSERT_STR_EQ(
      command(&p, READ_RECLAIM_SCRIPT, 8),
      "EVAL <reclaim> 2 orders orders:retry:billing billing c1 30 8 12-3 0-0 0 65536 1024 64");
  set_cursor(cursor, "0-0", "0-0");
  ASSERT(!plan_read_done(&p, READ_RECLAIM_SCRIPT, 1, cursor)); /* found one: read again */
  ASSERT(plan_read_done(&p, READ_RECLAIM_SCRIPT, 0, cursor));  /* full pass, nothing: wait */
  /* A group made again scans from the start. */
  set_cursor(cursor, "40-0", "41-0");
  ASSERT(!plan_read_done(&p, READ_RECLAIM_SCRIPT, 0, cursor));
  ASSERT_STR_EQ(p.cursor[PLAN_KEY_RETRY], "41-0");
  plan_group_new(&p);
  ASSERT_STR_EQ(
      command(&p, READ_RECLAIM_SCRIPT, 10),
      "EVAL <reclaim> 2 orders orders:retry:billing billing c1 30 10 0-0 0-0 0 65536 1024 64");
}

TEST_IMPL(read_plan_recovery_wait_bounds) {
  struct handler_spec spec = spec_of(READ_CLAIMING, 600);
  struct read_plan p;
  plan_init(&p, &spec, "r");
  ASSERT_INT_EQ(plan_recovery_wait_ms(&p), 300);
  spec.min_idle_ms = 10 * 1000;
  ASSERT_INT_EQ(plan_recovery_wait_ms(&p), PLAN_RECOVERY_WAIT_MAX_MS);
  /* cppcheck-suppress redundantAssignment ; false positive: p holds &spec, plan_recovery_wait_ms read the value before */
  spec.min_idle_ms = 0;
  ASSERT_INT_EQ(plan_recovery_wait_ms(&p), PLAN_RECOVERY_WAIT_MIN_MS);
  /* A swapped spec decides from then on. */
  struct handler_spec other = spec_of(READ_NEW, 600);
  plan_set_spec(&p, &other);
  ASSERT_INT_EQ(plan_read_wait_ms(&p), PLAN_BLOCK_MS);
  ASSERT_INT_EQ(plan_next(&p), READ_PLAIN);
}
