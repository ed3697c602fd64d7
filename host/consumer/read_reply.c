/* read_reply: XREADGROUP and claim-script replies turned into entries. No
 * I/O: tested on literal replies.
 *
 * The parser is strict on purpose: a reply of an unexpected shape means the
 * server and the host disagree about the protocol, and guessing would risk
 * acking or running the wrong thing. It names the first thing that is wrong
 * and builds nothing. */
#include "read_reply.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parsing XREADGROUP replies ---- */

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

static const char *type_name(const bk_reply *r) {
  if (!r) return "missing";
  switch (r->type) {
    case BK_STRING: return "a string";
    case BK_ARRAY:
      return r->elements && !r->element ? "an array with no element vector" : "an array";
    case BK_INTEGER: return "an integer";
    case BK_NIL: return "nil";
    case BK_STATUS: return "a status";
    case BK_ERROR: return "an error";
    default: return "of an unknown type";
  }
}

/* An array reply whose element vector can be indexed safely. */
static bool is_array(const bk_reply *r) {
  return r && r->type == BK_ARRAY && (r->elements == 0 || r->element);
}

static bool is_string(const bk_reply *r) {
  return r && r->type == BK_STRING && (r->len == 0 || r->str);
}

/* A stream id as Redis writes it: "<ms>-<seq>", both decimal. Checked because
 * the id goes back to the server verbatim in XACK and as a C string. */
static bool valid_id(const char *s, size_t len) {
  size_t i = 0, ms = 0, seq = 0;
  for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) ms++;
  if (ms == 0 || i == len || s[i] != '-') return false;
  i++;
  for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) seq++;
  return seq > 0 && i == len;
}

/* Parses a signed decimal with no spaces or '+', as Redis prints integers. */
static bool parse_i64(const char *s, size_t len, int64_t *out) {
  size_t i = 0;
  bool neg = false;
  if (len > 0 && s[0] == '-') {
    neg = true;
    i = 1;
  }
  if (i == len) return false;
  uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  for (; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    unsigned d = (unsigned)(s[i] - '0');
    if (v > (limit - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
  return true;
}

/* The 3rd/4th element of a CLAIM entry: a RESP integer (8.4 GA) or a bulk
 * string holding one (8.4 release candidates). */
static bool claim_number(const bk_reply *r, int64_t *out) {
  if (r && r->type == BK_INTEGER) {
    *out = r->integer;
    return true;
  }
  return is_string(r) && parse_i64(r->str, r->len, out);
}

/* Limits how much of an id or value a message quotes: ids are short, but a
 * malformed reply could hold anything. */
#define QUOTE_MAX 64
#define QUOTE_LEN(len) ((len) > QUOTE_MAX ? QUOTE_MAX : (int)(len))
/* printf's %.*s needs a valid pointer even for zero characters. */
#define QUOTE_STR(r) ((r)->str ? (r)->str : "")

static void claim_number_err(char *err, size_t errlen, size_t index, const bk_reply *id,
                             const char *what, const bk_reply *r) {
  if (is_string(r))
    set_err(err, errlen, "entry %zu (%.*s): %s \"%.*s\" is not an integer in range", index,
            QUOTE_LEN(id->len), id->str, what, QUOTE_LEN(r->len), QUOTE_STR(r));
  else
    set_err(err, errlen, "entry %zu (%.*s): %s is %s, expected an integer", index,
            QUOTE_LEN(id->len), id->str, what, type_name(r));
}

static bool is_data(const bk_reply *name) {
  return name->len == sizeof HDR_DATA - 1 && memcmp(name->str, HDR_DATA, name->len) == 0;
}

/* How much of string f an entry keeps: all of it, or ENTRY_CUT_KEEP bytes
 * of a cut entry's. */
static size_t kept(const bk_reply *f, bool cut) {
  return cut && f->len > ENTRY_CUT_KEEP ? ENTRY_CUT_KEEP : f->len;
}

/* The third element of a script's cut entry ([id, fields, cut] or [id,
 * fields, idle, deliveries, cut]): [body bytes, entry bytes], both >= 0. */
static bool cut_sizes(const bk_reply *r, int64_t *body, int64_t *size) {
  return is_array(r) && r->elements == 2 && claim_number(r->element[0], body) &&
         claim_number(r->element[1], size) && *body >= 0 && *size >= 0;
}

/* Parses one `[id, fields]` or `[id, fields, idle, deliveries]` element, or
 * either with the sizes of an entry a script cut after them. An entry over
 * the limits of max_body (entry_over) is built cut, as the script cuts it.
 * On success *out is the new entry, or NULL when the entry is deleted (nil
 * fields). Returns -1 with err set otherwise. */
static int parse_entry(const bk_reply *r, size_t index, uint64_t max_body, struct entry **out,
                       char *err, size_t errlen) {
  *out = NULL;
  if (!is_array(r)) {
    set_err(err, errlen, "entry %zu: is %s, expected an array", index, type_name(r));
    return -1;
  }
  if (r->elements < 2 || r->elements > 5) {
    set_err(
        err, errlen,
        "entry %zu: has %zu elements, expected 2 or 4 (with CLAIM), or 3 or 5 (cut by a script)",
        index, r->elements);
    return -1;
  }
  const bk_reply *id = r->element[0], *fields = r->element[1];
  if (!is_string(id)) {
    set_err(err, errlen, "entry %zu: id is %s, expected a string", index, type_name(id));
    return -1;
  }
  int idq = QUOTE_LEN(id->len);
  if (!valid_id(id->str, id->len)) {
    set_err(err, errlen, "entry %zu: id \"%.*s\" is not a stream id", index, idq, id->str);
    return -1;
  }

  int64_t idle = -1, deliveries = -1;
  if (r->elements >= 4) {
    const bk_reply *ri = r->element[2], *rd = r->element[3];
    if (!claim_number(ri, &idle)) {
      claim_number_err(err, errlen, index, id, "idle time", ri);
      return -1;
    }
    if (!claim_number(rd, &deliveries)) {
      claim_number_err(err, errlen, index, id, "delivery count", rd);
      return -1;
    }
    /* The server computes idle as now minus the last delivery time, which a
     * clock step backwards can make negative. The entry is still valid and
     * already claimed for us, so rejecting the batch would strand it; 0 says
     * "just delivered" and keeps -1 meaning "not read with CLAIM". */
    if (idle < 0) idle = 0;
    if (deliveries < 0) {
      set_err(err, errlen, "entry %zu (%.*s): delivery count %" PRId64 " is negative", index, idq,
              id->str, deliveries);
      return -1;
    }
  }
  int64_t cut_body = 0, cut_size = 0;
  bool cut = r->elements == 3 || r->elements == 5;
  if (cut && !cut_sizes(r->element[r->elements - 1], &cut_body, &cut_size)) {
    set_err(err, errlen,
            "entry %zu (%.*s): the sizes of a cut entry are %s, expected [body, entry]", index, idq,
            id->str, type_name(r->element[r->elements - 1]));
    return -1;
  }

  if (fields && fields->type == BK_NIL) return 0; /* deleted from the stream, still pending */
  if (!is_array(fields)) {
    set_err(err, errlen, "entry %zu (%.*s): field list is %s, expected an array or nil", index, idq,
            id->str, type_name(fields));
    return -1;
  }
  if (fields->elements % 2 != 0) {
    set_err(err, errlen, "entry %zu (%.*s): field list has an odd number of items (%zu)", index,
            idq, id->str, fields->elements);
    return -1;
  }
  uint64_t body = 0, size = 0;
  for (size_t i = 0; i < fields->elements; i++) {
    const bk_reply *f = fields->element[i];
    if (!is_string(f)) {
      set_err(err, errlen, "entry %zu (%.*s): %s %zu is %s, expected a string", index, idq, id->str,
              i % 2 ? "value" : "field name", i / 2, type_name(f));
      return -1;
    }
    size += f->len;
    if (i % 2 && f->len > body && is_data(fields->element[i - 1])) body = f->len;
  }
  size += (uint64_t)(fields->elements / 2) * ENTRY_PAIR_COST;
  if (!cut && entry_over(max_body, body, size)) { /* cut here as the script would */
    cut = true;
    cut_body = (int64_t)body;
    cut_size = (int64_t)size;
  }
  size_t n = fields->elements;
  if (cut && n > 2 * ENTRY_CUT_PAIRS) n = 2 * ENTRY_CUT_PAIRS;
  size_t bytes = id->len;
  if (!entry_size_add(&bytes, 1)) goto oom;
  for (size_t i = 0; i < n; i++)
    if (!entry_size_add(&bytes, kept(fields->element[i], cut)) || !entry_size_add(&bytes, 1))
      goto oom;

  struct entry *e = entry_alloc(n, bytes);
  if (!e) goto oom;
  char *cursor = entry_strings(e);
  e->id = entry_put(&cursor, id->str, id->len);
  for (size_t i = 0; i < n; i++) {
    const bk_reply *f = fields->element[i];
    size_t len = kept(f, cut);
    e->field[i] = entry_put(&cursor, f->str, len);
    e->field_len[i] = len;
  }
  e->idle_ms = idle;
  e->deliveries = deliveries;
  if (cut) {
    e->body_size = (uint64_t)cut_body;
    e->entry_size = cut_size > 0 ? (uint64_t)cut_size : 1;
  }
  *out = e;
  return 0;

oom:
  set_err(err, errlen, "out of memory");
  return -1;
}

static void free_list(struct entry *e) {
  while (e) {
    struct entry *next = e->next;
    entry_free(e);
    e = next;
  }
}

/* Appends the entries of one [key, entries] pair to the list (tagged key). */
static int parse_stream(const bk_reply *stream, unsigned char key, uint64_t max_body,
                        struct entry **head, struct entry **tail, size_t *n, size_t *ndeleted,
                        char *err, size_t errlen) {
  const bk_reply *entries = stream->element[1];
  if (!is_array(entries)) {
    set_err(err, errlen, "entry list is %s, expected an array", type_name(entries));
    return -1;
  }
  /* An empty entry list is the 7.0 quirk `[[key, []]]` of a blocked read woken
   * by entries deleted before it was served, or an empty history read: both
   * mean "nothing to do" and fall through the loop. */
  for (size_t i = 0; i < entries->elements; i++) {
    struct entry *e;
    if (parse_entry(entries->element[i], i, max_body, &e, err, errlen) < 0) return -1;
    if (!e) {
      (*ndeleted)++;
      continue;
    }
    e->key = key;
    if (*tail)
      (*tail)->next = e;
    else
      *head = e;
    *tail = e;
    (*n)++;
  }
  return 0;
}

/* keys NULL: exactly one stream, whatever its key (read_reply_parse_read). */
static int parse_streams(const bk_reply *r, const char *const *keys, size_t nkeys,
                         uint64_t max_body, struct entry **out, size_t *count, size_t *deleted,
                         char *err, size_t errlen) {
  struct entry *head = NULL, *tail = NULL;
  size_t n = 0, ndeleted = 0;
  *out = NULL;
  if (count) *count = 0;
  if (deleted) *deleted = 0;

  /* Nil: nothing was served (no new entries, or a BLOCK timed out). */
  if (r && r->type == BK_NIL) return 0;
  if (r && r->type == BK_ERROR) {
    set_err(err, errlen, "server replied with an error: %.*s", r->len > 200 ? 200 : (int)r->len,
            QUOTE_STR(r));
    return -1;
  }
  if (!is_array(r)) {
    set_err(err, errlen, "reply is %s, expected an array or nil", type_name(r));
    return -1;
  }
  if (r->elements == 0) return 0;
  size_t most = keys ? nkeys : 1;
  if (r->elements > most) {
    set_err(err, errlen, "reply has %zu streams, expected at most %zu", r->elements, most);
    return -1;
  }
  unsigned seen = 0; /* keys served so far, one bit each */
  for (size_t s = 0; s < r->elements; s++) {
    const bk_reply *stream = r->element[s];
    if (!is_array(stream) || stream->elements != 2) {
      if (is_array(stream))
        set_err(err, errlen, "stream reply has %zu elements, expected 2 (key, entries)",
                stream->elements);
      else
        set_err(err, errlen, "stream reply is %s, expected an array of key and entries",
                type_name(stream));
      goto fail;
    }
    const bk_reply *name = stream->element[0];
    if (!is_string(name)) {
      set_err(err, errlen, "stream key is %s, expected a string", type_name(name));
      goto fail;
    }
    size_t k = 0;
    if (keys) {
      while (k < nkeys && (strlen(keys[k]) != name->len || memcmp(keys[k], name->str, name->len)))
        k++;
      if (k == nkeys || (seen & (1u << k))) {
        set_err(err, errlen, "stream \"%.*s\" %s", QUOTE_LEN(name->len), QUOTE_STR(name),
                k == nkeys ? "was not read" : "is in the reply twice");
        goto fail;
      }
      seen |= 1u << k;
    }
    if (parse_stream(stream, (unsigned char)k, max_body, &head, &tail, &n, &ndeleted, err,
                     errlen) != 0)
      goto fail;
  }
  *out = head;
  if (count) *count = n;
  if (deleted) *deleted = ndeleted;
  return 0;
fail:
  free_list(head);
  return -1;
}

int read_reply_parse_read(const bk_reply *r, struct entry **out, size_t *count, size_t *deleted,
                          char *err, size_t errlen) {
  return parse_streams(r, NULL, 0, UINT64_MAX, out, count, deleted, err, errlen);
}

int read_reply_parse_streams(const bk_reply *r, const char *const *keys, size_t nkeys,
                             uint64_t max_body, struct entry **out, size_t *count, size_t *deleted,
                             char *err, size_t errlen) {
  if (nkeys == 0 || nkeys > 8) {
    set_err(err, errlen, "between 1 and 8 keys can be read, not %zu", nkeys);
    *out = NULL;
    return -1;
  }
  return parse_streams(r, keys, nkeys, max_body, out, count, deleted, err, errlen);
}

int read_reply_parse_claimed(const bk_reply *r, const char *const *keys, size_t nkeys,
                             uint64_t max_body, char *cursor, size_t cursorlen, struct entry **out,
                             size_t *count, const bk_reply **deleted, char *err, size_t errlen) {
  *out = NULL;
  if (count) *count = 0;
  if (deleted) *deleted = NULL;
  if (r && r->type == BK_ERROR) {
    set_err(err, errlen, "server replied with an error: %.*s", r->len > 200 ? 200 : (int)r->len,
            QUOTE_STR(r));
    return -1;
  }
  if (!is_array(r) || r->elements != 3) {
    set_err(err, errlen, "claim reply is %s, expected [cursors, streams, deleted]",
            is_array(r) ? "an array of the wrong size" : type_name(r));
    return -1;
  }
  const bk_reply *c = r->element[0], *gone = r->element[2];
  if (!is_array(c) || c->elements != nkeys) {
    set_err(err, errlen, "claim reply cursors are %s, expected %zu ids", type_name(c), nkeys);
    return -1;
  }
  for (size_t i = 0; i < nkeys; i++) {
    if (!is_string(c->element[i]) || c->element[i]->len >= cursorlen) {
      set_err(err, errlen, "claim reply cursor %zu is %s, expected an id", i,
              type_name(c->element[i]));
      return -1;
    }
  }
  if (!is_array(gone)) {
    set_err(err, errlen, "claim reply deleted ids are %s, expected an array", type_name(gone));
    return -1;
  }
  for (size_t i = 0; i < gone->elements; i++) {
    const bk_reply *g = gone->element[i];
    if (!is_array(g) || g->elements != 2 || !is_string(g->element[0]) ||
        !is_string(g->element[1])) {
      set_err(err, errlen, "deleted id %zu is %s, expected [key, id]", i, type_name(g));
      return -1;
    }
  }
  if (read_reply_parse_streams(r->element[1], keys, nkeys, max_body, out, count, NULL, err,
                               errlen) != 0)
    return -1;
  for (size_t i = 0; i < nkeys; i++) {
    /* an empty string may come without bytes (str NULL): nothing to copy */
    if (c->element[i]->len) memcpy(cursor + i * cursorlen, c->element[i]->str, c->element[i]->len);
    cursor[i * cursorlen + c->element[i]->len] = '\0';
  }
  if (deleted) *deleted = gone;
  return 0;
}
