/* host: a directory of handler files running as subscriptions on one broker.
 *
 * Loading is separate from running: host_new validates every file first
 * (what `luastream check` does), so a bad file stops the host before it joins
 * any group. host_start then connects, reads the server version, names the
 * consumers and starts one subscription per file; host_stop drains them
 * (host_stop_within gives up on running handlers at a deadline). The
 * host knows nothing of libuv: the broker and clock come in through their
 * seams, so the test harness runs the same code on its in-memory broker. */
#ifndef LUASTREAM_HOST_H
#define LUASTREAM_HOST_H

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#include "broker.h"
#include "clock.h"
#include "runtime.h"
#include "trust.h"

typedef struct host host;

/* Handler files of dir: `*.lua` directly inside it, not starting with `_`
 * (those are modules handlers may require), sorted by name. Returns the count
 * and a NULL-terminated array in *paths (free with host_free_paths), or -1 with
 * a reason in err: also when dir or a parent folder is one other users can
 * change (trust_check_dir; trust NULL: not checked). */
int host_list_dir(const char *dir, const struct trust *trust, char ***paths, char *err,
                  size_t errlen);
void host_free_paths(char **paths);

/* Called once the host has stopped: host_stop drained every subscription, or
 * it cannot run on this server (host_failed). */
typedef void host_stopped_fn(void *data);

/* How consumer names are made. A handler's consumer is its file's `consumer`
 * field, else `consumer` here, else <hostname>-<handler>[-<instance>]
 * (handler: the file name without .lua), so a name never depends on the
 * other files of the directory and stays the same when the same instance
 * starts again. Two subscriptions of one stream and group that would share
 * a name: the `reclaim` one (else the one loaded later) gets -<handler>
 * appended. */
struct host_names {
  const char *consumer; /* --consumer NAME, or NULL */
  int instance;         /* --instance N (>= 0), or -1 */
  const char *hostname; /* NULL: gethostname() */
  const char *machine;  /* NULL: this machine (lease_identity) */
  /* Numbering on demand (neither --instance nor --consumer), 0 for none:
   * when a live process of this machine holds a generated name of
   * `instance`, the host tries instance + step, + 2 x step, ... (from 0 for
   * -1: the unnumbered names, then -1, -2, ...) and takes the first number
   * whose names none holds (logged), before any subscription starts. A
   * restarted process finds its number free again (its holder is gone). */
  int number_step;
};

/* Loads every handler of dir, each within load_timeout_ms (0: the default,
 * RT_LOAD_TIMEOUT_MS; also for every later reload), refusing code that users
 * other than trust's can change (trust.h; NULL: no check; kept by the host
 * for every reload). On success returns the
 * host; on failure NULL and *problems holds `file:line: message` lines (free
 * it). names may be NULL (generated names, no instance). Each subscription holds a lease on
 * its consumer name while it runs (lease.h): a name held by another live
 * process stops the host at start-up (host_failed says why). */
host *host_new(const char *dir, broker *b, lclock *clock, const struct host_names *names,
               uint64_t load_timeout_ms, const struct trust *trust, char **problems);
/* Connects, checks the server, starts every subscription. */
void host_start(host *h, host_stopped_fn *stopped, void *data);
/* Stops reading, lets running handlers finish, flushes outcomes; then
 * closes the command connection and calls the stopped callback. Waits as long
 * as that takes. */
void host_stop(host *h);
/* host_stop with a deadline timeout_ms from now (on the host's clock). At the
 * deadline, handlers still running are abandoned without writing anything, so
 * their entries stay pending for another host's claiming or reclaim read;
 * acks that could not be sent yet are dropped (delivered again); the log says
 * `msg="shutdown deadline reached" unfinished=N` (and unacked=M when some);
 * the command connection is closed, ending writes still unanswered; and the
 * host stops as usual. Calling it again (or host_stop) changes nothing. */
void host_stop_within(host *h, uint64_t timeout_ms);
/* Hot reload: looks at the handler directory again. A file whose content
 * changed (force: every file) is loaded into a fresh state and validated as at
 * start-up; only then does its subscription switch. A change to `handle` only
 * swaps the handler in place (entries running finish on the old one); a change
 * to a subscription field (stream, group, read, ...) stops that subscription,
 * drains it and starts a new one; a new file starts a subscription; a removed
 * file's subscription is stopped and drained; a directory that no longer
 * exists counts as empty (its subscriptions stop until it is back). A file
 * that fails to load keeps
 * the running version and is reported once per content (`msg="handler reload
 * failed"` with `file:line: message`). Before the host has started, the
 * reload waits for the start; while stopping it does nothing. */
void host_reload(host *h, bool force);
/* host_reload(h, false) once the directory has been quiet for 200 ms on the
 * host's clock (each call restarts the wait): for file-change events. */
void host_reload_soon(host *h);
/* Readiness, for /readyz: true when the command connection is up, at least
 * one subscription runs, every subscription reads and none is stuck
 * (sub_healthy); else false with one line in why, e.g. "redis unreachable
 * (redis://127.0.0.1:6379)", "subscription post_payment: creating group" or
 * "no handlers running". */
bool host_is_ready(const host *h, char *why, size_t len);
/* What a ready host notes (sub_note), one line each ("subscription NAME:
 * paused by ..."), into out ("" when nothing). Never unready. */
void host_ready_notes(const host *h, char *out, size_t len);
/* Subscriptions: the running ones by load order, then those a reload is
 * stopping; for tests and health. Before the host has started them, one per
 * handler file and host_subscription is NULL. */
size_t host_subscriptions(const host *h);
struct subscription;
struct subscription *host_subscription(const host *h, size_t i);
/* When the host stopped because it cannot run on this server (the version
 * gate), because a consumer name of a handler loaded at start-up is held by
 * another live process, or because a running subscription lost its
 * consumer lease: why, as `file: ...` lines; else NULL. The process should
 * exit non-zero. */
const char *host_failed(const host *h);
/* Where the brokers of the other servers handlers connect to
 * (ls.redis.connect) come from; call before host_start. Without it their
 * calls fail with "not connected". */
struct servers_backend;
void host_set_servers(host *h, const struct servers_backend *backend);
/* The HTTP client handlers' ls.http requests go through, and their defaults
 * (0: the runtime's); call before host_start. Without it ls.http raises.
 * The client stays the caller's: close it once the host has stopped. */
struct http_client;
void host_set_http(host *h, struct http_client *client, uint64_t timeout_ms, size_t max_body);
/* The process's --watchdog (ms; 0, the default: none): each claiming or
 * reclaim subscription whose min_idle is below it plus one heartbeat is
 * warned of when it starts (min_idle_margin.h). Call before host_start. */
void host_set_watchdog(host *h, uint64_t watchdog_ms);
/* The PostgreSQL pool handlers' ls.pg queries go through (NULL: ls.pg
 * raises missing, NULL for the runtime's message) and ctx:pg_once's table
 * (NULL: the runtime's); call before host_start. The pool stays the
 * caller's: close it once the host has stopped, free it after the host. */
struct pg_pool;
void host_set_pg(host *h, struct pg_pool *pool, const char *missing, const char *once_table);
/* Tells fn of every finished delivery (see rt_env.on_delivery). */
void host_on_delivery(host *h,
                      void (*fn)(void *data, const struct handler_spec *spec, const struct entry *e,
                                 const struct rt_result *res),
                      void *data);
void host_free(host *h);

/* `luastream check`: loads and validates every handler of dir without
 * connecting, each within load_timeout_ms (0: RT_LOAD_TIMEOUT_MS). Prints
 * problems as `file:line: message`; returns their count (0 when all is
 * well). Two files reading one stream as one group are a problem (they
 * would split its entries) unless one reads `new` and the other `reclaim`. */
int host_check(const char *dir, uint64_t load_timeout_ms, const struct trust *trust);
/* host_check, then, when every file is valid, each(data, spec) for each
 * handler in file order (spec valid during the call only): what `luastream
 * status` learns of the streams and groups a directory reads. */
typedef void host_spec_fn(void *data, const struct handler_spec *spec);
int host_check_each(const char *dir, uint64_t load_timeout_ms, const struct trust *trust,
                    host_spec_fn *each, void *data);
/* host_check_each, its problems written to report (the web console's
 * handlers page), each called for every file that loaded. */
int host_check_report(const char *dir, uint64_t load_timeout_ms, const struct trust *trust,
                      FILE *report, host_spec_fn *each, void *data);
/* host_check_report, then, when every file is valid, all(data, hs, n) once
 * with the loaded handlers in file order (loaded, not bound; released after
 * the call): what `luastream asyncapi` describes. all returns its own
 * problems, added to the count returned. */
typedef int host_handlers_fn(void *data, handler *const *hs, size_t n);
int host_check_all(const char *dir, uint64_t load_timeout_ms, const struct trust *trust,
                   FILE *report, host_handlers_fn *all, void *data);

#endif
