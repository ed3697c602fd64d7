/* dead_letters_replay: `luastream dead-letters replay`
 * (dead_letters_replay.h). */
#include "dead_letters_replay.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "dead_letters_entry.h"
#include "grow.h"
#include "handler_name.h"
#include "host.h"
#include "options.h"
#include "partition.h"
#include "scripts.h"

#define REPLAY_BATCH 500 /* replay --all: entries per script call */

/* A stream and group whose dead letters go to STREAM: where its letters may
 * go back to. */
struct dl_pair {
  char *stream, *group;
  char *handlers; /* the files, ", "-separated */
};

struct dl_replay {
  const char *dir, *stream;
  const char *const *ids; /* --id, or NULL for --all */
  int nids;
  struct dl_pair *pairs; /* the handlers of DIR whose dead_letter is STREAM */
  size_t npairs, pairs_cap;
  char **others; /* the other dead_letter streams of DIR, for a refusal */
  size_t nothers, others_cap;
  bool oom;
  bool told;                /* say_allowed has run */
  char after[64], last[64]; /* --all: where the next batch starts and ends */
  long long replayed;
  long long skipped;
};

/* ---- what DIR allows ---- */

/* "a, b", or a copy of b when a is NULL. */
static char *join(const char *a, const char *b) {
  size_t la = a ? strlen(a) : 0, lb = strlen(b);
  char *s = malloc(la + lb + 3);
  if (s == NULL) return NULL;
  if (a) {
    memcpy(s, a, la);
    memcpy(s + la, ", ", 2);
    la += 2;
  }
  memcpy(s + la, b, lb + 1);
  return s;
}

static void take_spec(void *data, const struct handler_spec *s) {
  struct dl_replay *rp = data;
  if (s->dead_letter == NULL || rp->oom) return;
  if (strcmp(s->dead_letter, rp->stream) != 0) {
    for (size_t i = 0; i < rp->nothers; i++)
      if (!strcmp(rp->others[i], s->dead_letter)) return;
    char **others = grow(rp->others, &rp->others_cap, rp->nothers + 1, sizeof *others, 4);
    if (others == NULL || (others[rp->nothers] = strdup(s->dead_letter)) == NULL) {
      if (others) rp->others = others;
      rp->oom = true;
      return;
    }
    rp->others = others;
    rp->nothers++;
    return;
  }
  struct dl_pair *p = NULL;
  for (size_t i = 0; i < rp->npairs && p == NULL; i++)
    if (!strcmp(rp->pairs[i].stream, s->stream) && !strcmp(rp->pairs[i].group, s->group))
      p = &rp->pairs[i];
  if (p == NULL) {
    struct dl_pair *pairs = grow(rp->pairs, &rp->pairs_cap, rp->npairs + 1, sizeof *pairs, 4);
    if (pairs == NULL) {
      rp->oom = true;
      return;
    }
    rp->pairs = pairs;
    p = &rp->pairs[rp->npairs++];
    *p = (struct dl_pair){strdup(s->stream), strdup(s->group), NULL};
  }
  char *handlers = join(p->handlers, handler_name_file(s->path));
  free(p->handlers);
  p->handlers = handlers;
  rp->oom = rp->oom || !p->stream || !p->group || !p->handlers;
}

/* host_check_each: each handler, each partition of a partitioned one (whose
 * dead_letter is the partition's: D:{p} for S:{p}). */
static void take_handler(void *data, const struct handler_spec *s) {
  struct dl_replay *rp = data;
  if (partition_each(s, take_spec, rp) != 0) rp->oom = true;
}

static void replay_free(struct dl_replay *rp) {
  for (size_t i = 0; i < rp->npairs; i++) {
    free(rp->pairs[i].stream);
    free(rp->pairs[i].group);
    free(rp->pairs[i].handlers);
  }
  free(rp->pairs);
  for (size_t i = 0; i < rp->nothers; i++) free(rp->others[i]);
  free(rp->others);
}

/* Says which streams and groups DIR allows (after a refusal), once. */
static void say_allowed(struct dl_replay *rp) {
  if (rp->told) return;
  rp->told = true;
  fprintf(stderr, "luastream: the handlers of %s with dead_letter = \"%s\":", rp->dir, rp->stream);
  for (size_t i = 0; i < rp->npairs; i++)
    fprintf(stderr, "%s stream %s group %s (%s)", i ? ";" : "", rp->pairs[i].stream,
            rp->pairs[i].group, rp->pairs[i].handlers);
  fputc('\n', stderr);
}

/* ---- the script calls ---- */

static void dl_replay_send(struct client *c);

static bool is_string_reply(const bk_reply *r) { return r && r->type == BK_STRING; }

/* The script's reply has the shape SCRIPT_REPLAY promises. */
static bool replay_reply(const bk_reply *r, const struct dl_replay *rp) {
  bool ok = r->type == BK_ARRAY && r->elements == 4 && r->element[0]->type == BK_ARRAY &&
            r->element[1]->type == BK_ARRAY && is_string_reply(r->element[2]) &&
            is_string_reply(r->element[3]) && r->element[2]->len < sizeof rp->after &&
            r->element[3]->len < sizeof rp->last;
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
  return ok;
}

static void replay_failed(struct client *c, const char *why) {
  struct dl_replay *rp = c->data;
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
  if (why && (strstr(why, ": dead-letter-stream is") || strstr(why, ": dead-letter-group is")))
    say_allowed(rp);
  if (rp->replayed)
    printf("replayed %lld dead %s from %s before the failure\n", rp->replayed,
           dl_plural(rp->replayed, "letter", "letters"), rp->stream);
  client_done(c, 1);
}

static void dl_replay_done(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct dl_replay *rp = c->data;
  if (c->finished) return;
  const char *why = client_error(r, err);
  if (why || !replay_reply(r, rp)) return replay_failed(c, why);
  const bk_reply *moved = r->element[0], *skipped = r->element[1];
  for (size_t i = 0; i < moved->elements; i++) {
    const bk_reply *m = moved->element[i];
    printf("%.*s -> %.*s %.*s\n", (int)m->element[0]->len, m->element[0]->str,
           (int)m->element[1]->len, m->element[1]->str, (int)m->element[2]->len,
           m->element[2]->str);
  }
  bool strangers = false; /* a skipped entry that names a stream or group DIR does not allow */
  for (size_t i = 0; i < skipped->elements; i++) {
    const bk_reply *sk = skipped->element[i];
    fprintf(stderr, "luastream: skipped: %.*s\n", (int)sk->element[1]->len, sk->element[1]->str);
    strangers = strangers || strstr(sk->element[1]->str, ": dead-letter-stream is") ||
                strstr(sk->element[1]->str, ": dead-letter-group is");
  }
  if (strangers) say_allowed(rp);
  rp->replayed += (long long)moved->elements;
  rp->skipped += (long long)skipped->elements;
  fflush(stdout);
  if (r->element[2]->len > 0) { /* --all: another batch */
    snprintf(rp->after, sizeof rp->after, "%.*s", (int)r->element[2]->len, r->element[2]->str);
    snprintf(rp->last, sizeof rp->last, "%.*s", (int)r->element[3]->len, r->element[3]->str);
    dl_replay_send(c);
    return;
  }
  printf("replayed %lld dead %s from %s", rp->replayed,
         dl_plural(rp->replayed, "letter", "letters"), rp->stream);
  if (rp->skipped)
    printf(" (%lld %s skipped, left on %s)", rp->skipped,
           dl_plural(rp->skipped, "entry", "entries"), rp->stream);
  putchar('\n');
  if (rp->skipped && rp->replayed == 0)
    fprintf(stderr,
            "luastream: none of the %lld %s on %s could be replayed: is it the dead_letter "
            "stream of %s's handlers?\n",
            rp->skipped, dl_plural(rp->skipped, "entry", "entries"), rp->stream, rp->dir);
  client_done(c, rp->skipped ? 1 : 0);
}

static void dl_replay_send(struct client *c) {
  struct dl_replay *rp = c->data;
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "EVAL");
  bk_args_str(&a, SCRIPT_REPLAY);
  bk_args_str(&a, "1");
  bk_args_str(&a, rp->stream);
  bk_args_num(&a, (long long)rp->npairs);
  for (size_t i = 0; i < rp->npairs; i++) {
    bk_args_str(&a, rp->pairs[i].stream);
    bk_args_str(&a, rp->pairs[i].group);
  }
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

static void dl_replay_start(struct client *c) { dl_replay_send(c); }

int cmd_dl_replay(int argc, char **argv) {
  struct cli_options o;
  int rc = cli_parse(CLI_DL_REPLAY, argc, argv, &o, stdout, stderr);
  if (rc != CLI_OK) return rc == CLI_DONE ? 0 : 2;
  const struct cli_value *ids = &o.v[OPT_ID];
  struct dl_replay rp = {.dir = o.pos[0],
                         .stream = o.pos[1],
                         .ids = ids->nitems ? ids->items : NULL,
                         .nids = ids->nitems};
  strcpy(rp.after, "-");
  strcpy(rp.last, "+");
  struct trust trust;
  if (cli_trust(&o, &trust, stderr) != 0) return 2;
  int problems =
      host_check_each(rp.dir, (uint64_t)cli_num(&o, OPT_LOAD_TIMEOUT), &trust, take_handler, &rp);
  if (problems) {
    fprintf(stderr, "luastream: %s: %d handler file%s with problems (luastream check %s)\n", rp.dir,
            problems, problems == 1 ? "" : "s", rp.dir);
    rc = 1;
  } else if (rp.oom) {
    fprintf(stderr, "luastream: out of memory\n");
    rc = 1;
  } else if (rp.npairs == 0) {
    fprintf(stderr,
            "luastream: no handler of %s has dead_letter = \"%s\": replay puts back only "
            "the dead letters of the handlers it is given",
            rp.dir, rp.stream);
    if (rp.nothers == 0) fprintf(stderr, " (none of them has a dead_letter)");
    for (size_t i = 0; i < rp.nothers; i++)
      fprintf(stderr, "%s%s", i ? ", " : " (their dead_letter streams: ", rp.others[i]);
    fprintf(stderr, "%s\n", rp.nothers ? ")" : "");
    rc = 1;
  } else {
    rc = client_run(&o.url, "dead-letters", dl_replay_start, &rp);
  }
  replay_free(&rp);
  return rc;
}
