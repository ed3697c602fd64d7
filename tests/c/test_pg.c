/* Tests for pg.c and pg_pool.c's pure parts: connection settings as
 * messages show them (never the password), the start of a query named in
 * errors, the SQLSTATE a failure's text starts with, values from
 * PostgreSQL's text by type, numbers as parameters, and
 * the server-side timeout below the client's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "pg.h"
#include "pg_pool.h"
#include "pg_prune.h"
#include "task.h"

static char out[512];

static const char *redact(const char *s) { return pg_redact(s, out, sizeof out); }

TEST_IMPL(pg_redact_hides_every_password) {
  ASSERT_STR_EQ(redact("postgresql://ls:sekret@db:5432/app"), "postgresql://ls:***@db:5432/app");
  ASSERT_STR_EQ(redact("postgres://ls:se%40cret@db/app?sslmode=require"),
                "postgres://ls:***@db/app?sslmode=require");
  ASSERT_STR_EQ(redact("postgresql://ls@db/app?password=sekret&sslmode=disable"),
                "postgresql://ls@db/app?password=***&sslmode=disable");
  ASSERT_STR_EQ(redact("postgresql://db/app"), "postgresql://db/app");
  ASSERT_STR_EQ(redact("host=db password=sekret dbname=app"), "host=db password=*** dbname=app");
  ASSERT_STR_EQ(redact("host=db password = 'se cr\\'et' user=ls"), "host=db password=*** user=ls");
  ASSERT_STR_EQ(redact("password=sekret"), "password=***");
  ASSERT_STR_EQ(redact("host=db passwordx=1"), "host=db passwordx=1");
  /* the client key's passphrase too */
  ASSERT_STR_EQ(redact("host=db sslpassword=k3y sslkey=/k"), "host=db sslpassword=*** sslkey=/k");
  ASSERT_STR_EQ(redact("postgresql://db/app?sslpassword=k3y&sslmode=require"),
                "postgresql://db/app?sslpassword=***&sslmode=require");
  ASSERT_STR_EQ(redact(""), "");
  /* cut short, still terminated and still without the password */
  char small[12];
  pg_redact("host=db password=sekret", small, sizeof small);
  ASSERT_STR_EQ(small, "host=db pas");
  ASSERT(strstr(redact("host=a password=sekret user=b password=other"), "sekret") == NULL);
  ASSERT(strstr(out, "other") == NULL);
}

TEST_IMPL(pg_sql_head_names_the_first_words) {
  char h[48];
  ASSERT_STR_EQ(pg_sql_head("  SELECT\n\t1", h, sizeof h), "SELECT 1");
  ASSERT_STR_EQ(
      pg_sql_head("INSERT INTO ledger (id, amount) VALUES ($1, $2) ON CONFLICT DO NOTHING", h, 32),
      "INSERT INTO ledger (id, ...");
  ASSERT(strlen(h) < 32);
  ASSERT_STR_EQ(pg_sql_head("", h, sizeof h), "");
}

/* Found by fuzz_pg_conninfo: below 5 bytes " ..." was written past the end. */
TEST_IMPL(pg_sql_head_fits_a_small_buffer) {
  for (size_t max = 1; max <= 6; max++) {
    char *h = malloc(max); /* exact size: ASan sees a write past it */
    ASSERT_NOT_NULL(h);
    pg_sql_head("SELECT 1", h, max);
    ASSERT(strlen(h) < max);
    free(h);
  }
}

TEST_IMPL(pg_sqlstate_of_reads_the_code_a_failure_starts_with) {
  char st[6] = "junk";
  ASSERT(pg_sqlstate_of("23505: duplicate key value (INSERT ...)", st));
  ASSERT_STR_EQ(st, "23505");
  ASSERT(pg_sqlstate_of("42P01: relation \"x\" does not exist (SELECT ...)", st));
  ASSERT_STR_EQ(st, "42P01");
  ASSERT(pg_sqlstate_of("08006: the connection was lost (BEGIN)", st));
  ASSERT_STR_EQ(st, "08006");
  /* not a code: "" and false */
  const char *no[] = {"ls.pg: no query was made",
                      "2350: short",
                      "23505 no colon",
                      "23505:x",
                      "2350a: lower case",
                      "",
                      NULL};
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
    memcpy(st, "junk", 5);
    ASSERT(!pg_sqlstate_of(no[i], st));
    ASSERT_STR_EQ(st, "");
  }
}

static struct pg_value v;
static char buf[256];

static void from(uint32_t oid, const char *text) {
  pg_value_from_text(oid, text, strlen(text), buf, &v);
}

static void assert_number(uint32_t oid, const char *text, double want) {
  from(oid, text);
  ASSERT_INT_EQ(v.kind, PG_VALUE_NUMBER);
  ASSERT(v.number == want);
}

static void assert_string(uint32_t oid, const char *text, const char *want) {
  from(oid, text);
  ASSERT_INT_EQ(v.kind, PG_VALUE_STRING);
  ASSERT_MEM_EQ(v.str, v.len, want);
}

TEST_IMPL(pg_values_integers_exact_or_strings) {
  assert_number(20, "42", 42);
  assert_number(21, "-32768", -32768);
  assert_number(23, "0", 0);
  assert_number(20, "9007199254740992", 9007199254740992.0);
  assert_number(20, "-9007199254740992", -9007199254740992.0);
  assert_string(20, "9007199254740993", "9007199254740993");
  assert_string(20, "-9223372036854775808", "-9223372036854775808");
  assert_number(1700, "123", 123);
  assert_string(1700, "1.50", "1.50");
  assert_string(1700, "12345678901234567890", "12345678901234567890");
  assert_string(1700, "NaN", "NaN");
}

TEST_IMPL(pg_values_floats_booleans_text) {
  assert_number(701, "0.1", 0.1);
  assert_number(700, "-2.5", -2.5);
  assert_number(701, "1e+300", 1e300);
  from(701, "Infinity");
  ASSERT_INT_EQ(v.kind, PG_VALUE_NUMBER);
  ASSERT(isinf(v.number) && v.number > 0);
  from(701, "NaN");
  ASSERT(isnan(v.number));
  from(16, "t");
  ASSERT_INT_EQ(v.kind, PG_VALUE_BOOLEAN);
  ASSERT(v.boolean);
  from(16, "f");
  ASSERT(!v.boolean);
  assert_string(25, "it's", "it's");
  assert_string(3802, "{\"a\": 1}", "{\"a\": 1}");
  assert_string(2950, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
}

TEST_IMPL(pg_values_bytea_decoded) {
  from(17, "\\xdeadbeef00");
  ASSERT_INT_EQ(v.kind, PG_VALUE_STRING);
  ASSERT_INT_EQ((int)v.len, 5);
  ASSERT(memcmp(v.str, "\xde\xad\xbe\xef\x00", 5) == 0);
  from(17, "\\x");
  ASSERT_INT_EQ((int)v.len, 0);
  assert_string(17, "\\xzz", "\\xzz"); /* not hex: as the server wrote it */
}

TEST_IMPL(pg_values_timestamps_iso) {
  assert_string(1184, "2026-12-02 05:38:16.123+00", "2026-12-02T05:38:16.123Z");
  assert_string(1184, "2026-12-02 05:38:16+00", "2026-12-02T05:38:16Z");
  assert_string(1184, "2026-12-02 05:38:16+05:30", "2026-12-02T05:38:16+05:30");
  assert_string(1184, "2026-12-02 05:38:16-03", "2026-12-02T05:38:16-03:00");
  assert_string(1114, "2026-12-02 05:38:16.000001", "2026-12-02T05:38:16.000001");
  assert_string(1184, "0044-03-15 00:00:00+00 BC", "0044-03-15 00:00:00+00 BC");
  assert_string(1114, "infinity", "infinity");
  assert_string(1184, "-infinity", "-infinity");
  assert_string(1082, "2026-12-02", "2026-12-02");
  assert_string(1083, "05:38:16.5", "05:38:16.5");
}

TEST_IMPL(pg_numbers_as_parameters) {
  char n[64];
  pg_format_number(1e15, n, sizeof n);
  ASSERT_STR_EQ(n, "1000000000000000");
  pg_format_number(-42, n, sizeof n);
  ASSERT_STR_EQ(n, "-42");
  pg_format_number(9007199254740993.0, n, sizeof n); /* the double 2^53 */
  ASSERT_STR_EQ(n, "9007199254740992");
  pg_format_number(0.1, n, sizeof n);
  ASSERT_STR_EQ(n, "0.1");
  pg_format_number(0.1 + 0.2, n, sizeof n);
  ASSERT_STR_EQ(n, "0.30000000000000004");
  pg_format_number(1e300, n, sizeof n);
  ASSERT_STR_EQ(n, "1e+300");
  pg_format_number(INFINITY, n, sizeof n);
  ASSERT_STR_EQ(n, "Infinity");
  pg_format_number(NAN, n, sizeof n);
  ASSERT_STR_EQ(n, "NaN");
  pg_format_number(-9223372036854775808.0, n, sizeof n); /* int8's least */
  ASSERT_STR_EQ(n, "-9223372036854775808");
}

TEST_IMPL(pg_statement_timeout_below_the_deadline) {
  ASSERT(pg_statement_timeout(10000) == 9000);
  ASSERT(pg_statement_timeout(100000) == 99000);
  ASSERT(pg_statement_timeout(1000) == 900);
  ASSERT(pg_statement_timeout(50) > 0 && pg_statement_timeout(50) < 50);
  ASSERT(pg_statement_timeout(1) == 1);
}

TEST_IMPL(pg_prune_period_a_quarter_within_bounds) {
  ASSERT(pg_prune_period(2000) == 1000);
  ASSERT(pg_prune_period(8000) == 2000);
  ASSERT(pg_prune_period(720ULL * 3600000) == 3600000);
}

TEST_IMPL(pg_bad_settings_never_quote_a_password) {
  char err[512];
  /* libpq's own message would quote "cret" */
  struct pg_options o = {.conninfo = "host=db password=se cret"};
  ASSERT_NULL(pg_pool_new(uv_default_loop(), &o, err, sizeof err));
  ASSERT_STR_EQ(err,
                "invalid PostgreSQL settings \"host=db password=*** cret\": not a libpq "
                "connection string or postgresql:// URL");
  o.conninfo = "host=db dbname";
  ASSERT_NULL(pg_pool_new(uv_default_loop(), &o, err, sizeof err));
  ASSERT_CONTAINS(err, "invalid PostgreSQL settings: missing \"=\" after \"dbname\"");
}
