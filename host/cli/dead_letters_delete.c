/* dead_letters_delete: `luastream dead-letters delete`
 * (dead_letters_delete.h). */
#include "dead_letters_delete.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "dead_letters_entry.h"
#include "options.h"
#include "wire.h"

#define DELETE_BATCH 500 /* --all, --reason: entries per XRANGE (and XDEL) */
#define REASON_MAX 64    /* a reason as printed, at most */

struct dl_delete {
  const char *stream;
  const char *reason;     /* --reason, or NULL */
  const char *const *ids; /* --id (duplicates dropped), or NULL for --all and --reason */
  int nids;
  bool yes;
  char (*reasons)[REASON_MAX]; /* --id: each one's reason, as its XRANGE answers */
  int answered;                /* --id: XRANGE answers so far */
  bool refused;                /* --id: one of them is missing or not a dead letter */
  char after[64], last[64];    /* --all, --reason: where the next batch starts and ends */
  long long matched;           /* dead letters picked (deleted with --yes) */
  long long deleted;           /* XDEL's count */
  long long others;            /* --reason: dead letters of other reasons */
  long long left;              /* entries that are not dead letters */
};

/* XRANGE (or XREVRANGE) STREAM from to COUNT count. */
static void send_range(struct client *c, const char *cmd, const char *from, const char *to,
                       long long count, bk_reply_cb *cb) {
  struct dl_delete *d = c->data;
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, cmd);
  bk_args_str(&a, d->stream);
  bk_args_str(&a, from);
  bk_args_str(&a, to);
  bk_args_str(&a, "COUNT");
  bk_args_num(&a, count);
  client_send(c, &a, cb);
  bk_args_free(&a);
}

/* An entry's dead-letter-reason, printable, into out. */
static void reason_of(const bk_reply *fields, char *out) {
  const bk_reply *v = client_field(fields, HDR_DL_REASON);
  size_t n = v ? v->len : 0;
  if (n >= REASON_MAX) n = REASON_MAX - 1;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)v->str[i];
    out[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
  }
  out[n] = '\0';
  if (n == 0) strcpy(out, "no reason");
}

static bool answer_ok(struct client *c, const bk_reply *r, const char *err, const char *what) {
  struct dl_delete *d = c->data;
  const char *why = client_error(r, err);
  if (why == NULL && (r->type == BK_INTEGER || dl_is_range(r))) return true;
  fprintf(stderr, "luastream: cannot delete from %s on %s: %s %s: %s\n", d->stream, c->b->name,
          what, d->stream, why ? why : "unexpected reply");
  if (d->deleted)
    printf("deleted %lld dead %s from %s before the failure\n", d->deleted,
           dl_plural(d->deleted, "letter", "letters"), d->stream);
  client_done(c, 1);
  return false;
}

static void summary(struct client *c) {
  struct dl_delete *d = c->data;
  char which[REASON_MAX + 32] = "";
  if (d->reason) snprintf(which, sizeof which, " of reason %s", d->reason);
  if (d->yes) {
    printf("deleted %lld dead %s%s from %s", d->deleted, dl_plural(d->deleted, "letter", "letters"),
           which, d->stream);
    if (d->deleted < d->matched) printf(" (%lld already gone)", d->matched - d->deleted);
  } else if (d->matched) {
    printf("would delete %lld dead %s%s from %s: run again with --yes to delete %s", d->matched,
           dl_plural(d->matched, "letter", "letters"), which, d->stream,
           d->matched == 1 ? "it" : "them");
  } else {
    printf("0 dead letters%s to delete on %s", which, d->stream);
  }
  if (d->others) printf(" (%lld of other reasons left)", d->others);
  if (d->left)
    printf(" (%lld %s left)", d->left,
           d->left == 1 ? "entry that is not a dead letter" : "entries that are not dead letters");
  putchar('\n');
  if (d->left && d->matched == 0 && d->others == 0)
    fprintf(stderr,
            "luastream: %s is not a dead-letter stream: none of its entries carries dead-letter "
            "provenance (the %s field); a handler's dead_letter field names its dead-letter "
            "stream\n",
            d->stream, HDR_DL_STREAM);
  client_done(c, d->left ? 1 : 0);
}

static void deleted(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct dl_delete *d = c->data;
  if (c->finished || !answer_ok(c, r, err, "XDEL")) return;
  d->deleted += r->integer;
  if (d->ids || d->after[0] == '\0') summary(c); /* else the next XRANGE, sent behind, goes on */
}

/* XDEL STREAM ids... */
static void send_xdel(struct client *c, const char *const *ids, int n) {
  struct dl_delete *d = c->data;
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "XDEL");
  bk_args_str(&a, d->stream);
  for (int i = 0; i < n; i++) bk_args_str(&a, ids[i]);
  client_send(c, &a, deleted);
  bk_args_free(&a);
}

/* ---- --id ---- */

static void id_answered(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct dl_delete *d = c->data;
  if (c->finished || !answer_ok(c, r, err, "XRANGE")) return;
  int i = d->answered++;
  if (r->elements == 0) {
    fprintf(stderr, "luastream: no entry %s on %s\n", d->ids[i], d->stream);
    d->refused = true;
  } else if (!dl_has_provenance(r->element[0]->element[1])) {
    fprintf(stderr,
            "luastream: entry %s on %s is not a dead letter luastream wrote (no %s field): "
            "delete deletes dead letters only\n",
            d->ids[i], d->stream, HDR_DL_STREAM);
    d->refused = true;
  } else {
    reason_of(r->element[0]->element[1], d->reasons[i]);
  }
  if (d->answered < d->nids) return;
  if (d->refused) {
    fprintf(stderr, "luastream: nothing deleted from %s\n", d->stream);
    client_done(c, 1);
    return;
  }
  for (int k = 0; k < d->nids; k++)
    printf("%s %s (%s)\n", d->yes ? "deleting" : "would delete", d->ids[k], d->reasons[k]);
  d->matched = d->nids;
  if (d->yes)
    send_xdel(c, d->ids, d->nids);
  else
    summary(c);
}

/* ---- --all, --reason ---- */

static void batch(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct dl_delete *d = c->data;
  if (c->finished || !answer_ok(c, r, err, "XRANGE")) return;
  const char **picked = malloc((r->elements ? r->elements : 1) * sizeof *picked);
  if (picked == NULL) {
    fprintf(stderr, "luastream: out of memory\n");
    client_done(c, 1);
    return;
  }
  int n = 0;
  for (size_t i = 0; i < r->elements; i++) {
    const bk_reply *id = r->element[i]->element[0], *fields = r->element[i]->element[1];
    char reason[REASON_MAX];
    if (!dl_has_provenance(fields)) {
      fprintf(stderr, "luastream: left %s on %s: not a dead letter luastream wrote (no %s field)\n",
              id->str, d->stream, HDR_DL_STREAM);
      d->left++;
      continue;
    }
    reason_of(fields, reason);
    const bk_reply *v = client_field(fields, HDR_DL_REASON);
    if (d->reason &&
        !(v && v->len == strlen(d->reason) && memcmp(v->str, d->reason, v->len) == 0)) {
      d->others++;
      continue;
    }
    printf("%s %s (%s)\n", d->yes ? "deleting" : "would delete", id->str, reason);
    picked[n++] = id->str;
  }
  d->matched += n;
  /* the next batch starts after this one's last entry; "" when it was the last */
  d->after[0] = '\0';
  if (r->elements == DELETE_BATCH)
    snprintf(d->after, sizeof d->after, "(%s", r->element[r->elements - 1]->element[0]->str);
  if (d->yes && n > 0) send_xdel(c, picked, n); /* its answer ends when nothing follows */
  free(picked);
  if (d->after[0])
    send_range(c, "XRANGE", d->after, d->last, DELETE_BATCH, batch);
  else if (!d->yes || n == 0)
    summary(c);
}

static void newest(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct dl_delete *d = c->data;
  if (c->finished || !answer_ok(c, r, err, "XREVRANGE")) return;
  if (r->elements == 0) return summary(c); /* an empty stream */
  const bk_reply *id = r->element[0]->element[0];
  snprintf(d->last, sizeof d->last, "%.*s", (int)id->len, id->str);
  send_range(c, "XRANGE", "-", d->last, DELETE_BATCH, batch);
}

static void typed(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct dl_delete *d = c->data;
  if (c->finished) return;
  switch (dl_stream_type(c, d->stream, r, err)) {
    case DL_FAILED: return;
    case DL_MISSING:
      if (d->ids) {
        fprintf(stderr, "luastream: no entry %s on %s: there is no such stream on %s\n", d->ids[0],
                d->stream, c->b->name);
        client_done(c, 1);
        return;
      }
      printf("0 dead letters on %s (no such stream on %s)\n", d->stream, c->b->name);
      client_done(c, 0);
      return;
    case DL_STREAM: break;
  }
  if (d->ids == NULL) return send_range(c, "XREVRANGE", "+", "-", 1, newest);
  for (int i = 0; i < d->nids; i++) send_range(c, "XRANGE", d->ids[i], d->ids[i], 1, id_answered);
}

static void delete_start(struct client *c) {
  dl_send_type(c, ((struct dl_delete *)c->data)->stream, typed);
}

static bool known_reason(const char *reason) {
  for (const struct wire_name *w = wire_reasons; w->name; w++)
    if (!strcmp(w->text, reason)) return true;
  return false;
}

int cmd_dl_delete(int argc, char **argv) {
  struct cli_options o;
  int rc = cli_parse(CLI_DL_DELETE, argc, argv, &o, stdout, stderr);
  if (rc != CLI_OK) return rc == CLI_DONE ? 0 : 2;
  struct dl_delete d = {
      .stream = o.pos[0], .reason = cli_text(&o, OPT_REASON), .yes = cli_given(&o, OPT_YES)};
  if (d.reason && !known_reason(d.reason)) {
    fprintf(stderr, "luastream: --reason %s: not a reason luastream writes; the reasons are",
            d.reason);
    for (const struct wire_name *w = wire_reasons; w->name; w++)
      fprintf(stderr, "%s %s", w == wire_reasons ? "" : ",", w->text);
    fputc('\n', stderr);
    return 2;
  }
  const struct cli_value *ids = &o.v[OPT_ID];
  const char *unique[CLI_ITEMS_MAX];
  for (int i = 0; i < ids->nitems; i++) {
    bool seen = false;
    for (int k = 0; k < d.nids && !seen; k++) seen = !strcmp(unique[k], ids->items[i]);
    if (!seen) unique[d.nids++] = ids->items[i];
  }
  if (d.nids) {
    d.ids = unique;
    if ((d.reasons = calloc((size_t)d.nids, sizeof *d.reasons)) == NULL) {
      fprintf(stderr, "luastream: out of memory\n");
      return 1;
    }
  }
  rc = client_run(&o.url, "dead-letters", delete_start, &d);
  free(d.reasons);
  return rc;
}
