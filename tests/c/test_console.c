/* Tests for the web console's parts that need no Redis: the tokens file and
 * sessions (console_auth.c), JSON text and form parameters
 * (console_json.c), and the HTTP server on a real loop and socket
 * (console_http.c): pipelined requests, limits, methods, the security
 * headers, and a connection that goes while its answer is pending. */
#define _DEFAULT_SOURCE /* usleep */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "console_auth.h"
#include "console_http.h"
#include "console_json.h"
#include "task.h"

#define HEX32 "0123456789abcdef0123456789abcdef"

/* Writes text to a new file of mode; its path into path. */
static void tokens_file(char *path, size_t len, const char *text, mode_t mode) {
  snprintf(path, len, "/tmp/luastream-test-tokens-XXXXXX");
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  ASSERT_INT_EQ(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  ASSERT_OK(chmod(path, mode));
}

/* The error console_auth_load gives for text (mode 0600), "" when it loads. */
static const char *load_error(const char *text, mode_t mode) {
  static char err[512];
  char path[64];
  tokens_file(path, sizeof path, text, mode);
  err[0] = '\0';
  struct console_auth *a = console_auth_load(path, err, sizeof err);
  unlink(path);
  if (a) {
    console_auth_free(a);
    return "";
  }
  return err;
}

TEST_IMPL(console_tokens_file_is_checked) {
  ASSERT_STR_EQ(load_error("# ops\n\nalice " HEX32 "\nci   AbCdEfGhIjKlMnOpQrStUv-_\n", 0600), "");
  ASSERT_STR_EQ(load_error("alice " HEX32 "\n", 0400), "");
  ASSERT_CONTAINS(load_error("alice " HEX32 "\n", 0640), "its group (mode 640)");
  ASSERT_CONTAINS(load_error("alice " HEX32 "\n", 0604), "every user (mode 604)");
  ASSERT_CONTAINS(load_error("alice " HEX32 "\n", 0620), "chmod 600");
  /* 31 hex digits: 124 bits; 21 base64 characters: 126 */
  ASSERT_CONTAINS(load_error("alice 0123456789abcdef0123456789abcde\n", 0600),
                  ":1: the token is too short");
  ASSERT_CONTAINS(load_error("\nalice AbCdEfGhIjKlMnOpQrStU\n", 0600),
                  ":2: the token is too short");
  ASSERT_CONTAINS(load_error("alice " HEX32 "\nbob " HEX32 "\n", 0600), ":2: a token given twice");
  ASSERT_CONTAINS(load_error("alice " HEX32 "\nalice " HEX32 "0\n", 0600),
                  ":2: a name given twice");
  ASSERT_CONTAINS(load_error("alice " HEX32 " extra\n", 0600), ":1: want NAME TOKEN, found more");
  ASSERT_CONTAINS(load_error("alice\n", 0600), ":1: want NAME TOKEN");
  ASSERT_CONTAINS(load_error("alice " HEX32 "!\n", 0600), "outside the hex and base64");
  ASSERT_CONTAINS(load_error("a\"b " HEX32 "\n", 0600), "a quote");
  ASSERT_CONTAINS(load_error("# nobody\n", 0600), "holds no token");
  char err[256];
  ASSERT_NULL(console_auth_load("/nonexistent/tokens", err, sizeof err));
  ASSERT_CONTAINS(err, "/nonexistent/tokens: cannot read it");
}

TEST_IMPL(console_tokens_are_compared_whole) {
  char path[64], err[256];
  tokens_file(path, sizeof path, "alice " HEX32 "\nbob " HEX32 "ff\n", 0600);
  struct console_auth *a = console_auth_load(path, err, sizeof err);
  unlink(path);
  ASSERT_NOT_NULL(a);
  ASSERT_INT_EQ(console_auth_count(a), 2);
  ASSERT_STR_EQ(console_auth_check(a, HEX32, 32), "alice");
  ASSERT_STR_EQ(console_auth_check(a, HEX32 "ff", 34), "bob");
  ASSERT_NULL(console_auth_check(a, HEX32, 31));       /* a prefix */
  ASSERT_NULL(console_auth_check(a, HEX32 "f", 33));   /* longer than one, shorter than the other */
  ASSERT_NULL(console_auth_check(a, HEX32 "ff0", 35)); /* longer */
  ASSERT_NULL(console_auth_check(a, "", 0));
  char other[] = HEX32;
  other[31] = '0';
  ASSERT_NULL(console_auth_check(a, other, 32));
  console_auth_free(a);
}

TEST_IMPL(console_sessions_open_find_and_end) {
  char path[64], err[256];
  tokens_file(path, sizeof path, "alice " HEX32 "\n", 0600);
  struct console_auth *a = console_auth_load(path, err, sizeof err);
  unlink(path);
  ASSERT_NOT_NULL(a);
  uint64_t t = 1000000;
  const struct console_session *s = console_session_open(a, "alice", t);
  ASSERT_NOT_NULL(s);
  char id[CONSOLE_SESSION_HEX + 1], csrf[CONSOLE_SESSION_HEX + 1];
  memcpy(id, s->id, sizeof id);
  memcpy(csrf, s->csrf, sizeof csrf);
  ASSERT_INT_EQ(strlen(id), CONSOLE_SESSION_HEX);
  ASSERT(strcmp(id, csrf) != 0);
  const struct console_session *again = console_session_open(a, "alice", t);
  ASSERT(strcmp(again->id, id) != 0); /* random each time */
  ASSERT(console_session_find(a, id, CONSOLE_SESSION_HEX, t + 1) == s);
  ASSERT_STR_EQ(s->name, "alice");
  ASSERT_NULL(console_session_find(a, id, CONSOLE_SESSION_HEX - 1, t + 1));
  id[0] = id[0] == 'a' ? 'b' : 'a';
  ASSERT_NULL(console_session_find(a, id, CONSOLE_SESSION_HEX, t + 1));
  id[0] = s->id[0];
  /* idle past the limit: gone; a request within it keeps it */
  ASSERT_NOT_NULL(
      console_session_find(a, id, CONSOLE_SESSION_HEX, t + CONSOLE_SESSION_IDLE_MS - 1));
  uint64_t seen = t + CONSOLE_SESSION_IDLE_MS - 1;
  ASSERT_NULL(console_session_find(a, id, CONSOLE_SESSION_HEX, seen + CONSOLE_SESSION_IDLE_MS));
  /* a fresh one ends at logout */
  s = console_session_open(a, "alice", t);
  memcpy(id, s->id, sizeof id);
  console_session_close(a, id, CONSOLE_SESSION_HEX, t + 1);
  ASSERT_NULL(console_session_find(a, id, CONSOLE_SESSION_HEX, t + 2));
  /* and at the most a login lasts, however busy */
  s = console_session_open(a, "alice", t);
  memcpy(id, s->id, sizeof id);
  for (uint64_t now = t; now < t + CONSOLE_SESSION_MAX_MS; now += CONSOLE_SESSION_IDLE_MS / 2)
    ASSERT_NOT_NULL(console_session_find(a, id, CONSOLE_SESSION_HEX, now));
  ASSERT_NULL(console_session_find(a, id, CONSOLE_SESSION_HEX, t + CONSOLE_SESSION_MAX_MS));
  console_auth_free(a);
}

/* cj_text's output for the n bytes of s, and whether it escaped. */
static const char *text_of(const char *s, size_t n, bool *escaped) {
  static char out[512];
  FILE *f = fmemopen(out, sizeof out, "w");
  ASSERT_NOT_NULL(f);
  *escaped = cj_text(f, s, n);
  fclose(f);
  return out;
}

TEST_IMPL(console_json_text_shows_bytes) {
  bool e;
  ASSERT_STR_EQ(text_of("plain", 5, &e), "\"plain\"");
  ASSERT(!e);
  ASSERT_STR_EQ(text_of("<script>&", 9, &e), "\"\\u003cscript\\u003e\\u0026\"");
  ASSERT(!e);
  ASSERT_STR_EQ(text_of("a\"b\\c\nd\te", 9, &e), "\"a\\\"b\\\\c\\nd\\te\"");
  ASSERT(!e);
  ASSERT_STR_EQ(text_of("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14, &e),
                "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  ASSERT(!e);
  ASSERT_STR_EQ(text_of("\x1b[31m", 5, &e), "\"\\\\x1b[31m\"");
  ASSERT(e);
  ASSERT_STR_EQ(text_of("a\0b", 3, &e), "\"a\\\\x00b\"");
  ASSERT(e);
  /* not UTF-8: a lone byte, an overlong form, a surrogate, a cut sequence */
  ASSERT_STR_EQ(text_of("\xff", 1, &e), "\"\\\\xff\"");
  ASSERT_STR_EQ(text_of("\xc0\xaf", 2, &e), "\"\\\\xc0\\\\xaf\"");
  ASSERT_STR_EQ(text_of("\xed\xa0\x80", 3, &e), "\"\\\\xed\\\\xa0\\\\x80\"");
  ASSERT_STR_EQ(text_of("\xe2\x82", 2, &e), "\"\\\\xe2\\\\x82\"");
  ASSERT(e);
}

TEST_IMPL(console_form_parameters_decode) {
  char *v = cj_param("a=1&stream=pay%3Ameants+x&b=", "stream");
  ASSERT_STR_EQ(v, "pay:meants x");
  free(v);
  v = cj_param("a=1&b=", "b");
  ASSERT_STR_EQ(v, "");
  free(v);
  ASSERT_NULL(cj_param("ab=1", "a"));
  ASSERT_NULL(cj_param("a=%zz", "a"));
  ASSERT_NULL(cj_param("a=%4", "a"));
  ASSERT_NULL(cj_param("a=x%00y", "a")); /* no 0 byte inside a C string */
  size_t n;
  char **ids = cj_params("id=1-0&x=2&id=2-0&id=3-0", "id", 10, &n);
  ASSERT_INT_EQ(n, 3);
  ASSERT_STR_EQ(ids[0], "1-0");
  ASSERT_STR_EQ(ids[2], "3-0");
  cj_params_free(ids, n);
  ids = cj_params("id=1-0&id=2-0&id=3-0", "id", 2, &n);
  ASSERT_INT_EQ(n, 2);
  cj_params_free(ids, n);
  ASSERT_NULL(cj_params("x=1", "id", 10, &n));
  ASSERT_INT_EQ(n, 0);
}

/* ---- the HTTP server ---- */

struct served {
  int requests;
  struct console_request *held; /* answered later by the test */
  char last_path[64], last_query[64], last_body[64], last_host[64];
  char last_origin[64], last_csrf[64];
};

static void on_request(void *data, struct console_request *req) {
  struct served *s = data;
  s->requests++;
  snprintf(s->last_path, sizeof s->last_path, "%s", req->path);
  snprintf(s->last_query, sizeof s->last_query, "%s", req->query);
  snprintf(s->last_body, sizeof s->last_body, "%s", req->body ? req->body : "");
  snprintf(s->last_host, sizeof s->last_host, "%s", req->host ? req->host : "");
  snprintf(s->last_origin, sizeof s->last_origin, "%s", req->origin ? req->origin : "");
  snprintf(s->last_csrf, sizeof s->last_csrf, "%s", req->csrf ? req->csrf : "");
  if (!strcmp(req->path, "/hold")) {
    s->held = req;
    return;
  }
  console_http_respond(req, 200, "text/plain", NULL, req->path, strlen(req->path));
}

static int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ASSERT_OK(connect(fd, (struct sockaddr *)&sa, sizeof sa));
  return fd;
}

/* Runs the loop until fd has given `want` responses (counted by their
 * status lines) or closed; the bytes into out. */
static size_t read_answers(uv_loop_t *loop, int fd, int want, char *out, size_t cap) {
  size_t got = 0;
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  for (int i = 0; i < 500; i++) {
    uv_run(loop, UV_RUN_NOWAIT);
    if (poll(&pfd, 1, 10) <= 0) continue;
    ssize_t n = read(fd, out + got, cap - 1 - got);
    if (n <= 0) break;
    got += (size_t)n;
    out[got] = '\0';
    int seen = 0;
    for (const char *p = out; (p = strstr(p, "HTTP/1.1 ")) != NULL; p++) seen++;
    if (seen >= want) break;
  }
  out[got] = '\0';
  return got;
}

static void send_all(int fd, const char *s) {
  ASSERT_INT_EQ(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

TEST_IMPL(console_http_serves_pipelined_requests_in_order) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  struct served s = {0};
  char err[256], out[8192];
  console_http *h = console_http_start(&loop, "127.0.0.1:0", on_request, &s, err, sizeof err);
  ASSERT_NOT_NULL(h);
  int fd = connect_to(console_http_port(h));
  send_all(fd,
           "GET /one?a=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
           "POST /two HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nid=1x"
           "GET /three HTTP/1.1\r\nHost: h\r\n\r\n");
  read_answers(&loop, fd, 3, out, sizeof out);
  ASSERT_INT_EQ(s.requests, 3);
  const char *one = strstr(out, "\r\n\r\n/one"), *two = strstr(out, "\r\n\r\n/two"),
             *three = strstr(out, "\r\n\r\n/three");
  ASSERT(one && two && three && one < two && two < three);
  ASSERT_STR_EQ(s.last_path, "/three");
  ASSERT_CONTAINS(out, "Content-Security-Policy: default-src 'none'; script-src 'self'");
  ASSERT_CONTAINS(out, "frame-ancestors 'none'");
  ASSERT_CONTAINS(out, "X-Content-Type-Options: nosniff\r\n");
  ASSERT_CONTAINS(out, "Referrer-Policy: no-referrer\r\n");
  ASSERT_CONTAINS(out, "Connection: keep-alive\r\n");
  ASSERT(strstr(out, "Access-Control-Allow-Origin") == NULL);
  close(fd);
  /* the body and query reach the console as sent */
  fd = connect_to(console_http_port(h));
  send_all(fd, "POST /p?x=%3C HTTP/1.1\r\nHost: a:1\r\nContent-Length: 7\r\n\r\nid=2-0&");
  read_answers(&loop, fd, 1, out, sizeof out);
  ASSERT_STR_EQ(s.last_query, "x=%3C");
  ASSERT_STR_EQ(s.last_body, "id=2-0&");
  ASSERT_STR_EQ(s.last_host, "a:1");
  close(fd);
  console_http_close(h);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_OK(uv_loop_close(&loop));
}

/* What the server answers to one raw request on a new connection. */
static const char *answer_to(uv_loop_t *loop, console_http *h, const char *raw) {
  static char out[8192];
  int fd = connect_to(console_http_port(h));
  send_all(fd, raw);
  read_answers(loop, fd, 1, out, sizeof out);
  close(fd);
  return out;
}

TEST_IMPL(console_http_refuses_what_it_does_not_take) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  struct served s = {0};
  char err[256];
  console_http *h = console_http_start(&loop, "127.0.0.1:0", on_request, &s, err, sizeof err);
  ASSERT_NOT_NULL(h);
  ASSERT_CONTAINS(answer_to(&loop, h, "PUT /x HTTP/1.1\r\nHost: h\r\n\r\n"), "HTTP/1.1 405 ");
  ASSERT_CONTAINS(answer_to(&loop, h, "GET x HTTP/1.1\r\nHost: h\r\n\r\n"), "HTTP/1.1 400 ");
  ASSERT_CONTAINS(answer_to(&loop, h, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"),
                  "HTTP/1.1 400 ");
  /* a header the console looks at, given twice */
  ASSERT_CONTAINS(answer_to(&loop, h, "GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
                  "HTTP/1.1 400 ");
  ASSERT_CONTAINS(
      answer_to(&loop, h, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999\r\n\r\n"),
      "HTTP/1.1 413 ");
  char big[CONSOLE_HTTP_HEADERS_MAX + 200];
  int n = snprintf(big, sizeof big, "GET /x HTTP/1.1\r\nHost: h\r\nX-Pad: ");
  memset(big + n, 'a', sizeof big - (size_t)n - 5);
  memcpy(big + sizeof big - 5, "\r\n\r\n", 5);
  ASSERT_CONTAINS(answer_to(&loop, h, big), "HTTP/1.1 431 ");
  ASSERT_INT_EQ(s.requests, 0); /* none of these reached the console */
  console_http_close(h);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_OK(uv_loop_close(&loop));
}

/* Runs the loop until the server has handed /hold to the console. */
static struct console_request *wait_held(uv_loop_t *loop, struct served *s) {
  for (int i = 0; i < 200 && s->held == NULL; i++) uv_run(loop, UV_RUN_NOWAIT), usleep(1000);
  return s->held;
}

TEST_IMPL(console_http_answer_after_the_client_went) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  struct served s = {0};
  char err[256], out[1024];
  console_http *h = console_http_start(&loop, "127.0.0.1:0", on_request, &s, err, sizeof err);
  ASSERT_NOT_NULL(h);
  int fd = connect_to(console_http_port(h));
  send_all(fd, "GET /hold HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_NOT_NULL(wait_held(&loop, &s));
  close(fd);
  for (int i = 0; i < 20; i++) uv_run(&loop, UV_RUN_NOWAIT), usleep(1000);
  console_http_respond(s.held, 200, "text/plain", NULL, "late", 4); /* into the void, freed */
  /* and one held while the server closes */
  s.held = NULL;
  fd = connect_to(console_http_port(h));
  send_all(fd, "GET /hold HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_NOT_NULL(wait_held(&loop, &s));
  console_http_close(h);
  uv_run(&loop, UV_RUN_DEFAULT);
  console_http_respond(s.held, 200, "text/plain", NULL, "late", 4);
  ASSERT_INT_EQ(read_answers(&loop, fd, 1, out, sizeof out), 0); /* closed, nothing sent */
  close(fd);
  ASSERT_OK(uv_loop_close(&loop));
}

/* http-parser hands a chunked body's trailer to the header callbacks too:
 * what comes there is never a header of the request (a proxy checking the
 * headers never sees it), nor a reason to refuse the next request. */
TEST_IMPL(console_http_trailer_is_no_header) {
  uv_loop_t loop;
  ASSERT_OK(uv_loop_init(&loop));
  struct served s = {0};
  char err[256], out[4096];
  console_http *h = console_http_start(&loop, "127.0.0.1:0", on_request, &s, err, sizeof err);
  ASSERT_NOT_NULL(h);
  int fd = connect_to(console_http_port(h));
  send_all(
      fd,
      "POST /one HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
      "2\r\nab\r\n0\r\nOrigin: http://evil.example\r\nX-CSRF-Token: forged\r\nHost: b\r\n\r\n");
  read_answers(&loop, fd, 1, out, sizeof out);
  ASSERT_INT_EQ(s.requests, 1);
  ASSERT_CONTAINS(out, "HTTP/1.1 200 ");
  ASSERT_STR_EQ(s.last_host, "a");
  ASSERT_STR_EQ(s.last_origin, "");
  ASSERT_STR_EQ(s.last_csrf, "");
  send_all(fd, "GET /two HTTP/1.1\r\nHost: a\r\n\r\n"); /* the same connection, kept */
  read_answers(&loop, fd, 1, out, sizeof out);
  close(fd);
  ASSERT_INT_EQ(s.requests, 2);
  ASSERT_CONTAINS(out, "HTTP/1.1 200 ");
  ASSERT_STR_EQ(s.last_path, "/two");
  console_http_close(h);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_OK(uv_loop_close(&loop));
}

/* Reading the file again: a session whose token is gone or changed ends,
 * the others stay; a file refused then keeps everything. */
TEST_IMPL(console_tokens_reload_ends_what_changed) {
  char path[64], err[256];
  tokens_file(path, sizeof path, "alice " HEX32 "\nbob " HEX32 "ff\ncarol " HEX32 "ee\n", 0600);
  struct console_auth *a = console_auth_load(path, err, sizeof err);
  ASSERT_NOT_NULL(a);
  char ids[3][CONSOLE_SESSION_HEX + 1];
  const char *names[] = {"alice", "bob", "carol"};
  for (int i = 0; i < 3; i++)
    memcpy(ids[i], console_session_open(a, names[i], 1000)->id, sizeof ids[i]);
  /* bob removed, carol's token changed */
  FILE *f = fopen(path, "w");
  ASSERT_NOT_NULL(f);
  fputs("alice " HEX32 "\ncarol " HEX32 "dd\n", f);
  fclose(f);
  ASSERT_OK(console_auth_reload(a, path, err, sizeof err));
  ASSERT_INT_EQ(console_auth_count(a), 2);
  ASSERT_NOT_NULL(console_session_find(a, ids[0], CONSOLE_SESSION_HEX, 1001));
  ASSERT_NULL(console_session_find(a, ids[1], CONSOLE_SESSION_HEX, 1001));
  ASSERT_NULL(console_session_find(a, ids[2], CONSOLE_SESSION_HEX, 1001));
  ASSERT_NULL(console_auth_check(a, HEX32 "ff", 34));
  ASSERT_STR_EQ(console_auth_check(a, HEX32 "dd", 34), "carol");
  ASSERT_OK(chmod(path, 0644));
  ASSERT_INT_EQ(console_auth_reload(a, path, err, sizeof err), -1);
  ASSERT_CONTAINS(err, "mode 644");
  ASSERT_NOT_NULL(console_session_find(a, ids[0], CONSOLE_SESSION_HEX, 1002));
  ASSERT_STR_EQ(console_auth_check(a, HEX32, 32), "alice");
  unlink(path);
  console_auth_free(a);
}
