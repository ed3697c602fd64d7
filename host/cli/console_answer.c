/* console_answer: what every page of the web console shares
 * (console_internal.h): answering a request, who asked, and which keys and
 * ids the console takes. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_internal.h"
#include "console_json.h"

const char *console_who(const struct console_request *req) { return req->who; }

void console_json(struct console_request *req, int status, const char *body, size_t len) {
  console_http_respond(req, status, "application/json; charset=utf-8", NULL, body, len);
}

void console_error(struct console_request *req, int status, const char *fmt, ...) {
  char why[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  char *buf;
  size_t len;
  FILE *f = console_json_begin(&buf, &len);
  if (f == NULL) return console_json(req, 500, "{\"error\":\"out of memory\"}", 26);
  fputs("{\"error\":", f);
  cj_str(f, why);
  fputc('}', f);
  fclose(f);
  console_json(req, status, buf, len);
  free(buf);
}

FILE *console_json_begin(char **buf, size_t *len) {
  *buf = NULL;
  *len = 0;
  return open_memstream(buf, len);
}

void console_json_end(struct console_request *req, FILE *f, char **buf, size_t *len) {
  if (fclose(f) != 0) {
    free(*buf);
    return console_error(req, 500, "out of memory");
  }
  console_json(req, 200, *buf, *len);
  free(*buf);
}

/* ---- what the console takes ---- */

bool console_known_stream(const struct console *c, const char *s) {
  for (size_t i = 0; i < c->q.nspecs; i++)
    if (!strcmp(c->q.specs[i].stream, s)) return true;
  for (int i = 0; i < c->q.nnames; i++)
    if (!strcmp(c->q.names[i], s)) return true;
  return false;
}

bool console_known_dead_letter(const struct console *c, const char *s) {
  for (size_t i = 0; i < c->npairs; i++)
    if (!strcmp(c->pairs[i].dead_letter, s)) return true;
  return !c->q.dir_mode && console_known_stream(c, s);
}

bool console_valid_id(const char *id) {
  if (id == NULL || *id < '0' || *id > '9') return false;
  char *end;
  strtoull(id, &end, 10);
  if (*end != '-' || end[1] < '0' || end[1] > '9') return false;
  strtoull(end + 1, &end, 10);
  return *end == '\0' && strlen(id) < 48;
}
