/* fuzz_pg_conninfo: pg_redact on any PostgreSQL connection string (keywords
 * or a postgres:// URL) and pg_sql_head on any SQL: the output is terminated
 * and within its size however the input is cut. */
#include "fuzz.h"
#include "pg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_strdup(data, size);
  size_t sizes[] = {1, 8, 64, 4096};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    char *out = malloc(sizes[i]);
    if (out == NULL) abort();
    const char *r = pg_redact(text, out, sizes[i]);
    FUZZ_CHECK(memchr(r, '\0', sizes[i]) != NULL, "pg_redact: not terminated in %zu", sizes[i]);
    r = pg_sql_head(text, out, sizes[i]);
    FUZZ_CHECK(memchr(r, '\0', sizes[i]) != NULL, "pg_sql_head: not terminated in %zu", sizes[i]);
    free(out);
  }
  /* with a password keyword or in a URL the secret is gone */
  static const char SECRET[] = "s3cr3tpw";
  char *with = malloc(size + 64);
  char out[8192];
  if (with == NULL) abort();
  snprintf(with, size + 64, "%s password=%s", text, SECRET);
  pg_redact(with, out, sizeof out);
  /* only when the input cannot have opened a quote that swallows the keyword */
  if (strpbrk(text, "'\\=") == NULL && strncmp(text, "postgres", 8) != 0 &&
      strstr(text, SECRET) == NULL)
    FUZZ_CHECK(strstr(out, SECRET) == NULL, "%s redacted as %s", with, out);
  free(with);
  free(text);
  return 0;
}
