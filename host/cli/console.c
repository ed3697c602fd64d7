/* console: the web console's service (console.h): who may ask what, the
 * pages, the shared overview and the handler files. */
#include "console.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <uv.h>

#include "clock.h"
#include "console_internal.h"
#include "console_json.h"
#include "grow.h"
#include "host.h"
#include "log.h"
#include "partition.h"
#include "runtime.h"
#include "status_judge.h"
#include "status_print.h"

#define COOKIE "luastream_session"

static const char INDEX_HTML[] = {
#include "host/cli/console/index.html.inc"
};
static const char LOGIN_HTML[] = {
#include "host/cli/console/login.html.inc"
};
static const char CONSOLE_JS[] = {
#include "host/cli/console/console.js.inc"
};
static const char CONSOLE_CSS[] = {
#include "host/cli/console/console.css.inc"
};

/* ---- handlers ---- */

static void pairs_clear(struct console *c) {
  for (size_t i = 0; i < c->npairs; i++) {
    free(c->pairs[i].dead_letter);
    free(c->pairs[i].stream);
    free(c->pairs[i].group);
  }
  c->npairs = 0;
}

/* partition_each's: where the dead letters of s may be replayed to. */
static void add_pair(void *data, const struct handler_spec *s) {
  struct console *c = data;
  if (s->dead_letter == NULL) return;
  struct console_pair *p = grow(c->pairs, &c->cappairs, c->npairs + 1, sizeof *p, 8);
  if (p == NULL) return;
  c->pairs = p;
  p = &c->pairs[c->npairs];
  *p = (struct console_pair){strdup(s->dead_letter), strdup(s->stream), strdup(s->group)};
  if (!p->dead_letter || !p->stream || !p->group) {
    free(p->dead_letter);
    free(p->stream);
    free(p->group);
    return;
  }
  c->npairs++;
}

/* What one load of DIR tells: the rows of the overview and where dead
 * letters may be replayed to; with out, a row per file for the handlers
 * page. */
struct load {
  struct console *c;
  FILE *out; /* the handlers page's rows, or NULL */
  int rows;
};

static void take_spec(void *data, const struct handler_spec *s) {
  struct load *l = data;
  struct console *c = l->c;
  status_query_add_handler(&c->q, s);
  partition_each(s, add_pair, c); /* out of memory: a partition not replayable */
  if (l->out == NULL) return;
  FILE *f = l->out;
  char version[RT_VERSION_LEN] = "";
  handler_file_version(s->path, version);
  fprintf(f, "%s{\"file\":", l->rows++ ? "," : "");
  cj_str(f, s->path);
  fputs(",\"name\":", f);
  cj_str(f, s->name);
  fputs(",\"version\":", f);
  cj_str(f, version[0] ? version : NULL);
  if (spec_scheduled(s)) { /* no stream: when it ticks (status's words) */
    char *when = status_query_when(s);
    fputs(",\"schedule\":", f);
    cj_str(f, when);
    free(when);
    fprintf(f, ",\"schedule_name\":");
    cj_str(f, spec_schedule_name(s));
    fputs("}", f);
    return;
  }
  fputs(",\"stream\":", f);
  cj_str(f, s->stream);
  fputs(",\"group\":", f);
  cj_str(f, s->group);
  fputs(",\"read\":", f);
  cj_str(f, rt_read_mode_name(s->read));
  fprintf(f, ",\"lanes\":%d,\"by_key\":%s,\"min_idle_ms\":", s->workers,
          s->by_key ? "true" : "false");
  cj_num(f, s->min_idle_ms);
  fputs(",\"dead_letter\":", f);
  cj_str(f, s->dead_letter);
  fprintf(f, ",\"partitions\":%d}", s->partitions);
}

/* Loads DIR's handler files again (without connecting them): the overview's
 * rows, the replay pairs and the problems; with out, the handlers' rows. */
static void load_handlers(struct console *c, FILE *out) {
  if (c->cfg.dir == NULL) return;
  struct load l = {.c = c, .out = out};
  status_query_clear_specs(&c->q);
  pairs_clear(c);
  char *problems = NULL;
  size_t len = 0;
  FILE *report = open_memstream(&problems, &len);
  host_check_report(c->cfg.dir, c->cfg.load_timeout_ms, c->cfg.trust, report ? report : stderr,
                    take_spec, &l);
  if (report) fclose(report);
  free(c->problems);
  c->problems = problems;
}

/* What DIR's Lua files are now, as one number: each one's name, inode, size
 * and times. It changes when one is written, added, removed or renamed. */
static uint64_t dir_signature(const char *dir) {
  uint64_t h = 14695981039346656037ULL; /* FNV-1a */
  DIR *d = opendir(dir);
  if (d == NULL) return 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t n = strlen(e->d_name);
    if (e->d_name[0] == '.' || n < 4 || strcmp(e->d_name + n - 4, ".lua") != 0) continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, 0) != 0) memset(&st, 0, sizeof st);
    uint64_t v[] = {(uint64_t)st.st_ino, (uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec,
                    (uint64_t)st.st_mtim.tv_nsec, (uint64_t)st.st_ctim.tv_nsec};
    for (const unsigned char *p = (const unsigned char *)e->d_name; *p; p++)
      h = (h ^ *p) * 1099511628211ULL;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) h = (h ^ v[i]) * 1099511628211ULL;
  }
  closedir(d);
  return h;
}

/* DIR's handler files as they are now: loaded again when DIR changed since
 * (a reload of the host, a deploy), so that what the pages show and allow
 * follows the files. */
static void handlers_current(struct console *c) {
  if (c->cfg.dir == NULL) return;
  uint64_t sig = dir_signature(c->cfg.dir);
  if (sig == c->dir_sig && c->dir_sig != 0) return;
  c->dir_sig = sig;
  load_handlers(c, NULL);
}

/* ---- the overview ---- */

static void answer_overview(struct console_request *req, const struct console *c) {
  console_json(req, 200, c->overview, c->overview_len);
}

static void fail_waiting(struct console *c, const char *why) {
  for (size_t i = 0; i < c->nwaiting; i++) console_error(c->waiting[i], 502, "%s", why);
  c->nwaiting = 0;
}

static void refresh_go(struct console *c, void *arg);

static void refresh_fail(struct console *c, void *arg, const char *why) {
  (void)arg;
  c->refreshing = c->refresh_sent = false;
  fail_waiting(c, why);
}

/* A refresh sent lost its connection: once, it is sent again on a session
 * afresh (a Redis restarted, a connection killed), then the pages waiting
 * are told. */
static void refresh_lost(struct console *c, const char *why) {
  c->refresh_sent = false;
  if (c->refresh_retried || c->closing || c->retry == NULL) return refresh_fail(c, NULL, why);
  c->refresh_retried = true;
  timer_start(c->retry, 0); /* out of the callbacks of the session that ended */
}

static void refresh_again(ltimer *t, void *data) {
  (void)t;
  struct console *c = data;
  console_redis(c, refresh_go, refresh_fail, NULL);
}

/* The connection ended: a refresh sent on it will not finish (its callbacks
 * saw the client finished). One only queued for the connection waits for
 * the next. */
static void redis_ended(struct console *c) {
  if (c->refresh_sent) refresh_lost(c, "the connection to Redis ended");
}

static void refresh_done(struct status_query *q, bool failed) {
  struct console *c = q->data;
  if (failed) {
    /* the rest of its replies fail too: they find the session ended */
    c->refresh_sent = false;
    client_done(&c->client, 1);
    return refresh_lost(c, "Redis did not answer (the log says why)");
  }
  c->refreshing = c->refresh_sent = c->refresh_retried = false;
  bool needs = false;
  for (size_t i = 0; i < q->ngroups; i++) {
    status_carry_lags(q, &q->groups[i]);
    status_judge(q, &q->groups[i]);
    needs = needs || q->groups[i].natt > 0;
  }
  char *buf;
  size_t len;
  FILE *f = console_json_begin(&buf, &len);
  if (f == NULL) return fail_waiting(c, "out of memory");
  status_print_json(f, q, needs);
  /* the status document ends "}\n": the console's fields go inside */
  fflush(f);
  if (len >= 2) fseeko(f, (off_t)len - 2, SEEK_SET);
  unsigned long long took = (uv_hrtime() - c->refresh_ns) / 1000000;
  fprintf(f, ",\"refreshed_ms\":%llu,\"refresh_took_ms\":%llu}",
          (unsigned long long)clock_wall(c->clock), took);
  if (fclose(f) != 0) {
    free(buf);
    return fail_waiting(c, "out of memory");
  }
  free(c->overview);
  c->overview = buf;
  c->overview_len = len;
  c->overview_ms = uv_now(c->loop);
  for (size_t i = 0; i < c->nwaiting; i++) answer_overview(c->waiting[i], c);
  c->nwaiting = 0;
}

static void refresh_go(struct console *c, void *arg) {
  (void)arg;
  c->q.c = &c->client;
  c->refresh_ns = uv_hrtime();
  c->refresh_sent = true;
  status_query_refresh(&c->q);
}

/* One refresh of Redis per interval, shared by every page open: a page asks
 * every interval, and gets the document of the last refresh when it is
 * younger than that, else waits for the next one (started by the first
 * page to ask). Nobody asking: no refresh. */
static void overview(struct console *c, struct console_request *req) {
  uint64_t interval = c->cfg.interval_ms ? c->cfg.interval_ms : CONSOLE_INTERVAL_MS;
  /* a page asking at its interval finds the document of one its neighbour
   * asked for a little earlier: an age of 90% of the interval still counts */
  if (c->overview && uv_now(c->loop) - c->overview_ms < interval * 9 / 10)
    return answer_overview(req, c);
  struct console_request **w = grow(c->waiting, &c->capwaiting, c->nwaiting + 1, sizeof *w, 8);
  if (w == NULL) return console_error(req, 500, "out of memory");
  c->waiting = w;
  c->waiting[c->nwaiting++] = req;
  if (c->refreshing) return;
  c->refreshing = true;
  c->refresh_retried = false;
  console_redis(c, refresh_go, refresh_fail, NULL);
}

/* ---- handlers and reload ---- */

struct running_row {
  FILE *f;
  int n;
};

static void running_one(void *arg, const char *path, const char *version) {
  struct running_row *r = arg;
  fprintf(r->f, "%s{\"file\":", r->n++ ? "," : "");
  cj_str(r->f, path);
  fputs(",\"version\":", r->f);
  cj_str(r->f, version);
  fputc('}', r->f);
}

/* The problems text as a JSON array of lines. */
static void problems_json(FILE *f, const char *problems) {
  fputc('[', f);
  int n = 0;
  for (const char *p = problems ? problems : ""; *p;) {
    size_t len = strcspn(p, "\n");
    if (len) {
      fputs(n++ ? "," : "", f);
      cj_text(f, p, len);
    }
    p += len + (p[len] == '\n');
  }
  fputc(']', f);
}

/* GET /api/handlers: DIR's files as they are now (what a reload would load)
 * and, where handlers run, the files and versions running. */
static void handlers_page(struct console *c, struct console_request *req) {
  char *buf, *rows = NULL;
  size_t len, rlen = 0;
  FILE *rf = open_memstream(&rows, &rlen);
  if (rf == NULL) return console_error(req, 500, "out of memory");
  load_handlers(c, rf);
  fclose(rf);
  FILE *f = console_json_begin(&buf, &len);
  if (f == NULL) {
    free(rows);
    return console_error(req, 500, "out of memory");
  }
  fputs("{\"dir\":", f);
  cj_str(f, c->cfg.dir);
  fprintf(f, ",\"handlers\":[%s],\"problems\":", rows ? rows : "");
  free(rows);
  problems_json(f, c->problems);
  fputs(",\"running\":", f);
  if (c->cfg.host.each_running) {
    struct running_row r = {f, 0};
    fputc('[', f);
    c->cfg.host.each_running(c->cfg.host.data, running_one, &r);
    fputc(']', f);
  } else {
    fputs("null", f);
  }
  fputc('}', f);
  console_json_end(req, f, &buf, &len);
}

/* POST /api/reload: reloads every handler file where they run. */
static void reload(struct console *c, struct console_request *req) {
  if (c->cfg.host.reload == NULL)
    return console_error(req, 404,
                         "no handlers run in this process: reload where they run "
                         "(luastream run --console, or SIGHUP)");
  log_line(LOG_INFO, NULL, "console action: reloading every handler", "who", console_who(req),
           "action", "reload", NULL);
  c->cfg.host.reload(c->cfg.host.data);
  load_handlers(c, NULL);
  console_json(req, 200, "{\"reloaded\":true}", 17);
}

/* ---- sessions ---- */

/* The value of cookie name in a Cookie header, and its length. */
static const char *cookie_value(const char *header, const char *name, size_t *len) {
  size_t nlen = strlen(name);
  for (const char *p = header; p && *p;) {
    p += strspn(p, " ;");
    size_t plen = strcspn(p, ";");
    if (plen > nlen && p[nlen] == '=' && !strncmp(p, name, nlen)) {
      *len = plen - nlen - 1;
      return p + nlen + 1;
    }
    p += plen;
  }
  return NULL;
}

/* Whether req's Host names this console: its address as given or bound, an
 * IP literal or localhost with its port (a DNS name that is neither would
 * be a rebinding), or the host of --console-origin. */
static bool host_allowed(const struct console *c, const char *name_port) {
  if (name_port == NULL || name_port[0] == '\0') return false;
  if (!strcasecmp(name_port, console_http_addr(c->http))) return true;
  if (c->cfg.origin) {
    const char *o = strstr(c->cfg.origin, "://");
    if (o && !strcasecmp(name_port, o + 3)) return true;
  }
  const char *colon = strrchr(name_port, ':');
  if (colon == NULL || colon[1] == '\0' || strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
      atoi(colon + 1) != console_http_port(c->http))
    return false;
  char name[300];
  snprintf(name, sizeof name, "%.*s", (int)(colon - name_port), name_port);
  if (!strcasecmp(name, "localhost")) return true;
  struct sockaddr_in6 a6;
  struct sockaddr_in a4;
  size_t n = strlen(name);
  if (n > 2 && name[0] == '[' && name[n - 1] == ']') {
    name[n - 1] = '\0';
    return uv_ip6_addr(name + 1, 0, &a6) == 0;
  }
  return uv_ip4_addr(name, 0, &a4) == 0;
}

/* Whether req comes from this console's own pages: its Origin is
 * http://HOST or --console-origin. Under the pages' Referrer-Policy
 * no-referrer, a browser sends "Origin: null" with their POSTs; it then
 * says where the request comes from in Sec-Fetch-Site, which no page can
 * set: same-origin passes. */
static bool origin_allowed(const struct console *c, const struct console_request *req) {
  const char *o = req->origin;
  if (o == NULL || !strcmp(o, "null"))
    return o != NULL && req->fetch_site && !strcmp(req->fetch_site, "same-origin");
  if (c->cfg.origin && !strcasecmp(o, c->cfg.origin)) return true;
  return !strncasecmp(o, "http://", 7) && !strcasecmp(o + 7, req->host);
}

static void redirect(struct console_request *req, const char *to, const char *cookie) {
  char headers[512];
  snprintf(headers, sizeof headers, "Location: %s\r\n%s", to, cookie ? cookie : "");
  console_http_respond(req, 303, "text/plain; charset=utf-8", headers, "", 0);
}

/* The login page; after a refused login, with "wrong token" as the text of
 * its #login-error element (whatever that element's other attributes). */
static void login_page(struct console_request *req, bool failed) {
  const char *id = failed ? strstr(LOGIN_HTML, "id=\"login-error\"") : NULL;
  const char *at = id ? strchr(id, '>') : NULL;
  if (at == NULL)
    return console_http_respond(req, failed ? 401 : 200, "text/html; charset=utf-8", NULL,
                                LOGIN_HTML, sizeof LOGIN_HTML - 1);
  at++;
  char *page = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&page, &len);
  if (f == NULL) return console_error(req, 500, "out of memory");
  fprintf(f, "%.*swrong token%s", (int)(at - LOGIN_HTML), LOGIN_HTML, at);
  fclose(f);
  console_http_respond(req, 401, "text/html; charset=utf-8", NULL, page, len);
  free(page);
}

static void login(struct console *c, struct console_request *req) {
  if (!origin_allowed(c, req)) return console_error(req, 403, "the login came from another origin");
  char *token = cj_param(req->body ? req->body : "", "token");
  const char *name = token ? console_auth_check(c->auth, token, strlen(token)) : NULL;
  if (token) {
    memset(token, 0, strlen(token));
    free(token);
  }
  if (name == NULL) {
    log_line(LOG_WARN, NULL, "console login refused: wrong token", "origin", req->origin, NULL);
    return redirect(req, "/login?failed=1", NULL);
  }
  const struct console_session *s = console_session_open(c->auth, name, clock_wall(c->clock));
  if (s == NULL) return console_error(req, 500, "no randomness for a session");
  log_line(LOG_INFO, NULL, "console login", "who", name, NULL);
  char cookie[256];
  /* behind an HTTPS proxy, the browser sends it over TLS only */
  bool https = c->cfg.origin && !strncasecmp(c->cfg.origin, "https://", 8);
  snprintf(cookie, sizeof cookie,
           "Set-Cookie: " COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict%s\r\n", s->id,
           https ? "; Secure" : "");
  redirect(req, "/", cookie);
}

/* Who req comes from: a bearer token's name or the session's; NULL when
 * neither. *csrf: the session's CSRF token (NULL for a bearer). */
static const char *authenticate(struct console *c, struct console_request *req, const char **csrf) {
  *csrf = NULL;
  const char *auth = req->authorization;
  if (auth && !strncasecmp(auth, "Bearer ", 7)) {
    const char *t = auth + 7;
    const char *name = console_auth_check(c->auth, t, strlen(t));
    if (name == NULL)
      log_line(LOG_WARN, NULL, "console request refused: wrong bearer token", "path", req->path,
               NULL);
    return name;
  }
  size_t len = 0;
  const char *id = cookie_value(req->cookie, COOKIE, &len);
  const struct console_session *s =
      id ? console_session_find(c->auth, id, len, clock_wall(c->clock)) : NULL;
  if (s == NULL) return NULL;
  *csrf = s->csrf;
  return s->name;
}

static void session_json(struct console *c, struct console_request *req, const char *csrf) {
  char *buf;
  size_t len;
  FILE *f = console_json_begin(&buf, &len);
  if (f == NULL) return console_error(req, 500, "out of memory");
  fputs("{\"name\":", f);
  cj_str(f, console_who(req));
  fputs(",\"csrf\":", f);
  cj_str(f, csrf);
  fprintf(f, ",\"reload\":%s,\"metrics\":%s,\"interval_ms\":%llu,\"mode\":",
          c->cfg.host.reload ? "true" : "false", c->cfg.host.metrics ? "true" : "false",
          (unsigned long long)(c->cfg.interval_ms ? c->cfg.interval_ms : CONSOLE_INTERVAL_MS));
  cj_str(f, c->cfg.mode);
  fputs(",\"dir\":", f);
  cj_str(f, c->cfg.dir);
  fputs(",\"server\":", f);
  cj_str(f, c->b->name);
  fputc('}', f);
  console_json_end(req, f, &buf, &len);
}

static void metrics(struct console *c, struct console_request *req) {
  if (c->cfg.host.metrics == NULL) return console_error(req, 404, "no handlers run here");
  size_t len = 0;
  char *page = c->cfg.host.metrics(c->cfg.host.data, &len);
  if (page == NULL) return console_error(req, 500, "out of memory");
  console_http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, page, len);
  free(page);
}

/* ---- routing ---- */

static bool is(const struct console_request *req, bool post, const char *path) {
  return req->post == post && !strcmp(req->path, path);
}

static void route(void *data, struct console_request *req) {
  struct console *c = data;
  if (c->closing) return console_error(req, 503, "the console is closing");
  if (!host_allowed(c, req->host))
    return console_error(req, 421,
                         "the Host header does not name this console (%s): use its address",
                         console_http_addr(c->http));
  if (is(req, false, "/assets/console.js"))
    return console_http_respond(req, 200, "text/javascript; charset=utf-8", NULL, CONSOLE_JS,
                                sizeof CONSOLE_JS - 1);
  if (is(req, false, "/assets/console.css"))
    return console_http_respond(req, 200, "text/css; charset=utf-8", NULL, CONSOLE_CSS,
                                sizeof CONSOLE_CSS - 1);
  if (is(req, false, "/login")) {
    char *failed = cj_param(req->query, "failed");
    login_page(req, failed != NULL);
    free(failed);
    return;
  }
  if (is(req, true, "/login")) return login(c, req);
  const char *csrf;
  const char *who = authenticate(c, req, &csrf);
  bool api = !strncmp(req->path, "/api/", 5);
  if (who == NULL) {
    if (!api && !req->post) return redirect(req, "/login", NULL);
    return console_error(req, 401, "log in, or send Authorization: Bearer TOKEN");
  }
  snprintf(req->who, sizeof req->who, "%s", who);
  handlers_current(c);
  if (req->post) {
    /* a page's POST carries its session's CSRF token and comes from this
     * console's origin; a script's bearer token is no ambient credential */
    if (req->origin && !origin_allowed(c, req))
      return console_error(req, 403, "the request came from another origin (%s)", req->origin);
    if (csrf) {
      if (!origin_allowed(c, req))
        return console_error(req, 403, "the request has no Origin of this console's");
      if (req->csrf == NULL || strlen(req->csrf) != CONSOLE_SESSION_HEX ||
          !console_equal(req->csrf, csrf, CONSOLE_SESSION_HEX))
        return console_error(req, 403, "the CSRF token is missing or wrong: reload the page");
    }
  }
  if (is(req, true, "/logout")) {
    size_t len = 0;
    const char *id = cookie_value(req->cookie, COOKIE, &len);
    if (id) console_session_close(c->auth, id, len, clock_wall(c->clock));
    log_line(LOG_INFO, NULL, "console logout", "who", console_who(req), NULL);
    return redirect(req, "/login",
                    "Set-Cookie: " COOKIE "=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict\r\n");
  }
  if (is(req, false, "/api/session")) return session_json(c, req, csrf);
  if (is(req, false, "/api/overview")) return overview(c, req);
  if (is(req, false, "/api/metrics")) return metrics(c, req);
  if (is(req, false, "/api/handlers")) return handlers_page(c, req);
  if (is(req, false, "/api/pending")) return console_pending(c, req);
  if (is(req, false, "/api/entry")) return console_entry(c, req);
  if (is(req, false, "/api/dead-letters")) return console_dead_letters(c, req);
  if (is(req, true, "/api/dead-letters/preview")) return console_dl_preview(c, req);
  if (is(req, true, "/api/dead-letters/replay")) return console_dl_replay(c, req);
  if (is(req, true, "/api/dead-letters/delete")) return console_dl_delete(c, req);
  if (is(req, true, "/api/reload")) return reload(c, req);
  if (is(req, true, "/api/pause")) return console_pause(c, req);
  if (is(req, true, "/api/resume")) return console_resume(c, req);
  if (api)
    return console_error(req, 404, "no such API: %s %s", req->post ? "POST" : "GET", req->path);
  if (req->post) return console_error(req, 405, "no such action");
  console_http_respond(req, 200, "text/html; charset=utf-8", NULL, INDEX_HTML,
                       sizeof INDEX_HTML - 1);
}

/* ---- life ---- */

/* An Origin as browsers send it: http:// or https://, a host, maybe a port,
 * nothing after. */
static bool origin_valid(const char *o) {
  const char *h = !strncasecmp(o, "https://", 8)  ? o + 8
                  : !strncasecmp(o, "http://", 7) ? o + 7
                                                  : NULL;
  if (h == NULL || *h == '\0') return false;
  for (const char *p = h; *p; p++)
    if (*p == '/' || *p == '?' || *p == '#' || *p == '@' || (unsigned char)*p <= ' ') return false;
  return true;
}

console *console_start(uv_loop_t *loop, const struct console_config *cfg, char *err,
                       size_t errlen) {
  struct console *c = calloc(1, sizeof *c);
  if (c == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  c->loop = loop;
  c->cfg = *cfg;
  c->waits_tail = &c->waits;
  c->ended = redis_ended;
  c->q = (struct status_query){.done = refresh_done, .data = c};
  if (cfg->origin && !origin_valid(cfg->origin)) {
    snprintf(err, errlen,
             "--console-origin %s: want SCHEME://HOST[:PORT] as a browser's Origin header says "
             "it, e.g. https://streams.example.com (no path, no trailing slash)",
             cfg->origin);
    goto fail;
  }
  if ((c->auth = console_auth_load(cfg->tokens_path, err, errlen)) == NULL) goto fail;
  if ((c->clock = clock_uv_new(loop)) == NULL ||
      (c->retry = timer_new(c->clock, refresh_again, c)) == NULL ||
      (c->b = broker_cluster_new(loop, cfg->url)) == NULL) {
    snprintf(err, errlen, "out of memory");
    goto fail;
  }
  if (cfg->dir) {
    c->q.dir_mode = true;
    handlers_current(c);
  } else {
    c->q.names = cfg->streams;
    c->q.nnames = cfg->nstreams;
  }
  if ((c->http = console_http_start(loop, cfg->addr, route, c, err, errlen)) == NULL) goto fail;
  char port[16];
  snprintf(port, sizeof port, "%d", console_http_port(c->http));
  log_line(LOG_INFO, NULL, "console listening", "addr", console_http_addr(c->http), "port", port,
           "tokens", cfg->tokens_path, NULL);
  const char *addr = console_http_addr(c->http);
  if (!strncmp(addr, "0.0.0.0:", 8) || !strncmp(addr, "[::]:", 5))
    log_line(LOG_WARN, NULL,
             "the console listens on every address of this machine: bind it to a loopback or the "
             "pod's address, behind your auth proxy (docs/operations.md, \"The web console\")",
             "addr", addr, NULL);
  return c;
fail:
  c->closing = true;
  console_close(c);
  return NULL;
}

int console_port(const console *c) { return console_http_port(c->http); }

void console_reload_tokens(console *c) {
  if (c == NULL) return;
  char err[512], n[16];
  if (console_auth_reload(c->auth, c->cfg.tokens_path, err, sizeof err) != 0) {
    log_line(LOG_WARN, NULL, "console tokens not reloaded: the ones read before stay", "error", err,
             NULL);
    return;
  }
  snprintf(n, sizeof n, "%zu", console_auth_count(c->auth));
  log_line(LOG_INFO, NULL, "console tokens reloaded", "tokens", c->cfg.tokens_path,
           LOG_NUMBER "count", n, NULL);
}

void console_close(console *c) {
  if (c == NULL) return;
  c->closing = true;
  console_http_close(c->http); /* requests in flight now answer into the void */
  c->http = NULL;
  if (c->attached) client_done(&c->client, 0); /* replies fail; client_ended runs */
  client_detach(&c->client);
  fail_waiting(c, "the console is closing");
  free(c->waiting);
  if (c->b) broker_free(c->b);
  if (c->retry) timer_free(c->retry);
  if (c->clock) c->clock->ops->free(c->clock);
  status_query_free(&c->q);
  pairs_clear(c);
  free(c->pairs);
  free(c->problems);
  free(c->overview);
  console_auth_free(c->auth);
  free(c);
}
