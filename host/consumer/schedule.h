/* schedule: a scheduled handler's ticks (`tick` with `every` or `cron`).
 *
 * Ticks are due at the times cron.h computes, on the host's wall clock (the
 * clock seam: the virtual one in the harness). At each, the host asks
 * SCRIPT_TICK for the tick's lease on `luastream:tick:{NAME}` (NAME: the
 * file's `name`, else its file name without .lua), on the server's TIME, so
 * one host of the fleet runs each tick; the others find it leased, look
 * again once the lease ends, and find it done (or, when its holder died,
 * take it). The tick runs as a job of the handler (runtime.h: the entry
 * "<tick>-0" with no fields), and its ctx:write / ctx:publish commands are
 * written with the tick's done mark in one script call, only while the tick
 * is not done: once per tick, even when a host paused past its lease ran it
 * again. A tick that raises is logged with its error, counted (outcome
 * "error") and marked done without its writes: it is not run again; the
 * next tick runs as usual.
 *
 * Missed ticks (the fleet down, a host paused past several): without
 * catch_up the newest due tick runs once; with catch_up each tick after the
 * newest one done runs, in order, at most SCHED_CATCH_UP_MAX of them (the
 * newest). A schedule that never ran starts with the tick due now, or the
 * next one.
 *
 * While a tick runs, its lease (SCHED_LEASE_MS) is renewed every third of
 * it; a host that dies holding it leaves the tick to the others once it
 * ends. */
#ifndef LUASTREAM_SCHEDULE_H
#define LUASTREAM_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker.h"
#include "clock.h"
#include "runtime.h"

#define SCHED_LEASE_MS 5000
#define SCHED_CATCH_UP_MAX 100 /* the most missed ticks catch_up runs (docs/handlers.md) */
/* The key a schedule keeps its ticks in: "luastream:tick:{NAME}". */
#define SCHED_KEY_PREFIX "luastream:tick:"

typedef struct schedule schedule;

enum sched_event {
  SCHED_EV_RUNNING, /* started: ticks are due from now on */
  SCHED_EV_DRAINED, /* stopped: no tick running or unwritten; sent once */
};
typedef void sched_event_fn(void *data, schedule *s, enum sched_event ev);

/* h is borrowed (its owner releases it after sched_free); owner names this
 * process in the lease (copied). NULL when out of memory or when the
 * spec's tz does not load any more (logged). */
schedule *sched_new(handler *h, broker *b, bk_conn *cmd, lclock *clock, const char *owner,
                    sched_event_fn *on_event, void *data);
void sched_start(schedule *s);
/* No tick starts from now on; a running one finishes and is written, then
 * SCHED_EV_DRAINED. */
void sched_stop(schedule *s);
/* The shutdown deadline: a running tick is dropped where it waits (nothing
 * written; its lease ends on its own, and another host runs it). Returns
 * how many were dropped (0 or 1). Then drained once no call is out. */
size_t sched_abandon(schedule *s);
bool sched_drained(const schedule *s);
bool sched_running(const schedule *s);
/* Nothing running and no call out. */
bool sched_idle(const schedule *s);
/* Hot reload in place (only `tick` changed): ticks from now on run h. */
void sched_swap_handler(schedule *s, handler *h);
/* The next tick's time (Unix ms), 0 before the start. */
int64_t sched_next(const schedule *s);
void sched_free(schedule *s);

/* The gauges of the last and next run (a metrics collector's, before each
 * page): sched_metrics_clear forgets every schedule's, then
 * sched_collect_metrics sets those of s, a schedule that runs. */
void sched_metrics_clear(void);
void sched_collect_metrics(const schedule *s);

#endif
