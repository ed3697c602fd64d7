/* console_dead_letters: the web console's dead letters
 * (console_internal.h): the list of a dead_letter stream, filtered by
 * reason, handler, time and text in the body, scanning a bounded number of
 * entries per request; the preview of an action (the ids it will touch and
 * those it refuses); and the actions, replay and delete, on exactly the ids
 * the page showed, each checked again and logged with who asked. */
#define _GNU_SOURCE /* memmem */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "console_internal.h"
#include "console_json.h"
#include "dead_letters_entry.h"
#include "grow.h"
#include "log.h"
#include "scripts.h"
#include "wire.h"

#define DL_SCAN_PAGE 500   /* entries one XREVRANGE brings */
#define DL_SCAN_LIMIT 5000 /* entries one list request looks at, at most */
#define DL_SHOWN_MAX 500   /* matching entries one list request returns, at most */
#define DL_BODY_SHOWN 200  /* bytes of the body shown in the list */
#define DL_TEXT_SHOWN 1000 /* bytes of another field shown in the list */
#define REFUSED_SHOWN 100  /* refused ids a preview lists (all are counted) */
#define PREVIEW_MAX 10000  /* ids one action takes, at most */
#define ACTION_BATCH 500   /* ids per replay script call or XDEL */

/* One request on a dead_letter stream: its parameters and where it stands. */
struct dl_op {
  struct console_request *req;
  struct console *c;
  char *key; /* the dead_letter stream */
  /* the filters and the scan */
  char *reason, *handler, *text;
  long long since, until;
  char before[64]; /* exclusive upper end of the next page; "" at the start: + */
  long long length, scanned, shown;
  char *names[32]; /* reasons counted, their counts */
  long long counts[32];
  int nreasons;
  FILE *rows;
  char *rows_buf;
  size_t rows_len;
  /* a preview or an action: which one, the ids given (else the filters),
   * those that pass, what is refused */
  const char *action; /* "replay" or "delete"; NULL: the list */
  bool commit;        /* do it, on the ids that pass */
  char **ids;
  size_t nids, nsent, answered;
  bool sent_all;
  char why[256]; /* the first failure, "" for none */
  char **ok;
  size_t nok, capok, done;
  FILE *refused;
  char *refused_buf;
  size_t refused_len;
  long long nrefused;
  FILE *result; /* an action's result rows */
  char *result_buf;
  size_t result_len;
  long long nresult;
  size_t batch;    /* ids in the call under way */
  bool one_by_one; /* a batch was refused: each goes alone */
};

static void op_free(struct dl_op *op) {
  free(op->key);
  free(op->reason);
  free(op->handler);
  free(op->text);
  for (int i = 0; i < op->nreasons; i++) free(op->names[i]);
  if (op->rows) fclose(op->rows);
  free(op->rows_buf);
  if (op->refused) fclose(op->refused);
  free(op->refused_buf);
  if (op->result) fclose(op->result);
  free(op->result_buf);
  cj_params_free(op->ids, op->nids);
  cj_params_free(op->ok, op->nok);
  free(op);
}

static void op_fail(struct console *c, void *arg, const char *why) {
  (void)c;
  struct dl_op *op = arg;
  console_error(op->req, 502, "%s", why);
  op_free(op);
}

static struct dl_op *op_new(struct console *c, struct console_request *req) {
  struct dl_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    console_error(req, 500, "out of memory");
    return NULL;
  }
  op->c = c;
  op->req = req;
  op->since = op->until = -1;
  return op;
}

static void send(struct dl_op *op, const char *const *argv, int argc, client_reply_fn *cb) {
  if (console_send(op->c, argv, argc, cb, op) != 0)
    op_fail(op->c, op, "lost the connection to Redis");
}

/* ---- the entries' fields ---- */

/* client_field's value when it is a string. */
static const bk_reply *field(const bk_reply *fields, const char *name) {
  const bk_reply *v = client_field(fields, name);
  return console_is_str(v) ? v : NULL;
}

static bool equals(const bk_reply *v, const char *s) {
  return v && strlen(s) == v->len && !memcmp(v->str, s, v->len);
}

static long long number(const bk_reply *v) {
  if (v == NULL || v->len == 0 || v->len > 19) return -1;
  char buf[24];
  memcpy(buf, v->str, v->len);
  buf[v->len] = '\0';
  char *end;
  long long n = strtoll(buf, &end, 10);
  return *end == '\0' ? n : -1;
}

static bool contains(const bk_reply *v, const char *text) {
  size_t n = strlen(text);
  if (v == NULL || n > v->len) return false;
  return memmem(v->str, v->len, text, n) != NULL;
}

static void count_reason(struct dl_op *op, const bk_reply *reason) {
  const char *name = reason ? reason->str : "";
  size_t len = reason ? reason->len : 0;
  for (int i = 0; i < op->nreasons; i++)
    if (strlen(op->names[i]) == len && !memcmp(op->names[i], name, len)) {
      op->counts[i]++;
      return;
    }
  if (op->nreasons == 32) return;
  if ((op->names[op->nreasons] = strndup(name, len)) == NULL) return;
  op->counts[op->nreasons++] = 1;
}

/* v's first max bytes at most, cut before a UTF-8 sequence rather than in
 * it (a cut is not an escape). */
static bool cut_text(FILE *f, const bk_reply *v, size_t max) {
  size_t n = v->len;
  if (n > max) {
    n = max;
    while (n > 0 && ((unsigned char)v->str[n] & 0xc0) == 0x80) n--;
  }
  return cj_text(f, v->str, n);
}

static void dl_row(struct dl_op *op, const bk_reply *id, const bk_reply *fields) {
  FILE *f = op->rows;
  const bk_reply *body = field(fields, HDR_DATA);
  fprintf(f, "%s{\"id\":", op->shown++ ? "," : "");
  cj_text(f, id->str, id->len);
  fputs(",\"time_ms\":", f);
  cj_num(f, number(field(fields, HDR_DL_TIME)));
  static const struct {
    const char *json, *field;
  } text[] = {{"reason", HDR_DL_REASON},        {"handler", HDR_DL_HANDLER},
              {"source_stream", HDR_DL_STREAM}, {"source_group", HDR_DL_GROUP},
              {"source_id", HDR_DL_ID},         {"error", HDR_DL_ERROR}};
  for (size_t i = 0; i < sizeof text / sizeof text[0]; i++) {
    const bk_reply *v = field(fields, text[i].field);
    fprintf(f, ",\"%s\":", text[i].json);
    if (v)
      cut_text(f, v, DL_TEXT_SHOWN);
    else
      fputs("null", f);
  }
  fputs(",\"deliveries\":", f);
  cj_num(f, number(field(fields, HDR_DL_DELIVERIES)));
  fputs(",\"provenance\":", f);
  fputs(field(fields, HDR_DL_STREAM) ? "true" : "false", f);
  fputs(",\"body\":", f);
  bool escaped = false;
  if (body)
    escaped = cut_text(f, body, DL_BODY_SHOWN);
  else
    fputs("null", f);
  fprintf(f, ",\"body_bytes\":%zu,\"escaped\":%s}", body ? body->len : 0,
          escaped ? "true" : "false");
}

/* Whether a dead letter passes the filters; reason_too: the reason filter
 * counts (the counts by reason are over the other filters). */
static bool matches(const struct dl_op *op, const bk_reply *id, const bk_reply *fields,
                    bool reason_too) {
  if (reason_too && op->reason && !equals(field(fields, HDR_DL_REASON), op->reason)) return false;
  if (op->handler && !contains(field(fields, HDR_DL_HANDLER), op->handler)) return false;
  if (op->text && !contains(field(fields, HDR_DATA), op->text)) return false;
  if (op->since >= 0 || op->until >= 0) {
    long long t = number(field(fields, HDR_DL_TIME));
    if (t < 0) t = strtoll(id->str, NULL, 10); /* the id's time */
    if (op->since >= 0 && t < op->since) return false;
    if (op->until >= 0 && t > op->until) return false;
  }
  return true;
}

static void dl_finish(struct dl_op *op, bool more) {
  char *buf;
  size_t len;
  fclose(op->rows);
  op->rows = NULL;
  FILE *f = console_json_begin(&buf, &len);
  if (f == NULL) return op_fail(op->c, op, "out of memory");
  fputs("{\"stream\":", f);
  cj_str(f, op->key);
  fputs(",\"length\":", f);
  cj_num(f, op->length);
  fprintf(f, ",\"scanned\":%lld,\"scan_limit\":%d,\"before\":", op->scanned, DL_SCAN_LIMIT);
  cj_str(f, more ? op->before : NULL);
  fputs(",\"counts\":{", f);
  for (int i = 0; i < op->nreasons; i++) {
    fputs(i ? "," : "", f);
    cj_str(f, op->names[i]);
    fprintf(f, ":%lld", op->counts[i]);
  }
  fprintf(f, "},\"entries\":[%.*s]}", (int)op->rows_len, op->rows_buf ? op->rows_buf : "");
  console_json_end(op->req, f, &buf, &len);
  op_free(op);
}

static void dl_page(struct dl_op *op);
static bool dl_filters(struct dl_op *op, const char *params);

/* ---- POST /api/dead-letters/preview ---- */

/* Why a dead letter cannot take the action, or NULL: only entries with the
 * provenance luastream writes are dead letters, and one goes back only to a
 * stream and group of the handlers writing to this stream. */
static const char *refusal(const struct dl_op *op, const bk_reply *fields) {
  const bk_reply *stream = field(fields, HDR_DL_STREAM), *group = field(fields, HDR_DL_GROUP);
  if (stream == NULL) return "not a dead letter: it has no dead-letter-stream field";
  if (strcmp(op->action, "replay") != 0) return NULL;
  if (group == NULL) return "it has no dead-letter-group field";
  const bk_reply *src_id = field(fields, HDR_DL_ID);
  char id[64];
  if (src_id == NULL || src_id->len >= sizeof id) return "it has no dead-letter-id of an entry";
  snprintf(id, sizeof id, "%.*s", (int)src_id->len, src_id->str);
  if (!console_valid_id(id)) return "its dead-letter-id is not an entry id";
  for (size_t i = 0; i < op->c->npairs; i++) {
    const struct console_pair *p = &op->c->pairs[i];
    if (!strcmp(p->dead_letter, op->key) && equals(stream, p->stream) && equals(group, p->group))
      return NULL;
  }
  return "no handler here reads its stream and group with this dead_letter stream";
}

static void preview_one(struct dl_op *op, const char *id, size_t len, const bk_reply *fields) {
  const char *why = fields ? refusal(op, fields) : "not on the stream";
  if (why == NULL) {
    char **ok = grow(op->ok, &op->capok, op->nok + 1, sizeof *ok, 64);
    if (ok) op->ok = ok;
    if (ok == NULL || (op->ok[op->nok] = strndup(id, len)) == NULL) {
      snprintf(op->why, sizeof op->why, "out of memory");
      return;
    }
    op->nok++;
    fputs(op->shown++ ? "," : "", op->rows);
    cj_text(op->rows, id, len);
    return;
  }
  bool listed = op->commit || op->nrefused < REFUSED_SHOWN; /* an action says every one */
  if (op->nrefused++ > 0 && listed) fputc(',', op->refused);
  if (!listed) return;
  fputs("{\"id\":", op->refused);
  cj_text(op->refused, id, len);
  fputs(",\"why\":", op->refused);
  cj_str(op->refused, why);
  fputc('}', op->refused);
}

static void preview_finish(struct dl_op *op, bool truncated) {
  fclose(op->rows);
  fclose(op->refused);
  op->rows = op->refused = NULL;
  char *buf;
  size_t len;
  FILE *f = console_json_begin(&buf, &len);
  if (f == NULL) return op_fail(op->c, op, "out of memory");
  fputs("{\"action\":", f);
  cj_str(f, op->action);
  fputs(",\"stream\":", f);
  cj_str(f, op->key);
  fprintf(f,
          ",\"count\":%lld,\"ids\":[%.*s],\"scanned\":%lld,\"truncated\":%s,\"refused_count\":%lld,"
          "\"refused\":[%.*s]}",
          op->shown, (int)op->rows_len, op->rows_buf ? op->rows_buf : "", op->scanned,
          truncated ? "true" : "false", op->nrefused, (int)op->refused_len,
          op->refused_buf ? op->refused_buf : "");
  console_json_end(op->req, f, &buf, &len);
  op_free(op);
}

/* ---- POST /api/dead-letters/replay and /delete ---- */

/* Logs who did what to which ids, 100 ids a line. */
static void audit(const struct dl_op *op, const char *what, char **ids, size_t n) {
  char count[24];
  snprintf(count, sizeof count, "%zu", n);
  for (size_t at = 0; at < n || at == 0; at += 100) {
    char *list = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&list, &len);
    if (f == NULL) return;
    for (size_t i = at; i < n && i < at + 100; i++) fprintf(f, "%s%s", i > at ? "," : "", ids[i]);
    fclose(f);
    log_line(LOG_INFO, NULL, what, "who", console_who(op->req), "action", op->action, "stream",
             op->key, "count", count, "ids", list ? list : "", NULL);
    free(list);
    if (n == 0) break;
  }
}

static void act_next(struct dl_op *op);

static void act_finish(struct dl_op *op) {
  fclose(op->result);
  fclose(op->refused);
  op->result = op->refused = NULL;
  char done[24], refused[24];
  snprintf(done, sizeof done, "%lld", op->nresult);
  snprintf(refused, sizeof refused, "%lld", op->nrefused);
  const char *counted =
      !strcmp(op->action, "replay") ? LOG_NUMBER "replayed" : LOG_NUMBER "deleted";
  if (op->why[0])
    log_line(LOG_WARN, NULL, "console action failed", "who", console_who(op->req), "action",
             op->action, "stream", op->key, counted, done, LOG_NUMBER "refused", refused, "error",
             op->why, NULL);
  else
    log_line(LOG_INFO, NULL, "console action done", "who", console_who(op->req), "action",
             op->action, "stream", op->key, counted, done, LOG_NUMBER "refused", refused, NULL);
  char *buf;
  size_t len;
  FILE *f = console_json_begin(&buf, &len);
  if (f == NULL) return op_fail(op->c, op, "out of memory");
  if (!strcmp(op->action, "replay"))
    fprintf(f, "{\"replayed\":[%.*s],\"skipped\":[%.*s]", (int)op->result_len,
            op->result_buf ? op->result_buf : "", (int)op->refused_len,
            op->refused_buf ? op->refused_buf : "");
  else
    fprintf(f, "{\"deleted\":%lld,\"refused\":[%.*s]", op->nresult, (int)op->refused_len,
            op->refused_buf ? op->refused_buf : "");
  if (op->why[0]) {
    fputs(",\"error\":", f);
    cj_str(f, op->why);
  }
  fputc('}', f);
  console_json_end(op->req, f, &buf, &len);
  op_free(op);
}

/* A replay script's reply: [[[id, to, new id]...], [[id, why]...], after, last]. */
static bool replayed(struct dl_op *op, const bk_reply *r) {
  if (r->type != BK_ARRAY || r->elements != 4 || r->element[0]->type != BK_ARRAY ||
      r->element[1]->type != BK_ARRAY)
    return false;
  const bk_reply *moved = r->element[0], *skipped = r->element[1];
  for (size_t i = 0; i < moved->elements; i++) {
    const bk_reply *m = moved->element[i];
    if (m->type != BK_ARRAY || m->elements != 3 || !console_is_str(m->element[0]) ||
        !console_is_str(m->element[1]) || !console_is_str(m->element[2]))
      return false;
    fputs(op->nresult++ ? ",{\"id\":" : "{\"id\":", op->result);
    cj_text(op->result, m->element[0]->str, m->element[0]->len);
    fputs(",\"to\":", op->result);
    cj_text(op->result, m->element[1]->str, m->element[1]->len);
    fputs(",\"new_id\":", op->result);
    cj_text(op->result, m->element[2]->str, m->element[2]->len);
    fputc('}', op->result);
  }
  for (size_t i = 0; i < skipped->elements; i++) {
    const bk_reply *k = skipped->element[i];
    if (k->type != BK_ARRAY || k->elements != 2 || !console_is_str(k->element[0]) ||
        !console_is_str(k->element[1]))
      return false;
    fputs(op->nrefused++ ? ",{\"id\":" : "{\"id\":", op->refused);
    cj_text(op->refused, k->element[0]->str, k->element[0]->len);
    fputs(",\"why\":", op->refused);
    cj_text(op->refused, k->element[1]->str, k->element[1]->len);
    fputc('}', op->refused);
  }
  return true;
}

static void act_answered(struct client *cl, void *arg, const bk_reply *r, const char *err) {
  (void)cl;
  struct dl_op *op = arg;
  const char *why = client_error(r, err);
  bool replay = !strcmp(op->action, "replay");
  if (why == NULL && replay && !replayed(op, r)) why = "unexpected reply to the replay script";
  if (why == NULL && !replay) {
    if (r->type == BK_INTEGER)
      op->nresult += r->integer;
    else
      why = "unexpected reply to XDEL";
  }
  /* refused by the ACL: the action cannot be done, whichever the ids */
  bool denied = why && (strstr(why, "NOPERM") || strstr(why, "no permissions"));
  if (why && replay && r && r->type == BK_ERROR && !denied) {
    /* The script refused its batch before moving any (it checks them all
     * first): one of them cannot be replayed (gone since the preview, its
     * source entry gone, ...). Each then goes alone, and the one refused is
     * named with why. */
    if (op->batch > 1) {
      op->done -= op->batch;
      op->one_by_one = true;
      return act_next(op);
    }
    fputs(op->nrefused++ ? ",{\"id\":" : "{\"id\":", op->refused);
    cj_str(op->refused, op->ok[op->done - 1]);
    fputs(",\"why\":", op->refused);
    cj_str(op->refused, why);
    fputc('}', op->refused);
    return act_next(op);
  }
  if (why) {
    snprintf(op->why, sizeof op->why, "%s", why);
    return act_finish(op);
  }
  act_next(op);
}

/* The next batch of the ids that passed: one replay script call (only to
 * the streams and groups of the handlers writing to this dead_letter
 * stream) or one XDEL. */
static void act_next(struct dl_op *op) {
  if (op->done == op->nok) return act_finish(op);
  size_t n = op->nok - op->done;
  if (n > (op->one_by_one ? 1 : ACTION_BATCH)) n = op->one_by_one ? 1 : ACTION_BATCH;
  op->batch = n;
  struct bk_args a;
  bk_args_init(&a);
  if (!strcmp(op->action, "replay")) {
    bk_args_str(&a, "EVAL");
    bk_args_str(&a, SCRIPT_REPLAY);
    bk_args_str(&a, "1");
    bk_args_str(&a, op->key);
    long long npairs = 0;
    for (size_t i = 0; i < op->c->npairs; i++)
      npairs += !strcmp(op->c->pairs[i].dead_letter, op->key);
    bk_args_num(&a, npairs);
    for (size_t i = 0; i < op->c->npairs; i++) {
      if (strcmp(op->c->pairs[i].dead_letter, op->key)) continue;
      bk_args_str(&a, op->c->pairs[i].stream);
      bk_args_str(&a, op->c->pairs[i].group);
    }
    bk_args_str(&a, "ids");
  } else {
    bk_args_str(&a, "XDEL");
    bk_args_str(&a, op->key);
  }
  for (size_t i = 0; i < n; i++) bk_args_str(&a, op->ok[op->done + i]);
  op->done += n;
  int rc = client_send_with(&op->c->client, &a, act_answered, op);
  bk_args_free(&a);
  if (rc != 0) {
    snprintf(op->why, sizeof op->why, "lost the connection to Redis");
    act_finish(op);
  }
}

static void act(struct dl_op *op) {
  audit(op, "console action", op->ok, op->nok);
  if ((op->result = open_memstream(&op->result_buf, &op->result_len)) == NULL)
    return op_fail(op->c, op, "out of memory");
  act_next(op);
}

/* The ids given, in the order given: each one's entry read (pipelined),
 * then judged; answered once every reply is in. */
static void ids_settle(struct dl_op *op) {
  if (!op->sent_all || op->answered < op->nsent) return;
  if (op->why[0]) {
    console_error(op->req, 502, "XRANGE %s: %s", op->key, op->why);
    return op_free(op);
  }
  if (op->commit) return act(op);
  preview_finish(op, false);
}

static void id_answered(struct client *cl, void *arg, const bk_reply *r, const char *err) {
  (void)cl;
  struct dl_op *op = arg;
  size_t i = op->answered++;
  const char *why = client_error(r, err);
  if (why && !op->why[0]) snprintf(op->why, sizeof op->why, "%s", why);
  if (!op->why[0]) {
    const char *id = op->ids[i];
    const bk_reply *e = r->type == BK_ARRAY && r->elements == 1 ? r->element[0] : NULL;
    bool found = e && e->type == BK_ARRAY && e->elements == 2 && e->element[1]->type == BK_ARRAY;
    preview_one(op, id, strlen(id), found ? e->element[1] : NULL);
  }
  ids_settle(op);
}

static void ids_go(struct console *c, void *arg) {
  struct dl_op *op = arg;
  for (size_t i = 0; i < op->nids && !op->why[0]; i++) {
    const char *id = op->ids[i];
    struct bk_args a;
    bk_args_init(&a);
    bk_args_str(&a, "XRANGE");
    bk_args_str(&a, op->key);
    bk_args_str(&a, id);
    bk_args_str(&a, id);
    if (client_send_with(&c->client, &a, id_answered, op) == 0)
      op->nsent++;
    else if (!op->why[0])
      snprintf(op->why, sizeof op->why, "lost the connection to Redis");
    bk_args_free(&a);
  }
  op->sent_all = true;
  ids_settle(op);
}

static void preview_go(struct console *c, void *arg) {
  struct dl_op *op = arg;
  if (op->ids) return ids_go(c, op);
  dl_page(op);
}

/* Drops the ids given again (each is replayed or deleted once), keeping the
 * order. Quadratic in the worst case only for ids given out of order. */
static void unique_ids(struct dl_op *op) {
  size_t kept = 0;
  for (size_t i = 0; i < op->nids; i++) {
    bool seen = false;
    for (size_t j = 0; j < kept && !seen; j++) seen = !strcmp(op->ids[j], op->ids[i]);
    if (seen)
      free(op->ids[i]);
    else
      op->ids[kept++] = op->ids[i];
  }
  op->nids = kept;
}

/* The request of a preview (commit false) or an action into op; false
 * when refused (answered). An action takes ids only: those its preview
 * showed. */
static bool action_request(struct console *c, struct dl_op *op, const char *action, bool commit) {
  struct console_request *req = op->req;
  const char *body = req->body ? req->body : "";
  op->action = action;
  op->commit = commit;
  op->key = cj_param(body, "stream");
  op->ids = cj_params(body, "id", PREVIEW_MAX + 1, &op->nids);
  if (op->nids > PREVIEW_MAX) {
    console_error(req, 413, "at most %d ids an action", PREVIEW_MAX);
    return false;
  }
  unique_ids(op);
  char *all = cj_param(body, "all");
  bool everything = !commit && all && !strcmp(all, "1");
  free(all);
  if (op->action == NULL || op->key == NULL || (op->ids == NULL) == !everything) {
    console_error(req, 400,
                  commit ? "give stream and the ids (id=...) the preview showed"
                         : "give action (replay or delete), stream, and id=... or all=1");
    return false;
  }
  if (!console_known_dead_letter(c, op->key)) {
    console_error(req, 404, "%s is not the dead_letter stream of a handler here", op->key);
    return false;
  }
  if (!strcmp(op->action, "replay") && c->npairs == 0) {
    console_error(req, 409, "replay needs the handler directory: give DIR to the console");
    return false;
  }
  for (size_t i = 0; i < op->nids; i++)
    if (!console_valid_id(op->ids[i])) {
      console_error(req, 400, "id %s is not an entry id (ms-seq)", op->ids[i]);
      return false;
    }
  if (everything && !dl_filters(op, body)) return false;
  op->rows = open_memstream(&op->rows_buf, &op->rows_len);
  op->refused = open_memstream(&op->refused_buf, &op->refused_len);
  if (op->rows == NULL || op->refused == NULL) {
    console_error(req, 500, "out of memory");
    return false;
  }
  return true;
}

void console_dl_preview(struct console *c, struct console_request *req) {
  struct dl_op *op = op_new(c, req);
  if (op == NULL) return;
  char *action = cj_param(req->body ? req->body : "", "action");
  const char *known = action && !strcmp(action, "replay")   ? "replay"
                      : action && !strcmp(action, "delete") ? "delete"
                                                            : NULL;
  free(action);
  if (!action_request(c, op, known, false)) return op_free(op);
  console_redis(c, preview_go, op_fail, op);
}

void console_dl_replay(struct console *c, struct console_request *req) {
  struct dl_op *op = op_new(c, req);
  if (op == NULL) return;
  if (!action_request(c, op, "replay", true)) return op_free(op);
  console_redis(c, ids_go, op_fail, op);
}

void console_dl_delete(struct console *c, struct console_request *req) {
  struct dl_op *op = op_new(c, req);
  if (op == NULL) return;
  if (!action_request(c, op, "delete", true)) return op_free(op);
  console_redis(c, ids_go, op_fail, op);
}

static void dl_answered(struct client *cl, void *arg, const bk_reply *r, const char *err) {
  (void)cl;
  struct dl_op *op = arg;
  const char *why = client_error(r, err);
  if (why) {
    console_error(op->req, 502, "XREVRANGE %s: %s", op->key, why);
    return op_free(op);
  }
  if (r->type != BK_ARRAY) {
    console_error(op->req, 502, "XREVRANGE %s: unexpected reply", op->key);
    return op_free(op);
  }
  for (size_t i = 0; i < r->elements; i++) {
    const bk_reply *e = r->element[i];
    if (e->type != BK_ARRAY || e->elements != 2 || !console_is_str(e->element[0]) ||
        e->element[1]->type != BK_ARRAY)
      continue;
    const bk_reply *id = e->element[0], *fields = e->element[1];
    op->scanned++;
    snprintf(op->before, sizeof op->before, "%.*s", (int)id->len, id->str);
    if (op->action) {
      if (matches(op, id, fields, true)) preview_one(op, id->str, id->len, fields);
      continue;
    }
    if (!matches(op, id, fields, false)) continue;
    count_reason(op, field(fields, HDR_DL_REASON));
    if (matches(op, id, fields, true) && op->shown < DL_SHOWN_MAX) dl_row(op, id, fields);
  }
  bool more = r->elements == DL_SCAN_PAGE;
  if (op->action) {
    /* bounded as the list is: the page says how far it looked */
    if (more && op->shown < PREVIEW_MAX && op->scanned < DL_SCAN_LIMIT) return dl_page(op);
    return preview_finish(op, more);
  }
  if (more && op->scanned < DL_SCAN_LIMIT && op->shown < DL_SHOWN_MAX) return dl_page(op);
  dl_finish(op, more);
}

static void dl_page(struct dl_op *op) {
  char end[72], count[16];
  snprintf(end, sizeof end, "%s%s", op->before[0] ? "(" : "", op->before[0] ? op->before : "+");
  snprintf(count, sizeof count, "%d", DL_SCAN_PAGE);
  send(op, (const char *[]){"XREVRANGE", op->key, end, "-", "COUNT", count}, 6, dl_answered);
}

static void dl_length(struct client *cl, void *arg, const bk_reply *r, const char *err) {
  (void)cl, (void)err;
  struct dl_op *op = arg;
  op->length = r && r->type == BK_INTEGER ? r->integer : -1;
}

static void dl_go(struct console *c, void *arg) {
  (void)c;
  struct dl_op *op = arg;
  if (console_send(c, (const char *[]){"XLEN", op->key}, 2, dl_length, op) != 0)
    return op_fail(c, op, "lost the connection to Redis");
  dl_page(op);
}

/* A time filter: Unix ms, or -1 when not given. */
static long long time_param(const char *query, const char *name, bool *bad) {
  char *v = cj_param(query, name);
  if (v == NULL || v[0] == '\0') {
    free(v);
    return -1;
  }
  char *end;
  long long n = strtoll(v, &end, 10);
  if (*end != '\0' || n < 0) *bad = true;
  free(v);
  return n;
}

static char *filter_param(const char *query, const char *name) {
  char *v = cj_param(query, name);
  if (v && v[0] == '\0') {
    free(v);
    return NULL;
  }
  return v;
}

/* The filters of a dead-letter request (query string or form body) into
 * op; false when one is malformed (answered). */
static bool dl_filters(struct dl_op *op, const char *params) {
  bool bad = false;
  op->reason = filter_param(params, "reason");
  op->handler = filter_param(params, "handler");
  op->text = filter_param(params, "q");
  op->since = time_param(params, "since", &bad);
  op->until = time_param(params, "until", &bad);
  char *before = filter_param(params, "before");
  if (before && !console_valid_id(before)) bad = true;
  if (before) snprintf(op->before, sizeof op->before, "%s", before);
  free(before);
  if (bad) console_error(op->req, 400, "since and until are Unix ms; before is an entry id");
  return !bad;
}

void console_dead_letters(struct console *c, struct console_request *req) {
  struct dl_op *op = op_new(c, req);
  if (op == NULL) return;
  op->key = cj_param(req->query, "stream");
  if (op->key == NULL) {
    console_error(req, 400, "give stream (a dead_letter stream)");
    return op_free(op);
  }
  if (!console_known_dead_letter(c, op->key)) {
    console_error(req, 404, "%s is not the dead_letter stream of a handler here", op->key);
    return op_free(op);
  }
  if (!dl_filters(op, req->query)) return op_free(op);
  if ((op->rows = open_memstream(&op->rows_buf, &op->rows_len)) == NULL) {
    console_error(req, 500, "out of memory");
    return op_free(op);
  }
  console_redis(c, dl_go, op_fail, op);
}
