/* dead_letters_entry: the entries of a dead-letter stream
 * (dead_letters_entry.h). */
#include "dead_letters_entry.h"

#include <stdio.h>
#include <string.h>

#include "wire.h"

bool dl_has_provenance(const bk_reply *fields) {
  return client_field(fields, HDR_DL_STREAM) != NULL;
}

bool dl_is_range(const bk_reply *r) {
  if (r == NULL || r->type != BK_ARRAY) return false;
  for (size_t i = 0; i < r->elements; i++) {
    const bk_reply *e = r->element[i];
    if (e->type != BK_ARRAY || e->elements != 2 || e->element[0]->type != BK_STRING ||
        e->element[1]->type != BK_ARRAY)
      return false;
    for (size_t j = 0; j < e->element[1]->elements; j++)
      if (e->element[1]->element[j]->type != BK_STRING) return false;
  }
  return true;
}

int dl_send_type(struct client *c, const char *stream, bk_reply_cb *cb) {
  struct bk_args a;
  bk_args_init(&a);
  bk_args_str(&a, "TYPE");
  bk_args_str(&a, stream);
  int rc = client_send(c, &a, cb);
  bk_args_free(&a);
  return rc;
}

enum dl_stream dl_stream_type(struct client *c, const char *stream, const bk_reply *r,
                              const char *err) {
  const char *why = client_error(r, err);
  if (why == NULL && (r->type == BK_STATUS || r->type == BK_STRING)) {
    if (r->len == 6 && !memcmp(r->str, "stream", 6)) return DL_STREAM;
    if (r->len == 4 && !memcmp(r->str, "none", 4)) return DL_MISSING;
    fprintf(stderr, "luastream: %s on %s is a %.*s, not a stream\n", stream, c->b->name,
            (int)r->len, r->str);
  } else {
    fprintf(stderr, "luastream: cannot read %s on %s: TYPE %s: %s\n", stream, c->b->name, stream,
            why ? why : "unexpected reply to TYPE");
  }
  client_done(c, 1);
  return DL_FAILED;
}

void dl_put_text(const char *s, size_t n, int indent) {
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r')) n--;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '\n')
      printf("\n%*s", indent, "");
    else if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
      printf("\\x%02x", ch);
    else
      putchar(ch);
  }
}
