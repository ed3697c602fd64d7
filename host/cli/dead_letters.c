/* dead_letters: `luastream dead-letters` and its `list` (dead_letters.h). */
#include "dead_letters.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "dead_letters_delete.h"
#include "dead_letters_entry.h"
#include "dead_letters_replay.h"
#include "entry.h"
#include "options.h"
#include "wire.h"

static const char usage_dead_letters[] =
    "usage: luastream dead-letters list [--redis URL | --redis-file PATH]\n"
    "                                   [--tls-...] [--count N] STREAM\n"
    "       luastream dead-letters replay [--redis URL | --redis-file PATH]\n"
    "                                     [--tls-...] [--load-timeout DURATION]\n"
    "                                     [--trust-owner USER]... [--allow-writable-dir]\n"
    "                                     (--id ID... | --all) DIR STREAM\n"
    "       luastream dead-letters delete [--redis URL | --redis-file PATH]\n"
    "                                     [--tls-...]\n"
    "                                     (--id ID... | --all | --reason REASON)\n"
    "                                     [--yes] STREAM\n"
    "\n"
    "A handler with dead_letter = \"STREAM\" moves the entries it rejects, cannot\n"
    "decode or gives up on (max_deliveries) to STREAM, each with where it came\n"
    "from and why (the dead-letter-* fields). A handler with partitions = N has\n"
    "one such stream per partition, STREAM:{0} ... STREAM:{N-1}: name each one\n"
    "(quoted for the shell: 'payments.dead:{3}'); replay puts its letters back on\n"
    "their own partition.\n"
    "\n"
    "  list     prints the dead letters of STREAM, oldest first\n"
    "  replay   puts dead letters back for their group (its retry stream), for\n"
    "           the handlers of DIR whose dead_letter is STREAM only\n"
    "  delete   deletes dead letters from STREAM (with --yes; without, says what\n"
    "           it would delete)\n"
    "\n"
    "`luastream dead-letters list --help` (and replay, delete) say more.\n";

#define LABEL_WIDTH 13 /* "original id" and two spaces */

static void put_line(const char *label, const char *s, size_t n) {
  printf("  %-*s", LABEL_WIDTH, label);
  dl_put_text(s, n, LABEL_WIDTH + 2);
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

/* A dead letter of an entry read cut (too large to hold): says so under the
 * provenance. */
static void print_cut(const bk_reply *fields) {
  const bk_reply *v = client_field(fields, HDR_DL_CUT);
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
  if (client_field(fields, HDR_DL_STREAM) == NULL)
    printf("  (no %s field: not a dead letter luastream wrote)\n", HDR_DL_STREAM);
  for (size_t p = 0; p < sizeof provenance / sizeof provenance[0]; p++) {
    const bk_reply *v = client_field(fields, provenance[p].field);
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
    dl_put_text(k->str, k->len, LABEL_WIDTH + 2);
    printf(": ");
    dl_put_text(v->str, v->len, LABEL_WIDTH + 2);
    putchar('\n');
  }
  if (data) put_line("data", data->str, data->len);
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
  if (why || !dl_is_range(r)) {
    fprintf(stderr, "luastream: cannot list %s on %s: XRANGE %s: %s\n", l->stream, c->b->name,
            l->stream, why ? why : "unexpected reply to XRANGE");
    client_done(c, 1);
    return;
  }
  size_t letters = 0;
  for (size_t i = 0; i < r->elements; i++) letters += dl_has_provenance(r->element[i]->element[1]);
  if (r->elements > 0 && letters == 0) { /* a source stream, most likely */
    char which[96];
    if ((long long)r->elements < l->total)
      snprintf(which, sizeof which, "none of its first %zu entries (of %lld) carries", r->elements,
               l->total);
    else if (r->elements == 1)
      snprintf(which, sizeof which, "its one entry carries no");
    else
      snprintf(which, sizeof which, "none of its %zu entries carries", r->elements);
    fprintf(stderr,
            "luastream: %s on %s is not a dead-letter stream: %s dead-letter provenance (the %s "
            "field luastream writes on each dead letter); a handler's dead_letter field names "
            "its dead-letter stream\n",
            l->stream, c->b->name, which, HDR_DL_STREAM);
    client_done(c, 1);
    return;
  }
  for (size_t i = 0; i < r->elements; i++) {
    if (i) putchar('\n');
    print_dead_letter(r->element[i]);
  }
  if (r->elements) putchar('\n');
  if ((long long)r->elements < l->total)
    printf("%zu of %lld entries on %s shown, oldest first (--count N shows more)\n", r->elements,
           l->total, l->stream);
  else if (letters == r->elements)
    printf("%zu dead letter%s on %s\n", r->elements, r->elements == 1 ? "" : "s", l->stream);
  else /* the others are marked above */
    printf("%zu entries on %s, %zu of them dead letter%s\n", r->elements, l->stream, letters,
           letters == 1 ? "" : "s");
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
  const char *stream = ((struct dl_list *)c->data)->stream;
  /* a stream: XLEN and XRANGE, sent behind TYPE, print */
  if (dl_stream_type(c, stream, r, err) != DL_MISSING) return;
  printf(
      "0 dead letters on %s (no such stream on %s: a handler's dead_letter stream is made by "
      "its first dead letter)\n",
      stream, c->b->name);
  client_done(c, 0);
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
  if (sub && !strcmp(sub, "delete")) return cmd_dl_delete(argc - 1, argv + 1);
  if (sub)
    fprintf(stderr, "luastream: unknown dead-letters command \"%s\"\n\n%s", sub,
            usage_dead_letters);
  else
    fputs(usage_dead_letters, stderr);
  return 2;
}
