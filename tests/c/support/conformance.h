/* conformance: runs one scenario against two brokers and compares what a
 * client observes.
 *
 * A scenario is a list of steps (commands on up to CF_NCONN connections,
 * sends that may block, waits, "advance N ms"). A side is a broker plus the
 * means to move its time: the in-memory broker on a virtual clock
 * (cf_memory), or broker_redis on a libuv loop against a real server
 * (cf_redis), where "advance" is a real wait. cf_transcript runs the steps
 * on a side from a clean state and renders every reply as one normalised
 * line, so two sides can be compared line by line (cf_expect_same) or one
 * side against a literal transcript (cf_expect_lines).
 *
 * Rendering (the compact form of test_broker_memory.c): a bulk as its text,
 * :n integer, +status, -error, nil, [a,b] array. Normalised:
 * - ids generated from the clock (ms part >= 10^12) become <id1>, <id2> ...
 *   in order of first appearance; explicit ids such as 1-0 stay;
 * - idle times (XPENDING's third field, XINFO CONSUMERS idle/inactive, the
 *   third field of CLAIM entries and of the host's read scripts) become a
 *   bucket "~Ns" (whole seconds, rounded down), unless the transcript is
 *   exact; negative ones (-1: never) stay exact;
 * - an INFO reply becomes <redis_version x.y>;
 * - an "ERR unknown command 'NAME'" error ends after the name, with " ...":
 *   the memory broker points at the real-server mode where Redis lists the
 *   arguments;
 * - XINFO STREAM's radix-tree-nodes becomes <approx> once the stream has
 *   more than one node (the memory broker estimates it, see stream.h).
 * Arguments may hold "<idN>" (the id the transcript named so) and "<now-N>"
 * (the side's Unix ms minus N); the line shows them as written. */
#ifndef LUASTREAM_TEST_CONFORMANCE_H
#define LUASTREAM_TEST_CONFORMANCE_H

#include <stdbool.h>

#define CF_NCONN 3
#define CF_MAXARGS 48

enum cf_op {
  CF_END = 0,
  CF_CMD,     /* send and wait for the reply */
  CF_SEND,    /* send; the reply is read by CF_WAIT or CF_BLOCKED later */
  CF_WAIT,    /* the reply to the connection's CF_SEND (waits on a real server) */
  CF_BLOCKED, /* is the connection's CF_SEND still unanswered? */
  CF_ADVANCE, /* ms pass: the virtual clock moves, or a real wait */
};

struct cf_step {
  enum cf_op op;
  int conn;                     /* 0 .. CF_NCONN-1 */
  long long ms;                 /* CF_ADVANCE */
  const char *argv[CF_MAXARGS]; /* NULL-terminated */
};

#define CF_C(c, ...)                                   \
  {                                                    \
    .op = CF_CMD, .conn = (c), .argv = { __VA_ARGS__ } \
  }
#define CF_S(c, ...)                                    \
  {                                                     \
    .op = CF_SEND, .conn = (c), .argv = { __VA_ARGS__ } \
  }
#define CF_W(c) \
  { .op = CF_WAIT, .conn = (c) }
#define CF_B(c) \
  { .op = CF_BLOCKED, .conn = (c) }
#define CF_A(n) \
  { .op = CF_ADVANCE, .ms = (n) }

struct cf_side;

/* A fresh in-memory broker (version "7.0.15", "8.4.0" ...) for every
 * transcript; its wall clock starts at the real time, so its generated ids
 * look like a server's. */
struct cf_side *cf_memory(const char *version);
/* broker_redis on its own loop; every transcript starts with FLUSHALL and
 * new connections. */
struct cf_side *cf_redis(const char *url);
void cf_side_free(struct cf_side *side);
const char *cf_side_name(const struct cf_side *side);

/* Runs steps (ending with an op of CF_END) and returns the transcript, one
 * '\n'-terminated line per step (malloc'd). exact: idle times as they are. */
char *cf_transcript(struct cf_side *side, const struct cf_step *steps, bool exact);

/* Fails the test at the first line that differs, naming the scenario, the
 * step and both lines (both transcripts go to stderr). CF_DUMP=1 in the
 * environment prints every transcript. */
void cf_expect_same(const char *scenario, const char *name_a, const char *a, const char *name_b,
                    const char *b);
/* The same against a NULL-terminated list of expected lines; an expected
 * line ending in "..." matches any line that starts with the rest. */
void cf_expect_lines(const char *scenario, const char *name, const char *got,
                     const char *const *want);

/* ---- one command at a time (tests/c/test_differential.c) ---- */

/* The naming of generated ids (and of idle times) one side's replies went
 * through so far. mask_times: idle times become <t>, as two clocks never
 * agree on them to the ms. */
struct cf_norm;
struct cf_norm *cf_norm_new(bool mask_times);
void cf_norm_free(struct cf_norm *n);
int cf_norm_ids(const struct cf_norm *n); /* how many <idN> are named */
/* A clean state, connections open / closed. */
void cf_side_reset(struct cf_side *side);
void cf_side_finish(struct cf_side *side);
/* Runs argv (NULL-terminated, "<idN>" and "<now-N>" expanded as in a
 * scenario) on the side's first connection and returns the reply as a
 * transcript line shows it (malloc'd, no newline). */
char *cf_side_run(struct cf_side *side, struct cf_norm *n, const char *const *argv);

#endif
