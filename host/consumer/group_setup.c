/* group_setup: creating the group and moving its cursor (see group_setup.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group_setup.h"
#include "log.h"

/* What one XGROUP CREATE answered. */
struct create_answer {
  bool answered;
  bool created; /* OK: made now (else BUSYGROUP: it existed, or failed) */
  bool failed;
  char error[256]; /* when failed */
};

struct group_setup {
  broker *b;
  bk_conn *cmd;
  const struct handler_spec *spec;
  const char *retry_key;
  group_event_fn *on_event;
  void *data;
  unsigned pending; /* commands sent and not answered */
  bool stopped;
  bool started; /* group_create's: start_at is spent */
  /* The two XGROUP CREATE's answers, decided on once both are in: they may
   * come in either order (on Redis Cluster, an ASK sends the stream's to
   * the slot's new node while the old one answers the retry stream's). */
  struct create_answer stream_answer, retry_answer;
  bool create_alone; /* the retry stream's could not be sent */
  char fault[400];   /* the last failure, "" when none */
};

static void group_log(group_setup *g, enum log_level level, const char *msg, const char *k1,
                      const char *v1) {
  const struct handler_spec *sp = g->spec;
  log_line(level, sp->name, msg, "stream", sp->stream, "group", sp->group, "consumer", sp->consumer,
           k1, v1, NULL);
}

static const char *start_id(const char *start) {
  if (strcmp(start, "new") == 0) return "$";
  if (strcmp(start, "beginning") == 0) return "0";
  return start;
}

/* Where a group created now starts: start_at applies at start-up only; a
 * group lost and created again mid-run starts at `start`, so another host
 * that finds it existing does not rewind it. */
static const char *creation_start(const group_setup *g) {
  return g->spec->start_at && !g->started ? g->spec->start_at : g->spec->start;
}

static void ready(group_setup *g) {
  g->fault[0] = '\0';
  g->on_event(g->data, GROUP_READY, NULL, NULL);
}

static void setid_done(void *data, const bk_reply *r, const char *err) {
  group_setup *g = data;
  g->pending--;
  if (g->stopped) return g->on_event(g->data, GROUP_ANSWERED, NULL, NULL);
  if (r && r->type == BK_STATUS) {
    group_log(g, LOG_INFO, "group cursor moved", "start_at", g->spec->start_at);
    return ready(g);
  }
  char why[256];
  bk_reply_text(r, err, why, sizeof why);
  snprintf(g->fault, sizeof g->fault, "XGROUP SETID on %s: %s", g->spec->stream, why);
  log_line(LOG_ERROR, g->spec->name, "cannot move the group cursor (start_at), retrying", "stream",
           g->spec->stream, "group", g->spec->group, "consumer", g->spec->consumer, "command",
           "XGROUP SETID", "key", g->spec->stream, "error", why, NULL);
  g->on_event(g->data, GROUP_FAILED, NULL, NULL);
}

static void move_cursor(group_setup *g) {
  const char *argv[] = {"XGROUP", "SETID", g->spec->stream, g->spec->group,
                        start_id(g->spec->start_at)};
  size_t len[5];
  for (int i = 0; i < 5; i++) len[i] = strlen(argv[i]);
  if (bk_command(g->b, g->cmd, 5, argv, len, setid_done, g) == 0)
    g->pending++;
  else
    g->on_event(g->data, GROUP_FAILED, NULL, NULL);
}

/* Logs a refused XGROUP CREATE on key (readiness says it too, group_fault)
 * and reports it. */
static void create_failed(group_setup *g, const char *msg, const char *key, const char *why) {
  snprintf(g->fault, sizeof g->fault, "XGROUP CREATE on %s: %s", key, why);
  log_line(LOG_ERROR, g->spec->name, msg, "stream", g->spec->stream, "group", g->spec->group,
           "consumer", g->spec->consumer, "command", "XGROUP CREATE", "key", key, "error", why,
           NULL);
  g->on_event(g->data, GROUP_CREATE_REFUSED, key, why);
}

static void take_answer(struct create_answer *a, const bk_reply *r, const char *err) {
  a->answered = true;
  a->created = r && r->type == BK_STATUS;
  a->failed = !a->created && !(r && bk_reply_is_error(r, "BUSYGROUP"));
  if (a->failed) bk_reply_text(r, err, a->error, sizeof a->error);
}

/* Once both XGROUP CREATE are answered (or the stream's, when the retry
 * stream's could not be sent): the group is ready, its cursor moves, or
 * both are sent again later. */
static void create_decide(group_setup *g) {
  const struct create_answer *st = &g->stream_answer, *rt = &g->retry_answer;
  if (!st->answered || !(rt->answered || g->create_alone))
    return g->on_event(g->data, GROUP_ANSWERED, NULL, NULL);
  if (g->create_alone) /* try both again */
    return create_failed(g, "cannot create the group on the retry stream, retrying", g->retry_key,
                         st->failed ? st->error : "not connected");
  if (rt->failed)
    return create_failed(g, "cannot create the group on the retry stream, retrying", g->retry_key,
                         rt->error);
  if (rt->created)
    group_log(g, LOG_INFO, "group created on the retry stream", "retry_stream", g->retry_key);
  if (st->failed)
    return create_failed(g, "cannot create the group, retrying", g->spec->stream, st->error);
  if (st->created) group_log(g, LOG_INFO, "group created", "start", creation_start(g));
  /* start_at moves an existing group, at start-up only: a new one already
   * starts there. */
  if (!st->created && g->spec->start_at && !g->started) return move_cursor(g);
  ready(g);
}

static void create_stream_done(void *data, const bk_reply *r, const char *err) {
  group_setup *g = data;
  g->pending--;
  if (g->stopped) return g->on_event(g->data, GROUP_ANSWERED, NULL, NULL);
  take_answer(&g->stream_answer, r, err);
  create_decide(g);
}

static void create_retry_done(void *data, const bk_reply *r, const char *err) {
  group_setup *g = data;
  g->pending--;
  if (g->stopped) return g->on_event(g->data, GROUP_ANSWERED, NULL, NULL);
  take_answer(&g->retry_answer, r, err);
  create_decide(g);
}

int group_create(group_setup *g, bool started) {
  g->started = started;
  g->create_alone = false;
  g->stream_answer = g->retry_answer = (struct create_answer){0};
  const char *start = start_id(creation_start(g));
  const char *argv[] = {"XGROUP", "CREATE", g->spec->stream, g->spec->group, start, "MKSTREAM"};
  size_t len[6];
  for (int i = 0; i < 6; i++) len[i] = strlen(argv[i]);
  if (bk_command(g->b, g->cmd, 6, argv, len, create_stream_done, g) != 0) return -1;
  g->pending++;
  argv[2] = g->retry_key;
  argv[4] = "0";
  for (int i = 0; i < 6; i++) len[i] = strlen(argv[i]);
  if (bk_command(g->b, g->cmd, 6, argv, len, create_retry_done, g) == 0)
    g->pending++;
  else
    g->create_alone = true;
  return 0;
}

group_setup *group_new(broker *b, bk_conn *cmd, const struct handler_spec *spec,
                       const char *retry_key, group_event_fn *on_event, void *data) {
  group_setup *g = calloc(1, sizeof *g);
  if (g == NULL) return NULL;
  g->b = b;
  g->cmd = cmd;
  g->spec = spec;
  g->retry_key = retry_key;
  g->on_event = on_event;
  g->data = data;
  return g;
}

void group_set_spec(group_setup *g, const struct handler_spec *spec) { g->spec = spec; }
void group_stop(group_setup *g) { g->stopped = true; }
unsigned group_pending(const group_setup *g) { return g->pending; }
const char *group_fault(const group_setup *g) { return g->fault; }
void group_free(group_setup *g) { free(g); }
