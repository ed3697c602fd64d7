/* commands: the commands of the in-memory server, one file per family:
 * cmd_stream.c (XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XINFO STREAM),
 * cmd_group.c (XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO GROUPS and
 * CONSUMERS), cmd_read.c (XREADGROUP), cmd_zset.c (ZADD, ZINCRBY, ZREM,
 * ZCARD, ZSCORE, ZRANGE, ZRANGEBYSCORE), cmd_hash.c (HSET, HSETNX, HGET,
 * HMGET, HGETALL, HINCRBY, HDEL, HEXISTS, HLEN), cmd_set.c (SADD, SREM,
 * SISMEMBER, SMEMBERS, SCARD), cmd_list.c (LPUSH, RPUSH, LPOP, RPOP, LRANGE,
 * LLEN), cmd_string.c (GET, SET, GETDEL, INCR, INCRBY, DECR, DECRBY, MGET,
 * MSET, APPEND, STRLEN), cmd_keys.c (EXPIRE, PEXPIRE, TTL, PTTL, PERSIST,
 * DEL, EXISTS, TYPE, FLUSHALL: a key of any type). EVAL is script.h;
 * broker_memory.c holds the command table, arities, MULTI and the server
 * commands (PING, INFO, TIME on the virtual wall clock, DEBUG SLEEP), and answers a
 * command not listed here with Redis's "ERR unknown command" and a pointer
 * to the real-server mode.
 *
 * A command is a function of (db, call) returning an owned reply tree
 * (memreply.h). Each parses its arguments and checks its keys' types in the
 * order Redis 7.0 does, so that of two faults the same one is reported (the
 * differential test, tests/c/test_differential.c, holds it to that).
 * Replies and error texts follow Redis's word for word; behaviour
 * that differs between Redis 7.0 and 8.4 follows db->version. */
#ifndef LUASTREAM_MEMREDIS_COMMANDS_H
#define LUASTREAM_MEMREDIS_COMMANDS_H

#include <stdint.h>

#include "args.h"
#include "broker.h"
#include "db.h"

typedef bk_reply *ms_cmd_fn(struct memdb *db, struct ms_call *c);

ms_cmd_fn ms_cmd_xadd, ms_cmd_xlen, ms_cmd_xrange, ms_cmd_xrevrange, ms_cmd_xdel, ms_cmd_xtrim;
ms_cmd_fn ms_cmd_xgroup, ms_cmd_xack, ms_cmd_xpending, ms_cmd_xclaim, ms_cmd_xautoclaim,
    ms_cmd_xinfo;
ms_cmd_fn ms_cmd_xreadgroup;
ms_cmd_fn ms_cmd_zadd, ms_cmd_zrem, ms_cmd_zcard, ms_cmd_zscore, ms_cmd_zrange,
    ms_cmd_zrangebyscore, ms_cmd_zincrby;
ms_cmd_fn ms_cmd_hset, ms_cmd_hsetnx, ms_cmd_hget, ms_cmd_hmget, ms_cmd_hgetall, ms_cmd_hincrby,
    ms_cmd_hdel, ms_cmd_hexists, ms_cmd_hlen;
ms_cmd_fn ms_cmd_sadd, ms_cmd_srem, ms_cmd_sismember, ms_cmd_smembers, ms_cmd_scard;
ms_cmd_fn ms_cmd_lpush, ms_cmd_rpush, ms_cmd_lpop, ms_cmd_rpop, ms_cmd_lrange, ms_cmd_llen;
ms_cmd_fn ms_cmd_get, ms_cmd_set, ms_cmd_getdel, ms_cmd_incr, ms_cmd_incrby, ms_cmd_decr,
    ms_cmd_decrby, ms_cmd_mget, ms_cmd_mset, ms_cmd_append, ms_cmd_strlen;
ms_cmd_fn ms_cmd_expire, ms_cmd_pexpire, ms_cmd_ttl, ms_cmd_pttl, ms_cmd_persist, ms_cmd_del,
    ms_cmd_exists, ms_cmd_type, ms_cmd_flushall;

/* XINFO STREAM (cmd_stream.c; XINFO dispatches from cmd_group.c). */
bk_reply *ms_xinfo_stream(struct memdb *db, struct ms_call *c);

/* A blocked XREADGROUP on 7.0 woken because `key` (argv index keyidx) was
 * signaled: serves only that stream, as 7.0 does. NULL: keep blocking. */
bk_reply *ms_xreadgroup_wake70(struct memdb *db, struct ms_call *c, int keyidx);
/* 8.4 CLAIM: the Unix ms at which the earliest pending entry of the call's
 * streams turns claimable, or -1 if none will. */
int64_t ms_xreadgroup_claim_due(struct memdb *db, struct ms_call *c, long long claim_ms);

#endif
