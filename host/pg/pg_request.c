/* pg_request: a query or a session wanted, from the call to its one answer;
 * see pg_request.h. */
#include "pg_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pg_handles_closed(struct pg_handles *h) {
  if (--h->open == 0 && h->all_closed) h->all_closed(h->own);
}

static void request_closed(uv_handle_t *h) {
  struct pg_request *r = h->data;
  struct pg_handles *handles = r->handles;
  free(r);
  pg_handles_closed(handles);
}

struct pg_request *pg_request_new(struct pg_handles *h, const struct pg_query *q) {
  size_t size = sizeof(struct pg_request), sql_len = q ? strlen(q->sql) + 1 : 0;
  int n = q ? q->nparams : 0;
  size += (size_t)n * sizeof(char *) + sql_len;
  for (int i = 0; i < n; i++)
    if (q->params[i]) size += strlen(q->params[i]) + 1;
  struct pg_request *r = calloc(1, size);
  if (r == NULL) return NULL;
  r->handles = h;
  r->params = (char **)(r + 1);
  char *at = (char *)(r->params + n);
  if (q) {
    r->sql = at;
    memcpy(at, q->sql, sql_len);
    at += sql_len;
    r->nparams = n;
    for (int i = 0; i < n; i++) {
      if (q->params[i] == NULL) continue;
      size_t l = strlen(q->params[i]) + 1;
      r->params[i] = at;
      memcpy(at, q->params[i], l);
      at += l;
    }
  }
  uv_timer_init(h->loop, &r->timer);
  r->timer.data = r;
  h->open++;
  return r;
}

void pg_request_free(struct pg_request *r) {
  while (r) {
    struct pg_request *then = r->then;
    uv_timer_stop(&r->timer);
    uv_close((uv_handle_t *)&r->timer, request_closed);
    r = then;
  }
}

void pg_request_fail(struct pg_request *r, const char *state, const char *msg, bool lost,
                     bool timed_out) {
  struct pg_error e = {.message = msg, .lost = lost, .timed_out = timed_out};
  snprintf(e.sqlstate, sizeof e.sqlstate, "%s", state);
  r->conn = NULL;
  if (r->session)
    r->ready(r->data, NULL, &e);
  else
    r->done(r->data, NULL, &e);
  pg_request_free(r);
}
