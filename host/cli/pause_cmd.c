/* pause_cmd: `luastream pause` and `luastream resume` (pause_cmd.h). */
#include "pause_cmd.h"

#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "flow_keys.h"
#include "options.h"
#include "scripts.h"
#include "status_rules.h"

struct pause_cmd {
  const char *stream, *group;
  char *key;
  bool resume;
  long long for_ms; /* pause: 0 until resumed */
  const char *reason;
  char by[256];
  bool partitioned; /* the stream is missing: its partition 0 was looked at */
  char part0[600];
  /* resume: the pause as it was (HGETALL), for saying what ended */
  char was_kind[16], was_by[256], was_reason[256];
};

void pause_cmd_by(char *out, size_t len) {
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "unknown-host");
  const char *user = NULL;
  struct passwd *pw = getpwuid(geteuid());
  if (pw && pw->pw_name) user = pw->pw_name;
  if (user == NULL) user = getenv("USER");
  if (user == NULL) user = "unknown-user";
  snprintf(out, len, "luastream pause by %s@%s", user, host);
}

static void field(const bk_reply *r, const char *name, char *out, size_t len);

static void failed(struct client *c, const char *what, const bk_reply *r, const char *err) {
  struct pause_cmd *p = c->data;
  const char *why = client_error(r, err);
  fprintf(stderr, "luastream: %s %s %s: EVAL on %s (%s) failed: %s\n", what, p->stream, p->group,
          p->key, c->b->name, why ? why : "unexpected reply");
  client_done(c, 1);
}

static void check_names(struct client *c, const char *stream);

/* XINFO GROUPS of the stream paused (or, when it is missing, of its
 * partition 0, a partitioned handler's): a name mistyped pauses nothing
 * that runs, so say so (the pause stands: it may be meant for a group still
 * to be created). Refused (an ACL without XINFO) or failed: nothing said. */
static void groups_read(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct pause_cmd *p = c->data;
  (void)err;
  if (c->finished) return;
  if (r && r->type == BK_ERROR && strstr(r->str, "no such key") && !p->partitioned) {
    p->partitioned = true;
    snprintf(p->part0, sizeof p->part0, "%s:{0}", p->stream);
    return check_names(c, p->part0);
  }
  if (r && r->type == BK_ERROR && strstr(r->str, "no such key")) {
    fprintf(stderr,
            "luastream: warning: stream %s does not exist on %s: the pause holds for a group %s "
            "created on it later; check the names (luastream status)\n",
            p->stream, c->b->name, p->group);
  } else if (r && r->type == BK_ARRAY) {
    bool found = false;
    for (size_t i = 0; i < r->elements && !found; i++) {
      char name[512];
      field(r->element[i], "name", name, sizeof name);
      found = strcmp(name, p->group) == 0;
    }
    if (!found)
      fprintf(stderr,
              "luastream: warning: stream %s has no group %s on %s: the pause holds for a group of "
              "that name created later; check the names (luastream status %s)\n",
              p->stream, p->group, c->b->name, p->stream);
  }
  client_done(c, 0);
}

static void check_names(struct client *c, const char *stream) {
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "XINFO");
  bk_args_str(&a, "GROUPS");
  bk_args_str(&a, stream);
  client_send(c, &a, groups_read);
  bk_args_free(&a);
}

/* SCRIPT_PAUSE "pause": {now_ms, until_ms or 0} */
static void paused(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct pause_cmd *p = c->data;
  if (c->finished) return;
  if (r == NULL || r->type != BK_ARRAY || r->elements != 2 || r->element[0]->type != BK_INTEGER ||
      r->element[1]->type != BK_INTEGER) {
    failed(c, "pausing", r, err);
    return;
  }
  char when[64], left[32];
  printf("paused group %s of stream %s ", p->group, p->stream);
  if (r->element[1]->integer > 0)
    printf("until %s (for %s)", status_format_utc(r->element[1]->integer, when, sizeof when),
           status_format_ms(p->for_ms, left, sizeof left));
  else
    printf("until resumed (luastream resume %s %s)", p->stream, p->group);
  printf("\n  reason: %s\n  by: %s\n  since: %s\n  key: %s on %s\n",
         p->reason[0] ? p->reason : "(none given)", p->by,
         status_format_utc(r->element[0]->integer, when, sizeof when), p->key, c->b->name);
  printf("no handler of the group starts on any host from 1s after now; running ones finish\n");
  fflush(stdout);
  check_names(c, p->stream);
}

/* SCRIPT_PAUSE "resume": 1 when there was a pause */
static void resumed(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct pause_cmd *p = c->data;
  if (c->finished) return;
  if (r == NULL || r->type != BK_INTEGER) {
    failed(c, "resuming", r, err);
    return;
  }
  if (r->integer == 0) {
    printf("group %s of stream %s was not paused: nothing to resume\n", p->group, p->stream);
  } else {
    printf("resumed group %s of stream %s", p->group, p->stream);
    if (p->was_kind[0])
      printf(" (it was paused by %s%s: %s)", p->was_by,
             strcmp(p->was_kind, "breaker") == 0 ? ", its breaker open" : "",
             p->was_reason[0] ? p->was_reason : "(none given)");
    printf("\nhosts start its handlers again at their next look (within 1s)\n");
  }
  fflush(stdout);
  client_done(c, 0);
}

static void send_op(struct client *c) {
  struct pause_cmd *p = c->data;
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "EVAL");
  bk_args_str(&a, SCRIPT_PAUSE);
  bk_args_str(&a, "1");
  bk_args_str(&a, p->key);
  if (p->resume) {
    bk_args_str(&a, "resume");
  } else {
    bk_args_str(&a, "pause");
    bk_args_num(&a, p->for_ms);
    bk_args_str(&a, p->reason);
    bk_args_str(&a, p->by);
  }
  client_send(c, &a, p->resume ? resumed : paused);
  bk_args_free(&a);
}

/* The string field name of a [name, value, ...] reply into out ("" without). */
static void field(const bk_reply *r, const char *name, char *out, size_t len) {
  const bk_reply *v = client_field(r, name);
  out[0] = '\0';
  if (v && v->type == BK_STRING) snprintf(out, len, "%.*s", (int)v->len, v->str);
}

/* HGETALL of the pause before resume deletes it: what ended. Refused (an
 * ACL without HGETALL) or failed, resume goes on and says less. */
static void looked(void *data, const bk_reply *r, const char *err) {
  struct client *c = data;
  struct pause_cmd *p = c->data;
  (void)err;
  if (c->finished) return;
  if (r && r->type == BK_ARRAY) {
    field(r, "kind", p->was_kind, sizeof p->was_kind);
    field(r, "by", p->was_by, sizeof p->was_by);
    field(r, "reason", p->was_reason, sizeof p->was_reason);
  }
  send_op(c);
}

static void start(struct client *c) {
  struct pause_cmd *p = c->data;
  if (!p->resume) {
    send_op(c);
    return;
  }
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "HGETALL");
  bk_args_str(&a, p->key);
  client_send(c, &a, looked);
  bk_args_free(&a);
}

static int run(enum cli_command command, int argc, char **argv) {
  struct cli_options o;
  int rc = cli_parse(command, argc, argv, &o, stdout, stderr);
  if (rc != CLI_OK) return rc == CLI_DONE ? 0 : 2;
  struct pause_cmd p = {.stream = o.pos[0], .group = o.pos[1], .resume = command == CLI_RESUME};
  if (!p.stream[0] || !p.group[0]) {
    fprintf(stderr, "luastream: %s needs a STREAM and a GROUP that are not empty\n",
            cli_command_name(command));
    return 2;
  }
  if (!p.resume) {
    p.for_ms = cli_given(&o, OPT_FOR) ? cli_num(&o, OPT_FOR) : 0;
    p.reason = cli_text(&o, OPT_PAUSE_REASON) ? cli_text(&o, OPT_PAUSE_REASON) : "";
    for (const char *ch = p.reason; *ch; ch++)
      if ((unsigned char)*ch < 0x20 || *ch == 0x7f) {
        fprintf(stderr, "luastream: --reason may not hold control characters (a newline, a tab)\n");
        return 2;
      }
    if (strlen(p.reason) > PAUSE_REASON_MAX) {
      fprintf(stderr, "luastream: --reason is %zu bytes long, at most %d are kept: shorten it\n",
              strlen(p.reason), PAUSE_REASON_MAX);
      return 2;
    }
    pause_cmd_by(p.by, sizeof p.by);
  }
  size_t n = strlen(p.stream);
  if (n > 3 && p.stream[n - 1] == '}' && strstr(p.stream, ":{"))
    fprintf(stderr,
            "luastream: warning: %s looks like a partition's stream: a partitioned handler's pause "
            "is its base stream's (name the stream without :{p})\n",
            p.stream);
  p.key = flow_key("pause", p.stream, p.group, NULL);
  if (p.key == NULL) {
    fputs("luastream: out of memory\n", stderr);
    return 1;
  }
  int status = client_run(&o.url, cli_command_name(command), start, &p);
  free(p.key);
  return status;
}

int cmd_pause(int argc, char **argv) { return run(CLI_PAUSE, argc, argv); }
int cmd_resume(int argc, char **argv) { return run(CLI_RESUME, argc, argv); }
