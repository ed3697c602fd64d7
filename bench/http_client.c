/* http_client: the hand-written HTTP client luastream's ls.http is measured
 * against.
 *
 *   http_client --url URL --count N [--concurrency C] [--body-file F] [--body-bytes B]
 *               [--timeout-ms MS]
 *
 * What a careful C programmer would write to POST N payments to one HTTP
 * service, with the library and the loop luastream uses and the same requests
 * as bench/handlers/http/post_payment.lua:
 * - libcurl's multi interface driven by libuv, the pairing libcurl documents
 *   (docs/examples/multi-uv.c): curl_multi_socket_action, one uv_poll per
 *   socket libcurl asks to watch, one uv_timer for libcurl's timeout;
 * - exactly C requests in flight (default 64, the handler's lanes): C easy
 *   handles made once and reused, each re-added as soon as its response is in,
 *   so connections are kept alive and reused; CURLMOPT_MAX_HOST_CONNECTIONS = C;
 * - request i (1..N) is `POST URL` with `Content-Type: application/json` and
 *   payment i as the body (bench/payment.h: the bytes of entry i's `data`
 *   field as bench/loadgen publishes it, padded to B bytes with --body-bytes),
 *   or the file F's bytes for every request with --body-file; no
 *   `Expect: 100-continue` round trip;
 * - every request has a timeout (5 s, the handler's), the response body is
 *   read into a buffer and the status must be 200.
 * What it does not do that luastream does: read entries from Redis, decode
 * them, ack them, or hand the response's headers to anyone (libcurl parses
 * them; they are not copied). The comparison is the cost of the HTTP side
 * plus, for luastream, the consumer around it.
 *
 * Prints `requests=N rate=R seconds=S cpu_s=X cpu_us_per_request=Y failed=K`
 * on stdout: the clock and the process's own CPU (getrusage, user + system)
 * run from the first request to the last response. Exit status 0, or 1 when
 * any request failed (each failure is described on stderr, the first 10). */
#include "payment.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <uv.h>

#define MAX_CONCURRENCY 4096
#define RESPONSE_MAX (1 << 20)

/* One request slot: an easy handle reused for request after request. */
struct slot {
  CURL *easy;
  char *body; /* the request body (payment i), or the file's bytes */
  size_t bodycap;
  char *response; /* the response body, up to RESPONSE_MAX */
  size_t response_len, response_cap;
  long request; /* which request, 1..N */
};

/* libcurl's view of one socket: the poll handle watching it. */
struct sock {
  uv_poll_t poll;
  curl_socket_t fd;
};

static struct {
  uv_loop_t *loop;
  CURLM *multi;
  uv_timer_t timeout;
  struct curl_slist *headers;
  const char *url;
  long count, next, done, failed;
  long timeout_ms;
  size_t body_bytes;     /* --body-bytes */
  const char *file_body; /* --body-file: the same bytes for every request */
  size_t file_len;
  struct slot *slots;
  int concurrency;
} H;

static void die(const char *what, const char *why) {
  fprintf(stderr, "http_client: %s: %s\n", what, why);
  exit(1);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_s(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec +
         (double)u.ru_stime.tv_usec / 1e6;
}

static void fail(long request, const char *why) {
  if (H.failed++ < 10) fprintf(stderr, "http_client: request %ld: %s\n", request, why);
}

/* ---- the requests ---- */

static size_t on_response(char *data, size_t size, size_t n, void *userp) {
  struct slot *s = userp;
  size_t len = size * n;
  if (s->response_len + len > RESPONSE_MAX) return 0; /* libcurl fails the transfer */
  if (s->response_len + len > s->response_cap) {
    size_t cap = s->response_cap ? s->response_cap : 256;
    while (cap < s->response_len + len) cap *= 2;
    char *p = realloc(s->response, cap);
    if (p == NULL) return 0;
    s->response = p;
    s->response_cap = cap;
  }
  memcpy(s->response + s->response_len, data, len);
  s->response_len += len;
  return len;
}

/* Puts request H.next on slot s and hands it to the multi handle. */
static void start(struct slot *s) {
  s->request = ++H.next;
  s->response_len = 0;
  if (H.file_body == NULL) {
    char key[16];
    int keylen;
    int len = payment_format_sized(s->request, H.body_bytes, s->body, s->bodycap, key, sizeof key,
                                   &keylen);
    if (len < 0) die("payment", "does not fit its buffer");
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
  }
  CURLMcode rc = curl_multi_add_handle(H.multi, s->easy);
  if (rc != CURLM_OK) die("curl_multi_add_handle", curl_multi_strerror(rc));
}

static void setup_slot(struct slot *s) {
  s->easy = curl_easy_init();
  if (s->easy == NULL) die("curl_easy_init", "failed");
  if (H.file_body) {
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, H.file_body);
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)H.file_len);
  } else {
    s->bodycap = H.body_bytes + PAYMENT_SMALL;
    s->body = malloc(s->bodycap);
    if (s->body == NULL) die("malloc", "out of memory");
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, s->body); /* not copied: read at send time */
  }
  curl_easy_setopt(s->easy, CURLOPT_URL, H.url);
  curl_easy_setopt(s->easy, CURLOPT_POST, 1L);
  curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, H.headers);
  curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, on_response);
  curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s);
  curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
  curl_easy_setopt(s->easy, CURLOPT_TIMEOUT_MS, H.timeout_ms);
  curl_easy_setopt(s->easy, CURLOPT_NOSIGNAL, 1L);
}

/* Responses that are in: checked, and their slots given the next requests. */
static void check_done(void) {
  CURLMsg *m;
  int left;
  while ((m = curl_multi_info_read(H.multi, &left))) {
    if (m->msg != CURLMSG_DONE) continue;
    CURL *easy = m->easy_handle;
    CURLcode result = m->data.result; /* m is invalid once the handle is removed */
    void *priv;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
    struct slot *s = priv;
    curl_multi_remove_handle(H.multi, easy);
    if (result != CURLE_OK) {
      fail(s->request, curl_easy_strerror(result));
    } else {
      long status = 0;
      curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
      if (status != 200 || s->response_len == 0) {
        char why[64];
        snprintf(why, sizeof why, "status %ld, %zu bytes of body", status, s->response_len);
        fail(s->request, why);
      }
    }
    H.done++;
    if (H.next < H.count) start(s);
  }
  /* Idle kept-alive connections may still be watched: the loop is stopped
   * rather than left to run out of handles. */
  if (H.done == H.count) uv_stop(H.loop);
}

/* ---- libcurl on libuv (docs/examples/multi-uv.c) ---- */

static void on_socket_event(uv_poll_t *poll, int status, int events) {
  struct sock *k = poll->data;
  int flags = 0, running;
  if (status < 0) flags = CURL_CSELECT_ERR;
  if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
  curl_multi_socket_action(H.multi, k->fd, flags, &running);
  check_done();
}

static void on_timeout(uv_timer_t *t) {
  (void)t;
  int running;
  curl_multi_socket_action(H.multi, CURL_SOCKET_TIMEOUT, 0, &running);
  check_done();
}

/* libcurl's timer: -1 stops it; 0 means "soon, but not from this callback". */
static int set_timeout(CURLM *multi, long ms, void *userp) {
  (void)multi, (void)userp;
  if (ms < 0)
    uv_timer_stop(&H.timeout);
  else
    uv_timer_start(&H.timeout, on_timeout, (uint64_t)ms, 0);
  return 0;
}

static void free_sock(uv_handle_t *h) { free(h->data); }

/* At exit: every handle still open (the timer, polls of idle connections). */
static void close_handle(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, h->type == UV_POLL ? free_sock : NULL);
}

/* libcurl says which events to wait for on a socket, or that it is done with it. */
static int watch_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
  (void)easy, (void)userp;
  struct sock *k = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (k) {
      uv_poll_stop(&k->poll);
      uv_close((uv_handle_t *)&k->poll, free_sock);
      curl_multi_assign(H.multi, fd, NULL);
    }
    return 0;
  }
  if (k == NULL) {
    k = malloc(sizeof *k);
    if (k == NULL) die("malloc", "out of memory");
    k->fd = fd;
    if (uv_poll_init_socket(H.loop, &k->poll, fd) != 0) die("uv_poll_init_socket", "failed");
    k->poll.data = k;
    curl_multi_assign(H.multi, fd, k);
  }
  int events = 0;
  if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) events |= UV_READABLE;
  if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) events |= UV_WRITABLE;
  uv_poll_start(&k->poll, events, on_socket_event);
  return 0;
}

/* ---- main ---- */

static void usage(void) {
  fprintf(stderr,
          "usage: http_client --url URL --count N [--concurrency C] [--body-file F]\n"
          "                   [--body-bytes B] [--timeout-ms MS]\n");
  exit(2);
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) die(path, "cannot open");
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (buf == NULL) die(path, "out of memory");
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    cap *= 2;
    /* cppcheck-suppress memleakOnRealloc ; a failed realloc exits through die() on the next turn */
    buf = realloc(buf, cap);
  }
  if (ferror(f)) die(path, "cannot read");
  fclose(f);
  *len = n;
  return buf;
}

int main(int argc, char **argv) {
  const char *body_file = NULL;
  H.concurrency = 64;
  H.timeout_ms = 5000;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (v == NULL) usage();
    if (!strcmp(a, "--url"))
      H.url = v;
    else if (!strcmp(a, "--count"))
      H.count = atol(v);
    else if (!strcmp(a, "--concurrency"))
      H.concurrency = atoi(v);
    else if (!strcmp(a, "--body-file"))
      body_file = v;
    else if (!strcmp(a, "--body-bytes"))
      H.body_bytes = (size_t)atol(v);
    else if (!strcmp(a, "--timeout-ms"))
      H.timeout_ms = atol(v);
    else
      usage();
    i++;
  }
  if (H.url == NULL || H.count < 1 || H.concurrency < 1 || H.concurrency > MAX_CONCURRENCY ||
      H.timeout_ms < 1)
    usage();
  char *file = NULL;
  if (body_file) H.file_body = file = read_file(body_file, &H.file_len);

  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) die("curl_global_init", "failed");
  H.loop = uv_default_loop();
  uv_timer_init(H.loop, &H.timeout);
  H.multi = curl_multi_init();
  if (H.multi == NULL) die("curl_multi_init", "failed");
  curl_multi_setopt(H.multi, CURLMOPT_SOCKETFUNCTION, watch_socket);
  curl_multi_setopt(H.multi, CURLMOPT_TIMERFUNCTION, set_timeout);
  curl_multi_setopt(H.multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)H.concurrency);
  curl_multi_setopt(H.multi, CURLMOPT_MAXCONNECTS, (long)H.concurrency);
  H.headers = curl_slist_append(NULL, "Content-Type: application/json");
  H.headers = curl_slist_append(H.headers, "Expect:"); /* no 100-continue wait for large bodies */
  if (H.headers == NULL) die("curl_slist_append", "failed");

  int slots = H.count < H.concurrency ? (int)H.count : H.concurrency;
  H.slots = calloc((size_t)slots, sizeof *H.slots);
  if (H.slots == NULL) die("calloc", "out of memory");
  for (int i = 0; i < slots; i++) setup_slot(&H.slots[i]);

  double cpu0 = cpu_s(), t0 = now_s();
  for (int i = 0; i < slots; i++) start(&H.slots[i]);
  uv_run(H.loop, UV_RUN_DEFAULT);
  double seconds = now_s() - t0, cpu = cpu_s() - cpu0;

  if (H.done != H.count)
    fprintf(stderr, "http_client: the loop ended after %ld of %ld\n", H.done, H.count);
  printf("requests=%ld rate=%.0f seconds=%.3f cpu_s=%.3f cpu_us_per_request=%.2f failed=%ld\n",
         H.done, (double)H.done / seconds, seconds, cpu, cpu / (double)H.done * 1e6, H.failed);

  /* The poll handles go before libcurl closes their sockets; libcurl is told
   * not to report sockets any more. */
  curl_multi_setopt(H.multi, CURLMOPT_SOCKETFUNCTION, NULL);
  uv_walk(H.loop, close_handle, NULL);
  uv_run(H.loop, UV_RUN_DEFAULT);
  uv_loop_close(H.loop);
  for (int i = 0; i < slots; i++) {
    curl_multi_remove_handle(H.multi, H.slots[i].easy); /* one still in flight after a failure */
    curl_easy_cleanup(H.slots[i].easy);
    free(H.slots[i].body);
    free(H.slots[i].response);
  }
  free(H.slots);
  curl_multi_cleanup(H.multi);
  curl_slist_free_all(H.headers);
  curl_global_cleanup();
  free(file);
  return H.failed || H.done != H.count ? 1 : 0;
}
