/* script: EVAL, EVALSHA and SCRIPT LOAD / EXISTS / FLUSH for the in-memory
 * broker, on an embedded LuaJIT state.
 *
 * The script sees what a Redis 7 script sees of the API the host uses:
 * KEYS and ARGV, redis.call / redis.pcall (dispatched to the broker's own
 * command interpreter through memscript_call_fn, never blocking),
 * redis.acl_check_cmd (no ACL here: true for any command the broker has),
 * redis.status_reply / redis.error_reply, and Redis' RESP2 conversion rules
 * both ways. Errors come back worded as Redis 7 words them:
 * "<error> script: <sha1>, on @user_script:<line>.". */
#ifndef LUASTREAM_MEMREDIS_SCRIPT_H
#define LUASTREAM_MEMREDIS_SCRIPT_H

#include <stddef.h>

#include "broker.h"

typedef struct memscript memscript;

/* Runs one command for a script; returns an owned reply (memreply.h). */
typedef bk_reply *memscript_call_fn(void *ctx, int argc, const char **argv, const size_t *argvlen);
/* Whether the broker has the command argv[0] (and its subcommand). */
typedef int memscript_known_fn(void *ctx, int argc, const char **argv, const size_t *argvlen);

/* NULL when out of memory. */
memscript *memscript_new(void);
void memscript_free(memscript *m);
/* argv is the whole EVAL command: EVAL script numkeys key... arg...
 * Returns an owned reply. Not re-entrant (a script cannot EVAL). A script
 * that compiles is kept for EVALSHA, as Redis keeps it. */
bk_reply *memscript_eval(memscript *m, int argc, const char **argv, const size_t *argvlen,
                         memscript_call_fn *call, memscript_known_fn *known, void *ctx);
/* EVALSHA sha numkeys key... arg...: a script EVAL or SCRIPT LOAD kept;
 * Redis 7.0's NOSCRIPT error when there is none. */
bk_reply *memscript_evalsha(memscript *m, int argc, const char **argv, const size_t *argvlen,
                            memscript_call_fn *call, memscript_known_fn *known, void *ctx);
/* SCRIPT LOAD text: its SHA1, or the compile error. */
bk_reply *memscript_load(memscript *m, const char *text, size_t len);
/* SCRIPT EXISTS sha...: argv is the whole command. */
bk_reply *memscript_exists(memscript *m, int argc, const char **argv, const size_t *argvlen);
/* SCRIPT FLUSH: forgets every script kept. */
void memscript_flush(memscript *m);

#endif
