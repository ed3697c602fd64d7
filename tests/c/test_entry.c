/* Tests for entry: building entries, field lookup, and parsing XREADGROUP
 * replies (new reads, CLAIM reads from 8.4 GA and from its release
 * candidates, nil and empty replies, deleted entries, malformed shapes).
 *
 * Replies are built by hand as bk_reply trees, the same structs a broker hands
 * over, so the parser is tested without a server. */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "entry.h"
#include "read_reply.h"
#include "fixtures.h"
#include "task.h"

/* ---- a tiny bk_reply builder ---- */

static bk_reply *node(int type) {
  bk_reply *r = calloc(1, sizeof *r);
  ASSERT_NOT_NULL(r);
  r->type = type;
  return r;
}

static bk_reply *strn(int type, const char *s, size_t len) {
  bk_reply *r = node(type);
  r->str = malloc(len + 1);
  ASSERT_NOT_NULL(r->str);
  memcpy(r->str, s, len);
  r->str[len] = '\0';
  r->len = len;
  return r;
}

static bk_reply *S(const char *s) { return strn(BK_STRING, s, strlen(s)); }
static bk_reply *B(const char *s, size_t len) { return strn(BK_STRING, s, len); }
static bk_reply *STATUS(const char *s) { return strn(BK_STATUS, s, strlen(s)); }
static bk_reply *ERR(const char *s) { return strn(BK_ERROR, s, strlen(s)); }
static bk_reply *NIL(void) { return node(BK_NIL); }

static bk_reply *I(long long v) {
  bk_reply *r = node(BK_INTEGER);
  r->integer = v;
  return r;
}

/* An array of n replies (taken over). */
static bk_reply *A(size_t n, ...) {
  bk_reply *r = node(BK_ARRAY);
  r->elements = n;
  if (n) {
    r->element = calloc(n, sizeof *r->element);
    ASSERT_NOT_NULL(r->element);
  }
  va_list ap;
  va_start(ap, n);
  for (size_t i = 0; i < n; i++) r->element[i] = va_arg(ap, bk_reply *);
  va_end(ap);
  return r;
}

static void rfree(bk_reply *r) {
  if (!r) return;
  for (size_t i = 0; i < r->elements; i++) rfree(r->element[i]);
  free(r->element);
  free(r->str);
  free(r);
}

/* `[[s, entries]]`: a reply for the single stream "s". */
static bk_reply *READ(bk_reply *entries) { return A(1, A(2, S("s"), entries)); }

/* ---- helpers ---- */

static void free_all(struct entry *e) {
  while (e) {
    struct entry *next = e->next;
    entry_free(e);
    e = next;
  }
}

static void expect_field(const struct entry *e, const char *name, const char *value) {
  size_t len = 0;
  const char *v = entry_get(e, name, &len);
  if (!v) TEST_FAIL_("entry %s: no field \"%s\"", e->id, name);
  ASSERT_MEM_EQ(v, len, value);
  ASSERT_INT_EQ(v[len], '\0');
}

/* Parses r expecting success; frees r. */
static struct entry *parse_ok(bk_reply *r, size_t want_count, size_t want_deleted) {
  struct entry *out = (struct entry *)&out; /* junk: must be overwritten */
  size_t count = 99, deleted = 99;
  char err[256] = "";
  int rc = read_reply_parse_read(r, &out, &count, &deleted, err, sizeof err);
  rfree(r);
  if (rc != 0) TEST_FAIL_("parse failed: %s", err);
  ASSERT_STR_EQ(err, "");
  ASSERT_INT_EQ(count, want_count);
  ASSERT_INT_EQ(deleted, want_deleted);
  size_t n = 0;
  for (struct entry *e = out; e; e = e->next) n++;
  ASSERT_INT_EQ(n, want_count);
  return out;
}

/* Parses r expecting failure with exactly `reason`, nothing built; frees r. */
static void parse_fails(bk_reply *r, const char *reason) {
  struct entry *out = (struct entry *)&out;
  size_t count = 99, deleted = 99;
  char err[256] = "";
  int rc = read_reply_parse_read(r, &out, &count, &deleted, err, sizeof err);
  rfree(r);
  if (rc != -1) TEST_FAIL_("parse succeeded, expected: %s", reason);
  ASSERT_NULL(out);
  ASSERT_INT_EQ(count, 0);
  ASSERT_INT_EQ(deleted, 0);
  ASSERT_STR_EQ(err, reason);
  LEAK_CHECK(); /* whatever was built before the bad part is gone */
}

/* ---- entry_new / entry_get ---- */

TEST_IMPL(entry_new_copies_into_one_block) {
  char id[] = "1700000000000-3";
  char f0[] = "data", v0[] = "{\"a\":1}", f1[] = "partition-key", v1[] = "acme";
  const char *field[] = {f0, v0, f1, v1};
  size_t len[] = {4, 7, 13, 4};
  struct entry *e = entry_new(id, strlen(id), 4, field, len);
  ASSERT_NOT_NULL(e);
  /* The entry owns copies: changing the sources changes nothing. */
  memset(id, 'x', strlen(id));
  memset(v1, 'x', 4);
  ASSERT_STR_EQ(e->id, "1700000000000-3");
  ASSERT_INT_EQ(e->nfields, 4);
  expect_field(e, HDR_DATA, "{\"a\":1}");
  expect_field(e, HDR_PARTITION_KEY, "acme");
  ASSERT_INT_EQ(e->idle_ms, -1);
  ASSERT_INT_EQ(e->deliveries, -1);
  ASSERT_NULL(e->next);
  ASSERT_NULL(e->owner_data);
  /* Everything lives inside the block that starts at e. */
  const char *lo = (const char *)e, *hi = e->field[3] + e->field_len[3];
  ASSERT((const char *)e->field > lo && (const char *)e->field_len > lo);
  ASSERT(e->id > lo && e->id < hi);
  for (size_t i = 0; i < 4; i++) ASSERT(e->field[i] > lo && e->field[i] <= hi);
  entry_free(e);
  entry_free(NULL);
  LEAK_CHECK();
}

TEST_IMPL(entry_new_edge_cases) {
  /* No fields at all. */
  struct entry *e = entry_new("1-0", 3, 0, NULL, NULL);
  ASSERT_NOT_NULL(e);
  ASSERT_STR_EQ(e->id, "1-0");
  ASSERT_NULL(entry_get(e, "data", NULL));
  entry_free(e);
  /* Empty names and values are kept as such. */
  const char *field[] = {"", ""};
  size_t len[] = {0, 0};
  e = entry_new("1-1", 3, 2, field, len);
  ASSERT_NOT_NULL(e);
  expect_field(e, "", "");
  entry_free(e);
  /* Fields come in pairs. */
  ASSERT_NULL(entry_new("1-0", 3, 1, field, len));
  /* A size that cannot be allocated is refused before any copying. */
  size_t huge[] = {SIZE_MAX - 2, 1};
  ASSERT_NULL(entry_new("1-0", 3, 2, field, huge));
  ASSERT_NULL(entry_new("1-0", SIZE_MAX, 0, NULL, NULL));
  LEAK_CHECK();
}

TEST_IMPL(entry_get_last_duplicate_wins) {
  const char *field[] = {"a", "1", "b", "2", "a", "3", "ab", "4"};
  size_t len[] = {1, 1, 1, 1, 1, 1, 2, 1};
  struct entry *e = entry_new("5-0", 3, 8, field, len);
  ASSERT_NOT_NULL(e);
  expect_field(e, "a", "3");
  expect_field(e, "b", "2");
  expect_field(e, "ab", "4");
  ASSERT_NULL(entry_get(e, "c", NULL));
  ASSERT_NULL(entry_get(e, "", NULL));
  ASSERT_NULL(entry_get(e, "abc", NULL));
  /* Values are never taken for names. */
  ASSERT_NULL(entry_get(e, "1", NULL));
  ASSERT_STR_EQ(entry_get(e, "a", NULL), "3"); /* len is optional */
  entry_free(e);
}

TEST_IMPL(entry_binary_safe_values) {
  /* Embedded NULs in values and names survive, with their lengths. */
  const char *field[] = {"data", "x\0y\0", "k\0ey", "v"};
  size_t len[] = {4, 4, 4, 1};
  struct entry *e = entry_new("1-0", 3, 4, field, len);
  ASSERT_NOT_NULL(e);
  size_t n = 0;
  const char *v = entry_get(e, "data", &n);
  ASSERT_NOT_NULL(v);
  ASSERT_INT_EQ(n, 4);
  ASSERT(memcmp(v, "x\0y\0", 5) == 0); /* and the extra NUL terminator */
  ASSERT_INT_EQ(e->field_len[2], 4);
  ASSERT(memcmp(e->field[2], "k\0ey", 5) == 0);
  /* entry_get takes C-string names, so "k" does not match "k\0ey". */
  ASSERT_NULL(entry_get(e, "k", NULL));
  entry_free(e);

  /* The same through the parser. */
  e = parse_ok(READ(A(1, A(2, S("1-0"), A(2, S("data"), B("\0\xff\0", 3))))), 1, 0);
  v = entry_get(e, "data", &n);
  ASSERT_INT_EQ(n, 3);
  ASSERT(memcmp(v, "\0\xff\0", 4) == 0);
  free_all(e);
  LEAK_CHECK();
}

/* ---- read_reply_parse_read: well-formed replies ---- */

TEST_IMPL(entry_parse_new_read) {
  /* XREADGROUP GROUP g c COUNT 2 STREAMS s > */
  struct entry *list =
      parse_ok(READ(A(2, A(2, S("1-0"), A(2, S("a"), S("1"))),
                      A(2, S("2-0"), A(4, S("b"), S("2"), S(HDR_PARTITION_KEY), S("acme"))))),
               2, 0);
  struct entry *e = list;
  ASSERT_STR_EQ(e->id, "1-0");
  ASSERT_INT_EQ(e->nfields, 2);
  expect_field(e, "a", "1");
  ASSERT_INT_EQ(e->idle_ms, -1);
  ASSERT_INT_EQ(e->deliveries, -1);
  e = e->next;
  ASSERT_STR_EQ(e->id, "2-0");
  ASSERT_INT_EQ(e->nfields, 4);
  expect_field(e, "b", "2");
  expect_field(e, HDR_PARTITION_KEY, "acme");
  ASSERT_INT_EQ(e->idle_ms, -1);
  ASSERT_INT_EQ(e->deliveries, -1);
  ASSERT_NULL(e->next);
  free_all(list);
  LEAK_CHECK();
}

/* A string of n copies of c (built by a reply builder: freed with it). */
static bk_reply *REP(char c, size_t n) {
  char *s = malloc(n);
  ASSERT_NOT_NULL(s);
  memset(s, c, n);
  bk_reply *r = B(s, n);
  free(s);
  return r;
}

TEST_IMPL(entry_parse_cuts_entries_over_max_body) {
  /* max_body 1500: the body over it, or all fields over it plus 64 KB, is
   * kept cut (entry.h), as a script sends it cut; the rest whole. */
  bk_reply *many = node(BK_ARRAY);
  many->elements = 2 * 70;
  many->element = calloc(many->elements, sizeof *many->element);
  ASSERT_NOT_NULL(many->element);
  for (size_t i = 0; i < 2 * 70; i += 2) {
    many->element[i] = S("h");
    many->element[i + 1] = REP('v', 1000);
  }
  bk_reply *r = READ(A(5, A(2, S("1-0"), A(4, S("data"), REP('x', 2000), S("k"), S("v"))),
                       A(2, S("2-0"), A(4, S("data"), REP('y', 1500), S("h"), REP('z', 2000))),
                       A(2, S("3-0"), many),
                       A(3, S("4-0"), A(2, S("data"), REP('w', 1024)), A(2, I(5000), I(70000))),
                       A(5, S("5-0"), A(2, S("data"), S("{}")), I(7), I(2), A(2, S("9"), S("9")))));
  const char *keys[] = {"s"};
  struct entry *list = NULL;
  size_t count = 0;
  char err[256] = "";
  ASSERT_OK(read_reply_parse_streams(r, keys, 1, 1500, &list, &count, NULL, err, sizeof err));
  rfree(r);
  ASSERT_INT_EQ(count, 5);
  struct entry *e = list; /* the body over max_body: cut to its first 1024 bytes */
  ASSERT_INT_EQ(e->body_size, 2000);
  ASSERT_INT_EQ(e->entry_size, 4 + 2000 + 1 + 1 + 2 * ENTRY_PAIR_COST);
  ASSERT_INT_EQ(e->field_len[1], ENTRY_CUT_KEEP);
  expect_field(e, "k", "v");
  e = e->next; /* at max_body, a header of 2000 bytes: whole */
  ASSERT_INT_EQ(e->entry_size, 0);
  ASSERT_INT_EQ(e->field_len[1], 1500);
  ASSERT_INT_EQ(e->field_len[3], 2000);
  e = e->next; /* 70 headers of 1000 bytes, over max_body + 64 KB: the first 64 */
  ASSERT_INT_EQ(e->body_size, 0);
  ASSERT_INT_EQ(e->entry_size, 70 * (1001 + ENTRY_PAIR_COST));
  ASSERT_INT_EQ(e->nfields, 2 * ENTRY_CUT_PAIRS);
  ASSERT_INT_EQ(e->field_len[1], 1000);
  e = e->next; /* cut by the script: its sizes */
  ASSERT_INT_EQ(e->body_size, 5000);
  ASSERT_INT_EQ(e->entry_size, 70000);
  ASSERT_INT_EQ(e->field_len[1], 1024);
  e = e->next; /* claimed and cut: idle, deliveries, sizes */
  ASSERT_INT_EQ(e->idle_ms, 7);
  ASSERT_INT_EQ(e->deliveries, 2);
  ASSERT_INT_EQ(e->body_size, 9);
  ASSERT_INT_EQ(e->entry_size, 9);
  ASSERT_NULL(e->next);
  free_all(list);
  LEAK_CHECK();
}

TEST_IMPL(entry_parse_claim_integers) {
  /* 8.4 GA: `[id, fields, idle, count]` with RESP integers (7.3). */
  struct entry *list = parse_ok(READ(A(2, A(4, S("1-0"), A(2, S("f"), S("v1")), I(103), I(1)),
                                       A(4, S("2-0"), A(2, S("f"), S("v2")), I(0), I(0)))),
                                2, 0);
  ASSERT_STR_EQ(list->id, "1-0");
  expect_field(list, "f", "v1");
  ASSERT_INT_EQ(list->idle_ms, 103);
  ASSERT_INT_EQ(list->deliveries, 1);
  ASSERT_STR_EQ(list->next->id, "2-0");
  expect_field(list->next, "f", "v2");
  ASSERT_INT_EQ(list->next->idle_ms, 0);
  ASSERT_INT_EQ(list->next->deliveries, 0);
  free_all(list);
  LEAK_CHECK();
}

TEST_IMPL(entry_parse_claim_strings) {
  /* 8.4 release candidates sent idle and count as bulk strings. */
  struct entry *list =
      parse_ok(READ(A(2, A(4, S("1-0"), A(2, S("f"), S("v1")), S("287341"), S("22")),
                      A(4, S("9223372036854775807-1"), A(0), S("0"), S("0")))),
               2, 0);
  ASSERT_INT_EQ(list->idle_ms, 287341);
  ASSERT_INT_EQ(list->deliveries, 22);
  ASSERT_STR_EQ(list->next->id, "9223372036854775807-1");
  ASSERT_INT_EQ(list->next->nfields, 0);
  ASSERT_INT_EQ(list->next->idle_ms, 0);
  ASSERT_INT_EQ(list->next->deliveries, 0);
  free_all(list);

  /* Limits, and a negative idle (server clock stepped back) read as 0. */
  list = parse_ok(READ(A(2, A(4, S("1-0"), A(0), S("9223372036854775807"), I(INT64_MAX)),
                         A(4, S("2-0"), A(0), I(-5), S("3")))),
                  2, 0);
  ASSERT(list->idle_ms == INT64_MAX);
  ASSERT(list->deliveries == INT64_MAX);
  ASSERT_INT_EQ(list->next->idle_ms, 0);
  ASSERT_INT_EQ(list->next->deliveries, 3);
  free_all(list);
  LEAK_CHECK();
}

TEST_IMPL(entry_parse_empty_replies) {
  /* Nil: nothing served, or BLOCK timed out. */
  ASSERT_NULL(parse_ok(NIL(), 0, 0));
  /* An empty array. */
  ASSERT_NULL(parse_ok(A(0), 0, 0));
  /* `*1 [key, *0]`: an empty history read, or 7.0's add-then-delete wake-up. */
  ASSERT_NULL(parse_ok(READ(A(0)), 0, 0));
  /* count, deleted and err may be left out. */
  struct entry *out = (struct entry *)&out;
  bk_reply *r = READ(A(0));
  ASSERT_OK(read_reply_parse_read(r, &out, NULL, NULL, NULL, 0));
  ASSERT_NULL(out);
  rfree(r);
  LEAK_CHECK();
}

TEST_IMPL(entry_parse_skips_deleted) {
  /* A history read where 2-0 was deleted but is still pending (6.2). */
  struct entry *list =
      parse_ok(READ(A(4, A(2, S("2-0"), NIL()), A(2, S("3-0"), A(2, S("c"), S("3"))),
                      A(2, S("4-0"), NIL()), A(2, S("5-0"), A(2, S("d"), S("4"))))),
               2, 2);
  ASSERT_STR_EQ(list->id, "3-0");
  expect_field(list, "c", "3");
  ASSERT_STR_EQ(list->next->id, "5-0");
  free_all(list);

  /* Only deleted entries: an empty list, all counted. */
  ASSERT_NULL(parse_ok(READ(A(1, A(2, S("2-0"), NIL()))), 0, 1));
  LEAK_CHECK();
}

/* ---- read_reply_parse_read: malformed replies ---- */

/* A good entry that the parser builds before it meets the bad one. */
static bk_reply *good(void) { return A(2, S("1-0"), A(2, S("data"), S("{}"))); }

TEST_IMPL(entry_parse_rejects_bad_top_level) {
  parse_fails(S("OK"), "reply is a string, expected an array or nil");
  parse_fails(I(3), "reply is an integer, expected an array or nil");
  parse_fails(STATUS("OK"), "reply is a status, expected an array or nil");
  parse_fails(NULL, "reply is missing, expected an array or nil");
  parse_fails(ERR("NOGROUP No such key 's' or consumer group 'g'"),
              "server replied with an error: NOGROUP No such key 's' or consumer group 'g'");
  parse_fails(A(2, A(2, S("s"), A(0)), A(2, S("t"), A(0))),
              "reply has 2 streams, expected at most 1");
  parse_fails(A(1, S("s")), "stream reply is a string, expected an array of key and entries");
  parse_fails(A(1, A(3, S("s"), A(0), A(0))),
              "stream reply has 3 elements, expected 2 (key, entries)");
  parse_fails(A(1, A(2, I(1), A(0))), "stream key is an integer, expected a string");
  parse_fails(A(1, A(2, S("s"), NIL())), "entry list is nil, expected an array");
  parse_fails(A(1, A(2, S("s"), S("1-0"))), "entry list is a string, expected an array");
}

TEST_IMPL(entry_parse_rejects_bad_entries) {
  parse_fails(READ(A(2, good(), S("2-0"))), "entry 1: is a string, expected an array");
  parse_fails(READ(A(2, good(), NIL())), "entry 1: is nil, expected an array");
  parse_fails(READ(A(2, good(), A(1, S("2-0")))),
              "entry 1: has 1 elements, expected 2 or 4 (with CLAIM), or 3 or 5 (cut by a script)");
  parse_fails(READ(A(2, good(), A(3, S("2-0"), A(0), I(1)))),
              "entry 1 (2-0): the sizes of a cut entry are an integer, expected [body, entry]");
  parse_fails(READ(A(2, good(), A(3, S("2-0"), A(0), A(2, I(1), I(-1))))),
              "entry 1 (2-0): the sizes of a cut entry are an array, expected [body, entry]");
  parse_fails(READ(A(2, good(), A(6, S("2-0"), A(0), I(1), I(1), I(1), I(1)))),
              "entry 1: has 6 elements, expected 2 or 4 (with CLAIM), or 3 or 5 (cut by a script)");
  parse_fails(READ(A(2, good(), A(2, I(2), A(0)))), "entry 1: id is an integer, expected a string");
  parse_fails(READ(A(2, good(), A(2, S("abc"), A(0)))), "entry 1: id \"abc\" is not a stream id");
  parse_fails(READ(A(2, good(), A(2, S("2-"), A(0)))), "entry 1: id \"2-\" is not a stream id");
  parse_fails(READ(A(2, good(), A(2, S(""), A(0)))), "entry 1: id \"\" is not a stream id");
  parse_fails(READ(A(2, good(), A(2, B("2-0\0", 4), A(0)))),
              "entry 1: id \"2-0\" is not a stream id");
  parse_fails(READ(A(2, good(), A(2, S("2-0"), S("f")))),
              "entry 1 (2-0): field list is a string, expected an array or nil");
  parse_fails(READ(A(4, good(), good(), good(), A(2, S("2-0"), A(3, S("a"), S("1"), S("b"))))),
              "entry 3 (2-0): field list has an odd number of items (3)");
  parse_fails(READ(A(2, good(), A(2, S("2-0"), A(2, S("a"), I(1))))),
              "entry 1 (2-0): value 0 is an integer, expected a string");
  parse_fails(READ(A(2, good(), A(2, S("2-0"), A(4, S("a"), S("1"), NIL(), S("2"))))),
              "entry 1 (2-0): field name 1 is nil, expected a string");
}

TEST_IMPL(entry_parse_rejects_bad_claim_numbers) {
  parse_fails(READ(A(2, good(), A(4, S("2-0"), A(0), S("12x"), I(1)))),
              "entry 1 (2-0): idle time \"12x\" is not an integer in range");
  parse_fails(READ(A(2, good(), A(4, S("2-0"), A(0), S(""), I(1)))),
              "entry 1 (2-0): idle time \"\" is not an integer in range");
  parse_fails(READ(A(2, good(), A(4, S("2-0"), A(0), S("+1"), I(1)))),
              "entry 1 (2-0): idle time \"+1\" is not an integer in range");
  parse_fails(READ(A(2, good(), A(4, S("2-0"), A(0), S(" 1"), I(1)))),
              "entry 1 (2-0): idle time \" 1\" is not an integer in range");
  parse_fails(READ(A(2, good(), A(4, S("2-0"), A(0), A(0), I(1)))),
              "entry 1 (2-0): idle time is an array, expected an integer");
  parse_fails(READ(A(2, good(), A(4, S("2-0"), A(0), I(5), NIL()))),
              "entry 1 (2-0): delivery count is nil, expected an integer");
  parse_fails(READ(A(2, good(), A(4, S("2-0"), A(0), I(5), S("99999999999999999999")))),
              "entry 1 (2-0): delivery count \"99999999999999999999\" is not an integer in range");
  parse_fails(READ(A(2, good(), A(4, S("2-0"), A(0), I(5), S("-1")))),
              "entry 1 (2-0): delivery count -1 is negative");
  parse_fails(READ(A(2, good(), A(4, S("2-0"), A(0), I(5), I(-2)))),
              "entry 1 (2-0): delivery count -2 is negative");
}

TEST_IMPL(entry_parse_out_of_memory) {
  /* A value whose copy cannot be sized (it would overflow size_t) fails
   * like an allocation: "out of memory", and the entries already built are
   * freed. The reply is never read past its real bytes: the size check comes
   * before any copy. */
  bk_reply *r = READ(A(2, good(), A(2, S("2-0"), A(2, S("data"), S("x")))));
  r->element[0]->element[1]->element[1]->element[1]->element[1]->len = SIZE_MAX - 1;
  struct entry *out = (struct entry *)&out;
  size_t count = 99, deleted = 99;
  char err[64];
  ASSERT_INT_EQ(read_reply_parse_read(r, &out, &count, &deleted, err, sizeof err), -1);
  ASSERT_STR_EQ(err, "out of memory");
  ASSERT_NULL(out);
  ASSERT_INT_EQ(count, 0);
  r->element[0]->element[1]->element[1]->element[1]->element[1]->len = 1;
  rfree(r);
  LEAK_CHECK();
}

TEST_IMPL(entry_parse_error_text_is_bounded) {
  /* A short err buffer gets a truncated, terminated reason; none is fine too. */
  char err[12];
  struct entry *out;
  bk_reply *r = READ(A(1, A(2, S("2-0"), A(1, S("a")))));
  ASSERT_INT_EQ(read_reply_parse_read(r, &out, NULL, NULL, err, sizeof err), -1);
  ASSERT_STR_EQ(err, "entry 0 (2-");
  ASSERT_INT_EQ(read_reply_parse_read(r, &out, NULL, NULL, NULL, 0), -1);
  ASSERT_NULL(out);
  rfree(r);
  /* Long ids and values are quoted only in part. */
  char longid[200];
  memset(longid, '7', sizeof longid - 1);
  longid[sizeof longid - 1] = '\0';
  char big[256];
  r = READ(A(1, A(2, S(longid), A(1, S("a")))));
  ASSERT_INT_EQ(read_reply_parse_read(r, &out, NULL, NULL, big, sizeof big), -1);
  ASSERT(strlen(big) < 120);
  ASSERT_CONTAINS(big, "is not a stream id");
  rfree(r);
  LEAK_CHECK();
}

/* A freed entry's block is cut again for the next entry of its size class:
 * a host in steady state reads without malloc. Larger ones are not kept. */
TEST_IMPL(entry_blocks_reused) {
  struct entry *a = mk_entry("1-1", "data", "{\"amount_cents\":100}", NULL);
  ASSERT_NOT_NULL(a);
  void *block = a;
  entry_free(a);
  struct entry *b =
      mk_entry("2-1", "data", "{\"amount_cents\":200}", "partition-key", "acme", NULL);
  ASSERT(b == block);
  ASSERT_STR_EQ(b->id, "2-1");
  ASSERT_INT_EQ(b->nfields, 4);
  ASSERT_STR_EQ(entry_get(b, "partition-key", NULL), "acme");
  ASSERT_INT_EQ(b->deliveries, -1);
  entry_free(b);
  entry_pool_trim();
  LEAK_CHECK();
}
