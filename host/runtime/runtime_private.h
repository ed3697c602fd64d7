/* runtime_private.h: the structs runtime.c and hostlib.c share. Nothing else
 * includes this file; the rest of the host sees only runtime.h. */
#ifndef LUASTREAM_RUNTIME_PRIVATE_H
#define LUASTREAM_RUNTIME_PRIVATE_H

#include <lua.h>

#include "json_shapes.h"
#include "runtime.h"

enum rt_op { OP_NONE, OP_SLEEP };

/* One entry running in its own coroutine. A job whose handler returned goes
 * back to its handler's idle list with its coroutine (which ended cleanly and
 * can run the next entry) and its timer: the next entry allocates nothing. */
struct rt_job {
  struct handler *h;
  lua_State *co;          /* the coroutine; anchored by co_ref */
  int co_ref;             /* registry ref keeping co alive */
  double seq;             /* which delivery this is (core.entry checks it) */
  struct entry *e;        /* borrowed from the caller until done */
  rt_done_fn *done;
  void *data;
  enum rt_op op;          /* what the coroutine waits for, OP_NONE while running */
  ltimer *timer;          /* for ls.sleep, created on first use */
  struct rt_job *prev, *next; /* the handler's running jobs, for handler_abandon */
};

struct handler {
  lua_State *L;
  json_shapes *shapes;    /* constructors for the body shapes seen (core.message) */
  size_t flat_reads;      /* bodies read through luastream_flat (hostlib.c) */
  struct handler_spec spec;
  const struct rt_env *env; /* owned by the host; NULL when only validating */
  int dispatch_ref;       /* registry ref of the dispatch function, LUA_NOREF before bind */
  size_t jobs;            /* running jobs */
  struct rt_job *running; /* those jobs, linked through prev/next */
  bool released;          /* close the state when jobs reaches 0 */
  struct rt_job *current; /* the job whose coroutine is running now, else NULL */
  struct rt_job *idle;    /* finished jobs kept for reuse, linked through next */
  double last_seq;        /* the seq of the newest job */
  const char **scratch;   /* write field pointers, reused across jobs */
  size_t *scratch_len;
  size_t scratch_cap;
  struct rt_write *scratch_writes;
  size_t scratch_writes_cap;
  char version[RT_VERSION_LEN]; /* short content hash of the file (handler_version) */
  struct handler *older;  /* generations this one replaced that still run jobs */
  struct handler *newer;  /* the generation that replaced this one, NULL for the newest */
  bool jit_off;           /* the file called jit.off() at load: the engine stays off */
};

/* Resumes job's coroutine with the nargs values on top of its stack (hostlib
 * calls this when a wait completes). */
void rt_job_resume(struct rt_job *job, int nargs);

/* Opens luastream.core in L for handler h:  [-0, +1] pushes the module table. */
int rt_open_core(lua_State *L, struct handler *h);

#endif
