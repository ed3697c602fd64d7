/* Conformance of the in-memory broker (broker_memory.c and the cmd_*.c
 * files behind it) with Redis.
 *
 * 7.0: every scenario runs on a private redis-server 7.0.15 (one per test
 * process, FLUSHALL between scenarios) and on a fresh memory broker
 * configured as "7.0.15"; the two normalised transcripts (conformance.h:
 * generated ids named <idN>, idle times bucketed to whole seconds) must be
 * equal line by line. Idle times are set with XCLAIM ... IDLE / TIME rather
 * than waited for, so nothing sleeps except the short BLOCK timeouts.
 *
 * 8.4: no 8.4 server runs here, so the memory broker configured as "8.4.0"
 * is checked against literal transcripts written from
 * the documented 8.4 semantics (exact idle times on the virtual clock); each
 * test names the section it checks. Where 7.0 differs, the 7.0 side of the
 * difference is in a live scenario and the test says which.
 *
 * Deliberately not compared, because the memory broker does not model them
 * and the host never reads them: XINFO STREAM's radix-tree-nodes once a
 * stream has more than one node (rendered <approx>), XINFO STREAM FULL.
 * Random command sequences are compared in test_differential.c.
 *
 * CF_DUMP=1 prints every transcript. */
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "redis_server.h"
#include "scripts.h"
#include "task.h"

#define END \
  { .op = CF_END }
#define C(...) CF_C(0, __VA_ARGS__)
#define S1(...) CF_S(1, __VA_ARGS__)
#define S2(...) CF_S(2, __VA_ARGS__)
#define W1 CF_W(1)
#define W2 CF_W(2)
#define B1 CF_B(1)
#define B2 CF_B(2)
#define ADV(ms) CF_A(ms)

static struct redis_server srv;

/* The scenario on redis-server 7.0.15 and on the memory broker as 7.0.15. */
static void conform(const char *name, const struct cf_step *steps) {
  if (srv.pid == 0) ASSERT_OK(redis_server_start(&srv, NULL));
  struct cf_side *real = cf_redis(srv.url), *mem = cf_memory("7.0.15");
  char *a = cf_transcript(real, steps, false);
  char *b = cf_transcript(mem, steps, false);
  cf_expect_same(name, cf_side_name(real), a, cf_side_name(mem), b);
  free(a);
  free(b);
  cf_side_free(real);
  cf_side_free(mem);
}

#define CONFORM(steps) conform(#steps, steps)

/* The memory broker as 8.4.0 against the transcript the spec implies. */
static void expect84(const char *name, const struct cf_step *steps, const char *const *want) {
  struct cf_side *mem = cf_memory("8.4.0");
  char *got = cf_transcript(mem, steps, true);
  cf_expect_lines(name, cf_side_name(mem), got, want);
  free(got);
  cf_side_free(mem);
}

#define EXPECT84(steps, ...) expect84(#steps, steps, (const char *const[]){__VA_ARGS__, NULL})

/* ==== 7.0.15: memory broker vs redis-server ==== */

/* INFO, FLUSHALL, unknown commands and arity errors. */
static const struct cf_step server_basics[] = {
    C("INFO", "server"),
    C("PING"),
    C("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
    C("XADD", "s", "1-0", "f", "v"),
    C("FLUSHALL"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
    C("XPENDING", "s", "g"),
    C("XACK", "s", "g", "1-0"),
    C("XLEN", "s"),
    C("EXISTS", "s"),
    C("XINFO", "GROUPS", "s"),
    C("XDELEX", "s", "IDS", "1", "1-0"),
    C("XLEN"),
    C("XACK", "s", "g"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s"),
    END};

TEST_IMPL(conformance_7_0_server_basics) { CONFORM(server_basics); }

/* XGROUP: CREATE ($, 0, MKSTREAM, BUSYGROUP, missing key), SETID, DESTROY,
 * CREATECONSUMER, DELCONSUMER, and their errors. */
static const struct cf_step xgroup[] = {
    C("XGROUP", "CREATE", "s", "g", "$"),
    C("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
    C("XGROUP", "CREATE", "s", "g", "$"),
    C("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"),
    C("XADD", "s", "1-0", "f", "1"),
    C("XADD", "s", "2-0", "f", "2"),
    C("XGROUP", "CREATE", "s", "from0", "0"),
    C("XGROUP", "CREATE", "s", "fromtop", "$"),
    C("XGROUP", "CREATE", "s", "bad", "-"),
    C("XGROUP", "CREATE", "s", "bad", "x"),
    C("XGROUP", "CREATE", "s", "er", "0", "ENTRIESREAD", "1"),
    C("XGROUP", "CREATE", "s", "er2", "0", "ENTRIESREAD", "-2"),
    C("XGROUP", "CREATE", "s", "bad", "0", "FOO"),
    C("XGROUP", "CREATE", "s"),
    C("XGROUP", "FOO", "s"),
    C("XINFO", "GROUPS", "s"),
    C("XREADGROUP", "GROUP", "fromtop", "c", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "from0", "c", "COUNT", "1", "STREAMS", "s", ">"),
    C("XGROUP", "SETID", "from0", "g", "0"),
    C("XGROUP", "SETID", "s", "nog", "0"),
    C("XGROUP", "SETID", "s", "from0", "0"),
    C("XREADGROUP", "GROUP", "from0", "c", "STREAMS", "s", ">"),
    C("XPENDING", "s", "from0", "-", "+", "10"),
    C("XGROUP", "SETID", "s", "fromtop", "-"),
    C("XGROUP", "SETID", "s", "fromtop", "$"),
    C("XGROUP", "SETID", "s", "fromtop", "1-0", "ENTRIESREAD", "1"),
    C("XGROUP", "SETID", "s", "fromtop", "1-0", "FOO"),
    C("XINFO", "GROUPS", "s"),
    C("XGROUP", "CREATECONSUMER", "s", "g", "alice"),
    C("XGROUP", "CREATECONSUMER", "s", "g", "alice"),
    C("XGROUP", "CREATECONSUMER", "s", "nog", "alice"),
    C("XGROUP", "CREATECONSUMER", "nokey", "g", "alice"),
    C("XGROUP", "CREATECONSUMER", "s", "g"),
    C("XINFO", "CONSUMERS", "s", "g"),
    C("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"),
    C("XGROUP", "DELCONSUMER", "s", "g", "bob"),
    C("XPENDING", "s", "g"),
    C("XGROUP", "DELCONSUMER", "s", "g", "nobody"),
    C("XGROUP", "DELCONSUMER", "s", "nog", "x"),
    C("XGROUP", "DELCONSUMER", "nokey", "g", "x"),
    C("XINFO", "CONSUMERS", "s", "g"),
    C("XGROUP", "DESTROY", "s", "g"),
    C("XGROUP", "DESTROY", "s", "g"),
    C("XGROUP", "DESTROY", "nokey", "g"),
    C("XINFO", "GROUPS", "s"),
    C("XINFO", "CONSUMERS", "s", "g"),
    C("XINFO", "CONSUMERS", "nokey", "g"),
    C("XINFO", "GROUPS", "nokey"),
    END};

TEST_IMPL(conformance_7_0_xgroup) { CONFORM(xgroup); }

/* XADD (generated and explicit ids, errors, NOMKSTREAM, MAXLEN), XLEN,
 * XRANGE, XDEL, XTRIM, XINFO STREAM. */
static const struct cf_step xadd[] = {
    C("XADD", "s", "*", "f", "v"),
    C("XADD", "s", "*", "f", "w", "g", "x"),
    C("XRANGE", "s", "-", "+"),
    C("XADD", "s", "1-0", "f", "v"),
    C("XADD", "s", "<id2>", "f", "v"),
    C("XADD", "t", "0-0", "f", "v"),
    C("EXISTS", "t"),
    C("XADD", "t", "0-*", "f", "v"),
    C("XADD", "t", "5", "f", "v"),
    C("XADD", "t", "5-*", "f", "v"),
    C("XADD", "t", "5-1", "f", "v"),
    C("XADD", "t", "6-3", "f", "v", "f", "dup"),
    C("XRANGE", "t", "-", "+"),
    C("XRANGE", "t", "5", "5"),
    C("XRANGE", "t", "(5-0", "+", "COUNT", "1"),
    C("XRANGE", "t", "-", "+", "COUNT", "0"),
    C("XRANGE", "t", "(-", "+"),
    C("XRANGE", "t", "-", "+", "LIMIT"),
    C("XREVRANGE", "t", "+", "-", "COUNT", "2"),
    C("XRANGE", "nokey", "-", "+"),
    C("XADD", "u", "NOMKSTREAM", "*", "f", "v"),
    C("EXISTS", "u"),
    C("XADD", "s", "*", "f"),
    C("XADD", "s", "*"),
    C("XADD", "s", "x", "f", "v"),
    C("XADD", "s", "KEEPREF", "*", "f", "v"),
    C("XADD", "s", "NOMKSTREAM", "MAXLEN", "=", "2", "*", "f", "last"),
    C("XLEN", "s"),
    C("XRANGE", "s", "-", "+"),
    C("XADD", "s", "MAXLEN", "2", "LIMIT", "5", "*", "f", "v"),
    C("XADD", "s", "MAXLEN", "-1", "*", "f", "v"),
    C("XADD", "s", "MAXLEN", "1", "MINID", "1", "*", "f", "v"),
    C("XADD", "s", "MAXLEN", "~", "1", "*", "f", "approx"),
    C("XLEN", "s"),
    C("XADD", "m", "MAXLEN", "0", "1-0", "f", "v"),
    C("XLEN", "m"),
    C("EXISTS", "m"),
    C("XADD", "m", "1-0", "f", "v"),
    C("XLEN", "nokey"),
    C("XDEL", "t", "5-0", "9-0"),
    C("XDEL", "t", "5-0"),
    C("XDEL", "nokey", "1-0"),
    C("XDEL", "t", "5-1", "bad"),
    C("XLEN", "t"),
    C("XINFO", "STREAM", "t"),
    C("XTRIM", "t", "MAXLEN", "1"),
    C("XTRIM", "t", "MINID", "7"),
    C("XTRIM", "t", "MAXLEN", "~", "0"),
    C("XTRIM", "nokey", "MAXLEN", "0"),
    C("XTRIM", "t"),
    C("XTRIM", "t", "FOO", "1"),
    C("XTRIM", "t", "LIMIT", "10"),
    C("XTRIM", "t", "MAXLEN", "1", "ACKED"),
    C("XINFO", "STREAM", "t"),
    C("XINFO", "STREAM", "nokey"),
    END};

TEST_IMPL(conformance_7_0_xadd_xrange_xdel_xtrim) { CONFORM(xadd); }

/* XREADGROUP: `>` with COUNT, history (own PEL only, deleted entries as nil,
 * delivery counts), NOACK, several streams, consumers created only when
 * served (7.0), and the errors. */
static const struct cf_step xreadgroup[] = {
    C("XADD", "s", "1-0", "f", "1"), C("XADD", "s", "2-0", "f", "2"),
    C("XADD", "s", "3-0", "f", "3"), C("XADD", "s", "4-0", "f", "4"),
    C("XGROUP", "CREATE", "s", "g", "0"),
    C("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "nobody", "COUNT", "5", "STREAMS", "s", ">"),
    C("XINFO", "CONSUMERS", "s", "g"), C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
    C("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", "0-0"),
    C("XDEL", "s", "2-0"), C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "1"),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "3-0"),
    C("XREADGROUP", "GROUP", "g", "alice", "NOACK", "BLOCK", "100", "STREAMS", "s", "0"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", "0"), C("XINFO", "CONSUMERS", "s", "g"),
    C("XADD", "s", "5-0", "f", "5"),
    C("XREADGROUP", "GROUP", "g", "carol", "NOACK", "STREAMS", "s", ">"), C("XPENDING", "s", "g"),
    C("XINFO", "GROUPS", "s"), C("XADD", "s", "6-0", "f", "6"), C("XADD", "s", "7-0", "f", "7"),
    C("XADD", "t", "1-0", "f", "t1"), C("XADD", "t", "2-0", "f", "t2"),
    C("XGROUP", "CREATE", "t", "g", "0"),
    C("XREADGROUP", "GROUP", "g", "dave", "COUNT", "1", "STREAMS", "s", "t", ">", ">"),
    C("XREADGROUP", "GROUP", "g", "dave", "COUNT", "-1", "STREAMS", "t", "s", ">", "0"),
    C("XREADGROUP", "GROUP", "g", "dave", "STREAMS", "s", "t", ">", ">"),
    C("XREADGROUP", "GROUP", "g", "dave", "STREAMS", "s", "s", "0", "0"),
    /* >: last entry deleted, nothing newer: not served */
    C("XADD", "s", "8-0", "f", "8"), C("XDEL", "s", "8-0"),
    C("XREADGROUP", "GROUP", "g", "dave", "STREAMS", "s", ">"),
    /* errors */
    C("XREADGROUP", "GROUP", "nog", "c", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "nokey", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "nokey", ">", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "t", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "FOO", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "CLAIM", "10", "STREAMS", "s", ">"),
    C("XREADGROUP", "CLAIM", "10", "GROUP", "g", "c", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "COUNT", "x", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "BLOCK", "-1", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "BLOCK", "x", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "+"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "x"),
    C("XREADGROUP", "COUNT", "1", "NOACK", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s"),
    C("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "s", ">"), C("XINFO", "CONSUMERS", "s", "g"),
    END};

TEST_IMPL(conformance_7_0_xreadgroup) { CONFORM(xreadgroup); }

/* BLOCK: timeout, served in blocking order, the second reader keeps
 * waiting, one stream per wake (7.0), add-then-delete wakes with [] (a 7.0
 * quirk), key deleted / flushed / group destroyed texts (7.0). */
static const struct cf_step block[] = {
    C("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
    C("XGROUP", "CREATE", "t", "g", "$", "MKSTREAM"),
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "50", "STREAMS", "s", ">"), ADV(50), W1,
    C("XINFO", "CONSUMERS", "s", "g"),
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", ">"),
    S2("XREADGROUP", "GROUP", "g", "two", "BLOCK", "0", "STREAMS", "s", ">"),
    C("XADD", "s", "1-0", "f", "1"), W1, B2, C("XADD", "s", "2-0", "f", "2"), W2,
    C("XPENDING", "s", "g", "-", "+", "10"), C("XINFO", "CONSUMERS", "s", "g"),
    /* a reader of two streams is served only the one that got data */
    C("XADD", "t", "1-0", "f", "t1"), C("XREADGROUP", "GROUP", "g", "one", "STREAMS", "t", ">"),
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", "t", ">", ">"), C("MULTI"),
    C("XADD", "t", "2-0", "f", "t2"), C("XADD", "s", "3-0", "f", "3"), C("EXEC"), W1,
    C("XREADGROUP", "GROUP", "g", "one", "STREAMS", "s", "t", ">", ">"),
    /* a history read never blocks */
    C("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", "0"),
    /* added and deleted before the reader is served */
    S1("XREADGROUP", "GROUP", "g", "three", "BLOCK", "0", "STREAMS", "s", ">"), C("MULTI"),
    C("XADD", "s", "5-0", "f", "5"), C("XDEL", "s", "5-0"), C("EXEC"), W1,
    C("XINFO", "CONSUMERS", "s", "g"),
    /* the key goes, the group goes */
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", ">"),
    C("XGROUP", "DESTROY", "s", "g"), W1,
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "t", ">"),
    S2("XREADGROUP", "GROUP", "g", "two", "BLOCK", "0", "STREAMS", "t", ">"), C("DEL", "t"), W1, W2,
    C("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
    /* gone and back within one transaction: still blocked */
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", ">"), C("MULTI"),
    C("DEL", "s"), C("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"), C("EXEC"), B1, C("MULTI"),
    C("XGROUP", "DESTROY", "s", "g"), C("XGROUP", "CREATE", "s", "g", "$"), C("EXEC"), B1,
    C("FLUSHALL"), W1, C("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", ">"),
    END};

TEST_IMPL(conformance_7_0_block) { CONFORM(block); }

/* XACK: counts, unknown ids, deleted entries, invalid ids, missing group. */
static const struct cf_step xack[] = {C("XADD", "s", "1-0", "f", "1"),
                                      C("XADD", "s", "2-0", "f", "2"),
                                      C("XADD", "s", "3-0", "f", "3"),
                                      C("XGROUP", "CREATE", "s", "g", "0"),
                                      C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
                                      C("XACK", "s", "g", "1-0", "9-0"),
                                      C("XACK", "s", "g", "1-0"),
                                      C("XDEL", "s", "2-0"),
                                      C("XACK", "s", "g", "2"),
                                      C("XACK", "s", "g", "3-0", "bad"),
                                      C("XACK", "s", "g", "3-0", "-"),
                                      C("XPENDING", "s", "g"),
                                      C("XACK", "s", "nog", "3-0"),
                                      C("XACK", "nokey", "g", "bad"),
                                      C("XACK", "s", "g", "3-0", "3-0"),
                                      C("XPENDING", "s", "g"),
                                      END};

TEST_IMPL(conformance_7_0_xack) { CONFORM(xack); }

/* XPENDING: summary (counts are bulk strings) and extended (IDLE, consumer
 * filter, ranges, count), and errors. Idle times set with XCLAIM IDLE. */
static const struct cf_step xpending[] = {
    C("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"),
    C("XPENDING", "s", "g"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("XADD", "s", "1-0", "f", "1"),
    C("XADD", "s", "2-0", "f", "2"),
    C("XADD", "s", "3-0", "f", "3"),
    C("XADD", "s", "4-0", "f", "4"),
    C("XREADGROUP", "GROUP", "g", "bob", "COUNT", "1", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
    C("XCLAIM", "s", "g", "alice", "0", "2-0", "IDLE", "30000", "JUSTID"),
    C("XCLAIM", "s", "g", "alice", "0", "3-0", "IDLE", "10000", "JUSTID"),
    C("XPENDING", "s", "g"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("XPENDING", "s", "g", "IDLE", "5000", "-", "+", "10"),
    C("XPENDING", "s", "g", "IDLE", "20000", "-", "+", "10", "alice"),
    C("XPENDING", "s", "g", "-", "+", "10", "bob"),
    C("XPENDING", "s", "g", "-", "+", "10", "nobody"),
    C("XPENDING", "s", "g", "2", "3", "10"),
    C("XPENDING", "s", "g", "(2-0", "+", "1"),
    C("XPENDING", "s", "g", "-", "(3-0", "10"),
    C("XPENDING", "s", "g", "-", "+", "0"),
    C("XPENDING", "s", "g", "-", "+", "-3"),
    C("XPENDING", "s", "g", "-", "+", "10", "alice", "extra"),
    C("XPENDING", "s", "g", "-", "+"),
    C("XPENDING", "s", "g", "-"),
    C("XPENDING", "s", "g", "IDLE", "x", "-", "+", "10"),
    C("XPENDING", "s", "g", "-", "+", "x"),
    C("XPENDING", "s", "g", "x", "+", "10"),
    C("XPENDING", "s", "nog"),
    C("XPENDING", "nokey", "g", "-", "+", "10"),
    C("XDEL", "s", "1-0"),
    C("XPENDING", "s", "g"),
    END};

TEST_IMPL(conformance_7_0_xpending) { CONFORM(xpending); }

/* XCLAIM: deleted entries leave the PEL, min-idle not met, idle exactly,
 * IDLE / TIME / RETRYCOUNT / FORCE / JUSTID / LASTID, consumers created only
 * on a claim (7.0), errors. */
static const struct cf_step xclaim[] = {
    C("XADD", "s", "1-0", "f", "1"),
    C("XADD", "s", "2-0", "f", "2"),
    C("XADD", "s", "3-0", "f", "3"),
    C("XADD", "s", "4-0", "f", "4"),
    C("XADD", "s", "5-0", "f", "5"),
    C("XGROUP", "CREATE", "s", "g", "0"),
    C("XREADGROUP", "GROUP", "g", "alice", "COUNT", "4", "STREAMS", "s", ">"),
    C("XCLAIM", "s", "g", "alice", "0", "1-0", "2-0", "3-0", "IDLE", "20000", "JUSTID"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("XDEL", "s", "2-0"),
    C("XCLAIM", "s", "g", "bob", "10000", "2-0", "3-0"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("XCLAIM", "s", "g", "carol", "60000", "1-0"),
    C("XCLAIM", "s", "g", "carol", "60000", "4-0", "9-0"),
    C("XINFO", "CONSUMERS", "s", "g"),
    C("XCLAIM", "s", "g", "carol", "10000", "1-0", "JUSTID"),
    C("XCLAIM", "s", "g", "dave", "0", "1-0", "IDLE", "5000", "RETRYCOUNT", "7"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("XCLAIM", "s", "g", "erin", "0", "5-0"),
    C("XCLAIM", "s", "g", "erin", "0", "5-0", "FORCE"),
    C("XCLAIM", "s", "g", "frank", "0", "4-0", "TIME", "<now-40000>"),
    C("XCLAIM", "s", "g", "frank", "0", "3-0", "TIME", "<now--60000>", "JUSTID"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("XCLAIM", "s", "g", "erin", "0", "9-0", "LASTID", "9-0"),
    C("XINFO", "GROUPS", "s"),
    C("XINFO", "CONSUMERS", "s", "g"),
    C("XCLAIM", "s", "g", "erin", "0", "4-0", "FOO"),
    C("XCLAIM", "s", "g", "erin", "x", "4-0"),
    C("XCLAIM", "s", "g", "erin", "-5", "4-0", "JUSTID"),
    C("XCLAIM", "s", "g", "erin", "0", "4-0", "IDLE", "x"),
    C("XCLAIM", "s", "g", "erin", "0", "4-0", "RETRYCOUNT", "x"),
    C("XCLAIM", "s", "g", "erin", "0", "4-0", "LASTID", "x"),
    C("XCLAIM", "s", "g", "erin", "0", "x"),
    C("XCLAIM", "s", "nog", "erin", "0", "4-0"),
    C("XCLAIM", "nokey", "g", "erin", "0", "4-0"),
    C("XCLAIM", "s", "g", "erin", "0"),
    END};

TEST_IMPL(conformance_7_0_xclaim) { CONFORM(xclaim); }

/* XAUTOCLAIM: cursor, deleted ids (removed, counted against COUNT), COUNT,
 * JUSTID, exclusive start, errors; consumers created only on a claim. */
static const struct cf_step xautoclaim[] = {
    C("XGROUP", "CREATE", "x", "grp", "$", "MKSTREAM"),
    C("XADD", "x", "1-0", "f", "v1"),
    C("XADD", "x", "2-0", "f", "v2"),
    C("XADD", "x", "3-0", "f", "v3"),
    C("XADD", "x", "4-0", "f", "v4"),
    C("XADD", "x", "5-0", "f", "v5"),
    C("XREADGROUP", "GROUP", "grp", "alice", "STREAMS", "x", ">"),
    C("XCLAIM", "x", "grp", "alice", "0", "1-0", "2-0", "3-0", "4-0", "IDLE", "20000", "JUSTID"),
    C("XDEL", "x", "2-0"),
    C("XAUTOCLAIM", "x", "grp", "Bob", "60000", "0-0"),
    C("XINFO", "CONSUMERS", "x", "grp"),
    C("XAUTOCLAIM", "x", "grp", "Bob", "10000", "0-0", "COUNT", "2"),
    C("XPENDING", "x", "grp", "-", "+", "10"),
    C("XAUTOCLAIM", "x", "grp", "Carl", "10000", "3-0", "COUNT", "1", "JUSTID"),
    C("XAUTOCLAIM", "x", "grp", "Carl", "0", "(3-0", "JUSTID"),
    C("XAUTOCLAIM", "x", "grp", "Dora", "0", "-", "COUNT", "10"),
    C("XPENDING", "x", "grp", "-", "+", "10"),
    C("XAUTOCLAIM", "x", "grp", "Dora", "0", "9-0"),
    C("XAUTOCLAIM", "x", "grp", "Dora", "0", "0", "COUNT", "0"),
    C("XAUTOCLAIM", "x", "grp", "Dora", "0", "0", "COUNT", "x"),
    C("XAUTOCLAIM", "x", "grp", "Dora", "x", "0"),
    C("XAUTOCLAIM", "x", "grp", "Dora", "0", "x"),
    C("XAUTOCLAIM", "x", "grp", "Dora", "0", "0", "FOO"),
    C("XAUTOCLAIM", "x", "nog", "Dora", "0", "0"),
    C("XAUTOCLAIM", "nokey", "grp", "Dora", "0", "0"),
    C("XINFO", "CONSUMERS", "x", "grp"),
    END};

TEST_IMPL(conformance_7_0_xautoclaim) { CONFORM(xautoclaim); }

/* MULTI/XADD/XACK/EXEC as the host sends it, runtime and queueing errors,
 * BLOCK inside MULTI. */
static const struct cf_step multi[] = {
    C("XADD", "s", "*", "f", "v"),
    C("XGROUP", "CREATE", "s", "g", "0"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
    C("MULTI"),
    C("XADD", "s", "*", "f", "retry", "delivery-count", "2"),
    C("XACK", "s", "g", "<id1>"),
    C("EXEC"),
    C("XRANGE", "s", "-", "+"),
    C("XPENDING", "s", "g"),
    C("MULTI"),
    C("XADD", "s", "1-0", "f", "v"),
    C("XACK", "s", "g", "bad"),
    C("XLEN", "s"),
    C("EXEC"),
    C("MULTI"),
    C("FOO"),
    C("XADD", "s", "*", "f", "v"),
    C("EXEC"),
    C("MULTI"),
    C("XLEN"),
    C("EXEC"),
    C("XLEN", "s"),
    C("EXEC"),
    C("DISCARD"),
    C("MULTI"),
    C("MULTI"),
    C("XADD", "s", "*", "f", "v"),
    C("DISCARD"),
    C("XLEN", "s"),
    C("MULTI"),
    C("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "nog", "c", "BLOCK", "0", "STREAMS", "s", ">"),
    C("EXEC"),
    END};

TEST_IMPL(conformance_7_0_multi_exec) { CONFORM(multi); }

/* A subscription's reads over its stream and its group's retry stream
 * (subscription.c): the group created on both with MKSTREAM (the retry
 * stream at 0), `> >` with COUNT per key, the own-pending history read with
 * an id per key, a read blocked on both keys woken by an XADD to the retry
 * stream alone (7.0 serves that stream only), XACK per key, and the claim
 * scripts over two keys (cursor per key, deleted ids with their key). */
static const struct cf_step retry_stream[] = {
    C("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
    C("XGROUP", "CREATE", "s:retry:g", "g", "0", "MKSTREAM"),
    C("XGROUP", "CREATE", "s:retry:g", "g", "0", "MKSTREAM"), C("XADD", "s", "1-0", "f", "1"),
    C("XADD", "s", "2-0", "f", "2"),
    C("XADD", "s:retry:g", "1-0", "f", "r1", "delivery-count", "1", "original-id", "0-1"),
    C("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "BLOCK", "100", "STREAMS", "s", "s:retry:g",
      ">", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "STREAMS", "s", "s:retry:g", "0-0", "0-0"),
    C("XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "STREAMS", "s", "s:retry:g", "1-0", "0-0"),
    C("XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "STREAMS", "s", "s:retry:g", "1-0", "1-0"),
    C("XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "BLOCK", "100", "STREAMS", "s", "s:retry:g",
      ">", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "STREAMS", "s", "s:retry:g", ">", ">"),
    S1("XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "BLOCK", "0", "STREAMS", "s", "s:retry:g",
       ">", ">"),
    B1, C("XADD", "s:retry:g", "2-0", "f", "r2"), W1, C("XACK", "s", "g", "1-0", "2-0"),
    C("XACK", "s:retry:g", "g", "1-0"), C("XPENDING", "s", "g", "-", "+", "10"),
    C("XPENDING", "s:retry:g", "g", "-", "+", "10"),
    /* claim scripts over both keys: idle set with XCLAIM IDLE */
    C("XADD", "s", "3-0", "f", "3"), C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
    C("XCLAIM", "s", "g", "c", "0", "3-0", "IDLE", "30000", "JUSTID"),
    C("XCLAIM", "s:retry:g", "g", "c", "0", "2-0", "IDLE", "30000", "JUSTID"),
    C("XADD", "s:retry:g", "3-0", "f", "r3"),
    C("EVAL", SCRIPT_CLAIM, "2", "s", "s:retry:g", "g", "d", "10000", "5"),
    C("XCLAIM", "s", "g", "d", "0", "3-0", "IDLE", "30000", "JUSTID"),
    C("XCLAIM", "s:retry:g", "g", "d", "0", "2-0", "3-0", "IDLE", "30000", "JUSTID"),
    C("XDEL", "s:retry:g", "2-0"),
    C("EVAL", SCRIPT_RECLAIM, "2", "s", "s:retry:g", "g", "e", "10000", "1", "0-0", "0-0"),
    C("EVAL", SCRIPT_RECLAIM, "2", "s", "s:retry:g", "g", "e", "10000", "1", "0-0", "0-0"),
    C("XPENDING", "s:retry:g", "g", "-", "+", "10"), END};

TEST_IMPL(conformance_7_0_retry_stream) { CONFORM(retry_stream); }

/* SCRIPT_OWN, the history read of a `new` subscription over the stream and
 * its retry stream: only this consumer's entries after each key's cursor,
 * with their idle time and the deliveries before this one (XPENDING before
 * the read counts it), COUNT per key, a deleted entry read past (the cursor
 * moves, the entry stays pending), cursors unchanged once the list is read,
 * and a missing group as the script's NOGROUP error. */
static const struct cf_step own_script[] = {
    C("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"),
    C("XGROUP", "CREATE", "s:retry:g", "g", "0", "MKSTREAM"),
    C("XADD", "s", "1-0", "f", "1"),
    C("XADD", "s", "2-0", "f", "2"),
    C("XADD", "s", "3-0", "f", "3"),
    C("XADD", "s", "4-0", "f", "4"),
    C("XADD", "s:retry:g", "1-0", "f", "r1", "delivery-count", "2"),
    C("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "other", "COUNT", "1", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "s:retry:g", ">", ">"),
    C("XCLAIM", "s", "g", "c", "0", "1-0", "IDLE", "30000", "JUSTID"),
    C("XCLAIM", "s", "g", "c", "0", "2-0", "IDLE", "20000", "RETRYCOUNT", "5", "JUSTID"),
    C("EVAL", SCRIPT_OWN, "2", "s", "s:retry:g", "g", "c", "2", "0-0", "0-0"),
    C("XDEL", "s", "4-0"),
    C("EVAL", SCRIPT_OWN, "2", "s", "s:retry:g", "g", "c", "2", "2-0", "1-0"),
    C("EVAL", SCRIPT_OWN, "2", "s", "s:retry:g", "g", "c", "2", "4-0", "1-0"),
    C("EVAL", SCRIPT_OWN, "2", "s", "s:retry:g", "g", "c", "2", "0-0", "0-0"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("XPENDING", "s:retry:g", "g", "-", "+", "10"),
    C("EVAL", SCRIPT_OWN, "2", "s", "s:retry:g", "g", "nobody", "2", "0-0", "0-0"),
    C("EVAL", SCRIPT_OWN, "2", "s", "s:retry:g", "nog", "c", "2", "0-0", "0-0"),
    END};

TEST_IMPL(conformance_7_0_own_script) { CONFORM(own_script); }

/* EVAL: the host's two scripts on idle entries set up with XCLAIM IDLE,
 * conversions, and errors worded as Redis 7 words them. */
static const struct cf_step eval_scripts[] = {
    C("XADD", "s", "1-0", "f", "1"), C("XADD", "s", "2-0", "f", "2"),
    C("XADD", "s", "3-0", "f", "3"), C("XGROUP", "CREATE", "s", "g", "0"),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
    C("XCLAIM", "s", "g", "alice", "0", "2-0", "IDLE", "30000", "JUSTID"),
    C("XCLAIM", "s", "g", "alice", "0", "1-0", "IDLE", "20000", "JUSTID"),
    C("XADD", "s", "4-0", "f", "4"), C("XADD", "s", "5-0", "f", "5"),
    /* longest idle first (2-0, then 1-0), then new entries, sharing COUNT */
    C("EVAL", SCRIPT_CLAIM, "1", "s", "g", "bob", "10000", "3"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("EVAL", SCRIPT_CLAIM, "1", "s", "g", "bob", "10000", "3"),
    C("XCLAIM", "s", "g", "bob", "0", "1-0", "2-0", "3-0", "IDLE", "15000", "JUSTID"),
    C("XDEL", "s", "2-0"), C("EVAL", SCRIPT_CLAIM, "1", "s", "g", "carol", "10000", "2"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("EVAL", SCRIPT_CLAIM, "1", "s", "g", "carol", "10000", "2"),
    C("EVAL", SCRIPT_CLAIM, "1", "s", "nog", "carol", "10000", "2"),
    /* reclaim: XAUTOCLAIM plus idle before and deliveries after */
    C("XCLAIM", "s", "g", "carol", "0", "1-0", "3-0", "4-0", "5-0", "IDLE", "25000", "JUSTID"),
    C("XDEL", "s", "3-0"), C("EVAL", SCRIPT_RECLAIM, "1", "s", "g", "dave", "20000", "2", "0-0"),
    C("EVAL", SCRIPT_RECLAIM, "1", "s", "g", "dave", "20000", "2", "4-0"),
    C("EVAL", SCRIPT_RECLAIM, "1", "s", "g", "dave", "20000", "2", "0-0"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("EVAL", SCRIPT_RECLAIM, "1", "s", "nog", "dave", "20000", "2", "0-0"),
    /* conversions and errors */
    C("EVAL", "return {1, 'a', {ok='fine'}, false, 3.9, {err='My Error'}, nil, 'after'}", "0"),
    C("EVAL", "return KEYS[1] .. ARGV[2]", "1", "k", "x", "y"),
    C("EVAL", "return redis.call('XLEN', KEYS[1])", "1", "s"),
    C("EVAL", "return redis.pcall('XGROUP', 'SETID', 's', 'nog', '0')", "0"),
    C("EVAL", "local x = 1\nreturn redis.call('XGROUP', 'SETID', 's', 'nog', '0')", "0"),
    C("EVAL", "return redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'BLOCK', 0, 'STREAMS', 's', '>')",
      "0"),
    C("EVAL", "return redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'STREAMS', 's', '>')", "0"),
    C("EVAL", "return nil + 1", "0"), C("EVAL", "return 1", "2", "k"), C("EVAL", "return 1", "-1"),
    C("EVAL", "return redis.pcall('FOO')", "0"), C("EVAL", "return redis.pcall('MULTI')", "0"),
    END};

TEST_IMPL(conformance_7_0_eval_scripts) { CONFORM(eval_scripts); }

/* entries-read and lag (XINFO GROUPS) as XDEL, trimming, SETID and
 * ENTRIESREAD move them; the 7.0 rules are not the 8.x ones. */
static const struct cf_step lag[] = {
    C("XADD", "s", "1-0", "f", "1"), C("XADD", "s", "2-0", "f", "2"),
    C("XADD", "s", "3-0", "f", "3"), C("XADD", "s", "4-0", "f", "4"),
    C("XADD", "s", "5-0", "f", "5"), C("XGROUP", "CREATE", "s", "a", "0"),
    C("XGROUP", "CREATE", "s", "b", "0"), C("XGROUP", "CREATE", "s", "c", "$"),
    C("XGROUP", "CREATE", "s", "d", "0", "ENTRIESREAD", "2"),
    C("XGROUP", "CREATE", "s", "e", "0", "ENTRIESREAD", "9"), C("XINFO", "GROUPS", "s"),
    C("XREADGROUP", "GROUP", "a", "x", "COUNT", "1", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "d", "x", "COUNT", "1", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "e", "x", "COUNT", "1", "STREAMS", "s", ">"),
    C("XINFO", "GROUPS", "s"),
    /* a tombstone ahead of the groups */
    C("XDEL", "s", "3-0"), C("XINFO", "GROUPS", "s"),
    C("XREADGROUP", "GROUP", "a", "x", "COUNT", "1", "STREAMS", "s", ">"),
    C("XINFO", "GROUPS", "s"), C("XREADGROUP", "GROUP", "a", "x", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "b", "x", "STREAMS", "s", ">"), C("XINFO", "GROUPS", "s"),
    C("XADD", "s", "6-0", "f", "6"), C("XINFO", "GROUPS", "s"),
    /* the first entry deleted, then trimming */
    C("XDEL", "s", "1-0"), C("XINFO", "GROUPS", "s"), C("XTRIM", "s", "MAXLEN", "2"),
    C("XINFO", "GROUPS", "s"), C("XGROUP", "SETID", "s", "b", "0"),
    C("XGROUP", "SETID", "s", "c", "5-0", "ENTRIESREAD", "5"), C("XGROUP", "SETID", "s", "d", "$"),
    C("XINFO", "GROUPS", "s"), C("XREADGROUP", "GROUP", "b", "x", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "c", "x", "STREAMS", "s", ">"), C("XINFO", "GROUPS", "s"),
    C("XINFO", "STREAM", "s"), C("XTRIM", "s", "MAXLEN", "0"), C("XINFO", "GROUPS", "s"),
    C("XINFO", "STREAM", "s"), C("XADD", "s", "9-0", "f", "9"), C("XINFO", "GROUPS", "s"), END};

TEST_IMPL(conformance_7_0_lag) { CONFORM(lag); }

/* `>` over entries already pending (SETID backwards, XCLAIM FORCE): the
 * NACK moves to the reader with its count reset; NOACK leaves it alone. */
static const struct cf_step redeliver[] = {
    C("XADD", "s", "1-0", "f", "1"),
    C("XADD", "s", "2-0", "f", "2"),
    C("XADD", "s", "3-0", "f", "3"),
    C("XGROUP", "CREATE", "s", "g", "0"),
    C("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
    C("XGROUP", "SETID", "s", "g", "0"),
    C("XREADGROUP", "GROUP", "g", "bob", "COUNT", "1", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "carol", "NOACK", "COUNT", "1", "STREAMS", "s", ">"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("XCLAIM", "s", "g", "dave", "0", "3-0", "FORCE"),
    C("XCLAIM", "s", "g", "dave", "60000", "3-0", "FORCE", "JUSTID"),
    C("XADD", "s", "4-0", "f", "4"),
    C("XCLAIM", "s", "g", "erin", "60000", "4-0", "FORCE", "RETRYCOUNT", "5", "JUSTID"),
    C("XCLAIM", "s", "g", "erin", "0", "9-0", "FORCE"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("XPENDING", "s", "g"),
    C("XGROUP", "SETID", "s", "g", "100-0"),
    C("XADD", "s", "5-0", "f", "5"),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
    C("XADD", "s", "101-0", "f", "101"),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
    C("XCLAIM", "s", "g", "frank", "0", "1-0", "1-0", "IDLE", "99999999999999"),
    C("XCLAIM", "s", "g", "frank", "0", "2-0", "IDLE", "-5", "RETRYCOUNT", "0", "JUSTID"),
    C("XPENDING", "s", "g", "-", "+", "10", "frank"),
    C("XPENDING", "s", "g", "IDLE", "5000", "-", "+"),
    END};

TEST_IMPL(conformance_7_0_redeliver) { CONFORM(redeliver); }

/* Approximate trimming on streams big enough to have several nodes, filled
 * by a script: nodes of 100 entries fixed when appended, deleted entries
 * counted, whole nodes only (stream.h). */
static const struct cf_step trimming[] = {
    C("EVAL", "for i = 1, 450 do redis.call('XADD', KEYS[1], i .. '-0', 'f', 'v') end", "1", "s"),
    C("XLEN", "s"), C("XTRIM", "s", "MAXLEN", "~", "400"), C("XTRIM", "s", "MAXLEN", "~", "300"),
    C("XLEN", "s"), C("XRANGE", "s", "-", "+", "COUNT", "1"), C("XTRIM", "s", "MINID", "~", "260"),
    C("XTRIM", "s", "MINID", "~", "400", "LIMIT", "50"),
    C("XTRIM", "s", "MINID", "~", "400", "LIMIT", "100"), C("XRANGE", "s", "-", "+", "COUNT", "1"),
    C("XADD", "s", "MAXLEN", "~", "10", "*", "f", "v"), C("XLEN", "s"), C("XINFO", "STREAM", "s"),
    C("XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "0"), C("XLEN", "s"), C("XINFO", "STREAM", "s"),
    C("EVAL", "for i = 1, 250 do redis.call('XADD', KEYS[1], i .. '-0', 'f', 'v') end", "1", "t"),
    C("XDEL", "t", "150-0"), C("XTRIM", "t", "MAXLEN", "~", "5"), C("XLEN", "t"),
    C("XINFO", "STREAM", "t"),
    /* a node keeps the id of its last entry after an XDEL; exact trimming
     * inside a node; a tail node whose entries are all deleted goes */
    C("EVAL", "for i = 1, 150 do redis.call('XADD', KEYS[1], i .. '-0', 'f', 'v') end", "1", "v"),
    C("XDEL", "v", "100-0"), C("XTRIM", "v", "MINID", "~", "100"),
    C("XTRIM", "v", "MINID", "~", "101"), C("XADD", "v", "151-0", "f", "v"),
    C("XTRIM", "v", "MAXLEN", "20"), C("XINFO", "STREAM", "v"),
    C("XDEL", "v", "132-0", "133-0", "134-0", "135-0", "136-0", "137-0", "138-0", "139-0", "140-0",
      "141-0"),
    C("XTRIM", "v", "MAXLEN", "~", "1"),
    C("EVAL", "for i = 1, 105 do redis.call('XADD', KEYS[1], i .. '-0', 'f', 'v') end", "1", "w"),
    C("XDEL", "w", "101-0", "102-0", "103-0", "104-0", "105-0"), C("XADD", "w", "106-0", "f", "v"),
    /* (not XINFO STREAM here: with two nodes a server's radix-tree-nodes is
     * 6, the count of its radix tree's inner nodes, which the memory broker
     * does not model; keys and nodes agree up to one node) */
    C("XTRIM", "w", "MAXLEN", "~", "1"), C("XLEN", "w"), END};

TEST_IMPL(conformance_7_0_trimming) { CONFORM(trimming); }

/* Consumer idle times on 7.0: refreshed only by a read or claim that
 * serves something (one real wait of 1.1 s makes them visible). */
static const struct cf_step seen_time[] = {
    C("XADD", "s", "1-0", "f", "1"),
    C("XADD", "s", "2-0", "f", "2"),
    C("XGROUP", "CREATE", "s", "g", "0"),
    C("XGROUP", "CREATECONSUMER", "s", "g", "idler"),
    C("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "bob", "COUNT", "1", "STREAMS", "s", ">"),
    C("XGROUP", "CREATECONSUMER", "s", "g", "carol"),
    C("XGROUP", "CREATECONSUMER", "s", "g", "dave"),
    ADV(1100),
    C("XINFO", "CONSUMERS", "s", "g"),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", "0"),
    C("XCLAIM", "s", "g", "carol", "60000", "1-0"),
    C("XAUTOCLAIM", "s", "g", "dave", "60000", "0"),
    C("XPENDING", "s", "g", "-", "+", "10", "idler"),
    C("XGROUP", "CREATECONSUMER", "s", "g", "idler"),
    C("XINFO", "CONSUMERS", "s", "g"),
    C("XCLAIM", "s", "g", "carol", "0", "1-0"),
    C("XAUTOCLAIM", "s", "g", "dave", "0", "0"),
    C("XREADGROUP", "GROUP", "g", "idler", "STREAMS", "s", "0"),
    C("XINFO", "CONSUMERS", "s", "g"),
    END};

TEST_IMPL(conformance_7_0_seen_time) { CONFORM(seen_time); }

/* String keys with a time to live, as the consumer leases use them: SET with
 * NX/XX/PX/EX, GET, PEXPIRE, PTTL of a key without one and of no key, expiry
 * seen by GET, EXISTS and TYPE (one real wait of 300 ms), and the type rules
 * against streams. */
static const struct cf_step strings[] = {C("SET", "k", "v1", "NX", "PX", "200"),
                                         C("SET", "k", "v2", "NX", "PX", "200"),
                                         C("GET", "k"),
                                         C("SET", "k", "v3", "XX"),
                                         C("PTTL", "k"),
                                         C("PEXPIRE", "k", "200"),
                                         C("PEXPIRE", "nokey", "200"),
                                         C("PTTL", "nokey"),
                                         C("SET", "x", "1", "EX", "0"),
                                         C("SET", "x", "1", "NX", "XX"),
                                         C("SET", "x", "1", "PX", "ten"),
                                         C("SET", "x", "1", "XX"),
                                         C("SET", "gone", "soon", "PX", "100"),
                                         C("EXISTS", "k", "gone"),
                                         C("TYPE", "k"),
                                         ADV(300),
                                         C("GET", "k"),
                                         C("EXISTS", "k", "gone"),
                                         C("TYPE", "k"),
                                         C("XADD", "s", "1-0", "f", "v"),
                                         C("GET", "s"),
                                         C("SET", "t", "v"),
                                         C("XADD", "t", "1-0", "f", "v"),
                                         C("XLEN", "t"),
                                         C("TYPE", "t"),
                                         C("SET", "s", "now a string"),
                                         C("TYPE", "s"),
                                         C("DEL", "s", "t"),
                                         END};

TEST_IMPL(conformance_7_0_strings) { CONFORM(strings); }

#define LEASE_KEY "luastream:consumer:{s}:g:c"
/* SCRIPT_LEASE and SCRIPT_KEEPALIVE's renewals: take, take again by the
 * holder, refused while held without a time to live (so the transcript is
 * exact), steal only from the value named, renew by the holder, renew after
 * the key expired (taken again), refused renew and drop, drop by the holder;
 * a rider whose group does not exist answers its error, the renewal done; a
 * key of another type is an error. */
static const struct cf_step lease_script[] = {
    C("EVAL", SCRIPT_LEASE, "1", LEASE_KEY, "take", "A", "60000"),
    C("EVAL", SCRIPT_LEASE, "1", LEASE_KEY, "take", "A", "60000"),
    C("GET", LEASE_KEY),
    C("SET", LEASE_KEY, "B"),
    C("EVAL", SCRIPT_LEASE, "1", LEASE_KEY, "take", "A", "60000"),
    C("EVAL", SCRIPT_LEASE, "1", LEASE_KEY, "steal", "A", "60000", "Z"),
    C("EVAL", SCRIPT_KEEPALIVE, "1", LEASE_KEY, "A", "60000", "1", "0"),
    C("EVAL", SCRIPT_LEASE, "1", LEASE_KEY, "drop", "A", "60000"),
    C("GET", LEASE_KEY),
    C("EVAL", SCRIPT_LEASE, "1", LEASE_KEY, "steal", "A", "100", "B"),
    C("GET", LEASE_KEY),
    C("EVAL", SCRIPT_KEEPALIVE, "1", LEASE_KEY, "A", "100", "1", "0"),
    ADV(300),
    C("EXISTS", LEASE_KEY),
    C("EVAL", SCRIPT_KEEPALIVE, "1", LEASE_KEY, "A", "60000", "1", "0"),
    C("GET", LEASE_KEY),
    C("EVAL", SCRIPT_LEASE, "1", LEASE_KEY, "drop", "A", "60000"),
    C("EXISTS", LEASE_KEY),
    C("EVAL", SCRIPT_KEEPALIVE, "4", LEASE_KEY, LEASE_KEY, "{s}", "{s}-retry", "A", "60000", "1",
      "1", "1", "g", "c", "2", "1", "1-0", "0"),
    C("GET", LEASE_KEY),
    C("EVAL", SCRIPT_LEASE, "1", LEASE_KEY, "drop", "A", "60000"),
    C("XADD", LEASE_KEY, "1-0", "f", "v"),
    C("EVAL", SCRIPT_LEASE, "1", LEASE_KEY, "take", "A", "60000"),
    END};

TEST_IMPL(conformance_7_0_lease_script) { CONFORM(lease_script); }

/* SCRIPT_TRIM: the stream keeps what some group has not finished with: g
 * acked 1-3 and holds 4-6 pending, h acked 1-2 and never read the rest; a
 * stream without groups, and a missing one, are kept; a cap keeps the
 * newest entries whatever the groups did. */
static const struct cf_step trim_script[] = {
    C("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"), C("XGROUP", "CREATE", "s", "h", "$"),
    C("EVAL", "for i = 1, 10 do redis.call('XADD', KEYS[1], i .. '-0', 'f', i) end", "1", "s"),
    C("XREADGROUP", "GROUP", "g", "one", "COUNT", "6", "STREAMS", "s", ">"),
    C("XACK", "s", "g", "1-0", "2-0", "3-0"),
    C("XREADGROUP", "GROUP", "h", "two", "COUNT", "2", "STREAMS", "s", ">"),
    C("XACK", "s", "h", "1-0", "2-0"), C("EVAL", SCRIPT_TRIM, "1", "s", "1", "0"),
    C("XRANGE", "s", "-", "+", "COUNT", "1"),
    C("XREADGROUP", "GROUP", "h", "two", "STREAMS", "s", ">"),
    C("XACK", "s", "h", "3-0", "4-0", "5-0", "6-0", "7-0", "8-0", "9-0", "10-0"),
    C("EVAL", SCRIPT_TRIM, "1", "s", "1", "0"), C("XLEN", "s"),
    C("XACK", "s", "g", "4-0", "5-0", "6-0"), C("EVAL", SCRIPT_TRIM, "1", "s", "1", "0"),
    C("XLEN", "s"), C("XADD", "t", "1-0", "f", "x"), C("EVAL", SCRIPT_TRIM, "1", "t", "1", "0"),
    C("EVAL", SCRIPT_TRIM, "1", "missing", "1", "0"),
    /* a cap alone: the newest 2, finished or not */
    C("EVAL", "for i = 11, 15 do redis.call('XADD', KEYS[1], i .. '-0', 'f', i) end", "1", "s"),
    C("EVAL", SCRIPT_TRIM, "1", "s", "0", "2"), C("XRANGE", "s", "-", "+"), END};

TEST_IMPL(conformance_7_0_trim_script) { CONFORM(trim_script); }

/* The fields of every entry of KEYS[1], without the ids (XADD * makes them). */
#define FIELDS_OF                                                                  \
  "local out = {} for i, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do " \
  "out[i] = e[2] end return out"
/* Id, owner and delivery count of each pending entry (not the idle time). */
#define PENDING_OF                                                                        \
  "local out = {} for i, p in ipairs(redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', " \
  "100)) do out[i] = {p[1], p[2], p[4]} end return out"

/* SCRIPT_HANDBACK_RETRY: of four entries read by c, 1-0 of the stream and
 * 1-0 of the retry stream are copied to the retry stream with the fields
 * given and acked; 2-0 (deleted) and 3-0 (claimed by another) stay where
 * they are. SCRIPT_HANDBACK: a never-started entry is given back with one
 * delivery less, an abandoned one with its count; an id of another consumer
 * is left alone. */
static const struct cf_step handback_scripts[] = {
    C("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
    C("XGROUP", "CREATE", "s:retry:g", "g", "$", "MKSTREAM"),
    C("XADD", "s", "1-0", "data", "a"),
    C("XADD", "s", "2-0", "data", "b"),
    C("XADD", "s", "3-0", "data", "c"),
    C("XADD", "s:retry:g", "1-0", "data", "d", "delivery-count", "2", "original-id", "0-1"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "s:retry:g", ">", ">"),
    C("XDEL", "s", "2-0"),
    C("XCLAIM", "s", "g", "other", "0", "3-0", "JUSTID"),
    C("EVAL", SCRIPT_HANDBACK_RETRY, "2", "s", "s:retry:g", "g", "c", "1", "1-0", "6", "data", "a",
      "delivery-count", "0", "original-id", "1-0", "1", "2-0", "6", "data", "b", "delivery-count",
      "0", "original-id", "2-0", "1", "3-0", "6", "data", "c", "delivery-count", "1", "original-id",
      "3-0", "2", "1-0", "6", "data", "d", "delivery-count", "2", "original-id", "0-1"),
    C("EVAL", PENDING_OF, "1", "s", "g"),
    C("EVAL", PENDING_OF, "1", "s:retry:g", "g"),
    C("EVAL", FIELDS_OF, "1", "s:retry:g"),
    C("XADD", "t", "1-0", "f", "1"),
    C("XADD", "t", "2-0", "f", "2"),
    C("XADD", "t", "3-0", "f", "3"),
    C("XGROUP", "CREATE", "t", "g", "0"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "t", ">"),
    C("XCLAIM", "t", "g", "c", "0", "1-0", "2-0"),
    C("XCLAIM", "t", "g", "other", "0", "3-0"),
    C("EVAL", SCRIPT_HANDBACK, "1", "t", "g", "c", "0", "2", "1-0", "3-0"),
    C("EVAL", SCRIPT_HANDBACK, "1", "t", "g", "c", "1", "1", "2-0"),
    C("EVAL", PENDING_OF, "1", "t", "g"),
    END};

TEST_IMPL(conformance_7_0_handback_scripts) { CONFORM(handback_scripts); }

/* SCRIPT_LAG: the entry after last-delivered-id as the stream holds it
 * (a deleted or trimmed one skipped), the smallest pending id even once its
 * entry is gone, a group at the stream's end, a missing group or key ([]),
 * and a key that is not a stream. The ids are ahead of every clock (year
 * 2286), so both sides age them 0; the ages themselves are checked on the
 * virtual clock (tests/spec/lag_seconds_spec.lua) and on a real server
 * (tests/integration/lag_seconds_spec.lua). TIME's shape, in a script. */
static const struct cf_step lag_script[] = {
    C("EVAL",
      "local t = redis.call('TIME') return {#t, type(t[1]), type(t[2]), "
      "tonumber(t[1]) > 1600000000 and 1 or 0, tonumber(t[2]) < 1000000 and 1 or 0}",
      "0"),
    C("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"),
    C("EVAL", SCRIPT_LAG, "2", "s", "s:retry:g", "g"),
    C("EVAL", "for i = 1, 6 do redis.call('XADD', KEYS[1], '9999999999999-' .. i, 'f', i) end", "1",
      "s"),
    C("EVAL", SCRIPT_LAG, "2", "s", "s:retry:g", "g"),
    C("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">"),
    C("EVAL", SCRIPT_LAG, "2", "s", "s:retry:g", "g"),
    C("XDEL", "s", "9999999999999-3", "9999999999999-1"),
    C("EVAL", SCRIPT_LAG, "1", "s", "g"),
    C("XTRIM", "s", "MINID", "9999999999999-5"),
    C("EVAL", SCRIPT_LAG, "1", "s", "g"),
    C("XACK", "s", "g", "9999999999999-1", "9999999999999-2"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
    C("XACK", "s", "g", "9999999999999-5", "9999999999999-6"),
    C("EVAL", SCRIPT_LAG, "1", "s", "g"),
    C("XGROUP", "CREATE", "s", "h", "$"),
    C("XGROUP", "CREATE", "s:retry:g", "g", "0", "MKSTREAM"),
    C("EVAL", SCRIPT_LAG, "2", "s", "s:retry:g", "h"),
    C("EVAL", SCRIPT_LAG, "2", "missing", "s:retry:g", "g"),
    C("SET", "k", "v"),
    C("EVAL", SCRIPT_LAG, "1", "k", "g"),
    END};

TEST_IMPL(conformance_7_0_lag_script) { CONFORM(lag_script); }

/* SCRIPT_PRUNE: of four consumers, the one with pending entries stays, the
 * one holding a lease stays, one too recently seen stays (threshold 1 s after
 * a real wait of 1.1 s, then a read refreshes it), and only the idle one with
 * nothing pending goes; its pending list (empty) and the others' are intact.
 * A missing group or stream has no consumers to remove. */
static const struct cf_step prune_script[] = {
    C("XADD", "s", "1-0", "f", "1"),
    C("XADD", "s", "2-0", "f", "2"),
    C("XGROUP", "CREATE", "s", "g", "0"),
    C("XREADGROUP", "GROUP", "g", "busy", "COUNT", "1", "STREAMS", "s", ">"),
    C("XGROUP", "CREATECONSUMER", "s", "g", "leased"),
    C("XGROUP", "CREATECONSUMER", "s", "g", "idle"),
    C("XGROUP", "CREATECONSUMER", "s", "g", "fresh"),
    C("SET", "luastream:consumer:{s}:g:leased", "token", "PX", "60000"),
    ADV(1100),
    C("XREADGROUP", "GROUP", "g", "fresh", "COUNT", "1", "STREAMS", "s", ">"),
    C("XACK", "s", "g", "2-0"),
    C("EVAL", SCRIPT_PRUNE, "1", "s", "g", "1000", "luastream:consumer:{s}:g:"),
    C("XINFO", "CONSUMERS", "s", "g"),
    C("XPENDING", "s", "g"),
    C("EVAL", SCRIPT_PRUNE, "1", "s", "g", "1000", "luastream:consumer:{s}:g:"),
    C("EVAL", SCRIPT_PRUNE, "1", "s", "nog", "1000", "luastream:consumer:{s}:nog:"),
    C("EVAL", SCRIPT_PRUNE, "1", "nos", "g", "1000", "luastream:consumer:{nos}:g:"),
    END};

TEST_IMPL(conformance_7_0_prune_script) { CONFORM(prune_script); }

/* More blocking on 7.0: COUNT on wake, at most 1000 entries without COUNT,
 * a timeout after another reader took the entries, a group made again and
 * moved back, history streams never block. */
static const struct cf_step block_more[] = {
    C("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
    S1("XREADGROUP", "GROUP", "g", "one", "COUNT", "2", "BLOCK", "0", "STREAMS", "s", ">"),
    C("EVAL", "for i = 1, 5 do redis.call('XADD', KEYS[1], i .. '-0', 'f', i) end", "1", "s"), W1,
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", ">"), W1,
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", ">"),
    C("EVAL", "for i = 6, 1010 do redis.call('XADD', KEYS[1], i .. '-0', 'f', i) end", "1", "s"),
    W1, C("XPENDING", "s", "g"), C("XREADGROUP", "GROUP", "g", "one", "STREAMS", "s", ">"),
    /* (A read blocked on a second group here, right after the first group
     * read the last entries, is answered nil at once by redis-server 7.0.15
     * in some runs and blocks in others: not a scenario to compare.) */
    C("XGROUP", "DESTROY", "s", "g"), C("XGROUP", "CREATE", "s", "g", "$"),
    /* SETID before the read: with the read already blocked, redis-server
     * 7.0.15 leaves it unanswered for seconds in some runs. */
    C("XGROUP", "SETID", "s", "g", "1005-0"), C("XADD", "s", "2000-0", "f", "x"),
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", ">"), W1,
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", "s", ">", "0"), W1,
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", ">"),
    S2("XREADGROUP", "GROUP", "g", "two", "BLOCK", "80", "STREAMS", "s", ">"),
    C("XADD", "s", "2001-0", "f", "y"), W1, ADV(80), W2, C("XINFO", "CONSUMERS", "s", "g"),
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", ">"),
    C("XADD", "s", "NOMKSTREAM", "2002-0", "f", "z"), W1,
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "nokey", ">"), W1, END};

TEST_IMPL(conformance_7_0_block_more) { CONFORM(block_more); }

/* XAUTOCLAIM's scan: at most COUNT*10 entries looked at, deleted ones use
 * up COUNT. */
static const struct cf_step autoclaim_scan[] = {
    C("EVAL", "for i = 1, 30 do redis.call('XADD', KEYS[1], i .. '-0', 'f', i) end", "1", "s"),
    C("XGROUP", "CREATE", "s", "g", "0"),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
    C("XCLAIM", "s", "g", "alice", "0", "25-0", "27-0", "IDLE", "20000", "JUSTID"),
    C("XAUTOCLAIM", "s", "g", "bob", "10000", "0", "COUNT", "1"),
    C("XAUTOCLAIM", "s", "g", "bob", "10000", "0", "COUNT", "2"),
    C("XAUTOCLAIM", "s", "g", "bob", "10000", "21-0", "COUNT", "1"),
    C("XDEL", "s", "1-0", "2-0", "3-0"),
    C("XAUTOCLAIM", "s", "g", "bob", "10000", "0", "COUNT", "2"),
    C("XAUTOCLAIM", "s", "g", "bob", "0", "0", "COUNT", "2", "JUSTID"),
    C("XPENDING", "s", "g", "-", "+", "3"),
    C("XDEL", "s", "30-0"),
    C("XAUTOCLAIM", "s", "g", "bob", "0", "29", "COUNT", "5", "JUSTID"),
    C("XAUTOCLAIM", "s", "g", "bob", "0", "(29-0", "COUNT", "5", "JUSTID"),
    END};

TEST_IMPL(conformance_7_0_autoclaim_scan) { CONFORM(autoclaim_scan); }

/* Script details: argument and reply conversions, status/error replies,
 * errors raised inside redis.call. */
static const struct cf_step eval_more[] = {
    C("EVAL", "return redis.call('XADD', KEYS[1], 1, 'f', 10, 'g', 3.5, 'h', -0.25)", "1", "s"),
    C("XRANGE", "s", "-", "+"),
    C("EVAL", "return redis.call('XLEN')", "0"),
    C("EVAL", "return redis.pcall('XLEN')", "0"),
    C("EVAL", "return redis.call('XADD', 's', 1, 'f', 'v')", "0"),
    C("EVAL", "return redis.status_reply('FINE')", "0"),
    C("EVAL", "return redis.error_reply('MYERR went wrong')", "0"),
    C("EVAL", "return {redis.call('XRANGE', 's', '-', '+')[1][2], true, {}}", "0"),
    C("EVAL", "return redis.call('XPENDING', 's', 'nog')", "0"),
    C("EVAL", "return redis.call('XINFO', 'STREAM', 's')[2]", "0"),
    C("EVAL", "redis.call('XADD', 's', 5, 'f', 'v')\nerror('boom')", "0"),
    C("XLEN", "s"),
    C("EVAL", "error({err='CUSTOM failure'})", "0"),
    C("EVAL", "return", "0"),
    C("EVAL", "return 1", "x"),
    C("EVAL", "return redis.call()", "0"),
    C("EVAL", "return redis.call('XLEN', {})", "0"),
    C("EVAL", "return 'x' ..", "0"),
    C("PING", "hello"),
    C("INFO"),
    C("DEL", "s", "t", "s"),
    END};

TEST_IMPL(conformance_7_0_eval_more) { CONFORM(eval_more); }

/* Parsing details: id syntax, the largest id, interval bounds, counts,
 * case, subcommand arities. */
static const struct cf_step parsing[] = {
    C("XADD", "t", "01-0", "f", "v"),
    C("XADD", "t", "2-01", "f", "v"),
    C("XADD", "t", "+3-0", "f", "v"),
    C("XADD", "t", "4-", "f", "v"),
    C("XADD", "t", "-4", "f", "v"),
    C("XADD", "t", "4-0-0", "f", "v"),
    C("XADD", "t", " 5-0", "f", "v"),
    C("XADD", "t", "18446744073709551616-0", "f", "v"),
    C("XADD", "t", "6-18446744073709551615", "f", "v"),
    C("XADD", "t", "6-*", "f", "v"),
    C("XADD", "t", "7-*", "f", "v"),
    C("XADD", "t", "*-1", "f", "v"),
    C("XADD", "q", "1- 1", "f", "v"),
    C("XADD", "q", "2- -5", "f", "v"),
    C("XADD", "q",
      "0000000000000000000000000000000000000000000000000000000000000000000000000"
      "00000000000000000000000000000000000000000000000000003-0",
      "f", "v"), /* 128 bytes */
    C("XADD", "q",
      "0000000000000000000000000000000000000000000000000000000000000000000000000"
      "0000000000000000000000000000000000000000000000000004-0",
      "f", "v"), /* 127 bytes: the longest id there is */
    C("XCLAIM", "q", "nog", "c", "0", "+5"),
    C("XRANGE", "t", "-", "+"),
    C("XRANGE", "t", "+", "-"),
    C("XRANGE", "t", "2", "2"),
    C("XRANGE", "t", "02", "(7-0"),
    C("XRANGE", "t", "-", "+", "COUNT", "-1"),
    C("XRANGE", "t", "-", "+", "COUNT", "1", "COUNT", "2"),
    C("XRANGE", "t", "(18446744073709551615-18446744073709551615", "+"),
    C("XRANGE", "t", "-", "(0-0"),
    C("XRANGE", "t", "(+", "+"),
    C("XREVRANGE", "t", "(7-0", "(1-0"),
    C("XREVRANGE", "t", "+", "-", "COUNT", "0"),
    C("XADD", "z", "18446744073709551615-18446744073709551615", "f", "v"),
    C("XADD", "z", "*", "f", "v"),
    C("XADD", "z", "18446744073709551615-*", "f", "v"),
    C("XDEL", "z", "18446744073709551615-18446744073709551615"),
    C("XADD", "z", "*", "f", "v"),
    C("XGROUP", "CREATE", "t", "g", "0"),
    C("xreadgroup", "group", "g", "alice", "count", "1", "streams", "t", ">"),
    C("XrAnGe", "t", "-", "+", "count", "1"),
    C("XCLAIM", "t", "g", "bob", "0", "1-0", "justid", "retrycount", "3"),
    C("XPENDING", "t", "g", "idle", "0", "-", "+", "10"),
    C("XPENDING", "t", "g", "IDLE", "0", "-", "+"),
    C("XPENDING", "t", "g", "(+", "+", "10"),
    C("XPENDING", "t", "g", "-", "(0-0", "10"),
    C("XAUTOCLAIM", "t", "g", "bob", "0", "(18446744073709551615-18446744073709551615"),
    C("XAUTOCLAIM", "t", "g", "bob", "0", "+"),
    C("xgroup", "createconsumer", "t", "g", "carol"),
    C("XGROUP", "CREATECONSUMER", "t", "g", "carol", "extra"),
    C("XGROUP", "DESTROY", "t", "g", "extra"),
    C("XGROUP", "DELCONSUMER", "t", "g"),
    C("XGROUP", "SETID", "t", "g"),
    C("XGROUP", "SETID", "t", "g", "0", "ENTRIESREAD"),
    C("XGROUP", "SETID", "t", "g", "0", "ENTRIESREAD", "x"),
    C("XGROUP", "CREATE", "t", "g2", "0", "MKSTREAM", "MKSTREAM"),
    C("XGROUP", "CREATE", "t", "g3", "0", "ENTRIESREAD", "1", "ENTRIESREAD", "2"),
    C("XGROUP"),
    C("XINFO", "GROUPS", "t", "x"),
    C("XINFO", "CONSUMERS", "t"),
    C("XINFO", "FOO", "t"),
    C("XINFO", "STREAM"),
    C("XINFO"),
    C("XDEL", "t"),
    C("XACK", "t"),
    C("XCLAIM", "t", "g", "bob", "0"),
    C("XAUTOCLAIM", "t", "g", "bob", "0"),
    C("XPENDING", "t"),
    C("XRANGE", "t", "-"),
    C("EXISTS"),
    C("DEL"),
    C("FLUSHALL", "SYNC"),
    C("FLUSHALL", "FOO"),
    C("PING", "a", "b"),
    END};

TEST_IMPL(conformance_7_0_parsing) { CONFORM(parsing); }

/* Sorted sets (cmd_zset.c): ZADD and its options, scores as Redis parses and
 * prints them, ordering (score, then member bytes, shorter first), ZSCORE,
 * ZCARD, ZREM emptying a key, ZRANGEBYSCORE bounds and LIMIT, ZRANGE by
 * index, BYSCORE and REV, and their errors. */
static const struct cf_step zset[] = {
    C("ZADD", "z", "1", "a", "0.1", "b", "1767225601000", "c", "inf", "d", "-inf", "e", "1e3", "f",
      "0x10", "g"),
    C("ZRANGE", "z", "0", "-1", "WITHSCORES"),
    C("ZADD", "z", "1", "b", "1", "aa", "1", "", "1", "ab", "1", "\xc3\xa9", "1", "z", "1", "a b"),
    C("ZRANGE", "z", "0", "-1"), C("ZSCORE", "z", "b"), C("ZSCORE", "z", "c"),
    C("ZSCORE", "z", "d"), C("ZSCORE", "z", "e"), C("ZSCORE", "z", "nope"),
    C("ZSCORE", "nokey", "a"), C("ZCARD", "z"), C("ZCARD", "nokey"),
    C("ZADD", "n", "0.1", "x", "-0.25", "y", "2.5e-5", "w", "1e21", "v", "-0", "u", "1e-310", "t"),
    C("ZRANGE", "n", "0", "-1", "WITHSCORES"),
    /* score syntax */
    C("ZADD", "z", " 1", "a"), C("ZADD", "z", "1 ", "a"), C("ZADD", "z", "nan", "a"),
    C("ZADD", "z", "", "a"), C("ZADD", "z", "1e400", "a"), C("ZADD", "z", "1e-400", "a"),
    C("ZADD", "z", "+inf", "a", "x", "b"), C("ZSCORE", "z", "a"),
    /* options and their errors */
    C("ZADD", "z", "1"), C("ZADD", "z", "1", "a", "2"), C("ZADD", "z", "NX"),
    C("ZADD", "z", "NX", "XX"), C("ZADD", "z", "NX", "XX", "1", "a"),
    C("ZADD", "z", "GT", "LT", "1", "a"), C("ZADD", "z", "GT", "NX", "1", "a"),
    C("ZADD", "z", "INCR", "1", "a", "2", "b"), C("ZADD", "z", "FOO", "1", "a"),
    C("ZADD", "o", "5", "a", "3", "a"), C("ZADD", "o", "NX", "9", "a", "1", "b"),
    C("ZADD", "o", "XX", "CH", "7", "a", "8", "c"), C("ZADD", "o", "GT", "CH", "1", "a", "9", "a"),
    C("ZADD", "o", "LT", "3", "a"), C("ZADD", "o", "lt", "ch", "2", "a", "5", "d"),
    C("ZADD", "o", "INCR", "5", "a"), C("ZADD", "o", "INCR", "0.5", "new"),
    C("ZADD", "o", "NX", "INCR", "1", "a"), C("ZADD", "o", "XX", "INCR", "1", "missing"),
    C("ZADD", "o", "GT", "INCR", "-1", "a"), C("ZADD", "o", "INCR", "inf", "d"),
    C("ZADD", "o", "INCR", "-inf", "d"), C("ZADD", "nokey", "XX", "1", "a"),
    C("ZADD", "nokey", "XX", "INCR", "1", "a"), C("EXISTS", "nokey"),
    C("ZRANGE", "o", "0", "-1", "WITHSCORES"),
    /* ZRANGEBYSCORE */
    C("ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES", "LIMIT", "1", "2"),
    C("ZRANGEBYSCORE", "z", "1", "1"), C("ZRANGEBYSCORE", "z", "(1", "+inf"),
    C("ZRANGEBYSCORE", "z", "-inf", "(1"), C("ZRANGEBYSCORE", "z", "(1", "(1"),
    C("ZRANGEBYSCORE", "z", "1", "0"), C("ZRANGEBYSCORE", "z", "1", "1", "LIMIT", "2", "3"),
    C("ZRANGEBYSCORE", "z", "1", "1", "LIMIT", "6", "3"),
    C("ZRANGEBYSCORE", "z", "1", "1", "LIMIT", "7", "3"),
    C("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "2"),
    C("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "0", "-1"),
    C("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "0", "0"),
    C("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "1", "LIMIT", "2", "1"),
    C("ZRANGEBYSCORE", "z", "", "("), C("ZRANGEBYSCORE", "z", " 1", "1e400"),
    C("ZRANGEBYSCORE", "z", "1767225601000", "1767225601000", "withscores"),
    C("ZRANGEBYSCORE", "z", "x", "1"), C("ZRANGEBYSCORE", "z", "(nan", "1"),
    C("ZRANGEBYSCORE", "z", "1", "2", "FOO"), C("ZRANGEBYSCORE", "z", "1", "2", "LIMIT", "1"),
    C("ZRANGEBYSCORE", "z", "1", "2", "LIMIT", "x", "1"), C("ZRANGEBYSCORE", "z", "1", "2", "REV"),
    C("ZRANGEBYSCORE", "nokey", "x", "1"), C("ZRANGEBYSCORE", "nokey", "0", "1"),
    C("ZRANGEBYSCORE", "z", "0"),
    /* ZRANGE */
    C("ZRANGE", "z", "-2", "-1"), C("ZRANGE", "z", "5", "1"), C("ZRANGE", "z", "-100", "1"),
    C("ZRANGE", "z", "12", "100"), C("ZRANGE", "z", "0", "1", "REV", "WITHSCORES"),
    C("ZRANGE", "z", "1", "(1767225601000", "BYSCORE"),
    C("ZRANGE", "z", "+inf", "1", "BYSCORE", "REV", "LIMIT", "1", "3"),
    C("ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"), C("ZRANGE", "z", "0", "-1", "LIMIT", "0", "-1"),
    C("ZRANGE", "z", "0", "1", "withscores", "withscores"),
    C("ZRANGE", "z", "0", "1", "REV", "REV"), C("ZRANGE", "z", "0", "1", "BYSCORE", "BYSCORE"),
    C("ZRANGE", "z", "x", "1"), C("ZRANGE", "z", "0", "1", "FOO"), C("ZRANGE", "nokey", "0", "-1"),
    /* ZREM */
    C("ZREM", "z", "a", "nope", "b", "a"), C("ZREM", "nokey", "a"), C("ZREM", "z"),
    C("ZREM", "n", "x", "y", "w", "v", "u", "t", "gone"), C("EXISTS", "n"), C("ZCARD", "n"),
    C("zadd", "n", "1", "back"), C("ZrangeByScore", "n", "-INF", "+Inf"), C("ZCARD", "z"), END};

TEST_IMPL(conformance_7_0_zset) { CONFORM(zset); }

/* One key name, one type: stream commands on a sorted set and sorted-set
 * commands on a stream answer WRONGTYPE (where Redis checks the type before
 * the arguments, or with valid arguments: see stream_keys_typed in
 * broker_memory.c), in scripts and transactions too; DEL, EXISTS, TYPE and
 * FLUSHALL see both types. */
static const struct cf_step wrongtype[] = {
    C("ZADD", "z", "1", "a"),
    C("XADD", "s", "1-0", "f", "v"),
    C("XGROUP", "CREATE", "s", "g", "0"),
    C("TYPE", "z"),
    C("TYPE", "s"),
    C("TYPE", "nokey"),
    C("XADD", "z", "*", "f", "v"),
    C("XADD", "z", "NOMKSTREAM", "*", "f", "v"),
    C("XADD", "z", "x", "f", "v"),
    C("XADD", "z", "*", "f"),
    C("XLEN", "z"),
    C("XRANGE", "z", "-", "+"),
    C("XRANGE", "z", "x", "+"),
    C("XREVRANGE", "z", "+", "-"),
    C("XDEL", "z", "1-0"),
    C("XDEL", "z", "bad"),
    C("XTRIM", "z", "MAXLEN", "1"),
    C("XTRIM", "z", "FOO", "1"),
    C("XINFO", "STREAM", "z"),
    C("XINFO", "STREAM", "z", "FULL"),
    C("XINFO", "GROUPS", "z"),
    C("XINFO", "CONSUMERS", "z", "g"),
    C("XGROUP", "CREATE", "z", "g", "0"),
    C("XGROUP", "CREATE", "z", "g", "$", "MKSTREAM"),
    C("XGROUP", "CREATE", "z", "g", "x"),
    C("XGROUP", "SETID", "z", "g", "0"),
    C("XGROUP", "DESTROY", "z", "g"),
    C("XGROUP", "CREATECONSUMER", "z", "g", "c"),
    C("XGROUP", "DELCONSUMER", "z", "g", "c"),
    C("XACK", "z", "g", "1-0"),
    C("XACK", "z", "g", "bad"),
    C("XPENDING", "z", "g"),
    C("XPENDING", "z", "g", "-", "+", "10"),
    C("XCLAIM", "z", "g", "c", "0", "1-0"),
    C("XCLAIM", "z", "g", "c", "x", "1-0"),
    C("XAUTOCLAIM", "z", "g", "c", "0", "0"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "z", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "z", ">", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "z", "bad"),
    C("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "z", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "z"),
    C("XPENDING", "s", "g"),
    C("ZADD", "s", "1", "a"),
    C("ZADD", "s", "x", "a"),
    C("ZADD", "s", "NX", "XX", "1", "a"),
    C("ZREM", "s", "a"),
    C("ZCARD", "s"),
    C("ZSCORE", "s", "a"),
    C("ZRANGEBYSCORE", "s", "0", "1"),
    C("ZRANGEBYSCORE", "s", "x", "1"),
    C("ZRANGE", "s", "0", "1"),
    C("ZRANGE", "s", "x", "1"),
    C("ZRANGE", "s", "0", "1", "FOO"),
    C("MULTI"),
    C("ZADD", "s", "1", "a"),
    C("XADD", "z", "*", "f", "v"),
    C("ZADD", "z", "2", "b"),
    C("EXEC"),
    C("EVAL", "return redis.pcall('ZADD', KEYS[1], 1, 'a')", "1", "s"),
    C("EVAL", "return redis.call('XADD', KEYS[1], '*', 'f', 'v')", "1", "z"),
    C("EVAL", "return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')", "1", "z"),
    C("XLEN", "s"),
    C("ZCARD", "z"),
    C("EXISTS", "z", "s", "nokey", "z"),
    C("DEL", "z", "nokey"),
    C("EXISTS", "z"),
    C("TYPE", "z"),
    C("XADD", "z", "1-0", "f", "v"),
    C("TYPE", "z"),
    C("ZADD", "z", "1", "a"),
    C("DEL", "s", "z"),
    C("ZADD", "s", "1", "a"),
    C("TYPE", "s"),
    C("XADD", "s", "*", "f", "v"),
    C("ZADD", "t", "1", "a"),
    C("FLUSHALL"),
    C("EXISTS", "s", "t"),
    C("ZCARD", "s"),
    C("TYPE", "t"),
    END};

TEST_IMPL(conformance_7_0_wrongtype) { CONFORM(wrongtype); }

/* Differences the differential test (test_differential.c) found, kept as a
 * scenario: which fault a command reports first when it has two (Redis
 * parses XPENDING's, XAUTOCLAIM's and XGROUP's arguments before it looks at
 * the key's type; XREADGROUP checks its keys one at a time, type then
 * group; XINFO a missing key before its type); the maximal id in
 * XREADGROUP reads new entries as '>' does; a COUNT XAUTOCLAIM cannot
 * allocate; the node exact trimming empties and keeps; nodes closed at
 * 4096 listpack bytes. */
#define BIG                                                                                    \
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
static const struct cf_step found_by_differential[] = {
    C("SET", "str", "x"),
    C("XADD", "s", "1-1", "f", "v"),
    C("XGROUP", "CREATE", "s", "g", "0"),
    C("XPENDING", "str", "g", "-", "+", "abc"),
    C("XPENDING", "str", "g", "x", "+", "5"),
    C("XAUTOCLAIM", "str", "g", "c", "0", "1-"),
    C("XAUTOCLAIM", "str", "g", "c", "0", "0", "COUNT", "0"),
    C("XAUTOCLAIM", "str", "g", "c", "0", "0", "FOO"),
    C("XGROUP", "CREATE", "str", "g", "$", "ENTRIESREAD", "x"),
    C("XGROUP", "SETID", "str", "g", "$", "junk"),
    C("XREADGROUP", "GROUP", "nogroup", "c", "STREAMS", "s", "str", ">", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "str", ">", ">"),
    C("XINFO", "STREAM", "nokey"),
    C("XINFO", "GROUPS", "str"),
    C("XINFO", "STREAM", "s", "junk"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "18446744073709551615-18446744073709551615"),
    C("XADD", "s", "1-2", "f", "v"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "18446744073709551615-18446744073709551615"),
    C("XPENDING", "s", "g"),
    C("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "1000000"),
    C("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "576460752303423487"),
    C("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "576460752303423488"),
    C("XGROUP", "CREATE", "s", "g2", "0", "ENTRIESREAD", "9223372036854775807"),
    C("XREADGROUP", "GROUP", "g2", "c", "STREAMS", "s", ">"),
    C("XINFO", "GROUPS", "s"),
    C("XADD", "t", "1-1", "f", "v"),
    C("XADD", "t", "1-2", "f", "v"),
    C("XDEL", "t", "1-2"),
    C("XTRIM", "t", "MINID", "1-2"),
    C("XINFO", "STREAM", "t"),
    C("XADD", "t", "1-3", "f", "v"),
    C("XINFO", "STREAM", "t"),
    C("DEL", "t"),
    C("EVAL", "for i = 1, 5 do redis.call('XADD', KEYS[1], '1-' .. i, 'f', ARGV[1]) end", "1", "t",
      BIG BIG),
    C("XINFO", "STREAM", "t"),
    C("XTRIM", "t", "MAXLEN", "~", "1"),
    C("XLEN", "t"),
    END};

TEST_IMPL(conformance_7_0_found_by_differential) { CONFORM(found_by_differential); }

/* The host's delay set (outcome.c, outcome_delay): a failed delivery is
 * acked and parked as ZADD <stream>:delayed:<group> <due ms> <member> in
 * one MULTI, the member the netstrings of delay_member (id, fields,
 * delivery-count, retry-group, original-id). SCRIPT_SWEEP moves what is due
 * (score <= now, lowest first, ties by member bytes, at most count) back onto
 * the stream as new entries with those fields, and removes it from the set;
 * what is not due stays; the set goes when it empties. The last steps: a
 * sweep of the wrong keys, and members that are not netstrings of an id and
 * field pairs, which go to the third key with their scores while a
 * readable member due after them still moves. */
#define DELAYED_5                                          \
  "3:5-04:data1:a13:partition-key2:k114:delivery-count1:2" \
  "11:retry-group7:billing11:original-id3:5-0"
#define DELAYED_6                                                  \
  "3:6-04:data6:x:12:y14:delivery-count1:311:retry-group7:billing" \
  "11:original-id3:4-0"
#define DELAYED_7                                             \
  "3:7-04:data1:c14:delivery-count1:211:retry-group7:billing" \
  "11:original-id3:7-0"
#define DELAYED_8                                                 \
  "3:8-04:data5:later14:delivery-count1:211:retry-group7:billing" \
  "11:original-id3:8-0"
#define DSET "orders:delayed:billing"
#define DBAD "orders:delayed:billing:unreadable"
static const struct cf_step sweep[] = {
    C("XADD", "orders", "5-0", "data", "a", "partition-key", "k1"),
    C("XADD", "orders", "6-0", "data", "x:12:y", "original-id", "4-0"),
    C("XADD", "orders", "7-0", "data", "c"),
    C("XADD", "orders", "8-0", "data", "later"),
    C("XGROUP", "CREATE", "orders", "billing", "0"),
    C("XREADGROUP", "GROUP", "billing", "w", "STREAMS", "orders", ">"),
    C("MULTI"),
    C("ZADD", DSET, "1767225602000", DELAYED_8),
    C("XACK", "orders", "billing", "8-0"),
    C("ZADD", DSET, "1767225601000", DELAYED_7),
    C("XACK", "orders", "billing", "7-0"),
    C("EXEC"),
    C("MULTI"),
    C("ZADD", DSET, "1767225601000", DELAYED_6),
    C("ZADD", DSET, "1767225600000", DELAYED_5),
    C("XACK", "orders", "billing", "5-0", "6-0"),
    C("EXEC"),
    C("ZCARD", DSET),
    C("ZSCORE", DSET, DELAYED_6),
    C("ZRANGEBYSCORE", DSET, "-inf", "1767225601000", "LIMIT", "0", "10"),
    C("EVAL", SCRIPT_SWEEP, "3", DSET, "orders", DBAD, "1767225601000", "2", "billing"),
    C("ZRANGE", DSET, "0", "-1", "WITHSCORES"),
    C("EVAL", SCRIPT_SWEEP, "3", DSET, "orders", DBAD, "1767225601000", "100", "billing"),
    C("EVAL", SCRIPT_SWEEP, "3", DSET, "orders", DBAD, "1767225601000", "100", "billing"),
    C("ZRANGE", DSET, "0", "-1", "WITHSCORES"),
    C("XRANGE", "orders", "(8-0", "+"),
    C("XREADGROUP", "GROUP", "billing", "w", "STREAMS", "orders", ">"),
    C("EVAL", SCRIPT_SWEEP, "3", DSET, "orders", DBAD, "1767225602000", "100", "billing"),
    C("EXISTS", DSET),
    C("XLEN", "orders"),
    C("EVAL", SCRIPT_SWEEP, "3", DSET, "orders", DBAD, "1767225602000", "100", "billing"),
    C("EVAL", SCRIPT_SWEEP, "3", "orders", DSET, DBAD, "1767225602000", "100", "billing"),
    C("ZADD", DSET, "1", "3:9-0"),
    C("ZADD", DSET, "2", "3:9-14:data"),
    C("ZADD", DSET, "3", "3:9-24:data9:too long"),
    C("ZADD", DSET, "4", "-1:x"),
    C("ZADD", DSET, "5", "3:9-34:data2:ok"),
    C("EVAL", SCRIPT_SWEEP, "3", DSET, "orders", DBAD, "1767225602000", "100", "billing"),
    C("ZRANGE", DBAD, "0", "-1", "WITHSCORES"),
    C("EXISTS", DSET),
    C("XLEN", "orders"),
    END};

TEST_IMPL(conformance_7_0_delay_set_sweep) { CONFORM(sweep); }

/* Scripts by SHA, as broker_redis sends the host's: EVAL keeps a script for
 * EVALSHA (the SHA in any case); SCRIPT LOAD, EXISTS and FLUSH; NOSCRIPT for
 * a SHA never seen, one of the wrong length, and after a flush; the argument
 * errors, numkeys checked before the SHA. */
#define SHA_ONE "e0e1f9fabfc9d4800c877a703b823ac0578ff8db" /* return 1 */
#define SHA_CAT "dc8235f4444d746adf3374579406c129fb1f0f0a" /* return KEYS[1] .. ARGV[1] */
static const struct cf_step scripts_by_sha[] = {
    C("EVALSHA", SHA_ONE, "0"),
    C("EVAL", "return 1", "0"),
    C("EVALSHA", SHA_ONE, "0"),
    C("EVALSHA", "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", "0"),
    C("EVALSHA", "e0e1f9", "0"),
    C("EVALSHA", SHA_ONE, "1"),
    C("EVALSHA", SHA_CAT, "2", "k"),
    C("SCRIPT", "LOAD", "return KEYS[1] .. ARGV[1]"),
    C("EVALSHA", SHA_CAT, "1", "k", "v"),
    C("SCRIPT", "EXISTS", SHA_ONE, "DC8235F4444D746ADF3374579406C129FB1F0F0A", "abc"),
    C("SCRIPT", "LOAD", "return +"),
    C("script", "flush"),
    C("SCRIPT", "EXISTS", SHA_ONE, SHA_CAT),
    C("EVALSHA", SHA_ONE, "0"),
    C("EVALSHA", SHA_CAT, "1", "k", "v"),
    C("SCRIPT", "LOAD", "return 1"),
    C("SCRIPT", "FLUSH", "ASYNC"),
    C("SCRIPT", "FLUSH", "SYNC"),
    C("SCRIPT", "FLUSH", "now"),
    C("SCRIPT", "LOAD"),
    C("SCRIPT", "EXISTS"),
    C("SCRIPT", "BOGUS"),
    C("SCRIPT"),
    C("EVALSHA", SHA_ONE),
    C("EVAL", "return redis.call('EVALSHA', '" SHA_ONE "', 0)", "0"),
    C("EVAL", "return redis.call('SCRIPT', 'FLUSH')", "0"),
    END};

TEST_IMPL(conformance_7_0_scripts_by_sha) { CONFORM(scripts_by_sha); }

/* SCRIPT_SWEEP's trim of the retry stream (here RT, group g): nothing to do
 * on an empty one; then of 1..6 (1..4 read, 1 and 3 acked) only 1 goes, as
 * everything from the oldest pending (2) is kept; each ack lets the trim
 * reach the next entry still needed, pending or after the last-delivered-id
 * (5); with nothing pending and nothing undelivered it empties the stream
 * (XINFO STREAM and GROUPS after it). A due delayed entry the sweep adds
 * itself stays (the trim comes first), undelivered; after XGROUP SETID moves
 * the group back, an acked entry after the new last-delivered-id is needed
 * again and stays though a later one is the oldest pending. Without the
 * group on it nothing is trimmed. The source stream is never touched. */
#define RT "s:retry:g"
#define RDSET "s:delayed:g"
#define RDBAD "s:delayed:g:unreadable"
#define RSWEEP(now) C("EVAL", SCRIPT_SWEEP, "3", RDSET, RT, RDBAD, now, "100", "g")
static const struct cf_step retry_trim[] = {
    C("XADD", "s", "1-0", "data", "a"), C("XGROUP", "CREATE", "s", "g", "0"),
    C("XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"), C("XACK", "s", "g", "1-0"),
    C("XGROUP", "CREATE", RT, "g", "0", "MKSTREAM"), RSWEEP("1767225600000"),
    C("XADD", RT, "1-0", "data", "1"), C("XADD", RT, "2-0", "data", "2"),
    C("XADD", RT, "3-0", "data", "3"), C("XADD", RT, "4-0", "data", "4"),
    C("XADD", RT, "5-0", "data", "5"), C("XADD", RT, "6-0", "data", "6"),
    C("XREADGROUP", "GROUP", "g", "a", "COUNT", "4", "STREAMS", RT, ">"),
    C("XACK", RT, "g", "1-0", "3-0"), RSWEEP("1767225600000"), C("XRANGE", RT, "-", "+"),
    RSWEEP("1767225600000"), C("XACK", RT, "g", "2-0"), RSWEEP("1767225600000"),
    C("XRANGE", RT, "-", "+"), C("XACK", RT, "g", "4-0"), RSWEEP("1767225600000"),
    C("XRANGE", RT, "-", "+"), C("XREADGROUP", "GROUP", "g", "a", "STREAMS", RT, ">"),
    RSWEEP("1767225600000"), C("XACK", RT, "g", "5-0", "6-0"), RSWEEP("1767225600000"),
    C("XLEN", RT), C("XINFO", "STREAM", RT), C("XINFO", "GROUPS", RT), C("XPENDING", RT, "g"),
    RSWEEP("1767225600000"),
    /* the sweep's own XADD */
    C("XADD", RT, "7-0", "data", "7"), C("XREADGROUP", "GROUP", "g", "a", "STREAMS", RT, ">"),
    C("XACK", RT, "g", "7-0"), C("ZADD", RDSET, "1", "3:9-04:data1:x"), RSWEEP("1767225600000"),
    C("XRANGE", RT, "-", "+"), RSWEEP("1767225600000"), C("XLEN", RT),
    /* moved back */
    C("XADD", RT, "*", "data", "y"), C("XREADGROUP", "GROUP", "g", "a", "STREAMS", RT, ">"),
    C("XACK", RT, "g", "<id1>"), C("XGROUP", "SETID", RT, "g", "0"), RSWEEP("1767225600000"),
    C("XLEN", RT), C("XREADGROUP", "GROUP", "g", "a", "COUNT", "1", "STREAMS", RT, ">"),
    C("XACK", RT, "g", "<id1>"), RSWEEP("1767225600000"), C("XRANGE", RT, "-", "+"),
    C("XINFO", "GROUPS", RT),
    /* no group: nothing trimmed */
    C("XACK", RT, "g", "<id2>"), C("XGROUP", "DESTROY", RT, "g"), RSWEEP("1767225600000"),
    C("XLEN", RT), C("XLEN", "s"), C("XRANGE", "s", "-", "+"), END};

TEST_IMPL(conformance_7_0_retry_stream_trim) { CONFORM(retry_trim); }

/* SCRIPT_PRUNE over a stream and its retry stream, each key on its own:
 * `half` has an entry pending on the stream and nothing on the retry stream,
 * so it goes from the retry stream only; `crashed` has one pending on the
 * retry stream and stays there; `gone` (retry stream only, idle, nothing
 * pending) goes; `leased` stays. A missing key or group is skipped; a key of
 * another type is the script's error. */
static const struct cf_step prune_retry[] = {
    C("XADD", "s", "1-0", "f", "1"),
    C("XGROUP", "CREATE", "s", "g", "0"),
    C("XGROUP", "CREATE", RT, "g", "0", "MKSTREAM"),
    C("XADD", RT, "1-0", "f", "1"),
    C("XREADGROUP", "GROUP", "g", "half", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "crashed", "STREAMS", RT, ">"),
    C("XGROUP", "CREATECONSUMER", RT, "g", "half"),
    C("XGROUP", "CREATECONSUMER", RT, "g", "gone"),
    C("XGROUP", "CREATECONSUMER", RT, "g", "leased"),
    C("XGROUP", "CREATECONSUMER", "s", "g", "leased"),
    C("SET", "luastream:consumer:{s}:g:leased", "token", "PX", "60000"),
    ADV(1100),
    C("EVAL", SCRIPT_PRUNE, "2", "s", RT, "g", "1000", "luastream:consumer:{s}:g:"),
    C("XINFO", "CONSUMERS", "s", "g"),
    C("XINFO", "CONSUMERS", RT, "g"),
    C("XPENDING", "s", "g"),
    C("XPENDING", RT, "g"),
    C("EVAL", SCRIPT_PRUNE, "2", "s", RT, "g", "1000", "luastream:consumer:{s}:g:"),
    C("EVAL", SCRIPT_PRUNE, "2", "s", "s:retry:nokey", "g", "0", "luastream:consumer:{s}:g:"),
    C("EVAL", SCRIPT_PRUNE, "2", "s", RT, "nog", "0", "luastream:consumer:{s}:nog:"),
    C("SET", "str", "x"),
    C("EVAL", SCRIPT_PRUNE, "2", "s", "str", "g", "0", "luastream:consumer:{s}:g:"),
    C("XINFO", "CONSUMERS", "s", "g"),
    END};

TEST_IMPL(conformance_7_0_prune_both_keys) { CONFORM(prune_retry); }

/* ==== 8.4.0: memory broker vs the spec ==== */

/* Four entries, group g from 0; alice reads 1-0 and 2-0 at t=0. */
#define FOUR_ENTRIES                                                    \
  C("XADD", "s", "1-0", "f", "1"), C("XADD", "s", "2-0", "f", "2"),     \
      C("XADD", "s", "3-0", "f", "3"), C("XADD", "s", "4-0", "f", "4"), \
      C("XGROUP", "CREATE", "s", "g", "0"),                             \
      C("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">")
#define FOUR_ENTRIES_LINES                                                   \
  "XADD s 1-0 f 1 -> 1-0", "XADD s 2-0 f 2 -> 2-0", "XADD s 3-0 f 3 -> 3-0", \
      "XADD s 4-0 f 4 -> 4-0", "XGROUP CREATE s g 0 -> +OK",                 \
      "XREADGROUP GROUP g alice COUNT 2 STREAMS s > -> [[s,[[1-0,[f,1]],[2-0,[f,2]]]]]"

/* CLAIM selection and order, the 4-element entries: candidates are
 * pending entries idle >= min-idle-time of any owner (the caller's own
 * too), oldest delivery first, ties in id order, then new entries; claimed
 * entries carry idle and the count before this delivery, new ones 0 and 0,
 * both integers; a history stream ignores CLAIM. */
static const struct cf_step claim_order[] = {
    FOUR_ENTRIES,
    ADV(100),
    C("XREADGROUP", "GROUP", "g", "bob", "COUNT", "1", "STREAMS", "s", ">"),
    ADV(50),
    C("XCLAIM", "s", "g", "alice", "0", "2-0", "IDLE", "500", "JUSTID"),
    C("XREADGROUP", "GROUP", "g", "carol", "CLAIM", "60", "STREAMS", "s", ">"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    ADV(10),
    C("XREADGROUP", "GROUP", "g", "carol", "CLAIM", "0", "COUNT", "3", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "carol", "CLAIM", "0", "STREAMS", "s", "0"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    END};

TEST_IMPL(conformance_8_4_claim_selection_and_order_s7_1) {
  EXPECT84(claim_order, FOUR_ENTRIES_LINES, "advance 100 ms",
           "XREADGROUP GROUP g bob COUNT 1 STREAMS s > -> [[s,[[3-0,[f,3]]]]]", "advance 50 ms",
           "XCLAIM s g alice 0 2-0 IDLE 500 JUSTID -> [2-0]",
           /* 2-0 idle 500, 1-0 idle 150; 3-0 idle 50 < 60; then the new 4-0 */
           "XREADGROUP GROUP g carol CLAIM 60 STREAMS s > -> "
           "[[s,[[2-0,[f,2],:500,:1],[1-0,[f,1],:150,:1],[4-0,[f,4],:0,:0]]]]",
           "XPENDING s g - + 10 -> "
           "[[1-0,carol,:0,:2],[2-0,carol,:0,:2],[3-0,bob,:50,:1],[4-0,carol,:0,:1]]",
           "advance 10 ms",
           /* 3-0 oldest; 1-0, 2-0, 4-0 delivered together: id order */
           "XREADGROUP GROUP g carol CLAIM 0 COUNT 3 STREAMS s > -> "
           "[[s,[[3-0,[f,3],:60,:1],[1-0,[f,1],:10,:2],[2-0,[f,2],:10,:2]]]]",
           "XREADGROUP GROUP g carol CLAIM 0 STREAMS s 0 -> "
           "[[s,[[1-0,[f,1]],[2-0,[f,2]],[3-0,[f,3]],[4-0,[f,4]]]]]",
           "XPENDING s g - + 10 -> "
           "[[1-0,carol,:0,:4],[2-0,carol,:0,:4],[3-0,carol,:0,:3],[4-0,carol,:0,:2]]");
}

/* CLAIM: COUNT is shared (claimed entries take it first) and per stream; each
 * stream is handled on its own. */
static const struct cf_step claim_count[] = {
    FOUR_ENTRIES,
    C("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">"),
    C("XADD", "s", "5-0", "f", "5"),
    C("XADD", "s", "6-0", "f", "6"),
    ADV(100),
    C("XREADGROUP", "GROUP", "g", "bob", "COUNT", "2", "CLAIM", "50", "STREAMS", "s", ">"),
    ADV(100),
    C("XREADGROUP", "GROUP", "g", "carol", "COUNT", "4", "CLAIM", "50", "STREAMS", "s", ">"),
    C("XADD", "u", "1-0", "f", "u1"),
    C("XADD", "v", "1-0", "f", "v1"),
    C("XGROUP", "CREATE", "u", "g", "0"),
    C("XGROUP", "CREATE", "v", "g", "0"),
    C("XREADGROUP", "GROUP", "g", "dave", "STREAMS", "u", "v", ">", ">"),
    C("XADD", "u", "2-0", "f", "u2"),
    C("XADD", "v", "2-0", "f", "v2"),
    ADV(100),
    C("XREADGROUP", "GROUP", "g", "erin", "COUNT", "1", "CLAIM", "50", "STREAMS", "u", "v", ">",
      ">"),
    C("XREADGROUP", "GROUP", "g", "erin", "CLAIM", "50", "STREAMS", "u", "v", ">", ">"),
    END};

TEST_IMPL(conformance_8_4_claim_shared_count_s7_1) {
  EXPECT84(claim_count, FOUR_ENTRIES_LINES,
           "XREADGROUP GROUP g alice COUNT 1 STREAMS s > -> [[s,[[3-0,[f,3]]]]]",
           "XADD s 5-0 f 5 -> 5-0", "XADD s 6-0 f 6 -> 6-0", "advance 100 ms",
           /* 3 claimable, COUNT 2: two claimed, nothing new */
           "XREADGROUP GROUP g bob COUNT 2 CLAIM 50 STREAMS s > -> "
           "[[s,[[1-0,[f,1],:100,:1],[2-0,[f,2],:100,:1]]]]",
           "advance 100 ms",
           /* 3 claimable + new ones, COUNT 4: three claimed then one new */
           "XREADGROUP GROUP g carol COUNT 4 CLAIM 50 STREAMS s > -> "
           "[[s,[[3-0,[f,3],:200,:1],[1-0,[f,1],:100,:2],[2-0,[f,2],:100,:2],[4-0,[f,4],:0,:0]]]]",
           "XADD u 1-0 f u1 -> 1-0", "XADD v 1-0 f v1 -> 1-0", "XGROUP CREATE u g 0 -> +OK",
           "XGROUP CREATE v g 0 -> +OK",
           "XREADGROUP GROUP g dave STREAMS u v > > -> [[u,[[1-0,[f,u1]]]],[v,[[1-0,[f,v1]]]]]",
           "XADD u 2-0 f u2 -> 2-0", "XADD v 2-0 f v2 -> 2-0", "advance 100 ms",
           /* COUNT 1 per stream: each stream's claimed entry */
           "XREADGROUP GROUP g erin COUNT 1 CLAIM 50 STREAMS u v > > -> "
           "[[u,[[1-0,[f,u1],:100,:1]]],[v,[[1-0,[f,v1],:100,:1]]]]",
           "XREADGROUP GROUP g erin CLAIM 50 STREAMS u v > > -> "
           "[[u,[[2-0,[f,u2],:0,:0]]],[v,[[2-0,[f,v2],:0,:0]]]]");
}

/* CLAIM: claiming adds 1 to the count, the reply shows the count
 * before; the same id can come twice in one reply (claimed, then new after
 * SETID moved back, which resets the count to 1); XCLAIM FORCE entries are
 * candidates, acked and DELCONSUMER-dropped ones are not. */
static const struct cf_step claim_counts[] = {
    C("XADD", "s", "1-0", "f", "1"),
    C("XGROUP", "CREATE", "s", "g", "0"),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    ADV(10),
    C("XREADGROUP", "GROUP", "g", "bob", "CLAIM", "10", "STREAMS", "s", ">"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    ADV(10),
    C("XREADGROUP", "GROUP", "g", "bob", "CLAIM", "10", "STREAMS", "s", ">"),
    ADV(10),
    C("XREADGROUP", "GROUP", "g", "alice", "CLAIM", "10", "STREAMS", "s", ">"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("XADD", "s", "2-0", "f", "2"),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
    C("XGROUP", "SETID", "s", "g", "0"),
    ADV(100),
    C("XREADGROUP", "GROUP", "g", "bob", "CLAIM", "50", "STREAMS", "s", ">"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("XACK", "s", "g", "1-0"),
    C("XADD", "s", "3-0", "f", "3"),
    C("XCLAIM", "s", "g", "carol", "0", "3-0", "FORCE", "JUSTID"),
    ADV(100),
    C("XREADGROUP", "GROUP", "g", "dave", "CLAIM", "50", "STREAMS", "s", ">"),
    C("XGROUP", "DELCONSUMER", "s", "g", "dave"),
    ADV(100),
    C("XREADGROUP", "GROUP", "g", "erin", "CLAIM", "0", "STREAMS", "s", ">"),
    END};

TEST_IMPL(conformance_8_4_claim_delivery_counts_s7_2) {
  EXPECT84(
      claim_counts, "XADD s 1-0 f 1 -> 1-0", "XGROUP CREATE s g 0 -> +OK",
      "XREADGROUP GROUP g alice STREAMS s > -> [[s,[[1-0,[f,1]]]]]",
      "XPENDING s g - + 10 -> [[1-0,alice,:0,:1]]", "advance 10 ms",
      "XREADGROUP GROUP g bob CLAIM 10 STREAMS s > -> [[s,[[1-0,[f,1],:10,:1]]]]",
      "XPENDING s g - + 10 -> [[1-0,bob,:0,:2]]", "advance 10 ms",
      "XREADGROUP GROUP g bob CLAIM 10 STREAMS s > -> [[s,[[1-0,[f,1],:10,:2]]]]", "advance 10 ms",
      "XREADGROUP GROUP g alice CLAIM 10 STREAMS s > -> [[s,[[1-0,[f,1],:10,:3]]]]",
      "XPENDING s g - + 10 -> [[1-0,alice,:0,:4]]", "XADD s 2-0 f 2 -> 2-0",
      "XREADGROUP GROUP g alice STREAMS s > -> [[s,[[2-0,[f,2]]]]]", "XGROUP SETID s g 0 -> +OK",
      "advance 100 ms",
      "XREADGROUP GROUP g bob CLAIM 50 STREAMS s > -> "
      "[[s,[[1-0,[f,1],:100,:4],[2-0,[f,2],:100,:1],[1-0,[f,1],:0,:0],[2-0,[f,2],:0,:0]]]]",
      "XPENDING s g - + 10 -> [[1-0,bob,:0,:1],[2-0,bob,:0,:1]]", "XACK s g 1-0 -> :1",
      "XADD s 3-0 f 3 -> 3-0", "XCLAIM s g carol 0 3-0 FORCE JUSTID -> [3-0]", "advance 100 ms",
      /* 2-0 and 3-0 were delivered at the same time: id order; 3-0 is
            * also new to the group */
      "XREADGROUP GROUP g dave CLAIM 50 STREAMS s > -> "
      "[[s,[[2-0,[f,2],:100,:1],[3-0,[f,3],:100,:1],[3-0,[f,3],:0,:0]]]]",
      "XGROUP DELCONSUMER s g dave -> :2", "advance 100 ms",
      "XREADGROUP GROUP g erin CLAIM 0 STREAMS s > -> nil");
}

/* CLAIM: NOACK applies to new entries only; entries gone from the
 * stream are never returned. */
static const struct cf_step claim_noack[] = {
    FOUR_ENTRIES,
    ADV(100),
    C("XREADGROUP", "GROUP", "g", "bob", "NOACK", "CLAIM", "50", "STREAMS", "s", ">"),
    C("XPENDING", "s", "g", "-", "+", "10"),
    C("XINFO", "GROUPS", "s"),
    ADV(100),
    C("XTRIM", "s", "MAXLEN", "0"),
    C("XREADGROUP", "GROUP", "g", "carol", "CLAIM", "50", "STREAMS", "s", ">"),
    END};

TEST_IMPL(conformance_8_4_claim_noack_and_deleted_s7_2_s7_4) {
  EXPECT84(claim_noack, FOUR_ENTRIES_LINES, "advance 100 ms",
           "XREADGROUP GROUP g bob NOACK CLAIM 50 STREAMS s > -> "
           "[[s,[[1-0,[f,1],:100,:1],[2-0,[f,2],:100,:1],[3-0,[f,3],:0,:0],[4-0,[f,4],:0,:0]]]]",
           "XPENDING s g - + 10 -> [[1-0,bob,:0,:2],[2-0,bob,:0,:2]]",
           "XINFO GROUPS s -> "
           "[[name,g,consumers,:2,pending,:2,last-delivered-id,4-0,entries-read,:4,lag,:0]]",
           "advance 100 ms", "XTRIM s MAXLEN 0 -> :4",
           "XREADGROUP GROUP g carol CLAIM 50 STREAMS s > -> nil");
}

/* BLOCK with CLAIM: immediate when something is claimable, woken by new
 * entries, woken when a pending entry turns claimable, nil on timeout; of
 * two readers the first takes the new entry, the second claims it later. */
static const struct cf_step claim_block[] = {
    C("XADD", "s", "1-0", "f", "1"),
    C("XGROUP", "CREATE", "s", "g", "0"),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
    S1("XREADGROUP", "GROUP", "g", "bob", "BLOCK", "1000", "CLAIM", "0", "STREAMS", "s", ">"),
    W1,
    S1("XREADGROUP", "GROUP", "g", "bob", "BLOCK", "5000", "CLAIM", "1000", "STREAMS", "s", ">"),
    ADV(100),
    C("XADD", "s", "2-0", "f", "2"),
    W1,
    S1("XREADGROUP", "GROUP", "g", "carol", "BLOCK", "5000", "CLAIM", "1000", "STREAMS", "s", ">"),
    ADV(899),
    B1,
    ADV(1),
    W1,
    S1("XREADGROUP", "GROUP", "g", "carol", "BLOCK", "50", "CLAIM", "5000", "STREAMS", "s", ">"),
    ADV(50),
    W1,
    C("XGROUP", "CREATE", "u", "g", "$", "MKSTREAM"),
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "CLAIM", "100", "STREAMS", "u", ">"),
    S2("XREADGROUP", "GROUP", "g", "two", "BLOCK", "0", "CLAIM", "100", "STREAMS", "u", ">"),
    C("XADD", "u", "1-0", "f", "1"),
    W1,
    B2,
    ADV(100),
    W2,
    END};

TEST_IMPL(conformance_8_4_claim_block_s7_5) {
  EXPECT84(claim_block, "XADD s 1-0 f 1 -> 1-0", "XGROUP CREATE s g 0 -> +OK",
           "XREADGROUP GROUP g alice STREAMS s > -> [[s,[[1-0,[f,1]]]]]",
           "[c1] XREADGROUP GROUP g bob BLOCK 1000 CLAIM 0 STREAMS s > -> (sent)",
           "[c1] reply -> [[s,[[1-0,[f,1],:0,:1]]]]",
           "[c1] XREADGROUP GROUP g bob BLOCK 5000 CLAIM 1000 STREAMS s > -> (sent)",
           "advance 100 ms", "XADD s 2-0 f 2 -> 2-0", "[c1] reply -> [[s,[[2-0,[f,2],:0,:0]]]]",
           "[c1] XREADGROUP GROUP g carol BLOCK 5000 CLAIM 1000 STREAMS s > -> (sent)",
           "advance 899 ms", "[c1] (blocked)", "advance 1 ms",
           /* 1-0 was delivered at 0, 2-0 at 100 */
           "[c1] reply -> [[s,[[1-0,[f,1],:1000,:2]]]]",
           "[c1] XREADGROUP GROUP g carol BLOCK 50 CLAIM 5000 STREAMS s > -> (sent)",
           "advance 50 ms", "[c1] reply -> nil", "XGROUP CREATE u g $ MKSTREAM -> +OK",
           "[c1] XREADGROUP GROUP g one BLOCK 0 CLAIM 100 STREAMS u > -> (sent)",
           "[c2] XREADGROUP GROUP g two BLOCK 0 CLAIM 100 STREAMS u > -> (sent)",
           "XADD u 1-0 f 1 -> 1-0", "[c1] reply -> [[u,[[1-0,[f,1],:0,:0]]]]", "[c2] (blocked)",
           "advance 100 ms", "[c2] reply -> [[u,[[1-0,[f,1],:100,:1]]]]");
}

/* CLAIM errors and parsing (CLAIM anywhere before STREAMS, the last one wins),
 * the 7.2+ error texts, BLOCK in a script never blocks. */
static const struct cf_step errors84[] = {
    C("XADD", "s", "1-0", "f", "1"),
    C("XGROUP", "CREATE", "s", "g", "0"),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "CLAIM", "+10", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "CLAIM", "-0", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "CLAIM", "5.5", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "CLAIM", "10e", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "CLAIM", "-5", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "bob", "CLAIM", "100000", "CLAIM", "0", "STREAMS", "s", ">"),
    C("XREADGROUP", "CLAIM", "0", "COUNT", "1", "GROUP", "g", "carol", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "nog", "c", "CLAIM", "0", "STREAMS", "s", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "t", ">"),
    C("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "+"),
    C("EVAL", "return redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'BLOCK', 0, 'STREAMS', 's', '>')",
      "0"),
    C("INFO", "server"),
    END};

TEST_IMPL(conformance_8_4_errors_s6_1_s7_s16) {
  EXPECT84(errors84, "XADD s 1-0 f 1 -> 1-0", "XGROUP CREATE s g 0 -> +OK",
           "XREADGROUP GROUP g alice STREAMS s > -> [[s,[[1-0,[f,1]]]]]",
           "XREADGROUP GROUP g c CLAIM +10 STREAMS s > -> -ERR min-idle-time is not an integer",
           "XREADGROUP GROUP g c CLAIM -0 STREAMS s > -> -ERR min-idle-time is not an integer",
           "XREADGROUP GROUP g c CLAIM 5.5 STREAMS s > -> -ERR min-idle-time is not an integer",
           "XREADGROUP GROUP g c CLAIM 10e STREAMS s > -> -ERR min-idle-time is not an integer",
           "XREADGROUP GROUP g c CLAIM -5 STREAMS s > -> "
           "-ERR min-idle-time must be a positive integer",
           "XREADGROUP GROUP g bob CLAIM 100000 CLAIM 0 STREAMS s > -> "
           "[[s,[[1-0,[f,1],:0,:1]]]]",
           "XREADGROUP CLAIM 0 COUNT 1 GROUP g carol STREAMS s > -> [[s,[[1-0,[f,1],:0,:2]]]]",
           "XREADGROUP GROUP nog c CLAIM 0 STREAMS s > -> "
           "-NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option",
           "XREADGROUP GROUP g c STREAMS s t > -> -ERR Unbalanced 'xreadgroup' list of streams: "
           "for each stream key an ID or '>' must be specified.",
           "XREADGROUP GROUP g c STREAMS s + -> -ERR The + ID is meaningless in the context of "
           "XREADGROUP: you want to read the history of this consumer by specifying a proper "
           "ID, or use the > ID to get new messages. The + ID would just return an empty result "
           "set.",
           "EVAL return redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'BLOCK', 0, 'STREAMS', 's', "
           "'>') 0 -> nil",
           "INFO server -> <redis_version 8.4>");
}

/* On 8.4 every XREADGROUP (one that gets nil or blocks
 * too), XCLAIM and XAUTOCLAIM creates its consumer; on 7.0 only one that is
 * served or claims (checked live in the 7.0 tests above: nobody, carol,
 * Bob, one). XINFO CONSUMERS on 7.2+ has `inactive` (-1: never
 * delivered), and `idle` counts from the last attempt. */
static const struct cf_step consumers84[] = {
    C("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
    C("XREADGROUP", "GROUP", "g", "reader", "STREAMS", "s", ">"),
    S1("XREADGROUP", "GROUP", "g", "blocker", "BLOCK", "50", "STREAMS", "s", ">"),
    ADV(50),
    W1,
    C("XADD", "s", "1-0", "f", "1"),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
    C("XCLAIM", "s", "g", "claimer", "60000", "1-0"),
    C("XAUTOCLAIM", "s", "g", "auto", "60000", "0"),
    C("XINFO", "CONSUMERS", "s", "g"),
    ADV(100),
    C("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
    ADV(30),
    C("XREADGROUP", "GROUP", "g", "blocker", "STREAMS", "s", "0"),
    ADV(20),
    C("XINFO", "CONSUMERS", "s", "g"),
    END};

TEST_IMPL(conformance_8_4_consumer_creation_and_inactive_s6_3_s13_s16) {
  EXPECT84(consumers84, "XGROUP CREATE s g $ MKSTREAM -> +OK",
           "XREADGROUP GROUP g reader STREAMS s > -> nil",
           "[c1] XREADGROUP GROUP g blocker BLOCK 50 STREAMS s > -> (sent)", "advance 50 ms",
           "[c1] reply -> nil", "XADD s 1-0 f 1 -> 1-0",
           "XREADGROUP GROUP g alice STREAMS s > -> [[s,[[1-0,[f,1]]]]]",
           "XCLAIM s g claimer 60000 1-0 -> []", "XAUTOCLAIM s g auto 60000 0 -> [0-0,[],[]]",
           "XINFO CONSUMERS s g -> [[name,alice,pending,:1,idle,:0,inactive,:0],"
           "[name,auto,pending,:0,idle,:0,inactive,:-1],"
           "[name,blocker,pending,:0,idle,:50,inactive,:-1],"
           "[name,claimer,pending,:0,idle,:0,inactive,:-1],"
           "[name,reader,pending,:0,idle,:50,inactive,:-1]]",
           "advance 100 ms", "XREADGROUP GROUP g alice STREAMS s > -> nil", "advance 30 ms",
           "XREADGROUP GROUP g blocker STREAMS s 0 -> [[s,[]]]", "advance 20 ms",
           "XINFO CONSUMERS s g -> [[name,alice,pending,:1,idle,:50,inactive,:150],"
           "[name,auto,pending,:0,idle,:150,inactive,:-1],"
           "[name,blocker,pending,:0,idle,:20,inactive,:-1],"
           "[name,claimer,pending,:0,idle,:150,inactive,:-1],"
           "[name,reader,pending,:0,idle,:200,inactive,:-1]]");
}

/* A blocked reader on 8.4 runs its whole command again (every
 * servable stream, no 1000 cap), keeps blocking after an add-then-delete,
 * and gets the plain NOGROUP text when the key or group goes. The 7.0
 * behaviour of each is checked live above (block, block_more). */
static const struct cf_step block84[] = {
    C("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
    C("XGROUP", "CREATE", "t", "g", "$", "MKSTREAM"),
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", "t", ">", ">"),
    C("MULTI"),
    C("XADD", "t", "1-0", "f", "t1"),
    C("XADD", "s", "1-0", "f", "s1"),
    C("EXEC"),
    W1,
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", ">"),
    C("MULTI"),
    C("XADD", "s", "2-0", "f", "s2"),
    C("XDEL", "s", "2-0"),
    C("EXEC"),
    B1,
    C("XGROUP", "DESTROY", "s", "g"),
    W1,
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "t", ">"),
    C("DEL", "t"),
    W1,
    C("XGROUP", "CREATE", "s", "g", "$"),
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", ">"),
    C("FLUSHALL"),
    W1,
    C("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
    S1("XREADGROUP", "GROUP", "g", "one", "BLOCK", "0", "STREAMS", "s", ">"),
    C("EVAL", "for i = 1, 1005 do redis.call('XADD', KEYS[1], i .. '-0', 'f', i) end", "1", "s"),
    W1,
    C("XPENDING", "s", "g"),
    END};

TEST_IMPL(conformance_8_4_block_wake_s6_5_s16) {
  EXPECT84(block84, "XGROUP CREATE s g $ MKSTREAM -> +OK", "XGROUP CREATE t g $ MKSTREAM -> +OK",
           "[c1] XREADGROUP GROUP g one BLOCK 0 STREAMS s t > > -> (sent)", "MULTI -> +OK",
           "XADD t 1-0 f t1 -> +QUEUED", "XADD s 1-0 f s1 -> +QUEUED", "EXEC -> [1-0,1-0]",
           "[c1] reply -> [[s,[[1-0,[f,s1]]]],[t,[[1-0,[f,t1]]]]]",
           "[c1] XREADGROUP GROUP g one BLOCK 0 STREAMS s > -> (sent)", "MULTI -> +OK",
           "XADD s 2-0 f s2 -> +QUEUED", "XDEL s 2-0 -> +QUEUED", "EXEC -> [2-0,:1]",
           "[c1] (blocked)", "XGROUP DESTROY s g -> :1",
           "[c1] reply -> -NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with "
           "GROUP option",
           "[c1] XREADGROUP GROUP g one BLOCK 0 STREAMS t > -> (sent)", "DEL t -> :1",
           "[c1] reply -> -NOGROUP No such key 't' or consumer group 'g' in XREADGROUP with "
           "GROUP option",
           "XGROUP CREATE s g $ -> +OK",
           "[c1] XREADGROUP GROUP g one BLOCK 0 STREAMS s > -> (sent)", "FLUSHALL -> +OK",
           "[c1] reply -> -NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with "
           "GROUP option",
           "XGROUP CREATE s g $ MKSTREAM -> +OK",
           "[c1] XREADGROUP GROUP g one BLOCK 0 STREAMS s > -> (sent)",
           "EVAL for i = 1, 1005 do redis.call('XADD', KEYS[1], i .. '-0', 'f', i) end 1 s -> nil",
           "[c1] reply -> [[s,[[1-0,[f,1]],[2-0,[f,2]],...",
           "XPENDING s g -> [:1005,1-0,1005-0,[[one,1005]]]");
}

/* Lag on 8.x: an emptied stream lags 0, a group behind the first entry
 * lags by the length, ENTRIESREAD is capped at entries-added (8.2.2); 7.0
 * gives 3 and 4 where this gives 0 and 1 (checked live in lag above). */
static const struct cf_step lag84[] = {
    C("EVAL", "for i = 1, 5 do redis.call('XADD', KEYS[1], i .. '-0', 'f', i) end", "1", "s"),
    C("XGROUP", "CREATE", "s", "a", "0"),
    C("XGROUP", "CREATE", "s", "e", "0", "ENTRIESREAD", "9"),
    C("XINFO", "GROUPS", "s"),
    C("XREADGROUP", "GROUP", "a", "x", "COUNT", "2", "STREAMS", "s", ">"),
    C("XINFO", "GROUPS", "s"),
    C("XTRIM", "s", "MAXLEN", "0"),
    C("XINFO", "GROUPS", "s"),
    C("XADD", "s", "6-0", "f", "6"),
    C("XINFO", "GROUPS", "s"),
    END};

TEST_IMPL(conformance_8_4_lag_s13) {
  EXPECT84(lag84,
           "EVAL for i = 1, 5 do redis.call('XADD', KEYS[1], i .. '-0', 'f', i) end 1 s -> nil",
           "XGROUP CREATE s a 0 -> +OK", "XGROUP CREATE s e 0 ENTRIESREAD 9 -> +OK",
           "XINFO GROUPS s -> "
           "[[name,a,consumers,:0,pending,:0,last-delivered-id,0-0,entries-read,nil,lag,:5],"
           "[name,e,consumers,:0,pending,:0,last-delivered-id,0-0,entries-read,:5,lag,:5]]",
           "XREADGROUP GROUP a x COUNT 2 STREAMS s > -> [[s,[[1-0,[f,1]],[2-0,[f,2]]]]]",
           "XINFO GROUPS s -> "
           "[[name,a,consumers,:1,pending,:2,last-delivered-id,2-0,entries-read,:2,lag,:3],"
           "[name,e,consumers,:0,pending,:0,last-delivered-id,0-0,entries-read,:5,lag,:5]]",
           "XTRIM s MAXLEN 0 -> :5",
           "XINFO GROUPS s -> "
           "[[name,a,consumers,:1,pending,:2,last-delivered-id,2-0,entries-read,:2,lag,:0],"
           "[name,e,consumers,:0,pending,:0,last-delivered-id,0-0,entries-read,:5,lag,:0]]",
           "XADD s 6-0 f 6 -> 6-0",
           "XINFO GROUPS s -> "
           "[[name,a,consumers,:1,pending,:2,last-delivered-id,2-0,entries-read,:2,lag,:1],"
           "[name,e,consumers,:0,pending,:0,last-delivered-id,0-0,entries-read,:5,lag,:1]]");
}
