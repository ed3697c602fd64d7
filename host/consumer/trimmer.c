/* trimmer: see trimmer.h. */
#include "trimmer.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "scripts.h"

struct trimmer {
  broker *b;
  bk_conn *cmd;
  const struct handler_spec *spec;
  ltimer *timer;
  bool armed;
  bool waiting; /* a trim is on its way */
  bool freed;   /* trimmer_free came while it was */
  bool failing; /* the last trim failed: logged once until one works */
};

static void trimmed(void *data, const bk_reply *r, const char *err) {
  trimmer *t = data;
  t->waiting = false;
  if (t->freed) {
    free(t);
    return;
  }
  const struct handler_spec *s = t->spec;
  if (r && r->type == BK_INTEGER) {
    if (r->integer > 0) {
      char n[24];
      snprintf(n, sizeof n, "%lld", r->integer);
      log_line(LOG_DEBUG, s->name, "stream trimmed to what every group has finished with", "stream",
               s->stream, LOG_NUMBER "trimmed", n, NULL);
    }
    if (t->failing) log_line(LOG_INFO, s->name, "trimming works again", "stream", s->stream, NULL);
    t->failing = false;
    return;
  }
  if (!t->failing)
    log_line(LOG_WARN, s->name, "cannot trim the stream; its entries stay", "stream", s->stream,
             "error",
             r && r->type == BK_ERROR ? r->str
             : err                    ? err
                                      : "unexpected reply",
             NULL);
  t->failing = true;
}

static void fire(ltimer *timer, void *data) {
  (void)timer;
  trimmer *t = data;
  t->armed = false;
  if (t->waiting) return; /* the next write asks again */
  char max_len[16];
  snprintf(max_len, sizeof max_len, "%d", t->spec->trim_max_len);
  const char *argv[] = {"EVAL", SCRIPT_TRIM, "1", t->spec->stream, t->spec->trim ? "1" : "0",
                        max_len};
  size_t len[6];
  for (int i = 0; i < 6; i++) len[i] = strlen(argv[i]);
  if (bk_command(t->b, t->cmd, 6, argv, len, trimmed, t) == 0) t->waiting = true;
}

trimmer *trimmer_new(broker *b, bk_conn *cmd, lclock *clock, const struct handler_spec *spec) {
  trimmer *t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  t->b = b;
  t->cmd = cmd;
  t->spec = spec;
  if ((t->timer = timer_new(clock, fire, t)) == NULL) {
    free(t);
    return NULL;
  }
  return t;
}

void trimmer_set_spec(trimmer *t, const struct handler_spec *spec) {
  if (t) t->spec = spec;
}

void trimmer_soon(trimmer *t) {
  if (t == NULL || t->armed) return;
  t->armed = true;
  timer_start(t->timer, TRIM_MS);
}

void trimmer_free(trimmer *t) {
  if (t == NULL) return;
  timer_free(t->timer);
  if (t->waiting)
    t->freed = true;
  else
    free(t);
}
