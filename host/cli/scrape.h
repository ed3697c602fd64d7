/* scrape: the supervisor's view of its workers' health endpoints.
 *
 * scrape_get sends one GET to a worker's private loopback port (HTTP/1.1,
 * Connection: close, as health.h serves it) and hands back the status and
 * body, or a failure, within a time limit. scrape_merge turns the workers'
 * /metrics pages into one page in Prometheus' text format: every sample gets
 * the label worker="<index>", each family's HELP and TYPE lines appear once
 * and all of its samples stay together (the format requires both), and the
 * supervisor's own families (luastream_workers, luastream_worker_up,
 * luastream_worker_restarts_total) follow. The merge is pure, for the unit
 * tests. */
#ifndef LUASTREAM_SCRAPE_H
#define LUASTREAM_SCRAPE_H

#include <stddef.h>
#include <stdint.h>

struct uv_loop_s;

/* status: the HTTP status, or 0 when the worker did not answer in time (or
 * the answer was not HTTP); body: the response body (malloc'd, NUL-ended,
 * the callee's to free), NULL when status is 0. */
typedef void scrape_done_fn(void *data, int index, int status, char *body, size_t len);

/* GET path from 127.0.0.1:port; done is called exactly once, from the loop
 * (never from inside this call). index is passed back. -1 when out of
 * memory (done is then not called). */
int scrape_get(struct uv_loop_s *loop, int port, const char *path, uint64_t timeout_ms,
               scrape_done_fn *done, void *data, int index);

/* One page from n workers' pages (pages[i] NULL: worker i did not answer,
 * left out and shown with luastream_worker_up 0); restarts[i]: how often
 * worker i was restarted. Returns a malloc'd NUL-ended page (its length in
 * *len), NULL when out of memory. */
char *scrape_merge(const char *const *pages, const unsigned *restarts, int n, size_t *len);

/* The notes of n workers' /readyz bodies (their lines "note: ..." after
 * "ready"; bodies[i] NULL: none), one a line into out: each subscription's
 * once ("subscription NAME: ..."), the first worker's, with " (worker I)". */
void scrape_ready_notes(const char *const *bodies, int n, char *out, size_t len);

#endif
