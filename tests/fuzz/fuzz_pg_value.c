/* fuzz_pg_value: pg_value_from_text on any column text of each type it
 * converts (the first byte picks the type), within its buffer; and
 * pg_format_number on any double (the last 8 bytes): it reads back exact. */
#include <math.h>

#include "fuzz.h"
#include "pg.h"

static const uint32_t OIDS[] = {16, 17, 20, 21, 23, 26, 700, 701, 1114, 1184, 1700, 25};
#define NOIDS (sizeof OIDS / sizeof OIDS[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  uint32_t oid = OIDS[data[0] % NOIDS];
  /* libpq's values are NUL-terminated text without NUL bytes */
  char *text = fuzz_strdup(data + 1, size - 1);
  size_t len = strlen(text);
  char *buf = malloc(len + PG_VALUE_SLACK);
  if (buf == NULL) abort();
  struct pg_value v;
  pg_value_from_text(oid, text, len, buf, &v);
  switch (v.kind) {
    case PG_VALUE_STRING:
      FUZZ_CHECK(v.str == text ? v.len == len : v.str == buf && v.len <= len + PG_VALUE_SLACK,
                 "type %u: %zu bytes", oid, v.len);
      break;
    case PG_VALUE_NUMBER:
      if (oid != 700 && oid != 701)
        FUZZ_CHECK(v.number == floor(v.number) && fabs(v.number) <= 9007199254740992.0,
                   "type %u: %s -> %.17g", oid, text, v.number);
      break;
    case PG_VALUE_BOOLEAN: FUZZ_CHECK(oid == 16, "type %u made a boolean", oid); break;
  }
  free(buf);
  free(text);

  if (size >= 9) {
    double x;
    memcpy(&x, data + size - 8, sizeof x);
    char out[64];
    size_t n = pg_format_number(x, out, sizeof out);
    FUZZ_CHECK(n > 0 && n < sizeof out, "%zu bytes", n);
    double back = strtod(out, NULL);
    FUZZ_CHECK(isnan(x) ? isnan(back) : back == x && (signbit(back) == signbit(x) || x == 0),
               "%.17g written as %s", x, out);
  }
  return 0;
}
