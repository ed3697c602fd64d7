/* status: `luastream status` (status.h): the refreshes (status_query.h),
 * what needs attention in each (status_rules.h), the output (status_print.h)
 * and --watch. */
#include "status.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "client.h"
#include "host.h"
#include "options.h"
#include "status_judge.h"
#include "status_print.h"
#include "status_query.h"
#include "status_rules.h"
#include "trust.h"

#define WATCH_EVERY_MS 2000

struct status {
  bool json, watch, tty;
  int last_status; /* of the last refresh printed */
  bool busy;       /* a refresh is under way */
  struct status_query q;
  uv_timer_t tick;
  uv_signal_t sigint;
};

/* ---- the refreshes ---- */

static void finish(struct status *st, int status) {
  uv_timer_stop(&st->tick);
  uv_signal_stop(&st->sigint);
  client_done(st->q.c, status);
}

static void on_tick(uv_timer_t *t);

static void refresh_done(struct status_query *q, bool failed) {
  struct status *st = q->data;
  if (failed) {
    finish(st, 1);
    return;
  }
  bool needs = false;
  for (size_t i = 0; i < q->ngroups; i++) {
    status_carry_lags(q, &q->groups[i]);
    status_judge(q, &q->groups[i]);
    needs = needs || q->groups[i].natt > 0;
  }
  for (size_t i = 0; i < q->nschedules; i++) needs |= status_judge_schedule(q, &q->schedules[i]);
  if (st->tty && st->watch) fputs("\033[H\033[2J", stdout);
  if (st->json)
    status_print_json(stdout, q, needs);
  else
    status_print_table(q, st->watch ? WATCH_EVERY_MS / 1000 : 0, needs);
  if (st->watch && !st->tty && !st->json) putchar('\n');
  fflush(stdout);
  st->last_status = needs ? 1 : 0;
  st->busy = false;
  if (!st->watch) {
    finish(st, st->last_status);
    return;
  }
  timer_stop(q->c->timeout); /* nothing is asked until the next refresh */
  uv_timer_start(&st->tick, on_tick, WATCH_EVERY_MS, 0);
}

static void refresh(struct status *st) {
  st->busy = true;
  status_query_refresh(&st->q);
}

static void on_tick(uv_timer_t *t) {
  struct status *st = t->data;
  if (!st->q.c->finished && !st->busy) refresh(st);
}

static void on_sigint(uv_signal_t *s, int signum) {
  (void)signum;
  struct status *st = s->data;
  if (st->tty && !st->json) printf("\n");
  fflush(stdout);
  finish(st, st->last_status);
}

static void status_start(struct client *c) {
  struct status_query *q = c->data;
  struct status *st = q->data;
  q->c = c;
  if (st->watch) {
    uv_timer_init(c->loop, &st->tick);
    st->tick.data = st;
    uv_signal_init(c->loop, &st->sigint);
    st->sigint.data = st;
    uv_signal_start(&st->sigint, on_sigint, SIGINT);
    uv_unref((uv_handle_t *)&st->sigint); /* the loop ends when the client does */
  }
  refresh(st);
}

int cmd_status(int argc, char **argv) {
  struct cli_options o;
  int rc = cli_parse(CLI_STATUS, argc, argv, &o, stdout, stderr);
  if (rc != CLI_OK) return rc == CLI_DONE ? 0 : 2;
  struct status st = {.json = cli_given(&o, OPT_JSON),
                      .watch = cli_given(&o, OPT_WATCH),
                      .tty = isatty(STDOUT_FILENO) == 1,
                      .last_status = 1,
                      .q = {.done = refresh_done}};
  st.q.data = &st;
  struct stat sb;
  int dirs = 0;
  for (int i = 0; i < o.npos; i++) dirs += stat(o.pos[i], &sb) == 0 && S_ISDIR(sb.st_mode);
  if (dirs && o.npos > 1) {
    fprintf(stderr,
            "luastream: status takes one DIR or stream names, not both (%s is a "
            "directory)\n\n",
            o.pos[0]);
    cli_print_help(CLI_STATUS, stderr);
    return 2;
  }
  if (dirs) {
    st.q.dir_mode = true;
    struct trust trust;
    if (cli_trust(&o, &trust, stderr) != 0) {
      status_query_free(&st.q);
      return 2;
    }
    int problems = host_check_each(o.pos[0], (uint64_t)cli_num(&o, OPT_LOAD_TIMEOUT), &trust,
                                   status_query_add_handler, &st.q);
    if (problems) {
      fprintf(stderr, "luastream: %s: %d handler file%s with problems (luastream check %s)\n",
              o.pos[0], problems, problems == 1 ? "" : "s", o.pos[0]);
      status_query_free(&st.q);
      return 1;
    }
    if (st.q.nspecs == 0 && st.q.nschedules == 0) {
      fprintf(stderr, "luastream: %s has no handler files\n", o.pos[0]);
      status_query_free(&st.q);
      return 1;
    }
  } else {
    st.q.names = (const char *const *)o.pos;
    st.q.nnames = o.npos;
  }
  rc = client_run(&o.url, "status", status_start, &st.q);
  status_query_free(&st.q);
  return rc;
}
