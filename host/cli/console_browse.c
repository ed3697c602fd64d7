/* console_browse: what the web console reads from Redis besides the
 * overview and the dead letters (console_internal.h): a group's pending
 * entries and one entry. Only keys of the streams the console shows are
 * read: a stream of DIR's handlers (or one named), its retry streams, and
 * the dead_letter streams of DIR's handlers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "console_internal.h"
#include "console_json.h"

#define PENDING_PAGE 50
#define PENDING_PAGE_MAX 500

/* ---- what may be read ---- */

/* key is a stream shown, or the retry stream `<stream>:retry:<group>` of
 * one, or a dead_letter stream. */
static bool known_key(const struct console *c, const char *key) {
  if (console_known_stream(c, key) || console_known_dead_letter(c, key)) return true;
  const char *r = strstr(key, ":retry:");
  while (r) {
    char *stream = strndup(key, (size_t)(r - key));
    bool ok = stream && console_known_stream(c, stream);
    free(stream);
    if (ok) return true;
    r = strstr(r + 1, ":retry:");
  }
  return false;
}

/* ---- a request's Redis commands ---- */

/* One request that reads: its parameters. */
struct read_op {
  struct console_request *req;
  struct console *c;
  char *key, *group, *after, *id;
  long long count;
};

static void op_free(struct read_op *op) {
  free(op->key);
  free(op->group);
  free(op->after);
  free(op->id);
  free(op);
}

static void op_fail(struct console *c, void *arg, const char *why) {
  (void)c;
  struct read_op *op = arg;
  console_error(op->req, 502, "%s", why);
  op_free(op);
}

static void send(struct read_op *op, const char *const *argv, int argc, client_reply_fn *cb) {
  if (console_send(op->c, argv, argc, cb, op) != 0)
    op_fail(op->c, op, "lost the connection to Redis");
}

/* ---- GET /api/pending ---- */

static void pending_answered(struct client *cl, void *arg, const bk_reply *r, const char *err) {
  (void)cl;
  struct read_op *op = arg;
  const char *why = client_error(r, err);
  /* no such key or group (a retry stream nothing was retried on yet):
   * nothing is pending there */
  bool none = bk_reply_is_error(r, "NOGROUP");
  if (why && !none) {
    console_error(op->req, 502, "XPENDING %s %s: %s", op->key, op->group, why);
    return op_free(op);
  }
  char *buf;
  size_t len;
  FILE *f = console_json_begin(&buf, &len);
  if (f == NULL) return op_fail(op->c, op, "out of memory");
  fputs("{\"key\":", f);
  cj_str(f, op->key);
  fputs(",\"group\":", f);
  cj_str(f, op->group);
  fputs(",\"entries\":[", f);
  const bk_reply *last = NULL;
  size_t n = 0;
  for (size_t i = 0; !none && r->type == BK_ARRAY && i < r->elements; i++) {
    const bk_reply *e = r->element[i];
    if (e->type != BK_ARRAY || e->elements != 4 || !console_is_str(e->element[0]) ||
        !console_is_str(e->element[1]) || e->element[2]->type != BK_INTEGER ||
        e->element[3]->type != BK_INTEGER)
      continue;
    fprintf(f, "%s{\"id\":", n++ ? "," : "");
    cj_text(f, e->element[0]->str, e->element[0]->len);
    fputs(",\"consumer\":", f);
    cj_text(f, e->element[1]->str, e->element[1]->len);
    fprintf(f, ",\"idle_ms\":%lld,\"deliveries\":%lld}", e->element[2]->integer,
            e->element[3]->integer);
    last = e->element[0];
  }
  fputs("],\"next\":", f);
  if (last && (long long)n == op->count)
    cj_text(f, last->str, last->len);
  else
    fputs("null", f);
  fputc('}', f);
  console_json_end(op->req, f, &buf, &len);
  op_free(op);
}

static void pending_go(struct console *c, void *arg) {
  (void)c;
  struct read_op *op = arg;
  char start[80], count[24];
  snprintf(start, sizeof start, "%s%s", strcmp(op->after, "-") ? "(" : "", op->after);
  snprintf(count, sizeof count, "%lld", op->count);
  send(op, (const char *[]){"XPENDING", op->key, op->group, start, "+", count}, 6,
       pending_answered);
}

static struct read_op *op_new(struct console *c, struct console_request *req) {
  struct read_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    console_error(req, 500, "out of memory");
    return NULL;
  }
  op->c = c;
  op->req = req;
  return op;
}

void console_pending(struct console *c, struct console_request *req) {
  struct read_op *op = op_new(c, req);
  if (op == NULL) return;
  op->key = cj_param(req->query, "key");
  op->group = cj_param(req->query, "group");
  op->after = cj_param(req->query, "after");
  char *count = cj_param(req->query, "count");
  op->count = count ? strtoll(count, NULL, 10) : PENDING_PAGE;
  free(count);
  if (op->count <= 0 || op->count > PENDING_PAGE_MAX) op->count = PENDING_PAGE;
  if (op->after == NULL || op->after[0] == '\0') {
    free(op->after);
    op->after = strdup("-");
  }
  if (op->key == NULL || op->group == NULL || op->after == NULL) {
    console_error(req, 400, "give key and group");
    return op_free(op);
  }
  if (!known_key(c, op->key)) {
    console_error(req, 404, "%s is not a stream this console shows", op->key);
    return op_free(op);
  }
  if (strcmp(op->after, "-") && !console_valid_id(op->after)) {
    console_error(req, 400, "after: %s is not an entry id (ms-seq)", op->after);
    return op_free(op);
  }
  console_redis(c, pending_go, op_fail, op);
}

/* ---- GET /api/entry ---- */

/* [name, value] pairs of an entry's fields as display text, and which were
 * escaped. */
static void fields_json(FILE *f, const bk_reply *fields) {
  char *flags = NULL;
  size_t flags_len = 0;
  FILE *ff = open_memstream(&flags, &flags_len);
  size_t n = 0;
  fputs("\"fields\":[", f);
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    const bk_reply *k = fields->element[i], *v = fields->element[i + 1];
    if (!console_is_str(k) || !console_is_str(v)) continue;
    fprintf(f, "%s[", n ? "," : "");
    bool e = cj_text(f, k->str, k->len);
    fputc(',', f);
    e = cj_text(f, v->str, v->len) || e;
    fputc(']', f);
    if (ff) fprintf(ff, "%s%s", n ? "," : "", e ? "true" : "false");
    n++;
  }
  if (ff) fclose(ff);
  fprintf(f, "],\"escaped\":[%.*s]", (int)flags_len, flags ? flags : "");
  free(flags);
}

static void entry_answered(struct client *cl, void *arg, const bk_reply *r, const char *err) {
  (void)cl;
  struct read_op *op = arg;
  const char *why = client_error(r, err);
  if (why) {
    console_error(op->req, 502, "XRANGE %s: %s", op->key, why);
    return op_free(op);
  }
  char *buf;
  size_t len;
  FILE *f = console_json_begin(&buf, &len);
  if (f == NULL) return op_fail(op->c, op, "out of memory");
  fputs("{\"key\":", f);
  cj_str(f, op->key);
  fputs(",\"id\":", f);
  cj_str(f, op->id);
  const bk_reply *e = r->type == BK_ARRAY && r->elements == 1 ? r->element[0] : NULL;
  if (e && e->type == BK_ARRAY && e->elements == 2 && e->element[1]->type == BK_ARRAY) {
    fputs(",\"found\":true,", f);
    fields_json(f, e->element[1]);
  } else {
    fputs(",\"found\":false,\"fields\":[],\"escaped\":[]", f);
  }
  fputc('}', f);
  console_json_end(op->req, f, &buf, &len);
  op_free(op);
}

static void entry_go(struct console *c, void *arg) {
  (void)c;
  struct read_op *op = arg;
  send(op, (const char *[]){"XRANGE", op->key, op->id, op->id}, 4, entry_answered);
}

void console_entry(struct console *c, struct console_request *req) {
  struct read_op *op = op_new(c, req);
  if (op == NULL) return;
  op->key = cj_param(req->query, "key");
  op->id = cj_param(req->query, "id");
  if (op->key == NULL || !console_valid_id(op->id)) {
    console_error(req, 400, "give key and id (an entry id, ms-seq)");
    return op_free(op);
  }
  if (!known_key(c, op->key)) {
    console_error(req, 404, "%s is not a stream this console shows", op->key);
    return op_free(op);
  }
  console_redis(c, entry_go, op_fail, op);
}
