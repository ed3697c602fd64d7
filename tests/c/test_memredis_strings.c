/* The string and keyspace commands of the in-memory Redis (cmd_string.c,
 * cmd_keys.c) and expiry on keys of every type.
 *
 * The scenarios run on redis-server 7.0.15 and on the memory broker as
 * 7.0.15 and must give the same transcript (conformance.h); expiry there is
 * one real wait of 300 ms on the server's side. PTTL on the server moves
 * with real time, so the live scenarios read TTL (whole seconds) of long
 * times only; the exact milliseconds, and expiry at the very ms it is due,
 * are checked on the virtual clock against literal lines. */
#include <stdlib.h>

#include "conformance.h"
#include "redis_server.h"
#include "task.h"

#define END \
  { .op = CF_END }
#define C(...) CF_C(0, __VA_ARGS__)
#define ADV(ms) CF_A(ms)

static struct redis_server srv;

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
  redis_server_stop(&srv);
}

/* SET's options: repeats, exclusions, the order of its errors, GET, and
 * what happens to the time to live. */
static const struct cf_step set_options[] = {
    C("SET", "k", "v", "EX", "10", "EX", "20"), C("TTL", "k"),
    C("SET", "k", "v", "EX", "10", "PX", "20"), C("SET", "k", "v", "KEEPTTL", "EX", "5"),
    C("SET", "k", "v", "EX", "5", "KEEPTTL"), C("SET", "k", "v", "NX", "XX"),
    C("SET", "k", "v", "xx", "nx"), C("SET", "k", "v", "NX", "NX"), C("SET", "k", "v", "EX"),
    C("SET", "k", "v", "EX", "abc"), C("SET", "k", "v", "EX", "abc", "junk"),
    C("SET", "k", "v", "PX", "10", "PX", "abc"), C("SET", "k", "v", "EX", "0"),
    C("SET", "k", "v", "EX", "-1"), C("SET", "k", "v", "PX", "9223372036854775807"),
    C("SET", "k", "v", "EX", "9223372036854775"), C("SET", "k", "v", "EXAT", "9223372036854776"),
    C("SET", "k", "v", "PXAT", "0"), C("SET", "k", "v", "EXAT", "5", "EX", "4"),
    C("SET", "k", "v2", "KEEPTTL", "KEEPTTL", "GET"), C("TTL", "k"),
    C("SET", "k", "v3", "GET", "GET"), C("TTL", "k"), C("SET", "nokey", "x", "GET"),
    C("SET", "nokey", "y", "GET", "NX"), C("SET", "nokey2", "y", "GET", "XX"), C("GET", "nokey2"),
    C("SET", "past", "v", "EXAT", "1"), C("GET", "past"), C("SET", "past", "v", "PXAT", "1000"),
    C("EXISTS", "past"),
    /* the largest PXAT is taken; its TTL in seconds would differ by one
     * between the two sides when they round at another millisecond */
    C("SET", "far", "v", "PXAT", "9223372036854775807"), C("EXISTS", "far"), C("PERSIST", "far"),
    C("TTL", "far"), C("ZADD", "z", "1", "a"), C("SET", "z", "v", "GET"), C("EXPIRE", "z", "100"),
    C("SET", "z", "str", "KEEPTTL"), C("TYPE", "z"), C("TTL", "z"), C("XADD", "s", "1-0", "f", "v"),
    C("SET", "s", "str", "PX", "junk"), C("TYPE", "s"), C("SET", "s", "str"), C("GET", "s"), END};

TEST_IMPL(memredis_strings_set_options) { conform("set_options", set_options); }

/* INCR and its kin at the int64 bounds, malformed numbers, MGET, MSET,
 * APPEND, STRLEN, GETDEL, and which of them keep the time to live. */
static const struct cf_step counters[] = {
    C("INCR", "n"),
    C("INCRBY", "n", "41"),
    C("DECR", "n"),
    C("DECRBY", "n", "-10"),
    C("GET", "n"),
    C("INCRBY", "n", "abc"),
    C("INCRBY", "n", "1.5"),
    C("INCRBY", "n", "+1"),
    C("INCRBY", "n", "9223372036854775808"),
    C("DECRBY", "n", "-9223372036854775808"),
    C("SET", "n", "9223372036854775807"),
    C("INCR", "n"),
    C("INCRBY", "n", "0"),
    C("DECRBY", "n", "9223372036854775807"),
    C("DECRBY", "n", "1"),
    C("DECRBY", "n", "1"),
    C("DECR", "n"),
    C("INCRBY", "n", "-9223372036854775808"),
    C("SET", "n", "-9223372036854775808"),
    C("DECR", "n"),
    C("INCRBY", "n", "-1"),
    C("INCRBY", "n", "9223372036854775807"),
    C("SET", "n", " 1"),
    C("INCR", "n"),
    C("SET", "n", "00"),
    C("INCR", "n"),
    C("SET", "n", "-0"),
    C("DECR", "n"),
    C("SET", "n", "18446744073709551615"),
    C("INCR", "n"),
    C("SET", "n", ""),
    C("INCR", "n"),
    C("ZADD", "z", "1", "a"),
    C("INCRBY", "z", "abc"),
    C("INCR", "z"),
    C("APPEND", "z", "x"),
    C("STRLEN", "z"),
    C("GETDEL", "z"),
    C("SET", "i", "5", "EX", "100"),
    C("INCR", "i"),
    C("TTL", "i"),
    C("APPEND", "i", "1"),
    C("TTL", "i"),
    C("GET", "i"),
    C("STRLEN", "i"),
    C("MSET", "i", "3"),
    C("TTL", "i"),
    C("MSET", "a", "1", "b"),
    C("MSET", "a", "1", "b", "2", "a", "3", "z", "4"),
    C("TYPE", "z"),
    C("MGET", "a", "b", "nokey", "z"),
    C("ZADD", "z2", "1", "a"),
    C("MGET", "z2", "a"),
    C("APPEND", "new", "abc"),
    C("STRLEN", "new"),
    C("STRLEN", "nokey"),
    C("GETDEL", "new"),
    C("GETDEL", "new"),
    C("EXISTS", "new"),
    C("EVAL", "return redis.call('INCRBY', KEYS[1], ARGV[1])", "1", "c", "5"),
    C("EVAL", "return redis.pcall('MSET', 'a')", "0"),
    END};

TEST_IMPL(memredis_strings_counters) { conform("counters", counters); }

/* EXPIRE, PEXPIRE, TTL, PTTL, PERSIST, EXISTS on keys of every type, and
 * expiry seen after a real wait. */
static const struct cf_step keys[] = {C("SET", "str", "v"),
                                      C("ZADD", "z", "1", "a"),
                                      C("XADD", "s", "1-0", "f", "v"),
                                      C("EXPIRE", "str", "10", "NX", "XX"),
                                      C("EXPIRE", "str", "10", "GT", "LT"),
                                      C("EXPIRE", "str", "10", "FOO"),
                                      C("EXPIRE", "str", "abc", "FOO"),
                                      C("EXPIRE", "str", "abc"),
                                      C("EXPIRE", "str", "9223372036854776"),
                                      C("EXPIRE", "str", "-9223372036854776"),
                                      C("PEXPIRE", "str", "9223372036854775807"),
                                      C("EXPIRE", "nokey", "10"),
                                      C("TTL", "nokey"),
                                      C("PTTL", "nokey"),
                                      C("TTL", "str"),
                                      C("PTTL", "z"),
                                      C("EXPIRE", "str", "100", "XX"),
                                      C("EXPIRE", "str", "100", "GT"),
                                      C("EXPIRE", "str", "100", "LT"),
                                      C("TTL", "str"),
                                      C("EXPIRE", "str", "200", "NX"),
                                      C("EXPIRE", "str", "50", "GT"),
                                      C("EXPIRE", "str", "200", "gt"),
                                      C("EXPIRE", "str", "300", "LT"),
                                      C("EXPIRE", "str", "100", "lt"),
                                      C("EXPIRE", "str", "50", "nx"),
                                      C("TTL", "str"),
                                      C("PERSIST", "str"),
                                      C("PERSIST", "str"),
                                      C("PERSIST", "nokey"),
                                      C("TTL", "str"),
                                      C("EXPIRE", "z", "100"),
                                      C("TTL", "z"),
                                      C("ZADD", "z", "2", "b"),
                                      C("TTL", "z"),
                                      C("EXPIRE", "s", "100"),
                                      C("XADD", "s", "2-0", "f", "v"),
                                      C("TTL", "s"),
                                      C("EXPIRE", "z", "0"),
                                      C("EXISTS", "z"),
                                      C("SET", "neg", "v"),
                                      C("PEXPIRE", "neg", "-9223372036854775808"),
                                      C("EXISTS", "neg"),
                                      C("SET", "e", "v"),
                                      C("EXISTS", "e", "e", "nokey", "s", "e"),
                                      C("DEL", "e", "e", "nokey"),
                                      C("SET", "gone", "v", "PX", "100"),
                                      C("ZADD", "zgone", "1", "a"),
                                      C("PEXPIRE", "zgone", "100"),
                                      C("XADD", "sgone", "1-0", "f", "v"),
                                      C("EXPIRE", "sgone", "1"),
                                      C("PEXPIRE", "sgone", "100", "LT"),
                                      C("EXISTS", "gone", "zgone", "sgone"),
                                      ADV(300),
                                      C("EXISTS", "gone", "zgone", "sgone"),
                                      C("TTL", "zgone"),
                                      C("TYPE", "sgone"),
                                      C("ZCARD", "zgone"),
                                      C("XLEN", "sgone"),
                                      C("GET", "gone"),
                                      C("TTL", "s"),
                                      END};

TEST_IMPL(memredis_strings_keys_expire) { conform("keys", keys); }

/* On the virtual clock: PTTL to the ms, a key of each type gone at the
 * very ms it is due, INCR keeping the time, TTL's rounding. */
static const struct cf_step virtual_expiry[] = {C("SET", "str", "1", "PX", "1500"),
                                                C("ZADD", "z", "1", "a"),
                                                C("PEXPIRE", "z", "1000"),
                                                C("XADD", "s", "1-0", "f", "v"),
                                                C("EXPIRE", "s", "2"),
                                                ADV(499),
                                                C("PTTL", "str"),
                                                C("TTL", "str"),
                                                C("INCR", "str"),
                                                C("PTTL", "str"),
                                                ADV(1),
                                                C("TTL", "str"),
                                                C("PTTL", "z"),
                                                ADV(499),
                                                C("EXISTS", "z"),
                                                ADV(1),
                                                C("EXISTS", "z"),
                                                C("ZSCORE", "z", "a"),
                                                C("PTTL", "s"),
                                                ADV(500),
                                                C("GET", "str"),
                                                C("PTTL", "s"),
                                                ADV(500),
                                                C("XLEN", "s"),
                                                C("TYPE", "s"),
                                                END};

TEST_IMPL(memredis_strings_expiry_on_virtual_clock) {
  static const char *const want[] = {"SET str 1 PX 1500 -> +OK",
                                     "ZADD z 1 a -> :1",
                                     "PEXPIRE z 1000 -> :1",
                                     "XADD s 1-0 f v -> 1-0",
                                     "EXPIRE s 2 -> :1",
                                     "advance 499 ms",
                                     "PTTL str -> :1001",
                                     "TTL str -> :1",
                                     "INCR str -> :2",
                                     "PTTL str -> :1001",
                                     "advance 1 ms",
                                     "TTL str -> :1",
                                     "PTTL z -> :500",
                                     "advance 499 ms",
                                     "EXISTS z -> :1",
                                     "advance 1 ms",
                                     "EXISTS z -> :0",
                                     "ZSCORE z a -> nil",
                                     "PTTL s -> :1000",
                                     "advance 500 ms",
                                     "GET str -> nil",
                                     "PTTL s -> :500",
                                     "advance 500 ms",
                                     "XLEN s -> :0",
                                     "TYPE s -> +none",
                                     NULL};
  struct cf_side *mem = cf_memory("8.4.0");
  char *got = cf_transcript(mem, virtual_expiry, true);
  cf_expect_lines("virtual_expiry", cf_side_name(mem), got, want);
  free(got);
  cf_side_free(mem);
}
