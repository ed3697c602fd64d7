/* fuzz_read_reply: the XREADGROUP and claim-script reply parsers
 * (read_reply.c) on any reply tree, written one node per line (below): they
 * build a well-formed list or refuse with nothing built and nothing leaked. */
#include "fuzz.h"
#include "read_reply.h"

/* One node per line, children after their array:
 *   *N  an array of N elements      #N  N elements but no element vector
 *   $s  the string s (to the line's end)   :N  an integer
 *   +s  a status   -s  an error   _  nil   !  a missing (NULL) element
 *   ~   an empty string with a NULL str (allowed by is_string)
 *   anything else: a reply of an unknown type.
 * Elements past the input's end are missing. */
struct cursor {
  const char *p, *end;
  int nodes;
};

#define MAX_ELEMENTS 256
#define MAX_NODES 4096
#define MAX_DEPTH 12

static bk_reply *node(struct cursor *c, int depth) {
  if (c->p >= c->end || c->nodes >= MAX_NODES) return NULL;
  const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
  const char *line = c->p, *eol = nl ? nl : c->end;
  c->p = nl ? nl + 1 : c->end;
  char kind = line < eol ? line[0] : '?';
  if (kind == '!') return NULL;
  c->nodes++;
  bk_reply *r = calloc(1, sizeof *r);
  if (r == NULL) abort();
  char text[32] = "";
  size_t n = line < eol ? (size_t)(eol - line - 1) : 0;
  memcpy(text, line + 1, n < sizeof text ? n : sizeof text - 1);
  switch (kind) {
    case '*':
    case '#':
      r->type = BK_ARRAY;
      r->elements = (size_t)strtoul(text, NULL, 10) % (MAX_ELEMENTS + 1);
      if (kind == '*' && r->elements) {
        if ((r->element = calloc(r->elements, sizeof *r->element)) == NULL) abort();
        for (size_t i = 0; i < r->elements; i++)
          r->element[i] = depth < MAX_DEPTH ? node(c, depth + 1) : NULL;
      }
      break;
    case '$':
    case '+':
    case '-':
      r->type = kind == '$' ? BK_STRING : kind == '+' ? BK_STATUS : BK_ERROR;
      r->len = n;
      r->str = fuzz_strdup((const uint8_t *)line + 1, n); /* terminated, as hiredis' are */
      break;
    case ':':
      r->type = BK_INTEGER;
      r->integer = strtoll(text, NULL, 10);
      break;
    case '~': r->type = BK_STRING; break;
    case '_': r->type = BK_NIL; break;
    default: r->type = 99; break;
  }
  return r;
}

static void tree_free(bk_reply *r) {
  if (r == NULL) return;
  if (r->element)
    for (size_t i = 0; i < r->elements; i++) tree_free(r->element[i]);
  free(r->element);
  free(r->str);
  free(r);
}

/* The invariants of a parse that returned rc. */
static void check(int rc, struct entry *list, size_t count, size_t nkeys, const char *err) {
  size_t n = 0;
  for (struct entry *e = list, *next; e; e = next, n++) {
    next = e->next;
    FUZZ_CHECK(e->id && e->nfields % 2 == 0 && e->key < (nkeys ? nkeys : 1), "entry %zu", n);
    for (size_t i = 0; i < e->nfields; i++)
      FUZZ_CHECK(e->field[i][e->field_len[i]] == '\0', "field");
    entry_free(e);
  }
  if (rc == 0)
    FUZZ_CHECK(n == count, "%zu entries listed, %zu counted", n, count);
  else
    FUZZ_CHECK(rc == -1 && n == 0 && count == 0 && err[0], "rc %d, %zu entries", rc, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *copy = fuzz_copy(data, size);
  struct cursor c = {copy, copy + size, 0};
  bk_reply *r = node(&c, 0);
  static const char *const keys[] = {"orders", "orders:retry"};
  struct entry *list;
  size_t count, deleted;
  char err[256];
  int rc;

  err[0] = '\0';
  rc = read_reply_parse_read(r, &list, &count, &deleted, err, sizeof err);
  check(rc, list, count, 1, err);
  err[0] = '\0';
  rc = read_reply_parse_streams(r, keys, 2, 64, &list, &count, &deleted, err, sizeof err);
  check(rc, list, count, 2, err);
  char cursor[2 * 24];
  const bk_reply *dropped = NULL;
  err[0] = '\0';
  rc = read_reply_parse_claimed(r, keys, 2, 64, cursor, 24, &list, &count, &dropped, err,
                                sizeof err);
  check(rc, list, count, 2, err);
  if (rc == 0 && dropped) /* each an array of two strings, as promised */
    for (size_t i = 0; i < dropped->elements; i++) {
      const bk_reply *d = dropped->element[i];
      FUZZ_CHECK(d && d->type == BK_ARRAY && d->elements == 2 && d->element[0]->type == BK_STRING &&
                     d->element[1]->type == BK_STRING,
                 "dropped pair %zu", i);
    }
  if (rc == 0)
    for (size_t i = 0; i < 2; i++) FUZZ_CHECK(memchr(cursor + i * 24, '\0', 24), "cursor %zu", i);
  entry_pool_trim();
  tree_free(r);
  free(copy);
  return 0;
}
