/* test_runtime_support: what the runtime tests share (test_runtime_*.c,
 * test_jobs.c); see test_runtime_support.c. */
#ifndef LUASTREAM_TEST_RUNTIME_SUPPORT_H
#define LUASTREAM_TEST_RUNTIME_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "clock.h"
#include "runtime.h"

#define MAX_FILES 16

/* ---- handler files in a temporary folder ---- */

/* The message of the last failed load (load_err, load_ok). */
extern char load_error[8192];

/* Writes len bytes to DIR/name and returns the path (valid for the test). */
const char *write_bytes(const char *name, const char *text, size_t len);
const char *write_file(const char *name, const char *text);
/* Loads text as DIR/name and expects it to fail; returns the message. */
const char *load_err(const char *name, const char *text, const char **path_out);
/* Loads and binds text as DIR/name (consumer "c-1"). */
handler *load_ok(const char *name, const char *text, const struct rt_env *env);
/* "DIR/name:line: msg" (one of 4 rotating buffers) */
const char *at(const char *path, int line, const char *msg);

/* ---- entries and results ---- */

#define MAX_WRITES 8
#define MAX_FIELDS 16

/* One entry the handler asked to add, copied out of the result. */
/* A command written with the ack: name, its key (for an XADD the stream),
 * and the arguments after the key (for an XADD those after "*": the fields). */
struct cwrite {
  char cmd[32];
  char stream[128];
  size_t nfields;
  char field[MAX_FIELDS][512];
  size_t field_len[MAX_FIELDS];
};

struct captured {
  int calls;
  struct entry *e;
  enum rt_outcome kind;
  bool has_text, has_reason, has_stream;
  char text[8192];
  size_t text_len;
  char reason[64];
  int64_t delay_ms;
  /* RT_REPLY: the reply, i.e. the last write */
  char stream[128];
  size_t nfields;
  char field[MAX_FIELDS][512];
  size_t field_len[MAX_FIELDS];
  /* every write, the reply included */
  size_t nwrites;
  struct cwrite writes[MAX_WRITES];
  int order; /* completion order across captures (1 = first) */
};

/* Completions so far, across captures (captured.order). */
extern int completions;

/* The done callback that fills the struct captured given as data. */
void on_done(void *data, struct entry *e, const struct rt_result *res);
/* Runs one entry that must finish before handler_run returns. */
struct captured run_sync(handler *h, struct entry *e);
/* Runs a one-field entry {data = json} and returns the result. */
struct captured run_json(handler *h, const char *id, const char *json);
void expect_plain(const struct captured *c, enum rt_outcome kind);
void expect_fail(const struct captured *c, enum rt_outcome kind, const char *reason);
/* A reply whose only content is `data` = json, plus original-id = id. */
void expect_reply(const struct captured *c, const char *stream, const char *json, const char *id);

/* ---- libuv loop and clock ---- */

/* Frees clk, closes every handle of loop, runs it out and closes it. */
void loop_finish(uv_loop_t *loop, lclock *clk);

/* ---- log capture ---- */

extern char logbuf[65536];
extern size_t log_len;
extern int log_lines;
/* The last script version strip_versions took out of a captured line. */
extern char last_version[16];
/* Sends log lines (their version= values stripped) to logbuf. */
void log_capture_start(void);

/* ---- handler files several topics use ---- */

/* msg.mode picks what handle returns; line numbers matter for tracebacks. */
extern const char MODES[];
/* Sleeps msg.ms (then msg.again), counts the peak of concurrent jobs. */
extern const char SLEEPER[];

#endif
