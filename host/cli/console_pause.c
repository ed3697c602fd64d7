/* console_pause: the web console's POST /api/pause and /api/resume, what
 * `luastream pause` and `resume` do (pause_cmd.h), on the console's Redis
 * connection. The CSRF, Origin and token checks are route()'s (console.c),
 * as for every POST; each action is logged with the token's name, before
 * it is sent and with its result. Only a group the console shows can be
 * paused: one of DIR's handlers (a partitioned one by its base stream), or
 * without DIR a group of a stream named. */
#include <stdlib.h>
#include <string.h>

#include "console_internal.h"
#include "console_json.h"
#include "duration.h"
#include "log.h"
#include "pause_cmd.h"
#include "scripts.h"

struct pause_op {
  struct console *c;
  struct console_request *req;
  bool resume;
  char *stream, *group, *reason, *key;
  long long for_ms; /* 0: until resumed */
  char by[160];
};

static void op_free(struct pause_op *op) {
  free(op->stream);
  free(op->group);
  free(op->reason);
  free(op->key);
  free(op);
}

static bool is_row(const struct st_group *g, const char *stream, const char *group) {
  return g->group && g->pause.key && !strcmp(g->group, group) &&
         (!strcmp(g->stream, stream) || !strcmp(g->pause.stream, stream));
}

/* The row of a group the console shows, by its stream (a partition's, or
 * the base stream its pause is named by) and group; NULL when none. */
static const struct st_group *known_group(const struct console *c, const char *stream,
                                          const char *group) {
  for (size_t i = 0; i < c->q.nspecs; i++)
    if (is_row(&c->q.specs[i], stream, group)) return &c->q.specs[i];
  if (c->q.dir_mode || !console_known_stream(c, stream)) return NULL;
  for (size_t i = 0; i < c->q.ngroups; i++)
    if (is_row(&c->q.groups[i], stream, group)) return &c->q.groups[i];
  return NULL;
}

static void done(struct pause_op *op, const char *why) {
  const char *action = op->resume ? "resume" : "pause";
  if (why)
    log_line(LOG_WARN, NULL, "console action failed", "who", console_who(op->req), "action", action,
             "stream", op->stream, "group", op->group, "key", op->key, "error", why, NULL);
  else
    log_line(LOG_INFO, NULL, "console action done", "who", console_who(op->req), "action", action,
             "stream", op->stream, "group", op->group, NULL);
  op->c->overview_ms = 0; /* the next overview shows what changed */
}

static void answered(struct client *cl, void *arg, const bk_reply *r, const char *err) {
  (void)cl;
  struct pause_op *op = arg;
  const char *why = client_error(r, err);
  bool ok = why == NULL && (op->resume ? r->type == BK_INTEGER
                                       : r->type == BK_ARRAY && r->elements == 2 &&
                                             r->element[0]->type == BK_INTEGER &&
                                             r->element[1]->type == BK_INTEGER);
  if (!ok) {
    char text[512];
    snprintf(text, sizeof text, "EVAL on %s: %s", op->key, why ? why : "unexpected reply");
    done(op, text);
    console_error(op->req, 502, "%s", text);
    return op_free(op);
  }
  done(op, NULL);
  char *buf;
  size_t len;
  FILE *f = console_json_begin(&buf, &len);
  if (f == NULL) {
    console_error(op->req, 500, "out of memory");
    return op_free(op);
  }
  fputs("{\"stream\":", f);
  cj_str(f, op->stream);
  fputs(",\"group\":", f);
  cj_str(f, op->group);
  if (op->resume) {
    fprintf(f, ",\"resumed\":true,\"was_paused\":%s}", r->integer ? "true" : "false");
  } else {
    fprintf(f, ",\"paused\":true,\"since_ms\":%lld,\"until_ms\":", r->element[0]->integer);
    cj_num(f, r->element[1]->integer > 0 ? r->element[1]->integer : -1);
    fputs(",\"reason\":", f);
    cj_str(f, op->reason);
    fputs(",\"by\":", f);
    cj_str(f, op->by);
    fputc('}', f);
  }
  console_json_end(op->req, f, &buf, &len);
  op_free(op);
}

static void go(struct console *c, void *arg) {
  struct pause_op *op = arg;
  char for_ms[24];
  snprintf(for_ms, sizeof for_ms, "%lld", op->for_ms);
  const char *argv[] = {"EVAL", SCRIPT_PAUSE, "1",   op->key, op->resume ? "resume" : "pause",
                        for_ms, op->reason,   op->by};
  if (console_send(c, argv, op->resume ? 5 : 8, answered, op) != 0) {
    done(op, "lost the connection to Redis");
    console_error(op->req, 502, "lost the connection to Redis");
    op_free(op);
  }
}

static void fail(struct console *c, void *arg, const char *why) {
  (void)c;
  struct pause_op *op = arg;
  done(op, why);
  console_error(op->req, 502, "%s", why);
  op_free(op);
}

/* POST /api/pause (stream, group, for: a duration or "" until resumed,
 * reason) and /api/resume (stream, group). */
static void pause_or_resume(struct console *c, struct console_request *req, bool resume) {
  const char *body = req->body ? req->body : "";
  struct pause_op *op = calloc(1, sizeof *op);
  if (op == NULL) return console_error(req, 500, "out of memory");
  op->c = c;
  op->req = req;
  op->resume = resume;
  op->stream = cj_param(body, "stream");
  op->group = cj_param(body, "group");
  op->reason = cj_param(body, "reason");
  char *dur = cj_param(body, "for");
  if (op->reason == NULL) op->reason = strdup("");
  if (op->stream == NULL || op->group == NULL || op->reason == NULL) {
    free(dur);
    console_error(req, 400, "give stream and group");
    return op_free(op);
  }
  const struct st_group *row = known_group(c, op->stream, op->group);
  if (row == NULL) {
    free(dur);
    console_error(req, 404, "group %s of stream %s is not one this console shows", op->group,
                  op->stream);
    return op_free(op);
  }
  if (strlen(op->reason) > PAUSE_REASON_MAX) {
    free(dur);
    console_error(req, 400, "the reason is longer than %d bytes", PAUSE_REASON_MAX);
    return op_free(op);
  }
  if (!resume && dur && dur[0]) {
    double ms = 0;
    char why[200] = "";
    int rc = duration_parse(dur, strlen(dur), &ms, why, sizeof why);
    if (rc != 0 || ms < 1) {
      console_error(req, 400, "for: \"%s\" %s", dur,
                    rc != 0 ? why : "must be above 0 (a duration such as 30s or 15m)");
      free(dur);
      return op_free(op);
    }
    op->for_ms = (long long)ms;
  }
  /* the pause of the row's group: a partition's is its base stream's */
  free(op->stream);
  op->stream = strdup(row->pause.stream);
  op->key = strdup(row->pause.key);
  if (op->key == NULL || op->stream == NULL) {
    free(dur);
    console_error(req, 500, "out of memory");
    return op_free(op);
  }
  snprintf(op->by, sizeof op->by, "luastream console by %s", console_who(req));
  /* logged before it is sent: the action may be done even if its answer
   * never comes */
  log_line(LOG_INFO, NULL, "console action", "who", console_who(req), "action",
           resume ? "resume" : "pause", "stream", op->stream, "group", op->group, "for",
           resume ? NULL : (dur && dur[0] ? dur : "until resumed"), "reason",
           resume ? NULL : op->reason, NULL);
  free(dur);
  console_redis(c, go, fail, op);
}

void console_pause(struct console *c, struct console_request *req) {
  pause_or_resume(c, req, false);
}

void console_resume(struct console *c, struct console_request *req) {
  pause_or_resume(c, req, true);
}
