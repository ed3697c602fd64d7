/* http_stub: the harness's HTTP client on a clock; see http_stub.h. */
#include "http_stub.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLOSED_TEXT "the HTTP client closed (the host is stopping)"

struct stub_client;

/* A request whose answer waits for its timer. */
struct pending {
  struct stub_client *owner;
  ltimer *timer;
  http_done_fn *done;
  void *data;
  struct http_stub_answer answer;
  struct pending *prev, *next;
};

struct stub_client {
  http_client base;
  lclock *clock;
  http_stub_answer_fn *answer;
  void *answer_data;
  http_client *real; /* HTTP_STUB_PASS's, else NULL */
  struct pending *pending;
  bool closed;
};

static void answer_free(struct http_stub_answer *a) {
  free(a->headers);
  free(a->body);
  free(a->error);
}

static void pending_unlink(struct pending *p) {
  struct stub_client *sc = p->owner;
  if (p->prev)
    p->prev->next = p->next;
  else
    sc->pending = p->next;
  if (p->next) p->next->prev = p->prev;
}

/* The answer is due: the caller's callback, then the record goes. */
static void pending_fire(ltimer *t, void *data) {
  struct pending *p = data;
  pending_unlink(p);
  timer_free(t); /* safe in its own callback */
  const struct http_stub_answer *a = &p->answer;
  if (a->kind == HTTP_STUB_RESPOND) {
    struct http_response res = {.status = a->status,
                                .headers = a->headers ? a->headers : "",
                                .headers_len = a->headers_len,
                                .body = a->body ? a->body : "",
                                .body_len = a->body_len};
    p->done(p->data, &res, NULL, false);
  } else {
    p->done(p->data, NULL, a->error ? a->error : "no answer", a->kind == HTTP_STUB_FAULT);
  }
  answer_free(&p->answer);
  free(p);
}

static int stub_request(http_client *c, const struct http_request *req, http_done_fn *done,
                        void *data) {
  struct stub_client *sc = (struct stub_client *)c;
  if (sc->closed) return -1;
  struct pending *p = calloc(1, sizeof *p);
  if (p == NULL) return -1;
  sc->answer(sc->answer_data, req, &p->answer);
  if (p->answer.kind == HTTP_STUB_PASS && sc->real) {
    answer_free(&p->answer);
    free(p);
    return http_request(sc->real, req, done, data);
  }
  if (p->answer.kind == HTTP_STUB_PASS) {
    p->answer.kind = HTTP_STUB_FAULT;
    free(p->answer.error);
    p->answer.error = strdup("passed on, but there is no real HTTP client");
  }
  if (p->answer.kind == HTTP_STUB_RESPOND && p->answer.body_len > req->max_body) {
    /* what the real client says of such a body */
    char why[96];
    snprintf(why, sizeof why, "the response body is larger than %zu bytes (max_body)",
             req->max_body);
    p->answer.kind = HTTP_STUB_FAIL;
    free(p->answer.error);
    p->answer.error = strdup(why);
  }
  /* Even an answer without delay waits for a timer: the callback never
   * runs inside http_request. */
  if ((p->timer = timer_new(sc->clock, pending_fire, p)) == NULL) {
    answer_free(&p->answer);
    free(p);
    return -1;
  }
  p->owner = sc;
  p->done = done;
  p->data = data;
  p->next = sc->pending;
  if (sc->pending) sc->pending->prev = p;
  sc->pending = p;
  timer_start(p->timer, p->answer.delay_ms);
  return 0;
}

static void stub_close(http_client *c) {
  struct stub_client *sc = (struct stub_client *)c;
  if (sc->closed) return;
  sc->closed = true;
  /* Every request in flight fails; a callback that asks for another is refused. */
  while (sc->pending) {
    struct pending *p = sc->pending;
    pending_unlink(p);
    timer_free(p->timer);
    p->done(p->data, NULL, CLOSED_TEXT, false);
    answer_free(&p->answer);
    free(p);
  }
  http_close(sc->real);
}

static void stub_free(http_client *c) {
  struct stub_client *sc = (struct stub_client *)c;
  stub_close(c);
  http_free(sc->real);
  free(sc);
}

static const struct http_ops stub_ops = {stub_request, stub_close, stub_free};

http_client *http_stub_new(lclock *clock, http_stub_answer_fn *answer, void *data) {
  struct stub_client *sc = calloc(1, sizeof *sc);
  if (sc == NULL) return NULL;
  sc->base.ops = &stub_ops;
  sc->clock = clock;
  sc->answer = answer;
  sc->answer_data = data;
  return &sc->base;
}

void http_stub_pass_to(http_client *stub, http_client *real) {
  struct stub_client *sc = (struct stub_client *)stub;
  if (sc->real) {
    http_close(sc->real);
    http_free(sc->real);
  }
  sc->real = real;
}
