/* dead_letters: `luastream dead-letters list|replay` (dead_letters.h). */
#include "dead_letters.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "entry.h"
#include "options.h"
#include "scripts.h"
#include "wire.h"

#define REPLAY_BATCH 500 /* replay --all: entries per script call */

static const char usage_dead_letters[] =
    "usage: luastream dead-letters list [--redis URL | --redis-file PATH]\n"
    "                                   [--count N] STREAM\n"
    "       luastream dead-letters replay [--redis URL | --redis-file PATH]\n"
    "                                     (--id ID... | --all) STREAM\n"
    "\n"
    "A handler with dead_letter = \"STREAM\" moves the entries it rejects, cannot\n"
    "decode or gives up on (max_deliveries) to STREAM, each with where it came\n"
    "from and why (the dead-letter-* fields). A handler with partitions = N has\n"
    "one such stream per partition, STREAM:{0} ... STREAM:{N-1}: name each one\n"
    "(quoted for the shell: 'payments.dead:{3}'); replay puts its letters back on\n"
    "their own partition.\n"
    "\n"
    "  list     prints the dead letters of STREAM, oldest first\n"
    "  replay   puts dead letters back for their group (its retry stream)\n"
    "\n"
    "`luastream dead-letters list --help` and `... replay --help` say more.\n";

/* Writes n bytes of s for a person to read: control characters (but tab) as
 * \xNN, and each line after the first indented by `indent` spaces. Trailing
 * newlines are dropped. */
static void put_text(const char *s, size_t n, int indent) {
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r')) n--;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '\n')
      printf("\n%*s", indent, "");
    else if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
      printf("\\x%02x", ch);
    else
      putchar(ch);
  }
}

#define LABEL_WIDTH 13 /* "original id" and two spaces */

static void put_line(const char *label, const char *s, size_t n) {
  printf("  %-*s", LABEL_WIDTH, label);
  put_text(s, n, LABEL_WIDTH + 2);
  putchar('\n');
}

/* dead-letter-time (Unix ms) as ISO-8601 UTC; false when it is not a number. */
static bool iso_time(const char *s, size_t n, char *out, size_t outlen) {
  char *end;
  char buf[32];
  if (n == 0 || n >= sizeof buf) return false;
  memcpy(buf, s, n);
  buf[n] = '\0';
  long long ms = strtoll(buf, &end, 10);
  if (*end != '\0' || ms < 0) return false;
  time_t secs = (time_t)(ms / 1000);
  struct tm tm;
  if (gmtime_r(&secs, &tm) == NULL) return false;
  size_t len = strftime(out, outlen, "%Y-%m-%dT%H:%M:%S", &tm);
  if (len == 0) return false;
  snprintf(out + len, outlen - len, ".%03dZ", (int)(ms % 1000));
  return true;
}

static const bk_reply *field_value(const bk_reply *fields, const char *name) {
  size_t len = strlen(name);
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    const bk_reply *k = fields->element[i];
    if (k->type == BK_STRING && k->len == len && memcmp(k->str, name, len) == 0)
      return fields->element[i + 1];
  }
  return NULL;
}

/* A dead letter of an entry read cut (too large to hold): says so under the
 * provenance. */
static void print_cut(const bk_reply *fields) {
  const bk_reply *v = field_value(fields, HDR_DL_CUT);
  if (v == NULL || v->type != BK_STRING) return;
  char line[200];
  snprintf(line, sizeof line,
           "%.*s bytes: its fields are cut here to %u bytes each (replay reads the source entry)",
           v->len > 24 ? 24 : (int)v->len, v->str, ENTRY_CUT_KEEP);
  put_line("cut", line, strlen(line));
}

/* One entry of XRANGE as a block: its id, the provenance in a fixed order,
 * the other headers, the body. */
static void print_dead_letter(const bk_reply *e) {
  static const struct {
    const char *field, *label;
  } provenance[] = {
      {HDR_DL_STREAM, "source"},         {HDR_DL_GROUP, "group"},     {HDR_DL_ID, "original id"},
      {HDR_DL_DELIVERIES, "deliveries"}, {HDR_DL_HANDLER, "handler"}, {HDR_DL_REASON, "reason"},
      {HDR_DL_ERROR, "error"},           {HDR_DL_TIME, "time"},
  };
  const bk_reply *id = e->element[0], *fields = e->element[1];
  printf("dead letter %.*s\n", (int)id->len, id->str);
  if (field_value(fields, HDR_DL_STREAM) == NULL)
    printf("  (no %s field: not a dead letter luastream wrote)\n", HDR_DL_STREAM);
  for (size_t p = 0; p < sizeof provenance / sizeof provenance[0]; p++) {
    const bk_reply *v = field_value(fields, provenance[p].field);
    if (v == NULL || v->type != BK_STRING || v->len == 0) continue;
    char when[48];
    if (!strcmp(provenance[p].field, HDR_DL_TIME) && iso_time(v->str, v->len, when, sizeof when))
      put_line("time", when, strlen(when));
    else
      put_line(provenance[p].label, v->str, v->len);
  }
  print_cut(fields);
  const bk_reply *data = NULL;
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    const bk_reply *k = fields->element[i], *v = fields->element[i + 1];
    if (k->len == strlen(HDR_DATA) && !memcmp(k->str, HDR_DATA, k->len)) {
      data = v;
      continue;
    }
    if (k->len >= 12 && !memcmp(k->str, "dead-letter-", 12)) continue;
    printf("  %-*s", LABEL_WIDTH, "header");
    put_text(k->str, k->len, LABEL_WIDTH + 2);
    printf(": ");
    put_text(v->str, v->len, LABEL_WIDTH + 2);
    putchar('\n');
  }
  if (data) put_line("data", data->str, data->len);
}

/* An XRANGE reply: [[id, [field, value, ...]], ...]. */
static bool is_range(const bk_reply *r) {
  if (r == NULL || r->type != BK_ARRAY) return false;
  for (size_t i = 0; i < r->elements; i++) {
    const bk_reply *e = r->element[i];
    if (e->type != BK_ARRAY || e->elements != 2 || e->element[0]->type != BK_STRING ||
        e->element[1]->type != BK_ARRAY)
      return false;
    for (size_t j = 0; j < e->element[1]->elements; j++)
      if (e->element[1]->element[j]->type != BK_STRING) return false;
  }
  return true;
}

/* TYPE's answer for a dead-letter stream: true when it is one; else says
 * why not (missing, another type) and ends the session with status 1. */
static bool dl_stream_exists(struct client *c, const char *stream, const bk_reply *r,
                             const char *err) {
  const char *why = client_error(r, err);
  if (why == NULL && (r->type == BK_STATUS || r->type == BK_STRING)) {
    if (r->len == 6 && !memcmp(r->str, "stream", 6)) return true;
    if (r->len == 4 && !memcmp(r->str, "none", 4))
      fprintf(stderr,
              "luastream: stream %s does not exist on %s (check the name: a handler's "
              "dead_letter stream is made by its first dead letter)\n",
              stream, c->b->name);
    else
      fprintf(stderr, "luastream: %s on %s is a %.*s, not a stream\n", stream, c->b->name,
              (int)r->len, r->str);
  } else {
    fprintf(stderr, "luastream: cannot read %s on %s: TYPE %s: %s\n", stream, c->b->name, stream,
            why ? why : "unexpected reply to TYPE");
  }
  client_done(c, 1);
  return false;
}

/* TYPE stream, answered by cb. */
static int dl_send_type(struct client *c, const char *stream, bk_reply_cb *cb) {
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "TYPE");
  bk_args_str(&a, stream);
  int rc = client_send(c, &a, cb);
  bk_args_free(&a);
  return rc;
}

struct dl_list {
  const char *stream;
  long long count;
  long long total; /* XLEN */
};

static void dl_list_range(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct dl_list *l = c->data;
  if (c->finished) return;
  const char *why = client_error(r, err);
  if (why || !is_range(r)) {
    fprintf(stderr, "luastream: cannot list %s on %s: XRANGE %s: %s\n", l->stream, c->b->name,
            l->stream, why ? why : "unexpected reply to XRANGE");
    client_done(c, 1);
    return;
  }
  for (size_t i = 0; i < r->elements; i++) {
    if (i) putchar('\n');
    print_dead_letter(r->element[i]);
  }
  if (r->elements) putchar('\n');
  if (r->elements == 0)
    printf("no dead letters on %s\n", l->stream);
  else if ((long long)r->elements < l->total)
    printf("%zu of %lld entries on %s shown, oldest first (--count N shows more)\n", r->elements,
           l->total, l->stream);
  else
    printf("%zu dead letter%s on %s\n", r->elements, r->elements == 1 ? "" : "s", l->stream);
  client_done(c, 0);
}

static void dl_list_len(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct dl_list *l = c->data;
  if (c->finished) return;
  if (r && r->type == BK_INTEGER) {
    l->total = r->integer;
    return; /* the XRANGE sent behind it prints */
  }
  const char *why = client_error(r, err);
  fprintf(stderr, "luastream: cannot list %s on %s: XLEN %s: %s\n", l->stream, c->b->name,
          l->stream, why ? why : "unexpected reply to XLEN");
  client_done(c, 1);
}

static void dl_list_type(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  if (c->finished) return;
  dl_stream_exists(c, ((struct dl_list *)c->data)->stream, r, err); /* XLEN and XRANGE follow */
}

static void dl_list_start(struct client *c) {
  struct dl_list *l = c->data;
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "XLEN");
  bk_args_str(&a, l->stream);
  int rc = dl_send_type(c, l->stream, dl_list_type);
  if (rc == 0) rc = client_send(c, &a, dl_list_len);
  bk_args_reset(&a);
  bk_args_str(&a, "XRANGE");
  bk_args_str(&a, l->stream);
  bk_args_str(&a, "-");
  bk_args_str(&a, "+");
  bk_args_str(&a, "COUNT");
  bk_args_num(&a, l->count);
  if (rc == 0) client_send(c, &a, dl_list_range);
  bk_args_free(&a);
}

static int cmd_dl_list(int argc, char **argv) {
  struct cli_options o;
  int rc = cli_parse(CLI_DL_LIST, argc, argv, &o, stdout, stderr);
  if (rc != CLI_OK) return rc == CLI_DONE ? 0 : 2;
  struct dl_list l = {.stream = o.pos[0], .count = cli_num(&o, OPT_COUNT)};
  return client_run(&o.url, "dead-letters", dl_list_start, &l);
}

struct dl_replay {
  const char *stream;
  const char *const *ids; /* --id, or NULL for --all */
  int nids;
  char after[64], last[64]; /* --all: where the next batch starts and ends */
  long long replayed;
  long long skipped;
};

static void dl_replay_send(struct client *c);

static bool is_string_reply(const bk_reply *r) { return r && r->type == BK_STRING; }

static void dl_replay_done(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct dl_replay *rp = c->data;
  if (c->finished) return;
  const char *why = client_error(r, err);
  bool ok = why == NULL && r->type == BK_ARRAY && r->elements == 4 &&
            r->element[0]->type == BK_ARRAY && r->element[1]->type == BK_ARRAY &&
            is_string_reply(r->element[2]) && is_string_reply(r->element[3]) &&
            r->element[2]->len < sizeof rp->after && r->element[3]->len < sizeof rp->last;
  for (size_t i = 0; ok && i < r->element[0]->elements; i++) {
    const bk_reply *m = r->element[0]->element[i];
    ok = m->type == BK_ARRAY && m->elements == 3 && is_string_reply(m->element[0]) &&
         is_string_reply(m->element[1]) && is_string_reply(m->element[2]);
  }
  for (size_t i = 0; ok && i < r->element[1]->elements; i++) {
    const bk_reply *sk = r->element[1]->element[i];
    ok = sk->type == BK_ARRAY && sk->elements == 2 && is_string_reply(sk->element[0]) &&
         is_string_reply(sk->element[1]);
  }
  if (!ok) {
    if (why && !strncmp(why, "ERR ", 4)) why += 4;
    /* Refused by the ACL: Redis names neither the script nor the key. */
    bool refused =
        why && (strstr(why, "NOPERM") || strstr(why, "can't access") || strstr(why, "can't run"));
    if (refused)
      fprintf(stderr,
              "luastream: replay from %s failed: the replay script (EVAL on %s: TYPE, XRANGE, "
              "XREVRANGE and XDEL there, TYPE and XADD on the retry stream "
              "<dead-letter-stream>:retry:<dead-letter-group> each entry names) was refused: %s\n",
              rp->stream, rp->stream, why);
    else
      fprintf(stderr, "luastream: replay from %s failed: %s\n", rp->stream,
              why ? why : "unexpected reply to the replay script");
    if (rp->replayed)
      printf("replayed %lld dead letter%s from %s before the failure\n", rp->replayed,
             rp->replayed == 1 ? "" : "s", rp->stream);
    client_done(c, 1);
    return;
  }
  const bk_reply *moved = r->element[0], *skipped = r->element[1];
  for (size_t i = 0; i < moved->elements; i++) {
    const bk_reply *m = moved->element[i];
    printf("%.*s -> %.*s %.*s\n", (int)m->element[0]->len, m->element[0]->str,
           (int)m->element[1]->len, m->element[1]->str, (int)m->element[2]->len,
           m->element[2]->str);
  }
  for (size_t i = 0; i < skipped->elements; i++) {
    const bk_reply *sk = skipped->element[i];
    fprintf(stderr, "luastream: skipped: %.*s\n", (int)sk->element[1]->len, sk->element[1]->str);
  }
  rp->replayed += (long long)moved->elements;
  rp->skipped += (long long)skipped->elements;
  fflush(stdout);
  if (r->element[2]->len > 0) { /* --all: another batch */
    snprintf(rp->after, sizeof rp->after, "%.*s", (int)r->element[2]->len, r->element[2]->str);
    snprintf(rp->last, sizeof rp->last, "%.*s", (int)r->element[3]->len, r->element[3]->str);
    dl_replay_send(c);
    return;
  }
  printf("replayed %lld dead letter%s from %s", rp->replayed, rp->replayed == 1 ? "" : "s",
         rp->stream);
  if (rp->skipped)
    printf(" (%lld entr%s skipped, left on %s)", rp->skipped, rp->skipped == 1 ? "y" : "ies",
           rp->stream);
  putchar('\n');
  client_done(c, 0);
}

static void dl_replay_send(struct client *c) {
  struct dl_replay *rp = c->data;
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "EVAL");
  bk_args_str(&a, SCRIPT_REPLAY);
  bk_args_str(&a, "1");
  bk_args_str(&a, rp->stream);
  if (rp->ids) {
    bk_args_str(&a, "ids");
    for (int i = 0; i < rp->nids; i++) bk_args_str(&a, rp->ids[i]);
  } else {
    bk_args_str(&a, "all");
    bk_args_str(&a, rp->after);
    bk_args_str(&a, rp->last);
    bk_args_num(&a, REPLAY_BATCH);
  }
  client_send(c, &a, dl_replay_done);
  bk_args_free(&a);
}

static void dl_replay_type(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  if (c->finished) return;
  if (dl_stream_exists(c, ((struct dl_replay *)c->data)->stream, r, err)) dl_replay_send(c);
}

static void dl_replay_start(struct client *c) {
  dl_send_type(c, ((struct dl_replay *)c->data)->stream, dl_replay_type);
}

static int cmd_dl_replay(int argc, char **argv) {
  struct cli_options o;
  int rc = cli_parse(CLI_DL_REPLAY, argc, argv, &o, stdout, stderr);
  if (rc != CLI_OK) return rc == CLI_DONE ? 0 : 2;
  const struct cli_value *ids = &o.v[OPT_ID];
  struct dl_replay rp = {
      .stream = o.pos[0], .ids = ids->nitems ? ids->items : NULL, .nids = ids->nitems};
  strcpy(rp.after, "-");
  strcpy(rp.last, "+");
  return client_run(&o.url, "dead-letters", dl_replay_start, &rp);
}

int cmd_dead_letters(int argc, char **argv) {
  const char *sub = argc > 0 ? argv[0] : NULL;
  if (sub && (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help"))) {
    fputs(usage_dead_letters, stdout);
    return 0;
  }
  if (sub && !strcmp(sub, "--version")) {
    cli_print_version(stdout);
    return 0;
  }
  if (sub && !strcmp(sub, "list")) return cmd_dl_list(argc - 1, argv + 1);
  if (sub && !strcmp(sub, "replay")) return cmd_dl_replay(argc - 1, argv + 1);
  if (sub)
    fprintf(stderr, "luastream: unknown dead-letters command \"%s\"\n\n%s", sub,
            usage_dead_letters);
  else
    fputs(usage_dead_letters, stderr);
  return 2;
}
